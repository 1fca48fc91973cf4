"""math_ops: elementwise arithmetic and functions, comparisons and logic, reductions, scans,
matrix products, casts and sequences.

Imports only blockflow.spec and numpy.
"""
from __future__ import annotations

import inspect
from types import FunctionType

import numpy as np

from blockflow.spec import (DTYPE_NAMES, Attr, Input, InputList, Output, ShapeError, TensorType,
                            block, broadcast_shapes, normalize_axis, reduce_shape, reserve, unbroadcast)

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
# Block families. A family's blocks differ only in a name, a ufunc, a gradient rule and their
# docstrings: a factory below declares each of them from those, with the rest written once.


def _declare(name, doc, aliases=(), **body):
    """The block ``name`` made as a class statement with docstring ``doc`` and ``body`` (ports,
    infer, forward, vjp) would make it, and declared with @block.

    The factories make forward, infer and vjp as closures over the ufunc and the block's name: a
    call costs what a hand-written method costs. Those closures (and lambdas) are named here
    after the block, as a class statement names its methods (``Sin.forward``).
    """
    for key, fn in body.items():
        if isinstance(fn, FunctionType) and ("<locals>" in fn.__qualname__ or fn.__name__ == "<lambda>"):
            fn.__name__, fn.__qualname__ = key, f"{name}.{key}"
    body.update(__module__=__name__, __qualname__=name, __doc__=inspect.cleandoc(doc))
    return block(name, category="math_ops", aliases=aliases)(type(name, (), body))


def _unary(name, fn, vjp=None, *, doc, dtype="float", aliases=(), rule=""):
    """An elementwise function of one tensor: ``y = fn(x)``, of x's shape and dtype.

    ``fn`` is a numpy ufunc or a function of ``x``. ``vjp(g, out, x)`` is the gradient rule; a
    block without one is not differentiable. ``rule`` states it for people (``dx = g · cos(x)``).
    ``dtype`` is what ``x`` may be.
    """
    if isinstance(fn, np.ufunc):
        ufunc = fn

        def fn(x):
            return ufunc(x)

    body = dict(inputs=(Input("x", dtype=dtype),), outputs=(Output("y"),), infer=_like, forward=fn)
    if vjp is not None:
        body["vjp"] = vjp
    if rule:
        body["grad_rule"] = rule
    return _declare(name, doc, aliases, **body)


def _times(deriv):
    """The gradient rule ``g * deriv(x)``, for a ufunc ``deriv`` (Sin's is ``_times(np.cos)``)."""
    def vjp(g, out, x):
        t = deriv(x)
        t *= g
        return (t,)
    return vjp


# The reductions over ``axis`` with ``keep_dims`` (TensorFlow's ReduceSum and kin).
_REDUCE_AXIS = Input("axis", dtype="int", static=True, optional=True)
_REDUCE_INPUTS = (Input("input", dtype="number"), _REDUCE_AXIS)
_KEEP_DIMS = (Attr("keep_dims", "bool", False),)


def _reduce_infer(x, axis, *, keep_dims):
    return TensorType(reduce_shape(x.shape, axis, keep_dims), x.dtype)


def _ufunc_reduce(ufunc):
    """The forward of a reduction that is ``ufunc.reduce`` over ``axis``."""
    reduce = ufunc.reduce

    def forward(x, axis, *, keep_dims):
        return reduce(x, axis=_axes(axis, x.ndim), keepdims=keep_dims)
    return forward


def _extremum(name, ufunc, example):
    """Max or Min over ``axis``; the gradient goes to the entries equal to the result."""
    def vjp(g, out, x, axis, *, keep_dims):
        axes = _axes(axis, x.ndim)
        kept = _kept_shape(x.shape, axes)
        mask = x == out.reshape(kept)
        count = mask.sum(axis=axes, keepdims=True, dtype=x.dtype)
        return (mask * (g.reshape(kept) / count), None)

    word = ufunc.__name__  # maximum, minimum
    doc = f"""
        {word.title()} of ``input`` over ``axis`` (all axes when unwired); ``keep_dims`` keeps them.

        The gradient goes to the entries equal to the {word}; when several entries tie, it is split
        evenly among them (TensorFlow's rule): {example} sends [0, 0.5, 0.5].
        """
    rule = (f"dinput = g routed to the entries equal to the {name.lower()}, split evenly among ties "
            f"(g / their count each); 0 elsewhere")
    return _declare(name, doc, (f"Reduce{name}", f"reduce_{name.lower()}"), inputs=_REDUCE_INPUTS,
                    outputs=(Output("output"),), attrs=_KEEP_DIMS, infer=_reduce_infer,
                    forward=_ufunc_reduce(ufunc), vjp=vjp, grad_rule=rule)


# --------------------------------------------------------------------------------------------
# Elementwise binary ops


@block("Add", category="math_ops", aliases=("AddV2",))
class Add:
    """Elementwise ``x + y`` with numpy broadcasting."""

    inputs = (Input("x"), Input("y"))
    outputs = (Output("z"),)
    grad_rule = """
        dx = unbroadcast(g)
        dy = unbroadcast(g)
        unbroadcast: summed over the broadcast axes, back to the input's shape
        """

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
    grad_rule = """
        dx = unbroadcast(g)
        dy = −unbroadcast(g)
        unbroadcast: summed over the broadcast axes, back to the input's shape
        """

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
    grad_rule = """
        dx = unbroadcast(g · y)
        dy = unbroadcast(g · x)
        unbroadcast: summed over the broadcast axes, back to the input's shape
        """

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
    grad_rule = """
        dx = unbroadcast(g / y)
        dy = −unbroadcast(g · z / y)   (= −g · x / y²)
        unbroadcast: summed over the broadcast axes, back to the input's shape
        """

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
    grad_rule = "dinputs[i] = g, for every i (no broadcasting)"

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


Negate = _unary("Negate", np.negative, lambda g, out, x: (np.negative(g),), dtype="number",
                aliases=("Neg",), rule="dx = −g", doc="""Elementwise ``-x``.""")


def _square_vjp(g, out, x):
    t = g * x
    t += t  # 2 * g * x without a constant that could promote a float32 scalar
    return (t,)


Square = _unary("Square", lambda x: x * x, _square_vjp, dtype="number",
                rule="dx = 2 · g · x", doc="""Elementwise ``x * x``.""")


Sqrt = _unary("Sqrt", np.sqrt, lambda g, out, x: (g / (out + out),), rule="dx = g / (2 · y)", doc="""
    Elementwise square root; ``nan`` for negative entries.
    """)


Exp = _unary("Exp", np.exp, lambda g, out, x: (g * out,), rule="dx = g · y", doc="""
    Elementwise natural exponential ``e ** x``.
    """)


Log = _unary("Log", np.log, lambda g, out, x: (g / x,), rule="dx = g / x", doc="""
    Elementwise natural logarithm; ``-inf`` at 0 and ``nan`` for negative entries.
    """)


def _tanh_vjp(g, out, x):
    t = _ONE[out.dtype] - out * out
    t *= g
    return (t,)


Tanh = _unary("Tanh", np.tanh, _tanh_vjp, rule="dx = g · (1 − y²)", doc="""Elementwise hyperbolic tangent.""")


