"""nn_ops, softmax over the last axis: Softmax, LogSoftmax, and the row-wise exponentials they and
the softmax cross-entropy losses (nn_losses) share.

Imports only blockflow.spec and numpy.
"""
from __future__ import annotations

import numpy as np

from blockflow.spec import Input, Output, ShapeError, TensorType, block

from .common import einsum, reduce_max, reduce_min
from .fused import writable_like


# Largest row sum of exp(x) the unshifted fast path takes (see exp_rows): 1/tiny, far enough
# below the largest float that exp(log(s)) cannot overflow, whichever way log(s) rounds.
_FAST_SUM_MAX = {np.dtype(n): np.dtype(n).type(1 / np.finfo(n).tiny)
                 for n in ("float16", "float32", "float64")}


# Tensors up to this many elements take the shifted softmax formula directly (see exp_rows).
_SMALL = 4096


def exp_rows(x, log=True):
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
        # the ufuncs' reductions, as x.max and e.sum make them, without the methods' Python layer
        hi = reduce_max(x, axis=-1, keepdims=True)
        e = np.subtract(x, hi)
        np.exp(e, out=e)
        s = _add_reduce(e, axis=-1, keepdims=True)
        return e, s, hi, np.log(s)
    with np.errstate(over="ignore", under="ignore"):
        e = np.exp(x)
        s = e.sum(axis=-1, keepdims=True)
    if s.size and reduce_min(s, axis=None) >= 1 and reduce_max(s, axis=None) < _FAST_SUM_MAX[x.dtype]:
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


_add_reduce = np.add.reduce


def log_softmax(x):
    e, s, hi, lo = exp_rows(x)
    np.subtract(x, hi, out=e)
    e -= lo
    return e


def _float_rank1(op, t):
    if t.rank < 1:
        raise ShapeError(f"{op} works along the last axis and needs a tensor of rank 1 or more, got {t}")
    return TensorType(t.shape, t.dtype)


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
        e, s, _, _ = exp_rows(logits, log=False)
        e /= s
        return e

    # new arrays, never a view of logits: the runtime may keep logits' array for the next run
    forward.fresh_result = True

    def vjp(g, out, logits):
        # gx = out * (g - sum(g * out)) in three passes: the row dot products are read without
        # writing the products out, then one buffer is written and scaled in place.
        buf = np.subtract(g, einsum("...j,...j->...", g, out)[..., None])
        buf *= out
        return (buf,)

    vjp.fresh_result = True  # a new array (run/lower.py, _accumulate)
    vjp.reads = ("out",)  # not logits (run/lower.py, _in_place_slots)

    def vjp_into_g(g, out, logits):
        # the run's own cotangent: the same passes, written into its array
        if not writable_like(g, out):
            return Softmax.vjp(g, out, logits)
        np.subtract(g, einsum("...j,...j->...", g, out)[..., None], out=g)
        g *= out
        return (g,)

    vjp_into_g.fresh_result = True
    vjp_into_g.reads = vjp.reads
    vjp.into_g = vjp_into_g


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
        return log_softmax(logits)

    def vjp(g, out, logits):
        # gx = g - softmax * sum(g), with softmax = exp(out).
        p = np.exp(out)
        p *= g.sum(axis=-1, keepdims=True)
        np.subtract(g, p, out=p)
        return (p,)
