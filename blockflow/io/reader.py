"""Reading project files: bytes or text to a checked :class:`~blockflow.project.Project`, every
problem one :class:`~blockflow.errors.ProjectFileError` naming the place in the file.
"""
from __future__ import annotations

import json
import math
import os
import stat
import sys

from blockflow.errors import ProjectFileError
from blockflow.io import rules
from blockflow.io.arrays import decode_array_at
from blockflow.io.checks import (BadConstant, check_loss, check_mapping, check_metrics, check_name,
                                 check_node_id, check_object, check_page_name, check_port, check_text,
                                 describe, DupDict, Invalid, key_path, object_pairs, parse_endpoint)
from blockflow.io.composite_codec import decode_composites
from blockflow.io.layout_codec import decode_layout
from blockflow.io.loadcost import LoadBudget, check_model_cost, check_parse_cost, structure_counts
from blockflow.io.plain_items import plain_edge, plain_node
from blockflow.io.rules import EDGE_KEYS, NODE_KEYS, ORIGIN, PAGE_KEYS, TOP_KEYS
from blockflow.io.values import CONTAINERS, decode_value, plain_scalar
from blockflow.project import Edge, Node, Page, Project

# --------------------------------------------------------------------------------------------
# Reading


def _decode_text(data) -> str:
    if isinstance(data, (bytes, bytearray, memoryview)):
        data = bytes(data)
        if len(data) > rules.MAX_FILE_BYTES:
            raise Invalid("", f"the file is {len(data):,} bytes; the limit is "
                               f"{rules.MAX_FILE_BYTES:,}")
        if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
            raise Invalid("", "the file is UTF-16 text; project files are UTF-8")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            start = exc.start
            line = data.count(b"\n", 0, start) + 1
            col = start - (data.rfind(b"\n", 0, start) + 1) + 1
            raise Invalid(f"line {line}, column {col} (byte {start})",
                           f"the file is not UTF-8 text ({exc.reason}: byte "
                           f"0x{data[start]:02x})") from None
    elif isinstance(data, str):
        text = data
        if len(text) > rules.MAX_FILE_BYTES:
            raise Invalid("", f"the text is {len(text):,} characters; the limit is "
                               f"{rules.MAX_FILE_BYTES:,}")
    else:
        raise TypeError(f"loads_project needs str or bytes, not {type(data).__name__}")
    if text.startswith("\ufeff"):
        text = text[1:]
    return text


def _parse(text: str):
    if not text or text.isspace():
        raise Invalid("", "the file is empty")
    try:
        return json.loads(text, object_pairs_hook=object_pairs, parse_constant=BadConstant)
    except json.JSONDecodeError as exc:
        raise Invalid(f"line {exc.lineno}, column {exc.colno}",
                       f"not valid JSON: {exc.msg}") from None
    except RecursionError:
        raise Invalid("", "not valid JSON for blockflow: nested too deeply") from None
    except ValueError as exc:  # e.g. an integer with too many digits
        raise Invalid("", f"not valid JSON: {exc}") from None


def _upgrade(doc) -> dict:
    """The document after checking its format and version, migrated to :data:`rules.VERSION`."""
    if not isinstance(doc, dict):
        raise Invalid("", f"the top level must be a JSON object, found {describe(doc)}")
    if isinstance(doc, DupDict):
        raise Invalid(key_path("", doc.dup), f"the key '{doc.dup}' appears twice")
    if "format" not in doc:
        raise Invalid("format", f"missing: this is not a blockflow project file (it has no "
                                 f"\"format\": \"{rules.FORMAT}\")")
    if doc["format"] != rules.FORMAT:
        raise Invalid("format", f"expected \"{rules.FORMAT}\", found {describe(doc['format'])}: "
                                 "this is not a blockflow project file")
    if "version" not in doc:
        raise Invalid("version", "missing: the format version, an integer")
    version = doc["version"]
    if type(version) is not int:
        raise Invalid("version", f"the format version must be an integer, found "
                                  f"{describe(version)}")
    if version > rules.VERSION:
        raise Invalid("version", f"written by a newer blockflow (format version {version}); "
                                  f"this one reads versions up to {rules.VERSION}")
    if version < 1:
        raise Invalid("version", f"unknown format version {version} (versions start at 1)")
    while version < rules.VERSION:
        migrate = rules.MIGRATIONS.get(version)
        if migrate is None:
            raise Invalid("version", f"cannot read format version {version}: no migration to "
                                      f"version {version + 1}")
        try:
            doc = migrate(doc)
        except Invalid:
            raise
        except Exception as exc:
            raise Invalid("", f"upgrading from format version {version} to {version + 1} "
                               f"failed: {type(exc).__name__}: {exc}") from None
        version += 1
        if not isinstance(doc, dict):
            raise Invalid("", f"the migration to format version {version} did not return "
                               "an object")
        doc["version"] = version
    return doc


