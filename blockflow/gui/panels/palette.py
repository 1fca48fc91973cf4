"""The block palette: the project's composites, then the registry's categories, as a tree
filtered as you type.

Blocks leave it by drag (BLOCK_MIME, the block name in UTF-8) or by double-click. Imports no
canvas code (the MIME type is in gui/document/clipboard.py); it edits nothing itself (the main window adds the block).
"""
from __future__ import annotations

from PySide6.QtCore import QEvent, QMimeData, QRectF, Qt, Signal
from PySide6.QtGui import QCursor, QDrag, QIcon, QPainter, QPalette, QPen, QPixmap
from PySide6.QtWidgets import (QAbstractItemView, QLineEdit, QMenu, QTreeWidget, QTreeWidgetItem,
                               QVBoxLayout, QWidget)

from blockflow.gui.document.clipboard import BLOCK_MIME
from blockflow.gui.common.markup import rich_tooltip
from blockflow.gui.common.theme import Style
from blockflow.gui.common.blocksearch import haystack, rank

__all__ = ["PalettePanel", "BlockTree"]

_BLOCK_ROLE = Qt.UserRole + 1
_CATEGORY_ROLE = Qt.UserRole + 2
#: the category row of the project's composites (first in the tree)
COMPOSITES = "Composites"
#: what the context menu of a composite's row offers: (action key, text)
COMPOSITE_ACTIONS = (("edit", "Edit Definition"), ("rename", "Rename…"), ("delete", "Delete"),
                     ("export", "Export to Library File…"))


class BlockTree(QTreeWidget):
    """The tree itself: only block rows can be dragged, and they carry the block's name."""

    def mimeTypes(self):
        return [BLOCK_MIME]

    def mimeData(self, items):
        names = [i.data(0, _BLOCK_ROLE) for i in items if i.data(0, _BLOCK_ROLE)]
        if not names:
            return None
        data = QMimeData()
        data.setData(BLOCK_MIME, names[0].encode("utf-8"))
        data.setText(names[0])
        return data

    def startDrag(self, _actions):
        # Copy only: QAbstractItemView removes the dragged row when a drop reports a move.
        item = self.currentItem()
        mime = self.mimeData([item]) if item is not None else None
        if mime is None:
            return
        drag = QDrag(self)
        drag.setMimeData(mime)
        drag.setPixmap(self._drag_pixmap(mime.text()))
        drag.exec(Qt.CopyAction, Qt.CopyAction)

    def _drag_pixmap(self, name: str) -> QPixmap:
        """A small block-shaped label that follows the cursor while dragging."""
        pal = self.palette()
        metrics = self.fontMetrics()
        ratio = self.devicePixelRatioF()
        w, h = metrics.horizontalAdvance(name) + 24, metrics.height() + 12
        pix = QPixmap(int(w * ratio), int(h * ratio))
        pix.setDevicePixelRatio(ratio)
        pix.fill(Qt.transparent)
        painter = QPainter(pix)
        painter.setRenderHint(QPainter.Antialiasing)
        painter.setPen(QPen(pal.color(QPalette.Highlight), 1.5))
        painter.setBrush(pal.color(QPalette.Base))
        painter.drawRoundedRect(QRectF(1, 1, w - 2, h - 2), 6, 6)
        painter.setPen(pal.color(QPalette.Text))
        painter.drawText(QRectF(0, 0, w, h), Qt.AlignCenter, name)
        painter.end()
        return pix


