"""Composite workloads for benchmarks/run.py: what composites cost once flattened.

- ``mlp_rows``: the MLP benchmark's net (64x784-256-256-10) drawn with three instances of a Dense
  composite, against the same net drawn from the same raw ops (MatMul, BiasAdd, Relu), both with
  the same weights: a forward+backward step of each, interleaved (target <= 1.02x).
- ``compile_rows``: compiling a page of 1,000 instances of a 20-block composite (20,000 flat
  blocks) against compiling a 10k-block raw page, per block (target: no more per block).

The raw workloads of run.py are imported by the caller and passed in; this module only builds.
"""
from __future__ import annotations

import gc
import statistics
import time

import numpy as np

from blockflow.compile.compiler import compile_project
from blockflow.composite import Composite, block_name
from blockflow.project import Project
from blockflow.run.runtime import run
from blockflow.spec import Attr

SIZES = (784, 256, 256, 10)
BATCH = 64


def dense(name="Dense", activation=True) -> Composite:
    """x [batch, features] -> relu(x @ W + b) (``activation=False``: x @ W + b), as a user draws
    it (tests/composite_kit.py's Dense)."""
    comp = Composite(name, doc="A fully connected layer: y = activation(x @ W + b).",
                     params=[Attr("units", "int", min=1, doc="output features")])
    p = comp.page
    p.add_node("Input", id="x", attrs={"name": "x", "dtype": "float32", "shape": ["batch", "features"]})
    p.add_node("Variable", id="W", attrs={"shape": [{"$dim": "features"}, {"$param": "units"}],
                                           "initializer": "glorot_uniform", "seed": 1})
    p.add_node("Variable", id="b", attrs={"shape": [{"$param": "units"}], "initializer": "zeros"})
    p.add_node("MatMul", id="MatMul_1")
    p.add_node("BiasAdd", id="BiasAdd_1")
    p.add_node("Output", id="y", attrs={"name": "y"})
    p.connect("x", "output", "MatMul_1", "a")
    p.connect("W", "ref", "MatMul_1", "b")
    p.connect("MatMul_1", "product", "BiasAdd_1", "value")
    p.connect("b", "ref", "BiasAdd_1", "bias")
    if activation:
        p.add_node("Relu", id="Relu_1")
        p.connect("BiasAdd_1", "output", "Relu_1", "features")
        p.connect("Relu_1", "activations", "y", "input")
    else:
        p.connect("BiasAdd_1", "output", "y", "input")
    return comp


def _loss_tail(pg, prev) -> None:
    pg.add_node("SoftmaxCrossEntropyWithLogits", id="ce")
    pg.connect(*prev, "ce", "features")
    pg.connect("y", "output", "ce", "labels")
    pg.add_node("Mean", id="loss")
    pg.connect("ce", "loss", "loss", "input")
    pg.loss = "loss"


def raw_mlp(weights) -> Project:
    """The net from raw ops: MatMul, BiasAdd, Relu per layer (no Relu after the last)."""
    p = Project()
    pg = p.add_page("mlp")
    pg.add_node("Placeholder", id="x", attrs={"shape": [BATCH, SIZES[0]]})
    pg.add_node("Placeholder", id="y", attrs={"shape": [BATCH, SIZES[-1]]})
    prev = ("x", "output")
    last = len(SIZES) - 1
    for i, (n_in, n_out) in enumerate(zip(SIZES[:-1], SIZES[1:]), 1):
        W, b = weights[i - 1]
        pg.add_node("Variable", id=f"W{i}", attrs={"shape": [n_in, n_out]}, state={"value": W})
        pg.add_node("Variable", id=f"b{i}", attrs={"shape": [n_out]}, state={"value": b})
        pg.add_node("MatMul", id=f"MatMul_{i}")
        pg.add_node("BiasAdd", id=f"BiasAdd_{i}")
        pg.connect(*prev, f"MatMul_{i}", "a")
        pg.connect(f"W{i}", "ref", f"MatMul_{i}", "b")
        pg.connect(f"MatMul_{i}", "product", f"BiasAdd_{i}", "value")
        pg.connect(f"b{i}", "ref", f"BiasAdd_{i}", "bias")
        prev = (f"BiasAdd_{i}", "output")
        if i < last:
            pg.add_node("Relu", id=f"Relu_{i}")
            pg.connect(*prev, f"Relu_{i}", "features")
            prev = (f"Relu_{i}", "activations")
    _loss_tail(pg, prev)
    return p


