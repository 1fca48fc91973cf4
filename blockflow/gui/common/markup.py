"""The light markup of block docstrings (``code``, `code`, *emphasis*, **strong**) as a tooltip
shows it: rendered as rich text, code in a monospace span, or stripped to plain text.

Docstrings are written for docs/blocks.md (Markdown), where the markup renders; a tooltip would
show the backticks and stars as they are. Everything else in the text is HTML-escaped: a summary
is the block author's text, never markup Qt should guess at.
"""
from __future__ import annotations

import html
import re

__all__ = ["markup_html", "markup_plain", "rich_tooltip", "MONO_STYLE"]

#: how code is drawn in a tooltip or label: the monospace face the canvas uses for types
MONO_STYLE = "font-family:'DejaVu Sans Mono',monospace"

# Longest delimiters first: ``a`b`` is one code span, **x** is strong, not two emphases.
# a code span: ``double`` (may hold a backtick) or `single`
_CODE = re.compile(r"``(.+?)``|`([^`\n]+?)`", re.S)
_STRONG = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*", re.S)
_EMPH = re.compile(r"(?<![\w*])\*(?=[^\s*])([^*\n]+?)(?<=\S)\*(?![\w*])")


def _split_code(text: str):
    """(is_code, piece) pieces of ``text``: code spans apart, so nothing inside is emphasised."""
    pieces, pos = [], 0
    for m in _CODE.finditer(text):
        if m.start() > pos:
            pieces.append((False, text[pos:m.start()]))
        pieces.append((True, (m.group(1) if m.group(1) is not None else m.group(2)).strip()))
        pos = m.end()
    if pos < len(text):
        pieces.append((False, text[pos:]))
    return pieces


def markup_html(text: str) -> str:
    """``text`` as HTML: code in a monospace span, **strong** bold, *emphasis* italic, the rest
    escaped. No backtick or markup star is left."""
    out = []
    for is_code, piece in _split_code(text or ""):
        if is_code:
            out.append(f"<span style=\"{MONO_STYLE}\">{html.escape(piece)}</span>")
            continue
        piece = html.escape(piece)
        piece = _STRONG.sub(r"<b>\1</b>", piece)
        out.append(_EMPH.sub(r"<i>\1</i>", piece))
    return "".join(out)


def markup_plain(text: str) -> str:
    """``text`` with the markup taken out (for a place that shows plain text only)."""
    out = []
    for is_code, piece in _split_code(text or ""):
        if not is_code:
            piece = _EMPH.sub(r"\1", _STRONG.sub(r"\1", piece))
        out.append(piece)
    return "".join(out)


def rich_tooltip(text: str, *more_html: str) -> str:
    """A tooltip Qt shows as rich text whatever it starts with (``<qt>``): ``text`` rendered,
    then lines already in HTML."""
    lines = [markup_html(line) for line in (text or "").split("\n")]
    return "<qt>" + "<br>".join([*lines, *more_html]) + "</qt>"
