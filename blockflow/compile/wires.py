"""The good wires of a page as the compile keeps them: by the block number of the block each one
goes into (compiler.py checks them and makes the table; infer.py finds a block's inputs in it)."""
from __future__ import annotations

__all__ = ["Wires", "MANY_WIRES"]

#: A block with more wires into it than this (an AddN or Concat of thousands of inputs) keeps
#: them in a list, found by port through a dict: a tuple grown a wire at a time and searched
#: from its start for each port cost the square of its length (20,000 wires into one AddN:
#: 2 minutes to compile; a page may hold 200,000)
MANY_WIRES = 8


class Wires:
    """The good wires of a page (both ends exist, one wire per input), by the block number of
    the block each goes into, and in page order (compiler._check_wires makes it): a wire is
    found in its block's short list, not in a dict of every wire keyed by (node, port)."""

    __slots__ = ("index", "into", "good", "src", "type", "_ports")

    def __init__(self, index: dict, n: int):
        self.index = index
        #: per block number: the place in ``good`` of the wire into it, or a tuple of the places
        #: of the wires into it (two or more), or None. No list a block: a 100k-block page's
        #: lists, each an object and an item array, were 0.2-0.4 us a block of new memory
        self.into: list = [None] * n
        self.good: list = []
        #: per wire of ``good``: the block number it comes from
        self.src: list = []
        #: per wire of ``good``: the type it carries, once the typing of its block found it
        #: (None: not found there; edge_types looks it up)
        self.type: list = []
        #: per block number whose wires are a list: (how many of them are indexed, {port: place})
        self._ports: dict = {}

    def find(self, i: int, port: str):
        """The wire into block number ``i``'s ``port``, or None."""
        good, w = self.good, self.into[i]
        if type(w) is list:
            g = self._port_index(i, w).get(port)
            return None if g is None else good[g]
        for g in self.of(i):
            if good[g].dst_port == port:
                return good[g]
        return None

    def _port_index(self, i: int, wires: list) -> dict:
        """{port: place in ``good``} of block ``i``'s wires, brought up to date with the wires
        added since it was last asked (the compiler asks after each one it adds)."""
        done, ports = self._ports.get(i, (0, None))
        if ports is None:
            ports = {}
        if done < len(wires):
            good = self.good
            for g in wires[done:]:
                ports.setdefault(good[g].dst_port, g)    # the first, as find's search gives it
            self._ports[i] = (len(wires), ports)
        return ports

    def of(self, i: int):
        """The places in ``good`` of the wires into block number ``i``, in page order (a tuple,
        or a list for a block of more than MANY_WIRES)."""
        w = self.into[i]
        return () if w is None else (w,) if type(w) is int else w

    def grown(self, i: int, g: int):
        """Block ``i``'s wires with place ``g`` added: what ``into[i]`` becomes."""
        into = self.into[i]
        if into is None:
            return g
        if type(into) is int:
            return (into, g)
        if type(into) is tuple:
            if len(into) < MANY_WIRES:
                return into + (g,)
            into = list(into)
        into.append(g)
        return into

    def add(self, e, i: int, si: int) -> None:
        self.into[i] = self.grown(i, len(self.good))
        self.good.append(e)
        self.src.append(si)
        self.type.append(None)

    def get(self, key):
        """The wire into ``(node, port)``, or None."""
        i = self.index.get(key[0])
        return None if i is None else self.find(i, key[1])

    def wires_into(self, i: int) -> list:
        """The wires into block number ``i``, in page order."""
        good = self.good
        return [good[g] for g in self.of(i)]

    def ports(self, nid) -> list:
        """The wired input ports of ``nid``, in page order."""
        i = self.index.get(nid)
        return [e.dst_port for e in self.wires_into(i)] if i is not None else []
