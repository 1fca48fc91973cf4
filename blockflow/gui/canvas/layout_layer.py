"""The canvas's layout controller: keeps reroute points and frames drawn as the page holds them,
and answers the view's gestures on them (the view delegates a press, a double-click, Delete and
its menus here in a line each).

- Double-click a wire: a reroute point there. Drag a point to move it; double-click it, or
  click it and press Delete, to remove it.
- Frames: Edit > Frame Selection (Ctrl+Shift+F) or the canvas menu frames the selected blocks;
  drag the title bar to move the frame with its blocks; double-click it to edit the title,
  colour and note; click it and press Delete (or its menu) to delete the frame, not its blocks.
"""
from __future__ import annotations

import math

from PySide6.QtCore import QObject, QPointF, QRectF

from blockflow.errors import ProjectError
from blockflow.gui.canvas.bendpath import insertion_index
from blockflow.gui.canvas.frames import FrameDrag, FrameEditor, FrameItem
from blockflow.gui.canvas.reroute import HANDLE_RADIUS, BendDrag, BendHandle

__all__ = ["CanvasLayout", "show_layout"]


def _apply_points(scene, edges=None) -> None:
    """Give the wire items of ``scene`` their reroute points from its page."""
    bends = scene.page.bends
    for edge, item in scene.edge_items.items():
        if edges is not None and edge not in edges:
            continue
        points = bends.get(edge, ())
        if item.points != points:
            item.points = points
            item.update_path()


def _fit_frames(scene, frames) -> QRectF:
    rect = QRectF()
    for item in frames:
        item.fit([scene.node_items[n].sceneBoundingRect() for n in item.frame.blocks if n in scene.node_items])
        if item.isVisible():
            rect = rect.united(item.boundingRect())
    return rect


def show_layout(scene, page) -> QRectF:
    """Draw ``page``'s reroute points and frames on ``scene`` (the no-display render: no
    handles); returns the extent of the frames and of the wires with points."""
    _apply_points(scene)
    frames = []
    for i, frame in enumerate(page.frames):
        item = FrameItem(i, frame, scene.style)
        scene.addItem(item)
        frames.append(item)
    rect = _fit_frames(scene, frames)
    for item in scene.edge_items.values():
        if item.points:
            rect = rect.united(item.sceneBoundingRect())
    return rect


