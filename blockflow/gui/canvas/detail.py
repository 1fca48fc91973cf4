"""How a block is drawn when it shows less than everything: collapsed to its title and ports, and
far out (level of detail), where only its op name is drawn, large enough to read at that zoom, as
map viewers draw a town's name and not its streets.

Kept apart from items.py, which lays out and paints the full block; these functions read and set
the same NodeItem attributes (``w``, ``h``, ``body``, ``ports``...) so that every other question
(where is a port, which port is here, where does a wire end) is answered the same way for a
collapsed block as for a full one.
"""
from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QBrush, QPainterPath

__all__ = ["far_title", "COLLAPSED_H", "FAR_TITLE_PX", "FAR_TITLE_MIN_PX", "layout_collapsed", "paint_collapsed",
           "paint_far_title", "far_title_factor", "paint_scope_diamond"]

#: the height of a collapsed block with up to two ports a side
COLLAPSED_H = 28.0
#: the distance between the ports of a collapsed block with many
COLLAPSED_STEP = 11.0
#: the on-screen height, in pixels, of a title drawn far out; it shrinks to fit its block, but
#: never below FAR_TITLE_MIN_PX (then it is elided: a block's cached picture is clipped to its
#: bounds, so a title cannot reach past its sides)
FAR_TITLE_PX = 16.0
FAR_TITLE_MIN_PX = 9.0

_AC = int(Qt.AlignCenter)


def layout_collapsed(item, title: str) -> None:
    """Lay ``item`` out as a bar holding its title, its inputs spread down the left edge and its
    outputs down the right one (no port labels, no inline constants, no result area)."""
    st, d = item.style, item.data
    rows = max(1, len(d.inputs), len(d.outputs))
    h = max(COLLAPSED_H, rows * COLLAPSED_STEP + 6)
    w = max(80.0, st.title_fm.horizontalAdvance(title) + 28)
    w = float(int((w + 9.999) // 10) * 10)
    item.w, item.h, item.rows = w, h, rows
    item.body = QRectF(0, 0, w, h)
    # results arrive and are laid out even while collapsed (they show again on expanding)
    item.result_rect = QRectF(6, h, w - 12, 0)
    item.result_lines = [QRectF(6, h, w - 12, 0) for _ in range(max(1, len(d.outputs)))]
    ports = {}
    for group, x in ((d.inputs, 0.0), (d.outputs, w)):
        step = (h - 6) / max(1, len(group))
        for i, p in enumerate(group):
            ports[p.name] = QPointF(x, 3 + (i + 0.5) * step)
    item.ports = ports
    item.inline_rects = {}


def far_title_factor(item, lod: float) -> float:
    """How much the title font is scaled, far out, so that the title reads FAR_TITLE_PX high on
    screen, less when that would not fit the block's width (down to FAR_TITLE_MIN_PX), and never
    higher than the block."""
    st = item.style
    fm_h = st.title_fm.height()
    factor = FAR_TITLE_PX / (fm_h * lod)
    fit = (item.w - 8) / max(1.0, item.far_advance)
    if fit < factor:
        factor = max(fit, FAR_TITLE_MIN_PX / (fm_h * lod))
    return min(factor, (item.h - 2) / fm_h)


def far_title(block: str) -> str:
    """The op name drawn far out: an instance's composite name without its mark (the card drawn
    behind the block says it is one; far out every letter counts)."""
    return block[1:] if block.startswith("@") else block


def paint_far_title(item, painter, lod: float) -> None:
    """The op name alone, across the body's top and as large as far_title_factor says (elided
    when even the smallest size is too wide)."""
    st, w, h = item.style, item.w, item.h
    factor = far_title_factor(item, lod)
    avail = (w - 6) / factor
    title = item.far_text
    height = st.title_fm.height()
    painter.save()
    # at the top, where the title is when zoomed in (centred on a collapsed block's bar)
    painter.translate(w / 2, min(h / 2, 1 + height * factor / 2))
    painter.scale(factor, factor)
    painter.setPen(st.text_pen)
    painter.setFont(st.title_font)
    if item.far_advance > avail:   # only then is a new string made
        title = st.title_fm.elidedText(title, Qt.ElideRight, avail)
    painter.drawText(QRectF(-avail / 2, -height / 2, avail, height), _AC, title)
    painter.restore()


def paint_collapsed(item, painter, lod: float, outline, title: str) -> None:
    """A collapsed block: a bar in its category's colour, its title and its ports (their dtype
    colours, the wire being drawn's targets); far out, the title large."""
    st, body = item.style, item.body
    painter.setPen(Qt.NoPen)
    painter.setBrush(QBrush(st.header_color(item.data.category)))
    painter.drawRoundedRect(body, st.RADIUS, st.RADIUS)
    painter.setBrush(Qt.NoBrush)
    painter.setPen(outline)
    painter.drawRoundedRect(body, st.RADIUS, st.RADIUS)
    if lod >= st.DETAIL_LOD:
        painter.setPen(st.text_pen)
        painter.setFont(st.title_font)
        painter.drawText(QRectF(10, 0, item.w - 20, item.h), _AC,
                         st.title_fm.elidedText(title, Qt.ElideRight, item.w - 20))
    elif lod >= st.title_lod:
        paint_far_title(item, painter, lod)
    item.paint_ports(painter, lod >= st.DETAIL_LOD)


def paint_scope_diamond(item, painter, centre: QPointF, fill=None) -> None:
    """The scope port's hollow diamond: in the scope tab, or, where a page has one scope and no
    tab is drawn, on the block's top edge, filled with the body's colour."""
    cx, cy = centre.x(), centre.y()
    diamond = QPainterPath(QPointF(cx, cy - 3.5))
    diamond.lineTo(cx + 3.5, cy)
    diamond.lineTo(cx, cy + 3.5)
    diamond.lineTo(cx - 3.5, cy)
    diamond.closeSubpath()
    painter.setPen(item.style.port_outline)
    painter.setBrush(fill if fill is not None else item.style.body_brush)
    painter.drawPath(diamond)
