"""The gradient legend (drawn over the canvas and into rendered pictures) and the fan-out labels
beside an output whose wires carry gradient."""
from __future__ import annotations

import math

import numpy as np
from PySide6.QtCore import QEvent, QPointF, QRectF, QSizeF, Qt
from PySide6.QtGui import QBrush, QColor, QFontMetricsF, QPainter, QPen
from PySide6.QtWidgets import QGraphicsItem, QWidget

from blockflow.present.gradview import Fanout, GradientScale
from blockflow.gui.canvas.gradstyle import SHOW_ARRAYS_UP_TO, WirePens, array_norm, array_text, short_number
from blockflow.gui.canvas.items import EdgeItem, NodeItem
from blockflow.gui.common.theme import Style

__all__ = ["Legend", "LegendOverlay", "FanoutLabel", "place_label"]


# ------------------------------------------------------------------------------------- legend
class Legend:
    """What the legend says and how it is drawn; painted by the overlay widget on the canvas and
    into pictures by ``blockflow render --grad``."""

    PAD = 8.0
    BAR_W = 216.0
    SWATCH_W = 30.0

    def __init__(self, style: Style):
        self.style = style
        self.mode: str | None = None       # "run" | "paths" | None
        self.target = ""
        self.scale: GradientScale | None = None
        self.pens: WirePens | None = None
        self.rows: list[tuple[QPen, str]] = []

    def set(self, mode, target: str, scale, pens: WirePens, rows) -> None:
        self.mode, self.target, self.scale, self.pens, self.rows = mode, target, scale, pens, list(rows)

    @property
    def visible(self) -> bool:
        return self.mode is not None

    def title(self) -> str:
        if self.mode == "paths":
            return f"gradient paths to {self.target}"
        return f"gradient of {self.target}, per wire"

    def _fonts(self):
        st = self.style
        title = QFontMetricsF(st.title_font)
        small = QFontMetricsF(st.sub_font)
        return st.title_font, title, st.sub_font, small

    def _has_bar(self) -> bool:
        return self.mode == "run" and self.scale is not None and not self.scale.empty

    def size(self) -> QSizeF:
        _, tfm, _, sfm = self._fonts()
        pad = self.PAD
        w = tfm.horizontalAdvance(self.title())
        h = pad + tfm.height() + 4
        if self.mode == "run":
            if self._has_bar():
                w = max(w, self.BAR_W + 8)
                h += sfm.height() + 2 + 14 + 3 + sfm.height() + 6
            else:
                w = max(w, sfm.horizontalAdvance("every gradient is exactly 0"))
                h += sfm.height() + 6
        for _, text in self.rows:
            w = max(w, self.SWATCH_W + 8 + sfm.horizontalAdvance(text))
            h += max(sfm.height(), 12) + 2
        return QSizeF(math.ceil(w + 2 * pad), math.ceil(h + pad - 2))

    def paint(self, painter: QPainter, origin: QPointF) -> None:
        """Draw the legend with its top-left corner at ``origin`` (painter coordinates)."""
        if not self.visible:
            return
        st = self.style
        tfont, tfm, sfont, sfm = self._fonts()
        size = self.size()
        box = QRectF(origin, size)
        painter.save()
        painter.setRenderHint(QPainter.Antialiasing, True)
        painter.setRenderHint(QPainter.TextAntialiasing, True)
        fill = QColor(st.body)
        fill.setAlphaF(0.93)
        painter.setPen(QPen(st.border, 1.0))
        painter.setBrush(QBrush(fill))
        painter.drawRoundedRect(box.adjusted(0.5, 0.5, -0.5, -0.5), 6, 6)
        pad = self.PAD
        x, y = box.left() + pad, box.top() + pad
        painter.setPen(QPen(st.text))
        painter.setFont(tfont)
        painter.drawText(QRectF(x, y, size.width() - 2 * pad, tfm.height()), int(Qt.AlignLeft | Qt.AlignVCenter),
                         self.title())
        y += tfm.height() + 4
        painter.setFont(sfont)
        if self.mode == "run":
            if self._has_bar():
                painter.setPen(QPen(st.muted))
                painter.drawText(QRectF(x, y, self.BAR_W, sfm.height()), int(Qt.AlignLeft | Qt.AlignVCenter),
                                 "‖gradient‖, log scale; wider = larger")
                y += sfm.height() + 2
                y = self._paint_bar(painter, x, y, sfm)
            else:
                painter.setPen(QPen(st.muted))
                painter.drawText(QRectF(x, y, size.width(), sfm.height()), int(Qt.AlignLeft | Qt.AlignVCenter),
                                 "every gradient is exactly 0")
                y += sfm.height() + 6
        for pen, text in self.rows:
            row_h = max(sfm.height(), 12)
            cy = y + row_h / 2
            sample = QPen(pen)
            sample.setCosmetic(False)
            sample.setWidthF(max(pen.widthF(), 1.3) if not pen.isCosmetic() else 1.5)
            painter.setPen(sample)
            painter.drawLine(QPointF(x, cy), QPointF(x + self.SWATCH_W, cy))
            painter.setPen(QPen(st.text))
            painter.drawText(QRectF(x + self.SWATCH_W + 8, y, size.width(), row_h),
                             int(Qt.AlignLeft | Qt.AlignVCenter), text)
            y += row_h + 2
        painter.restore()

    def _paint_bar(self, painter, x: float, y: float, sfm) -> float:
        """The colour bar, tapered like the wire widths, with the smallest, middle and largest norm."""
        colours = self.pens.colours
        n = len(colours)
        seg = self.BAR_W / n
        bar_h = 14.0
        painter.setPen(Qt.NoPen)
        for k, c in enumerate(colours):
            h = 4.0 + (bar_h - 4.0) * k / (n - 1)
            painter.setBrush(c)
            painter.drawRect(QRectF(x + k * seg, y + (bar_h - h) / 2, seg + 0.4, h))
        y += bar_h + 3
        ticks = self.scale.ticks(3) if self.scale.high > self.scale.low else [(1.0, self.scale.high)]
        painter.setPen(QPen(self.style.text))
        for frac, value in ticks:
            text = short_number(value)
            tw = sfm.horizontalAdvance(text)
            cx = x + frac * self.BAR_W
            left = min(max(cx - tw / 2, x), x + self.BAR_W - tw)
            painter.drawLine(QPointF(cx, y - 3), QPointF(cx, y - 1))
            painter.drawText(QRectF(left, y, tw + 2, sfm.height()), int(Qt.AlignLeft | Qt.AlignVCenter), text)
        return y + sfm.height() + 6


