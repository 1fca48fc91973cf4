"""The inspector's editor rows: a Field (a widget, how a value is shown in it, an error line under
it) and the attr editors as a table keyed by attr kind, EDITORS. The kinds are the ones
blockflow.spec declares (``Attr.kind``); a new kind is one small editor class and one entry.

Editors only turn what is typed into a value and hand it to ``commit``; whether a value is valid
is the spec's question (``canonical``), asked in one place.
"""
from __future__ import annotations

import json
import math

import numpy as np
from PySide6.QtGui import QColor, QPalette, QValidator
from PySide6.QtWidgets import QCheckBox, QComboBox, QDoubleSpinBox, QLineEdit, QSpinBox, QWidget

from blockflow.errors import ProjectError
from blockflow.spec import DTYPE_NAMES, AttrError
from blockflow.gui.common.plaintext import literal, plain_label

__all__ = ["Field", "EDITORS", "AttrEditor", "attr_field", "canonical", "format_value", "parse_json_value",
           "numeric_array", "same_array", "same_value", "error_color", "json_line"]


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


def parse_json_value(text: str):
    """JSON text to a Python value; raises ValueError with a short reason."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc.msg} at column {exc.colno})") from None


def numeric_array(value, dtype=None) -> np.ndarray:
    try:
        arr = np.asarray(value) if dtype is None else np.asarray(value, dtype=dtype)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"expected numbers: {exc}") from None
    if arr.dtype.kind not in "biuf":
        raise ValueError("expected a number or a nested list of numbers")
    return arr


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
        self.widget.blockSignals(True)
        try:
            self._load(value)
        finally:
            self.widget.blockSignals(False)
        self.show_error("")

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
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and bool(np.array_equal(a, b))


def same_value(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return same_array(a, b)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return list(a) == list(b)
    return type(a) is type(b) and a == b




# ------------------------------------------------------------------------------- validation


def canonical(decl, value):
    """``value`` as the attr ``decl`` stores it; ValueError saying why when it is not valid.
    (The spec's own check: the one place the inspector asks it.)"""
    try:
        return decl.validate(value)
    except AttrError as exc:
        raise ValueError(str(exc)) from None


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
        w = self.box()
        lo = number(decl.min) if decl.min is not None else -self.big
        hi = number(decl.max) if decl.max is not None else self.big
        if decl.required:
            lo -= 1
            w.setSpecialValueText("(required)")
        w.setRange(lo, hi)
        w.setKeyboardTracking(False)
        unset = lo if decl.required else None
        f = Field(w, commit, lambda v: w.setValue(lo if v is None else number(v)), panel)
        w.valueChanged.connect(lambda v: f.apply(lambda: None if v == unset else number(v)))
        return f


class ChoiceEditor(AttrEditor):
    """A list to pick from: the attr's choices (a dtype attr: the dtype names)."""

    def __init__(self, default_choices=()):
        self.default_choices = default_choices

    def field(self, decl, commit, panel):
        w = QComboBox()
        w.addItems([str(c) for c in (decl.choices or self.default_choices)])
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
    """JSON text (sizes, integers, a tensor); cleared: unset."""

    def __init__(self, hint: str):
        self.hint = hint

    def field(self, decl, commit, panel):
        w = json_line(self.hint)
        f = Field(w, commit, lambda v: w.setText(format_value(v)), panel)

        def parsed():
            text = w.text().strip()
            return parse_json_value(text) if text else None

        w.editingFinished.connect(lambda: f.apply(parsed))
        return f


#: the editor of each attr kind blockflow.spec declares
EDITORS: dict[str, AttrEditor] = {
    "bool": BoolEditor(),
    "int": NumberEditor(int, QSpinBox, 2**31 - 1),
    "float": NumberEditor(float, FloatSpinBox, 1e300),
    "choice": ChoiceEditor(),
    "dtype": ChoiceEditor(DTYPE_NAMES),
    "str": TextEditor(),
    "shape": JsonEditor("sizes, e.g. [5] or [-1, 3] (-1: open)"),
    "ints": JsonEditor("integers, e.g. [0, 1]"),
    "tensor": JsonEditor("a number or nested list, e.g. [1.0, 2.0]"),
}


def attr_field(decl, current_attrs, set_attr, panel) -> Field:
    """The editor row of attr ``decl``: what is typed goes to ``set_attr(name, value)`` unless it
    is what the block has already (``current_attrs()``: its attrs now)."""

    def commit(value):
        current = current_attrs()
        if value is None and decl.name not in current:
            return
        if value is not None:
            value_now = canonical(decl, value)        # refused here: shown under the field
            old = current.get(decl.name, None if decl.required else decl.default)
            if old is not None and same_value(old, value_now):
                return
        set_attr(decl.name, value)

    f = EDITORS[decl.kind].field(decl, commit, panel)
    f.decl = decl
    return f
