"""The elementwise kernels that make fewer passes (blocks/fused.py, issue 18): a sum of a product
without the product's array, gradients written into their cotangent's array. Where the maths is
the same they give the plain kernels' bits; the gradients' np.dot sums are checked against
float64 instead."""
from __future__ import annotations

import numpy as np
import pytest

import blockflow_blocks.fused as fused
from blockflow.registry import default_registry
from blockflow.spec import unbroadcast

RNG = np.random.default_rng(1918)
SIZES = [1, 7, 8, 129, 1000, 8193, 40_000, 100_003, 262_145]


def _spec(name):
    return default_registry()[name]


@pytest.fixture
def small_leaves(monkeypatch):
    """Pieces of at most 256 values: every size below is cut many times, at every depth."""
    monkeypatch.setattr(fused, "_LEAF", 256)
    monkeypatch.setattr(fused, "FUSE_MIN_SIZE", 1)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n", SIZES)
def test_the_tree_cut_in_pieces_gives_numpys_sum(small_leaves, dtype, n):
    a = (RNG.normal(size=n) * 3).astype(dtype)
    b = RNG.normal(size=n).astype(dtype)
    want = np.add.reduce(a * b)
    assert fused.sum_of_product(a, b).tobytes() == want.tobytes()
    assert fused.tree_sum(n, lambda lo, hi: np.add.reduce(a[lo:hi])).tobytes() == np.add.reduce(a).tobytes()


@pytest.mark.parametrize("shape", [(300, 7), (1, 5000), (64, 1, 33), (2, 3, 4, 5)])
def test_the_tree_gives_numpys_sum_of_a_tensor(small_leaves, shape):
    a = RNG.normal(size=shape).astype(np.float32)
    b = RNG.normal(size=shape).astype(np.float32)
    assert fused.sum_of_product(a, b).tobytes() == np.add.reduce(a * b, axis=None).tobytes()
    assert fused.sum_of_product(a, b).tobytes() == (a * b).sum(axis=tuple(range(len(shape)))).tobytes()


@pytest.mark.parametrize("dot", [False, True])
@pytest.mark.parametrize("shape, to", [((100_000,), ()), ((100_000,), (1,)), ((300, 400), ()), ((300, 400), (1, 1)),
                                       ((300, 400), (1,)), ((1, 50_000), (1, 1)), ((300, 400), (400,)),
                                       ((300, 400), (300, 1)), ((10,), ())])
def test_product_sum_is_unbroadcast_of_the_product(monkeypatch, dot, shape, to):
    """Off the fused cases (a gradient of a row, a column, a small one) it is the plain code; on
    them the tree gives the same bits and np.dot the float64 sum within rounding."""
    monkeypatch.setattr(fused, "DOT_GRADIENT_SUMS", dot)
    a = RNG.normal(size=shape).astype(np.float32)
    b = RNG.normal(size=shape).astype(np.float32)
    got, want = fused.product_sum(a, b, to, unbroadcast), unbroadcast(a * b, to)
    assert type(got) is type(want) and np.shape(got) == np.shape(want) and np.asarray(got).dtype == want.dtype
    if not dot or not fused.fusable(a, b, to):
        assert np.asarray(got).tobytes() == np.asarray(want).tobytes()
    else:
        ref = unbroadcast(a.astype(np.float64) * b, to)
        scale = np.abs(a.astype(np.float64) * b).sum()
        assert np.all(np.abs(np.asarray(got, np.float64) - ref) <= 1e-6 * scale)


@pytest.mark.parametrize("dot", [False, True])
def test_product_sum_divides_in_place_first(monkeypatch, dot):
    monkeypatch.setattr(fused, "DOT_GRADIENT_SUMS", dot)
    for shape, to in (((100_000,), ()), ((300, 400), (1, 1)), ((300, 400), (400,)), ((5,), ())):
        g = RNG.normal(size=shape).astype(np.float32)
        out = RNG.normal(size=shape).astype(np.float32)
        y = np.float32(1.7) if to == () else np.full(to, 1.7, np.float32)
        q = g / y
        a = g.copy()
        got = fused.product_sum(a, out, to, unbroadcast, divide_by=y)
        assert a.tobytes() == q.tobytes()
        want = unbroadcast(q * out, to)
        if dot and fused.fusable(a, out, to):
            # BLAS's sum against the float64 one, relative to the sum of the magnitudes (as in
            # test_product_sum_is_unbroadcast_of_the_product): a fixed atol against numpy's
            # float32 tree held here only because this CPU's sdot keeps many partial sums; a
            # kernel that adds in sequence errs by ~eps * sqrt(n) * |sum| (~2e-3 on 1e5 values)
            ref = unbroadcast(q.astype(np.float64) * out, to)
            scale = np.abs(q.astype(np.float64) * out).sum()
            assert np.all(np.abs(np.asarray(got, np.float64) - ref) <= 1e-6 * scale)
        else:
            assert np.asarray(got).tobytes() == np.asarray(want).tobytes()


