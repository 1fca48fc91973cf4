"""ONNX lowerings of the core blocks: identities, Const, elementwise arithmetic and functions,
comparisons and logic, Cast, MatMul and the reductions.

Where ONNX's op computes something else than blockflow's block (numpy's floor modulo, TF's
integer mean, log1p's accuracy near 0) the lowering spells blockflow's formula out of exact
ONNX ops, or refuses the use.
"""
from __future__ import annotations

import numpy as np

from blockflow.export.onnx_lowering import OnnxCall, Unsupported, onnx_lowers

__all__ = ["reduce", "axes_of", "sigmoid_of", "log1p_of", "expm1_of", "swap_last"]


@onnx_lowers("Identity", "EnsureShape", "StopGradient", "PreventGradient")
def identity(call: OnnxCall) -> str:
    # a cut only changes gradients; the forward value passes through
    return call.ins[0]


@onnx_lowers("IdentityN")
def identity_n(call: OnnxCall) -> list:
    return list(call.ins[0])


@onnx_lowers("Const")
def const(call: OnnxCall) -> str:
    return call.const(np.asarray(call.attrs["value"], dtype=call.out_dtype()), hint="value")


@onnx_lowers("ZerosLike", "OnesLike")
def zeros_like(call: OnnxCall) -> str:
    t = call.out_types[0]
    fill = call.const(np.asarray(0 if call.block == "ZerosLike" else 1, dtype=t.dtype))
    return call.op("Expand", fill, call.op("Shape", call.ins[0]))


_BINARY = {"Add": "Add", "Subtract": "Sub", "Multiply": "Mul", "RealDiv": "Div", "Maximum": "Max",
           "Minimum": "Min", "Pow": "Pow"}


@onnx_lowers(*_BINARY)
def binary(call: OnnxCall) -> str:
    x, y = call.ins
    if call.block == "Pow" and call.type_of("x").dtype.kind in "iu":
        raise Unsupported("integer Pow (blockflow refuses negative powers, ONNX does not)")
    return call.op(_BINARY[call.block], x, y)


@onnx_lowers("SquaredDifference")
def squared_difference(call: OnnxCall) -> str:
    d = call.op("Sub", *call.ins)
    return call.op("Mul", d, d)


@onnx_lowers("AddN")
def add_n(call: OnnxCall) -> str:
    items = call.ins[0]
    if len(items) == 1:
        return items[0]
    total = call.op("Add", items[0], items[1])
    for x in items[2:]:       # pairwise, left to right: the order blockflow adds in
        total = call.op("Add", total, x)
    return total


@onnx_lowers("FloorDiv")
def floor_div(call: OnnxCall) -> str:
    x, y = call.ins
    if call.type_of("x").dtype.kind == "f":
        return call.op("Floor", call.op("Div", x, y))
    # integers: (x - floormod(x, y)) / y is exact; ONNX's Div alone truncates toward zero
    rem = call.op("Mod", x, y, fmod=0)
    return call.op("Div", call.op("Sub", x, rem), y)


@onnx_lowers("FloorMod")
def floor_mod(call: OnnxCall) -> str:
    x, y = call.ins
    if call.type_of("x").dtype.kind != "f":
        return call.op("Mod", x, y, fmod=0)     # the sign of y, as numpy's and TF's
    # numpy's float mod: fmod, moved by y where it is not 0 and its sign differs from y's
    r = call.op("Mod", x, y, fmod=1)
    zero = call.scalar(0, "x")
    differs = call.op("Xor", call.op("Less", r, zero), call.op("Less", y, zero))
    move = call.op("And", differs, call.op("Not", call.op("Equal", r, zero)))
    return call.op("Where", move, call.op("Add", r, y), r)


@onnx_lowers("ClipByValue")
def clip_by_value(call: OnnxCall) -> str:
    t, lo, hi = call.ins
    return call.op("Max", call.op("Min", t, hi), lo)


_UNARY = {"Negate": "Neg", "Sqrt": "Sqrt", "Exp": "Exp", "Log": "Log", "Tanh": "Tanh", "Abs": "Abs",
          "Sign": "Sign", "Reciprocal": "Reciprocal", "Sin": "Sin", "Cos": "Cos", "Tan": "Tan",
          "Asin": "Asin", "Acos": "Acos", "Atan": "Atan", "Sinh": "Sinh", "Cosh": "Cosh", "Erf": "Erf",
          "Floor": "Floor", "Ceil": "Ceil"}


