"""Semantics of the array_ops blocks against TensorFlow's documented results, their gradients'
special rules (scatter-adds, folding of mirrored borders, pieces without gradient), error
messages, compile-time folding of shape arithmetic, and PreventGradient in a run."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from blockflow.compile.compiler import compile_project
from blockflow.errors import RunError
from blockflow.run.gradcheck import check_block
from blockflow.registry import Registry
from blockflow.run.runtime import run
from blockflow.spec import ShapeError, TensorType
from blockflow_blocks import all_blocks

from cases_array_ops import CASES
from diagrams import chain

R = Registry(all_blocks())
ints = lambda v: np.array(v, dtype=np.int64)  # noqa: E731
T = TensorType


def fwd(name, *inputs, **attrs):
    spec = R[name]
    return spec.forward(*inputs, **{**spec.default_attrs(), **attrs})


def vjp(name, g, *inputs, needs=None, **attrs):
    spec = R[name]
    attrs = {**spec.default_attrs(), **attrs}
    out = spec.forward(*inputs, **attrs)
    if "needs" in spec.vjp_context:
        attrs["needs"] = needs if needs is not None else tuple(
            tuple(True for _ in x) if p.variadic else not p.static for p, x in zip(spec.inputs, inputs))
    return spec.vjp(g, out, *inputs, **attrs)


def infer(name, *inputs, **attrs):
    spec = R[name]
    return spec.infer(*inputs, **{**spec.default_attrs(), **attrs})


def frozen(a):
    a = np.array(a)
    a.setflags(write=False)
    return a


# The 3 x 2 x 3 tensor of TensorFlow's tf.slice / tf.strided_slice documentation.
TF_T = np.array([[[1, 1, 1], [2, 2, 2]], [[3, 3, 3], [4, 4, 4]], [[5, 5, 5], [6, 6, 6]]], np.float32)


# --------------------------------------------------------------------------------------------
# Forward results from TensorFlow's documentation


@pytest.mark.parametrize("begin, size, expected", [
    ([1, 0, 0], [1, 1, 3], [[[3, 3, 3]]]),
    ([1, 0, 0], [1, 2, 3], [[[3, 3, 3], [4, 4, 4]]]),
    ([1, 0, 0], [2, 1, 3], [[[3, 3, 3]], [[5, 5, 5]]]),
    ([1, 1, 0], [-1, -1, 2], [[[4, 4]], [[6, 6]]]),
])
def test_slice_matches_tf_docs(begin, size, expected):
    np.testing.assert_array_equal(fwd("Slice", TF_T, ints(begin), ints(size)), expected)


@pytest.mark.parametrize("begin, end, strides, masks, expected", [
    ([1, 0, 0], [2, 1, 3], [1, 1, 1], {}, [[[3, 3, 3]]]),
    ([1, 0, 0], [2, 2, 3], [1, 1, 1], {}, [[[3, 3, 3], [4, 4, 4]]]),
    ([1, -1, 0], [2, -3, 3], [1, -1, 1], {}, [[[4, 4, 4], [3, 3, 3]]]),
    # t[1, :, 0] and t[..., 2]: shrink and ellipsis
    ([1, 0, 0], [2, 0, 1], [1, 1, 1], {"shrink_axis_mask": 5, "begin_mask": 2, "end_mask": 2}, [3, 4]),
    ([0, 2], [0, 3], [1, 1], {"ellipsis_mask": 1, "shrink_axis_mask": 2}, [[1, 2], [3, 4], [5, 6]]),
    # t[-1, tf.newaxis, ::-1, 1:]
    ([-1, 0, 0, 1], [0, 0, 0, 0], [1, 1, -1, 1],
     {"shrink_axis_mask": 1, "new_axis_mask": 2, "begin_mask": 4, "end_mask": 12}, [[[6, 6], [5, 5]]]),
])
def test_strided_slice_matches_tf_docs(begin, end, strides, masks, expected):
    out = fwd("StridedSlice", TF_T, ints(begin), ints(end), ints(strides), **masks)
    np.testing.assert_array_equal(out, expected)
    t = infer("StridedSlice", T(TF_T.shape, TF_T.dtype), ints(begin), ints(end), ints(strides), **masks)
    assert t.shape == out.shape


P = np.array([[0, 1, 2], [10, 11, 12], [20, 21, 22], [30, 31, 32]], np.float32)


def test_gather_matches_tf_docs():
    np.testing.assert_array_equal(fwd("Gather", P, np.array([3, 1]), None), [[30, 31, 32], [10, 11, 12]])
    np.testing.assert_array_equal(fwd("Gather", P, np.array([2, 1]), ints(1)),
                                  [[2, 1], [12, 11], [22, 21], [32, 31]])
    # batch_dims=1: each row gathers with its own indices
    got = fwd("Gather", P, np.array([[2, 0], [1, 1], [0, 2], [1, 0]]), ints(1), batch_dims=1)
    np.testing.assert_array_equal(got, [[2, 0], [11, 11], [20, 22], [31, 30]])


def test_gather_batch_dims_matches_a_loop_over_the_batch():
    rng = np.random.default_rng(0)
    params = rng.standard_normal((2, 3, 4, 5))
    indices = rng.integers(0, 4, size=(2, 3, 6, 2))
    got = fwd("Gather", params, indices, ints(2), batch_dims=2)
    assert got.shape == (2, 3, 6, 2, 5)
    for b in np.ndindex(2, 3):
        np.testing.assert_array_equal(got[b], np.take(params[b], indices[b], axis=0))
    g = rng.standard_normal(got.shape)
    gp, g_indices, g_axis = vjp("Gather", g, params, indices, ints(2), batch_dims=2)
    assert g_indices is None and g_axis is None
    for b in np.ndindex(2, 3):
        ref = np.zeros((4, 5))
        np.add.at(ref, indices[b].reshape(-1), g[b].reshape(-1, 5))
        np.testing.assert_allclose(gp[b], ref)


def test_gather_nd_matches_tf_docs():
    params = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    np.testing.assert_array_equal(fwd("GatherNd", params, np.array([[0, 0], [1, 1]])), [1, 4])
    np.testing.assert_array_equal(fwd("GatherNd", params, np.array([[1], [0]])), [[3, 4], [1, 2]])
    np.testing.assert_array_equal(fwd("GatherNd", params, np.array([[[0, 0]], [[0, 1]]])), [[1], [2]])
    np.testing.assert_array_equal(fwd("GatherNd", params, np.zeros((2, 0), np.int32)), [params, params])


def test_scatter_nd_matches_tf_docs():
    out = fwd("ScatterNd", np.array([[4], [3], [1], [7]]), np.array([9, 10, 11, 12], np.float32), ints([8]))
    np.testing.assert_array_equal(out, [0, 11, 0, 10, 9, 0, 0, 12])
    out = fwd("ScatterNd", np.array([[1], [1]]), np.array([[1, 2], [3, 4]], np.float32), ints([3, 2]))
    np.testing.assert_array_equal(out, [[0, 0], [4, 6], [0, 0]])  # repeated indices add up


def test_one_hot_matches_tf_docs():
    out = fwd("OneHot", np.array([0, 2, -1, 1]), ints(3), np.float32(5), np.float32(0))
    np.testing.assert_array_equal(out, [[5, 0, 0], [0, 0, 5], [0, 0, 0], [0, 5, 0]])
    assert out.dtype == np.float32
    out = fwd("OneHot", np.array([[0, 2], [1, -1]]), ints(3), np.float32(1), np.float32(0))
    np.testing.assert_array_equal(out, [[[1, 0, 0], [0, 0, 1]], [[0, 1, 0], [0, 0, 0]]])
    out = fwd("OneHot", np.array([0, 1, 3]), ints(3), np.int32(1), np.int32(0), axis=0)
    np.testing.assert_array_equal(out, [[1, 0, 0], [0, 1, 0], [0, 0, 0]])
    assert out.dtype == np.int32


def test_one_hot_unwired_values_are_float32_one_and_zero():
    spec = R["OneHot"]
    on, off = (p.default for p in spec.inputs[2:])
    assert np.asarray(on).dtype == np.float32 and on == 1 and off == 0
    t = infer("OneHot", T((2,), "int32"), ints(4), T((), "float32"), T((), "float32"))
    assert t == T((2, 4), "float32")
    assert fwd("OneHot", np.array([1, 0]), ints(2), None, None).dtype == np.float32


@pytest.mark.parametrize("mode, expected", [
    ("REFLECT", [[6, 5, 4, 5, 6, 5, 4], [3, 2, 1, 2, 3, 2, 1], [6, 5, 4, 5, 6, 5, 4], [3, 2, 1, 2, 3, 2, 1]]),
    ("SYMMETRIC", [[2, 1, 1, 2, 3, 3, 2], [2, 1, 1, 2, 3, 3, 2],
                   [5, 4, 4, 5, 6, 6, 5], [5, 4, 4, 5, 6, 6, 5]]),
])
def test_mirror_pad_matches_tf_docs(mode, expected):
    t = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
    out = fwd("MirrorPad", t, ints([[1, 1], [2, 2]]), mode=mode)
    np.testing.assert_array_equal(out, expected)
    assert out.dtype == np.float32


@pytest.mark.parametrize("mode", ["REFLECT", "SYMMETRIC"])
def test_mirror_pad_agrees_with_numpy_at_the_limits(mode):
    x = np.arange(24.0).reshape(2, 3, 4)
    extra = 1 if mode == "REFLECT" else 0
    pads = [[2 - extra, 1], [0, 3 - extra], [4 - extra, 4 - extra]]
    np.testing.assert_array_equal(fwd("MirrorPad", x, ints(pads), mode=mode),
                                  np.pad(x, pads, mode=mode.lower()))


def test_mirror_pad_gradient_counts_the_copies():
    # [1, 2, 3] REFLECT-padded by 2 is [3, 2, 1, 2, 3, 2, 1]: entry 2 appears three times.
    x = np.array([1.0, 2.0, 3.0])
    gx, g_pads = vjp("MirrorPad", np.ones(7), x, ints([[2, 2]]), mode="REFLECT")
    np.testing.assert_array_equal(gx, [2, 3, 2])
    gx, _ = vjp("MirrorPad", np.ones(9), x, ints([[3, 3]]), mode="SYMMETRIC")
    np.testing.assert_array_equal(gx, [3, 3, 3])


def test_pad_matches_tf_docs():
    t = np.array([[1, 2, 3], [4, 5, 6]], np.int32)
    out = fwd("Pad", t, ints([[1, 1], [2, 2]]))
    np.testing.assert_array_equal(out, [[0] * 7, [0, 0, 1, 2, 3, 0, 0], [0, 0, 4, 5, 6, 0, 0], [0] * 7])
    assert out.dtype == np.int32
    out = fwd("Pad", t.astype(np.float32), ints([[0, 0], [1, 0]]), constant_values=-2.5)
    np.testing.assert_array_equal(out, [[-2.5, 1, 2, 3], [-2.5, 4, 5, 6]])


def test_tile_reverse_where_diag_match_tf_docs():
    a = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
    np.testing.assert_array_equal(fwd("Tile", a, ints([1, 2])), [[1, 2, 3, 1, 2, 3], [4, 5, 6, 4, 5, 6]])
    np.testing.assert_array_equal(fwd("Tile", a, ints([2, 1])), [[1, 2, 3], [4, 5, 6], [1, 2, 3], [4, 5, 6]])
    np.testing.assert_array_equal(fwd("Reverse", a, ints([-1])), [[3, 2, 1], [6, 5, 4]])
    np.testing.assert_array_equal(fwd("Reverse", a, ints([0, 1])), [[6, 5, 4], [3, 2, 1]])
    out = fwd("Where", np.array([True, False, False, True]))
    np.testing.assert_array_equal(out, [[0], [3]])
    assert out.dtype == np.int64
    np.testing.assert_array_equal(fwd("Where", np.array([[1.0, 0.0], [0.0, -2.0]])), [[0, 0], [1, 1]])
    np.testing.assert_array_equal(fwd("Diag", np.array([1, 2, 3, 4])), np.diag([1, 2, 3, 4]))
    d = np.array([[1, 2], [3, 4]])
    full = fwd("Diag", d)
    assert full.shape == (2, 2, 2, 2) and full[1, 0, 1, 0] == 3 and full[1, 0, 0, 1] == 0
    np.testing.assert_array_equal(fwd("DiagPart", full), d)


def test_stack_unstack_split_concat_match_tf_docs():
    x, y, z = (np.array(v, np.float32) for v in ([1, 4], [2, 5], [3, 6]))
    np.testing.assert_array_equal(fwd("Stack", [x, y, z]), [[1, 4], [2, 5], [3, 6]])
    np.testing.assert_array_equal(fwd("Stack", [x, y, z], axis=1), [[1, 2, 3], [4, 5, 6]])
    parts = fwd("Unstack", np.array([[1, 2, 3], [4, 5, 6]]), num=3, axis=1)
    np.testing.assert_array_equal(parts, [[1, 4], [2, 5], [3, 6]])
    value = np.arange(30.0).reshape(5, 6)
    pieces = fwd("Split", ints(1), value, num_split=3)
    assert [p.shape for p in pieces] == [(5, 2)] * 3
    np.testing.assert_array_equal(np.concatenate(pieces, axis=1), value)
    pieces = fwd("SplitV", value, ints([1, -1, 3]), ints(1), num_split=3)
    assert [p.shape for p in pieces] == [(5, 1), (5, 2), (5, 3)]
    t1, t2 = np.array([[1, 2, 3], [4, 5, 6]]), np.array([[7, 8, 9], [10, 11, 12]])
    np.testing.assert_array_equal(fwd("Concat", [t1, t2], ints(0)),
                                  [[1, 2, 3], [4, 5, 6], [7, 8, 9], [10, 11, 12]])
    np.testing.assert_array_equal(fwd("Concat", [t1, t2], ints(-1)),
                                  [[1, 2, 3, 7, 8, 9], [4, 5, 6, 10, 11, 12]])


def test_expand_dims_squeeze_fill_broadcast_select():
    x = np.ones((2, 3), np.float32)
    assert fwd("ExpandDims", x, ints(0)).shape == (1, 2, 3)
    assert fwd("ExpandDims", x, ints(-1)).shape == (2, 3, 1)
    assert fwd("ExpandDims", x, ints([1])).shape == (2, 1, 3)
    y = np.ones((1, 2, 1, 3, 1), np.float32)
    assert fwd("Squeeze", y).shape == (2, 3)
    assert fwd("Squeeze", y, axis=[2, 4]).shape == (1, 2, 3)
    out = fwd("Fill", ints([2, 3]), np.float32(9))
    np.testing.assert_array_equal(out, np.full((2, 3), 9))
    assert out.dtype == np.float32
    np.testing.assert_array_equal(fwd("BroadcastTo", np.array([1, 2, 3]), ints([3, 3])), [[1, 2, 3]] * 3)
    c = np.array([[True], [False]])
    out = fwd("Select", c, np.array([1.0, 2.0, 3.0], np.float32), np.float32(0))
    np.testing.assert_array_equal(out, [[1, 2, 3], [0, 0, 0]])
    assert out.dtype == np.float32


def test_shape_size_rank():
    x = np.zeros((2, 0, 3))
    for out_type in ("int32", "int64"):
        s = fwd("Shape", x, out_type=out_type)
        assert s.dtype == out_type and s.tolist() == [2, 0, 3]
        n = fwd("Size", x, out_type=out_type)
        assert n.dtype == out_type and n.shape == () and n == 0
    r = fwd("Rank", x)
    assert r.dtype == np.int32 and r == 3
    assert [v.tolist() for v in fwd("ShapeN", [x, np.zeros(4)])] == [[2, 0, 3], [4]]


# --------------------------------------------------------------------------------------------
# Gradient rules


def test_gather_gradient_accumulates_repeated_indices():
    params = np.zeros((5, 2), np.float32)
    g = np.arange(8, dtype=np.float32).reshape(4, 2)
    gp, _, _ = vjp("Gather", g, params, np.array([1, 3, 1, 1]), None)
    np.testing.assert_array_equal(gp, [[0, 0], [0 + 4 + 6, 1 + 5 + 7], [0, 0], [2, 3], [0, 0]])
    assert gp.dtype == np.float32
    gp, _, _ = vjp("Gather", np.ones((2, 3), np.float32), np.zeros((2, 4), np.float32), np.array([2, 2, 0]),
                   ints(1))
    np.testing.assert_array_equal(gp, [[1, 0, 2, 0], [1, 0, 2, 0]])


def test_gather_nd_gradient_accumulates_repeated_indices():
    params = np.zeros((2, 3), np.float32)
    gp, _ = vjp("GatherNd", np.array([1.0, 2.0, 4.0], np.float32), params, np.array([[0, 1], [1, 2], [0, 1]]))
    np.testing.assert_array_equal(gp, [[0, 5, 0], [0, 0, 2]])


def test_unstack_and_split_fill_missing_gradients_with_zeros():
    x = np.arange(6.0).reshape(3, 2)
    (gx,) = vjp("Unstack", [None, np.array([1.0, 2.0]), None], x, num=3)
    np.testing.assert_array_equal(gx, [[0, 0], [1, 2], [0, 0]])
    _, gx = vjp("Split", [None, np.ones((3, 1))], ints(1), x, num_split=2)
    np.testing.assert_array_equal(gx, [[0, 1], [0, 1], [0, 1]])
    gx, _, _ = vjp("SplitV", [np.ones((1, 2)), None], x, ints([1, 2]), ints(0), num_split=2)
    np.testing.assert_array_equal(gx, [[1, 1], [0, 0], [0, 0]])


def test_splitting_and_concat_gradients_are_views_not_copies():
    x = np.arange(12.0).reshape(3, 4)
    for piece in fwd("Unstack", x, num=3) + fwd("Split", ints(1), x, num_split=2):
        assert np.shares_memory(piece, x)
    g = np.ones((3, 7))
    cts, _ = vjp("Concat", g, [x, np.ones((3, 3))], ints(1))
    assert all(np.shares_memory(c, g) for c in cts) and [c.shape for c in cts] == [(3, 4), (3, 3)]
    cts, _ = vjp("Concat", g, [x, np.ones((3, 3))], ints(1), needs=((False, True), None))
    assert cts[0] is None and cts[1].shape == (3, 3)


def test_select_gradient_goes_to_the_chosen_side():
    c = np.array([True, False, True])
    t, e = np.ones(3, np.float32), np.float32(2)
    g = np.array([1.0, 2.0, 3.0], np.float32)
    g_c, g_t, g_e = vjp("Select", g, c, t, e)
    assert g_c is None
    np.testing.assert_array_equal(g_t, [1, 0, 3])
    assert g_e == 2 and np.shape(g_e) == () and g_e.dtype == np.float32


def test_fill_gradient_is_the_sum():
    _, g_value = vjp("Fill", np.full((2, 3), 0.5, np.float32), ints([2, 3]), np.float32(4))
    assert g_value.shape == () and g_value.dtype == np.float32 and g_value == 3


def test_diag_gradients():
    d = np.array([1.0, 2.0])
    (gd,) = vjp("Diag", np.array([[1.0, 2.0], [3.0, 4.0]]), d)
    np.testing.assert_array_equal(gd, [1, 4])
    (gx,) = vjp("DiagPart", np.array([5.0, 6.0]), np.zeros((2, 2)))
    np.testing.assert_array_equal(gx, [[5, 0], [0, 6]])


def test_squeeze_without_axis():
    """Squeeze's default mode (every size-1 axis) needs known sizes, so it has no case in the
    shared table, whose unknown-size check would make every size open; it is checked here."""
    spec = R["Squeeze"]
    x = np.random.default_rng(1).standard_normal((1, 3, 1, 2)).astype(np.float32)
    assert infer("Squeeze", T(x.shape, x.dtype)) == T((3, 2), "float32")
    assert fwd("Squeeze", x).shape == (3, 2)
    result = check_block(spec, [x], {})
    assert result.passed, str(result)
    with pytest.raises(ShapeError, match="unknown sizes.*list the axes"):
        infer("Squeeze", T((None, 3, 1), "float32"))
    assert infer("Squeeze", T((None, 3, 1), "float32"), axis=[2]) == T((None, 3), "float32")


# --------------------------------------------------------------------------------------------
# StridedSlice against TensorFlow's own algorithm (strided_slice_op.cc, transcribed)


def _tf_strided_slice(x, begin, end, strides, begin_mask, end_mask, ellipsis_mask, new_axis_mask,
                      shrink_axis_mask):
    """TF's sparse-to-dense spec and canonicalization, then explicit index lists."""
    dense, final = _tf_dense_spec(x.ndim, begin, end, strides, begin_mask, end_mask, ellipsis_mask,
                                  new_axis_mask, shrink_axis_mask)
    lists = [_tf_axis_indices(dim, *(d[i] for d in dense)) for i, dim in enumerate(x.shape)]
    processing = [len(v) for v in lists]
    out = x[np.ix_(*[np.array(v, dtype=np.intp) for v in lists])] if x.ndim else x
    shape = [1 if f == "new" else processing[f] for f in final if f != "shrink"]
    return out.reshape(shape), lists


