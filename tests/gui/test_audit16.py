"""Audit of issue 16 (the editor as node-editor users expect it): what a hostile tester found,
each driven as a user would (real mouse and key events on the canvas) or through the Document
the canvas edits through."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from PySide6.QtCore import QMimeData, QPoint, Qt
from PySide6.QtWidgets import QApplication

from blockflow.gui.document.clipboard import FRAGMENT_MIME
from blockflow.gui.document.document import Document
from blockflow.io.project_io import dumps_project, load_project

from test_canvas import doc, make_view, view  # noqa: F401  (fixtures)

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_projects" / "stable_softmax.bflow.json"


def sample_doc() -> Document:
    return Document(load_project(SAMPLE), str(SAMPLE))


def drawn_where_saved(view, doc) -> None:
    """Every block is drawn where the document has it, and no other is drawn."""
    assert set(view.diagram_scene().node_items) == set(doc.page().nodes)
    for nid, node in doc.page().nodes.items():
        pos = view.node_item(nid).pos()
        assert (pos.x(), pos.y()) == tuple(node.position), nid


# ------------------------------------------------------------------ keys in the middle of a drag
@pytest.mark.parametrize("key,mods", [(Qt.Key_BracketRight, Qt.NoModifier), (Qt.Key_BracketLeft, Qt.NoModifier),
                                      (Qt.Key_A, Qt.ControlModifier), (Qt.Key_D, Qt.ControlModifier)])
def test_a_selection_key_while_a_block_is_dragged_moves_no_block_behind_the_documents_back(qtbot, key, mods):
    """Found: ] / [ / Ctrl+A / Ctrl+D pressed while a block was being dragged selected other blocks,
    which Qt then dragged from (0, 0): they were drawn piled near the page's corner while the
    document kept them where they were (and the move recorded only the first block)."""
    d = sample_doc()
    v = make_view(qtbot, d, size=(1400, 800))
    v.fit_to_view()
    QApplication.processEvents()
    start = dumps_project(d.project)
    vp = v.viewport()
    a = v.mapFromScene(v.node_item("Subtract_1").sceneBoundingRect().center()) + QPoint(0, -15)
    qtbot.mousePress(vp, Qt.LeftButton, Qt.NoModifier, a)
    qtbot.mouseMove(vp, a + QPoint(20, 30))
    qtbot.mouseMove(vp, a + QPoint(40, 60))
    v.setFocus()
    qtbot.keyClick(v, key, mods)
    qtbot.mouseMove(vp, a + QPoint(60, 90))
    qtbot.mouseRelease(vp, Qt.LeftButton, Qt.NoModifier, a + QPoint(60, 90))
    QApplication.processEvents()
    drawn_where_saved(v, d)
    while d.undo_stack.canUndo():
        d.undo_stack.undo()
    QApplication.processEvents()
    assert dumps_project(d.project) == start
    drawn_where_saved(v, d)


# ------------------------------------------------------------------ paste
def _far_fragment() -> str:
    """A fragment (as another program, or an old copy, may leave on the clipboard) whose wire's
    reroute point is far from its blocks: pasted at the cursor, the point lands past ±1e7."""
    head = json.loads(dumps_project(sample_doc().project))
    head.pop("pages")
    head.pop("composites", None)
    return json.dumps(dict(head, metadata={"fragment": True}, pages=[{
        "name": "fragment",
        "nodes": [{"id": "a", "block": "Tanh", "position": [-9e9, 0]},
                  {"id": "b", "block": "Tanh", "position": [0, 0]}],
        "edges": [{"from": "a:y", "to": "b:x"}],
        "reroutes": [{"from": "a:y", "to": "b:x", "points": [[9e6, 0]]}]}]))


def test_a_paste_whose_reroute_points_land_out_of_range_is_refused_whole_and_undo_still_works(qtbot, view, doc):
    """Found: the paste's macro was begun, its reroute-point command raised inside push, and the
    macro was never ended: the blocks stayed, Undo did nothing, and every later edit went into the
    open macro."""
    doc.add_node("Tanh", (0, 0), node_id="t")
    QApplication.processEvents()
    mime = QMimeData()
    mime.setData(FRAGMENT_MIME, _far_fragment().encode("utf-8"))
    QApplication.clipboard().setMimeData(mime)
    qtbot.mouseMove(view.viewport(), QPoint(400, 300))
    view.setFocus()
    qtbot.keyClick(view, Qt.Key_V, Qt.ControlModifier)
    QApplication.processEvents()
    assert list(doc.page().nodes) == ["t"]                   # nothing of it was added
    assert doc.undo_stack.count() == 1 and doc.undo_stack.index() == 1
    doc.add_node("Tanh", (300, 0), node_id="u")             # and the stack still takes steps
    assert doc.undo_stack.count() == 2
    doc.undo_stack.undo()
    assert list(doc.page().nodes) == ["t"]
    QApplication.clipboard().clear()
