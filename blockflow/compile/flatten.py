"""Flattening: a page whose nodes include composite instances becomes one flat page of blocks.

Each instance ``d1`` of a composite is replaced by the blocks of its diagram under hierarchical
ids (``d1/MatMul_1``; nested: ``d1/blk/W``), its parameters substituted into their attrs; the
wires into its ports end at its ``Input`` blocks and the wires out of them start at its
``Output`` blocks, which stay in the flat page as identities (so a port keeps its value and its
gradient, and the boundary of a closed instance can be drawn). An instance that shares another's
Variables (``share_variables_with``) reads that instance's Variables, and its own are left out.

What cannot be flattened (an unknown composite, one that contains itself, a bad parameter, a wire
to a port the composite lacks) is a Problem on the instance: the compiler reports it, and the
instance stays in the flat page unexpanded, so that what depends on it fails with it.

The flat page is what the compiler types and the runtime runs; ``Hierarchy`` keeps what the
flattening knows about levels, for Program's questions asked in the ids of a drawn diagram.
``Hierarchy`` and ``ref_inside`` live in hierarchy.py, which every compile imports; this module
is imported only by a compile of a page that needs flattening (compiler.py), and by dimensions.py
when a DimRef, which only this module makes, is to be resolved.
"""
from __future__ import annotations

import zlib
from itertools import islice
from dataclasses import dataclass

import numpy as np

from blockflow.composite import DIM_REF, MAX_NESTING, PARAM_REF, PREFIX, SHARE_ATTR, composite_name, substitute
from blockflow.compile.hierarchy import COMPOSITE_INPUT, COMPOSITE_OUTPUT, Hierarchy, ref_inside
from blockflow.project import Edge, Node, Page, port_text, split_port_text
from blockflow.spec import AttrError

__all__ = ["DimRef", "Instance", "Hierarchy", "Problem", "flatten", "flat_size", "COMPOSITE_INPUT", "COMPOSITE_OUTPUT"]

#: Most blocks a page may flatten to: a few kilobytes of file can nest composites that use each
#: other twice, 2**depth blocks; the compile refuses such a page before expanding anything.
MAX_FLAT_BLOCKS = 500_000


@dataclass(frozen=True)
class DimRef:
    """An attr value inside instance ``instance`` (a flat id) that is the size bound to its
    named dimension ``name``: known only once the instance's Inputs are typed."""

    instance: str
    name: str

    def __repr__(self):
        return f"<dimension {self.name!r} of {self.instance}>"


@dataclass(frozen=True)
class Instance:
    """One expanded instance: its flat id, its composite, where it is drawn (the flat id of the
    instance whose diagram holds it; "" for the page), and its ports' flat nodes by port name."""

    path: str
    composite: str
    level: str
    inputs: dict
    outputs: dict
    shares: str | None = None   # the flat id of the instance whose Variables it uses


@dataclass(frozen=True)
class Problem:
    node: str | None   # a flat id (an instance, or a block inside one)
    port: str | None
    message: str


#: Most names a problem lists (the project's composites, a composite's parameters or ports), and
#: the most characters of one: a file of 10,000 composites and 10,000 instances of a missing one
#: would otherwise print every name in every problem (10,000 x 10,000 names)
LISTED_NAMES, LISTED_CHARS = 8, 40


def listing(names, count: int | None = None) -> str:
    """``names`` (``count`` of them; default: ``len(names)``) for a problem's message: the first
    LISTED_NAMES (each cut to LISTED_CHARS), and how many more; "none" when there are none. Only
    the names shown are read."""
    count = len(names) if count is None else count
    shown = [n if len(n) <= LISTED_CHARS else n[:LISTED_CHARS - 1] + "…" for n in islice(names, LISTED_NAMES)]
    more = count - len(shown)
    return (", ".join(shown) + (f" and {more:,} more" if more else "")) or "none"


def _mixed_seed(seed, flat_id: str) -> int:
    """An inner block's seed mixed with its flat id: two instances of one composite draw
    different initial weights and random numbers, the same ones at every run."""
    return (int(seed) ^ zlib.crc32(flat_id.encode("utf-8"))) & 0x7FFFFFFF


def _has_dim(value) -> bool:
    if isinstance(value, DimRef):
        return True
    return isinstance(value, (list, tuple)) and any(_has_dim(x) for x in value)


def _dims_in(value, out: set) -> None:
    if isinstance(value, DimRef):
        out.add(value.instance)
    elif isinstance(value, (list, tuple)):
        for x in value:
            _dims_in(x, out)


