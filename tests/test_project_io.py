"""Project files (blockflow.io.project_io): round-trips, layout, errors, atomic saving, schema."""
from __future__ import annotations

import base64
import copy
import json
import os
import time
import pickle
import re
import stat
import subprocess
import sys
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from blockflow.io import project_io as io
from blockflow.io import rules, saving
from blockflow.errors import ProjectError, ProjectFileError
from blockflow.project import Edge, Page, Project

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = json.loads((ROOT / "assets" / "bflow.schema.json").read_text(encoding="utf-8"))
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)

HYP = settings(deadline=None, max_examples=50, database=None,   # derandomize: from the profile
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# --------------------------------------------------------------------------------------------
# A hand-made project


def sample_project() -> Project:
    project = Project(metadata={"title": "Softmax", "description": "exp(x) / sum(exp(x))"})
    page = project.add_page("softmax")
    page.text = "a note shown on the page"
    page.add_node("Placeholder", id="x", attrs={"shape": [5], "dtype": "float32"},
                  position=(0.0, 120.0))
    page.add_node("ReduceMax", attrs={"axis": -1, "keepdims": True}, position=(150, 40))
    page.add_node("Subtract", position=(300, 120))
    page.add_node("Exp", position=(450, 120))
    page.add_node("Sum", attrs={"axis": None}, position=(600, 200))
    page.add_node("Variable", id="w", label="weights",
                  state={"value": np.array([[0.1, 0.2], [0.3, 0.4]], np.float32)})
    page.add_node("Add", inputs={"y": np.array(1.5, np.float32)})
    page.connect("x", "output", "ReduceMax_1", "input")
    page.connect("x", "output", "Subtract_1", "x")
    page.connect("ReduceMax_1", "output", "Subtract_1", "y")
    page.connect("Subtract_1", "output", "Exp_1", "x")
    page.connect("Exp_1", "output", "Sum_1", "input")
    page.loss = "Sum_1"
    page.feeds["x"] = np.array([1.0, 2.0, 3.0, 4.0, 0.1], np.float32)
    other = project.add_page("training")
    other.add_node("Variable", id="v", state={"value": np.arange(300, dtype=np.float64)})
    other.add_node("AddN")
    other.connect("v", "output", "AddN_1", "inputs[0]")
    other.connect("v", "output", "AddN_1", "inputs[1]")
    other.loss = "AddN_1:output"
    return project


def sample_doc() -> dict:
    return json.loads(io.dumps_project(sample_project()))


# --------------------------------------------------------------------------------------------
# Strategies

FLOAT_SPECIALS = [0.1, -0.0, 0.0, float("nan"), float("inf"), float("-inf"), 1e-45, 65504.0]


# Text a project may hold: anything but NUL (labels, notes, strings); names hold no control
# character at all (blockflow.textsafe.CONTROL_CHARACTERS).
text_chars = st.characters(exclude_categories=("Cs",), exclude_characters="\0")   # Cs: lone surrogates
name_chars = st.characters(exclude_categories=("Cc", "Cs", "Zl", "Zp"),
                           exclude_characters="\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
                                              "\u2066\u2067\u2068\u2069")


def json_values():
    keys = st.text(text_chars, max_size=6).filter(lambda k: k not in {"dtype", "shape", "data", "base64"})
    scalars = (st.none() | st.booleans() | st.integers(-2 ** 70, 2 ** 70)
               | st.floats(allow_nan=False, allow_infinity=False) | st.text(text_chars, max_size=8))
    return st.recursive(scalars, lambda c: st.lists(c, max_size=3)
                        | st.dictionaries(keys, c, max_size=3), max_leaves=8)


@st.composite
def arrays(draw, big=None):
    dtype = np.dtype(draw(st.sampled_from(rules.DTYPES)))
    if big is None:
        big = draw(st.integers(0, 9)) == 0
    if big:
        shape = draw(st.sampled_from([(257,), (300,), (17, 20), (2, 3, 50)]))
    else:
        shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4))
    if dtype.kind == "f":
        # any float of the width (NaNs included) and the nasty ones: 0.1, -0.0, NaN, +-Inf
        elements = st.floats(width=dtype.itemsize * 8) | st.sampled_from(
            [dtype.type(v) for v in FLOAT_SPECIALS])
    else:
        elements = None
    return draw(hnp.arrays(dtype, shape, elements=elements))


node_ids = st.from_regex(r"[A-Za-z_][A-Za-z0-9_.\-]{0,6}", fullmatch=True)
ports = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,4}(\[(0|[1-9][0-9]?)\])?", fullmatch=True)
texts = st.text(text_chars, max_size=12)
names = st.text(name_chars, max_size=12)
finite = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e9, max_value=1e9)


@st.composite
def projects(draw):
    project = Project(metadata=draw(st.dictionaries(texts, json_values(), max_size=3)))
    page_names = draw(st.lists(st.text(name_chars, min_size=1, max_size=8).filter(lambda s: "/" not in s and not s.startswith("@")),
                               min_size=1, max_size=3, unique=True))
    for name in page_names:
        page = project.add_page(name)
        page.text = draw(texts)
        ids = draw(st.lists(node_ids, max_size=5, unique=True))
        for nid in ids:
            attrs = draw(st.dictionaries(names, json_values() | arrays(), max_size=4))
            page.add_node(draw(st.sampled_from(["MatMul", "Add", "Placeholder", "Variable",
                                                "Blöck ünknown ✓"])),
                          id=nid, attrs=attrs, label=draw(texts),
                          inputs=draw(st.dictionaries(ports, arrays(), max_size=2)),
                          state=draw(st.dictionaries(st.text(name_chars, min_size=1, max_size=5), arrays(),
                                                     max_size=2)),
                          position=(draw(finite), draw(finite)))
        if ids:
            edges = draw(st.lists(st.tuples(st.sampled_from(ids), ports, st.sampled_from(ids),
                                            ports), max_size=6, unique=True))
            for e in edges:
                page.connect(*e)
            for nid in draw(st.lists(st.sampled_from(ids), max_size=2, unique=True)):
                page.feeds[nid] = draw(arrays())
            page.loss = draw(st.none() | st.sampled_from(ids)
                             | st.tuples(st.sampled_from(ids), ports).map(":".join))
    return project


def assert_bit_exact(p: Project, q: Project):
    """Every array in q has the dtype, shape and bytes of the one in p."""
    def same(a, b):
        assert isinstance(b, np.ndarray)
        assert a.dtype == b.dtype and a.shape == b.shape
        assert np.ascontiguousarray(a).tobytes() == b.tobytes()

    for pa, pb in zip(p.pages, q.pages):
        for nid, na in pa.nodes.items():
            nb = pb.nodes[nid]
            for k, v in na.attrs.items():
                if isinstance(v, np.ndarray):
                    same(v, nb.attrs[k])
            for k, v in na.inputs.items():
                same(v, nb.inputs[k])
            for k, v in na.state.items():
                same(v, nb.state[k])
        for k, v in pa.feeds.items():
            same(v, pb.feeds[k])


# --------------------------------------------------------------------------------------------
# Round-trips


@HYP
@given(projects())
def test_random_projects_round_trip(project):
    text = io.dumps_project(project)
    for marker in ('"base64"', '"NaN"', '"-Infinity"', "-0.0", '"edges": [\n', '"loss": "'):
        if marker in text:
            event(f"has {marker}")
    event(f"{len(project.pages)} pages")
    loaded = io.loads_project(text)
    assert loaded == project
    assert_bit_exact(project, loaded)
    assert io.dumps_project(loaded) == text
    assert io.loads_project(text.encode("utf-8")) == project


