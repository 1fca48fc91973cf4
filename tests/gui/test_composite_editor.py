"""The editor with composites, driven like a user: open an instance by double-click, the
breadcrumb and Esc, group (Ctrl+G) and ungroup (Ctrl+Shift+G), edit a definition, undo each."""
from __future__ import annotations

import copy

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QPushButton

from blockflow.compile.compiler import compile_project
from blockflow.gui.document.document import Document
from blockflow.run.runtime import run

from composite_kit import mlp_project
from composite_window import make_window as open_window, node_point

X = np.arange(12, dtype="float32").reshape(4, 3) / 10.0


def make_window(qtbot, tmp_path, project=None):
    return open_window(qtbot, tmp_path, project or mlp_project(), size=(1280, 800))


def click_node(qtbot, view, node: str, modifier=Qt.NoModifier) -> None:
    qtbot.mouseClick(view.viewport(), Qt.LeftButton, modifier, node_point(view, node))


def double_click(qtbot, view, node: str) -> None:
    qtbot.mouseDClick(view.viewport(), Qt.LeftButton, Qt.NoModifier, node_point(view, node))


def outcome(project):
    program = compile_project(project)
    assert program.ok, [str(d) for d in program.errors]
    r = run(program, {"X": X}, target="loss")
    return float(r.values[("loss", "output")]), sorted(float(np.sum(g)) for g in r.variable_grads.values())


def test_double_click_opens_an_instance_breadcrumb_click_and_esc_go_up(qtbot, tmp_path):
    window = make_window(qtbot, tmp_path)
    doc, view = window.document, window.view
    assert not window.breadcrumb.isVisible()
    double_click(qtbot, view, "d1")
    assert doc.current_page == "@Dense" and doc.location.level == "d1"
    assert set(view.diagram_scene().node_items) == {"x", "W", "b", "MatMul_1", "BiasAdd_1", "Relu_1", "y"}
    assert window.breadcrumb.isVisible()
    assert window.breadcrumb.labels() == ["main", "d1 (Dense)"]
    assert window.breadcrumb.note.text() == "editing Dense: 2 instances follow"
    assert window.tabs.tabData(window.tabs.currentIndex()) == "main"
    qtbot.mouseClick(window.breadcrumb.buttons[0], Qt.LeftButton)
    assert doc.current_page == "main" and not window.breadcrumb.isVisible()
    double_click(qtbot, view, "d2")
    assert doc.location.level == "d2"
    view.setFocus()
    qtbot.keyClick(view.viewport(), Qt.Key_Escape)
    assert doc.current_page == "main" and doc.location.level == ""


def test_an_edit_inside_an_instance_changes_the_definition_and_every_instance(qtbot, tmp_path):
    window = make_window(qtbot, tmp_path)
    doc, view = window.document, window.view
    before = doc.program("main")
    double_click(qtbot, view, "d1")
    doc.set_attr("W", "initializer", "ones")
    after = doc.program("main")
    assert after is not before
    r = run(after, {"X": X})
    np.testing.assert_array_equal(r.values[("d1/W", "ref")], np.ones((3, 5), "float32"))
    np.testing.assert_array_equal(r.values[("d2/W", "ref")], np.ones((5, 2), "float32"))
    qtbot.keyClick(view.viewport(), Qt.Key_Escape)
    assert doc.current_page == "main"
    doc.undo_stack.undo()          # undone from the page, outside the definition
    r = run(doc.program("main"), {"X": X})
    assert not np.array_equal(r.values[("d1/W", "ref")], np.ones((3, 5), "float32"))


def test_ctrl_g_groups_the_selection_and_ctrl_shift_g_ungroups_computing_the_same(qtbot, tmp_path, monkeypatch):
    window = make_window(qtbot, tmp_path)
    doc, view = window.document, window.view
    original = outcome(doc.project)
    start = copy.deepcopy(doc.project)     # (the window spread the stacked blocks when it opened)
    monkeypatch.setattr("blockflow.gui.canvas.editing.QInputDialog.getText",
                        lambda *a, **k: ("Pair", True))
    click_node(qtbot, view, "d1")
    click_node(qtbot, view, "d2", Qt.ControlModifier)
    assert set(view.selected_nodes()) == {"d1", "d2"}
    view.setFocus()
    qtbot.keyClick(view.viewport(), Qt.Key_G, Qt.ControlModifier)
    assert "Pair" in doc.project.composites
    assert set(doc.page("main").nodes) == {"X", "pair", "loss"}
    assert view.selected_nodes() == ["pair"]
    grouped = outcome(doc.project)
    np.testing.assert_allclose(grouped[0], original[0], rtol=1e-6)
    np.testing.assert_allclose(grouped[1], original[1], rtol=1e-5)
    qtbot.keyClick(view.viewport(), Qt.Key_G, Qt.ControlModifier | Qt.ShiftModifier)
    assert set(doc.page("main").nodes) == {"X", "d1", "d2", "loss"}
    np.testing.assert_allclose(outcome(doc.project)[0], original[0], rtol=1e-6)
    np.testing.assert_allclose(outcome(doc.project)[1], original[1], rtol=1e-5)
    doc.undo_stack.undo()
    assert set(doc.page("main").nodes) == {"X", "pair", "loss"}
    doc.undo_stack.undo()
    # (a deep copy of a composite's params loses their "no default" marker: compare the rest)
    assert doc.project.diagrams() == start.diagrams() and list(doc.project.composites) == ["Dense"]
    assert set(view.diagram_scene().node_items) == {"X", "d1", "d2", "loss"}


