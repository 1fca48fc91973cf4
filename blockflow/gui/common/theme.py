"""Colours, fonts and metrics of the canvas, taken from the application's QPalette.

One Style object is shared by every item of a scene; it is rebuilt when the palette changes
(light/dark). Dtype colours are mid-lightness hues that read on white and on dark grey alike.
"""
from __future__ import annotations

from PySide6.QtGui import QColor, QFont, QFontMetricsF, QPalette, QPen, QBrush, Qt
from PySide6.QtWidgets import QApplication

__all__ = ["Style", "FONT_FAMILY", "DTYPE_COLORS"]

FONT_FAMILY = "DejaVu Sans"

#: port colours by dtype class (blockflow.present.dtypes.dtype_class)
DTYPE_COLORS = {
    "float": "#3f8fe0",   # blue
    "int": "#2fae6a",     # green
    "bool": "#e08a2a",    # orange
    "any": "#9a8fb0",     # grey-violet: not known yet
}

#: header tints by block category (mixed with the body colour)
CATEGORY_COLORS = {
    "array_ops": "#4f8fd0",
    "math_ops": "#49a86c",
    "nn_ops": "#c0603c",
    "random_ops": "#b0529a",
    "state_ops": "#c9a13a",
    "training_ops": "#7d62c8",
    "gradients": "#3aa8a8",
    "composites": "#4a63c9",     # a project's composite blocks (instances)
    "composite_ports": "#8c8fa8",  # their Input and Output port blocks
}


def _mix(a: QColor, b: QColor, t: float) -> QColor:
    """``a`` moved towards ``b`` by ``t``."""
    return QColor.fromRgbF(a.redF() + (b.redF() - a.redF()) * t,
                           a.greenF() + (b.greenF() - a.greenF()) * t,
                           a.blueF() + (b.blueF() - a.blueF()) * t, 1.0)


