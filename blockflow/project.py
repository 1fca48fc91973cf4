"""The Project model: pages of nodes and edges, as plain data (no Qt, no blocks, no files).

It must not import PySide6, the block library, the compiler or the runtime.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from blockflow.errors import ProjectError
from blockflow.textsafe import describe_character, first_control

__all__ = ["Edge", "Node", "Page", "Project", "split_port", "arrays_equal", "valid_node_id",
           "name_problem", "page_name_problem", "text_problem"]

_ID_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")


def valid_node_id(node_id: str) -> bool:
    """A node id: a letter or ``_`` first, then letters, digits, ``_ . -`` (TF's op-name rule)."""
    return isinstance(node_id, str) and _ID_RE.fullmatch(node_id) is not None


def text_problem(text: str) -> str:
    """Why ``text`` (a label, a page's note, any string of a project) cannot be kept ("" when it
    can): free text, but never NUL, which C, file names and terminals take for its end."""
    at = text.find("\0")
    return f"contains U+0000 (NUL) at offset {at}, which no text in a project may hold" if at >= 0 else ""


def name_problem(name: str, what: str = "a name") -> str:
    """Why ``name`` (a page, block, attr or state name) cannot be one ("" when it can): a name
    holds no control character (blockflow.textsafe.CONTROL_CHARACTERS: C0, DEL, C1, line
    separators, bidirectional overrides), which could rewrite the screen it is printed on."""
    found = first_control(name)
    if found is None:
        return ""
    at, c = found
    return f"{what} must not contain control characters: {describe_character(c)} at offset {at}"


def page_name_problem(name: str) -> str:
    """Why ``name`` cannot name a page ("" when it can): empty, a '/' (the scope separator), a
    control character."""
    if not name:
        return "a page name must not be empty"
    if "/" in name:
        return "a page name must not contain '/' (it is the scope separator)"
    return name_problem(name, "a page name")


def arrays_equal(a, b) -> bool:
    """Exact equality of two arrays, dtype and shape included; NaNs equal NaNs."""
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")


def _dicts_of_arrays_equal(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(arrays_equal(a[k], b[k]) for k in a)


def _values_equal(x, y) -> bool:
    """Equality of attr values as a file keeps them: arrays exactly, a tuple equal to a list."""
    if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
        return isinstance(x, np.ndarray) and isinstance(y, np.ndarray) and arrays_equal(x, y)
    if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)):
        return len(x) == len(y) and all(_values_equal(a, b) for a, b in zip(x, y))
    if isinstance(x, dict) and isinstance(y, dict):
        return _attrs_equal(x, y)
    if type(x) is not type(y):
        return False
    if isinstance(x, float) and x != x and y != y:
        return True
    return x == y