def test_ctrl_g_refuses_a_selection_that_would_feed_itself_and_says_why(qtbot, tmp_path, monkeypatch):
    """X and d2 selected, d1 between them not: the instance would feed d1 and read it back."""
    window = make_window(qtbot, tmp_path)
    doc, view = window.document, window.view
    start, steps = copy.deepcopy(doc.project), doc.undo_stack.count()
    monkeypatch.setattr("blockflow.gui.canvas.editing.QInputDialog.getText",
                        lambda *a, **k: ("Pair", True))
    click_node(qtbot, view, "X")
    click_node(qtbot, view, "d2", Qt.ControlModifier)
    view.setFocus()
    qtbot.keyClick(view.viewport(), Qt.Key_G, Qt.ControlModifier)
    assert window.statusBar().currentMessage().startswith(
        "cannot group: d1 lies between selected blocks: the group would feed itself")
    assert doc.project.diagrams() == start.diagrams() and list(doc.project.composites) == ["Dense"]
    assert doc.undo_stack.count() == steps


def test_render_closed_and_opened(qtbot, tmp_path):
    window = make_window(qtbot, tmp_path)
    window.grab().save(str(tmp_path / "closed.png"))
    double_click(qtbot, window.view, "d1")
    window.view.fit_to_view()
    QApplication.processEvents()
    window.grab().save(str(tmp_path / "opened.png"))
    import shutil
    shutil.copy(tmp_path / "closed.png", "/tmp/editor_closed.png")
    shutil.copy(tmp_path / "opened.png", "/tmp/editor_opened.png")


def composite_row_menu(window, name):
    return {a.text(): a for a in window.palette_panel.composite_menu(name).actions()}


def test_palette_lists_composites_adds_one_by_enter_and_follows_changes(qtbot, tmp_path):
    window = make_window(qtbot, tmp_path)
    palette, doc = window.palette_panel, window.document
    assert palette.composite_names() == ["Dense"]
    assert "fully connected" in palette.item_for("@Dense").toolTip(0)
    palette.search.setFocus()
    qtbot.keyClicks(palette.search, "fully connected")
    qtbot.keyClick(palette.search, Qt.Key_Return)
    added = [n for n in doc.page("main").nodes if n.startswith("Dense_")]
    assert added == ["Dense_1"] and doc.page("main").nodes["Dense_1"].block == "@Dense"
    doc.undo_stack.undo()
    doc.group(["d2"], "Head")
    QApplication.processEvents()
    assert palette.composite_names() == ["Dense", "Head"]
    doc.undo_stack.undo()
    QApplication.processEvents()
    assert palette.composite_names() == ["Dense"]


def test_delete_is_refused_while_instances_exist_and_rename_follows_every_instance(qtbot, tmp_path, monkeypatch):
    window = make_window(qtbot, tmp_path)
    doc = window.document
    told = []
    monkeypatch.setattr("blockflow.gui.main_window.composites.QMessageBox.warning",
                        lambda _w, title, text: told.append((title, text)))
    composite_row_menu(window, "Dense")["Delete"].trigger()
    assert told == [("Cannot delete composite Dense",
                     "composite 'Dense' is used by main/d1, main/d2; ungroup or delete those first")]
    assert "Dense" in doc.project.composites
    monkeypatch.setattr("blockflow.gui.main_window.composites.QInputDialog.getText",
                        lambda *a, **k: ("Layer", True))
    composite_row_menu(window, "Dense")["Rename…"].trigger()
    assert list(doc.project.composites) == ["Layer"]
    assert {n.block for n in doc.page("main").nodes.values() if n.id.startswith("d")} == {"@Layer"}
    assert window.view.node_item("d1").data.block == "@Layer"
    assert doc.program("main").ok
    doc.undo_stack.undo()
    assert list(doc.project.composites) == ["Dense"] and window.view.node_item("d1").data.block == "@Dense"
    doc.remove_nodes(["d1", "d2"])
    composite_row_menu(window, "Dense")["Delete"].trigger()
    QApplication.processEvents()      # (the palette follows on the next turn of the event loop)
    assert "Dense" not in doc.project.composites and window.palette_panel.composite_names() == []
    doc.undo_stack.undo()
    assert "Dense" in doc.project.composites


