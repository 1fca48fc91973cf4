"""The Train panel's curves: the loss (log scale) and the page's plotted metrics, with a smoothing
slider on the loss as TensorBoard has (an exponential moving average, 0 to 0.99; the raw curve
stays faint behind the smoothed one). The smoothing is kept in the window's settings.

pyqtgraph costs 0.3 s to import: the plots are made on first use (:meth:`TrainCurves.ensure_plot`),
the slider row at once.
"""
from __future__ import annotations

import numpy as np
from PySide6.QtCore import QEvent, QPoint, Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QScrollArea, QSlider, QVBoxLayout, QWidget

from blockflow.project import split_port_text

__all__ = ["TrainCurves", "smooth", "RunningSmooth", "log_ticks", "SMOOTHING_KEY", "DEFAULT_SMOOTHING", "MAX_SMOOTHING"]

#: where the smoothing is kept in the settings, its default (TensorBoard's) and its top
SMOOTHING_KEY, DEFAULT_SMOOTHING, MAX_SMOOTHING = "train/lossSmoothing", 0.6, 0.99
#: the plots' least height; in a scrolled panel they take the rest of the height in sight
MIN_PLOT_HEIGHT = 340
_LOSS_COLOUR = "#3b7dd8"
_METRIC_COLOURS = ("#e07b39", "#2ca02c", "#9467bd", "#d62728", "#17becf")


class RunningSmooth:
    """``smooth`` kept up to date while a curve grows: the points smoothed before are not done
    again (a training's loss grows a batch at a time; smoothing all of it at each batch would
    cost O(n^2) over a long run). Anything else (another weight, a new run) starts over."""

    def __init__(self):
        self.weight, self.src, self.out = None, np.zeros(0), np.zeros(0)
        self.last, self.count = 0.0, 0

    def __call__(self, values, weight: float) -> np.ndarray:
        values = np.asarray(values, dtype=np.float64)
        weight = min(max(float(weight), 0.0), MAX_SMOOTHING)
        done = self.src.size
        if (weight != self.weight or values.size < done
                or not np.array_equal(values[:done], self.src, equal_nan=True)):
            self.weight, self.src, self.out = weight, np.zeros(0), np.zeros(0)
            self.last, self.count, done = 0.0, 0, 0
        if weight == 0.0:
            self.src, self.out = values.copy(), values.copy()
            return self.out.copy()
        new = np.empty(values.size - done)
        last, count = self.last, self.count
        for i, v in enumerate(values[done:]):
            if not np.isfinite(v):
                new[i] = v
                continue
            last = last * weight + (1.0 - weight) * v
            count += 1
            new[i] = last / (1.0 - weight ** count)
        self.last, self.count = last, count
        self.src, self.out = values.copy(), np.concatenate([self.out, new])
        return self.out.copy()


def smooth(values, weight: float) -> np.ndarray:
    """TensorBoard's smoothing: an exponential moving average of the finite values, debiased (the
    first points are not pulled toward 0). A non-finite value stays so and does not enter the
    average: one diverged step does not turn the rest of the curve into NaN."""
    return RunningSmooth()(values, weight)


def log_ticks(lo: float, hi: float) -> list[list[tuple[float, str]]]:
    """The loss axis's ticks (log scale: positions are log10 of the values) for values from
    ``lo`` to ``hi`` (> 0): labelled decades, and 2 and 5 times them labelled too where the range
    spans under two decades; the other multiples unlabelled. pyqtgraph's own labels every minor
    tick of a short range, one over another."""
    first, last = int(np.floor(np.log10(lo))), int(np.ceil(np.log10(hi)))
    if last - first > 60:             # a diverging loss: decades only, a few of them
        step = (last - first) // 10 + 1
        return [[(float(d), f"1e{d}") for d in range(first, last + 1, step)], []]
    few = last - first <= 2
    major, minor = [], []
    for d in range(first, last + 1):
        for m in range(1, 10):
            value = m * 10.0 ** d
            if m == 1 or few and m in (2, 5):
                major.append((float(np.log10(value)), f"{value:.3g}"))
            else:
                minor.append((float(np.log10(value)), ""))
    return [major, minor]


