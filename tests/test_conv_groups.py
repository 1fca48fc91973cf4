"""Conv2D's grouped and depthwise convolution (blocks/conv_groups.py), as TensorFlow's: checked
against the definition one group at a time, against the ungrouped convolution of each group's
slices, as a linear map whose gradients are its transposes, in bounded pieces, and the errors
naming the sizes that do not divide. The finite-difference checks run on the cases in
tests/cases_nn_ops.py."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from blockflow.registry import Registry
from blockflow.spec import ShapeError, TensorType, allocation_guard
from blockflow_blocks import all_blocks, nn_conv
from blockflow_blocks.nn_conv import Conv2D, Conv2DBackpropInput

from casekit import ints

REG = Registry(all_blocks())
RNG = np.random.default_rng(1717)


def attrs(name, **given):
    values, problems = REG[name].validate_attrs(given)
    assert not problems, problems
    return values


def layout(values, data_format):
    return [1, *values, 1] if data_format == "NHWC" else [1, 1, *values]


def conv_attrs(padding="VALID", strides=(1, 1), dilations=(1, 1), data_format="NHWC", pads=None):
    extra = {}
    if padding == "EXPLICIT":
        top, bottom, left, right = pads
        extra["explicit_paddings"] = ([0, 0, top, bottom, left, right, 0, 0] if data_format == "NHWC"
                                      else [0, 0, 0, 0, top, bottom, left, right])
    return attrs("Conv2D", padding=padding, strides=layout(strides, data_format),
                 dilations=layout(dilations, data_format), data_format=data_format, **extra)


def same_pads(size, k, s, d):
    out = -(-size // s)
    total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
    return total // 2, total - total // 2


def naive_grouped(x, f, strides, dilations, pads):
    """The definition for NHWC x: output channel o of group g = o // (out / G) sums, over its
    window, input channels [g·C/G, (g+1)·C/G) times the filter's column o."""
    n, h, w, c = x.shape
    kh, kw, cg, cout = f.shape
    per_group = cout // (c // cg)
    top, bottom, left, right = pads
    xp = np.zeros((n, h + top + bottom, w + left + right, c))
    xp[:, top:top + h, left:left + w] = x
    oh = (xp.shape[1] - (kh - 1) * dilations[0] - 1) // strides[0] + 1
    ow = (xp.shape[2] - (kw - 1) * dilations[1] - 1) // strides[1] + 1
    out = np.zeros((n, oh, ow, cout))
    for b, i, j, o in itertools.product(range(n), range(oh), range(ow), range(cout)):
        g = o // per_group
        for p, q in itertools.product(range(kh), range(kw)):
            r, col = i * strides[0] + p * dilations[0], j * strides[1] + q * dilations[1]
            out[b, i, j, o] += xp[b, r, col, g * cg:(g + 1) * cg] @ f[p, q, :, o]
    return out


GEOMETRIES = [  # input NHWC, filter, padding, strides, dilations
    ((2, 5, 5, 4), (3, 3, 2, 6), "VALID", (1, 1), (1, 1)),      # 2 groups
    ((2, 7, 6, 4), (3, 2, 2, 4), "SAME", (2, 2), (1, 1)),
    ((1, 4, 5, 8), (1, 1, 2, 8), "VALID", (1, 1), (1, 1)),      # 4 groups, 1x1
    ((1, 7, 7, 6), (3, 3, 2, 3), "SAME", (1, 1), (2, 2)),       # 3 groups, 1 output each
    ((2, 8, 7, 6), (3, 3, 3, 4), "SAME", (2, 3), (1, 2)),
    ((2, 7, 6, 3), (3, 3, 1, 3), "SAME", (2, 2), (1, 1)),       # depthwise
    ((1, 6, 7, 3), (3, 3, 1, 6), "SAME", (1, 1), (1, 1)),       # depthwise, 2 outputs per channel
    ((2, 9, 8, 4), (2, 3, 1, 4), "VALID", (3, 2), (2, 1)),
    ((1, 5, 6, 3), (3, 3, 1, 6), "EXPLICIT", (2, 1), (1, 1)),
    ((1, 2, 2, 4), (3, 3, 1, 4), "EXPLICIT", (1, 1), (1, 1)),   # more kernel offsets than pixels
    ((1, 3, 3, 6), (3, 3, 3, 2), "VALID", (1, 1), (1, 1)),      # one output pixel
]