def test_nothing_is_fused_for_float16_ints_or_strided_arrays(monkeypatch):
    monkeypatch.setattr(fused, "FUSE_MIN_SIZE", 1)
    a = np.ones(100, np.float16)
    assert not fused.fusable(a, a, ())
    i = np.arange(100, dtype=np.int32)
    assert not fused.fusable(i, i, ())
    f = RNG.normal(size=(100, 100)).astype(np.float32)
    assert not fused.fusable(f.T, f, ()) and not fused.fusable(f[:, ::2], f[:, ::2], ())
    assert not fused.fusable(f, f.astype(np.float64), ())
    assert fused.fusable(f, f, ()) and not fused.fusable(f, f, (100,))


# ------------------------------------------------------------------------ Sum of a product


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "float16"])
@pytest.mark.parametrize("keep_dims", [False, True])
@pytest.mark.parametrize("shape", [(100_000,), (250, 400), (7,)])
def test_sum_of_a_product_is_the_sum_of_the_product(dtype, keep_dims, shape):
    spec = _spec("Sum")
    a = (RNG.normal(size=shape) * 5).astype(dtype)
    b = (RNG.normal(size=shape) * 5).astype(dtype)
    got = spec.forward.of_product(a, b, None, keep_dims=keep_dims)
    want = spec.forward(a * b, None, keep_dims=keep_dims)
    assert type(got) is type(want) and np.shape(got) == np.shape(want)
    assert np.asarray(got).dtype == np.asarray(want).dtype
    assert np.asarray(got).tobytes() == np.asarray(want).tobytes()
    axis = np.int32(0)  # not over every value: the plain path
    assert spec.forward.of_product(a, b, axis, keep_dims=keep_dims).tobytes() == \
        spec.forward(a * b, axis, keep_dims=keep_dims).tobytes()


def test_sum_spreads_its_gradient_as_a_read_only_view():
    spec = _spec("Sum")
    x, row = np.ones((300, 50), np.float32), np.ones((1, 5000), np.float32)
    for x1, g, axis, keep in ((x, np.float32(2.5), None, False), (x, np.full((1, 1), 2.5, np.float32), None, True),
                              (row, np.full((1,), 2.5, np.float32), np.int32(1), False)):
        (gx, _) = spec.vjp(g, g, x1, axis, keep_dims=keep)
        assert gx.shape == x1.shape and gx.dtype == np.float32 and not gx.flags.writeable
        assert np.all(gx == 2.5) and set(gx.strides) == {0}


