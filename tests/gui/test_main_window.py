"""The editor window driven like a user: palette drops, port-to-port drags, the inspector, menus,
files, page tabs, settings, and a screenshot that must show readable text and every block."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import QMimeData, QPoint, QPointF, QSettings, Qt, QUrl
from PySide6.QtGui import (QColor, QDragEnterEvent, QDragMoveEvent, QDropEvent, QFont, QImage, QPalette,
                           QPainter, QTransform)
from PySide6.QtWidgets import QAbstractSpinBox, QApplication, QFileDialog, QInputDialog, QMessageBox

from blockflow.compile.compiler import compile_page
from blockflow.gui.document.document import Document
from blockflow.gui.main_window import MainWindow, read_recent_files, sample_projects
from blockflow.io.project_io import dumps_project, load_project
from blockflow.run.runtime import run_backward

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_projects" / "stable_softmax.bflow.json"


# ------------------------------------------------------------------------------- fixtures


class Dialogs:
    """Stand-ins for the modal dialogs: answers are queued by the test, calls are recorded."""

    def __init__(self):
        self.calls: list[tuple[str, str, str]] = []
        self.answers: list = []          # for QMessageBox.question, in order
        self.open_path: str | None = None
        self.save_path: str | None = None
        self.text: tuple[str, bool] | None = None

    def kinds(self) -> list[str]:
        return [c[0] for c in self.calls]


@pytest.fixture(autouse=True)
def dialogs(monkeypatch, qapp):
    qapp.setFont(QFont("DejaVu Sans", 9))
    d = Dialogs()

    def question(parent, title, text, *args, **kw):
        d.calls.append(("question", title, text))
        return d.answers.pop(0) if d.answers else QMessageBox.Discard

    def note(kind):
        def show(parent, title, text, *args, **kw):
            d.calls.append((kind, title, text))
            return QMessageBox.Ok
        return staticmethod(show)

    monkeypatch.setattr(QMessageBox, "question", staticmethod(question))
    for kind in ("critical", "warning", "information", "about"):
        monkeypatch.setattr(QMessageBox, kind, note(kind))

    def get_open(*args, **kw):
        d.calls.append(("open_dialog", "", ""))
        return (d.open_path or "", "")

    def get_save(*args, **kw):
        d.calls.append(("save_dialog", "", kw.get("dir", args[2] if len(args) > 2 else "")))
        return (d.save_path or "", "")

    def get_text(*args, **kw):
        d.calls.append(("text_dialog", "", ""))
        return d.text or ("", False)

    monkeypatch.setattr(QFileDialog, "getOpenFileName", staticmethod(get_open))
    monkeypatch.setattr(QFileDialog, "getSaveFileName", staticmethod(get_save))
    monkeypatch.setattr(QInputDialog, "getText", staticmethod(get_text))
    return d


@pytest.fixture
def settings_path(tmp_path):
    return str(tmp_path / "settings.ini")


def make_window(qtbot, settings_path, document=None, size=(1440, 880)):
    window = MainWindow(document or Document(), QSettings(settings_path, QSettings.IniFormat))
    qtbot.addWidget(window)
    window.resize(*size)
    window.show()
    qtbot.waitExposed(window)
    QApplication.processEvents()
    return window


@pytest.fixture
def window(qtbot, settings_path):
    return make_window(qtbot, settings_path)


@pytest.fixture
def sample_window(qtbot, settings_path, tmp_path):
    path = tmp_path / "softmax.bflow.json"
    path.write_bytes(SAMPLE.read_bytes())
    doc = Document(load_project(path), str(path))
    win = make_window(qtbot, settings_path, doc)
    win.view.fit_to_view()
    return win


# ------------------------------------------------------------------------------- gestures


def palette_drop(window, block: str, scene_point: QPointF) -> None:
    """Drop what the palette's drag carries for ``block`` onto the canvas, as Qt delivers it."""
    palette = window.palette_panel
    mime = palette.tree.mimeData([palette.item_for(block)])
    vp = window.view.viewport()
    at = window.view.mapFromScene(scene_point)
    for event in (QDragEnterEvent(at, Qt.CopyAction, mime, Qt.LeftButton, Qt.NoModifier),
                  QDragMoveEvent(at, Qt.CopyAction, mime, Qt.LeftButton, Qt.NoModifier),
                  QDropEvent(QPointF(at), Qt.CopyAction, mime, Qt.LeftButton, Qt.NoModifier)):
        QApplication.sendEvent(vp, event)
        assert event.isAccepted()


def wire(qtbot, view, src: str, src_port: str, dst: str, dst_port: str) -> None:
    """Press on an output port, move in steps, release on an input port."""
    vp = view.viewport()
    a = view.mapFromScene(view.node_item(src).port_scene_pos(src_port))
    b = view.mapFromScene(view.node_item(dst).port_scene_pos(dst_port))
    qtbot.mousePress(vp, Qt.LeftButton, Qt.NoModifier, a)
    for i in range(1, 6):
        qtbot.mouseMove(vp, a + (b - a) * (i / 5))
    qtbot.mouseRelease(vp, Qt.LeftButton, Qt.NoModifier, b)


