"""Semantics of the math_ops blocks of issue 3: TensorFlow's results and gradient rules computed
by hand, edge cases (ties, zeros, tails, bounds) and error messages. The registry-wide checks
(infer vs forward, gradient checks, cotangent dtypes) run over tests/cases_math_ops.py."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from blockflow.compile.compiler import compile_project
from blockflow.run.gradcheck import check_block
from blockflow.registry import Registry
from blockflow.run.runtime import run
from blockflow.errors import NumericsError
from blockflow.spec import ShapeError, TensorType
from blockflow_blocks import all_blocks
from blockflow_blocks.math_unary import _erf64

from casekit import ints
from diagrams import chain

REG = Registry(all_blocks())
F32, F64 = np.float32, np.float64
RNG = np.random.default_rng(17)


def spec(name):
    return REG[name]


def vjp(name, g, *inputs, needs=None, **attrs):
    """Call a block's forward and vjp as the runtime does (every cotangent wanted)."""
    s = spec(name)
    values, problems = s.validate_attrs(attrs)
    assert not problems, problems
    out = s.forward(*inputs, **values)
    if "needs" in s.vjp_context:
        values["needs"] = needs or tuple(not p.static for p in s.inputs)
    return s.vjp(g, out, *inputs, **values)


def fwd(name, *inputs, **attrs):
    s = spec(name)
    values, problems = s.validate_attrs(attrs)
    assert not problems, problems
    return s.forward(*inputs, **values)


def infer(name, *inputs, **attrs):
    s = spec(name)
    values, problems = s.validate_attrs(attrs)
    assert not problems, problems
    return s.infer(*inputs, **values)


def t(shape, dtype="float32"):
    return TensorType(shape, dtype)


@pytest.mark.parametrize("alias, name", [
    ("Inv", "Reciprocal"), ("Mod", "FloorMod"), ("ReduceMin", "Min"), ("ReduceProd", "Prod"),
    ("ReduceAll", "All"), ("ReduceAny", "Any"), ("BatchMatMulV2", "BatchMatMul"), ("reduce_prod", "Prod"),
])
def test_tf_aliases(alias, name):
    assert REG.resolve_alias(alias) == name


def test_integer_and_bool_outputs_say_they_are_not_differentiable():
    for name in ("ArgMax", "ArgMin", "All", "Any", "Equal", "NotEqual", "Greater", "GreaterEqual", "Less",
                 "LessEqual", "LogicalAnd", "LogicalOr", "LogicalNot", "Range", "LinSpace"):
        s = spec(name)
        assert s.gradient == "none" and not any(o.differentiable for o in s.outputs), name
        assert "not differentiable" in s.doc.lower(), name
    for name in ("Sign", "Floor", "Ceil", "Round", "FloorDiv"):
        assert spec(name).gradient == "none" and "not differentiable" in spec(name).doc.lower(), name


# --------------------------------------------------------------------------------------------
# Erf


def test_erf_matches_math_erf_to_a_few_ulps_over_the_whole_line():
    x = np.concatenate([RNG.uniform(-7, 7, 20000), RNG.uniform(-0.6, 0.6, 5000),
                        np.logspace(-300, 1, 2000), -np.logspace(-300, 1, 2000),
                        [0.46875, -0.46875, 4.0, -4.0, 5.9, 6.0, 6.5, 27.0, 1e300]])
    ref = np.array([math.erf(v) for v in x])
    got = _erf64(x)
    ulps = np.abs(got - ref) / np.abs(ref) / np.finfo(F64).eps
    assert ulps.max() <= 4, f"max error {ulps.max():.2f} ulps at x = {x[ulps.argmax()]!r}"
    assert np.all(np.abs(got) <= 1)


def test_erf_tails_and_special_values():
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 6.0, -30.0, 5e-324])
    got = fwd("Erf", x)
    np.testing.assert_array_equal(got[:4], [0.0, -0.0, 1.0, -1.0])
    assert np.signbit(got[1]) and np.isnan(got[4])
    assert got[5] == 1.0 and got[6] == -1.0
    assert got[7] == math.erf(5e-324)
    # erf(x) close to 1 keeps every bit: 1 - erf(4.5) = 1.97e-10.
    assert fwd("Erf", np.array(4.5)) == math.erf(4.5)


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_erf_in_low_precision_is_the_rounded_float64_value(dtype):
    x = RNG.uniform(-5, 5, 500).astype(dtype)
    got = fwd("Erf", x)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, np.array([math.erf(float(v)) for v in x]).astype(dtype))
    assert fwd("Erf", dtype(0.25)).dtype == dtype


def test_erf_gradient():
    x = np.array([-2.0, 0.0, 0.5], F32)
    (gx,) = vjp("Erf", np.ones(3, F32), x)
    assert gx.dtype == F32
    np.testing.assert_allclose(gx, 2 / np.sqrt(np.pi) * np.exp(-x.astype(F64) ** 2), rtol=1e-6)


# --------------------------------------------------------------------------------------------
# Elementwise unary ops


