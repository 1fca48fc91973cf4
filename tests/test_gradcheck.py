"""Tests of blockflow.run.gradcheck: it passes right vjp rules and catches wrong ones."""
from __future__ import annotations

import numpy as np
import pytest

from blockflow.run.gradcheck import GradCheckResult, check_block, check_vjp
from blockflow.spec import Attr, Input, InputList, Output, block, unbroadcast

X = np.random.default_rng(0).uniform(0.5, 2.0, size=(3, 4))


def _square(wrong: bool):
    @block("Square", category="test")
    class Square:
        """x * x, with a right or a deliberately wrong gradient."""

        inputs = (Input("x", dtype="float"),)
        outputs = (Output("y"),)

        def infer(x):
            return x

        def forward(x):
            return x * x

        def vjp(g, out, x):
            return (g * x if wrong else 2 * g * x,)  # the wrong rule forgets the factor 2

    return Square


def test_passes_a_right_rule():
    result = check_block(_square(wrong=False), [X])
    assert isinstance(result, GradCheckResult)
    assert result.passed and result.worst.name == "x" and result.worst.error < 1e-8
    assert "passed" in str(result)


def test_catches_a_wrong_rule():
    result = check_block(_square(wrong=True), [X])
    assert not result.passed
    entry = result.worst
    assert entry.name == "x" and not entry.passed
    np.testing.assert_allclose(entry.numeric, 2 * entry.analytic, rtol=1e-6)
    text = str(result)
    assert "FAILED" in text and "Square" in text and "x:" in text


def _scaled_multiply(factor_x=1.0, factor_y=1.0, forget_unbroadcast=False):
    @block("Mul", category="test")
    class Mul:
        """x * y with broadcasting; the rule for each input can be made wrong."""

        inputs = (Input("x"), Input("y"))
        outputs = (Output("z"),)

        def infer(x, y):
            return x

        def forward(x, y):
            return x * y

        def vjp(g, out, x, y, *, needs):
            assert needs == (True, True)
            gy = g * x * factor_y
            return (unbroadcast(g * y * factor_x, x.shape),
                    gy if forget_unbroadcast else unbroadcast(gy, y.shape))

    return Mul


def test_points_at_the_input_whose_rule_is_wrong():
    y = np.random.default_rng(1).standard_normal(4)
    result = check_block(_scaled_multiply(factor_y=1.01), [X, y])
    assert not result.passed
    by_name = {e.name: e for e in result.entries}
    assert by_name["x"].passed and not by_name["y"].passed
    assert result.worst.name == "y"


def test_a_cotangent_of_the_wrong_shape_fails_with_a_message():
    result = check_block(_scaled_multiply(forget_unbroadcast=True), [X, np.ones(4)])
    entry = {e.name: e for e in result.entries}["y"]
    assert not entry.passed and "shape [3, 4]" in entry.problem and "[4]" in entry.problem
    assert "FAILED" in str(result)


def test_a_cotangent_of_the_wrong_dtype_fails():
    @block("Lossy", category="test")
    class Lossy:
        """Returns a float32 cotangent for a float64 input."""

        inputs = (Input("x", dtype="float"),)
        outputs = (Output("y"),)

        def infer(x):
            return x

        def forward(x):
            return x + 1

        def vjp(g, out, x):
            return (g.astype(np.float32),)

    result = check_block(Lossy, [X])
    assert not result.passed and "dtype float32" in result.worst.problem


def test_checks_each_element_of_an_input_list():
    @block("SumAll", category="test")
    class SumAll:
        """Adds its inputs; the rule for the second one is wrong."""

        inputs = (InputList("inputs"),)
        outputs = (Output("sum"),)

        def infer(inputs):
            return inputs[0]

        def forward(inputs):
            return sum(inputs[1:], inputs[0])

        def vjp(g, out, inputs, *, needs):
            assert needs == ((True, True, True),)
            return ([g, 2 * g, g],)

    result = check_block(SumAll, [[X, X + 1, X * 2]])
    assert [e.name for e in result.entries] == ["inputs[0]", "inputs[1]", "inputs[2]"]
    assert [e.passed for e in result.entries] == [True, False, True]