@onnx_lowers(*_UNARY)
def unary(call: OnnxCall) -> str:
    if call.block == "Negate" and call.type_of("x").dtype.kind == "u":
        # ONNX's Neg takes signed types only; numpy's -x of an unsigned one wraps, as 0 - x does
        return call.op("Sub", call.scalar(0, "x"), call.ins[0])
    return call.op(_UNARY[call.block], call.ins[0])


@onnx_lowers("Square")
def square(call: OnnxCall) -> str:
    return call.op("Mul", call.ins[0], call.ins[0])


@onnx_lowers("Rsqrt")
def rsqrt(call: OnnxCall) -> str:
    return call.op("Reciprocal", call.op("Sqrt", call.ins[0]))


@onnx_lowers("Round")
def round_(call: OnnxCall) -> str:
    if call.type_of("x").dtype.kind != "f":
        return call.ins[0]
    return call.op("Round", call.ins[0])   # halves to even, as numpy's rint


@onnx_lowers("Sigmoid")
def sigmoid(call: OnnxCall) -> str:
    return sigmoid_of(call, call.ins[0], "x")


def sigmoid_of(call: OnnxCall, x: str, like: str) -> str:
    """1 / (1 + exp(-x)) as blockflow's Sigmoid computes it (exp's argument clipped where it
    would overflow, which changes no value)."""
    dtype = call.type_of(like).dtype
    top = np.floor(np.log(np.finfo(dtype).max))
    e = call.op("Exp", call.op("Min", call.op("Neg", x), call.const(np.asarray(top, dtype))))
    return call.op("Reciprocal", call.op("Add", e, call.const(np.asarray(1, dtype))))


def is_inf(call: OnnxCall, x: str, dtype) -> str:
    """IsInf, which takes no float16 before opset 20: a float16 goes through float32 (exactly)."""
    if np.dtype(dtype) == np.float16 and call.opset < 20:
        x = call.cast(x, np.float32)
    return call.op("IsInf", x)


def log1p_of(call: OnnxCall, v: str, dtype) -> str:
    """log(1 + v) to within a few ulps also for tiny v (ONNX has no log1p): with u = 1 + v
    rounded, log(u) * v / (u - 1) corrects the rounding of u (Goldberg's method)."""
    one = call.const(np.asarray(1, dtype))
    u = call.op("Add", one, v)
    d = call.op("Sub", u, one)
    exact = call.op("Or", call.op("Equal", d, call.const(np.asarray(0, dtype))), is_inf(call, u, dtype))
    safe_d = call.op("Where", exact, one, d)
    scaled = call.op("Mul", call.op("Log", u), call.op("Div", v, safe_d))
    return call.op("Where", call.op("Equal", d, call.const(np.asarray(0, dtype))), v,
                   call.op("Where", exact, call.op("Log", u), scaled))


def expm1_of(call: OnnxCall, x: str, dtype) -> str:
    """exp(x) - 1 to within a few ulps also for tiny x (Kahan's method: with u = exp(x)
    rounded, (u - 1) * x / log(u))."""
    one = call.const(np.asarray(1, dtype))
    u = call.op("Exp", x)
    d = call.op("Sub", u, one)
    lu = call.op("Log", u)
    plain = call.op("Or", call.op("Equal", d, call.const(np.asarray(-1, dtype))), is_inf(call, u, dtype))
    tiny = call.op("Equal", u, one)
    safe = call.op("Where", call.op("Or", plain, tiny), one, lu)
    scaled = call.op("Mul", d, call.op("Div", x, safe))
    return call.op("Where", tiny, x, call.op("Where", plain, d, scaled))


@onnx_lowers("Log1p")
def log1p(call: OnnxCall) -> str:
    return log1p_of(call, call.ins[0], call.type_of("x").dtype)


@onnx_lowers("Expm1")
def expm1(call: OnnxCall) -> str:
    return expm1_of(call, call.ins[0], call.type_of("x").dtype)


@onnx_lowers("Cast")
def cast(call: OnnxCall) -> str:
    src, dst = call.type_of("x").dtype, np.dtype(call.attrs["DstT"])
    if src == dst:
        return call.ins[0]
    if src.kind == "f" and dst.kind in "iu":
        # numpy truncates toward zero; make that explicit rather than trust each runtime's cast
        return call.cast(call.op("Where", call.op("Less", call.ins[0], call.scalar(0, "x")),
                                 call.op("Ceil", call.ins[0]), call.op("Floor", call.ins[0])), dst)
    return call.cast(call.ins[0], dst)


