"""Composite blocks as plain data: a named, documented diagram with parameters, used as a block.

A composite's diagram is a :class:`~blockflow.project.Page` named ``@Name``: its ``Input`` and
``Output`` blocks (blockflow.spec's ``COMPOSITE_INPUT``/``COMPOSITE_OUTPUT``) are its ports, in
their page order, named by their ``name`` attr. An *instance* is a node whose block is ``@Name``;
its attrs give the composite's parameters (and ``share_variables_with``); its ``state`` holds the
values of the Variables inside it, under ``"inner/path:key"``. Inner attrs refer to a parameter
as ``{"$param": "units"}`` and to a named dimension of an input's shape as ``{"$dim": "features"}``
(anywhere in the value: ``[{"$dim": "features"}, {"$param": "units"}]``); compile/flatten.py
substitutes them per instance.

Like project.py: no Qt, no blocks, no files. The mutators here take the Project first, so that
the editor's ``Document.apply(None, mutator, ...)`` runs them like Project's own.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field

from blockflow.errors import ProjectError
# SHARE_ATTR: the instance attr naming another instance (same page or definition) whose
# Variables it uses, kept in project.py, whose renames follow it
from blockflow.project import SHARE_ATTR, Change, Page, Project, text_problem, valid_node_id
from blockflow.spec import Attr, BlockSpec, Input, Output

__all__ = ["Composite", "PREFIX", "PARAM_REF", "DIM_REF", "SHARE_ATTR", "block_name", "composite_name",
           "ref_of", "refs_in", "substitute", "state_key", "inner_state", "split_flat",
           "composite_name_problem", "uses", "cycle_through", "find_cycle", "insert_composite", "remove_composite",
           "composites_problem", "insert_composites", "remove_composites",
           "rename_composite", "replace_composite", "instances_of", "composite_spec", "ProjectBlocks",
           "INPUT_BLOCK", "OUTPUT_BLOCK"]

#: the blocks (of the block library) that are a composite's ports
INPUT_BLOCK = "Input"
OUTPUT_BLOCK = "Output"

#: an instance's block name is PREFIX + the composite's name (no registry block starts with it)
PREFIX = "@"
PARAM_REF = "$param"
DIM_REF = "$dim"
#: how deep instances may nest inside instances (a bound on what a file can make a compile do)
MAX_NESTING = 32


def block_name(name: str) -> str:
    """The block name of an instance of composite ``name``: ``"Dense"`` -> ``"@Dense"``."""
    return PREFIX + name


def composite_name(block: str) -> str | None:
    """The composite an instance's block names (``"@Dense"`` -> ``"Dense"``), None for a block."""
    return block[len(PREFIX):] if isinstance(block, str) and block.startswith(PREFIX) else None


def composite_name_problem(name: str) -> str:
    """Why ``name`` cannot name a composite ("" when it can): a node id's rules (letters, digits,
    ``_ . -``, a letter or ``_`` first), so that ``@name`` and node ids made from it stay valid."""
    if not valid_node_id(name):
        return f"'{name}' is not a valid composite name: a letter or _ first, then letters, digits, _ . -"
    return ""


def ref_of(value) -> tuple[str, str] | None:
    """``("$param", name)`` or ``("$dim", name)`` when ``value`` is a reference, else None."""
    if type(value) is dict and len(value) == 1:
        (key, name), = value.items()
        if key in (PARAM_REF, DIM_REF) and isinstance(name, str):
            return key, name
    return None


def refs_in(value):
    """Every reference inside an attr value (the value itself, or in its lists), in order."""
    ref = ref_of(value)
    if ref is not None:
        yield ref
    elif isinstance(value, (list, tuple)):
        for x in value:
            yield from refs_in(x)


def substitute(value, lookup):
    """``value`` with each reference replaced by ``lookup(kind, name)`` (lists copied, the rest
    kept); ``value`` itself when it holds no reference."""
    ref = ref_of(value)
    if ref is not None:
        return lookup(*ref)
    if isinstance(value, (list, tuple)) and any(True for _ in refs_in(value)):
        return [substitute(x, lookup) for x in value]
    return value


def split_flat(flat_id: str) -> tuple[str, str]:
    """A flat node id (``d1/blk/W``) as (top node ``d1``, path inside it ``blk/W``; "" for a top
    node)."""
    top, _, rest = flat_id.partition("/")
    return top, rest


