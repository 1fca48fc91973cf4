"""The schedule's order: a topological sort of the nodes over their wires, without networkx.

networkx's DiGraph keeps three dicts per node and one per arc: about 600 bytes a block, 40 % of
what a compile allocates, and a 100k-block page's compile then walks memory no cache holds
(benchmarks/README.md, "Compile"). ``Dependencies`` keeps one list of successors per node that
has any and sorts exactly as ``nx.topological_sort`` of the graph the compiler used to build, so
the schedule (and every slot number after it) is the same; the DiGraph itself
(``Program.graph``) is built from it only when someone asks, and for the compiler's cycle report.
"""
from __future__ import annotations

import bisect
from typing import TYPE_CHECKING

if TYPE_CHECKING:     # networkx is imported where a graph is built: it was a third of a
    import networkx as nx   # command's start-up and 19 MiB (docs/performance.md)


__all__ = ["Dependencies", "add_child", "insert_child", "MANY_CHILDREN", "LATE", "defer_child", "sort_deferred"]

#: A list of children longer than this takes a child out of its id order at its end, and is
#: sorted once every wire is read (defer_child, sort_deferred): put in its place each time, the
#: list of a block feeding 200,000 others listed in the reverse of their ids' order moved about
#: 160 GB (9 s), and looking in it for the child first took minutes
MANY_CHILDREN = 64
#: what a node's entry of ``succ`` holds while its children wait, unsorted, in ``late``
LATE = ("late",)


def insert_child(kids: list, v: int, nodes) -> bool:
    """Put child ``v`` in ``kids`` (numbers, sorted by their ids in ``nodes``) in its place;
    False when it is there already (two wires between the same blocks make one arc)."""
    # found by bisection, not by ``v in kids``: a block feeding 40,000 others whose ids do not
    # follow the page's order spent 13 s comparing numbers (a page may hold 200,000)
    at = bisect.bisect_left(kids, nodes[v], key=nodes.__getitem__)
    if at < len(kids) and kids[at] == v:
        return False
    kids.insert(at, v)
    return True


def defer_child(succ: list, late: dict, indegree: list, u: int, v: int) -> None:
    """Add child ``v`` to node ``u``'s long list unsorted: the list moves to ``late[u]``, and
    its children are counted in ``indegree`` again, each once, when sort_deferred sorts it."""
    kids = succ[u]
    if kids is LATE:
        late[u].append(v)
        return
    for w in kids:
        indegree[w] -= 1
    kids.append(v)
    late[u] = kids
    succ[u] = LATE


def sort_deferred(succ: list, late: dict, indegree: list, nodes) -> None:
    """Put the lists defer_child set aside back in ``succ``, sorted by id, each child once."""
    for u, kids in late.items():
        kids = sorted(set(kids), key=nodes.__getitem__)
        for v in kids:
            indegree[v] += 1
        succ[u] = kids


def add_child(succ: list, indegree: list, u: int, v: int, nodes) -> None:
    """Add arc ``u -> v`` to ``succ`` (per node number: None, one child's number, or a list of
    them sorted by their ids in ``nodes``) and count it in ``indegree``, once however often it is
    added: what Dependencies.sorted_successors takes (compiler._check_wires does the same,
    written out in its loop over every wire)."""
    kids = succ[u]
    if kids is None:
        succ[u] = v
        indegree[v] += 1
    elif type(kids) is int:
        if kids != v:
            succ[u] = [kids, v] if nodes[v] > nodes[kids] else [v, kids]
            indegree[v] += 1
    elif insert_child(kids, v, nodes):
        indegree[v] += 1


