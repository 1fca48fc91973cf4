"""The schedule's order: a topological sort of the nodes over their wires, without networkx.

networkx's DiGraph keeps three dicts per node and one per arc: about 600 bytes a block, 40 % of
what a compile allocates, and a 100k-block page's compile then walks memory no cache holds
(benchmarks/README.md, "Compile"). ``Dependencies`` keeps one list of successors per node that
has any and sorts exactly as ``nx.topological_sort`` of the graph the compiler used to build, so
the schedule (and every slot number after it) is the same; the DiGraph itself
(``Program.graph``) is built from it only when someone asks, and for the compiler's cycle report.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:     # networkx is imported where a graph is built: it was a third of a
    import networkx as nx   # command's start-up and 19 MiB (docs/performance.md)


__all__ = ["Dependencies"]


class Dependencies:
    """The nodes of a page (in page order) and the arcs between them, deduplicated."""

    def __init__(self, nodes, arcs):
        """``nodes``: node ids in page order; ``arcs``: (src, dst) pairs, both ends among them."""
        self.nodes = tuple(nodes)
        succ: dict[str, list] = {}
        known = set(self.nodes)
        stray: list = []
        for u, v in arcs:
            if u not in known or v not in known:
                stray.append((u, v))
            found = succ.get(u)
            if found is None:
                succ[u] = [v]
            else:
                found.append(v)
        for u, vs in succ.items():
            if len(vs) > 1:
                # networkx visits a node's children in the order their arcs were added: sorted
                vs[:] = sorted(set(vs))
        self.succ = succ
        if stray:   # networkx adds an arc's missing ends as it meets them in the sorted arcs
            extra = {}
            for u, v in sorted(stray):
                for n in (u, v):
                    if n not in known:
                        extra[n] = None
            self.nodes += tuple(extra)

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
        succ = self.succ
        indegree = dict.fromkeys(self.nodes, 0)
        for vs in succ.values():
            for v in vs:
                indegree[v] += 1
        # networkx's generations: the nodes of in-degree 0 in page order, then each generation's
        # children in the order their last parent in it releases them
        zero = [n for n, d in indegree.items() if d == 0]
        order: list[str] = []
        empty = ()
        while zero:
            generation, zero = zero, []
            for node in generation:
                for child in succ.get(node, empty):
                    d = indegree[child] - 1
                    indegree[child] = d
                    if d == 0:
                        zero.append(child)
            order.extend(generation)
        return order if len(order) == len(indegree) else None
