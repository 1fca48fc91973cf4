"""math_ops: elementwise arithmetic, reductions and matrix products.

Imports only blockflow.spec and numpy.
"""
from __future__ import annotations

import numpy as np

from blockflow.spec import (DTYPE_NAMES, Attr, Input, InputList, Output, ShapeError, TensorType,
                            block, broadcast_shapes, normalize_axis, reduce_shape, unbroadcast)

# Constants typed like the tensor they meet: a Python float would turn a float32 numpy scalar
# (a 0-d result) into float64 under numpy 1.x rules. A dict lookup costs far less than
# ``x.dtype.type(1)`` in the tiny elementwise ops.
_ONE = {np.dtype(n): np.dtype(n).type(1) for n in DTYPE_NAMES}
# exp(-x) overflows for x below -log(max); Sigmoid clips its argument there (the true value is
# below the smallest normal float anyway) so that no overflow warning is raised.
_EXP_ARG_MAX = {np.dtype(n): np.dtype(n).type(np.floor(np.log(np.finfo(n).max)))
                for n in ("float16", "float32", "float64")}


def _check_arithmetic(op, *types):
    """The dtype rules infer checks for the arithmetic ops with a type variable ``T``."""
    first = types[0]
    for t in types[1:]:
        if t.dtype != first.dtype:
            raise ShapeError(f"{op} needs inputs of one dtype, got {first.dtype.name} and {t.dtype.name}")
    if first.dtype.kind == "b":
        raise ShapeError(f"{op} does not take bool tensors")


def _binary_infer(op, x, y):
    _check_arithmetic(op, x, y)
    return TensorType(broadcast_shapes(x.shape, y.shape), x.dtype)


def _merge_shapes(what, a, b):
    """The one shape two shapes with unknown sizes can both be; ShapeError when none."""
    if len(a) != len(b):
        raise ShapeError(f"{what}: shapes {_fmt(a)} and {_fmt(b)} differ in rank")
    out = []
    for da, db in zip(a, b):
        if da is not None and db is not None and da != db:
            raise ShapeError(f"{what}: shapes {_fmt(a)} and {_fmt(b)} differ")
        out.append(db if da is None else da)
    return tuple(out)


def _like(x):
    """The type of an elementwise result: x's shape and dtype, without x's constant value."""
    return TensorType(x.shape, x.dtype)


def _fmt(shape) -> str:
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


def _axes(axis, ndim):
    """numpy's ``axis`` for a reduction: None (every axis) or a tuple of valid axes.

    normalize_axis accepts axis 0 for a scalar (as a no-op), which numpy itself rejects.
    """
    if axis is None:
        return None
    return normalize_axis(axis, ndim) if ndim else ()


# A reduction's cotangent is its output's cotangent repeated over the reduced axes. For small
# inputs, writing it out costs less than np.broadcast_to (several microseconds of Python per call);
# for large ones the read-only view saves the memory traffic.
_VIEW_MIN_SIZE = 4096


def _spread(g, x, axes, keep_dims):
    """The cotangent ``g`` of a reduction of ``x`` over ``axes``, repeated to x's shape."""
    if not keep_dims and axes is not None:
        g = g.reshape(_kept_shape(x.shape, axes))
    if x.size >= _VIEW_MIN_SIZE:
        return np.broadcast_to(g, x.shape)
    out = np.empty(x.shape, x.dtype)
    out[...] = g
    return out


def _kept_shape(shape, axes):
    """``shape`` with the reduced ``axes`` (None: all) kept as size 1."""
    if axes is None:
        return (1,) * len(shape)
    return tuple(1 if i in axes else d for i, d in enumerate(shape))


# --------------------------------------------------------------------------------------------
# Elementwise binary ops


@block("Add", category="math_ops", aliases=("AddV2",))
class Add:
    """Elementwise ``x + y`` with numpy broadcasting."""

    inputs = (Input("x"), Input("y"))
    outputs = (Output("z"),)

    def infer(x, y):
        return _binary_infer("Add", x, y)

    def forward(x, y):
        return x + y

    def vjp(g, out, x, y, *, needs):
        return (unbroadcast(g, x.shape) if needs[0] else None,
                unbroadcast(g, y.shape) if needs[1] else None)


