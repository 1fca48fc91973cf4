"""Teaching reverse mode in the editor: the backward stepper, the Gradient dock's explanation of
a block, and Check Gradients; driven through the real widgets (buttons, keys, canvas clicks)."""
from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import QPoint, QSettings, Qt
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QApplication, QMessageBox

from blockflow.present.gradview import GradientView
from blockflow.gui.document.document import Document
from blockflow.gui.panels.explain import GradientPanel
from blockflow.gui.panels.gradtext import format_array
from blockflow.gui.panels.stepper import BackwardStepper
from blockflow.gui.session.session import Session
from blockflow.gui.main_window import MainWindow
from blockflow.project import Project
from blockflow.io.project_io import load_project
from blockflow.registry import Registry
from blockflow.run.runtime import run
from blockflow_blocks import all_blocks

from diagrams import chain
from test_gradcheck import _square

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_projects" / "stable_softmax.bflow.json"


# ------------------------------------------------------------------------------- set-up
@pytest.fixture(autouse=True)
def app_font_and_no_prompts(qapp, monkeypatch):
    qapp.setFont(QFont("DejaVu Sans", 9))
    # closing an edited window asks whether to save: answer Discard instead of blocking
    monkeypatch.setattr(QMessageBox, "question", staticmethod(lambda *a, **k: QMessageBox.Discard))


def make_window(qtbot, tmp_path, document, size=(1500, 900)) -> MainWindow:
    window = MainWindow(document, QSettings(str(tmp_path / "settings.ini"), QSettings.IniFormat))
    qtbot.addWidget(window)
    window.resize(*size)
    window.show()
    qtbot.waitExposed(window)
    window.activateWindow()
    QApplication.processEvents()
    window.view.fit_to_view()
    return window


def two_branches() -> Project:
    """x feeds Tanh and Square; both are added and summed into the loss: x's gradient adds up."""
    project = chain(("x", "Placeholder", {"shape": [3]}, None),
                    ("t", "Tanh", {}, {"x": "x"}),
                    ("q", "Square", {}, {"x": "x"}),
                    ("a", "Add", {}, {"x": "t", "y": "q"}),
                    ("L", "Sum", {}, {"input": "a"}),
                    feeds={"x": np.array([0.5, -1.0, 2.0], np.float32)})
    project.pages[0].loss = "L"
    return project


def backward(window):
    """A recorded backward run of the window's page, shown as the session's gradients (on the canvas,
    in the stepper and the Gradient dock, as the Run menu does)."""
    program = window.document.program()
    result = run(program, target=None if program.loss is None else f"{program.loss[0]}", record=True,
                 commit=False)
    window.session.show_gradients(GradientView(program, result=result))
    QApplication.processEvents()
    return program, result


class FocusSpy:
    """Records every view.gradients.focus call (the stepper's steps, shown by the shell) and passes it on."""

    def __init__(self, monkeypatch, gradients):
        self.calls = []
        real = gradients.focus

        def focus(node, incoming, outgoing):
            self.calls.append((node, list(incoming), list(outgoing)))
            return real(node, incoming, outgoing)

        monkeypatch.setattr(gradients, "focus", focus)

    @property
    def last(self):
        return self.calls[-1]


def click(qtbot, button):
    assert button.isEnabled(), button.toolTip()
    qtbot.mouseClick(button, Qt.LeftButton)


def click_node(qtbot, view, node: str, modifier=Qt.NoModifier) -> None:
    rect = view.node_item(node).sceneBoundingRect()
    qtbot.mouseClick(view.viewport(), Qt.LeftButton, modifier, view.mapFromScene(rect.center()))
    assert node in view.selected_nodes() and (modifier != Qt.NoModifier or len(view.selected_nodes()) == 1)


def shown(stepper) -> str:
    return stepper.details.toPlainText()


