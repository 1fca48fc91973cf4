"""array_ops: constants, placeholders, identity, StopGradient, reshaping.

Imports only blockflow.spec and numpy.
"""
from __future__ import annotations

import math

import numpy as np

from blockflow.spec import Attr, Input, Output, ShapeError, TensorType, block


def _fmt(shape) -> str:
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


@block("Const", category="array_ops")
class Const:
    """A constant tensor, given as ``value`` and cast to ``dtype``."""

    outputs = (Output("output"),)
    attrs = (
        Attr("value", "tensor", 0.0, doc="the constant's value (a number or nested list)"),
        Attr("dtype", "dtype", "float32"),
    )

    def infer(*, value, dtype):
        arr = np.asarray(value, dtype=dtype)
        return TensorType(arr.shape, arr.dtype, arr)

    def forward(*, value, dtype):
        return np.asarray(value, dtype=dtype)


@block("Placeholder", category="array_ops")
class Placeholder:
    """A tensor fed from outside the graph at run time (the page's saved feed by default).

    ``shape`` may hold -1 for sizes left open (a batch dimension); a feed must match the rest.
    """

    role = "placeholder"
    outputs = (Output("output"),)
    attrs = (
        Attr("dtype", "dtype", "float32"),
        Attr("shape", "shape", (), doc="expected shape; -1 for an open size"),
    )

    def infer(*, dtype, shape):
        return TensorType(shape, dtype)

    def forward(value, *, dtype, shape):
        if type(value) is np.ndarray and value.shape == shape and value.dtype.name == dtype:
            return value  # the common case, checked in one comparison
        arr = np.asarray(value)
        if arr.dtype.kind not in "biuf":
            raise ShapeError(f"a feed must be numeric, got dtype {arr.dtype}")
        if arr.ndim != len(shape) or any(d is not None and d != s for d, s in zip(shape, arr.shape)):
            want = "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"
            raise ShapeError(f"feed has shape {list(arr.shape)}, the Placeholder expects {want}")
        return arr.astype(dtype, copy=False)


@block("Identity", category="array_ops")
class Identity:
    """Returns its input unchanged; the gradient passes straight through."""

    inputs = (Input("input"),)
    outputs = (Output("output"),)

    def infer(x):
        return x

    def forward(x):
        return x

    def vjp(g, out, x):
        return (g,)


@block("StopGradient", category="array_ops")
class StopGradient:
    """Outputs its input as-is; no gradient flows back through it.

    TensorFlow's ``tf.stop_gradient``: in the backward pass the block acts as a constant, so
    nothing upstream of it receives gradient through this path (stable softmax, EM's E-step,
    contrastive divergence's Gibbs sample, adversarial examples).
    """

    inputs = (Input("input"),)
    outputs = (Output("output"),)
    gradient = "stop"

    def infer(x):
        return x

    def forward(x):
        return x


@block("Reshape", category="array_ops")
class Reshape:
    """Gives ``tensor`` a new shape with the same elements, in row-major order.

    ``shape`` is a list of sizes; at most one of them may be -1, which stands for whatever size
    makes the element count match (``[-1]`` flattens). The count must match exactly.
    """

    inputs = (Input("tensor"), Input("shape", dtype="int", static=True, doc="the new sizes; one may be -1"))
    outputs = (Output("output"),)

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
                raise ShapeError(f"Reshape: {size} elements of {_fmt(tensor.shape)} do not fit shape {dims}")
            fill = None if size is None else size // known
            return TensorType(tuple(fill if d == -1 else d for d in dims), tensor.dtype)
        if size is not None and size != known:
            raise ShapeError(f"Reshape: {size} elements of {_fmt(tensor.shape)} do not fit shape {dims} "
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

    def infer(x, perm):
        if perm is None:
            return TensorType(x.shape[::-1], x.dtype)
        return TensorType(tuple(x.shape[i] for i in _check_perm(perm, x.rank)), x.dtype)

    def forward(x, perm):
        return np.transpose(x, perm)

    def vjp(g, out, x, perm):
        return (np.transpose(g, None if perm is None else np.argsort(perm)), None)
