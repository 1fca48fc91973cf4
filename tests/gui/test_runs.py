"""Running a page in the editor like a user: F5 / Shift+F5 and the Run menu, results on every
block, the value viewer with the gradient beside the value, staleness after edits, runs off the
UI thread, a failed run marked on its block, and Placeholder feeds loaded from files."""
from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import QCoreApplication, QPoint, QSettings, Qt, QThread
from PySide6.QtGui import QColor, QFont
from PySide6.QtWidgets import QApplication, QFileDialog, QMessageBox

from blockflow.compile.compiler import compile_page
from blockflow.gui.document.document import Document
from blockflow.feeds import read_feed_file
from blockflow.gui.main_window import MainWindow
from blockflow.present.values import MAX_CELLS, MAX_POINTS, describe, format_number, summarize
from blockflow.gui.common.heatmap import rgba_image
from blockflow.io.project_io import dumps_project, load_project, loads_project
from blockflow.run.runtime import run

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_projects" / "stable_softmax.bflow.json"


# ------------------------------------------------------------------------------- fixtures


@pytest.fixture(autouse=True)
def dialogs(monkeypatch, qapp):
    """No modal dialog ever opens: closing discards, the file dialog answers ``dialogs.open_path``."""
    qapp.setFont(QFont("DejaVu Sans", 9))

    class Answers:
        open_path = ""
        opened = 0

    def get_open(*args, **kw):
        Answers.opened += 1
        return Answers.open_path, ""

    monkeypatch.setattr(QFileDialog, "getOpenFileName", staticmethod(get_open))
    monkeypatch.setattr(QMessageBox, "question", staticmethod(lambda *a, **k: QMessageBox.Discard))
    return Answers


def make_window(qtbot, tmp_path, project=None):
    doc = Document(project or load_project(SAMPLE))
    window = MainWindow(doc, QSettings(str(tmp_path / "settings.ini"), QSettings.IniFormat))
    qtbot.addWidget(window)
    window.resize(1500, 900)
    window.show()
    qtbot.waitExposed(window)
    window.activateWindow()              # shortcuts (F5) need the active window
    window.view.setFocus()
    qtbot.waitUntil(window.isActiveWindow, timeout=2000)
    window.view.fit_to_view()
    QApplication.processEvents()
    return window


@pytest.fixture
def window(qtbot, tmp_path):
    return make_window(qtbot, tmp_path)


def press_run(qtbot, window, backward=False, signal="run_finished"):
    """F5 (Shift+F5) on the canvas; returns the signal's arguments once the run has delivered."""
    rc = window.run_controller
    with qtbot.waitSignal(getattr(rc, signal), timeout=5000) as blocker:
        qtbot.keyClick(window.view, Qt.Key_F5, Qt.ShiftModifier if backward else Qt.NoModifier)
    assert not rc.busy
    return blocker.args


def click_node(qtbot, view, node: str) -> None:
    item = view.node_item(node)
    centre = item.sceneBoundingRect().center()
    qtbot.mouseClick(view.viewport(), Qt.LeftButton, Qt.NoModifier, view.mapFromScene(centre))
    assert view.selected_nodes() == [node]


def direct_run(doc, page=None, target=None):
    return run(compile_page(doc.page(page), doc.registry), target=target, record=True, commit=False)


def result_area_colours(window, node: str) -> int:
    """Distinct colours in a block's result area as drawn on screen."""
    view = window.view
    item = view.node_item(node)
    rect = item.mapRectToScene(item.result_rect)
    area = view.mapFromScene(rect).boundingRect().adjusted(2, 2, -2, -2)
    image = view.viewport().grab(area).toImage()
    return len({image.pixel(x, y) for y in range(image.height()) for x in range(image.width())})


# ------------------------------------------------------------------------------- forward


