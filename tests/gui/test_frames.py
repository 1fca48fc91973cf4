"""Frames around blocks, driven by real mouse and key events: made from the selection (the Edit
menu's shortcut, the canvas menu), edited by double-clicking the title, moved with their blocks
by the title bar, deleted without their blocks; each one undo step; the box follows the blocks."""
from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtWidgets import QApplication

from blockflow.page_layout import Frame
from blockflow.gui.canvas.frames import FrameDrag, FrameEditor, FrameItem

from test_canvas import doc, make_view, view, vp_pos  # noqa: F401  (the canvas tests' fixtures)
from test_main_window import make_window


def blocks(doc):
    doc.add_node("Placeholder", (0, 0), node_id="x", attrs={"shape": [3]})
    doc.add_node("Tanh", (260, 0), node_id="t")
    doc.add_node("Exp", (260, 160), node_id="e")
    doc.connect("x", "output", "t", "x")
    doc.connect("x", "output", "e", "x")


def frame_item(view, index=0) -> FrameItem:
    return view.canvas_layout.frames[index]


def title_point(view, index=0) -> QPoint:
    bar = frame_item(view, index).title_bar()
    return vp_pos(view, QPointF(bar.left() + 30, bar.center().y()))


def test_frame_the_selection_and_its_box_fits_the_blocks(qtbot, view, doc):
    blocks(doc)
    view.select_nodes(["t", "e"])
    view.canvas_layout.frame_selection()
    assert doc.page().frames == [Frame("Frame", "blue", "", ("t", "e"))]
    item = frame_item(view)
    for nid in ("t", "e"):
        assert item.box.contains(view.node_item(nid).sceneBoundingRect())
    assert not item.box.contains(view.node_item("x").sceneBoundingRect())
    assert item.zValue() < view.edge_item(doc.page().edges[0]).zValue() < view.node_item("t").zValue()
    doc.move_nodes({"e": ((260, 160), (260, 400))})       # the box follows a block moved
    assert item.box.contains(view.node_item("e").sceneBoundingRect())
    doc.undo_stack.undo()
    doc.undo_stack.undo()
    assert doc.page().frames == [] and not view.canvas_layout.frames


def test_the_canvas_menu_frames_the_selection(qtbot, view, doc):
    blocks(doc)
    view.select_nodes(["x", "t"])
    menu = view.context_menu(QPointF(600, 500))
    action = next(a for a in menu.actions() if a.text().startswith("Frame selection"))
    action.trigger()
    assert doc.page().frames[0].blocks == ("x", "t")


def test_ctrl_shift_f_in_the_window_frames_the_selection(qtbot, tmp_path, monkeypatch):
    from PySide6.QtWidgets import QMessageBox
    monkeypatch.setattr(QMessageBox, "question", staticmethod(lambda *a, **k: QMessageBox.Discard))
    window = make_window(qtbot, str(tmp_path / "settings.ini"))
    d = window.document
    blocks(d)
    window.view.select_nodes(["t", "e"])
    window.view.setFocus()
    qtbot.keyClick(window.view, Qt.Key_F, Qt.ControlModifier | Qt.ShiftModifier)
    assert [f.blocks for f in d.page().frames] == [("t", "e")]
    assert "frame_selection" in [a for a in _edit_menu_names()]


def _edit_menu_names():
    from blockflow.gui.main_window.actions import MENUS
    return next(items for title, items in MENUS if title == "&Edit")


def test_double_click_the_title_edits_title_colour_and_note(qtbot, view, doc):
    blocks(doc)
    doc.add_frame(["t", "e"])
    QApplication.processEvents()
    qtbot.mouseDClick(view.viewport(), Qt.LeftButton, Qt.NoModifier, title_point(view))
    editor = view.canvas_layout.editor
    assert isinstance(editor, FrameEditor) and editor.isVisible()
    editor.title.setText("Activations")
    editor.color.setCurrentIndex(editor.color.findData("green"))
    editor.note.setPlainText("tanh and exp of x\nside by side")
    editor.accept()
    assert doc.page().frames == [Frame("Activations", "green", "tanh and exp of x\nside by side", ("t", "e"))]
    assert doc.undo_stack.undoText() == "Edit frame"
    assert frame_item(view).frame.title == "Activations"
    doc.undo_stack.undo()
    assert doc.page().frames[0].title == "Frame"


def test_a_title_the_model_refuses_keeps_the_editor_open_with_the_reason(qtbot, view, doc):
    blocks(doc)
    doc.add_frame(["t"])
    editor = view.canvas_layout.edit_frame(0)
    messages = []
    view.status_message.connect(messages.append)
    editor.title.setText("a\u202eb")
    editor.accept()
    assert editor.isVisible() and "control characters" in messages[-1]
    assert doc.page().frames[0].title == "Frame"
    editor.reject()


