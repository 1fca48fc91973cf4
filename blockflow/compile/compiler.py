"""The compiler: turns one page of a Project into a frozen Program, or diagnostics saying why not.

The driver: it checks blocks, attrs and wires, orders the steps deterministically (by block
number, ordering.py; networkx only when a cycle must be found and named), has infer.py type
every node in that order, and checks what needs the types (saved feeds, the
loss). What it produces is in program.py; gradient reachability in gradpaths.py. It must not
import PySide6 or the block library (blocks come from a Registry).
"""
from __future__ import annotations

import gc
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from blockflow.compile.hierarchy import COMPOSITE_INPUT, COMPOSITE_OUTPUT, Hierarchy, ref_inside
from blockflow.composite import composite_name
from blockflow.compile.attr_values import attrs_key, read_only
from blockflow.compile.infer import Inference
from blockflow.compile.wires import Wires
from blockflow.compile.ordering import (LATE, MANY_CHILDREN, Dependencies, add_child, defer_child, insert_child,
                                        sort_deferred)
from blockflow.compile.program import Diagnostic, Program
from blockflow.datafiles import DataFiles
from blockflow.project import Edge, Page, Project, split_port
from blockflow.registry import Registry, default_registry
from blockflow.spec import SCOPE_PORT, BlockSpec

if TYPE_CHECKING:     # networkx is imported where a graph is built: it was a third of a
    import networkx as nx   # command's start-up and 19 MiB (docs/performance.md)

__all__ = ["compile_project", "compile_page", "project_files"]


def compile_project(project: Project, page: str | None = None, registry: Registry | None = None) -> Program:
    """Compile one page (the first when ``page`` is None) of ``project``; its dataset blocks read
    files from the project's folder (``project.base_dir``, set when it was loaded or saved)."""
    return compile_page(project.page(page), registry, files=project_files(project),
                        composites=project.composites)


def project_files(project: Project) -> DataFiles | None:
    """The project's data files (None for a project that lives in no folder yet)."""
    base = getattr(project, "base_dir", None)
    if base is None:
        return None
    files = project.data_files
    if files is None or files.base_dir != Path(base).resolve():
        files = project.data_files = DataFiles(base)
    return files


def compile_page(page: Page, registry: Registry | None = None, files: DataFiles | None = None,
                 composites: dict | None = None) -> Program:
    """Compile a page; never raises for a bad diagram: problems land in ``diagnostics``.
    ``files``: where dataset blocks read their files (None: they cannot); ``composites``: the
    project's composite blocks, which the page's instances are flattened from (flatten.py)."""
    # Compiling makes many small objects and frees none: the cyclic collector would rescan the
    # growing heap again and again (super-linear time on big pages), so it waits until the end.
    enabled = gc.isenabled()
    try:    # off inside the try: an exception right after it still turns it back on
        gc.disable()
        registry = registry or default_registry()
        try:   # most pages have no instance to flatten: _check_blocks finds out as it reads them
            program = _Compiler(page, registry, files, unflattened=True).run()
        except _NotFlat:
            flat, hierarchy = flatten(page, composites, registry)
            program = _Compiler(flat, registry, files, hierarchy).run()
        _promote_if_big()
        return program
    finally:
        if enabled:
            gc.enable()


#: Young objects (gc.get_count()[0]) past which a compile hands its objects to the oldest
#: generation (about 4,000 blocks; a small compile leaves them to the collector as they are).
PROMOTE_AT = 50_000


def _promote_if_big() -> None:
    """Move every tracked object to the oldest generation without a scan.

    With the collector off, each object of a new Program is still in generation 0 when the
    compile ends; the next allocations, whoever makes them (the editor's gradient paths right
    after), then pay for a scan of all of them in generation 0, again in generation 1 ten
    collections later, and a full collection after that, since they are new long-lived objects:
    three traversals of the whole program, 1.7 s of a 3.1 s gradient_paths at 100k blocks
    (measured with gc.callbacks, benchmarks/README.md). A Program lives until the next compile,
    so it goes where long-lived objects go; the next full collection, when the heap has grown
    by its usual quarter, sees it (and any cyclic garbage moved with it) once.
    ``gc.freeze`` then ``gc.unfreeze`` is that move; skipped when someone else froze objects,
    which an unfreeze would thaw."""
    if gc.get_count()[0] < PROMOTE_AT or gc.get_freeze_count():
        return
    gc.freeze()
    gc.unfreeze()


