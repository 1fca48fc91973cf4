"""The Backward target box keeps the user's pick while the page has an error (issue 16)."""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QSettings, Qt
import pytest
from PySide6.QtWidgets import QApplication, QMessageBox

from blockflow.gui.document.document import Document
from blockflow.gui.main_window import MainWindow
from blockflow.io.project_io import load_project
from blockflow.project import Edge

SAMPLE = Path(__file__).resolve().parents[2] / "sample_projects" / "stable_softmax.bflow.json"


@pytest.fixture(autouse=True)
def no_dialogs(monkeypatch):
    """Closing an edited window discards instead of asking."""
    monkeypatch.setattr(QMessageBox, "question", staticmethod(lambda *a, **k: QMessageBox.Discard))


def _window(qtbot, tmp_path):
    window = MainWindow(Document(load_project(SAMPLE)),
                        QSettings(str(tmp_path / "settings.ini"), QSettings.IniFormat))
    qtbot.addWidget(window)
    window.resize(1400, 850)
    window.show()
    qtbot.waitExposed(window)
    return window


def _items(combo) -> list:
    return [combo.itemData(i) for i in range(combo.count())]


def test_a_picked_target_stays_through_an_error_and_its_fix(qtbot, tmp_path):
    window = _window(qtbot, tmp_path)
    doc, combo = window.document, window.target_combo
    qtbot.waitUntil(lambda: combo.count() == 3, timeout=5000)
    before = _items(combo)
    assert combo.currentData() == "Sum_1:output"
    for _ in range(combo.count()):                   # the keyboard picks it, as a user would
        if combo.currentData() == "Max_1:output":
            break
        qtbot.keyClick(combo, Qt.Key_Up)
    assert window.session.target == "Max_1:output"

    # Unwiring x from Max_1 is an error that hides Max_1's type: the box must not change.
    doc.disconnect([Edge("x", "output", "Max_1", "input")])
    qtbot.waitUntil(lambda: doc.ready_program() is not None and not doc.ready_program().ok,
                    timeout=5000)
    QApplication.processEvents()
    assert _items(combo) == before and combo.currentData() == "Max_1:output"
    assert window.session.target == "Max_1:output"

    window.view.setFocus()
    qtbot.keyClick(window.view, Qt.Key_Z, Qt.ControlModifier)
    qtbot.waitUntil(lambda: doc.ready_program() is not None and doc.ready_program().ok, timeout=5000)
    QApplication.processEvents()
    assert _items(combo) == before and combo.currentData() == "Max_1:output"


def test_a_target_deleted_while_the_page_has_an_error_leaves_the_box(qtbot, tmp_path):
    window = _window(qtbot, tmp_path)
    doc, combo = window.document, window.target_combo
    qtbot.waitUntil(lambda: combo.count() == 3, timeout=5000)
    combo.setCurrentIndex(_items(combo).index("Max_1:output"))
    # Deleting Max_1 leaves StopGradient_1 unwired (an error): Max_1 goes, the rest stays.
    doc.remove_nodes(["Max_1"])
    qtbot.waitUntil(lambda: doc.ready_program() is not None and not doc.ready_program().ok,
                    timeout=5000)
    qtbot.waitUntil(lambda: _items(combo) == ["StopGradient_1:output", "Sum_1:output"], timeout=2000)
    assert combo.currentData() == "Sum_1:output"
    doc.undo_stack.undo()
    qtbot.waitUntil(lambda: doc.ready_program() is not None and doc.ready_program().ok, timeout=5000)
    qtbot.waitUntil(lambda: combo.currentData() == "Max_1:output", timeout=2000)
