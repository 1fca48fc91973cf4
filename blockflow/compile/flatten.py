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
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass, field

from blockflow.composite import (DIM_REF, INPUT_BLOCK, MAX_NESTING, OUTPUT_BLOCK, PARAM_REF, SHARE_ATTR,
                                 composite_name, inner_state, substitute)
from blockflow.project import Edge, Node, Page, port_text, split_port_text
from blockflow.spec import AttrError

__all__ = ["DimRef", "Instance", "Hierarchy", "Problem", "flatten", "COMPOSITE_INPUT", "COMPOSITE_OUTPUT"]

#: the blocks that are a composite's ports (declared in the block library)
COMPOSITE_INPUT = INPUT_BLOCK
COMPOSITE_OUTPUT = OUTPUT_BLOCK


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
class Problem:
    node: str | None   # a flat id (an instance, or a block inside one)
    port: str | None
    message: str


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


@dataclass
class Hierarchy:
    """What flattening knows: the instances, the flat wire of each drawn wire by level, the
    Variables an instance reads from another, the nodes whose attrs wait for dimensions."""

    instances: dict = field(default_factory=dict)        # flat id -> Instance
    #: (level, drawn Edge) -> flat Edge, for every wire drawn inside an instance or touching one
    wires: dict = field(default_factory=dict)
    shared: dict = field(default_factory=dict)           # flat Variable id left out -> flat id read
    dim_nodes: dict = field(default_factory=dict)        # flat id -> the instances its DimRefs name
    problems: list = field(default_factory=list)
    unexpanded: set = field(default_factory=set)         # instances left as they were (problems)

    @property
    def empty(self) -> bool:
        return not self.instances and not self.unexpanded


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


