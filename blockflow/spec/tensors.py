"""Tensor types known before running, the shape rules blocks share, and the dtype-fit rule.

Part of the block declaration API; blocks import it through :mod:`blockflow.spec`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

DTYPE_NAMES = ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool")
FLOAT_DTYPES = frozenset({"float16", "float32", "float64"})
INT_DTYPES = frozenset({"int8", "int16", "int32", "int64", "uint8"})

#: Dtype constraints an input may declare. Any other identifier is a type variable (like TF's
#: attr ``T``): every input with the same variable must get the same dtype.
DTYPE_CLASSES = {
    "float": FLOAT_DTYPES,
    "int": INT_DTYPES,
    "bool": frozenset({"bool"}),
    "number": FLOAT_DTYPES | INT_DTYPES,
    "any": frozenset(DTYPE_NAMES),
}


class ShapeError(ValueError):
    """Raised by a block's ``infer`` when its inputs' shapes or dtypes do not fit together."""


# --------------------------------------------------------------------------------------------
# Tensor types


_DTYPE_TYPE = {np.dtype(n): type(np.dtype(n)) for n in DTYPE_NAMES}


@dataclass(frozen=True, slots=True)
class TensorType:
    """Shape and dtype of a tensor known before running: ``None`` in a shape is an unknown size.

    ``value`` is set when the value itself is known at compile time (a constant).
    """

    shape: tuple
    dtype: np.dtype
    value: Any = field(default=None, compare=False, repr=False)

    def __post_init__(self):
        dtype = self.dtype
        if type(dtype) is not _DTYPE_TYPE.get(dtype):
            object.__setattr__(self, "dtype", np.dtype(dtype))
        shape = self.shape
        if type(shape) is not tuple or not all(type(d) is int or d is None for d in shape):
            object.__setattr__(self, "shape", tuple(None if d is None else int(d) for d in shape))

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def is_float(self) -> bool:
        return self.dtype.kind == "f"

    @property
    def size(self):
        """Number of elements, or None when a dimension is unknown."""
        if any(d is None for d in self.shape):
            return None
        return math.prod(self.shape)

    def with_shape(self, shape) -> "TensorType":
        return TensorType(tuple(shape), self.dtype)

    def with_dtype(self, dtype) -> "TensorType":
        return TensorType(self.shape, dtype)

    def describe(self) -> str:
        return self.dtype.name + shape_text(self.shape, sep=",")

    __str__ = describe

    @classmethod
    def of(cls, value) -> "TensorType":
        """The type of a concrete array, remembering the value."""
        arr = np.asarray(value)
        return cls(arr.shape, arr.dtype, arr)


def _dims_broadcast(a, b, shape_a, shape_b):
    if a == 1:
        return b
    if b == 1 or a == b:
        return a
    if a is None and b is None:
        return None
    if a is None:
        return b
    if b is None:
        return a
    raise ShapeError(f"shapes {shape_text(shape_a, sep=',')} and {shape_text(shape_b, sep=',')} do not broadcast")


def shape_text(shape, sep: str = ", ") -> str:
    """A shape as blockflow shows it: ``[2, 3]``, unknown sizes (None, or -1 as an attr writes
    them) as ``?``: ``[?, 3]``; ``sep=","`` gives the compact form of types, ``[?,3]``."""
    return "[" + sep.join("?" if d is None or d == -1 else str(d) for d in shape) + "]"


def broadcast_shapes(*shapes) -> tuple:
    """numpy's broadcasting rule, also for shapes with unknown (None) sizes."""
    if len(shapes) == 2 and shapes[0] == shapes[1] and None not in shapes[0]:
        return tuple(shapes[0])
    result: tuple = ()
    for shape in shapes:
        shape = tuple(shape)
        n = max(len(result), len(shape))
        a = (1,) * (n - len(result)) + result
        b = (1,) * (n - len(shape)) + shape
        result = tuple(_dims_broadcast(x, y, result, shape) for x, y in zip(a, b))
    return result


def normalize_axis(axis, rank: int) -> tuple:
    """Axes as a sorted tuple of non-negative ints; ``None`` means every axis."""
    if axis is None:
        return tuple(range(rank))
    if type(axis) is int or isinstance(axis, np.integer):
        # One int axis, the common case (a reduction's wired or inline axis): the same answer
        # without building an array, which is most of a small reduction's gradient call
        a = int(axis)
        if not -rank <= a < rank:
            raise ShapeError(f"axis {a} is out of range for a tensor of rank {rank}")
        return (a % rank if rank else 0,)
    axes = np.asarray(axis).reshape(-1).tolist()
    out = []
    for a in axes:
        a = int(a)
        if not -rank <= a < rank:
            raise ShapeError(f"axis {a} is out of range for a tensor of rank {rank}")
        out.append(a % rank if rank else 0)
    if len(set(out)) != len(out):
        raise ShapeError(f"axis {axes} names an axis twice")
    return tuple(sorted(out))


