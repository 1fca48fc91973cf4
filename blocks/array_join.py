"""array_ops, joining tensors and cutting them into pieces: Concat, Stack, Unstack, Split, SplitV.

Imports only blockflow.spec and numpy.
"""
from __future__ import annotations

import numpy as np

from blockflow.spec import Attr, Input, InputList, Output, OutputList, ShapeError, TensorType, block

from .common import fmt_shape, merge_shapes
from .folding import as_int, axis_in, fold, static_int, static_ints


@block("Concat", category="array_ops", aliases=("ConcatV2", "concat"))
class Concat:
    """Joins ``values`` end to end along ``axis``; the other sizes must agree.

    TensorFlow's ``tf.concat`` (op ConcatV2): every value has the same rank and dtype, ``axis``
    may be negative. The gradient is ``g`` cut back into pieces along ``axis`` (views of ``g``, no
    copies).
    """

    inputs = (InputList("values", doc="the tensors to join, of one rank and dtype"),
              Input("axis", dtype="int", static=True, doc="the axis to join along"))
    outputs = (Output("output"),)
    grad_rule = "dvalues[i] = the slice of g along axis where values[i] was placed"

    def infer(values, axis):
        first = values[0]
        if first.rank == 0:
            raise ShapeError("Concat: cannot join scalars (rank 0); Stack them instead")
        a = axis_in("Concat", static_int("Concat", "axis", axis), first.rank)
        shape = list(first.shape)
        total = 0
        for t in values:
            if t.rank != first.rank:
                raise ShapeError(f"Concat: values of shapes {fmt_shape(first.shape)} and {fmt_shape(t.shape)} "
                                 f"differ in rank")
            for i, (d, e) in enumerate(zip(shape, t.shape)):
                if i != a and e is not None:
                    if d is not None and d != e:
                        raise ShapeError(f"Concat: values of shapes {fmt_shape(first.shape)} and {fmt_shape(t.shape)} "
                                         f"differ on axis {i}; only axis {a}, the one joined along, may")
                    shape[i] = e
            total = None if total is None or t.shape[a] is None else total + t.shape[a]
        shape[a] = total
        out = TensorType(tuple(shape), first.dtype)
        return fold("Concat", out, Concat.forward, values, axis)

    def forward(values, axis):
        if len(values) == 1:
            return values[0]
        return np.concatenate(values, axis=as_int(axis))

    def vjp(g, out, values, axis, *, needs):
        a = as_int(axis) % g.ndim
        cts, start = [], 0
        lead = (slice(None),) * a
        for x, need in zip(values, needs[0]):
            stop = start + x.shape[a]
            cts.append(g[lead + (slice(start, stop),)] if need else None)
            start = stop
        return cts, None


@block("Stack", category="array_ops", aliases=("Pack", "stack"))
class Stack:
    """Stacks ``values`` of one shape into a tensor with a new axis ``axis`` of size len(values).

    TensorFlow's ``tf.stack`` (op Pack): ``axis`` is in [-rank-1, rank] of the values. The
    gradient of each value is its slice of ``g`` (a view).
    """

    inputs = (InputList("values", doc="the tensors to stack, all of one shape and dtype"),)
    outputs = (Output("output"),)
    attrs = (Attr("axis", "int", 0, doc="position of the new axis in the result"),)
    grad_rule = "dvalues[i] = g[..., i, ...], the i-th slice of g along axis"

    def infer(values, *, axis):
        shape = values[0].shape
        for t in values[1:]:
            shape = merge_shapes("Stack", shape, t.shape)
        a = axis_in("Stack", axis, len(shape) + 1)
        out = TensorType(shape[:a] + (len(values),) + shape[a:], values[0].dtype)
        return fold("Stack", out, Stack.forward, values, axis=axis)

    def forward(values, *, axis):
        return np.stack(values, axis=axis)

    def vjp(g, out, values, *, axis, needs):
        a = axis % g.ndim
        lead = (slice(None),) * a
        return ([g[lead + (i,)] if need else None for i, need in enumerate(needs[0])],)


# Each piece is an output port, drawn and wired on the canvas: a few thousand is already more than
# anyone can use, and an attr of 10^8 would make the compiler build 10^8 ports (minutes, then a
# MemoryError).
_MAX_PIECES = 4096


