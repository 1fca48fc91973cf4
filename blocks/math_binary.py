"""math_ops, elementwise functions of two tensors with numpy broadcasting: the arithmetic (Add,
Subtract, Multiply, RealDiv, AddN, Pow, SquaredDifference, FloorDiv, FloorMod), Maximum and
Minimum, and ClipByValue.

Imports only blockflow.spec and numpy.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from blockflow.spec import (ONE_OF_OUTPUT, Input, InputList, Output, ShapeError, TensorType, block, broadcast_shapes,
                            unbroadcast)

from .common import (ONE, ZERO, binary_infer, broadcast_or_none, check_arithmetic, declare, fmt_shape,
                     merge_shapes, negate_fresh)
from .folding import fold
from .fused import FUSE_MIN_SIZE, into_g_position, product_sum, writable_like


# The factories below declare their blocks as math_ops, from this module (their source).
_declare = partial(declare, category="math_ops", module=__name__)


# --------------------------------------------------------------------------------------------
# Arithmetic


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
        # integer results of constants fold (shape arithmetic: Conv2DTranspose's sizes)
        return fold("Add", binary_infer("Add", x, y), Add.forward, x, y)

    def forward(x, y):
        return x + y

    forward.ufunc = np.add  # what the operator calls; the runtime binds it directly (run/lower.py)

    def vjp(g, out, x, y, *, needs):
        # an input of g's own shape takes g as it is: unbroadcast's first test, without its call
        gs = g.shape
        return ((g if x.shape == gs else unbroadcast(g, x.shape)) if needs[0] else None,
                (g if y.shape == gs else unbroadcast(g, y.shape)) if needs[1] else None)

    vjp.reads = ()  # no value, only shapes (run/lower.py may overwrite x, y and z: overwrite.py)
    # what it gives an input of z's shape, written inline by the runtime (blockflow/spec/inline.py)
    vjp.inline = {"x": "g", "y": "g"}


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
        # integer results of constants fold (shape arithmetic: Conv2DTranspose's sizes)
        return fold("Subtract", binary_infer("Subtract", x, y), Subtract.forward, x, y)

    def forward(x, y):
        return x - y

    forward.ufunc = np.subtract  # what the operator calls; the runtime binds it directly (run/lower.py)

    def vjp(g, out, x, y, *, needs):
        return (unbroadcast(g, x.shape) if needs[0] else None,
                np.negative(unbroadcast(g, y.shape)) if needs[1] else None)

    vjp.reads = ()  # no value, only shapes (as Add's)
    vjp.inline = {"x": "g", "y": (np.negative, "g")}   # as Add's


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
        # integer results of constants fold (shape arithmetic: Conv2DTranspose's sizes)
        return fold("Multiply", binary_infer("Multiply", x, y), Multiply.forward, x, y)

    def forward(x, y):
        return x * y

    forward.ufunc = np.multiply  # what the operator calls; the runtime binds it directly (run/lower.py)

    def vjp(g, out, x, y, *, needs):
        if g.size < FUSE_MIN_SIZE:  # the tiny ops' path: no frame more than before
            return (unbroadcast(g * y, x.shape) if needs[0] else None,
                    unbroadcast(g * x, y.shape) if needs[1] else None)
        return (product_sum(g, y, x.shape, unbroadcast) if needs[0] else None,
                product_sum(g, x, y.shape, unbroadcast) if needs[1] else None)

    vjp.fresh_result = True  # new arrays, one per input (run/lower.py, _accumulate)
    vjp.reads = ("x", "y")  # the values it reads: not out (run/lower.py, _in_place_slots)
    # its tiny ops' path, written inline by the runtime (blockflow/spec/inline.py)
    vjp.inline = {"x": (np.multiply, "g", "y"), "y": (np.multiply, "g", "x")}
    vjp.inline_below = FUSE_MIN_SIZE

    def vjp_into_g(g, out, x, y, *, needs):
        # g is the run's alone: the first needed input of out's shape and dtype (the rule the
        # memory plan counts by: run/memplan.py, parts_into) gets its gradient in g's array, the other
        # one computed first, while g still holds the cotangent
        pos = into_g_position(out, (x, y), needs)
        if pos is not None and writable_like(g, out):
            other = y if pos == 0 else x
            if np.result_type(g, other) == g.dtype:
                if pos == 0:
                    gy = product_sum(g, x, y.shape, unbroadcast) if needs[1] else None
                    return np.multiply(g, y, out=g), gy
                gx = product_sum(g, y, x.shape, unbroadcast) if needs[0] else None
                return gx, np.multiply(g, x, out=g)
        return Multiply.vjp(g, out, x, y, needs=needs)

    vjp_into_g.fresh_result = True
    vjp_into_g.reads = vjp.reads
    vjp.into_g = vjp_into_g


@block("RealDiv", category="math_ops", aliases=("Div", "divide"))
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
        return binary_infer("RealDiv", x, y)

    def forward(x, y):
        return x / y

    forward.ufunc = np.true_divide  # what the operator calls; the runtime binds it directly (run/lower.py)

    def vjp(g, out, x, y, *, needs):
        q = g / y  # dz/dx = 1/y, and dz/dy = -x/y**2 = -(1/y) * z
        return _realdiv_parts(q, out, x, y, needs)

    vjp.fresh_result = True  # new arrays, one per input (run/lower.py, _accumulate)
    vjp.reads = ("y", "out")  # the values it reads: not x (run/lower.py, _in_place_slots)

    def vjp_into_g(g, out, x, y, *, needs):
        # g is the run's alone: q = g / y is written into it, and is dx when x has out's shape
        # and dtype, else dy when y has (into_g_position, the rule the memory plan counts by)
        if not writable_like(g, out) or np.result_type(g, y) != g.dtype:
            return RealDiv.vjp(g, out, x, y, needs=needs)
        if needs[1] and y.size == 1 and y.shape != out.shape and (not needs[0] or x.shape == out.shape):
            # dy sums q * z over everything: q is made a piece at a time with that sum
            gy = negate_fresh(product_sum(g, out, y.shape, unbroadcast, divide_by=y))
            return (g if needs[0] else None), gy
        return _realdiv_parts(np.true_divide(g, y, out=g), out, x, y, needs)

    vjp_into_g.fresh_result = True
    vjp_into_g.reads = vjp.reads
    vjp.into_g = vjp_into_g


def _realdiv_parts(q, out, x, y, needs):
    """(dx, dy) from q = g / y, an array of out's shape that nobody else holds."""
    gx = gy = None
    if needs[0]:
        gx = unbroadcast(q, x.shape)
    if needs[1]:
        if gx is q or y.shape != out.shape:
            # q is dx's array, or dy is a sum (then a piece of the product at a time)
            gy = negate_fresh(product_sum(q, out, y.shape, unbroadcast))
        else:
            q *= out
            gy = negate_fresh(q)
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
        check_arithmetic("AddN", *inputs)
        shape = inputs[0].shape
        for t in inputs[1:]:
            shape = merge_shapes("AddN", shape, t.shape)
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