@settings(HYP, max_examples=20)
@given(projects())
@example(Project(pages=[Page("0")], metadata={"title": None, "description": 5}))  # free-form, as the loader takes it
def test_schema_accepts_dumps_of_random_projects(project):
    VALIDATOR.validate(json.loads(io.dumps_project(project)))


def test_sample_round_trip_through_a_file(tmp_path):
    path = tmp_path / "softmax.bflow.json"
    project = sample_project()
    io.save_project(project, path)
    assert io.load_project(path) == project
    assert io.load_project(str(path)) == project
    text = path.read_text(encoding="utf-8")
    assert text == io.dumps_project(project)
    assert io.dumps_project(io.loads_project(text)) == text


def test_layout_is_the_documented_one():
    text = io.dumps_project(sample_project())
    assert text.endswith("}\n") and not text.endswith("\n\n")
    assert text.startswith('{\n  "format": "blockflow-project",\n  "version": 2,\n  "metadata": {\n')
    lines = text.splitlines()
    # every edge on one line, sorted by from then to
    edges = [ln.strip().rstrip(",") for ln in lines if ln.strip().startswith('{"from"')]
    assert edges[:5] == [
        '{"from": "Exp_1:output", "to": "Sum_1:input"}',
        '{"from": "ReduceMax_1:output", "to": "Subtract_1:y"}',
        '{"from": "Subtract_1:output", "to": "Exp_1:x"}',
        '{"from": "x:output", "to": "ReduceMax_1:input"}',
        '{"from": "x:output", "to": "Subtract_1:x"}',
    ]
    # short arrays on one line, float32 0.1 as 0.1
    assert ('        "x": {"dtype": "float32", "shape": [5], "data": [1.0, 2.0, 3.0, 4.0, 0.1]}'
            in lines)
    assert '            "y": {"dtype": "float32", "shape": [], "data": [1.5]}' in lines
    assert '          "position": [0.0, 120.0],' in lines
    # attrs sorted, plain JSON
    i = lines.index('          "attrs": {', lines.index('          "block": "ReduceMax",'))
    assert lines[i + 1:i + 3] == ['            "axis": -1,', '            "keepdims": true']
    # a large array as base64
    assert any(ln.strip().startswith('"base64": "') for ln in lines)
    # key order of a node and of a page
    doc = json.loads(text)
    assert list(doc) == ["format", "version", "metadata", "pages"]
    assert list(doc["pages"][0]) == ["name", "text", "loss", "nodes", "edges", "feeds"]
    assert list(doc["pages"][0]["nodes"][0]) == ["id", "block", "label", "position", "attrs",
                                                 "inputs", "state"]
    assert list(doc["pages"][0]["feeds"]["x"]) == ["dtype", "shape", "data"]


def test_the_documented_example_is_exactly_what_dumps_writes():
    doc = (ROOT / "docs" / "project-format.md").read_text(encoding="utf-8")
    example = doc.split("```jsonc\n", 1)[1].split("```", 1)[0]
    text = re.sub(r" *//.*", "", example)  # the comments are for the page only
    project = io.loads_project(text, "docs/project-format.md")
    assert io.dumps_project(project) == text
    VALIDATOR.validate(json.loads(text))


def test_output_does_not_depend_on_insertion_order():
    a = sample_project()
    b = sample_project()
    node = b.page().nodes["ReduceMax_1"]
    node.attrs = dict(reversed(list(node.attrs.items())))
    b.page().edges.reverse()
    assert io.dumps_project(a) == io.dumps_project(b)


def test_edges_sort_naturally():
    project = Project()
    page = project.add_page("p")
    for _ in range(11):
        page.add_node("Add")
    page.connect("Add_10", "output", "Add_1", "x")
    page.connect("Add_2", "output", "Add_1", "x")
    page.connect("Add_1", "output", "Add_11", "inputs[10]")
    page.connect("Add_1", "output", "Add_11", "inputs[2]")
    edges = json.loads(io.dumps_project(project))["pages"][0]["edges"]
    assert [(e["from"], e["to"]) for e in edges] == [
        ("Add_1:output", "Add_11:inputs[2]"), ("Add_1:output", "Add_11:inputs[10]"),
        ("Add_2:output", "Add_1:x"), ("Add_10:output", "Add_1:x")]



def test_names_with_runs_of_thousands_of_digits_are_saved_in_natural_order():
    # int() refuses a run of digits past 4300 (sys.get_int_max_str_digits): a file with such a
    # node id or attr name loaded, and saving it raised ValueError from the sort
    long_id, longer_id = "n" + "9" * 4999, "n1" + "0" * 4999
    doc = {"format": rules.FORMAT, "version": rules.VERSION, "pages": [{"name": "p", "nodes": [
        {"id": longer_id, "block": "Add"}, {"id": long_id, "block": "Add", "attrs": {"7" * 6000: 1, "8": 2}},
        {"id": "n2", "block": "Add"}], "edges": [{"from": f"{i}:output", "to": "n2:x"} for i in (longer_id, long_id)]}]}
    project = io.loads_project(json.dumps(doc))
    written = json.loads(io.dumps_project(project))["pages"][0]
    assert [e["from"] for e in written["edges"]] == [f"{long_id}:output", f"{longer_id}:output"]
    assert list(written["nodes"][1]["attrs"]) == ["8", "7" * 6000]
    assert io.loads_project(io.dumps_project(project)).page().nodes == project.page().nodes

def test_medium_array_is_written_in_rows():
    arr = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 7
    project = Project()
    project.add_page("p").add_node("Const", id="c", attrs={"value": arr})
    text = io.dumps_project(project)
    assert '              "data": [\n' in text
    row = ", ".join(str(np.float32(v)) for v in arr.reshape(-1)[:4])
    assert f"\n                {row},\n" in text  # one row of the last axis per line
    assert io.dumps_project(io.loads_project(text)) == text


# --------------------------------------------------------------------------------------------
# Arrays


def test_array_encoding_small_and_large():
    small = io.encode_array(np.arange(6, dtype=np.int32).reshape(2, 3))
    assert small == {"dtype": "int32", "shape": [2, 3], "data": [0, 1, 2, 3, 4, 5]}
    edge = io.encode_array(np.zeros(256, np.uint8))
    assert "data" in edge
    large = io.encode_array(np.arange(257, dtype=">i2"))  # big-endian in, little-endian out
    assert set(large) == {"dtype", "shape", "base64"} and large["dtype"] == "int16"
    assert base64.b64decode(large["base64"]) == np.arange(257, dtype="<i2").tobytes()
    back = io.decode_array(large)
    assert back.dtype == np.int16 and back.flags.writeable
    np.testing.assert_array_equal(back, np.arange(257))
    empty = io.encode_array(np.zeros((0, 3), np.float64))
    assert empty == {"dtype": "float64", "shape": [0, 3], "data": []}
    assert io.decode_array(empty).shape == (0, 3)


