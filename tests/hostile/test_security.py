"""Hostile suite, security: files blockflow writes on its own initiative (the no-display picture,
backups, autosaves and recovery notes, temporaries) never follow a planted symlink and never
replace a file blockflow did not write; the user is told where the file went instead.

Every case plants its trap in tmp_path, points it at a file outside the folder blockflow writes
in, and proves with a snapshot that nothing but the named paths changed.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hostile_kit import changed_paths, run_cli, snapshot

from blockflow import ownfiles
from blockflow.io.project_io import load_project, save_project

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_projects"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
NO_DISPLAY = {"QT_QPA_PLATFORM": "", "DISPLAY": "", "WAYLAND_DISPLAY": ""}


@pytest.fixture
def victim(tmp_path):
    """A file of the user's outside the folder blockflow writes in: what a planted link aims at."""
    outside = tmp_path / "outside"
    outside.mkdir()
    target = outside / "victim.txt"
    target.write_text("the user's precious file\n")
    return target


@pytest.fixture
def project(tmp_path):
    """A copy of a small sample (with a loss, so the picture shows gradients) in its own folder."""
    folder = tmp_path / "work"
    folder.mkdir()
    path = folder / "net.bflow.json"
    shutil.copy(SAMPLES / "stable_softmax.bflow.json", path)
    return path


# --------------------------------------------------------------------------------------------
# The no-display picture


def test_a_symlink_planted_at_the_no_display_picture_is_not_followed(tmp_path, project, victim):
    trap = project.with_name("net.png")
    trap.symlink_to(victim)
    before = snapshot(tmp_path)
    r = run_cli(project, env=NO_DISPLAY, cwd=tmp_path)
    r.assert_clean_message()
    assert r.returncode == 0, r.output
    moved = project.with_name("net-1.png")
    assert changed_paths(before, snapshot(tmp_path)) == {str(moved)}     # the victim, the link: untouched
    assert victim.read_text() == "the user's precious file\n" and os.readlink(trap) == str(victim)
    assert moved.read_bytes().startswith(PNG_MAGIC)
    assert f"{trap} is a symbolic link, so blockflow left it alone and wrote the picture to {moved}" in r.stdout
    assert f"wrote {moved}" in r.stdout


def _no_display_picture(project, monkeypatch, capsys) -> str:
    """Run ``blockflow PROJECT`` in this process as it runs without a display; its output."""
    from blockflow.gui import app

    monkeypatch.setattr(app, "has_display", lambda: False)
    assert app.main([str(project)]) == 0
    return capsys.readouterr().out


def test_the_users_own_picture_survives_and_blockflow_reuses_only_its_own(tmp_path, project, monkeypatch,
                                                                          capsys, qapp):
    mine = project.with_name("net.png")
    mine.write_bytes(b"my own drawing, not blockflow's")
    before = snapshot(tmp_path)
    out = _no_display_picture(project, monkeypatch, capsys)
    first = project.with_name("net-1.png")
    assert changed_paths(before, snapshot(tmp_path)) == {str(first)}
    assert f"{mine} is a file blockflow did not write, so blockflow left it alone and wrote the picture to {first}" in out
    # the next run replaces blockflow's own net-1.png, never the user's, and makes no net-2.png
    before = snapshot(tmp_path)
    out = _no_display_picture(project, monkeypatch, capsys)
    assert changed_paths(before, snapshot(tmp_path)) == {str(first)} and f"wrote {first}" in out
    assert mine.read_bytes() == b"my own drawing, not blockflow's"
    # the user edits blockflow's picture: it is theirs now, and kept
    first.write_bytes(first.read_bytes() + b"edited")
    before = snapshot(tmp_path)
    out = _no_display_picture(project, monkeypatch, capsys)
    assert changed_paths(before, snapshot(tmp_path)) == {str(project.with_name("net-2.png"))}


def test_the_no_display_picture_replaces_its_own_earlier_picture_in_place(tmp_path, project, monkeypatch,
                                                                         capsys, qapp):
    out = _no_display_picture(project, monkeypatch, capsys)
    picture = project.with_name("net.png")
    assert f"wrote {picture} (run forward" in out and "left it alone" not in out
    before = snapshot(tmp_path)
    _no_display_picture(project, monkeypatch, capsys)
    assert changed_paths(before, snapshot(tmp_path)) == {str(picture)}   # replaced, no net-1.png
    # a folder, or a hard link to the user's file, at the name: not blockflow's
    picture.unlink()
    picture.mkdir()
    out = _no_display_picture(project, monkeypatch, capsys)
    assert f"{picture} is a folder" in out and project.with_name("net-1.png").is_file()


