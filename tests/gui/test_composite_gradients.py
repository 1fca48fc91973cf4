"""Results and gradients through composite instances in the editor: a closed instance's boundary
wires, its badge and its output values; an opened instance's inner wires on the program's scale;
the stepper, Explain, Problems, Values and training inside instances. Pictures of a closed and an
opened instance after a backward run are rendered (BLOCKFLOW_PICTURES=folder keeps them)."""
from __future__ import annotations

import math
import os

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QApplication, QMessageBox

from blockflow.composite import block_name
from blockflow.gui.document.location import Location
from blockflow.present.gradview import norm as norm_of
from blockflow.project import Edge

from composite_kit import laid_out
from composite_window import make_window as open_window

@pytest.fixture(autouse=True)
def no_dialogs(monkeypatch, qapp):
    qapp.setFont(QFont("DejaVu Sans", 9))
    monkeypatch.setattr(QMessageBox, "question", staticmethod(lambda *a, **k: QMessageBox.Discard))


def make_window(qtbot, tmp_path, project):
    return open_window(qtbot, tmp_path, project, size=(1500, 900), active=True)


def backward(qtbot, window):
    """Shift+F5 on the canvas; the run's result once delivered."""
    with qtbot.waitSignal(window.session.run_finished, timeout=5000) as blocker:
        qtbot.keyClick(window.view, Qt.Key_F5, Qt.ShiftModifier)
    QApplication.processEvents()
    return blocker.args[0]


def open_instance(window, level):
    # the editor's double-click opens an instance through the same call
    window.document.set_location(Location.at(window.document.project, "main", level))
    QApplication.processEvents()
    window.view.fit_to_view()
    QApplication.processEvents()


def click_node(qtbot, view, node):
    item = view.node_item(node)
    qtbot.mouseClick(view.viewport(), Qt.LeftButton, Qt.NoModifier,
                     view.mapFromScene(item.sceneBoundingRect().center()))
    assert view.selected_nodes() == [node]


def save_picture(window, name, tmp_path):
    folder = os.environ.get("BLOCKFLOW_PICTURES") or str(tmp_path)
    path = os.path.join(folder, name)
    assert window.grab().save(path)
    return path


def expected_level(highlighter, norm):
    scale = highlighter.scale
    return scale.level(norm) if norm >= scale.low else -1


# ------------------------------------------------------------------------------- closed
def test_a_closed_instance_shows_its_boundary_gradients_badge_and_output_values(qtbot, tmp_path):
    window = make_window(qtbot, tmp_path, laid_out())
    result = backward(qtbot, window)
    hl, view = window.view.gradients, window.view
    # boundary wires coloured by the runtime's gradient at the instance's ports
    for drawn, flat in ((Edge("d1", "y", "d2", "x"), Edge("d1/y", "output", "d2/x", "input")),
                        (Edge("X", "output", "d1", "x"), Edge("X", "output", "d1/x", "input")),
                        (Edge("d2", "y", "loss", "input"), Edge("d2/y", "output", "loss", "input"))):
        style = hl.wire_style(drawn)
        norm = norm_of(result.edge_grads[flat])
        assert style.state == "flows" and style.level == expected_level(hl, norm)
        assert style.colour == hl.level_colour(style.level)
    assert hl.wire_style(Edge("d1b", "y", "both", "inputs[0]")).state == "unreached"
    # the badge: the norm of the gradients of d1's Variables; d1b reaches nothing
    grads = result.variable_grads
    norm = math.sqrt(sum(float(np.sum(np.asarray(grads[v], np.float64) ** 2)) for v in ("d1/W", "d1/b")))
    badge = hl.badges.items["d1"]
    assert badge.badge.norm == pytest.approx(norm, rel=1e-6)
    assert hl.badges.text_of("d1").startswith("‖∇W‖")
    assert hl.badges.text_of("d1b") == "shares d1 · cut"
    assert badge.parentItem() is view.node_item("d1")
    assert "d1/W" in hl.node_tooltip("d1")[0]
    # the closed instance shows its output port's value, as a block shows its output
    run = view.node_item("d1").results
    assert run is not None and run.summaries["y"] is not None
    assert run.summaries["y"].shape_text.startswith("[4, 5]")
    save_picture(window, "composite_closed_gradients.png", tmp_path)


def test_static_gradient_paths_badge_instances_before_any_run(qtbot, tmp_path):
    window = make_window(qtbot, tmp_path, laid_out())
    window.actions["gradient_paths"].trigger()          # View > Gradient Paths
    hl = window.view.gradients
    qtbot.waitUntil(lambda: hl.current is not None, timeout=5000)   # the page's program is compiled off the UI thread
    assert hl.mode == "paths"
    assert hl.badges.text_of("d1b") == "shares d1 · cut"
    assert hl.badges.text_of("d1") == "∇ flows"


