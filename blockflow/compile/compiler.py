"""The compiler: turns one page of a Project into a frozen Program, or diagnostics saying why not.

It validates blocks, attrs and wires, infers every edge's shape and dtype, orders the steps
deterministically (networkx) and answers gradient-reachability questions. It must not import
PySide6 or the block library (blocks come from a Registry).
"""
from __future__ import annotations

import gc
from dataclasses import dataclass
from pathlib import Path
import networkx as nx
import numpy as np

from blockflow.datafiles import DataFileError, DataFiles
from blockflow.errors import CompileError, ProjectError
from blockflow.project import Edge, Page, Project, split_port
from blockflow.registry import Registry, default_registry
from blockflow.spec import MAX_TENSOR_BYTES, SCOPE_PORT, BlockSpec, ShapeError, TensorType, fit_dtype, shape_text
from blockflow.variables import VariableValues

__all__ = ["Diagnostic", "Program", "Step", "Slot", "GradientPaths", "compile_project", "compile_page"]


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


@dataclass(frozen=True, eq=False)
class Slot:
    """A value in a run: an output port of a node, or an inline constant of an input."""

    index: int
    node: str
    port: str
    type: TensorType
    const: bool = False  # an inline constant or default of an unwired input
    state: bool = False  # a block's slot state kept with a Variable (node: the Variable, port: key)


@dataclass(frozen=True, eq=False)
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


class Program:
    """A compiled page: a flat, deterministic schedule of steps over numbered slots.

    ``ok`` is False when there are error diagnostics; such a program can still be inspected
    (types of whatever compiled) but not run.
    """

    def __init__(self, page: Page, steps, slots, diagnostics, graph, edge_types, port_slots,
                 variable_values, feeds, slot_values=None):
        self.page_name = page.name
        self.scope = page.scope
        self.loss = page.loss_target()
        self.steps: tuple[Step, ...] = tuple(steps)
        self.slots: tuple[Slot, ...] = tuple(slots)
        self.diagnostics: tuple[Diagnostic, ...] = tuple(diagnostics)
        #: node-level dependency graph (one arc per pair of wired nodes)
        self.graph: nx.DiGraph = graph
        self.edge_types: dict[Edge, TensorType] = edge_types
        self.port_slots: dict[tuple[str, str], int] = port_slots
        #: the live state of a run sequence: Variable values by node (a Variable without a stored
        #: value gets its first value when first read), and blocks' slot state (optimizer
        #: moments...) by (Variable node, key); runs that update state change them
        self.variable_values: VariableValues = variable_values
        self.slot_values: dict[tuple[str, str], np.ndarray] = slot_values or {}
        self.feeds: dict[str, np.ndarray] = feeds
        self.step_of: dict[str, Step] = {s.node: s for s in self.steps}
        #: the Variables optimizers may change (what training differentiates for by default)
        self.trainable = frozenset(s.node for s in self.steps
                                   if s.role == "variable" and s.attrs.get("trainable", True))
        self._ok = not any(d.severity == "error" for d in self.diagnostics)
        self._plans: dict = {}
        self._targets: dict[str, int] = {}
        self._paths: dict = {}
        #: the project's data files (dataset blocks read them; None: the project has no folder)
        self.files: DataFiles | None = None
        #: Variables whose value is stored in the project (the others start from their initializer)
        self.stored_variables: frozenset = frozenset()

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

    def step(self, node: str) -> Step | None:
        """The compiled step of ``node``, or None when the node did not compile (or is not here)."""
        return self.step_of.get(node)

    def spec_of(self, node: str) -> BlockSpec | None:
        """The block spec ``node`` compiled with, or None when it did not compile."""
        step = self.step_of.get(node)
        return None if step is None else step.spec

    def slot(self, index: int) -> Slot:
        return self.slots[index]

    def port_type(self, node: str, port: str) -> TensorType | None:
        """The inferred type of ``node``'s output ``port``, or None when it was not inferred."""
        index = self.port_slots.get((node, port))
        return None if index is None else self.slots[index].type

    def wire_type(self, edge: Edge) -> TensorType | None:
        """The inferred type a wire carries, or None when it was not inferred."""
        return self.edge_types.get(edge)

    def typed_wires(self):
        """The wires whose type was inferred, in a stable order."""
        return self.edge_types.keys()

    def typed_ports(self):
        """The ``(node, output port)`` pairs whose type was inferred."""
        return self.port_slots.keys()

    def output_ports(self, node: str) -> list[str]:
        """The names of ``node``'s compiled output slots, in order ([] when it did not compile)."""
        step = self.step_of.get(node)
        return [] if step is None else [self.slots[o].port for o in step.outputs]

    def target_slot(self, target=None) -> Slot:
        """The slot a gradient or training target names (see ``resolve_target``; None: the loss)."""
        return self.slots[self.resolve_target(target)]

    @property
    def reads_datasets(self) -> bool:
        """True when a step reads a dataset (so each run sees a batch, not fixed data)."""
        return any(s.spec.is_dataset for s in self.steps)

    def output_type(self, node: str, port: str | None = None) -> TensorType:
        return self.slots[self.slot_of(node, port)].type

    def slot_of(self, node: str, port: str | None = None) -> int:
        """The slot of ``node``'s output ``port`` (its first output when port is None)."""
        step = self.step_of.get(node)
        if step is None:
            raise ProjectError(f"page '{self.page_name}' has no compiled node '{node}'")
        if port is None:
            if not step.outputs:
                raise ProjectError(f"{self.full_name(node)} has no outputs")
            return step.outputs[0]
        idx = self.port_slots.get((node, port))
        if idx is None:
            names = ", ".join(o.name for o in step.spec.outputs)
            raise ProjectError(f"{self.full_name(node)} ({step.spec.name}) has no output '{port}' (outputs: {names})")
        return idx

    def resolve_target(self, target) -> int:
        """A slot from ``"node"``, ``"node:port"``, ``(node, port)`` or None (the page's loss)."""
        if isinstance(target, str):
            hit = self._targets.get(target)
            if hit is None:
                node, _, port = target.partition(":")
                hit = self._targets[target] = self.slot_of(node, port or None)
            return hit
        if target is None:
            if self.loss is None:
                raise ProjectError(f"page '{self.page_name}' marks no loss; name a gradient target")
            return self.slot_of(*self.loss)
        if isinstance(target, str):
            node, _, port = target.partition(":")
            return self.slot_of(node, port or None)
        return self.slot_of(*target)

    def gradient_paths(self, target=None, wrt=None) -> "GradientPaths":
        """Which wires carry gradient from ``target`` back to the ``wrt`` nodes, and which are cut.

        ``wrt``: node ids to differentiate for; None means every node (all float values that can
        reach the target get a gradient, as the editor shows them).
        """
        t = self.resolve_target(target)
        key = (t, None if wrt is None else frozenset(wrt))
        paths = self._paths.get(key)
        if paths is None:
            paths = self._paths[key] = GradientPaths(self, t, key[1])
        return paths


