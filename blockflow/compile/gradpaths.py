"""Gradient reachability over a compiled Program: which wires carry gradient from a target back
to the nodes wanted, which are cut and by what, in words.

It reads a Program (compile/program.py) without importing it: Program.gradient_paths() builds
these, so the import goes one way only (program -> gradpaths) and the two modules form no cycle.
"""
from __future__ import annotations

from blockflow.project import Edge
from blockflow.spec import BlockSpec

__all__ = ["GradientPaths", "cut_reason"]


class GradientPaths:
    """Gradient reachability for one target (computed from the schedule, in one reverse sweep).

    - ``flows``: edges along which gradient of the target flows to a wanted node;
    - ``cut``: edges that would carry gradient but for the blocks named (StopGradient, a
      non-differentiable block, an integer wire), as ``{edge: (node, ...)}``;
    - ``unreached``: edges that do not lead to the target at all;
    - ``slots``: slots whose gradient is computed; ``sources``: Variables and Placeholders that
      receive gradient; ``cut_sources``: those that would, but for the cutters named.
    """

    def __init__(self, program, target, wrt, wrt_slots=None, upto: int | None = None):
        """``program``: a compile.program.Program; ``target``: a slot, or a tuple of slots (the ys
        of a Gradients block); ``wrt``: node ids (None: every node, unless ``wrt_slots`` names the
        slots wanted); ``upto``: only the steps before this step index take part (a Gradients
        block differentiates what precedes it)."""
        self.program = program
        targets = target if isinstance(target, tuple) else (target,)
        self.target = targets[0]
        self.targets = targets
        self.wrt = wrt
        steps = program.steps if upto is None else program.steps[:upto]
        sweep = _BackwardSweep(program.slots, targets)
        for step in reversed(steps):
            sweep.visit(step)
        live = _live_slots(steps, len(program.slots), sweep.passes, wrt, wrt_slots)
        self.live = live
        self.strict = sweep.strict
        self._summarize(program, sweep, live)

    def _summarize(self, program, sweep: "_BackwardSweep", live: bytearray) -> None:
        """The answers, from the backward sweep's marks and the forward sweep's live slots."""
        slots, strict, cutters = program.slots, sweep.strict, sweep.cutters
        #: PreventGradient blocks the gradient would have to pass through (an error to run)
        self.prevented = tuple(
            st.node for st in sweep.prevent_hits
            if any(live[st.flat_input(j)] and slots[st.flat_input(j)].type.is_float
                   for j in range(len(st.in_edges)) if st.flat_input(j) is not None))
        #: (step index, flat input index) -> True when a cotangent must be computed for it
        self.needs = {k: v and bool(live[program.steps[k[0]].flat_input(k[1])])
                      for k, v in sweep.passes.items()}
        self.slots = frozenset(i for i in range(len(slots)) if strict[i] and live[i])
        self.flows = frozenset(e for e, s in sweep.edge_strict.items()
                               if s and live[program.slot_of(e.src, e.src_port)])
        #: why each cut wire is cut: {edge: ((node, reason), ...)}
        self.cut_reasons = {e: tuple(sorted(sweep.edge_cut[e])) for e, s in sweep.edge_strict.items() if not s}
        self.cut = {e: tuple(sorted({node for node, _ in why})) for e, why in self.cut_reasons.items()}
        known = set(sweep.edge_strict)
        self.unreached = frozenset(e for e in program.typed_wires() if e not in known)
        sources = [s for s in program.steps if s.role in ("variable", "placeholder")]
        self.sources = tuple(s.node for s in sources if strict[s.outputs[0]])
        self.cut_sources = {s.node: tuple(sorted({n for n, _ in cutters[s.outputs[0]]})) for s in sources
                            if not strict[s.outputs[0]] and cutters[s.outputs[0]] is not None}

    def reason(self, edge: Edge) -> str:
        """Why gradient does or does not flow along ``edge``, in words."""
        if edge in self.flows:
            return "carries gradient to the target"
        if edge in self.cut:
            return "gradient is cut by " + "; ".join(f"{node} ({why})" for node, why in self.cut_reasons[edge])
        if edge in self.unreached:
            return "does not lead to the target"
        return "leads to the target but to no node gradients are wanted for"


