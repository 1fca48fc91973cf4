"""The layer library's mechanics (blockflow/io/library.py, tools/make_layers.py, blockflow layers):
listing, inserting (embedded, origin recorded, names kept apart), finding and applying updates,
and docs/layers.md generated from the definitions."""
from __future__ import annotations

import argparse
from pathlib import Path

import pytest

import layer_kit  # noqa: F401  (puts tools/ on the path)
import make_layers
from blockflow.cli.cmd_layers import cmd_layers, layers_markdown
from blockflow.compile.compiler import compile_project
from blockflow.composite import block_name
from blockflow.io.library import (Library, LibraryError, default_library, insert_layer, outdated, update_layer,
                                  update_plan)
from blockflow.project import Project
from blockflow.registry import default_registry
from blockflow.spec import Attr
from blockflow_blocks import layer_files

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def entries():
    return make_layers.layers()


@pytest.fixture
def library(entries):
    return Library.from_composites(entries)


def test_listing_names_versions_categories(library):
    infos = library.layers()
    names = [i.name for i in infos]
    assert {"Dense", "Conv2D", "BatchNormalization", "Embedding"} <= set(names)
    assert names.index("Dense") < names.index("Conv2D") < names.index("MaxPooling2D")   # by category
    dense = library.info("Dense")
    assert dense.version >= 1 and dense.category == "core" and dense.summary.startswith("A fully connected")
    with pytest.raises(LibraryError, match="no layer 'Dens'.*Dense"):
        library.info("Dens")


def test_every_layer_has_its_origin(entries):
    for category, comps in entries:
        top = next(iter(comps.values()))
        assert top.origin == {"library": "blockflow", "name": top.name, "version": top.origin["version"]}
        assert isinstance(top.origin["version"], int) and category


def test_insert_embeds_a_copy_with_its_origin(library):
    project = Project()
    name, changes = insert_layer(project, library, "Dense")
    assert name == "Dense" and len(changes) == 1
    comp = project.composites["Dense"]
    assert comp.origin["name"] == "Dense" and comp == library.load("Dense")["Dense"]
    comp.doc = "changed here"   # the project's copy is its own
    assert library.load("Dense")["Dense"].doc != "changed here"


def test_insert_twice_reuses_the_same_definition_and_renames_a_different_one(library):
    project = Project()
    insert_layer(project, library, "Dense")
    assert insert_layer(project, library, "Dense") == ("Dense", [])
    project.composites["Dense"].doc = "my own Dense"
    name, _ = insert_layer(project, library, "Dense")
    assert name == "Dense_2" and project.composites["Dense_2"].page.name == "@Dense_2"
    assert project.composites["Dense"].doc == "my own Dense"


def _older(library, name: str, version: int, drop_param=None, extra_param=None):
    """The project's copy of a layer as an older version would have made it."""
    project = Project()
    insert_layer(project, library, name)
    comp = project.composites[name]
    comp.origin = dict(comp.origin, version=version)
    if extra_param:
        comp.params.append(Attr(extra_param, "int", 0))
    return project


def test_outdated_and_update_keep_instances_parameters(library):
    project = _older(library, "Dense", 0, extra_param="legacy")
    page = project.add_page("main")
    page.add_node("Placeholder", id="X", attrs={"dtype": "float32", "shape": [2, 3]})
    page.add_node(block_name("Dense"), id="d1", attrs={"units": 4, "activation": "tanh", "legacy": 7})
    page.connect("X", "output", "d1", "x")
    assert outdated(project, library) == [("Dense", 0, library.info("Dense").version)]
    plan = update_plan(project, library, "Dense")
    assert plan.dropped == [("main", "d1", "legacy")]
    changes, report = update_layer(project, library, "Dense")
    assert report == [f"main/d1: parameter 'legacy' is gone in Dense version {library.info('Dense').version}; "
                      f"its value was removed"]
    assert outdated(project, library) == []
    assert page.nodes["d1"].attrs == {"units": 4, "activation": "tanh"}
    program = compile_project(project, "main")
    program.raise_for_errors()
    assert program.port_type("d1", "y").shape == (2, 4)


def test_update_refuses_a_composite_not_from_the_library(library):
    project = Project()
    insert_layer(project, library, "Dense")
    project.composites["Dense"].origin = None
    with pytest.raises(LibraryError, match="not made from a library layer"):
        update_plan(project, library, "Dense")


def test_cli_lists_the_layers(library, capsys):
    args = argparse.Namespace(markdown=False, output=None)
    assert cmd_layers(args, library=library) == 0
    out = capsys.readouterr().out
    assert "core\n  Dense" in out and f"{len(library.layers())} layers" in out


def test_docs_layers_md_is_up_to_date(library):
    committed = (ROOT / "docs" / "layers.md").read_text(encoding="utf-8")
    assert committed == layers_markdown(library, default_registry()), (
        "docs/layers.md is stale: run blockflow layers --markdown --output docs/layers.md")


def test_layer_files_entry_point_lists_the_shipped_files(entries):
    files = layer_files()
    assert sorted(p.name for p in files) == sorted(f"{next(iter(c))}.bflow.json" for _, c in entries)
    assert all(p.parent.name == "layers" and p.parent.parent.name == "blocks" for p in files)


