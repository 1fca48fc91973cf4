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

__all__ = ["lay_out", "lay_out_again", "scope_keys", "LOSS_FRAME"]

#: the title of the frame around the blocks the import added (its loss)
LOSS_FRAME = "loss (added by the import)"

#: the width a column of blocks takes (a block is 120 to 250 scene units wide), and the slot for
#: Variables left of a column that has some; the gap between blocks in one column (heights are the
#: canvas's: a title, a row per port, a result line per output)
BLOCK_SLOT, VAR_SLOT, VGAP = 330.0, 290.0, 24.0
#: the least room between a column's widest block and the next column
BLOCK_GAP = 80.0
#: where a block's first port row is, below its top (items.py: the rows start at 40, 18 each)
PORT_Y = 49.0
#: a block's Variables start this far below its top: under its first input's row (at 49), so the
#: wire into that input passes over them
VAR_TOP = 64.0
#: space between two bands of wrapped columns
BAND_GAP = 160.0
#: the width : height a band aims at (a laptop screen's)
ASPECT = 16 / 9
#: a frame groups at least this many blocks
FRAME_MIN = 3
#: space between two segments on a band
GAP = 100.0
#: how far in the bands after the first start
INDENT = 60.0


def lay_out(page, builder, names: list[str], added=()) -> None:
    """Place every block of the imported ``page`` and frame its scopes; ``added``: the blocks the
    import added that are not the model's (its loss), framed and noted as such."""
    attached = _attached_variables(page, builder)
    _arrange(page, _node_keys(page, builder, names, attached), attached, builder.registry, added)


def lay_out_again(page, builder, blocks, program, added=()) -> None:
    """Place the blocks of ``page`` anew, with no frame but the added loss's: after its units
    became composite instances (``blocks``: the registry and the project's composites, for the
    instances' ports; ``program``: the page compiled, for the types an instance's ports show)."""
    attached = _attached_variables(page, builder)
    page.bends, page.frames = {}, []
    _arrange(page, dict.fromkeys(page.nodes, ""), attached, blocks, added, _typed_ports(page, blocks, program))


def _typed_ports(page, blocks, program):
    """{instance id: its widest input and output label}: an instance's ports are labelled with
    their types (``input float32[1,256,56,56]``), which make it wider than its title does."""
    out = {}
    for nid, node in page.nodes.items():
        spec = blocks.get(node.block) if node.block.startswith("@") else None
        if spec is None:
            continue

        def label(port, nid=nid):
            t = program.port_type(nid, port)
            return f"{port} {t.describe()}" if t is not None else port
        out[nid] = (max((len(label(p.name)) for p in spec.inputs), default=0),
                    max((len(label(p.name)) for p in spec.outputs), default=0))
    return out


def _arrange(page, keys: dict, attached: dict, blocks, added, port_labels=None) -> None:
    """Lay out ``page`` in segments of one unit (``keys``), frame each unit and the added loss."""
    # the added loss is laid out whole too: cut by a band's end, its frame would span the page
    keys = {**keys, **{nid: LOSS_FRAME for nid in added if nid in keys}}
    graph = nx.DiGraph()
    graph.add_nodes_from(nid for nid in page.nodes if nid not in attached)
    graph.add_edges_from((e.src, e.dst) for e in page.edges if e.src in graph and e.dst in graph)
    order = {nid: i for i, nid in enumerate(page.nodes)}
    readers = defaultdict(list)
    for var, reader in attached.items():
        readers[reader].append(var)
    segments = _segments(list(nx.lexicographical_topological_sort(graph, key=order.__getitem__)), keys)
    height = _heights(page, blocks)
    width = _widths(page, port_labels or {})
    boxes = [_segment_box(graph, seg, readers, order, height, width) for seg in segments]
    bands = _place(page, boxes)
    _route_long_wires(page, bands, set(attached), width)
    groups = defaultdict(list)
    for seg in segments:
        if keys[seg[0]] and keys[seg[0]] != LOSS_FRAME:
            groups[keys[seg[0]]].extend(seg)
    for i, (key, ids) in enumerate(list(groups.items())[:MAX_FRAMES - 1]):
        members = tuple(ids) + tuple(v for n in ids for v in readers[n])
        if len(members) >= FRAME_MIN:
            page.insert_frame(Frame(key[:MAX_FRAME_TITLE], FRAME_COLORS[i % len(FRAME_COLORS)], "", members))
    if added:
        page.insert_frame(Frame(LOSS_FRAME, "grey",
                                "Not part of the ONNX model: a scalar to run Backward from and to train "
                                "with. Feed 'labels' with each example's class, or delete these blocks.",
                                tuple(added) + tuple(v for n in added for v in readers[n] if v not in added)))