def composite_mlp(weights) -> Project:
    """The same net as Dense instances d1, d2 and a DenseLinear d3, each instance holding the
    raw net's weights as its Variables' state (what a saved project keeps)."""
    p = Project()
    p.composites["Dense"] = dense()
    p.composites["DenseLinear"] = dense("DenseLinear", activation=False)
    pg = p.add_page("mlp")
    pg.add_node("Placeholder", id="x", attrs={"shape": [BATCH, SIZES[0]]})
    pg.add_node("Placeholder", id="y", attrs={"shape": [BATCH, SIZES[-1]]})
    prev = ("x", "output")
    last = len(SIZES) - 1
    for i, n_out in enumerate(SIZES[1:], 1):
        W, b = weights[i - 1]
        pg.add_node(block_name("Dense" if i < last else "DenseLinear"), id=f"d{i}", attrs={"units": n_out},
                    state={"W:value": W, "b:value": b})
        pg.connect(*prev, f"d{i}", "x")
        prev = (f"d{i}", "y")
    _loss_tail(pg, prev)
    return p


def mlp_programs():
    rng = np.random.default_rng(0)
    weights = []
    for n_in, n_out in zip(SIZES[:-1], SIZES[1:]):
        lim = np.sqrt(6 / (n_in + n_out))
        weights.append((rng.uniform(-lim, lim, (n_in, n_out)).astype(np.float32),
                        (rng.normal(size=n_out) * 0.1).astype(np.float32)))
    raw = compile_project(raw_mlp(weights))
    comp = compile_project(composite_mlp(weights))
    raw.raise_for_errors()
    comp.raise_for_errors()
    feeds = {"x": rng.normal(size=(BATCH, SIZES[0])).astype(np.float32),
             "y": np.eye(SIZES[-1], dtype=np.float32)[rng.integers(0, SIZES[-1], BATCH)]}
    return raw, comp, feeds


