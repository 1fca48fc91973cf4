"""A program's gradients seen from one drawn level: a page, or the diagram of an opened instance.

The compiler flattens composite instances (compile/flatten.py): a backward run and its
:class:`~blockflow.present.gradview.GradientView` speak of flat ids (``d1/MatMul_1``) and flat
wires. The editor draws one level at a time: the page, where ``d1`` is one closed block, or the
inside of ``d1``, where ``MatMul_1`` is drawn. This module answers, without Qt, what the canvas
draws at a level:

- :func:`drawn_node`: which drawn block a flat id is seen as (a block inside a closed instance
  is seen as the instance);
- :class:`LevelGradients`: each drawn wire's :class:`WireInfo` (the flat wire it became), the
  fan-outs and the backward steps in drawn ids, and the badge of each closed instance;
- :class:`InstanceBadge`: the gradient norm of the Variables inside an instance (shared ones
  counted where they live), "shares d1" on one that uses another's, and "cut" when no gradient
  reaches its inside (the static paths say so before any run).

The norm scale stays the whole program's (``GradientView.scale``): colours compare across levels.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from blockflow.present.gradview import CUT, FLOWS, Fanout, GradientView, WireInfo, norm
from blockflow.present.values import readable_number
from blockflow.project import Edge

__all__ = ["drawn_node", "LevelGradients", "InstanceBadge", "instance_badge", "instance_variables", "inside",
           "grouped_names", "group_label"]


def inside(flat_id: str, path: str) -> bool:
    """True when flat id ``flat_id`` is a block inside instance ``path`` (at any depth)."""
    return flat_id.startswith(path + "/")


def drawn_node(flat_id: str, level: str) -> str | None:
    """The block drawn at ``level`` that flat id ``flat_id`` is seen as: itself when it is drawn
    there, the closed instance holding it when it is deeper, None when it is not under ``level``."""
    if level:
        if not inside(flat_id, level):
            return None
        flat_id = flat_id[len(level) + 1:]
    return flat_id.partition("/")[0]


def instance_variables(program, path: str) -> list[str]:
    """The Variables that live inside instance ``path`` (flat ids, nested ones too): a sharing
    instance's own were left out by the flattening, so they are counted where they live."""
    return [st.node for st in program.steps if st.role == "variable" and inside(st.node, path)]


@dataclass(frozen=True)
class InstanceBadge:
    """What the badge on a closed instance says."""

    path: str                   # the instance's flat id
    state: str                  # FLOWS (gradient reaches inside) or CUT
    variables: tuple            # flat ids of the Variables living inside
    norm: float | None          # the L2 norm of their gradients together (after a run)
    shares: str | None = None   # the instance whose Variables it uses
    reason: str = ""            # why it is cut, in words

    @property
    def cut(self) -> bool:
        return self.state == CUT

    def text(self) -> str:
        """The badge's short text: ``‖∇W‖ 0.034``, ``cut``, ``shares d1``."""
        if self.cut:
            return f"shares {self.shares.rpartition('/')[2]} · cut" if self.shares else "cut"
        parts = []
        if self.shares:
            parts.append(f"shares {self.shares.rpartition('/')[2]}")
        if self.norm is not None and self.variables:
            parts.append(f"‖∇W‖ {readable_number(self.norm)}")
        elif not self.shares:
            parts.append("∇ flows")
        return " · ".join(parts)

    def tooltip(self) -> str:
        """A sentence for the badge's tooltip."""
        if self.cut:
            return f"no gradient reaches the inside of {self.path}: {self.reason}"
        lines = []
        if self.variables and self.norm is not None:
            names = ", ".join(self.variables[:4]) + (f" and {len(self.variables) - 4} more"
                                                    if len(self.variables) > 4 else "")
            lines.append(f"gradient norm of the Variables inside {self.path} ({names}): "
                         f"{readable_number(self.norm)}")
        elif self.variables:
            lines.append(f"gradient can reach the {len(self.variables)} Variable"
                         f"{'s' if len(self.variables) != 1 else ''} inside {self.path}")
        else:
            lines.append(f"gradient flows through {self.path} (it holds no Variable)")
        if self.shares:
            lines.append(f"{self.path} uses the Variables of {self.shares}: their gradient is counted "
                         f"on {self.shares}'s badge, this use included")
        return "\n".join(lines)


