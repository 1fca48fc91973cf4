"""The canvas's gestures, one small object each; DiagramView delegates mouse events to the current one.

The view keeps only which interaction is current (``DiagramView.interaction()``): a press starts
one (``on_press``), its moves and its release go to it, and it ends itself by handing the view
back to the interaction it interrupted (a pan during a wire drag) or to none. The idea follows
orange-canvas-core's document/interactions.py; the code is blockflow's.

- ``Pan``: the middle button, or the left one with Space held, scrolls the view.
- ``WireDrag``: from a port, lights up the ports that could take the wire (then checks those in
  view exactly, a slice at a time), shows why a lit port was refused, and wires on release;
  released on empty canvas, it opens the add-block popup for a block to wire (quickadd.py).
- ``MoveBlocks``: Qt moves the selected blocks; the drag layer draws them; one undo step on release,
  with the wire a lone block was dropped into, or its chain left with Alt (splice.py).
- ``RubberBand``: Qt's rubber band selection, shift adding to the selection like Ctrl.
- ``PlaceAt``: where pastes and dropped palette blocks land (the cursor; a repeated paste steps).
"""
from __future__ import annotations

from types import SimpleNamespace

import time

import networkx as nx
from PySide6.QtCore import QPoint, QPointF, QRectF, Qt, QTimer
from PySide6.QtGui import QMouseEvent
from PySide6.QtWidgets import QGraphicsView

from blockflow.errors import ProjectError
from blockflow.project import Edge, Node, Page
from blockflow.textsafe import for_terminal
from blockflow.spec import SCOPE_PORT
from blockflow.present.nodeview import node_data
from blockflow.gui.canvas.items import LiveWireItem, NodeItem
from blockflow.gui.document.clipboard import pasting
from blockflow.gui.canvas.scene import GRID
from blockflow.gui.canvas.splice import SpliceHint, compatible, detach, fits_into, in_one_step, splice

__all__ = ["Interaction", "Pan", "WireDrag", "MoveBlocks", "RubberBand", "PlaceAt", "on_press",
           "LIGHT_UP_SLICE", "LIGHT_UP_MAX_CHECKS", "PASTE_STEP"]

#: while a wire is drawn, lit ports in view are checked exactly (a trial compile each, by the
#: Document) in slices of this many seconds between events, the nearest first, at most this many
LIGHT_UP_SLICE, LIGHT_UP_MAX_CHECKS = 0.008, 400
#: how far a repeated paste at the same spot moves down and right of the previous one
PASTE_STEP = 3 * GRID


def _offsets_nearest_first(step: float, rings: int):
    """(0, 0), then the grid points ``step`` apart below and right of it, nearest first, out to
    ``rings`` (a copy goes down and right of where it was asked, as repeated pastes stagger)."""
    points = [(i * step, j * step) for i in range(rings + 1) for j in range(rings + 1)]
    return sorted(points, key=lambda p: (p[0] ** 2 + p[1] ** 2, p[1], p[0]))

SCOPE_REFUSAL = "the scope port shows the page's scope; it is never wired"


def _ctrl_for_shift(event):
    """Shift-click adds to the selection, as Ctrl does in Qt's own item selection."""
    if event.modifiers() & Qt.ShiftModifier:
        return QMouseEvent(event.type(), event.position(), event.globalPosition(), event.button(),
                           event.buttons(), event.modifiers() | Qt.ControlModifier)
    return event


class Interaction:
    """A gesture in progress. ``press``/``move``/``release`` return True when they handled the
    event (else the view gives it to Qt); ``drop`` forgets the gesture when the page's items are
    rebuilt under it."""

    #: the cursor position stays known when the mouse leaves the view during this gesture
    keeps_cursor = False

    def __init__(self, view):
        self.view = view
        self.scene = view.diagram_scene()

    def press(self, event, sp: QPointF) -> bool:
        return False

    def move(self, event, sp: QPointF) -> bool:
        return False

    def release(self, event, sp: QPointF) -> bool:
        return False

    def drop(self) -> None:
        pass

    def _done(self, resume=None) -> None:
        if self.view.interaction() is self:
            self.view.set_interaction(resume)