def test_unary_values_and_dtypes():
    x = np.array([0.25, 0.5, 0.9], F32)
    expected = {"Rsqrt": 1 / np.sqrt(x), "Reciprocal": 1 / x, "Log1p": np.log1p(x), "Expm1": np.expm1(x),
                "Sin": np.sin(x), "Cos": np.cos(x), "Tan": np.tan(x), "Asin": np.arcsin(x),
                "Acos": np.arccos(x), "Atan": np.arctan(x), "Sinh": np.sinh(x), "Cosh": np.cosh(x),
                "Abs": np.abs(x), "Sign": np.sign(x)}
    for name, want in expected.items():
        got = fwd(name, x)
        assert got.dtype == F32, name
        np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=name)
        got = fwd(name, F32(0.5))
        assert got.dtype == F32 and np.shape(got) == (), name


def test_unary_gradients_keep_float32_for_scalars():
    """0-d values may arrive as numpy scalars: constants must not promote them to float64."""
    for name in ("Rsqrt", "Reciprocal", "Log1p", "Expm1", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan",
                 "Sinh", "Cosh", "Erf", "Abs"):
        (gx,) = vjp(name, F32(1.5), F32(0.5))
        assert np.asarray(gx).dtype == F32, name


def test_abs_gradient_is_zero_at_zero_and_sign_has_none():
    x = np.array([-2.0, 0.0, 3.0], F32)
    (gx,) = vjp("Abs", np.full(3, 2.0, F32), x)
    np.testing.assert_array_equal(gx, [-2.0, 0.0, 2.0])
    assert spec("Sign").vjp is None
    np.testing.assert_array_equal(fwd("Sign", np.array([-3, 0, 5], np.int32)), [-1, 0, 1])


def test_asin_gradient_is_accurate_near_one():
    x = np.array([1 - 2 ** -30])
    (gx,) = vjp("Asin", np.ones(1), x)
    np.testing.assert_allclose(gx, 1 / np.sqrt((1 - x) * (1 + x)), rtol=1e-15)


def test_round_is_bankers_rounding_and_keeps_integers():
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49999997, -3.7], F32)
    np.testing.assert_array_equal(fwd("Round", x), [-2, -2, -0, 0, 2, 2, 0, -4])
    i = np.array([3, -4], np.int32)
    assert fwd("Round", i).dtype == np.int32
    np.testing.assert_array_equal(fwd("Floor", np.array([-1.5, 1.5], F32)), [-2, 1])
    np.testing.assert_array_equal(fwd("Ceil", np.array([-1.5, 1.5], F32)), [-1, 2])


# --------------------------------------------------------------------------------------------
# Binary ops


@pytest.mark.parametrize("name, to_x", [("Maximum", [1, 1, 0]), ("Minimum", [1, 0, 1])])
def test_maximum_minimum_ties_send_the_gradient_to_x(name, to_x):
    x = np.array([2.0, 3.0, 1.0], F32)
    y = np.array([2.0, 1.0, 3.0], F32)
    gx, gy = vjp(name, np.array([1.0, 2.0, 4.0], F32), x, y)
    np.testing.assert_array_equal(gx, np.array([1.0, 2.0, 4.0]) * to_x)
    np.testing.assert_array_equal(gy, np.array([1.0, 2.0, 4.0]) * np.logical_not(to_x))


def test_maximum_gradient_unbroadcasts_both_ways():
    x = np.array([[1.0], [5.0]], F32)  # [2, 1]
    y = np.array([2.0, 3.0, 6.0], F32)  # [3]
    gx, gy = vjp("Maximum", np.ones((2, 3), F32), x, y)
    np.testing.assert_array_equal(gx, [[0.0], [2.0]])
    np.testing.assert_array_equal(gy, [1.0, 1.0, 2.0])


def test_squared_difference():
    x, y = np.array([[1.0, 2.0]], F32), np.array([[3.0], [0.5]], F32)
    np.testing.assert_array_equal(fwd("SquaredDifference", x, y), [[4.0, 1.0], [0.25, 2.25]])
    gx, gy = vjp("SquaredDifference", np.ones((2, 2), F32), x, y)
    np.testing.assert_array_equal(gx, [[2 * (-2 + 0.5), 2 * (-1 + 1.5)]])
    np.testing.assert_array_equal(gy, [[-2 * (-2 - 1)], [-2 * (0.5 + 1.5)]])


def test_pow_gradients_follow_tensorflow():
    x = np.array([2.0, -2.0, 0.0, 3.0], F32)
    y = np.array([3.0, 2.0, 2.0, 0.5], F32)
    z = fwd("Pow", x, y)
    np.testing.assert_allclose(z, [8.0, 4.0, 0.0, np.sqrt(3.0)], rtol=1e-6)
    gx, gy = vjp("Pow", np.ones(4, F32), x, y)
    assert gx.dtype == gy.dtype == F32
    np.testing.assert_allclose(gx, [12.0, -4.0, 0.0, 0.5 / np.sqrt(3.0)], rtol=1e-6)
    # d/dy = z * log(x) where x > 0, and 0 where x <= 0 (not nan).
    np.testing.assert_allclose(gy, [8 * np.log(2.0), 0.0, 0.0, np.sqrt(3.0) * np.log(3.0)], rtol=1e-6)


