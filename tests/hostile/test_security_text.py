"""Hostile suite, security of text: a control character in a name is refused at load with its
place; text from a file (a name, a path, a data file's column, a message quoting them) reaches the
terminal with its control characters escaped and cannot start a line of its own; --json stays
valid JSON that reads back to the same text.
"""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from hostile_kit import changed_paths, run_cli, snapshot

from blockflow.errors import ProjectFileError
from blockflow.project import Project
from blockflow.io.project_io import dumps_project, load_project, loads_project, save_project

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_projects"
# what a terminal must never receive raw from blockflow: every control but the newline ending a line
RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
# each control character with the name the message gives it
CONTROLS = {"\x00": "U+0000 (NUL)", "\x1b": "U+001B (ESCAPE)", "\n": "U+000A (LINE FEED)",
            "\r": "U+000D (CARRIAGE RETURN)", "\t": "U+0009 (TAB)", "\x7f": "U+007F (DELETE)",
            "\x9b": "U+009B (CONTROL SEQUENCE INTRODUCER)", "\u202e": "U+202E (RIGHT-TO-LEFT OVERRIDE)",
            "\u2028": "U+2028 (LINE SEPARATOR)", "\x07": "U+0007 (BELL)"}


def _doc() -> dict:
    project = Project(metadata={"title": "t"})
    page = project.add_page("main")
    page.add_node("Placeholder", id="x", attrs={"shape": [2]}, state={"value": [1.0, 2.0]})
    return json.loads(dumps_project(project))


def _error(doc) -> ProjectFileError:
    with pytest.raises(ProjectFileError) as info:
        loads_project(json.dumps(doc), "h.bflow.json")
    return info.value


@pytest.mark.parametrize("char", list(CONTROLS), ids=[v.split()[0] for v in CONTROLS.values()])
def test_a_control_character_in_a_name_is_refused_at_load_with_its_place(char):
    what = CONTROLS[char]
    cases = {"page name": (("pages", 0, "name"), "pages[0].name"),
             "block name": (("pages", 0, "nodes", 0, "block"), "pages[0].nodes[0].block")}
    for kind, (keys, where) in cases.items():
        doc = _doc()
        target = doc
        for k in keys[:-1]:
            target = target[k]
        target[keys[-1]] = f"ab{char}c"
        err = _error(doc)
        assert err.where == where, (kind, err)
        assert f"{what} at offset 2" in err.problem, (kind, err.problem)
    # attr and state names: the place names the key
    for field in ("attrs", "state"):
        doc = _doc()
        node = doc["pages"][0]["nodes"][0]
        node[field] = {f"k{char}": node["state"]["value"] if field == "state" else 1}
        err = _error(doc)
        assert err.where.startswith(f"pages[0].nodes[0].{field}[") and f"{what} at offset 1" in err.problem, err
    # a node id: the id rule (a letter or _, then letters, digits, _ . -) refuses it
    doc = _doc()
    doc["pages"][0]["nodes"][0]["id"] = f"x{char}"
    err = _error(doc)
    assert err.where == "pages[0].nodes[0].id" and "is not a valid node id" in err.problem


def test_free_text_may_hold_controls_but_never_nul(tmp_path):
    doc = _doc()
    doc["pages"][0]["nodes"][0]["label"] = "red\x1b[31m\nnext line\u202e"
    doc["pages"][0]["text"] = "a note\n\twith a tab"
    project = loads_project(json.dumps(doc))
    assert project.pages[0].nodes["x"].label == "red\x1b[31m\nnext line\u202e"
    for keys in (("pages", 0, "nodes", 0, "label"), ("pages", 0, "text"), ("metadata", "title")):
        doc = _doc()
        target = doc
        for k in keys[:-1]:
            target = target[k]
        target[keys[-1]] = "before\x00after"
        err = _error(doc)
        assert err.where == ".".join(str(k) for k in keys).replace(".0", "[0]") and \
            "contains U+0000 (NUL) at offset 6" in err.problem, err
    # the writer keeps the same rules: nothing it writes fails to load
    project = loads_project(json.dumps(_doc()))
    project.pages[0].name = "bad\x1bname"
    before = snapshot(tmp_path)
    with pytest.raises(ProjectFileError) as info:
        save_project(project, tmp_path / "p.bflow.json")
    assert info.value.where == "pages[0].name" and "U+001B (ESCAPE)" in info.value.problem
    assert changed_paths(before, snapshot(tmp_path)) == set()


# --------------------------------------------------------------------------------------------
# What reaches the terminal


