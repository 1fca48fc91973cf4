"""What the block modules share: constants typed like the tensors they meet, shapes in messages,
dtype and shape checks, and the declaration of a block from functions (the block families).

Holds no block. Imports only blockflow.spec and numpy.
"""
from __future__ import annotations

import inspect
from types import FunctionType

import numpy as np

from blockflow.spec import DTYPE_NAMES, ShapeError, TensorType, block, broadcast_shapes

FLOAT_NAMES = ("float16", "float32", "float64")

# Constants typed like the tensor they meet: a Python float would turn a float32 numpy scalar
# (a 0-d result) into float64 under numpy 1.x rules. A dict lookup costs far less than
# ``x.dtype.type(1)`` in the tiny elementwise ops.
ONE = {np.dtype(n): np.dtype(n).type(1) for n in DTYPE_NAMES}
ZERO = {np.dtype(n): np.dtype(n).type(0) for n in DTYPE_NAMES}
BOOL = np.dtype(bool)
# The ufunc reductions themselves (``reduce_min(x, axis=None)``): the array methods add a Python
# layer per call.
reduce_min, reduce_max = np.minimum.reduce, np.maximum.reduce
# np.einsum without its Python layers (argument checks, __array_function__ dispatch): what
# np.einsum calls when not asked to optimize, so the same sums in the same order.
try:
    from numpy._core.multiarray import c_einsum as einsum
except ImportError:  # numpy 1.x
    try:
        from numpy.core.multiarray import c_einsum as einsum
    except ImportError:
        einsum = np.einsum


def typed(value):
    """``value`` as a scalar of each float dtype (see ONE for why constants are typed)."""
    return {np.dtype(n): np.dtype(n).type(value) for n in FLOAT_NAMES}


def fmt_shape(shape) -> str:
    """A shape as the error messages write it, ``?`` for a size unknown when compiling: [2,?]."""
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


def like(x):
    """The type of an elementwise result: x's shape and dtype, without x's constant value."""
    return TensorType(x.shape, x.dtype)


def merge_shapes(op, a, b, what="shapes"):
    """The one shape two shapes with unknown sizes can both be; ShapeError when none."""
    if len(a) != len(b):
        raise ShapeError(f"{op}: {what} {fmt_shape(a)} and {fmt_shape(b)} differ in rank")
    out = []
    for da, db in zip(a, b):
        if da is not None and db is not None and da != db:
            raise ShapeError(f"{op}: {what} {fmt_shape(a)} and {fmt_shape(b)} differ")
        out.append(db if da is None else da)
    return tuple(out)


def broadcast_or_none(*shapes):
    """numpy's broadcast of known ``shapes``, or None when they do not broadcast."""
    try:
        return np.broadcast_shapes(*shapes)
    except ValueError:
        return None


def check_arithmetic(op, *types):
    """The dtype rules infer checks for the arithmetic ops with a type variable ``T``."""
    first = types[0]
    for t in types[1:]:
        if t.dtype != first.dtype:
            raise ShapeError(f"{op} needs inputs of one dtype, got {first.dtype.name} and {t.dtype.name}")
    if first.dtype.kind == "b":
        raise ShapeError(f"{op} does not take bool tensors")


def binary_infer(op, x, y):
    """The type of an elementwise arithmetic op of ``x`` and ``y`` with numpy broadcasting."""
    check_arithmetic(op, x, y)
    return TensorType(broadcast_shapes(x.shape, y.shape), x.dtype)


def no_bool(op, t):
    """``t``'s shape and dtype, refusing a bool tensor."""
    if t.dtype.kind == "b":
        raise ShapeError(f"{op} does not take bool tensors, got {t}")
    return TensorType(t.shape, t.dtype)


def shared_batch(op, rows, labels, names):
    """The batch size of [batch, classes] ``rows`` and [batch] ``labels`` (None: unknown), which
    ``names`` name in the messages; ShapeError when their ranks or batch sizes do not fit."""
    r, lab = names
    if rows.rank != 2 or labels.rank != 1:
        raise ShapeError(f"{op} needs [batch, classes] {r} and [batch] {lab}, got {rows} and {labels}")
    a, b = rows.shape[0], labels.shape[0]
    if a is not None and b is not None and a != b:
        raise ShapeError(f"{op}: {r} {fmt_shape(rows.shape)} and {lab} {fmt_shape(labels.shape)} differ in "
                         f"batch size")
    return b if a is None else a


def single_int(op, name, value) -> int:
    """A static operand that must be one integer (an int or a 0-d integer array), as an int."""
    if type(value) is int:
        return value
    a = np.asarray(value)
    if a.ndim != 0 or a.dtype.kind not in "iu":
        raise ShapeError(f"{op}: {name} must be a single integer, got {a.tolist()!r}")
    return int(a)


def negate_fresh(t):
    """``-t`` for a freshly computed ``t``: in place when it is an array (a 0-d result may be a
    numpy scalar, which has no buffer to write)."""
    if type(t) is np.ndarray:
        return np.negative(t, out=t)
    return -t


def declare(name, doc, aliases=(), *, category, module, **body):
    """The block ``name`` made as a class statement in ``module`` with docstring ``doc`` and
    ``body`` (ports, attrs, infer, forward, vjp) would make it, and declared with @block.

    A family's blocks (the unary math functions, the comparisons, ...) differ only in a name, a
    ufunc, a gradient rule and their docstrings: a factory makes forward, infer and vjp as
    closures over those, so a call costs what a hand-written method costs. Those closures (and
    lambdas) are named here after the block, as a class statement names its methods
    (``Sin.forward``).
    """
    for key, fn in body.items():
        if isinstance(fn, FunctionType) and ("<locals>" in fn.__qualname__ or fn.__name__ == "<lambda>"):
            fn.__name__, fn.__qualname__ = key, f"{name}.{key}"
    body.update(__module__=module, __qualname__=name, __doc__=inspect.cleandoc(doc))
    return block(name, category=category, aliases=aliases)(type(name, (), body))
