"""Undo commands: one QUndoCommand per model edit.

Each redo and undo is one call of a mutator of the model (blockflow.project: Page and Project)
through Document.apply, which tells the views what changed; a command never changes a Node or a
Page itself. It keeps what the mutator's Change says it needs to put the model back exactly
(indexes, old values, removed nodes and pages), so undoing everything returns the very project
that was opened.
"""
from __future__ import annotations

import weakref

from PySide6.QtGui import QUndoCommand

from blockflow.compile.grouping import restructure
from blockflow.composite import (insert_composite, remove_composite, remove_composites, rename_composite,
                                 replace_composite)
from blockflow.project import UNSET, Edge, Node, Page, Project

MOVE_ID = 1001


class _DocRef:
    """``self.doc`` as a weak reference. The Document owns its undo stack, which owns the
    commands; a command holding the Document strongly would make a reference cycle whose
    collection order is up to the garbage collector, and PySide then deletes the commands from
    QUndoStack::clear after their wrappers went (a segfault). Weak, the Document is freed first,
    by reference counting, and takes its stack and commands with it. That is not enough when
    something else in a cycle holds the Document (a closed window, a panel): the collector frees
    it then, and Document.__del__ empties the stack first (it says why)."""

    @property
    def doc(self):
        return self._doc_ref()

    @doc.setter
    def doc(self, value):
        self._doc_ref = weakref.ref(value)


class DocCommand(_DocRef, QUndoCommand):
    """Base: holds the document and the page the edit is on."""

    def __init__(self, doc, page: str, text: str):
        super().__init__(text)
        self.doc = doc
        self.page_name = page

    @property
    def page(self) -> Page:
        return self.doc.project.page(self.page_name)

    def edit(self, mutator, *args):
        """Run a Page mutator on this command's page through the document."""
        return self.doc.apply(self.page_name, mutator, *args)


class AddNodeCommand(DocCommand):
    def __init__(self, doc, page: str, node: Node, index: int | None = None):
        super().__init__(doc, page, f"Add {node.block} {node.id}")
        self.node, self.index = node, index

    def redo(self):
        self.edit(Page.insert_node, self.node, self.index)

    def undo(self):
        self.index = self.edit(Page.remove_node, self.node.id).index


class RemoveBlocksCommand(DocCommand):
    """Deletes blocks with their wires in one pass of the page (page_blocks.py says why)."""

    def __init__(self, doc, page: str, node_ids, text: str):
        super().__init__(doc, page, text)
        self.node_ids = tuple(node_ids)
        self.removed = None

    def redo(self):
        self.removed = self.edit(Page.remove_blocks, self.node_ids).before

    def undo(self):
        self.edit(Page.insert_blocks, self.removed)


class InsertBlocksCommand(DocCommand):
    """Puts blocks with their wires on a page in one pass of it (a paste: page_blocks.Blocks)."""

    def __init__(self, doc, page: str, blocks, text: str):
        super().__init__(doc, page, text)
        self.blocks = blocks

    def redo(self):
        self.edit(Page.insert_blocks, self.blocks)

    def undo(self):
        self.edit(Page.remove_blocks, self.blocks.ids)


class ConnectCommand(DocCommand):
    def __init__(self, doc, page: str, edge: Edge, index: int | None = None):
        super().__init__(doc, page, f"Connect {edge}")
        self.edge, self.index = edge, index

    def redo(self):
        self.edit(Page.insert_edge, self.edge, self.index)

    def undo(self):
        self.index = self.edit(Page.remove_edge, self.edge).index


class DisconnectCommand(DocCommand):
    def __init__(self, doc, page: str, edge: Edge):
        super().__init__(doc, page, f"Disconnect {edge}")
        self.edge = edge
        self.index = None
        self.points = ()

    def redo(self):
        change = self.edit(Page.remove_edge, self.edge)
        self.index, self.points = change.index, change.before

    def undo(self):
        self.edit(Page.restore_edge, self.edge, self.index, self.points)


