"""A hostile audit of the runtime's fast paths (issue 18): each promises what the plain path gave
(the same bits, or within documented rounding), the same error messages, and never to write
into an array a caller or another block still reads. Each test here tries to break one."""
from __future__ import annotations

import hashlib
import os
import threading

import numpy as np
import pytest

import blockflow.run.lower as lower
import blockflow.run.runtime as runtime
import blockflow_blocks.fused as fused
from blockflow.compile.compiler import compile_project
from blockflow.errors import NumericsError, RunError
from blockflow.run.numerics import all_finite, all_finite_many
from blockflow.run.runtime import run

from diagrams import chain

RNG = np.random.default_rng(1918)
F32 = np.float32
FAST_SWITCHES = ("BIND_UFUNCS", "DIRECT_KEYWORDS", "REUSE_BUFFERS", "ADD_IN_PLACE", "VJP_INTO_G",
                 "FORWARD_IN_PLACE", "SUM_OF_PRODUCTS", "BOUND_SEED", "SHARE_GRADIENTS", "CERTIFY_PRODUCTS",
                 "FOLD_COTANGENTS")


def _plain(monkeypatch):
    """Every fast path of issue 18 off."""
    for name in FAST_SWITCHES:
        monkeypatch.setattr(lower, name, False)
    monkeypatch.setattr(fused, "FUSE_PRODUCT_SUMS", False)
    monkeypatch.setattr(runtime, "KEEP_ARRAYS", False)


def _outcome(fn):
    """A run's arrays as bytes, or its error's type and message."""
    try:
        res = fn()
    except Exception as exc:  # noqa: BLE001 - the message is what is compared
        return type(exc).__name__, str(exc)
    return ({k: (np.asarray(v).dtype.str, np.asarray(v).shape, np.asarray(v).tobytes()) for k, v in res.values.items()},
            {k: (np.asarray(v).dtype.str, np.asarray(v).tobytes()) for k, v in res.variable_grads.items()})


# ----------------------------------------------------------------------------------- feeds
def _small_page():
    return chain(("x", "Placeholder", {"shape": [4, 3]}, None),
                 ("t", "Tanh", {}, {"x": "x"}),
                 ("q", "Multiply", {}, {"x": "t", "y": "x"}),
                 ("loss", "Sum", {}, {"input": "q"}))


def _feed_variants():
    base = RNG.normal(size=(4, 3)).astype(F32)
    wide = RNG.normal(size=(4, 6)).astype(F32)
    return [base, base.astype(np.float64), wide[:, ::2], np.asfortranarray(base), base.tolist(),
            base.astype(">f4"), base[::-1], np.float32(1.0), np.zeros((3, 4), F32), np.zeros((4, 3), np.int64),
            np.array(RNG.normal(size=(4, 3)) * 1e300), np.zeros((4, 3), np.complex64), "text"]


def test_a_feeds_dict_mutated_between_runs_gives_what_a_fresh_program_gives():
    warm = compile_project(_small_page())
    feeds = {"x": np.ones((4, 3), F32)}
    for record in (False, True):
        run(warm, feeds, target="loss", wrt=frozenset({"x"}), record=record)
    for value in _feed_variants():
        feeds["x"] = value   # the same dict, the same key, a new value
        for record in (False, True):
            got = _outcome(lambda: run(warm, feeds, target="loss", wrt=frozenset({"x"}), record=record))
            fresh = compile_project(_small_page())
            want = _outcome(lambda: run(fresh, {"x": value}, target="loss", wrt=frozenset({"x"}), record=record))
            assert got == want, (type(value), getattr(value, "dtype", None), record)


def test_a_non_contiguous_feed_of_the_right_dtype_gives_the_contiguous_feeds_bits(monkeypatch):
    n = 100_000
    project = chain(("x", "Placeholder", {"shape": [n]}, None),
                    ("e", "Exp", {}, {"x": "x"}),
                    ("m", "Multiply", {}, {"x": "e", "y": F32(0.5)}),
                    ("s", "Sigmoid", {}, {"x": "m"}),
                    ("sp", "Softplus", {}, {"features": "s"}),
                    ("loss", "Sum", {}, {"input": "sp"}))
    wide = RNG.normal(size=2 * n).astype(F32)
    strided, dense = wide[::2], np.ascontiguousarray(wide[::2])
    program = compile_project(project)
    outs = [_outcome(lambda v=v: run(program, {"x": v}, target="loss", wrt=frozenset({"x"}), record=False))
            for v in (strided, dense, strided)]
    assert outs[0] == outs[1] == outs[2]
    _plain(monkeypatch)
    plain = compile_project(project)
    assert _outcome(lambda: run(plain, {"x": strided}, target="loss", wrt=frozenset({"x"}), record=False)) == outs[0]


def _big_page(n=100_000):
    """Many elementwise blocks on a feed, a Variable and a constant, large enough for every
    in-place and kept-buffer path."""
    return chain(("x", "Placeholder", {"shape": [n]}, None),
                 ("W", "Variable", {"shape": [n], "initializer": "random_normal", "seed": 2}, None),
                 ("c", "Const", {"value": np.linspace(-1, 1, n).astype(F32)}, None),
                 ("a", "Add", {}, {"x": "x", "y": "W:ref"}),
                 ("t", "Tanh", {}, {"x": "a"}),
                 ("m", "Multiply", {}, {"x": "t", "y": "c"}),
                 ("s", "Subtract", {}, {"x": "m", "y": "x"}),
                 ("e", "Exp", {}, {"x": "s"}),
                 ("n", "Negate", {}, {"x": "e"}),
                 ("sg", "Sigmoid", {}, {"x": "n"}),
                 ("sp", "Softplus", {}, {"features": "sg"}),
                 ("p", "Multiply", {}, {"x": "sp", "y": "x"}),
                 ("loss", "Sum", {}, {"input": "p"}))


