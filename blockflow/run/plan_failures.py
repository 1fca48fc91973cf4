"""How a run plan names what went wrong: the block and phase at a step cursor of its generated
code, a failed block's error with its inputs' shapes, a refused allocation, a gradient that
PreventGradient forbids (runtime._Plan takes these methods from PlanFailures).

Must not import PySide6 or the block library.
"""
from __future__ import annotations

from blockflow.budget import format_size
from blockflow.budget import memory_budget as memory_budget_of
from blockflow.errors import BlockExecutionError, FeedError, MemoryLimitError, RunError
from blockflow.spec import AllocationError, ShapeError, TensorType, allocation_guard

__all__ = ["PlanFailures"]


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
