"""The problems panel: the compiler's diagnostics for the current page, kept live.

It reads ``document.program().diagnostics`` (no checking of its own) and reports clicks as
``problem_activated(node_id)``; the main window selects and centres the block.
"""
from __future__ import annotations

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (QAbstractItemView, QStyle, QTreeWidget, QTreeWidgetItem,
                               QVBoxLayout, QWidget)

__all__ = ["ProblemsPanel"]

_NODE_ROLE = Qt.UserRole + 1


class ProblemsPanel(QWidget):
    """A list of severity, place and message; ``count_changed(errors, warnings)`` after updates."""

    problem_activated = Signal(str)
    count_changed = Signal(int, int)

    def __init__(self, document, parent=None):
        super().__init__(parent)
        self.document = document
        self.tree = QTreeWidget(self)
        self.tree.setColumnCount(2)
        self.tree.setHeaderLabels(["Block", "Problem"])
        self.tree.setRootIsDecorated(False)
        self.tree.setAlternatingRowColors(True)
        self.tree.setSelectionMode(QAbstractItemView.SingleSelection)
        self.tree.setWordWrap(True)
        self.tree.header().setStretchLastSection(True)
        self.tree.setColumnWidth(0, 170)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.tree)
        # Several edits in one macro (a paste, a delete) fire many signals: refresh once after.
        self._pending = QTimer(self)
        self._pending.setSingleShot(True)
        self._pending.setInterval(0)
        self._pending.timeout.connect(self.refresh)
        document.structure_changed.connect(self._on_structure_changed)
        document.current_page_changed.connect(lambda _page: self._pending.start())
        document.project_replaced.connect(self._pending.start)
        document.pages_changed.connect(self._pending.start)
        self.tree.itemClicked.connect(self._on_item)
        self.tree.itemActivated.connect(self._on_item)
        self.errors = self.warnings = 0
        self.refresh()

    def _on_structure_changed(self, page: str) -> None:
        if page == self.document.current_page:
            self._pending.start()

    def refresh(self) -> None:
        self._pending.stop()
        diagnostics = self.document.program().diagnostics
        self.tree.clear()
        style = self.style()
        icons = {"error": style.standardIcon(QStyle.SP_MessageBoxCritical),
                 "warning": style.standardIcon(QStyle.SP_MessageBoxWarning)}
        errors = warnings = 0
        for d in sorted(diagnostics, key=lambda d: d.severity != "error"):
            where = d.node or "(page)"
            if d.port:
                where += f" · {d.port}"
            item = QTreeWidgetItem(self.tree, [where, d.message])
            item.setIcon(0, icons.get(d.severity, icons["warning"]))
            item.setToolTip(0, f"{d.severity}: {d.where}")
            item.setToolTip(1, d.message)
            item.setData(0, _NODE_ROLE, d.node or "")
            errors += d.severity == "error"
            warnings += d.severity != "error"
        if not diagnostics:
            item = QTreeWidgetItem(self.tree, ["", "No problems on this page."])
            item.setFlags(Qt.ItemIsEnabled)
            item.setIcon(0, style.standardIcon(QStyle.SP_DialogApplyButton))
        self.errors, self.warnings = errors, warnings
        self.count_changed.emit(errors, warnings)

    def rows(self) -> list[tuple[str, str]]:
        """(node id, message) of each listed problem, in display order."""
        return [(self.tree.topLevelItem(i).data(0, _NODE_ROLE) or "", self.tree.topLevelItem(i).text(1))
                for i in range(self.tree.topLevelItemCount())
                if self.tree.topLevelItem(i).data(0, _NODE_ROLE) is not None]

    def _on_item(self, item: QTreeWidgetItem, _column: int) -> None:
        node = item.data(0, _NODE_ROLE)
        if node:
            self.problem_activated.emit(node)
