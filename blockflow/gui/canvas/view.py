"""The canvas: a QGraphicsView of the Document's current page.

The DiagramScene (scene.py) keeps itself in sync with the Document; the view holds what is the
view's own: the selection of wires, zoom and the remembered view of each page, keys, palette drops.
Mouse gestures are small objects the view delegates to (interactions.py); the view keeps only
which one is current. The rest has a module each: editing the selection and the clipboard
(editing.py, arrange.py), notices.py, tooltips.py, menus.py, minimap.py. The view holds no model
state: a move is pushed once, on release, as one undo step.
"""
from __future__ import annotations

from PySide6.QtCore import QEvent, QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QPainter
from PySide6.QtWidgets import QGraphicsView, QToolTip, QWidget

from blockflow.project import Edge
from blockflow.gui.canvas import interactions
from blockflow.gui.canvas.draglayer import DragLayer
from blockflow.gui.canvas.editing import SelectionEditing
from blockflow.gui.canvas.gradients import GradientHighlighter
from blockflow.gui.canvas.interactions import Interaction, MoveBlocks, Pan, PlaceAt, WireDrag
from blockflow.gui.canvas.items import EdgeItem, NodeItem
from blockflow.gui.canvas.keyboard import CanvasKeyboard
from blockflow.gui.canvas.keymap import key_for
from blockflow.gui.canvas.layout_layer import CanvasLayout
from blockflow.errors import ProjectError
from blockflow.gui.canvas.menus import context_menu, rename_label
from blockflow.gui.canvas import collapse
from blockflow.gui.canvas.minimap import Minimap
from blockflow.gui.canvas.notices import EmptyPageHint, Notices
from blockflow.gui.canvas.quickadd import QuickAdd
from blockflow.gui.canvas.splice import PaletteSplice
from blockflow.gui.canvas.scene import DiagramScene
from blockflow.gui.canvas.tooltips import tooltip_at
from blockflow.gui.canvas.zooming import ZoomingView
from blockflow.gui.common.theme import Style
from blockflow.gui.document.clipboard import BLOCK_MIME, FRAGMENT_MIME

__all__ = ["BLOCK_MIME", "FRAGMENT_MIME", "DiagramView"]

#: the zoom's bounds