def _decode_document(doc, budget: LoadBudget, library: bool = False) -> Project:
    """The Project in ``doc``; with ``library``, a library file: composites, no pages needed."""
    doc = _upgrade(doc)
    check_object(doc, "", "the top level", TOP_KEYS, ("pages",))
    metadata = doc.get("metadata", {})
    if not isinstance(metadata, dict):
        raise Invalid("metadata", f"metadata must be an object, found {describe(metadata)}")
    metadata = decode_value(metadata, "metadata", arrays=False)
    pages = doc["pages"]
    if not isinstance(pages, list):
        raise Invalid("pages", f"pages must be a list, found {describe(pages)}")
    if not pages and not library:
        hint = (" (this is a library file of composites: import it with File > Import Composites)"
                if doc.get("composites") else "")
        raise Invalid("pages", f"a project needs at least one page{hint}")
    raw_composites = doc.get("composites", [])
    diagrams = [c.get("diagram") for c in raw_composites if isinstance(c, dict)] \
        if isinstance(raw_composites, list) else []
    check_model_cost(pages + diagrams, budget)
    composites = decode_composites(raw_composites, "composites", decode_diagram)
    seen: dict = {}
    out = []
    for i, page in enumerate(pages):
        out.append(_decode_page(page, f"pages[{i}]", seen))
        seen[out[-1].name] = i
        pages[i] = None   # its parsed form is no longer needed: free it as the model grows
    return Project(out, metadata, composites)


def _decode_page(obj, where: str, seen: dict) -> Page:
    check_object(obj, where, "a page", PAGE_KEYS, ("name",))
    name = check_page_name(obj["name"], key_path(where, "name"), seen)
    page = decode_diagram(obj, where, name)

    feeds_w = key_path(where, "feeds")
    feeds = check_mapping(obj.get("feeds", {}), feeds_w, "feeds")
    for key, value in feeds.items():
        kw = key_path(feeds_w, key)
        if key not in page.nodes:
            raise Invalid(kw, f"a feed for '{key}', but page '{name}' has no such node")
        feeds[key] = decode_array_at(value, kw)
    page.feeds = feeds

    loss = obj.get("loss")
    if loss is not None:
        page.loss = check_loss(loss, key_path(where, "loss"), page.nodes, name)
    page.metrics = check_metrics(obj.get("metrics", []), key_path(where, "metrics"), page.nodes, name)
    return page


