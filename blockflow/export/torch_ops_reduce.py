"""PyTorch lowerings of the reductions, scans and products (blocks/math_reductions.py,
math_matmul.py, math_einsum.py): Sum, Mean, Max, Min, Prod, ArgMax, ArgMin, All, Any, Cumsum,
Cumprod, BatchMatMul and Einsum (MatMul is with the core blocks).

TensorFlow's semantics, kept: a reduction keeps the input's dtype (torch sums integers in int64),
an integer Mean truncates toward zero, Max and Min split the gradient among ties (torch.amax
does), Prod's gradient is the product of the other entries (exact with zeros), the scans'
``exclusive`` and ``reverse``.
"""
from __future__ import annotations

from blockflow.export.torch_lowering import Call, Unsupported, lowers
from blockflow.export.torch_ops_math import RULE_HELPER

_HELPERS = {
    "_int_mean": '''def _int_mean(x, dims, keep):
    """The mean of integers as TensorFlow: the sum (in x's dtype) over the count, truncated."""
    total = torch.sum(x, dim=dims, keepdim=keep, dtype=x.dtype)
    count = max(x.numel() // total.numel(), 1) if total.numel() else 1
    return torch.trunc(total.to(torch.float64) / count).to(x.dtype)''',
    "_prod": '''def _prod(x, dims, keep):
    """The product over the axes dims (torch.prod takes one axis), in x's dtype."""
    rest = [i for i in range(x.dim()) if i not in dims]
    flat = x.permute(list(dims) + rest).reshape([math.prod(x.shape[i] for i in dims)] + [x.shape[i] for i in rest])
    out = torch.prod(flat, 0, dtype=x.dtype)
    if keep:
        return out.reshape([1 if i in dims else d for i, d in enumerate(x.shape)])
    return out''',
    "_prod_grad": '''def _prod_grad(g, out, x, dims, keep):
    """Prod's gradient: g times the product of the other entries of each group; g * out / x when
    the product is a normal, finite number, else without division (exact with zeros)."""
    if x.numel() == 0:
        return (torch.zeros_like(x),)
    kept = [1 if i in dims else d for i, d in enumerate(x.shape)]
    g, out = g.reshape(kept), out.reshape(kept)
    size, info = out.abs(), torch.finfo(x.dtype)
    if bool(size.min() >= info.tiny) and bool(size.max() <= info.max):
        return ((g * out).expand(x.shape) / x,)
    rest = [i for i in range(x.dim()) if i not in dims]
    perm = list(dims) + rest
    xt = x.permute(perm)
    flat = xt.reshape(math.prod(x.shape[i] for i in dims), -1)
    one = torch.ones_like(flat[:1])
    left = torch.cat([one, torch.cumprod(flat[:-1], 0)], 0)
    right = torch.cat([torch.cumprod(flat[1:].flip(0), 0).flip(0), one], 0)
    back = sorted(range(len(perm)), key=perm.__getitem__)
    return ((left * right).reshape(xt.shape).permute(back) * g,)''',
    "_prod_rule": '''def _prod_rule(x, dims, keep):
    """Prod over dims, differentiated by blockflow's rule (exact where x holds zeros)."""
    return _Rule.apply(lambda v: _prod(v, dims, keep), lambda g, out, v: _prod_grad(g, out, v, dims, keep), x)''',
    "_scan": '''def _scan(fn, x, axis, exclusive, reverse, identity):
    """fn (torch.cumsum, torch.cumprod) along axis in x's dtype; exclusive: entry i leaves x[i]
    out (the first is identity); reverse: from the end of the axis (TensorFlow's cumsum)."""
    if x.shape[axis] == 0:
        return x
    if reverse:
        x = x.flip(axis)
    if exclusive:
        head = torch.full_like(x.narrow(axis, 0, 1), identity)
        out = torch.cat([head, fn(x.narrow(axis, 0, x.shape[axis] - 1), axis, dtype=x.dtype)], axis)
    else:
        out = fn(x, axis, dtype=x.dtype)
    return out.flip(axis) if reverse else out''',
}


def _dims(call: Call, name: str = "axis") -> tuple:
    """The static reduction axes as sorted non-negative ints (all of them when unwired)."""
    rank = len(call.type_of("input").shape)
    axis = call.arg(name)
    if axis is None:
        return tuple(range(rank))
    if isinstance(axis, str):
        raise Unsupported(f"its {name} is computed by the diagram; the export needs it constant")
    values = [int(a) for a in axis.reshape(-1).tolist()] if hasattr(axis, "reshape") else [int(axis)]
    return tuple(sorted({a % rank for a in values})) if rank else ()


