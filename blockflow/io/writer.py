"""Writing project files: a :class:`~blockflow.project.Project` checked by the reader's rules
(whatever is written loads back) and laid out deterministically, one member or element a line
where a value is long, for diffs.
"""
from __future__ import annotations

import json
import math

import numpy as np

from blockflow.errors import ProjectFileError
from blockflow.io import rules
from blockflow.io.arrays import encode_array_at
from blockflow.io.composite_codec import encode_composites
from blockflow.io.layout_codec import encode_layout
from blockflow.io.checks import (ArrayJSON, check_endpoint, check_loss, check_metrics, check_name,
                                 check_node_id, check_page_name, check_port, check_text, describe, Invalid,
                                 key_path, natural_key)
from blockflow.io.rules import INLINE_WIDTH
from blockflow.io.plain_items import plain_attrs, plain_name, plain_xy
from blockflow.io.values import encode_value
from blockflow.project import Edge, Node, Page, Project
from blockflow.textsafe import valid_node_id

def _encode_document(project, library: bool = False) -> dict:
    if not isinstance(project, Project):
        raise TypeError(f"dumps_project needs a Project, not {type(project).__name__}")
    if not isinstance(project.metadata, dict):
        raise Invalid("metadata", f"metadata must be a dict, found {describe(project.metadata)}")
    metadata = encode_value(project.metadata, "metadata", arrays=False)
    if not project.pages and not library:
        raise Invalid("pages", "the project has no pages; a project file needs at least one")
    composites = encode_composites(project.composites, "composites", _encode_diagram)
    seen: dict = {}
    pages = []
    for i, page in enumerate(project.pages):
        pages.append(_encode_page(page, f"pages[{i}]", seen))
        seen[page.name] = i
    return {"format": rules.FORMAT, "version": rules.VERSION, "metadata": metadata,
            "composites": composites, "pages": pages}


def _encode_array_map(mapping, where: str, what: str, check_key) -> dict:
    if not isinstance(mapping, dict):
        raise Invalid(where, f"{what} must be a dict, found {describe(mapping)}")
    out = {}
    for k in sorted(mapping, key=lambda k: natural_key(k) if isinstance(k, str) else ([], "")):
        if not isinstance(k, str):
            raise Invalid(where, f"{what} keys must be strings, found {describe(k)}")
        check_key(k, key_path(where, k))
        out[k] = encode_array_at(mapping[k], key_path(where, k))
    return out


def _encode_page(page, where: str, seen: dict) -> dict:
    if not isinstance(page, Page):
        raise Invalid(where, f"expected a Page, found {describe(page)}")
    name = check_page_name(page.name, key_path(where, "name"), seen)
    diagram = _encode_diagram(page, where)

    def feed_key(k, kw):
        if k not in page.nodes:
            raise Invalid(kw, f"a feed for '{k}', but page '{name}' has no such node")

    feeds = _encode_array_map(page.feeds, key_path(where, "feeds"), "feeds", feed_key)
    loss = page.loss or None
    if loss is not None:
        check_loss(loss, key_path(where, "loss"), page.nodes, name)
    metrics = check_metrics(list(page.metrics), key_path(where, "metrics"), page.nodes, name)
    out = {"name": name, "text": diagram["text"], "loss": loss, "nodes": diagram["nodes"],
           "edges": diagram["edges"], "feeds": feeds}
    out.update((k, diagram[k]) for k in ("reroutes", "frames") if k in diagram)
    if metrics:
        out["metrics"] = metrics
    return out


