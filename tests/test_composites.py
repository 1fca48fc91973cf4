"""Composite blocks in the core: the model, flattening, and compiling and running through them."""
from __future__ import annotations

import numpy as np
import pytest

from blockflow.compile.compiler import compile_project
from blockflow.composite import (Composite, block_name, cycle_through, insert_composite, remove_composite,
                                 rename_composite, replace_composite)
from blockflow.errors import ProjectError
from blockflow.project import Edge, Project
from blockflow.run.runtime import run
from blockflow.spec import Attr

from composite_kit import dense, mlp_project

X = np.random.default_rng(0).normal(size=(4, 3)).astype("float32")


def _errors(program):
    return [str(d) for d in program.errors]


def test_a_dense_mlp_runs_as_numpy_does_forward_and_backward():
    program = compile_project(mlp_project())
    assert program.ok, _errors(program)
    r = run(program, {"X": X}, target="loss")
    W1, b1 = r.values[("d1/W", "ref")], r.values[("d1/b", "ref")]
    W2, b2 = r.values[("d2/W", "ref")], r.values[("d2/b", "ref")]
    h = np.maximum(X @ W1 + b1, 0)
    y = h @ W2 + b2
    np.testing.assert_allclose(r.values[("loss", "output")], y.sum(), rtol=1e-5)
    g_y = np.ones_like(y)
    g_h = (g_y @ W2.T) * (h > 0)
    np.testing.assert_allclose(r.variable_grads["d2/W"], h.T @ g_y, rtol=1e-5)
    np.testing.assert_allclose(r.variable_grads["d1/W"], X.T @ g_h, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(r.variable_grads["d1/b"], g_h.sum(0), rtol=1e-5, atol=1e-6)


def test_each_instance_has_its_own_variables_and_keeps_their_state_in_its_node():
    project = mlp_project()
    page = project.page()
    program = compile_project(project)
    r = run(program, {"X": X}, target="loss")
    assert r.values[("d1/W", "ref")].shape == (3, 5) and r.values[("d2/W", "ref")].shape == (5, 2)
    page.apply_state({"d1/W": {"value": np.ones((3, 5), "float32")}})
    assert set(page.nodes["d1"].state) == {"W:value"}
    again = run(compile_project(project), {"X": X})
    np.testing.assert_array_equal(again.values[("d1/W", "ref")], np.ones((3, 5), "float32"))


def test_two_instances_of_one_composite_draw_different_initial_weights():
    project = mlp_project()
    page = project.page()
    page.add_node(block_name("Dense"), id="d3", attrs={"units": 5})
    page.connect("X", "output", "d3", "x")
    r = run(compile_project(project), {"X": X})
    assert not np.array_equal(r.values[("d1/W", "ref")], r.values[("d3/W", "ref")])
    r2 = run(compile_project(project), {"X": X})
    np.testing.assert_array_equal(r.values[("d1/W", "ref")], r2.values[("d1/W", "ref")])


def test_an_instance_can_share_another_instances_variables():
    project = mlp_project(share=True)
    program = compile_project(project)
    assert program.ok, _errors(program)
    assert program.step("d1b/W") is None and program.hierarchy.shared["d1b/W"] == "d1/W"
    page = project.page()
    page.add_node("Sum", id="total")
    page.connect("both", "sum", "total", "input")
    r = run(compile_project(project), {"X": X}, target="total")
    # both copies read d1's weights, so their outputs are equal and d1/W's gradient is twice one copy's
    np.testing.assert_array_equal(r.values[("d1b/y", "output")], r.values[("d1/y", "output")])
    W1, b1 = r.values[("d1/W", "ref")], r.values[("d1/b", "ref")]
    mask = (X @ W1 + b1) > 0
    np.testing.assert_allclose(r.variable_grads["d1/W"], 2 * X.T @ mask.astype("float32"), rtol=1e-5)


def test_sharing_with_a_different_composite_or_nobody_is_refused_by_name():
    project = mlp_project(share=True)
    project.page().nodes["d1b"].attrs["share_variables_with"] = "nobody"
    assert any("d1b" in e and "no instance 'nobody'" in e for e in _errors(compile_project(project)))


def test_a_composite_that_contains_itself_is_refused_with_the_cycle_named():
    project = mlp_project()
    a, b = Composite("A"), Composite("B")
    a.page.add_node(block_name("B"), id="inner")
    b.page.add_node(block_name("A"), id="inner")
    project.composites.update(A=a, B=b)
    assert cycle_through(project.composites, "A") == ["A", "B", "A"]
    project.page().add_node(block_name("A"), id="a1")
    errors = _errors(compile_project(project))
    assert any("main/a1/inner/inner" in e and "contains itself: A > B > A" in e for e in errors), errors
    with pytest.raises(ProjectError, match="contain itself"):
        c = Composite("C")
        c.page.add_node(block_name("C"), id="me")
        insert_composite(project, c)
    assert "C" not in project.composites


def test_instances_nest_four_levels_and_diagnostics_name_the_full_path():
    project = mlp_project()
    inner = "Dense"
    for level in range(4):
        comp = Composite(f"L{level}", params=[Attr("units", "int", 3)])
        p = comp.page
        p.add_node("Input", id="x", attrs={"name": "x", "shape": ["batch", "f"]})
        p.add_node(block_name(inner), id="inner", attrs={"units": {"$param": "units"}})
        p.add_node("Output", id="y", attrs={"name": "y"})
        p.connect("x", "output", "inner", "x")
        p.connect("inner", "y", "y", "input")
        project.composites[comp.name] = comp
        inner = comp.name
    page = project.page()
    page.add_node(block_name("L3"), id="deep", attrs={"units": 7})
    page.connect("X", "output", "deep", "x")
    program = compile_project(project)
    assert program.ok, _errors(program)
    assert program.port_type("deep", "y").shape == (4, 7)
    assert program.step("deep/inner/inner/inner/inner/W") is not None
    project.composites["Dense"].page.nodes["MatMul_1"].attrs["transpose_a"] = "yes"
    errors = _errors(compile_project(project))
    assert any(e.startswith("error: main/deep/inner/inner/inner/inner/MatMul_1") for e in errors), errors


def test_ports_check_their_declared_shapes_and_bind_named_dimensions():
    project = mlp_project()
    project.composites["Dense"].page.nodes["x"].attrs["shape"] = ["batch", 5]
    errors = _errors(compile_project(project))
    assert any("main/d1/x" in e and "declared with shape [batch, 5]" in e for e in errors), errors


def test_bad_parameters_are_refused_on_the_instance():
    project = mlp_project()
    page = project.page()
    page.nodes["d1"].attrs = {"units": 0}
    page.nodes["d2"].attrs = {"units": 2, "colour": "red"}
    errors = _errors(compile_project(project))
    assert any("main/d1" in e and "parameter 'units'" in e for e in errors), errors
    assert any("main/d2" in e and "no parameter 'colour'" in e for e in errors), errors
    page.nodes["d1"].attrs = {}
    assert any("main/d1" in e and "'units' of composite 'Dense' needs a value" in e
               for e in _errors(compile_project(project)))


def test_wires_to_ports_a_composite_lacks_are_refused_naming_the_ports():
    project = mlp_project()
    page = project.page()
    page.edges.remove(Edge("X", "output", "d1", "x"))
    page.connect("X", "output", "d1", "z")
    errors = _errors(compile_project(project))
    assert any("main/d1 port 'z'" in e and "has no input port 'z' (inputs: x)" in e for e in errors), errors


def test_the_program_answers_in_the_ids_of_the_drawn_page():
    project = mlp_project()
    program = compile_project(project)
    assert program.port_type("d2", "y").shape == (4, 2)
    assert program.wire_type(Edge("d1", "y", "d2", "x")).shape == (4, 5)
    assert program.flat_wire("", Edge("d1", "y", "d2", "x")) == Edge("d1/y", "output", "d2/x", "input")
    assert program.flat_wire("d1", Edge("MatMul_1", "product", "BiasAdd_1", "value")) == \
        Edge("d1/MatMul_1", "product", "d1/BiasAdd_1", "value")
    assert program.output_ports("d1") == ["y"]
    assert program.target_text("d2:y") == "d2/y:output"
    assert program.instance("d1").inputs == {"x": "d1/x"}


def test_a_definition_compiles_on_its_own_with_its_parameters_defaults():
    project = mlp_project()
    comp = project.composites["Dense"]
    comp.params[0] = Attr("units", "int", 4, min=1)
    comp.page.nodes["x"].attrs["shape"] = [-1, 3]
    comp.page.nodes["W"].attrs["shape"] = [3, {"$param": "units"}]
    program = compile_project(project, "@Dense")
    assert program.ok, _errors(program)
    assert program.port_type("Relu_1", "activations").shape == (None, 4)


def test_composite_mutators_do_one_edit_and_undo_exactly():
    project = mlp_project()
    before = project.composites["Dense"].copy()
    change = rename_composite(project, "Dense", "Layer")
    assert change.page_renamed == ("@Dense", "@Layer")
    assert {n.block for n in project.page().nodes.values() if n.block.startswith("@")} == {"@Layer"}
    assert project.page("@Layer").name == "@Layer"
    rename_composite(project, "Layer", "Dense")
    with pytest.raises(ProjectError, match="used by main/d1"):
        remove_composite(project, "Dense")
    new = dense(activation=False)
    change = replace_composite(project, new)
    assert project.composites["Dense"] is new
    replace_composite(project, change.before)
    assert project.composites["Dense"] == before
    extra = dense("Extra")
    insert_composite(project, extra)
    change = remove_composite(project, "Extra")
    assert "Extra" not in project.composites
    insert_composite(project, change.before)
    with pytest.raises(ProjectError, match="already a composite"):
        insert_composite(project, dense("Extra"))


def test_page_names_may_not_take_a_definitions_name():
    with pytest.raises(ProjectError, match="start with '@'"):
        Project().add_page("@Dense")


def test_a_composite_bomb_is_refused_before_it_is_expanded(monkeypatch):
    from call_counts import Calls

    from blockflow.compile import flatten
    project = Project()
    page = project.add_page("main")
    previous = None
    for level in range(40):       # each level uses the one below twice: 2**40 blocks
        comp = Composite(f"B{level}")
        for k in range(2):
            comp.page.add_node(block_name(previous) if previous else "Const", id=f"n{k}")
        project.composites[comp.name] = comp
        previous = comp.name
    page.add_node(block_name(previous), id="bomb")
    # Counted, not timed: each level's diagram is read once (two block names), nothing expanded;
    # reading a level once per instance of it reads 2**40 names (stopped at 10,000).
    read = Calls(monkeypatch, flatten, "composite_name", most=10_000)
    expanded = Calls(monkeypatch, flatten._Flattener, "expand_instance", most=0)
    program = compile_project(project)
    assert read.n <= 2 * 40 + 4 and expanded.n == 0, (read, expanded)
    assert any("would flatten to" in str(d) and "the limit is 500,000" in str(d) for d in program.errors)


def test_outputs_check_their_declared_shapes_against_the_bound_dimensions():
    project = mlp_project()
    out = project.composites["Dense"].page.nodes["y"]
    out.attrs.update(dtype="float32", shape=["batch", {"$param": "units"}])
    assert compile_project(project).ok
    out.attrs["shape"] = ["features", {"$param": "units"}]     # features is 3 for d1, batch is 4
    errors = _errors(compile_project(project))
    assert any("main/d1/y" in e and "dimension 'features' is 4 here but 3 at 'x'" in e for e in errors), errors
    out.attrs.update(shape=None, dtype="int32")
    assert any("main/d1/y" in e and "output 'y' is declared int32 but is given float32" in e
               for e in _errors(compile_project(project)))


def test_sharing_nests_every_copy_reads_the_one_owner():
    project = mlp_project()
    twice = Composite("Twice")
    p = twice.page
    p.add_node("Input", id="x", attrs={"name": "x", "shape": ["batch", "f"]})
    p.add_node(block_name("Dense"), id="a", attrs={"units": 3})
    p.add_node(block_name("Dense"), id="b", attrs={"units": 3, "share_variables_with": "a"})
    p.add_node("Output", id="y", attrs={"name": "y"})
    p.connect("x", "output", "a", "x")
    p.connect("a", "y", "b", "x")
    p.connect("b", "y", "y", "input")
    project.composites["Twice"] = twice
    page = project.page()
    for tid, attrs in (("t1", {}), ("t2", {"share_variables_with": "t1"})):
        page.add_node(block_name("Twice"), id=tid, attrs=attrs)
    page.connect("X", "output", "t1", "x")
    page.connect("t1", "y", "t2", "x")
    program = compile_project(project)
    assert program.ok, _errors(program)
    assert {k: v for k, v in program.hierarchy.shared.items() if k.startswith("t")} == {
        "t1/b/W": "t1/a/W", "t1/b/b": "t1/a/b", "t2/a/W": "t1/a/W", "t2/a/b": "t1/a/b",
        "t2/b/W": "t1/a/W", "t2/b/b": "t1/a/b"}
    assert program.wire_type(Edge("t1", "y", "t2", "x")).shape == (4, 3)


def test_a_dimension_left_unknown_by_a_problem_upstream_says_so():
    project = mlp_project()
    project.page().nodes["X"].attrs["shape"] = [4, 3, 2]      # d1's x declares [batch, features]
    errors = _errors(compile_project(project))
    assert any("main/d1/x" in e and "declared with shape" in e for e in errors), errors
    assert any("main/d1/W" in e and "its input 'x' has no type" in e for e in errors), errors
    assert not any("no input of" in e for e in errors), errors


def test_sharing_names_an_instance_beside_it_not_a_path_into_another():
    project = mlp_project(share=True)
    project.page().nodes["d1b"].attrs["share_variables_with"] = "d1/inner"
    assert any("main/d1b" in e and "another instance beside it, got 'd1/inner'" in e
               for e in _errors(compile_project(project)))