def test_pow_gradient_is_zero_where_g_is_zero_even_at_a_singularity():
    x = np.array([0.0, 0.0, 4.0], F32)
    y = np.array([0.5, 0.5, 0.5], F32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 0 ** -0.5 divides by zero, as it should
        gx, _ = vjp("Pow", np.array([0.0, 1.0, 1.0], F32), x, y)
    assert gx[0] == 0.0 and np.isinf(gx[1]) and gx[2] == 0.25


def test_pow_of_integers():
    out = fwd("Pow", np.array([2, -3], np.int32), np.array([10, 3], np.int32))
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, [1024, -27])


def test_floordiv_and_floormod_follow_tensorflow_signs():
    x = np.array([-7, 7, -7, 7], np.int32)
    y = np.array([2, -2, -2, 2], np.int32)
    np.testing.assert_array_equal(fwd("FloorDiv", x, y), [-4, -4, 3, 3])
    np.testing.assert_array_equal(fwd("FloorMod", x, np.array([3, -3, -3, 3], np.int32)), [2, -2, -1, 1])
    xf = np.array([-7.5, 7.5, 1.0], F32)
    yf = np.array([2.0, -2.0, 0.1], F32)
    np.testing.assert_array_equal(fwd("FloorDiv", xf, yf), [-4.0, -4.0, 10.0])  # TF: floor(1 / 0.1) = 10
    np.testing.assert_allclose(fwd("FloorMod", xf[:2], yf[:2]), [0.5, -0.5])
    assert fwd("FloorDiv", xf, yf).dtype == F32


@pytest.mark.parametrize("name", ["FloorDiv", "FloorMod"])
def test_integer_division_by_zero_is_an_error(name):
    with pytest.raises(ZeroDivisionError, match="division by zero"):
        fwd(name, np.array([1, 2], np.int32), np.array([1, 0], np.int32))


def test_floormod_gradient():
    x = np.array([[7.0, -7.0]], F32)
    y = np.array([[2.0], [-3.0]], F32)
    gx, gy = vjp("FloorMod", np.ones((2, 2), F32), x, y)
    np.testing.assert_array_equal(gx, [[2.0, 2.0]])
    # -floor(x / y): -(3 + -4) for y = 2 and -(-3 + 2) for y = -3.
    np.testing.assert_array_equal(gy, [[1.0], [1.0]])


# --------------------------------------------------------------------------------------------
# Reductions


@pytest.mark.parametrize("x, axis, expected", [
    ([3.0, 1.0, 1.0], None, [0.0, 0.5, 0.5]),
    ([[2.0, 2.0, 1.0], [0.0, 5.0, 0.0]], 1, [[0.0, 0.0, 1.0], [0.5, 0.0, 0.5]]),
    ([[4.0, 1.0], [1.0, 1.0]], None, [[0.0, 1 / 3], [1 / 3, 1 / 3]]),
])
def test_min_splits_the_gradient_among_ties(x, axis, expected):
    x = np.array(x, F32)
    (gx, g_axis) = vjp("Min", np.ones(np.shape(fwd("Min", x, None if axis is None else ints(axis))), F32),
                       x, None if axis is None else ints(axis))
    assert g_axis is None and gx.dtype == F32
    np.testing.assert_allclose(gx, expected, rtol=1e-6)


def test_prod_gradient_with_zeros_is_exact():
    x = np.array([[2.0, 0.0, 3.0], [0.0, 5.0, 0.0], [1.5, 2.0, -1.0]], F32)
    gx, _ = vjp("Prod", np.array([1.0, 1.0, 2.0], F32), x, ints(1))
    np.testing.assert_array_equal(gx, [[0.0, 6.0, 0.0], [0.0, 0.0, 0.0], [-4.0, -3.0, 6.0]])
    assert fwd("Prod", np.array([2, 3, 4], np.int32), None).dtype == np.int32


def test_prod_gradient_when_the_product_under_or_overflows():
    x = np.array([1e-30, 1e-30, 1e30], F32)  # the product underflows to 0 on the way
    gx, _ = vjp("Prod", F32(1.0), x, None)
    np.testing.assert_allclose(gx, [1e-30 * 1e30, 1e-30 * 1e30, 0.0], rtol=1e-5, atol=1e-37)
    assert gx.dtype == F32


def test_prod_gradient_of_a_big_tensor_checks_out():
    x = RNG.uniform(0.5, 1.5, (64, 80))
    x[3, 4] = 0.0
    assert check_block(spec("Prod"), [x, ints(0)], {"keep_dims": True}).passed


@pytest.mark.parametrize("name, expected", [("ArgMax", [1, 0]), ("ArgMin", [0, 2])])
def test_arg_reductions_take_the_first_of_ties(name, expected):
    x = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, -1.0]], F32)
    out = fwd(name, x, ints(1))
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, expected)
    out = fwd(name, x, ints(-1), output_type="int32")
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, expected)
    assert infer(name, t((None, 3)), ints(1)) == t((None,), "int64")
    np.testing.assert_array_equal(fwd(name, x, None), [1, 0, 0] if name == "ArgMax" else [0, 1, 1])


