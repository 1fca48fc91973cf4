"""Test cases for the math_ops blocks of issue 3 (the core ones are in cases_core.py).

Blocks whose output is not float (comparisons, ArgMax, Cast to another dtype) take float64,
float16 or integer inputs here: tests/test_blocks.py expects float32 out of float32 in.
tests/test_math_ops.py covers them with float32 inputs and checks their semantics.
"""
from __future__ import annotations

import numpy as np

from casekit import (Case, _binary_cases, _reduction_cases, _unary_cases, away_from_zero, distinct, f32, i32,
                     ints)

_rng = np.random.default_rng(31)


def _uniform(lo, hi):
    return lambda *shape: _rng.uniform(lo, hi, size=shape).astype(np.float32)


def f64(*shape, lo=-2.0, hi=2.0):
    return _rng.uniform(lo, hi, size=shape)


def _bools(*shape):
    return _rng.random(shape) < 0.5


def _pow_cases():
    x, y = _uniform(0.5, 2.0), _uniform(-2.0, 2.0)
    return [
        Case((x(2, 3), y(2, 3)), id="same"),
        Case((x(2, 3), y(3)), id="y-broadcast"),
        Case((x(3), y(2, 3)), id="x-broadcast"),
        Case((x(2, 1), y(1, 3)), id="both-broadcast"),
        Case((x(), y(2, 3)), id="scalar-x"),
        Case((x(), y()), id="scalars"),
        # d/dy does not exist for a negative base (TF gives 0): tests/test_math_ops.py checks it.
        Case((f32(2, 3), np.array([2.0, 3.0, 1.0], np.float32)), id="negative-base", grad=False),
        Case((i32(2, 3), np.array([0, 1, 2], np.int32)), id="int32", grad=False),
    ]


def _floormod_cases():
    # x / y stays within 0.39 of n + 0.5: away from the jumps of floor(x / y).
    def x(*shape):
        return (2 * (_rng.integers(-3, 3, size=shape) + 0.5)).astype(np.float32)

    y = _uniform(1.8, 2.2)
    return [
        Case((x(2, 3), y(2, 3)), id="same"),
        Case((x(2, 3), y(3)), id="y-broadcast"),
        Case((x(3), y(2, 3)), id="x-broadcast"),
        Case((x(2, 1), -y(1, 3)), id="negative-divisor"),
        Case((x(), y()), id="scalars"),
        Case((np.array([-7, 7, -7, 6], np.int32), np.array([3, 3, -3, 3], np.int32)), id="int32", grad=False),
    ]


def _clip_cases():
    lo, hi = _uniform(-1.0, -0.5), _uniform(0.5, 1.0)
    return [
        Case((f32(2, 3), lo(), hi()), id="scalar-bounds"),
        Case((f32(2, 3), lo(2, 3), hi(2, 3)), id="same"),
        Case((f32(4, 3), lo(3), hi(4, 1)), id="broadcast-bounds"),
        Case((f32(2, 2, 3), lo(1, 3), hi()), id="rank-3"),
        Case((f32(5), lo(), hi(5)), id="vector"),
        Case((i32(2, 3), np.int32(-2), np.int32(2)), id="int32", grad=False),
    ]


def _scan_cases(make):
    cases = []
    for exclusive in (False, True):
        for reverse in (False, True):
            attrs = {"exclusive": exclusive, "reverse": reverse}
            tag = ("-excl" if exclusive else "") + ("-rev" if reverse else "")
            cases += [Case((make(3, 4), ints(1)), attrs, id="axis1" + tag),
                      Case((make(3, 4), ints(-2)), attrs, id="axis-2" + tag),
                      Case((make(2, 3, 4), None), attrs, id="default-axis" + tag),
                      Case((make(5), ints(0)), attrs, id="vector" + tag)]
    cases.append(Case((make(2, 0), ints(1)), id="empty"))
    cases.append(Case((i32(3, 4), ints(1)), {"exclusive": True}, id="int32", grad=False))
    return cases


def _with_zeros(*shape):
    x = f32(*shape)
    flat = x.reshape(-1)
    flat[::3] = 0  # one or more zeros in most lanes
    return x


def _some_zeros(*shape):
    """Zeros in some entries (the gradient check needs a product that is not 0 everywhere)."""
    x = f32(*shape)
    x[0, 1] = x[1, 1, 2] = x[0, 2, 0] = x[1, 2, 3] = 0
    return x


