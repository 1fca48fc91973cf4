"""Reroute points on the canvas: the path of a wire through its points, the handles drawn on
them, and the drag that moves one.

The path itself is bendpath.py's; the points live in the model (``Page.bends``) and the
canvas's layout controller (layout_layer.py) keeps the handles in step with it.
"""
from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QPen
from PySide6.QtWidgets import QGraphicsItem

from blockflow.gui.canvas.interactions import Interaction

__all__ = ["BendHandle", "BendDrag", "HANDLE_RADIUS"]

#: the radius of a reroute point's handle, in scene units
HANDLE_RADIUS = 5.0


class BendHandle(QGraphicsItem):
    """The dot on one reroute point of a wire: ``edge`` and ``index`` name it in the model."""

    Type = QGraphicsItem.UserType + 21

    def __init__(self, edge, index: int, style):
        super().__init__()
        self.edge, self.index, self.style = edge, index, style
        self.selected_point = False
        self.setZValue(-0.4)            # over wires (-1, -0.5 selected), under blocks (0)
        self.setAcceptHoverEvents(False)

    def type(self):
        return BendHandle.Type

    def boundingRect(self) -> QRectF:
        r = HANDLE_RADIUS + 2
        return QRectF(-r, -r, 2 * r, 2 * r)

    def set_selected_point(self, on: bool) -> None:
        if on != self.selected_point:
            self.selected_point = on
            self.update()

    def paint(self, painter, option, widget=None):
        st = self.style
        selected = self.selected_point
        painter.setPen(QPen(st.wire_selected.color() if selected else st.port_outline.color(), 1.5))
        painter.setBrush(st.wire_selected.color() if selected else st.background)
        r = HANDLE_RADIUS + (1 if selected else 0)
        painter.drawEllipse(QPointF(0, 0), r, r)


class BendDrag(Interaction):
    """Drags one reroute point: the wire follows the cursor, one undo step on release (none if
    it did not move)."""

    def __init__(self, view, handle: BendHandle, sp: QPointF):
        super().__init__(view)
        self.edge, self.index = handle.edge, handle.index
        self.start = QPointF(sp)
        self.before = tuple(self.scene.page.bends.get(self.edge, ()))
        self.points = list(self.before)
        self.origin = self.points[self.index] if self.index < len(self.points) else None
        self.moved = False

    def _still_there(self) -> bool:
        """The wire's points are as they were at the press (a Delete or an Undo in the middle of
        the drag may have taken the point away: the release must not put it back)."""
        page = self.scene.page
        return page is not None and tuple(page.bends.get(self.edge, ())) == self.before

    def move(self, event, sp: QPointF) -> bool:
        if self.origin is None or not self._still_there():
            return self.origin is not None
        d = sp - self.start
        if not self.moved and abs(d.x()) + abs(d.y()) < 2:
            return True
        self.moved = True
        self.points[self.index] = (self.origin[0] + d.x(), self.origin[1] + d.y())
        self.view.canvas_layout.preview_bends(self.edge, self.points)
        return True

    def release(self, event, sp: QPointF) -> bool:
        if event.button() != Qt.LeftButton:
            return True
        self._done()
        if self.moved and self.origin is not None and self._still_there():
            self.view.canvas_layout.commit_bends(self.edge, self.points, "Move reroute point")
        return True

    def drop(self) -> None:
        self._done()