class Dependencies:
    """The nodes of a page (in page order) and the arcs between them, deduplicated; kept by node
    number (a node's place in ``nodes``), lists where a 100k-block page's dicts keyed by id
    would not fit any cache."""

    def __init__(self, nodes, arcs):
        """``nodes``: node ids in page order; ``arcs``: (src, dst) pairs of ids (an end not among
        ``nodes`` is added, as networkx adds it)."""
        nodes = list(nodes)
        index = {n: i for i, n in enumerate(nodes)}
        stray = sorted((u, v) for u, v in arcs if u not in index or v not in index)
        for u, v in stray:   # networkx adds an arc's missing ends as it meets them in the sorted arcs
            for n in (u, v):
                if n not in index:
                    index[n] = len(nodes)
                    nodes.append(n)
        self._build(nodes, [(index[u], index[v]) for u, v in arcs])

    @classmethod
    def successors(cls, nodes: list, succ: list) -> "Dependencies":
        """``nodes``: node ids in page order; ``succ``: per node number, the numbers its arcs go
        to in the order they were drawn (None for none; the lists are sorted here, in place)."""
        self = cls.__new__(cls)
        self._sort(nodes, succ)
        return self

    @classmethod
    def sorted_successors(cls, nodes: list, succ: list, indegree: list) -> "Dependencies":
        """As ``successors``, for lists already sorted by id and deduplicated (compiler.py
        does it as it checks the wires), with each node's in-degree; a node with one successor
        may have its number in place of a list."""
        self = cls.__new__(cls)
        self.nodes = tuple(nodes)
        self._succ, self._indegree = succ, indegree
        return self

    def _build(self, nodes: list, arcs) -> None:
        succ: list = [None] * len(nodes)
        for u, v in arcs:
            found = succ[u]
            if found is None:
                succ[u] = [v]
            else:
                found.append(v)
        self._sort(nodes, succ)

    def _sort(self, nodes: list, succ: list) -> None:
        self.nodes = tuple(nodes)
        key = nodes.__getitem__
        self._indegree = indegree = [0] * len(succ)
        for vs in succ:
            if vs is None:
                continue
            if len(vs) == 1:
                indegree[vs[0]] += 1
                continue
            # networkx visits a node's children in the order their arcs were added: sorted by
            # id, each once (two, the most common, compared without a set and a sort)
            if len(vs) == 2:
                a, b = vs
                if a == b:
                    del vs[1]
                elif nodes[a] > nodes[b]:
                    vs.reverse()
            else:
                vs[:] = sorted(set(vs), key=key)
            for v in vs:
                indegree[v] += 1
        self._succ = succ

    @property
    def succ(self) -> dict:
        """{node: its successors}, for the nodes that have any."""
        nodes = self.nodes
        return {nodes[u]: [nodes[vs]] if type(vs) is int else [nodes[v] for v in vs]
                for u, vs in enumerate(self._succ) if vs is not None}

    def graph(self) -> nx.DiGraph:
        """The node-level DiGraph, as the compiler built it before (same node and arc order)."""
        import networkx as nx

        graph = nx.DiGraph()
        graph.add_nodes_from(self.nodes)
        succ = self.succ
        graph.add_edges_from((u, v) for u in sorted(succ) for v in succ[u])
        return graph

    def order(self) -> list[str] | None:
        """``list(nx.topological_sort(self.graph()))``, or None when there is a cycle (a node
        that reaches itself, a self-arc included)."""
        order = self.numbered_order()
        if order is None:
            return None
        nodes = self.nodes
        return [nodes[i] for i in order]

    def numbered_order(self) -> list[int] | None:
        """``order()`` by node number."""
        succ, indegree = self._succ, list(self._indegree)
        # networkx's generations: the nodes of in-degree 0 in page order, then each generation's
        # children in the order their last parent in it releases them
        zero = [n for n, d in enumerate(indegree) if d == 0]
        order: list[int] = []
        while zero:
            generation, zero = zero, []
            for node in generation:
                children = succ[node]
                if children is None:
                    continue
                if type(children) is int:    # one child (see sorted_successors)
                    d = indegree[children] - 1
                    indegree[children] = d
                    if d == 0:
                        zero.append(children)
                    continue
                for child in children:
                    d = indegree[child] - 1
                    indegree[child] = d
                    if d == 0:
                        zero.append(child)
            order.extend(generation)
        return order if len(order) == len(indegree) else None
