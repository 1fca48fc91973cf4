"""state_ops: Variable, the block whose value lives in the project and is trained.

Imports only blockflow.spec and numpy.
"""
from __future__ import annotations

import numpy as np

from blockflow.spec import Attr, Input, Output, ShapeError, TensorType, block, broadcast_shapes

from .common import declare

_INITIALIZERS = ("zeros", "ones", "value", "random_normal", "random_uniform", "glorot_uniform",
                 "glorot_normal")


def _fan_in_out(shape):
    if len(shape) == 0:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    receptive = int(np.prod(shape[:-2])) if len(shape) > 2 else 1
    return shape[-2] * receptive, shape[-1] * receptive


# Random initial values are drawn in float64 (the stream a seed has always given) and written into
# the Variable's dtype this many at a time: drawing in pieces continues the same stream, and no
# float64 copy of a large Variable is ever made.
_DRAW_PIECE = 1 << 20


def _drawn(draw, shape, dtype):
    """An array of ``shape`` and ``dtype`` filled, in order, by ``draw(count)`` (float64 draws)."""
    out = np.empty(shape, dtype)
    flat = out.reshape(-1)
    for start in range(0, flat.size, _DRAW_PIECE):
        stop = min(start + _DRAW_PIECE, flat.size)
        flat[start:stop] = draw(stop - start)
    return out


@block("Variable", category="state_ops", aliases=("VariableV2",))
class Variable:
    """A trainable tensor whose value is stored in the project file.

    Its first value comes from ``initializer``: zeros, ones, the given ``initial_value``, or a
    seeded random draw (``random_normal`` and ``random_uniform`` use ``stddev``/``scale``;
    ``glorot_uniform``/``glorot_normal`` scale by fan-in and fan-out). Training updates the stored
    value; "reset" draws the first value again, identically for the same seed. Optimizers only
    change Variables whose ``trainable`` flag is set.
    """

    role = "variable"
    outputs = (Output("ref", doc="the current value"),)
    attrs = (
        Attr("shape", "shape", (), doc="the variable's shape (no unknown sizes)"),
        Attr("dtype", "dtype", "float32", choices=("float16", "float32", "float64")),
        Attr("initializer", "choice", "zeros", choices=_INITIALIZERS),
        Attr("initial_value", "tensor", None, fits="dtype", doc="used when initializer is 'value'"),
        Attr("stddev", "float", 1.0, min=0.0, doc="standard deviation of random_normal"),
        Attr("scale", "float", 1.0, min=0.0, doc="random_uniform draws from [-scale, scale)"),
        Attr("seed", "int", 0, min=0, doc="seed of the random initializers"),
        Attr("trainable", "bool", True, doc="whether optimizers update it"),
    )

    def infer(*, shape, dtype, initializer, initial_value, stddev, scale, seed, trainable):
        if initializer == "value":
            if initial_value is None:
                raise ShapeError("initializer 'value' needs an initial_value")
            return TensorType(np.shape(initial_value), dtype)
        if any(d is None for d in shape):
            raise ShapeError(f"a Variable's shape must be fully known, got {list(shape)}")
        return TensorType(shape, dtype)

    def initial(*, shape, dtype, initializer, initial_value, stddev, scale, seed, trainable):
        if initializer == "value":
            return np.array(initial_value, dtype=dtype)
        if initializer in ("zeros", "ones"):
            return (np.zeros if initializer == "zeros" else np.ones)(shape, dtype=dtype)
        rng = np.random.default_rng(seed)
        if initializer == "random_normal":
            return _drawn(lambda n: rng.normal(0.0, stddev, size=n), shape, dtype)
        if initializer == "random_uniform":
            return _drawn(lambda n: rng.uniform(-scale, scale, size=n), shape, dtype)
        fan_in, fan_out = _fan_in_out(shape)
        if initializer == "glorot_uniform":
            limit = np.sqrt(6.0 / (fan_in + fan_out))
            return _drawn(lambda n: rng.uniform(-limit, limit, size=n), shape, dtype)
        return _drawn(lambda n: rng.normal(0.0, np.sqrt(2.0 / (fan_in + fan_out)), size=n), shape, dtype)

    def forward(value, *, shape, dtype, initializer, initial_value, stddev, scale, seed, trainable):
        return value


_ASSIGN_DOC_TAIL = """
    ``value`` must have the Variable's shape or broadcast to it (a Variable's shape never changes).
    Like every block that updates state, the new value is committed when the run finishes
    without error: within the run, blocks that read the Variable directly see the value it had
    when the run started, and blocks wired from ``output_ref`` see the new value (TensorFlow's
    "read after the assign", made explicit by the wire). Not differentiable.
"""


def _assign_infer(ref, value):
    try:
        shape = broadcast_shapes(ref.shape, value.shape)
    except ShapeError:
        shape = None
    if shape is None or len(shape) != len(ref.shape) or any(
            r is not None and s is not None and r != s for r, s in zip(ref.shape, shape)):
        raise ShapeError(f"the value {value} does not fit the Variable {ref}")
    return ref


def _assign(name, update, summary):
    """A block that sets the Variable wired into ``ref`` to ``update(ref, value)``; ``summary`` is
    the first line of its docstring."""
    def forward(ref, value):
        new = update(ref, value)
        return new, {"ref": new}

    return declare(name, f"{summary}\n{_ASSIGN_DOC_TAIL}", category="state_ops", module=__name__,
                   inputs=(Input("ref", ref=True), Input("value")),
                   outputs=(Output("output_ref", doc="the Variable's new value"),),
                   infer=_assign_infer, forward=forward)


def _replaced(ref, value):
    """Assign's new value: ``value`` broadcast to the Variable's shape, in its dtype (a copy)."""
    return np.array(np.broadcast_to(value, ref.shape), dtype=ref.dtype)


Assign = _assign("Assign", _replaced,
                 "Sets a Variable (wired into ``ref``) to ``value``; ``output_ref`` is the new value.")
AssignAdd = _assign("AssignAdd", np.add,
                    "Adds ``value`` to a Variable (wired into ``ref``); ``output_ref`` is the new value.")
AssignSub = _assign("AssignSub", np.subtract, "Subtracts ``value`` from a Variable (wired into ``ref``); "
                                              "``output_ref`` is the new value.")
