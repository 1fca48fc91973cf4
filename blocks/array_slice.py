"""array_ops, slicing: Slice (a block of entries) and StridedSlice (Python's slicing with TF's masks).

Imports only blockflow.spec and numpy.
"""
from __future__ import annotations

import functools

import numpy as np

from blockflow.spec import Attr, Input, Output, ShapeError, TensorType, block

from .common import fmt_shape
from .folding import fold, static_ints


def _as_tuple(op, name, v):
    """A static list operand as a tuple of ints: the hashable key of the slicing caches."""
    if type(v) is np.ndarray and v.ndim == 1 and v.dtype.kind in "iu":
        return tuple(v.tolist())
    return static_ints(op, name, v)


def _slice_index(shape, begin, size):
    """Slice's index tuple and result shape, checked against the known sizes."""
    return _slice_spec(shape, _as_tuple("Slice", "begin", begin), _as_tuple("Slice", "size", size))


@functools.lru_cache(maxsize=512)
def _slice_spec(shape, begin, size):
    op, rank = "Slice", len(shape)
    for name, v in (("begin", begin), ("size", size)):
        if len(v) != rank:
            raise ShapeError(f"{op}: {name} needs {rank} entries (one per axis), got {list(v)}")
    index, out = [], []
    for i, (d, b, s) in enumerate(zip(shape, begin, size)):
        if b < 0 or s < -1:
            raise ShapeError(f"{op}: begin {list(begin)} must be at least 0 and size {list(size)} "
                             f"at least -1")
        if d is not None and (b > d or (s != -1 and b + s > d)):
            raise ShapeError(f"{op}: begin {list(begin)} with size {list(size)} reaches outside axis {i} of "
                             f"{fmt_shape(shape)}")
        index.append(slice(b, None if s == -1 else b + s))
        out.append((None if d is None else d - b) if s == -1 else s)
    return tuple(index), tuple(out)


@block("Slice", category="array_ops")
class Slice:
    """The block of ``input`` starting at ``begin`` with ``size`` entries per axis (-1: to the end).

    TensorFlow's ``tf.slice``: ``begin`` and ``size`` have one entry per axis; the block must lie
    inside the input. The result is a view. The gradient puts ``g`` back in place, zeros around it.
    """

    inputs = (Input("input"),
              Input("begin", dtype="int", static=True, doc="first index on each axis"),
              Input("size", dtype="int", static=True, doc="entries taken on each axis; -1 for all the rest"))
    outputs = (Output("output"),)
    grad_rule = "dinput = zeros of input's shape with g written back at the sliced block"

    def infer(x, begin, size):
        _, shape = _slice_index(x.shape, begin, size)
        return fold("Slice", TensorType(shape, x.dtype), Slice.forward, x, begin, size)

    def forward(x, begin, size):
        return x[_slice_index(x.shape, begin, size)[0]]

    def vjp(g, out, x, begin, size):
        gx = np.zeros(x.shape, g.dtype)
        gx[_slice_index(x.shape, begin, size)[0]] = g
        return gx, None, None


_NEW_AXIS = object()


def _strided_spec(rank, begin, end, strides, begin_mask, end_mask, ellipsis_mask, new_axis_mask,
                  shrink_axis_mask):
    """TF's sparse slice spec made dense: one entry per index of the result's construction.

    Entries are ``_NEW_AXIS``, ``(axis, int)`` for a shrunk axis, or ``(axis, slice)``; every
    axis of the input appears once (the ellipsis and the unlisted trailing axes as full slices).
    """
    n = len(begin)
    if not n == len(end) == len(strides):
        raise ShapeError(f"StridedSlice: begin {list(begin)}, end {list(end)} and strides {list(strides)} "
                         f"must have the same length")
    if bin(ellipsis_mask).count("1") > 1:
        raise ShapeError(f"StridedSlice: ellipsis_mask {ellipsis_mask} has more than one bit set")
    sparse = []
    for i in range(n):
        bit = 1 << i
        if ellipsis_mask & bit:
            sparse.append("...")
        elif new_axis_mask & bit:
            sparse.append(_NEW_AXIS)
        else:
            sparse.append(i)
    real = sum(1 for s in sparse if type(s) is int)
    if real > rank:
        raise ShapeError(f"StridedSlice: the spec indexes {real} axes, the input has {rank}")
    if "..." not in sparse:
        sparse.append("...")
    entries, axis = [], 0
    for s in sparse:
        if s is _NEW_AXIS:
            entries.append(_NEW_AXIS)
        elif s == "...":
            for _ in range(rank - real):
                entries.append((axis, slice(None)))
                axis += 1
        else:
            i, bit = s, 1 << s
            stride = strides[i]
            if stride == 0:
                raise ShapeError(f"StridedSlice: strides {list(strides)} has a 0 (entry {i})")
            if shrink_axis_mask & bit:
                if stride < 0:
                    raise ShapeError(f"StridedSlice: a shrunk axis (entry {i}) needs a positive stride, "
                                     f"got {stride}")
                entries.append((axis, begin[i]))
            else:
                entries.append((axis, slice(None if begin_mask & bit else begin[i],
                                            None if end_mask & bit else end[i], stride)))
            axis += 1
    return tuple(entries)


