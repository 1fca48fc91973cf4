"""Copies of the open project that another thread may read while the UI thread edits the original.

A compile (compiling.py) and an autosave (autosave.py) work off the UI thread on a copy taken on
it as they start: new containers down to the values, which edits replace and never change in
place (a Node's attrs dict gets a new value, not a changed one; Edges and Frames are frozen).
The copy costs what making the containers costs: 15 ms for a 10,000-block page, where writing
that page as a project file takes 30 times as long.
"""
from __future__ import annotations

import copy
import gc

from blockflow.composite import Composite
from blockflow.project import Node, Page, Project

__all__ = ["snapshot", "project_snapshot"]


def snapshot(page: Page) -> Page:
    """A copy of ``page``: its nodes, wires, feeds, loss, note, metrics and layout."""
    # Many new objects and no garbage: the cyclic collector would only rescan the editor's heap.
    enabled = gc.isenabled()
    try:    # off inside the try: an exception right after it still turns it back on
        gc.disable()
        nodes = {nid: Node(n.id, n.block, dict(n.attrs), dict(n.inputs), n.position, n.label, dict(n.state),
                           n.collapsed)
                 for nid, n in page.nodes.items()}
        return Page(page.name, nodes, list(page.edges), page.loss, dict(page.feeds), page.text,
                    list(page.metrics), dict(page.bends), list(page.frames))
    finally:
        if enabled:
            gc.enable()


def project_snapshot(project: Project) -> Project:
    """A copy of everything of ``project`` a project file holds (and its folder, which data
    files are read from): what an autosave writes while the editing goes on."""
    composites = {name: Composite(c.name, c.doc, list(c.params), snapshot(c.page),
                                  None if c.origin is None else dict(c.origin))
                  for name, c in project.composites.items()}
    return Project([snapshot(p) for p in project.pages], copy.deepcopy(project.metadata), composites,
                   base_dir=project.base_dir)