def test_drag_the_title_bar_moves_the_frame_with_its_blocks_in_one_step(qtbot, view, doc):
    blocks(doc)
    doc.add_frame(["t", "e"])
    doc.set_bends(doc.page().edges[1], [(200, 120)])          # x -> e: one end outside, stays
    QApplication.processEvents()
    a = title_point(view)
    b = a + QPoint(100, 50)
    vp = view.viewport()
    qtbot.mousePress(vp, Qt.LeftButton, Qt.NoModifier, a)
    assert isinstance(view.interaction(), FrameDrag)
    for i in range(1, 5):
        qtbot.mouseMove(vp, a + (b - a) * (i / 4))
    qtbot.mouseRelease(vp, Qt.LeftButton, Qt.NoModifier, b)
    page = doc.page()
    assert page.nodes["t"].position == (360.0, 50.0) and page.nodes["e"].position == (360.0, 210.0)
    assert page.nodes["x"].position == (0.0, 0.0)
    assert page.bends[page.edges[1]] == ((200.0, 120.0),)
    assert frame_item(view).box.contains(view.node_item("t").sceneBoundingRect())
    assert doc.undo_stack.undoText().startswith("Move frame")
    doc.undo_stack.undo()
    assert page.nodes["t"].position == (260.0, 0.0) and page.nodes["e"].position == (260.0, 160.0)


def test_moving_a_frame_carries_the_points_of_wires_inside_it(qtbot, view, doc):
    blocks(doc)
    doc.add_frame(["x", "t"])
    doc.set_bends(doc.page().edges[0], [(130, 80)])
    doc.move_frame(0, 20, 30)
    assert doc.page().bends[doc.page().edges[0]] == ((150.0, 110.0),)
    doc.undo_stack.undo()
    assert doc.page().bends[doc.page().edges[0]] == ((130.0, 80.0),)


def test_delete_a_frame_keeps_its_blocks(qtbot, view, doc):
    blocks(doc)
    doc.add_frame(["t", "e"])
    QApplication.processEvents()
    qtbot.mouseClick(view.viewport(), Qt.LeftButton, Qt.NoModifier, title_point(view))
    assert view.canvas_layout.selected_frame == 0 and frame_item(view).selected_frame
    qtbot.keyClick(view, Qt.Key_Delete)
    assert doc.page().frames == [] and set(doc.page().nodes) == {"x", "t", "e"}
    doc.undo_stack.undo()
    assert len(doc.page().frames) == 1
    menu = view.context_menu(frame_item(view).title_bar().center() + QPointF(-40, 0))
    next(a for a in menu.actions() if a.text().startswith("Delete frame")).trigger()
    assert doc.page().frames == [] and set(doc.page().nodes) == {"x", "t", "e"}


def test_blocks_removed_leave_the_frame_renamed_ones_stay(qtbot, view, doc):
    blocks(doc)
    doc.add_frame(["t", "e"])
    doc.remove_nodes(["e"])
    assert doc.page().frames[0].blocks == ("t",)
    doc.undo_stack.undo()
    assert doc.page().frames[0].blocks == ("t", "e")
    doc.rename_node("t", "tanh")
    assert doc.page().frames[0].blocks == ("tanh", "e")
    assert frame_item(view).box.contains(view.node_item("tanh").sceneBoundingRect())
    doc.remove_nodes(["tanh", "e"])
    assert doc.page().frames == [] and not view.canvas_layout.frames


def test_screenshot_of_frames_and_reroute_points(qtbot, tmp_path, monkeypatch):
    """The picture in docs/editor.md ("Reroute points and frames"): the stable softmax sample
    with two frames and a wire rerouted under the max, after Backward (gradient colours on the
    rerouted wire). Saved to docs/ only with BLOCKFLOW_UPDATE_SCREENSHOT=1."""
    from PySide6.QtWidgets import QMessageBox
    from blockflow.io.project_io import load_project
    from blockflow.gui.document.document import Document
    from blockflow.project import Edge
    monkeypatch.setattr(QMessageBox, "question", staticmethod(lambda *a, **k: QMessageBox.Discard))
    root = Path(__file__).resolve().parents[2]
    doc = Document(load_project(root / "sample_projects" / "stable_softmax.bflow.json"), None)
    window = make_window(qtbot, str(tmp_path / "settings.ini"), doc, size=(1700, 1050))
    doc.add_frame(["Max_1", "StopGradient_1", "Subtract_1"], title="Shift by the max", color="teal",
                  note="exp never overflows; no gradient flows through the max")
    doc.add_frame(["w", "Multiply_1", "Sum_1"], title="Weighted loss", color="orange")
    rerouted = Edge("x", "output", "Subtract_1", "x")
    doc.set_bends(rerouted, [(240, 350), (480, 350)])
    from test_gradients import backward
    window.view.gradients.show(backward(doc)[1])      # the rerouted wire coloured by its gradient
    window.view.fit_to_view()
    QApplication.processEvents()
    qtbot.wait(50)
    image = window.view.viewport().grab().toImage()
    assert image.save(str(tmp_path / "frames.png"))
    if os.environ.get("BLOCKFLOW_SHOTS_DIR"):
        image.save(os.path.join(os.environ["BLOCKFLOW_SHOTS_DIR"], "frames.png"))
    if os.environ.get("BLOCKFLOW_UPDATE_SCREENSHOT"):
        image.save(str(root / "docs" / "frames.png"))
    view = window.view
    for i, item in enumerate(view.canvas_layout.frames):
        box = view.mapFromScene(item.box).boundingRect()
        assert view.viewport().rect().contains(box), i          # both frames in the fitted view
    assert view.edge_item(rerouted).path().boundingRect().bottom() >= 349
    assert view.edge_item(rerouted).grad_pen is not None


