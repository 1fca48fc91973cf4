"""Arrays written out for people and programs, however large, without a second copy of them.

The command line prints a run's results: a short text form (``summarize``) and JSON
(``write_json``). Both read an array a chunk at a time (``CHUNK_VALUES`` values, a few MB), so
printing a result of several GB needs memory for one chunk, never for a second copy of the result
(a ``tolist()`` of a float array takes about 30 bytes per value, eight times a float32 array).
JSON holds every value of arrays up to ``JSON_FULL_VALUES`` values; a larger one is summarised
(min, mean, max, non-finite count) unless every value is asked for, and is then written piecewise.

Plain numpy and the standard library: must not import Qt.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np

__all__ = ["CHUNK_VALUES", "JSON_FULL_VALUES", "ArrayStats", "array_stats", "JsonArray", "write_json"]

#: values read (and formatted) at a time
CHUNK_VALUES = 1 << 16
#: arrays with more values than this are summarised in JSON unless every value is asked for
JSON_FULL_VALUES = 100_000


@dataclass(frozen=True)
class ArrayStats:
    """Statistics of a numeric array's finite values; ``non_finite`` counts NaN and +-Inf."""

    count: int
    min: float | None
    mean: float | None
    max: float | None
    non_finite: int


def _chunks(arr: np.ndarray):
    """``arr``'s values in C order, CHUNK_VALUES at a time: views where the memory allows,
    small buffers where it does not (a transposed or strided array is never copied whole)."""
    if arr.size == 0:
        return
    yield from np.nditer(arr, flags=["external_loop", "buffered", "zerosize_ok", "refs_ok"],
                         buffersize=CHUNK_VALUES, order="C")


def array_stats(arr) -> ArrayStats:
    """Min, mean and max of the finite values of a numeric (or bool) array, in one pass of chunks."""
    arr = np.asarray(arr)
    if arr.dtype.kind == "b":
        arr = arr.view(np.uint8)
    lo = hi = None
    total, count, bad = 0.0, 0, 0
    with np.errstate(all="ignore"):
        for chunk in _chunks(arr):
            if chunk.dtype.kind in "fc":
                ok = np.isfinite(chunk)
                kept = int(np.count_nonzero(ok))
                if kept != chunk.size:
                    bad += chunk.size - kept
                    chunk = chunk[ok]
            if chunk.size == 0:
                continue
            cmin, cmax = chunk.min(), chunk.max()
            lo = cmin if lo is None or cmin < lo else lo
            hi = cmax if hi is None or cmax > hi else hi
            total += float(np.add.reduce(chunk, dtype=np.float64))
            count += chunk.size
    if count == 0:
        return ArrayStats(0, None, None, None, bad)
    return ArrayStats(count, lo.item(), total / count, hi.item(), bad)


class JsonArray:
    """An array to be written as JSON ``{"dtype", "shape", "data"}``; ``full``: every value even
    when it has more than JSON_FULL_VALUES (otherwise ``data`` is null and ``summary`` says what
    the values are)."""

    __slots__ = ("array", "full")

    def __init__(self, array, full: bool = False):
        self.array = np.asarray(array)
        self.full = full

    def write(self, out) -> None:
        arr = self.array
        out.write(f'{{"dtype": {json.dumps(arr.dtype.name)}, "shape": {json.dumps(list(arr.shape))}, "data": ')
        if arr.size <= JSON_FULL_VALUES or self.full:
            _write_values(out, arr)
            out.write("}")
            return
        out.write("null, ")
        summary: dict = {"values": int(arr.size)}
        if arr.dtype.kind in "biuf":
            st = array_stats(arr)
            summary.update(min=_json_number(st.min), mean=_json_number(st.mean), max=_json_number(st.max),
                           non_finite=st.non_finite)
        summary["note"] = (f"more than {JSON_FULL_VALUES:,} values: summarised "
                           f"(--all-values writes every value)")
        out.write(f'"summary": {json.dumps(summary, ensure_ascii=False)}}}')


def _json_number(v):
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return None
    return v


def _dumps(arr: np.ndarray) -> str:
    """A small array as nested JSON lists; NaN and infinities as "NaN", "Infinity", "-Infinity"."""
    if arr.dtype.kind == "f":
        with np.errstate(all="ignore"):
            finite = np.isfinite(arr)
        if not finite.all():
            obj = arr.astype(object)
            obj[np.isnan(arr)] = "NaN"
            obj[np.isposinf(arr)] = "Infinity"
            obj[np.isneginf(arr)] = "-Infinity"
            return json.dumps(obj.tolist())
    return json.dumps(arr.tolist())


def _write_values(out, arr: np.ndarray) -> None:
    """``arr`` as nested JSON lists, a few rows (at most about CHUNK_VALUES values) at a time."""
    if arr.size <= CHUNK_VALUES or arr.ndim == 0:
        out.write(_dumps(arr))
        return
    out.write("[")
    if arr.ndim == 1:
        for i in range(0, arr.shape[0], CHUNK_VALUES):
            out.write((", " if i else "") + _dumps(arr[i:i + CHUNK_VALUES])[1:-1])
    else:
        per_row = max(1, arr[0].size)
        rows = CHUNK_VALUES // per_row
        if rows >= 2:     # whole rows at a time: one string per chunk, not one per (small) row
            for i in range(0, arr.shape[0], rows):
                out.write((", " if i else "") + _dumps(arr[i:i + rows])[1:-1])
        else:
            for i in range(arr.shape[0]):
                if i:
                    out.write(", ")
                _write_values(out, arr[i])
    out.write("]")


def write_json(obj, out, indent: int = 1, _level: int = 0) -> None:
    """Write ``obj`` (dicts, lists, str, numbers, bool, None and JsonArray) as JSON to the text
    stream ``out``, as ``json.dump(obj, out, indent=indent, ensure_ascii=False)`` would, but with
    each JsonArray written piecewise (its data on one line)."""
    pad = "\n" + " " * (indent * (_level + 1))
    end = "\n" + " " * (indent * _level)
    if isinstance(obj, JsonArray):
        obj.write(out)
    elif isinstance(obj, dict):
        if not obj:
            out.write("{}")
            return
        out.write("{")
        for i, (k, v) in enumerate(obj.items()):
            out.write(("," if i else "") + pad + json.dumps(str(k), ensure_ascii=False) + ": ")
            write_json(v, out, indent, _level + 1)
        out.write(end + "}")
    elif isinstance(obj, (list, tuple)):
        if not obj:
            out.write("[]")
            return
        out.write("[")
        for i, v in enumerate(obj):
            out.write(("," if i else "") + pad)
            write_json(v, out, indent, _level + 1)
        out.write(end + "]")
    else:
        out.write(json.dumps(obj, ensure_ascii=False))