def test_edit_definition_alone_and_refuse_an_instance_that_would_contain_itself(qtbot, tmp_path):
    window = make_window(qtbot, tmp_path)
    doc, view = window.document, window.view
    composite_row_menu(window, "Dense")["Edit Definition"].trigger()
    assert doc.location.diagram == "@Dense" and doc.location.host is None
    assert window.breadcrumb.labels() == ["Dense (definition)"]
    assert window.tabs.tabData(window.tabs.currentIndex()) == "main"
    assert view.place.block("@Dense", view.view_center_scene_pos()) == ""
    assert "cannot contain itself: Dense > Dense" in window.statusBar().currentMessage()
    doc.group(["d2"], "Head", page="main")
    composite_row_menu(window, "Head")["Edit Definition"].trigger()
    with pytest.raises(Exception, match="would contain itself: Dense > Head > Dense"):
        doc.add_node("@Head", page="@Dense")
    view.setFocus()
    qtbot.keyClick(view.viewport(), Qt.Key_Escape)     # a definition alone has no level above
    assert doc.current_page == "@Head"


def test_export_and_import_a_library_with_a_clash(qtbot, tmp_path, monkeypatch):
    window = make_window(qtbot, tmp_path)
    doc = window.document
    path = str(tmp_path / "lib.bflow.json")
    assert window.export_composites(["Dense"], path) == path
    other = make_window(qtbot, tmp_path, __import__("composite_kit").mlp_project())
    odoc = other.document
    # the same definition: nothing to import
    assert other.import_composites(path) == []
    # a different one of the same name: keep both (renamed), then replace
    odoc.set_attr("W", "initializer", "ones", page="@Dense")
    monkeypatch.setattr(type(other), "ask_clash", lambda self, name, later=0: ("keep both", False))
    assert other.import_composites(path) == ["Dense_2"]
    assert set(odoc.project.composites) == {"Dense", "Dense_2"}
    odoc.undo_stack.undo()
    assert set(odoc.project.composites) == {"Dense"}
    monkeypatch.setattr(type(other), "ask_clash", lambda self, name, later=0: ("replace", False))
    assert other.import_composites(path) == ["Dense"]
    assert odoc.project.composites["Dense"].page.nodes["W"].attrs["initializer"] == "glorot_uniform"
    r = run(odoc.program("main"), {"X": X})
    assert not np.array_equal(r.values[("d1/W", "ref")], np.ones((3, 5), "float32"))
    odoc.undo_stack.undo()
    assert odoc.project.composites["Dense"].page.nodes["W"].attrs["initializer"] == "ones"


def test_group_save_and_reopen(qtbot, tmp_path):
    window = make_window(qtbot, tmp_path)
    doc = window.document
    doc.group(["d1", "d2"], "Pair")
    loss = outcome(doc.project)
    path = tmp_path / "grouped.bflow.json"
    doc.save(str(path))
    again = Document()
    again.open(str(path))
    assert set(again.project.composites) == {"Dense", "Pair"}
    assert again.page("main").nodes["pair"].block == "@Pair"
    np.testing.assert_allclose(outcome(again.project)[0], loss[0], rtol=1e-6)
    np.testing.assert_allclose(outcome(again.project)[1], loss[1], rtol=1e-5)


def test_inspector_edits_an_instance_parameter_and_its_sharing_by_choice(qtbot, tmp_path):
    window = make_window(qtbot, tmp_path, __import__("composite_kit").mlp_project(share=True))
    doc, view, inspector = window.document, window.view, window.inspector
    click_node(qtbot, view, "d1b")
    QApplication.processEvents()
    share = inspector.fields["attr:share_variables_with"].widget
    assert [share.itemText(i) for i in range(share.count())] == ["its own Variables", "those of d1", "those of d2"]
    assert share.currentData() == "d1"
    share.setCurrentIndex(0)
    assert "share_variables_with" not in doc.page("main").nodes["d1b"].attrs
    doc.undo_stack.undo()
    assert doc.page("main").nodes["d1b"].attrs["share_variables_with"] == "d1"
    click_node(qtbot, view, "d2")
    QApplication.processEvents()
    units = inspector.fields["attr:units"].widget
    units.setFocus()
    units.selectAll()
    qtbot.keyClicks(units, "7")
    qtbot.keyClick(units, Qt.Key_Return)
    assert doc.page("main").nodes["d2"].attrs["units"] == 7
    assert doc.program("main").port_type("d2", "y").shape == (4, 7)


