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
from dataclasses import dataclass, replace

from blockflow.composite import (DIM_REF, INPUT_BLOCK, OUTPUT_BLOCK, PARAM_REF, SHARE_ATTR, Composite,
                                 block_name, composite_name, composite_name_problem, cycle_through,
                                 refs_in, state_key, substitute)
from blockflow.compile.flatten import _mixed_seed   # one seed mixing, the flattener's
from blockflow.errors import ProjectError
from blockflow.page_layout import MAX_FRAMES, bends_problem, layout_kept
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
    #: (reroute points, frames) as they were, to put back; None: the page's, less what went
    layout: tuple | None = None

    @staticmethod
    def of(page) -> "Content":
        return Content(dict(page.nodes), list(page.edges), page.loss, list(page.metrics), dict(page.feeds),
                       (dict(page.bends), list(page.frames)))


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


def _drawn_values(program, prefix: str) -> dict:
    """The first values of the Variables under flat id ``prefix`` that have no stored value, by
    their path under it. A regroup moves them to another flat id, which the flattener would mix
    into their seeds (other numbers): they are kept as stored values instead."""
    values = getattr(program, "variable_values", None) if program is not None else None
    if values is None:
        return {}
    out = {}
    for flat in list(values):
        if flat.startswith(prefix) and values.is_pending(flat):
            out[flat[len(prefix):]] = values.initial(flat)
    return out


def _level_id(level: str, node: str) -> str:
    return f"{level}/{node}" if level else node


# ------------------------------------------------------------------------------------ group

def _group_refusal(project: Project, page, ids: list) -> None:
    """Refuse what a group cannot carry, naming the block and why."""
    chosen = set(ids)
    definition = composite_name(page.name)
    for nid in ids:
        node = page.nodes[nid]
        if definition is not None and node.block in (INPUT_BLOCK, OUTPUT_BLOCK):
            # inside the group it would be the new composite's port, and no longer this one's:
            # every instance of the definition would lose the port and its wires
            raise ProjectError(f"{nid} is a port of {definition} ({node.block} "
                               f"'{node.attrs.get('name', nid)}'): leave it out of the group")
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
    between = _outside_between(page, chosen)
    if between is not None:
        raise ProjectError(f"{between} lies between selected blocks: the group would feed itself "
                           f"through it; select it too, or fewer blocks")


def _outside_between(page, chosen: set) -> str | None:
    """A block outside ``chosen`` on a path from a chosen block back to a chosen block (of those
    that feed a chosen block, the first in page order), or None when there is none (the
    selection is convex)."""
    succ: dict[str, list] = {}
    for e in page.edges:
        succ.setdefault(e.src, []).append(e.dst)
    # the outside blocks a chosen block reaches through outside blocks only
    reached = {d for n in chosen for d in succ.get(n, ()) if d not in chosen}
    todo = list(reached)
    while todo:
        for d in succ.get(todo.pop(), ()):
            if d not in chosen and d not in reached:
                reached.add(d)
                todo.append(d)
    back = [n for n in reached if any(d in chosen for d in succ.get(n, ()))]
    if not back:
        return None
    order = {nid: i for i, nid in enumerate(page.nodes)}
    return min(back, key=lambda n: order.get(n, len(order)))


def _port_decl(program, level: str, src: str, port: str, open_sizes: bool = False) -> dict:
    """The dtype and shape of an Input fed by ``src:port`` (open sizes -1; untyped: any).
    ``open_sizes``: every size -1, for a group made inside a definition, whose types come from
    the one instance it was opened at while its other instances may be fed other sizes."""
    t = None
    if program is not None:
        try:
            t = program.port_type(_level_id(level, src), port)
        except ProjectError:
            t = None
    if t is None:
        return {"dtype": "any"}
    return {"dtype": t.dtype.name, "shape": [-1 if d is None or open_sizes else int(d) for d in t.shape]}


def plan_group(project: Project, diagram: str, node_ids, name: str, program=None,
               level: str = "", registry=None) -> Restructure:
    """The new content of ``diagram`` with blocks ``node_ids`` grouped into composite ``name``.
    ``program``: the diagram's compiled program (ids drawn at ``level`` in it) for the ports'
    dtypes and shapes; ``registry``: the blocks' default seeds (drawn the same numbers after)."""
    page = project.page(diagram)
    chosen = set(node_ids)
    ids = [n for n in page.nodes if n in chosen]
    if not ids:
        raise ProjectError("select the blocks to group")
    problem = composite_name_problem(name)
    if problem:
        raise ProjectError(problem)
    if name in project.composites:
        raise ProjectError(f"there is already a composite named '{name}'")
    _group_refusal(project, page, ids)
    return _Grouping(project, diagram, page, ids, name, program, level, registry).plan()


