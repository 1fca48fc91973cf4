"""math_ops, sequences made from static numbers: Range, LinSpace.

Imports only blockflow.spec and numpy.
"""
from __future__ import annotations

import numpy as np

from blockflow.spec import Attr, Input, Output, ShapeError, TensorType, block, reserve


def _scalar(op, name, value, kinds="iuf"):
    a = np.asarray(value)
    if a.ndim != 0:
        raise ShapeError(f"{op}: {name} must be a single number, got shape {list(a.shape)}")
    if a.dtype.kind not in kinds:
        raise ShapeError(f"{op}: {name} must be a number, got {a.dtype.name}")
    return a


_RANGE_DTYPES = ("auto", "int32", "int64", "float16", "float32", "float64")


def _range_plan(start, limit, delta, dtype):
    """(dtype, length, start, delta) of a Range, with TensorFlow's checks and length rule."""
    names = ("start", "limit", "delta")
    vals = [_scalar("Range", n, v) for n, v in zip(names, (0 if start is None else start, limit,
                                                           1 if delta is None else delta))]
    if dtype == "auto":
        dt = np.dtype("int32") if all(a.dtype.kind in "iu" for a in vals) else np.dtype("float32")
    else:
        dt = np.dtype(dtype)
    if dt.kind == "f":
        s, lim, d = (dt.type(a) for a in vals)
        for n, v in zip(names, (s, lim, d)):
            if not np.isfinite(v):
                raise ShapeError(f"Range: {n} must be finite, got {v}")
    else:
        for n, a in zip(names, vals):
            if a.dtype.kind == "f" and not float(a).is_integer():
                raise ShapeError(f"Range: {n} is {float(a)}, not an integer; set dtype to a float "
                                 f"type (or auto)")
        s, lim, d = (int(a) for a in vals)
    if d == 0:
        raise ShapeError("Range: delta must not be 0")
    if d > 0 and s > lim:
        raise ShapeError(f"Range: start {s} is above limit {lim} while delta {d} is positive")
    if d < 0 and s < lim:
        raise ShapeError(f"Range: start {s} is below limit {lim} while delta {d} is negative")
    if dt.kind == "f":
        n = int(np.ceil(np.abs((lim - s) / d)))
    else:
        n = -(-abs(lim - s) // abs(d))
        info = np.iinfo(dt)
        if not (info.min <= s <= info.max and info.min <= s + (n - 1) * d <= info.max):
            raise ShapeError(f"Range: values from {s} to {s + (n - 1) * d} do not fit {dt.name}")
    return dt, n, s, d


@block("Range", category="math_ops")
class Range:
    """The sequence ``start, start + delta, ...`` up to but excluding ``limit``.

    As TensorFlow's ``tf.range``: ``start`` is 0 and ``delta`` 1 when unwired; the length is
    ``ceil((limit - start) / delta)``; delta 0, or a start beyond the limit in delta's direction,
    is an error. ``dtype`` ``auto`` gives int32 when all three are integers and float32
    otherwise (what ``tf.range`` picks for Python numbers). Entry i is ``start + i * delta``,
    rounded once. Not differentiable.
    """

    inputs = (Input("start", dtype="number", static=True, optional=True, default=0),
              Input("limit", dtype="number", static=True, doc="the end, excluded"),
              Input("delta", dtype="number", static=True, optional=True, default=1))
    outputs = (Output("output", differentiable=False),)
    attrs = (Attr("dtype", "choice", "auto", choices=_RANGE_DTYPES),)

    def infer(start, limit, delta, *, dtype):
        dt, n, _, _ = _range_plan(start, limit, delta, dtype)
        return TensorType((n,), dt)

    def forward(start, limit, delta, *, dtype):
        dt, n, s, d = _range_plan(start, limit, delta, dtype)
        reserve((n,), np.float64 if dt.kind == "f" else np.int64, "Range's values before rounding to "
                f"{dt.name}")
        if dt.kind == "f":
            values = np.arange(n, dtype=np.float64)
            values *= float(d)
            values += float(s)
            return values.astype(dt)
        values = np.arange(n, dtype=np.int64)
        values *= d
        values += s
        return values.astype(dt, copy=False)


def _linspace_plan(start, stop, num):
    s = _scalar("LinSpace", "start", start, "f")
    e = _scalar("LinSpace", "stop", stop, "iuf")
    n = int(_scalar("LinSpace", "num", num, "iu"))
    if n < 1:
        raise ShapeError(f"LinSpace: num must be at least 1, got {n}")
    return s.dtype, n, s, e.astype(s.dtype)


@block("LinSpace", category="math_ops")
class LinSpace:
    """``num`` evenly spaced values from ``start`` to ``stop``, both included.

    As TensorFlow's ``tf.linspace``: the result has ``start``'s float dtype (``stop`` is cast to
    it), its first entry is ``start`` and its last exactly ``stop``; ``num`` 1 gives ``[start]``
    and ``num`` must be at least 1. Not differentiable.
    """

    inputs = (Input("start", dtype="float", static=True),
              Input("stop", dtype="float", static=True),
              Input("num", dtype="int", static=True, doc="how many values, at least 1"))
    outputs = (Output("output", differentiable=False),)

    def infer(start, stop, num):
        dt, n, _, _ = _linspace_plan(start, stop, num)
        return TensorType((n,), dt)

    def forward(start, stop, num):
        dt, n, s, e = _linspace_plan(start, stop, num)
        reserve((n,), np.float64, f"LinSpace's values before rounding to {dt.name}")
        return np.linspace(float(s), float(e), n, dtype=np.float64).astype(dt)
