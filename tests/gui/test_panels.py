"""The docks on their own: palette search and drag data, the inspector's typed form, the problems list."""
from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QCheckBox, QComboBox, QDoubleSpinBox, QLineEdit, QSpinBox

from blockflow.gui.document.document import Document
from blockflow.gui.panels.inspector import InspectorPanel, format_value
from blockflow.gui.panels.problems import ProblemsPanel


@pytest.fixture(autouse=True)
def _font(qapp):
    qapp.setFont(QFont("DejaVu Sans", 9))


@pytest.fixture
def doc(qapp):
    return Document()


@pytest.fixture
def inspector(qtbot, doc):
    panel = InspectorPanel(doc)
    qtbot.addWidget(panel)
    panel.resize(360, 700)
    panel.show()
    qtbot.waitExposed(panel)
    return panel


def commit_text(qtbot, edit: QLineEdit, text: str) -> None:
    """Type like a user: select all, type, press Enter."""
    edit.setFocus()
    edit.selectAll()
    qtbot.keyClicks(edit, text)
    qtbot.keyClick(edit, Qt.Key_Return)


# ------------------------------------------------------------------------------- palette


def test_palette_lists_registry_categories_and_filters_as_you_type(qtbot, doc):
    from blockflow.gui.panels.palette import PalettePanel

    panel = PalettePanel(doc.registry)
    qtbot.addWidget(panel)
    cats = doc.registry.categories()
    assert panel.tree.topLevelItemCount() == len(cats) + 1     # and the project's Composites, first
    assert len(panel.visible_blocks()) == len(doc.registry)
    qtbot.keyClicks(panel.search, "softm")
    assert set(panel.visible_blocks()) >= {"Softmax", "LogSoftmax"}
    assert "MatMul" not in panel.visible_blocks()
    panel.search.clear()
    qtbot.keyClicks(panel.search, "reduce_sum")  # an alias of Sum
    assert panel.visible_blocks() == ["Sum"]
    panel.search.clear()
    qtbot.keyClicks(panel.search, "over the last axis")  # words of a summary
    assert "Softmax" in panel.visible_blocks()
    panel.search.clear()
    qtbot.keyClicks(panel.search, "no block is called this")
    assert panel.visible_blocks() == []
    assert all(panel.tree.topLevelItem(i).isHidden() for i in range(panel.tree.topLevelItemCount()))


@pytest.mark.parametrize("typed, first, before", [
    ("Sum", "Sum", ["Cumsum", "AddN"]),                  # the exact name before those containing it
    ("softmax", "Softmax", ["LogSoftmax"]),
    ("Soft", "Softmax", ["LogSoftmax"]),                 # names starting with it before the rest
    ("reduce_sum", "Sum", []),                           # an alias counts as a name
])
def test_palette_search_ranks_exact_then_prefix_and_enter_adds_the_top_hit(qtbot, doc, typed, first, before):
    from blockflow.gui.panels.palette import PalettePanel

    panel = PalettePanel(doc.registry)
    qtbot.addWidget(panel)
    added = []
    panel.block_activated.connect(added.append)
    qtbot.keyClicks(panel.search, typed)
    shown = panel.visible_blocks()
    assert shown[0] == first, shown
    for other in before:
        assert other in shown and shown.index(first) < shown.index(other)
    qtbot.keyClick(panel.search, Qt.Key_Return)
    assert added == [first]
    # the counts follow the filter, and come back when it is cleared
    cat = panel.item_for(first).parent()
    total = cat.childCount()
    hidden = sum(cat.child(i).isHidden() for i in range(total))
    assert cat.text(0).endswith(f"({total - hidden} of {total})")
    panel.search.clear()
    assert cat.text(0).endswith(f"({total})") and len(panel.visible_blocks()) == len(doc.registry)
    order = [panel.tree.topLevelItem(i).text(0).split("  (")[0] for i in range(panel.tree.topLevelItemCount())]
    assert order[1:] == list(doc.registry.categories())       # the drawn order again
    assert panel.visible_blocks() == [spec.name for specs in doc.registry.categories().values() for spec in specs]


def test_palette_rows_carry_summary_tooltips_and_block_mime(qtbot, doc):
    from blockflow.gui.canvas.view import BLOCK_MIME
    from blockflow.gui.panels.palette import PalettePanel

    panel = PalettePanel(doc.registry)
    qtbot.addWidget(panel)
    row = panel.item_for("MatMul")
    from blockflow.gui.common.markup import markup_html   # the summary rendered, no raw ``markup``

    assert row.toolTip(0).startswith("<qt>" + markup_html(doc.registry["MatMul"].summary))
    mime = panel.tree.mimeData([row])
    assert bytes(mime.data(BLOCK_MIME)).decode() == "MatMul"
    assert panel.tree.mimeData([panel.tree.topLevelItem(0)]) is None  # a category is not a block
    assert not panel.tree._drag_pixmap("MatMul").isNull()
    activated = []
    panel.block_activated.connect(activated.append)
    panel.tree.itemActivated.emit(row, 0)
    qtbot.keyClicks(panel.search, "StopGrad")
    qtbot.keyClick(panel.search, Qt.Key_Return)
    assert activated == ["MatMul", "StopGradient"]