# ------------------------------------------------------------------------------- opened
def test_opening_an_instance_after_a_backward_run_colours_its_inner_wires_on_one_scale(qtbot, tmp_path):
    window = make_window(qtbot, tmp_path, laid_out())
    result = backward(qtbot, window)
    hl = window.view.gradients
    top_scale = hl.scale
    for level in ("d1", "d2"):
        open_instance(window, level)
        scene = window.view.diagram_scene()
        assert scene.page.name == "@Dense" and set(scene.node_items) >= {"W", "MatMul_1"}
        assert hl.level == level and hl.scale == top_scale          # one scale for the program
        inner = window.document.project.composites["Dense"].page.edges
        for e in inner:
            flat = Edge(f"{level}/{e.src}", e.src_port, f"{level}/{e.dst}", e.dst_port)
            style = hl.wire_style(e)
            assert style.state == "flows"
            assert style.level == expected_level(hl, norm_of(result.edge_grads[flat]))
        # the inner blocks show their own values from the page's run
        run = window.view.node_item("MatMul_1").results
        np.testing.assert_array_equal(window.session.results().value(f"{level}/MatMul_1", "product"),
                                      result.values[(f"{level}/MatMul_1", "product")])
        assert run is not None and run.summaries["product"] is not None
    # the same weight edge differs between d1 and d2 (two weight matrices)
    w = Edge("W", "ref", "MatMul_1", "b")
    open_instance(window, "d1")
    d1_level = hl.wire_style(w).level
    open_instance(window, "d2")
    assert hl.wire_style(w).level != d1_level or np.linalg.norm(result.variable_grads["d1/W"]) == \
        pytest.approx(np.linalg.norm(result.variable_grads["d2/W"]))
    open_instance(window, "d1")
    save_picture(window, "composite_opened_gradients.png", tmp_path)
    # back up: the page's wires and badges again
    window.document.set_location(window.document.location.up(window.document.project))
    QApplication.processEvents()
    assert hl.level == "" and hl.badges.text_of("d1").startswith("‖∇W‖")
    assert hl.wire_style(Edge("d1", "y", "d2", "x")).state == "flows"


def test_editing_the_definition_takes_the_runs_gradients_away(qtbot, tmp_path):
    window = make_window(qtbot, tmp_path, laid_out())
    backward(qtbot, window)
    open_instance(window, "d1")
    assert window.session.gradients is not None and window.session.gradients.ran
    window.document.set_attr("MatMul_1", "transpose_b", True)     # edits the definition
    QApplication.processEvents()
    assert window.session.results().stale
    assert window.session.gradients is None or not window.session.gradients.ran
    window.document.undo_stack.undo()
    QApplication.processEvents()
    qtbot.waitUntil(lambda: not window.session.results().stale, timeout=2000)


# ------------------------------------------------------------------------------- stepper
def test_the_stepper_shows_a_step_inside_a_closed_instance_on_it_and_offers_to_open_it(qtbot, tmp_path):
    window = make_window(qtbot, tmp_path, laid_out())
    backward(qtbot, window)
    stepper, hl = window.stepper, window.view.gradients
    window.docks["stepper"].raise_()
    index = next(i for i, s in enumerate(stepper.steps) if s.node == "d2/MatMul_1")
    stepper.go_to(index)
    QApplication.processEvents()
    assert hl.focused[0] == "d2"                      # the closed instance stands for its block
    assert stepper.open_button.isVisible() and stepper.open_button.text() == "Open d2"
    assert "main/d2/MatMul_1" in stepper.details.toPlainText()
    qtbot.mouseClick(stepper.open_button, Qt.LeftButton)
    QApplication.processEvents()
    assert window.document.location == Location("@Dense", "main", "d2")
    assert hl.focused[0] == "MatMul_1"                # the step on its own block now
    assert Edge("x", "output", "MatMul_1", "a") in hl.focused[2]
    assert not stepper.open_button.isVisible()
    # a step on the page, while d2 is open: offered to go back
    stepper.go_to(0)                                   # loss
    QApplication.processEvents()
    assert stepper.open_button.isVisible() and stepper.open_button.text() == "Go to main"


