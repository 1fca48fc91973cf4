"""Hostile shapes of one block's wires: thousands of wires into one variadic input (an AddN or
Concat of every block of a page), one block feeding thousands whose ids do not follow the page's
order. A page may hold 200,000 blocks, and a file of one Placeholder wired 200,000 times into an
AddN is 9 MB: compiling it must take time in proportion to its wires, not to their square
(docs/limits.md, "Time: checking and editing")."""
from __future__ import annotations

import time

import numpy as np

from blockflow.compile.compiler import compile_project
from blockflow.compile.ordering import Dependencies
from blockflow.project import Edge, Project
from blockflow.run.runtime import run, run_backward

_DST_PORT = Edge.__dict__["dst_port"]     # the slot's own descriptor


class _CountingEdge(Edge):
    """An Edge that counts the reads of its destination port: what finding a wire by port costs."""

    __slots__ = ()
    reads = 0

    @property
    def dst_port(self):
        _CountingEdge.reads += 1
        return _DST_PORT.__get__(self)


def _wide_addn(n: int) -> Project:
    project = Project()
    page = project.add_page("p")
    page.add_node("Placeholder", id="x", attrs={"dtype": "float64", "shape": []})
    page.add_node("AddN", id="a")
    page.edges = [_CountingEdge("x", "output", "a", f"inputs[{i}]") for i in range(n)]
    page.loss = "a"
    return project


def test_the_wires_into_one_addn_are_found_by_port_not_searched_for_each():
    n = 3000
    project = _wide_addn(n)
    _CountingEdge.reads = 0
    program = compile_project(project)
    assert program.ok, program.errors[:3]
    # each wire is read a few times; a search of the block's wires for each port read 13.5
    # million (and 20,000 wires took 2 minutes)
    assert _CountingEdge.reads < 20 * n, _CountingEdge.reads
    res = run_backward(program, feeds={"x": np.float64(1.5)})
    assert res.values[("a", "sum")] == 1.5 * n
    assert res.grads[("x", "output")] == n
    # a port missing among thousands is still named
    project.pages[0].edges = [e for e in project.pages[0].edges if e.dst_port != "inputs[1500]"]
    assert any("inputs[1500] is empty" in str(d) for d in compile_project(project).errors)


def _fan(n: int, reverse: bool, twice: int = 0) -> Project:
    """One Placeholder feeding ``n`` Negate blocks, listed in (or against) their ids' order; the
    first ``twice`` of them also feed an Add from it twice, so that arcs repeat."""
    project = Project()
    page = project.add_page("p")
    page.add_node("Placeholder", id="x", attrs={"dtype": "float32", "shape": []})
    order = range(n, 0, -1) if reverse else range(1, n + 1)
    for i in order:
        page.add_node("Negate", id=f"n{i:07d}")
        page.connect("x", "output", f"n{i:07d}", "x")
    for i in range(twice):
        page.add_node("Add", id=f"d{i:07d}")
        page.connect("x", "output", f"d{i:07d}", "x")
        page.connect("x", "output", f"d{i:07d}", "y")
    return project


def _compile_time(project) -> float:
    start = time.perf_counter()
    program = compile_project(project)
    took = time.perf_counter() - start
    assert program.ok, program.errors[:3]
    return took


def test_a_block_feeding_thousands_against_their_ids_order_compiles_as_fast_as_in_order():
    n = 30_000
    forward, backward = _fan(n, reverse=False, twice=100), _fan(n, reverse=True, twice=100)
    times = {False: [], True: []}
    for _ in range(3):      # alternated, the best of three: the machine's state cancels out
        times[False].append(_compile_time(forward))
        times[True].append(_compile_time(backward))
    # put in its place one at a time, after a search of the list for it: 8-40x the in-order page
    assert min(times[True]) < 3 * min(times[False]), times
    # the long lists, sorted once the wires are read, give the order a sort of every arc gives
    # (an Add fed twice by one block counted once)
    program, page = compile_project(backward), backward.pages[0]
    reference = Dependencies(list(page.nodes), [(e.src, e.dst) for e in page.edges]).order()
    assert [st.node for st in program.steps] == reference
    assert run(program, feeds={"x": np.float32(2.0)}).values[("d0000099", "z")] == 4.0
