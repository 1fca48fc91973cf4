"""The Document: the one edit API of the editor.

It owns the Project (the same model the CLI loads and saves), the QUndoStack, the file path and
the dirty flag. Every edit is an undo command; views listen to its signals and never hold state
the file does not. Compiling goes through blockflow.compile.compiler, never a copy of it, and off the UI
thread (compiling.PagePrograms): an edit recompiles only its page, and only when it can change
what the page computes.
"""
from __future__ import annotations

import copy
import itertools
import math
import os
from pathlib import Path

import networkx as nx
import numpy as np
from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QUndoStack

from blockflow.compile.compiler import Program, compile_page, project_files
from blockflow.errors import ProjectError
from blockflow.project import Edge, Node, Page, Project, page_name_problem, split_port, text_problem, valid_node_id
from blockflow.io.project_io import dumps_project, load_project, loads_project, save_project
from blockflow.registry import Registry, default_registry
from blockflow.io.relocate import apply_move, data_paths, plan_move
from blockflow.spec import SCOPE_PORT, UnknownAttrError
from blockflow.gui.document import commands as C
from blockflow.gui.document.compiling import PagePrograms

__all__ = ["Document", "ConnectionCheck", "stacked_blocks"]

from blockflow.gui.document.clipboard import FRAGMENT_MIME  # noqa: F401  (re-exported for callers)
#: page fields the compiler does not read: editing them recompiles nothing
_NOT_COMPILED = ("text", "metrics")
#: blocks whose positions fall in one square of this size (scene units) are stacked: a block is
#: about 150 x 60, so they hide each other (a file without positions puts every block at [0, 0])
STACK_CELL = 8.0


def stacked_blocks(page: Page) -> list[str]:
    """The blocks of ``page`` that sit on another block's spot (within STACK_CELL), in page
    order."""
    def cell(node):
        return math.floor(node.position[0] / STACK_CELL), math.floor(node.position[1] / STACK_CELL)

    count: dict[tuple, int] = {}
    for node in page.nodes.values():
        key = cell(node)
        count[key] = count.get(key, 0) + 1
    return [nid for nid, node in page.nodes.items() if count[cell(node)] > 1]


class ConnectionCheck:
    """The verdict on a proposed wire: ``ok`` and, when refused, the ``reason`` in words."""

    def __init__(self, ok: bool, reason: str = "", replaces: Edge | None = None):
        self.ok, self.reason, self.replaces = ok, reason, replaces

    def __bool__(self):
        return self.ok

    def __repr__(self):
        return f"ConnectionCheck({self.ok}, {self.reason!r})"


