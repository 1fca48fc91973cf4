"""The window's layout (issue 16): the right-hand docks open wide enough for the Check Gradients
table and the stepper, the Train panel has room for its curves; which docks are open, where and
how big is kept between sessions; View > Reset Layout restores the defaults; a corrupt or foreign
saved layout is ignored, never a crash."""
from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import QByteArray, QPoint, QSettings, Qt
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QApplication, QDockWidget, QMainWindow, QMessageBox, QTabBar

from blockflow.gui.document.document import Document
from blockflow.gui.main_window import MainWindow, docks
from blockflow.gui.main_window.layout import GEOMETRY_KEY, STATE_KEY, STATE_VERSION
from blockflow.io.project_io import load_project

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_projects" / "stable_softmax.bflow.json"
#: the default window size on a 1920x1080 screen (files.py: at most 1600x900)
DEFAULT_SIZE = (1600, 900)


@pytest.fixture(autouse=True)
def _font_and_no_prompts(qapp, monkeypatch):
    qapp.setFont(QFont("DejaVu Sans", 9))
    monkeypatch.setattr(QMessageBox, "question", staticmethod(lambda *a, **k: QMessageBox.Discard))


@pytest.fixture
def settings_path(tmp_path):
    return str(tmp_path / "settings.ini")


def open_window(qtbot, settings_path, size=DEFAULT_SIZE, document=None) -> MainWindow:
    window = MainWindow(document or Document(load_project(SAMPLE)), QSettings(settings_path, QSettings.IniFormat))
    qtbot.addWidget(window)
    if size is not None:
        window.resize(*size)
    window.show()
    qtbot.waitExposed(window)
    QApplication.processEvents()
    return window


def close(window) -> None:
    """Close as the user does (the window keeps its layout then)."""
    assert window.close()
    QApplication.processEvents()


def drag_separator_left_of(qtbot, window, dock: QDockWidget, dx: int) -> None:
    """Drag the splitter between the canvas and ``dock``'s column by ``dx`` pixels."""
    central = window.centralWidget().geometry()
    x = (central.right() + dock.geometry().left()) // 2 + 1
    y = dock.geometry().center().y()
    start, end = QPoint(x, y), QPoint(x + dx, y)
    qtbot.mousePress(window, Qt.LeftButton, Qt.NoModifier, start)
    for i in range(1, 6):
        qtbot.mouseMove(window, start + (end - start) * (i / 5))
        QApplication.processEvents()          # the window moves the separator on a timer
    qtbot.mouseRelease(window, Qt.LeftButton, Qt.NoModifier, end)
    QApplication.processEvents()


# ------------------------------------------------------------------------------- docks that fit
def test_the_right_hand_docks_open_wide_enough_for_the_check_table_and_the_stepper(qtbot, settings_path):
    window = open_window(qtbot, settings_path)
    panel = window.gradient_panel
    window.view.select_nodes(["Subtract_1"])          # the page's check and a block's: two tables
    window.actions["check_gradients"].trigger()      # Run > Check Gradients: the dock comes to the front
    QApplication.processEvents()
    assert panel.isVisible() and panel.report is not None and panel.report.passed
    html = panel.check_view.toHtml()
    assert all(h in html for h in ("Analytic", "Numeric", "Rel. error", "Tol."))
    # every column of the table in sight: the text browser need not scroll sideways
    assert panel.check_view.horizontalScrollBar().maximum() == 0
    stepper = window.stepper
    assert window.docks["stepper"].width() >= stepper.minimumSizeHint().width()
    # and the canvas keeps most of the window
    assert window.view.width() > 0.5 * window.width()


def test_the_train_panel_has_room_for_its_curves(qtbot, settings_path):
    window = open_window(qtbot, settings_path)
    dock = window.docks["train"]
    dock.raise_()
    qtbot.waitUntil(lambda: window.train_panel.curves.made, timeout=5000)
    plot = window.train_panel.curves._plot["widget"]
    qtbot.waitUntil(lambda: plot.isVisible())
    assert plot.height() >= 340 and plot.width() >= 300
    # the curves are at the top of the panel, wholly in sight without scrolling
    top = plot.mapTo(dock, QPoint(0, 0)).y()
    assert 0 <= top < dock.height() // 3

    def wholly_seen():
        seen = plot.viewport().visibleRegion().boundingRect()
        return seen.height() >= plot.viewport().height() - 1 and seen.width() >= plot.viewport().width() - 1
    qtbot.waitUntil(wholly_seen, timeout=3000)        # once the docks have settled


def tab_bars_in_the_way(window) -> list[str]:
    """Visible tab bars of the window over the canvas or a dock they do not switch."""
    QApplication.processEvents()
    found = []
    for bar in window.findChildren(QTabBar, options=Qt.FindDirectChildrenOnly):
        if not bar.isVisible():
            continue
        titles = {bar.tabText(i) for i in range(bar.count())}
        over = [d.objectName() for d in window.docks.values()
                if d.isVisible() and d.windowTitle() not in titles and d.geometry().intersects(bar.geometry())]
        if window.centralWidget().geometry().intersects(bar.geometry()) or over:
            found.append(f"{sorted(titles)} at {bar.geometry().getRect()} over {over or 'the canvas'}")
    return found