@pytest.mark.parametrize("dimension, message", [(ints(2), "out of range"), (ints([0]), "single integer")])
def test_arg_reductions_reject_bad_dimensions(dimension, message):
    with pytest.raises(ShapeError, match=message):
        infer("ArgMax", t((2, 3)), dimension)
    with pytest.raises(ShapeError, match="out of range"):
        infer("ArgMin", t(()), None)


def test_all_and_any():
    x = np.array([[True, False], [True, True]])
    np.testing.assert_array_equal(fwd("All", x, ints(1)), [False, True])
    np.testing.assert_array_equal(fwd("Any", x, ints(0), keep_dims=True), [[True, True]])
    assert fwd("All", np.zeros((0,), bool), None) and not fwd("Any", np.zeros((0,), bool), None)
    with pytest.raises(ShapeError, match="bool"):
        infer("All", t((2,)), None)


# --------------------------------------------------------------------------------------------
# Comparisons and logic


@pytest.mark.parametrize("name, expected", [
    ("Equal", [[True, False, False], [False, False, False]]),
    ("NotEqual", [[False, True, True], [True, True, True]]),
    ("Greater", [[False, False, True], [False, False, False]]),
    ("GreaterEqual", [[True, False, True], [False, False, False]]),
    ("Less", [[False, True, False], [True, True, False]]),
    ("LessEqual", [[True, True, False], [True, True, False]]),
])
def test_comparisons_of_float32_broadcast_to_bool(name, expected):
    # Row 2 compares nan with 2: only NotEqual holds.
    x = np.array([[1.0, 2.0, 3.0], [0.0, 1.0, np.nan]], F32)
    y = np.array([1.0, 3.0, 2.0], F32)
    out = fwd(name, x, y)
    assert out.dtype == bool
    np.testing.assert_array_equal(out, expected)
    assert infer(name, t((2, 1)), t((None, 3))) == t((2, 3), "bool")


def test_comparisons_check_dtypes():
    with pytest.raises(ShapeError, match="float32 and float64"):
        infer("Less", t((2,)), t((2,), "float64"))
    with pytest.raises(ShapeError, match="bool"):
        infer("Greater", t((2,), "bool"), t((2,), "bool"))
    assert infer("Equal", t((2,), "bool"), t((2,), "bool")).dtype == bool
    with pytest.raises(ShapeError, match="do not broadcast"):
        infer("Equal", t((2,)), t((3,)))


def test_logical_ops():
    a, b = np.array([True, True, False, False]), np.array([True, False, True, False])
    np.testing.assert_array_equal(fwd("LogicalAnd", a, b), [True, False, False, False])
    np.testing.assert_array_equal(fwd("LogicalOr", a, b), [True, True, True, False])
    np.testing.assert_array_equal(fwd("LogicalNot", a), [False, False, True, True])
    with pytest.raises(ShapeError, match="bool"):
        infer("LogicalAnd", t((2,)), t((2,), "bool"))


# --------------------------------------------------------------------------------------------
# Cast


def test_cast_truncates_toward_zero_and_maps_to_bool():
    x = np.array([-1.7, -0.5, 0.0, 0.5, 2.9], F32)
    np.testing.assert_array_equal(fwd("Cast", x, DstT="int32"), [-1, 0, 0, 0, 2])
    np.testing.assert_array_equal(fwd("Cast", x, DstT="bool"), [True, True, False, True, True])
    np.testing.assert_array_equal(fwd("Cast", np.array([True, False]), DstT="float32"), [1.0, 0.0])
    assert fwd("Cast", x, DstT="float64").dtype == F64
    assert infer("Cast", t((None, 2), "int32"), DstT="float16") == t((None, 2), "float16")


def test_cast_gradient_is_cast_back_between_floats_and_cut_otherwise():
    x = np.array([1.5, -2.0], F32)
    (gx,) = vjp("Cast", np.array([0.25, 4.0]), x, DstT="float64")
    assert gx.dtype == F32
    np.testing.assert_array_equal(gx, [0.25, 4.0])
    assert vjp("Cast", np.ones(2, F32), np.array([1, 2], np.int32), DstT="float32") == (None,)


# --------------------------------------------------------------------------------------------
# Scans


@pytest.mark.parametrize("exclusive, reverse, sums, prods", [
    (False, False, [1, 3, 6, 10], [1, 2, 6, 24]),
    (True, False, [0, 1, 3, 6], [1, 1, 2, 6]),
    (False, True, [10, 9, 7, 4], [24, 24, 12, 4]),
    (True, True, [9, 7, 4, 0], [24, 12, 4, 1]),
])
def test_scans_match_tensorflow(exclusive, reverse, sums, prods):
    x = np.array([1.0, 2.0, 3.0, 4.0], F32)
    for name, want in (("Cumsum", sums), ("Cumprod", prods)):
        out = fwd(name, x, None, exclusive=exclusive, reverse=reverse)
        assert out.dtype == F32
        np.testing.assert_array_equal(out, want)
    xi = np.array([[1, 2, 3, 4]], np.int32)
    out = fwd("Cumsum", xi, ints(1), exclusive=exclusive, reverse=reverse)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, [sums])


def _cumprod_grad_by_brute_force(x, g, exclusive, reverse):
    n = len(x)
    gx = np.zeros(n)
    for i in range(n):
        members = [j for j in range(n) if (j >= i if reverse else j <= i) and (j != i or not exclusive)]
        for k in members:
            gx[k] += g[i] * np.prod([x[j] for j in members if j != k])
    return gx


