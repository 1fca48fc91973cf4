"""random_ops: seeded random tensors (normal, uniform, truncated normal, categorical, shuffle,
Bernoulli, Poisson, gamma).

Every block here draws from the ``rng`` the runtime hands to ``forward``: a numpy Generator
seeded from the block's ``seed`` attr, the run's step number and the node's id. So a run is
reproducible (same seed, step and node: the same draw), successive training steps draw afresh,
and two blocks with the same seed still draw differently. Unlike TF, seed 0 is not "pick a
random seed": every seed is deterministic. None of these blocks is differentiable: they cut the
gradient like StopGradient (integer outputs never carry one anyway).

Imports only blockflow.spec and numpy.
"""
from __future__ import annotations

import numpy as np

from blockflow.spec import Attr, Input, Output, ShapeError, TensorType, block, broadcast_shapes, reserve

from .common import broadcast_or_none, fmt_shape


_FLOATS = ("float16", "float32", "float64")
_SEED = Attr("seed", "int", 0, min=0,
             doc="with the run's step and the block's id, fixes the random stream (every seed is deterministic)")


def _float_dtype(default="float32"):
    return Attr("dtype", "dtype", default, choices=_FLOATS, doc="dtype of the samples")


def _shape_input(optional: bool, doc: str):
    return Input("shape", dtype="int", static=True, optional=optional, doc=doc)


def _dims(op: str, shape) -> tuple:
    """A static ``shape`` operand as a tuple of sizes; ShapeError unless it is a list of sizes >= 0."""
    s = np.asarray(shape)
    if s.ndim != 1 or (s.size and s.dtype.kind not in "iu"):
        raise ShapeError(f"{op}: shape must be a list of integer sizes such as [2, 3], got {s.tolist()!r}")
    dims = tuple(s.tolist())
    if any(d < 0 for d in dims):
        raise ShapeError(f"{op}: sizes must be at least 0, got {list(dims)}")
    return dims


def _infer_sample_shape(op: str, shape, params: dict) -> tuple:
    """The result shape of an elementwise sampler: ``shape`` when given (the parameters must
    broadcast to it), else the broadcast shape of the wired parameters (a scalar when none is)."""
    given = {k: p.shape for k, p in params.items() if p is not None}
    for k, p in params.items():
        if p is not None and p.dtype.kind not in "fiu":
            raise ShapeError(f"{op}: {k} must be a number, got {p.dtype.name}")
    if shape is None:
        try:
            return broadcast_shapes(*given.values()) if given else ()
        except ShapeError as exc:
            raise ShapeError(f"{op}: {' and '.join(given)}: {exc}") from None
    dims = _dims(op, shape)
    for k, s in given.items():
        try:
            b = broadcast_shapes(dims, s)
        except ShapeError:
            b = None
        if b is None or len(b) != len(dims) or any(x is not None and x != d for x, d in zip(b, dims)):
            raise ShapeError(f"{op}: {k} of shape {fmt_shape(s)} does not broadcast to shape {fmt_shape(dims)}")
    return dims


def _sample_shape(op: str, shape, *params) -> tuple:
    """``_infer_sample_shape`` on concrete arrays (None for an unwired parameter)."""
    if shape is None:
        given = [p.shape for p in params if p is not None]
        return np.broadcast_shapes(*given) if given else ()
    dims = tuple(np.reshape(shape, -1).tolist())
    for p in params:
        if p is not None and p.shape != dims and broadcast_or_none(dims, p.shape) != dims:
            raise ShapeError(f"{op}: a parameter of shape {fmt_shape(p.shape)} does not broadcast to shape "
                             f"{fmt_shape(dims)}")
    return dims


def _work_dtype(dtype: str):
    """numpy's samplers draw float32 or float64; float16 samples are drawn as float32 and cast."""
    return np.float64 if dtype == "float64" else np.float32


def _draws(op: str, size, work, dtype) -> None:
    """Reserve the draws of ``op`` when they are not the output itself (drawn wider, then cast)."""
    if np.dtype(work) != np.dtype(dtype):
        reserve(size, work, f"{op}'s draws (in {np.dtype(work).name}, before the cast to {np.dtype(dtype).name})")


def _scale_shift(z, loc, scale):
    """``z * scale + loc`` in place on the freshly drawn ``z`` (its dtype is kept)."""
    if scale is not None:
        z *= scale
    if loc is not None:
        z += loc
    return z


