"""Reroute points and frames in project files (io/layout_codec.py): an exact round trip on pages
and composite diagrams, and every hostile shape refused with a message naming where."""
from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import pytest

from blockflow.errors import ProjectFileError
from blockflow.io import project_io as io
from blockflow.io import rules
from blockflow.page_layout import MAX_BENDS, Frame
from blockflow.project import Edge

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from composite_kit import mlp_project  # noqa: E402
from test_project_io import sample_project  # noqa: E402

WIRE = Edge("x", "output", "Subtract_1", "x")


def laid_out_project():
    project = sample_project()
    page = project.pages[0]
    page.set_bends(WIRE, [(60, 200), (220.5, 180)])
    page.set_bends(Edge("Exp_1", "output", "Sum_1", "input"), [(520, 260)])
    page.insert_frame(Frame("Shift", "teal", "subtract the max\nfor stability", ("ReduceMax_1", "Subtract_1")))
    page.insert_frame(Frame("Sum", "orange", "", ("Exp_1", "Sum_1")))
    return project


def doc_of(project) -> dict:
    return json.loads(io.dumps_project(project))


def refused(doc) -> ProjectFileError:
    with pytest.raises(ProjectFileError) as info:
        io.loads_project(json.dumps(doc), "f.bflow.json")
    return info.value


def test_round_trip_is_exact_and_absent_when_unused():
    assert '"reroutes"' not in io.dumps_project(sample_project())
    assert '"frames"' not in io.dumps_project(sample_project())
    project = laid_out_project()
    text = io.dumps_project(project)
    back = io.loads_project(text)
    assert back == project and back.pages[0].bends == project.pages[0].bends
    assert back.pages[0].frames == project.pages[0].frames
    assert io.dumps_project(back) == text
    assert doc_of(project)["version"] == rules.VERSION        # no version bump


def test_a_composite_diagram_keeps_its_layout():
    project = mlp_project()
    comp = next(iter(project.composites.values()))
    edge = comp.page.edges[0]
    comp.page.set_bends(edge, [(1, 2)])
    comp.page.insert_frame(Frame("inner", "green", "", (edge.src,)))
    back = io.loads_project(io.dumps_project(project))
    got = back.composites[comp.name].page
    assert got.bends == {edge: ((1.0, 2.0),)} and got.frames == comp.page.frames


def _reroute(doc) -> dict:
    return doc["pages"][0]["reroutes"][0]


def _frame(doc) -> dict:
    return doc["pages"][0]["frames"][0]


HOSTILE = [
    # (how the document is spoiled, where the message points, words it holds)
    (lambda d: _reroute(d).update({"to": "Subtract_1:y"}), "pages[0].reroutes[0]", "which page 'softmax' has not"),
    (lambda d: _reroute(d).update({"from": "ghost:output"}), "pages[0].reroutes[0].from", "no node 'ghost'"),
    (lambda d: d["pages"][0]["reroutes"].append(copy.deepcopy(_reroute(d))), "pages[0].reroutes[2]",
     "a second entry"),
    (lambda d: _reroute(d).update({"points": [[0, 0]] * (MAX_BENDS + 1)}), "pages[0].reroutes[0].points",
     "the limit is 64"),
    (lambda d: _reroute(d).update({"points": [[1e400, 0]]}), "pages[0].reroutes[0].points", "finite"),
    (lambda d: _reroute(d).update({"points": [[1e12, 0]]}), "pages[0].reroutes[0].points", "finite"),
    (lambda d: _reroute(d).update({"points": [["1", 0]]}), "pages[0].reroutes[0].points", "finite"),
    (lambda d: _reroute(d).update({"points": [[1, 2, 3]]}), "pages[0].reroutes[0].points[0]", "[x, y]"),
    (lambda d: _reroute(d).update({"points": []}), "pages[0].reroutes[0].points", "no points"),
    (lambda d: _reroute(d).update({"points": 5}), "pages[0].reroutes[0].points", "must be a list"),
    (lambda d: _reroute(d).update({"bend": 1}), "pages[0].reroutes[0].bend", "unknown key 'bend'"),
    (lambda d: d["pages"][0].update({"reroutes": [_reroute(d)] * 9}), "pages[0].reroutes", "the limit is"),
    (lambda d: d["pages"][0].update({"frames": {}}), "pages[0].frames", "must be a list"),
    (lambda d: _frame(d).update({"blocks": ["nope"]}), "pages[0].frames[0]", "'nope', which the page has not"),
    (lambda d: _frame(d).update({"blocks": []}), "pages[0].frames[0].blocks", "at least one block"),
    (lambda d: _frame(d).update({"blocks": ["x", "x"]}), "pages[0].frames[0]", "twice"),
    (lambda d: _frame(d).update({"blocks": [3]}), "pages[0].frames[0].blocks[0]", "a string"),
    (lambda d: _frame(d).update({"color": "#ff00ff"}), "pages[0].frames[0]", "unknown frame colour"),
    (lambda d: _frame(d).update({"title": "t" * 100_000}), "pages[0].frames[0]", "the limit is 200"),
    (lambda d: _frame(d).update({"note": "n" * 10_001}), "pages[0].frames[0]", "the limit is 10,000"),
    (lambda d: _frame(d).update({"title": "a\u202eb"}), "pages[0].frames[0]", "control characters"),
    (lambda d: _frame(d).update({"title": 7}), "pages[0].frames[0].title", "must be a string"),
    (lambda d: _frame(d).pop("blocks"), "pages[0].frames[0].blocks", "needs a 'blocks'"),
    (lambda d: d["pages"][0].update({"frames": [_frame(d)] * 1001}), "pages[0].frames", "the limit is 1,000"),
]


