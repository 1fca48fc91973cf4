"""How gradient highlighting looks: the colour levels (viridis on a log scale of the norm), the
wire widths, the shared pens, and the short texts of numbers it shows (gradients.py applies them)."""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QPen

from blockflow.present.values import readable_number
from blockflow.gui.common.theme import Style, _mix

__all__ = ["WireStyle", "LEVELS", "VIRIDIS", "NEGLIGIBLE", "level_colours", "level_width", "viridis"]

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


def short_number(x: float) -> str:
    """A number in 3 significant digits (scientific when tiny or huge): wire labels are narrow."""
    return readable_number(x, digits=3, large=1e4)


def power_text(x: float) -> str:
    """A power of ten as text: 1e-06 -> 10⁻⁶."""
    exponent = str(round(math.log10(x)))
    return "10" + exponent.translate(str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹"))


def array_text(a) -> str:
    a = np.asarray(a, dtype=np.float64)
    if a.size == 1:
        return short_number(a.ravel()[0])
    return "[" + ", ".join(short_number(v) for v in a.ravel()) + "]"


def array_norm(a) -> float:
    return float(np.linalg.norm(np.asarray(a, dtype=np.float64).ravel()))


# ------------------------------------------------------------------------------------- pens
class WirePens:
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


