"""nn_ops, activations (elementwise): Relu, Relu6, Elu, Selu, LeakyRelu, Softplus, Softsign, Gelu;
Dropout; Activation (the activation a layer's parameter chooses) and LearningPhase (training or
inference, for the layers that behave differently).

Imports only blockflow.spec and numpy.
"""
from __future__ import annotations

import operator

import numpy as np

from blockflow.spec import DTYPE_NAMES, Attr, Input, Output, ShapeError, TensorType, block, reserve

from .common import ONE, ZERO, like, no_bool, typed
from .fused import writable_like
from .math_unary import one_plus_erf

# Relu6's cap typed like its input (see common.ONE); Relu6 takes integer tensors too.
_SIX = {np.dtype(n): np.dtype(n).type(6) for n in DTYPE_NAMES if n != "bool"}


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946
_SELU_S = typed(_SELU_SCALE)
_SELU_SA = typed(_SELU_SCALE * _SELU_ALPHA)

_HALF = typed(0.5)
_INV_SQRT2 = typed(1.0 / np.sqrt(2.0))
_INV_SQRT_2PI = typed(1.0 / np.sqrt(2.0 * np.pi))
_SQRT_2_OVER_PI = typed(np.sqrt(2.0 / np.pi))
_GELU_C = typed(0.044715)
_GELU_3C = typed(3 * 0.044715)
_TWO = typed(2.0)


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
        return np.maximum(features, ZERO[features.dtype])

    def forward_with_out(features, *, out):
        return np.maximum(features, ZERO[features.dtype], out=out)

    # the variant the runtime calls to write the result into an input's array that nothing
    # reads again (run/overwrite.py, writes_out)
    forward.with_out = forward_with_out
    forward.fresh_result = True

    def vjp(g, out, features):
        return (g * (out > 0),)

    def vjp_into_g(g, out, features):
        if writable_like(g, out):  # the run's own cotangent: the gradient in its array
            return (np.multiply(g, out > 0, out=g),)
        return (g * (out > 0),)

    vjp.fresh_result = vjp_into_g.fresh_result = True  # new arrays, one per input (run/lower.py, _accumulate)
    vjp.reads = vjp_into_g.reads = ("out",)  # not features, which the runtime may overwrite
    vjp.into_g = vjp_into_g
    vjp.inline = {"features": (np.multiply, "g", (np.greater, "out", 0))}   # (blockflow/spec/inline.py)


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
        return no_bool("Relu6", features)

    def forward(features):
        return np.minimum(np.maximum(features, ZERO[features.dtype]), _SIX[features.dtype])

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
        return like(features)

    def forward(features):
        # exp(x) - 1 >= x for every x, so the max picks x exactly where x > 0; clipping the
        # argument at 0 keeps expm1 from overflowing on large positive entries. (No out=: a
        # 0-d input gives numpy scalars.)
        return np.maximum(np.expm1(np.minimum(features, ZERO[features.dtype])), features)

    def vjp(g, out, features):
        t = np.minimum(out, ZERO[out.dtype])
        t += ONE[out.dtype]
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
        return like(features)

    def forward(features):
        dt = features.dtype
        neg = np.expm1(np.minimum(features, ZERO[dt]))
        neg *= _SELU_SA[dt]
        pos = np.maximum(features, ZERO[dt])
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
        return like(features)

    def forward(features, *, alpha):
        return np.where(features > 0, features, features * features.dtype.type(alpha))

    def vjp(g, out, features, *, alpha):
        return (np.where(features > 0, g, g * g.dtype.type(alpha)),)


