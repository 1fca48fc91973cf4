"""The math blocks' PyTorch lowerings (torch_ops_math.py, torch_ops_reduce.py) beyond the case
tables test_export_torch.py runs in float64: the same cases on float32 pages (dtype kept), the
TensorFlow semantics that differ from torch's defaults (floor division and modulo of negative
numbers, Pow's gradient at a non-positive base, ties of Maximum, crossed clip bounds, Sign of
nan, rounding halves to even, integer Mean, Prod's gradient with zeros and underflow, ArgMax's
dtype, Cast between kinds, Einsum equations), broadcasting, a second derivative through a
blockflow gradient rule, and the list of lowered math blocks."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from blockflow.export.torch_lowering import lowering_table  # noqa: E402
from blockflow.export.torch_module import export_torch  # noqa: E402
from blockflow.registry import default_registry  # noqa: E402

from casekit import Case  # noqa: E402
from diagrams import chain  # noqa: E402
from export_kit import case_project, compare_with_torch, load_export  # noqa: E402
from test_blocks import CASES  # noqa: E402

TABLE = lowering_table()

#: every block of blocks/math_*.py; all are lowered (a refusal must be written here and in the
#: report, with its reason)
MATH_BLOCKS = sorted("""
    Add Subtract Multiply RealDiv AddN Pow SquaredDifference FloorDiv FloorMod Maximum Minimum ClipByValue
    Negate Square Sqrt Exp Log Tanh Sigmoid Abs Sign Rsqrt Reciprocal Log1p Expm1 Sin Cos Tan Asin Acos
    Atan Sinh Cosh Erf Floor Ceil Round Cast
    Sum Mean Max Min Prod ArgMax ArgMin All Any Cumsum Cumprod
    MatMul BatchMatMul Einsum
    Equal NotEqual Greater GreaterEqual Less LessEqual LogicalAnd LogicalOr LogicalNot
    Range LinSpace""".split())


def _math_blocks_of_the_registry():
    return sorted(spec.name for spec in default_registry() if ".math_" in spec.source)


def test_every_math_block_is_lowered():
    assert _math_blocks_of_the_registry() == MATH_BLOCKS, "a math block was added or removed: list it"
    missing = [name for name in MATH_BLOCKS if name not in TABLE]
    assert not missing, f"math blocks with no torch lowering: {missing}"


FLOAT32_CASES = [pytest.param(name, case, id=f"{name}-{case.id or i}")
                 for name in MATH_BLOCKS for i, case in enumerate(CASES.get(name, ()))]


@pytest.mark.parametrize("name, case", FLOAT32_CASES)
def test_math_case_on_a_float32_page_keeps_its_dtype(name, case, tmp_path):
    """The case tables' inputs as they are (mostly float32): values, dtypes and gradients agree to
    float32's precision (compare_with_torch checks every output's dtype)."""
    project, feeds, outs = case_project(name, case, float64=False)
    compare_with_torch(project, feeds, outs, tmp_path)


def _check(tmp_path, name, *inputs, attrs=None):
    """One block fed ``inputs`` exactly (dtypes kept), compared with blockflow, gradients too."""
    project, feeds, outs = case_project(name, Case(tuple(inputs), dict(attrs or {})), float64=False)
    return compare_with_torch(project, feeds, outs, tmp_path)


def _forward(tmp_path, name, *inputs, attrs=None):
    """The exported block's output for ``inputs``, checked against blockflow; returned."""
    project, feeds, outs = case_project(name, Case(tuple(inputs), dict(attrs or {})), float64=False)
    export = compare_with_torch(project, feeds, outs, tmp_path)
    module = load_export(export, tmp_path, "again")
    model = module.Model(initial=None)
    args = [torch.from_numpy(np.array(feeds[node])) for _, node, _ in export.inputs]
    got = model(*args)
    return (got[0] if isinstance(got, tuple) else got).detach().numpy()


