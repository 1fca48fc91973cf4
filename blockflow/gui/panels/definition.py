"""The inspector's form for a composite's definition, shown when a definition is open and no
block is selected: its name, documentation and parameters (add, remove, and edit each one's
name, kind, default and documentation). Every edit is one undo step: a rename through
Document.rename_composite, the rest through Document.replace_composite with the definition
changed in a copy (the mutators' checks refuse a bad one, and the field shows why)."""
from __future__ import annotations

import dataclasses

from PySide6.QtWidgets import (QComboBox, QFormLayout, QGroupBox, QHBoxLayout, QLineEdit, QPushButton,
                               QVBoxLayout, QWidget)

from blockflow.composite import SHARE_ATTR, composite_name
from blockflow.errors import ProjectError
from blockflow.spec import ATTR_KINDS, Attr
from blockflow.gui.common.plaintext import plain_label
from blockflow.gui.panels.attr_editors import format_value, parse_json_value

__all__ = ["DefinitionForm"]


class DefinitionForm(QWidget):
    """Name, documentation and parameters of the composite whose diagram is open."""

    def __init__(self, document, parent=None):
        super().__init__(parent)
        self.document = document
        self.name = composite_name(document.current_page)
        comp = document.project.composite(self.name)
        col = QVBoxLayout(self)
        col.setContentsMargins(0, 0, 0, 0)
        form = QFormLayout()
        self.name_edit = QLineEdit(comp.name)
        self.name_edit.setToolTip("the composite's name; its instances follow a rename")
        self.name_edit.editingFinished.connect(self._rename)
        form.addRow("Name", self.name_edit)
        self.doc_edit = QLineEdit(comp.doc)
        self.doc_edit.setPlaceholderText("what it computes (shown as its tooltip and in its reference)")
        self.doc_edit.editingFinished.connect(self._set_doc)
        form.addRow("Documentation", self.doc_edit)
        col.addLayout(form)
        users = document.instance_count(self.name)
        used = plain_label(f"used {users} time{'s' if users != 1 else ''}: an edit here changes every instance")
        used.setEnabled(False)
        col.addWidget(used)
        box = QGroupBox("Parameters")
        self.params_form = QVBoxLayout(box)
        self.rows = []
        for p in comp.params:
            self._param_row(p)
        add = QPushButton("Add Parameter")
        add.clicked.connect(self._add_param)
        self.params_form.addWidget(add)
        col.addWidget(box)
        self.error = plain_label()
        self.error.setWordWrap(True)
        self.error.hide()
        col.addWidget(self.error)

    # ------------------------------------------------------------------ rows
    def _param_row(self, p: Attr) -> None:
        # Two lines a parameter (name, kind, Remove; then default and documentation): five fields
        # on one line were cut to a few letters each in a dock of usual width.
        row = QWidget()
        lines = QVBoxLayout(row)
        lines.setContentsMargins(0, 0, 0, 6)
        lines.setSpacing(2)
        first, second = QHBoxLayout(), QHBoxLayout()
        lines.addLayout(first)
        lines.addLayout(second)
        name = QLineEdit(p.name)
        name.setToolTip("the parameter's name: inner attrs use it as {\"$param\": name}")
        kind = QComboBox()
        kind.addItems(sorted(ATTR_KINDS))
        kind.setCurrentText(p.kind)
        default = QLineEdit("" if p.required else format_value(p.default))
        default.setPlaceholderText("required")
        default.setToolTip("the default value (JSON); empty: every instance must give one")
        doc = QLineEdit(p.doc)
        doc.setPlaceholderText("documentation")
        remove = QPushButton("Remove")
        first.addWidget(name, 2)
        first.addWidget(kind, 1)
        first.addWidget(remove)
        second.addWidget(default, 1)
        second.addWidget(doc, 2)
        index = len(self.rows)
        self.rows.append((name, kind, default, doc))
        name.editingFinished.connect(lambda i=index: self._edit_param(i))
        default.editingFinished.connect(lambda i=index: self._edit_param(i))
        doc.editingFinished.connect(lambda i=index: self._edit_param(i))
        kind.currentTextChanged.connect(lambda _t, i=index: self._edit_param(i))
        remove.clicked.connect(lambda _c=False, i=index: self._remove_param(i))
        self.params_form.insertWidget(index, row)

    def _row_param(self, i: int, old: Attr) -> Attr:
        name, kind, default, doc = self.rows[i]
        text = default.text().strip()
        value = dataclasses.fields(Attr)[2].default if not text else parse_json_value(text, default.maxLength())
        p = Attr(name.text().strip(), kind.currentText(), value, old.choices, old.min, old.max,
                 doc.text(), old.fits)
        if not p.required:
            try:
                p = dataclasses.replace(p, default=p.validate(p.default))
            except Exception as exc:     # an AttrError or a bad kind: shown under the form
                raise ProjectError(f"parameter '{p.name}': {exc}") from None
        return p

    # ------------------------------------------------------------------ edits
    def _show(self, exc: Exception | None) -> None:
        self.error.setText(str(exc) if exc else "")
        self.error.setVisible(exc is not None)

    def _replace(self, change, text: str) -> bool:
        comp = self.document.project.composite(self.name).copy()
        try:
            change(comp)
            names = [p.name for p in comp.params]
            if len(set(names)) != len(names):
                raise ProjectError("two parameters have the same name")
            if comp != self.document.project.composite(self.name):
                self.document.replace_composite(comp, text)
        except (ProjectError, ValueError) as exc:
            self._show(exc)
            return False
        self._show(None)
        return True

    def _rename(self) -> None:
        new = self.name_edit.text().strip()
        if new == self.name:
            return
        try:
            self.document.rename_composite(self.name, new)
        except ProjectError as exc:
            self._show(exc)
            return
        self.name = new
        self._show(None)

    def _set_doc(self) -> None:
        text = self.doc_edit.text()
        self._replace(lambda c: setattr(c, "doc", text), f"Document composite {self.name}")

    def _edit_param(self, i: int) -> None:
        def change(comp):
            params = list(comp.params)
            params[i] = self._row_param(i, params[i])
            comp.params = params
        self._replace(change, f"Edit parameter of {self.name}")

    def _remove_param(self, i: int) -> None:
        def change(comp):
            comp.params = [p for k, p in enumerate(comp.params) if k != i]
        self._replace(change, f"Remove parameter of {self.name}")

    def _add_param(self) -> None:
        taken = {p.name for p in self.document.project.composite(self.name).params}
        n = 1
        while f"param{n}" in taken:
            n += 1
        self._replace(lambda c: setattr(c, "params", list(c.params) + [Attr(f"param{n}", "float", 0.0)]),
                      f"Add parameter to {self.name}")


def share_field(document, node_id: str, decl, panel):
    """An instance's ``share_variables_with``: its own Variables, or those of another instance
    of the same composite beside it (weight tying), picked from a list."""
    from blockflow.gui.panels.attr_editors import Field
    page = document.page()
    block = page.nodes[node_id].block
    combo = QComboBox()
    combo.addItem("its own Variables", "")
    for nid, node in page.nodes.items():
        if nid != node_id and node.block == block:
            combo.addItem(f"those of {nid}", nid)
    combo.setToolTip("weight tying: this instance can read the Variables of another instance "
                     "of the same composite beside it instead of having its own")

    def load(value):
        i = combo.findData(value or "")
        if i < 0:                       # a name the file gave that is not beside it: shown
            combo.addItem(f"those of {value} (not here)", value)
            i = combo.count() - 1
        combo.setCurrentIndex(i)

    f = Field(combo, lambda v: document.set_attr(node_id, SHARE_ATTR, v or None), load, panel)
    combo.currentIndexChanged.connect(lambda _i: f.apply(lambda: combo.currentData()))
    f.decl = decl
    return f
