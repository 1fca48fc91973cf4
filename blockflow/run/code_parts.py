"""Small pieces of the code lower.py generates: call arguments shaped as a block declares its
inputs and outputs, the ``del`` lines after each local's last use, and what state updates hold.

Must not import PySide6 or the block library.
"""
from __future__ import annotations

import math

from blockflow.compile.program import Step
from blockflow.run.memplan import Line
from blockflow.run.memplan import parts as memparts
from blockflow.spec import TensorType

__all__ = ["checked_seed", "needs_by_input", "nbytes", "parts_of_updates", "seed_fits", "struct_expr", "with_frees"]


def needs_by_input(st: Step, needs_flat) -> tuple:
    """Per declared input, whether it needs a cotangent (a tuple of them for an InputList)."""
    needs = []
    j = 0
    for src in st.inputs:
        if isinstance(src, tuple):
            needs.append(tuple(needs_flat[j:j + len(src)]))
            j += len(src)
        elif src is None:
            needs.append(False)
        else:
            needs.append(needs_flat[j])
            j += 1
    return tuple(needs)


def struct_expr(st: Step, prefix: str, present, assign: bool = False) -> str:
    """Code for a step's outputs shaped as the block returns them: an OutputList is a list."""
    parts = []
    for entry in st.out_struct:
        if isinstance(entry, tuple):
            items = [f"{prefix}{o}" if present(o) else "None" for o in entry]
            parts.append(("(" if assign else "[") + ", ".join(items) + ("," if len(items) == 1 else "")
                         + (")" if assign else "]"))
        else:
            parts.append(f"{prefix}{entry}" if present(entry) else "None")
    if len(parts) == 1:
        return parts[0]
    return "(" + ", ".join(parts) + ")"


def with_frees(lines, returned):
    """Insert ``del`` statements after the last use of every local that is not returned."""
    last: dict[str, int] = {}
    for i, line in enumerate(lines):
        reads, writes = line.reads, line.writes
        for name in writes:
            last[name] = max(last.get(name, i), i)
        for name in reads:
            last[name] = i
    frees: dict[int, list[str]] = {}
    for name, i in last.items():
        if name not in returned:
            frees.setdefault(i, []).append(name)
    out = []
    for i, line in enumerate(lines):
        out.append(line)
        if i in frees:
            names = tuple(sorted(frees[i]))
            out.append(Line("del " + ", ".join(names), set(), set(), frees=names))
    return out


def nbytes(t: TensorType) -> int:
    """Bytes of a tensor of type ``t`` (0 while a size is unknown)."""
    shape = t.shape
    return 0 if None in shape else math.prod(shape) * t.dtype.itemsize


def parts_of_updates(st: Step, slots) -> tuple:
    """What a state-updating block's updates hold: a new value per ref input (the Variable's, its
    slots'), counted as new arrays even where a block returns its output again."""
    items = []
    for pos, decl in enumerate(st.spec.inputs):
        if decl.ref and st.inputs[pos] is not None:
            items.append((decl.name, st.inputs[pos], f"the new value of '{decl.name}'"))
    return memparts(items)


def checked_seed(slots, seed_slot: int, seed: str, reads: set, y: int, i: int) -> tuple:
    """(the expression of a Gradients block's ``grad_ys[i]`` seed, slot ``seed_slot`` read as
    ``seed``, for ``ys[i]``, slot ``y``; the names it reads): the seed itself where both types
    fix the same shape or the seed is a constant (checked when the page compiles), else the
    seed checked against the value of ``ys[i]`` at run time (``seed_fits``): an open-sized
    grad_ys of another shape flowed into the vjps and gave gradients of the wrong shape."""
    shape = slots[y].type.shape
    if not reads or (None not in shape and slots[seed_slot].type.shape == shape):
        return seed, reads
    return f"_seed_fits({seed}, s{y}, {i})", reads | {f"s{y}"}


def seed_fits(seed, y, i: int):
    """``seed``, after checking it has the shape of ``y`` (a Gradients block's ``grad_ys[i]`` and
    ``ys[i]`` at run time)."""
    if getattr(seed, "shape", ()) != getattr(y, "shape", ()):
        raise ValueError(f"grad_ys[{i}] has shape {list(getattr(seed, 'shape', ()))} but ys[{i}] has "
                         f"{list(getattr(y, 'shape', ()))}; a seed must have its y's shape")
    return seed