# ------------------------------------------------------------------------------------------
# Division, modulo and powers


def test_floor_div_and_mod_of_negative_numbers(tmp_path):
    x = np.array([-7.0, 7.0, -7.0, 1.0, -1.0, 5.5], np.float64)
    y = np.array([2.0, -2.0, -2.0, 0.1, 0.1, -1.5], np.float64)
    assert _forward(tmp_path, "FloorDiv", x, y).tolist() == [-4.0, -4.0, 3.0, 10.0, -10.0, -4.0]
    _check(tmp_path, "FloorMod", x, y)
    xi = np.array([-7, 7, -7, 6, 0], np.int32)
    yi = np.array([2, -2, -2, 4, -3], np.int32)
    div = _forward(tmp_path, "FloorDiv", xi, yi)
    assert div.dtype == np.int32 and div.tolist() == [-4, -4, 3, 1, 0]
    mod = _forward(tmp_path, "FloorMod", xi, yi)
    assert mod.dtype == np.int32 and mod.tolist() == [1, -1, -1, 2, 0]


def test_floor_mod_gradient_with_a_broadcast_negative_divisor(tmp_path):
    x = np.array([[-3.0, 1.0, 5.0], [2.5, -0.5, 7.0]], np.float32)
    _check(tmp_path, "FloorMod", x, np.array([-1.9, 2.1, -2.2], np.float32))


def test_pow_gradient_at_a_negative_and_a_zero_base(tmp_path):
    """d/dy is 0 where x <= 0 (torch gives nan at a negative base), and 0 ** 0 has d/dx nan as
    blockflow (torch gives 0)."""
    x = np.array([[-2.0, -0.5, 0.0], [1.5, 0.0, 2.0]], np.float64)
    y = np.array([2.0, 3.0, 0.0], np.float64)
    _check(tmp_path, "Pow", x, y)
    _check(tmp_path, "Pow", np.float32(-1.5), np.array([1.0, 2.0, 3.0], np.float32))


def test_pow_of_integers_keeps_the_dtype(tmp_path):
    out = _forward(tmp_path, "Pow", np.array([-2, 3, 0], np.int32), np.array([3, 2, 0], np.int32))
    assert out.dtype == np.int32 and out.tolist() == [-8, 9, 1]


# ------------------------------------------------------------------------------------------
# Ties, bounds and kinks


@pytest.mark.parametrize("name", ["Maximum", "Minimum"])
def test_a_tie_sends_the_whole_gradient_to_x(name, tmp_path):
    x = np.array([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]], np.float64)
    _check(tmp_path, name, x, np.array([1.0, 2.0, 3.0], np.float64))
    _check(tmp_path, name, np.float32(2.0), np.array([1.0, 2.0, 3.0], np.float32))


def test_clip_with_crossed_bounds_and_ties(tmp_path):
    t = np.array([[-2.0, -1.0, 0.0, 1.0], [2.0, 0.5, 3.0, -0.5]], np.float64)
    low = np.array([-1.0, -1.0, 0.5, 2.0], np.float64)   # the last column crosses high
    high = np.array([1.0, 1.0, 1.0, 0.0], np.float64)
    out = _forward(tmp_path, "ClipByValue", t, low, high)
    assert out[:, 3].tolist() == [2.0, 2.0]   # low wins (torch.clamp would give high)
    _check(tmp_path, "ClipByValue", t, np.float64(-1.0), np.float64(1.0))


def test_abs_and_sign_at_zero_and_nan(tmp_path):
    x = np.array([-1.5, -0.0, 0.0, 2.0, np.nan], np.float32)
    out = _forward(tmp_path, "Sign", x)
    assert out.dtype == np.float32 and np.isnan(out[4]) and out[:4].tolist() == [-1.0, 0.0, 0.0, 1.0]
    _check(tmp_path, "Abs", np.array([-1.5, 0.0, 2.0], np.float64))
    assert _forward(tmp_path, "Sign", np.array([-3, 0, 4], np.int64)).tolist() == [-1, 0, 1]