def test_forward_fills_every_block_with_the_runtimes_values_on_a_worker_thread(qtbot, window):
    doc, view, rc = window.document, window.view, window.run_controller
    view.reset_zoom()
    view.centerOn(view.node_item("Softmax_1").sceneBoundingRect().center())
    QApplication.processEvents()
    before = dumps_project(doc.project)
    empty_area = result_area_colours(window, "Softmax_1")
    threads = []
    rc.job_hook = lambda job: threads.append(
        (threading.get_ident(), QThread.currentThread() is not QCoreApplication.instance().thread()))
    started = []
    rc.run_started.connect(started.append)

    (result,) = press_run(qtbot, window)

    assert started == ["forward"] and result is rc.last_result and rc.last_error is None
    assert threads and threads[0][0] != threading.get_ident() and threads[0][1]   # not the UI thread
    assert rc.last_thread_id == threads[0][0]
    assert result.target is None and not result.grads
    want = direct_run(doc)
    assert set(result.values) == set(want.values)
    for node in doc.page().nodes:
        item = view.node_item(node)
        ports = [p.name for p in item.data.outputs]
        assert item.results is not None and not item.results.error and not item.results.stale
        for port in ports:
            value = want.values[(node, port)]
            assert np.array_equal(result.values[(node, port)], value)
            shown = item.results.summaries[port]
            assert shown.shape_text == describe(value)
            assert shown.kind == ("scalar" if np.size(value) == 1 else "vector")
            if shown.kind == "scalar":
                assert shown.value_text == format_number(np.asarray(value).item())
            else:
                assert shown.stats.min == pytest.approx(float(value.min()))
                assert shown.stats.max == pytest.approx(float(value.max()))
    assert view.node_item("Sum_1").results.summaries["output"].value_text == \
        format_number(float(want.value("Sum_1")))
    # What a user sees: the result area now holds a sparkline and text, not one flat colour.
    assert result_area_colours(window, "Softmax_1") > empty_area + 5
    assert "Forward run of 'stable_softmax' done" in window.statusBar().currentMessage()
    assert dumps_project(doc.project) == before and not doc.dirty


def test_run_menu_toolbar_and_clear(qtbot, window):
    rc, view = window.run_controller, window.view
    menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&Run")
    texts = [a.text() for a in menu.actions() if not a.isSeparator()]
    assert texts[:3] == ["Run &Forward", "Run &Backward", "&Clear Results"]
    assert window.actions["run_forward"].shortcut().toString() == "F5"
    assert window.actions["run_backward"].shortcut().toString() == "Shift+F5"
    assert window.actions["run_forward"] in window.run_toolbar.actions()
    with qtbot.waitSignal(rc.run_finished, timeout=5000):
        window.actions["run_forward"].trigger()
    assert all(item.results is not None for item in view.diagram_scene().node_items.values())
    with qtbot.waitSignal(rc.results_cleared):
        window.actions["clear_results"].trigger()
    assert rc.last_result is None and not rc.results_stale
    assert all(item.results is None for item in view.diagram_scene().node_items.values())


# ------------------------------------------------------------------------------- backward


def test_backward_gives_the_value_viewer_the_runtimes_gradient(qtbot, window):
    doc, view, rc, viewer = window.document, window.view, window.run_controller, window.value_viewer
    combo = window.target_combo
    keys = [combo.itemData(i) for i in range(combo.count())]
    assert keys == ["Max_1:output", "StopGradient_1:output", "Sum_1:output"]  # scalar float outputs
    assert combo.currentData() == "Sum_1:output" and "(loss)" in combo.currentText()
    click_node(qtbot, view, "Softmax_1")
    assert "Run the page" in viewer.hint.text() or "No run" in viewer.hint.text()

    (result,) = press_run(qtbot, window, backward=True)

    want = direct_run(doc, target="Sum_1:output")
    assert result.target == ("Sum_1", "output") and result.paths is not None
    assert np.array_equal(viewer.shown_value(), want.value("Softmax_1"))
    assert np.allclose(viewer.shown_gradient(), want.grad("Softmax_1"), rtol=1e-6)
    model = viewer.grad_pane.model
    grad = want.grad("Softmax_1")
    assert model.rowCount() == grad.size and model.columnCount() == 1
    assert [model.data(model.index(i, 0)) for i in range(grad.size)] == [format_number(v, 6) for v in grad]
    assert "Gradient of Sum_1:output" in viewer.grad_pane.title.text()
    # Max feeds a StopGradient: no gradient reaches it, and the viewer says why.
    click_node(qtbot, view, "Max_1")
    assert viewer.shown_gradient() is None
    assert np.array_equal(viewer.shown_value(), want.value("Max_1"))
    assert "cut by StopGradient_1" in viewer.grad_pane.message.text()
    # Another target from the combo: the gradient of Max_1 with respect to itself is 1.
    combo.setCurrentIndex(keys.index("Max_1:output"))
    (result,) = press_run(qtbot, window, backward=True)
    assert result.target == ("Max_1", "output")
    assert viewer.shown_gradient() == pytest.approx(1.0)
    # The loss mark moving makes the combo follow it.
    doc.set_loss("StopGradient_1")
    qtbot.waitUntil(lambda: combo.currentData() == "StopGradient_1:output", timeout=2000)


