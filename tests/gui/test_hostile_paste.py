"""Hostile clipboard: whatever text is on the clipboard, Ctrl+V on the canvas either pastes a
valid fragment as one undo step or says in the status bar why not, and leaves the undo stack
taking steps. Driven through real key events on a DiagramView."""
from __future__ import annotations

import json

import pytest
from PySide6.QtCore import QMimeData, QPoint, Qt
from PySide6.QtWidgets import QApplication

from blockflow.gui.document.clipboard import FRAGMENT_MIME
from blockflow.io.project_io import dumps_project, loads_project
from blockflow.project import Page, fresh_id, valid_node_id

from test_canvas import doc, make_view, view  # noqa: F401  (fixtures)


def fragment(nodes, edges=()) -> str:
    return json.dumps({"format": "blockflow-project", "version": 2, "metadata": {"fragment": True},
                       "pages": [{"name": "fragment", "nodes": nodes, "edges": list(edges)}]})


def ctrl_v(qtbot, view, text: str) -> list[str]:
    """Put ``text`` on the clipboard as a fragment, press Ctrl+V over the canvas; the status
    messages shown."""
    said = []
    view.status_message.connect(said.append)
    mime = QMimeData()
    mime.setData(FRAGMENT_MIME, text.encode("utf-8"))
    QApplication.clipboard().setMimeData(mime)
    qtbot.mouseMove(view.viewport(), QPoint(400, 300))
    view.setFocus()
    qtbot.keyClick(view, Qt.Key_V, Qt.ControlModifier)
    QApplication.processEvents()
    QApplication.clipboard().clear()
    return said


def test_a_block_name_that_makes_no_id_is_pasted_under_a_valid_id_and_undoes_in_one_step(qtbot, view, doc):
    """Found: a fragment node of an unknown block named "my block!" whose id was taken on the page
    was renamed "my block!_1", which the page refused inside the paste's undo macro: the macro was
    never ended (Undo did nothing, every later edit went into it) and the blocks before it stayed."""
    doc.add_node("Tanh", (0, 0), node_id="a")
    QApplication.processEvents()
    start = dumps_project(doc.project)
    said = ctrl_v(qtbot, view, fragment([{"id": "b", "block": "Tanh"}, {"id": "a", "block": "my block!"}]))
    assert said[-1] == "pasted 2 block(s)"
    added = [n for n in doc.page().nodes if n != "a"]
    assert added == ["b", "my_block__1"] and all(valid_node_id(n) for n in added)
    assert doc.undo_stack.count() == 2 and doc.undo_stack.index() == 2    # one step, and closed
    loads_project(dumps_project(doc.project))                          # and it saves and reopens
    doc.undo_stack.undo()
    assert dumps_project(doc.project) == start
    doc.add_node("Tanh", (300, 0), node_id="u")                        # the stack still takes steps
    assert doc.undo_stack.index() == 2


def test_duplicating_a_block_whose_name_makes_no_id_gives_a_valid_id(qtbot, view, doc):
    """The same through Ctrl+D on a block of a file (an unknown block named with a space)."""
    loaded = loads_project(fragment([{"id": "a", "block": "Old Block"}]))
    doc.page().insert_node(loaded.pages[0].nodes["a"])
    doc.undo_stack.clear()
    assert doc.duplicate(["a"]) == ["Old_Block_1"]
    assert doc.undo_stack.count() == 1 and doc.undo_stack.undoText() == "Paste 1 block"


@pytest.mark.parametrize("block,taken,expected", [("Tanh", {"Tanh_1"}, "Tanh_2"), ("@Dense", set(), "Dense_1"),
                                                  ("1x", set(), "_1x_1"), ("a\u00e9b", set(), "a_b_1"),
                                                  ("@", set(), "Block_1")])
def test_fresh_ids_are_valid_ids(block, taken, expected):
    assert fresh_id(block, taken) == expected
    assert Page("p").new_id(block) == fresh_id(block, set())


def test_a_fragment_whose_blocks_lie_1e308_apart_is_refused_not_pasted_at_infinity(qtbot, view, doc):
    """Found: two blocks at x = -1.7e308 and 1.7e308, pasted with the first at the cursor, put
    the second at x = inf: the project could then not be saved (nor autosaved) until that block,
    drawn nowhere, was found and moved."""
    doc.add_node("Tanh", (0, 0), node_id="t")
    QApplication.processEvents()
    said = ctrl_v(qtbot, view, fragment([{"id": "p", "block": "Tanh", "position": [-1.7e308, 0]},
                                         {"id": "q", "block": "Tanh", "position": [1.7e308, 0]}]))
    assert said[-1].startswith("cannot paste: the fragment's block 'q' would land at (inf, ")
    assert list(doc.page().nodes) == ["t"] and doc.undo_stack.index() == doc.undo_stack.count() == 1