def test_no_run_writes_into_its_feeds_variables_constants_or_earlier_results(monkeypatch):
    monkeypatch.setattr(runtime, "KEEP_ARRAYS", True)
    n = 100_000
    program = compile_project(_big_page(n))
    w = RNG.normal(size=n).astype(F32)   # a writeable array the caller keeps
    program.variable_values["W"] = w
    w0 = w.copy()
    const0 = program.slot(program.step("c").outputs[0]).type.value.copy()
    kept = []
    for k in range(4):
        x = RNG.normal(size=n).astype(F32)
        x0 = x.copy()
        over = {"W": w} if k % 2 else None
        res = run(program, {"x": x}, target="loss", fetch=["e", "sp"] if k < 2 else None,
                  record=False, variables=over)
        assert np.array_equal(x, x0) and np.array_equal(w, w0)
        assert np.array_equal(program.slot(program.step("c").outputs[0]).type.value, const0)
        kept.append((res, {k2: np.array(v) for k2, v in res.values.items()},
                     {k2: np.array(v) for k2, v in res.variable_grads.items()}))
    for res, values, grads in kept:   # later runs wrote into none of them
        for k2, v in values.items():
            assert np.array_equal(res.values[k2], v, equal_nan=True), k2
        for k2, v in grads.items():
            assert np.array_equal(res.variable_grads[k2], v), k2


def test_the_big_page_gives_the_plain_paths_bits(monkeypatch):
    n = 100_000
    feeds = [{"x": RNG.normal(size=n).astype(F32)} for _ in range(3)]

    def runs():
        program = compile_project(_big_page(n))
        out = []
        for f in feeds:
            for record in (False, True, False):
                out.append(_outcome(lambda: run(program, f, target="loss", record=record, wrt=frozenset({"x", "W"}))))
        return out
    monkeypatch.setattr(runtime, "KEEP_ARRAYS", True)
    fast = runs()
    _plain(monkeypatch)
    assert fast == runs()


# ------------------------------------------------------------------------------- Variables
def _var_page():
    return chain(("x", "Placeholder", {"shape": [3]}, None),
                 ("W", "Variable", {"shape": [3], "initializer": "random_normal", "seed": 9}, None),
                 ("m", "Multiply", {}, {"x": "x", "y": "W:ref"}),
                 ("loss", "Sum", {}, {"input": "m"}))


def test_a_variables_value_changed_every_way_is_the_one_a_run_reads():
    program = compile_project(_var_page())
    x = np.array([1.0, 2.0, 3.0], F32)
    feeds = {"x": x}

    def loss(**kw):
        return float(run(program, feeds, target="loss", record=False, **kw).value("loss"))

    first = program.variable_values["W"]
    assert loss() == pytest.approx(float(x @ first))
    program.variable_values["W"] = np.array([1.0, 1.0, 1.0], F32)    # assigned
    assert loss() == 6.0
    assert loss(variables={"W": np.array([2.0, 0.0, 0.0], F32)}) == 2.0   # overridden once
    assert loss() == 6.0                                                    # then not
    held = np.array([0.0, 1.0, 0.0], F32)
    program.variable_values["W"] = held
    assert loss() == 2.0
    held[:] = [0.0, 0.0, 1.0]                                               # replaced in place
    assert loss() == 3.0
    program.variable_values["W"] = np.array([1.0, 0.0, 0.0], np.float64)     # another dtype
    assert loss() == 1.0


def test_training_by_commit_is_seen_by_the_next_run():
    project = chain(("x", "Placeholder", {"shape": [3]}, None),
                    ("W", "Variable", {"shape": [3], "initializer": "ones"}, None),
                    ("m", "Multiply", {}, {"x": "x", "y": "W:ref"}),
                    ("loss", "Sum", {}, {"input": "m"}),
                    ("upd", "ApplyGradientDescent", {}, {"var": "W:ref", "alpha": F32(1.0), "delta": "x"}))
    program = compile_project(project)
    feeds = {"x": np.array([1.0, 2.0, 3.0], F32)}
    losses = []
    for _ in range(3):
        res = run(program, feeds, fetch=["loss"], record=False)
        losses.append(float(res.value("loss")))
        fw = run(program, feeds, fetch=["loss"], record=False, commit=False)   # not committed
        assert float(fw.value("loss")) == losses[-1] - 14.0   # sees the committed W, commits nothing
    # each committed step moves W by -x: loss = x.(1 - k x)
    assert losses == [6.0, 6.0 - 14.0, 6.0 - 28.0]


# ------------------------------------------------------------------------- kinds of runs
def test_wrt_and_target_spellings_and_seeds_give_the_same_answers_every_time():
    project = _small_page()
    project.pages[0].loss = "loss"
    program = compile_project(project)
    feeds = {"x": RNG.normal(size=(4, 3)).astype(F32)}
    for _ in range(2):
        for bad in (frozenset({"nope"}), frozenset({"x", "nope"}), ["nope"]):
            with pytest.raises(RunError, match="wrt names nodes that are not on page 'main': nope"):
                run(program, feeds, target="loss", wrt=bad, record=False)
        with pytest.raises(RunError, match="not the string"):
            run(program, feeds, target="loss", wrt="x", record=False)
    ref = run(compile_project(project), feeds, target="loss", wrt=["x"], record=False).variable_grads["x"]
    for target in ("loss", "loss:output", runtime._LOSS):
        for wrt in (frozenset({"x"}), ["x"], ("x",), {"x"}):
            for record in (False, True):
                res = run(program, feeds, target=target, wrt=wrt, record=record)
                assert res.variable_grads["x"].tobytes() == ref.tobytes(), (target, wrt, record)
    # a non-scalar target: a seed is needed every time, given or not, in any order
    for _ in range(2):
        with pytest.raises(RunError, match="not a scalar"):
            run(program, feeds, target="t", record=False)
        seed = np.full((4, 3), 2.0, F32)
        g = run(program, feeds, target="t", grad_seed=seed, wrt=frozenset({"x"}), record=False).variable_grads["x"]
        np.testing.assert_allclose(g, 2 * (1 - np.tanh(feeds["x"]) ** 2), rtol=1e-6)
        with pytest.raises(RunError, match="gradient seed has shape"):
            run(program, feeds, target="t", grad_seed=np.ones(3, F32), record=False)
        with pytest.raises(RunError, match="seed was given but no gradient target"):
            run(program, feeds, grad_seed=seed, record=False)


