"""array_ops, constants, placeholders and the identity-like blocks: Const, Placeholder, Identity,
StopGradient, PreventGradient, EnsureShape, IdentityN.

Imports only blockflow.spec and numpy.
"""
from __future__ import annotations

import numpy as np

from blockflow.spec import Attr, Input, InputList, Output, OutputList, ShapeError, TensorType, block

from .common import fmt_shape, merge_shapes


@block("Const", category="array_ops")
class Const:
    """A constant tensor, given as ``value`` and cast to ``dtype``."""

    outputs = (Output("output"),)
    attrs = (
        Attr("value", "tensor", 0.0, fits="dtype", doc="the constant's value (a number or nested list)"),
        Attr("dtype", "dtype", "float32"),
    )

    def infer(*, value, dtype):
        arr = np.asarray(value, dtype=dtype)
        return TensorType(arr.shape, arr.dtype, arr)

    def forward(*, value, dtype):
        return np.asarray(value, dtype=dtype)


@block("Placeholder", category="array_ops")
class Placeholder:
    """A tensor fed from outside the graph at run time (the page's saved feed by default).

    ``shape`` may hold -1 for sizes left open (a batch dimension); a feed must match the rest.
    """

    role = "placeholder"
    outputs = (Output("output"),)
    attrs = (
        Attr("dtype", "dtype", "float32"),
        Attr("shape", "shape", (), doc="expected shape; -1 for an open size"),
    )

    def infer(*, dtype, shape):
        return TensorType(shape, dtype)

    def forward(value, *, dtype, shape):
        if type(value) is np.ndarray and value.shape == shape and value.dtype == dtype:
            return value  # the common case, checked in one comparison
        arr = np.asarray(value)
        if arr.dtype.kind not in "biuf":
            raise ShapeError(f"a feed must be numeric, got dtype {arr.dtype}")
        if arr.ndim != len(shape) or any(d is not None and d != s for d, s in zip(shape, arr.shape)):
            raise ShapeError(f"feed has shape {list(arr.shape)}, the Placeholder expects {fmt_shape(shape)}")
        return arr.astype(dtype, copy=False)


@block("Identity", category="array_ops")
class Identity:
    """Returns its input unchanged; the gradient passes straight through."""

    inputs = (Input("input"),)
    outputs = (Output("output"),)
    grad_rule = "dinput = g"

    def infer(x):
        return x

    def forward(x):
        return x

    def vjp(g, out, x):
        return (g,)


@block("StopGradient", category="array_ops")
class StopGradient:
    """Outputs its input as-is; no gradient flows back through it.

    TensorFlow's ``tf.stop_gradient``: in the backward pass the block acts as a constant, so
    nothing upstream of it receives gradient through this path (stable softmax, EM's E-step,
    contrastive divergence's Gibbs sample, adversarial examples).
    """

    inputs = (Input("input"),)
    outputs = (Output("output"),)
    gradient = "stop"
    grad_rule = """
        identity forward; sends no gradient back: dinput = 0
        (in the backward pass the block is a constant)
        """

    def infer(x):
        return x

    def forward(x):
        return x


@block("PreventGradient", category="array_ops")
class PreventGradient:
    """Outputs its input as-is; differentiating through it is an error naming the block.

    TensorFlow's ``tf.raw_ops.PreventGradient``: a marker for values whose gradient is not
    implemented or must not be taken. The forward pass is the identity; a run that would send
    gradient back through the block fails, naming it and showing ``message``.
    """

    inputs = (Input("input"),)
    outputs = (Output("output"),)
    attrs = (Attr("message", "str", "", doc="shown in the error when a gradient reaches the block"),)
    gradient = "prevent"
    grad_rule = """
        identity forward; a gradient reaching it is an error naming the block (with message): no dinput
        """

    def infer(x, *, message):
        return x

    def forward(x, *, message):
        return x


@block("EnsureShape", category="array_ops")
class EnsureShape:
    """Passes ``input`` on, checking it has ``shape``; refines unknown sizes for later blocks.

    TensorFlow's ``tf.ensure_shape``: ``shape`` may hold -1 for sizes left open. At compile time
    the known sizes of the input and of ``shape`` must agree and the output gets the sizes either
    knows; at run time a tensor of another shape is an error. The gradient passes straight
    through.
    """

    inputs = (Input("input"),)
    outputs = (Output("output"),)
    attrs = (Attr("shape", "shape", (), doc="the expected shape; -1 for an open size"),)
    grad_rule = "dinput = g"

    def infer(x, *, shape):
        return TensorType(merge_shapes("EnsureShape", x.shape, shape, "input shape and expected shape"),
                          x.dtype, x.value)

    def forward(x, *, shape):
        s = x.shape
        if len(s) != len(shape) or any(d is not None and d != n for d, n in zip(shape, s)):
            raise ShapeError(f"EnsureShape: the input has shape {list(s)}, expected {fmt_shape(shape)}")
        return x

    def vjp(g, out, x, *, shape):
        return (g,)


@block("IdentityN", category="array_ops")
class IdentityN:
    """Returns each of its inputs unchanged, one output per input; gradients pass through.

    TensorFlow's ``tf.identity_n``: the inputs may differ in shape and dtype.
    """

    inputs = (InputList("input", dtype="any"),)
    outputs = (OutputList("output", count="input"),)
    grad_rule = "dinput[i] = g[i], the gradient of output[i] (zeros when output[i] gets none)"

    def infer(xs):
        return list(xs)

    def forward(xs):
        return list(xs)

    def vjp(g, out, xs, *, needs):
        return ([(gi if gi is not None else np.zeros_like(x)) if need else None
                 for gi, x, need in zip(g, xs, needs[0])],)
