"""ONNX's elementwise, matrix and reduction ops as blocks.

ONNX broadcasts as numpy does (opset 7 on), as blockflow's binary blocks do, so a binary op is
one block. Variadic Sum, Max, Min and Mean are chains of binary blocks (AddN when every input
has one shape). Integer division truncates in ONNX and floors in TensorFlow: it is FloorDiv
corrected where the two differ.
"""
from __future__ import annotations

import numpy as np

from blockflow.importing.onnx_build import Known
from blockflow.importing.onnx_map_elementwise import int_div
from blockflow.importing.onnx_mapping import Call, Unsupported, maps
from blockflow.importing.onnx_read import DTYPES

#: ONNX unary op -> (block, its input port): the same function elementwise
UNARY = {
    "Abs": ("Abs", "x"), "Neg": ("Negate", "x"), "Exp": ("Exp", "x"), "Log": ("Log", "x"),
    "Sqrt": ("Sqrt", "x"), "Reciprocal": ("Reciprocal", "x"), "Floor": ("Floor", "x"),
    "Ceil": ("Ceil", "x"), "Sigmoid": ("Sigmoid", "x"), "Tanh": ("Tanh", "x"), "Erf": ("Erf", "x"),
    "Sin": ("Sin", "x"), "Cos": ("Cos", "x"), "Tan": ("Tan", "x"), "Asin": ("Asin", "x"),
    "Acos": ("Acos", "x"), "Atan": ("Atan", "x"), "Sinh": ("Sinh", "x"), "Cosh": ("Cosh", "x"),
    "Sign": ("Sign", "x"), "Round": ("Round", "x"), "Not": ("LogicalNot", "x"),
    "Identity": ("Identity", "input"),
}

#: ONNX binary op -> block (x, y inputs, numpy broadcasting)
BINARY = {
    "Add": "Add", "Sub": "Subtract", "Mul": "Multiply", "Pow": "Pow", "Equal": "Equal",
    "Greater": "Greater", "Less": "Less", "GreaterOrEqual": "GreaterEqual", "LessOrEqual": "LessEqual",
    "And": "LogicalAnd", "Or": "LogicalOr",
}


@maps(*UNARY, blocks="the block of the same function (Neg: Negate, Not: LogicalNot)",
      notes="elementwise; Round halves to even, as both define it")
def unary(call: Call):
    block, port = UNARY[call.node.op]
    return call.block(block, **{port: call.input(0)}, typed=0)


@maps(*BINARY, blocks="Add, Subtract, Multiply, Pow, Equal, Greater, Less, GreaterEqual, LessEqual, "
                      "LogicalAnd, LogicalOr", notes="numpy broadcasting; Pow of a float to an integer "
                      "power casts the exponent to the base's dtype; refused: an integer to a float power")
def binary(call: Call):
    y = call.input(1)
    if call.node.op == "Pow":
        y = _exponent(call)
    return call.block(BINARY[call.node.op], x=call.input(0), y=y, typed=0)


def _exponent(call: Call):
    """Pow's exponent in the base's dtype (ONNX lets them differ; TF's Pow takes one dtype)."""
    base, power = call.dtype(0), call.dtype(1)
    if base is None or power is None or base == power:
        return call.input(1)
    if base.kind != "f" and power.kind == "f":
        raise Unsupported(f"Pow of {base.name} to a {power.name} power (ONNX leaves the rounding back to "
                          f"{base.name} unsaid)")
    y = call.input(1)
    if isinstance(y, Known):
        return call.const(y.value.astype(base))
    return call.block("Cast", {"DstT": base.name}, x=y, hint="exponent")


@maps("Div", blocks="RealDiv (FloorDiv, FloorMod and a correction for integers)",
      notes="integers truncate toward zero, as ONNX divides: TF's FloorDiv plus one where the remainder is "
            "not 0 and the signs differ")
def div(call: Call):
    dtype = call.dtype(0)
    if dtype is None:
        raise Unsupported("Div of an input whose dtype is unknown")
    if dtype.kind != "f":
        return int_div(call)
    return call.block("RealDiv", x=call.input(0), y=call.input(1), typed=0)


@maps("Sum", "Max", "Min", "Mean", blocks="AddN or Add, Maximum, Minimum (RealDiv for Mean)",
      notes="any number of inputs, broadcast")
def variadic(call: Call):
    ins = [call.input(i) for i in range(len(call.values))]
    op = call.node.op
    if len(ins) == 1:
        return call.block("Identity", input=ins[0], typed=0)
    shapes = [call.shape(i) for i in range(len(ins))]
    same = all(s is not None and s == shapes[0] and all(isinstance(d, int) for d in s) for s in shapes)
    last = op != "Mean"
    if op in ("Sum", "Mean") and same:
        total = call.block("AddN", inputs=ins, hint="" if last else "sum", typed=0 if last else None)
    else:
        block = {"Sum": "Add", "Mean": "Add", "Max": "Maximum", "Min": "Minimum"}[op]
        total = ins[0]
        for i, v in enumerate(ins[1:], start=1):
            final = last and i == len(ins) - 1
            total = call.block(block, x=total, y=v, hint="" if final else f"{i}", typed=0 if final else None)
    if op != "Mean":
        return total
    return call.block("RealDiv", x=total, y=call.const(len(ins), call.dtype(0)), typed=0)


