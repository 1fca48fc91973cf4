"""Hostile and broken project files (issue 7): fuzzing the loader, and proof that loading is data.

Every case must end in a loaded project (which then compiles without raising and saves back to
the same project) or one ProjectFileError saying where and what; never another exception, a
hang or a memory blow-up. The fuzz tests run 10,000+ cases in total (FUZZ_* below; the count is
checked by the last test of this file and printed with ``-s``).
"""
from __future__ import annotations

import base64
import builtins
import copy
import json
import os
import pickle
import subprocess
import sys
import time
import tracemalloc

import numpy as np
import numpy.testing  # noqa: F401  (imported before the traps below are set)
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blockflow.io import project_io as io
from blockflow.compile.compiler import compile_project
from blockflow.errors import ProjectFileError
from blockflow.registry import default_registry
# imported before the traps of the crafted-project test: importing the runtime builds namedtuples,
# which the standard library does with eval on its own text
from blockflow.run.runtime import run

from memory_tracing import memory_traced
from test_project_io import json_values, sample_doc

REGISTRY = default_registry()
#: examples per fuzz test (the sum is the suite's fuzz count; >= 10,000)
FUZZ_RANDOM_JSON, FUZZ_MUTATIONS, FUZZ_BYTES = 2500, 6000, 2000
FUZZ = settings(deadline=None, database=None,   # derandomized by the "ci" profile, random with "dev"
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.filter_too_much])
COUNT = {"cases": 0, "loaded": 0, "refused": 0, "slowest": 0.0}
#: a hang or blow-up detector, in this process's CPU seconds: wall time also counts the time other
#: processes take the cores (a loaded CI machine), which says nothing about the loader; a wait
#: that burns no CPU is caught by the looser wall-clock bound
MAX_SECONDS_PER_CASE = 2.0
MAX_WALL_SECONDS_PER_CASE = 20.0
MAX_PEAK_BYTES = 64 * 1024 * 1024


def check_case(data) -> None:
    """Load ``data``; the outcome must be a usable project or one clear error."""
    COUNT["cases"] += 1
    t0, wall0 = time.process_time(), time.perf_counter()
    try:
        project = io.loads_project(data, "fuzz.bflow.json")
    except ProjectFileError as exc:
        COUNT["refused"] += 1
        assert exc.problem and isinstance(exc.problem, str)
        assert str(exc).startswith("fuzz.bflow.json")
        assert "Traceback" not in str(exc)
    else:
        COUNT["loaded"] += 1
        for page in project.pages:           # compiling never raises, whatever the diagram
            program = compile_project(project, page.name, REGISTRY)
            assert all(d.message for d in program.diagnostics)
        again = io.loads_project(io.dumps_project(project))   # what loads can be saved again
        assert again == project
    took = time.process_time() - t0
    COUNT["slowest"] = max(COUNT["slowest"], took)
    assert took < MAX_SECONDS_PER_CASE, f"a case took {took:.1f} s of CPU"
    wall = time.perf_counter() - wall0
    assert wall < MAX_WALL_SECONDS_PER_CASE, f"a case took {wall:.1f} s"


# ------------------------------------------------------------------------------ strategies
def _paths(doc):
    """Every path (tuple of keys/indices) into a JSON document, the root included, in document
    order (iterative: the documents may be nested deeply on purpose)."""
    out, todo = [], [((), doc)]
    while todo:
        prefix, node = todo.pop()
        out.append(prefix)
        if isinstance(node, dict):
            todo.extend((prefix + (k,), v) for k, v in reversed(list(node.items())))
        elif isinstance(node, list):
            todo.extend((prefix + (i,), v) for i, v in reversed(list(enumerate(node))))
    return out


def _get(doc, path):
    for k in path:
        doc = doc[k]
    return doc


JUNK = st.one_of(
    json_values(),
    st.sampled_from([None, True, -1, 0, 2 ** 63, -2 ** 63, 1e308, -0.0, "", "x" * 300, [], {},
                     "NaN", "Infinity", "../../etc/passwd", "__import__('os').system('true')",
                     {"dtype": "object", "shape": [1], "data": [1]},
                     {"dtype": "float32", "shape": [10 ** 12], "data": []},
                     {"dtype": "float32", "shape": [-3], "data": []},
                     {"dtype": "float32", "shape": [2.5], "data": [1, 2]},
                     {"dtype": "float32", "shape": [4], "base64": "AAAA"},
                     {"dtype": "float64", "shape": [1000], "base64": base64.b64encode(b"\0" * 16).decode()},
                     {"dtype": "int8", "shape": [2], "data": [1000, -1000]},
                     {"dtype": "float32", "shape": [2], "data": ["NaN", [1]]},
                     {"from": "nowhere:out", "to": "x:input"},
                     ]),
)


