"""The inspector: a typed form for the one selected block, generated from its BlockSpec.

Attrs, inline constants, a Placeholder's feed (typed, or loaded from a .npy or .csv file), the loss
mark and the label are edited through the Document only (set_attr, set_inline, set_feed, set_loss, set_label); invalid input is shown in
red with the reason and not applied.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFont
from PySide6.QtWidgets import (QCheckBox, QFileDialog, QFormLayout, QFrame, QGroupBox, QHBoxLayout, QLabel,
                               QLineEdit, QPushButton, QScrollArea, QVBoxLayout, QWidget)

from blockflow.spec import DTYPE_NAMES
from blockflow.gui.panels.attr_editors import (Field, attr_field, format_value, json_line, numeric_array,
                                               parse_json_value, same_array)
from blockflow.feeds import FEED_FILTER, read_feed_file
from blockflow.gui.common.markup import rich_tooltip
from blockflow.gui.common.plaintext import plain_label
from blockflow.gui.common.refresh import Debounced
from blockflow.gui.panels.blockdoc import BlockDocSection
from blockflow.gui.panels.definition import DefinitionForm, share_field
from blockflow.composite import SHARE_ATTR

__all__ = ["InspectorPanel", "format_value", "parse_json_value"]


# ------------------------------------------------------------------------------- helpers


class _ScrollArea(QScrollArea):
    """A vertical scroll area that keeps word-wrapped labels whole: Qt sizes the page from size
    hints, which cut wrapped text short at narrow widths, so each label's height is pinned to what
    its current width needs."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.fit_later = Debounced(self, self.fit)

    def resizeEvent(self, event):
        super().resizeEvent(event)
        self.fit_later.later()

    def fit(self) -> None:
        body = self.widget()
        if body is None:
            return
        for label in body.findChildren(QLabel):
            if label.wordWrap() and label.isVisibleTo(body) and label.width() > 0:
                need = label.heightForWidth(label.width())
                if need > 0 and need != label.minimumHeight():
                    label.setMinimumHeight(need)


# ------------------------------------------------------------------------------- the panel


