"""The inspector's editor rows: a Field (a widget, how a value is shown in it, an error line under
it) and the attr editors as a table keyed by attr kind, EDITORS. The kinds are the ones
blockflow.spec declares (``Attr.kind``, the ATTR_KINDS table); a new kind is one small editor
class and one entry. What an editor offers comes from the spec too: the choices to pick from
(``Attr.options``) and the hint of a typed value (``AttrKind.hint``).

Editors only turn what is typed into a value and hand it to the document's ``set_attr``, which
asks the spec whether it is valid (the one place it is asked) and whether it changes anything;
its refusal is shown under the field.
"""
from __future__ import annotations

import json
import math
import sys

import numpy as np
from PySide6.QtGui import QColor, QPalette, QValidator
from PySide6.QtWidgets import QCheckBox, QComboBox, QDoubleSpinBox, QLineEdit, QSpinBox, QWidget

from blockflow.errors import ProjectError
from blockflow.spec import ATTR_KINDS, fit_dtype
from blockflow.gui.common.plaintext import literal, plain_label
from blockflow.gui.document.document import AttrValueError, same_attr_value

__all__ = ["Field", "EDITORS", "AttrEditor", "attr_field", "format_value", "parse_json_value",
           "numeric_array", "same_array", "error_color", "json_line"]


def _scalar_text(x) -> str:
    if isinstance(x, (bool, np.bool_)):
        return "true" if x else "false"
    if x is None:
        return "-1"
    if isinstance(x, (np.floating, float)):
        text = str(x)
        if text in ("nan", "inf", "-inf"):
            return {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}[text]
        return text
    return str(x)


def format_value(value) -> str:
    """A value as short JSON text for editing: arrays nested, float32 without noise digits."""
    if value is None:
        return ""
    if isinstance(value, np.ndarray):
        if value.ndim == 0:
            return _scalar_text(value[()])
        return "[" + ", ".join(format_value(v) for v in value) + "]"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(format_value(v) for v in value) + "]"
    return _scalar_text(value)


def parse_json_value(text: str, cut_at: int | None = None):
    """JSON text to a Python value; raises ValueError with a short reason. ``cut_at``: the
    length a line edit holds, where Qt cut what was pasted into it without a word."""
    if cut_at is not None and len(text) >= cut_at:
        raise ValueError(f"the text fills the field's {cut_at:,} characters: what was pasted was cut "
                         "there (a feed longer than that: Load from file…)")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:      # [[[[... a thousand deep
        raise ValueError("not valid JSON here: nested too deeply") from None
    except ValueError:          # Python's limit on the digits of an integer it reads
        raise ValueError(f"an integer of more than {sys.get_int_max_str_digits():,} digits") from None


def numeric_array(value, dtype=None) -> np.ndarray:
    """A typed value as an array of numbers; with ``dtype``, one whose numbers all fit it
    (spec.fit_dtype: no fraction, overflow or NaN cast away without a word)."""
    try:
        arr = np.asarray(value)
    except (ValueError, TypeError, OverflowError):
        raise ValueError("expected a number or nested lists of numbers, every row of one length") from None
    if arr.dtype.kind not in "biuf":    # null, a string, an object, rows of different lengths, 2^64
        raise ValueError("expected a number or nested lists of numbers, every row of one length, "
                         "each an int64 or a float")
    return arr if dtype is None else fit_dtype(arr, dtype)


def error_color(palette: QPalette) -> QColor:
    """A red that reads on the current theme's window colour."""
    dark = palette.color(QPalette.Window).lightness() < 128
    return QColor("#ff7b72") if dark else QColor("#c62828")


