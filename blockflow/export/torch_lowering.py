"""How a block becomes PyTorch code: the lowering table and what a lowering is handed.

A lowering is a function of one :class:`Call` returning the expression of each output: a string
for a one-output block (or one tuple-valued expression unpacked into all outputs), or a list with
one string per output slot. It may write statements before its result with ``call.line`` (into
temporaries from ``call.temp``), put a helper function in the file with ``call.helper``, and for a
block that updates state, give each new value with ``call.update``. Everything it writes from the
block's attrs goes through ``call.lit`` (names.literal): never ``str()`` of a value.

Register with ``@lowers("Relu", ...)``; the table is filled by importing the ``torch_ops_*``
modules (:func:`lowering_table`). A block that is not in it is refused by name, never
approximated.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from blockflow.export.lowering import BlockCall, LoweringTable
from blockflow.export.names import literal

__all__ = ["Call", "lowers", "lowering_table", "Unsupported", "TORCH_DTYPES", "torch_dtype"]

#: the modules whose @lowers fill the table
_MODULES = ("torch_ops_core", "torch_ops_math", "torch_ops_reduce", "torch_ops_array", "torch_ops_nn",
            "torch_ops_conv", "torch_ops_random", "torch_ops_state")
_TABLE = LoweringTable("torch", _MODULES)

TORCH_DTYPES = {
    "float16": "torch.float16", "float32": "torch.float32", "float64": "torch.float64",
    "int8": "torch.int8", "int16": "torch.int16", "int32": "torch.int32", "int64": "torch.int64",
    "uint8": "torch.uint8", "bool": "torch.bool", "bfloat16": "torch.bfloat16",
    "complex64": "torch.complex64", "complex128": "torch.complex128",
}


def torch_dtype(dtype) -> str:
    """``torch.float32`` for a numpy dtype (or its name); Unsupported when torch has none."""
    name = np.dtype(dtype).name
    found = TORCH_DTYPES.get(name)
    if found is None:
        raise Unsupported(f"dtype {name} has no PyTorch counterpart")
    return found


class Unsupported(Exception):
    """A block (or a use of one) with no faithful PyTorch lowering; the message says why."""


def lowers(*names: str):
    """Register the decorated function as the lowering of the blocks ``names``."""
    return _TABLE.register(*names)


def lowering_table() -> dict[str, Callable]:
    """Block name -> lowering, every ``torch_ops_*`` module loaded."""
    return _TABLE.table()


@dataclass
class Call(BlockCall):
    """One block to lower (BlockCall); ``ins`` holds expressions (a static input's value: write
    it with ``lit``), ``writer`` takes statements, temporaries, helpers and updates."""

    writer: object = field(repr=False, default=None)

    def lit(self, value) -> str:
        return literal(value)

    def dtype(self, dtype) -> str:
        return torch_dtype(dtype)

    def out_dtype(self, i: int = 0) -> str:
        return torch_dtype(self.out_types[i].dtype)

    def line(self, code: str) -> None:
        """A statement written before the block's result (code made by the lowering itself)."""
        self.writer.statement(code)

    def temp(self, base: str = "t") -> str:
        return self.writer.temp(base)

    def helper(self, name: str, source: str) -> str:
        """Put the module-level function ``source`` (defining ``name``) in the file once."""
        self.writer.helper(name, source)
        return name

    def update(self, ref: str, expr: str) -> None:
        """The new value of the state behind ref input ``ref``, applied when forward ends (every
        block of a run reads the values from its start, as in blockflow)."""
        self.writer.update(self, ref, expr)

    def constant(self, value, dtype=None) -> str:
        """An expression for the array ``value`` (in ``dtype``): a literal tensor when small, else a
        buffer whose value is in the state file."""
        return self.writer.constant_value(self, np.asarray(value, dtype=dtype))

    def random(self) -> str:
        """The module's random generator (a ``torch.Generator`` seeded from the project)."""
        return self.writer.random_generator()

    def training(self) -> str:
        """An expression true while the module trains (``self.training``)."""
        return "self.training"
