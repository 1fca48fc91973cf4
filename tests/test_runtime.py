"""The numpy runtime: forward, backward, accumulation, StopGradient, freeing, errors."""
from __future__ import annotations

import numpy as np
import pytest

from blockflow.compile.compiler import compile_project
from blockflow.errors import BlockExecutionError, FeedError, NumericsError, RunError
from blockflow.registry import Registry
from blockflow.run.runtime import run
from blockflow.spec import Input, Output, block
from blockflow_blocks import all_blocks

from diagrams import chain, softmax_project

RNG = np.random.default_rng(0)


def numeric_grad(program, feeds, target, name, eps=1e-6):
    """Central differences of the target with respect to one float64 feed."""
    x = np.array(feeds[name], dtype=np.float64)
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        vals = []
        for sign in (1, -1):
            xp = x.copy()
            xp[i] += sign * eps
            vals.append(float(run(program, {**feeds, name: xp}, target=None, fetch=[target]).value(target)))
        g[i] = (vals[0] - vals[1]) / (2 * eps)
    return g


def test_mlp_gradients_match_finite_differences():
    p = chain(("x", "Placeholder", {"shape": [4, 3], "dtype": "float64"}, None),
              ("W", "Placeholder", {"shape": [3, 5], "dtype": "float64"}, None),
              ("b", "Placeholder", {"shape": [5], "dtype": "float64"}, None),
              ("m", "MatMul", {}, {"a": "x", "b": "W"}),
              ("h", "Add", {}, {"x": "m", "y": "b"}),
              ("t", "Tanh", {}, {"x": "h"}),
              ("y", "Placeholder", {"shape": [4, 5], "dtype": "float64"}, None),
              ("ce", "SoftmaxCrossEntropyWithLogits", {}, {"features": "t", "labels": "y"}),
              ("loss", "Mean", {}, {"input": "ce"}))
    labels = np.eye(5)[[0, 3, 1, 4]]
    feeds = {"x": RNG.normal(size=(4, 3)), "W": RNG.normal(size=(3, 5)), "b": RNG.normal(size=5), "y": labels}
    program = compile_project(p)
    assert program.ok, [str(d) for d in program.errors]
    res = run(program, feeds, target="loss")
    for name in ("x", "W", "b"):
        np.testing.assert_allclose(res.variable_grads[name], numeric_grad(program, feeds, "loss", name),
                                   rtol=1e-6, atol=1e-8)


def test_gradient_accumulates_where_an_output_feeds_several_inputs():
    p = chain(("x", "Placeholder", {"shape": [3], "dtype": "float64"}, None),
              ("sq", "Multiply", {}, {"x": "x", "y": "x"}),
              ("s", "Add", {}, {"x": "sq", "y": "x"}),
              ("loss", "Sum", {}, {"input": "s"}))
    x = np.array([1.0, -2.0, 0.5])
    program = compile_project(p)
    res = run(program, {"x": x}, target="loss")
    np.testing.assert_allclose(res.grad("x"), 2 * x + 1)
    into = {e.dst_port if e.dst == "sq" else "s." + e.dst_port: g for e, g in res.edge_grads.items() if e.src == "x"}
    np.testing.assert_allclose(into["x"], x)       # d(x*y)/dx = y = x
    np.testing.assert_allclose(into["y"], x)
    np.testing.assert_allclose(into["s.y"], np.ones(3))
    np.testing.assert_allclose(sum(into.values()), res.grad("x"))


def test_broadcasting_gradients_sum_back_to_the_input_shape():
    p = chain(("a", "Placeholder", {"shape": [2, 3], "dtype": "float64"}, None),
              ("b", "Placeholder", {"shape": [3], "dtype": "float64"}, None),
              ("m", "Multiply", {}, {"x": "a", "y": "b"}),
              ("loss", "Sum", {}, {"input": "m"}))
    a, b = RNG.normal(size=(2, 3)), RNG.normal(size=3)
    res = run(compile_project(p), {"a": a, "b": b}, target="loss")
    np.testing.assert_allclose(res.grad("b"), a.sum(axis=0))
    np.testing.assert_allclose(res.grad("a"), np.broadcast_to(b, (2, 3)))


def _spy_registry(calls):
    @block("SpySquare", category="test")
    class SpySquare:
        """x*x, counting backward calls and the needs it was given."""

        inputs = (Input("x", dtype="float"),)
        outputs = (Output("y"),)

        def infer(x):
            return x

        def forward(x):
            return x * x

        def vjp(g, out, x, *, needs):
            calls.append(needs)
            return (2 * x * g,)

    return Registry([*all_blocks(), SpySquare])


