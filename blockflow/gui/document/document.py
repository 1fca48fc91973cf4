"""The Document: the one edit API of the editor.

It owns the Project (the same model the CLI loads and saves), the QUndoStack, the file path and
the dirty flag. Every edit is an undo command, whose redo and undo each make one edit with a
mutator of the model (Page.insert_node, Project.rename_page...) through Document.apply, which
emits the signals its Change calls for; views listen to them and never hold state the file does
not. Compiling goes through blockflow.compile.compiler, never a copy of it, and off the UI
thread (compiling.PagePrograms): an edit recompiles only its page, and only when it can change
what the page computes.
"""
from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import shiboken6
from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QUndoStack

from blockflow.compile.compiler import project_files
from blockflow.composite import ProjectBlocks
from blockflow.compile.program import Program
from blockflow.errors import ProjectError, ProjectFileError
from blockflow.project import Change, Edge, Node, Page, Project, text_problem, valid_node_id
from blockflow.io.project_io import load_project, save_project
from blockflow.registry import Registry, default_registry
from blockflow.io.relocate import apply_move, data_paths, plan_move
from blockflow.spec import UnknownAttrError
from blockflow.gui.document import commands as C
from blockflow.gui.document.clipboard import FRAGMENT_MIME
from blockflow.gui.document.compiling import PagePrograms
from blockflow.gui.document.composite_edits import CompositeEdits
from blockflow.gui.document.location import Location
from blockflow.gui.document.training_edits import TrainingEdits
from blockflow.gui.document.fragment_edits import FragmentEdits
from blockflow.gui.document.layout_edits import LayoutEdits
from blockflow.gui.document.layout import stacked_blocks
from blockflow.gui.document.wiring import ConnectionCheck, check_wire

# FRAGMENT_MIME, stacked_blocks and ConnectionCheck are read from here by callers of old
__all__ = ["Document", "ConnectionCheck", "FRAGMENT_MIME", "stacked_blocks", "checked_attr", "AttrValueError",
           "same_attr_value"]


class AttrValueError(ProjectError):
    """A value an attr's kind refuses; ``reason`` says why without naming the block and attr (an
    editor shows it under the attr's own field)."""

    def __init__(self, message: str, reason: str):
        super().__init__(message)
        self.reason = reason


def checked_attr(spec, node_id: str, name: str, value):
    """The value to store for attr ``name`` of ``node_id`` (a block of ``spec``), as its kind
    keeps it (a shape as a list), or ProjectError saying why ``value`` cannot be one. The
    validation itself is the spec's (BlockSpec.check_attr, the attr kinds table); this only puts
    its verdict in the document's words."""
    try:
        canonical = spec.check_attr(name, value)
    except UnknownAttrError as exc:
        raise ProjectError(str(exc)) from None
    except ValueError as exc:
        raise AttrValueError(f"attr '{name}' of {node_id}: {exc}", str(exc)) from None
    problem = text_problem(canonical) if isinstance(canonical, str) else None
    if problem:     # the file could not be saved
        reason = f"the text {problem}"
        raise AttrValueError(f"attr '{name}' of {node_id}: {reason}", reason)
    return list(canonical) if isinstance(canonical, tuple) else canonical


def same_attr_value(a, b) -> bool:
    """Are two attr values the same (an array: same dtype, shape and numbers; a list and a tuple
    with the same items are)?"""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        return a.dtype == b.dtype and a.shape == b.shape and bool(np.array_equal(a, b))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return list(a) == list(b)
    return type(a) is type(b) and a == b


