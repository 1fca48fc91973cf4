"""The Block Reference inside the editor (Help > Block Reference, F1 over a block or a palette
entry): a search field, the list of blocks it matches, and the chosen block's page rendered, the
same page docs/blocks.md has (blockdoc.py). It needs no outside viewer and no source tree."""
from __future__ import annotations

from PySide6.QtCore import Qt, QUrl
from PySide6.QtWidgets import (QLineEdit, QListWidget, QListWidgetItem, QSplitter, QTextBrowser,
                               QVBoxLayout, QWidget)

from blockflow.gui.common.blocksearch import haystack, rank as rank_of
from blockflow.gui.common.markup import markup_plain
from blockflow.gui.panels.blockdoc import block_page, wrap_code

__all__ = ["BlockReferencePanel"]

_NAME_ROLE = Qt.UserRole + 1
_LINK = "block:"


class BlockReferencePanel(QWidget):
    """Search, list and page. ``show_block(name)`` opens a block's page (a composite's too). The
    list of matches shows while something is typed; the index page links every block."""

    def __init__(self, document, parent=None):
        super().__init__(parent)
        self.document = document
        self.current: str | None = None
        self.search = QLineEdit(self)
        self.search.setPlaceholderText("Search the reference (name, alias, summary)")
        self.search.setClearButtonEnabled(True)
        self.list = QListWidget(self)
        self.list.setUniformItemSizes(True)
        self.page = QTextBrowser(self)
        self.page.setOpenLinks(False)          # block: links open pages here; nothing leaves the app
        self.page.anchorClicked.connect(self._on_link)
        split = QSplitter(Qt.Vertical, self)
        split.addWidget(self.list)
        split.addWidget(self.page)
        split.setStretchFactor(0, 1)
        split.setStretchFactor(1, 4)
        self.split = split
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.setSpacing(4)
        layout.addWidget(self.search)
        layout.addWidget(split, 1)
        self._fill()
        self.search.textChanged.connect(self.set_filter)
        self.search.returnPressed.connect(self._open_first)
        self.list.currentItemChanged.connect(self._on_current)
        self.list.itemActivated.connect(lambda item: self.show_block(item.data(_NAME_ROLE)))
        self.list.hide()
        self._show_index()

    def _fill(self) -> None:
        self._haystack, self._place, self._names = {}, {}, {}
        for specs in self.document.registry.categories().values():
            for spec in specs:
                item = QListWidgetItem(spec.name, self.list)
                item.setData(_NAME_ROLE, spec.name)
                item.setToolTip(markup_plain(spec.summary))
                self._haystack[spec.name] = haystack(spec.name, spec.aliases, spec.summary)
                self._names[spec.name] = [n.lower() for n in (spec.name, *spec.aliases)]
                self._place[spec.name] = len(self._place)

    def set_filter(self, text: str) -> None:
        """List the blocks whose name, aliases or summary hold every word of ``text``: the exact
        name first, then names starting with it, then the rest; the first is made current."""
        words = text.lower().split()
        query = " ".join(words)

        def rank(name):     # as the palette and the canvas's popup rank (blocksearch.py)
            return rank_of(self._names[name], query) if words else 0, self._place[name]

        items = [self.list.takeItem(0) for _ in range(self.list.count())]
        items.sort(key=lambda item: rank(item.data(_NAME_ROLE)))
        self.list.blockSignals(True)         # rows moving are not a choice of the user
        for item in items:
            self.list.addItem(item)
            item.setHidden(not all(w in self._haystack[item.data(_NAME_ROLE)] for w in words))
        self.list.blockSignals(False)
        shown = self.visible_blocks()
        # the list is for choosing among matches; with nothing typed the page has the height
        self.list.setVisible(bool(words))
        if words and shown:
            self.list.setCurrentRow(next(r for r in range(self.list.count()) if not self.list.item(r).isHidden()))

    def visible_blocks(self) -> list[str]:
        return [self.list.item(r).data(_NAME_ROLE) for r in range(self.list.count())
                if not self.list.item(r).isHidden()]

    def show_block(self, name: str) -> bool:
        """Show ``name``'s page (False, and the index, when no such block is known)."""
        spec = self.document.blocks.get(name) if name else None
        if spec is None:
            self._show_index()
            return False
        self.current = spec.name
        self.page.setMarkdown(block_page(spec))
        wrap_code(self.page.document())
        for row in range(self.list.count()):
            item = self.list.item(row)
            if item.data(_NAME_ROLE) == spec.name:
                self.list.blockSignals(True)
                self.list.setCurrentItem(item)
                self.list.blockSignals(False)
                self.list.scrollToItem(item)
                break
        return True

    def page_text(self) -> str:
        """The page shown, as plain text (what a reader sees)."""
        return self.page.toPlainText()

    def _show_index(self) -> None:
        self.current = None
        cats = self.document.registry.categories()
        out = ["# Block reference", "",
               f"{len(self.document.registry)} blocks in {len(cats)} categories. Type in the search "
               "field, pick a block in the list, or press F1 over a block on the canvas or in the "
               "palette.", ""]
        for cat, specs in cats.items():
            out.append(f"**{cat}**: " + ", ".join(f"[{s.name}]({_LINK}{s.name})" for s in specs))
            out.append("")
        self.page.setMarkdown("\n".join(out))

    def _on_current(self, item, _previous) -> None:
        if item is not None and not item.isHidden():
            self.show_block(item.data(_NAME_ROLE))

    def _on_link(self, url: QUrl) -> None:
        text = url.toString()
        if text.startswith(_LINK):
            self.show_block(text[len(_LINK):])

    def _open_first(self) -> None:
        names = self.visible_blocks()
        item = self.list.currentItem()
        if item is not None and not item.isHidden():
            self.show_block(item.data(_NAME_ROLE))
        elif names:
            self.show_block(names[0])

