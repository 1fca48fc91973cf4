"""An opened instance is drawn from its host page's program, as a page is: the types, problems and
values of the blocks inside ``d1`` are those of ``main/d1/...`` (not the definition compiled alone,
whose required parameters have no value); closed instances show typed ports, on the canvas and in
``blockflow render``; a page's colour scale is over the wires drawn there; a closed loss instance
shows its value. Pictures: BLOCKFLOW_PICTURES=folder keeps them."""
from __future__ import annotations

import os

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QApplication, QMessageBox

from blockflow.gui.canvas.tooltips import tooltip_at
from blockflow.gui.document.location import Location

from composite_kit import laid_out as laid_out_kit
from composite_window import make_window, node_point

@pytest.fixture(autouse=True)
def no_dialogs(monkeypatch, qapp):
    qapp.setFont(QFont("DejaVu Sans", 9))
    monkeypatch.setattr(QMessageBox, "question", staticmethod(lambda *a, **k: QMessageBox.Discard))


def laid_out():
    return laid_out_kit(share=False)


def double_click(qtbot, view, node: str) -> None:
    qtbot.mouseDClick(view.viewport(), Qt.LeftButton, Qt.NoModifier, node_point(view, node))
    QApplication.processEvents()


def port_tip(view, node: str, port: str) -> str:
    item = view.node_item(node)
    return tooltip_at(view, item.port_scene_pos(port))


def classes(item):
    return {p.name: p.cls for p in item.data.inputs + item.data.outputs}


def keep_picture(window, name, tmp_path):
    folder = os.environ.get("BLOCKFLOW_PICTURES") or str(tmp_path)
    path = os.path.join(folder, name)
    assert window.grab().save(path)
    return path


def test_an_opened_instance_draws_types_and_problems_from_the_host_page(qtbot, tmp_path):
    window = make_window(qtbot, tmp_path, laid_out())
    doc, view = window.document, window.view
    # the closed instances' ports are typed from the page's program, on the canvas
    assert classes(view.node_item("d1")) == {"x": "float", "y": "float"}
    assert "float32[4,3]" in port_tip(view, "d1", "x")
    # ... and on their labels, as a layer summary gives them: its inside is not drawn
    assert [p.label for p in view.node_item("d1").data.inputs] == ["x float32[4,3]"]
    assert [p.label for p in view.node_item("d1").data.outputs] == ["y float32[4,5]"]
    assert [p.label for p in view.node_item("X").data.outputs] == ["output"]     # a block: its name
    assert "float32[4,5]" in port_tip(view, "d1", "y")
    double_click(qtbot, view, "d1")
    assert doc.location == Location("@Dense", "main", "d1")
    scene = view.diagram_scene()
    assert scene.level == "d1" and scene.program is doc.ready_program("main")
    # no red: W's shape [features, units] is [3, 5] in d1 (alone, 'units' has no value)
    for nid, item in scene.node_items.items():
        assert item.data.errors == (), (nid, item.data.errors)
    assert "float32[3,5]" in port_tip(view, "W", "ref")
    assert "float32[4,5]" in port_tip(view, "MatMul_1", "product")
    assert all(cls == "float" for cls in classes(view.node_item("MatMul_1")).values())
    assert {e.cls for e in scene.edge_items.values()} == {"float"}
    keep_picture(window, "opened_instance_types.png", tmp_path)
    # another instance of the same definition: the same diagram, d2's types ([5, 2])
    doc.set_location(Location.at(doc.project, "main", "d2"))
    QApplication.processEvents()
    assert scene is view.diagram_scene() and scene.level == "d2"
    assert "float32[5,2]" in port_tip(view, "W", "ref")
    # the definition opened alone is its own compile: 'units' has no default, so W cannot be made
    doc.set_location(Location("@Dense", None))
    qtbot.waitUntil(lambda: view.diagram_scene().program is not None
                    and view.node_item("W").data.errors != (), timeout=3000)
    assert view.diagram_scene().level == ""
    # back in d1 the red goes again, and Esc goes up to the page
    doc.set_location(Location.at(doc.project, "main", "d1"))
    QApplication.processEvents()
    assert view.node_item("W").data.errors == ()
    view.setFocus()
    qtbot.keyClick(view.viewport(), Qt.Key_Escape)
    assert doc.current_page == "main" and view.diagram_scene().level == ""
    assert classes(view.node_item("d2")) == {"x": "float", "y": "float"}