@pytest.mark.parametrize("spoil, where, words", HOSTILE)
def test_hostile_layouts_are_refused_naming_where(spoil, where, words):
    doc = doc_of(laid_out_project())
    spoil(doc)
    err = refused(doc)
    assert err.where == where and words in err.problem, (err.where, err.problem)


def test_layout_in_a_composite_diagram_is_checked_there():
    project = mlp_project()
    doc = doc_of(project)
    doc["composites"][0]["diagram"]["frames"] = [{"blocks": ["nobody"]}]
    err = refused(doc)
    assert err.where == "composites[0].diagram.frames[0]" and "nobody" in err.problem


def test_the_load_cost_counts_reroute_points_and_frames(monkeypatch):
    """A file whose layout would not fit the budget is refused as too costly, before its model
    is made: the points count as well as the nodes and wires."""
    doc = doc_of(laid_out_project())
    page = doc["pages"][0]
    text = json.dumps(doc)
    monkeypatch.setattr(rules, "LOAD_ALLOWANCE_BYTES", 0)
    io.loads_project(text)                      # fits with the factor alone
    page["reroutes"][0]["points"] = [[0.5, 0.5]] * MAX_BENDS
    page["frames"] = [copy.deepcopy(page["frames"][0]) for _ in range(200)]
    from blockflow.io import loadcost
    bare, costed = copy.deepcopy(doc), doc
    bare["pages"][0].pop("reroutes"), bare["pages"][0].pop("frames")
    assert loadcost._layout_cost(costed["pages"][0]) >= 200 * loadcost._COST_FRAME + MAX_BENDS * loadcost._COST_POINT
    assert loadcost._layout_cost(bare["pages"][0]) == 0


def test_an_older_reader_would_refuse_it_not_misread_it(monkeypatch):
    """What a blockflow before reroutes and frames does with such a file: "unknown key"."""
    monkeypatch.setattr(rules, "PAGE_KEYS", tuple(k for k in rules.PAGE_KEYS if k not in ("reroutes", "frames")))
    from blockflow.io import reader
    monkeypatch.setattr(reader, "PAGE_KEYS", rules.PAGE_KEYS)
    err = refused(doc_of(laid_out_project()))
    assert "unknown key 'reroutes'" in err.problem


def test_the_writer_refuses_what_the_reader_would():
    project = laid_out_project()
    project.pages[0].bends[Edge("x", "output", "Sum_1", "input")] = ((0.0, 0.0),)
    with pytest.raises(ProjectFileError, match="which page 'softmax' has not"):
        io.dumps_project(project)
    project = laid_out_project()
    project.pages[0].frames.append(Frame("t", "mauve", "", ("x",)))
    with pytest.raises(ProjectFileError, match="unknown frame colour"):
        io.dumps_project(project)


def test_the_schema_accepts_what_is_written_and_refuses_a_bad_colour():
    from test_project_io import VALIDATOR
    doc = doc_of(laid_out_project())
    VALIDATOR.validate(doc)
    composite = doc_of(mlp_project())
    composite["composites"][0]["diagram"]["reroutes"] = [{"from": "a:output", "to": "b:x", "points": [[1, 2]]}]
    VALIDATOR.validate(composite)
    _frame(doc)["color"] = "mauve"
    assert not VALIDATOR.is_valid(doc)
