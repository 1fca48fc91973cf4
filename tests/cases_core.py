"""Test cases for the first blocks (issue 2's set): one entry per block name.

Every tests/cases_*.py module defines CASES ({block: [Case, ...]}) and NOT_DIFFERENTIABLE
({block: its gradient kind}); tests/test_blocks.py merges them and checks that every registered
block has a case.
"""
from __future__ import annotations

import numpy as np

from casekit import (Case, _binary_cases, _reduction_cases, _unary_cases, away_from_zero, distinct,
                     distributions, f32, i32, ints)

_placeholder_value = f32(2, 3)
_variable_attrs = {"shape": [3, 2], "initializer": "glorot_uniform", "seed": 3}

CASES: dict[str, list[Case]] = {
    # array_ops
    "Const": [Case((), {"value": [[1.0, 2.0], [3.0, 4.0]]}, id="matrix", grad=False),
              Case((), {"value": 7, "dtype": "int32"}, id="int", grad=False)],
    "Placeholder": [Case((), {"shape": [-1, 3]}, value=_placeholder_value, grad=False)],
    "Identity": _unary_cases(),
    "StopGradient": [Case((f32(2, 3),), grad=False)],
    "Reshape": [
        Case((f32(2, 3, 4), ints([4, -1])), id="minus-one"),
        Case((f32(6), ints([2, 3])), id="explicit"),
        Case((f32(2, 3), ints([-1])), id="flatten"),
        Case((f32(1, 1), ints([])), id="to-scalar"),
        Case((f32(), ints([1, 1, 1])), id="from-scalar"),
    ],
    "Transpose": [
        Case((f32(2, 3, 4), ints([1, 2, 0])), id="perm"),
        Case((f32(2, 3), None), id="default"),
        Case((f32(2, 3, 4), None), id="default-rank3"),
        Case((f32(2, 3), ints([0, 1])), id="identity"),
    ],
    # math_ops
    "Add": _binary_cases() + [Case((i32(2, 3), i32(3)), id="int32", grad=False)],
    "Subtract": _binary_cases(),
    "Multiply": _binary_cases() + [Case((i32(2, 3), i32(3)), id="int32", grad=False)],
    "RealDiv": _binary_cases(y_lo=0.5),
    "AddN": [
        Case(([f32(2, 3), f32(2, 3), f32(2, 3)],), id="three"),
        Case(([f32(4), f32(4)],), id="two"),
        Case(([f32(4)],), id="one"),
    ],
    "Negate": _unary_cases() + [Case((i32(4),), id="int32", grad=False)],
    "Square": _unary_cases() + [Case((i32(4),), id="int32", grad=False)],
    "Sqrt": _unary_cases(lambda *s: f32(*s, lo=0.3, hi=3.0)),
    "Exp": _unary_cases(),
    "Log": _unary_cases(lambda *s: f32(*s, lo=0.3, hi=3.0)),
    "Tanh": _unary_cases(),
    "Sigmoid": _unary_cases(lambda *s: f32(*s, lo=-6.0, hi=6.0)),
    "MatMul": [
        Case((f32(3, 4), f32(4, 5)), id="plain"),
        Case((f32(4, 3), f32(4, 5)), {"transpose_a": True}, id="ta"),
        Case((f32(3, 4), f32(5, 4)), {"transpose_b": True}, id="tb"),
        Case((f32(4, 3), f32(5, 4)), {"transpose_a": True, "transpose_b": True}, id="ta-tb"),
        Case((f32(1, 4), f32(4, 1)), id="dot"),
        Case((i32(2, 3), i32(3, 2)), id="int32", grad=False),
    ],
    "Sum": _reduction_cases(f32),
    "Mean": _reduction_cases(f32),
    "Max": _reduction_cases(distinct),
    # nn_ops
    "Relu": _unary_cases(away_from_zero) + [Case((i32(5),), id="int32", grad=False)],
    "Softmax": [Case((f32(3, 5),), id="matrix"), Case((f32(5),), id="vector"),
                Case((f32(2, 3, 4),), id="rank-3")],
    "LogSoftmax": [Case((f32(3, 5),), id="matrix"), Case((f32(5),), id="vector"),
                   Case((f32(2, 3, 4),), id="rank-3")],
    "SoftmaxCrossEntropyWithLogits": [
        Case((f32(4, 5), distributions(4, 5)), id="soft-labels"),
        Case((f32(3, 4), np.eye(4, dtype=np.float32)[[0, 2, 3]]), id="one-hot"),
        Case((f32(3, 4) * 50, distributions(3, 4)), id="large-logits"),
    ],
    # state_ops
    "Variable": [Case((), _variable_attrs, id="glorot", grad=False),
                 Case((), {"initializer": "value", "initial_value": [1.0, 2.0]}, id="value", grad=False)],
}

NOT_DIFFERENTIABLE = {"Const": "none", "Placeholder": "none", "Variable": "none", "StopGradient": "stop"}