def click_node(qtbot, view, node: str) -> None:
    rect = view.node_item(node).sceneBoundingRect()
    qtbot.mouseClick(view.viewport(), Qt.LeftButton, Qt.NoModifier,
                     view.mapFromScene(rect.center()))
    assert view.selected_nodes() == [node]


def commit_text(qtbot, edit, text: str) -> None:
    edit.setFocus()
    edit.selectAll()
    qtbot.keyClicks(edit, text)
    qtbot.keyClick(edit, Qt.Key_Return)


def settle(qtbot, inspector):
    """Let the inspector's deferred refresh run."""
    qtbot.waitUntil(lambda: not inspector._refresh.pending(), timeout=2000)


def same_value(a, b) -> bool:
    if isinstance(a, (np.ndarray, list, tuple)) or isinstance(b, (np.ndarray, list, tuple)):
        a, b = np.asarray(a), np.asarray(b)
        return a.shape == b.shape and np.array_equal(a.astype(np.float64), b.astype(np.float64))
    return a == b


# ------------------------------------------------------------------------------- the end-to-end build


def test_build_the_stable_softmax_sample_with_the_mouse_and_the_inspector(
        qtbot, settings_path, dialogs, tmp_path):
    window = make_window(qtbot, settings_path, size=(1920, 1000))
    doc, view, inspector = window.document, window.view, window.inspector
    empty = dumps_project(doc.project)
    want = load_project(SAMPLE).page("stable_softmax")

    # The page takes the sample's name (so the scope does too): double-click its tab.
    dialogs.text = ("stable_softmax", True)
    qtbot.mouseDClick(window.tabs, Qt.LeftButton, Qt.NoModifier, window.tabs.tabRect(0).center())
    assert doc.current_page == "stable_softmax" and window.tabs.tabText(0) == "stable_softmax"
    assert "stable_softmax/" in window.tabs.tabToolTip(0)

    view.setTransform(QTransform.fromScale(0.8, 0.8))
    view.centerOn(QPointF(760, 200))
    QApplication.processEvents()

    # Blocks from the palette, dropped where the sample has them.
    ids: dict[str, str] = {}
    for sid, node in want.nodes.items():
        before = set(doc.page().nodes)
        palette_drop(window, node.block, QPointF(node.position[0] + 60, node.position[1] + 30))
        (new,) = set(doc.page().nodes) - before
        assert doc.page().nodes[new].block == node.block
        ids[sid] = new
    assert len(view.diagram_scene().node_items) == len(want.nodes)

    # The input's shape, feed and label, through the inspector's widgets.
    x, w, total = ids["x"], ids["w"], ids["Sum_1"]
    click_node(qtbot, view, x)
    settle(qtbot, inspector)
    assert inspector.full_name.text() == f"stable_softmax/{x}"
    steps = doc.undo_stack.count()
    commit_text(qtbot, inspector.field("attr:shape"), "[5")       # a typo is refused ...
    assert inspector.field_error("attr:shape") and doc.undo_stack.count() == steps
    commit_text(qtbot, inspector.field("attr:shape"), "[5]")      # ... and the fix applied
    settle(qtbot, inspector)
    commit_text(qtbot, inspector.field("feed"), "[2, 1, 0.1, 3, -1]")
    settle(qtbot, inspector)
    commit_text(qtbot, inspector.field("label"), "logits x")
    settle(qtbot, inspector)

    # Wires, port to port; each lands as one undo step.
    for e in sorted(want.edges, key=lambda e: list(want.nodes).index(e.src)):
        steps = doc.undo_stack.count()
        wire(qtbot, view, ids[e.src], e.src_port, ids[e.dst], e.dst_port)
        assert doc.undo_stack.count() == steps + 1, view.notice_text()
    assert {(e.src, e.src_port, e.dst, e.dst_port) for e in doc.page().edges} == \
        {(ids[e.src], e.src_port, ids[e.dst], e.dst_port) for e in want.edges}

    # The constant, the loss and the labels.
    click_node(qtbot, view, w)
    settle(qtbot, inspector)
    commit_text(qtbot, inspector.field("attr:value"), "[1.0, -2.0, 0.5, 3.0, 1.5]")
    settle(qtbot, inspector)
    commit_text(qtbot, inspector.field("label"), "weights w")
    click_node(qtbot, view, total)
    settle(qtbot, inspector)
    loss = inspector.field("loss")
    qtbot.mouseClick(loss, Qt.LeftButton, Qt.NoModifier, QPoint(8, loss.height() // 2))
    assert doc.page().loss == total
    settle(qtbot, inspector)
    commit_text(qtbot, inspector.field("label"), "loss")
    settle(qtbot, inspector)
    assert window.problems.errors == 0 and doc.program().ok

    # Save through the menu action: the dialog's name gets the project suffix.
    dialogs.save_path = str(tmp_path / "built")
    window.actions["save"].trigger()
    saved = tmp_path / "built.bflow.json"
    assert saved.is_file() and doc.path == str(saved)
    assert window.windowTitle().startswith("built.bflow.json —") and not doc.dirty

    # The saved file compiles to the sample's program.
    got_page = load_project(saved).page("stable_softmax")
    want_prog, got_prog = compile_page(want), compile_page(got_page)
    assert got_prog.ok and want_prog.ok
    assert [ids[s.node] for s in want_prog.steps] == [s.node for s in got_prog.steps]
    for sid, node in want.nodes.items():
        mine = got_page.nodes[ids[sid]]
        assert (mine.block, mine.label) == (node.block, node.label)
        spec = doc.registry[node.block]
        a, _ = spec.validate_attrs(node.attrs)
        b, _ = spec.validate_attrs(mine.attrs)
        assert a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a), (sid, a, b)
    assert {(ids[e.src], e.src_port, ids[e.dst], e.dst_port): t for e, t in want_prog.edge_types.items()} == \
        {(e.src, e.src_port, e.dst, e.dst_port): t for e, t in got_prog.edge_types.items()}
    assert got_page.loss == ids[want.loss]
    assert got_page.feeds[x].dtype == want.feeds["x"].dtype
    assert np.array_equal(got_page.feeds[x], want.feeds["x"])
    want_run, got_run = run_backward(want_prog, record=True), run_backward(got_prog, record=True)
    for sid in want.nodes:
        assert np.array_equal(want_run.value(sid), got_run.value(ids[sid]))
        gw, gg = want_run.grad(sid), got_run.grad(ids[sid])
        assert (gw is None) == (gg is None) and (gw is None or np.allclose(gw, gg, rtol=1e-6))

    # Undo every step back to the empty project, then redo to the end.
    built = dumps_project(doc.project)
    n = doc.undo_stack.count()
    for _ in range(n):
        window.actions["undo"].trigger()
    assert dumps_project(doc.project) == empty
    assert not view.diagram_scene().node_items and doc.current_page == "main"
    assert window.tabs.tabText(0) == "main"
    for _ in range(n):
        window.actions["redo"].trigger()
    assert dumps_project(doc.project) == built and not doc.dirty
    assert set(view.diagram_scene().node_items) == set(doc.page().nodes)


def test_refused_wires_leave_the_project_unchanged(qtbot, sample_window):
    window = sample_window
    doc, view = window.document, window.view
    view.setTransform(QTransform.fromScale(0.7, 0.7))
    view.centerOn(QPointF(760, 220))
    window.palette_panel.search.setText("Placeholder")
    palette_drop(window, "Placeholder", QPointF(660, 400))
    (ints,) = set(doc.page().nodes) - set(load_project(SAMPLE).page().nodes)
    doc.set_attr(ints, "dtype", "int32")
    before, steps = dumps_project(doc.project), doc.undo_stack.count()
    wire(qtbot, view, "Sum_1", "output", "Max_1", "input")                  # a cycle
    assert "cycle" in view.notice_text()
    wire(qtbot, view, ints, "output", "Softmax_1", "logits")                # int into float
    assert "float" in view.notice_text()
    wire(qtbot, view, "x", "output", "Max_1", "output")                     # two outputs
    assert dumps_project(doc.project) == before and doc.undo_stack.count() == steps
    assert window.statusBar().currentMessage()


# ------------------------------------------------------------------------------- files


def test_title_shows_the_file_and_a_dirty_marker(qtbot, sample_window):
    window = sample_window
    assert window.windowTitle() == "softmax.bflow.json — blockflow"
    window.document.add_node("Relu", (0, 600))
    assert window.windowTitle() == "softmax.bflow.json * — blockflow"
    window.actions["undo"].trigger()
    assert window.windowTitle() == "softmax.bflow.json — blockflow"


def test_close_with_unsaved_changes_asks_save_discard_or_cancel(qtbot, sample_window, dialogs):
    window, doc = sample_window, sample_window.document
    doc.add_node("Relu", (0, 600))
    dialogs.answers = [QMessageBox.Cancel]
    assert not window.close()
    assert window.isVisible() and dialogs.kinds() == ["question"]
    assert "softmax.bflow.json" in dialogs.calls[0][2]
    dialogs.answers = [QMessageBox.Save]
    assert window.close()
    assert not doc.dirty and "Relu_1" in load_project(doc.path).page().nodes


def test_new_with_unsaved_changes_can_discard(qtbot, sample_window, dialogs):
    doc = sample_window.document
    doc.add_node("Relu", (0, 600))
    dialogs.answers = [QMessageBox.Discard]
    sample_window.actions["new"].trigger()
    assert [p.name for p in doc.project.pages] == ["main"] and not doc.page().nodes
    assert sample_window.windowTitle().startswith("Untitled — ")


def test_a_file_that_fails_to_load_shows_its_error_and_keeps_the_project(qtbot, sample_window, dialogs,
                                                                         tmp_path):
    doc = sample_window.document
    before, path = dumps_project(doc.project), doc.path
    bad = tmp_path / "broken.bflow.json"
    bad.write_text('{"format": "blockflow-project", "version": 1, "pages": [', encoding="utf-8")
    dialogs.open_path = str(bad)
    sample_window.actions["open"].trigger()
    (kind, title, text), = [c for c in dialogs.calls if c[0] == "critical"]
    assert "broken.bflow.json" in text and "Cannot open" in title
    assert dumps_project(doc.project) == before and doc.path == path
    assert sample_window.recent_files() == []


def test_recent_files_survive_a_new_settings_object(qtbot, window, settings_path, tmp_path):
    paths = []
    for name in ("a", "b"):
        p = tmp_path / f"{name}.bflow.json"
        p.write_bytes(SAMPLE.read_bytes())
        paths.append(str(p))
    assert window.open_file(paths[0])
    # one entry comes back from the INI file as a str, not a list
    assert read_recent_files(QSettings(settings_path, QSettings.IniFormat)) == [paths[0]]
    assert window.open_file(paths[1]) and window.open_file(paths[0])
    assert read_recent_files(QSettings(settings_path, QSettings.IniFormat)) == [paths[0], paths[1]]
    window._fill_recent_menu()
    entries = [a for a in window.recent_menu.actions() if a.data()]
    assert [a.data() for a in entries] == [paths[0], paths[1]]
    entries[1].trigger()
    assert window.document.path == paths[1]


def test_open_sample_menu_opens_an_untitled_copy(qtbot, window):
    samples = sample_projects()
    assert "stable_softmax.bflow.json" in [p.name for p in samples]
    (action,) = [a for a in window.sample_menu.actions() if a.data() and a.data().endswith("stable_softmax.bflow.json")]
    action.trigger()
    doc = window.document
    assert doc.path is None and [p.name for p in doc.project.pages] == \
        ["stable_softmax", "by_hand", "without_stop_gradient", "naive"]
    assert window.tabs.count() == 4 and window.tabs.tabText(3) == "naive"
    assert "Stable softmax" in window.windowTitle()


def test_dropping_a_project_file_on_the_window_opens_it(qtbot, window, tmp_path):
    path = tmp_path / "dropped.bflow.json"
    path.write_bytes(SAMPLE.read_bytes())
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(path))])
    vp = window.view.viewport()
    at = QPoint(100, 100)
    for event in (QDragEnterEvent(at, Qt.CopyAction, mime, Qt.LeftButton, Qt.NoModifier),
                  QDragMoveEvent(at, Qt.CopyAction, mime, Qt.LeftButton, Qt.NoModifier),
                  QDropEvent(QPointF(at), Qt.CopyAction, mime, Qt.LeftButton, Qt.NoModifier)):
        QApplication.sendEvent(vp, event)
        assert event.isAccepted()
    qtbot.waitUntil(lambda: window.document.path == str(path))
    assert len(window.document.page().nodes) == 8