def flatten(page: Page, composites: dict | None, registry: Registry) -> tuple[Page, Hierarchy]:
    """flatten.py's ``flatten``, imported when a page first needs flattening: most do not, and
    the module (577 lines, a dataclass) was a part of every command's start-up."""
    from blockflow.compile.flatten import flatten as flatten_page

    return flatten_page(page, composites, registry)


class _NotFlat(Exception):
    """The page has an instance or a parameter reference: it must be flattened first."""


class _Compiler:
    """One compile of one page: collects the diagnostics and the nodes that failed."""

    def __init__(self, page: Page, registry: Registry, files: DataFiles | None = None,
                 hierarchy: Hierarchy | None = None, unflattened: bool = False):
        """``unflattened``: ``page`` was not given to flatten.py, which returns a page with no
        instance and no parameter or dimension reference as it is; _check_blocks raises _NotFlat
        on the first node that is one or has one (one pass over a big page's nodes, not two)."""
        self.unflattened = unflattened
        self.page = page
        self.registry = registry
        self.files = files
        self.hierarchy = hierarchy or Hierarchy()
        self.diags: list[Diagnostic] = []
        self.failed: set[str] = set()
        #: nodes whose attrs wait for a composite's dimensions (raw attrs, checked when typed)
        self.deferred: dict[str, dict] = {}

    def error(self, node, port, message, fail=True):
        """Record an error; ``fail`` also stops the node from compiling (and what depends on it)."""
        self.diags.append(Diagnostic("error", self.page.name, node, port, message))
        if node is not None and fail:
            self.failed.add(node)

    def warn(self, node, port, message):
        self.diags.append(Diagnostic("warning", self.page.name, node, port, message))

    def run(self) -> Program:
        for p in self.hierarchy.problems:
            self.error(p.node, p.port, p.message)
        specs, attrs = self._check_blocks()
        fed, succ, indegree = self._check_wires(specs)
        binders = self._binders()
        deps = self._dependencies(succ, indegree, binders, specs, attrs)
        typed = Inference(self.page, self.files, self, self.ids, specs, attrs, fed, binders, self.deferred,
                          self.numbers)
        typed.infer_all(self._order(deps))
        edge_types = typed.edge_types()   # before the loss check, which may fail a node that compiled
        self._check_saved_feeds(specs)
        self._check_loss(typed.port_slot)
        self.diags.sort(key=lambda d: (d.severity != "error", d.node or "", d.port or ""))
        program = Program(self.page, typed.steps, typed.slots, self.diags, deps.graph, edge_types,
                          (self.index, typed.step_at, typed.outs_at), typed.variable_values, typed.feeds,
                          typed.slot_values, typed.variable_steps)
        program.files = self.files
        program.stored_variables = frozenset(typed.stored)
        program.hierarchy = self.hierarchy
        return program

    def _dependencies(self, succ, indegree, binders, specs, attrs) -> Dependencies:
        """The schedule's arcs: the wires' (``succ``, by block number, each list sorted as the
        schedule visits children, with ``indegree``) then the dimension arcs."""
        index, ids = self.index, self.ids
        dims = self._dimension_arcs(binders)
        if not dims:
            return Dependencies.sorted_successors(ids, succ, indegree)
        if all(u in index and v in index for u, v in dims):
            # each arc put in its place among the wires' (a page of 1,000 instances: 12 ms less
            # than making every successor a list and sorting them all again)
            for u, v in dims:
                add_child(succ, indegree, index[u], index[v], ids)
            return Dependencies.sorted_successors(ids, succ, indegree)
        succ = [[vs] if type(vs) is int else vs for vs in succ]   # lists, as _sort takes them
        # An arc to a block left out (the Variable of an instance that reads another's): it is
        # scheduled, as networkx added it, and fails there as a block of no known kind.
        arcs = [(ids[u], ids[v]) for u, vs in enumerate(succ) for v in vs or ()]
        deps = Dependencies(ids, arcs + list(dims))
        for nid in deps.nodes[len(ids):]:
            index[nid] = len(ids)
            ids.append(nid)
            specs.append(None)
            attrs.append(None)
        return deps

    def _binders(self) -> dict[str, str]:
        """The port blocks that bind (Inputs) or check (Outputs, typed after them) an instance's
        named dimensions: {flat id: instance}. A definition compiled on its own binds its own
        (instance "": the page's port blocks _check_blocks met)."""
        h = self.hierarchy
        out = {flat: path for path, inst in h.instances.items()
               for flat in (*inst.inputs.values(), *inst.outputs.values())}
        for nid in self.port_blocks:
            if "/" not in nid:
                out[nid] = ""
        return out

    def _dimension_arcs(self, binders):
        """Arcs from an instance's Inputs to each block whose attrs use its dimensions (typed
        after them, whatever the wires say)."""
        if not self.hierarchy.dim_nodes:
            return ()
        by_instance: dict[str, list[str]] = {}
        for flat, path in binders.items():
            if self.page.nodes[flat].block == COMPOSITE_INPUT:   # Outputs only check
                by_instance.setdefault(path, []).append(flat)
        return [(src, nid) for nid, paths in self.hierarchy.dim_nodes.items()
                for path in paths for src in by_instance.get(path, ()) if src != nid]

    def _check_blocks(self) -> tuple[list, list]:
        """Each node's block spec and checked attrs, by block number (page order; None for
        nodes of unknown blocks, and attrs None for those whose attrs wait for dimensions).
        From here on the compile keeps what it knows of a block in lists by its number
        (``self.ids``, ``self.index``): a 100k-block page's dicts keyed by id are out of the cache."""
        ids = self.ids = list(self.page.nodes)
        self.nodes = list(self.page.nodes.values())
        # the ints 0..n-1 made once, shared by block, wire, slot and step numbers (32 bytes each)
        self.numbers = numbers = list(range(len(ids)))
        self.index = dict(zip(ids, numbers))
        specs, attrs = [None] * len(ids), [None] * len(ids)
        self.inline: set[int] = set()    # the blocks given inline inputs
        self.port_blocks: list[str] = []   # a composite's Input and Output blocks
        unexpanded, waiting = self.hierarchy.unexpanded, self.hierarchy.dim_nodes
        # Blocks of equal attrs (every instance's, flatten.py; most drawn blocks: a Tanh has none)
        # are checked once and share one checked dict, which infer.py's look-up keys on.
        checked: dict = {}
        known: dict = {}     # block name -> spec (the registry asked once a name)
        for i, node in enumerate(self.page.nodes.values()):
            nid = ids[i]
            if node.inputs:
                self.inline.add(i)
            if unexpanded and nid in unexpanded:     # an instance that could not be flattened: reported
                self.failed.add(nid)
                continue
            block = node.block
            spec = known.get(block, known)
            if spec is known:
                if self.unflattened and composite_name(block):
                    raise _NotFlat
                spec = known[block] = self.registry.get(block)
            if block in _PORT_BLOCKS:    # read here, not in a pass of its own over the nodes
                self.port_blocks.append(nid)
            if spec is None:
                self._unknown_block(nid, node)
                continue
            specs[i] = spec
            if waiting and nid in waiting:
                self.deferred[nid] = node.attrs
                continue
            if node.attrs:
                key = attrs_key(node.attrs)
                key = self._own_key(node.attrs) if key is None else (block, key)
            else:
                key = node.block     # no attrs (most blocks): the block name says it all
            hit = checked.get(key)
            if hit is not None and hit[0] is spec:
                values, problems = hit[1], hit[2]
            else:
                values, problems = spec.validate_attrs(node.attrs)
                for k, v in values.items():
                    if isinstance(v, np.ndarray):
                        values[k] = read_only(v)
                checked[key] = (spec, values, problems)
            for attr, problem in problems:
                self.error(nid, None, problem)
            attrs[i] = values
            if node.inputs:
                self._check_inline(nid, node, spec)
        return specs, attrs

    def _unknown_block(self, nid, node) -> None:
        if self.unflattened and node.attrs and any(map(ref_inside, node.attrs.values())):
            raise _NotFlat
        alias = self.registry.resolve_alias(node.block)
        hint = f" (did you mean '{alias}'?)" if alias else ""
        self.error(nid, None, f"unknown block '{node.block}'{hint}; it is kept as a placeholder")

    def _own_key(self, attrs: dict) -> int:
        """The checked-attrs key of attrs that are not all plain values (checked on their own);
        they may hold a reference, which a plain key never does."""
        if self.unflattened and any(map(ref_inside, attrs.values())):
            raise _NotFlat
        return id(attrs)

    def _check_inline(self, nid, node, spec) -> None:
        """Each inline value must be for an input the block has."""
        for port in node.inputs:
            name, idx = split_port(port)
            decl = spec.input_map.get(name)
            if decl is None or (idx is not None) != decl.variadic:
                self.error(nid, port, f"{spec.name} has no input '{port}' for the inline value")

    def _check_wires(self, specs) -> tuple[Wires, list, list]:
        """The good wires (both ends exist, one wire per input); per block number the numbers of
        the blocks its good wires go to, each once, in the order the schedule visits them (by id;
        None for none); and per block number how many blocks' wires go into it. The children
        are put in order here, as each wire is met: its destination's id is at hand, and so are
        its siblings' (near it in page order), where a pass of its own afterwards would read
        every id again from memory no cache holds on a big page."""
        page, index, nodes, inline = self.page, self.index, self.nodes, self.inline
        fed = Wires(index, len(self.ids))
        into, good, add_good, add_type, add_src = fed.into, fed.good, fed.good.append, fed.type.append, fed.src.append
        ids, numbers = self.ids, self.numbers
        n = len(numbers)
        succ, indegree, late = [None] * len(ids), [0] * len(ids), {}
        for e in page.edges:
            si, di, dst_port = index.get(e.src), index.get(e.dst), e.dst_port
            src = specs[si] if si is not None else None
            dst = specs[di] if di is not None else None
            out = src.output_map.get(e.src_port) if src is not None else None
            inp = dst.input_map.get(dst_port) if dst is not None else None
            # A wire between plain ports of two known blocks is fine; only the rest (most wires
            # are the former, and big pages have many) goes through the checks that say why not.
            if out is None or out.variadic or inp is None or inp.variadic:
                ok = self._check_end(e, e.src, e.src_port, True, specs)
                ok = self._check_end(e, e.dst, e.dst_port, False, specs) and ok
                if not ok:
                    continue
            wired = into[di]
            if wired is not None:
                first = fed.find(di, dst_port)
                if first is not None:
                    self.error(e.dst, dst_port, f"input is fed by two wires: {first} and {e}", fail=False)
                    continue
            if di in inline and dst_port in nodes[di].inputs:
                self.warn(e.dst, dst_port, "input is wired, so its inline value is ignored")
            g = len(good)
            if g < n:
                g = numbers[g]
            # Wires.add, written out: this loop runs once a wire
            into[di] = g if wired is None else (wired, g) if type(wired) is int else fed.grown(di, g)
            add_good(e)
            add_src(si)
            add_type(None)
            kids = succ[si]
            if kids is None:       # one child: its number, no list (most blocks have one or two)
                succ[si] = di
                indegree[di] += 1
            elif type(kids) is int:
                if kids != di:
                    succ[si] = [kids, di] if e.dst > ids[kids] else [di, kids]
                    indegree[di] += 1
            elif kids is LATE or len(kids) >= MANY_CHILDREN and e.dst <= ids[kids[-1]]:
                defer_child(succ, late, indegree, si, di)     # a long list, sorted after the loop
            elif e.dst > ids[kids[-1]]:     # the common case: after its siblings
                kids.append(di)
                indegree[di] += 1
            elif insert_child(kids, di, ids):
                indegree[di] += 1
        sort_deferred(succ, late, indegree, ids)
        return fed, succ, indegree

    def _check_end(self, e: Edge, nid: str, port: str, outgoing: bool, specs) -> bool:
        """Whether one end of wire ``e`` names a node on the page and a port of the right kind."""
        if nid not in self.page.nodes:
            self.error(None, None, f"wire {e} names a node '{nid}' that is not on the page")
            return False
        if port == SCOPE_PORT:
            self.error(nid, port, "the scope port is automatic and cannot be wired", fail=False)
            return False
        spec = specs[self.index[nid]]
        if spec is None:
            return True  # unknown block: already reported
        if outgoing:
            base, idx = split_port(port)
            decl = spec.output_map.get(base)
            if decl is None or (idx is not None) != decl.variadic:
                names = ", ".join(o.port(0) if o.variadic else o.name for o in spec.outputs) or "none"
                self.error(nid, port, f"wire {e} starts at '{port}', which is not an output of "
                                      f"{spec.name} (outputs: {names})", fail=False)
                return False
            return True
        name, idx = split_port(port)
        decl = spec.input_map.get(name)
        if decl is None or (idx is not None) != decl.variadic:
            if port in spec.output_map:
                msg = f"wire {e} ends at '{port}', which is an output, not an input"
            else:
                names = ", ".join(p.port(0) if p.variadic else p.name for p in spec.inputs) or "none"
                msg = f"wire {e} ends at '{port}', which is not an input of {spec.name} (inputs: {names})"
            self.error(nid, port, msg, fail=False)
            return False
        return True

    def _order(self, deps: Dependencies) -> list[int]:
        """The schedule, by block number: a topological order; the members of a cycle are
        reported and go last."""
        order = deps.numbered_order()
        if order is not None:
            return order
        import networkx as nx

        graph = deps.graph()
        in_cycle: set[str] = set()
        for comp in nx.strongly_connected_components(graph):
            if len(comp) == 1:
                (only,) = comp
                if not graph.has_edge(only, only):
                    continue
            cycle = [u for u, _ in nx.find_cycle(_induced(nx, graph, comp))]
            if len(cycle) > 8:
                names = " -> ".join(cycle[:6]) + f" -> ... ({len(cycle)} blocks) -> {cycle[0]}"
            else:
                names = " -> ".join(cycle + cycle[:1])
            for nid in (n for n in self.page.nodes if n in comp):
                self.error(nid, None, f"is part of a cycle: {names}")
            in_cycle |= comp
        acyclic = _induced(nx, graph, set(graph).difference(in_cycle))
        # Cycle members come last: they cannot be typed, but their inputs are still checked.
        index = self.index
        return [index[n] for n in nx.topological_sort(acyclic)] + [
            i for i, n in enumerate(self.ids) if n in in_cycle]

    def _check_saved_feeds(self, specs) -> None:
        page = self.page
        for nid in page.feeds:
            spec = specs[self.index[nid]] if nid in page.nodes else None
            if spec is not None and spec.role != "placeholder":
                self.warn(nid, None, f"has a saved feed but is a {spec.name}, not a Placeholder")

    def _check_loss(self, port_slot) -> None:
        page = self.page
        if page.loss:
            lnode, lport = page.loss_target()
            if lnode not in page.nodes:
                self.error(None, None, f"the page's loss names a node '{lnode}' that is not on the page")
            elif lnode not in self.failed and lport and port_slot(lnode, lport) is None:
                self.error(lnode, lport, f"the page's loss names an output '{lport}' that does not exist")


_PORT_BLOCKS = frozenset({COMPOSITE_INPUT, COMPOSITE_OUTPUT})


def _induced(nx, graph, keep):
    """``graph`` on the nodes in ``keep`` as a graph of its own, its nodes and edges in
    ``graph``'s order: a networkx subgraph view iterates a small node set in the set's order,
    which is the hash seed's, so the cycle a message names and the order cycles leave changed
    from one process to the next."""
    sub = nx.DiGraph()
    sub.add_nodes_from(n for n in graph if n in keep)
    sub.add_edges_from((u, v) for u, v in graph.edges if u in keep and v in keep)
    return sub
