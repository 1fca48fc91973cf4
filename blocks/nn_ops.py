"""nn_ops: activations, softmax and losses, convolution and pooling, dropout, top-k.

Imports only blockflow.spec and numpy.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
from numpy.lib.stride_tricks import as_strided

from blockflow.spec import DTYPE_NAMES, Attr, Input, Output, ShapeError, TensorType, block, reserve

from . import windows

_ZERO = {np.dtype(n): np.dtype(n).type(0) for n in DTYPE_NAMES}
# The ufunc reductions themselves: the array methods add a Python layer per call.
_min, _max = np.minimum.reduce, np.maximum.reduce
# Largest row sum of exp(x) the unshifted fast path takes (see _exp_rows): 1/tiny, far enough
# below the largest float that exp(log(s)) cannot overflow, whichever way log(s) rounds.
_FAST_SUM_MAX = {np.dtype(n): np.dtype(n).type(1 / np.finfo(n).tiny)
                 for n in ("float16", "float32", "float64")}


# Tensors up to this many elements take the shifted softmax formula directly (see _exp_rows).
_SMALL = 4096


def _fmt(shape) -> str:
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


def _exp_rows(x, log=True):
    """Row-wise (over the last axis) exponentials: ``(e, s, hi, lo)``.

    ``e = exp(x - c)`` for a per-row shift ``c``, ``s`` its row sums, and ``hi + lo`` the row's
    log-normalizer ``log(sum(exp(x)))``, split so that ``(x - hi) - lo`` is an accurate
    log-softmax (``log=False`` skips them: the fast path then gives None for both). All but ``e``
    have the last axis kept as size 1.

    The textbook shift is ``c = max(x)``, costing a pass for the max and one for the subtraction.
    We first try ``c = 0``: when every row has ``1 <= s < inf``, the unshifted ``e / s`` is as
    accurate as the shifted one. Nothing overflowed (``s`` is finite), and an entry whose exp
    underflowed (or went subnormal) has a true softmax ``exp(x_i) / s <= exp(x_i)``, below the
    smallest normal float itself, so the shifted formula cannot represent it any better; the
    entries that matter are computed with exp's full relative accuracy. If a row sums below 1
    (all its logits very negative: its large probabilities would come out of underflowed exps)
    or overflows, we fall back to the shifted formula for the whole tensor.

    For the log-normalizer, ``log(s)`` rounded to ``hi`` carries an error of up to half an ulp
    of ``hi``, which is not small next to a log-probability close to 0 when the logits are large
    (say ``x = [80, 70]``). ``lo = log(s * exp(-hi))`` recovers it to within a few ulps of 1,
    as accurate as the shifted formula's ``log(sum(exp(x - max)))``; it costs a few operations
    on the row sums only. ``s < 1/tiny`` keeps ``exp(hi)`` far from overflowing.

    On small tensors (up to _SMALL elements) the passes saved cost less than the fast path's
    checks, since numpy's per-call overhead dominates: they take the shifted formula directly.
    """
    if 0 < x.size <= _SMALL:
        hi = x.max(axis=-1, keepdims=True)
        e = np.subtract(x, hi)
        np.exp(e, out=e)
        s = e.sum(axis=-1, keepdims=True)
        return e, s, hi, np.log(s)
    with np.errstate(over="ignore", under="ignore"):
        e = np.exp(x)
        s = e.sum(axis=-1, keepdims=True)
    if s.size and _min(s, axis=None) >= 1 and _max(s, axis=None) < _FAST_SUM_MAX[x.dtype]:
        if not log:
            return e, s, None, None
        hi = np.log(s)
        return e, s, hi, np.log(s / np.exp(hi))
    if not x.size:
        return e, s, s, s
    hi = x.max(axis=-1, keepdims=True)
    np.subtract(x, hi, out=e)
    with np.errstate(under="ignore"):
        np.exp(e, out=e)
    s = e.sum(axis=-1, keepdims=True)
    return e, s, hi, np.log(s)


def _log_softmax(x):
    e, s, hi, lo = _exp_rows(x)
    np.subtract(x, hi, out=e)
    e -= lo
    return e


def _float_rank1(op, t):
    if t.rank < 1:
        raise ShapeError(f"{op} works along the last axis and needs a tensor of rank 1 or more, got {t}")
    return TensorType(t.shape, t.dtype)


@block("Relu", category="nn_ops")
class Relu:
    """Rectified linear unit: ``max(features, 0)`` elementwise.

    The gradient passes where ``features > 0`` and is 0 elsewhere (also at exactly 0, as in
    TensorFlow).
    """

    inputs = (Input("features", dtype="number"),)
    outputs = (Output("activations"),)
    grad_rule = "dfeatures = g where features > 0, else 0 (also 0 at features = 0)"

    def infer(features):
        return TensorType(features.shape, features.dtype)

    def forward(features):
        return np.maximum(features, _ZERO[features.dtype])

    def vjp(g, out, features):
        return (g * (out > 0),)


@block("Softmax", category="nn_ops")
class Softmax:
    """Softmax over the last axis: ``exp(logits) / sum(exp(logits))``, row by row.

    Numerically stable for any finite logits (huge or very negative), like TensorFlow's
    ``tf.nn.softmax``; each row of the result sums to 1.
    """

    inputs = (Input("logits", dtype="float"),)
    outputs = (Output("softmax"),)
    grad_rule = "dlogits = softmax ⊙ (g − Σ(g ⊙ softmax)), the sum along the last axis"

    def infer(logits):
        return _float_rank1("Softmax", logits)

    def forward(logits):
        e, s, _, _ = _exp_rows(logits, log=False)
        e /= s
        return e

    def vjp(g, out, logits):
        # gx = out * (g - sum(g * out)) in three passes: the row dot products are read without
        # writing the products out, then one buffer is written and scaled in place.
        buf = np.subtract(g, np.einsum("...j,...j->...", g, out)[..., None])
        buf *= out
        return (buf,)


@block("LogSoftmax", category="nn_ops")
class LogSoftmax:
    """Log of the softmax over the last axis: ``logits - log(sum(exp(logits)))``, row by row.

    Numerically stable for any finite logits, like TensorFlow's ``tf.nn.log_softmax``; more
    accurate than Log after Softmax for small probabilities.
    """

    inputs = (Input("logits", dtype="float"),)
    outputs = (Output("logsoftmax"),)
    grad_rule = "dlogits = g − exp(logsoftmax) · Σ g, the sum along the last axis"

    def infer(logits):
        return _float_rank1("LogSoftmax", logits)

    def forward(logits):
        return _log_softmax(logits)

    def vjp(g, out, logits):
        # gx = g - softmax * sum(g), with softmax = exp(out).
        p = np.exp(out)
        p *= g.sum(axis=-1, keepdims=True)
        np.subtract(g, p, out=p)
        return (p,)


@block("SoftmaxCrossEntropyWithLogits", category="nn_ops")
class SoftmaxCrossEntropyWithLogits:
    """Cross-entropy between ``labels`` and the softmax of ``features``, row by row.

    ``features`` (the logits) and ``labels`` are [batch, classes]; each row of ``labels`` is a
    probability distribution (one-hot for hard labels). ``loss`` is [batch]:
    ``-sum(labels * log_softmax(features))``, computed stably. ``backprop`` is
    ``softmax(features) - labels``, the gradient of the loss with respect to the features, as
    TensorFlow's op returns it; no gradient flows back from it. The loss's gradient with respect
    to ``labels`` is ``-log_softmax(features)``.
    """

    inputs = (Input("features", dtype="float"), Input("labels", dtype="float"))
    outputs = (Output("loss"), Output("backprop", differentiable=False))
    grad_rule = """
        g: the gradient arriving at loss, one entry per row (backprop sends none back)
        dfeatures = backprop · g, row by row: (softmax(features) − labels) · g
        dlabels = −log_softmax(features) · g, row by row
        """

    def infer(features, labels):
        if features.rank != 2 or labels.rank != 2:
            raise ShapeError(f"SoftmaxCrossEntropyWithLogits needs [batch, classes] features and labels, "
                             f"got {features} and {labels}")
        if features.dtype != labels.dtype:
            raise ShapeError(f"SoftmaxCrossEntropyWithLogits: features are {features.dtype.name} but "
                             f"labels are {labels.dtype.name}")
        shape = []
        for a, b in zip(features.shape, labels.shape):
            if a is not None and b is not None and a != b:
                raise ShapeError(f"SoftmaxCrossEntropyWithLogits: features {_fmt(features.shape)} and "
                                 f"labels {_fmt(labels.shape)} differ in shape")
            shape.append(b if a is None else a)
        return TensorType(shape[:1], features.dtype), TensorType(shape, features.dtype)

    def forward(features, labels):
        if features.shape != labels.shape:
            raise ShapeError(f"SoftmaxCrossEntropyWithLogits: features {list(features.shape)} and "
                             f"labels {list(labels.shape)} differ in shape")
        e, s, hi, lo = _exp_rows(features)
        # -log_softmax = (hi - x) + lo: every term is >= 0 up to rounding, so the weighted row
        # sums below do not cancel and a loss close to 0 keeps its relative accuracy.
        nlp = np.subtract(hi, features)
        nlp += lo
        loss = np.einsum("ij,ij->i", labels, nlp)
        e /= s
        e -= labels
        return loss, e

    def vjp(g, out, features, labels, *, needs):
        g_loss = g[0]
        if g_loss is None:
            return None, None
        g_col = g_loss[:, None]
        g_features = out[1] * g_col if needs[0] else None
        g_labels = None
        if needs[1]:
            g_labels = _log_softmax(features)
            g_labels *= g_col
            np.negative(g_labels, out=g_labels)
        return g_features, g_labels


# --------------------------------------------------------------------------------------------
# More activations

# Constants typed like the tensor they meet (see math_ops): a dict lookup is the cheapest way.
_FLOATS = ("float16", "float32", "float64")
_ONE = {np.dtype(n): np.dtype(n).type(1) for n in DTYPE_NAMES}
_SIX = {np.dtype(n): np.dtype(n).type(6) for n in DTYPE_NAMES if n != "bool"}
_HALF = {np.dtype(n): np.dtype(n).type(0.5) for n in _FLOATS}
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946
_SELU_S = {np.dtype(n): np.dtype(n).type(_SELU_SCALE) for n in _FLOATS}
_SELU_SA = {np.dtype(n): np.dtype(n).type(_SELU_SCALE * _SELU_ALPHA) for n in _FLOATS}


def _like(x):
    """The type of an elementwise result: x's shape and dtype (without a constant value)."""
    return TensorType(x.shape, x.dtype)


