"""Every sample opens legible (File > Open Sample): at a zoom where its blocks draw all their text,
showing the start of the page when the whole would be too small; after Backward, the fan-out Σ
notes cover no block and no other note (a note without a free place shows while its block is
hovered); the scope tab is drawn only where a page has more than one scope."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import QPoint, QRectF, Qt
from PySide6.QtWidgets import QApplication

from blockflow.gui.canvas.gradlegend import FanoutLabel
from blockflow.gui.canvas.items import NodeItem
from blockflow.gui.canvas.readable import READABLE_ZOOM
from blockflow.gui.common.theme import Style
from blockflow.gui.document.document import Document
from blockflow.gui.main_window import sample_projects
from blockflow.io.project_io import load_project

from test_gradients import backward, make_view, two_branches
from test_main_window import dialogs, make_window, settings_path  # noqa: F401  (dialogs: no modal box)

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = sample_projects()


def open_sample(qtbot, window, path: Path) -> None:
    entry = next(a for a in window.sample_menu.actions()
                 if a.text() == path.name[: -len(".bflow.json")].replace("_", " "))
    entry.trigger()
    QApplication.processEvents()


@pytest.fixture
def window(qtbot, settings_path):
    return make_window(qtbot, settings_path, size=(1200, 700))


def test_there_are_samples():
    assert len(SAMPLES) >= 10


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name.split(".")[0])
def test_every_sample_opens_at_a_readable_zoom_on_its_start(qtbot, window, path):
    open_sample(qtbot, window, path)
    view, doc = window.view, window.document
    items = view.diagram_scene().node_items
    assert len(items) == len(doc.page().nodes) > 0
    assert view.zoom() >= READABLE_ZOOM - 1e-9 >= Style.DETAIL_LOD - 1e-9
    shown = view.mapToScene(view.viewport().rect()).boundingRect()
    whole = view.diagram_scene().items_rect()
    # the page's start (its leftmost block, where the data comes in) is in sight
    first = min(items.values(), key=lambda i: i.sceneBoundingRect().left())
    assert shown.contains(first.sceneBoundingRect()), path.name
    assert shown.left() <= whole.left()
    # blocks in sight draw their text: port names, full titles (never the scope tab: one scope)
    assert all(not i.show_scope and "scope" in i.ports for i in items.values())   # the port stays
    inside = [i for i in items.values() if shown.contains(i.sceneBoundingRect())]
    assert inside


def run_backward(qtbot, window) -> bool:
    """Run > Backward; True when it ran (a page without a scalar to differentiate is refused)."""
    outcome = []
    window.session.run_finished.connect(lambda *_: outcome.append(True))
    window.session.run_failed.connect(lambda *_: outcome.append(False))
    window.actions["run_backward"].trigger()
    qtbot.waitUntil(lambda: bool(outcome), timeout=20000)
    QApplication.processEvents()
    return outcome[0]


def overlaps(label, scene) -> list:
    """The blocks and always-shown notes ``label`` covers."""
    rect = label.sceneBoundingRect()
    hits = []
    for item in scene.items(rect):
        if item is label or not item.isVisible():
            continue
        if isinstance(item, NodeItem) and item.sceneBoundingRect().intersects(rect):
            hits.append(item.node_id)
        if isinstance(item, FanoutLabel) and not item.hover_only:
            hits.append(f"note at {item.fanout.node}")
    return hits


def test_fanout_notes_of_the_samples_cover_no_block_and_no_other_note(qtbot, window, tmp_path):
    seen = 0
    for path in SAMPLES:
        open_sample(qtbot, window, path)
        if not run_backward(qtbot, window):
            continue
        labels = window.view.gradients.labels
        for label in labels:
            if not label.hover_only:
                assert label.isVisible()
                assert overlaps(label, window.view.diagram_scene()) == [], (path.name, label.fanout.node)
            seen += 1
        if path.name.startswith("rbm"):
            window.view.centerOn(labels[0].sceneBoundingRect().center())
            QApplication.processEvents()
            image = window.view.viewport().grab()
            assert image.save(str(tmp_path / "fanout_notes.png"))
            if os.environ.get("BLOCKFLOW_UPDATE_SCREENSHOT"):
                image.save(str(ROOT / "docs" / "fanout_notes.png"))
    assert seen >= 2            # the samples do have fan-outs after Backward


def crowded_page():
    """two_branches with x walled in by blocks on every side: no free place for its note."""
    project = two_branches()
    page = project.pages[0]
    page.nodes["x"].position = (400.0, 300.0)
    k = 0
    for dx in range(-2, 4):
        for dy in range(-3, 4):
            if (dx, dy) != (0, 0):
                page.add_node("Tanh", id=f"wall{k}", inputs={"x": np.ones(1, np.float32)})
                page.nodes[f"wall{k}"].position = (400.0 + dx * 125, 300.0 + dy * 95)
                k += 1
    return project


def test_a_note_without_a_free_place_shows_while_its_block_is_hovered(qtbot):
    view = make_view(qtbot, Document(crowded_page()), size=(1400, 900))
    view.reset_zoom()
    view.centerOn(view.node_item("x").sceneBoundingRect().center())
    QApplication.processEvents()
    result, gview = backward(view.doc)
    view.gradients.show(gview)
    label = view.gradients.label_of("x", "output")
    assert label is not None and label.hover_only and not label.isVisible()
    x = view.node_item("x")
    vp = view.viewport()
    at = view.mapFromScene(x.body.translated(x.pos()).center())
    qtbot.mouseMove(vp, at + QPoint(0, 1))
    qtbot.mouseMove(vp, at)
    qtbot.waitUntil(label.isVisible, timeout=2000)
    assert x.zValue() > 0                       # its block raised: the note is drawn over the wall
    far = view.mapFromScene(view.diagram_scene().items_rect().bottomRight()) + QPoint(60, 60)
    qtbot.mouseMove(vp, far)
    qtbot.waitUntil(lambda: not label.isVisible(), timeout=2000)
    assert x.zValue() == 0


def test_the_scope_tab_shows_only_where_a_page_has_several_scopes(qtbot):
    view = make_view(qtbot, Document(two_branches()), size=(900, 500))
    scene = view.diagram_scene()
    assert not any(i.show_scope for i in scene.node_items.values())
    # blocks told they come from two scopes (an instance's inside drawn with its host's names)
    t = scene.node_items["t"]
    t.data.scope = "other"
    scene.refresh_node("q")
    scene._show_scopes()
    assert all(i.show_scope and "scope" in i.ports for i in scene.node_items.values())
    assert all(i.sceneBoundingRect().top() < i.pos().y() - Style.SCOPE_H for i in scene.node_items.values())