def _attrs_equal(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(_values_equal(a[k], b[k]) for k in a)


def split_port(port: str) -> tuple[str, int | None]:
    """``"inputs[2]"`` -> ``("inputs", 2)``; ``"x"`` -> ``("x", None)``."""
    if port.endswith("]") and "[" in port:
        base, _, idx = port[:-1].partition("[")
        if idx.isdigit():
            return base, int(idx)
    return port, None


@dataclass(eq=False)
class Node:
    """One block on a page.

    ``inputs`` holds inline constants of unwired inputs (port -> array); ``state`` holds values a
    block owns between runs (a Variable's value, optimizer slots). ``attrs`` are kept as given:
    the compiler validates them, so a file with a bad attr still opens.
    """

    id: str
    block: str
    attrs: dict = field(default_factory=dict)
    inputs: dict = field(default_factory=dict)
    position: tuple = (0.0, 0.0)
    label: str = ""
    state: dict = field(default_factory=dict)

    def __eq__(self, other):
        if not isinstance(other, Node):
            return NotImplemented
        return (self.id == other.id and self.block == other.block and self.label == other.label
                and tuple(self.position) == tuple(other.position)
                and _attrs_equal(self.attrs, other.attrs)
                and _dicts_of_arrays_equal(self.inputs, other.inputs)
                and _dicts_of_arrays_equal(self.state, other.state))


@dataclass(frozen=True, order=True)
class Edge:
    """A wire from an output port to an input port on the same page."""

    src: str
    src_port: str
    dst: str
    dst_port: str

    def __str__(self):
        return f"{self.src}.{self.src_port} -> {self.dst}.{self.dst_port}"


@dataclass(eq=False)
class Page:
    """One diagram: its own graph and its own scope, named after the page.

    ``loss`` names the node (``"Sum_1"`` or ``"Sum_1:output"``) whose output is the page's default
    gradient target; ``feeds`` holds saved values for Placeholders (node id -> array); ``text``
    is a note shown on the page; ``metrics`` lists other scalar outputs to plot while training.
    """

    name: str
    nodes: dict = field(default_factory=dict)
    edges: list = field(default_factory=list)
    loss: str | None = None
    feeds: dict = field(default_factory=dict)
    text: str = ""
    #: scalar outputs to plot while training ("node" or "node:port"), e.g. an accuracy
    metrics: list = field(default_factory=list)

    @property
    def scope(self) -> str:
        return self.name

    def full_name(self, node_id: str) -> str:
        """The node's scoped name, as TensorFlow would print it: ``page/MatMul_1``."""
        return f"{self.scope}/{node_id}"

    def new_id(self, block: str) -> str:
        """The next free id for a block: ``MatMul_1``, ``MatMul_2``, ..."""
        n = 1
        while f"{block}_{n}" in self.nodes:
            n += 1
        return f"{block}_{n}"

    def add_node(self, block: str, *, id: str | None = None, attrs=None, inputs=None,
                 position=(0.0, 0.0), label: str = "", state=None) -> Node:
        node_id = id or self.new_id(block)
        if node_id in self.nodes:
            raise ProjectError(f"page '{self.name}' already has a node '{node_id}'")
        if not valid_node_id(node_id):
            raise ProjectError(f"'{node_id}' is not a valid node id (letters, digits, _ . -)")
        node = Node(node_id, block, dict(attrs or {}), {k: np.asarray(v) for k, v in (inputs or {}).items()},
                    tuple(float(p) for p in position), label, dict(state or {}))
        self.nodes[node_id] = node
        return node

    def connect(self, src: str, src_port: str, dst: str, dst_port: str) -> Edge:
        for nid in (src, dst):
            if nid not in self.nodes:
                raise ProjectError(f"page '{self.name}' has no node '{nid}'")
        edge = Edge(src, src_port, dst, dst_port)
        self.edges.append(edge)
        return edge

    def remove_node(self, node_id: str) -> None:
        del self.nodes[node_id]
        self.edges = [e for e in self.edges if node_id not in (e.src, e.dst)]
        self.feeds.pop(node_id, None)

    def apply_state(self, updates: dict) -> None:
        """Store a run's state updates (``RunResult.state_updates``) in the Variables' nodes."""
        for node_id, changes in updates.items():
            self.nodes[node_id].state.update(changes)

    def incoming(self, node_id: str) -> list:
        return [e for e in self.edges if e.dst == node_id]

    def loss_target(self) -> tuple[str, str | None] | None:
        if not self.loss:
            return None
        node, _, port = self.loss.partition(":")
        return node, port or None

    def loss_node(self) -> str | None:
        """The id of the node whose output is the page's loss, or None."""
        target = self.loss_target()
        return None if target is None else target[0]

    def is_loss(self, node_id: str) -> bool:
        """True when the page's loss is an output of ``node_id``."""
        return self.loss_node() == node_id

    def __eq__(self, other):
        if not isinstance(other, Page):
            return NotImplemented
        return (self.name == other.name and self.loss == other.loss and self.text == other.text
                and list(self.metrics) == list(other.metrics)
                and list(self.nodes) == list(other.nodes)
                and all(self.nodes[k] == other.nodes[k] for k in self.nodes)
                and sorted(self.edges) == sorted(other.edges)
                and _dicts_of_arrays_equal(self.feeds, other.feeds))


@dataclass(eq=False)
class Project:
    """A blockflow project: named pages plus free-form metadata (title, description)."""

    pages: list = field(default_factory=list)
    metadata: dict = field(default_factory=dict)
    #: the folder the project was loaded from or saved to (not saved in the file): dataset
    #: blocks read their files relative to it; None for a project not yet saved
    base_dir: str | None = field(default=None, compare=False, repr=False)

    def page(self, name: str | None = None) -> Page:
        """The page called ``name``; the first page when ``name`` is None."""
        if not self.pages:
            raise ProjectError("the project has no pages")
        if name is None:
            return self.pages[0]
        for p in self.pages:
            if p.name == name:
                return p
        raise ProjectError(f"no page named '{name}' (pages: {', '.join(p.name for p in self.pages)})")

    def add_page(self, name: str) -> Page:
        problem = page_name_problem(name)
        if problem:
            raise ProjectError(f"page name {name!r} must be non-empty and contain no '/' or control "
                               f"characters ({problem})")
        if any(p.name == name for p in self.pages):
            raise ProjectError(f"there is already a page named '{name}'")
        page = Page(name)
        self.pages.append(page)
        return page

    def __eq__(self, other):
        if not isinstance(other, Project):
            return NotImplemented
        return self.metadata == other.metadata and self.pages == other.pages
