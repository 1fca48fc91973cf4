"""The project loader's memory: whatever a file holds, loading it takes at most LOAD_FACTOR x its
size + LOAD_ALLOWANCE_BYTES (docs/limits.md, "Project files"), or it is refused with one
ProjectFileError, before it is parsed, saying what is too numerous.

Each hostile shape is a file of about SIZE bytes built here; a child process loads it under a
memory cap and reports its peak RSS, which, minus that of a child that only imports the loader,
must be within the bound. Real projects (the samples as written and compacted, the test
fixtures) must load with a margin: with the factor cut and no allowance at all.
"""
from __future__ import annotations

import base64
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from blockflow.io import loadcost
from blockflow.io import project_io as io
from blockflow.io import rules
from blockflow.errors import ProjectFileError
from hostile_kit import changed_paths, run_cli, run_python, snapshot

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = sorted((ROOT / "sample_projects").glob("*.bflow.json"))
sys.path.insert(0, str(ROOT / "tests"))
from diagrams import softmax_project  # noqa: E402
from test_project_io import sample_project  # noqa: E402

SIZE = 10_000_000
BOUND = rules.LOAD_FACTOR * SIZE + rules.LOAD_ALLOWANCE_BYTES
HEAD = '{"format": "blockflow-project", "version": 1, '