def check_step_against_runtime(stepper, result, page):
    """The step the stepper holds and shows has the runtime's numbers, wire by wire."""
    step = stepper.current_step
    text = shown(stepper)
    assert step.arriving, step.node
    for port, g in step.arriving.items():
        np.testing.assert_array_equal(g, result.grads[(step.node, port)])
        full = format_array(result.grads[(step.node, port)])
        if np.size(g) > 1:
            assert full in text, (step.node, full)
    for edge, g in step.sent:
        assert edge.dst == step.node
        np.testing.assert_array_equal(g, result.edge_grads[edge])
        if np.size(g) > 1:
            assert format_array(result.edge_grads[edge]) in text
    # the wires it emphasises: its output wires (gradient arriving) and its input wires (sent)
    incoming = sorted(e for e in page.edges if e.src == step.node)
    outgoing = sorted(e for e, _ in step.sent)
    assert all(e.dst == step.node for e in outgoing)
    return incoming, outgoing


# ------------------------------------------------------------------------------- the stepper
def test_the_stepper_walks_two_branches_in_reverse_schedule_order_with_the_runtime_numbers(
        qtbot, tmp_path, monkeypatch):
    window = make_window(qtbot, tmp_path, Document(two_branches()))
    stepper = window.stepper
    assert window.docks["stepper"].objectName() == "stepperDock"
    assert "Run Backward (Shift+F5)" in shown(stepper) and not stepper.next_button.isEnabled()
    program, result = backward(window)
    spy = FocusSpy(monkeypatch, window.view.gradients)
    page = window.document.page()
    schedule = [st.node for st in program.steps]
    n = len(schedule)
    assert stepper.position_label.text() == f"{n} steps back from L"

    visited = []
    for k in range(n):
        click(qtbot, stepper.next_button)
        step = stepper.current_step
        visited.append(step.node)
        assert stepper.position_label.text().startswith(f"Step {k + 1} of {n}: {step.node}")
        incoming, outgoing = check_step_against_runtime(stepper, result, page)
        assert spy.last[0] == step.node
        assert sorted(spy.last[1]) == incoming and sorted(spy.last[2]) == outgoing
        assert stepper.step_list.currentRow() == k
    # every block of this diagram gets a gradient: the walk is the whole schedule, reversed
    assert visited == list(reversed(schedule)) and visited[0] == "L" and visited[-1] == "x" and len(visited) == 5
    assert not stepper.next_button.isEnabled()

    # x is the leaf where the two branches' gradients add up
    text = shown(stepper)
    assert "the sum of what 2 wires bring back" in text and "final gradient of the target L" in text
    assert sorted(spy.last[1]) == sorted(e for e in page.edges if e.src == "x") and len(spy.last[1]) == 2
    assert spy.last[2] == []
    x = np.array([0.5, -1.0, 2.0])
    np.testing.assert_allclose(stepper.current_step.arriving["output"], 1 - np.tanh(x) ** 2 + 2 * x, rtol=1e-6)
    for e in spy.last[1]:
        assert format_array(result.edge_grads[e]) in text

    click(qtbot, stepper.prev_button)
    assert stepper.current_step.node == visited[-2] and spy.last[0] == visited[-2]
    click(qtbot, stepper.first_button)
    assert stepper.current_step.node == "L" and "the target" in shown(stepper)
    assert spy.last == ("L", [], sorted(e for e in page.edges if e.dst == "L"))
    click(qtbot, stepper.last_button)
    assert stepper.current_step.node == "x"
    list_view = stepper.step_list
    row = list_view.visualItemRect(list_view.item(1))
    qtbot.mouseClick(list_view.viewport(), Qt.LeftButton, Qt.NoModifier, row.center())
    assert stepper.index == 1 and spy.last[0] == "a" and stepper.position_label.text().startswith("Step 2 of 5: a")
    click(qtbot, stepper.stop_button)
    assert stepper.index == -1 and spy.last == (None, [], [])


