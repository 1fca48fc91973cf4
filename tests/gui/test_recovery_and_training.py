"""The main window's autosave and recovery (a real editor process killed with SIGKILL, then a
new window offered its work), and the Train dock on the canvas."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QMessageBox

from blockflow.gui.document.autosave import find_recoveries
from blockflow.gui.document.document import Document
from blockflow.gui.main_window import MainWindow
from blockflow.io.project_io import dumps_project, load_project

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_projects" / "moons_classifier.bflow.json"

EDITOR = textwrap.dedent("""
    import os, sys
    os.environ["QT_QPA_PLATFORM"] = "offscreen"
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication
    app = QApplication([])
    from blockflow.gui.document.document import Document
    from blockflow.gui.main_window import MainWindow
    from blockflow.io.project_io import dumps_project
    sample, expected, settings = sys.argv[1:4]
    doc = Document()
    doc.open(sample, as_copy=True)
    window = MainWindow(doc, QSettings(settings, QSettings.IniFormat))
    window.show()
    edits = [0]

    def autosaved(_path):
        with open(expected + ".tmp", "w") as f:
            f.write(dumps_project(doc.project))
        os.replace(expected + ".tmp", expected)
        print("autosaved", edits[0], flush=True)
        if edits[0] < 3:                 # edit, wait for the next autosave; then stop editing
            edits[0] += 1
            nid = doc.add_node("Tanh", (100.0 * edits[0], 600.0))
            doc.set_label(nid, f"edit {edits[0]}")

    window.autosaver.autosaved.connect(autosaved)
    doc.add_node("Relu", (0.0, 600.0), node_id="first_edit")
    app.exec()
""")


def click(button_text):
    """Answer the next QMessageBox by its button's text."""
    def exec_(box):
        for b in box.buttons():
            if b.text().replace("&", "") == button_text:
                box._clicked = b
                return 0
        raise AssertionError(f"no button {button_text!r} in {[b.text() for b in box.buttons()]}")
    return exec_


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_a_killed_editor_is_offered_and_recovered_exactly_as_last_autosaved(qtbot, tmp_path, monkeypatch):
    rec_dir = tmp_path / "recovery"
    expected = tmp_path / "expected.json"
    env = dict(os.environ, BLOCKFLOW_RECOVERY_DIR=str(rec_dir), BLOCKFLOW_AUTOSAVE_SECONDS="0.1",
               QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-c", EDITOR, str(SAMPLE), str(expected), str(tmp_path / "child.ini")],
                            stdout=subprocess.PIPE, env=env)
    try:
        for k in range(4):
            line = proc.stdout.readline()
            assert line.split() == [b"autosaved", str(k).encode()], line
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
    monkeypatch.setenv("BLOCKFLOW_RECOVERY_DIR", str(rec_dir))
    [orphan] = find_recoveries(rec_dir)
    assert "an untitled project" in orphan.describe() and "blocks" in orphan.describe()
    window = MainWindow(Document(), QSettings(str(tmp_path / "parent.ini"), QSettings.IniFormat))
    qtbot.addWidget(window)
    shown = []
    monkeypatch.setattr(QMessageBox, "exec", lambda box: (shown.append(box.text()), click("Recover")(box))[1])
    monkeypatch.setattr(QMessageBox, "clickedButton", lambda box: box._clicked)
    # closing at the end, or at teardown when an assert below fails: the recovered work is unsaved,
    # and a real "Unsaved changes" box would wait for a click forever (the suite hung)
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.Discard)
    assert window.offer_recovery()
    assert "did not close normally" in shown[0] and orphan.describe() in shown[0]
    assert dumps_project(window.document.project) == expected.read_text()   # exactly the last autosave
    assert window.document.dirty and window.windowTitle().startswith("Untitled")
    assert not orphan.project_file.exists()               # taken back: the old autosave is gone
    assert window.autosaver.project_file.exists()         # and this window autosaved it at once
    assert find_recoveries(rec_dir) == []                 # this editor is alive
    window.close()                                        # a clean close: nothing left to recover
    assert not window.autosaver.project_file.exists()


def test_discard_and_later(qtbot, tmp_path, monkeypatch):
    import json
    import socket

    from blockflow.io.project_io import save_project

    rec_dir = tmp_path / "rec"
    rec_dir.mkdir()
    monkeypatch.setenv("BLOCKFLOW_RECOVERY_DIR", str(rec_dir))
    for name in ("a", "b"):
        save_project(load_project(SAMPLE), rec_dir / f"{name}.bflow.json", backup=False)
        (rec_dir / f"{name}.recovery.json").write_text(json.dumps(
            {"original": None, "saved_at": 1.0e9, "pid": 2 ** 22 + 17, "host": socket.gethostname()}))
    window = MainWindow(Document(), QSettings(str(tmp_path / "s.ini"), QSettings.IniFormat))
    qtbot.addWidget(window)
    answers = iter(["Later", "Discard"])
    monkeypatch.setattr(QMessageBox, "exec", lambda box: click(next(answers))(box))
    monkeypatch.setattr(QMessageBox, "clickedButton", lambda box: box._clicked)
    assert not window.offer_recovery()
    assert len(find_recoveries(rec_dir)) == 1 and not window.document.dirty