class PalettePanel(QWidget):
    """Search box over a category tree of every registered block.

    ``block_activated(name)`` fires on double-click or Enter on a block row.
    """

    block_activated = Signal(str)
    #: (action key of COMPOSITE_ACTIONS, composite name): chosen in a composite row's menu
    composite_action = Signal(str, str)

    def __init__(self, registry, parent=None):
        super().__init__(parent)
        self.registry = registry
        self.search = QLineEdit(self)
        self.search.setPlaceholderText("Search blocks (name, alias, summary)")
        self.search.setClearButtonEnabled(True)
        self.tree = BlockTree(self)
        self.tree.setHeaderHidden(True)
        self.tree.setDragEnabled(True)
        self.tree.setDragDropMode(QAbstractItemView.DragOnly)
        self.tree.setSelectionMode(QAbstractItemView.SingleSelection)
        self.tree.setUniformRowHeights(True)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.setSpacing(4)
        layout.addWidget(self.search)
        layout.addWidget(self.tree)
        self._rows: dict[str, QTreeWidgetItem] = {}
        self._haystack: dict[str, str] = {}
        self._names: dict[str, list] = {}     # a block's name and aliases, lower case (ranking)
        self._place: dict[str, int] = {}      # its place in the unfiltered list
        self._categories: list[QTreeWidgetItem] = []
        self._populate()
        self.search.textChanged.connect(self.set_filter)
        self.search.returnPressed.connect(self._activate_first_visible)
        self.tree.itemActivated.connect(self._on_activated)
        self.tree.setContextMenuPolicy(Qt.CustomContextMenu)
        self.tree.customContextMenuRequested.connect(self._context_menu)

    def _swatch(self, style: Style, category: str) -> QIcon:
        """A small block-coloured square: the category's header colour on the canvas."""
        ratio = self.devicePixelRatioF()
        pix = QPixmap(int(14 * ratio), int(14 * ratio))
        pix.setDevicePixelRatio(ratio)
        pix.fill(Qt.transparent)
        painter = QPainter(pix)
        painter.setRenderHint(QPainter.Antialiasing)
        painter.setPen(QPen(style.border, 1.0))
        painter.setBrush(style.header_color(category))
        painter.drawRoundedRect(QRectF(1.5, 1.5, 11, 11), 3, 3)
        painter.end()
        return QIcon(pix)

    def _populate(self) -> None:
        style = self._style = Style(self.palette())
        comp = self._composites = QTreeWidgetItem(self.tree, [f"{COMPOSITES}  (0)"])
        comp.setData(0, _CATEGORY_ROLE, "composites")
        comp.setIcon(0, self._swatch(style, "composites"))
        comp.setFlags(Qt.ItemIsEnabled)
        font = comp.font(0)
        font.setBold(True)
        comp.setFont(0, font)
        comp.setToolTip(0, "this project's composite blocks: select blocks and Group (Ctrl+G) to make one")
        self._categories.append(comp)
        for category, specs in self.registry.categories().items():
            cat = QTreeWidgetItem(self.tree, [f"{category}  ({len(specs)})"])
            cat.setData(0, _CATEGORY_ROLE, category)
            cat.setIcon(0, self._swatch(style, category))
            cat.setFlags(Qt.ItemIsEnabled)
            font = cat.font(0)
            font.setBold(True)
            cat.setFont(0, font)
            cat.setToolTip(0, f"{len(specs)} blocks")
            self._categories.append(cat)
            for spec in specs:
                row = QTreeWidgetItem(cat, [spec.name])
                row.setData(0, _BLOCK_ROLE, spec.name)
                row.setFlags(Qt.ItemIsEnabled | Qt.ItemIsSelectable | Qt.ItemIsDragEnabled)
                tip = spec.summary
                if spec.aliases:
                    tip += f"\n(also: {', '.join(spec.aliases)})"
                row.setToolTip(0, rich_tooltip(tip + "\n(F1: its page in the Block Reference)"))
                self._rows[spec.name] = row
                self._haystack[spec.name] = haystack(spec.name, spec.aliases, spec.summary)
                self._names[spec.name] = [n.lower() for n in (spec.name, *spec.aliases)]
                self._place[spec.name] = len(self._place)
        self.tree.collapseAll()

    def changeEvent(self, event):
        super().changeEvent(event)
        if event.type() in (QEvent.PaletteChange, QEvent.ApplicationPaletteChange):
            self.restyle()

    def restyle(self) -> None:
        """Repaint the category swatches in the current palette's colours (light/dark)."""
        style = getattr(self, "_style", None)
        if style is None or Style.palette_key(self.palette()) == style.key:
            return
        style = self._style = Style(self.palette())
        for cat in self._categories:
            cat.setIcon(0, self._swatch(style, cat.data(0, _CATEGORY_ROLE)))

    def set_filter(self, text: str) -> None:
        """Show the blocks whose name, aliases or summary contain every word of ``text``, best
        first: an exact name (or alias), then names that start with it, names that contain it,
        and the rest (a summary that mentions it); categories in the order of their best block,
        their counts those shown. The best block is made current: Enter adds it."""
        words = text.lower().split()
        query = " ".join(words)
        ranked = []
        for order, cat in enumerate(self._categories):
            rows = cat.takeChildren()
            rows.sort(key=lambda row: (self._rank(row, query), self._place[row.data(0, _BLOCK_ROLE)])
                      if words else self._place[row.data(0, _BLOCK_ROLE)])
            cat.addChildren(rows)
            shown = 0
            for row in rows:
                hit = all(w in self._haystack[row.data(0, _BLOCK_ROLE)] for w in words)
                row.setHidden(not hit)
                shown += hit
            best = min((self._rank(r, query) for r in rows if not r.isHidden()), default=9) if words else 0
            ranked.append(((best, order) if words else (0, order), cat, shown, len(rows)))
        ranked.sort(key=lambda entry: entry[0])
        for entry in ranked:
            self.tree.takeTopLevelItem(self.tree.indexOfTopLevelItem(entry[1]))
        for i, (_, cat, shown, total) in enumerate(ranked):
            self.tree.insertTopLevelItem(i, cat)
            label = cat.text(0).split("  (")[0]
            cat.setText(0, f"{label}  ({shown} of {total})" if words else f"{label}  ({total})")
            cat.setHidden(shown == 0)
            cat.setExpanded(bool(words) and shown > 0)
        if words:
            first = self.visible_blocks()[:1]
            if first:
                self.tree.setCurrentItem(self._rows[first[0]])

    def _rank(self, row, query: str) -> int:
        """blocksearch.rank: the canvas's add-block popup ranks the same way."""
        return rank(self._names[row.data(0, _BLOCK_ROLE)], query)

    def visible_blocks(self) -> list[str]:
        """Block names currently shown, in tree order."""
        out = []
        for cat in (self.tree.topLevelItem(i) for i in range(self.tree.topLevelItemCount())):
            if cat.isHidden():
                continue
            for i in range(cat.childCount()):
                row = cat.child(i)
                if not row.isHidden():
                    out.append(row.data(0, _BLOCK_ROLE))
        return out

    def help_block(self) -> str:
        """The block F1 means here: the row under the mouse, else the current row ("" for none)."""
        viewport = self.tree.viewport()
        item = self.tree.itemAt(viewport.mapFromGlobal(QCursor.pos())) if viewport.underMouse() else None
        if item is None or not item.data(0, _BLOCK_ROLE):
            item = self.tree.currentItem()
        return (item.data(0, _BLOCK_ROLE) or "") if item is not None else ""

    def item_for(self, name: str) -> QTreeWidgetItem:
        return self._rows[name]

    def set_composites(self, entries) -> None:
        """Show the project's composites: ``entries`` are (name, documentation, instance count)."""
        cat = self._composites
        for i in reversed(range(cat.childCount())):
            block = cat.child(i).data(0, _BLOCK_ROLE)
            self._rows.pop(block, None)
            self._haystack.pop(block, None)
            cat.removeChild(cat.child(i))
        for name, doc, count in entries:
            block = "@" + name
            row = QTreeWidgetItem(cat, [name])
            row.setData(0, _BLOCK_ROLE, block)
            row.setFlags(Qt.ItemIsEnabled | Qt.ItemIsSelectable | Qt.ItemIsDragEnabled)
            used = f"used {count} time{'s' if count != 1 else ''}"
            row.setToolTip(0, rich_tooltip(f"{doc}\n({used}; right-click to edit, rename, delete or export)"
                                           if doc else f"composite {name} ({used}; right-click to edit, "
                                           "rename, delete or export)"))
            self._rows[block] = row
            self._haystack[block] = " ".join((name, doc, "composite")).lower()
            self._names[block] = [name.lower()]
            self._place[block] = len(self._place)
        cat.setText(0, f"{COMPOSITES}  ({len(entries)})")
        cat.setExpanded(bool(entries))
        if self.search.text():
            self.set_filter(self.search.text())
        else:
            cat.setHidden(False)

    def composite_names(self) -> list[str]:
        cat = self._composites
        return [cat.child(i).text(0) for i in range(cat.childCount())]

    def composite_menu(self, name: str) -> QMenu:
        """The context menu of composite ``name``'s row."""
        menu = QMenu(self)
        for key, text in COMPOSITE_ACTIONS:
            menu.addAction(text, lambda key=key: self.composite_action.emit(key, name))
        return menu

    def _context_menu(self, pos) -> None:
        item = self.tree.itemAt(pos)
        block = item.data(0, _BLOCK_ROLE) if item is not None else None
        if not block or not block.startswith("@"):
            return
        self.composite_menu(block[1:]).exec(self.tree.viewport().mapToGlobal(pos))

    def _on_activated(self, item: QTreeWidgetItem, _column: int) -> None:
        name = item.data(0, _BLOCK_ROLE)
        if name:
            self.block_activated.emit(name)

    def _activate_first_visible(self) -> None:
        item = self.tree.currentItem()
        if item is not None and item.data(0, _BLOCK_ROLE) and not item.isHidden():
            self.block_activated.emit(item.data(0, _BLOCK_ROLE))
