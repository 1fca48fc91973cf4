"""Autosave and recovery (issue 7): what is written when, what is found after a crash, and a
real kill of a process that was editing."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from blockflow.gui.document.autosave import Autosaver, find_recoveries
from blockflow.gui.document.document import Document
from blockflow.io.project_io import dumps_project, save_project

ROOT = Path(__file__).resolve().parents[2]


def test_autosave_writes_only_unsaved_changes_and_cleans_up(qapp, tmp_path, qtbot):
    doc = Document()
    saver = Autosaver(doc, tmp_path / "rec", interval_seconds=0)
    assert not saver.autosave_now()                       # nothing to save
    doc.add_node("Tanh", (0, 0), node_id="t")
    assert saver.autosave_now()
    assert not saver.autosave_now()                       # under way already
    saver.wait()
    assert saver.project_file.exists() and saver.note_file.exists()
    assert not saver.autosave_now()                       # nothing new since
    doc.add_node("Exp", (100, 0), node_id="e")
    assert saver.autosave_now()
    saver.wait()
    recs = find_recoveries(tmp_path / "rec")
    assert recs == []                                     # this editor is alive: not an orphan
    doc.save(tmp_path / "p.bflow.json")                   # saved: the recovery files go
    assert not saver.project_file.exists() and not saver.note_file.exists()
    doc.add_node("Relu", (0, 100), node_id="r")
    saver.set_interval(0.05)
    with qtbot.waitSignal(saver.autosaved, timeout=3000):
        pass
    doc.undo_stack.undo()                                 # back to the saved state: clean
    assert not saver.project_file.exists()


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_orphans_are_found_described_loaded_and_discarded(qapp, tmp_path):
    import json
    import socket

    rec_dir = tmp_path / "rec"
    rec_dir.mkdir()
    doc = Document()
    doc.add_node("Placeholder", (0, 0), node_id="x", attrs={"shape": [2]})
    (tmp_path / "data").mkdir()
    mine = tmp_path / "data" / "mine.bflow.json"
    save_project(doc.project, mine, backup=False)
    st = os.stat(mine)             # the note records which file it was: see test_recovery_targets.py
    save_project(doc.project, rec_dir / "autosave-1.bflow.json", backup=False)
    (rec_dir / "autosave-1.recovery.json").write_text(json.dumps(
        {"original": str(mine), "identity": [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns],
         "saved_at": 1.0e9, "title": "mine", "pid": dead_pid(), "host": socket.gethostname()}))
    (rec_dir / "autosave-2.bflow.json").write_text("{torn")
    (rec_dir / "autosave-2.recovery.json").write_text(json.dumps(
        {"original": None, "saved_at": 2.0e9, "pid": dead_pid(), "host": socket.gethostname()}))
    (rec_dir / "autosave-3.recovery.json").write_text("not json")
    recs = find_recoveries(rec_dir)
    assert [r.project_file.name for r in recs][:2] == ["autosave-2.bflow.json", "autosave-1.bflow.json"]
    good = next(r for r in recs if r.project_file.name == "autosave-1.bflow.json")
    assert good.pages == 1 and good.blocks == 1 and not good.problem
    assert "mine.bflow.json" in good.describe() and "1 page, 1 block" in good.describe()
    torn = next(r for r in recs if r.project_file.name == "autosave-2.bflow.json")
    assert torn.problem and "cannot be recovered" in torn.describe()
    assert any("unreadable note" in r.problem for r in recs)
    project = good.load()
    assert project.base_dir == str(tmp_path / "data")    # data files next to the original
    target = Document()
    target.recover(project, good.original)
    assert target.dirty and target.path == good.original and dumps_project(target.project) == dumps_project(doc.project)
    for r in recs:
        r.discard()
    assert find_recoveries(rec_dir) == []


CHILD = textwrap.dedent("""
    import os, sys
    os.environ["QT_QPA_PLATFORM"] = "offscreen"
    from PySide6.QtWidgets import QApplication
    app = QApplication([])
    from blockflow.gui.document.autosave import Autosaver
    from blockflow.gui.document.document import Document
    from blockflow.io.project_io import dumps_project
    expected = sys.argv[1]
    doc = Document()
    saver = Autosaver(doc, interval_seconds=0.05)
    edits = [0]

    def on_saved(_path):
        with open(expected + ".tmp", "w") as f:      # what the autosave holds, for the test
            f.write(dumps_project(doc.project))
        os.replace(expected + ".tmp", expected)
        print("autosaved", edits[0], flush=True)
        if edits[0] < 3:                 # then no more edits: the last autosave stays the last
            edits[0] += 1
            doc.add_node("Tanh", (edits[0] * 50.0, 0.0))
            if edits[0] % 2 == 0:
                doc.set_label(list(doc.page().nodes)[0], f"edit {edits[0]}")

    saver.autosaved.connect(on_saved)
    doc.add_node("Placeholder", (0, 0), node_id="x", attrs={"shape": [3]})
    app.exec()
