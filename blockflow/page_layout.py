"""How a page is laid out beyond its blocks' positions: reroute points on wires and frames
around blocks, as plain data with their mutators (a mixin of Page; no Qt, no files).

Neither changes what a page computes. A wire's reroute points are kept by the wire (``Page.bends``:
``{Edge: ((x, y), ...)}``), so a wire removed takes them along and one restored brings them
back. A frame names its blocks, not a box: the editor fits the box around them wherever they
are, so moving a block moves its frame's edge and nothing has to be kept in step.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from blockflow.errors import ProjectError
from blockflow.textsafe import name_problem, text_problem

__all__ = ["Frame", "PageLayout", "FRAME_COLORS", "MAX_BENDS", "MAX_FRAMES", "MAX_FRAME_TITLE",
           "MAX_FRAME_NOTE", "MAX_COORD", "bends_problem", "frame_problem", "layout_kept"]

#: the colours a frame may have, by name (the theme maps each to a tint that reads on its canvas)
FRAME_COLORS = ("grey", "red", "orange", "yellow", "green", "teal", "blue", "purple")
#: most reroute points on one wire, frames on one page, characters of a frame's title and note
MAX_BENDS = 64
MAX_FRAMES = 1000
MAX_FRAME_TITLE = 200
MAX_FRAME_NOTE = 10_000
#: farthest a reroute point may be from the origin (a block's position has no such bound, but a
#: point this far out is a corrupt file, not a layout)
MAX_COORD = 1e7


@dataclass(frozen=True)
class Frame:
    """A titled, coloured box around ``blocks`` (node ids, in the order they were framed), with
    a note. Frozen: an edit replaces it, so a Change's ``before`` can keep the old one."""

    title: str = "Frame"
    color: str = "blue"
    note: str = ""
    blocks: tuple = ()

    def without(self, node_id: str) -> "Frame":
        return replace(self, blocks=tuple(b for b in self.blocks if b != node_id))

    def renamed(self, old: str, new: str) -> "Frame":
        return replace(self, blocks=tuple(new if b == old else b for b in self.blocks))


def bends_problem(points) -> str:
    """Why ``points`` cannot be a wire's reroute points ("" when they can)."""
    if len(points) > MAX_BENDS:
        return f"{len(points)} reroute points on one wire; the limit is {MAX_BENDS}"
    for p in points:
        if len(p) != 2 or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                  and math.isfinite(v) and abs(v) <= MAX_COORD for v in p):
            return f"a reroute point is two finite numbers within ±{MAX_COORD:g}, found {p!r}"
    return ""


def frame_problem(frame, nodes) -> str:
    """Why ``frame`` cannot be a frame of a page with ``nodes`` ("" when it can)."""
    if not isinstance(frame, Frame):
        return f"expected a Frame, found {type(frame).__name__}"
    for what, text, most in (("title", frame.title, MAX_FRAME_TITLE), ("note", frame.note, MAX_FRAME_NOTE)):
        if not isinstance(text, str):
            return f"a frame's {what} must be text"
        if len(text) > most:
            return f"a frame's {what} has {len(text):,} characters; the limit is {most:,}"
        problem = (name_problem(text, "a frame's title") if what == "title"
                   else text_problem(text) and f"a frame's note {text_problem(text)}")
        if problem:
            return problem
    if frame.color not in FRAME_COLORS:
        return f"unknown frame colour {frame.color!r} (colours: {', '.join(FRAME_COLORS)})"
    if not frame.blocks:
        return "a frame needs at least one block"
    for b in frame.blocks:
        if b not in nodes:
            return f"a frame names the block {b!r}, which the page has not"
    if len(set(frame.blocks)) != len(frame.blocks):
        return "a frame names a block twice"
    return ""


def _points(points) -> tuple:
    return tuple((float(x), float(y)) for x, y in points)


