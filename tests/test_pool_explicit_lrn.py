"""MaxPool with EXPLICIT padding and the LRN block against direct loops over their definitions
(TensorFlow's MaxPool/MaxPoolGrad with explicit_paddings, LRN/LRNGrad): both of MaxPool's ways
(per-offset loops, block scans), ties, -inf and NaN windows, and what TensorFlow refuses."""
from __future__ import annotations

import numpy as np
import pytest

import blockflow_blocks.nn_norm as norm_module
import blockflow_blocks.nn_pool as pool_module
from blockflow.spec import ShapeError, TensorType
from blockflow_blocks.nn_norm import LRN
from blockflow_blocks.nn_pool import MaxPool

_rng = np.random.default_rng(1707)


def _explicit(pads, data_format="NHWC"):
    h, w = (1, 2) if data_format == "NHWC" else (2, 3)
    out = [0] * 8
    out[2 * h:2 * h + 2], out[2 * w:2 * w + 2] = pads[:2], pads[2:]
    return out


def _attrs(k, s, pads, data_format="NHWC"):
    h, w = (1, 2) if data_format == "NHWC" else (2, 3)
    ks, ss = [1, 1, 1, 1], [1, 1, 1, 1]
    ks[h], ks[w], ss[h], ss[w] = *k, *s
    return {"ksize": ks, "strides": ss, "padding": "EXPLICIT", "explicit_paddings": _explicit(pads, data_format),
            "data_format": data_format}


def _ref_max_pool(x, g, k, s, pads):
    """NHWC max pooling and MaxPoolGrad by loops: each window over its real entries only, its g
    all to the first maximum in row-major order (a NaN window gives none)."""
    n, h, w, c = x.shape
    top, bottom, left, right = pads
    oh = (h + top + bottom - k[0]) // s[0] + 1
    ow = (w + left + right - k[1]) // s[1] + 1
    out = np.empty((n, oh, ow, c), x.dtype)
    gx = np.zeros(x.shape, np.float64)
    for b in range(n):
        for i in range(oh):
            for j in range(ow):
                r0, c0 = i * s[0] - top, j * s[1] - left
                rows = range(max(r0, 0), min(r0 + k[0], h))
                cols = range(max(c0, 0), min(c0 + k[1], w))
                for ch in range(c):
                    entries = [(x[b, r, q, ch], r, q) for r in rows for q in cols]
                    values = np.array([e[0] for e in entries])
                    best = values.max()
                    out[b, i, j, ch] = best
                    if g is not None and not np.isnan(best):
                        _, r, q = entries[int(np.flatnonzero(values == best)[0])]
                        gx[b, r, q, ch] += g[b, i, j, ch]
    return out, gx


@pytest.fixture(params=["loops", "scans"])
def way(request, monkeypatch):
    """Force one of MaxPool's two ways (blocks/nn_pool.py chooses by cost)."""
    monkeypatch.setattr(pool_module, "_SCAN_PASSES", 10 ** 9 if request.param == "loops" else -1)
    return request.param


@pytest.mark.parametrize("shape, k, s, pads", [
    ((2, 5, 6, 3), (3, 3), (1, 1), (1, 1, 1, 1)),
    ((1, 5, 5, 2), (3, 3), (2, 2), (0, 1, 0, 1)),      # ONNX's pads [0, 0, 1, 1]
    ((2, 6, 7, 2), (2, 3), (2, 2), (1, 0, 2, 1)),
    ((1, 4, 4, 1), (4, 4), (1, 3), (3, 3, 0, 3)),
    ((1, 1, 1, 2), (3, 2), (1, 1), (2, 2, 1, 1)),      # every window holds the one real entry
])
@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
def test_max_pool_explicit_equals_the_loops_with_ties(way, shape, k, s, pads, data_format):
    x = _rng.integers(-2, 3, size=shape).astype(np.float64)   # many ties
    attrs = _attrs(k, s, pads, data_format)
    layout = (lambda a: a) if data_format == "NHWC" else (lambda a: a.transpose(0, 3, 1, 2))
    back = (lambda a: a) if data_format == "NHWC" else (lambda a: a.transpose(0, 2, 3, 1))
    out = MaxPool.forward(layout(x), **attrs)
    g = _rng.standard_normal(back(out).shape)
    want_out, want_gx = _ref_max_pool(x, g, k, s, pads)
    np.testing.assert_array_equal(back(out), want_out)
    (gx,) = MaxPool.vjp(layout(g), out, layout(x), **attrs)
    np.testing.assert_allclose(back(gx), want_gx, rtol=1e-12, atol=1e-12)
    assert MaxPool.infer(TensorType(layout(x).shape, "float64"), **attrs).shape == out.shape


