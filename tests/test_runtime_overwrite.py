"""Plans that write into arrays they already hold (issue 18): elementwise results into an input's
array, gradients into their cotangent's, a sum of a product from its factors. Nothing someone
else still reads may change: values read by two blocks, fetched, read by a vjp, handed to or by
the caller, returned by a Gradients block; and the results are the plain path's, bit for bit (the
gradients' np.dot sums, which change the bits, are compared with float64 in test_fused_grads)."""
from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import blockflow.run.lower as lower
import blockflow.run.runtime as runtime
import blockflow_blocks.fused as fused
from blockflow.compile.compiler import compile_project
from blockflow.run.runtime import run

from diagrams import chain
from memory_tracing import memory_traced

RNG = np.random.default_rng(1819)
N = 50_000
SWITCHES = ("BIND_UFUNCS", "DIRECT_KEYWORDS", "REUSE_BUFFERS", "ADD_IN_PLACE", "VJP_INTO_G", "FORWARD_IN_PLACE",
            "SUM_OF_PRODUCTS", "BOUND_SEED", "FOLD_COTANGENTS")


def _switch(monkeypatch, on, dot=False):
    for name in SWITCHES:
        monkeypatch.setattr(lower, name, on)
    monkeypatch.setattr(fused, "FUSE_PRODUCT_SUMS", on)
    monkeypatch.setattr(fused, "DOT_GRADIENT_SUMS", dot)
    monkeypatch.setattr(runtime, "KEEP_ARRAYS", None)


def _runs(monkeypatch, on, project, feeds, *, dot=False, **kw):
    """(program, [(values, grads, variable grads) of a recorded run and of three that are not])."""
    _switch(monkeypatch, on, dot)
    program = compile_project(project)
    out = []
    for record in (True, False, False, False):
        res = run(program, feeds, record=record, **kw)
        out.append((res.values, res.grads, res.variable_grads))
    return program, out


def _assert_same(fast, plain):
    for (fv, fg, fw), (pv, pg, pw) in zip(fast, plain):
        for f, p in ((fv, pv), (fg, pg), (fw, pw)):
            assert f.keys() == p.keys()
            for k in f:
                assert np.asarray(f[k]).tobytes() == np.asarray(p[k]).tobytes(), k


def _plan(program, record=False):
    return [p for p in program.cache("plans").values() if p.record == record][0]


def _feeds(*names, n=N):
    return {k: (RNG.normal(size=n) + 2).astype(np.float32) for k in names}


def _check(monkeypatch, project, feeds, **kw):
    """Run with the switches on and off; returns the fast program (its plans) after comparing."""
    program, fast = _runs(monkeypatch, True, project, feeds, **kw)
    _, plain = _runs(monkeypatch, False, project, feeds, **kw)
    _assert_same(fast, plain)
    return program


# ------------------------------------------------------------------------------------- forward


def test_a_chain_of_elementwise_steps_writes_into_one_array(monkeypatch):
    project = chain(("x", "Placeholder", {"shape": [N]}, None),
                    ("m", "Max", {}, {"input": "x"}),
                    ("s", "Subtract", {}, {"x": "x", "y": "m"}),
                    ("e", "Exp", {}, {"x": "s"}),
                    ("n", "Negate", {}, {"x": "e"}),
                    ("loss", "Sum", {}, {"input": "n"}))
    feeds = _feeds("x")
    keep = feeds["x"].copy()
    program = _check(monkeypatch, project, feeds, target="loss", wrt=["x"])
    source = _plan(program).source
    s, e = program.step("s").outputs[0], program.step("e").outputs[0]
    assert f"out=s{s})" in source  # e into s's array; n not into e's: Exp's vjp reads e
    assert f"out=s{e})" not in source
    assert feeds["x"].tobytes() == keep.tobytes()