def test_keys_step_through_the_stable_softmax_sample_and_the_cut_is_explained(qtbot, tmp_path, monkeypatch):
    window = make_window(qtbot, tmp_path, Document(load_project(SAMPLE)))
    program, result = backward(window)
    spy = FocusSpy(monkeypatch, window.view.gradients)
    stepper = window.stepper
    window.docks["stepper"].raise_()
    stepper.setFocus()
    qtbot.waitUntil(stepper.hasFocus)
    page = window.document.page()

    visited = []
    for _ in range(len(stepper.steps)):
        qtbot.keyClick(stepper, Qt.Key_Right)
        visited.append(stepper.current_step.node)
        check_step_against_runtime(stepper, result, page)
        assert spy.last[0] == visited[-1]
    qtbot.keyClick(stepper, Qt.Key_Right)          # past the end: stays on the last step
    assert stepper.current_step.node == visited[-1]
    # reverse schedule order; Max_1 gets no gradient (StopGradient cuts it off), so no step
    schedule = [st.node for st in program.steps]
    assert visited == [n for n in reversed(schedule) if n != "Max_1"]
    assert visited == ["Sum_1", "Multiply_1", "Softmax_1", "Subtract_1", "StopGradient_1", "w", "x"]

    while stepper.current_step.node != "StopGradient_1":
        qtbot.keyClick(stepper, Qt.Key_Left)
    text = shown(stepper)
    assert "Nothing" in text and "constant going backward" in text
    assert "nothing flows back to Max_1, x" in text            # GradientView.cut_summary
    assert spy.last == ("StopGradient_1", [e for e in page.edges if e.src == "StopGradient_1"], [])
    qtbot.keyClick(stepper, Qt.Key_Left)
    assert stepper.current_step.node == "Subtract_1"
    assert "dy = −unbroadcast(g)" in shown(stepper)             # the block's rule text
    qtbot.keyClick(stepper, Qt.Key_Home)
    assert stepper.index == 0
    qtbot.keyClick(stepper, Qt.Key_End)
    assert stepper.current_step.node == "x" and "final gradient of the target Sum_1" in shown(stepper)
    # the keys work while a control of the dock has focus, too
    stepper.step_list.setFocus()
    qtbot.keyClick(stepper.step_list, Qt.Key_Left)
    assert stepper.current_step.node == "w"
    qtbot.keyClick(stepper.step_list, Qt.Key_Escape)
    assert stepper.index == -1 and spy.last == (None, [], [])


def test_play_advances_on_a_timer_at_the_chosen_speed_and_pause_stops(qtbot, tmp_path, monkeypatch):
    window = make_window(qtbot, tmp_path, Document(load_project(SAMPLE)))
    backward(window)
    spy = FocusSpy(monkeypatch, window.view.gradients)
    stepper = window.stepper
    stepper.speed_slider.setValue(stepper.speed_slider.maximum())
    assert stepper.speed() == 10.0 and stepper.speed_label.text() == "10 steps/s"
    stepper.speed_slider.setValue(stepper.speed_slider.minimum())
    assert stepper.speed() == 0.5
    stepper.set_speed(10)

    click(qtbot, stepper.play_button)
    assert stepper.playing and stepper.timer.interval() == 100 and stepper.play_button.text() == "Pause"
    assert stepper.index == 0
    qtbot.waitUntil(lambda: stepper.index >= 2, timeout=2000)
    click(qtbot, stepper.play_button)                    # Pause
    assert not stepper.playing and stepper.play_button.text() == "Play"
    paused_at, calls = stepper.index, len(spy.calls)
    qtbot.wait(350)
    assert stepper.index == paused_at and len(spy.calls) == calls

    stepper.setFocus()
    qtbot.keyClick(stepper, Qt.Key_Space)                 # Play again, with the key
    assert stepper.playing
    qtbot.waitUntil(lambda: not stepper.playing, timeout=3000)   # it stops by itself at the end
    assert stepper.index == len(stepper.steps) - 1
    assert [c[0] for c in spy.calls[calls:]] == [s.node for s in stepper.steps[paused_at + 1:]]


def test_the_canvas_follows_a_step_to_an_off_screen_block_and_stays_put_otherwise(qtbot, tmp_path):
    window = make_window(qtbot, tmp_path, Document(load_project(SAMPLE)))
    backward(window)
    view, stepper = window.view, window.stepper

    def visible():
        return view.mapToScene(view.viewport().rect()).boundingRect()

    click(qtbot, stepper.next_button)                  # Sum_1: on screen in the fitted view
    before = visible()
    assert before.contains(view.node_item("Sum_1").sceneBoundingRect())
    click(qtbot, stepper.next_button)
    assert visible() == before                         # Multiply_1 was on screen: no jump

    view.reset_zoom()
    view.zoom_in()
    view.centerOn(view.node_item("Sum_1").sceneBoundingRect().center())
    QApplication.processEvents()
    far = view.node_item("x").sceneBoundingRect()
    assert not visible().contains(far)
    click(qtbot, stepper.last_button)                   # x, the leaf, far to the left
    assert stepper.current_step.node == "x"
    assert visible().contains(far)


