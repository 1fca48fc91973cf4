"""Hostile pooling windows: MaxPool and AvgPool take time linear in their input and output, not in
the window's area, and route gradients exactly as before.

Before: one strided pass per kernel offset, over a copy padded to the window's size: ksize 4000
on a 4x4 input took 45 s forward and 180 s backward (MaxPool) on the test machine. The old code
is kept below as the slow reference, and both of today's ways (the per-offset loop for small
windows, the block scans for large ones) are compared with it on random shapes, strides,
paddings and layouts, with many ties.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from blockflow.run.gradcheck import check_block
from blockflow.spec import allocation_guard
from blockflow.io.project_io import save_project
from blockflow_blocks import nn_pool as N
from blockflow_blocks import windows
from call_counts import lines_run
from diagrams import chain
from hostile_kit import changed_paths, run_cli, snapshot

# --------------------------------------------------------------------------------------------
# The reference: the pooling code as it was (one strided operation per kernel offset), NHWC.


def _ref_geometry(size, k, s, padding):
    if padding == "SAME":
        out = -(-size // s)
        total = max((out - 1) * s + k - size, 0)
        return out, total // 2, total - total // 2
    return (size - k) // s + 1, 0, 0


def _ref_setup(x, k, s, padding):
    oh, top, bottom = _ref_geometry(x.shape[1], k[0], s[0], padding)
    ow, left, right = _ref_geometry(x.shape[2], k[1], s[1], padding)
    return oh, ow, (top, bottom, left, right)


def _ref_pad(x, p, fill):
    top, bottom, left, right = p
    n, h, w, c = x.shape
    out = np.full((n, h + top + bottom, w + left + right, c), fill, dtype=x.dtype)
    out[:, top:top + h, left:left + w] = x
    return out


def _ref_offset(i, j, oh, ow, s):
    return (slice(None), slice(i, i + s[0] * (oh - 1) + 1, s[0]), slice(j, j + s[1] * (ow - 1) + 1, s[1]))


def _ref_lowest(dtype):
    return -np.inf if dtype.kind == "f" else np.iinfo(dtype).min


def ref_pool(kind, x, k, s, padding):
    oh, ow, p = _ref_setup(x, k, s, padding)
    ufunc, fill = (np.maximum, _ref_lowest(x.dtype)) if kind == "MaxPool" else (np.add, 0)
    xp = _ref_pad(x, p, fill)
    out = xp[_ref_offset(0, 0, oh, ow, s)].copy()
    for i in range(k[0]):
        for j in range(k[1]):
            if i or j:
                ufunc(out, xp[_ref_offset(i, j, oh, ow, s)], out=out)
    if kind == "AvgPool":
        out /= _ref_counts(x, k, s, oh, ow, p)
    return out


def _ref_counts(x, k, s, oh, ow, p):
    def axis(size, k, s, before, out):
        start = np.arange(out) * s - before
        return np.minimum(start + k, size) - np.maximum(start, 0)
    return np.multiply.outer(axis(x.shape[1], k[0], s[0], p[0], oh),
                             axis(x.shape[2], k[1], s[1], p[2], ow)).astype(x.dtype)[:, :, None]


def _ref_col2im(d, x, k, oh, ow, p, s, dtype):
    n, h, w, c = x.shape
    top, bottom, left, right = p
    dx = np.zeros((n, h + top + bottom, w + left + right, c), dtype)
    for i in range(k[0]):
        for j in range(k[1]):
            dx[_ref_offset(i, j, oh, ow, s)] += d(i, j)
    return dx[:, top:top + h, left:left + w]


def ref_pool_grad(kind, g, out, x, k, s, padding):
    oh, ow, p = _ref_setup(x, k, s, padding)
    if kind == "AvgPool":
        share = g / _ref_counts(x, k, s, oh, ow, p)
        return _ref_col2im(lambda i, j: share, x, k, oh, ow, p, s, g.dtype)
    xp = _ref_pad(x, p, _ref_lowest(x.dtype))
    rest = g

    def share(i, j):
        nonlocal rest
        hit = xp[_ref_offset(i, j, oh, ow, s)] == out
        take = np.where(hit, rest, 0)
        rest = np.where(hit, 0, rest)
        return take

    return _ref_col2im(share, x, k, oh, ow, p, s, g.dtype)


# --------------------------------------------------------------------------------------------
# Today's blocks, through either way


def _attrs(k, s, padding, data_format, spec=None):
    """The attrs of a window; with ``spec``, every attr of that block (defaults filled), as its
    functions are called directly."""
    if data_format == "NHWC":
        a = dict(ksize=(1, *k, 1), strides=(1, *s, 1), padding=padding, data_format="NHWC")
    else:
        a = dict(ksize=(1, 1, *k), strides=(1, 1, *s), padding=padding, data_format="NCHW")
    return a if spec is None else spec.validate_attrs(a)[0]


@pytest.fixture(params=["loops", "scans", "auto"])
def way(request, monkeypatch):
    """Force the per-offset loop, force the block scans, or let the block choose."""
    if request.param != "auto":
        monkeypatch.setattr(N, "_SCAN_PASSES", 0 if request.param == "scans" else 10 ** 12)
    return request.param


def _run(kind, x, g, k, s, padding, data_format):
    """Forward and backward of the block on NHWC ``x``, in ``data_format``; NHWC results."""
    spec = getattr(N, kind)
    a = _attrs(k, s, padding, data_format, spec)
    to = (lambda t: t) if data_format == "NHWC" else (lambda t: t.transpose(0, 3, 1, 2))
    back = (lambda t: t) if data_format == "NHWC" else (lambda t: t.transpose(0, 2, 3, 1))
    out = spec.forward(to(x), **a)
    (gx,) = spec.vjp(to(g), out, to(x), **a)
    return back(out), back(gx)


def _random_case(rng):
    n, c = int(rng.integers(1, 3)), int(rng.integers(1, 4))
    h, w = int(rng.integers(1, 10)), int(rng.integers(1, 10))
    padding = "SAME" if rng.random() < 0.6 else "VALID"
    if padding == "SAME":
        k = int(rng.integers(1, h + 4)), int(rng.integers(1, w + 4))
    else:
        k = int(rng.integers(1, h + 1)), int(rng.integers(1, w + 1))
    s = int(rng.integers(1, 5)), int(rng.integers(1, 5))
    return (n, h, w, c), k, s, padding, ("NHWC", "NCHW")[int(rng.integers(2))]


def test_pooling_matches_the_old_code_on_random_windows_with_ties(way):
    rng = np.random.default_rng(1234)
    for trial in range(250):
        shape, k, s, padding, fmt = _random_case(rng)
        dtype = (np.float32, np.float64)[trial % 2]
        x = rng.integers(-2, 3, size=shape).astype(dtype)  # few values: many ties
        if trial % 5 == 0:
            x[tuple(rng.integers(0, d) for d in shape)] = np.nan  # a NaN max drops its gradient
        oh, ow, _ = _ref_setup(x, k, s, padding)
        g = rng.integers(1, 8, size=(shape[0], oh, ow, shape[3])).astype(dtype)  # exact sums
        for kind in ("MaxPool", "AvgPool"):
            where = f"{kind} {shape} k={k} s={s} {padding} {fmt} {dtype.__name__} ({way})"
            out, gx = _run(kind, x, g, k, s, padding, fmt)
            want = ref_pool(kind, x, k, s, padding)
            want_gx = ref_pool_grad(kind, g, want, x, k, s, padding)
            assert out.dtype == want.dtype and gx.dtype == want_gx.dtype, where
            if kind == "MaxPool":
                np.testing.assert_array_equal(out, want, err_msg=where)
                np.testing.assert_array_equal(gx, want_gx, err_msg=where)  # the same routing
            else:  # sums in another order: rounding only
                np.testing.assert_allclose(out, want, rtol=1e-6, atol=0, err_msg=where)
                np.testing.assert_allclose(gx, want_gx, rtol=1e-6, atol=1e-12, err_msg=where)


def test_max_pool_ties_go_to_the_first_max_in_row_major_order_whatever_the_window(way):
    x = np.array([[0, 5, 5, 1],
                  [5, 5, 2, 5],
                  [3, 5, 5, 0]], np.float64).reshape(1, 3, 4, 1)
    for k, s, padding in (((3, 4), (1, 1), "VALID"), ((3, 3), (1, 1), "VALID"), ((5, 7), (1, 1), "SAME"),
                          ((2, 2), (1, 2), "VALID"), ((9, 9), (2, 3), "SAME")):
        oh, ow, _ = _ref_setup(x, k, s, padding)
        g = np.arange(1.0, oh * ow + 1).reshape(1, oh, ow, 1)
        _, gx = _run("MaxPool", x, g, k, s, padding, "NHWC")
        want = ref_pool_grad("MaxPool", g, ref_pool("MaxPool", x, k, s, padding), x, k, s, padding)
        np.testing.assert_array_equal(gx, want, err_msg=f"k={k} s={s} {padding}")


def test_integer_max_pool_matches_the_old_code(way):
    rng = np.random.default_rng(7)
    for trial in range(60):
        shape, k, s, padding, fmt = _random_case(rng)
        dtype = (np.int8, np.uint8, np.int32, np.int64)[trial % 4]
        info = np.iinfo(dtype)
        x = rng.choice([info.min, info.min + 1, 0, 1, info.max], size=shape).astype(dtype)
        spec, a = N.MaxPool, _attrs(k, s, padding, fmt, N.MaxPool)
        xin = x if fmt == "NHWC" else x.transpose(0, 3, 1, 2)
        out = spec.forward(xin, **a)
        out = out if fmt == "NHWC" else out.transpose(0, 2, 3, 1)
        assert out.dtype == dtype
        np.testing.assert_array_equal(out, ref_pool("MaxPool", x, k, s, padding))


def test_a_window_whose_max_is_minus_infinity_gives_its_gradient_to_a_real_entry(way):
    # SAME padding comes before the first window here. The old code padded with -inf and compared
    # the padding too, so when the real entries were all -inf the gradient went to the padding and
    # was lost; TensorFlow looks only at real entries: the first real -inf gets it.
    x = np.array([-np.inf, -np.inf, 1.0], np.float32).reshape(1, 1, 3, 1)
    out, gx = _run("MaxPool", x, np.ones((1, 1, 2, 1), np.float32), (1, 3), (1, 2), "SAME", "NHWC")
    np.testing.assert_array_equal(out.ravel(), [-np.inf, 1.0])
    np.testing.assert_array_equal(gx.ravel(), [1.0, 0.0, 1.0])


@pytest.mark.parametrize("kind", ["MaxPool", "AvgPool"])
def test_large_windows_pass_the_gradient_check(kind, monkeypatch):
    monkeypatch.setattr(N, "_SCAN_PASSES", 0)  # the scans, whatever the size
    rng = np.random.default_rng(3)
    x = rng.permutation(2 * 7 * 6 * 2).reshape(2, 7, 6, 2).astype(np.float64) / 10  # no ties
    for k, s, padding in (((5, 4), (1, 2), "SAME"), ((7, 6), (1, 1), "VALID"), ((40, 3), (3, 1), "SAME")):
        result = check_block(getattr(N, kind), [x], _attrs(k, s, padding, "NHWC"))
        assert result.passed, str(result)


@pytest.mark.parametrize("kind", ["MaxPool", "AvgPool"])
def test_float16_pools_sum_in_float32(kind, monkeypatch):
    monkeypatch.setattr(N, "_SCAN_PASSES", 0)
    x = np.full((1, 1, 4096, 1), 1.0, np.float16)
    out, _ = _run(kind, x, np.ones((1, 1, 1, 1), np.float16), (1, 4096), (1, 1), "VALID", "NHWC")
    assert out.dtype == np.float16 and out.ravel()[0] == 1.0  # a float16 running sum stops at 2048


# --------------------------------------------------------------------------------------------
# Time: proportional to the input and output, not to the window's area. Counted, not timed: the
# lines of Python the block library runs (a loop over the window's offsets or entries runs
# millions) and the bytes its arrays take (announced with reserve; a padded copy of the input
# would take the window's area).

#: lines the library may run for one forward and gradient: a few block scans of at most
#: windows._STEPPED_SCAN_MAX steps each (3,500 measured for 64 x 64 windows)
POOL_LINES = 5_000
#: the arrays it may make, in multiples of the input's and output's bytes (8 measured for MaxPool)
POOL_BYTES_FACTOR = 16
LIBRARY = os.path.dirname(N.__file__)


class _Reserved:
    """An allocation guard, as a run installs one, adding up the bytes a block announces."""

    def __init__(self):
        self.nbytes = 0

    def reserve(self, nbytes, shape, dtype, what):
        self.nbytes += nbytes

    def __enter__(self):
        self._token = allocation_guard.set(self)
        return self

    def __exit__(self, *exc):
        allocation_guard.reset(self._token)


@pytest.mark.parametrize("kind", ["MaxPool", "AvgPool"])
@pytest.mark.parametrize("shape, k, s, padding", [
    ((1, 4, 4, 1), (4000, 4000), (1, 1), "SAME"),      # before: 45 s forward, 180 s backward
    ((1, 256, 256, 1), (64, 64), (1, 1), "SAME"),      # before: 0.1 s forward, 0.7 s backward
    ((1, 3, 100_000, 1), (3, 50_000), (1, 7), "SAME"),  # a long axis and a long window
    ((2, 2, 2, 1), (2, 10 ** 9), (1, 10 ** 9), "SAME"),
])
def test_pooling_work_does_not_grow_with_the_window(kind, shape, k, s, padding):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    spec = getattr(N, kind)
    a = _attrs(k, s, padding, "NHWC", spec)
    done = {}

    def pool():
        out = spec.forward(x, **a)
        done["out"], (done["gx"],) = out, spec.vjp(np.ones_like(out), out, x, **a)

    with _Reserved() as reserved:
        lines = lines_run(pool, LIBRARY, POOL_LINES)
    assert done["gx"].shape == x.shape
    reserved = reserved.nbytes
    assert reserved <= POOL_BYTES_FACTOR * (x.nbytes + done["out"].nbytes), (kind, k, shape, reserved)
    assert lines <= POOL_LINES


def test_one_axis_windows_agree_with_their_definition():
    """blocks/windows.py on its own: every window of every plan, against slicing."""
    rng = np.random.default_rng(99)
    for _ in range(400):
        size, k, s = int(rng.integers(1, 30)), int(rng.integers(1, 40)), int(rng.integers(1, 7))
        if rng.random() < 0.5:
            out = -(-size // s)
            before = max((out - 1) * s + k - size, 0) // 2
        else:
            if k > size:
                continue
            out, before = (size - k) // s + 1, 0
        plan = windows.axis_plan(size, k, s, before, out)
        x = rng.integers(0, 4, size=(2, size, 3)).astype(np.float64)
        g = rng.integers(1, 9, size=(2, out, 3)).astype(np.float64)
        top = windows.reduce(np.maximum, x, 1, plan, -np.inf)
        total = windows.reduce(np.add, x, 1, plan, 0)
        values, index = windows.max_first_index(x, 1, plan, -np.inf)
        spread = windows.reduce_sum_adjoint(g, 1, plan)
        want_spread = np.zeros_like(x)
        for o in range(out):
            lo, hi = max(o * s - before, 0), min(o * s - before + k, size)
            win = x[:, lo:hi]
            np.testing.assert_array_equal(top[:, o], win.max(axis=1))
            np.testing.assert_array_equal(values[:, o], win.max(axis=1))
            np.testing.assert_array_equal(total[:, o], win.sum(axis=1))
            np.testing.assert_array_equal(index[:, o], lo + np.argmax(win, axis=1))  # argmax: the first
            want_spread[:, lo:hi] += g[:, o:o + 1]
        np.testing.assert_array_equal(spread, want_spread)


def test_a_project_with_a_huge_pooling_window_runs_at_once_from_the_command_line(tmp_path):
    x = np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1)
    big = {"ksize": [1, 4000, 4000, 1], "strides": [1, 1, 1, 1], "padding": "SAME"}
    project = chain(("x", "Placeholder", {"shape": [1, 4, 4, 1]}, None),
                    ("max", "MaxPool", big, {"input": "x"}),
                    ("avg", "AvgPool", big, {"value": "max"}),
                    ("loss", "Sum", {}, {"input": "avg"}), feeds={"x": x})
    project.pages[0].loss = "loss"
    path = tmp_path / "pool.bflow.json"
    save_project(project, path)
    before = snapshot(tmp_path)
    # before: about 5 minutes; the work is counted above (the same window on the same input), and
    # the child's timeout (60 s, 10x a run with its start-up on a loaded machine) is a backstop
    r = run_cli("run", path, "--json", cwd=tmp_path, timeout=60)
    r.assert_clean_message()
    assert r.returncode == 0, r.output
    result = json.loads(r.stdout)
    assert result["values"]["loss:output"]["data"] == 240.0  # every window sees the whole 4x4
    gx = np.array(result["gradients"]["x:output"]["data"]).ravel()
    np.testing.assert_array_equal(gx, [0] * 15 + [16])  # all 16 windows' max is x's last entry
    assert changed_paths(before, snapshot(tmp_path)) == set()
