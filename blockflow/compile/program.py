"""What a compile produces: diagnostics, and the Program (slots, steps, the schedule) with the
named questions callers ask it.

Plain data: building it is compiler.py's and infer.py's job; gradient reachability is
gradpaths.py's, which this module calls (gradpaths.py never imports this one back).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from blockflow.compile.hierarchy import Hierarchy
from blockflow.compile.gradpaths import GradientPaths
from blockflow.datafiles import DataFiles
from blockflow.errors import CompileError, ProjectError
from blockflow.project import Edge, Page, port_text, split_port_text
from blockflow.spec import BlockSpec, TensorType
from blockflow.variables import VariableValues

if TYPE_CHECKING:     # networkx is imported where a graph is built: it was a third of a
    import networkx as nx   # command's start-up and 19 MiB (docs/performance.md)

    from blockflow.compile.flatten import Instance   # only a flattened page has one

__all__ = ["Diagnostic", "Program", "Step", "Slot"]


@dataclass(frozen=True)
class Diagnostic:
    """One problem, tied to a node (and a port when there is one)."""

    severity: str  # "error" or "warning"
    page: str
    node: str | None
    port: str | None
    message: str

    @property
    def where(self) -> str:
        if self.node is None:
            return f"page '{self.page}'"
        name = f"{self.page}/{self.node}"
        return f"{name} port '{self.port}'" if self.port else name

    def __str__(self):
        return f"{self.severity}: {self.where}: {self.message}"


# Slots and Steps are made by the hundred thousand on a big page: __slots__ keeps each without
# a __dict__ (about half their memory, which a compile then does not have to walk).
@dataclass(frozen=True, eq=False, slots=True)
class Slot:
    """A value in a run: an output port of a node, or an inline constant of an input."""

    index: int
    node: str
    port: str
    type: TensorType
    const: bool = False  # an inline constant or default of an unwired input
    state: bool = False  # a block's slot state kept with a Variable (node: the Variable, port: key)


@dataclass(frozen=True, eq=False, slots=True)
class Step:
    """One node in the schedule: which slots it reads and writes."""

    index: int
    node: str
    spec: BlockSpec
    attrs: dict
    #: per declared input: a slot index, a tuple of slot indices (InputList), or None (unwired optional)
    inputs: tuple
    #: static inputs' values by input position (None for non-static)
    static: tuple
    outputs: tuple
    #: per flattened input slot: (declared input position, list index or None, Edge or None)
    in_edges: tuple
    #: per declared output: a slot index, or a tuple of them for an OutputList
    out_struct: tuple = ()
    #: per flat output slot: the index of its declared output
    out_decl: tuple = ()
    #: for blocks that update state: (ref input name, ("value", variable) or (key, variable))
    refs: tuple = ()

    @property
    def role(self) -> str:
        return self.spec.role

    def flat_input(self, j: int):
        """The slot feeding flattened input ``j`` (see ``in_edges``), or None when unwired."""
        pos, idx, _ = self.in_edges[j]
        src = self.inputs[pos]
        return src[idx] if idx is not None else src


# A frozen dataclass fills each field through object.__setattr__: 0.7 us a Slot and 1.2 us a
# Step, a third of typing a block. The compile makes them through twins with the same slots,
# filled by plain assignments and then given the frozen class (the same layout, so Python allows
# it): 0.24 and 0.35 us, the same objects, frozen from then on.
class _SlotTwin:
    __slots__ = Slot.__slots__


class _StepTwin:
    __slots__ = Step.__slots__


def make_slot(index, node, port, type, const=False, state=False, _new=object.__new__) -> Slot:
    """``Slot(index, node, port, type, const, state)``, made faster (see above)."""
    s = _new(_SlotTwin)
    s.index, s.node, s.port, s.type, s.const, s.state = index, node, port, type, const, state
    s.__class__ = Slot
    return s


def make_step(index, node, spec, attrs, inputs, static, outputs, in_edges, out_struct, out_decl, refs,
              _new=object.__new__) -> Step:
    """``Step(...)`` with every field given, made faster (see make_slot)."""
    s = _new(_StepTwin)
    s.index, s.node, s.spec, s.attrs, s.inputs, s.static = index, node, spec, attrs, inputs, static
    s.outputs, s.in_edges, s.out_struct, s.out_decl, s.refs = outputs, in_edges, out_struct, out_decl, refs
    s.__class__ = Step
    return s


class Program:
    """A compiled page: a flat, deterministic schedule of steps over numbered slots.

    ``ok`` is False when there are error diagnostics; such a program can still be inspected
    (types of whatever compiled) but not run.
    """

    def __init__(self, page: Page, steps, slots, diagnostics, graph, edge_types, by_number,
                 variable_values, feeds, slot_values=None, variables=None):
        """``by_number``: (node id -> block number, per block number its step or None, per block
        number its output slots or None), what the compile kept (infer.py); ``variables``: the
        Variables' steps, when the compile has them at hand (made from ``steps`` when not)."""
        self.page_name = page.name
        self.scope = page.scope
        self.loss = page.loss_target()
        #: the schedule, and every value of a run by slot index: read-only tuples that run/'s code
        #: generator walks directly (it is hot); everyone else asks step(), slot() and the like
        self.steps: tuple[Step, ...] = tuple(steps)
        self.slots: tuple[Slot, ...] = tuple(slots)
        self.diagnostics: tuple[Diagnostic, ...] = tuple(diagnostics)
        # the node-level dependency graph, or what builds it when first asked (ordering.py)
        self._graph = graph
        #: compile/'s own lookup tables: outside compile/, ask wire_type(), typed_wires(),
        #: port_type(), typed_ports() and step() instead (tests/test_compiler.py checks that
        #: nothing else reads them)
        self.edge_types: dict[Edge, TensorType] = edge_types
        # A node's step and output slots are found by its block number, in the compile's lists:
        # no dict keyed by id or (id, port) is built for them (see port_slots and step_of)
        self._index, self._step_at, self._outs_at = by_number
        self._port_slots = self._step_of = None
        #: the live state of a run sequence: Variable values by node (a Variable without a stored
        #: value gets its first value when first read), and blocks' slot state (optimizer
        #: moments...) by (Variable node, key); runs that update state change them
        self.variable_values: VariableValues = variable_values
        self.slot_values: dict[tuple[str, str], np.ndarray] = slot_values or {}
        self.feeds: dict[str, np.ndarray] = feeds
        if variables is None:
            variables = [s for s in self.steps if s.role == "variable"]
        #: the Variables optimizers may change (what training differentiates for by default)
        self.trainable = frozenset(s.node for s in variables if s.attrs.get("trainable", True))
        self._ok = not any(d.severity == "error" for d in self.diagnostics)
        self._caches: dict[str, dict] = {}
        self._targets: dict[str, int] = {}
        self._paths: dict = {}
        #: the project's data files (dataset blocks read them; None: the project has no folder)
        self.files: DataFiles | None = None
        #: Variables whose value is stored in the project (the others start from their initializer)
        self.stored_variables: frozenset = frozenset()
        #: the composite instances the page was flattened from (node ids here are flat: a block
        #: inside instance ``d1`` is ``d1/MatMul_1``); see the level questions below
        self.hierarchy: Hierarchy = Hierarchy()

    @property
    def graph(self) -> nx.DiGraph:
        """The node-level dependency graph (one arc per pair of wired nodes)."""
        import networkx as nx

        if not isinstance(self._graph, nx.DiGraph):
            self._graph = self._graph()
        return self._graph

    # Built when first asked, not by the compile: two dicts keyed by id, of a 100k-block page's
    # size, whose every insertion is a cache miss (docs/performance.md, "Compiling big pages");
    # the questions below answer from the block numbers instead.
    @property
    def port_slots(self) -> dict[tuple[str, str], int]:
        """compile/'s own (ask port_type(), slot_of()): {(node, output port): slot}, in slot
        order; a block's outputs are numbered even when it then failed (its stored value did
        not fit), so they are here though it has no step."""
        found = self._port_slots
        if found is None:
            found = self._port_slots = {(s.node, s.port): s.index for s in self.slots
                                        if not (s.const or s.state)}
        return found

    @property
    def step_of(self) -> dict[str, Step]:
        """compile/'s own (ask step()): {node: its step}, in schedule order."""
        found = self._step_of
        if found is None:
            found = self._step_of = {s.node: s for s in self.steps}
        return found

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity == "error"]

    @property
    def ok(self) -> bool:
        return self._ok

    def raise_for_errors(self) -> None:
        if not self._ok:
            raise CompileError(self.errors)

    def full_name(self, node: str) -> str:
        return f"{self.scope}/{node}"

    # Named questions: callers outside compile/ ask these instead of indexing the tables above.

    # Levels: a diagram drawn in the editor is the page (level "") or the diagram of an instance
    # (level: its flat id, "d1" or "d1/blk"). A node drawn at a level is ``level/node`` here; an
    # instance's ports are its Input and Output blocks.

    def instance(self, node: str) -> Instance | None:
        """The instance flat id ``node`` is, or None when it is a block (or not here)."""
        return self.hierarchy.instances.get(node)

    @staticmethod
    def flat_id(level: str, node: str) -> str:
        """The flat id of ``node`` drawn at ``level``."""
        return f"{level}/{node}" if level else node

    def flat_wire(self, level: str, edge: Edge) -> Edge:
        """The flat wire a wire drawn at ``level`` became."""
        found = self.hierarchy.wires.get((level, edge))
        if found is not None or not level:
            return found or edge
        return Edge(f"{level}/{edge.src}", edge.src_port, f"{level}/{edge.dst}", edge.dst_port)

    def drawn_wires(self, level: str, edges) -> dict:
        """{drawn wire: flat wire} for ``edges`` drawn at ``level``."""
        return {e: self.flat_wire(level, e) for e in edges}

    def _port_node(self, node: str, port: str | None) -> tuple[str, str | None]:
        """An instance's output port as its Output block's output; a block's as itself."""
        inst = self.hierarchy.instances.get(node) if self.hierarchy.instances else None
        if inst is None:
            return node, port
        if port is None:
            port = next(iter(inst.outputs), None)
        flat = inst.outputs.get(port)
        return (flat, "output") if flat is not None else (node, port)

    def step(self, node: str) -> Step | None:
        """The compiled step of ``node``, or None when the node did not compile (or is not here)."""
        i = self._index.get(node)
        return None if i is None else self._step_at[i]

    def _slot_index(self, node: str, port) -> int | None:
        """``port_slots.get((node, port))``, from the block numbers (or the dict, once someone
        made it: one look-up where the numbers take three on a big page)."""
        if self._port_slots is not None:
            return self._port_slots.get((node, port))
        i = self._index.get(node)
        if i is None:
            return None
        slots = self.slots
        for idx in self._outs_at[i] or ():
            if slots[idx].port == port:
                return idx
        return None

    def spec_of(self, node: str) -> BlockSpec | None:
        """The block spec ``node`` compiled with, or None when it did not compile."""
        step = self.step(node)
        return None if step is None else step.spec

    def slot(self, index: int) -> Slot:
        return self.slots[index]

    def port_type(self, node: str, port: str) -> TensorType | None:
        """The inferred type of ``node``'s output ``port``, or None when it was not inferred
        (``node`` may be an instance: the type of its output ``port``)."""
        index = self._slot_index(*self._port_node(node, port))
        return None if index is None else self.slots[index].type

    def wire_type(self, edge: Edge) -> TensorType | None:
        """The inferred type a wire carries, or None when it was not inferred (a wire drawn on
        the page to or from an instance: the type of the flat wire it became)."""
        found = self.edge_types.get(edge)
        if found is None and self.hierarchy.wires:
            flat = self.hierarchy.wires.get(("", edge))
            return None if flat is None else self.edge_types.get(flat)
        return found

    def typed_wires(self):
        """The wires whose type was inferred, in a stable order."""
        return self.edge_types.keys()

    def typed_ports(self):
        """The ``(node, output port)`` pairs whose type was inferred."""
        return self.port_slots.keys()

    def output_ports(self, node: str) -> list[str]:
        """The names of ``node``'s compiled output slots, in order ([] when it did not compile;
        an instance's output ports when ``node`` is one)."""
        inst = self.hierarchy.instances.get(node) if self.hierarchy.instances else None
        if inst is not None:
            return [p for p, flat in inst.outputs.items() if self.step(flat) is not None]
        step = self.step(node)
        return [] if step is None else [self.slots[o].port for o in step.outputs]

    def target_slot(self, target=None) -> Slot:
        """The slot a gradient or training target names (see ``resolve_target``; None: the loss)."""
        return self.slots[self.resolve_target(target)]

    def target_text(self, target=None) -> str:
        """The slot a target names as ``"node:port"`` text, its port always spelled out (None:
        the loss); ProjectError when it names no output."""
        slot = self.target_slot(target)
        return port_text(slot.node, slot.port)

    @property
    def reads_datasets(self) -> bool:
        """True when a step reads a dataset (so each run sees a batch, not fixed data)."""
        return any(s.spec.is_dataset for s in self.steps)

    def output_type(self, node: str, port: str | None = None) -> TensorType:
        return self.slots[self.slot_of(node, port)].type

    def slot_of(self, node: str, port: str | None = None) -> int:
        """The slot of ``node``'s output ``port`` (its first output when port is None; an
        instance's output port when ``node`` is one)."""
        node, port = self._port_node(node, port)
        step = self.step(node)
        if step is None:
            raise ProjectError(f"page '{self.page_name}' has no compiled node '{node}'")
        if port is None:
            if not step.outputs:
                raise ProjectError(f"{self.full_name(node)} has no outputs")
            return step.outputs[0]
        idx = self._slot_index(node, port)
        if idx is None:
            names = ", ".join(o.name for o in step.spec.outputs)
            raise ProjectError(f"{self.full_name(node)} ({step.spec.name}) has no output '{port}' (outputs: {names})")
        return idx

    def resolve_target(self, target) -> int:
        """A slot from ``"node"``, ``"node:port"``, ``(node, port)`` or None (the page's loss)."""
        if isinstance(target, str):
            hit = self._targets.get(target)
            if hit is None:
                hit = self._targets[target] = self.slot_of(*split_port_text(target))
            return hit
        if target is None:
            if self.loss is None:
                raise ProjectError(f"page '{self.page_name}' marks no loss; name a gradient target")
            return self.slot_of(*self.loss)
        return self.slot_of(*target)

    def gradient_paths(self, target=None, wrt=None) -> GradientPaths:
        """Which wires carry gradient from ``target`` back to the ``wrt`` nodes, and which are cut.

        ``wrt``: node ids to differentiate for; None means every node (all float values that can
        reach the target get a gradient, as the editor shows them). Computed once per question.
        """
        t = self.resolve_target(target)
        key = (t, None if wrt is None else frozenset(wrt))
        paths = self._paths.get(key)
        if paths is None:
            paths = self._paths[key] = GradientPaths(self, t, key[1])
        return paths

    def cache(self, kind: str) -> dict:
        """A dict that lives as long as this Program, for answers another layer derives from it
        once and reuses (run/ keeps its generated run plans here, under "plans")."""
        found = self._caches.get(kind)
        if found is None:
            found = self._caches[kind] = {}
        return found