class _Flattener:
    def __init__(self, page: Page, composites: dict, registry):
        self.page, self.composites, self.registry = page, composites, registry
        self.h = Hierarchy()
        self.nodes: dict[str, Node] = {}
        self.edges: list[Edge] = []

    def problem(self, node, port, message):
        self.h.problems.append(Problem(node, port, message))

    # ------------------------------------------------------------------ one diagram
    def expand(self, diagram: Page, level: str, lookup, top_state: dict | None, chain: tuple) -> None:
        """Add the blocks of ``diagram`` drawn at ``level`` (a flat instance id, "" for the page)
        with its parameters looked up by ``lookup(kind, name, where)``."""
        prefix = f"{level}/" if level else ""
        here: dict[str, Instance] = {}
        for nid, node in diagram.nodes.items():
            flat = prefix + nid
            name = composite_name(node.block)
            if name is None:
                self.add_block(flat, node, lookup, top_state, prefix)
                continue
            inst = self.expand_instance(flat, nid, node, name, level, lookup, top_state, chain)
            if inst is None:
                self.h.unexpanded.add(flat)
                self.nodes[flat] = Node(flat, node.block, {}, {}, node.position, node.label)
            else:
                here[nid] = inst
        for e in diagram.edges:
            src = self.end(here, prefix, e.src, e.src_port, outgoing=True)
            dst = self.end(here, prefix, e.dst, e.dst_port, outgoing=False)
            if src is None or dst is None:
                continue
            fe = Edge(src[0], src[1], dst[0], dst[1])
            self.edges.append(fe)
            if level or e.src in here or e.dst in here:
                self.h.wires[(level, e)] = fe

    def end(self, here, prefix, nid, port, outgoing):
        inst = here.get(nid)
        if inst is None:
            return prefix + nid, port
        table = inst.outputs if outgoing else inst.inputs
        flat = table.get(port)
        if flat is None:
            kind = "output" if outgoing else "input"
            names = ", ".join(table) or "none"
            self.problem(inst.path, port, f"composite '{inst.composite}' has no {kind} port '{port}' "
                                          f"({kind}s: {names})")
            return None
        return flat, ("output" if outgoing else "input")

    def add_block(self, flat, node, lookup, top_state, prefix):
        attrs = node.attrs
        if any(_ref_inside(v) for v in attrs.values()):
            attrs = {k: substitute(v, lambda kind, name: lookup(kind, name, flat)) for k, v in attrs.items()}
        if prefix:
            spec = self.registry.get(node.block)
            if spec is not None and "seed" in spec.attr_map:
                given = attrs.get("seed", spec.attr_map["seed"].default)
                if isinstance(given, int) and not isinstance(given, bool):
                    attrs = dict(attrs, seed=_mixed_seed(given, flat))
            state = inner_state(top_state, flat.partition("/")[2]) if top_state else {}
        else:
            state = node.state
        dims: set = set()
        for v in attrs.values():
            _dims_in(v, dims)
        if dims:
            self.h.dim_nodes[flat] = frozenset(dims)
        self.nodes[flat] = Node(flat, node.block, attrs, node.inputs, node.position, node.label, state)

    # ------------------------------------------------------------------ one instance
    def expand_instance(self, flat, nid, node, name, level, lookup, top_state, chain):
        comp = self.composites.get(name)
        if comp is None:
            known = ", ".join(sorted(self.composites)) or "none"
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
        ports = self.ports(flat, comp)
        if ports is None:
            return None
        inputs, outputs = ports
        share = node.attrs.get(SHARE_ATTR)
        shares = None
        if share not in (None, ""):
            shares = (f"{level}/{share}" if level else share) if isinstance(share, str) else None
            if shares is None:
                self.problem(flat, None, f"'{SHARE_ATTR}' must name another instance, got {share!r}")
                return None

        def inner(kind, pname, where):
            if kind == PARAM_REF:
                if pname not in values:
                    params = ", ".join(p.name for p in comp.params) or "none"
                    self.problem(where, None, f"refers to parameter '{pname}', which composite '{name}' "
                                              f"does not declare (parameters: {params})")
                    return None
                return values[pname]
            return DimRef(flat, pname)

        # An instance drawn on the page keeps the state of every Variable inside it, nested
        # instances' included, under their path inside it.
        self.expand(comp.page, flat, inner, node.state if top_state is None else top_state, chain + (name,))
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
                names = ", ".join(declared) or "none"
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
            if _ref_inside(given):
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

    def ports(self, flat, comp):
        """The composite's ports: ({input name: flat Input id}, {output name: flat Output id})."""
        inputs, outputs = {}, {}
        for nid, node in comp.page.nodes.items():
            table = inputs if node.block == COMPOSITE_INPUT else outputs if node.block == COMPOSITE_OUTPUT else None
            if table is None:
                continue
            port = node.attrs.get("name", "x" if table is inputs else "y")
            if not isinstance(port, str) or not port.isidentifier():
                self.problem(flat, None, f"composite '{comp.name}': the port {nid} is named {port!r}, "
                                         f"not a plain identifier")
                return None
            if port in inputs or port in outputs:
                self.problem(flat, None, f"composite '{comp.name}' has two ports named '{port}'")
                return None
            table[port] = f"{flat}/{nid}"
        return inputs, outputs

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
                why = ("they share in a circle" if target in seen else
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
        alias = self.h.shared
        for flat in alias:
            del self.nodes[flat]
        self.edges = [Edge(alias.get(e.src, e.src), e.src_port, e.dst, e.dst_port) for e in self.edges]
        self.h.wires = {k: Edge(alias.get(e.src, e.src), e.src_port, e.dst, e.dst_port)
                        for k, e in self.h.wires.items()}


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


def _ref_inside(value) -> bool:
    if type(value) is dict:
        return len(value) == 1 and next(iter(value)) in (PARAM_REF, DIM_REF)
    return isinstance(value, (list, tuple)) and any(_ref_inside(x) for x in value)


def flatten(page: Page, composites: dict, registry) -> tuple[Page, Hierarchy]:
    """The flat page of ``page`` (``page`` itself when it has no instance) and its Hierarchy."""
    if not any(composite_name(n.block) for n in page.nodes.values()) and not _has_refs(page):
        return page, Hierarchy()
    f = _Flattener(page, composites or {}, registry)
    size = _flat_size(page, composites or {})
    if size > MAX_FLAT_BLOCKS:
        f.problem(None, None, f"the page would flatten to {size:,} blocks (its composites' instances "
                              f"nested in each other); the limit is {MAX_FLAT_BLOCKS:,}")
        h = f.h
        h.unexpanded.update(nid for nid, n in page.nodes.items() if composite_name(n.block))
        return page, h

    def top(kind, name, where):
        f.problem(where, None, f"refers to {'parameter' if kind == PARAM_REF else 'dimension'} "
                               f"'{name}', but is not inside a composite with one")
        return None

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

    f.expand(page, "", top, None, (own,) if own else ())
    f.share()
    flat = Page(page.name, f.nodes, f.edges, _flat_ref(page.loss, f.h), dict(page.feeds), page.text,
                [_flat_ref(m, f.h) for m in page.metrics])
    return flat, f.h


def _flat_size(page: Page, composites: dict) -> int:
    """How many blocks ``page`` flattens to (a composite in a cycle counts as one block: the
    cycle is refused on its own), counted without expanding, stopping past the limit."""
    sizes: dict[str, int] = {}

    def size_of(name: str, active: set) -> int:
        if name in sizes:
            return sizes[name]
        comp = composites.get(name)
        if comp is None or name in active:
            return 1
        active.add(name)
        total = 0
        for node in comp.page.nodes.values():
            inner = composite_name(node.block)
            total += 1 if inner is None else size_of(inner, active)
            if total > MAX_FLAT_BLOCKS:
                break
        active.discard(name)
        sizes[name] = total
        return total

    total = 0
    for node in page.nodes.values():
        inner = composite_name(node.block)
        total += 1 if inner is None else size_of(inner, set())
        if total > MAX_FLAT_BLOCKS:
            break
    return total


def _has_refs(page: Page) -> bool:
    return any(_ref_inside(v) for n in page.nodes.values() for v in n.attrs.values())


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