def _tf_dense_spec(rank, begin, end, strides, begin_mask, end_mask, ellipsis_mask, new_axis_mask,
                   shrink_axis_mask):
    """The dense spec, per input axis: (begin, end, stride, begin-masked, end-masked, shrunk);
    and ``final``, the result's axes: a dense axis, "new" or "shrink"."""
    n = len(begin)
    seen, add_after = False, 0
    for i in range(n):
        if seen and new_axis_mask >> i & 1:
            add_after += 1
        if ellipsis_mask >> i & 1:
            seen = True
    if not seen:
        ellipsis_mask |= 1 << n
        n += 1
    d_begin, d_end, d_stride = [0] * rank, [0] * rank, [1] * rank
    d_bm, d_em, d_shrink = [0] * rank, [0] * rank, [0] * rank
    final = []
    full = 0
    for i in range(n):
        if ellipsis_mask >> i & 1:
            nxt = min(rank - (n - i) + 1 + add_after, rank)
            while full < nxt:
                d_bm[full] = d_em[full] = 1
                final.append(full)
                full += 1
        elif new_axis_mask >> i & 1:
            final.append("new")
        else:
            if full == rank:
                raise ValueError("index out of range")
            d_begin[full], d_end[full], d_stride[full] = begin[i], end[i], strides[i]
            d_bm[full], d_em[full] = begin_mask >> i & 1, end_mask >> i & 1
            d_shrink[full] = shrink_axis_mask >> i & 1
            final.append("shrink" if d_shrink[full] else full)
            full += 1
    return (d_begin, d_end, d_stride, d_bm, d_em, d_shrink), final


