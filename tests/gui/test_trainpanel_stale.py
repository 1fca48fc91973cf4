"""The Train panel as issue 16 asks: its fields take the mouse wheel only once chosen (a turn over
an unchosen field scrolls the panel), graph mode is offered only where it can train, and what the
panel says goes with the page it was said of."""
from __future__ import annotations

from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import QApplication, QScrollArea

from blockflow.io.project_io import load_project

from composite_window import make_window

SAMPLES = __import__("pathlib").Path(__file__).parents[2] / "sample_projects"


def _wheel(widget, steps: int = -1):
    """A turn of the wheel over the middle of ``widget`` (negative: towards the user)."""
    pos = QPointF(widget.rect().center())
    event = QWheelEvent(pos, QPointF(widget.mapToGlobal(widget.rect().center())), QPoint(0, 0),
                        QPoint(0, 120 * steps), Qt.NoButton, Qt.NoModifier, Qt.NoScrollPhase, False)
    QApplication.sendEvent(widget, event)


def test_a_turn_over_an_unchosen_field_scrolls_the_panel_and_changes_nothing(qtbot, tmp_path):
    window = make_window(qtbot, tmp_path, load_project(SAMPLES / "moons_classifier.bflow.json"))
    dock = window.docks["train"]
    dock.show()
    dock.raise_()
    dock.resize(380, 260)          # small: the form scrolls
    QApplication.processEvents()
    panel = window.train_panel
    area = next(w for w in (panel.parentWidget(), panel.parentWidget().parentWidget()) if isinstance(w, QScrollArea))
    area.resize(380, 260)
    QApplication.processEvents()
    beta1 = panel.setting_widgets["beta1"]
    mode = panel.mode
    before = (beta1.value(), mode.currentIndex(), panel.engine.currentIndex())
    bar = area.verticalScrollBar()
    assert bar.maximum() > 0
    start = bar.value()
    for field in (beta1, mode, panel.engine):
        _wheel(field)
    assert (beta1.value(), mode.currentIndex(), panel.engine.currentIndex()) == before
    assert bar.value() > start                      # the turns scrolled the panel instead
    qtbot.mouseClick(beta1, Qt.LeftButton)          # chosen: now it takes the wheel
    assert beta1.hasFocus()
    _wheel(beta1)
    assert beta1.value() != before[0]


def test_graph_mode_is_offered_only_where_the_page_trains_itself(qtbot, tmp_path):
    window = make_window(qtbot, tmp_path, load_project(SAMPLES / "linear_regression.bflow.json"))
    panel = window.train_panel
    graph = panel.mode.model().item(1)
    qtbot.waitUntil(lambda: window.document.ready_program(panel.host) is not None, timeout=5000)
    panel.refresh_lists()
    assert not graph.isEnabled() and "no Apply*" in graph.toolTip()     # the first page: an optimizer trains it
    assert panel.mode.currentIndex() == 0
    window.document.set_current_page("drawn_update")                    # draws its own Apply*
    qtbot.waitUntil(lambda: window.document.ready_program("drawn_update") is not None, timeout=5000)
    panel.refresh_lists()
    assert graph.isEnabled() and panel.mode.currentIndex() == 1


def test_what_the_panel_said_goes_with_the_page_it_said_it_of(qtbot, tmp_path):
    """"The page has errors" goes once another project is open, and a failed start leaves no
    progress of an earlier training (issue 16)."""
    from diagrams import chain

    from blockflow.io.project_io import load_project as load

    bad = chain(("x", "Placeholder", {"shape": [3]}, None), ("m", "MatMul", {}, {"a": "x", "b": "x"}))
    window = make_window(qtbot, tmp_path, bad)
    panel, doc = window.train_panel, window.document
    qtbot.waitUntil(lambda: doc.ready_program(panel.host) is not None, timeout=5000)
    panel.refresh_lists()
    assert "has errors" in panel.info.text()
    doc.replace_project(load(SAMPLES / "moons_classifier.bflow.json"), None)
    qtbot.waitUntil(lambda: doc.ready_program(panel.host) is not None, timeout=5000)
    panel.refresh_lists()
    assert "has errors" not in panel.info.text()
    panel.steps.setValue(5)
    with qtbot.waitSignal(panel.training_finished, timeout=20000):
        qtbot.mouseClick(panel.train_button, Qt.LeftButton)
    assert panel.progress.value() == 5
    panel.setting_widgets["lr"].setValue(0.0)
    panel.seed.setValue(3)
    panel.steps.setValue(5)
    panel.loss.addItem("nope:output", "nope:output")        # a target the page does not have
    panel.loss.setCurrentIndex(panel.loss.count() - 1)
    assert not panel.start()
    assert "nope" in panel.info.text() and panel.progress.value() != 5
