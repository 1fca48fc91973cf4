"""The editor's main window: canvas, page tabs, docks, menus, files and settings.

It wires views to the Document and edits only through it; file I/O goes through
Document.open/save (atomic) and render_page for pictures. The parts live beside it: the docks
table (docks.py), actions and menus (actions.py), the Run side (runs.py), files, autosave and
settings (files.py), the page tabs (tabs.py) and the results on the canvas (canvas_results.py).
"""
from __future__ import annotations

from PySide6.QtCore import QEvent, QMimeData, QSettings, QTimer
from PySide6.QtGui import QAction
from PySide6.QtWidgets import (QDialog, QHBoxLayout, QInputDialog, QLabel, QMainWindow, QMessageBox, QToolButton,
                               QVBoxLayout, QWidget)

from blockflow import __version__
from blockflow.errors import ProjectError
from blockflow.gui.canvas.breadcrumb import Breadcrumb
from blockflow.gui.canvas.view import DiagramView
from blockflow.gui.common.plaintext import literal, plain_label
from blockflow.gui.document.document import Document
from blockflow.gui.main_window.actions import MenusMixin
from blockflow.gui.main_window.composites import CompositesMixin
from blockflow.gui.main_window.canvas_results import GradientsOnCanvas, ResultsOnCanvas
from blockflow.gui.main_window.docks import bind_docks, build_docks
from blockflow.gui.main_window.files import FilesMixin
from blockflow.gui.main_window.helpmenu import HelpMixin
from blockflow.gui.main_window.layout import default_dock_sizes, hide_stale_tab_bars_later
from blockflow.gui.main_window.model_export import ModelExportMixin
from blockflow.gui.main_window.model_import import ModelImportMixin
from blockflow.gui.main_window.runs import RunsMixin
from blockflow.gui.main_window.tabs import PageTabBar
from blockflow.gui.session.session import Session

__all__ = ["MainWindow"]


def _project_paths(mime: QMimeData) -> list[str]:
    if not mime.hasUrls():
        return []
    return [u.toLocalFile() for u in mime.urls()
            if u.isLocalFile() and u.toLocalFile().endswith(".json")]


