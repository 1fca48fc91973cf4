"""Putting a block into a wire and taking it out of a chain (blockflow/gui/canvas/splice.py), driven
like a user: a block dragged on the canvas or from the palette over a wire lights the wire and goes
into it on release; Alt + drag takes a block out of its chain. Each is one undo step."""
from __future__ import annotations

import os

from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt
from PySide6.QtGui import QDragEnterEvent, QDragLeaveEvent, QDragMoveEvent, QDropEvent
from PySide6.QtWidgets import QApplication

from blockflow.gui.canvas.view import BLOCK_MIME
from blockflow.io.project_io import dumps_project
from blockflow.project import Edge

from test_canvas import doc, make_view, view  # noqa: F401  (fixtures)

WIRE = Edge("x", "output", "t", "x")


def chain(doc):
    """x -> t, a wire across the page, and a loose Tanh ``u`` below it."""
    doc.add_node("Placeholder", (0, 0), node_id="x", attrs={"shape": [3]})
    doc.add_node("Tanh", (600, 0), node_id="t")
    doc.add_node("Tanh", (300, 300), node_id="u")
    doc.connect("x", "output", "t", "x")
    QApplication.processEvents()


def vp(view, sp: QPointF) -> QPoint:
    return view.mapFromScene(sp)


def wire_middle(view, edge=WIRE) -> QPointF:
    return view.edge_item(edge).path().pointAtPercent(0.5)


def drag_block(qtbot, view, nid, to: QPointF, modifier=Qt.NoModifier, steps=6, before_release=None):
    """Press on ``nid`` and drag it so that its centre lands on ``to``."""
    vport = view.viewport()
    a, b = vp(view, view.node_item(nid).sceneBoundingRect().center()), vp(view, to)
    qtbot.mousePress(vport, Qt.LeftButton, modifier, a)
    for i in range(1, steps + 1):
        qtbot.mouseMove(vport, a + (b - a) * (i / steps))
    if before_release is not None:
        before_release()
    qtbot.mouseRelease(vport, Qt.LeftButton, modifier, b)


def snapshot(doc):
    """The whole project as saved: undo must give back exactly this."""
    return dumps_project(doc.project)


def test_a_block_moved_onto_a_wire_lights_it_and_goes_into_it_in_one_step(qtbot, view, doc):
    chain(doc)
    before, steps = snapshot(doc), doc.undo_stack.count()
    seen = {}

    def look():
        move = view.interaction()
        seen["edge"] = move.hint.edge
        seen["lit"] = view.drag_layer().extra is not None and view.drag_layer().extra is move.hint.item
        view.drag_layer().grab().save(os.environ.get("BLOCKFLOW_SPLICE_SHOT", "/dev/null"), "PNG")

    drag_block(qtbot, view, "u", wire_middle(view), before_release=look)
    assert seen == {"edge": WIRE, "lit": True}
    edges = set(doc.page().edges)
    assert edges == {Edge("x", "output", "u", "x"), Edge("u", "y", "t", "x")}
    assert doc.undo_stack.count() == steps + 1
    assert not [i for i in view.scene().items() if i.zValue() == -0.5]   # the light went
    after = snapshot(doc)
    doc.undo_stack.undo()
    assert snapshot(doc) == before
    doc.undo_stack.redo()
    assert snapshot(doc) == after


def test_a_block_that_does_not_fit_the_wire_neither_lights_it_nor_goes_in(qtbot, view, doc):
    doc.add_node("Placeholder", (0, 0), node_id="i", attrs={"shape": [3], "dtype": "int32"})
    doc.add_node("Identity", (600, 0), node_id="d")
    doc.add_node("Tanh", (300, 300), node_id="u")       # takes floats; the wire carries int32
    doc.connect("i", "output", "d", "input")
    QApplication.processEvents()
    qtbot.waitUntil(lambda: view.node_item("i").data.outputs[0].cls == "int", timeout=3000)
    wire = Edge("i", "output", "d", "input")
    seen = {}
    drag_block(qtbot, view, "u", wire_middle(view, wire),
               before_release=lambda: seen.update(edge=view.interaction().hint.edge,
                                                  lit=view.drag_layer().extra))
    assert seen == {"edge": None, "lit": None}
    assert doc.page().edges == [wire]
    assert doc.page().nodes["u"].position != (300, 300)  # it moved, and only that