def test_value_viewer_shows_a_matrix_slice_of_a_higher_rank_output_with_a_heatmap(qtbot, tmp_path):
    project = loads_project(dumps_project(load_project(SAMPLE)), "<copy>")
    page = project.page("stable_softmax")
    page.add_node("Placeholder", id="cube", attrs={"dtype": "float32", "shape": [3, 4, 6]}, position=(0, 500))
    page.feeds["cube"] = np.arange(72, dtype=np.float32).reshape(3, 4, 6)
    window = make_window(qtbot, tmp_path, project)
    viewer = window.value_viewer
    press_run(qtbot, window)
    click_node(qtbot, window.view, "cube")
    item = window.view.node_item("cube")
    assert item.results.summaries["output"].kind == "matrix"
    image = rgba_image(item.results.summaries["output"].rgba)
    assert (image.width(), image.height()) == (6, 4)            # the last two axes, first slice
    assert len(viewer.spins) == 1 and viewer.spins[0].maximum() == 2
    model = viewer.value_pane.model
    assert (model.rowCount(), model.columnCount()) == (4, 6) and model.data(model.index(1, 2)) == "8"
    viewer.spins[0].setValue(2)
    assert model.data(model.index(1, 2)) == "56"                 # cube[2, 1, 2]
    assert "[2, :, :]" in viewer.value_pane.stats.text()
    heat = viewer.value_pane.heatmap
    assert heat._image is not None and (heat._image.width(), heat._image.height()) == (6, 4)
    assert heat._lo == 48 and heat._hi == 71                      # the colours span the slice shown


# ------------------------------------------------------------------------------- staleness


def test_editing_after_a_run_marks_results_stale_and_a_new_run_replaces_them(qtbot, window):
    doc, view, rc, viewer = window.document, window.view, window.run_controller, window.value_viewer
    press_run(qtbot, window)
    click_node(qtbot, view, "Multiply_1")
    old = np.array(viewer.shown_value())
    assert not viewer.stale_label.isVisible()
    # Moving a block changes nothing a run computes: the results stay current.
    doc.move_nodes({"w": ((1000.0, 320.0), (1000.0, 360.0))})
    assert not rc.results_stale

    doc.set_attr("w", "value", np.array([1, 1, 1, 1, 1], dtype=np.float32))

    assert rc.results_stale
    items = view.diagram_scene().node_items.values()
    assert all(item.results.stale for item in items)
    assert viewer.stale_label.isVisible() and np.array_equal(viewer.shown_value(), old)
    assert "stale" in view.tooltip_at(view.node_item("Multiply_1").sceneBoundingRect().center())
    window.actions["undo"].trigger()                 # back to what ran: current again
    qtbot.waitUntil(lambda: not rc.results_stale, timeout=2000)
    assert not any(item.results.stale for item in items)
    window.actions["redo"].trigger()
    assert rc.results_stale

    press_run(qtbot, window)

    assert not rc.results_stale and not viewer.stale_label.isVisible()
    want = direct_run(doc)
    assert np.array_equal(viewer.shown_value(), want.value("Multiply_1"))
    assert not np.array_equal(viewer.shown_value(), old)
    assert not any(item.results.stale for item in view.diagram_scene().node_items.values())


