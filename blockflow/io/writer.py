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
from blockflow.io.arrays import _encode_array
from blockflow.io.checks import (_ArrayJSON, _check_endpoint, _check_loss, _check_metrics, _check_name,
                                 _check_node_id, _check_page_name, _check_port, _check_text, _describe, _Invalid,
                                 _key, _natural)
from blockflow.io.rules import _INLINE_WIDTH
from blockflow.io.values import _encode_value
from blockflow.project import Edge, Node, Page, Project

def _encode_document(project) -> dict:
    if not isinstance(project, Project):
        raise TypeError(f"dumps_project needs a Project, not {type(project).__name__}")
    if not isinstance(project.metadata, dict):
        raise _Invalid("metadata", f"metadata must be a dict, found {_describe(project.metadata)}")
    metadata = _encode_value(project.metadata, "metadata", arrays=False)
    if not project.pages:
        raise _Invalid("pages", "the project has no pages; a project file needs at least one")
    seen: dict = {}
    pages = []
    for i, page in enumerate(project.pages):
        pages.append(_encode_page(page, f"pages[{i}]", seen))
        seen[page.name] = i
    return {"format": rules.FORMAT, "version": rules.VERSION, "metadata": metadata, "pages": pages}


def _encode_array_map(mapping, where: str, what: str, check_key) -> dict:
    if not isinstance(mapping, dict):
        raise _Invalid(where, f"{what} must be a dict, found {_describe(mapping)}")
    out = {}
    for k in sorted(mapping, key=lambda k: _natural(k) if isinstance(k, str) else ([], "")):
        if not isinstance(k, str):
            raise _Invalid(where, f"{what} keys must be strings, found {_describe(k)}")
        check_key(k, _key(where, k))
        out[k] = _encode_array(mapping[k], _key(where, k))
    return out


def _encode_page(page, where: str, seen: dict) -> dict:
    if not isinstance(page, Page):
        raise _Invalid(where, f"expected a Page, found {_describe(page)}")
    name = _check_page_name(page.name, _key(where, "name"), seen)
    text = _check_text(page.text, _key(where, "text"), "the page text")
    nodes_w = _key(where, "nodes")
    if not isinstance(page.nodes, dict):
        raise _Invalid(nodes_w, f"nodes must be a dict, found {_describe(page.nodes)}")
    if len(page.nodes) > rules.MAX_NODES_PER_PAGE:
        raise _Invalid(nodes_w, f"{len(page.nodes):,} nodes on one page; the limit is "
                                f"{rules.MAX_NODES_PER_PAGE:,}")
    nodes = [_encode_node(key, node, f"{nodes_w}[{j}]")
             for j, (key, node) in enumerate(page.nodes.items())]

    edges_w = _key(where, "edges")
    edges, seen_edges = [], set()
    for k, e in enumerate(page.edges):
        ew = f"{edges_w}[{k}]"
        if not isinstance(e, Edge):
            raise _Invalid(ew, f"expected an Edge, found {_describe(e)}")
        _check_endpoint(e.src, e.src_port, _key(ew, "from"), page.nodes, name)
        _check_endpoint(e.dst, e.dst_port, _key(ew, "to"), page.nodes, name)
        pair = (f"{e.src}:{e.src_port}", f"{e.dst}:{e.dst_port}")
        if pair in seen_edges:
            raise _Invalid(ew, f"the edge {pair[0]} -> {pair[1]} appears twice")
        seen_edges.add(pair)
        edges.append(pair)
    edges.sort(key=lambda p: (_natural(p[0]), _natural(p[1])))

    def feed_key(k, kw):
        if k not in page.nodes:
            raise _Invalid(kw, f"a feed for '{k}', but page '{name}' has no such node")

    feeds = _encode_array_map(page.feeds, _key(where, "feeds"), "feeds", feed_key)
    loss = page.loss or None
    if loss is not None:
        _check_loss(loss, _key(where, "loss"), page.nodes, name)
    metrics = _check_metrics(list(page.metrics), _key(where, "metrics"), page.nodes, name)
    out = {"name": name, "text": text, "loss": loss, "nodes": nodes,
           "edges": [{"from": a, "to": b} for a, b in edges], "feeds": feeds}
    if metrics:
        out["metrics"] = metrics
    return out


