"""The problems panel: the compiler's diagnostics for every page, kept live, and the project's
training settings that were left out.

It reads the diagnostics of ``document.ready_program(page)`` (no checking of its own) and, while
a page compiles off the UI thread, shows that page's last diagnostics and says it is being
checked. The training settings come from ``run.settings.recommended_settings``. A click on a problem
of another page makes that page current, then reports ``problem_activated(node_id)``; the main
window selects and centres the block. A problem inside a composite instance names its full path
(``main/d1/MatMul_1``); a click on it opens that instance (the document's Location) and reports
the block as drawn there (``MatMul_1``).
"""
from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QAbstractItemView, QStyle, QTreeWidget, QTreeWidgetItem,
                               QVBoxLayout, QWidget)

from blockflow.errors import BlockflowError
from blockflow.run.settings import recommended_settings
from blockflow.gui.document.location import Location
from blockflow.gui.common.plaintext import literal
from blockflow.gui.common.refresh import Debounced

__all__ = ["ProblemsPanel"]

_NODE_ROLE = Qt.UserRole + 1
_PAGE_ROLE = Qt.UserRole + 2
#: how often the list follows while pages are being compiled one after another (ms)
CHECKING_REFRESH_MS = 250
#: the Block column of a problem in the page's recommended training settings
SETTINGS_PLACE = "(training settings)"