def test_inspector_edits_a_definition_name_doc_and_parameters_each_one_undo_step(qtbot, tmp_path):
    window = make_window(qtbot, tmp_path)
    doc, inspector = window.document, window.inspector
    composite_row_menu(window, "Dense")["Edit Definition"].trigger()
    QApplication.processEvents()
    form = inspector.definition
    form.doc_edit.setFocus()
    form.doc_edit.selectAll()
    qtbot.keyClicks(form.doc_edit, "A layer.")
    qtbot.keyClick(form.doc_edit, Qt.Key_Return)
    assert doc.project.composites["Dense"].doc == "A layer."
    steps = doc.undo_stack.count()
    add = next(b for b in form.findChildren(QPushButton) if b.text() == "Add Parameter")
    qtbot.mouseClick(add, Qt.LeftButton)
    assert [p.name for p in doc.project.composites["Dense"].params] == ["units", "activation", "param1"]
    assert doc.undo_stack.count() == steps + 1
    QApplication.processEvents()
    form = inspector.definition
    name, kind, default, pdoc = form.rows[2]
    default.setFocus()
    default.selectAll()
    qtbot.keyClicks(default, "0.5")
    qtbot.keyClick(default, Qt.Key_Return)
    assert doc.project.composites["Dense"].params[2].default == 0.5
    default.selectAll()
    qtbot.keyClicks(default, "\"x\"")
    qtbot.keyClick(default, Qt.Key_Return)
    assert "param1" in form.error.text() and doc.project.composites["Dense"].params[2].default == 0.5
    doc.undo_stack.undo()
    doc.undo_stack.undo()
    assert [p.name for p in doc.project.composites["Dense"].params] == ["units", "activation"]
    QApplication.processEvents()
    form = inspector.definition
    form.name_edit.setFocus()
    form.name_edit.selectAll()
    qtbot.keyClicks(form.name_edit, "Layer")
    qtbot.keyClick(form.name_edit, Qt.Key_Return)
    assert list(doc.project.composites) == ["Layer"] and doc.current_page == "@Layer"
    assert doc.page("main").nodes["d1"].block == "@Layer"


def test_training_values_of_variables_inside_instances_go_to_their_state_and_reset(qtbot):
    doc = Document(mlp_project())
    ones = np.ones((3, 5), "float32")
    skipped = doc.apply_training({"d1/W": {"value": ones}, "d2/b": {"value": np.zeros(2, "float32")},
                                  "d1/nope": {"value": ones}}, 3)
    assert skipped == ["d1/nope"]
    assert set(doc.page("main").nodes["d1"].state) == {"W:value"}
    r = run(doc.program("main"), {"X": X})
    np.testing.assert_array_equal(r.values[("d1/W", "ref")], ones)
    assert doc.reset_variables() == ["d1", "d2"]
    assert doc.page("main").nodes["d1"].state == {}
    doc.undo_stack.undo()
    doc.undo_stack.undo()
    assert doc.page("main").nodes["d1"].state == {}


def test_pasting_an_instance_into_its_own_definition_is_refused(qtbot):
    doc = Document(mlp_project())
    text = doc.copy_fragment(["d1"], "main")
    with pytest.raises(Exception, match="cannot contain itself: Dense > Dense"):
        doc.paste_fragment(text, None, "@Dense")
    assert doc.undo_stack.count() == 0


def test_a_port_added_inside_the_definition_appears_on_every_instance(qtbot, tmp_path):
    window = make_window(qtbot, tmp_path)
    doc, view = window.document, window.view
    assert [p.name for p in view.node_item("d1").data.outputs] == ["y"]
    double_click(qtbot, view, "d1")
    doc.add_node("Output", (600.0, 200.0), attrs={"name": "pre"}, node_id="pre")
    doc.connect("BiasAdd_1", "output", "pre", "input")
    qtbot.keyClick(view.viewport(), Qt.Key_Escape)
    assert doc.current_page == "main"
    assert [p.name for p in view.node_item("d1").data.outputs] == ["y", "pre"]
    assert [p.name for p in view.node_item("d2").data.outputs] == ["y", "pre"]
    assert doc.program("main").port_type("d2", "pre").shape == (4, 2)
    doc.undo_stack.undo()
    doc.undo_stack.undo()
    QApplication.processEvents()
    assert [p.name for p in view.node_item("d1").data.outputs] == ["y"]
