"""array_ops, new shapes for the same entries and questions about shapes: Reshape, Transpose,
ExpandDims, Squeeze; Shape, ShapeN, Size, Rank.

Imports only blockflow.spec and numpy.
"""
from __future__ import annotations

import math

import numpy as np

from blockflow.spec import Attr, Input, InputList, Output, OutputList, ShapeError, TensorType, block

from .common import fmt_shape
from .folding import as_int, axis_in, fold, static_int


@block("Reshape", category="array_ops")
class Reshape:
    """Gives ``tensor`` a new shape with the same elements, in row-major order.

    ``shape`` is a list of sizes; at most one of them may be -1, which stands for whatever size
    makes the element count match (``[-1]`` flattens). The count must match exactly.
    """

    inputs = (Input("tensor"), Input("shape", dtype="int", static=True, doc="the new sizes; one may be -1"))
    outputs = (Output("output"),)
    grad_rule = "dtensor = g reshaped to tensor's shape"

    def infer(tensor, shape):
        target = np.asarray(shape)
        if target.ndim != 1 or (target.size and target.dtype.kind not in "iu"):
            raise ShapeError(f"Reshape: shape must be a list of integer sizes, got {target.tolist()!r}")
        dims = [int(d) for d in target]
        if any(d < -1 for d in dims) or dims.count(-1) > 1:
            raise ShapeError(f"Reshape: sizes must be at least 0 with at most one -1, got {dims}")
        known = math.prod(d for d in dims if d != -1)
        size = tensor.size
        if -1 in dims:
            if known == 0:
                raise ShapeError(f"Reshape: cannot work out the -1 in {dims}: the other sizes multiply to 0")
            if size is not None and size % known:
                raise ShapeError(f"Reshape: {size} elements of {fmt_shape(tensor.shape)} do not fit shape {dims}")
            fill = None if size is None else size // known
            return TensorType(tuple(fill if d == -1 else d for d in dims), tensor.dtype)
        if size is not None and size != known:
            raise ShapeError(f"Reshape: {size} elements of {fmt_shape(tensor.shape)} do not fit shape {dims} "
                             f"({known} elements)")
        return TensorType(tuple(dims), tensor.dtype)

    def forward(tensor, shape):
        return np.reshape(tensor, shape)

    def vjp(g, out, tensor, shape):
        return (g.reshape(tensor.shape), None)


def _check_perm(perm, rank):
    p = np.asarray(perm)
    if p.ndim != 1 or sorted(p.tolist()) != list(range(rank)):
        raise ShapeError(f"Transpose: perm {p.tolist()!r} is not a permutation of the {rank} axes "
                         f"0..{rank - 1}")
    return p.tolist()


@block("Transpose", category="array_ops")
class Transpose:
    """Permutes the axes of ``x``: axis ``i`` of the result is axis ``perm[i]`` of ``x``.

    Without ``perm`` the axes are reversed (a matrix is transposed).
    """

    inputs = (Input("x"), Input("perm", dtype="int", static=True, optional=True,
                                doc="the new order of the axes; reversed when unwired"))
    outputs = (Output("y"),)
    grad_rule = """
        dx = g transposed by the inverse permutation argsort(perm) (axes reversed again when perm is unwired)
        """

    def infer(x, perm):
        if perm is None:
            return TensorType(x.shape[::-1], x.dtype)
        return TensorType(tuple(x.shape[i] for i in _check_perm(perm, x.rank)), x.dtype)

    def forward(x, perm):
        return np.transpose(x, perm)

    def vjp(g, out, x, perm):
        return (np.transpose(g, None if perm is None else np.argsort(perm)), None)


# --------------------------------------------------------------------------------------------
# Adding and removing size-1 axes


@block("ExpandDims", category="array_ops")
class ExpandDims:
    """Inserts a size-1 axis into ``input`` at position ``axis``.

    ``axis`` is in [-rank-1, rank]; a negative one counts from the end of the *result*
    (``-1`` appends an axis), as in TensorFlow's ``tf.expand_dims``. The gradient is reshaped
    back.
    """

    inputs = (Input("input"), Input("axis", dtype="int", static=True, doc="where the new axis goes"))
    outputs = (Output("output"),)
    grad_rule = "dinput = g reshaped to input's shape (the inserted size-1 axis removed)"

    def infer(x, axis):
        a = axis_in("ExpandDims", static_int("ExpandDims", "axis", axis), x.rank + 1)
        t = TensorType(x.shape[:a] + (1,) + x.shape[a:], x.dtype)
        return fold("ExpandDims", t, ExpandDims.forward, x, axis)

    def forward(x, axis):
        a = as_int(axis)
        s = x.shape
        if a < 0:
            a += len(s) + 1
        return x.reshape(s[:a] + (1,) + s[a:])

    def vjp(g, out, x, axis):
        return (g.reshape(x.shape), None)


