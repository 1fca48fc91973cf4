"""Gradient highlighting on the canvas: every wire coloured and thickened by the gradient it carries.

After a backward run (:meth:`GradientHighlighter.show`), wires that carry gradient are drawn in a
perceptual colour map (viridis) and a width, both on a log scale of the gradient's norm; wires a
StopGradient cuts are grey with a dash-dot pattern, wires with no gradient to the target thin,
grey and dashed, and the blocks the cut leaves without gradient are dimmed. Where one output feeds
several wires that carry gradient, a label shows the contributions and their sum. A legend sits in
the view's bottom-left corner. Before a run, :meth:`GradientHighlighter.show_paths` shows where
gradient can flow. The numbers come from blockflow.present.gradview; nothing here computes gradients.
Must not import the window, the runner or the teaching panels (they use this module).
"""
from __future__ import annotations

import html
import math
from typing import NamedTuple

import numpy as np
import shiboken6
from PySide6.QtCore import QEvent, QObject, QPointF, QRectF, QSizeF, Qt, QTimer, Signal
from PySide6.QtGui import QBrush, QColor, QFontMetricsF, QPainter, QPen
from PySide6.QtWidgets import QGraphicsItem, QWidget

from blockflow.present.gradview import CUT, FLOWS, Fanout, GradientScale, GradientView, describe_array
from blockflow.project import Edge
from blockflow.gui.canvas.items import EdgeItem, NodeItem
from blockflow.gui.common.theme import Style, _mix

__all__ = ["GradientHighlighter", "WireStyle", "Legend", "LegendOverlay", "FanoutLabel", "LEVELS",
           "VIRIDIS", "level_colours", "level_width", "viridis"]

#: colour levels of the norm scale (one shared pen per level)
LEVELS = 24

#: viridis (matplotlib's perceptually uniform map) at 0, 0.1, ..., 1; sampled by linear
#: interpolation. Its lightness rises monotonically from deep purple to yellow.
VIRIDIS = ("#440154", "#482475", "#414487", "#355f8d", "#2a788e", "#21918c", "#22a884", "#44bf70",
           "#7ad151", "#bddf26", "#fde725")

#: the stretch of viridis the levels run along, (smallest norm, largest norm): on a light canvas
#: from light green to deep purple, on a dark one from blue to yellow, so that a bigger gradient is
#: always the one that stands out more from the background (and the faintest still reads on it)
RANGE_LIGHT = (0.78, 0.0)
RANGE_DARK = (0.28, 1.0)

#: a gradient whose norm is below this fraction of the largest one is drawn as zero ("≈ 0"): it is
#: zero up to rounding (float32 keeps about 7 digits; e.g. the 1e-9 that reaches the max in the
#: stable softmax, whose true gradient is 0) or has vanished, and it would otherwise stretch the log
#: scale over decades no other wire uses. The colour scale runs from the smallest other norm.
NEGLIGIBLE = 1e-6

#: fan-out labels drawn at most (a generated page of thousands of blocks has hundreds of
#: fan-outs: beyond this, only the one of the block being stepped through is labelled; a wire's
#: tooltip still tells its share)
MAX_FANOUT_LABELS = 40

#: up to this many elements the fan-out label shows the arrays themselves, else their norms
SHOW_ARRAYS_UP_TO = 4

NONE = "none"        # wire_style state when no gradient view is shown


def viridis(t: float) -> QColor:
    """The viridis colour at ``t`` in [0, 1]."""
    t = min(1.0, max(0.0, float(t)))
    x = t * (len(VIRIDIS) - 1)
    i = min(int(x), len(VIRIDIS) - 2)
    a, b = QColor(VIRIDIS[i]), QColor(VIRIDIS[i + 1])
    f = x - i
    return QColor(round(a.red() + (b.red() - a.red()) * f), round(a.green() + (b.green() - a.green()) * f),
                  round(a.blue() + (b.blue() - a.blue()) * f))


def level_colours(dark: bool, levels: int = LEVELS) -> list[QColor]:
    """The colour of each norm level, smallest first, for a dark or a light canvas."""
    lo, hi = RANGE_DARK if dark else RANGE_LIGHT
    return [viridis(lo + (hi - lo) * k / (levels - 1)) for k in range(levels)]


def level_width(level: int, fine: bool, levels: int = LEVELS) -> float:
    """A wire's width at a norm level: 2 to 6.5 px; on big pages (fine wires) 1 to 3 px."""
    f = level / (levels - 1)
    return 1.0 + 2.0 * f if fine else 2.0 + 4.5 * f