def _pads(shape, fshape, padding, strides, dilations):
    if padding == "SAME":
        return (same_pads(shape[1], fshape[0], strides[0], dilations[0])
                + same_pads(shape[2], fshape[1], strides[1], dilations[1]))
    return (1, 2, 0, 1) if padding == "EXPLICIT" else (0, 0, 0, 0)


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
@pytest.mark.parametrize("shape, fshape, padding, strides, dilations", GEOMETRIES)
def test_grouped_conv2d_is_the_definition_and_its_gradients_the_transposed_map(
        shape, fshape, padding, strides, dilations, data_format):
    x, f = RNG.standard_normal(shape), RNG.standard_normal(fshape)
    pads = _pads(shape, fshape, padding, strides, dilations)
    a = conv_attrs(padding, strides, dilations, data_format, pads)
    to = (lambda v: v) if data_format == "NHWC" else (lambda v: v.transpose(0, 3, 1, 2))
    out = Conv2D.forward(to(x), f, **a)
    want = naive_grouped(x, f, strides, dilations, pads)
    np.testing.assert_allclose(out, to(want), rtol=1e-10, atol=1e-12)
    t = Conv2D.infer(TensorType(to(x).shape, "float64"), TensorType(fshape, "float64"), **a)
    assert t.shape == out.shape
    # Linear in each operand: <conv(x, f), g> = <x, gx> = <f, gf>, and in every direction.
    g = RNG.standard_normal(out.shape)
    gx, gf = Conv2D.vjp(g, out, to(x), f, **a, needs=(True, True))
    assert gx.shape == to(x).shape and gf.shape == f.shape
    vx, vf = RNG.standard_normal(shape), RNG.standard_normal(fshape)
    np.testing.assert_allclose(np.vdot(g, to(naive_grouped(vx, f, strides, dilations, pads))), np.vdot(gx, to(vx)),
                               rtol=1e-10)
    np.testing.assert_allclose(np.vdot(g, to(naive_grouped(x, vf, strides, dilations, pads))), np.vdot(gf, vf),
                               rtol=1e-10)
    # Conv2DBackpropInput is the input gradient, grouped too.
    back = Conv2DBackpropInput.forward(ints(to(x).shape), f, g, **a)
    np.testing.assert_allclose(back, gx, rtol=1e-10, atol=1e-12)
    t = Conv2DBackpropInput.infer(ints(to(x).shape), TensorType(fshape, "float64"), TensorType(g.shape, "float64"),
                                  **a)
    assert t.shape == back.shape


