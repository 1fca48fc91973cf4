"""Constant folding: ONNX nodes whose inputs are all known, computed once while importing.

Exporters write a model's parameters and shapes as small computations: the onnx package's own
test models make every weight with ``ConstantOfShape``, PyTorch computes a Reshape's target from
``Shape -> Gather -> Concat``. Folding them gives the Variables their values and the static
inputs (a Reshape's shape, a Pad's widths) their numbers. Each function follows the ONNX
operator's definition; the size of what it would make is checked before it is made (a tiny file
must not be able to ask for a huge constant).
"""
from __future__ import annotations

import functools
import contextvars
import math

import numpy as np

from blockflow.budget import format_size
from blockflow.importing.onnx_read import DTYPES
from blockflow.io import rules

__all__ = ["FOLDERS", "FoldRefused", "fold"]


class FoldRefused(ValueError):
    """A folding would make an array over the limits, or its inputs are malformed: the message."""


#: the bytes a fold may still make (the import's memory budget less what it holds), set by fold()
_ROOM: contextvars.ContextVar = contextvars.ContextVar("fold_room", default=None)


def _size_ok(shape, what: str, dtype=None) -> tuple:
    """``shape`` as ints, checked against the limits, and, with ``dtype``, against the memory
    left, before the array is made."""
    shape = tuple(int(d) for d in shape)
    if any(d < 0 for d in shape):
        raise FoldRefused(f"{what}: a negative size in {list(shape)}")
    if len(shape) > rules.MAX_NDIM:
        raise FoldRefused(f"{what}: {len(shape)} dimensions; the limit is {rules.MAX_NDIM}")
    n = math.prod(shape)
    if n > rules.MAX_ARRAY_ELEMENTS:
        raise FoldRefused(f"{what} would have {n:,} elements; the limit for one array is "
                          f"{rules.MAX_ARRAY_ELEMENTS:,}")
    room = _ROOM.get()
    if dtype is not None and room is not None and n * np.dtype(dtype).itemsize > room:
        raise FoldRefused(f"{what} would take {format_size(n * np.dtype(dtype).itemsize)}, more than the memory "
                          f"budget leaves ({format_size(max(room, 0))}; docs/limits.md)")
    return shape


def _ints(a, what: str) -> list:
    a = np.asarray(a)
    if a.dtype.kind not in "iu" or a.ndim > 1:
        raise FoldRefused(f"{what} must be a 1-D integer tensor, got {a.dtype.name}{list(a.shape)}")
    return [int(v) for v in a.reshape(-1)]


def _axis(axis: int, rank: int, what: str) -> int:
    if not -rank <= axis < max(rank, 1):
        raise FoldRefused(f"{what}: axis {axis} is out of range for rank {rank}")
    return axis % rank if rank else 0


def _constant(node, ins, opset):
    a = node.attrs
    if "value" in a and isinstance(a["value"], np.ndarray):
        return [a["value"]]
    if "value_float" in a:
        return [np.asarray(a["value_float"], np.float32)]
    if "value_floats" in a:
        return [np.asarray(a["value_floats"], np.float32)]
    if "value_int" in a:
        return [np.asarray(a["value_int"], np.int64)]
    if "value_ints" in a:
        return [np.asarray(a["value_ints"], np.int64)]
    raise FoldRefused("a Constant without a dense value (sparse or string values are not read)")


def _constant_of_shape(node, ins, opset):
    value = node.attrs.get("value")
    fill = np.zeros(1, np.float32) if value is None else np.asarray(value).reshape(-1)
    if fill.size != 1:
        raise FoldRefused(f"its value must hold one element, holds {fill.size}")
    shape = _size_ok(_ints(ins[0], "its shape input"), "the constant", fill.dtype)
    return [np.full(shape, fill[0], fill.dtype)]


def _shape(node, ins, opset):
    dims = list(np.shape(ins[0]))
    start, end = node.attrs.get("start", 0), node.attrs.get("end", len(dims))
    return [np.asarray(dims[slice(start, end)], np.int64)]