def on_press(view, event, sp: QPointF, current: Interaction | None) -> Interaction | None:
    """The interaction a press starts (or ``current``, when it goes on)."""
    if Pan.wanted(view, event):
        event.accept()
        return Pan(view, event.position().toPoint(), current)
    if event.button() == Qt.LeftButton and not isinstance(current, WireDrag):
        return _left_press(view, event, sp)
    QGraphicsView.mousePressEvent(view, event)
    return current


def _left_press(view, event, sp: QPointF) -> Interaction | None:
    """A left press: on a port a wire starts; on a wire it is selected; on a block Qt starts a
    move, elsewhere a rubber band."""
    started = view.canvas_layout.press(event, sp)     # a reroute point or a frame's title bar
    if started is not None:
        return started
    item, port = view.port_at(sp)
    if port == SCOPE_PORT:
        view.refuse(SCOPE_REFUSAL, sp)
        event.accept()
        return None
    if port is not None:
        event.accept()
        return WireDrag(view, item, port, sp)
    shift = bool(event.modifiers() & (Qt.ShiftModifier | Qt.ControlModifier))
    if item is None and view.node_at(sp) is None:   # a block covers the wires behind it
        edge = view.edge_at(sp)
        if edge is not None:
            if not shift:
                view.select_nodes([])
            view.toggle_wire(edge.edge) if shift else view.select_wires([edge.edge])
            event.accept()
            return None
    if not shift:
        view.select_wires([])
    QGraphicsView.mousePressEvent(view, _ctrl_for_shift(event))
    scene = view.diagram_scene()
    if isinstance(scene.mouseGrabberItem(), NodeItem):
        return MoveBlocks(view, {i.node_id: i.pos() for i in scene.selectedItems() if isinstance(i, NodeItem)},
                          detaching=bool(event.modifiers() & Qt.AltModifier))
    return RubberBand(view)


# ------------------------------------------------------------------------------- pan
class Pan(Interaction):
    """Scrolls the view with the mouse; ends on the button's release (or Space's)."""

    keeps_cursor = True

    @staticmethod
    def wanted(view, event) -> bool:
        return event.button() == Qt.MiddleButton or (event.button() == Qt.LeftButton and view.space_held())

    def __init__(self, view, pos: QPoint, interrupted: Interaction | None):
        super().__init__(view)
        self.last = pos
        self.resume = interrupted.resume if isinstance(interrupted, Pan) else interrupted
        view.viewport().setCursor(Qt.ClosedHandCursor)

    def move(self, event, sp) -> bool:
        pos = event.position().toPoint()
        delta = pos - self.last
        self.last = pos
        view = self.view
        view.horizontalScrollBar().setValue(view.horizontalScrollBar().value() - delta.x())
        view.verticalScrollBar().setValue(view.verticalScrollBar().value() - delta.y())
        event.accept()
        return True

    def release(self, event, sp) -> bool:
        if event.button() not in (Qt.MiddleButton, Qt.LeftButton):
            return False
        self.view.viewport().setCursor(Qt.OpenHandCursor if self.view.space_held() else Qt.ArrowCursor)
        self.end()
        event.accept()
        return True

    def end(self) -> None:
        self._done(self.resume)

    def drop(self) -> None:
        self.resume = None