def test_max_pool_explicit_never_takes_the_padding(way):
    """A window whose real entries are all -inf has max -inf and gives its gradient to its first
    real entry; a NaN window gives none; integers pad with their lowest value, never winning."""
    x = np.full((1, 2, 3, 1), -np.inf)
    x[0, 1, 2, 0] = np.nan
    attrs = _attrs((2, 2), (1, 1), (1, 1, 1, 1))
    out = MaxPool.forward(x, **attrs)
    g = np.ones(out.shape)
    want_out, want_gx = _ref_max_pool(x, g, (2, 2), (1, 1), (1, 1, 1, 1))
    np.testing.assert_array_equal(out, want_out)
    np.testing.assert_array_equal(MaxPool.vjp(g, out, x, **attrs)[0], want_gx)
    xi = np.full((1, 2, 2, 1), np.iinfo(np.int32).min, np.int32)
    assert (MaxPool.forward(xi, **attrs) == np.iinfo(np.int32).min).all()


def test_max_pool_explicit_zero_pads_are_valid():
    x = _rng.standard_normal((2, 7, 5, 3))
    g = _rng.standard_normal((2, 3, 2, 3))
    valid = {"ksize": [1, 3, 2, 1], "strides": [1, 2, 2, 1], "padding": "VALID", "data_format": "NHWC",
             "explicit_paddings": []}
    explicit = dict(valid, padding="EXPLICIT", explicit_paddings=[0] * 8)
    out = MaxPool.forward(x, **valid)
    np.testing.assert_array_equal(MaxPool.forward(x, **explicit), out)
    np.testing.assert_array_equal(MaxPool.vjp(g, out, x, **explicit)[0], MaxPool.vjp(g, out, x, **valid)[0])


@pytest.mark.parametrize("shape, attrs, message", [
    ((1, 4, 4, 1), _attrs((2, 2), (1, 1), (2, 0, 0, 0)), "smaller than the window's height 2"),
    ((1, 4, 4, 1), _attrs((3, 2), (1, 1), (0, 0, 0, 2)), "smaller than the window's width 2"),
    ((1, 4, 4, 1), dict(_attrs((2, 2), (1, 1), (0, 0, 0, 0)), explicit_paddings=[1, 0, 0, 0, 0, 0, 0, 0]),
     "0 for batch and channels"),
    ((1, 4, 4, 1), dict(_attrs((2, 2), (1, 1), (0, 0, 0, 0)), explicit_paddings=[0, 0, 1, 1]), "8 non-negative"),
    ((1, 4, 4, 1), dict(_attrs((2, 2), (1, 1), (1, 1, 1, 1)), padding="SAME"), "only used with EXPLICIT"),
    ((1, 0, 4, 1), _attrs((2, 2), (1, 1), (1, 1, 0, 0)), "padding only"),
])
def test_max_pool_refuses_what_tensorflow_refuses(shape, attrs, message):
    with pytest.raises(ShapeError, match=message):
        MaxPool.infer(TensorType(shape, "float32"), **attrs)
    with pytest.raises(ShapeError, match=message):
        MaxPool.forward(np.zeros(shape, np.float32), **attrs)


def _ref_lrn(x, g, r, bias, alpha, beta):
    """TensorFlow's LRN and LRNGrad, loop for loop over the channels (float64)."""
    x = x.reshape(-1, x.shape[-1]).astype(np.float64)
    g = g.reshape(x.shape).astype(np.float64)
    rows, depth = x.shape
    out = np.empty_like(x)
    gx = np.zeros_like(x)
    for i in range(rows):
        for j in range(depth):
            lo, hi = max(0, j - r), min(depth, j + r + 1)
            out[i, j] = x[i, j] / (bias + alpha * np.sum(x[i, lo:hi] ** 2)) ** beta
    for i in range(rows):
        for j in range(depth):
            lo, hi = max(0, j - r), min(depth, j + r + 1)
            norm = bias + alpha * np.sum(x[i, lo:hi] ** 2)
            for k in range(lo, hi):
                dyi = -2 * alpha * beta * x[i, k] * out[i, j] / norm
                if k == j:
                    dyi += norm ** -beta
                gx[i, k] += dyi * g[i, j]
    return out, gx


