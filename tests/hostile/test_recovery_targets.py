"""Hostile suite, where recovered work may be saved: a recovery note names the project file its
autosave was made from, and Recover used to take that name as the document's, so that Save wrote
the autosave over whatever the note named (another project, a file that was no project, a file
created anywhere). The name is now taken only when it is the very file the autosave was made from,
unchanged since; any other note is refused, saying which note and why, and its work is offered as
an untitled project, which Save asks a name for. Driven through the real message boxes."""
from __future__ import annotations

import json
import os
import socket

import pytest
from hostile_kit import changed_paths, snapshot
from PySide6.QtCore import QSettings, Qt, QTimer
from PySide6.QtWidgets import QApplication, QFileDialog, QMessageBox

from blockflow.io.project_io import load_project, save_project
from blockflow.project import Project

DEAD = 2 ** 22 + 17          # above Linux's largest pid: no such process


def _identity(path) -> list:
    """A file's identity as a note records it: device, inode, size, modification time (ns)."""
    st = os.stat(path)
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns]


def _project(block: str) -> Project:
    p = Project()
    p.add_page("main").add_node(block, id="b")
    return p


def _plant(rec, original, identity="absent") -> None:
    """An autosave (one Exp block) and its note naming ``original`` (with ``identity`` when
    given), as a crashed editor would have left them."""
    rec.mkdir(exist_ok=True)
    save_project(_project("Exp"), rec / "autosave-9-abc.bflow.json", backup=False)
    note = {"original": original, "saved_at": 1.0e9, "title": "planted", "pid": DEAD, "host": socket.gethostname()}
    if identity != "absent":
        note["identity"] = identity
    (rec / "autosave-9-abc.recovery.json").write_text(json.dumps(note))


def _answer(qtbot, button: str, seen: list) -> None:
    """Click ``button`` of the next message box shown, keeping its text in ``seen``."""
    tries = [500]                        # 5 s: a box that never comes must not leave a poller behind

    def click():
        box = QApplication.activeModalWidget()
        if not isinstance(box, QMessageBox):
            tries[0] -= 1
            if tries[0] > 0:
                QTimer.singleShot(10, click)
            return
        seen.append(box.text())
        found = [b for b in box.buttons() if b.text() == button]
        if not found:                    # not offered: close the box, and the test fails on what it saw
            seen.append(f"no button {button!r} among {[b.text() for b in box.buttons()]}")
            box.done(QMessageBox.Cancel)
            return
        qtbot.mouseClick(found[0], Qt.LeftButton)
    QTimer.singleShot(0, click)


@pytest.fixture
def window(qtbot, tmp_path, monkeypatch):
    from blockflow.gui.main_window import MainWindow

    monkeypatch.setenv("BLOCKFLOW_RECOVERY_DIR", str(tmp_path / "rec"))
    w = MainWindow(settings=QSettings(str(tmp_path / "s.ini"), QSettings.IniFormat))
    qtbot.addWidget(w)
    asked = []
    monkeypatch.setattr(QFileDialog, "getSaveFileName",
                        staticmethod(lambda *a, **k: asked.append(a) or ("", "")))   # Save As: cancelled
    w.save_as_asked = asked
    monkeypatch.setattr(QMessageBox, "question",          # closing with the recovered work unsaved
                        staticmethod(lambda *a, **k: QMessageBox.Discard))
    return w


@pytest.fixture
def home(tmp_path):
    """The user's folder: a precious project of theirs and a file that is no project."""
    folder = tmp_path / "home"
    folder.mkdir()
    save_project(_project("Tanh"), folder / "thesis.bflow.json", backup=False)
    (folder / "notes.txt").write_text("the user's notes\n")
    return folder


def _targets(tmp_path, home) -> dict:
    """Each hostile ``original`` with the reason its refusal must give."""
    thesis = str(home / "thesis.bflow.json")
    wrong, other = _identity(home / "notes.txt"), _identity(home / "thesis.bflow.json")
    return {
        "another project": ((thesis, "absent"), "does not record which file"),
        "another project, a made-up identity": ((thesis, [1, 2, 3, 4]), "is not the file the work was autosaved from"),
        "another file's identity": ((thesis, wrong), "is not the file the work was autosaved from"),
        "a file that is no project": ((str(home / "notes.txt"), other), "is not the file the work was autosaved from"),
        "a file to create": ((str(home / "autostart" / "evil.desktop"), None), "cannot be found"),
        "a folder": ((str(home), _identity(home)), "is not a file"),
        "a relative path": (("thesis.bflow.json", wrong), "is not an absolute path"),
        "the autosave itself": ((str(tmp_path / "rec" / "autosave-9-abc.bflow.json"), None), "recovery folder"),
        "a malformed identity": ((thesis, "x"), "does not record which file"),
    }


CASES = ["another project", "another project, a made-up identity", "another file's identity",
         "a file that is no project", "a file to create", "a folder", "a relative path", "the autosave itself",
         "a malformed identity"]


