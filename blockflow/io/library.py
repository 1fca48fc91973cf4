"""The layer library: shipped composites (Dense, Conv2D, ...) that a project takes in.

Where the layers come from: block packages declare, in the ``blockflow.layers`` entry-point
group, a function returning the paths of their layer files (``blockflow_blocks:layer_files``:
blocks/layers/*.bflow.json, made by tools/make_layers.py). Each file holds one layer's
composite (and the composites it uses), its ``origin`` ``{"library", "name", "version"}`` and
its category. The core never imports a block package: it only follows the entry points.

**Embed, not pin.** Inserting a layer copies its definition into the project (origin recorded),
so a saved model opens and runs the same whatever later versions of blockflow ship: a library
change never reaches a project by itself. ``outdated(project)`` lists the layers the library has
newer versions of, and ``update_plan`` / ``update_layer`` take one in on request: the definition
is replaced (every instance follows, keeping its parameter values), and a parameter the new
version no longer declares is removed from the instances that set it, each one reported.

Qt-free; the editor runs the same plans through its undoable commands.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from blockflow.composite import (MAX_NESTING, Composite, block_name, composite_name, find_cycle, insert_composites,
                                 instances_of, replace_composite, uses)
from blockflow.errors import ProjectError, ProjectFileError
from blockflow.project import UNSET, Project
from blockflow.registry import LAYERS_ENTRY_POINT_GROUP, layer_files

__all__ = ["LAYERS_ENTRY_POINT_GROUP", "LIBRARY_NAME", "LayerInfo", "Library", "LibraryError", "default_library",
           "layer_problem",
           "insert_plan", "insert_layer", "outdated", "update_plan", "update_layer"]

#: the ``library`` of the origin of blockflow's own layers
LIBRARY_NAME = "blockflow"
#: the longest summary of a layer in a list
SUMMARY_CHARS = 100
_SENTENCE_END = re.compile(r"\.\s+(?=[A-Z])")
#: the order categories are listed in (others follow, by name)
CATEGORIES = ("core", "convolution", "pooling", "reshaping", "regularization", "normalization", "embedding",
              "recurrent", "attention", "residual", "losses")


class LibraryError(ProjectError):
    """A layer that is not in the library, or a library file that cannot be read."""


@dataclass(frozen=True)
class LayerInfo:
    name: str
    version: int
    doc: str
    category: str
    library: str = LIBRARY_NAME
    path: Path | None = None

    @property
    def summary(self) -> str:
        """The doc's first sentence (cut at SUMMARY_CHARS), for one line of a list."""
        first = self.doc.strip().split("\n", 1)[0]
        end = _SENTENCE_END.search(first)
        first = first[:end.start() + 1] if end else first
        return first if len(first) <= SUMMARY_CHARS else first[:SUMMARY_CHARS - 1].rstrip() + "…"


class Library:
    """Layers by name: each its info and its composites (the layer's own first)."""

    def __init__(self, layers: list[tuple[LayerInfo, dict]]):
        self._layers = {info.name: (info, comps) for info, comps in layers}

    @classmethod
    def from_composites(cls, entries) -> "Library":
        """``entries``: (category, {name: Composite}) pairs, the layer's composite first."""
        out = []
        for category, comps in entries:
            problem = layer_problem(comps)
            if problem:
                raise LibraryError(f"a layer of category '{category}': {problem}")
            used = set().union(*(uses(c) for c in comps.values()))
            top = next((c for n, c in comps.items() if n not in used), next(iter(comps.values())))
            comps = {top.name: top, **{n: c for n, c in comps.items() if n != top.name}}
            origin = top.origin or {}
            out.append((LayerInfo(top.name, int(origin.get("version", 0)), top.doc, category,
                                  origin.get("library", LIBRARY_NAME)), dict(comps)))
        return cls(out)

    def layers(self) -> list[LayerInfo]:
        """Every layer, by category (in CATEGORIES' order) then name."""
        def key(info):
            c = info.category
            return (CATEGORIES.index(c) if c in CATEGORIES else len(CATEGORIES), c, info.name)
        return sorted((info for info, _ in self._layers.values()), key=key)

    def info(self, name: str) -> LayerInfo:
        return self._entry(name)[0]

    def load(self, name: str) -> dict:
        """Fresh copies of layer ``name``'s composites ({name: Composite}, the layer first)."""
        return {k: c.copy() for k, c in self._entry(name)[1].items()}

    def _entry(self, name: str):
        found = self._layers.get(name)
        if found is None:
            known = ", ".join(sorted(self._layers)) or "none"
            raise LibraryError(f"there is no layer '{name}' in the library (layers: {known})")
        return found


