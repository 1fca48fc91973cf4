"""Gradients written inline from a block's ``vjp.inline`` template (run/inline_grads.py,
blockflow/spec/inline.py) are the vjp's own, bit for bit, and only where the template holds."""
from __future__ import annotations

import numpy as np
import pytest

import blockflow.run.lower as lower
from blockflow.compile.compiler import compile_project
from blockflow.registry import default_registry
from blockflow.run.runtime import run
from blockflow.spec import Input, ONE_OF_OUTPUT, Output, block
from blockflow.spec.inline import template_problem

from diagrams import chain

RNG = np.random.default_rng(27)
INLINED = sorted(spec.name for spec in default_registry() if getattr(spec.vjp, "inline", None))
#: blocks whose inputs are drawn above 0 (below it their outputs are NaN, which stops either run)
POSITIVE = {"Log", "Sqrt"}


def _inputs(name, size, dtype):
    low = 0.25 if name in POSITIVE else -2
    return RNG.uniform(low, 2, size=size).astype(dtype)


def test_the_library_declares_inline_gradients_for_its_small_elementwise_blocks():
    assert {"Add", "Subtract", "Multiply", "Negate", "Tanh", "Sigmoid", "Relu", "Exp", "Square", "Sqrt", "Log",
            "Abs", "Softplus"} <= set(INLINED)
    for name in INLINED:
        assert template_problem(default_registry()[name]) is None, name


def _page(name, shape, dtype, wired):
    """Placeholders into block ``name`` (every input, or only ``wired``, the rest constants),
    its output times a random weight, summed: the cotangent the block gets is the weight."""
    spec = default_registry()[name]
    specs, feeds, wires = [], {}, {}
    for d in spec.inputs:
        value = _inputs(name, shape, dtype)
        if d.name in wired:
            specs.append((f"in_{d.name}", "Placeholder", {"shape": list(shape), "dtype": dtype}, None))
            feeds[f"in_{d.name}"] = value
            wires[d.name] = f"in_{d.name}"
        else:
            wires[d.name] = value
    specs += [("blk", name, {}, wires),
              ("w", "Placeholder", {"shape": list(shape), "dtype": dtype}, None),
              ("m", "Multiply", {}, {"x": "blk", "y": "w"}),
              ("loss", "Sum", {}, {"input": "m"})]
    feeds["w"] = RNG.normal(size=shape).astype(dtype)
    return chain(*specs), feeds


def _bits(monkeypatch, inline, project, feeds, wrt, record):
    monkeypatch.setattr(lower, "INLINE_VJPS", inline)
    program = compile_project(project)
    program.raise_for_errors()
    res = run(program, feeds, target="loss", wrt=wrt, record=record)
    plan = next(iter(program.cache("plans").values()))
    blk = program.step("blk").index
    called = f"= b{blk}_" in plan.source
    return {k: np.asarray(v).tobytes() for k, v in res.variable_grads.items()}, called


@pytest.mark.parametrize("name", INLINED)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(7,), (3, 5), ()])
def test_an_inline_gradient_has_the_vjps_bits(monkeypatch, name, dtype, shape):
    spec = default_registry()[name]
    inputs = [d.name for d in spec.inputs]
    for wired in ([inputs[0]], inputs) if len(inputs) > 1 else ([inputs[0]],):
        project, feeds = _page(name, shape, dtype, wired)
        wrt = [f"in_{n}" for n in wired]
        for record in (False, True):
            inlined, called_on = _bits(monkeypatch, True, project, feeds, wrt, record)
            called, called_off = _bits(monkeypatch, False, project, feeds, wrt, record)
            assert inlined == called, (name, wired, record)
            assert called_off and not called_on, (name, wired, record)