def test_check_numerics_alternating_raises_every_checked_time():
    program = compile_project(_small_page())
    bad = {"x": np.full((4, 3), np.nan, F32)}
    good = {"x": np.ones((4, 3), F32)}
    messages = set()
    for _ in range(3):
        for record in (False, True):
            with pytest.raises(NumericsError) as info:
                run(program, bad, target="loss", wrt=frozenset({"x"}), record=record, check_numerics=True)
            messages.add(str(info.value))
            res = run(program, bad, target="loss", wrt=frozenset({"x"}), record=record, check_numerics=False)
            assert np.isnan(res.value("loss"))
            run(program, good, target="loss", wrt=frozenset({"x"}), record=record, check_numerics=1)
    assert len(messages) == 1 and "main/x" in messages.pop()


# ------------------------------------------------------------------- NaN/Inf and certificates
def _layer(extra=None):
    specs = [("x", "Placeholder", {"shape": [6, 256]}, None),
             ("W", "Variable", {"shape": [256, 160], "initializer": "glorot_uniform", "seed": 5}, None),
             ("mm", "MatMul", {}, {"a": "x", "b": "W:ref"})]
    specs += extra or [("t", "Tanh", {}, {"x": "mm"}), ("loss", "Sum", {}, {"input": "t"})]
    project = chain(*specs)
    project.pages[0].loss = "loss"
    return project


def _certified_both_ways(monkeypatch, project, feeds, variables=None):
    out = []
    for certify in (False, True):
        monkeypatch.setattr(lower, "CERTIFY_PRODUCTS", certify)
        program = compile_project(project)
        out.append(_outcome(lambda: run(program, feeds, target="loss", record=False, variables=variables)))
        sources = [p.source for p in program.cache("plans").values() if not p.record]
        assert not sources or any("_cert(" in src for src in sources) == certify   # the case is exercised
        fresh = compile_project(project)   # the recorded run: what the editor reports
        rec = _outcome(lambda: run(fresh, feeds, target="loss", record=True, variables=variables))
        if isinstance(rec[0], str):
            assert out[-1] == rec, certify
    assert out[0] == out[1]
    return out[1]


@pytest.mark.parametrize("scale", [1.0, 1e15, 1e17, 1e18, 3e18, 1e19, 1.8e19, 3e19, 1e30])
def test_certificates_near_the_float32_edge_report_as_without(monkeypatch, scale):
    """x of growing size: the gradient of W (x.T @ g) overflows only past some scale, the
    forward (tanh) stays finite: with and without certificates the same result or message."""
    x = (RNG.normal(size=(6, 256)) * scale).astype(F32)
    _certified_both_ways(monkeypatch, _layer(), {"x": x})


def test_values_at_float32_max_and_gradient_only_overflows_report_as_without(monkeypatch):
    big = np.finfo(F32).max
    x = np.zeros((6, 256), F32)
    x[0, 0] = big                           # finite, exactly at the largest float32
    _certified_both_ways(monkeypatch, _layer(), {"x": x})
    # the cotangent only is large: loss = sum(mm * 3e38) overflows in the backward only
    project = _layer([("t", "Tanh", {}, {"x": "mm"}), ("m", "Multiply", {}, {"x": "t", "y": F32(3e38)}),
                      ("loss", "Mean", {}, {"input": "m"})])
    _certified_both_ways(monkeypatch, project, {"x": RNG.normal(size=(6, 256)).astype(F32)})
    # a NaN in the Variable, an Inf in the feed, a NaN made in the middle, a NaN only in a gradient
    w = np.array(compile_project(_layer()).variable_values["W"])
    w[3, 4] = np.nan
    _certified_both_ways(monkeypatch, _layer(), {"x": RNG.normal(size=(6, 256)).astype(F32)}, {"W": w})
    xi = RNG.normal(size=(6, 256)).astype(F32)
    xi[5, 255] = -np.inf
    _certified_both_ways(monkeypatch, _layer(), {"x": xi})
    mid = _layer([("l", "Log", {}, {"x": "mm"}), ("loss", "Sum", {}, {"input": "l"})])
    _certified_both_ways(monkeypatch, mid, {"x": RNG.normal(size=(6, 256)).astype(F32)})
    only_grad = _layer([("r", "Relu", {}, {"features": "mm"}), ("s", "Sqrt", {}, {"x": "r"}),
                        ("loss", "Sum", {}, {"input": "s"})])
    _certified_both_ways(monkeypatch, only_grad, {"x": RNG.normal(size=(6, 256)).astype(F32)})


def test_a_certified_product_in_float64_and_transposed_reports_as_without(monkeypatch):
    for wires in ({"a": "xt", "b": "W:ref"}, {"a": "W:ref", "b": "xt"}):
        trans = {"transpose_a": True} if wires["a"] == "xt" else {"transpose_b": True}
        project = chain(("x", "Placeholder", {"shape": [256, 6], "dtype": "float64"}, None),
                        ("xt", "Identity", {}, {"input": "x"}),
                        ("W", "Variable", {"shape": [256, 160] if wires["a"] == "xt" else [160, 256],
                                           "initializer": "glorot_uniform", "seed": 5, "dtype": "float64"}, None),
                        ("mm", "MatMul", trans, wires),
                        ("t", "Tanh", {}, {"x": "mm"}),
                        ("loss", "Sum", {}, {"input": "t"}))
        project.pages[0].loss = "loss"
        for scale in (1.0, 1e150, 1e153, 1e160):
            x = RNG.normal(size=(256, 6)) * scale
            _certified_both_ways(monkeypatch, project, {"x": x})