_COMPARE = {"Equal": "Equal", "Less": "Less", "LessEqual": "LessOrEqual", "Greater": "Greater",
            "GreaterEqual": "GreaterOrEqual"}


@onnx_lowers(*_COMPARE)
def compare(call: OnnxCall) -> str:
    return call.op(_COMPARE[call.block], *call.ins)


@onnx_lowers("NotEqual")
def not_equal(call: OnnxCall) -> str:
    return call.op("Not", call.op("Equal", *call.ins))


@onnx_lowers("LogicalAnd", "LogicalOr")
def logical(call: OnnxCall) -> str:
    return call.op("And" if call.block == "LogicalAnd" else "Or", *call.ins)


@onnx_lowers("LogicalNot")
def logical_not(call: OnnxCall) -> str:
    return call.op("Not", call.ins[0])


@onnx_lowers("Select")
def select(call: OnnxCall) -> str:
    return call.op("Where", *call.ins)


@onnx_lowers("MatMul", "BatchMatMul")
def matmul(call: OnnxCall) -> str:
    a, b = call.ins
    ta, tb = ("transpose_a", "transpose_b") if call.block == "MatMul" else ("adj_x", "adj_y")
    if call.attrs.get(ta):
        a = swap_last(call, a, len(call.in_types[0].shape))
    if call.attrs.get(tb):
        b = swap_last(call, b, len(call.in_types[1].shape))
    return call.op("MatMul", a, b)


def swap_last(call: OnnxCall, x: str, rank: int) -> str:
    perm = list(range(rank))
    perm[-2], perm[-1] = perm[-1], perm[-2]
    return call.op("Transpose", x, perm=perm)


# --------------------------------------------------------------------------------- reductions

def axes_of(call: OnnxCall, name: str, rank: int) -> tuple:
    """The static axis input as sorted non-negative axes (every axis when unwired)."""
    axis = call.arg(name)
    if axis is None:
        return tuple(range(rank))
    values = [int(a) for a in np.asarray(axis).reshape(-1).tolist()]
    return tuple(sorted({a % rank for a in values})) if rank else ()


def reduce(call: OnnxCall, op: str, x: str, axes, keep: bool) -> str:
    """ONNX's Reduce* over ``axes`` (a list; empty reduces nothing): the axes are an input from
    opset 18 on (ReduceSum since 13), an attribute before."""
    if not axes:
        return x
    if op == "ReduceSum" or call.opset >= 18:
        return call.op(op, x, call.ints(axes), keepdims=int(keep))
    return call.op(op, x, axes=list(axes), keepdims=int(keep))


_REDUCE = {"Sum": "ReduceSum", "Max": "ReduceMax", "Min": "ReduceMin", "Prod": "ReduceProd"}


#: the longest axis an integer Prod is unrolled along (one Mul per entry), as Cumprod
PROD_MAX = 1024


def _integer_prod(call: OnnxCall, x: str, t, axes, keep: bool) -> str:
    """ONNX Runtime's integer ReduceProd saturates where numpy's product wraps around: one Mul per
    entry along each axis instead (Mul wraps; the order does not matter modulo 2^bits)."""
    if any(t.shape[a] == 0 for a in axes):
        return reduce(call, "ReduceProd", x, axes, keep)     # all ones: nothing to overflow
    for a in axes:
        n = t.shape[a]
        if n is None or n > PROD_MAX:
            raise Unsupported(f"an integer product along an axis of open size or longer than {PROD_MAX} "
                              "(ONNX Runtime's ReduceProd saturates where blockflow's wraps around)")
        pieces = [x] if n == 1 else call.op("Split", x, call.ints([1] * n), axis=a, outputs=n)
        x = pieces[0]
        for p in pieces[1:]:
            x = call.op("Mul", x, p)
    return x if keep or not axes else call.op("Squeeze", x, call.ints(axes))


def _int64_sum(call: OnnxCall, x: str, t, axes, keep: bool) -> str:
    """ONNX Runtime's int64 ReduceSum rounds sums past 2^53; its CumSum is exact (wrapping as
    numpy's): the last entry of a running sum along each axis, after a zero put in front so that
    an empty axis sums to 0."""
    rank = len(t.shape)
    for a in axes:
        pads = [0] * (2 * rank)
        pads[a] = 1
        running = call.op("CumSum", call.op("Pad", x, call.ints(pads)), call.const(np.asarray(a, np.int64)))
        x = call.op("Slice", running, call.ints([-1]), call.ints([np.iinfo(np.int64).max]), call.ints([a]))
    return x if keep or not axes else call.op("Squeeze", x, call.ints(axes))