@pytest.mark.parametrize("case", CASES)
def test_a_note_naming_another_file_is_refused_and_its_work_recovered_untitled(window, qtbot, tmp_path, home,
                                                                               monkeypatch, case):
    (original, identity), why = _targets(tmp_path, home)[case]
    if case == "a relative path":
        monkeypatch.chdir(home)            # where the relative name would land
    _plant(tmp_path / "rec", original, identity)
    before = snapshot(home)
    seen = []
    _answer(qtbot, "Recover as Untitled", seen)
    assert window.offer_recovery()
    assert len(seen) == 1 and "autosave-9-abc.recovery.json" in seen[0] and why in seen[0], seen
    assert "will not save over" in seen[0]
    doc = window.document
    assert doc.path is None and doc.dirty and list(doc.page().nodes) == ["b"]     # the work is there
    assert doc.project.base_dir is None                  # and reads no data files beside the named one
    assert not window.save()                             # Save asks for a name (here: cancelled)
    assert len(window.save_as_asked) == 1
    assert changed_paths(before, snapshot(home)) == set()
    rec = tmp_path / "rec"
    assert not (rec / "autosave-9-abc.recovery.json").exists()                    # recovered: the old pair goes
    notes = [json.loads(p.read_text()) for p in rec.glob("*.recovery.json")]
    assert [n["original"] for n in notes] == [None]      # this window's autosave does not repeat the name


def test_a_refused_note_is_discarded_without_touching_what_it_names(window, qtbot, tmp_path, home):
    _plant(tmp_path / "rec", str(home / "thesis.bflow.json"))
    before = snapshot(home)
    seen = []
    _answer(qtbot, "Discard", seen)
    assert not window.offer_recovery()
    assert "does not record which file" in seen[0]
    # the note goes; the planted autosave, a regular file blockflow did not write, is left
    # (Recovery.discard: it might be a user's project) and is not offered again
    assert [p.name for p in (tmp_path / "rec").iterdir()] == ["autosave-9-abc.bflow.json"]
    assert not window.offer_recovery() and len(seen) == 1
    assert changed_paths(before, snapshot(home)) == set()


def _legit_note(tmp_path, home):
    """A real editor's autosave of thesis.bflow.json, left as a crash leaves it."""
    from blockflow.gui.document.autosave import Autosaver
    from blockflow.gui.document.document import Document

    doc = Document()
    doc.open(str(home / "thesis.bflow.json"))
    saver = Autosaver(doc, tmp_path / "rec", interval_seconds=0)
    doc.add_node("Relu", (100, 0), node_id="r")
    assert saver.autosave_now()
    saver.wait()
    note = json.loads(saver.note_file.read_text())
    note["pid"] = DEAD                                   # its editor died
    saver.note_file.write_text(json.dumps(note))
    saver._written_index = None
    saver.project_file, saver.note_file = tmp_path / "gone-a", tmp_path / "gone-b"   # no clean-up by it
    return note


def test_the_note_of_the_projects_own_autosave_is_recovered_to_it(window, qtbot, tmp_path, home):
    note = _legit_note(tmp_path, home)
    assert note["original"] == str(home / "thesis.bflow.json") and len(note["identity"]) == 4
    seen = []
    _answer(qtbot, "Recover", seen)
    assert window.offer_recovery()
    assert "will not save over" not in seen[0]
    doc = window.document
    assert doc.path == str(home / "thesis.bflow.json") and list(doc.page().nodes) == ["b", "r"]
    assert window.save() and not window.save_as_asked    # saved where it came from, as before the crash
    assert list(load_project(home / "thesis.bflow.json").pages[0].nodes) == ["b", "r"]


def test_a_project_changed_after_its_autosave_is_not_saved_over(window, qtbot, tmp_path, home):
    """The file the note names was saved again (by another editor) after the autosave: recovering
    onto it would put the older work over the newer."""
    _legit_note(tmp_path, home)
    newer = _project("Sigmoid")
    save_project(newer, home / "thesis.bflow.json", backup=False)
    before = snapshot(home)
    seen = []
    _answer(qtbot, "Recover as Untitled", seen)
    assert window.offer_recovery()
    assert "is not the file the work was autosaved from" in seen[0]
    assert window.document.path is None and not window.save()
    assert changed_paths(before, snapshot(home)) == set()


def test_a_project_replaced_while_the_offer_is_up_is_not_saved_over(window, qtbot, tmp_path, home, monkeypatch):
    """Checked again when Recover is clicked: the offer may stay open for hours."""
    _legit_note(tmp_path, home)
    real_exec = QMessageBox.exec

    def exec_then_replace(box):
        result = real_exec(box)
        os.replace(home / "notes.txt", home / "thesis.bflow.json")
        return result
    monkeypatch.setattr(QMessageBox, "exec", exec_then_replace)
    seen = []
    _answer(qtbot, "Recover", seen)
    assert window.offer_recovery()
    assert window.document.path is None
    assert "is not the file the work was autosaved from" in window.statusBar().currentMessage()