# ------------------------------------------------------------------------------- moving blocks
class MoveBlocks(Interaction):
    """Qt moves the selected blocks; they are drawn on the drag layer while they move, and the
    move is pushed once, on release, as one undo step. One unwired block held over a wire it fits
    goes into it; with Alt, a block comes out of its chain (splice.py), in the same step."""

    def __init__(self, view, start: dict, detaching: bool = False):
        super().__init__(view)
        self.start = start          # node id -> position at the press
        self.detaching = detaching and len(start) == 1
        self.hint = SpliceHint(view)

    def move(self, event, sp) -> bool:
        layer = self.view.drag_layer()
        if event.buttons() & Qt.LeftButton and not layer.active:
            items = self.scene.node_items
            if layer.begin([items[n] for n in self.start if n in items]) and self.detaching:
                layer.hide_wires()      # lifted out of its chain: its wires go on release
        QGraphicsView.mouseMoveEvent(self.view, event)
        self._follow_wires()
        layer.moved()
        return True

    def _follow_wires(self) -> None:
        """Light the wire the one moving block would go into (none for several, or a wired one)."""
        item = self.scene.node_items.get(next(iter(self.start))) if len(self.start) == 1 else None
        if item is None or self.detaching or not fits_into(item):
            return
        if self.hint.follow(item.sceneBoundingRect(), item.data, item.node_id):
            self.view.drag_layer().set_extra(self.hint.item)

    def release(self, event, sp) -> bool:
        QGraphicsView.mouseReleaseEvent(self.view, _ctrl_for_shift(event))
        self.view.drag_layer().end()
        self._done()
        edge, ports = self.hint.edge, self.hint.ports
        self.hint.clear()
        moves = {}
        for nid, old in self.start.items():
            item = self.scene.node_items.get(nid)
            if item is not None and item.pos() != old:
                moves[nid] = ((old.x(), old.y()), (item.pos().x(), item.pos().y()))
        if not moves:
            return True
        doc = self.view.doc
        push = lambda: doc.move_nodes(moves, gesture=doc.new_gesture())  # noqa: E731
        nid = next(iter(moves))
        if self.detaching and any(e.src == nid or e.dst == nid for e in doc.page().edges):
            in_one_step(doc, f"Detach {nid}", push, lambda: detach(doc, nid))
            self.view.status_message.emit(f"took {nid} out of its chain")
        elif edge is not None and len(moves) == 1:
            if in_one_step(doc, f"Insert {nid} into {edge}", push, lambda: splice(doc, nid, edge, ports)):
                self.view.status_message.emit(f"put {nid} into the wire {edge}")
        else:
            push()
        return True

    def cancel(self) -> None:
        """Esc while dragging: the blocks go back where they were and nothing is pushed (as
        Blender cancels a grab); the rest of the drag moves nothing."""
        grabber = self.scene.mouseGrabberItem()
        if grabber is not None:
            grabber.ungrabMouse()
        for nid, old in self.start.items():
            item = self.scene.node_items.get(nid)
            if item is not None:
                item.setPos(old)
        self.view.drag_layer().end()
        self.hint.clear()
        self._done()

    def drop(self) -> None:
        self.hint.drop()


class RubberBand(Interaction):
    """Qt's rubber band selection (QGraphicsView.RubberBandDrag), shift adding like Ctrl."""

    def release(self, event, sp) -> bool:
        QGraphicsView.mouseReleaseEvent(self.view, _ctrl_for_shift(event))
        self.view.drag_layer().end()
        self._done()
        return True