@pytest.mark.parametrize("text,says", [
    ("x" * 100_000, "not valid JSON"),
    ("[" * 100_000, "nest"),
    (json.dumps({"format": "blockflow-project", "version": 2, "pages": []}), "at least one page"),
    (json.dumps({"not": "a fragment"}), "not a blockflow project"),
    (fragment([{"id": "1bad", "block": "Tanh"}]), "not a valid node id"),
])
def test_text_that_is_no_fragment_is_refused_with_where_and_what(qtbot, view, doc, text, says):
    doc.add_node("Tanh", (0, 0), node_id="t")
    said = ctrl_v(qtbot, view, text)
    assert said[-1].startswith("cannot paste: <clipboard>") and says in said[-1], said[-1]
    assert list(doc.page().nodes) == ["t"] and doc.undo_stack.index() == doc.undo_stack.count() == 1



class _Id(str):
    """A block id that counts the comparisons made with it: a search of the page's list of ids
    compares it with each id it passes."""

    compared = 0

    def __eq__(self, other):
        _Id.compared += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


def _undo_last_adds(monkeypatch, n: int, k: int = 2000) -> tuple[int, int]:
    """The comparisons of block ids, and of wires, made to take the last ``k`` of ``n`` blocks
    off a page, and the last ``k`` of ``n`` wires off another, as the undo of a paste does (last
    first)."""
    from call_counts import Calls

    from blockflow.project import Edge, Node
    blocks, wires = Page("p"), Page("q")
    for i in range(n):
        blocks.insert_node(Node(_Id(f"n{i}"), "Tanh"))
    wires.insert_node(Node("a", "Tanh"))
    wires.edges = [Edge("a", "y", "a", f"x{i}") for i in range(n)]
    _Id.compared = 0
    compared = Calls(monkeypatch, Edge, "__eq__")
    for i in range(n - 1, n - 1 - k, -1):
        blocks.remove_node(f"n{i}")
        wires.remove_edge(wires.edges[-1])
    monkeypatch.undo()
    return _Id.compared, compared.n


def test_undoing_a_huge_paste_takes_time_linear_in_its_size(monkeypatch):
    """Found: undoing a paste of 32,000 blocks took 17 s (2 s to paste them): each block and
    wire taken off searched the whole page for its index, though the undo takes the last first.
    Counted, not timed: taking the last 2,000 off a page of 100,000 compares as many ids and
    wires as on one of 6,250 (a search of the page compares each with every one before it)."""
    small = _undo_last_adds(monkeypatch, 6_250)
    big = _undo_last_adds(monkeypatch, 100_000)
    # a few comparisons of its id per block (3, whatever the page's size), one per wire (is it
    # the last?)
    assert small == big == (3 * 2000, 2000), (small, big)


def _blocks(n: int, prefix: str = "b") -> list:
    return [{"id": f"{prefix}{i}", "block": "Tanh", "position": [i * 200.0, 0.0]} for i in range(n)]


@pytest.fixture
def limit_50(monkeypatch):
    """The blocks a page may hold (io.rules.MAX_NODES_PER_PAGE, 200,000), made 50 for a fast test."""
    from blockflow.io import rules
    monkeypatch.setattr(rules, "MAX_NODES_PER_PAGE", 50)


def _page_of(doc, n: int) -> str:
    for i in range(n):
        doc.add_node("Tanh", (i * 200.0, 400.0), node_id=f"h{i}")
    doc.undo_stack.clear()
    QApplication.processEvents()
    return dumps_project(doc.project)


def test_a_fragment_that_would_take_the_page_past_the_block_limit_is_refused_before_anything_is_added(
        qtbot, view, doc, limit_50):
    """Found: paste counted no blocks, so a fragment under the limit landed on a page that already
    had blocks: 150,000 pasted onto 100,000 made a page of 250,000, which Save then refused (and
    the fragment was added block by block first)."""
    start = _page_of(doc, 30)
    said = ctrl_v(qtbot, view, fragment(_blocks(21)))
    assert said[-1] == ("cannot paste: the fragment's 21 blocks would make 51 on page 'main' (it has 30); "
                        "the limit is 50 blocks on a page"), said
    assert dumps_project(doc.project) == start and doc.undo_stack.count() == 0
    assert len(view.scene().node_items) == 30
    said = ctrl_v(qtbot, view, fragment(_blocks(20)))          # up to the limit: pasted
    assert said[-1] == "pasted 20 block(s)" and len(doc.page().nodes) == 50
    loads_project(dumps_project(doc.project))                  # and the page saves


def test_a_fragment_past_the_limit_by_itself_is_refused_with_its_size(qtbot, view, doc, limit_50):
    start = _page_of(doc, 0)
    said = ctrl_v(qtbot, view, fragment(_blocks(51)))
    assert said[-1] == "cannot paste: <clipboard> at pages[0].nodes: 51 nodes on one page; the limit is 50", said
    assert dumps_project(doc.project) == start and doc.undo_stack.count() == 0


def test_duplicating_past_the_block_limit_is_refused_in_the_status_bar(qtbot, view, doc, limit_50):
    start = _page_of(doc, 30)
    said = []
    view.status_message.connect(said.append)
    view.select_nodes([f"h{i}" for i in range(21)])
    view.setFocus()
    qtbot.keyClick(view, Qt.Key_D, Qt.ControlModifier)
    assert said[-1] == ("cannot duplicate: the fragment's 21 blocks would make 51 on page 'main' (it has 30); "
                        "the limit is 50 blocks on a page"), said
    assert dumps_project(doc.project) == start and doc.undo_stack.count() == 0
