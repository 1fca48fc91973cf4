"""A block's documentation inside the editor: the Inspector's collapsible "About this block"
section and the text the Block Reference (blockref.py) shows.

Both are made from ``block_markdown``, the function that writes each block's section of
docs/blocks.md (``blockflow blocks --markdown``), so the editor and the reference never differ:
summary, ports with their dtypes, attrs with their kinds, defaults and hints, the gradient rule.
"""
from __future__ import annotations

import re

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QTextCursor
from PySide6.QtWidgets import QFrame, QLabel, QSizePolicy, QTextBrowser, QToolButton, QVBoxLayout, QWidget

from blockflow.cli.cmd_blocks import block_markdown

__all__ = ["BlockDocSection", "DocText", "block_page", "block_page_body", "wrap_code"]


def _for_qt(markdown: str) -> str:
    """The Markdown as Qt draws it right: Qt's reader carries a code block's paragraph format
    into a table right after it (its first header cell drawn plain, a line low), so an empty
    HTML comment, drawn as nothing, stands between them."""
    return re.sub(r"^(```[ \t]*\n)\n(?=\|)", "\\1\n<!-- -->\n\n", markdown, flags=re.M)


def block_page(spec) -> str:
    """``spec``'s page of the reference, as Markdown (its heading the block's name)."""
    return _for_qt(block_markdown(spec))


def block_page_body(spec) -> str:
    """The page without its heading: the Inspector shows the block's name above it already."""
    lines = block_page(spec).splitlines()
    if lines and lines[0].startswith("#"):
        lines = lines[1:]
    return "\n".join(lines).strip() + "\n"


def wrap_code(document) -> None:
    """Let code blocks (a gradient rule) wrap: a dock is narrow, and a sideways scroll hides the
    end of the formula."""
    block = document.begin()
    while block.isValid():
        fmt = block.blockFormat()
        if fmt.nonBreakableLines():
            fmt.setNonBreakableLines(False)
            QTextCursor(block).setBlockFormat(fmt)
        block = block.next()


class DocText(QTextBrowser):
    """Rendered Markdown as tall as its text at the width it is given: it scrolls with the
    Inspector's form, never on its own, and wraps instead of widening the form (a QLabel would
    take the width of its widest table or code line)."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setFrameShape(QFrame.NoFrame)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.setOpenLinks(False)
        self.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Fixed)
        self.viewport().setAutoFillBackground(False)

    def set_markdown(self, text: str) -> None:
        self.setMarkdown(text)
        wrap_code(self.document())
        self._fit()

    def resizeEvent(self, event):
        super().resizeEvent(event)
        self._fit()

    def _fit(self) -> None:
        self.document().setTextWidth(max(50, self.viewport().width()))
        height = int(self.document().size().height()) + 2 * self.frameWidth() + 4
        if height != self.height():
            self.setFixedHeight(height)


class BlockDocSection(QWidget):
    """"About this block": a header that folds the documentation away, and the documentation.
    Folded or not is remembered for the next block shown (a class attribute: one per run)."""

    #: a block's name: show its page in the Block Reference
    reference_requested = Signal(str)
    expanded = True

    def __init__(self, spec, parent=None):
        super().__init__(parent)
        self.block = spec.name
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)
        self.toggle = QToolButton(self)
        self.toggle.setText("About this block")
        self.toggle.setToolTip("fold the block's documentation away, or show it")
        self.toggle.setToolButtonStyle(Qt.ToolButtonTextBesideIcon)
        self.toggle.setCheckable(True)
        self.toggle.setAutoRaise(True)
        font = self.toggle.font()
        font.setBold(True)
        self.toggle.setFont(font)
        layout.addWidget(self.toggle)
        self.markdown = block_page_body(spec)
        self.text = DocText(self)
        self.text.set_markdown(self.markdown)
        layout.addWidget(self.text)
        self.more = QLabel("<a href='#'>Open in the Block Reference</a> (F1 over a block)", self)
        self.more.setTextFormat(Qt.RichText)
        self.more.setContentsMargins(12, 0, 0, 0)
        self.more.linkActivated.connect(self._open_reference)
        layout.addWidget(self.more)
        self.toggle.toggled.connect(self._show)
        self.toggle.setChecked(BlockDocSection.expanded)
        self._show(BlockDocSection.expanded)

    def _open_reference(self, _link: str) -> None:
        self.reference_requested.emit(self.block)

    def _show(self, on: bool) -> None:
        BlockDocSection.expanded = on
        self.toggle.setArrowType(Qt.DownArrow if on else Qt.RightArrow)
        self.text.setVisible(on)
        self.more.setVisible(on)

    def is_expanded(self) -> bool:
        return self.text.isVisibleTo(self)