def test_a_value_read_by_two_blocks_is_not_overwritten_before_the_second(monkeypatch):
    project = chain(("x", "Placeholder", {"shape": [N]}, None),
                    ("c", "Placeholder", {"shape": [N]}, None),
                    ("s", "Subtract", {}, {"x": "x", "y": "c"}),
                    ("e", "Exp", {}, {"x": "s"}),        # could write into s, but t reads s after it
                    ("t", "Tanh", {}, {"x": "s"}),
                    ("a", "Add", {}, {"x": "e", "y": "t"}),
                    ("loss", "Sum", {}, {"input": "a"}))
    program = _check(monkeypatch, project, _feeds("x", "c"), target="loss", wrt=["x"])
    lines = _plan(program).source.splitlines()
    s = program.step("s").outputs[0]

    def line(node):
        return next(li for li in lines if f"_n = {program.step(node).index};" in li)
    assert "out=" not in line("e")  # t reads s after it
    assert f"out=s{s})" in line("t")  # the last reader, and no vjp reads s's value
    assert "out=" not in line("a")  # Exp's and Tanh's vjps read e and t


def test_a_fetched_value_is_not_overwritten(monkeypatch):
    project = chain(("x", "Placeholder", {"shape": [N]}, None),
                    ("c", "Placeholder", {"shape": [N]}, None),
                    ("s", "Subtract", {}, {"x": "x", "y": "c"}),
                    ("e", "Exp", {}, {"x": "s"}),
                    ("loss", "Sum", {}, {"input": "e"}))
    feeds = _feeds("x", "c")
    program = _check(monkeypatch, project, feeds, target="loss", wrt=["x"], fetch=["s"])
    assert f"out=s{program.step('s').outputs[0]})" not in _plan(program).source
    res = run(program, feeds, target="loss", wrt=["x"], record=False, fetch=["s"])
    assert res.value("s").tobytes() == (feeds["x"] - feeds["c"]).tobytes()
    # without the fetch it is
    _switch(monkeypatch, True)
    program = compile_project(project)
    run(program, feeds, target="loss", wrt=["x"], record=False)
    assert f"out=s{program.step('s').outputs[0]})" in _plan(program).source


def test_a_value_a_vjp_reads_is_not_overwritten(monkeypatch):
    """Multiply's vjp reads its factors: Negate may not write into s, which it also reads."""
    project = chain(("x", "Placeholder", {"shape": [N]}, None),
                    ("c", "Placeholder", {"shape": [N]}, None),
                    ("s", "Subtract", {}, {"x": "x", "y": "c"}),
                    ("p", "Multiply", {}, {"x": "s", "y": "c"}),
                    ("n", "Negate", {}, {"x": "s"}),
                    ("a", "Add", {}, {"x": "p", "y": "n"}),
                    ("loss", "Sum", {}, {"input": "a"}))
    program = _check(monkeypatch, project, _feeds("x", "c"), target="loss", wrt=["x", "c"])
    assert f"out=s{program.step('s').outputs[0]})" not in _plan(program).source


def _relu_layers(n=64, k=96, m=80, relu_readers=()):
    """x -> MatMul W1 -> Add b1 -> Relu -> MatMul W2 -> Add b2 -> Relu -> Mean (the page's loss);
    ``relu_readers`` adds blocks reading the first Relu's input or output as well."""
    specs = [("x", "Placeholder", {"shape": [n, k]}, None),
             ("W1", "Variable", {"shape": [k, m], "initializer": "glorot_uniform", "seed": 1}, None),
             ("b1", "Variable", {"shape": [m], "initializer": "glorot_uniform", "seed": 2}, None),
             ("W2", "Variable", {"shape": [m, m], "initializer": "glorot_uniform", "seed": 3}, None),
             ("b2", "Variable", {"shape": [m], "initializer": "glorot_uniform", "seed": 4}, None),
             ("mm1", "MatMul", {}, {"a": "x", "b": "W1:ref"}),
             ("add1", "Add", {}, {"x": "mm1", "y": "b1:ref"}),
             ("r1", "Relu", {}, {"features": "add1"}),
             ("mm2", "MatMul", {}, {"a": "r1", "b": "W2:ref"}),
             ("add2", "Add", {}, {"x": "mm2", "y": "b2:ref"}),
             ("r2", "Relu", {}, {"features": "add2"})]
    last = "r2"
    for i, (block, src) in enumerate(relu_readers):
        specs.append((f"extra{i}", block, {}, {"x": src, "y": last}))
        last = f"extra{i}"
    specs.append(("loss", "Mean", {}, {"input": last}))
    project = chain(*specs)
    project.pages[0].loss = "loss"
    return project