# --------------------------------------------------------------------------------------------
# Backups kept by a save


def _sample():
    return load_project(SAMPLES / "stable_softmax.bflow.json")


def test_a_symlink_planted_at_the_backup_is_not_followed(tmp_path, victim):
    path = tmp_path / "p.bflow.json"
    save_project(_sample(), path)
    bak = tmp_path / "p.bflow.json.bak"
    bak.symlink_to(victim)
    first = path.read_bytes()
    before = snapshot(tmp_path)
    project = _sample()
    project.metadata["title"] = "second"
    result = save_project(project, path)
    moved = tmp_path / "p.bflow.json-1.bak"
    assert changed_paths(before, snapshot(tmp_path)) == {str(path), str(moved)}
    assert victim.read_text() == "the user's precious file\n" and os.readlink(bak) == str(victim)
    assert moved.read_bytes() == first and result.backup == str(moved)
    assert result.notes == (f"{bak} is a symbolic link, so blockflow left it alone and wrote the backup of "
                            f"the previous version to {moved} instead",)
    # the next save replaces its own p.bflow.json-1.bak
    second = path.read_bytes()
    save_project(_sample(), path)
    assert moved.read_bytes() == second and not (tmp_path / "p.bflow.json-2.bak").exists()


@pytest.mark.parametrize("kind", ["file", "folder", "hard link"])
def test_a_backup_name_holding_something_else_is_left_alone(tmp_path, victim, kind):
    path = tmp_path / "p.bflow.json"
    save_project(_sample(), path)
    bak = tmp_path / "p.bflow.json.bak"
    if kind == "file":
        bak.write_text("my own notes")
    elif kind == "folder":
        bak.mkdir()
        (bak / "inside").write_text("x")
    else:
        os.link(victim, bak)
    before = snapshot(tmp_path)
    result = save_project(_sample(), path)
    moved = tmp_path / "p.bflow.json-1.bak"
    assert changed_paths(before, snapshot(tmp_path)) == {str(path), str(moved)}
    why = {"file": "is a file blockflow did not write", "folder": "is a folder",
           "hard link": "is a file blockflow did not write"}[kind]
    assert result.notes and result.notes[0].startswith(f"{bak} {why}, so blockflow left it alone")


def test_train_save_tells_where_the_backup_went(tmp_path, victim):
    path = tmp_path / "xor.bflow.json"
    shutil.copy(SAMPLES / "xor.bflow.json", path)
    bak = tmp_path / "xor.bflow.json.bak"
    bak.symlink_to(victim)
    before = snapshot(tmp_path)
    r = run_cli("train", path, "--steps", "2", "-q", "--save", path, cwd=tmp_path)
    r.assert_clean_message()
    assert r.returncode == 0, r.output
    moved = tmp_path / "xor.bflow.json-1.bak"
    assert changed_paths(before, snapshot(tmp_path)) == {str(path), str(moved)}
    assert f"blockflow: note: {bak} is a symbolic link, so blockflow left it alone" in r.stderr
    assert victim.read_text() == "the user's precious file\n"


# --------------------------------------------------------------------------------------------
# Temporaries, and the ledger itself


def test_a_temporary_never_opens_what_is_planted_at_its_name(tmp_path, victim, monkeypatch):
    tokens = iter(["0badc0de", "0badc0de", "12345678"])
    monkeypatch.setattr(ownfiles.secrets, "token_hex", lambda n: next(tokens))
    planted = tmp_path / ".p.bflow.json.0badc0de.tmp"
    planted.symlink_to(victim)
    before = snapshot(tmp_path)
    save_project(_sample(), tmp_path / "p.bflow.json")
    assert changed_paths(before, snapshot(tmp_path)) == {str(tmp_path / "p.bflow.json")}
    assert victim.read_text() == "the user's precious file\n"


def test_nothing_counts_as_blockflows_own_without_a_ledger(tmp_path, monkeypatch):
    """A state folder that is not a folder: no ledger, so nothing is replaced; new names."""
    blocker = tmp_path / "state-is-a-file"
    blocker.write_text("")
    monkeypatch.setenv("BLOCKFLOW_STATE_DIR", str(blocker))
    first = ownfiles.write_own(tmp_path / "a.png", b"1")
    second = ownfiles.write_own(tmp_path / "a.png", b"2")
    assert (first.path, second.path) == (str(tmp_path / "a.png"), str(tmp_path / "a-1.png"))
    assert (tmp_path / "a.png").read_bytes() == b"1"