def layer_problem(comps: dict) -> str:
    """Why ``comps`` ({name: Composite}, from one layer file) cannot be a layer ("" when they can):
    none at all, one containing itself, or composites nested deeper than an instance may nest
    (MAX_NESTING: such a layer could never be compiled, and inserting it would cost a walk of
    the chain per composite)."""
    if not comps:
        return "it holds no composite"
    cycle = find_cycle(comps)
    if cycle:
        return f"composite '{cycle[0]}' contains itself: {' > '.join(cycle)}"
    depth = _nesting(comps)
    if depth > MAX_NESTING:
        return f"its composites nest {depth:,} levels deep; instances nest at most {MAX_NESTING}"
    return ""


def _nesting(comps: dict) -> int:
    """The most composites of ``comps`` on one chain of uses (no cycle: checked before), found
    without recursion."""
    depth: dict = {}
    for start in comps:
        stack = [start]
        while stack:
            name = stack[-1]
            inner = [u for u in uses(comps[name]) if u in comps]
            pending = [u for u in inner if u not in depth]
            if pending and name not in depth:
                depth[name] = None          # being counted
                stack.extend(pending)
                continue
            stack.pop()
            if depth.get(name) is None:
                depth[name] = 1 + max((depth[u] or 0 for u in inner), default=0)
    return max(depth.values(), default=0)


def default_library(read=None) -> Library:
    """The layers every installed block package declares (``blockflow.layers`` entry points);
    ``read(path) -> (composites, metadata)`` reads one layer file (default: the project format's
    library reader)."""
    if read is None:
        from blockflow.io.project_io import load_library as read
    entries = []
    for package, path in layer_files():
        try:
            comps, meta = read(path)
        except (OSError, ValueError, ProjectFileError) as exc:
            raise LibraryError(f"layer file {path.name} (of {package}): {exc}") from None
        problem = layer_problem(comps)
        if problem:
            raise LibraryError(f"layer file {path.name} (of {package}): {problem}")
        entries.append((str((meta or {}).get("category", "other")), comps))
    return Library.from_composites(entries)


# ---------------------------------------------------------------------------------- inserting

def _names_in_project(project: Project, comps: dict) -> dict:
    """``{name in the layer: name in the project}`` for ``comps``: a composite the project has
    with the same definition keeps its name, one whose name a different one has takes the next
    free ``Name_2``. The names taken are one set, grown as names are given (a set made anew for
    each composite cost a layer of 10,000 composites 50 million insertions)."""
    names: dict = {}
    taken: set = set()
    for cname, comp in comps.items():
        same = project.composites.get(cname)
        names[cname] = cname if same is not None and same == comp else _free_name(project, cname, taken)
        taken.add(names[cname])
    return names


def _free_name(project: Project, name: str, taken: set) -> str:
    if name not in project.composites and name not in taken:
        return name
    i = 2
    while f"{name}_{i}" in project.composites or f"{name}_{i}" in taken:
        i += 1
    return f"{name}_{i}"


def _renamed(comp: Composite, name: str, names: dict) -> Composite:
    """``comp`` named ``name``, its instances of renamed composites following ``names``."""
    comp.name = name
    comp.page.name = block_name(name)
    for node in comp.page.nodes.values():
        inner = composite_name(node.block)
        if inner in names:
            node.block = block_name(names[inner])
    return comp