def _line(program, node):
    return next(li for li in _plan(program).source.splitlines() if f"_n = {program.step(node).index};" in li)


def test_dense_relu_layers_write_bias_and_relu_into_the_products_array(monkeypatch):
    """MatMul's result is a new array, and neither MatMul's vjp nor Add's reads it: the bias is
    added into it, and Relu (through its forward's out= variant) writes there too; Relu's vjp
    writes its gradient into its cotangent's array. The bits are the plain path's."""
    feeds = {"x": RNG.normal(size=(64, 96)).astype(np.float32)}
    keep = feeds["x"].copy()
    program = _check(monkeypatch, _relu_layers(), feeds, target="loss")
    mm1, add1 = program.step("mm1").outputs[0], program.step("add1").outputs[0]
    assert f"out=s{mm1})" in _line(program, "add1")
    assert f"out=s{add1})" in _line(program, "r1")
    assert "out=" not in _line(program, "mm2")  # a product is never written into its operand
    names = {getattr(v, "__qualname__", "") for v in _plan(program).fn.__globals__.values()}
    assert {"Relu.forward_with_out", "Relu.vjp_into_g"} <= names
    assert feeds["x"].tobytes() == keep.tobytes()


@pytest.mark.parametrize("reader", ["add1", "r1"])
def test_a_relu_input_or_output_read_again_is_not_overwritten(monkeypatch, reader):
    """A Multiply reading add1 (or r1) after the layers, whose vjp reads that value: nothing
    writes into it (with add1 read again, Relu makes a new array)."""
    feeds = {"x": RNG.normal(size=(64, 96)).astype(np.float32)}
    program = _check(monkeypatch, _relu_layers(relu_readers=[("Multiply", reader)]), feeds, target="loss")
    assert f"out=s{program.step(reader).outputs[0]})" not in _plan(program).source
    if reader == "add1":
        assert "out=" not in _line(program, "r1")


def test_feeds_variables_and_constants_are_never_written(monkeypatch):
    project = chain(("x", "Placeholder", {"shape": [N]}, None),
                    ("W", "Variable", {"shape": [N], "initializer": "random_normal", "seed": 3}, None),
                    ("k", "Const", {"value": np.full(N, 0.5, np.float32).tolist()}, None),
                    ("a", "Add", {}, {"x": "x", "y": "W"}),
                    ("b", "Multiply", {}, {"x": "k", "y": "W"}),
                    ("e", "Exp", {}, {"x": "a"}),
                    ("d", "RealDiv", {}, {"x": "e", "y": "b"}),
                    ("loss", "Sum", {}, {"input": "d"}))
    feeds = _feeds("x")
    _switch(monkeypatch, True)
    program = compile_project(project)
    w_before = np.array(program.variable_values["W"], copy=True)
    x_before = feeds["x"].copy()
    for record in (False, False, True, False):
        run(program, feeds, target="loss", record=record)
    assert feeds["x"].tobytes() == x_before.tobytes()
    assert program.variable_values["W"].tobytes() == w_before.tobytes()
    _check(monkeypatch, project, feeds, target="loss")