def _node_keys(page, builder, names, attached) -> dict:
    """{node id: its group's key ("" for none)}: the scope of the ONNX node it was made for."""
    scopes = scope_keys(names)
    counts = defaultdict(int)
    for nid, origin in builder.origin.items():
        if origin is not None and nid not in attached:
            counts[scopes[origin]] += 1
    keys = {}
    for nid in page.nodes:
        origin = builder.origin.get(nid)
        key = scopes[origin] if origin is not None else ""
        keys[nid] = key if counts[key] >= 2 and len(counts) > 2 else ""
    _branches_join_their_unit(page, keys, attached, builder.origin)
    return keys


def _branches_join_their_unit(page, keys: dict, attached, origin: dict) -> None:
    """The blocks of an ONNX node without weights that only one unit reads, and that read what
    that unit's blocks read too, are a branch of it (Inception's pool branch, named after the
    block before the unit since it has no weights of its own to be named by): they join the unit.
    ``origin``: the ONNX node each block was made for (the blocks of one node move together)."""
    readers, sources = defaultdict(set), defaultdict(set)
    for e in page.edges:
        readers[e.src].add(e.dst)
        sources[e.dst].add(e.src)
    groups = defaultdict(list)
    for nid, node in page.nodes.items():
        if nid not in attached and node.block != "Variable":
            groups[origin.get(nid, nid) if origin.get(nid) is not None else nid].append(nid)
    for members in groups.values():
        inside = set(members)
        ins = {s for m in members for s in sources[m]} - inside
        outs = {r for m in members for r in readers[m]} - inside
        if not ins or any(page.nodes[s].block == "Variable" for s in ins):
            continue
        into = {keys[r] for r in outs}
        unit = next(iter(into)) if len(into) == 1 else ""
        if unit and unit != keys[members[0]] and \
                all(any(keys[r] == unit and r not in inside for r in readers[s]) for s in ins):
            for m in members:
                keys[m] = unit


def _segments(order: list, keys: dict) -> list:
    """``order`` cut into runs of one key (a run of "" too): the units laid out whole."""
    segments: list[list] = []
    for nid in order:
        if segments and keys[segments[-1][0]] == keys[nid] and (keys[nid] or len(segments[-1]) < 12):
            segments[-1].append(nid)
        else:
            segments.append([nid])
    return segments


def _heights(page, registry):
    """The height the canvas draws each block with (items.py: a 40-unit title, an 18-unit row
    per port, a 22-unit result line per output, 10 of padding), from the block's ports."""
    wired = defaultdict(set)
    for e in page.edges:
        wired[e.dst].add(e.dst_port)

    def height(nid) -> float:
        node = page.nodes[nid]
        spec = registry.get(node.block)
        outs = len(spec.outputs) if spec is not None else 1
        ins = max(len(spec.inputs) if spec is not None else 1, len(wired[nid] | set(node.inputs)))
        return 40 + 18 * max(1, ins, outs) + 22 * max(1, outs) + 10
    return height


def _widths(page, port_labels: dict):
    """About the width the canvas draws each block with: its op name in the title font, its id
    below it, its widest port labels side by side (items.py: the title plus 28, the subtitle up to
    220 plus 24, the labels plus 34, at least 120); ``port_labels``: {node: (characters of its
    widest input label, of its widest output label)} where they are wider than port names."""
    def width(nid) -> float:
        node = page.nodes[nid]
        ins, outs = port_labels.get(nid, (0, 0))
        return max(120.0, 9.5 * len(node.block) + 28, min(6.5 * len(nid), 220.0) + 24, 7.4 * (ins + outs) + 34)
    return width