@block("Softplus", category="nn_ops")
class Softplus:
    """Smooth rectifier: ``log(1 + exp(features))``, computed without overflow.

    Accurate over the whole range: ``features`` for large inputs, ``exp(features)`` for very
    negative ones; float32 values are worked in float64 and rounded once (within half an ulp). The gradient is ``sigmoid(features)``, computed as
    ``exp(features - activations)``, which neither overflows nor underflows early.
    """

    inputs = (Input("features", dtype="float"),)
    outputs = (Output("activations"),)
    grad_rule = "dfeatures = g · sigmoid(features), computed as g · exp(features − activations)"

    def infer(features):
        return like(features)

    def forward(features):
        if (type(features) is np.ndarray and features.dtype == np.float32 and features.ndim
                and features.flags.c_contiguous):
            return _softplus_float32(features)
        return np.logaddexp(features, ZERO[features.dtype])

    def vjp(g, out, features):
        t = np.subtract(features, out)
        if type(t) is np.ndarray:  # exp in place: one fresh array, not two
            np.exp(t, out=t)
        else:
            t = np.exp(t)
        t *= g
        return (t,)

    vjp.fresh_result = True  # new arrays, one per input (run/lower.py, _accumulate)
    # written inline by the runtime on small tensors (blockflow/spec/inline.py)
    vjp.inline = {"features": (operator.imul, (np.exp, (np.subtract, "features", "out")), "g")}


#: values of float64 work at a time in _softplus_float32 (two such arrays, 1 MiB)
_SOFTPLUS_PIECE = 1 << 16


def _softplus_float32(x):
    """``max(x, 0) + log1p(exp(-|x|))`` worked in float64 and rounded once to float32: within
    half an ulp of the exact value everywhere (and a few float64 ulps: numpy's float64 exp and
    log1p are libm's or SIMD code by CPU, so a value at a float32 midpoint may round either way
    on another CPU), where np.logaddexp's float32 loop is within 1.4,
    and 3x faster where numpy vectorises float64 exp and log1p (28 against 88 us on 64x128; it
    does so with AVX-512), about as fast where it does not (155 against 142 us on an AMD EPYC
    with AVX2, where both are a libm call per value). The float64 work goes in pieces of _SOFTPLUS_PIECE values, so a large
    input needs no more than 1 MiB besides its result."""
    out = np.empty(x.shape, np.float32)
    flat_out = out.reshape(-1)
    flat = x.reshape(-1)  # a view: the caller gives a C-ordered array
    for start in range(0, flat.size, _SOFTPLUS_PIECE):
        t = flat[start:start + _SOFTPLUS_PIECE].astype(np.float64)
        kept = np.maximum(t, 0.0)
        np.abs(t, out=t)
        np.negative(t, out=t)
        np.exp(t, out=t)
        np.log1p(t, out=t)
        t += kept
        flat_out[start:start + _SOFTPLUS_PIECE] = t
    return out


@block("Softsign", category="nn_ops")
class Softsign:
    """Softsign: ``features / (1 + |features|)`` elementwise.

    The gradient is ``1 / (1 + |features|) ** 2``.
    """

    inputs = (Input("features", dtype="float"),)
    outputs = (Output("activations"),)
    grad_rule = "dfeatures = g / (1 + |features|)²"

    def infer(features):
        return like(features)

    def forward(features):
        d = np.abs(features)
        d += ONE[features.dtype]
        return features / d

    def vjp(g, out, features):
        d = np.abs(features)
        d += ONE[features.dtype]
        d *= d
        return (g / d,)


