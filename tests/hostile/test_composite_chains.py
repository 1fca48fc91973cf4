"""Composites that nest in long chains, as a hostile project or library file can write them: each
of thousands of composites using the next. Reading the file, checking it and inserting such a
layer must give the nesting problem (or load), never a RecursionError, and stay fast: the work
whose repetition made them slow is counted (tests/call_counts.py), not timed."""
from __future__ import annotations

import json

from call_counts import Calls
from hostile_kit import chain_composite, run_cli

from blockflow import composite
from blockflow.composite import MAX_NESTING, Composite, block_name, cycle_through, find_cycle
from blockflow.compile.flatten import flat_size
from blockflow.io.project_io import load_library, loads_project
from blockflow.project import Page, Project

#: deeper than Python's recursion limit (1,000)
DEEP = 3_000


def _chain_text(n, pages=(), close=False):
    comps = [chain_composite(f"A{i}", f"A{i + 1}" if i < n - 1 else ("A0" if close else None)) for i in range(n)]
    return json.dumps({"format": "blockflow-project", "version": 2, "metadata": {}, "pages": list(pages),
                       "composites": comps})


def test_a_library_file_chaining_thousands_of_composites_loads(tmp_path, monkeypatch):
    path = tmp_path / "chain.bflow.json"
    path.write_text(_chain_text(DEEP), encoding="utf-8")
    read = Calls(monkeypatch, composite, "uses")
    comps, _ = load_library(path)
    # The cycle search reads what each composite uses once: a search from each composite in turn
    # read the rest of the chain again (DEEP ** 2 / 2 reads, seconds at this depth).
    assert len(comps) == DEEP and read.n == DEEP
    assert cycle_through(comps, "A0") is None and find_cycle(comps) is None


def test_a_long_circle_of_composites_is_refused_with_its_chain():
    try:
        loads_project(_chain_text(DEEP, close=True), "circle.bflow.json", library=True)
    except Exception as exc:    # noqa: BLE001 - the kind is the point
        message = str(exc)
        assert type(exc).__name__ == "ProjectFileError", message
    else:
        raise AssertionError("a circle of composites loaded")
    assert "at composites: composite 'A0' contains itself: A0 > A1 > A2" in message and message.endswith("> A0")


def test_cycle_search_is_one_walk_not_one_perchain_composite(monkeypatch):
    comps = {}
    for i in range(DEEP):
        page = Page(block_name(f"A{i}"))
        if i < DEEP - 1:
            page.add_node(block_name(f"A{i + 1}"), id="i")
        comps[f"A{i}"] = Composite(f"A{i}", page=page)
    read = Calls(monkeypatch, composite, "uses")
    assert find_cycle(comps) is None
    assert read.n == DEEP           # each composite read once, not the chain from each of them
    comps["A0"].page.add_node(block_name("A0"), id="me")
    assert find_cycle(comps) == ["A0", "A0"]


def test_flat_size_counts_a_deep_chain_down_to_the_nesting_limit():
    project = loads_project(_chain_text(DEEP), "chain.bflow.json", library=True)
    page = Page("main")
    page.add_node(block_name("A0"), id="a")
    # each level: Input, Output and the next instance; the last instance kept is one block
    assert flat_size(page, project.composites) == 2 * MAX_NESTING + 1


def test_check_on_a_project_nesting_thousands_deep_names_the_nesting(tmp_path):
    page = {"name": "main", "nodes": [{"id": "a", "block": "@A0", "attrs": {}}], "edges": []}
    path = tmp_path / "deep.bflow.json"
    path.write_text(_chain_text(DEEP, pages=[page]), encoding="utf-8")
    r = run_cli("check", str(path))
    r.assert_clean_message()
    assert r.returncode == 1, r.output
    assert f"composites nest more than {MAX_NESTING} levels deep here" in r.output
    assert "internal error" not in r.output



def test_a_page_too_big_to_flatten_is_refused_at_once_with_its_true_count(monkeypatch):
    from blockflow.compile import flatten as flattening
    from blockflow.compile.flatten import MAX_FLAT_BLOCKS, flatten
    from blockflow.project import Node
    from blockflow.registry import default_registry

    n, k = 60_000, 10     # ten instances of a composite of 60,000 blocks: 600,000 flat
    big = Page(block_name("Big"), {f"n{i}": Node(f"n{i}", "Identity") for i in range(n)})
    page = Page("main", {f"b{j}": Node(f"b{j}", block_name("Big")) for j in range(k)})
    read = Calls(monkeypatch, flattening, "composite_name")
    flat, h = flatten(page, {"Big": Composite("Big", page=big)}, default_registry())
    # Counted, not expanded: Big's diagram is read once (n), the page's twice (to count, then to
    # list what it leaves unexpanded), its first block (is the page plain?) and its own name.
    # Expanding first, or reading Big's diagram once per instance, reads n * k block names.
    assert read.n == n + 2 * k + 2
    assert flat is page and h.unexpanded == set(page.nodes)
    assert [p.message for p in h.problems] == [
        f"the page would flatten to {n * k:,} blocks (each composite instance expanded, nested ones included); "
        f"the limit is {MAX_FLAT_BLOCKS:,}"]


def test_problems_list_a_few_of_many_names_not_all_of_them(monkeypatch):
    from blockflow.compile import flatten as flattening
    from blockflow.compile.flatten import LISTED_NAMES, flatten
    from blockflow.project import Node
    from blockflow.registry import default_registry
    from blockflow.spec import Attr

    n = 3_000     # composites, and instances of a missing one: 9,000,000 names listed before
    long = "x" * 100
    comps = {f"C{i:04d}{long}": Composite(f"C{i:04d}{long}") for i in range(n)}
    many = Composite("Many", params=[Attr(f"p{i}{long}", "int", 0) for i in range(n)])
    comps["Many"] = many
    nodes = {f"b{j}": Node(f"b{j}", block_name("Nope")) for j in range(n)}
    nodes["m"] = Node("m", block_name("Many"), {"nope": 1})
    listed = Calls(monkeypatch, flattening, "listing")
    _, h = flatten(Page("main", nodes), comps, default_registry())
    # The project's composites are sorted and listed once for all n instances of the missing one
    # (sorting them again for each made n sorts of n names), and Many's parameters once.
    assert listed.n == 2
    assert len(h.problems) == n + 1 and max(len(p.message) for p in h.problems) < 500
    missing = h.problems[0].message
    assert missing.startswith("there is no composite 'Nope' in this project (composites: C0000xxx")
    assert missing.endswith(f"… and {n + 1 - LISTED_NAMES:,} more)")
    assert h.problems[-1].message.endswith(f"and {n - LISTED_NAMES:,} more)")
