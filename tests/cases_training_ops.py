"""Test cases for state_ops' Assign blocks and training_ops (Apply*, Gradients).

The update blocks are not differentiable; their formulas are checked step by step in
tests/test_state.py. Gradients is computed by the runtime, so it is tested there too.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from casekit import Case, f32

Case = partial(Case, grad=False)  # noqa: F811  (none of these blocks is differentiable)

_var = f32(2, 3)


def s(v):
    return np.float32(v).reshape(())


CASES = {
    "Assign": [Case((_var, f32(2, 3)), id="same"), Case((_var, f32(3)), id="broadcast")],
    "AssignAdd": [Case((_var, f32(2, 3)))],
    "AssignSub": [Case((_var, f32(2, 3)))],
    "ApplyGradientDescent": [Case((_var, s(0.1), f32(2, 3)))],
    "ApplyMomentum": [Case((_var, f32(2, 3), s(0.1), f32(2, 3), s(0.9))),
                      Case((_var, f32(2, 3), s(0.1), f32(2, 3), s(0.9)), {"use_nesterov": True}, id="nesterov")],
    "ApplyAdam": [Case((_var, f32(2, 3), f32(2, 3, lo=0.1), s(0.9), s(0.999), s(0.01), s(0.9), s(0.999),
                        s(1e-7), f32(2, 3)))],
    "ApplyRMSProp": [Case((_var, f32(2, 3, lo=0.1), f32(2, 3), s(0.01), s(0.9), s(0.5), s(1e-7), f32(2, 3)))],
    "ApplyAdagrad": [Case((_var, f32(2, 3, lo=0.1), s(0.1), f32(2, 3)))],
    "ApplyAdadelta": [Case((_var, f32(2, 3, lo=0.1), f32(2, 3, lo=0.1), s(1.0), s(0.95), s(1e-6), f32(2, 3)))],
    "ApplyFtrl": [Case((_var, f32(2, 3, lo=0.1), f32(2, 3), f32(2, 3), s(0.1), s(0.01), s(0.01), s(-0.5)))],
    "Gradients": [],  # computed by the runtime: tests/test_state.py
}

NOT_DIFFERENTIABLE = {name: "none" for name in CASES}