def _sigmoid(x):
    e = np.exp(np.minimum(np.negative(x), _EXP_ARG_MAX[x.dtype]))
    e += _ONE[x.dtype]
    return np.reciprocal(e)


def _sigmoid_vjp(g, out, x):
    t = _ONE[out.dtype] - out
    t *= out
    t *= g
    return (t,)


Sigmoid = _unary("Sigmoid", _sigmoid, _sigmoid_vjp, rule="dx = g · y · (1 − y)", doc="""
    Elementwise logistic function ``1 / (1 + exp(-x))``.

    Accurate in relative terms over the whole range, including far negative ``x`` where the
    result is tiny.
    """)


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
    grad_rule = """
        da = g · bᵀ
        db = aᵀ · g
        with transpose_a: da = b · gᵀ, db = a · g
        with transpose_b: da = g · b, db = gᵀ · a
        with both: da = bᵀ · gᵀ, db = gᵀ · aᵀ
        """

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

    inputs = _REDUCE_INPUTS
    outputs = (Output("output"),)
    attrs = _KEEP_DIMS
    grad_rule = "dinput = g broadcast back over the reduced axes"
    infer = _reduce_infer

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

    inputs = _REDUCE_INPUTS
    outputs = (Output("output"),)
    attrs = _KEEP_DIMS
    grad_rule = """
        dinput = g / n broadcast back over the reduced axes
        n: the number of entries averaged into each output
        """
    infer = _reduce_infer

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


Max = _extremum("Max", np.maximum, "the max of [1, 3, 3]")


# --------------------------------------------------------------------------------------------
# Helpers of the blocks below

_FLOAT_NAMES = ("float16", "float32", "float64")


def _typed(value):
    """``value`` as a scalar of each float dtype (see _ONE for why constants are typed)."""
    return {np.dtype(n): np.dtype(n).type(value) for n in _FLOAT_NAMES}


_ZERO = {np.dtype(n): np.dtype(n).type(0) for n in DTYPE_NAMES}
_NEG_HALF = _typed(-0.5)
_TWO_OVER_SQRT_PI = _typed(2.0 / np.sqrt(np.pi))
# |out| of a product within these bounds: the product is accurate and out / x is safe.
_TINY = {np.dtype(n): np.finfo(n).tiny for n in _FLOAT_NAMES}
_HUGE = {np.dtype(n): np.finfo(n).max for n in _FLOAT_NAMES}
_BOOL = np.dtype(bool)


def _ineg(t):
    """``-t`` for a freshly computed ``t``: in place when it is an array (a 0-d result may be a
    numpy scalar, which has no buffer to write)."""
    if type(t) is np.ndarray:
        return np.negative(t, out=t)
    return -t


def _mul_no_nan(t, g):
    """``t * g`` for a fresh ``t`` of g's shape, but 0 where ``g`` is 0 even if ``t`` is inf or nan
    (TensorFlow's mul_no_nan: an unused output does not turn into nan)."""
    if np.isfinite(t).all():
        t *= g
        return t
    return np.where(g == 0, _ZERO[t.dtype], t * g)


def _one_axis(op, axis, rank, default=0):
    """A single axis (an int or a 0-d array; ``default`` when None) as a non-negative int."""
    if axis is None:
        axis = default
    if type(axis) is not int:
        a = np.asarray(axis)
        if a.ndim != 0 or a.dtype.kind not in "iu":
            raise ShapeError(f"{op}: the axis must be a single integer, got {a.tolist()!r}")
        axis = int(a)
    if not -rank <= axis < rank:
        raise ShapeError(f"{op}: axis {axis} is out of range for a tensor of rank {rank}")
    return axis % rank


# --------------------------------------------------------------------------------------------
# Elementwise unary ops (float in, float out unless said otherwise)


Abs = _unary("Abs", np.abs, lambda g, out, x: (g * np.sign(x),), dtype="number",
             rule="dx = g · sign(x)   (0 at x = 0)", doc="""
    Elementwise absolute value ``|x|``.

    The gradient is ``g * sign(x)``: 0 at exactly ``x = 0``, as in TensorFlow.
    """)


Sign = _unary("Sign", np.sign, dtype="number", doc="""
    Elementwise sign: -1 where ``x < 0``, 0 where ``x == 0``, 1 where ``x > 0``.

    ``nan`` stays ``nan``. Not differentiable: TensorFlow's gradient of Sign is zero everywhere,
    so no gradient flows back through it (FGSM's ``Sign(Gradients(loss, x))`` is a constant
    step direction).
    """)


def _rsqrt_vjp(g, out, x):
    t = out * out
    t *= out
    t *= g
    t *= _NEG_HALF[out.dtype]
    return (t,)


Rsqrt = _unary("Rsqrt", lambda x: np.reciprocal(np.sqrt(x)), _rsqrt_vjp, rule="dx = −½ · g · y³", doc="""
    Elementwise reciprocal square root ``1 / sqrt(x)``.

    ``inf`` at 0 and ``nan`` for negative entries. The gradient is ``-0.5 * g * y ** 3``.
    """)


def _reciprocal_vjp(g, out, x):
    t = np.negative(out)
    t *= out
    t *= g
    return (t,)


Reciprocal = _unary("Reciprocal", np.reciprocal, _reciprocal_vjp, aliases=("Inv",),
                    rule="dx = −g · y²", doc="""
    Elementwise ``1 / x``; ``inf`` at 0.

    The gradient is ``-g * y ** 2`` (``-g / x ** 2``).
    """)


Log1p = _unary("Log1p", np.log1p, lambda g, out, x: (g / (x + _ONE[x.dtype]),),
               rule="dx = g / (1 + x)", doc="""
    Elementwise ``log(1 + x)``, accurate also for tiny ``x``.

    ``-inf`` at -1 and ``nan`` below. The gradient is ``g / (1 + x)``.
    """)


Expm1 = _unary("Expm1", np.expm1, _times(np.exp), rule="dx = g · exp(x)", doc="""
    Elementwise ``exp(x) - 1``, accurate also for tiny ``x``.

    The gradient is ``g * exp(x)``.
    """)


Sin = _unary("Sin", np.sin, _times(np.cos), rule="dx = g · cos(x)", doc="""
    Elementwise sine (radians). The gradient is ``g * cos(x)``.
    """)


def _cos_vjp(g, out, x):
    t = np.sin(x)
    t *= g
    return (_ineg(t),)


Cos = _unary("Cos", np.cos, _cos_vjp, rule="dx = −g · sin(x)", doc="""
    Elementwise cosine (radians). The gradient is ``-g * sin(x)``.
    """)


def _tan_vjp(g, out, x):
    t = out * out
    t += _ONE[out.dtype]
    t *= g
    return (t,)


Tan = _unary("Tan", np.tan, _tan_vjp, rule="dx = g · (1 + y²)", doc="""
    Elementwise tangent (radians). The gradient is ``g / cos(x) ** 2`` (``g * (1 + y ** 2)``).
    """)


def _asin_vjp(g, out, x):
    one = _ONE[x.dtype]
    return (g / np.sqrt((one - x) * (one + x)),)