class LevelGradients:
    """``gview`` (a GradientView of the host page's flat program) as drawn at ``level`` ("" for the
    page; an instance's flat id inside it). ``edges``: the wires drawn there."""

    def __init__(self, gview: GradientView, level: str, edges):
        self.gview, self.level = gview, level
        program = gview.program
        self.program = program
        #: a page without instances: drawn ids are flat ids (kept as fast as before composites)
        self.identity = not level and program.hierarchy.empty
        if self.identity:
            self.wires: dict[Edge, WireInfo] = gview.wires
            self.flat = self.drawn = None
            return
        #: drawn wire -> the flat wire it became, and back
        self.flat: dict[Edge, Edge] = program.drawn_wires(level, edges)
        self.drawn: dict[Edge, Edge] = {f: e for e, f in self.flat.items() if f is not None}
        #: drawn wire -> its WireInfo (wires the program did not type are left out)
        self.wires = {}
        for e, f in self.flat.items():
            info = gview.wires.get(f)
            if info is not None:
                self.wires[e] = info

    # ------------------------------------------------------------------ ids
    def flat_id(self, node: str) -> str:
        return self.program.flat_id(self.level, node)

    def drawn_node(self, flat_id: str) -> str | None:
        return drawn_node(flat_id, self.level)

    def drawn_edge(self, flat: Edge) -> Edge | None:
        """The wire drawn at this level that flat wire ``flat`` is, None when it is not drawn here."""
        if self.identity:
            return flat if flat in self.wires else None
        return self.drawn.get(flat)

    def flat_edge(self, drawn: Edge) -> Edge:
        """The flat wire a wire drawn here became."""
        if self.identity:
            return drawn
        return self.flat.get(drawn) or self.program.flat_wire(self.level, drawn)

    def instances(self) -> list[str]:
        """The flat ids of the instances drawn (closed) at this level."""
        return [path for path, inst in self.program.hierarchy.instances.items() if inst.level == self.level]

    # ------------------------------------------------------------------ fan-outs and steps
    def fanouts(self) -> list[Fanout]:
        """The program's fan-outs whose wires are all drawn here, in drawn ids."""
        if self.identity:
            return list(self.gview.fanouts)
        out = []
        for fan in self.gview.fanouts:
            drawn = [(self.drawn.get(e), g) for e, g in fan.contributions]
            if not drawn or any(e is None for e, _ in drawn):
                continue
            src = drawn[0][0]
            out.append(Fanout(src.src, src.src_port, drawn, fan.total))
        return out

    def step_here(self, flat_node: str) -> str | None:
        """The drawn block a backward step of ``flat_node`` is seen as (None: not at this level)."""
        return self.drawn_node(flat_node)

    def drawn_edges(self, flat_edges) -> list[Edge]:
        """Flat wires as the wires drawn here (those not drawn here are left out)."""
        return [d for d in (self.drawn_edge(e) for e in flat_edges) if d is not None]

    def cut_legend(self) -> tuple[list[str], list[str]]:
        """What the cut wires drawn here are cut by: (the op names of the blocks that cut the float
        wires drawn here, the dtypes of the integer or boolean wires drawn here). Only what is
        drawn: a cut inside a closed instance is not seen, and an int32 wire is not cut by the
        Identity it passes through, whatever its relaxed paths meet further on (a legend saying
        "cut by Identity" had a user look for the Identity that cuts the float wire beside it)."""
        program = self.program
        reasons = self.gview.paths.cut_reasons
        blocks: set[str] = set()
        dtypes: set[str] = set()
        for info in self.wires.values():
            if info.state != CUT:
                continue
            t = program.wire_type(info.edge)
            if t is not None and not t.is_float:
                dtypes.add(t.dtype.name)
                continue
            for node, _why in reasons.get(info.edge, ()):
                spec = program.spec_of(node)
                if spec is not None:
                    blocks.add(spec.name)
        return sorted(blocks), sorted(dtypes)

    # ------------------------------------------------------------------ badges
    def badge(self, path: str) -> InstanceBadge | None:
        """The badge of instance ``path`` (a flat id), None when it is not an expanded instance."""
        return instance_badge(self.gview, path)

    def badges(self) -> dict[str, InstanceBadge]:
        """{drawn node: badge} for each instance drawn at this level (one pass over the wires and
        the steps for them all: a page may hold a thousand instances)."""
        insts = {self.drawn_node(p): p for p in self.instances()}
        if not insts:
            return {}
        wires: dict[str, list] = {}
        for e, info in self.gview.wires.items():
            d = drawn_node(e.dst, self.level)
            if d in insts and inside(e.dst, insts[d]):
                wires.setdefault(d, []).append(info)
        variables: dict[str, list] = {}
        for st in self.program.steps:
            if st.role == "variable":
                d = drawn_node(st.node, self.level)
                if d in insts and inside(st.node, insts[d]):
                    variables.setdefault(d, []).append(st.node)
        return {d: _badge(self.gview, path, wires.get(d, ()), variables.get(d, ()))
                for d, path in insts.items()}


