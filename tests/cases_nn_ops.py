"""Test cases for the nn_ops blocks of issue 3 (activations, losses, BiasAdd, Conv2D, pooling,
Dropout, TopK, InTopK): one entry per block name, merged by tests/test_blocks.py."""
from __future__ import annotations

import numpy as np

from blockflow_blocks.nn_activations import ACTIVATIONS
from casekit import Case, _unary_cases, away_from_zero, distinct, f32, i32, ints

_rng = np.random.default_rng(31)


def _relu6_points(*shape):
    """Entries in [-2, 8], at least 0.2 from the kinks at 0 and 6."""
    x = _rng.uniform(-2.0, 8.0, size=shape)
    x = np.where(np.abs(x) < 0.2, x + 0.5, x)
    x = np.where(np.abs(x - 6) < 0.2, x + 0.5, x)
    return x.astype(np.float32)


def _labels(batch, classes, dtype=np.int32):
    return _rng.integers(0, classes, size=batch).astype(dtype)


def _probabilities(*shape):
    return _rng.uniform(0.0, 1.0, size=shape).astype(np.float32)


def _conv(x, f, padding="VALID", strides=(1, 1), dilations=(1, 1), id="", **extra):
    attrs = {"padding": padding, "strides": [1, *strides, 1], "dilations": [1, *dilations, 1], **extra}
    return Case((x, f), attrs, id=id)


# The grouped convolutions' values come from their own generator, so adding them moved no other
# case's draws.
_groups_rng = np.random.default_rng(1717)


def _g32(*shape):
    return _groups_rng.uniform(-2.0, 2.0, size=shape).astype(np.float32)


def _conv_t(sizes, f, g, padding="VALID", strides=(1, 1), dilations=(1, 1), id="", **extra):
    """A Conv2DBackpropInput case: an NHWC input of ``sizes``; ``g`` the out_backprop's shape."""
    attrs = {"padding": padding, "strides": [1, *strides, 1], "dilations": [1, *dilations, 1], **extra}
    return Case((ints(sizes), f32(*f), f32(*g)), attrs, id=id)


def _bn(shape, channels, id, grad=True, **attrs):
    """A FusedBatchNormV3 case: x of ``shape``; scale, offset, mean and a positive variance (a
    float16 x with float32 statistics is in tests/test_nn_ops.py: the table's dtype check wants
    float32 outputs from float32 inputs, and y is float16 there)."""
    x = f32(*shape)
    scale, offset, mean = f32(channels, lo=0.5, hi=2.0), f32(channels), f32(channels, lo=-0.5, hi=0.5)
    variance = f32(channels, lo=0.5, hi=2.0)
    return Case((x, scale, offset, mean, variance), attrs, id=id, grad=grad)


def _pool(x, padding, ksize, strides, id, grad=True):
    return Case((x,), {"padding": padding, "ksize": [1, *ksize, 1], "strides": [1, *strides, 1]},
                id=id, grad=grad)


def _max_pool_explicit(x, ksize, strides, pads, id, data_format="NHWC", grad=True):
    """A MaxPool case with EXPLICIT padding: ``pads`` (top, bottom, left, right)."""
    h, w = (1, 2) if data_format == "NHWC" else (2, 3)
    explicit = [0] * 8
    explicit[2 * h:2 * h + 2], explicit[2 * w:2 * w + 2] = pads[:2], pads[2:]
    shaped = [1, 1, 1, 1]
    ks, ss = list(shaped), list(shaped)
    ks[h], ks[w], ss[h], ss[w] = *ksize, *strides
    return Case((x,), {"padding": "EXPLICIT", "explicit_paddings": explicit, "ksize": ks, "strides": ss,
                       "data_format": data_format}, id=id, grad=grad)