class Style:
    """Everything an item needs to paint, prepared once (pens, brushes, fonts, metrics)."""

    # metrics, in scene units (pixels at 100 %)
    HEADER_H = 36.0       # op name and label
    ROW_H = 18.0          # one port row
    PORTS_TOP = 40.0      # first port row starts here
    RESULT_H = 22.0       # one line of the result area under the ports (a line per output)
    BOTTOM_PAD = 5.0
    SCOPE_H = 13.0        # the scope tab above the body
    PORT_R = 4.5          # port circle radius
    MIN_W = 120.0
    RADIUS = 7.0

    #: the zoom from which a block draws all its text (ports, scope, inline values)
    DETAIL_LOD = 0.6
    #: the zoom below which a block is a flat box (no ports, no text)
    FLAT_LOD = 0.3

    def __init__(self, palette: QPalette | None = None):
        self.fine_wires = False
        #: the lowest zoom at which block titles are drawn; small pages lower it to FLAT_LOD
        #: (DiagramScene.load), big ones keep DETAIL_LOD so zoomed-out frames paint no text
        self.title_lod = self.DETAIL_LOD
        self.set_palette(palette)

    def set_palette(self, palette: QPalette | None = None) -> None:
        """(Re)build every colour, pen and brush from ``palette`` (the application's when None),
        in place: the items of a scene share this object and see the new look on their next paint."""
        if palette is None:
            app = QApplication.instance()
            palette = app.palette() if app is not None else QPalette()
        self.palette = palette
        self.key = self.palette_key(palette)
        base = palette.color(QPalette.Base)
        text = palette.color(QPalette.Text)
        window = palette.color(QPalette.Window)
        self.dark = base.lightnessF() < 0.5
        self.text = text
        self.muted = _mix(text, base, 0.45)
        self.background = _mix(window, base, 0.5) if not self.dark else _mix(window, QColor("#000000"), 0.25)
        self.grid_minor = _mix(self.background, text, 0.05)
        self.grid_major = _mix(self.background, text, 0.10)
        self.body = _mix(base, text, 0.03) if not self.dark else _mix(base, text, 0.10)
        self.result_area = _mix(self.body, text, 0.06)
        self.border = _mix(base, text, 0.45)
        self.highlight = palette.color(QPalette.Highlight)
        self.error = QColor("#e0403a")
        self.warning = QColor("#d9a21f")
        self.loss = QColor("#d0453a") if not self.dark else QColor("#ff7a6e")
        self.wire = _mix(text, base, 0.35)
        self.dtype = {k: QColor(v) for k, v in DTYPE_COLORS.items()}
        self.category = {k: _mix(self.body, QColor(v), 0.55 if self.dark else 0.30)
                         for k, v in CATEGORY_COLORS.items()}
        self.category_default = _mix(self.body, text, 0.12)
        self._make_pens(base, text)
        self._make_fonts()

    def _make_pens(self, base: QColor, text: QColor) -> None:
        """Pens and brushes, shared objects: setPen with the same pen is cheap."""
        self.border_pen = QPen(self.border, 1.2)
        self.selected_pen = QPen(self.highlight, 2.6)
        self.error_pen = QPen(self.error, 2.4)
        self.warning_pen = QPen(self.warning, 2.0)
        self.body_brush = QBrush(self.body)
        self.result_brush = QBrush(self.result_area)
        self.text_pen = QPen(text)
        self.muted_pen = QPen(self.muted)
        self.port_outline = QPen(_mix(base, text, 0.65), 1.0)
        self.port_brushes = {k: QBrush(c) for k, c in self.dtype.items()}
        self.port_empty = QBrush(self.body)
        self.accept_pen = QPen(self.highlight, 2.2)
        self.set_fine_wires(self.fine_wires)
        self.live_wire = self._wire_pen(self.highlight, 2.2, Qt.DashLine)
        self.inline_brush = QBrush(_mix(base, text, 0.08))
        # a dimmed block (gradient highlighting) is washed over with the background
        dim = QColor(self.background)
        dim.setAlphaF(0.68)
        self.dim_brush = QBrush(dim)
        self.inline_pen = QPen(_mix(base, text, 0.35), 1.0)

    def _make_fonts(self) -> None:
        self.title_font = self._font(9.5, bold=True)
        self.sub_font = self._font(8.0)
        self.port_font = self._font(7.5)
        self.scope_font = self._font(6.5)
        self.inline_font = self._font(7.0)
        self.badge_font = self._font(6.5, bold=True)
        self.title_fm = QFontMetricsF(self.title_font)
        self.sub_fm = QFontMetricsF(self.sub_font)
        self.port_fm = QFontMetricsF(self.port_font)
        self.scope_fm = QFontMetricsF(self.scope_font)
        self.inline_fm = QFontMetricsF(self.inline_font)

    @staticmethod
    def palette_key(palette: QPalette) -> tuple:
        """The palette colours a Style is made from: equal keys give the same Style."""
        return tuple(palette.color(role).rgba() for role in
                     (QPalette.Base, QPalette.Text, QPalette.Window, QPalette.Highlight))

    def set_fine_wires(self, fine: bool) -> None:
        """Wire pens: 2 px, or on big pages 1 px cosmetic ones. Qt's raster engine strokes 1 px
        pens on a fast path; wider pens go through the general stroker, ~5x slower per wire, which
        dominates frames with hundreds of long wires in view (benchmarks/canvas.py)."""
        self.fine_wires = fine
        colors = dict(self.dtype, none=self.wire)
        if fine:
            self.wire_pens = {k: self._cosmetic(c) for k, c in colors.items()}
        else:
            self.wire_pens = {k: self._wire_pen(c) for k, c in colors.items()}
        self.wire_selected = self._wire_pen(self.highlight, 3.4)
        self.wire_hover = {k: self._wire_pen(c, 3.0) for k, c in colors.items()}

    @staticmethod
    def _cosmetic(color: QColor) -> QPen:
        pen = QPen(color, 1.0)
        pen.setCosmetic(True)
        return pen

    @staticmethod
    def _font(points: float, bold: bool = False) -> QFont:
        f = QFont(FONT_FAMILY)
        f.setPointSizeF(points)
        f.setBold(bold)
        f.setHintingPreference(QFont.PreferNoHinting)  # same layout at every zoom
        return f

    @staticmethod
    def _wire_pen(color: QColor, width: float = 2.0, style=Qt.SolidLine) -> QPen:
        pen = QPen(color, width, style, Qt.RoundCap, Qt.RoundJoin)
        return pen

    def header_color(self, category: str) -> QColor:
        return self.category.get(category, self.category_default)