class LegendOverlay(QWidget):
    """The legend as a small, semi-opaque widget over the canvas's bottom-left corner, like a
    head-up display: it does not zoom or pan, and lets the mouse through.

    A child of the view, laid over its viewport, rather than of the viewport itself: the view
    scrolls the viewport's children with its contents on every pan (QWidget.scroll), which would
    carry the legend away from its corner."""

    MARGIN = 10
    #: the most of the canvas the legend may cover: on a smaller canvas (a small window, a large
    #: QT_SCALE_FACTOR) the wires are shown rather than their legend
    MAX_SHARE = 0.3

    def __init__(self, view, legend: Legend):
        super().__init__(view)
        self.view = view
        self.legend = legend
        self.setAttribute(Qt.WA_TransparentForMouseEvents)
        self.setAttribute(Qt.WA_NoSystemBackground)
        self.setFocusPolicy(Qt.NoFocus)
        self.hide()
        self.enabled = True      # View > Gradient Legend: the user may hide it
        view.viewport().installEventFilter(self)

    def set_enabled(self, on: bool) -> None:
        self.enabled = bool(on)
        self.refresh()

    def _fits(self) -> bool:
        size, vp = self.legend.size(), self.view.viewport().size()
        return size.width() * size.height() <= self.MAX_SHARE * vp.width() * vp.height()

    def refresh(self) -> None:
        if not self.legend.visible or not self.enabled or not self._fits():
            self.hide()
            return
        self.resize(self.legend.size().toSize())
        self._place()
        self.show()
        self.raise_()
        self.update()

    def _place(self) -> None:
        vp = self.view.viewport().geometry()
        self.move(vp.left() + self.MARGIN, max(vp.top(), vp.bottom() + 1 - self.height() - self.MARGIN))

    def eventFilter(self, obj, event):
        if event.type() == QEvent.Resize:
            self.refresh()               # shown again when the canvas has room for it
        elif event.type() == QEvent.Move and self.isVisible():
            self._place()
        return False

    def paintEvent(self, event):
        painter = QPainter(self)
        self.legend.paint(painter, QPointF(0, 0))
        painter.end()