# ------------------------------------------------------------------------------- wiring
class WireDrag(Interaction):
    """Drawing a wire: from an output (forward) or from an unfed input (backward); or a wire
    picked up from the input it feeds (``picked``)."""

    keeps_cursor = True

    def __init__(self, view, item: NodeItem, port: str, sp: QPointF):
        super().__init__(view)
        nid = item.node_id
        self.picked: Edge | None = None
        if item.is_output(port):
            self.node, self.port, self.from_output = nid, port, True
        else:
            fed = next((e.edge for e in item.edges if e.edge.dst == nid and e.edge.dst_port == port), None)
            if fed is not None:   # pick the wire up from the input it feeds
                self.node, self.port, self.from_output, self.picked = fed.src, fed.src_port, True, fed
                self.scene.edge_items[fed].setVisible(False)
            else:
                self.node, self.port, self.from_output = nid, port, False
        self.accept: dict[str, frozenset] = {}
        self.target: tuple[str, str] | None = None
        self.pending: list[tuple[str, str]] = []      # lit ports still to check exactly
        self.refused: dict[tuple[str, str], str] = {}  # lit, then refused by the exact check
        self._timer = QTimer(view)                     # exact checks of lit ports, a slice at a time
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self._refine_light_up)
        self.live: LiveWireItem | None = LiveWireItem(view.style_)
        self.scene.addItem(self.live)
        self._light_up()
        self._drag_to(sp)
        view.viewport().setCursor(Qt.CrossCursor)

    # ---------------------------------------------------------------- events
    def press(self, event, sp) -> bool:
        if Pan.wanted(self.view, event):
            return False
        QGraphicsView.mousePressEvent(self.view, event)
        return True

    def move(self, event, sp) -> bool:
        self._drag_to(sp)
        event.accept()
        return True

    def release(self, event, sp) -> bool:
        if event.button() != Qt.LeftButton:
            return False
        self._finish(sp)
        event.accept()
        return True

    def drop(self) -> None:
        self._timer.stop()
        self.live = None

    # ---------------------------------------------------------------- lighting ports up
    def _light_up(self) -> None:
        """Light up the ports that could take this wire: direction, no cycle, dtype class."""
        page = self.view.doc.page()
        items = self.scene.node_items
        graph = nx.DiGraph()
        graph.add_nodes_from(page.nodes)
        graph.add_edges_from((e.src, e.dst) for e in page.edges if e != self.picked)
        anchor = items[self.node]
        if self.from_output:
            self.accept = self._accepting_inputs(anchor, nx.ancestors(graph, self.node) | {self.node})
        else:
            self.accept = self._accepting_outputs(anchor, nx.descendants(graph, self.node) | {self.node})
        for nid, ports in self.accept.items():
            items[nid].set_accept(ports)
        self._queue_exact_checks(anchor)

    def _accepting_inputs(self, anchor: NodeItem, banned: set) -> dict[str, frozenset]:
        """The inputs a wire from an output could feed: not upstream of it, a dtype that fits,
        not already fed by this very output."""
        src_cls = next((p.cls for p in anchor.data.outputs if p.name == self.port), "any")
        accept: dict[str, frozenset] = {}
        for nid, item in self.scene.node_items.items():
            if nid in banned:
                continue
            ok = frozenset(p.name for p in item.data.inputs
                           if compatible(src_cls, p.constraint)
                           and not (p.fed and any(e.edge.dst_port == p.name and e.edge.src == self.node
                                                  and e.edge.src_port == self.port
                                                  and e.edge != self.picked for e in item.edges)))
            if ok:
                accept[nid] = ok
        if self.picked is not None:
            dst = self.picked.dst
            accept[dst] = accept.get(dst, frozenset()) | {self.picked.dst_port}
        return accept

    def _accepting_outputs(self, anchor: NodeItem, banned: set) -> dict[str, frozenset]:
        """The outputs that could feed an input: not downstream of it, a dtype that fits."""
        want = next((p.constraint for p in anchor.data.inputs if p.name == self.port), "any")
        accept: dict[str, frozenset] = {}
        for nid, item in self.scene.node_items.items():
            if nid in banned:
                continue
            ok = frozenset(p.name for p in item.data.outputs if compatible(p.cls, want))
            if ok:
                accept[nid] = ok
        return accept

    def _queue_exact_checks(self, anchor: NodeItem) -> None:
        """The dtype pre-check is cheap; shapes and block rules need the compiler. Queue the lit
        ports in view for an exact check, nearest to the anchor first."""
        view_rect = self.view.mapToScene(self.view.viewport().rect()).boundingRect()
        origin = anchor.port_scene_pos(self.port)
        items = self.scene.node_items
        pending = []
        for nid, ports in self.accept.items():
            item = items[nid]
            if not view_rect.intersects(item.sceneBoundingRect()):
                continue
            for port in ports:
                if self.picked is not None and (nid, port) == (self.picked.dst, self.picked.dst_port):
                    continue
                d = item.port_scene_pos(port) - origin
                pending.append((d.x() * d.x() + d.y() * d.y(), nid, port))
        pending.sort(reverse=True)
        self.pending = [(nid, port) for _, nid, port in pending[-LIGHT_UP_MAX_CHECKS:]]
        if self.pending:
            self._timer.start(0)

    def _refine_light_up(self) -> None:
        """One slice of the exact checks of lit ports; a port the Document refuses goes dark."""
        if self.view.interaction() is not self or not self.pending:
            return
        deadline = time.perf_counter() + LIGHT_UP_SLICE
        items = self.scene.node_items
        doc = self.view.doc
        while self.pending and time.perf_counter() < deadline:
            nid, port = self.pending.pop()
            if nid not in items or port not in self.accept.get(nid, ()):
                continue
            if self.from_output:
                verdict = doc.check_connection(self.node, self.port, nid, port)
            else:
                verdict = doc.check_connection(nid, port, self.node, self.port)
            if not verdict.ok:
                self.refused[(nid, port)] = verdict.reason
                self.accept[nid] = self.accept[nid] - {port}
                items[nid].set_accept(self.accept[nid])
        if self.pending:
            self._timer.start(0)

    # ---------------------------------------------------------------- drawing and ending
    def _drag_to(self, sp: QPointF) -> None:
        anchor = self.scene.node_items.get(self.node)
        if anchor is None:
            return
        item, port = self.view.port_at(sp)
        end = sp
        self.target = None
        if item is not None and port in self.accept.get(item.node_id, ()):
            end = item.port_scene_pos(port)
            self.target = (item.node_id, port)
        elif item is not None and (item.node_id, port) in self.refused:
            self.view.status_message.emit(f"{item.node_id}.{port}: {self.refused[item.node_id, port]}")
        fixed = anchor.port_scene_pos(self.port)
        if self.from_output:
            self.live.set_ends(fixed, end)
        else:
            self.live.set_ends(end, fixed)

    def cancel(self) -> None:
        """Stop drawing: the lit ports go dark, a picked-up wire shows again."""
        self._timer.stop()
        self._done()
        scene = self.scene
        for nid in self.accept:
            item = scene.node_items.get(nid)
            if item is not None:
                item.set_accept(None)
        if self.live is not None:
            scene.removeItem(self.live)
            self.live = None
        if self.picked is not None and self.picked in scene.edge_items:
            scene.edge_items[self.picked].setVisible(not scene.overview_on)
        self.view.viewport().setCursor(Qt.ArrowCursor)

    def _finish(self, sp: QPointF) -> None:
        self.cancel()
        view, doc = self.view, self.view.doc
        item, port = view.port_at(sp)
        if item is None or port is None:
            if self.picked is not None:     # dropped in empty space: delete the picked-up wire
                doc.disconnect([self.picked])
                view.status_message.emit(f"deleted wire {self.picked}")
            elif item is None and self.node in self.scene.node_items:   # a block to wire to
                view.quick_add.open_at(sp, (self.node, self.port, self.from_output))
            return
        if port == SCOPE_PORT:
            view.refuse(SCOPE_REFUSAL, sp)
            return
        if self.from_output:
            src, src_port, dst, dst_port = self.node, self.port, item.node_id, port
        else:
            if not item.is_output(port):
                view.refuse("two inputs cannot be joined: wire an output to an input", sp)
                return
            src, src_port, dst, dst_port = item.node_id, port, self.node, self.port
        picked = self.picked
        if picked is not None and (picked.dst, picked.dst_port) == (dst, dst_port) \
                and (picked.src, picked.src_port) == (src, src_port):
            return  # put back where it was
        self._connect(src, src_port, dst, dst_port, sp)

    def _connect(self, src: str, src_port: str, dst: str, dst_port: str, sp: QPointF) -> None:
        """Wire (replacing a picked-up wire) as one undo step, or say why not."""
        view, doc = self.view, self.view.doc
        verdict = doc.check_connection(src, src_port, dst, dst_port)
        if not verdict:
            view.refuse(f"cannot wire {src}.{src_port} to {dst}.{dst_port}: {verdict.reason}", sp)
            return
        stack = doc.undo_stack
        stack.beginMacro(f"Wire {src}.{src_port} -> {dst}.{dst_port}")
        try:
            if self.picked is not None:
                doc.disconnect([self.picked])
            doc.connect(src, src_port, dst, dst_port)
        except ProjectError as exc:
            stack.endMacro()
            stack.undo()
            view.refuse(str(exc), sp)
            return
        stack.endMacro()
        view.status_message.emit(f"wired {src}.{src_port} -> {dst}.{dst_port}")


