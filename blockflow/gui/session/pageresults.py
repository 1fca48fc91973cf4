"""What one run of a page left to show, and when it still holds: ``PageResults`` (the values,
summaries and error of a page's last run, following renames), ``page_fingerprint`` (what a run
computed from, composites included), ``host_page`` (the page whose run the canvas shows, inside
an opened instance too). Kept apart from session.py, which decides when runs happen and tells
the panels; no Qt here.
"""
from __future__ import annotations

import hashlib

import numpy as np

from blockflow.composite import composite_name, uses
from blockflow.run.runtime import RunResult
from blockflow.present.values import BlockRun
from blockflow.gui.session import runner

__all__ = ["PageResults", "page_fingerprint", "host_page", "composites_used"]


def composites_used(page, composites: dict) -> list[str]:
    """The composites ``page`` uses, directly or through others, sorted."""
    seen: set = set()
    todo = [n for n in (composite_name(node.block) for node in page.nodes.values()) if n]
    while todo:
        name = todo.pop()
        if name in seen or name not in composites:
            continue
        seen.add(name)
        todo.extend(uses(composites[name]))
    return sorted(seen)


def host_page(document) -> str:
    """The page whose run the canvas shows values of: the page drawn, or the page an opened
    instance is on (``document.location``); a definition opened alone is its own (never run).
    A location a page rename or removal left behind counts as the current page."""
    loc, current = document.location, document.current_page
    if loc.diagram != current or not loc.level or loc.host is None:
        return current
    return loc.host


def page_fingerprint(page, composites: dict | None = None) -> bytes:
    """A digest of everything on a page that can change what a run computes: blocks, attrs,
    inline values, Variable state, wires, feeds and the loss mark; not positions, labels or notes.
    With ``composites`` (the project's), the diagrams, parameters and documentation of the
    composites the page uses count too: editing a definition changes what its instances compute.
    Equal digests mean a run's results still hold (an edit undone makes them current again)."""
    h = hashlib.blake2b(digest_size=20)

    def put(value) -> None:
        if isinstance(value, np.ndarray):
            h.update(b"A" + value.dtype.str.encode() + repr(value.shape).encode())
            h.update(np.ascontiguousarray(value).tobytes())
        elif isinstance(value, dict):
            h.update(b"D%d" % len(value))
            for k in sorted(value, key=str):
                put(str(k))
                put(value[k])
        elif isinstance(value, (list, tuple)):
            h.update(b"L%d" % len(value))
            for v in value:
                put(v)
        else:
            h.update(b"S" + type(value).__name__.encode() + b":" + repr(value).encode() + b";")

    for nid, node in page.nodes.items():
        put((nid, node.block))
        put(node.attrs)
        put(node.inputs)
        put(node.state)
    put(sorted((e.src, e.src_port, e.dst, e.dst_port) for e in page.edges))
    put(page.feeds)
    put(page.loss)
    for name in composites_used(page, composites) if composites else ():
        comp = composites[name]
        put((name, comp.doc, repr(comp.params)))
        h.update(page_fingerprint(comp.page))
    return h.digest()


class PageResults:
    """The outcome of the last run of one page, as shown.

    ``result`` is the RunResult (after a NaN/Inf failure: the values as computed, NaN included, by
    an unchecked re-run; None when nothing could be computed); ``error`` the exception of a failed
    run and ``error_node``/``error_port`` where it happened; ``stale`` whether the page changed
    since. Node ids renamed after the run are followed (``ids``)."""

    def __init__(self, page: str, kind: str, target, result, summaries, error, error_node, error_port,
                 fingerprint: bytes, seconds: float):
        self.page, self.kind, self.target = page, kind, target
        self.result: RunResult | None = result
        self.summaries: dict = summaries
        self.error: BaseException | None = error
        self.error_node, self.error_port = error_node, error_port
        self.fingerprint = fingerprint
        self.seconds = seconds
        self.stale = False
        self.ids: dict[str, str] = {}        # current id -> id in the run (renamed since)

    def run_id(self, node: str) -> str:
        # a flat id inside an instance follows its top instance's rename (d1/W -> dd/W)
        top, sep, rest = node.partition("/")
        return self.ids.get(top, top) + sep + rest

    def node_renamed(self, old: str, new: str) -> None:
        self.ids[new] = self.ids.pop(old, old)
        if self.error_node == old:
            self.error_node = new

    def value(self, node: str, port: str):
        if self.result is None:
            return None
        return self.result.values.get((self.run_id(node), port))

    def grad(self, node: str, port: str):
        if self.result is None:
            return None
        return self.result.grads.get((self.run_id(node), port))

    def block_results(self, node: str, ports) -> BlockRun | None:
        rid = self.run_id(node)
        summaries = {p: self.summaries.get((rid, p)) for p in ports}
        error = badge = ""
        if self.error is not None and node == self.error_node:
            error, badge = str(self.error), runner.badge(self.error)
        if not error and not any(s is not None for s in summaries.values()):
            return None
        return BlockRun(summaries, error, self.stale, badge)

    def instance_results(self, path: str, outputs: dict, ports) -> BlockRun | None:
        """What a closed instance shows: the values of its output ``ports`` (``outputs``: port ->
        the flat id of its Output block), and the error of a run that failed inside it."""
        summaries = {p: self.summaries.get((self.run_id(outputs[p]), "output")) if p in outputs else None
                     for p in ports}
        error = badge = ""
        if self.error is not None and self.error_node and self.error_node.startswith(path + "/"):
            error, badge = f"inside {path}, at {self.error_node}: {self.error}", runner.badge(self.error)
        if not error and not any(s is not None for s in summaries.values()):
            return None
        return BlockRun(summaries, error, self.stale, badge)