def test_the_stepper_empties_with_a_hint_when_the_gradients_go_and_leaves_when_closed(
        qtbot, tmp_path, monkeypatch):
    window = make_window(qtbot, tmp_path, Document(load_project(SAMPLE)))
    stepper, gradients, session = window.stepper, window.view.gradients, window.session
    program = window.document.program()
    session.show_gradients(GradientView(program))        # static paths: nothing to step through
    QApplication.processEvents()
    assert stepper.steps == [] and "Run Backward (Shift+F5) to step through it" in shown(stepper)
    assert not stepper.play_button.isEnabled()
    backward(window)
    spy = FocusSpy(monkeypatch, gradients)
    click(qtbot, stepper.next_button)
    click(qtbot, stepper.next_button)
    assert stepper.index == 1
    session.clear_gradients()
    QApplication.processEvents()
    assert stepper.steps == [] and stepper.index == -1 and "Run Backward" in shown(stepper)
    assert spy.last == (None, [], [])

    backward(window)
    click(qtbot, stepper.next_button)
    assert spy.last[0] == "Sum_1"
    window.docks["stepper"].close()                      # closing the dock leaves stepping
    assert stepper.index == -1 and spy.last == (None, [], [])


def test_the_stepper_works_from_the_session_alone_and_asks_the_shell_to_show_its_steps(qtbot):
    """No window and no canvas: the steps are the session's gradient view's, and each step is
    asked for on the canvas through focus_requested (the shell connects it)."""
    doc = Document(two_branches())
    session = Session(doc)
    stepper = BackwardStepper(doc, session)
    qtbot.addWidget(stepper)
    asked = []
    stepper.focus_requested.connect(lambda node, inc, out: asked.append((node, sorted(inc), sorted(out))))
    assert stepper.steps == [] and "Run Backward (Shift+F5)" in shown(stepper)
    with qtbot.waitSignal(session.run_finished, timeout=5000):
        session.backward()
    result = session.last_result
    assert stepper.gview is session.gradients and stepper.gview.result is result
    assert stepper.position_label.text() == "5 steps back from L"
    for k in range(len(stepper.steps)):
        stepper.next()
        incoming, outgoing = check_step_against_runtime(stepper, result, doc.page())
        assert asked[-1] == (stepper.current_step.node, incoming, outgoing) and len(asked) == k + 1
    assert [a[0] for a in asked] == [s.node for s in stepper.steps] and asked[-1][0] == "x"
    session.clear()                                     # the gradients go: stepping ends
    assert stepper.steps == [] and stepper.index == -1 and asked[-1] == (None, [], [])


def test_the_gradient_panel_works_from_the_session_alone(qtbot):
    """No window and no canvas: the panel explains the session's selection in the session's
    gradient view, and checks at the session's last run."""
    doc = Document(two_branches())
    session = Session(doc)
    panel = GradientPanel(doc, session)
    qtbot.addWidget(panel)
    session.set_selection(["a"])
    assert panel.node == "a" and "no gradient to explain yet" in panel.text.toPlainText()
    with qtbot.waitSignal(session.run_finished, timeout=5000):
        session.backward()
    result = session.last_result
    assert panel.explanation is not None and panel.explanation.node == "a"
    text = panel.text.toPlainText()
    assert "Input x from t.y" in text and "Input y from q.y" in text
    for ie in panel.explanation.inputs:                  # what it sends back: the runtime's numbers
        np.testing.assert_array_equal(ie.result, result.edge_grads[ie.edge])
    assert panel.context() == ("L:output", result, False)
    report = panel.check()
    assert report.passed and rows(panel) == [("page", "x", True), ("block", "x", True), ("block", "y", True)]
    session.set_selection(["t", "q"])
    assert panel.explanation is None and "Select only one block" in panel.text.toPlainText()
    session.set_selection([])
    assert "Select one block" in panel.text.toPlainText()
    session.set_selection(["x"])
    doc.set_feed("x", np.array([1.0, 2.0, 3.0], np.float32))     # the run's gradients go with the edit
    assert session.gradients is None and "no gradient to explain yet" in panel.text.toPlainText()