class MoveNodesCommand(DocCommand):
    """Moves nodes; consecutive moves of the same nodes in one gesture merge into one step."""

    def __init__(self, doc, page: str, moves: dict, gesture: int | None = None):
        names = ", ".join(sorted(moves)[:3]) + ("..." if len(moves) > 3 else "")
        super().__init__(doc, page, f"Move {names}")
        self.moves = {k: (tuple(a), tuple(b)) for k, (a, b) in moves.items()}
        self.gesture = gesture

    def id(self):
        return MOVE_ID if self.gesture is not None else -1

    def mergeWith(self, other) -> bool:
        if not isinstance(other, MoveNodesCommand) or other.gesture != self.gesture or \
                other.page_name != self.page_name or set(other.moves) != set(self.moves):
            return False
        self.moves = {k: (self.moves[k][0], other.moves[k][1]) for k in self.moves}
        return True

    def redo(self):
        self.edit(Page.move_nodes, {k: b for k, (a, b) in self.moves.items()})

    def undo(self):
        self.edit(Page.move_nodes, {k: a for k, (a, b) in self.moves.items()})


class SetNodeFieldCommand(DocCommand):
    """Sets one entry of a node's attrs or inline inputs (``None`` removes it), or its label."""

    _SETTERS = {"attrs": Page.set_attr, "inputs": Page.set_inline}

    def __init__(self, doc, page: str, node_id: str, field: str, key, value, text: str):
        super().__init__(doc, page, text)
        self.node_id, self.field, self.key, self.value = node_id, field, key, value
        self.old = UNSET

    def _set(self, value):
        if self.field == "label":
            return self.edit(Page.set_label, self.node_id, value).before
        return self.edit(self._SETTERS[self.field], self.node_id, self.key, value).before

    def redo(self):
        self.old = self._set(UNSET if self.value is None and self.field != "label" else self.value)

    def undo(self):
        self._set(self.old)


class SetStatesCommand(DocCommand):
    """Replaces the stored state (a Variable's value, optimizer slots) of several nodes at once:
    the values a training produced, or a reset (empty state: the initializer draws again)."""

    def __init__(self, doc, page: str, states: dict, text: str):
        super().__init__(doc, page, text)
        self.states = {nid: dict(st) for nid, st in states.items()}
        self.old: dict = {}

    def redo(self):
        self.old = self.edit(Page.set_states, self.states).before

    def undo(self):
        self.edit(Page.set_states, self.old)


class SetCollapsedCommand(DocCommand):
    """Collapses or expands blocks (``{node id: bool}``): one step however many."""

    def __init__(self, doc, page: str, flags: dict, text: str):
        super().__init__(doc, page, text)
        self.flags = dict(flags)
        self.old: dict = {}

    def redo(self):
        self.old = self.edit(Page.set_collapsed, self.flags).before

    def undo(self):
        self.edit(Page.set_collapsed, self.old)


class SetPageFieldCommand(DocCommand):
    """Sets a page's loss, text or metrics, or the saved feed of one Placeholder (``key``;
    ``None`` removes it)."""

    def __init__(self, doc, page: str, field: str, value, key=None, text: str = ""):
        super().__init__(doc, page, text or f"Set {field}")
        self.field, self.value, self.key = field, value, key
        self.old = UNSET

    def _set(self, value):
        if self.field == "feeds":
            return self.edit(Page.set_feed, self.key, value).before
        return self.edit(Page.set_field, self.field, value).before

    def redo(self):
        self.old = self._set(UNSET if self.value is None and self.field == "feeds" else self.value)

    def undo(self):
        self._set(self.old)


class RenameNodeCommand(DocCommand):
    """Gives a block a new id (its TF name): Page.rename_node makes every reference follow."""

    def __init__(self, doc, page: str, old: str, new: str):
        super().__init__(doc, page, f"Rename {old} to {new}")
        self.old, self.new = old, new

    def redo(self):
        self.edit(Page.rename_node, self.old, self.new)

    def undo(self):
        self.edit(Page.rename_node, self.new, self.old)


class ProjectCommand(_DocRef, QUndoCommand):
    """Base of the edits of the page list."""

    def __init__(self, doc, text: str):
        super().__init__(text)
        self.doc = doc

    def edit(self, mutator, *args):
        """Run a Project mutator through the document."""
        return self.doc.apply(None, mutator, *args)


class AddPageCommand(ProjectCommand):
    def __init__(self, doc, page: Page, index: int | None = None):
        super().__init__(doc, f"Add page {page.name}")
        self.page, self.index = page, index

    def redo(self):
        self.edit(Project.insert_page, self.page, self.index)

    def undo(self):
        self.index = self.edit(Project.remove_page, self.page.name).index