def test_all_finite_many_agrees_with_isfinite_on_edges():
    big = np.finfo(F32).max
    cases = [np.zeros(0, F32), np.float32(np.nan), np.array(np.inf, F32), np.array(big, F32),
             np.full(1000, big, F32), np.full((30, 30), -big, F32).T, np.arange(10)[::2].astype(F32),
             np.array([np.nan], np.float16), np.array([1e-45], F32), np.array([-0.0], F32),
             np.array([1 + 1j * np.inf], np.complex64), np.array([np.nan]).reshape(1, 1, 1)[..., ::1],
             np.full(2000, 1e30, np.float64)[::3], np.full(20_000, 3e19, F32)]
    with np.errstate(all="ignore"):
        for v in cases:
            want = bool(np.isfinite(np.asarray(v)).all())
            assert all_finite(v) == want, v
            assert all_finite_many([v]) == want, v
            assert all_finite_many([np.ones(3, F32)], [v, np.ones(2)]) == want, v


# ------------------------------------------------------------------ Sigmoid and Softplus
def _edges(dtype):
    info = np.finfo(dtype)
    return np.array([0.0, -0.0, info.tiny, -info.tiny, info.smallest_subnormal, -info.smallest_subnormal,
                     info.max, -info.max, np.inf, -np.inf, np.nan, 1.0, -1.0, 15.9, -15.9, 88.0, -88.0,
                     88.72, -88.72, 89.0, -89.0, -103.9, -104.0, -745.0, 709.0, -709.0, 710.0, -710.0,
                     float(np.log(info.max)), -float(np.log(info.max)), 11.0, -11.0, 12.0, -12.0], np.float64).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_sigmoid_takes_the_same_numbers_with_or_without_its_cap(dtype):
    from blockflow_blocks.math_unary import _sigmoid
    x = np.concatenate([_edges(dtype), (RNG.normal(size=500) * 40).astype(dtype)])
    with np.errstate(all="ignore"):
        alone = _sigmoid(x)
        capped = _sigmoid(np.concatenate([x, np.array([-np.finfo(dtype).max], dtype)]))[:-1]
        each = np.array([_sigmoid(v) for v in x], dtype)   # 0-d scalars: the capped path
        ref = 1.0 / (1.0 + np.exp(-x.astype(np.float64)))
    assert alone.dtype == dtype and alone.tobytes() == capped.tobytes() == each.tobytes()
    # below -cap exp's argument is capped (as before issue 18): the reference holds above it
    ok = np.isfinite(ref) & (x.astype(np.float64) > -float(np.floor(np.log(np.finfo(dtype).max))))
    np.testing.assert_allclose(alone[ok].astype(np.float64), ref[ok], rtol=4 * np.finfo(dtype).eps,
                               atol=2 * np.finfo(dtype).smallest_subnormal)
    assert np.isnan(alone[np.isnan(x)]).all()
    for shape in ((0,), (0, 3), (), (3, 1)):
        assert _sigmoid(np.zeros(shape, dtype)).shape == shape


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_sigmoid_decides_on_its_cap_as_a_comparison_of_every_value_would(dtype):
    """_sigmoid asks whether any value is below the cap by the least value, NaNs aside
    (np.fmin's reduction): the same choice as np.less(x, -cap).any(), with NaNs, infinities and
    values just either side of the cap mixed in."""
    from blockflow_blocks import math_unary
    cap = math_unary._NEG_EXP_ARG_MAX[np.dtype(dtype)]
    near = np.array([cap, np.nextafter(cap, dtype(0)), np.nextafter(cap, dtype(-np.inf))], dtype)
    rng = np.random.default_rng(11)
    with np.errstate(all="ignore"):
        for trial in range(60):
            x = (rng.normal(size=int(rng.integers(1, 40))) * 30).astype(dtype)
            picks = rng.integers(0, 5, size=3)
            extra = [near[picks[0] % 3], dtype(np.nan) if picks[1] % 2 else dtype(1), dtype(-np.inf) if picks[2] == 4 else dtype(0)]
            x = rng.permutation(np.concatenate([x, np.array(extra, dtype)]))
            below = bool(np.less(x, cap).any())
            e = np.exp(np.minimum(np.negative(x), -cap) if below else np.negative(x))
            want = np.reciprocal(e + math_unary.ONE[np.dtype(dtype)]) if below else math_unary.ONE[np.dtype(dtype)] / (e + math_unary.ONE[np.dtype(dtype)])
            assert math_unary._sigmoid(x).tobytes() == want.astype(dtype).tobytes(), (trial, x)


