"""nn_ops, pooling over 2-D windows: MaxPool, AvgPool.

Imports only blockflow.spec and numpy.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from blockflow.spec import Attr, Input, Output, ShapeError, TensorType, block, reserve

from . import windows
from .common import ZERO
from .window_geometry import (LAYOUTS, WINDOW_MAX, col2im, explicit_pads, from_nhwc, geometry, kernel_offset,
                              layout_shape, nhwc_type, pad_hw, spatial, to_nhwc)


def _pool_setup(op, shape, ksize, strides, padding, data_format, explicit_paddings=()):
    k = spatial(op, "ksize", ksize, data_format)
    s = spatial(op, "strides", strides, data_format)
    pads = explicit_pads(op, padding, explicit_paddings, data_format)
    if pads is not None:
        _check_explicit(op, shape, k, pads)
    oh, ow, p = geometry(op, shape, k, s, (1, 1), padding, pads)
    return k, s, oh, ow, p


def _check_explicit(op, shape, k, pads):
    """EXPLICIT padding as TensorFlow allows it: each pad smaller than the window along its axis,
    so every window holds a real entry (an empty axis would leave windows of padding only)."""
    for what, size, kk, (before, after) in (("height", shape[1], k[0], pads[0]), ("width", shape[2], k[1], pads[1])):
        if before >= kk or after >= kk:
            raise ShapeError(f"{op}: EXPLICIT padding ({before}, {after}) of the {what} must be smaller than "
                             f"the window's {what} {kk}, as TensorFlow requires")
        if size == 0 and (before or after):
            raise ShapeError(f"{op}: EXPLICIT padding of an empty {what} would make windows of padding only")


def _pool_infer(op, t, ksize, strides, padding, data_format, explicit_paddings=()):
    n, h, w, c = nhwc_type(op, t, data_format)
    _, _, oh, ow, _ = _pool_setup(op, (n, h, w, c), ksize, strides, padding, data_format, explicit_paddings)
    return TensorType(layout_shape(n, oh, ow, c, data_format), t.dtype)


_POOL_ATTRS = (
    Attr("ksize", "ints", (1, 2, 2, 1), max=WINDOW_MAX, doc="window size per axis, [1, kh, kw, 1] in NHWC"),
    Attr("strides", "ints", (1, 2, 2, 1), max=WINDOW_MAX, doc="window step per axis, [1, sh, sw, 1] in NHWC"),
    Attr("padding", "choice", "VALID", choices=("SAME", "VALID")),
    Attr("data_format", "choice", "NHWC", choices=LAYOUTS),
)
# MaxPool's, as TensorFlow's raw op: AvgPool has no EXPLICIT padding there.
_MAX_POOL_ATTRS = (
    *_POOL_ATTRS[:2],
    Attr("padding", "choice", "VALID", choices=("SAME", "VALID", "EXPLICIT")),
    Attr("explicit_paddings", "ints", (), max=WINDOW_MAX,
         doc="with EXPLICIT padding: 8 ints, (before, after) per axis"),
    _POOL_ATTRS[3],
)
_NO_DILATION = (1, 1)


def _pool_windows(op, value, ksize, strides, padding, data_format, explicit_paddings=()):
    """``value`` as NHWC and the geometry of its pooling windows: ``(x, k, s, oh, ow, pads)``."""
    x = to_nhwc(value, data_format)
    return (x, *_pool_setup(op, x.shape, ksize, strides, padding, data_format, explicit_paddings))


# Pooling runs one of two ways, both exact (max is exact; sums differ from each other only by
# rounding). Small windows: one strided pass over the output per kernel offset, kh * kw passes in
# all, over a padded copy of the input; fastest when that is little. Large windows: separable
# block scans (blocks/windows.py), a few passes over the input and the output whatever the window
# size, padding never materialised. The loop is taken while its passes and its padded copy cost
# no more than the scans' passes.
_SCAN_PASSES = 12


def _pool_loops(x, k, oh, ow, p):
    """True when the per-offset loop is the cheaper way to pool NHWC ``x`` with windows ``k``."""
    n, h, w, c = x.shape
    padded = (h + p[0] + p[1]) * (w + p[2] + p[3]) if any(p) else 0
    return k[0] * k[1] * oh * ow + padded <= _SCAN_PASSES * (h * w + oh * ow)


def _pool_plans(x, k, s, oh, ow, p):
    """The windows along height and width (blocks/windows.py)."""
    return (windows.axis_plan(x.shape[1], k[0], s[0], p[0], oh),
            windows.axis_plan(x.shape[2], k[1], s[1], p[2], ow))


def _pool_reduce(ufunc, x, k, s, oh, ow, p, fill, dtype=None):
    """``ufunc`` (np.maximum, np.add) folded over each window of NHWC ``x``: [N, oh, ow, C], as
    ``dtype`` (x's by default). Padded entries never count (``fill`` is ufunc's identity)."""
    dtype = x.dtype if dtype is None else np.dtype(dtype)
    if not (oh and ow):
        return np.empty((x.shape[0], oh, ow, x.shape[3]), dtype)
    if not _pool_loops(x, k, oh, ow, p):
        ph, pw = _pool_plans(x, k, s, oh, ow, p)
        rows = windows.reduce(ufunc, x, 2, pw, fill, dtype, "the pooling windows along the width")
        return windows.reduce(ufunc, rows, 1, ph, fill, dtype, "the pooling windows along the height")
    xp = pad_hw(x, p, fill)
    out = xp[kernel_offset(0, 0, oh, ow, s, _NO_DILATION)].astype(dtype)
    for i in range(k[0]):
        for j in range(k[1]):
            if i or j:
                ufunc(out, xp[kernel_offset(i, j, oh, ow, s, _NO_DILATION)], out=out)
    return out


def _lowest(dtype):
    return -np.inf if dtype.kind == "f" else np.iinfo(dtype).min


def _max_pool_grad_loops(g, out, x, k, s, oh, ow, p):
    """MaxPool's gradient by kernel offsets: each window's g goes to the first offset, in
    row-major order, whose entry equals the window's max."""
    # The padding is NaN for floats, which equals nothing: a window whose real max is -inf gives
    # its gradient to its first real -inf, never to the padding (TensorFlow never looks there).
    xp = pad_hw(x, p, np.nan if x.dtype.kind == "f" else _lowest(x.dtype))
    zero = ZERO[g.dtype]
    rest = g

    def share(i, j):
        nonlocal rest
        hit = xp[kernel_offset(i, j, oh, ow, s, _NO_DILATION)] == out
        take = np.where(hit, rest, zero)
        rest = np.where(hit, zero, rest)
        return take

    return col2im(share, x.shape, k, oh, ow, p, s, _NO_DILATION, g.dtype)


