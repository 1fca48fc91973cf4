"""Hostile text in the inspector: a feed, an inline value and a JSON attr typed or pasted, and an
attr value from the file that its editor cannot show. Each is refused under its field with what
is wrong, never cast without a word, never raised out of the Qt handler."""
from __future__ import annotations

import pytest
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QApplication


@pytest.fixture
def doc(qapp):
    from blockflow.gui.document.document import Document

    qapp.setFont(QFont("DejaVu Sans", 9))
    return Document()


@pytest.fixture
def inspector(qtbot, doc):
    from blockflow.gui.panels.inspector import InspectorPanel

    panel = InspectorPanel(doc)
    qtbot.addWidget(panel)
    panel.show()
    return panel


def typed(inspector, key: str, text: str) -> str:
    """``text`` put in field ``key`` and committed (as a paste and Enter); the error shown."""
    f = inspector.fields[key]
    f.widget.setText(text)
    f.widget.editingFinished.emit()
    QApplication.processEvents()
    return f.error.text()


def placeholder(doc, inspector, dtype: str) -> str:
    nid = doc.add_node("Placeholder", (0, 0))
    doc.set_attr(nid, "dtype", dtype)
    inspector.set_nodes([nid])
    return nid


@pytest.mark.parametrize("dtype,text,says", [
    ("int8", "[1.5]", "1.5 (at [0]) has a fraction, and int8 holds whole numbers"),
    ("int32", "[2, 7.25]", "7.25 (at [1]) has a fraction"),
    ("int8", "[1000]", "1000 (at [0]) does not fit int8 (-128 to 127"),
    ("uint8", "[-1]", "-1 (at [0]) does not fit uint8"),
    ("int32", "[1e999]", "inf (at [0]) does not fit int32"),
    ("bool", "[NaN]", "nan (at [0]) does not fit bool"),
    ("bool", "{}", "expected a number or nested lists of numbers"),
    ("float32", "null", "expected a number or nested lists of numbers"),
    ("float32", "[18446744073709551616]", "each an int64 or a float"),
    ("float32", "[[1, 2], [3]]", "every row of one length"),
])
def test_a_typed_feed_that_does_not_fit_its_dtype_is_refused_not_cast(doc, inspector, dtype, text, says):
    nid = placeholder(doc, inspector, dtype)
    steps = doc.undo_stack.count()
    assert says in typed(inspector, "feed", text)
    assert nid not in doc.page().feeds and doc.undo_stack.count() == steps


def test_a_feed_that_fits_is_still_set_with_its_dtype(doc, inspector):
    nid = placeholder(doc, inspector, "int8")
    assert typed(inspector, "feed", "[1, -2.0, true]") == ""
    assert doc.page().feeds[nid].dtype.name == "int8" and doc.page().feeds[nid].tolist() == [1, -2, 1]


@pytest.mark.parametrize("key,block", [("feed", "Placeholder"), ("attr:shape", "Placeholder"),
                                       ("input:y", "Add")])
def test_json_nested_too_deeply_is_refused_under_its_field(doc, inspector, key, block):
    nid = doc.add_node(block, (0, 0))
    inspector.set_nodes([nid])
    steps = doc.undo_stack.count()
    assert typed(inspector, key, "[" * 5000) == "not valid JSON here: nested too deeply"
    assert typed(inspector, key, "7" * 5000) == "an integer of more than 4,300 digits"
    assert doc.undo_stack.count() == steps


def test_a_paste_longer_than_the_field_says_it_was_cut(doc, inspector):
    nid = placeholder(doc, inspector, "float32")
    said = typed(inspector, "feed", "[" + ", ".join(["1"] * 1_000_000) + "]")
    assert said.startswith("the text fills the field's 32,767 characters: what was pasted was cut there")
    assert nid not in doc.page().feeds


def test_a_seed_past_int32_from_the_file_is_shown_and_edited(doc, inspector):
    nid = doc.add_node("Dropout", (0, 0))
    doc.page().nodes[nid].attrs["seed"] = 2**40          # as a file may hold it: an int64
    inspector.set_nodes([nid])
    assert inspector.fields["attr:seed"].widget.text() == str(2**40)
    assert typed(inspector, "attr:seed", str(2**62)) == ""
    assert doc.page().nodes[nid].attrs["seed"] == 2**62
    assert typed(inspector, "attr:seed", "1e3") == "expected a whole number, got '1e3'"
    assert "the largest int64" in typed(inspector, "attr:seed", "9" * 30)
    assert doc.page().nodes[nid].attrs["seed"] == 2**62


def test_a_value_past_its_spin_box_from_the_file_is_named_under_the_field(doc, inspector):
    nid = doc.add_node("LRN", (0, 0))
    doc.page().nodes[nid].attrs["depth_radius"] = 2**40      # past its declared range: a problem
    inspector.set_nodes([nid])
    said = inspector.fields["attr:depth_radius"].error.text()
    assert said.startswith(f"the project holds {2**40:g}, outside the range this field takes")
    assert doc.page().nodes[nid].attrs["depth_radius"] == 2**40      # shown, not changed


@pytest.mark.parametrize("block,attr", [("CsvDataset", "path"), ("Einsum", "equation")])
def test_a_text_attr_holding_nul_is_refused_as_typed_not_at_save(doc, inspector, block, attr):
    from blockflow.io.project_io import dumps_project

    nid = doc.add_node(block, (0, 0))
    inspector.set_nodes([nid])
    steps = doc.undo_stack.count()
    said = typed(inspector, "attr:" + attr, "a\x00b")
    assert said == "the text contains U+0000 (NUL) at offset 1, which no text in a project may hold"
    assert doc.undo_stack.count() == steps
    dumps_project(doc.project)          # before, the project could no longer be saved