def _squeeze_axes(op, shape, axis):
    """The axes Squeeze removes, checked against the known sizes."""
    rank = len(shape)
    if not axis:
        if None in shape:
            raise ShapeError(f"{op}: cannot tell which of the unknown sizes in {fmt_shape(shape)} are 1; "
                             f"list the axes to remove in 'axis'")
        return tuple(i for i, d in enumerate(shape) if d == 1)
    axes = set()
    for a in axis:
        i = axis_in(op, a, rank)
        if shape[i] is not None and shape[i] != 1:
            raise ShapeError(f"{op}: cannot remove axis {a} of {fmt_shape(shape)}: its size is {shape[i]}, not 1")
        axes.add(i)
    return tuple(sorted(axes))


@block("Squeeze", category="array_ops")
class Squeeze:
    """Removes size-1 axes of ``input``: those listed in ``axis``, or all of them.

    TensorFlow's ``tf.squeeze`` (the op's ``squeeze_dims``): removing an axis whose size is not 1
    is an error. Without ``axis`` every size-1 axis goes, which needs the input's sizes known when
    compiling (list the axes when the input has open sizes, such as a batch dimension). The
    gradient is reshaped back.
    """

    inputs = (Input("input"),)
    outputs = (Output("output"),)
    attrs = (Attr("axis", "ints", (), doc="the size-1 axes to remove; all of them when empty"),)
    grad_rule = "dinput = g reshaped to input's shape (the removed size-1 axes put back)"

    def infer(x, *, axis):
        axes = _squeeze_axes("Squeeze", x.shape, axis)
        t = TensorType(tuple(d for i, d in enumerate(x.shape) if i not in axes), x.dtype)
        return fold("Squeeze", t, Squeeze.forward, x, axis=axis)

    def forward(x, *, axis):
        if not axis:
            return x.squeeze()
        s = x.shape
        axes = _squeeze_axes("Squeeze", s, axis)
        return x.reshape(tuple(d for i, d in enumerate(s) if i not in axes))

    def vjp(g, out, x, *, axis):
        return (g.reshape(x.shape),)


# --------------------------------------------------------------------------------------------
# Shape queries


_SHAPE_TYPES = ("int32", "int64")


@block("Shape", category="array_ops", aliases=("shape",))
class Shape:
    """The shape of ``input`` as a 1-D integer tensor.

    TensorFlow's ``tf.shape``, with ``out_type`` int32 or int64. When the input's shape is
    fully known at compile time, the result is a constant that can feed static ports (Reshape's
    ``shape``, Fill's ``dims``, ...). Not differentiable (an integer output).
    """

    inputs = (Input("input", dtype="any"),)
    outputs = (Output("output"),)
    attrs = (Attr("out_type", "dtype", "int32", choices=_SHAPE_TYPES),)

    def infer(x, *, out_type):
        value = None if None in x.shape else np.array(x.shape, dtype=out_type)
        return TensorType((x.rank,), out_type, value)

    def forward(x, *, out_type):
        return np.array(x.shape, dtype=out_type)


@block("ShapeN", category="array_ops", aliases=("shape_n",))
class ShapeN:
    """The shapes of several tensors, one 1-D integer output per input.

    TensorFlow's ``tf.shape_n``; like Shape, each output whose input has a fully known shape is a
    compile-time constant. Not differentiable (integer outputs).
    """

    inputs = (InputList("input", dtype="any"),)
    outputs = (OutputList("output", count="input"),)
    attrs = (Attr("out_type", "dtype", "int32", choices=_SHAPE_TYPES),)

    def infer(xs, *, out_type):
        return [Shape.infer(x, out_type=out_type) for x in xs]

    def forward(xs, *, out_type):
        return [np.array(x.shape, dtype=out_type) for x in xs]


@block("Size", category="array_ops", aliases=("size",))
class Size:
    """The number of entries of ``input``, as an integer scalar.

    TensorFlow's ``tf.size``, with ``out_type`` int32 or int64; a compile-time constant when the
    input's shape is fully known. Not differentiable (an integer output).
    """

    inputs = (Input("input", dtype="any"),)
    outputs = (Output("output"),)
    attrs = (Attr("out_type", "dtype", "int32", choices=_SHAPE_TYPES),)

    def infer(x, *, out_type):
        n = x.size
        return TensorType((), out_type, None if n is None else np.array(n, dtype=out_type))

    def forward(x, *, out_type):
        return np.array(x.size, dtype=out_type)


@block("Rank", category="array_ops", aliases=("rank",))
class Rank:
    """The number of axes of ``input``, as an int32 scalar (always a compile-time constant).

    TensorFlow's ``tf.rank``. Not differentiable (an integer output).
    """

    inputs = (Input("input", dtype="any"),)
    outputs = (Output("output"),)

    def infer(x):
        return TensorType((), "int32", np.array(x.rank, dtype=np.int32))

    def forward(x):
        return np.array(x.ndim, dtype=np.int32)