def test_a_wired_block_or_several_blocks_are_not_spliced(qtbot, view, doc):
    chain(doc)
    doc.add_node("Placeholder", (300, 500), node_id="p", attrs={"shape": [3]})
    doc.connect("p", "output", "u", "x")
    QApplication.processEvents()
    drag_block(qtbot, view, "u", wire_middle(view))
    assert set(doc.page().edges) == {WIRE, Edge("p", "output", "u", "x")}


def drop_from_palette(view, block: str, at: QPoint, leave_first=False):
    vport = view.viewport()
    mime = QMimeData()
    mime.setData(BLOCK_MIME, block.encode("utf-8"))
    QApplication.sendEvent(vport, QDragEnterEvent(at, Qt.CopyAction, mime, Qt.LeftButton, Qt.NoModifier))
    QApplication.sendEvent(vport, QDragMoveEvent(at, Qt.CopyAction, mime, Qt.LeftButton, Qt.NoModifier))
    lit = view.palette_splice.hint.edge
    if leave_first:
        QApplication.sendEvent(vport, QDragLeaveEvent())
        return lit
    QApplication.sendEvent(vport, QDropEvent(QPointF(at), Qt.CopyAction, mime, Qt.LeftButton, Qt.NoModifier))
    return lit


def test_a_palette_block_dropped_on_a_wire_goes_into_it_in_one_step(qtbot, view, doc):
    chain(doc)
    before, steps = snapshot(doc), doc.undo_stack.count()
    lit = drop_from_palette(view, "Sigmoid", vp(view, wire_middle(view)))
    assert lit == WIRE
    new = [n for n in doc.page().nodes if n not in ("x", "t", "u")]
    assert len(new) == 1 and doc.page().nodes[new[0]].block == "Sigmoid"
    assert set(doc.page().edges) == {Edge("x", "output", new[0], "x"), Edge(new[0], "y", "t", "x")}
    assert doc.undo_stack.count() == steps + 1
    doc.undo_stack.undo()
    assert snapshot(doc) == before
    # a drag that leaves the canvas leaves no light behind; a block with no input is not spliced
    assert drop_from_palette(view, "Sigmoid", vp(view, wire_middle(view)), leave_first=True) == WIRE
    assert view.palette_splice.hint.item is None
    assert drop_from_palette(view, "Placeholder", vp(view, wire_middle(view))) is None
    assert set(doc.page().edges) == {WIRE}


def test_alt_drag_takes_a_block_out_of_its_chain_in_one_step(qtbot, view, doc):
    doc.add_node("Placeholder", (0, 0), node_id="x", attrs={"shape": [3]})
    doc.add_node("Tanh", (300, 0), node_id="m")
    doc.add_node("Tanh", (600, 0), node_id="t")
    doc.connect("x", "output", "m", "x")
    doc.connect("m", "y", "t", "x")
    QApplication.processEvents()
    before, steps = snapshot(doc), doc.undo_stack.count()
    seen = {}
    drag_block(qtbot, view, "m", QPointF(360, 320), modifier=Qt.AltModifier,
               before_release=lambda: seen.update(shown=view.drag_layer().wires_shown,
                                                  lifted=len(view.drag_layer().wires)))
    assert seen == {"shown": False, "lifted": 2}        # drawn lifted out of its chain
    assert doc.page().edges == [Edge("x", "output", "t", "x")]
    assert all(item.opacity() == 1.0 for item in view.scene().items())
    assert doc.page().nodes["m"].position != (300, 0)
    assert doc.undo_stack.count() == steps + 1
    after = snapshot(doc)
    doc.undo_stack.undo()
    assert snapshot(doc) == before
    doc.undo_stack.redo()
    assert snapshot(doc) == after
    doc.undo_stack.undo()
    # without Alt the same drag only moves it
    drag_block(qtbot, view, "m", QPointF(360, 320))
    assert set(doc.page().edges) == {Edge("x", "output", "m", "x"), Edge("m", "y", "t", "x")}


def test_alt_drag_does_not_rewire_what_does_not_fit(qtbot, view, doc):
    doc.add_node("Placeholder", (0, 0), node_id="i", attrs={"shape": [3], "dtype": "int32"})
    doc.add_node("Cast", (300, 0), node_id="c", attrs={"dtype": "float32"})
    doc.add_node("Tanh", (600, 0), node_id="t")
    doc.connect("i", "output", "c", "x")
    doc.connect("c", "y", "t", "x")
    QApplication.processEvents()
    drag_block(qtbot, view, "c", QPointF(360, 320), modifier=Qt.AltModifier)
    assert doc.page().edges == []              # an int32 cannot feed Tanh: no wire made
    assert "c" in doc.page().nodes