def _one_axis(call: Call, name: str, rank: int) -> int:
    axis = call.arg(name)
    if isinstance(axis, str):
        raise Unsupported(f"its {name} is computed by the diagram; the export needs it constant")
    value = 0 if axis is None else int(axis.reshape(-1)[0] if hasattr(axis, "reshape") else axis)
    return value % rank if rank else 0


@lowers("Sum", "Mean", "Max", "Min")
def reduction(call: Call) -> str:
    x = call.arg("input")
    keep = bool(call.attrs.get("keep_dims"))
    dims = _dims(call)
    if not dims:
        return x   # torch reads dim=() as every axis; blockflow reduces none
    args = f"{x}, dim={call.lit(dims)}, keepdim={keep}"
    kind = call.type_of("input").dtype.kind
    if call.block == "Mean" and kind in "iu":
        call.helper("_int_mean", _HELPERS["_int_mean"])
        return f"_int_mean({x}, {call.lit(dims)}, {keep})"
    if call.block == "Sum":
        return f"torch.sum({args}, dtype={call.out_dtype()})"
    fn = {"Mean": "torch.mean", "Max": "torch.amax", "Min": "torch.amin"}[call.block]
    return f"{fn}({args})"


@lowers("Prod")
def prod(call: Call) -> str:
    x = call.arg("input")
    keep = bool(call.attrs.get("keep_dims"))
    dims = _dims(call)
    if not dims:
        return x
    call.helper("_prod", _HELPERS["_prod"])
    d = call.lit(dims)
    if call.type_of("input").dtype.kind != "f":
        return f"_prod({x}, {d}, {keep})"
    call.helper("_Rule", RULE_HELPER)
    call.helper("_prod_grad", _HELPERS["_prod_grad"])
    call.helper("_prod_rule", _HELPERS["_prod_rule"])
    return f"_prod_rule({x}, {d}, {keep})"


@lowers("ArgMax", "ArgMin")
def arg_extremum(call: Call) -> str:
    x = call.arg("input")
    axis = _one_axis(call, "dimension", len(call.type_of("input").shape))
    fn = "torch.argmax" if call.block == "ArgMax" else "torch.argmin"
    # the first index wins a tie in both; torch gives int64, the block output_type
    out = f"{fn}({x}, dim={axis})"
    return out if call.out_types[0].dtype.name == "int64" else f"{out}.to({call.out_dtype()})"


@lowers("All", "Any")
def bool_reduction(call: Call) -> str:
    x = call.arg("input")
    dims = _dims(call)
    if not dims:
        return x
    fn = "torch.all" if call.block == "All" else "torch.any"
    return f"{fn}({x}, dim={call.lit(dims)}, keepdim={bool(call.attrs.get('keep_dims'))})"


@lowers("Cumsum", "Cumprod")
def scan(call: Call) -> str:
    x = call.arg("x")
    axis = _one_axis(call, "axis", len(call.type_of("x").shape))
    call.helper("_scan", _HELPERS["_scan"])
    fn, identity = ("torch.cumsum", 0) if call.block == "Cumsum" else ("torch.cumprod", 1)
    return (f"_scan({fn}, {x}, {axis}, {bool(call.attrs.get('exclusive'))}, "
            f"{bool(call.attrs.get('reverse'))}, {identity})")


@lowers("BatchMatMul")
def batch_matmul(call: Call) -> str:
    x, y = call.ins
    if call.attrs.get("adj_x"):
        x = f"{x}.transpose(-2, -1)"
    if call.attrs.get("adj_y"):
        y = f"{y}.transpose(-2, -1)"
    # the batch axes broadcast as numpy's; autograd sums the gradient back over them
    return f"torch.matmul({x}, {y})"


@lowers("Einsum")
def einsum(call: Call) -> str:
    equation = str(call.attrs.get("equation", "")).replace(" ", "")
    # the compiler checked it (letters, one '...' per term, ',' and '->'); torch reads the same
    # language, implicit outputs included; it enters the file as an escaped literal
    return f"torch.einsum({call.lit(equation)}, {', '.join(call.arg('inputs'))})"
