"""What a run shows of its values, as plain data: statistics of an array, a short text for a
number, and each block output summarised once (a number, a sparkline's points or a small heatmap's
colours, with shape, dtype, range and NaN/Inf counts).

``summarize`` does the numpy work; it runs on the run's worker thread. Qt-free: the canvas paints
the summaries (blockflow/gui/canvas/resultview.py) and turns heatmap colours into images
(blockflow/gui/common/heatmap.py); the Values panel shares the colour maps.
"""
from __future__ import annotations

import math

import numpy as np

from blockflow.spec import shape_text
from blockflow.present.dtypes import dtype_class

__all__ = ["ValueStats", "OutputSummary", "BlockRun", "value_stats", "summarize", "describe",
           "format_number", "heatmap_rgba", "colormap", "NAN_HEX", "MAX_POINTS", "MAX_CELLS"]

#: a sparkline has at most this many points (longer vectors: the mean of each bin, and a band
#: from its min to its max)
MAX_POINTS = 64
#: a block's heatmap has at most this many cells per side (bigger matrices: block means)
MAX_CELLS = 16
#: cells whose value (or any value of their block) is NaN
NAN_HEX = "#ff00ff"

# Matplotlib's viridis (sequential) and a coolwarm-like diverging map, as anchor colours.
_VIRIDIS = ("#440154", "#482475", "#414487", "#355f8d", "#2a788e", "#21918c", "#22a884",
            "#44bf70", "#7ad151", "#bddf26", "#fde725")
_DIVERGING = ("#3b4cc0", "#6788ee", "#9abbff", "#c9d7f0", "#e8e1dc", "#f4c3ab", "#f49a7b",
              "#de604d", "#b40426")


def _lut(anchors) -> np.ndarray:
    rgb = np.array([[int(a[i:i + 2], 16) for i in (1, 3, 5)] for a in anchors], dtype=np.float64)
    pos = np.linspace(0.0, 1.0, len(anchors))
    t = np.linspace(0.0, 1.0, 256)
    out = np.empty((256, 4), dtype=np.uint8)
    for c in range(3):
        out[:, c] = np.round(np.interp(t, pos, rgb[:, c]))
    out[:, 3] = 255
    return out


_LUTS = {"sequential": _lut(_VIRIDIS), "diverging": _lut(_DIVERGING)}
_NAN_RGBA = np.array([int(NAN_HEX[i:i + 2], 16) for i in (1, 3, 5)] + [255], dtype=np.uint8)


def colormap(name: str) -> np.ndarray:
    """The 256 RGBA colours of ``"sequential"`` (viridis) or ``"diverging"`` (blue-grey-red)."""
    return _LUTS[name]


# ------------------------------------------------------------------------------- numbers

def readable_number(x, digits: int = 4, large: float = 1e5) -> str:
    """A float for people: ``digits`` significant digits, in scientific notation when it is
    smaller than 1e-3 or not smaller than ``large`` (gradients span many decades; this keeps
    0.000012 and 123456 readable in a narrow space)."""
    x = float(x)
    if x == 0:
        return "0"
    if not math.isfinite(x):
        return str(x)
    if 1e-3 <= abs(x) < large:
        return f"{x:.{digits}g}"
    return f"{x:.{digits - 1}e}"


def format_number(x, digits: int = 4) -> str:
    """A short text for one number: ``0.6379``, ``-2``, ``1.235e+05``, ``NaN``, ``+Inf``, ``true``."""
    if isinstance(x, (bool, np.bool_)):
        return "true" if x else "false"
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    if isinstance(x, (complex, np.complexfloating)):
        return f"{complex(x):.{digits}g}"
    x = float(x)
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "+Inf" if x > 0 else "-Inf"
    text = f"{x:.{digits}g}"
    return "0" if text == "-0" else text


