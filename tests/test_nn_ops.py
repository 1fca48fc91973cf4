"""nn_ops of issue 3: TensorFlow's semantics checked on hand-computed cases (SAME padding
arithmetic, pooling ties and padding, top-k ties, in-top-k boundaries, loss formulas), against
naive reference loops, through the runtime, and the error messages."""
from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest

from blockflow.compile.compiler import compile_project
from blockflow.registry import Registry
from blockflow.run.runtime import run
from blockflow.spec import ShapeError, TensorType
from blockflow_blocks import all_blocks
from blockflow_blocks.nn_activations import Dropout, Elu, Gelu, LeakyRelu, Relu6, Selu, Softplus, Softsign
from blockflow_blocks.nn_conv import BiasAdd, Conv2D, Conv2DBackpropInput
from blockflow_blocks.nn_norm import FusedBatchNormV3
from blockflow_blocks.nn_losses import L2Loss, SigmoidCrossEntropyWithLogits, SparseSoftmaxCrossEntropyWithLogits
from blockflow_blocks.nn_pool import MaxPool
from blockflow_blocks.nn_topk import InTopK, TopK

from casekit import ints
from diagrams import chain

REG = Registry(all_blocks())
RNG = np.random.default_rng(42)


def f32(x):
    return np.asarray(x, dtype=np.float32)


def attrs(name, **given):
    values, problems = REG[name].validate_attrs(given)
    assert not problems, problems
    return values


def conv(x, f, **kw):
    return Conv2D.forward(x, f, **attrs("Conv2D", **kw))


def conv_vjp(g, x, f, **kw):
    a = attrs("Conv2D", **kw)
    return Conv2D.vjp(g, Conv2D.forward(x, f, **a), x, f, **a, needs=(True, True))


def pool(name, x, **kw):
    return REG[name].forward(x, **attrs(name, **kw))


def pool_grad(name, x, g=None, **kw):
    spec, a = REG[name], attrs(name, **kw)
    out = spec.forward(x, **a)
    (gx,) = spec.vjp(np.ones_like(out) if g is None else g, out, x, **a)
    return gx


def row(values):
    """A [1, 1, W, 1] image from a list."""
    return f32(values).reshape(1, 1, -1, 1)


# --------------------------------------------------------------------------------------------
# Activations


def test_relu6_clips_and_its_gradient_is_zero_at_both_kinks():
    x = f32([-1.0, 0.0, 3.0, 6.0, 7.0])
    out = Relu6.forward(x)
    np.testing.assert_array_equal(out, [0, 0, 3, 6, 6])
    assert out.dtype == np.float32
    (gx,) = Relu6.vjp(np.ones(5, np.float32), out, x)
    np.testing.assert_array_equal(gx, [0, 0, 1, 0, 0])
    assert Relu6.forward(np.array([-3, 2, 9], np.int32)).dtype == np.int32


