"""PyTorch lowerings of the elementwise math blocks (blocks/math_binary.py, math_unary.py,
math_logic.py, math_sequences.py): arithmetic, powers, rounding, Cast, comparisons and logic,
Range and LinSpace. The reductions, scans and products are in torch_ops_reduce.py.

Where torch's own gradient is not blockflow's (TensorFlow's) rule, the op goes through the
``_Rule`` helper: a ``torch.autograd.Function`` whose backward is the block's vjp written in
torch (Maximum's ties go to x, Pow's log at a non-positive base is 0, FloorMod's ``floor(x / y)``,
ClipByValue's crossed bounds, Asin's accurate ``(1 - x)(1 + x)``). Its backward is written in
torch ops, so a user who differentiates the module twice in torch still can.
"""
from __future__ import annotations

import numpy as np

from blockflow.export.torch_lowering import Call, Unsupported, lowers

#: the source of the _Rule helper: blockflow's gradient rule for an op torch differentiates otherwise
RULE_HELPER = '''class _Rule(torch.autograd.Function):
    """fn(*xs), differentiated by blockflow's rule grad(g, out, *xs) (TensorFlow's), not torch's;
    each cotangent is summed back over the axes its input was broadcast along."""

    @staticmethod
    def forward(ctx, fn, grad, *xs):
        out = fn(*xs)
        ctx.grad = grad
        ctx.save_for_backward(*xs, out)
        return out

    @staticmethod
    def backward(ctx, g):
        *xs, out = ctx.saved_tensors
        cts = ctx.grad(g, out, *xs)
        return (None, None) + tuple(
            None if ct is None or not need else (ct if ct.shape == x.shape else ct.sum_to_size(x.shape))
            for ct, x, need in zip(cts, xs, ctx.needs_input_grad[2:]))'''

_MUL_NO_NAN = '''def _mul_no_nan(t, g):
    """t * g, but 0 where g is 0 even if t is inf or nan (TensorFlow's mul_no_nan)."""
    return torch.where(g == 0, torch.zeros((), dtype=t.dtype), t * g)'''

_HELPERS = {
    "_maximum_grad": '''def _maximum_grad(g, out, x, y):
    """Maximum's gradient: to x where x >= y (a tie goes to x, as in TensorFlow), else to y."""
    to_x = x >= y
    return g * to_x, g * ~to_x''',
    "_minimum_grad": '''def _minimum_grad(g, out, x, y):
    """Minimum's gradient: to x where x <= y (a tie goes to x, as in TensorFlow), else to y."""
    to_x = x <= y
    return g * to_x, g * ~to_x''',
    "_pow_grad": '''def _pow_grad(g, z, x, y):
    """Pow's gradient (TensorFlow's): y * x ** (y - 1) for x; z * log(x) for y, with log(x) taken
    as 0 where x <= 0; a zero g gives 0 even where the factor is inf or nan."""
    gx = _mul_no_nan(torch.pow(x, y - 1) * y, g)
    gy = _mul_no_nan(z * torch.log(torch.where(x > 0, x, torch.ones((), dtype=x.dtype))), g)
    return gx, gy''',
    "_floor_mod_grad": '''def _floor_mod_grad(g, out, x, y):
    """FloorMod's gradient (TensorFlow's): g for x, -g * floor(x / y) for y."""
    return g, -(torch.floor(x / y) * g)''',
    "_clip": '''def _clip(t, low, high):
    """max(min(t, high), low): when the bounds cross, low wins (TensorFlow's clip_by_value)."""
    out = torch.maximum(torch.minimum(t, high), low)
    if out.shape != t.shape:
        raise ValueError(f"ClipByValue: bounds of shapes {list(low.shape)} and {list(high.shape)} "
                         f"do not broadcast to t's shape {list(t.shape)}")
    return out''',
    "_add_n": '''def _add_n(first, *rest):
    """AddN: the sum of tensors of one shape (it does not broadcast, as tf.add_n)."""
    for x in rest:
        if x.shape != first.shape:
            raise ValueError(f"AddN: shapes {list(first.shape)} and {list(x.shape)} differ")
    total = first + rest[0]
    for x in rest[1:]:
        total = total + x
    return total''',
    "_clip_grad": '''def _clip_grad(g, out, t, low, high):
    """ClipByValue's gradient (TensorFlow's): to t inside the bounds, to a bound where t passes it."""
    below, above = t < low, t > high
    return g * ~(below | above), g * below, g * above''',
    "_asin_grad": '''def _asin_grad(g, out, x):
    """g / sqrt(1 - x**2), as (1 - x)(1 + x): accurate near +-1."""
    return (g / torch.sqrt((1 - x) * (1 + x)),)''',
    "_acos_grad": '''def _acos_grad(g, out, x):
    """-g / sqrt(1 - x**2), as (1 - x)(1 + x): accurate near +-1."""
    return (-g / torch.sqrt((1 - x) * (1 + x)),)''',
    "_range": '''def _range(start, delta, n, dtype):
    """start + i * delta for i < n, computed in float64 (int64 for integers) and rounded once."""
    wide = torch.float64 if dtype.is_floating_point else torch.int64
    return (torch.arange(n, dtype=wide) * delta + start).to(dtype)''',
    "_linspace": '''def _linspace(start, stop, num, dtype):
    """numpy's linspace in float64 (start + i * step, the last exactly stop), rounded once."""
    values = torch.full((1,), start, dtype=torch.float64)
    if num > 1:
        values = torch.arange(num, dtype=torch.float64) * ((stop - start) / (num - 1)) + start
        values[-1] = stop
    return values.to(dtype)''',
}