def state_key(inner: str, key: str) -> str:
    """Where an instance keeps state ``key`` of its inner node ``inner``: ``"blk/W:value"``."""
    return f"{inner}:{key}"


def inner_state(state: dict, inner: str) -> dict:
    """The state of inner node ``inner`` kept in its top instance's ``state``."""
    head = inner + ":"
    return {k[len(head):]: v for k, v in state.items() if k.startswith(head)}


@dataclass(eq=False)
class Composite:
    """A composite block: ``page`` (named ``@name``) is its diagram; ``params`` its parameters,
    declared as attrs are (kind, default, choices, range, doc); ``origin`` says where it came
    from when it was inserted from a layer library (``{"library", "name", "version"}``), so that
    "update from library" can tell a newer version (None: made in this project)."""

    name: str
    doc: str = ""
    params: list = field(default_factory=list)
    page: Page | None = None
    origin: dict | None = None

    def __post_init__(self):
        if self.page is None:
            self.page = Page(block_name(self.name))

    @property
    def block(self) -> str:
        return block_name(self.name)

    def param(self, name: str) -> Attr | None:
        return next((p for p in self.params if p.name == name), None)

    def copy(self) -> "Composite":
        """A deep copy (its params, frozen Attrs, are shared: a copy would lose their
        "no default" marker's identity)."""
        return copy.deepcopy(self, {id(p): p for p in self.params})

    def __eq__(self, other):
        if not isinstance(other, Composite):
            return NotImplemented
        return (self.name == other.name and self.doc == other.doc and self.origin == other.origin
                and list(self.params) == list(other.params) and self.page == other.page)


def instances_of(project: Project, name: str):
    """``(diagram name, node id)`` of every instance of composite ``name``, on pages and inside
    definitions."""
    block = block_name(name)
    for page in project.diagrams():
        for nid, node in page.nodes.items():
            if node.block == block:
                yield page.name, nid


def uses(composite: Composite) -> set[str]:
    """The composites ``composite``'s diagram uses directly."""
    return {n for n in (composite_name(node.block) for node in composite.page.nodes.values()) if n}


def cycle_through(composites: dict, name: str) -> list[str] | None:
    """A chain of composites leading from ``name`` back to it (``["A", "B", "A"]``) when it
    contains itself, directly or not; None when it does not. Iterative: a file may chain
    10,000 composites, each using the next (no recursion limit to reach)."""
    return _search(composites, (name,), stop_at=name)


def find_cycle(composites: dict) -> list[str] | None:
    """The first chain of composites that contains itself (``["A", "B", "A"]``: A holds itself
    through B), in the order of ``composites``; None when none does. One walk of the whole graph
    (each composite visited once), not one per composite."""
    return _search(composites, tuple(composites), stop_at=None)


def _search(composites: dict, starts, stop_at) -> list[str] | None:
    """Depth-first, without recursion, from each of ``starts``: the path back to ``stop_at`` (or,
    when it is None, to any composite on the path: a cycle), or None."""
    done: set = set()
    for start in starts:
        if start in done:
            continue
        path, on_path = [start], {start}
        stack = [iter(_uses_sorted(composites, start))]
        while stack:
            inner = next(stack[-1], None)
            if inner is None:
                stack.pop()
                done.add(path[-1])
                on_path.discard(path.pop())
                continue
            if inner == stop_at or (stop_at is None and inner in on_path):
                return path[path.index(inner):] + [inner]
            if inner in on_path or inner in done:
                continue
            path.append(inner)
            on_path.add(inner)
            stack.append(iter(_uses_sorted(composites, inner)))
    return None


def _uses_sorted(composites: dict, name: str) -> list[str]:
    comp = composites.get(name)
    return sorted(uses(comp)) if comp is not None else []


# ---------------------------------------------------------------------------------- mutators
# Each takes the Project first (Document.apply(None, mutator, ...) runs them) and returns a Change
# whose ``page`` is the definition's diagram name; ``before`` is what the inverse takes back.