def describe(value) -> str:
    """Shape and dtype as the blocks show them: ``[5] float32``, ``[] float32``."""
    arr = np.asarray(value)
    return f"{shape_text(arr.shape)} {arr.dtype.name}"


_SHORT_DTYPES = {"float16": "f16", "float32": "f32", "float64": "f64", "int8": "i8", "int16": "i16",
                 "int32": "i32", "int64": "i64", "uint8": "u8", "uint16": "u16", "uint32": "u32",
                 "uint64": "u64", "complex64": "c64", "complex128": "c128"}


class ValueStats:
    """Shape, dtype and statistics of one array; min/max/mean/std are over its finite values
    (None when it has none)."""

    __slots__ = ("shape", "dtype", "size", "nan", "posinf", "neginf", "min", "max", "mean", "std")

    def __init__(self, shape, dtype, size, nan=0, posinf=0, neginf=0, lo=None, hi=None, mean=None,
                 std=None):
        self.shape, self.dtype, self.size = tuple(shape), np.dtype(dtype), int(size)
        self.nan, self.posinf, self.neginf = int(nan), int(posinf), int(neginf)
        self.min, self.max, self.mean, self.std = lo, hi, mean, std

    @property
    def bad(self) -> int:
        return self.nan + self.posinf + self.neginf

    def describe(self, short: bool = False) -> str:
        """``[5] float32``; ``short``: ``[5] f32`` (for a narrow block)."""
        name = _SHORT_DTYPES.get(self.dtype.name, self.dtype.name) if short else self.dtype.name
        return f"{shape_text(self.shape)} {name}"

    def bad_text(self) -> str:
        """``3 NaN``, ``1 +Inf, 2 -Inf``..., or "" when every value is finite."""
        bits = []
        if self.nan:
            bits.append(f"{self.nan} NaN")
        if self.posinf:
            bits.append(f"{self.posinf} +Inf")
        if self.neginf:
            bits.append(f"{self.neginf} -Inf")
        return ", ".join(bits)

    def range_text(self, digits: int = 3) -> str:
        if self.min is None:
            return ""
        if self.min == self.max:
            return format_number(self.min, digits)
        lo, hi = format_number(self.min, digits), format_number(self.max, digits)
        while lo == hi and digits < 9:      # close values: as many digits as tell them apart
            digits += 1
            lo, hi = format_number(self.min, digits), format_number(self.max, digits)
        return f"{lo}…{hi}"


def value_stats(value) -> ValueStats:
    """Statistics of ``value``, NaN and Inf counted apart from the rest."""
    arr = np.asarray(value)
    kind = arr.dtype.kind
    if kind not in "biuf" or arr.size == 0:
        return ValueStats(arr.shape, arr.dtype, arr.size)
    nan = posinf = neginf = 0
    data = arr
    if kind == "f":
        finite = np.isfinite(arr)
        if not finite.all():
            nan = int(np.isnan(arr).sum())
            posinf = int(np.isposinf(arr).sum())
            neginf = int(np.isneginf(arr).sum())
            data = arr[finite]
    if data.size == 0:
        return ValueStats(arr.shape, arr.dtype, arr.size, nan, posinf, neginf)
    if kind == "b":
        data = data.astype(np.int8)
    lo, hi = data.min(), data.max()
    if kind == "f":
        lo, hi = float(lo), float(hi)
    else:
        lo, hi = int(lo), int(hi)
    with np.errstate(all="ignore"):
        mean = float(np.mean(data, dtype=np.float64))
        std = float(np.std(data, dtype=np.float64))
    return ValueStats(arr.shape, arr.dtype, arr.size, nan, posinf, neginf, lo, hi, mean, std)


# ------------------------------------------------------------------------------- pictures


