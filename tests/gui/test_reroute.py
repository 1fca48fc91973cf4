"""Reroute points on wires, driven by real mouse and key events on the canvas: a double-click on
a wire adds one, a drag moves it, a double-click (or a click and Delete) removes it; each is one
undo step, and the wire is drawn, selected and coloured through its points."""
from __future__ import annotations

from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtWidgets import QApplication

from blockflow.project import Edge
from blockflow.gui.canvas.reroute import BendDrag

from test_canvas import doc, drag, make_view, view, vp_pos  # noqa: F401  (the canvas tests' fixtures)

WIRE = Edge("x", "output", "t", "x")


def wired(doc):
    doc.add_node("Placeholder", (0, 0), node_id="x", attrs={"shape": [3]})
    doc.add_node("Tanh", (400, 0), node_id="t")
    doc.connect("x", "output", "t", "x")


def wire_point(view, t: float = 0.5) -> QPointF:
    return view.edge_item(WIRE).path().pointAtPercent(t)


def dclick(qtbot, view, at: QPoint) -> None:
    qtbot.mouseDClick(view.viewport(), Qt.LeftButton, Qt.NoModifier, at)
    QApplication.processEvents()


def test_double_click_on_a_wire_adds_a_point_the_wire_goes_through(qtbot, view, doc):
    wired(doc)
    QApplication.processEvents()
    at = wire_point(view)
    dclick(qtbot, view, vp_pos(view, at))
    points = doc.page().bends[WIRE]
    assert len(points) == 1 and abs(points[0][0] - at.x()) <= 2 and abs(points[0][1] - at.y()) <= 2
    item = view.edge_item(WIRE)
    assert item.points == points
    path = item.path()
    assert min(abs(path.pointAtPercent(k / 200).x() - points[0][0]) + abs(path.pointAtPercent(k / 200).y()
                                                                           - points[0][1])
               for k in range(201)) < 3                 # the wire passes through its point
    assert len(view.canvas_layout.handles) == 1
    assert doc.undo_stack.undoText() == "Add reroute point"
    doc.undo_stack.undo()
    assert doc.page().bends == {} and view.edge_item(WIRE).points == () and not view.canvas_layout.handles


def test_drag_a_point_reroutes_the_wire_in_one_undo_step(qtbot, view, doc):
    wired(doc)
    doc.set_bends(WIRE, [(200, 60)])
    QApplication.processEvents()
    a = vp_pos(view, QPointF(200, 60))
    b = a + QPoint(0, 120)
    vp = view.viewport()
    qtbot.mousePress(vp, Qt.LeftButton, Qt.NoModifier, a)
    assert isinstance(view.interaction(), BendDrag)
    for i in range(1, 5):
        qtbot.mouseMove(vp, a + (b - a) * (i / 4))
    assert doc.page().bends[WIRE] == ((200.0, 60.0),)          # the model changes on release
    assert view.edge_item(WIRE).points[0][1] > 150              # ... the wire follows already
    qtbot.mouseRelease(vp, Qt.LeftButton, Qt.NoModifier, b)
    (x, y), = doc.page().bends[WIRE]
    assert abs(x - 200) < 1 and abs(y - 180) < 2 and view.interaction() is None
    assert view.edge_item(WIRE).path().boundingRect().bottom() >= 178
    assert doc.undo_stack.undoText() == "Move reroute point"
    doc.undo_stack.undo()
    assert doc.page().bends[WIRE] == ((200.0, 60.0),)
    assert view.canvas_layout.handles[(WIRE, 0)].pos() == QPointF(200, 60)


def test_double_click_or_delete_removes_a_point(qtbot, view, doc):
    wired(doc)
    doc.set_bends(WIRE, [(150, 60), (250, -40)])
    QApplication.processEvents()
    dclick(qtbot, view, vp_pos(view, QPointF(150, 60)))
    assert doc.page().bends[WIRE] == ((250.0, -40.0),)
    a = vp_pos(view, QPointF(250, -40))
    qtbot.mouseClick(view.viewport(), Qt.LeftButton, Qt.NoModifier, a)
    assert view.canvas_layout.selected_point == (WIRE, 0)
    qtbot.keyClick(view, Qt.Key_Delete)
    assert WIRE not in doc.page().bends and set(doc.page().nodes) == {"x", "t"}   # the blocks stay
    assert doc.page().edges == [WIRE]


