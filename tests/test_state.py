"""State: Assign blocks, TF's optimizer updates (Apply*), slot state, and the Gradients block."""
from __future__ import annotations

import numpy as np
import pytest

from blockflow.compile.compiler import compile_project
from blockflow.errors import NumericsError
from blockflow.io.project_io import dumps_project, loads_project
from blockflow.run.runtime import run, run_backward

from diagrams import chain


def variable(value, dtype="float64"):
    return {"shape": list(np.shape(value)), "dtype": dtype, "initializer": "value",
            "initial_value": np.asarray(value, dtype)}


def two_steps(block, inputs, start=1.0):
    """Run an update block twice on a float64 Variable; return the value after each step."""
    p = chain(("v", "Variable", variable(start), None),
              ("opt", block, {}, {"var": "v:ref", **inputs}))
    program = compile_project(p)
    assert program.ok, [str(d) for d in program.errors]
    after = []
    for step in range(2):
        result = run(program, step=step)
        after.append(float(result.state_updates["v"]["value"]))
        assert float(program.variable_values["v"]) == after[-1]
    return after


# TensorFlow's update formulas worked by hand on scalars (var = 1, a constant gradient of 2).
@pytest.mark.parametrize("block, inputs, expected", [
    ("ApplyGradientDescent", {"alpha": 0.1, "delta": 2.0}, [0.8, 0.6]),
    # accum = 2, var = 1 - 0.2; accum = 0.9 * 2 + 2 = 3.8, var = 0.8 - 0.38
    ("ApplyMomentum", {"lr": 0.1, "grad": 2.0, "momentum": 0.9}, [0.8, 0.42]),
    # Adam moves by lr * sign(g) while g is constant: 1 - 0.1, then - 0.1 again
    ("ApplyAdam", {"lr": 0.1, "beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8, "grad": 2.0}, [0.9, 0.8]),
    # ms = 0.9 * 1 + 0.1 * 4 = 1.3, mom = 0.01 * 2 / sqrt(1.3); ms = 1.57, mom = 0.02 / sqrt(1.57)
    ("ApplyRMSProp", {"lr": 0.01, "rho": 0.9, "momentum": 0.0, "epsilon": 1e-10, "grad": 2.0},
     [0.98245884, 0.96649710]),
    # accum = 0.1 + 4, var = 1 - 0.2 / sqrt(4.1); accum = 8.1, var -= 0.2 / sqrt(8.1)
    ("ApplyAdagrad", {"lr": 0.1, "grad": 2.0}, [0.90122787, 0.83095448]),
    # accum = 0.2, update = sqrt(1e-6) / sqrt(0.200001) * 2 = 0.00447212, accum_update = 1e-6;
    # accum = 0.39, update = sqrt(2e-6) / sqrt(0.390001) * 2 = 0.00452911
    ("ApplyAdadelta", {"lr": 1.0, "rho": 0.95, "epsilon": 1e-6, "grad": 2.0}, [0.99552787, 0.99099876]),
    # accum 0.1 -> 4.1, linear = 2 - (sqrt(4.1) - sqrt(0.1)) / 0.1 * 1 = -15.0861791,
    # quadratic = sqrt(4.1) / 0.1 + 0.02 = 20.2684567, var = (15.0861791 - 0.01) / 20.2684567;
    # accum -> 8.1, linear = -15.0861791 + 2 - (sqrt(8.1) - sqrt(4.1)) / 0.1 * 0.7438247 = -19.1944991,
    # quadratic = 28.4804989, var = (19.1944991 - 0.01) / 28.4804989
    ("ApplyFtrl", {"lr": 0.1, "l1": 0.01, "l2": 0.01, "lr_power": -0.5, "grad": 2.0}, [0.74382472, 0.67360123]),
])
def test_apply_blocks_follow_tensorflow_formulas(block, inputs, expected):
    np.testing.assert_allclose(two_steps(block, inputs), expected, rtol=1e-6)


def test_nesterov_momentum():
    # accum = 2, var = 1 - 0.2 - 0.18 = 0.62; accum = 3.8, var = 0.62 - 0.2 - 0.342 = 0.078
    p = chain(("v", "Variable", variable(1.0), None),
              ("opt", "ApplyMomentum", {"use_nesterov": True},
               {"var": "v:ref", "lr": 0.1, "grad": 2.0, "momentum": 0.9}))
    program = compile_project(p)
    values = [float(run(program).state_updates["v"]["value"]) for _ in range(2)]
    np.testing.assert_allclose(values, [0.62, 0.078], rtol=1e-9)


def test_adam_slots_match_tf_and_live_in_the_variable_and_the_file():
    p = chain(("v", "Variable", variable([1.0, -1.0]), None),
              ("adam", "ApplyAdam", {}, {"var": "v:ref", "lr": 0.1, "beta1": 0.9, "beta2": 0.999,
                                         "epsilon": 1e-8, "grad": [2.0, 4.0]}))
    program = compile_project(p)
    result = run(program)
    state = result.state_updates["v"]
    np.testing.assert_allclose(state["adam.m"], [0.2, 0.4])
    np.testing.assert_allclose(state["adam.v"], [0.004, 0.016])
    assert float(state["adam.beta1_power"]) == pytest.approx(0.81)
    assert float(state["adam.beta2_power"]) == pytest.approx(0.998001)
    # Saved with the Variable, reloaded, and continued: the same as three steps in one go.
    p.pages[0].apply_state(result.state_updates)
    again = compile_project(loads_project(dumps_project(p)))
    two_more = [run(again) for _ in range(2)][-1].state_updates["v"]["value"]
    straight = compile_project(chain(("v", "Variable", variable([1.0, -1.0]), None),
                                     ("adam", "ApplyAdam", {}, {"var": "v:ref", "lr": 0.1, "beta1": 0.9,
                                                                "beta2": 0.999, "epsilon": 1e-8,
                                                                "grad": [2.0, 4.0]})))
    three = [run(straight) for _ in range(3)][-1].state_updates["v"]["value"]
    np.testing.assert_array_equal(two_more, three)


def test_slots_can_be_wired_variables_as_in_tensorflow():
    p = chain(("v", "Variable", variable(1.0), None),
              ("acc", "Variable", variable(0.0), None),
              ("opt", "ApplyMomentum", {}, {"var": "v:ref", "accum": "acc:ref", "lr": 0.1, "grad": 2.0,
                                            "momentum": 0.9}))
    program = compile_project(p)
    result = run(program)
    assert float(result.state_updates["acc"]["value"]) == 2.0
    assert float(program.variable_values["acc"]) == 2.0 and not program.slot_values


def test_assign_reads_see_the_start_of_the_run_and_output_ref_the_new_value():
    p = chain(("v", "Variable", variable([1.0, 2.0]), None),
              ("add", "AssignAdd", {}, {"ref": "v:ref", "value": [10.0, 10.0]}),
              ("old", "Identity", {}, {"input": "v:ref"}),
              ("new", "Identity", {}, {"input": "add:output_ref"}))
    program = compile_project(p)
    result = run(program)
    np.testing.assert_array_equal(result.value("old"), [1.0, 2.0])
    np.testing.assert_array_equal(result.value("new"), [11.0, 12.0])
    np.testing.assert_array_equal(program.variable_values["v"], [11.0, 12.0])
    result = run(program)
    np.testing.assert_array_equal(result.value("old"), [11.0, 12.0])
    for block, expected in (("Assign", [5.0, 5.0]), ("AssignSub", [6.0, 7.0])):
        q = chain(("v", "Variable", variable([11.0, 12.0]), None),
                  ("a", block, {}, {"ref": "v:ref", "value": 5.0}))
        prog = compile_project(q)
        run(prog)
        np.testing.assert_array_equal(prog.variable_values["v"], expected)


def test_a_failed_run_commits_nothing():
    p = chain(("v", "Variable", variable([1.0, -1.0]), None),
              ("log", "Log", {}, {"x": "v:ref"}),
              ("add", "AssignAdd", {}, {"ref": "v:ref", "value": "log"}))
    program = compile_project(p)
    with pytest.raises(NumericsError):
        run(program)
    np.testing.assert_array_equal(program.variable_values["v"], [1.0, -1.0])


def test_ref_inputs_must_come_from_variables():
    p = chain(("c", "Const", {"value": np.ones(2, np.float32)}, None),
              ("a", "Assign", {}, {"ref": "c", "value": 2.0}))
    (d,) = compile_project(p).errors
    assert (d.node, d.port) == ("a", "ref") and "Variable" in d.message
    p = chain(("v", "Variable", variable(1.0), None),
              ("a", "Assign", {}, {"ref": "v:ref", "value": 2.0}),
              ("b", "Assign", {}, {"ref": "v:ref", "value": 3.0}))
    program = compile_project(p)
    assert program.ok and any("later one" in d.message for d in program.diagnostics)
    run(program)
    assert float(program.variable_values["v"]) == 3.0


# ---------------------------------------------------------------------------------- Gradients


def model(extra=()):
    """loss = sum(tanh(x @ W) * c) with x fed and W a Variable, plus extra blocks."""
    return chain(("x", "Placeholder", {"shape": [2, 3], "dtype": "float64"}, None),
                 ("W", "Variable", variable(np.arange(12.0).reshape(3, 4) / 10), None),
                 ("m", "MatMul", {}, {"a": "x", "b": "W:ref"}),
                 ("t", "Tanh", {}, {"x": "m"}),
                 ("c", "Multiply", {}, {"x": "t", "y": [1.0, -2.0, 0.5, 3.0]}),
                 ("loss", "Sum", {}, {"input": "c"}),
                 *extra,
                 feeds={"x": np.array([[0.1, -0.2, 0.3], [0.4, 0.0, -0.5]])})


def test_gradients_block_agrees_with_the_runtime_backward_pass():
    p = model([("g", "Gradients", {}, {"ys[0]": "loss", "xs[0]": "x", "xs[1]": "W:ref", "xs[2]": "t"})])
    program = compile_project(p)
    assert program.ok, [str(d) for d in program.errors]
    inside = run(program)
    outside = run_backward(program, target="loss")
    np.testing.assert_allclose(inside.value("g", "dx[0]"), outside.grad("x"), rtol=1e-12)
    np.testing.assert_allclose(inside.value("g", "dx[1]"), outside.grad("W"), rtol=1e-12)
    np.testing.assert_allclose(inside.value("g", "dx[2]"), outside.grad("t"), rtol=1e-12)
    # The same with the training run's code (values freed as soon as possible).
    lean = run(program, fetch=["g:dx[0]", "g:dx[1]"], record=False)
    np.testing.assert_allclose(lean.value("g", "dx[1]"), outside.grad("W"), rtol=1e-12)


def test_gradients_gives_zero_through_a_stop_gradient_and_honours_grad_ys():
    p = model([("sg", "StopGradient", {}, {"input": "x"}),
               ("e", "Exp", {}, {"x": "sg"}),
               ("s2", "Sum", {}, {"input": "e"}),
               ("g", "Gradients", {}, {"ys[0]": "s2", "xs[0]": "x", "xs[1]": "W:ref"}),
               ("g2", "Gradients", {}, {"ys[0]": "loss", "ys[1]": "s2", "xs[0]": "x",
                                        "grad_ys[0]": 2.0, "grad_ys[1]": 1.0})])
    program = compile_project(p)
    assert program.ok, [str(d) for d in program.errors]
    r = run(program)
    np.testing.assert_array_equal(r.value("g", "dx[0]"), np.zeros((2, 3)))
    np.testing.assert_array_equal(r.value("g", "dx[1]"), np.zeros((3, 4)))
    np.testing.assert_allclose(r.value("g2", "dx[0]"), 2 * run_backward(program, target="loss").grad("x"))


def test_fgsm_drawn_as_tensorflow_writes_it():
    """x_adv = StopGradient(x + eps * Sign(Gradients(loss, x))) raises the loss."""
    p = model([("g", "Gradients", {}, {"ys[0]": "loss", "xs[0]": "x"}),
               ("sign", "Sign", {}, {"x": "g:dx[0]"}),
               ("step", "Multiply", {}, {"x": "sign", "y": 0.05}),
               ("xa", "Add", {}, {"x": "x", "y": "step"}),
               ("x_adv", "StopGradient", {}, {"input": "xa"}),
               ("m2", "MatMul", {}, {"a": "x_adv", "b": "W:ref"}),
               ("t2", "Tanh", {}, {"x": "m2"}),
               ("c2", "Multiply", {}, {"x": "t2", "y": [1.0, -2.0, 0.5, 3.0]}),
               ("adv_loss", "Sum", {}, {"input": "c2"})])
    program = compile_project(p)
    assert program.ok, [str(d) for d in program.errors]
    r = run_backward(program, target="adv_loss")
    assert float(r.value("adv_loss")) > float(r.value("loss"))
    # The adversarial loss trains W only through the second copy: x_adv is a constant.
    assert r.grad("x") is None or not np.any(r.grad("x"))
    assert r.grad("W") is not None
