"""Compiling big pages in linear time (issue 18; benchmarks/compile_paths.py times it): what the
speed-ups must not change. Each is compared with the way it replaced, on generated pages:

- the schedule's order without networkx (compile/ordering.py) against nx.topological_sort of the
  graph the compiler used to build, and Program.graph against that graph;
- attrs checked once per distinct content (compiler.attrs_key) against once per node;
- a big compile's objects handed to the oldest generation of the collector.
"""
from __future__ import annotations

import gc
import random

import networkx as nx
import numpy as np
import pytest

from blockflow.compile import compiler
from blockflow.compile.compiler import attrs_key, compile_project
from blockflow.compile.ordering import Dependencies, add_child
from blockflow.project import Project


def _old_graph(nodes, arcs) -> nx.DiGraph:
    """What compiler._ordering_graph built before ordering.py."""
    graph = nx.DiGraph()
    graph.add_nodes_from(nodes)
    graph.add_edges_from(sorted(arcs))
    return graph


def _random_arcs(rng, nodes, n_arcs, acyclic):
    arcs = []
    for _ in range(n_arcs):
        i, j = rng.randrange(len(nodes)), rng.randrange(len(nodes))
        if acyclic:
            i, j = min(i, j), max(i, j)
            if i == j:
                continue
        arcs.append((nodes[i], nodes[j]))
    arcs += arcs[: len(arcs) // 5]     # the same pair twice (two wires between two blocks)
    rng.shuffle(arcs)
    return arcs


@pytest.mark.parametrize("seed", range(12))
def test_the_order_and_the_graph_are_networkx_s(seed):
    rng = random.Random(seed)
    n = rng.randrange(1, 300)
    nodes = [f"n{rng.randrange(10 ** 6)}_{i}" for i in range(n)]
    rng.shuffle(nodes)
    arcs = _random_arcs(rng, nodes, rng.randrange(0, 3 * n), acyclic=seed % 3 != 0)
    old = _old_graph(nodes, arcs)
    deps = Dependencies(nodes, arcs)
    try:
        want = list(nx.topological_sort(old))
    except nx.NetworkXUnfeasible:
        want = None
    assert deps.order() == want
    new = deps.graph()
    assert list(new.nodes) == list(old.nodes)
    assert list(new.edges) == list(old.edges)
    assert [list(new.predecessors(v)) for v in nodes] == [list(old.predecessors(v)) for v in nodes]


@pytest.mark.parametrize("seed", range(8))
def test_arcs_added_one_by_one_sort_as_the_whole_list_does(seed):
    # the compiler adds a composite's dimension arcs to the wires' successors with add_child
    rng = random.Random(seed)
    n = rng.randrange(2, 200)
    nodes = [f"n{rng.randrange(10 ** 6)}_{i}" for i in range(n)]
    arcs = _random_arcs(rng, nodes, rng.randrange(0, 3 * n), acyclic=seed % 2 == 0)
    index = {v: i for i, v in enumerate(nodes)}
    succ, indegree = [None] * n, [0] * n
    for u, v in arcs:
        add_child(succ, indegree, index[u], index[v], nodes)
    deps = Dependencies.sorted_successors(nodes, succ, indegree)
    want = Dependencies(nodes, arcs)
    assert deps.order() == want.order() and deps.succ == want.succ


def test_a_self_arc_and_an_arc_to_a_node_not_listed_are_as_networkx_has_them():
    deps = Dependencies(["a", "b"], [("a", "a"), ("b", "c")])
    assert deps.order() is None
    old = _old_graph(["a", "b"], [("a", "a"), ("b", "c")])
    assert list(deps.graph().nodes) == list(old.nodes) == ["a", "b", "c"]
    assert Dependencies(["b"], [("b", "c"), ("a", "b")]).order() == ["a", "b", "c"] == \
        list(nx.topological_sort(_old_graph(["b"], [("b", "c"), ("a", "b")])))


def test_attrs_keys_tell_apart_what_python_calls_equal():
    assert attrs_key({}) == ()
    assert attrs_key({"a": 1}) != attrs_key({"a": 1.0}) != attrs_key({"a": True})
    assert attrs_key({"a": 0.0}) != attrs_key({"a": -0.0})
    assert attrs_key({"a": float("nan")}) == attrs_key({"a": float("nan")})
    assert attrs_key({"a": [1, 2]}) != attrs_key({"a": (1, 2)})
    assert attrs_key({"a": [1, [2, 3]]}) == attrs_key({"a": [1, [2, 3]]})
    assert attrs_key({"a": 1, "b": 2}) != attrs_key({"b": 2, "a": 1})   # messages list them in order
    for plain_not in (np.float32(1), np.zeros(2), {"k": 1}, [np.int64(1)]):
        assert attrs_key({"a": plain_not}) is None


def generated(n, seed=0) -> Project:
    """A layered page of mixed blocks (as benchmarks/run.py's generated page, with Variables,
    inline constants, attrs that differ only in type or sign, and a few broken blocks)."""
    rng = random.Random(seed)
    p = Project()
    pg = p.add_page("big")
    outs = []
    for i in range(n):
        nid = f"b{i}"
        pick = rng.random()
        if i < 3 or pick < 0.08:
            pg.add_node("Placeholder", id=nid, attrs={"shape": [4]})
            outs.append((nid, "output"))
            continue
        if pick < 0.14:
            init = rng.choice(["zeros", "ones", "glorot_uniform"])
            pg.add_node("Variable", id=nid, attrs={"shape": [4], "initializer": init, "seed": rng.randrange(3)})
            outs.append((nid, "ref"))
            continue
        src = outs[rng.randrange(max(0, len(outs) - 40), len(outs))]
        if pick < 0.16:
            pg.add_node("Tanh", id=nid, attrs={"nonsense": rng.choice([1, 1.0, True])})   # an error each
        elif pick < 0.4:
            pg.add_node("Multiply", id=nid, inputs={"y": np.float32(rng.choice([0.0, -0.0, 1.5]))})
            pg.connect(*src, nid, "x")
            outs.append((nid, "z"))
            continue
        elif pick < 0.7:
            pg.add_node("Add", id=nid)
            pg.connect(*outs[rng.randrange(max(0, len(outs) - 40), len(outs))], nid, "y")
        else:
            pg.add_node("Tanh", id=nid)
        pg.connect(*src, nid, "x")
        outs.append((nid, "z" if pg.nodes[nid].block == "Add" else "y"))
    if n > 10:
        pg.add_node("Sum", id="loss")
        pg.connect(*outs[-1], "loss", "input")
        pg.loss = "loss"
    return p


def _the_old_way(monkeypatch):
    """The compile as it was: attrs checked per node, the order from networkx."""
    monkeypatch.setattr(compiler, "attrs_key", lambda attrs: None)
    monkeypatch.setattr(Dependencies, "order", lambda self: _nx_order(self.graph()))


def _nx_order(graph):
    try:
        return list(nx.topological_sort(graph))
    except nx.NetworkXUnfeasible:
        return None


def _same_program(a, b) -> None:
    assert a.diagnostics == b.diagnostics
    assert len(a.steps) == len(b.steps) and len(a.slots) == len(b.slots)
    for x, y in zip(a.slots, b.slots):
        assert (x.index, x.node, x.port, x.type, x.const, x.state) == (y.index, y.node, y.port, y.type, y.const, y.state)
        assert (x.type.value is None) == (y.type.value is None)
        if x.type.value is not None:
            assert np.array_equal(x.type.value, y.type.value) and \
                np.signbit(x.type.value).tolist() == np.signbit(y.type.value).tolist()
    for x, y in zip(a.steps, b.steps):
        assert (x.index, x.node, x.spec, x.inputs, x.outputs, x.in_edges, x.out_struct, x.out_decl, x.refs) == \
               (y.index, y.node, y.spec, y.inputs, y.outputs, y.in_edges, y.out_struct, y.out_decl, y.refs)
        assert x.attrs.keys() == y.attrs.keys()
        for k in x.attrs:
            assert repr(x.attrs[k]) == repr(y.attrs[k]) and type(x.attrs[k]) is type(y.attrs[k])
        assert [repr(v) for v in x.static] == [repr(v) for v in y.static]
    assert a.edge_types == b.edge_types and list(a.edge_types) == list(b.edge_types)
    assert a.port_slots == b.port_slots and list(a.port_slots) == list(b.port_slots)
    assert list(a.graph.nodes) == list(b.graph.nodes) and list(a.graph.edges) == list(b.graph.edges)
    assert a.trainable == b.trainable and set(a.variable_values) == set(b.variable_values)


@pytest.mark.parametrize("n, seed", [(60, 1), (400, 2), (3000, 3)])
def test_a_generated_page_compiles_the_same_both_ways(n, seed, monkeypatch):
    project = generated(n, seed)
    new = compile_project(project)
    with monkeypatch.context() as m:
        _the_old_way(m)
        old = compile_project(project)
    assert not new.ok and len(new.errors) > 0 or n <= 60   # the broken Tanhs are reported
    _same_program(new, old)
    if new.loss is not None and "loss" in new.step_of:
        a, b = new.gradient_paths(), old.gradient_paths()
        assert (a.flows, a.cut, a.unreached, a.slots, a.sources) == (b.flows, b.cut, b.unreached, b.slots, b.sources)


def test_a_page_with_a_cycle_compiles_the_same_both_ways(monkeypatch):
    project = generated(200, 5)
    pg = project.page()
    pg.add_node("Add", id="c1")
    pg.add_node("Tanh", id="c2")
    pg.connect("c1", "z", "c2", "x")
    pg.connect("c2", "y", "c1", "x")
    pg.connect("b0", "output", "c1", "y")
    new = compile_project(project)
    with monkeypatch.context() as m:
        _the_old_way(m)
        old = compile_project(project)
    assert any("cycle" in d.message for d in new.errors)
    _same_program(new, old)


def test_a_big_compile_leaves_its_objects_in_the_oldest_generation(monkeypatch):
    monkeypatch.setattr(compiler, "PROMOTE_AT", 0)
    program = compile_project(generated(300, 7))
    assert gc.get_count()[0] < 1000
    step = program.steps[-1]
    assert any(o is step for o in gc.get_objects(generation=2))


def test_objects_someone_froze_stay_frozen(monkeypatch):
    monkeypatch.setattr(compiler, "PROMOTE_AT", 0)
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        program = compile_project(generated(100, 8))
        assert gc.get_freeze_count() == frozen
        assert program.steps
    finally:
        gc.unfreeze()