def test_a_second_point_goes_between_its_neighbours(qtbot, view, doc):
    wired(doc)
    doc.set_bends(WIRE, [(120, 80), (300, 80)])
    QApplication.processEvents()
    dclick(qtbot, view, vp_pos(view, view.edge_item(WIRE).path().pointAtPercent(0.5)))
    xs = [p[0] for p in doc.page().bends[WIRE]]
    assert len(xs) == 3 and xs[0] == 120 and xs[2] == 300 and 120 < xs[1] < 300


def test_a_wire_with_points_is_selected_and_coloured_as_any(qtbot, view, doc):
    wired(doc)
    doc.set_bends(WIRE, [(200, 160)])
    QApplication.processEvents()
    item = view.edge_item(WIRE)
    at = item.path().pointAtPercent(0.3)
    qtbot.mouseClick(view.viewport(), Qt.LeftButton, Qt.NoModifier, vp_pos(view, at))
    assert view.selected_wires() == [WIRE]
    from PySide6.QtGui import QPen, QColor
    pen = QPen(QColor("#ff0000"), 3)
    view.select_wires([])
    item.set_grad_pen(pen)
    assert item.pen().color() == QColor("#ff0000") and item.points == ((200.0, 160.0),)


def test_removing_the_wire_or_its_block_drops_points_and_undo_brings_them_back(qtbot, view, doc):
    wired(doc)
    doc.set_bends(WIRE, [(200, 160)])
    QApplication.processEvents()
    doc.disconnect([WIRE])
    assert doc.page().bends == {} and not view.canvas_layout.handles
    doc.undo_stack.undo()
    assert doc.page().bends == {WIRE: ((200.0, 160.0),)} and view.edge_item(WIRE).points == ((200.0, 160.0),)
    view.select_nodes(["t"])
    qtbot.keyClick(view, Qt.Key_Delete)
    assert doc.page().bends == {} and "t" not in doc.page().nodes
    doc.undo_stack.undo()
    assert doc.page().bends == {WIRE: ((200.0, 160.0),)} and len(view.canvas_layout.handles) == 1
    doc.rename_node("t", "tanh")
    renamed = Edge("x", "output", "tanh", "x")
    assert doc.page().bends == {renamed: ((200.0, 160.0),)}
    assert view.edge_item(renamed).points == ((200.0, 160.0),) and len(view.canvas_layout.handles) == 1


def test_copy_and_paste_carry_the_points_of_the_wires_copied(qtbot, view, doc):
    wired(doc)
    doc.set_bends(WIRE, [(200, 160)])
    doc.add_node("Exp", (400, 300), node_id="e")
    doc.connect("x", "output", "e", "x")
    doc.set_bends(Edge("x", "output", "e", "x"), [(100, 300)])
    view.select_nodes(["x", "t"])
    text = view.copy_selection()
    new = doc.paste_fragment(text, (0, 500))
    page = doc.page()
    copied = next(e for e in page.edges if e.src in new and e.dst in new)
    assert page.bends[copied] == ((200.0, 660.0),)              # moved with the blocks
    assert len(page.bends) == 3 and doc.undo_stack.undoText().startswith("Paste")
    assert view.edge_item(copied).points == ((200.0, 660.0),)
    doc.undo_stack.undo()
    assert len(doc.page().bends) == 2


def test_a_wire_rerouted_far_off_is_bounded_where_it_now_runs(qtbot, doc):
    """The wire's outline (its bounding rect, what a click and the scene's index use) follows
    its new path: Qt asks for the old outline while the path changes (in a scene, as the
    no-display render's), and it must not stay cached."""
    from blockflow.gui.canvas.scene import DiagramScene
    from blockflow.gui.common.theme import Style
    wired(doc)
    scene = DiagramScene(doc.blocks, Style())
    scene.load(doc.page())
    item = scene.edge_items[WIRE]
    item.points = ((200.0, 300.0),)
    item.update_path()
    assert item.sceneBoundingRect().bottom() >= 300
    assert item.shape().boundingRect().bottom() >= 300