def _repeat(unit: str, size: int) -> str:
    """A JSON list of ``unit`` (which ends with a comma) repeated to about ``size`` characters."""
    body = unit * max(1, size // len(unit))
    return "[" + body[:-1] + "]"


def _in_metadata(value: str) -> str:
    return HEAD + '"metadata": {"x": ' + value + '}, "pages": [{"name": "p"}]}'


def _pages(pages) -> str:
    return HEAD + '"pages": [' + ",".join(pages) + "]}"


def _dense(size: int, compact: bool) -> str:
    """A real project's pages (the stable softmax sample), repeated: a big diagram."""
    doc = json.loads((ROOT / "sample_projects" / "stable_softmax.bflow.json").read_text("utf-8"))
    pages, k = [], 0
    while sum(len(p) for p in pages) < size:
        for page in doc["pages"]:
            page = dict(page, name=f"{page['name']} {k}")
            pages.append(json.dumps(page, ensure_ascii=False, indent=None if compact else 2,
                                    separators=(",", ":") if compact else None))
            k += 1
    return _pages(pages)


def _weights(size: int) -> str:
    rng = np.random.default_rng(0)
    raw = rng.standard_normal(size * 3 // 4 // 4, dtype=np.float32).tobytes()
    node = {"id": "w", "block": "Variable", "state": {"value": {
        "dtype": "float32", "shape": [len(raw) // 4], "base64": base64.b64encode(raw).decode()}}}
    return _pages([json.dumps({"name": "p", "nodes": [node]})])


# name: (builder, outcome: "loads", "refused" or None when either is right)
SHAPES = {
    "empty lists": (lambda n: _in_metadata(_repeat("[],", n)), "refused"),
    "empty objects": (lambda n: _in_metadata(_repeat("{},", n)), "refused"),
    "deep lists": (lambda n: _in_metadata(_repeat("[" * 60 + "]" * 60 + ",", n)), "refused"),
    "unique keys": (lambda n: _in_metadata("{" + ",".join(f'"k{i}":0' for i in range(n // 9))
                                           + "}"), None),
    "short strings": (lambda n: _in_metadata(_repeat('"ab",', n)), "loads"),
    "small floats": (lambda n: _in_metadata(_repeat("0.5,", n)), "loads"),
    "small ints": (lambda n: _in_metadata(_repeat("7,", n)), None),
    "one astral character": (lambda n: _in_metadata(_repeat("1,", n)[:-1] + ',"\U0001F600"]'),
                             "refused"),
    "astral strings": (lambda n: _in_metadata(_repeat('"a\U0001F600b",', n)), "loads"),
    "escaped astral strings": (lambda n: _in_metadata(_repeat('"abcdefgh\\ud83d\\ude00",', n)),
                               "loads"),
    "cjk page text": (lambda n: _pages([json.dumps({"name": "p", "text": "漢字" * (n // 6)},
                                                   ensure_ascii=False)]), "loads"),
    "minimal nodes": (lambda n: _pages(
        '{"name":"p%d","nodes":[%s]}' % (k, ",".join('{"id":"n%d","block":"A"}' % i
                                                     for i in range(1000)))
        for k in range(n // 26_000)), "refused"),
    "minimal pages": (lambda n: _pages('{"name":"p%d"}' % i for i in range(n // 16)), "refused"),
    "edges": (lambda n: _pages(['{"name":"p","nodes":[{"id":"a","block":"A"},{"id":"b","block":'
                                '"B"}],"edges":[' + ",".join('{"from":"a:o%d","to":"b:i%d"}'
                                                             % (i, i) for i in range(n // 34))
                                + "]}"]), None),
    "reroute points": (lambda n: _pages(['{"name":"p","nodes":[{"id":"a","block":"A"},{"id":"b","block":'
                                         '"B"}],"edges":[' + ",".join('{"from":"a:o%d","to":"b:i%d"}' % (i, i)
                                                                      for i in range(n // 1120))
                                         + '],"reroutes":[' + ",".join(
                                             '{"from":"a:o%d","to":"b:i%d","points":[%s]}'
                                             % (i, i, ",".join(["[1234.5,-678.25]"] * 64)) for i in range(n // 1120))
                                         + "]}"]), None),
    "tiny arrays": (lambda n: _pages(['{"name":"p","nodes":[{"id":"a","block":"A","attrs":{"v":'
                                      + _repeat('{"dtype":"float32","shape":[],"data":[0.5]},',
                                                n) + "}}]}"]), "loads"),
    "long inline array": (lambda n: _pages(['{"name":"p","feeds":{"a":{"dtype":"float32","shape":'
                                            f'[{n // 4}],"data":' + _repeat("0.5,", n)
                                            + '}},"nodes":[{"id":"a","block":"A"}]}']), "loads"),
    "huge base64 array": (_weights, "loads"),
    "dense diagram": (lambda n: _dense(n, compact=False), "loads"),
    "dense diagram, compacted": (lambda n: _dense(n, compact=True), "loads"),
}

IMPORTS = """
import json, time
from blockflow.io.project_io import load_project
from blockflow.errors import ProjectFileError
"""
LOAD = IMPORTS + """
t = time.perf_counter()
try:
    project = load_project({path!r})
except ProjectFileError as exc:
    result = {{"outcome": "refused", "message": str(exc)}}
else:
    result = {{"outcome": "loads", "pages": len(project.pages)}}
result["seconds"] = time.perf_counter() - t
"""


def run_measured(code: str, **kw) -> dict:
    """Run ``code`` (which sets ``result``) in a capped child; its result with its peak RSS."""
    r = run_python(code + "print(json.dumps(result))\n", **kw)
    r.assert_clean_message()
    assert r.returncode == 0, r.output
    return {**json.loads(r.stdout), "peak": r.peak_rss}


@pytest.fixture(scope="module")
def base_rss():
    return run_measured(IMPORTS + "result = {}\n")["peak"]


@pytest.mark.parametrize("name", list(SHAPES))
def test_loading_any_shape_stays_within_the_factor_of_its_size(name, tmp_path, base_rss):
    build, outcome = SHAPES[name]
    path = tmp_path / "shape.bflow.json"
    text = build(SIZE)
    path.write_text(text, encoding="utf-8")
    size, text_bytes = path.stat().st_size, sys.getsizeof(text)
    del text
    before = snapshot(tmp_path)
    result = run_measured(LOAD.format(path=str(path)))
    assert changed_paths(before, snapshot(tmp_path)) == set()   # loading writes nothing
    used = result["peak"] - base_rss
    bound = rules.LOAD_FACTOR * size + rules.LOAD_ALLOWANCE_BYTES
    print(f"{name}: {size / 1e6:.1f} MB, {result['outcome']} in {result['seconds']:.2f} s, "
          f"peak {used / 1e6:.0f} MB = {used / size:.1f} x its size (bound {bound / 1e6:.0f} MB)")
    assert used <= bound, f"{name}: {used:,} bytes over the bound {bound:,}"
    if outcome:
        assert result["outcome"] == outcome, result
    if result["outcome"] == "refused":
        message = result["message"]
        assert message.startswith(f"{path}: the file holds "), message
        assert f"in {size:,} bytes: reading it would take about" in message
        assert f"({rules.LOAD_FACTOR} x its size + " in message
        if " pages, " not in message:   # else refused once parsed, before the model is made
            # refused before parsing: the bytes, the text and a copy of it being counted
            assert used <= size + 3 * text_bytes + 32 * 2 ** 20, f"{name}: {used:,} bytes"


def test_the_command_line_refuses_a_costly_file_as_unreadable(tmp_path):
    """`blockflow check` on 4 MB of nested empty lists: exit 3 (a file that cannot be read), one
    line naming the file and what is too numerous, nothing written."""
    path = tmp_path / "lists.bflow.json"
    path.write_text(_in_metadata(_repeat("[" * 60 + "]" * 60 + ",", 4_000_000)), encoding="utf-8")
    before = snapshot(tmp_path)
    r = run_cli("check", path, cwd=tmp_path)
    r.assert_clean_message()
    assert r.returncode == 3, r.output
    assert r.stderr.startswith(f"blockflow: error: {path}: the file holds 1,983,4"), r.stderr
    assert f"lists and objects in {path.stat().st_size:,} bytes: reading it" in r.stderr
    assert f"({rules.LOAD_FACTOR} x its size + 16 MiB" in r.stderr
    assert changed_paths(before, snapshot(tmp_path)) == set()


def _real_projects():
    """The samples as written and compacted (no indentation), and the test fixtures."""
    out = {}
    for path in SAMPLES:
        text = path.read_text("utf-8")
        out[path.name] = text
        out[path.name + " compacted"] = json.dumps(json.loads(text), ensure_ascii=False,
                                                   separators=(",", ":"))
    out["fixture sample_project"] = io.dumps_project(sample_project())
    out["fixture softmax_project"] = io.dumps_project(softmax_project())
    return out


REAL = _real_projects()


@pytest.mark.parametrize("name", list(REAL))
def test_real_projects_load_with_a_margin(name, monkeypatch):
    """Written by blockflow: within half the factor; compacted by another tool: within 4/5 of
    it; and without the allowance that lets any small file load."""
    monkeypatch.setattr(rules, "LOAD_ALLOWANCE_BYTES", 0)
    share = 4 / 5 if "compacted" in name else 1 / 2
    monkeypatch.setattr(rules, "LOAD_FACTOR", rules.LOAD_FACTOR * share)
    assert io.loads_project(REAL[name].encode("utf-8")).pages


def test_what_is_refused_is_named_with_the_file(monkeypatch):
    monkeypatch.setattr(rules, "LOAD_ALLOWANCE_BYTES", 0)
    cases = {"lists and objects": _in_metadata(_repeat("[],", 30_000)),
             "object members": _in_metadata("{" + ",".join(f'"k{i}":0' for i in range(3000)) + "}"),
             "numbers": _in_metadata(_repeat("1,", 30_000)),
             "strings": _in_metadata(_repeat('"",', 30_000))}
    for what, text in cases.items():
        with pytest.raises(ProjectFileError) as info:
            io.loads_project(text, "hostile.bflow.json")
        err = info.value
        assert err.path == "hostile.bflow.json" and err.where == ""
        assert err.problem.startswith("the file holds ") and f" {what} in " in err.problem, err
        assert "docs/limits.md" in err.problem


def test_an_invalid_file_over_the_budget_is_still_refused_clearly(monkeypatch):
    """The counts are bounds whatever the text: an unterminated string, a broken file."""
    monkeypatch.setattr(rules, "LOAD_ALLOWANCE_BYTES", 0)
    for text in ('{"format": "blockflow-project", "metadata": "' + "[]," * 10_000,
                 "[]," * 10_000, '"\\' * 5000):
        with pytest.raises(ProjectFileError) as info:
            io.loads_project(text, "broken.bflow.json")
        assert "Traceback" not in str(info.value)


def _cpu_pair(first, second, repeat=5, inner=1) -> tuple[float, float]:
    """The least CPU time of each of two functions (a call, averaged over ``inner`` calls in a
    row), run alternately so that both see the same machine (a loaded one slowed a pre-scan
    timed before its load 2x: 0.197 s against 0.098)."""
    best = [float("inf"), float("inf")]
    for _ in range(repeat):
        for k, fn in enumerate((first, second)):
            t = time.process_time()
            for _ in range(inner):
                fn()
            best[k] = min(best[k], (time.process_time() - t) / inner)
    return best[0], best[1]


def test_the_pre_scan_costs_little_next_to_loading(tmp_path, monkeypatch):
    """A project of arrays (the usual big one) is counted in one fast pass; a dense diagram is
    counted again without its strings, which still costs less than a third of the load."""
    monkeypatch.setattr(rules, "LOAD_ALLOWANCE_BYTES", 0)   # as for a file of 100 MB or more
    # the arrays' pre-scan takes 2-3 ms, 7-15 % of their load on an AMD EPYC machine, and 15.06 %
    # once beside another test suite: it is timed over 8 calls in a row (the dense one's
    # 130-200 ms need no more)
    for name, builder, share, inner in (("arrays", _weights, 0.15, 8),
                                        ("dense", lambda n: _dense(n, compact=True), 0.35, 1)):
        path = tmp_path / f"{name}.bflow.json"
        path.write_text(builder(4_000_000), encoding="utf-8")
        data = path.read_bytes()
        text = data.decode("utf-8")

        def pre_scan():
            loadcost.check_parse_cost(text, loadcost.structure_counts(data), loadcost.LoadBudget(len(data)))

        scan, load = _cpu_pair(pre_scan, lambda: io.load_project(path), inner=inner)
        print(f"{name}: pre-scan {scan:.3f} s of a {load:.3f} s load")
        assert scan <= share * load, (name, scan, load)


def test_reading_a_small_file_reserves_no_buffer_of_the_limit(tmp_path):
    """The file is read by its size (an address-space cap of 700 MB leaves no room for a
    512 MiB read buffer next to Python and numpy)."""
    path = tmp_path / "p.bflow.json"
    path.write_text(io.dumps_project(sample_project()), encoding="utf-8")
    assert run_measured(LOAD.format(path=str(path)), cap_bytes=700 * 2 ** 20)["outcome"] == "loads"


def test_a_file_growing_past_the_limit_while_read_is_refused(tmp_path, monkeypatch):
    path = tmp_path / "p.bflow.json"
    path.write_text(io.dumps_project(sample_project()), encoding="utf-8")
    real_fstat = os.fstat
    monkeypatch.setattr(os, "fstat", lambda fd: os.stat_result((0,) * 6 + (10,) + (0,) * 3))
    monkeypatch.setattr(rules, "MAX_FILE_BYTES", 100)
    with pytest.raises(ProjectFileError, match="more than 100 bytes"):
        io.load_project(path)
    monkeypatch.setattr(os, "fstat", real_fstat)
