"""array_ops, repeating, padding and reversing: Tile, BroadcastTo, Pad, MirrorPad, Reverse.

Imports only blockflow.spec and numpy.
"""
from __future__ import annotations

import numpy as np

from blockflow.spec import Attr, Input, Output, ShapeError, TensorType, block, fit_dtype, normalize_axis, unbroadcast

from .common import fmt_shape
from .folding import fold, static_ints, static_sizes


@block("Tile", category="array_ops", aliases=("tile",))
class Tile:
    """Repeats ``input`` ``multiples[i]`` times along each axis i.

    TensorFlow's ``tf.tile``: ``multiples`` has one non-negative entry per axis. The gradient sums
    ``g`` over the copies.
    """

    inputs = (Input("input"), Input("multiples", dtype="int", static=True, doc="copies along each axis"))
    outputs = (Output("output"),)
    grad_rule = "dinput = g summed over the multiples[i] copies along each axis i"

    def infer(x, multiples):
        m = static_ints("Tile", "multiples", multiples, x.rank)
        if any(k < 0 for k in m):
            raise ShapeError(f"Tile: multiples {list(m)} must be at least 0")
        t = TensorType(tuple(None if d is None else d * k for d, k in zip(x.shape, m)), x.dtype)
        return fold("Tile", t, Tile.forward, x, multiples)

    def forward(x, multiples):
        return np.tile(x, multiples)

    def vjp(g, out, x, multiples):
        split = []
        for k, d in zip(multiples.tolist() if type(multiples) is np.ndarray else multiples, x.shape):
            split += (k, d)
        if split[::2].count(1) == x.ndim:
            return g, None
        return g.reshape(split).sum(axis=tuple(range(0, len(split), 2))), None


@block("BroadcastTo", category="array_ops", aliases=("broadcast_to",))
class BroadcastTo:
    """Repeats ``input`` along its size-1 (or missing leading) axes to the shape ``shape``.

    TensorFlow's ``tf.broadcast_to``, numpy's broadcasting rule: the input must broadcast to
    exactly ``shape``. The result is a read-only view. The gradient sums ``g`` back down to the
    input's shape.
    """

    inputs = (Input("input"), Input("shape", dtype="int", static=True, doc="the result's shape"))
    outputs = (Output("output"),)
    grad_rule = "dinput = unbroadcast(g): g summed over the broadcast axes, back to input's shape"

    def infer(x, shape):
        dims = static_sizes("BroadcastTo", "shape", shape)
        lead = len(dims) - x.rank
        if lead < 0 or any(d not in (None, 1, n) for d, n in zip(x.shape, dims[lead:])):
            raise ShapeError(f"BroadcastTo: {fmt_shape(x.shape)} does not broadcast to {list(dims)}")
        return fold("BroadcastTo", TensorType(dims, x.dtype), BroadcastTo.forward, x, shape)

    def forward(x, shape):
        return np.broadcast_to(x, shape)

    def vjp(g, out, x, shape):
        return unbroadcast(g, x.shape), None


# --------------------------------------------------------------------------------------------
# Padding and reversing


def _paddings(op, paddings, shape):
    """Paddings as a tuple of (before, after) per axis, checked."""
    p = np.asarray(paddings)
    if p.shape != (len(shape), 2) or (p.size and p.dtype.kind not in "iu"):
        raise ShapeError(f"{op}: paddings must be [rank, 2] = [{len(shape)}, 2] integers, got "
                         f"{p.tolist()!r}")
    pads = tuple((int(b), int(a)) for b, a in p.tolist())
    if any(b < 0 or a < 0 for b, a in pads):
        raise ShapeError(f"{op}: paddings {p.tolist()} must be at least 0")
    return pads


@block("Pad", category="array_ops", aliases=("PadV2", "pad"))
class Pad:
    """Surrounds ``input`` with ``constant_values``: paddings[i] = [before, after] on axis i.

    TensorFlow's ``tf.pad`` in CONSTANT mode (ops Pad, PadV2); MirrorPad does the reflecting
    modes. ``constant_values`` must fit the input's dtype as a constant's value must (a whole
    number in its range for an integer input). The gradient is the middle block of ``g`` (a view).
    """

    inputs = (Input("input"),
              Input("paddings", dtype="int", static=True, doc="[rank, 2]: entries added before and after"))
    outputs = (Output("output"),)
    attrs = (Attr("constant_values", "float", 0.0, doc="the value of the added entries"),)
    grad_rule = "dinput = the middle block of g (g with the paddings cut off)"

    def infer(x, paddings, *, constant_values):
        pads = _paddings("Pad", paddings, x.shape)
        try:    # np.full would wrap a number an int dtype cannot hold, and overflow past int64
            fit_dtype(constant_values, x.dtype)
        except ValueError as exc:
            raise ShapeError(f"Pad: constant_values {exc}") from None
        t = TensorType(tuple(None if d is None else d + b + a for d, (b, a) in zip(x.shape, pads)), x.dtype)
        return fold("Pad", t, Pad.forward, x, paddings, constant_values=constant_values)

    def forward(x, paddings, *, constant_values):
        pads = paddings.tolist() if type(paddings) is np.ndarray else paddings
        out = np.full([d + b + a for d, (b, a) in zip(x.shape, pads)], constant_values, x.dtype)
        out[tuple(slice(b, b + d) for d, (b, _) in zip(x.shape, pads))] = x
        return out

    def vjp(g, out, x, paddings, *, constant_values):
        pads = paddings.tolist() if type(paddings) is np.ndarray else paddings
        return g[tuple(slice(b, b + d) for d, (b, _) in zip(x.shape, pads))], None