def test_softplus_float32_is_within_half_an_ulp_at_the_edges():
    from blockflow_blocks.nn_activations import Softplus, _softplus_float32
    rng = np.random.default_rng(7)
    x = np.concatenate([_edges(np.float32), (rng.normal(size=200_000) * 50).astype(F32)])
    with np.errstate(all="ignore"):
        got = _softplus_float32(x)
        ref = np.logaddexp(x.astype(np.float64), 0.0)
    assert got.dtype == F32 and got.shape == x.shape
    finite = np.isfinite(ref)
    exact = ref[finite].astype(F32)   # the float64 value rounded once
    with np.errstate(over="ignore"):
        ulp = np.spacing(np.abs(exact)).astype(np.float64)
    # half an ulp of the float32 result, plus the float64 rounding of both ref and the kernel's own
    # float64 value (numpy's exp and log1p are libm's or SIMD code, by CPU: a value that falls
    # within a few float64 ulps of a float32 midpoint may round either way)
    slack = np.abs(ref[finite]) * 1e-15
    assert (np.abs(got[finite].astype(np.float64) - ref[finite]) <= 0.5 * ulp + slack + 1e-300).all()
    assert np.array_equal(got[~finite], ref[~finite].astype(F32), equal_nan=True)
    assert np.signbit(got).sum() == 0 or np.isnan(got[np.signbit(got)]).all()   # never -0.0
    # F order, strided, 0-d and empty inputs (np.logaddexp: documented within 1.4 ulp)
    m = x[:200_000].reshape(400, 500)
    for v in (np.asfortranarray(m), m[:, ::-1], m[::2]):
        with np.errstate(all="ignore"):
            a = Softplus.forward(v)
            want = np.logaddexp(np.ascontiguousarray(v).astype(np.float64), 0.0)
        assert a.shape == v.shape and a.dtype == F32
        fin = np.isfinite(want)
        with np.errstate(over="ignore"):
            u = np.spacing(np.abs(want[fin].astype(F32))).astype(np.float64)
        assert (np.abs(a[fin].astype(np.float64) - want[fin]) <= 1.5 * u).all()
    assert Softplus.forward(np.zeros((0, 4), F32)).shape == (0, 4)
    assert Softplus.forward(np.array(0.0, F32)) == np.float32(np.log(2.0))


def test_softplus_and_sigmoid_on_a_page_of_edge_feeds_match_a_recorded_run():
    n = 70_000
    x = np.concatenate([_edges(np.float32), (RNG.normal(size=n - 34) * 60).astype(F32)])
    project = chain(("x", "Placeholder", {"shape": [n]}, None),
                    ("sp", "Softplus", {}, {"features": "x"}),
                    ("sg", "Sigmoid", {}, {"x": "sp"}),
                    ("sg2", "Sigmoid", {}, {"x": "x"}),
                    ("both", "Multiply", {}, {"x": "sg", "y": "sg2"}),
                    ("loss", "Sum", {}, {"input": "both"}))
    program = compile_project(project)
    a = run(program, {"x": x}, target="loss", fetch=["sp", "sg", "sg2"], record=False, check_numerics=False,
            wrt=["x"])
    b = run(program, {"x": x}, target="loss", record=True, check_numerics=False)
    for k in ("sp", "sg", "sg2"):
        assert a.value(k).tobytes() == b.value(k).tobytes(), k
    assert a.variable_grads["x"].tobytes() == b.variable_grads["x"].tobytes()
    with pytest.raises(NumericsError) as info:
        run(program, {"x": x}, target="loss", record=False)
    with pytest.raises(NumericsError) as info2:
        run(program, {"x": x}, target="loss", record=True)
    assert str(info.value) == str(info2.value) and "main/x" in str(info.value)


# ----------------------------------------------------------------------------------- threads
def test_threads_running_one_program_get_what_serial_runs_get(monkeypatch):
    monkeypatch.setattr(runtime, "KEEP_ARRAYS", True)
    n = 100_000
    program = compile_project(_big_page(n))
    feeds = [{"x": RNG.normal(size=n).astype(F32)} for _ in range(6)]
    feeds[3] = {"x": np.where(np.arange(n) == 17, np.nan, feeds[3]["x"]).astype(F32)}

    def one(f, record):
        return _outcome(lambda: run(program, f, target="loss", record=record, wrt=frozenset({"x", "W"})))
    serial = {(i, r): one(f, r) for i, f in enumerate(feeds) for r in (False, True)}
    assert isinstance(serial[(3, False)][0], str) and serial[(3, False)] == serial[(3, True)]
    got, errors = {}, []
    barrier = threading.Barrier(4)

    def worker(k):
        try:
            barrier.wait()
            with np.errstate(all="raise" if k % 2 else "warn"):
                before = np.geterr()
                for rep in range(3):
                    for i in range(len(feeds)):
                        i2 = (i + k) % len(feeds)
                        r = (rep + k) % 2 == 0
                        got.setdefault((i2, r), []).append(one(feeds[i2], r))
                assert np.geterr() == before
        except Exception as exc:   # noqa: BLE001
            errors.append(exc)
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for key, outs in got.items():
        for o in outs:
            assert o == serial[key], key


def test_a_run_under_a_raising_error_state_neither_raises_nor_changes_it():
    program = compile_project(_small_page())
    bad = {"x": np.full((4, 3), 3e38, F32)}   # the Sum overflows: Inf, reported as NumericsError
    with np.errstate(all="raise"):
        for record in (False, True):
            with pytest.raises(NumericsError):
                run(program, bad, target="loss", wrt=["x"], record=record)
            run(program, bad, target="loss", wrt=["x"], record=record, check_numerics=False)
            assert np.geterr()["over"] == "raise"
            with pytest.raises(FloatingPointError):
                np.float32(1e30) * np.float32(1e30)
    assert np.geterr()["over"] == "warn"


# ------------------------------------------------------------------------ memory budget
def test_the_budget_variable_set_changed_and_deleted_between_runs(monkeypatch):
    import blockflow.budget as budget
    monkeypatch.setattr(budget, "_process", None)
    n = 100_000
    program = compile_project(_big_page(n))
    feeds = {"x": RNG.normal(size=n).astype(F32)}

    def attempt():
        return _outcome(lambda: run(program, feeds, target="loss", record=False))
    monkeypatch.delenv(budget.ENV_VAR, raising=False)
    ok = attempt()
    assert isinstance(ok[0], dict)
    for text, kind in (("64K", "MemoryLimitError"), ("1G", None), ("128K", "MemoryLimitError"), ("", None),
                       ("lots", "RunError"), ("2G", None), ("0.5M", "MemoryLimitError"), (None, None)):
        if text is None:
            monkeypatch.delenv(budget.ENV_VAR)
        else:
            monkeypatch.setenv(budget.ENV_VAR, text)
        assert budget._environ_get(budget.ENV_VAR) == os.environ.get(budget.ENV_VAR)
        got = attempt()
        fresh = compile_project(_big_page(n))
        assert got == _outcome(lambda: run(fresh, feeds, target="loss", record=False)), text
        if kind is None:
            assert got == ok, text
        else:
            assert got[0] == kind, (text, got)
            if kind == "MemoryLimitError":
                assert f"{budget.format_size(budget.parse_size(text))} (from {budget.ENV_VAR})" in got[1], got[1]
            else:
                assert got[1].startswith(f"memory budget: {budget.ENV_VAR}:"), got[1]
    os.environ[budget.ENV_VAR] = "64K"     # os.environ's own spelling, then removed by pop
    try:
        assert attempt()[0] == "MemoryLimitError"
    finally:
        os.environ.pop(budget.ENV_VAR)
    assert attempt() == ok