@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("x", [
    [2.0, 0.0, 3.0, 0.5, 0.0, -1.5],
    [0.0, 0.0, 2.0, 3.0],
    [1.5, 2.0, -0.5, 0.0],
    [0.0, 1.5, 2.0, 3.0],
    [0.7, 1.3, 2.0, -1.0],
])
def test_cumprod_gradient_is_exact_at_zeros(x, exclusive, reverse):
    x = np.array(x)
    g = RNG.standard_normal(len(x))
    (gx, g_axis) = vjp("Cumprod", g, x, ints(0), exclusive=exclusive, reverse=reverse)
    assert g_axis is None
    expected = _cumprod_grad_by_brute_force(x, g, exclusive, reverse)
    np.testing.assert_allclose(gx, expected, rtol=1e-12, atol=1e-14)


def test_scans_reject_bad_axes():
    with pytest.raises(ShapeError, match="Cumsum: axis 2 is out of range"):
        infer("Cumsum", t((2, 3)), ints(2))
    with pytest.raises(ShapeError, match="single integer"):
        infer("Cumprod", t((2, 3)), ints([0, 1]))
    with pytest.raises(ShapeError, match="rank 0"):
        infer("Cumsum", t(()), None)


# --------------------------------------------------------------------------------------------
# BatchMatMul


@pytest.mark.parametrize("adj_x", [False, True])
@pytest.mark.parametrize("adj_y", [False, True])
def test_batch_matmul_matches_a_loop_over_broadcast_batches(adj_x, adj_y):
    x = RNG.standard_normal((2, 1, 4, 3) if adj_x else (2, 1, 3, 4)).astype(F32)
    y = RNG.standard_normal((5, 2, 4) if adj_y else (5, 4, 2)).astype(F32)
    out = fwd("BatchMatMul", x, y, adj_x=adj_x, adj_y=adj_y)
    assert out.shape == (2, 5, 3, 2) and out.dtype == F32
    for i in range(2):
        for j in range(5):
            a = x[i, 0].T if adj_x else x[i, 0]
            b = y[j].T if adj_y else y[j]
            np.testing.assert_allclose(out[i, j], a @ b, rtol=1e-5, atol=1e-6)
    assert infer("BatchMatMul", t(x.shape), t(y.shape), adj_x=adj_x, adj_y=adj_y) == t((2, 5, 3, 2))
    gx, gy = vjp("BatchMatMul", np.ones(out.shape, F32), x, y, adj_x=adj_x, adj_y=adj_y)
    assert gx.shape == x.shape and gy.shape == y.shape and gx.dtype == gy.dtype == F32


def test_batch_matmul_infer():
    assert infer("BatchMatMul", t((None, 3, 4)), t((4, None))) == t((None, 3, None))
    unknown = t((None, None, None))
    assert infer("BatchMatMul", unknown, t((1, None, None)), adj_y=True) == unknown
    with pytest.raises(ShapeError, match=r"inner sizes differ: x is \[2,3,4\], y is \[2,5,6\]"):
        infer("BatchMatMul", t((2, 3, 4)), t((2, 5, 6)))
    with pytest.raises(ShapeError, match=r"batch axes of x \[2,3,4\] and y \[3,4,6\] do not broadcast"):
        infer("BatchMatMul", t((2, 3, 4)), t((3, 4, 6)))
    with pytest.raises(ShapeError, match="rank 2 or more"):
        infer("BatchMatMul", t((4,)), t((4, 2)))


# --------------------------------------------------------------------------------------------
# Range and LinSpace


@pytest.mark.parametrize("start, limit, delta, dtype, expected, out_dtype", [
    (None, ints(5), None, "auto", [0, 1, 2, 3, 4], "int32"),
    (ints(3), ints(18), ints(5), "auto", [3, 8, 13], "int32"),
    (ints(10), ints(1), ints(-4), "auto", [10, 6, 2], "int32"),
    (ints(3), ints(3), ints(1), "int64", [], "int64"),
    (np.float32(0), np.float32(1), np.float32(0.25), "auto", [0, 0.25, 0.5, 0.75], "float32"),
    (np.float64(1), np.float64(2.05), np.float64(0.5), "auto", [1, 1.5, 2], "float32"),
    (ints(1), ints(4), ints(1), "float64", [1, 2, 3], "float64"),
    (np.float64(2.0), np.float64(5.0), np.float64(1.0), "int64", [2, 3, 4], "int64"),
])
def test_range(start, limit, delta, dtype, expected, out_dtype):
    out = fwd("Range", start, limit, delta, dtype=dtype)
    assert out.dtype == out_dtype
    np.testing.assert_allclose(out, expected, rtol=1e-7)
    assert infer("Range", start, limit, delta, dtype=dtype) == t((len(expected),), out_dtype)