def test_the_train_dock_trains_and_shows_its_runs_on_the_canvas(qtbot, tmp_path, monkeypatch):
    monkeypatch.setenv("BLOCKFLOW_RECOVERY_DIR", str(tmp_path / "rec"))
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.Discard)   # closing at the end
    doc = Document()
    doc.open(SAMPLE, as_copy=True)
    window = MainWindow(doc, QSettings(str(tmp_path / "s.ini"), QSettings.IniFormat))
    qtbot.addWidget(window)
    window.resize(1400, 900)
    window.show()
    qtbot.waitExposed(window)
    window.actions["train"].trigger()
    panel = window.train_panel
    assert window.docks["train"].isVisible()
    panel.steps.setValue(60)
    kinds = []
    window.run_controller.results_changed.connect(
        lambda: kinds.append(getattr(window.run_controller.results(), "kind", None)))
    with qtbot.waitSignal(panel.training_finished, timeout=30000):
        panel.train_button.click()
    assert "training" in kinds                 # the canvas showed runs of the values being trained
    assert doc.undo_stack.undoText() == "Train 60 steps"
    items = window.view.diagram_scene().node_items
    qtbot.waitUntil(lambda: all(items[n].results is not None for n in ("loss", "accuracy")), timeout=5000)
    # the training's last values, stored, are run again: current results and gradient highlighting
    qtbot.waitUntil(lambda: window.view.gradients.current is not None, timeout=10000)
    results = window.run_controller.results()
    assert results.kind == "backward" and not results.stale and results.target == "loss:output"


@pytest.mark.parametrize("then", ["autosave", "save"])
def test_a_recovered_autosave_stays_until_this_window_has_the_work_on_disk(qtbot, tmp_path, monkeypatch, then):
    """Recover, and this window's own autosave fails (a full disk): the crashed editor's files
    are the only copy of the work on disk, so they stay until this window's autosave is written
    or the work is saved (then they go, not to be offered again at the next start)."""
    import errno
    import json
    import socket

    from blockflow import ownfiles

    rec_dir = tmp_path / "rec"
    rec_dir.mkdir()
    monkeypatch.setenv("BLOCKFLOW_RECOVERY_DIR", str(rec_dir))
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.Discard)   # closing at the end
    ownfiles.write_own(rec_dir / "a.bflow.json", SAMPLE.read_bytes(), variants=False)   # as an editor wrote it
    (rec_dir / "a.recovery.json").write_text(json.dumps(
        {"original": None, "saved_at": 1.0e9, "pid": 2 ** 22 + 17, "host": socket.gethostname()}))
    window = MainWindow(Document(), QSettings(str(tmp_path / "s.ini"), QSettings.IniFormat))
    qtbot.addWidget(window)
    (rec,) = find_recoveries(rec_dir)
    real = ownfiles.write_own

    def full(*_a, **_k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(ownfiles, "write_own", full)
    assert window._recover(rec)
    assert window.document.dirty and not window.autosaver.project_file.exists()
    assert rec.project_file.exists() and rec.note_file.exists()         # the only copy on disk
    assert "kept" in window.statusBar().currentMessage()
    monkeypatch.setattr(ownfiles, "write_own", real)
    if then == "autosave":
        assert window.autosaver.autosave_now()
        window.autosaver.wait()
        assert window.autosaver.project_file.exists()
    else:
        window.document.save(tmp_path / "mine.bflow.json")
    assert not rec.project_file.exists() and not rec.note_file.exists()
    assert find_recoveries(rec_dir) == []
    window.close()
    assert list(rec_dir.iterdir()) == []


def test_a_window_closed_with_its_changes_discarded_autosaves_no_more(qtbot, tmp_path, monkeypatch):
    """The close lets the changes go: no timer tick before the application quits may write them
    to the recovery folder again (they would be offered at the next start)."""
    monkeypatch.setenv("BLOCKFLOW_RECOVERY_DIR", str(tmp_path / "rec"))
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.Discard)
    window = MainWindow(Document(), QSettings(str(tmp_path / "s.ini"), QSettings.IniFormat))
    qtbot.addWidget(window)
    window.autosaver.set_interval(0.02)
    window.document.add_node("Tanh", (0, 0), node_id="t")
    with qtbot.waitSignal(window.autosaver.autosaved, timeout=3000):
        pass
    window.close()
    assert window.document.dirty and not window.autosaver.project_file.exists()
    qtbot.wait(150)                                       # several intervals
    window.autosaver.wait()
    assert not window.autosaver.project_file.exists() and not list((tmp_path / "rec").glob("*.bflow.json"))
