"""Reroute points and frames in project files: a page's or a composite diagram's optional
``"reroutes"`` and ``"frames"`` lists (added without a version bump, as ``metrics`` was: an
older blockflow refuses a file holding them with "unknown key", so it cannot misread one).

``reroutes``: ``[{"from": "A:output", "to": "B:input", "points": [[x, y], ...]}]``, one entry
per wire that has points, naming a wire of the diagram. ``frames``: ``[{"title", "color",
"note", "blocks": [node ids]}]``, drawn in that order. The model's own checks
(page_layout.bends_problem, frame_problem) decide what is kept, so the reader and the editor
refuse the same things; the writer checks too, so whatever is written loads back.
"""
from __future__ import annotations

from blockflow import page_layout
from blockflow.io.checks import Invalid, check_object, describe, key_path, natural_key, parse_endpoint
from blockflow.io.rules import FRAME_KEYS, REROUTE_KEYS
from blockflow.page_layout import Frame, bends_problem, frame_problem
from blockflow.project import Edge

__all__ = ["decode_layout", "encode_layout"]


def _list(raw, where: str, what: str, most: int) -> list:
    if not isinstance(raw, list):
        raise Invalid(where, f"{what} must be a list, found {describe(raw)}")
    if len(raw) > most:
        raise Invalid(where, f"{len(raw):,} {what}; the limit is {most:,}")
    return raw


def decode_layout(obj: dict, where: str, page) -> None:
    """Read ``obj``'s reroutes and frames into ``page`` (whose nodes and edges are read)."""
    if "reroutes" in obj:
        rw = key_path(where, "reroutes")
        raw = _list(obj["reroutes"], rw, "reroutes", max(len(page.edges), 1))
        edges = set(page.edges)
        for k, entry in enumerate(raw):
            page.bends.update([_decode_reroute(entry, f"{rw}[{k}]", page, edges)])
            raw[k] = None
    if "frames" in obj:
        fw = key_path(where, "frames")
        raw = _list(obj["frames"], fw, "frames", page_layout.MAX_FRAMES)
        for k, entry in enumerate(raw):
            page.frames.append(_decode_frame(entry, f"{fw}[{k}]", page))
            raw[k] = None


def _decode_reroute(entry, where: str, page, edges: set) -> tuple:
    check_object(entry, where, "a reroute", REROUTE_KEYS, REROUTE_KEYS)
    src = parse_endpoint(entry["from"], key_path(where, "from"), page.nodes, page.name)
    dst = parse_endpoint(entry["to"], key_path(where, "to"), page.nodes, page.name)
    edge = Edge(*src, *dst)
    if edge not in edges:
        raise Invalid(where, f"reroute points for the wire {edge}, which page '{page.name}' has not")
    if edge in page.bends:
        raise Invalid(where, f"a second entry for the wire {edge}")
    pw = key_path(where, "points")
    points = _list(entry["points"], pw, "reroute points", page_layout.MAX_BENDS)
    for j, p in enumerate(points):
        if not isinstance(p, list) or len(p) != 2:
            raise Invalid(f"{pw}[{j}]", f"a point is a list [x, y], found {describe(p)}")
    problem = bends_problem(points) or ("" if points else "an entry with no points (leave the wire out)")
    if problem:
        raise Invalid(pw, problem)
    return edge, tuple((float(x), float(y)) for x, y in points)


def _decode_frame(entry, where: str, page) -> Frame:
    check_object(entry, where, "a frame", FRAME_KEYS, ("blocks",))
    blocks = _list(entry["blocks"], key_path(where, "blocks"), "blocks", max(len(page.nodes), 1))
    values = {k: entry[k] for k in ("title", "color", "note") if k in entry}
    for key, value in values.items():
        if not isinstance(value, str):
            raise Invalid(key_path(where, key), f"a frame's {key} must be a string, found {describe(value)}")
    if not blocks:
        raise Invalid(key_path(where, "blocks"), "a frame needs at least one block")
    for j, b in enumerate(blocks):
        if not isinstance(b, str):
            raise Invalid(f"{key_path(where, 'blocks')}[{j}]", f"a block id is a string, found {describe(b)}")
    frame = Frame(**values, blocks=tuple(blocks))
    problem = frame_problem(frame, page.nodes)
    if problem:
        raise Invalid(where, problem)
    return frame


def encode_layout(page, where: str) -> dict:
    """The ``reroutes`` and ``frames`` members of ``page`` (none when it has none), checked as
    the reader checks them."""
    out: dict = {}
    edges = set(page.edges)
    reroutes = []
    for k, (edge, points) in enumerate(page.bends.items()):
        ew = f"{key_path(where, 'reroutes')}[{k}]"
        if edge not in edges:
            raise Invalid(ew, f"reroute points for the wire {edge}, which page '{page.name}' has not")
        problem = bends_problem(list(points)) or ("" if points else "an entry with no points")
        if problem:
            raise Invalid(ew, problem)
        reroutes.append({"from": f"{edge.src}:{edge.src_port}", "to": f"{edge.dst}:{edge.dst_port}",
                         "points": [[float(x), float(y)] for x, y in points]})
    if reroutes:
        reroutes.sort(key=lambda r: (natural_key(r["from"]), natural_key(r["to"])))
        out["reroutes"] = reroutes
    if len(page.frames) > page_layout.MAX_FRAMES:
        raise Invalid(key_path(where, "frames"), f"{len(page.frames):,} frames; the limit is "
                                                 f"{page_layout.MAX_FRAMES:,}")
    frames = []
    for k, frame in enumerate(page.frames):
        problem = frame_problem(frame, page.nodes)
        if problem:
            raise Invalid(f"{key_path(where, 'frames')}[{k}]", problem)
        frames.append({"title": frame.title, "color": frame.color, "note": frame.note,
                       "blocks": list(frame.blocks)})
    if frames:
        out["frames"] = frames
    return out

