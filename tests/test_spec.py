"""Tests of blockflow.spec: the @block decorator's checks, Attr validation, tensor types and the
shape helpers (broadcast_shapes, unbroadcast, normalize_axis, reduce_shape)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blockflow.spec import (ATTR_KINDS, DTYPE_NAMES, Attr, AttrError, AttrKind, BlockDeclarationError, BlockSpec,
                            Input, InputList, Output, OutputList, ShapeError, TensorType, UnknownAttrError, block,
                            broadcast_shapes, normalize_axis, reduce_shape, shape_text, unbroadcast)

# --------------------------------------------------------------------------------------------
# The decorator accepts a good declaration ...


def test_a_good_declaration_becomes_a_frozen_spec():
    @block("Scale", category="math_ops", aliases=("Mul2",))
    class Scale:
        """Multiplies by a factor.

        Longer explanation for the reference page.
        """

        inputs = (Input("x", dtype="float"),)
        outputs = (Output("y"),)
        attrs = (Attr("factor", "float", 2.0),)

        def infer(x, *, factor):
            return x

        def forward(x, *, factor):
            return x * factor

        def vjp(g, out, x, *, factor):
            return (g * factor,)

    assert isinstance(Scale, BlockSpec)
    assert Scale.summary == "Multiplies by a factor."
    assert "reference page" in Scale.doc
    assert Scale.differentiable and Scale.gradient == "vjp" and Scale.vjp_context == frozenset()
    assert Scale.default_attrs() == {"factor": 2.0}
    assert Scale.aliases == ("Mul2",) and Scale.source.endswith("Scale")
    assert Scale.validate_attrs({"factor": 3}) == ({"factor": 3.0}, [])
    values, problems = Scale.validate_attrs({"factor": "x", "other": 1})
    assert {name for name, _ in problems} == {"factor", "other"}
    with pytest.raises(Exception):
        Scale.name = "Other"


def test_a_vjp_may_ask_for_needs():
    @block("Pair", category="math_ops")
    class Pair:
        """Adds two tensors."""

        inputs = (Input("x"), Input("y"))
        outputs = (Output("z"),)

        def infer(x, y):
            return x

        def forward(x, y):
            return x + y

        def vjp(g, out, x, y, *, needs):
            return (g if needs[0] else None, g if needs[1] else None)

    assert Pair.vjp_context == frozenset({"needs"})


# ... and rejects a wrong one, naming the block and the problem.


def _declare(body: dict, name="Bad", doc="A block.", **kwargs):
    namespace = {"__doc__": doc, "inputs": (Input("x"),), "outputs": (Output("y"),),
                 "infer": lambda x: x, "forward": lambda x: x}
    namespace.update(body)
    namespace = {k: v for k, v in namespace.items() if v is not _DROP}
    return block(name, category="test", **kwargs)(type(name, (), namespace))


_DROP = object()


def _fn(src):
    scope = {}
    exec(f"def f{src}: return None", scope)
    return scope["f"]


@pytest.mark.parametrize("body, message", [
    ({"__doc__": None}, "docstring"),
    ({"__doc__": "   "}, "docstring"),
    ({"infer": _fn("(x, y)")}, "infer takes 2 positional parameters"),
    ({"infer": _DROP}, "missing infer"),
    ({"forward": _fn("()")}, "forward takes 0 positional parameters"),
    ({"forward": _fn("(*xs)")}, r"must not take \*args"),
    ({"forward": _fn("(x, **kw)")}, r"must not take \*args or \*\*kwargs"),
    ({"attrs": (Attr("k", "int", 1),), "infer": _fn("(x, k)"), "forward": _fn("(x, *, k)")},
     "infer takes 2 positional parameters"),
    ({"attrs": (Attr("k", "int", 1),), "infer": _fn("(x)"), "forward": _fn("(x, *, k)")},
     "missing keyword-only k"),
    ({"infer": _fn("(x, *, foo)")}, "unknown keyword-only foo"),
    ({"infer": _fn("(x, *, needs)")}, "unknown keyword-only needs"),
    ({"vjp": _fn("(g, out, x, *, speed)")}, "unknown keyword-only speed"),
    ({"vjp": _fn("(out, x)")}, "vjp takes 2 positional parameters"),
    ({"attrs": (Attr("k", "int", "a"),), "infer": _fn("(x, *, k)"), "forward": _fn("(x, *, k)")},
     "default of attr 'k' is invalid"),
    ({"attrs": (Attr("k", "int", 5, max=3),), "infer": _fn("(x, *, k)"), "forward": _fn("(x, *, k)")},
     "default of attr 'k' is invalid"),
    ({"attrs": (Attr("k", "integer", 1),)}, "unknown kind 'integer'"),
    ({"attrs": (Attr("k", "choice", "a"),)}, "lists no choices"),
    ({"attrs": ("k",)}, "attrs must be Attr"),
    ({"inputs": ("x",)}, "inputs must be Input"),
    ({"outputs": ("y",)}, "outputs must be Output"),
    ({"inputs": (Input("x"), Input("x")), "infer": _fn("(a, b)"), "forward": _fn("(a, b)")},
     "input name 'x' is used twice"),
    ({"outputs": (Output("x"),)}, "output name 'x' is used twice"),
    ({"attrs": (Attr("x", "int", 1),), "infer": _fn("(x, *, x2)")}, "same name as input 'x'"),
    ({"inputs": (Input("scope"),)}, "implicit scope port"),
    ({"outputs": (Output("scope"),)}, "implicit scope port"),
    ({"inputs": (Input("needs"),)}, "reserved"),
    ({"inputs": (Input("bad name"),)}, "must be an identifier"),
    ({"inputs": (Input("x", dtype="float 32"),)}, "dtype constraint"),
    ({"inputs": (Input("i", dtype="int"),), "infer": _fn("(i)"), "forward": _fn("(i)"),
      "vjp": _fn("(g, out, i)")}, "no input that can take a gradient"),
    ({"inputs": (Input("i", static=True),), "infer": _fn("(i)"), "forward": _fn("(i)"),
      "vjp": _fn("(g, out, i)")}, "no input that can take a gradient"),
    ({"role": "constant"}, "role must be one of"),
    ({"role": "placeholder"}, "a placeholder block has no inputs"),
    ({"role": "variable", "inputs": (), "infer": _fn("()"), "forward": _fn("(value)")},
     "needs initial"),
    ({"initial": _fn("()")}, "only variable blocks declare initial"),
    ({"gradient": "maybe"}, "gradient must be one of"),
    ({"gradient": "stop", "vjp": _fn("(g, out, x)")}, "pick one"),
    ({"infer": "not a function"}, "infer must be a function"),
])
def test_wrong_declarations_are_rejected_naming_the_block(body, message):
    with pytest.raises(BlockDeclarationError, match=message) as info:
        _declare(body)
    assert "block 'Bad'" in str(info.value)


def test_block_name_and_category_are_checked():
    with pytest.raises(BlockDeclarationError, match="must be an identifier"):
        _declare({}, name="Bad-name")
    with pytest.raises(BlockDeclarationError, match="category"):
        block("Fine", category="")(type("Fine", (), {"__doc__": "x"}))


def test_placeholder_and_variable_declarations():
    spec = _declare({"role": "placeholder", "inputs": (), "infer": _fn("()"), "forward": _fn("(value)")})
    assert spec.role == "placeholder" and spec.gradient == "none" and not spec.differentiable
    spec = _declare({"role": "variable", "inputs": (), "infer": _fn("()"), "forward": _fn("(value)"),
                     "initial": _fn("()")})
    assert spec.role == "variable" and spec.initial is not None


def test_gradient_kinds():
    assert _declare({}).gradient == "none"
    assert _declare({"gradient": "stop"}).gradient == "stop"
    assert _declare({"gradient": "prevent"}).gradient == "prevent"
    assert _declare({"vjp": _fn("(g, out, x)")}).gradient == "vjp"


# --------------------------------------------------------------------------------------------
# Ports


def test_input_dtype_constraints():
    assert Input("x", dtype="float").accepts("float32") and not Input("x", dtype="float").accepts("int32")
    assert Input("x", dtype="int32").accepts("int32") and not Input("x", dtype="int32").accepts("int64")
    assert Input("x", dtype="T").accepts("bool")  # a type variable takes any dtype
    assert Input("x").differentiable and Input("x", dtype="number").differentiable
    assert not Input("x", dtype="int").differentiable and not Input("x", dtype="bool").differentiable
    assert not Input("x", static=True).differentiable
    assert InputList("xs").port(2) == "xs[2]" and InputList("xs").variadic


# --------------------------------------------------------------------------------------------
# Attr.validate, kind by kind


@pytest.mark.parametrize("attr, value, expected", [
    (Attr("n", "int"), 3, 3),
    (Attr("n", "int"), 3.0, 3),
    (Attr("n", "int"), np.int64(4), 4),
    (Attr("n", "int", min=0, max=5), 5, 5),
    (Attr("r", "float"), 1, 1.0),
    (Attr("r", "float"), np.float32(0.5), 0.5),
    (Attr("r", "float"), float("inf"), float("inf")),
    (Attr("b", "bool"), True, True),
    (Attr("b", "bool"), np.bool_(False), False),
    (Attr("s", "str"), "hello", "hello"),
    (Attr("c", "choice", choices=("a", "b")), "b", "b"),
    (Attr("d", "dtype"), "int32", "int32"),
    (Attr("d", "dtype", choices=("float32", "float64")), "float64", "float64"),
    (Attr("s", "shape"), [2, -1, None], (2, None, None)),
    (Attr("s", "shape"), (), ()),
    (Attr("s", "shape"), [0, 3], (0, 3)),
    (Attr("i", "ints"), [1, -1, np.int32(2)], (1, -1, 2)),
])
def test_attr_accepts_good_values(attr, value, expected):
    got = attr.validate(value)
    assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize("value, expected", [
    ([[1, 2], [3, 4]], np.array([[1, 2], [3, 4]])),
    (2.5, np.array(2.5)),
    (np.arange(3, dtype=np.int32), np.arange(3)),
])
def test_tensor_attr_accepts_arrays(value, expected):
    got = Attr("t", "tensor").validate(value)
    assert isinstance(got, np.ndarray)
    np.testing.assert_array_equal(got, expected)
    assert Attr("t", "tensor").validate(None) is None


@pytest.mark.parametrize("attr, value, message", [
    (Attr("n", "int"), "3", "expected a number"),
    (Attr("n", "int"), True, "expected a number"),
    (Attr("n", "int"), 2.5, "expected an integer"),
    (Attr("n", "int", min=0), -1, "at least 0"),
    (Attr("n", "int", max=5), 6, "at most 5"),
    (Attr("r", "float"), float("nan"), "NaN"),
    (Attr("r", "float"), None, "expected a number"),
    (Attr("r", "float", min=0.0), -0.5, "at least 0"),
    (Attr("b", "bool"), 1, "true or false"),
    (Attr("b", "bool"), "true", "true or false"),
    (Attr("s", "str"), 3, "expected a string"),
    (Attr("c", "choice", choices=("a", "b")), "c", "one of a, b"),
    (Attr("d", "dtype"), "float128", "expected a dtype"),
    (Attr("d", "dtype", choices=("float32",)), "int32", "expected a dtype"),
    (Attr("s", "shape"), "2,3", "list of integers"),
    (Attr("s", "shape"), [2.5], "list of integers"),
    (Attr("s", "shape"), [True], "list of integers"),
    (Attr("s", "shape"), [-2], "at least 0"),
    (Attr("i", "ints"), [None], "list of integers"),
    (Attr("i", "ints"), [1.0], "list of integers"),
    (Attr("t", "tensor"), [[1, 2], [3]], "expected an array"),
    (Attr("t", "tensor"), ["a", "b"], "array of numbers"),
    (Attr("t", "tensor"), [1 + 2j], "array of numbers"),
    (Attr("x", "complex"), 1, "unknown attr kind"),
])
def test_attr_rejects_bad_values(attr, value, message):
    with pytest.raises(AttrError, match=message):
        attr.validate(value)


@pytest.mark.parametrize("value", [float("inf"), float("nan")])
def test_int_attr_rejects_non_finite_values(value):
    with pytest.raises(AttrError, match="expected an integer"):
        Attr("k", "int").validate(value)
    spec = _declare({"attrs": (Attr("k", "int", 1),), "infer": _fn("(x, *, k)"), "forward": _fn("(x, *, k)")})
    _, problems = spec.validate_attrs({"k": value})
    assert [name for name, _ in problems] == ["k"]


def test_shape_attr_takes_numpy_minus_one():
    assert Attr("s", "shape").validate([np.int64(-1), 2]) == (None, 2)


# --------------------------------------------------------------------------------------------
# Tensor types


def test_tensor_type():
    t = TensorType([None, 3], "float32")
    assert t.shape == (None, 3) and t.dtype == np.float32 and t.rank == 2 and t.is_float
    assert t.size is None and TensorType((2, 3), "int32").size == 6
    assert t.describe() == str(t) == "float32[?,3]"
    assert t.with_shape((4,)) == TensorType((4,), "float32")
    assert t.with_dtype("float64").dtype == np.float64
    c = TensorType.of([[1, 2]])
    assert c.shape == (1, 2) and c.value is not None
    assert c == TensorType((1, 2), c.dtype)  # the value does not take part in equality


# --------------------------------------------------------------------------------------------
# broadcast_shapes


@pytest.mark.parametrize("shapes, expected", [
    (((2, 3), (3,)), (2, 3)),
    (((2, 1), (1, 3)), (2, 3)),
    (((), (2, 3)), (2, 3)),
    (((4, 1, 3), (2, 1), (1,)), (4, 2, 3)),
    (((None, 3), (2, 1)), (2, 3)),
    (((None,), (1,)), (None,)),
    (((None,), (None,)), (None,)),
    (((None, 1), (5,)), (None, 5)),
    (((1,), (None,)), (None,)),
    ((), ()),
])
def test_broadcast_shapes(shapes, expected):
    assert broadcast_shapes(*shapes) == expected


def test_broadcast_shapes_names_both_shapes():
    with pytest.raises(ShapeError, match=r"\[2,3\] and \[4\]"):
        broadcast_shapes((2, 3), (4,))
    with pytest.raises(ShapeError, match=r"\[\?,3\] and \[2\]"):
        broadcast_shapes((None, 3), (2,))


@settings(max_examples=60)
@given(st.lists(st.lists(st.integers(1, 3), max_size=3), min_size=1, max_size=3))
def test_broadcast_shapes_agrees_with_numpy(shapes):
    try:
        expected = np.broadcast_shapes(*map(tuple, shapes))
    except ValueError:
        with pytest.raises(ShapeError):
            broadcast_shapes(*shapes)
    else:
        assert broadcast_shapes(*shapes) == expected


# --------------------------------------------------------------------------------------------
# unbroadcast


@st.composite
def _broadcast_pair(draw):
    """A target shape and a shape it broadcasts to (more leading axes, size-1 axes grown)."""
    target = tuple(draw(st.lists(st.integers(1, 3), max_size=3)))
    lead = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    grown = tuple(draw(st.integers(1, 3)) if d == 1 else d for d in target)
    return target, lead + grown


@settings(max_examples=80)
@given(_broadcast_pair(), st.sampled_from([np.float32, np.float64]))
def test_unbroadcast_is_the_adjoint_of_broadcasting(pair, dtype):
    target, big = pair
    rng = np.random.default_rng(0)
    g = rng.standard_normal(big).astype(dtype)
    x = rng.standard_normal(target).astype(dtype)
    got = unbroadcast(g, target)
    assert got.shape == target and got.dtype == dtype
    # <unbroadcast(g), x> == <g, broadcast(x)> for every x: the defining property.
    lhs = np.sum(got.astype(np.float64) * x)
    rhs = np.sum(g.astype(np.float64) * np.broadcast_to(x, big))
    np.testing.assert_allclose(lhs, rhs, rtol=1e-5, atol=1e-5)


def test_unbroadcast_returns_g_itself_when_nothing_to_undo():
    g = np.ones((2, 3))
    assert unbroadcast(g, (2, 3)) is g
    view = np.broadcast_to(np.float32(1), (4, 3))
    got = unbroadcast(view, (3,))
    np.testing.assert_array_equal(got, [4, 4, 4])
    assert got.dtype == np.float32


# --------------------------------------------------------------------------------------------
# normalize_axis and reduce_shape


@pytest.mark.parametrize("axis, rank, expected", [
    (None, 3, (0, 1, 2)),
    (1, 3, (1,)),
    (-1, 3, (2,)),
    ([2, 0], 3, (0, 2)),
    (np.array([-1, 0]), 2, (0, 1)),
    (np.int32(0), 1, (0,)),
    ([], 2, ()),
])
def test_normalize_axis(axis, rank, expected):
    assert normalize_axis(axis, rank) == expected


@pytest.mark.parametrize("axis, rank, message", [
    (2, 2, "axis 2 is out of range for a tensor of rank 2"),
    (-3, 2, "axis -3 is out of range"),
    ([0, -2], 2, "names an axis twice"),
    ([1, 1], 3, "names an axis twice"),
    (1, 0, "out of range for a tensor of rank 0"),
])
def test_normalize_axis_errors(axis, rank, message):
    with pytest.raises(ShapeError, match=message):
        normalize_axis(axis, rank)


@pytest.mark.parametrize("kind", [int, np.int8, np.int32, np.int64, np.uint8, np.uint64])
def test_a_single_int_axis_means_what_a_one_element_list_means(kind):
    # normalize_axis takes a short way for one int (issue 18): the same axes, the same errors
    for rank in range(4):
        for a in range(-5, 5):
            if a < 0 and np.issubdtype(kind, np.unsignedinteger):
                continue
            try:
                expected = normalize_axis([a], rank)
            except ShapeError as exc:
                with pytest.raises(ShapeError, match=f"^{exc}$"):
                    normalize_axis(kind(a), rank)
                continue
            got = normalize_axis(kind(a), rank)
            assert got == expected and all(type(x) is int for x in got)


@pytest.mark.parametrize("shape, axis, keep, expected", [
    ((2, 3, 4), None, False, ()),
    ((2, 3, 4), None, True, (1, 1, 1)),
    ((2, 3, 4), 1, False, (2, 4)),
    ((2, 3, 4), [0, -1], True, (1, 3, 1)),
    ((None, 3), 0, False, (3,)),
    ((None, 3), 1, True, (None, 1)),
])
def test_reduce_shape(shape, axis, keep, expected):
    assert reduce_shape(shape, axis, keep) == expected


def test_a_misspelt_dtype_is_not_taken_for_a_type_variable():
    with pytest.raises(BlockDeclarationError, match="'flaot'"):
        @block("Typo", category="test")
        class Typo:
            """Has a typo in a dtype."""

            inputs = (Input("x", dtype="flaot"),)
            outputs = (Output("y"),)

            def infer(x):
                return x

            def forward(x):
                return x


def test_dtype_attr_takes_a_numpy_dtype_and_gives_its_name():
    assert Attr("dtype", "dtype", "float32").validate(np.dtype("float64")) == "float64"


def test_axis_zero_of_a_scalar_is_out_of_range():
    with pytest.raises(ShapeError, match="out of range"):
        normalize_axis(0, 0)


def test_several_input_lists_and_a_counted_output_list():
    @block("Zip", category="test")
    class Zip:
        """Pairs up two lists (Gradients-like ports)."""

        inputs = (InputList("a"), InputList("b", min_count=0, optional=True))
        outputs = (OutputList("out", count="a"),)

        def infer(a, b):
            return list(a)

        def forward(a, b):
            return list(a)

    assert [p.name for p in Zip.inputs] == ["a", "b"] and Zip.outputs[0].port(2) == "out[2]"
    with pytest.raises(BlockDeclarationError, match="counted by an int attr or an InputList"):
        @block("Bad", category="test")
        class Bad:
            """Counts by a missing name."""

            outputs = (OutputList("out", count="nope"),)

            def infer():
                return []

            def forward():
                return []


# --------------------------------------------------------------------------------------------
# The attr kinds table, BlockSpec.check_attr and shape_text


def test_every_attr_kind_is_one_table_entry_with_a_hint():
    assert set(ATTR_KINDS) == {"int", "float", "bool", "str", "choice", "dtype", "shape", "ints", "tensor", "dims"}
    for name, kind in ATTR_KINDS.items():
        assert kind.name == name and kind.hint and callable(kind.check)


def test_a_new_attr_kind_is_one_table_entry(monkeypatch):
    def check(attr, value):
        if not (isinstance(value, str) and value.startswith("#")):
            raise AttrError(f"expected a colour like #ff0000, got {value!r}")
        return value.lower()

    monkeypatch.setitem(ATTR_KINDS, "colour", AttrKind("colour", check, "a colour, e.g. #ff0000"))
    spec = _declare({"attrs": (Attr("c", "colour", "#FFFFFF"),), "infer": _fn("(x, *, c)"),
                     "forward": _fn("(x, *, c)")})
    assert spec.check_attr("c", "#ABCDEF") == "#abcdef"
    assert spec.validate_attrs({"c": "red"})[1] == [("c", "attr 'c': expected a colour like #ff0000, got 'red'")]


def test_check_attr_names_the_block_for_an_unknown_attr_and_the_problem_for_a_bad_value():
    spec = _declare({"attrs": (Attr("k", "int", 1, min=0),), "infer": _fn("(x, *, k)"), "forward": _fn("(x, *, k)")})
    assert spec.check_attr("k", 3.0) == 3 and type(spec.check_attr("k", 3.0)) is int
    with pytest.raises(UnknownAttrError, match=f"^{spec.name} has no attr 'q'$"):
        spec.check_attr("q", 1)
    with pytest.raises(AttrError, match="^must be at least 0, got -1$") as info:
        spec.check_attr("k", -1)
    assert not isinstance(info.value, UnknownAttrError)


def test_attr_options_are_what_a_picker_offers():
    assert Attr("d", "dtype").options == DTYPE_NAMES
    assert Attr("d", "dtype", choices=("float32", "float64")).options == ("float32", "float64")
    assert Attr("c", "choice", "a", choices=("a", "b")).options == ("a", "b")
    assert Attr("n", "int").options == () and Attr("x", "nonesuch").options == ()


@pytest.mark.parametrize("shape, sep, text", [
    ((), ", ", "[]"), ((2, 3), ", ", "[2, 3]"), ((None, 3), ", ", "[?, 3]"), ((-1, 3), ", ", "[?, 3]"),
    ((None, 3), ",", "[?,3]"), ((np.int64(4),), ", ", "[4]"),
])
def test_shape_text(shape, sep, text):
    assert shape_text(shape, sep=sep) == text


def test_shapes_in_messages_and_types_read_as_before():
    assert TensorType((None, 3), "float32").describe() == "float32[?,3]"
    with pytest.raises(ShapeError, match=r"^shapes \[\?,3\] and \[4\] do not broadcast$"):
        broadcast_shapes((None, 3), (4,))


def test_the_dims_kind_takes_sizes_and_dimension_names():
    from blockflow.spec import Attr
    dims = Attr("shape", "dims", None)
    assert dims.validate(["batch", 3, -1]) == ("batch", 3, None)
    assert dims.validate(None) is None
    for bad in ("batch", ["two words"], [1.5], [-2]):
        with pytest.raises(AttrError):
            dims.validate(bad)