def test_the_committed_layer_files_are_what_make_layers_writes():
    assert make_layers.main(["--check"]) == 0, "blocks/layers/ is stale: run python tools/make_layers.py"


def test_the_installed_library_reads_the_layer_files(entries):
    """default_library follows the blockflow.layers entry point to the files: each layer reads
    back equal to its definition, with its category."""
    library = default_library()
    assert [i.name for i in library.layers()] == [i.name for i in Library.from_composites(entries).layers()]
    for category, comps in entries:
        name = next(iter(comps))
        assert library.info(name).category == category
        assert library.load(name) == comps


def test_blockflow_layers_prints_the_reference(capsys):
    from blockflow.cli.entry import main

    assert main(["layers", "--markdown"]) == 0
    assert capsys.readouterr().out == (ROOT / "docs" / "layers.md").read_text(encoding="utf-8")
    assert main(["layers"]) == 0
    assert "Dense" in capsys.readouterr().out
    assert main(["layers", "--output", "x.md"]) == 2
    assert "give --markdown too" in capsys.readouterr().err


def test_a_broken_layer_file_is_named(tmp_path):
    bad = tmp_path / "Bad.bflow.json"
    bad.write_text("{not json", encoding="utf-8")

    def read(path):
        from blockflow.io.project_io import load_library
        return load_library(bad)
    with pytest.raises(LibraryError, match="layer file"):
        default_library(read=read)


def test_make_layers_asks_for_a_version_bump_when_a_definition_changes(tmp_path, entries):
    from blockflow.io.project_io import save_library

    _, comps = next((c, d) for c, d in entries if "Dense" in d)
    old, new = tmp_path / "old", tmp_path / "new"
    old.mkdir(), new.mkdir()
    save_library(old / "Dense.bflow.json", comps, {"category": "core"})
    changed = {k: c.copy() for k, c in comps.items()}
    changed["Dense"].doc += " Changed."
    save_library(new / "Dense.bflow.json", changed, {"category": "core"})
    assert "raising Dense's version" in make_layers._unbumped(new / "Dense.bflow.json", old / "Dense.bflow.json")
    changed["Dense"].origin = dict(changed["Dense"].origin, version=changed["Dense"].origin["version"] + 1)
    save_library(new / "Dense.bflow.json", changed, {"category": "core"})
    assert make_layers._unbumped(new / "Dense.bflow.json", old / "Dense.bflow.json") == ""


def test_update_of_a_renamed_copy_keeps_its_name(library):
    project = Project()
    insert_layer(project, library, "Dense")
    project.composites["Dense"].doc = "my own Dense"
    name, _ = insert_layer(project, library, "Dense")
    assert name == "Dense_2"
    project.composites["Dense_2"].origin = dict(project.composites["Dense_2"].origin, version=0)
    assert outdated(project, library) == [("Dense_2", 0, library.info("Dense").version)]
    update_layer(project, library, "Dense_2")
    comp = project.composites["Dense_2"]
    assert comp.name == "Dense_2" and comp.page.name == "@Dense_2" and comp.origin["version"] >= 1
    assert project.composites["Dense"].doc == "my own Dense"


def test_cli_tells_a_project_its_outdated_layers_and_updates_them(library, entries, tmp_path, capsys):
    from blockflow.io.project_io import load_project, save_project

    project = Project()
    insert_layer(project, library, "Dense")
    page = project.add_page("main")
    page.add_node("Placeholder", id="X", attrs={"dtype": "float32", "shape": [2, 3]})
    page.add_node(block_name("Dense"), id="d1", attrs={"units": 4})
    page.connect("X", "output", "d1", "x")
    path = tmp_path / "p.bflow.json"
    save_project(project, path)
    newer = []
    for category, comps in entries:
        comps = {n: c.copy() for n, c in comps.items()}
        if "Dense" in comps:
            comps["Dense"].origin = dict(comps["Dense"].origin, version=comps["Dense"].origin["version"] + 1)
            comps["Dense"].doc = "Dense, version two."
        newer.append((category, comps))
    newer = Library.from_composites(newer)
    old, new = library.info("Dense").version, newer.info("Dense").version

    def layers(*extra, **kw):
        args = argparse.Namespace(markdown=False, output=None, project=str(path), update=None, save=None)
        for k, v in kw.items():
            setattr(args, k, v)
        return cmd_layers(args, library=newer)

    assert layers() == 0
    assert f"Dense  v{old} -> v{new}  (blockflow layers PROJECT --update Dense" in capsys.readouterr().out
    from blockflow.cli.exits import CliError
    with pytest.raises(CliError, match="give --save OUT"):
        layers(update=["Dense"])
    out = tmp_path / "updated.bflow.json"
    assert layers(update=["all"], save=str(out)) == 0
    assert f"Dense: v{old} -> v{new}" in capsys.readouterr().out
    updated = load_project(out)
    assert updated.composites["Dense"].origin["version"] == new
    assert updated.composites["Dense"].doc == "Dense, version two."
    assert updated.page("main").nodes["d1"].attrs == {"units": 4}
    assert load_project(path).composites["Dense"].origin["version"] == old   # the original untouched
