"""Splicing a block into a wire, and taking it out of a chain (as Blender's node editor does).

- While one unwired block is moved on the canvas, or a palette block is dragged over it, the wire
  under the block that it could be put into is lit (``SpliceHint``); on release the wire A->B
  becomes A->block->B through the block's first input that takes A's type and its first output
  that B's input takes (``splice``). A wire whose ports do not fit is neither lit nor touched.
- Alt + drag of a block takes it out of its chain: its wires go and what fed it feeds what it fed,
  where the Document accepts the wire (``detach``).
Each is one undo step with the move or the add it comes with: a macro the Document's own edits
(connect, disconnect, move) go into, undone whole when the Document refuses a wire.
"""
from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QPen
from PySide6.QtWidgets import QGraphicsPathItem

from blockflow.errors import ProjectError
from blockflow.project import Edge, Node, Page
from blockflow.spec import SCOPE_PORT
from blockflow.present.dtypes import dtype_class
from blockflow.present.nodeview import node_data
from blockflow.gui.canvas.items import EdgeItem, NodeItem

__all__ = ["compatible", "probe_data", "fitting_inputs", "fitting_outputs", "SpliceHint", "splice",
           "detach"]


def compatible(src_cls: str, constraint: str) -> bool:
    """Cheap dtype pre-check of an output's class against an input's constraint (the Document has
    the final word): what lights ports up while a wire is drawn."""
    want = dtype_class(constraint)
    if src_cls == "any":
        return True
    if constraint == "number":
        return src_cls != "bool"
    return want == "any" or want == src_cls


def probe_data(doc, block: str):
    """What a new ``block`` would show (its ports, unwired), on a scratch copy of the page."""
    probe = Page(doc.current_page)
    probe.nodes["_"] = Node("_", block)
    return node_data(probe, "_", doc.blocks)


def fitting_inputs(data, src_cls: str) -> list[str]:
    """The inputs of ``data`` a wire of class ``src_cls`` could feed, in order."""
    return [p.name for p in data.inputs if p.name != SCOPE_PORT and compatible(src_cls, p.constraint)]


def fitting_outputs(data, constraint: str) -> list[str]:
    """The outputs of ``data`` that could feed an input constrained to ``constraint``, in order."""
    return [p.name for p in data.outputs if p.name != SCOPE_PORT and compatible(p.cls, constraint)]


def _wire_ends(scene, edge: Edge) -> tuple[str, str]:
    """(the class of the wire's source port, the constraint of its input)."""
    src, dst = scene.node_items[edge.src].data, scene.node_items[edge.dst].data
    cls = next((p.cls for p in src.outputs if p.name == edge.src_port), "any")
    want = next((p.constraint for p in dst.inputs if p.name == edge.dst_port), "any")
    return cls, want


def splice_ports(scene, data, edge: Edge) -> tuple[str, str] | None:
    """(input, output) of the block ``data`` that wire ``edge`` would go through, or None."""
    cls, want = _wire_ends(scene, edge)
    ins, outs = fitting_inputs(data, cls), fitting_outputs(data, want)
    return (ins[0], outs[0]) if ins and outs else None


def _distance2(path, point: QPointF) -> float:
    best = float("inf")
    for i in range(33):
        d = path.pointAtPercent(i / 32) - point
        best = min(best, d.x() * d.x() + d.y() * d.y())
    return best


class SpliceHint:
    """The wire a block held over it would go into, lit while the block is over it."""

    def __init__(self, view):
        self.view = view
        self.edge: Edge | None = None
        self.ports: tuple[str, str] | None = None
        self.item: QGraphicsPathItem | None = None
        self._probes: dict[str, object] = {}

    def data_for(self, block: str):
        """A new ``block``'s ports (kept for the drag: the palette asks on every move)."""
        if block not in self._probes:
            self._probes[block] = probe_data(self.view.doc, block)
        return self._probes[block]

    def follow(self, rect: QRectF, data, node: str | None = None) -> bool:
        """Light the wire under ``rect`` (a block's body) that a block with ``data``'s ports fits
        into, the one nearest its centre; ``node``: the block itself, whose wires do not count.
        True when what is lit changed."""
        scene = self.view.diagram_scene()
        core = rect.adjusted(rect.width() * 0.15, rect.height() * 0.2, -rect.width() * 0.15, -rect.height() * 0.2)
        best, best_d = None, float("inf")
        for item in scene.items(core):
            if not isinstance(item, EdgeItem) or not item.isVisible() or node in (item.edge.src, item.edge.dst):
                continue
            if not item.shape().intersects(core):
                continue
            d = _distance2(item.path(), core.center())
            if d < best_d and splice_ports(scene, data, item.edge) is not None:
                best, best_d = item, d
        edge = best.edge if best is not None else None
        if edge == self.edge:
            return False
        self.clear()
        if best is not None:
            self.edge, self.ports = edge, splice_ports(scene, data, edge)
            self.item = QGraphicsPathItem(best.path())
            colour = QColor(self.view.style_.highlight)
            colour.setAlpha(150)
            pen = QPen(colour, 11.0, Qt.SolidLine, Qt.RoundCap)
            self.item.setPen(pen)
            self.item.setZValue(-0.5)          # over the wires, under the blocks
            scene.addItem(self.item)
        return True

    def clear(self) -> None:
        if self.item is not None and self.item.scene() is not None:
            self.item.scene().removeItem(self.item)
        self.item, self.edge, self.ports = None, None, None

    def drop(self) -> None:
        """The scene was rebuilt: the lit item went with it."""
        self.item, self.edge, self.ports = None, None, None