def _encode_node(key, node, where: str) -> dict:
    if not isinstance(node, Node):
        raise _Invalid(where, f"expected a Node, found {_describe(node)}")
    node_id = _check_node_id(node.id, _key(where, "id"))
    if node_id != key:
        raise _Invalid(_key(where, "id"), f"the node stored under '{key}' has the id "
                                          f"'{node_id}'")
    bw = _key(where, "block")
    block = _check_name(node.block, bw, "a block name")
    if not block:
        raise _Invalid(bw, "the block name must not be empty")
    label = _check_text(node.label, _key(where, "label"), "a label")
    pw = _key(where, "position")
    try:
        ok = len(node.position) == 2 and all(
            isinstance(p, (int, float, np.integer, np.floating)) and not isinstance(p, bool)
            for p in node.position)
        pos = [float(p) for p in node.position] if ok else []
        ok = ok and all(math.isfinite(p) for p in pos)
    except (TypeError, ValueError, OverflowError):
        ok = False
    if not ok:
        raise _Invalid(pw, f"a position must be 2 finite numbers, found {node.position!r}")
    aw = _key(where, "attrs")
    if not isinstance(node.attrs, dict):
        raise _Invalid(aw, f"attrs must be a dict, found {_describe(node.attrs)}")
    for k in node.attrs:
        if not isinstance(k, str):
            raise _Invalid(aw, f"attr names must be strings, found {_describe(k)}")
        _check_name(k, _key(aw, k), "an attr name")
    attrs = {k: _encode_value(node.attrs[k], _key(aw, k), arrays=True)
             for k in sorted(node.attrs, key=_natural)}

    def state_key(k, kw):
        _check_text(k, kw, "a state name")
        if not k:
            raise _Invalid(kw, "a state name must not be empty")
        _check_name(k, kw, "a state name")

    inputs = _encode_array_map(node.inputs, _key(where, "inputs"), "inputs", _check_port)
    state = _encode_array_map(node.state, _key(where, "state"), "state", state_key)
    return {"id": node_id, "block": block, "label": label, "position": pos, "attrs": attrs,
            "inputs": inputs, "state": state}


def _compact(v) -> str:
    return json.dumps(v, ensure_ascii=False, separators=(", ", ": "), allow_nan=False)


def _fmt_array(a: dict, ind: str) -> str:
    if "data" in a:  # base64 objects (large arrays) are always written over several lines
        c = _compact(a)
        if len(c) <= _INLINE_WIDTH:
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
    if isinstance(v, _ArrayJSON):
        return _fmt_array(v, ind)
    c = _compact(v)
    if len(c) <= _INLINE_WIDTH or not v or not isinstance(v, (list, dict)):
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


def _fmt_node(n: dict, ind: str) -> str:
    i = ind + "  "
    return ("{\n"
            f'{i}"id": {_compact(n["id"])},\n'
            f'{i}"block": {_compact(n["block"])},\n'
            f'{i}"label": {_compact(n["label"])},\n'
            f'{i}"position": {_compact(n["position"])},\n'
            f'{i}"attrs": {_fmt_members(n["attrs"], i)},\n'
            f'{i}"inputs": {_fmt_members(n["inputs"], i)},\n'
            f'{i}"state": {_fmt_members(n["state"], i)}\n'
            f"{ind}}}")


def _fmt_page(p: dict, ind: str) -> str:
    i = ind + "  "
    return ("{\n"
            f'{i}"name": {_compact(p["name"])},\n'
            f'{i}"text": {_compact(p["text"])},\n'
            f'{i}"loss": {_compact(p["loss"])},\n'
            + (f'{i}"metrics": {_compact(p["metrics"])},\n' if p.get("metrics") else "")
            + f'{i}"nodes": {_fmt_list(p["nodes"], i, _fmt_node)},\n'
            f'{i}"edges": {_fmt_list(p["edges"], i, lambda e, _: _compact(e))},\n'
            f'{i}"feeds": {_fmt_members(p["feeds"], i)}\n'
            f"{ind}}}")


def _format_document(doc: dict) -> str:
    return ("{\n"
            f'  "format": {_compact(doc["format"])},\n'
            f'  "version": {doc["version"]},\n'
            f'  "metadata": {_fmt_members(doc["metadata"], "  ")},\n'
            f'  "pages": {_fmt_list(doc["pages"], "  ", _fmt_page)}\n'
            "}\n")


def dumps_project(project: Project, *, path="<project>") -> str:
    """The project as the text of a project file (ends with a newline).

    Raises ProjectFileError(path, where, problem) if the project cannot be written in a form
    that loads back (a dangling edge, an invalid id, an attr of an unsupported type, ...).
    """
    try:
        return _format_document(_encode_document(project))
    except _Invalid as exc:
        raise ProjectFileError(path, exc.where, exc.problem) from None
