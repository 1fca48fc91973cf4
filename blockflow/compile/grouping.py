"""Group and ungroup: blocks of a diagram become a new composite and one instance in their place,
and an instance is inlined back, each computing exactly what the diagram computed before.

Both are planned first (``plan_group``, ``plan_ungroup``: the new content of the diagram and the
composite made or dropped, with dtypes, shapes and dimension sizes read from the diagram's
compiled Program), then made by one mutator, ``restructure``, which puts a diagram's content and
one composite in place and returns a Change whose ``before`` is what it replaced: the same
mutator given ``before`` restores the project exactly (the editor's undo).

Qt-free; in compile/ because inferring the ports' types asks a Program.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from blockflow.composite import (DIM_REF, INPUT_BLOCK, OUTPUT_BLOCK, PARAM_REF, SHARE_ATTR, Composite,
                                 block_name, composite_name, composite_name_problem, cycle_through,
                                 refs_in, state_key, substitute)
from blockflow.compile.flatten import _mixed_seed   # one seed mixing, the flattener's
from blockflow.errors import ProjectError
from blockflow.project import Change, Edge, Node, Project, port_text, split_port, split_port_text

__all__ = ["Content", "Restructure", "plan_group", "plan_ungroup", "restructure", "suggest_name"]


@dataclass
class Content:
    """What a diagram holds, as restructure puts it back: its nodes (in order), wires, loss,
    plotted metrics and saved feeds."""

    nodes: dict
    edges: list
    loss: str | None
    metrics: list
    feeds: dict

    @staticmethod
    def of(page) -> "Content":
        return Content(dict(page.nodes), list(page.edges), page.loss, list(page.metrics), dict(page.feeds))


@dataclass
class Restructure:
    """One group or ungroup (or its undo): ``diagram`` gets ``content``; composite ``name`` is
    then ``composite`` (None: removed, or left as it is when ``keep``)."""

    diagram: str
    content: Content
    name: str
    composite: Composite | None
    keep: bool = False
    #: the node that stands for the edit (the new instance; the first inlined block)
    focus: str | None = None


def suggest_name(project: Project, stem: str = "Group") -> str:
    """The first free composite name ``Group_1``, ``Group_2``, ..."""
    n = 1
    while f"{stem}_{n}" in project.composites:
        n += 1
    return f"{stem}_{n}"


def _ident(text: str, fallback: str) -> str:
    out = re.sub(r"\W", "_", text)
    if not out or not (out[0].isalpha() or out[0] == "_"):
        out = fallback if not out else f"_{out}"
    return out


def _free(name: str, taken: set) -> str:
    out, n = name, 2
    while out in taken:
        out, n = f"{name}_{n}", n + 1
    taken.add(out)
    return out


def _seed(registry, node) -> int | None:
    """The seed ``node`` draws with (its attr, else its block's default); None without one."""
    seed = node.attrs.get("seed")
    if seed is None and registry is not None:
        spec = registry.get(node.block)
        decl = spec.attr_map.get("seed") if spec is not None else None
        seed = decl.default if decl is not None else None
    return seed if isinstance(seed, int) and not isinstance(seed, bool) else None


def _level_id(level: str, node: str) -> str:
    return f"{level}/{node}" if level else node


# ------------------------------------------------------------------------------------ group

def _group_refusal(project: Project, page, ids: list) -> None:
    """Refuse what a group cannot carry, naming the block and why."""
    chosen = set(ids)
    for nid in ids:
        node = page.nodes[nid]
        if nid in page.feeds:
            raise ProjectError(f"{nid} has a saved feed, which belongs to the page: leave it out of the group")
        for _key, name in (r for v in node.attrs.values() for r in refs_in(v) if r[0] == DIM_REF):
            raise ProjectError(f"{nid} uses the dimension '{name}' of the composite's inputs; a group "
                               f"cannot carry a dimension: leave it out, or write the size")
        share = node.attrs.get(SHARE_ATTR)
        if share and share not in chosen:
            raise ProjectError(f"{nid} uses the Variables of {share}, which is not selected: select both")
    for nid, node in page.nodes.items():
        if nid not in chosen and node.attrs.get(SHARE_ATTR) in chosen:
            raise ProjectError(f"{nid} uses the Variables of {node.attrs[SHARE_ATTR]}: select both, "
                               f"or neither")


def _port_decl(program, level: str, src: str, port: str) -> dict:
    """The dtype and shape of an Input fed by ``src:port`` (open sizes -1; untyped: any)."""
    t = None
    if program is not None:
        try:
            t = program.port_type(_level_id(level, src), port)
        except ProjectError:
            t = None
    if t is None:
        return {"dtype": "any"}
    return {"dtype": t.dtype.name, "shape": [-1 if d is None else int(d) for d in t.shape]}


def plan_group(project: Project, diagram: str, node_ids, name: str, program=None,
               level: str = "", registry=None) -> Restructure:
    """The new content of ``diagram`` with blocks ``node_ids`` grouped into composite ``name``.
    ``program``: the diagram's compiled program (ids drawn at ``level`` in it) for the ports'
    dtypes and shapes; ``registry``: the blocks' default seeds (drawn the same numbers after)."""
    page = project.page(diagram)
    ids = [n for n in page.nodes if n in set(node_ids)]
    if not ids:
        raise ProjectError("select the blocks to group")
    problem = composite_name_problem(name)
    if problem:
        raise ProjectError(problem)
    if name in project.composites:
        raise ProjectError(f"there is already a composite named '{name}'")
    _group_refusal(project, page, ids)
    chosen = set(ids)
    comp = Composite(name, doc="")
    inner = comp.page
    taken = set(ids)
    inst_id = _free(_ident(name.lower(), "group"), set(page.nodes) - chosen)
    # parameters an inner attr refers to (a group made inside a definition) pass through
    own = project.composites.get(composite_name(diagram) or "")
    params = []
    for nid in ids:
        for kind, pname in (r for v in page.nodes[nid].attrs.values() for r in refs_in(v)):
            if kind == PARAM_REF and own is not None and own.param(pname) and pname not in [p.name for p in params]:
                params.append(own.param(pname))
    comp.params = params
    xs = [page.nodes[n].position[0] for n in ids]
    ys = [page.nodes[n].position[1] for n in ids]
    x0, y0, x1 = min(xs), min(ys), max(xs)
    # inputs: one per distinct outside source, named after the first inner port it feeds
    in_port: dict = {}
    outside_edges: list[Edge] = []
    inner_edges: list[Edge] = []
    n_in = 0
    for e in page.edges:
        if e.dst in chosen and e.src not in chosen:
            key = (e.src, e.src_port)
            if key not in in_port:
                port = _free(_ident(split_port(e.dst_port)[0], "x"), taken)
                in_port[key] = port
                attrs = {"name": port, **_port_decl(program, level, e.src, e.src_port)}
                inner.nodes[port] = Node(port, INPUT_BLOCK, attrs, {}, (x0 - 220.0, y0 + 90.0 * n_in), "", {})
                n_in += 1
                outside_edges.append(Edge(e.src, e.src_port, inst_id, port))
            inner_edges.append(Edge(in_port[key], "output", e.dst, e.dst_port))
        elif e.src in chosen and e.dst in chosen:
            inner_edges.append(e)
    out_port: dict = {}

    def output_for(src: str, src_port: str) -> str:
        key = (src, src_port)
        if key not in out_port:
            stem = src_port if split_port(src_port)[0] not in ("output", "y") else src
            port = _free(_ident(split_port(stem)[0] if stem == src_port else stem, "y"), taken)
            out_port[key] = port
            inner.nodes[port] = Node(port, OUTPUT_BLOCK, {"name": port}, {},
                                     (x1 + 220.0, y0 + 90.0 * (len(out_port) - 1)), "", {})
            inner_edges.append(Edge(src, src_port, port, "input"))
        return out_port[key]

    for e in page.edges:
        if e.src in chosen and e.dst not in chosen:
            outside_edges.append(Edge(inst_id, output_for(e.src, e.src_port), e.dst, e.dst_port))

    def follow(ref):
        if not ref:
            return ref
        node, port = split_port_text(ref)
        if node not in chosen:
            return ref
        if port is None:
            port = _first_output(page, node, inner_edges)
        return port_text(inst_id, output_for(node, port))

    loss = follow(page.loss)
    metrics = [follow(m) for m in page.metrics]
    # the inner blocks, their seeds unmixed (the flattener mixes them with the flat id again, so
    # the same numbers are drawn on a page), their state moved to the instance
    state: dict = {}
    for nid in ids:
        node = page.nodes[nid]
        attrs = dict(node.attrs)
        seed = _seed(registry, node)
        if seed is not None and not composite_name(diagram):
            attrs["seed"] = _mixed_seed(seed, f"{inst_id}/{nid}")
        for key, value in node.state.items():
            state[state_key(nid, key) if composite_name(node.block) is None else f"{nid}/{key}"] = value
        inner.nodes[nid] = Node(nid, node.block, attrs, dict(node.inputs), node.position, node.label, {})
    inner.edges = inner_edges
    inst_attrs = {p.name: {PARAM_REF: p.name} for p in params}
    instance = Node(inst_id, block_name(name), inst_attrs, {}, (x0, y0), "", state)
    nodes: dict = {}
    placed = False
    for nid, node in page.nodes.items():
        if nid in chosen:
            if not placed:
                nodes[inst_id] = instance
                placed = True
            continue
        nodes[nid] = node
    edges = [e for e in page.edges if e.src not in chosen and e.dst not in chosen] + outside_edges
    content = Content(nodes, edges, loss, metrics, dict(page.feeds))
    return Restructure(diagram, content, name, comp, focus=inst_id)


def _first_output(page, node, edges) -> str:
    """The output port a loss or metric naming ``node`` alone means: the port its wires leave
    from, else "output"."""
    for e in list(page.edges) + list(edges):
        if e.src == node:
            return e.src_port
    return "output"


# ------------------------------------------------------------------------------------ ungroup

def _dim_sizes(program, level: str, inst_id: str, comp: Composite) -> dict:
    """The sizes the instance binds its Inputs' named dimensions to, from the program."""
    sizes: dict = {}
    if program is None:
        return sizes
    for nid, node in comp.page.nodes.items():
        shape = node.attrs.get("shape") if node.block == INPUT_BLOCK else None
        if not isinstance(shape, list):
            continue
        try:
            t = program.port_type(_level_id(level, f"{inst_id}/{nid}"), "output")
        except ProjectError:
            t = None
        if t is None or len(t.shape) != len(shape):
            continue
        for want, got in zip(shape, t.shape):
            if isinstance(want, str) and got is not None:
                sizes[want] = int(got)
    return sizes


def _ungroup_refusal(page, inst_id: str, node) -> None:
    if node.attrs.get(SHARE_ATTR):
        raise ProjectError(f"{inst_id} uses the Variables of {node.attrs[SHARE_ATTR]}; inlined it would "
                           f"get its own: clear its {SHARE_ATTR} first")
    users = [nid for nid, n in page.nodes.items() if n.attrs.get(SHARE_ATTR) == inst_id]
    if users:
        raise ProjectError(f"{', '.join(users)} use{'s' if len(users) == 1 else ''} the Variables of "
                           f"{inst_id}: clear their {SHARE_ATTR} first")


def plan_ungroup(project: Project, diagram: str, inst_id: str, program=None, level: str = "",
                 registry=None) -> Restructure:
    """The new content of ``diagram`` with instance ``inst_id`` inlined: its blocks under their
    ids where free (else suffixed), parameters and dimensions replaced by their values, its
    Input and Output blocks gone and their wires joined, its state back on its blocks."""
    page = project.page(diagram)
    node = page.nodes.get(inst_id)
    if node is None:
        raise ProjectError(f"there is no block '{inst_id}' on {diagram}")
    name = composite_name(node.block)
    if name is None:
        raise ProjectError(f"{inst_id} is a {node.block}, not a composite's instance")
    comp = project.composite(name)
    _ungroup_refusal(page, inst_id, node)
    values = {p.name: node.attrs.get(p.name, p.default) for p in comp.params}
    for p in comp.params:
        if values[p.name] is None and p.required:
            raise ProjectError(f"parameter '{p.name}' of {inst_id} has no value: give it one first")
    sizes = _dim_sizes(program, level, inst_id, comp)
    inside_definition = composite_name(diagram) is not None

    def lookup(kind, pname):
        if kind == PARAM_REF:
            return values.get(pname)
        if pname in sizes:
            return sizes[pname]
        if inside_definition:
            return {DIM_REF: pname}     # the enclosing composite binds the same name
        raise ProjectError(f"the size of dimension '{pname}' of {inst_id} is not known: wire its "
                           f"inputs and let the page compile first")

    ports_in = {nid for nid, n in comp.page.nodes.items() if n.block == INPUT_BLOCK}
    ports_out = {nid for nid, n in comp.page.nodes.items() if n.block == OUTPUT_BLOCK}
    port_of = {nid: comp.page.nodes[nid].attrs.get("name", "x" if nid in ports_in else "y")
               for nid in ports_in | ports_out}
    taken = set(page.nodes) - {inst_id}
    rename = {}
    for nid in comp.page.nodes:
        if nid not in ports_in and nid not in ports_out:
            rename[nid] = _free(nid, taken)
    feeding = {e.dst_port: (e.src, e.src_port) for e in page.edges if e.dst == inst_id}
    inner_src = {}
    for e in comp.page.edges:
        if e.dst in ports_out:
            inner_src[port_of[e.dst]] = (e.src, e.src_port)

    def source(src: str, src_port: str):
        """Where a wire leaving inner ``src`` comes from after inlining (an Input: outside)."""
        if src in ports_in:
            outside = feeding.get(port_of[src])
            if outside is None:
                raise ProjectError(f"port '{port_of[src]}' of {inst_id} is not wired: wire it before ungrouping")
            return outside
        return rename[src], src_port

    dx = node.position[0] - min((n.position[0] for n in comp.page.nodes.values()), default=0.0)
    dy = node.position[1] - min((n.position[1] for n in comp.page.nodes.values()), default=0.0)
    new_nodes = {}
    for nid, new in rename.items():
        inner = comp.page.nodes[nid]
        attrs = {k: substitute(v, lookup) for k, v in inner.attrs.items()}
        seed = _seed(registry, Node(nid, inner.block, attrs))
        if seed is not None and not inside_definition:
            attrs["seed"] = _mixed_seed(seed, f"{inst_id}/{nid}")
        head = nid + ":"
        state = {}
        for key, value in node.state.items():
            if composite_name(inner.block) is None and key.startswith(head):
                state[key[len(head):]] = value
            elif composite_name(inner.block) is not None and key.startswith(nid + "/"):
                state[key[len(nid) + 1:]] = value
        x, y = inner.position
        new_nodes[new] = Node(new, inner.block, attrs, dict(inner.inputs), (x + dx, y + dy), inner.label, state)
    edges = [e for e in page.edges if inst_id not in (e.src, e.dst)]
    for e in comp.page.edges:
        if e.dst in ports_out or e.dst in ports_in:
            continue
        src = source(e.src, e.src_port)
        edges.append(Edge(src[0], src[1], rename[e.dst], e.dst_port))
    for e in page.edges:
        if e.src == inst_id:
            got = inner_src.get(e.src_port)
            if got is None:
                raise ProjectError(f"{inst_id} has no output port '{e.src_port}'")
            src = source(*got)
            edges.append(Edge(src[0], src[1], e.dst, e.dst_port))

    def follow(ref):
        if not ref:
            return ref
        nid, port = split_port_text(ref)
        if nid != inst_id:
            return ref
        port = port or next(iter(inner_src), None)
        if port not in inner_src:
            return None
        return port_text(*source(*inner_src[port]))

    nodes = {}
    for nid, n in page.nodes.items():
        if nid == inst_id:
            nodes.update(new_nodes)
        else:
            nodes[nid] = n
    content = Content(nodes, edges, follow(page.loss), [m for m in (follow(m) for m in page.metrics) if m],
                      dict(page.feeds))
    focus = next(iter(new_nodes), None)
    return Restructure(diagram, content, name, None, keep=True, focus=focus)


# ------------------------------------------------------------------------------------ the mutator

def restructure(project: Project, plan: Restructure) -> Change:
    """Put ``plan``'s content in its diagram and its composite in place (a mutator: the editor's
    Document.apply(None, restructure, plan)); ``before`` is the Restructure that undoes it."""
    page = project.page(plan.diagram)
    old_comp = project.composites.get(plan.name)
    if not plan.keep:
        if plan.composite is not None and old_comp is None:
            project.composites[plan.name] = plan.composite
            cycle = cycle_through(project.composites, plan.name)
            if cycle:
                del project.composites[plan.name]
                raise ProjectError(f"composite '{plan.name}' would contain itself: {' > '.join(cycle)}")
        elif plan.composite is None and old_comp is not None:
            del project.composites[plan.name]
    before = Restructure(plan.diagram, Content.of(page), plan.name,
                         None if plan.keep else old_comp, keep=plan.keep)
    old_nodes, old_edges = page.nodes, set(page.edges)
    new = plan.content
    changed = {nid for nid, n in new.nodes.items() if nid in old_nodes and old_nodes[nid] is not n}
    removed = tuple(nid for nid in old_nodes if nid not in new.nodes or nid in changed)
    added = tuple(nid for nid in new.nodes if nid not in old_nodes or nid in changed)
    touched = set(removed)
    new_edges = set(new.edges)
    edges_removed = tuple(e for e in page.edges if e not in new_edges or e.src in touched or e.dst in touched)
    edges_added = tuple(e for e in new.edges if e not in old_edges or e.src in touched or e.dst in touched)
    fields = tuple(f for f, a, b in (("loss", page.loss, new.loss), ("metrics", page.metrics, new.metrics))
                   if a != b)
    page.nodes = dict(new.nodes)
    page.edges = list(new.edges)
    page.loss, page.metrics, page.feeds = new.loss, list(new.metrics), dict(new.feeds)
    comp_block = block_name(plan.name)
    added_pages = (comp_block,) if not plan.keep and plan.composite is not None and old_comp is None else ()
    removed_pages = (comp_block,) if not plan.keep and plan.composite is None and old_comp is not None else ()
    return Change(plan.diagram, True, nodes_added=added, nodes_removed=removed, edges_added=edges_added,
                  edges_removed=edges_removed, fields=fields, pages_added=added_pages,
                  pages_removed=removed_pages, before=before)
