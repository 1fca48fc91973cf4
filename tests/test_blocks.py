"""Tests of the block library: a case table covering every registered block, gradient checks,
shape inference against forward, cotangent shapes and dtypes, and the numerics of the softmax
family."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from blockflow.datafiles import DataFiles, DataRequest
from blockflow.run.gradcheck import check_block
from blockflow.registry import Registry
from blockflow.spec import ShapeError, TensorType
from blockflow_blocks import all_blocks

from casekit import Case, distinct, f32, i32, ints  # noqa: F401  (also used by the tables)


def _load_cases():
    """Merge the CASES tables of every tests/cases_*.py module; a block listed twice is an error."""
    import importlib
    from pathlib import Path

    cases, not_diff, open_shapes, keep_known = {}, {}, set(), {}
    for path in sorted(Path(__file__).parent.glob("cases_*.py")):
        module = importlib.import_module(path.stem)
        for name, entries in module.CASES.items():
            assert name not in cases, f"{name} has cases in two modules (second: {path.name})"
            cases[name] = entries
        not_diff.update(getattr(module, "NOT_DIFFERENTIABLE", {}))
        # Blocks whose output size depends on the data (infer gives an unknown size there).
        open_shapes |= set(getattr(module, "OPEN_SHAPES", ()))
        # Input sizes that must stay known for infer to work: {block: {input: [axis, ...]}}.
        keep_known.update(getattr(module, "KEEP_KNOWN", {}))
    return cases, not_diff, open_shapes, keep_known


CASES, NOT_DIFFERENTIABLE, OPEN_SHAPES, KEEP_KNOWN = _load_cases()


@pytest.fixture(scope="module")
def registry():
    return Registry(all_blocks())


_REGISTRY = Registry(all_blocks())
ALL_CASES = [pytest.param(name, case, id=f"{name}-{case.id or i}")
             for name, cases in CASES.items() for i, case in enumerate(cases)]
GRAD_CASES = [p for p in ALL_CASES if p.values[1].grad]


def _frozen(a):
    if isinstance(a, list):
        return [_frozen(x) for x in a]
    if isinstance(a, np.ndarray):
        a = a.copy()
        a.setflags(write=False)
    return a


def _types(spec, inputs, unknown=None):
    """TensorTypes for the non-static inputs (static ones keep their value).

    ``unknown``: None, "all" (every size unknown) or "lead" (the first size unknown).
    """
    def t(a, keep=()):
        shape = list(np.shape(a))
        if unknown == "all":
            shape = [None] * len(shape)
        elif unknown == "lead" and shape:
            shape[0] = None
        for axis in keep:
            if shape:
                shape[axis] = np.shape(a)[axis]
        return TensorType(tuple(shape), np.asarray(a).dtype)

    out = []
    keep = KEEP_KNOWN.get(spec.name, {})
    for port, a in zip(spec.inputs, inputs):
        if port.static or a is None:  # a value, or an unwired optional input
            out.append(a)
        elif port.variadic:
            out.append([t(x, keep.get(port.name, ())) for x in a])
        else:
            out.append(t(a, keep.get(port.name, ())))
    return out


def _attrs(spec, case):
    values, problems = spec.validate_attrs(case.attrs)
    assert not problems, problems
    return values


DATA_FILES = DataFiles(__import__("pathlib").Path(__file__).parent / "data")


def _infer(spec, types, attrs):
    """spec.infer with the context it asks for (the test data folder as the project's files)."""
    return spec.infer(*types, **attrs, **({"files": DATA_FILES} if "files" in spec.infer_context else {}))


def _forward(spec, case, attrs):
    inputs = _frozen(list(case.inputs))
    if "data" in spec.forward_context:
        attrs = dict(attrs, data=DataRequest())
    if "files" in spec.forward_context:
        attrs = dict(attrs, files=DATA_FILES)
    if spec.role == "variable":
        return spec.forward(spec.initial(**attrs), **attrs)
    if spec.role == "placeholder":
        return spec.forward(case.value, **attrs)
    if "rng" in spec.forward_context:
        attrs = dict(attrs, rng=np.random.default_rng(0))
    out = spec.forward(*inputs, **attrs)
    if spec.refs:  # a state update: (outputs, {ref input: new value})
        out, updates = out
        assert set(updates) <= set(spec.refs), f"{spec.name} updates {set(updates) - set(spec.refs)}"
        for name, value in updates.items():
            current = inputs[[p.name for p in spec.inputs].index(name)]
            assert np.shape(value) == np.shape(current) and np.asarray(value).dtype == current.dtype, name
    return out


def _outs(x, spec):
    """A block's result as a flat tuple, one entry per port (an OutputList gives several)."""
    declared = (x,) if len(spec.outputs) == 1 else tuple(x)
    flat = []
    for port, o in zip(spec.outputs, declared):
        flat.extend(o if port.variadic else (o,))
    return tuple(flat)


def _compatible(inferred, actual):
    return len(inferred) == len(actual) and all(d is None or d == a for d, a in zip(inferred, actual))


# --------------------------------------------------------------------------------------------
# Completeness


def test_every_registered_block_has_a_case(registry):
    missing = sorted(set(registry.names()) - set(CASES))
    assert not missing, f"blocks without a test case in CASES: {missing}"
    stale = sorted(set(CASES) - set(registry.names()))
    assert not stale, f"cases for blocks that are not registered: {stale}"


def test_every_differentiable_block_has_a_gradient_check(registry):
    checked = {p.values[0] for p in GRAD_CASES}
    missing = sorted(s.name for s in registry if s.differentiable and s.name not in checked)
    assert not missing, f"differentiable blocks without a gradient-checked case: {missing}"


def test_non_differentiable_blocks_say_so(registry):
    for spec in registry:
        if spec.name in NOT_DIFFERENTIABLE:
            assert spec.vjp is None and not spec.differentiable, spec.name
            assert spec.gradient == NOT_DIFFERENTIABLE[spec.name], spec.name
        else:
            assert spec.vjp is not None and spec.gradient == "vjp", f"{spec.name} has no vjp"


def test_stop_gradient_cuts_the_gradient(registry):
    spec = registry["StopGradient"]
    assert spec.gradient == "stop" and spec.vjp is None and not spec.differentiable
    with pytest.raises(ValueError, match="no vjp"):
        check_block(spec, [np.ones(3)])


def test_every_block_has_a_short_tooltip(registry):
    for spec in registry:
        assert spec.summary and len(spec.summary) <= 100, spec.name


@pytest.mark.parametrize("alias, name", [
    ("Sub", "Subtract"), ("Mul", "Multiply"), ("Div", "RealDiv"), ("Neg", "Negate"),
    ("ReduceMean", "Mean"), ("ReduceMax", "Max"), ("ReduceSum", "Sum"), ("AddV2", "Add"),
])
def test_tf_aliases(registry, alias, name):
    assert registry.resolve_alias(alias) == name


# --------------------------------------------------------------------------------------------
# infer agrees with forward


@pytest.mark.parametrize("name, case", ALL_CASES)
def test_infer_agrees_with_forward(registry, name, case):
    spec = registry[name]
    attrs = _attrs(spec, case)
    inferred = _outs(_infer(spec, _types(spec, case.inputs), attrs), spec)
    outs = _outs(_forward(spec, case, attrs), spec)
    assert len(inferred) == len(outs)
    float32_in = any(np.asarray(a[0] if p.variadic else a).dtype == np.float32
                     for p, a in zip(spec.inputs, case.inputs) if not p.static)
    for t, o in zip(inferred, outs):
        assert isinstance(t, TensorType)
        assert t.dtype == o.dtype, f"infer says {t.dtype}, forward gives {o.dtype}"
        if spec.role == "op" and spec.name not in OPEN_SHAPES:
            assert t.shape == np.shape(o), f"infer says {t.shape}, forward gives {np.shape(o)}"
        else:
            assert _compatible(t.shape, np.shape(o))
        if float32_in and o.dtype.kind == "f":
            assert o.dtype == np.float32


@pytest.mark.parametrize("unknown", ["all", "lead"])
@pytest.mark.parametrize("name, case", [p for p in ALL_CASES if p.values[1].inputs])
def test_infer_with_unknown_sizes(registry, name, case, unknown):
    spec = registry[name]
    attrs = _attrs(spec, case)
    inferred = _outs(_infer(spec, _types(spec, case.inputs, unknown), attrs), spec)
    for t, o in zip(inferred, _outs(_forward(spec, case, attrs), spec)):
        assert _compatible(t.shape, np.shape(o)), f"infer says {t}, forward gives {np.shape(o)}"
        assert t.dtype == o.dtype


@pytest.mark.parametrize("name, inputs, attrs, message", [
    ("Add", [TensorType((2, 3), "float32"), TensorType((4,), "float32")], {}, "do not broadcast"),
    ("Add", [TensorType((3,), "float32"), TensorType((3,), "float64")], {}, "one dtype"),
    ("Multiply", [TensorType((3,), "bool"), TensorType((3,), "bool")], {}, "bool"),
    ("MatMul", [TensorType((2, 3), "float32"), TensorType((4, 5), "float32")], {}, "inner sizes"),
    ("MatMul", [TensorType((2, 3), "float32"), TensorType((2, 5), "float32")], {"transpose_b": True},
     "inner sizes"),
    ("MatMul", [TensorType((2, 2, 3), "float32"), TensorType((3, 5), "float32")], {}, "rank 2"),
    ("Reshape", [TensorType((2, 3), "float32"), ints([4, 2])], {}, "do not fit"),
    ("Reshape", [TensorType((2, 3), "float32"), ints([4, -1])], {}, "do not fit"),
    ("Reshape", [TensorType((2, 3), "float32"), ints([-1, -1])], {}, "at most one -1"),
    ("Reshape", [TensorType((2, 3), "float32"), ints([[2, 3]])], {}, "list of integer sizes"),
    ("Transpose", [TensorType((2, 3), "float32"), ints([0, 0])], {}, "not a permutation"),
    ("Transpose", [TensorType((2, 3), "float32"), ints([0, 1, 2])], {}, "not a permutation"),
    ("AddN", [[TensorType((2, 3), "float32"), TensorType((3, 2), "float32")]], {}, "differ"),
    ("AddN", [[TensorType((2, 3), "float32"), TensorType((2,), "float32")]], {}, "rank"),
    ("Sum", [TensorType((2, 3), "float32"), ints(2)], {}, "out of range"),
    ("Max", [TensorType((2, 3), "float32"), ints([1, -1])], {}, "twice"),
    ("Softmax", [TensorType((), "float32")], {}, "rank 1"),
    ("SoftmaxCrossEntropyWithLogits", [TensorType((2, 3), "float32"), TensorType((2, 4), "float32")],
     {}, "differ"),
    ("SoftmaxCrossEntropyWithLogits", [TensorType((3,), "float32"), TensorType((3,), "float32")],
     {}, r"\[batch, classes\]"),
    ("SoftmaxCrossEntropyWithLogits", [TensorType((2, 3), "float32"), TensorType((2, 3), "float64")],
     {}, "float64"),
])
def test_infer_rejects_what_does_not_fit(registry, name, inputs, attrs, message):
    spec = registry[name]
    with pytest.raises(ShapeError, match=message):
        spec.infer(*inputs, **_attrs(spec, Case(attrs=attrs)))


def test_infer_keeps_unknown_sizes(registry):
    unknown = TensorType((None, 3), "float32")
    assert registry["MatMul"].infer(unknown, TensorType((3, None), "float32"),
                                    transpose_a=False, transpose_b=False).shape == (None, None)
    assert registry["Reshape"].infer(unknown, ints([-1])).shape == (None,)
    assert registry["Reshape"].infer(unknown, ints([3, -1, 1])).shape == (3, None, 1)
    assert registry["Add"].infer(unknown, TensorType((3,), "float32")).shape == (None, 3)
    loss, backprop = registry["SoftmaxCrossEntropyWithLogits"].infer(unknown, TensorType((5, None), "float32"))
    assert loss.shape == (5,) and backprop.shape == (5, 3)


def test_addn_forward_rejects_mismatched_shapes(registry):
    with pytest.raises(ShapeError, match="differ"):
        registry["AddN"].forward([f32(2, 3), f32(3)])


# --------------------------------------------------------------------------------------------
# Gradients


@pytest.mark.parametrize("name, case", GRAD_CASES)
def test_gradient_check(registry, name, case):
    result = check_block(registry[name], list(case.inputs), case.attrs, seed=7)
    assert result.passed, str(result)


def _needs_all(spec, inputs):
    return tuple(tuple(True for _ in a) if p.variadic else not p.static for p, a in zip(spec.inputs, inputs))


def _call_vjp(spec, g, out, inputs, attrs, needs=None):
    if "needs" in spec.vjp_context:
        attrs = dict(attrs, needs=needs if needs is not None else _needs_all(spec, inputs))
    if "rng" in spec.vjp_context:
        attrs = dict(attrs, rng=np.random.default_rng(0))
    return spec.vjp(g, out, *inputs, **attrs)


def _random_cotangent(out, spec, broadcast):
    rng = np.random.default_rng(11)

    def one(o, port):
        if not port.differentiable:
            return None
        shape, dtype = np.shape(o), np.asarray(o).dtype
        if broadcast:  # a read-only view with zero strides, as the runtime may pass
            return np.broadcast_to(np.asarray(1.5, dtype=dtype), shape)
        return _frozen(rng.standard_normal(shape).astype(dtype))

    declared = (out,) if len(spec.outputs) == 1 else tuple(out)
    gs = [[one(x, port) for x in o] if port.variadic else one(o, port) for o, port in zip(declared, spec.outputs)]
    return gs[0] if len(spec.outputs) == 1 else tuple(gs)


@pytest.mark.parametrize("broadcast", [False, True], ids=["g-array", "g-broadcast-view"])
@pytest.mark.parametrize("name, case", GRAD_CASES)
def test_vjp_cotangents_match_inputs_in_shape_and_dtype(registry, name, case, broadcast):
    """float32 in, float32 cotangents out, of exactly the inputs' shapes; inputs, g and out are
    read-only, so a vjp that writes into any of them fails here."""
    spec = registry[name]
    attrs = _attrs(spec, case)
    inputs = _frozen(list(case.inputs))
    out = _frozen(_forward(spec, case, attrs))
    if isinstance(out, tuple):
        out = tuple(_frozen(o) for o in out)
    g = _random_cotangent(out, spec, broadcast)
    cts = _call_vjp(spec, g, out, inputs, attrs)
    assert isinstance(cts, tuple) and len(cts) == len(spec.inputs)
    for port, x, ct in zip(spec.inputs, inputs, cts):
        if port.static or not port.differentiable:
            assert ct is None, f"non-differentiable input {port.name} got a cotangent"
            continue
        pairs = zip(x, ct) if port.variadic else [(x, ct)]
        assert not port.variadic or len(ct) == len(x)
        for xi, ci in pairs:
            assert ci is not None, f"{name}: no cotangent for {port.name}"
            assert np.shape(ci) == np.shape(xi), f"{port.name}: {np.shape(ci)} vs {np.shape(xi)}"
            assert np.asarray(ci).dtype == np.asarray(xi).dtype, f"{port.name}: {np.asarray(ci).dtype}"


NEEDS_CASES = [p for p in GRAD_CASES if "needs" in _REGISTRY[p.values[0]].vjp_context]


@pytest.mark.parametrize("name, case", NEEDS_CASES)
def test_vjp_computes_only_what_is_needed(registry, name, case):
    spec = registry[name]
    attrs = _attrs(spec, case)
    inputs = list(case.inputs)
    out = spec.forward(*inputs, **attrs)
    g = _random_cotangent(out, spec, broadcast=False)
    full = _call_vjp(spec, g, out, inputs, attrs)
    slots = [(i, j) for i, (p, a) in enumerate(zip(spec.inputs, inputs)) if not p.static and p.differentiable
             for j in (range(len(a)) if p.variadic else [None])]
    for want in slots:
        needs = tuple(tuple((i, j) == want for j in range(len(a))) if p.variadic else (i, None) == want
                      for i, (p, a) in enumerate(zip(spec.inputs, inputs)))
        got = _call_vjp(spec, g, out, inputs, attrs, needs)
        for slot in slots:
            i, j = slot
            value, expected = (got[i], full[i]) if j is None else (got[i][j], full[i][j])
            if slot == want:
                np.testing.assert_allclose(value, expected, rtol=1e-6)
            else:
                assert value is None, f"{name}: computed the unneeded cotangent of input {slot}"


@pytest.mark.parametrize("x, axis, keep_dims, expected", [
    ([1.0, 3.0, 3.0], None, False, [0.0, 0.5, 0.5]),
    ([[2.0, 2.0, 1.0], [0.0, 5.0, 5.0]], 1, False, [[0.5, 0.5, 0.0], [0.0, 0.5, 0.5]]),
    ([[2.0, 2.0, 1.0], [0.0, 5.0, 5.0]], 1, True, [[0.5, 0.5, 0.0], [0.0, 0.5, 0.5]]),
    ([[4.0, 1.0], [4.0, 4.0]], None, False, [[1 / 3, 0.0], [1 / 3, 1 / 3]]),
    ([[4.0, 1.0], [4.0, 0.0]], 0, False, [[0.5, 1.0], [0.5, 0.0]]),
])
def test_max_splits_the_gradient_among_ties_as_tensorflow(registry, x, axis, keep_dims, expected):
    spec = registry["Max"]
    x = np.array(x, dtype=np.float32)
    axis = None if axis is None else ints(axis)
    out = spec.forward(x, axis, keep_dims=keep_dims)
    g = np.ones(np.shape(out), dtype=np.float32)
    gx, g_axis = spec.vjp(g, out, x, axis, keep_dims=keep_dims)
    assert g_axis is None and gx.dtype == np.float32
    np.testing.assert_allclose(gx, expected, rtol=1e-6)


def test_relu_gradient_is_zero_at_zero(registry):
    spec = registry["Relu"]
    x = np.array([-1.0, 0.0, 2.0], dtype=np.float32)
    (gx,) = spec.vjp(np.ones(3, np.float32), spec.forward(x), x)
    np.testing.assert_array_equal(gx, [0.0, 0.0, 1.0])


def test_mean_of_integers_truncates_toward_zero(registry):
    spec = registry["Mean"]
    x = np.array([[-3, 0], [3, 4], [-7, 2]], dtype=np.int32)
    out = spec.forward(x, ints(1), keep_dims=False)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, [-1, 3, -2])


