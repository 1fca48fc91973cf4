"""How a run plan names what went wrong: the block and phase at a step cursor of its generated
code, a failed block's error with its inputs' shapes, a refused allocation, a gradient that
PreventGradient forbids (runtime._Plan takes these methods from PlanFailures); and the checks
of a kind of run (its target, its wrt) that name what they refuse.

Must not import PySide6 or the block library.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from blockflow.budget import format_size
from blockflow.budget import memory_budget as memory_budget_of
from blockflow.errors import BlockExecutionError, FeedError, MemoryLimitError, RunError
from blockflow.spec import AllocationError, ShapeError, TensorType, allocation_guard

if TYPE_CHECKING:
    from blockflow.compile.program import Program

__all__ = ["PlanFailures", "check_target", "checked_fetch", "checked_wrt", "resolved", "slot_name"]


class PlanFailures:
    """The failure side of runtime._Plan (which holds ``program`` and ``target``)."""

    def _prevent_message(self, nodes, what) -> str:
        program = self.program
        bits = []
        for node in nodes:
            msg = program.step(node).attrs.get("message") or ""
            bits.append(f"{program.full_name(node)}" + (f" ({msg})" if msg else ""))
        return (f"{what} would have to pass through {', '.join(bits)}: PreventGradient forbids "
                f"differentiating through it")

    def _where(self, at) -> tuple[str, str]:
        """(block, phase) for a step cursor of the generated code."""
        if at is None or at == -1:
            t = self.program.slot(self.target) if self.target is not None else None
            return ("the gradient seed" + (f" of {self.program.full_name(t.node)}:{t.port}" if t else ""),
                    "backward")
        st = self.program.steps[at if at >= 0 else -2 - at]
        return f"{self.program.full_name(st.node)} ({st.spec.name})", "forward" if at >= 0 else "backward"

    def _memory_error(self, st, exc, phase, doing="") -> MemoryLimitError:
        """A block's allocation refused (spec.reserve) or failed (numpy's MemoryError), as one error."""
        name = f"{self.program.full_name(st.node)} ({st.spec.name})"
        if isinstance(exc, AllocationError):
            return MemoryLimitError(name, f"{doing + ': ' if doing else ''}{exc}", phase)
        budget = memory_budget_of(None)[0] if allocation_guard.get() is None else allocation_guard.get().budget
        return MemoryLimitError(name, f"{doing + ': ' if doing else ''}the system refused memory the block asked "
                                      f"for ({exc}); the run's memory budget ({format_size(budget)}) is more "
                                      f"than this process can get: lower it with --memory-budget SIZE or "
                                      f"BLOCKFLOW_MEMORY_BUDGET (docs/limits.md)", phase)

    def _fail(self, n, exc, local):
        program = self.program
        if isinstance(exc, RunError):
            raise exc
        if n == -1:
            if isinstance(exc, (AllocationError, MemoryError)):
                raise MemoryLimitError(self._where(-1)[0], str(exc) or "out of memory", "backward") from None
            raise RunError(f"the gradient seed does not fit the target: {exc}") from exc
        phase = "forward" if n >= 0 else "backward"
        st = program.steps[n if n >= 0 else -2 - n]
        name = program.full_name(st.node)
        if isinstance(exc, (AllocationError, MemoryError)):
            raise self._memory_error(st, exc, phase) from None
        if st.role == "placeholder":
            raise FeedError(f"feed for Placeholder {name} does not fit: {exc}") from None
        shapes = []
        for pos, decl in enumerate(st.spec.inputs):
            src = st.inputs[pos]
            srcs = src if isinstance(src, tuple) else (src,)
            for k, s in enumerate(srcs):
                port = decl.port(k) if decl.variadic else decl.name
                if st.static[pos] is not None:
                    v = st.static[pos]
                elif s is None:
                    continue
                elif program.slot(s).const:
                    v = program.slot(s).type.value
                else:
                    v = local.get(f"s{s}")
                if v is not None:
                    shapes.append(f"{port} {TensorType.of(v).describe()}")
        msg = str(exc) if isinstance(exc, ShapeError) else f"{type(exc).__name__}: {exc}"
        raise BlockExecutionError(f"{name} ({st.spec.name})", msg, ", ".join(shapes), phase) from exc


# ------------------------------------------------------------ a kind of run, checked once
def slot_name(program: Program, slot: int) -> str:
    s = program.slot(slot)
    return f"{program.full_name(s.node)}:{s.port}"


def resolved(program: Program, what: str, name) -> int:
    """``program.resolve_target(name)`` for the run's ``what`` (target, fetch), its type checked
    first: a number or another object failed inside the look-up with a TypeError that named
    neither the argument nor the value."""
    if name is not None and not isinstance(name, (str, tuple)):
        raise RunError(f"{what} must name an output as 'node', 'node:port' or (node, port), not {name!r:.80}")
    try:
        return program.resolve_target(name)
    except TypeError:        # a tuple that is not (node, port)
        raise RunError(f"{what} must name an output as 'node', 'node:port' or (node, port), not {name!r:.80}") from None


def checked_fetch(program: Program, fetch) -> tuple:
    """The slots of ``fetch``, a collection of names: a string would be taken a character at a
    time, fetching whichever one-letter nodes the page has."""
    if isinstance(fetch, str):
        raise RunError(f"fetch must be a collection of names ('node' or 'node:port'), not the string {fetch!r:.80}")
    return tuple(resolved(program, "each fetch", f) for f in (fetch or ()))


def check_target(program: Program, t_slot, grad_seed) -> None:
    """The slot to differentiate must be a float, and a scalar unless a gradient seed gives the
    cotangent; a seed needs a target."""
    if t_slot is None:
        if grad_seed is not None:
            raise RunError("a gradient seed was given but no gradient target")
        return
    ttype = program.slot(t_slot).type
    if not ttype.is_float:
        raise RunError(f"the gradient target {slot_name(program, t_slot)} is {ttype}; only float "
                       f"values can be differentiated")
    if grad_seed is None and ttype.size != 1:
        raise RunError(f"the gradient target {slot_name(program, t_slot)} is {ttype}, not a scalar: "
                       f"give a gradient seed of its shape or pick a scalar target")


def checked_wrt(program: Program, wrt):
    """``wrt`` as a frozenset of node ids on the page (None stays None)."""
    if wrt is None:
        return wrt
    if isinstance(wrt, str):
        raise RunError(f"wrt must be a collection of node ids, not the string {wrt!r}")
    wrt = frozenset(wrt)  # a frozenset is checked too: _plan_for checks a kind of run once
    unknown = sorted(n for n in wrt if program.step(n) is None)
    if unknown:
        raise RunError(f"wrt names nodes that are not on page '{program.page_name}': {', '.join(unknown)}")
    return wrt