def _new_problem(project: Project, composite: Composite) -> str:
    """Why ``composite`` cannot be added to ``project`` as it is ("" when it can), its cycles aside."""
    problem = composite_name_problem(composite.name)
    if problem:
        return problem
    if composite.name in project.composites:
        return f"there is already a composite named '{composite.name}'"
    problem = text_problem(composite.doc)
    if problem:
        return f"the composite's documentation {problem}"
    if composite.page.name != composite.block:
        return f"composite '{composite.name}''s diagram must be named '{composite.block}'"
    return ""


def _check_new(project: Project, composite: Composite) -> None:
    problem = _new_problem(project, composite)
    if problem:
        raise ProjectError(problem)


def insert_composite(project: Project, composite: Composite) -> Change:
    """Add a composite definition (refused when it would contain itself)."""
    _check_new(project, composite)
    project.composites[composite.name] = composite
    # only a definition drawing an instance of it can close a cycle through it: most inserts
    # (an import puts those used first) need no walk of all they use
    block = composite.block
    used = any(node.block == block for c in project.composites.values() for node in c.page.nodes.values())
    cycle = cycle_through(project.composites, composite.name) if used else None
    if cycle:
        del project.composites[composite.name]
        raise ProjectError(f"composite '{composite.name}' would contain itself: {' > '.join(cycle)}")
    return Change(composite.block, True, pages_added=(composite.block,), before=None)


def composites_problem(project: Project, composites: list, replacing: list = ()) -> str:
    """Why ``composites`` cannot be added to ``project``, with ``replacing`` put in place of the
    definitions of their names, all at once ("" when they can): each checked as insert_composite
    and replace_composite check one, then one walk from them all for a cycle (any new cycle goes
    through one of them). insert_composite for each looks through every definition for instances
    of the new one: for 10,000 composites, 10,000 passes over 10,000 definitions."""
    if not composites and not replacing:
        return "there is no composite to add"
    seen: dict = {}
    for comp in composites:
        problem = _new_problem(project, comp) or (
            f"the composite '{comp.name}' is added twice" if comp.name in seen else "")
        if problem:
            return problem
        seen[comp.name] = comp
    for comp in replacing:
        if comp.name not in project.composites or comp.name in seen:
            return f"there is no composite '{comp.name}' to replace"
        if text_problem(comp.doc):
            return f"the composite's documentation {text_problem(comp.doc)}"
        seen[comp.name] = comp
    cycle = _search({**project.composites, **seen}, tuple(seen), stop_at=None)
    return f"composite '{cycle[0]}' would contain itself: {' > '.join(cycle)}" if cycle else ""


def insert_composites(project: Project, composites: list) -> Change:
    """Add several definitions as one edit (File > Import Composites, a layer of the library),
    refused whole when one cannot be added (composites_problem)."""
    problem = composites_problem(project, composites)
    if problem:
        raise ProjectError(problem)
    project.composites.update((c.name, c) for c in composites)
    blocks = tuple(c.block for c in composites)
    return Change(blocks[0], True, pages_added=blocks, before=None)


def remove_composites(project: Project, names) -> Change:
    """Take back definitions insert_composites added (its undo). Never refused for their
    instances: with every later edit undone, those left were on their diagrams before the
    definitions came (instances of unknown composites then) and are so again. ``before`` is the
    list of the Composites removed."""
    comps = [project.composite(name) for name in names]
    if not comps:
        raise ProjectError("there is no composite to remove")
    for comp in comps:
        del project.composites[comp.name]
    blocks = tuple(c.block for c in comps)
    return Change(blocks[0], True, pages_removed=blocks, before=comps)


def remove_composite(project: Project, name: str) -> Change:
    """Remove a definition no instance uses; ``before`` is the Composite, for insert_composite."""
    comp = project.composite(name)
    used = [f"{d}/{n}" for d, n in instances_of(project, name) if d != comp.block]
    if used:
        more = f" and {len(used) - 3} more" if len(used) > 3 else ""
        raise ProjectError(f"composite '{name}' is used by {', '.join(used[:3])}{more}; "
                           f"ungroup or delete those first")
    del project.composites[name]
    return Change(comp.block, True, pages_removed=(comp.block,), before=comp)


