"""The loader's one-pass reading of plain nodes and wires (blockflow/io/plain_items.py) against
the general checks it stands in for (reader._decode_node and _decode_edge): on every node and
wire of the sample projects, and on each of them with one member changed to something odd or
hostile, the fast way either declines (None) or gives what the general way gives; and whatever
the general way refuses, the fast way declines."""
from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest

from blockflow.errors import ProjectFileError
from blockflow.io import reader
from blockflow.io.checks import DupDict, Invalid, object_pairs
from blockflow.io.plain_items import plain_edge, plain_node
from blockflow.project import Node, Page, Project

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = sorted((ROOT / "sample_projects").glob("*.bflow.json"))


def _diagrams(doc):
    for page in doc.get("pages", []):
        yield page
    for comp in doc.get("composites", []):   # a list of objects, each with its diagram
        if isinstance(comp, dict) and isinstance(comp.get("diagram"), dict):
            yield comp["diagram"]


def _sample_items():
    nodes, edges = [], []
    for path in SAMPLES:
        doc = json.loads(path.read_text(), object_pairs_hook=object_pairs)
        for diagram in _diagrams(doc):
            ids = {n["id"]: None for n in diagram.get("nodes", [])}
            nodes += diagram.get("nodes", [])
            edges += [(e, ids) for e in diagram.get("edges", [])]
    return nodes, edges


NODES, EDGES = _sample_items()

ODD_VALUES = [None, 0, 1, -1, 2 ** 70, 1.5, -0.0, math.inf, math.nan, True, False, "", "x", "a\x00b", "é",
              "tab\there", "\u202eevil", "\x7f", "ok name", [], [1, 2], [1.5, "a"], [[1]], [{"a": 1}], [math.nan],
              {}, {"a": 1}, {"dtype": "float32", "shape": [1], "base64": "AAAAAA=="}, DupDict({"a": 1}),
              ["a\x00"], ["é"], [True, None]]


def _general_node(obj):
    try:
        return reader._decode_node(copy.deepcopy(obj), "nodes[0]")
    except Invalid:
        return None


def _same_node(fast: Node, general: Node) -> bool:
    return (fast == general and type(fast.position) is tuple and fast.position == general.position
            and all(type(getattr(fast, f)) is dict for f in ("attrs", "inputs", "state")))


def _check_node(obj):
    general = _general_node(obj)
    fast = plain_node(copy.deepcopy(obj), set())
    if general is None:
        assert fast is None, obj
    elif fast is not None:
        assert _same_node(fast, general), (obj, fast, general)
    return fast


def test_most_sample_nodes_take_the_fast_way_and_give_the_same_node():
    taken = [_check_node(n) is not None for n in NODES]
    assert len(NODES) > 100
    assert sum(taken) >= 0.6 * len(NODES), (sum(taken), len(NODES))


@pytest.mark.parametrize("key", ["id", "block", "label", "position", "attrs", "inputs", "state", "collapsed",
                                 "colour"])
def test_a_node_with_one_member_changed_is_read_alike_or_declined(key):
    plain = [n for n in NODES if plain_node(copy.deepcopy(n), set()) is not None][:12]
    for node in plain:
        for value in ODD_VALUES + [[0.0, 1.0], [1, 2], [1.0], [1.0, 2.0, 3.0], [math.inf, 0.0], ["1", 2.0]]:
            changed = dict(node)
            changed[key] = copy.deepcopy(value)
            _check_node(changed)
        removed = {k: v for k, v in node.items() if k != key}
        _check_node(removed)


@pytest.mark.parametrize("value", ODD_VALUES, ids=repr)
def test_odd_attr_names_and_values(value):
    base = {"id": "n", "block": "Add", "position": [1.0, 2.0], "attrs": {}}
    _check_node({**base, "attrs": {"a": copy.deepcopy(value)}})
    if isinstance(value, str):
        _check_node({**base, "attrs": {value: 1}})
        _check_node({**base, "block": value})
        _check_node({**base, "id": value})


def test_a_duplicate_key_is_declined():
    node = DupDict({"id": "n", "block": "Add"})
    node.dup = "id"
    assert plain_node(node, set()) is None
    assert _general_node(node) is None


def _general_edge(obj, ids):
    try:
        return reader._decode_edge(copy.deepcopy(obj), "edges[0]", ids, "page")
    except Invalid:
        return None


def _check_edge(obj, ids):
    general = _general_edge(obj, ids)
    fast = plain_edge(copy.deepcopy(obj), ids, set())
    if general is None:
        assert fast is None, obj
    elif fast is not None:
        assert fast == general and hash(fast) == hash(general), obj
    return fast


def test_every_sample_wire_takes_the_fast_way_and_gives_the_same_edge():
    assert len(EDGES) > 100
    assert all(_check_edge(e, ids) is not None for e, ids in EDGES)


ODD_ENDS = ["a:x", "a:x[0]", "a:x[01]", "a:x[-1]", "a:", ":x", "a", "a:x:y", "missing:x", "a:1x", "a:x y",
            "a:é", "a:x\x00", "", "a:x[2]", "b.c-d:out", "b.c-d:in[10]"]


@pytest.mark.parametrize("end", ODD_ENDS + [None, 1, ["a:x"], {"a": "x"}], ids=repr)
def test_odd_wire_ends(end):
    ids = {"a": None, "b.c-d": None}
    _check_edge({"from": end, "to": "a:x"}, ids)
    _check_edge({"from": "a:x", "to": end}, ids)
    _check_edge({"from": end, "to": end}, ids)