def _reduce_blocks(m: np.ndarray, max_rows: int, max_cols: int) -> np.ndarray:
    """``m`` (2-D) shrunk to at most ``max_rows`` x ``max_cols`` cells, each the mean of the finite
    values of its block; a block holding a NaN is NaN, else one holding +Inf/-Inf is that."""
    m = np.asarray(m)
    if m.dtype.kind == "b":
        m = m.astype(np.int8)
    rows, cols = m.shape
    if rows <= max_rows and cols <= max_cols:
        return m.astype(np.float64)
    r0 = np.linspace(0, rows, min(rows, max_rows) + 1).astype(np.intp)[:-1]
    c0 = np.linspace(0, cols, min(cols, max_cols) + 1).astype(np.intp)[:-1]

    def total(a):
        return np.add.reduceat(np.add.reduceat(a, r0, axis=0), c0, axis=1)

    if m.dtype.kind != "f":
        counts = total(np.ones(m.shape, dtype=np.int64))
        return total(m.astype(np.float64)) / counts
    finite = np.isfinite(m)
    sums = total(np.where(finite, m, 0.0).astype(np.float64))
    counts = total(finite.astype(np.int64))
    with np.errstate(all="ignore"):
        out = sums / counts
    if not finite.all():
        out[total(np.isneginf(m).astype(np.int64)) > 0] = -np.inf
        out[total(np.isposinf(m).astype(np.int64)) > 0] = np.inf
        out[total(np.isnan(m).astype(np.int64)) > 0] = np.nan
    return out


def heatmap_rgba(m, max_cells: int = MAX_CELLS, diverging: bool = False, lo=None, hi=None):
    """A 2-D array as the RGBA colours (rows x cols x 4, uint8) of at most ``max_cells`` cells a
    side, with the value range its colours span: ``(rgba, lo, hi)``.

    Sequential colours (viridis) from the finite min to max, or, with ``diverging``, blue-grey-red
    symmetric around 0 (gradients). NaN is magenta; +Inf and -Inf take the end colours."""
    cells = _reduce_blocks(m, max_cells, max_cells)
    if lo is None or hi is None:
        finite = cells[np.isfinite(cells)]
        lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 0.0)
    if diverging:
        top = max(abs(lo), abs(hi))
        lo, hi = -top, top
    span = hi - lo
    with np.errstate(all="ignore"):
        t = (cells - lo) / span if span > 0 else np.where(np.isnan(cells), np.nan, 0.5)
        idx = np.clip(np.nan_to_num(t, nan=0.0, posinf=1.0, neginf=0.0) * 255.0 + 0.5, 0, 255)
    rgba = colormap("diverging" if diverging else "sequential")[idx.astype(np.uint8)]
    rgba[np.isnan(cells)] = _NAN_RGBA
    return np.ascontiguousarray(rgba), lo, hi


class OutputSummary:
    """One output's result line, computed once when results arrive (on the worker thread).

    ``kind``: "scalar" (one value), "vector" (one axis longer than 1: a sparkline), "matrix" (a
    heatmap of the last two axes, first slice), "empty" or "other" (no picture: complex...)."""

    __slots__ = ("kind", "stats", "shape_text", "short_shape_text", "value_text", "range_text", "bad_text", "cls",
                 "xs", "ys", "band", "zero", "bad_xs", "rgba")

    def __init__(self, kind, stats: ValueStats, value_text="", xs=None, ys=None, band=None, zero=None,
                 bad_xs=None, rgba=None):
        self.kind, self.stats = kind, stats
        self.shape_text = stats.describe()
        self.short_shape_text = stats.describe(short=True)
        self.value_text = value_text
        self.range_text = stats.range_text(2)
        self.bad_text = stats.bad_text()
        self.cls = dtype_class(stats.dtype)
        self.xs, self.ys, self.band, self.zero, self.bad_xs = xs, ys, band, zero, bad_xs
        self.rgba = rgba     # a matrix's heatmap colours (heatmap_rgba), rows x cols x 4

    def tooltip(self) -> str:
        s = self.stats
        bits = [self.shape_text]
        if self.kind == "scalar":
            bits.append(self.value_text)
        elif s.min is not None:
            bits.append(f"min {format_number(s.min)}, max {format_number(s.max)}, "
                        f"mean {format_number(s.mean)}, std {format_number(s.std)}")
        if self.bad_text:
            bits.append(f"<span style='color:#e0403a'>{self.bad_text}</span>")
        return " · ".join(bits)