def _gather(node, ins, opset):
    data, idx = np.asarray(ins[0]), np.asarray(ins[1])
    axis = _axis(node.attrs.get("axis", 0), data.ndim, "Gather")
    n = data.shape[axis]
    if idx.dtype.kind not in "iu" or ((idx < -n) | (idx >= n)).any():
        raise FoldRefused(f"Gather: an index is out of range for size {n}")
    _size_ok(data.shape[:axis] + idx.shape + data.shape[axis + 1:], "Gather's result", data.dtype)
    return [np.take(data, np.where(idx < 0, idx + n, idx), axis=axis)]


def _unsqueeze(node, ins, opset):
    axes = node.attrs.get("axes") if opset < 13 else _ints(ins[1], "Unsqueeze's axes")
    x = np.asarray(ins[0])
    rank = x.ndim + len(axes)
    out = x
    for ax in sorted(_axis(a, rank, "Unsqueeze") for a in axes):
        out = np.expand_dims(out, ax)
    return [out]


def _squeeze(node, ins, opset):
    x = np.asarray(ins[0])
    axes = node.attrs.get("axes") if opset < 13 else (_ints(ins[1], "Squeeze's axes") if len(ins) > 1
                                                       and ins[1] is not None else None)
    if axes is None:
        return [np.squeeze(x)]
    axes = tuple(_axis(a, x.ndim, "Squeeze") for a in axes)
    if any(x.shape[a] != 1 for a in axes):
        raise FoldRefused(f"Squeeze: an axis of {list(axes)} is not of size 1 in {list(x.shape)}")
    return [np.squeeze(x, axis=axes)]


def _concat(node, ins, opset):
    arrays = [np.asarray(a) for a in ins]
    if not arrays or any(a.ndim != arrays[0].ndim or a.ndim == 0 for a in arrays):
        raise FoldRefused("Concat needs one or more inputs of one rank, at least 1")
    axis = _axis(node.attrs.get("axis", 0), arrays[0].ndim, "Concat")
    shape = list(arrays[0].shape)
    shape[axis] = sum(a.shape[axis] for a in arrays)
    _size_ok(shape, "Concat's result", np.result_type(*arrays))
    try:
        return [np.concatenate(arrays, axis=axis)]
    except ValueError as exc:
        raise FoldRefused(f"Concat: {exc}") from None


def reshape_target(in_shape, shape, allowzero: bool = False) -> tuple:
    """ONNX Reshape's output shape for an input of ``in_shape`` (0 copies the input's size at
    that position unless ``allowzero``; -1 is inferred). FoldRefused when it cannot be."""
    out = []
    for i, d in enumerate(shape):
        if d == 0 and not allowzero:
            if i >= len(in_shape):
                raise FoldRefused(f"Reshape: a 0 at position {i} has no input size to copy")
            d = in_shape[i]
        out.append(d)
    if out.count(-1) > 1 or any(d < -1 for d in out):
        raise FoldRefused(f"Reshape: the shape {list(shape)} is not a shape")
    total = math.prod(in_shape)
    if -1 in out:
        rest = math.prod(d for d in out if d != -1)
        if rest == 0 or total % rest:
            raise FoldRefused(f"Reshape: {list(in_shape)} cannot become {list(shape)}")
        out[out.index(-1)] = total // rest
    if math.prod(out) != total:
        raise FoldRefused(f"Reshape: {list(in_shape)} cannot become {list(shape)}")
    return tuple(out)


def _reshape(node, ins, opset):
    x = np.asarray(ins[0])
    target = reshape_target(x.shape, _ints(ins[1], "Reshape's shape"), bool(node.attrs.get("allowzero", 0)))
    return [x.reshape(target)]


def flatten_axis(axis, rank: int, opset: int) -> tuple[int | None, str]:
    """(Flatten's ``axis`` as the split point 0..rank, "") or (None, why not): ONNX allows
    -rank..rank, the negative ones only from opset 11."""
    lowest = -rank if opset >= 11 else 0
    if not lowest <= int(axis) <= rank:
        return None, (f"Flatten's axis {axis} is out of range for an input of rank {rank} "
                      f"(from {lowest} to {rank}{'' if lowest else ' before opset 11'})")
    return (int(axis) + rank if axis < 0 else int(axis)), ""   # -1 is the last axis, not the end