@block("Gelu", category="nn_ops")
class Gelu:
    """Gaussian error linear unit: ``features * Phi(features)``, Phi the standard normal CDF.

    As TensorFlow's Gelu (``tf.nn.gelu``): exactly ``0.5 * x * (1 + erf(x / sqrt(2)))`` (taken as
    ``erfc(-x / sqrt(2))`` in the left tail, as TensorFlow does, so that it does not cancel to 0),
    or with ``approximate`` the tanh form ``0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3)))``
    (``1 + tanh(u)`` taken as ``2 / (1 + exp(-2u))``, which does not cancel either).
    The gradient is ``Phi(x) + x * phi(x)`` (phi the normal density), or the derivative of the
    tanh form.
    """

    inputs = (Input("features", dtype="float"),)
    outputs = (Output("activations"),)
    attrs = (Attr("approximate", "bool", False, doc="use the tanh approximation instead of erf"),)
    grad_rule = """
        dfeatures = g · (Φ(x) + x · φ(x)), Φ(x) = (1 + erf(x/√2)) / 2, φ(x) = exp(−x²/2) / √(2π)
        with approximate: dfeatures = g · (½(1 + t) + ½ x (1 − t²) √(2/π) (1 + 3 · 0.044715 x²)),
        t = tanh(√(2/π) (x + 0.044715 x³)); x is features
        """

    def infer(features, *, approximate):
        return like(features)

    def forward(features, *, approximate):
        dt = features.dtype
        t = _gelu_tanh(features)[0] if approximate else one_plus_erf(features * _INV_SQRT2[dt])
        t *= features
        t *= _HALF[dt]
        return t

    def vjp(g, out, features, *, approximate):
        x, dt = features, features.dtype
        if approximate:
            t, rest = _gelu_tanh(x)  # 1 + tanh, 1 - tanh
            slope = x * x
            slope *= _GELU_3C[dt]
            slope += ONE[dt]
            slope *= _SQRT_2_OVER_PI[dt]
            slope *= x
            slope *= t
            slope *= rest
            t = t + slope
            t *= _HALF[dt]
        else:
            density = x * x
            density *= -_HALF[dt]
            density = np.exp(density)
            density *= _INV_SQRT_2PI[dt]
            density *= x
            t = one_plus_erf(x * _INV_SQRT2[dt])
            t *= _HALF[dt]
            t += density
        t *= g
        return (t,)


def _gelu_tanh(x):
    """``1 + t`` and ``1 - t`` for ``t = tanh(sqrt(2/pi) * (x + 0.044715 * x**3))``, the tanh form
    of Gelu, each without cancellation: ``2 / (1 + e)`` and ``2e / (1 + e)``, ``e = exp(-2|u|)``."""
    dt = x.dtype
    u = x * x
    u *= _GELU_C[dt]
    u += ONE[dt]
    u *= x
    u *= _SQRT_2_OVER_PI[dt]
    e = np.abs(u)
    e *= -_TWO[dt]
    e = np.exp(e)
    big = _TWO[dt] / (e + ONE[dt])
    small = big * e
    positive = u >= 0
    return np.where(positive, big, small), np.where(positive, small, big)


# --------------------------------------------------------------------------------------------
# Dropout


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
        return like(x)

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


# --------------------------------------------------------------------------------------------
# Activation (a chosen activation, for layers whose `activation` is a parameter) and LearningPhase

#: the activations Activation applies, by ``kind`` (Keras's names)
ACTIVATIONS = ("linear", "relu", "relu6", "leaky_relu", "elu", "selu", "gelu", "sigmoid", "tanh",
               "softplus", "softsign", "swish", "softmax", "log_softmax")
_LEAKY_ALPHA = 0.2


def _sigmoid(x):
    """The logistic function without overflow: 0.5 · (1 + tanh(x / 2))."""
    half = x.dtype.type(0.5)
    return half * (np.tanh(x * half) + x.dtype.type(1))


def _softmax(x):
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    e /= np.sum(e, axis=-1, keepdims=True)
    return e


def _activate(kind, x):
    """The activation ``kind`` of ``x`` (a float array), in x's dtype."""
    t = x.dtype.type
    if kind == "linear":
        return x
    if kind == "relu":
        return np.maximum(x, t(0))
    if kind == "relu6":
        return np.clip(x, t(0), t(6))
    if kind == "leaky_relu":
        return np.where(x > 0, x, x * t(_LEAKY_ALPHA))
    if kind == "elu":
        return np.where(x > 0, x, np.expm1(np.minimum(x, t(0))))
    if kind == "selu":
        return t(_SELU_SCALE) * np.where(x > 0, x, t(_SELU_ALPHA) * np.expm1(np.minimum(x, t(0))))
    if kind == "gelu":
        return x * one_plus_erf(x * t(1 / np.sqrt(2.0))) * t(0.5)
    if kind == "sigmoid":
        return _sigmoid(x)
    if kind == "tanh":
        return np.tanh(x)
    if kind == "softplus":
        return np.logaddexp(t(0), x)
    if kind == "softsign":
        return x / (t(1) + np.abs(x))
    if kind == "swish":
        return x * _sigmoid(x)
    if kind == "softmax":
        return _softmax(x)
    # log_softmax
    shifted = x - np.max(x, axis=-1, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=-1, keepdims=True))


