"""Plans made for one feed-shape signature of a page whose Placeholders leave sizes open.

Writing a result into an input's array, a gradient into its cotangent's, keeping buffers from
run to run and the repeated run's short way all need a value's shape known when the plan is
written (run/overwrite.py, runtime._rerun). A Placeholder of shape ``[-1, 784]`` (an open batch)
leaves its whole graph open, and its runs took the general way: the benchmark's MLP 3.5-4 %
slower, with the same bits. A plan that records nothing is therefore written again for each
signature of feed shapes it is run with (a few: ``MAX_SHAPED``), from the types those shapes
make concrete (memplan.concrete_types, as the memory walk infers them). Sizes a value-dependent
block decides (a dataset's batch) stay open in it.

The plan only sees a :class:`ShapedProgram`: the Program with those types. Everything else (the
result's program, messages, the Variables) is the Program's own.

Imports nothing of blockflow but compile/program.py, run/memplan.py and spec.
"""
from __future__ import annotations

import numpy as np

from blockflow.compile.program import make_slot
from blockflow.run.memplan import concrete_types
from blockflow.spec import TensorType

__all__ = ["ShapedProgram", "MAX_SHAPED", "fits", "shaped_types"]

#: the most feed-shape signatures a plan is written again for; further ones take the open plan
#: (each keeps its own buffers)
MAX_SHAPED = 4


class ShapedProgram:
    """``program`` as a plan for one feed-shape signature sees it: its slots with ``types``."""

    def __init__(self, program, types: list):
        self._program = program
        self.slots = [s if s.type is t else make_slot(s.index, s.node, s.port, t, s.const, s.state)
                      for s, t in zip(program.slots, types)]

    def slot(self, index: int):
        return self.slots[index]

    def __getattr__(self, name):
        return getattr(self._program, name)


def fits(declared, dtypes, feed_list) -> bool:
    """Whether each feed is an array of its Placeholder's dtype whose shape its Placeholder's
    (``declared``, None for an open size) allows: what the Placeholder's forward passes as it
    is. A feed that does not fit takes the open plan, which reports it where a run always has."""
    for shape, dtype, value in zip(declared, dtypes, feed_list):
        if type(value) is not np.ndarray or value.dtype != dtype or value.ndim != len(shape):
            return False
        if any(d is not None and d != n for d, n in zip(shape, value.shape)):
            return False
    return True


def shaped_types(program, feed_slots, feed_list) -> list:
    """Every slot's type for feeds of these shapes (the blocks downstream inferred again)."""
    given = {s: TensorType(value.shape, program.slot(s).type.dtype) for s, value in zip(feed_slots, feed_list)}
    return concrete_types(program, given)