def _prod_zero_cases():
    one_zero = f32(3, 4)
    one_zero[1, 2] = 0
    two_zeros = f32(3, 4)
    two_zeros[2, 0] = two_zeros[2, 3] = 0
    return [
        Case((one_zero, ints(1)), id="one-zero"),
        Case((two_zeros, ints(1)), id="two-zeros"),
        Case((one_zero, None), id="zero-all"),
        Case((two_zeros, ints(-1)), {"keep_dims": True}, id="two-zeros-keep"),
        Case((_some_zeros(2, 3, 4), ints([0, 2])), id="zeros-list"),
        Case((np.zeros((2, 3), np.float32), ints(0)), id="all-zeros"),
        Case((f32(2, 0), ints(1)), id="empty"),
        Case((np.float32([[1e-25, 1e25], [1e-30, 1e-30]]), ints(1)), id="underflow"),
    ]


def _cumprod_zero_cases():
    cases = []
    x = np.array([[1.5, 0.0, -2.0, 0.5, 0.0, 3.0], [0.5, 2.0, 0.0, 1.5, -1.0, 0.7]], np.float32)
    for exclusive in (False, True):
        for reverse in (False, True):
            attrs = {"exclusive": exclusive, "reverse": reverse}
            tag = ("-excl" if exclusive else "") + ("-rev" if reverse else "")
            cases += [Case((x, ints(1)), attrs, id="zeros" + tag),
                      Case((_with_zeros(4, 3), ints(0)), attrs, id="zeros-axis0" + tag)]
    return cases


def _batch_matmul_cases():
    cases = []
    for adj_x in (False, True):
        for adj_y in (False, True):
            attrs = {"adj_x": adj_x, "adj_y": adj_y}
            tag = f"{'-ax' if adj_x else ''}{'-ay' if adj_y else ''}"

            def xm(*batch, m=3, k=4):
                return f32(*batch, k, m) if adj_x else f32(*batch, m, k)

            def ym(*batch, k=4, n=2):
                return f32(*batch, n, k) if adj_y else f32(*batch, k, n)

            cases += [Case((xm(2), ym(2)), attrs, id="batch" + tag),
                      Case((xm(2, 1), ym(3)), attrs, id="broadcast" + tag)]
    return cases + [
        Case((f32(3, 4), f32(4, 5)), id="rank-2"),
        Case((f32(2, 3, 4), f32(4, 5)), id="y-matrix"),
        Case((f32(3, 4), f32(2, 4, 5)), id="x-matrix"),
        Case((f32(1, 3, 4), f32(2, 1, 4, 5)), id="rank-4-broadcast"),
        Case((i32(2, 2, 3), i32(3, 2)), id="int32", grad=False),
    ]


def _einsum(equation, *inputs, id, grad=True):
    return Case((list(inputs),), {"equation": equation}, id=id, grad=grad)


def _einsum_cases():
    return [
        _einsum("ij,jk->ik", f32(3, 4), f32(4, 2), id="matmul"),
        _einsum("ij,jk", f32(3, 4), f32(4, 2), id="implicit-matmul"),
        _einsum("ij->ji", f32(2, 3), id="transpose"),
        _einsum("ij->", f32(2, 3), id="sum-all"),
        _einsum("ij", f32(2, 3), id="implicit-identity"),
        _einsum("ba", f32(2, 3), id="implicit-transpose"),
        _einsum("i,i->", f32(5), f32(5), id="dot"),
        _einsum("i,j->ij", f32(3), f32(4), id="outer"),
        _einsum("bi,bi->b", f32(4, 3), f32(4, 3), id="row-dots"),
        _einsum("bij,bjk->bik", f32(2, 3, 4), f32(2, 4, 5), id="batch-matmul"),
        _einsum("ijk,jl->lki", f32(2, 3, 4), f32(3, 2), id="permuted-out"),
        _einsum("ij,k->ik", f32(2, 3), f32(4), id="own-letters-summed"),
        _einsum("abc->ca", f32(2, 3, 4), id="one-input-sum-b"),
        _einsum("...ij,...jk->...ik", f32(2, 1, 3, 4), f32(5, 4, 2), id="ellipsis-broadcast"),
        _einsum("...ij,jk->...ik", f32(2, 3, 4), f32(4, 5), id="ellipsis-one-side"),
        _einsum("i...j,j->...i", f32(3, 2, 1, 4), f32(4), id="ellipsis-middle"),
        _einsum("...i,...i", f32(1, 3), f32(4, 3), id="implicit-ellipsis"),
        _einsum("...ij->...ji", f32(2, 3, 4), id="ellipsis-transpose"),
        _einsum("ij,jk->ik", f32(3, 4).astype(np.float64), f32(4, 2).astype(np.float64), id="float64"),
        _einsum("ij,jk->ik", i32(2, 3), i32(3, 2), id="int32", grad=False),
    ]


