"""The drag layer: moving blocks drawn over a still picture of the rest of the page.

Dragging a block used to repaint, on every mouse move, everything under the bounding rect of the
block and its wires; a wire that runs across the page made that most of the view, so one move
cost nearly a whole frame (benchmarks/canvas.py). While blocks are dragged, the view instead:

1. makes the moving blocks and their wires fully transparent (Qt neither paints nor repaints
   transparent items, and they keep the mouse grab, the selection and their positions);
2. takes one picture of the viewport without them;
3. shows this widget over the viewport, which paints, for the area a move touched, that picture
   and the moving blocks and wires on top, drawn by the items' own painting code.

So a move costs a copy of the touched area plus the moving items, however full the page is.
When the drag ends (or the view scrolls, zooms, reloads) the items get their opacity back, the
layer hides, and the viewport, untouched meanwhile, repaints the areas the blocks left and reached.
"""
from __future__ import annotations

from PySide6.QtCore import QRect, QRectF, Qt
from PySide6.QtGui import QPainter, QPixmap
from PySide6.QtWidgets import QStyle, QStyleOptionGraphicsItem, QWidget

__all__ = ["DragLayer", "MAX_LIVE_BLOCKS"]

#: dragging more blocks than this at once repaints the usual way (the layer's own painting of the
#: moving items would then cost more than what it saves)
MAX_LIVE_BLOCKS = 150


class DragLayer(QWidget):
    """A child of the view's viewport, shown only while blocks are dragged."""

    def __init__(self, view):
        super().__init__(view.viewport())
        self.view = view
        self.setAttribute(Qt.WA_TransparentForMouseEvents)
        self.setAttribute(Qt.WA_OpaquePaintEvent)     # covers the viewport: nothing under it repaints
        self.setAttribute(Qt.WA_NoSystemBackground)
        self.setFocusPolicy(Qt.NoFocus)
        self.hide()
        self.nodes: list = []          # the moving NodeItems
        self.wires: list = []          # their EdgeItems
        self.extra = None              # an item drawn under them (the wire a block would go into)
        self.wires_shown = True
        self._picture: QPixmap | None = None
        self._last = QRect()           # viewport area the moving items covered at the last paint
        self.paints = 0                # paint events served (the benchmark and tests read it)

    @property
    def active(self) -> bool:
        return self._picture is not None

    def begin(self, nodes) -> bool:
        """Start drawing ``nodes`` (and every wire touching them) on the layer. False when the
        drag is too big for the layer (it then repaints the usual way)."""
        if self.active:
            return True
        nodes = list(nodes)
        if not nodes or len(nodes) > MAX_LIVE_BLOCKS:
            return False
        scene = self.view.diagram_scene()
        if scene.overview_on:          # far out: the overview must leave them out of its picture
            for item in nodes:
                scene.make_live(item)
        wires = {e for item in nodes for e in item.edges if e.isVisible()}
        self.nodes, self.wires = nodes, sorted(wires, key=lambda e: e.zValue())
        for item in (*self.wires, *self.nodes):
            item.setOpacity(0.0)
        vp = self.view.viewport()
        self._picture = vp.grab()
        self.setGeometry(vp.rect())
        self._last = self._covered()
        self.show()
        self.raise_()
        self.update()
        return True

    def moved(self) -> None:
        """The moving items moved: repaint where they were and where they are."""
        if not self.active:
            return
        now = self._covered()
        self.update(now.united(self._last))
        self._last = now

    def hide_wires(self) -> None:
        """Leave the moving blocks' wires out of the picture (a block Alt-dragged out of its chain)."""
        self.update(self._covered())
        self.wires_shown = False

    def set_extra(self, item) -> None:
        """Draw ``item`` (a scene item added during the drag, or None) under the moving items."""
        if not self.active:
            return
        old = self._extra_rect()
        self.extra = item
        self.update(old.united(self._extra_rect()))

    def _extra_rect(self) -> QRect:
        if self.extra is None:
            return QRect()
        return self.view.mapFromScene(self.extra.sceneBoundingRect()).boundingRect().adjusted(-3, -3, 3, 3)

    def end(self) -> None:
        """Give the items back to the scene and hide the layer."""
        if not self.active:
            return
        self._picture = None
        self.hide()
        for item in (*self.wires, *self.nodes):
            try:
                item.setOpacity(1.0)
            except RuntimeError:       # the scene was cleared under the drag
                pass
        self.nodes, self.wires, self.extra, self.wires_shown = [], [], None, True

    def _covered(self) -> QRect:
        """The viewport area the moving items cover, a pixel of margin around it."""
        rect = QRectF()
        for item in (*self.wires, *self.nodes):
            rect = rect.united(item.sceneBoundingRect())
        return self.view.mapFromScene(rect).boundingRect().adjusted(-3, -3, 3, 3)

    def paintEvent(self, event):
        self.paints += 1
        picture = self._picture
        if picture is None:
            return
        area = event.rect()
        painter = QPainter(self)
        ratio = picture.devicePixelRatio()
        source = QRectF(area.x() * ratio, area.y() * ratio, area.width() * ratio, area.height() * ratio)
        painter.drawPixmap(QRectF(area), picture, source)
        painter.setClipRect(area)
        painter.setRenderHints(self.view.renderHints())
        to_view = self.view.viewportTransform()
        painter.setTransform(to_view)
        if self.extra is not None:
            painter.setPen(self.extra.pen())
            painter.setBrush(Qt.NoBrush)
            painter.drawPath(self.extra.path())
        for wire in self.wires if self.wires_shown else ():
            painter.setPen(wire.pen())
            painter.setBrush(Qt.NoBrush)
            painter.drawPath(wire.path())
        option = QStyleOptionGraphicsItem()
        for item in self.nodes:
            painter.setTransform(item.sceneTransform() * to_view)
            option.state = QStyle.State_Enabled | (QStyle.State_Selected if item.isSelected() else QStyle.State_None)
            option.exposedRect = item.boundingRect()
            item.paint(painter, option, self)
        painter.end()
