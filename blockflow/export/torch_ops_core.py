"""PyTorch lowerings of the core blocks: identities and cuts, Const, the elementwise arithmetic
the samples are drawn from and MatMul. Maximum, Minimum and the reductions are with their kin in
torch_ops_math.py and torch_ops_reduce.py."""
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


_BINARY = {"Add": "torch.add", "Subtract": "torch.sub", "Multiply": "torch.mul"}


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
