"""The Train panel, driven by its widgets: start, progress, Stop, the curves, trained values
stored undoably and saved, Reset variables, a failing training, and the worker thread."""
from __future__ import annotations

import threading

import numpy as np
import pytest
from PySide6.QtCore import Qt

from blockflow.gui.document.document import Document
from blockflow.gui.panels.trainpanel import TrainPanel
from blockflow.io.project_io import dumps_project, load_project

from test_training import moons_classifier, regression


@pytest.fixture
def moons(qapp):
    doc = Document(moons_classifier())
    return doc


def make_panel(qtbot, doc):
    panel = TrainPanel(doc)
    qtbot.addWidget(panel)
    panel.resize(420, 760)
    panel.show()
    qtbot.waitExposed(panel)
    return panel


def test_train_progress_stop_curve_and_saved_values(qtbot, moons, tmp_path):
    panel = make_panel(qtbot, moons)
    assert panel.loss.currentData() == "L:output"
    checked = [panel.metrics.item(i).text() for i in range(panel.metrics.count())
               if panel.metrics.item(i).checkState() == Qt.Checked]
    assert checked == ["acc:output"]                     # the page's metrics start checked
    panel.steps.setValue(1_000_000)
    panel.setting_widgets["lr"].setValue(0.05)
    w1_before = moons.program().variable_values["W1"].copy()
    qtbot.mouseClick(panel.train_button, Qt.LeftButton)
    assert panel.training and not panel.train_button.isEnabled()
    qtbot.waitUntil(lambda: panel.progress.value() >= 300, timeout=20000)
    assert panel.curve_points() > 0 and "steps/s" in panel.info.text()
    assert panel._job.thread_id not in (None, threading.get_ident())   # trained off the UI thread
    with qtbot.waitSignal(panel.training_finished, timeout=20000) as stopped:
        qtbot.mouseClick(panel.stop_button, Qt.LeftButton)
    assert stopped.args == [True] and not panel.training
    done = len(panel.losses)
    assert 300 <= done < 1_000_000 and panel.curve_points() == done
    assert panel.metric_values["acc:output"][-1] > 0.8
    assert not moons.dirty and moons.page().nodes["W1"].state == {}   # stopped: the project is as it was
    assert panel.keep_button.isVisible() and str(done) in panel.keep_button.text()
    qtbot.mouseClick(panel.keep_button, Qt.LeftButton)                  # keep what it reached
    assert not panel.keep_button.isVisible()
    assert moons.undo_stack.undoText() == f"Train {done} steps" and moons.dirty
    w1_after = moons.page().nodes["W1"].state["value"]
    assert not np.array_equal(w1_after, w1_before)
    path = tmp_path / "trained.bflow.json"
    moons.save(path)
    np.testing.assert_array_equal(load_project(path).pages[0].nodes["W1"].state["value"], w1_after)
    qtbot.mouseClick(panel.reset_button, Qt.LeftButton)
    assert moons.page().nodes["W1"].state == {}
    np.testing.assert_array_equal(moons.program().variable_values["W1"], w1_before)


def test_a_short_training_runs_to_the_end_with_test_evaluations_and_snapshots(qtbot, moons):
    panel = make_panel(qtbot, moons)
    panel.steps.setValue(120)
    panel.eval_every.setValue(40)
    panel.setting_widgets["lr"].setValue(0.05)
    snapshots = []
    panel.snapshot.connect(lambda result, _summaries: snapshots.append(result))
    with qtbot.waitSignal(panel.training_finished, timeout=20000) as done:
        assert panel.start()
    assert done.args == [False] and len(panel.losses) == 120
    assert [s for s, _ in panel.test_points] == [39, 79, 119]
    assert snapshots and snapshots[-1].grads        # recorded runs for the canvas, with gradients
    assert "trained 120 steps" in panel.info.text() and "test:" in panel.info.text()


def test_a_training_that_blows_up_stops_cleanly_and_changes_nothing(qtbot, qapp):
    doc = Document(regression())
    panel = make_panel(qtbot, doc)
    panel.optimizer.setCurrentIndex(panel.optimizer.findData("sgd"))
    panel.setting_widgets["lr"].setValue(1e6)
    panel.steps.setValue(200)
    before = dumps_project(doc.project)
    failures = []
    panel.training_failed.connect(lambda *a: failures.append(a))
    with qtbot.waitSignal(panel.training_finished, timeout=20000):
        panel.start()
    assert failures and ("inf" in failures[0][0].lower() or "nan" in failures[0][0].lower())
    assert "training stopped" in panel.info.text()
    assert dumps_project(doc.project) == before and not doc.dirty
    assert panel.train_button.isEnabled()


class _Crash(BaseException):
    """Something a training does not catch (only Exception is caught there)."""


def test_a_training_dying_of_an_uncaught_exception_still_ends(qtbot, qapp, monkeypatch, capsys):
    from blockflow.gui.panels import trainpanel

    def crash(*_args, **_kw):
        raise _Crash("gone")

    monkeypatch.setattr(trainpanel.Trainer, "train", crash)
    doc = Document(regression())
    panel = make_panel(qtbot, doc)
    failures = []
    panel.training_failed.connect(lambda *a: failures.append(a))
    with qtbot.waitSignal(panel.training_finished, timeout=20000) as ended:
        assert panel.start()
    assert ended.args == [True] and not panel.training and panel.train_button.isEnabled()
    assert failures == [("training failed: _Crash: gone", "", "")]
    assert "_Crash" in capsys.readouterr().err       # the worker printed the traceback


def test_recommended_settings_fill_the_form(qtbot, qapp):
    project = regression()
    project.metadata["training"] = {"main": {"optimizer": "sgd", "lr": 0.1, "steps": 777, "seed": 5}}
    panel = make_panel(qtbot, Document(project))
    assert panel.optimizer.currentData() == "sgd" and panel.setting_widgets["lr"].value() == pytest.approx(0.1)
    assert panel.steps.value() == 777 and panel.seed.value() == 5 and panel.batch.value() == -1