class _Grouping:
    """One group being planned (plan_group): the new composite's diagram and the instance."""

    def __init__(self, project, diagram, page, ids, name, program, level, registry):
        self.project, self.diagram, self.page, self.ids = project, diagram, page, ids
        self.program, self.level, self.registry = program, level, registry
        self.chosen = set(ids)
        self.comp = Composite(name, doc="")
        self.taken = set(ids)
        self.inst_id = _free(_ident(name.lower(), "group"), set(page.nodes) - self.chosen)
        self.in_port: dict = {}
        self.out_port: dict = {}
        self.outside_edges: list[Edge] = []
        self.inner_edges: list[Edge] = []
        xs = [page.nodes[n].position[0] for n in ids]
        ys = [page.nodes[n].position[1] for n in ids]
        self.x0, self.y0, self.x1 = min(xs), min(ys), max(xs)
        self.in_definition = composite_name(diagram) is not None

    def plan(self) -> Restructure:
        page, chosen = self.page, self.chosen
        self.comp.params = self.params()
        for e in page.edges:
            if e.dst in chosen and e.src not in chosen:
                self.inner_edges.append(Edge(self.input_for(e), "output", e.dst, e.dst_port))
            elif e.src in chosen and e.dst in chosen:
                self.inner_edges.append(e)
        for e in page.edges:
            if e.src in chosen and e.dst not in chosen:
                self.outside_edges.append(Edge(self.inst_id, self.output_for(e.src, e.src_port), e.dst, e.dst_port))
        loss = self.follow(page.loss)
        metrics = [self.follow(m) for m in page.metrics]
        state = self.inner_blocks()
        self.comp.page.edges = self.inner_edges
        # the layout of what went inside goes with it (the blocks keep their places): the reroute
        # points of the wires between the grouped blocks, the frames around them alone
        self.comp.page.bends = {e: p for e, p in page.bends.items() if e.src in chosen and e.dst in chosen}
        self.comp.page.frames = [f for f in page.frames if set(f.blocks) <= chosen]
        inst_attrs = {p.name: {PARAM_REF: p.name} for p in self.comp.params}
        instance = Node(self.inst_id, self.comp.block, inst_attrs, {}, (self.x0, self.y0), "", state)
        nodes: dict = {}
        for nid, node in page.nodes.items():
            if nid not in chosen:
                nodes[nid] = node
            elif self.inst_id not in nodes:      # the instance takes the first block's place
                nodes[self.inst_id] = instance
        edges = [e for e in page.edges if e.src not in chosen and e.dst not in chosen] + self.outside_edges
        content = Content(nodes, edges, loss, metrics, dict(page.feeds))
        return Restructure(self.diagram, content, self.comp.name, self.comp, focus=self.inst_id)

    def params(self) -> list:
        """The enclosing definition's parameters the blocks refer to (a group made inside a
        definition): the new composite declares them and the instance passes them through."""
        own = self.project.composites.get(composite_name(self.diagram) or "")
        params: list = []
        for nid in self.ids:
            for kind, pname in (r for v in self.page.nodes[nid].attrs.values() for r in refs_in(v)):
                if kind == PARAM_REF and own is not None and own.param(pname) and \
                        pname not in [p.name for p in params]:
                    params.append(own.param(pname))
        return params

    def input_for(self, e: Edge) -> str:
        """The Input of the outside source of ``e``: one per distinct source, named after the
        first inner port it feeds."""
        key = (e.src, e.src_port)
        if key not in self.in_port:
            port = self.in_port[key] = _free(_ident(split_port(e.dst_port)[0], "x"), self.taken)
            attrs = {"name": port, **_port_decl(self.program, self.level, e.src, e.src_port,
                                                open_sizes=self.in_definition)}
            at = (self.x0 - 220.0, self.y0 + 90.0 * (len(self.in_port) - 1))
            self.comp.page.nodes[port] = Node(port, INPUT_BLOCK, attrs, {}, at, "", {})
            self.outside_edges.append(Edge(e.src, e.src_port, self.inst_id, port))
        return self.in_port[key]

    def output_for(self, src: str, src_port: str) -> str:
        """The Output of inner source ``src:src_port``: one per distinct source read outside,
        named after its port (after the block for a plain "output")."""
        key = (src, src_port)
        if key not in self.out_port:
            stem = split_port(src_port)[0]
            port = self.out_port[key] = _free(_ident(stem if stem not in ("output", "y") else src, "y"),
                                              self.taken)
            at = (self.x1 + 220.0, self.y0 + 90.0 * (len(self.out_port) - 1))
            self.comp.page.nodes[port] = Node(port, OUTPUT_BLOCK, {"name": port}, {}, at, "", {})
            self.inner_edges.append(Edge(src, src_port, port, "input"))
        return self.out_port[key]

    def follow(self, ref):
        """A loss or metric naming a grouped block, as the instance's port."""
        if not ref:
            return ref
        node, port = split_port_text(ref)
        if node not in self.chosen:
            return ref
        return port_text(self.inst_id, self.output_for(node, port or _first_output(self.page, node, self.inner_edges)))

    def inner_blocks(self) -> dict:
        """Put the blocks in the composite, their seeds unmixed (the flattener mixes them with the
        flat id again, so the same numbers are drawn on a page); returns the instance's state."""
        state: dict = {}
        for nid in self.ids:
            node = self.page.nodes[nid]
            attrs = dict(node.attrs)
            seed = _seed(self.registry, node)
            nested = composite_name(node.block) is not None
            if seed is not None and not self.in_definition:
                attrs["seed"] = _mixed_seed(seed, f"{self.inst_id}/{nid}")
            for key, value in node.state.items():
                state[f"{nid}/{key}" if nested else state_key(nid, key)] = value
            if nested and not self.in_definition:
                for path, value in _drawn_values(self.program, _level_id(self.level, nid) + "/").items():
                    state.setdefault(f"{nid}/{path}:value", value)
            self.comp.page.nodes[nid] = Node(nid, node.block, attrs, dict(node.inputs), node.position,
                                             node.label, {}, node.collapsed)
        return state


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
    for p in comp.params:
        if node.attrs.get(p.name, p.default) is None and p.required:
            raise ProjectError(f"parameter '{p.name}' of {inst_id} has no value: give it one first")
    return _Ungrouping(diagram, page, inst_id, node, comp, program, level, registry).plan()