class CanvasLayout(QObject):
    """Reroute handles and frame items of a DiagramView's scene, and the gestures on them. A
    child of the view: its connections to the document go with the view (a plain object's
    would outlive it and touch a deleted scene)."""

    def __init__(self, view):
        super().__init__(view)
        self.view = view
        self.scene = view.diagram_scene()
        self.doc = view.doc
        self.handles: dict[tuple, BendHandle] = {}
        self.frames: list[FrameItem] = []
        self.selected_point: tuple | None = None       # (edge, index)
        self.selected_frame: int | None = None
        self._stale: str | None = None      # the page whose blocks or wires an edit is changing
        self.scene.about_to_reload.connect(self._forget)
        self.scene.reloaded.connect(self.sync)
        d = self.doc
        for signal in (d.edge_added, d.edge_removed, d.node_added, d.node_removed):
            signal.connect(self._on_page_edit)
        d.structure_changed.connect(self._on_edited)
        d.page_field_changed.connect(self._on_field)
        d.nodes_moved.connect(self._on_moved)
        self.sync()

    # ------------------------------------------------------------------ following the page
    def _current(self, page: str) -> bool:
        return self.scene.page is not None and page == self.scene.page.name and self.scene.page is self.doc.page()

    def _on_page_edit(self, page, _what) -> None:
        # Redrawn once the edit is made (_on_edited), not per block or wire it adds or takes off:
        # a paste of 1,000 blocks on a page of 200 reroute points redrew the layer 1,000 times
        # (13 s). A page with no reroute points or frames (most pages) has nothing to redraw.
        if self._current(page) and (self.handles or self.frames or self.scene.page.bends
                                    or self.scene.page.frames):
            self._stale = page

    def _on_edited(self, page) -> None:
        # Document.apply announces every block and wire of an edit, then that the page changed
        if page == self._stale:
            self._stale = None
            if self._current(page):
                self.sync()

    def _on_field(self, page, field) -> None:
        if field in ("reroutes", "frames") and self._current(page):
            self.sync()

    def _on_moved(self, page, _ids) -> None:
        if self._current(page):
            self.relayout_frames()

    def _forget(self) -> None:
        self.handles, self.frames = {}, []       # the scene's clear() deletes their items

    def sync(self) -> None:
        """Draw the page's points and frames as the model holds them (after any edit of them)."""
        scene, page = self.scene, self.scene.page
        for item in list(self.handles.values()) + self.frames:
            if item.scene() is scene:
                scene.removeItem(item)
        self.handles, self.frames = {}, []
        if page is None:
            return
        _apply_points(scene)
        for edge, points in page.bends.items():
            if edge in scene.edge_items:
                for i, (x, y) in enumerate(points):
                    handle = BendHandle(edge, i, scene.style)
                    handle.setPos(x, y)
                    scene.addItem(handle)
                    self.handles[(edge, i)] = handle
        for i, frame in enumerate(page.frames):
            item = FrameItem(i, frame, scene.style)
            scene.addItem(item)
            self.frames.append(item)
        if self.selected_point not in self.handles:
            self.selected_point = None
        if self.selected_frame is not None and self.selected_frame >= len(self.frames):
            self.selected_frame = None
        self._show_selection()
        self.relayout_frames()

    def relayout_frames(self) -> None:
        _fit_frames(self.scene, self.frames)

    def preview_bends(self, edge, points) -> None:
        """Draw ``edge`` through ``points`` while they are dragged (the model is edited on release)."""
        item = self.scene.edge_items.get(edge)
        if item is not None:
            item.points = tuple(points)
            item.update_path()
        for i, (x, y) in enumerate(points):
            handle = self.handles.get((edge, i))
            if handle is not None:
                handle.setPos(x, y)

    def commit_bends(self, edge, points, text: str) -> None:
        try:
            self.doc.set_bends(edge, points, text=text)
        except ProjectError as exc:
            self.view.status_message.emit(str(exc))
            self.sync()

    # ------------------------------------------------------------------ hit tests and selection
    def handle_at(self, sp: QPointF) -> BendHandle | None:
        tol = max(HANDLE_RADIUS + 3, 7.0 / max(self.view.zoom(), 0.05))
        best, dist = None, tol
        for handle in self.handles.values():
            d = math.hypot(handle.x() - sp.x(), handle.y() - sp.y())
            if d <= dist:
                best, dist = handle, d
        return best

    def frame_at(self, sp: QPointF, title_only: bool = True) -> FrameItem | None:
        """The frame whose title bar (or, not ``title_only``, whose box) is at ``sp``, the one
        drawn on top first; never under a block."""
        if self.view.node_at(sp) is not None:
            return None
        for item in reversed(self.frames):
            if item.isVisible() and (item.title_bar() if title_only else item.box).contains(sp):
                return item
        return None

    def _select(self, point=None, frame=None) -> None:
        self.selected_point, self.selected_frame = point, frame
        if point is not None or frame is not None:
            self.view.select_nodes([])
            self.view.select_wires([])
        self._show_selection()

    def _show_selection(self) -> None:
        for key, handle in self.handles.items():
            handle.set_selected_point(key == self.selected_point)
        for item in self.frames:
            item.set_selected_frame(item.index == self.selected_frame)

    # ------------------------------------------------------------------ the view's gestures
    def press(self, event, sp: QPointF):
        """A left press: on a reroute point, its drag; on a frame's title bar, the frame's;
        anything else clears the point or frame selected and is the view's (None)."""
        handle = self.handle_at(sp)
        if handle is not None and self.view.port_at(sp)[1] is None:
            self._select(point=(handle.edge, handle.index))
            event.accept()
            return BendDrag(self.view, handle, sp)
        frame = self.frame_at(sp)
        if frame is not None:
            self._select(frame=frame.index)
            event.accept()
            return FrameDrag(self.view, frame, sp)
        if self.selected_point is not None or self.selected_frame is not None:
            self._select()
        return None

    def double_click(self, sp: QPointF) -> bool:
        """On a reroute point: remove it; on a frame's title: edit the frame; on a wire (not
        under a block): add a point there. True when it was one of these."""
        handle = self.handle_at(sp)
        if handle is not None:
            self.remove_point(handle.edge, handle.index)
            return True
        frame = self.frame_at(sp)
        if frame is not None:
            self.edit_frame(frame.index)
            return True
        if self.view.node_at(sp) is not None:
            return False
        wire = self.view.edge_at(sp)
        if wire is None:
            return False
        points = list(self.scene.page.bends.get(wire.edge, ()))
        p0 = wire.src.port_scene_pos(wire.edge.src_port)
        p1 = wire.dst.port_scene_pos(wire.edge.dst_port)
        at = insertion_index(p0, points, p1, sp)
        points.insert(at, (round(sp.x()), round(sp.y())))
        self.commit_bends(wire.edge, points, "Add reroute point")
        self._select(point=(wire.edge, at) if (wire.edge, at) in self.handles else None)
        return True

    def remove_point(self, edge, index: int) -> None:
        points = list(self.scene.page.bends.get(edge, ()))
        if 0 <= index < len(points):
            del points[index]
            self.commit_bends(edge, points, "Remove reroute point")

    def delete_selected(self) -> bool:
        """Delete the reroute point or the frame selected; True when there was one."""
        if self.selected_point is not None:
            edge, index = self.selected_point
            self._select()
            self.remove_point(edge, index)
            return True
        if self.selected_frame is not None:
            index = self.selected_frame
            self._select()
            self.remove_frame(index)
            return True
        return False

    # ------------------------------------------------------------------ frames
    def frame_selection(self) -> None:
        """Frame the selected blocks (Ctrl+Shift+F), and open the new frame's editor."""
        nodes = self.view.selected_nodes()
        if not nodes:
            self.view.status_message.emit("select the blocks to frame first")
            return
        try:
            index = self.doc.add_frame(nodes)
        except ProjectError as exc:
            self.view.status_message.emit(str(exc))
            return
        self.view.status_message.emit(f"framed {len(nodes)} block(s): double-click the title to name it")
        self._select(frame=index)

    def edit_frame(self, index: int) -> FrameEditor | None:
        """Open the editor of frame ``index`` (window-modal, not blocking); returns it."""
        frames = self.scene.page.frames
        if not 0 <= index < len(frames):
            return None
        self._select(frame=index)
        editor = FrameEditor(self.view, index, frames[index])
        editor.setModal(True)
        editor.show()
        self.editor = editor
        return editor

    def remove_frame(self, index: int) -> None:
        try:
            self.doc.remove_frame(index)
        except ProjectError as exc:
            self.view.status_message.emit(str(exc))

    def add_menu_actions(self, menu, sp: QPointF, on_canvas: bool) -> bool:
        """The frame actions of the view's context menu at ``sp``. On a frame's title bar the
        menu is the frame's (True: nothing else to add)."""
        frame = self.frame_at(sp) if on_canvas else None
        if frame is not None:
            menu.addAction("Edit frame…", lambda i=frame.index: self.edit_frame(i))
            menu.addAction("Delete frame (keep its blocks)", lambda i=frame.index: self.remove_frame(i))
            return True
        if self.view.selected_nodes():
            menu.addSeparator()
            menu.addAction("Frame selection\tCtrl+Shift+F", self.frame_selection)
        return False