# --------------------------------------------------------------------------------------------
# Normal family


@block("RandomNormal", category="random_ops", aliases=("RandomStandardNormal",))
class RandomNormal:
    """Samples from a normal distribution N(mean, stddev²), seeded.

    TF's ``tf.random.normal(shape, mean=0, stddev=1, dtype, seed)``. ``mean`` and ``stddev`` are
    inputs (0 and 1 when unwired) so a diagram can wire tensors into them, e.g. a Gaussian-visible
    RBM's Gibbs step: they must broadcast to ``shape``. Unlike TF, ``shape`` may stay unwired: the
    samples then take the broadcast shape of ``mean`` and ``stddev`` (a scalar when both are unwired
    too), which follows an unknown batch size. Parameters of another float dtype are cast to
    ``dtype``.

    Not differentiable: no gradient reaches ``mean`` or ``stddev`` (TF would pass one through its
    ``z * stddev + mean``; draw ``RandomNormal`` with shape only and Multiply/Add it yourself for the
    reparameterisation trick).
    """

    inputs = (
        _shape_input(True, "sizes of the result; unwired: the broadcast shape of mean and stddev"),
        Input("mean", dtype="float", optional=True, doc="0 when unwired"),
        Input("stddev", dtype="float", optional=True, doc="1 when unwired"),
    )
    outputs = (Output("output", doc="the samples", differentiable=False),)
    attrs = (_float_dtype(), _SEED)

    def infer(shape, mean, stddev, *, dtype, seed):
        return TensorType(_infer_sample_shape("RandomNormal", shape, {"mean": mean, "stddev": stddev}), dtype)

    def forward(shape, mean, stddev, *, dtype, seed, rng):
        if mean is None and stddev is None:
            size = () if shape is None else tuple(np.reshape(shape, -1).tolist())
            _draws("RandomNormal", size, _work_dtype(dtype), dtype)
            z = rng.standard_normal(size, dtype=_work_dtype(dtype))
        else:
            size = _sample_shape("RandomNormal", shape, mean, stddev)
            _draws("RandomNormal", size, _work_dtype(dtype), dtype)
            z = rng.standard_normal(size, dtype=_work_dtype(dtype))
            z = _scale_shift(z, mean, stddev)
        return z if z.dtype.name == dtype else np.asarray(z, dtype=dtype)


def _truncated_standard_normal(rng, size, work):
    """Standard normal samples with every draw beyond ±2 drawn again (TF's truncation)."""
    z = rng.standard_normal(size, dtype=work)
    flat = z.reshape(-1)  # a view: z is contiguous
    idx = np.flatnonzero(np.abs(flat) > 2.0)
    while idx.size:  # ~4.6% redrawn per round
        again = rng.standard_normal(idx.size, dtype=work)
        flat[idx] = again
        idx = idx[np.abs(again) > 2.0]
    return z


@block("TruncatedNormal", category="random_ops")
class TruncatedNormal:
    """Normal samples cut at two standard deviations (redrawn until within), seeded.

    TF's ``tf.random.truncated_normal(shape, mean=0, stddev=1, dtype, seed)``: values more than two
    standard deviations from ``mean`` are dropped and drawn again, so every sample lies in
    ``[mean - 2 stddev, mean + 2 stddev]`` (its standard deviation is about 0.88 ``stddev``). The
    usual weight initialiser. ``mean``/``stddev`` (0 and 1 when unwired) and an unwired ``shape``
    work as in RandomNormal.

    Not differentiable.
    """

    inputs = RandomNormal.inputs
    outputs = (Output("output", doc="the samples", differentiable=False),)
    attrs = (_float_dtype(), _SEED)

    def infer(shape, mean, stddev, *, dtype, seed):
        return TensorType(_infer_sample_shape("TruncatedNormal", shape, {"mean": mean, "stddev": stddev}),
                          dtype)

    def forward(shape, mean, stddev, *, dtype, seed, rng):
        size = _sample_shape("TruncatedNormal", shape, mean, stddev)
        _draws("TruncatedNormal", size, _work_dtype(dtype), dtype)
        z = _scale_shift(_truncated_standard_normal(rng, size, _work_dtype(dtype)), mean, stddev)
        return z if z.dtype.name == dtype else np.asarray(z, dtype=dtype)


# --------------------------------------------------------------------------------------------
# Uniform