def test_a_product_only_a_full_sum_reads_is_summed_from_its_factors(monkeypatch):
    project = chain(("x", "Placeholder", {"shape": [N]}, None),
                    ("w", "Placeholder", {"shape": [N]}, None),
                    ("e", "Exp", {}, {"x": "x"}),
                    ("p", "Multiply", {}, {"x": "e", "y": "w"}),
                    ("loss", "Sum", {}, {"input": "p"}))
    program = _check(monkeypatch, project, _feeds("x", "w"), target="loss", wrt=["x", "w"])
    source = _plan(program).source
    assert f"f{program.step('loss').index}p(" in source
    # fetched, or read by another block: written out as before
    for extra in ({"fetch": ["p"]},):
        _switch(monkeypatch, True)
        program = compile_project(project)
        run(program, _feeds("x", "w"), target="loss", wrt=["x"], record=False, **extra)
        assert f"f{program.step('loss').index}p(" not in _plan(program).source


def test_a_product_with_a_second_reader_is_written_out(monkeypatch):
    project = chain(("x", "Placeholder", {"shape": [N]}, None),
                    ("w", "Placeholder", {"shape": [N]}, None),
                    ("p", "Multiply", {}, {"x": "x", "y": "w"}),
                    ("s", "Sum", {}, {"input": "p"}),
                    ("t", "Tanh", {}, {"x": "p"}),
                    ("u", "Sum", {}, {"input": "t"}),
                    ("loss", "Add", {}, {"x": "s", "y": "u"}))
    program = _check(monkeypatch, project, _feeds("x", "w"), target="loss", wrt=["x"])
    assert "p(" not in _plan(program).source.replace("_keep(", "")


# ------------------------------------------------------------------------------------ backward


def test_softmax_of_elementary_blocks_writes_its_gradients_in_place(monkeypatch):
    project = _elementary_softmax(N)
    feeds = _feeds("x", "w")
    program = _check(monkeypatch, project, feeds, target="loss", wrt=["x", "w"])
    plan = _plan(program)
    ns = plan.fn.__globals__
    bound = {getattr(v, "__qualname__", "") for k, v in ns.items() if k.startswith("b")}
    assert {"RealDiv.vjp_into_g", "_exp_vjp_into_g"} <= bound
    # with np.dot's sums: within rounding of the plain path
    _, dotted = _runs(monkeypatch, True, project, feeds, dot=True, target="loss", wrt=["x", "w"])
    _, plain = _runs(monkeypatch, False, project, feeds, target="loss", wrt=["x", "w"])
    for (fv, _, fw), (pv, _, pw) in zip(dotted, plain):
        assert fv[("loss", "output")].tobytes() == pv[("loss", "output")].tobytes()
        for k in pw:
            np.testing.assert_allclose(fw[k], pw[k], rtol=1e-5, atol=1e-9)


def test_a_gradient_returned_by_a_gradients_block_is_not_written_into(monkeypatch):
    """xs = [h, x] with h = exp(x): h's gradient is an output of the Gradients block and is
    also what Exp's vjp reads to reach x; it must not be scaled in place."""
    project = chain(("x", "Placeholder", {"shape": [N]}, None),
                    ("w", "Placeholder", {"shape": [N]}, None),
                    ("h", "Exp", {}, {"x": "x"}),
                    ("p", "Multiply", {}, {"x": "h", "y": "w"}),
                    ("y", "Sum", {}, {"input": "p"}),
                    ("g", "Gradients", {}, {"ys[0]": "y", "xs[0]": "h", "xs[1]": "x"}),
                    ("a", "Add", {}, {"x": "g:dx[0]", "y": "g:dx[1]"}),
                    ("loss", "Sum", {}, {"input": "a"}))
    feeds = _feeds("x", "w")
    program = _check(monkeypatch, project, feeds, fetch=["g:dx[0]", "g:dx[1]"])
    res = run(program, feeds, fetch=["g:dx[0]", "g:dx[1]"], record=False)
    assert res.value("g", "dx[0]").tobytes() == feeds["w"].tobytes()
    np.testing.assert_allclose(res.value("g", "dx[1]"), feeds["w"] * np.exp(feeds["x"]), rtol=1e-6)