# ------------------------------------------------------------------------ shared cotangents
def _net(dtype="float32"):
    """x -> [Cast] -> MatMul W -> Add b -> Tanh -> Sum: L (of ``dtype``)."""
    specs = [("x", "Placeholder", {"shape": [4, 6]}, None),
             ("W", "Variable", {"shape": [6, 3], "initializer": "glorot_uniform", "seed": 3, "dtype": dtype}, None),
             ("b", "Variable", {"shape": [3], "initializer": "random_normal", "seed": 4, "dtype": dtype}, None)]
    src = "x"
    if dtype != "float32":
        specs.append(("xc", "Cast", {"DstT": dtype}, {"x": "x"}))
        src = "xc"
    specs += [("mm", "MatMul", {}, {"a": src, "b": "W:ref"}),
              ("h", "Add", {}, {"x": "mm", "y": "b:ref"}),
              ("t", "Tanh", {}, {"x": "h"}),
              ("L", "Sum", {}, {"input": "t"})]
    return specs


def _share_variants():
    c = lambda v, dt=F32: np.asarray(v, dt)   # noqa: E731
    yield "mixed dtypes", _net("float64") + [
        ("g", "Gradients", {}, {"ys[0]": "L", "xs[0]": "x"}),
        ("s", "Sign", {}, {"x": "g:dx[0]"}), ("m", "Sum", {}, {"input": "s"}),
        ("L32", "Cast", {"DstT": "float32"}, {"x": "L"}),
        ("lossa", "Multiply", {}, {"x": "L32", "y": c(0.5)}),
        ("loss", "Add", {}, {"x": "lossa", "y": "m"})]
    yield "float64 inside, float64 loss", _net("float64") + [
        ("g", "Gradients", {}, {"ys[0]": "L", "xs[0]": "W:ref"}),
        ("half", "Multiply", {}, {"x": "L", "y": c(0.5, np.float64)}),
        ("loss", "Cast", {"DstT": "float32"}, {"x": "half"})]
    yield "two Gradients blocks on one loss", _net() + [
        ("g", "Gradients", {}, {"ys[0]": "L", "xs[0]": "x"}),
        ("g2", "Gradients", {}, {"ys[0]": "L", "xs[0]": "W:ref"}),
        ("loss", "Multiply", {}, {"x": "L", "y": c(2.0)})]
    yield "two Gradients blocks on two losses", _net() + [
        ("L2", "Mean", {}, {"input": "t"}),
        ("g", "Gradients", {}, {"ys[0]": "L", "xs[0]": "x"}),
        ("g2", "Gradients", {}, {"ys[0]": "L2", "xs[0]": "x"}),
        ("both", "Add", {}, {"x": "L", "y": "L2"}),
        ("loss", "Multiply", {}, {"x": "both", "y": c(0.5)})]
    yield "a non-scalar ys", _net() + [
        ("g", "Gradients", {}, {"ys[0]": "t", "xs[0]": "x"}),
        ("loss", "Multiply", {}, {"x": "L", "y": c(0.5)})]
    yield "grad_ys of 3", _net() + [
        ("c3", "Const", {"value": c(3.0)}, None),
        ("g", "Gradients", {}, {"ys[0]": "L", "xs[0]": "x", "grad_ys[0]": "c3"}),
        ("loss", "Multiply", {}, {"x": "L", "y": c(0.5)})]
    yield "a square between L and the loss", _net() + [
        ("g", "Gradients", {}, {"ys[0]": "L", "xs[0]": "h"}),
        ("loss", "Square", {}, {"x": "L"})]
    yield "L read by a product with an inner value", _net() + [
        ("g", "Gradients", {}, {"ys[0]": "L", "xs[0]": "x"}),
        ("Lt", "Multiply", {}, {"x": "t", "y": "L"}),
        ("loss", "Sum", {}, {"input": "Lt"})]
    yield "ys and xs the same slot", _net() + [
        ("g", "Gradients", {}, {"ys[0]": "L", "xs[0]": "L"}),
        ("loss", "Multiply", {}, {"x": "L", "y": c(0.25)})]
    yield "the Gradients result in the loss", _net() + [
        ("g", "Gradients", {}, {"ys[0]": "L", "xs[0]": "x"}),
        ("sq", "Square", {}, {"x": "g:dx[0]"}), ("pen", "Sum", {}, {"input": "sq"}),
        ("loss", "Add", {}, {"x": "L", "y": "pen"})]
    yield "two ys", _net() + [
        ("L2", "Mean", {}, {"input": "h"}),
        ("g", "Gradients", {}, {"ys[0]": "L", "ys[1]": "L2", "xs[0]": "x"}),
        ("loss", "Multiply", {}, {"x": "L", "y": c(0.5)})]