def test_round_halves_to_even(tmp_path):
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5], np.float64)
    assert _forward(tmp_path, "Round", x).tolist() == [-2.0, -2.0, -0.0, 0.0, 2.0, 2.0, 4.0]
    ints = _forward(tmp_path, "Round", np.array([-3, 4], np.int32))
    assert ints.dtype == np.int32 and ints.tolist() == [-3, 4]


def test_asin_gradient_near_one(tmp_path):
    _check(tmp_path, "Asin", np.array([1 - 1e-12, -1 + 1e-9, 0.3], np.float64))
    _check(tmp_path, "Acos", np.array([1 - 1e-12, -1 + 1e-9, 0.3], np.float64))


# ------------------------------------------------------------------------------------------
# Reductions and scans


def test_integer_mean_truncates_toward_zero_and_keeps_the_dtype(tmp_path):
    x = np.array([[-7, 2, 1], [5, 0, 2]], np.int32)   # column means -1, 1, 1.5; row means -4/3, 7/3
    cols = _forward(tmp_path, "Mean", x, np.int64(0))
    assert cols.dtype == np.int32 and cols.tolist() == [-1, 1, 1]
    rows = _forward(tmp_path, "Mean", x, np.int64(1), attrs={"keep_dims": True})
    assert rows.tolist() == [[-1], [2]]


def test_integer_sum_and_prod_keep_the_dtype(tmp_path):
    x = np.array([[3, -2], [4, 5]], np.int32)
    assert _forward(tmp_path, "Sum", x, None).dtype == np.int32
    prod = _forward(tmp_path, "Prod", x, np.int64(1))
    assert prod.dtype == np.int32 and prod.tolist() == [-6, 20]


def test_prod_gradient_with_zeros_and_underflow(tmp_path):
    x = np.array([[0.0, 2.0, 3.0], [0.0, 0.0, 4.0], [1e-200, 1e-200, 5.0]], np.float64)
    _check(tmp_path, "Prod", x, np.int64(1))
    _check(tmp_path, "Prod", x, None)
    _check(tmp_path, "Prod", np.array([[1.5, 0.0], [2.0, -1.0]], np.float32), np.array([0, 1]),
           attrs={"keep_dims": True})


def test_max_splits_the_gradient_among_ties(tmp_path):
    _check(tmp_path, "Max", np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]], np.float64), np.int64(1))
    _check(tmp_path, "Min", np.array([[1.0, 3.0, 1.0], [2.0, 0.5, 2.0]], np.float32), None)


@pytest.mark.parametrize("output_type", ["int32", "int64"])
def test_arg_extremum_dtype_and_first_tie(output_type, tmp_path):
    x = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, -1.0]], np.float32)
    out = _forward(tmp_path, "ArgMax", x, np.int64(1), attrs={"output_type": output_type})
    assert out.dtype == np.dtype(output_type) and out.tolist() == [1, 0]
    out = _forward(tmp_path, "ArgMin", x, np.int64(-2), attrs={"output_type": output_type})
    assert out.dtype == np.dtype(output_type) and out.tolist() == [0, 1, 1]


@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("block", ["Cumsum", "Cumprod"])
def test_scans_on_the_last_axis(block, exclusive, reverse, tmp_path):
    x = np.array([[1.5, 0.0, -2.0, 0.5], [0.5, 2.0, 0.0, 0.0]], np.float64)
    _check(tmp_path, block, x, np.int64(-1), attrs={"exclusive": exclusive, "reverse": reverse})


def test_integer_cumsum_keeps_the_dtype(tmp_path):
    out = _forward(tmp_path, "Cumsum", np.array([3, -1, 4], np.int32), None, attrs={"exclusive": True})
    assert out.dtype == np.int32 and out.tolist() == [0, 3, 2]