class FloatSpinBox(QDoubleSpinBox):
    """A float box that shows values in short form (1e-08, 0.001) and accepts any float text."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setDecimals(300)
        self.setStepType(QDoubleSpinBox.AdaptiveDecimalStepType)

    def textFromValue(self, value: float) -> str:
        return f"{value:.10g}"

    def valueFromText(self, text: str) -> float:
        try:
            return float(text)
        except ValueError:
            return self.value()

    def validate(self, text: str, pos: int):
        try:
            v = float(text)
        except ValueError:
            return QValidator.Intermediate, text, pos
        if math.isnan(v) or not self.minimum() <= v <= self.maximum():
            return QValidator.Intermediate, text, pos
        return QValidator.Acceptable, text, pos


# ------------------------------------------------------------------------------- fields


class Field:
    """One editor row: a widget, how to show a value, and an error line under it."""

    def __init__(self, widget: QWidget, commit, load, panel):
        self.widget, self._commit, self._load, self.panel = widget, commit, load, panel
        self.error = plain_label()     # messages quote names and values from the file
        self.error.setWordWrap(True)
        self.error.hide()
        pal = self.error.palette()
        pal.setColor(QPalette.WindowText, error_color(pal))
        self.error.setPalette(pal)

    def load(self, value) -> None:
        """Show ``value``; a ``load`` that cannot show it returns why, shown under the field."""
        self.widget.blockSignals(True)
        try:
            problem = self._load(value)
        finally:
            self.widget.blockSignals(False)
        self.show_error(problem if isinstance(problem, str) else "")

    def apply(self, value_getter) -> None:
        """Compute the value (may raise ValueError) and hand it to the document."""
        if not any(f is self for f in self.panel.fields.values()):
            return      # a field of a form already replaced (its block is no longer inspected)
        try:
            self._commit(value_getter())
        except (ValueError, ProjectError) as exc:
            self.show_error(str(exc))
            return
        self.show_error("")

    def show_error(self, message: str) -> None:
        self.error.setText(message)
        self.error.setVisible(bool(message))
        if isinstance(self.widget, QLineEdit):
            pal = self.panel.palette()
            if message:
                base = pal.color(QPalette.Base)
                red = error_color(pal)
                tint = QColor((base.red() * 3 + red.red()) // 4, (base.green() * 3 + red.green()) // 4,
                              (base.blue() * 3 + red.blue()) // 4)
                pal.setColor(QPalette.Base, tint)
            self.widget.setPalette(pal)
            self.widget.setToolTip(literal(message) if message else self.widget.property("baseToolTip") or "")


def json_line(placeholder: str = "") -> QLineEdit:
    edit = QLineEdit()
    edit.setPlaceholderText(placeholder)
    edit.setClearButtonEnabled(False)
    return edit


def same_array(a, b) -> bool:
    """Are two arrays the same: dtype, shape and numbers (an inline value, a feed)?"""
    return same_attr_value(np.asarray(a), np.asarray(b))


# ------------------------------------------------------------------------------- attr editors


class AttrEditor:
    """Makes the editor row of an attr of one kind: ``field(decl, commit, panel)``, where
    ``commit(value)`` hands a value (None: unset) to the document."""

    def field(self, decl, commit, panel) -> Field:
        raise NotImplementedError


class BoolEditor(AttrEditor):
    def field(self, decl, commit, panel):
        w = QCheckBox()
        f = Field(w, commit, lambda v: w.setChecked(bool(v)), panel)
        w.toggled.connect(lambda on: f.apply(lambda: on))
        return f


class NumberEditor(AttrEditor):
    """A spin box in the attr's range; a required attr has one more value below it, shown as
    "(required)", that stands for "not set yet"."""

    def __init__(self, number, box, big):
        self.number, self.box, self.big = number, box, big

    def field(self, decl, commit, panel):
        number = self.number
        if number is int and not _spin_box_holds(decl):
            return WideIntEditor().field(decl, commit, panel)
        w = self.box()
        lo = number(decl.min) if decl.min is not None else -self.big
        hi = number(decl.max) if decl.max is not None else self.big
        if decl.required:
            lo -= 1
            w.setSpecialValueText("(required)")
        w.setRange(lo, hi)
        w.setKeyboardTracking(False)
        unset = lo if decl.required else None

        def load(v):
            if v is not None and not lo <= v <= hi:     # a file's value past the attr's range
                w.setValue(lo)
                return (f"the project holds {v:g}, outside the range this field takes "
                        f"({number(lo):g} to {number(hi):g}): pick a value")
            w.setValue(lo if v is None else number(v))
            return None

        f = Field(w, commit, load, panel)
        w.valueChanged.connect(lambda v: f.apply(lambda: None if v == unset else number(v)))
        return f


def _spin_box_holds(decl) -> bool:
    """Does a QSpinBox (an int32) hold every value of int attr ``decl`` (and one below, for
    "(required)")?"""
    return decl.min is not None and decl.max is not None and -2**31 < decl.min and decl.max <= 2**31 - 1


class WideIntEditor(AttrEditor):
    """An int attr whose range passes a QSpinBox's int32 (a seed, an axis, a mask): the whole
    number typed in a line, any int64 the attr allows (a file's seed of 2^40 made loading the
    spin box raise OverflowError); cleared: unset."""

    def field(self, decl, commit, panel):
        w = json_line("(required)" if decl.required else f"a whole number, default {decl.default}")
        f = Field(w, commit, lambda v: w.setText("" if v is None else str(v)), panel)

        def parsed():
            text = w.text().strip()
            if not text:
                return None
            if not text.lstrip("+-").isdecimal() or len(text) > 40:
                raise ValueError(f"expected a whole number, got '{text[:40]}'")
            return int(text)

        w.editingFinished.connect(lambda: f.apply(parsed))
        return f


class ChoiceEditor(AttrEditor):
    """A list to pick from: the attr's options (a dtype attr without choices: every dtype)."""

    def field(self, decl, commit, panel):
        w = QComboBox()
        w.addItems([str(c) for c in decl.options])
        f = Field(w, commit, lambda v: w.setCurrentIndex(w.findText(str(v))), panel)
        w.currentTextChanged.connect(lambda text: f.apply(lambda: text))
        return f