def _tf_axis_indices(dim, begin, end, s, begin_masked, end_masked, shrunk):
    """The indices one axis of size ``dim`` takes, after TF's canonicalization."""
    if s == 0:
        raise ValueError("zero stride")
    if shrunk:
        if s <= 0:
            raise ValueError("only stride 1 allowed on non-range indexing")
        b = begin + dim if begin < 0 else begin
        if not 0 <= b < dim:
            raise ValueError("out of bounds")
        return [b]
    lo, hi = (0, dim) if s > 0 else (-1, dim - 1)

    def canonical(v, c, mask):
        if mask:
            return (lo, hi)[c] if s > 0 else (lo, hi)[(c + 1) & 1]
        v = v + dim if v < 0 else v
        return min(max(v, lo), hi)

    return list(range(canonical(begin, 0, begin_masked), canonical(end, 1, end_masked), s))


@st.composite
def strided_specs(draw):
    rank = draw(st.integers(0, 4))
    shape = tuple(draw(st.lists(st.integers(0, 5), min_size=rank, max_size=rank)))
    n = draw(st.integers(0, rank + 2))
    begin = draw(st.lists(st.integers(-7, 7), min_size=n, max_size=n))
    end = draw(st.lists(st.integers(-7, 7), min_size=n, max_size=n))
    strides = draw(st.lists(st.sampled_from([-3, -2, -1, 1, 2, 3]), min_size=n, max_size=n))
    top = (1 << (n + 1)) - 1
    masks = dict(begin_mask=draw(st.integers(0, top)), end_mask=draw(st.integers(0, top)),
                 ellipsis_mask=draw(st.sampled_from([0] + [1 << i for i in range(n)])),
                 new_axis_mask=draw(st.integers(0, top)), shrink_axis_mask=draw(st.integers(0, top)))
    return shape, begin, end, strides, masks