@block("RandomUniform", category="random_ops", aliases=("RandomUniformInt",))
class RandomUniform:
    """Samples uniformly from [minval, maxval), seeded; integers too.

    TF's ``tf.random.uniform(shape, minval=0, maxval=None, dtype, seed)``. For a float ``dtype``
    the range defaults to [0, 1) and the samples are ``minval + u * (maxval - minval)``. For an
    integer ``dtype`` (TF's RandomUniformInt) ``maxval`` must be wired, both bounds must be
    integers, every ``minval < maxval``, and each integer of [minval, maxval) is equally likely.
    The bounds must broadcast to ``shape``; an unwired ``shape`` takes their broadcast shape (as in
    RandomNormal).

    Not differentiable (integer samples never are).
    """

    inputs = (
        _shape_input(True, "sizes of the result; unwired: the broadcast shape of minval and maxval"),
        Input("minval", dtype="number", optional=True, doc="lower bound (included); 0 when unwired"),
        Input("maxval", dtype="number", optional=True,
              doc="upper bound (excluded); 1 when unwired, required for an integer dtype"),
    )
    outputs = (Output("output", doc="the samples", differentiable=False),)
    attrs = (Attr("dtype", "dtype", "float32", choices=_FLOATS + ("int32", "int64"), doc="dtype of the samples"),
             _SEED)

    def infer(shape, minval, maxval, *, dtype, seed):
        out = _infer_sample_shape("RandomUniform", shape, {"minval": minval, "maxval": maxval})
        if dtype in ("int32", "int64"):
            if maxval is None:
                raise ShapeError(f"RandomUniform: an integer dtype ({dtype}) needs maxval: the samples are "
                                 f"drawn from [minval, maxval)")
            for k, p in (("minval", minval), ("maxval", maxval)):
                if p is not None and p.dtype.kind not in "iu":
                    raise ShapeError(f"RandomUniform: {k} must be an integer for dtype {dtype}, got {p.dtype.name}")
        return TensorType(out, dtype)

    def forward(shape, minval, maxval, *, dtype, seed, rng):
        size = _sample_shape("RandomUniform", shape, minval, maxval)
        if dtype in ("int32", "int64"):
            lo = 0 if minval is None else minval
            if maxval is None:
                raise ValueError(f"RandomUniform: an integer dtype ({dtype}) needs maxval")
            if np.any(maxval <= lo):
                raise ValueError(f"RandomUniform: needs minval < maxval, got minval {np.asarray(lo).tolist()} "
                                 f"and maxval {np.asarray(maxval).tolist()}")
            return rng.integers(lo, maxval, size=size, dtype=dtype)
        _draws("RandomUniform", size, _work_dtype(dtype), dtype)
        u = rng.random(size, dtype=_work_dtype(dtype))
        if dtype == "float16":  # multiples of 2^-11, so that rounding to float16 keeps u < 1
            u *= 2048.0
            np.floor(u, out=u)
            u *= 1 / 2048
        if maxval is not None:
            u *= maxval if minval is None else maxval - minval
        elif minval is not None:
            u *= 1 - minval
        if minval is not None:
            u += minval
        return u if u.dtype.name == dtype else np.asarray(u, dtype=dtype)


# --------------------------------------------------------------------------------------------
# Discrete samplers