def _encode_diagram(page, where: str) -> dict:
    """The text, nodes and edges of a page or a composite's diagram."""
    if not isinstance(page, Page):
        raise Invalid(where, f"expected a Page, found {describe(page)}")
    name = page.name
    text = check_text(page.text, key_path(where, "text"), "the page text")
    nodes_w = key_path(where, "nodes")
    if not isinstance(page.nodes, dict):
        raise Invalid(nodes_w, f"nodes must be a dict, found {describe(page.nodes)}")
    if len(page.nodes) > rules.MAX_NODES_PER_PAGE:
        raise Invalid(nodes_w, f"{len(page.nodes):,} nodes on one page; the limit is "
                                f"{rules.MAX_NODES_PER_PAGE:,}")
    names: set = set()
    nodes = [_plain_node(key, node, names) or _encode_node(key, node, f"{nodes_w}[{j}]")
             for j, (key, node) in enumerate(page.nodes.items())]

    edges_w = key_path(where, "edges")
    edges, seen_edges, ports, ids = [], set(), set(), page.nodes
    for k, e in enumerate(page.edges):
        # a wire between two nodes just written (their ids checked) by ports checked before
        if not (type(e) is Edge and e.src in ids and e.dst in ids and e.src_port in ports and e.dst_port in ports):
            ew = f"{edges_w}[{k}]"
            if not isinstance(e, Edge):
                raise Invalid(ew, f"expected an Edge, found {describe(e)}")
            check_endpoint(e.src, e.src_port, key_path(ew, "from"), page.nodes, name)
            check_endpoint(e.dst, e.dst_port, key_path(ew, "to"), page.nodes, name)
            ports.update((e.src_port, e.dst_port))
        pair = (f"{e.src}:{e.src_port}", f"{e.dst}:{e.dst_port}")
        if pair in seen_edges:
            raise Invalid(f"{edges_w}[{k}]", f"the edge {pair[0]} -> {pair[1]} appears twice")
        seen_edges.add(pair)
        edges.append(pair)
    edges.sort(key=lambda p: (natural_key(p[0]), natural_key(p[1])))
    return {"text": text, "nodes": nodes, "edges": [{"from": a, "to": b} for a, b in edges],
            **encode_layout(page, where)}


def _plain_node(key, node, names: set):
    """What _encode_node gives for a plain node (ASCII names, a position of two finite floats,
    attrs that are scalars or flat lists of them, no inline constants or state), made without
    the JSON paths _encode_node builds in case of an error; None for any other node, which
    _encode_node then writes or refuses. ``names``: block and attr names found plain already."""
    if type(node) is not Node or type(key) is not str or type(node.id) is not str or node.id != key:
        return None
    block, label, position, attrs, inputs, state = (node.block, node.label, node.position, node.attrs,
                                                    node.inputs, node.state)
    # the types first: a set lookup or a truth test of another object may raise (a list, an array)
    if type(block) is not str or type(label) is not str or type(attrs) is not dict:
        return None
    if type(inputs) is not dict or type(state) is not dict:
        return None
    if not valid_node_id(key) or inputs or state or not label.isascii() or "\x00" in label:
        return None
    # an empty name is a good attr name, in `names` once one was seen, but never a block name
    if not block:
        return None
    if block not in names:
        if not plain_name(block):
            return None
        names.add(block)
    xy = plain_xy(position)
    if xy is None or not plain_attrs(attrs, names):
        return None
    collapsed = node.collapsed
    if collapsed is not True and collapsed is not False:
        return None
    out = {"id": key, "block": block, "label": label, "position": list(xy),
           "attrs": {k: list(attrs[k]) if type(attrs[k]) is list else attrs[k]
                     for k in sorted(attrs, key=natural_key)},
           "inputs": {}, "state": {}}
    if collapsed:
        out["collapsed"] = True
    return out


