"""The Project model: pages of nodes and edges, as plain data (no Qt, no blocks, no files).

It must not import PySide6, the block library, the compiler or the runtime.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from blockflow.equality import arrays_equal, attrs_equal, dicts_of_arrays_equal
from blockflow.errors import ProjectError
from blockflow.page_blocks import PageBlocks
from blockflow.page_layout import PageLayout
from blockflow.textsafe import fresh_id, name_problem, text_problem, valid_node_id

__all__ = ["Edge", "Node", "Page", "Project", "Change", "RemovedNode", "UNSET", "split_port", "port_text",
           "split_port_text",
           "arrays_equal", "valid_node_id", "fresh_id", "name_problem", "page_name_problem", "text_problem"]


def page_name_problem(name: str) -> str:
    """Why ``name`` cannot name a page ("" when it can): empty, a '/' (the scope separator), a
    control character."""
    if not name:
        return "a page name must not be empty"
    if "/" in name:
        return "a page name must not contain '/' (it is the scope separator)"
    if name.startswith("@"):
        return "a page name must not start with '@' (composites' diagrams are named so)"
    return name_problem(name, "a page name")


def split_port(port: str) -> tuple[str, int | None]:
    """``"inputs[2]"`` -> ``("inputs", 2)``; ``"x"`` -> ``("x", None)``."""
    if port.endswith("]") and "[" in port:
        base, _, idx = port[:-1].partition("[")
        if idx.isdigit() and len(idx) <= 9:   # longer names no entry (and int() refuses 4,301 digits)
            return base, int(idx)
    return port, None


def port_text(node: str, port: str | None = None) -> str:
    """A node's output as text, the form of a page's loss and metrics and of ``--grad``:
    ``("Sum_1", "output")`` -> ``"Sum_1:output"``; no port (None or "") -> ``"Sum_1"``, its
    first output."""
    return f"{node}:{port}" if port else node


def split_port_text(text: str) -> tuple[str, str | None]:
    """The inverse of port_text: ``"Sum_1:output"`` -> ``("Sum_1", "output")``; ``"Sum_1"`` ->
    ``("Sum_1", None)``. (split_port, above, splits a list port's index, not this.)"""
    node, _, port = text.partition(":")
    return node, port or None


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
    collapsed: bool = False      # drawn as its title and ports only (a view choice, saved)

    def __eq__(self, other):
        if not isinstance(other, Node):
            return NotImplemented
        return (self.id == other.id and self.block == other.block and self.label == other.label
                and tuple(self.position) == tuple(other.position) and self.collapsed == other.collapsed
                and attrs_equal(self.attrs, other.attrs)
                and dicts_of_arrays_equal(self.inputs, other.inputs)
                and dicts_of_arrays_equal(self.state, other.state))


@dataclass(frozen=True, order=True, init=False)
class Edge:
    """A wire from an output port to an input port on the same page."""

    # Wires are dict and set keys by the hundred thousand on a big page (wire types, gradient
    # paths): a dataclass's hash builds a tuple from the instance's __dict__ each time, 0.7-1.8 us
    # once a 100k-block page is out of the cache. It is worked out once, kept in a slot.
    __slots__ = ("src", "src_port", "dst", "dst_port", "_hash")

    src: str
    src_port: str
    dst: str
    dst_port: str

    def __init__(self, src: str, src_port: str, dst: str, dst_port: str):
        # the slots' setters, not a frozen __init__'s object.__setattr__ per field (1.3 -> 0.7 us)
        _SET_SRC(self, src), _SET_SRC_PORT(self, src_port), _SET_DST(self, dst), _SET_DST_PORT(self, dst_port)
        _SET_HASH(self, hash((src, src_port, dst, dst_port)))

    def __hash__(self):
        return self._hash

    def __reduce__(self):   # copies and pickles rebuild it (a frozen object takes no setattr)
        return type(self), (self.src, self.src_port, self.dst, self.dst_port)

    def __str__(self):
        return f"{self.src}.{self.src_port} -> {self.dst}.{self.dst_port}"


_SET_SRC, _SET_SRC_PORT, _SET_DST, _SET_DST_PORT, _SET_HASH = (getattr(Edge, n).__set__ for n in Edge.__slots__)


#: the attr of a composite instance naming the instance beside it whose Variables it uses (here,
#: as renames follow it; composite.py, which imports this module, gives it to the rest)
SHARE_ATTR = "share_variables_with"


class _Unset:
    """The type of UNSET."""

    def __repr__(self):
        return "UNSET"


#: "no entry": given to a mutator, it removes the entry (an attr, an inline input, a feed); in a
#: Change's ``before``, the entry was absent. Not None, which a file may hold as a value.
UNSET = _Unset()

#: page fields set_field may set, and whether a change of each can change what the page computes
PAGE_FIELDS = {"loss": True, "text": False, "metrics": False}


@dataclass(frozen=True)
class Change:
    """What one mutator of a Page or a Project changed: enough for the editor to tell its views
    which nodes, wires, fields and pages to redraw, and for an undo to put the model back.

    ``page`` is the page edited (for a page renamed, its new name). ``computes``: the edit can
    change what the page computes (a label, a move, the page note or the plotted metrics cannot).
    ``index`` is where the node, wire or page went or was; ``before`` holds what the edit replaced
    (an old value, UNSET when there was none; old positions or states by node id; a RemovedNode;
    a removed Page), which is what the inverse mutator takes back.
    """

    page: str
    computes: bool = False
    nodes_added: tuple = ()
    nodes_removed: tuple = ()
    nodes_changed: tuple = ()
    nodes_moved: tuple = ()
    node_renamed: tuple = ()          # (old id, new id)
    edges_added: tuple = ()
    edges_removed: tuple = ()
    # page fields set_field set: loss, text, metrics (remove_node also drops the node's loss mark
    # and metrics; they are kept in its RemovedNode, and node_removed is what the views hear)
    fields: tuple = ()
    pages_added: tuple = ()
    pages_removed: tuple = ()
    page_renamed: tuple = ()          # (old name, new name)
    pages_moved: tuple = ()
    index: int | None = None
    before: object = None


@dataclass(frozen=True)
class RemovedNode:
    """A node taken off a page with everything that referred to it, in the places it held, so
    Page.restore_node puts the page back exactly."""

    node: Node
    index: int
    edges: tuple        # (index in the page's edges, Edge), in increasing index
    feed: tuple | None  # (index in the page's feeds, value), None without a feed
    loss: str | None    # the page's loss when it named this node, else None
    metrics: tuple      # the page's metrics before (some may name the node)
    layout: tuple = ((), ())   # (its wires' reroute points, the page's frames before)


def _with_key_renamed(table: dict, old: str, new: str) -> dict:
    return {(new if k == old else k): v for k, v in table.items()}


def _renamed_ref(ref: str, old: str, new: str) -> str:
    """A "node" or "node:port" reference with the node ``old`` renamed ``new``."""
    node, port = split_port_text(ref)
    return port_text(new, port) if node == old else ref


@dataclass(eq=False)
class Page(PageLayout, PageBlocks):
    """One diagram: its own graph and its own scope, named after the page.

    ``loss`` names the node (``"Sum_1"`` or ``"Sum_1:output"``) whose output is the page's default
    gradient target; ``feeds`` holds saved values for Placeholders (node id -> array); ``text``
    is a note shown on the page; ``metrics`` lists other scalar outputs to plot while training.

    Two ways to edit, for two kinds of caller. The builders (``add_node``, ``connect``,
    ``apply_state``) are for code that builds or updates a page outright: scripts, tests,
    benchmarks, the CLI, a run's state updates; they return the new thing (or nothing), not a
    Change, and cannot be undone. The mutators (``insert_node`` ... ``rename_node``, below, and
    page_blocks.py's ``remove_blocks``/``insert_blocks`` for many blocks at once) are for the
    editor: each does one edit, refuses one the model cannot hold, and returns the Change the
    editor's undo commands replay and the document turns into signals.
    """

    name: str
    nodes: dict = field(default_factory=dict)
    edges: list = field(default_factory=list)
    loss: str | None = None
    feeds: dict = field(default_factory=dict)
    text: str = ""
    #: scalar outputs to plot while training ("node" or "node:port"), e.g. an accuracy
    metrics: list = field(default_factory=list)
    bends: dict = field(default_factory=dict)     # {Edge: ((x, y), ...)}: reroute points (page_layout.py)
    frames: list = field(default_factory=list)    # page_layout.Frame: boxes around blocks

    @property
    def scope(self) -> str:
        return self.name

    def full_name(self, node_id: str) -> str:
        """The node's scoped name, as TensorFlow would print it: ``page/MatMul_1``."""
        return f"{self.scope}/{node_id}"

    def new_id(self, block: str) -> str:
        """The next free id for a block: ``MatMul_1``, ``MatMul_2``, ... (``Dense_1`` for an
        instance of the composite ``@Dense``)."""
        return fresh_id(block, self.nodes)

    def add_node(self, block: str, *, id: str | None = None, attrs=None, inputs=None,
                 position=(0.0, 0.0), label: str = "", state=None) -> Node:
        """Add a node, for code that builds a page; returns it (edits go through insert_node)."""
        node = Node(id or self.new_id(block), block, dict(attrs or {}),
                    {k: np.asarray(v) for k, v in (inputs or {}).items()},
                    tuple(float(p) for p in position), label, dict(state or {}))
        self.insert_node(node)
        return node

    def connect(self, src: str, src_port: str, dst: str, dst_port: str) -> Edge:
        """Add a wire, for code that builds a page (scripts, tests, benchmarks): it checks only
        that both nodes exist, so building a page of n wires costs n, not n squared as
        insert_edge's look for the same wire would (edits go through insert_edge)."""
        for nid in (src, dst):
            self._node(nid)
        edge = Edge(src, src_port, dst, dst_port)
        self.edges.append(edge)
        return edge

    # ------------------------------------------------------------------ mutators
    # Each does one edit, refuses (ProjectError, the page untouched) an edit the model cannot
    # hold, and returns the Change. The editor's undo commands edit through these only.

    def _node(self, node_id: str) -> Node:
        node = self.nodes.get(node_id)
        if node is None:
            raise ProjectError(f"page '{self.name}' has no node '{node_id}'")
        return node

    def insert_node(self, node: Node, index: int | None = None) -> Change:
        """Put ``node`` among the nodes, at ``index`` in their order (last when None)."""
        if node.id in self.nodes:
            raise ProjectError(f"page '{self.name}' already has a node '{node.id}'")
        if not valid_node_id(node.id):
            raise ProjectError(f"'{node.id}' is not a valid node id (letters, digits, _ . -)")
        if index is None or index >= len(self.nodes):
            self.nodes[node.id] = node        # the common case, and the one building a page uses
        else:
            items = list(self.nodes.items())
            items.insert(index, (node.id, node))
            self.nodes = dict(items)
        return Change(self.name, True, nodes_added=(node.id,),
                      index=len(self.nodes) - 1 if index is None else min(index, len(self.nodes) - 1))

    def remove_node(self, node_id: str) -> Change:
        """Take a node off the page with its wires, its saved feed, the loss mark when it is the
        loss and the metrics it gives; ``before`` is the RemovedNode restore_node takes."""
        node = self._node(node_id)
        edges = tuple((i, e) for i, e in enumerate(self.edges) if node_id in (e.src, e.dst))
        feed = next(((i, v) for i, (k, v) in enumerate(self.feeds.items()) if k == node_id), None)
        last = next(reversed(self.nodes)) == node_id     # the undo of an add, of a paste: no O(n) search
        removed = RemovedNode(node, len(self.nodes) - 1 if last else list(self.nodes).index(node_id), edges, feed,
                              self.loss if self.is_loss(node_id) else None, tuple(self.metrics),
                              self._layout_without_node(node_id, edges))
        del self.nodes[node_id]
        self.edges = [e for e in self.edges if node_id not in (e.src, e.dst)]
        self.feeds.pop(node_id, None)
        if removed.loss is not None:
            self.loss = None
        self.metrics = [m for m in self.metrics if split_port_text(m)[0] != node_id]
        return Change(self.name, True, nodes_removed=(node_id,), edges_removed=tuple(e for _, e in edges),
                      index=removed.index, before=removed)

    def restore_node(self, removed: RemovedNode) -> Change:
        """Undo remove_node: the node, its wires, feed, loss mark and metrics where they were."""
        change = self.insert_node(removed.node, removed.index)
        for i, edge in removed.edges:
            self.edges.insert(i, edge)
        if removed.feed is not None:
            items = list(self.feeds.items())
            items.insert(removed.feed[0], (removed.node.id, removed.feed[1]))
            self.feeds = dict(items)
        if removed.loss is not None:
            self.loss = removed.loss
        self.metrics = list(removed.metrics)
        self._layout_restored(*removed.layout)
        return Change(self.name, True, nodes_added=change.nodes_added,
                      edges_added=tuple(e for _, e in removed.edges), index=change.index)

    def insert_edge(self, edge: Edge, index: int | None = None) -> Change:
        """Add a wire (at ``index`` in the page's wires; last when None). Refuses a wire from or
        to a node the page lacks, an empty port name and a wire the page has already. Whether
        the ports exist on the blocks is the compiler's question (the model knows no blocks)."""
        for nid in (edge.src, edge.dst):
            self._node(nid)
        for port in (edge.src_port, edge.dst_port):
            if not isinstance(port, str) or not port:
                raise ProjectError(f"a wire needs port names, got {port!r}")
        if edge in self.edges:
            raise ProjectError(f"page '{self.name}' already has the wire {edge}")
        at = len(self.edges) if index is None else min(index, len(self.edges))
        self.edges.insert(at, edge)
        return Change(self.name, True, edges_added=(edge,), index=at)

    def remove_edge(self, edge: Edge) -> Change:
        try:      # the last wire (the undo of a connect, of a paste): no O(n) search
            index = len(self.edges) - 1 if self.edges and self.edges[-1] == edge else self.edges.index(edge)
        except ValueError:
            raise ProjectError(f"page '{self.name}' has no wire {edge}") from None
        del self.edges[index]
        return Change(self.name, True, edges_removed=(edge,), index=index, before=self.bends.pop(edge, ()))

    def move_nodes(self, positions: dict) -> Change:
        """Place nodes: ``{node id: (x, y)}``; ``before`` holds their old positions."""
        nodes = [self._node(nid) for nid in positions]
        before = {node.id: node.position for node in nodes}
        for node in nodes:
            x, y = positions[node.id]
            node.position = (float(x), float(y))
        return Change(self.name, False, nodes_moved=tuple(positions), before=before)

    def _set_entry(self, node_id: str, box: str, key: str, value) -> Change:
        table = getattr(self._node(node_id), box)
        before = table.get(key, UNSET)
        if value is UNSET:
            table.pop(key, None)
        else:
            table[key] = value
        return Change(self.name, True, nodes_changed=(node_id,), before=before)

    def set_attr(self, node_id: str, name: str, value) -> Change:
        """Set one attr of a node as given (the compiler validates attrs); UNSET removes it."""
        return self._set_entry(node_id, "attrs", name, value)

    def set_inline(self, node_id: str, port: str, value) -> Change:
        """Set the inline constant of one input of a node; UNSET removes it."""
        return self._set_entry(node_id, "inputs", port, value)

    def set_label(self, node_id: str, label: str) -> Change:
        node = self._node(node_id)
        problem = text_problem(label)
        if problem:
            raise ProjectError(f"the label {problem}")
        before, node.label = node.label, label
        return Change(self.name, False, nodes_changed=(node_id,), before=before)

    def set_collapsed(self, flags: dict) -> Change:
        """Collapse or expand nodes: ``{node id: bool}``; ``before`` holds the old flags."""
        before = {nid: self._node(nid).collapsed for nid in flags}   # an unknown id: nothing changed
        for nid, flag in flags.items():
            self.nodes[nid].collapsed = bool(flag)
        return Change(self.name, False, nodes_changed=tuple(flags), before=before)

    def set_states(self, states: dict) -> Change:
        """Replace the stored state of nodes: ``{node id: state dict}``; ``before`` holds the old
        states (the same objects, so putting them back is exact)."""
        nodes = [self._node(nid) for nid in states]
        before = {node.id: node.state for node in nodes}
        for node in nodes:
            node.state = dict(states[node.id])
        return Change(self.name, True, nodes_changed=tuple(states), before=before)

    def set_feed(self, node_id: str, value) -> Change:
        """Set the saved value of a Placeholder; UNSET removes it. A node's own data, so the
        Change names the node, not a page field."""
        self._node(node_id)
        before = self.feeds.get(node_id, UNSET)
        if value is UNSET:
            self.feeds.pop(node_id, None)
        else:
            self.feeds[node_id] = value
        return Change(self.name, True, nodes_changed=(node_id,), before=before)

    def metrics_problem(self, metrics) -> str:
        """Why ``metrics`` cannot be the page's plotted outputs ("" when they can): each names a
        block of the page (``"node"`` or ``"node:port"``), once."""
        for m in metrics:
            if not isinstance(m, str) or split_port_text(m)[0] not in self.nodes:
                return f"{m!r} names no block on page '{self.name}'"
        if len(set(metrics)) != len(metrics):
            return "a metric is listed twice"
        return ""

    def set_field(self, field: str, value) -> Change:
        """Set the page's ``loss``, ``text`` or ``metrics``."""
        if field not in PAGE_FIELDS:
            raise ProjectError(f"a page has no field '{field}' to set (only {', '.join(PAGE_FIELDS)})")
        problem = (f"the page note {text_problem(value)}" if field == "text" and text_problem(value)
                   else self.metrics_problem(list(value)) if field == "metrics" else "")
        if problem:
            raise ProjectError(problem)
        before = getattr(self, field)
        setattr(self, field, list(value) if field == "metrics" else value)
        return Change(self.name, PAGE_FIELDS[field], fields=(field,), before=before)

    def rename_problem(self, old: str, new: str) -> str:
        """Why node ``old`` cannot be renamed ``new`` ("" when it can)."""
        if old not in self.nodes:
            return f"there is no block '{old}'"
        if new == old:
            return ""
        if not valid_node_id(new):
            return f"'{new}' is not a valid id: a letter or _ first, then letters, digits, _ . -"
        if new in self.nodes:
            return f"page '{self.name}' already has a block '{new}'"
        return ""

    def rename_node(self, old: str, new: str) -> Change:
        """Give a node a new id and make every reference follow: its place in the node order,
        its wires, the loss mark, the plotted metrics, its saved feed and the instances beside it
        that use its Variables (``share_variables_with``)."""
        problem = self.rename_problem(old, new)
        if problem:
            raise ProjectError(problem)
        self.nodes[old].id = new
        self.nodes = _with_key_renamed(self.nodes, old, new)
        self.edges = [Edge(new if e.src == old else e.src, e.src_port, new if e.dst == old else e.dst,
                           e.dst_port) if old in (e.src, e.dst) else e for e in self.edges]
        if self.loss is not None:
            self.loss = _renamed_ref(self.loss, old, new)
        self.metrics = [_renamed_ref(m, old, new) for m in self.metrics]
        if old in self.feeds:
            self.feeds = _with_key_renamed(self.feeds, old, new)
        self._layout_renamed(old, new)
        # instances using its Variables name it (left behind: the FGSM sample's mlp_adv failed)
        tied = tuple(nid for nid, node in self.nodes.items() if node.attrs.get(SHARE_ATTR) == old)
        for nid in tied:
            self.nodes[nid].attrs[SHARE_ATTR] = new
        return Change(self.name, True, nodes_changed=tied, node_renamed=(old, new))

    def apply_state(self, updates: dict) -> None:
        """Store a run's state updates (``RunResult.state_updates``) in the Variables' nodes; a
        Variable inside an instance (``d1/blk/W``) keeps its state in the instance ``d1``, under
        ``blk/W:key``."""
        for node_id, changes in updates.items():
            top, inner = node_id.partition("/")[::2]
            if inner:
                changes = {f"{inner}:{k}": v for k, v in changes.items()}
            self.nodes[top].state.update(changes)

    def incoming(self, node_id: str) -> list:
        return [e for e in self.edges if e.dst == node_id]

    def loss_target(self) -> tuple[str, str | None] | None:
        """The loss as (node, port or None), or None when the page marks no loss."""
        return split_port_text(self.loss) if self.loss else None

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
                and sorted(self.edges) == sorted(other.edges) and self.bends == other.bends
                and dicts_of_arrays_equal(self.feeds, other.feeds) and self.frames == other.frames)


