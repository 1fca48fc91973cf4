"""The Variable values of a compiled page, drawn from their initializers only when first read.

Compiling a page never makes a Variable's first value: checking or editing a diagram with a
[30000, 30000] random Variable allocates nothing and draws nothing. The value is made when
something needs it — a run (under its memory budget), training, a gradient check — exactly as
the initializer would have made it at compile time (it is seeded by the block's attrs alone), and
kept from then on.

Imports nothing of blockflow but errors and spec.
"""
from __future__ import annotations

from collections.abc import MutableMapping

import numpy as np

from blockflow.errors import RunError
from blockflow.spec import BlockSpec, TensorType

__all__ = ["VariableValues"]


class _Pending:
    """How to make one Variable's first value: its block's ``initial(**attrs)``."""

    __slots__ = ("spec", "attrs", "type", "name")

    def __init__(self, spec: BlockSpec, attrs: dict, ttype: TensorType, name: str):
        self.spec, self.attrs, self.type, self.name = spec, attrs, ttype, name

    def draw(self, **overrides) -> np.ndarray:
        value = self.spec.initial(**{**self.attrs, **overrides})
        arr = np.asarray(value)
        if arr.shape != self.type.shape or arr.dtype != self.type.dtype:
            raise RunError(f"{self.name} ({self.spec.name}): its initializer made "
                           f"{TensorType.of(arr).describe()}, but the Variable is declared {self.type}")
        return arr


class VariableValues(MutableMapping):
    """Variable values by node id; a Variable without a stored value is *pending* until read.

    Reading one (``values[node]``, ``get``) makes and keeps it; iterating, ``in`` and ``len``
    do not. :meth:`initial` makes a fresh first value without keeping it (training with a seed)."""

    def __init__(self):
        self._values: dict[str, np.ndarray] = {}
        self._pending: dict[str, _Pending] = {}
        self._order: dict[str, None] = {}
        #: changes with every value stored, drawn or removed: a run keeps the list of values it
        #: was given while it is the same (runtime._Plan.variable_inputs)
        self.version = 0

    def add_pending(self, node: str, spec: BlockSpec, attrs: dict, ttype: TensorType, name: str) -> None:
        self.version += 1
        self._values.pop(node, None)
        self._pending[node] = _Pending(spec, attrs, ttype, name)
        self._order[node] = None

    def is_pending(self, node: str) -> bool:
        return node in self._pending

    def initial(self, node: str, **overrides) -> np.ndarray:
        """A first value of ``node`` from its initializer (attrs replaced by ``overrides``), not
        kept; KeyError for a Variable whose value is stored rather than drawn."""
        pending = self._pending.get(node)
        if pending is None:
            raise KeyError(f"{node} has a stored value or is not a Variable of this page")
        return pending.draw(**overrides)

    def many(self, nodes) -> list:
        """The values of ``nodes`` in order (the runtime's one look-up per run); KeyError when one
        is still pending, so that the caller can draw it under its run's memory guard."""
        values = self._values
        return [values[n] for n in nodes]

    def __getitem__(self, node: str) -> np.ndarray:
        value = self._values.get(node)
        if value is not None:
            return value
        pending = self._pending.get(node)
        if pending is None:
            raise KeyError(node)
        value = pending.draw()
        if value.flags.writeable:   # shared with every run's results: nothing may write through it
            value = value.view()
            value.flags.writeable = False
        # Two threads' first runs may both draw it: the first stored is the one every run reads
        # (dict.setdefault and pop are single steps under the GIL).
        value = self._values.setdefault(node, value)
        self._pending.pop(node, None)
        self.version += 1
        return value

    def __setitem__(self, node: str, value) -> None:
        self.version += 1
        self._values[node] = value
        self._pending.pop(node, None)
        self._order[node] = None

    def __delitem__(self, node: str) -> None:
        if node not in self._order:
            raise KeyError(node)
        self.version += 1
        self._values.pop(node, None)
        self._pending.pop(node, None)
        del self._order[node]

    def __contains__(self, node) -> bool:
        return node in self._order

    def __iter__(self):
        return iter(list(self._order))

    def __len__(self) -> int:
        return len(self._order)

    def __repr__(self):
        return (f"<VariableValues: {len(self._values)} made, {len(self._pending)} pending "
                f"({', '.join(self._pending) or 'none'})>")