@pytest.mark.parametrize("start, limit, delta, dtype, message", [
    (ints(0), ints(5), ints(0), "auto", "delta must not be 0"),
    (ints(5), ints(0), ints(1), "auto", "start 5 is above limit 0 while delta 1 is positive"),
    (ints(0), ints(5), ints(-1), "auto", "below limit"),
    (np.float64(0.5), ints(5), ints(1), "int32", "not an integer"),
    (ints([0, 1]), ints(5), ints(1), "auto", "single number"),
    (np.float32(0), np.float32(np.inf), np.float32(1), "auto", "finite"),
])
def test_range_errors(start, limit, delta, dtype, message):
    with pytest.raises(ShapeError, match=message):
        infer("Range", start, limit, delta, dtype=dtype)


def test_linspace():
    out = fwd("LinSpace", np.float32(0), np.float32(1), ints(5))
    assert out.dtype == F32
    np.testing.assert_array_equal(out, [0, 0.25, 0.5, 0.75, 1])
    out = fwd("LinSpace", np.float64(0.1), np.float64(0.7), ints(7))
    assert out.dtype == F64 and out[0] == 0.1 and out[-1] == 0.7
    np.testing.assert_array_equal(fwd("LinSpace", np.float32(3), np.float32(9), ints(1)), [3])
    assert infer("LinSpace", np.float64(0), np.float32(1), ints(3)) == t((3,), "float64")
    with pytest.raises(ShapeError, match="at least 1"):
        infer("LinSpace", np.float32(0), np.float32(1), ints(0))


# --------------------------------------------------------------------------------------------
# ClipByValue


def test_clip_by_value_values_and_gradients():
    x = np.array([[-2.0, -0.5, 0.5, 2.0], [0.0, 1.0, -1.0, 3.0]], F32)
    lo = np.array([-1.0], F32)
    hi = np.array([[1.0], [2.0]], F32)
    np.testing.assert_array_equal(fwd("ClipByValue", x, lo, hi), [[-1, -0.5, 0.5, 1], [0, 1, -1, 2]])
    g = np.arange(1, 9, dtype=F32).reshape(2, 4)
    gx, glo, ghi = vjp("ClipByValue", g, x, lo, hi)
    # Bounds themselves (t == min, t == max) let the gradient through to t, as in TensorFlow.
    np.testing.assert_array_equal(gx, [[0, 2, 3, 0], [5, 6, 7, 0]])
    np.testing.assert_array_equal(glo, [1.0])
    np.testing.assert_array_equal(ghi, [[4.0], [8.0]])
    assert gx.dtype == glo.dtype == ghi.dtype == F32


def test_clip_by_value_crossed_bounds_give_the_minimum():
    np.testing.assert_array_equal(fwd("ClipByValue", np.array([0.0, 5.0], F32), F32(3), F32(1)), [3, 3])


def test_clip_by_value_bounds_may_not_grow_t():
    assert infer("ClipByValue", t((None, 3)), t(()), t((2, 1))) == t((2, 3))
    assert infer("ClipByValue", t((1, 3)), t((None, 1)), t(())) == t((1, 3))
    with pytest.raises(ShapeError, match=r"do not broadcast to t's shape \[3\]"):
        infer("ClipByValue", t((3,)), t((2, 3)), t(()))
    with pytest.raises(ShapeError, match="do not broadcast"):
        infer("ClipByValue", t((3,)), t((4,)), t(()))
    with pytest.raises(ShapeError, match="do not broadcast"):
        fwd("ClipByValue", np.zeros(3, F32), np.zeros((2, 3), F32), F32(1))
    with pytest.raises(ShapeError, match="one dtype"):
        infer("ClipByValue", t((3,)), t((), "float64"), t(()))


# --------------------------------------------------------------------------------------------
# Through the compiler and runtime


def test_a_page_with_inline_bounds_static_defaults_and_a_cast():
    """Inline constants for T-typed bounds adopt the wired dtype; unwired optional static inputs
    (Range's start and delta, ArgMax's dimension) take their defaults; a Cast to int cuts the
    gradient while a Cast between floats passes it on."""
    p = chain(("x", "Placeholder", {"shape": [4], "dtype": "float32"}, None),
              ("r", "Range", {}, {"limit": 4}),
              ("rf", "Cast", {"DstT": "float32"}, {"x": "r"}),
              ("c", "ClipByValue", {}, {"t": "x", "clip_value_min": -1.0, "clip_value_max": 1.0}),
              ("w", "Multiply", {}, {"x": "c", "y": "rf"}),
              ("d", "Cast", {"DstT": "float64"}, {"x": "w"}),
              ("am", "ArgMax", {}, {"input": "x"}),
              ("amf", "Cast", {"DstT": "float64"}, {"x": "am"}),
              ("e", "Erf", {}, {"x": "d"}),
              ("s", "Sum", {}, {"input": "e"}),
              ("loss", "Add", {}, {"x": "s", "y": "amf"}))
    program = compile_project(p)
    assert program.ok, [str(d) for d in program.errors]
    x = np.array([-2.0, 0.5, 0.25, 3.0], F32)
    res = run(program, {"x": x}, target="loss")
    w = np.clip(x, -1, 1) * np.arange(4)
    assert res.value("am") == 3 and res.value("am").dtype == np.int64
    np.testing.assert_allclose(res.value("loss"), sum(math.erf(v) for v in w) + 3, rtol=1e-6)
    grad = res.grad("x")
    assert grad.dtype == F32
    expected = 2 / np.sqrt(np.pi) * np.exp(-w ** 2) * np.arange(4) * (np.abs(x) <= 1)
    np.testing.assert_allclose(grad, expected, rtol=1e-5)


