"""Whether a proposed wire may be drawn, and why not, asked of the compiler rather than a second
copy of its rules (Document.check_connection; the canvas asks while a wire is dragged)."""
from __future__ import annotations

import copy

import networkx as nx

from blockflow.compile.compiler import compile_page
from blockflow.project import Edge, Page, split_port
from blockflow.spec import SCOPE_PORT

__all__ = ["ConnectionCheck", "check_wire"]


class ConnectionCheck:
    """The verdict on a proposed wire: ``ok`` and, when refused, the ``reason`` in words;
    ``replaces`` is the wire now feeding the same input, which the new one takes the place of."""

    def __init__(self, ok: bool, reason: str = "", replaces: Edge | None = None):
        self.ok, self.reason, self.replaces = ok, reason, replaces

    def __bool__(self):
        return self.ok

    def __repr__(self):
        return f"ConnectionCheck({self.ok}, {self.reason!r})"


def check_wire(pg: Page, registry, files, edge: Edge, composites=None, blocks=None) -> ConnectionCheck:
    """Would ``edge`` be accepted on ``pg``? Refuses the scope port, unknown ports, outputs into
    outputs, cycles, a wire already there and dtype or shape mismatches. ``files``: the
    project's data files (compiler.project_files), which dataset blocks read their types from;
    ``composites``: the project's, which instances are flattened from; ``blocks``: what looks up
    a block or an instance's spec by name (composite.ProjectBlocks; the registry by default)."""
    refusal = _port_refusal(pg, blocks or registry, edge) or _cycle_refusal(pg, edge)
    if refusal:
        return ConnectionCheck(False, refusal)
    replaces = next((e for e in pg.edges if e.dst == edge.dst and e.dst_port == edge.dst_port), None)
    if replaces is not None and (replaces.src, replaces.src_port) == (edge.src, edge.src_port):
        return ConnectionCheck(False, "these ports are already wired")
    # Types: compile what the target block depends on, with and without the wire, and see
    # whether the block is now wrong. Only its ancestors count, so a check costs the part of
    # the page upstream of it, not the page (the canvas makes dozens while a wire is dragged).
    edges = [e for e in pg.edges if e is not replaces]
    before = {str(d) for d in _upstream_errors(pg, registry, files, edges, edge.dst, composites, edge.dst_port)}
    after = [d for d in _upstream_errors(pg, registry, files, edges + [edge], edge.dst, composites, edge.dst_port)
             if str(d) not in before]
    if after:
        return ConnectionCheck(False, after[0].message, replaces)
    return ConnectionCheck(True, "", replaces)


def _port_refusal(pg: Page, registry, edge: Edge) -> str:
    """Why the wire's ends are not an output and an input of blocks on the page ("" if they are)."""
    if SCOPE_PORT in (edge.src_port, edge.dst_port):
        return "the scope port is automatic and cannot be wired"
    for nid in (edge.src, edge.dst):
        if nid not in pg.nodes:
            return f"there is no block '{nid}'"
    sspec, dspec = registry.get(pg.nodes[edge.src].block), registry.get(pg.nodes[edge.dst].block)
    if sspec is None or dspec is None:
        return "unknown blocks cannot be wired"
    base, idx = split_port(edge.src_port)
    out = sspec.output_map.get(base)
    if out is None or (idx is not None) != out.variadic:
        return f"'{edge.src_port}' is not an output of {sspec.name}"
    base, idx = split_port(edge.dst_port)
    decl = dspec.input_map.get(base)
    if decl is None or (idx is not None) != decl.variadic:
        if base in dspec.output_map:
            return "two outputs cannot be joined"
        return f"'{edge.dst_port}' is not an input of {dspec.name}"
    return ""


def _cycle_refusal(pg: Page, edge: Edge) -> str:
    """Why the wire would close a cycle ("" when it would not); the wire it would replace on
    the same input does not count."""
    src, dst = edge.src, edge.dst
    if src == dst:
        return "a block cannot feed itself (that is a cycle)"
    graph = nx.DiGraph()
    graph.add_nodes_from(pg.nodes)
    graph.add_edges_from((e.src, e.dst) for e in pg.edges if not (e.dst == dst and e.dst_port == edge.dst_port))
    if nx.has_path(graph, dst, src):
        return "it would make a cycle: " + " -> ".join(nx.shortest_path(graph, dst, src) + [dst])
    return ""


def _upstream_errors(pg: Page, registry, files, edges: list, node: str, composites=None,
                     port: str | None = None) -> list:
    """The compile errors of ``node``'s input ``port`` (or the whole node) on ``pg`` wired with
    ``edges``, from a page of only ``node`` and what feeds it. An instance's port is its Input
    block inside it (a flat node), whose errors count."""
    feeding: dict[str, list] = {}
    for e in edges:
        feeding.setdefault(e.dst, []).append(e)
    keep, todo = {node}, [node]
    while todo:
        for e in feeding.get(todo.pop(), ()):
            if e.src not in keep:
                keep.add(e.src)
                todo.append(e.src)
    trial = copy.copy(pg)
    trial.nodes = {nid: n for nid, n in pg.nodes.items() if nid in keep}
    trial.edges = [e for e in edges if e.dst in keep]
    trial.feeds = {nid: v for nid, v in pg.feeds.items() if nid in keep}
    trial.loss = None
    trial.metrics = []
    program = compile_page(trial, registry, files=files, composites=composites)
    inst = program.instance(node)
    if inst is not None:
        flat = inst.inputs.get(port)
        return [d for d in program.errors if (d.node == node and d.port in (port, None)) or d.node == flat]
    return [d for d in program.errors if d.node == node and d.port in (port, None)]
