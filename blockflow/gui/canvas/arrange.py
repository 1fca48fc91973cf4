"""Aligning and distributing blocks: the moves, as ``{node id: (old position, new position)}``,
for the view to push as one undo step."""
from __future__ import annotations

from blockflow.gui.canvas.scene import GRID

__all__ = ["align_moves", "distribute_moves", "ALIGNMENTS"]


def _snap(v: float) -> float:
    return round(v / GRID) * GRID


def _left(items):
    x = min(i.pos().x() for i in items)
    return {i: (x, i.pos().y()) for i in items}


def _right(items):
    r = max(i.pos().x() + i.w for i in items)
    return {i: (r - i.w, i.pos().y()) for i in items}


def _top(items):
    y = min(i.pos().y() for i in items)
    return {i: (i.pos().x(), y) for i in items}


def _bottom(items):
    b = max(i.pos().y() + i.h for i in items)
    return {i: (i.pos().x(), b - i.h) for i in items}


def _hcenter(items):
    c = sum(i.pos().x() + i.w / 2 for i in items) / len(items)
    return {i: (_snap(c - i.w / 2), i.pos().y()) for i in items}


def _vcenter(items):
    c = sum(i.pos().y() + i.h / 2 for i in items) / len(items)
    return {i: (i.pos().x(), _snap(c - i.h / 2)) for i in items}


#: how -> the new position of each of the items (NodeItems: pos(), w, h)
ALIGNMENTS = {"left": _left, "right": _right, "top": _top, "bottom": _bottom,
              "hcenter": _hcenter, "vcenter": _vcenter}


def align_moves(items, how: str) -> dict:
    """Line ``items`` up on their left, right, top or bottom edges or their centres."""
    place = ALIGNMENTS.get(how)
    if place is None:
        raise ValueError(f"unknown alignment {how!r}")
    return {i.node_id: ((i.pos().x(), i.pos().y()), pos) for i, pos in place(items).items()}


def distribute_moves(items, how: str) -> dict:
    """Space ``items`` (three or more) evenly, "horizontal"ly or "vertical"ly: the end blocks
    stay, the ones between land on the grid."""
    horizontal = how == "horizontal"
    if how not in ("horizontal", "vertical"):
        raise ValueError(f"unknown distribution {how!r}")
    key = (lambda i: i.pos().x()) if horizontal else (lambda i: i.pos().y())
    size = (lambda i: i.w) if horizontal else (lambda i: i.h)
    items = sorted(items, key=key)
    start, end = key(items[0]), key(items[-1]) + size(items[-1])
    gap = (end - start - sum(size(i) for i in items)) / (len(items) - 1)
    moves, at = {}, start
    for k, i in enumerate(items):
        old = (i.pos().x(), i.pos().y())
        to = at if k in (0, len(items) - 1) else _snap(at)
        moves[i.node_id] = (old, (to, old[1]) if horizontal else (old[0], to))
        at += size(i) + gap
    return moves
