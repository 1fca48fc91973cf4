"""math_ops, elementwise functions of one tensor: Negate, Square, Sqrt, Exp, Log, Tanh, Sigmoid, Abs,
Sign, Rsqrt, Reciprocal, Log1p, Expm1, the trigonometric and hyperbolic functions, Erf, Floor, Ceil,
Round; and Cast.

Imports only blockflow.spec and numpy.
"""
from __future__ import annotations

import operator
from functools import partial

import numpy as np

from blockflow.spec import ONE_OF_OUTPUT, Attr, Input, Output, TensorType, block

from .common import ONE, declare, like, negate_fresh, typed
from .fused import writable_like


# The factories below declare their blocks as math_ops, from this module (their source).
_declare = partial(declare, category="math_ops", module=__name__)


# exp(-x) overflows for x below -log(max); Sigmoid clips its argument there (the true value is
# below the smallest normal float anyway) so that no overflow warning is raised.
_EXP_ARG_MAX = {np.dtype(n): np.dtype(n).type(np.floor(np.log(np.finfo(n).max)))
                for n in ("float16", "float32", "float64")}


_NEG_HALF = typed(-0.5)
_TWO_OVER_SQRT_PI = typed(2.0 / np.sqrt(np.pi))


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
        # the runtime calls the ufunc itself (run/lower.py): the same result without this frame
        fn.ufunc = ufunc

    body = dict(inputs=(Input("x", dtype=dtype),), outputs=(Output("y"),), infer=like, forward=fn)
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


# --------------------------------------------------------------------------------------------
# Arithmetic, powers, exponentials and logarithms


Negate = _unary("Negate", np.negative, lambda g, out, x: (np.negative(g),), dtype="number",
                aliases=("Neg", "negative"), rule="dx = −g", doc="""Elementwise ``-x``.""")
Negate.vjp.reads = ()  # no value of x or y (run/overwrite.py)
Negate.vjp.inline = {"x": (np.negative, "g")}  # written inline by the runtime (blockflow/spec/inline.py)


def _square_vjp(g, out, x):
    t = g * x
    t += t  # 2 * g * x without a constant that could promote a float32 scalar
    return (t,)


Square = _unary("Square", lambda x: x * x, _square_vjp, dtype="number",
                rule="dx = 2 · g · x", doc="""Elementwise ``x * x``.""")
# the vjp's t = g * x; t += t: the product twice, the same sum (blockflow/spec/inline.py)
Square.vjp.inline = {"x": (np.add, (np.multiply, "g", "x"), (np.multiply, "g", "x"))}


Sqrt = _unary("Sqrt", np.sqrt, lambda g, out, x: (g / (out + out),), rule="dx = g / (2 · y)", doc="""
    Elementwise square root; ``nan`` for negative entries.
    """)
Sqrt.vjp.inline = {"x": (np.divide, "g", (np.add, "out", "out"))}   # (blockflow/spec/inline.py)


def _exp_vjp(g, out, x):
    return (g * out,)


def _exp_vjp_into_g(g, out, x):
    if writable_like(g, out):  # the run's own cotangent: the gradient in its array
        return (np.multiply(g, out, out=g),)
    return (g * out,)


# The vjps marked fresh_result return new arrays, one per input, never an input or a view of
# one: the runtime may add into them in place (run/lower.py, _accumulate). ``reads`` names the
# arguments whose values a vjp reads (here not x, which the runtime may then overwrite:
# run/lower.py, _in_place_slots); ``into_g`` is the variant the runtime calls with a cotangent
# that it alone holds.
_exp_vjp.fresh_result = _exp_vjp_into_g.fresh_result = True
_exp_vjp.reads = _exp_vjp_into_g.reads = ("out",)
_exp_vjp.into_g = _exp_vjp_into_g
# what _exp_vjp computes, written inline by the runtime on small tensors (blockflow/spec/inline.py)
_exp_vjp.inline = {"x": (np.multiply, "g", "out")}