@block("Subtract", category="math_ops", aliases=("Sub",))
class Subtract:
    """Elementwise ``x - y`` with numpy broadcasting."""

    inputs = (Input("x"), Input("y"))
    outputs = (Output("z"),)

    def infer(x, y):
        return _binary_infer("Subtract", x, y)

    def forward(x, y):
        return x - y

    def vjp(g, out, x, y, *, needs):
        return (unbroadcast(g, x.shape) if needs[0] else None,
                np.negative(unbroadcast(g, y.shape)) if needs[1] else None)


@block("Multiply", category="math_ops", aliases=("Mul",))
class Multiply:
    """Elementwise ``x * y`` with numpy broadcasting."""

    inputs = (Input("x"), Input("y"))
    outputs = (Output("z"),)

    def infer(x, y):
        return _binary_infer("Multiply", x, y)

    def forward(x, y):
        return x * y

    def vjp(g, out, x, y, *, needs):
        return (unbroadcast(g * y, x.shape) if needs[0] else None,
                unbroadcast(g * x, y.shape) if needs[1] else None)


@block("RealDiv", category="math_ops", aliases=("Div",))
class RealDiv:
    """Elementwise ``x / y`` of floating-point tensors, with numpy broadcasting.

    Division by zero gives ``inf`` (or ``nan`` for 0/0) as in IEEE arithmetic; the run reports
    where it first appears.
    """

    inputs = (Input("x", dtype="float"), Input("y", dtype="float"))
    outputs = (Output("z"),)

    def infer(x, y):
        return _binary_infer("RealDiv", x, y)

    def forward(x, y):
        return x / y

    def vjp(g, out, x, y, *, needs):
        gx = gy = None
        q = g / y  # dz/dx = 1/y, and dz/dy = -x/y**2 = -(1/y) * z
        if needs[0]:
            gx = unbroadcast(q, x.shape)
        if needs[1]:
            if needs[0]:
                q = q * out
            else:
                q *= out  # q is fresh and has out's shape
            gy = np.negative(unbroadcast(q, y.shape))
        return gx, gy


@block("AddN", category="math_ops")
class AddN:
    """Elementwise sum of any number of tensors of the same shape and dtype.

    Unlike Add, AddN does not broadcast: every input must have exactly the same shape, as in
    TensorFlow's ``tf.add_n``.
    """

    inputs = (InputList("inputs", doc="the tensors to add, all of one shape"),)
    outputs = (Output("sum"),)

    def infer(inputs):
        _check_arithmetic("AddN", *inputs)
        shape = inputs[0].shape
        for t in inputs[1:]:
            shape = _merge_shapes("AddN", shape, t.shape)
        return TensorType(shape, inputs[0].dtype)

    def forward(inputs):
        first = inputs[0]
        if len(inputs) == 1:
            return first
        for x in inputs[1:]:
            if x.shape != first.shape:
                raise ShapeError(f"AddN: shapes {list(first.shape)} and {list(x.shape)} differ")
        total = first + inputs[1]
        for x in inputs[2:]:
            total += x
        return total

    def vjp(g, out, inputs, *, needs):
        return ([g if need else None for need in needs[0]],)


# --------------------------------------------------------------------------------------------
# Elementwise unary ops


@block("Negate", category="math_ops", aliases=("Neg",))
class Negate:
    """Elementwise ``-x``."""

    inputs = (Input("x", dtype="number"),)
    outputs = (Output("y"),)

    def infer(x):
        return _like(x)

    def forward(x):
        return np.negative(x)

    def vjp(g, out, x):
        return (np.negative(g),)


@block("Square", category="math_ops")
class Square:
    """Elementwise ``x * x``."""

    inputs = (Input("x", dtype="number"),)
    outputs = (Output("y"),)

    def infer(x):
        return _like(x)

    def forward(x):
        return x * x

    def vjp(g, out, x):
        t = g * x
        t += t  # 2 * g * x without a constant that could promote a float32 scalar
        return (t,)


