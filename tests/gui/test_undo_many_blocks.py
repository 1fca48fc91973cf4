"""Deleting or pasting many blocks on a page of many wires, and undoing and redoing it: each is one
pass over the page, whatever the number of blocks (blockflow/page_blocks.py). Found: each block
deleted, pasted or put back looked through all the page's wires (and its place through all its
blocks), so undoing the delete of 500 blocks on a page of 20,000 wires took 2.7 s, and 10,000 on
100,000 wires would take hours.

The work is counted, not timed: every read of a wire's source is tallied, and a step may read each
wire of the page a few times, never once per block. The results are compared with what the old
block-at-a-time mutators make of the same page, and the canvas is checked to follow."""
from __future__ import annotations

import json

import numpy as np
import pytest
from PySide6.QtCore import QMimeData, QPoint, Qt
from PySide6.QtWidgets import QApplication

from blockflow.gui.document.clipboard import FRAGMENT_MIME
from blockflow.gui.document.document import Document
from blockflow.page_layout import Frame
from blockflow.project import Edge, Page

from test_canvas import make_view

WIRES = 20_000           # on the page already: a quadratic step would read 20,000 x BLOCKS of them
BLOCKS = 1_000


@pytest.fixture
def reads(monkeypatch):
    """A tally of the reads of wires' sources (``Edge.src``), the field every search of wires reads."""
    tally = [0]
    get = Edge.__dict__["src"].__get__

    def src(edge):
        tally[0] += 1
        return get(edge)
    monkeypatch.setattr(Edge, "src", property(src))
    return tally


def _busy_page(doc: Document) -> list:
    """The document's page with WIRES wires between two hubs and BLOCKS blocks, each wired to a
    hub; the blocks' ids."""
    page = doc.page()
    page.add_node("Tanh", id="a")
    page.add_node("AddN", id="z", position=(400.0, 0.0))
    page.edges.extend(Edge("a", "y", "z", f"inputs[{i}]") for i in range(WIRES))
    ids = [page.add_node("Tanh", id=f"b{i}", position=(0.0, 100.0 + i)).id for i in range(BLOCKS)]
    page.edges.extend(Edge("a", "y", nid, "x") for nid in ids)
    doc.undo_stack.clear()
    return ids


def _state(page: Page) -> tuple:
    """Everything of a page, in order (Page's == leaves the order of wires and feeds out)."""
    return (list(page.nodes.items()), list(page.edges), [(k, v.tolist()) for k, v in page.feeds.items()],
            list(page.bends.items()), page.loss, list(page.metrics), list(page.frames))


def _step(reads, action) -> int:
    before = reads[0]
    action()
    return reads[0] - before


def test_deleting_many_blocks_and_undoing_and_redoing_reads_each_wire_a_few_times(qapp, reads):
    doc = Document()
    ids = _busy_page(doc)
    start = _state(doc.page())
    total = WIRES + BLOCKS
    cost = {"delete": _step(reads, lambda: doc.remove_nodes(ids))}
    deleted = _state(doc.page())
    assert len(doc.page().nodes) == 2 and len(doc.page().edges) == WIRES
    cost["undo"] = _step(reads, doc.undo_stack.undo)
    assert _state(doc.page()) == start
    cost["redo"] = _step(reads, doc.undo_stack.redo)
    assert _state(doc.page()) == deleted
    cost["undo again"] = _step(reads, doc.undo_stack.undo)
    assert _state(doc.page()) == start
    assert all(n <= 4 * total for n in cost.values()), cost       # block at a time: 20,000,000 and more


