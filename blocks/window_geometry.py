"""The tensor layouts (NHWC, NCHW) and the window geometry of 2-D convolution and pooling, in
TensorFlow's arithmetic: output sizes and padding per axis, padded inputs, the entries at one
kernel offset of every window, and the sum of per-offset cotangents back onto an input (col2im).

Holds no block (nn_conv and nn_pool use it). Imports only blockflow.spec and numpy.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from blockflow.spec import ShapeError, reserve


LAYOUTS = ("NHWC", "NCHW")

# The largest entry of a window attr (ksize, strides, dilations, explicit_paddings), its Attr's
# max. Far past any real window, step or padding, and small enough that the window arithmetic
# numpy does in int64 (a window's extent (k - 1) * dilation + 1, the byte strides of the windows'
# view) cannot overflow: a stride of 2^62 passed the check and failed at run time with an
# OverflowError.
WINDOW_MAX = 2 ** 31 - 1

# Positions of the height, width and channel axes of a rank-4 tensor in each layout.
AXES = {"NHWC": (1, 2, 3), "NCHW": (2, 3, 1)}


def spatial(op, name, values, data_format):
    """The (height, width) entries of a 4-int strides/ksize/dilations attr; batch and channel must be 1."""
    if len(values) != 4:
        raise ShapeError(f"{op}: {name} must have 4 entries ({data_format} order), got {list(values)}")
    h, w, c = AXES[data_format]
    if values[0] != 1 or values[c] != 1:
        raise ShapeError(f"{op}: {name} {list(values)} must be 1 in the batch and channel entries "
                         f"({data_format} order)")
    if values[h] < 1 or values[w] < 1:
        raise ShapeError(f"{op}: {name} {list(values)} must be at least 1")
    return values[h], values[w]


@lru_cache(maxsize=1024)
def axis_geometry(op, what, size, k, stride, dilation, padding, pads):
    """Output size and (before, after) padding of one spatial axis, TensorFlow's arithmetic.

    ``size`` None (unknown) gives an unknown output size. SAME: ``out = ceil(size / stride)``
    and the padding needed, ``max((out - 1) * stride + k_eff - size, 0)``, split with the odd
    entry after. VALID: no padding, ``out = (size - k_eff) // stride + 1``. EXPLICIT: ``pads``.
    """
    eff = (k - 1) * dilation + 1
    if padding == "SAME":
        if size is None:
            return None, None, None
        out = -(-size // stride)
        total = max((out - 1) * stride + eff - size, 0)
        return out, total // 2, total - total // 2
    before, after = pads if padding == "EXPLICIT" else (0, 0)
    if size is None:
        return None, before, after
    padded = size + before + after
    if padded < eff:
        dil = f" (dilated to {eff})" if dilation > 1 else ""
        raise ShapeError(f"{op}: the window's {what} {k}{dil} is larger than the input's {what} {size}"
                         + (f" padded to {padded}" if padding == "EXPLICIT" else "")
                         + f" with {padding} padding")
    return (padded - eff) // stride + 1, before, after


def explicit_pads(op, padding, explicit_paddings, data_format):
    """((top, bottom), (left, right)) of EXPLICIT padding; None for SAME and VALID."""
    if padding != "EXPLICIT":
        if explicit_paddings:
            raise ShapeError(f"{op}: explicit_paddings is only used with EXPLICIT padding, got "
                             f"{list(explicit_paddings)} with {padding}")
        return None
    p = list(explicit_paddings)
    h, w, c = AXES[data_format]
    if len(p) != 8 or min(p) < 0 or p[0] or p[1] or p[2 * c] or p[2 * c + 1]:
        raise ShapeError(f"{op}: EXPLICIT padding needs explicit_paddings of 8 non-negative ints, (before, "
                         f"after) per axis in {data_format} order with 0 for batch and channels, got {p}")
    return (p[2 * h], p[2 * h + 1]), (p[2 * w], p[2 * w + 1])


def geometry(op, shape, k, strides, dilations, padding, pads):
    """(oh, ow, (top, bottom, left, right)) of a 2-D window over an NHWC ``shape``."""
    oh, top, bottom = axis_geometry(op, "height", shape[1], k[0], strides[0], dilations[0], padding,
                                     pads and pads[0])
    ow, left, right = axis_geometry(op, "width", shape[2], k[1], strides[1], dilations[1], padding,
                                     pads and pads[1])
    return oh, ow, (top, bottom, left, right)


def pad_hw(x, pads, fill, what="the padded input"):
    """``x`` (NHWC) padded in height and width; ``x`` itself when there is nothing to pad."""
    top, bottom, left, right = pads
    if not (top or bottom or left or right):
        return x
    n, h, w, c = x.shape
    shape = (n, h + top + bottom, w + left + right, c)
    reserve(shape, x.dtype, what)
    out = np.full(shape, fill, dtype=x.dtype)
    out[:, top:top + h, left:left + w] = x
    return out


def kernel_offset(i, j, oh, ow, strides, dilations):
    """The index of the padded input's entries at kernel offset (i, j) of every window."""
    sh, sw = strides
    r, c = i * dilations[0], j * dilations[1]
    return (slice(None), slice(r, r + sh * (oh - 1) + 1, sh), slice(c, c + sw * (ow - 1) + 1, sw))


def col2im(d, shape, k, oh, ow, pads, strides, dilations, dtype):
    """Sum per-offset cotangents ``d(i, j)`` ([N, oh, ow, C]) back into an NHWC input ``shape``.

    One strided add per kernel offset (not per pixel); overlapping windows add up. ``d`` is
    called once per offset, in row-major order (MaxPool relies on it).
    """
    n, h, w, c = shape
    top, bottom, left, right = pads
    padded = (n, h + top + bottom, w + left + right, c)
    reserve(padded, dtype, "the padded input's gradient")
    dx = np.zeros(padded, dtype)
    if oh and ow:
        for i in range(k[0]):
            for j in range(k[1]):
                dx[kernel_offset(i, j, oh, ow, strides, dilations)] += d(i, j)
    if top or bottom or left or right:
        dx = dx[:, top:top + h, left:left + w]
    return dx


def to_nhwc(x, data_format):
    return x if data_format == "NHWC" else x.transpose(0, 2, 3, 1)


def from_nhwc(x, data_format):
    return x if data_format == "NHWC" else x.transpose(0, 3, 1, 2)


def nhwc_type(op, t, data_format, what="input"):
    if t.rank != 4:
        raise ShapeError(f"{op} needs a rank-4 {what} ({data_format}), got {t}")
    h, w, c = AXES[data_format]
    return (t.shape[0], t.shape[h], t.shape[w], t.shape[c])


def layout_shape(n, h, w, c, data_format):
    return (n, h, w, c) if data_format == "NHWC" else (n, c, h, w)
