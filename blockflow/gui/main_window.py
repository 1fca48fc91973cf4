"""The editor's main window: canvas, page tabs, docks, menus, files and settings.

It wires views to the Document and edits only through it; file I/O goes through
Document.open/save (atomic) and render_page for pictures.
"""
from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

import shiboken6
from PySide6.QtCore import QByteArray, QEvent, QMimeData, QSettings, Qt, QTimer, QUrl
from PySide6.QtGui import QAction, QDesktopServices, QKeyEvent, QKeySequence
from PySide6.QtWidgets import (QAbstractSpinBox, QApplication, QComboBox, QDockWidget,
                               QFileDialog, QHBoxLayout, QInputDialog, QLabel, QLineEdit,
                               QMainWindow, QMenu, QMessageBox, QPlainTextEdit, QStyle, QTabBar,
                               QTextEdit, QToolButton, QUndoView, QVBoxLayout, QWidget)

from blockflow import __version__
from blockflow.errors import BlockflowError, ProjectError
from blockflow.gui.canvas.view import DiagramView
from blockflow.gui.document.document import Document, stacked_blocks
from blockflow.gui.panels.inspector import InspectorPanel
from blockflow.gui.panels.palette import PalettePanel
from blockflow.gui.common.plaintext import literal, mnemonic_free, plain_label
from blockflow.gui.panels.problems import ProblemsPanel

__all__ = ["MainWindow", "PageTabBar", "sample_projects", "read_recent_files", "PROJECT_FILTER", "MAX_RECENT"]

PROJECT_SUFFIX = ".bflow.json"
PROJECT_FILTER = "blockflow projects (*.bflow.json);;JSON files (*.json);;All files (*)"
MAX_RECENT = 10
_STATE_VERSION = 1


def sample_projects() -> list[Path]:
    """The sample projects shipped in the package (blockflow.sample_projects), sorted by name."""
    try:
        root = Path(str(resources.files("blockflow.sample_projects")))
    except ModuleNotFoundError:
        # An editable install maps blockflow.sample_projects to the source tree's folder, but a
        # folder without __init__.py under a mapped package is not importable there.
        root = Path(__file__).resolve().parents[2] / "sample_projects"
    if not root.is_dir():
        return []
    return sorted((p for p in root.iterdir() if p.name.endswith(PROJECT_SUFFIX)), key=lambda p: p.name)


def read_recent_files(settings: QSettings) -> list[str]:
    """The recent-files list, most recent first. Read back from a file, a one-element list comes
    back as a str and an empty one as None (docs/qt.md §4)."""
    value = settings.value("recentFiles", [])
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]


def _block_reference() -> Path | None:
    path = Path(__file__).resolve().parents[2] / "docs" / "blocks.md"
    return path if path.is_file() else None


def _project_paths(mime: QMimeData) -> list[str]:
    if not mime.hasUrls():
        return []
    return [u.toLocalFile() for u in mime.urls()
            if u.isLocalFile() and u.toLocalFile().endswith(".json")]


class PageTabBar(QTabBar):
    """One tab per page, kept in the document's order; a drag is one move_page on release. The
    current tab has a close button (tabCloseRequested)."""

    def __init__(self, document, parent=None):
        super().__init__(parent)
        self.document = document
        self.setMovable(True)
        # One close button, on the current tab (deleting the last page is refused with a
        # message): Qt's own, one per tab, cost time in the square of their number to make (a
        # project of 10,000 pages took 100 s to open) and to lay out again.
        self._close: QToolButton | None = None
        self._close_tab = -1
        self.setExpanding(False)
        self.setDocumentMode(True)
        self.setUsesScrollButtons(True)
        self._dragged: str | None = None
        self._syncing = False
        self.currentChanged.connect(self._on_current_changed)
        self.tabMoved.connect(self._on_tab_moved)
        document.pages_changed.connect(self.sync)
        document.current_page_changed.connect(lambda _p: self.sync())
        document.project_replaced.connect(self.sync)
        self.sync()

    def names(self) -> list[str]:
        return [self.tabData(i) for i in range(self.count())]

    def sync(self) -> None:
        """Make the tabs match the document's pages (names, order, tooltips, current). Only the
        tabs that differ are touched: each change lays every tab out again."""
        self._syncing = True
        try:
            pages = self.document.project.pages
            names = [p.name for p in pages]
            if self.names() != names:
                # Many tabs at once while hidden: a visible bar is laid out after each one.
                bulk = abs(self.count() - len(names)) > 1 and self.isVisible()
                if bulk:
                    self.setVisible(False)
                self._match(pages, names)
                if bulk:
                    self.setVisible(True)
            self.setCurrentIndex(names.index(self.document.current_page))
        finally:
            self._syncing = False
        self._place_close_button()

    def _match(self, pages, names: list[str]) -> None:
        wanted = set(names)
        for i in reversed(range(self.count())):   # pages that went, or took another name
            if self.tabData(i) not in wanted:
                self.removeTab(i)
        have = set(self.names())
        for i, page in enumerate(pages):
            if page.name not in have:
                self.insertTab(i, mnemonic_free(page.name))
                self.setTabData(i, page.name)
                self.setTabToolTip(i, literal(f"page '{page.name}': its blocks are named {page.scope}/<id> "
                                              f"(the scope follows the page name)\n"
                                              f"double-click to rename, drag to reorder"))
        where = {name: i for i, name in enumerate(self.names())}
        for i, name in enumerate(names):          # the order (a page moved)
            j = where[name]
            if j != i:
                self.moveTab(j, i)
                where = {n: k for k, n in enumerate(self.names())}

    def _place_close_button(self) -> None:
        """The close button goes on the current tab."""
        side = QTabBar.LeftSide if self.style().styleHint(
            QStyle.SH_TabBar_CloseButtonPosition, None, self) == QTabBar.LeftSide else QTabBar.RightSide
        index = self.currentIndex()
        button = self._close if self._close is not None and shiboken6.isValid(self._close) else None
        if button is not None and self._close_tab == index and self.tabButton(index, side) is button:
            return
        if button is not None:          # (Qt deletes a button with its tab: then it is gone)
            if 0 <= self._close_tab < self.count() and self.tabButton(self._close_tab, side) is button:
                self.setTabButton(self._close_tab, side, None)
            button.deleteLater()
        self._close, self._close_tab = None, index
        if index < 0:
            return
        button = QToolButton(self)
        button.setAutoRaise(True)
        button.setIcon(self.style().standardIcon(QStyle.SP_TabCloseButton))
        size = self.style().pixelMetric(QStyle.PM_TabCloseIndicatorWidth, None, self)
        button.setFixedSize(size + 4, size + 4)
        button.setToolTip("Delete this page")
        button.clicked.connect(lambda: self.tabCloseRequested.emit(self.currentIndex()))
        self.setTabButton(index, side, button)
        self._close = button

    def _on_tab_moved(self, old: int, new: int) -> None:
        """Qt moves a tab's button with it: keep track of where ours is."""
        at = self._close_tab
        if at == old:
            self._close_tab = new
        elif old < at <= new:
            self._close_tab = at - 1
        elif new <= at < old:
            self._close_tab = at + 1

    def _on_current_changed(self, index: int) -> None:
        if not self._syncing:
            self._place_close_button()
        if self._syncing or index < 0:
            return
        self.document.set_current_page(self.tabData(index))

    def mousePressEvent(self, event):
        i = self.tabAt(event.position().toPoint())
        self._dragged = self.tabData(i) if i >= 0 else None
        super().mousePressEvent(event)

    def mouseReleaseEvent(self, event):
        super().mouseReleaseEvent(event)
        name, self._dragged = self._dragged, None
        if name is None or self._syncing:
            return
        names = self.names()
        if name in names and names != [p.name for p in self.document.project.pages]:
            # The bar already shows the new order; the document's signal re-syncs it exactly.
            self.document.move_page(name, names.index(name))
            self.sync()


