"""windows: max and sum over sliding windows along one axis, in time linear in the axis's size.

The pooling blocks reduce 2-D windows one axis at a time (a rectangle's max is the max over rows
of the max along each row; the same for sums). Along one axis every window is a range of real
entries ``[lo, hi)``: padding is never materialised, so a window far larger than the input costs
no more than the input itself.

The ranges are answered with van Herk / Gil-Werman block scans: the axis is cut into blocks of
``B = min(k, size)`` entries, and a scan within each block gives every entry's prefix (from its
block's start) and suffix (to its block's end). A range no longer than ``B`` spans at most two
blocks, so it is the suffix of the first joined with the prefix of the second: two lookups. A
range inside one block is a prefix of it (it starts at the block's start) or a suffix (it was cut
at the axis's end), one lookup. The cost is a few passes over the axis plus one per output,
whatever the window size; the sums are taken over at most ``B`` entries, as accurate as summing
each window directly.

For MaxPool's gradient, :func:`max_first_index` also gives, per window, the index of the first
entry equal to the window's max (TensorFlow's MaxPoolGrad takes the first one in row-major order
on a tie): the scans carry the index where each prefix/suffix max is first reached.

Every buffer is announced with ``reserve`` before it is made. Imports only blockflow.spec and
numpy.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from blockflow.spec import reserve


@dataclass(frozen=True)
class AxisPlan:
    """The windows of one axis: where each output's range sits among the block scans.

    ``lo``/``hi`` bound each output's real entries: the suffix lookup reads entry ``lo``, the
    prefix lookup entry ``hi - 1``; ``prefix_only`` / ``suffix_only`` mark the ranges inside one
    block, read with one lookup.
    """

    size: int
    k: int
    block: int
    lo: np.ndarray
    hi: np.ndarray
    prefix_only: np.ndarray
    suffix_only: np.ndarray

    @property
    def out(self) -> int:
        return len(self.lo)

    @property
    def padded(self) -> int:
        """The axis's length rounded up to whole blocks."""
        return -(-self.size // self.block) * self.block


def axis_plan(size: int, k: int, stride: int, before: int, out: int) -> AxisPlan:
    """The plan of ``out`` windows of ``k`` entries every ``stride``, the first starting ``before``
    entries ahead of the axis (TensorFlow's padding); each window holds at least one real entry."""
    start = np.arange(out, dtype=np.int64) * stride - before
    lo = np.maximum(start, 0)
    hi = np.minimum(start + k, size)
    block = max(min(k, size), 1)
    last = hi - 1
    same = lo // block == last // block
    prefix_only = same & (lo % block == 0)
    return AxisPlan(size, k, block, lo, hi, prefix_only, same & ~prefix_only)


def _bcast(v: np.ndarray, axis: int, ndim: int) -> np.ndarray:
    """A 1-D array shaped to broadcast along ``axis`` of a rank-``ndim`` array."""
    shape = [1] * ndim
    shape[axis] = len(v)
    return v.reshape(shape)


def _blocks(buf: np.ndarray, axis: int, plan: AxisPlan) -> np.ndarray:
    """A view of ``buf`` (contiguous, the axis ``plan.padded`` long) with the axis cut into blocks.

    Splitting one axis of a contiguous array is always a view, so the scans write through it.
    """
    return buf.reshape(buf.shape[:axis] + (plan.padded // plan.block, plan.block) + buf.shape[axis + 1:])


def _filled(x: np.ndarray, axis: int, plan: AxisPlan, fill, dtype, what: str) -> np.ndarray:
    """A fresh buffer of ``x`` along ``axis`` padded to whole blocks with ``fill``."""
    shape = x.shape[:axis] + (plan.padded,) + x.shape[axis + 1:]
    reserve(shape, dtype, what)
    buf = np.empty(shape, dtype)
    index = (slice(None),) * axis
    buf[index + (slice(0, plan.size),)] = x
    if plan.padded > plan.size:
        buf[index + (slice(plan.size, None),)] = fill
    return buf


# Up to this block length a scan steps through the block's positions, each step one vectorised
# pass over every block at once; longer blocks take ufunc.accumulate, whose cost per block (not
# per entry) is then spread over enough entries.
_STEPPED_SCAN_MAX = 64


def _scan(ufunc, blocks: np.ndarray, axis: int, reverse: bool) -> None:
    """``ufunc`` accumulated within each block, in place: prefixes, or suffixes with ``reverse``."""
    lead = (slice(None),) * (axis + 1)
    if reverse:
        blocks = blocks[lead + (slice(None, None, -1),)]
    length = blocks.shape[axis + 1]
    if length > _STEPPED_SCAN_MAX:
        ufunc.accumulate(blocks, axis=axis + 1, out=blocks)
        return
    prev = blocks[lead + (0,)]
    for j in range(1, length):
        cur = blocks[lead + (j,)]
        ufunc(prev, cur, out=cur)
        prev = cur


def _take(a: np.ndarray, index: np.ndarray, axis: int, plan: AxisPlan) -> np.ndarray:
    return np.take(a, np.minimum(index, plan.padded - 1), axis=axis)


def reduce(ufunc, x: np.ndarray, axis: int, plan: AxisPlan, identity, dtype=None,
           what: str = "a pooling scan") -> np.ndarray:
    """``ufunc`` (np.maximum, np.add) over each window of ``plan`` along ``axis``, as ``dtype``
    (x's by default): the axis becomes ``plan.out`` long."""
    dtype = x.dtype if dtype is None else np.dtype(dtype)
    if plan.k == 1:  # single entries: a strided pick, nothing to scan
        return np.take(x, plan.lo, axis=axis).astype(dtype, copy=False)
    out_shape = x.shape[:axis] + (plan.out,) + x.shape[axis + 1:]
    reserve(out_shape, dtype, what + " (windows)")
    buf = _filled(x, axis, plan, identity, dtype, what)
    _scan(ufunc, _blocks(buf, axis, plan), axis, reverse=False)
    tail = _take(buf, plan.hi - 1, axis, plan)
    buf[(slice(None),) * axis + (slice(0, plan.size),)] = x
    if plan.padded > plan.size:
        buf[(slice(None),) * axis + (slice(plan.size, None),)] = identity
    _scan(ufunc, _blocks(buf, axis, plan), axis, reverse=True)
    head = _take(buf, plan.lo, axis, plan)
    del buf
    # A range inside one block is read with one lookup: the other one is set to the identity.
    if plan.prefix_only.any():
        np.copyto(head, identity, where=_bcast(plan.prefix_only, axis, x.ndim))
    if plan.suffix_only.any():
        np.copyto(tail, identity, where=_bcast(plan.suffix_only, axis, x.ndim))
    return ufunc(head, tail, out=head)


def reduce_sum_adjoint(g: np.ndarray, axis: int, plan: AxisPlan, dtype=None,
                       what: str = "a pooling gradient") -> np.ndarray:
    """The adjoint of ``reduce(np.add, ...)``: each window's ``g`` added onto each of its entries.

    ``g`` has ``plan.out`` entries along ``axis``; the result has ``plan.size``.
    """
    dtype = g.dtype if dtype is None else np.dtype(dtype)
    shape = g.shape[:axis] + (plan.padded,) + g.shape[axis + 1:]
    if plan.k == 1:
        out_shape = g.shape[:axis] + (plan.size,) + g.shape[axis + 1:]
        reserve(out_shape, dtype, what)
        dx = np.zeros(out_shape, dtype)
        _scatter_add(dx, plan.lo, g, axis)
        return dx
    reserve(shape, dtype, what + " (suffix part)")
    reserve(shape, dtype, what + " (prefix part)")
    # The forward reads suffix(lo) and prefix(hi - 1). A suffix starting at j sums the entries
    # j.. of its block, so entry i receives the cotangents of the suffixes starting at or before
    # it in its block: a prefix scan of them; the prefixes' part is a suffix scan.
    suffix_part = np.zeros(shape, dtype)
    prefix_part = np.zeros(shape, dtype)
    _scatter_add(suffix_part, plan.lo, g, axis, skip=plan.prefix_only)
    _scatter_add(prefix_part, plan.hi - 1, g, axis, skip=plan.suffix_only)
    _scan(np.add, _blocks(suffix_part, axis, plan), axis, reverse=False)
    _scan(np.add, _blocks(prefix_part, axis, plan), axis, reverse=True)
    suffix_part += prefix_part
    del prefix_part
    return suffix_part[(slice(None),) * axis + (slice(0, plan.size),)]


def _scatter_add(dst: np.ndarray, index: np.ndarray, g: np.ndarray, axis: int, skip=None) -> None:
    """``dst[..., index[o], ...] += g[..., o, ...]`` along ``axis``, for the o not in ``skip``.

    The indices are non-decreasing (windows move forward), so equal ones are neighbours: each
    run is summed with one reduceat and written once.
    """
    keep = np.arange(len(index)) if skip is None else np.flatnonzero(~skip)
    if not len(keep):
        return
    index = index[keep]
    starts = np.flatnonzero(np.r_[True, index[1:] != index[:-1]])
    if len(starts) == len(index):
        sums = np.take(g, keep, axis=axis) if skip is not None else g
    else:
        sums = np.add.reduceat(np.take(g, keep, axis=axis), starts, axis=axis)
    lead = (slice(None),) * axis
    dst[lead + (index[starts],)] += sums


def max_first_index(x: np.ndarray, axis: int, plan: AxisPlan, lowest,
                    what: str = "a max-pooling scan") -> tuple:
    """Each window's max along ``axis`` and the index (along ``axis``) of the first entry equal to
    it: ``(values, index)``, both with ``plan.out`` entries along the axis.

    A window holding a NaN has a NaN max (as np.maximum) and an index that does not matter: no
    entry equals NaN, so the gradient that asks for it is dropped (see MaxPool).
    """
    ndim = x.ndim
    out_shape = x.shape[:axis] + (plan.out,) + x.shape[axis + 1:]
    reserve(out_shape, np.int64, what + " (window indices)")
    if plan.k == 1:
        return np.take(x, plan.lo, axis=axis), np.broadcast_to(_bcast(plan.lo, axis, ndim), out_shape).copy()
    itype = np.dtype(np.int32 if plan.padded < 2 ** 31 else np.int64)
    index_shape = x.shape[:axis] + (plan.padded,) + x.shape[axis + 1:]
    reserve(index_shape, itype, what + " (indices)")
    reserve(index_shape, np.bool_, what + " (ties)")
    shape = [1] * (ndim + 1)
    shape[axis:axis + 2] = plan.padded // plan.block, plan.block
    iota = np.arange(plan.padded, dtype=itype).reshape(shape)  # each entry's index, in blocks
    buf = _filled(x, axis, plan, lowest, x.dtype, what)
    tail_v, tail_i = _prefix_max_first(buf, axis, plan, iota, index_shape)
    head_v, head_i = _suffix_max_first(buf, x, axis, plan, lowest, iota, index_shape)
    del buf

    pre = _bcast(plan.prefix_only, axis, ndim)
    suf = _bcast(plan.suffix_only, axis, ndim)
    # Across two blocks the suffix part comes first in the window, so it wins a tie.
    use_head = ((head_v >= tail_v) & ~pre) | suf
    values = np.where(pre, tail_v, np.where(suf, head_v, np.maximum(head_v, tail_v)))
    index = np.where(use_head, head_i, tail_i).astype(np.int64)
    np.minimum(index, plan.size - 1, out=index)
    return values, index


def _prefix_max_first(buf, axis, plan, iota, index_shape) -> tuple:
    """The max from each window's last block's start to its last entry, and the index where it is
    first reached: the max from a block's start is reached first where it last grew (a block's
    first entry counts as growth). Scans ``buf`` (the padded input, in blocks) in place."""
    bl = (slice(None),) * (axis + 1)
    pb = _blocks(buf, axis, plan)
    _scan(np.maximum, pb, axis, reverse=False)
    grew = np.empty(pb.shape, np.bool_)
    grew[bl + (0,)] = True
    np.greater(pb[bl + (slice(1, None),)], pb[bl + (slice(None, -1),)], out=grew[bl + (slice(1, None),)])
    first = np.where(grew, iota, iota.dtype.type(0))
    del grew
    _scan(np.maximum, first, axis, reverse=False)
    return _take(buf, plan.hi - 1, axis, plan), _take(first.reshape(index_shape), plan.hi - 1, axis, plan)


def _suffix_max_first(buf, x, axis, plan, lowest, iota, index_shape) -> tuple:
    """The max from each window's first entry to its block's end, and the index where it is first
    reached: the next entry equal to it. Refills ``buf`` with ``x`` and scans it in place."""
    lead = (slice(None),) * axis
    real = lead + (slice(0, plan.size),)
    buf[real] = x
    if plan.padded > plan.size:
        buf[lead + (slice(plan.size, None),)] = lowest
    _scan(np.maximum, _blocks(buf, axis, plan), axis, reverse=True)
    equal = np.ones(index_shape, np.bool_)
    np.equal(buf[real], x, out=equal[real])
    nxt = np.where(_blocks(equal, axis, plan), iota, iota.dtype.type(plan.padded))
    del equal
    _scan(np.minimum, nxt, axis, reverse=True)
    return _take(buf, plan.lo, axis, plan), _take(nxt.reshape(index_shape), plan.lo, axis, plan)
