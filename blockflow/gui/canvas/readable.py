"""Where a page opens: the whole page when it fits at a zoom its text can be read at, else its
start (the inputs, on the left, where the data flow begins) at that zoom, as a map opens on a
town rather than on a country too small to read."""
from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF

from blockflow.gui.common.theme import Style

__all__ = ["READABLE_ZOOM", "MARGIN", "opening_view"]

#: the lowest zoom a page opens at: every block draws its text (from Style.DETAIL_LOD) and its
#: port names are 7 pixels high or more
READABLE_ZOOM = max(Style.DETAIL_LOD, 0.75)
#: room kept around the page's blocks, in scene units
MARGIN = 40.0


def opening_view(viewport_w: float, viewport_h: float, blocks: list[QRectF]) -> tuple[float, QPointF]:
    """(the zoom, the scene point to centre) to show a page whose blocks' scene rectangles are
    ``blocks`` in a viewport of that size: fitted (at most 100 %) when that is readable, else at
    READABLE_ZOOM with the page's left edge at the viewport's left and the blocks of that first
    stretch centred (or their top shown, when they are taller than the viewport)."""
    rect = QRectF()
    for r in blocks:
        rect = rect.united(r)
    rect = rect.adjusted(-MARGIN, -MARGIN, MARGIN, MARGIN)
    fit = min(viewport_w / rect.width(), viewport_h / rect.height(), 1.0)
    if fit >= READABLE_ZOOM:
        return fit, rect.center()
    s = READABLE_ZOOM
    seen_w, seen_h = viewport_w / s, viewport_h / s
    start = QRectF()
    for r in blocks:
        if r.left() < rect.left() + seen_w - MARGIN:
            start = start.united(r)
    start = start.adjusted(0, -MARGIN, 0, MARGIN)
    cy = start.center().y() if start.height() <= seen_h else start.top() + seen_h / 2
    return s, QPointF(rect.left() + seen_w / 2, cy)