""")


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_a_killed_editor_process_is_recovered_exactly_as_last_autosaved(qapp, tmp_path):
    rec_dir = tmp_path / "rec"
    expected = tmp_path / "expected.json"
    env = dict(os.environ, BLOCKFLOW_RECOVERY_DIR=str(rec_dir),
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(expected)], stdout=subprocess.PIPE, env=env)
    try:
        seen = 0
        while seen < 4:                                   # let it autosave a few edits
            line = proc.stdout.readline()
            assert line.startswith(b"autosaved"), line
            seen += 1
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
        proc.stdout.close()
    recs = find_recoveries(rec_dir)
    assert len(recs) == 1 and not recs[0].problem and recs[0].original is None
    assert dumps_project(recs[0].load()) == expected.read_text()


# ------------------------------------------------------------------ written off the UI thread
@pytest.fixture
def gated(monkeypatch):
    """The autosave's project writer held until the test opens the gate; the threads it ran on."""
    import threading

    from blockflow.gui.document import autosave

    gate, threads, real = threading.Event(), [], autosave.dumps_project

    def held(project, **kw):
        threads.append(threading.current_thread())
        assert gate.wait(20), "the gate was never opened"
        return real(project, **kw)

    monkeypatch.setattr(autosave, "dumps_project", held)
    yield gate, threads
    gate.set()      # a test that failed before opening it does not hold the worker


def _edited_document(tmp_path):
    from blockflow.page_layout import Frame

    doc = Document()
    doc.add_node("Placeholder", (0, 0), node_id="x", attrs={"shape": [2]})
    doc.add_node("Tanh", (100, 0), node_id="t")
    doc.connect("x", "output", "t", "x")
    page = doc.project.pages[0]
    page.set_bends(page.edges[0], [(50.0, 40.0)])
    page.insert_frame(Frame("input", "green", "a note", ("x",)))
    return doc


def test_an_autosave_is_written_off_the_ui_thread_as_the_project_was_when_it_started(qapp, tmp_path, gated):
    import threading

    gate, threads = gated
    doc = _edited_document(tmp_path)
    saver = Autosaver(doc, tmp_path / "rec", interval_seconds=0)
    written = []
    saver.autosaved.connect(written.append)
    expected = dumps_project(doc.project)
    assert saver.autosave_now()              # returns with the writer still held: not on this thread
    doc.add_node("Exp", (200, 0), node_id="late")      # edits while it is written
    doc.set_attr("x", "shape", [3])
    doc.move_nodes({"t": ((100.0, 0.0), (300.0, 10.0))})
    gate.set()
    saver.wait()
    assert threads and threading.main_thread() not in threads
    assert saver.project_file.read_text() == expected and written == [str(saver.project_file)]
    assert saver.autosave_now()              # the later edits are unsaved still: a new autosave
    saver.wait()
    assert saver.project_file.read_text() == dumps_project(doc.project) != expected


@pytest.mark.parametrize("how", ["save", "replace"])
def test_a_discard_while_an_autosave_is_written_leaves_no_recovery_files(qapp, tmp_path, gated, how):
    gate, _ = gated
    doc = _edited_document(tmp_path)
    saver = Autosaver(doc, tmp_path / "rec", interval_seconds=0)
    written, failed = [], []
    saver.autosaved.connect(written.append)
    saver.failed.connect(failed.append)
    assert saver.autosave_now()
    if how == "save":
        doc.save(tmp_path / "p.bflow.json")      # clean: the recovery files go, and the one on its way
    else:
        doc.replace_project(Document().project, None)
    gate.set()
    saver.wait()
    assert not saver.project_file.exists() and not saver.note_file.exists()
    assert written == [] and failed == [] and not list((tmp_path / "rec").glob("*"))


