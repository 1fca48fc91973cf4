"""Test cases for the random_ops blocks (seeded samplers, none differentiable).

The shared tests call forward with ``rng=np.random.default_rng(0)``. Unwired optional inputs
(mean, stddev, minval, maxval, beta) cannot be expressed here (the harness would type a None as
an object tensor), so every case wires them; tests/test_random_ops.py covers the unwired forms.
"""
from __future__ import annotations

import numpy as np

from casekit import Case, distributions, f32, ints


def _f(value, dtype=np.float32):
    return np.asarray(value, dtype=dtype)


def _normal_cases():
    return [
        Case((ints([2, 3]), _f(0.0), _f(1.0)), id="standard"),
        Case((ints([4, 3]), f32(3), _f(2.0)), id="mean-vector"),
        Case((ints([2, 3]), _f(1.0, np.float64), _f([[0.5], [2.0]], np.float64)), {"dtype": "float64"},
             id="float64-stddev-column"),
        Case((None, f32(5, 2), f32(2, lo=0.1, hi=1.0)), id="shape-from-params"),
        Case((ints([]), _f(0.0), _f(1.0)), id="scalar"),
        Case((ints([0, 3]), _f(0.0), _f(1.0)), id="empty"),
        Case((ints([3, 2]), _f(0.0, np.float16), _f(1.0, np.float16)), {"dtype": "float16", "seed": 4},
             id="float16"),
    ]


CASES: dict[str, list[Case]] = {
    "RandomNormal": _normal_cases(),
    "TruncatedNormal": _normal_cases(),
    "RandomUniform": [
        Case((ints([2, 3]), _f(0.0), _f(1.0)), id="unit"),
        Case((ints([4, 3]), f32(3, lo=-3, hi=-1), f32(4, 1, lo=1, hi=3)), id="broadcast-bounds"),
        Case((None, f32(2, 1), f32(3, lo=3, hi=4)), id="shape-from-bounds"),
        Case((ints([5]), _f(-1.0, np.float64), _f(1.0, np.float64)), {"dtype": "float64"}, id="float64"),
        Case((ints([3, 4]), ints(-2), ints(3)), {"dtype": "int32"}, id="int32"),
        Case((ints([6]), ints([0, 0, 0, 5, 5, 5]), ints(10)), {"dtype": "int64"}, id="int64-vector-bounds"),
        Case((ints([2]), _f(0.0, np.float16), _f(1.0, np.float16)), {"dtype": "float16"}, id="float16"),
    ],
    "Multinomial": [
        # float64 logits: the shared test expects float32 outputs from float32 inputs.
        Case((np.log(distributions(3, 5)).astype(np.float64), ints(7)), id="batch"),
        Case((np.array([[0.0, -np.inf, 1.0]]), ints(4)), {"output_dtype": "int32"}, id="int32-minus-inf"),
        Case((np.zeros((2, 3)), ints(0)), id="no-samples"),
        Case((np.zeros((0, 3)), ints(2)), id="empty-batch"),
    ],
    "RandomShuffle": [
        Case((f32(5, 3),), id="matrix"),
        Case((np.arange(7, dtype=np.int32),), id="int32"),
        Case((f32(),), id="scalar"),
        Case((f32(0, 2),), id="empty"),
    ],
    "Bernoulli": [
        Case((f32(4, 5, lo=0.0, hi=1.0),), id="matrix"),
        Case((np.array([0.0, 0.5, 1.0]),), id="float64"),
        Case((_f(0.3),), id="scalar"),
        Case((_f([[0.1, 0.9]], np.float16),), id="float16"),
    ],
    "RandomPoisson": [
        Case((ints([3]), f32(2, lo=0.5, hi=4.0)), id="vector-rates"),
        Case((ints([2, 2]), _f(3.0, np.float64)), {"dtype": "float64"}, id="scalar-rate"),
        Case((ints([4]), np.array([0.0, 1.0, 20.0])), {"dtype": "int64"}, id="int64"),
        Case((ints([]), ints([1, 2])), {"dtype": "int32"}, id="int-rates"),
    ],
    "RandomGamma": [
        Case((ints([4]), f32(3, lo=0.5, hi=3.0), f32(2, 1, lo=0.5, hi=2.0)), id="broadcast"),
        Case((ints([2, 3]), _f(2.0), _f(1.0)), id="scalars"),
        Case((ints([5]), np.array([0.1, 1.0, 9.0]), np.array(2.0)), {"dtype": "float64"}, id="float64"),
    ],
}

for _cases in CASES.values():
    for _case in _cases:
        _case.grad = False  # samplers: nothing to gradient-check

NOT_DIFFERENTIABLE = {name: "none" for name in CASES}