class _Diagram:
    """What expanding a diagram needs that is the same for each of its instances, worked out
    once per flatten: a page of 1,000 instances of a 20-block composite asks the registry, scans
    attrs for references and finds the ports once, not 1,000 times (benchmarks/composites.py)."""

    __slots__ = ("nodes", "edges", "ports", "port_problem")

    def __init__(self, flattener, diagram: Page, comp=None):
        registry = flattener.registry
        #: in page order (the schedule's ties follow it): (nid, node, None for a block, or the
        #: composite it is an instance of, whether its attrs hold references, the seed to mix:
        #: the given or default seed, _NO_SEED for a block without one)
        self.nodes: list = []
        is_instance, variables = set(), set()
        for nid, node in diagram.nodes.items():
            name = composite_name(node.block)
            if name is not None:
                self.nodes.append((nid, node, name, False, _NO_SEED))
                is_instance.add(nid)
                continue
            refs = any(ref_inside(v) for v in node.attrs.values())
            spec = registry.get(node.block)
            seeded = spec is not None and "seed" in spec.attr_map
            if spec is not None and spec.role == "variable":
                variables.add(nid)
            self.nodes.append((nid, node, None, refs, spec.attr_map["seed"].default if seeded else _NO_SEED))
        #: in page order: (wire, whether an instance is at either end, whether the Hierarchy
        #: keeps it: it touches an instance or leaves a Variable, which sharing may replace)
        self.edges = []
        for e in diagram.edges:
            outer = e.src in is_instance or e.dst in is_instance
            self.edges.append((e, outer, outer or e.src in variables))
        self.ports, self.port_problem = (None, None) if comp is None else _ports(comp)


_NO_SEED = object()