class ProblemsPanel(QWidget):
    """A list of page, severity, place and message (pages in project order, errors first
    within a page); ``count_changed(errors, warnings)`` after updates, counting every page."""

    problem_activated = Signal(str)
    count_changed = Signal(int, int)

    def __init__(self, document, parent=None):
        super().__init__(parent)
        self.document = document
        self.tree = QTreeWidget(self)
        self.tree.setColumnCount(3)
        self.tree.setHeaderLabels(["Page", "Block", "Problem"])
        self.tree.setRootIsDecorated(False)
        self.tree.setAlternatingRowColors(True)
        self.tree.setSelectionMode(QAbstractItemView.SingleSelection)
        self.tree.setWordWrap(True)
        self.tree.header().setStretchLastSection(True)
        self.tree.setColumnWidth(0, 120)
        self.tree.setColumnWidth(1, 170)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.tree)
        # Several edits in one macro (a paste, a delete) fire many signals: refresh once after.
        # (Bound methods only: Qt disconnects them when this panel goes, a closed window.)
        self._refresh = Debounced(self, self.refresh)
        self._while_checking = Debounced(self, self.refresh, CHECKING_REFRESH_MS)
        document.structure_changed.connect(self._on_structure)
        document.program_ready.connect(self._on_program_ready)
        self._refresh.follow(document.page_renamed, document.project_replaced, document.pages_changed)
        self.tree.itemClicked.connect(self._on_item)
        self.tree.itemActivated.connect(self._on_item)
        self.errors = self.warnings = self.checking = 0
        self._shown = None               # what the list shows, to leave it as it is when unchanged
        self.run_problem: tuple[str, str, str] | None = None    # (page, node, message) of a failed run
        self.refresh()

    def set_run_problem(self, page: str, node: str, message: str) -> None:
        """Show a failed run (or training) at the top: it is not a problem of the diagram, so it
        is not counted with them; the next run, Clear results or an edit of that page removes it."""
        self.run_problem = (page, node or "", message)
        self.refresh()

    def clear_run_problem(self, page: str | None = None) -> None:
        if self.run_problem is not None and (page is None or page == self.run_problem[0]):
            self.run_problem = None
            self.refresh()

    def refresh(self) -> None:
        self._refresh.cancel()
        self._while_checking.cancel()
        rows, checking = self._rows()
        if (rows, checking, self.run_problem) == self._shown:
            return                       # a page compiled again to the same problems
        self._shown = (rows, checking, self.run_problem)
        self.tree.clear()
        style = self.style()
        icons = {"error": style.standardIcon(QStyle.SP_MessageBoxCritical),
                 "warning": style.standardIcon(QStyle.SP_MessageBoxWarning)}
        if self.run_problem is not None:
            page, node, message = self.run_problem
            shown = f"{page}/{node}" if "/" in node else node
            item = QTreeWidgetItem(self.tree, [page, shown or "(run)", f"the last run failed: {message}"])
            item.setIcon(0, icons["error"])
            item.setToolTip(2, literal(message))
            item.setData(0, _NODE_ROLE, node)
            item.setData(0, _PAGE_ROLE, page)
        errors = warnings = 0
        for page, node, where, message, severity, about in rows:
            item = QTreeWidgetItem(self.tree, [page, where, message])
            item.setIcon(0, icons.get(severity, icons["warning"]))
            item.setToolTip(0, literal(f"{severity} on page '{page}'"))
            item.setToolTip(1, literal(about))
            item.setToolTip(2, literal(message))
            item.setData(0, _NODE_ROLE, node)
            item.setData(0, _PAGE_ROLE, page)
            errors += severity == "error"
            warnings += severity != "error"
        if checking:
            item = QTreeWidgetItem(self.tree, ["", "", f"Checking {checking} page{'s' if checking != 1 else ''}…"])
            item.setFlags(Qt.ItemIsEnabled)
            item.setIcon(0, style.standardIcon(QStyle.SP_BrowserReload))
        elif not errors and not warnings and self.run_problem is None:
            item = QTreeWidgetItem(self.tree, ["", "", "No problems."])
            item.setFlags(Qt.ItemIsEnabled)
            item.setIcon(0, style.standardIcon(QStyle.SP_DialogApplyButton))
        self.errors, self.warnings, self.checking = errors, warnings, checking
        self.count_changed.emit(errors, warnings)

    def _rows(self) -> tuple[list, int]:
        """(page, node, where, message, severity, tooltip of where) per problem, pages in order,
        errors first within a page; and how many pages are being compiled (shown with their last
        problems until the new ones land)."""
        doc = self.document
        rows, checking = [], 0
        for page in doc.project.pages:
            program = doc.ready_program(page.name)
            if program is None:
                checking += 1
                program = doc.latest_program(page.name)
            diagnostics = program.diagnostics if program is not None else ()
            for d in sorted(diagnostics, key=lambda d: d.severity != "error"):
                # inside an instance: the full path, page first, as the compiler names it
                node_text = f"{page.name}/{d.node}" if d.node and "/" in d.node else d.node
                where = (node_text or "(page)") + (f" · {d.port}" if d.port else "")
                rows.append((page.name, d.node or "", where, d.message, d.severity, f"{d.severity}: {d.where}"))
            settings = []
            recommended_settings(doc.project, page, settings)
            for problem in settings:
                rows.append((page.name, "", SETTINGS_PLACE, f"{problem}; the Train panel uses its own value",
                             "warning", f"the training settings the project recommends for page '{page.name}'"))
        return rows, checking

    def _on_program_ready(self, _page: str) -> None:
        # While many pages are checked one after the other, a list of them all is made a few
        # times a second, not once per page (that would be quadratic in their number).
        if not self.document.compiling():
            self._refresh.later()
        elif not self._while_checking.pending():
            self._while_checking.later()

    def _on_structure(self, page: str) -> None:
        if self.run_problem is not None and self.run_problem[0] == page:
            self.run_problem = None            # the diagram changed: that run is history
        self._refresh.later()

    def rows(self) -> list[tuple[str, str]]:
        """(node id, message) of each listed problem, in display order."""
        return [(node, message) for _page, node, message in self.page_rows()]

    def page_rows(self) -> list[tuple[str, str, str]]:
        """(page, node id, message) of each listed problem, in display order."""
        items = [self.tree.topLevelItem(i) for i in range(self.tree.topLevelItemCount())]
        return [(item.data(0, _PAGE_ROLE) or "", item.data(0, _NODE_ROLE) or "", item.text(2))
                for item in items if item.data(0, _NODE_ROLE) is not None]

    def _on_item(self, item: QTreeWidgetItem, _column: int) -> None:
        page, node = item.data(0, _PAGE_ROLE), item.data(0, _NODE_ROLE)
        doc = self.document
        if node and "/" in node and any(p.name == page for p in doc.project.pages):
            level, _, node = node.rpartition("/")
            try:
                doc.set_location(Location.at(doc.project, page, level))
            except BlockflowError:        # the instance went since the compile
                return
        elif page and (page != doc.current_page or doc.location.in_instance) and \
                any(p.name == page for p in doc.project.pages):
            doc.set_current_page(page)
        if node:
            self.problem_activated.emit(node)
