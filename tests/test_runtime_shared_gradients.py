"""A Gradients block's cotangents taken, scaled, by the run's own backward (lower.SHARE_GRADIENTS):
the FGSM pattern's clean loss is differentiated once, as a hand-written numpy step does it, and
every result is what the backward computed again gave (bit for bit where the scale is a power of
two); where the run's gradient reaches a slot by another way too, nothing is shared there."""
from __future__ import annotations

import re

import numpy as np
import pytest

import blockflow.run.lower as lower
from blockflow.compile.compiler import compile_project
from blockflow.run.runtime import run

from diagrams import chain

RNG = np.random.default_rng(31)


def _adversarial(scale, extra=False, seeded=False):
    """clean = sum(tanh(x @ W + b)); dx by a Gradients block; x_adv = StopGradient(x + 0.1 sign(dx));
    the loss: scale * (clean + the same on x_adv) [+ sum(x @ W + b) read directly: ``extra``]."""
    specs = [("x", "Placeholder", {"shape": [4, 6]}, None),
             ("W", "Variable", {"shape": [6, 3], "initializer": "glorot_uniform", "seed": 3}, None),
             ("b", "Variable", {"shape": [3], "initializer": "random_normal", "seed": 4}, None),
             ("mm", "MatMul", {}, {"a": "x", "b": "W:ref"}),
             ("h", "Add", {}, {"x": "mm", "y": "b:ref"}),
             ("t", "Tanh", {}, {"x": "h"}),
             ("clean", "Sum", {}, {"input": "t"})]
    grad_wires = {"ys[0]": "clean", "xs[0]": "x"}
    if seeded:
        grad_wires["grad_ys[0]"] = "c2"
        specs.append(("c2", "Const", {"value": np.float32(2.0)}, None))
    specs += [("g", "Gradients", {}, grad_wires),
              ("sign", "Sign", {}, {"x": "g:dx[0]"}),
              ("step", "Multiply", {}, {"x": "sign", "y": np.float32(0.1)}),
              ("moved", "Add", {}, {"x": "x", "y": "step"}),
              ("x_adv", "StopGradient", {}, {"input": "moved"}),
              ("mm2", "MatMul", {}, {"a": "x_adv", "b": "W:ref"}),
              ("h2", "Add", {}, {"x": "mm2", "y": "b:ref"}),
              ("t2", "Tanh", {}, {"x": "h2"}),
              ("adv", "Sum", {}, {"input": "t2"}),
              ("both", "Add", {}, {"x": "clean", "y": "adv"})]
    last = "both"
    if extra:
        specs += [("direct", "Sum", {}, {"input": "h"}), ("more", "Add", {}, {"x": "both", "y": "direct"})]
        last = "more"
    specs.append(("loss", "Multiply", {}, {"x": last, "y": np.float32(scale)}))
    project = chain(*specs, feeds={"x": RNG.normal(size=(4, 6)).astype(np.float32)})
    project.pages[0].loss = "loss"
    return project


def _both_ways(monkeypatch, project, **kw):
    out = []
    for share in (False, True):
        monkeypatch.setattr(lower, "SHARE_GRADIENTS", share)
        program = compile_project(project)
        result = run(program, target="loss", record=False, **kw)
        plan = next(iter(program.cache("plans").values()))
        out.append((result, plan.source))
    return out


def test_fgsm_shares_the_clean_backward_and_gives_the_same_bits(monkeypatch):
    (plain, plain_src), (shared, src) = _both_ways(monkeypatch, _adversarial(0.5), wrt=frozenset({"W", "b", "x"}))
    assert " * h" not in plain_src and src.count(" * h") >= 3, src
    assert src.count("= b") < plain_src.count("= b")  # fewer vjp calls
    for name in ("W", "b", "x"):
        np.testing.assert_array_equal(shared.variable_grads[name], plain.variable_grads[name], err_msg=name)
    np.testing.assert_array_equal(shared.value("loss"), plain.value("loss"))


def test_a_scale_that_is_not_a_power_of_two_differs_only_in_rounding(monkeypatch):
    project = _adversarial(0.3)
    (plain, _), (shared, src) = _both_ways(monkeypatch, project)
    assert " * h" in src
    for name in ("W", "b"):
        np.testing.assert_allclose(shared.variable_grads[name], plain.variable_grads[name], rtol=1e-6, atol=1e-7)
    # and both agree with central differences of the loss in W[0, 0]
    program = compile_project(project)
    W = program.variable_values["W"].astype(np.float64)
    eps = 1e-3
    hi, lo = W.copy(), W.copy()
    hi[0, 0] += eps
    lo[0, 0] -= eps
    f = lambda w: float(run(program, variables={"W": w.astype(np.float32)}, fetch=["loss"], record=False).value("loss"))  # noqa: E731
    assert shared.variable_grads["W"][0, 0] == pytest.approx((f(hi) - f(lo)) / (2 * eps), rel=2e-2)