def test_a_gradient_summed_over_wires_then_scaled_in_place(monkeypatch):
    """x feeds three blocks and Exp's vjp scales the sum in place."""
    project = chain(("x", "Placeholder", {"shape": [N]}, None),
                    ("e", "Exp", {}, {"x": "x"}),
                    ("t", "Tanh", {}, {"x": "x"}),
                    ("m", "Multiply", {}, {"x": "e", "y": "t"}),
                    ("a", "Add", {}, {"x": "m", "y": "x"}),
                    ("f", "Exp", {}, {"x": "a"}),
                    ("loss", "Sum", {}, {"input": "f"}))
    _check(monkeypatch, project, {"x": RNG.normal(size=N).astype(np.float32) * 0.5}, target="loss", wrt=["x"])


def test_results_of_one_run_survive_the_next(monkeypatch):
    """Returned values and gradients are new arrays: another run, with other feeds, changes none."""
    project = chain(("x", "Placeholder", {"shape": [N]}, None),
                    ("w", "Placeholder", {"shape": [N]}, None),
                    ("s", "Subtract", {}, {"x": "x", "y": "w"}),
                    ("e", "Exp", {}, {"x": "s"}),
                    ("d", "RealDiv", {}, {"x": "e", "y": "w"}),
                    ("loss", "Sum", {}, {"input": "d"}))
    _switch(monkeypatch, True)
    monkeypatch.setattr(runtime, "KEEP_ARRAYS", True)
    program = compile_project(project)
    first = run(program, _feeds("x", "w"), target="loss", wrt=["x", "w"], record=False, fetch=["d"])
    kept = {k: np.array(v, copy=True) for k, v in {**first.values, **first.variable_grads}.items()}
    for _ in range(2):
        run(program, _feeds("x", "w"), target="loss", wrt=["x", "w"], record=False, fetch=["d"])
    for k, v in {**first.values, **first.variable_grads}.items():
        assert np.asarray(v).tobytes() == kept[k].tobytes(), k
    grads = list(first.variable_grads.values())
    assert not np.shares_memory(grads[0], grads[1])


# ---------------------------------------------------------------------------------- memory plan


def _elementary_softmax(n):
    return chain(("x", "Placeholder", {"shape": [n]}, None),
                 ("w", "Placeholder", {"shape": [n]}, None),
                 ("m", "Max", {}, {"input": "x"}),
                 ("sg", "StopGradient", {}, {"input": "m"}),
                 ("s", "Subtract", {}, {"x": "x", "y": "sg"}),
                 ("e", "Exp", {}, {"x": "s"}),
                 ("z", "Sum", {}, {"input": "e"}),
                 ("d", "RealDiv", {}, {"x": "e", "y": "z"}),
                 ("p", "Multiply", {}, {"x": "d", "y": "w"}),
                 ("loss", "Sum", {}, {"input": "p"}))


@pytest.mark.parametrize("on", [False, True])
def test_the_memory_plan_counts_what_the_run_makes(monkeypatch, on):
    """The walk's peak is an upper bound of what numpy allocates during the run (tracemalloc),
    and in place it counts three arrays fewer than the plain plan: the exp, the product and a
    gradient."""
    n = 200_000
    feeds = _feeds("x", "w", n=n)
    peaks = {}
    for flag in (on, not on):
        _switch(monkeypatch, flag)
        program = compile_project(_elementary_softmax(n))
        run(program, feeds, target="loss", wrt=["x"], record=False)
        plan = _plan(program)
        walk = plan.memory.walk_for(1 << 40, "test", 0, (((n,), (n,)),))
        with memory_traced():
            run(program, feeds, target="loss", wrt=["x"], record=False)
            _, made = tracemalloc.get_traced_memory()
        peaks[flag] = walk.peak - walk.resident
        # the tree's piece and the run's own small objects are not tensors the plan counts
        assert made <= peaks[flag] + fused._LEAF * 4 + (256 << 10), (flag, made, peaks[flag])
    assert peaks[False] - peaks[True] >= 2 * n * 4