def _activation_grad(kind, g, x, y):
    """The gradient of ``_activate(kind, x)`` (= ``y``) given the upstream gradient ``g``."""
    t = x.dtype.type
    if kind == "linear":
        return g
    if kind == "relu":
        return g * (x > 0)
    if kind == "relu6":
        return g * ((x > 0) & (x < 6))
    if kind == "leaky_relu":
        return g * np.where(x > 0, t(1), t(_LEAKY_ALPHA))
    if kind == "elu":
        return g * np.where(x > 0, t(1), y + t(1))
    if kind == "selu":
        return g * np.where(x > 0, t(_SELU_SCALE), y + t(_SELU_SCALE * _SELU_ALPHA))
    if kind == "gelu":
        cdf = one_plus_erf(x * t(1 / np.sqrt(2.0))) * t(0.5)
        return g * (cdf + x * np.exp(x * x * t(-0.5)) * t(1 / np.sqrt(2.0 * np.pi)))
    if kind == "sigmoid":
        return g * y * (t(1) - y)
    if kind == "tanh":
        return g * (t(1) - y * y)
    if kind == "softplus":
        return g * _sigmoid(x)
    if kind == "softsign":
        return g / np.square(t(1) + np.abs(x))
    if kind == "swish":
        s = _sigmoid(x)
        return g * (s + x * s * (t(1) - s))
    if kind == "softmax":
        return y * (g - np.sum(g * y, axis=-1, keepdims=True))
    # log_softmax
    return g - np.exp(y) * np.sum(g, axis=-1, keepdims=True)


@block("Activation", category="nn_ops")
class Activation:
    """Applies the activation named by ``kind`` to ``x``: what a layer's ``activation`` parameter
    chooses (Keras's names).

    ``linear`` (the identity), ``relu``, ``relu6``, ``leaky_relu`` (slope 0.2 below 0, as Keras),
    ``elu``, ``selu``, ``gelu`` (exact, with erf), ``sigmoid``, ``tanh``, ``softplus``,
    ``softsign``, ``swish`` (``x · sigmoid(x)``, also called SiLU) elementwise; ``softmax`` and
    ``log_softmax`` over the last axis. Each is the same function as its own block (Relu,
    Sigmoid, Softmax, ...), with the same gradient.
    """

    inputs = (Input("x", dtype="float"),)
    outputs = (Output("y"),)
    attrs = (Attr("kind", "choice", "linear", choices=ACTIVATIONS, doc="which activation"),)
    grad_rule = """
        dx = g · f'(x) for the elementwise kinds (relu: g where x > 0; sigmoid: g · y · (1 − y); ...)
        softmax: dx = y ⊙ (g − Σ g ⊙ y); log_softmax: dx = g − softmax(x) · Σ g (over the last axis)
        """

    def infer(x, *, kind):
        if kind in ("softmax", "log_softmax") and x.rank == 0:
            raise ShapeError(f"Activation: {kind} works over the last axis, so x needs at least one axis")
        return like(x)

    def forward(x, *, kind):
        with np.errstate(over="ignore", under="ignore"):
            return np.asarray(_activate(kind, x), dtype=x.dtype)

    def vjp(g, out, x, *, kind):
        with np.errstate(over="ignore", under="ignore"):
            return (np.asarray(_activation_grad(kind, g, x, out), dtype=x.dtype),)


@block("LearningPhase", category="nn_ops")
class LearningPhase:
    """True while the run trains, false while it evaluates: what Dropout and BatchNormalization
    layers ask to behave as in training or in inference.

    A run trains when it reads the ``train`` part of its data: every step of ``blockflow train``
    and of the editor's Train panel, a Run in the editor and ``blockflow run``. It evaluates when
    it reads the ``test`` part (or ``all``): the test evaluations of a training
    (``Trainer.evaluate``) and ``run(program, split="test")``. The value is a bool scalar known
    only when the run starts (never folded into the compiled program).
    """

    outputs = (Output("training", doc="true in training, false in inference"),)

    def infer():
        return TensorType((), "bool")

    def forward(*, data):
        return np.array(data.split == "train")