# ------------------------------------------------------------------------------------- fan-outs
class FanoutLabel(QGraphicsItem):
    """Beside an output that feeds several wires carrying gradient: each wire's contribution (and
    the block receiving it) and their sum, the gradient of the target with respect to the output.

    ``fanout`` keeps the numbers (contributions and the runtime's total); ``text`` is what is
    drawn: a header line, then one row per contribution and one for the total (small arrays in
    full, bigger ones as norms), or for a scalar one line such as ``Σ 1.79 = 0.786 (Tanh t) + 1
    (Square q)``. ``order``: the receiving blocks' node ids in the order to list them."""

    def __init__(self, fanout: Fanout, blocks: dict, style: Style, accent: QColor, order=None):
        super().__init__()
        self.fanout = fanout
        self.style = style
        self.accent = accent
        self.header, self.rows = self._content(fanout, blocks, order or [])
        self.text = "\n".join([self.header] + [f"{a}  {b}" for a, b in self.rows])
        fm = QFontMetricsF(style.sub_font)
        self._line_h = fm.height()
        self._col = max((fm.horizontalAdvance(a) for a, _ in self.rows), default=0.0) + 8
        w = max([fm.horizontalAdvance(self.header)] + [self._col + fm.horizontalAdvance(b) for _, b in self.rows])
        self._rect = QRectF(0, 0, w + 14, self._line_h * (1 + len(self.rows)) + 8)
        self.setZValue(5.0)
        self.setAcceptedMouseButtons(Qt.NoButton)
        #: no free place was found: drawn only while its block is hovered (show_on_hover)
        self.hover_only = False

    def set_hover_only(self, on: bool) -> None:
        self.hover_only = on
        self.setVisible(not on)

    def show_on_hover(self, hovered: bool) -> None:
        """Its block is hovered (or no more): a label without a free place shows meanwhile, its
        block raised so that the label is drawn over the blocks it covers."""
        if self.hover_only and hovered != self.isVisible():
            self.setVisible(hovered)
            src = self.parentItem()
            if src is not None:
                src.setZValue(3.0 if hovered else 0.0)

    @staticmethod
    def _content(fan: Fanout, blocks: dict, order: list) -> tuple[str, list]:
        rank = {nid: i for i, nid in enumerate(order)}
        contributions = sorted(fan.contributions, key=lambda c: (rank.get(c[0].dst, len(rank)), c[0].dst,
                                                                 c[0].dst_port))
        who = [f"{blocks.get(e.dst, '?')} {e.dst}" for e, _ in contributions]
        total = fan.total if fan.total is not None else fan.summed()
        size = int(np.asarray(total).size)
        if size == 1:
            parts = " + ".join(f"{array_text(g)} ({w})" for (_, g), w in zip(contributions, who))
            return f"Σ {array_text(total)} = {parts}".replace("+ -", "− "), []
        small = size <= SHOW_ARRAYS_UP_TO
        show = array_text if small else (lambda a: f"‖g‖ {short_number(array_norm(a))}")
        header = f"Σ at {fan.node}.{fan.port}: the gradients add up" + ("" if small else " element-wise")
        rows = [(f"{'+' if i else '  '} from {w}", show(g)) for i, ((_, g), w) in enumerate(zip(contributions, who))]
        rows.append(("= total", show(total)))
        return header, rows

    def boundingRect(self):
        return self._rect.adjusted(-1, -1, 1, 1)

    def paint(self, painter, option, widget=None):
        st = self.style
        fill = QColor(st.body)
        fill.setAlphaF(0.92)
        painter.setPen(QPen(self.accent, 1.4))
        painter.setBrush(QBrush(fill))
        painter.drawRoundedRect(self._rect, 5, 5)
        painter.setPen(st.text_pen)
        painter.setFont(st.sub_font)
        h, left = self._line_h, int(Qt.AlignLeft | Qt.AlignVCenter)
        painter.drawText(QRectF(7, 4, self._rect.width() - 10, h), left, self.header)
        for i, (a, b) in enumerate(self.rows, 1):
            painter.drawText(QRectF(7, 4 + i * h, self._col, h), left, a)
            painter.drawText(QRectF(7 + self._col, 4 + i * h, self._rect.width() - self._col - 10, h), left, b)


