"""Undo commands: one QUndoCommand per model edit, touching only the Project through the Document.

Each command keeps what it needs to put the model back exactly (positions in dicts and lists
included), so undoing everything returns the very project that was opened.
"""
from __future__ import annotations

import weakref

from PySide6.QtGui import QUndoCommand

from blockflow.project import Edge, Node, Page

MOVE_ID = 1001


class _DocRef:
    """``self.doc`` as a weak reference. The Document owns its undo stack, which owns the
    commands; a command holding the Document strongly would make a reference cycle whose
    collection order is up to the garbage collector, and PySide then deletes the commands from
    QUndoStack::clear after their wrappers went (a segfault). Weak, the Document is freed first,
    by reference counting, and takes its stack and commands with it."""

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


class AddNodeCommand(DocCommand):
    def __init__(self, doc, page: str, node: Node, index: int | None = None):
        super().__init__(doc, page, f"Add {node.block} {node.id}")
        self.node, self.index = node, index

    def redo(self):
        self.doc._insert_node(self.page_name, self.node, self.index)

    def undo(self):
        self.index = self.doc._take_node(self.page_name, self.node.id)


class RemoveNodeCommand(DocCommand):
    """Removes a node that has no wires left (wires are removed by their own commands first)."""

    def __init__(self, doc, page: str, node_id: str):
        super().__init__(doc, page, f"Delete {node_id}")
        self.node_id = node_id
        self.node: Node | None = None
        self.index = None
        self.feed = None
        self.was_loss = False

    def redo(self):
        page = self.page
        self.node = page.nodes[self.node_id]
        self.feed = page.feeds.get(self.node_id)
        self.was_loss = page.loss is not None and page.loss.partition(":")[0] == self.node_id
        self.loss = page.loss
        self.metrics = list(page.metrics)
        self.index = self.doc._take_node(self.page_name, self.node_id)

    def undo(self):
        self.doc._insert_node(self.page_name, self.node, self.index, feed=self.feed,
                              loss=self.loss if self.was_loss else None, metrics=self.metrics)


class ConnectCommand(DocCommand):
    def __init__(self, doc, page: str, edge: Edge, index: int | None = None):
        super().__init__(doc, page, f"Connect {edge}")
        self.edge, self.index = edge, index

    def redo(self):
        self.doc._insert_edge(self.page_name, self.edge, self.index)

    def undo(self):
        self.index = self.doc._take_edge(self.page_name, self.edge)


class DisconnectCommand(DocCommand):
    def __init__(self, doc, page: str, edge: Edge):
        super().__init__(doc, page, f"Disconnect {edge}")
        self.edge = edge
        self.index = None

    def redo(self):
        self.index = self.doc._take_edge(self.page_name, self.edge)

    def undo(self):
        self.doc._insert_edge(self.page_name, self.edge, self.index)


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
        self.doc._set_positions(self.page_name, {k: b for k, (a, b) in self.moves.items()})

    def undo(self):
        self.doc._set_positions(self.page_name, {k: a for k, (a, b) in self.moves.items()})


class SetNodeFieldCommand(DocCommand):
    """Sets one entry of a node's attrs or inline inputs (``None`` removes it), or its label."""

    _MISSING = object()

    def __init__(self, doc, page: str, node_id: str, field: str, key, value, text: str):
        super().__init__(doc, page, text)
        self.node_id, self.field, self.key, self.value = node_id, field, key, value
        self.old = self._MISSING

    def _container(self):
        return getattr(self.page.nodes[self.node_id], self.field)

    def redo(self):
        node = self.page.nodes[self.node_id]
        if self.field == "label":
            self.old = node.label
            node.label = self.value
        else:
            box = self._container()
            self.old = box.get(self.key, self._MISSING)
            if self.value is None:
                box.pop(self.key, None)
            else:
                box[self.key] = self.value
        self.doc._node_changed(self.page_name, self.node_id, semantic=self.field != "label")

    def undo(self):
        node = self.page.nodes[self.node_id]
        if self.field == "label":
            node.label = self.old
        else:
            box = self._container()
            if self.old is self._MISSING:
                box.pop(self.key, None)
            else:
                box[self.key] = self.old
        self.doc._node_changed(self.page_name, self.node_id, semantic=self.field != "label")