def _encode_node(key, node, where: str) -> dict:
    if not isinstance(node, Node):
        raise Invalid(where, f"expected a Node, found {describe(node)}")
    node_id = check_node_id(node.id, key_path(where, "id"))
    if node_id != key:
        raise Invalid(key_path(where, "id"), f"the node stored under '{key}' has the id "
                                          f"'{node_id}'")
    bw = key_path(where, "block")
    block = check_name(node.block, bw, "a block name")
    if not block:
        raise Invalid(bw, "the block name must not be empty")
    label = check_text(node.label, key_path(where, "label"), "a label")
    pw = key_path(where, "position")
    try:
        ok = len(node.position) == 2 and all(
            isinstance(p, (int, float, np.integer, np.floating)) and not isinstance(p, bool)
            for p in node.position)
        pos = [float(p) for p in node.position] if ok else []
        ok = ok and all(math.isfinite(p) for p in pos)
    except (TypeError, ValueError, OverflowError):
        ok = False
    if not ok:
        raise Invalid(pw, f"a position must be 2 finite numbers, found {node.position!r}")
    aw = key_path(where, "attrs")
    if not isinstance(node.attrs, dict):
        raise Invalid(aw, f"attrs must be a dict, found {describe(node.attrs)}")
    for k in node.attrs:
        if not isinstance(k, str):
            raise Invalid(aw, f"attr names must be strings, found {describe(k)}")
        check_name(k, key_path(aw, k), "an attr name")
    attrs = {k: encode_value(node.attrs[k], key_path(aw, k), arrays=True)
             for k in sorted(node.attrs, key=natural_key)}

    def state_key(k, kw):
        check_text(k, kw, "a state name")
        if not k:
            raise Invalid(kw, "a state name must not be empty")
        check_name(k, kw, "a state name")

    inputs = _encode_array_map(node.inputs, key_path(where, "inputs"), "inputs", check_port)
    state = _encode_array_map(node.state, key_path(where, "state"), "state", state_key)
    out = {"id": node_id, "block": block, "label": label, "position": pos, "attrs": attrs,
           "inputs": inputs, "state": state}
    if not isinstance(node.collapsed, (bool, np.bool_)):
        raise Invalid(key_path(where, "collapsed"), f"collapsed must be a bool, found "
                                                     f"{node.collapsed!r}")
    if node.collapsed:   # written only when set: files without it stay as they were
        out["collapsed"] = True
    return out


# json.dumps with these options makes an encoder at each call: a third of writing a big page
_compact = json.JSONEncoder(ensure_ascii=False, separators=(", ", ": "), allow_nan=False).encode


def _fmt_array(a: dict, ind: str) -> str:
    if "data" in a:  # base64 objects (large arrays) are always written over several lines
        c = _compact(a)
        if len(c) <= INLINE_WIDTH:
            return c
    inner = ind + "  "
    parts = [f'{inner}"dtype": {_compact(a["dtype"])}', f'{inner}"shape": {_compact(a["shape"])}']
    if "data" in a:
        data, shape = a["data"], a["shape"]
        per = shape[-1] if len(shape) >= 2 and 1 <= shape[-1] <= 16 else 8
        rows = [_compact(data[i:i + per])[1:-1] for i in range(0, len(data), per)]
        body = ",\n".join(f"{inner}  {r}" for r in rows)
        parts.append(f'{inner}"data": [\n{body}\n{inner}]' if rows else f'{inner}"data": []')
    else:
        parts.append(f'{inner}"base64": "{a["base64"]}"')  # the base64 alphabet needs no escapes
    return "{\n" + ",\n".join(parts) + "\n" + ind + "}"


def _fmt_value(v, ind: str) -> str:
    """A JSON value: on one line if short, else one member/element per line."""
    if isinstance(v, ArrayJSON):
        return _fmt_array(v, ind)
    c = _compact(v)
    if len(c) <= INLINE_WIDTH or not v or not isinstance(v, (list, dict)):
        return c
    inner = ind + "  "
    if isinstance(v, list):
        return "[\n" + ",\n".join(inner + _fmt_value(x, inner) for x in v) + "\n" + ind + "]"
    return _fmt_members(v, ind)


def _fmt_members(d: dict, ind: str) -> str:
    """An object with one member per line (``{}`` when empty)."""
    if not d:
        return "{}"
    inner = ind + "  "
    return ("{\n" + ",\n".join(f"{inner}{_compact(k)}: {_fmt_value(v, inner)}"
                               for k, v in d.items()) + "\n" + ind + "}")


