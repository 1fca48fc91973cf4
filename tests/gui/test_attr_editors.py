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


@pytest.mark.parametrize("decl, typed", [
    (spec.Attr("n", "int", default=1, min=0), 3),
    (spec.Attr("rate", "float", default=0.5), 0.25),
    (spec.Attr("on", "bool", default=False), True),
    (spec.Attr("mode", "choice", default="a", choices=("a", "b")), "b"),
    (spec.Attr("dtype", "dtype", default="float32"), "int32"),
    (spec.Attr("name", "str", default=""), "hello"),
    (spec.Attr("shape", "shape", default=None), [2, -1]),
])
def test_an_editor_hands_what_is_typed_to_the_document(qtbot, decl, typed):
    panel = QWidget()
    qtbot.addWidget(panel)
    sets = []
    field = attr_field(decl, lambda name, value: sets.append((name, value)), panel)
    panel.fields = {"attr": field}
    field.apply(lambda: typed)
    assert sets == [(decl.name, typed)] and field.error.text() == ""


def test_what_an_editor_offers_comes_from_the_spec(qtbot):
    panel = QWidget()
    qtbot.addWidget(panel)
    for decl in (spec.Attr("mode", "choice", default="a", choices=("a", "b")),
                 spec.Attr("dtype", "dtype", default="float32"),
                 spec.Attr("dtype", "dtype", default="int32", choices=("int32", "int64"))):
        box = attr_field(decl, lambda name, value: None, panel).widget
        assert [box.itemText(i) for i in range(box.count())] == [str(o) for o in decl.options]
    for kind in ("shape", "ints", "tensor"):
        line = attr_field(spec.Attr("v", kind, default=None), lambda name, value: None, panel).widget
        assert line.placeholderText() == spec.ATTR_KINDS[kind].hint


def test_a_value_the_spec_refuses_is_shown_under_the_field_and_not_set(qtbot, qapp):
    from blockflow.gui.document.document import Document

    doc = Document()
    doc.add_node("Placeholder", (0, 0), node_id="x")
    decl = doc.registry.get("Placeholder").attr_map["shape"]
    panel = QWidget()
    qtbot.addWidget(panel)
    field = attr_field(decl, lambda name, value: doc.set_attr("x", name, value), panel)
    panel.fields = {"attr": field}
    steps = doc.undo_stack.count()
    field.apply(lambda: attr_editors.parse_json_value('["x"]'))
    with pytest.raises(spec.AttrError) as refused:
        decl.validate(["x"])
    assert field.error.text() == str(refused.value)          # the spec's reason, as it says it
    assert doc.undo_stack.count() == steps and "shape" not in doc.page().nodes["x"].attrs
    field.apply(lambda: [5])
    assert field.error.text() == "" and doc.page().nodes["x"].attrs["shape"] == [5]
    field.apply(lambda: [5])                                 # what the block has: no edit
    assert doc.undo_stack.count() == steps + 1
