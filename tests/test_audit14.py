"""Defects found by the issue-14 audit (composites), each test named after its defect."""
from __future__ import annotations

from blockflow.compile.compiler import compile_project
from composite_kit import mlp_project


def _errors(program):
    return [d.message for d in program.diagnostics if d.severity == "error"]


def test_defect_int_parameter_beyond_float_range_crashed_compile():
    # units = 10**400 (a file may hold any integer) raised OverflowError out of the int check
    # and again out of the tensor-size message: an internal error instead of a diagnostic. An int
    # parameter is now held to int64 (attrs24), so the parameter itself is refused.
    project = mlp_project()
    project.pages[0].nodes["d1"].attrs["units"] = 10 ** 400
    errors = _errors(compile_project(project, "main"))
    assert errors and any("parameter 'units': must be at most 9223372036854775807" in e and "10^400" in e
                          for e in errors), errors
    project.pages[0].nodes["d1"].attrs["units"] = 10 ** 12     # an int64, but no tensor that wide
    errors = _errors(compile_project(project, "main"))
    assert errors and any("the limit for one tensor is" in e for e in errors), errors


def test_defect_sharing_with_other_parameters_silently_used_the_other_shape():
    # d1b (units 7) sharing d1's Variables (units 5) compiled "ok" and computed 5 wide.
    project = mlp_project(share=True)
    page = project.pages[0]
    page.nodes["d1b"].attrs["units"] = 7
    program = compile_project(project, "main")
    errors = [d for d in program.diagnostics if d.severity == "error"]
    assert any(d.node == "d1b" and "cannot share Variables with 'd1'" in d.message
               and "7" in d.message for d in errors), errors
    page.nodes["d1b"].attrs["units"] = 5
    assert not _errors(compile_project(project, "main"))


def test_defect_grouping_a_definitions_input_took_the_port_from_every_instance():
    # Inside Dense (opened at d1), grouping its Input x with MatMul_1 moved x into the new
    # composite: Dense lost its port, and every instance failed ("has no input port 'x'").
    from blockflow.compile.grouping import plan_group
    from blockflow.errors import ProjectError
    import pytest
    project = mlp_project()
    program = compile_project(project, "main")
    with pytest.raises(ProjectError, match="x is a port of Dense .*leave it out of the group"):
        plan_group(project, "@Dense", ["x", "MatMul_1"], "Inner", program, "d1")
    with pytest.raises(ProjectError, match="y is a port of Dense"):
        plan_group(project, "@Dense", ["Relu_1", "y"], "Inner", program, "d1")


def test_defect_grouping_inside_a_definition_fixed_the_sizes_of_the_instance_it_was_opened_at():
    # Dense is used as d1 (3 -> 5) and d2 (5 -> 2). Opened at d1, grouping MatMul_1 and
    # BiasAdd_1 declared the new composite's Inputs [4, 3], [3, 5], [5]: d2 then failed
    # ("input 'b' is declared with shape [3, 5] but is given [5,2]").
    from blockflow.compile.grouping import plan_group, restructure
    project = mlp_project()
    program = compile_project(project, "main")
    restructure(project, plan_group(project, "@Dense", ["MatMul_1", "BiasAdd_1"], "Affine", program, "d1"))
    shapes = {n.attrs["name"]: n.attrs.get("shape") for n in project.composites["Affine"].page.nodes.values()
              if n.block == "Input"}
    assert shapes == {"a": [-1, -1], "b": [-1, -1], "bias": [-1]}
    after = compile_project(project, "main")
    assert after.ok, [str(d) for d in after.errors]


def test_defect_an_instance_sharing_with_itself_was_said_to_share_in_a_circle():
    project = mlp_project()
    project.pages[0].nodes["d1"].attrs["share_variables_with"] = "d1"
    errors = _errors(compile_project(project, "main"))
    assert "cannot share Variables with 'd1': an instance cannot share its own Variables" in errors, errors