Asin = _unary("Asin", np.arcsin, _asin_vjp, rule="dx = g / √((1 − x) · (1 + x))", doc="""
    Elementwise arcsine, in [-pi/2, pi/2]; ``nan`` outside [-1, 1].

    The gradient is ``g / sqrt(1 - x ** 2)`` (computed as ``(1 - x)(1 + x)`` to stay accurate near
    ±1, where it grows without bound).
    """)


def _acos_vjp(g, out, x):
    one = _ONE[x.dtype]
    t = np.sqrt((one - x) * (one + x))
    return (np.negative(g) / t,)


Acos = _unary("Acos", np.arccos, _acos_vjp, rule="dx = −g / √((1 − x) · (1 + x))", doc="""
    Elementwise arccosine, in [0, pi]; ``nan`` outside [-1, 1].

    The gradient is ``-g / sqrt(1 - x ** 2)``.
    """)


def _atan_vjp(g, out, x):
    t = x * x
    t += _ONE[x.dtype]
    return (g / t,)


Atan = _unary("Atan", np.arctan, _atan_vjp, rule="dx = g / (1 + x²)", doc="""
    Elementwise arctangent, in (-pi/2, pi/2). The gradient is ``g / (1 + x ** 2)``.
    """)


Sinh = _unary("Sinh", np.sinh, _times(np.cosh), rule="dx = g · cosh(x)", doc="""
    Elementwise hyperbolic sine. The gradient is ``g * cosh(x)``.
    """)


Cosh = _unary("Cosh", np.cosh, _times(np.sinh), rule="dx = g · sinh(x)", doc="""
    Elementwise hyperbolic cosine. The gradient is ``g * sinh(x)``.
    """)


# W. J. Cody, "Rational Chebyshev approximations for the error function", Math. Comp. 23 (1969),
# 631-637, with the coefficients of his SPECFUN routine CALERF (netlib.org/specfun/erf).
_ERF_A = (3.16112374387056560e00, 1.13864154151050156e02, 3.77485237685302021e02,
          3.20937758913846947e03, 1.85777706184603153e-1)
_ERF_B = (2.36012909523441209e01, 2.44024637934444173e02, 1.28261652607737228e03,
          2.84423683343917062e03)
_ERF_C = (5.64188496988670089e-1, 8.88314979438837594e00, 6.61191906371416295e01,
          2.98635138197400131e02, 8.81952221241769090e02, 1.71204761263407058e03,
          2.05107837782607147e03, 1.23033935479799725e03, 2.15311535474403846e-8)
_ERF_D = (1.57449261107098347e01, 1.17693950891312499e02, 5.37181101862009858e02,
          1.62138957456669019e03, 3.29079923573345963e03, 4.36261909014324716e03,
          3.43936767414372164e03, 1.23033935480374942e03)
_ERF_P = (3.05326634961232344e-1, 3.60344899949804439e-1, 1.25781726111229246e-1,
          1.60837851487422766e-2, 6.58749161529837803e-4, 1.63153871373020978e-2)
_ERF_Q = (2.56852019228982242e00, 1.87295284992346047e00, 5.27905102951428412e-1,
          6.05183413124413191e-2, 2.33520497626869185e-3)
_INV_SQRT_PI = 5.6418958354775628695e-1


def _stacked(num, den):
    """Numerator and denominator coefficients (highest power first, the same degree: Cody's
    denominators are monic) stacked for :func:`_rational`."""
    return np.array([num, den], dtype=np.float64).T[:, :, None]


_ERF_SMALL = _stacked(_ERF_A[4:] + _ERF_A[:4], (1.0,) + _ERF_B)
_ERFC_MID = _stacked(_ERF_C[8:] + _ERF_C[:8], (1.0,) + _ERF_D)
_ERFC_TAIL = _stacked(_ERF_P[5:] + _ERF_P[:5], (1.0,) + _ERF_Q)


def _rational(coefficients, v):
    """num(v) / den(v) for a 1-d array ``v``: Horner's scheme on both polynomials at once."""
    acc = coefficients[0] * v
    acc += coefficients[1]
    for c in coefficients[2:]:
        acc *= v
        acc += c
    return np.divide(acc[0], acc[1], out=acc[0])


def _exp_minus_square(y):
    """exp(-y**2) without the rounding error of y**2: y is split into a part with few bits (its
    square is exact) and the rest, whose exponentials are multiplied (Cody's way)."""
    head = np.trunc(y * 16.0)
    head *= 1.0 / 16.0
    rest = (y - head) * (y + head)
    head *= head
    np.negative(head, out=head)
    np.exp(head, out=head)
    np.negative(rest, out=rest)
    np.exp(rest, out=rest)
    head *= rest
    return head


def _erfc_big(y):
    """erfc(y) for y > 0.46875 (nan stays nan). Beyond 6, erf rounds to 1: y is clipped there."""
    y = np.minimum(y, 6.0)
    tail = y > 4.0
    if not tail.any():
        r = _rational(_ERFC_MID, y)
    else:
        z = np.reciprocal(y * y)
        r = z * _rational(_ERFC_TAIL, z)
        np.subtract(_INV_SQRT_PI, r, out=r)
        r /= y
        mid = ~tail
        if mid.any():
            r[mid] = _rational(_ERFC_MID, y[mid])
    r *= _exp_minus_square(y)
    return r


def _erf64(x):
    """erf of a float64 array, to within a few ulps (Cody's rational Chebyshev approximations).

    Three ranges of ``y = |x|``: up to 0.46875 erf itself; up to 4 and beyond, erfc, from which
    ``erf = 1 - erfc`` loses nothing since erfc < 0.52 there. ``nan`` stays ``nan``, ±inf give ±1.
    """
    shape = np.shape(x)
    x = np.reshape(x, -1)  # 1-d, so that every step below works on arrays
    y = np.abs(x)
    small = y <= 0.46875
    if small.all():
        return (x * _rational(_ERF_SMALL, x * x)).reshape(shape)
    big = None if not small.any() else ~small
    xb = x if big is None else x[big]
    r = _erfc_big(y if big is None else y[big])
    np.subtract(0.5, r, out=r)
    r += 0.5
    np.copysign(r, xb, out=r)
    if big is None:
        return r.reshape(shape)
    out = np.empty_like(y)
    out[big] = r
    xs = x[small]
    out[small] = xs * _rational(_ERF_SMALL, xs * xs)
    return out.reshape(shape)


def _erf(x):
    if x.dtype == np.float64:
        return _erf64(x)
    return _erf64(x.astype(np.float64)).astype(x.dtype)


def _erf_vjp(g, out, x):
    t = x * x
    t = np.exp(_ineg(t))
    t *= _TWO_OVER_SQRT_PI[x.dtype]
    t *= g
    return (t,)


Erf = _unary("Erf", _erf, _erf_vjp, rule="dx = g · 2/√π · exp(−x²)", doc="""
    Elementwise Gauss error function ``erf(x) = 2/sqrt(pi) * integral of exp(-t**2) from 0 to x``.

    Computed in float64 with W. J. Cody's rational Chebyshev approximations (relative error of a
    few ulps over the whole line, tails included) and rounded to the input's dtype. The gradient
    is ``g * 2/sqrt(pi) * exp(-x ** 2)``.
    """)


Floor = _unary("Floor", np.floor, doc="""
    Elementwise floor: the largest integer not greater than ``x``, as a float.

    Not differentiable (TensorFlow gives no gradient: the derivative is 0 almost everywhere).
    """)


