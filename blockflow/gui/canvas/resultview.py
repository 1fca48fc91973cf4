"""What a run shows on a block: each output summarised once (a number, a sparkline or a small
heatmap, with shape, dtype, range and NaN/Inf counts) and painted cheaply by its NodeItem.

``summarize`` does the numpy work and builds heatmap QImages; it runs on the run's worker thread
(nothing in it touches a widget). ``BlockResults`` lays a block's lines out (on the UI thread, when
results arrive or the block's geometry changes) and paints only what was prepared. The colour maps
are shared with the value viewer. Must not import the canvas, the window or the runner.
"""
from __future__ import annotations

import math

import numpy as np
from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QFont, QFontMetricsF, QImage, QPainter, QPen, QPolygonF

from blockflow.spec import shape_text
from blockflow.gui.common.theme import FONT_FAMILY, dtype_class

__all__ = ["ValueStats", "OutputSummary", "BlockResults", "value_stats", "summarize", "describe",
           "format_number", "heatmap_image", "colormap", "NAN_COLOR", "MAX_POINTS", "MAX_CELLS"]

#: a sparkline has at most this many points (longer vectors: the mean of each bin, and a band
#: from its min to its max)
MAX_POINTS = 64
#: a block's heatmap has at most this many cells per side (bigger matrices: block means)
MAX_CELLS = 16
#: cells whose value (or any value of their block) is NaN
NAN_COLOR = QColor("#ff00ff")

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
_NAN_RGBA = np.array([NAN_COLOR.red(), NAN_COLOR.green(), NAN_COLOR.blue(), 255], dtype=np.uint8)


def colormap(name: str) -> np.ndarray:
    """The 256 RGBA colours of ``"sequential"`` (viridis) or ``"diverging"`` (blue-grey-red)."""
    return _LUTS[name]


# ------------------------------------------------------------------------------- numbers


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


def heatmap_image(m, max_cells: int = MAX_CELLS, diverging: bool = False, lo=None, hi=None):
    """A 2-D array as a QImage of at most ``max_cells`` cells a side (one pixel per cell: draw it
    scaled without smoothing), with the value range its colours span: ``(image, lo, hi)``.

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
    rows, cols = cells.shape
    data = np.ascontiguousarray(rgba)
    image = QImage(data.tobytes(), cols, rows, cols * 4, QImage.Format_RGBA8888).copy()
    return image, lo, hi


class OutputSummary:
    """One output's result line, computed once when results arrive (on the worker thread).

    ``kind``: "scalar" (one value), "vector" (one axis longer than 1: a sparkline), "matrix" (a
    heatmap of the last two axes, first slice), "empty" or "other" (no picture: complex...)."""

    __slots__ = ("kind", "stats", "shape_text", "short_shape_text", "value_text", "range_text", "bad_text", "cls",
                 "xs", "ys", "band", "zero", "bad_xs", "image")

    def __init__(self, kind, stats: ValueStats, value_text="", xs=None, ys=None, band=None, zero=None,
                 bad_xs=None, image=None):
        self.kind, self.stats = kind, stats
        self.shape_text = stats.describe()
        self.short_shape_text = stats.describe(short=True)
        self.value_text = value_text
        self.range_text = stats.range_text(2)
        self.bad_text = stats.bad_text()
        self.cls = dtype_class(stats.dtype)
        self.xs, self.ys, self.band, self.zero, self.bad_xs, self.image = xs, ys, band, zero, bad_xs, image

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
    image, _, _ = heatmap_image(m, MAX_CELLS)
    return OutputSummary("matrix", stats, image=image)


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


def _font(points: float, bold: bool = False, family: str = FONT_FAMILY) -> QFont:
    f = QFont(family)
    f.setPointSizeF(points)
    f.setBold(bold)
    f.setHintingPreference(QFont.PreferNoHinting)
    return f


class _Fonts:
    """Made on first use (font metrics need the QApplication)."""

    ready = False

    @classmethod
    def get(cls):
        if not cls.ready:
            cls.value = _font(7.5, True, "DejaVu Sans Mono")
            cls.info = _font(6.5)
            cls.name = _font(6.0, True)
            cls.chip = _font(5.5, True)
            cls.value_fm, cls.info_fm = QFontMetricsF(cls.value), QFontMetricsF(cls.info)
            cls.name_fm, cls.chip_fm = QFontMetricsF(cls.name), QFontMetricsF(cls.chip)
            cls.ready = True
        return cls


_AL = int(Qt.AlignLeft | Qt.AlignVCenter)
_AR = int(Qt.AlignRight | Qt.AlignVCenter)
_ELIDE = Qt.ElideRight


def _fit(fm: QFontMetricsF, texts, width: float) -> str:
    """The first of ``texts`` that fits ``width``, else the last one elided."""
    for text in texts:
        if fm.horizontalAdvance(text) <= width:
            return text
    return fm.elidedText(texts[-1], _ELIDE, width)


class _Line:
    """One output's line, laid out in item coordinates: texts elided, polylines and rects ready."""

    __slots__ = ("summary", "name", "name_rect", "value_rect", "info_top", "info_bottom", "texts",
                 "segments", "band", "dots", "zero", "bad_ticks", "image_rect")

    def __init__(self):
        self.segments, self.dots, self.bad_ticks = [], [], []
        self.band = self.zero = self.image_rect = self.name_rect = None
        self.texts = {}