# --------------------------------------------------------------------------------------------
# Autosaves and recovery notes


@pytest.mark.parametrize("which", ["project_file", "note_file"])
def test_a_symlink_planted_at_an_autosave_is_not_followed(tmp_path, victim, qapp, which):
    from blockflow.gui.document.autosave import Autosaver
    from blockflow.gui.document.document import Document

    rec = tmp_path / "rec"
    rec.mkdir()
    doc = Document()
    saver = Autosaver(doc, rec, interval_seconds=0)
    moved = []
    saver.moved.connect(moved.append)
    trap = getattr(saver, which)
    trap.symlink_to(victim)
    doc.add_node("Tanh", (0, 0), node_id="t")
    before = snapshot(tmp_path)
    assert saver.autosave_now()
    saver.wait()
    assert saver.project_file != trap and saver.note_file != trap and saver.project_file.is_file()
    assert changed_paths(before, snapshot(tmp_path)) == {str(saver.project_file), str(saver.note_file)}
    assert victim.read_text() == "the user's precious file\n" and os.readlink(trap) == str(victim)
    assert len(moved) == 1 and f"{trap} is a symbolic link" in moved[0] and saver.project_file.name in moved[0]
    # a file swapped in under the autosave's name later is not replaced, nor removed on discard
    doc.add_node("Exp", (50, 0), node_id="e")
    saver.project_file.unlink()
    saver.project_file.write_text("the user's file")
    swapped = saver.project_file
    assert saver.autosave_now()
    saver.wait()
    assert saver.project_file != swapped
    assert swapped.read_text() == "the user's file"
    saver.discard()
    assert swapped.read_text() == "the user's file" and not saver.project_file.exists()


def test_damaged_recovery_notes_are_skipped_with_a_log_line_and_the_others_offered(tmp_path, qapp, caplog,
                                                                                 monkeypatch):
    import json
    import socket

    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QMessageBox

    from blockflow.gui.document.autosave import find_recoveries
    from blockflow.gui.document.document import Document
    from blockflow.gui.main_window import MainWindow

    rec = tmp_path / "rec"
    rec.mkdir()
    dead = 2 ** 22 + 17          # above Linux's largest pid: no such process
    notes = {"good": {"saved_at": 1.0e9},
             "huge_time": {"saved_at": 1e300}, "nan_time": {"saved_at": float("nan")},
             "text_time": {"saved_at": "yesterday"}, "no_time": {},
             "bool_time": {"saved_at": True}, "negative_time": {"saved_at": -5.0},
             "huge_pid": {"saved_at": 1.0e9, "pid": 10 ** 30}, "text_pid": {"saved_at": 1.0e9, "pid": "1"},
             "nul_original": {"saved_at": 1.0e9, "original": "a\0b.bflow.json"},
             "list_title": {"saved_at": 1.0e9, "title": ["x"]}}
    for stem, fields in notes.items():
        save_project(_sample(), rec / f"{stem}.bflow.json", backup=False)
        note = {"original": None, "pid": dead, "host": socket.gethostname(), "title": stem, **fields}
        (rec / f"{stem}.recovery.json").write_text(json.dumps(note))       # NaN as JSON's NaN token
    caplog.set_level("WARNING", logger="blockflow.gui.document.autosave")
    found = find_recoveries(rec)
    assert [r.title for r in found] == ["good"]
    assert "4 pages, 32 blocks" in found[0].describe()
    skipped = {r.getMessage().split(":")[0].rsplit("/", 1)[-1] for r in caplog.records}
    assert skipped == {f"{stem}.recovery.json" for stem in notes if stem != "good"}
    assert any("1e+300 is not a time" in r.getMessage() for r in caplog.records)
    # the editor's start-up offer: the good one is offered, and nothing else breaks it
    monkeypatch.setenv("BLOCKFLOW_RECOVERY_DIR", str(rec))
    window = MainWindow(Document(), QSettings(str(tmp_path / "s.ini"), QSettings.IniFormat))
    shown = []
    monkeypatch.setattr(QMessageBox, "exec", lambda box: shown.append(box.text()) or 0)
    assert not window.offer_recovery()        # answered "Later"
    assert len(shown) == 1 and found[0].describe() in shown[0]
    window.deleteLater()


# --------------------------------------------------------------------------------------------
# Paths that cannot name a file