def _read_smoothing(settings) -> float:
    """The saved smoothing; anything unreadable or out of range (a hand-edited file) is the default."""
    if settings is None:
        return DEFAULT_SMOOTHING
    try:
        value = float(settings.value(SMOOTHING_KEY, DEFAULT_SMOOTHING))
    except (TypeError, ValueError):
        return DEFAULT_SMOOTHING
    return value if 0.0 <= value <= MAX_SMOOTHING else DEFAULT_SMOOTHING


class TrainCurves(QWidget):
    """The slider row and (once made) the plots. ``settings``: a QSettings the smoothing is
    read from and kept in (None: not kept)."""

    smoothing_changed = Signal(float)

    def __init__(self, settings=None, parent=None):
        super().__init__(parent)
        self.settings = settings
        self._plot: dict | None = None
        self.losses = np.zeros(0)
        self.metric_values: dict[str, list[float]] = {}
        self.drawn = (np.zeros(0), np.zeros(0))     # the raw and the smoothed loss last drawn
        self._smoother = RunningSmooth()
        self.slider = QSlider(Qt.Horizontal)
        self.slider.setRange(0, round(MAX_SMOOTHING * 100))
        self.slider.setToolTip("Smoothing of the loss curve: an exponential moving average (0: none); "
                               "the raw curve stays faint behind")
        self.slider.setValue(round(_read_smoothing(settings) * 100))
        self.slider.setFocusPolicy(Qt.StrongFocus)
        self.value_label = QLabel()
        self.value_label.setMinimumWidth(self.value_label.fontMetrics().horizontalAdvance("0.00") + 4)
        self.slider.valueChanged.connect(self._on_slider)
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(QLabel("Smoothing"))
        row.addWidget(self.slider, 1)
        row.addWidget(self.value_label)
        self.column = QVBoxLayout(self)
        self.column.setContentsMargins(0, 0, 0, 0)
        self.column.setSpacing(2)
        self.column.addLayout(row)
        self._show_value()

    @property
    def smoothing(self) -> float:
        return self.slider.value() / 100.0

    def set_smoothing(self, value: float) -> None:
        self.slider.setValue(round(min(max(value, 0.0), MAX_SMOOTHING) * 100))

    def _on_slider(self, _value: int) -> None:
        self._show_value()
        if self.settings is not None:
            self.settings.setValue(SMOOTHING_KEY, self.smoothing)
        self._draw_loss()
        self.smoothing_changed.emit(self.smoothing)

    def _show_value(self) -> None:
        self.value_label.setText(f"{self.smoothing:.2f}")

    # ------------------------------------------------------------------ the plots
    @property
    def made(self) -> bool:
        return self._plot is not None

    def ensure_plot(self) -> None:
        """Make the plots (imports pyqtgraph on first use)."""
        if self._plot is not None:
            return
        import pyqtgraph as pg

        pg.setConfigOptions(antialias=True, foreground=self.palette().windowText().color(),
                            background=self.palette().base().color())
        widget = pg.GraphicsLayoutWidget()
        loss_plot = widget.addPlot(row=0, col=0)
        loss_plot.setLogMode(y=True)
        loss_plot.setLabel("left", "loss")
        loss_plot.showGrid(x=True, y=True, alpha=0.2)
        loss_plot.setDownsampling(auto=True)
        loss_plot.setClipToView(True)
        faint = pg.mkColor(_LOSS_COLOUR)
        faint.setAlpha(70)
        metric_plot = widget.addPlot(row=1, col=0)
        metric_plot.setLabel("left", "metrics")
        metric_plot.setLabel("bottom", "step")
        metric_plot.addLegend(offset=(-10, 10))
        metric_plot.showGrid(x=True, y=True, alpha=0.2)
        metric_plot.setXLink(loss_plot)
        widget.ci.layout.setRowStretchFactor(0, 3)     # the loss is what one watches
        widget.ci.layout.setRowStretchFactor(1, 2)
        self._plot = {"widget": widget, "loss_axis": loss_plot.getAxis("left"), "raw": loss_plot.plot(pen=pg.mkPen(faint, width=1)),
                      "loss": loss_plot.plot(pen=pg.mkPen(_LOSS_COLOUR, width=2)),
                      "metric_plot": metric_plot, "metric_curves": {}, "pg": pg}
        self.column.addWidget(widget, 1)
        self._fit_height()
        self.redraw()

    # ------------------------------------------------------------------ the height
    def _scroll_area(self) -> QScrollArea | None:
        w = self.parentWidget()
        while w is not None and not isinstance(w, QScrollArea):
            w = w.parentWidget()
        return w

    def showEvent(self, event):
        super().showEvent(event)
        area = self._scroll_area()
        if area is not None:
            area.viewport().installEventFilter(self)      # follow the dock's height
        self._fit_height()

    def eventFilter(self, obj, event):   # noqa: N802 (Qt's name)
        if event.type() == QEvent.Resize:
            self._fit_height()
        return False

    def _fit_height(self) -> None:
        """The plots fill the dock's height in sight below what is above them (the settings are
        below, scrolled to): in a panel that scrolls, a stretch gets no more than its minimum."""
        if self._plot is None:
            return
        widget = self._plot["widget"]
        area = self._scroll_area()
        height = MIN_PLOT_HEIGHT
        if area is not None and area.widget() is not None:
            top = widget.mapTo(area.widget(), QPoint(0, 0)).y() if widget.isVisible() else \
                self.mapTo(area.widget(), QPoint(0, 0)).y() + self.slider.sizeHint().height() + 2
            height = max(height, area.viewport().height() - top - 6)
        widget.setFixedHeight(height)         # a scroll area gives a widget its size hint, not more room

    def set_data(self, losses, metric_values: dict) -> None:
        self.losses = np.asarray(losses, dtype=np.float64)
        self.metric_values = metric_values
        self.redraw()

    def redraw(self) -> None:
        if self._plot is None:
            return
        self._draw_loss()
        pg = self._plot["pg"]
        for k, (name, values) in enumerate(self.metric_values.items()):
            curve = self._plot["metric_curves"].get(name)
            if curve is None:
                curve = self._plot["metric_plot"].plot(pen=pg.mkPen(_METRIC_COLOURS[k % len(_METRIC_COLOURS)], width=2),
                                                       name=split_port_text(name)[0])
                self._plot["metric_curves"][name] = curve
            curve.setData(np.arange(len(values)), np.asarray(values, dtype=np.float64))

    def _draw_loss(self) -> None:
        if self._plot is None:
            return
        raw, smoothed = self._plot["raw"], self._plot["loss"]
        losses = self.losses
        if not losses.size:
            self.drawn = (np.zeros(0), np.zeros(0))
            raw.setData([], [])
            smoothed.setData([], [])
            return
        steps = np.arange(losses.size)
        # log scale: a loss <= 0 has no place on it (a gap, not a crash)
        positive = np.where(losses > 0, losses, np.nan)
        finite = positive[np.isfinite(positive)]
        if finite.size:
            self._plot["loss_axis"].setTicks(log_ticks(float(finite.min()), float(finite.max())))
        shown = self._smoother(positive, self.smoothing)
        self.drawn = (positive, shown)
        raw.setVisible(self.smoothing > 0)
        raw.setData(steps, positive, connect="finite")
        smoothed.setData(steps, shown, connect="finite")

    def curve_points(self) -> int:
        """How many points the loss curve shows."""
        if self._plot is None:
            return 0
        x, _ = self._plot["loss"].getData()
        return 0 if x is None else len(x)
