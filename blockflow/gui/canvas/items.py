"""The items of the canvas: blocks, wires, the live wire and notices (the far-out overview is in
overview.py).

Items paint state and answer geometry questions (where is a port, which port is here); they hold
no logic. What a block shows (its ports, their dtype classes, inline constants, errors) arrives as
a NodeData (blockflow/present/nodeview.py) built by the scene from the Document's model.

Speed (see docs/qt.md §3): one Python item per block, ports painted by the block and hit-tested
by geometry, level-of-detail painting, wires as C++-painted QGraphicsPathItems.
"""
from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QPainterPath, QPainterPathStroker, QPen
from PySide6.QtWidgets import QGraphicsItem, QGraphicsPathItem, QGraphicsRectItem, QStyle

from blockflow.present.nodeview import NodeData, Port
from blockflow.gui.canvas.bendpath import path_through
from blockflow.gui.canvas.detail import far_title, layout_collapsed, paint_collapsed, paint_far_title, paint_scope_diamond
from blockflow.gui.canvas.resultview import BlockResults
from blockflow.gui.common.theme import Style

__all__ = ["NodeData", "Port", "NodeItem", "EdgeItem", "LiveWireItem", "NoticeItem",
           "wire_path"]

_ELIDE = Qt.ElideRight
_AL = int(Qt.AlignLeft | Qt.AlignVCenter)
_AR = int(Qt.AlignRight | Qt.AlignVCenter)
_AC = int(Qt.AlignCenter)


def wire_path(p0: QPointF, p1: QPointF, src_box: QRectF | None = None,
              dst_box: QRectF | None = None) -> QPainterPath:
    """The cubic bezier of a wire from an output at ``p0`` to an input at ``p1``.

    A wire going backwards (its input left of its output) with the blocks' boxes given is routed
    around them: out of the output to the right, along a lane between the two blocks (or under
    both when they overlap in height), and into the input from the left, instead of a loop
    drawn through both blocks."""
    x0, y0, x1, y1 = p0.x(), p0.y(), p1.x(), p1.y()
    path = QPainterPath(p0)
    if x1 < x0 + 20 and src_box is not None and dst_box is not None:
        upper, lower = (src_box, dst_box) if src_box.top() <= dst_box.top() else (dst_box, src_box)
        if lower.top() - upper.bottom() >= 24:         # a gap between them: the lane runs there
            lane = (upper.bottom() + lower.top()) / 2
        else:                                           # side by side: under both
            lane = max(src_box.bottom(), dst_box.bottom()) + 24
        reach = 40.0
        xm = (x0 + x1) / 2
        path.cubicTo(x0 + reach * 1.5, y0, x0 + reach, lane, min(x0, max(xm, x1)), lane)
        path.lineTo(max(x1, min(xm, x0)), lane)
        path.cubicTo(x1 - reach, lane, x1 - reach * 1.5, y1, x1, y1)
        return path
    dx = abs(x1 - x0) * 0.5
    if x1 < x0 + 20:           # backwards, no boxes known: loop out instead of cutting straight
        dx = max(dx, 60.0) + abs(y1 - y0) * 0.15
    dx = max(dx, 30.0)
    path.cubicTo(x0 + dx, y0, x1 - dx, y1, x1, y1)
    return path


#: how far the card drawn behind a composite's instance is shifted (inside the item's margins)
COMPOSITE_SHIFT = 4.0
#: the mark a composite's instance has before its name
COMPOSITE_MARK = "\u2750"   # ❐ (⧉ is missing from common fonts)


def block_title(block: str) -> str:
    """The name a block shows: an instance of ``@Dense`` shows "⧉ Dense"."""
    return f"{COMPOSITE_MARK} {block[1:]}" if block.startswith("@") else block


