"""Variables: seeded initializers, stored values, the trainable flag."""
from __future__ import annotations

import numpy as np
import pytest

from blockflow.compile.compiler import compile_project
from blockflow.io.project_io import dumps_project, loads_project
from blockflow.registry import default_registry
from blockflow.run.runtime import run

from diagrams import chain


def initial(**attrs):
    spec = default_registry()["Variable"]
    values, problems = spec.validate_attrs(attrs)
    assert not problems
    return spec.initial(**values)


def test_constant_initializers():
    np.testing.assert_array_equal(initial(shape=[2, 3]), np.zeros((2, 3), np.float32))
    np.testing.assert_array_equal(initial(shape=[4], initializer="ones", dtype="float64"), np.ones(4))
    v = initial(initializer="value", initial_value=np.array([[1.0, 2.0]]))
    assert v.dtype == np.float32 and v.shape == (1, 2)


@pytest.mark.parametrize("init", ["random_normal", "random_uniform", "glorot_uniform", "glorot_normal"])
def test_random_initializers_are_seeded_and_scaled(init):
    a = initial(shape=[200, 300], initializer=init, seed=7)
    assert a.dtype == np.float32 and a.shape == (200, 300)
    np.testing.assert_array_equal(a, initial(shape=[200, 300], initializer=init, seed=7))
    assert not np.array_equal(a, initial(shape=[200, 300], initializer=init, seed=8))
    expected_std = {"random_normal": 1.0, "random_uniform": 1 / np.sqrt(3),
                    "glorot_uniform": np.sqrt(2 / 500), "glorot_normal": np.sqrt(2 / 500)}[init]
    assert abs(a.std() - expected_std) / expected_std < 0.02
    assert abs(a.mean()) < 0.02 * max(expected_std, 0.1)
    if init == "glorot_uniform":
        assert np.abs(a).max() <= np.sqrt(6 / 500)


def test_stored_value_wins_over_the_initializer_and_round_trips():
    p = chain(("v", "Variable", {"shape": [2], "initializer": "ones"}, None),
              ("loss", "Sum", {}, {"input": "v"}))
    p.pages[0].nodes["v"].state["value"] = np.array([3.0, 4.0], np.float32)
    again = loads_project(dumps_project(p))
    np.testing.assert_array_equal(again.pages[0].nodes["v"].state["value"], [3.0, 4.0])
    assert float(run(compile_project(again)).value("loss")) == 7.0


def test_training_runs_differentiate_only_trainable_variables():
    p = chain(("a", "Variable", {"shape": [2], "initializer": "ones"}, None),
              ("b", "Variable", {"shape": [2], "initializer": "ones", "trainable": False}, None),
              ("m", "Multiply", {}, {"x": "a", "y": "b"}),
              ("loss", "Sum", {}, {"input": "m"}))
    program = compile_project(p)
    assert program.trainable == {"a"}
    res = run(program, target="loss", record=False)
    assert set(res.variable_grads) == {"a"}
    res = run(program, target="loss", record=False, wrt=["a", "b"])
    assert set(res.variable_grads) == {"a", "b"}


def test_unknown_shape_is_refused():
    p = chain(("v", "Variable", {"shape": [-1, 2]}, None))
    (d,) = compile_project(p).errors
    assert d.node == "v" and "fully known" in d.message
