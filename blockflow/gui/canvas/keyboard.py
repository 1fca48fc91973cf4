"""The canvas from the keyboard alone: select the next or previous block in wire order, move the
selection with the arrows (a burst of presses is one undo step), focus a port of the selected
block and draw a wire from it, choosing the target port with the arrows or P and Enter (Escape
cancels). The keys are in keymap.py; what is focused is drawn over the page (``paint``).

A wire drawn from the keyboard is the mouse's WireDrag gesture (interactions.py), driven to the
chosen port: the same ports light up, the same checks refuse, the same edit is made.
"""
from __future__ import annotations

import heapq

from PySide6.QtCore import QElapsedTimer, QPointF, QRectF, Qt
from PySide6.QtGui import QPen

from blockflow.spec import SCOPE_PORT
from blockflow.gui.canvas.interactions import WireDrag
from blockflow.gui.canvas.scene import GRID

__all__ = ["CanvasKeyboard", "wire_order", "BURST_MS", "JUMP"]

#: arrow presses closer together than this (ms) are one move, one undo step
BURST_MS = 800
#: grid steps a Shift+arrow moves
JUMP = 5
_MODIFIER_KEYS = {Qt.Key_Shift, Qt.Key_Control, Qt.Key_Alt, Qt.Key_Meta, Qt.Key_AltGr}