class TextEditor(AttrEditor):
    def field(self, decl, commit, panel):
        w = QLineEdit()
        f = Field(w, commit, lambda v: w.setText("" if v is None else str(v)), panel)
        w.editingFinished.connect(lambda: f.apply(w.text))
        return f


class JsonEditor(AttrEditor):
    """JSON text (sizes, integers, a tensor), its placeholder the kind's hint; cleared: unset."""

    def field(self, decl, commit, panel):
        w = json_line(ATTR_KINDS[decl.kind].hint)
        f = Field(w, commit, lambda v: w.setText(format_value(v)), panel)

        def parsed():
            text = w.text().strip()
            return parse_json_value(text, w.maxLength()) if text else None

        w.editingFinished.connect(lambda: f.apply(parsed))
        return f


#: the editor of each attr kind blockflow.spec declares
EDITORS: dict[str, AttrEditor] = {
    "bool": BoolEditor(),
    "int": NumberEditor(int, QSpinBox, 2**31 - 1),
    "float": NumberEditor(float, FloatSpinBox, 1e300),
    "choice": ChoiceEditor(),
    "dtype": ChoiceEditor(),
    "str": TextEditor(),
    "shape": JsonEditor(),
    "ints": JsonEditor(),
    "tensor": JsonEditor(),
    "dims": JsonEditor(),
}


def attr_field(decl, set_attr, panel) -> Field:
    """The editor row of attr ``decl``: what is typed goes to ``set_attr(name, value)`` (the
    document's, which leaves a value the block has already alone). A value the attr's kind
    refuses is shown under the field by the reason alone: the field names the attr."""

    def commit(value):
        try:
            set_attr(decl.name, value)
        except AttrValueError as exc:
            raise ValueError(exc.reason) from None

    f = EDITORS[decl.kind].field(decl, commit, panel)
    f.decl = decl
    return f
