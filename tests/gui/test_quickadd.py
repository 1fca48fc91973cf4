"""The add-block popup (blockflow/gui/canvas/quickadd.py), driven like a user: Tab or a right-click
on empty canvas opens it at the cursor, typing filters, arrows move, Enter or a click adds, Escape
closes; a wire dropped on empty canvas opens it filtered and wires the chosen block."""
from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QContextMenuEvent
from PySide6.QtWidgets import QApplication, QToolButton

from blockflow.gui.canvas.quickadd import QuickAdd
from blockflow.gui.common.blocksearch import rank
from blockflow.gui.document.document import Document
from blockflow.gui.panels.palette import PalettePanel
from blockflow.io.project_io import load_project
from blockflow.project import Edge

from test_canvas import doc, make_view, port_pos, two_blocks, view  # noqa: F401  (fixtures)
from test_main_window import dialogs, make_window  # noqa: F401  (no modal dialog stops a test)

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_projects" / "stable_softmax.bflow.json"


def open_by_tab(qtbot, view, at: QPoint) -> QuickAdd:
    # Qt sends no move event when the cursor is already there (an earlier test may have left it
    # at the same place): a step beside it first makes the view see the cursor arrive.
    qtbot.mouseMove(view.viewport(), at + QPoint(7, 5))
    qtbot.mouseMove(view.viewport(), at)
    view.setFocus()
    qtbot.keyClick(view, Qt.Key_Tab)
    popup = view.quick_add
    assert popup.isVisible()
    return popup


def right_click(view, at: QPoint) -> None:
    vp = view.viewport()
    QApplication.sendEvent(vp, QContextMenuEvent(QContextMenuEvent.Mouse, at, vp.mapToGlobal(at)))


def drag_to(qtbot, view, a: QPoint, b: QPoint, steps=4):
    vp = view.viewport()
    qtbot.mousePress(vp, Qt.LeftButton, Qt.NoModifier, a)
    for i in range(1, steps + 1):
        qtbot.mouseMove(vp, a + (b - a) * (i / steps))
    qtbot.mouseRelease(vp, Qt.LeftButton, Qt.NoModifier, b)


def centre_of(view, nid) -> QPointF:
    return view.node_item(nid).sceneBoundingRect().center()


def test_tab_opens_the_popup_at_the_cursor_and_enter_adds_the_top_hit_there(qtbot, view, doc):
    at = QPoint(500, 300)
    popup = open_by_tab(qtbot, view, at)
    corner = view.viewport().mapFrom(view, popup.pos())
    assert (corner - at).manhattanLength() < 4          # opened at the cursor
    assert popup.edit.hasFocus()
    qtbot.keyClicks(popup.edit, "softmax")
    shown = popup.shown_blocks()
    assert shown[0] == "Softmax" and "LogSoftmax" in shown[1:]   # the palette's ranking
    qtbot.keyClick(popup.edit, Qt.Key_Down)
    assert popup.list.currentRow() == 1
    qtbot.keyClick(popup.edit, Qt.Key_Up)
    assert popup.list.currentRow() == 0
    steps = doc.undo_stack.count()
    qtbot.keyClick(popup.edit, Qt.Key_Return)
    assert not popup.isVisible() and view.hasFocus()
    assert [n.block for n in doc.page().nodes.values()] == ["Softmax"]
    nid = next(iter(doc.page().nodes))
    landed = view.mapFromScene(centre_of(view, nid))
    assert (landed - at).manhattanLength() < 30           # centred where the popup was opened
    assert doc.undo_stack.count() == steps + 1
    doc.undo_stack.undo()
    assert doc.page().nodes == {}


def test_a_block_added_from_the_popup_never_lands_on_another(qtbot, view, doc):
    """With the cursor off the canvas the popup opens at the view's centre: a block there is
    not covered by the new one, which moves down or right to the nearest free place."""
    centre = view.view_center_scene_pos()
    doc.add_node("Tanh", (round(centre.x()) - 40, round(centre.y()) - 30), node_id="t")
    QApplication.processEvents()
    view._last_scene_pos = None                        # the cursor is elsewhere
    view.setFocus()
    qtbot.keyClick(view, Qt.Key_Tab)
    popup = view.quick_add
    assert popup.isVisible()
    qtbot.keyClicks(popup.edit, "Exp")
    qtbot.keyClick(popup.edit, Qt.Key_Return)
    (new,) = [n for n in doc.page().nodes if n != "t"]
    QApplication.processEvents()
    assert not view.node_item(new).sceneBoundingRect().intersects(view.node_item("t").sceneBoundingRect())


def test_escape_closes_the_popup_with_no_edit(qtbot, view, doc):
    two_blocks(doc)
    steps = doc.undo_stack.count()
    popup = open_by_tab(qtbot, view, QPoint(600, 500))
    qtbot.keyClicks(popup.edit, "tanh")
    qtbot.keyClick(popup.edit, Qt.Key_Escape)
    assert not popup.isVisible()
    assert doc.undo_stack.count() == steps and set(doc.page().nodes) == {"x", "t", "i"}
    # a click on the canvas closes it too
    popup = open_by_tab(qtbot, view, QPoint(600, 500))
    qtbot.mouseClick(view.viewport(), Qt.LeftButton, Qt.NoModifier, QPoint(700, 550))
    assert not popup.isVisible() and doc.undo_stack.count() == steps