class RemovePageCommand(ProjectCommand):
    def __init__(self, doc, name: str):
        super().__init__(doc, f"Delete page {name}")
        self.name = name
        self.page = None
        self.index = None

    def redo(self):
        change = self.edit(Project.remove_page, self.name)
        self.page, self.index = change.before, change.index

    def undo(self):
        self.edit(Project.insert_page, self.page, self.index)


class RenamePageCommand(ProjectCommand):
    def __init__(self, doc, old: str, new: str):
        super().__init__(doc, f"Rename page {old} to {new}")
        self.old, self.new = old, new

    def redo(self):
        self.edit(Project.rename_page, self.old, self.new)

    def undo(self):
        self.edit(Project.rename_page, self.new, self.old)


class MovePageCommand(ProjectCommand):
    def __init__(self, doc, name: str, index: int):
        super().__init__(doc, f"Move page {name}")
        self.name, self.index = name, index
        self.old = None

    def redo(self):
        self.old = self.edit(Project.move_page, self.name, self.index).before

    def undo(self):
        self.edit(Project.move_page, self.name, self.old)


# ---------------------------------------------------------------------------------- composites
# A composite edit's redo is a mutator of blockflow.composite; its undo is the inverse mutator,
# given what the redo's Change said (the removed definition, the old one, the old name).

def undo_insert_composite(doc, change, composite):
    doc.apply(None, remove_composite, composite.name)


def undo_insert_composites(doc, change, composites):
    doc.apply(None, remove_composites, [c.name for c in composites])


def undo_remove_composite(doc, change, name):
    doc.apply(None, insert_composite, change.before)


def undo_rename_composite(doc, change, old, new):
    doc.apply(None, rename_composite, new, old)


def undo_replace_composite(doc, change, composite):
    doc.apply(None, replace_composite, change.before)


class ProjectEditCommand(ProjectCommand):
    """One edit of the project's composites: ``mutator(project, *args)`` on redo, ``inverse(doc,
    change, *args)`` on undo."""

    def __init__(self, doc, text: str, mutator, args: tuple, inverse):
        super().__init__(doc, text)
        self.mutator, self.args, self.inverse = mutator, args, inverse
        self.change = None

    def redo(self):
        self.change = self.edit(self.mutator, *self.args)

    def undo(self):
        self.inverse(self.doc, self.change, *self.args)


class RestructureCommand(ProjectCommand):
    """A group or an ungroup: compile.grouping.restructure with the plan on redo, with what it
    replaced on undo (the project comes back exactly)."""

    def __init__(self, doc, text: str, plan):
        super().__init__(doc, text)
        self.plan = plan
        self.before = None

    def redo(self):
        self.before = self.edit(restructure, self.plan).before

    def undo(self):
        self.edit(restructure, self.before)


# ------------------------------------------------------------ layout: reroute points and frames
class SetBendsCommand(DocCommand):
    """Gives a wire its reroute points (page_layout.PageLayout.set_bends)."""

    def __init__(self, doc, page: str, edge: Edge, points, text: str):
        super().__init__(doc, page, text)
        self.edge, self.points, self.old = edge, tuple(points), ()

    def redo(self):
        self.old = self.edit(Page.set_bends, self.edge, self.points).before

    def undo(self):
        self.edit(Page.set_bends, self.edge, self.old)


class InsertFrameCommand(DocCommand):
    def __init__(self, doc, page: str, frame, index: int | None = None):
        super().__init__(doc, page, f"Frame {len(frame.blocks)} block{'s' if len(frame.blocks) != 1 else ''}")
        self.frame, self.index = frame, index

    def redo(self):
        self.index = self.edit(Page.insert_frame, self.frame, self.index).index

    def undo(self):
        self.edit(Page.remove_frame, self.index)


class RemoveFrameCommand(DocCommand):
    def __init__(self, doc, page: str, index: int):
        super().__init__(doc, page, "Delete frame")
        self.index, self.frame = index, None

    def redo(self):
        self.frame = self.edit(Page.remove_frame, self.index).before

    def undo(self):
        self.edit(Page.insert_frame, self.frame, self.index)


class SetFrameCommand(DocCommand):
    def __init__(self, doc, page: str, index: int, frame, text: str = "Edit frame"):
        super().__init__(doc, page, text)
        self.index, self.frame, self.old = index, frame, None

    def redo(self):
        self.old = self.edit(Page.set_frame, self.index, self.frame).before

    def undo(self):
        self.edit(Page.set_frame, self.index, self.old)