def _pool_cases(make):
    return [
        _pool(make(2, 4, 6, 3), "VALID", (2, 2), (2, 2), "valid-2x2-s2"),
        _pool(make(2, 5, 7, 3), "VALID", (2, 2), (2, 2), "valid-2x2-s2-odd"),
        _pool(make(2, 5, 5, 2), "VALID", (3, 3), (1, 1), "valid-3x3-s1"),
        _pool(make(2, 5, 7, 3), "SAME", (2, 2), (2, 2), "same-2x2-s2-odd"),
        _pool(make(2, 5, 6, 2), "SAME", (3, 3), (2, 2), "same-3x3-s2-overlap"),
        _pool(make(1, 5, 5, 2), "SAME", (3, 3), (1, 1), "same-3x3-s1"),
        _pool(make(2, 4, 4, 2), "SAME", (2, 2), (1, 1), "same-2x2-s1-asymmetric"),
        _pool(make(2, 6, 5, 1), "VALID", (3, 2), (2, 1), "valid-rect"),
        _pool(make(1, 1, 1, 1), "SAME", (3, 3), (2, 2), "tiny-same"),
        Case((make(2, 3, 5, 7),), {"padding": "SAME", "ksize": [1, 1, 3, 3], "strides": [1, 1, 2, 2],
                                   "data_format": "NCHW"}, id="nchw-same-s2"),
    ]