def test_a_run_edited_while_it_runs_arrives_stale_and_a_second_request_waits_its_turn(qtbot, window):
    doc, rc = window.document, window.run_controller
    gate = threading.Event()
    rc.job_hook = lambda job: gate.wait(5)
    started, finished = [], []
    rc.run_started.connect(started.append)
    rc.run_finished.connect(finished.append)
    qtbot.keyClick(window.view, Qt.Key_F5)
    assert rc.busy and started == ["forward"]
    # The UI is live meanwhile: an edit goes through, a second request is queued.
    doc.set_attr("w", "value", np.array([2, 2, 2, 2, 2], dtype=np.float32))
    qtbot.keyClick(window.view, Qt.Key_F5, Qt.ShiftModifier)
    assert started == ["forward"] and "starts when it ends" in window.statusBar().currentMessage()
    QApplication.processEvents()
    assert rc.busy and not finished
    with qtbot.waitSignals([rc.run_finished, rc.run_finished], timeout=5000):
        gate.set()
    assert started == ["forward", "backward"]
    first, second = finished
    assert first.target is None and second.target == ("Sum_1", "output")
    # The first run saw the old weights; the queued one compiled the page as it was then.
    assert np.array_equal(first.value("w"), [1.0, -2.0, 0.5, 3.0, 1.5])
    assert np.array_equal(second.value("w"), [2, 2, 2, 2, 2]) and not rc.results_stale


def test_a_run_edited_while_it_runs_shows_its_results_as_stale(qtbot, window):
    doc, rc = window.document, window.run_controller
    gate = threading.Event()
    rc.job_hook = lambda job: gate.wait(5)
    qtbot.keyClick(window.view, Qt.Key_F5)
    doc.set_attr("w", "value", np.array([3, 3, 3, 3, 3], dtype=np.float32))
    with qtbot.waitSignal(rc.run_finished, timeout=5000):
        gate.set()
    assert rc.results_stale and "stale" in window.statusBar().currentMessage()
    assert all(item.results.stale for item in window.view.diagram_scene().node_items.values())


def test_clear_while_a_run_goes_drops_its_outcome(qtbot, window):
    rc = window.run_controller
    gate = threading.Event()
    rc.job_hook = lambda job: gate.wait(5)
    finished = []
    rc.run_finished.connect(finished.append)
    qtbot.keyClick(window.view, Qt.Key_F5)
    window.actions["clear_results"].trigger()
    assert rc.busy and "will not be shown" in window.statusBar().currentMessage()
    with qtbot.waitSignal(rc.busy_changed, timeout=5000):
        gate.set()
    QApplication.processEvents()
    assert not finished and rc.last_result is None
    assert all(item.results is None for item in window.view.diagram_scene().node_items.values())


def test_f5_runs_with_a_feed_typed_but_not_yet_entered(qtbot, window):
    doc, inspector = window.document, window.inspector
    click_node(qtbot, window.view, "x")
    qtbot.waitUntil(lambda: inspector.node_id == "x" and inspector.field("feed").isVisible(), timeout=2000)
    edit = inspector.field("feed")
    edit.setFocus()
    edit.selectAll()
    qtbot.keyClicks(edit, "[5, 4, 3, 2, 1]")                  # no Enter
    with qtbot.waitSignal(window.run_controller.run_finished, timeout=5000) as blocker:
        qtbot.keyClick(edit, Qt.Key_F5)
    assert np.array_equal(blocker.args[0].value("x"), [5, 4, 3, 2, 1])
    assert np.array_equal(doc.page().feeds["x"], [5, 4, 3, 2, 1])


# ------------------------------------------------------------------------------- failures


def nan_project():
    project = loads_project(dumps_project(load_project(SAMPLE)), "<copy>")
    page = project.add_page("logs")
    page.add_node("Placeholder", id="v", attrs={"dtype": "float32", "shape": [4]}, position=(0, 0))
    page.feeds["v"] = np.array([1.0, -2.0, 3.0, -4.0], dtype=np.float32)
    page.add_node("Log", id="Log_1", position=(220, 0))
    page.add_node("Sum", id="Sum_1", position=(440, 0))
    page.connect("v", "output", "Log_1", "x")
    page.connect("Log_1", "y", "Sum_1", "input")
    page.loss = "Sum_1"
    return project