class NodeItem(QGraphicsRectItem):
    """A block: rounded body, op name and label, scope tab on top, ports left and right,
    inline constants beside their ports, a result area below.

    A QGraphicsRectItem only so that boundingRect() stays in C++ (its rect is the bounds, no pen):
    Qt asks every block for it on many repaints, and a Python override costs ~2 µs a call."""

    Type = QGraphicsItem.UserType + 1

    def __init__(self, data: NodeData, style: Style, collapsed: bool = False):
        super().__init__()
        self.style = style
        self.data = data
        self.edges: set = set()              # EdgeItems attached (kept by the scene)
        self.accept: frozenset | None = None  # ports that would take the wire being drawn
        self.hover_port: str | None = None
        self.results = None                  # a run's BlockResults (resultview.py), or None
        self.dimmed = False                  # drawn washed out (gradient highlighting)
        self.collapsed = collapsed           # drawn as its title and ports (detail.py)
        self.show_scope = False              # the scope tab: only where a page has several scopes
        self.setPen(Qt.NoPen)
        self._layout()

    # ------------------------------------------------------------------------ geometry
    def type(self):
        return NodeItem.Type

    @property
    def node_id(self) -> str:
        return self.data.node_id

    def set_data(self, data: NodeData) -> bool:
        """Show new data; returns True when the layout (and so the port positions) changed."""
        relayout = not self.data.same_shape(data)
        self.data = data
        if relayout:
            self._layout()
        self.update()
        return relayout

    def set_view(self, collapsed: bool, show_scope: bool) -> bool:
        """Collapse or expand the block, show or hide its scope tab; True when the ports moved."""
        if (collapsed, show_scope) == (self.collapsed, self.show_scope):
            return False
        self.collapsed, self.show_scope = collapsed, show_scope
        self._layout()
        self.update()
        return True

    def _layout(self) -> None:
        title = block_title(self.data.block)
        self.title_advance = self.style.title_fm.horizontalAdvance(title)
        self.far_text = far_title(self.data.block)
        self.far_advance = self.style.title_fm.horizontalAdvance(self.far_text)
        if self.collapsed:
            layout_collapsed(self, title)
        else:
            self._layout_full()
        self._layout_edges()

    def _layout_full(self) -> None:
        st, d = self.style, self.data
        title_w = self.title_advance
        sub_w = st.sub_fm.horizontalAdvance(d.subtitle)
        in_w = max((st.port_fm.horizontalAdvance(p.label) for p in d.inputs), default=0.0)
        out_w = max((st.port_fm.horizontalAdvance(p.label) for p in d.outputs), default=0.0)
        w = max(st.MIN_W, title_w + 28, min(sub_w, 220) + 24, in_w + out_w + 34)
        if len(d.outputs) > 1:     # room for the output's name on each result line
            w = max(w, st.MIN_W + 40)
        w = float(int((w + 9.999) // 10) * 10)
        rows = max(1, len(d.inputs), len(d.outputs))
        result_top = st.PORTS_TOP + rows * st.ROW_H + 2
        # One result line per output (one for none), so results arriving never move anything.
        lines = max(1, len(d.outputs))
        h = result_top + lines * st.RESULT_H + st.BOTTOM_PAD
        self.w, self.h, self.rows = w, h, rows
        self.body = QRectF(0, 0, w, h)
        self.result_rect = QRectF(6, result_top, w - 12, lines * st.RESULT_H)
        self.result_lines = [QRectF(6, result_top + i * st.RESULT_H, w - 12, st.RESULT_H)
                             for i in range(lines)]
        ports = {}
        for i, p in enumerate(d.inputs):
            ports[p.name] = QPointF(0.0, st.PORTS_TOP + (i + 0.5) * st.ROW_H)
        for i, p in enumerate(d.outputs):
            ports[p.name] = QPointF(w, st.PORTS_TOP + (i + 0.5) * st.ROW_H)
        self.ports = ports
        inline_w = 0.0
        self.inline_rects = {}
        for p in d.inputs:
            if p.inline is not None:
                tw = min(st.inline_fm.horizontalAdvance(p.inline) + 8, 110.0)
                y = ports[p.name].y()
                self.inline_rects[p.name] = QRectF(-st.PORT_R - 4 - tw, y - 7, tw, 14)
                inline_w = max(inline_w, tw + st.PORT_R + 5)
        self.inline_w = inline_w

    def _layout_edges(self) -> None:
        """The scope tab and its port, the bounds (port circles, inline constants, the tab and
        the loss badge above), the result lines."""
        st, d, w, h = self.style, self.data, self.w, self.h
        if self.show_scope:
            scope_w = min(st.scope_fm.horizontalAdvance(d.scope) + 18, w - 16)
            self.scope_rect = QRectF((w - scope_w) / 2, -st.SCOPE_H, scope_w, st.SCOPE_H + st.RADIUS)
            self.ports["scope"] = QPointF(w / 2, -st.SCOPE_H / 2)
        else:   # one scope on the page: its port stays (never wired), a diamond on the top edge
            self.ports["scope"] = QPointF(w / 2, 0.0)
        left = max(0.0 if self.collapsed else self.inline_w, st.PORT_R + 1.5)
        # The loss badge sits above the scope tab, so the tab keeps the page name whole.
        top = (-self.badge_top() if d.is_loss else st.SCOPE_H if self.show_scope else 0.0) + 1.5
        self._bounds = QRectF(-left, -top, w + left + st.PORT_R + 1.5, h + top + 1.5)
        self.setRect(self._bounds)
        if self.results is not None:
            self.results.layout([p.name for p in d.outputs], self.result_lines, self.result_rect)

    def set_results(self, run) -> None:
        """Show what a run gives this block (a BlockRun of summaries prepared off the paint path,
        blockflow/present/values.py), or nothing (None)."""
        self.results = results = BlockResults.of(run)
        if results is not None:
            results.layout([p.name for p in self.data.outputs], self.result_lines, self.result_rect)
        self.update()

    @property
    def run_error(self) -> str:
        """The message of a run that failed at this block ("" when none)."""
        return self.results.error if self.results is not None else ""

    def badge_top(self) -> float:
        """Where the loss badge's top is (above the scope tab when there is one)."""
        return -self.style.SCOPE_H * (2 if self.show_scope else 1)

    def shape(self) -> QPainterPath:
        path = QPainterPath()
        r = self.style.PORT_R + 2
        path.addRect(self.body.adjusted(-r, -self.style.SCOPE_H if self.show_scope else 0, r, 0))
        for rect in self.inline_rects.values():
            path.addRect(rect)
        return path

    def port_pos(self, port: str) -> QPointF:
        """Centre of a port in item coordinates (unknown ports: the middle of the matching edge)."""
        p = self.ports.get(port)
        if p is not None:
            return p
        return QPointF(0.0, self.style.PORTS_TOP)

    def port_scene_pos(self, port: str) -> QPointF:
        p = self.ports.get(port)
        if p is None:
            out = any(q.name == port for q in self.data.outputs)
            p = QPointF(self.w if out else 0.0, self.style.PORTS_TOP)
        return self.pos() + p

    def is_output(self, port: str) -> bool:
        return any(p.name == port for p in self.data.outputs)

    def port_at(self, scene_pos: QPointF, tolerance: float = 9.0) -> str | None:
        """The port under ``scene_pos`` (the scope port included), or None. Input rows also
        answer near the left edge, output rows near the right edge."""
        local = scene_pos - self.pos()
        x, y = local.x(), local.y()
        best, best_d = None, tolerance * tolerance
        for name, p in self.ports.items():
            dx, dy = x - p.x(), y - p.y()
            dd = dx * dx + dy * dy
            if dd <= best_d:
                best, best_d = name, dd
        if best is not None:
            return best
        st = self.style
        if not self.collapsed and st.PORTS_TOP <= y < st.PORTS_TOP + self.rows * st.ROW_H:
            row = int((y - st.PORTS_TOP) // st.ROW_H)
            if -tolerance <= x <= 12 and row < len(self.data.inputs):
                return self.data.inputs[row].name
            if self.w - 12 <= x <= self.w + tolerance and row < len(self.data.outputs):
                return self.data.outputs[row].name
        for name, rect in self.inline_rects.items():
            if rect.contains(local):
                return name
        return None

    # ------------------------------------------------------------------------ state
    def set_accept(self, ports: frozenset | None) -> None:
        if ports != self.accept:
            self.accept = ports
            self.update()

    def set_hover_port(self, port: str | None) -> None:
        if port != self.hover_port:
            self.hover_port = port
            self.update()

    def set_dimmed(self, on: bool) -> None:
        """Draw the block washed out towards the background (a block the gradient highlighting
        de-emphasises: cut off by a StopGradient, or not the block being stepped through)."""
        if on != self.dimmed:
            self.dimmed = on
            self.update()

    def hoverMoveEvent(self, event):
        self.set_hover_port(self.port_at(event.scenePos(), 7.0))

    def hoverEnterEvent(self, event):
        self._hover_children(True)
        self.hoverMoveEvent(event)

    def hoverLeaveEvent(self, event):
        self.set_hover_port(None)
        self._hover_children(False)

    def _hover_children(self, on: bool) -> None:
        """Tell the fan-out notes on this block (gradlegend.py) that it is hovered."""
        for child in self.childItems():
            show = getattr(child, "show_on_hover", None)
            if show is not None:
                show(on)

    def itemChange(self, change, value):
        if change == QGraphicsItem.ItemPositionHasChanged:
            for e in self.edges:
                e.update_path()
            if not self.isVisible():   # moved while the overview draws it: draw it live instead
                scene = self.scene()
                if scene is not None and getattr(scene, "overview_on", False):
                    scene.make_live(self)
        return value

    # ------------------------------------------------------------------------ painting
    def paint(self, painter, option, widget=None):
        self._paint_block(painter, option, widget)
        if self.dimmed:   # washed towards the background; the strips beside the body are background
            st = self.style
            r = st.PORT_R + 1.5
            top = self.badge_top() if self.data.is_loss else -st.SCOPE_H if self.show_scope else 0
            painter.fillRect(self.body.adjusted(-r, top, r, 0), st.dim_brush)

    def _paint_block(self, painter, option, widget=None):
        st, d = self.style, self.data
        lod = option.levelOfDetailFromTransform(painter.worldTransform())
        outline = self._outline(bool(option.state & QStyle.State_Selected))
        if lod < st.FLAT_LOD:  # far out: a flat box
            painter.fillRect(self.body, st.header_color(d.category))
            if outline is not st.border_pen:
                painter.setPen(outline)
                painter.setBrush(Qt.NoBrush)
                painter.drawRect(self.body)
            return
        if self.collapsed:
            paint_collapsed(self, painter, lod, outline, block_title(d.block))
            if d.is_loss and lod >= st.DETAIL_LOD:
                self._paint_badge(painter)
            return
        self._paint_body(painter, lod, outline)
        if lod < st.DETAIL_LOD:  # middle distance: body, ports and the op name, large (detail.py)
            self.paint_ports(painter, False)
            if lod >= st.title_lod:
                paint_far_title(self, painter, lod)
            return
        if self.show_scope:
            self._paint_scope(painter)
        else:
            paint_scope_diamond(self, painter, self.ports["scope"])
        self._paint_titles(painter)
        self._paint_port_labels(painter)
        if self.results is not None:
            self.results.paint(painter, st)
        self.paint_ports(painter, True)

    def _outline(self, selected: bool) -> QPen:
        st, d, results = self.style, self.data, self.results
        if d.errors or (results is not None and results.error):
            return st.error_pen
        if selected:
            return st.selected_pen
        if d.warnings:
            return st.warning_pen
        return st.border_pen

    def _paint_body(self, painter, lod: float, outline: QPen) -> None:
        """The scope tab, the body, its header in the category's colour, the result area, the
        outline."""
        st, body, w = self.style, self.body, self.w
        composite = self.data.block.startswith("@")
        if composite:   # a second card behind, up and right: a block with a diagram inside
            painter.setPen(st.border_pen)
            painter.setBrush(st.result_brush)
            painter.drawRoundedRect(body.translated(COMPOSITE_SHIFT, -COMPOSITE_SHIFT), st.RADIUS, st.RADIUS)
        if self.show_scope:   # the tab behind the body's top edge
            painter.setPen(st.border_pen)
            painter.setBrush(st.result_brush)
            painter.drawRoundedRect(self.scope_rect, 4, 4)
        painter.setPen(Qt.NoPen)
        painter.setBrush(st.body_brush)
        painter.drawRoundedRect(body, st.RADIUS, st.RADIUS)
        header = QPainterPath()
        header.addRoundedRect(QRectF(0, 0, w, st.HEADER_H + 4), st.RADIUS, st.RADIUS)
        clip = QPainterPath()
        clip.addRect(QRectF(0, 0, w, st.HEADER_H))
        painter.setBrush(QBrush(st.header_color(self.data.category)))
        painter.drawPath(header.intersected(clip))
        if lod >= st.DETAIL_LOD:
            painter.setBrush(st.result_brush)
            painter.drawRoundedRect(self.result_rect, 3, 3)
        elif self.results is not None:  # middle distance: the results as one flat colour
            painter.fillRect(self.result_rect, self.results.flat_color(st))
        painter.setBrush(Qt.NoBrush)
        painter.setPen(outline)
        painter.drawRoundedRect(body, st.RADIUS, st.RADIUS)
        if composite:   # the double outline of a composite
            painter.drawRoundedRect(body.adjusted(2.5, 2.5, -2.5, -2.5), st.RADIUS - 2, st.RADIUS - 2)

    def _paint_scope(self, painter) -> None:
        """The scope port: a hollow diamond (drawn, never connectable) and the page's scope."""
        st, sr = self.style, self.scope_rect
        painter.setFont(st.scope_font)
        painter.setPen(st.muted_pen)
        painter.drawText(QRectF(sr.left() + 13, sr.top(), sr.width() - 15, st.SCOPE_H), _AL,
                         st.scope_fm.elidedText(self.data.scope, _ELIDE, sr.width() - 16))
        paint_scope_diamond(self, painter, QPointF(sr.left() + 7, sr.top() + st.SCOPE_H / 2), Qt.NoBrush)

    def _paint_titles(self, painter) -> None:
        """The op name, the label (or id) under it, and the loss badge."""
        st, d, w = self.style, self.data, self.w
        painter.setPen(st.text_pen)
        painter.setFont(st.title_font)
        painter.drawText(QRectF(8, 2, w - 16, 18), _AC, block_title(d.block))
        painter.setFont(st.sub_font)
        painter.setPen(st.muted_pen if not d.known else st.text_pen)
        painter.drawText(QRectF(8, 18, w - 16, 15), _AC,
                         st.sub_fm.elidedText(d.subtitle, _ELIDE, w - 16))
        if d.is_loss:
            self._paint_badge(painter)

    def _paint_badge(self, painter) -> None:
        """The loss badge above the block's right end."""
        st = self.style
        painter.setFont(st.badge_font)
        badge = QRectF(self.w - 30, self.badge_top(), 28, st.SCOPE_H - 1)
        painter.setPen(Qt.NoPen)
        painter.setBrush(st.loss)
        painter.drawRoundedRect(badge, 4, 4)
        painter.setPen(QPen(QColor("#ffffff")))
        painter.drawText(badge, _AC, "loss")

    def _paint_port_labels(self, painter) -> None:
        """Port names inside the body, inline constants beside their inputs."""
        st, d, w = self.style, self.data, self.w
        painter.setFont(st.port_font)
        half = w / 2 - 6
        for p in d.inputs:
            y = self.ports[p.name].y()
            painter.setPen(st.muted_pen if p.faint else st.text_pen)
            painter.drawText(QRectF(9, y - 8, half, 16), _AL, p.label)
        for p in d.outputs:
            y = self.ports[p.name].y()
            painter.setPen(st.text_pen)
            painter.drawText(QRectF(w - 9 - half, y - 8, half, 16), _AR, p.label)
        if not self.inline_rects:
            return
        painter.setFont(st.inline_font)
        for p in d.inputs:
            rect = self.inline_rects.get(p.name)
            if rect is None:
                continue
            painter.setPen(st.inline_pen)
            painter.setBrush(st.inline_brush)
            painter.drawRoundedRect(rect, 3, 3)
            painter.setPen(st.text_pen)
            painter.drawText(rect.adjusted(4, 0, -3, 0), _AL,
                             st.inline_fm.elidedText(p.inline, _ELIDE, rect.width() - 7))

    def paint_ports(self, painter, detail: bool) -> None:
        st = self.style
        r = st.PORT_R
        accept = self.accept
        hover = self.hover_port
        painter.setPen(st.port_outline)
        for group in (self.data.inputs, self.data.outputs):
            for p in group:
                c = self.ports[p.name]
                brush = st.port_brushes[p.cls] if (p.fed or group is self.data.outputs) else st.port_empty
                if not p.fed and group is self.data.inputs and p.inline is not None:
                    brush = st.port_brushes[p.cls]
                painter.setBrush(brush)
                if group is self.data.inputs and not p.fed and p.inline is None:
                    painter.setPen(QPen(st.dtype[p.cls], 1.6))
                    painter.drawEllipse(c, r - 0.5, r - 0.5)
                    painter.setPen(st.port_outline)
                else:
                    painter.drawEllipse(c, r, r)
                if detail and ((accept is not None and p.name in accept) or p.name == hover):
                    painter.setPen(st.accept_pen)
                    painter.setBrush(Qt.NoBrush)
                    painter.drawEllipse(c, r + 3.5, r + 3.5)
                    painter.setPen(st.port_outline)


class EdgeItem(QGraphicsPathItem):
    """A wire: a cubic bezier from an output port to an input port, re-pathed when its blocks move."""

    Type = QGraphicsItem.UserType + 2

    def __init__(self, edge, src: NodeItem, dst: NodeItem, style: Style):
        super().__init__()
        self.edge, self.src, self.dst, self.style = edge, src, dst, style
        self.cls = "none"
        self.wire_selected = False
        self.hovered = False
        self._shape: QPainterPath | None = None
        self.grad_pen: QPen | None = None   # set by the gradient highlighting, over the dtype pen
        self.points: tuple = ()             # the wire's reroute points, drawn through in order
        self.setZValue(-1.0)
        self.setPen(style.wire_pens["none"])
        self.setAcceptHoverEvents(True)
        self.update_path()

    def type(self):
        return EdgeItem.Type

    def update_path(self) -> None:
        p0, p1 = self.src.port_scene_pos(self.edge.src_port), self.dst.port_scene_pos(self.edge.dst_port)
        if self.points:             # reroute points (layout_layer.py sets them from the page)
            self.setPath(path_through(p0, self.points, p1))
        else:
            self.setPath(wire_path(p0, p1, self.src.sceneBoundingRect(), self.dst.sceneBoundingRect()))
        # after setPath: its prepareGeometryChange asks for the bounding rect, which Qt takes
        # from shape(), which would cache the old path's outline here
        self._shape = None

    def shape(self) -> QPainterPath:  # a wider grip than the 2 px stroke
        if self._shape is None:
            stroker = QPainterPathStroker()
            stroker.setWidth(10.0)
            self._shape = stroker.createStroke(self.path())
        return self._shape

    def set_class(self, cls: str) -> None:
        if cls != self.cls:
            self.cls = cls
            self._restyle()

    def set_wire_selected(self, on: bool) -> None:
        if on != self.wire_selected:
            self.wire_selected = on
            self.setZValue(-0.5 if on else -1.0)
            self._restyle()

    def set_grad_pen(self, pen: QPen | None) -> None:
        """Draw the wire with ``pen`` (gradient highlighting) instead of its dtype pen; None
        gives the dtype pen back."""
        if pen is not self.grad_pen:
            self.grad_pen = pen
            self._restyle()

    def _restyle(self) -> None:
        st = self.style
        if self.wire_selected:
            self.setPen(st.wire_selected)
        elif self.grad_pen is not None:
            self.setPen(self.grad_pen)
        elif self.hovered:
            self.setPen(st.wire_hover[self.cls])
        else:
            self.setPen(st.wire_pens[self.cls])

    def hoverEnterEvent(self, event):
        self.hovered = True
        self._restyle()

    def hoverLeaveEvent(self, event):
        self.hovered = False
        self._restyle()


class LiveWireItem(QGraphicsPathItem):
    """The wire that follows the mouse while wiring."""

    def __init__(self, style: Style):
        super().__init__()
        self.setPen(style.live_wire)
        self.setZValue(10.0)

    def set_ends(self, out_pos: QPointF, in_pos: QPointF) -> None:
        self.setPath(wire_path(out_pos, in_pos))


class NoticeItem(QGraphicsItem):
    """A short message at the cursor (why a wire was refused); keeps its size at any zoom."""

    def __init__(self, style: Style):
        super().__init__()
        self.style = style
        self._text = ""
        self._rect = QRectF()
        self.setFlag(QGraphicsItem.ItemIgnoresTransformations)
        self.setZValue(20.0)

    def text(self) -> str:
        return self._text

    def set_text(self, text: str) -> None:
        self.prepareGeometryChange()
        self._text = text
        fm = self.style.sub_fm
        w = min(fm.horizontalAdvance(text), 420.0)
        lines = 1 if fm.horizontalAdvance(text) <= 420 else int(fm.horizontalAdvance(text) // 400) + 2
        self._rect = QRectF(14, 10, w + 16, lines * fm.height() + 8)
        self.update()

    def boundingRect(self):
        return self._rect.adjusted(-1, -1, 1, 1)

    def paint(self, painter, option, widget=None):
        st = self.style
        painter.setPen(QPen(st.error, 1.2))
        painter.setBrush(QBrush(st.body))
        painter.drawRoundedRect(self._rect, 5, 5)
        painter.setPen(st.text_pen)
        painter.setFont(st.sub_font)
        painter.drawText(self._rect.adjusted(8, 4, -8, -4), int(Qt.AlignLeft | Qt.TextWordWrap), self._text)
