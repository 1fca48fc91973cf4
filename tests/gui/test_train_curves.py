"""The Train panel's curves (issue 16): the loss smoothed as TensorBoard does (an exponential
moving average, 0 to 0.99, the raw curve faint behind), the smoothing driven by its slider, kept
between sessions, never changed by a wheel turn meant to scroll the panel; and a screenshot of the
panel's curves for docs/editor.md."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import QPoint, QPointF, QSettings, Qt
from PySide6.QtGui import QFont, QWheelEvent
from PySide6.QtWidgets import QApplication, QMessageBox

from blockflow.gui.document.document import Document
from blockflow.gui.main_window import MainWindow
from blockflow.gui.panels.curves import DEFAULT_SMOOTHING, SMOOTHING_KEY, smooth
from blockflow.gui.panels.trainpanel import TrainPanel
from blockflow.io.project_io import load_project

from test_training import moons_classifier

ROOT = Path(__file__).resolve().parents[2]
MOONS = ROOT / "sample_projects" / "moons_classifier.bflow.json"


@pytest.fixture(autouse=True)
def _font_and_no_prompts(qapp, monkeypatch):
    qapp.setFont(QFont("DejaVu Sans", 9))
    monkeypatch.setattr(QMessageBox, "question", staticmethod(lambda *a, **k: QMessageBox.Discard))


def make_panel(qtbot, doc, settings=None) -> TrainPanel:
    panel = TrainPanel(doc, settings=settings)
    qtbot.addWidget(panel)
    panel.resize(420, 760)
    panel.show()
    qtbot.waitExposed(panel)
    qtbot.waitUntil(lambda: panel.curves.made, timeout=5000)
    return panel


def train(qtbot, panel, steps: int) -> None:
    panel.steps.setValue(steps)
    with qtbot.waitSignal(panel.training_finished, timeout=30000):
        qtbot.mouseClick(panel.train_button, Qt.LeftButton)
    assert len(panel.losses) == steps


# ------------------------------------------------------------------------------- the average
def test_smoothing_is_tensorboards_debiased_moving_average():
    values = np.array([1.0, 2.0, 3.0])
    assert np.array_equal(smooth(values, 0.0), values)
    # last = w·last + (1-w)·v, shown divided by 1 - w^k: the first point is the first value
    np.testing.assert_allclose(smooth(values, 0.5), [1.0, 1.25 / 0.75, 2.125 / 0.875])
    flat = smooth(np.full(50, 7.0), 0.99)
    np.testing.assert_allclose(flat, 7.0)          # no pull toward 0 at the start
    noisy = 1.0 + np.random.default_rng(0).normal(0, 0.3, 400)
    assert np.std(np.diff(smooth(noisy, 0.9))) < 0.2 * np.std(np.diff(noisy))
    gap = smooth(np.array([1.0, np.nan, 3.0, np.inf]), 0.5)
    assert np.isnan(gap[1]) and np.isinf(gap[3])   # a bad point stays one, the rest is finite
    assert gap[2] == pytest.approx((0.25 + 1.5) / 0.75)
    assert np.array_equal(smooth(values, 5.0), smooth(values, 0.99))   # clamped, never a blow-up


# ------------------------------------------------------------------------------- the slider
def test_a_growing_curve_is_smoothed_as_a_whole_would_be_without_redoing_its_start():
    """The Train panel smooths the loss batch by batch (RunningSmooth): each result is exactly
    smooth() of the whole curve so far, NaN and Inf steps included, and a new weight or a new run
    starts over; only the new points are worked on."""
    from blockflow.gui.panels.curves import RunningSmooth

    rng = np.random.default_rng(3)
    values = rng.lognormal(size=700)
    values[[5, 99, 400]] = [np.nan, np.inf, np.nan]
    running = RunningSmooth()
    for end in (1, 2, 50, 51, 300, 700):
        assert np.array_equal(running(values[:end], 0.6), smooth(values[:end], 0.6), equal_nan=True)
    assert running.src.size == 700
    assert np.array_equal(running(values, 0.9), smooth(values, 0.9), equal_nan=True)     # new weight
    other = rng.lognormal(size=20)
    assert np.array_equal(running(other, 0.9), smooth(other, 0.9))                        # a new run
    assert np.array_equal(running(other, 0.0), other)


def test_the_slider_smooths_the_loss_curve_with_the_raw_curve_faint_behind(qtbot):
    panel = make_panel(qtbot, Document(moons_classifier()))
    train(qtbot, panel, 150)
    curves = panel.curves
    slider = curves.slider
    assert curves.smoothing == DEFAULT_SMOOTHING
    raw, shown = curves.drawn
    np.testing.assert_allclose(raw, panel.losses)
    np.testing.assert_allclose(shown, smooth(panel.losses, DEFAULT_SMOOTHING))
    assert curves._plot["raw"].isVisible()
    assert curves._plot["raw"].opts["pen"].color().alpha() < 100       # faint behind
    assert curves._plot["loss"].opts["pen"].color().alpha() == 255

    slider.setFocus()
    qtbot.keyClick(slider, Qt.Key_Home)                                   # no smoothing
    assert curves.smoothing == 0.0 and curves.value_label.text() == "0.00"
    np.testing.assert_allclose(curves.drawn[1], panel.losses)
    assert not curves._plot["raw"].isVisible()                           # one curve, the raw one
    qtbot.keyClick(slider, Qt.Key_End)
    assert curves.smoothing == 0.99 and curves.value_label.text() == "0.99"
    np.testing.assert_allclose(curves.drawn[1], smooth(panel.losses, 0.99))

    # a drag of the handle to the middle of the groove: about half
    groove = slider.rect()
    qtbot.mousePress(slider, Qt.LeftButton, Qt.NoModifier, QPoint(groove.right() - 3, groove.center().y()))
    for x in np.linspace(groove.right() - 3, groove.center().x(), 6):
        qtbot.mouseMove(slider, QPoint(int(x), groove.center().y()))
    qtbot.mouseRelease(slider, Qt.LeftButton, Qt.NoModifier, QPoint(groove.center().x(), groove.center().y()))
    assert 0.35 < curves.smoothing < 0.65
    np.testing.assert_allclose(curves.drawn[1], smooth(panel.losses, curves.smoothing))


def test_a_wheel_turn_over_the_slider_scrolls_the_panel_not_the_smoothing(qtbot, tmp_path):
    window = MainWindow(Document(moons_classifier()), QSettings(str(tmp_path / "s.ini"), QSettings.IniFormat))
    qtbot.addWidget(window)
    window.resize(1400, 700)
    window.show()
    qtbot.waitExposed(window)
    window.docks["train"].raise_()
    curves = window.train_panel.curves
    qtbot.waitUntil(lambda: curves.made, timeout=5000)
    window.view.setFocus()                     # the slider has not been chosen
    slider = curves.slider
    scroll = window.docks["train"].widget().verticalScrollBar()
    assert scroll.maximum() > 0                # the settings are below, to scroll to
    before, top = curves.smoothing, scroll.value()
    at = QPointF(slider.rect().center())
    for _ in range(3):
        event = QWheelEvent(at, QPointF(slider.mapToGlobal(at.toPoint())), QPoint(0, 0), QPoint(0, -120),
                            Qt.NoButton, Qt.NoModifier, Qt.NoScrollPhase, False)
        QApplication.sendEvent(slider, event)
    assert curves.smoothing == before and scroll.value() > top
    qtbot.mouseClick(slider, Qt.LeftButton, Qt.NoModifier, QPoint(slider.width() - 4, slider.height() // 2))
    assert slider.hasFocus()                   # clicked: now it is the slider's wheel
    chosen = curves.smoothing
    QApplication.sendEvent(slider, QWheelEvent(at, QPointF(slider.mapToGlobal(at.toPoint())), QPoint(0, 0),
                                               QPoint(0, -120), Qt.NoButton, Qt.NoModifier, Qt.NoScrollPhase,
                                               False))
    assert curves.smoothing != chosen


# ------------------------------------------------------------------------------- kept
def test_the_smoothing_is_kept_between_sessions(qtbot, tmp_path):
    path = str(tmp_path / "settings.ini")
    panel = make_panel(qtbot, Document(moons_classifier()), QSettings(path, QSettings.IniFormat))
    panel.curves.slider.setFocus()
    for _ in range(3):
        qtbot.keyClick(panel.curves.slider, Qt.Key_PageDown)              # down by pages of 0.10
    kept = panel.curves.smoothing
    assert kept == pytest.approx(DEFAULT_SMOOTHING - 0.3)
    panel.close()
    again = make_panel(qtbot, Document(moons_classifier()), QSettings(path, QSettings.IniFormat))
    assert again.curves.smoothing == pytest.approx(kept)
    for bad in ("not a number", 7.5, -1):                                 # a hand-edited file
        settings = QSettings(path, QSettings.IniFormat)
        settings.setValue(SMOOTHING_KEY, bad)
        settings.sync()
        assert make_panel(qtbot, Document(moons_classifier()), settings).curves.smoothing == DEFAULT_SMOOTHING


# ------------------------------------------------------------------------------- the picture
def test_screenshot_of_the_train_panels_curves(qtbot, tmp_path):
    doc = Document(load_project(MOONS), None)
    window = MainWindow(doc, QSettings(str(tmp_path / "settings.ini"), QSettings.IniFormat))
    qtbot.addWidget(window)
    window.resize(1500, 860)
    window.show()
    qtbot.waitExposed(window)
    dock = window.docks["train"]
    dock.raise_()
    panel = window.train_panel
    qtbot.waitUntil(lambda: panel.curves.made, timeout=5000)
    panel.steps.setValue(400)
    with qtbot.waitSignal(panel.training_finished, timeout=60000):
        qtbot.mouseClick(panel.train_button, Qt.LeftButton)
    QApplication.processEvents()
    plot = panel.curves._plot["widget"]
    seen = plot.viewport().visibleRegion().boundingRect().height()
    assert plot.height() >= 340 and abs(seen - plot.viewport().height()) <= 1, (plot.height(), seen)
    image = dock.grab().toImage()
    assert image.width() <= 1200 and image.height() <= 900
    assert image.save(str(tmp_path / "train_curves.png"))
    if os.environ.get("BLOCKFLOW_UPDATE_SCREENSHOT"):
        image.save(str(ROOT / "docs" / "train_curves.png"))
    # the two loss curves are drawn: the smoothed one's blue, and the faint raw one
    box = plot.geometry().translated(plot.parentWidget().mapTo(dock, QPoint(0, 0)))
    strong = faint = 0
    for y in range(box.top(), box.top() + box.height() * 3 // 5, 2):
        for x in range(box.left(), box.right(), 2):
            c = image.pixelColor(x, y)
            if c.blue() > 150 and c.red() < 120 and c.green() < 160:
                strong += 1
            elif c.blue() > c.red() + 15 and c.red() > 150:
                faint += 1
    assert strong > 100 and faint > 50, (strong, faint)