def test_closed_teaching_panels_leave_no_connection_to_the_document(qtbot):
    """The document may outlive a window: once the stepper and the Gradient panel are gone, later
    edits, page switches and a new project reach neither (no "already deleted" error)."""
    import shiboken6
    from PySide6.QtCore import QEvent
    from PySide6.QtWidgets import QWidget

    doc = Document(load_project(SAMPLE))
    session = Session(doc)
    host = QWidget()
    stepper, panel = BackwardStepper(doc, session, host), GradientPanel(doc, session, host)
    program = doc.program()
    session.show_gradients(GradientView(program, result=run(program, target="Sum_1", record=True, commit=False)))
    session.set_selection(["Subtract_1"])
    assert stepper.steps and panel.explanation is not None
    host.deleteLater()
    QApplication.sendPostedEvents(None, QEvent.DeferredDelete)
    assert not shiboken6.isValid(stepper) and not shiboken6.isValid(panel)
    other = next(p.name for p in doc.project.pages if p.name != doc.current_page)
    doc.set_current_page(other)
    doc.add_node("Softmax", (0, 0))
    session.set_selection(["Softmax_1"])
    doc.new()


# ------------------------------------------------------------------------------- the explanation
def test_the_gradient_dock_explains_the_block_clicked_on_the_canvas(qtbot, tmp_path):
    window = make_window(qtbot, tmp_path, Document(load_project(SAMPLE)))
    panel, view = window.gradient_panel, window.view
    window.docks["gradient"].raise_()
    click_node(qtbot, view, "Subtract_1")
    assert "Run Backward (Shift+F5)" in panel.text.toPlainText()      # no gradient view yet
    window.session.show_gradients(GradientView(window.document.program()))  # paths only: no numbers
    text = panel.text.toPlainText()
    assert "Gradient paths only" in text and text.count("flows here") == 2 and "dx = unbroadcast(g)" in text
    program, result = backward(window)
    text = panel.text.toPlainText()
    assert panel.explanation is not None and panel.explanation.node == "Subtract_1"
    assert "stable_softmax/Subtract_1" in text and "Subtract" in text
    assert "Input x from x.output" in text and "Input y from StopGradient_1.output" in text
    assert "dx = unbroadcast(g)" in text and "dy = −unbroadcast(g)" in text
    g = result.grads[("Subtract_1", "z")]
    assert text.count(format_array(g)) >= 3            # g for both inputs, and x's result (= g)
    assert format_array(result.values[("x", "output")]) in text           # x's value in full
    edges = {e.dst_port: e for e in window.document.page().edges if e.dst == "Subtract_1"}
    for port, edge in edges.items():
        sent = result.edge_grads[edge]
        ie = next(i for i in panel.explanation.inputs if i.port == port)
        np.testing.assert_array_equal(ie.result, sent)
    # y's result is a scalar: shown in its summary line
    assert re.search(r"result → StopGradient_1\s+scalar float32 = ", text)

    click_node(qtbot, view, "Max_1")
    text = panel.text.toPlainText()
    assert "Input input from x.output" in text
    assert "no gradient" in text and "gradient is cut by StopGradient_1" in text
    assert "No gradient of Sum_1 arrives at Max_1: its outputs lead to Sum_1 only through StopGradient_1, which cuts the gradient" in text

    click_node(qtbot, view, "StopGradient_1")
    text = panel.text.toPlainText()
    gview = view.gradients.current
    assert gview.cut_summary("StopGradient_1") in text
    assert "sends no gradient back" in text                           # its rule text

    click_node(qtbot, view, "x")                                       # the leaf: its final gradient
    text = panel.text.toPlainText()
    assert "final gradient of Sum_1" in text and format_array(result.grads[("x", "output")]) in text

    click_node(qtbot, view, "Max_1", Qt.ControlModifier)               # two blocks: nothing to explain
    assert len(view.selected_nodes()) == 2 and "Select only one block" in panel.text.toPlainText()
    qtbot.mouseClick(view.viewport(), Qt.LeftButton, Qt.NoModifier, QPoint(5, 5))
    assert view.selected_nodes() == [] and "Select one block" in panel.text.toPlainText()