def test_a_click_in_the_list_adds_that_block(qtbot, view, doc):
    popup = open_by_tab(qtbot, view, QPoint(300, 200))
    qtbot.keyClicks(popup.edit, "sum")
    shown = popup.shown_blocks()
    assert shown[0] == "Sum"
    second = popup.list.item(1)
    rect = popup.list.visualItemRect(second)
    qtbot.mouseClick(popup.list.viewport(), Qt.LeftButton, Qt.NoModifier, rect.center())
    assert not popup.isVisible()
    assert [n.block for n in doc.page().nodes.values()] == [shown[1]]


def test_right_click_on_empty_canvas_opens_the_popup_and_its_foot_keeps_the_menu(qtbot, view, doc):
    two_blocks(doc)
    QApplication.processEvents()
    on_block = view.node_item("t").sceneBoundingRect().center()
    assert not view.quick_add.open_on_canvas(on_block)   # a block keeps its own menu
    right_click(view, QPoint(700, 500))
    popup = view.quick_add
    assert popup.isVisible() and popup.foot.isVisible() and not popup.title.isVisible()
    buttons = {b.text(): b for b in popup.foot.findChildren(QToolButton)}
    assert {"Paste", "Select all", "Lay out", "Fit", "Menu…"} <= set(buttons)
    qtbot.mouseClick(buttons["Select all"], Qt.LeftButton)
    assert not popup.isVisible() and set(view.selected_nodes()) == {"x", "t", "i"}
    # every block of the library is offered with nothing typed, as the old Add block menu did
    right_click(view, QPoint(700, 500))
    assert set(popup.shown_blocks()) == set(doc.registry.names())
    qtbot.keyClick(popup.edit, Qt.Key_Escape)


def test_the_project_composites_are_offered(qtbot, doc):
    doc.add_node("Placeholder", (0, 0), node_id="x", attrs={"shape": [3]})
    doc.add_node("Tanh", (300, 0), node_id="t")
    doc.connect("x", "output", "t", "x")
    doc.group(["t"], "Squash")
    view = make_view(qtbot, doc)
    popup = open_by_tab(qtbot, view, QPoint(600, 400))
    assert popup.shown_blocks()[0] == "@Squash"
    qtbot.keyClicks(popup.edit, "squash")
    assert popup.shown_blocks()[0] == "@Squash"
    qtbot.keyClick(popup.edit, Qt.Key_Return)
    assert sum(n.block == "@Squash" for n in doc.page().nodes.values()) == 2


def test_popup_and_palette_rank_alike(qtbot, doc):
    palette = PalettePanel(doc.registry)
    qtbot.addWidget(palette)
    view = make_view(qtbot, doc)
    for query in ("sum", "softmax", "max", "add"):
        palette.set_filter(query)
        popup = open_by_tab(qtbot, view, QPoint(400, 300))
        qtbot.keyClicks(popup.edit, query)
        assert popup.shown_blocks()[0] == palette.visible_blocks()[0], query
        assert palette.tree.currentItem().text(0) == popup.shown_blocks()[0]   # the palette's Enter
        names = [n.lower() for n in (query,)]
        assert rank(names, query) == 0
        qtbot.keyClick(popup.edit, Qt.Key_Escape)


# ---------------------------------------------------------------------------- a wire dropped on empty canvas
def test_a_wire_dropped_on_empty_canvas_offers_blocks_that_take_it_and_wires_the_choice(qtbot, view, doc):
    two_blocks(doc)
    QApplication.processEvents()
    steps = doc.undo_stack.count()
    drop = QPoint(700, 120)
    drag_to(qtbot, view, port_pos(view, "x", "output"), drop)
    popup = view.quick_add
    assert popup.isVisible() and popup.title.isVisible() and not popup.foot.isVisible()
    assert "float" in popup.title.text() and "x.output" in popup.title.text()
    shown = popup.shown_blocks()
    assert "Tanh" in shown and "Placeholder" not in shown   # a Placeholder has no input
    assert "Variable" not in shown
    qtbot.keyClicks(popup.edit, "tanh")
    qtbot.keyClick(popup.edit, Qt.Key_Return)
    new = [n for n in doc.page().nodes if n not in ("x", "t", "i")]
    assert len(new) == 1 and doc.page().nodes[new[0]].block == "Tanh"
    assert Edge("x", "output", new[0], "x") in doc.page().edges
    assert doc.undo_stack.count() == steps + 1           # the block and its wire: one step
    doc.undo_stack.undo()
    assert set(doc.page().nodes) == {"x", "t", "i"} and doc.page().edges == []