def rule(call: Call, fn: str, grad: str, *args: str) -> str:
    """``fn(*args)`` differentiated by the helper function ``grad`` (blockflow's vjp)."""
    call.helper("_Rule", RULE_HELPER)
    if grad == "_pow_grad":
        call.helper("_mul_no_nan", _MUL_NO_NAN)
    call.helper(grad, _HELPERS[grad])
    return f"_Rule.apply({fn}, {grad}, {', '.join(args)})"


def _is_float(call: Call, name: str = "x") -> bool:
    t = call.type_of(name)
    return t is not None and t.dtype.kind == "f"


# --------------------------------------------------------------------------------------------
# Binary arithmetic


@lowers("AddN")
def add_n(call: Call) -> str:
    items = call.arg("inputs")
    if len(items) == 1:
        return items[0]
    if all(None not in t.shape for t in call.type_of("inputs")):
        return " + ".join(items)   # the compiler saw the shapes equal
    # a size unknown when exporting: the shapes are checked when forward runs, as blockflow does
    call.helper("_add_n", _HELPERS["_add_n"])
    return f"_add_n({', '.join(items)})"


@lowers("Maximum", "Minimum")
def extremum(call: Call) -> str:
    x, y = call.ins
    fn = "torch.maximum" if call.block == "Maximum" else "torch.minimum"
    if not _is_float(call):
        return f"{fn}({x}, {y})"
    # torch splits a tie's gradient in halves; TensorFlow gives it all to x
    return rule(call, fn, f"_{call.block.lower()}_grad", x, y)


@lowers("Pow")
def power(call: Call) -> str:
    x, y = call.ins
    if not _is_float(call):
        return f"torch.pow({x}, {y})"
    return rule(call, "torch.pow", "_pow_grad", x, y)


@lowers("SquaredDifference")
def squared_difference(call: Call) -> str:
    d = call.temp("diff")
    call.line(f"{d} = torch.sub({call.ins[0]}, {call.ins[1]})")
    return f"{d} * {d}"


@lowers("FloorDiv")
def floor_div(call: Call) -> str:
    x, y = call.ins
    if _is_float(call):
        # floor(x / y) as TensorFlow (1 // 0.1 is 10); torch's floor division says 9
        return f"torch.floor(torch.div({x}, {y})).detach()"
    return f"torch.div({x}, {y}, rounding_mode='floor')"


@lowers("FloorMod")
def floor_mod(call: Call) -> str:
    x, y = call.ins
    if not _is_float(call):
        return f"torch.remainder({x}, {y})"
    # torch's gradient for y uses its own floor division, not floor(x / y)
    return rule(call, "torch.remainder", "_floor_mod_grad", x, y)


@lowers("ClipByValue")
def clip_by_value(call: Call) -> str:
    t, low, high = call.ins
    call.helper("_clip", _HELPERS["_clip"])
    if not _is_float(call, "t"):
        return f"_clip({t}, {low}, {high})"
    # torch.clamp lets max win when the bounds cross, and routes the gradient differently
    return rule(call, "_clip", "_clip_grad", t, low, high)


# --------------------------------------------------------------------------------------------
# Unary