def _max_pool_grad_scans(g, out, x, k, s, oh, ow, p):
    """MaxPool's gradient by scans: the first max of each window found along its rows (the first
    column reaching each row's max), then down its rows (the first row reaching the window's
    max): the first max in row-major order. Time linear in the input and output sizes."""
    n, h, w, c = x.shape
    ph, pw = _pool_plans(x, k, s, oh, ow, p)
    lowest = _lowest(x.dtype)
    row_max, col = windows.max_first_index(x, 2, pw, lowest, "the max-pooling windows along the width")
    win_max, row = windows.max_first_index(row_max, 1, ph, lowest,
                                           "the max-pooling windows along the height")
    del row_max
    col = np.take_along_axis(col, row, axis=1)
    reserve((n, oh, ow, c), np.int64, "the max-pooling gradient's targets")
    # Flat positions of the chosen entries in [N, H, W, C].
    target = row
    target *= w
    target += col
    del col
    target *= c
    target += np.arange(c)
    target += (np.arange(n) * (h * w * c)).reshape(n, 1, 1, 1)
    hit = win_max == out  # a NaN max equals nothing: its gradient is dropped, as by the loops
    reserve(x.shape, g.dtype, "the max-pooling gradient")
    gx = np.zeros(x.shape, g.dtype)
    flat = gx.reshape(-1)
    picked, values = (target, g) if hit.all() else (target[hit], g[hit])
    if k[0] <= s[0] and k[1] <= s[1]:  # windows do not overlap: every entry is chosen once at most
        flat[picked.reshape(-1)] = values.reshape(-1)
    else:
        np.add.at(flat, picked.reshape(-1), values.reshape(-1))
    return gx


@block("MaxPool", category="nn_ops")
class MaxPool:
    """Maximum over 2-D windows of ``input`` (NHWC), per channel.

    ``ksize`` and ``strides`` have 4 entries in the layout's order, 1 for batch and channels
    (``[1, kh, kw, 1]`` for NHWC). VALID takes only full windows; SAME gives
    ``ceil(size / stride)`` outputs per axis with TensorFlow's padding (the odd entry after);
    EXPLICIT pads by ``explicit_paddings``, 8 ints, (before, after) per axis in the layout's order
    (0 for batch and channels), each pad smaller than the window along its axis, as TensorFlow
    requires; ONNX's MaxPool ``pads`` [top, left, bottom, right] are NCHW's
    ``[0, 0, 0, 0, top, bottom, left, right]``. Padded entries never count as the maximum (as if
    -inf): every window's maximum is one of its real entries.

    The gradient goes to the maximum of each window; when several entries tie, all of it goes to
    the first in row-major window order, as TensorFlow's MaxPoolGrad (overlapping windows add
    up). A window holding a NaN has a NaN maximum and sends no gradient back.

    Time is linear in the input and output sizes whatever the window size: small windows take
    one pass per kernel offset, large ones separable block scans (van Herk / Gil-Werman).
    """

    inputs = (Input("input", dtype="number"),)
    outputs = (Output("output"),)
    attrs = _MAX_POOL_ATTRS
    grad_rule = """
        dinput = each window's g routed to the window's max; overlapping windows add up
        on a tie all of it goes to the first max in row-major window order (not split)
        """

    def infer(input, *, ksize, strides, padding, explicit_paddings, data_format):
        return _pool_infer("MaxPool", input, ksize, strides, padding, data_format, explicit_paddings)

    def forward(input, *, ksize, strides, padding, explicit_paddings, data_format):
        x, k, s, oh, ow, p = _pool_windows("MaxPool", input, ksize, strides, padding, data_format,
                                           explicit_paddings)
        return from_nhwc(_pool_reduce(np.maximum, x, k, s, oh, ow, p, _lowest(x.dtype)), data_format)

    def vjp(g, out, input, *, ksize, strides, padding, explicit_paddings, data_format):
        x, k, s, oh, ow, p = _pool_windows("MaxPool", input, ksize, strides, padding, data_format,
                                           explicit_paddings)
        out, g = to_nhwc(out, data_format), to_nhwc(g, data_format)
        if not (oh and ow):
            gx = np.zeros(x.shape, g.dtype)
        elif _pool_loops(x, k, oh, ow, p):
            gx = _max_pool_grad_loops(g, out, x, k, s, oh, ow, p)
        else:
            gx = _max_pool_grad_scans(g, out, x, k, s, oh, ow, p)
        return (from_nhwc(gx, data_format),)


