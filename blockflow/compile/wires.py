"""The good wires of a page as the compile keeps them: by the block number of the block each one
goes into (compiler.py checks them and makes the table; infer.py finds a block's inputs in it)."""
from __future__ import annotations

__all__ = ["Wires"]


class Wires:
    """The good wires of a page (both ends exist, one wire per input), by the block number of
    the block each goes into, and in page order (compiler._check_wires makes it): a wire is
    found in its block's short list, not in a dict of every wire keyed by (node, port)."""

    __slots__ = ("index", "into", "good", "src", "type")

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

    def find(self, i: int, port: str):
        """The wire into block number ``i``'s ``port``, or None."""
        good = self.good
        for g in self.of(i):
            if good[g].dst_port == port:
                return good[g]
        return None

    def of(self, i: int) -> tuple:
        """The places in ``good`` of the wires into block number ``i``, in page order."""
        w = self.into[i]
        return w if type(w) is tuple else () if w is None else (w,)

    def add(self, e, i: int, si: int) -> None:
        into, g = self.into[i], len(self.good)
        self.into[i] = g if into is None else (into, g) if type(into) is int else into + (g,)
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