# ------------------------------------------------------------------------------- explain
def test_explain_on_an_inner_block_explains_it_at_its_level(qtbot, tmp_path):
    window = make_window(qtbot, tmp_path, laid_out())
    result = backward(qtbot, window)
    panel = window.gradient_panel
    window.docks["gradient"].raise_()
    click_node(qtbot, window.view, "d1")
    text = panel.text.toPlainText()
    assert "d1 · Dense (composite)" in text and "gradient arriving at output y" in text
    open_instance(window, "d1")
    click_node(qtbot, window.view, "MatMul_1")
    text = panel.text.toPlainText()
    assert panel.explanation is not None and panel.explanation.node == "d1/MatMul_1"
    assert "main/d1/MatMul_1" in text
    ie = next(i for i in panel.explanation.inputs if i.port == "b")
    np.testing.assert_array_equal(ie.result, result.edge_grads[Edge("d1/W", "ref", "d1/MatMul_1", "b")])
    report = panel.check()
    assert report.block_result is not None and report.block_result.passed
    assert report.page_result is not None and report.page_result.passed


# ------------------------------------------------------------------------------- problems
def test_a_problem_inside_an_instance_names_its_full_path_and_a_click_opens_it(qtbot, tmp_path):
    p = laid_out(share=False)
    p.composites["Dense"].page.nodes["MatMul_1"].attrs["transpose_a"] = "yes"
    window = make_window(qtbot, tmp_path, p)
    panel = window.problems
    qtbot.waitUntil(lambda: any("main/d2/MatMul_1" in panel.tree.topLevelItem(i).text(1)
                                for i in range(panel.tree.topLevelItemCount())), timeout=3000)
    item = next(panel.tree.topLevelItem(i) for i in range(panel.tree.topLevelItemCount())
                if panel.tree.topLevelItem(i).text(1).startswith("main/d2/MatMul_1"))
    rect = panel.tree.visualItemRect(item)
    qtbot.mouseClick(panel.tree.viewport(), Qt.LeftButton, Qt.NoModifier, rect.center())
    QApplication.processEvents()
    assert window.document.location == Location("@Dense", "main", "d2")
    assert window.view.selected_nodes() == ["MatMul_1"]


# ------------------------------------------------------------------------------- values
def test_the_values_panel_lists_flat_names_by_instance_and_shows_inner_blocks(qtbot, tmp_path):
    window = make_window(qtbot, tmp_path, laid_out(share=False))
    result = backward(qtbot, window)
    panel = window.value_viewer
    combo = panel.names_combo
    texts = [combo.itemText(i) for i in range(combo.count())]
    assert "— d1 (Dense)" in texts and "— d2 (Dense)" in texts
    assert texts.index("  d1/W") > texts.index("— d1 (Dense)")
    panel.show_flat("d2/W")
    np.testing.assert_array_equal(panel.shown_value(), result.values[("d2/W", "ref")])
    np.testing.assert_array_equal(panel.shown_gradient(), result.grads[("d2/W", "ref")])
    assert "main/d2/W" in panel.header.text()
    # a closed instance selected on the canvas: its output port
    click_node(qtbot, window.view, "d1")
    np.testing.assert_array_equal(panel.shown_value(), result.values[("d1/y", "output")])
    # inside d1, W is d1/W
    open_instance(window, "d1")
    click_node(qtbot, window.view, "W")
    np.testing.assert_array_equal(panel.shown_value(), result.values[("d1/W", "ref")])
    assert "main/d1/W" in panel.header.text()


# ------------------------------------------------------------------------------- training
def test_applying_training_routes_inner_variables_into_the_instance_in_one_undo_step(qtbot, tmp_path):
    window = make_window(qtbot, tmp_path, laid_out(share=False))
    doc = window.document
    w = np.full((3, 5), 0.25, np.float32)
    b = np.full((5,), -1.0, np.float32)
    before = dict(doc.page("main").nodes["d1"].state)
    skipped = doc.apply_training({"d1/W": {"value": w}, "d1/b": {"value": b}, "d2/nope": {"value": b}}, 3, "main")
    assert skipped == ["d2/nope"]
    state = doc.page("main").nodes["d1"].state
    np.testing.assert_array_equal(state["W:value"], w)
    np.testing.assert_array_equal(state["b:value"], b)
    np.testing.assert_array_equal(doc.program("main").variable_values.get("d1/W"), w)
    doc.undo_stack.undo()
    assert set(doc.page("main").nodes["d1"].state) == set(before)