@given(strided_specs())
def test_strided_slice_agrees_with_tensorflows_algorithm(spec):
    shape, begin, end, strides, masks = spec
    x = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    try:
        ref, lists = _tf_strided_slice(x, begin, end, strides, **masks)
    except ValueError:
        with pytest.raises((ShapeError, IndexError)):
            fwd("StridedSlice", x, ints(begin), ints(end), ints(strides), **masks)
        with pytest.raises(ShapeError):
            infer("StridedSlice", T(shape, x.dtype), ints(begin), ints(end), ints(strides), **masks)
        return
    got = fwd("StridedSlice", x, ints(begin), ints(end), ints(strides), **masks)
    np.testing.assert_array_equal(got, ref)
    assert got.shape == ref.shape
    t = infer("StridedSlice", T(shape, x.dtype), ints(begin), ints(end), ints(strides), **masks)
    assert t.shape == ref.shape
    open_shape = T((None,) * len(shape), x.dtype)
    t = infer("StridedSlice", open_shape, ints(begin), ints(end), ints(strides), **masks)
    assert len(t.shape) == ref.ndim and all(d is None or d == r for d, r in zip(t.shape, ref.shape))
    # The gradient scatters g back where the entries came from.
    g = np.random.default_rng(0).standard_normal(ref.shape)
    gx = vjp("StridedSlice", g, x, ints(begin), ints(end), ints(strides), **masks)[0]
    expected = np.zeros(shape)
    if x.ndim:
        expected[np.ix_(*[np.array(v, dtype=np.intp) for v in lists])] = g.reshape([len(v) for v in lists])
    else:
        expected = g.reshape(())
    np.testing.assert_array_equal(gx, expected)


