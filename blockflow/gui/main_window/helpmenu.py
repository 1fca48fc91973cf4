"""Help inside the editor: Help > Block Reference (the in-app reference dock, on the block F1 is
over) and Help > Keyboard Shortcuts (every shortcut, read from the window's actions and the
canvas's key table, so the list is never out of date). A mixin of MainWindow, with the dialog."""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import (QApplication, QDialog, QDialogButtonBox, QHeaderView, QLineEdit, QTreeWidget,
                               QTreeWidgetItem, QVBoxLayout)

from blockflow.gui.canvas.keymap import canvas_rows
from blockflow.gui.main_window.actions import MENUS

__all__ = ["HelpMixin", "ShortcutsDialog", "shortcut_rows"]


def _entries(entries, path: str):
    """(menu path, action name) of a MENUS entry list, submenus walked."""
    for entry in entries:
        if isinstance(entry, tuple):
            yield from _entries(entry[1], f"{path} > {entry[0].replace('&', '')}")
        elif entry != "-" and not entry.startswith("@"):
            yield path, entry


def shortcut_rows(actions: dict, menus) -> list[tuple[str, str, str]]:
    """(group, keys, what) for every action of ``actions`` that has a shortcut, grouped by the
    menu it is in (``menus``: the MENUS table); actions in no menu come last, as "Other"."""
    rows, seen = [], set()

    def add(group, name):
        act = actions.get(name)
        if act is None or name in seen:
            return
        seen.add(name)
        keys = ", ".join(s.toString(QKeySequence.NativeText) for s in act.shortcuts() if not s.isEmpty())
        if keys:
            text = act.property("listed_as") or act.text()     # Undo/Redo: not "Undo Collapse 1 block(s)"
            rows.append((group, keys, text.replace("&&", "\0").replace("&", "").replace("\0", "&")
                         .rstrip(".…")))

    for title, entries in menus:
        for path, name in _entries(entries, title.replace("&", "")):
            add(path, name)
    for name in actions:
        add("Other", name)
    return rows


class ShortcutsDialog(QDialog):
    """Help > Keyboard Shortcuts: the menus' shortcuts and the canvas's keys, with a filter."""

    def __init__(self, actions: dict, menus, parent=None):
        super().__init__(parent)
        self.setWindowTitle("Keyboard Shortcuts")
        self.filter = QLineEdit(self)
        self.filter.setPlaceholderText("Filter (a key or a word)")
        self.filter.setClearButtonEnabled(True)
        self.tree = QTreeWidget(self)
        self.tree.setColumnCount(2)
        self.tree.setHeaderLabels(["Keys", "What they do"])
        self.tree.setRootIsDecorated(True)
        self.tree.setWordWrap(True)
        self.tree.header().setSectionResizeMode(0, QHeaderView.ResizeToContents)
        groups: dict[str, QTreeWidgetItem] = {}
        for group, keys, what in shortcut_rows(actions, menus):
            top = groups.get(group.split(" > ")[0])
            if top is None:
                top = groups[group.split(" > ")[0]] = QTreeWidgetItem(self.tree, [f"{group.split(' > ')[0]} menu"
                                                                                   if group != "Other" else group])
            QTreeWidgetItem(top, [keys, what if " > " not in group else f"{group.split(' > ', 1)[1]} > {what}"])
        canvas = QTreeWidgetItem(self.tree, ["Canvas (the diagram has the focus)"])
        for keys, what in canvas_rows():
            QTreeWidgetItem(canvas, [keys, what])
        for i in range(self.tree.topLevelItemCount()):
            top = self.tree.topLevelItem(i)
            top.setFirstColumnSpanned(True)
            font = top.font(0)
            font.setBold(True)
            top.setFont(0, font)
        self.tree.expandAll()
        buttons = QDialogButtonBox(QDialogButtonBox.Close, self)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.filter)
        layout.addWidget(self.tree, 1)
        layout.addWidget(buttons)
        self.filter.textChanged.connect(self.set_filter)
        self.resize(760, 640)

    def rows(self) -> list[tuple[str, str, str]]:
        """(group, keys, what) of the rows shown."""
        out = []
        for i in range(self.tree.topLevelItemCount()):
            top = self.tree.topLevelItem(i)
            for j in range(top.childCount()):
                row = top.child(j)
                if not row.isHidden():
                    out.append((top.text(0), row.text(0), row.text(1)))
        return out

    def set_filter(self, text: str) -> None:
        words = text.lower().split()
        for i in range(self.tree.topLevelItemCount()):
            top = self.tree.topLevelItem(i)
            shown = 0
            for j in range(top.childCount()):
                row = top.child(j)
                hay = f"{row.text(0)} {row.text(1)}".lower()
                row.setHidden(not all(w in hay for w in words))
                shown += not row.isHidden()
            top.setHidden(shown == 0)


class HelpMixin:
    """The Help menu's slots of MainWindow."""

    def open_block_reference(self, block: str = "") -> None:
        """Show the Block Reference dock, on ``block``'s page when one is given."""
        dock = self.docks["reference"]
        if dock.isHidden() and not dock.isFloating() and not self.tabifiedDockWidgets(dock):
            self.tabifyDockWidget(self.docks["inspector"], dock)    # first shown: beside the Inspector
        dock.show()
        dock.raise_()
        # a page is read, not glanced at: room for it beside the canvas, most of the column's height
        if dock.height() < self.height() * 0.55:
            below = [d for d in self.docks.values() if d.isVisible() and d is not dock
                     and self.dockWidgetArea(d) == self.dockWidgetArea(dock) and d.y() > dock.y()]
            self.resizeDocks([dock, *below[:1]], [int(self.height() * 0.6), int(self.height() * 0.15)],
                             Qt.Vertical)
        if dock.width() < 420:
            self.resizeDocks([dock], [420], Qt.Horizontal)
        if block:
            self.block_reference.show_block(block)
        else:
            self.block_reference.search.setFocus(Qt.OtherFocusReason)

    def help_for_focus(self) -> None:
        """Help > Block Reference (F1): on the block F1 was pressed over, in the canvas or the
        palette; the reference's index from anywhere else."""
        focus = QApplication.focusWidget()
        view, palette = self.view, self.palette_panel
        # the mouse first: F1 is pressed "over" a block, wherever the typing focus is
        if view.viewport().underMouse() and view.help_block():
            block = view.help_block()
        elif palette.tree.viewport().underMouse() and palette.help_block():
            block = palette.help_block()
        elif focus is not None and (focus is view or view.isAncestorOf(focus)):
            block = view.help_block()
        elif focus is not None and palette.isAncestorOf(focus):
            block = palette.help_block()
        else:
            block = ""
        self.open_block_reference(block)

    def show_shortcuts(self) -> ShortcutsDialog:
        """Help > Keyboard Shortcuts (kept open beside the editor; one at a time)."""
        dialog = getattr(self, "shortcuts_dialog", None)
        if dialog is None:
            dialog = self.shortcuts_dialog = ShortcutsDialog(self.actions, MENUS, self)
        dialog.show()
        dialog.raise_()
        return dialog
