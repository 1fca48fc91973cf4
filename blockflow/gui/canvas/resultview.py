"""What a run shows on a block, painted: each output's line (a number, a sparkline or a small
heatmap, with shape, dtype, range and NaN/Inf counts) laid out once and painted cheaply by its
NodeItem.

The summaries are made off the UI thread by blockflow.present.values.summarize; ``BlockResults``
lays a block's lines out (on the UI thread, when results arrive or the block's geometry changes)
and paints only what was prepared. Must not import the view, the window or the runner.
"""
from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QFont, QFontMetricsF, QPainter, QPen, QPolygonF

from blockflow.present.values import BlockRun, OutputSummary
from blockflow.gui.common.heatmap import rgba_image
from blockflow.gui.common.theme import FONT_FAMILY

__all__ = ["BlockResults"]


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
                 "segments", "band", "dots", "zero", "bad_ticks", "image_rect", "image")

    def __init__(self):
        self.segments, self.dots, self.bad_ticks = [], [], []
        self.band = self.zero = self.image_rect = self.name_rect = self.image = None
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
        self._images: dict = {}         # port -> its heatmap's QImage, made once

    @classmethod
    def of(cls, run: BlockRun | None) -> "BlockResults | None":
        """The painted form of what a run shows on a block (None: nothing)."""
        return None if run is None else cls(run.summaries, run.error, run.stale, run.badge)

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
            if s.rgba is not None:
                line.image = self._images.get(port)
                if line.image is None:
                    line.image = self._images[port] = rgba_image(s.rgba)
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
            rows, cols = line.image.height(), line.image.width()
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
            painter.drawImage(line.image_rect, line.image)
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
