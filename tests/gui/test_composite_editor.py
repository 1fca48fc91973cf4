"""The editor with composites, driven like a user: open an instance by double-click, the
breadcrumb and Esc, group (Ctrl+G) and ungroup (Ctrl+Shift+G), edit a definition, undo each."""
from __future__ import annotations

import copy

import numpy as np
import pytest
from PySide6.QtCore import QPoint, QSettings, Qt
from PySide6.QtWidgets import QApplication

from blockflow.compile.compiler import compile_project
from blockflow.gui.document.document import Document
from blockflow.gui.main_window.window import MainWindow
from blockflow.run.runtime import run

from composite_kit import mlp_project

X = np.arange(12, dtype="float32").reshape(4, 3) / 10.0


def make_window(qtbot, tmp_path, project=None):
    window = MainWindow(Document(project or mlp_project()), QSettings(str(tmp_path / "s.ini"), QSettings.IniFormat))
    qtbot.addWidget(window)
    window.maybe_save = lambda: True      # closed by the test's teardown without asking
    window.resize(1280, 800)
    window.show()
    qtbot.waitExposed(window)
    window.view.fit_to_view()
    QApplication.processEvents()
    return window


def node_point(view, node: str) -> QPoint:
    return view.mapFromScene(view.node_item(node).sceneBoundingRect().center())


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
