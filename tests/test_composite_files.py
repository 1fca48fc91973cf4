"""Composites in project files (format version 2): round trips, the migration from version 1,
library files, and hostile files."""
from __future__ import annotations

import json

import numpy as np
import pytest

from blockflow.compile.compiler import compile_project
from blockflow.errors import ProjectFileError
from blockflow.io import project_io as io
from blockflow.io import rules
from blockflow.run.runtime import run

from composite_kit import mlp_project

X = np.random.default_rng(1).normal(size=(4, 3)).astype("float32")


def _doc(project) -> dict:
    return json.loads(io.dumps_project(project))


def test_a_project_with_composites_round_trips_exactly_and_runs_the_same():
    project = mlp_project(share=True)
    project.composites["Dense"].origin = {"library": "blockflow", "name": "Dense", "version": 3}
    project.page().apply_state({"d1/W": {"value": np.arange(15, dtype="float32").reshape(3, 5)}})
    text = io.dumps_project(project)
    back = io.loads_project(text)
    assert back == project
    assert io.dumps_project(back) == text
    before = run(compile_project(project), {"X": X}, target="loss")
    after = run(compile_project(back), {"X": X}, target="loss")
    np.testing.assert_array_equal(before.values[("loss", "output")], after.values[("loss", "output")])
    np.testing.assert_array_equal(after.values[("d1/W", "ref")], np.arange(15, dtype="float32").reshape(3, 5))
    doc = json.loads(text)
    assert doc["version"] == 2 and doc["composites"][0]["name"] == "Dense"
    assert doc["composites"][0]["params"][0] == {"name": "units", "kind": "int", "min": 1,
                                                 "doc": "output features"}


def test_a_project_without_composites_writes_no_composites_key():
    project = mlp_project()
    project.composites.clear()
    project.page().nodes.clear()
    project.page().edges.clear()
    project.page().loss = None
    assert "composites" not in _doc(project)


def test_a_version_1_file_is_migrated(tmp_path):
    doc = {"format": "blockflow-project", "version": 1, "metadata": {},
           "pages": [{"name": "@odd", "nodes": [{"id": "c", "block": "Const"}]},
                     {"name": "_@odd", "nodes": []}]}
    project = io.loads_project(json.dumps(doc))
    assert [p.name for p in project.pages] == ["_@odd_2", "_@odd"]
    assert project.composites == {}
    assert _doc(project)["version"] == 2


def test_a_library_file_holds_composites_and_opens_only_as_a_library(tmp_path):
    project = mlp_project()
    path = tmp_path / "layers.bflow.json"
    io.save_library(path, project.composites, {"title": "my layers"})
    composites, metadata = io.load_library(path)
    assert composites == project.composites and metadata == {"title": "my layers"}
    assert json.loads(path.read_text())["pages"] == []
    with pytest.raises(ProjectFileError, match="library file of composites"):
        io.load_project(path)


def _with(mutate):
    doc = _doc(mlp_project())
    mutate(doc)
    return json.dumps(doc)


@pytest.mark.parametrize("mutate, where, problem", [
    (lambda d: d["composites"].append(dict(d["composites"][0])), "composites[1].name",
     "duplicate composite name 'Dense'"),
    (lambda d: d["composites"][0].update(name="a b"), "composites[0].name", "not a valid composite name"),
    (lambda d: d["composites"][0]["params"][0].update(kind="colour"), "composites[0].params[0].kind",
     "unknown parameter kind"),
    (lambda d: d["composites"][0]["params"][0].update(default=0), "composites[0].params[0].default",
     "the default does not fit"),
    (lambda d: d["composites"][0]["params"][0].update(name="share_variables_with"),
     "composites[0].params[0].name", "plain identifier other than"),
    (lambda d: d["composites"][0]["params"].append(dict(d["composites"][0]["params"][0])),
     "composites[0].params[2].name", "duplicate parameter 'units'"),
    (lambda d: d["composites"][0]["params"][1].pop("choices"), "composites[0].params[1].choices",
     "needs its choices"),
    (lambda d: d["composites"][0].update(origin={"library": "x", "name": "y", "version": 0}),
     "composites[0].origin.version", "a whole number from 1"),
    (lambda d: d["composites"][0].update(diagram={"nodes": [], "loss": "x"}), "composites[0].diagram.loss",
     "unknown key 'loss'"),
    (lambda d: d["composites"][0]["diagram"]["nodes"].append(
        {"id": "me", "block": "@Dense"}), "composites", "contains itself: Dense > Dense"),
    (lambda d: d.update(composites={}), "composites", "must be a list"),
])
def test_bad_composites_are_refused_naming_the_place(mutate, where, problem):
    with pytest.raises(ProjectFileError) as info:
        io.loads_project(_with(mutate))
    assert info.value.where == where and problem in info.value.problem, str(info.value)


def test_too_many_composites_are_refused_before_they_are_read(monkeypatch):
    monkeypatch.setattr(rules, "MAX_COMPOSITES", 1)
    def two(d):
        extra = json.loads(json.dumps(d["composites"][0]))
        extra["name"] = "Other"
        d["composites"].append(extra)
    with pytest.raises(ProjectFileError, match="2 composites; the limit is 1"):
        io.loads_project(_with(two))


def test_composites_count_against_the_loaders_memory_bound(monkeypatch):
    """Nodes inside a composite cost the model as much as on a page: a bound that refuses them on
    a page refuses them in a composite, before the model is built."""
    nodes = ",".join('{"id":"n%d","block":"Const"}' % i for i in range(200_000))
    in_page = '{"format":"blockflow-project","version":2,"pages":[{"name":"main","nodes":[' + nodes + ']}]}'
    in_composite = ('{"format":"blockflow-project","version":2,"composites":[{"name":"Big","diagram":'
                    '{"nodes":[' + nodes + ']}}],"pages":[{"name":"main"}]}')
    monkeypatch.setattr(rules, "LOAD_ALLOWANCE_BYTES", 0)
    monkeypatch.setattr(rules, "LOAD_FACTOR", 20)   # enough to parse either, not to build either
    for text in (in_page, in_composite):
        with pytest.raises(ProjectFileError, match="200,000 nodes"):
            io.loads_project(text)
    monkeypatch.undo()   # the shipped limits read it
    assert len(io.loads_project(in_composite).composites["Big"].page.nodes) == 200_000


def test_the_writer_refuses_a_project_the_reader_would_refuse():
    from blockflow.composite import Composite, block_name
    project = mlp_project()
    project.composites["Loop"] = loop = Composite("Loop")
    loop.page.add_node(block_name("Loop"), id="me")
    with pytest.raises(ProjectFileError, match="contains itself: Loop > Loop"):
        io.dumps_project(project)
    del project.composites["Loop"]
    project.composites["Other"] = Composite("Dense")
    with pytest.raises(ProjectFileError, match="stored under 'Other' is named 'Dense'"):
        io.dumps_project(project)