def test_a_problem_of_one_instance_is_drawn_in_it_not_in_the_others(qtbot, tmp_path):
    p = laid_out()
    p.page("main").nodes["d2"].attrs["units"] = 0         # out of range: d2's problem only
    window = make_window(qtbot, tmp_path, p)
    doc, view = window.document, window.view
    qtbot.waitUntil(lambda: view.node_item("d2").data.errors != (), timeout=3000)
    assert view.node_item("d1").data.errors == ()
    double_click(qtbot, view, "d1")
    assert all(item.data.errors == () for item in view.diagram_scene().node_items.values())
    # an edit inside the definition is drawn from the host's new program once it is compiled
    doc.set_attr("MatMul_1", "transpose_a", True)       # [3, 4] @ [3, 5]: fails in d1
    qtbot.waitUntil(lambda: view.node_item("MatMul_1").data.errors != (), timeout=3000)
    assert view.diagram_scene().level == "d1"
    doc.undo_stack.undo()
    qtbot.waitUntil(lambda: view.node_item("MatMul_1").data.errors == (), timeout=3000)


# ------------------------------------------------------------------------------- a loss instance
def with_loss_instance():
    """The MLP whose loss is a closed instance of a one-output composite (y -> Mean -> loss)."""
    from blockflow.composite import Composite, block_name

    p = laid_out()
    comp = Composite("MeanLoss", doc="the mean of x")
    comp.page.add_node("Input", id="x", attrs={"name": "x", "dtype": "float32", "shape": ["b", "k"]})
    comp.page.add_node("Mean", id="mean", position=(200, 0))
    comp.page.add_node("Output", id="loss_out", attrs={"name": "loss"}, position=(400, 0))
    comp.page.connect("x", "output", "mean", "input")
    comp.page.connect("mean", "output", "loss_out", "input")
    p.composites["MeanLoss"] = comp
    page = p.page("main")
    del page.nodes["loss"]
    page.edges = [e for e in page.edges if "loss" not in (e.src, e.dst)]
    page.add_node(block_name("MeanLoss"), id="loss", position=(720, 0))
    page.connect("d2", "y", "loss", "x")
    page.loss = "loss"
    return p


def test_a_closed_loss_instance_shows_its_value_in_the_editor_and_in_render(qtbot, tmp_path):
    from blockflow.gui.canvas.render import _drawn_scene
    from blockflow.gui.common.theme import Style
    from blockflow.registry import default_registry

    p = with_loss_instance()
    window = make_window(qtbot, tmp_path, p)
    with qtbot.waitSignal(window.session.run_finished, timeout=5000) as blocker:
        qtbot.keyClick(window.view, Qt.Key_F5, Qt.ShiftModifier)
    QApplication.processEvents()
    result = blocker.args[0]
    value = float(result.values[("loss/loss_out", "output")])
    item = window.view.node_item("loss")
    assert [p.name for p in item.data.outputs] == ["loss"] and item.data.is_loss
    shown = item.results.summaries["loss"] if item.results is not None else None
    assert shown is not None and shown.kind == "scalar"
    assert float(shown.value_text) == pytest.approx(value, rel=1e-3)
    # render draws the instance with its ports named (no "x ?") and its value
    scene, _, _ = _drawn_scene(p.page("main"), default_registry(), Style(QApplication.instance().palette()),
                               "run", None, p.composites)
    drawn = scene.node_items["loss"]
    assert [q.label for q in drawn.data.inputs] == ["x float32[4,2]"]
    assert [q.label for q in drawn.data.outputs] == ["loss float32[]"]
    assert [q.label for q in scene.node_items["d1"].data.inputs] == ["x float32[4,3]"]
    assert {q.cls for q in scene.node_items["d1"].data.inputs + scene.node_items["d1"].data.outputs} == {"float"}
    shown = drawn.results.summaries["loss"] if drawn.results is not None else None
    assert shown is not None and float(shown.value_text) == pytest.approx(value, rel=1e-3)