# --------------------------------------------------------------------------------------------
# Einsum


def _loop_einsum(subscripts, out_letters, *operands):
    """Einstein summation by plain loops over every letter's values (no '...'): the reference."""
    sizes = {}
    for letters, x in zip(subscripts, operands):
        for c, d in zip(letters, x.shape):
            sizes[c] = d
    letters = sorted(sizes)
    out = np.zeros([sizes[c] for c in out_letters], np.float64)
    for values in np.ndindex(*[sizes[c] for c in letters]):
        at = dict(zip(letters, values))
        term = 1.0
        for sub, x in zip(subscripts, operands):
            term *= float(x[tuple(at[c] for c in sub)])
        out[tuple(at[c] for c in out_letters)] += term
    return out


@pytest.mark.parametrize("equation, subscripts, out_letters, shapes", [
    ("ij,jk->ik", ("ij", "jk"), "ik", [(3, 4), (4, 2)]),
    ("ij,jk", ("ij", "jk"), "ik", [(3, 4), (4, 2)]),
    ("ba", ("ba",), "ab", [(2, 3)]),
    ("ij->", ("ij",), "", [(2, 3)]),
    ("i,j->ij", ("i", "j"), "ij", [(3,), (4,)]),
    ("bij,bjk->bki", ("bij", "bjk"), "bki", [(2, 3, 4), (2, 4, 5)]),
    ("ij,k->ik", ("ij", "k"), "ik", [(2, 3), (4,)]),
    ("Ab,bC", ("Ab", "bC"), "AC", [(2, 3), (3, 2)]),  # implicit: capitals sort first
    ("ijk,jl->lki", ("ijk", "jl"), "lki", [(2, 3, 4), (3, 2)]),
])
def test_einsum_matches_loops_over_the_letters(equation, subscripts, out_letters, shapes):
    xs = [RNG.standard_normal(s).astype(F64) for s in shapes]
    out = fwd("Einsum", xs, equation=equation)
    np.testing.assert_allclose(out, _loop_einsum(subscripts, out_letters, *xs), rtol=1e-12, atol=1e-12)
    assert infer("Einsum", [t(x.shape, "float64") for x in xs], equation=equation) == t(np.shape(out), "float64")


def test_einsum_ellipsis_broadcasts_like_a_loop_over_the_batches():
    x = RNG.standard_normal((2, 1, 3, 4)).astype(F32)
    y = RNG.standard_normal((5, 4, 2)).astype(F32)
    out = fwd("Einsum", [x, y], equation="...ij,...jk->...ik")
    assert out.shape == (2, 5, 3, 2) and out.dtype == F32
    for i in range(2):
        for j in range(5):
            want = _loop_einsum(("ij", "jk"), "ik", x[i, 0], y[j])
            np.testing.assert_allclose(out[i, j], want, rtol=1e-5, atol=1e-5)
    # a '...' in the middle, and an implicit output that keeps '...' in front
    z = RNG.standard_normal((3, 2, 4)).astype(F64)
    v = RNG.standard_normal(4).astype(F64)
    out = fwd("Einsum", [z, v], equation="i...j,j")
    assert out.shape == (2, 3)
    for b in range(2):
        np.testing.assert_allclose(out[b], [float(z[i, b] @ v) for i in range(3)], rtol=1e-12)


def test_einsum_gradients_are_einsums_with_the_other_input_summed_over_broadcast_axes():
    x = RNG.standard_normal((2, 1, 3, 4))
    y = RNG.standard_normal((5, 4, 2))
    g = RNG.standard_normal((2, 5, 3, 2))
    (gx, gy), = vjp("Einsum", g, [x, y], equation="...ij,...jk->...ik", needs=((True, True),))
    want_x = np.zeros_like(x)
    want_y = np.zeros_like(y)
    for i in range(2):
        for j in range(5):
            want_x[i, 0] += g[i, j] @ y[j].T
            want_y[j] += x[i, 0].T @ g[i, j]
    np.testing.assert_allclose(gx, want_x, rtol=1e-12)
    np.testing.assert_allclose(gy, want_y, rtol=1e-12)
    # a letter only x has ('j', summed in the forward pass) gets g repeated along it
    x = RNG.standard_normal((2, 3))
    (gx, gk), = vjp("Einsum", np.ones((2, 4)), [x, np.arange(4.0)], equation="ij,k->ik",
                    needs=((True, False),))
    np.testing.assert_allclose(gx, np.full((2, 3), 6.0))
    assert gk is None