def _no_bool(op, t):
    if t.dtype.kind == "b":
        raise ShapeError(f"{op} does not take bool tensors, got {t}")
    return TensorType(t.shape, t.dtype)


def _merge(op, what_a, a, what_b, b):
    """The one shape two shapes with unknown sizes can both be; ShapeError naming both when none."""
    if len(a) != len(b) or any(x is not None and y is not None and x != y for x, y in zip(a, b)):
        raise ShapeError(f"{op}: {what_a} {_fmt(a)} and {what_b} {_fmt(b)} must have the same shape")
    return tuple(y if x is None else x for x, y in zip(a, b))


@block("Relu6", category="nn_ops")
class Relu6:
    """Rectified linear unit capped at 6: ``min(max(features, 0), 6)`` elementwise.

    The gradient passes where ``0 < features < 6`` and is 0 elsewhere, also at exactly 0 and 6
    (TensorFlow's Relu6Grad).
    """

    inputs = (Input("features", dtype="number"),)
    outputs = (Output("activations"),)
    grad_rule = "dfeatures = g where 0 < features < 6, else 0 (also 0 at exactly 0 and 6)"

    def infer(features):
        return _no_bool("Relu6", features)

    def forward(features):
        return np.minimum(np.maximum(features, _ZERO[features.dtype]), _SIX[features.dtype])

    def vjp(g, out, features):
        return (g * ((out > 0) & (out < 6)),)


@block("Elu", category="nn_ops")
class Elu:
    """Exponential linear unit: ``features`` where positive, ``exp(features) - 1`` elsewhere.

    The gradient is 1 for ``features > 0`` and ``exp(features) = activations + 1`` elsewhere
    (TensorFlow's EluGrad, computed from the output).
    """

    inputs = (Input("features", dtype="float"),)
    outputs = (Output("activations"),)
    grad_rule = "dfeatures = g where features > 0, g · (activations + 1) = g · exp(features) elsewhere"

    def infer(features):
        return _like(features)

    def forward(features):
        # exp(x) - 1 >= x for every x, so the max picks x exactly where x > 0; clipping the
        # argument at 0 keeps expm1 from overflowing on large positive entries. (No out=: a
        # 0-d input gives numpy scalars.)
        return np.maximum(np.expm1(np.minimum(features, _ZERO[features.dtype])), features)

    def vjp(g, out, features):
        t = np.minimum(out, _ZERO[out.dtype])
        t += _ONE[out.dtype]
        t *= g
        return (t,)


@block("Selu", category="nn_ops")
class Selu:
    """Scaled exponential linear unit: ``scale * x`` for x > 0, ``scale * alpha * (exp(x) - 1)`` else.

    ``alpha = 1.6732632423543772`` and ``scale = 1.0507009873554805`` (Klambauer et al., as
    TensorFlow's ``tf.nn.selu``). The gradient is ``scale`` for ``features > 0`` and
    ``activations + scale * alpha`` elsewhere (TensorFlow's SeluGrad).
    """

    inputs = (Input("features", dtype="float"),)
    outputs = (Output("activations"),)
    grad_rule = """
        dfeatures = g · scale where activations ≥ 0 (features ≥ 0)
        dfeatures = g · (activations + scale · alpha) where activations < 0
        """

    def infer(features):
        return _like(features)

    def forward(features):
        dt = features.dtype
        neg = np.expm1(np.minimum(features, _ZERO[dt]))
        neg *= _SELU_SA[dt]
        pos = np.maximum(features, _ZERO[dt])
        pos *= _SELU_S[dt]
        neg += pos  # one of the two terms is exactly 0 at each entry
        return neg

    def vjp(g, out, features):
        dt = out.dtype
        t = np.where(out < 0, out + _SELU_SA[dt], _SELU_S[dt])
        t *= g
        return (t,)


@block("LeakyRelu", category="nn_ops")
class LeakyRelu:
    """Leaky rectified linear unit: ``features`` where positive, ``alpha * features`` elsewhere.

    As TensorFlow's LeakyRelu (``tf.nn.leaky_relu``, default ``alpha`` 0.2). The gradient is 1
    where ``features > 0`` and ``alpha`` elsewhere, also at exactly 0.
    """

    inputs = (Input("features", dtype="float"),)
    outputs = (Output("activations"),)
    attrs = (Attr("alpha", "float", 0.2, doc="slope for negative inputs"),)
    grad_rule = "dfeatures = g where features > 0, alpha · g elsewhere (also at 0)"

    def infer(features, *, alpha):
        return _like(features)

    def forward(features, *, alpha):
        return np.where(features > 0, features, features * features.dtype.type(alpha))

    def vjp(g, out, features, *, alpha):
        return (np.where(features > 0, g, g * g.dtype.type(alpha)),)


