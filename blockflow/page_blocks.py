"""Many blocks of a page taken off or put back as one edit (a mixin of Page; no Qt, no files).

Deleting a selection, pasting a fragment, and undoing or redoing either, touch many blocks at
once. Done one block at a time (Page.remove_node, insert_node, insert_edge), each block's step
looks through the whole page: all its wires for the block's own, the order of its blocks for the
block's place, all its wires for a duplicate of each wire put back. k blocks on a page of E wires
then cost k x E: undoing the delete of 500 blocks on a page of 20,000 wires took 2.7 s, and
10,000 blocks on a page of 100,000 wires would take hours. Here one pass over the page's blocks,
wires and feeds takes them all off or puts them all back, at the places they held.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from blockflow.errors import ProjectError
from blockflow.page_layout import bends_problem, frame_problem
from blockflow.textsafe import valid_node_id

__all__ = ["Blocks", "PageBlocks"]


@dataclass(frozen=True)
class Blocks:
    """Blocks of a page with what refers to them, each at the place it holds (or is to hold) in
    the page's order: what ``remove_blocks`` takes off and ``insert_blocks`` puts back."""

    nodes: tuple                  # (index among the page's blocks, Node), by increasing index
    edges: tuple = ()             # (index among the page's wires, Edge), by increasing index
    feeds: tuple = ()             # (index among the page's feeds, node id, value), by increasing index
    bends: tuple = ()             # (Edge, points): the reroute points of those wires
    loss: str | None = None       # the page's loss, when it names one of the blocks
    metrics: tuple | None = None  # the page's metrics with the blocks (None: they name none of them)
    frames: tuple | None = None   # the page's frames with the blocks (None: they frame none of them)

    @property
    def ids(self) -> tuple:
        return tuple(node.id for _, node in self.nodes)

    @classmethod
    def appended(cls, page, nodes, edges, feeds: dict, bends: dict) -> "Blocks":
        """``nodes`` with their wires, feeds (in the order of ``nodes``, as a paste sets them) and
        reroute points, placed after everything ``page`` holds: a paste."""
        fed = [(node.id, feeds[node.id]) for node in nodes if node.id in feeds]
        start = len(page.feeds)
        return cls(tuple(enumerate(nodes, len(page.nodes))), tuple(enumerate(edges, len(page.edges))),
                   tuple((start + i, nid, value) for i, (nid, value) in enumerate(fed)), tuple(bends.items()))


def _merged(old, placed) -> list:
    """``old`` (an iterable of n items) with ``placed`` ((index, item) pairs by increasing index)
    put in, each at its index of the result."""
    out, rest = [], iter(old)
    for index, item in placed:
        while len(out) < index:
            out.append(next(rest))
        out.append(item)
    out.extend(rest)
    return out


def _places_problem(placed, count: int, what: str) -> str:
    """Why ``placed`` cannot go among ``count`` items ("" when it can): increasing indexes, none
    past the end of the result."""
    last = -1
    for index, _ in placed:
        if not isinstance(index, int) or index <= last:
            return f"the {what} to put back are not in increasing order of place"
        last = index
    if last >= count + len(placed):
        return f"a {what[:-1]} would go to place {last:,} of {count + len(placed):,}"
    return ""


