"""Hostile suite, recovery at start: what is in the recovery folder was not necessarily written by
blockflow. A symbolic link, a named pipe or a huge file at a note's or an autosave's name must
neither hang the editor's start nor read without end: it is listed as an autosave that cannot be
recovered, saying which file and why, and the good autosaves beside it are still offered."""
from __future__ import annotations

import json
import os
import socket
import time

import pytest

from blockflow.io.project_io import save_project
from blockflow.project import Project

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes and /dev/zero are POSIX's")

DEAD = 2 ** 22 + 17          # above Linux's largest pid: no such process


def _note(**fields) -> str:
    return json.dumps({"original": None, "pid": DEAD, "host": socket.gethostname(), "title": "t",
                       "saved_at": 1.0e9, **fields})


def _project() -> Project:
    p = Project()
    p.add_page("main").add_node("Tanh", id="t")
    return p


def _plant(rec, stem: str, which: str, how: str) -> None:
    """A note and an autosave at ``stem``, the one named by ``which`` replaced as ``how`` says."""
    note, project = rec / f"{stem}.recovery.json", rec / f"{stem}.bflow.json"
    note.write_text(_note(title=stem))
    save_project(_project(), project, backup=False)
    target = note if which == "note" else project
    target.unlink()
    if how == "fifo":
        os.mkfifo(target)
    elif how == "dev_zero":
        target.symlink_to("/dev/zero")
    elif how == "symlink_to_a_good_file":
        good = rec.parent / f"elsewhere-{stem}"
        good.write_text(_note(title=stem) if which == "note" else "")
        if which == "project":
            save_project(_project(), good, backup=False)
        target.symlink_to(good)
    elif how == "huge":
        with open(target, "wb") as f:
            f.truncate(1 << 40)           # a sparse terabyte: what st_size says is refused unread


@pytest.mark.parametrize("which", ["note", "project"])
@pytest.mark.parametrize("how,says", [("fifo", "is not a regular file"), ("dev_zero", "is a symbolic link"),
                                      ("symlink_to_a_good_file", "is a symbolic link"), ("huge", "bytes; the limit is")])
def test_a_planted_recovery_file_is_listed_unrecoverable_fast_and_the_good_one_still_offered(tmp_path, qapp, which,
                                                                                            how, says, monkeypatch):
    """Found: a note or autosave that was a named pipe hung the editor's start for ever (the
    read, or the open, waited for a writer); one that was a symbolic link to /dev/zero read
    until memory ran out."""
    from blockflow.gui.document.autosave import find_recoveries

    rec = tmp_path / "rec"
    rec.mkdir()
    save_project(_project(), rec / "good.bflow.json", backup=False)
    (rec / "good.recovery.json").write_text(_note(title="good", saved_at=2.0e9))
    _plant(rec, "planted", which, how)
    opened = []
    real_open = os.open

    def recording(path, flags, *args, **kwargs):
        opened.append((os.fspath(path), flags))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", recording)
    start = time.monotonic()
    found = find_recoveries(rec)
    # A backstop for a hang (milliseconds are needed; a pipe opened to read waits for ever) ...
    assert time.monotonic() - start < 5
    # ... and what prevents it: a planted file is only ever opened without waiting for a writer
    # and without following a link.
    planted = [flags for path, flags in opened if os.path.basename(path).startswith("planted")]
    assert planted and all(flags & os.O_NONBLOCK and flags & os.O_NOFOLLOW for flags in planted), planted
    assert [r.title for r in found][0] == "good" and not found[0].problem
    assert "1 page, 1 block" in found[0].describe() and found[0].load().pages[0].nodes
    bad = found[1]
    name = f"planted.{'recovery' if which == 'note' else 'bflow'}.json"
    assert name in bad.problem and says in bad.problem, bad.problem
    assert "cannot be recovered" in bad.describe()
    bad.discard()                      # Discard removes the planted entries, not what a link names,
    left = [p.name for p in rec.iterdir() if p.name.startswith("planted")]
    # nor a regular file blockflow did not write (it may be a user's project: see below)
    assert left == (["planted.bflow.json"] if which == "note" or how == "huge" else [])
    assert [r.title for r in find_recoveries(rec)] == ["good"]      # and what is left is not offered
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("elsewhere")] == \
        (["elsewhere-planted"] if how == "symlink_to_a_good_file" else [])


def test_discarding_a_stray_note_leaves_the_project_beside_it(tmp_path, qapp):
    """Found (hostile24, left then): a recovery folder pointed at a project folder
    (BLOCKFLOW_RECOVERY_DIR), with a stray or planted ``X.recovery.json`` in it, was offered as
    an autosave of ``X.bflow.json``, and Discard deleted the user's project. Discard now removes
    the autosave only when blockflow wrote it (ownfiles' ledger); the note goes either way."""
    from blockflow.gui.document.autosave import find_recoveries

    projects = tmp_path / "projects"
    projects.mkdir()
    mine = projects / "X.bflow.json"
    save_project(_project(), mine, backup=False)          # the user's own save
    before = mine.read_bytes()
    (projects / "X.recovery.json").write_text(_note(title="X"))
    (rec,) = find_recoveries(projects)
    assert rec.project_file == mine
    rec.discard()
    assert mine.read_bytes() == before
    assert not (projects / "X.recovery.json").exists() and find_recoveries(projects) == []


def test_discarding_a_real_autosave_removes_it(tmp_path, qapp):
    """The other side: an autosave the editor wrote (through ownfiles) is removed by Discard."""
    from blockflow.gui.document.autosave import Autosaver, find_recoveries
    from blockflow.gui.document.document import Document

    rec_dir = tmp_path / "rec"
    doc = Document()
    saver = Autosaver(doc, rec_dir, interval_seconds=0)
    doc.add_node("Tanh", (0, 0), node_id="t")
    assert saver.autosave_now()
    saver.wait()
    note = json.loads(saver.note_file.read_text())
    saver.note_file.write_text(json.dumps({**note, "pid": DEAD}))   # as if that editor had died
    (rec,) = find_recoveries(rec_dir)
    rec.discard()
    assert not saver.project_file.exists() and not saver.note_file.exists()