# ------------------------------------------------------------------------------- inspector


def test_inspector_builds_a_typed_form_from_the_attr_kinds(inspector, doc):
    doc.add_node("Placeholder", (0, 0), node_id="x")
    inspector.set_nodes(["x"])
    assert isinstance(inspector.field("attr:dtype"), QComboBox)
    assert isinstance(inspector.field("attr:shape"), QLineEdit)
    assert isinstance(inspector.field("loss"), QCheckBox)
    assert inspector.full_name.text() == "main/x"
    assert "fed from outside" in inspector.doc_label.toPlainText()
    doc.add_node("Dropout", (0, 0), node_id="d")
    inspector.set_nodes(["d"])
    rate = inspector.field("attr:rate")
    assert isinstance(rate, QDoubleSpinBox)
    assert (rate.minimum(), rate.maximum()) == (0.0, 1.0)
    doc.add_node("Sum", (0, 0), node_id="s")
    inspector.set_nodes(["s"])
    assert isinstance(inspector.field("attr:keep_dims"), QCheckBox)
    assert isinstance(inspector.field("input:input"), QLineEdit)
    doc.add_node("Split", (0, 0), node_id="sp")
    inspector.set_nodes(["sp"])
    num = inspector.field("attr:num_split")
    assert isinstance(num, QSpinBox)
    assert num.text() == "(required)"  # not set yet; the minimum 1 is the first real value
    inspector.set_nodes(["s", "sp"])
    assert inspector.node_id is None
    assert "2 blocks selected" in inspector.body.findChildren(type(inspector.full_name))[2].text()


def test_inspector_json_attr_validates_and_edits_through_the_document(qtbot, inspector, doc):
    doc.add_node("Placeholder", (0, 0), node_id="x")
    inspector.set_nodes(["x"])
    shape = inspector.field("attr:shape")
    steps = doc.undo_stack.count()
    commit_text(qtbot, shape, "[5,")
    assert "not valid JSON" in inspector.field_error("attr:shape")
    commit_text(qtbot, shape, "[5, 2.5]")
    assert "integers" in inspector.field_error("attr:shape")
    assert shape.palette().color(shape.backgroundRole()) != inspector.palette().color(shape.backgroundRole())
    assert doc.undo_stack.count() == steps and "shape" not in doc.page().nodes["x"].attrs
    commit_text(qtbot, shape, "[5]")
    assert inspector.field_error("attr:shape") == ""
    assert doc.page().nodes["x"].attrs["shape"] == [5]
    assert doc.undo_stack.count() == steps + 1
    assert doc.program().output_type("x", "output").shape == (5,)
    combo = inspector.field("attr:dtype")
    combo.setCurrentText("float64")
    assert doc.page().nodes["x"].attrs["dtype"] == "float64"
    doc.undo_stack.undo()
    qtbot.waitUntil(lambda: combo.currentText() == "float32")  # the form follows the model on undo
    doc.undo_stack.undo()
    qtbot.waitUntil(lambda: shape.text() == "[]")


def test_inspector_numbers_label_loss_inline_and_feed(qtbot, inspector, doc):
    doc.add_node("Placeholder", (0, 0), node_id="x", attrs={"shape": [3]})
    doc.add_node("Sum", (200, 0), node_id="s")
    doc.connect("x", "output", "s", "input")
    inspector.set_nodes(["s"])
    assert "input:input" not in inspector.fields  # wired inputs take no inline value
    axis = inspector.field("input:axis")
    commit_text(qtbot, axis, "zero")
    assert "JSON" in inspector.field_error("input:axis")
    commit_text(qtbot, axis, "0")
    assert format_value(doc.page().nodes["s"].inputs["axis"]) == "0"
    keep = inspector.field("attr:keep_dims")
    keep.setChecked(True)
    assert doc.page().nodes["s"].attrs["keep_dims"] is True
    loss = inspector.field("loss")
    loss.setChecked(True)
    assert doc.page().loss == "s"
    commit_text(qtbot, inspector.field("label"), "total")
    assert doc.page().nodes["s"].label == "total"

    inspector.set_nodes(["x"])
    feed = inspector.field("feed")
    commit_text(qtbot, feed, "[1, 2")
    assert inspector.field_error("feed") and "x" not in doc.page().feeds
    commit_text(qtbot, feed, "[2, 1, 0.1]")
    fed = doc.page().feeds["x"]
    assert fed.dtype == np.float32 and fed.tolist() == pytest.approx([2, 1, 0.1])
    qtbot.waitUntil(lambda: feed.text() == "[2.0, 1.0, 0.1]")  # reloaded from the model

    doc.add_node("Dropout", (0, 0), node_id="d")
    inspector.set_nodes(["d"])
    rate = inspector.field("attr:rate")
    rate.setValue(0.25)
    assert doc.page().nodes["d"].attrs["rate"] == 0.25


