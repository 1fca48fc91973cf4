"""Where to put blocks: the moves of an automatic layout (Document.auto_layout and
Document.spread_stacked push them as one undo step), and which blocks hide each other."""
from __future__ import annotations

import math

import networkx as nx

from blockflow.errors import ProjectError
from blockflow.project import Page

__all__ = ["STACK_CELL", "stacked_blocks", "layered_moves", "spread_moves"]

#: blocks whose positions fall in one square of this size (scene units) are stacked: a block is
#: about 150 x 60, so they hide each other (a file without positions puts every block at [0, 0])
STACK_CELL = 8.0


def stacked_blocks(page: Page) -> list[str]:
    """The blocks of ``page`` that sit on another block's spot (within STACK_CELL), in page
    order."""
    def cell(node):
        return math.floor(node.position[0] / STACK_CELL), math.floor(node.position[1] / STACK_CELL)

    count: dict[tuple, int] = {}
    for node in page.nodes.values():
        key = cell(node)
        count[key] = count.get(key, 0) + 1
    return [nid for nid, node in page.nodes.items() if count[cell(node)] > 1]


def _graph(pg: Page, ids) -> nx.DiGraph:
    """The wires between the blocks ``ids`` of ``pg``, as a graph."""
    chosen = set(ids)
    graph = nx.DiGraph()
    graph.add_nodes_from(ids)
    graph.add_edges_from((e.src, e.dst) for e in pg.edges if e.src in chosen and e.dst in chosen)
    return graph


def layered_moves(pg: Page, ids, spacing) -> dict:
    """``{node id: (old, new position)}`` laying ``ids`` out in layers from the graph (networkx
    topological generations), from their top-left corner."""
    try:
        layers = list(nx.topological_generations(_graph(pg, ids)))
    except nx.NetworkXUnfeasible:
        raise ProjectError("the page has a cycle; remove it before laying out") from None
    order = {n: i for i, n in enumerate(pg.nodes)}
    x0 = min((pg.nodes[n].position[0] for n in ids), default=0.0)
    y0 = min((pg.nodes[n].position[1] for n in ids), default=0.0)
    moves = {}
    for col, layer in enumerate(layers):
        for row, nid in enumerate(sorted(layer, key=order.__getitem__)):
            moves[nid] = (pg.nodes[nid].position, (x0 + col * spacing[0], y0 + row * spacing[1]))
    return moves


def spread_moves(pg: Page, spacing) -> dict:
    """``{node id: (old, new position)}`` laying the stacked blocks of ``pg`` out in layers (by
    their wires; a layer taller than about the square root of their number wraps into more
    columns), below the page's other blocks. Empty when no block is stacked."""
    ids = stacked_blocks(pg)
    if not ids:
        return {}
    chosen = set(ids)
    dag = nx.condensation(_graph(pg, ids))            # a cycle's blocks share a layer
    order = {nid: i for i, nid in enumerate(ids)}
    layers = [sorted((n for c in layer for n in dag.nodes[c]["members"]), key=order.__getitem__)
              for layer in nx.topological_generations(dag)]
    rows = max(8, math.ceil(math.sqrt(len(ids))))
    others = [n.position for nid, n in pg.nodes.items() if nid not in chosen]
    if others:
        x0 = min(min(p[0] for p in others), min(pg.nodes[n].position[0] for n in ids))
        y0 = max(p[1] for p in others) + 2 * spacing[1]
    else:
        x0 = min(pg.nodes[n].position[0] for n in ids)
        y0 = min(pg.nodes[n].position[1] for n in ids)
    moves, col = {}, 0
    for layer in layers:
        for k, nid in enumerate(layer):
            moves[nid] = (pg.nodes[nid].position,
                          (x0 + (col + k // rows) * spacing[0], y0 + (k % rows) * spacing[1]))
        col += math.ceil(len(layer) / rows)
    return moves