def _used(specs):
    """The page with each Gradients block's first result read (cut by a StopGradient) by the
    loss, so that a run that does not record runs it."""
    specs = [(("loss0",) + s[1:]) if s[0] == "loss" else s for s in specs]
    last = "loss0"
    for nid, block, _, _ in list(specs):
        if block == "Gradients":
            specs += [(f"{nid}_cut", "StopGradient", {}, {"input": f"{nid}:dx[0]"}),
                      (f"{nid}_sum", "Sum", {}, {"input": f"{nid}_cut"}),
                      (f"{nid}_c", "Cast", {"DstT": "float32"}, {"x": f"{nid}_sum"}),
                      (f"{nid}_plus", "Add", {}, {"x": last, "y": f"{nid}_c"})]
            last = f"{nid}_plus"
    specs.append(("loss", "Identity", {}, {"input": last}))
    return specs


@pytest.mark.parametrize("name", [n for n, _ in _share_variants()])
def test_gradients_pages_where_sharing_may_not_apply_agree_with_it_off(monkeypatch, name):
    specs = _used(dict(_share_variants())[name])
    project = chain(*specs, feeds={"x": np.random.default_rng(5).normal(size=(4, 6)).astype(F32)})
    project.pages[0].loss = "loss"
    results = []
    for share in (False, True):
        monkeypatch.setattr(lower, "SHARE_GRADIENTS", share)
        per = []
        program = compile_project(project)
        for wrt in (None, frozenset({"W"}), frozenset({"x", "b"}), frozenset({"W", "b", "x"})):
            for target in ("loss", "L"):
                try:
                    res = run(program, target=target, wrt=wrt, record=False)
                    per.append({k: np.array(v) for k, v in res.variable_grads.items()})
                except Exception as exc:   # noqa: BLE001
                    per.append((type(exc).__name__, str(exc)))
        results.append(per)
    for plain, shared in zip(*results):
        if isinstance(plain, tuple) or isinstance(shared, tuple):
            assert plain == shared
            continue
        assert plain.keys() == shared.keys()
        for k in plain:
            assert plain[k].dtype == shared[k].dtype, k
            np.testing.assert_allclose(shared[k], plain[k], rtol=2e-6, atol=1e-7, err_msg=f"{name}: {k}")
    # the recording run (never shared) agrees too
    recorded = run(compile_project(project), target="loss")
    for k, v in results[1][0].items() if isinstance(results[1][0], dict) else ():
        np.testing.assert_allclose(v, recorded.variable_grads[k], rtol=2e-6, atol=1e-7, err_msg=f"{name}: {k}")


# --------------------------------------------------------------- kept buffers and layouts
def _transposed_page():
    """A transposed view (F-ordered) through an elementwise step that a plan keeps the array of,
    summed: numpy gives the step's result in its input's (F) order, and sums it in that order."""
    return chain(("x", "Placeholder", {"shape": [200, 350]}, None),
                 ("r", "Reshape", {}, {"tensor": "x", "shape": np.array([350, 200], np.int32)}),
                 ("tr", "Transpose", {}, {"x": "r", "perm": np.array([1, 0], np.int32)}),
                 ("e", "Sin", {}, {"x": "tr"}),
                 ("loss", "Sum", {}, {"input": "e"}))


def test_a_kept_buffer_gives_a_transposed_steps_sum_the_same_bits(monkeypatch):
    x = np.random.default_rng(35).normal(size=(200, 350)).astype(F32)
    losses = {}
    for keep in (False, True):
        monkeypatch.setattr(runtime, "KEEP_ARRAYS", keep)
        program = compile_project(_transposed_page())
        losses[keep] = [run(program, {"x": x}, target="loss", record=False, wrt=["x"]).value("loss").tobytes()
                        for _ in range(3)]
    assert len(set(losses[False])) == 1
    assert losses[True] == losses[False]


# -------------------------------------------------------- in-place gradients and NaN reports
def _fast_and_plain(monkeypatch, project, feeds, runs=((False, "loss"), (False, "loss"), (True, "loss")), **kw):
    """Outcomes with every fast path on (kept arrays always), then all off (the dot sums off in
    both: documented to change the bits)."""
    monkeypatch.setattr(fused, "DOT_GRADIENT_SUMS", False)
    monkeypatch.setattr(runtime, "KEEP_ARRAYS", True)
    out = []
    for fast in (True, False):
        if not fast:
            _plain(monkeypatch)
        program = compile_project(project)
        out.append([_outcome(lambda: run(program, feeds, target=t, record=r, **kw)) for r, t in runs])
    return out


@pytest.mark.parametrize("shape_y", [[], [1], [350]])
def test_in_place_gradients_of_shared_and_broadcast_inputs_give_the_plain_bits(monkeypatch, shape_y):
    n = 200 * 350
    project = chain(("x", "Placeholder", {"shape": [200, 350]}, None),
                    ("y", "Variable", {"shape": shape_y, "initializer": "ones"}, None),
                    ("t", "Tanh", {}, {"x": "x"}),
                    ("sq", "Multiply", {}, {"x": "t", "y": "t"}),        # one input twice
                    ("d", "RealDiv", {}, {"x": "sq", "y": "y:ref"}),    # a broadcast divisor
                    ("d2", "RealDiv", {}, {"x": "d", "y": "d"}),        # x / x
                    ("m", "Multiply", {}, {"x": "d2", "y": "y:ref"}),
                    ("a", "Add", {}, {"x": "m", "y": "d"}),
                    ("s", "Subtract", {}, {"x": "a", "y": "a"}),
                    ("p", "Multiply", {}, {"x": "s", "y": "d"}),
                    ("q", "Add", {}, {"x": "p", "y": "d"}),
                    ("loss", "Sum", {}, {"input": "q"}))
    x = np.random.default_rng(2).normal(size=(200, 350)).astype(F32) + F32(3.0)
    assert n >= lower.REUSE_MIN_SIZE
    fast, plain = _fast_and_plain(monkeypatch, project, {"x": x}, wrt=frozenset({"x", "y"}))
    assert fast == plain