def test_inspector_follows_page_rename_and_deletion(qtbot, inspector, doc):
    doc.add_node("Softmax", (0, 0))
    inspector.set_nodes(["Softmax_1"])
    doc.rename_page("main", "net")
    qtbot.waitUntil(lambda: inspector.full_name.text() == "net/Softmax_1")
    doc.remove_nodes(["Softmax_1"])
    qtbot.waitUntil(lambda: inspector.node_id is None)


# ------------------------------------------------------------------------------- problems


def test_problems_panel_is_live_and_reports_clicks(qtbot, doc):
    panel = ProblemsPanel(doc)
    qtbot.addWidget(panel)
    panel.show()
    assert panel.rows() == [("", "No problems on this page.")] or panel.errors == 0
    doc.add_node("Softmax", (0, 0))
    qtbot.waitUntil(lambda: panel.errors == 1)
    node, message = panel.rows()[0]
    assert node == "Softmax_1" and "not connected" in message
    clicked = []
    panel.problem_activated.connect(clicked.append)
    item = panel.tree.topLevelItem(0)
    rect = panel.tree.visualItemRect(item)
    qtbot.mouseClick(panel.tree.viewport(), Qt.LeftButton, pos=rect.center())
    assert clicked == ["Softmax_1"]
    doc.add_node("Placeholder", (0, 0), node_id="x", attrs={"shape": [3]})
    doc.connect("x", "output", "Softmax_1", "logits")
    qtbot.waitUntil(lambda: panel.errors == 0)
    doc.undo_stack.undo()
    qtbot.waitUntil(lambda: panel.errors == 1)
    doc.add_page("other")
    doc.set_current_page("other")
    # every page's problems stay listed, with their page
    doc.add_node("Softmax", (0, 0), node_id="s", page="other")
    qtbot.waitUntil(lambda: panel.errors == 2)
    assert sorted(p for p, n, _m in panel.page_rows()) == ["main", "other"]
    clicked.clear()
    doc.set_current_page("main")
    row = next(panel.tree.topLevelItem(i) for i in range(panel.tree.topLevelItemCount())
               if panel.tree.topLevelItem(i).text(0) == "other")
    qtbot.mouseClick(panel.tree.viewport(), Qt.LeftButton, pos=panel.tree.visualItemRect(row).center())
    assert doc.current_page == "other" and clicked == ["s"]
    doc.remove_nodes(["s"], page="other")
    qtbot.waitUntil(lambda: panel.errors == 1)


# ------------------------------------------------------------------------------- a closed window


def test_panels_of_a_closed_window_leave_the_document_and_are_freed(qtbot, doc):
    """The document can outlive the window showing it (it is the caller's): once the window is
    closed and deleted, edits of every kind reach none of its panels (no "C++ object already
    deleted" from a panel's slot, or from a refresh it asked for) and nothing keeps them alive."""
    import gc
    import weakref

    from PySide6.QtCore import QEvent
    from PySide6.QtWidgets import QApplication, QVBoxLayout, QWidget

    from blockflow.gui.main_window.tabs import PageTabBar
    from blockflow.gui.panels.trainpanel import TrainPanel

    doc.add_node("Placeholder", (0, 0), node_id="x", attrs={"shape": [3]})
    window = QWidget()
    column = QVBoxLayout(window)
    panels = [PageTabBar(doc), InspectorPanel(doc), ProblemsPanel(doc), TrainPanel(doc)]
    for panel in panels:
        column.addWidget(panel)
    window.resize(500, 900)
    window.show()
    qtbot.waitExposed(window)
    inspector = panels[1]
    inspector.set_nodes(["x"])                     # a form with fields, and refreshes asked for
    doc.set_label("x", "input")
    assert inspector._refresh.pending()
    freed = [weakref.ref(panel) for panel in panels]
    window.close()
    window.deleteLater()
    del window, column, panels, inspector, panel
    QApplication.sendPostedEvents(None, QEvent.DeferredDelete)

    edit_every_way(doc)
    qtbot.wait(50)                                # every refresh asked for gets its turn
    gc.collect()
    assert [ref() for ref in freed] == [None] * len(freed)


def edit_every_way(doc):
    """Edits of every kind on a document whose page "main" holds a Placeholder "x" (the closed
    window and closed panel tests: no edit may reach a panel that is gone)."""
    doc.add_node("Exp", (100, 0), node_id="e")
    doc.connect("x", "output", "e", "x")
    doc.set_attr("x", "shape", [4])
    doc.set_label("e", "exp")
    doc.set_loss("e")
    doc.set_metrics(["e"])
    doc.set_page_text("a note")
    doc.rename_page("main", "first")
    doc.set_current_page(doc.add_page())
    doc.undo_stack.undo()
    doc.program("first")                          # compiled: program_ready goes out too
    doc.new()
