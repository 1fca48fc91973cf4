"""Group and ungroup (compile/grouping.py): the diagram computes exactly the same after each, and
restructure's ``before`` puts the project back exactly."""
from __future__ import annotations

import copy

import numpy as np
import pytest

from blockflow.compile.compiler import compile_project
from blockflow.compile.grouping import plan_group, plan_ungroup, restructure, suggest_name
from blockflow.composite import block_name
from blockflow.errors import ProjectError
from blockflow.project import Edge, Project
from blockflow.registry import default_registry
from blockflow.run.runtime import run

from composite_kit import dense, mlp_project

X = np.arange(12, dtype="float32").reshape(4, 3) / 10.0
REG = default_registry()


def raw_mlp() -> Project:
    """X [4, 3] -> MatMul W [3, 5] -> BiasAdd b -> Relu -> Sum (the loss), drawn from raw ops."""
    project = Project()
    p = project.add_page("main")
    p.add_node("Placeholder", id="X", attrs={"dtype": "float32", "shape": [4, 3]})
    p.add_node("Variable", id="W", attrs={"shape": [3, 5], "initializer": "glorot_uniform", "seed": 3})
    p.add_node("Variable", id="b", attrs={"shape": [5], "initializer": "glorot_uniform"})
    p.add_node("MatMul", id="mm")
    p.add_node("BiasAdd", id="ba")
    p.add_node("Relu", id="act")
    p.add_node("Sum", id="loss")
    p.connect("X", "output", "mm", "a")
    p.connect("W", "ref", "mm", "b")
    p.connect("mm", "product", "ba", "value")
    p.connect("b", "ref", "ba", "bias")
    p.connect("ba", "output", "act", "features")
    p.connect("act", "activations", "loss", "input")
    p.loss = "loss"
    p.metrics = ["act"]
    return project


def outcome(project, page="main"):
    program = compile_project(project, page)
    assert program.ok, [str(d) for d in program.errors]
    r = run(program, {"X": X}, target="loss")
    return r.values[("loss", "output")], sorted(np.ravel(g).sum() for g in r.variable_grads.values()), r


def grouped(project, ids, name="Group_1"):
    program = compile_project(project)
    plan = plan_group(project, "main", ids, name, program, registry=REG)
    return restructure(project, plan), plan


def test_group_makes_ports_from_the_crossing_wires_and_computes_the_same():
    project = raw_mlp()
    loss0, grads0, _ = outcome(project)
    change, plan = grouped(project, ["W", "b", "mm", "ba", "act"])
    comp = project.composites["Group_1"]
    ins = {n.attrs["name"]: n.attrs for n in comp.page.nodes.values() if n.block == "Input"}
    outs = {n.attrs["name"] for n in comp.page.nodes.values() if n.block == "Output"}
    assert ins == {"a": {"name": "a", "dtype": "float32", "shape": [4, 3]}}
    assert outs == {"activations"}
    page = project.page("main")
    assert list(page.nodes) == ["X", "group_1", "loss"]
    assert page.nodes["group_1"].block == block_name("Group_1")
    assert set(page.edges) == {Edge("X", "output", "group_1", "a"), Edge("group_1", "activations", "loss", "input")}
    assert page.metrics == ["group_1:activations"]
    loss1, grads1, _ = outcome(project)
    np.testing.assert_allclose(loss1, loss0, rtol=1e-6)
    np.testing.assert_allclose(grads1, grads0, rtol=1e-5)
    assert change.pages_added == ("@Group_1",) and "group_1" in change.nodes_added


def test_group_moves_stored_values_into_the_instance_state_and_undo_restores_exactly():
    project = raw_mlp()
    project.page("main").nodes["W"].state = {"value": np.full((3, 5), 0.25, "float32")}
    original = copy.deepcopy(project)
    loss0, grads0, _ = outcome(project)
    change, _ = grouped(project, ["W", "mm"])
    assert set(project.page("main").nodes["group_1"].state) == {"W:value"}
    loss1, grads1, r = outcome(project)
    np.testing.assert_array_equal(r.values[("group_1/W", "ref")], np.full((3, 5), 0.25, "float32"))
    np.testing.assert_allclose(loss1, loss0, rtol=1e-6)
    np.testing.assert_allclose(grads1, grads0, rtol=1e-5)
    back = restructure(project, change.before)
    assert project == original
    assert back.pages_removed == ("@Group_1",)


def test_one_input_per_distinct_source_and_names_deduplicated():
    project = Project()
    p = project.add_page("main")
    p.add_node("Placeholder", id="X", attrs={"dtype": "float32", "shape": [2, 2]})
    p.add_node("Placeholder", id="Y", attrs={"dtype": "float32", "shape": [2, 2]})
    p.add_node("Add", id="s1")
    p.add_node("Multiply", id="s2")
    p.connect("X", "output", "s1", "x")
    p.connect("X", "output", "s2", "x")
    p.connect("Y", "output", "s1", "y")
    p.connect("s1", "z", "s2", "y")
    restructure(project, plan_group(project, "main", ["s1", "s2"], "G", compile_project(project)))
    names = [n.attrs["name"] for n in project.composites["G"].page.nodes.values() if n.block == "Input"]
    assert names == ["x", "y"]
    assert compile_project(project).ok