class MainWindow(FilesMixin, CompositesMixin, ModelExportMixin, ModelImportMixin, MenusMixin, HelpMixin, RunsMixin, QMainWindow):
    """The editor window around one Document.

    ``settings`` defaults to QSettings() (organisation/application set by the launcher); tests
    pass an INI file. ``actions`` maps short names to the menu actions. ``session`` holds the
    runs' results and the selection (``run_controller`` is the same object, by its older name).
    """

    def __init__(self, document: Document | None = None, settings: QSettings | None = None,
                 parent=None):
        super().__init__(parent)
        self.document = document or Document()
        self.settings = settings if settings is not None else QSettings()
        self.setObjectName("blockflowMainWindow")
        self.setAcceptDrops(True)
        self.setDockNestingEnabled(True)
        self.actions: dict[str, QAction] = {}
        self.docks = {}
        self.layout_pending = True          # the default dock sizes are to be set (layout.py)
        # Stacked blocks are laid out before the canvas is built (and, connected first, before it
        # rebuilds for another project): it draws them where they end up, not thousands on a spot.
        spread = self._spread_stacked()
        self.document.project_replaced.connect(self._on_project_opened)
        self.view = DiagramView(self.document, self)
        self._build_centre()
        self.session = Session(self.document, self)
        self.results_on_canvas = ResultsOnCanvas(self.view, self.session, self.document, self)
        self.gradients_on_canvas = GradientsOnCanvas(self.view, self.session, self)
        build_docks(self)
        self._build_status_bar()
        self._build_actions()
        self._build_run_actions()
        self._build_menus()
        self._build_run_toolbar()
        bind_docks(self)
        self._bind_composites()
        self._bind_runs()
        self._build_autosave()
        self._connect()
        self._restore_settings()
        self._update_title()
        self._update_status()
        if spread:
            self.statusBar().showMessage(spread, 20000)

    @property
    def run_controller(self) -> Session:
        return self.session

    # ------------------------------------------------------------------------- building
    def _build_centre(self) -> None:
        """The page tabs (and their + button) above the canvas."""
        self.tabs = PageTabBar(self.document, self)
        add_page = QToolButton(self)
        add_page.setText("+")
        add_page.setToolTip("Add a page")
        add_page.setAutoRaise(True)
        add_page.clicked.connect(self.add_page)
        top = QHBoxLayout()
        top.setContentsMargins(0, 0, 0, 0)
        top.setSpacing(2)
        top.addWidget(self.tabs, 1)
        top.addWidget(add_page)
        central = QWidget(self)
        col = QVBoxLayout(central)
        col.setContentsMargins(0, 0, 0, 0)
        col.setSpacing(0)
        col.addLayout(top)
        self.breadcrumb = Breadcrumb(self.document, self)
        col.addWidget(self.breadcrumb)
        col.addWidget(self.view, 1)
        self.setCentralWidget(central)
        self.tabs.tabBarDoubleClicked.connect(self._rename_tab)
        self.tabs.tabCloseRequested.connect(lambda i: self.delete_page(self.tabs.tabData(i)))

    def _build_status_bar(self) -> None:
        self._status_page = plain_label()
        self._status_blocks = QLabel()
        self._status_selection = QLabel()
        self._status_zoom = QLabel()
        for w in (self._status_page, self._status_blocks, self._status_selection, self._status_zoom):
            w.setContentsMargins(6, 0, 6, 0)
            self.statusBar().addPermanentWidget(w)

    def _connect(self) -> None:
        doc, v = self.document, self.view
        # Bound methods, not lambdas: the document may outlive the window, and a connection to a
        # method of the window goes with it (a lambda would keep the closed window alive).
        for signal in (doc.dirty_changed, doc.path_changed, doc.project_replaced):
            signal.connect(self._update_title)
        for signal in (doc.project_replaced, doc.structure_changed, doc.current_page_changed, doc.pages_changed,
                       self.session.selection_changed):
            signal.connect(self._update_status)
        v.selection_changed.connect(self.session.set_selection)
        self.session.selection_changed.connect(self._select_on_canvas)
        v.status_message.connect(lambda msg: self.statusBar().showMessage(msg, 6000))
        v.viewport().installEventFilter(self)
        v.view_changed.connect(self._update_zoom)

    # ------------------------------------------------------------------------- window events
    def showEvent(self, event):
        super().showEvent(event)
        if self.layout_pending:            # no saved layout: the defaults, for the size shown at
            self.layout_pending = False
            default_dock_sizes(self)
        hide_stale_tab_bars_later(self)

    def closeEvent(self, event):
        if self.maybe_save():
            self.abandon_import()             # a model read for a closed window opens nowhere
            self.train_panel.shutdown()
            self.document.stop_compiling()    # no compile queue running on until the app quits
            self.autosaver.discard()          # a clean close: nothing to recover
            self.autosaver.set_interval(0)    # nor a tick before the app quits autosaving discarded work
            self.save_settings()
            for dialog in self.findChildren(QDialog):   # Keyboard Shortcuts and the like go with it
                dialog.close()
            event.accept()
        else:
            event.ignore()

    def dragEnterEvent(self, event):
        if _project_paths(event.mimeData()):
            event.acceptProposedAction()
        else:
            event.ignore()

    dragMoveEvent = dragEnterEvent

    def dropEvent(self, event):
        paths = _project_paths(event.mimeData())
        if paths:
            event.acceptProposedAction()
            # Open after the drop returns: a modal prompt inside a drop handler blocks the source.
            QTimer.singleShot(0, lambda: self.open_file(paths[0]))

    def eventFilter(self, obj, event):
        kind = event.type()
        if obj is self.view.viewport():
            if kind in (QEvent.DragEnter, QEvent.DragMove, QEvent.Drop) and _project_paths(event.mimeData()):
                if kind == QEvent.Drop:
                    self.dropEvent(event)
                else:
                    event.acceptProposedAction()
                return True
        return super().eventFilter(obj, event)

    # ------------------------------------------------------------------------- editing
    def add_block_at_centre(self, block: str) -> str:
        nid = self.view.drop_block(block, self.view.view_center_scene_pos())
        if nid:
            self.view.select_nodes([nid])
        return nid

    def _select_on_canvas(self, ids) -> None:
        """The session's selection on the canvas: it changed elsewhere (another page, a block
        renamed and its items rebuilt), or it came from the canvas and is there already."""
        if set(ids) != set(self.view.selected_nodes()):
            self.view.select_nodes(ids)

    def reveal_node(self, node_id: str) -> None:
        if node_id in self.document.page().nodes:
            self.view.select_nodes([node_id])
            self.view.center_on_node(node_id)
            self.view.setFocus()

    def copy(self) -> None:
        self.view.copy_selection()

    def cut(self) -> None:
        self.view.cut_selection()

    def paste(self) -> None:
        self.view.paste()

    def _zoom(self, how) -> None:
        how()
        self._update_status()

    # ------------------------------------------------------------------------- pages
    def add_page(self) -> str:
        name = self.document.add_page()
        self.document.set_current_page(name)
        return name

    def _rename_tab(self, index: int) -> None:
        if index >= 0:
            self.rename_page(self.tabs.tabData(index))

    def rename_page(self, name: str | None = None) -> bool:
        name = name or self.document.host_page()      # the page whose tab is current, not "@G" opened
        new, ok = QInputDialog.getText(self, "Rename page",
                                       "New name (it is also the scope of the page's blocks):", text=name)
        if not ok or new.strip() == name:
            return False
        try:
            self.document.rename_page(name, new.strip())
        except ProjectError as exc:
            QMessageBox.warning(self, "Cannot rename page", literal(exc))
            return False
        return True

    def delete_page(self, name: str | None = None) -> bool:
        name = name or self.document.host_page()
        if len(self.document.project.pages) < 2:
            QMessageBox.information(self, "Delete page", "A project keeps at least one page.")
            return False
        n = len(self.document.page(name).nodes)
        answer = QMessageBox.question(
            self, "Delete page", literal(f"Delete the page “{name}” and its {n} block{'s' if n != 1 else ''}?\n"
                                         f"(Undo brings it back.)"),
            QMessageBox.Yes | QMessageBox.Cancel, QMessageBox.Cancel)
        if answer != QMessageBox.Yes:
            return False
        self.document.remove_page(name)
        return True

    def _step_page(self, step: int) -> None:
        names = [p.name for p in self.document.project.pages]
        i = names.index(self.document.host_page())
        self.document.set_current_page(names[(i + step) % len(names)])

    # ------------------------------------------------------------------------- help
    def about(self) -> None:
        QMessageBox.about(self, "About blockflow",
                          f"<h3>blockflow {__version__}</h3>"
                          "<p>Draw a differentiable model as a TensorFlow-style block diagram, run it "
                          "with numpy, and see its gradients flow. StopGradient is a block: the diagram "
                          "shows where gradient flows and where it is cut.</p>")

    # ------------------------------------------------------------------------- display
    def _update_title(self, *_) -> None:
        title = self.document.project.metadata.get("title") or ""
        text = self.document.title
        if title and title != "Untitled" and not self.document.path:
            text += f" — {title}"
        self.setWindowTitle(f"{text} — blockflow")

    def _update_status(self, *_) -> None:
        page = self.document.page()
        n = len(page.nodes)
        self._status_page.setText(f"Page: {page.name}")
        self._status_page.setToolTip(literal(f"scope {page.scope}/"))
        self._status_blocks.setText(f"{n} block{'s' if n != 1 else ''}, {len(page.edges)} "
                                    f"wire{'s' if len(page.edges) != 1 else ''}")
        sel = len(self.session.selection)
        self._status_selection.setText(f"{sel} selected" if sel else "")
        self._update_zoom()

    def _update_zoom(self) -> None:
        self._status_zoom.setText(f"zoom {self.view.zoom() * 100:.0f} %")
