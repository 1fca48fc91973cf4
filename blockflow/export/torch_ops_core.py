"""PyTorch lowerings of the core blocks: identities and cuts, Const, the elementwise arithmetic
the samples are drawn from, MatMul and the reductions (TF semantics: Max splits the gradient
among ties, as ``torch.amax`` does)."""
from __future__ import annotations

from blockflow.export.torch_lowering import Call, lowers


@lowers("Identity", "EnsureShape")
def identity(call: Call) -> str:
    return call.ins[0]


@lowers("StopGradient")
def stop_gradient(call: Call) -> str:
    return f"{call.ins[0]}.detach()"


@lowers("Const")
def const(call: Call) -> str:
    return call.constant(call.attrs["value"], call.out_types[0].dtype)


_BINARY = {"Add": "torch.add", "Subtract": "torch.sub", "Multiply": "torch.mul", "Maximum": "torch.maximum",
           "Minimum": "torch.minimum"}


@lowers(*_BINARY)
def binary(call: Call) -> str:
    return f"{_BINARY[call.block]}({call.ins[0]}, {call.ins[1]})"


@lowers("RealDiv")
def real_div(call: Call) -> str:
    return f"torch.div({call.ins[0]}, {call.ins[1]})"


_UNARY = {"Exp": "torch.exp", "Log": "torch.log", "Tanh": "torch.tanh", "Sigmoid": "torch.sigmoid",
          "Relu": "torch.relu", "Square": "torch.square", "Sqrt": "torch.sqrt", "Negate": "torch.neg",
          "Abs": "torch.abs"}


@lowers(*_UNARY)
def unary(call: Call) -> str:
    return f"{_UNARY[call.block]}({call.ins[0]})"


@lowers("MatMul")
def matmul(call: Call) -> str:
    a, b = call.ins
    if call.attrs.get("transpose_a"):
        a = f"{a}.transpose(-2, -1)"
    if call.attrs.get("transpose_b"):
        b = f"{b}.transpose(-2, -1)"
    return f"torch.matmul({a}, {b})"


_REDUCE = {"Sum": "torch.sum", "Mean": "torch.mean", "Max": "torch.amax", "Min": "torch.amin",
           "Prod": "torch.prod"}


def axes(call: Call, rank: int) -> tuple:
    """The static ``axis`` input as a tuple of non-negative axes (None: all of them)."""
    axis = call.arg("axis")
    if axis is None:
        return tuple(range(rank))
    values = [int(a) for a in (axis.reshape(-1).tolist() if hasattr(axis, "reshape") else [axis])]
    return tuple(sorted({a % rank for a in values})) if rank else ()


@lowers("Sum", "Mean", "Max", "Min")
def reduction(call: Call) -> str:
    x = call.arg("input")
    rank = len(call.type_of("input").shape)
    keep = bool(call.attrs.get("keep_dims"))
    dims = axes(call, rank)
    if not dims:
        return x if not keep else x
    if call.block == "Mean" and call.type_of("input").dtype.kind in "iu":
        # TF's Mean of integers truncates toward zero
        total = f"torch.sum({x}, dim={call.lit(dims)}, keepdim={keep})"
        count = 1
        for d in dims:
            count *= call.type_of("input").shape[d] or 0
        return f"torch.div({total}, {count}, rounding_mode='trunc').to({x}.dtype)"
    if call.block == "Sum" and call.type_of("input").dtype.kind in "iub":
        # torch sums integers in int64; TF keeps the input's dtype
        return f"torch.sum({x}, dim={call.lit(dims)}, keepdim={keep}, dtype={call.out_dtype()})"
    return f"{_REDUCE[call.block]}({x}, dim={call.lit(dims)}, keepdim={keep})"