def _nan_pages():
    n = 70_000
    base = [("x", "Placeholder", {"shape": [n]}, None),
            ("W", "Variable", {"shape": [n], "initializer": "random_normal", "seed": 3}, None)]
    yield "feed", base + [("t", "Tanh", {}, {"x": "x"}), ("m", "Multiply", {}, {"x": "t", "y": "W:ref"}),
                          ("loss", "Sum", {}, {"input": "m"})], "nan feed"
    yield "middle", base + [("t", "Tanh", {}, {"x": "x"}), ("l", "Log", {}, {"x": "t"}),
                            ("e", "Exp", {}, {"x": "l"}), ("m", "Multiply", {}, {"x": "e", "y": "W:ref"}),
                            ("loss", "Sum", {}, {"input": "m"})], None
    yield "gradient only", base + [("r", "Relu", {}, {"features": "x"}), ("s", "Sqrt", {}, {"x": "r"}),
                                   ("m", "Multiply", {}, {"x": "s", "y": "W:ref"}),
                                   ("loss", "Sum", {}, {"input": "m"})], None
    yield "overflow in the sum", base + [("e", "Exp", {}, {"x": "x"}), ("m", "Multiply", {}, {"x": "e", "y": F32(1e37)}),
                                         ("loss", "Sum", {}, {"input": "m"})], None
    yield "float32 max", base + [("m", "Multiply", {}, {"x": "x", "y": "W:ref"}),
                                 ("loss", "Mean", {}, {"input": "m"})], "max feed"


@pytest.mark.parametrize("name", [n for n, _, _ in _nan_pages()])
def test_nan_and_inf_reports_are_the_plain_paths(monkeypatch, name):
    _, specs, special = next(p for p in _nan_pages() if p[0] == name)
    x = np.random.default_rng(4).normal(size=70_000).astype(F32)
    if special == "nan feed":
        x[69_999] = np.nan
    if special == "max feed":
        x[:] = np.finfo(F32).max
    project = chain(*specs)
    project.pages[0].loss = "loss"
    runs = ((False, "loss"), (False, "loss"), (True, "loss"), (False, "loss"))
    fast, plain = _fast_and_plain(monkeypatch, project, {"x": x}, runs=runs, wrt=frozenset({"x", "W"}))
    assert fast == plain
    errors = [o for o in fast if isinstance(o[0], str)]
    assert all(o == errors[0] for o in errors)   # the quick runs' replay names what the recorded run does


def test_random_streams_are_the_documented_ones_and_reproducible():
    from blockflow.run.streams import stream_generator, stream_hash
    rng = np.random.default_rng(8)
    for k in range(200):
        node = "".join(chr(c) for c in rng.integers(33, 0x2FF, size=int(rng.integers(1, 12))))
        seed, step, run_seed = (int(v) for v in rng.integers(-2**40, 2**40, size=3))
        a = stream_generator(stream_hash(node), seed, step, run_seed).integers(0, 2**63, size=4)
        data = node.encode("utf-8", "surrogatepass")
        # docs/runtime.md: the key but the step's low 64 bits hashed, then step s's stretch
        h = hashlib.sha256(b"blockflow random stream\0" + len(data).to_bytes(8, "little") + data
                           + f"{seed},{step // 2**64},{run_seed}".encode())
        words = [int.from_bytes(h.digest()[i:i + 4], "little") for i in range(0, 32, 4)]
        bits = np.random.PCG64(np.random.SeedSequence(words, pool_size=8))
        bits.advance(step % 2**64 * 2**64)
        b = np.random.Generator(bits).integers(0, 2**63, size=4)
        assert (a == b).all(), node
    project = chain(("x", "Placeholder", {"shape": [300, 300]}, None),
                    ("d", "Dropout", {"rate": 0.3, "seed": 4}, {"x": "x"}),
                    ("loss", "Sum", {}, {"input": "d"}))
    program = compile_project(project)
    x = np.ones((300, 300), F32)
    grads = {}
    for step in (0, 1, 0, 1):
        for record in (False, True):
            g = run(program, {"x": x}, target="loss", wrt=["x"], record=record, step=step).variable_grads["x"]
            grads.setdefault(step, set()).add(g.tobytes())
    assert len(grads[0]) == len(grads[1]) == 1 and grads[0] != grads[1]


@pytest.mark.parametrize("view", ["Reshape", "Transpose", "Identity", "StopGradient", "ExpandDims", "Slice"])
def test_a_fetched_view_of_an_elementwise_result_is_not_overwritten_by_the_next_run(monkeypatch, view):
    monkeypatch.setattr(runtime, "KEEP_ARRAYS", True)
    wires = {"Reshape": {"tensor": "e", "shape": np.array([350, 200], np.int32)},
             "Transpose": {"x": "e", "perm": np.array([1, 0], np.int32)},
             "Identity": {"input": "e"}, "StopGradient": {"input": "e"},
             "ExpandDims": {"input": "e", "axis": np.int32(0)},
             "Slice": {"input": "e", "begin": np.array([0, 0], np.int32), "size": np.array([100, 350], np.int32)}}[view]
    program = compile_project(chain(("x", "Placeholder", {"shape": [200, 350]}, None),
                                    ("e", "Sin", {}, {"x": "x"}), ("v", view, {}, wires),
                                    ("loss", "Sum", {}, {"input": "v"})))
    xs = [np.random.default_rng(i).normal(size=(200, 350)).astype(F32) for i in range(3)]
    results = [run(program, {"x": x}, fetch=["v"], target="loss", wrt=["x"], record=False) for x in xs]
    copies = [np.array(r.value("v")) for r in results]
    for x in xs:   # more runs
        run(program, {"x": x}, fetch=["v"], target="loss", wrt=["x"], record=False)
    for r, c in zip(results, copies):
        assert np.array_equal(r.value("v"), c)
    assert not np.array_equal(copies[0], copies[1])