def test_static_and_integer_inputs_are_passed_through_and_skipped():
    @block("Pick", category="test")
    class Pick:
        """Sums over a static axis, then scales by an integer tensor."""

        inputs = (Input("x", dtype="float"), Input("axis", dtype="int", static=True),
                  Input("k", dtype="int"))
        outputs = (Output("y"),)
        attrs = (Attr("offset", "float", 0.0),)

        def infer(x, axis, k, *, offset):
            return x

        def forward(x, axis, k, *, offset):
            assert isinstance(axis, int) and k.dtype == np.int64  # passed unchanged
            return x.sum(axis=axis) * k + offset

        def vjp(g, out, x, axis, k, *, offset):
            return (np.broadcast_to(np.expand_dims(g * k, axis), x.shape), None, None)

    result = check_block(Pick, {"x": X, "axis": 1, "k": np.array([1, 2, 3])}, {"offset": 2})
    assert result.passed, str(result)
    assert [e.name for e in result.entries] == ["x"]


def test_only_differentiable_outputs_get_a_cotangent():
    @block("Both", category="test")
    class Both:
        """Two outputs; the second lets no gradient through."""

        inputs = (Input("x", dtype="float"),)
        outputs = (Output("y"), Output("side", differentiable=False))

        def infer(x):
            return x, x

        def forward(x):
            return np.sin(x), x * 10

        def vjp(g, out, x):
            assert g[1] is None
            return (g[0] * np.cos(x),)

    assert check_block(Both, [X]).passed


def test_an_exact_zero_gradient_passes():
    @block("Zero", category="test")
    class Zero:
        """x - x: its gradient is exactly zero, which the numeric estimate only approaches."""

        inputs = (Input("x", dtype="float"),)
        outputs = (Output("y"),)

        def infer(x):
            return x

        def forward(x):
            return (x * 1e3 + 1) - (x * 1e3 + 1)

        def vjp(g, out, x):
            return (None,)

    result = check_block(Zero, [X])
    assert result.passed, str(result)
    assert result.worst.analytic == 0.0


def test_float32_inputs_are_checked_in_float64():
    result = check_block(_square(wrong=False), [X.astype(np.float32)])
    assert result.passed and result.worst.error < 1e-8


def test_is_deterministic_for_a_seed():
    spec = _square(wrong=True)
    a, b = check_block(spec, [X], seed=3), check_block(spec, [X], seed=3)
    assert a.entries == b.entries
    assert check_block(spec, [X], seed=4).entries != a.entries


def test_refuses_what_it_cannot_check():
    @block("Stop", category="test")
    class Stop:
        """No gradient."""

        inputs = (Input("x"),)
        outputs = (Output("y"),)
        gradient = "stop"

        def infer(x):
            return x

        def forward(x):
            return x

    with pytest.raises(ValueError, match="no vjp"):
        check_block(Stop, [X])
    with pytest.raises(ValueError, match="takes 1 inputs"):
        check_block(_square(False), [X, X])
    with pytest.raises(ValueError, match="'x' is missing"):
        check_block(_square(False), {})
    with pytest.raises(ValueError, match="no input z"):
        check_block(_square(False), {"x": X, "z": X})
    with pytest.raises(ValueError, match="no attr"):
        check_block(_square(False), [X], {"speed": 1})


def test_nothing_to_check_does_not_pass():
    result = check_block(_square(False), [np.arange(3)])  # an integer input
    assert not result.passed and result.worst is None
    assert "no differentiable float input" in str(result)


# --------------------------------------------------------------------------------------------
# The plain-callable core


def test_check_vjp_on_plain_functions():
    def f(x, y):
        return np.sin(x) * y

    def right(g, out, x, y):
        return g * np.cos(x) * y, (g * np.sin(x)).sum(axis=0)

    def wrong(g, out, x, y):
        return g * np.cos(x) * y, (g * np.cos(x)).sum(axis=0)

    y = np.linspace(-1, 1, 4)
    assert check_vjp(f, right, [X, y], names=["x", "y"], label="sin(x)*y").passed
    result = check_vjp(f, wrong, [X, y], names=["x", "y"])
    assert [e.passed for e in result.entries] == [True, False]