def _mirror_limits(op, pads, shape, mode):
    extra = 0 if mode == "SYMMETRIC" else 1
    for i, (d, (b, a)) in enumerate(zip(shape, pads)):
        if d is not None and max(b, a) > d - extra:
            raise ShapeError(f"{op}: {mode} padding of axis {i} (size {d}) is at most {d - extra} on each "
                             f"side, got {[b, a]}")


@block("MirrorPad", category="array_ops")
class MirrorPad:
    """Pads ``input`` with mirror images of its border: REFLECT or SYMMETRIC.

    TensorFlow's ``tf.pad`` in REFLECT mode (the edge entry is not repeated: [1, 2, 3] padded by
    2 gives [3, 2, 1, 2, 3, 2, 1]; each side at most size - 1) or SYMMETRIC mode (it is: [2, 1, 1,
    2, 3, 3, 2]; at most size). The gradient folds the padded parts of ``g`` back onto the entries
    they copy.
    """

    inputs = (Input("input"),
              Input("paddings", dtype="int", static=True, doc="[rank, 2]: entries added before and after"))
    outputs = (Output("output"),)
    attrs = (Attr("mode", "choice", "REFLECT", choices=("REFLECT", "SYMMETRIC")),)
    grad_rule = """
        dinput = the middle block of g plus the padded parts of g mirrored back onto the entries they copy
        folded axis by axis, so a corner goes back along both axes
        """

    def infer(x, paddings, *, mode):
        pads = _paddings("MirrorPad", paddings, x.shape)
        _mirror_limits("MirrorPad", pads, x.shape, mode)
        t = TensorType(tuple(None if d is None else d + b + a for d, (b, a) in zip(x.shape, pads)), x.dtype)
        return fold("MirrorPad", t, MirrorPad.forward, x, paddings, mode=mode)

    def forward(x, paddings, *, mode):
        pads = _paddings("MirrorPad", paddings, x.shape)
        _mirror_limits("MirrorPad", pads, x.shape, mode)
        shift = 1 if mode == "REFLECT" else 0
        out = np.empty([n + b + a for n, (b, a) in zip(x.shape, pads)], x.dtype)
        inner = [slice(b, b + n) for n, (b, _) in zip(x.shape, pads)]
        out[tuple(inner)] = x
        # Axis by axis, mirror the part filled so far: whole along the axes done, inner along
        # the rest (so corners mirror both ways, as in TensorFlow).
        for axis, (n, (b, a)) in enumerate(zip(x.shape, pads)):
            lead, tail = (slice(None),) * axis, tuple(inner[axis + 1:])
            if b:  # out[b - 1 - j] = out[b + shift + j]
                mirror = slice(2 * b - 1 + shift, b - 1 + shift, -1)
                out[lead + (slice(0, b),) + tail] = out[lead + (mirror,) + tail]
            if a:  # out[b + n + j] = out[b + n - 1 - shift - j]
                stop = b + n - 1 - shift - a
                source = slice(b + n - 1 - shift, stop if stop >= 0 else None, -1)
                out[lead + (slice(b + n, b + n + a),) + tail] = out[lead + (source,) + tail]
        return out

    def vjp(g, out, x, paddings, *, mode):
        shift = 1 if mode == "REFLECT" else 0
        pads = paddings.tolist() if type(paddings) is np.ndarray else paddings
        gx = g
        for axis, (n, (b, a)) in enumerate(zip(x.shape, pads)):
            if not (b or a):
                continue
            lead = (slice(None),) * axis
            core = gx[lead + (slice(b, b + n),)].copy()
            if b:  # padded entry i copies entry b - i (REFLECT) or b - 1 - i (SYMMETRIC)
                core[lead + (slice(shift, shift + b),)] += np.flip(gx[lead + (slice(0, b),)], axis)
            if a:  # padded entry b + n + j copies entry n - 2 - j (REFLECT) or n - 1 - j
                after = np.flip(gx[lead + (slice(b + n, b + n + a),)], axis)
                core[lead + (slice(n - shift - a, n - shift),)] += after
            gx = core
        return gx, None


@block("Reverse", category="array_ops", aliases=("ReverseV2", "reverse"))
class Reverse:
    """Reverses the order of entries of ``tensor`` along each axis listed in ``axis``.

    TensorFlow's ``tf.reverse`` (op ReverseV2): ``axis`` lists distinct axes, negative ones
    counting from the end; an empty list changes nothing. The result is a view. The gradient is
    ``g`` reversed the same way.
    """

    inputs = (Input("tensor"), Input("axis", dtype="int", static=True, doc="the axes to reverse"))
    outputs = (Output("output"),)
    grad_rule = "dtensor = g reversed along the same axes"

    def infer(x, axis):
        normalize_axis(static_ints("Reverse", "axis", axis), x.rank)
        return fold("Reverse", TensorType(x.shape, x.dtype), Reverse.forward, x, axis)

    def forward(x, axis):
        return np.flip(x, axis=tuple(axis.reshape(-1).tolist()) if type(axis) is np.ndarray else axis)

    def vjp(g, out, x, axis):
        return np.flip(g, axis=tuple(axis.reshape(-1).tolist()) if type(axis) is np.ndarray else axis), None