def test_strided_slice_default_strides_are_ones():
    x = np.arange(10.0)
    np.testing.assert_array_equal(fwd("StridedSlice", x, ints([2]), ints([5]), None), [2, 3, 4])


# --------------------------------------------------------------------------------------------
# What the shared table's checks cannot do for these blocks


INDEXED = ["Gather", "GatherNd", "ScatterNd", "Select"]


@pytest.mark.parametrize("name, case", [(n, c) for n in INDEXED for c in CASES[n] if c.grad])
def test_vjp_cotangents_of_blocks_with_integer_or_bool_inputs(name, case):
    """Cotangents only for the float inputs, of their shape and dtype, with read-only inputs, g
    and out; the integer/bool inputs get None. (test_blocks expects a cotangent for every
    non-static input.)"""
    spec = R[name]
    attrs = {**spec.default_attrs(), **case.attrs}
    inputs = [x if p.static or x is None else frozen(x) for p, x in zip(spec.inputs, case.inputs)]
    out = frozen(spec.forward(*inputs, **attrs))
    g = frozen(np.random.default_rng(3).standard_normal(out.shape).astype(out.dtype))
    kw = dict(attrs)
    if "needs" in spec.vjp_context:
        kw["needs"] = tuple(p.differentiable for p in spec.inputs)
    for gg in (g, np.broadcast_to(np.asarray(1.5, out.dtype), out.shape)):
        cts = spec.vjp(gg, out, *inputs, **kw)
        assert len(cts) == len(spec.inputs)
        for p, x, ct in zip(spec.inputs, inputs, cts):
            if not p.differentiable:
                assert ct is None, p.name
            else:
                assert ct.shape == np.shape(x) and ct.dtype == np.asarray(x).dtype, p.name