def test_a_nan_run_marks_the_block_and_leaves_the_project_unchanged(qtbot, tmp_path):
    window = make_window(qtbot, tmp_path, nan_project())
    doc, view, rc = window.document, window.view, window.run_controller
    doc.set_current_page("logs")
    QApplication.processEvents()
    before = dumps_project(doc.project)

    message, node, port = press_run(qtbot, window, backward=True, signal="run_failed")

    assert (node, port) == ("Log_1", "y") and "NaN (2 of 4 values)" in message
    assert "logs/Log_1 (Log) produced NaN" in window.statusBar().currentMessage()
    log = view.node_item("Log_1")
    assert "NaN" in log.run_error and log.results.badge == "NaN"
    assert all(not view.node_item(n).run_error for n in ("v", "Sum_1"))
    assert "run failed here" in view.tooltip_at(log.sceneBoundingRect().center())
    assert log.results.summaries["y"].bad_text == "2 NaN"         # the values as they came out
    assert rc.last_result is not None and rc.last_error is not None and rc.last_result is not None
    click_node(qtbot, view, "Log_1")
    assert "2 NaN" in window.value_viewer.value_pane.stats.text()
    assert dumps_project(doc.project) == before and not doc.dirty
    # Problems lists the failed run at the top (not counted as a diagram error)
    page, node_listed, text = window.problems.page_rows()[0]
    assert (page, node_listed) == ("logs", "Log_1") and text.startswith("the last run failed:") and "NaN" in text
    assert window.problems.errors == 0
    # The next successful run clears the mark.
    doc.set_feed("v", np.array([1.0, 2.0, 3.0, 4.0], dtype=np.float32))
    press_run(qtbot, window)
    assert not log.run_error and rc.last_error is None
    assert not [r for r in window.problems.page_rows() if r[2].startswith("the last run failed")]


def test_a_missing_feed_and_a_failing_block_are_named_and_cleared(qtbot, window):
    doc, view, rc = window.document, window.view, window.run_controller
    before = dumps_project(doc.project)
    doc.set_feed("x", None)
    message, node, port = press_run(qtbot, window, signal="run_failed")
    assert node == "x" and "has no feed" in message and view.node_item("x").results.badge == "feed"
    assert rc.last_result is None
    window.actions["clear_results"].trigger()
    assert not view.node_item("x").run_error and rc.last_error is None
    # A block raising while it runs: x left open-sized and fed 3 values meets the 5 weights.
    doc.set_attr("x", "shape", [-1])
    doc.set_feed("x", np.array([1.0, 2.0, 3.0], dtype=np.float32))
    edited = dumps_project(doc.project)
    message, node, _ = press_run(qtbot, window, signal="run_failed")
    assert node == "Multiply_1" and "failed in the forward pass" in message and "x float32[3]" in message
    multiply = view.node_item("Multiply_1")
    assert multiply.results.badge == "error" and "could not be broadcast" in multiply.run_error
    assert multiply.results.summaries["z"] is None             # nothing computed from there on
    assert dumps_project(doc.project) == edited
    for _ in range(3):
        window.actions["undo"].trigger()
    assert dumps_project(doc.project) == before
    press_run(qtbot, window)
    assert not multiply.run_error and rc.last_error is None


def test_a_page_with_errors_is_refused_before_running(qtbot, window):
    doc, rc = window.document, window.run_controller
    doc.disconnect([e for e in doc.page().edges if e.dst == "Softmax_1"])
    started = []
    rc.run_started.connect(started.append)
    with qtbot.waitSignal(rc.run_failed) as blocker:
        qtbot.keyClick(window.view, Qt.Key_F5)
    message, node, _ = blocker.args
    assert not started and not rc.busy and node == "Softmax_1" and "Cannot run page" in message


# ------------------------------------------------------------------------------- feeds from files


