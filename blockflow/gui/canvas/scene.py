"""The scene: the items of one page of a Document, kept in sync with it.

DiagramScene mirrors one page (node id -> NodeItem, Edge -> EdgeItem) and is also what
render_page draws (unbound: ``load`` a page once). Bound to a Document (``bind``), it follows the
document's signals itself (blocks and wires added, removed, changed, moved; a new program; the
current page switched, a block renamed, the project replaced), as orange-canvas-core's scene
follows its scheme, and tells the view what it needs through its own signals.
"""
from __future__ import annotations

import math

from PySide6.QtCore import QLineF, QPointF, QRectF, QTimer, Signal
from PySide6.QtGui import QPainter, QPen
from PySide6.QtWidgets import QGraphicsItem, QGraphicsScene

from blockflow.project import Edge
from blockflow.present.nodeview import node_data, program_changes, wire_class
from blockflow.gui.canvas.items import EdgeItem, LiveWireItem, NodeItem, NoticeItem
from blockflow.gui.canvas.overview import OverviewItem
from blockflow.gui.common.theme import Style

__all__ = ["DiagramScene", "GRID", "OVERVIEW_SCALE", "OVERVIEW_MIN_NODES", "FAR_TITLES_MAX_NODES",
           "FINE_WIRES_MIN_EDGES"]

#: below this zoom, big pages are drawn by one overview item
OVERVIEW_SCALE = 0.3
#: pages with at least this many blocks use the overview item when zoomed far out (below
#: Style.FLAT_LOD their blocks are flat boxes without text, which the overview draws the same)
OVERVIEW_MIN_NODES = 500
#: pages with fewer blocks keep the op names on the blocks when zoomed out to Style.FLAT_LOD
#: (a fitted small page stays readable); bigger ones draw no text below Style.DETAIL_LOD, so
#: zoomed-out frames of 1000+ block pages stay fast
FAR_TITLES_MAX_NODES = 500
#: pages with at least this many wires draw them with 1 px pens (Qt's fast stroking path)
FINE_WIRES_MIN_EDGES = 500
#: the grid blocks snap to, in scene units
GRID = 10.0