@pytest.mark.parametrize("case", [c for c in CASES["Select"] if c.grad])
def test_select_computes_only_what_is_needed(case):
    spec = R["Select"]
    cond, t, e = case.inputs
    out = spec.forward(cond, t, e)
    g = np.random.default_rng(4).standard_normal(out.shape).astype(out.dtype)
    full = spec.vjp(g, out, cond, t, e, needs=(False, True, True))
    only_t = spec.vjp(g, out, cond, t, e, needs=(False, True, False))
    only_e = spec.vjp(g, out, cond, t, e, needs=(False, False, True))
    assert only_t[2] is None and only_e[1] is None and only_t[0] is None and only_e[0] is None
    np.testing.assert_array_equal(only_t[1], full[1])
    np.testing.assert_array_equal(only_e[2], full[2])


@pytest.mark.parametrize("case", CASES["Where"])
def test_where_leaves_the_count_open(case):
    (cond,) = case.inputs
    t = infer("Where", T(cond.shape, cond.dtype))
    out = fwd("Where", cond)
    assert t.shape == (None, cond.ndim) and t.dtype == out.dtype == np.int64
    assert out.shape == (np.count_nonzero(cond), cond.ndim)
    # A constant condition gives the exact count (and the value).
    t = infer("Where", TensorType.of(cond))
    assert t.shape == out.shape
    np.testing.assert_array_equal(t.value, out)


def test_index_vector_length_must_be_known():
    for name, args in (("GatherNd", (T((3, 4), "float32"), T((2, None), "int32"))),
                       ("ScatterNd", (T((2, None), "int32"), T((2,), "float32"), ints([3, 4])))):
        with pytest.raises(ShapeError, match="must be known when compiling"):
            infer(name, *args)
    # The other sizes may be open.
    assert infer("GatherNd", T((None, 4, 2), "float32"), T((None, 5, 1), "int32")).shape == (None, 5, 4, 2)


# --------------------------------------------------------------------------------------------
# Errors