def _mul_no_nan(t, g):
    """``t * g`` for a fresh ``t`` of g's shape, but 0 where ``g`` is 0 even if ``t`` is inf or nan
    (TensorFlow's mul_no_nan: an unused output does not turn into nan)."""
    if np.isfinite(t).all():
        t *= g
        return t
    return np.where(g == 0, ZERO[t.dtype], t * g)


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
        return binary_infer("Pow", x, y)

    def forward(x, y):
        return np.power(x, y)

    def vjp(g, out, x, y, *, needs):
        gx = gy = None
        if needs[0]:
            t = np.power(x, y - ONE[y.dtype])  # fresh, of z's shape
            t *= y
            gx = unbroadcast(_mul_no_nan(t, g), x.shape)
        if needs[1]:
            log_x = np.log(np.where(x > 0, x, ONE[x.dtype]))  # log(1) = 0 where x <= 0
            t = out * log_x
            gy = unbroadcast(_mul_no_nan(t, g), y.shape)
        return gx, gy


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
        return binary_infer("SquaredDifference", x, y)

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

    vjp.fresh_result = True  # new arrays, one per input (d, or its sum, and its negation)


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
        return binary_infer("FloorDiv", x, y)

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
        return binary_infer("FloorMod", x, y)

    def forward(x, y):
        if x.dtype.kind != "f":
            _check_int_divisor("FloorMod", x, y)
        return np.mod(x, y)

    def vjp(g, out, x, y, *, needs):
        gy = None
        if needs[1]:
            t = np.floor(x / y)
            t *= g
            gy = negate_fresh(unbroadcast(t, y.shape))
        return (unbroadcast(g, x.shape) if needs[0] else None), gy


# --------------------------------------------------------------------------------------------
# Maximum and minimum


def _elementwise_extremum(name, ufunc, short, to_x, symbol, rule):
    """Maximum or Minimum: ``ufunc(x, y)``; the gradient goes to ``x`` where ``to_x(x, y)``
    (``symbol``), which ``rule`` states for people."""
    def infer(x, y):
        return binary_infer(name, x, y)

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


# --------------------------------------------------------------------------------------------
# Clipping


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
        check_arithmetic("ClipByValue", t, clip_value_min, clip_value_max)
        try:
            full = broadcast_shapes(t.shape, clip_value_min.shape, clip_value_max.shape)
        except ShapeError:
            full = None
        if full is None or len(full) != t.rank or any(
                dt is not None and df is not None and dt != df for dt, df in zip(t.shape, full)):
            raise ShapeError(f"ClipByValue: bounds of shapes {fmt_shape(clip_value_min.shape)} and "
                             f"{fmt_shape(clip_value_max.shape)} do not broadcast to t's shape {fmt_shape(t.shape)}")
        return TensorType(tuple(df if dt is None else dt for dt, df in zip(t.shape, full)), t.dtype)

    def forward(t, clip_value_min, clip_value_max):
        # Checked before computing: bounds larger than t would make the intermediate larger too.
        if broadcast_or_none(t.shape, clip_value_min.shape, clip_value_max.shape) != t.shape:
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
