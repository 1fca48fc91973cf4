"""The path of a wire through its reroute points, and where a new point goes (no items here,
so that items.py can draw wires with it).

A wire with points is drawn as one smooth curve through them (a Catmull-Rom spline, leaving its
output and entering its input horizontally, as a wire without points does), so the gradient
pens, the cut dashes and the wide grip used to select a wire all work on it unchanged: they are
properties of the path item, whatever its path.
"""
from __future__ import annotations

import math

from PySide6.QtCore import QPointF
from PySide6.QtGui import QPainterPath

__all__ = ["path_through", "insertion_index"]


def path_through(p0: QPointF, points, p1: QPointF) -> QPainterPath:
    """A smooth path from ``p0`` through ``points`` to ``p1``: tangents horizontal at both ends
    and along the neighbours' chord at each point (Catmull-Rom), each control arm a third of its
    segment, so a point pulls the wire through itself without overshooting far."""
    pts = [QPointF(p0)] + [QPointF(x, y) for x, y in points] + [QPointF(p1)]
    tangents = []
    for i, p in enumerate(pts):
        if i == 0 or i == len(pts) - 1:
            tangents.append((1.0, 0.0))
            continue
        dx, dy = pts[i + 1].x() - pts[i - 1].x(), pts[i + 1].y() - pts[i - 1].y()
        n = math.hypot(dx, dy) or 1.0
        tangents.append((dx / n, dy / n))
    path = QPainterPath(pts[0])
    for i in range(len(pts) - 1):
        a, b = pts[i], pts[i + 1]
        arm = max(math.hypot(b.x() - a.x(), b.y() - a.y()) / 3.0, 1.0)
        (ta, tb) = tangents[i], tangents[i + 1]
        path.cubicTo(QPointF(a.x() + ta[0] * arm, a.y() + ta[1] * arm),
                     QPointF(b.x() - tb[0] * arm, b.y() - tb[1] * arm), b)
    return path


def insertion_index(p0: QPointF, points, p1: QPointF, at: QPointF) -> int:
    """Where a point at ``at`` goes among ``points`` (from ``p0`` to ``p1``): in the stretch
    whose detour through it is shortest, so a double-click on a wire adds a point where it was
    clicked, between the points around it."""
    pts = [(p0.x(), p0.y())] + [tuple(p) for p in points] + [(p1.x(), p1.y())]
    x, y = at.x(), at.y()

    def detour(i):
        (ax, ay), (bx, by) = pts[i], pts[i + 1]
        return math.hypot(x - ax, y - ay) + math.hypot(bx - x, by - y) - math.hypot(bx - ax, by - ay)
    return min(range(len(pts) - 1), key=detour)