def test_float_values_are_shortest_and_exact():
    arr = np.array([0.1, -0.0, np.nan, np.inf, -np.inf, 1 / 3, 1e-45, 3.4028235e38], np.float32)
    obj = io.encode_array(arr)
    assert obj["data"] == [0.1, -0.0, "NaN", "Infinity", "-Infinity", 0.33333334, 1e-45,
                           3.4028235e38]
    assert io.decode_array(obj).tobytes() == arr.tobytes()
    f16 = np.array([0.1, 65504], np.float16)
    assert io.encode_array(f16)["data"] == [0.1, 65500.0]  # the shortest that reads back
    assert io.decode_array(io.encode_array(f16)).tobytes() == f16.tobytes()


def test_every_float16_and_many_float32_values_round_trip_as_data():
    every = np.arange(2 ** 16, dtype=np.uint16).view(np.float16)
    every = every[~np.isnan(every)]  # NaN payloads go to base64, tested below
    rng = np.random.default_rng(1234)
    f32 = rng.integers(0, 2 ** 32, size=40_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    f32 = f32[~np.isnan(f32)]
    for values in (every, f32):
        for i in range(0, values.size, 256):
            chunk = values[i:i + 256]
            obj = io.encode_array(chunk)
            assert "data" in obj
            assert io.decode_array(obj).tobytes() == chunk.tobytes()


def test_nan_payloads_fall_back_to_base64():
    arr = np.array([0x7FC00001, 0xFFC00000], np.uint32).view(np.float32)
    obj = io.encode_array(arr)
    assert "base64" in obj
    assert io.decode_array(obj).tobytes() == arr.tobytes()
    assert "data" in io.encode_array(np.array([np.nan], np.float32))


def test_bool_arrays_are_normalised():
    weird = np.array([0, 1, 2, 255], np.uint8).view(bool)
    obj = io.encode_array(weird)
    assert obj["data"] == [False, True, True, True]
    big = io.encode_array(np.tile(weird, 100))
    assert set(base64.b64decode(big["base64"])) == {0, 1}


@pytest.mark.parametrize("dtype", ["complex64", "float128" if hasattr(np, "float128") else "U3",
                                   "object", "uint16"])
def test_unsupported_dtypes_are_refused(dtype):
    arr = np.zeros(2, dtype=dtype)
    with pytest.raises(ProjectFileError, match="cannot be saved"):
        io.encode_array(arr)


@settings(HYP, max_examples=80)
@given(arrays())
def test_random_arrays_round_trip_bit_exactly(arr):
    obj = io.encode_array(arr)
    assert ("data" in obj) == (arr.size <= rules.INLINE_DATA_MAX) or arr.dtype.kind == "f"
    json_obj = json.loads(json.dumps(obj, allow_nan=False))
    back = io.decode_array(json_obj)
    assert back.dtype == arr.dtype and back.shape == arr.shape
    assert back.tobytes() == np.ascontiguousarray(arr).tobytes()


# --------------------------------------------------------------------------------------------
# Attrs: types survive, documented conversions


def test_attr_python_types_survive():
    attrs = {"i": 3, "f": 3.0, "neg0": -0.0, "b": True, "n": None, "s": "ß ✓ 名前",
             "l": [1, 2.5, "x", [True, None]], "d": {"z": 1, "a": [1]}, "big": 2 ** 80,
             "arr": np.array([[1, 2]], np.int8)}
    project = Project()
    project.add_page("p").add_node("Const", id="c", attrs=attrs)
    loaded = io.loads_project(io.dumps_project(project)).page().nodes["c"].attrs
    for k, v in attrs.items():
        if isinstance(v, np.ndarray):
            assert loaded[k].dtype == np.int8 and loaded[k].tolist() == [[1, 2]]
        else:
            assert type(loaded[k]) is type(v) and loaded[k] == v
    assert str(loaded["neg0"]) == "-0.0"
    assert io.loads_project(io.dumps_project(project)) == project


def test_documented_attr_conversions():
    """Tuples come back as lists; numpy scalars and non-finite floats as 0-d arrays."""
    project = Project()
    project.add_page("p").add_node("Const", id="c", attrs={
        "shape": (2, 3), "nested": ((1,), [2]), "scalar": np.float32(0.1), "fill": float("-inf"),
        "flag": np.bool_(True)})
    loaded = io.loads_project(io.dumps_project(project)).page().nodes["c"].attrs
    assert loaded["shape"] == [2, 3] and loaded["nested"] == [[1], [2]]
    assert loaded["scalar"].shape == () and loaded["scalar"].dtype == np.float32
    assert loaded["scalar"] == np.float32(0.1)
    assert loaded["fill"].dtype == np.float64 and loaded["fill"] == -np.inf
    assert loaded["flag"].dtype == bool and loaded["flag"].shape == ()


def test_empty_loss_is_written_as_null():
    project = sample_project()
    project.page().loss = ""
    assert json.loads(io.dumps_project(project))["pages"][0]["loss"] is None


@pytest.mark.parametrize("mutate,where,problem", [
    (lambda p: p.page().nodes["x"].attrs.update(bad={1, 2}),
     "pages[0].nodes[0].attrs.bad", "type set cannot be saved"),
    (lambda p: p.page().nodes["x"].attrs.update(bad={"dtype": "a", "shape": [], "data": []}),
     "pages[0].nodes[0].attrs.bad", "would be read back as an array"),
    (lambda p: p.page().nodes["x"].attrs.update(bad={1: 2}),
     "pages[0].nodes[0].attrs.bad", "keys must be strings"),
    (lambda p: p.page().nodes["x"].attrs.update(bad=np.zeros(2, np.complex64)),
     "pages[0].nodes[0].attrs.bad", "complex64 cannot be saved"),
    (lambda p: p.page().nodes["x"].inputs.update(y=np.array(["a"])),
     "pages[0].nodes[0].inputs.y", "dtype <U1 cannot be saved"),
    (lambda p: p.page().nodes["x"].inputs.update({"no port": np.zeros(1)}),
     'pages[0].nodes[0].inputs["no port"]', "not a valid port name"),
    (lambda p: p.page().edges.append(Edge("x", "output", "ghost", "x")),
     "pages[0].edges[5].to", "no node 'ghost' on page 'softmax'"),
    (lambda p: p.page().edges.append(Edge("x", "output", "Subtract_1", "x")),
     "pages[0].edges[5]", "appears twice"),
    (lambda p: p.page().feeds.update(ghost=np.zeros(1)),
     "pages[0].feeds.ghost", "no such node"),
    (lambda p: setattr(p.page(), "loss", "ghost"), "pages[0].loss", "no 'ghost'"),
    (lambda p: setattr(p.pages[1], "name", "softmax"), "pages[1].name", "duplicate page name"),
    (lambda p: setattr(p.page().nodes["x"], "position", (0.0, float("nan"))),
     "pages[0].nodes[0].position", "2 finite numbers"),
    (lambda p: setattr(p.page().nodes["x"], "position", ("1", "2")),
     "pages[0].nodes[0].position", "2 finite numbers"),
    (lambda p: setattr(p.page().nodes["x"], "id", "y"), "pages[0].nodes[0].id",
     "stored under 'x'"),
    (lambda p: setattr(p.page().nodes["x"], "label", "\ud800"), "pages[0].nodes[0].label",
     "lone surrogate"),
    (lambda p: p.metadata.update(a=np.zeros(1)), "metadata.a", "only plain JSON"),
    (lambda p: p.metadata.update(a=float("nan")), "metadata.a", "cannot be written in JSON"),
    (lambda p: p.pages.clear(), "pages", "no pages"),
])
def test_dumps_refuses_what_would_not_load(mutate, where, problem):
    project = sample_project()
    mutate(project)
    with pytest.raises(ProjectFileError) as info:
        io.dumps_project(project, path="mine.bflow.json")
    err = info.value
    assert err.path == "mine.bflow.json" and err.where == where and problem in err.problem
    assert str(err).startswith(f"mine.bflow.json at {where}: ")


# --------------------------------------------------------------------------------------------
# Bad files: one ProjectFileError naming the file, the place and the problem


def set_in(doc, path, value):
    *parents, last = path
    target = doc
    for k in parents:
        target = target[k]
    target[last] = value
    return doc


def del_in(doc, path):
    *parents, last = path
    target = doc
    for k in parents:
        target = target[k]
    del target[last]
    return doc


N0 = ["pages", 0, "nodes", 0]  # the Placeholder "x"
ARR = N0 + ["attrs", "value"]  # an array attr we put there


def with_array(obj):
    return lambda d: set_in(d, ARR, obj)


BAD_DOCS = [
    # top level
    ("top_list", lambda d: [d], "", "the top level must be a JSON object, found a list"),
    ("format_missing", lambda d: del_in(d, ["format"]), "format", "not a blockflow project"),
    ("format_wrong", lambda d: set_in(d, ["format"], "blockflow"), "format",
     'expected "blockflow-project", found the string "blockflow"'),
    ("version_missing", lambda d: del_in(d, ["version"]), "version", "missing"),
    ("version_str", lambda d: set_in(d, ["version"], "1"), "version", "must be an integer"),
    ("version_float", lambda d: set_in(d, ["version"], 1.0), "version", "must be an integer"),
    ("version_newer", lambda d: set_in(d, ["version"], 3), "version",
     "written by a newer blockflow (format version 3); this one reads versions up to 2"),
    ("version_zero", lambda d: set_in(d, ["version"], 0), "version", "unknown format version 0"),
    ("top_unknown", lambda d: set_in(d, ["pagez"], 1), "pagez",
     "unknown key 'pagez' in the top level (allowed: format, version, metadata, composites, pages); "
     "did you mean 'pages'?"),
    ("metadata_list", lambda d: set_in(d, ["metadata"], []), "metadata", "must be an object"),
    ("pages_missing", lambda d: del_in(d, ["pages"]), "pages", "missing"),
    ("pages_obj", lambda d: set_in(d, ["pages"], {}), "pages", "must be a list"),
    ("pages_empty", lambda d: set_in(d, ["pages"], []), "pages", "at least one page"),
    # pages
    ("page_not_obj", lambda d: set_in(d, ["pages", 1], "p"), "pages[1]", "must be an object"),
    ("page_name_missing", lambda d: del_in(d, ["pages", 1, "name"]), "pages[1].name", "missing"),
    ("page_name_empty", lambda d: set_in(d, ["pages", 1, "name"], ""), "pages[1].name",
     "must not be empty"),
    ("page_name_slash", lambda d: set_in(d, ["pages", 1, "name"], "a/b"), "pages[1].name",
     "must not contain '/'"),
    ("page_name_int", lambda d: set_in(d, ["pages", 1, "name"], 7), "pages[1].name",
     "must be a string"),
    ("page_name_dup", lambda d: set_in(d, ["pages", 1, "name"], "softmax"), "pages[1].name",
     'duplicate page name "softmax" (also pages[0])'),
    ("page_unknown", lambda d: set_in(d, ["pages", 0, "lost"], None), "pages[0].lost",
     "unknown key 'lost' in a page"),
    ("page_text", lambda d: set_in(d, ["pages", 0, "text"], ["x"]), "pages[0].text",
     "must be a string"),
    ("nodes_obj", lambda d: set_in(d, ["pages", 0, "nodes"], {}), "pages[0].nodes",
     "must be a list"),
    # nodes
    ("node_not_obj", lambda d: set_in(d, N0, []), "pages[0].nodes[0]", "must be an object"),
    ("node_id_colon", lambda d: set_in(d, N0 + ["id"], "a:b"), "pages[0].nodes[0].id",
     '"a:b" is not a valid node id'),
    ("node_id_int", lambda d: set_in(d, N0 + ["id"], 1), "pages[0].nodes[0].id",
     "must be a string"),
    ("node_id_dup", lambda d: set_in(d, ["pages", 0, "nodes", 2, "id"], "x"),
     "pages[0].nodes[2].id", "duplicate node id 'x' (also nodes[0])"),
    ("node_block_missing", lambda d: del_in(d, N0 + ["block"]), "pages[0].nodes[0].block",
     "missing: a node needs a 'block'"),
    ("node_block_empty", lambda d: set_in(d, N0 + ["block"], ""), "pages[0].nodes[0].block",
     "must not be empty"),
    ("node_label", lambda d: set_in(d, N0 + ["label"], 5), "pages[0].nodes[0].label",
     "must be a string"),
    ("node_typo", lambda d: set_in(d, N0 + ["positon"], [0, 0]), "pages[0].nodes[0].positon",
     "did you mean 'position'?"),
    ("position_short", lambda d: set_in(d, N0 + ["position"], [1]),
     "pages[0].nodes[0].position", "list of 2 numbers"),
    ("position_str", lambda d: set_in(d, N0 + ["position"], [1, "2"]),
     "pages[0].nodes[0].position[1]", "must be a number"),
    ("position_bool", lambda d: set_in(d, N0 + ["position"], [True, 2]),
     "pages[0].nodes[0].position[0]", "must be a number"),
    ("attrs_list", lambda d: set_in(d, N0 + ["attrs"], []), "pages[0].nodes[0].attrs",
     "attrs must be an object"),
    ("inputs_list", lambda d: set_in(d, N0 + ["inputs"], []), "pages[0].nodes[0].inputs",
     "inputs must be an object"),
    ("state_str", lambda d: set_in(d, N0 + ["state"], "s"), "pages[0].nodes[0].state",
     "state must be an object"),
    ("inputs_bad_port", lambda d: set_in(d, N0 + ["inputs", "x y"], {}),
     'pages[0].nodes[0].inputs["x y"]', "not a valid port name"),
    ("inputs_not_array", lambda d: set_in(d, N0 + ["inputs", "y"], [1, 2]),
     "pages[0].nodes[0].inputs.y", "expected an array object"),
    ("state_empty_key", lambda d: set_in(d, N0 + ["state", ""], {}),
     "pages[0].nodes[0].state", "must not be empty"),
    # edges
    ("edges_obj", lambda d: set_in(d, ["pages", 0, "edges"], {}), "pages[0].edges",
     "must be a list"),
    ("edge_not_obj", lambda d: set_in(d, ["pages", 0, "edges", 0], "x:output"),
     "pages[0].edges[0]", "an edge must be an object"),
    ("edge_missing_to", lambda d: del_in(d, ["pages", 0, "edges", 0, "to"]),
     "pages[0].edges[0].to", "missing"),
    ("edge_unknown", lambda d: set_in(d, ["pages", 0, "edges", 0, "weight"], 1),
     "pages[0].edges[0].weight", "unknown key 'weight'"),
    ("edge_no_colon", lambda d: set_in(d, ["pages", 0, "edges", 0, "from"], "x"),
     "pages[0].edges[0].from", 'is not of the form "node:port"'),
    ("edge_int", lambda d: set_in(d, ["pages", 0, "edges", 0, "from"], 3),
     "pages[0].edges[0].from", "must be a string"),
    ("edge_bad_port", lambda d: set_in(d, ["pages", 0, "edges", 0, "from"], "x:out put"),
     "pages[0].edges[0].from", "not a valid port name"),
    ("edge_dangling", lambda d: set_in(d, ["pages", 0, "edges", 0, "to"], "nope:x"),
     "pages[0].edges[0].to", "no node 'nope' on page 'softmax' (a dangling edge)"),
    ("edge_dup", lambda d: set_in(d, ["pages", 0, "edges", 1], d["pages"][0]["edges"][0]),
     "pages[0].edges[1]", "the same edge"),
    # feeds, loss
    ("feeds_list", lambda d: set_in(d, ["pages", 0, "feeds"], []), "pages[0].feeds",
     "must be an object"),
    ("feeds_ghost", lambda d: set_in(d, ["pages", 0, "feeds", "ghost"], d["pages"][0]["feeds"]["x"]),
     "pages[0].feeds.ghost", "a feed for 'ghost', but page 'softmax' has no such node"),
    ("feeds_not_array", lambda d: set_in(d, ["pages", 0, "feeds", "x"], 1.0),
     "pages[0].feeds.x", "expected an array object"),
    ("loss_ghost", lambda d: set_in(d, ["pages", 0, "loss"], "Ghost_1"), "pages[0].loss",
     "there is no 'Ghost_1'"),
    ("loss_port_ghost", lambda d: set_in(d, ["pages", 0, "loss"], "Ghost_1:output"),
     "pages[0].loss", "there is no 'Ghost_1'"),
    ("loss_empty_port", lambda d: set_in(d, ["pages", 0, "loss"], "Sum_1:"), "pages[0].loss",
     'is not of the form "node" or "node:port"'),
    ("loss_int", lambda d: set_in(d, ["pages", 0, "loss"], 1), "pages[0].loss",
     "must be null or a string"),
    # arrays
    ("arr_dtype", with_array({"dtype": "complex64", "shape": [1], "data": [1]}),
     "pages[0].nodes[0].attrs.value.dtype", 'unsupported dtype "complex64"'),
    ("arr_dtype_obj", lambda d: set_in(d, ["pages", 0, "feeds", "x", "dtype"], ["f4"]),
     "pages[0].feeds.x.dtype", "unsupported dtype"),
    ("arr_shape_neg", with_array({"dtype": "float32", "shape": [-1], "data": []}),
     "pages[0].nodes[0].attrs.value.shape[0]", "non-negative integer, found the integer -1"),
    ("arr_shape_str", with_array({"dtype": "float32", "shape": "2", "data": []}),
     "pages[0].nodes[0].attrs.value.shape", "list of non-negative integers"),
    ("arr_shape_float", with_array({"dtype": "float32", "shape": [2.0], "data": [1, 2]}),
     "pages[0].nodes[0].attrs.value.shape[0]", "non-negative integer"),
    ("arr_len", with_array({"dtype": "float32", "shape": [2, 3], "data": [1, 2, 3, 4, 5]}),
     "pages[0].nodes[0].attrs.value.data", "5 values, but shape [2, 3] needs 6"),
    ("arr_data_obj", with_array({"dtype": "float32", "shape": [1], "data": "1"}),
     "pages[0].nodes[0].attrs.value.data", "must be a flat list"),
    ("arr_float_str", with_array({"dtype": "float32", "shape": [2], "data": [1, "nan"]}),
     "pages[0].nodes[0].attrs.value.data[1]", 'must be numbers or "NaN"'),
    ("arr_float_bool", with_array({"dtype": "float64", "shape": [1], "data": [True]}),
     "pages[0].nodes[0].attrs.value.data[0]", "must be numbers"),
    ("arr_float_range", with_array({"dtype": "float32", "shape": [1], "data": [1e39]}),
     "pages[0].nodes[0].attrs.value.data[0]", "out of range for float32"),
    ("arr_float_huge_int", with_array({"dtype": "float64", "shape": [1], "data": [10 ** 400]}),
     "pages[0].nodes[0].attrs.value.data[0]", "a very large integer is out of range"),
    ("arr_int_float", with_array({"dtype": "int32", "shape": [1], "data": [1.5]}),
     "pages[0].nodes[0].attrs.value.data[0]", "int32 data must be integers, found the number 1.5"),
    ("arr_uint8_range", with_array({"dtype": "uint8", "shape": [2], "data": [1, 300]}),
     "pages[0].nodes[0].attrs.value.data[1]", "300 does not fit in uint8 (0..255)"),
    ("arr_bool_int", with_array({"dtype": "bool", "shape": [1], "data": [1]}),
     "pages[0].nodes[0].attrs.value.data[0]", "true or false"),
    ("arr_b64_chars", with_array({"dtype": "uint8", "shape": [3], "base64": "AA$A"}),
     "pages[0].nodes[0].attrs.value.base64", "not valid base64"),
    ("arr_b64_lies", with_array({"dtype": "float32", "shape": [300],
                                 "base64": base64.b64encode(bytes(8)).decode()}),
     "pages[0].nodes[0].attrs.value.base64",
     "base64 decodes to 8 bytes, but float32 [300] needs 1,200"),
    ("arr_b64_long", with_array({"dtype": "uint8", "shape": [2],
                                 "base64": base64.b64encode(bytes(3)).decode()}),
     "pages[0].nodes[0].attrs.value.base64", "decodes to 3 bytes, but uint8 [2] needs 2"),
    ("arr_b64_bool", with_array({"dtype": "bool", "shape": [2],
                                 "base64": base64.b64encode(b"\x01\x07").decode()}),
     "pages[0].nodes[0].attrs.value.base64", "bytes 0 or 1"),
    ("arr_b64_int", lambda d: set_in(d, ["pages", 1, "nodes", 0, "state", "value", "base64"], 5),
     "pages[1].nodes[0].state.value.base64", "must be a string"),
    ("arr_both", lambda d: set_in(d, ["pages", 0, "feeds", "x", "base64"], ""),
     "pages[0].feeds.x", 'exactly one of "data" and "base64"'),
    ("arr_neither", lambda d: del_in(d, ["pages", 0, "feeds", "x", "data"]),
     "pages[0].feeds.x", 'exactly one of "data" and "base64"'),
    ("arr_unknown", lambda d: set_in(d, ["pages", 0, "feeds", "x", "order"], "C"),
     "pages[0].feeds.x.order", "unknown key 'order' in an array object"),
    ("arr_in_list", lambda d: set_in(d, N0 + ["attrs", "l"],
                                     [1, {"dtype": "bool", "shape": [1], "data": [2]}]),
     "pages[0].nodes[0].attrs.l[1].data[0]", "true or false"),
    ("attr_odd_key", lambda d: set_in(d, N0 + ["attrs", "a b"], {"x": [1, {"k": float("inf")}]}),
     'pages[0].nodes[0].attrs["a b"].x[1].k', "Infinity is not valid JSON"),
]


@pytest.mark.parametrize("mutate,where,problem", [c[1:] for c in BAD_DOCS],
                         ids=[c[0] for c in BAD_DOCS])
def test_bad_documents(tmp_path, mutate, where, problem):
    doc = mutate(sample_doc())
    path = tmp_path / "bad.bflow.json"
    path.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    with pytest.raises(ProjectFileError) as info:
        io.load_project(path)
    err = info.value
    message = str(err)
    assert err.path == str(path) and str(path) in message
    assert err.where == where, message
    if where:
        assert f" at {where}: " in message
    assert problem in err.problem, message
    assert isinstance(err, ProjectError)
    assert err.__cause__ is None and err.__suppress_context__


def raw_error(data, path="raw.bflow.json"):
    with pytest.raises(ProjectFileError) as info:
        io.loads_project(data, path)
    assert info.value.path == path and str(info.value).startswith(path)
    return info.value


@pytest.mark.parametrize("data,where,problem", [
    (b'{"format": "blockflow-project", "x": "\xff"}', "line 1, column 39 (byte 38)",
     "the file is not UTF-8 text (invalid start byte: byte 0xff)"),
    (b'{\n  "a": "caf\xe9"\n}', "line 2, column 12 (byte 13)",
     "not UTF-8 text (invalid continuation byte: byte 0xe9)"),
    ('{"a": 1}'.encode("utf-16"), "", "UTF-16"),
    (b"", "", "the file is empty"),
    ("  \n", "", "the file is empty"),
    ('{"format": }', "line 1, column 12", "not valid JSON: Expecting value"),
    ('{"format": "blockflow-project",\n "version": 1,,}', "line 2, column 15",
     "not valid JSON"),
    ("[1, 2", "line 1, column 6", "not valid JSON"),
    ('"just a string"', "", "found the string \"just a string\""),
    ('{"format": "blockflow-project", "format": "x"}', "format", "the key 'format' appears twice"),
])
def test_bad_raw_files(data, where, problem):
    err = raw_error(data)
    assert err.where == where and problem in err.problem, str(err)


def test_duplicate_key_deep_inside(tmp_path):
    text = io.dumps_project(sample_project()).replace('"id": "x",', '"id": "x", "id": "y",', 1)
    err = raw_error(text)
    assert err.where == "pages[0].nodes[0].id" and "the key 'id' appears twice" in err.problem


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity"])
def test_non_json_constants_are_named_with_their_place(token):
    text = io.dumps_project(sample_project())
    err = raw_error(text.replace('"axis": -1', f'"axis": {token}'))
    assert err.where == "pages[0].nodes[1].attrs.axis"
    assert f"{token} is not valid JSON" in err.problem
    err = raw_error(text.replace('"position": [0.0, 120.0]', f'"position": [{token}, 1]'))
    assert err.where == "pages[0].nodes[0].position[0]"
    assert f"found {token} (which is not valid JSON)" in err.problem
    err = raw_error(text.replace('"data": [1.5]', f'"data": [{token}]'))
    assert err.where == "pages[0].nodes[6].inputs.y.data[0]"


def test_numbers_that_overflow_are_refused():
    text = io.dumps_project(sample_project())
    err = raw_error(text.replace('"axis": -1', '"axis": 1e999'))
    assert err.where == "pages[0].nodes[1].attrs.axis" and "out of range" in err.problem
    err = raw_error(text.replace('"data": [1.5]', '"data": [-1e999]'))
    assert err.where == "pages[0].nodes[6].inputs.y.data[0]" and "out of range" in err.problem
    err = raw_error(text.replace('"position": [0.0, 120.0]', '"position": [0.0, 1e999]'))
    assert err.where == "pages[0].nodes[0].position[1]" and "finite" in err.problem


def test_lone_surrogate_in_a_file_is_refused():
    text = io.dumps_project(sample_project()).replace('"label": "weights"', '"label": "\\ud800"')
    err = raw_error(text)
    assert err.where == "pages[0].nodes[5].label" and "lone surrogate" in err.problem
    # a proper pair is fine
    ok = io.loads_project(text.replace("\\ud800", "\\ud83d\\ude00"))
    assert ok.page().nodes["w"].label == "😀"


def test_utf8_bom_is_accepted():
    text = io.dumps_project(sample_project())
    assert io.loads_project(b"\xef\xbb\xbf" + text.encode("utf-8")) == sample_project()


def test_missing_and_unreadable_files(tmp_path):
    with pytest.raises(ProjectFileError, match="cannot read the file") as info:
        io.load_project(tmp_path / "nope.bflow.json")
    assert "nope.bflow.json" in str(info.value)
    with pytest.raises(ProjectFileError, match="cannot read the file"):
        io.load_project(tmp_path)


def test_unknown_blocks_and_minimal_pages_load():
    doc = {"format": "blockflow-project", "version": 1,
           "pages": [{"name": "p", "nodes": [{"id": "a", "block": "NoSuchBlock"}]}]}
    project = io.loads_project(json.dumps(doc))
    node = project.page().nodes["a"]
    assert node.block == "NoSuchBlock" and node.position == (0.0, 0.0) and node.attrs == {}
    assert project.metadata == {} and project.page().loss is None and project.page().text == ""
    doc["pages"][0]["nodes"][0]["position"] = [1, 2]
    assert io.loads_project(json.dumps(doc)).page().nodes["a"].position == (1.0, 2.0)


def test_attr_objects_that_are_not_arrays_stay_dicts():
    doc = sample_doc()
    doc["pages"][0]["nodes"][0]["attrs"]["meta"] = {"dtype": "float32", "shape": [1]}
    doc["pages"][0]["nodes"][0]["attrs"]["more"] = {"dtype": "x", "shape": 1, "data": 2, "e": 3}
    attrs = io.loads_project(json.dumps(doc)).page().nodes["x"].attrs
    assert attrs["meta"] == {"dtype": "float32", "shape": [1]}
    assert attrs["more"] == {"dtype": "x", "shape": 1, "data": 2, "e": 3}
    doc["metadata"]["arr"] = {"dtype": "float32", "shape": [1], "data": [1]}
    assert io.loads_project(json.dumps(doc)).metadata["arr"]["data"] == [1]


# --------------------------------------------------------------------------------------------
# Limits (monkeypatched small)


def test_file_size_limit(tmp_path, monkeypatch):
    text = io.dumps_project(sample_project())
    path = tmp_path / "big.bflow.json"
    path.write_text(text, encoding="utf-8")
    monkeypatch.setattr(rules, "MAX_FILE_BYTES", 1000)
    with pytest.raises(ProjectFileError) as info:
        io.load_project(path)
    assert str(path) in str(info.value) and "limit is 1,000" in info.value.problem
    err = raw_error(text.encode("utf-8"))
    assert "bytes; the limit is 1,000" in err.problem
    err = raw_error(text)
    assert "characters; the limit is 1,000" in err.problem


def test_array_element_limit(monkeypatch):
    text = io.dumps_project(sample_project())
    doc = sample_doc()
    monkeypatch.setattr(rules, "MAX_ARRAY_ELEMENTS", 100)
    err = raw_error(text)
    assert err.where == "pages[1].nodes[0].state.value.shape"
    assert err.problem == "the array has 300 elements; the limit is 100"
    with pytest.raises(ProjectFileError, match="the limit is 100"):
        io.dumps_project(sample_project())
    doc["pages"][1]["nodes"][0]["state"]["value"] = {"dtype": "uint8", "shape": [10 ** 6, 10 ** 6],
                                                     "base64": ""}
    assert "1,000,000,000,000 elements" in raw_error(json.dumps(doc)).problem


def test_node_limit(monkeypatch):
    text = io.dumps_project(sample_project())
    monkeypatch.setattr(rules, "MAX_NODES_PER_PAGE", 3)
    err = raw_error(text)
    assert err.where == "pages[0].nodes" and err.problem == "7 nodes on one page; the limit is 3"
    with pytest.raises(ProjectFileError, match="limit is 3"):
        io.dumps_project(sample_project())


def test_depth_limit(monkeypatch):
    monkeypatch.setattr(rules, "MAX_DEPTH", 5)
    doc = sample_doc()
    doc["pages"][0]["nodes"][0]["attrs"]["deep"] = [[[[[[1]]]]]]
    err = raw_error(json.dumps(doc))
    assert err.where == "pages[0].nodes[0].attrs.deep[0][0][0][0][0]"
    assert "nested more than 5 levels" in err.problem
    err = raw_error("[" * 100_000 + "]" * 100_000)  # deeper than Python's recursion limit
    assert "nested too deeply" in err.problem or "top level" in err.problem


def test_shape_ndim_limit():
    doc = sample_doc()
    doc["pages"][0]["feeds"]["x"] = {"dtype": "uint8", "shape": [1] * 33, "data": [1]}
    err = raw_error(json.dumps(doc))
    assert err.where == "pages[0].feeds.x.shape" and "33 dimensions; the limit is 32" in err.problem


# --------------------------------------------------------------------------------------------
# Loading never executes code

EVIL = [
    "__import__('os').system('touch {m}')",
    "eval(\"open('{m}', 'w')\")",
    "exec(\"import os; os.system('touch {m}')\")",
    "!!python/object/apply:os.system ['touch {m}']",
    "$(touch {m})", "`touch {m}`", "{{{{ ''.__class__ }}}}",
]


def test_code_like_strings_load_as_plain_data(tmp_path, monkeypatch):
    marker = tmp_path / "MARKER"
    monkeypatch.chdir(tmp_path)
    evil = [e.format(m=marker) for e in EVIL]
    payload = pickle.dumps(os.system)  # a pickle stays bytes, never unpickled
    project = Project(metadata={"title": evil[0], evil[1]: evil})
    page = project.add_page(evil[2].replace("/", "|"))
    page.text = evil[3]
    page.add_node(evil[0], id="__import__", label=evil[1],
                  attrs={"cmd": evil[0], "__reduce__": evil[2], "list": evil,
                         "blob": np.frombuffer(payload, np.uint8).copy()})
    page.loss = "__import__"
    path = tmp_path / "evil.bflow.json"
    io.save_project(project, path)
    loaded = io.load_project(path)
    assert loaded == project
    node = loaded.page().nodes["__import__"]
    assert node.block == evil[0] and node.attrs["cmd"] == evil[0] and node.label == evil[1]
    assert node.attrs["blob"].tobytes() == payload
    assert loaded.metadata[evil[1]] == evil
    assert not marker.exists()
    assert not any(p.name == "MARKER" for p in tmp_path.rglob("*"))


def test_loader_source_has_no_code_execution_paths():
    modules = sorted(Path(io.__file__).parent.glob("*.py"))   # the face and the modules doing the work
    assert len(modules) > 1
    for module in modules:
        source = module.read_text(encoding="utf-8")
        for needle in ("import pickle", "eval(", "exec(", "allow_pickle", "np.load(", "__import__",
                       "importlib", "marshal"):
            assert needle not in source, (module.name, needle)


def test_project_io_imports_no_gui_blocks_compiler_or_runtime():
    code = ("import sys, blockflow.io.project_io; bad = [m for m in sys.modules if m.split('.')[0] in "
            "('PySide6', 'blockflow_blocks') or m in ('blockflow.compile.compiler', 'blockflow.run.runtime')]"
            "; print(bad); sys.exit(bool(bad))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stdout + out.stderr


# --------------------------------------------------------------------------------------------
# Atomic saving


def listing(directory: Path):
    return sorted(p.name for p in directory.iterdir())


def test_save_creates_and_replaces(tmp_path):
    path = tmp_path / "p.bflow.json"
    first = sample_project()
    io.save_project(first, path)
    assert listing(tmp_path) == ["p.bflow.json"]
    second = sample_project()
    second.metadata["title"] = "second"
    io.save_project(second, path)
    assert io.load_project(path) == second
    assert listing(tmp_path) == ["p.bflow.json", "p.bflow.json.bak"]     # the previous version kept
    assert io.load_project(tmp_path / "p.bflow.json.bak") == first
    third = sample_project()
    third.metadata["title"] = "third"
    io.save_project(third, path)
    assert io.load_project(tmp_path / "p.bflow.json.bak") == second
    assert listing(tmp_path) == ["p.bflow.json", "p.bflow.json.bak"]
    io.save_project(first, tmp_path / "q.bflow.json", backup=False)
    io.save_project(second, tmp_path / "q.bflow.json", backup=False)
    assert "q.bflow.json.bak" not in listing(tmp_path)


def test_a_backup_is_a_copy_where_hard_links_fail(tmp_path, monkeypatch):
    path = tmp_path / "p.bflow.json"
    io.save_project(sample_project(), path)
    before = path.read_bytes()

    def no_links(src, dst):
        raise OSError(1, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    changed = sample_project()
    changed.metadata["title"] = "changed"
    io.save_project(changed, path)
    assert (tmp_path / "p.bflow.json.bak").read_bytes() == before
    assert io.load_project(path) == changed
    assert sorted(listing(tmp_path)) == ["p.bflow.json", "p.bflow.json.bak"]


def test_failed_replace_leaves_the_old_file_and_no_temp(tmp_path, monkeypatch):
    path = tmp_path / "p.bflow.json"
    io.save_project(sample_project(), path)
    before = path.read_bytes()
    changed = sample_project()
    changed.metadata["title"] = "changed"

    def boom(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(ProjectFileError) as info:
        io.save_project(changed, path)
    assert str(path) in str(info.value) and "No space left on device" in info.value.problem
    assert path.read_bytes() == before
    assert listing(tmp_path) == ["p.bflow.json"]


def test_failed_fsync_with_any_exception_cleans_up(tmp_path, monkeypatch):
    path = tmp_path / "p.bflow.json"
    io.save_project(sample_project(), path)
    before = path.read_bytes()

    def interrupted(fd):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        io.save_project(Project(metadata={}, pages=sample_project().pages[:1]), path)
    assert path.read_bytes() == before
    assert listing(tmp_path) == ["p.bflow.json"]


def test_invalid_project_does_not_touch_the_file(tmp_path):
    path = tmp_path / "p.bflow.json"
    io.save_project(sample_project(), path)
    before = path.read_bytes()
    bad = sample_project()
    bad.page().edges.append(Edge("x", "output", "ghost", "x"))
    with pytest.raises(ProjectFileError) as info:
        io.save_project(bad, path)
    assert info.value.path == str(path) and info.value.where == "pages[0].edges[5].to"
    assert path.read_bytes() == before and listing(tmp_path) == ["p.bflow.json"]


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
def test_save_preserves_permissions_and_follows_symlinks(tmp_path):
    path = tmp_path / "p.bflow.json"
    io.save_project(sample_project(), path)
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask
    path.chmod(0o640)
    io.save_project(sample_project(), path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    link = tmp_path / "link.bflow.json"
    link.symlink_to(path)
    changed = sample_project()
    changed.metadata["title"] = "via link"
    io.save_project(changed, link)
    assert link.is_symlink() and io.load_project(path) == changed


def test_save_into_a_missing_directory(tmp_path):
    with pytest.raises(ProjectFileError, match="cannot save"):
        io.save_project(sample_project(), tmp_path / "no" / "p.bflow.json")


# --------------------------------------------------------------------------------------------
# Schema


def test_schema_is_a_valid_2020_12_schema_with_docs():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$id"] and SCHEMA["title"] and SCHEMA["description"]
    for name, sub in SCHEMA["$defs"].items():
        assert sub.get("title") and sub.get("description"), name
    VALIDATOR.validate(sample_doc())


@pytest.mark.parametrize("mutate", [
    lambda d: set_in(d, ["format"], "other"),
    lambda d: set_in(d, ["version"], 3),
    lambda d: set_in(d, ["pages"], []),
    lambda d: set_in(d, N0 + ["positon"], [0, 0]),
    lambda d: set_in(d, N0 + ["id"], "a:b"),
    lambda d: set_in(d, ["pages", 0, "edges", 0, "from"], "x"),
    lambda d: set_in(d, ["pages", 0, "edges", 1], d["pages"][0]["edges"][0]),
    lambda d: set_in(d, ["pages", 0, "name"], "a/b"),
    lambda d: set_in(d, ["pages", 0, "feeds", "x", "dtype"], "complex64"),
    lambda d: set_in(d, ["pages", 0, "feeds", "x", "data", 0], "nan"),
    lambda d: set_in(d, ["pages", 1, "nodes", 0, "state", "value", "base64"], "AA$A"),
    lambda d: set_in(d, ARR, {"dtype": "int8", "shape": [1], "data": [True]}),
    lambda d: set_in(d, N0 + ["inputs", "y"], [1, 2]),
], ids=["format", "version", "no_pages", "typo", "id", "edge", "dup_edge", "page_name", "dtype",
        "nan_str", "base64", "int_data", "inline_not_array"])
def test_schema_rejects_broken_documents(mutate):
    doc = mutate(sample_doc())
    assert not VALIDATOR.is_valid(doc)


# --------------------------------------------------------------------------------------------
# Migrations


def old_doc() -> dict:
    """A made-up format version 1 where the title sat at the top level."""
    doc = sample_doc()
    doc["title"] = doc.pop("metadata")["title"]
    doc["version"] = 1
    return doc


def test_migrations_are_applied_in_a_loop(monkeypatch):
    calls = []

    def v1_to_v2(doc):
        calls.append(1)
        doc = copy.deepcopy(doc)
        doc["metadata"] = {"title": doc.pop("title")}
        return doc

    def v2_to_v3(doc):
        calls.append(2)
        assert doc["version"] == 2
        doc["metadata"]["migrated"] = True
        return doc

    monkeypatch.setattr(rules, "VERSION", 3)
    monkeypatch.setattr(rules, "MIGRATIONS", {1: v1_to_v2, 2: v2_to_v3})
    project = io.loads_project(json.dumps(old_doc()))
    assert calls == [1, 2]
    assert project.metadata == {"title": "Softmax", "migrated": True}
    assert project.pages == sample_project().pages
    assert json.loads(io.dumps_project(project))["version"] == 3
    calls.clear()
    current = json.loads(io.dumps_project(project))
    io.loads_project(json.dumps(current))
    assert calls == []  # a current file is not migrated


def test_missing_or_failing_migration(monkeypatch):
    monkeypatch.setattr(rules, "VERSION", 2)
    monkeypatch.setattr(rules, "MIGRATIONS", {})
    err = raw_error(json.dumps(old_doc()))
    assert err.where == "version" and "no migration to version 2" in err.problem

    def broken(doc):
        raise KeyError("nodes")

    monkeypatch.setattr(rules, "MIGRATIONS", {1: broken})
    err = raw_error(json.dumps(old_doc()))
    assert "upgrading from format version 1 to 2 failed: KeyError" in err.problem
    # without migrations, the old-format key is an unknown key at the current version
    monkeypatch.setattr(rules, "VERSION", 1)
    err = raw_error(json.dumps(old_doc()))
    assert err.where == "title" and "unknown key 'title'" in err.problem


def test_public_array_helpers_raise_project_file_errors():
    with pytest.raises(ProjectFileError) as info:
        io.decode_array({"dtype": "float32", "shape": [2], "data": [1]}, "somewhere")
    assert info.value.where == "somewhere.data"
    with pytest.raises(ProjectFileError):
        io.decode_array([1, 2])


def test_constants():
    assert rules.FORMAT == "blockflow-project" and rules.VERSION == 2
    assert list(rules.MIGRATIONS) == [1]
    assert rules.SUFFIX == ".bflow.json"


def test_the_limits_live_in_rules_only():
    """The limits have one home: project_io re-exports none of them, so none can be set on a
    module that does not read it (a stale copy)."""
    for name in ("MAX_FILE_BYTES", "MAX_ARRAY_ELEMENTS", "MAX_NODES_PER_PAGE", "MAX_DEPTH", "MAX_NDIM",
                 "LOAD_FACTOR", "LOAD_ALLOWANCE_BYTES", "INLINE_DATA_MAX", "VERSION", "MIGRATIONS"):
        assert hasattr(rules, name) and not hasattr(io, name), name


def test_page_metrics_round_trip_and_are_checked():
    project = sample_project()
    page = project.pages[0]
    text_before = io.dumps_project(project)
    assert '"metrics"' not in text_before            # written only when there are some
    first = next(iter(page.nodes))
    page.metrics = [first, f"{first}:output"]
    text = io.dumps_project(project)
    back = io.loads_project(text)
    assert back.pages[0].metrics == page.metrics and back == project
    doc = json.loads(text)
    for bad, where, why in (("Nope", "metrics[0]", "a metric names no node"), (3, "metrics[0]", "a metric must be a string"),
                            ([first, first], "metrics[1]", "listed twice")):
        d = copy.deepcopy(doc)
        d["pages"][0]["metrics"] = bad if isinstance(bad, list) else [bad]
        err = raw_error(json.dumps(d))
        assert err.where.endswith(where) and why in err.problem, (err.where, err.problem)
    d = copy.deepcopy(doc)
    d["pages"][0]["metrics"] = "acc"
    assert "must be a list" in raw_error(json.dumps(d)).problem


def test_a_save_removes_old_temporary_files_left_by_crashed_saves(tmp_path):
    path = tmp_path / "p.bflow.json"
    io.save_project(sample_project(), path)
    old = tmp_path / ".p.bflow.json.0badc0de.tmp"
    fresh = tmp_path / ".p.bflow.json.1badc0de.tmp"
    old_bak = tmp_path / ".p.bflow.json.bak.2badc0de.tmp"
    other = tmp_path / ".other.bflow.json.3badc0de.tmp"
    for f in (old, fresh, old_bak, other):
        f.write_bytes(b"{partial")
    stale = time.time() - saving.STALE_TEMPORARY_SECONDS - 5
    for f in (old, old_bak, other):
        os.utime(f, (stale, stale))
    io.save_project(sample_project(), path)
    left = set(listing(tmp_path))
    assert old.name not in left and old_bak.name not in left       # a crashed save's leftovers
    assert fresh.name in left                                      # may be a save still running
    assert other.name in left                                      # another file's: not ours