class _Ungrouping:
    """One ungroup being planned (plan_ungroup)."""

    def __init__(self, diagram, page, inst_id, node, comp, program, level, registry):
        self.diagram, self.page, self.inst_id, self.node, self.comp = diagram, page, inst_id, node, comp
        self.program, self.level, self.registry = program, level, registry
        self.values = {p.name: node.attrs.get(p.name, p.default) for p in comp.params}
        self.sizes = _dim_sizes(program, level, inst_id, comp)
        self.in_definition = composite_name(diagram) is not None
        inner = comp.page.nodes
        self.ports_in = {nid for nid, n in inner.items() if n.block == INPUT_BLOCK}
        self.ports_out = {nid for nid, n in inner.items() if n.block == OUTPUT_BLOCK}
        self.port_of = {nid: inner[nid].attrs.get("name", "x" if nid in self.ports_in else "y")
                        for nid in self.ports_in | self.ports_out}
        taken = set(page.nodes) - {inst_id}
        self.rename = {nid: _free(nid, taken) for nid in inner
                       if nid not in self.ports_in and nid not in self.ports_out}
        self.feeding = {e.dst_port: (e.src, e.src_port) for e in page.edges if e.dst == inst_id}
        self.inner_src = {self.port_of[e.dst]: (e.src, e.src_port) for e in comp.page.edges
                          if e.dst in self.ports_out}

    def lookup(self, kind, pname):
        if kind == PARAM_REF:
            return self.values.get(pname)
        if pname in self.sizes:
            return self.sizes[pname]
        if self.in_definition:
            return {DIM_REF: pname}     # the enclosing composite binds the same name
        raise ProjectError(f"the size of dimension '{pname}' of {self.inst_id} is not known: wire its "
                           f"inputs and let the page compile first")

    def source(self, src: str, src_port: str):
        """Where a wire leaving inner ``src`` comes from after inlining (an Input: outside)."""
        if src in self.ports_in:
            outside = self.feeding.get(self.port_of[src])
            if outside is None:
                raise ProjectError(f"port '{self.port_of[src]}' of {self.inst_id} is not wired: wire it "
                                   f"before ungrouping")
            return outside
        return self.rename[src], src_port

    def plan(self) -> Restructure:
        page, inst_id = self.page, self.inst_id
        new_nodes = self.blocks()
        edges = [e for e in page.edges if inst_id not in (e.src, e.dst)]
        for e in self.comp.page.edges:
            if e.dst not in self.ports_out and e.dst not in self.ports_in:
                src = self.source(e.src, e.src_port)
                edges.append(Edge(src[0], src[1], self.rename[e.dst], e.dst_port))
        for e in page.edges:
            if e.src == inst_id:
                got = self.inner_src.get(e.src_port)
                if got is None:
                    raise ProjectError(f"{inst_id} has no output port '{e.src_port}'")
                src = self.source(*got)
                edges.append(Edge(src[0], src[1], e.dst, e.dst_port))
        nodes = {}
        for nid, n in page.nodes.items():
            if nid == inst_id:
                nodes.update(new_nodes)
            else:
                nodes[nid] = n
        metrics = [m for m in (self.follow(m) for m in page.metrics) if m]
        content = Content(nodes, edges, self.follow(page.loss), metrics, dict(page.feeds), self.layout())
        return Restructure(self.diagram, content, self.comp.name, None, keep=True,
                           focus=next(iter(new_nodes), None))

    def blocks(self) -> dict:
        """The inner blocks under their new ids, placed where the instance was, their attrs
        substituted, seeds mixed as the flattener did, and their state back from the instance."""
        inner_nodes, node = self.comp.page.nodes, self.node
        dx = node.position[0] - min((n.position[0] for n in inner_nodes.values()), default=0.0)
        dy = node.position[1] - min((n.position[1] for n in inner_nodes.values()), default=0.0)
        out = {}
        for nid, new in self.rename.items():
            inner = inner_nodes[nid]
            nested = composite_name(inner.block) is not None
            attrs = {k: substitute(v, self.lookup) for k, v in inner.attrs.items()}
            seed = _seed(self.registry, Node(nid, inner.block, attrs))
            if seed is not None and not self.in_definition:
                attrs["seed"] = _mixed_seed(seed, f"{self.inst_id}/{nid}")
            head = nid + ("/" if nested else ":")
            state = {key[len(head):]: value for key, value in node.state.items() if key.startswith(head)}
            if nested and not self.in_definition:
                flat = _level_id(self.level, f"{self.inst_id}/{nid}/")
                for path, value in _drawn_values(self.program, flat).items():
                    state.setdefault(f"{path}:value", value)
            x, y = inner.position
            out[new] = Node(new, inner.block, attrs, dict(inner.inputs), (x + dx, y + dy), inner.label, state,
                            inner.collapsed)
        self.offset = (dx, dy)
        return out

    def layout(self) -> tuple:
        """The page's reroute points and frames with the composite diagram's added, moved and
        renamed as its blocks were (what restructure keeps of them is its own business)."""
        (dx, dy), rename, body = self.offset, self.rename, self.comp.page
        bends = dict(self.page.bends)
        for e, points in body.bends.items():
            moved = tuple((x + dx, y + dy) for x, y in points)
            if e.src in rename and e.dst in rename and not bends_problem(moved):
                bends[Edge(rename[e.src], e.src_port, rename[e.dst], e.dst_port)] = moved
        frames = list(self.page.frames)
        for f in body.frames:
            if len(frames) < MAX_FRAMES:
                frames.append(replace(f, blocks=tuple(rename[b] for b in f.blocks if b in rename)))
        return bends, frames

    def follow(self, ref):
        """A loss or metric naming the instance's port, as the inner block that fed it."""
        if not ref:
            return ref
        nid, port = split_port_text(ref)
        if nid != self.inst_id:
            return ref
        port = port or next(iter(self.inner_src), None)
        if port not in self.inner_src:
            return None
        return port_text(*self.source(*self.inner_src[port]))


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
    page.bends, page.frames = layout_kept(*(new.layout or (page.bends, page.frames)), page.nodes, new_edges)
    comp_block = block_name(plan.name)
    added_pages = (comp_block,) if not plan.keep and plan.composite is not None and old_comp is None else ()
    removed_pages = (comp_block,) if not plan.keep and plan.composite is None and old_comp is not None else ()
    return Change(plan.diagram, True, nodes_added=added, nodes_removed=removed, edges_added=edges_added,
                  edges_removed=edges_removed, fields=fields, pages_added=added_pages,
                  pages_removed=removed_pages, before=before)