class GradientPaths:
    """Gradient reachability for one target (computed from the schedule, in one reverse sweep).

    - ``flows``: edges along which gradient of the target flows to a wanted node;
    - ``cut``: edges that would carry gradient but for the blocks named (StopGradient, a
      non-differentiable block, an integer wire), as ``{edge: (node, ...)}``;
    - ``unreached``: edges that do not lead to the target at all;
    - ``slots``: slots whose gradient is computed; ``sources``: Variables and Placeholders that
      receive gradient; ``cut_sources``: those that would, but for the cutters named.
    """

    def __init__(self, program: Program, target, wrt, wrt_slots=None, upto: int | None = None):
        """``target``: a slot, or a tuple of slots (the ys of a Gradients block); ``wrt``: node ids
        (None: every node, unless ``wrt_slots`` names the slots wanted); ``upto``: only the steps
        before this step index take part (a Gradients block differentiates what precedes it)."""
        self.program = program
        targets = target if isinstance(target, tuple) else (target,)
        self.target = targets[0]
        self.targets = targets
        slots = program.slots
        n = len(slots)
        strict = bytearray(n)
        cutters: list = [None] * n  # None: not even relaxed-reachable; else frozenset of cutters
        for t in targets:
            strict[t] = 1
            cutters[t] = frozenset()
        edge_strict: dict[Edge, bool] = {}
        edge_cut: dict[Edge, frozenset] = {}
        passes: dict[tuple[int, int], bool] = {}
        prevent_hits: list[Step] = []
        steps = program.steps if upto is None else program.steps[:upto]
        for step in reversed(steps):
            spec = step.spec
            out_strict = False
            out_cut = None
            for k, o in enumerate(step.outputs):
                if cutters[o] is None:
                    continue
                decl_out = spec.outputs[step.out_decl[k]]
                differentiable = decl_out.differentiable and slots[o].type.is_float
                if strict[o] and differentiable and spec.gradient == "vjp":
                    out_strict = True
                if differentiable:
                    extra = frozenset()
                elif not slots[o].type.is_float:
                    extra = frozenset({(step.node, f"its output '{slots[o].port}' is {slots[o].type.dtype.name}, "
                                                   f"which carries no gradient")})
                else:
                    extra = frozenset({(step.node, f"its output '{slots[o].port}' is not differentiable")})
                c = cutters[o] | extra
                out_cut = c if out_cut is None else out_cut | c
            if out_cut is None:
                continue
            if spec.gradient == "prevent" and any(strict[o] for o in step.outputs):
                prevent_hits.append(step)
            for j, (pos, _, edge) in enumerate(step.in_edges):
                src = _flat_input(step, j)
                if src is None:
                    continue
                decl = spec.inputs[pos]
                ok = spec.gradient == "vjp" and decl.differentiable and slots[src].type.is_float
                is_strict = out_strict and ok
                c = out_cut if ok else out_cut | {(step.node, _cut_reason(spec, decl, slots[src]))}
                passes[(step.index, j)] = is_strict
                if edge is not None:
                    edge_strict[edge] = edge_strict.get(edge, False) or is_strict
                    edge_cut[edge] = c
                if is_strict:
                    strict[src] = 1
                cutters[src] = c if cutters[src] is None else cutters[src] | c
        # Forward sweep: which slots depend, through differentiable inputs, on a wanted node.
        live = bytearray(n)
        for i in wrt_slots or ():
            live[i] = 1
        everything = wrt is None and wrt_slots is None
        for step in steps:
            if everything or (wrt is not None and step.node in wrt):
                for o in step.outputs:
                    live[o] = 1
                continue
            if any(passes.get((step.index, j)) and live[_flat_input(step, j)]
                   for j in range(len(step.in_edges))):
                for o in step.outputs:
                    live[o] = 1
        self.wrt = wrt
        self.live = live
        #: PreventGradient blocks the gradient would have to pass through (an error to run)
        self.prevented = tuple(
            st.node for st in prevent_hits
            if any(live[_flat_input(st, j)] and slots[_flat_input(st, j)].type.is_float
                   for j in range(len(st.in_edges)) if _flat_input(st, j) is not None))
        self.strict = strict
        #: (step index, flat input index) -> True when a cotangent must be computed for it
        self.needs = {k: v and bool(live[_flat_input(program.steps[k[0]], k[1])])
                      for k, v in passes.items()}
        self.slots = frozenset(i for i in range(n) if strict[i] and live[i])
        self.flows = frozenset(e for e, s in edge_strict.items() if s and live[program.port_slots[(e.src, e.src_port)]])
        #: why each cut wire is cut: {edge: ((node, reason), ...)}
        self.cut_reasons = {e: tuple(sorted(edge_cut[e])) for e, s in edge_strict.items() if not s}
        self.cut = {e: tuple(sorted({node for node, _ in why})) for e, why in self.cut_reasons.items()}
        known = set(edge_strict)
        self.unreached = frozenset(e for e in program.edge_types if e not in known)
        self.sources = tuple(s.node for s in program.steps
                             if s.role in ("variable", "placeholder") and strict[s.outputs[0]])
        self.cut_sources = {s.node: tuple(sorted({n for n, _ in cutters[s.outputs[0]]})) for s in program.steps
                            if s.role in ("variable", "placeholder") and not strict[s.outputs[0]]
                            and cutters[s.outputs[0]] is not None}

    def reason(self, edge: Edge) -> str:
        """Why gradient does or does not flow along ``edge``, in words."""
        if edge in self.flows:
            return "carries gradient to the target"
        if edge in self.cut:
            return "gradient is cut by " + "; ".join(f"{node} ({why})" for node, why in self.cut_reasons[edge])
        if edge in self.unreached:
            return "does not lead to the target"
        return "leads to the target but to no node gradients are wanted for"