Exp = _unary("Exp", np.exp, _exp_vjp, rule="dx = g · y", doc="""
    Elementwise natural exponential ``e ** x``.
    """)


Log = _unary("Log", np.log, lambda g, out, x: (g / x,), rule="dx = g / x", doc="""
    Elementwise natural logarithm; ``-inf`` at 0 and ``nan`` for negative entries.
    """)
Log.vjp.inline = {"x": (np.divide, "g", "x")}   # (blockflow/spec/inline.py)


def _tanh_vjp(g, out, x):
    t = ONE[out.dtype] - out * out
    t *= g
    return (t,)


_tanh_vjp.fresh_result = True
_tanh_vjp.reads = ("out",)
# ``t *= g``: operator.imul, not np.multiply, which would widen t to a wider g's dtype
_tanh_vjp.inline = {"x": (operator.imul, (np.subtract, ONE_OF_OUTPUT, (np.multiply, "out", "out")), "g")}


Tanh = _unary("Tanh", np.tanh, _tanh_vjp, rule="dx = g · (1 − y²)", doc="""Elementwise hyperbolic tangent.""")


def _sigmoid(x):
    # 1 / (1 + exp(min(-x, cap))). np.minimum against a number is a slow pass (20 us on 50k
    # float32, against 4 for a comparison), and only x below -cap needs it: without such an x
    # (the usual case) exp(-x) cannot overflow, and the same numbers come without it. Whether
    # there is one: the least value NaNs aside (np.fmin's reduction, one pass and no bool array:
    # 6.3 against 13.3 us on 50k float32 for np.less(...).any(), the same answer).
    one = ONE[x.dtype]
    if type(x) is np.ndarray and x.ndim and x.size and not _FMIN(x, axis=None) < _NEG_EXP_ARG_MAX[x.dtype]:
        e = np.exp(np.negative(x))
        e += one
        return np.divide(one, e, out=e)
    e = np.exp(np.minimum(np.negative(x), _EXP_ARG_MAX[x.dtype]))
    e += one
    return np.reciprocal(e)


_NEG_EXP_ARG_MAX = {d: -m for d, m in _EXP_ARG_MAX.items()}
_FMIN = np.fmin.reduce


def _sigmoid_vjp(g, out, x):
    t = ONE[out.dtype] - out
    t *= out
    t *= g
    return (t,)


_sigmoid_vjp.fresh_result = True
_sigmoid_vjp.inline = {"x": (operator.imul, (operator.imul, (np.subtract, ONE_OF_OUTPUT, "out"), "out"), "g")}


Sigmoid = _unary("Sigmoid", _sigmoid, _sigmoid_vjp, rule="dx = g · y · (1 − y)", doc="""
    Elementwise logistic function ``1 / (1 + exp(-x))``.

    Accurate in relative terms over the whole range, including far negative ``x`` where the
    result is tiny.
    """)


Abs = _unary("Abs", np.abs, lambda g, out, x: (g * np.sign(x),), dtype="number",
             rule="dx = g · sign(x)   (0 at x = 0)", doc="""
    Elementwise absolute value ``|x|``.

    The gradient is ``g * sign(x)``: 0 at exactly ``x = 0``, as in TensorFlow.
    """)
Abs.vjp.inline = {"x": (np.multiply, "g", (np.sign, "x"))}   # (blockflow/spec/inline.py)


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


Log1p = _unary("Log1p", np.log1p, lambda g, out, x: (g / (x + ONE[x.dtype]),),
               rule="dx = g / (1 + x)", doc="""
    Elementwise ``log(1 + x)``, accurate also for tiny ``x``.

    ``-inf`` at -1 and ``nan`` below. The gradient is ``g / (1 + x)``.
    """)


