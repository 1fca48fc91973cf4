"""Text from a file, made harmless: which characters no name may hold, and how text reaches a
terminal.

A project, a data file or a feed is data, and so is every string in it: a page name, a block's
label, a message quoting them. Two rules keep such text from acting on the screen it is shown on:

* Names (page names, node ids, block names, attr and state names) hold no control character
  (:func:`first_control` finds one; the loader refuses it with its place), and no text in a
  project file holds NUL.
* Everything blockflow prints goes through :func:`for_terminal`, installed once around the
  command line (:func:`escaped_output` wraps standard output and error): a control character
  is shown as an escape — ``\\x1b`` for a C0 control (ESC, BEL, CR, TAB...; the newline that
  ends a line is kept), ``\\u007f`` / ``\\u009b`` / ``\\u202e`` for DEL, a C1 control, a line or
  paragraph separator or a bidirectional override. The ``\\uXXXX`` form is also a valid JSON
  escape, so ``--json`` output stays valid JSON and reads back to the same text. A backslash is
  printed as it is.

The GUI shows file text with Qt's plain-text formats instead (blockflow.gui.common.plaintext).

Node ids follow a stricter rule still (TF's op names: :func:`valid_node_id`), and an id made
for a new or renamed block (:func:`fresh_id`) always follows it, whatever the block's name holds.

A core module: the standard library only.
"""
from __future__ import annotations

import re
import sys
import unicodedata
from contextlib import contextmanager

__all__ = ["valid_node_id", "fresh_id", "CONTROL_CHARACTERS", "first_control", "describe_character", "for_terminal",
           "TerminalStream", "escaped_output", "raw_stream", "text_problem", "name_problem"]

# Bidirectional formatting (ALM, LRM, RLM, LRE..RLO, LRI..PDI): they reorder what follows on the
# screen, so "evil\u202egnp.exe" shows as "evilexe.png".
_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
#: A character class of what no name may hold and a terminal is never sent raw: C0 controls,
#: DEL, C1 controls, the line and paragraph separators U+2028/U+2029, bidirectional controls.
CONTROL_CHARACTERS = f"\x00-\x1f\x7f-\x9f\u2028\u2029{_BIDI}"
_CONTROL_RE = re.compile(f"[{CONTROL_CHARACTERS}]")
_CONTROL_BUT_NEWLINE_RE = re.compile(f"[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029{_BIDI}]")


_CONTROL_NAMES = {0: "NUL", 7: "BELL", 8: "BACKSPACE", 9: "TAB", 10: "LINE FEED", 11: "VERTICAL TAB",
                  12: "FORM FEED", 13: "CARRIAGE RETURN", 0x1b: "ESCAPE", 0x7f: "DELETE",
                  0x85: "NEXT LINE", 0x9b: "CONTROL SEQUENCE INTRODUCER"}


def first_control(text: str) -> tuple[int, str] | None:
    """(offset, character) of the first control character in ``text``; None when it has none."""
    m = _CONTROL_RE.search(text)
    return (m.start(), m.group()) if m else None


def describe_character(c: str) -> str:
    """``U+001B (ESCAPE)``: a character named so that a reader can see which it is."""
    name = unicodedata.name(c, "") or _CONTROL_NAMES.get(ord(c)) or \
        ("a control character" if _CONTROL_RE.fullmatch(c) else "")
    return f"U+{ord(c):04X}" + (f" ({name})" if name else "")


def text_problem(text: str) -> str:
    """Why ``text`` (a label, a page's note, any string of a project) cannot be kept ("" when it
    can): free text, but never NUL, which C, file names and terminals take for its end."""
    at = text.find("\0")
    return f"contains U+0000 (NUL) at offset {at}, which no text in a project may hold" if at >= 0 else ""


def name_problem(name: str, what: str = "a name") -> str:
    """Why ``name`` (a page, block, attr or state name) cannot be one ("" when it can): a name
    holds no control character (blockflow.textsafe.CONTROL_CHARACTERS: C0, DEL, C1, line
    separators, bidirectional overrides), which could rewrite the screen it is printed on."""
    found = first_control(name)
    if found is None:
        return ""
    at, c = found
    return f"{what} must not contain control characters: {describe_character(c)} at offset {at}"


def _escape(m: re.Match) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x20 else f"\\u{c:04x}"


def for_terminal(text: str, keep_newlines: bool = False) -> str:
    """``text`` with every control character escaped (see the module's docstring); with
    ``keep_newlines`` a newline stays a newline (the lines blockflow itself writes)."""
    return (_CONTROL_BUT_NEWLINE_RE if keep_newlines else _CONTROL_RE).sub(_escape, text)


class TerminalStream:
    """A text stream that escapes control characters on their way to ``stream`` (newlines kept);
    everything else (``isatty``, ``fileno``, ``encoding``, ``buffer``...) is ``stream``'s."""

    def __init__(self, stream):
        self._blockflow_raw = stream

    def write(self, text: str) -> int:
        self._blockflow_raw.write(for_terminal(text, keep_newlines=True))
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self._blockflow_raw.flush()

    def __getattr__(self, name):
        return getattr(self._blockflow_raw, name)


def raw_stream(stream):
    """The stream under a :class:`TerminalStream` (for blockflow's own control output, such as a
    progress bar's carriage return); ``stream`` itself otherwise."""
    return getattr(stream, "_blockflow_raw", stream)


@contextmanager
def escaped_output():
    """Within: ``sys.stdout`` and ``sys.stderr`` escape control characters (the one boundary
    every message of the command line passes); restored after."""
    saved = sys.stdout, sys.stderr
    try:
        for name in ("stdout", "stderr"):
            stream = getattr(sys, name)
            if stream is not None and not isinstance(stream, TerminalStream):
                setattr(sys, name, TerminalStream(stream))
        yield
    finally:
        sys.stdout, sys.stderr = saved


# ------------------------------------------------------------------ node ids
_ID_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
_NOT_ID_CHAR = re.compile(r"[^A-Za-z0-9_.\-]")


def valid_node_id(node_id: str) -> bool:
    """A node id: a letter or ``_`` first, then letters, digits, ``_ . -`` (TF's op-name rule)."""
    return isinstance(node_id, str) and _ID_RE.fullmatch(node_id) is not None


def fresh_id(block: str, taken) -> str:
    """The first of ``Block_1``, ``Block_2``, ... not in ``taken``, for a node of ``block``
    (``Dense_1`` for ``@Dense``). A block name that is not an id's start (an unknown block
    named ``my block!`` in a file or on the clipboard) has its other characters made ``_``,
    so the id made is always a valid one."""
    base = _NOT_ID_CHAR.sub("_", block.lstrip("@")) or "Block"
    if not _ID_RE.fullmatch(base):
        base = "_" + base
    n = 1
    while f"{base}_{n}" in taken:
        n += 1
    return f"{base}_{n}"