@block("Softplus", category="nn_ops")
class Softplus:
    """Smooth rectifier: ``log(1 + exp(features))``, computed without overflow.

    Accurate over the whole range: ``features`` for large inputs, ``exp(features)`` for very
    negative ones. The gradient is ``sigmoid(features)``, computed as
    ``exp(features - activations)``, which neither overflows nor underflows early.
    """

    inputs = (Input("features", dtype="float"),)
    outputs = (Output("activations"),)
    grad_rule = "dfeatures = g · sigmoid(features), computed as g · exp(features − activations)"

    def infer(features):
        return _like(features)

    def forward(features):
        return np.logaddexp(features, _ZERO[features.dtype])

    def vjp(g, out, features):
        t = np.exp(features - out)
        t *= g
        return (t,)


@block("Softsign", category="nn_ops")
class Softsign:
    """Softsign: ``features / (1 + |features|)`` elementwise.

    The gradient is ``1 / (1 + |features|) ** 2``.
    """

    inputs = (Input("features", dtype="float"),)
    outputs = (Output("activations"),)
    grad_rule = "dfeatures = g / (1 + |features|)²"

    def infer(features):
        return _like(features)

    def forward(features):
        d = np.abs(features)
        d += _ONE[features.dtype]
        return features / d

    def vjp(g, out, features):
        d = np.abs(features)
        d += _ONE[features.dtype]
        d *= d
        return (g / d,)


# --------------------------------------------------------------------------------------------
# Losses


@block("L2Loss", category="nn_ops")
class L2Loss:
    """Half the sum of squares of a tensor: ``sum(t ** 2) / 2``, a scalar.

    TensorFlow's ``tf.nn.l2_loss`` (weight decay); the result keeps ``t``'s dtype. The gradient
    is ``t`` times the incoming scalar gradient.
    """

    inputs = (Input("t", dtype="float"),)
    outputs = (Output("output"),)
    grad_rule = "dt = g · t"

    def infer(t):
        return TensorType((), t.dtype)

    def forward(t):
        if t.dtype == np.float16:  # no BLAS dot for float16: sum the squares in float32
            return (np.vdot(t.astype(np.float32), t.astype(np.float32)) * 0.5).astype(np.float16)
        return np.vdot(t, t) * _HALF[t.dtype]

    def vjp(g, out, t):
        return (t * g,)


def _check_labels(op, labels, classes):
    """ValueError naming the first row whose label is not a class index in [0, classes)."""
    if labels.size and (_min(labels, axis=None) < 0 or _max(labels, axis=None) >= classes):
        row = int(np.flatnonzero((labels < 0) | (labels >= classes))[0])
        raise ValueError(f"{op}: label {int(labels[row])} in row {row} is outside the valid range "
                         f"[0, {classes})")


@block("SparseSoftmaxCrossEntropyWithLogits", category="nn_ops")
class SparseSoftmaxCrossEntropyWithLogits:
    """Cross-entropy between class indices ``labels`` and the softmax of ``features``, row by row.

    ``features`` (the logits) is [batch, classes] and ``labels`` [batch] holds one class index
    per row, in ``[0, classes)``; an index outside that range is an error naming the row (as
    TensorFlow on CPU). ``loss`` is [batch]: ``-log_softmax(features)[i, labels[i]]``, computed
    stably. ``backprop`` is ``softmax(features) - one_hot(labels)``, the gradient of the loss
    with respect to the features, as TensorFlow's op returns it; no gradient flows back from it.
    The labels are integers and get no gradient.
    """

    inputs = (Input("features", dtype="float"), Input("labels", dtype="int"))
    outputs = (Output("loss"), Output("backprop", differentiable=False))
    grad_rule = """
        g: the gradient arriving at loss, one entry per row (backprop sends none back)
        dfeatures = backprop · g, row by row: (softmax(features) − one_hot(labels)) · g
        no gradient to labels (integers)
        """

    def infer(features, labels):
        if features.rank != 2 or labels.rank != 1:
            raise ShapeError(f"SparseSoftmaxCrossEntropyWithLogits needs [batch, classes] features and "
                             f"[batch] labels, got {features} and {labels}")
        a, b = features.shape[0], labels.shape[0]
        if a is not None and b is not None and a != b:
            raise ShapeError(f"SparseSoftmaxCrossEntropyWithLogits: features {_fmt(features.shape)} and "
                             f"labels {_fmt(labels.shape)} differ in batch size")
        batch = b if a is None else a
        return (TensorType((batch,), features.dtype),
                TensorType((batch, features.shape[1]), features.dtype))

    def forward(features, labels):
        batch, classes = features.shape
        if labels.shape != (batch,):
            raise ShapeError(f"SparseSoftmaxCrossEntropyWithLogits: features {list(features.shape)} and "
                             f"labels {list(labels.shape)} differ in batch size")
        _check_labels("SparseSoftmaxCrossEntropyWithLogits", labels, classes)
        e, s, hi, lo = _exp_rows(features)
        rows = np.arange(batch)
        # -log_softmax = (hi - x) + lo, both terms >= 0 up to rounding (see SoftmaxCrossEntropy).
        loss = np.subtract(hi[:, 0], features[rows, labels])
        loss += lo[:, 0]
        e /= s
        e[rows, labels] -= _ONE[e.dtype]
        return loss, e

    def vjp(g, out, features, labels):
        if g[0] is None:
            return None, None
        return out[1] * g[0][:, None], None


@block("SigmoidCrossEntropyWithLogits", category="nn_ops")
class SigmoidCrossEntropyWithLogits:
    """Elementwise logistic loss of ``logits`` against ``labels`` (probabilities in [0, 1]).

    TensorFlow's ``tf.nn.sigmoid_cross_entropy_with_logits``: ``-z log(sigmoid(x)) - (1 - z)
    log(1 - sigmoid(x))`` for labels ``z`` and logits ``x``, computed by the stable formula
    ``max(x, 0) - x * z + log(1 + exp(-|x|))``, which neither overflows nor loses the small
    losses of confident logits. ``labels`` and ``logits`` have the same shape (no broadcasting,
    as TensorFlow). The gradient is ``sigmoid(x) - z`` for the logits and ``-x`` for the labels.
    """

    inputs = (Input("labels", dtype="float"), Input("logits", dtype="float"))
    outputs = (Output("output"),)
    grad_rule = """
        dlabels = −g · logits
        dlogits = g · (sigmoid(logits) − labels)
        """

    def infer(labels, logits):
        if labels.dtype != logits.dtype:
            raise ShapeError(f"SigmoidCrossEntropyWithLogits: labels are {labels.dtype.name} but logits "
                             f"are {logits.dtype.name}")
        return TensorType(_merge("SigmoidCrossEntropyWithLogits", "labels", labels.shape,
                                 "logits", logits.shape), logits.dtype)

    def forward(labels, logits):
        if labels.shape != logits.shape:
            raise ShapeError(f"SigmoidCrossEntropyWithLogits: labels {list(labels.shape)} and logits "
                             f"{list(logits.shape)} must have the same shape")
        # TensorFlow's order: max(x, 0) - x z first (exact 0 for a confident correct logit),
        # so that the small log1p term is not absorbed into a large one and cancelled.
        t = np.maximum(logits, _ZERO[logits.dtype]) - logits * labels
        t += np.log1p(np.exp(np.negative(np.abs(logits))))
        return t

    def vjp(g, out, labels, logits, *, needs):
        g_labels = g_logits = None
        if needs[1]:
            # sigmoid(x) = 1 / (1 + e) for x >= 0 and e / (1 + e) below, with e = exp(-|x|) <= 1.
            e = np.exp(np.negative(np.abs(logits)))
            num = np.where(logits >= 0, _ONE[e.dtype], e)
            e += _ONE[e.dtype]
            num /= e
            num -= labels
            num *= g
            g_logits = num
        if needs[0]:
            g_labels = np.negative(g * logits)
        return g_labels, g_logits


# --------------------------------------------------------------------------------------------
# Bias, convolution and pooling

_LAYOUTS = ("NHWC", "NCHW")
# Positions of the height, width and channel axes of a rank-4 tensor in each layout.
_AXES = {"NHWC": (1, 2, 3), "NCHW": (2, 3, 1)}