def _compare_cases(ordered=True):
    cases = [
        Case((f64(2, 3), f64(3)), id="float64-broadcast", grad=False),
        Case((np.float16([1.0, 2.0, np.nan]), np.float16([1.0, 3.0, np.nan])), id="float16-nan", grad=False),
        Case((i32(2, 1), i32(1, 3)), id="int32-both-broadcast", grad=False),
        Case((np.array(2, np.int64), i32(3).astype(np.int64)), id="int64-scalar-x", grad=False),
        Case((np.int32([1, 2, 3]), np.int32([3, 2, 1])), id="ties", grad=False),
    ]
    if not ordered:
        cases.append(Case((_bools(2, 3), _bools(3)), id="bool", grad=False))
    return cases


def _logical_cases():
    return [Case((_bools(2, 3), _bools(2, 3)), id="same", grad=False),
            Case((_bools(2, 3), _bools(3)), id="broadcast", grad=False),
            Case((np.bool_(True), _bools(4)), id="scalar", grad=False)]


def _bool_reduction_cases():
    return [
        Case((_bools(3, 4), None), id="all", grad=False),
        Case((_bools(3, 4), ints(1)), {"keep_dims": True}, id="axis1-keep", grad=False),
        Case((_bools(2, 3, 4), ints([0, 2])), id="list", grad=False),
        Case((np.zeros((2, 0), bool), ints(1)), id="empty", grad=False),
        Case((np.bool_(True), None), id="scalar", grad=False),
    ]


def _arg_cases():
    tie = np.float64([[1.0, 3.0, 3.0], [2.0, 2.0, -1.0]])
    return [
        Case((f64(3, 4), ints(1)), id="axis1", grad=False),
        Case((f64(3, 4), None), id="default-axis", grad=False),
        Case((f64(2, 3, 4), ints(-1)), {"output_type": "int32"}, id="int32-out", grad=False),
        Case((tie, ints(1)), id="ties", grad=False),
        Case((i32(5), ints(0)), id="int-vector", grad=False),
    ]


_ROUNDING = _unary_cases(lambda *s: f32(*s, lo=-3.0, hi=3.0))


def _nd(cases):
    """The same cases, marked not gradient-checked."""
    return [Case(c.inputs, c.attrs, id=c.id, grad=False) for c in cases]