@pytest.mark.parametrize("name, inputs, attrs, message", [
    ("ExpandDims", [T((2, 3), "float32"), ints(3)], {}, r"axis 3 is out of range .*\[-3, 2\]"),
    ("ExpandDims", [T((2, 3), "float32"), ints([0, 1])], {}, "one integer"),
    ("Squeeze", [T((2, 3), "float32")], {"axis": [1]}, "its size is 3, not 1"),
    ("Concat", [[T((2, 3), "float32"), T((3, 3), "float32")], ints(1)], {},
     r"\[2,3\] and \[3,3\] differ on axis 0"),
    ("Concat", [[T((2, 3), "float32"), T((3,), "float32")], ints(0)], {}, "differ in rank"),
    ("Concat", [[T((), "float32")], ints(0)], {}, "scalars"),
    ("Stack", [[T((2, 3), "float32"), T((3, 2), "float32")]], {}, "differ"),
    ("Stack", [[T((2,), "float32")]], {"axis": 2}, "out of range"),
    ("Unstack", [T((2, 3), "float32")], {"num": 3}, "has size 2, but num is 3"),
    ("Split", [ints(1), T((2, 5), "float32")], {"num_split": 2}, "does not split into 2"),
    ("SplitV", [T((2, 5), "float32"), ints([1, 2]), ints(1)], {"num_split": 2}, "add up to 3"),
    ("SplitV", [T((2, 5), "float32"), ints([-1, -1]), ints(1)], {"num_split": 2}, "at most one -1"),
    ("SplitV", [T((2, 5), "float32"), ints([1, 2]), ints(1)], {"num_split": 3}, "num_split is 3"),
    ("Slice", [T((4, 5), "float32"), ints([1, 2]), ints([4, 1])], {}, "reaches outside axis 0"),
    ("Slice", [T((4, 5), "float32"), ints([1]), ints([1])], {}, "needs 2 entries"),
    ("Slice", [T((4, 5), "float32"), ints([-1, 0]), ints([1, 1])], {}, "at least 0"),
    ("StridedSlice", [T((4,), "float32"), ints([0, 0]), ints([1, 1]), ints([1, 1])], {}, "indexes 2 axes"),
    ("StridedSlice", [T((4,), "float32"), ints([0]), ints([1]), ints([0])], {}, "has a 0"),
    ("StridedSlice", [T((4,), "float32"), ints([5]), ints([6]), None], {"shrink_axis_mask": 1},
     "out of range"),
    ("StridedSlice", [T((4,), "float32"), ints([1]), ints([0]), ints([-1])], {"shrink_axis_mask": 1},
     "positive stride"),
    ("StridedSlice", [T((4,), "float32"), ints([0, 0]), ints([1, 1]), None], {"ellipsis_mask": 3},
     "more than one bit"),
    ("StridedSlice", [T((4,), "float32"), ints([0, 0]), ints([1]), None], {}, "same length"),
    ("Gather", [T((4, 3), "float32"), T((2,), "int32"), ints(2)], {}, "out of range"),
    ("Gather", [T((4, 3), "float32"), T((4, 2), "int32"), ints(0)], {"batch_dims": 1}, "before the 1 batch"),
    ("Gather", [T((4, 3), "float32"), T((5, 2), "int32"), ints(1)], {"batch_dims": 1}, "batch sizes"),
    ("Gather", [T((), "float32"), T((2,), "int32"), None], {}, "rank 1 or more"),
    ("GatherNd", [T((3, 4), "float32"), T((2, 3), "int32")], {}, "longer than the rank"),
    ("ScatterNd", [T((2, 1), "int32"), T((3, 4), "float32"), ints([3, 4])], {}, "differ"),
    ("Tile", [T((2, 3), "float32"), ints([2])], {}, "needs 2 entries"),
    ("Tile", [T((2, 3), "float32"), ints([2, -1])], {}, "at least 0"),
    ("Pad", [T((2, 3), "float32"), ints([[1, 1]])], {}, r"\[rank, 2\]"),
    ("Pad", [T((2, 3), "float32"), ints([[1, 1], [0, -1]])], {}, "at least 0"),
    ("Pad", [T((2, 3), "int32"), ints([[1, 1], [0, 1]])], {"constant_values": 0.5}, "0.5 has a fraction"),
    ("MirrorPad", [T((2, 3), "float32"), ints([[2, 0], [0, 0]])], {}, "REFLECT padding of axis 0.*at most 1"),
    ("MirrorPad", [T((2, 3), "float32"), ints([[0, 0], [0, 4]])], {"mode": "SYMMETRIC"}, "at most 3"),
    ("Reverse", [T((2, 3), "float32"), ints([1, -1])], {}, "twice"),
    ("OneHot", [T((3,), "int32"), ints(4), T((), "float32"), T((), "float64")], {}, "float64"),
    ("OneHot", [T((3,), "int32"), ints(4), T((2,), "float32"), T((), "float32")], {}, "scalar"),
    ("OneHot", [T((3,), "int32"), ints(4), T((), "float32"), T((), "float32")], {"axis": 2}, "out of range"),
    ("OneHot", [T((3,), "int32"), ints(-1), T((), "float32"), T((), "float32")], {}, "at least 0"),
    ("Fill", [ints([2, -3]), T((), "float32")], {}, "negative"),
    ("Fill", [ints([2]), T((2,), "float32")], {}, "scalar"),
    ("BroadcastTo", [T((2, 3), "float32"), ints([3, 3])], {}, r"\[2,3\] does not broadcast to \[3, 3\]"),
    ("BroadcastTo", [T((3,), "float32"), ints([1])], {}, "does not broadcast"),
    ("Select", [T((3,), "bool"), T((3,), "float32"), T((3,), "float64")], {}, "float64"),
    ("Select", [T((2,), "bool"), T((3,), "float32"), T((3,), "float32")], {}, "do not broadcast"),
    ("DiagPart", [T((2, 3), "float32")], {}, "differ"),
    ("DiagPart", [T((2, 2, 2), "float32")], {}, "even rank"),
    ("EnsureShape", [T((2, 3), "float32")], {"shape": [2, 4]}, "differ"),
])
def test_infer_rejects_what_does_not_fit(name, inputs, attrs, message):
    with pytest.raises(ShapeError, match=message):
        infer(name, *inputs, **attrs)