_UNARY = {"Rsqrt": "torch.rsqrt", "Reciprocal": "torch.reciprocal", "Log1p": "torch.log1p",
          "Expm1": "torch.expm1", "Sin": "torch.sin", "Cos": "torch.cos", "Tan": "torch.tan",
          "Atan": "torch.atan", "Sinh": "torch.sinh", "Cosh": "torch.cosh", "Erf": "torch.erf"}


@lowers(*_UNARY)
def unary(call: Call) -> str:
    return f"{_UNARY[call.block]}({call.ins[0]})"


@lowers("Asin", "Acos")
def arc(call: Call) -> str:
    fn = "torch.asin" if call.block == "Asin" else "torch.acos"
    # torch's rsqrt(1 - x * x) loses digits near +-1, where blockflow's (1 - x)(1 + x) does not
    return rule(call, fn, f"_{call.block.lower()}_grad", call.ins[0])


@lowers("Sign")
def sign(call: Call) -> str:
    x = call.ins[0]
    if not _is_float(call):
        return f"torch.sign({x})"
    # nan stays nan (torch.sign gives 0); no gradient flows back, as in TensorFlow
    return f"torch.where(torch.isnan({x}), {x}, torch.sign({x})).detach()"


_ROUNDING = {"Floor": "torch.floor", "Ceil": "torch.ceil", "Round": "torch.round"}


@lowers(*_ROUNDING)
def rounding(call: Call) -> str:
    x = call.ins[0]
    if not _is_float(call):
        return x   # integers are already whole (Round's only non-float case)
    # torch.round rounds halves to even, as tf.round; no gradient flows back (TensorFlow's)
    return f"{_ROUNDING[call.block]}({x}).detach()"


@lowers("Cast")
def cast(call: Call) -> str:
    x = call.ins[0]
    src, dst = call.type_of("x").dtype, call.out_types[0].dtype
    if src.kind == "c" and dst.kind != "c":
        raise Unsupported(f"a cast from {src.name} to {dst.name} (numpy drops the imaginary part "
                          "with a warning; torch's gradient would not be blockflow's)")
    # float -> int truncates toward zero, number -> bool is != 0, as tf.cast; a cast to or from
    # an integer or bool dtype carries no gradient in torch either
    return f"{x}.to({call.out_dtype()})"


# --------------------------------------------------------------------------------------------
# Comparisons and logic (bool outputs)


_COMPARE = {"Equal": "torch.eq", "NotEqual": "torch.ne", "Greater": "torch.gt", "GreaterEqual": "torch.ge",
            "Less": "torch.lt", "LessEqual": "torch.le", "LogicalAnd": "torch.logical_and",
            "LogicalOr": "torch.logical_or"}


@lowers(*_COMPARE)
def compare(call: Call) -> str:
    return f"{_COMPARE[call.block]}({call.ins[0]}, {call.ins[1]})"


@lowers("LogicalNot")
def logical_not(call: Call) -> str:
    return f"torch.logical_not({call.ins[0]})"


# --------------------------------------------------------------------------------------------
# Sequences from static numbers


def _static_number(call: Call, name: str, default):
    value = call.arg(name)
    if value is None:
        return default
    if isinstance(value, str):
        raise Unsupported(f"its {name} is computed by the diagram; Range and LinSpace take constants")
    return np.asarray(value)


@lowers("Range")
def range_(call: Call) -> str:
    out = call.out_types[0]
    n = out.shape[0]
    if n is None:
        raise Unsupported("its length is not known when exporting")
    start = _static_number(call, "start", 0)
    delta = _static_number(call, "delta", 1)
    if out.dtype.kind == "f":
        # blockflow rounds start and delta to the result's dtype first, then works in float64
        s, d = (float(np.asarray(v).astype(out.dtype)) for v in (start, delta))
    else:
        s, d = int(start), int(delta)
    call.helper("_range", _HELPERS["_range"])
    return f"_range({call.lit(s)}, {call.lit(d)}, {n}, {call.out_dtype()})"


@lowers("LinSpace")
def linspace(call: Call) -> str:
    out = call.out_types[0]
    n = out.shape[0]
    if n is None:
        raise Unsupported("its length is not known when exporting")
    start = _static_number(call, "start", None)
    stop = _static_number(call, "stop", None)
    # the result has start's dtype, and stop is rounded to it first (as blockflow)
    s, e = (float(np.asarray(v).astype(out.dtype)) for v in (start, stop))
    call.helper("_linspace", _HELPERS["_linspace"])
    return f"_linspace({call.lit(s)}, {call.lit(e)}, {n}, {call.out_dtype()})"
