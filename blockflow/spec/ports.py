"""Ports: the inputs and outputs a block declares.

Part of the block declaration API; blocks import it through :mod:`blockflow.spec`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from blockflow.spec.tensors import DTYPE_CLASSES, DTYPE_NAMES, FLOAT_DTYPES

#: Name of the implicit port every block has: it shows the page's scope and is never wired.
SCOPE_PORT = "scope"


class BlockDeclarationError(TypeError):
    """A block class is declared wrongly; raised at import time, naming the block."""


def check_dtype_constraint(owner: str, dtype: str):
    if not isinstance(dtype, str) or not (dtype in DTYPE_CLASSES or dtype in DTYPE_NAMES
                                          or (dtype.isidentifier() and dtype[0].isupper())):
        raise BlockDeclarationError(f"{owner}: dtype constraint {dtype!r} is not a dtype, a "
                                    f"dtype class ({', '.join(DTYPE_CLASSES)}) or a type variable "
                                    f"(an identifier starting with a capital, like T)")


_ACCEPTS: dict = {}


@dataclass(frozen=True)
class Input:
    """A single input port.

    ``dtype`` is a dtype name, a class (float, int, bool, number, any) or a type variable
    such as ``"T"`` shared with other inputs. A ``static`` input must be known when compiling
    (an inline constant or a wire from a Const); ``infer`` and ``forward`` get its value.
    An ``optional`` input may stay unwired and then takes ``default``.

    A ``ref`` input names state the block updates (TF's ref inputs: ApplyAdam's ``var``, ``m``,
    ``v``): it must be wired straight from a Variable, whose value the block reads and replaces.
    A ref input with a ``slot`` may instead stay unwired: its state is then kept with the block's
    first ref input's Variable (saved in the project beside its value), created as ``"like"`` (the
    Variable's shape) or ``"scalar"``, filled with ``slot_init`` (a number, or the name of another
    input whose value to start from).

    ``gradient=False`` marks a float input TensorFlow sends no gradient to although the output
    depends on it (FusedBatchNorm's population ``mean`` and ``variance``): the wire into it is
    shown cut, and the block's ``vjp`` returns None for it.
    """

    name: str
    dtype: str = "T"
    static: bool = False
    optional: bool = False
    default: Any = None
    doc: str = ""
    ref: bool = False
    slot: str | None = None
    slot_init: Any = 0.0
    gradient: bool = True
    variadic = False

    def accepts(self, dtype: np.dtype) -> bool:
        key = (self.dtype, dtype)
        hit = _ACCEPTS.get(key)
        if hit is None:
            hit = _ACCEPTS[key] = self._accepts(dtype)
        return hit

    def _accepts(self, dtype: np.dtype) -> bool:
        allowed = DTYPE_CLASSES.get(self.dtype)
        if allowed is None:
            return self.dtype not in DTYPE_NAMES or np.dtype(dtype).name == self.dtype
        return np.dtype(dtype).name in allowed

    @property
    def differentiable(self) -> bool:
        if self.static or self.ref or not self.gradient:
            return False
        allowed = DTYPE_CLASSES.get(self.dtype)
        if allowed is None:
            return self.dtype not in DTYPE_NAMES or self.dtype in FLOAT_DTYPES
        return bool(allowed & FLOAT_DTYPES)


@dataclass(frozen=True)
class InputList(Input):
    """A variadic input (enuSpace's InputList): ports ``name[0]``, ``name[1]``, ...

    ``forward`` and ``infer`` get a list; ``vjp`` returns a list for it.
    """

    min_count: int = 1
    variadic = True

    def port(self, index: int) -> str:
        return f"{self.name}[{index}]"


@dataclass(frozen=True)
class Output:
    """An output port. ``differentiable=False`` marks outputs no gradient can flow back from."""

    name: str
    doc: str = ""
    differentiable: bool = True
    variadic = False


@dataclass(frozen=True)
class OutputList(Output):
    """A variadic output: ports ``name[0]``, ``name[1]``, ...

    ``count`` names what fixes their number: an int attr (Unstack's ``num``) or an InputList
    (one output per entry, like Gradients' ``xs``). ``infer`` and ``forward`` give a list for it,
    and ``vjp`` gets lists (with None for outputs that received no gradient).
    """

    count: str = ""
    variadic = True

    def port(self, index: int) -> str:
        return f"{self.name}[{index}]"