# ------------------------------------------------------------------------------- gradient checks
def wrong_square_project():
    """x (fed) * w (a Variable) -> Square (a deliberately wrong rule) -> Sum, with its registry."""
    registry = Registry([b for b in all_blocks() if b.name != "Square"] + [_square(wrong=True)])
    project = Project()
    page = project.add_page("main")
    page.add_node("Placeholder", id="x", attrs={"shape": [4]}, position=(0, 0))
    page.add_node("Variable", id="w", attrs={"shape": [4]}, position=(0, 150),
                  state={"value": np.array([0.5, -1.0, 2.0, 0.1], np.float32)})
    page.add_node("Multiply", id="m", position=(220, 60))
    page.add_node("Square", id="s", position=(440, 60))
    page.add_node("Sum", id="L", position=(660, 60))
    page.connect("x", "output", "m", "x")
    page.connect("w", "ref", "m", "y")
    page.connect("m", "z", "s", "x")
    page.connect("s", "y", "L", "input")
    page.loss = "L"
    page.feeds["x"] = np.array([1.0, 2.0, -3.0, 0.5], np.float32)
    return project, registry


def rows(panel):
    return [(label.split()[0], e.name, e.passed) for label, e, _ in panel.report.rows]


def test_check_gradients_passes_on_the_sample_page_and_the_selected_block(qtbot, tmp_path):
    window = make_window(qtbot, tmp_path, Document(load_project(SAMPLE)))
    panel = window.gradient_panel
    backward(window)
    click_node(qtbot, window.view, "Subtract_1")
    qtbot.keyClick(window.view, Qt.Key_G, Qt.ControlModifier | Qt.AltModifier)
    report = panel.report
    assert report is not None and report.passed
    assert rows(panel) == [("page", "x", True), ("block", "x", True), ("block", "y", True)]
    assert report.page_result.rtol == 1e-5 and report.block_result.worst.error < 1e-6
    assert report.seconds < 1.0                                    # synchronous is fine
    text = panel.check_view.toPlainText()
    assert text.count("✓") == 2 + 3 + 1 and "✗" not in text and "Overall: ✓ passed" in text
    assert "Page stable_softmax, gradient of Sum_1" in text and "Block Subtract_1" in text
    assert report.cut_paths == {"x": ("StopGradient_1",)}      # x -> Max_1 -> StopGradient_1 is cut...
    assert "matches although a path is cut: what it would add is zero here" in text   # ...and adds 0
    assert window.docks["gradient"].isVisible()
    assert "Gradient check passed" in window.statusBar().currentMessage()

    click_node(qtbot, window.view, "StopGradient_1")       # no rule to check: said so, page still checked
    window.actions["check_gradients"].trigger()
    assert rows(panel) == [("page", "x", True)]
    assert "StopGradient_1 (StopGradient) has no gradient rule to check" in panel.check_view.toPlainText()


def test_a_check_shown_says_it_is_of_the_page_as_it_was_once_the_page_is_edited(qtbot, tmp_path):
    """Check Gradients keeps its verdict on screen after an edit, saying it no longer holds
    (issue 16); a new check says it of the page as it is."""
    window = make_window(qtbot, tmp_path, Document(load_project(SAMPLE)))
    panel = window.gradient_panel
    backward(window)
    window.actions["check_gradients"].trigger()
    assert panel.report.passed and "edited since" not in panel.check_view.toPlainText()
    click_node(qtbot, window.view, "Subtract_1")
    window.actions["delete"].trigger()                     # an edit of what was checked
    text = panel.check_view.toPlainText()
    assert "The page was edited since this check" in text and "Overall: ✓ passed" in text
    window.actions["undo"].trigger()
    backward(window)
    window.actions["check_gradients"].trigger()
    assert "edited since" not in panel.check_view.toPlainText()


