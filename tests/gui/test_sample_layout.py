"""The sample projects read well on the canvas: as the editor lays them out, no two blocks overlap and
no wire runs behind a block it does not connect."""
from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from blockflow.compile.compiler import compile_page
from blockflow.composite import ProjectBlocks
from blockflow.gui.canvas.scene import DiagramScene
from blockflow.gui.common.theme import Style
from blockflow.io.project_io import load_project
from blockflow.registry import default_registry

ROOT = Path(__file__).resolve().parents[2]
PAGES = [(path, page.name) for path in sorted((ROOT / "sample_projects").glob("*.bflow.json"))
         for page in load_project(path).pages]


@pytest.mark.parametrize("path,page", PAGES, ids=[f"{p.name.split('.')[0]}:{n}" for p, n in PAGES])
def test_no_block_overlaps_another_and_no_wire_runs_behind_a_block(qapp, path, page):
    project = load_project(path)
    registry = ProjectBlocks(default_registry(), project)     # composite instances drawn with their ports
    pg = project.page(page)
    scene = DiagramScene(registry, Style())
    scene.render_mode = True
    scene.load(pg, compile_page(pg, default_registry(), composites=project.composites))
    rects = {nid: item.sceneBoundingRect() for nid, item in scene.node_items.items()}
    overlaps = [(a, b) for (a, ra), (b, rb) in itertools.combinations(rects.items(), 2)
                if ra.adjusted(-8, -8, 8, 8).intersects(rb)]
    assert not overlaps
    behind = []
    for edge, item in scene.edge_items.items():
        path_ = item.path()
        points = [item.mapToScene(path_.pointAtPercent(k / 200)) for k in range(201)]
        for nid, rect in rects.items():
            if nid not in (edge.src, edge.dst) and any(rect.adjusted(4, 4, -4, -4).contains(p) for p in points):
                behind.append(f"{edge} behind {nid}")
    assert not behind