class _Flattener:
    def __init__(self, page: Page, composites: dict, registry):
        self.page, self.composites, self.registry = page, composites, registry
        self.h = Hierarchy()
        self.nodes: dict[str, Node] = {}
        self.edges: list[Edge] = []
        self.diagrams: dict[str, _Diagram] = {}   # composite name -> its diagram, worked out
        self.known = ""                              # the project's composites, as problems list them

    def problem(self, node, port, message):
        self.h.problems.append(Problem(node, port, message))

    def diagram_of(self, name: str, comp) -> _Diagram:
        d = self.diagrams.get(name)
        if d is None:
            d = self.diagrams[name] = _Diagram(self, comp.page, comp)
        return d

    # ------------------------------------------------------------------ one diagram
    def expand(self, diagram: _Diagram, level: str, lookup, states: dict | None, chain: tuple) -> None:
        """Add the blocks of ``diagram`` drawn at ``level`` (a flat instance id, "" for the page)
        with its parameters looked up by ``lookup(kind, name, where)``; ``states`` holds the
        state of the Variables inside the top instance by their path in it (None on the page)."""
        prefix = f"{level}/" if level else ""
        here: dict[str, Instance] = {}
        nodes = self.nodes
        for nid, node, name, refs, seed in diagram.nodes:
            flat = prefix + nid
            if name is None:
                if prefix and not refs and seed is _NO_SEED and not states:   # the common case, inline
                    nodes[flat] = Node(flat, node.block, node.attrs, node.inputs, node.position, node.label, {})
                else:
                    self.add_block(flat, node, refs, seed, lookup, states, prefix)
                continue
            inst = self.expand_instance(flat, nid, node, name, level, lookup, states, chain)
            if inst is None:
                self.h.unexpanded.add(flat)
                self.nodes[flat] = Node(flat, node.block, {}, {}, node.position, node.label)
            else:
                here[nid] = inst
        edges, wires = self.edges, self.h.wires
        for e, outer, kept in diagram.edges:
            if outer:
                src = self.end(here, prefix, e.src, e.src_port, outgoing=True)
                dst = self.end(here, prefix, e.dst, e.dst_port, outgoing=False)
                if src is None or dst is None:
                    continue
                fe = Edge(src[0], src[1], dst[0], dst[1])
            else:
                fe = Edge(prefix + e.src, e.src_port, prefix + e.dst, e.dst_port)
            edges.append(fe)
            if (level and kept) or e.src in here or e.dst in here:
                wires[(level, e)] = fe

    def end(self, here, prefix, nid, port, outgoing):
        inst = here.get(nid)
        if inst is None:
            return prefix + nid, port
        table = inst.outputs if outgoing else inst.inputs
        flat = table.get(port)
        if flat is None:
            kind = "output" if outgoing else "input"
            names = listing(table)
            self.problem(inst.path, port, f"composite '{inst.composite}' has no {kind} port '{port}' "
                                          f"({kind}s: {names})")
            return None
        return flat, ("output" if outgoing else "input")

    def add_block(self, flat, node, refs, seed, lookup, states, prefix):
        attrs = node.attrs
        if refs:
            attrs = {k: substitute(v, lambda kind, name: lookup(kind, name, flat)) for k, v in attrs.items()}
            dims: set = set()
            for v in attrs.values():
                _dims_in(v, dims)
            if dims:
                self.h.dim_nodes[flat] = frozenset(dims)
            if seed is not _NO_SEED:
                seed = attrs.get("seed", seed)
        elif seed is not _NO_SEED:
            seed = attrs.get("seed", seed)
        if prefix:
            if seed is not _NO_SEED and isinstance(seed, int) and not isinstance(seed, bool):
                attrs = dict(attrs, seed=_mixed_seed(seed, flat))
            inner = states.get(flat.partition("/")[2]) if states else None
            state = dict(inner) if inner else {}
        else:
            state = node.state
        self.nodes[flat] = Node(flat, node.block, attrs, node.inputs, node.position, node.label, state)

    # ------------------------------------------------------------------ one instance
    def expand_instance(self, flat, nid, node, name, level, lookup, states, chain):
        comp = self.composites.get(name)
        if comp is None:
            known = self.known or listing(sorted(self.composites))
            self.known = known
            self.problem(flat, None, f"there is no composite '{name}' in this project (composites: {known})")
            return None
        if name in chain:
            cycle = " > ".join(chain[chain.index(name):] + (name,))
            self.problem(flat, None, f"composite '{name}' contains itself: {cycle}")
            return None
        if len(chain) >= MAX_NESTING:
            self.problem(flat, None, f"composites nest more than {MAX_NESTING} levels deep here")
            return None
        values = self.param_values(flat, node, comp, lookup)
        if values is None:
            return None
        diagram = self.diagram_of(name, comp)
        if diagram.port_problem:
            self.problem(flat, None, diagram.port_problem)
            return None
        inputs = {port: f"{flat}/{inner}" for port, inner in diagram.ports[0].items()}
        outputs = {port: f"{flat}/{inner}" for port, inner in diagram.ports[1].items()}
        share = node.attrs.get(SHARE_ATTR)
        shares = None
        if share not in (None, ""):
            # beside it: an instance inside another would tie this one to a part of that one
            ok = isinstance(share, str) and "/" not in share
            shares = (f"{level}/{share}" if level else share) if ok else None
            if shares is None:
                self.problem(flat, None, f"'{SHARE_ATTR}' must name another instance beside it, "
                                         f"got {share!r}")
                return None

        def inner(kind, pname, where):
            if kind == PARAM_REF:
                if pname not in values:
                    params = listing((p.name for p in comp.params), len(comp.params))
                    self.problem(where, None, f"refers to parameter '{pname}', which composite '{name}' "
                                              f"does not declare (parameters: {params})")
                    return None
                return values[pname]
            return DimRef(flat, pname)

        # An instance drawn on the page keeps the state of every Variable inside it, nested
        # instances' included, under their path inside it.
        self.expand(diagram, flat, inner, _states_by_path(node.state) if states is None else states,
                    chain + (name,))
        inst = Instance(flat, name, level, inputs, outputs, shares)
        self.h.instances[flat] = inst
        return inst

    def param_values(self, flat, node, comp, lookup) -> dict | None:
        values, ok = {}, True
        declared = {p.name: p for p in comp.params}
        for key, given in node.attrs.items():
            if key == SHARE_ATTR:
                continue
            if key not in declared:
                names = listing(declared)
                self.problem(flat, None, f"composite '{comp.name}' has no parameter '{key}' (parameters: {names})")
                ok = False
        for p in comp.params:
            given = node.attrs.get(p.name)
            if given is None:
                if p.required:
                    self.problem(flat, None, f"parameter '{p.name}' of composite '{comp.name}' needs a value")
                    ok = False
                    continue
                given = p.default
            if ref_inside(given):
                given = substitute(given, lambda kind, n: lookup(kind, n, flat))
            if _has_dim(given):
                values[p.name] = given   # checked once the dimension is known
                continue
            try:
                values[p.name] = p.validate(given) if given is not None else None
            except AttrError as exc:
                self.problem(flat, None, f"parameter '{p.name}': {exc}")
                ok = False
        return values if ok else None

    # ------------------------------------------------------------------ sharing
    def share(self) -> None:
        """Point the readers of each sharing instance's Variables at the shared instance's."""
        insts = self.h.instances
        targets: dict[str, str] = {}
        for path, inst in insts.items():
            if inst.shares is None:
                continue
            seen, target = {path}, inst.shares
            while target in insts and insts[target].shares is not None and target not in seen:
                seen.add(target)
                target = insts[target].shares
            other = insts.get(target)
            if other is None or target in seen:
                why = ("an instance cannot share its own Variables" if inst.shares == path else
                       "they share in a circle" if target in seen else
                       f"there is no instance '{inst.shares}' beside it")
                self.problem(path, None, f"cannot share Variables with '{inst.shares}': {why}")
            elif other.composite != inst.composite:
                self.problem(path, None, f"cannot share Variables with '{target}': it is a "
                                         f"'{other.composite}', not a '{inst.composite}'")
            else:
                targets[path] = target
        if not targets:
            return
        # One pass over the blocks (not one per sharing instance): a Variable inside a sharing
        # instance reads the one at the same path inside the shared instance, and that one may
        # itself sit inside an instance that shares (nested), hence the loop.
        for flat, node in self.nodes.items():
            if "/" not in flat:
                continue
            spec = self.registry.get(node.block)
            if spec is None or spec.role != "variable":
                continue
            source = _shared_source(flat, targets)
            if source != flat:
                self.h.shared[flat] = source
                self.check_shared(flat, source, targets)
        alias = self.h.shared
        for flat in alias:
            del self.nodes[flat]
        self.edges = [Edge(alias.get(e.src, e.src), e.src_port, e.dst, e.dst_port) for e in self.edges]
        self.h.wires = {k: Edge(alias.get(e.src, e.src), e.src_port, e.dst, e.dst_port)
                        for k, e in self.h.wires.items()}


    def check_shared(self, flat: str, source: str, targets: dict) -> None:
        """A Variable read from another instance must be the one this instance would have made
        (same shape, dtype, trainable...): instances given different parameters (units 7 sharing
        with units 4) would otherwise compute silently with the other's shape."""
        mine, theirs = self.nodes[flat].attrs, self.nodes.get(source)
        if theirs is None:
            return
        for key in sorted(set(mine) | set(theirs.attrs)):
            if key == "seed":
                continue
            a, b = _dim_names(mine.get(key)), _dim_names(theirs.attrs.get(key))
            if not _same(a, b):
                owner = next(p for p in targets if flat.startswith(p + "/"))
                self.problem(owner, None, f"cannot share Variables with '{targets[owner]}': its "
                                          f"Variable {source} has {key}={b!r}, this instance's "
                                          f"{flat} would have {key}={a!r} (give both the same "
                                          f"parameters)")
                return