@block("Sqrt", category="math_ops")
class Sqrt:
    """Elementwise square root; ``nan`` for negative entries."""

    inputs = (Input("x", dtype="float"),)
    outputs = (Output("y"),)

    def infer(x):
        return _like(x)

    def forward(x):
        return np.sqrt(x)

    def vjp(g, out, x):
        return (g / (out + out),)


@block("Exp", category="math_ops")
class Exp:
    """Elementwise natural exponential ``e ** x``."""

    inputs = (Input("x", dtype="float"),)
    outputs = (Output("y"),)

    def infer(x):
        return _like(x)

    def forward(x):
        return np.exp(x)

    def vjp(g, out, x):
        return (g * out,)


@block("Log", category="math_ops")
class Log:
    """Elementwise natural logarithm; ``-inf`` at 0 and ``nan`` for negative entries."""

    inputs = (Input("x", dtype="float"),)
    outputs = (Output("y"),)

    def infer(x):
        return _like(x)

    def forward(x):
        return np.log(x)

    def vjp(g, out, x):
        return (g / x,)


@block("Tanh", category="math_ops")
class Tanh:
    """Elementwise hyperbolic tangent."""

    inputs = (Input("x", dtype="float"),)
    outputs = (Output("y"),)

    def infer(x):
        return _like(x)

    def forward(x):
        return np.tanh(x)

    def vjp(g, out, x):
        t = _ONE[out.dtype] - out * out
        t *= g
        return (t,)


@block("Sigmoid", category="math_ops")
class Sigmoid:
    """Elementwise logistic function ``1 / (1 + exp(-x))``.

    Accurate in relative terms over the whole range, including far negative ``x`` where the
    result is tiny.
    """

    inputs = (Input("x", dtype="float"),)
    outputs = (Output("y"),)

    def infer(x):
        return _like(x)

    def forward(x):
        e = np.exp(np.minimum(np.negative(x), _EXP_ARG_MAX[x.dtype]))
        e += _ONE[x.dtype]
        return np.reciprocal(e)

    def vjp(g, out, x):
        t = _ONE[out.dtype] - out
        t *= out
        t *= g
        return (t,)


# --------------------------------------------------------------------------------------------
# Matrix product


@block("MatMul", category="math_ops")
class MatMul:
    """Matrix product ``a @ b`` of two 2-D tensors, optionally transposing either first.

    With ``transpose_a`` the product uses ``a``'s transpose (so ``a`` is [k, m]); with
    ``transpose_b`` it uses ``b``'s (so ``b`` is [n, k]). The result is [m, n].
    """

    inputs = (Input("a"), Input("b"))
    outputs = (Output("product"),)
    attrs = (
        Attr("transpose_a", "bool", False, doc="multiply by a's transpose"),
        Attr("transpose_b", "bool", False, doc="multiply by b's transpose"),
    )

    def infer(a, b, *, transpose_a, transpose_b):
        if a.rank != 2 or b.rank != 2:
            raise ShapeError(f"MatMul multiplies matrices (rank 2), got a {a} and b {b}")
        _check_arithmetic("MatMul", a, b)
        m, k = a.shape[::-1] if transpose_a else a.shape
        k2, n = b.shape[::-1] if transpose_b else b.shape
        if k is not None and k2 is not None and k != k2:
            ta, tb = (".T" if transpose_a else ""), (".T" if transpose_b else "")
            raise ShapeError(f"MatMul: inner sizes differ: a{ta} is {_fmt((m, k))}, b{tb} is {_fmt((k2, n))}")
        return TensorType((m, n), a.dtype)

    def forward(a, b, *, transpose_a, transpose_b):
        return np.matmul(a.T if transpose_a else a, b.T if transpose_b else b)

    def vjp(g, out, a, b, *, transpose_a, transpose_b, needs):
        # TensorFlow's _MatMulGrad; the transposes are views that BLAS reads directly.
        ga = gb = None
        if not transpose_a:
            if needs[0]:
                ga = g @ b if transpose_b else g @ b.T
            if needs[1]:
                gb = g.T @ a if transpose_b else a.T @ g
        else:
            if needs[0]:
                ga = b.T @ g.T if transpose_b else b @ g.T
            if needs[1]:
                gb = g.T @ a.T if transpose_b else a @ g
        return ga, gb


