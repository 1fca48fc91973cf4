"""An empty page says what to do (issue 16): a hint on the canvas with the three first actions,
gone as soon as the page has a block, back when it is empty again, in the way of no gesture, and
never in a rendered picture."""
from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import QPoint, QSettings, Qt
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QApplication, QMessageBox

from blockflow.gui.canvas.render import render_page
from blockflow.gui.document.document import Document
from blockflow.gui.main_window import MainWindow

from test_main_window import palette_drop

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_projects" / "stable_softmax.bflow.json"


@pytest.fixture(autouse=True)
def _font_and_no_prompts(qapp, monkeypatch):
    qapp.setFont(QFont("DejaVu Sans", 9))
    monkeypatch.setattr(QMessageBox, "question", staticmethod(lambda *a, **k: QMessageBox.Discard))


@pytest.fixture
def window(qtbot, tmp_path):
    window = MainWindow(Document(), QSettings(str(tmp_path / "settings.ini"), QSettings.IniFormat))
    qtbot.addWidget(window)
    window.resize(1440, 880)
    window.show()
    qtbot.waitExposed(window)
    window.activateWindow()
    window.view.setFocus()
    QApplication.processEvents()
    return window


def hint_shown(window) -> bool:
    hint = window.view.empty_hint
    return hint.isVisible() and not hint.visibleRegion().isEmpty()


def key(qtbot, window, k, modifier=Qt.NoModifier) -> None:
    window.view.setFocus()
    qtbot.keyClick(window.view, k, modifier)
    QApplication.processEvents()


def test_a_new_page_says_what_to_do_first(qtbot, window):
    hint = window.view.empty_hint
    assert hint_shown(window)
    text = hint.text()
    for words in ("This page is empty", "Blocks palette", "<b>Tab</b>", "<b>right-click</b>",
                  "output port", "input port", "Run &gt; Forward"):
        assert words in text, words
    # in the middle of the canvas, wholly in sight
    vp = window.view.viewport().rect()
    assert vp.contains(hint.geometry())
    assert abs(hint.geometry().center().x() - vp.center().x()) <= 2
    assert abs(hint.geometry().center().y() - vp.center().y()) <= 12
    # it stays there when the canvas is scrolled or the window resized
    qtbot.mousePress(window.view.viewport(), Qt.MiddleButton, Qt.NoModifier, vp.center())
    qtbot.mouseMove(window.view.viewport(), vp.center() + QPoint(90, 40))
    qtbot.mouseRelease(window.view.viewport(), Qt.MiddleButton, Qt.NoModifier, vp.center() + QPoint(90, 40))
    window.resize(1200, 800)
    QApplication.processEvents()
    vp = window.view.viewport().rect()
    assert vp.contains(hint.geometry()) and abs(hint.geometry().center().x() - vp.center().x()) <= 2


def test_the_hint_goes_with_the_first_block_and_comes_back_when_the_page_is_empty(qtbot, window):
    view, doc = window.view, window.document
    centre = view.viewport().rect().center()
    # the hint is in no gesture's way: the mouse goes through it to the canvas
    assert view.viewport().childAt(centre) is None
    palette_drop(window, "Softmax", view.mapToScene(centre))       # dropped right on the hint
    assert len(doc.page().nodes) == 1 and not hint_shown(window)
    key(qtbot, window, Qt.Key_Z, Qt.ControlModifier)                # undo: empty again
    assert not doc.page().nodes and hint_shown(window)
    window.actions["redo"].trigger()
    QApplication.processEvents()
    assert len(doc.page().nodes) == 1 and not hint_shown(window)
    (node,) = doc.page().nodes
    item = view.node_item(node)
    qtbot.mouseClick(view.viewport(), Qt.LeftButton, Qt.NoModifier,
                     view.mapFromScene(item.sceneBoundingRect().center()))
    assert view.selected_nodes() == [node]
    key(qtbot, window, Qt.Key_Delete)
    assert not doc.page().nodes and hint_shown(window)


def test_the_hint_follows_the_page_and_project_shown(qtbot, window):
    doc = window.document
    palette_drop(window, "Tanh", window.view.mapToScene(window.view.viewport().rect().center()))
    assert not hint_shown(window)
    window.actions["add_page"].trigger()                            # Page > Add Page: a new, empty page
    QApplication.processEvents()
    assert not doc.page().nodes and hint_shown(window)
    key(qtbot, window, Qt.Key_PageUp, Qt.ControlModifier)           # back to the first page
    assert doc.page().nodes and not hint_shown(window)
    doc.open(SAMPLE)                                                # a project with blocks
    QApplication.processEvents()
    assert not hint_shown(window)
    window.actions["new"].trigger()                                 # File > New: empty
    QApplication.processEvents()
    assert hint_shown(window)


def test_the_hint_is_not_in_a_rendered_picture(tmp_path, window):
    """The no-display render (and File > Export) draws the page, not the editor's hint."""
    assert hint_shown(window)
    svg = tmp_path / "empty.svg"
    render_page(window.document.project, None, svg)
    text = svg.read_text()
    assert "<svg" in text and "empty" not in text.lower() and "Tab" not in text and "Forward" not in text