@pytest.mark.parametrize("kind", ["png", "svg"])
def test_export_actions_draw_the_current_page(qtbot, sample_window, dialogs, tmp_path, kind):
    dialogs.save_path = str(tmp_path / "picture")
    sample_window.actions[f"export_{kind}"].trigger()
    out = tmp_path / f"picture.{kind}"
    assert out.is_file(), dialogs.calls
    if kind == "png":
        image = QImage(str(out))
        assert not image.isNull() and image.width() > 300
    else:
        assert "<svg" in out.read_text(encoding="utf-8")
    assert dialogs.calls[-1][2].endswith(f"softmax-stable_softmax.{kind}")  # the suggested name


# ------------------------------------------------------------------------------- pages, panels, layout


def test_page_tabs_add_rename_delete_and_reorder(qtbot, sample_window, dialogs):
    window, doc = sample_window, sample_window.document
    tabs = window.tabs
    window.actions["add_page"].trigger()
    assert tabs.count() == 5 and doc.current_page == tabs.tabText(4) == "page5"
    dialogs.text = ("losses", True)
    qtbot.mouseDClick(tabs, Qt.LeftButton, Qt.NoModifier, tabs.tabRect(4).center())
    assert tabs.tabText(4) == "losses" and "losses/" in tabs.tabToolTip(4)
    dialogs.text = ("by_hand", True)                       # taken: refused with the reason
    window.rename_page("losses")
    assert dialogs.calls[-1][0] == "warning" and "by_hand" in dialogs.calls[-1][2]
    # Rename the page the inspector is looking at: the block's scoped name follows.
    tabs.setCurrentIndex(0)
    window.view.select_nodes(["x"])
    dialogs.text = ("softmax", True)
    window.actions["rename_page"].trigger()
    qtbot.waitUntil(lambda: window.inspector.full_name.text() == "softmax/x")
    assert doc.program().full_name("x") == "softmax/x"
    # Reorder by dragging the first tab past the second.
    steps = doc.undo_stack.count()
    a, b = tabs.tabRect(0).center(), tabs.tabRect(1).center()
    qtbot.mousePress(tabs, Qt.LeftButton, Qt.NoModifier, a)
    for i in range(1, 11):
        qtbot.mouseMove(tabs, a + QPoint((b.x() - a.x() + 30) * i // 10, 0))
    qtbot.mouseRelease(tabs, Qt.LeftButton, Qt.NoModifier, b + QPoint(30, 0))
    assert [p.name for p in doc.project.pages][:2] == ["by_hand", "softmax"]
    assert tabs.names() == [p.name for p in doc.project.pages]
    assert doc.undo_stack.count() == steps + 1
    # Delete asks first; Cancel keeps the page, Yes removes it.
    dialogs.answers = [QMessageBox.Cancel, QMessageBox.Yes]
    window.delete_page("losses")
    assert "losses" in tabs.names()
    window.delete_page("losses")
    assert "losses" not in tabs.names() and tabs.count() == 4
    window.actions["undo"].trigger()
    assert "losses" in tabs.names()


def test_problem_click_selects_and_centres_the_block(qtbot, sample_window):
    window, doc, view = sample_window, sample_window.document, sample_window.view
    (edge,) = [e for e in doc.page().edges if e.dst == "Softmax_1"]
    doc.disconnect([edge])
    qtbot.waitUntil(lambda: window.problems.errors > 0)
    assert "Problems (" in window.docks["problems"].windowTitle()
    tree = window.problems.tree
    row = next(i for i in range(tree.topLevelItemCount()) if tree.topLevelItem(i).data(0, Qt.UserRole + 1) == "Softmax_1")
    view.centerOn(QPointF(-2000, -2000))
    qtbot.mouseClick(tree.viewport(), Qt.LeftButton, Qt.NoModifier,
                     tree.visualItemRect(tree.topLevelItem(row)).center())
    assert view.selected_nodes() == ["Softmax_1"]
    centre = view.mapFromScene(view.node_item("Softmax_1").sceneBoundingRect().center())
    middle = view.viewport().rect().center()
    assert abs(centre.x() - middle.x()) < 20 and abs(centre.y() - middle.y()) < 20
    qtbot.waitUntil(lambda: window.inspector.node_id == "Softmax_1")


def test_palette_double_click_adds_the_block_at_the_view_centre(qtbot, sample_window):
    window, doc, view = sample_window, sample_window.document, sample_window.view
    palette = window.palette_panel
    palette.search.setText("tanh")
    item = palette.item_for("Tanh")
    rect = palette.tree.visualItemRect(item)
    # A double-click is a click and a double-click event (QTest sends only the second).
    qtbot.mouseClick(palette.tree.viewport(), Qt.LeftButton, Qt.NoModifier, rect.center())
    qtbot.mouseDClick(palette.tree.viewport(), Qt.LeftButton, Qt.NoModifier, rect.center())
    assert "Tanh_1" in doc.page().nodes
    centre = view.view_center_scene_pos()
    box = view.node_item("Tanh_1").sceneBoundingRect()
    assert box.adjusted(-20, -20, 20, 20).contains(centre)
    assert view.selected_nodes() == ["Tanh_1"]
    assert window.statusBar().currentMessage()


def test_edit_menu_copy_paste_duplicate_delete_and_layout_are_undoable(qtbot, sample_window):
    window, doc, view = sample_window, sample_window.document, sample_window.view
    act = window.actions
    n = len(doc.page().nodes)
    view.select_nodes(["Max_1", "StopGradient_1"])
    act["copy"].trigger()
    act["paste"].trigger()
    assert len(doc.page().nodes) == n + 2
    assert any(e.src == "Max_2" and e.dst == "StopGradient_2" for e in doc.page().edges)
    act["undo"].trigger()
    assert len(doc.page().nodes) == n
    view.select_nodes(["Softmax_1"])
    act["duplicate"].trigger()
    assert "Softmax_2" in doc.page().nodes
    act["delete"].trigger()
    assert "Softmax_2" not in doc.page().nodes
    act["select_all"].trigger()
    assert len(view.selected_nodes()) == n
    before = {k: v.position for k, v in doc.page().nodes.items()}
    view.select_nodes(["x", "Max_1"])
    act["align_left"].trigger()
    assert doc.page().nodes["x"].position[0] == doc.page().nodes["Max_1"].position[0]
    act["undo"].trigger()
    act["auto_layout"].trigger()
    act["undo"].trigger()
    assert {k: v.position for k, v in doc.page().nodes.items()} == before


def test_menus_use_standard_shortcuts(window):
    from PySide6.QtGui import QKeySequence

    K = QKeySequence.StandardKey
    act = window.actions
    for name, key in (("new", K.New), ("open", K.Open), ("save", K.Save), ("undo", K.Undo),
                      ("copy", K.Copy), ("paste", K.Paste), ("select_all", K.SelectAll), ("quit", K.Quit)):
        assert act[name].shortcut() == QKeySequence(key), name
    assert act["duplicate"].shortcut() == QKeySequence("Ctrl+D")
    assert act["fit"].shortcut() == QKeySequence("Ctrl+0")
    menus = [a.text().replace("&", "") for a in window.menuBar().actions()]
    assert menus == ["File", "Edit", "View", "Page", "Run", "Help"]


def test_help_opens_the_block_reference_and_about(window, dialogs, monkeypatch):
    from PySide6.QtGui import QDesktopServices

    opened = []       # nothing leaves the app: the reference is a dock (tests/gui/test_block_help.py)
    monkeypatch.setattr(QDesktopServices, "openUrl", staticmethod(lambda url: opened.append(url) or True))
    assert window.actions["block_reference"].isEnabled()
    window.actions["block_reference"].trigger()
    assert window.docks["reference"].isVisible() and opened == []
    window.actions["about"].trigger()
    assert dialogs.kinds() == ["about"] and "blockflow" in dialogs.calls[0][2]


def test_zoom_actions_update_the_status_bar(qtbot, sample_window):
    window = sample_window
    window.actions["reset_zoom"].trigger()
    assert window._status_zoom.text() == "zoom 100 %"
    window.actions["zoom_in"].trigger()
    assert window.view.zoom() > 1 and window._status_zoom.text() != "zoom 100 %"
    window.actions["fit"].trigger()
    assert window._status_blocks.text() == "8 blocks, 8 wires"


def test_dock_layout_and_geometry_are_remembered(qtbot, settings_path):
    first = make_window(qtbot, settings_path)
    first.removeDockWidget(first.docks["palette"])
    first.addDockWidget(Qt.RightDockWidgetArea, first.docks["palette"])
    first.docks["palette"].show()
    first.docks["history"].hide()
    first.resize(760, 560)  # within the offscreen screen (800x600): restoreGeometry clamps to it
    QApplication.processEvents()
    first.close()
    second = MainWindow(Document(), QSettings(settings_path, QSettings.IniFormat))  # no resize
    qtbot.addWidget(second)
    second.show()
    qtbot.waitExposed(second)
    assert second.dockWidgetArea(second.docks["palette"]) == Qt.RightDockWidgetArea
    assert second.docks["history"].isHidden()
    assert (second.width(), second.height()) == (760, 560)


# ------------------------------------------------------------------------------- the screenshot


def ink_pixels(image: QImage, rect, ink: QColor) -> int:
    """Pixels in ``rect`` close to the text colour (the glyphs of a label)."""
    count = 0
    for y in range(rect.top(), rect.bottom()):
        for x in range(rect.left(), rect.right()):
            c = QColor(image.pixel(x, y))
            if abs(c.red() - ink.red()) + abs(c.green() - ink.green()) + abs(c.blue() - ink.blue()) < 150:
                count += 1
    return count


def glyphs_differ(font: QFont) -> bool:
    """Tofu (a font without glyphs) draws every letter as the same box: two words would match."""
    images = []
    for word in ("Softmax", "Mlpqsxz"):
        image = QImage(120, 30, QImage.Format_ARGB32)
        image.fill(Qt.white)
        painter = QPainter(image)
        painter.setFont(font)
        painter.setPen(Qt.black)
        painter.drawText(4, 22, word)
        painter.end()
        images.append(image)
    return images[0] != images[1]


def test_screenshot_of_the_editor_has_readable_text_and_every_block(qtbot, settings_path, tmp_path):
    doc = Document(load_project(SAMPLE), None)
    window = make_window(qtbot, settings_path, doc, size=(1600, 900))
    window.view.select_nodes(["Softmax_1"])
    qtbot.waitUntil(lambda: window.inspector.node_id == "Softmax_1")
    window.view.fit_to_view()
    qtbot.wait(300)                  # the Inspector's documentation settles its height
    image = window.grab().toImage()
    path = tmp_path / "editor.png"
    assert image.save(str(path))
    if os.environ.get("BLOCKFLOW_UPDATE_SCREENSHOT"):
        image.save(str(ROOT / "docs" / "editor.png"))

    assert glyphs_differ(QApplication.font()) and glyphs_differ(window.view.font())
    text_colour = window.palette().color(QPalette.WindowText)
    for label in (window._status_blocks, window._status_page):
        rect = label.geometry().translated(label.parentWidget().mapTo(window, QPoint(0, 0)))
        assert ink_pixels(image, rect, text_colour) > 40, label.text()
    vp = window.view.viewport()
    vp_rect = vp.rect().translated(vp.mapTo(window, QPoint(0, 0)))
    for nid in doc.page().nodes:
        box = window.view.mapFromScene(window.view.node_item(nid).sceneBoundingRect()).boundingRect()
        box = box.translated(vp.mapTo(window, QPoint(0, 0)))
        assert vp_rect.contains(box), nid
        assert box.width() > 60, f"{nid} is too small to read at the fitted zoom"
        # the block's title is drawn: dark ink in the top part of its body
        title = box.adjusted(4, 4, -4, -box.height() // 2)
        assert ink_pixels(image, title, text_colour) > 15, nid


# ------------------------------------------------------------------------------- audit follow-ups


def test_the_fitted_sample_in_a_small_window_shows_its_block_titles(qtbot, settings_path):
    doc = Document(load_project(SAMPLE), None)
    window = make_window(qtbot, settings_path, doc, size=(1200, 750))
    view = window.view
    view.fit_to_view()
    QApplication.processEvents()
    assert view.zoom() < 0.45                  # below the zoom that shows every label
    image = view.viewport().grab().toImage()
    text_colour = view.style_.text
    for nid in doc.page().nodes:
        item = view.node_item(nid)
        box = view.mapFromScene(item.sceneBoundingRect()).boundingRect()
        assert view.viewport().rect().contains(box), nid
        body = item.body.translated(item.pos())
        header = view.mapFromScene(body.adjusted(0, 0, 0, -body.height() + 36)).boundingRect()
        assert ink_pixels(image, header, text_colour) > 10, nid


def test_edit_shortcuts_act_on_the_text_field_being_typed_in(qtbot, sample_window):
    window, doc, view, inspector = sample_window, sample_window.document, sample_window.view, \
        sample_window.inspector
    window.activateWindow()
    view.select_nodes(["x"])
    settle(qtbot, inspector)
    nodes = dict(doc.page().nodes)
    steps = doc.undo_stack.count()
    edit = inspector.field("attr:shape")
    edit.setFocus()
    edit.selectAll()
    qtbot.keyClicks(edit, "[7, 8")
    for key, modifier in ((Qt.Key_D, Qt.ControlModifier), (Qt.Key_A, Qt.ControlModifier),
                          (Qt.Key_C, Qt.ControlModifier), (Qt.Key_X, Qt.ControlModifier),
                          (Qt.Key_V, Qt.ControlModifier), (Qt.Key_Delete, Qt.NoModifier)):
        qtbot.keyClick(edit, key, modifier)
        settle(qtbot, inspector)
        assert inspector.field("attr:shape") is edit, key      # the form was not rebuilt
        assert set(doc.page().nodes) == set(nodes) and doc.undo_stack.count() == steps, key
        assert view.selected_nodes() == ["x"]
    assert edit.text() == "[7, 8"                  # select all, cut, paste back
    # The menu's actions go to the field too while it has focus.
    window.actions["select_all"].trigger()
    window.actions["delete"].trigger()
    window.actions["duplicate"].trigger()
    assert edit.text() == "" and set(doc.page().nodes) == set(nodes)
    assert view.selected_nodes() == ["x"]
    # A spin box is a text field as well.
    leaky = doc.add_node("LeakyRelu", (0, 600))
    nodes = dict(doc.page().nodes)
    view.select_nodes([leaky])
    settle(qtbot, inspector)
    spin = next(f.widget for f in inspector.fields.values() if isinstance(f.widget, QAbstractSpinBox))
    spin.setFocus()
    qtbot.keyClick(spin, Qt.Key_D, Qt.ControlModifier)
    qtbot.keyClick(spin, Qt.Key_A, Qt.ControlModifier)
    qtbot.keyClick(spin, Qt.Key_Delete)
    settle(qtbot, inspector)
    assert set(doc.page().nodes) == set(nodes) and view.selected_nodes() == [leaky]
    assert any(f.widget is spin for f in inspector.fields.values())
    # Back on the canvas, the shortcuts edit the diagram.
    view.setFocus()
    view.select_nodes(["x"])
    qtbot.keyClick(view, Qt.Key_D, Qt.ControlModifier)
    assert len(doc.page().nodes) == len(nodes) + 1


def test_problems_of_every_page_are_listed_and_a_click_goes_to_the_page(qtbot, sample_window):
    window, doc, view = sample_window, sample_window.document, sample_window.view
    other = "by_hand"
    (edge, *_) = [e for e in doc.page(other).edges]
    doc.disconnect([edge], page=other)
    assert doc.current_page != other
    panel = window.problems
    qtbot.waitUntil(lambda: any(page == other for page, _n, _m in panel.page_rows()))
    assert panel.tree.headerItem().text(0) == "Page"
    rows = [(page, node) for page, node, _m in panel.page_rows()]
    assert (other, edge.dst) in rows
    assert "Problems (" in window.docks["problems"].windowTitle()
    tree = panel.tree
    row = next(tree.topLevelItem(i) for i in range(tree.topLevelItemCount())
               if (tree.topLevelItem(i).text(0), tree.topLevelItem(i).data(0, Qt.UserRole + 1))
               == (other, edge.dst))
    qtbot.mouseClick(tree.viewport(), Qt.LeftButton, Qt.NoModifier, tree.visualItemRect(row).center())
    assert doc.current_page == other and window.tabs.tabText(window.tabs.currentIndex()) == other
    assert view.selected_nodes() == [edge.dst]
    centre = view.mapFromScene(view.node_item(edge.dst).sceneBoundingRect().center())
    middle = view.viewport().rect().center()
    assert abs(centre.x() - middle.x()) < 20 and abs(centre.y() - middle.y()) < 20
    qtbot.waitUntil(lambda: window.inspector.node_id == edge.dst)


def test_palette_swatches_follow_a_live_palette_change(qtbot, qapp, window):
    panel = window.palette_panel
    cat = panel.tree.topLevelItem(0)
    before = cat.icon(0).pixmap(14, 14).toImage()
    old = qapp.palette()
    dark = QPalette(old)
    for role, colour in ((QPalette.Window, "#2b2b2b"), (QPalette.Base, "#1e1e1e"),
                         (QPalette.Text, "#e6e6e6"), (QPalette.WindowText, "#e6e6e6")):
        dark.setColor(role, QColor(colour))
    try:
        qapp.setPalette(dark)
        QApplication.processEvents()
        after = cat.icon(0).pixmap(14, 14).toImage()
        assert after != before
        assert window.view.viewport().grab().toImage().pixelColor(3, 3).lightnessF() < 0.3
    finally:
        qapp.setPalette(old)
        QApplication.processEvents()


def test_renaming_a_block_in_the_inspector_keeps_it_selected_and_wired(qtbot, sample_window):
    win, view, doc = sample_window, sample_window.view, sample_window.document
    nid = next(n for n, node in doc.page().nodes.items() if node.block == "StopGradient")
    view.select_nodes([nid])
    qtbot.waitUntil(lambda: win.inspector.node_id == nid)
    edit = win.inspector.field("id")
    edit.setFocus()
    edit.selectAll()
    qtbot.keyClicks(edit, "no_grad")
    qtbot.keyClick(edit, Qt.Key_Return)
    qtbot.waitUntil(lambda: win.inspector.node_id == "no_grad")
    assert view.selected_nodes() == ["no_grad"] and "no_grad" in view.diagram_scene().node_items
    assert win.inspector.full_name.text() == "stable_softmax/no_grad"
    assert any(e.src == "no_grad" for e in doc.page().edges)
    assert all(item.edges for item in view.diagram_scene().node_items.values())
    edit = win.inspector.field("id")
    edit.setFocus()
    edit.selectAll()
    qtbot.keyClicks(edit, "x")                     # taken by the Placeholder
    qtbot.keyClick(edit, Qt.Key_Return)
    assert "already has" in win.inspector.field_error("id")
    doc.undo_stack.undo()
    qtbot.waitUntil(lambda: nid in view.diagram_scene().node_items)


def test_save_as_elsewhere_offers_to_copy_the_data_files(qtbot, settings_path, tmp_path, monkeypatch):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "d.csv").write_text("u,label\n1,0\n2,1\n")
    doc = Document()
    doc.add_node("CsvDataset", (0, 0), node_id="d", attrs={"path": "d.csv", "test_fraction": 0.0})
    doc.save(tmp_path / "a" / "p.bflow.json")
    win = make_window(qtbot, settings_path, doc)
    asked = []
    monkeypatch.setattr(QFileDialog, "getSaveFileName",
                        staticmethod(lambda *a, **k: (str(tmp_path / "b" / "p.bflow.json"), "")))
    monkeypatch.setattr(QMessageBox, "question",
                        staticmethod(lambda *a, **k: (asked.append(a[2]), QMessageBox.Yes)[1]))
    assert win.save_as()
    assert asked and "d.csv" in asked[0] and str(tmp_path / "a") in asked[0]
    assert (tmp_path / "b" / "d.csv").exists() and doc.program().ok


# ------------------------------------------------------------------------------- a closed window


def test_a_closed_window_leaves_the_document_it_showed_and_is_freed(qtbot, settings_path):
    """The document can outlive a window (it is the caller's): once the window is closed and
    deleted, edits of every kind reach none of its panels (no "C++ object already deleted"
    from a panel's slot) and nothing keeps the panels alive."""
    import gc
    import weakref

    from PySide6.QtCore import QEvent
    from test_panels import edit_every_way

    doc = Document()
    doc.add_node("Placeholder", (0, 0), node_id="x", attrs={"shape": [3]})
    win = MainWindow(doc, QSettings(settings_path, QSettings.IniFormat))
    win.show()
    qtbot.waitExposed(win)
    win.view.select_nodes(["x"])                 # the inspector shows a form, with its fields
    qtbot.waitUntil(lambda: win.inspector.node_id == "x" and not win.inspector._refresh.pending())
    panels = {name: weakref.ref(getattr(win, name)) for name in ("inspector", "problems", "train_panel", "tabs")}
    assert all(ref() is not None for ref in panels.values())
    win.close()
    win.deleteLater()
    del win
    QApplication.sendPostedEvents(None, QEvent.DeferredDelete)
    QApplication.processEvents()

    edit_every_way(doc)
    qtbot.wait(50)                                # every refresh asked for gets its turn
    gc.collect()
    assert {name: ref() for name, ref in panels.items()} == dict.fromkeys(panels)


def test_the_status_bar_says_what_undo_and_redo_did_not_what_the_undone_edit_said(qtbot, sample_window):
    """Edit > Delete a block, then Edit > Undo: the bar no longer says "deleted" (issue 16)."""
    window, doc, view = sample_window, sample_window.document, sample_window.view
    view.select_nodes(["Softmax_1"])
    window.actions["delete"].trigger()
    assert "Softmax_1" not in doc.page().nodes
    assert window.statusBar().currentMessage().startswith("deleted 1 block")
    window.actions["undo"].trigger()
    assert "Softmax_1" in doc.page().nodes
    said = window.statusBar().currentMessage()
    assert said.startswith("undid: Delete") and "deleted" not in said
    window.actions["redo"].trigger()
    assert "Softmax_1" not in doc.page().nodes and window.statusBar().currentMessage().startswith("redid: Delete")