# --------------------------------------------------------------------------------------------
# Reductions


@block("Sum", category="math_ops", aliases=("ReduceSum", "reduce_sum"))
class Sum:
    """Sum of ``input`` over ``axis`` (all axes when unwired); ``keep_dims`` keeps them as size 1.

    ``axis`` is an int or a list of ints, negative ones counting from the end. The sum keeps the
    input's dtype (an int32 sum stays int32, as in TensorFlow).
    """

    inputs = (Input("input", dtype="number"), Input("axis", dtype="int", static=True, optional=True))
    outputs = (Output("output"),)
    attrs = (Attr("keep_dims", "bool", False),)

    def infer(x, axis, *, keep_dims):
        return TensorType(reduce_shape(x.shape, axis, keep_dims), x.dtype)

    def forward(x, axis, *, keep_dims):
        return np.sum(x, axis=_axes(axis, x.ndim), dtype=x.dtype, keepdims=keep_dims)

    def vjp(g, out, x, axis, *, keep_dims):
        return (_spread(g, x, _axes(axis, x.ndim), keep_dims), None)


@block("Mean", category="math_ops", aliases=("ReduceMean", "reduce_mean"))
class Mean:
    """Mean of ``input`` over ``axis`` (all axes when unwired); ``keep_dims`` keeps them as size 1.

    ``axis`` is an int or a list of ints, negative ones counting from the end. For integer
    tensors the mean is the sum divided by the count, truncated toward zero, as in TensorFlow.
    """

    inputs = (Input("input", dtype="number"), Input("axis", dtype="int", static=True, optional=True))
    outputs = (Output("output"),)
    attrs = (Attr("keep_dims", "bool", False),)

    def infer(x, axis, *, keep_dims):
        return TensorType(reduce_shape(x.shape, axis, keep_dims), x.dtype)

    def forward(x, axis, *, keep_dims):
        axes = _axes(axis, x.ndim)
        if x.dtype == np.float16:  # np.mean sums float16 in float32
            return np.mean(x, axis=axes, keepdims=keep_dims)
        # np.add.reduce is the sum np.mean does, without np.mean's Python-level overhead.
        total = np.add.reduce(x, axis=axes, dtype=x.dtype, keepdims=keep_dims)
        count = x.size // total.size if total.size else 1
        if x.dtype.kind == "f":
            return total / x.dtype.type(count)  # 0/0 = nan for an empty mean, as np.mean
        return np.trunc(total / max(count, 1)).astype(x.dtype)

    def vjp(g, out, x, axis, *, keep_dims):
        count = x.size // out.size if out.size else 1
        return (_spread(g / x.dtype.type(max(count, 1)), x, _axes(axis, x.ndim), keep_dims), None)


@block("Max", category="math_ops", aliases=("ReduceMax", "reduce_max"))
class Max:
    """Maximum of ``input`` over ``axis`` (all axes when unwired); ``keep_dims`` keeps them.

    The gradient goes to the entries equal to the maximum; when several entries tie, it is split
    evenly among them (TensorFlow's rule): the max of [1, 3, 3] sends [0, 0.5, 0.5].
    """

    inputs = (Input("input", dtype="number"), Input("axis", dtype="int", static=True, optional=True))
    outputs = (Output("output"),)
    attrs = (Attr("keep_dims", "bool", False),)

    def infer(x, axis, *, keep_dims):
        return TensorType(reduce_shape(x.shape, axis, keep_dims), x.dtype)

    def forward(x, axis, *, keep_dims):
        return np.max(x, axis=_axes(axis, x.ndim), keepdims=keep_dims)

    def vjp(g, out, x, axis, *, keep_dims):
        axes = _axes(axis, x.ndim)
        kept = _kept_shape(x.shape, axes)
        mask = x == out.reshape(kept)
        count = mask.sum(axis=axes, keepdims=True, dtype=x.dtype)
        return (mask * (g.reshape(kept) / count), None)