class InspectorPanel(QWidget):
    """Shows the single selected block of the current page (or a hint when none or many)."""

    #: a block's name: its page in the Block Reference was asked for
    help_requested = Signal(str)

    def __init__(self, document, parent=None):
        super().__init__(parent)
        self.document = document
        self.node_id: str | None = None
        self._selection: list[str] = []
        self._signature = None
        self.fields: dict[str, Field] = {}
        self.scroll = _ScrollArea(self)
        self.scroll.setWidgetResizable(True)
        self.scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.scroll.setFrameShape(QFrame.NoFrame)
        self.body: QWidget | None = None
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(self.scroll)
        # Bound methods only: Qt disconnects them when this panel goes (a closed window).
        self._refresh = Debounced(self, self.refresh)
        document.node_changed.connect(self._on_page_edit)
        document.page_field_changed.connect(self._on_page_edit)
        document.structure_changed.connect(self._on_page_edit)
        document.program_ready.connect(self._on_program_ready)
        self._refresh.follow(document.page_renamed, document.composites_changed)
        document.current_page_changed.connect(self._forget_selection)
        document.project_replaced.connect(self._forget_selection)
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

    def _on_page_edit(self, page: str, _what: str = "") -> None:
        if page == self.document.current_page:
            self._refresh.later()

    def _on_program_ready(self, page: str) -> None:
        if page == self.document.current_page:
            self._load_outputs()

    def _forget_selection(self, *_signal_args) -> None:
        """Another page or project: nothing of the old selection is on it."""
        self.set_nodes([])

    def _signature_now(self):
        page = self.document.page()
        if self.node_id is None or self.node_id not in page.nodes:
            comp = self.document.project.composites.get(page.name[1:]) if page.name.startswith("@") else None
            definition = (id(comp), comp.doc, tuple(comp.params)) if comp is not None else None
            return ("page", page.name, len(self._selection), len(page.nodes), page.text, definition)
        node = page.nodes[self.node_id]
        wired = tuple(sorted(e.dst_port for e in page.edges if e.dst == self.node_id))
        return ("node", page.name, self.node_id, node.block, wired)

    def refresh(self) -> None:
        """Rebuild the form when its shape changed, otherwise only reload the values."""
        self._refresh.cancel()
        page = self.document.page()
        if self.node_id is not None and self.node_id not in page.nodes:
            self.node_id = None
        sig = self._signature_now()
        if sig != self._signature:
            self._signature = sig
            self._build()
        self._load_values()
        self.scroll.fit_later.later()

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
        if page.name.startswith("@") and page.name[1:] in self.document.project.composites and not chosen:
            self.definition = DefinitionForm(self.document, self.body)
            layout.addWidget(self.definition)
        if page.text:
            note = plain_label(page.text)
            note.setWordWrap(True)
            note.setTextInteractionFlags(Qt.TextSelectableByMouse)
            layout.addWidget(note)

    def _build_node(self, layout: QVBoxLayout) -> None:
        node = self.document.page().nodes[self.node_id]
        spec = self.document.blocks.get(node.block)
        self._build_title(layout, node, spec)
        if spec is None:
            return
        self._build_identity(layout)
        if spec.attrs:
            box, form = self._group("Attributes")
            for decl in spec.attrs:
                self.fields["attr:" + decl.name] = f = self._attr_field(decl)
                self._add_row(form, decl.name, f, decl.doc)
            layout.addWidget(box)
        if spec.inputs:
            self._build_inputs(layout, spec)
        if spec.role == "placeholder":
            self._build_feed(layout, spec)
        if spec.outputs:
            box, form = self._group("Outputs")
            for decl in spec.outputs:
                lab = plain_label()
                lab.setTextInteractionFlags(Qt.TextSelectableByMouse)
                self.output_labels[decl.name] = lab
                form.addRow(decl.name, lab)
            layout.addWidget(box)
        self._build_about(layout, spec)

    def _build_title(self, layout: QVBoxLayout, node, spec) -> None:
        """The block's name, its full name (scope/id), and its category."""
        title = plain_label(node.block)
        font = QFont(title.font())
        font.setBold(True)
        font.setPointSizeF(font.pointSizeF() * 1.3)
        title.setFont(font)
        layout.addWidget(title)
        self.full_name = plain_label(self.document.page().full_name(self.node_id))
        self.full_name.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.full_name.setToolTip("the block's full name: page scope / id")
        self.full_name.setFont(_mono())
        layout.addWidget(self.full_name)
        if spec is None:
            missing = plain_label(f"Unknown block '{node.block}': no installed package declares it.")
            missing.setWordWrap(True)
            layout.addWidget(missing)
        elif spec.category:
            cat = plain_label(spec.category)
            cat.setEnabled(False)
            layout.addWidget(cat)

    def _build_identity(self, layout: QVBoxLayout) -> None:
        """Id, label and the loss mark."""
        doc = self.document
        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.AllNonFixedFieldsGrow)
        ident = QLineEdit()
        ident.setFont(_mono())
        ident.setToolTip("the block's id: the last part of its full name (scope/id), as TF names ops")
        f = Field(ident, lambda v: doc.rename_node(self.node_id, v.strip()), ident.setText, self)
        ident.editingFinished.connect(lambda f=f: f.apply(ident.text))
        self.fields["id"] = f
        self._add_row(form, "Id", f)
        label = QLineEdit()
        label.setPlaceholderText("a label shown on the block")
        f = Field(label, lambda v: doc.set_label(self.node_id, v) if v != doc.page().nodes[self.node_id].label
                  else None, label.setText, self)
        label.editingFinished.connect(lambda f=f: f.apply(label.text))
        self.fields["label"] = f
        self._add_row(form, "Label", f)
        loss = QCheckBox("Gradient target (the page's loss)")
        lf = Field(loss, lambda v: doc.set_loss(self.node_id if v else None), loss.setChecked, self)
        loss.toggled.connect(lambda on: lf.apply(lambda: on))
        self.fields["loss"] = lf
        form.addRow("Loss", loss)
        layout.addLayout(form)

    def _build_inputs(self, layout: QVBoxLayout, spec) -> None:
        """Each input: its wire(s), a note for state and references, or an inline value to type."""
        page = self.document.page()
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
            elif decl.name in wired:
                e = wired[decl.name]
                info = plain_label(f"← {e.src}.{e.src_port}")
                info.setToolTip("wired; delete the wire to give it an inline value")
                form.addRow(decl.name, info)
            elif decl.ref:
                info = QLabel("state (kept with the Variable)" if decl.slot else "wire a Variable here")
                info.setEnabled(False)
                form.addRow(decl.name, info)
            else:
                self.fields["input:" + decl.name] = f = self._inline_field(decl)
                self._add_row(form, decl.name, f, decl.doc)
        layout.addWidget(box)

    def _build_feed(self, layout: QVBoxLayout, spec) -> None:
        """A Placeholder's feed: typed as JSON, or loaded from a file."""
        doc = self.document
        box, form = self._group("Feed")
        edit = json_line("the value fed when running, e.g. [1, 2, 3]")

        def commit_feed(text):
            if not text.strip():
                if self.node_id in doc.page().feeds:
                    doc.set_feed(self.node_id, None)
                return
            if text.strip() == _feed_text(doc.page().feeds.get(self.node_id)):
                return      # a big feed shown as its summary, left as it is
            dtype = doc.page().nodes[self.node_id].attrs.get("dtype", spec.attr_map["dtype"].default) \
                if "dtype" in spec.attr_map else None
            arr = numeric_array(parse_json_value(text, edit.maxLength()), dtype if dtype in DTYPE_NAMES else None)
            old = doc.page().feeds.get(self.node_id)
            if old is None or not same_array(old, arr):
                doc.set_feed(self.node_id, arr)

        f = Field(edit, commit_feed, lambda v: edit.setText(_feed_text(v)), self)
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

    def _build_about(self, layout: QVBoxLayout, spec) -> None:
        self.doc_section = BlockDocSection(spec, self.body)      # blockdoc.py: docs/blocks.md's page
        self.doc_section.reference_requested.connect(self._ask_help)
        self.doc_label = self.doc_section.text        # a QTextBrowser: toPlainText() is what shows
        layout.addWidget(self.doc_section)

    def _ask_help(self, block: str) -> None:
        self.help_requested.emit(block)

    def _group(self, title: str):
        box = QGroupBox(title)
        form = QFormLayout(box)
        form.setFieldGrowthPolicy(QFormLayout.AllNonFixedFieldsGrow)
        form.setRowWrapPolicy(QFormLayout.DontWrapRows)
        return box, form

    def _add_row(self, form: QFormLayout, name: str, field: Field, tip: str = "") -> None:
        holder = QWidget()
        col = QVBoxLayout(holder)
        col.setContentsMargins(0, 0, 0, 0)
        col.setSpacing(2)
        col.addWidget(field.widget)
        col.addWidget(field.error)
        tip = rich_tooltip(tip) if tip else ""       # a hint's ``code`` rendered, not shown raw
        if tip:
            field.widget.setToolTip(tip)
            field.widget.setProperty("baseToolTip", tip)
        lab = QLabel(name)
        if tip:
            lab.setToolTip(tip)
        form.addRow(lab, holder)

    def _load_feed_file(self, field: Field) -> None:
        """Load from file…: the Placeholder's feed from a .npy or .csv file, checked against its
        dtype and shape (a refusal is shown under the field), set undoably."""
        doc, node_id = self.document, self.node_id
        node = doc.page().nodes[node_id]
        attrs, problems = doc.blocks.get(node.block).validate_attrs(node.attrs)
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

    def _attr_field(self, decl) -> Field:
        doc = self.document
        if decl.name == SHARE_ATTR and doc.page().nodes[self.node_id].block.startswith("@"):
            return share_field(doc, self.node_id, decl, self)
        return attr_field(decl, lambda name, value: doc.set_attr(self.node_id, name, value), self)

    def _inline_field(self, decl) -> Field:
        doc = self.document
        if decl.optional:
            hint = f"default: {format_value(decl.default) or 'none'}"
        else:
            hint = "wire it, or type a value"
        w = json_line(hint)

        def commit(text):
            node = doc.page().nodes[self.node_id]
            if not text.strip():
                if decl.name in node.inputs:
                    doc.set_inline(self.node_id, decl.name, None)
                return
            arr = numeric_array(parse_json_value(text, w.maxLength()))
            old = node.inputs.get(decl.name)
            if old is None or not same_array(old, arr):
                doc.set_inline(self.node_id, decl.name, arr)

        f = Field(w, commit, lambda v: w.setText(format_value(v)), self)
        w.editingFinished.connect(lambda: f.apply(w.text))
        return f

    # ---------------------------------------------------------------- values
    def _load_values(self) -> None:
        if self.node_id is None:
            return
        doc = self.document
        page = doc.page()
        node = page.nodes[self.node_id]
        spec = doc.blocks.get(node.block)
        self.full_name.setText(page.full_name(self.node_id))
        for key, f in self.fields.items():
            if f.widget.hasFocus() and f.error.text():
                continue  # keep the user's rejected text in front of them
            if key == "id":
                f.load(self.node_id)
            elif key == "label":
                f.load(node.label)
            elif key == "loss":
                f.load(page.is_loss(self.node_id))
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


def _mono() -> QFont:
    mono = QFont("DejaVu Sans Mono")
    mono.setStyleHint(QFont.Monospace)
    return mono


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
