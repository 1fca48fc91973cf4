"""Where the run's backward can take a Gradients block's cotangents instead of computing them
again: the analysis behind lower.SHARE_GRADIENTS (lower._Writer.backward emits the products).

Must not import PySide6 or the block library.
"""
from __future__ import annotations

__all__ = ["shared_cotangents"]


def shared_cotangents(program, shares, paths, bwd, target) -> dict:
    """The slots whose cotangent in the run's backward is a Gradients block's times one number.

    A Gradients block on a scalar ``L`` (seeded with ones) has computed, during the forward,
    ``h(s) = dL/ds`` for the slots ``s`` between its xs and ``L``. When the run's gradient
    reaches ``s`` only through ``L`` (every wire out of ``s`` that carries the run's gradient
    carries the block's, and the other way round, into a step whose outputs all qualify),
    linearity gives ``g(s) = g(L) * h(s)``: one product instead of the backward through the
    same blocks again (FGSM's clean loss: the tf.gradients of the input and the training
    step's gradient share that pass, as a hand-written numpy step does). The product is the
    same number as the repeated pass where ``g(L)`` is a power of two, and otherwise differs
    only in rounding."""
    slots, steps = program.slots, program.steps
    written = _cotangents_written(paths, bwd, target)
    readers: dict[int, list] = {}
    for st in steps:
        for j in range(len(st.in_edges)):
            src = st.flat_input(j)
            if src is not None:
                readers.setdefault(src, []).append((st, j))
    out: dict = {}
    for index, y, prefix, inner, inner_written in shares:
        if y not in written or y == target or slots[y].type.shape != ():
            continue
        dtype = slots[y].type.dtype
        mine = {y}
        for st in reversed(steps[:index]):
            for o in st.outputs:
                if (o in inner_written and o in written and o != target and slots[o].type.dtype == dtype
                        and _only_through(o, index, paths, inner, readers, written, inner_written, mine)):
                    mine.add(o)
        mine.discard(y)
        if mine & out.keys():   # two Gradients blocks over the same slots: share neither
            return {}
        out.update((o, (y, prefix)) for o in mine)
    return out

def _only_through(o, index, paths, inner, readers, written, inner_written, mine) -> bool:
    """Whether the run's gradient and the Gradients block's (before step ``index``) leave
    slot ``o`` along the same wires, into steps whose cotangents are all in ``mine``."""
    for st, j in readers.get(o, ()):
        outer = bool(paths.needs.get((st.index, j)))
        if outer != (st.index < index and bool(inner.needs.get((st.index, j)))):
            return False
        if outer and not all((o2 in written) == (o2 in inner_written) and (o2 not in written or o2 in mine)
                             for o2 in st.outputs):
            return False
    return True

def _cotangents_written(paths, bwd, target) -> set:
    """The slots the run's backward gives a cotangent (as backward() will, without sharing)."""
    written = {target}
    for st in bwd:
        if any(o in written for o in st.outputs):
            for j in range(len(st.in_edges)):
                if paths.needs.get((st.index, j)):
                    written.add(st.flat_input(j))
    return written
