"""What a backward pass did, wire by wire and block by block.

The model behind the editor's gradient highlighting, its backward stepper and its gradient
explanations, and behind ``blockflow render --grad``. No Qt here: the canvas only maps what this
module says to colours and text.

- :class:`GradientView` (from a compiled program and a target; with the :class:`RunResult` of a
  recorded backward run, or without one for the static "gradient paths" view):

  - ``wires[edge]``: a :class:`WireInfo`: its state (``flows``, ``cut``, ``unreached``, ``idle``),
    why, and after a run the value and the gradient flowing back along it, and its norm;
  - ``cut_by[node]``: the wires a StopGradient (or any block that cuts) keeps from the gradient;
  - ``fanouts``: where one output feeds several blocks, each wire's contribution and their sum;
  - ``steps``: the backward schedule, one :class:`BackwardStep` per block, in reverse schedule
    order, with the gradient arriving at each output and the gradient sent along each input;
  - ``explain(node)``: per input, the upstream gradient, the block's local rule, the result.

- :class:`GradientScale`: gradient norms to a colour position on a log scale (the legend's range).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from blockflow.compile.program import Program
from blockflow.project import Edge
from blockflow.spec import shape_text
from blockflow.present.values import readable_number

__all__ = ["WireInfo", "Fanout", "BackwardStep", "InputExplanation", "BlockExplanation",
           "GradientView", "GradientScale", "describe_array", "norm"]

FLOWS, CUT, UNREACHED, IDLE = "flows", "cut", "unreached", "idle"


def norm(a) -> float:
    """The L2 norm of an array, in float64 (NaN when it holds NaN, inf when it overflows)."""
    a = np.asarray(a)
    if a.size == 0:
        return 0.0
    if a.dtype.kind not in "fc":
        a = a.astype(np.float64)
    return float(np.linalg.norm(a.ravel().astype(np.float64, copy=False)))


def describe_array(a, *, name: str = "") -> str:
    """One line about an array: shape, dtype, and min / max / mean (or the scalar), NaN/Inf count."""
    if a is None:
        return f"{name}: none" if name else "none"
    a = np.asarray(a)
    head = f"{name} " if name else ""
    shape = "scalar" if a.ndim == 0 else shape_text(a.shape)
    if a.size == 0:
        return f"{head}{shape} {a.dtype.name} (empty)"
    if a.dtype.kind == "b":
        return f"{head}{shape} bool · {int(a.sum())} of {a.size} true"
    data = a.astype(np.float64, copy=False)
    finite = np.isfinite(data)
    bad = int(a.size - finite.sum())
    tail = f" · {bad} NaN/Inf" if bad else ""
    if a.size == 1:
        return f"{head}{shape} {a.dtype.name} = {readable_number(data.ravel()[0])}{tail}"
    if not finite.any():
        return f"{head}{shape} {a.dtype.name} · all NaN/Inf"
    ok = data[finite]
    return (f"{head}{shape} {a.dtype.name} · min {readable_number(ok.min())} · max {readable_number(ok.max())} · "
            f"mean {readable_number(ok.mean())} · norm {readable_number(math.sqrt(float(np.dot(ok, ok))))}{tail}")




@dataclass
class WireInfo:
    """One wire in a gradient view."""

    edge: Edge
    state: str                     # flows | cut | unreached | idle
    reason: str                    # in words, from the compiler's reachability
    cutters: tuple = ()            # the blocks that cut it (state "cut")
    value: np.ndarray | None = None
    grad: np.ndarray | None = None  # the gradient flowing back along it (after a run)
    norm: float | None = None       # its L2 norm

    @property
    def carries(self) -> bool:
        """Gradient flows along this wire (statically; after a run it may still be all zeros)."""
        return self.state == FLOWS


@dataclass
class Fanout:
    """One output feeding several wires that carry gradient: the contributions and their sum."""

    node: str
    port: str
    contributions: list            # [(edge, gradient)]
    total: np.ndarray | None       # the runtime's gradient of the output (the sum)

    def summed(self) -> np.ndarray:
        """The contributions added up here (equal to ``total`` up to rounding)."""
        acc = None
        for _, g in self.contributions:
            acc = np.array(g, dtype=np.float64) if acc is None else acc + g
        return acc


@dataclass
class BackwardStep:
    """One block differentiated in the backward pass (or a leaf receiving its gradient)."""

    index: int                     # position in the backward order (0: the target's block)
    node: str
    block: str
    kind: str                      # "vjp" | "cut" | "leaf"
    arriving: dict = field(default_factory=dict)   # output port -> gradient arriving (summed)
    sent: list = field(default_factory=list)       # [(edge, gradient)] along its input wires
    rule: str = ""

    def describe(self) -> str:
        lines = [f"{self.index + 1}. {self.node} ({self.block})"]
        for port, g in self.arriving.items():
            lines.append("   " + describe_array(g, name=f"gradient arriving at {port}:"))
        if self.kind == "cut":
            lines.append("   sends no gradient back (it cuts the flow here)")
        elif self.kind == "leaf":
            lines.append("   a leaf: this is the gradient of the target with respect to it")
        for edge, g in self.sent:
            lines.append("   " + describe_array(g, name=f"sends to {edge.src}.{edge.src_port} (via {edge.dst_port}):"))
        return "\n".join(lines)


@dataclass
class InputExplanation:
    port: str
    edge: Edge | None
    value: np.ndarray | None
    upstream: dict                 # output port -> gradient arriving at the block
    rule: str
    result: np.ndarray | None      # the gradient sent to this input
    why_none: str = ""             # why no gradient is sent (cut, integer, not differentiable)


@dataclass
class BlockExplanation:
    node: str
    block: str
    full_name: str
    rule: str
    inputs: list                   # [InputExplanation]

    def text(self) -> str:
        lines = [f"{self.full_name} ({self.block})"]
        if self.rule:
            lines.append("rule: " + self.rule.replace("\n", "; "))
        for ie in self.inputs:
            lines.append(f"input {ie.port}:")
            if ie.value is not None:
                lines.append("  " + describe_array(ie.value, name="value"))
            for port, g in ie.upstream.items():
                lines.append("  " + describe_array(g, name=f"upstream gradient g ({port})"))
            if ie.result is not None:
                lines.append("  " + describe_array(ie.result, name="result"))
            else:
                lines.append("  no gradient: " + (ie.why_none or "nothing flows back here"))
        return "\n".join(lines)


class GradientView:
    """The gradient paths to ``target`` on a compiled page; with ``result`` (a backward run made
    with ``record=True``) also the gradients themselves."""

    def __init__(self, program: Program, target=None, result=None):
        self.program = program
        if result is not None and result.target is not None:
            self.target_slot = program.resolve_target(f"{result.target[0]}:{result.target[1]}")
        else:
            self.target_slot = program.resolve_target(target)
        tslot = program.slot(self.target_slot)
        self.target = (tslot.node, tslot.port)
        self.result = result
        self.paths = result.paths if result is not None and result.paths is not None else \
            program.gradient_paths(f"{tslot.node}:{tslot.port}")
        self.wires: dict[Edge, WireInfo] = {}
        self.cut_by: dict[str, list] = {}
        paths = self.paths
        for edge in program.typed_wires():
            if edge in paths.flows:
                state, cutters = FLOWS, ()
            elif edge in paths.cut:
                state, cutters = CUT, paths.cut[edge]
            elif edge in paths.unreached:
                state, cutters = UNREACHED, ()
            else:
                state, cutters = IDLE, ()
            reason = paths.reason(edge)
            if state == CUT:
                t = program.wire_type(edge)
                if t is not None and not t.is_float:
                    # not cut by a block: its relaxed paths' cutters would only mislead
                    reason = f"carries {t.dtype.name} values: integer and boolean wires carry no gradient"
            info = WireInfo(edge, state, reason, cutters)
            if result is not None:
                info.value = result.values.get((edge.src, edge.src_port))
                g = result.edge_grads.get(edge)
                if g is not None and state == FLOWS:
                    info.grad = g
                    info.norm = norm(g)
            self.wires[edge] = info
            for c in cutters:
                self.cut_by.setdefault(c, []).append(edge)
        self.fanouts = self._fanouts()
        self.steps = self._steps() if result is not None else []

    # ------------------------------------------------------------------ summaries
    @property
    def ran(self) -> bool:
        return self.result is not None

    def norms(self) -> list[float]:
        return [w.norm for w in self.wires.values() if w.norm is not None]

    def scale(self, levels: int = 24) -> "GradientScale":
        return GradientScale.from_norms(self.norms(), levels)

    def learning_norms(self) -> list[float]:
        """The norms of the gradients on their way to something learnt or fed: the wires along
        which gradient reaches a Variable, a Placeholder or a data block. What the colour scale
        spans: gradient that only runs into constants (an attention mask's x -1e9 sends 1e5-sized
        gradients to a Const that nobody learns) would stretch it until the model's own wires
        looked like no gradient. All the norms when no wire reaches such a block."""
        program = self.program
        sources = frozenset(st.node for st in program.steps
                            if st.role in ("variable", "placeholder") or st.spec.is_dataset)
        if not sources:
            return self.norms()
        tslot = program.slot(self.target_slot)
        flows = program.gradient_paths(f"{tslot.node}:{tslot.port}", wrt=sources).flows
        found = [w.norm for e, w in self.wires.items() if w.norm is not None and e in flows]
        return found or self.norms()

    def cut_summary(self, node: str) -> str:
        """What a cutting block (StopGradient...) keeps from the gradient, in words."""
        edges = self.cut_by.get(node, [])
        if not edges:
            return f"{node} cuts no gradient path to {self.target[0]}"
        upstream = sorted({e.src for e in edges} - {node})
        where = ", ".join(upstream) if upstream else "its input"
        return (f"{node} cuts {len(edges)} wire{'s' if len(edges) != 1 else ''} off the gradient of "
                f"{self.target[0]}: nothing flows back to {where} through it")

    # ------------------------------------------------------------------ accumulation
    def _fanouts(self) -> list[Fanout]:
        by_output: dict[tuple, list] = {}
        for edge, info in self.wires.items():
            if info.state == FLOWS:
                by_output.setdefault((edge.src, edge.src_port), []).append(edge)
        out = []
        r = self.result
        for (node, port), edges in by_output.items():
            if len(edges) < 2:
                continue
            contributions = [(e, r.edge_grads.get(e)) for e in edges] if r is not None else [(e, None) for e in edges]
            total = r.grads.get((node, port)) if r is not None else None
            out.append(Fanout(node, port, contributions, total))
        return out

    def fanout_of(self, node: str, port: str | None = None) -> Fanout | None:
        return next((f for f in self.fanouts if f.node == node and (port is None or f.port == port)), None)

    # ------------------------------------------------------------------ stepping
    def _steps(self) -> list[BackwardStep]:
        r, program = self.result, self.program
        steps: list[BackwardStep] = []
        for st in reversed(program.steps):
            arriving = {}
            for o in st.outputs:
                slot = program.slot(o)
                g = r.grads.get((slot.node, slot.port))
                if g is not None:
                    arriving[slot.port] = g
            if not arriving:
                continue
            sent = [(edge, r.edge_grads[edge]) for _, _, edge in st.in_edges
                    if edge is not None and edge in r.edge_grads and self.wires.get(edge) is not None
                    and self.wires[edge].state == FLOWS]
            if st.role in ("placeholder", "variable"):
                kind = "leaf"
            elif st.spec.gradient != "vjp" or not sent and any(
                    e is not None and e in self.paths.cut for _, _, e in st.in_edges):
                kind = "cut"
            else:
                kind = "vjp"
            steps.append(BackwardStep(len(steps), st.node, st.spec.name, kind, arriving, sent,
                                      getattr(st.spec, "grad_rule", "") or ""))
        return steps

    # ------------------------------------------------------------------ explaining
    def explain(self, node: str) -> BlockExplanation:
        program = self.program
        st = program.step(node)
        spec = st.spec
        rule = getattr(spec, "grad_rule", "") or ""
        r = self.result
        upstream = {}
        if r is not None:
            for o in st.outputs:
                slot = program.slot(o)
                g = r.grads.get((slot.node, slot.port))
                if g is not None:
                    upstream[slot.port] = g
        inputs = []
        for j, (pos, idx, edge) in enumerate(st.in_edges):
            decl = spec.inputs[pos]
            port = decl.name if idx is None else f"{decl.name}[{idx}]"
            src = st.flat_input(j)
            value = None
            if r is not None and src is not None:
                value = r.values.get((program.slot(src).node, program.slot(src).port))
            result = None
            why = ""
            info = self.wires.get(edge) if edge is not None else None
            if info is not None and info.state == FLOWS:
                result = info.grad
            elif info is not None:
                why = info.reason
            elif edge is None:
                why = "an inline constant: a constant receives no gradient"
            inputs.append(InputExplanation(port, edge, value, upstream, rule, result, why))
        return BlockExplanation(node, spec.name, program.full_name(node), rule, inputs)


@dataclass(frozen=True)
class GradientScale:
    """Gradient norms to a position in [0, 1] on a log scale, quantised to ``levels`` steps (the
    canvas keeps one pen per level). ``low``/``high`` are the smallest and largest positive norms;
    a zero norm sits below the scale (level -1)."""

    low: float
    high: float
    levels: int = 24

    @classmethod
    def from_norms(cls, norms, levels: int = 24) -> "GradientScale":
        positive = [n for n in norms if n is not None and n > 0 and math.isfinite(n)]
        if not positive:
            return cls(0.0, 0.0, levels)
        return cls(min(positive), max(positive), levels)

    @property
    def empty(self) -> bool:
        return self.high <= 0

    def fraction(self, n: float | None) -> float | None:
        """Where ``n`` sits: 0 at ``low``, 1 at ``high`` (log scale); None for no gradient or 0."""
        if n is None or not n > 0 or self.empty:
            return None
        if not math.isfinite(n):
            return 1.0
        lo, hi = math.log10(self.low), math.log10(self.high)
        if hi - lo < 1e-12:
            return 1.0
        return min(1.0, max(0.0, (math.log10(n) - lo) / (hi - lo)))

    def level(self, n: float | None) -> int:
        """The quantised position, 0 .. levels-1; -1 for no gradient or an exact zero."""
        f = self.fraction(n)
        if f is None:
            return -1
        return min(self.levels - 1, int(f * self.levels))

    def ticks(self, count: int = 5) -> list[tuple[float, float]]:
        """``count`` (fraction, norm) pairs along the scale, for a legend."""
        if self.empty:
            return []
        if count < 2 or self.high == self.low:
            return [(1.0, self.high)]
        lo, hi = math.log10(self.low), math.log10(self.high)
        return [(k / (count - 1), 10 ** (lo + (hi - lo) * k / (count - 1))) for k in range(count)]