class Document(QObject):
    """A project being edited: model, undo history, file, and change signals.

    Signals carry the page name first. ``structure_changed(page)`` fires after an edit that can
    change what the page computes (not after a label, a move, the page note or the plotted
    metrics); ``program_ready(page)`` when its compiled program is current again.
    """

    node_added = Signal(str, str)
    node_removed = Signal(str, str)
    node_changed = Signal(str, str)
    nodes_moved = Signal(str, list)
    edge_added = Signal(str, object)
    edge_removed = Signal(str, object)
    page_field_changed = Signal(str, str)
    pages_changed = Signal()
    page_renamed = Signal(str, str)
    node_renamed = Signal(str, str, str)     # page, old id, new id
    current_page_changed = Signal(str)
    structure_changed = Signal(str)
    program_ready = Signal(str)
    project_replaced = Signal()
    path_changed = Signal(str)
    dirty_changed = Signal(bool)

    def __init__(self, project: Project | None = None, path: str | None = None,
                 registry: Registry | None = None, parent=None):
        super().__init__(parent)
        self.registry = registry or default_registry()
        self.undo_stack = QUndoStack(self)
        self.undo_stack.cleanChanged.connect(self._on_clean_changed)
        self.project = project or self._empty_project()
        self.path = str(path) if path else None
        #: what the last save has to tell besides "saved" (a backup kept under another name)
        self.save_notes: tuple = ()
        self.current_page = self.project.pages[0].name
        self._programs = PagePrograms(self)
        self._programs.ready.connect(self.program_ready)
        self._gesture = itertools.count(1)

    def _on_clean_changed(self, clean: bool) -> None:
        self.dirty_changed.emit(not clean)

    # ----------------------------------------------------------------------------- basics
    @staticmethod
    def _empty_project() -> Project:
        project = Project(metadata={"title": "Untitled"})
        project.add_page("main")
        return project

    @property
    def dirty(self) -> bool:
        return not self.undo_stack.isClean()

    def page(self, name: str | None = None) -> Page:
        return self.project.page(name or self.current_page)

    def set_current_page(self, name: str) -> None:
        self.project.page(name)
        if name != self.current_page:
            self.current_page = name
            self.current_page_changed.emit(name)

    def program(self, page: str | None = None) -> Program:
        """The compiled page as it is now, waiting for (or making) the compile if need be. Views
        use ready_program and program_ready instead, so as never to wait."""
        return self._programs.program(page or self.current_page)

    def ready_program(self, page: str | None = None) -> Program | None:
        """The compiled page as it is now, or None while it compiles off the UI thread
        (``program_ready(page)`` follows)."""
        return self._programs.get(page or self.current_page)

    def latest_program(self, page: str | None = None) -> Program | None:
        """The last program compiled for the page, even if the page was edited since (None before
        its first compile): what to show until the current one is ready."""
        return self._programs.latest(page or self.current_page)

    def compiling(self) -> int:
        """How many pages wait for a compile or are being compiled."""
        return self._programs.pending()

    def spec(self, page: str, node_id: str):
        return self.registry.get(self.page(page).nodes[node_id].block)

    def new_gesture(self) -> int:
        """An id for a mouse gesture: the moves pushed with it merge into one undo step."""
        return next(self._gesture)

    # ----------------------------------------------------------------------------- files
    def replace_project(self, project: Project, path: str | None) -> None:
        self.project = project
        self.path = str(path) if path else None
        self.current_page = project.pages[0].name
        self._programs.clear()
        self.undo_stack.clear()
        self.project_replaced.emit()
        self.path_changed.emit(self.path or "")
        self.dirty_changed.emit(False)

    def recover(self, project: Project, path: str | None) -> None:
        """Take an autosaved project back (crash recovery): it is unsaved work, so the document
        is dirty until it is saved."""
        self.replace_project(project, path)
        self.undo_stack.resetClean()
        self.dirty_changed.emit(True)

    def new(self) -> None:
        self.replace_project(self._empty_project(), None)

    def open(self, path, as_copy: bool = False) -> None:
        """Load ``path``; on error raise ProjectFileError and leave the document as it was.
        ``as_copy`` opens it untitled (a shipped sample: Save then asks where to put it)."""
        project = load_project(path)
        self.replace_project(project, None if as_copy else path)

    def save(self, path=None) -> str:
        """Save atomically (to ``path``, or where it came from); mark the history clean."""
        target = str(path or self.path or "")
        if not target:
            raise ProjectError("the project has no file name yet: save it with a name")
        before = self.project.base_dir
        self.save_notes = save_project(self.project, target).notes   # e.g. the backup kept elsewhere
        if self.project.base_dir != before:       # dataset files are now looked up elsewhere
            self._programs.changed_all()
            for pg in self.project.pages:
                self.structure_changed.emit(pg.name)
        self.undo_stack.setClean()
        if target != self.path:
            self.path = target
            self.path_changed.emit(target)
        return target

    def data_files(self) -> list[str]:
        """The data files the project's dataset blocks name (their ``path`` attrs), each once."""
        return data_paths(self.project, self.registry)

    def data_files_left_behind(self, old_dir: str | None) -> list[str]:
        """After a save into another folder: the data files that are in ``old_dir`` but not next
        to the project now (its dataset blocks would not find them)."""
        new_dir = self.project.base_dir
        if not old_dir or not new_dir:
            return []
        return [m.path for m in plan_move(self.project, self.registry, old_dir, new_dir, rewrite=False)
                if m.action == "copy"]

    def copy_data_files(self, paths, old_dir: str) -> list[str]:
        """Copy data files (relative paths) from ``old_dir`` next to the project; returns those
        copied. Paths out of either folder, and places already taken, are left alone."""
        new_dir = self.project.base_dir
        moves = [m for m in plan_move(self.project, self.registry, old_dir, new_dir, rewrite=False)
                 if m.action == "copy" and m.path in paths]
        copied = [m.path for m in apply_move(self.project, moves, new_dir)]
        if copied:
            self._programs.changed_all()
            for pg in self.project.pages:
                self.structure_changed.emit(pg.name)
        return copied

    @property
    def title(self) -> str:
        name = Path(self.path).name if self.path else "Untitled"
        return f"{name}{' *' if self.dirty else ''}"

    # ----------------------------------------------------------------------------- edits
    def add_node(self, block: str, position=(0.0, 0.0), page: str | None = None, *, attrs=None,
                 node_id: str | None = None, label: str = "") -> str:
        page = page or self.current_page
        pg = self.page(page)
        if self.registry.get(block) is None:
            raise ProjectError(f"there is no block called '{block}'")
        nid = node_id or pg.new_id(block)
        if nid in pg.nodes:
            raise ProjectError(f"page '{page}' already has a node '{nid}'")
        node = Node(nid, block, dict(attrs or {}), {}, (float(position[0]), float(position[1])), label, {})
        self.undo_stack.push(C.AddNodeCommand(self, page, node))
        return nid

    def remove_nodes(self, node_ids, page: str | None = None) -> None:
        """Delete nodes and their wires as one undo step."""
        page = page or self.current_page
        pg = self.page(page)
        ids = [n for n in pg.nodes if n in set(node_ids)]
        if not ids:
            return
        self.undo_stack.beginMacro(f"Delete {len(ids)} block{'s' if len(ids) != 1 else ''}")
        for e in [e for e in pg.edges if e.src in ids or e.dst in ids]:
            self.undo_stack.push(C.DisconnectCommand(self, page, e))
        for nid in ids:
            self.undo_stack.push(C.RemoveNodeCommand(self, page, nid))
        self.undo_stack.endMacro()

    def move_nodes(self, moves: dict, page: str | None = None, gesture: int | None = None) -> None:
        """``moves``: ``{node id: (old position, new position)}``; one gesture is one undo step."""
        moves = {k: v for k, v in moves.items() if tuple(v[0]) != tuple(v[1])}
        if moves:
            self.undo_stack.push(C.MoveNodesCommand(self, page or self.current_page, moves, gesture))

    def check_connection(self, src: str, src_port: str, dst: str, dst_port: str,
                         page: str | None = None) -> ConnectionCheck:
        """Would this wire be accepted? Refuses the scope port, outputs into outputs, cycles and
        dtype or shape mismatches (by compiling the page with the wire, not by a second copy of
        the rules)."""
        pg = self.page(page)
        if SCOPE_PORT in (src_port, dst_port):
            return ConnectionCheck(False, "the scope port is automatic and cannot be wired")
        for nid in (src, dst):
            if nid not in pg.nodes:
                return ConnectionCheck(False, f"there is no block '{nid}'")
        sspec, dspec = self.registry.get(pg.nodes[src].block), self.registry.get(pg.nodes[dst].block)
        if sspec is None or dspec is None:
            return ConnectionCheck(False, "unknown blocks cannot be wired")
        base, idx = split_port(src_port)
        out = sspec.output_map.get(base)
        if out is None or (idx is not None) != out.variadic:
            return ConnectionCheck(False, f"'{src_port}' is not an output of {sspec.name}")
        base, idx = split_port(dst_port)
        decl = dspec.input_map.get(base)
        if decl is None or (idx is not None) != decl.variadic:
            if base in dspec.output_map:
                return ConnectionCheck(False, "two outputs cannot be joined")
            return ConnectionCheck(False, f"'{dst_port}' is not an input of {dspec.name}")
        if src == dst:
            return ConnectionCheck(False, "a block cannot feed itself (that is a cycle)")
        graph = nx.DiGraph()
        graph.add_nodes_from(pg.nodes)
        graph.add_edges_from((e.src, e.dst) for e in pg.edges if not (e.dst == dst and e.dst_port == dst_port))
        if nx.has_path(graph, dst, src):
            path = nx.shortest_path(graph, dst, src)
            return ConnectionCheck(False, "it would make a cycle: " + " -> ".join(path + [dst]))
        replaces = next((e for e in pg.edges if e.dst == dst and e.dst_port == dst_port), None)
        if replaces is not None and (replaces.src, replaces.src_port) == (src, src_port):
            return ConnectionCheck(False, "these ports are already wired")
        # Types: compile what the target block depends on, with and without the wire, and see
        # whether the block is now wrong. Only its ancestors count, so a check costs the part
        # of the page upstream of it, not the page (the canvas makes dozens while a wire is
        # dragged).
        edges = [e for e in pg.edges if e is not replaces]
        before = {str(d) for d in self._upstream_errors(pg, edges, dst)}
        after = [d for d in self._upstream_errors(pg, edges + [Edge(src, src_port, dst, dst_port)], dst)
                 if str(d) not in before and d.port in (dst_port, None)]
        if after:
            return ConnectionCheck(False, after[0].message, replaces)
        return ConnectionCheck(True, "", replaces)

    def _upstream_errors(self, pg: Page, edges: list, node: str) -> list:
        """The compile errors of ``node`` on ``pg`` wired with ``edges``, from a page of only
        ``node`` and what feeds it."""
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
        program = compile_page(trial, self.registry, files=project_files(self.project))
        return [d for d in program.errors if d.node == node]

    def connect(self, src: str, src_port: str, dst: str, dst_port: str, page: str | None = None,
                check: bool = True) -> Edge:
        """Wire an output to an input; an input already fed gets the new wire instead (undoably)."""
        page = page or self.current_page
        verdict = self.check_connection(src, src_port, dst, dst_port, page) if check else \
            ConnectionCheck(True, "", next((e for e in self.page(page).edges
                                            if e.dst == dst and e.dst_port == dst_port), None))
        if not verdict:
            raise ProjectError(f"cannot wire {src}.{src_port} to {dst}.{dst_port}: {verdict.reason}")
        edge = Edge(src, src_port, dst, dst_port)
        self.undo_stack.beginMacro(f"Connect {edge}")
        if verdict.replaces is not None:
            self.undo_stack.push(C.DisconnectCommand(self, page, verdict.replaces))
        if dst_port in self.page(page).nodes[dst].inputs:
            self.undo_stack.push(C.SetNodeFieldCommand(self, page, dst, "inputs", dst_port, None,
                                                       f"Clear inline {dst_port}"))
        self.undo_stack.push(C.ConnectCommand(self, page, edge))
        self.undo_stack.endMacro()
        return edge

    def disconnect(self, edges, page: str | None = None) -> None:
        page = page or self.current_page
        edges = list(edges)
        if not edges:
            return
        self.undo_stack.beginMacro(f"Disconnect {len(edges)} wire{'s' if len(edges) != 1 else ''}")
        for e in edges:
            self.undo_stack.push(C.DisconnectCommand(self, page, e))
        self.undo_stack.endMacro()

    def set_attr(self, node_id: str, name: str, value, page: str | None = None) -> None:
        """Set an attr (``None`` restores its default). Invalid values are refused with the reason."""
        page = page or self.current_page
        spec = self.spec(page, node_id)
        if spec is not None and value is not None:
            try:
                canonical = spec.check_attr(name, value)
            except UnknownAttrError as exc:
                raise ProjectError(str(exc)) from None
            except ValueError as exc:
                raise ProjectError(f"attr '{name}' of {node_id}: {exc}") from None
            value = list(canonical) if isinstance(canonical, tuple) else canonical
        self.undo_stack.push(C.SetNodeFieldCommand(self, page, node_id, "attrs", name, value,
                                                   f"Set {node_id}.{name}"))

    def set_inline(self, node_id: str, port: str, value, page: str | None = None) -> None:
        """Give an unwired input an inline constant (``None`` removes it)."""
        page = page or self.current_page
        if value is not None:
            value = np.asarray(value)
            if value.dtype.kind not in "biuf":
                raise ProjectError(f"an inline value must be numbers, got {value.dtype}")
        self.undo_stack.push(C.SetNodeFieldCommand(self, page, node_id, "inputs", port, value,
                                                   f"Set {node_id}.{port}"))

    def set_label(self, node_id: str, label: str, page: str | None = None) -> None:
        if text_problem(label):
            raise ProjectError(f"the label {text_problem(label)}")
        page = page or self.current_page
        self.undo_stack.push(C.SetNodeFieldCommand(self, page, node_id, "label", None, label,
                                                   f"Label {node_id}"))

    def rename_node(self, old: str, new: str, page: str | None = None) -> None:
        """Give a block a new id (the last part of its full name ``scope/id``), undoably."""
        page = page or self.current_page
        pg = self.page(page)
        if old not in pg.nodes:
            raise ProjectError(f"there is no block '{old}'")
        if new == old:
            return
        if not valid_node_id(new):
            raise ProjectError(f"'{new}' is not a valid id: a letter or _ first, then letters, "
                               "digits, _ . -")
        if new in pg.nodes:
            raise ProjectError(f"page '{pg.name}' already has a block '{new}'")
        self.undo_stack.push(C.RenameNodeCommand(self, page, old, new))

    def set_feed(self, node_id: str, value, page: str | None = None) -> None:
        page = page or self.current_page
        value = None if value is None else np.asarray(value)
        self.undo_stack.push(C.SetPageFieldCommand(self, page, "feeds", value, key=node_id,
                                                   text=f"Feed {node_id}"))

    def set_loss(self, node_id: str | None, page: str | None = None) -> None:
        page = page or self.current_page
        self.undo_stack.push(C.SetPageFieldCommand(self, page, "loss", node_id,
                                                   text=f"Mark {node_id} as the loss" if node_id else "Clear loss"))

    def apply_training(self, updates: dict, steps: int, page: str | None = None) -> list[str]:
        """Store trained values (``Trainer.state_updates()``: {Variable: {"value": array, slot:
        array}}) as one undoable edit. Variables the page no longer has, or whose type changed
        since training started, are left out; their ids are returned."""
        page = page or self.current_page
        pg = self.page(page)
        states, skipped = {}, []
        program = self.program(page)
        for nid, changes in updates.items():
            node = pg.nodes.get(nid)
            spec = self.registry.get(node.block) if node is not None else None
            value = changes.get("value")
            if spec is None or spec.role != "variable" or value is None:
                skipped.append(nid)
                continue
            try:
                t = program.output_type(nid)
            except ProjectError:
                skipped.append(nid)
                continue
            if tuple(t.shape) != tuple(np.shape(value)) or t.dtype != np.asarray(value).dtype:
                skipped.append(nid)
                continue
            states[nid] = {k: np.array(v) for k, v in changes.items()}
        if states:
            self.undo_stack.push(C.SetStatesCommand(self, page, states, f"Train {steps} step{'s' if steps != 1 else ''}"))
        return skipped

    def reset_variables(self, page: str | None = None) -> list[str]:
        """Forget the trained values of every Variable on the page (their initializers draw the
        first values again), as one undoable edit; returns the Variables reset."""
        page = page or self.current_page
        pg = self.page(page)
        ids = [nid for nid, n in pg.nodes.items()
               if n.state and getattr(self.registry.get(n.block), "role", None) == "variable"]
        if ids:
            self.undo_stack.push(C.SetStatesCommand(self, page, {nid: {} for nid in ids}, "Reset variables"))
        return ids

    def set_metrics(self, metrics, page: str | None = None) -> None:
        """The scalar outputs to plot while training (``"node"`` or ``"node:port"``), undoably."""
        page = page or self.current_page
        pg = self.page(page)
        metrics = list(metrics)
        for m in metrics:
            if not isinstance(m, str) or m.partition(":")[0] not in pg.nodes:
                raise ProjectError(f"{m!r} names no block on page '{pg.name}'")
        if len(set(metrics)) != len(metrics):
            raise ProjectError("a metric is listed twice")
        if metrics != list(pg.metrics):
            self.undo_stack.push(C.SetPageFieldCommand(self, page, "metrics", metrics, text="Set plotted metrics"))

    def set_page_text(self, text: str, page: str | None = None) -> None:
        if text_problem(text):
            raise ProjectError(f"the page note {text_problem(text)}")
        page = page or self.current_page
        self.undo_stack.push(C.SetPageFieldCommand(self, page, "text", text, text="Edit page note"))

    def add_page(self, name: str | None = None) -> str:
        existing = {p.name for p in self.project.pages}
        if name is None:
            name = next(f"page{i}" for i in itertools.count(len(existing) + 1) if f"page{i}" not in existing)
        self._check_page_name(name)
        self.undo_stack.push(C.AddPageCommand(self, Page(name)))
        return name

    def remove_page(self, name: str) -> None:
        if len(self.project.pages) == 1:
            raise ProjectError("a project keeps at least one page")
        self.project.page(name)
        self.undo_stack.push(C.RemovePageCommand(self, name))

    def rename_page(self, old: str, new: str) -> None:
        if old == new:
            return
        self.project.page(old)
        self._check_page_name(new)
        self.undo_stack.push(C.RenamePageCommand(self, old, new))

    def move_page(self, name: str, index: int) -> None:
        names = [p.name for p in self.project.pages]
        if names.index(name) != index:
            self.undo_stack.push(C.MovePageCommand(self, name, index))

    def _check_page_name(self, name: str) -> None:
        if page_name_problem(name) or name != name.strip():
            raise ProjectError(f"page name {name!r} must be non-empty, without '/', control characters "
                               f"or surrounding spaces")
        if any(p.name == name for p in self.project.pages):
            raise ProjectError(f"there is already a page named '{name}'")

    # ------------------------------------------------------------------ copy, paste, layout
    def copy_fragment(self, node_ids, page: str | None = None) -> str:
        """The selected nodes and the wires between them, as project JSON (for the clipboard)."""
        pg = self.page(page)
        ids = [n for n in pg.nodes if n in set(node_ids)]
        frag = Project(metadata={"fragment": True})
        fp = frag.add_page("fragment")
        for nid in ids:
            fp.nodes[nid] = copy.deepcopy(pg.nodes[nid])
            if nid in pg.feeds:
                fp.feeds[nid] = pg.feeds[nid]
        fp.edges = [e for e in pg.edges if e.src in fp.nodes and e.dst in fp.nodes]
        return dumps_project(frag)

    def paste_fragment(self, text: str, position=None, page: str | None = None) -> list[str]:
        """Paste a copied fragment (new ids, internal wires kept), its top-left at ``position``.
        One undo step; returns the new node ids."""
        page = page or self.current_page
        frag = loads_project(text, "<clipboard>").pages[0]
        pg = self.page(page)
        if not frag.nodes:
            return []
        xs = [n.position[0] for n in frag.nodes.values()]
        ys = [n.position[1] for n in frag.nodes.values()]
        dx, dy = (40.0, 40.0) if position is None else (position[0] - min(xs), position[1] - min(ys))
        taken = set(pg.nodes)
        mapping = {}
        for nid, node in frag.nodes.items():
            new = nid if nid not in taken else None
            if new is None:
                base = node.block
                n = 1
                while f"{base}_{n}" in taken:
                    n += 1
                new = f"{base}_{n}"
            taken.add(new)
            mapping[nid] = new
        self.undo_stack.beginMacro(f"Paste {len(mapping)} block{'s' if len(mapping) != 1 else ''}")
        for nid, node in frag.nodes.items():
            clone = copy.deepcopy(node)
            clone.id = mapping[nid]
            clone.position = (node.position[0] + dx, node.position[1] + dy)
            self.undo_stack.push(C.AddNodeCommand(self, page, clone))
            if nid in frag.feeds:
                self.undo_stack.push(C.SetPageFieldCommand(self, page, "feeds", frag.feeds[nid],
                                                           key=mapping[nid], text="Paste feed"))
        for e in frag.edges:
            self.undo_stack.push(C.ConnectCommand(self, page, Edge(mapping[e.src], e.src_port,
                                                                   mapping[e.dst], e.dst_port)))
        self.undo_stack.endMacro()
        return list(mapping.values())

    def duplicate(self, node_ids, page: str | None = None) -> list[str]:
        return self.paste_fragment(self.copy_fragment(node_ids, page), None, page)

    def auto_layout(self, page: str | None = None, node_ids=None, spacing=(220.0, 110.0)) -> None:
        """Layered layout from the graph (networkx topological generations), as one undo step."""
        page = page or self.current_page
        pg = self.page(page)
        ids = list(pg.nodes) if node_ids is None else [n for n in pg.nodes if n in set(node_ids)]
        graph = nx.DiGraph()
        graph.add_nodes_from(ids)
        graph.add_edges_from((e.src, e.dst) for e in pg.edges if e.src in graph and e.dst in graph)
        try:
            layers = list(nx.topological_generations(graph))
        except nx.NetworkXUnfeasible:
            raise ProjectError("the page has a cycle; remove it before laying out") from None
        order = {n: i for i, n in enumerate(pg.nodes)}
        x0 = min((pg.nodes[n].position[0] for n in ids), default=0.0)
        y0 = min((pg.nodes[n].position[1] for n in ids), default=0.0)
        moves = {}
        for col, layer in enumerate(layers):
            for row, nid in enumerate(sorted(layer, key=order.__getitem__)):
                new = (x0 + col * spacing[0], y0 + row * spacing[1])
                moves[nid] = (pg.nodes[nid].position, new)
        self.undo_stack.beginMacro("Auto-layout")
        self.move_nodes(moves, page)
        self.undo_stack.endMacro()

    def spread_stacked(self, page: str | None = None, spacing=(220.0, 110.0)) -> list[str]:
        """Lay the stacked blocks of a page out in layers (by their wires; a layer taller than
        about the square root of their number wraps into more columns), below the page's other
        blocks, as one undo step. Returns the blocks moved."""
        page = page or self.current_page
        pg = self.page(page)
        ids = stacked_blocks(pg)
        if not ids:
            return []
        chosen = set(ids)
        graph = nx.DiGraph()
        graph.add_nodes_from(ids)
        graph.add_edges_from((e.src, e.dst) for e in pg.edges if e.src in chosen and e.dst in chosen)
        dag = nx.condensation(graph)            # a cycle's blocks share a layer
        order = {nid: i for i, nid in enumerate(ids)}
        layers = [sorted((n for c in layer for n in dag.nodes[c]["members"]), key=order.__getitem__)
                  for layer in nx.topological_generations(dag)]
        rows = max(8, math.ceil(math.sqrt(len(ids))))
        others = [n.position for nid, n in pg.nodes.items() if nid not in chosen]
        if others:
            x0 = min(min(p[0] for p in others), min(pg.nodes[n].position[0] for n in ids))
            y0 = max(p[1] for p in others) + 2 * spacing[1]
        else:
            x0 = min(pg.nodes[n].position[0] for n in ids)
            y0 = min(pg.nodes[n].position[1] for n in ids)
        moves, col = {}, 0
        for layer in layers:
            for k, nid in enumerate(layer):
                moves[nid] = (pg.nodes[nid].position,
                              (x0 + (col + k // rows) * spacing[0], y0 + (k % rows) * spacing[1]))
            col += math.ceil(len(layer) / rows)
        self.undo_stack.beginMacro(f"Lay out {len(ids)} stacked blocks")
        self.move_nodes(moves, page)
        self.undo_stack.endMacro()
        return ids

    # --------------------------------------------------- model changes (commands call these)
    def _edited(self, page: str) -> None:
        """What ``page`` computes may have changed: it is compiled again (off the UI thread)."""
        self._programs.changed(page)
        self.structure_changed.emit(page)

    def _insert_node(self, page: str, node: Node, index: int | None, feed=None, loss=None, metrics=None) -> None:
        pg = self.project.page(page)
        items = list(pg.nodes.items())
        items.insert(len(items) if index is None else index, (node.id, node))
        pg.nodes = dict(items)
        if feed is not None:
            pg.feeds[node.id] = feed
        if loss is not None:
            pg.loss = loss
        if metrics is not None:
            pg.metrics = list(metrics)
        self.node_added.emit(page, node.id)
        self._edited(page)

    def _take_node(self, page: str, node_id: str) -> int:
        pg = self.project.page(page)
        index = list(pg.nodes).index(node_id)
        del pg.nodes[node_id]
        pg.feeds.pop(node_id, None)
        if pg.loss is not None and pg.loss.partition(":")[0] == node_id:
            pg.loss = None
        pg.metrics = [m for m in pg.metrics if m.partition(":")[0] != node_id]
        self.node_removed.emit(page, node_id)
        self._edited(page)
        return index

    def _insert_edge(self, page: str, edge: Edge, index: int | None) -> None:
        pg = self.project.page(page)
        pg.edges.insert(len(pg.edges) if index is None else index, edge)
        self.edge_added.emit(page, edge)
        self._edited(page)

    def _take_edge(self, page: str, edge: Edge) -> int:
        pg = self.project.page(page)
        index = pg.edges.index(edge)
        del pg.edges[index]
        self.edge_removed.emit(page, edge)
        self._edited(page)
        return index

    def _rename_node(self, page: str, old: str, new: str) -> None:
        pg = self.project.page(page)
        node = pg.nodes[old]
        node.id = new
        pg.nodes = {(new if k == old else k): v for k, v in pg.nodes.items()}
        pg.edges = [Edge(new if e.src == old else e.src, e.src_port, new if e.dst == old else e.dst, e.dst_port)
                    if old in (e.src, e.dst) else e for e in pg.edges]
        if pg.loss is not None and pg.loss.partition(":")[0] == old:
            pg.loss = new + pg.loss[len(old):]
        pg.metrics = [new + m[len(old):] if m.partition(":")[0] == old else m for m in pg.metrics]
        if old in pg.feeds:
            pg.feeds = {(new if k == old else k): v for k, v in pg.feeds.items()}
        self.node_renamed.emit(page, old, new)
        self._edited(page)

    def _set_positions(self, page: str, positions: dict) -> None:
        pg = self.project.page(page)
        for nid, pos in positions.items():
            pg.nodes[nid].position = (float(pos[0]), float(pos[1]))
        self.nodes_moved.emit(page, list(positions))

    def _node_changed(self, page: str, node_id: str, semantic: bool = True) -> None:
        """``semantic``: False for a label, which changes nothing the page computes."""
        self.node_changed.emit(page, node_id)
        if semantic:
            self._edited(page)

    def _page_field_changed(self, page: str, field: str) -> None:
        self.page_field_changed.emit(page, field)
        if field not in _NOT_COMPILED:
            self._edited(page)

    def _insert_page(self, page: Page, index: int | None) -> None:
        self.project.pages.insert(len(self.project.pages) if index is None else index, page)
        self._programs.pages_changed()
        self.pages_changed.emit()

    def _take_page(self, name: str) -> int:
        names = [p.name for p in self.project.pages]
        index = names.index(name)
        del self.project.pages[index]
        self._programs.removed(name)
        if self.current_page == name:
            self.current_page = self.project.pages[min(index, len(self.project.pages) - 1)].name
            self.current_page_changed.emit(self.current_page)
        self.pages_changed.emit()
        return index

    def _rename_page(self, old: str, new: str) -> None:
        self.project.page(old).name = new
        self._programs.removed(old)
        if self.current_page == old:
            self.current_page = new
        self.page_renamed.emit(old, new)
        self.pages_changed.emit()
        self._edited(new)

    def _move_page(self, name: str, index: int) -> int:
        pages = self.project.pages
        old = [p.name for p in pages].index(name)
        page = pages.pop(old)
        pages.insert(index, page)
        self.pages_changed.emit()
        return old