def splice(doc, node: str, edge: Edge, ports: tuple[str, str]) -> None:
    """Put ``node`` into ``edge`` (two connects: the second takes the wire's input over). Raises
    ProjectError, having done nothing, when the Document refuses a wire; called inside a macro."""
    if edge not in doc.page().edges:
        raise ProjectError(f"the wire {edge} is gone")
    verdict = doc.check_connection(edge.src, edge.src_port, node, ports[0])
    if not verdict:
        raise ProjectError(f"cannot put {node} into {edge}: {verdict.reason}")
    doc.connect(edge.src, edge.src_port, node, ports[0])
    doc.connect(node, ports[1], edge.dst, edge.dst_port)


def in_one_step(doc, text: str, first, then) -> bool:
    """``first()`` and ``then()`` as one undo step; when ``then`` is refused (ProjectError) only
    ``first()`` is kept, as its own step. True when both were done."""
    stack = doc.undo_stack
    before = stack.index()
    stack.beginMacro(text)
    try:
        first()
        then()
    except ProjectError:
        stack.endMacro()
        if stack.index() > before:
            stack.undo()
        first()
        return False
    stack.endMacro()
    return True


def detach(doc, node: str) -> int:
    """Take ``node`` out of its chain: its wires go, and each block it fed is fed what fed it
    where the Document accepts that wire (its inputs' sources in order, the first that fits).
    The number of wires made again. Called inside a macro."""
    page = doc.page()
    upstream = [e for e in page.edges if e.dst == node]
    downstream = [e for e in page.edges if e.src == node]
    doc.disconnect(upstream + downstream)
    made = 0
    for down in downstream:
        for up in upstream:
            if up.src == down.dst:
                continue
            if doc.check_connection(up.src, up.src_port, down.dst, down.dst_port):
                doc.connect(up.src, up.src_port, down.dst, down.dst_port)
                made += 1
                break
    return made


def fits_into(item: NodeItem) -> bool:
    """A block can be put into a wire only while it has no wires of its own."""
    return not item.edges


class PaletteSplice:
    """A block dragged from the palette: the wire under where it would land is lit, and the
    block dropped there goes into it, in the same undo step as its adding."""

    def __init__(self, view):
        self.view = view
        self.hint = SpliceHint(view)

    def over(self, block: str, sp: QPointF) -> None:
        if self.view.doc.blocks.get(block) is None:
            self.hint.clear()
            return
        data = self.hint.data_for(block)
        size = NodeItem(data, self.view.style_)
        self.hint.follow(QRectF(sp.x() - size.w / 2, sp.y() - size.h / 2, size.w, size.h), data)

    def leave(self) -> None:
        self.hint.clear()
        self.hint._probes.clear()       # the page's composites may change before the next drag

    def drop(self, block: str, sp: QPointF) -> str:
        """Add ``block`` at ``sp``, into the lit wire if there is one; its id ("" if refused)."""
        self.over(block, sp)
        edge, ports = self.hint.edge, self.hint.ports
        self.leave()
        view, doc = self.view, self.view.doc
        if edge is None or doc.nesting_problem(block):
            return view.drop_block(block, sp)
        added: list[str] = []
        done = in_one_step(doc, f"Add {block} into {edge}", lambda: added.append(view.drop_block(block, sp)),
                           lambda: splice(doc, added[-1], edge, ports))
        if done:
            view.status_message.emit(f"put {added[-1]} into the wire {edge}")
        return added[-1]
