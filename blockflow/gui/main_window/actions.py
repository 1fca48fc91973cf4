"""The window's actions and menus. Actions are made by name (``window.actions[name]``); the menu
bar is laid out from one table, MENUS, once every action exists. A mixin of MainWindow."""
from __future__ import annotations

from PySide6.QtCore import QEvent
from PySide6.QtGui import QAction, QKeyEvent, QKeySequence
from PySide6.QtWidgets import (QAbstractSpinBox, QApplication, QComboBox, QLineEdit, QMenu,
                               QPlainTextEdit, QTextEdit, QWidget)

from blockflow.gui.main_window.docks import PANELS
from blockflow.gui.main_window.files import PROJECT_SUFFIX, sample_projects
from blockflow.gui.main_window.layout import reset_layout

__all__ = ["MenusMixin", "MENUS"]

# The menu bar: (title, entries). An entry is an action's name, "-" (a separator), or a submenu:
# "@recent", "@samples" and "@panels" are filled by the window; ("Title", [entries], attribute)
# is a submenu, kept as the window's attribute.
MENUS = (
    ("&File", ["new", "open", "@recent", "@samples", "-", "save", "save_as", "-", "autosave_interval", "-",
               "export_png", "export_svg", ("Export &Model", ["export_torch", "export_onnx"], "export_model_menu"), "-",
               "import_onnx", "import_composites", "export_composites", "-", "quit"]),
    ("&Edit", ["undo", "redo", "-", "cut", "copy", "paste", "duplicate", "delete", "-", "select_all",
               ("Ali&gn", ["align_left", "align_hcenter", "align_right", "-",
                           "align_top", "align_vcenter", "align_bottom"], "align_menu"),
               ("Dis&tribute", ["distribute_horizontal", "distribute_vertical"], "distribute_menu"),
               "auto_layout", "-", "group", "ungroup", "frame_selection", "go_up"]),
    ("&View", ["zoom_in", "zoom_out", "reset_zoom", "fit", "-", "collapse_all", "expand_all", "-", "@panels", "reset_layout", "-", "gradient_paths",
               "gradient_legend"]),
    ("&Page", ["add_page", "rename_page", "delete_page", "-", "next_page", "prev_page"]),
    ("&Run", ["run_forward", "run_backward", "-", "clear_results", "-", "check_gradients", "-",
              "train", "reset_variables"]),
    ("&Help", ["block_reference", "shortcuts", "-", "about"]),
)