class SetStatesCommand(DocCommand):
    """Replaces the stored state (a Variable's value, optimizer slots) of several nodes at once:
    the values a training produced, or a reset (empty state: the initializer draws again)."""

    def __init__(self, doc, page: str, states: dict, text: str):
        super().__init__(doc, page, text)
        self.states = {nid: dict(st) for nid, st in states.items()}
        self.old: dict = {}

    def redo(self):
        nodes = self.page.nodes
        self.old = {nid: nodes[nid].state for nid in self.states}
        for nid, st in self.states.items():
            nodes[nid].state = dict(st)
        for nid in self.states:
            self.doc._node_changed(self.page_name, nid)

    def undo(self):
        nodes = self.page.nodes
        for nid, st in self.old.items():
            nodes[nid].state = st
        for nid in self.old:
            self.doc._node_changed(self.page_name, nid)


class SetPageFieldCommand(DocCommand):
    """Sets a page's loss, text, or the saved feed of one Placeholder (``None`` removes it)."""

    _MISSING = object()

    def __init__(self, doc, page: str, field: str, value, key=None, text: str = ""):
        super().__init__(doc, page, text or f"Set {field}")
        self.field, self.value, self.key = field, value, key
        self.old = self._MISSING

    def redo(self):
        page = self.page
        if self.field == "feeds":
            self.old = page.feeds.get(self.key, self._MISSING)
            if self.value is None:
                page.feeds.pop(self.key, None)
            else:
                page.feeds[self.key] = self.value
            self.doc._node_changed(self.page_name, self.key)
        else:
            self.old = getattr(page, self.field)
            setattr(page, self.field, self.value)
            self.doc._page_field_changed(self.page_name, self.field)

    def undo(self):
        page = self.page
        if self.field == "feeds":
            if self.old is self._MISSING:
                page.feeds.pop(self.key, None)
            else:
                page.feeds[self.key] = self.old
            self.doc._node_changed(self.page_name, self.key)
        else:
            setattr(page, self.field, self.old)
            self.doc._page_field_changed(self.page_name, self.field)


class RenameNodeCommand(DocCommand):
    """Gives a block a new id (its TF name): its wires, the loss mark and its saved feed follow."""

    def __init__(self, doc, page: str, old: str, new: str):
        super().__init__(doc, page, f"Rename {old} to {new}")
        self.old, self.new = old, new

    def redo(self):
        self.doc._rename_node(self.page_name, self.old, self.new)

    def undo(self):
        self.doc._rename_node(self.page_name, self.new, self.old)


class AddPageCommand(_DocRef, QUndoCommand):
    def __init__(self, doc, page: Page, index: int | None = None):
        super().__init__(f"Add page {page.name}")
        self.doc, self.page, self.index = doc, page, index

    def redo(self):
        self.doc._insert_page(self.page, self.index)

    def undo(self):
        self.index = self.doc._take_page(self.page.name)


class RemovePageCommand(_DocRef, QUndoCommand):
    def __init__(self, doc, name: str):
        super().__init__(f"Delete page {name}")
        self.doc, self.name = doc, name
        self.page = None
        self.index = None

    def redo(self):
        self.page = self.doc.project.page(self.name)
        self.index = self.doc._take_page(self.name)

    def undo(self):
        self.doc._insert_page(self.page, self.index)


class RenamePageCommand(_DocRef, QUndoCommand):
    def __init__(self, doc, old: str, new: str):
        super().__init__(f"Rename page {old} to {new}")
        self.doc, self.old, self.new = doc, old, new

    def redo(self):
        self.doc._rename_page(self.old, self.new)

    def undo(self):
        self.doc._rename_page(self.new, self.old)


class MovePageCommand(_DocRef, QUndoCommand):
    def __init__(self, doc, name: str, index: int):
        super().__init__(f"Move page {name}")
        self.doc, self.name, self.index = doc, name, index
        self.old = None

    def redo(self):
        self.old = self.doc._move_page(self.name, self.index)

    def undo(self):
        self.doc._move_page(self.name, self.old)