@maps("MatMul", blocks="MatMul (2-D), BatchMatMul (more axes), ExpandDims and Squeeze (1-D operands)",
      notes="numpy's matmul: batch axes broadcast")
def matmul(call: Call):
    ra, rb = call.rank(0), call.rank(1)
    a, b = call.input(0), call.input(1)
    if ra == 2 and rb == 2:
        return call.block("MatMul", a=a, b=b, typed=0)
    if ra == 1:
        a = call.block("ExpandDims", input=a, axis=call.const(0, np.int32), hint="row")
    if rb == 1:
        b = call.block("ExpandDims", input=b, axis=call.const(1, np.int32), hint="col")
    if ra == 1 and rb == 1 or max(ra, rb) == 2:
        y = call.block("MatMul", a=a, b=b, hint="mm")
    else:
        y = call.block("BatchMatMul", x=a, y=b, hint="" if ra > 1 and rb > 1 else "bmm",
                       typed=0 if ra > 1 and rb > 1 else None)
        if ra > 1 and rb > 1:
            return y
    axes = ([-2] if ra == 1 else []) + ([-1] if rb == 1 else [])
    return call.block("Squeeze", {"axis": axes}, input=y, typed=0)


def _clip_bound(call: Call, i: int, attr: str, extreme):
    if call.opset < 11:
        return call.const(call.attr(attr, extreme), call.dtype(0))
    if call.has(i):
        return call.input(i)
    return call.const(extreme, call.dtype(0))


@maps("Clip", blocks="ClipByValue (Maximum and Minimum when a bound is computed)",
      notes="min and max given, or the dtype's extremes")
def clip(call: Call):
    dtype = call.dtype(0)
    if dtype is None:
        raise Unsupported("Clip of an input whose dtype is unknown")
    info = np.finfo(dtype) if dtype.kind == "f" else np.iinfo(dtype)
    lo = _clip_bound(call, 1, "min", info.min)
    hi = _clip_bound(call, 2, "max", info.max)
    if isinstance(lo, Known) and isinstance(hi, Known) and np.all(lo.value <= hi.value):
        return call.block("ClipByValue", t=call.input(0), clip_value_min=call.const(lo.value, dtype),
                          clip_value_max=call.const(hi.value, dtype), typed=0)
    # ONNX's order, min(max(x, lo), hi): where the bounds cross, hi wins (ClipByValue's lo would)
    low = call.block("Maximum", x=call.input(0), y=lo, hint="min")
    return call.block("Minimum", x=low, y=hi, typed=0)


@maps("Cast", blocks="Cast", notes="to the dtypes a project holds")
def cast(call: Call):
    to = DTYPES.get(call.attr("to"))
    if to is None:
        raise Unsupported(f"Cast to ONNX type {call.attr('to')}, which a project does not hold")
    return call.block("Cast", {"DstT": to}, x=call.input(0), typed=0)


_REDUCE = {"ReduceSum": "Sum", "ReduceMean": "Mean", "ReduceMax": "Max", "ReduceMin": "Min",
           "ReduceProd": "Prod", "ReduceSumSquare": "Sum", "ReduceL1": "Sum", "ReduceL2": "Sum",
           "ReduceLogSum": "Sum"}


def _reduce_axes(call: Call) -> list | None:
    """The axes reduced (None: all), from the attribute or (ReduceSum from 13, every reduction
    from 18) the second input."""
    takes_input = call.opset >= 18 or (call.node.op == "ReduceSum" and call.opset >= 13)
    if takes_input:
        axes = call.ints(1, "the axes") if call.has(1) else None
    else:
        axes = call.attr("axes")
    if axes is not None and len(axes) == 0:
        axes = None
    if axes is None and call.attr("noop_with_empty_axes", 0):
        return []
    rank = call.rank(0)
    return list(range(rank)) if axes is None else sorted(call.axes(axes, rank, f"{call.node.op}'s axes"))


@maps(*_REDUCE, blocks="Sum, Mean, Max, Min, Prod (Square, Abs, Sqrt, Log around them; Any, All for "
      "booleans)", notes="axes as attribute or input, keepdims, noop_with_empty_axes; ReduceMax and "
      "ReduceMin of booleans as Any and All")