@block("Multinomial", category="random_ops", aliases=("Categorical",))
class Multinomial:
    """Draws class indices from softmax(logits), num_samples per row, seeded.

    TF's ``tf.random.categorical(logits, num_samples, dtype, seed)`` (the op ``Multinomial``):
    ``logits`` is ``[batch, classes]`` unnormalised log-probabilities; the result is
    ``[batch, num_samples]`` class indices, each drawn independently with probability
    ``softmax(logits[b])``. As TF's kernel, non-finite logits (-inf, and also +inf and NaN) give
    their class probability 0, and a row without a finite logit has nothing to draw from: its
    samples are the out-of-range index ``classes``. Sampling inverts the CDF of each row (cumulative
    probabilities in float64) at uniform draws, all rows at once.

    Not differentiable (integer output).
    """

    inputs = (
        Input("logits", dtype="float", doc="[batch, classes] unnormalised log-probabilities"),
        Input("num_samples", dtype="int", static=True, doc="samples per row (a scalar)"),
    )
    outputs = (Output("output", doc="[batch, num_samples] class indices", differentiable=False),)
    attrs = (Attr("output_dtype", "dtype", "int64", choices=("int32", "int64")), _SEED)

    def infer(logits, num_samples, *, output_dtype, seed):
        if logits.rank != 2:
            raise ShapeError(f"Multinomial: logits must be [batch, classes], got {logits.describe()}")
        if logits.shape[1] == 0:
            raise ShapeError("Multinomial: logits has no classes to draw from")
        n = np.asarray(num_samples)
        if n.ndim != 0 or n.dtype.kind not in "iu" or n < 0:
            raise ShapeError(f"Multinomial: num_samples must be an integer of at least 0, got {n.tolist()!r}")
        return TensorType((logits.shape[0], int(n)), output_dtype)

    def forward(logits, num_samples, *, output_dtype, seed, rng):
        batch, classes = logits.shape
        n = int(num_samples)
        reserve((batch, classes), np.float64, "Multinomial's probabilities (float64)")
        reserve((batch, classes), np.float64, "Multinomial's cumulative probabilities")
        reserve((batch, n), np.float64, "Multinomial's uniform draws")
        reserve((batch, n), np.intp, "Multinomial's drawn indices")
        x = logits.astype(np.float64)  # a copy we own
        finite = np.isfinite(x)
        all_finite = finite.all()
        if not all_finite:
            x[~finite] = -np.inf
        top = x.max(axis=1, keepdims=True)
        if not all_finite:
            top[~np.isfinite(top)] = 0.0  # rows without a finite logit
        x -= top
        p = np.exp(x, out=x)  # exp(-inf) = 0: non-finite logits have probability 0
        cdf = np.cumsum(p, axis=1)
        total = cdf[:, -1:].copy()
        empty = total[:, 0] == 0
        if empty.any():
            total[empty] = 1.0  # an all-zero row stays zero: every draw falls past its end
        cdf /= total  # each row now ends in exactly 1
        # One searchsorted for all rows: row r's CDF and draws shifted into [r, r+1].
        offset = np.arange(batch, dtype=np.float64)[:, None]
        cdf += offset
        u = rng.random((batch, n))
        u += offset
        idx = np.searchsorted(cdf.ravel(), u.ravel(), side="right").reshape(batch, n)
        idx -= np.arange(0, batch * classes, classes, dtype=idx.dtype)[:, None]
        # Rounding can put a draw at its row's end: it belongs to the last class with p > 0.
        last = classes - 1 - np.argmax(p[:, ::-1] > 0, axis=1)
        last[empty] = classes
        np.minimum(idx, last[:, None], out=idx)
        return idx.astype(output_dtype, copy=False)


@block("RandomShuffle", category="random_ops")
class RandomShuffle:
    """Shuffles a tensor along its first axis, seeded.

    TF's ``tf.random.shuffle(value, seed)``: ``value[i]`` goes to a random position, every
    permutation equally likely; the other axes are untouched. A scalar comes back as it is.

    Not differentiable.
    """

    inputs = (Input("value", doc="the tensor whose first axis is permuted"),)
    outputs = (Output("output", doc="value with its first axis shuffled", differentiable=False),)
    attrs = (_SEED,)

    def infer(value, *, seed):
        return value

    def forward(value, *, seed, rng):
        if value.ndim == 0:
            return value
        return value[rng.permutation(value.shape[0])]


@block("Bernoulli", category="random_ops")
class Bernoulli:
    """Samples 1 with probability probs and 0 otherwise, elementwise, seeded.

    The sampler of an RBM's Gibbs step (``h = Bernoulli(Sigmoid(v W + b))``), written in TF1 as
    ``relu(sign(probs - random_uniform(shape(probs))))``: each element is 1 where a uniform draw
    ``u`` in [0, 1) is below ``probs``, else 0, in the dtype of ``probs`` (0 for ``probs <= 0``,
    1 for ``probs >= 1``, 0 for NaN). The result has the shape of ``probs``.

    Not differentiable: TF gives no gradient through the sample either (wrap a Gibbs chain's
    sample in StopGradient when the page is trained by contrastive divergence).
    """

    inputs = (Input("probs", dtype="float", doc="probability of a 1, elementwise"),)
    outputs = (Output("output", doc="0/1 samples of the dtype of probs", differentiable=False),)
    attrs = (_SEED,)

    def infer(probs, *, seed):
        return probs

    def forward(probs, *, seed, rng):
        if probs.dtype == np.float32 or probs.dtype == np.float64:
            # the draws' array becomes the result (the comparison's 0/1 written over the draws):
            # no second array, and nothing to reserve besides the output the runtime counts
            u = rng.random(probs.shape, dtype=probs.dtype)
            return np.less(u, probs, out=u)
        reserve(probs.shape, np.float32, "Bernoulli's uniform draws")
        u = rng.random(probs.shape, dtype=np.float32)
        return (u < probs).astype(probs.dtype)


