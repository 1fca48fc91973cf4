"""Text from a project shown as it is: never taken for rich text (HTML) or a mnemonic by Qt.

Qt guesses: a QLabel, a QMessageBox, a QInputDialog's prompt or a tooltip shows its text as
HTML when ``Qt.mightBeRichText`` says it might be (a tag near the start of the first line), and a
tab or a menu item takes ``&`` for a keyboard mnemonic. A page called ``<img src=...>`` or a
label ``<a href=...>`` must show those characters, not an image or a link. So file text (names,
labels, page notes, messages quoting them, paths) reaches a widget through this module:

* :func:`plain_label` / :func:`make_plain`: a QLabel set to ``Qt.PlainText``;
* :func:`literal`: for a widget whose format cannot be set (tooltips, the static QMessageBox and
  QInputDialog functions): the text itself when Qt will take it for plain text, else its HTML
  escape, so either way the same characters are shown;
* :func:`mnemonic_free`: for tab and menu texts, ``&`` doubled.

Where a widget is given HTML on purpose (the gradient explanations, the value viewer's title),
file text in it goes through ``html.escape`` (gradtext.esc) instead.
"""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import Qt as QtGui
from PySide6.QtWidgets import QLabel

__all__ = ["plain_label", "make_plain", "literal", "mnemonic_free"]


def make_plain(label: QLabel) -> QLabel:
    """``label`` set to show its text as plain text, whatever it holds; returned."""
    label.setTextFormat(Qt.PlainText)
    return label


def plain_label(text: str = "", parent=None) -> QLabel:
    """A QLabel showing ``text`` as plain text."""
    return make_plain(QLabel(str(text), parent))


def literal(text) -> str:
    """``text`` as a widget that guesses its format will show it literally: itself when Qt takes
    it for plain text, else the same characters as escaped HTML (line breaks kept; a run of
    spaces shows as one)."""
    text = str(text)
    if QtGui.mightBeRichText(text):
        return QtGui.convertFromPlainText(text, Qt.WhiteSpaceNormal)
    return text


def mnemonic_free(text) -> str:
    """``text`` for a tab or a menu item: ``&`` shown as itself, not as a shortcut marker."""
    return str(text).replace("&", "&&")