def test_forward_errors():
    with pytest.raises(IndexError, match=r"index -1 is out of range \[0, 4\)"):
        fwd("Gather", np.zeros(4), np.array([0, -1]), None)
    with pytest.raises(IndexError, match="index 4 is out of range"):
        fwd("Gather", np.zeros((2, 4)), np.array([[4], [0]]), ints(1), batch_dims=1)
    with pytest.raises(IndexError, match=r"index \[1, 3\] is out of range for the leading sizes \[2, 3\]"):
        fwd("GatherNd", np.zeros((2, 3)), np.array([[0, 0], [1, 3]]))
    with pytest.raises(ShapeError, match="has shape"):
        fwd("EnsureShape", np.zeros((2, 3)), shape=(None, 4))
    with pytest.raises(ShapeError, match="num is 3"):
        fwd("Unstack", np.zeros((2, 3)), num=3)


# --------------------------------------------------------------------------------------------
# In a diagram: compile-time shape arithmetic and PreventGradient


def test_shape_arithmetic_folds_into_static_ports():
    """Reshape(x, Concat([StridedSlice(Shape(x), [0], [1]), [-1]])): x flattened per example,
    drawn as TF graphs compute it; the shape is known when compiling."""
    p = chain(("x", "Placeholder", {"shape": [2, 3, 4]}, None),
              ("shape", "Shape", {}, {"input": "x"}),
              ("batch", "StridedSlice", {}, {"input": "shape", "begin": [0], "end": [1]}),
              ("rest", "Const", {"value": [-1], "dtype": "int32"}, None),
              ("target", "Concat", {}, {"values[0]": "batch", "values[1]": "rest", "axis": 0}),
              ("flat", "Reshape", {}, {"tensor": "x", "shape": "target"}),
              ("n", "Size", {}, {"input": "x"}),
              ("zeros", "Fill", {}, {"dims": "shape", "value": 0.5}))
    program = compile_project(p)
    assert program.ok, [str(d) for d in program.errors]
    slot = program.slots[program.port_slots[("flat", "output")]]
    assert slot.type.shape == (2, 12)
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    res = run(program, {"x": x}, fetch=["flat", "n", "zeros"])
    np.testing.assert_array_equal(res.value("flat"), x.reshape(2, 12))
    assert res.value("n") == 24 and res.value("zeros").shape == (2, 3, 4)


def test_shape_of_an_open_size_cannot_feed_a_static_port():
    p = chain(("x", "Placeholder", {"shape": [-1, 3]}, None),
              ("shape", "Shape", {}, {"input": "x"}),
              ("zeros", "Fill", {}, {"dims": "shape", "value": 0.5}))
    program = compile_project(p)
    assert not program.ok
    assert any("must be known before running" in str(d) for d in program.errors)


def test_unstack_and_split_outputs_in_a_diagram():
    p = chain(("x", "Placeholder", {"shape": [4, 4], "dtype": "float64"}, None),
              ("rows", "Unstack", {"num": 4}, {"value": "x"}),
              ("halves", "Split", {"num_split": 2}, {"axis": 0, "value": "x"}),
              ("a", "Multiply", {}, {"x": "rows:output[1]", "y": "halves:output[1]"}),
              ("loss", "Sum", {}, {"input": "a"}))
    program = compile_project(p)
    assert program.ok, [str(d) for d in program.errors]
    assert program.slots[program.port_slots[("a", "z")]].type.shape == (2, 4)
    x = np.random.default_rng(2).standard_normal((4, 4))
    res = run(program, {"x": x}, target="loss")
    # loss = sum(x[1] * x[2:4]): x[1] gets x[2] + x[3], rows 2 and 3 get x[1]; the unused
    # outputs (rows 0, 2, 3 and the first half) contribute zeros.
    expected = np.zeros((4, 4))
    expected[1] = x[2] + x[3]
    expected[2:] = x[1]
    np.testing.assert_allclose(res.variable_grads["x"], expected)


def test_prevent_gradient_fails_a_backward_pass_naming_the_block():
    p = chain(("x", "Placeholder", {"shape": [3]}, None),
              ("pg", "PreventGradient", {"message": "no second derivative here"}, {"input": "x"}),
              ("loss", "Sum", {}, {"input": "pg"}))
    program = compile_project(p)
    assert program.ok, [str(d) for d in program.errors]
    x = np.ones(3, np.float32)
    assert run(program, {"x": x}, fetch=["loss"]).value("loss") == 3  # forward is fine
    with pytest.raises(RunError, match="pg.*no second derivative here"):
        run(program, {"x": x}, target="loss")


@pytest.mark.parametrize("alias, name", [
    ("ConcatV2", "Concat"), ("Pack", "Stack"), ("Unpack", "Unstack"), ("GatherV2", "Gather"),
    ("PadV2", "Pad"), ("ReverseV2", "Reverse"), ("SelectV2", "Select"), ("strided_slice", "StridedSlice"),
])
def test_tf_aliases(alias, name):
    assert R.resolve_alias(alias) == name