def test_check_gradients_fails_on_a_page_with_a_wrong_block_rule(qtbot, tmp_path):
    project, registry = wrong_square_project()
    window = make_window(qtbot, tmp_path, Document(project, registry=registry))
    panel = window.gradient_panel
    backward(window)
    click_node(qtbot, window.view, "s")
    click(qtbot, panel.check_button)
    report = panel.report
    assert not report.passed
    assert rows(panel) == [("page", "x", False), ("page", "w", False), ("block", "x", False)]
    for _, e, _ in report.rows:                   # the wrong rule forgets the factor 2
        assert e.numeric == pytest.approx(2 * e.analytic, rel=1e-6)
    text = panel.check_view.toPlainText()
    assert text.count("✗") == 2 + 3 + 1 and "Overall: ✗ FAILED" in text
    assert "2 of 2 gradients (x, w) do not match" in text and report.cut_paths == {}
    assert not report.only_cuts_differ

    click_node(qtbot, window.view, "m")            # Multiply's own rule is right
    click(qtbot, panel.check_button)
    assert rows(panel) == [("page", "x", False), ("page", "w", False), ("block", "x", True), ("block", "y", True)]


def test_where_a_stop_gradient_cuts_a_path_the_check_says_the_difference_is_the_cut(qtbot, tmp_path):
    """L = Sum(x * StopGradient(x)): the runtime's dL/dx is x, the function's derivative 2x."""
    project = chain(("x", "Placeholder", {"shape": [3]}, None),
                    ("s", "StopGradient", {}, {"input": "x"}),
                    ("m", "Multiply", {}, {"x": "x", "y": "s"}),
                    ("L", "Sum", {}, {"input": "m"}),
                    feeds={"x": np.array([0.5, -1.0, 2.0], np.float32)})
    project.pages[0].loss = "L"
    window = make_window(qtbot, tmp_path, Document(project))
    window.document.auto_layout()                 # the blocks were all made at (0, 0)
    window.view.fit_to_view()
    panel = window.gradient_panel
    backward(window)
    click(qtbot, panel.check_button)
    report = panel.report
    assert not report.passed and report.cut_paths == {"x": ("s",)} and report.only_cuts_differ
    (_, e, _), = report.rows
    assert e.numeric == pytest.approx(2 * e.analytic, rel=1e-6)
    text = panel.check_view.toPlainText()
    assert "where s (StopGradient) cuts the gradient" in text and "a cut path, left out of the gradient" in text
    assert "differs only where gradients are cut" in text and "FAILED" not in text
    click_node(qtbot, window.view, "m")           # Multiply's own rule is right
    click(qtbot, panel.check_button)
    assert rows(panel) == [("page", "x", False), ("block", "x", True), ("block", "y", True)]
    assert panel.report.only_cuts_differ


def test_check_gradients_says_why_when_there_is_no_loss_or_the_page_does_not_compile(qtbot, tmp_path):
    project = two_branches()
    project.pages[0].loss = None
    window = make_window(qtbot, tmp_path, Document(project))
    panel, doc = window.gradient_panel, window.document
    # no loss, but a scalar output the Backward target falls back on: checked, and said so
    click(qtbot, panel.check_button)
    assert panel.report.passed and panel.report.target == "L:output"
    assert "marks no loss; checked the gradient of the Backward target L:output" in panel.check_view.toPlainText()
    # nothing scalar to differentiate at all
    doc.remove_nodes(["L"])
    click(qtbot, panel.check_button)
    assert panel.report.results == [] and not panel.report.passed
    assert "marks no loss" in panel.check_view.toPlainText()
    assert "Overall" not in panel.check_view.toPlainText()

    doc.undo_stack.undo()
    doc.set_loss("L")
    doc.disconnect([e for e in doc.page().edges if e.dst == "a"])
    click(qtbot, panel.check_button)
    assert panel.report.results == []
    assert "does not compile" in panel.check_view.toPlainText()