def reduce(call: Call):
    op = call.node.op
    axes = _reduce_axes(call)
    x = call.input(0)
    if axes == []:
        return call.block("Identity", input=x, typed=0)
    pre = {"ReduceSumSquare": "Square", "ReduceL1": "Abs", "ReduceL2": "Square"}.get(op)
    if pre:
        x = call.block(pre, x=x, hint=pre.lower())
    post = {"ReduceL2": "Sqrt", "ReduceLogSum": "Log"}.get(op)
    block = _REDUCE[op]
    if call.dtype(0) == np.bool_ and op in ("ReduceMax", "ReduceMin"):   # of booleans: any, all
        block = "Any" if op == "ReduceMax" else "All"
    y = call.block(block, {"keep_dims": bool(call.attr("keepdims", 1))}, input=x,
                   axis=call.const(axes, np.int32), hint="sum" if post else "", typed=None if post else 0)
    return call.block(post, x=y, typed=0) if post else y


@maps("ReduceLogSumExp", blocks="Max, Select, StopGradient, Subtract, Exp, Sum, Log, Add (Squeeze without "
      "keepdims)", notes="log(sum(exp(x - m))) + m with m the largest finite entry, as ONNX computes it; "
      "m's gradient stopped, as TF's reduce_logsumexp (the function does not depend on it)")
def reduce_log_sum_exp(call: Call):
    axes = _reduce_axes(call)
    x, dtype = call.input(0), call.dtype(0)
    if dtype is None or dtype.kind != "f":
        raise Unsupported(f"ReduceLogSumExp of {dtype} (it is defined for floats)")
    if axes == []:
        return call.block("Identity", input=x, typed=0)
    axis = call.const(axes, np.int32)
    infinite = call.block("Equal", x=call.block("Abs", x=x, hint="abs"), y=call.const(np.inf, dtype), hint="inf")
    finite = call.block("Select", condition=infinite, t=call.const(-np.inf, dtype), e=x, hint="finite")
    top = call.block("StopGradient", input=call.block("Max", {"keep_dims": True}, input=finite, axis=axis,
                                                       hint="max"), hint="shift")
    total = call.block("Sum", {"keep_dims": True}, axis=axis, hint="sum",
                       input=call.block("Exp", x=call.block("Subtract", x=x, y=top, hint="shifted"), hint="exp"))
    keep = bool(call.attr("keepdims", 1))
    y = call.block("Add", x=call.block("Log", x=total, hint="log"), y=top, hint="" if keep else "kept",
                   typed=0 if keep else None)
    return y if keep else call.block("Squeeze", {"axis": axes}, input=y, typed=0)


@maps("ArgMax", "ArgMin", blocks="ArgMax, ArgMin (ExpandDims for keepdims; Reverse, Subtract for "
      "select_last_index)", notes="select_last_index as the first index along the reversed axis")
def arg(call: Call):
    rank = call.rank(0)
    axis = call.axis(call.attr("axis", 0), rank, f"{call.node.op}'s axis")
    keep = call.attr("keepdims", 1)
    x, last = call.input(0), call.attr("select_last_index", 0)
    if last:    # the first in the reversed axis is the last: index n - 1 - i
        size = (call.shape(0) or [None] * rank)[axis]
        if not isinstance(size, int):
            raise Unsupported(f"{call.node.op} with select_last_index along an axis of unknown size")
        x = call.block("Reverse", tensor=x, axis=call.const([axis], np.int32), hint="reversed")
    done = not keep and not last
    y = call.block(call.node.op, {"output_type": "int64"}, input=x, dimension=call.const(axis, np.int32),
                   hint="" if done else "arg", typed=0 if done else None)
    if last:
        y = call.block("Subtract", x=call.const(size - 1, np.int64), y=y, hint="" if not keep else "from_end",
                       typed=None if keep else 0)
    if keep:
        y = call.block("ExpandDims", input=y, axis=call.const(axis, np.int32), typed=0)
    return y


@maps("Where", blocks="Select", notes="numpy broadcasting of the three inputs")
def where(call: Call):
    return call.block("Select", condition=call.input(0), t=call.input(1), e=call.input(2), typed=0)


@maps("Einsum", blocks="Einsum", notes="one or two operands, as the block takes them")
def einsum(call: Call):
    ins = [call.input(i) for i in range(len(call.values))]
    equation = call.attr("equation", "").replace(" ", "")
    if not 1 <= len(ins) <= 2:
        raise Unsupported(f"Einsum of {len(ins)} operands: blockflow's Einsum takes one or two")
    for term in equation.split("->")[0].split(","):
        letters = term.replace("...", "")
        if len(set(letters)) != len(letters):
            raise Unsupported(f"Einsum {equation!r} repeats a letter in one operand (a diagonal or trace): "
                              f"blockflow's Einsum takes each letter once per operand")
    return call.block("Einsum", {"equation": call.attr("equation", "").replace(" ", "")}, inputs=ins, typed=0)


@maps("CumSum", "CumProd", blocks="Cumsum, Cumprod", notes="exclusive, reverse")
def cumsum(call: Call):
    axis = call.ints(1, f"{call.node.op}'s axis")
    block = "Cumsum" if call.node.op == "CumSum" else "Cumprod"
    return call.block(block, {"exclusive": bool(call.attr("exclusive", 0)), "reverse": bool(call.attr("reverse", 0))},
                      x=call.input(0), axis=call.const(axis[0], np.int32), typed=0)
