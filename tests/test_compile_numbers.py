"""Compiling by block number (issue 18, compile20): what the changes for big pages must not change.
Each is compared with the way it replaced:

- a page read once to find it needs no flattening (compiler._check_blocks) against flatten.py's
  own pass, on every recorded page and on pages with a reference where none may be;
- a Program's answers by block number (step, port_type, slot_of...) against the dicts
  ``step_of`` and ``port_slots`` it now builds only when asked;
- the schedule's children sorted as the wires are checked against networkx's order of the graph
  the compiler used to build, on pages whose ids sort otherwise than page order;
- the gradient paths' ``needs`` made when first asked.
"""
from __future__ import annotations

import random

import networkx as nx
import numpy as np
import pytest

from blockflow.compile import compiler
from blockflow.compile.compiler import _Compiler, compile_page, compile_project
from blockflow.compile.flatten import flatten
from blockflow.project import Project
from blockflow.registry import default_registry

from compile_record import chain_composite, fingerprint, generated_pages, sample_pages


def _recorded():
    for name, project in [*generated_pages(), *sample_pages()]:
        for page in project.pages:
            yield pytest.param(project, page.name, id=f"{name}/{page.name}")


RECORDED = list(_recorded())


def _flattened_first(page, composites):
    """compile_page as it was: flatten.py's pass over the page, then the compile of what it gave."""
    flat, hierarchy = flatten(page, composites, default_registry())
    return _Compiler(flat, default_registry(), None, hierarchy).run()


@pytest.mark.parametrize("project, page", RECORDED)
def test_a_page_read_once_compiles_as_one_flattened_first(project, page):
    pg = project.page(page)
    assert fingerprint(compile_page(pg, composites=project.composites)) == \
        fingerprint(_flattened_first(pg, project.composites))


def test_a_plain_page_is_not_given_to_flatten(monkeypatch):
    def no(*a, **k):
        raise AssertionError("flatten was called")

    monkeypatch.setattr(compiler, "flatten", no)
    program = compile_project(_page_of(300, 1))
    assert program.ok and len(program.steps) == 300


@pytest.mark.parametrize("where", ["known", "unknown", "nested", "instance", "definition"])
def test_a_page_that_needs_flattening_is_flattened(where, monkeypatch):
    project = _page_of(40, 2)
    project.composites["Chain"] = chain_composite()
    pg = project.page()
    ids = list(pg.nodes)
    if where == "known":          # a reference outside any composite: flatten.py reports it
        pg.nodes[ids[7]].attrs["shape"] = [{"$param": "k"}]
    elif where == "unknown":      # on a block of no known kind, which the compile skips
        pg.add_node("NoSuchBlock", id="late", attrs={"a": {"$dim": "d"}})
    elif where == "nested":
        pg.nodes[ids[-1]].attrs["perm"] = [[0, [1, {"$param": "k"}]]]
    elif where == "instance":
        pg.add_node("@Chain", id="inst")
        pg.connect("x0", "output", "inst", "x")
    else:                         # the composite's own page, compiled alone
        pg = project.composites["Chain"].page
    calls = []
    real = compiler.flatten
    monkeypatch.setattr(compiler, "flatten", lambda *a: calls.append(1) or real(*a))
    got = compile_page(pg, composites=project.composites)
    assert calls == [1]
    assert fingerprint(got) == fingerprint(_flattened_first(pg, project.composites))
    if where in ("known", "unknown", "nested"):
        assert any("not inside a composite" in d.message for d in got.errors)