class _BackwardSweep:
    """Marks, from the targets backwards, which slots the gradient reaches: ``strict`` where it
    really flows, ``cutters`` (the blocks in the way, with reasons) where it only would."""

    def __init__(self, slots, targets):
        self.slots = slots
        n = len(slots)
        self.strict = bytearray(n)
        self.cutters: list = [None] * n  # None: not even relaxed-reachable; else frozenset of cutters
        for t in targets:
            self.strict[t] = 1
            self.cutters[t] = frozenset()
        self.edge_strict: dict[Edge, bool] = {}
        self.edge_cut: dict[Edge, frozenset] = {}
        #: (step index, flat input index) -> True when gradient strictly passes into that input
        self.passes: dict[tuple[int, int], bool] = {}
        self.prevent_hits: list = []

    def visit(self, step) -> None:
        out_strict, out_cut = self._outputs(step)
        if out_cut is None:
            return
        spec = step.spec
        if spec.gradient == "prevent" and any(self.strict[o] for o in step.outputs):
            self.prevent_hits.append(step)
        slots, strict, cutters = self.slots, self.strict, self.cutters
        for j, (pos, _, edge) in enumerate(step.in_edges):
            src = step.flat_input(j)
            if src is None:
                continue
            decl = spec.inputs[pos]
            ok = spec.gradient == "vjp" and decl.differentiable and slots[src].type.is_float
            is_strict = out_strict and ok
            c = out_cut if ok else out_cut | {(step.node, cut_reason(spec, decl, slots[src]))}
            self.passes[(step.index, j)] = is_strict
            if edge is not None:
                self.edge_strict[edge] = self.edge_strict.get(edge, False) or is_strict
                self.edge_cut[edge] = c
            if is_strict:
                strict[src] = 1
            cutters[src] = c if cutters[src] is None else cutters[src] | c

    def _outputs(self, step):
        """(does gradient strictly leave through an output, the cutters met on the way to its
        outputs or None when no output leads to a target)."""
        spec, slots = step.spec, self.slots
        out_strict = False
        out_cut = None
        for k, o in enumerate(step.outputs):
            if self.cutters[o] is None:
                continue
            decl_out = spec.outputs[step.out_decl[k]]
            differentiable = decl_out.differentiable and slots[o].type.is_float
            if self.strict[o] and differentiable and spec.gradient == "vjp":
                out_strict = True
            if differentiable:
                extra = frozenset()
            elif not slots[o].type.is_float:
                extra = frozenset({(step.node, f"its output '{slots[o].port}' is {slots[o].type.dtype.name}, "
                                               f"which carries no gradient")})
            else:
                extra = frozenset({(step.node, f"its output '{slots[o].port}' is not differentiable")})
            c = self.cutters[o] | extra
            out_cut = c if out_cut is None else out_cut | c
        return out_strict, out_cut


def _live_slots(steps, n: int, passes, wrt, wrt_slots) -> bytearray:
    """Forward sweep: which slots depend, through differentiable inputs, on a wanted node."""
    live = bytearray(n)
    for i in wrt_slots or ():
        live[i] = 1
    everything = wrt is None and wrt_slots is None
    for step in steps:
        if everything or (wrt is not None and step.node in wrt):
            for o in step.outputs:
                live[o] = 1
            continue
        if any(passes.get((step.index, j)) and live[step.flat_input(j)]
               for j in range(len(step.in_edges))):
            for o in step.outputs:
                live[o] = 1
    return live


def cut_reason(spec: BlockSpec, decl, src) -> str:
    """Why no gradient passes a block into one of its inputs (fed by slot ``src``), in words."""
    if spec.gradient == "stop":
        return "StopGradient"
    if spec.gradient == "prevent":
        return "PreventGradient"
    if spec.gradient == "none":
        return f"{spec.name} is not differentiable"
    if decl.static:
        return f"input '{decl.name}' is a value known before running"
    if decl.ref:
        return f"input '{decl.name}' is state the block updates"
    if not decl.gradient:
        return f"{spec.name} sends no gradient to its input '{decl.name}' (as TensorFlow)"
    if not src.type.is_float:
        return f"input '{decl.name}' is {src.type.dtype.name}, which carries no gradient"
    return f"input '{decl.name}' takes no gradient"