def _free_spots(src, p: QPointF, w: float, h: float):
    """Candidate top-left corners for a label of size ``w`` x ``h`` at port ``p`` of ``src``
    (item coordinates), nearest first: right of the port, level, above and below, further out;
    then above and below the block."""
    for k in range(10):
        x = p.x() + 12 + 24 * k
        for y in (p.y() - h / 2, p.y() - h - 8, p.y() + 8, p.y() - 1.6 * h - 8, p.y() + 0.6 * h + 8,
                  p.y() - 2.4 * h - 8, p.y() + 1.4 * h + 8):
            yield k, QPointF(x, y)
    # away from the port: only when every place beside it covers a block (k weighs 0.2 a step)
    for k, x in enumerate((src.w - w, src.w - w / 2, src.w)):
        for y in (-h - 18, src.h + 10, -2 * h - 24, src.h + h + 16):
            yield 250 + k, QPointF(x, y)


def covers_blocks(scene, rect: QRectF) -> bool:
    """Does ``rect`` (scene coordinates) cover a block (its own included: a note over its block
    hides what it shows) or a fan-out label shown always?"""
    for item in scene.items(rect):
        if isinstance(item, NodeItem) and item.isVisible():
            return True
        if isinstance(item, FanoutLabel) and item.isVisible() and not item.hover_only:
            return True
    return False


def place_label(scene, src, port: str, size: QSizeF) -> tuple[QPointF, bool]:
    """Where a fan-out label beside ``src``'s output ``port`` covers no block and no other label,
    and the fewest wires: candidates around the port and the block, scored by the wire points
    they would cover and how far out they are. Returns the top-left corner in ``src``'s
    coordinates and whether it is free; when no candidate is, the one covering least, and the
    label is shown only while the block is hovered."""
    p = src.port_pos(port)
    w, h = size.width(), size.height()
    points = []
    for e in src.edges:
        path = e.path()
        points += [path.pointAtPercent(k / 40) for k in range(41)]
    own = src.edges
    best, best_score, free = None, None, False
    origin = src.pos()
    spots = [(k, corner, QRectF(origin + corner, size).adjusted(-4, -4, 4, 4)) for k, corner in _free_spots(src, p, w, h)]
    # One query of the scene for all 82 candidates, then each candidate against what it found:
    # a query each took 20 ms a label on a 450-block page (the scene keeps no index, for drags).
    union = QRectF(spots[0][2])
    for _, _, rect in spots[1:]:
        union = union.united(rect)
    near = _NearItems(scene.items(union), own)
    for k, corner, rect in spots:
        clear = not near.covers_block(rect)
        score = sum(1 for q in points if rect.contains(q)) + 0.2 * k + (0 if clear else 1000)
        score += 8 * near.wires_crossing(rect)
        if best_score is None or score < best_score:
            best, best_score, free = corner, score, clear
    return best, free


class _NearItems:
    """The items of a region, asked about smaller rectangles inside it as ``scene.items(rect)``
    would answer (an item counts when its shape meets the rectangle)."""

    def __init__(self, items, own):
        self.blocks = [i.sceneBoundingRect() for i in items
                       if (isinstance(i, NodeItem) and i.isVisible())
                       or (isinstance(i, FanoutLabel) and i.isVisible() and not i.hover_only)]
        self.wires = [i.mapToScene(i.shape()) for i in items if isinstance(i, EdgeItem) and i not in own]
        self.wire_boxes = [path.boundingRect() for path in self.wires]

    def covers_block(self, rect: QRectF) -> bool:
        return any(r.intersects(rect) for r in self.blocks)

    def wires_crossing(self, rect: QRectF) -> int:
        return sum(1 for box, path in zip(self.wire_boxes, self.wires) if box.intersects(rect) and path.intersects(rect))