def _dim_names(value):
    """An attr value with each dimension reference as its name: two instances' references
    differ by instance but mean the same size when they share Variables."""
    if isinstance(value, DimRef):
        return value.name
    if isinstance(value, (list, tuple)):
        return [_dim_names(x) for x in value]
    return value


def _same(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype
                and np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
    return type(a) is type(b) and a == b


def _shared_source(flat: str, targets: dict) -> str:
    """The Variable ``flat`` reads when the instances in ``targets`` share others' Variables."""
    for _ in range(MAX_NESTING + 1):
        parts = flat.split("/")
        for i in range(1, len(parts)):
            prefix = "/".join(parts[:i])
            if prefix in targets:
                flat = targets[prefix] + "/" + "/".join(parts[i:])
                break
        else:
            return flat
    return flat


def _ports(comp) -> tuple:
    """A composite's ports, ``(({input name: Input node id}, {output name: Output node id}),
    None)``, or ``(None, why not)`` when two share a name or one's name is not an identifier."""
    inputs, outputs = {}, {}
    for nid, node in comp.page.nodes.items():
        table = inputs if node.block == COMPOSITE_INPUT else outputs if node.block == COMPOSITE_OUTPUT else None
        if table is None:
            continue
        port = node.attrs.get("name", "x" if table is inputs else "y")
        if not isinstance(port, str) or not port.isidentifier():
            return None, f"composite '{comp.name}': the port {nid} is named {port!r}, not a plain identifier"
        if port in inputs or port in outputs:
            return None, f"composite '{comp.name}' has two ports named '{port}'"
        table[port] = nid
    return (inputs, outputs), None


def _states_by_path(state: dict) -> dict:
    """A top instance's state (``{"blk/W:value": array}``) by inner path: ``{"blk/W": {"value":
    array}}`` (what ``inner_state`` gives one path, for all of them in one pass)."""
    out: dict = {}
    for key, value in state.items():
        path, sep, name = key.partition(":") if isinstance(key, str) else ("", "", "")
        if sep:
            out.setdefault(path, {})[name] = value
    return out


def flatten(page: Page, composites: dict, registry) -> tuple[Page, Hierarchy]:
    """The flat page of ``page`` (``page`` itself when it has no instance) and its Hierarchy."""
    if _plain_page(page):
        return page, Hierarchy()
    f = _Flattener(page, composites or {}, registry)
    size = flat_size(page, composites or {})
    if size > MAX_FLAT_BLOCKS:
        f.problem(None, None, f"the page would flatten to {size:,} blocks (each composite instance "
                              f"expanded, nested ones included); the limit is {MAX_FLAT_BLOCKS:,}")
        h = f.h
        h.unexpanded.update(nid for nid, n in page.nodes.items() if composite_name(n.block))
        return page, h

    own = composite_name(page.name)   # a definition compiled on its own: its parameters' defaults
    comp = (composites or {}).get(own) if own else None

    def top(kind, name, where):
        if comp is not None:
            if kind == DIM_REF:
                return DimRef("", name)
            p = comp.param(name)
            if p is not None:
                return None if p.required else p.default
        f.problem(where, None, f"refers to {'parameter' if kind == PARAM_REF else 'dimension'} "
                               f"'{name}', but is not inside a composite with one")
        return None

    f.expand(_Diagram(f, page), "", top, None, (own,) if own else ())
    f.share()
    flat = Page(page.name, f.nodes, f.edges, _flat_ref(page.loss, f.h), dict(page.feeds), page.text,
                [_flat_ref(m, f.h) for m in page.metrics])
    return flat, f.h


def flat_size(page: Page, composites: dict) -> int:
    """How many blocks ``page`` flattens to (a composite in a cycle counts as one block: the
    cycle is refused on its own; so does an instance nested past MAX_NESTING, which is refused
    too), counted without expanding: each composite's diagram is read once (once a depth when it
    sits near the nesting limit), so the count is exact, however far past MAX_FLAT_BLOCKS, and
    costs what reading the diagrams does. The recursion is as deep as the nesting flattening
    allows, whatever chain of composites a file holds."""
    sizes: dict[str, int] = {}          # by name: counted in full
    cut: dict[tuple, int] = {}          # by (name, depth): counted down to MAX_NESTING only

    def size_of(name: str, depth: int, active: set) -> tuple[int, bool]:
        if name in sizes:
            return sizes[name], False
        if (name, depth) in cut:
            return cut[(name, depth)], True
        comp = composites.get(name)
        if comp is None or name in active:
            return 1, False
        if depth >= MAX_NESTING:
            return 1, True
        active.add(name)
        total, truncated = 0, False
        for node in comp.page.nodes.values():
            inner = composite_name(node.block)
            if inner is None:
                total += 1
            else:
                n, t = size_of(inner, depth + 1, active)
                total, truncated = total + n, truncated or t
        active.discard(name)
        if truncated:
            cut[(name, depth)] = total
        else:
            sizes[name] = total
        return total, truncated

    own = composite_name(page.name)     # a definition compiled on its own is one level down
    depth = 1 if own in composites else 0
    total = 0
    for node in page.nodes.values():
        inner = composite_name(node.block)
        total += 1 if inner is None else size_of(inner, depth, set())[0]
    return total


def _plain_page(page: Page) -> bool:
    """No instance on the page and no parameter or dimension reference in its attrs (one pass:
    a big page's nodes are read once)."""
    for n in page.nodes.values():
        block = n.block
        if type(block) is str and block.startswith(PREFIX) and composite_name(block):
            return False
        if n.attrs and any(ref_inside(v) for v in n.attrs.values()):
            return False
    return True


def _flat_ref(ref: str | None, h: Hierarchy) -> str | None:
    """A ``node:port`` reference drawn on the page, in flat ids (an instance's output port is its
    Output block's output)."""
    if not ref:
        return ref
    node, port = split_port_text(ref)
    inst = h.instances.get(node)
    if inst is None:
        return ref
    if port is None:
        port = next(iter(inst.outputs), None)
    flat = inst.outputs.get(port)
    return port_text(flat, "output") if flat else ref