Ceil = _unary("Ceil", np.ceil, doc="""
    Elementwise ceiling: the smallest integer not less than ``x``, as a float.

    Not differentiable (TensorFlow gives no gradient).
    """)


def _round(x):
    if x.dtype.kind != "f":
        return x
    return np.rint(x)


Round = _unary("Round", _round, dtype="number", doc="""
    Elementwise rounding to the nearest integer, halves to even (banker's rounding).

    As TensorFlow's ``tf.round``: 0.5 and -0.5 round to 0, 1.5 and 2.5 to 2. Integer tensors pass
    unchanged. Not differentiable (TensorFlow gives no gradient).
    """)


# --------------------------------------------------------------------------------------------
# Elementwise binary ops


@block("Pow", category="math_ops")
class Pow:
    """Elementwise power ``x ** y`` with numpy broadcasting.

    For floats, a negative ``x`` to a non-integer power is ``nan``; for integers, a negative power
    is an error, as in TensorFlow. Gradients (TensorFlow's rule): ``g * y * x ** (y - 1)`` for
    ``x``, and ``g * z * log(x)`` for ``y`` where ``x > 0``, 0 where ``x <= 0``. A zero ``g``
    gives a zero gradient even where the factor is inf or nan (TF's mul_no_nan).
    """

    inputs = (Input("x"), Input("y"))
    outputs = (Output("z"),)
    grad_rule = """
        dx = unbroadcast(g · y · x^(y − 1))
        dy = unbroadcast(g · z · log(x)), with log(x) taken as 0 where x ≤ 0
        a zero g gives 0 even where the factor is inf or nan (TensorFlow's mul_no_nan)
        unbroadcast: summed over the broadcast axes, back to the input's shape
        """

    def infer(x, y):
        return _binary_infer("Pow", x, y)

    def forward(x, y):
        return np.power(x, y)

    def vjp(g, out, x, y, *, needs):
        gx = gy = None
        if needs[0]:
            t = np.power(x, y - _ONE[y.dtype])  # fresh, of z's shape
            t *= y
            gx = unbroadcast(_mul_no_nan(t, g), x.shape)
        if needs[1]:
            log_x = np.log(np.where(x > 0, x, _ONE[x.dtype]))  # log(1) = 0 where x <= 0
            t = out * log_x
            gy = unbroadcast(_mul_no_nan(t, g), y.shape)
        return gx, gy


def _elementwise_extremum(name, ufunc, short, to_x, symbol, rule):
    """Maximum or Minimum: ``ufunc(x, y)``; the gradient goes to ``x`` where ``to_x(x, y)``
    (``symbol``), which ``rule`` states for people."""
    def infer(x, y):
        return _binary_infer(name, x, y)

    def forward(x, y):
        return ufunc(x, y)

    def vjp(g, out, x, y, *, needs):
        return _select_grad(g, to_x(x, y), x, y, needs)

    doc = f"""
        Elementwise ``{short}(x, y)`` with numpy broadcasting.

        The gradient goes to ``x`` where ``x {symbol} y`` and to ``y`` elsewhere: on a tie it all goes to
        ``x`` (TensorFlow's rule).
        """
    return _declare(name, doc, inputs=(Input("x"), Input("y")), outputs=(Output("z"),),
                    infer=infer, forward=forward, vjp=vjp, grad_rule=rule)


def _select_grad(g, to_x, x, y, needs):
    """Maximum/Minimum's cotangents: g goes to x where ``to_x``, to y elsewhere."""
    gx = unbroadcast(g * to_x, x.shape) if needs[0] else None
    gy = unbroadcast(g * np.logical_not(to_x), y.shape) if needs[1] else None
    return gx, gy


Maximum = _elementwise_extremum("Maximum", np.maximum, "max", np.greater_equal, ">=", """
    dx = unbroadcast(g where x ≥ y, else 0)
    dy = unbroadcast(g where x < y, else 0)
    a tie goes to x; unbroadcast: summed over the broadcast axes, back to the input's shape
    """)


Minimum = _elementwise_extremum("Minimum", np.minimum, "min", np.less_equal, "<=", """
    dx = unbroadcast(g where x ≤ y, else 0)
    dy = unbroadcast(g where x > y, else 0)
    a tie goes to x; unbroadcast: summed over the broadcast axes, back to the input's shape
    """)


@block("SquaredDifference", category="math_ops")
class SquaredDifference:
    """Elementwise ``(x - y) ** 2`` with numpy broadcasting.

    Gradients ``2 g (x - y)`` for ``x`` and its negative for ``y``, summed over broadcast axes.
    """

    inputs = (Input("x"), Input("y"))
    outputs = (Output("z"),)
    grad_rule = """
        dx = unbroadcast(2 · g · (x − y))
        dy = −unbroadcast(2 · g · (x − y))
        unbroadcast: summed over the broadcast axes, back to the input's shape
        """

    def infer(x, y):
        return _binary_infer("SquaredDifference", x, y)

    def forward(x, y):
        d = x - y
        d *= d
        return d

    def vjp(g, out, x, y, *, needs):
        d = x - y
        d *= g
        d += d
        return (unbroadcast(d, x.shape) if needs[0] else None,
                np.negative(unbroadcast(d, y.shape)) if needs[1] else None)


def _check_int_divisor(op, x, y):
    if x.dtype.kind in "iu" and not np.all(y):
        raise ZeroDivisionError(f"{op}: integer division by zero")


@block("FloorDiv", category="math_ops")
class FloorDiv:
    """Elementwise division rounded down, ``floor(x / y)``, with numpy broadcasting.

    For integers this is floor division (``-7 // 2 == -4``), and a zero divisor is an error as in
    TensorFlow; for floats it is ``floor(x / y)`` computed as TensorFlow does (so ``1 // 0.1``
    is 10, where Python says 9). Not differentiable (TensorFlow gives no gradient).
    """

    inputs = (Input("x"), Input("y"))
    outputs = (Output("z"),)

    def infer(x, y):
        return _binary_infer("FloorDiv", x, y)

    def forward(x, y):
        if x.dtype.kind == "f":
            return np.floor(x / y)
        _check_int_divisor("FloorDiv", x, y)
        return np.floor_divide(x, y)


@block("FloorMod", category="math_ops", aliases=("Mod",))
class FloorMod:
    """Elementwise remainder of floor division, ``x - floor(x / y) * y``: it has the sign of ``y``.

    As TensorFlow's ``tf.math.floormod`` (``tf.math.mod``): ``-7 mod 3 == 2``, ``7 mod -3 == -2``;
    an integer zero divisor is an error. Gradients (TensorFlow's rule): ``g`` for ``x`` and
    ``-g * floor(x / y)`` for ``y``, summed over broadcast axes.
    """

    inputs = (Input("x"), Input("y"))
    outputs = (Output("z"),)
    grad_rule = """
        dx = unbroadcast(g)
        dy = −unbroadcast(g · floor(x / y))
        unbroadcast: summed over the broadcast axes, back to the input's shape
        """

    def infer(x, y):
        return _binary_infer("FloorMod", x, y)

    def forward(x, y):
        if x.dtype.kind != "f":
            _check_int_divisor("FloorMod", x, y)
        return np.mod(x, y)

    def vjp(g, out, x, y, *, needs):
        gy = None
        if needs[1]:
            t = np.floor(x / y)
            t *= g
            gy = _ineg(unbroadcast(t, y.shape))
        return (unbroadcast(g, x.shape) if needs[0] else None), gy


