"""Collapsing blocks to their title and ports: H, the block menu, View > Collapse All / Expand All;
each one undo step, saved in the project file as the node's optional "collapsed" key."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtWidgets import QApplication

from blockflow.errors import ProjectError
from blockflow.gui.document.document import Document
from blockflow.io.project_io import dumps_project, load_project, loads_project
from blockflow.project import Edge, Project

from test_canvas import doc, drag, make_view, port_pos, view  # noqa: F401  (the canvas fixtures)
from test_main_window import dialogs, make_window, settings_path  # noqa: F401  (dialogs: no modal box)
from test_teaching import backward

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_projects" / "stable_softmax.bflow.json"


def three_blocks(doc):
    doc.add_node("Placeholder", (0, 0), node_id="x", attrs={"shape": [3]})
    doc.add_node("Tanh", (300, 0), node_id="t")
    doc.add_node("Softmax", (600, 0), node_id="s")
    doc.connect("x", "output", "t", "x")
    QApplication.processEvents()


def click_block(qtbot, view, nid, modifier=Qt.NoModifier):
    item = view.node_item(nid)
    at = view.mapFromScene(item.body.translated(item.pos()).center())
    qtbot.mouseClick(view.viewport(), Qt.LeftButton, modifier, at)


def wire_ends(view, edge):
    path = view.diagram_scene().edge_items[edge].path()
    return path.pointAtPercent(0), path.pointAtPercent(1)


# ------------------------------------------------------------------------------- the model and file


def test_the_flag_is_saved_only_when_set_and_read_back():
    project = Project()
    page = project.add_page("main")
    page.add_node("Tanh", id="t")
    page.add_node("Tanh", id="u")
    assert '"collapsed"' not in dumps_project(project)
    change = page.set_collapsed({"t": True})
    assert change.nodes_changed == ("t",) and change.before == {"t": False} and not change.computes
    text = dumps_project(project)
    assert text.count('"collapsed": true') == 1
    back = loads_project(text)
    assert back.page("main").nodes["t"].collapsed and not back.page("main").nodes["u"].collapsed
    assert back == project
    page.set_collapsed(change.before)
    assert back != project and '"collapsed"' not in dumps_project(project)
    with pytest.raises(ProjectError):
        page.set_collapsed({"nobody": True})


@pytest.mark.parametrize("value", [1, 0, "true", None, [True], {"a": 1}])
def test_a_collapsed_that_is_not_a_bool_is_refused_clearly(value):
    project = Project()
    project.add_page("main").add_node("Tanh", id="t")
    doc = json.loads(dumps_project(project))
    doc["pages"][0]["nodes"][0]["collapsed"] = value
    with pytest.raises(ProjectError) as err:
        loads_project(json.dumps(doc))
    assert "pages[0].nodes[0].collapsed" in str(err.value) and "true or false" in str(err.value)


# ------------------------------------------------------------------------------- the canvas


def test_h_collapses_the_selection_in_one_undo_step_and_wires_follow_the_ports(qtbot, view, doc):
    three_blocks(doc)
    doc.connect("t", "y", "s", "logits")
    QApplication.processEvents()
    full_h = view.node_item("t").h
    before, steps = dumps_project(doc.project), doc.undo_stack.count()
    click_block(qtbot, view, "t")
    click_block(qtbot, view, "s", Qt.ControlModifier)
    assert set(view.selected_nodes()) == {"t", "s"}
    qtbot.keyClick(view, Qt.Key_H)
    assert doc.page().nodes["t"].collapsed and doc.page().nodes["s"].collapsed
    assert doc.undo_stack.count() == steps + 1
    t = view.node_item("t")
    assert t.collapsed and t.h < full_h / 2
    # the wires end where the collapsed block draws its ports
    for edge, port, item in ((Edge("x", "output", "t", "x"), "x", t),
                             (Edge("t", "y", "s", "logits"), "y", t)):
        a, b = wire_ends(view, edge)
        end = b if edge.dst == "t" else a
        assert end == t.port_scene_pos(port)
        assert t.sceneBoundingRect().contains(end)
    # H again expands them (all were collapsed)
    qtbot.keyClick(view, Qt.Key_H)
    assert not doc.page().nodes["t"].collapsed and view.node_item("t").h == full_h
    doc.undo_stack.undo()
    doc.undo_stack.undo()
    assert dumps_project(doc.project) == before and not view.node_item("t").collapsed


def test_a_collapsed_block_can_still_be_wired_from_and_to(qtbot, view, doc):
    three_blocks(doc)
    doc.set_collapsed(["t", "s"], True)
    QApplication.processEvents()
    drag(qtbot, view, port_pos(view, "t", "y"), port_pos(view, "s", "logits"))
    assert Edge("t", "y", "s", "logits") in doc.page().edges
    a, b = wire_ends(view, Edge("t", "y", "s", "logits"))
    assert a == view.node_item("t").port_scene_pos("y") and b == view.node_item("s").port_scene_pos("logits")


def test_the_block_menu_collapses_and_expands(qtbot, view, doc):
    three_blocks(doc)
    centre = view.node_item("t").sceneBoundingRect().center()
    menu = view.context_menu(centre)
    entry = next(a for a in menu.actions() if a.text().startswith("Collapse"))
    assert entry.text().endswith("\tH")
    entry.trigger()
    assert doc.page().nodes["t"].collapsed
    menu = view.context_menu(view.node_item("t").sceneBoundingRect().center())
    entry = next(a for a in menu.actions() if a.text().startswith("Expand"))
    entry.trigger()
    assert not doc.page().nodes["t"].collapsed


def test_collapse_all_and_expand_all_act_on_the_selection_or_the_page(qtbot, settings_path):
    doc = Document(load_project(SAMPLE), None)
    window = make_window(qtbot, settings_path, doc)
    view, nodes = window.view, doc.page().nodes
    steps = doc.undo_stack.count()
    view.select_nodes([])
    window.actions["collapse_all"].trigger()
    assert all(n.collapsed for n in nodes.values()) and doc.undo_stack.count() == steps + 1
    assert all(view.node_item(nid).collapsed for nid in nodes)
    view.select_nodes(["x"])
    window.actions["expand_all"].trigger()
    assert [nid for nid, n in nodes.items() if not n.collapsed] == ["x"]
    view.select_nodes([])
    window.actions["expand_all"].trigger()
    assert not any(n.collapsed for n in nodes.values())
    window.actions["expand_all"].trigger()           # nothing to do: no undo step
    assert doc.undo_stack.count() == steps + 3


def test_a_collapsed_sample_still_shows_its_gradient_colours(qtbot, settings_path, tmp_path):
    doc = Document(load_project(SAMPLE), None)
    window = make_window(qtbot, settings_path, doc, size=(1200, 700))
    view = window.view
    window.actions["collapse_all"].trigger()
    backward(window)
    assert any(e.grad_pen is not None for e in view.diagram_scene().edge_items.values())
    view.fit_to_view()
    QApplication.processEvents()
    for edge, item in view.diagram_scene().edge_items.items():
        a, b = item.path().pointAtPercent(0), item.path().pointAtPercent(1)
        assert a == view.node_item(edge.src).port_scene_pos(edge.src_port)
        assert b == view.node_item(edge.dst).port_scene_pos(edge.dst_port)
    window.resize(1700, 760)             # a wide canvas, grabbed alone (the docks left out)
    QApplication.processEvents()
    view._set_scale(0.7)
    view.centerOn(view.diagram_scene().items_rect().center())
    QApplication.processEvents()
    image = view.viewport().grab().toImage()
    assert image.save(str(tmp_path / "collapsed.png"))
    if os.environ.get("BLOCKFLOW_UPDATE_SCREENSHOT"):
        image.save(str(ROOT / "docs" / "collapsed.png"))