def _strided(shape, begin, end, strides, masks):
    """(numpy index tuple, result shape) of a StridedSlice on ``shape`` (sizes may be None)."""
    op = "StridedSlice"
    b = _as_tuple(op, "begin", begin)
    return _strided_index(shape, b, _as_tuple(op, "end", end),
                          (1,) * len(b) if strides is None else _as_tuple(op, "strides", strides), masks)


@functools.lru_cache(maxsize=512)
def _strided_index(shape, b, e, s, masks):
    op = "StridedSlice"
    entries = _strided_spec(len(shape), b, e, s, *masks)
    index, out = [], []
    for entry in entries:
        if entry is _NEW_AXIS:
            index.append(None)
            out.append(1)
            continue
        axis, ix = entry
        index.append(ix)
        d = shape[axis]
        if type(ix) is int:
            if d is not None and not -d <= ix < d:
                raise ShapeError(f"{op}: index {ix} of a shrunk axis is out of range for axis {axis} of "
                                 f"{fmt_shape(shape)}")
        else:
            out.append(None if d is None else len(range(*ix.indices(d))))
    return tuple(index), tuple(out)


@block("StridedSlice", category="array_ops", aliases=("strided_slice",))
class StridedSlice:
    """Python-style slicing ``input[begin:end:strides, ...]`` with TF's masks.

    TensorFlow's ``tf.strided_slice``, what ``x[1:, ::-2, tf.newaxis, ..., 0]`` builds. Entry i of
    ``begin``/``end``/``strides`` applies to the next axis; negative indices count from the end,
    out-of-range ones are clamped. Bit i of ``begin_mask``/``end_mask`` ignores begin[i]/end[i]
    (the full range); of ``ellipsis_mask`` (one bit at most), the entry stands for as many full
    axes as needed; of ``new_axis_mask``, the entry inserts a size-1 axis; of ``shrink_axis_mask``,
    the entry takes the single index begin[i] and drops the axis. Axes the spec does not reach
    are kept whole. ``strides`` defaults to all 1. The gradient scatters ``g`` back into zeros.
    """

    inputs = (Input("input"),
              Input("begin", dtype="int", static=True),
              Input("end", dtype="int", static=True),
              Input("strides", dtype="int", static=True, optional=True, doc="all 1 when unwired"))
    outputs = (Output("output"),)
    attrs = (Attr("begin_mask", "int", 0, min=0, doc="bit i set: entry i starts at the beginning"),
             Attr("end_mask", "int", 0, min=0, doc="bit i set: entry i runs to the end"),
             Attr("ellipsis_mask", "int", 0, min=0, doc="bit i set: entry i is '...'"),
             Attr("new_axis_mask", "int", 0, min=0, doc="bit i set: entry i inserts a size-1 axis"),
             Attr("shrink_axis_mask", "int", 0, min=0, doc="bit i set: entry i takes index begin[i]"))
    grad_rule = """
        dinput = zeros of input's shape with g written back where the slice read
        (the same begin, end, strides and masks)
        """

    def infer(x, begin, end, strides, *, begin_mask, end_mask, ellipsis_mask, new_axis_mask,
              shrink_axis_mask):
        masks = (begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_axis_mask)
        _, shape = _strided(x.shape, begin, end, strides, masks)
        return fold("StridedSlice", TensorType(shape, x.dtype), StridedSlice.forward, x, begin, end, strides,
                     begin_mask=begin_mask, end_mask=end_mask, ellipsis_mask=ellipsis_mask,
                     new_axis_mask=new_axis_mask, shrink_axis_mask=shrink_axis_mask)

    def forward(x, begin, end, strides, *, begin_mask, end_mask, ellipsis_mask, new_axis_mask,
                shrink_axis_mask):
        masks = (begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_axis_mask)
        return x[_strided(x.shape, begin, end, strides, masks)[0]]

    def vjp(g, out, x, begin, end, strides, *, begin_mask, end_mask, ellipsis_mask, new_axis_mask,
            shrink_axis_mask):
        masks = (begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_axis_mask)
        gx = np.zeros(x.shape, g.dtype)
        gx[_strided(x.shape, begin, end, strides, masks)[0]] = g
        return gx, None, None, None
