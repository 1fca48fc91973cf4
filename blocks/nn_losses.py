"""nn_ops, losses: SoftmaxCrossEntropyWithLogits, SparseSoftmaxCrossEntropyWithLogits,
SigmoidCrossEntropyWithLogits, L2Loss.

Imports only blockflow.spec and numpy.
"""
from __future__ import annotations

import numpy as np

from blockflow.spec import Input, Output, ShapeError, TensorType, block

from .common import ONE, ZERO, einsum, fmt_shape, reduce_max, reduce_min, shared_batch, typed
from .nn_softmax import exp_rows, log_softmax


_HALF = typed(0.5)


def _merge(op, what_a, a, what_b, b):
    """The one shape two shapes with unknown sizes can both be; ShapeError naming both when none."""
    if len(a) != len(b) or any(x is not None and y is not None and x != y for x, y in zip(a, b)):
        raise ShapeError(f"{op}: {what_a} {fmt_shape(a)} and {what_b} {fmt_shape(b)} must have the same shape")
    return tuple(y if x is None else x for x, y in zip(a, b))


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
                raise ShapeError(f"SoftmaxCrossEntropyWithLogits: features {fmt_shape(features.shape)} and "
                                 f"labels {fmt_shape(labels.shape)} differ in shape")
            shape.append(b if a is None else a)
        return TensorType(shape[:1], features.dtype), TensorType(shape, features.dtype)

    def forward(features, labels):
        if features.shape != labels.shape:
            raise ShapeError(f"SoftmaxCrossEntropyWithLogits: features {list(features.shape)} and "
                             f"labels {list(labels.shape)} differ in shape")
        e, s, hi, lo = exp_rows(features)
        # -log_softmax = (hi - x) + lo: every term is >= 0 up to rounding, so the weighted row
        # sums below do not cancel and a loss close to 0 keeps its relative accuracy.
        nlp = np.subtract(hi, features)
        nlp += lo
        loss = einsum("ij,ij->i", labels, nlp)
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
            g_labels = log_softmax(features)
            g_labels *= g_col
            np.negative(g_labels, out=g_labels)
        return g_features, g_labels

    vjp.fresh_result = True  # new arrays, one per input (run/lower.py: a known cotangent is not handed on)


def _check_labels(op, labels, classes):
    """ValueError naming the first row whose label is not a class index in [0, classes)."""
    if labels.size and (reduce_min(labels, axis=None) < 0 or reduce_max(labels, axis=None) >= classes):
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
        batch = shared_batch("SparseSoftmaxCrossEntropyWithLogits", features, labels, ("features", "labels"))
        return (TensorType((batch,), features.dtype),
                TensorType((batch, features.shape[1]), features.dtype))

    def forward(features, labels):
        batch, classes = features.shape
        if labels.shape != (batch,):
            raise ShapeError(f"SparseSoftmaxCrossEntropyWithLogits: features {list(features.shape)} and "
                             f"labels {list(labels.shape)} differ in batch size")
        _check_labels("SparseSoftmaxCrossEntropyWithLogits", labels, classes)
        e, s, hi, lo = exp_rows(features)
        rows = np.arange(batch)
        # -log_softmax = (hi - x) + lo, both terms >= 0 up to rounding (see SoftmaxCrossEntropy).
        loss = np.subtract(hi[:, 0], features[rows, labels])
        loss += lo[:, 0]
        e /= s
        e[rows, labels] -= ONE[e.dtype]
        return loss, e

    def vjp(g, out, features, labels):
        if g[0] is None:
            return None, None
        return out[1] * g[0][:, None], None

    vjp.fresh_result = True  # a new array


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
        t = np.maximum(logits, ZERO[logits.dtype]) - logits * labels
        t += np.log1p(np.exp(np.negative(np.abs(logits))))
        return t

    def vjp(g, out, labels, logits, *, needs):
        g_labels = g_logits = None
        if needs[1]:
            # sigmoid(x) = 1 / (1 + e) for x >= 0 and e / (1 + e) below, with e = exp(-|x|) <= 1.
            e = np.exp(np.negative(np.abs(logits)))
            num = np.where(logits >= 0, ONE[e.dtype], e)
            e += ONE[e.dtype]
            num /= e
            num -= labels
            num *= g
            g_logits = num
        if needs[0]:
            g_labels = np.negative(g * logits)
        return g_labels, g_logits


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