def test_a_broadcast_input_or_a_large_one_calls_the_vjp(monkeypatch):
    monkeypatch.setattr(lower, "INLINE_VJPS", True)
    # y of shape [1] broadcast against x [6]: its gradient is a sum, not the template's product
    project = chain(("x", "Placeholder", {"shape": [6]}, None),
                    ("y", "Placeholder", {"shape": [1]}, None),
                    ("blk", "Multiply", {}, {"x": "x", "y": "y"}),
                    ("loss", "Sum", {}, {"input": "blk"}))
    program = compile_project(project)
    x, y = RNG.normal(size=6).astype(np.float32), np.array([1.5], np.float32)
    res = run(program, {"x": x, "y": y}, target="loss", wrt=["x", "y"], record=False)
    np.testing.assert_array_equal(res.variable_grads["y"], [x.sum()])
    plan = next(iter(program.cache("plans").values()))
    assert f"= b{program.step('blk').index}_" in plan.source
    big = compile_project(chain(("x", "Placeholder", {"shape": [lower.IN_PLACE_MIN_SIZE]}, None),
                                ("blk", "Tanh", {}, {"x": "x"}), ("loss", "Sum", {}, {"input": "blk"})))
    run(big, {"x": np.zeros(lower.IN_PLACE_MIN_SIZE, np.float32)}, target="loss", wrt=["x"], record=False)
    assert f"= b{big.step('blk').index}_" in next(iter(big.cache("plans").values())).source


def _probe(name, gradient):
    """A block "x doubled" whose vjp is ``gradient``, declared as a block library would."""

    @block(name, category="test")
    class Probe:
        """x doubled."""

        inputs = (Input("x"),)
        outputs = (Output("y"),)
        vjp = gradient

        def infer(x):
            return x

        def forward(x):
            return x + x

    return Probe


def test_a_template_reading_what_its_vjp_does_not_is_refused():
    def vjp(g, out, x):
        return (g + g,)

    vjp.reads = ()
    vjp.inline = {"x": (np.add, "g", "x")}
    InlineProbe = _probe("InlineProbe", vjp)
    assert "reads ['x']" in template_problem(InlineProbe)
    InlineProbe.vjp.inline = {"z": (np.add, "g", "g")}
    assert "not an input" in template_problem(InlineProbe)
    InlineProbe.vjp.inline = {"x": (np.add, "g")}
    assert "not (ufunc, arg, ...)" in template_problem(InlineProbe)
    InlineProbe.vjp.inline = {"x": (np.add, "g", ONE_OF_OUTPUT)}
    assert template_problem(InlineProbe) is None


def _gradients_page(name, dtype, seed_shape):
    """x float32[5] into block ``name`` (every input x), a Gradients block of it with respect to
    x, seeded by a ``grad_ys`` Placeholder of ``dtype`` and ``seed_shape`` (-1: an open size)."""
    spec = default_registry()[name]
    return chain(("x", "Placeholder", {"shape": [5], "dtype": "float32"}, None),
                 ("gy", "Placeholder", {"shape": list(seed_shape), "dtype": dtype}, None),
                 ("blk", name, {}, {d.name: "x" for d in spec.inputs}),
                 ("G", "Gradients", {}, {"ys[0]": "blk", "xs[0]": "x", "grad_ys[0]": "gy"}))


def _dx(monkeypatch, inline, project, feeds, record):
    monkeypatch.setattr(lower, "INLINE_VJPS", inline)
    program = compile_project(project)
    try:
        value = run(program, feeds, fetch=["G:dx[0]"], record=record).value("G", "dx[0]")
    except Exception as exc:  # noqa: BLE001 - compared with the other way's
        return type(exc).__name__, str(exc)
    return value.dtype, value.shape, value.tobytes()