def test_feeds_load_from_npy_and_csv_files_and_a_wrong_shape_is_refused(qtbot, window, dialogs, tmp_path):
    doc, view, inspector = window.document, window.view, window.inspector
    click_node(qtbot, view, "x")
    qtbot.waitUntil(lambda: inspector.node_id == "x" and not inspector._refresh.pending())
    button = inspector.feed_load_button
    qtbot.waitUntil(button.isVisible, timeout=2000)       # a rebuilt form shows on the next turn
    assert button.text() == "Load from file…"

    npy = tmp_path / "logits.npy"
    np.save(npy, np.array([0.5, 1.5, -1.0, 2.0, 0.0]))               # float64: fed as float32
    dialogs.open_path = str(npy)
    steps = doc.undo_stack.count()
    qtbot.mouseClick(button, Qt.LeftButton)
    feed = doc.page().feeds["x"]
    assert feed.dtype == np.float32 and np.array_equal(feed, [0.5, 1.5, -1.0, 2.0, 0.0])
    assert doc.undo_stack.count() == steps + 1 and not inspector.field_error("feed")
    qtbot.waitUntil(lambda: inspector.field("feed").text() == "[0.5, 1.5, -1.0, 2.0, 0.0]")
    press_run(qtbot, window)
    assert np.array_equal(window.run_controller.last_result.value("x"), feed)

    csv = tmp_path / "logits.csv"
    csv.write_text("a,b,c,d,e\n3,1,4,1,5\n")                            # a header row, one row
    dialogs.open_path = str(csv)
    qtbot.mouseClick(button, Qt.LeftButton)
    assert np.array_equal(doc.page().feeds["x"], [3, 1, 4, 1, 5])
    column = tmp_path / "column.csv"
    column.write_text("x\n1\n2\n3\n4\n5\n")
    dialogs.open_path = str(column)
    qtbot.mouseClick(button, Qt.LeftButton)
    assert np.array_equal(doc.page().feeds["x"], [1, 2, 3, 4, 5])
    saved = dumps_project(doc.project)
    assert np.array_equal(loads_project(saved, "<saved>").page("stable_softmax").feeds["x"], [1, 2, 3, 4, 5])

    steps = doc.undo_stack.count()
    wrong = tmp_path / "wrong.npy"
    np.save(wrong, np.ones(3, dtype=np.float32))
    dialogs.open_path = str(wrong)
    qtbot.mouseClick(button, Qt.LeftButton)
    error = inspector.field_error("feed")
    assert "wrong.npy" in error and "[3]" in error and "[5]" in error
    bad = tmp_path / "bad.csv"
    bad.write_text("1,2,3,4,5\n1,2,x,4,5\n")
    dialogs.open_path = str(bad)
    qtbot.mouseClick(button, Qt.LeftButton)
    assert "line 2, column 3: 'x' is not a number" in inspector.field_error("feed")
    assert doc.undo_stack.count() == steps and dumps_project(doc.project) == saved
    window.actions["undo"].trigger()                                   # the column, then the row
    assert np.array_equal(doc.page().feeds["x"], [3, 1, 4, 1, 5])