def _fragment(n: int) -> str:
    """A chain of ``n`` Placeholder -> Tanh pairs, each Placeholder with a saved feed and each wire
    with a reroute point."""
    nodes, edges, bends, feeds = [], [], [], {}
    for i in range(n):
        nodes += [{"id": f"p{i}", "block": "Placeholder", "attrs": {"shape": [2]}, "position": [0, 60 * i]},
                  {"id": f"t{i}", "block": "Tanh", "position": [200, 60 * i]}]
        edges.append({"from": f"p{i}:output", "to": f"t{i}:x"})
        bends.append({"from": f"p{i}:output", "to": f"t{i}:x", "points": [[100, 60 * i + 30]]})
        feeds[f"p{i}"] = {"dtype": "float32", "shape": [2], "data": [i, -i]}
    return json.dumps({"format": "blockflow-project", "version": 2, "metadata": {"fragment": True},
                       "pages": [{"name": "fragment", "nodes": nodes, "edges": edges, "feeds": feeds,
                                  "reroutes": bends}]})


def test_pasting_many_blocks_and_undoing_and_redoing_reads_each_wire_a_few_times(qapp, reads):
    doc = Document()
    _busy_page(doc)
    start = _state(doc.page())
    text = _fragment(BLOCKS // 2)
    cost = {"paste": _step(reads, lambda: doc.paste_fragment(text, (1000.0, 0.0)))}
    pasted = _state(doc.page())
    page = doc.page()
    assert len(page.nodes) == 2 + 2 * BLOCKS and len(page.bends) == BLOCKS // 2
    assert list(page.feeds)[-1] == f"p{BLOCKS // 2 - 1}" and np.array_equal(page.feeds["p3"], [3, -3])
    cost["undo"] = _step(reads, doc.undo_stack.undo)
    assert _state(doc.page()) == start
    cost["redo"] = _step(reads, doc.undo_stack.redo)
    assert _state(doc.page()) == pasted
    assert all(n <= 4 * (WIRES + 2 * BLOCKS) for n in cost.values()), cost


def _rich_page() -> Page:
    """Blocks with everything that can name them: wires with reroute points, feeds, the loss,
    metrics, frames (one to be left empty)."""
    page = Page("p")
    for i in range(8):
        page.add_node("Placeholder" if i % 2 else "Tanh", id=f"n{i}", position=(i * 100.0, 0.0))
    for i in range(7):
        page.connect(f"n{i}", "output", f"n{i + 1}", "x")
    page.connect("n0", "output", "n5", "y")
    page.bends = {Edge("n2", "output", "n3", "x"): ((1.0, 2.0),), Edge("n5", "output", "n6", "x"): ((3.0, 4.0),)}
    page.feeds = {f"n{i}": np.array([float(i)]) for i in (7, 1, 5, 3)}
    page.loss = "n3:output"
    page.metrics = ["n1", "n6:output", "n3"]
    page.frames = [Frame("A", blocks=("n3", "n5")), Frame("B", blocks=("n1", "n2", "n6")), Frame("C", blocks=("n0",))]
    return page


@pytest.mark.parametrize("gone", [["n3", "n5"], ["n0", "n2", "n6"], ["n7"], [f"n{i}" for i in range(8)]])
def test_blocks_taken_off_at_once_leave_what_one_at_a_time_left_and_come_back_exactly(gone):
    one, batch = _rich_page(), _rich_page()
    for edge in [e for e in one.edges if e.src in gone or e.dst in gone]:   # how Delete used to do it
        one.remove_edge(edge)
    for nid in gone:
        one.remove_node(nid)
    removed = batch.remove_blocks(gone).before
    assert _state(batch) == _state(one) and batch == one
    batch.insert_blocks(removed)
    assert _state(batch) == _state(_rich_page())


def test_blocks_that_cannot_be_put_back_are_refused_before_anything_changes():
    from blockflow.errors import ProjectError
    from blockflow.page_blocks import Blocks
    page = _rich_page()
    removed = page.remove_blocks(["n3"]).before
    page.add_node("Tanh", id="n3")                 # the id is taken meanwhile
    state = _state(page)
    with pytest.raises(ProjectError, match="already has a node 'n3'"):
        page.insert_blocks(removed)
    assert _state(page) == state
    with pytest.raises(ProjectError, match="has no node 'q'"):
        page.insert_blocks(Blocks(((9, page.nodes["n3"].__class__("w", "Tanh")),),
                                  ((0, Edge("q", "output", "w", "x")),)))
    with pytest.raises(ProjectError, match="has no node 'nope'"):
        page.remove_blocks(["n1", "nope"])
    assert _state(page) == state


def _ctrl(qtbot, widget, key, text: str | None = None) -> None:
    if text is not None:
        mime = QMimeData()
        mime.setData(FRAGMENT_MIME, text.encode("utf-8"))
        QApplication.clipboard().setMimeData(mime)
        qtbot.mouseMove(widget.viewport(), QPoint(400, 300))
    widget.setFocus()
    qtbot.keyClick(widget, key, Qt.ControlModifier)
    QApplication.processEvents()


def test_the_canvas_follows_a_paste_its_delete_and_their_undo_and_redo(qtbot, qapp):
    """Through the keys: Ctrl+V, Delete, and the undo stack back and forth; the canvas draws what
    the page holds after each step (the blocks of one edit are now announced after it is made)."""
    doc = Document()
    page = doc.page()
    page.add_node("Tanh", id="a")
    page.add_node("AddN", id="z", position=(400.0, 0.0))
    page.connect("a", "y", "z", "inputs[0]")
    view = make_view(qtbot, doc)
    scene = view.scene()

    def drawn():
        assert set(scene.node_items) == set(doc.page().nodes)
        assert set(scene.edge_items) == set(doc.page().edges)
        return len(scene.node_items)

    assert drawn() == 2
    _ctrl(qtbot, view, Qt.Key_V, _fragment(40))
    assert drawn() == 82 and len(view.selected_nodes()) == 80
    qtbot.keyClick(view, Qt.Key_Delete)
    assert drawn() == 2
    for step, expected in ((doc.undo_stack.undo, 82), (doc.undo_stack.undo, 2), (doc.undo_stack.redo, 82),
                           (doc.undo_stack.redo, 2), (doc.undo_stack.undo, 82)):
        step()
        QApplication.processEvents()
        assert drawn() == expected


def test_the_reroute_points_are_redrawn_once_per_edit_not_once_per_block(qtbot, qapp, monkeypatch):
    """Found: on a page with reroute points, the canvas redrew all of them for every block and
    wire an edit added or took off: pasting 1,000 blocks on a page of 200 points took 13 s, and so
    did its undo and its redo."""
    from blockflow.gui.canvas.layout_layer import CanvasLayout

    doc = Document()
    page = doc.page()
    for i in range(20):
        page.add_node("Tanh", id=f"s{i}", position=(0.0, 60.0 * i))
        page.add_node("Tanh", id=f"d{i}", position=(300.0, 60.0 * i))
        page.bends[page.connect(f"s{i}", "y", f"d{i}", "x")] = ((150.0, 60.0 * i + 10),)
    view = make_view(qtbot, doc)
    layer = view.canvas_layout
    syncs = []
    real = CanvasLayout.sync
    monkeypatch.setattr(CanvasLayout, "sync", lambda self: syncs.append(1) or real(self))

    def drawn():
        assert {(h.edge, h.index) for h in layer.handles.values()} == \
            {(e, i) for e, points in doc.page().bends.items() for i in range(len(points))}
        return len(layer.handles)

    _ctrl(qtbot, view, Qt.Key_V, _fragment(50))           # 100 blocks, 50 wires, 50 more points
    assert drawn() == 70 and len(syncs) == 1, len(syncs)
    for step, expected in ((doc.undo_stack.undo, 20), (doc.undo_stack.redo, 70)):
        step()
        assert drawn() == expected
    assert len(syncs) == 3, len(syncs)                     # one a step: was one a block and a wire