def _assert_terminal_safe(text: str) -> None:
    found = RAW_CONTROL.search(text)
    assert found is None, f"raw {found.group()!r} at {found.start()} in {text!r}"


def test_a_refused_name_is_reported_with_its_controls_escaped(tmp_path):
    doc = _doc()
    doc["pages"][0]["name"] = "evil\x9b2J\u202egnp"
    path = tmp_path / "p.bflow.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    r = run_cli("check", path, cwd=tmp_path)
    r.assert_clean_message()
    assert r.returncode == 3, r.output
    _assert_terminal_safe(r.stderr)
    assert r.stderr == (f"blockflow: error: {path} at pages[0].name: page name \"evil\\u009b2J\\u202egnp\": a page "
                        f"name must not contain control characters: U+009B (CONTROL SEQUENCE INTRODUCER) at "
                        f"offset 4\n")


def test_paths_and_data_file_text_cannot_rewrite_the_screen_or_start_a_line(tmp_path):
    """The project's own file name and a data file's column names, with escapes, a newline that
    would forge a line, and a bidi override, through check, check --json and train."""
    folder = tmp_path / "evil\x1b]0;pwned\x07dir"
    folder.mkdir()
    project = Project()
    page = project.add_page("main")
    page.add_node("CsvDataset", id="data", attrs={"path": "d.csv", "label": "y"})
    path = folder / "p\x1b[2J\nblockflow: ok\u202e.bflow.json"
    save_project(project, path)
    (folder / "d.csv").write_text('"a\x1b[31m","b\nblockflow: fake line"\n1,2\n', encoding="utf-8")
    before = snapshot(tmp_path)
    r = run_cli("check", path, cwd=tmp_path)
    r.assert_clean_message()
    assert r.returncode == 1, r.output          # the dataset has no column 'y': a diagnostic
    _assert_terminal_safe(r.output)
    diagnostic = [line for line in r.stdout.splitlines() if line.startswith("error:")]
    assert len(diagnostic) == 1 and "no column 'y'" in diagnostic[0] and "a\\x1b[31m" in diagnostic[0] \
        and "b\\x0ablockflow: fake line" in diagnostic[0], r.stdout
    assert not any(line.startswith("blockflow: fake") for line in r.output.splitlines())
    r = run_cli("check", "--json", path, cwd=tmp_path)
    _assert_terminal_safe(r.stdout)
    out = json.loads(r.stdout)
    assert out["project"] == str(path)                           # the same text, read back
    assert any("a\x1b[31m" in d["message"] for d in out["diagnostics"])
    # a missing project under such a name: one line on standard error
    r = run_cli("check", str(path) + "\n\x1b[1Amissing", cwd=tmp_path)
    assert r.returncode == 3 and r.stderr.count("\n") == 1, r.stderr
    _assert_terminal_safe(r.stderr)
    assert "\\x0a\\x1b[1Amissing" in r.stderr
    assert changed_paths(before, snapshot(tmp_path)) == set()


def test_train_prints_names_and_paths_escaped(tmp_path):
    folder = tmp_path / "run\u202e\x1b[5m"
    folder.mkdir()
    path = folder / "xor.bflow.json"
    shutil.copy(SAMPLES / "xor.bflow.json", path)
    r = run_cli("train", path, "--steps", "2", "-q", "--save", path, cwd=tmp_path)
    r.assert_clean_message()
    assert r.returncode == 0, r.output
    _assert_terminal_safe(r.output)
    assert "saved to " in r.stdout and "run\\u202e\\x1b[5m" in r.stdout
    assert load_project(path).pages[0].name == "xor"


def test_a_file_name_with_a_newline_cannot_forge_a_line_when_a_picture_is_written(tmp_path):
    """The no-display picture and ``render -o`` say what they wrote: a newline in the project's
    name or in the picture's name is shown as \\x0a, never as a line of its own."""
    project = Project()
    project.add_page("main").add_node("Const", id="c")
    path = tmp_path / "d\nblockflow: forged.bflow.json"
    save_project(project, path)
    for argv in ([path], ["render", path, "-o", tmp_path / "o\nblockflow: forged.png"]):
        r = run_cli(*argv, cwd=tmp_path, env={"DISPLAY": "", "WAYLAND_DISPLAY": "", "QT_QPA_PLATFORM": ""})
        r.assert_clean_message()
        assert r.returncode == 0, r.output
        assert not any(line.startswith("blockflow: forged") for line in r.output.splitlines()), r.output
        assert "\\x0ablockflow: forged" in r.stdout, r.stdout