def test_elu_selu_values_and_no_overflow_warning():
    x = f32([-2.0, -0.5, 0.0, 1.5, 200.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        elu = Elu.forward(x)
        selu = Selu.forward(x)
    neg = np.expm1(np.minimum(x, 0))
    np.testing.assert_allclose(elu, np.where(x > 0, x, neg), rtol=1e-6)
    alpha, scale = 1.6732632423543772, 1.0507009873554805
    np.testing.assert_allclose(selu, scale * np.where(x > 0, x, alpha * neg), rtol=1e-6)
    assert elu.dtype == selu.dtype == np.float32
    # gradients at 0: TF's EluGrad/SeluGrad take the positive branch (outputs < 0 is false)
    (ge,) = Elu.vjp(np.ones(5, np.float32), elu, x)
    np.testing.assert_allclose(ge, [np.exp(-2.0), np.exp(-0.5), 1, 1, 1], rtol=1e-6)
    (gs,) = Selu.vjp(np.ones(5, np.float32), selu, x)
    np.testing.assert_allclose(gs, [scale * alpha * np.exp(-2.0), scale * alpha * np.exp(-0.5),
                                    scale, scale, scale], rtol=1e-6)


def test_leaky_relu_gradient_at_zero_is_alpha():
    x = f32([-2.0, 0.0, 3.0])
    out = LeakyRelu.forward(x, alpha=0.1)
    np.testing.assert_allclose(out, [-0.2, 0.0, 3.0], rtol=1e-6)
    (gx,) = LeakyRelu.vjp(np.ones(3, np.float32), out, x, alpha=0.1)
    np.testing.assert_allclose(gx, [0.1, 0.1, 1.0], rtol=1e-6)
    assert out.dtype == gx.dtype == np.float32
    assert REG["LeakyRelu"].default_attrs() == {"alpha": 0.2}


def test_softplus_is_accurate_and_quiet_at_the_extremes():
    x = np.array([-1000.0, -100.0, -1.0, 0.0, 1.0, 40.0, 1000.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = Softplus.forward(x)
        (g,) = Softplus.vjp(np.ones_like(x), out, x)
    np.testing.assert_allclose(out, [0.0, np.exp(-100.0), np.log1p(np.exp(-1.0)), np.log(2.0),
                                     1 + np.log1p(np.exp(-1.0)), 40.0, 1000.0], rtol=1e-15)
    np.testing.assert_allclose(g, np.exp(np.minimum(x, 0)) / (1 + np.exp(-np.abs(x))), rtol=1e-14)
    x32 = f32([-100.0, 0.0, 100.0])
    assert Softplus.forward(x32).dtype == np.float32


def test_softsign():
    x = f32([-3.0, 0.0, 1.0])
    out = Softsign.forward(x)
    np.testing.assert_allclose(out, [-0.75, 0.0, 0.5], rtol=1e-7)
    (g,) = Softsign.vjp(np.ones(3, np.float32), out, x)
    np.testing.assert_allclose(g, [1 / 16, 1.0, 0.25], rtol=1e-7)


_GELU_POINTS = [-6.0, -3.0, -1.5, -0.5, -1e-3, 0.0, 0.25, 1.0, 2.5, 7.0]


def _gelu_exact(x):
    return 0.5 * x * (1 + math.erf(x / math.sqrt(2)))


def _gelu_tanh(x):
    return 0.5 * x * (1 + math.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


@pytest.mark.parametrize("approximate, reference", [(False, _gelu_exact), (True, _gelu_tanh)])
@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-13), (np.float32, 2e-6)])
def test_gelu_matches_its_formula_and_a_central_difference_of_it(approximate, reference, dtype, rtol):
    x = np.array(_GELU_POINTS, dtype)
    out = Gelu.forward(x, approximate=approximate)
    assert out.dtype == dtype
    want = [reference(float(v)) for v in x]
    np.testing.assert_allclose(out, want, rtol=rtol, atol=rtol * 1e-3)
    (g,) = Gelu.vjp(np.ones_like(x), out, x, approximate=approximate)
    h = 1e-5
    slope = [(reference(float(v) + h) - reference(float(v) - h)) / (2 * h) for v in x]
    np.testing.assert_allclose(g, slope, rtol=max(rtol, 1e-8), atol=1e-8)


def test_gelu_known_values_and_tf_default():
    assert REG["Gelu"].attrs[0].name == "approximate" and REG["Gelu"].attrs[0].default is False
    # Phi(1) = 0.8413447460685429 (tables of the normal distribution)
    np.testing.assert_allclose(Gelu.forward(np.array([1.0, -1.0]), approximate=False),
                               [0.8413447460685429, -1 + 0.8413447460685429], rtol=1e-14)
    assert Gelu.forward(np.float32(0.0), approximate=True) == 0.0
    port = REG["Gelu"].inputs[0]
    assert port.accepts(np.dtype("float16")) and not port.accepts(np.dtype("int32"))


# --------------------------------------------------------------------------------------------
# Losses


def test_l2_loss_is_half_the_sum_of_squares():
    out = L2Loss.forward(f32([[1.0, 2.0], [3.0, -1.0]]))
    assert out == 7.5 and out.dtype == np.float32 and np.shape(out) == ()
    assert L2Loss.forward(np.array([1, 2, 3], np.float16)).dtype == np.float16
    (g,) = L2Loss.vjp(np.float32(2.0), out, f32([1.0, -3.0]))
    np.testing.assert_array_equal(g, [2.0, -6.0])


def test_sparse_softmax_cross_entropy_values_and_backprop():
    x = f32([[1.0, 2.0, 3.0], [1000.0, 0.0, -1000.0]])
    labels = np.array([2, 1], np.int64)
    loss, backprop = SparseSoftmaxCrossEntropyWithLogits.forward(x, labels)
    assert loss.dtype == backprop.dtype == np.float32
    np.testing.assert_allclose(loss, [np.log(np.exp(-2) + np.exp(-1) + 1), 1000.0], rtol=1e-6)
    p = np.exp(x[0] - x[0].max())
    p /= p.sum()
    np.testing.assert_allclose(backprop, [p - [0, 0, 1], [1, -1, 0]], rtol=1e-6, atol=1e-7)
    # agrees with the dense op on one-hot labels
    dense_loss, dense_bp = REG["SoftmaxCrossEntropyWithLogits"].forward(x, np.eye(3, dtype=np.float32)[labels])
    np.testing.assert_allclose(loss, dense_loss, rtol=1e-6)
    np.testing.assert_allclose(backprop, dense_bp, rtol=1e-6, atol=1e-7)
    g = f32([2.0, -1.0])
    gx, gl = SparseSoftmaxCrossEntropyWithLogits.vjp((g, None), (loss, backprop), x, labels)
    assert gl is None
    np.testing.assert_allclose(gx, backprop * g[:, None])
    assert SparseSoftmaxCrossEntropyWithLogits.vjp((None, None), (loss, backprop), x, labels) == (None, None)


@pytest.mark.parametrize("labels, message", [
    ([0, 3, 1], r"label 3 in row 1 is outside the valid range \[0, 3\)"),
    ([0, 1, -1], r"label -1 in row 2 is outside the valid range \[0, 3\)"),
])
def test_sparse_softmax_cross_entropy_rejects_out_of_range_labels_naming_the_row(labels, message):
    with pytest.raises(ValueError, match=message):
        SparseSoftmaxCrossEntropyWithLogits.forward(f32(np.zeros((3, 3))), np.array(labels, np.int32))


def test_sigmoid_cross_entropy_matches_the_textbook_formula_and_is_stable():
    z = f32([0.0, 1.0, 0.3, 1.0, 0.0])
    x = f32([-1.5, 2.0, 0.0, -100.0, 100.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = SigmoidCrossEntropyWithLogits.forward(z, x)
        gz, gx = SigmoidCrossEntropyWithLogits.vjp(np.ones(5, np.float32), out, z, x, needs=(True, True))
    xd, zd = x.astype(np.float64), z.astype(np.float64)
    s = 1 / (1 + np.exp(-xd))
    naive = -zd[:3] * np.log(s[:3]) - (1 - zd[:3]) * np.log1p(-s[:3])
    np.testing.assert_allclose(out[:3], naive, rtol=1e-6)
    np.testing.assert_allclose(out[3:], [100.0, 100.0], rtol=1e-6)
    np.testing.assert_allclose(gx, s - zd, rtol=1e-6, atol=1e-30)
    np.testing.assert_allclose(gz, -xd)
    assert out.dtype == gx.dtype == gz.dtype == np.float32
    # a confident, correct logit keeps its tiny loss: log1p(exp(-30))
    tiny = SigmoidCrossEntropyWithLogits.forward(f32([1.0]), f32([30.0]))
    np.testing.assert_allclose(tiny, [np.exp(-30.0)], rtol=1e-6)


# --------------------------------------------------------------------------------------------
# BiasAdd


def test_bias_add_nhwc_and_nchw():
    x = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
    b = f32([1, 2, 3, 4, 5])
    np.testing.assert_array_equal(BiasAdd.forward(x, b, data_format="NHWC"), x + b)
    xc = x.transpose(0, 3, 1, 2)
    out = BiasAdd.forward(xc, b, data_format="NCHW")
    np.testing.assert_array_equal(out, (x + b).transpose(0, 3, 1, 2))
    g = RNG.standard_normal(out.shape).astype(np.float32)
    gv, gb = BiasAdd.vjp(g, out, xc, b, data_format="NCHW", needs=(True, True))
    np.testing.assert_allclose(gb, g.sum(axis=(0, 2, 3)), rtol=1e-5)
    assert gv is g and gb.dtype == np.float32
    with pytest.raises(ShapeError, match="one entry per channel"):
        BiasAdd.forward(x, f32([1, 2, 3]), data_format="NHWC")


# --------------------------------------------------------------------------------------------
# Conv2D


def naive_conv(x, f, strides=(1, 1), dilations=(1, 1), pads=(0, 0, 0, 0)):
    """The definition, one output pixel at a time, from explicit (top, bottom, left, right) pads."""
    n, h, w, cin = x.shape
    kh, kw, _, cout = f.shape
    top, bottom, left, right = pads
    xp = np.zeros((n, h + top + bottom, w + left + right, cin))
    xp[:, top:top + h, left:left + w] = x
    eh, ew = (kh - 1) * dilations[0] + 1, (kw - 1) * dilations[1] + 1
    oh = (xp.shape[1] - eh) // strides[0] + 1
    ow = (xp.shape[2] - ew) // strides[1] + 1
    out = np.zeros((n, oh, ow, cout))
    for b, i, j, o in itertools.product(range(n), range(oh), range(ow), range(cout)):
        for p, q in itertools.product(range(kh), range(kw)):
            r, c = i * strides[0] + p * dilations[0], j * strides[1] + q * dilations[1]
            out[b, i, j, o] += xp[b, r, c] @ f[p, q, :, o]
    return out


def tf_same_pads(size, k, s, d=1):
    out = -(-size // s)
    total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
    return total // 2, total - total // 2


def test_conv2d_same_padding_puts_the_odd_entry_after():
    # width 6, kernel 3, stride 2: 3 outputs, one padding entry, on the right: [1,2,3] [3,4,5] [5,6,0]
    out = conv(row([1, 2, 3, 4, 5, 6]), np.ones((1, 3, 1, 1), np.float32), padding="SAME", strides=[1, 1, 2, 1])
    np.testing.assert_array_equal(out.ravel(), [6, 12, 11])
    # even kernel, stride 1: the padding goes after as well
    out = conv(row([1, 2, 3]), f32([1, 10]).reshape(1, 2, 1, 1), padding="SAME")
    np.testing.assert_array_equal(out.ravel(), [21, 32, 3])
    # width 5, kernel 3, stride 2: 3 outputs, padding 1 on each side: [0,1,2] [2,3,4] [4,5,0]
    out = conv(row([1, 2, 3, 4, 5]), np.ones((1, 3, 1, 1), np.float32), padding="SAME", strides=[1, 1, 2, 1])
    np.testing.assert_array_equal(out.ravel(), [3, 9, 9])
    # VALID drops what a stride leaves over
    out = conv(row([1, 2, 3, 4, 5, 6]), np.ones((1, 3, 1, 1), np.float32), padding="VALID", strides=[1, 1, 2, 1])
    np.testing.assert_array_equal(out.ravel(), [6, 12])


@pytest.mark.parametrize("shape, fshape, padding, strides, dilations", [
    ((2, 5, 5, 3), (3, 3, 3, 4), "VALID", (1, 1), (1, 1)),
    ((2, 7, 6, 2), (3, 3, 2, 3), "SAME", (2, 2), (1, 1)),
    ((1, 6, 5, 2), (2, 2, 2, 3), "SAME", (1, 1), (1, 1)),
    ((2, 8, 7, 2), (4, 3, 2, 2), "SAME", (2, 3), (1, 1)),
    ((2, 7, 7, 2), (3, 3, 2, 2), "VALID", (1, 1), (2, 2)),
    ((1, 7, 6, 2), (3, 2, 2, 2), "SAME", (1, 1), (2, 3)),
    ((1, 9, 8, 2), (2, 2, 2, 3), "SAME", (2, 2), (2, 2)),
    ((1, 10, 11, 1), (5, 4, 1, 2), "SAME", (3, 4), (1, 1)),
])
def test_conv2d_matches_the_naive_definition(shape, fshape, padding, strides, dilations):
    x = RNG.standard_normal(shape)
    f = RNG.standard_normal(fshape)
    pads = (0, 0, 0, 0)
    if padding == "SAME":
        pads = tf_same_pads(shape[1], fshape[0], strides[0], dilations[0]) + \
            tf_same_pads(shape[2], fshape[1], strides[1], dilations[1])
    got = conv(x, f, padding=padding, strides=[1, *strides, 1], dilations=[1, *dilations, 1])
    np.testing.assert_allclose(got, naive_conv(x, f, strides, dilations, pads), rtol=1e-10, atol=1e-12)
    expect = Conv2D.infer(TensorType(shape, "float64"), TensorType(fshape, "float64"),
                            **attrs("Conv2D", padding=padding, strides=[1, *strides, 1],
                                    dilations=[1, *dilations, 1]))
    assert expect.shape == got.shape


def test_conv2d_explicit_padding_matches_the_naive_definition():
    x, f = RNG.standard_normal((2, 4, 5, 2)), RNG.standard_normal((3, 3, 2, 2))
    got = conv(x, f, padding="EXPLICIT", explicit_paddings=[0, 0, 1, 2, 0, 3, 0, 0], strides=[1, 2, 1, 1])
    np.testing.assert_allclose(got, naive_conv(x, f, (2, 1), (1, 1), (1, 2, 0, 3)), rtol=1e-10)


def test_conv2d_nchw_is_nhwc_transposed():
    x, f = RNG.standard_normal((2, 7, 6, 3)).astype(np.float32), RNG.standard_normal((3, 2, 3, 4)).astype(np.float32)
    nhwc = conv(x, f, padding="SAME", strides=[1, 2, 2, 1], dilations=[1, 1, 2, 1])
    xc = x.transpose(0, 3, 1, 2)
    nchw = conv(xc, f, padding="SAME", strides=[1, 1, 2, 2], dilations=[1, 1, 1, 2], data_format="NCHW")
    np.testing.assert_allclose(nchw, nhwc.transpose(0, 3, 1, 2), rtol=1e-6)
    g = RNG.standard_normal(nhwc.shape).astype(np.float32)
    gx, gf = conv_vjp(g, x, f, padding="SAME", strides=[1, 2, 2, 1], dilations=[1, 1, 2, 1])
    gxc, gfc = conv_vjp(g.transpose(0, 3, 1, 2), xc, f, padding="SAME", strides=[1, 1, 2, 2],
                        dilations=[1, 1, 1, 2], data_format="NCHW")
    np.testing.assert_allclose(gxc, gx.transpose(0, 3, 1, 2), rtol=1e-5)
    np.testing.assert_allclose(gfc, gf, rtol=1e-5)


def test_conv2d_gradients_are_the_transposed_linear_map():
    """<conv(x, f), g> = <x, gx> = <f, gf>, since the convolution is linear in each operand."""
    x, f = RNG.standard_normal((2, 7, 6, 2)), RNG.standard_normal((3, 3, 2, 3))
    kw = dict(padding="SAME", strides=[1, 2, 2, 1], dilations=[1, 1, 1, 1])
    out = conv(x, f, **kw)
    g = RNG.standard_normal(out.shape)
    gx, gf = conv_vjp(g, x, f, **kw)
    np.testing.assert_allclose(np.vdot(out, g), np.vdot(x, gx), rtol=1e-10)
    np.testing.assert_allclose(np.vdot(out, g), np.vdot(f, gf), rtol=1e-10)


# --------------------------------------------------------------------------------------------
# Conv2DBackpropInput


def naive_conv_transpose(sizes, f, dy, strides=(1, 1), dilations=(1, 1), pads=(0, 0, 0, 0)):
    """The definition, one out_backprop entry at a time: dy[b, i, j, o] · f[p, q, :, o] added onto
    the padded input at row i·sh + p·dh, column j·sw + q·dw; the padding cut off at the end."""
    n, h, w, cin = sizes
    kh, kw, _, cout = f.shape
    top, bottom, left, right = pads
    dx = np.zeros((n, h + top + bottom, w + left + right, cin))
    for b, i, j, o in itertools.product(range(n), range(dy.shape[1]), range(dy.shape[2]), range(cout)):
        for p, q in itertools.product(range(kh), range(kw)):
            r, c = i * strides[0] + p * dilations[0], j * strides[1] + q * dilations[1]
            dx[b, r, c] += dy[b, i, j, o] * f[p, q, :, o]
    return dx[:, top:top + h, left:left + w]


def conv_t(sizes, f, dy, **kw):
    return Conv2DBackpropInput.forward(ints(sizes), f, dy, **attrs("Conv2DBackpropInput", **kw))


@pytest.mark.parametrize("sizes, fshape, padding, strides, dilations", [
    ((2, 5, 5, 3), (3, 3, 3, 4), "VALID", (1, 1), (1, 1)),
    ((2, 7, 6, 2), (3, 3, 2, 3), "SAME", (2, 2), (1, 1)),
    ((2, 8, 6, 2), (3, 3, 2, 3), "SAME", (2, 2), (1, 1)),
    ((1, 6, 5, 2), (2, 2, 2, 3), "SAME", (1, 1), (1, 1)),
    ((2, 8, 7, 2), (4, 3, 2, 2), "SAME", (2, 3), (1, 1)),
    ((2, 7, 8, 2), (3, 3, 2, 2), "VALID", (2, 3), (1, 1)),
    ((2, 7, 7, 2), (3, 3, 2, 2), "VALID", (1, 1), (2, 2)),
    ((1, 9, 8, 2), (2, 2, 2, 3), "SAME", (2, 2), (2, 2)),
    ((1, 10, 11, 1), (5, 4, 1, 2), "SAME", (3, 4), (1, 1)),
])
def test_conv2d_backprop_input_matches_the_naive_definition(sizes, fshape, padding, strides, dilations):
    pads = (0, 0, 0, 0)
    if padding == "SAME":
        pads = tf_same_pads(sizes[1], fshape[0], strides[0], dilations[0]) + \
            tf_same_pads(sizes[2], fshape[1], strides[1], dilations[1])
    eh, ew = (fshape[0] - 1) * dilations[0] + 1, (fshape[1] - 1) * dilations[1] + 1
    oh = (sizes[1] + pads[0] + pads[1] - eh) // strides[0] + 1
    ow = (sizes[2] + pads[2] + pads[3] - ew) // strides[1] + 1
    f, dy = RNG.standard_normal(fshape), RNG.standard_normal((sizes[0], oh, ow, fshape[3]))
    kw = dict(padding=padding, strides=[1, *strides, 1], dilations=[1, *dilations, 1])
    got = conv_t(sizes, f, dy, **kw)
    np.testing.assert_allclose(got, naive_conv_transpose(sizes, f, dy, strides, dilations, pads),
                               rtol=1e-10, atol=1e-12)
    t = Conv2DBackpropInput.infer(ints(sizes), TensorType(fshape, "float64"), TensorType(dy.shape, "float64"),
                                  **attrs("Conv2DBackpropInput", **kw))
    assert t.shape == got.shape == sizes


def test_conv2d_backprop_input_explicit_and_nchw_match_the_naive_definition():
    f, dy = RNG.standard_normal((3, 3, 2, 2)), RNG.standard_normal((2, 3, 4, 2))
    got = conv_t((2, 4, 5, 2), f, dy, padding="EXPLICIT", explicit_paddings=[0, 0, 1, 2, 0, 1, 0, 0],
                 strides=[1, 2, 1, 1])
    want = naive_conv_transpose((2, 4, 5, 2), f, dy, (2, 1), (1, 1), (1, 2, 0, 1))
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    nchw = conv_t((2, 2, 4, 5), f, dy.transpose(0, 3, 1, 2), padding="EXPLICIT", data_format="NCHW",
                  explicit_paddings=[0, 0, 0, 0, 1, 2, 0, 1], strides=[1, 1, 2, 1])
    np.testing.assert_allclose(nchw, want.transpose(0, 3, 1, 2), rtol=1e-10, atol=1e-12)


def test_conv2d_backprop_input_is_the_input_gradient_of_conv2d():
    """<conv(x, f), dy> = <x, conv_t(dy)>: the transposed linear map, and Conv2D's own vjp."""
    x, f = RNG.standard_normal((2, 7, 6, 2)), RNG.standard_normal((3, 3, 2, 3))
    kw = dict(padding="SAME", strides=[1, 2, 2, 1], dilations=[1, 1, 1, 1])
    dy = RNG.standard_normal(conv(x, f, **kw).shape)
    dx = conv_t(x.shape, f, dy, **kw)
    np.testing.assert_allclose(np.vdot(conv(x, f, **kw), dy), np.vdot(x, dx), rtol=1e-10)
    np.testing.assert_allclose(dx, conv_vjp(dy, x, f, **kw)[0], rtol=1e-10)


@pytest.mark.parametrize("sizes, fshape, gshape, kw, message", [
    ([2, 7, 6, 2], (3, 3, 2, 3), (2, 4, 4, 3), {"padding": "SAME", "strides": [1, 2, 2, 1]},
     r"out_backprop \[2,4,4,3\] does not fit.*gives \[2,4,3,3\]"),
    ([2, 7, 6, 2], (3, 3, 2, 3), (2, 4, 3, 5), {"padding": "SAME", "strides": [1, 2, 2, 1]},
     "out_backprop has 5 channels"),
    ([2, 7, 6, 4], (3, 3, 2, 3), (2, 4, 3, 3), {"padding": "SAME", "strides": [1, 2, 2, 1]},
     "input_sizes has 4 channels"),
    ([2, 7, 6], (3, 3, 2, 3), (2, 4, 3, 3), {"padding": "SAME"}, "input_sizes must be 4"),
    ([2, 7, 6, 2], (3, 3, 2), (2, 4, 3, 3), {"padding": "SAME"}, "rank-4 filter"),
    ([2, 7, 6, 2], (3, 3, 2, 3), (2, 4, 3), {"padding": "SAME"}, "rank-4 out_backprop"),
    ([2, 2, 6, 2], (3, 3, 2, 3), (2, 1, 4, 3), {}, "larger than the input's height"),
])
def test_conv2d_backprop_input_refuses_what_does_not_fit(sizes, fshape, gshape, kw, message):
    with pytest.raises(ShapeError, match=message):
        Conv2DBackpropInput.infer(ints(sizes), TensorType(fshape, "float32"), TensorType(gshape, "float32"),
                                  **attrs("Conv2DBackpropInput", **kw))
    if len(sizes) == 4 and len(fshape) == 4 and len(gshape) == 4:
        with pytest.raises(ShapeError, match=message):
            conv_t(sizes, np.zeros(fshape), np.zeros(gshape), **kw)
    with pytest.raises(ShapeError, match="filter is float32 but out_backprop is float64"):
        Conv2DBackpropInput.infer(ints([2, 7, 6, 2]), TensorType((3, 3, 2, 3), "float32"),
                                  TensorType((2, 4, 3, 3), "float64"), **attrs("Conv2DBackpropInput"))


# --------------------------------------------------------------------------------------------
# FusedBatchNormV3


def naive_batch_norm(x, scale, offset, mean, variance, epsilon, factor, training):
    """TensorFlow's definition for NHWC, one channel at a time with plain sums."""
    n, h, w, c = x.shape
    count = n * h * w
    y = np.zeros(x.shape)
    outs = [np.zeros(c) for _ in range(4)]
    for k in range(c):
        entries = [x[b, i, j, k] for b, i, j in itertools.product(range(n), range(h), range(w))]
        m, v = mean[k], variance[k]
        if training:
            m = sum(entries) / count
            v = sum((e - m) ** 2 for e in entries) / count
            unbiased = v * count / (count - 1) if count > 1 else v
            outs[0][k] = (1 - factor) * mean[k] + factor * m if factor != 1 else m
            outs[1][k] = (1 - factor) * variance[k] + factor * unbiased if factor != 1 else unbiased
        else:
            outs[0][k], outs[1][k] = mean[k], variance[k]
        outs[2][k], outs[3][k] = m, v
        for b, i, j in itertools.product(range(n), range(h), range(w)):
            y[b, i, j, k] = (x[b, i, j, k] - m) / np.sqrt(v + epsilon) * scale[k] + offset[k]
    return (y, *outs)


def batch_norm(x, scale, offset, mean, variance, **kw):
    return FusedBatchNormV3.forward(x, scale, offset, mean, variance, **attrs("FusedBatchNormV3", **kw))


def _bn_inputs(shape, c):
    return (RNG.standard_normal(shape), RNG.uniform(0.5, 2, c), RNG.standard_normal(c),
            RNG.standard_normal(c), RNG.uniform(0.5, 2, c))


@pytest.mark.parametrize("shape, epsilon, factor, training", [
    ((4, 3, 2, 3), 0.0001, 1.0, True),
    ((2, 3, 5, 2), 0.01, 0.25, True),
    ((1, 1, 1, 3), 0.001, 1.0, True),  # one entry per channel: no Bessel correction (n / max(n - 1, 1))
    ((3, 2, 2, 4), 0.001, 1.0, False),
    ((3, 2, 2, 4), 0.001, 0.5, False),  # the factor only matters in training
])
def test_fused_batch_norm_matches_the_definition(shape, epsilon, factor, training):
    inputs = _bn_inputs(shape, shape[3])
    got = batch_norm(*inputs, epsilon=epsilon, exponential_avg_factor=factor, is_training=training)
    want = naive_batch_norm(*inputs, epsilon, factor, training)
    for g, w in zip(got[:5], want):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)
    assert got[5].shape == () and got[5] == 0
    types = FusedBatchNormV3.infer(*(TensorType(a.shape, "float64") for a in inputs),
                                   **attrs("FusedBatchNormV3", is_training=training))
    assert [t.shape for t in types] == [np.shape(o) for o in got]


def test_fused_batch_norm_nchw_is_nhwc_transposed_and_float16_x_keeps_float32_statistics():
    x, *params = _bn_inputs((2, 3, 4, 3), 3)
    nhwc = batch_norm(x, *params)
    nchw = batch_norm(x.transpose(0, 3, 1, 2), *params, data_format="NCHW")
    np.testing.assert_allclose(nchw[0], nhwc[0].transpose(0, 3, 1, 2), rtol=1e-12)
    for a, b in zip(nchw[1:], nhwc[1:]):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    half = batch_norm(x.astype(np.float16), *(p.astype(np.float32) for p in params))
    assert half[0].dtype == np.float16 and all(o.dtype == np.float32 for o in half[1:])
    np.testing.assert_allclose(half[0], nhwc[0], atol=1e-2)
    types = FusedBatchNormV3.infer(TensorType(x.shape, "float16"), *(TensorType((3,), "float32") for _ in params),
                                   **attrs("FusedBatchNormV3"))
    assert [t.dtype for t in types] == [np.float16] + [np.float32] * 5


def test_fused_batch_norm_gradients_are_tensorflow_s():
    """FusedBatchNormGradV3's formulas, written out per channel with plain sums; statistics
    outputs carry no gradient."""
    x, scale, offset, mean, variance = _bn_inputs((3, 2, 2, 2), 2)
    g = RNG.standard_normal(x.shape)
    for training in (True, False):
        a = attrs("FusedBatchNormV3", is_training=training, epsilon=0.001)
        out = FusedBatchNormV3.forward(x, scale, offset, mean, variance, **a)
        gx, gscale, goffset, gmean, gvar = FusedBatchNormV3.vjp((g, None, None, None, None, None), out, x, scale,
                                                                offset, mean, variance, **a)
        for k in range(2):
            xs, gs = x[..., k].ravel(), g[..., k].ravel()
            m, v = (xs.mean(), xs.var()) if training else (mean[k], variance[k])
            r = 1 / np.sqrt(v + 0.001)
            xhat = (xs - m) * r
            np.testing.assert_allclose(goffset[k], gs.sum(), rtol=1e-10)
            np.testing.assert_allclose(gscale[k], (gs * xhat).sum(), rtol=1e-10)
            if training:
                want = scale[k] * r * (gs - gs.mean() - xhat * (gs * xhat).mean())
            else:
                want = gs * scale[k] * r
            np.testing.assert_allclose(gx[..., k].ravel(), want, rtol=1e-9, atol=1e-12)
        assert gmean is None and gvar is None        # as TF: the population statistics take none


def test_fused_batch_norm_shows_its_statistics_inputs_cut():
    """The wires into mean and variance carry no gradient, and the gradient paths say why."""
    from blockflow.compile.compiler import compile_project
    from diagrams import chain
    project = chain(("x", "Placeholder", {"shape": [2, 2, 2, 3]}, None),
                    ("s", "Variable", {"shape": [3]}, None), ("o", "Variable", {"shape": [3]}, None),
                    ("m", "Variable", {"shape": [3]}, None), ("v", "Variable", {"shape": [3]}, None),
                    ("bn", "FusedBatchNormV3", {"is_training": False},
                     {"x": "x", "scale": "s", "offset": "o", "mean": "m", "variance": "v"}),
                    ("loss", "Sum", {}, {"input": "bn:y"}))
    project.pages[0].loss = "loss"
    paths = compile_project(project).gradient_paths()
    cut = {e.dst_port: why for e, why in paths.cut.items() if e.dst == "bn"}
    assert set(cut) == {"mean", "variance"}, cut
    assert {e.dst_port for e in paths.flows if e.dst == "bn"} == {"x", "scale", "offset"}
    project.pages[0].feeds["x"] = RNG.standard_normal((2, 2, 2, 3)).astype(np.float32)
    grads = run(compile_project(project), target="loss").grads
    assert {node for node, _ in grads} >= {"s", "o"} and not {"m", "v"} & {node for node, _ in grads}


@pytest.mark.parametrize("x, params, kw, message", [
    ((2, 3, 4), [(4,)] * 4, {}, "rank-4 x"),
    ((2, 3, 4, 5), [(4,)] * 4, {}, r"scale \[4\] must have one entry per channel of x \[2,3,4,5\] \(5 channels"),
    ((2, 3, 4, 5), [(5,), (5,), (5,), (4,)], {}, r"variance \[4\]"),
    ((2, 3, 4, 5), [(5,), (5,), (0,), (0,)], {"is_training": False}, r"mean \[0\]"),
    ((2, 3, 4, 5), [(5,), (5,), (0,), (0,)], {"exponential_avg_factor": 0.5}, r"mean \[0\]"),
    ((2, 5, 4, 3), [(3,)] * 4, {"data_format": "NCHW"}, r"\(5 channels, NCHW\)"),
    ((2, 3, 4, 5), [(5,), (5, 1), (5,), (5,)], {}, "1-D offset"),
])
def test_fused_batch_norm_refuses_what_does_not_fit(x, params, kw, message):
    with pytest.raises(ShapeError, match=message):
        FusedBatchNormV3.infer(TensorType(x, "float32"), *(TensorType(p, "float32") for p in params),
                               **attrs("FusedBatchNormV3", **kw))
    with pytest.raises(ShapeError, match=message):
        batch_norm(np.zeros(x, np.float32), *(np.ones(p, np.float32) for p in params), **kw)


def test_fused_batch_norm_refuses_mixed_statistics_dtypes():
    x, p32, p64 = TensorType((2, 2, 2, 3), "float64"), TensorType((3,), "float32"), TensorType((3,), "float64")
    with pytest.raises(ShapeError, match="offset is float64 but scale is float32"):
        FusedBatchNormV3.infer(x, p32, p64, p32, p32, **attrs("FusedBatchNormV3"))
    with pytest.raises(ShapeError, match="must be float32 or x's dtype"):
        FusedBatchNormV3.infer(TensorType((2, 2, 2, 3), "float32"), p64, p64, p64, p64, **attrs("FusedBatchNormV3"))
    assert REG.resolve_alias("FusedBatchNorm") == "FusedBatchNormV3"


# --------------------------------------------------------------------------------------------
# Pooling


def test_max_pool_gives_a_tie_to_the_first_max_in_the_window():
    x = f32([[3, 1], [3, 3]]).reshape(1, 2, 2, 1)
    gx = pool_grad("MaxPool", x, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1])
    np.testing.assert_array_equal(gx.reshape(2, 2), [[1, 0], [0, 0]])
    x = f32([[1, 3], [3, 3]]).reshape(1, 2, 2, 1)
    gx = pool_grad("MaxPool", x, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1])
    np.testing.assert_array_equal(gx.reshape(2, 2), [[0, 1], [0, 0]])


def test_max_pool_overlapping_windows_add_up():
    x = row([1, 5, 2, 0, 4])
    out = pool("MaxPool", x, ksize=[1, 1, 2, 1], strides=[1, 1, 1, 1])
    np.testing.assert_array_equal(out.ravel(), [5, 5, 2, 4])
    gx = pool_grad("MaxPool", x, g=f32([1, 10, 100, 1000]).reshape(out.shape), ksize=[1, 1, 2, 1],
                   strides=[1, 1, 1, 1])
    np.testing.assert_array_equal(gx.ravel(), [0, 11, 100, 0, 1000])


def test_max_pool_same_never_takes_the_padding():
    x = row([-5, -3, -4, -7, -6])  # kernel 3, stride 2, SAME: windows [p,-5,-3] [-3,-4,-7] [-7,-6,p]
    out = pool("MaxPool", x, ksize=[1, 1, 3, 1], strides=[1, 1, 2, 1], padding="SAME")
    np.testing.assert_array_equal(out.ravel(), [-3, -3, -6])
    gx = pool_grad("MaxPool", x, ksize=[1, 1, 3, 1], strides=[1, 1, 2, 1], padding="SAME")
    np.testing.assert_array_equal(gx.ravel(), [0, 2, 0, 0, 1])
    xi = np.array([-5, -3, -4, -7, -6], np.int32).reshape(1, 1, 5, 1)
    outi = pool("MaxPool", xi, ksize=[1, 1, 3, 1], strides=[1, 1, 2, 1], padding="SAME")
    assert outi.dtype == np.int32 and outi.ravel().tolist() == [-3, -3, -6]


def test_avg_pool_same_averages_only_the_real_entries():
    x = row([1, 2, 3, 4, 5])  # kernel 3, stride 2, SAME: pads 1 and 1
    out = pool("AvgPool", x, ksize=[1, 1, 3, 1], strides=[1, 1, 2, 1], padding="SAME")
    np.testing.assert_allclose(out.ravel(), [1.5, 3.0, 4.5])
    gx = pool_grad("AvgPool", x, ksize=[1, 1, 3, 1], strides=[1, 1, 2, 1], padding="SAME")
    np.testing.assert_allclose(gx.ravel(), [0.5, 0.5 + 1 / 3, 1 / 3, 1 / 3 + 0.5, 0.5])
    ones = np.ones((2, 5, 7, 3), np.float32)
    same = pool("AvgPool", ones, ksize=[1, 3, 3, 1], strides=[1, 2, 2, 1], padding="SAME")
    np.testing.assert_array_equal(same, np.ones((2, 3, 4, 3)))
    assert same.dtype == np.float32


def naive_pool(x, k, s, padding, reduce):
    n, h, w, c = x.shape
    if padding == "SAME":
        (t, _), (l, _) = tf_same_pads(h, k[0], s[0]), tf_same_pads(w, k[1], s[1])
        oh, ow = -(-h // s[0]), -(-w // s[1])
    else:
        t = l = 0
        oh, ow = (h - k[0]) // s[0] + 1, (w - k[1]) // s[1] + 1
    out = np.zeros((n, oh, ow, c))
    for i, j in itertools.product(range(oh), range(ow)):
        r0, c0 = i * s[0] - t, j * s[1] - l
        win = x[:, max(r0, 0):r0 + k[0], max(c0, 0):c0 + k[1]]
        out[:, i, j] = reduce(win, axis=(1, 2))
    return out


@pytest.mark.parametrize("name, reduce", [("MaxPool", np.max), ("AvgPool", np.mean)])
@pytest.mark.parametrize("shape, k, s, padding", [
    ((2, 5, 7, 3), (2, 2), (2, 2), "SAME"), ((2, 6, 5, 2), (3, 3), (2, 2), "SAME"),
    ((1, 5, 5, 2), (3, 3), (1, 1), "SAME"), ((2, 6, 5, 1), (3, 2), (2, 1), "VALID"),
    ((1, 9, 10, 2), (4, 3), (3, 2), "SAME"), ((1, 9, 10, 2), (4, 3), (3, 2), "VALID"),
])
def test_pools_match_the_naive_definition(name, reduce, shape, k, s, padding):
    x = RNG.standard_normal(shape)
    got = pool(name, x, ksize=[1, *k, 1], strides=[1, *s, 1], padding=padding)
    np.testing.assert_allclose(got, naive_pool(x, k, s, padding, reduce), rtol=1e-12)


def test_pools_nchw_are_nhwc_transposed():
    x = RNG.standard_normal((2, 5, 7, 3)).astype(np.float32)
    for name in ("MaxPool", "AvgPool"):
        a = pool(name, x, ksize=[1, 3, 2, 1], strides=[1, 2, 2, 1], padding="SAME")
        b = pool(name, x.transpose(0, 3, 1, 2), ksize=[1, 1, 3, 2], strides=[1, 1, 2, 2], padding="SAME",
                 data_format="NCHW")
        np.testing.assert_allclose(b, a.transpose(0, 3, 1, 2), rtol=1e-6)


# --------------------------------------------------------------------------------------------
# Dropout


def test_dropout_scales_kept_entries_and_redraws_the_same_mask_backward():
    x = RNG.uniform(1, 2, size=(200, 50)).astype(np.float32)
    out = Dropout.forward(x, rate=0.25, training=True, seed=0, rng=np.random.default_rng(5))
    kept = out != 0
    assert out.dtype == np.float32
    assert abs(kept.mean() - 0.75) < 0.02
    np.testing.assert_allclose(out[kept], x[kept] / np.float32(0.75), rtol=1e-6)
    g = np.ones_like(x)
    (gx,) = Dropout.vjp(g, out, x, rate=0.25, training=True, seed=0, rng=np.random.default_rng(5))
    np.testing.assert_array_equal(gx != 0, kept)
    np.testing.assert_allclose(gx[kept], 1 / 0.75, rtol=1e-6)
    again = Dropout.forward(x, rate=0.25, training=True, seed=0, rng=np.random.default_rng(5))
    np.testing.assert_array_equal(again, out)


def test_dropout_is_the_identity_when_not_training_or_at_rate_zero():
    x = f32([1.0, 2.0, 3.0])
    for kw in ({"rate": 0.5, "training": False}, {"rate": 0.0, "training": True}):
        assert Dropout.forward(x, seed=0, rng=np.random.default_rng(), **kw) is x
        g = f32([1.0, 1.0, 1.0])
        assert Dropout.vjp(g, x, x, seed=0, rng=np.random.default_rng(), **kw)[0] is g


def test_dropout_rate_one_is_rejected():
    with pytest.raises(ShapeError, match=r"rate must be in \[0, 1\)"):
        Dropout.infer(TensorType((3,), "float32"), rate=1.0, training=True, seed=0)
    assert REG["Dropout"].validate_attrs({"rate": 1.5})[1]


def test_dropout_through_the_runtime_uses_one_mask_forward_and_backward():
    p = chain(("x", "Placeholder", {"shape": [40, 30]}, None),
              ("d", "Dropout", {"rate": 0.5, "seed": 9}, {"x": "x"}),
              ("loss", "Sum", {}, {"input": "d"}))
    program = compile_project(p)
    assert program.ok, [str(e) for e in program.errors]
    x = RNG.uniform(1, 2, size=(40, 30)).astype(np.float32)
    res = run(program, {"x": x}, target="loss", fetch=["d"])
    out, gx = res.value("d"), res.grad("x")
    assert 0.3 < (out != 0).mean() < 0.7
    np.testing.assert_array_equal(out != 0, gx != 0)
    np.testing.assert_allclose(gx[gx != 0], 2.0)


# --------------------------------------------------------------------------------------------
# TopK and InTopK


def test_top_k_ties_come_lower_index_first():
    x = f32([[1, 3, 3, 2, 3], [5, 4, 4, 4, 0]])
    values, indices = TopK.forward(x, ints(3), sorted=True)
    np.testing.assert_array_equal(values, [[3, 3, 3], [5, 4, 4]])
    np.testing.assert_array_equal(indices, [[1, 2, 4], [0, 1, 2]])
    assert indices.dtype == np.int32 and values.dtype == np.float32
    xi = np.array([7, -2, 7, 9], np.int32)
    values, indices = TopK.forward(xi, ints(4), sorted=True)
    assert values.tolist() == [9, 7, 7, -2] and indices.tolist() == [3, 0, 2, 1]


def test_top_k_unsorted_keeps_index_order_and_gradient_scatters():
    x = f32([[0.5, 4.0, -1.0, 2.0, 3.0]])
    values, indices = TopK.forward(x, ints(3), sorted=False)
    np.testing.assert_array_equal(indices, [[1, 3, 4]])
    np.testing.assert_array_equal(values, [[4.0, 2.0, 3.0]])
    gx, gk = TopK.vjp((f32([[10, 20, 30]]), None), (values, indices), x, ints(3), sorted=False)
    assert gk is None and gx.dtype == np.float32
    np.testing.assert_array_equal(gx, [[0, 10, 0, 20, 30]])


def test_top_k_default_k_is_one_and_too_large_k_is_an_error():
    values, indices = TopK.forward(f32([1, 9, 3]), None, sorted=True)
    assert values.tolist() == [9.0] and indices.tolist() == [1]
    with pytest.raises(ShapeError, match="at least k = 4"):
        TopK.infer(TensorType((2, 3), "float32"), ints(4), sorted=True)
    with pytest.raises(ShapeError, match="at least k = 4"):
        TopK.forward(f32([[1, 2, 3]]), ints(4), sorted=True)
    with pytest.raises(ShapeError, match="single integer"):
        TopK.infer(TensorType((2, 3), "float32"), ints([1, 2]), sorted=True)


def test_in_top_k_counts_ties_at_the_boundary_as_in():
    pred = f32([[0.1, 0.3, 0.3, 0.2], [0.1, 0.3, 0.3, 0.2], [0.1, 0.3, 0.3, 0.2], [0.4, 0.3, 0.3, 0.2]])
    targets = np.array([2, 3, 1, 3], np.int32)
    np.testing.assert_array_equal(InTopK.forward(pred, targets, ints(1)), [True, False, True, False])
    np.testing.assert_array_equal(InTopK.forward(pred, targets, ints(3)), [True, True, True, False])
    np.testing.assert_array_equal(InTopK.forward(pred, targets, ints(0)), [False] * 4)


def test_in_top_k_is_false_for_bad_targets_and_non_finite_rows():
    pred = f32([[0.1, 0.9, 0.0], [0.1, np.inf, 0.0], [np.nan, 0.5, 0.2], [0.3, 0.2, 0.1]])
    targets = np.array([5, 1, 1, -1], np.int64)
    out = InTopK.forward(pred, targets, ints(3))
    assert out.dtype == np.bool_ and out.tolist() == [False, False, False, False]


# --------------------------------------------------------------------------------------------
# infer: errors and unknown sizes


@pytest.mark.parametrize("name, inputs, given, message", [
    ("Conv2D", [TensorType((1, 5, 5, 3), "float32"), TensorType((3, 3, 2, 4), "float32")], {},
     r"has 3 channels \(NHWC\) but filter \[3,3,2,4\] expects 2"),
    ("Conv2D", [TensorType((1, 2, 5, 3), "float32"), TensorType((3, 3, 3, 4), "float32")], {},
     "window's height 3 is larger than the input's height 2 with VALID padding"),
    ("Conv2D", [TensorType((1, 5, 5, 3), "float32"), TensorType((3, 3, 3, 4), "float32")],
     {"dilations": [1, 3, 1, 1]}, r"height 3 \(dilated to 7\)"),
    ("Conv2D", [TensorType((1, 5, 5, 3), "float32"), TensorType((3, 3, 3, 4), "float32")],
     {"strides": [2, 1, 1, 1]}, "batch and channel"),
    ("Conv2D", [TensorType((1, 5, 5, 3), "float32"), TensorType((3, 3, 3, 4), "float32")],
     {"strides": [1, 1, 1]}, "4 entries"),
    ("Conv2D", [TensorType((1, 5, 5, 3), "float32"), TensorType((3, 3, 3, 4), "float32")],
     {"padding": "EXPLICIT", "explicit_paddings": [0, 0, 1, 1]}, "8 non-negative ints"),
    ("Conv2D", [TensorType((1, 5, 5, 3), "float32"), TensorType((3, 3, 3, 4), "float32")],
     {"padding": "SAME", "explicit_paddings": [0, 0, 1, 1, 1, 1, 0, 0]}, "only used with EXPLICIT"),
    ("Conv2D", [TensorType((5, 5, 3), "float32"), TensorType((3, 3, 3, 4), "float32")], {}, "rank-4 input"),
    ("Conv2D", [TensorType((1, 5, 5, 3), "float32"), TensorType((3, 3, 3, 4), "float64")], {}, "float64"),
    ("MaxPool", [TensorType((1, 5, 5, 3), "float32")], {"ksize": [1, 2, 2]}, "ksize must have 4 entries"),
    ("MaxPool", [TensorType((1, 5, 5, 3), "float32")], {"ksize": [1, 2, 2, 2]}, "batch and channel"),
    ("AvgPool", [TensorType((1, 5, 1, 3), "float32")], {}, "width 2 is larger than the input's width 1"),
    ("BiasAdd", [TensorType((2, 3), "float32"), TensorType((4,), "float32")], {}, "one entry per channel"),
    ("BiasAdd", [TensorType((2, 3, 4), "float32"), TensorType((4,), "float32")], {"data_format": "NCHW"},
     r"axis 1, size 3"),
    ("BiasAdd", [TensorType((3,), "float32"), TensorType((3,), "float32")], {}, "rank 2 or more"),
    ("SparseSoftmaxCrossEntropyWithLogits", [TensorType((2, 3), "float32"), TensorType((3,), "int32")], {},
     "differ in batch size"),
    ("SparseSoftmaxCrossEntropyWithLogits", [TensorType((2, 3), "float32"), TensorType((2, 3), "int32")], {},
     r"\[batch\] labels"),
    ("SigmoidCrossEntropyWithLogits", [TensorType((2, 3), "float32"), TensorType((3,), "float32")], {},
     r"labels \[2,3\] and logits \[3\] must have the same shape"),
    ("InTopK", [TensorType((2, 3), "float32"), TensorType((3,), "int32"), ints(1)], {}, "differ in batch"),
    ("TopK", [TensorType((), "float32"), ints(1)], {}, "rank 1 or more"),
])
def test_infer_rejects_what_does_not_fit(name, inputs, given, message):
    spec = REG[name]
    with pytest.raises(ShapeError, match=message):
        spec.infer(*inputs, **attrs(name, **given))


def test_infer_keeps_unknown_sizes():
    t = Conv2D.infer(TensorType((None, 7, None, 3), "float32"), TensorType((3, 3, 3, 8), "float32"),
                       **attrs("Conv2D", padding="SAME", strides=[1, 2, 2, 1]))
    assert t.shape == (None, 4, None, 8)
    t = Conv2D.infer(TensorType((2, 7, 7, None), "float32"), TensorType((3, None, None, None), "float32"),
                       **attrs("Conv2D"))
    assert t.shape == (2, 5, None, None)
    t = MaxPool.infer(TensorType((None, 5, 7, 3), "float32"), **attrs("MaxPool", padding="SAME"))
    assert t.shape == (None, 3, 4, 3)
    loss, bp = SparseSoftmaxCrossEntropyWithLogits.infer(TensorType((None, 4), "float32"),
                                                           TensorType((6,), "int32"))
    assert loss.shape == (6,) and bp.shape == (6, 4)
    values, indices = TopK.infer(TensorType((None, None), "float32"), ints(2), sorted=True)
    assert values.shape == indices.shape == (None, 2) and indices.dtype == np.int32


@pytest.mark.parametrize("alias, name", [("TopKV2", "TopK"), ("InTopKV2", "InTopK")])
def test_tf_aliases(alias, name):
    assert REG.resolve_alias(alias) == name


# --------------------------------------------------------------------------------------------
# A small CNN through the runtime


def test_a_small_cnn_trains_through_the_runtime_with_correct_gradients():
    p = chain(("x", "Placeholder", {"shape": [2, 6, 5, 2], "dtype": "float64"}, None),
              ("w", "Placeholder", {"shape": [3, 3, 2, 3], "dtype": "float64"}, None),
              ("b", "Placeholder", {"shape": [3], "dtype": "float64"}, None),
              ("y", "Placeholder", {"shape": [2], "dtype": "int32"}, None),
              ("conv", "Conv2D", {"padding": "SAME", "strides": [1, 2, 1, 1]}, {"input": "x", "filter": "w"}),
              ("bias", "BiasAdd", {}, {"value": "conv", "bias": "b"}),
              ("act", "Elu", {}, {"features": "bias"}),
              ("pool", "MaxPool", {"padding": "SAME"}, {"input": "act"}),
              ("avg", "AvgPool", {"ksize": [1, 2, 3, 1], "padding": "VALID"}, {"value": "pool"}),
              ("flat", "Reshape", {}, {"tensor": "avg", "shape": ints([2, 3])}),
              ("ce", "SparseSoftmaxCrossEntropyWithLogits", {}, {"features": "flat", "labels": "y"}),
              ("loss", "Mean", {}, {"input": "ce:loss"}))
    program = compile_project(p)
    assert program.ok, [str(e) for e in program.errors]
    feeds = {"x": RNG.standard_normal((2, 6, 5, 2)), "w": RNG.standard_normal((3, 3, 2, 3)),
             "b": RNG.standard_normal(3), "y": np.array([2, 0], np.int32)}
    res = run(program, feeds, target="loss")
    for name in ("w", "b"):
        x = feeds[name]
        v = RNG.standard_normal(x.shape)
        eps = 1e-6
        plus = run(program, {**feeds, name: x + eps * v}, fetch=["loss"]).value("loss")
        minus = run(program, {**feeds, name: x - eps * v}, fetch=["loss"]).value("loss")
        np.testing.assert_allclose(np.vdot(res.grad(name), v), (plus - minus) / (2 * eps), rtol=1e-6)
