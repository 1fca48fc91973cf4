"""The inspector's attr editors are a table keyed by attr kind: every kind blockflow.spec declares
has one, and a value typed into it reaches the document only when the spec accepts it."""
from __future__ import annotations

import pytest
from PySide6.QtWidgets import QWidget

from blockflow import spec
from blockflow.gui.panels import attr_editors
from blockflow.gui.panels.attr_editors import EDITORS, attr_field


def test_every_attr_kind_of_the_spec_has_an_editor():
    assert set(EDITORS) == set(spec.ATTR_KINDS)


@pytest.mark.parametrize("decl, typed, stored", [
    (spec.Attr("n", "int", default=1, min=0), 3, 3),
    (spec.Attr("rate", "float", default=0.5), 0.25, 0.25),
    (spec.Attr("on", "bool", default=False), True, True),
    (spec.Attr("mode", "choice", default="a", choices=("a", "b")), "b", "b"),
    (spec.Attr("dtype", "dtype", default="float32"), "int32", "int32"),
    (spec.Attr("name", "str", default=""), "hello", "hello"),
])
def test_an_editor_hands_accepted_values_to_the_document(qtbot, decl, typed, stored):
    panel = QWidget()
    qtbot.addWidget(panel)
    attrs, sets = {}, []
    field = attr_field(decl, lambda: attrs, lambda name, value: sets.append((name, value)), panel)
    panel.fields = {"attr": field}
    field.apply(lambda: typed)
    assert sets == [(decl.name, stored)] and field.error.text() == ""
    sets.clear()
    attrs[decl.name] = stored
    field.apply(lambda: typed)           # what the block has already: nothing to do
    assert sets == []


def test_a_value_the_spec_refuses_is_shown_under_the_field_and_not_set(qtbot):
    panel = QWidget()
    qtbot.addWidget(panel)
    sets = []
    decl = spec.Attr("shape", "shape", default=None)
    field = attr_field(decl, lambda: {}, lambda name, value: sets.append(value), panel)
    panel.fields = {"attr": field}
    field.apply(lambda: attr_editors.parse_json_value('["x"]'))
    assert sets == [] and field.error.text()
