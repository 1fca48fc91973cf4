"""How a block becomes ONNX nodes: the lowering table and what a lowering is handed.

A lowering is a function of one :class:`OnnxCall` returning the value name of each output: a
string for a one-output block, or a list with one name per output slot. It adds nodes with
``call.op("MatMul", a, b)`` (which returns the new value's name), constants with
``call.const(array)`` (an initializer), and reads static inputs as their values. Every name
it makes comes from the builder (names.py identifiers); nothing from the project reaches the
model but as such a name or as the value of a tensor or an attribute.

Register with ``@onnx_lowers("Relu", ...)``; the table is filled by importing the
``onnx_ops_*`` modules (:func:`onnx_lowering_table`). A block that is not in it, or a use that a
lowering refuses with :class:`Unsupported`, is refused by name, never approximated.

This table is separate from the PyTorch one (torch_lowering.py): the same compiled Program is
walked, but ONNX is an inference format, so the lowerings compute the forward pass only (in the
inference phase: LearningPhase is false, Dropout passes through).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from blockflow.export.lowering import BlockCall, LoweringTable
from blockflow.export.torch_lowering import Unsupported

__all__ = ["OnnxCall", "onnx_lowers", "onnx_lowering_table", "Unsupported", "onnx_dtype", "ONNX_DTYPES"]

#: the modules whose @onnx_lowers fill the table
_MODULES = ("onnx_ops_core", "onnx_ops_nn", "onnx_ops_array")
_TABLE = LoweringTable("ONNX", _MODULES)

#: numpy dtype name -> onnx.TensorProto's data type number (the enum's values, fixed by the spec)
ONNX_DTYPES = {"float32": 1, "uint8": 2, "int8": 3, "uint16": 4, "int16": 5, "int32": 6, "int64": 7,
               "bool": 9, "float16": 10, "float64": 11, "uint32": 12, "uint64": 13,
               "complex64": 14, "complex128": 15}


def onnx_dtype(dtype) -> int:
    """ONNX's data type number for a numpy dtype; Unsupported when ONNX has none."""
    name = np.dtype(dtype).name
    found = ONNX_DTYPES.get(name)
    if found is None:
        raise Unsupported(f"dtype {name} has no ONNX counterpart")
    return found


def onnx_lowers(*names: str):
    """Register the decorated function as the ONNX lowering of the blocks ``names``."""
    return _TABLE.register(*names)


def onnx_lowering_table() -> dict[str, Callable]:
    """Block name -> ONNX lowering, every ``onnx_ops_*`` module loaded."""
    return _TABLE.table()


@dataclass
class OnnxCall(BlockCall):
    """One block to lower (BlockCall); ``ins`` holds value names, ``builder`` makes the nodes."""

    #: the graph builder: nodes, initializers, names
    builder: object = field(repr=False, default=None)

    @property
    def opset(self) -> int:
        return self.builder.opset

    def op(self, op_type: str, *inputs, outputs: int = 1, hint: str = "", **attrs):
        """Add one node; its output value name (a list of ``outputs`` names when more than one).
        An input of None is an omitted optional input (an empty name)."""
        return self.builder.node(self, op_type, list(inputs), outputs, hint, attrs)

    def const(self, value, dtype=None, hint: str = "const") -> str:
        """An initializer holding ``value`` (in ``dtype``): its value name."""
        return self.builder.constant(np.asarray(value, dtype=dtype), f"{self.builder.value_hint(self)}_{hint}")

    def scalar(self, value, like: str) -> str:
        """A 0-d constant ``value`` in the dtype of input ``like`` (a declared input's name)."""
        return self.const(np.asarray(value, dtype=self.type_of(like).dtype))

    def ints(self, values) -> str:
        """A 1-d int64 constant (axes, shapes, pads for the ops that take them as inputs)."""
        return self.const(np.asarray(list(values), dtype=np.int64).reshape(-1), hint="i")

    def out_dtype(self, i: int = 0) -> np.dtype:
        return self.out_types[i].dtype

    def cast(self, value: str, dtype) -> str:
        return self.op("Cast", value, to=onnx_dtype(dtype))

    def index(self, value: str) -> str:
        """Indices as int64, a negative one made out of range: blockflow (as TF's CPU kernels)
        refuses a negative index, ONNX's gathers would count it from the end; out of range,
        ONNX Runtime refuses it too."""
        i = self.cast(value, np.int64)
        zero = self.const(np.asarray(0, np.int64), hint="zero")
        far = self.const(np.asarray(np.iinfo(np.int64).max, np.int64), hint="out_of_range")
        return self.op("Where", self.op("Less", i, zero), far, i)