def reduce_shape(shape, axis, keep_dims: bool) -> tuple:
    """The shape left after reducing ``axis`` (None: all axes)."""
    axes = normalize_axis(axis, len(shape))
    if keep_dims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def unbroadcast(g, shape):
    """Sum a cotangent back down to ``shape``: the one place broadcasting is undone."""
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    # np.add.reduce is what ndarray.sum calls, without its Python layer (the same sums)
    if lead and g.shape[lead:] == shape:  # the common bias case: only leading axes to sum
        return _add_reduce(g, axis=tuple(range(lead)))
    axes = tuple(range(lead)) + tuple(
        i + lead for i, d in enumerate(shape) if d == 1 and g.shape[i + lead] != 1
    )
    if axes:
        g = _add_reduce(g, axis=axes, keepdims=True)
    return g.reshape(shape)


_add_reduce = np.add.reduce


# --------------------------------------------------------------------------------------------
# Values that must fit a dtype


def _show(v) -> str:
    """A number as the user would write it: 1000, 1.7, 1e+12, nan."""
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    if isinstance(v, (np.integer, int)):
        return str(int(v))
    f = float(v)
    if f == f and abs(f) < 1e15 and f == int(f):
        return str(int(f))
    text = str(v)
    return text if len(text) <= 12 else f"{f:.6g}"


def _where(arr: np.ndarray, mask) -> tuple:
    """The first element where ``mask`` holds: (value, " at [i, j]" or "")."""
    flat = int(np.flatnonzero(mask)[0]) if np.ndim(mask) else 0
    if arr.ndim == 0:
        return arr[()], ""
    index = np.unravel_index(flat, arr.shape)
    return arr[index], " (at [" + ", ".join(str(int(i)) for i in index) + "])"


def fit_dtype(value, dtype) -> np.ndarray:
    """``value`` as an array of ``dtype``, or ValueError naming the first number that does not fit.

    A number fits when the conversion keeps it: an integer within the dtype's range, a whole
    finite number for an integer dtype, 0 or 1 (or a bool) for bool, a finite number that stays
    finite for a float dtype (NaN and Inf fit a float; rounding to the nearest float is allowed).
    This is the rule for feeds, inline values and constants; only an explicit Cast block wraps
    and truncates as TensorFlow's does.
    """
    dt = np.dtype(dtype)
    arr = np.asarray(value)
    if arr.dtype == dt:
        return arr
    if arr.dtype.kind not in "biuf":
        raise ValueError(f"expected numbers for {dt.name}, got {arr.dtype} values")
    src = arr.dtype.kind
    if dt.kind == "b":
        if src != "b":
            bad = (arr != 0) & (arr != 1)
            if bad.any():
                v, at = _where(arr, bad)
                raise ValueError(f"{_show(v)}{at} does not fit bool, which holds 0 and 1 (true and false)")
        return arr.astype(dt)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        if src == "b" or arr.size == 0:
            return arr.astype(dt)
        if src == "f":
            finite = np.isfinite(arr)
            if not finite.all():
                v, at = _where(arr, ~finite)
                raise ValueError(f"{_show(v)}{at} does not fit {dt.name}, which holds whole numbers")
            whole = arr == np.floor(arr)
            if not whole.all():
                v, at = _where(arr, ~whole)
                raise ValueError(f"{_show(v)}{at} has a fraction, and {dt.name} holds whole numbers "
                                 f"(a Cast block truncates)")
            # the bounds as floats are exact: min is -2^k (or 0), max + 1 is 2^k
            out = (arr < float(info.min)) | (arr >= float(int(info.max) + 1))
        else:
            lo, hi = int(arr.min()), int(arr.max())
            out = None if info.min <= lo and hi <= info.max else (arr < info.min) | (arr > info.max)
        if out is not None and out.any():
            v, at = _where(arr, out)
            raise ValueError(f"{_show(v)}{at} does not fit {dt.name} ({info.min} to {info.max}; a Cast "
                             f"block wraps)")
        return arr.astype(dt)
    with np.errstate(over="ignore", invalid="ignore"):
        cast = arr.astype(dt)
        if src in "iu" or arr.dtype.itemsize > dt.itemsize:
            grew = np.isinf(cast) & ~np.isinf(arr) if src == "f" else np.isinf(cast)
            if grew.any():
                v, at = _where(arr, grew)
                raise ValueError(f"{_show(v)}{at} does not fit {dt.name} (largest "
                                 f"{_show(np.finfo(dt).max)}); it would become infinite")
    return cast