@lru_cache(maxsize=256)
def _window_counts(h, w, k, s, p, oh, ow, dtype):
    """[oh, ow, 1]: how many real (unpadded) entries each window covers, as ``dtype``."""
    def axis(size, k, s, before, out):
        start = np.arange(out) * s - before
        return np.minimum(start + k, size) - np.maximum(start, 0)
    counts = np.multiply.outer(axis(h, k[0], s[0], p[0], oh), axis(w, k[1], s[1], p[2], ow))
    counts = counts.astype(dtype)[:, :, None]
    counts.setflags(write=False)
    return counts


def _window_sizes(x, k, s, oh, ow, p, dtype=None):
    """What AvgPool divides by: the real entries per window ([oh, ow, 1]), or k's area without
    padding; as ``dtype`` (x's by default)."""
    dtype = x.dtype if dtype is None else np.dtype(dtype)
    if any(p):
        return _window_counts(x.shape[1], x.shape[2], k, s, p, oh, ow, dtype)
    return dtype.type(k[0] * k[1])


def _sum_dtype(dtype):
    """Window sums of float16 are taken in float32 (float16 runs out of digits after 2048)."""
    return np.dtype(np.float32) if dtype == np.float16 else dtype


@block("AvgPool", category="nn_ops")
class AvgPool:
    """Mean over 2-D windows of ``value`` (NHWC), per channel.

    ``ksize`` and ``strides`` have 4 entries in the layout's order, 1 for batch and channels
    (``[1, kh, kw, 1]`` for NHWC). VALID takes only full windows; SAME gives
    ``ceil(size / stride)`` outputs per axis with TensorFlow's padding (the odd entry after), and
    a window that reaches into the padding averages only its real entries, as TensorFlow. The
    gradient spreads each output's cotangent evenly over the real entries of its window.

    Time is linear in the input and output sizes whatever the window size (block scans of
    partial sums for large windows, each sum over at most one window's length of entries).
    """

    inputs = (Input("value", dtype="float"),)
    outputs = (Output("output"),)
    attrs = _POOL_ATTRS
    grad_rule = """
        dvalue = each window's g / n, spread over its n real (unpadded) entries
        overlapping windows add up
        """

    def infer(value, *, ksize, strides, padding, data_format):
        return _pool_infer("AvgPool", value, ksize, strides, padding, data_format)

    def forward(value, *, ksize, strides, padding, data_format):
        x, k, s, oh, ow, p = _pool_windows("AvgPool", value, ksize, strides, padding, data_format)
        acc = _sum_dtype(x.dtype)
        out = _pool_reduce(np.add, x, k, s, oh, ow, p, 0, acc)
        if oh and ow:
            out /= _window_sizes(x, k, s, oh, ow, p, acc)
        return from_nhwc(out.astype(x.dtype, copy=False), data_format)

    def vjp(g, out, value, *, ksize, strides, padding, data_format):
        x, k, s, oh, ow, p = _pool_windows("AvgPool", value, ksize, strides, padding, data_format)
        share = to_nhwc(g, data_format) / _window_sizes(x, k, s, oh, ow, p, g.dtype)
        if not (oh and ow) or _pool_loops(x, k, oh, ow, p):
            gx = col2im(lambda i, j: share, x.shape, k, oh, ow, p, s, _NO_DILATION, g.dtype)
        else:
            ph, pw = _pool_plans(x, k, s, oh, ow, p)
            acc = _sum_dtype(g.dtype)
            rows = windows.reduce_sum_adjoint(share, 1, ph, acc, "the average-pooling gradient along the height")
            gx = windows.reduce_sum_adjoint(rows, 2, pw, acc, "the average-pooling gradient along the width")
            gx = gx.astype(g.dtype, copy=False)
        return (from_nhwc(gx, data_format),)