def test_an_autosave_that_raises_is_reported_in_order_and_frees_the_saver(qapp, tmp_path, monkeypatch, qtbot):
    """A write that raises something unforeseen (no memory for the text of a huge project, a
    bug): wait() reports it as it reports any ending, in order with the autosaves after it, and
    the next autosave of that state is not refused as "under way"."""
    from blockflow.gui.document import autosave

    doc = _edited_document(tmp_path)
    saver = Autosaver(doc, tmp_path / "rec", interval_seconds=0)
    events = []
    saver.autosaved.connect(lambda path: events.append("autosaved"))
    saver.failed.connect(lambda msg: events.append(msg))
    real, calls = autosave.dumps_project, []

    def first_raises(project, **kw):
        calls.append(1)
        if len(calls) == 1:
            raise MemoryError("no room for the text")
        return real(project, **kw)

    monkeypatch.setattr(autosave, "dumps_project", first_raises)
    assert saver.autosave_now()
    saver.wait()
    assert events == ["autosave failed: no room for the text"]
    assert saver.autosave_now()                  # nothing is under way: the same state again
    saver.wait()
    assert events[1:] == ["autosaved"] and saver.project_file.exists()

    # two queued, the first raising: the UI thread hears of both, whichever report it reads first
    del events[:], calls[:]
    doc.add_node("Exp", (200, 0), node_id="e1")
    assert saver.autosave_now()
    doc.add_node("Exp", (300, 0), node_id="e2")
    assert saver.autosave_now()
    saver._worker.wait()                         # both ended before the UI thread reads a report
    qtbot.waitUntil(lambda: len(events) >= 2, timeout=3000)
    qapp.processEvents()
    assert events == ["autosave failed: no room for the text", "autosaved"]


def test_every_edit_is_autosaved_even_one_that_keeps_the_undo_index(qapp, tmp_path):
    """A move merged into the gesture's step, or an undo then another edit, leaves the undo
    stack's index and count as they were: the state is still new and must be autosaved (the
    recovery held the state before, and a crash lost the edit)."""
    doc = Document()
    doc.add_node("Tanh", (0, 0), node_id="t")
    saver = Autosaver(doc, tmp_path / "rec", interval_seconds=0)
    gesture = doc.new_gesture()
    doc.move_nodes({"t": ((0.0, 0.0), (10.0, 0.0))}, gesture=gesture)
    assert saver.autosave_now()
    saver.wait()
    doc.move_nodes({"t": ((10.0, 0.0), (99.0, 0.0))}, gesture=gesture)    # the same drag, merged
    assert saver.autosave_now()
    saver.wait()
    assert saver.project_file.read_text() == dumps_project(doc.project)
    doc.add_node("Exp", (0, 100), node_id="a")
    assert saver.autosave_now()
    doc.undo_stack.undo()                        # while that is written: undone, another edit
    doc.add_node("Relu", (0, 100), node_id="b")
    assert saver.autosave_now()
    saver.wait()
    assert saver.project_file.read_text() == dumps_project(doc.project)
    assert not saver.autosave_now()              # and nothing new since


def test_the_note_names_the_file_as_it_was_when_the_work_was_copied(qapp, tmp_path, gated):
    """The project file saved again by someone else (another editor, a checkout) while the
    autosave is written: the note must not vouch for that newer file, or a recovery would
    save over it without asking."""
    import json

    gate, _ = gated
    mine = tmp_path / "mine.bflow.json"
    save_project(_edited_document(tmp_path).project, mine, backup=False)
    doc = Document()
    doc.open(str(mine))
    saver = Autosaver(doc, tmp_path / "rec", interval_seconds=0)
    doc.add_node("Exp", (200, 0), node_id="mine")
    assert saver.autosave_now()
    other = Document()
    other.open(str(mine))
    other.add_node("Relu", (300, 0), node_id="theirs")
    other.save()                                 # while this autosave is being written
    gate.set()
    saver.wait()
    note = json.loads(saver.note_file.read_text())
    saver.note_file.write_text(json.dumps({**note, "pid": dead_pid()}))   # then this editor died
    (rec,) = find_recoveries(tmp_path / "rec")
    assert rec.refused and rec.target is None    # recovered untitled: their save is not overwritten


def test_an_autosave_let_go_says_nothing_even_when_it_failed(qapp, tmp_path, gated, monkeypatch):
    """A state that could not be written, fixed and saved while its autosave was under way:
    the save ended that autosave, whose failure is no news (the status bar said the autosave
    failed right after the save)."""
    from blockflow.errors import ProjectFileError
    from blockflow.gui.document import autosave

    gate, _ = gated
    held = autosave.dumps_project

    def held_then_refused(project, **kw):
        held(project, **kw)
        raise ProjectFileError("autosave", "pages[0]", "a state that cannot be written")

    monkeypatch.setattr(autosave, "dumps_project", held_then_refused)
    doc = _edited_document(tmp_path)
    saver = Autosaver(doc, tmp_path / "rec", interval_seconds=0)
    failed = []
    saver.failed.connect(failed.append)
    assert saver.autosave_now()
    doc.save(tmp_path / "p.bflow.json")
    gate.set()
    saver.wait()
    assert failed == [] and not list((tmp_path / "rec").glob("*"))
