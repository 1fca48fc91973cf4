"""Rich text for the teaching panels (backward stepper, gradient explanation, gradient check).

Arrays, rule texts and verdicts as HTML in the widget palette's colours (light and dark themes
alike). No model logic here: the numbers come from blockflow.present.gradview and blockflow.run.gradcheck.
"""
from __future__ import annotations

import html
import re

import numpy as np
from PySide6.QtGui import QColor, QPalette

from blockflow.present.gradview import describe_array
from blockflow.present.values import readable_number

__all__ = ["MONO", "FULL_MAX", "Colors", "esc", "format_array", "array_html", "rule_for_input",
           "rule_html"]

MONO = "DejaVu Sans Mono"
#: arrays with at most this many elements are shown in full, bigger ones only summarised
FULL_MAX = 12

_RULE_LINE = re.compile(r"^\s*d([A-Za-z_][A-Za-z0-9_]*)(\[[^\]]*\])?\s*=")


def esc(text) -> str:
    return html.escape(str(text), quote=False)




def format_array(a) -> str | None:
    """Every element of a small array (at most FULL_MAX), as one line; None for bigger ones."""
    if a is None:
        return None
    a = np.asarray(a)
    if a.size > FULL_MAX or a.size == 0:
        return None
    if a.ndim == 0:
        return _element(a.item())
    return np.array2string(a, separator=", ", max_line_width=10_000,
                           formatter={"float_kind": readable_number, "int_kind": str, "bool": str})


def _element(v) -> str:
    if isinstance(v, (bool, np.bool_)):
        return str(bool(v))
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    return readable_number(v)


class Colors:
    """The few colours the panels' HTML uses, from a palette (so dark themes read as well)."""

    def __init__(self, palette: QPalette):
        text = palette.color(QPalette.Text)
        base = palette.color(QPalette.Base)
        dark = base.lightnessF() < 0.5
        self.text = text.name()
        self.muted = _mix(text, base, 0.42).name()
        self.accent = palette.color(QPalette.Highlight).name()
        self.code_bg = _mix(base, text, 0.07).name()
        self.rule_bg = _mix(base, palette.color(QPalette.Highlight), 0.10).name()
        self.ok = "#5fd07f" if dark else "#1f8a43"
        self.bad = "#ff7a6e" if dark else "#c0362c"
        self.warn = "#f0b64a" if dark else "#a06a00"     # stale: still readable, no longer current
        self.cut = _mix(text, base, 0.5).name()

    @classmethod
    def of(cls, widget) -> "Colors":
        return cls(widget.palette())


def _mix(a: QColor, b: QColor, t: float) -> QColor:
    return QColor.fromRgbF(a.redF() + (b.redF() - a.redF()) * t, a.greenF() + (b.greenF() - a.greenF()) * t,
                           a.blueF() + (b.blueF() - a.blueF()) * t, 1.0)


def array_html(a, colors: Colors) -> str:
    """The summary line of an array, and underneath all its elements when it is small."""
    if a is None:
        return f'<span style="color:{colors.muted}">none</span>'
    summary = f'<span style="font-family:\'{MONO}\'">{esc(describe_array(a))}</span>'
    full = format_array(a) if np.size(a) > 1 else None   # one element: the summary shows it
    if full is None:
        return summary
    return (summary + f'<br><span style="font-family:\'{MONO}\'; background-color:{colors.code_bg}">'
            f'&nbsp;{esc(full)}&nbsp;</span>')


def rule_for_input(rule: str, port: str) -> str:
    """The lines of a block's rule text that give ``port``'s gradient (``dport = ...``); the base
    name of an InputList element (``values[1]`` -> ``values``) matches too. "" when none does."""
    base = port.split("[", 1)[0]
    lines = [ln.strip() for ln in rule.splitlines() if (m := _RULE_LINE.match(ln)) and m.group(1) == base]
    return "\n".join(lines)


def rule_html(rule: str, colors: Colors) -> str:
    """A rule text as a monospace block, or "(no rule text)"."""
    if not rule.strip():
        return f'<p style="color:{colors.muted}"><i>(no rule text)</i></p>'
    body = "<br>".join(esc(line) for line in rule.splitlines())
    return (f'<table cellpadding="5" cellspacing="0" width="100%"><tr><td style="background-color:'
            f'{colors.rule_bg}; font-family:\'{MONO}\'">{body}</td></tr></table>')
