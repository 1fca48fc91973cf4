"""Results and gradients through composite instances, without Qt: present/levels.py (a program's
gradients seen from a drawn level, instance badges, cut detection, grouped names), the CLI's
full paths and instance targets, gradient checks and training through instances."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from blockflow.cli import entry, inputs
from blockflow.compile.compiler import compile_project
from blockflow.present.gradview import CUT, FLOWS, GradientView
from blockflow.present.levels import (LevelGradients, drawn_node, group_label, grouped_names,
                                      instance_badge, instance_variables)
from blockflow.project import Edge
from blockflow.run.gradcheck import check_page
from blockflow.run.runtime import run

from composite_kit import mlp_project

X = np.random.RandomState(0).randn(4, 3).astype(np.float32)


def project(share=False, stop=False):
    """The kit's MLP (X -> d1 -> d2 -> loss, d1b sharing d1's Variables when ``share``), with a
    feed; ``stop``: a StopGradient between X and d1 (nothing reaches d1's input, its W still does)."""
    p = mlp_project(share=share)
    page = p.page("main")
    page.feeds["X"] = X
    if stop:
        page.add_node("StopGradient", id="sg")
        page.edges = [e for e in page.edges if not (e.src == "X" and e.dst == "d1")]
        page.connect("X", "output", "sg", "input")
        page.connect("sg", "output", "d1", "x")
    return p


def backward(p, target="loss"):
    program = compile_project(p, "main")
    assert program.ok, program.diagnostics
    result = run(program, {"X": X}, target=target, record=True, commit=False)
    return program, result, GradientView(program, result=result)


# ------------------------------------------------------------------------------- levels
def test_drawn_node_sees_a_block_inside_a_closed_instance_as_the_instance():
    assert drawn_node("d1/MatMul_1", "") == "d1"
    assert drawn_node("d1/blk/W", "") == "d1"
    assert drawn_node("d1/blk/W", "d1") == "blk"
    assert drawn_node("d1/blk/W", "d1/blk") == "W"
    assert drawn_node("d2/W", "d1") is None
    assert drawn_node("loss", "") == "loss"


def test_the_page_level_colours_boundary_wires_by_the_flat_wires_they_became():
    program, result, gview = backward(project())
    page = mlp_project().page("main")
    lv = LevelGradients(gview, "", page.edges)
    boundary = Edge("d1", "y", "d2", "x")
    info = lv.wires[boundary]
    assert info.edge == Edge("d1/y", "output", "d2/x", "input")
    assert info.state == FLOWS
    # the gradient on the drawn wire is the runtime's gradient of d2's input port
    np.testing.assert_allclose(info.grad, result.grads[("d2/x", "output")])
    assert info.norm == pytest.approx(float(np.linalg.norm(result.grads[("d2/x", "output")])))
    assert set(lv.wires) == set(page.edges)


def test_an_opened_instance_level_has_its_inner_wires_on_the_whole_programs_scale():
    program, result, gview = backward(project())
    inner = mlp_project().composites["Dense"].page.edges
    lv1, lv2 = LevelGradients(gview, "d1", inner), LevelGradients(gview, "d2", inner)
    w = Edge("W", "ref", "MatMul_1", "b")
    assert lv1.wires[w].edge == Edge("d1/W", "ref", "d1/MatMul_1", "b")
    assert lv2.wires[w].edge == Edge("d2/W", "ref", "d2/MatMul_1", "b")
    # two instances of one composite: two weight matrices, two different gradients
    assert lv1.wires[w].norm != pytest.approx(lv2.wires[w].norm)
    np.testing.assert_allclose(lv1.wires[w].grad, result.edge_grads[Edge("d1/W", "ref", "d1/MatMul_1", "b")])
    # the scale is the program's: every level's norms sit inside it
    scale = gview.scale()
    for lv in (lv1, lv2):
        for info in lv.wires.values():
            assert scale.low <= info.norm <= scale.high
    assert lv1.drawn_node("d1/MatMul_1") == "MatMul_1"
    assert lv1.drawn_edges([Edge("d1/W", "ref", "d1/MatMul_1", "b"), Edge("d2/W", "ref", "d2/MatMul_1", "b")]) == [w]


def test_badge_norm_is_the_norm_of_the_instances_variable_gradients():
    program, result, gview = backward(project())
    badge = instance_badge(gview, "d1")
    assert badge.state == FLOWS and set(badge.variables) == {"d1/W", "d1/b"}
    expected = math.sqrt(sum(float(np.sum(np.asarray(result.variable_grads[v], np.float64) ** 2))
                             for v in ("d1/W", "d1/b")))
    assert badge.norm == pytest.approx(expected, rel=1e-6)
    assert badge.text().startswith("‖∇W‖ ")
    assert "d1/W" in badge.tooltip()


def test_a_sharing_instance_says_whose_variables_it_uses_and_they_are_counted_where_they_live():
    p = project(share=True)
    page = p.page("main")
    page.loss = "both_sum"
    page.add_node("Sum", id="both_sum")
    page.connect("both", "sum", "both_sum", "input")
    program, result, gview = backward(p, "both_sum")
    assert instance_variables(program, "d1b") == []          # its own were left out
    shared = instance_badge(gview, "d1b")
    assert shared.shares == "d1" and not shared.cut
    assert shared.text() == "shares d1"
    owner = instance_badge(gview, "d1")
    # d1's badge holds the whole gradient of its W: what flows through d1 and through d1b
    total = math.sqrt(sum(float(np.sum(np.asarray(result.variable_grads[v], np.float64) ** 2))
                          for v in ("d1/W", "d1/b")))
    assert owner.norm == pytest.approx(total, rel=1e-6)
    uses = [e for e in result.edge_grads if e.src == "d1/W"]
    assert {e.dst for e in uses} == {"d1/MatMul_1", "d1b/MatMul_1"}


def test_an_instance_no_gradient_reaches_is_cut_before_and_after_a_run():
    p = project(share=True)            # d1b feeds 'both', which does not lead to the loss
    program = compile_project(p, "main")
    static = GradientView(program, "loss")
    assert instance_badge(static, "d1b").cut
    assert instance_badge(static, "d1b").text() == "shares d1 · cut"
    assert "nothing inside it leads to loss" in instance_badge(static, "d1b").tooltip()
    assert not instance_badge(static, "d1").cut
    assert instance_badge(static, "d1").text() == "∇ flows"
    _, _, ran = backward(p)
    assert instance_badge(ran, "d1b").cut and instance_badge(ran, "d1b").norm is None


def test_a_stop_gradient_in_front_of_an_instance_leaves_its_weights_reached():
    program, result, gview = backward(project(stop=True))
    # the wire into the StopGradient is cut; W inside d1 still receives gradient: not a cut instance
    lv = LevelGradients(gview, "", project(stop=True).page("main").edges)
    assert lv.wires[Edge("X", "output", "sg", "input")].state == CUT
    assert lv.wires[Edge("sg", "output", "d1", "x")].state == FLOWS
    assert not instance_badge(gview, "d1").cut


def test_a_stop_gradient_inside_an_instance_cuts_it_with_the_reason():
    p = project()
    comp = p.composites["Dense"]
    comp.page.edges = [e for e in comp.page.edges if e.dst != "y"]
    comp.page.add_node("StopGradient", id="sg")
    comp.page.connect("Relu_1", "activations", "sg", "input")
    comp.page.connect("sg", "output", "y", "input")
    program = compile_project(p, "main")
    gview = GradientView(program, "loss")
    badge = instance_badge(gview, "d1")
    assert badge.cut and "d1/sg" in badge.reason
    inner = LevelGradients(gview, "d2", comp.page.edges)
    assert inner.wires[Edge("Relu_1", "activations", "sg", "input")].state == CUT


def test_fanouts_at_a_level_are_in_drawn_ids():
    p = project(share=True)
    page = p.page("main")
    page.add_node("Sum", id="s2")
    page.add_node("AddN", id="total")
    page.connect("both", "sum", "s2", "input")
    page.connect("loss", "output", "total", "inputs[0]")
    page.connect("s2", "output", "total", "inputs[1]")
    page.loss = "total"
    program, result, gview = backward(p, "total")
    lv = LevelGradients(gview, "", page.edges)
    fans = {(f.node, f.port): f for f in lv.fanouts()}
    assert ("d1", "y") in fans              # d1's output feeds d2 and 'both'
    assert {e.dst for e, _ in fans[("d1", "y")].contributions} == {"d2", "both"}


def test_grouped_names_put_each_instances_blocks_under_it():
    program = compile_project(project(), "main")
    groups = dict(grouped_names(program))
    assert groups[""] == ["X", "loss"]
    assert "d1/W" in groups["d1"] and "d2/W" in groups["d2"]
    assert group_label(program, "d1") == "d1 (Dense)"
    assert group_label(program, "") == "main (page)"


# ------------------------------------------------------------------------------- training
def test_training_writes_variables_back_into_the_instances_state():
    from blockflow.run.training import TrainConfig, Trainer, training_program

    p = project()
    program = training_program(p, "main")
    trainer = Trainer(program, TrainConfig(steps=5, optimizer="sgd", hyper={"lr": 0.01}))
    trainer.train(5)
    updates = trainer.state_updates()
    assert {"d1/W", "d2/W"} <= set(updates)
    p.page("main").apply_state(updates)
    state = p.page("main").nodes["d1"].state
    np.testing.assert_array_equal(state["W:value"], updates["d1/W"]["value"])
    # compiled again, the instance reads its trained W
    again = compile_project(p, "main")
    np.testing.assert_array_equal(again.variable_values.get("d1/W"), updates["d1/W"]["value"])


def test_check_page_checks_gradients_through_instances():
    p = project()
    r = check_page(p.page("main"), None, {"X": X}, "loss", composites=p.composites)
    assert r.passed, str(r)
    assert {"d1/W", "d2/W", "d1/b"} <= {e.name for e in r.entries}


# ------------------------------------------------------------------------------- CLI
@pytest.fixture
def cli_project(monkeypatch):
    """``blockflow`` commands read the MLP (the project file format with composites is io's)."""
    holder = {"project": project()}
    monkeypatch.setattr(inputs, "load", lambda path: holder["project"])
    return holder


def test_cli_run_prints_full_paths_and_takes_flat_and_instance_targets(cli_project, capsys):
    assert entry.main(["run", "mlp.bflow.json", "--feed", "X=" + json.dumps(X.tolist())]) == 0
    out = capsys.readouterr().out
    assert "main/d1/W:ref" in out and "main/d2/MatMul_1:product" in out
    assert entry.main(["run", "mlp.bflow.json", "--grad", "d1/W", "--grad-seed",
                       json.dumps(np.ones((3, 5)).tolist()), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["target"] == "d1/W:ref"
    program = compile_project(project(), "main")
    seed = json.dumps(np.ones((4, 2)).tolist())
    assert entry.main(["run", "mlp.bflow.json", "--grad", "d2:y", "--grad-seed", seed, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["target"] == "d2/y:output"
    assert "d1/W" in doc["variable_gradients"]
    assert program.instance("d2").outputs == {"y": "d2/y"}


def test_cli_check_compiles_instances_and_checks_gradients_through_them(cli_project, capsys):
    assert entry.main(["check", "mlp.bflow.json"]) == 0
    out = capsys.readouterr().out
    assert "page 'main'" in out and "ok" in out
    assert entry.main(["check", "mlp.bflow.json", "--grad", "loss"]) == 0
    out = capsys.readouterr().out
    assert "d1/W" in out and "passed" in out.lower()


def test_cli_check_names_a_problem_inside_an_instance_by_its_full_path(cli_project, capsys):
    p = project()
    p.composites["Dense"].page.nodes["MatMul_1"].attrs["transpose_a"] = "yes"
    cli_project["project"] = p
    assert entry.main(["check", "mlp.bflow.json"]) != 0
    out = capsys.readouterr().out
    assert "main/d1/MatMul_1" in out and "main/d2/MatMul_1" in out


# ------------------------------------------------------------------------------- CLI on files
def test_cli_train_save_keeps_trained_variables_in_the_instances_after_reload(tmp_path, capsys):
    from blockflow.io.project_io import load_project, save_project

    src, out = tmp_path / "mlp.bflow.json", tmp_path / "trained.bflow.json"
    save_project(project(), src)
    before = compile_project(load_project(src), "main")
    w0 = np.array(before.variable_values.get("d1/W"))
    assert entry.main(["train", str(src), "--steps", "20", "--optimizer", "sgd", "--save", str(out),
                       "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "trained page 'main' for 20 steps" in text
    trained = load_project(out)
    state = trained.page("main").nodes["d1"].state
    assert "W:value" in state and "b:value" in state and "W:value" in trained.page("main").nodes["d2"].state
    assert not np.allclose(state["W:value"], w0)            # it moved
    program = compile_project(trained, "main")
    np.testing.assert_array_equal(program.variable_values.get("d1/W"), state["W:value"])
    # the trained project has a lower loss than the one it came from
    loss0 = float(run(before, {"X": X}).values[("loss", "output")])
    loss1 = float(run(program, {"X": X}).values[("loss", "output")])
    assert loss1 < loss0
    # and it runs from the command line with full paths
    assert entry.main(["run", str(out), "--fetch", "d1/W", "--fetch", "d2:y"]) == 0
    text = capsys.readouterr().out
    assert "main/d1/W:ref" in text and "main/d2/y:output" in text


def test_cli_run_refuses_an_unknown_path_inside_an_instance(tmp_path, capsys):
    from blockflow.io.project_io import save_project

    src = tmp_path / "mlp.bflow.json"
    save_project(project(), src)
    assert entry.main(["run", str(src), "--grad", "d1/nope"]) == 2
    err = capsys.readouterr().err
    assert "d1/nope" in err


# ------------------------------------------------------------------------------- block marks
def test_problems_inside_an_instance_mark_the_closed_instance_and_the_block_at_its_level():
    from blockflow.composite import ProjectBlocks
    from blockflow.present.nodeview import node_data, problems_by_node
    from blockflow.registry import default_registry

    p = project()
    p.composites["Dense"].page.nodes["MatMul_1"].attrs["transpose_a"] = "yes"
    program = compile_project(p, "main")
    top = problems_by_node(program)
    assert any(t.startswith("d1/MatMul_1: ") for t in top["d1"][0])
    assert any(t.startswith("d2/MatMul_1: ") for t in top["d2"][0])
    inside_d2 = problems_by_node(program, "d2")
    assert "MatMul_1" in inside_d2 and not inside_d2["MatMul_1"][0][0].startswith("d2/")
    blocks = ProjectBlocks(default_registry(), p)
    page = p.page("main")
    d1 = node_data(page, "d1", blocks, page.incoming("d1"), [e for e in page.edges if e.src == "d1"], program)
    assert d1.errors == top["d1"][0]
    # types at a level: the definition's wires read as the host program's flat wires
    good = compile_project(project(), "main")
    inner = p.composites["Dense"].page
    w = node_data(inner, "MatMul_1", blocks, inner.incoming("MatMul_1"), [], good, level="d1")
    assert [q.cls for q in w.inputs if q.name in ("a", "b")] == ["float", "float"]
    assert w.errors == ()
