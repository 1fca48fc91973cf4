"""What the composite GUI tests share: a main window on a project, and where a block is on screen."""
from __future__ import annotations

from PySide6.QtCore import QPoint, QSettings
from PySide6.QtWidgets import QApplication

from blockflow.gui.document.document import Document
from blockflow.gui.main_window.window import MainWindow


def make_window(qtbot, tmp_path, project=None, size=(1400, 850), active=False) -> MainWindow:
    """A shown main window on ``project`` (an empty one when None), fitted; ``active``: also
    wait until it is the active window with the canvas focused (for key presses)."""
    document = Document(project) if project is not None else Document()
    window = MainWindow(document, QSettings(str(tmp_path / "settings.ini"), QSettings.IniFormat))
    qtbot.addWidget(window)
    window.maybe_save = lambda: True      # closed by the test's teardown without asking
    window.resize(*size)
    window.show()
    qtbot.waitExposed(window)
    if active:
        window.activateWindow()
        window.view.setFocus()
        qtbot.waitUntil(window.isActiveWindow, timeout=2000)
    window.view.fit_to_view()
    QApplication.processEvents()
    return window


def node_point(view, node: str) -> QPoint:
    """The centre of ``node``'s item, in the view's coordinates."""
    return view.mapFromScene(view.node_item(node).sceneBoundingRect().center())
