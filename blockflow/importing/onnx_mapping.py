"""How an ONNX node becomes blocks: the mapping table and the :class:`Call` a mapping is handed.

A mapping is a function of one Call returning the value of each of the node's outputs (a list,
or one value for a one-output node): it adds blocks with ``call.block("Conv2D", attrs, input=x,
filter=w)`` and reads what it needs to know statically (an attribute, a known input, an input's
shape) through the call. A use it cannot map exactly raises :class:`Unsupported` with the reason:
the import lists every such node and makes nothing — it never approximates.

Register with ``@maps("Relu", ...)``; the table is filled by importing the ``onnx_map_*``
modules (:func:`mapping_table`). ``since`` and ``doc`` feed docs/import.md.
"""
from __future__ import annotations

import importlib
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from blockflow.importing.onnx_build import Known, PageBuilder, Refused, Unsupported, Wire, check_tensor, node_id_from
from blockflow.importing.onnx_read import OnnxNode

__all__ = ["Call", "Mapping", "maps", "mapping_table", "Unsupported"]

_MODULES = ("onnx_map_nn", "onnx_map_math", "onnx_map_array", "onnx_map_norm", "onnx_map_elementwise",
            "onnx_map_index", "onnx_map_loss", "onnx_map_resize", "onnx_map_convt")


@dataclass(frozen=True)
class Mapping:
    op: str
    fn: Callable
    blocks: str         # the blocks it makes, for the docs
    notes: str          # what is refused or how it is done, for the docs


_TABLE: dict[str, Mapping] = {}
_LOADED = False


def maps(*ops: str, blocks="", notes: str = ""):
    """Register the decorated function as the mapping of the ONNX ops ``ops``; ``blocks`` (what
    it makes, for the docs) is one text, or {op: text} when each op makes its own."""
    def register(fn):
        for op in ops:
            if op in _TABLE:
                raise RuntimeError(f"ONNX op {op} is mapped twice")
            _TABLE[op] = Mapping(op, fn, blocks.get(op, "") if isinstance(blocks, dict) else blocks, notes)
        return fn
    return register


def mapping_table() -> dict[str, Mapping]:
    """ONNX op -> its Mapping, every ``onnx_map_*`` module loaded."""
    global _LOADED
    if not _LOADED:
        for name in _MODULES:
            importlib.import_module(f"blockflow.importing.{name}")
        _LOADED = True
    return _TABLE