CASES: dict[str, list[Case]] = {
    # unary
    "Abs": _unary_cases(away_from_zero) + [Case((i32(4),), id="int32", grad=False)],
    "Sign": _nd(_unary_cases(away_from_zero)) + [Case((i32(5),), id="int32", grad=False)],
    "Rsqrt": _unary_cases(_uniform(0.3, 3.0)),
    "Reciprocal": _unary_cases(away_from_zero),
    "Log1p": _unary_cases(_uniform(-0.7, 3.0)),
    "Expm1": _unary_cases(),
    "Sin": _unary_cases(_uniform(-4.0, 4.0)),
    "Cos": _unary_cases(_uniform(-4.0, 4.0)),
    "Tan": _unary_cases(_uniform(-1.2, 1.2)),
    "Asin": _unary_cases(_uniform(-0.9, 0.9)),
    "Acos": _unary_cases(_uniform(-0.9, 0.9)),
    "Atan": _unary_cases(_uniform(-4.0, 4.0)),
    "Sinh": _unary_cases(),
    "Cosh": _unary_cases(),
    "Erf": _unary_cases(_uniform(-3.0, 3.0)) + [Case((np.float32([-7.0, -4.5, -0.3, 0.0, 0.4, 2.0, 5.0]),),
                                                     id="tails"),
                                                Case((f64(3, 2),), id="float64")],
    "Floor": _nd(_ROUNDING),
    "Ceil": _nd(_ROUNDING),
    "Round": _nd(_ROUNDING) + [Case((np.float32([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5]),), id="halves",
                                    grad=False),
                               Case((i32(4),), id="int32", grad=False)],
    # binary
    "Pow": _pow_cases(),
    "Maximum": _binary_cases() + [Case((i32(2, 3), i32(3)), id="int32", grad=False)],
    "Minimum": _binary_cases() + [Case((i32(2, 3), i32(3)), id="int32", grad=False)],
    "SquaredDifference": _binary_cases() + [Case((i32(2, 3), i32(3)), id="int32", grad=False)],
    "FloorDiv": _nd(_binary_cases(y_lo=0.5)) + [
        Case((np.int32([-7, 7, -7, 6]), np.int32([2, 2, -2, 3])), id="int32", grad=False)],
    "FloorMod": _floormod_cases(),
    "ClipByValue": _clip_cases(),
    # reductions
    "Min": _reduction_cases(distinct),
    "Prod": _reduction_cases(f32) + _prod_zero_cases(),
    "ArgMax": _arg_cases(),
    "ArgMin": _arg_cases(),
    "All": _bool_reduction_cases(),
    "Any": _bool_reduction_cases(),
    # comparisons and logic
    "Equal": _compare_cases(ordered=False),
    "NotEqual": _compare_cases(ordered=False),
    "Greater": _compare_cases(),
    "GreaterEqual": _compare_cases(),
    "Less": _compare_cases(),
    "LessEqual": _compare_cases(),
    "LogicalAnd": _logical_cases(),
    "LogicalOr": _logical_cases(),
    "LogicalNot": [Case((_bools(2, 3),), id="matrix", grad=False),
                   Case((np.bool_(False),), id="scalar", grad=False)],
    # cast
    "Cast": [
        Case((np.float16([[0.5, -1.25], [3.0, 2.0]]),), {"DstT": "float64"}, id="float16-to-float64"),
        Case((f64(2, 3),), {"DstT": "float64"}, id="float64-same"),
        Case((f32(2, 3),), {"DstT": "float32"}, id="float32-same", grad=False),
        Case((f64(2, 3),), {"DstT": "float32"}, id="float64-to-float32", grad=False),
        Case((f64(2, 3),), {"DstT": "int32"}, id="float-to-int", grad=False),
        Case((i32(2, 3),), {"DstT": "float32"}, id="int-to-float", grad=False),
        Case((i32(4),), {"DstT": "bool"}, id="int-to-bool", grad=False),
        Case((_bools(3),), {"DstT": "float32"}, id="bool-to-float", grad=False),
        Case((np.float16(1.5),), {"DstT": "int64"}, id="scalar", grad=False),
    ],
    # scans
    "Cumsum": _scan_cases(f32),
    "Cumprod": _scan_cases(f32) + _cumprod_zero_cases(),
    # matrices
    "BatchMatMul": _batch_matmul_cases(),
    "Einsum": _einsum_cases(),
    # sequences
    "Range": [
        Case((ints(0), ints(5), ints(1)), id="ints", grad=False),
        Case((None, ints(4), None), id="limit-only", grad=False),
        Case((ints(10), ints(1), ints(-3)), id="negative-delta", grad=False),
        Case((np.float32(0), np.float32(1), np.float32(0.3)), id="floats", grad=False),
        Case((ints(1), ints(7), ints(2)), {"dtype": "float64"}, id="float64", grad=False),
        Case((ints(3), ints(3), ints(1)), {"dtype": "int64"}, id="empty", grad=False),
    ],
    "LinSpace": [
        Case((np.float32(0), np.float32(1), ints(5)), id="float32", grad=False),
        Case((np.float64(-1), np.float64(2), ints(4)), id="float64", grad=False),
        Case((np.float32(3), np.float32(7), ints(1)), id="one", grad=False),
    ],
}

NOT_DIFFERENTIABLE = {name: "none" for name in (
    "Sign", "Floor", "Ceil", "Round", "FloorDiv", "ArgMax", "ArgMin", "All", "Any", "Equal", "NotEqual",
    "Greater", "GreaterEqual", "Less", "LessEqual", "LogicalAnd", "LogicalOr", "LogicalNot", "Range",
    "LinSpace")}