def decode_diagram(obj, where: str, name: str) -> Page:
    """The text, nodes and edges of a page or a composite's diagram (checked: the caller checks
    the object's keys) as a Page called ``name``."""
    text = check_text(obj.get("text", ""), key_path(where, "text"), "the page text")
    nodes_w = key_path(where, "nodes")
    raw_nodes = obj.get("nodes", [])
    if not isinstance(raw_nodes, list):
        raise Invalid(nodes_w, f"nodes must be a list, found {describe(raw_nodes)}")
    if len(raw_nodes) > rules.MAX_NODES_PER_PAGE:
        raise Invalid(nodes_w, f"{len(raw_nodes):,} nodes on one page; the limit is "
                                f"{rules.MAX_NODES_PER_PAGE:,}")
    nodes: dict = {}
    good_names: set = set()
    for j, raw in enumerate(raw_nodes):
        node = plain_node(raw, good_names) or _decode_node(raw, f"{nodes_w}[{j}]")
        if node.id in nodes:   # nodes holds nodes[0..j-1] in order: its order is the index
            raise Invalid(f"{nodes_w}[{j}].id", f"duplicate node id '{node.id}' (also "
                                                 f"nodes[{list(nodes).index(node.id)}])")
        nodes[node.id] = node
        raw_nodes[j] = None

    edges_w = key_path(where, "edges")
    raw_edges = obj.get("edges", [])
    if not isinstance(raw_edges, list):
        raise Invalid(edges_w, f"edges must be a list, found {describe(raw_edges)}")
    edges = []
    seen_edges: set = set()
    good_ports: set = set()
    for k, raw in enumerate(raw_edges):
        edge = plain_edge(raw, nodes, good_ports) or _decode_edge(raw, f"{edges_w}[{k}]", nodes, name)
        if edge in seen_edges:   # edges holds edges[0..k-1] in order
            ew = f"{edges_w}[{k}]"
            raise Invalid(ew, f"the same edge {raw['from']} -> {raw['to']} as "
                               f"edges[{edges.index(edge)}]")
        seen_edges.add(edge)
        edges.append(edge)
        raw_edges[k] = None
    page = Page(name, nodes, edges, text=text)
    decode_layout(obj, where, page)
    return page


def _decode_edge(obj, where: str, nodes, page: str) -> Edge:
    check_object(obj, where, "an edge", EDGE_KEYS, EDGE_KEYS)
    src, src_port = parse_endpoint(obj["from"], key_path(where, "from"), nodes, page)
    dst, dst_port = parse_endpoint(obj["to"], key_path(where, "to"), nodes, page)
    return Edge(src, src_port, dst, dst_port)


def _decode_node(obj, where: str) -> Node:
    check_object(obj, where, "a node", NODE_KEYS, ("id", "block"))
    node_id = check_node_id(obj["id"], key_path(where, "id"))
    bw = key_path(where, "block")
    block = check_name(obj["block"], bw, "a block name")
    if not block:
        raise Invalid(bw, "the block name must not be empty")
    label = check_text(obj.get("label", ""), key_path(where, "label"), "a label")
    collapsed = obj.get("collapsed", False)
    if collapsed is not True and collapsed is not False:
        raise Invalid(key_path(where, "collapsed"), f"collapsed must be true or false, found "
                                                     f"{describe(collapsed)}")
    pw = key_path(where, "position")
    position = obj.get("position", ORIGIN)
    if position is ORIGIN:   # omitted: every such node shares the one immutable tuple
        xy = ORIGIN
    elif not isinstance(position, list) or len(position) != 2:
        raise Invalid(pw, f"a position must be a list of 2 numbers [x, y], found "
                           f"{describe(position)}")
    else:
        xy = []
        for i, p in enumerate(position):
            if isinstance(p, bool) or not isinstance(p, (int, float)):
                raise Invalid(f"{pw}[{i}]", f"a coordinate must be a number, found "
                                             f"{describe(p)}")
            try:
                p = float(p)
            except OverflowError:
                p = math.inf
            if not math.isfinite(p):
                raise Invalid(f"{pw}[{i}]", "a coordinate must be a finite number")
            xy.append(p)
        xy = tuple(xy)

    # attrs, inputs and state keep the parsed objects, checked and decoded in place
    aw = key_path(where, "attrs")
    attrs = check_mapping(obj.get("attrs", {}), aw, "attrs")
    for k, v in attrs.items():
        check_name(k, key_path(aw, k), "an attr name")
        if type(v) in CONTAINERS or not plain_scalar(v, aw, k):
            y = decode_value(v, key_path(aw, k), arrays=True)
            if y is not v:
                attrs[k] = y
    iw = key_path(where, "inputs")
    inputs = check_mapping(obj.get("inputs", {}), iw, "inputs")
    for port, v in inputs.items():
        check_port(port, key_path(iw, port))
        inputs[port] = decode_array_at(v, key_path(iw, port))
    sw = key_path(where, "state")
    state = check_mapping(obj.get("state", {}), sw, "state")
    for k, v in state.items():
        if not k:
            raise Invalid(sw, "a state name must not be empty")
        check_name(k, key_path(sw, k), "a state name")
        state[k] = decode_array_at(v, key_path(sw, k))
    return Node(node_id, block, attrs, inputs, xy, label, state, collapsed)


