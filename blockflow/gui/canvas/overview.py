"""The far-out overview of a big page: one item draws every block and wire, tile by tile."""
from __future__ import annotations

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QPainterPath, QPen
from PySide6.QtWidgets import QGraphicsItem

from blockflow.gui.common.theme import Style

__all__ = ["OverviewItem"]


class OverviewItem(QGraphicsItem):
    """Far out on a big page, one item draws every block (drawRects) and every wire (one path per
    colour) instead of thousands of items painting themselves. Rebuilt lazily when marked dirty.

    The page is cut into square tiles; each tile keeps its own rects and paths and the bounds of
    what it draws, and a repaint draws only the tiles that meet the exposed area. Dragging a block
    far out then repaints the few tiles under the block and its wires, not the whole page."""

    TILE = 1600.0   # scene units: a few blocks across, ~150 px at the overview's zoom

    def __init__(self, scene_model, style: Style):
        super().__init__()
        self.model = scene_model       # the DiagramScene: node items and edge items
        self.style = style
        self._dirty = True
        self._bounds = QRectF()
        # (bounds, wires [(pen, path)], groups [(brush colour, [QRectF])], marked [(pen, [QRectF])])
        self._tiles: list = []
        self.live: set = set()         # node ids drawn by their own items (being dragged)
        self.setZValue(-2.0)
        self.setFlag(QGraphicsItem.ItemUsesExtendedStyleOption)
        self.setCacheMode(QGraphicsItem.DeviceCoordinateCache)

    def mark_dirty(self) -> None:
        self._dirty = True
        self.update()

    def _tile_contents(self) -> tuple[dict, dict]:
        """The page's blocks and wires (all but the live ones) sorted into tiles:
        ``{(i, j): [bounds, {wire class or pen id: path}, {category: rects}, {mark: rects}]}``,
        and the gradient pens met, by id."""
        size = self.TILE
        tiles: dict = {}               # (i, j) -> [bounds, {cls: path}, {cat: rects}, {mark: rects}]

        def tile_of(r: QRectF) -> list:
            c = r.center()
            key = (int(c.x() // size), int(c.y() // size))
            t = tiles.get(key)
            if t is None:
                t = tiles[key] = [QRectF(r), {}, {}, {}]
            else:
                t[0] = t[0].united(r)
            return t

        live = self.live
        grad_pens: dict = {}
        for nid, item in self.model.node_items.items():
            if nid in live:
                continue
            r = item.body.translated(item.pos())
            t = tile_of(r)
            t[2].setdefault(item.data.category, []).append(r)
            if item.data.errors or item.run_error:
                t[3].setdefault("error", []).append(r)
            elif item.isSelected():
                t[3].setdefault("selected", []).append(r)
            elif item.data.warnings:
                t[3].setdefault("warning", []).append(r)
        for edge, e in self.model.edge_items.items():
            if edge.src in live or edge.dst in live:
                continue
            p = e.path()
            t = tile_of(p.boundingRect())
            key = e.cls
            if e.grad_pen is not None:   # QPen is unhashable: group by the shared pen's identity
                key = id(e.grad_pen)
                grad_pens.setdefault(key, e.grad_pen)
            path = t[1].get(key)
            if path is None:
                path = t[1][key] = QPainterPath()
            path.addPath(p)
        return tiles, grad_pens

    def rebuild(self) -> None:
        self._dirty = False
        st = self.style
        tiles, grad_pens = self._tile_contents()
        pens = {"error": st.error_pen, "selected": st.selected_pen, "warning": st.warning_pen}
        wire_pens = {cls: QPen(pen.color(), 0) for cls, pen in st.wire_pens.items()}
        for key, pen in grad_pens.items():
            wire_pens[key] = QPen(pen.color(), 0, Qt.SolidLine if pen.style() == Qt.SolidLine else Qt.DashLine)
        colours: dict = {}
        bounds = QRectF()
        self._tiles = []
        for b, wires, groups, marked in tiles.values():
            b = b.adjusted(-4, -4, 4, 4)
            bounds = bounds.united(b)
            self._tiles.append((
                b,
                [(wire_pens[cls], path) for cls, path in wires.items()],
                [(colours.setdefault(cat, st.header_color(cat)), rects) for cat, rects in groups.items()],
                [(pens[k], rects) for k, rects in marked.items()]))
        if bounds != self._bounds:
            self.prepareGeometryChange()
            self._bounds = bounds

    def boundingRect(self):
        if self._dirty:
            self.rebuild()
        return self._bounds

    def paint(self, painter, option, widget=None):
        if self._dirty:
            self.rebuild()
        exposed = option.exposedRect
        shown = [t for t in self._tiles if t[0].intersects(exposed)]
        painter.setBrush(Qt.NoBrush)
        for _, wires, _, _ in shown:
            for pen, path in wires:
                painter.setPen(pen)
                painter.drawPath(path)
        painter.setPen(Qt.NoPen)
        for _, _, groups, _ in shown:
            for color, rects in groups:
                painter.setBrush(color)
                painter.drawRects(rects)
        painter.setBrush(Qt.NoBrush)
        for _, _, _, marked in shown:
            for pen, rects in marked:
                painter.setPen(pen)
                painter.drawRects(rects)
