"""The minimap: the whole page as small boxes, the view's visible area as a frame; click or drag
to move the view there."""
from __future__ import annotations

from PySide6.QtCore import QLineF, QPointF, QRectF, Qt, QTimer
from PySide6.QtGui import QColor, QPainter, QPen, QPixmap
from PySide6.QtWidgets import QWidget

__all__ = ["Minimap"]


class Minimap(QWidget):
    """An overview of the page: blocks as small boxes and the visible area as a frame.
    Click or drag to pan the view there. Redrawn from the items a moment after changes."""

    def __init__(self, view, parent=None):
        super().__init__(parent)
        self.view = view
        self.setMinimumSize(160, 110)
        self.setMouseTracking(False)
        self._pixmap: QPixmap | None = None
        self._xform = None
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self._rebuild)
        self.setToolTip("Overview of the page: click or drag to move the view")

    def mark_dirty(self) -> None:
        self._timer.start(120)

    def restyle(self) -> None:
        """Redraw with the view's rebuilt Style (after a palette change)."""
        self._pixmap = None
        self.update()

    def resizeEvent(self, event):
        self._rebuild()

    def _bounds(self) -> QRectF:
        rect = self.view.diagram_scene().items_rect()
        if rect.isNull():
            rect = QRectF(0, 0, 800, 600)
        return rect.adjusted(-60, -60, 60, 60)

    def _rebuild(self) -> None:
        w, h = max(1, self.width()), max(1, self.height())
        st = self.view.style_
        pm = QPixmap(w, h)
        pm.fill(st.background)
        rect = self._bounds()
        s = min(w / rect.width(), h / rect.height())
        ox = (w - rect.width() * s) / 2 - rect.left() * s
        oy = (h - rect.height() * s) / 2 - rect.top() * s
        self._xform = (s, ox, oy)
        p = QPainter(pm)
        p.setRenderHint(QPainter.Antialiasing)
        scene = self.view.diagram_scene()
        p.setPen(QPen(st.wire, 0))
        lines = []
        for e in scene.edge_items.values():
            a = e.src.port_scene_pos(e.edge.src_port)
            b = e.dst.port_scene_pos(e.edge.dst_port)
            lines.append(QLineF(a.x() * s + ox, a.y() * s + oy, b.x() * s + ox, b.y() * s + oy))
        p.drawLines(lines)
        p.setPen(Qt.NoPen)
        for item in scene.node_items.values():
            r = item.body.translated(item.pos())
            color = st.error if item.data.errors else (st.highlight if item.isSelected()
                                                       else st.header_color(item.data.category).darker(115))
            p.setBrush(color)
            p.drawRect(QRectF(r.left() * s + ox, r.top() * s + oy, max(2.0, r.width() * s),
                              max(2.0, r.height() * s)))
        p.end()
        self._pixmap = pm
        self.update()

    def paintEvent(self, event):
        if self._pixmap is None or self._pixmap.size() != self.size():
            self._rebuild()
        p = QPainter(self)
        p.drawPixmap(0, 0, self._pixmap)
        s, ox, oy = self._xform
        vis = self.view.mapToScene(self.view.viewport().rect()).boundingRect()
        p.setPen(QPen(self.view.style_.highlight, 1.5))
        p.setBrush(QColor(self.view.style_.highlight.red(), self.view.style_.highlight.green(),
                          self.view.style_.highlight.blue(), 40))
        p.drawRect(QRectF(vis.left() * s + ox, vis.top() * s + oy, vis.width() * s, vis.height() * s))
        p.end()

    def _pan_to(self, pos) -> None:
        if self._xform is None:
            return
        s, ox, oy = self._xform
        self.view.centerOn(QPointF((pos.x() - ox) / s, (pos.y() - oy) / s))
        self.view.view_moved()

    def mousePressEvent(self, event):
        if event.button() == Qt.LeftButton:
            self._pan_to(event.position())

    def mouseMoveEvent(self, event):
        if event.buttons() & Qt.LeftButton:
            self._pan_to(event.position())