@block("BiasAdd", category="nn_ops")
class BiasAdd:
    """Adds a 1-D ``bias`` along the channel axis of ``value`` (the last one, or axis 1 for NCHW).

    As TensorFlow's ``tf.nn.bias_add``: ``value`` has rank 2 or more and ``bias`` one entry per
    channel (``value``'s last size for NHWC, its size at axis 1 for NCHW), of the same dtype.
    The gradient passes to ``value`` unchanged and is summed over every other axis for ``bias``
    (TensorFlow's BiasAddGrad).
    """

    inputs = (Input("value"), Input("bias"))
    outputs = (Output("output"),)
    attrs = (Attr("data_format", "choice", "NHWC", choices=_LAYOUTS,
                  doc="NHWC: channels last; NCHW: channels at axis 1"),)
    grad_rule = """
        dvalue = g
        dbias = g summed over every axis but the channel axis (the last for NHWC, axis 1 for NCHW)
        """

    def infer(value, bias, *, data_format):
        if value.dtype != bias.dtype:
            raise ShapeError(f"BiasAdd: value is {value.dtype.name} but bias is {bias.dtype.name}")
        _no_bool("BiasAdd", value)
        if value.rank < 2 or bias.rank != 1:
            raise ShapeError(f"BiasAdd needs a value of rank 2 or more and a 1-D bias, got {value} and {bias}")
        axis = value.rank - 1 if data_format == "NHWC" else 1
        c, b = value.shape[axis], bias.shape[0]
        if c is not None and b is not None and c != b:
            raise ShapeError(f"BiasAdd: bias {_fmt(bias.shape)} must have one entry per channel of value "
                             f"{_fmt(value.shape)} (axis {axis}, size {c}, {data_format})")
        shape = list(value.shape)
        shape[axis] = b if c is None else c
        return TensorType(shape, value.dtype)

    def forward(value, bias, *, data_format):
        if data_format == "NHWC":
            if bias.shape[0] != value.shape[-1]:
                raise ShapeError(f"BiasAdd: bias {list(bias.shape)} must have one entry per channel of "
                                 f"value {list(value.shape)}")
            return value + bias
        if bias.shape[0] != value.shape[1]:
            raise ShapeError(f"BiasAdd: bias {list(bias.shape)} must have one entry per channel of "
                             f"value {list(value.shape)} (axis 1, NCHW)")
        return value + bias.reshape((-1,) + (1,) * (value.ndim - 2))

    def vjp(g, out, value, bias, *, data_format, needs):
        g_bias = None
        if needs[1]:
            axis = g.ndim - 1 if data_format == "NHWC" else 1
            g_bias = np.add.reduce(g, axis=tuple(i for i in range(g.ndim) if i != axis))
        return (g if needs[0] else None), g_bias


def _spatial(op, name, values, data_format):
    """The (height, width) entries of a 4-int strides/ksize/dilations attr; batch and channel must be 1."""
    if len(values) != 4:
        raise ShapeError(f"{op}: {name} must have 4 entries ({data_format} order), got {list(values)}")
    h, w, c = _AXES[data_format]
    if values[0] != 1 or values[c] != 1:
        raise ShapeError(f"{op}: {name} {list(values)} must be 1 in the batch and channel entries "
                         f"({data_format} order)")
    if values[h] < 1 or values[w] < 1:
        raise ShapeError(f"{op}: {name} {list(values)} must be at least 1")
    return values[h], values[w]