def test_a_reductions_gradient_over_some_axes_is_np_broadcast_tos_view():
    """Sum's and Mean's gradient over some axes of a large input stretch the cotangent without
    np.broadcast_to (math_reductions._stretched): the same values, shape and strides, read-only,
    and still np.broadcast_to's for a cotangent that is not C-ordered."""
    from blockflow_blocks.math_reductions import _stretched
    rng = np.random.default_rng(3)
    for shape, axes in (((64, 128), (1,)), ((64, 128), (0,)), ((8, 16, 40), (0, 2)), ((5000,), (0,))):
        kept = tuple(1 if i in axes else n for i, n in enumerate(shape))
        g = rng.normal(size=kept).astype(np.float32)
        got, want = _stretched(g, shape), np.broadcast_to(g, shape)
        assert got.shape == want.shape and got.strides == want.strides and got.dtype == want.dtype
        assert got.tobytes() == want.tobytes() and not got.flags.writeable
        for name in ("Sum", "Mean"):
            x = np.ones(shape, np.float32)
            out = _spec(name).forward(x, np.array(axes, np.int32), keep_dims=True)
            (gx, _) = _spec(name).vjp(g, out, x, np.array(axes, np.int32), keep_dims=True)
            scale = np.float32(1) if name == "Sum" else np.float32(x.size // out.size)
            assert gx.tobytes() == np.broadcast_to(g if name == "Sum" else g / scale, shape).tobytes()
    strided = rng.normal(size=(64, 2)).astype(np.float32)[:, :1]   # not C-ordered: broadcast_to's view
    assert _stretched(strided, (64, 128)).tobytes() == np.broadcast_to(strided, (64, 128)).tobytes()
    g = np.float32(2.0)
    assert _stretched(g, (64, 128)).tobytes() == np.broadcast_to(g, (64, 128)).tobytes()


# ----------------------------------------------------------------- gradients into their cotangent


def _parts(fn, g, out, *args, **kw):
    return [p for p in fn(g, out, *args, **kw)]


def _same(a, b):
    if a is None or b is None:
        return a is b
    return type(a) is type(b) and np.asarray(a).tobytes() == np.asarray(b).tobytes() and np.shape(a) == np.shape(b)


def _binary_cases():
    full = (2000, 30)
    for xs, ys in ((full, full), (full, ()), ((), full), (full, (30,)), (full, (1, 1)), ((2000, 1), full), ((), ())):
        for needs in ((True, True), (True, False), (False, True)):
            yield xs, ys, needs


@pytest.mark.parametrize("name", ["Multiply", "RealDiv"])
@pytest.mark.parametrize("dot", [False, True])
def test_binary_vjps_into_g_give_the_plain_vjps_gradients(monkeypatch, name, dot):
    """Every needs and broadcast: the same parts (bits, types, shapes) as the plain vjp, one of
    them in g's array exactly where into_g_position says, the others new arrays."""
    monkeypatch.setattr(fused, "DOT_GRADIENT_SUMS", dot)
    spec = _spec(name)
    for xs, ys, needs in _binary_cases():
        x = (RNG.normal(size=xs) + 3).astype(np.float32)
        y = (RNG.normal(size=ys) + 3).astype(np.float32)
        out = spec.forward(x, y)
        g = RNG.normal(size=np.shape(out)).astype(np.float32)
        plain = _parts(spec.vjp, g.copy(), out, x, y, needs=needs)
        owned = g.copy() if isinstance(out, np.ndarray) else np.float32(g)
        got = _parts(spec.vjp.into_g, owned, out, x, y, needs=needs)
        for p, q in zip(plain, got):
            assert _same(p, q), (name, xs, ys, needs)
        pos = fused.into_g_position(out, (x, y), needs) if isinstance(owned, np.ndarray) else None
        for i, q in enumerate(got):
            if isinstance(q, np.ndarray) and isinstance(owned, np.ndarray):
                assert np.shares_memory(q, owned) == (i == pos), (name, xs, ys, needs, i)
            if isinstance(q, np.ndarray):
                assert not any(np.shares_memory(q, a) for a in (x, y, out) if isinstance(a, np.ndarray))


@pytest.mark.parametrize("name", ["Exp", "Softmax"])
def test_unary_vjps_into_g_give_the_plain_vjps_gradients(name):
    spec = _spec(name)
    for shape in ((5000,), (40, 300)):
        x = RNG.normal(size=shape).astype(np.float32)
        out = spec.forward(x)
        g = RNG.normal(size=shape).astype(np.float32)
        (plain,) = spec.vjp(g.copy(), out, x)
        owned = g.copy()
        (got,) = spec.vjp.into_g(owned, out, x)
        assert got is owned and got.tobytes() == plain.tobytes()


@pytest.mark.parametrize("name", ["Multiply", "RealDiv", "Exp", "Softmax"])
def test_into_g_leaves_a_cotangent_it_may_not_write_alone(name):
    """Read-only (a broadcast view), of another dtype or shape: the plain vjp's new arrays."""
    spec = _spec(name)
    x = (RNG.normal(size=(50, 40)) + 3).astype(np.float32)
    binary = name in ("Multiply", "RealDiv")
    out = spec.forward(x, x) if binary else spec.forward(x)
    args = (x, x) if binary else (x,)
    kw = {"needs": (True, True)} if binary else {}
    for g in (np.broadcast_to(np.float32(2.0), out.shape), np.ones(out.shape, np.float64),
              np.ones((1, 40), np.float32)):
        before = np.array(g, copy=True)
        got = spec.vjp.into_g(g, out, *args, **kw)
        want = spec.vjp(g, out, *args, **kw)
        for p, q in zip(got, want):
            assert _same(p, q)
            assert not np.shares_memory(p, g)
        assert np.array_equal(g, before)


def test_the_declared_readers_of_values_hold():
    """What run/overwrite.py trusts: a vjp that says it does not read a value gives the same
    gradients when that value is garbage."""
    x = (RNG.normal(size=(30, 20)) + 3).astype(np.float32)
    y = (RNG.normal(size=(30, 20)) + 3).astype(np.float32)
    g = RNG.normal(size=(30, 20)).astype(np.float32)
    junk = np.full((30, 20), np.nan, np.float32)
    for name, args, kw in (("Add", (x, y), {"needs": (True, True)}), ("Subtract", (x, y), {"needs": (True, True)}),
                           ("Multiply", (x, y), {"needs": (True, True)}), ("RealDiv", (x, y), {"needs": (True, True)}),
                           ("Exp", (x,), {}), ("Tanh", (x,), {}), ("Negate", (x,), {}), ("Softmax", (x,), {}),
                           ("Sum", (x, None), {"keep_dims": False})):
        spec = _spec(name)
        reads = spec.vjp.reads
        out = spec.forward(*args, **kw) if name == "Sum" else spec.forward(*args)
        gg = np.float32(1.5) if name == "Sum" else g
        names = ["out"] + [p.name for p in spec.inputs]
        full = [out, *args]
        blanked = [v if n in reads or not isinstance(v, np.ndarray) else junk[:v.shape[0], :v.shape[1]]
                   for n, v in zip(names, full)]
        want = spec.vjp(gg, *full, **kw)
        got = spec.vjp(gg, *blanked, **kw)
        for p, q in zip(want, got):
            assert _same(p, q) or (p is None and q is None), name