# ------------------------------------------------------------------------------------------
# Cast, comparisons, products and sequences


@pytest.mark.parametrize("x, dst", [
    (np.array([-1.7, -0.5, 0.5, 2.9], np.float64), "int32"),
    (np.array([-1.7, 0.0, 2.9], np.float32), "bool"),
    (np.array([True, False]), "int64"),
    (np.array([300, -129], np.int64), "int8"),
    (np.array([0.1, 1e5], np.float64), "float16"),
    (np.array([1, 0, 7], np.int32), "uint8"),
], ids=["float-int", "float-bool", "bool-int", "int-wraps", "to-float16", "int-uint8"])
def test_cast_between_kinds(x, dst, tmp_path):
    out = _forward(tmp_path, "Cast", x, attrs={"DstT": dst})
    assert out.dtype == np.dtype(dst)
    with np.errstate(over="ignore"):   # 1e5 is beyond float16: inf in both
        np.testing.assert_array_equal(out, x.astype(dst))


def test_comparisons_broadcast_and_nan(tmp_path):
    x = np.array([[1.0, np.nan, 3.0]], np.float32)
    y = np.array([[1.0], [np.nan], [2.0]], np.float32)
    for name in ("Equal", "NotEqual", "Greater", "GreaterEqual", "Less", "LessEqual"):
        out = _forward(tmp_path, name, x, y)
        assert out.dtype == np.bool_ and out.shape == (3, 3)


def test_batch_matmul_broadcasts_its_batch_axes(tmp_path):
    rng = np.random.default_rng(5)
    _check(tmp_path, "BatchMatMul", rng.standard_normal((2, 1, 3, 4)), rng.standard_normal((5, 4, 2)))
    _check(tmp_path, "BatchMatMul", rng.standard_normal((3, 4)).astype(np.float32),
           rng.standard_normal((2, 2, 3, 4)).astype(np.float32), attrs={"adj_y": True})


@pytest.mark.parametrize("equation", ["ij, jk -> ik", "Ab,bC->CA", "...j,j", "ij,ij->"])
def test_einsum_equations_as_literals(equation, tmp_path):
    rng = np.random.default_rng(6)
    shapes = {"ij, jk -> ik": [(2, 3), (3, 4)], "Ab,bC->CA": [(2, 3), (3, 4)],
              "...j,j": [(2, 5, 3), (3,)], "ij,ij->": [(2, 3), (2, 3)]}[equation]
    export = _check(tmp_path, "Einsum", [rng.standard_normal(s) for s in shapes], attrs={"equation": equation})
    assert repr(equation.replace(" ", "")) in export.source


def test_sequences_are_written_as_code_and_equal(tmp_path):
    r = _forward(tmp_path, "Range", np.float32(0.1), np.float32(1.0), np.float32(0.3))
    assert r.dtype == np.float32 and len(r) == 3
    r = _forward(tmp_path, "Range", np.int64(-3), np.int64(8), np.int64(4), attrs={"dtype": "int64"})
    assert r.tolist() == [-3, 1, 5]
    s = _forward(tmp_path, "LinSpace", np.float64(-1.0), np.float64(0.7), np.int64(7))
    assert s[-1] == 0.7 and s.dtype == np.float64


# ------------------------------------------------------------------------------------------
# The gradient rules written as torch.autograd.Function: smooth where they should be