# ------------------------------------------------------------------------------- render
def test_render_grad_draws_instances_with_boundary_colours_badges_and_values(tmp_path):
    from blockflow.gui.canvas.render import _drawn_scene, render_page
    from blockflow.gui.common.theme import Style
    from blockflow.registry import default_registry

    p = laid_out(share=False)
    scene, legend, _ = _drawn_scene(p.page("main"), default_registry(), Style(QApplication.instance().palette()),
                                    "run", None, p.composites)
    item = scene.node_items["d1"]
    assert item.results is not None and item.results.summaries["y"].shape_text.startswith("[4, 5]")
    wire = scene.edge_items[Edge("d1", "y", "d2", "x")]
    assert wire.grad_pen is not None and wire.grad_pen.widthF() > 2.0
    badges = [c for c in item.childItems() if hasattr(c, "badge")]
    assert badges and badges[0].text.startswith("‖∇W‖")
    out = tmp_path / "mlp.png"
    render_page(p, "main", out, gradients="run")
    assert out.stat().st_size > 1000


# ------------------------------------------------------------------------------- failures
def log_project():
    """X (fed -1) -> l1 (a composite taking the log) -> Sum: the run fails inside l1."""
    from blockflow.composite import Composite
    from blockflow.project import Project

    comp = Composite("LogOf", doc="y = log(x)")
    comp.page.add_node("Input", id="x", attrs={"name": "x", "dtype": "float32", "shape": [2]})
    comp.page.add_node("Log", id="Log_1", position=(200, 0))
    comp.page.add_node("Output", id="y", attrs={"name": "y"}, position=(400, 0))
    comp.page.connect("x", "output", "Log_1", "x")
    comp.page.connect("Log_1", "y", "y", "input")
    p = Project()
    p.composites["LogOf"] = comp
    page = p.add_page("main")
    page.add_node("Placeholder", id="X", attrs={"dtype": "float32", "shape": [2]})
    page.add_node(block_name("LogOf"), id="l1", position=(200, 0))
    page.add_node("Sum", id="s", position=(400, 0))
    page.connect("X", "output", "l1", "x")
    page.connect("l1", "y", "s", "input")
    page.feeds["X"] = np.array([-1.0, 2.0], np.float32)
    return p


def test_a_run_failing_inside_an_instance_marks_it_and_the_problem_opens_it(qtbot, tmp_path):
    window = make_window(qtbot, tmp_path, log_project())
    assert window.document.spec("@LogOf", "Log_1").outputs[0].name == "y"
    with qtbot.waitSignal(window.session.run_failed, timeout=5000) as blocker:
        qtbot.keyClick(window.view, Qt.Key_F5)
    QApplication.processEvents()
    message, node, _port = blocker.args
    assert node == "l1/Log_1" and "main/l1/Log_1" in message
    run = window.view.node_item("l1").results
    assert run is not None and "inside l1, at l1/Log_1" in run.error
    panel = window.problems
    item = panel.tree.topLevelItem(0)
    assert item.text(1) == "main/l1/Log_1"
    qtbot.mouseClick(panel.tree.viewport(), Qt.LeftButton, Qt.NoModifier, panel.tree.visualItemRect(item).center())
    QApplication.processEvents()
    assert window.document.location == Location("@LogOf", "main", "l1")
    assert window.view.selected_nodes() == ["Log_1"]
    inner = window.view.node_item("Log_1").results
    assert inner is not None and inner.error          # the block itself carries the error mark


def test_a_definition_opened_alone_is_checked_not_run(qtbot, tmp_path):
    window = make_window(qtbot, tmp_path, laid_out(share=False))
    window.document.set_current_page("@Dense")
    QApplication.processEvents()
    assert window.session.host == "@Dense"
    with qtbot.waitSignal(window.session.run_failed, timeout=3000) as blocker:
        window.session.forward()
    assert "checked, not run" in blocker.args[0] and "Open one of its instances" in blocker.args[0]
    assert window.session.results() is None


def test_the_train_panel_trains_instances_and_keeps_their_weights_in_them_undoably(qtbot, tmp_path):
    window = make_window(qtbot, tmp_path, laid_out(share=False))
    doc, panel = window.document, window.train_panel
    open_instance(window, "d1")                      # training from inside an instance trains its page
    w0 = np.array(doc.program("main").variable_values.get("d1/W"))
    panel.steps.setValue(15)
    with qtbot.waitSignal(panel.training_finished, timeout=20000) as done:
        assert panel.start()
    assert done.args == [False] and panel.training_page == "main"
    state = doc.page("main").nodes["d1"].state
    assert "W:value" in state and not np.allclose(state["W:value"], w0)
    np.testing.assert_array_equal(doc.program("main").variable_values.get("d1/W"), state["W:value"])
    assert doc.undo_stack.undoText().startswith("Train 15 steps")
    doc.undo_stack.undo()                            # one step takes every instance's values back
    assert doc.page("main").nodes["d1"].state == {} and doc.page("main").nodes["d2"].state == {}
    doc.undo_stack.redo()
    panel.reset_variables()
    assert doc.page("main").nodes["d1"].state == {}  # Reset Variables forgets instances' values too