# --------------------------------------------------------------------------------------------
# Reductions


Min = _extremum("Min", np.minimum, "the min of [3, 1, 1]")


def _others_product(x, axes):
    """For each entry of ``x``, the product of the other entries of its reduction group.

    TensorFlow's way: the reduced axes go first, and the product of the entries before and of
    those after each entry (exclusive running products from both ends) are multiplied. No
    division, so zeros (and products that under- or overflow) are handled exactly.
    """
    red = tuple(range(x.ndim)) if axes is None else axes
    if not red:
        return np.ones(x.shape, x.dtype)
    perm = red + tuple(i for i in range(x.ndim) if i not in red)
    xt = np.transpose(x, perm)
    flat = xt.reshape(int(np.prod([x.shape[i] for i in red])), -1)
    left = np.empty_like(flat)
    left[0] = 1
    np.multiply.accumulate(flat[:-1], axis=0, out=left[1:])
    right = np.empty_like(flat)
    right[-1] = 1
    np.multiply.accumulate(flat[:0:-1], axis=0, out=right[-2::-1])
    left *= right
    return left.reshape(xt.shape).transpose(np.argsort(perm))


@block("Prod", category="math_ops", aliases=("ReduceProd", "reduce_prod"))
class Prod:
    """Product of ``input`` over ``axis`` (all axes when unwired); ``keep_dims`` keeps them.

    The product keeps the input's dtype. The gradient of each entry is ``g`` times the product of
    the other entries of its group: exact also when the input holds zeros (one zero in a group
    gives that entry the product of the rest and the others 0; two zeros give 0 everywhere).
    When the product is a normal, finite number it is computed as ``g * prod / x``; otherwise
    without any division, as TensorFlow does.
    """

    inputs = _REDUCE_INPUTS
    outputs = (Output("output"),)
    attrs = _KEEP_DIMS
    grad_rule = """
        dinput = g · (the product of the other entries of its group), broadcast back over the reduced axes
        computed as g · output / input when the product is a normal, finite number
        otherwise without division, exact also where the input holds zeros
        """
    infer = _reduce_infer

    def forward(x, axis, *, keep_dims):
        return np.multiply.reduce(x, axis=_axes(axis, x.ndim), dtype=x.dtype, keepdims=keep_dims)

    def vjp(g, out, x, axis, *, keep_dims):
        if x.size == 0:
            return (np.zeros(x.shape, x.dtype), None)
        axes = _axes(axis, x.ndim)
        size = np.abs(out)
        if size.min() >= _TINY[x.dtype] and size.max() <= _HUGE[x.dtype]:  # no zero in x, no nan
            return (_spread(g * out, x, axes, keep_dims) / x, None)
        others = _others_product(x, axes)
        others *= g.reshape(_kept_shape(x.shape, axes))
        return (others, None)


def _arg_extremum(name, fn, word):
    """ArgMax or ArgMin: ``fn`` (np.argmax, np.argmin) along one axis, which the result drops."""
    def infer(x, dimension, *, output_type):
        if x.dtype.kind == "b":
            raise ShapeError(f"{name} does not take bool tensors")
        axis = _one_axis(name, dimension, x.rank)
        return TensorType(x.shape[:axis] + x.shape[axis + 1:], output_type)

    def forward(x, dimension, *, output_type):
        return fn(x, axis=_one_axis(name, dimension, x.ndim)).astype(output_type, copy=False)

    doc = f"""
        Index of the {word} entry of ``input`` along ``dimension`` (TF python's ``axis``).

        ``dimension`` is one axis (0 when unwired; negative counts from the end), which the result
        drops. On ties the first index wins, as in TensorFlow. The result is ``output_type`` (int64 by
        default). Not differentiable: an integer output carries no gradient.
        """
    return _declare(name, doc,
                    inputs=(Input("input", dtype="number"),
                            Input("dimension", dtype="int", static=True, optional=True, default=0,
                                  doc="the axis to reduce (TF python's axis)")),
                    outputs=(Output("output", differentiable=False),),
                    attrs=(Attr("output_type", "dtype", "int64", choices=("int32", "int64")),),
                    infer=infer, forward=forward)


ArgMax = _arg_extremum("ArgMax", np.argmax, "largest")


ArgMin = _arg_extremum("ArgMin", np.argmin, "smallest")


def _bool_reduction(name, ufunc, word, empty):
    """All or Any: ``ufunc.reduce`` (np.logical_and, np.logical_or) of a bool tensor over ``axis``."""
    def infer(x, axis, *, keep_dims):
        if x.dtype.kind != "b":
            raise ShapeError(f"{name} reduces bool tensors, got {x.dtype.name}")
        return TensorType(reduce_shape(x.shape, axis, keep_dims), _BOOL)

    doc = f"""
        Logical {word} of a bool ``input`` over ``axis`` (all axes when unwired); ``keep_dims`` keeps them.

        An empty reduction is {empty}. Not differentiable (bool output).
        """
    return _declare(name, doc, (f"Reduce{name}", f"reduce_{name.lower()}"),
                    inputs=(Input("input", dtype="bool"), _REDUCE_AXIS),
                    outputs=(Output("output", differentiable=False),), attrs=_KEEP_DIMS,
                    infer=infer, forward=_ufunc_reduce(ufunc))


All = _bool_reduction("All", np.logical_and, "AND", "true")


Any = _bool_reduction("Any", np.logical_or, "OR", "false")


# --------------------------------------------------------------------------------------------
# Comparisons and logic (bool outputs, not differentiable)


def _compare_infer(op, x, y, ordered=True):
    if x.dtype != y.dtype:
        raise ShapeError(f"{op} needs inputs of one dtype, got {x.dtype.name} and {y.dtype.name}")
    if ordered and x.dtype.kind == "b":
        raise ShapeError(f"{op} does not take bool tensors")
    return TensorType(broadcast_shapes(x.shape, y.shape), _BOOL)


def _comparison(name, ufunc, symbol, note="", ordered=True):
    """``x <symbol> y`` elementwise as a bool tensor; ``ordered`` comparisons refuse bool inputs."""
    def infer(x, y):
        return _compare_infer(name, x, y, ordered)

    def forward(x, y):
        return ufunc(x, y)

    doc = f"""
        Elementwise ``x {symbol} y`` as a bool tensor, with numpy broadcasting.

        {note}Not differentiable (bool output).
        """
    return _declare(name, doc, inputs=(Input("x"), Input("y")), outputs=(Output("z", differentiable=False),),
                    infer=infer, forward=forward)


Equal = _comparison("Equal", np.equal, "==", "``nan`` equals nothing, itself included. ", ordered=False)


NotEqual = _comparison("NotEqual", np.not_equal, "!=", "``nan`` differs from everything, itself included. ",
                       ordered=False)


Greater = _comparison("Greater", np.greater, ">")


GreaterEqual = _comparison("GreaterEqual", np.greater_equal, ">=")


Less = _comparison("Less", np.less, "<")