class Document(CompositeEdits, TrainingEdits, LayoutEdits, FragmentEdits, QObject):
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
    #: the Location shown changed (another page, an instance opened or closed, a definition)
    location_changed = Signal()
    structure_changed = Signal(str)
    program_ready = Signal(str)
    project_replaced = Signal()
    #: composites came, went, were renamed or their definition (name, doc, params) replaced
    composites_changed = Signal()
    path_changed = Signal(str)
    dirty_changed = Signal(bool)

    def __init__(self, project: Project | None = None, path: str | None = None,
                 registry: Registry | None = None, parent=None):
        super().__init__(parent)
        self.registry = registry or default_registry()
        self.undo_stack = QUndoStack(self)
        self.undo_stack.cleanChanged.connect(self._on_clean_changed)
        self.project = project or self._empty_project()
        #: the registry's blocks and the project's composites (``@Dense``), looked up by name
        self.blocks = ProjectBlocks(self.registry, self.project)
        self._port_specs: dict = {}
        self.path = str(path) if path else None
        #: what the last save has to tell besides "saved" (a backup kept under another name)
        self.save_notes: tuple = ()
        self.current_page = self.project.pages[0].name
        self.location = Location(self.current_page, self.current_page)
        self._last_page = self.current_page
        self._programs = PagePrograms(self)
        self._programs.ready.connect(self.program_ready)
        self._gesture = itertools.count(1)

    def _on_clean_changed(self, clean: bool) -> None:
        self.dirty_changed.emit(not clean)

    def __del__(self):
        # Empty the undo stack before the Document goes. The C++ commands are owned by the C++
        # QUndoStack, but their Python wrappers are shiboken children of the stack's wrapper
        # (PySide's typesystem: QUndoStack.push adds the command as a child of ``this``), which
        # the cyclic garbage collector knows nothing of. When the collector frees a Document (it,
        # or a window or panel holding it, is in a reference cycle), the stack's and commands'
        # wrappers are garbage too and get tp_clear in the order of the collector's lists: a
        # full collection lists generation 0 before generation 1, so commands pushed after their
        # Document was promoted come first. shiboken's tp_clear of a command calls removeParent
        # with giveOwnershipBack=true: the wrapper owns its C++ command again, loses its last
        # reference and deletes it, while the QUndoStack still lists it. Freeing the Document
        # then deletes the stack, and ~QUndoStack -> clear() deletes that command a second time:
        # the segfault inside gc.collect() (test_exit.py: ..._takes_its_younger_commands_cleanly).
        # Which generation holds what depends on when automatic collections ran (allocation
        # counts, the compile worker thread's included), hence a crash that came and went.
        # A finalizer runs before the collector clears anything (PEP 442), and on a free by
        # reference counting too: clear() deletes the commands through the stack that owns
        # them, and their wrappers are invalidated, not freed again. Signals are blocked: nobody
        # (not even this Document's own slots) is to hear of a document that is going.
        stack = self.__dict__.get("undo_stack")
        if stack is not None and shiboken6.isValid(stack):
            stack.blockSignals(True)
            stack.clear()

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
        self.set_location(Location(name, None if name.startswith("@") else name))

    def set_location(self, location: "Location") -> None:
        """Show ``location``: its diagram becomes the current page (what edits go to)."""
        self.project.page(location.diagram)
        if location == self.location:
            return
        old_page, self.location = self.current_page, location
        if location.host is not None:
            self._last_page = location.host
        self.current_page = location.diagram
        if location.diagram != old_page:
            self.current_page_changed.emit(location.diagram)
        self.location_changed.emit()

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

    def stop_compiling(self) -> None:
        """Drop the pages waiting for a compile (the window closes; see PagePrograms.stop)."""
        self._programs.stop()

    def spec(self, page: str, node_id: str):
        return self.blocks.get(self.page(page).nodes[node_id].block)

    def new_gesture(self) -> int:
        """An id for a mouse gesture: the moves pushed with it merge into one undo step."""
        return next(self._gesture)

    # ----------------------------------------------------------------------------- files
    def replace_project(self, project: Project, path: str | None) -> None:
        self.project = project
        self.blocks = ProjectBlocks(self.registry, project)
        self._port_specs = {}
        self.path = str(path) if path else None
        self.current_page = project.pages[0].name
        self.location = Location(self.current_page, self.current_page)
        self._last_page = self.current_page
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

    def open_imported(self, project: Project) -> None:
        """Take a project made from another tool's model (File > Import ONNX Model): untitled
        and unsaved, so closing it asks to save."""
        self.recover(project, None)

    def open(self, path, as_copy: bool = False) -> None:
        """Load ``path``; on error raise ProjectFileError and leave the document as it was.
        ``as_copy`` opens it untitled (a shipped sample: Save then asks where to put it)."""
        # a file only: a named pipe would hold the UI thread until written to (the command line
        # still reads the shell's pipes), a device may never end
        if Path(path).exists() and not Path(path).is_file():
            raise ProjectFileError(str(path), "", "cannot open it: it is not a regular file")
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
        if self.blocks.get(block) is None:
            raise ProjectError(f"there is no block called '{block}'")
        self._refuse(self.nesting_problem(block, page))
        nid = node_id or pg.new_id(block)
        if nid in pg.nodes:
            raise ProjectError(f"page '{page}' already has a node '{nid}'")
        if not valid_node_id(nid):
            raise ProjectError(f"'{nid}' is not a valid node id (letters, digits, _ . -)")
        node = Node(nid, block, dict(attrs or {}), {}, (float(position[0]), float(position[1])), label, {})
        self.undo_stack.push(C.AddNodeCommand(self, page, node))
        return nid

    def remove_nodes(self, node_ids, page: str | None = None) -> None:
        """Delete nodes and their wires as one undo step."""
        page = page or self.current_page
        pg = self.page(page)
        chosen = set(node_ids)
        ids = [n for n in pg.nodes if n in chosen]
        if ids:
            text = f"Delete {len(ids)} block{'s' if len(ids) != 1 else ''}"
            self.undo_stack.push(C.RemoveBlocksCommand(self, page, ids, text))

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
        return check_wire(self.page(page), self.registry, project_files(self.project),
                          Edge(src, src_port, dst, dst_port), self.project.composites, self.blocks)

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

    def set_attr(self, node_id: str, name: str, value, page: str | None = None) -> bool:
        """Set an attr (``None`` restores its default); True when the block changed. Invalid
        values are refused with the reason (AttrValueError when the attr's kind refuses it). The
        value the block has already (stored, or its default when none is) is no edit: nothing
        goes on the undo stack and False is returned."""
        page = page or self.current_page
        node = self.page(page).nodes[node_id]
        if value is None:
            if name not in node.attrs:
                return False
        else:
            spec = self.spec(page, node_id)
            if spec is not None:
                value = checked_attr(spec, node_id, name, value)
            decl = spec.attr_map.get(name) if spec is not None else None
            now = node.attrs.get(name, None if decl is None or decl.required else decl.default)
            if now is not None and same_attr_value(now, value):
                return False
        self.undo_stack.push(C.SetNodeFieldCommand(self, page, node_id, "attrs", name, value,
                                                   f"Set {node_id}.{name}"))
        return True

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

    def set_collapsed(self, ids, collapsed: bool, page: str | None = None) -> None:
        """Collapse (or expand) the blocks ``ids``, one undo step; those already so are left."""
        nodes = self.page(page).nodes
        flags = {nid: collapsed for nid in ids if nid in nodes and nodes[nid].collapsed != collapsed}
        if flags:
            what = "Collapse" if collapsed else "Expand"
            self.undo_stack.push(C.SetCollapsedCommand(self, page or self.current_page, flags,
                                                       f"{what} {len(flags)} block(s)"))

    def rename_node(self, old: str, new: str, page: str | None = None) -> None:
        """Give a block a new id (the last part of its full name ``scope/id``), undoably."""
        page = page or self.current_page
        self._refuse(self.page(page).rename_problem(old, new))
        if new != old:
            self.undo_stack.push(C.RenameNodeCommand(self, page, old, new))

    def set_feed(self, node_id: str, value, page: str | None = None) -> None:
        page = page or self.current_page
        if node_id not in self.page(page).nodes:
            raise ProjectError(f"there is no block '{node_id}'")
        value = None if value is None else np.asarray(value)
        self.undo_stack.push(C.SetPageFieldCommand(self, page, "feeds", value, key=node_id,
                                                   text=f"Feed {node_id}"))

    def set_loss(self, node_id: str | None, page: str | None = None) -> None:
        page = page or self.current_page
        self.undo_stack.push(C.SetPageFieldCommand(self, page, "loss", node_id,
                                                   text=f"Mark {node_id} as the loss" if node_id else "Clear loss"))

    def set_metrics(self, metrics, page: str | None = None) -> None:
        """The scalar outputs to plot while training (``"node"`` or ``"node:port"``), undoably."""
        page = page or self.current_page
        pg = self.page(page)
        metrics = list(metrics)
        self._refuse(pg.metrics_problem(metrics))
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
        self._refuse(self.project.new_page_problem(name))
        self.undo_stack.push(C.AddPageCommand(self, Page(name)))
        return name

    def remove_page(self, name: str) -> None:
        if len(self.project.pages) == 1:
            raise ProjectError("a project keeps at least one page")
        self._refuse(self._page_problem(name))
        self.undo_stack.push(C.RemovePageCommand(self, name))

    def rename_page(self, old: str, new: str) -> None:
        if old == new:
            return
        self._refuse(self._page_problem(old) or self.project.new_page_problem(new))
        self.undo_stack.push(C.RenamePageCommand(self, old, new))

    def _page_problem(self, name: str) -> str:
        """A page edit's name must be a page's: project.page also finds a composite's diagram
        ("@G"), which renamed as a page broke the undo stack and removed as one crashed."""
        if any(p.name == name for p in self.project.pages):
            return ""
        return f"'{name}' is a composite's diagram, not a page" if name.startswith("@") else f"no page named '{name}'"

    def move_page(self, name: str, index: int) -> None:
        self._refuse(self._page_problem(name))
        names = [p.name for p in self.project.pages]
        if names.index(name) != index:
            self.undo_stack.push(C.MovePageCommand(self, name, index))

    @staticmethod
    def _refuse(problem: str) -> None:
        """Refuse an edit the model would refuse, before its command is pushed (a mutator
        raising inside QUndoStack.push would leave a command on the stack that did nothing)."""
        if problem:
            raise ProjectError(problem)

    # ------------------------------------------- model changes (the undo commands call apply)
    def apply(self, page: str | None, mutator, *args) -> Change:
        """Make one edit of the model: ``mutator`` is a Page mutator run on the page ``page``
        (``Page.insert_node``...) or, with ``page`` None, a Project one (``Project.rename_page``
        ...). Tells the views what its Change says changed, recompiles what it can change, and
        returns the Change (what the command needs to undo it)."""
        target = self.project if page is None else self.project.page(page)
        change = mutator(target, *args)
        if change.pages_added or change.pages_removed or change.page_renamed or change.pages_moved:
            self._announce_pages(change)
            if change.nodes_added or change.nodes_removed or change.edges_added or change.edges_removed:
                self._announce_page_edit(change)      # a group: a new composite and its instance
        else:
            self._announce_page_edit(change)
        self._announce_composites(change)
        return change

    def _announce_page_edit(self, change: Change) -> None:
        page = change.page
        for edge in change.edges_removed:
            self.edge_removed.emit(page, edge)
        for nid in change.nodes_removed:
            self.node_removed.emit(page, nid)
        if change.node_renamed:
            self.node_renamed.emit(page, *change.node_renamed)
        for nid in change.nodes_added:
            self.node_added.emit(page, nid)
        for edge in change.edges_added:
            self.edge_added.emit(page, edge)
        for nid in change.nodes_changed:
            self.node_changed.emit(page, nid)
        if change.nodes_moved:
            self.nodes_moved.emit(page, list(change.nodes_moved))
        for name in change.fields:
            self.page_field_changed.emit(page, name)
        if change.computes:
            self._edited(page)

    def _announce_pages(self, change: Change) -> None:
        for name in change.pages_removed:
            self._programs.removed(name)
        if change.pages_added:
            self._programs.pages_changed()
        if change.page_renamed:
            old, new = change.page_renamed
            self._programs.removed(old)
            if self.current_page == old:
                self.current_page = new
        if change.page_renamed:       # the location names the page (or definition) by its name
            old, new = change.page_renamed
            loc = self.location
            self.location = Location(new if loc.diagram == old else loc.diagram,
                                     new if loc.host == old else loc.host, loc.level)
            if self._last_page == old:
                self._last_page = new
        names = [p.name for p in self.project.pages]
        if self.current_page.startswith("@") and self.current_page[1:] not in self.project.composites:
            # the definition shown went (its group undone, or deleted): back to the page
            self.set_location(Location(self.host_page(), self.host_page()))
        elif not self.current_page.startswith("@") and self.current_page not in names:
            # the page shown was removed: show its neighbour
            self.current_page = names[min(change.index or 0, len(names) - 1)]
            self.location = Location(self.current_page, self.current_page)
            self.current_page_changed.emit(self.current_page)
        if change.page_renamed:
            self.page_renamed.emit(*change.page_renamed)
        self.pages_changed.emit()
        if change.computes:
            # composites imported at once (insert_composites), or taken back, are each a page
            # added or removed and edited (change.page is the first of them)
            self._edited(change.page, *change.pages_added[1:], *change.pages_removed[1:])

    def _edited(self, page: str, *added: str) -> None:
        """What ``page`` computes may have changed: it is compiled again (off the UI thread), and
        so is every diagram using it when it is a definition (_definitions_edited). ``added``:
        more definitions an import added with it, compiled too, with the diagrams using any of
        them (one walk for all). They are not announced one by one: each announcement of a
        definition makes the session look through the pages for those using it."""
        for name in (page, *added):
            self._programs.changed(name)
        self.structure_changed.emit(page)
        self._definitions_edited((page, *added))
