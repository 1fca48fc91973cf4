"""The page an import builds: ONNX values as blockflow wires or known arrays, blocks added with
ids from the model's names, known parameters made Variables.

A value of the ONNX graph is, while importing, either a :class:`Known` array (an initializer, or
what constant folding made of one) or a :class:`Wire` (a block's output port). A mapping hands
blocks its inputs as values; the builder wires a Wire, puts a known array on a static input
(a shape, an axis) as the node's inline value, and makes a Variable of a known float parameter
(an initializer or a folded weight with at least one axis), one Variable per ONNX value however
many blocks read it, so a shared weight stays shared.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from blockflow.budget import format_size, memory_budget
from blockflow.io import rules
from blockflow.project import Page
from blockflow.registry import Registry
from blockflow.spec.memory import MAX_TENSOR_BYTES

__all__ = ["Known", "Wire", "PageBuilder", "Unsupported", "Refused", "node_id_from", "check_tensor"]


class Unsupported(Exception):
    """This use of an op has no faithful mapping: the reason (the import lists every one)."""


class Refused(Exception):
    """This node breaks its op's definition or asks for more than an import may make (a size past
    the limits): the reason. The import stops at once, naming the node."""


def check_tensor(dtype, shape, what: str) -> None:
    """Refused when a tensor of ``dtype`` (None: unknown, counted as a byte an entry) and the
    known sizes ``shape`` would be past the limits of one tensor (MAX_TENSOR_BYTES, and
    rules.MAX_ARRAY_ELEMENTS entries); ``what`` names it ("its output 'y'")."""
    elements = math.prod(shape)
    nbytes = elements * (dtype.itemsize if dtype is not None else 1)
    kind = f"{dtype.name if dtype is not None else ''}{list(shape)}"
    if nbytes > MAX_TENSOR_BYTES:
        size = format_size(nbytes) if nbytes < 1024 ** 6 else f"about 10^{len(str(nbytes)) - 1} bytes"
        raise Refused(f"{what} would be {kind} ({size}); the limit for one tensor is {format_size(MAX_TENSOR_BYTES)}")
    if elements > rules.MAX_ARRAY_ELEMENTS:
        raise Refused(f"{what} would be {kind} ({elements:,} entries); the limit for one tensor is "
                      f"{rules.MAX_ARRAY_ELEMENTS:,} entries")


@dataclass(frozen=True, eq=False)
class Known:
    """An array known while importing. ``name`` is the ONNX value it is; ``param``: it comes from
    the model's parameters (an initializer, a weight the model computes from constants), so a
    float one with at least one axis becomes a trainable Variable where a block reads it."""

    value: np.ndarray
    name: str = ""
    param: bool = False
    #: (the weight it was folded from, the layout op, its perm) when it is a weight the model
    #: also reads elsewhere: its Variable is then that weight's, through the op as a block
    tied: tuple | None = None

    @property
    def dtype(self) -> np.dtype:
        return self.value.dtype

    @property
    def shape(self) -> tuple:
        return self.value.shape


@dataclass(frozen=True)
class Wire:
    """A block's output; ``dtype``/``shape`` as far as the import knows them (None: unknown;
    a size may be a symbolic name or None)."""

    node: str
    port: str
    dtype: np.dtype | None = None
    shape: tuple | None = None

    def typed(self, dtype, shape) -> "Wire":
        return Wire(self.node, self.port, dtype, shape)


_NOT_ID = re.compile(r"[^A-Za-z0-9_.\-]+")


def node_id_from(name: str, strip: str = "") -> str:
    """A node id (letters, digits, ``_ . -``) made from an ONNX name: ``strip`` (a prefix every
    name shares, like ``gpu_0/``) dropped, ``/`` made ``.``, anything else not allowed made ``_``."""
    if strip and name.startswith(strip):
        name = name[len(strip):]
    text = _NOT_ID.sub("_", name.replace("/", ".")).strip("._-")[:80]
    if not text or not (text[0].isalpha() or text[0] == "_"):
        text = "v_" + text
    return text


#: longest label kept (an ONNX name can be any length)
MAX_LABEL = 120


def _label(text: str) -> str:
    """A label from a model's text: unprintable characters (escapes, newlines, direction marks)
    shown as ``?``, cut to MAX_LABEL."""
    text = "".join(ch if ch.isprintable() else "?" for ch in text)
    return text if len(text) <= MAX_LABEL else text[:MAX_LABEL - 3] + "..."


class PageBuilder:
    """Adds blocks and wires to ``page``; ``origin`` maps each node id to the index of the ONNX
    node it was made for (None: a graph input, an output marker, a Variable read by several)."""

    def __init__(self, page: Page, registry: Registry, strip: str = ""):
        self.page, self.registry, self.strip = page, registry, strip
        self.origin: dict[str, int | None] = {}
        self.variables: dict[int, str] = {}     # id(Known) -> its Variable's node id
        #: (id(Known), how, args) -> the Known made from it (a weight transposed once, not per reader)
        self.derived: dict[tuple, Known] = {}
        #: other source blocks placed by their one reader, as Variables are (a loss's labels)
        self.attached: list[str] = []
        self._taken: dict[str, int] = {}
        #: bytes of known arrays the import holds (the model's, the folds', the large constants
        #: mappings make), and the memory budget they must fit together
        self.held = 0
        self.budget, self.budget_from = memory_budget()

    def hold(self, nbytes: int, what: str) -> None:
        """Count ``nbytes`` more, before they are made; Refused when they would not fit the budget."""
        if self.held + nbytes > self.budget:
            raise Refused(f"{what} would take {format_size(nbytes)}, more than the memory budget leaves "
                          f"({format_size(max(self.budget - self.held, 0))} of {format_size(self.budget)}, "
                          f"{self.budget_from}; docs/limits.md)")
        self.held += nbytes

    def unique_id(self, base: str) -> str:
        n = self._taken.get(base, 0)
        nid = base if n == 0 and base not in self.page.nodes else None
        while nid is None or nid in self.page.nodes:
            n += 1
            nid = f"{base}_{n}"
        self._taken[base] = n
        return nid

    def add(self, block: str, inputs: dict, attrs: dict, base: str, origin, label: str = "") -> str:
        """Add a ``block`` node (id from ``base``) fed by ``inputs`` ({port: value or list of
        values for a variadic port}); its id."""
        spec = self.registry[block]
        static = {p.name for p in spec.inputs if p.static}
        inline, wires = {}, []
        for port, value in inputs.items():
            values = value if isinstance(value, list) else [value]
            for i, v in enumerate(values):
                name = f"{port}[{i}]" if isinstance(value, list) else port
                if v is None:
                    continue
                if isinstance(v, Wire):
                    if port in static:
                        raise Unsupported(f"{block}'s '{port}' must be known when importing (a constant), "
                                          f"and here it is computed by the model")
                    wires.append((v, name))
                elif port not in static and v.param and v.dtype.kind == "f" and v.value.ndim >= 1:
                    wires.append((self.variable(v, origin), name))
                else:
                    inline[name] = v.value
        nid = self.unique_id(base)    # after the Variables it reads, which take ids too
        self.page.add_node(block, id=nid, attrs=attrs, inputs=inline, label=_label(label))
        self.origin[nid] = origin
        for w, port in wires:
            self.page.connect(w.node, w.port, nid, port)
        return nid

    def variable(self, known: Known, origin) -> Wire:
        """The Variable holding ``known`` (made on first use); a tied one's is its weight's,
        through a Transpose or Reshape block made once."""
        if known.tied is not None:
            return self._tied(known, origin)
        nid = self.variables.get(id(known))
        if nid is None:
            nid = self.unique_id(node_id_from(known.name or "weight", self.strip))
            value = known.value if known.value.flags.c_contiguous else known.value.copy(order="C")
            self.page.add_node("Variable", id=nid, attrs={
                "shape": list(value.shape), "dtype": value.dtype.name, "initializer": "value",
                "initial_value": value, "trainable": True})
            self.origin[nid] = origin
            self.variables[id(known)] = nid
        elif self.origin.get(nid) != origin:
            self.origin[nid] = None   # read by blocks of several ONNX nodes: placed by the layout
        return Wire(nid, "ref", known.dtype, known.shape)

    def _tied(self, known: Known, origin) -> Wire:
        made = self.derived.get((id(known), "tied"))
        if made is None:
            source, op, perm = known.tied
            w = self.variable(source, origin)
            base = node_id_from((known.name or "weight") + "_tied", self.strip)
            if op == "Identity":
                made = w
            elif op == "Transpose":
                nid = self.add("Transpose", {"x": w, "perm": Known(np.asarray(perm or range(source.value.ndim)[::-1], np.int32))},
                               {}, base, origin)
                made = Wire(nid, "y", known.dtype, known.shape)
            else:   # the others keep the entries' order: a Reshape to the folded shape
                nid = self.add("Reshape", {"tensor": w, "shape": Known(np.asarray(known.shape, np.int64))}, {}, base, origin)
                made = Wire(nid, "output", known.dtype, known.shape)
            self.derived[(id(known), "tied")] = made
        return made
