"""ONNX's elementwise ops that are a few blocks each: integer division and remainder as ONNX
rounds them, Xor, IsNaN, IsInf, CastLike, and the activations TensorFlow has no op for (Swish,
Mish, Celu, ThresholdedRelu, Shrink).

Each is the arithmetic ONNX's definition (or its function body) writes, with blocks that compute
each step exactly; where that is not possible the use is refused (a float remainder with fmod 1:
TF's FloorMod and a correction would round twice).
"""
from __future__ import annotations

import numpy as np

from blockflow.importing.onnx_mapping import Call, Unsupported, maps


def _dtype(call: Call, i: int = 0) -> np.dtype:
    dtype = call.dtype(i)
    if dtype is None:
        raise Unsupported(f"{call.node.op} of an input whose dtype is unknown")
    return dtype


def _signs_differ(call: Call, x, y, dtype):
    """Where x and y have opposite signs (a zero counts as positive, as the remainder's test)."""
    zero = call.const(0, dtype)
    return call.block("NotEqual", x=call.block("Less", x=x, y=zero, hint="x_neg"),
                      y=call.block("Less", x=y, y=zero, hint="y_neg"), hint="signs")


def _truncation_fix(call: Call, x, y, dtype):
    """(floor remainder, where truncating differs from flooring): x // y and x % y round toward
    minus infinity in TF; ONNX's integer Div and Mod with fmod round toward zero, which differs
    exactly where the remainder is not 0 and the signs differ."""
    rem = call.block("FloorMod", x=x, y=y, hint="floormod")
    if dtype.kind == "u":
        return rem, None
    nonzero = call.block("NotEqual", x=rem, y=call.const(0, dtype), hint="inexact")
    return rem, call.block("LogicalAnd", x=nonzero, y=_signs_differ(call, x, y, dtype), hint="fix")


def int_div(call: Call):
    """ONNX's integer Div (truncating) as FloorDiv plus one where it floored below the quotient."""
    dtype = _dtype(call)
    x, y = call.input(0), call.input(1)
    if dtype.kind == "u":
        return call.block("FloorDiv", x=x, y=y, typed=0)
    _, fix = _truncation_fix(call, x, y, dtype)
    q = call.block("FloorDiv", x=x, y=y, hint="floordiv")
    return call.block("Add", x=q, y=call.block("Cast", {"DstT": dtype.name}, x=fix, hint="one"), typed=0)


@maps("Mod", blocks="FloorMod (NotEqual, Less, LogicalAnd, Subtract, Select for fmod 1 on integers)",
      notes="fmod 0: FloorMod (the divisor's sign, as Python); fmod 1 on integers: the truncated "
            "remainder (the dividend's sign); refused: fmod 1 on floats (C's fmod cannot be composed "
            "without a second rounding)")
def mod(call: Call):
    dtype = _dtype(call)
    x, y = call.input(0), call.input(1)
    if not call.attr("fmod", 0):
        return call.block("FloorMod", x=x, y=y, typed=0)
    if dtype.kind == "f":
        raise Unsupported("Mod with fmod 1 on floats: C's fmod has no TF op, and FloorMod corrected by the "
                          "divisor rounds twice")
    rem, fix = _truncation_fix(call, x, y, dtype)
    if fix is None:
        return rem.typed(*call.out_type(0))
    return call.block("Select", condition=fix, t=call.block("Subtract", x=rem, y=y, hint="trunc"), e=rem, typed=0)


@maps("Xor", blocks="NotEqual", notes="of booleans: true where exactly one is")
def xor(call: Call):
    return call.block("NotEqual", x=call.input(0), y=call.input(1), typed=0)


@maps("IsNaN", blocks="NotEqual", notes="x != x, true exactly for NaN")
def is_nan(call: Call):
    x = call.input(0)
    return call.block("NotEqual", x=x, y=x, typed=0)