def test_refused_edits_leave_no_undo_step(qtbot, view, doc):
    import pytest
    from blockflow.errors import ProjectError
    blocks(doc)
    count = doc.undo_stack.count()
    with pytest.raises(ProjectError, match="unknown frame colour"):
        doc.add_frame(["t"], color="mauve")
    doc.add_frame(["t"])
    count = doc.undo_stack.count()
    with pytest.raises(ProjectError, match="control characters"):
        doc.edit_frame(0, title="a\x1bb")
    with pytest.raises(ProjectError, match="finite"):
        doc.set_bends(doc.page().edges[0], [(float("nan"), 0)])
    assert doc.undo_stack.count() == count and doc.page().frames[0].title == "Frame"


def test_the_no_display_render_draws_frames_and_rerouted_wires(qapp, tmp_path):
    """render_page (File > Export PNG, `blockflow` pictures) draws frames, with room for them,
    and wires through their points."""
    from PySide6.QtGui import QColor, QImage
    from blockflow.gui.canvas.frames import FRAME_HUES
    from blockflow.gui.canvas.render import render_page
    from blockflow.io.project_io import load_project
    from blockflow.project import Edge
    root = Path(__file__).resolve().parents[2]
    project = load_project(root / "sample_projects" / "stable_softmax.bflow.json")
    plain = tmp_path / "plain.png"
    render_page(project, None, plain)
    page = project.pages[0]
    page.insert_frame(Frame("Shift", "red", "", ("Max_1", "StopGradient_1")))
    page.set_bends(Edge("x", "output", "Subtract_1", "x"), [(300, 600)])
    framed = tmp_path / "framed.png"
    render_page(project, None, framed)
    a, b = QImage(str(plain)), QImage(str(framed))
    assert b.height() > a.height() + 200                  # the point far below is in the picture
    red = QColor(FRAME_HUES["red"])
    reddish = sum(1 for y in range(0, b.height(), 3) for x in range(0, b.width(), 3)
                  if (lambda c: c.red() > c.green() + 25 and c.red() > c.blue() + 25)(b.pixelColor(x, y)))
    assert reddish > 200 and red.red() > red.green()       # the frame's tint and edge are drawn


def test_right_click_on_a_frame_title_gives_its_menu_not_the_add_popup(qtbot, view, doc, monkeypatch):
    from PySide6.QtGui import QContextMenuEvent
    blocks(doc)
    doc.add_frame(["t", "e"])
    QApplication.processEvents()
    shown, real = [], view.context_menu

    class Shown:                  # the menu is looked at, not run (exec would block)
        def exec(self, *_):
            pass

    def looked_at(sp):
        shown.append([x.text() for x in real(sp).actions()])
        return Shown()
    monkeypatch.setattr(view, "context_menu", looked_at)
    pos = title_point(view)
    QApplication.sendEvent(view.viewport(), QContextMenuEvent(QContextMenuEvent.Mouse, pos,
                                                              view.viewport().mapToGlobal(pos)))
    assert shown and shown[0][0] == "Edit frame…" and not view.quick_add.isVisible()


def test_edits_of_a_page_without_points_or_frames_rebuild_no_layout(qtbot, view, doc, monkeypatch):
    """A paste of many blocks on a page with no reroute points or frames does not rebuild the
    layout layer once per block and wire; with a frame on the page it follows every edit."""
    layer = view.canvas_layout
    syncs = []
    monkeypatch.setattr(layer, "sync", lambda: syncs.append(1))
    for k in range(5):
        doc.add_node("Tanh", (200.0 * k, 0.0), node_id=f"t{k}")
    doc.paste_fragment(doc.copy_fragment([f"t{k}" for k in range(5)]), (0.0, 300.0))
    assert syncs == []
    monkeypatch.undo()
    doc.add_frame(["t0"])
    monkeypatch.setattr(layer, "sync", lambda: syncs.append(1))
    doc.add_node("Exp", (0.0, 600.0), node_id="e")
    assert syncs