class Call:
    """One ONNX node to map: its inputs as values, its attributes, and the builder."""

    def __init__(self, node: OnnxNode, values: list, builder: PageBuilder, types: dict, opset: int,
                 read: frozenset = frozenset(), name: str = ""):
        """``read``: the value names some node or the graph's outputs read; ``name``: the node's
        readable name (onnx_names.py), which its blocks' ids are made from."""
        self.node, self.values, self.builder, self.types, self.opset = node, values, builder, types, opset
        self.read = read
        self.base = node_id_from(name or node.name or next((o for o in node.outputs if o), node.op))
        self._made = 0

    # ------------------------------------------------------------------ what the node gives

    def attr(self, name: str, default=None):
        return self.node.attrs.get(name, default)

    def has(self, i: int) -> bool:
        """Whether optional input ``i`` is given."""
        return i < len(self.values) and self.values[i] is not None

    def input(self, i: int):
        if not self.has(i):
            raise Unsupported(f"input {i} is missing")
        return self.values[i]

    def known(self, i: int) -> np.ndarray | None:
        """Input ``i``'s value when it is known while importing (None when it is computed)."""
        v = self.values[i] if self.has(i) else None
        return v.value if isinstance(v, Known) else None

    def need_known(self, i: int, what: str) -> np.ndarray:
        value = self.known(i)
        if value is None:
            raise Unsupported(f"{what} (input {i}) must be a constant; here the model computes it")
        return value

    def ints(self, i: int, what: str) -> list:
        a = self.need_known(i, what)
        if a.dtype.kind not in "iu":
            raise Unsupported(f"{what} must be integers, got {a.dtype.name}")
        return [int(v) for v in a.reshape(-1)]

    def axis(self, axis: int, rank: int, what: str) -> int:
        """``axis`` of a rank-``rank`` value counted from 0 (-1 the last); Refused when it is out
        of range, which ONNX's definitions do not allow (taking it modulo the rank would import
        a model ONNX rejects as one computing something else)."""
        if not -rank <= int(axis) < rank:
            raise Refused(f"{what} {axis} is out of range for a value of rank {rank}")
        return int(axis) % rank

    def axes(self, axes, rank: int, what: str) -> list:
        """Each of ``axes`` counted from 0, as :meth:`axis`; Refused when one is named twice."""
        axes = [int(a) for a in axes]
        bad = [a for a in axes if not -rank <= a < rank]
        if bad:
            raise Refused(f"{what} {axes}: axis {bad[0]} is out of range for a value of rank {rank}")
        out = [a % rank for a in axes]
        if len(set(out)) != len(out):
            raise Refused(f"{what} {axes} name an axis twice")
        return out

    def dtype(self, i: int) -> np.dtype | None:
        v = self.input(i)
        if isinstance(v, Known):
            return v.dtype
        if v.dtype is not None:
            return v.dtype
        return None

    def shape(self, i: int) -> tuple | None:
        """Input ``i``'s shape as far as it is known (None: unknown rank)."""
        v = self.input(i)
        return v.shape

    def rank(self, i: int) -> int:
        s = self.shape(i)
        if s is None:
            raise Unsupported(f"the rank of input {i} is not known (shape inference could not type it)")
        return len(s)

    def static_shape(self, i: int, why: str) -> tuple:
        s = self.shape(i)
        if s is None or any(not isinstance(d, int) for d in s):
            shown = "unknown" if s is None else "[" + ", ".join(str(d) for d in s) + "]"
            raise Unsupported(f"{why} needs input {i}'s static shape, which is {shown}")
        return s

    def out_type(self, k: int = 0) -> tuple:
        """Output ``k``'s (dtype, shape) from the model's shape inference ((None, None): unknown)."""
        name = self.node.outputs[k] if k < len(self.node.outputs) else ""
        info = self.types.get(name)
        return (info.dtype, info.shape) if info is not None else (None, None)

    def output_used(self, k: int) -> bool:
        """Whether output ``k`` is named and read (a named output nothing reads is not used)."""
        return k < len(self.node.outputs) and bool(self.node.outputs[k]) and self.node.outputs[k] in self.read

    # ------------------------------------------------------------------ what it makes

    def block(self, block: str, attrs: dict | None = None, *, out: str | None = None, hint: str = "",
              typed: int | None = None, **inputs) -> Wire:
        """Add ``block`` fed by ``inputs``; its output port ``out`` (default: the first) as a Wire,
        typed like the node's output ``typed`` when given (the last block of a mapping)."""
        spec = self.builder.registry.get(block)
        if spec is None:   # a registry without it (an old block package): say so, do not crash
            raise Unsupported(f"it needs the block {block}, which this blockflow's blocks do not have")
        self._made += 1
        base = self.base if not hint else f"{self.base}_{hint}"
        nid = self.builder.add(block, inputs, dict(attrs or {}), base, self.node.index)
        port = out or spec.outputs[0].name
        dtype, shape = self.out_type(typed) if typed is not None else (None, None)
        return Wire(nid, port, dtype, shape)

    def making(self, shape, dtype, what: str) -> None:
        """Before a mapping makes an array as large as an input or an output (a constant grid of
        coordinates, a mask, a rescaling): Refused when it would be past the limits of one tensor
        or what the memory budget leaves, else counted. A small file declares the sizes; the
        arrays must not follow them past the limits."""
        dtype = np.dtype(dtype)
        check_tensor(dtype, shape, what)
        self.builder.hold(math.prod(shape) * dtype.itemsize, what)

    def const(self, value, dtype=None) -> Known:
        """A known constant (never a Variable): an inline value where a block reads it."""
        return Known(np.asarray(value, dtype=dtype))

    def transposed(self, value, perm, hint: str = "t"):
        """``value`` with its axes permuted: a known array is permuted now (a weight stays one
        Variable, in blockflow's layout), a computed one through a Transpose block."""
        if isinstance(value, Known):
            key = (id(value), "transpose", tuple(perm))
            made = self.builder.derived.get(key)
            if made is None:    # a weight read by several nodes stays one Variable
                made = Known(np.transpose(value.value, perm).copy(order="C"), value.name, value.param)
                self.builder.derived[key] = made
            return made
        return self.block("Transpose", x=value, perm=self.const(list(perm), np.int32), hint=hint)