def _segment_box(graph, seg, readers, order, height, width):
    """A segment's own layered layout: ([(node, x, y)], width, height). A block's Variables stand
    in a slot just left of it, from below the height of its first input down, so the wire coming
    in from the left passes over them and theirs run straight right into the block."""
    sub = graph.subgraph(seg)
    cells, tallest, x = [], 0.0, 0.0
    layers = [sorted(layer, key=order.__getitem__) for layer in nx.topological_generations(sub)]
    for layer in layers:
        slot = VAR_SLOT if any(readers[nid] for nid in layer) else 0.0
        y = 0.0
        for nid in layer:
            cells.append((nid, x + slot, y))
            below = y + VAR_TOP
            for var in sorted(readers[nid], key=order.__getitem__):
                cells.append((var, x, below))
                below += height(var) + VGAP / 2
            y = max(y + height(nid), below) + VGAP
        tallest = max(tallest, y)
        x += slot + max(BLOCK_SLOT, max(width(nid) for nid in layer) + BLOCK_GAP)
    return cells, x, tallest


def _place(page, boxes) -> None:
    """Segments left to right, wrapping into bands so the page is about a screen's shape."""
    total_w = sum(w + GAP for _, w, _ in boxes)
    tall = max((h for _, _, h in boxes), default=1.0)
    bands = max(1, round(math.sqrt(total_w / (ASPECT * (tall + BAND_GAP)))))
    width = total_w / bands
    # A band after the first starts a little further in (its first column's Variables too), so
    # the model's start, its input at the top left, is the leftmost block and the bands read as
    # one line wrapped.
    start = INDENT
    x, y, band_h = 0.0, 0.0, 0.0
    bands = {}
    for cells, seg_w, h in boxes:
        w = seg_w + GAP
        if x > start and x + w > width * 1.05:
            x, y, band_h = start, y + band_h + BAND_GAP, 0.0
        for nid, dx, top in cells:
            page.nodes[nid].position = (x + dx, y + top)
            bands[nid] = y
        x += w
        band_h = max(band_h, h)
    return bands


def _route_long_wires(page, bands, attached, width) -> None:
    """Reroute points for the wires a straight curve would draw across other blocks: from the end
    of a band to the start of the next, through the gap between them; and a wire skipping more than
    a column (a skip connection), over the top of its band."""
    for e in page.edges:
        if e.src in attached or e.dst in attached:
            continue
        (sx, sy), (dx, dy) = page.nodes[e.src].position, page.nodes[e.dst].position
        out_x, out_y, in_y = sx + width(e.src), sy + PORT_Y, dy + PORT_Y
        if bands[e.dst] > bands[e.src]:
            gap = bands[e.dst] - BAND_GAP / 2
            points = [(out_x + 30, out_y), (out_x + 30, gap), (dx - 30, gap), (dx - 30, in_y)]
        elif dx - out_x > BLOCK_SLOT + VAR_SLOT and bands[e.dst] == bands[e.src]:
            over = bands[e.src] - BAND_GAP / 4
            points = [(out_x + 30, over), (dx - 30, over)]
        else:
            continue
        page.bends[e] = tuple((float(px), float(py)) for px, py in points)


def _attached_variables(page, builder) -> dict:
    """{Variable id: the one block that reads it} for Variables read by a single block."""
    readers = defaultdict(set)
    for e in page.edges:
        readers[e.src].add(e.dst)
    sources = list(builder.variables.values()) + list(builder.attached)
    return {nid: next(iter(readers[nid])) for nid in sources if len(readers[nid]) == 1}


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
    """``keys`` with each key kept on its first run of nodes in the model's order only: a node
    named into a unit but met after others (Inception's pool between two stages, named after the
    stage before) stays on the page, and the unit is framed without it rather than across the
    model."""
    done, out, last = set(), [], None
    for k in keys:
        if k and k != last:
            if last:
                done.add(last)
            if k in done:
                out.append("")
                continue
        out.append(k)
        if k:
            last = k
    return out