def wire_order(page) -> list[str]:
    """The page's blocks in wire order: every block after the blocks that feed it; blocks free
    to go in any order go in reading order (top to bottom, left to right)."""
    def reading(nid):
        x, y = page.nodes[nid].position
        return (round(y / GRID), x, nid)

    feeds = {nid: set() for nid in page.nodes}
    waiting = {nid: 0 for nid in page.nodes}
    for e in page.edges:
        if e.src in feeds and e.dst in waiting and e.dst not in feeds[e.src]:
            feeds[e.src].add(e.dst)
            waiting[e.dst] += 1
    ready = [(reading(n), n) for n, count in waiting.items() if count == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, nid = heapq.heappop(ready)
        order.append(nid)
        for dst in feeds[nid]:
            waiting[dst] -= 1
            if waiting[dst] == 0:
                heapq.heappush(ready, (reading(dst), dst))
    if len(order) < len(page.nodes):         # a cycle (refused by the compiler): the rest as read
        order += sorted((n for n in page.nodes if n not in set(order)), key=reading)
    return order


class CanvasKeyboard:
    """The keyboard navigation of one DiagramView (``view.keyboard``)."""

    def __init__(self, view):
        self.view = view
        self.port: str | None = None            # the focused port of the selected block
        self._port_block: str | None = None     # the block that port is of
        self.wire: WireDrag | None = None       # a wire being drawn from the keyboard
        self.targets: list[tuple[str, str]] = []
        self.target = -1
        self._gesture: int | None = None
        self._since = QElapsedTimer()
        view.selection_changed.connect(self._on_selection)
        view.doc.node_removed.connect(self._block_gone)
        view.doc.node_renamed.connect(lambda page, old, _new: self._block_gone(page, old))

    def _on_selection(self, _ids) -> None:
        if self.port is not None:            # a focus ring is drawn over the page, not by an item
            self.view.viewport().update()

    def _block_gone(self, page: str, nid: str) -> None:
        """A block removed or renamed (Undo, a delete) while a wire is drawn from the keyboard:
        its ports are no targets any more, and a wire from it is cancelled."""
        scene = self.view.diagram_scene()
        if self.wire is None or scene.page is None or page != scene.page.name:
            return
        if nid == self.wire.node:
            wire, self.wire, self.targets, self.target = self.wire, None, [], -1
            if self.view.interaction() is wire:
                wire.cancel()
            self.view.viewport().update()
            return
        current = self.target_port()
        self.targets = [t for t in self.targets if t[0] != nid]
        self.target = self.targets.index(current) if current in self.targets else (0 if self.targets else -1)
        if self.wiring():
            self._show_target()

    # ---------------------------------------------------------------- what is focused
    def block(self) -> str | None:
        """The block keys act on: the one selected block, or None."""
        sel = self.view.selected_nodes()
        return sel[0] if len(sel) == 1 else None

    def focused_port(self) -> tuple[str, str] | None:
        nid = self.block()
        if nid is None or self.port is None or nid != self._port_block:
            return None
        return nid, self.port

    def target_port(self) -> tuple[str, str] | None:
        """The port the keyboard wire would connect to, or None."""
        if self.wiring() and 0 <= self.target < len(self.targets):
            return self.targets[self.target]
        return None

    def wiring(self) -> bool:
        return self.wire is not None and self.view.interaction() is self.wire

    def forget(self) -> None:
        """The selection or the page changed under the focus: drop it."""
        if self.port is not None:
            self.port = None
            self.view.viewport().update()

    # ---------------------------------------------------------------- selecting blocks
    def select_next(self) -> None:
        self._step_block(1)

    def select_previous(self) -> None:
        self._step_block(-1)

    def _step_block(self, step: int) -> None:
        view = self.view
        order = [n for n in wire_order(view.diagram_scene().page) if n in view.diagram_scene().node_items]
        if not order:
            return
        sel = view.selected_nodes()
        if sel:
            at = max(order.index(n) for n in sel) if step > 0 else min(order.index(n) for n in sel)
            nid = order[(at + step) % len(order)]
        else:
            nid = order[0] if step > 0 else order[-1]
        view.select_nodes([nid])
        self.port = None
        view.ensureVisible(view.node_item(nid), 40, 40)
        view.status_message.emit(f"selected {nid} ({order.index(nid) + 1} of {len(order)} in wire order)")

    # ---------------------------------------------------------------- moving the selection
    def move_left(self):
        self._arrow(-1, 0, 1)

    def move_right(self):
        self._arrow(1, 0, 1)

    def move_up(self):
        self._arrow(0, -1, 1)

    def move_down(self):
        self._arrow(0, 1, 1)

    def jump_left(self):
        self._arrow(-1, 0, JUMP)

    def jump_right(self):
        self._arrow(1, 0, JUMP)

    def jump_up(self):
        self._arrow(0, -1, JUMP)

    def jump_down(self):
        self._arrow(0, 1, JUMP)

    def _arrow(self, dx: int, dy: int, steps: int) -> None:
        if self.wiring():
            self._step_target(1 if dx + dy > 0 else -1)
            return
        view = self.view
        ids = view.selected_nodes()
        if not ids:
            view.status_message.emit("select a block first (] selects the next one)")
            return
        page = view.diagram_scene().page
        d = GRID * steps
        moves = {}
        for nid in ids:
            x, y = page.nodes[nid].position
            moves[nid] = ((x, y), (x + dx * d, y + dy * d))
        # Presses in a burst share one gesture: the Document merges their moves into one step.
        if self._gesture is None or not self._since.isValid() or self._since.elapsed() > BURST_MS:
            self._gesture = view.doc.new_gesture()
        self._since.restart()
        view.doc.move_nodes(moves, gesture=self._gesture)
        view.select_nodes(ids)       # the moved items were rebuilt or moved: keep them selected
        view.ensureVisible(view.node_item(ids[0]), 20, 20)

    def end_burst(self, event=None) -> None:
        """The next arrow starts a new undo step (another key or a click came between). Shift or
        Ctrl pressed on its own (to jump, say) is not another key."""
        if event is None or event.key() not in _MODIFIER_KEYS:
            self._gesture = None

    # ---------------------------------------------------------------- ports and wires
    def _ports(self, nid: str) -> list[str]:
        item = self.view.node_item(nid)
        return [p.name for p in item.data.inputs] + [p.name for p in item.data.outputs]

    def next_port(self) -> None:
        self._step_port(1)

    def previous_port(self) -> None:
        self._step_port(-1)

    def _step_port(self, step: int) -> None:
        if self.wiring():
            self._step_target(step)
            return
        nid = self.block()
        if nid is None:
            self.view.status_message.emit("select one block to focus its ports (] selects the next block)")
            return
        ports = [p for p in self._ports(nid) if p != SCOPE_PORT]
        if not ports:
            return
        at = ports.index(self.port) if self.port in ports else (-1 if step > 0 else 0)
        if self._port_block != nid:
            at = -1 if step > 0 else 0
        self.port, self._port_block = ports[(at + step) % len(ports)], nid
        kind = "output" if self.view.node_item(nid).is_output(self.port) else "input"
        self.view.status_message.emit(f"{nid}.{self.port} ({kind}): Enter starts a wire from it")
        self.view.viewport().update()

    def enter(self) -> None:
        if self.wiring():
            self._connect()
        elif self.focused_port() is not None:
            self._start_wire()
        else:
            self.view.status_message.emit("P focuses a port of the selected block; Enter then starts a wire")

    def _start_wire(self) -> None:
        view = self.view
        nid, port = self.focused_port()
        item = view.node_item(nid)
        wire = WireDrag(view, item, port, item.port_scene_pos(port))
        view.set_interaction(wire)
        self.wire = wire
        self.targets = self._rank_targets(wire)
        self.target = 0 if self.targets else -1
        if not self.targets:
            view.status_message.emit(f"nothing on this page can be wired to {nid}.{port}; Esc cancels")
        self._show_target()

    def _rank_targets(self, wire: WireDrag) -> list[tuple[str, str]]:
        """The ports the wire could go to, nearest first."""
        items = self.view.diagram_scene().node_items
        origin = items[wire.node].port_scene_pos(wire.port)
        found = []
        for nid, ports in wire.accept.items():
            for port in ports:
                d = items[nid].port_scene_pos(port) - origin
                found.append((d.x() * d.x() + d.y() * d.y(), nid, port))
        return [(nid, port) for _, nid, port in sorted(found)]

    def _step_target(self, step: int) -> None:
        if not self.targets:
            return
        self.target = (self.target + step) % len(self.targets)
        self._show_target()

    def _show_target(self) -> None:
        view, target = self.view, self.target_port()
        if target is not None:
            nid, port = target
            sp = view.node_item(nid).port_scene_pos(port)
            self.wire._drag_to(sp)      # the gesture's own drawing, as if the mouse were there
            view.ensureVisible(QRectF(sp.x() - 40, sp.y() - 40, 80, 80))
            view.status_message.emit(f"wire to {nid}.{port} ({self.target + 1} of {len(self.targets)}): "
                                     "Enter connects, arrows or P choose another, Esc cancels")
        view.viewport().update()

    def _connect(self) -> None:
        target, wire = self.target_port(), self.wire
        self.wire, self.targets, self.target = None, [], -1
        if target is None:
            wire.cancel()
            return
        nid, port = target
        wire._finish(self.view.node_item(nid).port_scene_pos(port))
        self.view.viewport().update()

    # ---------------------------------------------------------------- drawing the focus
    def paint(self, painter, _rect) -> None:
        """The focused port, or the target a keyboard wire would take, ringed over the page."""
        if self.port is None and self.wire is None:
            return                           # every repaint comes here: nothing to look up
        view = self.view
        marks = []
        if self.wiring():
            target = self.target_port()
            if target is not None:
                marks.append(target)
        else:
            self.wire = None
            focused = self.focused_port()
            if focused is not None:
                marks.append(focused)
        items = view.diagram_scene().node_items
        style = view.style_
        px = 1.0 / max(view.zoom(), 0.05)    # one screen pixel in scene units: rings stay visible
        for nid, port in marks:
            item = items.get(nid)
            if item is None:
                continue
            centre: QPointF = item.port_scene_pos(port)
            painter.setBrush(Qt.NoBrush)
            painter.setPen(_pen(style.highlight, 2.5))
            r = max(9.0, 8.0 * px)
            painter.drawEllipse(centre, r, r)
            painter.setPen(_pen(style.text, 1.0, Qt.DashLine))
            painter.drawEllipse(centre, r + 3.5 * px, r + 3.5 * px)
            # the block the focus is on, outlined too: the port alone is small when zoomed out
            painter.setPen(_pen(style.highlight, 1.5, Qt.DashLine))
            painter.drawRoundedRect(item.sceneBoundingRect().adjusted(-6, -6, 6, 6), 8, 8)


def _pen(color, width: float, style=Qt.SolidLine) -> QPen:
    pen = QPen(color, width, style)
    pen.setCosmetic(True)                    # as wide on screen at any zoom
    return pen