def _rule_module(tmp_path):
    """A file holding every helper of the math lowerings (one page using each rule)."""
    project = chain(("x", "Placeholder", {"shape": [3], "dtype": "float64"}, None),
                    ("y", "Placeholder", {"shape": [3], "dtype": "float64"}, None),
                    ("p", "Pow", {}, {"x": "x", "y": "y"}),
                    ("m", "Maximum", {}, {"x": "x", "y": "y"}),
                    ("n", "Minimum", {}, {"x": "x", "y": "y"}),
                    ("f", "FloorMod", {}, {"x": "x", "y": "y"}),
                    ("c", "ClipByValue", {}, {"t": "x", "clip_value_min": -0.5, "clip_value_max": 0.5}),
                    ("a", "Asin", {}, {"x": "x"}),
                    ("b", "Acos", {}, {"x": "x"}),
                    ("q", "Prod", {}, {"input": "x"}))
    export = export_torch(project, outputs=["p", "m", "n", "f", "c", "a", "b", "q"])
    return load_export(export, tmp_path, "rules")


@pytest.mark.parametrize("fn, grad, xs", [
    ("torch.pow", "_pow_grad", ([0.7, 1.3, 2.0], [1.5, -0.5, 3.0])),
    ("torch.maximum", "_maximum_grad", ([0.7, -1.3, 2.0], [1.5, -0.5, 1.0])),
    ("torch.minimum", "_minimum_grad", ([0.7, -1.3, 2.0], [1.5, -0.5, 1.0])),
    ("torch.remainder", "_floor_mod_grad", ([0.7, -1.3, 5.1], [1.5, 0.9, -2.0])),
    ("_clip", "_clip_grad", ([0.7, -1.3, 0.1], [-0.5, -0.5, -0.5], [0.5, 0.5, 0.5])),
    ("torch.asin", "_asin_grad", ([0.7, -0.3, 0.1],)),
    ("torch.acos", "_acos_grad", ([0.7, -0.3, 0.1],)),
], ids=["pow", "maximum", "minimum", "floor_mod", "clip", "asin", "acos"])
def test_rule_helpers_pass_torch_gradcheck_and_gradgradcheck(fn, grad, xs, tmp_path):
    """Away from kinks the rule is the true derivative, and its backward is itself
    differentiable (a later torch.autograd.grad with create_graph can go through it)."""
    module = _rule_module(tmp_path)
    f = eval(fn, {"torch": torch, "_clip": getattr(module, "_clip")})  # noqa: S307 (our own names)
    rule = getattr(module, grad)
    args = [torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in xs]
    assert torch.autograd.gradcheck(lambda *a: module._Rule.apply(f, rule, *a), args)
    assert torch.autograd.gradgradcheck(lambda *a: module._Rule.apply(f, rule, *a), args)


def test_prod_rule_passes_gradcheck_with_zeros(tmp_path):
    module = _rule_module(tmp_path)
    for x in ([[0.5, 2.0, 3.0], [1.5, -1.0, 4.0]], [[0.0, 2.0, 3.0], [0.0, 0.0, 4.0]]):
        x = torch.tensor(x, dtype=torch.float64, requires_grad=True)
        assert torch.autograd.gradcheck(lambda v: module._prod_rule(v, (1,), False), [x])


def test_add_n_with_an_open_size_checks_the_shapes_when_it_runs(tmp_path):
    """The compiler cannot see two open batch sizes differ; blockflow's AddN then refuses to
    broadcast, and so does the exported code (torch's + would broadcast)."""
    project = chain(("a", "Placeholder", {"shape": [-1, 3], "dtype": "float64"}, None),
                    ("b", "Placeholder", {"shape": [-1, 3], "dtype": "float64"}, None),
                    ("s", "AddN", {}, {"inputs[0]": "a", "inputs[1]": "b"}))
    rng = np.random.default_rng(8)
    feeds = {"a": rng.standard_normal((2, 3)), "b": rng.standard_normal((2, 3))}
    export = compare_with_torch(project, feeds, ["s:sum"], tmp_path)
    assert "_add_n(" in export.source
    model = load_export(export, tmp_path, "addn").Model(initial=None)
    with pytest.raises(ValueError, match="AddN: shapes"):
        model(torch.zeros(2, 3, dtype=torch.float64), torch.zeros(1, 3, dtype=torch.float64))