@onnx_lowers("Sum", "Max", "Min", "Prod", "Mean")
def reduction(call: OnnxCall) -> str:
    t = call.type_of("input")
    x, rank, keep = call.arg("input"), len(t.shape), bool(call.attrs.get("keep_dims"))
    axes = axes_of(call, "axis", rank)
    if call.block != "Mean":
        if t.dtype.kind == "b":
            raise Unsupported("a reduction of a bool tensor")
        if call.block == "Prod" and t.dtype.kind in "iu":
            return _integer_prod(call, x, t, axes, keep)
        if call.block == "Sum" and t.dtype == np.int64:
            return _int64_sum(call, x, t, axes, keep)
        return reduce(call, _REDUCE[call.block], x, axes, keep)
    if not axes:
        return x
    if t.dtype == np.float16:
        # numpy's mean of float16 sums and divides in float32, then rounds once
        wide = call.cast(x, np.float32)
        total = reduce(call, "ReduceMean", wide, axes, keep)
        return call.cast(total, np.float16)
    count = 1
    for a in axes:
        if t.shape[a] is None:
            count = None
            break
        count *= t.shape[a]
    # ONNX sums no 8- or 16-bit integers: those go through int32, the sum wrapped in their dtype
    # as numpy's is, the count and the quotient in int32
    dtype = np.dtype(np.int32) if t.dtype in (np.int8, np.int16, np.uint8) else t.dtype
    if dtype != t.dtype:
        x = call.cast(x, dtype)
    total = _int64_sum(call, x, t, axes, keep) if dtype == np.int64 else reduce(call, "ReduceSum", x, axes, keep)
    if dtype != t.dtype:
        total = call.cast(call.cast(total, t.dtype), dtype)
    if count is None:
        sizes = call.op("Gather", call.op("Shape", x), call.ints(axes))
        n = call.cast(call.op("ReduceProd", sizes, keepdims=0), dtype)
    else:
        n = call.const(np.asarray(count, dtype))
    if t.dtype.kind == "f":
        return call.op("Div", total, n)
    # TF's integer mean: the quotient truncated toward zero (ONNX's integer Div truncates too)
    n = call.op("Max", n, call.const(np.asarray(1, dtype)))
    if dtype == np.int64:
        # blockflow divides in float64 (np.trunc(total / count)): past 2^53 that rounds
        quotient = call.op("Div", call.cast(total, np.float64), call.cast(n, np.float64))
        return call.cast(quotient, np.int64)        # a float-to-integer Cast truncates
    mean = call.op("Div", total, n)
    return mean if dtype == t.dtype else call.cast(mean, t.dtype)


@onnx_lowers("All", "Any")
def all_any(call: OnnxCall) -> str:
    t = call.type_of("input")
    axes = axes_of(call, "axis", len(t.shape))
    keep = bool(call.attrs.get("keep_dims"))
    x = call.arg("input")
    if not axes:
        return x
    # counts of true entries: an empty Any is false and an empty All true, as numpy's
    if call.block == "All":
        x = call.op("Not", x)
    count = reduce(call, "ReduceSum", call.cast(x, np.int64), axes, keep)
    found = call.op("Greater", count, call.const(np.asarray(0, np.int64)))
    return call.op("Not", found) if call.block == "All" else found


@onnx_lowers("ArgMax", "ArgMin")
def arg_extremum(call: OnnxCall) -> str:
    rank = call.rank("input")
    dim = call.arg("dimension")
    axis = (0 if dim is None else int(np.asarray(dim).reshape(-1)[0])) % max(rank, 1)
    found = call.op(call.block, call.arg("input"), axis=axis, keepdims=0, select_last_index=0)
    out = np.dtype(call.attrs.get("output_type", "int64"))
    return found if out == np.int64 else call.cast(found, out)


@onnx_lowers("Cumsum")
def cumsum(call: OnnxCall) -> str:
    rank = call.rank("x")
    axis = call.arg("axis")
    axis = (0 if axis is None else int(np.asarray(axis).reshape(-1)[0])) % max(rank, 1)
    return call.op("CumSum", call.ins[0], call.const(np.asarray(axis, np.int64)),
                   exclusive=int(bool(call.attrs.get("exclusive"))),
                   reverse=int(bool(call.attrs.get("reverse"))))