def test_sum_keeps_int32(registry):
    out = registry["Sum"].forward(np.array([1, 2, 3], np.int32), None, keep_dims=False)
    assert out.dtype == np.int32 and out == 6


# --------------------------------------------------------------------------------------------
# Numerics of the softmax family


def _shifted_softmax(x):
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _shifted_log_softmax(x):
    x = np.asarray(x, dtype=np.float64)
    z = x - x.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


_base = np.random.default_rng(5).standard_normal((4, 7))
SOFTMAX_INPUTS = {
    "random": _base * 3,
    "huge": 1000 + _base,
    "very-negative": -1000 + _base,
    "mixed-rows": np.concatenate([_base[:1] * 3, 1000 + _base[1:2], -1000 + _base[2:3], 85 + _base[3:]]),
    "all-below-one": -30 + _base,  # row sums < 1: the fallback
    "near-overflow": 87 + _base,  # float32 sums beyond 1/tiny: the fallback
    "large-gap": np.array([[80.0, 70.0, 60.0], [0.0, -1e4, 1e4]]),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("which", list(SOFTMAX_INPUTS))
def test_softmax_matches_the_shifted_formula(registry, which, dtype):
    x = SOFTMAX_INPUTS[which].astype(dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = registry["Softmax"].forward(x)
        log_got = registry["LogSoftmax"].forward(x)
    assert got.dtype == dtype and log_got.dtype == dtype
    assert np.all(np.isfinite(got)) and np.all(np.isfinite(log_got))
    # The shifted formula (taken for small tensors) rounds x - max first: an error of up to
    # half an ulp of |x - max|, which exp turns into a relative error of that size.
    spread = np.abs(x - x.max(axis=-1, keepdims=True)).astype(np.float64)
    tol = 4 * np.finfo(dtype).eps
    ref = _shifted_softmax(x)
    assert np.all(np.abs(got - ref) <= tol * np.maximum(spread, 1) * np.abs(ref) + np.finfo(dtype).tiny * 4)
    np.testing.assert_allclose(got.sum(axis=-1), 1.0, rtol=16 * np.finfo(dtype).eps)
    # Log-probabilities: within a few ulps of max(|log p|, 1), also for log p close to 0.
    log_ref = _shifted_log_softmax(x)
    error = np.abs(log_got - log_ref) / np.maximum(np.abs(log_ref), 1)
    assert error.max() <= tol, f"max error {error.max() / np.finfo(dtype).eps:.1f} ulps"


def test_log_softmax_keeps_small_log_probabilities_accurate(registry):
    # log_softmax([80, 70])[0] = -log1p(exp(-10)) = -4.54e-5. Rounding log(sum(exp(x))) to float32
    # alone costs ~3 ulps of 1 here; the fast path's correction term brings it within one, like
    # the shifted formula.
    x = np.array([[80.0, 70.0]], dtype=np.float32)
    eps = float(np.finfo(np.float32).eps)
    got = registry["LogSoftmax"].forward(x)[0, 0]
    np.testing.assert_allclose(got, -np.log1p(np.exp(-10.0)), rtol=0, atol=eps)
    loss, _ = registry["SoftmaxCrossEntropyWithLogits"].forward(x, np.array([[1.0, 0.0]], np.float32))
    np.testing.assert_allclose(loss, [np.log1p(np.exp(-10.0))], rtol=0, atol=eps)


def test_softmax_skips_the_shift_when_it_can():
    from blockflow_blocks import nn_softmax

    big = lambda which: np.tile(SOFTMAX_INPUTS[which].astype(np.float32), (nn_softmax._SMALL, 1))  # noqa: E731
    assert nn_softmax.exp_rows(big("random"), log=False)[2] is None
    for which in ("huge", "very-negative", "mixed-rows", "all-below-one", "near-overflow"):
        shift = nn_softmax.exp_rows(big(which), log=False)[2]
        np.testing.assert_array_equal(shift, big(which).max(-1, keepdims=True))
    # Small tensors always take the shifted formula: fewer numpy calls.
    small = SOFTMAX_INPUTS["random"].astype(np.float32)
    np.testing.assert_array_equal(nn_softmax.exp_rows(small, log=False)[2], small.max(-1, keepdims=True))


@pytest.mark.parametrize("which", ["random", "huge", "mixed-rows", "all-below-one", "near-overflow"])
def test_softmax_fast_path_on_big_tensors_matches_the_shifted_formula(registry, which):
    from blockflow_blocks import nn_softmax

    x = np.tile(SOFTMAX_INPUTS[which].astype(np.float32), (nn_softmax._SMALL, 1))
    got = registry["Softmax"].forward(x)
    ref = _shifted_softmax(x)
    np.testing.assert_allclose(got, ref, rtol=4 * np.finfo(np.float32).eps, atol=np.finfo(np.float32).tiny * 4)
    log_ref = _shifted_log_softmax(x)
    error = np.abs(registry["LogSoftmax"].forward(x) - log_ref) / np.maximum(np.abs(log_ref), 1)
    assert error.max() <= 8 * np.finfo(np.float32).eps


@pytest.mark.parametrize("which", list(SOFTMAX_INPUTS))
def test_softmax_cross_entropy_matches_its_formula(registry, which):
    x = SOFTMAX_INPUTS[which].astype(np.float32)
    labels = np.random.default_rng(1).dirichlet(np.ones(x.shape[1]), size=x.shape[0]).astype(np.float32)
    labels[0] = np.eye(x.shape[1], dtype=np.float32)[1]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loss, backprop = registry["SoftmaxCrossEntropyWithLogits"].forward(x, labels)
    assert loss.shape == (x.shape[0],) and backprop.shape == x.shape
    assert loss.dtype == np.float32 and backprop.dtype == np.float32
    ref_loss = -(labels * _shifted_log_softmax(x)).sum(axis=-1)
    np.testing.assert_allclose(loss, ref_loss, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(backprop, _shifted_softmax(x) - labels, rtol=1e-5, atol=1e-7)


def test_softmax_cross_entropy_backprop_is_not_differentiable(registry):
    spec = registry["SoftmaxCrossEntropyWithLogits"]
    assert [o.differentiable for o in spec.outputs] == [True, False]
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3)).astype(np.float32)
    labels = rng.dirichlet(np.ones(3), size=2).astype(np.float32)
    out = spec.forward(x, labels)
    assert spec.vjp((None, None), out, x, labels, needs=(True, True)) == (None, None)
    g_x, g_labels = spec.vjp((np.ones(2, np.float32), None), out, x, labels, needs=(True, True))
    np.testing.assert_allclose(g_x, out[1], rtol=1e-6)
    np.testing.assert_allclose(g_labels, -_shifted_log_softmax(x), rtol=1e-5)


def test_softmax_vjp_matches_the_jacobian(registry):
    x = np.random.default_rng(2).standard_normal(5)
    y = registry["Softmax"].forward(x)
    g = np.random.default_rng(3).standard_normal(5)
    (gx,) = registry["Softmax"].vjp(g, y, x)
    jacobian = np.diag(y) - np.outer(y, y)
    np.testing.assert_allclose(gx, jacobian.T @ g, rtol=1e-12, atol=1e-15)


def test_sigmoid_is_accurate_and_quiet_in_the_tails(registry):
    x = np.array([-200.0, -100.0, -30.0, -5.0, 0.0, 5.0, 30.0, 200.0])
    with np.errstate(over="ignore"):
        ref = np.where(x < 0, np.exp(x) / (1 + np.exp(x)), 1 / (1 + np.exp(-x)))
    for dtype in (np.float32, np.float64):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = registry["Sigmoid"].forward(x.astype(dtype))
        assert got.dtype == dtype and np.all(np.isfinite(got))
        normal = ref > np.finfo(dtype).tiny
        np.testing.assert_allclose(got[normal], ref[normal], rtol=4 * np.finfo(dtype).eps)
        assert np.all(got[~normal] <= np.finfo(dtype).tiny)