LessEqual = _comparison("LessEqual", np.less_equal, "<=")


def _logical_infer(op, *types):
    for t in types:
        if t.dtype.kind != "b":
            raise ShapeError(f"{op} takes bool tensors, got {t.dtype.name}")
    if len(types) == 1:
        return _like(types[0])
    return TensorType(broadcast_shapes(types[0].shape, types[1].shape), _BOOL)


def _logical(name, ufunc, word):
    """``x <word> y`` of bool tensors, elementwise."""
    def infer(x, y):
        return _logical_infer(name, x, y)

    def forward(x, y):
        return ufunc(x, y)

    doc = f"Elementwise ``x {word} y`` of bool tensors, with numpy broadcasting. Not differentiable."
    return _declare(name, doc, inputs=(Input("x", dtype="bool"), Input("y", dtype="bool")),
                    outputs=(Output("z", differentiable=False),), infer=infer, forward=forward)


LogicalAnd = _logical("LogicalAnd", np.logical_and, "AND")


LogicalOr = _logical("LogicalOr", np.logical_or, "OR")


@block("LogicalNot", category="math_ops")
class LogicalNot:
    """Elementwise ``NOT x`` of a bool tensor. Not differentiable."""

    inputs = (Input("x", dtype="bool"),)
    outputs = (Output("y", differentiable=False),)

    def infer(x):
        return _logical_infer("LogicalNot", x)

    def forward(x):
        return np.logical_not(x)


# --------------------------------------------------------------------------------------------
# Cast


@block("Cast", category="math_ops")
class Cast:
    """Converts ``x`` to the dtype ``DstT``.

    As TensorFlow's ``tf.cast``: floats become integers by truncation toward zero (out-of-range
    values and nan give unspecified results), numbers become bool by ``!= 0``, bool becomes 0/1.
    The gradient of a float-to-float cast is ``g`` cast back to ``x``'s dtype. Casting to or from
    an integer or bool dtype cuts the gradient: integer and bool wires carry none.
    """

    inputs = (Input("x", dtype="any"),)
    outputs = (Output("y"),)
    attrs = (Attr("DstT", "dtype", "float32", doc="the dtype to convert to"),)
    grad_rule = """
        dx = g cast back to x's dtype, for a float-to-float cast
        no gradient when x or y has an integer or bool dtype
        """

    def infer(x, *, DstT):
        return TensorType(x.shape, DstT)

    def forward(x, *, DstT):
        return x.astype(DstT, copy=False)

    def vjp(g, out, x, *, DstT):
        if x.dtype.kind != "f" or g is None or g.dtype.kind != "f":
            return (None,)
        return (g.astype(x.dtype, copy=False),)


# --------------------------------------------------------------------------------------------
# Scans


def _scan(accumulate, x, axis, exclusive, reverse, identity):
    """Running ``accumulate`` (np.add/np.multiply.accumulate) of ``x`` along ``axis``, in x's dtype.

    ``exclusive``: entry i leaves out x[i] (the first entry is ``identity``); ``reverse``: from the
    end of the axis toward its start.
    """
    if reverse:
        x = np.flip(x, axis)
    if exclusive:
        out = np.empty(x.shape, x.dtype)
        head = (slice(None),) * axis
        out[head + (slice(0, 1),)] = identity
        accumulate(x[head + (slice(None, -1),)], axis=axis, dtype=x.dtype, out=out[head + (slice(1, None),)])
    else:
        out = accumulate(x, axis=axis, dtype=x.dtype)
    return np.flip(out, axis) if reverse else out


def _scan_infer(op, x, axis):
    if x.dtype.kind == "b":
        raise ShapeError(f"{op} does not take bool tensors")
    _one_axis(op, axis, x.rank)
    return _like(x)


_SCAN_INPUTS = (Input("x", dtype="number"), Input("axis", dtype="int", static=True, optional=True, default=0))
_SCAN_ATTRS = (
    Attr("exclusive", "bool", False, doc="leave each entry out of its own running result"),
    Attr("reverse", "bool", False, doc="run from the end of the axis toward its start"),
)


@block("Cumsum", category="math_ops")
class Cumsum:
    """Running sum of ``x`` along ``axis``: ``[a, b, c]`` gives ``[a, a + b, a + b + c]``.

    As TensorFlow's ``tf.cumsum``: ``axis`` is 0 when unwired; ``exclusive`` leaves each entry
    out (``[0, a, a + b]``); ``reverse`` runs from the end (``[a + b + c, b + c, c]``). The sum
    keeps x's dtype. The gradient is the running sum of ``g`` in the opposite direction, with the
    same ``exclusive``.
    """

    inputs = _SCAN_INPUTS
    outputs = (Output("out"),)
    attrs = _SCAN_ATTRS
    grad_rule = "dx = the running sum of g along axis in the opposite direction (same exclusive)"

    def infer(x, axis, *, exclusive, reverse):
        return _scan_infer("Cumsum", x, axis)

    def forward(x, axis, *, exclusive, reverse):
        return _scan(np.add.accumulate, x, _one_axis("Cumsum", axis, x.ndim), exclusive, reverse, 0)

    def vjp(g, out, x, axis, *, exclusive, reverse):
        return (_scan(np.add.accumulate, g, _one_axis("Cumsum", axis, x.ndim), exclusive, not reverse, 0),
                None)


@block("Cumprod", category="math_ops")
class Cumprod:
    """Running product of ``x`` along ``axis``: ``[a, b, c]`` gives ``[a, a * b, a * b * c]``.

    As TensorFlow's ``tf.cumprod``: ``axis`` is 0 when unwired; ``exclusive`` leaves each entry
    out (``[1, a, a * b]``); ``reverse`` runs from the end. The product keeps x's dtype.

    The gradient of entry k is the sum over the outputs that contain it of ``g`` times the product
    of their other factors. TensorFlow computes it as ``cumsum(g * out) / x`` with 0 where
    ``x == 0``, which is wrong at zeros; here it is exact at zeros too: ``x[k] != 0`` divides as
    TF does (the sum is 0 past a zero), the first zero along the scan gets the running sum of
    ``g`` times the products with that zero left out, and later zeros get 0.
    """

    inputs = _SCAN_INPUTS
    outputs = (Output("out"),)
    attrs = _SCAN_ATTRS
    grad_rule = """
        dx[k] = Σ over the entries of out that contain x[k] of g · (the product of their other factors)
        computed as (the running sum of g ⊙ out in the opposite direction) / x where x ≠ 0
        the first zero along the scan gets that sum with itself left out of the products
        later zeros get 0
        """

    def infer(x, axis, *, exclusive, reverse):
        return _scan_infer("Cumprod", x, axis)

    def forward(x, axis, *, exclusive, reverse):
        return _scan(np.multiply.accumulate, x, _one_axis("Cumprod", axis, x.ndim), exclusive, reverse, 1)

    def vjp(g, out, x, axis, *, exclusive, reverse):
        axis = _one_axis("Cumprod", axis, x.ndim)
        zero = x == 0
        s = _scan(np.add.accumulate, out * g, axis, exclusive, not reverse, 0)
        if not zero.any():
            return (s / x, None)
        one = _ONE[x.dtype]
        gx = s / np.where(zero, one, x)
        # The first zero of each lane along the scan direction: drop it (make it 1) and redo.
        before = _scan(np.logical_or.accumulate, zero, axis, True, reverse, False)
        first = zero & np.logical_not(before)
        x1 = np.where(first, one, x)
        s1 = _scan(np.add.accumulate, _scan(np.multiply.accumulate, x1, axis, exclusive, reverse, 1) * g,
                   axis, exclusive, not reverse, 0)
        gx[zero] = 0
        gx[first] = s1[first]
        return (gx, None)