_CLASSES = ("float", "int", "bool", "number", "any")


def _cut_reason(spec: BlockSpec, decl, src: Slot) -> str:
    """Why no gradient passes a block into one of its inputs, in words."""
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
    if not src.type.is_float:
        return f"input '{decl.name}' is {src.type.dtype.name}, which carries no gradient"
    return f"input '{decl.name}' takes no gradient"


# MAX_TENSOR_BYTES (from the block API, which checks intermediates against it too) bounds the
# inferred size of every output: a Variable's first value, a Fill, a dataset are refused at
# compile time, before anything is allocated.
def _too_big(spec, outs):
    """(port, message) for the first output whose known size exceeds MAX_TENSOR_BYTES."""
    for decl, t in zip(spec.outputs, outs):
        for i, tt in enumerate(t if decl.variadic else (t,)):
            n = tt.size
            if n is None:
                continue
            nbytes = n * tt.dtype.itemsize
            if nbytes > MAX_TENSOR_BYTES:
                port = decl.port(i) if decl.variadic else decl.name
                return port, (f"output '{port}' would be {tt} ({nbytes / 1024 ** 3:,.1f} GiB); the limit "
                              f"for one tensor is {MAX_TENSOR_BYTES / 1024 ** 3:.0f} GiB")
    return None