def test_no_tab_bar_is_left_over_the_canvas_or_another_dock(qtbot, settings_path):
    """Qt leaves a second tab bar behind when docks are tabbed in a column before the window is
    shown; drawn over the Values panel at QT_SCALE_FACTOR=2. The window hides it."""
    for size in (DEFAULT_SIZE, (780, 480)):
        window = open_window(qtbot, settings_path, size=size)
        assert not tab_bars_in_the_way(window), size
        window.docks["train"].raise_()
        window.resize(size[0] - 60, size[1] - 40)
        assert not tab_bars_in_the_way(window), size
        window.actions["reset_layout"].trigger()
        assert not tab_bars_in_the_way(window), size
        for key in ("inspector", "stepper", "problems"):       # the tabs in use are still there
            (bar,) = [b for b in window.findChildren(QTabBar, options=Qt.FindDirectChildrenOnly)
                      if b.isVisible() and window.docks[key].windowTitle() in
                      {b.tabText(i) for i in range(b.count())}]
        close(window)


# ------------------------------------------------------------------------------- kept between sessions
def test_the_layout_is_kept_between_sessions(qtbot, settings_path):
    window = open_window(qtbot, settings_path)
    inspector = window.docks["inspector"]
    default_width = inspector.width()
    drag_separator_left_of(qtbot, window, inspector, -120)
    wider = inspector.width()
    assert wider >= default_width + 100
    window.actions["show_values"].trigger()               # View > Panels > Values: closed
    assert not window.docks["values"].isVisible()
    window.removeDockWidget(window.docks["minimap"])      # the Overview moved to the right
    window.addDockWidget(Qt.RightDockWidgetArea, window.docks["minimap"])
    window.docks["minimap"].show()
    window.resize(780, 720)                           # (inside the test screen: 800x800)
    QApplication.processEvents()
    wider = inspector.width()
    close(window)

    again = open_window(qtbot, settings_path, size=None)   # the size is the saved one too
    assert (again.width(), again.height()) == (780, 720)
    assert not again.docks["values"].isVisible() and not again.actions["show_values"].isChecked()
    assert again.dockWidgetArea(again.docks["minimap"]) == Qt.RightDockWidgetArea
    assert abs(again.docks["inspector"].width() - wider) <= 2


def test_reset_layout_restores_the_defaults(qtbot, settings_path):
    window = open_window(qtbot, settings_path)
    geometry = {key: window.docks[key].geometry() for key in ("palette", "inspector", "problems", "values")}
    drag_separator_left_of(qtbot, window, window.docks["inspector"], -150)
    window.actions["show_values"].trigger()
    window.docks["history"].setFloating(True)
    window.removeDockWidget(window.docks["palette"])
    window.addDockWidget(Qt.BottomDockWidgetArea, window.docks["palette"])
    window.docks["palette"].show()
    QApplication.processEvents()
    view_menu = window.view_menu
    reset = next(a for a in view_menu.actions() if a.text() == "&Reset Layout")
    assert reset is window.actions["reset_layout"]
    reset.trigger()
    QApplication.processEvents()
    for entry in docks.PANELS:
        dock = window.docks[entry.key]
        assert not dock.isFloating() and window.dockWidgetArea(dock) == entry.area, entry.key
        assert window.actions["show_" + entry.key].isChecked() is not entry.hidden_at_start, entry.key
    for key, rect in geometry.items():
        now = window.docks[key].geometry()
        assert abs(now.width() - rect.width()) <= 4 and abs(now.left() - rect.left()) <= 4, key
    # the tabbed docks: the front ones are those of the defaults
    assert window.tabifiedDockWidgets(window.docks["inspector"]) == [window.docks["train"]]
    assert window.docks["inspector"].visibleRegion().isEmpty() is False


@pytest.mark.parametrize("saved", [
    QByteArray(b"\x00\x00\x00\xffgarbage, not a layout" * 3),                # corrupt
    "a string someone typed into the file",                                    # not bytes at all
    QByteArray(b"\x00" * 200_000),                                              # absurdly big
    None,                                                                        # another program's
    "other version",                                                            # an older blockflow's
], ids=["corrupt", "text", "huge", "foreign", "other-version"])
def test_a_corrupt_or_foreign_saved_layout_is_ignored(qtbot, settings_path, saved):
    if saved is None or saved == "other version":
        other = QMainWindow()
        for name in (["fooDock", "barDock"] if saved is None else ["inspectorDock", "valuesDock"]):
            dock = QDockWidget(name, other)
            dock.setObjectName(name)
            other.addDockWidget(Qt.LeftDockWidgetArea, dock)
            dock.setFloating(True)
        saved = other.saveState(STATE_VERSION if saved is None else STATE_VERSION - 1)
        other.deleteLater()
    settings = QSettings(settings_path, QSettings.IniFormat)
    settings.setValue(STATE_KEY, saved)
    settings.setValue(GEOMETRY_KEY, saved)
    settings.sync()
    window = open_window(qtbot, settings_path)
    for entry in docks.PANELS:
        dock = window.docks[entry.key]
        assert not dock.isFloating() and window.dockWidgetArea(dock) == entry.area, entry.key
    assert window.docks["values"].isVisible() and window.docks["inspector"].isVisible()
    assert window.docks["inspector"].width() > 300
    close(window)                                     # and the next start has a good layout again
    assert isinstance(QSettings(settings_path, QSettings.IniFormat).value(STATE_KEY), QByteArray)


def test_a_small_window_keeps_room_for_the_canvas(qtbot, settings_path):
    """800x450 is a 1600x900 laptop at QT_SCALE_FACTOR=2: the default docks give up width so
    that the canvas keeps close to half of the window's (it had 300 of 800 pixels)."""
    window = open_window(qtbot, settings_path, size=(800, 450))
    qtbot.wait(50)
    canvas = window.view.viewport()
    assert canvas.width() >= 0.45 * window.width(), canvas.width()
    assert window.docks["palette"].width() <= 0.2 * window.width() + 8