class WireStyle(NamedTuple):
    """How a wire is drawn now: the gradient view's state of it (``flows``, ``cut``, ``unreached``,
    ``idle``; ``none`` when no gradient is shown), its norm level (-1: no level, a zero or
    negligible gradient (see NEGLIGIBLE), or    the static view), its colour (``#rrggbb``), its width and whether it is dashed."""

    state: str
    level: int
    colour: str
    width: float
    dashed: bool


def _fmt(x: float) -> str:
    """A number in 3 significant digits (scientific notation when tiny or huge)."""
    x = float(x)
    if x == 0:
        return "0"
    if not math.isfinite(x):
        return str(x)
    if 1e-3 <= abs(x) < 1e4:
        return f"{x:.3g}"
    return f"{x:.2e}"


def _power(x: float) -> str:
    """A power of ten as text: 1e-06 -> 10⁻⁶."""
    exponent = str(round(math.log10(x)))
    return "10" + exponent.translate(str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹"))


def _array_text(a) -> str:
    a = np.asarray(a, dtype=np.float64)
    if a.size == 1:
        return _fmt(a.ravel()[0])
    return "[" + ", ".join(_fmt(v) for v in a.ravel()) + "]"


def _norm(a) -> float:
    return float(np.linalg.norm(np.asarray(a, dtype=np.float64).ravel()))


# ------------------------------------------------------------------------------------- pens
class _Pens:
    """The shared pens of one Style (light or dark, fine wires or not)."""

    def __init__(self, style: Style):
        self.key = (style.key, style.fine_wires)
        fine = style.fine_wires
        bg, text = style.background, style.text
        self.colours = level_colours(style.dark)
        self.levels = [self._pen(c, level_width(k, fine), fine) for k, c in enumerate(self.colours)]
        self.paths = self._pen(self.colours[-1], 2.0 if fine else 3.2, fine)
        self.zero = self._pen(_mix(text, bg, 0.5), 1.0 if fine else 1.4, fine)
        self.cut = self._pen(_mix(text, bg, 0.42), 1.0 if fine else 2.2, fine, [5.0, 2.2, 1.2, 2.2])
        self.no_grad = self._pen(_mix(text, bg, 0.6), 1.0 if fine else 1.3, fine, [2.2, 2.6])
        self.background = bg
        self._faint: dict[int, tuple] = {}

    @staticmethod
    def _pen(colour: QColor, width: float, cosmetic: bool, dashes=None) -> QPen:
        pen = QPen(colour, width, Qt.SolidLine, Qt.RoundCap, Qt.RoundJoin)
        if dashes:
            pen.setCapStyle(Qt.FlatCap)
            pen.setDashPattern(dashes)
        pen.setCosmetic(cosmetic)
        return pen

    def faint(self, pen: QPen) -> QPen:
        """``pen`` washed towards the background (de-emphasised), one shared pen per pen."""
        hit = self._faint.get(id(pen))
        if hit is None or hit[0] is not pen:
            f = QPen(pen)
            f.setColor(_mix(pen.color(), self.background, 0.8))
            hit = self._faint[id(pen)] = (pen, f)
        return hit[1]


# ------------------------------------------------------------------------------------- legend
class Legend:
    """What the legend says and how it is drawn; painted by the overlay widget on the canvas and
    into pictures by ``blockflow render --grad``."""

    PAD = 8.0
    BAR_W = 216.0
    SWATCH_W = 30.0

    def __init__(self, style: Style):
        self.style = style
        self.mode: str | None = None       # "run" | "paths" | None
        self.target = ""
        self.scale: GradientScale | None = None
        self.pens: _Pens | None = None
        self.rows: list[tuple[QPen, str]] = []

    def set(self, mode, target: str, scale, pens: _Pens, rows) -> None:
        self.mode, self.target, self.scale, self.pens, self.rows = mode, target, scale, pens, list(rows)

    @property
    def visible(self) -> bool:
        return self.mode is not None

    def title(self) -> str:
        if self.mode == "paths":
            return f"gradient paths to {self.target}"
        return f"gradient of {self.target}, per wire"

    def _fonts(self):
        st = self.style
        title = QFontMetricsF(st.title_font)
        small = QFontMetricsF(st.sub_font)
        return st.title_font, title, st.sub_font, small

    def _has_bar(self) -> bool:
        return self.mode == "run" and self.scale is not None and not self.scale.empty

    def size(self) -> QSizeF:
        _, tfm, _, sfm = self._fonts()
        pad = self.PAD
        w = tfm.horizontalAdvance(self.title())
        h = pad + tfm.height() + 4
        if self.mode == "run":
            if self._has_bar():
                w = max(w, self.BAR_W + 8)
                h += sfm.height() + 2 + 14 + 3 + sfm.height() + 6
            else:
                w = max(w, sfm.horizontalAdvance("every gradient is exactly 0"))
                h += sfm.height() + 6
        for _, text in self.rows:
            w = max(w, self.SWATCH_W + 8 + sfm.horizontalAdvance(text))
            h += max(sfm.height(), 12) + 2
        return QSizeF(math.ceil(w + 2 * pad), math.ceil(h + pad - 2))

    def paint(self, painter: QPainter, origin: QPointF) -> None:
        """Draw the legend with its top-left corner at ``origin`` (painter coordinates)."""
        if not self.visible:
            return
        st = self.style
        tfont, tfm, sfont, sfm = self._fonts()
        size = self.size()
        box = QRectF(origin, size)
        painter.save()
        painter.setRenderHint(QPainter.Antialiasing, True)
        painter.setRenderHint(QPainter.TextAntialiasing, True)
        fill = QColor(st.body)
        fill.setAlphaF(0.93)
        painter.setPen(QPen(st.border, 1.0))
        painter.setBrush(QBrush(fill))
        painter.drawRoundedRect(box.adjusted(0.5, 0.5, -0.5, -0.5), 6, 6)
        pad = self.PAD
        x, y = box.left() + pad, box.top() + pad
        painter.setPen(QPen(st.text))
        painter.setFont(tfont)
        painter.drawText(QRectF(x, y, size.width() - 2 * pad, tfm.height()), int(Qt.AlignLeft | Qt.AlignVCenter),
                         self.title())
        y += tfm.height() + 4
        painter.setFont(sfont)
        if self.mode == "run":
            if self._has_bar():
                painter.setPen(QPen(st.muted))
                painter.drawText(QRectF(x, y, self.BAR_W, sfm.height()), int(Qt.AlignLeft | Qt.AlignVCenter),
                                 "‖gradient‖, log scale; wider = larger")
                y += sfm.height() + 2
                y = self._paint_bar(painter, x, y, sfm)
            else:
                painter.setPen(QPen(st.muted))
                painter.drawText(QRectF(x, y, size.width(), sfm.height()), int(Qt.AlignLeft | Qt.AlignVCenter),
                                 "every gradient is exactly 0")
                y += sfm.height() + 6
        for pen, text in self.rows:
            row_h = max(sfm.height(), 12)
            cy = y + row_h / 2
            sample = QPen(pen)
            sample.setCosmetic(False)
            sample.setWidthF(max(pen.widthF(), 1.3) if not pen.isCosmetic() else 1.5)
            painter.setPen(sample)
            painter.drawLine(QPointF(x, cy), QPointF(x + self.SWATCH_W, cy))
            painter.setPen(QPen(st.text))
            painter.drawText(QRectF(x + self.SWATCH_W + 8, y, size.width(), row_h),
                             int(Qt.AlignLeft | Qt.AlignVCenter), text)
            y += row_h + 2
        painter.restore()

    def _paint_bar(self, painter, x: float, y: float, sfm) -> float:
        """The colour bar, tapered like the wire widths, with the smallest, middle and largest norm."""
        colours = self.pens.colours
        n = len(colours)
        seg = self.BAR_W / n
        bar_h = 14.0
        painter.setPen(Qt.NoPen)
        for k, c in enumerate(colours):
            h = 4.0 + (bar_h - 4.0) * k / (n - 1)
            painter.setBrush(c)
            painter.drawRect(QRectF(x + k * seg, y + (bar_h - h) / 2, seg + 0.4, h))
        y += bar_h + 3
        ticks = self.scale.ticks(3) if self.scale.high > self.scale.low else [(1.0, self.scale.high)]
        painter.setPen(QPen(self.style.text))
        for frac, value in ticks:
            text = _fmt(value)
            tw = sfm.horizontalAdvance(text)
            cx = x + frac * self.BAR_W
            left = min(max(cx - tw / 2, x), x + self.BAR_W - tw)
            painter.drawLine(QPointF(cx, y - 3), QPointF(cx, y - 1))
            painter.drawText(QRectF(left, y, tw + 2, sfm.height()), int(Qt.AlignLeft | Qt.AlignVCenter), text)
        return y + sfm.height() + 6


class LegendOverlay(QWidget):
    """The legend as a small, semi-opaque widget over the canvas's bottom-left corner, like a
    head-up display: it does not zoom or pan, and lets the mouse through.

    A child of the view, laid over its viewport, rather than of the viewport itself: the view
    scrolls the viewport's children with its contents on every pan (QWidget.scroll), which would
    carry the legend away from its corner."""

    MARGIN = 10

    def __init__(self, view, legend: Legend):
        super().__init__(view)
        self.view = view
        self.legend = legend
        self.setAttribute(Qt.WA_TransparentForMouseEvents)
        self.setAttribute(Qt.WA_NoSystemBackground)
        self.setFocusPolicy(Qt.NoFocus)
        self.hide()
        self.enabled = True      # View > Gradient Legend: the user may hide it
        view.viewport().installEventFilter(self)

    def set_enabled(self, on: bool) -> None:
        self.enabled = bool(on)
        self.refresh()

    def refresh(self) -> None:
        if not self.legend.visible or not self.enabled:
            self.hide()
            return
        self.resize(self.legend.size().toSize())
        self._place()
        self.show()
        self.raise_()
        self.update()

    def _place(self) -> None:
        vp = self.view.viewport().geometry()
        self.move(vp.left() + self.MARGIN, max(vp.top(), vp.bottom() + 1 - self.height() - self.MARGIN))

    def eventFilter(self, obj, event):
        if event.type() in (QEvent.Resize, QEvent.Move) and self.isVisible():
            self._place()
        return False

    def paintEvent(self, event):
        painter = QPainter(self)
        self.legend.paint(painter, QPointF(0, 0))
        painter.end()


# ------------------------------------------------------------------------------------- fan-outs
class FanoutLabel(QGraphicsItem):
    """Beside an output that feeds several wires carrying gradient: each wire's contribution (and
    the block receiving it) and their sum, the gradient of the target with respect to the output.

    ``fanout`` keeps the numbers (contributions and the runtime's total); ``text`` is what is
    drawn: a header line, then one row per contribution and one for the total (small arrays in
    full, bigger ones as norms), or for a scalar one line such as ``Σ 1.79 = 0.786 (Tanh t) + 1
    (Square q)``. ``order``: the receiving blocks' node ids in the order to list them."""

    def __init__(self, fanout: Fanout, blocks: dict, style: Style, accent: QColor, order=None):
        super().__init__()
        self.fanout = fanout
        self.style = style
        self.accent = accent
        self.header, self.rows = self._content(fanout, blocks, order or [])
        self.text = "\n".join([self.header] + [f"{a}  {b}" for a, b in self.rows])
        fm = QFontMetricsF(style.sub_font)
        self._line_h = fm.height()
        self._col = max((fm.horizontalAdvance(a) for a, _ in self.rows), default=0.0) + 8
        w = max([fm.horizontalAdvance(self.header)] + [self._col + fm.horizontalAdvance(b) for _, b in self.rows])
        self._rect = QRectF(0, 0, w + 14, self._line_h * (1 + len(self.rows)) + 8)
        self.setZValue(5.0)
        self.setAcceptedMouseButtons(Qt.NoButton)

    @staticmethod
    def _content(fan: Fanout, blocks: dict, order: list) -> tuple[str, list]:
        rank = {nid: i for i, nid in enumerate(order)}
        contributions = sorted(fan.contributions, key=lambda c: (rank.get(c[0].dst, len(rank)), c[0].dst,
                                                                 c[0].dst_port))
        who = [f"{blocks.get(e.dst, '?')} {e.dst}" for e, _ in contributions]
        total = fan.total if fan.total is not None else fan.summed()
        size = int(np.asarray(total).size)
        if size == 1:
            parts = " + ".join(f"{_array_text(g)} ({w})" for (_, g), w in zip(contributions, who))
            return f"Σ {_array_text(total)} = {parts}".replace("+ -", "− "), []
        small = size <= SHOW_ARRAYS_UP_TO
        show = _array_text if small else (lambda a: f"‖g‖ {_fmt(_norm(a))}")
        header = f"Σ at {fan.node}.{fan.port}: the gradients add up" + ("" if small else " element-wise")
        rows = [(f"{'+' if i else '  '} from {w}", show(g)) for i, ((_, g), w) in enumerate(zip(contributions, who))]
        rows.append(("= total", show(total)))
        return header, rows

    def boundingRect(self):
        return self._rect.adjusted(-1, -1, 1, 1)

    def paint(self, painter, option, widget=None):
        st = self.style
        fill = QColor(st.body)
        fill.setAlphaF(0.92)
        painter.setPen(QPen(self.accent, 1.4))
        painter.setBrush(QBrush(fill))
        painter.drawRoundedRect(self._rect, 5, 5)
        painter.setPen(st.text_pen)
        painter.setFont(st.sub_font)
        h, left = self._line_h, int(Qt.AlignLeft | Qt.AlignVCenter)
        painter.drawText(QRectF(7, 4, self._rect.width() - 10, h), left, self.header)
        for i, (a, b) in enumerate(self.rows, 1):
            painter.drawText(QRectF(7, 4 + i * h, self._col, h), left, a)
            painter.drawText(QRectF(7 + self._col, 4 + i * h, self._rect.width() - self._col - 10, h), left, b)


def _place_label(scene, src, port: str, size: QSizeF) -> QPointF:
    """Where a fan-out label beside ``src``'s output ``port`` covers the fewest wires and no block:
    candidates right of the port (level with it, above, below, further out), scored by the wire
    points and blocks they would cover. Returns the top-left corner in ``src``'s coordinates."""
    p = src.port_pos(port)
    w, h = size.width(), size.height()
    points = []
    for e in src.edges:
        path = e.path()
        points += [path.pointAtPercent(k / 40) for k in range(41)]
    own = src.edges
    best, best_score = None, None
    origin = src.pos()
    for k in range(8):
        x = p.x() + 12 + 24 * k
        for y in (p.y() - h / 2, p.y() - h - 8, p.y() + 8, p.y() - 1.6 * h - 8, p.y() + 0.6 * h + 8):
            rect = QRectF(origin.x() + x, origin.y() + y, w, h).adjusted(-4, -4, 4, 4)
            score = sum(1 for q in points if rect.contains(q)) + 0.2 * k
            for item in scene.items(rect):
                if isinstance(item, (NodeItem, FanoutLabel)) and item is not src:
                    score += 60
                elif isinstance(item, EdgeItem) and item not in own:
                    score += 8
            if best_score is None or score < best_score:
                best, best_score = QPointF(x, y), score
    return best


# ------------------------------------------------------------------------------------- highlighter
class GradientHighlighter(QObject):
    """Colours a DiagramScene's wires by a GradientView (``view.gradients`` on the canvas; also
    used without a view by render_page).

    - :meth:`show` after a backward run, :meth:`show_paths` for the static view, :meth:`clear`;
    - :meth:`focus` emphasises one block and two sets of wires (the backward stepper);
    - :meth:`wire_style` says how a wire is drawn now (the tests' handle on the mapping).

    On the canvas it clears itself when the page shown is replaced or its model is edited (a run's
    gradients no longer describe the diagram; moving blocks keeps them); the static paths are
    recomputed after an edit instead, since they need no run.
    """

    changed = Signal()

    def __init__(self, scene, view=None):
        super().__init__(view)
        self.scene = scene
        self.view = view
        self.style: Style = scene.style
        self._gview: GradientView | None = None
        self.mode: str | None = None            # "run" | "paths" | None
        self._states: dict[Edge, tuple] = {}     # edge -> (state, level)
        self._cut_nodes: set[str] = set()        # blocks whose every output wire is cut
        self._dimmed: set[str] = set()           # blocks drawn dimmed now
        self._focus: tuple | None = None         # (node, incoming, outgoing)
        self._pens = _Pens(self.style)
        #: the norm scale of the run shown (GradientScale: its level() is each wire's colour level)
        self.scale: GradientScale | None = None
        self.legend = Legend(self.style)
        self.labels: list[FanoutLabel] = []
        self._restyle_pending = False
        self.legend_widget: LegendOverlay | None = None
        if view is not None:
            self.legend_widget = LegendOverlay(view, self.legend)
            view.installEventFilter(self)
            # Bound methods, not lambdas: Qt drops the connections when the view (and this) goes,
            # while the Document may live on.
            doc = view.doc
            doc.current_page_changed.connect(self._on_page_switched)
            doc.project_replaced.connect(self.clear)
            doc.node_renamed.connect(self._on_edit)
            # What the page computes, not its labels or notes: they change no gradient.
            doc.structure_changed.connect(self._on_edit)
            doc.program_ready.connect(self._on_program_ready)
            self._paths_timer = QTimer(self)
            self._paths_timer.setSingleShot(True)
            self._paths_timer.timeout.connect(self._recompute_paths)

    # ------------------------------------------------------------------ the contract
    @property
    def current(self) -> GradientView | None:
        """The gradient view shown (after a run, or the static paths), or None."""
        return self._gview

    def show(self, gview: GradientView) -> None:
        """Colour every wire by the gradient flowing back along it (a recorded backward run's
        GradientView); a view without a run is shown as :meth:`show_paths`."""
        if not gview.ran:
            self.show_paths(gview)
            return
        self.scale = scale = self._scale_of(gview)
        level = scale.level
        self._set(gview, "run", {edge: (info.state, level(info.norm) if info.state == FLOWS and
                                        info.norm is not None and info.norm >= scale.low else -1)
                                 for edge, info in gview.wires.items()})

    @staticmethod
    def _scale_of(gview: GradientView) -> GradientScale:
        """The log scale of the norms, from the smallest that is not negligible to the largest."""
        full = gview.scale(LEVELS)
        if full.empty:
            return full
        floor = full.high * NEGLIGIBLE
        return GradientScale(min(n for n in gview.norms() if n >= floor), full.high, LEVELS)

    def show_paths(self, gview: GradientView) -> None:
        """Where gradient can flow to the view's target, before any run: one highlight colour for
        the wires that carry it, cut and unreached wires as after a run."""
        self._set(gview, "paths", {edge: (info.state, -1) for edge, info in gview.wires.items()})

    def clear(self) -> None:
        """Give every wire its dtype pen and every block its look back; hide the legend."""
        had = self._gview is not None or self._focus is not None
        self._gview, self.mode, self.scale = None, None, None
        self._states, self._cut_nodes, self._focus = {}, set(), None
        if self.view is not None:
            self._paths_timer.stop()
        self._apply()
        self._set_labels([])
        self.legend.set(None, "", None, self._pens, [])
        self._refresh_legend()
        if had:
            self.changed.emit()

    def focus(self, node: str | None, incoming, outgoing) -> None:
        """Emphasise ``node`` and two sets of wires (the gradient arriving at the block, the
        gradient it sends back); every other wire is drawn faint and every other block dimmed
        (the blocks at the far ends of the emphasised wires stay as they are, to show where the
        gradient comes from and goes). ``focus(None, [], [])`` removes the emphasis."""
        if node is None and not incoming and not outgoing:
            if self._focus is None:
                return
            self._focus = None
        else:
            self._focus = (node, frozenset(incoming), frozenset(outgoing))
        self._apply()
        self._update_labels()

    def wire_style(self, edge: Edge) -> WireStyle:
        """How ``edge`` is drawn now: state, norm level, colour, width, dashed."""
        item = self.scene.edge_items[edge]
        pen = item.pen()
        state, level = self._states.get(edge, (NONE, -1)) if self.mode else (NONE, -1)
        return WireStyle(state, level, pen.color().name(), pen.widthF(), pen.style() != Qt.SolidLine)

    # ------------------------------------------------------------------ more queries
    @property
    def focused(self) -> tuple | None:
        """(node, incoming, outgoing) being emphasised, or None."""
        return self._focus

    def level_colour(self, level: int) -> str:
        """The colour of a norm level on this canvas (light or dark), ``#rrggbb``."""
        return self._pens.colours[level].name()

    def level_width(self, level: int) -> float:
        return self._pens.levels[level].widthF()

    def dimmed_nodes(self) -> list[str]:
        return sorted(nid for nid, item in self.scene.node_items.items() if item.dimmed)

    def label_of(self, node: str, port: str | None = None) -> FanoutLabel | None:
        return next((lb for lb in self.labels if lb.fanout.node == node and
                     (port is None or lb.fanout.port == port)), None)

    def extent(self) -> QRectF:
        """The scene area of what the highlighting adds (fan-out labels), for pictures."""
        rect = QRectF()
        for lb in self.labels:
            rect = rect.united(lb.sceneBoundingRect())
        return rect

    def node_tooltip(self, nid: str) -> list[str]:
        """Lines (HTML) a block's tooltip adds about the gradient shown."""
        g = self._gview
        if g is None:
            return []
        lines = []
        step = g.program.step(nid)
        if nid in g.cut_by or (step is not None and step.spec.gradient == "stop"):
            lines.append(html.escape(g.cut_summary(nid)))
        if nid in self._cut_nodes:
            cutters = sorted({c for e, (s, _) in self._states.items() if e.src == nid and s == CUT
                              for c in g.wires[e].cutters})
            lines.append(html.escape(f"no gradient of {g.target[0]} reaches {nid}: its outputs are cut off "
                                     f"by {', '.join(cutters)}"))
        if g.ran:
            for (node, port), grad in g.result.grads.items():
                if node == nid and grad is not None:
                    lines.append(html.escape(describe_array(grad, name=f"gradient at {port}:")))
        return lines

    def edge_tooltip(self, edge: Edge) -> list[str]:
        """Lines (HTML) a wire's tooltip adds: why gradient does or does not flow along it, its
        value and its gradient, and its share of a fan-out."""
        g = self._gview
        info = g.wires.get(edge) if g is not None else None
        if info is None:
            return []
        lines = [html.escape(info.reason)]
        if info.value is not None:
            lines.append(html.escape(describe_array(info.value, name="value:")))
        if info.grad is not None:
            lines.append(html.escape(describe_array(info.grad, name="gradient:")))
            if info.norm == 0:
                lines.append("the gradient along it is exactly 0")
            elif self.scale is not None and info.norm < self.scale.low:
                lines.append(html.escape(f"drawn as ≈ 0: below {_power(NEGLIGIBLE)} × the largest gradient "
                                         f"({_fmt(self.scale.high)}), zero up to rounding or vanished"))
        fan = g.fanout_of(edge.src, edge.src_port)
        if fan is not None and any(e == edge for e, _ in fan.contributions):
            lines.append(html.escape(f"one of {len(fan.contributions)} gradients that add up at "
                                     f"{edge.src}.{edge.src_port}"))
        return lines

    # ------------------------------------------------------------------ applying
    def _set(self, gview: GradientView, mode: str, states: dict) -> None:
        self._follow_style()
        self._gview, self.mode, self._states = gview, mode, states
        if mode != "run":
            self.scale = None
        self._cut_nodes = self._cut_region(states)
        self._apply()
        self._update_labels()
        self._update_legend()
        self.changed.emit()

    def _cut_region(self, states: dict) -> set[str]:
        """Blocks with output wires, every one of them cut: the region a StopGradient cuts off."""
        out: dict[str, bool] = {}
        for edge, (state, _) in states.items():
            out[edge.src] = out.get(edge.src, True) and state == CUT
        return {nid for nid, all_cut in out.items() if all_cut}

    def _pen_of(self, state: str, level: int) -> QPen:
        p = self._pens
        if state == FLOWS:
            if self.mode == "paths":
                return p.paths
            return p.levels[level] if level >= 0 else p.zero
        if state == CUT:
            return p.cut
        return p.no_grad

    def _apply(self) -> None:
        """Set each wire's pen and each block's dimming from the state (setPen only where the
        pen changes: pens are shared, one per level and state)."""
        scene = self.scene
        states, mode, focus = self._states, self.mode, self._focus
        pens = self._pens
        if mode is None:
            pen_of = {}
        else:    # the pen of each (state, level) pair present, looked up once
            pen_of = {key: self._pen_of(*key) for key in set(states.values())}
        default = self._pen_of(NONE, -1) if mode is not None else None
        keep: frozenset = frozenset() if focus is None else focus[1] | focus[2]
        state_of, pen_get = states.get, pen_of.get
        for edge, item in scene.edge_items.items():
            pen = pen_get(state_of(edge), default)
            if focus is not None and edge not in keep:
                pen = pens.faint(pen if pen is not None else item.style.wire_pens[item.cls])
            if item.grad_pen is not pen:
                item.set_grad_pen(pen)
        if focus is not None:
            awake = ({focus[0]} | {e.src for e in keep} | {e.dst for e in keep}) - self._cut_nodes
            dimmed = {nid for nid in scene.node_items if nid not in awake}
        else:
            dimmed = self._cut_nodes
        items = scene.node_items
        for nid in self._dimmed ^ dimmed:   # only the blocks whose look changes
            item = items.get(nid)
            if item is not None:
                item.set_dimmed(nid in dimmed)
        self._dimmed = set(dimmed)
        if scene.overview is not None:
            scene.overview.mark_dirty()

    def _update_labels(self) -> None:
        g = self._gview
        if g is None or self.mode != "run":
            self._set_labels([])
            return
        fans = [f for f in g.fanouts if f.total is not None or all(c is not None for _, c in f.contributions)]
        if len(fans) > MAX_FANOUT_LABELS:
            node = self._focus[0] if self._focus is not None else None
            fans = [f for f in fans if f.node == node]
        self._set_labels(fans)

    def _set_labels(self, fans: list) -> None:
        wanted = {(f.node, f.port): f for f in fans}
        keep = []
        for lb in self.labels:
            key = (lb.fanout.node, lb.fanout.port)
            alive = shiboken6.isValid(lb) and lb.scene() is self.scene
            if alive and wanted.get(key) is lb.fanout:
                keep.append(lb)
                del wanted[key]
            elif alive:
                self.scene.removeItem(lb)
        blocks = {nid: item.data.block for nid, item in self.scene.node_items.items()}
        for (node, port), fan in wanted.items():
            src = self.scene.node_items.get(node)
            if src is None:
                continue
            accent = self._pen_of(FLOWS, self._level_of_output(fan)).color()
            items = self.scene.node_items
            order = sorted((e.dst for e, _ in fan.contributions),
                           key=lambda n: (items[n].y(), items[n].x()) if n in items else (0.0, 0.0))
            lb = FanoutLabel(fan, blocks, self.style, accent, order)
            lb.setPos(_place_label(self.scene, src, port, lb.boundingRect().size()))
            # Child of its block: it follows the block while it is dragged.
            lb.setParentItem(src)
            keep.append(lb)
        self.labels = keep

    def _level_of_output(self, fan: Fanout) -> int:
        if self._gview is None or fan.total is None:
            return -1
        return self.scale.level(_norm(fan.total)) if self.scale is not None else -1

    def _update_legend(self) -> None:
        g = self._gview
        if g is None:
            self.legend.set(None, "", None, self._pens, [])
            self._refresh_legend()
            return
        target = g.target[0]
        counts: dict[str, int] = {}
        zero = 0
        for state, level in self._states.values():
            counts[state] = counts.get(state, 0) + 1
            zero += state == FLOWS and level < 0
        rows = []
        if self.mode == "paths":
            rows.append((self._pens.paths, f"can carry gradient to {target}"))
        elif zero:
            rows.append((self._pens.zero, f"gradient 0 or ≈ 0 (< {_power(NEGLIGIBLE)} × the largest)"))
        if counts.get(CUT):
            cutters = sorted({g.program.spec_of(c).name for c in g.cut_by if g.program.step(c) is not None})
            rows.append((self._pens.cut, "cut by " + (", ".join(cutters) if cutters else "a block")))
        if sum(n for s, n in counts.items() if s not in (FLOWS, CUT)):
            rows.append((self._pens.no_grad, f"no gradient to {target}"))
        self.legend.set(self.mode, target, self.scale, self._pens, rows)
        self._refresh_legend()

    def _refresh_legend(self) -> None:
        if self.legend_widget is not None:
            self.legend_widget.refresh()

    # ------------------------------------------------------------------ following the canvas
    def _on_page_switched(self, _page: str) -> None:
        self.clear()

    def _on_edit(self, page: str, *_what) -> None:
        self._edited(page)

    def _edited(self, page: str) -> None:
        """The model changed: a run's gradients no longer describe the diagram, so they go (the
        static paths are recomputed, they need no run)."""
        shown = self.scene.page
        if self._gview is None or shown is None or page != shown.name:
            return
        if self.mode == "paths":
            self._paths_timer.start(0)
            return
        self.clear()
        if self.view is not None:
            self.view.status_message.emit("Gradient highlighting cleared: the diagram changed since the "
                                          "backward run (run it again to see the new gradients)")

    def _on_program_ready(self, page: str) -> None:
        shown = self.scene.page
        if self._gview is not None and self.mode == "paths" and shown is not None and page == shown.name:
            self._paths_timer.start(0)

    def _recompute_paths(self) -> None:
        g = self._gview
        if g is None or self.mode != "paths":
            return
        program = self.view.doc.ready_program()
        if program is None:
            return          # compiling off the UI thread: _on_program_ready calls again
        if program is g.program:
            return          # the paths shown are this program's already
        target = f"{g.target[0]}:{g.target[1]}"
        try:
            if not program.ok or program.step(g.target[0]) is None:
                raise ValueError
            gview = GradientView(program, target)
        except Exception:   # the target went away, or the page no longer compiles
            self.clear()
            self.view.status_message.emit(f"Gradient paths hidden: {g.target[0]} is no longer a gradient "
                                          f"target on a page that compiles")
            return
        self.show_paths(gview)

    def eventFilter(self, obj, event):
        if event.type() in (QEvent.PaletteChange, QEvent.ApplicationPaletteChange) and not self._restyle_pending:
            # The view rebuilds its Style in its own handler, after this filter: follow it then.
            self._restyle_pending = True
            QTimer.singleShot(0, self._restyled)
        return False

    def _restyled(self) -> None:
        self._restyle_pending = False
        if self._follow_style() and (self._gview is not None or self._focus is not None):
            self._apply()
            if self._gview is not None:
                self._set_labels([])
                self._update_labels()
                self._update_legend()

    def _follow_style(self) -> bool:
        """New pens when the Style changed (light/dark, fine wires on a big page)."""
        if self._pens.key == (self.style.key, self.style.fine_wires):
            return False
        self._pens = _Pens(self.style)
        return True