class DiagramScene(QGraphicsScene):
    """The items of one page: node id -> NodeItem, Edge -> EdgeItem."""

    #: the page's items are about to be rebuilt (another page, a renamed block, a new project)
    about_to_reload = Signal()
    #: ... and were rebuilt
    reloaded = Signal()
    #: blocks or wires were added, removed, moved or drawn otherwise (an overview redraws)
    contents_changed = Signal()
    #: a wire's item went with it (the view forgets it was selected)
    wire_removed = Signal(object)

    def __init__(self, registry, style: Style, parent=None):
        super().__init__(parent)
        self.doc = None
        self.registry = registry
        self.style = style
        self.page = None
        #: the program the blocks' types, problems and wires are drawn from: the page's own, or,
        #: inside an opened instance, the host page's (``program_page``), read at ``level``
        self.program = None
        self.program_page: str | None = None
        #: the opened instance's flat id in ``program`` ("" when a page or a definition alone is drawn)
        self.level = ""
        self.node_items: dict[str, NodeItem] = {}
        self.edge_items: dict[Edge, EdgeItem] = {}
        self.show_grid = True
        self.render_mode = False          # headless picture: no cache, no grid
        self.overview: OverviewItem | None = None
        self.overview_on = False
        self._scopes: set = set()         # the scopes of the blocks shown (their tabs: _show_scopes)
        self.setItemIndexMethod(QGraphicsScene.BspTreeIndex)
        self.setBackgroundBrush(style.background)

    # -------------------------------------------------------------------- building
    def load(self, page, program=None, level: str = "") -> None:
        """Build the items of ``page`` (replacing whatever was shown). ``level``: when ``page`` is
        a composite's diagram drawn inside an opened instance, that instance's flat id in
        ``program`` (its host page's)."""
        self.clear()
        self.node_items.clear()
        self.edge_items.clear()
        self.overview = None
        self.overview_on = False
        self.page = page
        self.program = program
        self.level = level
        self.style.set_fine_wires(len(page.edges) >= FINE_WIRES_MIN_EDGES)
        self.style.title_lod = Style.FLAT_LOD if len(page.nodes) < FAR_TITLES_MAX_NODES else Style.DETAIL_LOD
        incoming: dict[str, list] = {}
        outgoing: dict[str, list] = {}
        for e in page.edges:
            incoming.setdefault(e.dst, []).append(e)
            outgoing.setdefault(e.src, []).append(e)
        for nid in page.nodes:
            self._make_node(nid, incoming.get(nid, ()), outgoing.get(nid, ()))
        for e in page.edges:
            self._make_edge(e)
        self._show_scopes()
        self.fit_scene_rect()

    def _make_node(self, nid: str, incoming=(), outgoing=()) -> NodeItem:
        data = node_data(self.page, nid, self.registry, incoming, outgoing, self.program, self.level)
        item = NodeItem(data, self.style, bool(self.page.nodes[nid].collapsed))
        item.setPos(*self.page.nodes[nid].position)
        self.addItem(item)
        flags = QGraphicsItem.ItemIsSelectable | QGraphicsItem.ItemIsMovable
        if not self.render_mode:
            item.setCacheMode(QGraphicsItem.DeviceCoordinateCache)
            item.setAcceptHoverEvents(True)
        # geometry notifications only after placement (docs/qt.md §3: itemChange is costly)
        item.setFlags(flags | QGraphicsItem.ItemSendsGeometryChanges)
        self.node_items[nid] = item
        return item

    def _make_edge(self, e: Edge) -> EdgeItem | None:
        src, dst = self.node_items.get(e.src), self.node_items.get(e.dst)
        if src is None or dst is None:
            return None
        item = EdgeItem(e, src, dst, self.style)
        if self.program is not None:
            item.set_class(wire_class(self.program, e, self.level))
        self.addItem(item)
        if self.overview_on:
            item.setVisible(False)
        src.edges.add(item)
        dst.edges.add(item)
        self.edge_items[e] = item
        return item

    def node_wires(self, nid: str):
        item = self.node_items.get(nid)
        if item is None:
            return (), ()
        return ([e.edge for e in item.edges if e.edge.dst == nid],
                [e.edge for e in item.edges if e.edge.src == nid])

    def refresh_node(self, nid: str) -> None:
        """Rebuild what a block shows from the model (ports, label, inline values...)."""
        item = self.node_items.get(nid)
        if item is None or nid not in self.page.nodes:
            return
        inc, out = self.node_wires(nid)
        moved = item.set_data(node_data(self.page, nid, self.registry, inc, out, self.program, self.level))
        if item.set_view(bool(self.page.nodes[nid].collapsed), item.show_scope) or moved:
            for e in item.edges:
                e.update_path()
        if item.data.scope not in self._scopes:
            self._show_scopes()
        self._overview_dirty()

    def _show_scopes(self) -> None:
        """Give the blocks their scope tabs only where the page holds more than one scope (a
        tab repeating the one scope on every block says nothing)."""
        self._scopes = {item.data.scope for item in self.node_items.values()}
        several = len(self._scopes) > 1
        for item in self.node_items.values():
            if item.set_view(item.collapsed, several):
                for e in item.edges:
                    e.update_path()

    # -------------------------------------------------------------------- bound to a document
    def bind(self, document) -> None:
        """Show ``document``'s current page and follow its signals from now on."""
        self.doc = d = document
        self.registry = document.blocks        # blocks and the project's composites (@Name)
        self._compile_timer = QTimer(self)
        self._compile_timer.setSingleShot(True)
        self._compile_timer.timeout.connect(self._apply_ready_program)
        self._rect_timer = QTimer(self)
        self._rect_timer.setSingleShot(True)
        self._rect_timer.timeout.connect(self.fit_scene_rect)
        d.node_added.connect(self._on_node_added)
        d.node_removed.connect(self._on_node_removed)
        d.node_changed.connect(self._on_node_changed)
        d.nodes_moved.connect(self._on_nodes_moved)
        d.edge_added.connect(self._on_edge_added)
        d.edge_removed.connect(self._on_edge_removed)
        d.page_field_changed.connect(self._on_page_field)
        d.structure_changed.connect(self._on_structure)
        d.program_ready.connect(self._on_program_ready)
        d.current_page_changed.connect(self.reload)
        d.page_renamed.connect(self._on_page_renamed)
        d.node_renamed.connect(self._on_node_renamed)
        d.project_replaced.connect(self.reload)
        d.location_changed.connect(self._on_location_changed)
        self.reload()

    def reload(self, *_why) -> None:
        """Rebuild the items of the document's current page (its program once compiled)."""
        self.about_to_reload.emit()
        self.blockSignals(True)         # no selectionChanged for items about to go
        self.registry = self.doc.blocks       # (another project: other composites)
        self.program_page, level = self._program_source()
        self.load(self.doc.page(), self.doc.ready_program(self.program_page), level)
        self.blockSignals(False)
        self._compile_timer.start(0)
        self.reloaded.emit()

    def _program_source(self) -> tuple[str, str]:
        """(the page whose program the diagram shown is drawn from, the level in it): inside an
        opened instance the host page's run is what the canvas shows, so its types and problems
        are too (a definition compiled alone has its parameters' defaults and open dimensions: its
        Variables would be outlined red where the instance is fine)."""
        loc, current = self.doc.location, self.doc.current_page
        if loc.diagram == current and loc.level and loc.host is not None:
            return loc.host, loc.level
        return current, ""

    def _on_location_changed(self) -> None:
        """Another instance of the same definition opened (or the definition alone, or back): the
        diagram is the same, its types and problems come from elsewhere."""
        if self.page is None or self.page is not self.doc.page():
            return
        source = self._program_source()
        if source == (self.program_page, self.level):
            return
        self.program_page, self.level = source
        self.program = None
        program = self.doc.ready_program(self.program_page)
        if program is not None:
            self.apply_program(program)
        else:                     # compiling: the declared constraints until program_ready
            self.refresh_all()
            for e, item in self.edge_items.items():
                item.set_class("none")
            self._compile_timer.start(0)
        self.contents_changed.emit()

    def program_due(self) -> bool:
        """True while the document's newest program is about to be shown (after an edit)."""
        return self.doc is not None and self._compile_timer.isActive()

    def _current(self, page: str) -> bool:
        return page == self.doc.current_page and self.page is self.doc.page()

    def _apply_ready_program(self) -> None:
        """Show the page's program once it is compiled (program_ready calls again until then)."""
        if self.page is not None:
            program = self.doc.ready_program(self.program_page)
            if program is not None and program is not self.program:
                if self.apply_program(program):
                    self.contents_changed.emit()

    def _on_program_ready(self, page):
        if page == self.program_page and self.page is self.doc.page():
            self._apply_ready_program()

    def _on_node_added(self, page, nid):
        if self._current(page):
            self.add_node(nid)
            self._rect_timer.start(50)
            self.contents_changed.emit()

    def _on_node_removed(self, page, nid):
        if self._current(page):
            self.remove_node(nid)
            self.contents_changed.emit()

    def _on_node_changed(self, page, nid):
        if self._current(page):
            self.refresh_node(nid)

    def _on_nodes_moved(self, page, ids):
        if self._current(page):
            self.move_nodes(ids)
            self._rect_timer.start(50)
            self.contents_changed.emit()

    def _on_edge_added(self, page, edge):
        if self._current(page):
            self.add_edge(edge)
            self.contents_changed.emit()

    def _on_edge_removed(self, page, edge):
        if self._current(page):
            self.wire_removed.emit(edge)
            self.remove_edge(edge)
            self.contents_changed.emit()

    def _on_page_field(self, page, field):
        if self._current(page) and field == "loss":
            self.refresh_all()

    def _on_structure(self, page):
        if self._current(page):
            self._compile_timer.start(0)

    def _on_node_renamed(self, page, _old, _new):
        # items and wires are keyed by ids: rebuild the page's items
        if self._current(page):
            self.reload()

    def _on_page_renamed(self, old, new):
        if self.program_page == old:          # the host page of the instance shown
            self.program_page = new
        if self.page is not None and self.page.name == new:
            self.refresh_all()

    # -------------------------------------------------------------------- model changes
    def add_node(self, nid: str) -> NodeItem:
        item = self._make_node(nid)
        if item.data.scope not in self._scopes or len(self._scopes) > 1:
            self._show_scopes()
        if self.overview_on:
            item.setVisible(False)
        self._overview_dirty()
        return item

    def remove_node(self, nid: str) -> None:
        item = self.node_items.pop(nid, None)
        if item is None:
            return
        for e in list(item.edges):
            self.remove_edge(e.edge)
        self.removeItem(item)
        self._overview_dirty()

    def add_edge(self, e: Edge) -> None:
        if e in self.edge_items:
            return
        self._make_edge(e)
        self.refresh_node(e.dst)
        self.refresh_node(e.src)

    def remove_edge(self, e: Edge) -> None:
        item = self.edge_items.pop(e, None)
        if item is None:
            return
        item.src.edges.discard(item)
        item.dst.edges.discard(item)
        self.removeItem(item)
        self.refresh_node(e.dst)
        self.refresh_node(e.src)

    def move_nodes(self, ids) -> None:
        for nid in ids:
            item = self.node_items.get(nid)
            if item is not None:
                x, y = self.page.nodes[nid].position
                if item.pos() != QPointF(x, y):
                    item.setPos(x, y)
        self._overview_dirty()

    def apply_program(self, program) -> bool:
        """Show a compiled program: port and wire dtypes, error outlines. After another program
        of the page, only the blocks and wires it shows otherwise are redrawn: an edit costs
        what it changed, not the page. True when anything is drawn otherwise."""
        old, self.program = self.program, program
        if old is None or self.level:
            # inside an instance the programs' flat ids are not the drawn ones: the definition's
            # diagram is redrawn whole (it is a few blocks, however big the host page is)
            nodes, edges = self.page.nodes, self.edge_items
        else:
            nodes, edges = program_changes(old, program)
        for nid in nodes:
            self.refresh_node(nid)
        for e in edges:
            item = self.edge_items.get(e)
            if item is not None:
                item.set_class(wire_class(program, e, self.level))
        if nodes or edges:
            self._overview_dirty()
        return bool(nodes or edges)

    def refresh_all(self) -> None:
        for nid in self.page.nodes:
            self.refresh_node(nid)

    # -------------------------------------------------------------------- overview
    def _overview_dirty(self) -> None:
        if self.overview is not None:
            self.overview.mark_dirty()

    def set_overview(self, on: bool) -> None:
        """Far out on a big page: hide the blocks and wires, draw them all with one item."""
        if on == self.overview_on:
            return
        self.overview_on = on
        if on and self.overview is None:
            self.overview = OverviewItem(self, self.style)
            self.addItem(self.overview)
        if self.overview is not None:
            self.overview.live.clear()
            self.overview.mark_dirty()
            self.overview.setVisible(on)
        for item in self.node_items.values():
            item.setVisible(not on)
        for item in self.edge_items.values():
            item.setVisible(not on)

    def make_live(self, item: NodeItem) -> None:
        """A block moved while the overview draws the page: show it and its wires as items and
        leave them out of the overview, so each further move repaints only them."""
        if self.overview is None or item.node_id in self.overview.live:
            return
        self.overview.live.add(item.node_id)
        item.setVisible(True)
        for e in item.edges:
            e.setVisible(True)
        self.overview.mark_dirty()

    # -------------------------------------------------------------------- geometry
    def items_rect(self) -> QRectF:
        rect = QRectF()
        for item in self.node_items.values():
            rect = rect.united(item.sceneBoundingRect())
        return rect

    def fit_scene_rect(self) -> None:
        """Room to pan around the diagram."""
        rect = self.items_rect()
        if rect.isNull():
            rect = QRectF(0, 0, 800, 600)
        m = max(2000.0, rect.width(), rect.height())
        self.setSceneRect(rect.adjusted(-m, -m, m, m))

    def restyle(self) -> None:
        """The shared Style was rebuilt (a palette change): drop what was drawn with the old one."""
        self.setBackgroundBrush(self.style.background)
        for item in self.node_items.values():
            item.update()               # also drops the item's cached pixmap
        for item in self.edge_items.values():
            item._restyle()
        if self.overview is not None:
            self.overview.mark_dirty()
        for item in self.items():
            if isinstance(item, (NoticeItem, LiveWireItem)):
                if isinstance(item, LiveWireItem):
                    item.setPen(self.style.live_wire)
                item.update()
        self.update()

    def drawBackground(self, painter, rect):
        """The background and, from zoom 0.45 up, the grid: lines every 2 grid steps, a darker one
        every 10, drawn as 1-pixel cosmetic lines without antialiasing so they stay crisp and even
        at every zoom (a texture brush scaled by the view drops or doubles lines)."""
        painter.fillRect(rect, self.style.background)
        if not self.show_grid or self.render_mode or painter.worldTransform().m11() < 0.45:
            return
        step = GRID * 2
        minor, major = [], []
        top, bottom, left, right = rect.top(), rect.bottom(), rect.left(), rect.right()
        for i in range(math.ceil(left / step), math.floor(right / step) + 1):
            (major if i % 5 == 0 else minor).append(QLineF(i * step, top, i * step, bottom))
        for i in range(math.ceil(top / step), math.floor(bottom / step) + 1):
            (major if i % 5 == 0 else minor).append(QLineF(left, i * step, right, i * step))
        aa = painter.testRenderHint(QPainter.Antialiasing)
        painter.setRenderHint(QPainter.Antialiasing, False)
        painter.setPen(QPen(self.style.grid_minor, 0))
        painter.drawLines(minor)
        painter.setPen(QPen(self.style.grid_major, 0))
        painter.drawLines(major)
        painter.setRenderHint(QPainter.Antialiasing, aa)