def mlp_rows(repeats, timeit_pair):
    raw, comp, feeds = mlp_programs()

    def step(program, record=False):
        return lambda: run(program, feeds, target="loss", record=record, check_numerics=False)

    a, b = step(raw)(), step(comp)()
    # bit-identical: the composite net is the raw net with identities at the instances' ports
    assert np.array_equal(a.value("loss"), b.value("loss")), "the two nets disagree"
    for i in (1, 2, 3):
        assert np.array_equal(a.variable_grads[f"W{i}"], b.variable_grads[f"d{i}/W"]), f"dW{i} differs"
        assert np.array_equal(a.variable_grads[f"b{i}"], b.variable_grads[f"d{i}/b"]), f"db{i} differs"
    h, o = timeit_pair(step(raw), step(comp), repeats)
    hr, orr = timeit_pair(step(raw, True), step(comp, True), max(3, repeats // 2))
    return [("(f) MLP with Dense composites vs raw", h, o, 1.02,
             f"'numpy' column: the raw-op net in blockflow; recording every wire (the editor's "
             f"run): {orr / hr:.3f}x")]


# ------------------------------------------------------------------------ compile at scale


def chain_composite(n_blocks=20) -> Composite:
    """A composite of ``n_blocks`` blocks: an Input, a Variable, a chain of Tanh/Add/Multiply ops
    mixing the Variable in, and an Output (a small layer's worth of blocks and wires)."""
    comp = Composite("Chain", params=[Attr("scale", "float", 1.0)])
    p = comp.page
    p.add_node("Input", id="x", attrs={"name": "x", "dtype": "float32", "shape": ["n"]})
    p.add_node("Variable", id="w", attrs={"shape": [{"$dim": "n"}], "initializer": "ones"})
    prev = ("x", "output")
    for i in range(n_blocks - 3):
        kind = ("Tanh", "Add", "Multiply")[i % 3]
        nid = f"op{i}"
        if kind == "Tanh":
            p.add_node("Tanh", id=nid)
            p.connect(*prev, nid, "x")
            prev = (nid, "y")
        else:
            p.add_node(kind, id=nid)
            p.connect(*prev, nid, "x")
            p.connect("w", "ref", nid, "y")
            prev = (nid, "z")
    p.add_node("Output", id="y", attrs={"name": "y"})
    p.connect(*prev, "y", "input")
    assert len(p.nodes) == n_blocks
    return comp


def instances_project(n_instances=1000, width=4, seed=0, inline=False) -> Project:
    """A page of ``n_instances`` Chain instances, each fed by one of the 50 drawn before it or by
    one of a few Placeholders (as benchmarks/run.py's generated page); ``inline``: the same page
    with each instance's blocks drawn on it (ids ``c7.op3``), the dimension filled in: what the
    flattening makes, drawn by hand."""
    rng = np.random.default_rng(seed)
    p = Project()
    comp = p.composites["Chain"] = chain_composite()
    pg = p.add_page("big")
    outs = []
    for i in range(4):
        pg.add_node("Placeholder", id=f"x{i}", attrs={"shape": [width]})
        outs.append((f"x{i}", "output"))
    for i in range(n_instances):
        nid = f"c{i}"
        src = outs[rng.integers(max(0, len(outs) - 50), len(outs))]
        if not inline:
            pg.add_node(block_name("Chain"), id=nid, attrs={"scale": 1.0})
            pg.connect(*src, nid, "x")
            outs.append((nid, "y"))
            continue
        for inner, node in comp.page.nodes.items():
            attrs = dict(node.attrs, shape=[width]) if node.block == "Variable" else node.attrs
            pg.add_node(node.block, id=f"{nid}.{inner}", attrs=attrs)
        for e in comp.page.edges:
            pg.connect(f"{nid}.{e.src}", e.src_port, f"{nid}.{e.dst}", e.dst_port)
        pg.connect(*src, f"{nid}.x", "input")
        outs.append((f"{nid}.y", "output"))
    if inline:
        p.composites.clear()
    return p


def compile_rows(repeats, generated_project, n_instances=1000):
    """Compiles of the 10k raw page, the page of instances and the same page drawn inline,
    interleaved (the machine is shared); per block, the instances against the 10k figure."""
    projects = {"raw": generated_project(10_000), "instances": instances_project(n_instances),
                "inline": instances_project(n_instances, inline=True)}
    blocks = {k: sum(1 for _ in _flat_nodes(p)) for k, p in projects.items()}
    times: dict = {k: [] for k in projects}
    for _ in range(max(1, min(repeats // 8, 5))):
        for name, project in projects.items():
            gc.collect()
            t0 = time.perf_counter()
            program = compile_project(project)
            times[name].append(time.perf_counter() - t0)
            assert program.ok, program.errors[:3]
    t = {k: statistics.median(v) for k, v in times.items()}
    per = {k: t[k] / blocks[k] * 1e6 for k in t}
    n = blocks["instances"]
    return [(f"(g) compile {n_instances} x 20-block instances", per["raw"] * n / 1e6, t["instances"], 1.0,
             f"'numpy' column: {n:,} blocks at the 10k raw page's cost per block ({per['raw']:.1f} us, "
             f"{t['raw'] * 1e3:.0f} ms for 10k); here {per['instances']:.1f} us per block; the same page "
             f"drawn inline {t['inline'] * 1e3:.0f} ms ({per['inline']:.1f} us per block)")]


def _flat_nodes(project):
    page = project.pages[0]
    for node in page.nodes.values():
        comp = project.composites.get(node.block[1:]) if node.block.startswith("@") else None
        yield from (comp.page.nodes if comp is not None else (node,))