def test_check_vjp_wrt_and_several_outputs():
    def f(x, y):
        return x * y, x + y

    def vjp(g, out, x, y):
        gx = g[0] * y + g[1]
        return gx, None  # y's rule left out: only x is checked below

    result = check_vjp(f, vjp, [X, X + 1], wrt=[0])
    assert result.passed and [e.name for e in result.entries] == ["arg0"]

    def vjp_one_output(g, out, x, y):
        assert g[1] is None
        return g[0] * y, g[0] * x

    assert check_vjp(f, vjp_one_output, [X, X + 1], outputs=[True, False]).passed


def test_check_vjp_demands_one_cotangent_per_arg():
    with pytest.raises(ValueError, match="one cotangent per input"):
        check_vjp(lambda x: x, lambda g, out, x: g, [X])



# ------------------------------------------------------------------------- whole pages
def _page_with(square_spec):
    """x (fed) * w (a Variable) -> Square -> Sum, in float32, with the given Square block."""
    from blockflow.project import Project
    from blockflow.registry import Registry
    from blockflow_blocks import all_blocks

    registry = Registry([b for b in all_blocks() if b.name != "Square"] + [square_spec])
    project = Project()
    page = project.add_page("main")
    page.add_node("Placeholder", id="x", attrs={"shape": [4]})
    page.add_node("Variable", id="w", attrs={"shape": [4]},
                  state={"value": np.array([0.5, -1.0, 2.0, 0.1], np.float32)})
    page.add_node("Multiply", id="m")
    page.add_node("Square", id="s")
    page.add_node("Sum", id="L")
    page.connect("x", "output", "m", "x")
    page.connect("w", "ref", "m", "y")
    page.connect("m", "z", "s", "x")
    page.connect("s", "y", "L", "input")
    page.loss = "L"
    page.feeds["x"] = np.array([1.0, 2.0, -3.0, 0.5], np.float32)
    return page, registry


def test_check_program_passes_a_right_float32_page_with_float32_tolerances():
    from blockflow.compile.compiler import compile_page
    from blockflow.run.gradcheck import check_program

    page, registry = _page_with(_square(wrong=False))
    program = compile_page(page, registry)
    assert program.ok, program.diagnostics
    result = check_program(program)
    assert result.passed, str(result)
    assert [e.name for e in result.entries] == ["x", "w"] and result.rtol == 1e-2
    assert "main/L:output" in str(result)


def test_check_page_works_in_float64_and_catches_a_wrong_block_rule():
    from blockflow.run.gradcheck import check_page, promote_page

    page, registry = _page_with(_square(wrong=False))
    before = {k: v.copy() for k, v in page.feeds.items()}
    promoted = promote_page(page, registry)
    assert promoted.nodes["x"].attrs["dtype"] == "float64" and promoted.feeds["x"].dtype == np.float64
    assert promoted.nodes["w"].state["value"].dtype == np.float64
    assert page.feeds["x"].dtype == np.float32 and "dtype" not in page.nodes["x"].attrs   # untouched
    np.testing.assert_array_equal(page.feeds["x"], before["x"])
    good = check_page(page, registry)
    assert good.passed and good.rtol == 1e-5 and good.worst.error < 1e-6, str(good)

    bad_page, bad_registry = _page_with(_square(wrong=True))
    result = check_page(bad_page, bad_registry)
    assert not result.passed and all(not e.passed for e in result.entries)
    for e in result.entries:   # the wrong rule halves every gradient
        assert e.numeric == pytest.approx(2 * e.analytic, rel=1e-6)
    again = check_page(bad_page, bad_registry)
    assert [e.error for e in again.entries] == [e.error for e in result.entries]
    assert [e.name for e in check_page(bad_page, bad_registry, wrt=["w"]).entries] == ["w"]
