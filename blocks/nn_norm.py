"""nn_ops, normalization: FusedBatchNormV3, LRN.

Imports only blockflow.spec and numpy.
"""
from __future__ import annotations

import numpy as np

from blockflow.spec import Attr, Input, Output, ShapeError, TensorType, block, reserve

from . import windows
from .common import fmt_shape
from .window_geometry import AXES, LAYOUTS

_OP = "FusedBatchNormV3"
_PARAMS = ("scale", "offset", "mean", "variance")
# The axes a channel's statistics are taken over, per layout.
_STAT_AXES = {"NHWC": (0, 1, 2), "NCHW": (0, 2, 3)}


def _channels(x, params, is_training, exponential_avg_factor, data_format):
    """The channel count of ``x`` (a TensorType or an array: anything with shape and dtype),
    checking ``params`` (scale, offset, mean, variance) against it; None when unknown."""
    if len(x.shape) != 4:
        raise ShapeError(f"{_OP} needs a rank-4 x ({data_format}), got {fmt_shape(x.shape)}")
    u = params[0].dtype
    for name, p in zip(_PARAMS, params):
        if p.dtype != u:
            raise ShapeError(f"{_OP}: {name} is {p.dtype.name} but scale is {u.name} (scale, offset, mean and "
                             f"variance share one dtype)")
    if u.kind != "f" or (u != x.dtype and u != np.float32):
        raise ShapeError(f"{_OP}: scale, offset, mean and variance must be float32 or x's dtype "
                         f"({x.dtype.name}), got {u.name}")
    c = x.shape[AXES[data_format][2]]
    # As TensorFlow: in training with exponential_avg_factor 1 the mean and variance are not
    # read and may be empty.
    may_be_empty = is_training and exponential_avg_factor == 1
    for name, p in zip(_PARAMS, params):
        if len(p.shape) != 1:
            raise ShapeError(f"{_OP} needs a 1-D {name} (one entry per channel), got {fmt_shape(p.shape)}")
        n = p.shape[0]
        if name in ("mean", "variance") and n == 0 and may_be_empty:
            continue
        if n is not None and c is not None and n != c:
            raise ShapeError(f"{_OP}: {name} {fmt_shape(p.shape)} must have one entry per channel of x "
                             f"{fmt_shape(x.shape)} ({c} channels, {data_format})")
        c = n if c is None else c
    return c


def _shaped(v, data_format):
    """A per-channel vector shaped to broadcast against a 4-D tensor in ``data_format``."""
    return v if data_format == "NHWC" else v.reshape(-1, 1, 1)


def _moments(x, data_format):
    """(count, mean, biased variance) of each channel of ``x``, computed in x's dtype."""
    axes = _STAT_AXES[data_format]
    count = x.size // max(x.shape[AXES[data_format][2]], 1)
    mean = np.mean(x, axis=axes)
    reserve(x.shape, x.dtype, "FusedBatchNormV3's centred input")
    centred = x - _shaped(mean, data_format)
    return count, mean, np.mean(np.square(centred), axis=axes)