@st.composite
def mutated_docs(draw):
    doc = sample_doc()
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(doc)
        path = draw(st.sampled_from(paths))
        kind = draw(st.sampled_from(["replace", "delete", "add_key", "duplicate", "edge", "cycle",
                                     "shape", "nest"]))
        if kind == "replace":
            if not path:
                doc = copy.deepcopy(draw(JUNK))
                continue
            _get(doc, path[:-1])[path[-1]] = copy.deepcopy(draw(JUNK))
        elif kind == "delete" and path:
            parent = _get(doc, path[:-1])
            if isinstance(parent, dict):
                parent.pop(path[-1], None)
            else:
                parent.pop(path[-1])
        elif kind == "add_key":
            target = _get(doc, path)
            if isinstance(target, dict):
                target[draw(st.text(max_size=6))] = copy.deepcopy(draw(JUNK))
        elif kind == "duplicate":
            target = _get(doc, path)
            if isinstance(target, list) and target:
                target.append(copy.deepcopy(target[draw(st.integers(0, len(target) - 1))]))
        elif kind in ("edge", "cycle") and isinstance(doc, dict) and isinstance(doc.get("pages"), list):
            pages = [p for p in doc["pages"] if isinstance(p, dict) and isinstance(p.get("nodes"), list)
                     and isinstance(p.get("edges"), list)]
            if pages:
                page = draw(st.sampled_from(pages))
                ids = [n.get("id") for n in page["nodes"] if isinstance(n, dict) and isinstance(n.get("id"), str)]
                if ids:
                    a, b = draw(st.sampled_from(ids)), draw(st.sampled_from(ids + ["ghost"]))
                    port = draw(st.sampled_from(["output", "z", "x", "y", "inputs[0]", "nope", "input"]))
                    page["edges"].append({"from": f"{a}:{port}", "to": f"{b}:{draw(st.sampled_from(['x', 'y', 'input', 'inputs[3]']))}"})
        elif kind == "shape":
            target = _get(doc, path)
            if isinstance(target, dict) and "shape" in target:
                target["shape"] = draw(st.sampled_from([[10 ** 9, 10 ** 9], [-1], [3, None], "3", [2 ** 62],
                                                        [0], [1] * 40]))
        elif kind == "nest" and path:
            depth = draw(st.integers(10, 90))        # around the loader's MAX_DEPTH (64)
            junk: object = 1
            for _ in range(depth):
                junk = [junk] if draw(st.booleans()) else {"k": junk}
            parent = _get(doc, path[:-1])
            parent[path[-1]] = junk
    return doc


# ------------------------------------------------------------------------------ fuzzing
@settings(FUZZ, max_examples=FUZZ_RANDOM_JSON)
@given(st.one_of(json_values(), st.dictionaries(st.sampled_from(["format", "version", "pages", "metadata", "x"]),
                                                json_values(), max_size=5)))
def test_fuzz_random_json(value):
    check_case(json.dumps(value))


@settings(FUZZ, max_examples=FUZZ_MUTATIONS)
@given(mutated_docs())
def test_fuzz_mutated_valid_projects(doc):
    check_case(json.dumps(doc, allow_nan=True))


@settings(FUZZ, max_examples=FUZZ_BYTES)
@given(st.data())
def test_fuzz_broken_bytes(data):
    text = json.dumps(sample_doc()).encode("utf-8")
    how = data.draw(st.sampled_from(["truncate", "insert", "flip", "utf16", "bom"]))
    if how == "truncate":
        blob = text[:data.draw(st.integers(0, len(text)))]
    elif how == "insert":
        at = data.draw(st.integers(0, len(text)))
        blob = text[:at] + data.draw(st.binary(min_size=1, max_size=8)) + text[at:]
    elif how == "flip":
        at = data.draw(st.integers(0, len(text) - 1))
        blob = text[:at] + bytes([text[at] ^ data.draw(st.integers(1, 255))]) + text[at + 1:]
    elif how == "utf16":
        blob = text.decode("utf-8").encode("utf-16")
    else:
        blob = b"\xef\xbb\xbf" + text
    check_case(blob)


def test_a_shape_that_lies_never_allocates_what_it_claims():
    """A terabyte shape with a few bytes of data is refused before anything that size exists."""
    doc = sample_doc()
    feeds = doc["pages"][0]["feeds"]
    cases = [{"dtype": "float64", "shape": [10 ** 6, 10 ** 6], "base64": "AAAAAAAAAAA="},
             {"dtype": "float32", "shape": [2 ** 31, 2 ** 31], "data": [1.0]},
             {"dtype": "uint8", "shape": [10 ** 11], "data": []}]
    with memory_traced():
        for arr in cases:
            feeds["x"] = arr
            with pytest.raises(ProjectFileError) as info:
                io.loads_project(json.dumps(doc))
            assert info.value.where.startswith("pages[0].feeds.x")
        _, peak = tracemalloc.get_traced_memory()
    assert peak < MAX_PEAK_BYTES, f"peak {peak:,} bytes"