def rename_composite(project: Project, old: str, new: str) -> Change:
    """Rename a composite and every instance's block name with it."""
    comp = project.composite(old)
    problem = composite_name_problem(new)
    if problem:
        raise ProjectError(problem)
    if new != old and new in project.composites:
        raise ProjectError(f"there is already a composite named '{new}'")
    users = list(instances_of(project, old))
    comp.name = new
    comp.page.name = block_name(new)
    project.composites = {(new if k == old else k): v for k, v in project.composites.items()}
    for diagram, nid in users:
        project.page(block_name(new) if diagram == block_name(old) else diagram).nodes[nid].block = block_name(new)
    return Change(block_name(new), True, page_renamed=(block_name(old), block_name(new)))


def replace_composite(project: Project, composite: Composite) -> Change:
    """Put ``composite`` in place of the definition of the same name (its documentation,
    parameters, origin or whole diagram changed: an import, an update from the library); every
    instance follows. ``before`` is the old definition, for the same mutator to put back."""
    old = project.composite(composite.name)
    problem = text_problem(composite.doc)
    if problem:
        raise ProjectError(f"the composite's documentation {problem}")
    project.composites[composite.name] = composite
    cycle = cycle_through(project.composites, composite.name)
    if cycle:
        project.composites[composite.name] = old
        raise ProjectError(f"composite '{composite.name}' would contain itself: {' > '.join(cycle)}")
    return Change(composite.block, True, fields=("definition",), before=old)


# ---------------------------------------------------------------------------------- as a block

def _port_name(node, default: str) -> str:
    name = node.attrs.get("name", default)
    return name if isinstance(name, str) else default


def _flattened(*args, **kwargs):
    raise RuntimeError("a composite block is flattened by the compiler; it never runs itself")


def composite_spec(composite: Composite) -> BlockSpec:
    """The composite as a BlockSpec, for what draws, documents or edits an instance like any
    block (its ports, in the order of its Input and Output blocks, and its parameters as attrs,
    with ``share_variables_with``). The compiler never runs it: it flattens the instance."""
    inputs, outputs = [], []
    for node in composite.page.nodes.values():
        if node.block == INPUT_BLOCK:
            dtype = node.attrs.get("dtype", "float32")
            inputs.append(Input(_port_name(node, "x"), dtype=dtype if isinstance(dtype, str) else "any",
                                doc=str(node.attrs.get("doc", ""))))
        elif node.block == OUTPUT_BLOCK:
            outputs.append(Output(_port_name(node, "y"), doc=str(node.attrs.get("doc", ""))))
    attrs = tuple(composite.params) + (
        Attr(SHARE_ATTR, "str", "", doc="another instance (beside this one) whose Variables this one uses"),)
    seen_in: dict = {}
    for p in inputs:
        seen_in.setdefault(p.name, p)
    seen_out: dict = {}
    for p in outputs:
        seen_out.setdefault(p.name, p)
    inputs, outputs = tuple(seen_in.values()), tuple(seen_out.values())
    return BlockSpec(
        name=composite.block, category="composites", doc=composite.doc or f"The composite {composite.name}.",
        inputs=inputs, outputs=outputs, attrs=attrs, infer=_flattened, forward=_flattened, vjp=None,
        role="op", gradient="vjp", aliases=(), source=f"the project's composite '{composite.name}'",
        vjp_context=frozenset(), forward_context=frozenset(), initial=None, refs=(),
        attr_map={a.name: a for a in attrs}, input_map={p.name: p for p in inputs},
        output_map={p.name: p for p in outputs})


class ProjectBlocks:
    """A registry's blocks and a project's composites, looked up by block name (``@Dense``: the
    composite's spec, made again when its definition changed)."""

    def __init__(self, registry, project: Project):
        self.registry, self.project = registry, project
        self._made: dict = {}

    def get(self, name: str):
        comp_name = composite_name(name)
        if comp_name is None:
            return self.registry.get(name)
        comp = self.project.composites.get(comp_name)
        if comp is None:
            return None
        key = (id(comp), _signature(comp))
        made = self._made.get(comp_name)
        if made is None or made[0] != key:
            made = self._made[comp_name] = (key, composite_spec(comp))
        return made[1]


def _signature(comp: Composite) -> tuple:
    """What a composite's spec is made from: its ports, parameters and documentation."""
    ports = tuple((n.block, _port_name(n, ""), str(n.attrs.get("doc", "")))
                  for n in comp.page.nodes.values() if n.block in (INPUT_BLOCK, OUTPUT_BLOCK))
    return ports, tuple(comp.params), comp.doc