def test_a_grouped_conv2d_is_the_ungrouped_one_on_each_groups_slices():
    """Split the channels and the filter's columns into G, convolve each pair ungrouped, join:
    the same output and gradients, for the depthwise and the batched paths."""
    for shape, fshape in (((2, 9, 9, 6), (3, 3, 2, 9)), ((2, 9, 9, 6), (3, 3, 1, 12)), ((1, 8, 8, 4), (3, 3, 1, 4))):
        groups = shape[3] // fshape[2]
        x, f = RNG.standard_normal(shape), RNG.standard_normal(fshape)
        a = conv_attrs("SAME", (2, 1), (1, 1))
        out = Conv2D.forward(x, f, **a)
        g = RNG.standard_normal(out.shape)
        gx, gf = Conv2D.vjp(g, out, x, f, **a, needs=(True, True))
        parts = list(zip(np.split(x, groups, axis=3), np.split(f, groups, axis=3), np.split(g, groups, axis=3)))
        np.testing.assert_allclose(out, np.concatenate([Conv2D.forward(xi, fi, **a) for xi, fi, _ in parts], 3),
                                   rtol=1e-10, atol=1e-12)
        each = [Conv2D.vjp(gi, None, xi, fi, **a, needs=(True, True)) for xi, fi, gi in parts]
        np.testing.assert_allclose(gx, np.concatenate([e[0] for e in each], 3), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(gf, np.concatenate([e[1] for e in each], 3), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("fshape", [(3, 3, 1, 4), (3, 3, 1, 8), (3, 3, 2, 4)])
def test_float32_and_float16_keep_their_dtype_and_float16_sums_in_float32(fshape):
    x64, f64 = RNG.standard_normal((2, 7, 6, 4)), RNG.standard_normal(fshape)
    a = conv_attrs("SAME", (2, 2))
    want = Conv2D.forward(x64, f64, **a)
    g64 = RNG.standard_normal(want.shape)
    want_gx, want_gf = Conv2D.vjp(g64, want, x64, f64, **a, needs=(True, True))
    for dtype, tol in ((np.float32, 1e-5), (np.float16, 3e-3)):
        x, f, g = x64.astype(dtype), f64.astype(dtype), g64.astype(dtype)
        out = Conv2D.forward(x, f, **a)
        gx, gf = Conv2D.vjp(g, out, x, f, **a, needs=(True, True))
        for got, ref in ((out, want), (gx, want_gx), (gf, want_gf)):
            assert got.dtype == dtype
            assert np.abs(got - ref).max() <= tol * np.abs(ref).max()


@pytest.mark.parametrize("shape, fshape, message", [
    ((1, 5, 5, 6), (3, 3, 4, 4),
     r"Conv2D: input \[1,5,5,6\] has 6 channels \(NHWC\) but filter \[3,3,4,4\] expects 4, or a multiple of 4"),
    ((1, 5, 5, 6), (3, 3, 2, 4),
     r"input \[1,5,5,6\] has 6 channels \(NHWC\), 3 groups of filter \[3,3,2,4\]'s 2 in_channels, but its 4 "
     r"out_channels do not split into 3 groups"),
    ((1, 5, 5, 6), (3, 3, 0, 4), r"filter \[3,3,0,4\] has 0 in_channels"),
    ((1, 5, 5, 0), (3, 3, 2, 4), "has 0 channels"),
])
def test_channels_that_do_not_divide_are_refused_naming_the_sizes(shape, fshape, message):
    a = conv_attrs()
    with pytest.raises(ShapeError, match=message):
        Conv2D.infer(TensorType(shape, "float32"), TensorType(fshape, "float32"), **a)
    with pytest.raises(ShapeError, match=message):
        Conv2D.forward(np.zeros(shape, np.float32), np.zeros(fshape, np.float32), **a)



def test_the_channels_refused_are_the_layouts():
    with pytest.raises(ShapeError, match=r"input \[1,6,5,5\] has 6 channels \(NCHW\) but filter \[3,3,4,4\]"):
        Conv2D.infer(TensorType((1, 6, 5, 5), "float32"), TensorType((3, 3, 4, 4), "float32"),
                     **conv_attrs(data_format="NCHW"))


def test_unknown_channels_leave_the_groups_open():
    a = conv_attrs("SAME")
    t = Conv2D.infer(TensorType((None, 5, 5, None), "float32"), TensorType((3, 3, 2, 6), "float32"), **a)
    assert t.shape == (None, 5, 5, 6)
    t = Conv2D.infer(TensorType((1, 5, 5, 8), "float32"), TensorType((3, 3, None, 6), "float32"), **a)
    assert t.shape == (1, 5, 5, 6)


def test_conv2d_backprop_input_refuses_groups_its_filter_cannot_make():
    a = attrs("Conv2DBackpropInput", padding="SAME")
    with pytest.raises(ShapeError, match=r"input_sizes has 6 channels \(NHWC\), 3 groups of filter \[3,3,2,4\]"):
        Conv2DBackpropInput.infer(ints([1, 5, 5, 6]), TensorType((3, 3, 2, 4), "float32"),
                                  TensorType((1, 5, 5, 4), "float32"), **a)
    with pytest.raises(ShapeError, match="input_sizes has 5 channels"):
        Conv2DBackpropInput.forward(ints([1, 5, 5, 5]), np.zeros((3, 3, 2, 4)), np.zeros((1, 5, 5, 4)), **a)


class _Guard:
    """Records every reservation, as the runtime's guard sees them."""

    def __init__(self):
        self.seen = []

    def reserve(self, nbytes, shape, dtype, what):
        self.seen.append((what, nbytes))

    def __enter__(self):
        self._token = allocation_guard.set(self)
        return self

    def __exit__(self, *exc):
        allocation_guard.reset(self._token)


@pytest.mark.parametrize("channels, fshape, strides", [(8, (5, 4, 1, 16), (1, 1)), (8, (5, 4, 1, 8), (2, 1)),
                                                       (8, (5, 4, 2, 8), (1, 1)), (12, (5, 4, 3, 12), (2, 1))])
def test_grouped_pieces_stay_under_the_bound_and_change_nothing(monkeypatch, channels, fshape, strides):
    monkeypatch.setattr(nn_conv, "_WINDOW_PIECE_BYTES", 64 * 1024)
    x, f = RNG.standard_normal((2, 40, 30, channels)), RNG.standard_normal(fshape)
    a = conv_attrs("SAME", strides)
    with _Guard() as guard:
        out = Conv2D.forward(x, f, **a)
        gx, gf = Conv2D.vjp(np.ones_like(out), out, x, f, **a, needs=(True, True))
    pieces = [nbytes for what, nbytes in guard.seen if "one piece" in what]
    assert len(pieces) > 3 and max(pieces) <= 64 * 1024
    monkeypatch.setattr(nn_conv, "_WINDOW_PIECE_BYTES", 1 << 30)
    # the same sums, added in another order
    np.testing.assert_allclose(out, Conv2D.forward(x, f, **a), rtol=1e-12, atol=1e-11)
    want_gx, want_gf = Conv2D.vjp(np.ones_like(out), out, x, f, **a, needs=(True, True))
    np.testing.assert_allclose(gx, want_gx, rtol=1e-12, atol=1e-11)
    np.testing.assert_allclose(gf, want_gf, rtol=1e-12, atol=1e-11)
