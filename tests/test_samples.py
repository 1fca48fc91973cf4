"""The sample projects: they load, compile, run, round-trip; the stable softmax teaches right."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from blockflow.compile.compiler import compile_project
from blockflow.errors import NumericsError
from blockflow.io.project_io import dumps_project, load_project
from blockflow.run.runtime import run, run_backward

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = sorted((ROOT / "sample_projects").glob("*.bflow.json"))
STABLE = ROOT / "sample_projects" / "stable_softmax.bflow.json"


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_sample_loads_compiles_runs_and_round_trips(path):
    text = path.read_text(encoding="utf-8")
    project = load_project(path)
    assert dumps_project(project) == text
    for page in project.pages:
        assert page.text, f"page {page.name} should say what it teaches"
        program = compile_project(project, page.name)
        assert program.ok, [str(d) for d in program.diagnostics]
        if page.loss is None:   # a forward-only page (basic_matmul): every value finite
            result = run(program)
            assert all(np.isfinite(v).all() for v in result.values.values() if v.dtype.kind == "f")
            continue
        result = run_backward(program)
        assert result.target is not None and np.isfinite(result.value(*result.target))


def test_samples_are_what_the_script_makes():
    # one BLAS thread, as the suite runs: with two on a 2-core machine the check took 58 s, not 11
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "make_samples.py"), "--check"],
                          capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _one_array_sample(values, text="a page", dtype="float64", shape=None):
    import json
    return json.dumps({"text": text, "value": {"dtype": dtype, "shape": shape or [len(values)], "data": values}})


def test_a_sample_may_differ_from_the_script_only_in_its_floats_last_bits():
    """--check takes a float array within 1e-9 of its largest value (the BLAS kernel's rounding
    of resnet_gradients' calibration), and nothing else: texts, shapes, dtypes, ints exact."""
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        from make_samples import same_sample
    finally:
        sys.path.remove(str(ROOT / "tools"))
    made = _one_array_sample([1.0, -0.5, 0.25])
    assert same_sample(made, made)
    assert same_sample(_one_array_sample([1.0, -0.5, 0.25 + 1e-12]), made)
    assert same_sample(_one_array_sample([1.0 + 4e-16, -0.5, 0.25]), made)
    assert not same_sample(_one_array_sample([1.0, -0.5, 0.25 + 1e-6]), made)
    assert not same_sample(_one_array_sample([1.0, -0.5, 0.25], text="another page"), made)
    assert not same_sample(_one_array_sample([1.0, -0.5, 0.25], dtype="float32"), made)
    assert not same_sample(_one_array_sample([1.0, -0.5]), made)
    assert not same_sample(_one_array_sample([1.0, -0.5, "NaN"]), made)
    assert not same_sample(_one_array_sample([1.0, -0.5, float("nan")]), made)    # not the format's
    assert not same_sample(_one_array_sample([1, 2, 4], dtype="int64"), _one_array_sample([1, 2, 3], dtype="int64"))


def _softmax_vjp(x, w):
    x = x.astype(np.float64)
    p = np.exp(x - x.max())
    p /= p.sum()
    return p * (w - p @ w)


def test_stable_softmax_gradient_is_the_analytic_vjp_and_equals_the_plain_one():
    project = load_project(STABLE)
    x = project.pages[0].feeds["x"]
    w = project.pages[0].nodes["w"].attrs["value"].astype(np.float64)
    grads = {}
    for page in ("stable_softmax", "by_hand", "without_stop_gradient", "naive"):
        grads[page] = run_backward(compile_project(project, page)).grad("x")
    expected = _softmax_vjp(x, w)
    for page, g in grads.items():
        np.testing.assert_allclose(g, expected, rtol=1e-5, atol=1e-7, err_msg=page)
    np.testing.assert_allclose(grads["stable_softmax"], grads["without_stop_gradient"], rtol=1e-6, atol=1e-7)


def test_the_stable_backward_pass_skips_max_and_the_plain_one_does_not():
    project = load_project(STABLE)
    stable = run_backward(compile_project(project, "stable_softmax"))
    plain = run_backward(compile_project(project, "without_stop_gradient"))
    assert stable.grad("Max_1") is None
    assert plain.grad("Max_1") is not None
    np.testing.assert_allclose(plain.grad("Max_1"), 0.0, atol=1e-6)  # the shift's share sums to zero
    paths = compile_project(project, "stable_softmax").gradient_paths()
    assert {(e.src, e.dst) for e in paths.cut} == {("x", "Max_1"), ("Max_1", "StopGradient_1")}


@pytest.mark.parametrize("page", ["stable_softmax", "by_hand"])
def test_large_inputs_stay_finite_where_the_naive_version_overflows(page):
    project = load_project(STABLE)
    x = np.array([1000.0, 1001.0, 999.5, 1003.0, 998.0], np.float32)
    w = project.pages[0].nodes["w"].attrs["value"]
    result = run_backward(compile_project(project, page), {"x": x})
    assert np.isfinite(result.value("Sum_1")) and np.isfinite(result.grad("x")).all()
    np.testing.assert_allclose(result.grad("x"), _softmax_vjp(x, w.astype(np.float64)), rtol=1e-4, atol=1e-6)
    naive = compile_project(project, "naive")
    with pytest.raises(NumericsError) as info:
        run_backward(naive, {"x": x})
    assert "naive/Exp_1" in info.value.node and "Inf" in str(info.value)
    unchecked = run(naive, {"x": x}, check_numerics=False)
    assert not np.isfinite(unchecked.value("Sum_1"))
