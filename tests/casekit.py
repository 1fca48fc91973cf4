"""Shared pieces of the block test-case tables (tests/cases_*.py): the Case record and input makers."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

_rng = np.random.default_rng(20240521)


def f32(*shape, lo=-2.0, hi=2.0):
    return _rng.uniform(lo, hi, size=shape).astype(np.float32)


def away_from_zero(*shape):
    """Entries in ±[0.2, 2]: no kink of Relu nearby."""
    return (_rng.uniform(0.2, 2.0, size=shape) * _rng.choice([-1, 1], size=shape)).astype(np.float32)


def distinct(*shape):
    """Entries at least 0.1 apart: no ties for Max."""
    n = int(np.prod(shape))
    return (_rng.permutation(n) * 0.1 - n * 0.05).reshape(shape).astype(np.float32)


def i32(*shape):
    return _rng.integers(-5, 6, size=shape).astype(np.int32)


def ints(values):
    return np.array(values, dtype=np.int64)


def distributions(rows, classes):
    return _rng.dirichlet(np.ones(classes), size=rows).astype(np.float32)


@dataclass
class Case:
    """One way to call a block: a value per input port (a list for an InputList), its attrs,
    and for placeholder/variable blocks the value fed or stored."""

    inputs: tuple = ()
    attrs: dict = field(default_factory=dict)
    value: Any = None
    id: str = ""
    grad: bool = True  # gradient-checkable (float inputs, no kink at the point)


def _binary_cases(y_lo=-2.0):
    return [
        Case((f32(2, 3), f32(2, 3, lo=y_lo)), id="same"),
        Case((f32(2, 3), f32(3, lo=y_lo)), id="y-broadcast"),
        Case((f32(3), f32(2, 3, lo=y_lo)), id="x-broadcast"),
        Case((f32(2, 1), f32(1, 3, lo=y_lo)), id="both-broadcast"),
        Case((f32(), f32(2, 3, lo=y_lo)), id="scalar-x"),
        Case((f32(4, 1, 3), f32(2, 1, lo=y_lo)), id="rank-3"),
        Case((f32(), f32(lo=y_lo)), id="scalars"),
    ]


def _unary_cases(make=f32):
    return [Case((make(2, 3),), id="matrix"), Case((make(),), id="scalar"), Case((make(5),), id="vector")]


def _reduction_cases(make):
    return [
        Case((make(3, 4), None), id="all"),
        Case((make(3, 4), None), {"keep_dims": True}, id="all-keep"),
        Case((make(3, 4), ints(1)), id="axis1"),
        Case((make(3, 4), ints(-2)), {"keep_dims": True}, id="axis-2-keep"),
        Case((make(2, 3, 4), ints([0, 2])), id="list"),
        Case((make(2, 3, 4), ints([2, 0])), {"keep_dims": True}, id="list-keep"),
        Case((make(5), ints(0)), id="vector"),
        Case((make(64, 80), ints(0)), {"keep_dims": True}, id="large"),  # a view, not a copy
        Case((make(), None), id="scalar"),
        Case((i32(3, 4), ints(1)), id="int32", grad=False),
    ]
