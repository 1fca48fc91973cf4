"""The copies a compile and an autosave work on (gui/document/snapshots.py): everything a project
file holds, in containers of their own."""
from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest

from blockflow.composite import Composite
from blockflow.gui.document.snapshots import project_snapshot, snapshot
from blockflow.io.project_io import dumps_project, load_project
from blockflow.page_layout import Frame
from blockflow.project import Node, Page, Project

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = sorted((ROOT / "sample_projects").glob("*.bflow.json"))


@pytest.mark.parametrize("path", SAMPLES, ids=[p.name.split(".")[0] for p in SAMPLES])
def test_a_copy_of_each_sample_writes_the_same_file(path):
    project = load_project(path)
    copied = project_snapshot(project)
    assert dumps_project(copied) == dumps_project(project)
    assert copied.base_dir == project.base_dir


def test_every_field_of_a_page_and_a_node_is_copied():
    """A field added to Page, Node, Composite or Project later must be added to the copy too:
    otherwise an autosave would leave it out of the recovery file."""
    assert [f.name for f in fields(Page)] == ["name", "nodes", "edges", "loss", "feeds", "text", "metrics",
                                             "bends", "frames"]
    assert [f.name for f in fields(Node)] == ["id", "block", "attrs", "inputs", "position", "label", "state",
                                             "collapsed"]
    assert [f.name for f in fields(Composite)] == ["name", "doc", "params", "page", "origin"]
    assert [f.name for f in fields(Project)] == ["pages", "metadata", "composites", "base_dir", "data_files"]


def test_edits_of_the_original_after_the_copy_do_not_reach_it():
    project = Project(metadata={"title": "t", "tags": ["a"]})
    page = project.add_page("main")
    page.add_node("Placeholder", id="x", attrs={"shape": [2]}, state={"v": np.zeros(2)})
    page.add_node("Tanh", id="t", label="squash")
    page.nodes["t"].collapsed = True
    page.connect("x", "output", "t", "x")
    page.set_bends(page.edges[0], [(1.0, 2.0)])
    page.insert_frame(Frame("f", blocks=("x",)))
    project.composites["Dense"] = Composite("Dense", "d", [], origin={"library": "lib", "name": "Dense",
                                                                     "version": 1})
    copied = project_snapshot(project)
    before = dumps_project(copied)
    assert before == dumps_project(project) and '"collapsed": true' in before
    page.nodes["x"].attrs["shape"] = [3]
    page.nodes["x"].state["v"] = np.ones(2)
    page.add_node("Exp", id="late")
    page.set_bends(page.edges[0], [(5.0, 5.0)])
    page.remove_frame(0)
    project.metadata["tags"].append("b")
    project.composites["Dense"].origin["version"] = 2
    project.composites["Dense"].page.add_node("Relu", id="r")
    assert dumps_project(copied) == before
    assert snapshot(page).nodes.keys() == page.nodes.keys()