@dataclass(eq=False)
class Project:
    """A blockflow project: named pages plus free-form metadata (title, description).

    As on Page, ``add_page`` is the builder (scripts, tests, the CLI: returns the new Page, no
    Change), and ``insert_page``, ``remove_page``, ``rename_page`` and ``move_page`` are the
    mutators the editor's undoable commands go through (each returns its Change).
    """

    pages: list = field(default_factory=list)
    metadata: dict = field(default_factory=dict)
    #: composite blocks by name (blockflow.composite.Composite; their diagrams are named ``@name``)
    composites: dict = field(default_factory=dict)
    #: the folder the project was loaded from or saved to (not saved in the file): dataset
    #: blocks read their files relative to it; None for a project not yet saved
    base_dir: str | None = field(default=None, compare=False, repr=False)
    #: the data files of base_dir as the compiler last opened them (a blockflow.datafiles.DataFiles,
    #: kept by compile.compiler.project_files so that each compile does not reopen them; not saved)
    data_files: object = field(default=None, compare=False, repr=False)

    def page(self, name: str | None = None) -> Page:
        """The page called ``name``; the first page when ``name`` is None; the diagram of
        composite ``X`` when ``name`` is ``@X`` (so that every Page mutator edits definitions)."""
        if name is not None and name.startswith("@"):
            return self.composite(name[1:]).page
        if not self.pages:
            raise ProjectError("the project has no pages")
        if name is None:
            return self.pages[0]
        for p in self.pages:
            if p.name == name:
                return p
        raise ProjectError(f"no page named '{name}' (pages: {', '.join(p.name for p in self.pages)})")

    def composite(self, name: str):
        """The composite called ``name`` (blockflow.composite.Composite)."""
        found = self.composites.get(name)
        if found is None:
            known = ", ".join(sorted(self.composites)) or "none"
            raise ProjectError(f"no composite named '{name}' (composites: {known})")
        return found

    def diagrams(self) -> list[Page]:
        """Every diagram: the pages, then the composites' diagrams."""
        return list(self.pages) + [c.page for c in self.composites.values()]

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

    # ------------------------------------------------------------------ mutators (see Page's)
    def _index(self, name: str) -> int:
        return self.pages.index(self.page(name))

    def new_page_problem(self, name: str) -> str:
        """Why an edit cannot give a page the name ``name`` ("" when it can): the rules of
        page_name_problem, no surrounding spaces, and not the name of another page."""
        if page_name_problem(name) or name != name.strip():
            return (f"page name {name!r} must be non-empty, without '/', control characters "
                    f"or surrounding spaces")
        if any(p.name == name for p in self.pages):
            return f"there is already a page named '{name}'"
        return ""

    def insert_page(self, page: Page, index: int | None = None) -> Change:
        problem = self.new_page_problem(page.name)
        if problem:
            raise ProjectError(problem)
        at = len(self.pages) if index is None else min(index, len(self.pages))
        self.pages.insert(at, page)
        return Change(page.name, pages_added=(page.name,), index=at)

    def remove_page(self, name: str) -> Change:
        """Take a page out; ``before`` is the Page itself, for insert_page to put back."""
        index = self._index(name)
        if len(self.pages) == 1:
            raise ProjectError("a project keeps at least one page")
        page = self.pages.pop(index)
        return Change(name, pages_removed=(name,), index=index, before=page)

    def rename_page(self, old: str, new: str) -> Change:
        """Rename a page. Nothing else in a project names a page (its nodes' full names are
        ``page/id`` by construction), so the name is the one reference to change."""
        page = self.page(old)
        problem = self.new_page_problem(new)
        if problem:
            raise ProjectError(problem)
        page.name = new
        return Change(new, True, page_renamed=(old, new))

    def move_page(self, name: str, index: int) -> Change:
        """Put a page at ``index`` in the page order; ``before`` is its old index."""
        old = self._index(name)
        if not 0 <= index < len(self.pages):
            raise ProjectError(f"there is no place {index} among {len(self.pages)} pages")
        self.pages.insert(index, self.pages.pop(old))
        return Change(name, pages_moved=(name,), index=index, before=old)

    def __eq__(self, other):
        if not isinstance(other, Project):
            return NotImplemented
        return (self.metadata == other.metadata and self.pages == other.pages
                and self.composites == other.composites)