@block(_OP, category="nn_ops", aliases=("FusedBatchNorm",))
class FusedBatchNormV3:
    """Batch normalization of a 4-D ``x`` per channel, as TensorFlow's FusedBatchNormV3.

    ``y = (x - m) / sqrt(v + epsilon) * scale + offset`` for each channel (the last axis for
    NHWC, axis 1 for NCHW). In training (``is_training``), m and v are the batch's mean and
    biased variance over the other axes; otherwise they are the given ``mean`` and
    ``variance``. ``scale``, ``offset``, ``mean`` and ``variance`` are 1-D, one entry per
    channel, float32 or x's dtype (the statistics are computed in that dtype; y has x's).

    The other outputs follow TensorFlow's CPU kernel. In training: ``batch_mean`` is
    ``(1 - f) * mean + f * m`` and ``batch_variance`` is ``(1 - f) * variance + f * v * n / (n - 1)``
    (the Bessel-corrected variance over the n = batch·height·width entries of a channel; n / 1 when
    n is 1), with f = ``exponential_avg_factor`` (with f = 1 they are the batch's own, and mean and
    variance may be empty); ``reserve_space_1`` and ``reserve_space_2`` are m and the biased v. In
    inference all four are the given mean and variance (TensorFlow's CPU kernel leaves the two
    reserve spaces unset there). ``reserve_space_3`` is a 0-d zero.

    Only ``y`` carries a gradient back (as TensorFlow's FusedBatchNormGradV3: the gradients
    arriving at the statistics outputs are ignored), and none goes to ``mean`` and ``variance``,
    as in TensorFlow (their wires are shown cut). The alias FusedBatchNorm has V3's six outputs.
    """

    inputs = (Input("x", dtype="float"), Input("scale", dtype="U"), Input("offset", dtype="U"),
              Input("mean", dtype="U", gradient=False,
                    doc="population mean: used in inference and in a running average (no gradient, as TF)"),
              Input("variance", dtype="U", gradient=False, doc="population variance: as mean"))
    outputs = (Output("y"),
               Output("batch_mean", differentiable=False, doc="running mean (training) or mean"),
               Output("batch_variance", differentiable=False, doc="running unbiased variance or variance"),
               Output("reserve_space_1", differentiable=False, doc="the mean y used"),
               Output("reserve_space_2", differentiable=False, doc="the (biased) variance y used"),
               Output("reserve_space_3", differentiable=False, doc="a 0-d zero"))
    attrs = (
        Attr("epsilon", "float", 0.0001, min=0.0, doc="added to the variance"),
        Attr("exponential_avg_factor", "float", 1.0, doc="weight of the batch in batch_mean/batch_variance"),
        Attr("data_format", "choice", "NHWC", choices=LAYOUTS),
        Attr("is_training", "bool", True, doc="normalize with the batch's statistics (else mean, variance)"),
    )
    grad_rule = """
        r = 1 / sqrt(v + epsilon), x̂ = (x − m) · r, sums over every axis but the channel axis
        doffset = Σ g
        dscale = Σ g · x̂
        in training: dx = scale · r · (g − mean(g) − x̂ · mean(g · x̂)), dmean = dvariance = 0
        in inference: dx = g · scale · r
        in inference: dmean = −scale · r · Σ g, dvariance = −scale · r³ / 2 · Σ g · (x − mean)
        """

    def infer(x, scale, offset, mean, variance, *, epsilon, exponential_avg_factor, data_format, is_training):
        c = _channels(x, (scale, offset, mean, variance), is_training, exponential_avg_factor, data_format)
        u = scale.dtype
        stat = TensorType((c,), u)
        return TensorType(x.shape, x.dtype), stat, stat, stat, stat, TensorType((), u)

    def forward(x, scale, offset, mean, variance, *, epsilon, exponential_avg_factor, data_format, is_training):
        _channels(x, (scale, offset, mean, variance), is_training, exponential_avg_factor, data_format)
        u = scale.dtype
        xu = x.astype(np.result_type(x, u), copy=False)
        eps = u.type(epsilon)
        if is_training:
            count, m, v = _moments(xu, data_format)
            m, v = m.astype(u, copy=False), v.astype(u, copy=False)
            unbiased = v * u.type(count / max(count - 1, 1))
            f = u.type(exponential_avg_factor)
            if exponential_avg_factor == 1:
                running_mean, running_var = m.copy(), unbiased
            else:
                running_mean = (1 - f) * mean + f * m
                running_var = (1 - f) * variance + f * unbiased
        else:
            m, v = mean, variance
            running_mean, running_var = mean.copy(), variance.copy()
        r = 1 / np.sqrt(v + eps)
        reserve(x.shape, xu.dtype, "FusedBatchNormV3's centred input")
        y = (xu - _shaped(m, data_format)) * _shaped(r * scale, data_format) + _shaped(offset, data_format)
        return (y.astype(x.dtype, copy=False), running_mean, running_var, np.array(m, u), np.array(v, u),
                np.zeros((), u))

    def vjp(g, out, x, scale, offset, mean, variance, *, epsilon, exponential_avg_factor, data_format,
            is_training):
        gy = g[0]
        if gy is None:
            return None, None, None, None, None
        u = scale.dtype
        axes = _STAT_AXES[data_format]
        work = np.result_type(x, u)
        m, v = (out[3], out[4])
        r = 1 / np.sqrt(v + u.type(epsilon))
        reserve(x.shape, work, "FusedBatchNormV3's normalized input")
        xhat = (x.astype(work, copy=False) - _shaped(m, data_format)) * _shaped(r, data_format)
        gw = gy.astype(work, copy=False)
        g_offset = np.add.reduce(gw, axis=axes).astype(u, copy=False)
        g_scale = np.add.reduce(gw * xhat, axis=axes).astype(u, copy=False)
        if is_training:
            count = x.size // max(len(scale), 1)
            # xhat becomes the part of g the batch statistics take away, in place.
            xhat *= _shaped(g_scale / count, data_format)
            xhat += _shaped(g_offset / count, data_format)
            g_x = (gw - xhat) * _shaped(scale * r, data_format)
        else:
            g_x = gw * _shaped(scale * r, data_format)
        # mean and variance take no gradient (as FusedBatchNormGradV3: TF sends them none)
        return g_x.astype(x.dtype, copy=False), g_scale, g_offset, None, None


def _lrn_work(dtype):
    """LRN of float16 is computed in float32 (its window sums of squares overflow float16 soon)."""
    return np.dtype(np.float32) if dtype == np.float16 else np.dtype(dtype)


# Up to this window length the window sums are shifted adds, a pass per offset; past it, block
# scans (blocks/windows.py), whose cost does not grow with the window. Measured on [8, 55, 55, 96]
# float32: the adds take 5.8 ms at radius 2 (AlexNet's, GoogLeNet's) and 2.8 ms more per unit of
# radius, the scans 9.5 to 11 ms at any radius: they cross between radius 3 and 4.
_SCAN_PASSES = 7


