"""The canvas's parts on their own: a DiagramScene bound to a Document keeps itself in sync with it
(no view needed), and the view's gestures are interaction objects (blockflow/gui/canvas/interactions.py)."""
from __future__ import annotations

from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtWidgets import QApplication

import pytest

from blockflow.gui.canvas.interactions import MoveBlocks, Pan, RubberBand, WireDrag
from blockflow.gui.canvas.scene import DiagramScene
from blockflow.gui.common.theme import Style
from blockflow.gui.document.document import Document
from blockflow.project import Edge


from test_canvas import doc, make_view, view  # noqa: E402,F401  (the canvas tests' fixtures)


def port_pos(view, node, port) -> QPoint:
    return view.mapFromScene(view.node_item(node).port_scene_pos(port))


def two_blocks(doc):
    doc.add_node("Placeholder", (0, 0), node_id="x", attrs={"shape": [3]})
    doc.add_node("Tanh", (300, 0), node_id="t")
    doc.add_node("Placeholder", (0, 200), node_id="i", attrs={"shape": [3], "dtype": "int32"})


def test_a_bound_scene_follows_the_document_without_a_view(qtbot, doc):
    scene = DiagramScene(doc.registry, Style())
    changes, reloads = [], []
    scene.contents_changed.connect(lambda: changes.append(1))
    scene.reloaded.connect(lambda: reloads.append(1))
    scene.bind(doc)
    assert scene.page is doc.page() and not scene.node_items and reloads == [1]
    two_blocks(doc)
    doc.connect("x", "output", "t", "x")
    assert set(scene.node_items) == {"x", "t", "i"} and set(scene.edge_items) == {Edge("x", "output", "t", "x")}
    assert changes
    doc.move_nodes({"t": ((300, 0), (400, 40))})
    assert scene.node_items["t"].pos() == QPointF(400, 40)
    qtbot.waitUntil(lambda: scene.program is not None and scene.program is doc.ready_program(), timeout=3000)
    assert scene.node_items["t"].data.outputs[0].cls == "float"
    doc.rename_node("t", "tanh")
    assert set(scene.node_items) == {"x", "tanh", "i"} and len(reloads) == 2
    doc.remove_nodes(["x"])
    assert "x" not in scene.node_items and not scene.edge_items
    other = doc.add_page("second")
    doc.set_current_page(other)
    assert scene.page is doc.page("second") and not scene.node_items


def test_a_scene_rebuilt_under_a_view_drops_its_gesture(qtbot, doc):
    two_blocks(doc)
    view = make_view(qtbot, doc)
    vp = view.viewport()
    a = port_pos(view, "x", "output")
    qtbot.mousePress(vp, Qt.LeftButton, Qt.NoModifier, a)
    assert isinstance(view.interaction(), WireDrag)
    doc.rename_node("t", "tanh")                      # the items are rebuilt under the wire
    assert view.interaction() is None
    qtbot.mouseRelease(vp, Qt.LeftButton, Qt.NoModifier, a + QPoint(50, 50))
    assert doc.page().edges == []


def test_each_gesture_is_the_current_interaction_while_it_lasts(qtbot, view, doc):
    two_blocks(doc)
    QApplication.processEvents()
    vp = view.viewport()
    # a wire from an output; a middle-button pan meanwhile hands the view back to it
    a = port_pos(view, "x", "output")
    qtbot.mousePress(vp, Qt.LeftButton, Qt.NoModifier, a)
    wire = view.interaction()
    assert isinstance(wire, WireDrag) and wire.from_output and (wire.node, wire.port) == ("x", "output")
    qtbot.mousePress(vp, Qt.MiddleButton, Qt.NoModifier, a + QPoint(10, 10))
    assert isinstance(view.interaction(), Pan) and view.interaction().resume is wire
    qtbot.mouseRelease(vp, Qt.MiddleButton, Qt.NoModifier, a + QPoint(10, 10))
    assert view.interaction() is wire
    qtbot.keyClick(view, Qt.Key_Escape)               # Escape drops the wire
    assert view.interaction() is None and doc.page().edges == []
    assert all(item.accept is None for item in view.diagram_scene().node_items.values())
    # a press on a block moves it; on empty canvas a rubber band selects
    body = view.mapFromScene(view.node_item("t").sceneBoundingRect().center())
    qtbot.mousePress(vp, Qt.LeftButton, Qt.NoModifier, body)
    assert isinstance(view.interaction(), MoveBlocks) and set(view.interaction().start) == {"t"}
    qtbot.mouseRelease(vp, Qt.LeftButton, Qt.NoModifier, body)
    assert view.interaction() is None
    empty = view.mapFromScene(QPointF(-300, -300))
    qtbot.mousePress(vp, Qt.LeftButton, Qt.NoModifier, empty)
    assert isinstance(view.interaction(), RubberBand)
    qtbot.mouseRelease(vp, Qt.LeftButton, Qt.NoModifier, empty)
    assert view.interaction() is None


def test_escape_while_dragging_blocks_puts_them_back_and_pushes_nothing(qtbot, view, doc):
    """As Blender cancels a grab: Esc mid-drag, the blocks go back, the rest of the drag moves
    nothing, and no undo step is made."""
    two_blocks(doc)
    QApplication.processEvents()
    vp = view.viewport()
    steps = doc.undo_stack.count()
    before = {n: tuple(doc.page().nodes[n].position) for n in doc.page().nodes}
    start = view.mapFromScene(view.node_item("t").sceneBoundingRect().center())
    qtbot.mousePress(vp, Qt.LeftButton, Qt.NoModifier, start)
    for i in range(1, 5):
        qtbot.mouseMove(vp, start + QPoint(30 * i, 20 * i))
    assert view.node_item("t").pos() != QPointF(*before["t"])           # it moved while dragged
    view.setFocus()
    qtbot.keyClick(view, Qt.Key_Escape)
    assert view.interaction() is None
    assert view.node_item("t").pos() == QPointF(*before["t"])           # back where it was
    for i in range(5, 8):
        qtbot.mouseMove(vp, start + QPoint(30 * i, 20 * i))
    qtbot.mouseRelease(vp, Qt.LeftButton, Qt.NoModifier, start + QPoint(210, 140))
    QApplication.processEvents()
    assert view.node_item("t").pos() == QPointF(*before["t"])
    assert {n: tuple(doc.page().nodes[n].position) for n in doc.page().nodes} == before
    assert doc.undo_stack.count() == steps