class DiagramView(SelectionEditing, ZoomingView, QGraphicsView):
    """The editor's canvas on ``document.current_page``."""

    selection_changed = Signal(list)
    status_message = Signal(str)
    #: F1 over a block: its name ("" when none is under the cursor or selected)
    help_requested = Signal(str)
    view_changed = Signal()

    def __init__(self, document, parent=None):
        super().__init__(parent)
        self.doc = document
        self.style_ = Style(self.palette())
        self._scene = DiagramScene(document.blocks, self.style_, self)
        self.setScene(self._scene)
        self._set_up_viewing()
        self._interaction: Interaction | None = None
        self._space = False
        self._selected_wires: set[Edge] = set()
        self._pending_fit = True
        self._fitted: tuple | None = None        # (transform, centre, viewport) of the last fit
        self._fit_kind = "fit"
        self._views: dict[str, tuple] = {}       # page -> (transform, centre) to come back to
        self._last_scene_pos: QPointF | None = None
        self._minimap: Minimap | None = None
        self.notices = Notices(self)
        self.empty_hint = EmptyPageHint(self)    # what an empty page says to do first
        self.place = PlaceAt(self)
        self.keyboard = CanvasKeyboard(self)     # keyboard.py: the canvas without a mouse
        self._drag_layer = DragLayer(self)       # moving blocks drawn over a still picture
        self.quick_add = QuickAdd(self)          # Tab, right-click on the canvas: add a block here
        self.palette_splice = PaletteSplice(self)   # a palette block dropped on a wire goes into it
        scene = self._scene
        scene.selectionChanged.connect(self._on_selection)
        scene.about_to_reload.connect(self._before_reload)
        scene.reloaded.connect(self._after_reload)
        scene.contents_changed.connect(self._touch_minimap)
        scene.wire_removed.connect(self._selected_wires.discard)
        scene.bind(document)                     # the scene follows the document from now on
        document.current_page_changed.connect(self._on_page_switched)
        document.page_renamed.connect(self._on_page_renamed)
        document.project_replaced.connect(self._on_project_replaced)
        self.gradients = GradientHighlighter(self._scene, self)   # wires coloured by gradient
        self.canvas_layout = CanvasLayout(self)         # reroute points and frames (layout_layer.py)

    def _set_up_viewing(self) -> None:
        self.setRenderHints(QPainter.Antialiasing | QPainter.TextAntialiasing)
        # One bounding rect per update: a drag's dirty region (a block and its wires) is often a
        # complex region, and the raster engine clips to complex regions slowly; measured 6 ms
        # against 40 ms per move with long wires (benchmarks/canvas.py), and never worse.
        self.setViewportUpdateMode(QGraphicsView.BoundingRectViewportUpdate)
        self.setOptimizationFlags(QGraphicsView.DontSavePainterState | QGraphicsView.DontAdjustForAntialiasing)
        self.setTransformationAnchor(QGraphicsView.NoAnchor)
        self.setResizeAnchor(QGraphicsView.AnchorViewCenter)
        self.setDragMode(QGraphicsView.RubberBandDrag)
        self.setRubberBandSelectionMode(Qt.IntersectsItemShape)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.setAcceptDrops(True)
        self.setFocusPolicy(Qt.StrongFocus)
        self.setMouseTracking(True)

    # ---------------------------------------------------------------- the scene rebuilt
    def _before_reload(self) -> None:
        old = self._scene.page
        if old is not None:
            self._views[old.name] = (self.transform(), self.mapToScene(self.viewport().rect().center()))
        self._drag_layer.end()
        current = self._interaction
        if current is not None:
            current.drop()
        self._interaction = current if isinstance(current, Pan) else None
        self._selected_wires.clear()
        self.notices.forget()

    def _after_reload(self) -> None:
        # The new items are not selected; the selection is not told so: whoever holds it (the
        # session: another page or project clears it, a rename follows it) selects them again.
        self._update_overview()
        self._touch_minimap()

    def _on_page_switched(self, page):
        if page.startswith("@") and self.doc.spread_stacked(page):
            # a definition made in code or a library file, its blocks on one spot: laid out
            # once, as an undoable step, as a page's are when its file opens
            self.status_message.emit(f"laid out the stacked blocks of {page[1:]}; Edit > Undo puts them back")
            self._views.pop(page, None)
        saved = self._views.get(page)
        if saved is not None:
            self.setTransform(saved[0])
            self.centerOn(saved[1])
            self._update_overview()
        else:
            self.open_readable()

    def _on_page_renamed(self, old, new):
        if old in self._views:
            self._views[new] = self._views.pop(old)

    def _on_project_replaced(self):
        self._views.clear()
        self._pending_fit = True
        if self.isVisible():
            self.open_readable()

    # ---------------------------------------------------------------- the current gesture
    def interaction(self) -> Interaction | None:
        """The gesture in progress (interactions.py), or None."""
        return self._interaction

    def set_interaction(self, interaction: Interaction | None) -> None:
        self._interaction = interaction

    def drag_layer(self) -> DragLayer:
        return self._drag_layer

    def space_held(self) -> bool:
        """Space is down: a left drag pans."""
        return self._space

    def cancel_wire(self) -> None:
        if isinstance(self._interaction, WireDrag):
            self._interaction.cancel()

    def refuse(self, reason: str, sp: QPointF) -> None:
        """Say why something was refused, in the status bar and at the cursor."""
        self.status_message.emit(reason)
        self.notices.show(reason, sp)

    def notice_text(self) -> str:
        """The message shown at the cursor ("" when none is showing)."""
        return self.notices.text()

    # ---------------------------------------------------------------- public API
    def node_item(self, node_id: str) -> NodeItem:
        return self._scene.node_items[node_id]

    def edge_item(self, edge: Edge) -> EdgeItem:
        return self._scene.edge_items[edge]

    def diagram_scene(self) -> DiagramScene:
        return self._scene

    def selected_nodes(self) -> list[str]:
        items = self._scene.node_items
        return [nid for nid in self._scene.page.nodes if nid in items and items[nid].isSelected()]

    def selected_wires(self) -> list[Edge]:
        return sorted(self._selected_wires)

    def select_nodes(self, ids) -> None:
        if isinstance(self._interaction, interactions.MoveBlocks):
            # Qt is dragging the selected blocks: one selected now (], [, Ctrl+A, a duplicate)
            # would be dragged from (0, 0) and drawn where the document has it not
            return
        ids = set(ids)
        self._scene.blockSignals(True)
        for item in self._scene.selectedItems():
            item.setSelected(False)
        for nid in ids:
            item = self._scene.node_items.get(nid)
            if item is not None:
                item.setSelected(True)
        self._scene.blockSignals(False)
        self._on_selection()

    def select_wires(self, edges, add: bool = False) -> None:
        if not add:
            for e in list(self._selected_wires):
                item = self._scene.edge_items.get(e)
                if item is not None:
                    item.set_wire_selected(False)
            self._selected_wires.clear()
        for e in edges:
            item = self._scene.edge_items.get(e)
            if item is not None:
                item.set_wire_selected(True)
                self._selected_wires.add(e)

    def toggle_wire(self, edge: Edge) -> None:
        """Shift-click on a wire: add it to the selection, or take it out."""
        if edge in self._selected_wires:
            self._selected_wires.discard(edge)
            self._scene.edge_items[edge].set_wire_selected(False)
        else:
            self.select_wires([edge], add=True)

    def select_all(self) -> None:
        self.select_nodes(self._scene.node_items)

    def toggle_collapse(self) -> None:
        collapse.toggle_selection(self)

    def set_collapsed_all(self, collapsed: bool) -> None:
        collapse.set_all(self, collapsed)

    def drop_block(self, block: str, scene_pos: QPointF, free: bool = False) -> str:
        """Add a block centred at ``scene_pos`` (snapped to the grid; ``free``: moved to where it
        covers no block); returns its id."""
        return self.place.block(block, scene_pos, free)

    def minimap(self) -> QWidget:
        if self._minimap is None:
            self._minimap = Minimap(self)
        return self._minimap

    # ---------------------------------------------------------------- hit tests
    def _hit_area(self, scene_pos: QPointF) -> tuple[float, QRectF]:
        tol = max(9.0, 6.0 / max(self.zoom(), 0.05))
        return tol, QRectF(scene_pos.x() - tol, scene_pos.y() - tol, 2 * tol, 2 * tol)

    def node_at(self, scene_pos: QPointF) -> NodeItem | None:
        """The block at ``scene_pos``: one whose port is there first, else one whose body is."""
        tol, area = self._hit_area(scene_pos)
        best = None
        for item in self._scene.items(area):
            if isinstance(item, NodeItem) and item.isVisible():
                if item.port_at(scene_pos, tol) is not None:
                    return item
                if best is None and item.sceneBoundingRect().contains(scene_pos):
                    best = item
        return best

    def port_at(self, scene_pos: QPointF):
        """(node item, port) under the cursor, the scope port included; or (None, None)."""
        tol, area = self._hit_area(scene_pos)
        for item in self._scene.items(area):
            if isinstance(item, NodeItem) and item.isVisible():
                port = item.port_at(scene_pos, tol)
                if port is not None:
                    return item, port
        return None, None

    def edge_at(self, scene_pos: QPointF) -> EdgeItem | None:
        for item in self._scene.items(scene_pos):
            if isinstance(item, EdgeItem) and item.isVisible():
                return item
        return None

    def cursor_scene_pos(self) -> QPointF:
        """Where the mouse last was over the view (paste lands there), else the view centre."""
        sp = self._last_scene_pos
        if sp is not None and self.viewport().rect().contains(self.mapFromScene(sp)):
            return sp
        return self.view_center_scene_pos()

    def leaveEvent(self, event):
        if self._interaction is None or not self._interaction.keeps_cursor:
            self._last_scene_pos = None
        super().leaveEvent(event)

    # ---------------------------------------------------------------- mouse: to the current gesture
    def _scene_pos(self, event) -> QPointF:
        sp = self.mapToScene(event.position().toPoint())
        self._last_scene_pos = sp
        return sp

    def mousePressEvent(self, event):
        self.notices.hide()
        self.keyboard.end_burst()
        sp = self._scene_pos(event)
        current = self._interaction
        if current is None or not current.press(event, sp):
            self._interaction = interactions.on_press(self, event, sp, current)

    def mouseMoveEvent(self, event):
        sp = self._scene_pos(event)
        if self._interaction is None or not self._interaction.move(event, sp):
            super().mouseMoveEvent(event)
            self._drag_layer.moved()

    def mouseReleaseEvent(self, event):
        sp = self.mapToScene(event.position().toPoint())
        if self._interaction is None or not self._interaction.release(event, sp):
            super().mouseReleaseEvent(interactions._ctrl_for_shift(event))
            self._drag_layer.end()

    def mouseDoubleClickEvent(self, event):
        sp = self.mapToScene(event.position().toPoint())
        if event.button() == Qt.LeftButton and self.canvas_layout.double_click(sp):
            event.accept()
            return
        item = self.node_at(sp)
        if item is not None and event.button() == Qt.LeftButton:
            if item.data.block.startswith("@"):
                self.open_instance(item.node_id)
            else:
                rename_label(self, item.node_id)
            event.accept()
            return
        super().mouseDoubleClickEvent(event)

    # ---------------------------------------------------------------- keys
    def keyPressEvent(self, event):
        entry = key_for(event)          # keymap.py: the one table of the canvas's keys (Tab is not one)
        if entry is None:
            self.keyboard.end_burst(event)
            super().keyPressEvent(event)
            return
        if not entry.action.startswith(("keyboard.move", "keyboard.jump")):
            self.keyboard.end_burst()
        owner, _, name = entry.action.rpartition(".")
        getattr(self.keyboard if owner == "keyboard" else self, name)()
        event.accept()

    def hold_space(self) -> None:
        """Space down: a left drag pans until it is released (keyReleaseEvent)."""
        self._space = True
        self.viewport().setCursor(Qt.OpenHandCursor)

    def escape(self) -> None:
        """Esc: the innermost thing in progress ends: a wire, a move (the blocks go back), the port
        focus, the selection, else the composite instance shown."""
        if isinstance(self._interaction, WireDrag):
            self.cancel_wire()
            self.viewport().update()
        elif isinstance(self._interaction, MoveBlocks):
            self._interaction.cancel()
        elif self.keyboard.focused_port() is not None:
            self.keyboard.forget()
        elif self.selected_nodes() or self.selected_wires():
            self._select_none()
        else:
            self.go_up()

    def help_at_cursor(self) -> None:
        """F1: the block under the cursor, else the one selected, in the Block Reference."""
        self.help_requested.emit(self.help_block())

    def help_block(self) -> str:
        """The block F1 means: the one under the cursor, else the one selected ("" for none)."""
        sp = self._last_scene_pos
        item = self.node_at(sp) if sp is not None else None
        if item is None:
            sel = self.selected_nodes()
            item = self._scene.node_items.get(sel[0]) if len(sel) == 1 else None
        return item.data.block if item is not None else ""

    def drawForeground(self, painter, rect):
        self.keyboard.paint(painter, rect)      # the keyboard's focused port, or its wire's target

    def open_instance(self, node_id: str) -> None:
        """Show the inside of instance ``node_id`` (its composite's diagram; edits go to the
        definition, values come from the page's run at that instance)."""
        try:
            self.doc.open_instance(node_id)
        except ProjectError as exc:
            self.status_message.emit(str(exc))
            return
        self.status_message.emit(f"inside {node_id}: editing {self.doc.current_page[1:]} "
                                 f"(Esc goes up)")

    def go_up(self) -> None:
        """Close the instance shown (Esc): back to the diagram it is drawn on."""
        self.doc.go_up()

    def _select_none(self) -> None:
        self.select_nodes([])
        self.select_wires([])

    def keyReleaseEvent(self, event):
        if event.key() == Qt.Key_Space and not event.isAutoRepeat():
            self._space = False
            if isinstance(self._interaction, Pan):
                self._interaction.end()
            self.viewport().setCursor(Qt.ArrowCursor)
            event.accept()
            return
        super().keyReleaseEvent(event)

    def focusOutEvent(self, event):
        self._space = False
        self._drag_layer.end()
        super().focusOutEvent(event)

    # ---------------------------------------------------------------- theme
    def changeEvent(self, event):
        super().changeEvent(event)
        if event.type() in (QEvent.PaletteChange, QEvent.ApplicationPaletteChange):
            self.restyle()
            self.empty_hint.restyle()

    def restyle(self) -> None:
        """Follow a palette change (light/dark): rebuild the shared Style in place and repaint
        the scene, its items and the minimap with it."""
        palette = self.palette()
        if Style.palette_key(palette) == self.style_.key:
            return
        self.style_.set_palette(palette)
        self._scene.restyle()
        if self._minimap is not None:
            self._minimap.restyle()

    # ---------------------------------------------------------------- drag and drop (the palette)
    def dragEnterEvent(self, event):
        if event.mimeData().hasFormat(BLOCK_MIME):
            event.acceptProposedAction()
        else:
            event.ignore()

    def dragMoveEvent(self, event):   # docs/qt.md §4: must accept, or no drop arrives
        if event.mimeData().hasFormat(BLOCK_MIME):
            name = bytes(event.mimeData().data(BLOCK_MIME)).decode("utf-8", "replace").strip()
            self.palette_splice.over(name, self.mapToScene(event.position().toPoint()))
            event.acceptProposedAction()
        else:
            event.ignore()

    def dragLeaveEvent(self, event):
        self.palette_splice.leave()
        super().dragLeaveEvent(event)

    def dropEvent(self, event):
        if not event.mimeData().hasFormat(BLOCK_MIME):
            event.ignore()
            return
        name = bytes(event.mimeData().data(BLOCK_MIME)).decode("utf-8", "replace").strip()   # any program's bytes
        self.palette_splice.drop(name, self.mapToScene(event.position().toPoint()))
        event.acceptProposedAction()
        self.setFocus()

    # ---------------------------------------------------------------- tooltips and menus
    def viewportEvent(self, event):
        if event.type() == QEvent.ToolTip:
            text = self.tooltip_at(self.mapToScene(event.pos()))
            if text:
                QToolTip.showText(event.globalPos(), text, self.viewport())
            else:
                QToolTip.hideText()
            return True
        return super().viewportEvent(event)

    def tooltip_at(self, sp: QPointF) -> str:
        """What hovering at ``sp`` tells: a wire's inferred type, a port's, a block's problems."""
        return tooltip_at(self, sp)

    def contextMenuEvent(self, event):
        on_frame = self.canvas_layout.frame_at(self.mapToScene(event.pos())) is not None
        if not on_frame and self.quick_add.open_on_canvas(self.mapToScene(event.pos())):
            return                      # empty canvas: the add-block popup, its foot the old menu
        menu = self.context_menu(self.mapToScene(event.pos()))
        menu.exec(event.globalPos())

    def context_menu(self, sp: QPointF):
        """The menu for what is at ``sp``: a block, a wire, or the canvas."""
        self._last_scene_pos = sp
        return context_menu(self, sp)

    # ---------------------------------------------------------------- selection
    def _on_selection(self):
        try:
            ids = self.selected_nodes()
        except RuntimeError:
            return
        if self._scene.overview is not None and self._scene.overview_on:
            self._scene.overview.mark_dirty()
        self.selection_changed.emit(ids)

    def _touch_minimap(self) -> None:
        if self._minimap is not None:
            self._minimap.mark_dirty()