def test_a_wire_from_an_input_offers_blocks_that_give_its_type(qtbot, view, doc):
    two_blocks(doc)
    QApplication.processEvents()
    drag_to(qtbot, view, port_pos(view, "t", "x"), QPoint(90, 420))
    popup = view.quick_add
    assert popup.isVisible()
    shown = popup.shown_blocks()
    assert "Placeholder" in shown and "Tanh" in shown    # Tanh gives what its input was fed
    qtbot.keyClicks(popup.edit, "placeholder")
    qtbot.keyClick(popup.edit, Qt.Key_Return)
    new = [n for n in doc.page().nodes if n not in ("x", "t", "i")]
    assert Edge(new[0], "output", "t", "x") in doc.page().edges
    # an int input: a float Placeholder cannot feed it, and is not offered
    doc.add_node("ArgMax", (300, 300), node_id="a")
    QApplication.processEvents()
    drag_to(qtbot, view, port_pos(view, "a", "dimension"), QPoint(90, 560))
    assert popup.isVisible() and "int" in popup.title.text()
    assert "Placeholder" not in popup.shown_blocks() and "Shape" in popup.shown_blocks()
    qtbot.keyClick(popup.edit, Qt.Key_Escape)


def test_escape_after_a_wire_drop_leaves_no_block_and_no_wire(qtbot, view, doc):
    two_blocks(doc)
    QApplication.processEvents()
    steps = doc.undo_stack.count()
    drag_to(qtbot, view, port_pos(view, "x", "output"), QPoint(700, 120))
    popup = view.quick_add
    assert popup.isVisible()
    qtbot.keyClick(popup.edit, Qt.Key_Escape)
    assert not popup.isVisible()
    assert set(doc.page().nodes) == {"x", "t", "i"} and doc.page().edges == []
    assert doc.undo_stack.count() == steps


def shoot(view, tmp_path, name: str):
    """The view as it is, in tmp_path; in docs/ with BLOCKFLOW_UPDATE_SCREENSHOT=1."""
    QApplication.processEvents()
    image = view.grab().toImage()
    assert image.save(str(tmp_path / name))
    if os.environ.get("BLOCKFLOW_SHOTS"):
        image.save(os.path.join(os.environ["BLOCKFLOW_SHOTS"], name))
    if os.environ.get("BLOCKFLOW_UPDATE_SCREENSHOT"):
        image.save(str(ROOT / "docs" / name))
    return image


def test_screenshots_of_the_popup(qtbot, tmp_path):
    doc = Document(load_project(SAMPLE), None)
    view = make_view(qtbot, doc, size=(960, 540))
    view.fit_to_view()
    QApplication.processEvents()
    popup = open_by_tab(qtbot, view, QPoint(560, 90))
    qtbot.keyClicks(popup.edit, "soft")
    shoot(view, tmp_path, "quickadd.png")
    assert view.rect().contains(popup.geometry())
    assert popup.shown_blocks()[0] == "Softmax"
    qtbot.keyClick(popup.edit, Qt.Key_Escape)
    # a wire from Softmax_1's output dropped below it
    start = port_pos(view, "Softmax_1", "softmax")
    drag_to(qtbot, view, start, start + QPoint(40, 110))
    assert popup.isVisible() and popup.title.isVisible()
    shoot(view, tmp_path, "quickadd_wire.png")
    assert view.rect().contains(popup.geometry())
    qtbot.keyClick(popup.edit, Qt.Key_Escape)


def test_the_dropped_wire_stays_drawn_to_the_popup_until_it_closes(qtbot, view, doc):
    two_blocks(doc)
    QApplication.processEvents()
    drop = QPoint(700, 120)
    drag_to(qtbot, view, port_pos(view, "x", "output"), drop)
    popup = view.quick_add
    live = popup.live
    assert live is not None and live.scene() is view.scene()
    end = live.path().pointAtPercent(1.0)
    assert (view.mapFromScene(end) - drop).manhattanLength() < 3
    qtbot.keyClick(popup.edit, Qt.Key_Tab)                # Tab in the box moves down, as Down does
    assert popup.list.currentRow() == 1 and popup.isVisible()
    qtbot.keyClick(popup.edit, Qt.Key_Escape)
    assert popup.live is None and live.scene() is None


def test_in_the_editor_window_tab_opens_the_popup_and_its_keys_stay_in_it(qtbot, tmp_path, dialogs):
    window = make_window(qtbot, str(tmp_path / "settings.ini"), size=(1300, 800))
    window.activateWindow()
    view = window.view
    popup = open_by_tab(qtbot, view, QPoint(300, 200))
    qtbot.keyClicks(popup.edit, "relu")
    qtbot.keyClick(popup.edit, Qt.Key_Down)
    qtbot.keyClick(popup.edit, Qt.Key_Up)
    qtbot.keyClick(popup.edit, Qt.Key_Return)
    assert [n.block for n in window.document.page().nodes.values()] == ["Relu"]
    popup = open_by_tab(qtbot, view, QPoint(500, 300))
    qtbot.keyClick(popup.edit, Qt.Key_Escape)
    assert not popup.isVisible() and len(window.document.page().nodes) == 1