class MainWindow(QMainWindow):
    """The editor window around one Document.

    ``settings`` defaults to QSettings() (organisation/application set by the launcher); tests
    pass an INI file. ``actions`` maps short names to the menu actions.
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
        self._selection: list[str] = []

        # Stacked blocks are laid out before the canvas is built (and, connected first, before it
        # rebuilds for another project): it draws them where they end up, not thousands on a spot.
        spread = self._spread_stacked()
        self.document.project_replaced.connect(self._on_project_opened)
        self.view = DiagramView(self.document, self)
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
        col.addWidget(self.view, 1)
        self.setCentralWidget(central)
        self.tabs.tabBarDoubleClicked.connect(self._rename_tab)
        self.tabs.tabCloseRequested.connect(lambda i: self.delete_page(self.tabs.tabData(i)))

        self.palette_panel = PalettePanel(self.document.registry, self)
        self.inspector = InspectorPanel(self.document, self)
        self.problems = ProblemsPanel(self.document, self)
        self.history = QUndoView(self.document.undo_stack, self)
        self.history.setEmptyLabel("(start)")
        self.docks = {
            "palette": self._dock("Blocks", "paletteDock", self.palette_panel, Qt.LeftDockWidgetArea),
            "minimap": self._dock("Overview", "minimapDock", self.view.minimap(), Qt.LeftDockWidgetArea),
            "inspector": self._dock("Inspector", "inspectorDock", self.inspector, Qt.RightDockWidgetArea),
            "problems": self._dock("Problems", "problemsDock", self.problems, Qt.BottomDockWidgetArea),
            "history": self._dock("History", "historyDock", self.history, Qt.BottomDockWidgetArea),
        }
        self.tabifyDockWidget(self.docks["problems"], self.docks["history"])
        self.docks["problems"].raise_()

        self._status_page = plain_label()
        self._status_blocks = QLabel()
        self._status_selection = QLabel()
        self._status_zoom = QLabel()
        for w in (self._status_page, self._status_blocks, self._status_selection, self._status_zoom):
            w.setContentsMargins(6, 0, 6, 0)
            self.statusBar().addPermanentWidget(w)

        self._build_actions()
        self._build_menus()
        self._connect()
        self._build_run_ui()
        self._build_teaching_ui()
        self._build_gradient_ui()
        self._build_train_ui()
        self._build_autosave()
        self._restore_settings()
        self._update_title()
        self._update_status()
        if spread:
            self.statusBar().showMessage(spread, 20000)

    # ------------------------------------------------------------------------- building
    def _dock(self, title: str, name: str, widget: QWidget, area) -> QDockWidget:
        dock = QDockWidget(title, self)
        dock.setObjectName(name)
        dock.setWidget(widget)
        self.addDockWidget(area, dock)
        return dock

    def _action(self, key: str, text: str, slot, shortcut=None, tip: str = "") -> QAction:
        act = QAction(text, self)
        if shortcut is not None:
            act.setShortcut(QKeySequence(shortcut))
        if tip:
            act.setStatusTip(tip)
            act.setToolTip(tip)
        act.triggered.connect(lambda _checked=False: slot())
        self.actions[key] = act
        return act

    def _build_actions(self) -> None:
        K = QKeySequence.StandardKey
        v = self.view
        a = self._action
        a("new", "&New", self.new_file, K.New, "Start an empty project")
        a("open", "&Open…", self.open_file, K.Open, "Open a project file")
        a("save", "&Save", self.save, K.Save, "Save the project")
        a("save_as", "Save &As…", self.save_as, K.SaveAs, "Save the project under a new name")
        a("export_png", "Export &PNG…", lambda: self.export("png"), None, "Draw this page as a PNG image")
        a("export_svg", "Export S&VG…", lambda: self.export("svg"), None, "Draw this page as an SVG image")
        a("quit", "&Quit", self.close, K.Quit)
        undo = self.document.undo_stack.createUndoAction(self, "&Undo")
        undo.setShortcut(QKeySequence(K.Undo))
        redo = self.document.undo_stack.createRedoAction(self, "&Redo")
        redo.setShortcuts([QKeySequence(K.Redo), QKeySequence("Ctrl+Y")]
                          if QKeySequence(K.Redo) != QKeySequence("Ctrl+Y") else [QKeySequence(K.Redo)])
        self.actions["undo"], self.actions["redo"] = undo, redo
        for act in (undo, redo):
            self.addAction(act)
        # The canvas's edits; while a text field has focus, their keys are the field's.
        t = self._canvas_edit
        a("cut", "Cu&t", t("cut", self.cut), K.Cut)
        a("copy", "&Copy", t("copy", self.copy), K.Copy)
        a("paste", "&Paste", t("paste", self.paste), K.Paste)
        a("duplicate", "D&uplicate", t("duplicate", v.duplicate_selection), "Ctrl+D")
        a("delete", "&Delete", t("delete", v.delete_selection), K.Delete)
        a("select_all", "Select &All", t("select_all", v.select_all), K.SelectAll)
        a("auto_layout", "Auto-&layout Page", v.auto_layout, "Ctrl+L",
          "Arrange the blocks in layers from inputs to outputs")
        for how, text in (("left", "Left Edges"), ("hcenter", "Horizontal Centres"), ("right", "Right Edges"),
                          ("top", "Top Edges"), ("vcenter", "Vertical Centres"), ("bottom", "Bottom Edges")):
            a(f"align_{how}", text, lambda how=how: v.align_selection(how))
        for how, text in (("horizontal", "Horizontally"), ("vertical", "Vertically")):
            a(f"distribute_{how}", text, lambda how=how: v.distribute_selection(how))
        a("zoom_in", "Zoom &In", lambda: self._zoom(v.zoom_in), K.ZoomIn)
        a("zoom_out", "Zoom &Out", lambda: self._zoom(v.zoom_out), K.ZoomOut)
        a("reset_zoom", "&Actual Size", lambda: self._zoom(v.reset_zoom), "Ctrl+1")
        a("fit", "&Fit to Window", lambda: self._zoom(v.fit_to_view), "Ctrl+0",
          "Show the whole page")
        a("add_page", "&Add Page", self.add_page, "Ctrl+Shift+N")
        a("rename_page", "&Rename Page…", lambda: self.rename_page(), "F2")
        a("delete_page", "&Delete Page…", lambda: self.delete_page())
        a("next_page", "&Next Page", lambda: self._step_page(1), "Ctrl+PgDown")
        a("prev_page", "&Previous Page", lambda: self._step_page(-1), "Ctrl+PgUp")
        a("about", "&About blockflow", self.about)
        a("block_reference", "&Block Reference", self.open_block_reference, K.HelpContents)
        self.actions["block_reference"].setEnabled(_block_reference() is not None)

    def _build_teaching_ui(self) -> None:
        """The teaching docks and action: "Backward steps" (walk the backward pass block by block),
        "Gradient" (the selected block's gradient explained) and Run > Check Gradients."""
        from blockflow.gui.panels.explain import GradientPanel
        from blockflow.gui.panels.stepper import BackwardStepper

        def context():
            # The Backward target, the last recorded run and whether the page changed since: the
            # run controls' when there are some, else the run behind the canvas's gradient view.
            rc = getattr(self, "run_controller", None)
            target = result = stale = None
            if rc is not None:
                target, result = rc.target, rc.last_result
                stale = rc.results_stale if result is not None else None
            if result is None and self.view.gradients.current is not None:
                result = self.view.gradients.current.result
            return target, result, stale

        def scrolled(panel: QWidget) -> QWidget:
            # In a scroll area, a dock can be made small (a column of docks cannot be shorter
            # than the sum of their minimum heights, which would limit the window).
            from PySide6.QtWidgets import QFrame, QScrollArea

            area = QScrollArea(self)
            area.setWidget(panel)
            area.setWidgetResizable(True)
            area.setFrameShape(QFrame.NoFrame)
            return area

        self.stepper = BackwardStepper(self.view, self)
        self.gradient_panel = GradientPanel(self.document, self.view, context, self)
        steps = self._dock("Backward steps", "stepperDock", scrolled(self.stepper), Qt.RightDockWidgetArea)
        grad = self._dock("Gradient", "gradientDock", scrolled(self.gradient_panel), Qt.RightDockWidgetArea)
        self.docks["stepper"], self.docks["gradient"] = steps, grad
        self.splitDockWidget(self.docks["inspector"], steps, Qt.Vertical)
        self.tabifyDockWidget(steps, grad)
        steps.raise_()
        self.resizeDocks([self.docks["inspector"], steps], [330, 520], Qt.Vertical)

        def check():
            grad.show()
            grad.raise_()
            report = self.gradient_panel.check()
            verdict = "passed" if report.passed else "FAILED" if report.results else "not made"
            self.statusBar().showMessage(f"Gradient check {verdict} ({report.seconds * 1000:.0f} ms)", 6000)

        act = self._action("check_gradients", "Check &Gradients", check, "Ctrl+Shift+G",
                           "Compare the gradients with central differences (the page's, and the "
                           "selected block's rule at its last inputs)")
        self.gradient_panel.check_requested.connect(act.trigger)
        menus = {m.title().replace("&", ""): m for m in (a.menu() for a in self.menuBar().actions()) if m}
        menu = menus.get("Run")
        if menu is None:
            menu = QMenu("&Tools", self)
            self.menuBar().insertMenu(menus["Help"].menuAction(), menu)
        else:
            menu.addSeparator()
        menu.addAction(act)
        panels = next(a.menu() for a in self.view_menu.actions() if a.menu() and a.menu().title() == "&Panels")
        for key in ("stepper", "gradient"):
            toggle = self.docks[key].toggleViewAction()
            self.actions["show_" + key] = toggle
            panels.addAction(toggle)

    def _build_gradient_ui(self) -> None:
        """View > Gradient Paths (where gradient can flow to the page's loss or the Backward
        target, before any run), and a backward run's gradients highlighted on the canvas as
        soon as it finishes (blockflow/gui/canvas/gradients.py does the drawing)."""
        from blockflow.present.gradview import GradientView

        grads = self.view.gradients
        act = QAction("Gradient &Paths", self)
        act.setCheckable(True)
        act.setShortcut(QKeySequence("Ctrl+Shift+P"))
        act.setStatusTip("Show which wires can carry gradient to the loss (or the Backward target), "
                         "and which a StopGradient cuts")
        self.actions["gradient_paths"] = act
        self.view_menu.addSeparator()
        self.view_menu.addAction(act)
        legend = QAction("Gradient &Legend", self)
        legend.setCheckable(True)
        legend.setChecked(self.settings.value("gradientLegend", True) not in (False, "false"))
        legend.setStatusTip("Show the legend of the gradient colours in the canvas's corner")

        def toggle_legend(on):
            if self.view.gradients.legend_widget is not None:
                self.view.gradients.legend_widget.set_enabled(on)
            self.settings.setValue("gradientLegend", bool(on))

        legend.toggled.connect(toggle_legend)
        toggle_legend(legend.isChecked())
        self.actions["gradient_legend"] = legend
        self.view_menu.addAction(legend)

        def target_of_page() -> str | None:
            rc = getattr(self, "run_controller", None)
            chosen = getattr(rc, "target", None) if rc is not None else None
            if chosen:
                return chosen
            loss = self.document.page().loss
            return loss or None

        def show_paths() -> None:
            if not act.isChecked():
                return
            page = self.document.page()
            program = self.document.ready_program()
            if program is None:      # compiling off the UI thread: shown when it is ready
                self.statusBar().showMessage(f"Checking page '{page.name}': its gradient paths follow", 4000)
                return
            target = target_of_page()
            message = ""
            if target is None:
                message = (f"Page '{page.name}' marks no loss: mark a block as the loss (its context "
                           f"menu) to see the gradient paths to it")
            elif not program.ok:
                message = f"Page '{page.name}' has errors: fix them to see its gradient paths"
            if not message:
                try:
                    grads.show_paths(GradientView(program, target))
                    return
                except BlockflowError as exc:
                    message = f"No gradient paths to {target}: {exc}"
            act.setChecked(False)
            self.statusBar().showMessage(message, 8000)

        def toggled(on: bool) -> None:
            if on:
                show_paths()
            elif grads.mode == "paths":
                grads.clear()

        def sync_action() -> None:
            if grads.mode == "run" and act.isChecked():
                act.blockSignals(True)
                act.setChecked(False)
                act.blockSignals(False)
            elif grads.mode is None and act.isChecked():
                # the paths went (another page, a new project, results cleared): show this page's
                QTimer.singleShot(0, show_paths)

        act.toggled.connect(toggled)
        grads.changed.connect(sync_action)
        self.document.program_ready.connect(
            lambda page: show_paths() if page == self.document.current_page and grads.mode is None else None)
        combo = getattr(self, "target_combo", None)
        if combo is not None:     # the paths follow the Backward target picked in the Run toolbar
            combo.currentIndexChanged.connect(
                lambda _i: QTimer.singleShot(0, show_paths) if grads.mode == "paths" else None)

        def follow_runs() -> None:
            """Highlight the current page's last backward run while its results are current; a
            forward run or cleared results take the highlight away. (Edits clear it in the
            highlighter itself; results only marked stale, as while a block moves, keep it.)"""
            rc = self.run_controller
            result = rc.last_result
            if result is None or result.target is None or rc.last_error is not None:
                if grads.mode == "run":     # no backward run, or one that failed (NaN...)
                    grads.clear()
                return
            shown = grads.current
            if (not rc.results_stale and result.program.page_name == self.document.current_page
                    and (shown is None or shown.result is not result)):
                grads.show(GradientView(result.program, result=result))

        rc = getattr(self, "run_controller", None)   # built by _build_run_ui, before this
        if rc is not None:
            for signal in (rc.run_finished, rc.results_cleared, rc.results_changed):
                signal.connect(lambda *_: follow_runs())

    def text_input_focus(self) -> QWidget | None:
        """The text field being typed in (a line edit, spin box, editable combo box or text
        edit of this window), or None."""
        w = QApplication.focusWidget()
        if w is None or w is self.view or not (w is self or self.isAncestorOf(w)):
            return None
        if isinstance(w, QComboBox):
            return w if w.isEditable() else None
        if isinstance(w, (QLineEdit, QAbstractSpinBox, QTextEdit, QPlainTextEdit)):
            return w
        return None

    def _canvas_edit(self, key: str, slot):
        """``slot`` for an action acting on the canvas; while a text field has focus, the
        action's key goes to the field instead, as if the action were not there (so typing is
        never lost to a canvas edit that rebuilds the inspector)."""
        def run():
            field = self.text_input_focus()
            if field is None:
                slot()
                return
            action = self.actions[key]
            shortcut = action.shortcut()
            if shortcut.isEmpty():
                return
            combo = shortcut[0]
            # A sent key press is matched against the shortcuts again: keep this one out of it.
            action.setEnabled(False)
            try:
                for kind in (QEvent.KeyPress, QEvent.KeyRelease):
                    QApplication.sendEvent(field, QKeyEvent(kind, combo.key(), combo.keyboardModifiers()))
            finally:
                action.setEnabled(True)
        return run

    def _build_menus(self) -> None:
        act = self.actions
        bar = self.menuBar()
        m = bar.addMenu("&File")
        m.addActions([act["new"], act["open"]])
        self.recent_menu = m.addMenu("Open &Recent")
        self.recent_menu.aboutToShow.connect(self._fill_recent_menu)
        self.sample_menu = m.addMenu("Open Sa&mple")
        for path in sample_projects():
            s = self.sample_menu.addAction(path.name[: -len(PROJECT_SUFFIX)].replace("_", " "))
            s.setData(str(path))
            s.setStatusTip(f"Open a copy of the sample {path.name}")
            s.triggered.connect(lambda _c=False, p=str(path): self.open_sample(p))
        m.addSeparator()
        m.addActions([act["save"], act["save_as"]])
        m.addSeparator()
        m.addActions([act["export_png"], act["export_svg"]])
        m.addSeparator()
        m.addAction(act["quit"])
        self._fill_recent_menu()

        m = bar.addMenu("&Edit")
        m.addActions([act["undo"], act["redo"]])
        m.addSeparator()
        m.addActions([act["cut"], act["copy"], act["paste"], act["duplicate"], act["delete"]])
        m.addSeparator()
        m.addAction(act["select_all"])
        self.align_menu = m.addMenu("Ali&gn")
        for how in ("left", "hcenter", "right"):
            self.align_menu.addAction(act[f"align_{how}"])
        self.align_menu.addSeparator()
        for how in ("top", "vcenter", "bottom"):
            self.align_menu.addAction(act[f"align_{how}"])
        self.distribute_menu = m.addMenu("Dis&tribute")
        self.distribute_menu.addActions([act["distribute_horizontal"], act["distribute_vertical"]])
        m.addAction(act["auto_layout"])

        m = bar.addMenu("&View")
        m.addActions([act["zoom_in"], act["zoom_out"], act["reset_zoom"], act["fit"]])
        m.addSeparator()
        panels = m.addMenu("&Panels")
        for key in ("palette", "inspector", "problems", "history", "minimap"):
            toggle = self.docks[key].toggleViewAction()
            self.actions["show_" + key] = toggle
            panels.addAction(toggle)
        self.view_menu = m

        m = bar.addMenu("&Page")
        m.addActions([act["add_page"], act["rename_page"], act["delete_page"]])
        m.addSeparator()
        m.addActions([act["next_page"], act["prev_page"]])

        m = bar.addMenu("&Help")
        m.addActions([act["block_reference"], act["about"]])

    def _build_run_ui(self) -> None:
        """Run > Forward (F5), Backward (Shift+F5), Clear Results; the Run toolbar with the Backward
        target; the Values dock; and the RunController behind them (runner.py: runs off the UI
        thread, results on the blocks, staleness, the block a failed run names)."""
        from PySide6.QtCore import QSize
        from PySide6.QtWidgets import QProgressBar, QStyle, QToolBar

        from blockflow.gui.session.runner import RunController, TargetCombo
        from blockflow.gui.panels.valueviewer import ValueViewerPanel

        rc = self.run_controller = RunController(self.document, self.view, self)

        def committed(slot):
            # A value half-typed in the inspector (a feed, an attr) counts: the field gives up
            # the focus, which finishes its editing, before the page is compiled and run.
            def run():
                field = self.text_input_focus()
                if field is not None:
                    field.clearFocus()
                slot()
            return run

        icon = self.style().standardIcon
        fwd = self._action("run_forward", "Run &Forward", committed(rc.forward), "F5",
                           "Run the page forward and show every block's output (Variables are not changed)")
        bwd = self._action("run_backward", "Run &Backward", committed(rc.backward), "Shift+F5",
                           "Run forward, then backward from the Target: gradients in the Values panel")
        clear = self._action("clear_results", "&Clear Results", rc.clear, None,
                             "Remove the last run's results and error marks from the blocks")
        fwd.setIconText("Forward")
        bwd.setIconText("Backward")
        clear.setIconText("Clear")
        for act, which in ((fwd, QStyle.SP_MediaPlay), (bwd, QStyle.SP_MediaSeekBackward),
                           (clear, QStyle.SP_DialogResetButton)):
            act.setIcon(icon(which))
        self.target_combo = TargetCombo(rc, self)
        self.run_menu = QMenu("&Run", self)
        self.run_menu.addActions([fwd, bwd])
        self.run_menu.addSeparator()
        self.run_menu.addAction(clear)
        help_menu = next(x for x in self.menuBar().actions() if x.menu() is not None and x.text() == "&Help")
        self.menuBar().insertMenu(help_menu, self.run_menu)
        bar = self.run_toolbar = QToolBar("Run", self)
        bar.setObjectName("runToolBar")
        bar.setToolButtonStyle(Qt.ToolButtonTextBesideIcon)
        bar.setIconSize(QSize(16, 16))
        bar.addActions([fwd, bwd])
        target = QLabel("Target ")
        target.setContentsMargins(8, 0, 0, 0)
        target.setToolTip(self.target_combo.toolTip())
        bar.addWidget(target)
        bar.addWidget(self.target_combo)
        bar.addSeparator()
        bar.addAction(clear)
        self.addToolBar(Qt.TopToolBarArea, bar)
        busy = QProgressBar(self)
        busy.setRange(0, 0)
        busy.setTextVisible(False)
        busy.setFixedSize(80, 12)
        busy.setToolTip("a run is going (the editor stays usable; another request waits for it)")
        busy.hide()
        self.statusBar().addPermanentWidget(busy)
        rc.busy_changed.connect(busy.setVisible)
        # a failed run is listed at the top of Problems until the next run, Clear or an edit
        rc.run_failed.connect(lambda msg, node, _port: self.problems.set_run_problem(
            self.document.current_page, node, msg))
        rc.run_started.connect(lambda _kind: self.problems.clear_run_problem())
        rc.results_cleared.connect(self.problems.clear_run_problem)
        rc.status_message.connect(lambda msg: self.statusBar().showMessage(msg, 15000))
        self.value_viewer = ValueViewerPanel(self.document, rc, self)
        self.docks["values"] = self._dock("Values", "valuesDock", self.value_viewer, Qt.BottomDockWidgetArea)
        # Beside the Problems/History tabs, not one more tab: splitting a tabbed dock adds a tab.
        self.addDockWidget(Qt.BottomDockWidgetArea, self.docks["values"], Qt.Horizontal)
        self.view.selection_changed.connect(self.value_viewer.set_nodes)
        panels = next(a.menu() for a in self.view_menu.actions() if a.menu() and a.menu().title() == "&Panels")
        self.actions["show_values"] = self.docks["values"].toggleViewAction()
        panels.addAction(self.actions["show_values"])

    def _build_train_ui(self) -> None:
        """Run > Train… opens the Train dock (trainpanel.py): training off the UI thread, live
        curves; its recorded runs show on the canvas through the RunController like a run's."""
        from blockflow.gui.session.runner import page_fingerprint
        from blockflow.gui.panels.trainpanel import TrainPanel

        from PySide6.QtWidgets import QScrollArea

        panel = self.train_panel = TrainPanel(self.document, self)
        scroll = QScrollArea(self)          # the form and the curves scroll in a short dock
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QScrollArea.NoFrame)
        scroll.setWidget(panel)
        dock = self.docks["train"] = self._dock("Train", "trainDock", scroll, Qt.RightDockWidgetArea)
        self.tabifyDockWidget(self.docks["inspector"], dock)
        self.docks["inspector"].raise_()
        self._train_fingerprint = None

        def started():
            self._train_fingerprint = page_fingerprint(self.document.page())
            self.autosaver.autosave_now()            # training is crash-prone: keep the work first

        def snapshot(result, summaries):
            self.run_controller.present(result, panel.training_page, summaries, self._train_fingerprint)

        def finished(stopped):
            # the trained values are stored now (an edit: the snapshots went stale): show them afresh
            if not stopped and self.document.current_page == panel.training_page:
                self.run_controller.backward(panel.loss.currentData())

        dock.visibilityChanged.connect(lambda shown: shown and QTimer.singleShot(0, panel.plot_if_seen))
        panel.training_started.connect(started)
        panel.snapshot.connect(snapshot)
        panel.training_finished.connect(finished)
        panel.status_message.connect(lambda msg: self.statusBar().showMessage(msg, 15000))
        panel.training_failed.connect(lambda msg, *_: self.statusBar().showMessage(f"training stopped: {msg}", 30000))
        panel.training_failed.connect(lambda msg, *_: self.problems.set_run_problem(
            panel.training_page, "", f"training stopped: {msg}"))

        def open_train():
            dock.show()
            dock.raise_()
            panel.setFocus()

        train = self._action("train", "&Train…", open_train, "Ctrl+T",
                             "Train the page's Variables with an optimizer, watching the loss (the Train panel)")
        reset = self._action("reset_variables", "Reset &Variables", panel.reset_variables, None,
                             "Forget trained values: every Variable starts again from its initializer (undoable)")
        self.run_menu.addSeparator()
        self.run_menu.addActions([train, reset])
        panels = next(a.menu() for a in self.view_menu.actions() if a.menu() and a.menu().title() == "&Panels")
        self.actions["show_train"] = dock.toggleViewAction()
        panels.addAction(self.actions["show_train"])

    def _build_autosave(self) -> None:
        """Unsaved work is autosaved every N seconds (File > Autosave Interval…, 60 by default;
        $BLOCKFLOW_AUTOSAVE_SECONDS wins) and before runs and training; see offer_recovery."""
        from blockflow.gui.document.autosave import DEFAULT_INTERVAL_SECONDS, Autosaver

        seconds = self.settings.value("autosaveSeconds", DEFAULT_INTERVAL_SECONDS)
        try:
            seconds = float(seconds)
        except (TypeError, ValueError):
            seconds = DEFAULT_INTERVAL_SECONDS
        env = os.environ.get("BLOCKFLOW_AUTOSAVE_SECONDS")
        self.autosaver = Autosaver(self.document, interval_seconds=float(env) if env else seconds, parent=self)
        self.autosaver.failed.connect(lambda msg: self.statusBar().showMessage(msg, 15000))
        self.autosaver.moved.connect(lambda msg: self.statusBar().showMessage(msg, 15000))
        self.run_controller.run_started.connect(lambda _kind: self.autosaver.autosave_now())
        interval = self._action("autosave_interval", "Autosave &Interval…", self.set_autosave_interval, None,
                                "How often unsaved work is written to the recovery folder")
        file_menu = next(a.menu() for a in self.menuBar().actions() if a.menu() and a.menu().title() == "&File")
        file_menu.insertAction(self.actions["export_png"], interval)
        file_menu.insertSeparator(self.actions["export_png"])

    def set_autosave_interval(self, seconds: int | None = None) -> None:
        if seconds is None:
            current = int(self.autosaver.interval) if self.autosaver.interval > 0 else 0
            seconds, ok = QInputDialog.getInt(self, "Autosave", "Autosave unsaved work every N seconds (0: never):",
                                              current, 0, 3600)
            if not ok:
                return
        self.autosaver.set_interval(seconds)
        self.settings.setValue("autosaveSeconds", int(seconds))
        self.statusBar().showMessage("autosave off" if seconds <= 0 else f"autosaving unsaved work every {seconds} s",
                                     6000)

    def offer_recovery(self) -> bool:
        """After a crash: offer the autosaves editors left behind, newest first. True when one
        was recovered into this window."""
        from blockflow.gui.document.autosave import find_recoveries

        for rec in find_recoveries():
            if rec.problem:
                box = QMessageBox(QMessageBox.Warning, "Recovery", "blockflow found an autosave it cannot read:\n\n"
                                  + rec.describe(), QMessageBox.Discard | QMessageBox.Ignore, self)
                box.setTextFormat(Qt.PlainText)     # the note's title and file name are the file's
                if box.exec() == QMessageBox.Discard:
                    rec.discard()
                continue
            box = QMessageBox(QMessageBox.Question, "Recover unsaved work?",
                              "blockflow did not close normally. It autosaved unsaved work:\n\n"
                              + rec.describe() + "\n\nRecover it? (Discard deletes the autosave; Later keeps "
                              "it for the next start.)", QMessageBox.NoButton, self)
            box.setTextFormat(Qt.PlainText)
            recover = box.addButton("Recover", QMessageBox.AcceptRole)
            discard = box.addButton("Discard", QMessageBox.DestructiveRole)
            box.addButton("Later", QMessageBox.RejectRole)
            box.setDefaultButton(recover)
            box.exec()
            clicked = box.clickedButton()
            if clicked is discard:
                rec.discard()
            elif clicked is recover:
                try:
                    project = rec.load()
                except BlockflowError as exc:
                    QMessageBox.warning(self, "Recovery", literal(f"The autosave could not be loaded: {exc}"))
                    continue
                self.document.recover(project, rec.original)
                self.autosaver.autosave_now()     # this window's own autosave, then the old one goes
                rec.discard()
                self.statusBar().showMessage(f"recovered {rec.describe()}; save it to keep it", 20000)
                return True
        return False

    def _connect(self) -> None:
        doc, v = self.document, self.view
        doc.dirty_changed.connect(lambda _d: self._update_title())
        doc.path_changed.connect(lambda _p: self._update_title())
        doc.project_replaced.connect(self._on_project_replaced)
        doc.structure_changed.connect(lambda _p: self._update_status())
        doc.current_page_changed.connect(self._on_page_changed)
        doc.pages_changed.connect(self._update_status)
        v.selection_changed.connect(self._on_selection_changed)
        v.status_message.connect(lambda msg: self.statusBar().showMessage(msg, 6000))
        v.viewport().installEventFilter(self)
        v.view_changed.connect(self._update_zoom)
        self.palette_panel.block_activated.connect(self.add_block_at_centre)
        self.problems.problem_activated.connect(self.reveal_node)
        self.problems.count_changed.connect(self._on_problem_count)
        self._on_problem_count(self.problems.errors, self.problems.warnings)

    # ------------------------------------------------------------------------- settings
    def _restore_settings(self) -> None:
        geometry = self.settings.value("window/geometry")
        state = self.settings.value("window/state")
        if isinstance(geometry, QByteArray) and not geometry.isEmpty():
            self.restoreGeometry(geometry)
        else:
            screen = self.screen().availableGeometry()
            self.resize(min(1600, int(screen.width() * 0.92)), min(900, int(screen.height() * 0.9)))
            self.resizeDocks([self.docks["palette"], self.docks["inspector"]], [220, 310], Qt.Horizontal)
            self.resizeDocks([self.docks["problems"]], [200], Qt.Vertical)
            self.resizeDocks([self.docks["problems"], self.docks["values"]], [420, 1000], Qt.Horizontal)
            self.resizeDocks([self.docks["palette"], self.docks["minimap"]], [560, 170], Qt.Vertical)
            # the right column: Inspector | Train above, Backward steps | Gradient below; the
            # inspector's form needs the room most of the time
            self.resizeDocks([self.docks["inspector"], self.docks["stepper"]], [560, 280], Qt.Vertical)
        if isinstance(state, QByteArray) and not state.isEmpty():
            self.restoreState(state, _STATE_VERSION)

    def save_settings(self) -> None:
        self.settings.setValue("window/geometry", self.saveGeometry())
        self.settings.setValue("window/state", self.saveState(_STATE_VERSION))
        self.settings.sync()

    def recent_files(self) -> list[str]:
        return read_recent_files(self.settings)

    def add_recent(self, path: str) -> None:
        path = str(Path(path).resolve())
        files = [path] + [f for f in self.recent_files() if f != path]
        self.settings.setValue("recentFiles", files[:MAX_RECENT])
        self.settings.sync()
        self._fill_recent_menu()

    def _fill_recent_menu(self) -> None:
        menu = self.recent_menu
        menu.clear()
        files = self.recent_files()
        for i, path in enumerate(files):
            name = mnemonic_free(Path(path).name)
            act = menu.addAction(f"&{i + 1}  {name}" if i < 9 else name)
            act.setData(path)
            act.setToolTip(literal(path))
            act.setStatusTip(path)
            act.setEnabled(Path(path).is_file())
            act.triggered.connect(lambda _c=False, p=path: self.open_file(p))
        if files:
            menu.addSeparator()
            clear = menu.addAction("Clear Menu")
            clear.triggered.connect(self._clear_recent)
        else:
            none = menu.addAction("No recent files")
            none.setEnabled(False)

    def _clear_recent(self) -> None:
        self.settings.setValue("recentFiles", [])
        self._fill_recent_menu()

    # ------------------------------------------------------------------------- files
    def maybe_save(self) -> bool:
        """Ask about unsaved changes; True when it is fine to go on (saved or discarded)."""
        if not self.document.dirty:
            return True
        name = Path(self.document.path).name if self.document.path else "Untitled"
        answer = QMessageBox.question(
            self, "Unsaved changes", literal(f"Save the changes to “{name}” before closing it?"),
            QMessageBox.Save | QMessageBox.Discard | QMessageBox.Cancel, QMessageBox.Save)
        if answer == QMessageBox.Save:
            return self.save()
        return answer == QMessageBox.Discard

    def new_file(self) -> None:
        if self.maybe_save():
            self.document.new()

    def _dialog_dir(self) -> str:
        if self.document.path:
            return str(Path(self.document.path).parent)
        recent = self.recent_files()
        return str(Path(recent[0]).parent) if recent else str(Path.cwd())

    def open_file(self, path: str | None = None) -> bool:
        """Open ``path`` (or ask for one); a file that fails to load leaves everything as it was."""
        if not self.maybe_save():
            return False
        if path is None:
            path, _ = QFileDialog.getOpenFileName(self, "Open project", self._dialog_dir(), PROJECT_FILTER)
            if not path:
                return False
        if not self._open(path, as_copy=False):
            return False
        self.add_recent(path)
        self.statusBar().showMessage(f"Opened {path}", 5000)
        return True

    def _spread_stacked(self) -> str:
        """Lay out the blocks stacked on one spot on every page (a file without positions puts
        them all at [0, 0]) as one undo step each; what was done, in words ("" for nothing)."""
        moved = {}
        for page in list(self.document.project.pages):
            if stacked_blocks(page):          # (by the page: looking each name up is a scan)
                moved[page.name] = len(self.document.spread_stacked(page.name))
        if not moved:
            return ""
        n = sum(moved.values())
        where = ", ".join(f"'{p}'" for p in moved)
        return (f"Laid out {n:,} blocks that were stacked on one spot (the file gives them no positions) "
                f"on page{'s' if len(moved) > 1 else ''} {where}; Edit > Undo puts them back")

    def _on_project_opened(self) -> None:
        spread = self._spread_stacked()
        if spread:      # after the "Opened ..." message of whoever opened it
            QTimer.singleShot(0, lambda: self.statusBar().showMessage(spread, 20000))

    def open_sample(self, path: str) -> bool:
        """Open a copy of a shipped sample: it gets no file name, so Save asks where to put it."""
        if not self.maybe_save() or not self._open(path, as_copy=True):
            return False
        self.statusBar().showMessage(f"Opened the sample {Path(path).name} (Save As to keep your changes)",
                                     8000)
        return True

    def _open(self, path: str, as_copy: bool) -> bool:
        try:
            self.document.open(path, as_copy=as_copy)
        except (BlockflowError, OSError) as exc:
            QMessageBox.critical(self, "Cannot open project", literal(f"The project could not be opened.\n\n{exc}"))
            return False
        return True

    def save(self) -> bool:
        if not self.document.path:
            return self.save_as()
        return self._save_to(self.document.path)

    def save_as(self) -> bool:
        if self.document.path:
            suggested = self.document.path
        else:
            title = self.document.project.metadata.get("title") or "untitled"
            stem = "".join(c if c.isalnum() or c in "-_" else "_" for c in title.lower()).strip("_")
            suggested = str(Path(self._dialog_dir()) / f"{stem or 'untitled'}{PROJECT_SUFFIX}")
        path, _ = QFileDialog.getSaveFileName(self, "Save project as", suggested, PROJECT_FILTER)
        if not path:
            return False
        if not path.endswith(PROJECT_SUFFIX):
            path = (path[:-5] if path.endswith(".json") else path) + PROJECT_SUFFIX
        return self._save_to(path)

    def _save_to(self, path: str) -> bool:
        old_dir = self.document.project.base_dir
        try:
            saved = self.document.save(path)
        except (BlockflowError, OSError) as exc:
            QMessageBox.critical(self, "Cannot save project", literal(f"The project was not saved.\n\n{exc}"))
            return False
        self.add_recent(saved)
        notes = self.document.save_notes
        self.statusBar().showMessage("; ".join([f"Saved {saved}", *notes]), 15000 if notes else 5000)
        left = self.document.data_files_left_behind(old_dir)
        if left:      # its dataset blocks read files next to it: they stayed in the old folder
            answer = QMessageBox.question(
                self, "Data files", literal("The project's dataset blocks read these files next to the project, "
                                            f"but they are in {old_dir}:\n\n" + "\n".join(left)
                                            + "\n\nCopy them next to the project?"),
                QMessageBox.Yes | QMessageBox.No, QMessageBox.Yes)
            if answer == QMessageBox.Yes:
                try:
                    copied = self.document.copy_data_files(left, old_dir)
                except OSError as exc:
                    QMessageBox.warning(self, "Data files", literal(f"Copying failed: {exc}"))
                else:
                    self.statusBar().showMessage(f"Saved {saved}; copied {len(copied)} data file(s) next to it", 8000)
        return True

    def export(self, kind: str) -> bool:
        """Draw the current page to a PNG or SVG file (the same drawing as `blockflow render`)."""
        from blockflow.gui.canvas.render import render_page

        page = self.document.current_page
        base = Path(self.document.path).name[: -len(PROJECT_SUFFIX)] if self.document.path and \
            self.document.path.endswith(PROJECT_SUFFIX) else "diagram"
        suggested = str(Path(self._dialog_dir()) / f"{base}-{page}.{kind}")
        path, _ = QFileDialog.getSaveFileName(self, f"Export page as {kind.upper()}", suggested,
                                              f"{kind.upper()} images (*.{kind})")
        if not path:
            return False
        if not path.lower().endswith("." + kind):
            path += "." + kind
        try:
            render_page(self.document.project, page, path, registry=self.document.registry)
        except (BlockflowError, OSError) as exc:
            QMessageBox.critical(self, "Cannot export", literal(exc))
            return False
        self.statusBar().showMessage(f"Exported page '{page}' to {path}", 5000)
        return True

    # ------------------------------------------------------------------------- window events
    def closeEvent(self, event):
        if self.maybe_save():
            self.train_panel.shutdown()
            self.autosaver.discard()          # a clean close: nothing to recover
            self.save_settings()
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
        name = name or self.document.current_page
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
        name = name or self.document.current_page
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
        i = names.index(self.document.current_page)
        self.document.set_current_page(names[(i + step) % len(names)])

    # ------------------------------------------------------------------------- help
    def about(self) -> None:
        QMessageBox.about(self, "About blockflow",
                          f"<h3>blockflow {__version__}</h3>"
                          "<p>Draw a differentiable model as a TensorFlow-style block diagram, run it "
                          "with numpy, and see its gradients flow. StopGradient is a block: the diagram "
                          "shows where gradient flows and where it is cut.</p>")

    def open_block_reference(self) -> None:
        path = _block_reference()
        if path is not None:
            QDesktopServices.openUrl(QUrl.fromLocalFile(str(path)))

    # ------------------------------------------------------------------------- display
    def _update_title(self) -> None:
        title = self.document.project.metadata.get("title") or ""
        text = self.document.title
        if title and title != "Untitled" and not self.document.path:
            text += f" — {title}"
        self.setWindowTitle(f"{text} — blockflow")

    def _on_project_replaced(self) -> None:
        self._selection = []
        self._update_title()
        self._update_status()

    def _on_page_changed(self, _page: str) -> None:
        self._selection = []
        self._update_status()

    def _on_selection_changed(self, ids: list) -> None:
        self._selection = list(ids)
        self.inspector.set_nodes(ids)
        self._update_status()

    def _on_problem_count(self, errors: int, warnings: int) -> None:
        parts = []
        if errors:
            parts.append(f"{errors} error{'s' if errors != 1 else ''}")
        if warnings:
            parts.append(f"{warnings} warning{'s' if warnings != 1 else ''}")
        self.docks["problems"].setWindowTitle("Problems" + (f" ({', '.join(parts)})" if parts else ""))

    def _update_status(self) -> None:
        page = self.document.page()
        n = len(page.nodes)
        self._status_page.setText(f"Page: {page.name}")
        self._status_page.setToolTip(literal(f"scope {page.scope}/"))
        self._status_blocks.setText(f"{n} block{'s' if n != 1 else ''}, {len(page.edges)} "
                                    f"wire{'s' if len(page.edges) != 1 else ''}")
        sel = len(self._selection)
        self._status_selection.setText(f"{sel} selected" if sel else "")
        self._update_zoom()

    def _update_zoom(self) -> None:
        self._status_zoom.setText(f"zoom {self.view.zoom() * 100:.0f} %")
