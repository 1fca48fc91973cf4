"""The page tabs above the canvas: one tab per page, in the document's order."""
from __future__ import annotations

import shiboken6
from PySide6.QtWidgets import QStyle, QTabBar, QToolButton

from blockflow.gui.common.plaintext import literal, mnemonic_free
from blockflow.gui.session.session import host_page

__all__ = ["PageTabBar"]


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
        # Bound methods only: Qt disconnects them when the bar goes (a closed window).
        for signal in (document.pages_changed, document.current_page_changed, document.project_replaced):
            signal.connect(self._on_pages)
        self.sync()

    def _on_pages(self, *_signal_args) -> None:
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
            # inside an instance (or a definition opened alone) its page's tab stays current
            host = host_page(self.document)
            self.setCurrentIndex(names.index(host) if host in names else 0)
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