def test_a_run_that_fits_only_in_place_is_not_refused(monkeypatch):
    n = 200_000
    feeds = _feeds("x", "w", n=n)
    _switch(monkeypatch, True)
    program = compile_project(_elementary_softmax(n))
    run(program, feeds, target="loss", wrt=["x"], record=False)
    walk = _plan(program).memory.walk_for(1 << 40, "test", 0, (((n,), (n,)),))
    run(program, feeds, target="loss", wrt=["x"], record=False, memory_budget=walk.peak + 1024)


# ------------------------------------------------------------------------------ random diagrams

_UNARY = ("Exp", "Negate", "Tanh", "Sigmoid", "StopGradient", "Square", "Relu")
_UNARY_PORT = {"StopGradient": "input", "Relu": "features"}
_BINARY = ("Add", "Subtract", "Multiply", "RealDiv")


def _random_page(seed, n):
    """A random diagram of elementwise blocks over two feeds, with full sums (of products too) and a
    broadcast scalar or two: every value may be read by several blocks, before or after others."""
    rng = np.random.default_rng(seed)
    specs = [("x", "Placeholder", {"shape": [n]}, None), ("w", "Placeholder", {"shape": [n]}, None)]
    full, scalars = ["x", "w"], []
    for i in range(int(rng.integers(6, 14))):
        nid = f"v{i}"
        kind = rng.random()
        if kind < 0.3:
            block = str(rng.choice(_UNARY))
            port = _UNARY_PORT.get(block, "x")
            specs.append((nid, block, {}, {port: str(rng.choice(full))}))
            full.append(nid)
        elif kind < 0.8:
            block = str(rng.choice(_BINARY))
            a = str(rng.choice(full))
            b = str(rng.choice(full + scalars)) if scalars and rng.random() < 0.3 else str(rng.choice(full))
            if rng.random() < 0.5:
                a, b = b, a
            if a in scalars and b in scalars:
                b = str(rng.choice(full))
            specs.append((nid, block, {}, {"x": a, "y": b}))
            full.append(nid)
        else:
            specs.append((nid, "Sum", {}, {"input": str(rng.choice(full[2:] or full))}))
            scalars.append(nid)
    # the loss: a sum of a product of the last value with w, plus every scalar
    specs.append(("p", "Multiply", {}, {"x": full[-1], "y": "w"}))
    specs.append(("loss0", "Sum", {}, {"input": "p"}))
    last = "loss0"
    for k, sc in enumerate(scalars):
        specs.append((f"acc{k}", "Add", {}, {"x": last, "y": sc}))
        last = f"acc{k}"
    fetch = [str(v) for v in rng.choice(full[2:], size=min(2, len(full) - 2), replace=False)] if rng.random() < 0.5 else []
    return chain(*specs), last, fetch


@pytest.mark.parametrize("seed", range(40))
def test_random_diagrams_give_the_plain_paths_bits(monkeypatch, seed):
    n = 40_000  # over the in-place and the fused sums' sizes
    project, loss, fetch = _random_page(seed, n)
    rng = np.random.default_rng(seed + 100)
    feeds = {"x": (rng.normal(size=n) * 0.3).astype(np.float32), "w": (rng.random(n) + 0.5).astype(np.float32)}
    keep = {k: v.copy() for k, v in feeds.items()}
    wrt = [["x"], ["x", "w"], ["w"]][seed % 3]
    with np.errstate(all="ignore"):
        _check(monkeypatch, project, feeds, target=loss, wrt=wrt, fetch=fetch, check_numerics=False)
    for k in feeds:
        assert feeds[k].tobytes() == keep[k].tobytes()