# ------------------------------------------------------------------------------- placing
class PlaceAt:
    """Where new blocks land: a palette block dropped at a point (snapped to the grid, centred
    there), a paste at the cursor, or at the view centre when the cursor is elsewhere. Pasting
    again at the same spot while the last paste still lies there steps down and right, so the
    copies do not hide each other."""

    def __init__(self, view):
        self.view = view
        self.last_paste: tuple | None = None    # (page, anchor, repeat, {id: position})

    def block(self, block: str, scene_pos: QPointF, free: bool = False) -> str:
        """Add ``block`` centred at ``scene_pos`` (``free``: moved down or right to the nearest
        place where it covers no block); its id ("" when there is no such block)."""
        view, doc = self.view, self.view.doc
        if doc.blocks.get(block) is None:
            shown = for_terminal(block if len(block) <= 80 else block[:80] + "...")   # any program's drop
            view.status_message.emit(f"there is no block called '{shown}'")
            return ""
        refusal = doc.nesting_problem(block)
        if refusal:
            view.refuse(refusal, scene_pos)
            view.status_message.emit(refusal)
            return ""
        probe = Page(doc.current_page)
        probe.nodes["_"] = Node("_", block)
        size = NodeItem(node_data(probe, "_", doc.blocks), view.style_)
        x = round((scene_pos.x() - size.w / 2) / GRID) * GRID
        y = round((scene_pos.y() - size.h / 2) / GRID) * GRID
        if free:
            x, y = self._free_place(SimpleNamespace(nodes=[Node("_", block, position=(x, y))]), (x, y))
        nid = doc.add_node(block, (x, y))
        view.select_nodes([nid])
        view.status_message.emit(f"added {block} {nid}")
        return nid

    def _free_place(self, landing, at) -> tuple:
        """The top-left nearest ``at`` (on the grid) where the fragment covers no block drawn on
        the page: pasting over blocks hides them and their wires."""
        view, doc = self.view, self.view.doc
        probe = Page(doc.current_page)
        shapes = []
        for node in landing.nodes:
            probe.nodes[node.id] = node
            drawn = NodeItem(node_data(probe, node.id, doc.blocks), view.style_).boundingRect()  # ports, tag
            shapes.append((node.position[0] - at[0] + drawn.x(), node.position[1] - at[1] + drawn.y(),
                           drawn.width(), drawn.height()))
        taken = [item.sceneBoundingRect().adjusted(-GRID, -GRID, GRID, GRID)
                 for item in view.scene().node_items.values()]
        for dx, dy in _offsets_nearest_first(2 * GRID, 12):
            x, y = at[0] + dx, at[1] + dy
            if not any(r.intersects(QRectF(x + ox, y + oy, w, h)) for ox, oy, w, h in shapes for r in taken):
                return x, y
        return at

    def paste(self, text: str) -> list[str]:
        """Paste fragment ``text`` at the cursor; the ids pasted."""
        view, doc = self.view, self.view.doc
        pos = view.cursor_scene_pos()
        anchor = (round(pos.x() / GRID) * GRID, round(pos.y() / GRID) * GRID)
        repeat = 0
        last = self.last_paste
        page = doc.page()
        if last is not None and last[0] == page.name and last[1] == anchor and any(
                nid in page.nodes and tuple(page.nodes[nid].position) == tuple(p)
                for nid, p in last[3].items()):
            repeat = last[2] + 1
        at = (anchor[0] + repeat * PASTE_STEP, anchor[1] + repeat * PASTE_STEP)
        try:
            at = self._free_place(pasting(page, text, at), at)
            ids = doc.paste_fragment(text, at)
        except ProjectError as exc:
            view.status_message.emit(f"cannot paste: {exc}")
            return []
        self.last_paste = (page.name, anchor, repeat,
                           {nid: tuple(page.nodes[nid].position) for nid in ids if nid in page.nodes})
        view.select_nodes(ids)
        view.status_message.emit(f"pasted {len(ids)} block(s)")
        return ids