@pytest.mark.parametrize("equation, shapes, message", [
    ("ij,jk->ik", [(2, 3)], r"names 2 input\(s\) but 1 are wired"),
    ("ij->ik", [(2, 3)], "'k', which no input has"),
    ("ii->i", [(3, 3)], "repeats 'i' in inputs\\[0\\]"),
    ("ij->ii", [(3, 3)], "repeats 'i' in the output"),
    ("i1->i", [(3, 3)], "has '1'"),
    ("ij->j->i", [(3, 3)], "at most one '->'"),
    ("i..j->i", [(3, 3)], "one '...' and no other dots"),
    ("...ij->ij", [(2, 3, 3)], "must keep the '...'"),
    ("ij->...ij", [(3, 3)], "has '...' but no input has"),
    ("ij,jk->ik", [(2, 3), (4, 5)], r"'j' is 3 in inputs\[0\] \[2,3\] but 4 in inputs\[1\] \[4,5\]"),
    ("ij,jk->ik", [(2, 3, 1), (3, 5)], r"inputs\[0\] is \[2,3,1\] but 'ij' names 2 axes"),
    ("...ij,jk->...ik", [(3,), (3, 5)], r"names 2 or more axes"),
    ("...i,...i->...i", [(2, 3), (4, 3)], "'...' axes of \\[2\\], \\[4\\] do not broadcast"),
    ("", [(2,)], "empty"),
])
def test_einsum_refuses_bad_equations_and_shapes_when_compiling(equation, shapes, message):
    with pytest.raises(ShapeError, match=message):
        infer("Einsum", [t(s) for s in shapes], equation=equation)


def test_einsum_refuses_three_inputs_and_bool():
    with pytest.raises(ShapeError, match="one or two"):
        infer("Einsum", [t((2,))] * 3, equation="i,i,i->i")
    with pytest.raises(ShapeError, match="bool"):
        infer("Einsum", [t((2,), "bool")], equation="i->i")
    with pytest.raises(ShapeError, match="one dtype"):
        infer("Einsum", [t((2,)), t((2,), "float64")], equation="i,i->")


def test_einsum_checks_sizes_unknown_when_compiling_at_run_time():
    assert infer("Einsum", [t((None, 3)), t((None, 5))], equation="ij,jk->ik") == t((None, 5))
    with pytest.raises(ShapeError, match="'j' is 3"):
        fwd("Einsum", [np.ones((2, 3), F32), np.ones((4, 5), F32)], equation="ij,jk->ik")


def test_einsum_through_the_compiler_and_runtime():
    p = chain(("x", "Placeholder", {"shape": [2, 3], "dtype": "float32"}, None),
              ("y", "Placeholder", {"shape": [3], "dtype": "float32"}, None),
              ("e", "Einsum", {"equation": "ij,j->i"}, {"inputs[0]": "x", "inputs[1]": "y"}),
              ("loss", "Sum", {}, {"input": "e"}))
    program = compile_project(p)
    assert program.ok, [str(d) for d in program.errors]
    x = np.array([[1, 2, 3], [4, 5, 6]], F32)
    y = np.array([1, 0, -1], F32)
    res = run(program, {"x": x, "y": y}, target="loss")
    np.testing.assert_allclose(res.value("e"), [-2.0, -2.0])
    np.testing.assert_allclose(res.grad("x"), [[1, 0, -1], [1, 0, -1]])
    np.testing.assert_allclose(res.grad("y"), [5, 7, 9])
    bad = chain(("x", "Placeholder", {"shape": [2, 3], "dtype": "float32"}, None),
                ("e", "Einsum", {"equation": "ij,jk->ik"}, {"inputs[0]": "x"}))
    program = compile_project(bad)
    assert not program.ok and any("names 2 input(s) but 1 are wired" in str(d) for d in program.errors)


@pytest.mark.parametrize("name, lowest", [("Max", True), ("Min", False)])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "uint8"])
def test_an_extremum_over_no_values_is_the_identity_as_in_tensorflow(name, lowest, dtype):
    """tf.reduce_max of nothing is the dtype's lowest value (-inf for floats), reduce_min its
    highest; a page runs forward and backward over an axis of size 0. (With the runtime's NaN/Inf
    checks on, a float's infinity is reported, naming the block.)"""
    from diagrams import chain
    dt = np.dtype(dtype)
    want = (-np.inf if lowest else np.inf) if dt.kind == "f" else (np.iinfo(dt).min if lowest else np.iinfo(dt).max)
    project = chain(("x", "Placeholder", {"shape": [3, 0], "dtype": dtype}, None),
                    ("r", name, {}, {"input": "x", "axis": np.int32(1)}))
    program = compile_project(project)
    out = run(program, {"x": np.empty((3, 0), dt)}, fetch=["r"], record=False, check_numerics=False).value("r")
    np.testing.assert_array_equal(out, np.full(3, want, dt))
    if dt.kind == "f":
        project = chain(("x", "Placeholder", {"shape": [3, 0], "dtype": dtype}, None),
                        ("r", name, {}, {"input": "x", "axis": np.int32(1)}),
                        ("ok", "Maximum" if lowest else "Minimum", {}, {"x": "r", "y": np.asarray(0, dt)}),
                        ("loss", "Sum", {}, {"input": "ok"}))
        project.pages[0].loss = "loss"
        result = run(compile_project(project), {"x": np.empty((3, 0), dt)}, target="loss", wrt=["x"],
                     check_numerics=False)
        assert result.variable_grads["x"].shape == (3, 0)
        with pytest.raises(NumericsError, match=rf"main/r \({name}\) produced Inf"):
            run(program, {"x": np.empty((3, 0), dt)}, fetch=["r"], record=False)