def test_read_feed_file_checks_dtype_and_shape(tmp_path):
    path = tmp_path / "m.csv"
    path.write_text("1;2;3\n4;5;6\n")
    assert read_feed_file(path, "int32", (None, 3)).tolist() == [[1, 2, 3], [4, 5, 6]]
    with pytest.raises(ValueError, match="expects \\[2, 2\\]"):
        read_feed_file(path, "float32", (2, 2))
    path.write_text("1.5,2\n")
    with pytest.raises(ValueError, match="fractions"):
        read_feed_file(path, "int32", (2,))
    np.save(tmp_path / "o.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError, match="pickled"):
        read_feed_file(tmp_path / "o.npy", "float32", (1,))
    with pytest.raises(ValueError, match="neither"):
        read_feed_file(tmp_path / "o.txt", "float32", (1,))
    (tmp_path / "s.csv").write_text("7\n")
    assert read_feed_file(tmp_path / "s.csv", "float64", ()).shape == ()


# ------------------------------------------------------------------------------- summaries


def test_summaries_downsample_long_vectors_and_big_matrices_and_count_nan():
    v = np.sin(np.linspace(0, 20, 10_000)).astype(np.float32)
    v[17] = np.nan
    s = summarize(v)
    assert s.kind == "vector" and len(s.xs) == MAX_POINTS and s.band is not None
    assert s.bad_text == "1 NaN" and s.stats.nan == 1 and len(s.bad_xs) == 1
    m = np.arange(40 * 50, dtype=np.float64).reshape(40, 50)
    m[0, 0] = np.inf
    s = summarize(m)
    assert s.kind == "matrix" and (rgba_image(s.rgba).width(), rgba_image(s.rgba).height()) == (MAX_CELLS, MAX_CELLS)
    assert s.bad_text == "1 +Inf" and s.stats.min == 1.0
    nan = summarize(np.array([[np.nan, 1.0], [2.0, 3.0]]))
    assert QColor(rgba_image(nan.rgba).pixel(0, 0)) == QColor("#ff00ff")
    assert summarize(np.float32(2.5)).value_text == "2.5" and summarize(np.array(True)).value_text == "true"
    assert summarize(np.zeros((0, 3))).kind == "empty"


# ------------------------------------------------------------------------------- the picture


def test_results_screenshot_shows_every_blocks_result_and_the_value_viewer(qtbot, tmp_path):
    """docs/results.png: the sample after Forward, the Values dock on Softmax_1. Refresh it with
    BLOCKFLOW_UPDATE_SCREENSHOT=1 .venv/bin/python -m pytest tests/gui/test_runs.py -k screenshot"""
    import os

    window = make_window(qtbot, tmp_path)
    window.resize(1600, 900)
    for key, dock in window.docks.items():      # the canvas and the Values dock, big enough to read
        if key != "values":
            dock.hide()
    press_run(qtbot, window)
    view = window.view
    view.select_nodes(["Softmax_1"])
    view.fit_to_view()
    QApplication.processEvents()
    assert view.zoom() > 0.9
    image = window.grab().toImage()
    background = view.style_.result_area
    origin = view.viewport().mapTo(window, QPoint(0, 0))
    for node, item in view.diagram_scene().node_items.items():
        area = view.mapFromScene(item.mapRectToScene(item.result_rect)).boundingRect().adjusted(3, 3, -3, -3)
        area.translate(origin)
        ink = 0
        for y in range(area.top(), area.bottom()):
            for x in range(area.left(), area.right()):
                c = QColor(image.pixel(x, y))
                ink += abs(c.red() - background.red()) + abs(c.green() - background.green()) + \
                    abs(c.blue() - background.blue()) > 90
        assert ink > 25, (node, ink)              # a number or a sparkline, and shape and dtype
    heat = window.value_viewer.value_pane.heatmap
    picture = heat.grab().toImage()
    yellow = sum(QColor(picture.pixel(x, picture.height() // 4)).name() == "#fde725"
                 for x in range(picture.width()))
    assert yellow > 10                            # the largest softmax value, at the top of viridis
    if os.environ.get("BLOCKFLOW_UPDATE_SCREENSHOT"):
        image.save(str(ROOT / "docs" / "results.png"))


@pytest.mark.parametrize("edit", [False, True], ids=["as opened", "after an edit"])
def test_a_run_asked_for_while_its_page_compiles_starts_when_it_is_compiled(qtbot, tmp_path, monkeypatch, edit):
    """Every compile slower than the UI thread's wait (WAIT at 0: a loaded machine, a big page).
    The run waited for its page's program, but the first program to land, of any page (the
    sample's other three pages compile too), ended the wait: the run never started."""
    import blockflow.gui.document.compiling as compiling

    monkeypatch.setattr(compiling, "WAIT", 0.0)
    window = make_window(qtbot, tmp_path)
    doc, rc = window.document, window.run_controller
    if edit:
        doc.disconnect([e for e in doc.page().edges if e.dst == "Softmax_1"])
    signal = rc.run_failed if edit else rc.run_finished
    with qtbot.waitSignal(signal, timeout=10_000):
        qtbot.keyClick(window.view, Qt.Key_F5)
    assert not rc.busy