def loads_project(text_or_bytes, path="<string>", *, library: bool = False) -> Project:
    """The Project in ``text_or_bytes`` (str, or bytes of UTF-8); ``path`` names it in errors.
    With ``library``, a library file (composites; its pages may be none).

    Raises ProjectFileError(path, where, problem) for anything wrong with it.
    """
    try:
        return _load_text([_decode_text(text_or_bytes)], len(text_or_bytes), library=library)
    except Invalid as exc:
        raise ProjectFileError(path, exc.where, exc.problem) from None


def _load_text(box: list, size: int, structure: list | None = None, library: bool = False) -> Project:
    """The Project in the text ``box`` holds (taken out of it, so that the text is freed once
    parsed if nobody else holds it); ``size`` is the file's size the memory budget is for,
    ``structure`` the file's :func:`structure_counts` if the caller has it."""
    text = box.pop()
    if structure is None:
        structure = structure_counts(text)
    budget = LoadBudget(size)
    check_parse_cost(text, structure, budget)
    doc = _parse(text)
    budget.release(sys.getsizeof(text))   # freed below, if the caller gave the only reference
    del text
    return _decode_document(doc, budget, library)


def _read_at_most(f, size: int) -> bytes:
    """The file's bytes, up to rules.MAX_FILE_BYTES + 1: ``size`` (from fstat) at once, then, if there
    is more (a file growing, a pipe with no size), in pieces: never a buffer of the limit's size
    for a small file (which would count against an address-space limit)."""
    data = f.read(size + 1)
    if len(data) <= size:
        return data
    parts, total = [data], len(data)
    while total <= rules.MAX_FILE_BYTES:
        part = f.read(min(1 << 20, rules.MAX_FILE_BYTES + 1 - total))
        if not part:
            break
        parts.append(part)
        total += len(part)
    return b"".join(parts)


def _device_problem(mode: int) -> str:
    """A device gives no size and may never end (/dev/zero, a disk): it was read up to the file
    limit, 2 GiB, and twice that in memory, before anything was said. A pipe is still read (the
    shell's <(...)): its writer ends it."""
    kind = "a character device" if stat.S_ISCHR(mode) else "a block device"
    return f"cannot read the file: it is {kind}, not a file"


def load_project(path, *, library: bool = False) -> Project:
    """Read a project file (with ``library``, a library file: composites, perhaps no pages).
    Raises ProjectFileError if it cannot be read or is not valid."""
    name = os.fspath(path)
    try:
        with open(name, "rb") as f:
            st = os.fstat(f.fileno())
            if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
                raise ProjectFileError(name, "", _device_problem(st.st_mode))
            size = st.st_size
            if size > rules.MAX_FILE_BYTES:
                raise ProjectFileError(name, "", f"the file is {size:,} bytes; the limit is "
                                                 f"{rules.MAX_FILE_BYTES:,}")
            box = [_read_at_most(f, size)]
    except OSError as exc:
        raise ProjectFileError(name, "", f"cannot read the file: {exc.strerror or exc}") from None
    size = len(box[0])
    if size > rules.MAX_FILE_BYTES:   # it grew while being read, or is not a regular file
        raise ProjectFileError(name, "", f"the file is more than {rules.MAX_FILE_BYTES:,} bytes; the "
                                         f"limit is {rules.MAX_FILE_BYTES:,}")
    try:
        structure = structure_counts(box[0])   # from the bytes: faster than from the text
        box[0] = _decode_text(box[0])    # the bytes are freed here, the text once parsed
        project = _load_text(box, size, structure, library)
    except Invalid as exc:
        raise ProjectFileError(name, exc.where, exc.problem) from None
    project.base_dir = os.path.dirname(os.path.abspath(name))
    return project