def test_ungroup_inlines_an_instance_and_computes_the_same():
    project = mlp_project()
    loss0, grads0, r0 = outcome(project)
    program = compile_project(project)
    plan = plan_ungroup(project, "main", "d1", program, registry=REG)
    change = restructure(project, plan)
    page = project.page("main")
    assert "d1" not in page.nodes and {"x", "y"}.isdisjoint(page.nodes)
    assert page.nodes["W"].attrs["shape"] == [3, 5]
    assert Edge("X", "output", "MatMul_1", "a") in page.edges
    assert Edge("Relu_1", "activations", "d2", "x") in page.edges
    loss1, grads1, r1 = outcome(project)
    np.testing.assert_array_equal(r1.values[("W", "ref")], r0.values[("d1/W", "ref")])
    np.testing.assert_allclose(loss1, loss0, rtol=1e-6)
    np.testing.assert_allclose(grads1, grads0, rtol=1e-5)
    restructure(project, change.before)
    assert project == mlp_project()


def test_ungroup_then_group_again_keeps_ids_free_and_state():
    project = mlp_project()
    project.page("main").nodes["d1"].state = {"W:value": np.ones((3, 5), "float32")}
    loss0, _, _ = outcome(project)
    restructure(project, plan_ungroup(project, "main", "d1", compile_project(project), registry=REG))
    assert np.array_equal(project.page("main").nodes["W"].state["value"], np.ones((3, 5), "float32"))
    # a second ungroup finds W taken: its blocks get suffixed ids
    restructure(project, plan_ungroup(project, "main", "d2", compile_project(project), registry=REG))
    assert {"W", "W_2", "b", "b_2"} <= set(project.page("main").nodes)
    loss1, _, _ = outcome(project)
    np.testing.assert_allclose(loss1, loss0, rtol=1e-6)


def test_a_selection_a_block_outside_reads_and_feeds_is_refused():
    """mm and act selected, ba (between them) not: the instance would feed ba and read it back,
    a cycle. Refused naming ba, before anything changes; mm, ba and act together are fine, as is
    a selection whose outside readers lead elsewhere (mm and ba: act reads them, feeds the loss)."""
    project = raw_mlp()
    before = copy.deepcopy(project)
    with pytest.raises(ProjectError, match="ba lies between selected blocks: the group would feed itself"):
        plan_group(project, "main", ["mm", "act"], "G")
    assert project == before
    # a longer way round: mm -> ba -> (outside) -> act, with a second outside block on the way
    p = project.page("main")
    p.add_node("Identity", id="via")
    p.edges = [e for e in p.edges if not (e.src == "ba" and e.dst == "act")]
    p.connect("ba", "output", "via", "input")
    p.connect("via", "output", "act", "features")
    with pytest.raises(ProjectError, match="via lies between selected blocks"):
        plan_group(project, "main", ["mm", "act"], "G")
    with pytest.raises(ProjectError, match="via lies between selected blocks"):
        plan_group(project, "main", ["mm", "ba", "act"], "G")
    for ids in (["mm", "ba", "via", "act"], ["mm", "ba"], ["act", "loss"]):
        plan_group(project, "main", ids, "G")


def test_refusals_name_what_and_why():
    project = mlp_project(share=True)
    with pytest.raises(ProjectError, match="d1b uses the Variables of d1"):
        plan_group(project, "main", ["d1b"], "G")
    with pytest.raises(ProjectError, match="d1b uses the Variables of d1"):
        plan_ungroup(project, "main", "d1")
    with pytest.raises(ProjectError, match="clear its share_variables_with"):
        plan_ungroup(project, "main", "d1b")
    with pytest.raises(ProjectError, match="already a composite named 'Dense'"):
        plan_group(project, "main", ["d2"], "Dense")
    with pytest.raises(ProjectError, match="not a composite's instance"):
        plan_ungroup(project, "main", "X")
    project.page("main").feeds["X"] = X
    with pytest.raises(ProjectError, match="X has a saved feed"):
        plan_group(project, "main", ["X"], "G")
    assert suggest_name(project) == "Group_1"


def test_group_inside_a_definition_passes_parameters_through():
    project = mlp_project()
    loss0, _, _ = outcome(project)
    with pytest.raises(ProjectError, match="W uses the dimension 'features'"):
        plan_group(project, "@Dense", ["W", "MatMul_1"], "Lin")
    plan = plan_group(project, "@Dense", ["b", "BiasAdd_1"], "Bias", compile_project(project, "@Dense"))
    restructure(project, plan)
    assert [p.name for p in project.composites["Bias"].params] == ["units"]
    assert project.page("@Dense").nodes["bias"].attrs == {"units": {"$param": "units"}}
    loss1, _, r = outcome(project)
    assert ("d1/bias/b", "ref") in r.values
    np.testing.assert_allclose(loss1, loss0, rtol=1e-6)