def test_odd_wire_objects():
    ids = {"a": None}
    for obj in ({"from": "a:x"}, {"from": "a:x", "to": "a:y", "via": 1}, [], "a:x", None,
                {"to": "a:y", "from": "a:x"}):
        _check_edge(obj, ids)
    dup = DupDict({"from": "a:x", "to": "a:y"})
    dup.dup = "to"
    assert plain_edge(dup, ids, set()) is None and _general_edge(dup, ids) is None


def test_a_page_of_plain_items_loads_as_before(tmp_path):
    # the whole loader, fast way and general way, on every sample: the same project
    from blockflow.io.project_io import load_project

    for path in SAMPLES:
        fast = load_project(path)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(reader, "plain_node", lambda obj, names: None)
            mp.setattr(reader, "plain_edge", lambda obj, nodes, ports: None)
            general = load_project(path)
        assert [p.name for p in fast.pages] == [p.name for p in general.pages]
        for a, b in zip(fast.pages, general.pages):
            assert a.nodes == b.nodes and a.edges == b.edges, path.name


# ------------------------------------------------------------------------ the writer's side

from dataclasses import replace  # noqa: E402

import numpy as np  # noqa: E402

from blockflow.io import writer  # noqa: E402
from blockflow.io.project_io import dumps_project, load_project  # noqa: E402

SAMPLE_NODES = [n for path in SAMPLES for page in load_project(path).pages for n in page.nodes.values()]

NODE_CHANGES = {
    "id": ["", "1x", "a b", "a\x00", 5, None, "renamed_1", "a.b-c"],
    "block": ["", "é", "a\x00", "tab\there", "\u202e", 3, None, "Add"],
    "label": ["", "é", "a\x00", "multi\nline", 4, None],
    "position": [(1, 2), (1.0,), (1.0, 2.0, 3.0), (math.inf, 0.0), (math.nan, 0.0), (True, 0.0),
                 (np.float32(1), 2.0), [1.0, 2.0], "xy", None, (2.0 ** 1000, -0.0)],
    "attrs": [{}, {"a": 1}, {"a": [1, 2.5, "x", None, True]}, {"a": (1, 2)}, {"a": [[1]]}, {"a": np.ones(2)},
              {"a": np.float32(1)}, {"a": math.inf}, {"a": "é"}, {"a\x00": 1}, {1: 2}, {"a": {"b": 1}},
              {"a": [math.nan]}, {"é": 1}, {"Add_10": 1, "Add_2": 2}, [], None],
    "inputs": [{}, {"x": np.ones(2, np.float32)}, [], None],
    "state": [{}, {"value": np.zeros(1)}, [], None],
    "collapsed": [True, False, np.bool_(True), 1, None],
}


def _general_written(key, node):
    try:
        return writer._encode_node(key, node, "nodes[0]")
    except Invalid:
        return None


@pytest.mark.parametrize("field", list(NODE_CHANGES))
def test_the_writer_s_one_pass_gives_what_the_general_way_writes(field):
    assert len(SAMPLE_NODES) > 100
    taken = 0
    for node in SAMPLE_NODES[::7]:
        for value in NODE_CHANGES[field]:
            changed = replace(node, **{field: copy.deepcopy(value)})
            general = _general_written(changed.id, changed)
            fast = writer._plain_node(changed.id, changed, set())
            if general is None:
                assert fast is None, (field, value)
            elif fast is not None:
                taken += 1
                assert writer._compact(fast) == writer._compact(general), (field, value)
                assert list(fast) == list(general) and list(fast["attrs"]) == list(general["attrs"])
    assert taken > 0


def test_a_node_under_another_key_is_left_to_the_general_way():
    node = SAMPLE_NODES[0]
    assert writer._plain_node(node.id + "x", node, set()) is None
    assert _general_written(node.id + "x", node) is None


def test_every_sample_is_written_as_the_general_way_writes_it():
    for path in SAMPLES:
        project = load_project(path)
        fast = dumps_project(project)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(writer, "_plain_node", lambda key, node, names: None)
            general = dumps_project(project)
        assert fast == general, path.name


def _written_or_refused(project):
    try:
        return dumps_project(project)
    except ProjectFileError as exc:
        return exc.where, exc.problem


@pytest.mark.parametrize("field, value", [("block", ["Add"]), ("block", {"Add": 1}), ("inputs", np.zeros(3)),
                                          ("state", np.zeros(3)), ("id", np.array(["Add_1"]))], ids=repr)
def test_a_member_of_another_type_is_refused_as_the_general_way_refuses_it(field, value):
    # the one-pass way looked an unhashable block up in a set (TypeError), tested an array's truth
    # (ValueError) and took an id equal to its key (a 1-element array) for a string
    node = Node("Add_1", "Add", {"a": 1}, {}, (1.0, 2.0))
    setattr(node, field, value)
    project = Project([Page("main", {"Add_1": node}, [])])
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(writer, "_plain_node", lambda key, node, names: None)
        general = _written_or_refused(project)
    assert type(general) is tuple and general[0] == f"pages[0].nodes[0].{field}"
    assert _written_or_refused(project) == general


def test_an_empty_block_name_is_refused_after_an_empty_attr_name():
    # the names found plain (block and attr names alike) held "" once an attr had that name, and
    # a later node of block "" was written without the emptiness check: a file the reader refuses
    nodes = {"A_1": Node("A_1", "Add", {"": 1}, {}, (0.0, 0.0)), "B_1": Node("B_1", "", {}, {}, (0.0, 0.0))}
    assert _written_or_refused(Project([Page("main", nodes, [])])) == (
        "pages[0].nodes[1].block", "the block name must not be empty")
