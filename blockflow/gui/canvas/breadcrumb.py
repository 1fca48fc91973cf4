"""The breadcrumb bar above the canvas: where the editor is (``main › d1 (Dense) › blk (Block)``),
a click on a crumb goes there, and, inside a composite, what an edit changes ("editing Dense: 3
instances"). Hidden on a page's own top level, where there is nothing to say."""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QToolButton, QWidget

from blockflow.composite import composite_name
from blockflow.errors import ProjectError
from blockflow.gui.common.plaintext import literal, mnemonic_free

__all__ = ["Breadcrumb"]

SEPARATOR = "\u203a"


class Breadcrumb(QWidget):
    """One flat button per level from the page down to the diagram shown; the last is the
    current one (checked). Follows the document's location and composites."""

    def __init__(self, document, parent=None):
        super().__init__(parent)
        self.setObjectName("breadcrumb")
        self.document = document
        self._row = QHBoxLayout(self)
        self._row.setContentsMargins(6, 2, 6, 2)
        self._row.setSpacing(2)
        self.note = QLabel(self)
        self.note.setObjectName("breadcrumbNote")
        self.note.setTextFormat(Qt.PlainText)
        self.buttons: list[QToolButton] = []
        self.setAutoFillBackground(True)
        for signal in (document.location_changed, document.composites_changed, document.project_replaced,
                       document.pages_changed, document.structure_changed):
            signal.connect(self.sync)
        self.sync()

    def labels(self) -> list[str]:
        return [b.text().replace("&&", "&") for b in self.buttons]

    def sync(self, *_why) -> None:
        """Rebuild the crumbs from the document's location."""
        doc = self.document
        loc = doc.location
        for i in reversed(range(self._row.count())):
            w = self._row.itemAt(i).widget()
            self._row.takeAt(i)
            if w is not None and w is not self.note:
                w.deleteLater()
        self.buttons = []
        inside = loc.diagram.startswith("@")
        self.setVisible(inside)
        if not inside:
            return
        try:
            trail = loc.trail(doc.project)
        except ProjectError:
            trail = []
        for i, (label, where) in enumerate(trail):
            if i:
                sep = QLabel(SEPARATOR, self)
                self._row.addWidget(sep)
            button = QToolButton(self)
            button.setText(mnemonic_free(label))
            button.setAutoRaise(True)
            button.setCheckable(True)
            button.setChecked(i == len(trail) - 1)
            button.setToolTip(literal(f"go to {label}"))
            button.clicked.connect(lambda _checked=False, where=where: self._go(where))
            self._row.addWidget(button)
            self.buttons.append(button)
        self._row.addStretch(1)
        self._row.addWidget(self.note)
        self.note.setText(self.note_text())

    def note_text(self) -> str:
        """What an edit here changes: the definition, and how many instances follow it."""
        doc = self.document
        name = composite_name(doc.location.diagram)
        if name is None or name not in doc.project.composites:
            return ""
        count = doc.instance_count(name)
        return f"editing {name}: {count} instance{'s' if count != 1 else ''} follow{'s' if count == 1 else ''}"

    def _go(self, where) -> None:
        try:
            self.document.set_location(where)
        except ProjectError:
            pass
        self.sync()