# --------------------------------------------------------------------------------------------
# Batched matrix product


@block("BatchMatMul", category="math_ops", aliases=("BatchMatMulV2",))
class BatchMatMul:
    """Matrix products over batches: ``x @ y`` on the last two axes, the leading axes broadcast.

    As TensorFlow's BatchMatMulV2: ``x`` is [..., m, k] and ``y`` [..., k, n] (with ``adj_x``,
    x is [..., k, m] and is transposed first; ``adj_y`` likewise for y), giving [..., m, n]; the
    batch axes broadcast like numpy's (a [2, 1, m, k] times a [3, k, n] is [2, 3, m, n]). The
    gradients are TensorFlow's products of ``g`` with the other operand, summed over the batch
    axes that were broadcast.
    """

    inputs = (Input("x"), Input("y"))
    outputs = (Output("output"),)
    attrs = (
        Attr("adj_x", "bool", False, doc="transpose the last two axes of x first"),
        Attr("adj_y", "bool", False, doc="transpose the last two axes of y first"),
    )
    grad_rule = """
        dx = unbroadcast(g · yᵀ)
        dy = unbroadcast(xᵀ · g)
        with adj_x: dx = unbroadcast(y · gᵀ), dy = unbroadcast(x · g)
        with adj_y: dx = unbroadcast(g · y), dy = unbroadcast(gᵀ · x)
        with both: dx = unbroadcast(yᵀ · gᵀ), dy = unbroadcast(gᵀ · xᵀ)
        products and ᵀ act on the last two axes; unbroadcast: summed over the batch axes that were broadcast
        """

    def infer(x, y, *, adj_x, adj_y):
        if x.rank < 2 or y.rank < 2:
            raise ShapeError(f"BatchMatMul needs tensors of rank 2 or more, got x {x} and y {y}")
        _check_arithmetic("BatchMatMul", x, y)
        m, k = x.shape[-1:-3:-1] if adj_x else x.shape[-2:]
        k2, n = y.shape[-1:-3:-1] if adj_y else y.shape[-2:]
        if k is not None and k2 is not None and k != k2:
            raise ShapeError(f"BatchMatMul: inner sizes differ: x{' (adjoint)' if adj_x else ''} is "
                             f"{_fmt(x.shape)}, y{' (adjoint)' if adj_y else ''} is {_fmt(y.shape)}")
        try:
            batch = broadcast_shapes(x.shape[:-2], y.shape[:-2])
        except ShapeError:
            raise ShapeError(f"BatchMatMul: the batch axes of x {_fmt(x.shape)} and y {_fmt(y.shape)} "
                             f"do not broadcast") from None
        return TensorType(batch + (m, n), x.dtype)

    def forward(x, y, *, adj_x, adj_y):
        return np.matmul(np.swapaxes(x, -1, -2) if adj_x else x, np.swapaxes(y, -1, -2) if adj_y else y)

    def vjp(g, out, x, y, *, adj_x, adj_y, needs):
        # TensorFlow's _BatchMatMulV2Grad; the swapped axes are views that BLAS reads directly.
        def t(a):
            return np.swapaxes(a, -1, -2)

        gx = gy = None
        if not adj_x:
            if needs[0]:
                gx = _product_to(g, y, x.shape) if adj_y else _product_to(g, t(y), x.shape)
            if needs[1]:
                gy = _product_to(t(g), x, y.shape) if adj_y else _product_to(t(x), g, y.shape)
        else:
            if needs[0]:
                gx = _product_to(t(y), t(g), x.shape) if adj_y else _product_to(y, t(g), x.shape)
            if needs[1]:
                gy = _product_to(t(g), t(x), y.shape) if adj_y else _product_to(x, g, y.shape)
        return gx, gy


def _product_to(p, q, shape):
    """``unbroadcast(p @ q, shape)``, without making ``p @ q`` where ``shape`` lacks its batch axes.

    A [1, m, k] operand times a [B, k, n] one has a [B, m, k] gradient before it is summed back to
    [1, m, k]: B times the operand's size, gigabytes for a hostile B. The batch axes ``shape``
    lacks (size 1 or missing) are summed inside the product instead: an operand that is 1 there
    is left alone and the other summed first; where both have the axis it joins the contraction.
    """
    rank = max(p.ndim, q.ndim, len(shape))
    lead = rank - 2
    p = p.reshape((1,) * (rank - p.ndim) + p.shape)
    q = q.reshape((1,) * (rank - q.ndim) + q.shape)
    target = (1,) * (rank - len(shape)) + tuple(shape)
    folded = []
    for a in range(lead):
        if target[a] != 1 or max(p.shape[a], q.shape[a]) <= 1:
            continue
        if q.shape[a] == 1:
            p = p.sum(axis=a, keepdims=True)
        elif p.shape[a] == 1:
            q = q.sum(axis=a, keepdims=True)
        else:
            folded.append(a)
    if not folded:
        return unbroadcast(p @ q, tuple(shape))
    kept = [a for a in range(lead) if a not in folded]
    # p: [kept..., m, folded..., c] -> [kept..., m, folded * c]; q: [kept..., folded * c, k].
    p = p.transpose(kept + [lead] + folded + [lead + 1])
    p = p.reshape(p.shape[:len(kept) + 1] + (int(np.prod(p.shape[len(kept) + 1:])),))
    q = q.transpose(kept + folded + [lead, lead + 1])
    q = q.reshape(q.shape[:len(kept)] + (int(np.prod(q.shape[len(kept):-1])), q.shape[-1]))
    return unbroadcast(np.expand_dims(p @ q, tuple(folded)), tuple(shape))


# --------------------------------------------------------------------------------------------
# Sequences


def _scalar(op, name, value, kinds="iuf"):
    a = np.asarray(value)
    if a.ndim != 0:
        raise ShapeError(f"{op}: {name} must be a single number, got shape {list(a.shape)}")
    if a.dtype.kind not in kinds:
        raise ShapeError(f"{op}: {name} must be a number, got {a.dtype.name}")
    return a


_RANGE_DTYPES = ("auto", "int32", "int64", "float16", "float32", "float64")