class BlockResults:
    """The results one block shows: ``summaries`` by output port (None: no value for it),
    ``error`` (the run failed at this block: the message), ``stale`` (the page was edited since)."""

    LINE_PAD = 3.0

    def __init__(self, summaries: dict, error: str = "", stale: bool = False, badge: str = ""):
        self.summaries = summaries
        self.error = error
        self.stale = stale
        #: the word on the red chip over a block a run failed at ("NaN", "error", "no feed"...)
        self.badge = badge or ("error" if error else "")
        self._lines: list[_Line] = []
        self._error_rect: QRectF | None = None
        self._error_text = ""
        self._chip: QRectF | None = None
        self._badge_rect: QRectF | None = None
        self._area = QRectF()

    @property
    def has_values(self) -> bool:
        return any(s is not None for s in self.summaries.values())

    @property
    def bad(self) -> bool:
        return any(s is not None and s.stats.bad for s in self.summaries.values())

    # ------------------------------------------------------------------ layout (UI thread)
    def layout(self, ports, rects, area: QRectF) -> None:
        """Place the lines of ``ports`` (the block's outputs, in order) in ``rects``."""
        F = _Fonts.get()
        pad = self.LINE_PAD
        self._area = QRectF(area)
        self._lines = []
        named = len(ports) > 1
        name_w = 0.0
        # An OutputList's ports (output[0], output[1]...) are told apart by their index alone.
        names = {p: (p[p.index("["):] if p.endswith("]") and "[" in p else p) for p in ports}
        if named:
            name_w = min(max(F.name_fm.horizontalAdvance(n) for n in names.values()) + 5, 40.0)
        for port, rect in zip(ports, rects):
            s = self.summaries.get(port)
            if s is None:
                continue
            line = _Line()
            line.summary = s
            inner = rect.adjusted(pad, 1.5, -pad, -1.5)
            if named:
                line.name_rect = QRectF(inner.left(), inner.top(), name_w - 3, inner.height())
                line.texts["name"] = F.name_fm.elidedText(names[port], _ELIDE, name_w - 3)
                inner.setLeft(inner.left() + name_w)
            self._layout_line(line, s, inner, F)
            self._lines.append(line)
        self._error_rect = None
        if self.error:
            first = rects[0] if rects else area
            # With values (a NaN run) the message goes to the tooltip; without, it fills the line.
            if not self.has_values:
                self._error_rect = first.adjusted(pad + 1, 0, -pad, 0)
                self._error_text = F.info_fm.elidedText("⚠ " + self.error, _ELIDE,
                                                        self._error_rect.width())
        # "stale" takes the place of the first line's shape text (the rest stays, faded)
        chip_w = F.chip_fm.horizontalAdvance("stale") + 8
        top = self._lines[0].info_top if self._lines else QRectF(area.right() - chip_w - 4, area.top(),
                                                                 chip_w, min(area.height(), 16.0))
        self._chip = QRectF(top.right() - chip_w, top.center().y() - 4.75, chip_w, 9.5)
        self._badge_rect = None
        if self.badge:      # on the block's top-left corner
            bw = F.chip_fm.horizontalAdvance(self.badge) + 10
            self._badge_rect = QRectF(area.left() - 10, -7.0, bw, 11.0)

    def _layout_line(self, line: _Line, s: OutputSummary, r: QRectF, F) -> None:
        fm = F.info_fm
        if s.kind in ("scalar", "empty", "other"):
            value_w = F.value_fm.horizontalAdvance(s.value_text)
            info_w = min(fm.horizontalAdvance(s.shape_text) + 2, max(r.width() - value_w - 6, r.width() * 0.45))
            value_rect = QRectF(r.left(), r.top(), r.width() - info_w - 4, r.height())
            line.texts["value"] = F.value_fm.elidedText(s.value_text, _ELIDE, value_rect.width())
            line.value_rect = value_rect
            line.info_top = QRectF(r.right() - info_w, r.top(), info_w, r.height())
            line.info_bottom = None
            line.texts["shape"] = _fit(fm, (s.shape_text, s.short_shape_text), info_w)
            return
        chart = QRectF(r.left() + 1, r.top() + 1, 0.0, r.height() - 2)
        if s.kind == "matrix":          # the heatmap as wide as its cells need, the text the rest
            rows, cols = s.image.height(), s.image.width()
            cell = chart.height() / rows        # cells a little wider than tall read better
            chart.setWidth(min(max(cols * cell, chart.height()) * 1.6, r.width() * 0.45))
            line.image_rect = QRectF(chart.left(), chart.top(), chart.width(), chart.height())
            info_w = r.width() - chart.width() - 6
        else:
            want = max(fm.horizontalAdvance(s.shape_text), fm.horizontalAdvance(s.bad_text or s.range_text)) + 2
            info_w = min(want, r.width() * 0.58)
            chart.setWidth(r.width() - info_w - 6)
        half = r.height() / 2
        line.info_top = QRectF(r.right() - info_w, r.top(), info_w, half)
        line.info_bottom = QRectF(r.right() - info_w, r.top() + half, info_w, half)
        line.texts["shape"] = _fit(fm, (s.shape_text, s.short_shape_text), info_w)
        line.texts["range"] = fm.elidedText(s.bad_text or s.range_text, _ELIDE, info_w)
        line.value_rect = chart
        if s.kind == "matrix":
            return
        x0, y0, w, h = chart.left() + 1.5, chart.top() + 1.5, chart.width() - 3, chart.height() - 3

        def pt(x, y):
            return QPointF(x0 + x * w, y0 + (1.0 - y) * h)

        seg = []
        for x, y in zip(s.xs.tolist(), s.ys.tolist()):
            if y != y:                       # NaN: a gap
                if seg:
                    line.segments.append(QPolygonF(seg))
                seg = []
                continue
            seg.append(pt(x, y))
        if seg:
            line.segments.append(QPolygonF(seg))
        if len(s.xs) <= 16:
            line.dots = [p for poly in line.segments for p in poly]
        if s.band is not None:
            lo, hi = s.band
            top = [pt(x, y) for x, y in zip(s.xs.tolist(), hi.tolist()) if y == y]
            bottom = [pt(x, y) for x, y in zip(s.xs.tolist(), lo.tolist()) if y == y]
            if top:
                line.band = QPolygonF(top + bottom[::-1])
        if s.zero is not None:
            line.zero = (pt(0.0, s.zero), pt(1.0, s.zero))
        line.bad_ticks = [x0 + x * w for x in s.bad_xs.tolist()]

    # ------------------------------------------------------------------ painting (UI thread)
    def paint(self, painter: QPainter, style) -> None:
        """Draw what ``layout`` prepared (no numpy, no text measuring)."""
        F = _Fonts.get()
        if self.stale:
            painter.setOpacity(0.38)
        smooth = painter.testRenderHint(QPainter.SmoothPixmapTransform)
        for i, line in enumerate(self._lines):
            self._paint_line(painter, style, line, F, not (self.stale and i == 0))
        if smooth:
            painter.setRenderHint(QPainter.SmoothPixmapTransform, True)
        if self.stale:
            painter.setOpacity(1.0)
        if self._error_rect is not None:
            painter.setFont(F.info)
            painter.setPen(QPen(style.error))
            painter.drawText(self._error_rect, _AL, self._error_text)
        if self.stale and self._chip is not None:
            self._paint_chip(painter, self._chip, style.warning, "stale", F)
        if self._badge_rect is not None:
            self._paint_chip(painter, self._badge_rect, style.error, self.badge, F)

    @staticmethod
    def _paint_chip(painter, rect: QRectF, colour: QColor, text: str, F) -> None:
        painter.setPen(Qt.NoPen)
        painter.setBrush(colour)
        painter.drawRoundedRect(rect, 3, 3)
        painter.setFont(F.chip)
        painter.setPen(QPen(QColor("#ffffff")))
        painter.drawText(rect, int(Qt.AlignCenter), text)

    def _paint_line(self, painter, style, line: _Line, F, shape: bool) -> None:
        s = line.summary
        if line.name_rect is not None:
            painter.setFont(F.name)
            painter.setPen(style.muted_pen)
            painter.drawText(line.name_rect, _AL, line.texts["name"])
        painter.setFont(F.info)
        painter.setPen(style.muted_pen)
        if shape:
            painter.drawText(line.info_top, _AR, line.texts["shape"])
        if line.info_bottom is not None:
            painter.setPen(QPen(style.error) if s.bad_text else style.muted_pen)
            painter.drawText(line.info_bottom, _AR, line.texts["range"])
        if s.kind in ("scalar", "empty", "other"):
            painter.setFont(F.value)
            painter.setPen(QPen(style.error) if s.bad_text else style.text_pen)
            painter.drawText(line.value_rect, _AL, line.texts["value"])
            return
        if line.image_rect is not None:
            painter.setRenderHint(QPainter.SmoothPixmapTransform, False)
            painter.drawImage(line.image_rect, s.image)
            painter.setPen(style.port_outline)
            painter.setBrush(Qt.NoBrush)
            painter.drawRect(line.image_rect)
            return
        colour = style.dtype.get(s.cls, style.dtype["any"])
        if line.zero is not None:
            pen = QPen(style.muted, 0.6, Qt.DotLine)
            painter.setPen(pen)
            painter.drawLine(*line.zero)
        if line.band is not None:
            fill = QColor(colour)
            fill.setAlpha(70)
            painter.setPen(Qt.NoPen)
            painter.setBrush(fill)
            painter.drawPolygon(line.band)
        painter.setPen(QPen(colour, 1.3, Qt.SolidLine, Qt.RoundCap, Qt.RoundJoin))
        painter.setBrush(Qt.NoBrush)
        for poly in line.segments:
            if poly.size() == 1:
                painter.drawPoint(poly[0])
            else:
                painter.drawPolyline(poly)
        if line.dots:
            painter.setPen(Qt.NoPen)
            painter.setBrush(colour)
            for p in line.dots:
                painter.drawEllipse(p, 1.5, 1.5)
        if line.bad_ticks:
            r = line.value_rect
            painter.setPen(QPen(style.error, 1.4))
            for x in line.bad_ticks:
                painter.drawLine(QPointF(x, r.bottom() - 4), QPointF(x, r.bottom()))

    def flat_color(self, style) -> QColor:
        """The result area's one colour in the middle distance (no text or pictures there)."""
        if self.error or self.bad:
            return _mix(style.result_area, style.error, 0.45)
        if self.stale or not self.has_values:
            return style.result_area
        return _mix(style.result_area, style.dtype["float"], 0.35)

    # ------------------------------------------------------------------ words
    def tooltip_lines(self, ports) -> list[str]:
        lines = []
        if self.error:
            lines.append(f"<span style='color:#e0403a'>run failed here: {_esc(self.error)}</span>")
        for port in ports:
            s = self.summaries.get(port)
            if s is not None:
                lines.append(f"{_esc(port)}: {s.tooltip()}")
        if self.stale and lines:
            lines.append("<i>stale: the page was edited after this run (run again to refresh)</i>")
        return lines


def _mix(a: QColor, b: QColor, t: float) -> QColor:
    return QColor.fromRgbF(a.redF() + (b.redF() - a.redF()) * t, a.greenF() + (b.greenF() - a.greenF()) * t,
                           a.blueF() + (b.blueF() - a.blueF()) * t, 1.0)


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