def test_backward_does_not_visit_what_only_a_stop_gradient_connects_to():
    calls = []
    reg = _spy_registry(calls)
    p = chain(("x", "Placeholder", {"shape": [3]}, None),
              ("spy", "SpySquare", {}, {"x": "x"}),
              ("sg", "StopGradient", {}, {"input": "spy:y"}),
              ("m", "Multiply", {}, {"x": "x", "y": "sg"}),
              ("loss", "Sum", {}, {"input": "m"}))
    program = compile_project(p, registry=reg)
    x = np.array([1.0, 2.0, 3.0], np.float32)
    res = run(program, {"x": x}, target="loss")
    assert calls == []
    np.testing.assert_allclose(res.grad("x"), x * x)  # only through m's x input
    np.testing.assert_allclose(res.value("sg"), x * x)  # forward passes the value
    assert res.grad("spy") is None
    # Without the StopGradient the spy's vjp runs.
    p.pages[0].edges = [e for e in p.pages[0].edges if e.dst not in ("sg", "m") or e.dst_port == "x"]
    p.pages[0].remove_node("sg")
    p.pages[0].connect("spy", "y", "m", "y")
    res = run(compile_project(p, registry=reg), {"x": x}, target="loss")
    assert calls == [(True,)]
    np.testing.assert_allclose(res.grad("x"), 3 * x * x)


def test_only_wanted_gradients_are_computed():
    p = chain(("x", "Placeholder", {"shape": [2, 3]}, None),
              ("W", "Variable", {"shape": [3, 2], "initializer": "ones"}, None),
              ("m", "MatMul", {}, {"a": "x", "b": "W"}),
              ("loss", "Sum", {}, {"input": "m"}))
    program = compile_project(p)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    res = run(program, {"x": x}, target="loss", record=False)  # training: trainable Variables only
    assert set(res.variable_grads) == {"W"}
    np.testing.assert_allclose(res.variable_grads["W"], x.T @ np.ones((2, 2), np.float32))
    assert set(res.values) == {("loss", "output")}
    full = run(program, {"x": x}, target="loss")
    assert set(full.variable_grads) == {"x", "W"}


def test_training_run_frees_values_nothing_needs():
    p = chain(("x", "Placeholder", {"shape": [3]}, None),
              ("a", "Exp", {}, {"x": "x"}),
              ("b", "Exp", {}, {"x": "a"}),
              ("c", "Add", {}, {"x": "b", "y": 1.0}),
              ("loss", "Sum", {}, {"input": "c"}),
              ("v", "Variable", {"shape": [3]}, None),
              ("d", "Multiply", {}, {"x": "v", "y": "c"}),
              ("loss2", "Sum", {}, {"input": "d"}))
    program = compile_project(p)
    res = run(program, {"x": np.zeros(3, np.float32)}, target="loss2", wrt=["v"], record=False)
    plan = next(iter(program.cache("plans").values()))
    assert "del " in plan.source
    # Exp's values are not needed once c is computed: the backward pass wants only c (for d's vjp).
    src = plan.source.splitlines()
    # the gradient seed's line, or the statement left in its place when only folded vjps read it
    first_bwd = next(i for i, line in enumerate(src) if ("g" in line and "G0" in line) or line.strip() == "pass")
    freed_early = " ".join(line for line in src[:first_bwd] if line.strip().startswith("del"))
    slot_a = f"s{program.slot_of('a')}"
    assert slot_a in freed_early.replace(",", " ").split()
    np.testing.assert_allclose(res.variable_grads["v"], np.exp(np.exp(0.0)) + 1)


def test_non_scalar_target_needs_a_seed():
    p = chain(("x", "Placeholder", {"shape": [3]}, None), ("e", "Exp", {}, {"x": "x"}))
    program = compile_project(p)
    x = np.array([0.0, 1.0, 2.0], np.float32)
    with pytest.raises(RunError, match="not a scalar"):
        run(program, {"x": x}, target="e")
    res = run(program, {"x": x}, target="e", grad_seed=[1.0, 0.0, 2.0])
    np.testing.assert_allclose(res.grad("x"), np.exp(x) * [1, 0, 2], rtol=1e-6)


def test_nan_is_reported_at_the_node_that_first_produced_it():
    p = chain(("x", "Placeholder", {"shape": [2]}, None),
              ("l", "Log", {}, {"x": "x"}),
              ("e", "Exp", {}, {"x": "l"}),
              ("loss", "Sum", {}, {"input": "e"}))
    program = compile_project(p)
    for record in (True, False):
        with pytest.raises(NumericsError) as info:
            run(program, {"x": np.array([1.0, -1.0], np.float32)}, target="loss", record=record)
        assert info.value.node.startswith("main/l ") and "NaN" in str(info.value)
    res = run(program, {"x": np.array([1.0, -1.0], np.float32)}, check_numerics=False)
    assert np.isnan(res.value("loss"))


