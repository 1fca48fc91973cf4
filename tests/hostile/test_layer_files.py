"""Layer files as a broken or hostile block package could ship them, read by ``blockflow layers``:
a field of the wrong type, no composite at all, composites nested past what can compile, a
category holding terminal escapes (already made harmless by the escaping of standard output: a
guard). Each of the others gives one line naming the file and what is wrong, exit
code 3 (a file that cannot be read), never an internal error."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import blockflow.io.library as library_module
from blockflow.cli.entry import main
from blockflow.cli.exits import EXIT_FILE, EXIT_OK
from blockflow.composite import MAX_NESTING, Composite, block_name
from blockflow.io.library import Library, LibraryError, insert_layer, layer_problem
from blockflow.project import Page, Project


def _composite(name, inner=None, origin=None):
    nodes = [{"id": "x", "block": "Input", "attrs": {"name": "x"}}]
    if inner:
        nodes.append({"id": "i", "block": block_name(inner), "attrs": {}})
    nodes.append({"id": "y", "block": "Output", "attrs": {"name": "y"}})
    out = {"name": name, "diagram": {"nodes": nodes, "edges": []}}
    if origin is not None:
        out["origin"] = origin
    return out


def _layer_file(path: Path, composites, metadata=None) -> Path:
    path.write_text(json.dumps({"format": "blockflow-project", "version": 2, "metadata": metadata or {},
                                "pages": [], "composites": composites}), encoding="utf-8")
    return path


def _layers(monkeypatch, capsys, path: Path) -> tuple[int, str, str]:
    monkeypatch.setattr(library_module, "layer_files", lambda: [("evilpkg", path)])
    code = main(["layers"])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_layer_version_of_the_wrong_type_names_the_file_and_the_field(tmp_path, monkeypatch, capsys):
    path = _layer_file(tmp_path / "bad.bflow.json",
                       [_composite("A", origin={"library": "x", "name": "A", "version": "1"})])
    code, _, err = _layers(monkeypatch, capsys, path)
    assert code == EXIT_FILE, err
    assert "layer file bad.bflow.json (of evilpkg)" in err and "composites[0].origin.version" in err
    assert "internal error" not in err and err.count("\n") == 1


def test_a_layer_file_without_composites_is_refused(tmp_path, monkeypatch, capsys):
    code, _, err = _layers(monkeypatch, capsys, _layer_file(tmp_path / "empty.bflow.json", []))
    assert code == EXIT_FILE, err
    assert "layer file empty.bflow.json (of evilpkg): it holds no composite" in err


def test_a_layer_nested_deeper_than_instances_may_nest_is_refused(tmp_path, monkeypatch, capsys):
    n = MAX_NESTING + 8
    comps = [_composite(f"A{i}", f"A{i + 1}" if i < n - 1 else None) for i in range(n)]
    code, _, err = _layers(monkeypatch, capsys, _layer_file(tmp_path / "deep.bflow.json", comps))
    assert code == EXIT_FILE, err
    assert f"deep.bflow.json (of evilpkg): its composites nest {n} levels deep; instances nest at most " \
           f"{MAX_NESTING}" in err


def test_a_layer_as_deep_as_instances_may_nest_is_listed_and_inserted(tmp_path, monkeypatch, capsys):
    n = MAX_NESTING
    comps = [_composite(f"A{i}", f"A{i + 1}" if i < n - 1 else None) for i in range(n)]
    code, out, err = _layers(monkeypatch, capsys, _layer_file(tmp_path / "deep.bflow.json", comps))
    assert code == EXIT_OK and "1 layers" in out, err
    library = library_module.default_library()
    project = Project()
    name, changes = insert_layer(project, library, "A0")
    assert name == "A0" and len(changes) == 1 and list(project.composites)[0] == f"A{n - 1}"
    assert len(changes[0].pages_added) == n          # one edit for the layer's composites


def test_a_category_with_terminal_escapes_stays_harmless(tmp_path, monkeypatch, capsys):
    path = _layer_file(tmp_path / "esc.bflow.json", [_composite("A")], {"category": "core\x1b]0;owned\x07"})
    code, out, err = _layers(monkeypatch, capsys, path)
    assert code == EXIT_OK, err
    assert "\x1b" not in out and "\x07" not in out


def test_library_from_composites_refuses_what_cannot_be_a_layer():
    with pytest.raises(LibraryError, match="category 'core': it holds no composite"):
        Library.from_composites([("core", {})])
    page = Page(block_name("A"))
    page.add_node(block_name("A"), id="me")
    assert layer_problem({"A": Composite("A", page=page)}) == "composite 'A' contains itself: A > A"
