"""The static operands of the array blocks (sizes, axes, shapes given as numbers or lists), read
and checked, and the compile-time folding of their small integer results.

Integer results computed from constant inputs are folded at compile time (Shape → StridedSlice
→ Concat → Reshape's shape, as TF graphs compute shapes); float results are not, so a large
constant weight never gets copied while compiling.

Holds no block. Imports only blockflow.spec and numpy.
"""
from __future__ import annotations

import numpy as np

from blockflow.spec import ShapeError, TensorType

_FOLD_KINDS = "iub"
_FOLD_MAX = 4096


def as_int(v) -> int:
    """A static scalar operand (an int, a 0-d or a 1-element array) as a Python int; fast path."""
    return v if type(v) is int else v.item()


def static_int(op, name, value) -> int:
    """A static scalar operand, checked: an integer given as a number or a 1-element list."""
    arr = np.asarray(value)
    if arr.size != 1 or arr.dtype.kind not in "iu" or arr.ndim > 1:
        raise ShapeError(f"{op}: {name} must be one integer, got {arr.tolist()!r}")
    return int(arr.item())


def static_ints(op, name, value, length=None) -> tuple:
    """A static list operand (an int or a 1-D list of ints), checked, as a tuple of ints."""
    arr = np.asarray(value)
    if arr.ndim > 1 or (arr.size and arr.dtype.kind not in "iu"):
        raise ShapeError(f"{op}: {name} must be a list of integers, got {arr.tolist()!r}")
    ints = tuple(int(v) for v in arr.reshape(-1))
    if length is not None and len(ints) != length:
        raise ShapeError(f"{op}: {name} needs {length} entries (one per axis), got {list(ints)}")
    return ints


def static_sizes(op, name, value) -> tuple:
    """A static shape operand (Fill's dims, BroadcastTo's shape, ...): integers, none negative."""
    dims = static_ints(op, name, value)
    if any(d < 0 for d in dims):
        raise ShapeError(f"{op}: {name} {list(dims)} has a negative size")
    return dims


def axis_in(op, axis, rank, name="axis") -> int:
    """``axis`` normalized into [0, rank), with TF's range check; rank may be one past for
    ops that insert an axis (pass rank + 1)."""
    if not -rank <= axis < rank:
        raise ShapeError(f"{op}: {name} {axis} is out of range for {rank} axes "
                         f"(it must be in [{-rank}, {rank - 1}])")
    return axis % rank


def fold(op, t, fn, *args, **attrs):
    """``t`` (a TensorType or a list of them, for an OutputList), with the value computed by
    ``fn`` when every tensor input is a small constant and the result is a small integer or bool
    tensor (small inputs can make a huge result: Tile, Fill, OneHot, Diag; those are left to run
    time, where the runtime checks their size, instead of being made while compiling)."""
    first = t[0] if isinstance(t, list) else t
    if isinstance(t, list) and not t or first.dtype.kind not in _FOLD_KINDS:
        return t
    if any(u.size is None or u.size > _FOLD_MAX for u in (t if isinstance(t, list) else (t,))):
        return t
    values = []
    for a in args:
        group = a if isinstance(a, list) else (a,)
        if isinstance(group[0], TensorType):
            if any(x.value is None or x.size > _FOLD_MAX for x in group):
                return t
            values.append([x.value for x in a] if isinstance(a, list) else a.value)
        else:
            values.append(a)
    try:
        value = fn(*values, **attrs)
    except (ValueError, IndexError) as exc:  # a constant index out of range, say
        raise ShapeError(f"{op}: {exc}") from None
    if isinstance(value, list):
        return [TensorType(np.shape(v), u.dtype, np.asarray(v)) for u, v in zip(t, value)]
    value = np.asarray(value)
    return TensorType(value.shape, t.dtype, value)
