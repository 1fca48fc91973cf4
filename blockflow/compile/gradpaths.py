"""Gradient reachability over a compiled Program: which wires carry gradient from a target back
to the nodes wanted, which are cut and by what, in words.

It reads a Program (compile/program.py) without importing it: Program.gradient_paths() builds
these, so the import goes one way only (program -> gradpaths) and the two modules form no cycle.
"""
from __future__ import annotations

import gc
from itertools import compress
from operator import and_, not_

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
        # As a compile does (compiler.compile_page): many small objects, no cycle among them, so
        # the collector waits instead of rescanning the growing lists and tables
        enabled = gc.isenabled()
        try:    # off inside the try: an exception right after it still turns it back on
            gc.disable()
            steps = program.steps if upto is None else program.steps[:upto]
            sweep = _BackwardSweep(program.slots, targets, program.steps, _float_slots(program))
            visit = sweep.visit
            for step in reversed(steps):
                visit(step)
            live = _live_slots(steps, len(program.slots), sweep, wrt, wrt_slots)
            self.live = live
            self.strict = sweep.strict
            self._summarize(program, sweep, live)
        finally:
            if enabled:
                gc.enable()

    def _summarize(self, program, sweep: "_BackwardSweep", live: bytearray) -> None:
        """The answers, from the backward sweep's marks and the forward sweep's live slots.

        Each wire into a step is met once by the sweep (one wire feeds one input), in the order
        the answers list them. An Edge hashes in Python (a dataclass, ~0.2 us at 100k blocks),
        so only the wires the sweep met are hashed, once; the unreached ones are the typed wires
        less those, by set operations that reuse the hashes the wire-type table holds."""
        slots, strict, cutters = program.slots, sweep.strict, sweep.cutters
        #: PreventGradient blocks the gradient would have to pass through (an error to run)
        self.prevented = tuple(
            st.node for st in sweep.prevent_hits
            if any(live[st.flat_input(j)] and slots[st.flat_input(j)].type.is_float
                   for j in range(len(st.in_edges)) if st.flat_input(j) is not None))
        # per wire met, in C loops (tens of thousands on a big page): whether its source is live,
        # whether gradient strictly passes and its source is live (flows, and needs a cotangent)
        m_index, m_j, m_src, m_edge, m_strict, m_cut = sweep.met
        src_live = list(map(live.__getitem__, m_src))
        needed = list(map(bool, map(and_, m_strict, src_live)))
        self._needs = (m_index, m_j, needed)
        self.slots = frozenset(compress(range(len(strict)), map(and_, strict, live)))
        # (an Edge is truthy: filter drops only the Nones, without a second set made by a "-")
        self.flows = frozenset(filter(None, compress(m_edge, needed)))
        #: why each cut wire is cut: {edge: ((node, reason), ...)}
        self.cut_reasons = cut_reasons = {m_edge[k]: tuple(sorted(m_cut[k]))
                                          for k in compress(range(len(m_strict)), map(not_, m_strict))
                                          if m_edge[k] is not None}
        self.cut = {e: tuple(sorted({node for node, _ in why})) for e, why in cut_reasons.items()}
        met = set(self.flows)
        met.update(cut_reasons)
        met.update(compress(m_edge, map(and_, m_strict, map(not_, src_live))))   # strict, not wanted
        met.discard(None)
        self.unreached = frozenset(program.edge_types).difference(met)   # from the table's hashes
        sources = [s for s in program.steps if s.spec.role in ("variable", "placeholder")]
        self.sources = tuple(s.node for s in sources if strict[s.outputs[0]])
        self.cut_sources = {s.node: tuple(sorted({n for n, _ in cutters[s.outputs[0]]})) for s in sources
                            if not strict[s.outputs[0]] and cutters[s.outputs[0]] is not None}

    @property
    def needs(self) -> dict:
        """(step index, flat input index) -> True when a cotangent must be computed for it, for
        each wired input the sweep met, in the order it met them. Made when first asked (a
        run's plan asks; the editor's view of the paths does not): a tuple key and an entry
        for each input the gradient reaches."""
        found = self.__dict__.get("_needs_dict")
        if found is None:
            m_index, m_j, needed = self._needs
            found = self._needs_dict = dict(zip(zip(m_index, m_j), needed))
            self._needs = None
        return found

    def reason(self, edge: Edge) -> str:
        """Why gradient does or does not flow along ``edge``, in words."""
        if edge in self.flows:
            return "carries gradient to the target"
        if edge in self.cut:
            return "gradient is cut by " + "; ".join(f"{node} ({why})" for node, why in self.cut_reasons[edge])
        if edge in self.unreached:
            return "does not lead to the target"
        return "leads to the target but to no node gradients are wanted for"


_NONE = frozenset()


def _union(a: frozenset, b: frozenset) -> frozenset:
    """``a | b``, without a new set when one side holds the other's all (most are empty)."""
    if not b or a is b:
        return a
    return b if not a else a | b