def _read_only(a):
    """A view of a project's array that a run cannot write through (results share memory)."""
    if isinstance(a, np.ndarray) and a.flags.writeable:
        a = a.view()
        a.flags.writeable = False
    return a


def _flat_input(step: Step, j: int):
    pos, idx, _ = step.in_edges[j]
    src = step.inputs[pos]
    return src[idx] if idx is not None else src


# --------------------------------------------------------------------------------------------


def compile_project(project: Project, page: str | None = None, registry: Registry | None = None) -> Program:
    """Compile one page (the first when ``page`` is None) of ``project``; its dataset blocks read
    files from the project's folder (``project.base_dir``, set when it was loaded or saved)."""
    return compile_page(project.page(page), registry, files=project_files(project))


def project_files(project: Project) -> DataFiles | None:
    """The project's data files (None for a project that lives in no folder yet)."""
    base = getattr(project, "base_dir", None)
    if base is None:
        return None
    files = getattr(project, "_files", None)
    if files is None or files.base_dir != Path(base).resolve():
        files = DataFiles(base)
        try:
            project._files = files
        except AttributeError:
            pass
    return files


def compile_page(page: Page, registry: Registry | None = None, files: DataFiles | None = None) -> Program:
    """Compile a page; never raises for a bad diagram: problems land in ``diagnostics``.
    ``files``: where dataset blocks read their files (None: they cannot)."""
    # Compiling makes many small objects and frees none: the cyclic collector would rescan the
    # growing heap again and again (super-linear time on big pages), so it waits until the end.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _Compiler(page, registry or default_registry(), files).run()
    finally:
        if enabled:
            gc.enable()


