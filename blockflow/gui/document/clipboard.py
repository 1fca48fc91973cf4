"""The clipboard: the MIME types blockflow puts on it and in drags, in one place, and the
fragments of a page it carries (copy writes them, paste and duplicate read them).

The canvas (drop target, copy/paste) and the palette (drag source) both read the MIME types
here, so neither imports the other.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field, replace

from blockflow.io import rules
from blockflow.io.project_io import dumps_project, loads_project
from blockflow.errors import ProjectError
from blockflow.composite import SHARE_ATTR
from blockflow.project import Edge, Page, Project, fresh_id

# A fragment of a page: JSON of a one-page project (fragment_text writes it).
FRAGMENT_MIME = "application/x-blockflow-fragment"
# One block from the palette: the block's registered name in UTF-8.
BLOCK_MIME = "application/x-blockflow-block"


def fragment_text(pg: Page, node_ids) -> str:
    """The nodes ``node_ids`` of ``pg``, their saved feeds and the wires between them, as the
    JSON of a one-page project (what copy puts on the clipboard)."""
    ids = [n for n in pg.nodes if n in set(node_ids)]
    frag = Project(metadata={"fragment": True})
    fp = frag.add_page("fragment")
    for nid in ids:
        fp.nodes[nid] = copy.deepcopy(pg.nodes[nid])
        if nid in pg.feeds:
            fp.feeds[nid] = pg.feeds[nid]
    fp.edges = [e for e in pg.edges if e.src in fp.nodes and e.dst in fp.nodes]
    fp.bends = {e: pg.bends[e] for e in fp.edges if e in pg.bends}     # their reroute points
    return dumps_project(frag)


@dataclass
class Pasting:
    """What pasting a fragment onto a page adds: ``nodes`` (copies with their new ids and
    places), the saved ``feeds`` by new id, and the wires between them."""

    nodes: list
    feeds: dict
    edges: list
    bends: dict = field(default_factory=dict)     # the wires' reroute points, moved with them


def pasting(pg: Page, text: str, position=None) -> Pasting:
    """The fragment ``text`` as it lands on ``pg``: ids taken on the page are numbered anew
    (``Block_n``), and its top-left corner goes to ``position`` (40, 40 further when None).
    Refuses a fragment that would take the page past the blocks a page may hold, which the file
    format would not save (``rules.MAX_NODES_PER_PAGE``)."""
    frag = loads_project(text, "<clipboard>").pages[0]
    if not frag.nodes:
        return Pasting([], {}, [])
    total = len(pg.nodes) + len(frag.nodes)
    if total > rules.MAX_NODES_PER_PAGE:
        raise ProjectError(f"the fragment's {len(frag.nodes):,} blocks would make {total:,} on page '{pg.name}' "
                           f"(it has {len(pg.nodes):,}); the limit is {rules.MAX_NODES_PER_PAGE:,} blocks on a page")
    xs = [n.position[0] for n in frag.nodes.values()]
    ys = [n.position[1] for n in frag.nodes.values()]
    dx, dy = (40.0, 40.0) if position is None else (position[0] - min(xs), position[1] - min(ys))
    for nid, node in frag.nodes.items():     # blocks 1e308 apart: one would land at infinity
        x, y = node.position[0] + dx, node.position[1] + dy
        if not (math.isfinite(x) and math.isfinite(y)):
            raise ProjectError(f"the fragment's block '{nid}' would land at ({x:g}, {y:g}): its "
                               "blocks lie too far apart to paste")
    taken = set(pg.nodes)
    mapping = {}
    for nid, node in frag.nodes.items():
        new = nid if nid not in taken else fresh_id(node.block, taken)   # as Page.new_id names it
        taken.add(new)
        mapping[nid] = new
    nodes = [replace(copy.deepcopy(node), id=mapping[nid],
                     position=(node.position[0] + dx, node.position[1] + dy))
             for nid, node in frag.nodes.items()]
    for node in nodes:      # an instance tied to one copied with it ties to the copy, as wires follow
        share = node.attrs.get(SHARE_ATTR)
        if isinstance(share, str) and share in mapping:
            node.attrs[SHARE_ATTR] = mapping[share]
    feeds = {mapping[nid]: value for nid, value in frag.feeds.items() if nid in mapping}
    edges = [Edge(mapping[e.src], e.src_port, mapping[e.dst], e.dst_port) for e in frag.edges]
    bends = {Edge(mapping[e.src], e.src_port, mapping[e.dst], e.dst_port): tuple((x + dx, y + dy) for x, y in p)
             for e, p in frag.bends.items()}
    return Pasting(nodes, feeds, edges, bends)