def _fmt_list(items: list, ind: str, fmt) -> str:
    if not items:
        return "[]"
    inner = ind + "  "
    return "[\n" + ",\n".join(inner + fmt(x, inner) for x in items) + "\n" + ind + "]"


def _fmt_object(members, ind: str) -> str:
    """An object of the file's fixed layout: one member a line, ``members`` being (key, text)
    pairs whose text is already formatted for the depth inside it."""
    i = ind + "  "
    return "{\n" + ",\n".join(f'{i}"{key}": {text}' for key, text in members) + "\n" + ind + "}"


def _fmt_node(n: dict, ind: str) -> str:
    i = ind + "  "
    return _fmt_object([("id", _compact(n["id"])), ("block", _compact(n["block"])),
                        ("label", _compact(n["label"])), ("position", _compact(n["position"])),
                        ("attrs", _fmt_members(n["attrs"], i)), ("inputs", _fmt_members(n["inputs"], i)),
                        ("state", _fmt_members(n["state"], i))]
                       + ([("collapsed", "true")] if n.get("collapsed") else []), ind)


def _diagram_members(d: dict, i: str) -> list:
    return ([("nodes", _fmt_list(d["nodes"], i, _fmt_node)),
             ("edges", _fmt_list(d["edges"], i, lambda e, _: _compact(e)))]
            + [(k, _fmt_list(d[k], i, lambda e, _: _compact(e))) for k in ("reroutes", "frames") if k in d])


def _fmt_page(p: dict, ind: str) -> str:
    i = ind + "  "
    return _fmt_object([("name", _compact(p["name"])), ("text", _compact(p["text"])),
                        ("loss", _compact(p["loss"]))]
                       + ([("metrics", _compact(p["metrics"]))] if p.get("metrics") else [])
                       + _diagram_members(p, i) + [("feeds", _fmt_members(p["feeds"], i))], ind)


def _fmt_diagram(d: dict, ind: str) -> str:
    return _fmt_object([("text", _compact(d["text"]))] + _diagram_members(d, ind + "  "), ind)


def _fmt_composite(c: dict, ind: str) -> str:
    i = ind + "  "
    return _fmt_object([("name", _compact(c["name"])), ("doc", _compact(c["doc"]))]
                       + ([("origin", _compact(c["origin"]))] if "origin" in c else [])
                       + [("params", _fmt_list(c["params"], i, lambda p, ii: _fmt_value(p, ii))),
                          ("diagram", _fmt_diagram(c["diagram"], i))], ind)


def _format_document(doc: dict) -> str:
    return _fmt_object([("format", _compact(doc["format"])), ("version", str(doc["version"])),
                        ("metadata", _fmt_members(doc["metadata"], "  "))]
                       + ([("composites", _fmt_list(doc["composites"], "  ", _fmt_composite))]
                          if doc["composites"] else [])
                       + [("pages", _fmt_list(doc["pages"], "  ", _fmt_page))], "") + "\n"


def dumps_library(project: Project, *, path="<library>") -> str:
    """The composites (and metadata) of ``project`` as the text of a library file: a project file
    whose ``pages`` may be empty (its pages, if any, are written too)."""
    try:
        return _format_document(_encode_document(project, library=True))
    except Invalid as exc:
        raise ProjectFileError(path, exc.where, exc.problem) from None


def dumps_project(project: Project, *, path="<project>") -> str:
    """The project as the text of a project file (ends with a newline).

    Raises ProjectFileError(path, where, problem) if the project cannot be written in a form
    that loads back (a dangling edge, an invalid id, an attr of an unsupported type, ...).
    """
    try:
        return _format_document(_encode_document(project))
    except Invalid as exc:
        raise ProjectFileError(path, exc.where, exc.problem) from None