def _pieces_to_cotangent(g, x, axis, bounds):
    """The cotangent of a tensor cut along ``axis`` at ``bounds``, from its pieces' cotangents
    (None where a piece got no gradient): one concatenation, or zeros filled in."""
    if all(gi is not None for gi in g):
        return np.concatenate(g, axis=axis) if len(g) > 1 else g[0]
    gx = np.zeros(x.shape, x.dtype)
    lead = (slice(None),) * axis
    for gi, (start, stop) in zip(g, bounds):
        if gi is not None:
            gx[lead + (slice(start, stop),)] = gi
    return gx


@block("Unstack", category="array_ops", aliases=("Unpack", "unstack"))
class Unstack:
    """Cuts ``value`` along ``axis`` into ``num`` tensors, one per index, dropping that axis.

    TensorFlow's ``tf.unstack`` (op Unpack): the size of ``axis`` must be ``num``. The outputs are
    views of the input. The gradient stacks the outputs' gradients back (zeros for outputs that
    got none).
    """

    inputs = (Input("value"),)
    outputs = (OutputList("output", count="num"),)
    attrs = (Attr("num", "int", min=0, max=_MAX_PIECES, doc="the number of outputs: the size of axis"),
             Attr("axis", "int", 0, doc="the axis to unstack along"))
    grad_rule = """
        dvalue = the gradients g[i] of output[i] stacked along axis (zeros for outputs that got none)
        """

    def infer(value, *, num, axis):
        if value.rank == 0:
            raise ShapeError("Unstack: cannot unstack a scalar")
        a = axis_in("Unstack", axis, value.rank)
        if value.shape[a] is not None and value.shape[a] != num:
            raise ShapeError(f"Unstack: axis {axis} of {fmt_shape(value.shape)} has size {value.shape[a]}, "
                             f"but num is {num}")
        t = TensorType(value.shape[:a] + value.shape[a + 1:], value.dtype)
        return fold("Unstack", [t] * num, Unstack.forward, value, num=num, axis=axis)

    def forward(value, *, num, axis):
        a = axis % value.ndim
        if value.shape[a] != num:
            raise ShapeError(f"Unstack: axis {axis} of {list(value.shape)} has size {value.shape[a]}, "
                             f"but num is {num}")
        lead = (slice(None),) * a
        return [value[lead + (i,)] for i in range(num)]

    def vjp(g, out, value, *, num, axis):
        a = axis % value.ndim
        if g and all(gi is not None for gi in g):
            return (np.stack(g, axis=a),)
        gx = np.zeros(value.shape, value.dtype)
        lead = (slice(None),) * a
        for i, gi in enumerate(g):
            if gi is not None:
                gx[lead + (i,)] = gi
        return (gx,)


