"""The gradient view: wire states, norms, the cut region, accumulation, the backward steps."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from blockflow.compile.compiler import compile_project
from blockflow.present.gradview import GradientScale, GradientView, describe_array, norm
from blockflow.io.project_io import load_project
from blockflow.run.runtime import run_backward

from diagrams import chain

SAMPLE = Path(__file__).resolve().parents[1] / "sample_projects" / "stable_softmax.bflow.json"


@pytest.fixture(scope="module")
def sample():
    program = compile_project(load_project(SAMPLE), "stable_softmax")
    result = run_backward(program, commit=False)
    return program, result, GradientView(program, result=result)


def test_the_stop_gradient_region_gets_no_gradient_and_every_other_wire_does(sample):
    program, result, view = sample
    cut = {str(e) for e, w in view.wires.items() if w.state == "cut"}
    assert cut == {"x.output -> Max_1.input", "Max_1.output -> StopGradient_1.input"}
    for edge, w in view.wires.items():
        if w.state == "cut":
            assert w.cutters == ("StopGradient_1",) and w.grad is None and w.norm is None
            assert "StopGradient_1" in w.reason
        else:
            assert w.state == "flows"
            assert w.norm == pytest.approx(float(np.linalg.norm(result.edge_grads[edge])))
            assert w.value is not None
    assert sorted(map(str, view.cut_by["StopGradient_1"])) == sorted(cut)
    assert "nothing flows back to Max_1, x" in view.cut_summary("StopGradient_1")


def test_the_scale_maps_norms_monotonically_on_a_log_scale(sample):
    _, _, view = sample
    scale = view.scale(levels=24)
    norms = sorted(view.norms())
    assert scale.low == min(n for n in norms if n > 0) and scale.high == max(norms)
    levels = [scale.level(n) for n in norms]
    assert levels == sorted(levels) and levels[0] == 0 and levels[-1] == 23
    assert scale.level(None) == -1 and scale.level(0.0) == -1
    mid = math.sqrt(scale.low * scale.high)        # the log-scale middle
    assert scale.fraction(mid) == pytest.approx(0.5)
    ticks = scale.ticks(5)
    assert ticks[0] == (0.0, pytest.approx(scale.low)) and ticks[-1] == (1.0, pytest.approx(scale.high))
    assert GradientScale.from_norms([]).empty and GradientScale.from_norms([]).level(1.0) == -1
    assert GradientScale.from_norms([2.0]).level(2.0) == 23


def test_static_paths_before_any_run_say_what_can_carry_gradient(sample):
    program, _, _ = sample
    view = GradientView(program)
    assert not view.ran and view.steps == []
    states = {str(e): w.state for e, w in view.wires.items()}
    assert states["x.output -> Max_1.input"] == "cut"
    assert states["x.output -> Subtract_1.x"] == "flows"
    assert all(w.norm is None for w in view.wires.values())


def two_branches():
    """x feeds Tanh and Square; both summed into the loss: x's gradient accumulates."""
    return chain(("x", "Placeholder", {"shape": [3]}, None),
                 ("t", "Tanh", {}, {"x": "x"}),
                 ("q", "Square", {}, {"x": "x"}),
                 ("a", "Add", {}, {"x": "t", "y": "q"}),
                 ("L", "Sum", {}, {"input": "a"}),
                 feeds={"x": np.array([0.5, -1.0, 2.0], np.float32)})


def test_a_fanout_shows_both_contributions_and_their_sum_equals_the_runtime_gradient():
    program = compile_project(two_branches())
    result = run_backward(program, target="L", commit=False)
    view = GradientView(program, result=result)
    fan = view.fanout_of("x")
    assert fan is not None and len(fan.contributions) == 2
    x = np.array([0.5, -1.0, 2.0])
    by_dst = {e.dst: g for e, g in fan.contributions}
    np.testing.assert_allclose(by_dst["t"], 1 - np.tanh(x) ** 2, rtol=1e-6)
    np.testing.assert_allclose(by_dst["q"], 2 * x, rtol=1e-6)
    np.testing.assert_allclose(fan.summed(), fan.total, rtol=1e-6)
    np.testing.assert_array_equal(fan.total, result.grad("x"))


def test_the_steps_walk_the_schedule_backwards_with_the_runtime_numbers():
    program = compile_project(two_branches())
    result = run_backward(program, target="L", commit=False)
    view = GradientView(program, result=result)
    order = [s.node for s in view.steps]
    schedule = [st.node for st in program.steps]
    assert order == [n for n in reversed(schedule) if n in set(order)]
    assert order[0] == "L" and order[-1] == "x" and view.steps[-1].kind == "leaf"
    for step in view.steps:
        for port, g in step.arriving.items():
            np.testing.assert_array_equal(g, result.grads[(step.node, port)])
        for edge, g in step.sent:
            assert edge.dst == step.node
            np.testing.assert_array_equal(g, result.edge_grads[edge])
    add = next(s for s in view.steps if s.node == "a")
    assert {e.src for e, _ in add.sent} == {"t", "q"} and add.kind == "vjp"
    assert "a (Add)" in add.describe()


def test_a_stop_gradient_step_is_a_cut_and_explanations_name_the_rule(sample):
    program, result, view = sample
    sg = next(s for s in view.steps if s.node == "StopGradient_1")
    assert sg.kind == "cut" and sg.sent == []
    assert all(s.node not in ("Max_1",) for s in view.steps)
    ex = view.explain("Subtract_1")
    assert [ie.port for ie in ex.inputs] == ["x", "y"]
    for ie in ex.inputs:
        assert ie.result is not None and ie.upstream["z"] is result.grads[("Subtract_1", "z")]
    # y (the shift, a scalar broadcast over x) gets minus the sum of x's gradient
    assert ex.inputs[1].result.shape == () and ex.inputs[0].result.shape == (5,)
    np.testing.assert_allclose(ex.inputs[1].result, -ex.inputs[0].result.sum(), rtol=1e-5, atol=1e-7)
    ex = view.explain("Max_1")
    assert ex.inputs[0].result is None and "StopGradient_1" in ex.inputs[0].why_none
    assert "stable_softmax/Max_1" in ex.text()


def test_describe_array_says_shape_dtype_stats_and_nan_count():
    assert describe_array(np.float32(2.5)) == "scalar float32 = 2.5"
    line = describe_array(np.array([1.0, np.nan, 3.0], np.float32), name="g")
    assert line.startswith("g [3] float32 · min 1 · max 3 · mean 2") and "1 NaN/Inf" in line
    assert describe_array(np.array([True, False])) == "[2] bool · 1 of 2 true"
    assert norm(np.array([3, 4])) == 5.0


@pytest.mark.parametrize("x,digits,large,text", [
    (0.0, 4, 1e5, "0"), (1.23456, 4, 1e5, "1.235"), (1e-5, 4, 1e5, "1.000e-05"),
    (123456.7, 4, 1e5, "1.235e+05"), (float("nan"), 4, 1e5, "nan"), (float("-inf"), 4, 1e5, "-inf"),
    (1.23456, 3, 1e4, "1.23"), (1e4, 3, 1e4, "1.00e+04"), (9999.0, 4, 1e5, "9999"),
])
def test_readable_number_is_the_one_number_format_of_gradient_texts(x, digits, large, text):
    from blockflow.present.values import readable_number
    assert readable_number(x, digits, large) == text