class PageLayout:
    """The mutators of reroute points and frames, mixed into Page (which holds ``bends`` and
    ``frames``). Each refuses a bad edit before touching anything and returns a Change that
    computes nothing; its ``fields`` is ``("reroutes",)`` or ``("frames",)``."""

    def set_bends(self, edge, points) -> "Change":
        """Give the wire ``edge`` its reroute points, in order from source to destination (an
        empty list removes them); ``before`` holds the old ones (``()`` for none)."""
        from blockflow.project import Change
        if edge not in self.edges:
            raise ProjectError(f"page '{self.name}' has no wire {edge}")
        points = list(points)
        problem = bends_problem(points)
        if problem:
            raise ProjectError(problem)
        before = self.bends.get(edge, ())
        if points:
            self.bends[edge] = _points(points)
        else:
            self.bends.pop(edge, None)
        return Change(self.name, False, fields=("reroutes",), before=before)

    def restore_edge(self, edge, index, points) -> "Change":
        """Undo remove_edge: the wire at ``index`` with its reroute points (remove_edge's
        ``before``)."""
        change = self.insert_edge(edge, index)
        if points:
            self.bends[edge] = _points(points)
        return change

    def insert_frame(self, frame: Frame, index: int | None = None) -> "Change":
        """Add a frame (at ``index`` in the page's frames, drawn in that order; last when None)."""
        from blockflow.project import Change
        problem = frame_problem(frame, self.nodes)
        if not problem and len(self.frames) >= MAX_FRAMES:
            problem = f"page '{self.name}' has {len(self.frames)} frames; the limit is {MAX_FRAMES}"
        if problem:
            raise ProjectError(problem)
        at = len(self.frames) if index is None else min(index, len(self.frames))
        self.frames.insert(at, frame)
        return Change(self.name, False, fields=("frames",), index=at)

    def _frame_index(self, index: int) -> int:
        if not isinstance(index, int) or not 0 <= index < len(self.frames):
            raise ProjectError(f"page '{self.name}' has no frame {index!r}")
        return index

    def remove_frame(self, index: int) -> "Change":
        """Take a frame off (its blocks stay); ``before`` is the frame, for insert_frame."""
        from blockflow.project import Change
        frame = self.frames.pop(self._frame_index(index))
        return Change(self.name, False, fields=("frames",), index=index, before=frame)

    def set_frame(self, index: int, frame: Frame) -> "Change":
        """Replace frame ``index`` (a new title, colour, note or blocks); ``before`` is the old."""
        from blockflow.project import Change
        self._frame_index(index)
        problem = frame_problem(frame, self.nodes)
        if problem:
            raise ProjectError(problem)
        before, self.frames[index] = self.frames[index], frame
        return Change(self.name, False, fields=("frames",), index=index, before=before)

    def frame_of(self, node_id: str) -> int | None:
        """The index of the last frame holding ``node_id`` (the one drawn on top), or None."""
        for i in range(len(self.frames) - 1, -1, -1):
            if node_id in self.frames[i].blocks:
                return i
        return None

    # --- kept consistent by Page's own mutators (remove_node, remove_edge, rename_node)
    def _layout_without_node(self, node_id: str, edges) -> tuple:
        """Drop ``node_id`` from the frames (a frame left empty goes) and the reroute points of
        its ``edges`` ((index, Edge) pairs); returns (bends dropped, the frames before) for
        RemovedNode."""
        dropped = tuple((e, self.bends.pop(e)) for _, e in edges if e in self.bends)
        before = tuple(self.frames)
        if any(node_id in f.blocks for f in before):
            self.frames = [g for g in (f.without(node_id) for f in before) if g.blocks]
        return dropped, before

    def _layout_restored(self, bends, frames) -> None:
        for edge, points in bends:
            self.bends[edge] = points
        self.frames = list(frames)

    def _layout_renamed(self, old: str, new: str) -> None:
        self.bends = {_edge_renamed(e, old, new): p for e, p in self.bends.items()}
        if any(old in f.blocks for f in self.frames):
            self.frames = [f.renamed(old, new) for f in self.frames]


def _edge_renamed(edge, old: str, new: str):
    if old not in (edge.src, edge.dst):
        return edge
    return type(edge)(new if edge.src == old else edge.src, edge.src_port,
                      new if edge.dst == old else edge.dst, edge.dst_port)


def layout_kept(bends: dict, frames, nodes, edges) -> tuple:
    """``(bends, frames)`` less what names a wire not in ``edges`` or a block not in ``nodes``
    (a frame left empty goes): what a restructured page keeps of its layout."""
    kept = {e: p for e, p in bends.items() if e in edges}
    framed = (replace(f, blocks=tuple(b for b in f.blocks if b in nodes)) for f in frames)
    return kept, [f for f in framed if f.blocks]