class _Compiler:
    def __init__(self, page: Page, registry: Registry, files: DataFiles | None = None):
        self.page = page
        self.registry = registry
        self.files = files
        self.stored: set[str] = set()   # Variables whose value is stored in the project
        self.diags: list[Diagnostic] = []
        self.failed: set[str] = set()

    def error(self, node, port, message, fail=True):
        """Record an error; ``fail`` also stops the node from compiling (and what depends on it)."""
        self.diags.append(Diagnostic("error", self.page.name, node, port, message))
        if node is not None and fail:
            self.failed.add(node)

    def warn(self, node, port, message):
        self.diags.append(Diagnostic("warning", self.page.name, node, port, message))

    def run(self) -> Program:
        page = self.page
        specs: dict[str, BlockSpec] = {}
        attrs: dict[str, dict] = {}
        for nid, node in page.nodes.items():
            spec = self.registry.get(node.block)
            if spec is None:
                alias = self.registry.resolve_alias(node.block)
                hint = f" (did you mean '{alias}'?)" if alias else ""
                self.error(nid, None, f"unknown block '{node.block}'{hint}; it is kept as a placeholder")
                continue
            specs[nid] = spec
            values, problems = spec.validate_attrs(node.attrs)
            for k, v in values.items():
                if isinstance(v, np.ndarray):
                    values[k] = _read_only(v)
            for attr, problem in problems:
                self.error(nid, None, problem)
            attrs[nid] = values
            for port in node.inputs:
                name, idx = split_port(port)
                decl = spec.input_map.get(name)
                if decl is None or (idx is not None) != decl.variadic:
                    self.error(nid, port, f"{spec.name} has no input '{port}' for the inline value")

        # Wires: check both ends, then build the graph.
        fed: dict[tuple[str, str], Edge] = {}
        good_edges: list[Edge] = []
        for e in page.edges:
            ok = True
            for nid, port, outgoing in ((e.src, e.src_port, True), (e.dst, e.dst_port, False)):
                if nid not in page.nodes:
                    self.error(None, None, f"wire {e} names a node '{nid}' that is not on the page")
                    ok = False
                    continue
                if port == SCOPE_PORT:
                    self.error(nid, port, "the scope port is automatic and cannot be wired", fail=False)
                    ok = False
                    continue
                spec = specs.get(nid)
                if spec is None:
                    continue  # unknown block: already reported
                if outgoing:
                    base, idx = split_port(port)
                    decl = spec.output_map.get(base)
                    if decl is None or (idx is not None) != decl.variadic:
                        names = ", ".join(o.port(0) if o.variadic else o.name for o in spec.outputs) or "none"
                        self.error(nid, port, f"wire {e} starts at '{port}', which is not an output of "
                                              f"{spec.name} (outputs: {names})", fail=False)
                        ok = False
                else:
                    name, idx = split_port(port)
                    decl = spec.input_map.get(name)
                    if decl is None or (idx is not None) != decl.variadic:
                        if port in spec.output_map:
                            msg = f"wire {e} ends at '{port}', which is an output, not an input"
                        else:
                            names = ", ".join(p.port(0) if p.variadic else p.name for p in spec.inputs) or "none"
                            msg = f"wire {e} ends at '{port}', which is not an input of {spec.name} (inputs: {names})"
                        self.error(nid, port, msg, fail=False)
                        ok = False
            if not ok:
                continue
            key = (e.dst, e.dst_port)
            if key in fed:
                self.error(e.dst, e.dst_port, f"input is fed by two wires: {fed[key]} and {e}", fail=False)
                continue
            if e.dst_port in page.nodes[e.dst].inputs:
                self.warn(e.dst, e.dst_port, "input is wired, so its inline value is ignored")
            fed[key] = e
            good_edges.append(e)
        # The ordering graph: one arc per pair of wired nodes (networkx sorts and names cycles).
        graph = nx.DiGraph()
        graph.add_nodes_from(page.nodes)
        # Sorted, so that the schedule depends on the wires, not on the order they are listed in.
        graph.add_edges_from(sorted((e.src, e.dst) for e in good_edges))

        order = self._order(graph)
        return self._infer(order, specs, attrs, fed, graph)

    def _order(self, graph) -> list[str]:
        try:
            return list(nx.topological_sort(graph))
        except nx.NetworkXUnfeasible:
            pass
        in_cycle: set[str] = set()
        for comp in nx.strongly_connected_components(graph):
            if len(comp) == 1:
                (only,) = comp
                if not graph.has_edge(only, only):
                    continue
            sub = graph.subgraph(comp)
            cycle = [u for u, _ in nx.find_cycle(sub)]
            if len(cycle) > 8:
                names = " -> ".join(cycle[:6]) + f" -> ... ({len(cycle)} blocks) -> {cycle[0]}"
            else:
                names = " -> ".join(cycle + cycle[:1])
            for nid in (n for n in self.page.nodes if n in comp):
                self.error(nid, None, f"is part of a cycle: {names}")
            in_cycle |= comp
        acyclic = graph.subgraph([n for n in graph if n not in in_cycle])
        # Cycle members come last: they cannot be typed, but their inputs are still checked.
        return list(nx.topological_sort(acyclic)) + [n for n in self.page.nodes if n in in_cycle]

    def _infer(self, order, specs, attrs, fed, graph) -> Program:
        page = self.page
        slots: list[Slot] = []
        port_slots: dict[tuple[str, str], int] = {}
        steps: list[Step] = []
        edge_types: dict[Edge, TensorType] = {}
        failed = self.failed
        step_by_node: dict[str, Step] = {}
        slot_values: dict[tuple[str, str], np.ndarray] = {}
        updaters: dict[tuple, str] = {}
        fed_ports: dict[str, list[str]] = {}
        for dst, port in fed:
            fed_ports.setdefault(dst, []).append(port)
        variable_values = VariableValues()
        feeds: dict[str, np.ndarray] = {}
        for nid in order:
            spec = specs.get(nid)
            if spec is None:
                failed.add(nid)
                continue
            node = page.nodes[nid]
            if nid in failed or any(fed[(nid, port)].src in failed for port in fed_ports.get(nid, ())):
                # Its own problem, or one upstream, is reported already; what is wrong with its
                # inputs is still worth saying now, so that every problem shows at once.
                failed.add(nid)
                self._check_inputs_present(nid, node, spec, fed_ports.get(nid, ()))
                continue
            args, inputs, static, in_edges, refs = [], [], [], [], []
            bad = False
            var_node = None
            if spec.refs:
                first = spec.refs[0]
                e = fed.get((nid, first))
                src = step_by_node.get(e.src) if e is not None else None
                if src is None or src.role != "variable":
                    self.error(nid, first, f"input '{first}' must be wired straight from a Variable: it is "
                                           f"the state {spec.name} updates")
                    continue
                var_node = e.src
            for pos, decl in enumerate(spec.inputs):
                if decl.ref:
                    r = self._ref_input(nid, node, spec, decl, fed, slots, port_slots, step_by_node,
                                        var_node, slot_values)
                    if r is None:
                        bad = True
                        continue
                    slot, target = r
                    refs.append((decl.name, target))
                    args.append(slots[slot].type)
                    static.append(None)
                    inputs.append(slot)
                    in_edges.append((pos, None, fed.get((nid, decl.name))))
                    continue
                if decl.variadic:
                    indices = [i for base, i in map(split_port, fed_ports.get(nid, ())) if base == decl.name]
                    inline_idx = sorted(split_port(p)[1] for p in node.inputs if split_port(p)[0] == decl.name)
                    present = sorted(set(indices) | set(inline_idx))
                    if present != list(range(len(present))):
                        missing = next(i for i in range(len(present) + 1) if i not in present)
                        self.error(nid, decl.port(missing), f"{decl.port(missing)} is empty; variadic inputs "
                                                            f"fill up in order from {decl.port(0)}")
                        bad = True
                        continue
                    if len(present) < decl.min_count:
                        self.error(nid, decl.port(len(present)),
                                   f"'{decl.name}' needs at least {decl.min_count} inputs, has {len(present)}")
                        bad = True
                        continue
                    group = []
                    for i in present:
                        r = self._input_slot(nid, node, decl, decl.port(i), fed, slots, port_slots)
                        if r is None:
                            bad = True
                            continue
                        group.append(r)
                        in_edges.append((pos, len(group) - 1, fed.get((nid, decl.port(i)))))
                    inputs.append(tuple(s for s, _ in group))
                    args.append([t for _, t in group])
                    static.append(None)
                    continue
                r = self._input_slot(nid, node, decl, decl.name, fed, slots, port_slots)
                if r is None:
                    bad = True
                    continue
                slot, t = r
                if decl.static:
                    value = None if t is None else t.value
                    if t is not None and value is None:
                        self.error(nid, decl.name, f"input '{decl.name}' must be known before running: give it "
                                                   f"an inline value or wire a Const into it")
                        bad = True
                        continue
                    args.append(value)
                    static.append(value)
                else:
                    args.append(t)
                    static.append(None)
                inputs.append(slot)
                if slot is not None:
                    in_edges.append((pos, None, fed.get((nid, decl.name))))
            if bad:
                continue
            if not self._check_dtypes(nid, spec, args, inputs, slots):
                continue
            try:
                if spec.infer_context:
                    result = spec.infer(*args, **attrs[nid], files=self.files)
                else:
                    result = spec.infer(*args, **attrs[nid])
            except (ShapeError, DataFileError) as exc:
                self.error(nid, None, str(exc))
                continue
            except Exception as exc:  # a bug in the block's infer: report it on the node
                self.error(nid, None, f"{spec.name}.infer failed: {type(exc).__name__}: {exc}")
                continue
            outs = result if isinstance(result, tuple) and len(spec.outputs) != 1 else (result,)
            problem = self._check_infer_result(spec, outs, attrs[nid], args)
            if problem:
                self.error(nid, None, f"{spec.name}.infer returned {result!r}: {problem}")
                continue
            too_big = _too_big(spec, outs)
            if too_big:
                self.error(nid, too_big[0], too_big[1])
                continue
            if spec.role == "variable":
                mismatch = self._declared_shape_mismatch(node, spec, attrs[nid], outs[0])
                if mismatch:
                    self.error(nid, None, mismatch)
                    continue
            out_slots, out_struct, out_decl = [], [], []
            for k, (decl, t) in enumerate(zip(spec.outputs, outs)):
                group = []
                for i, tt in enumerate(t if decl.variadic else (t,)):
                    port = decl.port(i) if decl.variadic else decl.name
                    idx = len(slots)
                    slots.append(Slot(idx, nid, port, tt))
                    port_slots[(nid, port)] = idx
                    out_slots.append(idx)
                    out_decl.append(k)
                    group.append(idx)
                out_struct.append(tuple(group) if decl.variadic else group[0])
            if spec.role == "variable":
                value = node.state.get("value")
                if value is None:   # drawn when a run first needs it, never while compiling
                    variable_values.add_pending(nid, spec, attrs[nid], outs[0], f"{page.scope}/{nid}")
                elif value.shape != outs[0].shape or value.dtype != outs[0].dtype:
                    self.error(nid, None, f"stored value is {TensorType.of(value)} but the Variable is "
                                          f"declared {outs[0]}")
                    continue
                else:
                    self.stored.add(nid)
                    variable_values[nid] = _read_only(value)
            elif spec.role == "placeholder" and nid in page.feeds:
                feeds[nid] = _read_only(np.asarray(page.feeds[nid]))
            step = Step(len(steps), nid, spec, attrs[nid], tuple(inputs), tuple(static),
                        tuple(out_slots), tuple(in_edges), tuple(out_struct), tuple(out_decl), tuple(refs))
            steps.append(step)
            step_by_node[nid] = step
            for _, target in refs:
                if target in updaters:
                    self.warn(nid, None, f"updates {target[1]}'s {target[0]} as {updaters[target]} does; "
                                         f"the later one in the schedule wins")
                updaters[target] = nid
        for (dst, dst_port), e in fed.items():
            idx = port_slots.get((e.src, e.src_port))
            if idx is not None and dst not in failed:
                edge_types[e] = slots[idx].type
        for nid in page.feeds:
            spec = specs.get(nid)
            if nid in page.nodes and spec is not None and spec.role != "placeholder":
                self.warn(nid, None, f"has a saved feed but is a {spec.name}, not a Placeholder")
        if page.loss:
            lnode, _, lport = page.loss.partition(":")
            if lnode not in page.nodes:
                self.error(None, None, f"the page's loss names a node '{lnode}' that is not on the page")
            elif lnode not in failed and lport and (lnode, lport) not in port_slots:
                self.error(lnode, lport, f"the page's loss names an output '{lport}' that does not exist")
        self.diags.sort(key=lambda d: (d.severity != "error", d.node or "", d.port or ""))
        program = Program(page, steps, slots, self.diags, graph, edge_types, port_slots, variable_values,
                          feeds, slot_values)
        program.files = self.files
        program.stored_variables = frozenset(self.stored)
        return program

    def _ref_input(self, nid, node, spec, decl, fed, slots, port_slots, step_by_node, var_node, slot_values):
        """(slot, state target) for a ref input: a wired Variable, or a slot kept with ``var_node``."""
        e = fed.get((nid, decl.name))
        if e is not None:
            src = step_by_node.get(e.src)
            if src is None or src.role != "variable":
                self.error(nid, decl.name, f"input '{decl.name}' must be wired straight from a Variable")
                return None
            return port_slots[(e.src, e.src_port)], ("value", e.src)
        if decl.slot is None:
            self.error(nid, decl.name, f"input '{decl.name}' must be wired from a Variable")
            return None
        var_type = slots[step_by_node[var_node].outputs[0]].type
        shape = var_type.shape if decl.slot == "like" else ()
        key = f"{nid}.{decl.name}"
        stored = self.page.nodes[var_node].state.get(key)
        if stored is not None:
            if stored.shape != shape or stored.dtype != var_type.dtype:
                self.error(nid, decl.name, f"the saved state {var_node}/{key} is {TensorType.of(stored)}, "
                                           f"expected {TensorType(shape, var_type.dtype)}")
                return None
            value = stored
        else:
            init = decl.slot_init
            if isinstance(init, str):
                init = self._known_value(nid, node, spec, init, fed, slots, port_slots)
                if init is None:
                    self.error(nid, init, f"the first value of the '{decl.name}' state comes from input "
                                          f"'{decl.slot_init}', which must then be a constant")
                    return None
            value = np.full(shape, init, dtype=var_type.dtype)
        slot_values[(var_node, key)] = _read_only(value)
        idx = len(slots)
        slots.append(Slot(idx, var_node, key, TensorType(shape, var_type.dtype), state=True))
        return idx, (key, var_node)

    def _known_value(self, nid, node, spec, name, fed, slots, port_slots):
        """The compile-time value of an input (inline, a wired Const, or its default), or None."""
        e = fed.get((nid, name))
        if e is not None:
            idx = port_slots.get((e.src, e.src_port))
            return None if idx is None else slots[idx].type.value
        if name in node.inputs:
            return node.inputs[name]
        return spec.input_map[name].default

    def _check_inputs_present(self, nid, node, spec, fed_ports) -> None:
        """Report required inputs with neither a wire nor an inline value (no types needed)."""
        given = {split_port(p)[0] for p in fed_ports} | {split_port(p)[0] for p in node.inputs}
        for decl in spec.inputs:
            if decl.optional or decl.name in given or (decl.variadic and decl.min_count == 0):
                continue
            if decl.ref and decl.slot is not None:
                continue
            port = decl.port(0) if decl.variadic else decl.name
            self.error(nid, port, f"input '{port}' is not connected and has no inline value")

    @staticmethod
    def _declared_shape_mismatch(node, spec, attrs, out) -> str | None:
        """A Variable whose ``shape`` attr is given must have that shape, whatever its initial
        value says (its initializer would otherwise decide the shape silently)."""
        if "shape" not in node.attrs or "shape" not in spec.attr_map:
            return None
        declared = attrs["shape"]
        if len(declared) == len(out.shape) and all(d is None or d == n for d, n in zip(declared, out.shape)):
            return None
        return f"its initial value is {out} but its shape attr says {shape_text(declared)}"

    @staticmethod
    def _check_infer_result(spec, outs, attrs, args) -> str | None:
        if len(outs) != len(spec.outputs):
            return f"expected {len(spec.outputs)} output type(s)"
        for decl, t in zip(spec.outputs, outs):
            if not decl.variadic:
                if not isinstance(t, TensorType):
                    return f"output '{decl.name}' is not a TensorType"
                continue
            if decl.count in attrs:
                want = attrs[decl.count]
            else:
                pos = next(i for i, p in enumerate(spec.inputs) if p.name == decl.count)
                want = len(args[pos])
            if not isinstance(t, list) or len(t) != want or not all(isinstance(x, TensorType) for x in t):
                return f"output list '{decl.name}' must be a list of {want} TensorType(s)"
        return None

    def _input_slot(self, nid, node, decl, port, fed, slots, port_slots):
        """(slot index or None, TensorType or None) for one input port; None when it cannot be fed."""
        e = fed.get((nid, port))
        if e is not None:
            idx = port_slots.get((e.src, e.src_port))
            if idx is None:
                n = sum(1 for (node_id, _) in port_slots if node_id == e.src)
                self.error(nid, port, f"wire {e} starts at '{e.src_port}', which {e.src} does not have "
                                      f"(it has {n} output{'s' if n != 1 else ''})")
                return None
            return idx, slots[idx].type
        if port in node.inputs:
            value = _read_only(np.asarray(node.inputs[port]))
            t = TensorType.of(value)
        elif decl.optional:
            if decl.default is None:
                return None, None
            t = TensorType.of(np.asarray(decl.default))
        else:
            self.error(nid, port, f"input '{port}' is not connected and has no inline value")
            return None
        idx = len(slots)
        slots.append(Slot(idx, nid, port, t, const=True))
        return idx, t

    def _check_dtypes(self, nid, spec, args, inputs, slots) -> bool:
        """Dtype classes and type variables; inline constants adopt their variable's dtype."""
        resolved: dict[str, tuple[str, np.dtype]] = {}
        class_hint: dict[str, np.dtype] = {}
        ok = True
        flat = []
        for pos, decl in enumerate(spec.inputs):
            if decl.variadic:
                for k, s in enumerate(inputs[pos]):
                    flat.append((decl, decl.port(k), s))
            elif inputs[pos] is not None:
                flat.append((decl, decl.name, inputs[pos]))
        # First pass: wired inputs fix each type variable.
        for decl, port, s in flat:
            slot = slots[s]
            if not decl.accepts(slot.type.dtype):
                if slot.const and decl.dtype in ("float", "number", "any"):
                    continue  # an inline constant is cast below
                self.error(nid, port, f"input '{port}' must be {decl.dtype}, got {slot.type.dtype.name}")
                ok = False
                continue
            if slot.const:
                continue
            if decl.dtype in _CLASSES:
                # Not binding, but an inline value next to a wired float32 should be float32 too.
                class_hint.setdefault(decl.dtype, slot.type.dtype)
                continue
            prev = resolved.get(decl.dtype)
            if prev is None:
                resolved[decl.dtype] = (port, slot.type.dtype)
            elif prev[1] != slot.type.dtype:
                self.error(nid, port, f"input '{port}' is {slot.type.dtype.name} but '{prev[0]}' is "
                                      f"{prev[1].name}; both must have the same dtype")
                ok = False
        if not ok:
            return False
        # A type variable fed only inline values takes the widest of their dtypes.
        for decl, port, s in flat:
            if slots[s].const and decl.dtype not in _CLASSES and decl.dtype not in resolved:
                dts = [slots[t].type.dtype for d, _, t in flat if d.dtype == decl.dtype]
                resolved[decl.dtype] = (port, np.result_type(*dts))
        # Second pass: cast inline constants to their variable's dtype, or to the dtype of a wired
        # input of the same class, or to float32 when a float is needed and nothing says which.
        for decl, port, s in flat:
            slot = slots[s]
            if not slot.const:
                continue
            want = resolved.get(decl.dtype, (None, None))[1] or class_hint.get(decl.dtype)
            if want is not None and not decl.accepts(want):
                want = None
            if want is None:
                if decl.accepts(slot.type.dtype):
                    continue
                want = np.dtype("float32") if decl.dtype in ("float", "number", "any") else None
                if want is None:
                    self.error(nid, port, f"inline value of '{port}' must be {decl.dtype}, "
                                          f"got {slot.type.dtype.name}")
                    ok = False
                    continue
            if want == slot.type.dtype:
                continue
            try:
                cast = fit_dtype(slot.type.value, want)
            except ValueError as exc:
                self.error(nid, port, f"inline value of '{port}' must be {want.name}: {exc}")
                ok = False
                continue
            new = Slot(s, slot.node, slot.port, TensorType(cast.shape, cast.dtype, cast), const=True)
            slots[s] = new
            self._replace_arg(spec, args, inputs, s, new.type)
        return ok

    @staticmethod
    def _replace_arg(spec, args, inputs, s, t):
        for pos, decl in enumerate(spec.inputs):
            if decl.variadic:
                if s in inputs[pos]:
                    args[pos][inputs[pos].index(s)] = t
            elif inputs[pos] == s:
                args[pos] = t.value if decl.static else t
