"""Where an imported model's blocks go, and which of them a frame groups.

Layered left to right by the wires (networkx topological generations): a block sits one column
right of the latest block it reads. A Variable sits in its reader's column, just above it, so a
layer's parameters stay by their layer. A model fifty layers deep would be one long strip, so the
columns wrap into bands stacked top to bottom, each about as wide as a screen is tall times the
screen's shape, so the whole page fits a window at a readable zoom.

The blocks made for the nodes of one ONNX name scope (``inception_3a/...``) or of one repeated
unit (``res2_0_branch2a``, ``res2_0_branch2b``, ... in ResNet's names) get a frame titled with it.
"""
from __future__ import annotations

import math
import re
from collections import defaultdict

import networkx as nx

from blockflow.page_layout import FRAME_COLORS, MAX_FRAME_TITLE, MAX_FRAMES, Frame

__all__ = ["lay_out", "scope_keys"]

#: distance between columns and between rows (a block is about 150 x 60 scene units)
COLUMN, ROW = 230.0, 95.0
#: space between two bands of wrapped columns
BAND_GAP = 160.0
#: the width : height a band aims at (a laptop screen's)
ASPECT = 16 / 9
#: a frame groups at least this many blocks
FRAME_MIN = 3


def lay_out(page, builder, names: list[str]) -> None:
    """Place every block of the imported ``page`` and frame its scopes."""
    attached = _attached_variables(page, builder)
    main = [nid for nid in page.nodes if nid not in attached]
    graph = nx.DiGraph()
    graph.add_nodes_from(main)
    graph.add_edges_from((e.src, e.dst) for e in page.edges if e.src in graph and e.dst in graph)
    order = {nid: i for i, nid in enumerate(page.nodes)}
    layers = [sorted(layer, key=order.__getitem__) for layer in nx.topological_generations(graph)]
    readers = defaultdict(list)
    for var, reader in attached.items():
        readers[reader].append(var)
    heights = [sum(1 + len(readers[n]) for n in layer) for layer in layers]
    for band, (first, last) in enumerate(_bands(heights)):
        top = sum(max(heights[a:b]) * ROW + BAND_GAP for a, b in _bands(heights)[:band])
        for col in range(first, last):
            row = 0
            for nid in layers[col]:
                x = (col - first) * COLUMN
                for var in sorted(readers[nid], key=order.__getitem__):
                    page.nodes[var].position = (x - 0.35 * COLUMN, top + row * ROW)
                    row += 1
                page.nodes[nid].position = (x, top + row * ROW)
                row += 1
    _frame_scopes(page, builder, names)


def _attached_variables(page, builder) -> dict:
    """{Variable id: the one block that reads it} for Variables read by a single block."""
    readers = defaultdict(set)
    for e in page.edges:
        readers[e.src].add(e.dst)
    return {nid: next(iter(readers[nid])) for nid in builder.variables.values() if len(readers[nid]) == 1}


def _bands(heights: list) -> list:
    """The columns of each band, ``[(first, stop), ...]``: bands about ASPECT times as wide as
    the whole drawing is tall, so the page is about a screen's shape."""
    n = len(heights)
    if n == 0:
        return []
    tallest = max(heights) * ROW
    # k bands of n / k columns: width n / k * COLUMN, height about k * tallest; pick the k whose
    # shape is nearest ASPECT
    best = min(range(1, n + 1), key=lambda k: abs(math.log((n / k * COLUMN) / (k * (tallest + BAND_GAP)) / ASPECT)))
    per = math.ceil(n / best)
    return [(i, min(i + per, n)) for i in range(0, n, per)]


#: a unit with layers after its index (``res2_0`` of ``res2_0_branch2a``)
_UNIT = re.compile(r"^(.*?[A-Za-z]+\d*[_.]\d+)[_.].+$")
#: a numbered layer with an index (``conv1`` of ``conv1_2``), or without (``fc6``)
_NUMBERED = re.compile(r"^(.*?[A-Za-z]+\d+)(?:[_.]\d+)?$")


def scope_keys(names: list[str]) -> list[str]:
    """The group of each node name ("" for none): its outermost name scope (``inception_3a`` of
    ``inception_3a/1x1``, once a prefix every scoped name shares is dropped), else its repeated
    unit (``res2_0`` of ``res2_0_branch2a_bn``: a word with a number, ``_`` and an index)."""
    parts = [n.split("/") for n in names]
    scoped = [p for p in parts if len(p) > 1]
    shared = 0
    while scoped and all(len(p) > shared + 1 and p[shared] == scoped[0][shared] for p in scoped):
        shared += 1
    keys = []
    for p in parts:
        rest = p[shared:] if len(p) > 1 else p
        if len(rest) > 1:
            keys.append(rest[0])
            continue
        m = _UNIT.match(rest[0]) or _NUMBERED.match(rest[0])
        keys.append(m.group(1) if m else "")
    return _contiguous(keys)


def _contiguous(keys: list[str]) -> list[str]:
    """``keys`` less those whose nodes are not together in the model's order (a key seen, left
    for another, then seen again: grouping by it would draw a frame across the model)."""
    seen, broken, last = set(), set(), None
    for k in keys:
        if k and k != last:
            if k in seen:
                broken.add(k)
            seen.add(k)
        if k:
            last = k
    return ["" if k in broken else k for k in keys]


def _frame_scopes(page, builder, names: list[str]) -> None:
    keys = scope_keys(names)
    groups: dict[str, list] = defaultdict(list)
    for nid, origin in builder.origin.items():
        if origin is not None and keys[origin]:
            groups[keys[origin]].append(nid)
    # a Variable read by one block goes with that block's group
    for var, reader in _attached_variables(page, builder).items():
        origin = builder.origin.get(reader)
        if origin is not None and keys[origin] and var not in groups[keys[origin]]:
            groups[keys[origin]].append(var)
    chosen = [(k, ids) for k, ids in groups.items() if len(ids) >= FRAME_MIN]
    if len(chosen) < 2:
        return
    for i, (key, ids) in enumerate(chosen[:MAX_FRAMES]):
        page.insert_frame(Frame(key[:MAX_FRAME_TITLE], FRAME_COLORS[i % len(FRAME_COLORS)], "", tuple(ids)))