def _range_plan(start, limit, delta, dtype):
    """(dtype, length, start, delta) of a Range, with TensorFlow's checks and length rule."""
    names = ("start", "limit", "delta")
    vals = [_scalar("Range", n, v) for n, v in zip(names, (0 if start is None else start, limit,
                                                           1 if delta is None else delta))]
    if dtype == "auto":
        dt = np.dtype("int32") if all(a.dtype.kind in "iu" for a in vals) else np.dtype("float32")
    else:
        dt = np.dtype(dtype)
    if dt.kind == "f":
        s, lim, d = (dt.type(a) for a in vals)
        for n, v in zip(names, (s, lim, d)):
            if not np.isfinite(v):
                raise ShapeError(f"Range: {n} must be finite, got {v}")
    else:
        for n, a in zip(names, vals):
            if a.dtype.kind == "f" and not float(a).is_integer():
                raise ShapeError(f"Range: {n} is {float(a)}, not an integer; set dtype to a float "
                                 f"type (or auto)")
        s, lim, d = (int(a) for a in vals)
    if d == 0:
        raise ShapeError("Range: delta must not be 0")
    if d > 0 and s > lim:
        raise ShapeError(f"Range: start {s} is above limit {lim} while delta {d} is positive")
    if d < 0 and s < lim:
        raise ShapeError(f"Range: start {s} is below limit {lim} while delta {d} is negative")
    if dt.kind == "f":
        n = int(np.ceil(np.abs((lim - s) / d)))
    else:
        n = -(-abs(lim - s) // abs(d))
        info = np.iinfo(dt)
        if not (info.min <= s <= info.max and info.min <= s + (n - 1) * d <= info.max):
            raise ShapeError(f"Range: values from {s} to {s + (n - 1) * d} do not fit {dt.name}")
    return dt, n, s, d


@block("Range", category="math_ops")
class Range:
    """The sequence ``start, start + delta, ...`` up to but excluding ``limit``.

    As TensorFlow's ``tf.range``: ``start`` is 0 and ``delta`` 1 when unwired; the length is
    ``ceil((limit - start) / delta)``; delta 0, or a start beyond the limit in delta's direction,
    is an error. ``dtype`` ``auto`` gives int32 when all three are integers and float32
    otherwise (what ``tf.range`` picks for Python numbers). Entry i is ``start + i * delta``,
    rounded once. Not differentiable.
    """

    inputs = (Input("start", dtype="number", static=True, optional=True, default=0),
              Input("limit", dtype="number", static=True, doc="the end, excluded"),
              Input("delta", dtype="number", static=True, optional=True, default=1))
    outputs = (Output("output", differentiable=False),)
    attrs = (Attr("dtype", "choice", "auto", choices=_RANGE_DTYPES),)

    def infer(start, limit, delta, *, dtype):
        dt, n, _, _ = _range_plan(start, limit, delta, dtype)
        return TensorType((n,), dt)

    def forward(start, limit, delta, *, dtype):
        dt, n, s, d = _range_plan(start, limit, delta, dtype)
        reserve((n,), np.float64 if dt.kind == "f" else np.int64, "Range's values before rounding to "
                f"{dt.name}")
        if dt.kind == "f":
            values = np.arange(n, dtype=np.float64)
            values *= float(d)
            values += float(s)
            return values.astype(dt)
        values = np.arange(n, dtype=np.int64)
        values *= d
        values += s
        return values.astype(dt, copy=False)


def _linspace_plan(start, stop, num):
    s = _scalar("LinSpace", "start", start, "f")
    e = _scalar("LinSpace", "stop", stop, "iuf")
    n = int(_scalar("LinSpace", "num", num, "iu"))
    if n < 1:
        raise ShapeError(f"LinSpace: num must be at least 1, got {n}")
    return s.dtype, n, s, e.astype(s.dtype)


@block("LinSpace", category="math_ops")
class LinSpace:
    """``num`` evenly spaced values from ``start`` to ``stop``, both included.

    As TensorFlow's ``tf.linspace``: the result has ``start``'s float dtype (``stop`` is cast to
    it), its first entry is ``start`` and its last exactly ``stop``; ``num`` 1 gives ``[start]``
    and ``num`` must be at least 1. Not differentiable.
    """

    inputs = (Input("start", dtype="float", static=True),
              Input("stop", dtype="float", static=True),
              Input("num", dtype="int", static=True, doc="how many values, at least 1"))
    outputs = (Output("output", differentiable=False),)

    def infer(start, stop, num):
        dt, n, _, _ = _linspace_plan(start, stop, num)
        return TensorType((n,), dt)

    def forward(start, stop, num):
        dt, n, s, e = _linspace_plan(start, stop, num)
        reserve((n,), np.float64, f"LinSpace's values before rounding to {dt.name}")
        return np.linspace(float(s), float(e), n, dtype=np.float64).astype(dt)


# --------------------------------------------------------------------------------------------
# Clipping


def _broadcast_or_none(*shapes):
    try:
        return np.broadcast_shapes(*shapes)
    except ValueError:
        return None


@block("ClipByValue", category="math_ops")
class ClipByValue:
    """Clips ``t`` to [``clip_value_min``, ``clip_value_max``] elementwise.

    As TensorFlow's ``tf.clip_by_value``: the bounds broadcast against ``t`` but may not make the
    result larger than ``t``; the result is ``max(min(t, max), min)`` (so ``min`` wins if the
    bounds cross). Gradients (TensorFlow's rule): ``g`` goes to ``t`` where
    ``min <= t <= max``, to ``clip_value_min`` where ``t < min`` and to ``clip_value_max`` where
    ``t > max``, summed over the axes a bound was broadcast along.
    """

    inputs = (Input("t"), Input("clip_value_min"), Input("clip_value_max"))
    outputs = (Output("output"),)
    grad_rule = """
        dt = g where clip_value_min ≤ t ≤ clip_value_max, else 0
        dclip_value_min = unbroadcast(g where t < clip_value_min, else 0)
        dclip_value_max = unbroadcast(g where t > clip_value_max, else 0)
        unbroadcast: summed over the broadcast axes, back to the input's shape
        """

    def infer(t, clip_value_min, clip_value_max):
        _check_arithmetic("ClipByValue", t, clip_value_min, clip_value_max)
        try:
            full = broadcast_shapes(t.shape, clip_value_min.shape, clip_value_max.shape)
        except ShapeError:
            full = None
        if full is None or len(full) != t.rank or any(
                dt is not None and df is not None and dt != df for dt, df in zip(t.shape, full)):
            raise ShapeError(f"ClipByValue: bounds of shapes {_fmt(clip_value_min.shape)} and "
                             f"{_fmt(clip_value_max.shape)} do not broadcast to t's shape {_fmt(t.shape)}")
        return TensorType(tuple(df if dt is None else dt for dt, df in zip(t.shape, full)), t.dtype)

    def forward(t, clip_value_min, clip_value_max):
        # Checked before computing: bounds larger than t would make the intermediate larger too.
        if _broadcast_or_none(t.shape, clip_value_min.shape, clip_value_max.shape) != t.shape:
            raise ShapeError(f"ClipByValue: bounds of shapes {list(clip_value_min.shape)} and "
                             f"{list(clip_value_max.shape)} do not broadcast to t's shape {list(t.shape)}")
        return np.maximum(np.minimum(t, clip_value_max), clip_value_min)

    def vjp(g, out, t, clip_value_min, clip_value_max, *, needs):
        below = np.less(t, clip_value_min) if needs[0] or needs[1] else None
        above = np.greater(t, clip_value_max) if needs[0] or needs[2] else None
        gt = g * np.logical_not(below | above) if needs[0] else None
        g_min = unbroadcast(g * below, clip_value_min.shape) if needs[1] else None
        g_max = unbroadcast(g * above, clip_value_max.shape) if needs[2] else None
        return gt, g_min, g_max