def _flatten(node, ins, opset):
    x = np.asarray(ins[0])
    axis, why = flatten_axis(node.attrs.get("axis", 1), x.ndim, opset)
    if axis is None:
        raise FoldRefused(why)
    return [x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))]


def _transpose(node, ins, opset):
    x = np.asarray(ins[0])
    perm = node.attrs.get("perm") or tuple(reversed(range(x.ndim)))
    if sorted(perm) != list(range(x.ndim)):
        raise FoldRefused(f"Transpose: perm {list(perm)} is not a permutation of {x.ndim} axes")
    _size_ok(x.shape, "Transpose's result", x.dtype)
    return [np.transpose(x, perm).copy(order="C")]


def _cast(node, ins, opset):
    to = DTYPES.get(node.attrs.get("to"))
    if to is None:
        raise FoldRefused(f"Cast: target type {node.attrs.get('to')} is not one a project holds")
    _size_ok(np.shape(ins[0]), "Cast's result", to)   # int8 to float64 takes 8 times the bytes
    return [np.asarray(ins[0]).astype(to)]


def _slice(node, ins, opset):
    x = np.asarray(ins[0])
    if opset < 10:
        starts, ends = node.attrs.get("starts", ()), node.attrs.get("ends", ())
        axes, steps = node.attrs.get("axes"), None
    else:
        starts, ends = _ints(ins[1], "Slice's starts"), _ints(ins[2], "Slice's ends")
        axes = _ints(ins[3], "Slice's axes") if len(ins) > 3 and ins[3] is not None else None
        steps = _ints(ins[4], "Slice's steps") if len(ins) > 4 and ins[4] is not None else None
    axes = list(range(len(starts))) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    index = [slice(None)] * x.ndim
    for s, e, a, st in zip(starts, ends, axes, steps):
        if st == 0:
            raise FoldRefused("Slice: a step of 0")
        index[_axis(a, x.ndim, "Slice")] = slice(s, e, st)
    return [x[tuple(index)]]


def _elementwise(fn):
    def fold_it(node, ins, opset):
        arrays = [np.asarray(a) for a in ins]
        try:
            shape = np.broadcast_shapes(*(a.shape for a in arrays))
        except ValueError as exc:
            raise FoldRefused(f"{node.op}: {exc}") from None
        dtype = np.dtype(bool) if node.op in _COMPARE else np.result_type(*arrays)
        # broadcasting makes the result, not the inputs, the size: [N, 1] + [1, N] is N * N
        _size_ok(shape, f"{node.op}'s result", dtype)
        with np.errstate(all="ignore"):
            out = fn(*arrays)
        return [np.asarray(out, dtype=dtype)]
    return fold_it


def _int_div(a, b):
    if a.dtype.kind in "iu":
        if (b == 0).any():
            raise FoldRefused("Div: an integer division by zero")
        q, r = np.floor_divide(a, b), np.remainder(a, b)
        # toward zero, in integers (a / b in float64 would round an int64 beyond 2**53)
        return (q + ((r != 0) & ((a < 0) != (b < 0)))).astype(np.result_type(a, b))
    return a / b