class _BackwardSweep:
    """Marks, from the targets backwards, which slots the gradient reaches: ``strict`` where it
    really flows, ``cutters`` (the blocks in the way, with reasons) where it only would."""

    def __init__(self, slots, targets, steps, floats: bytes):
        self.slots, self.floats, self.steps = slots, floats, steps
        n = len(slots)
        self.strict = bytearray(n)
        self.cutters: list = [None] * n  # None: not even relaxed-reachable; else frozenset of cutters
        for t in targets:
            self.strict[t] = 1
            self.cutters[t] = _NONE
        #: per wired input of each step the sweep reached, in the order it met them: the step
        #: index, the flat input, its source slot, its Edge or None, whether gradient strictly
        #: passes, the cutters met; six lists, not a tuple each: fewer objects for the collector
        #: to scan (a tuple each took 100k-block paths into a full collection)
        self.met = ([], [], [], [], [], [])
        self.prevent_hits: list = []
        self._inputs_differentiable: dict = {}

    def _differentiable(self, spec) -> tuple:
        """Per declared input of ``spec``: its ``differentiable`` (a property), once per spec."""
        found = self._inputs_differentiable.get(spec)
        if found is None:
            found = self._inputs_differentiable[spec] = tuple(d.differentiable for d in spec.inputs)
        return found

    def visit(self, step) -> None:
        outputs = step.outputs
        if len(outputs) == 1 and self.cutters[outputs[0]] is None:
            return     # no output leads to a target (what _outputs would say, the common case)
        out_strict, out_cut = self._outputs(step)
        if out_cut is None:
            return
        spec = step.spec
        if spec.gradient == "prevent" and any(self.strict[o] for o in step.outputs):
            self.prevent_hits.append(step)
        slots, strict, cutters, floats = self.slots, self.strict, self.cutters, self.floats
        m_index, m_j, m_src, m_edge, m_strict, m_cut = self.met
        vjp, inputs, decls, index = spec.gradient == "vjp", step.inputs, spec.inputs, step.index
        passing = self._differentiable(spec)
        for j, (pos, k, edge) in enumerate(step.in_edges):
            src = inputs[pos] if k is None else inputs[pos][k]
            if src is None:
                continue
            decl = decls[pos]
            ok = vjp and passing[pos] and floats[src] == 1
            is_strict = out_strict and ok
            c = out_cut if ok else out_cut | {(step.node, cut_reason(spec, decl, slots[src]))}
            m_index.append(index)
            m_j.append(j)
            m_src.append(src)
            m_edge.append(edge)
            m_strict.append(is_strict)
            m_cut.append(c)
            if is_strict:
                strict[src] = 1
            had = cutters[src]
            cutters[src] = c if had is None else _union(had, c)

    def _outputs(self, step):
        """(does gradient strictly leave through an output, the cutters met on the way to its
        outputs or None when no output leads to a target)."""
        spec, slots, cutters, floats = step.spec, self.slots, self.cutters, self.floats
        out_strict = False
        out_cut = None
        for k, o in enumerate(step.outputs):
            c = cutters[o]
            if c is None:
                continue
            decl_out = spec.outputs[step.out_decl[k]]
            is_float = floats[o] == 1
            differentiable = decl_out.differentiable and is_float
            if self.strict[o] and differentiable and spec.gradient == "vjp":
                out_strict = True
            if not differentiable:
                why = (f"its output '{slots[o].port}' is {slots[o].type.dtype.name}, which carries no gradient"
                       if not is_float else f"its output '{slots[o].port}' is not differentiable")
                c = c | {(step.node, why)}
            out_cut = c if out_cut is None else _union(out_cut, c)
        return out_strict, out_cut


def _float_slots(program) -> bytes:
    """Per slot, 1 when its dtype is a float: the sweep asks for each wire, and a byte string
    is what a 100k-block program's scattered Slot objects are not, in the cache. Made once
    per program."""
    cache = program.cache("gradpaths")
    floats = cache.get("floats")
    if floats is None:
        floats = cache["floats"] = bytes([s.type.dtype.kind == "f" for s in program.slots])
    return floats


def _passes(sweep, n_steps: int) -> list:
    """Per step index, per flat input: True when gradient strictly passes into that input (None
    for a step no gradient reaches, or an unwired input). Only a question with ``wrt`` asks: for
    every node, all is live."""
    passes: list = [None] * n_steps
    m_index, m_j, _, _, m_strict, _ = sweep.met
    for index, j, is_strict in zip(m_index, m_j, m_strict):
        p = passes[index]
        if p is None:
            p = passes[index] = [None] * len(sweep.steps[index].in_edges)
        p[j] = is_strict
    return passes


def _live_slots(steps, n: int, sweep, wrt, wrt_slots) -> bytearray:
    """Forward sweep: which slots depend, through differentiable inputs, on a wanted node."""
    live = bytearray(n)
    for i in wrt_slots or ():
        live[i] = 1
    everything = wrt is None and wrt_slots is None
    passes = None if everything else _passes(sweep, len(sweep.steps))
    for step in steps:
        if everything or (wrt is not None and step.node in wrt):
            for o in step.outputs:
                live[o] = 1
            continue
        p = passes[step.index]
        if p is not None and any(p[j] and live[step.flat_input(j)] for j in range(len(p))):
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