def _bad_paths(tmp_path) -> dict:
    """Each bad output path with the problem its message must name."""
    (tmp_path / "afolder").mkdir(exist_ok=True)
    return {"": "the file name is empty",
            str(tmp_path / "sub") + "/": "the path ends in '/', which names a folder",
            str(tmp_path / "afolder"): "it is a folder",
            str(tmp_path / ("a" * 300 + ".bflow.json")): "the file name is 311 bytes long; this file system allows at most 255",
            str(tmp_path / "missing" / "p.bflow.json"): f"the folder {tmp_path / 'missing'} does not exist"}


def test_save_refuses_a_path_that_cannot_name_a_file_and_touches_nothing(tmp_path):
    from blockflow.errors import ProjectFileError

    bad = _bad_paths(tmp_path)
    before = snapshot(tmp_path)
    for path, problem in bad.items():
        with pytest.raises(ProjectFileError) as info:
            save_project(_sample(), path)
        message = str(info.value)
        assert message.startswith(f"{path or repr(path)}: cannot save: ") and problem in message, message
    assert changed_paths(before, snapshot(tmp_path)) == set()


def test_long_names_the_file_system_allows_still_save(tmp_path):
    """A 250-byte name is valid: its temporary must not be longer than the limit (it was: 264
    bytes, so the save failed); where only the backup's name is too long, the save says so."""
    project = _sample()
    ok = tmp_path / ("b" * 239 + ".bflow.json")
    save_project(project, ok)
    assert save_project(project, ok).backup == str(ok) + ".bak"
    edge = tmp_path / ("c" * 242 + ".bflow.json")
    save_project(project, edge)
    result = save_project(project, edge)
    assert result.backup is None and result.notes == (
        f"no backup of the previous version was kept: its name {edge}.bak would be longer than the "
        f"file system allows",)
    assert load_project(edge) == project


@pytest.mark.parametrize("command", ["train", "render", "blocks"])
def test_the_command_line_refuses_a_bad_output_path_as_a_usage_error(tmp_path, capsys, command):
    from blockflow.gui import app

    project = tmp_path / "xor.bflow.json"
    shutil.copy(SAMPLES / "xor.bflow.json", project)
    bad = _bad_paths(tmp_path)
    before = snapshot(tmp_path)
    for path, problem in bad.items():
        if command == "train":
            option, argv = "--save", ["train", str(project), "--steps", "1", "-q", "--save", path]
        elif command == "render":
            option, argv = "-o", ["render", str(project), "-o", path[:-1] + ".png/" if path.endswith("/") else path]
        else:
            option, argv = "--output", ["blocks", "--markdown", "--output", path]
        if command == "render" and path.endswith("/"):
            problem, path = "the path ends in '/'", argv[-1]
        assert app.main(argv) == 2, (argv, capsys.readouterr())
        out, err = capsys.readouterr()
        assert err.startswith(f"blockflow: error: {option} {path or repr(path)}: ") and problem in err, err
        assert err.count("\n") == 1 and "Traceback" not in err and out == ""   # refused before training
    assert changed_paths(before, snapshot(tmp_path)) == set()


def test_copying_data_files_next_to_a_saved_project_never_writes_through_a_link(tmp_path, victim, qapp):
    """Save As into another folder offers to copy the data files: a dangling symlink planted at a
    copy's name is not followed (it would create the file it points to), and nothing is replaced."""
    from blockflow.gui.document.document import Document

    old, new = tmp_path / "old", tmp_path / "new"
    old.mkdir()
    new.mkdir()
    for name in ("a.csv", "b.csv", "c.csv"):
        (old / name).write_text(f"x,label\n1,{name[0] == 'a'}\n")
    dangling = tmp_path / "outside" / "created-by-blockflow.csv"
    (new / "a.csv").symlink_to(dangling)          # dangling: exists() says False
    (new / "b.csv").write_text("the user's own b.csv")
    doc = Document()
    for i, name in enumerate(("a.csv", "b.csv", "c.csv")):    # the page reads all three
        doc.add_node("CsvDataset", (0, 100 * i), node_id=name[0], attrs={"path": name, "test_fraction": 0.0})
    doc.project.base_dir = str(new)
    before = snapshot(tmp_path)
    copied = doc.copy_data_files(["a.csv", "b.csv", "c.csv"], str(old))
    assert copied == ["c.csv"]
    assert changed_paths(before, snapshot(tmp_path)) == {str(new / "c.csv")}
    assert not dangling.exists() and (new / "b.csv").read_text() == "the user's own b.csv"
    assert (new / "c.csv").read_bytes() == (old / "c.csv").read_bytes()
