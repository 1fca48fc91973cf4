"""The runtime's fast paths (issue 18) give what the plain paths give, bit for bit, and the same
NaN/Inf reports."""
from __future__ import annotations

import numpy as np
import pytest

import blockflow.run.lower as lower
from blockflow.compile.compiler import compile_project
from blockflow.errors import NumericsError
from blockflow.run.runtime import all_finite, run

from diagrams import chain

RNG = np.random.default_rng(18)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("size", [0, 1, 8, 16383, 16384, 100_000])
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
    monkeypatch.setattr(lower, "BIND_UFUNCS", fast)
    monkeypatch.setattr(lower, "DIRECT_KEYWORDS", fast)
    program = compile_project(project)  # a new program: plans are cached per program
    out = []
    for record in (True, False):
        res = run(program, feeds, target="loss", record=record, **kw)
        out.append((res.values, res.grads, res.variable_grads))
    return program, out


@pytest.mark.parametrize("n", [8, 50_000])
def test_bound_ufuncs_give_bit_identical_values_and_gradients(monkeypatch, n):
    feeds = {"x": RNG.normal(size=n).astype(np.float32), "b": np.array([2.0], np.float32)}
    project = _elementwise_page(n)
    program, fast = _results(monkeypatch, True, project, feeds, wrt=["x", "b"])
    ns = next(iter(program.cache("plans").values())).fn.__globals__
    assert ns[f"f{program.step('a').index}"] is np.add and ns[f"f{program.step('t').index}"] is np.tanh
    _, plain = _results(monkeypatch, False, project, feeds, wrt=["x", "b"])
    for (fv, fg, fw), (pv, pg, pw) in zip(fast, plain):
        for f, p in ((fv, pv), (fg, pg), (fw, pw)):
            assert f.keys() == p.keys()
            for k in f:
                assert np.asarray(f[k]).tobytes() == np.asarray(p[k]).tobytes(), k


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
    for (fv, fg, fw), (pv, pg, pw) in zip(fast, plain):
        for f, p in ((fv, pv), (fg, pg), (fw, pw)):
            assert f.keys() == p.keys()
            for k in f:
                assert np.asarray(f[k]).tobytes() == np.asarray(p[k]).tobytes(), k