def summarize(value) -> OutputSummary:
    """What a block's result line shows for ``value``."""
    arr = np.asarray(value)
    stats = value_stats(arr)
    if arr.dtype.kind not in "biuf":
        return OutputSummary("other", stats, "complex" if arr.dtype.kind == "c" else arr.dtype.name)
    if arr.size == 0:
        return OutputSummary("empty", stats, "empty")
    if arr.size == 1:
        return OutputSummary("scalar", stats, format_number(arr.reshape(-1)[0]))
    long_axes = [d for d in arr.shape if d != 1]
    if len(long_axes) == 1:
        return _vector_summary(arr.reshape(-1), stats)
    m = arr.reshape((-1,) + arr.shape[-2:])[0] if arr.ndim > 2 else arr
    rgba, _, _ = heatmap_rgba(m, MAX_CELLS)
    return OutputSummary("matrix", stats, rgba=rgba)


def _vector_summary(v: np.ndarray, stats: ValueStats) -> OutputSummary:
    n = v.size
    data = v.astype(np.float64) if v.dtype.kind != "f" else v
    finite = np.isfinite(data) if v.dtype.kind == "f" else np.ones(n, dtype=bool)
    band = None
    if n <= MAX_POINTS:
        xs = np.linspace(0.0, 1.0, n)
        ys = np.where(finite, data, np.nan).astype(np.float64)
        bad = ~finite
        bad_xs = xs[bad]
    else:
        starts = np.linspace(0, n, MAX_POINTS + 1).astype(np.intp)
        counts = np.add.reduceat(finite.astype(np.int64), starts[:-1])
        clean = np.where(finite, data, 0.0).astype(np.float64)
        with np.errstate(all="ignore"):
            ys = np.add.reduceat(clean, starts[:-1]) / counts
        lo = np.fmin.reduceat(np.where(finite, data, np.nan).astype(np.float64), starts[:-1])
        hi = np.fmax.reduceat(np.where(finite, data, np.nan).astype(np.float64), starts[:-1])
        xs = (starts[:-1] + starts[1:] - 1) / 2.0 / max(n - 1, 1)
        bad_xs = xs[counts < np.diff(starts)]
        band = (lo, hi)
    if stats.min is None:       # nothing finite: no line, only the NaN/Inf marks
        return OutputSummary("vector", stats, xs=xs, ys=np.full(xs.shape, np.nan), bad_xs=bad_xs)
    lo_v, hi_v = float(stats.min), float(stats.max)
    span = hi_v - lo_v

    def norm(a):
        return (a - lo_v) / span if span > 0 else np.where(np.isnan(a), np.nan, 0.5)

    zero = (0.0 - lo_v) / span if span > 0 and lo_v < 0.0 < hi_v else None
    return OutputSummary("vector", stats, xs=xs, ys=norm(ys),
                         band=None if band is None else (norm(band[0]), norm(band[1])),
                         zero=zero, bad_xs=bad_xs)


# ------------------------------------------------------------------------------- the block's lines


class BlockRun:
    """What a run shows on one block: ``summaries`` by output port (None: no value for it),
    ``error`` (the run failed at this block: the message), ``stale`` (the page was edited since),
    ``badge`` (the word on the chip over a block a run failed at: "NaN", "error", "no feed"...).
    The canvas lays it out and paints it (blockflow/gui/canvas/resultview.py: BlockResults)."""

    __slots__ = ("summaries", "error", "stale", "badge")

    def __init__(self, summaries: dict, error: str = "", stale: bool = False, badge: str = ""):
        self.summaries, self.error, self.stale, self.badge = summaries, error, stale, badge