@block("RandomPoisson", category="random_ops", aliases=("RandomPoissonV2",))
class RandomPoisson:
    """Poisson samples with rates lam: shape + lam's shape of them, seeded.

    TF's ``tf.random.poisson(shape, lam, dtype, seed)``: the result has shape ``shape + lam.shape``,
    ``shape`` samples for each rate in ``lam``; each is a count k with probability
    ``lam^k e^(-lam) / k!``. The counts come as ``dtype``, a float by default as in TF. Rates must
    be at least 0 (a rate of 0 gives 0).

    Not differentiable.
    """

    inputs = (
        _shape_input(False, "number of samples per rate (the leading sizes of the result)"),
        Input("lam", dtype="number", doc="the rates (at least 0)"),
    )
    outputs = (Output("output", doc="counts, of shape shape + lam.shape", differentiable=False),)
    attrs = (Attr("dtype", "dtype", "float32", choices=_FLOATS + ("int32", "int64"), doc="dtype of the counts"),
             _SEED)

    def infer(shape, lam, *, dtype, seed):
        return TensorType(_dims("RandomPoisson", shape) + lam.shape, dtype)

    def forward(shape, lam, *, dtype, seed, rng):
        if not (lam >= 0).all():
            raise ValueError(f"RandomPoisson: rates must be at least 0, got {np.min(lam)}")
        size = tuple(np.reshape(shape, -1).tolist()) + lam.shape
        _draws("RandomPoisson", size, np.int64, dtype)
        k = rng.poisson(lam, size=size)
        return k.astype(dtype, copy=False)


@block("RandomGamma", category="random_ops")
class RandomGamma:
    """Gamma(alpha, beta) samples: shape + broadcast(alpha, beta) shape of them, seeded.

    TF's ``tf.random.gamma(shape, alpha, beta=1, dtype, seed)``: ``alpha`` is the concentration
    (shape parameter) and ``beta`` the rate (inverse scale), so the mean is ``alpha / beta`` and
    the variance ``alpha / beta²``. The result has shape ``shape + broadcast(alpha, beta).shape``:
    ``shape`` samples for each parameter pair. ``alpha`` and ``beta`` must be positive.

    Not differentiable (TF differentiates the samples with respect to ``alpha`` and ``beta`` by
    implicit reparameterisation; this block does not).
    """

    inputs = (
        _shape_input(False, "number of samples per distribution (the leading sizes of the result)"),
        Input("alpha", dtype="float", doc="concentration, positive"),
        Input("beta", dtype="float", optional=True, doc="rate (inverse scale), positive; 1 when unwired"),
    )
    outputs = (Output("output", doc="samples, of shape shape + broadcast(alpha, beta).shape",
                      differentiable=False),)
    attrs = (_float_dtype(), _SEED)

    def infer(shape, alpha, beta, *, dtype, seed):
        params = alpha.shape if beta is None else broadcast_shapes(alpha.shape, beta.shape)
        return TensorType(_dims("RandomGamma", shape) + params, dtype)

    def forward(shape, alpha, beta, *, dtype, seed, rng):
        if not (alpha > 0).all():
            raise ValueError(f"RandomGamma: alpha must be positive, got {np.min(alpha)}")
        params = alpha.shape
        if beta is not None:
            if not (beta > 0).all():
                raise ValueError(f"RandomGamma: beta must be positive, got {np.min(beta)}")
            params = np.broadcast_shapes(alpha.shape, beta.shape)
        size = tuple(np.reshape(shape, -1).tolist()) + params
        work = _work_dtype(dtype)
        _draws("RandomGamma", size, work, dtype)
        g = rng.standard_gamma(alpha.astype(work, copy=False), size=size, dtype=work)
        if beta is not None:
            g /= beta
        return g if g.dtype.name == dtype else np.asarray(g, dtype=dtype)