def test_nothing_is_shared_where_the_run_also_reads_a_slot_directly(monkeypatch):
    """h feeds the loss directly as well as through clean: h, and what feeds it, keep their own
    backward; the tanh after it still shares."""
    project = _adversarial(0.5, extra=True)
    (plain, plain_src), (shared, src) = _both_ways(monkeypatch, project)
    program = compile_project(project)
    h = program.slot_of("h", "z")
    t = program.slot_of("t", "y")
    shares = set(re.findall(r"^\s*g(\d+) = g\d+ \* h", src, re.M))
    assert str(t) in shares and str(h) not in shares, src
    for name in ("W", "b"):
        np.testing.assert_array_equal(shared.variable_grads[name], plain.variable_grads[name], err_msg=name)


def test_a_seeded_gradients_block_is_not_shared(monkeypatch):
    (plain, _), (shared, src) = _both_ways(monkeypatch, _adversarial(0.5, seeded=True))
    assert " * h" not in src
    np.testing.assert_array_equal(shared.variable_grads["W"], plain.variable_grads["W"])


def test_a_recording_run_shares_nothing_and_agrees(monkeypatch):
    project = _adversarial(0.5)
    program = compile_project(project)
    recorded = run(program, target="loss")
    quick = run(program, target="loss", record=False)
    plan = [p for p in program.cache("plans").values() if p.record][0]
    assert " * h" not in plan.source
    for name in ("W", "b"):
        np.testing.assert_array_equal(recorded.variable_grads[name], quick.variable_grads[name])


@pytest.mark.parametrize("case", range(24))
def test_random_pages_around_a_gradients_block_agree_with_and_without_sharing(monkeypatch, case):
    """Random pages: a two-layer net's scalar loss L, a Gradients block of L for a random choice
    of xs, and a run's loss that scales L and may also read the net's inner values directly
    (which must then keep their own backward). Sharing on and off give the same gradients: the
    same bits when the scale is a power of two, else within rounding."""
    rng = np.random.default_rng(1000 + case)
    scale = float(rng.choice([0.5, 2.0, 0.3, -1.25]))
    xs = sorted(rng.choice(["x", "W1:ref", "a1", "h2"], size=rng.integers(1, 3), replace=False))
    specs = [("x", "Placeholder", {"shape": [4, 5]}, None),
             ("W1", "Variable", {"shape": [5, 6], "initializer": "glorot_uniform", "seed": 1}, None),
             ("W2", "Variable", {"shape": [6, 3], "initializer": "glorot_uniform", "seed": 2}, None),
             ("h1", "MatMul", {}, {"a": "x", "b": "W1:ref"}),
             ("a1", "Tanh", {}, {"x": "h1"}),
             ("h2", "MatMul", {}, {"a": "a1", "b": "W2:ref"}),
             ("a2", "Sigmoid", {}, {"x": "h2"}),
             ("L", "Sum", {}, {"input": "a2"}),
             ("g", "Gradients", {}, {"ys[0]": "L", **{f"xs[{i}]": v for i, v in enumerate(xs)}}),
             ("scaled", "Multiply", {}, {"x": "L", "y": np.float32(scale)})]
    last = "scaled"
    for k, inner in enumerate(v for v in ("a1", "h2", "a2") if rng.random() < 0.4):
        specs += [(f"direct{k}", "Sum", {}, {"input": inner}),
                  (f"plus{k}", "Add", {}, {"x": last, "y": f"direct{k}"})]
        last = f"plus{k}"
    if rng.random() < 0.5:   # the Gradients block's result used, cut from the run's gradient
        specs += [("cut", "StopGradient", {}, {"input": "g:dx[0]"}), ("m", "Sum", {}, {"input": "cut"}),
                  ("with_cut", "Add", {}, {"x": last, "y": "m"})]
        last = "with_cut"
    specs.append(("loss", "Identity", {}, {"input": last}))
    project = chain(*specs, feeds={"x": rng.normal(size=(4, 5)).astype(np.float32)})
    project.pages[0].loss = "loss"
    (plain, _), (shared, _) = _both_ways(monkeypatch, project, wrt=frozenset({"W1", "W2", "x"}))
    for name in ("W1", "W2", "x"):
        if scale in (0.5, 2.0):
            np.testing.assert_array_equal(shared.variable_grads[name], plain.variable_grads[name], err_msg=name)
        else:
            np.testing.assert_allclose(shared.variable_grads[name], plain.variable_grads[name], rtol=2e-6,
                                       atol=1e-7, err_msg=name)
