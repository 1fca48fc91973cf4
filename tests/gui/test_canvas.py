"""The canvas, driven like a user: mouse presses, moves and releases on the viewport, keys, drops.

Every edit must land in the Document as an undo step; refused gestures leave the project as it was.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import QEvent, QMimeData, QObject, QPoint, QPointF, QRectF, Qt
from PySide6.QtGui import (QColor, QDragEnterEvent, QDragMoveEvent, QDropEvent, QFont, QImage,
                           QWheelEvent)
from PySide6.QtWidgets import QApplication

from blockflow.gui.canvas.view import BLOCK_MIME, DiagramView
from blockflow.gui.document.document import FRAGMENT_MIME, Document
from blockflow.project import Edge
from blockflow.io.project_io import dumps_project

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_projects" / "stable_softmax.bflow.json"


@pytest.fixture
def doc(qapp):
    qapp.setFont(QFont("DejaVu Sans", 9))
    return Document()


def make_view(qtbot, doc, size=(1200, 700)):
    view = DiagramView(doc)
    qtbot.addWidget(view)
    view.resize(*size)
    view.show()
    qtbot.waitExposed(view)
    view.reset_zoom()
    QApplication.processEvents()
    return view


@pytest.fixture
def view(qtbot, doc):
    return make_view(qtbot, doc)


def vp_pos(view, scene_point) -> QPoint:
    return view.mapFromScene(scene_point)


def port_pos(view, node, port) -> QPoint:
    return vp_pos(view, view.node_item(node).port_scene_pos(port))


def drag(qtbot, view, a: QPoint, b: QPoint, steps=4, modifier=Qt.NoModifier):
    vp = view.viewport()
    qtbot.mousePress(vp, Qt.LeftButton, modifier, a)
    for i in range(1, steps + 1):
        qtbot.mouseMove(vp, a + (b - a) * (i / steps))
    qtbot.mouseRelease(vp, Qt.LeftButton, modifier, b)


def drop_mime(view, block: str, at: QPoint):
    vp = view.viewport()
    mime = QMimeData()
    mime.setData(BLOCK_MIME, block.encode("utf-8"))
    enter = QDragEnterEvent(at, Qt.CopyAction, mime, Qt.LeftButton, Qt.NoModifier)
    QApplication.sendEvent(vp, enter)
    assert enter.isAccepted()
    move = QDragMoveEvent(at, Qt.CopyAction, mime, Qt.LeftButton, Qt.NoModifier)
    QApplication.sendEvent(vp, move)
    assert move.isAccepted()
    drop = QDropEvent(QPointF(at), Qt.CopyAction, mime, Qt.LeftButton, Qt.NoModifier)
    QApplication.sendEvent(vp, drop)
    assert drop.isAccepted()


def two_blocks(doc):
    doc.add_node("Placeholder", (0, 0), node_id="x", attrs={"shape": [3]})
    doc.add_node("Tanh", (300, 0), node_id="t")
    doc.add_node("Placeholder", (0, 200), node_id="i", attrs={"shape": [3], "dtype": "int32"})


# ---------------------------------------------------------------------------- adding blocks
def test_palette_drop_adds_the_block_at_the_drop_point(view, doc):
    target = QPoint(400, 300)
    drop_mime(view, "MatMul", target)
    assert list(doc.page().nodes) == ["MatMul_1"]
    item = view.node_item("MatMul_1")
    assert item.sceneBoundingRect().contains(view.mapToScene(target))
    assert view.selected_nodes() == ["MatMul_1"]
    assert doc.undo_stack.count() == 1
    doc.undo_stack.undo()
    assert not doc.page().nodes and not view.diagram_scene().node_items


def test_a_drag_of_something_else_is_not_taken(view, doc):
    mime = QMimeData()
    mime.setText("hello")
    enter = QDragEnterEvent(QPoint(10, 10), Qt.CopyAction, mime, Qt.LeftButton, Qt.NoModifier)
    QApplication.sendEvent(view.viewport(), enter)
    assert not enter.isAccepted()


def test_drop_block_returns_the_id_and_refuses_unknown_blocks(view, doc):
    messages = []
    view.status_message.connect(messages.append)
    assert view.drop_block("Relu", QPointF(100, 100)) == "Relu_1"
    assert view.drop_block("NoSuchBlock", QPointF(0, 0)) == ""
    assert "NoSuchBlock" in messages[-1]
    assert list(doc.page().nodes) == ["Relu_1"]


# ---------------------------------------------------------------------------- wiring
def test_wire_by_dragging_port_to_port(qtbot, view, doc):
    two_blocks(doc)
    drag(qtbot, view, port_pos(view, "x", "output"), port_pos(view, "t", "x"))
    assert doc.page().edges == [Edge("x", "output", "t", "x")]
    assert Edge("x", "output", "t", "x") in view.diagram_scene().edge_items
    # the wire ends on the ports
    path = view.edge_item(Edge("x", "output", "t", "x")).path()
    assert (path.pointAtPercent(0) - view.node_item("x").port_scene_pos("output")).manhattanLength() < 0.5
    assert (path.pointAtPercent(1) - view.node_item("t").port_scene_pos("x")).manhattanLength() < 0.5
    doc.undo_stack.undo()
    assert doc.page().edges == [] and not view.diagram_scene().edge_items


def test_wire_by_dragging_from_an_input_back_to_an_output(qtbot, view, doc):
    two_blocks(doc)
    drag(qtbot, view, port_pos(view, "t", "x"), port_pos(view, "x", "output"))
    assert doc.page().edges == [Edge("x", "output", "t", "x")]


def test_compatible_ports_light_up_while_dragging(qtbot, view, doc):
    two_blocks(doc)
    doc.add_node("Tanh", (300, 200), node_id="t2")
    doc.connect("x", "output", "t", "x")
    QApplication.processEvents()  # compiled types arrive
    vp = view.viewport()
    a = port_pos(view, "t", "y")
    qtbot.mousePress(vp, Qt.LeftButton, Qt.NoModifier, a)
    qtbot.mouseMove(vp, a + QPoint(40, 30))
    assert view.node_item("t2").accept == frozenset({"x"})
    assert view.node_item("x").accept is None      # an ancestor: a cycle
    assert view.node_item("t").accept is None      # itself
    qtbot.mouseRelease(vp, Qt.LeftButton, Qt.NoModifier, a + QPoint(40, 30))
    assert all(item.accept is None for item in view.diagram_scene().node_items.values())
    assert len(doc.page().edges) == 1


def test_lit_ports_are_then_checked_exactly_so_a_wrong_shape_goes_dark(qtbot, view, doc):
    two_blocks(doc)
    doc.add_node("Placeholder", (0, 450), node_id="p4", attrs={"shape": [4]})
    doc.add_node("Add", (300, 450), node_id="a")          # y fed a [4]: a [3] into x is refused
    doc.add_node("Multiply", (300, 250), node_id="m")     # nothing fed yet: stays lit
    doc.connect("x", "output", "t", "x")
    doc.connect("p4", "output", "a", "y")
    QApplication.processEvents()
    vp = view.viewport()
    messages = []
    view.status_message.connect(messages.append)
    a = port_pos(view, "t", "y")
    qtbot.mousePress(vp, Qt.LeftButton, Qt.NoModifier, a)
    qtbot.mouseMove(vp, a + QPoint(40, 30))
    assert "x" in view.node_item("a").accept             # dtype says yes at first
    qtbot.waitUntil(lambda: not view.interaction().pending, timeout=3000)
    assert view.node_item("a").accept == frozenset({"y"})   # replacing y's wire is fine
    assert view.node_item("m").accept == frozenset({"x", "y"})
    qtbot.mouseMove(vp, port_pos(view, "a", "x"))
    assert any(m.startswith("a.x: ") and "broadcast" in m for m in messages), messages
    qtbot.mouseRelease(vp, Qt.LeftButton, Qt.NoModifier, port_pos(view, "a", "x"))
    assert len(doc.page().edges) == 2
    assert "broadcast" in view.notice_text()


@pytest.mark.parametrize("case", ["cycle", "dtype", "two outputs", "scope"])
def test_refused_wires_leave_the_project_unchanged_and_say_why(qtbot, view, doc, case):
    two_blocks(doc)
    doc.connect("x", "output", "t", "x")
    doc.add_node("Softmax", (300, 200), node_id="s")
    doc.add_node("Tanh", (600, 0), node_id="t2")
    doc.connect("t", "y", "t2", "x")
    QApplication.processEvents()
    before, count = dumps_project(doc.project), doc.undo_stack.count()
    messages = []
    view.status_message.connect(messages.append)
    a, b, word = {
        "cycle": (("t2", "y"), ("t", "x"), "cycle"),
        "dtype": (("i", "output"), ("s", "logits"), "float"),
        "two outputs": (("x", "output"), ("t", "y"), "two outputs"),
        "scope": (("x", "output"), ("t", "scope"), "scope"),
    }[case]
    drag(qtbot, view, port_pos(view, *a), port_pos(view, *b))
    assert dumps_project(doc.project) == before
    assert doc.undo_stack.count() == count
    assert messages and word in messages[-1]
    assert word in view.notice_text()


def test_dropping_on_a_fed_input_replaces_its_wire_undoably(qtbot, view, doc):
    two_blocks(doc)
    doc.add_node("Placeholder", (0, 100), node_id="x2", attrs={"shape": [3]})
    doc.connect("x", "output", "t", "x")
    count = doc.undo_stack.count()
    drag(qtbot, view, port_pos(view, "x2", "output"), port_pos(view, "t", "x"))
    assert doc.page().edges == [Edge("x2", "output", "t", "x")]
    assert doc.undo_stack.count() == count + 1
    doc.undo_stack.undo()
    assert doc.page().edges == [Edge("x", "output", "t", "x")]
    assert set(view.diagram_scene().edge_items) == {Edge("x", "output", "t", "x")}


def test_picking_a_wire_up_from_its_input_moves_or_deletes_it(qtbot, view, doc):
    two_blocks(doc)
    doc.add_node("Tanh", (300, 200), node_id="t2")
    doc.connect("x", "output", "t", "x")
    count = doc.undo_stack.count()
    # reconnect: from t.x to t2.x, one undo step
    drag(qtbot, view, port_pos(view, "t", "x"), port_pos(view, "t2", "x"))
    assert doc.page().edges == [Edge("x", "output", "t2", "x")]
    assert doc.undo_stack.count() == count + 1
    # drop in empty space: the wire is deleted
    drag(qtbot, view, port_pos(view, "t2", "x"), vp_pos(view, QPointF(700, 500)))
    assert doc.page().edges == []
    doc.undo_stack.undo()
    doc.undo_stack.undo()
    assert doc.page().edges == [Edge("x", "output", "t", "x")]


def test_an_input_list_grows_a_port_when_its_last_one_is_wired(qtbot, view, doc):
    two_blocks(doc)
    doc.add_node("AddN", (300, 200), node_id="n")
    names = lambda: [p.name for p in view.node_item("n").data.inputs]  # noqa: E731
    assert names() == ["inputs[0]"]
    drag(qtbot, view, port_pos(view, "x", "output"), port_pos(view, "n", "inputs[0]"))
    assert names() == ["inputs[0]", "inputs[1]"]
    drag(qtbot, view, port_pos(view, "x", "output"), port_pos(view, "n", "inputs[1]"))
    assert names() == ["inputs[0]", "inputs[1]", "inputs[2]"]
    assert {e.dst_port for e in doc.page().edges} == {"inputs[0]", "inputs[1]"}


def test_wires_show_their_inferred_type_on_hover(qtbot, view, doc):
    two_blocks(doc)
    doc.connect("x", "output", "t", "x")
    QApplication.processEvents()
    path = view.edge_item(Edge("x", "output", "t", "x")).path()
    text = view.tooltip_at(path.pointAtPercent(0.5))
    assert "float32[3]" in text


def test_selected_wires_are_deleted_with_the_delete_key(qtbot, view, doc):
    two_blocks(doc)
    doc.connect("x", "output", "t", "x")
    path = view.edge_item(Edge("x", "output", "t", "x")).path()
    qtbot.mouseClick(view.viewport(), Qt.LeftButton, Qt.NoModifier, vp_pos(view, path.pointAtPercent(0.5)))
    assert view.selected_wires() == [Edge("x", "output", "t", "x")]
    qtbot.keyClick(view.viewport(), Qt.Key_Delete)
    assert doc.page().edges == [] and set(doc.page().nodes) == {"x", "t", "i"}


# ---------------------------------------------------------------------------- editing
def test_move_a_block_by_mouse_then_undo(qtbot, view, doc):
    two_blocks(doc)
    item = view.node_item("t")
    start = vp_pos(view, item.sceneBoundingRect().center())
    drag(qtbot, view, start, start + QPoint(60, 40))
    assert doc.page().nodes["t"].position == (360.0, 40.0)
    assert doc.undo_stack.count() == 4
    doc.undo_stack.undo()
    assert doc.page().nodes["t"].position == (300.0, 0.0)
    assert view.node_item("t").pos() == QPointF(300, 0)


def test_a_click_on_a_block_in_front_of_a_wire_picks_the_block(qtbot, view, doc):
    doc.add_node("Placeholder", (0, 0), node_id="x", attrs={"shape": [3]})
    doc.add_node("Tanh", (700, 0), node_id="t")
    doc.connect("x", "output", "t", "x")
    wire = view.edge_item(Edge("x", "output", "t", "x")).path()
    middle = wire.pointAtPercent(0.5)
    doc.add_node("Exp", (middle.x() - 60, middle.y() - 40), node_id="e")   # over the wire
    QApplication.processEvents()
    at = vp_pos(view, middle)
    assert view.node_item("e").sceneBoundingRect().contains(middle)
    qtbot.mouseClick(view.viewport(), Qt.LeftButton, Qt.NoModifier, at)
    assert view.selected_nodes() == ["e"] and view.selected_wires() == []
    drag(qtbot, view, at, at + QPoint(40, 60))
    assert doc.page().nodes["e"].position != (middle.x() - 60, middle.y() - 40)


def test_a_dragged_block_is_drawn_on_the_drag_layer_as_the_view_draws_it(qtbot, view, doc):
    two_blocks(doc)
    doc.connect("x", "output", "t", "x")
    QApplication.processEvents()
    vp = view.viewport()
    item = view.node_item("t")
    wire = view.edge_item(Edge("x", "output", "t", "x"))
    start = vp_pos(view, item.sceneBoundingRect().center())
    paints = []
    vp.installEventFilter(filt := _PaintSpy(paints))
    qtbot.mousePress(vp, Qt.LeftButton, Qt.NoModifier, start)
    qtbot.mouseMove(vp, start + QPoint(20, 10))
    layer = view._drag_layer
    assert layer.active and layer.isVisible()
    assert item.opacity() == 0.0 and wire.opacity() == 0.0
    QApplication.processEvents()
    before = len(paints)
    for i in range(2, 6):
        qtbot.mouseMove(vp, start + QPoint(20 * i, 10 * i))
        QApplication.processEvents()
    assert len(paints) == before, "the viewport repainted under the drag layer"
    on_layer = layer.grab().toImage()
    qtbot.mouseRelease(vp, Qt.LeftButton, Qt.NoModifier, start + QPoint(100, 50))
    vp.removeEventFilter(filt)
    assert not layer.active and not layer.isVisible()
    assert item.opacity() == 1.0 and wire.opacity() == 1.0
    assert doc.page().nodes["t"].position == (400.0, 50.0)
    QApplication.processEvents()
    in_view = vp.grab().toImage()
    assert on_layer.size() == in_view.size()
    # the block and its wire were drawn where the view then draws them (a few AA pixels aside)
    rect = vp_pos(view, item.mapToScene(item.body.center().x(), item.body.top() + 8))   # its header
    differ = sum(on_layer.pixel(x, y) != in_view.pixel(x, y)
                 for x in range(0, in_view.width(), 3) for y in range(0, in_view.height(), 3))
    assert differ < 0.002 * (in_view.width() // 3) * (in_view.height() // 3), differ
    assert on_layer.pixel(rect) == in_view.pixel(rect) != view.style_.background.rgb()


class _PaintSpy(QObject):
    def __init__(self, sink):
        super().__init__()
        self.sink = sink

    def eventFilter(self, obj, event):
        if event.type() == QEvent.Paint:
            self.sink.append(event.rect())
        return False


def test_dragging_a_selection_moves_all_as_one_step_and_wires_follow(qtbot, view, doc):
    two_blocks(doc)
    doc.connect("x", "output", "t", "x")
    view.select_nodes(["x", "t"])
    count = doc.undo_stack.count()
    start = vp_pos(view, view.node_item("t").sceneBoundingRect().center())
    drag(qtbot, view, start, start + QPoint(30, 50), steps=6)
    assert doc.page().nodes["x"].position == (30.0, 50.0)
    assert doc.page().nodes["t"].position == (330.0, 50.0)
    assert doc.undo_stack.count() == count + 1
    path = view.edge_item(Edge("x", "output", "t", "x")).path()
    assert (path.pointAtPercent(0) - view.node_item("x").port_scene_pos("output")).manhattanLength() < 0.5


def test_rubber_band_select_and_delete_is_one_undo_step(qtbot, view, doc):
    two_blocks(doc)
    doc.connect("x", "output", "t", "x")
    before, count = dumps_project(doc.project), doc.undo_stack.count()
    a = vp_pos(view, QPointF(-60, -60))
    b = vp_pos(view, QPointF(500, 130))
    drag(qtbot, view, a, b, steps=8)
    assert view.selected_nodes() == ["x", "t"]
    qtbot.keyClick(view.viewport(), Qt.Key_Delete)
    assert list(doc.page().nodes) == ["i"] and doc.page().edges == []
    assert doc.undo_stack.count() == count + 1
    doc.undo_stack.undo()
    assert dumps_project(doc.project) == before
    assert set(view.diagram_scene().node_items) == {"x", "t", "i"}
    assert len(view.diagram_scene().edge_items) == 1


def test_click_and_shift_click_select(qtbot, view, doc):
    two_blocks(doc)
    seen = []
    view.selection_changed.connect(seen.append)
    centre = lambda n: vp_pos(view, view.node_item(n).sceneBoundingRect().center())  # noqa: E731
    qtbot.mouseClick(view.viewport(), Qt.LeftButton, Qt.NoModifier, centre("x"))
    assert view.selected_nodes() == ["x"]
    qtbot.mouseClick(view.viewport(), Qt.LeftButton, Qt.ShiftModifier, centre("t"))
    assert view.selected_nodes() == ["x", "t"]
    qtbot.mouseClick(view.viewport(), Qt.LeftButton, Qt.NoModifier, centre("i"))
    assert view.selected_nodes() == ["i"]
    assert seen[-1] == ["i"]
    assert doc.undo_stack.count() == 3  # clicks move nothing


def test_copy_paste_keeps_internal_wires_and_pastes_at_the_cursor(qtbot, view, doc):
    two_blocks(doc)
    doc.connect("x", "output", "t", "x")
    view.select_nodes(["x", "t"])
    text = view.copy_selection()
    mime = QApplication.clipboard().mimeData()
    assert mime.hasFormat(FRAGMENT_MIME) and mime.text() == text
    count = doc.undo_stack.count()
    view._last_scene_pos = QPointF(100, 400)  # where the mouse last was in the view
    ids = view.paste()
    assert sorted(ids) == ["Placeholder_1", "Tanh_1"]
    assert doc.undo_stack.count() == count + 1
    new = set(doc.page().nodes) - {"x", "t", "i"}
    assert len(new) == 2
    assert [e for e in doc.page().edges if e.src in new and e.dst in new]
    assert set(view.selected_nodes()) == new
    xs = [doc.page().nodes[n].position for n in new]
    assert min(p[0] for p in xs) == 100 and min(p[1] for p in xs) == 400


def test_cut_and_duplicate_are_one_step_each(qtbot, view, doc):
    two_blocks(doc)
    doc.connect("x", "output", "t", "x")
    count = doc.undo_stack.count()
    view.select_nodes(["x", "t"])
    ids = view.duplicate_selection()
    assert len(ids) == 2 and doc.undo_stack.count() == count + 1
    assert len(doc.page().edges) == 2
    view.select_nodes(ids)
    view.cut_selection()
    assert doc.undo_stack.count() == count + 2 and len(doc.page().edges) == 1
    view.paste()
    assert len(doc.page().edges) == 2 and doc.undo_stack.count() == count + 3


def test_align_and_distribute_are_one_undo_step(qtbot, view, doc):
    for i, (x, y) in enumerate([(0, 0), (250, 37), (610, 90)]):
        doc.add_node("Tanh", (x, y), node_id=f"t{i}")
    view.select_nodes(["t0", "t1", "t2"])
    count = doc.undo_stack.count()
    view.align_selection("top")
    assert {doc.page().nodes[n].position[1] for n in ("t0", "t1", "t2")} == {0.0}
    assert doc.undo_stack.count() == count + 1
    view.distribute_selection("horizontal")
    xs = [doc.page().nodes[n].position[0] for n in ("t0", "t1", "t2")]
    assert xs[0] == 0.0 and xs[2] == 610.0                # the ends stay
    assert xs[1] % 10 == 0 and abs((xs[1] - xs[0]) - (xs[2] - xs[1])) <= 10   # even, on the grid
    assert doc.undo_stack.count() == count + 2
    view.align_selection("left")
    assert {doc.page().nodes[n].position[0] for n in ("t0", "t1", "t2")} == {0.0}
    doc.undo_stack.undo()
    doc.undo_stack.undo()
    doc.undo_stack.undo()
    assert doc.page().nodes["t1"].position == (250.0, 37.0)


def test_auto_layout_and_select_all(qtbot, view, doc):
    two_blocks(doc)
    doc.connect("x", "output", "t", "x")
    view.select_all()
    assert view.selected_nodes() == ["x", "t", "i"]
    count = doc.undo_stack.count()
    view.auto_layout()
    assert doc.undo_stack.count() == count + 1
    assert doc.page().nodes["t"].position[0] > doc.page().nodes["x"].position[0]
    assert view.node_item("t").pos() == QPointF(*doc.page().nodes["t"].position)


def test_keyboard_shortcuts_reach_the_edits(qtbot, view, doc):
    two_blocks(doc)
    vp = view.viewport()
    qtbot.keyClick(vp, Qt.Key_A, Qt.ControlModifier)
    assert len(view.selected_nodes()) == 3
    qtbot.keyClick(vp, Qt.Key_C, Qt.ControlModifier)
    qtbot.keyClick(vp, Qt.Key_V, Qt.ControlModifier)
    assert len(doc.page().nodes) == 6
    qtbot.keyClick(vp, Qt.Key_Backspace)
    assert len(doc.page().nodes) == 3


def test_context_menus_offer_the_edits(qtbot, view, doc):
    two_blocks(doc)
    doc.connect("x", "output", "t", "x")
    texts = lambda m: [a.text() for a in m.actions()]  # noqa: E731
    block_menu = view.context_menu(view.node_item("t").sceneBoundingRect().center())
    assert {"Delete", "Duplicate", "Mark as loss", "Rename label…"} <= set(texts(block_menu))
    next(a for a in block_menu.actions() if a.text() == "Mark as loss").trigger()
    assert doc.page().loss == "t" and view.node_item("t").data.is_loss
    path = view.edge_item(Edge("x", "output", "t", "x")).path()
    wire_menu = view.context_menu(path.pointAtPercent(0.5))
    assert any(t.startswith("Delete wire") for t in texts(wire_menu))
    wire_menu.actions()[0].trigger()
    assert doc.page().edges == []
    canvas_menu = view.context_menu(QPointF(900, 600))
    assert {"Paste", "Select all", "Auto-layout", "Fit to view"} <= set(texts(canvas_menu))


# ---------------------------------------------------------------------------- zoom, pan, minimap
def test_wheel_zooms_around_the_cursor(qtbot, view, doc):
    two_blocks(doc)
    at = QPoint(300, 200)
    anchor = view.mapToScene(at)
    wheel = QWheelEvent(QPointF(at), QPointF(view.viewport().mapToGlobal(at)), QPoint(0, 0), QPoint(0, 120),
                        Qt.NoButton, Qt.ControlModifier, Qt.NoScrollPhase, False)
    QApplication.sendEvent(view.viewport(), wheel)
    assert view.zoom() == pytest.approx(1.0015 ** 120)
    assert (view.mapToScene(at) - anchor).manhattanLength() < 2.0
    wheel = QWheelEvent(QPointF(at), QPointF(view.viewport().mapToGlobal(at)), QPoint(0, 0), QPoint(0, -240),
                        Qt.NoButton, Qt.NoModifier, Qt.NoScrollPhase, False)
    QApplication.sendEvent(view.viewport(), wheel)
    assert view.zoom() < 1.0


def test_zoom_buttons_fit_and_middle_drag_pan(qtbot, view, doc):
    two_blocks(doc)
    view.zoom_in()
    assert view.zoom() == pytest.approx(1.25)
    view.zoom_out()
    assert view.zoom() == pytest.approx(1.0)
    view.fit_to_view()
    rect = view.mapFromScene(view.diagram_scene().items_rect()).boundingRect()
    assert view.viewport().rect().contains(rect)
    before = view.view_center_scene_pos()
    vp = view.viewport()
    qtbot.mousePress(vp, Qt.MiddleButton, Qt.NoModifier, QPoint(500, 300))
    qtbot.mouseMove(vp, QPoint(400, 250))
    qtbot.mouseRelease(vp, Qt.MiddleButton, Qt.NoModifier, QPoint(400, 250))
    moved = view.view_center_scene_pos() - before
    assert moved.x() > 50 and moved.y() > 20
    assert doc.undo_stack.count() == 3


def test_space_drag_pans_instead_of_selecting(qtbot, view, doc):
    two_blocks(doc)
    vp = view.viewport()
    before = view.view_center_scene_pos()
    qtbot.keyPress(vp, Qt.Key_Space)
    drag(qtbot, view, QPoint(600, 400), QPoint(500, 400))
    qtbot.keyRelease(vp, Qt.Key_Space)
    assert (view.view_center_scene_pos() - before).x() == pytest.approx(100, abs=2)
    assert view.selected_nodes() == []


def test_center_on_node(qtbot, view, doc):
    doc.add_node("Tanh", (3000, 2000), node_id="far")
    view.center_on_node("far")
    centre = view.view_center_scene_pos()
    assert view.node_item("far").sceneBoundingRect().adjusted(-5, -5, 5, 5).contains(centre)


def test_minimap_click_pans_the_view(qtbot, view, doc):
    doc.add_node("Tanh", (0, 0), node_id="a")
    doc.add_node("Tanh", (3000, 1500), node_id="b")
    mini = view.minimap()
    qtbot.addWidget(mini)
    mini.resize(200, 120)
    mini.show()
    qtbot.waitExposed(mini)
    mini.grab()
    qtbot.mouseClick(mini, Qt.LeftButton, Qt.NoModifier, QPoint(190, 110))
    centre = view.view_center_scene_pos()
    assert centre.x() > 2000 and centre.y() > 1000
    qtbot.mouseClick(mini, Qt.LeftButton, Qt.NoModifier, QPoint(10, 10))
    assert view.view_center_scene_pos().x() < 500


# ---------------------------------------------------------------------------- model follow-up
def test_view_follows_pages_and_opened_projects(qtbot, view, doc):
    doc.open(SAMPLE)
    assert set(view.diagram_scene().node_items) == set(doc.page().nodes)
    assert len(view.diagram_scene().edge_items) == len(doc.page().edges)
    doc.set_current_page("by_hand")
    assert set(view.diagram_scene().node_items) == set(doc.page("by_hand").nodes)
    assert all(i.data.scope == "by_hand" for i in view.diagram_scene().node_items.values())
    doc.rename_page("by_hand", "manual")
    assert all(i.data.scope == "manual" for i in view.diagram_scene().node_items.values())
    doc.add_node("Tanh", (0, 0), page="stable_softmax", node_id="elsewhere")
    assert "elsewhere" not in view.diagram_scene().node_items


def test_errors_are_outlined_and_explained(qtbot, view, doc):
    doc.add_node("Softmax", (0, 0), node_id="s")   # its input is not wired: an error
    QApplication.processEvents()
    item = view.node_item("s")
    assert item.data.errors
    assert "error" in view.tooltip_at(item.sceneBoundingRect().center() + QPointF(0, 5))
    doc.add_node("Placeholder", (-300, 0), node_id="x", attrs={"shape": [3]})
    doc.connect("x", "output", "s", "logits")
    QApplication.processEvents()
    assert not view.node_item("s").data.errors


def test_inline_constants_show_beside_their_port(qtbot, view, doc):
    doc.add_node("Add", (0, 0), node_id="a")
    doc.set_inline("a", "y", 2.5)
    item = view.node_item("a")
    port = next(p for p in item.data.inputs if p.name == "y")
    assert port.inline == "2.5"
    assert item.inline_rects["y"].right() < 0   # left of the block
    assert item.port_at(item.pos() + item.inline_rects["y"].center()) == "y"


# ---------------------------------------------------------------------------- looks
def text_pixels(img: QImage, rect, color: QColor, tol=60) -> int:
    n = 0
    r = rect.toRect() if hasattr(rect, "toRect") else rect
    for y in range(max(0, r.top()), min(img.height(), r.bottom())):
        for x in range(max(0, r.left()), min(img.width(), r.right())):
            c = img.pixelColor(x, y)
            if abs(c.red() - color.red()) + abs(c.green() - color.green()) + abs(c.blue() - color.blue()) < tol:
                n += 1
    return n


def test_screenshot_of_the_sample_has_every_block_with_readable_text(qtbot, doc, tmp_path):
    doc.open(SAMPLE)
    view = make_view(qtbot, doc, (1500, 560))
    view.fit_to_view()
    QApplication.processEvents()
    path = tmp_path / "canvas.png"
    view.viewport().grab().save(str(path))
    img = QImage(str(path))
    text = view.style_.text
    for nid, item in view.diagram_scene().node_items.items():
        rect = view.mapFromScene(item.sceneBoundingRect()).boundingRect()
        assert view.viewport().rect().contains(rect), nid
        title = rect.adjusted(0, 10, 0, -rect.height() + 40)
        assert text_pixels(img, title, text) > 25, nid  # the op name is drawn in the text colour


# ---------------------------------------------------------------------------- audit follow-ups
def header_ink(view, nid) -> int:
    """Text-coloured pixels in the header of block ``nid`` as the viewport shows it now."""
    QApplication.processEvents()
    img = view.viewport().grab().toImage()
    item = view.node_item(nid)
    body = item.body.translated(item.pos())
    header = QRectF(body.left(), body.top(), body.width(), view.style_.HEADER_H)
    return text_pixels(img, view.mapFromScene(header).boundingRect(), view.style_.text, tol=150)


def grid_page(n: int):
    from blockflow.project import Node, Project

    project = Project()
    page = project.add_page("main")
    for i in range(n):
        page.nodes[f"t{i}"] = Node(f"t{i}", "Tanh", position=((i % 40) * 200.0, (i // 40) * 120.0))
    return project


def test_titles_show_at_middle_zoom_on_small_pages_only(qtbot, qapp):
    from blockflow.gui.canvas.scene import FAR_TITLES_MAX_NODES
    from blockflow.gui.common.theme import Style

    qapp.setFont(QFont("DejaVu Sans", 9))
    for n, titled in ((8, True), (FAR_TITLES_MAX_NODES, False)):
        view = make_view(qtbot, Document(grid_page(n)))
        view._set_scale(0.4)                      # between FLAT_LOD and DETAIL_LOD
        assert Style.FLAT_LOD < view.zoom() < Style.DETAIL_LOD
        view.centerOn(view.node_item("t0").sceneBoundingRect().center())
        assert (header_ink(view, "t0") > 10) == titled, n
        view._set_scale(0.25)                     # far out: flat boxes on every page
        view.centerOn(view.node_item("t0").sceneBoundingRect().center())
        assert header_ink(view, "t0") == 0, n
        view.close()


def test_pasting_twice_at_the_same_spot_offsets_the_second_copy(qtbot, view, doc):
    two_blocks(doc)
    view.select_nodes(["x", "t"])
    view.copy_selection()
    view._last_scene_pos = QPointF(100, 400)
    first = view.paste()
    second = view.paste()
    third = view.paste()
    pos = lambda ids: min(tuple(doc.page().nodes[n].position) for n in ids)  # noqa: E731
    assert pos(first) == (100, 400)
    assert pos(second) != pos(first) and pos(third) not in (pos(first), pos(second))
    assert pos(second)[0] > 100 and pos(second)[1] > 400
    # once the stacked copies are gone (undone), a paste lands at the cursor again
    for _ in range(3):
        doc.undo_stack.undo()
    assert pos(view.paste()) == (100, 400)


def test_the_refusal_notice_stays_inside_the_viewport(qtbot, view, doc):
    vp = view.viewport().rect()
    reason = "cannot wire a.output to b.x: " + "a long reason that needs room " * 3
    for corner in (vp.bottomRight(), vp.topRight(), vp.bottomLeft(), vp.topLeft(), vp.center()):
        view.refuse(reason, view.mapToScene(corner))
        notice = view.notices.item
        assert view.notice_text() == reason
        shown = notice.deviceTransform(view.viewportTransform()).mapRect(notice.boundingRect())
        assert QRectF(vp).contains(shown), (corner, shown)


def test_the_canvas_follows_a_live_palette_change(qtbot, qapp, view, doc):
    from PySide6.QtGui import QPalette

    doc.add_node("Tanh", (0, 0), node_id="t")
    view.centerOn(QPointF(300, 300))
    mini = view.minimap()
    qtbot.addWidget(mini)
    mini.resize(200, 120)
    mini.show()
    QApplication.processEvents()
    corner = QPoint(3, 3)                     # empty canvas
    assert view.viewport().grab().toImage().pixelColor(corner).lightnessF() > 0.6
    assert mini.grab().toImage().pixelColor(corner).lightnessF() > 0.6
    body = view.mapFromScene(view.node_item("t").pos() + QPointF(20, 60))
    assert view.viewport().grab().toImage().pixelColor(body).lightnessF() > 0.6
    old = qapp.palette()
    dark = QPalette(old)
    for role, colour in ((QPalette.Window, "#2b2b2b"), (QPalette.Base, "#1e1e1e"),
                         (QPalette.Text, "#e6e6e6"), (QPalette.WindowText, "#e6e6e6"),
                         (QPalette.Button, "#353535"), (QPalette.ButtonText, "#e6e6e6")):
        dark.setColor(role, QColor(colour))
    try:
        qapp.setPalette(dark)
        QApplication.processEvents()
        assert view.style_.dark
        img = view.viewport().grab().toImage()
        assert img.pixelColor(corner).lightnessF() < 0.3
        assert img.pixelColor(body).lightnessF() < 0.3          # the block's cached look too
        assert mini.grab().toImage().pixelColor(corner).lightnessF() < 0.3
    finally:
        qapp.setPalette(old)
        QApplication.processEvents()
    assert view.viewport().grab().toImage().pixelColor(corner).lightnessF() > 0.6


@pytest.mark.parametrize("dst_at", [(0, 30), (0, 300), (-200, -300), (100, 0)])
def test_a_backward_wire_runs_around_both_blocks_not_through_them(view, doc, dst_at):
    doc.add_node("Placeholder", (400, 0), node_id="x", attrs={"shape": [3]})
    doc.add_node("Tanh", dst_at, node_id="t")
    doc.connect("x", "output", "t", "x")
    path = view.edge_item(Edge("x", "output", "t", "x")).path()
    boxes = [view.node_item(n).sceneBoundingRect().adjusted(8, 8, -8, -8) for n in ("x", "t")]
    points = [path.pointAtPercent(k / 200) for k in range(201)]
    assert not [p for p in points if any(b.contains(p) for b in boxes)]
    assert (points[0] - view.node_item("x").port_scene_pos("output")).manhattanLength() < 0.5
    assert (points[-1] - view.node_item("t").port_scene_pos("x")).manhattanLength() < 0.5


def test_a_paste_over_blocks_lands_beside_them_not_on_top(qtbot, view, doc):
    """Ctrl+V with the cursor on a block puts the copy in the nearest free place below or right
    of the cursor, covering no block (issue 16)."""
    two_blocks(doc)
    doc.connect("x", "output", "t", "x")
    view.select_nodes(["x", "t"])
    view.copy_selection()
    target = view.node_item("t").sceneBoundingRect()
    view._last_scene_pos = target.center()          # the mouse rests on block t
    ids = view.paste()
    assert len(ids) == 2
    old = [view.node_item(n).sceneBoundingRect() for n in ("x", "t", "i")]
    for nid in ids:
        rect = view.node_item(nid).sceneBoundingRect()
        assert not any(rect.intersects(r) for r in old), nid
    top_left = min(tuple(doc.page().nodes[n].position) for n in ids)
    assert top_left[0] >= round(target.center().x() / 20) * 20 - 1 and top_left[1] >= round(target.center().y() / 20) * 20 - 1
    again = view.paste()                             # and the next copy covers neither
    firsts = [view.node_item(n).sceneBoundingRect() for n in ids]
    for nid in again:
        rect = view.node_item(nid).sceneBoundingRect()
        assert not any(rect.intersects(r) for r in old + firsts), nid