_COMPARE = {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Not", "And", "Or", "Xor"}


def _where(node, ins, opset):
    cond, x, y = (np.asarray(a) for a in ins)
    try:
        shape = np.broadcast_shapes(cond.shape, x.shape, y.shape)
    except ValueError as exc:
        raise FoldRefused(f"Where: {exc}") from None
    dtype = np.result_type(x, y)
    _size_ok(shape, "Where's result", dtype)
    return [np.where(cond.astype(bool), x, y).astype(dtype, copy=False)]


def _mod(node, ins, opset):
    a, b = np.asarray(ins[0]), np.asarray(ins[1])
    if a.dtype.kind in "iu" and (b == 0).any():
        raise FoldRefused("Mod: an integer remainder by zero")
    return _elementwise(np.fmod if node.attrs.get("fmod", 0) else np.mod)(node, [a, b], opset)


def _cast_like(node, ins, opset):
    _size_ok(np.shape(ins[0]), "CastLike's result", np.asarray(ins[1]).dtype)
    return [np.asarray(ins[0]).astype(np.asarray(ins[1]).dtype)]


def _range(node, ins, opset):
    if len(ins) != 3 or any(a is None or np.size(a) != 1 for a in ins):
        raise FoldRefused("Range needs three scalars: start, limit, delta")
    start, limit, delta = (np.asarray(a).reshape(()) for a in ins)
    if delta == 0 or not all(np.isfinite([float(start), float(limit), float(delta)])):
        raise FoldRefused("Range: a delta of 0, or a bound that is not finite")
    count = max(int(math.ceil((float(limit) - float(start)) / float(delta))), 0)
    _size_ok((count,), "Range's result", np.float64)   # arange's float steps, before the cast
    return [(start + np.arange(count) * delta).astype(np.result_type(start, limit, delta))]


def _expand(node, ins, opset):
    x = np.asarray(ins[0])
    try:
        shape = np.broadcast_shapes(x.shape, tuple(_ints(ins[1], "Expand's shape")))
    except ValueError as exc:
        raise FoldRefused(f"Expand: {exc}") from None
    return [np.broadcast_to(x, _size_ok(shape, "Expand's result", x.dtype)).copy()]


def _tile(node, ins, opset):
    x = np.asarray(ins[0])
    reps = _ints(ins[1], "Tile's repeats")
    if len(reps) != x.ndim:
        raise FoldRefused(f"Tile: {len(reps)} repeats for rank {x.ndim}")
    _size_ok([d * r for d, r in zip(x.shape, reps)], "Tile's result", x.dtype)
    return [np.tile(x, reps)]


def _identity(node, ins, opset):
    return [ins[0]]


FOLDERS = {
    "Constant": _constant, "ConstantOfShape": _constant_of_shape, "Shape": _shape,
    "Size": lambda node, ins, opset: [np.asarray(np.size(ins[0]), np.int64)],
    "Gather": _gather, "Unsqueeze": _unsqueeze, "Squeeze": _squeeze, "Concat": _concat,
    "Reshape": _reshape, "Flatten": _flatten, "Transpose": _transpose, "Cast": _cast, "Slice": _slice,
    "Identity": _identity, "Range": _range, "Expand": _expand, "Tile": _tile,
    "Add": _elementwise(np.add), "Sub": _elementwise(np.subtract), "Mul": _elementwise(np.multiply),
    "Div": _elementwise(_int_div), "Neg": _elementwise(np.negative),
    "Equal": _elementwise(np.equal), "Less": _elementwise(np.less), "Greater": _elementwise(np.greater),
    "Sqrt": _elementwise(np.sqrt), "Floor": _elementwise(np.floor), "Ceil": _elementwise(np.ceil),
    # the shape arithmetic of ONNX's function bodies (Attention's, for one) picks and compares sizes
    "LessOrEqual": _elementwise(np.less_equal), "GreaterOrEqual": _elementwise(np.greater_equal),
    "Not": _elementwise(np.logical_not), "And": _elementwise(np.logical_and),
    "Or": _elementwise(np.logical_or), "Xor": _elementwise(np.logical_xor),
    "Max": _elementwise(lambda *a: functools.reduce(np.maximum, a)),
    "Min": _elementwise(lambda *a: functools.reduce(np.minimum, a)), "Abs": _elementwise(np.abs),
    "Where": _where, "Mod": _mod, "CastLike": _cast_like,
}


def _fold_in_room(room, folder, node, ins, opset):
    # set in a copy of the caller's context that goes with the fold: a Ctrl-C landing between a
    # set and the try that would undo it cannot leave the room behind
    _ROOM.set(room)
    return folder(node, ins, opset)


def fold(node, ins: list, opset: int, room: int | None = None) -> list:
    """The outputs of ``node`` from its known inputs ``ins`` (None for an omitted optional one);
    ``room``: the bytes the results may take. FoldRefused when a result would be over the limits
    or the room (checked before it is made), or the inputs do not fit the op."""
    out = contextvars.copy_context().run(_fold_in_room, room, FOLDERS[node.op], node, ins, opset)
    for a in out:
        _size_ok(np.shape(a), f"{node.op}'s result")
    return [np.asarray(a) for a in out]