class PageBlocks:
    """``remove_blocks`` and ``insert_blocks``, mixed into Page (which holds ``nodes``, ``edges``,
    ``feeds``, ``bends``, ``loss``, ``metrics`` and ``frames``). Each refuses a bad edit before
    touching anything and returns a Change."""

    def remove_blocks(self, node_ids) -> "Change":
        """Take blocks off with their wires, saved feeds and reroute points, the loss mark when it
        names one of them, the metrics they give and their places in frames: what remove_node
        does to each, in one pass. ``before`` is the Blocks insert_blocks puts back."""
        from blockflow.project import Change, split_port_text
        node_ids = list(node_ids)
        for nid in node_ids:
            self._node(nid)
        ids = set(node_ids)
        named = [m for m in self.metrics if split_port_text(m)[0] in ids]
        framed = any(b in ids for f in self.frames for b in f.blocks)
        edges = tuple((i, e) for i, e in enumerate(self.edges) if e.src in ids or e.dst in ids)
        removed = Blocks(
            tuple((i, node) for i, (nid, node) in enumerate(self.nodes.items()) if nid in ids), edges,
            tuple((i, nid, v) for i, (nid, v) in enumerate(self.feeds.items()) if nid in ids),
            tuple((e, self.bends[e]) for _, e in edges if e in self.bends),
            self.loss if self.loss is not None and split_port_text(self.loss)[0] in ids else None,
            tuple(self.metrics) if named else None, tuple(self.frames) if framed else None)
        self.nodes = {nid: node for nid, node in self.nodes.items() if nid not in ids}
        if edges:
            self.edges = [e for e in self.edges if e.src not in ids and e.dst not in ids]
        if removed.feeds:
            self.feeds = {nid: v for nid, v in self.feeds.items() if nid not in ids}
        for edge, _ in removed.bends:
            del self.bends[edge]
        if removed.loss is not None:
            self.loss = None
        if named:
            self.metrics = [m for m in self.metrics if split_port_text(m)[0] not in ids]
        if framed:     # a frame left with no block goes, as remove_node drops it
            kept = (replace(f, blocks=tuple(b for b in f.blocks if b not in ids)) for f in self.frames)
            self.frames = [f for f in kept if f.blocks]
        return Change(self.name, True, nodes_removed=removed.ids, edges_removed=tuple(e for _, e in edges),
                      before=removed)

    def insert_blocks(self, blocks: Blocks) -> "Change":
        """Put ``blocks`` on the page, each block, wire and feed at its place, with their reroute
        points, the loss mark, metrics and frames they had (remove_blocks' ``before``, or a paste:
        Blocks.appended)."""
        from blockflow.project import Change
        problem = self.blocks_problem(blocks)
        if problem:
            raise ProjectError(problem)
        nodes = dict(_merged(self.nodes.items(), [(i, (node.id, node)) for i, node in blocks.nodes]))
        frames = self.frames if blocks.frames is None else list(blocks.frames)
        if blocks.frames is not None:
            problem = next(filter(None, (frame_problem(f, nodes) for f in frames)), "")
            if problem:
                raise ProjectError(problem)
        self.nodes = nodes
        self.edges = _merged(self.edges, blocks.edges)
        if blocks.feeds:
            self.feeds = dict(_merged(self.feeds.items(), [(i, (nid, v)) for i, nid, v in blocks.feeds]))
        for edge, points in blocks.bends:
            self.bends[edge] = tuple((float(x), float(y)) for x, y in points)
        if blocks.loss is not None:
            self.loss = blocks.loss
        if blocks.metrics is not None:
            self.metrics = list(blocks.metrics)
        self.frames = frames
        return Change(self.name, True, nodes_added=blocks.ids, edges_added=tuple(e for _, e in blocks.edges))

    def blocks_problem(self, blocks: Blocks) -> str:
        """Why ``blocks`` cannot be put on the page ("" when they can), found before anything is
        touched: a taken or invalid id, a wire to a block neither holds, a wire already there, a
        feed of no block put back, reroute points out of range, places out of order."""
        ids = blocks.ids
        for nid in ids:
            if nid in self.nodes:
                return f"page '{self.name}' already has a node '{nid}'"
            if not valid_node_id(nid):
                return f"'{nid}' is not a valid node id (letters, digits, _ . -)"
        if len(set(ids)) != len(ids):
            return "a block to put back is listed twice"
        new, have = set(ids), set(self.edges)
        wires = [e for _, e in blocks.edges]
        for edge in wires:
            for nid in (edge.src, edge.dst):
                if nid not in self.nodes and nid not in new:
                    return f"page '{self.name}' has no node '{nid}'"
            if not all(isinstance(p, str) and p for p in (edge.src_port, edge.dst_port)):
                return f"a wire needs port names, got {edge}"
            if edge in have:
                return f"page '{self.name}' already has the wire {edge}"
            have.add(edge)
        if any(nid not in new for _, nid, _ in blocks.feeds):
            return "a feed to put back is of no block put back"
        if blocks.loss is not None and blocks.loss.partition(":")[0] not in new:
            return f"the loss {blocks.loss!r} to put back names no block put back"
        for edge, points in blocks.bends:
            if edge not in have:
                return f"page '{self.name}' has no wire {edge}"
            if bends_problem(list(points)):
                return bends_problem(list(points))
        for placed, count, what in ((blocks.nodes, len(self.nodes), "blocks"), (blocks.edges, len(self.edges), "wires"),
                                    ([(i, None) for i, _, _ in blocks.feeds], len(self.feeds), "feeds")):
            problem = _places_problem(placed, count, what)
            if problem:
                return problem
        return ""