@maps("IsInf", blocks="Equal (Abs for both signs)", notes="detect_positive, detect_negative")
def is_inf(call: Call):
    dtype = _dtype(call)
    if dtype.kind != "f":
        raise Unsupported(f"IsInf of {dtype.name}")
    pos, neg = call.attr("detect_positive", 1), call.attr("detect_negative", 1)
    x = call.input(0)
    if pos and neg:
        return call.block("Equal", x=call.block("Abs", x=x, hint="abs"), y=call.const(np.inf, dtype), typed=0)
    if not (pos or neg):
        raise Unsupported("IsInf detecting neither sign (an all-false constant)")
    return call.block("Equal", x=x, y=call.const(np.inf if pos else -np.inf, dtype), typed=0)


@maps("CastLike", blocks="Cast", notes="to the second input's dtype")
def cast_like(call: Call):
    to = call.dtype(1)
    if to is None:
        raise Unsupported("CastLike to an input whose dtype is unknown")
    return call.block("Cast", {"DstT": to.name}, x=call.input(0), typed=0)


@maps("Swish", blocks="Sigmoid, Multiply", notes="x * sigmoid(alpha * x)")
def swish(call: Call):
    x, alpha = call.input(0), float(call.attr("alpha", 1.0))
    arg = x if alpha == 1.0 else call.block("Multiply", x=x, y=call.const(alpha, _dtype(call)), hint="alpha")
    return call.block("Multiply", x=x, y=call.block("Sigmoid", x=arg, hint="gate"), typed=0)


@maps("Mish", blocks="Softplus, Tanh, Multiply", notes="x * tanh(softplus(x))")
def mish(call: Call):
    x = call.input(0)
    soft = call.block("Softplus", features=x, hint="softplus")
    return call.block("Multiply", x=x, y=call.block("Tanh", x=soft, hint="tanh"), typed=0)


@maps("Celu", blocks="Elu (RealDiv, Multiply for alpha other than 1)",
      notes="alpha * Elu(x / alpha), ONNX's function body")
def celu(call: Call):
    x, alpha = call.input(0), float(call.attr("alpha", 1.0))
    if alpha == 1.0:
        return call.block("Elu", features=x, typed=0)
    dtype = _dtype(call)
    elu = call.block("Elu", features=call.block("RealDiv", x=x, y=call.const(alpha, dtype), hint="scaled"),
                     hint="elu")
    return call.block("Multiply", x=call.const(alpha, dtype), y=elu, typed=0)


@maps("ThresholdedRelu", blocks="Greater, Select", notes="x where x > alpha, else 0")
def thresholded_relu(call: Call):
    x, dtype = call.input(0), _dtype(call)
    above = call.block("Greater", x=x, y=call.const(float(call.attr("alpha", 1.0)), dtype), hint="above")
    return call.block("Select", condition=above, t=x, e=call.const(0, dtype), typed=0)


@maps("Shrink", blocks="Greater, Less, Subtract, Add, Select",
      notes="x - bias above lambd, x + bias below -lambd, 0 between")
def shrink(call: Call):
    x, dtype = call.input(0), _dtype(call)
    lambd, bias = float(call.attr("lambd", 0.5)), float(call.attr("bias", 0.0))
    if dtype.kind != "f" and (lambd < 0 or bias != int(bias)):
        raise Unsupported(f"Shrink of {dtype.name} with lambd {lambd} and bias {bias}: only a whole bias and a "
                          f"lambd of at least 0 keep integer arithmetic exact")
    low = call.block("Select", condition=call.block("Less", x=x, y=call.const(-lambd, dtype), hint="below"),
                     t=call.block("Add", x=x, y=call.const(bias, dtype), hint="up"), e=call.const(0, dtype),
                     hint="low")
    return call.block("Select", condition=call.block("Greater", x=x, y=call.const(lambd, dtype), hint="above"),
                      t=call.block("Subtract", x=x, y=call.const(bias, dtype), hint="down"), e=low, typed=0)
