"""The inspector: a typed form for the one selected block, generated from its BlockSpec.

Attrs, inline constants, a Placeholder's feed (typed, or loaded from a .npy or .csv file), the loss
mark and the label are edited through the Document only (set_attr, set_inline, set_feed, set_loss, set_label); invalid input is shown in
red with the reason and not applied.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QColor, QFont, QPalette, QValidator
from PySide6.QtWidgets import (QCheckBox, QComboBox, QDoubleSpinBox, QFileDialog, QFormLayout,
                               QFrame, QGroupBox, QHBoxLayout, QLabel, QLineEdit, QPushButton,
                               QScrollArea, QSizePolicy, QSpinBox, QVBoxLayout, QWidget)

from blockflow.errors import ProjectError
from blockflow.spec import DTYPE_NAMES, AttrError
from blockflow.gui.panels.feedfiles import FEED_FILTER, read_feed_file
from blockflow.gui.common.plaintext import literal, plain_label

__all__ = ["InspectorPanel", "format_value", "parse_json_value"]


# ------------------------------------------------------------------------------- helpers


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


def _numeric_array(value, dtype=None) -> np.ndarray:
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


class _FloatSpinBox(QDoubleSpinBox):
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


class _ScrollArea(QScrollArea):
    """A vertical scroll area that keeps word-wrapped labels whole: Qt sizes the page from size
    hints, which cut wrapped text short at narrow widths, so each label's height is pinned to what
    its current width needs."""

    def resizeEvent(self, event):
        super().resizeEvent(event)
        QTimer.singleShot(0, self.fit)

    def fit(self) -> None:
        body = self.widget()
        if body is None:
            return
        for label in body.findChildren(QLabel):
            if label.wordWrap() and label.isVisibleTo(body) and label.width() > 0:
                need = label.heightForWidth(label.width())
                if need > 0 and need != label.minimumHeight():
                    label.setMinimumHeight(need)


# ------------------------------------------------------------------------------- fields


class _Field:
    """One editor row: a widget, how to show a value, and an error line under it."""

    def __init__(self, widget: QWidget, commit, load, panel: "InspectorPanel"):
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


def _json_line(placeholder: str = "") -> QLineEdit:
    edit = QLineEdit()
    edit.setPlaceholderText(placeholder)
    edit.setClearButtonEnabled(False)
    return edit


# ------------------------------------------------------------------------------- the panel


class InspectorPanel(QWidget):
    """Shows the single selected block of the current page (or a hint when none or many)."""

    def __init__(self, document, parent=None):
        super().__init__(parent)
        self.document = document
        self.node_id: str | None = None
        self._selection: list[str] = []
        self._signature = None
        self.fields: dict[str, _Field] = {}
        self.scroll = _ScrollArea(self)
        self.scroll.setWidgetResizable(True)
        self.scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.scroll.setFrameShape(QFrame.NoFrame)
        self.body: QWidget | None = None
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(self.scroll)
        self._pending = QTimer(self)
        self._pending.setSingleShot(True)
        self._pending.setInterval(0)
        self._pending.timeout.connect(self.refresh)
        document.node_changed.connect(self._on_page_edit)
        document.page_field_changed.connect(self._on_page_edit)
        document.structure_changed.connect(lambda page: self._on_page_edit(page, ""))
        document.program_ready.connect(
            lambda page: self._load_outputs() if page == self.document.current_page else None)
        document.current_page_changed.connect(lambda _p: self.set_nodes([]))
        document.project_replaced.connect(lambda: self.set_nodes([]))
        document.page_renamed.connect(lambda _old, _new: self._pending.start())
        self.set_nodes([])

    # ---------------------------------------------------------------- selection and refresh
    def set_nodes(self, node_ids) -> None:
        """The canvas selection changed: inspect its one block, or explain why not."""
        self._selection = list(node_ids)
        page = self.document.page()
        ids = [n for n in self._selection if n in page.nodes]
        self.node_id = ids[0] if len(ids) == 1 else None
        self._signature = None
        self.refresh()

    def _on_page_edit(self, page: str, _what: str) -> None:
        if page == self.document.current_page:
            self._pending.start()

    def _signature_now(self):
        page = self.document.page()
        if self.node_id is None or self.node_id not in page.nodes:
            return ("page", page.name, len(self._selection), len(page.nodes), page.text)
        node = page.nodes[self.node_id]
        wired = tuple(sorted(e.dst_port for e in page.edges if e.dst == self.node_id))
        return ("node", page.name, self.node_id, node.block, wired)

    def refresh(self) -> None:
        """Rebuild the form when its shape changed, otherwise only reload the values."""
        self._pending.stop()
        page = self.document.page()
        if self.node_id is not None and self.node_id not in page.nodes:
            self.node_id = None
        sig = self._signature_now()
        if sig != self._signature:
            self._signature = sig
            self._build()
        self._load_values()
        QTimer.singleShot(0, self.scroll.fit)

    # ---------------------------------------------------------------- building the form
    def _new_body(self) -> QVBoxLayout:
        self.fields = {}
        self.output_labels = {}
        old = self.scroll.takeWidget()
        if old is not None:      # maybe inside a signal of one of its fields (a rename): later
            old.hide()
            old.deleteLater()
        self.body = QWidget()
        layout = QVBoxLayout(self.body)
        layout.setContentsMargins(8, 8, 8, 8)
        layout.setSpacing(8)
        self.scroll.setWidget(self.body)
        return layout

    def _build(self) -> None:
        layout = self._new_body()
        if self.node_id is None:
            self._build_hint(layout)
        else:
            self._build_node(layout)
        layout.addStretch(1)

    def _build_hint(self, layout: QVBoxLayout) -> None:
        page = self.document.page()
        title = QLabel(f"Page <b>{_esc(page.name)}</b>")
        title.setTextFormat(Qt.RichText)
        layout.addWidget(title)
        n = len(page.nodes)
        scope = QLabel(f"scope <code>{_esc(page.scope)}/</code> · {n} block{'s' if n != 1 else ''}")
        scope.setTextFormat(Qt.RichText)
        layout.addWidget(scope)
        chosen = len([x for x in self._selection if x in page.nodes])
        hint = QLabel(f"{chosen} blocks selected: select one block to edit it." if chosen > 1 else
                      "Select a block to edit its attributes, inline values, feed and label.")
        hint.setWordWrap(True)
        hint.setEnabled(False)
        layout.addWidget(hint)
        if page.text:
            note = plain_label(page.text)
            note.setWordWrap(True)
            note.setTextInteractionFlags(Qt.TextSelectableByMouse)
            layout.addWidget(note)

    def _build_node(self, layout: QVBoxLayout) -> None:
        doc = self.document
        page = doc.page()
        node = page.nodes[self.node_id]
        spec = doc.registry.get(node.block)

        title = plain_label(node.block)
        font = QFont(title.font())
        font.setBold(True)
        font.setPointSizeF(font.pointSizeF() * 1.3)
        title.setFont(font)
        layout.addWidget(title)
        self.full_name = plain_label(page.full_name(self.node_id))
        self.full_name.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.full_name.setToolTip("the block's full name: page scope / id")
        mono = QFont("DejaVu Sans Mono")
        mono.setStyleHint(QFont.Monospace)
        self.full_name.setFont(mono)
        layout.addWidget(self.full_name)
        if spec is None:
            missing = plain_label(f"Unknown block '{node.block}': no installed package declares it.")
            missing.setWordWrap(True)
            layout.addWidget(missing)
            return
        if spec.category:
            cat = plain_label(spec.category)
            cat.setEnabled(False)
            layout.addWidget(cat)

        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.AllNonFixedFieldsGrow)
        ident = QLineEdit()
        ident.setFont(mono)
        ident.setToolTip("the block's id: the last part of its full name (scope/id), as TF names ops")
        f = _Field(ident, lambda v: doc.rename_node(self.node_id, v.strip()), ident.setText, self)
        ident.editingFinished.connect(lambda f=f: f.apply(ident.text))
        self.fields["id"] = f
        self._add_row(form, "Id", f)
        label = QLineEdit()
        label.setPlaceholderText("a label shown on the block")
        f = _Field(label, lambda v: doc.set_label(self.node_id, v) if v != doc.page().nodes[self.node_id].label
                   else None, label.setText, self)
        label.editingFinished.connect(lambda f=f: f.apply(label.text))
        self.fields["label"] = f
        self._add_row(form, "Label", f)
        loss = QCheckBox("Gradient target (the page's loss)")
        lf = _Field(loss, lambda v: doc.set_loss(self.node_id if v else None), loss.setChecked, self)
        loss.toggled.connect(lambda on: lf.apply(lambda: on))
        self.fields["loss"] = lf
        form.addRow("Loss", loss)
        layout.addLayout(form)

        if spec.attrs:
            box, form = self._group("Attributes")
            for decl in spec.attrs:
                self.fields["attr:" + decl.name] = f = self._attr_field(decl)
                self._add_row(form, decl.name, f, decl.doc)
            layout.addWidget(box)

        if spec.inputs:
            box, form = self._group("Inputs")
            wired = {e.dst_port: e for e in page.edges if e.dst == self.node_id}
            for decl in spec.inputs:
                if decl.variadic:
                    ports = sorted((p for p in wired if p.startswith(decl.name + "[")),
                                   key=lambda p: int(p[len(decl.name) + 1:-1]))
                    text = ", ".join(f"{p} ← {wired[p].src}.{wired[p].src_port}" for p in ports) or "no wires"
                    info = plain_label(text)
                    info.setWordWrap(True)
                    form.addRow(f"{decl.name}[…]", info)
                    continue
                if decl.name in wired:
                    e = wired[decl.name]
                    info = plain_label(f"← {e.src}.{e.src_port}")
                    info.setToolTip("wired; delete the wire to give it an inline value")
                    form.addRow(decl.name, info)
                    continue
                if decl.ref:
                    info = QLabel("state (kept with the Variable)" if decl.slot else "wire a Variable here")
                    info.setEnabled(False)
                    form.addRow(decl.name, info)
                    continue
                self.fields["input:" + decl.name] = f = self._inline_field(decl)
                self._add_row(form, decl.name, f, decl.doc)
            layout.addWidget(box)

        if spec.role == "placeholder":
            box, form = self._group("Feed")
            edit = _json_line("the value fed when running, e.g. [1, 2, 3]")
            def commit_feed(text):
                if not text.strip():
                    if self.node_id in doc.page().feeds:
                        doc.set_feed(self.node_id, None)
                    return
                if text.strip() == _feed_text(doc.page().feeds.get(self.node_id)):
                    return      # a big feed shown as its summary, left as it is
                dtype = doc.page().nodes[self.node_id].attrs.get("dtype", spec.attr_map["dtype"].default) \
                    if "dtype" in spec.attr_map else None
                arr = _numeric_array(parse_json_value(text), dtype if dtype in DTYPE_NAMES else None)
                old = doc.page().feeds.get(self.node_id)
                if old is None or not _same_array(old, arr):
                    doc.set_feed(self.node_id, arr)

            f = _Field(edit, commit_feed, lambda v: edit.setText(_feed_text(v)), self)
            edit.editingFinished.connect(lambda f=f: f.apply(edit.text))
            self.fields["feed"] = f
            self._add_row(form, "value", f, "saved with the page; used when the run gives no feed")
            load = self.feed_load_button = QPushButton("Load from file…")
            load.setToolTip("read the feed from a .npy array or a numeric .csv table (a header row is "
                            "allowed), checked against this Placeholder's dtype and shape")
            load.clicked.connect(lambda _c=False, f=f: self._load_feed_file(f))
            col = edit.parentWidget().layout()       # the field's row: the edit, then the button
            col.removeWidget(edit)
            line = QHBoxLayout()
            line.setSpacing(4)
            line.addWidget(edit, 1)
            line.addWidget(load)
            col.insertLayout(0, line)
            layout.addWidget(box)

        if spec.outputs:
            box, form = self._group("Outputs")
            self.output_labels = {}
            for decl in spec.outputs:
                lab = plain_label()
                lab.setTextInteractionFlags(Qt.TextSelectableByMouse)
                self.output_labels[decl.name] = lab
                form.addRow(decl.name, lab)
            layout.addWidget(box)

        doc_label = QLabel(_doc_markdown(spec.doc))
        doc_label.setTextFormat(Qt.MarkdownText)
        doc_label.setWordWrap(True)
        doc_label.setAlignment(Qt.AlignLeft | Qt.AlignTop)
        doc_label.setTextInteractionFlags(Qt.TextSelectableByMouse)
        doc_label.setSizePolicy(QSizePolicy.Preferred, QSizePolicy.Minimum)
        self.doc_label = doc_label
        box = QGroupBox("About this block")
        QVBoxLayout(box).addWidget(doc_label)
        layout.addWidget(box)

    def _group(self, title: str):
        box = QGroupBox(title)
        form = QFormLayout(box)
        form.setFieldGrowthPolicy(QFormLayout.AllNonFixedFieldsGrow)
        form.setRowWrapPolicy(QFormLayout.DontWrapRows)
        return box, form

    def _add_row(self, form: QFormLayout, name: str, field: _Field, tip: str = "") -> None:
        holder = QWidget()
        col = QVBoxLayout(holder)
        col.setContentsMargins(0, 0, 0, 0)
        col.setSpacing(2)
        col.addWidget(field.widget)
        col.addWidget(field.error)
        if tip:
            field.widget.setToolTip(tip)
            field.widget.setProperty("baseToolTip", tip)
        lab = QLabel(name)
        if tip:
            lab.setToolTip(tip)
        form.addRow(lab, holder)

    def _load_feed_file(self, field: _Field) -> None:
        """Load from file…: the Placeholder's feed from a .npy or .csv file, checked against its
        dtype and shape (a refusal is shown under the field), set undoably."""
        doc, node_id = self.document, self.node_id
        node = doc.page().nodes[node_id]
        attrs, problems = doc.registry.get(node.block).validate_attrs(node.attrs)
        if problems:
            field.show_error(f"fix the Placeholder's attributes first: {problems[0][1]}")
            return
        start = str(Path(doc.path).parent) if doc.path else ""
        path, _ = QFileDialog.getOpenFileName(self, f"Load the feed of {node_id}", start, FEED_FILTER)
        if not path or self.node_id != node_id:
            return
        try:
            value = read_feed_file(path, attrs["dtype"], attrs["shape"])
        except ValueError as exc:
            field.show_error(f"{Path(path).name}: {exc}")
            return
        doc.set_feed(node_id, value)
        field.show_error("")

    def _attr_field(self, decl) -> _Field:
        doc = self.document

        def commit(value):
            current = doc.page().nodes[self.node_id].attrs
            if value is None and decl.name not in current:
                return
            if value is not None:
                try:
                    canonical = decl.validate(value)
                except AttrError as exc:
                    raise ValueError(str(exc)) from None
                old = current.get(decl.name, None if decl.required else decl.default)
                if old is not None and _same_value(old, canonical):
                    return
            doc.set_attr(self.node_id, decl.name, value)

        kind = decl.kind
        if kind == "bool":
            w = QCheckBox()
            f = _Field(w, commit, lambda v: w.setChecked(bool(v)), self)
            w.toggled.connect(lambda on: f.apply(lambda: on))
        elif kind in ("int", "float"):
            number = int if kind == "int" else float
            w = QSpinBox() if kind == "int" else _FloatSpinBox()
            big = 2**31 - 1 if kind == "int" else 1e300
            lo = number(decl.min) if decl.min is not None else -big
            hi = number(decl.max) if decl.max is not None else big
            if decl.required:
                # One step below the range stands for "not set yet", shown as text.
                lo -= 1
                w.setSpecialValueText("(required)")
            w.setRange(lo, hi)
            w.setKeyboardTracking(False)
            unset = lo if decl.required else None
            f = _Field(w, commit, lambda v, w=w, lo=lo: w.setValue(lo if v is None else number(v)), self)
            w.valueChanged.connect(
                lambda v, f=f: f.apply(lambda: None if v == unset else number(v)))
        elif kind in ("choice", "dtype"):
            w = QComboBox()
            choices = [str(c) for c in (decl.choices or (DTYPE_NAMES if kind == "dtype" else ()))]
            w.addItems(choices)

            def load_choice(v, w=w):
                i = w.findText(str(v))
                w.setCurrentIndex(i)

            f = _Field(w, commit, load_choice, self)
            w.currentTextChanged.connect(lambda text: f.apply(lambda: text))
        elif kind == "str":
            w = QLineEdit()
            f = _Field(w, commit, lambda v: w.setText("" if v is None else str(v)), self)
            w.editingFinished.connect(lambda: f.apply(w.text))
        else:  # shape, ints, tensor: JSON text
            hint = {"shape": "sizes, e.g. [5] or [-1, 3] (-1: open)", "ints": "integers, e.g. [0, 1]",
                    "tensor": "a number or nested list, e.g. [1.0, 2.0]"}[kind]
            w = _json_line(hint)
            f = _Field(w, commit, lambda v: w.setText(format_value(v)), self)

            def parsed():
                text = w.text().strip()
                if not text:
                    return None
                return parse_json_value(text)

            w.editingFinished.connect(lambda: f.apply(parsed))
        f.decl = decl
        return f

    def _inline_field(self, decl) -> _Field:
        doc = self.document
        if decl.optional:
            hint = f"default: {format_value(decl.default) or 'none'}"
        else:
            hint = "wire it, or type a value"
        w = _json_line(hint)

        def commit(text):
            node = doc.page().nodes[self.node_id]
            if not text.strip():
                if decl.name in node.inputs:
                    doc.set_inline(self.node_id, decl.name, None)
                return
            arr = _numeric_array(parse_json_value(text))
            old = node.inputs.get(decl.name)
            if old is None or not _same_array(old, arr):
                doc.set_inline(self.node_id, decl.name, arr)

        f = _Field(w, commit, lambda v: w.setText(format_value(v)), self)
        w.editingFinished.connect(lambda: f.apply(w.text))
        return f

    # ---------------------------------------------------------------- values
    def _load_values(self) -> None:
        if self.node_id is None:
            return
        doc = self.document
        page = doc.page()
        node = page.nodes[self.node_id]
        spec = doc.registry.get(node.block)
        self.full_name.setText(page.full_name(self.node_id))
        for key, f in self.fields.items():
            if f.widget.hasFocus() and f.error.text():
                continue  # keep the user's rejected text in front of them
            if key == "id":
                f.load(self.node_id)
            elif key == "label":
                f.load(node.label)
            elif key == "loss":
                f.load(page.loss is not None and page.loss.partition(":")[0] == self.node_id)
            elif key == "feed":
                f.load(page.feeds.get(self.node_id))
            elif key.startswith("attr:"):
                decl = f.decl
                f.load(node.attrs.get(decl.name, None if decl.required else decl.default))
            elif key.startswith("input:"):
                f.load(node.inputs.get(key[6:]))
        self._load_outputs()

    def _load_outputs(self) -> None:
        """The output types, from the page's program (None while it compiles: program_ready
        calls again, and reloads only these, never a field being typed in)."""
        if self.node_id is None or self.node_id not in self.document.page().nodes:
            return
        spec = self.document.spec(self.document.current_page, self.node_id)
        if spec is not None and spec.outputs and self.output_labels:
            program = self.document.ready_program()
            for decl in spec.outputs:
                label = self.output_labels.get(decl.name)
                if label is None:
                    continue       # the form of another block, about to be rebuilt
                try:
                    text = "(checking…)" if program is None else \
                        program.output_type(self.node_id, decl.name).describe()
                except Exception:  # the block failed to compile: the problems panel says why
                    text = "(unknown: see Problems)"
                label.setText(text)

    # ---------------------------------------------------------------- for tests and the window
    def field(self, key: str) -> QWidget:
        """The editor widget of ``label``, ``loss``, ``feed``, ``attr:NAME`` or ``input:NAME``."""
        return self.fields[key].widget

    def field_error(self, key: str) -> str:
        return self.fields[key].error.text()


#: feeds with more values than this show as a summary in the feed field, not as JSON text
FEED_TEXT_MAX = 256


def _feed_text(value) -> str:
    if value is None:
        return ""
    arr = np.asarray(value)
    if arr.size <= FEED_TEXT_MAX:
        return format_value(arr)
    return f"<{arr.dtype.name} array of shape {list(arr.shape)}: type to replace, clear to remove>"


def _same_array(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and bool(np.array_equal(a, b))


def _same_value(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return _same_array(a, b)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return list(a) == list(b)
    return type(a) is type(b) and a == b


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _doc_markdown(doc: str) -> str:
    """A block docstring (reST-ish ``code``) as Markdown; paragraphs kept, lines joined."""
    text = doc.strip().replace("``", "`")
    paras = [" ".join(line.strip() for line in p.splitlines()) for p in text.split("\n\n")]
    return "\n\n".join(paras)
