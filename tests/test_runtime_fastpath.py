"""The runtime's fast paths (issue 18) give what the plain paths give, bit for bit, and the same
NaN/Inf reports."""
from __future__ import annotations

import numpy as np
import pytest

import blockflow.run.lower as lower
import blockflow.run.runtime as runtime
import blockflow_blocks.fused as fused
from blockflow.compile.compiler import compile_project
from blockflow.errors import NumericsError
from blockflow.run.runtime import all_finite, run

from diagrams import chain

RNG = np.random.default_rng(18)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("size", [0, 1, 8, 16383, 16384, 100_000, (1 << 18) + 1, 700_000])
def test_all_finite_agrees_with_isfinite(dtype, size):
    with np.errstate(over="ignore"):  # as the runtime's callers: a sum may overflow
        _all_finite_cases(dtype, size)


def _all_finite_cases(dtype, size):
    v = RNG.normal(size=size).astype(dtype)
    assert all_finite(v)
    if size:
        big = np.full(size, np.finfo(dtype).max, dtype)  # finite, but its sum overflows
        assert all_finite(big)
        for bad in (np.nan, np.inf, -np.inf):
            for at in {0, size // 2, size - 1}:
                w = v.copy()
                w[at] = bad
                assert not all_finite(w), (bad, at)
                assert not all_finite(w.reshape(1, -1)[:, ::-1]), (bad, at)  # a strided view
                assert not all_finite(np.asfortranarray(np.stack([w, v]).T)), (bad, at)


def test_all_finite_of_non_floats_and_scalars():
    assert all_finite(np.arange(5))
    assert all_finite(np.float32(3.0)) and not all_finite(np.float32(np.nan))
    assert all_finite(2.5) and not all_finite(float("inf"))


def _elementwise_page(n):
    """Every block whose forward is a bound ufunc, on n values, with a broadcast and a constant."""
    return chain(("x", "Placeholder", {"shape": [n]}, None),
                 ("b", "Placeholder", {"shape": [1]}, None),
                 ("t", "Tanh", {}, {"x": "x"}),
                 ("m", "Multiply", {}, {"x": "t", "y": np.float32(1.5)}),
                 ("a", "Add", {}, {"x": "m", "y": "b"}),
                 ("s", "Subtract", {}, {"x": "a", "y": "x"}),
                 ("e", "Exp", {}, {"x": "s"}),
                 ("d", "RealDiv", {}, {"x": "e", "y": "a"}),
                 ("n", "Negate", {}, {"x": "d"}),
                 ("sg", "Sigmoid", {}, {"x": "n"}),
                 ("loss", "Sum", {}, {"input": "sg"}))


def _results(monkeypatch, fast, project, feeds, **kw):
    for switch in ("BIND_UFUNCS", "DIRECT_KEYWORDS", "REUSE_BUFFERS", "ADD_IN_PLACE", "VJP_INTO_G", "FORWARD_IN_PLACE",
                   "SUM_OF_PRODUCTS", "BOUND_SEED", "FOLD_COTANGENTS"):
        monkeypatch.setattr(lower, switch, fast)
    monkeypatch.setattr(fused, "FUSE_PRODUCT_SUMS", fast)
    monkeypatch.setattr(fused, "DOT_GRADIENT_SUMS", False)  # changes the bits: tests/test_fused_grads.py
    monkeypatch.setattr(runtime, "KEEP_ARRAYS", fast)
    program = compile_project(project)  # a new program: plans are cached per program
    out = []
    for record in (True, False, False):  # the second fast run writes into the first one's buffers
        res = run(program, feeds, target="loss", record=record, **kw)
        out.append((res.values, res.grads, res.variable_grads))
    return program, out


def _assert_same_bits(fast, plain):
    """The runs' values, gradients and Variable gradients: the same keys, the same bytes."""
    for (fv, fg, fw), (pv, pg, pw) in zip(fast, plain):
        for f, p in ((fv, pv), (fg, pg), (fw, pw)):
            assert f.keys() == p.keys()
            for k in f:
                assert np.asarray(f[k]).tobytes() == np.asarray(p[k]).tobytes(), k


@pytest.mark.parametrize("n", [8, 50_000, 100_000])
def test_bound_ufuncs_give_bit_identical_values_and_gradients(monkeypatch, n):
    feeds = {"x": RNG.normal(size=n).astype(np.float32), "b": np.array([2.0], np.float32)}
    project = _elementwise_page(n)
    program, fast = _results(monkeypatch, True, project, feeds, wrt=["x", "b"])
    plans = program.cache("plans").values()
    ns = next(iter(plans)).fn.__globals__
    assert ns[f"f{program.step('a').index}"] is np.add and ns[f"f{program.step('t').index}"] is np.tanh
    fast_plan = [p for p in plans if not p.record][0]
    # t, m, s, d: not n (Sigmoid, not a ufunc, reads it); a is written into m's array and e into
    # s's (nothing reads m or s again: overwrite.in_place_slots)
    assert fast_plan.n_buffers == (4 if n >= lower.REUSE_MIN_SIZE else 0)
    if n >= lower.IN_PLACE_MIN_SIZE:
        m, s = program.step("m").outputs[0], program.step("s").outputs[0]
        assert f"out=s{m})" in fast_plan.source and f"out=s{s})" in fast_plan.source
    _, plain = _results(monkeypatch, False, project, feeds, wrt=["x", "b"])
    _assert_same_bits(fast, plain)


def test_a_nan_in_a_large_bound_ufunc_is_named_as_before(monkeypatch):
    # 50,000 values: the check takes the isfinite path; RealDiv's 0/0 is the first NaN
    x = RNG.normal(size=50_000).astype(np.float32)
    x[123] = 0.0
    project = chain(("x", "Placeholder", {"shape": [50_000]}, None),
                    ("d", "RealDiv", {}, {"x": "x", "y": "x"}),
                    ("e", "Exp", {}, {"x": "d"}),
                    ("loss", "Sum", {}, {"input": "e"}))
    messages = []
    for bind in (True, False):
        monkeypatch.setattr(lower, "BIND_UFUNCS", bind)
        program = compile_project(project)
        for record in (True, False):
            with pytest.raises(NumericsError) as info:
                run(program, {"x": x}, target="loss", wrt=["x"], record=record)
            messages.append((info.value.node, info.value.phase, str(info.value)))
    assert messages[0][0].startswith("main/d ") and "NaN (1 of 50000 values)" in messages[0][2]
    assert len(set(messages)) == 1


def test_attrs_written_as_keywords_give_bit_identical_results(monkeypatch):
    """Blocks with attrs (MatMul's transposes, Sum's keep_dims, the Placeholder's dtype and shape)
    and vjps given ``needs``: the same numbers with the attrs in a functools.partial."""
    project = chain(("x", "Placeholder", {"shape": [6, 4]}, None),
                    ("W", "Placeholder", {"shape": [5, 4]}, None),
                    ("m", "MatMul", {"transpose_b": True}, {"a": "x", "b": "W"}),
                    ("r", "Relu", {}, {"features": "m"}),
                    ("s", "Sum", {"keep_dims": True}, {"input": "r", "axis": np.int32(1)}),
                    ("q", "Multiply", {}, {"x": "s", "y": "r"}),
                    ("loss", "Mean", {}, {"input": "q"}))
    feeds = {"x": RNG.normal(size=(6, 4)).astype(np.float32), "W": RNG.normal(size=(5, 4)).astype(np.float32)}
    program, fast = _results(monkeypatch, True, project, feeds, wrt=["x", "W"])
    source = next(iter(program.cache("plans").values())).source
    assert "transpose_b=" in source and "needs=" in source and "partial" not in source
    _, plain = _results(monkeypatch, False, project, feeds, wrt=["x", "W"])
    _assert_same_bits(fast, plain)


def test_kept_buffers_never_reach_the_caller(monkeypatch):
    """A second run writes into the arrays the first one kept; nothing the first returned changes,
    and no returned array is a kept one."""
    monkeypatch.setattr(runtime, "KEEP_ARRAYS", True)
    n = 100_000
    program = compile_project(_elementwise_page(n))
    first_feeds = {"x": RNG.normal(size=n).astype(np.float32), "b": np.array([2.0], np.float32)}
    first = run(program, first_feeds, target="loss", wrt=["x", "b"], record=False, fetch=["sg", "e"])
    kept = {k: np.array(v, copy=True) for k, v in {**first.values, **first.variable_grads}.items()}
    second = run(program, {"x": RNG.normal(size=n).astype(np.float32), "b": np.array([-1.0], np.float32)},
                 target="loss", wrt=["x", "b"], record=False, fetch=["sg", "e"])
    for k, v in {**first.values, **first.variable_grads}.items():
        assert np.asarray(v).tobytes() == kept[k].tobytes(), k
    plan = [p for p in program.cache("plans").values() if p.n_buffers][0]
    buffers = [b for bufs in plan.buffers for b in bufs if b is not None]
    assert buffers
    returned = [np.asarray(v) for r in (first, second) for v in (*r.values.values(), *r.variable_grads.values())]
    assert not any(np.shares_memory(b, v) for b in buffers for v in returned)


def test_a_large_gradient_sum_is_added_in_place_with_the_same_result(monkeypatch):
    """x feeds three blocks: its cotangent is summed twice, the second time into the first sum's
    array; a broadcast part (Sum's view) is added as before."""
    n = 100_000
    project = chain(("x", "Placeholder", {"shape": [n]}, None),
                    ("e", "Exp", {}, {"x": "x"}),
                    ("t", "Tanh", {}, {"x": "x"}),
                    ("m", "Multiply", {}, {"x": "e", "y": "t"}),
                    ("a", "Add", {}, {"x": "m", "y": "x"}),
                    ("loss", "Sum", {}, {"input": "a"}))
    feeds = {"x": RNG.normal(size=n).astype(np.float32)}
    program, fast = _results(monkeypatch, True, project, feeds, wrt=["x"])
    source = [p for p in program.cache("plans").values() if not p.record][0].source
    assert "_iadd(" in source
    _, plain = _results(monkeypatch, False, project, feeds, wrt=["x"])
    for (_, _, fw), (_, _, pw) in zip(fast, plain):
        assert fw["x"].tobytes() == pw["x"].tobytes()


def _vjp_parts(name, *args, **kw):
    from blockflow.registry import default_registry
    spec = default_registry()[name]
    assert getattr(spec.vjp, "fresh_result", False), name
    return spec, [p for p in spec.vjp(*args, **kw) if p is not None]


@pytest.mark.parametrize("case", ["Exp", "Tanh", "Sigmoid", "Softplus", "Relu", "Softmax", "Multiply",
                                  "RealDiv", "MatMul"])
def test_vjps_marked_fresh_return_new_arrays_one_per_input(case):
    """What lower._accumulate relies on to add into a vjp's result in place."""
    x = RNG.normal(size=(4, 5)).astype(np.float32)
    g = RNG.normal(size=(4, 5)).astype(np.float32)
    if case in ("Multiply", "RealDiv"):
        from blockflow.registry import default_registry
        for y in (x, RNG.normal(size=(4, 5)).astype(np.float32) + 3, np.float32(2.0)):
            out = default_registry()[case].forward(x, y)
            spec, parts = _vjp_parts(case, g, out, x, y, needs=(True, np.ndim(y) > 0))
            _assert_fresh(parts, [g, out, x, y])
        return
    if case == "MatMul":
        w = RNG.normal(size=(5, 3)).astype(np.float32)
        gm = RNG.normal(size=(4, 3)).astype(np.float32)
        spec, parts = _vjp_parts(case, gm, x @ w, x, w, transpose_a=False, transpose_b=False, needs=(True, True))
        _assert_fresh(parts, [gm, x, w])
        return
    from blockflow.registry import default_registry
    out = default_registry()[case].forward(x)
    spec, parts = _vjp_parts(case, g, out, x)
    _assert_fresh(parts, [g, out, x])


def _assert_fresh(parts, inputs):
    arrays = [p for p in parts if isinstance(p, np.ndarray)]
    for i, p in enumerate(arrays):
        assert not any(np.shares_memory(p, a) for a in inputs if isinstance(a, np.ndarray))
        assert not any(np.shares_memory(p, q) for q in arrays[i + 1:])


def test_a_plan_keeps_its_arrays_once_two_runs_in_a_row_fault(monkeypatch):
    n = 100_000
    faults = iter(range(0, 10**9, 10**6))  # every run "faults" a million pages
    monkeypatch.setattr(runtime, "_faults", lambda: next(faults))
    program = compile_project(_elementwise_page(n))
    feeds = {"x": RNG.normal(size=n).astype(np.float32), "b": np.array([2.0], np.float32)}
    results = []
    for _ in range(6):  # two runs to warm up, two faulting, then two that keep
        results.append(run(program, feeds, target="loss", wrt=["x"], record=False).variable_grads["x"])
    plan = next(iter(program.cache("plans").values()))
    assert plan.keep_arrays and plan.buffers and all(isinstance(b, np.ndarray) for b in plan.buffers[0])
    assert len({r.tobytes() for r in results}) == 1


def test_a_plan_that_does_not_fault_keeps_nothing():
    n = 100_000
    program = compile_project(_elementwise_page(n))
    plan = None
    for _ in range(3):
        run(program, {"x": RNG.normal(size=n).astype(np.float32), "b": np.array([2.0], np.float32)},
            target="loss", wrt=["x"], record=False)
        plan = next(iter(program.cache("plans").values()))
        plan.count_faults(0)
    assert plan.n_buffers and not plan.keep_arrays and not plan.buffers


def test_a_repeated_run_finds_its_plan_and_checks_what_changes():
    """A kind of run seen before skips resolving its target and wrt (runtime._plan_for), but
    what it is given each time (feeds, variables, a gradient seed's shape) is still checked,
    and a wrong target or wrt is refused every time."""
    from blockflow.errors import FeedError, RunError
    program = compile_project(_elementwise_page(50))
    feeds = {"x": RNG.normal(size=50).astype(np.float32), "b": np.float32([0.5])}
    first = run(program, feeds, target="loss", wrt=frozenset({"x"}), record=False)
    again = run(program, feeds, target="loss", wrt=frozenset({"x"}), record=False)
    assert len(program.cache("runs")) == 1 and len(program.cache("plans")) == 1
    np.testing.assert_array_equal(first.variable_grads["x"], again.variable_grads["x"])
    for _ in range(2):
        with pytest.raises(RunError, match="not on page"):
            run(program, feeds, target="loss", wrt=frozenset({"nope"}), record=False)
        with pytest.raises(RunError, match="not a scalar"):
            run(program, feeds, target="e", record=False)
        with pytest.raises(FeedError, match="'z'"):
            run(program, {**feeds, "z": 1.0}, target="loss", wrt=frozenset({"x"}), record=False)
        with pytest.raises(RunError, match="gradient seed has shape"):
            run(program, feeds, target="e", grad_seed=np.ones(3, np.float32), record=False)
    seeded = run(program, feeds, target="e", grad_seed=np.ones(50, np.float32), wrt=frozenset({"x"}), record=False)
    assert seeded.variable_grads["x"].shape == (50,)
    bad = {**feeds, "x": np.full(50, np.nan, np.float32)}
    with pytest.raises(NumericsError):
        run(program, bad, target="loss", wrt=frozenset({"x"}), record=False)


def test_random_streams_are_pinned():
    """The streams, pinned so that saved runs stay reproducible. Step 0 draws what it drew before
    steps became stretches of one stream (run/streams.py); the step-12 numbers are the stretches'."""
    from blockflow.run.runtime import stream_generator, stream_hash
    assert stream_generator(stream_hash("h0"), 1, 0, 0).random(3).tolist() == [
        0.2116663829111527, 0.5882094884439646, 0.2943727913227213]
    assert stream_generator(stream_hash("layer/é"), 7, 12, 99).integers(0, 1 << 30, 3).tolist() == [
        418493263, 435113382, 565142353]


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_sigmoid_capped_after_gives_the_bits_of_capping_first(dtype):
    """Sigmoid caps exp's argument after the fact (a comparison pass instead of np.minimum's):
    the same bits as 1 / (1 + exp(min(-x, cap))), with NaN, infinities, the cap and numbers."""
    from blocks.math_unary import _EXP_ARG_MAX, _sigmoid

    def capped_first(x):
        e = np.exp(np.minimum(np.negative(x), _EXP_ARG_MAX[np.dtype(dtype)]))
        return np.reciprocal(e + np.dtype(dtype).type(1))

    cap = float(_EXP_ARG_MAX[np.dtype(dtype)])
    edges = [np.nan, np.inf, -np.inf, 0.0, -0.0, -cap, -cap * 1.0001, -cap * 0.9999, cap, 1e4, -1e4]
    for n in (0, 1, 5, 64, 1000, 50_000):
        for scale in (1, 30, 300):
            x = (RNG.normal(size=n) * scale).astype(dtype)
            x[: min(n, len(edges))] = np.array(edges[:n], dtype)
            np.testing.assert_array_equal(_sigmoid(x), capped_first(x))
            np.testing.assert_array_equal(_sigmoid(x[::-2]), capped_first(x[::-2]))
    for v in (0.3, -1e4, np.nan):
        number = np.dtype(dtype).type(v)
        assert repr(_sigmoid(number)) == repr(capped_first(number))
        np.testing.assert_array_equal(_sigmoid(np.asarray(number)), capped_first(np.asarray(number)))


@pytest.mark.parametrize("made_once", [True, False])
def test_a_run_ignores_numpy_errors_and_gives_the_callers_state_back(monkeypatch, made_once):
    """A run sets numpy's "ignore" error state made once (numpy 2's context variable), or enters
    np.errstate where that is missing (numpy 1.x): no warning or FloatingPointError from a block
    that overflows, the NaN/Inf check still names it, and the caller's state is back after."""
    import warnings
    if not made_once:
        monkeypatch.setattr(runtime, "_ERRSTATE", None)
    program = compile_project(_elementwise_page(8))
    feeds = {"x": np.full(8, 100.0, np.float32), "b": np.float32([0.5])}
    before = np.geterr()
    with np.errstate(all="raise"), warnings.catch_warnings():
        warnings.simplefilter("error")
        inside = np.geterr()
        with pytest.raises(NumericsError, match=r"\(Exp\)"):
            run(program, {"x": np.full(8, 100.0, np.float32), "b": np.float32([1e30])}, target="loss",
                wrt=frozenset({"x"}), record=False)
        assert np.geterr() == inside
        ok = run(program, {**feeds, "x": np.zeros(8, np.float32)}, target="loss", wrt=frozenset({"x"}),
                 record=False)
        assert np.isfinite(ok.variable_grads["x"]).all() and np.geterr() == inside
    assert np.geterr() == before


def test_a_run_sees_variables_changed_between_runs():
    """A plan keeps the list of Variable values it was given while VariableValues.version stays:
    a value stored, reset to pending or removed in between is what the next run reads."""
    from diagrams import chain as make
    project = make(("x", "Placeholder", {"shape": [3]}, None),
                   ("W", "Variable", {"shape": [3], "initializer": "ones"}, None),
                   ("m", "Multiply", {}, {"x": "x", "y": "W:ref"}),
                   ("loss", "Sum", {}, {"input": "m"}))
    project.pages[0].loss = "loss"
    program = compile_project(project)
    feeds = {"x": np.float32([1, 2, 3])}
    loss = lambda: float(run(program, feeds, fetch=["loss"], record=False).value("loss"))  # noqa: E731
    assert loss() == 6.0 and loss() == 6.0
    program.variable_values["W"] = np.float32([2, 2, 2])
    assert loss() == 12.0
    spec = program.step("W").spec
    program.variable_values.add_pending("W", spec, {**program.step("W").attrs, "initializer": "zeros"},
                                        program.slot(program.slot_of("W", "ref")).type, "W")
    assert loss() == 0.0


def test_softplus_of_float32_is_within_half_an_ulp_and_as_logaddexp_at_the_edges():
    """Softplus on float32 works in float64 and rounds once (3x faster than np.logaddexp's scalar
    loop, and more accurate): within half an ulp of the float64 value, several pieces long,
    and the same as before at NaN, the infinities, 0 and far out; other dtypes, numbers and
    strided views keep np.logaddexp."""
    from blocks.nn_activations import _SOFTPLUS_PIECE, Softplus
    forward = Softplus.forward
    for n in (1, 7, _SOFTPLUS_PIECE - 1, _SOFTPLUS_PIECE * 2 + 3):
        for scale in (1.0, 8.0, 60.0):
            x = (RNG.normal(size=n) * scale).astype(np.float32)
            got = forward(x)
            assert got.dtype == np.float32 and got.shape == x.shape and got.flags.c_contiguous
            exact = np.logaddexp(x.astype(np.float64), 0.0)
            # half an ulp of the float32 result, and the exact value's own float64 rounding
            assert (np.abs(got - exact) <= np.spacing(got).astype(np.float64) * 0.5 + np.abs(exact) * 1e-15).all()
            np.testing.assert_allclose(got, np.logaddexp(x, np.float32(0)), rtol=4e-7, atol=1e-44)
    edges = np.float32([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e30, -1e30, 88, -88, -104, -150, 1e-30, 17.0])
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(forward(edges), np.logaddexp(edges, np.float32(0)))
    grid = edges.reshape(1, -1).repeat(3, 0)
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(forward(grid[:, ::2]), np.logaddexp(grid[:, ::2], np.float32(0)))
        for v in (np.float32(0.5), np.float64(0.5), np.float16([0.5, -3.0]), np.float64([0.5, 1e3])):
            assert repr(forward(v)) == repr(np.logaddexp(v, np.asarray(0, np.asarray(v).dtype)))


def test_all_finite_many_agrees_with_all_finite():
    from blockflow.run.numerics import all_finite_many
    arrays = [RNG.normal(size=s).astype(d) for s, d in (((3, 4), "float32"), (7, "float64"), (5, "float16"),
                                                        ((), "float32"), (0, "float32"), (4, "int32"))]
    arrays += [np.float32(2.5), 3.0, np.asfortranarray(RNG.normal(size=(3, 5)))]
    assert all_finite_many(arrays[:4], arrays[4:]) and all_finite_many([], [])
    for i, a in enumerate(arrays):
        for bad in (np.nan, np.inf, -np.inf):
            if np.asarray(a).dtype.kind != "f" or np.size(a) == 0:
                continue
            if isinstance(a, np.ndarray):
                b = np.array(a, copy=True, order="K")
                b[(-1,) * b.ndim] = bad
            else:
                b = type(a)(bad)
            changed = arrays[:i] + [b] + arrays[i + 1:]
            assert not all_finite_many(changed[:3], changed[3:]), (i, bad)


def test_a_transposed_product_is_np_matmul_of_the_views_bit_for_bit():
    """MatMul asks numpy for a transposed product as written (``a @ bᵀ``, ``g @ bᵀ``), whatever the
    BLAS kernel would do faster with another layout: another layout rounds differently on some
    CPUs (docs/performance.md, "A product's layout, tried and removed")."""
    import blocks.math_matmul as mm
    a = RNG.normal(size=(64, 256)).astype(np.float32)
    w = RNG.normal(size=(300, 256)).astype(np.float32)
    g = RNG.normal(size=(64, 300)).astype(np.float32)
    fwd = mm.MatMul.forward(a, w, transpose_a=False, transpose_b=True)
    assert fwd.tobytes() == np.matmul(a, w.T).tobytes()
    wt = w.T.copy()
    ga, gb = mm.MatMul.vjp(g, fwd, a, wt, transpose_a=False, transpose_b=False, needs=(True, True))
    assert ga.tobytes() == np.matmul(g, wt.T).tobytes()
    assert gb.tobytes() == np.matmul(a.T, g).tobytes()


def test_matmul_without_transposes_calls_np_matmul_with_the_same_bits(monkeypatch):
    """forward.direct: a MatMul without transposes is bound to np.matmul itself; the others keep
    the block's forward; the values and gradients are the bits of the block's own forward."""
    project = chain(("x", "Placeholder", {"shape": [5, 7]}, None),
                    ("W", "Variable", {"shape": [7, 6], "initializer": "glorot_uniform", "seed": 1}, None),
                    ("V", "Variable", {"shape": [4, 6], "initializer": "glorot_uniform", "seed": 2}, None),
                    ("plain", "MatMul", {}, {"a": "x", "b": "W:ref"}),
                    ("tb", "MatMul", {"transpose_b": True}, {"a": "plain", "b": "V:ref"}),
                    ("ta", "MatMul", {"transpose_a": True}, {"a": "tb", "b": "tb"}),
                    ("loss", "Sum", {}, {"input": "ta"}))
    project.pages[0].loss = "loss"
    feeds = {"x": RNG.normal(size=(5, 7)).astype(np.float32)}
    program, fast = _results(monkeypatch, True, project, feeds)
    ns = next(iter(program.cache("plans").values())).fn.__globals__
    assert ns[f"f{program.step('plain').index}"] is np.matmul
    assert ns[f"f{program.step('tb').index}"] is not np.matmul and ns[f"f{program.step('ta').index}"] is not np.matmul
    _, plain = _results(monkeypatch, False, project, feeds)
    _assert_same_bits(fast, plain)


@pytest.mark.parametrize("made_once", [True, False])
def test_ignoring_fp_errors_is_np_errstate_ignore_and_restores_the_callers_state(monkeypatch, made_once):
    """numerics.ignoring_fp_errors: numpy's context variable set to a state made once, or
    np.errstate on numpy 1.x; inside, overflow and invalid warn nothing, even under the caller's
    'raise'; after, the caller's state is back, also when the block raised."""
    import warnings

    from blockflow.run import numerics
    if not made_once:
        monkeypatch.setattr(numerics, "ERRSTATE", None)
    with np.errstate(all="raise"), warnings.catch_warnings():
        warnings.simplefilter("error")
        outside = np.geterr()
        with numerics.ignoring_fp_errors():
            assert set(np.geterr().values()) == {"ignore"}
            big = np.float32([3e38]) * np.float32(10)
            assert np.isinf(big).all() and np.isnan(np.float32([0]) / np.float32(0)).all()
        assert np.geterr() == outside
        with pytest.raises(KeyError), numerics.ignoring_fp_errors():
            raise KeyError("inside")
        assert np.geterr() == outside


def _in_own_context(fn):
    """``fn()`` in a copy of this context: numpy 2's error state and buffer size set inside stay
    there (numpy 1.x keeps the buffer size per thread: set it back)."""
    import contextvars

    def call():
        old = np.getbufsize()
        try:
            return fn()
        finally:
            np.setbufsize(old)
    return contextvars.copy_context().run(call)


@pytest.mark.parametrize("made_once", [True, False])
def test_ignoring_fp_errors_keeps_the_callers_buffer_size_and_callback(monkeypatch, made_once):
    """np.errstate(all="ignore") changes the error modes only: the caller's buffer size (which
    decides how numpy sums a cast reduction, e.g. np.mean of float16, and so its bits) and error
    callback stay. ignoring_fp_errors gives the same state, not the one numerics was imported in."""
    from blockflow.run import numerics
    if not made_once:
        monkeypatch.setattr(numerics, "ERRSTATE", None)

    def callback(kind, flag):
        pass

    def states():
        np.setbufsize(1 << 16)
        with np.errstate(call=callback):
            with np.errstate(all="ignore"):
                expected = (np.getbufsize(), np.geterrcall(), np.geterr())
            with numerics.ignoring_fp_errors():
                got = (np.getbufsize(), np.geterrcall(), np.geterr())
            with numerics.ignoring_fp_errors(), numerics.ignoring_fp_errors():     # nested: the same
                nested = (np.getbufsize(), np.geterrcall(), np.geterr())
        return expected, got, nested
    expected, got, nested = _in_own_context(states)
    assert got == expected == nested
    assert expected[:2] == (1 << 16, callback)


def test_a_run_keeps_the_callers_buffer_size(monkeypatch):
    """A run's "ignore" error state is the caller's with the errors ignored, as np.errstate's:
    the buffer size stays, on the general path and on the one for a kind of run seen before."""
    from blockflow.run import numerics
    seen = []

    def what(v):
        seen.append(np.getbufsize())
        return numerics.what_is_not_finite(v)
    monkeypatch.setattr(runtime, "_what", what)
    program = compile_project(_elementwise_page(8))
    overflowing = {"x": np.full(8, 100.0, np.float32), "b": np.float32([1e30])}

    def two_runs():
        np.setbufsize(1 << 16)
        for _ in range(2):
            with pytest.raises(NumericsError, match=r"\(Exp\)"):
                run(program, overflowing, target="loss", wrt=frozenset({"x"}), record=False)
    rerun = runtime._rerun
    reruns = []
    monkeypatch.setattr(runtime, "_rerun", lambda *a: reruns.append(1) or rerun(*a))
    _in_own_context(two_runs)
    assert reruns and len(seen) >= 2 and set(seen) == {1 << 16}
