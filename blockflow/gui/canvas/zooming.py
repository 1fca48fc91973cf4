"""Zoom, fit and pan of the canvas: a mixin of DiagramView (view.py), whose scene, drag layer
and minimap it uses. A page opens at its readable view (readable.py); a fitted or opening view
is redone when the window finds its size, and a view the user zoomed or panned keeps its place."""
from __future__ import annotations

from PySide6.QtCore import QPoint, QPointF
from PySide6.QtGui import QPainter

from blockflow.gui.canvas.readable import opening_view
from blockflow.gui.canvas.scene import OVERVIEW_MIN_NODES, OVERVIEW_SCALE
from blockflow.gui.common.theme import Style

__all__ = ["ZoomingView", "MIN_SCALE", "MAX_SCALE"]

MIN_SCALE, MAX_SCALE = 0.02, 4.0


class ZoomingView:
    """What a DiagramView does with its transform and scroll bars (a mixin: QGraphicsView comes
    after it in the bases)."""

    def center_on_node(self, node_id: str) -> None:
        item = self._scene.node_items.get(node_id)
        if item is not None:
            if not self.sceneRect().contains(item.sceneBoundingRect()):
                self._scene.fit_scene_rect()
            if self.transform().m11() < 0.5:
                self._set_scale(0.8)
            self.centerOn(item.sceneBoundingRect().center())
            self.view_moved()

    def fit_to_view(self) -> None:
        self._scene.fit_scene_rect()
        rect = self._scene.items_rect()
        self._pending_fit = False
        if rect.isNull():
            self.resetTransform()
            self.centerOn(QPointF(300, 200))
            self._remember_fit()
            self.view_moved()
            return
        rect = rect.adjusted(-40, -40, 40, 40)
        vp = self.viewport().rect()
        s = min(vp.width() / rect.width(), vp.height() / rect.height(), 1.0)
        self._set_scale(max(MIN_SCALE, s))
        self.centerOn(rect.center())
        self._remember_fit()
        self.view_moved()

    def _remember_fit(self, kind: str = "fit") -> None:
        """``kind``: "fit" (the whole page) or "readable" (a page's opening view): what a resize
        redoes while the view is still as it left it."""
        rect = self.viewport().rect()
        self._fitted = (self.transform(), self.mapToScene(rect.center()), rect)
        self._fit_kind = kind

    def _still_fitted(self) -> bool:
        """The view is as the last fit left it: no zoom or pan since, by the user or otherwise.
        (Asked as a resize begins: the viewport has its new size, not yet its new scroll.)"""
        if self._fitted is None:
            return False
        transform, centre, rect = self._fitted
        off = self.mapToScene(rect.center()) - centre
        tol = 1.0 / max(self.zoom(), MIN_SCALE)
        return self.transform() == transform and abs(off.x()) <= tol and abs(off.y()) <= tol

    def open_readable(self) -> None:
        """Show a page just opened: fitted when its text can be read so, else its start at the
        lowest zoom that can (readable.py). Ctrl+0 (fit_to_view) still shows the whole page."""
        blocks = [item.sceneBoundingRect() for item in self._scene.node_items.values()]
        if not blocks:
            self.fit_to_view()
            return
        self._scene.fit_scene_rect()
        self._pending_fit = False
        vp = self.viewport().rect()
        scale, centre = opening_view(vp.width(), vp.height(), blocks)
        self._set_scale(scale)
        self.centerOn(centre)
        self._remember_fit("readable")
        self.view_moved()

    def zoom_in(self) -> None:
        self._zoom(1.25, self.viewport().rect().center())

    def zoom_out(self) -> None:
        self._zoom(0.8, self.viewport().rect().center())

    def reset_zoom(self) -> None:
        centre = self.view_center_scene_pos()
        self._set_scale(1.0)
        self.centerOn(centre)
        self.view_moved()

    def zoom(self) -> float:
        return self.transform().m11()

    def view_center_scene_pos(self) -> QPointF:
        return self.mapToScene(self.viewport().rect().center())

    def _set_scale(self, s: float) -> None:
        self._drag_layer.end()
        s = min(MAX_SCALE, max(MIN_SCALE, s))
        self.setTransform(self.transform().fromScale(s, s))
        self._update_overview()

    def _zoom(self, factor: float, at: QPoint) -> None:
        old = self.transform().m11()
        new = min(MAX_SCALE, max(MIN_SCALE, old * factor))
        if new == old:
            return
        anchor = self.mapToScene(at)
        self._set_scale(new)
        # keep the scene point under the cursor where it was
        moved = self.mapFromScene(anchor) - at
        self.horizontalScrollBar().setValue(self.horizontalScrollBar().value() + moved.x())
        self.verticalScrollBar().setValue(self.verticalScrollBar().value() + moved.y())
        self.view_moved()

    def _update_overview(self) -> None:
        scale = self.transform().m11()
        big = len(self._scene.node_items) >= OVERVIEW_MIN_NODES
        self._scene.set_overview(big and scale < OVERVIEW_SCALE)
        # Far out, blocks are flat boxes: antialiasing only blurs them and their wires, and it
        # is most of the cost of repainting while a block is dragged (docs/qt.md §3).
        self.setRenderHint(QPainter.Antialiasing, scale >= Style.FLAT_LOD)

    def view_moved(self) -> None:
        """The visible area changed (zoom, scroll): tell the window and the minimap."""
        self.view_changed.emit()
        if self._minimap is not None:
            self._minimap.update()

    def scrollContentsBy(self, dx, dy):
        self._drag_layer.end()          # its picture no longer matches the view
        super().scrollContentsBy(dx, dy)
        self.view_moved()

    def wheelEvent(self, event):
        delta = event.angleDelta().y() or event.angleDelta().x()
        if not delta:
            event.ignore()
            return
        self._zoom(1.0015 ** delta, event.position().toPoint())
        event.accept()

    def resizeEvent(self, event):
        self._drag_layer.end()
        # A fitted view stays fitted as the window finds its size (the window manager's resize
        # after the first show, docks settling); a view zoomed or panned since keeps its place.
        fitted = self._still_fitted()
        super().resizeEvent(event)
        if self.isVisible() and (self._pending_fit or (fitted and self._fit_kind == "readable")):
            self.open_readable()
        elif self.isVisible() and fitted:
            self.fit_to_view()
        self.view_moved()

    def showEvent(self, event):
        super().showEvent(event)
        if self._pending_fit:
            self.open_readable()