@lru_cache(maxsize=1024)
def _axis_geometry(op, what, size, k, stride, dilation, padding, pads):
    """Output size and (before, after) padding of one spatial axis, TensorFlow's arithmetic.

    ``size`` None (unknown) gives an unknown output size. SAME: ``out = ceil(size / stride)``
    and the padding needed, ``max((out - 1) * stride + k_eff - size, 0)``, split with the odd
    entry after. VALID: no padding, ``out = (size - k_eff) // stride + 1``. EXPLICIT: ``pads``.
    """
    eff = (k - 1) * dilation + 1
    if padding == "SAME":
        if size is None:
            return None, None, None
        out = -(-size // stride)
        total = max((out - 1) * stride + eff - size, 0)
        return out, total // 2, total - total // 2
    before, after = pads if padding == "EXPLICIT" else (0, 0)
    if size is None:
        return None, before, after
    padded = size + before + after
    if padded < eff:
        dil = f" (dilated to {eff})" if dilation > 1 else ""
        raise ShapeError(f"{op}: the window's {what} {k}{dil} is larger than the input's {what} {size}"
                         + (f" padded to {padded}" if padding == "EXPLICIT" else "")
                         + f" with {padding} padding")
    return (padded - eff) // stride + 1, before, after


def _explicit_pads(op, padding, explicit_paddings, data_format):
    """((top, bottom), (left, right)) of EXPLICIT padding; None for SAME and VALID."""
    if padding != "EXPLICIT":
        if explicit_paddings:
            raise ShapeError(f"{op}: explicit_paddings is only used with EXPLICIT padding, got "
                             f"{list(explicit_paddings)} with {padding}")
        return None
    p = list(explicit_paddings)
    h, w, c = _AXES[data_format]
    if len(p) != 8 or min(p) < 0 or p[0] or p[1] or p[2 * c] or p[2 * c + 1]:
        raise ShapeError(f"{op}: EXPLICIT padding needs explicit_paddings of 8 non-negative ints, (before, "
                         f"after) per axis in {data_format} order with 0 for batch and channels, got {p}")
    return (p[2 * h], p[2 * h + 1]), (p[2 * w], p[2 * w + 1])


def _geometry(op, shape, k, strides, dilations, padding, pads):
    """(oh, ow, (top, bottom, left, right)) of a 2-D window over an NHWC ``shape``."""
    oh, top, bottom = _axis_geometry(op, "height", shape[1], k[0], strides[0], dilations[0], padding,
                                     pads and pads[0])
    ow, left, right = _axis_geometry(op, "width", shape[2], k[1], strides[1], dilations[1], padding,
                                     pads and pads[1])
    return oh, ow, (top, bottom, left, right)


def _pad(x, pads, fill, what="the padded input"):
    """``x`` (NHWC) padded in height and width; ``x`` itself when there is nothing to pad."""
    top, bottom, left, right = pads
    if not (top or bottom or left or right):
        return x
    n, h, w, c = x.shape
    shape = (n, h + top + bottom, w + left + right, c)
    reserve(shape, x.dtype, what)
    out = np.full(shape, fill, dtype=x.dtype)
    out[:, top:top + h, left:left + w] = x
    return out


def _offset(i, j, oh, ow, strides, dilations):
    """The index of the padded input's entries at kernel offset (i, j) of every window."""
    sh, sw = strides
    r, c = i * dilations[0], j * dilations[1]
    return (slice(None), slice(r, r + sh * (oh - 1) + 1, sh), slice(c, c + sw * (ow - 1) + 1, sw))


def _col2im(d, shape, k, oh, ow, pads, strides, dilations, dtype):
    """Sum per-offset cotangents ``d(i, j)`` ([N, oh, ow, C]) back into an NHWC input ``shape``.

    One strided add per kernel offset (not per pixel); overlapping windows add up. ``d`` is
    called once per offset, in row-major order (MaxPool relies on it).
    """
    n, h, w, c = shape
    top, bottom, left, right = pads
    padded = (n, h + top + bottom, w + left + right, c)
    reserve(padded, dtype, "the padded input's gradient")
    dx = np.zeros(padded, dtype)
    if oh and ow:
        for i in range(k[0]):
            for j in range(k[1]):
                dx[_offset(i, j, oh, ow, strides, dilations)] += d(i, j)
    if top or bottom or left or right:
        dx = dx[:, top:top + h, left:left + w]
    return dx


def _to_nhwc(x, data_format):
    return x if data_format == "NHWC" else x.transpose(0, 2, 3, 1)


def _from_nhwc(x, data_format):
    return x if data_format == "NHWC" else x.transpose(0, 3, 1, 2)


def _nhwc_type(op, t, data_format, what="input"):
    if t.rank != 4:
        raise ShapeError(f"{op} needs a rank-4 {what} ({data_format}), got {t}")
    h, w, c = _AXES[data_format]
    return (t.shape[0], t.shape[h], t.shape[w], t.shape[c])


def _layout_shape(n, h, w, c, data_format):
    return (n, h, w, c) if data_format == "NHWC" else (n, c, h, w)


_CONV_PADDINGS = ("SAME", "VALID", "EXPLICIT")


def _conv_setup(input_shape, filter_shape, strides, padding, explicit_paddings, dilations, data_format):
    """Everything Conv2D needs about its windows, from NHWC ``input_shape``; checked."""
    s = _spatial("Conv2D", "strides", strides, data_format)
    d = _spatial("Conv2D", "dilations", dilations, data_format)
    pads = _explicit_pads("Conv2D", padding, explicit_paddings, data_format)
    oh, ow, p = _geometry("Conv2D", input_shape, filter_shape[:2], s, d, padding, pads)
    return s, d, oh, ow, p


# The window matrix of a convolution (im2col) has kh * kw * C entries per output pixel: a large
# filter on a large image would make it gigabytes. It is made in pieces of about this many bytes
# (whole images, or runs of output rows of one image), each multiplied and dropped before the
# next, so a convolution needs its input, output and filter plus one piece.
_WINDOW_PIECE_BYTES = 32 * 1024 ** 2


def _conv_pieces(n, oh, ow, k, cin, itemsize):
    """The (images, output rows) ranges the window matrix is made in, as slices."""
    per_row = max(ow * k[0] * k[1] * cin * itemsize, 1)
    rows = max(_WINDOW_PIECE_BYTES // per_row, 1)
    if rows >= oh:
        images = max(rows // max(oh, 1), 1)
        return [(slice(b, min(b + images, n)), slice(0, oh)) for b in range(0, n, images)]
    return [(slice(b, b + 1), slice(r, min(r + rows, oh))) for b in range(n) for r in range(0, oh, rows)]


def _windows_of(xp, k, rows, ow, strides, dilations):
    """The windows of the output rows ``rows`` of padded NHWC ``xp`` as a matrix: one row per
    output pixel, [images * len(rows) * ow, kh * kw * C]; a strided view copied once."""
    n, _, _, c = xp.shape
    s0, s1, s2, s3 = xp.strides
    first = rows.start * strides[0]
    count = rows.stop - rows.start
    win = as_strided(xp[:, first:], (n, count, ow, k[0], k[1], c),
                     (s0, s1 * strides[0], s2 * strides[1], s1 * dilations[0], s2 * dilations[1], s3),
                     writeable=False)
    reserve(win.shape, xp.dtype, "the convolution's window matrix (one piece)")
    return win.reshape(n * count * ow, k[0] * k[1] * c)


def _add_windows(dxp, dcols, k, rows, strides, dilations):
    """Add each output pixel's window cotangent ``dcols`` ([images, rows, ow, kh, kw, C]) back onto
    the padded input gradient ``dxp`` (the images of this piece): one strided add per kernel
    offset, or per output pixel when there are fewer of those."""
    _, count, ow = dcols.shape[:3]
    sh, sw = strides
    dh, dw = dilations
    top = rows.start * sh
    if k[0] * k[1] <= count * ow:
        for i in range(k[0]):
            for j in range(k[1]):
                r, c = top + i * dh, j * dw
                dxp[:, r:r + sh * (count - 1) + 1:sh, c:c + sw * (ow - 1) + 1:sw] += dcols[:, :, :, i, j]
    else:
        for y in range(count):
            for x in range(ow):
                r, c = top + y * sh, x * sw
                dxp[:, r:r + dh * (k[0] - 1) + 1:dh, c:c + dw * (k[1] - 1) + 1:dw] += dcols[:, y, x]


@block("Conv2D", category="nn_ops")
class Conv2D:
    """2-D convolution (cross-correlation, as TensorFlow) of ``input`` with ``filter``.

    ``input`` is [batch, height, width, in_channels] (NHWC; [batch, in_channels, height, width]
    with NCHW) and ``filter`` is [filter_height, filter_width, in_channels, out_channels]; the
    output has out_channels channels in the same layout. ``strides`` and ``dilations`` have 4
    entries in the layout's order, 1 for batch and channels (``[1, sh, sw, 1]`` for NHWC).

    Padding follows TensorFlow exactly. VALID: no padding, only full windows. SAME: the output
    has ``ceil(size / stride)`` entries per axis and the input is zero-padded by
    ``max((out - 1) * stride + (k - 1) * dilation + 1 - size, 0)``, the odd entry going after
    (bottom/right). EXPLICIT: ``explicit_paddings`` gives (before, after) per axis, 8 ints in the
    layout's order.

    Computed by im2col (a strided view of the windows) and matrix products, in pieces of about
    32 MiB of windows, so a large filter on a large image never makes its whole window matrix.
    The gradient goes to both operands: the filter's as the windows' product with the output's
    cotangent; the input's as the full correlation of the cotangent with the flipped filter
    (stride 1), or by summing the windows' cotangents back over the kernel offsets (col2im).
    """

    inputs = (Input("input", dtype="float"), Input("filter", dtype="float"))
    outputs = (Output("output"),)
    attrs = (
        Attr("strides", "ints", (1, 1, 1, 1), doc="window step per axis, [1, sh, sw, 1] in NHWC"),
        Attr("padding", "choice", "VALID", choices=_CONV_PADDINGS),
        Attr("explicit_paddings", "ints", (), doc="with EXPLICIT padding: 8 ints, (before, after) per axis"),
        Attr("data_format", "choice", "NHWC", choices=_LAYOUTS),
        Attr("dilations", "ints", (1, 1, 1, 1), doc="filter dilation per axis, [1, dh, dw, 1] in NHWC"),
    )
    grad_rule = """
        dinput = each output position's g times filter, added back onto that position's input window
        overlapping windows add up; what lands on the padding is dropped
        dfilter = Σ over the batch and the output positions of (input window) ⊗ g
        """

    def infer(input, filter, *, strides, padding, explicit_paddings, data_format, dilations):
        if input.dtype != filter.dtype:
            raise ShapeError(f"Conv2D: input is {input.dtype.name} but filter is {filter.dtype.name}")
        shape = _nhwc_type("Conv2D", input, data_format)
        if filter.rank != 4:
            raise ShapeError(f"Conv2D needs a rank-4 filter [height, width, in_channels, out_channels], "
                             f"got {filter}")
        cin, fin = shape[3], filter.shape[2]
        if cin is not None and fin is not None and cin != fin:
            raise ShapeError(f"Conv2D: input {_fmt(input.shape)} has {cin} channels ({data_format}) but "
                             f"filter {_fmt(filter.shape)} expects {fin}")
        kh, kw = filter.shape[:2]
        s = _spatial("Conv2D", "strides", strides, data_format)
        d = _spatial("Conv2D", "dilations", dilations, data_format)
        pads = _explicit_pads("Conv2D", padding, explicit_paddings, data_format)
        oh = ow = None
        if kh is not None:
            oh = _axis_geometry("Conv2D", "height", shape[1], kh, s[0], d[0], padding, pads and pads[0])[0]
        if kw is not None:
            ow = _axis_geometry("Conv2D", "width", shape[2], kw, s[1], d[1], padding, pads and pads[1])[0]
        return TensorType(_layout_shape(shape[0], oh, ow, filter.shape[3], data_format), input.dtype)

    def forward(input, filter, *, strides, padding, explicit_paddings, data_format, dilations):
        x = _to_nhwc(input, data_format)
        if x.shape[3] != filter.shape[2]:
            raise ShapeError(f"Conv2D: input {list(input.shape)} has {x.shape[3]} channels but filter "
                             f"{list(filter.shape)} expects {filter.shape[2]}")
        s, d, oh, ow, p = _conv_setup(x.shape, filter.shape, strides, padding, explicit_paddings,
                                      dilations, data_format)
        return _from_nhwc(_correlate(_pad(x, p, 0), filter, s, d, oh, ow), data_format)

    def vjp(g, out, input, filter, *, strides, padding, explicit_paddings, data_format, dilations, needs):
        x = _to_nhwc(input, data_format)
        s, d, oh, ow, p = _conv_setup(x.shape, filter.shape, strides, padding, explicit_paddings,
                                      dilations, data_format)
        kh, kw, cin, cout = filter.shape
        n, h, w, _ = x.shape
        g = _to_nhwc(g, data_format)
        pieces = _conv_pieces(n, oh, ow, filter.shape, cin, max(x.dtype.itemsize, g.dtype.itemsize))
        g_input = g_filter = None
        if needs[1]:
            # Piece by piece, as the forward: the window matrix never exists whole.
            xp = _pad(x, p, 0)
            g_filter = np.zeros((kh * kw * cin, cout), g.dtype)
            for images, rows in pieces:
                g_filter += np.matmul(_windows_of(xp[images], filter.shape, rows, ow, s, d).T,
                                      g[images, rows].reshape(-1, cout))
            del xp
            g_filter = g_filter.reshape(filter.shape)
        if needs[0]:
            top, bottom, left, right = p
            hp, wp = h + top + bottom, w + left + right
            reserve((n, hp, wp, cin), g.dtype, "the padded input's gradient")
            if s == (1, 1):
                # The input's gradient is a full correlation of g with the filter flipped (in and
                # out channels swapped): the forward's own pieces and matrix products.
                eh, ew = (kh - 1) * d[0], (kw - 1) * d[1]
                flipped = filter[::-1, ::-1].transpose(0, 1, 3, 2)
                dxp = _correlate(_pad(g, (eh, eh, ew, ew), 0, "the convolution's padded gradient"),
                                 flipped, (1, 1), d, hp, wp)
            else:
                dxp = np.zeros((n, hp, wp, cin), g.dtype)
                kernel_t = filter.reshape(-1, cout).T
                for images, rows in pieces:
                    g2 = g[images, rows].reshape(-1, cout)
                    count = rows.stop - rows.start
                    reserve((g2.shape[0], kernel_t.shape[1]), g.dtype,
                            "the convolution's window cotangents (one piece)")
                    dcols = np.matmul(g2, kernel_t).reshape(len(range(n)[images]), count, ow, kh, kw, cin)
                    _add_windows(dxp[images], dcols, (kh, kw), rows, s, d)
            g_input = _from_nhwc(dxp[:, top:top + h, left:left + w], data_format)
        return g_input, g_filter


def _correlate(xp, filter, strides, dilations, oh, ow):
    """The VALID cross-correlation of padded NHWC ``xp`` with ``filter`` [kh, kw, cin, cout]:
    [N, oh, ow, cout], made piece by piece (im2col and one matrix product per piece)."""
    n, cin, cout = xp.shape[0], filter.shape[2], filter.shape[3]
    kernel = filter.reshape(-1, cout)
    out = np.empty((n, oh, ow, cout), np.result_type(xp, filter))
    for images, rows in _conv_pieces(n, oh, ow, filter.shape, cin, xp.dtype.itemsize):
        cols = _windows_of(xp[images], filter.shape, rows, ow, strides, dilations)
        out[images, rows] = np.matmul(cols, kernel).reshape(out[images, rows].shape)
    return out


def _pool_setup(op, shape, ksize, strides, padding, data_format):
    k = _spatial(op, "ksize", ksize, data_format)
    s = _spatial(op, "strides", strides, data_format)
    oh, ow, p = _geometry(op, shape, k, s, (1, 1), padding, None)
    return k, s, oh, ow, p


def _pool_infer(op, t, ksize, strides, padding, data_format):
    n, h, w, c = _nhwc_type(op, t, data_format)
    _, _, oh, ow, _ = _pool_setup(op, (n, h, w, c), ksize, strides, padding, data_format)
    return TensorType(_layout_shape(n, oh, ow, c, data_format), t.dtype)


_POOL_ATTRS = (
    Attr("ksize", "ints", (1, 2, 2, 1), doc="window size per axis, [1, kh, kw, 1] in NHWC"),
    Attr("strides", "ints", (1, 2, 2, 1), doc="window step per axis, [1, sh, sw, 1] in NHWC"),
    Attr("padding", "choice", "VALID", choices=("SAME", "VALID")),
    Attr("data_format", "choice", "NHWC", choices=_LAYOUTS),
)
_NO_DILATION = (1, 1)


def _pool_windows(op, value, ksize, strides, padding, data_format):
    """``value`` as NHWC and the geometry of its pooling windows: ``(x, k, s, oh, ow, pads)``."""
    x = _to_nhwc(value, data_format)
    return (x, *_pool_setup(op, x.shape, ksize, strides, padding, data_format))


# Pooling runs one of two ways, both exact (max is exact; sums differ from each other only by
# rounding). Small windows: one strided pass over the output per kernel offset, kh * kw passes in
# all, over a padded copy of the input; fastest when that is little. Large windows: separable
# block scans (blocks/windows.py), a few passes over the input and the output whatever the window
# size, padding never materialised. The loop is taken while its passes and its padded copy cost
# no more than the scans' passes.
_SCAN_PASSES = 12


def _pool_loops(x, k, oh, ow, p):
    """True when the per-offset loop is the cheaper way to pool NHWC ``x`` with windows ``k``."""
    n, h, w, c = x.shape
    padded = (h + p[0] + p[1]) * (w + p[2] + p[3]) if any(p) else 0
    return k[0] * k[1] * oh * ow + padded <= _SCAN_PASSES * (h * w + oh * ow)


def _pool_plans(x, k, s, oh, ow, p):
    """The windows along height and width (blocks/windows.py)."""
    return (windows.axis_plan(x.shape[1], k[0], s[0], p[0], oh),
            windows.axis_plan(x.shape[2], k[1], s[1], p[2], ow))


def _pool_reduce(ufunc, x, k, s, oh, ow, p, fill, dtype=None):
    """``ufunc`` (np.maximum, np.add) folded over each window of NHWC ``x``: [N, oh, ow, C], as
    ``dtype`` (x's by default). Padded entries never count (``fill`` is ufunc's identity)."""
    dtype = x.dtype if dtype is None else np.dtype(dtype)
    if not (oh and ow):
        return np.empty((x.shape[0], oh, ow, x.shape[3]), dtype)
    if not _pool_loops(x, k, oh, ow, p):
        ph, pw = _pool_plans(x, k, s, oh, ow, p)
        rows = windows.reduce(ufunc, x, 2, pw, fill, dtype, "the pooling windows along the width")
        return windows.reduce(ufunc, rows, 1, ph, fill, dtype, "the pooling windows along the height")
    xp = _pad(x, p, fill)
    out = xp[_offset(0, 0, oh, ow, s, _NO_DILATION)].astype(dtype)
    for i in range(k[0]):
        for j in range(k[1]):
            if i or j:
                ufunc(out, xp[_offset(i, j, oh, ow, s, _NO_DILATION)], out=out)
    return out


def _lowest(dtype):
    return -np.inf if dtype.kind == "f" else np.iinfo(dtype).min


def _max_pool_grad_loops(g, out, x, k, s, oh, ow, p):
    """MaxPool's gradient by kernel offsets: each window's g goes to the first offset, in
    row-major order, whose entry equals the window's max."""
    # The padding is NaN for floats, which equals nothing: a window whose real max is -inf gives
    # its gradient to its first real -inf, never to the padding (TensorFlow never looks there).
    xp = _pad(x, p, np.nan if x.dtype.kind == "f" else _lowest(x.dtype))
    zero = _ZERO[g.dtype]
    rest = g

    def share(i, j):
        nonlocal rest
        hit = xp[_offset(i, j, oh, ow, s, _NO_DILATION)] == out
        take = np.where(hit, rest, zero)
        rest = np.where(hit, zero, rest)
        return take

    return _col2im(share, x.shape, k, oh, ow, p, s, _NO_DILATION, g.dtype)


def _max_pool_grad_scans(g, out, x, k, s, oh, ow, p):
    """MaxPool's gradient by scans: the first max of each window found along its rows (the first
    column reaching each row's max), then down its rows (the first row reaching the window's
    max): the first max in row-major order. Time linear in the input and output sizes."""
    n, h, w, c = x.shape
    ph, pw = _pool_plans(x, k, s, oh, ow, p)
    lowest = _lowest(x.dtype)
    row_max, col = windows.max_first_index(x, 2, pw, lowest, "the max-pooling windows along the width")
    win_max, row = windows.max_first_index(row_max, 1, ph, lowest,
                                           "the max-pooling windows along the height")
    del row_max
    col = np.take_along_axis(col, row, axis=1)
    reserve((n, oh, ow, c), np.int64, "the max-pooling gradient's targets")
    # Flat positions of the chosen entries in [N, H, W, C].
    target = row
    target *= w
    target += col
    del col
    target *= c
    target += np.arange(c)
    target += (np.arange(n) * (h * w * c)).reshape(n, 1, 1, 1)
    hit = win_max == out  # a NaN max equals nothing: its gradient is dropped, as by the loops
    reserve(x.shape, g.dtype, "the max-pooling gradient")
    gx = np.zeros(x.shape, g.dtype)
    flat = gx.reshape(-1)
    picked, values = (target, g) if hit.all() else (target[hit], g[hit])
    if k[0] <= s[0] and k[1] <= s[1]:  # windows do not overlap: every entry is chosen once at most
        flat[picked.reshape(-1)] = values.reshape(-1)
    else:
        np.add.at(flat, picked.reshape(-1), values.reshape(-1))
    return gx


@block("MaxPool", category="nn_ops")
class MaxPool:
    """Maximum over 2-D windows of ``input`` (NHWC), per channel.

    ``ksize`` and ``strides`` have 4 entries in the layout's order, 1 for batch and channels
    (``[1, kh, kw, 1]`` for NHWC). VALID takes only full windows; SAME gives
    ``ceil(size / stride)`` outputs per axis with TensorFlow's padding (the odd entry after),
    and padded entries never count as the maximum. The gradient goes to the maximum of each
    window; when several entries tie, all of it goes to the first in row-major window order, as
    TensorFlow's MaxPoolGrad (overlapping windows add up). A window holding a NaN has a NaN
    maximum and sends no gradient back.

    Time is linear in the input and output sizes whatever the window size: small windows take
    one pass per kernel offset, large ones separable block scans (van Herk / Gil-Werman).
    """

    inputs = (Input("input", dtype="number"),)
    outputs = (Output("output"),)
    attrs = _POOL_ATTRS
    grad_rule = """
        dinput = each window's g routed to the window's max; overlapping windows add up
        on a tie all of it goes to the first max in row-major window order (not split)
        """

    def infer(input, *, ksize, strides, padding, data_format):
        return _pool_infer("MaxPool", input, ksize, strides, padding, data_format)

    def forward(input, *, ksize, strides, padding, data_format):
        x, k, s, oh, ow, p = _pool_windows("MaxPool", input, ksize, strides, padding, data_format)
        return _from_nhwc(_pool_reduce(np.maximum, x, k, s, oh, ow, p, _lowest(x.dtype)), data_format)

    def vjp(g, out, input, *, ksize, strides, padding, data_format):
        x, k, s, oh, ow, p = _pool_windows("MaxPool", input, ksize, strides, padding, data_format)
        out, g = _to_nhwc(out, data_format), _to_nhwc(g, data_format)
        if not (oh and ow):
            gx = np.zeros(x.shape, g.dtype)
        elif _pool_loops(x, k, oh, ow, p):
            gx = _max_pool_grad_loops(g, out, x, k, s, oh, ow, p)
        else:
            gx = _max_pool_grad_scans(g, out, x, k, s, oh, ow, p)
        return (_from_nhwc(gx, data_format),)


@lru_cache(maxsize=256)
def _window_counts(h, w, k, s, p, oh, ow, dtype):
    """[oh, ow, 1]: how many real (unpadded) entries each window covers, as ``dtype``."""
    def axis(size, k, s, before, out):
        start = np.arange(out) * s - before
        return np.minimum(start + k, size) - np.maximum(start, 0)
    counts = np.multiply.outer(axis(h, k[0], s[0], p[0], oh), axis(w, k[1], s[1], p[2], ow))
    counts = counts.astype(dtype)[:, :, None]
    counts.setflags(write=False)
    return counts


def _window_sizes(x, k, s, oh, ow, p, dtype=None):
    """What AvgPool divides by: the real entries per window ([oh, ow, 1]), or k's area without
    padding; as ``dtype`` (x's by default)."""
    dtype = x.dtype if dtype is None else np.dtype(dtype)
    if any(p):
        return _window_counts(x.shape[1], x.shape[2], k, s, p, oh, ow, dtype)
    return dtype.type(k[0] * k[1])


def _sum_dtype(dtype):
    """Window sums of float16 are taken in float32 (float16 runs out of digits after 2048)."""
    return np.dtype(np.float32) if dtype == np.float16 else dtype


@block("AvgPool", category="nn_ops")
class AvgPool:
    """Mean over 2-D windows of ``value`` (NHWC), per channel.

    ``ksize`` and ``strides`` have 4 entries in the layout's order, 1 for batch and channels
    (``[1, kh, kw, 1]`` for NHWC). VALID takes only full windows; SAME gives
    ``ceil(size / stride)`` outputs per axis with TensorFlow's padding (the odd entry after), and
    a window that reaches into the padding averages only its real entries, as TensorFlow. The
    gradient spreads each output's cotangent evenly over the real entries of its window.

    Time is linear in the input and output sizes whatever the window size (block scans of
    partial sums for large windows, each sum over at most one window's length of entries).
    """

    inputs = (Input("value", dtype="float"),)
    outputs = (Output("output"),)
    attrs = _POOL_ATTRS
    grad_rule = """
        dvalue = each window's g / n, spread over its n real (unpadded) entries
        overlapping windows add up
        """

    def infer(value, *, ksize, strides, padding, data_format):
        return _pool_infer("AvgPool", value, ksize, strides, padding, data_format)

    def forward(value, *, ksize, strides, padding, data_format):
        x, k, s, oh, ow, p = _pool_windows("AvgPool", value, ksize, strides, padding, data_format)
        acc = _sum_dtype(x.dtype)
        out = _pool_reduce(np.add, x, k, s, oh, ow, p, 0, acc)
        if oh and ow:
            out /= _window_sizes(x, k, s, oh, ow, p, acc)
        return _from_nhwc(out.astype(x.dtype, copy=False), data_format)

    def vjp(g, out, value, *, ksize, strides, padding, data_format):
        x, k, s, oh, ow, p = _pool_windows("AvgPool", value, ksize, strides, padding, data_format)
        share = _to_nhwc(g, data_format) / _window_sizes(x, k, s, oh, ow, p, g.dtype)
        if not (oh and ow) or _pool_loops(x, k, oh, ow, p):
            gx = _col2im(lambda i, j: share, x.shape, k, oh, ow, p, s, _NO_DILATION, g.dtype)
        else:
            ph, pw = _pool_plans(x, k, s, oh, ow, p)
            acc = _sum_dtype(g.dtype)
            rows = windows.reduce_sum_adjoint(share, 1, ph, acc, "the average-pooling gradient along the height")
            gx = windows.reduce_sum_adjoint(rows, 2, pw, acc, "the average-pooling gradient along the width")
            gx = gx.astype(g.dtype, copy=False)
        return (_from_nhwc(gx, data_format),)


# --------------------------------------------------------------------------------------------
# Dropout and top-k


@block("Dropout", category="nn_ops")
class Dropout:
    """Randomly zeroes entries of ``x`` with probability ``rate`` and scales the rest by 1/(1-rate).

    As TensorFlow's ``tf.nn.dropout``: each entry is kept when a uniform draw in [0, 1) is at
    least ``rate``, and kept entries are multiplied by ``1 / (1 - rate)`` so the expected value
    is unchanged. ``rate`` is in [0, 1). With ``training`` false (evaluation) the block is the
    identity. The mask is drawn from the block's seeded generator: the same ``seed`` gives the
    same masks run after run. The gradient passes through the kept entries, scaled by
    ``1 / (1 - rate)``, using the same mask (the backward pass redraws it from an identically
    seeded generator instead of storing it).
    """

    inputs = (Input("x", dtype="float"),)
    outputs = (Output("output"),)
    attrs = (
        Attr("rate", "float", 0.5, min=0.0, max=1.0, doc="probability of dropping an entry, in [0, 1)"),
        Attr("training", "bool", True, doc="false: pass x through unchanged"),
        Attr("seed", "int", 0, doc="seed of the dropout masks"),
    )
    grad_rule = """
        dx = g ⊙ mask / (1 − rate), with the forward pass's mask (1 where kept, 0 where dropped)
        dx = g when training is false or rate is 0
        """

    def infer(x, *, rate, training, seed):
        if rate >= 1:
            raise ShapeError(f"Dropout: rate must be in [0, 1), got {rate} (a rate of 1 drops everything)")
        return _like(x)

    def forward(x, *, rate, training, seed, rng):
        if not training or rate == 0:
            return x
        out = x * x.dtype.type(1 / (1 - rate))
        out *= _dropout_draws(rng, x.shape) >= rate
        return out

    def vjp(g, out, x, *, rate, training, seed, rng):
        if not training or rate == 0:
            return (g,)
        gx = g * g.dtype.type(1 / (1 - rate))
        gx *= _dropout_draws(rng, x.shape) >= rate
        return (gx,)


def _dropout_draws(rng, shape):
    """The uniform draws Dropout compares with its rate (float32, whatever x's dtype)."""
    reserve(shape, np.float32, "Dropout's random draws")
    return rng.random(shape, dtype=np.float32)


def _scalar_k(op, k, default=None):
    if k is None:
        if default is None:
            raise ShapeError(f"{op}: k must be given")
        return default
    arr = np.asarray(k)
    if arr.ndim != 0 or arr.dtype.kind not in "iu":
        raise ShapeError(f"{op}: k must be a single integer, got {arr.tolist()!r}")
    k = int(arr)
    if k < 0:
        raise ShapeError(f"{op}: k must be at least 0, got {k}")
    return k


@block("TopK", category="nn_ops", aliases=("TopKV2",))
class TopK:
    """The ``k`` largest entries of ``input`` along its last axis, and their indices.

    As TensorFlow's ``tf.math.top_k``: ``values`` and ``indices`` have the input's shape with the
    last size replaced by ``k`` (default 1, at most that size). With ``sorted`` the values come
    in descending order; equal values come lower index first. Without ``sorted`` they come in
    the order of their indices. ``indices`` are int32 and not differentiable. The gradient of
    ``values`` is scattered back to the chosen positions (0 elsewhere).
    """

    inputs = (Input("input", dtype="number"),
              Input("k", dtype="int", static=True, optional=True, default=1, doc="how many entries"))
    outputs = (Output("values"), Output("indices", differentiable=False))
    attrs = (Attr("sorted", "bool", True, doc="values in descending order (else in index order)"),)
    grad_rule = """
        g: the gradient arriving at values (indices carry none)
        dinput = g scattered back to the positions in indices along the last axis, 0 elsewhere
        """

    def infer(input, k, *, sorted):
        _no_bool("TopK", input)
        k = _scalar_k("TopK", k, 1)
        if input.rank < 1:
            raise ShapeError(f"TopK needs an input of rank 1 or more, got {input}")
        n = input.shape[-1]
        if n is not None and n < k:
            raise ShapeError(f"TopK: input {_fmt(input.shape)} must have at least k = {k} entries in its "
                             f"last axis, has {n}")
        shape = input.shape[:-1] + (k,)
        return TensorType(shape, input.dtype), TensorType(shape, np.int32)

    def forward(input, k, *, sorted):
        k = _scalar_k("TopK", k, 1)
        n = input.shape[-1] if input.ndim else 0
        if input.ndim < 1 or n < k:
            raise ShapeError(f"TopK: input {list(input.shape)} must have at least k = {k} entries in its "
                             f"last axis")
        # A stable ascending sort of the reversed rows, read backwards: descending values, and
        # ties in increasing index order (any dtype, no negation).
        reserve(input.shape, np.intp, "TopK's sort order")
        order = np.argsort(input[..., ::-1], axis=-1, kind="stable")[..., :n - k - 1 if k < n else None:-1]
        indices = np.subtract(n - 1, order, dtype=np.int32)
        if not sorted:
            indices.sort(axis=-1)
        return np.take_along_axis(input, indices, axis=-1), indices

    def vjp(g, out, input, k, *, sorted):
        if g[0] is None:
            return None, None
        gx = np.zeros(input.shape, g[0].dtype)
        np.put_along_axis(gx, out[1], g[0], axis=-1)
        return gx, None


@block("InTopK", category="nn_ops", aliases=("InTopKV2",))
class InTopK:
    """Whether each row's target class is among the ``k`` largest ``predictions`` (bool [batch]).

    As TensorFlow's ``tf.math.in_top_k``: ``predictions`` is [batch, classes] and ``targets``
    [batch] holds class indices. Row i is true when fewer than ``k`` classes have a prediction
    strictly greater than ``predictions[i, targets[i]]``, so classes tied at the boundary all
    count as in the top k. A target outside ``[0, classes)`` or a row with a non-finite
    prediction gives false. The output is boolean and not differentiable.
    """

    inputs = (Input("predictions", dtype="float"), Input("targets", dtype="int"),
              Input("k", dtype="int", static=True, doc="how many top classes count"))
    outputs = (Output("precision"),)

    def infer(predictions, targets, k):
        _scalar_k("InTopK", k)
        if predictions.rank != 2 or targets.rank != 1:
            raise ShapeError(f"InTopK needs [batch, classes] predictions and [batch] targets, got "
                             f"{predictions} and {targets}")
        a, b = predictions.shape[0], targets.shape[0]
        if a is not None and b is not None and a != b:
            raise ShapeError(f"InTopK: predictions {_fmt(predictions.shape)} and targets "
                             f"{_fmt(targets.shape)} differ in batch size")
        return TensorType((b if a is None else a,), np.bool_)

    def forward(predictions, targets, k):
        k = _scalar_k("InTopK", k)
        batch, classes = predictions.shape
        if targets.shape != (batch,):
            raise ShapeError(f"InTopK: predictions {list(predictions.shape)} and targets "
                             f"{list(targets.shape)} differ in batch size")
        if not classes:
            return np.zeros(batch, np.bool_)
        valid = (targets >= 0) & (targets < classes)
        target = predictions[np.arange(batch), np.where(valid, targets, 0)]
        above = np.count_nonzero(predictions > target[:, None], axis=1)
        valid &= np.isfinite(predictions).all(axis=1)
        valid &= above < k
        return valid