# ------------------------------------------------------------------------------- the colour scale
def with_mask_instance():
    """X -> d1 -> d2 -> shift -> loss, where the closed instance ``shift`` adds c x -1e9 (c = 0):
    the wire from the constant c carries a gradient of about 1e10 that reaches nothing learnt, as
    an attention mask's does."""
    from blockflow.composite import Composite, block_name

    p = laid_out()
    comp = Composite("Shift", doc="x + c * -1e9 (c = 0)")
    g = comp.page
    g.add_node("Input", id="x", attrs={"name": "x", "dtype": "float32", "shape": ["b", "k"]})
    g.add_node("Const", id="c", attrs={"value": np.float32(0.0)}, position=(0, 120))
    g.add_node("Const", id="neg", attrs={"value": np.float32(-1e9)}, position=(0, 240))
    g.add_node("Multiply", id="mask", position=(220, 160))
    g.add_node("Add", id="add", position=(440, 0))
    g.add_node("Output", id="y", attrs={"name": "y"}, position=(660, 0))
    g.connect("c", "output", "mask", "x")
    g.connect("neg", "output", "mask", "y")
    g.connect("x", "output", "add", "x")
    g.connect("mask", "z", "add", "y")
    g.connect("add", "z", "y", "input")
    p.composites["Shift"] = comp
    page = p.page("main")
    page.edges = [e for e in page.edges if not (e.src == "d2" and e.dst == "loss")]
    page.add_node(block_name("Shift"), id="shift", position=(720, 0))
    page.nodes["loss"].position = (960, 0)
    page.connect("d2", "y", "shift", "x")
    page.connect("shift", "y", "loss", "input")
    return p


def test_a_huge_gradient_into_a_constant_inside_an_instance_does_not_grey_the_page(qtbot, tmp_path):
    from blockflow.gui.canvas.gradstyle import LEVELS
    from blockflow.present.gradview import norm
    from blockflow.project import Edge

    window = make_window(qtbot, tmp_path, with_mask_instance())
    view, hl = window.view, window.view.gradients
    with qtbot.waitSignal(window.session.run_finished, timeout=5000) as blocker:
        qtbot.keyClick(view, Qt.Key_F5, Qt.ShiftModifier)
    QApplication.processEvents()
    result = blocker.args[0]
    mask = Edge("shift/c", "output", "shift/mask", "x")
    huge = norm(result.edge_grads[mask])
    page_norms = [norm(result.edge_grads[window.session.gradients.wires[e].edge])
                  for e in (Edge("X", "output", "d1/x", "input"), Edge("d1/y", "output", "d2/x", "input"),
                            Edge("d2/y", "output", "shift/x", "input"), Edge("shift/y", "output", "loss", "input"))]
    assert huge > 1e6 * max(page_norms)           # would have put every page wire under the ≈ 0 floor
    assert max(page_norms) <= hl.scale.high < huge / 1e3     # the scale ends at what reaches d1, d2
    # every wire drawn on the page carries a colour of the scale, none is drawn as ≈ 0
    for e in window.document.page().edges:
        style = hl.wire_style(e)
        assert style.state == "flows" and 0 <= style.level < LEVELS, (e, style)
    keep_picture(window, "mask_page.png", tmp_path)
    # opened: the same scale; the constant's wire is drawn at its top and says why
    scale = hl.scale
    double_click(qtbot, view, "shift")
    assert hl.level == "shift" and hl.scale == scale
    inner = Edge("c", "output", "mask", "x")
    assert hl.wire_style(inner).level == LEVELS - 1
    assert any("top of the scale" in line for line in hl.edge_tooltip(inner))
    assert hl.wire_style(Edge("x", "output", "add", "x")).level >= 0