@block("Split", category="array_ops", aliases=("split",))
class Split:
    """Cuts ``value`` along ``axis`` into ``num_split`` equal pieces.

    TensorFlow's ``tf.split`` with a number of splits (op Split): the size of ``axis`` must be
    divisible by ``num_split``. The outputs are views of the input. The gradient concatenates the
    pieces' gradients (zeros for pieces that got none).
    """

    inputs = (Input("axis", dtype="int", static=True, doc="the axis to cut along"), Input("value"))
    outputs = (OutputList("output", count="num_split"),)
    attrs = (Attr("num_split", "int", min=1, max=_MAX_PIECES, doc="the number of equal pieces"),)
    grad_rule = """
        dvalue = the gradients g[i] of output[i] concatenated along axis (zeros for pieces that got none)
        """

    def infer(axis, value, *, num_split):
        if value.rank == 0:
            raise ShapeError("Split: cannot split a scalar")
        a = axis_in("Split", static_int("Split", "axis", axis), value.rank)
        d = value.shape[a]
        if d is not None and d % num_split:
            raise ShapeError(f"Split: axis {a} of {fmt_shape(value.shape)} has size {d}, which does not split "
                             f"into {num_split} equal pieces")
        t = TensorType(value.shape[:a] + (None if d is None else d // num_split,) + value.shape[a + 1:],
                       value.dtype)
        return fold("Split", [t] * num_split, Split.forward, axis, value, num_split=num_split)

    def forward(axis, value, *, num_split):
        a = as_int(axis) % value.ndim
        d = value.shape[a]
        if d % num_split:
            raise ShapeError(f"Split: axis {a} of {list(value.shape)} has size {d}, which does not split "
                             f"into {num_split} equal pieces")
        step = d // num_split
        lead = (slice(None),) * a
        return [value[lead + (slice(i * step, (i + 1) * step),)] for i in range(num_split)]

    def vjp(g, out, axis, value, *, num_split):
        a = as_int(axis) % value.ndim
        step = value.shape[a] // num_split
        return None, _pieces_to_cotangent(g, value, a, [(i * step, (i + 1) * step) for i in range(num_split)])


def _split_sizes(op, sizes, d, num_split):
    """SplitV's sizes with the one -1 worked out (when the axis size is known)."""
    if len(sizes) != num_split:
        raise ShapeError(f"{op}: size_splits {list(sizes)} has {len(sizes)} entries, "
                         f"num_split is {num_split}")
    if any(s < -1 for s in sizes) or sizes.count(-1) > 1:
        raise ShapeError(f"{op}: size_splits must be sizes of at least 0 with at most one -1, "
                         f"got {list(sizes)}")
    known = sum(s for s in sizes if s != -1)
    if d is None:
        return tuple(None if s == -1 else s for s in sizes)
    if -1 in sizes:
        if known > d:
            raise ShapeError(f"{op}: size_splits {list(sizes)} add up to more than the axis size {d}")
        return tuple(d - known if s == -1 else s for s in sizes)
    if known != d:
        raise ShapeError(f"{op}: size_splits {list(sizes)} add up to {known}, the axis has size {d}")
    return tuple(sizes)


@block("SplitV", category="array_ops")
class SplitV:
    """Cuts ``value`` along ``axis`` into pieces of the sizes listed in ``size_splits``.

    TensorFlow's ``tf.split`` with a list of sizes (op SplitV): the sizes add up to the size of
    ``axis``; one of them may be -1 for whatever remains. The outputs are views of the input. The
    gradient concatenates the pieces' gradients (zeros for pieces that got none).
    """

    inputs = (Input("value"),
              Input("size_splits", dtype="int", static=True, doc="the pieces' sizes; one may be -1"),
              Input("axis", dtype="int", static=True, doc="the axis to cut along"))
    outputs = (OutputList("output", count="num_split"),)
    attrs = (Attr("num_split", "int", min=1, max=_MAX_PIECES,
                  doc="the number of pieces (entries of size_splits)"),)
    grad_rule = """
        dvalue = the gradients g[i] of output[i] concatenated along axis (zeros for pieces that got none)
        """

    def infer(value, size_splits, axis, *, num_split):
        if value.rank == 0:
            raise ShapeError("SplitV: cannot split a scalar")
        a = axis_in("SplitV", static_int("SplitV", "axis", axis), value.rank)
        sizes = _split_sizes("SplitV", static_ints("SplitV", "size_splits", size_splits), value.shape[a],
                             num_split)
        out = [TensorType(value.shape[:a] + (s,) + value.shape[a + 1:], value.dtype) for s in sizes]
        return fold("SplitV", out, SplitV.forward, value, size_splits, axis, num_split=num_split)

    def forward(value, size_splits, axis, *, num_split):
        a = as_int(axis) % value.ndim
        lead = (slice(None),) * a
        return [value[lead + (slice(start, stop),)]
                for start, stop in _split_bounds(value.shape[a], size_splits, num_split)]

    def vjp(g, out, value, size_splits, axis, *, num_split):
        a = as_int(axis) % value.ndim
        return _pieces_to_cotangent(g, value, a, _split_bounds(value.shape[a], size_splits, num_split)), \
            None, None


def _split_bounds(d, size_splits, num_split):
    sizes = _split_sizes("SplitV", static_ints("SplitV", "size_splits", size_splits), d, num_split)
    bounds, start = [], 0
    for s in sizes:
        bounds.append((start, start + s))
        start += s
    return bounds