CASES: dict[str, list[Case]] = {
    "BiasAdd": [
        Case((f32(2, 3, 4, 5), f32(5)), id="nhwc"),
        Case((f32(3, 4), f32(4)), id="matrix"),
        Case((f32(2, 5, 3, 4), f32(5)), {"data_format": "NCHW"}, id="nchw"),
        Case((f32(2, 5, 3), f32(5)), {"data_format": "NCHW"}, id="nchw-rank3"),
        Case((f32(4, 2), f32(2)), {"data_format": "NCHW"}, id="nchw-matrix"),
        Case((i32(2, 3), i32(3)), id="int32", grad=False),
    ],
    "Relu6": _unary_cases(_relu6_points) + [Case((i32(6) * 2,), id="int32", grad=False)],
    "Elu": _unary_cases(away_from_zero) + [Case((f32(3, 4, lo=-8, hi=3),), id="wide")],
    "Selu": _unary_cases(away_from_zero) + [Case((f32(3, 4, lo=-8, hi=3),), id="wide", grad=False)],
    "LeakyRelu": _unary_cases(away_from_zero) + [
        Case((away_from_zero(3, 4),), {"alpha": 0.01}, id="alpha-0.01"),
        Case((away_from_zero(3, 4),), {"alpha": 1.5}, id="alpha-1.5"),
    ],
    "Softplus": _unary_cases() + [Case((f32(4, 5, lo=-40, hi=40),), id="wide")],
    "Softsign": _unary_cases(away_from_zero) + [Case((f32(3, 4, lo=-30, hi=30),), id="wide")],
    "Gelu": _unary_cases() + [
        Case((f32(3, 4, lo=-5, hi=5),), {"approximate": True}, id="tanh"),
        Case((f32(2, 5, lo=-8, hi=8),), id="wide"),
        Case((f32(4, lo=-3, hi=3).astype(np.float64),), {"approximate": True}, id="float64-tanh"),
    ],
    "L2Loss": _unary_cases() + [Case((f32(2, 3, 4),), id="rank-3")],
    "SparseSoftmaxCrossEntropyWithLogits": [
        Case((f32(4, 5), _labels(4, 5)), id="int32-labels"),
        Case((f32(3, 6), _labels(3, 6, np.int64)), id="int64-labels"),
        Case((f32(3, 4) * 50, _labels(3, 4)), id="large-logits"),
        Case((f32(1, 1), np.zeros(1, np.int32)), id="one-class"),
    ],
    "SigmoidCrossEntropyWithLogits": [
        Case((_probabilities(3, 4), f32(3, 4, lo=-4, hi=4)), id="matrix"),
        Case((np.array([0.0, 1.0, 1.0, 0.0, 0.3], np.float32),
              np.array([-30.0, 30.0, -30.0, 30.0, 0.5], np.float32)), id="confident"),
        Case((_probabilities(2, 3, 2), f32(2, 3, 2)), id="rank-3"),
        Case((_probabilities(), f32()), id="scalar"),
    ],
    "Conv2D": [
        _conv(f32(2, 5, 5, 3), f32(3, 3, 3, 4), "VALID", id="valid-s1"),
        _conv(f32(2, 7, 6, 2), f32(3, 3, 2, 3), "VALID", (2, 2), id="valid-s2-odd"),
        _conv(f32(2, 5, 5, 3), f32(3, 3, 3, 2), "SAME", id="same-s1"),
        _conv(f32(2, 7, 6, 2), f32(3, 3, 2, 3), "SAME", (2, 2), id="same-s2-odd"),
        _conv(f32(2, 6, 5, 2), f32(2, 2, 2, 3), "SAME", (1, 1), id="same-even-kernel-asymmetric"),
        _conv(f32(2, 8, 7, 2), f32(4, 3, 2, 2), "SAME", (2, 3), id="same-rect-s2x3"),
        _conv(f32(2, 7, 7, 2), f32(3, 3, 2, 2), "VALID", dilations=(2, 2), id="valid-dilated"),
        _conv(f32(2, 7, 6, 2), f32(3, 2, 2, 2), "SAME", dilations=(2, 3), id="same-dilated"),
        _conv(f32(2, 9, 8, 2), f32(2, 2, 2, 3), "SAME", (2, 2), (2, 2), id="same-dilated-s2"),
        _conv(f32(2, 4, 5, 3), f32(1, 1, 3, 4), "VALID", id="1x1"),
        _conv(f32(1, 4, 5, 2), f32(3, 3, 2, 2), "EXPLICIT", (2, 1),
              explicit_paddings=[0, 0, 1, 2, 0, 1, 0, 0], id="explicit"),
        Case((f32(2, 3, 6, 5), f32(3, 3, 3, 2)),
             {"padding": "SAME", "strides": [1, 1, 2, 2], "dilations": [1, 1, 1, 1], "data_format": "NCHW"},
             id="nchw-same-s2"),
        Case((f32(1, 3, 3, 1), f32(3, 3, 1, 1)), {"padding": "VALID"}, id="single-output"),
        # grouped: the input's channels a multiple of the filter's in_channels
        _conv(_g32(2, 5, 5, 4), _g32(3, 3, 2, 6), "VALID", id="grouped-2"),
        _conv(_g32(2, 7, 6, 4), _g32(3, 2, 2, 4), "SAME", (2, 2), id="grouped-2-same-s2"),
        _conv(_g32(2, 4, 5, 8), _g32(1, 1, 2, 8), "VALID", id="groups-4-1x1"),
        _conv(_g32(2, 7, 7, 6), _g32(3, 3, 2, 3), "SAME", dilations=(2, 2), id="groups-3-dilated"),
        _conv(_g32(2, 7, 6, 3), _g32(3, 3, 1, 3), "SAME", (2, 2), id="depthwise-same-s2"),
        _conv(_g32(1, 5, 6, 3), _g32(3, 3, 1, 6), "EXPLICIT", (2, 1),
              explicit_paddings=[0, 0, 1, 2, 0, 1, 0, 0], id="depthwise-x2-explicit"),
        Case((_g32(2, 3, 6, 5), _g32(3, 2, 1, 3)),
             {"padding": "SAME", "strides": [1, 1, 1, 1], "dilations": [1, 1, 2, 1], "data_format": "NCHW"},
             id="depthwise-nchw-dilated"),
        Case((_g32(2, 4, 6, 5), _g32(3, 3, 2, 4)),
             {"padding": "SAME", "strides": [1, 1, 2, 2], "dilations": [1, 1, 1, 1], "data_format": "NCHW"},
             id="grouped-nchw-same-s2"),
    ],
    "Conv2DBackpropInput": [
        _conv_t([2, 5, 5, 3], (3, 3, 3, 4), (2, 3, 3, 4), "VALID", id="valid-s1"),
        _conv_t([2, 7, 6, 2], (3, 3, 2, 3), (2, 3, 2, 3), "VALID", (2, 2), id="valid-s2-odd"),
        _conv_t([2, 5, 5, 3], (3, 3, 3, 2), (2, 5, 5, 2), "SAME", id="same-s1"),
        _conv_t([2, 7, 6, 2], (3, 3, 2, 3), (2, 4, 3, 3), "SAME", (2, 2), id="same-s2-odd"),
        _conv_t([2, 8, 6, 2], (3, 3, 2, 3), (2, 4, 3, 3), "SAME", (2, 2), id="same-s2-even"),
        _conv_t([2, 8, 7, 2], (4, 3, 2, 2), (2, 4, 3, 2), "SAME", (2, 3), id="same-rect-s2x3"),
        _conv_t([2, 7, 6, 2], (3, 2, 2, 2), (2, 7, 6, 2), "SAME", dilations=(2, 3), id="same-dilated"),
        _conv_t([2, 9, 8, 2], (2, 2, 2, 3), (2, 5, 4, 3), "SAME", (2, 2), (2, 2), id="same-dilated-s2"),
        _conv_t([2, 4, 5, 3], (1, 1, 3, 4), (2, 4, 5, 4), "VALID", id="1x1"),
        _conv_t([1, 4, 5, 2], (3, 3, 2, 2), (1, 3, 4, 2), "EXPLICIT", (2, 1),
                explicit_paddings=[0, 0, 1, 2, 0, 1, 0, 0], id="explicit"),
        Case((ints([2, 3, 6, 5]), f32(3, 3, 3, 2), f32(2, 2, 3, 3)),
             {"padding": "SAME", "strides": [1, 1, 2, 2], "dilations": [1, 1, 1, 1], "data_format": "NCHW"},
             id="nchw-same-s2"),
        Case((ints([1, 3, 3, 1]), f32(3, 3, 1, 1), f32(1, 1, 1, 1)), {"padding": "VALID"}, id="single-output"),
        Case((ints([2, 7, 6, 4]), _g32(3, 3, 2, 6), _g32(2, 4, 3, 6)),
             {"padding": "SAME", "strides": [1, 2, 2, 1], "dilations": [1, 1, 1, 1]}, id="grouped-2-same-s2"),
        Case((ints([2, 5, 6, 3]), _g32(3, 3, 1, 3), _g32(2, 5, 6, 3)), {"padding": "SAME"}, id="depthwise-same"),
    ],
    "FusedBatchNormV3": [
        _bn((4, 3, 2, 3), 3, "train-nhwc"),
        _bn((3, 3, 2, 2), 3, "train-nchw", data_format="NCHW"),
        _bn((4, 2, 2, 3), 3, "train-avg-0.3", exponential_avg_factor=0.3, epsilon=0.01),
        _bn((4, 3, 2, 3), 3, "inference", is_training=False),
        _bn((2, 3, 2, 2), 3, "inference-nchw", is_training=False, data_format="NCHW", epsilon=0.001),
        _bn((1, 1, 1, 2), 2, "train-one-entry", grad=False),
        Case((f32(3, 2, 2, 2), f32(2, lo=0.5), f32(2), np.zeros(0, np.float32), np.zeros(0, np.float32)),
             id="train-empty-mean"),
    ],
    "MaxPool": _pool_cases(distinct) + [
        _pool(i32(2, 5, 5, 2), "SAME", (2, 2), (2, 2), "int32", grad=False),
        _max_pool_explicit(distinct(2, 5, 6, 2), (3, 3), (1, 1), [1, 1, 1, 1], "explicit-symmetric"),
        _max_pool_explicit(distinct(2, 5, 5, 3), (3, 3), (2, 2), [0, 1, 0, 1], "explicit-onnx-end-s2"),
        _max_pool_explicit(distinct(1, 6, 7, 2), (2, 3), (2, 2), [1, 0, 2, 1], "explicit-asymmetric-s2"),
        _max_pool_explicit(distinct(2, 3, 5, 6), (3, 2), (1, 2), [2, 0, 1, 1], "explicit-nchw",
                           data_format="NCHW"),
        _max_pool_explicit(distinct(1, 6, 6, 1), (5, 5), (1, 1), [4, 4, 3, 4], "explicit-scans"),
        _max_pool_explicit(i32(2, 4, 5, 2), (2, 2), (2, 2), [1, 1, 0, 1], "explicit-int32", grad=False),
    ],
    "AvgPool": _pool_cases(f32),
    "LRN": [
        Case((f32(2, 3, 2, 7),), id="defaults"),
        Case((f32(2, 2, 3, 9),), {"depth_radius": 2, "bias": 2.0, "alpha": 1e-4 / 5, "beta": 0.75},
             id="alexnet"),
        Case((f32(1, 2, 2, 6),), {"depth_radius": 1, "bias": 0.5, "alpha": 0.3, "beta": 1.5}, id="radius-1"),
        Case((f32(1, 2, 2, 5),), {"depth_radius": 0, "bias": 1.5, "alpha": 0.7, "beta": 0.6}, id="radius-0"),
        Case((f32(2, 1, 2, 4),), {"depth_radius": 9, "bias": 1.0, "alpha": 0.5, "beta": 1.0},
             id="radius-past-the-channels"),
        Case((f32(1, 3, 2, 8).astype(np.float64),), {"depth_radius": 3, "bias": 1.2, "alpha": 0.25, "beta": 0.4},
             id="float64"),
        Case((f32(2, 2, 2, 1),), {"depth_radius": 2, "alpha": 2.0}, id="one-channel"),
    ],
    "Dropout": [
        Case((f32(4, 5),), {"rate": 0.5, "seed": 3}, id="half"),
        Case((f32(2, 3, 4),), {"rate": 0.2}, id="rate-0.2"),
        Case((f32(4, 5),), {"rate": 0.5, "training": False}, id="inference"),
        Case((f32(3),), {"rate": 0.0}, id="rate-0"),
        Case((f32(),), {"rate": 0.1}, id="scalar"),
    ],
    "TopK": [
        Case((distinct(3, 6), ints(3)), id="sorted"),
        Case((distinct(3, 6), ints(3)), {"sorted": False}, id="unsorted"),
        Case((distinct(2, 3, 5), ints(2)), id="rank-3"),
        Case((distinct(7), None), id="default-k"),
        Case((distinct(2, 4), ints(4)), id="k-all"),
        Case((distinct(2, 4), ints(0)), id="k-0"),
        Case((i32(3, 5), ints(2)), id="int32", grad=False),
    ],
    "InTopK": [
        Case((f32(4, 5), _labels(4, 5), ints(2)), id="k2", grad=False),
        Case((f32(3, 6), _labels(3, 6, np.int64), ints(1)), id="k1-int64", grad=False),
    ],
}


def _activation_cases():
    """Every kind on points away from its kinks; softmax kinds on rows."""
    cases = [Case((away_from_zero(2, 3),), {"kind": k}, id=k)
             for k in ACTIVATIONS if k not in ("relu6", "softmax", "log_softmax")]
    cases += [Case((_relu6_points(3, 4),), {"kind": "relu6"}, id="relu6"),
              Case((f32(3, 5),), {"kind": "softmax"}, id="softmax"),
              Case((f32(2, 2, 4) * 4,), {"kind": "softmax"}, id="softmax-rank-3"),
              Case((f32(3, 5),), {"kind": "log_softmax"}, id="log_softmax"),
              Case((away_from_zero(4).astype(np.float64),), {"kind": "gelu"}, id="gelu-float64"),
              Case((f32(2, 3),), id="default-linear"),
              Case((f32(),), {"kind": "tanh"}, id="scalar")]
    return cases


CASES["Activation"] = _activation_cases()
CASES["LearningPhase"] = [Case((), id="train", grad=False)]

NOT_DIFFERENTIABLE = {"InTopK": "none", "LearningPhase": "none"}