Expm1 = _unary("Expm1", np.expm1, _times(np.exp), rule="dx = g · exp(x)", doc="""
    Elementwise ``exp(x) - 1``, accurate also for tiny ``x``.

    The gradient is ``g * exp(x)``.
    """)


# --------------------------------------------------------------------------------------------
# Trigonometric and hyperbolic functions


Sin = _unary("Sin", np.sin, _times(np.cos), rule="dx = g · cos(x)", doc="""
    Elementwise sine (radians). The gradient is ``g * cos(x)``.
    """)


def _cos_vjp(g, out, x):
    t = np.sin(x)
    t *= g
    return (negate_fresh(t),)


Cos = _unary("Cos", np.cos, _cos_vjp, rule="dx = −g · sin(x)", doc="""
    Elementwise cosine (radians). The gradient is ``-g * sin(x)``.
    """)


def _tan_vjp(g, out, x):
    t = out * out
    t += ONE[out.dtype]
    t *= g
    return (t,)


Tan = _unary("Tan", np.tan, _tan_vjp, rule="dx = g · (1 + y²)", doc="""
    Elementwise tangent (radians). The gradient is ``g / cos(x) ** 2`` (``g * (1 + y ** 2)``).
    """)


def _asin_vjp(g, out, x):
    one = ONE[x.dtype]
    return (g / np.sqrt((one - x) * (one + x)),)


Asin = _unary("Asin", np.arcsin, _asin_vjp, rule="dx = g / √((1 − x) · (1 + x))", doc="""
    Elementwise arcsine, in [-pi/2, pi/2]; ``nan`` outside [-1, 1].

    The gradient is ``g / sqrt(1 - x ** 2)`` (computed as ``(1 - x)(1 + x)`` to stay accurate near
    ±1, where it grows without bound).
    """)


def _acos_vjp(g, out, x):
    one = ONE[x.dtype]
    t = np.sqrt((one - x) * (one + x))
    return (np.negative(g) / t,)


Acos = _unary("Acos", np.arccos, _acos_vjp, rule="dx = −g / √((1 − x) · (1 + x))", doc="""
    Elementwise arccosine, in [0, pi]; ``nan`` outside [-1, 1].

    The gradient is ``-g / sqrt(1 - x ** 2)``.
    """)


def _atan_vjp(g, out, x):
    t = x * x
    t += ONE[x.dtype]
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


# --------------------------------------------------------------------------------------------
# The error function


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


def one_plus_erf(x):
    """``1 + erf(x)`` rounded to x's dtype, accurate in the left tail too (there it is
    ``erfc(-x)``, which ``1 + erf(x)`` would lose to cancellation): Gelu's ``2 * Phi``."""
    z = np.reshape(x, -1).astype(np.float64)
    r = _erf64(z)
    r += 1.0
    left = z < -0.46875
    if left.any():
        r[left] = _erfc_big(-z[left])
    return r.reshape(np.shape(x)).astype(x.dtype, copy=False)


def erf(x):
    """erf of a float array, in float64 and rounded to x's dtype (Erf's forward; Gelu's too)."""
    if x.dtype == np.float64:
        return _erf64(x)
    return _erf64(x.astype(np.float64)).astype(x.dtype)


def _erf_vjp(g, out, x):
    t = x * x
    t = np.exp(negate_fresh(t))
    t *= _TWO_OVER_SQRT_PI[x.dtype]
    t *= g
    return (t,)


Erf = _unary("Erf", erf, _erf_vjp, rule="dx = g · 2/√π · exp(−x²)", doc="""
    Elementwise Gauss error function ``erf(x) = 2/sqrt(pi) * integral of exp(-t**2) from 0 to x``.

    Computed in float64 with W. J. Cody's rational Chebyshev approximations (relative error of a
    few ulps over the whole line, tails included) and rounded to the input's dtype. The gradient
    is ``g * 2/sqrt(pi) * exp(-x ** 2)``.
    """)


# --------------------------------------------------------------------------------------------
# Rounding (not differentiable)


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