def test_inf_in_the_backward_pass_names_the_block():
    p = chain(("x", "Placeholder", {"shape": [2]}, None),
              ("s", "Sqrt", {}, {"x": "x"}),
              ("loss", "Sum", {}, {"input": "s"}))
    with pytest.raises(NumericsError) as info:
        run(compile_project(p), {"x": np.array([0.0, 4.0], np.float32)}, target="loss")
    assert info.value.phase == "backward" and "main/s " in info.value.node and "Inf" in str(info.value)


def test_a_failing_block_is_named_with_the_shapes_it_got():
    p = chain(("x", "Placeholder", {"shape": [-1]}, None),
              ("r", "Reshape", {}, {"tensor": "x", "shape": np.array([2, 2])}))
    program = compile_project(p)
    assert program.ok, [str(d) for d in program.errors]
    with pytest.raises(BlockExecutionError) as info:
        run(program, {"x": np.arange(5, dtype=np.float32)})
    msg = str(info.value)
    assert "main/r (Reshape)" in msg and "tensor float32[5]" in msg


def test_feeds_are_checked():
    program = compile_project(softmax_project())
    with pytest.raises(FeedError, match="no Placeholder 'nope'"):
        run(program, {"nope": [1.0]})
    with pytest.raises(FeedError, match=r"shape \[3\]"):
        run(program, {"x": np.zeros(3, np.float32)})
    p = softmax_project()
    p.pages[0].feeds.clear()
    with pytest.raises(FeedError, match="main/x .*has no feed"):
        run(compile_project(p))


def test_a_program_with_errors_does_not_run():
    p = chain(("m", "Multiply", {}, {"x": 1.0}))
    with pytest.raises(Exception, match="not connected"):
        run(compile_project(p))


def test_variables_can_be_overridden_per_run():
    p = chain(("v", "Variable", {"shape": [2], "initializer": "ones"}, None),
              ("loss", "Sum", {}, {"input": "v"}))
    program = compile_project(p)
    assert float(run(program).value("loss")) == 2.0
    assert float(run(program, variables={"v": np.array([3.0, 4.0])}).value("loss")) == 7.0
    with pytest.raises(RunError, match="shape"):
        run(program, variables={"v": np.zeros(3)})


def test_repeated_runs_reuse_the_plan_and_agree():
    program = compile_project(softmax_project())
    a = run(program, target=None, fetch=["Sum_1"], record=False)
    b = run(program, target=None, fetch=["Sum_1"], record=False)
    assert len(program.cache("plans")) == 1
    assert a.value("Sum_1") == b.value("Sum_1")


def test_gradient_seed_must_fit_the_target():
    p = chain(("x", "Placeholder", {"shape": [3]}, None), ("sq", "Square", {}, {"x": "x"}),
              feeds={"x": np.ones(3, np.float32)})
    program = compile_project(p)
    with pytest.raises(RunError, match=r"seed has shape \[4, 3\]"):
        run(program, target="sq", grad_seed=np.ones((4, 3)))
    with pytest.raises(RunError, match="no gradient target"):
        run(program, grad_seed=1.0)


def test_wrt_and_variables_are_checked():
    program = compile_project(softmax_project())
    with pytest.raises(RunError, match="not on page 'main': nope"):
        run(program, target="Sum_1", wrt={"nope"})
    with pytest.raises(RunError, match="not the string"):
        run(program, target="Sum_1", wrt="x")
    with pytest.raises(RunError, match="typo"):
        run(program, variables={"typo": np.zeros(1)})


def test_results_cannot_write_into_the_project():
    project = softmax_project()
    result = run(compile_project(project))
    for node in ("x", "w"):
        with pytest.raises(ValueError, match="read-only"):
            result.value(node)[...] = 0
    np.testing.assert_array_equal(project.pages[0].feeds["x"], np.float32([2.0, 1.0, 0.1, 3.0, -1.0]))


def test_inf_in_a_summed_gradient_is_reported():
    v = np.array([1e-10, 1e-10], np.float32)
    p = chain(("v", "Variable", {"shape": [2], "initializer": "value", "initial_value": v}, None),
              ("m1", "Multiply", {}, {"x": "v", "y": np.float32(2e38)}),
              ("m2", "Multiply", {}, {"x": "v", "y": np.float32(2e38)}),
              ("a", "Add", {}, {"x": "m1", "y": "m2"}),
              ("s", "Sum", {}, {"input": "a"}))
    with pytest.raises(NumericsError, match="main/v .*Inf.*summed"):
        run(compile_project(p), target="s")