class MenusMixin:
    """Actions and menus of MainWindow (see the module)."""

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
        a = self._action
        a("new", "&New", self.new_file, K.New, "Start an empty project")
        a("open", "&Open…", self.open_file, K.Open, "Open a project file")
        a("save", "&Save", self.save, K.Save, "Save the project")
        a("save_as", "Save &As…", self.save_as, K.SaveAs, "Save the project under a new name")
        a("autosave_interval", "Autosave &Interval…", self.set_autosave_interval, None,
          "How often unsaved work is written to the recovery folder")
        a("export_png", "Export &PNG…", lambda: self.export("png"), None, "Draw this page as a PNG image")
        a("export_svg", "Export S&VG…", lambda: self.export("svg"), None, "Draw this page as an SVG image")
        a("export_torch", "&PyTorch Module…", lambda: self.export_model("torch"), None,
          "Write this page as a standalone PyTorch module (and its initial values beside it)")
        a("export_onnx", "&ONNX Model…", lambda: self.export_model("onnx"), None,
          "Write this page's forward pass as an ONNX model, for inference")
        a("import_onnx", "Import O&NX Model…", lambda: self.import_onnx_model(), None,
          "Open an ONNX model as a new project: each node becomes the blocks that compute it")
        a("import_composites", "&Import Composites…", self.import_composites, None,
          "Add the composites of a library file to this project")
        a("export_composites", "E&xport Composites…", self.export_composites, None,
          "Write this project's composites to a library file other projects can import")
        a("quit", "&Quit", self.close, K.Quit)
        self._build_undo_actions()
        self._build_canvas_actions()
        a("add_page", "&Add Page", self.add_page, "Ctrl+Shift+N")
        a("rename_page", "&Rename Page…", lambda: self.rename_page(), "F2")
        a("delete_page", "&Delete Page…", lambda: self.delete_page())
        a("next_page", "&Next Page", lambda: self._step_page(1), "Ctrl+PgDown")
        a("prev_page", "&Previous Page", lambda: self._step_page(-1), "Ctrl+PgUp")
        a("reset_layout", "&Reset Layout", lambda: reset_layout(self), None,
          "Put every panel back in its default place and size")
        a("about", "&About blockflow", self.about)
        # Help is inside the editor (helpmenu.py): F1 opens the page of the block it is over.
        a("block_reference", "&Block Reference", self.help_for_focus, K.HelpContents,
          "Every block's documentation, searchable; F1 over a block shows its page")
        a("shortcuts", "&Keyboard Shortcuts", self.show_shortcuts, "Ctrl+/",
          "Every shortcut of the menus and of the canvas")

    def _build_undo_actions(self) -> None:
        K = QKeySequence.StandardKey
        undo = self.document.undo_stack.createUndoAction(self, "&Undo")
        undo.setShortcut(QKeySequence(K.Undo))
        redo = self.document.undo_stack.createRedoAction(self, "&Redo")
        redo.setShortcuts([QKeySequence(K.Redo), QKeySequence("Ctrl+Y")]
                          if QKeySequence(K.Redo) != QKeySequence("Ctrl+Y") else [QKeySequence(K.Redo)])
        self.actions["undo"], self.actions["redo"] = undo, redo
        undo.setProperty("listed_as", "Undo")     # their text names the edit; the shortcut list does not
        redo.setProperty("listed_as", "Redo")
        for act in (undo, redo):
            self.addAction(act)
        # the status bar says what was undone, never still what the undone edit had said
        undo.triggered.connect(self._tell_undone)
        redo.triggered.connect(self._tell_redone)

    def _tell_undone(self, _checked=False) -> None:
        what = self.document.undo_stack.redoText()
        self.statusBar().showMessage(f"undid: {what}" if what else "", 6000)

    def _tell_redone(self, _checked=False) -> None:
        what = self.document.undo_stack.undoText()
        self.statusBar().showMessage(f"redid: {what}" if what else "", 6000)

    def _build_canvas_actions(self) -> None:
        K = QKeySequence.StandardKey
        v, a = self.view, self._action
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
        a("group", "&Group as Composite…", t("group", v.group_selection), "Ctrl+G",
          "Make the selected blocks a new composite block, used once in their place")
        a("ungroup", "U&ngroup", t("ungroup", v.ungroup_selection), "Ctrl+Shift+G",
          "Put the blocks of the selected composite instances back in their place")
        a("frame_selection", "&Frame Selection", t("frame_selection", v.canvas_layout.frame_selection), "Ctrl+Shift+F",
          "Draw a titled, coloured frame around the selected blocks (double-click its title to edit it)")
        a("go_up", "Close &Instance", v.go_up, None, "Go up one level, out of the composite shown (Esc)")
        for how, text in (("left", "Left Edges"), ("hcenter", "Horizontal Centres"), ("right", "Right Edges"),
                          ("top", "Top Edges"), ("vcenter", "Vertical Centres"), ("bottom", "Bottom Edges")):
            a(f"align_{how}", text, lambda how=how: v.align_selection(how))
        for how, text in (("horizontal", "Horizontally"), ("vertical", "Vertically")):
            a(f"distribute_{how}", text, lambda how=how: v.distribute_selection(how))
        a("zoom_in", "Zoom &In", lambda: self._zoom(v.zoom_in), K.ZoomIn)
        a("zoom_out", "Zoom &Out", lambda: self._zoom(v.zoom_out), K.ZoomOut)
        a("reset_zoom", "&Actual Size", lambda: self._zoom(v.reset_zoom), "Ctrl+1")
        a("fit", "&Fit to Window", lambda: self._zoom(v.fit_to_view), "Ctrl+0", "Show the whole page")
        a("collapse_all", "&Collapse All", lambda: v.set_collapsed_all(True), None,
          "Draw the selected blocks (or every block of the page) as their title and ports (H: the selection)")
        a("expand_all", "E&xpand All", lambda: v.set_collapsed_all(False), None,
          "Draw the selected blocks (or every block of the page) whole again")

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

    # ------------------------------------------------------------------------- menus
    def _build_menus(self) -> None:
        """The menu bar, from MENUS."""
        bar = self.menuBar()
        menus = {}
        for title, entries in MENUS:
            menus[title] = menu = bar.addMenu(title)
            self._fill_menu(menu, entries)
        self.view_menu, self.run_menu = menus["&View"], menus["&Run"]
        self._fill_recent_menu()

    def _fill_menu(self, menu: QMenu, entries) -> None:
        for entry in entries:
            if entry == "-":
                menu.addSeparator()
            elif isinstance(entry, tuple):
                title, items, attribute = entry
                sub = menu.addMenu(title)
                self._fill_menu(sub, items)
                setattr(self, attribute, sub)
            elif entry.startswith("@"):
                getattr(self, "_menu_" + entry[1:])(menu)
            else:
                menu.addAction(self.actions[entry])

    def _menu_recent(self, menu: QMenu) -> None:
        self.recent_menu = menu.addMenu("Open &Recent")
        self.recent_menu.aboutToShow.connect(self._fill_recent_menu)

    def _menu_samples(self, menu: QMenu) -> None:
        self.sample_menu = menu.addMenu("Open Sa&mple")
        for path in sample_projects():
            s = self.sample_menu.addAction(path.name[: -len(PROJECT_SUFFIX)].replace("_", " "))
            s.setData(str(path))
            s.setStatusTip(f"Open a copy of the sample {path.name}")
            s.triggered.connect(lambda _c=False, p=str(path): self.open_sample(p))

    def _menu_panels(self, menu: QMenu) -> None:
        """View > Panels: a toggle per dock (``actions["show_<key>"]``), in the docks table's order."""
        panels = menu.addMenu("&Panels")
        for key in (entry.key for entry in PANELS):
            toggle = self.docks[key].toggleViewAction()
            self.actions["show_" + key] = toggle
            panels.addAction(toggle)