def _channel_window_sums(v, depth_radius, what):
    """Sum of ``v`` over channels ``d - depth_radius .. d + depth_radius`` (those that exist),
    along the last axis, each sum taken over its window's entries alone (no cancellation, as a
    running sum differenced would have), in time linear in the channels whatever the radius.
    May return ``v`` itself (a window of one channel), or write into it: callers own it."""
    c = v.shape[-1]
    radius = min(depth_radius, c - 1)  # a radius past the channels covers them all
    if radius <= 0 or v.size == 0:
        return v
    if 2 * radius + 1 > _SCAN_PASSES:
        plan = windows.axis_plan(c, 2 * radius + 1, 1, radius, c)
        return windows.reduce(np.add, v, v.ndim - 1, plan, 0, v.dtype, what)
    reserve(v.shape, v.dtype, what)
    out = v.copy()
    for offset in range(1, radius + 1):
        out[..., offset:] += v[..., :-offset]
        out[..., :-offset] += v[..., offset:]
    return out


def _lrn_norm(x, depth_radius, bias, alpha):
    """``bias + alpha * sqr_sum`` for ``x`` (in its work dtype)."""
    reserve(x.shape, x.dtype, "LRN's squares")
    norm = _channel_window_sums(np.square(x), depth_radius, "LRN's sums of squares")
    norm *= x.dtype.type(alpha)
    norm += x.dtype.type(bias)
    return norm


@block("LRN", category="nn_ops")
class LRN:
    """Local response normalization over the last axis of a 4-D ``input``, as TensorFlow's LRN.

    Each entry is divided by a power of the sum of squares of its neighbours along the last axis
    (the channels of NHWC): ``sqr_sum[a, b, c, d] = Σ input[a, b, c, d - depth_radius :
    d + depth_radius + 1] ** 2`` (the channels that exist: none is padded in) and
    ``output = input / (bias + alpha * sqr_sum) ** beta``. A negative ``bias + alpha * sqr_sum``
    with a fractional ``beta`` gives NaN, as in TensorFlow. TensorFlow's kernel takes float16 and
    float32; float64 is computed by the same formula here, and float16 in float32.

    ONNX's LRN (and PyTorch's ``local_response_norm``) normalizes over axis 1, the channels of
    NCHW, with a window of ``size`` channels and ``alpha`` divided by ``size``: an ONNX LRN with
    odd ``size`` is this block on the input transposed to channels last, with ``depth_radius =
    (size - 1) / 2`` and ``alpha = ONNX alpha / size`` (``bias`` and ``beta`` as they are). An even
    ``size`` has no counterpart here: its window reaches one more channel after than before.

    The gradient is TensorFlow's LRNGrad, exact: with ``n = bias + alpha * sqr_sum``,
    ``dinput[d] = g[d] · n[d] ** -beta − 2 · alpha · beta · input[d] · Σ g[j] · output[j] / n[j]``
    over the channels j within ``depth_radius`` of d. The window sums take time linear in the
    channels whatever the radius (shifted adds for short windows, block scans for long ones).
    """

    inputs = (Input("input", dtype="float"),)
    outputs = (Output("output"),)
    attrs = (
        Attr("depth_radius", "int", 5, min=0, max=2 ** 31 - 1, doc="channels on each side of the window"),
        Attr("bias", "float", 1.0, doc="added to the scaled sum of squares (usually positive)"),
        Attr("alpha", "float", 1.0, doc="scale of the sum of squares"),
        Attr("beta", "float", 0.5, doc="exponent of the normalizer"),
    )
    grad_rule = """
        n = bias + alpha · sqr_sum (the window's sum of squares along the last axis)
        dinput = g · n^−beta − 2 · alpha · beta · input · Σ_window (g · output / n)
        """

    def infer(input, *, depth_radius, bias, alpha, beta):
        if input.rank != 4:
            raise ShapeError(f"LRN needs a rank-4 input (normalized along its last axis), got {input}")
        return TensorType(input.shape, input.dtype)

    def forward(input, *, depth_radius, bias, alpha, beta):
        if input.ndim != 4:
            raise ShapeError(f"LRN needs a rank-4 input (normalized along its last axis), got {list(input.shape)}")
        x = input.astype(_lrn_work(input.dtype), copy=False)
        scale = _lrn_norm(x, depth_radius, bias, alpha)
        np.power(scale, -x.dtype.type(beta), out=scale)
        scale *= x
        return scale.astype(input.dtype, copy=False)

    def vjp(g, out, input, *, depth_radius, bias, alpha, beta):
        work = _lrn_work(input.dtype)
        x = input.astype(work, copy=False)
        norm = _lrn_norm(x, depth_radius, bias, alpha)
        reserve(x.shape, work, "LRN's gradient through the sums")
        through = g.astype(work) * out.astype(work, copy=False)
        through /= norm
        through = _channel_window_sums(through, depth_radius, "LRN's gradient window sums")
        through *= work.type(-2 * alpha * beta)
        through *= x
        np.power(norm, -work.type(beta), out=norm)
        norm *= g
        norm += through
        return (norm.astype(input.dtype, copy=False),)