# ------------------------------------------------------------------------------- what cuts
def test_fgsm_legend_names_the_blocks_that_cut_and_not_the_identity_an_int_wire_passes(qtbot, tmp_path):
    from pathlib import Path

    from blockflow.io.project_io import load_project
    from blockflow.project import Edge

    sample = Path(__file__).resolve().parents[2] / "sample_projects" / "fgsm_adversarial_training.bflow.json"
    window = make_window(qtbot, tmp_path, load_project(sample))
    view, hl = window.view, window.view.gradients
    with qtbot.waitSignal(window.session.run_finished, timeout=10000):
        qtbot.keyClick(view, Qt.Key_F5, Qt.ShiftModifier)
    QApplication.processEvents()
    assert hl.wire_style(Edge("x", "output", "mlp", "x")).state == "flows"
    assert hl.wire_style(Edge("x_adv", "output", "mlp_adv", "x")).state == "flows"
    # the dash-dot wire out of x goes to the perturbation, which x_adv's StopGradient cuts
    cut = Edge("x", "output", "perturbed", "x")
    assert hl.wire_style(cut).state == "cut"
    assert "x_adv (StopGradient)" in hl.edge_tooltip(cut)[0]
    # the int32 labels are not "cut by" the Identity they pass: they carry no gradient
    labels = Edge("data", "labels", "labels", "input")
    assert hl.wire_style(labels).state == "cut"
    assert hl.edge_tooltip(labels)[0].startswith("carries int32 values")
    rows = [text for _, text in hl.legend.rows]
    assert "cut by Gradients, Sign, StopGradient; int32 wires carry no gradient" in rows
    assert not any("Identity" in text for text in rows)
    keep_picture(window, "fgsm_legend.png", tmp_path)


def test_gradient_paths_follow_an_edit_made_inside_an_opened_instance(qtbot, tmp_path):
    from blockflow.project import Edge

    window = make_window(qtbot, tmp_path, laid_out())
    doc, view, hl = window.document, window.view, window.view.gradients
    window.actions["gradient_paths"].trigger()          # View > Gradient Paths
    qtbot.waitUntil(lambda: hl.current is not None, timeout=5000)   # the page's program is compiled off the UI thread
    double_click(qtbot, view, "d1")
    assert hl.mode == "paths" and hl.wire_style(Edge("W", "ref", "MatMul_1", "b")).state == "flows"
    before = window.session.gradients
    shown = []
    window.session.gradients_changed.connect(lambda *_: shown.append(window.session.gradients))
    doc.set_attr("W", "seed", 7)                          # the definition computes otherwise
    qtbot.waitUntil(lambda: window.session.gradients is not None
                    and window.session.gradients is not before, timeout=3000)
    # recomputed on the host page's new program (never on the definition alone, which has no
    # 'loss': the paths would have gone), still drawn at d1
    assert None not in shown
    assert window.session.gradients.program.page_name == "main"
    assert window.session.gradients.program is doc.ready_program("main")
    QApplication.processEvents()
    assert hl.mode == "paths" and hl.level == "d1"
    assert hl.wire_style(Edge("W", "ref", "MatMul_1", "b")).state == "flows"


def test_renaming_the_host_page_keeps_an_opened_instance_drawn_from_it(qtbot, tmp_path):
    window = make_window(qtbot, tmp_path, laid_out())
    doc, view = window.document, window.view
    double_click(qtbot, view, "d1")
    doc.rename_page("main", "net")
    QApplication.processEvents()
    assert doc.location.host == "net" and view.diagram_scene().program_page == "net"
    doc.set_attr("MatMul_1", "transpose_a", True)       # [3, 4] @ [3, 5]: fails in d1
    qtbot.waitUntil(lambda: view.node_item("MatMul_1").data.errors != (), timeout=3000)
    assert view.diagram_scene().program is doc.ready_program("net")