@pytest.mark.parametrize("project, page", RECORDED)
def test_the_answers_by_block_number_are_the_dicts_answers(project, page):
    program = compile_project(project, page)
    names = sorted(set(project.page(page).nodes) | {s.node for s in program.slots} | {"nope", ""})
    asked = [(node, port) for node in names
             for port in sorted({s.port for s in program.slots if s.node == node} |
                                {"output", "y", "z", "nope", None}, key=str)]
    # by number first: once port_slots is made, _slot_index answers from it
    steps = {node: program.step(node) for node in names}
    slots = {key: program._slot_index(*key) for key in asked}
    types = {key: program.port_type(*key) for key in asked if program.instance(key[0]) is None}
    outputs = {node: program.output_ports(node) for node in names if steps[node] is not None}
    assert program._port_slots is None and program._step_of is None
    step_of, port_slots = program.step_of, program.port_slots
    assert list(step_of) == [s.node for s in program.steps]
    for node in names:
        assert steps[node] is step_of.get(node)
        if steps[node] is not None and program.instance(node) is None:
            assert outputs[node] == [program.slots[o].port for o in steps[node].outputs]
            assert program.spec_of(node) is steps[node].spec
    for key in asked:
        want = port_slots.get(key)
        assert slots[key] == want and program._slot_index(*key) == want
        if key in types:
            assert types[key] == (None if want is None else program.slots[want].type)


def test_a_failed_variable_s_output_is_still_typed(monkeypatch):
    """A Variable whose stored value has the wrong shape gets no step, but its output was
    numbered before the check (as the port_slots dict had it)."""
    p = Project()
    pg = p.add_page("p")
    pg.add_node("Variable", id="w", attrs={"shape": [3], "initializer": "zeros"},
                state={"value": np.zeros(4, np.float32)})
    program = compile_project(p)
    assert program.step("w") is None and not program.ok
    assert ("w", "ref") in program.port_slots
    assert program.port_type("w", "ref") is not None
    assert program.port_type("w", "ref") == program.slots[program.port_slots[("w", "ref")]].type


def _page_of(n, seed, shuffle=False) -> Project:
    """Adds and Tanhs whose ids sort otherwise than page order (n10 < n9), sources with many
    children, two wires between the same blocks, and (``shuffle``) wires listed out of page order."""
    rng = random.Random(seed)
    p = Project()
    pg = p.add_page("p")
    outs = []
    for i in range(n):
        if i < 2 or rng.random() < 0.1:
            nid = f"x{i}"
            pg.add_node("Placeholder", id=nid, attrs={"shape": [4]})
            outs.append((nid, "output"))
            continue
        nid = f"n{rng.randrange(10 ** 4)}_{i}" if rng.random() < 0.5 else f"n{i}"
        near = outs[max(0, len(outs) - 6):]
        if rng.random() < 0.6:
            pg.add_node("Add", id=nid)
            a = rng.choice(near)
            pg.connect(*a, nid, "x")
            pg.connect(*(a if rng.random() < 0.2 else rng.choice(near)), nid, "y")
            outs.append((nid, "z"))
        else:
            pg.add_node("Tanh", id=nid)
            pg.connect(*rng.choice(near), nid, "x")
            outs.append((nid, "y"))
    if shuffle:
        rng.shuffle(pg.edges)
    return p


@pytest.mark.parametrize("seed", range(8))
def test_the_schedule_is_networkx_s_order(seed):
    project = _page_of(random.Random(seed).randrange(5, 600), seed, shuffle=seed % 2 == 1)
    pg = project.page()
    program = compile_project(project)
    assert program.ok
    old = nx.DiGraph()
    old.add_nodes_from(pg.nodes)
    old.add_edges_from(sorted((e.src, e.dst) for e in pg.edges))
    assert [s.node for s in program.steps] == list(nx.topological_sort(old))
    assert list(program.graph.nodes) == list(old.nodes)
    assert list(program.graph.edges) == list(old.edges)


def test_needs_is_made_once_when_first_asked():
    project = _page_of(200, 3)
    program = compile_project(project)
    paths = program.gradient_paths(program.steps[-1].node)
    needs = paths.needs
    assert needs is paths.needs and needs
    assert all(type(k) is tuple and len(k) == 2 and type(v) is bool for k, v in needs.items())
    assert {e for (i, j), v in needs.items() if v
            for e in [program.steps[i].in_edges[j][2]] if e is not None} == set(paths.flows)