def _inside_state(gview: GradientView, infos) -> tuple[str, str]:
    """(FLOWS or CUT, why) for the wires ``infos`` ending inside an instance: FLOWS when one
    carries gradient to the target (a wire from a Variable read in another instance counts)."""
    reasons: set[str] = set()
    for info in infos:
        if info.state == FLOWS:
            return FLOWS, ""
        if info.state == CUT and info.cutters:
            reasons.add("cut by " + ", ".join(info.cutters))
    if reasons:
        return CUT, sorted(reasons)[0]
    return CUT, f"nothing inside it leads to {gview.target[0]}"


def _badge(gview: GradientView, path: str, infos, variables) -> InstanceBadge:
    state, reason = _inside_state(gview, infos)
    variables = tuple(variables)
    total = None
    if gview.ran and state == FLOWS and variables:
        grads = gview.result.variable_grads
        squares = [norm(grads[v]) ** 2 for v in variables if grads.get(v) is not None]
        total = math.sqrt(sum(squares)) if squares else 0.0
    return InstanceBadge(path, state, variables, total, gview.program.instance(path).shares, reason)


def instance_badge(gview: GradientView, path: str) -> InstanceBadge | None:
    """The badge of instance ``path`` (a flat id; None when it is not an expanded instance)."""
    if gview.program.instance(path) is None:
        return None
    infos = [info for e, info in gview.wires.items() if inside(e.dst, path)]
    return _badge(gview, path, infos, instance_variables(gview.program, path))


def grouped_names(program) -> list[tuple[str, list[str]]]:
    """The program's blocks with outputs, as ``(group, flat ids)``: the page's own blocks first
    (group ""), then each instance's blocks under its flat id (``d1``, ``d1/blk``), in the order
    the program computes them (a Values list, the CLI's rows)."""
    groups: dict[str, list[str]] = {"": []}
    for st in program.steps:
        if not st.outputs:
            continue
        groups.setdefault(st.node.rpartition("/")[0], []).append(st.node)
    return [(g, names) for g, names in groups.items() if names]


def group_label(program, group: str) -> str:
    """``d1 (Dense)`` for an instance's group, the page's scope for the page's own."""
    if not group:
        return f"{program.page_name} (page)"
    inst = program.instance(group)
    return f"{group} ({inst.composite})" if inst is not None else group