@pytest.mark.parametrize("channels, r, bias, alpha, beta", [
    (7, 5, 1.0, 1.0, 0.5), (96, 2, 2.0, 1e-4 / 5, 0.75), (64, 2, 1.0, 2e-5, 0.75), (9, 0, 1.5, 0.7, 0.6),
    (5, 40, 0.5, 0.3, 1.5), (1, 3, 1.0, 2.0, 1.0), (33, 16, 1.0, 0.05, 0.25),
])
@pytest.mark.parametrize("sums", ["adds", "scans", "auto"])
def test_lrn_equals_tensorflows_loops(channels, r, bias, alpha, beta, sums, monkeypatch):
    if sums != "auto":  # force the shifted adds or the block scans (blocks/nn_norm.py chooses by length)
        monkeypatch.setattr(norm_module, "_SCAN_PASSES", 10 ** 9 if sums == "adds" else 0)
    x = _rng.uniform(-3, 3, size=(2, 3, 2, channels))
    g = _rng.standard_normal(x.shape)
    attrs = {"depth_radius": r, "bias": bias, "alpha": alpha, "beta": beta}
    out = LRN.forward(x, **attrs)
    want_out, want_gx = _ref_lrn(x, g, r, bias, alpha, beta)
    np.testing.assert_allclose(out.reshape(want_out.shape), want_out, rtol=1e-13, atol=1e-15)
    (gx,) = LRN.vjp(g, out, x, **attrs)
    np.testing.assert_allclose(gx.reshape(want_gx.shape), want_gx, rtol=1e-11, atol=1e-13)


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_lrn_keeps_its_dtype_and_is_accurate(dtype):
    x = _rng.uniform(-3, 3, size=(1, 2, 2, 12)).astype(dtype)
    g = _rng.standard_normal(x.shape).astype(dtype)
    attrs = {"depth_radius": 3, "bias": 1.0, "alpha": 0.2, "beta": 0.75}
    out = LRN.forward(x, **attrs)
    (gx,) = LRN.vjp(g, out, x, **attrs)
    assert out.dtype == gx.dtype == dtype
    want_out, want_gx = _ref_lrn(x, g, 3, 1.0, 0.2, 0.75)
    tol = 4 * float(np.finfo(dtype).eps)
    np.testing.assert_allclose(out.reshape(want_out.shape), want_out, rtol=tol, atol=tol)
    np.testing.assert_allclose(gx.reshape(want_gx.shape), want_gx, rtol=20 * tol, atol=20 * tol)


def test_lrn_of_an_empty_input_and_its_refusals():
    empty = np.zeros((2, 0, 3, 4), np.float32)
    assert LRN.forward(empty, depth_radius=2, bias=1.0, alpha=1.0, beta=0.5).shape == empty.shape
    with pytest.raises(ShapeError, match="rank-4"):
        LRN.infer(TensorType((3, 4), "float32"), depth_radius=2, bias=1.0, alpha=1.0, beta=0.5)
    with pytest.raises(ShapeError, match="rank-4"):
        LRN.forward(np.zeros((3, 4)), depth_radius=2, bias=1.0, alpha=1.0, beta=0.5)


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_lrn_exports_in_its_own_dtype(dtype, tmp_path):
    """The export tests run LRN's cases in float64 (PyTorch) and float32 (ONNX Runtime has no
    float64 LRN): float16 goes through float32 in both exports, as in blockflow."""
    pytest.importorskip("torch")
    from casekit import Case, f32
    from export_kit import case_project, compare_with_torch

    case = Case((f32(2, 2, 3, 6).astype(dtype),), {"depth_radius": 2, "bias": 1.5, "alpha": 0.2, "beta": 0.75})
    project, feeds, outs = case_project("LRN", case, float64=False)
    compare_with_torch(project, feeds, outs, tmp_path)
    pytest.importorskip("onnxruntime")
    from test_export_onnx import compare_with_ort

    tol = 50 * float(np.finfo(dtype).eps)
    compare_with_ort(project, feeds, outs, rtol=tol, atol=tol)