# ------------------------------------------------------------------------------ files are data
def test_loading_compiling_and_running_a_crafted_project_executes_nothing(tmp_path, monkeypatch):
    """Pickles in arrays, Python in attrs and labels, paths out of the project: loaded as data or
    refused, and no code from the file runs (eval, os.system, pickle, subprocess are trapped;
    exec/compile, which networkx and the runtime's code generator use on their own code, are
    watched: no text from the file reaches them)."""
    calls = []

    def trap(name):
        def f(*a, **k):
            calls.append(name)
            raise AssertionError(f"{name} was called while loading a project")
        return f

    payload = base64.b64encode(pickle.dumps(os.system)).decode()
    doc = sample_doc()
    page = doc["pages"][0]
    page["text"] = "__import__('os').system('touch pwned')"
    nodes = page["nodes"]
    nodes[0]["label"] = "{{7*7}} ${IFS} `id` $(id)"
    nodes[0]["attrs"]["dtype"] = "__import__('os').system('touch pwned')"
    nodes.append({"id": "data", "block": "CsvDataset", "label": "", "position": [0, 0],
                  "attrs": {"path": "../../../../etc/passwd"}, "inputs": {}, "state": {}})
    nodes.append({"id": "data2", "block": "NumpyDataset", "label": "", "position": [0, 0],
                  "attrs": {"path": "evil.npy"}, "inputs": {}, "state": {}})
    nodes.append({"id": "evil", "block": "__import__('os').system", "label": "", "position": [0, 0],
                  "attrs": {"cmd": "rm -rf /"}, "inputs": {}, "state": {}})
    (tmp_path / "evil.npy").write_bytes(b"\x93NUMPY" + pickle.dumps(os.system))
    np.save(tmp_path / "obj.npy", np.array([os.system], dtype=object), allow_pickle=True)
    nodes[-2]["attrs"]["path"] = "obj.npy"
    from diagrams import chain      # a page that compiles and runs, with crafted labels and text
    runnable = json.loads(io.dumps_project(chain(
        ("x", "Placeholder", {"shape": [3]}, None), ("t", "Tanh", {}, {"x": "x"}),
        feeds={"x": np.float32([1, 2, 3])})))["pages"][0]
    runnable["name"] = "runs"
    runnable["text"] = "__import__('os').system('touch pwned')"
    runnable["nodes"][1]["label"] = "'; import os; os.system('touch pwned'); '"
    doc["pages"].append(runnable)
    bad_array = copy.deepcopy(doc)
    bad_array["pages"][0]["feeds"]["x"] = {"dtype": "object", "shape": [1], "base64": payload}
    path = tmp_path / "crafted.bflow.json"
    sources = []      # libraries (networkx) and the runtime's code generator use exec on their own code:
    real_exec, real_compile = builtins.exec, builtins.compile   # record it; no file text may be in it

    def spy_exec(src, *a, **k):
        sources.append(src if isinstance(src, str) else "")
        return real_exec(src, *a, **k)

    def spy_compile(src, *a, **k):
        sources.append(src if isinstance(src, str) else "")
        return real_compile(src, *a, **k)

    monkeypatch.setattr(builtins, "eval", trap("eval"))
    monkeypatch.setattr(builtins, "exec", spy_exec)
    monkeypatch.setattr(builtins, "compile", spy_compile)
    monkeypatch.setattr(os, "system", trap("os.system"))
    monkeypatch.setattr(pickle, "loads", trap("pickle.loads"))
    monkeypatch.setattr(pickle, "load", trap("pickle.load"))
    monkeypatch.setattr(subprocess, "Popen", trap("subprocess.Popen"))
    path.write_text(json.dumps(bad_array))
    with pytest.raises(ProjectFileError, match="dtype"):
        io.load_project(path)
    path.write_text(json.dumps(doc))
    project = io.load_project(path)          # loads: everything in it is data
    program = compile_project(project, project.pages[0].name, REGISTRY)
    errors = {d.node: d.message for d in program.errors}
    assert "out of the project" in errors["data"]
    assert "unpickling" in errors["data2"]
    assert "unknown block" in errors["evil"]
    # a page of the crafted file that compiles also runs (the runtime generates code for it)
    result = run(compile_project(project, "runs", REGISTRY), record=True)
    np.testing.assert_allclose(result.value("t"), np.tanh([1, 2, 3]), rtol=1e-6)
    assert calls == [] and not (tmp_path / "pwned").exists() and not os.path.exists("pwned")
    assert not [src for src in sources if "pwned" in src or "system" in src or "IFS" in src]


def test_the_fuzz_count_is_at_least_ten_thousand():
    """Runs after the fuzz tests of this file (pytest keeps file order)."""
    if COUNT["cases"] == 0:
        pytest.skip("the fuzz tests were not run in this session (selected out)")
    print(f"\nfuzz: {COUNT['cases']} cases, {COUNT['loaded']} loaded, {COUNT['refused']} refused with a "
          f"message, slowest {COUNT['slowest'] * 1000:.0f} ms", file=sys.stderr)
    assert COUNT["cases"] >= 10_000
