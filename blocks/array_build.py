"""array_ops, building tensors: OneHot, Fill, ZerosLike, OnesLike; Diag and DiagPart.

Imports only blockflow.spec and numpy.
"""
from __future__ import annotations

import math

import numpy as np

from blockflow.spec import Attr, Input, Output, ShapeError, TensorType, block

from .common import declare, merge_shapes
from .folding import as_int, fold, static_int, static_sizes


def _check_scalar(op, name, t):
    if t.rank:
        raise ShapeError(f"{op}: {name} must be a scalar, got {t}")


@block("OneHot", category="array_ops", aliases=("one_hot",))
class OneHot:
    """One-hot encoding: ``on_value`` where ``indices`` equals the position along a new axis.

    TensorFlow's ``tf.one_hot``: a new axis of size ``depth`` goes in at ``axis`` (-1: last);
    an index outside [0, depth) gives a row of ``off_value``. The result has the dtype of
    ``on_value``/``off_value`` (float32 1 and 0 when unwired). Not differentiable: it is a
    function of integer indices only.
    """

    inputs = (Input("indices", dtype="int"),
              Input("depth", dtype="int", static=True, doc="the size of the new axis"),
              Input("on_value", optional=True, default=np.float32(1.0), doc="1.0 when unwired"),
              Input("off_value", optional=True, default=np.float32(0.0), doc="0.0 when unwired"))
    outputs = (Output("output"),)
    attrs = (Attr("axis", "int", -1, min=-1, doc="where the new axis goes; -1 appends it"),)

    def infer(indices, depth, on_value, off_value, *, axis):
        d = static_int("OneHot", "depth", depth)
        if d < 0:
            raise ShapeError(f"OneHot: depth must be at least 0, got {d}")
        dtype = np.dtype(np.float32)
        for name, t in (("on_value", on_value), ("off_value", off_value)):
            if t is not None:
                _check_scalar("OneHot", name, t)
                dtype = t.dtype
        if on_value is not None and off_value is not None and on_value.dtype != off_value.dtype:
            raise ShapeError(f"OneHot: on_value is {on_value.dtype.name} but off_value is "
                             f"{off_value.dtype.name}")
        if axis > indices.rank:
            raise ShapeError(f"OneHot: axis {axis} is out of range for indices of rank {indices.rank} "
                             f"(it must be in [-1, {indices.rank}])")
        a = indices.rank if axis == -1 else axis
        t = TensorType(indices.shape[:a] + (d,) + indices.shape[a:], dtype)
        return fold("OneHot", t, OneHot.forward, indices, depth, on_value, off_value, axis=axis)

    def forward(indices, depth, on_value, off_value, *, axis):
        if on_value is None:
            on_value = np.float32(1.0) if off_value is None else off_value.dtype.type(1)
        if off_value is None:
            off_value = on_value.dtype.type(0)
        s = indices.shape
        a = len(s) if axis == -1 else axis
        positions = np.arange(as_int(depth)).reshape((-1,) + (1,) * (len(s) - a))
        return np.where(indices.reshape(s[:a] + (1,) + s[a:]) == positions, on_value, off_value)


@block("Fill", category="array_ops", aliases=("fill",))
class Fill:
    """A tensor of shape ``dims`` with every entry ``value`` (a scalar).

    TensorFlow's ``tf.fill``. The gradient to ``value`` is the sum of ``g``.
    """

    inputs = (Input("dims", dtype="int", static=True, doc="the result's shape"),
              Input("value", doc="the scalar to repeat"))
    outputs = (Output("output"),)
    grad_rule = "dvalue = Σ g, the sum of every entry of g"

    def infer(dims, value):
        shape = static_sizes("Fill", "dims", dims)
        _check_scalar("Fill", "value", value)
        return fold("Fill", TensorType(shape, value.dtype), Fill.forward, dims, value)

    def forward(dims, value):
        return np.full(dims, value, value.dtype)

    def vjp(g, out, dims, value):
        return None, np.asarray(np.add.reduce(g, axis=None, dtype=g.dtype))


def _filled_like(name, fill, doc):
    """A block giving ``fill(x)`` (np.zeros_like, np.ones_like): a tensor of x's shape and dtype."""
    def infer(x):
        return TensorType(x.shape, x.dtype)

    def forward(x):
        return fill(x)

    return declare(name, doc, (fill.__name__,), category="array_ops", module=__name__,
                   inputs=(Input("x", dtype="any"),), outputs=(Output("y"),), infer=infer, forward=forward)


ZerosLike = _filled_like("ZerosLike", np.zeros_like, """
    Zeros of the shape and dtype of ``x``.

    TensorFlow's ``tf.zeros_like``. Not differentiable: the result does not depend on the
    values of ``x``.
    """)


OnesLike = _filled_like("OnesLike", np.ones_like, """
    Ones of the shape and dtype of ``x``.

    TensorFlow's ``tf.ones_like``. Not differentiable: the result does not depend on the values
    of ``x``.
    """)


# --------------------------------------------------------------------------------------------
# Diagonals


@block("Diag", category="array_ops")
class Diag:
    """A tensor with ``diagonal`` on its diagonal and zeros elsewhere: shape D + D for D-shaped input.

    TensorFlow's ``tf.raw_ops.Diag``: for ``diagonal`` of shape [D1, ..., Dk] the result is
    [D1, ..., Dk, D1, ..., Dk] with ``output[i1..ik, i1..ik] = diagonal[i1..ik]`` (a vector gives
    a diagonal matrix). The gradient is the diagonal part of ``g``.
    """

    inputs = (Input("diagonal", dtype="number"),)
    outputs = (Output("output"),)
    grad_rule = "ddiagonal = the diagonal part of g (DiagPart(g))"

    def infer(d):
        return fold("Diag", TensorType(d.shape + d.shape, d.dtype), Diag.forward, d)

    def forward(d):
        n = d.size
        out = np.zeros((n, n), d.dtype)
        out.flat[::n + 1] = d.reshape(-1)
        return out.reshape(d.shape + d.shape)

    def vjp(g, out, d):
        n = d.size
        return (g.reshape(n, n).diagonal().reshape(d.shape),)


@block("DiagPart", category="array_ops")
class DiagPart:
    """The diagonal of a tensor of shape D + D, of shape D: Diag's inverse.

    TensorFlow's ``tf.raw_ops.DiagPart``: ``output[i1..ik] = input[i1..ik, i1..ik]`` (the
    diagonal of a square matrix). The gradient puts ``g`` on the diagonal of zeros.
    """

    inputs = (Input("input", dtype="number"),)
    outputs = (Output("diagonal"),)
    grad_rule = "dinput = g placed on the diagonal of zeros of input's shape (Diag(g))"

    def infer(x):
        k = x.rank // 2
        if x.rank % 2 or not k:
            raise ShapeError(f"DiagPart needs a tensor of even rank (2 or more), got {x}")
        half = merge_shapes("DiagPart", x.shape[:k], x.shape[k:], "halves of the shape")
        return fold("DiagPart", TensorType(half, x.dtype), DiagPart.forward, x)

    def forward(x):
        k = x.ndim // 2
        half = x.shape[:k]
        if half != x.shape[k:]:
            raise ShapeError(f"DiagPart: the halves of the shape {list(x.shape)} differ")
        n = math.prod(half)
        return x.reshape(n, n).diagonal().reshape(half)

    def vjp(g, out, x):
        return (Diag.forward(g),)