def insert_plan(project: Project, library: Library, name: str) -> tuple[str, list[Composite]]:
    """What inserting layer ``name`` adds: (the layer's name in the project, the composites to
    insert, in an order insert_composite accepts). A composite already in the project with the
    same definition is reused; a name taken by a different one gets the next free ``Name_2``."""
    comps = library.load(name)
    names = _names_in_project(project, comps)
    new = [_renamed(comp, names[cname], names) for cname, comp in comps.items()
           if names[cname] not in project.composites]
    return names[name], _after_their_uses(new, set(project.composites))


def _after_their_uses(new: list, done: set) -> list:
    """``new`` ordered so that each composite comes after those of ``new`` it uses (a walk
    without recursion: a layer may chain thousands of composites)."""
    by_name, ordered = {c.name: c for c in new}, []
    for comp in new:
        if comp.name in done:
            continue
        done.add(comp.name)
        stack = [(comp, iter(sorted(uses(comp))))]
        while stack:
            current, todo = stack[-1]
            inner = next(todo, None)
            if inner is None:
                stack.pop()
                ordered.append(current)
            elif inner in by_name and inner not in done:
                done.add(inner)
                stack.append((by_name[inner], iter(sorted(uses(by_name[inner])))))
    return ordered


def insert_layer(project: Project, library: Library, name: str) -> tuple[str, list]:
    """Insert layer ``name`` (see insert_plan) as one edit; returns (its name in the project, the
    Changes: one, or none when the project has the layer already)."""
    top, comps = insert_plan(project, library, name)
    return top, [insert_composites(project, comps)] if comps else []


# ---------------------------------------------------------------------------------- updating

def outdated(project: Project, library: Library) -> list[tuple[str, int, int]]:
    """(composite name, its version, the library's) for each of the project's composites made
    from a library layer that the library has a newer version of."""
    out = []
    for cname, comp in project.composites.items():
        origin = comp.origin or {}
        layer = origin.get("name")
        try:
            info = library.info(layer)
        except LibraryError:
            continue
        if origin.get("library") == info.library and int(origin.get("version", 0)) < info.version:
            out.append((cname, int(origin.get("version", 0)), info.version))
    return out


@dataclass
class UpdatePlan:
    """What updating a composite does: composites the new version uses that the project lacks,
    the new definition, and the parameters removed from instances (diagram, node, parameter)."""

    name: str
    inserts: list
    definition: Composite
    dropped: list

    def report(self) -> list[str]:
        v = (self.definition.origin or {}).get("version")
        return [f"{diagram}/{node}: parameter '{p}' is gone in {self.name} version {v}; its value was removed"
                for diagram, node, p in self.dropped]


def update_plan(project: Project, library: Library, name: str) -> UpdatePlan:
    """How composite ``name`` (made from a library layer) becomes the library's version."""
    comp = project.composite(name)
    origin = comp.origin or {}
    layer = origin.get("name")
    if not layer:
        raise LibraryError(f"composite '{name}' was not made from a library layer")
    fresh = library.load(layer)
    top = fresh.pop(layer)
    names = {layer: name, **_names_in_project(project, fresh)}
    inserts = [_renamed(c, names[c.name], names) for c in fresh.values() if names[c.name] not in project.composites]
    top = _renamed(top, name, names)
    kept = {p.name for p in top.params}
    dropped = [(diagram, nid, key) for diagram, nid in instances_of(project, name)
               for key in project.page(diagram).nodes[nid].attrs
               if key not in kept and key != "share_variables_with"]
    return UpdatePlan(name, inserts, top, sorted(dropped))


def update_layer(project: Project, library: Library, name: str) -> tuple[list, list[str]]:
    """Update composite ``name`` to the library's version; returns (the Changes, the report)."""
    plan = update_plan(project, library, name)
    changes = [insert_composites(project, plan.inserts)] if plan.inserts else []
    changes.append(replace_composite(project, plan.definition))
    for diagram, nid, key in plan.dropped:
        changes.append(project.page(diagram).set_attr(nid, key, UNSET))
    return changes, plan.report()