@pytest.mark.parametrize("name", INLINED)
@pytest.mark.parametrize("record", [False, True])
def test_a_wider_cotangent_keeps_the_vjps_dtype(monkeypatch, name, record):
    # a Gradients block's float64 grad_ys into float32 blocks: Tanh's and Sigmoid's vjps write
    # g into their own float32 array (t *= g); np.multiply(t, g) gave float64. Such a page is now
    # refused when it compiles (the next test): both ways still give the same outcome
    project = _gradients_page(name, "float64", [5])
    feeds = {"x": _inputs(name, 5, np.float32), "gy": RNG.normal(size=5)}
    inlined = _dx(monkeypatch, True, project, feeds, record)
    assert inlined == _dx(monkeypatch, False, project, feeds, record), name


@pytest.mark.parametrize("name", INLINED)
@pytest.mark.parametrize("size", [1, 5, 7])
def test_a_grad_ys_of_an_open_size_gives_what_the_vjp_gives(monkeypatch, name, size):
    # nothing checks an open grad_ys against its ys when the run feeds it: Add's template handed
    # a cotangent of 7 values on as x's gradient (float32[7] for a float32[5] x), where its vjp's
    # unbroadcast refuses it
    project = _gradients_page(name, "float32", [-1])
    feeds = {"x": _inputs(name, 5, np.float32), "gy": RNG.normal(size=size).astype(np.float32)}
    for record in (False, True):
        assert _dx(monkeypatch, True, project, feeds, record) == _dx(monkeypatch, False, project, feeds, record), \
            (name, size, record)


def test_a_gradients_block_seeded_by_its_ys_shape_writes_inline(monkeypatch):
    monkeypatch.setattr(lower, "INLINE_VJPS", True)
    for seed_shape, inline in (([5], True), ([-1], False)):
        program = compile_project(_gradients_page("Tanh", "float32", seed_shape))
        run(program, {"x": np.ones(5, np.float32), "gy": np.ones(5, np.float32)}, fetch=["G:dx[0]"], record=True)
        source = next(iter(program.cache("plans").values())).source
        assert (f"= b{program.step('blk').index}_" not in source) == inline, seed_shape


def test_an_augmented_operator_writes_only_into_an_array_of_its_own():
    import operator

    def vjp(g, out, x):
        t = g + g
        t *= x
        return (t,)

    vjp.inline = {"x": (operator.imul, (np.add, "g", "g"), "x")}
    InlineProbe2 = _probe("InlineProbe2", vjp)

    assert template_problem(InlineProbe2) is None
    InlineProbe2.vjp.inline = {"x": (operator.imul, "g", "x")}   # would write into the cotangent
    assert "augmented operator" in template_problem(InlineProbe2)


def test_a_grad_ys_of_another_dtype_is_refused_when_the_page_compiles():
    # TensorFlow's gradient functions take a seed of its y's dtype; a float64 one into a float32
    # Tanh gave a float64 gradient through the vjp (a wider cotangent)
    program = compile_project(_gradients_page("Tanh", "float64", [5]))
    assert not program.ok
    assert any("grad_ys[0] float64[5] does not match ys[0] float32[5]" in str(e) for e in program.errors)


@pytest.mark.parametrize("size", [1, 7])
@pytest.mark.parametrize("record", [False, True])
def test_an_open_grad_ys_of_another_shape_is_refused_when_the_page_runs(monkeypatch, size, record):
    # a [1] seed broadcast silently through Tanh's vjp; a [7] one failed inside a vjp
    for inline in (True, False):
        monkeypatch.setattr(lower, "INLINE_VJPS", inline)
        program = compile_project(_gradients_page("Tanh", "float32", [-1]))
        feeds = {"x": np.ones(5, np.float32), "gy": np.ones(size, np.float32)}
        with pytest.raises(Exception) as info:
            run(program, feeds, fetch=["G:dx[0]"], record=record)
        text = str(info.value)
        assert "main/G (Gradients)" in text and f"grad_ys[0] has shape [{size}] but ys[0] has [5]" in text, text
        good = run(program, {"x": np.ones(5, np.float32), "gy": np.ones(5, np.float32)}, fetch=["G:dx[0]"], record=record)
        assert good.value("G", "dx[0]").shape == (5,)