# ------------------------------------------------------------------------------- window
def test_the_teaching_docks_are_in_the_panels_menu_and_their_layout_is_remembered(qtbot, tmp_path):
    first = make_window(qtbot, tmp_path, Document())
    assert first.docks["gradient"].objectName() == "gradientDock"
    assert first.actions["check_gradients"].shortcut().toString() == "Ctrl+Alt+G"
    for key in ("stepper", "gradient"):
        assert first.actions["show_" + key].text() == first.docks[key].windowTitle()
    first.removeDockWidget(first.docks["stepper"])
    first.addDockWidget(Qt.LeftDockWidgetArea, first.docks["stepper"])
    first.docks["stepper"].show()
    first.docks["gradient"].hide()
    QApplication.processEvents()
    first.close()
    second = MainWindow(Document(), QSettings(str(tmp_path / "settings.ini"), QSettings.IniFormat))
    qtbot.addWidget(second)
    second.show()
    qtbot.waitExposed(second)
    assert second.dockWidgetArea(second.docks["stepper"]) == Qt.LeftDockWidgetArea
    assert second.docks["gradient"].isHidden() and not second.docks["stepper"].isHidden()


def run_backward_from_the_menu(qtbot, window):
    """Run > Backward (Shift+F5) through the run controls, as a user does; wait for the stepper."""
    with qtbot.waitSignal(window.run_controller.run_finished, timeout=5000):
        window.actions["run_backward"].trigger()
    qtbot.waitUntil(lambda: bool(window.stepper.steps), timeout=2000)


def test_a_backward_run_from_the_run_menu_feeds_the_stepper_and_the_checks(qtbot, tmp_path):
    window = make_window(qtbot, tmp_path, Document(load_project(SAMPLE)))
    run_backward_from_the_menu(qtbot, window)
    stepper, panel, rc = window.stepper, window.gradient_panel, window.run_controller
    result = rc.last_result
    assert stepper.gview.result is result
    assert [s.node for s in stepper.steps] == [s.node for s in GradientView(result.program, result=result).steps]
    click(qtbot, stepper.next_button)
    np.testing.assert_array_equal(stepper.current_step.arriving["output"], result.grads[("Sum_1", "output")])

    click_node(qtbot, window.view, "Softmax_1")
    assert panel.explanation.node == "Softmax_1"
    window.actions["check_gradients"].trigger()
    assert rows(panel) == [("page", "x", True), ("block", "logits", True)]
    # an edit makes the last run stale: the block is not checked at inputs that are gone
    window.document.set_inline("Max_1", "axis", np.array(0))
    QApplication.processEvents()
    assert rc.results_stale and stepper.steps == []       # the highlighter dropped the run's gradients
    window.actions["check_gradients"].trigger()
    assert rows(panel) == [("page", "x", True)]
    assert "The page changed since the last run" in panel.check_view.toPlainText()


def test_screenshot_of_the_stepper_on_the_sample(qtbot, tmp_path):
    window = make_window(qtbot, tmp_path, Document(load_project(SAMPLE)), size=(1600, 1000))
    run_backward_from_the_menu(qtbot, window)
    stepper = window.stepper
    for _ in range(4):
        click(qtbot, stepper.next_button)
    assert stepper.current_step.node == "Subtract_1"
    # as a teacher would arrange it: the stepper tall, the inspector small
    window.resizeDocks([window.docks["inspector"], window.docks["stepper"]], [150, 800], Qt.Vertical)
    window.view.fit_to_view()
    QApplication.processEvents()
    image = window.grab().toImage()
    assert image.save(str(tmp_path / "stepper.png"))
    if os.environ.get("BLOCKFLOW_UPDATE_SCREENSHOT"):
        image.save(str(ROOT / "docs" / "stepper.png"))
    # the dock is on screen, big enough to read, and shows the step on the emphasised canvas
    dock = window.docks["stepper"]
    assert dock.isVisible() and dock.width() >= 280 and dock.height() >= 300
    assert stepper.position_label.text() == "Step 4 of 7: Subtract_1 (Subtract)"
    assert window.view.gradients.focused[0] == "Subtract_1"
