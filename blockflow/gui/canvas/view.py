"""The canvas: a QGraphicsView of the Document's current page.

DiagramScene mirrors one page (node id -> NodeItem, Edge -> EdgeItem) and is also what
render_page draws. DiagramView follows the Document's signals, turns mouse gestures into Document
edits (wiring, moving, deleting, pasting...) and holds no model state of its own: a move is pushed
once, on release, as one undo step.
"""
from __future__ import annotations

import html
import math
import time
import weakref

import networkx as nx
import numpy as np
from PySide6.QtCore import QEvent, QLineF, QMimeData, QPoint, QPointF, QRectF, Qt, QTimer, Signal
from PySide6.QtGui import (QColor, QKeySequence, QMouseEvent, QPainter, QPen,
                           QPixmap)
from PySide6.QtWidgets import (QApplication, QGraphicsItem, QGraphicsScene, QGraphicsView,
                               QInputDialog, QMenu, QMessageBox, QToolTip, QWidget)

from blockflow.errors import ProjectError
from blockflow.project import Edge, split_port
from blockflow.spec import SCOPE_PORT, shape_text
from blockflow.gui.canvas.draglayer import DragLayer
from blockflow.gui.canvas.gradients import GradientHighlighter
from blockflow.gui.canvas.items import EdgeItem, LiveWireItem, NodeData, NodeItem, NoticeItem, OverviewItem, Port
from blockflow.gui.common.plaintext import literal
from blockflow.gui.common.theme import Style, dtype_class

__all__ = ["BLOCK_MIME", "FRAGMENT_MIME", "DiagramScene", "DiagramView", "Minimap", "node_data"]

from blockflow.gui.document.clipboard import BLOCK_MIME, FRAGMENT_MIME

_clipboard_hook = []


class _NotCompiled:
    """Stands for a page's program in a tooltip until its first compile lands: nothing inferred."""

    port_slots: dict = {}
    edge_types: dict = {}


_NOT_COMPILED = _NotCompiled()


def _release_clipboard_at_exit() -> None:
    """Qt keeps clipboard data in a C++ static that outlives Python; destroying its wrapped
    QMimeData after the interpreter is gone crashes the process on exit. Clear it while Python
    still runs (once registered, at interpreter exit)."""
    if not _clipboard_hook:
        import atexit

        def clear():
            app = QApplication.instance()
            if app is not None:
                app.clipboard().clear()

        atexit.register(clear)
        _clipboard_hook.append(clear)

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
MIN_SCALE, MAX_SCALE = 0.02, 4.0
GRID = 10.0
#: how far a repeated paste at the same spot moves down and right of the previous one
PASTE_STEP = 3 * GRID


# ------------------------------------------------------------------------------- node data
def format_inline(value) -> str:
    """A short text for an inline constant: ``2``, ``[1, 2, 3]``, ``f32[5, 4]``."""
    arr = np.asarray(value)
    if arr.size == 1:
        v = arr.reshape(()).item()
        return f"{v:.4g}" if isinstance(v, float) else str(v)
    if arr.ndim == 1 and arr.size <= 4:
        return "[" + ", ".join(f"{v:.3g}" if isinstance(v, float) else str(v) for v in arr.tolist()) + "]"
    short = {"float32": "f32", "float64": "f64", "float16": "f16", "int32": "i32", "int64": "i64"}
    return f"{short.get(arr.dtype.name, arr.dtype.name)}{shape_text(arr.shape)}"


_PROBLEMS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def problems_by_node(program) -> dict:
    """``{node: (error texts, warning texts)}`` of a program, made once per program (a block
    looked its own up in every diagnostic: a page of 10,000 broken blocks took seconds)."""
    table = _PROBLEMS.get(program)
    if table is None:
        errors: dict[str, list] = {}
        warnings: dict[str, list] = {}
        for d in program.diagnostics:
            if d.node is None:
                continue
            if d.severity == "error":
                errors.setdefault(d.node, []).append(d.message if not d.port else f"{d.port}: {d.message}")
            else:
                warnings.setdefault(d.node, []).append(d.message)
        table = _PROBLEMS[program] = {n: (tuple(errors.get(n, ())), tuple(warnings.get(n, ())))
                                      for n in errors.keys() | warnings.keys()}
    return table


def program_changes(old, new) -> tuple[set, set]:
    """The nodes and wires whose shown dtypes or problems differ between two programs of a page
    (what a block and a wire draw from a program: dtype classes, errors and warnings)."""
    nodes = {n for n in problems_by_node(old).keys() | problems_by_node(new).keys()
             if problems_by_node(old).get(n) != problems_by_node(new).get(n)}

    def dtype(program, key):
        i = program.port_slots.get(key)
        return None if i is None else program.slots[i].type.dtype

    for key in old.port_slots.keys() | new.port_slots.keys():
        if dtype(old, key) != dtype(new, key):
            nodes.add(key[0])
    edges = set()
    for e in old.edge_types.keys() | new.edge_types.keys():
        a, b = old.edge_types.get(e), new.edge_types.get(e)
        if (a is None) != (b is None) or (a is not None and a.dtype != b.dtype):
            edges.add(e)
            nodes.add(e.dst)
    return nodes, edges


def node_data(page, node_id: str, registry, incoming=(), outgoing=(), program=None) -> NodeData:
    """What a block shows, from the model: ports (an InputList shows one empty port after its
    last wired one), dtype classes (compiled types when ``program`` is given, else the declared
    constraints), inline constants, errors and the loss mark. ``incoming``/``outgoing``: the
    node's wires."""
    node = page.nodes[node_id]
    spec = registry.get(node.block)
    fed = {e.dst_port: e for e in incoming}
    types = program.edge_types if program is not None else {}
    slots = program.port_slots if program is not None else {}
    inputs, outputs = [], []

    def in_port(name, label, constraint, faint):
        edge = fed.get(name)
        inline = node.inputs.get(name)
        cls = dtype_class(constraint)
        if edge is not None:
            t = types.get(edge)
            if t is not None:
                cls = dtype_class(t.dtype)
        elif inline is not None:
            cls = dtype_class(np.asarray(inline).dtype)
        port = Port(name, label, cls, None if inline is None or edge is not None else format_inline(inline),
                    edge is not None, faint, constraint)
        return port

    if spec is not None:
        for decl in spec.inputs:
            faint = decl.static or decl.optional
            if decl.variadic:
                used = [split_port(p)[1] for p in list(fed) + list(node.inputs)
                        if split_port(p)[0] == decl.name]
                count = max(decl.min_count, max((i for i in used if i is not None), default=-1) + 2)
                for i in range(count):
                    inputs.append(in_port(decl.port(i), decl.port(i), decl.dtype, faint))
            else:
                inputs.append(in_port(decl.name, decl.name, decl.dtype, faint))
        for decl in spec.outputs:
            if decl.variadic:
                counter = spec.attr_map.get(decl.count)
                if counter is not None:
                    n = node.attrs.get(decl.count, None if counter.required else counter.default)
                    n = n if isinstance(n, int) and not isinstance(n, bool) and 0 <= n <= 64 else 1
                else:
                    used = [split_port(p)[1] for p in fed if split_port(p)[0] == decl.count]
                    n = max((i for i in used if i is not None), default=-1) + 1
                names = [decl.port(i) for i in range(max(n, 1))]
            else:
                names = [decl.name]
            for name in names:
                cls = "any"
                slot = slots.get((node_id, name))
                if slot is not None:
                    cls = dtype_class(program.slots[slot].type.dtype)
                elif spec.role in ("placeholder", "variable") or node.block == "Const":
                    cls = dtype_class(node.attrs.get("dtype", "float32"))
                outputs.append(Port(name, name, cls, fed=True))
    known_in = {p.name for p in inputs}
    for port in sorted(fed):
        if port not in known_in:
            inputs.append(in_port(port, port + " ?", "any", True))
    known_out = {p.name for p in outputs}
    for port in sorted({e.src_port for e in outgoing}):
        if port not in known_out:
            outputs.append(Port(port, port + " ?", "any", fed=True))
            known_out.add(port)
    errors, warnings = (), ()
    if program is not None:
        errors, warnings = problems_by_node(program).get(node_id, ((), ()))
    loss = page.loss is not None and page.loss.partition(":")[0] == node_id
    return NodeData(node_id, node.block, spec.category if spec else "unknown",
                    node.label or node_id, page.scope, inputs, outputs, errors, warnings, loss,
                    spec is not None)


# ------------------------------------------------------------------------------- the scene
class DiagramScene(QGraphicsScene):
    """The items of one page: node id -> NodeItem, Edge -> EdgeItem."""

    def __init__(self, registry, style: Style, parent=None):
        super().__init__(parent)
        self.registry = registry
        self.style = style
        self.page = None
        self.program = None
        self.node_items: dict[str, NodeItem] = {}
        self.edge_items: dict[Edge, EdgeItem] = {}
        self.show_grid = True
        self.render_mode = False          # headless picture: no cache, no grid
        self.overview: OverviewItem | None = None
        self.overview_on = False
        self.setItemIndexMethod(QGraphicsScene.BspTreeIndex)
        self.setBackgroundBrush(style.background)

    # -------------------------------------------------------------------- building
    def load(self, page, program=None) -> None:
        """Build the items of ``page`` (replacing whatever was shown)."""
        self.clear()
        self.node_items.clear()
        self.edge_items.clear()
        self.overview = None
        self.overview_on = False
        self.page = page
        self.program = program
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
        self.fit_scene_rect()

    def _make_node(self, nid: str, incoming=(), outgoing=()) -> NodeItem:
        data = node_data(self.page, nid, self.registry, incoming, outgoing, self.program)
        item = NodeItem(data, self.style)
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
            t = self.program.edge_types.get(e)
            item.set_class(dtype_class(t.dtype) if t is not None else "none")
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
        if item.set_data(node_data(self.page, nid, self.registry, inc, out, self.program)):
            for e in item.edges:
                e.update_path()
        self._overview_dirty()

    # -------------------------------------------------------------------- model changes
    def add_node(self, nid: str) -> NodeItem:
        item = self._make_node(nid)
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
        if old is None:
            nodes, edges = self.page.nodes, self.edge_items
        else:
            nodes, edges = program_changes(old, program)
        for nid in nodes:
            self.refresh_node(nid)
        for e in edges:
            item = self.edge_items.get(e)
            if item is not None:
                t = program.edge_types.get(e)
                item.set_class(dtype_class(t.dtype) if t is not None else "none")
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


# ------------------------------------------------------------------------------- gestures
class _WireDrag:
    """Drawing a wire: from an output (forward) or from an unfed input (backward); or a wire
    picked up from the input it feeds (``picked``)."""

    def __init__(self, node: str, port: str, from_output: bool, picked: Edge | None = None):
        self.node, self.port, self.from_output, self.picked = node, port, from_output, picked
        self.live: LiveWireItem | None = None
        self.accept: dict[str, frozenset] = {}
        self.target: tuple[str, str] | None = None
        self.pending: list[tuple[str, str]] = []      # lit ports still to check exactly
        self.refused: dict[tuple[str, str], str] = {}  # lit, then refused by the exact check


#: while a wire is drawn, lit ports in view are checked exactly (a trial compile each, by the
#: Document) in slices of this many seconds between events, the nearest first, at most this many
LIGHT_UP_SLICE, LIGHT_UP_MAX_CHECKS = 0.008, 400


def _compatible(src_cls: str, constraint: str) -> bool:
    """Cheap dtype pre-check for lighting ports up (the Document has the final word)."""
    want = dtype_class(constraint)
    if src_cls == "any":
        return True
    if constraint == "number":
        return src_cls != "bool"
    return want == "any" or want == src_cls


# ------------------------------------------------------------------------------- the view
class DiagramView(QGraphicsView):
    """The editor's canvas on ``document.current_page``."""

    selection_changed = Signal(list)
    status_message = Signal(str)
    view_changed = Signal()

    def __init__(self, document, parent=None):
        super().__init__(parent)
        self.doc = document
        self.style_ = Style(self.palette())
        self._scene = DiagramScene(document.registry, self.style_, self)
        self.setScene(self._scene)
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
        self._wire: _WireDrag | None = None
        self._pan_from: QPoint | None = None
        self._space = False
        self._move_start: dict[str, QPointF] | None = None
        self._selected_wires: set[Edge] = set()
        self._pending_fit = True
        self._views: dict[str, tuple] = {}       # page -> (transform, centre) to come back to
        self._last_scene_pos: QPointF | None = None
        self._last_paste: tuple | None = None    # (page, anchor, repeat, {id: position})
        self._minimap: Minimap | None = None
        self._notice_timer = QTimer(self)
        self._notice_timer.setSingleShot(True)
        self._notice_timer.timeout.connect(self._hide_notice)
        self._compile_timer = QTimer(self)
        self._compile_timer.setSingleShot(True)
        self._compile_timer.timeout.connect(self._apply_program)
        self._rect_timer = QTimer(self)
        self._rect_timer.setSingleShot(True)
        self._rect_timer.timeout.connect(self._scene.fit_scene_rect)
        self._notice: NoticeItem | None = None
        self._light_timer = QTimer(self)         # exact checks of lit ports, a slice at a time
        self._light_timer.setSingleShot(True)
        self._light_timer.timeout.connect(self._refine_light_up)
        self._drag_layer = DragLayer(self)       # moving blocks drawn over a still picture
        self._scene.selectionChanged.connect(self._on_selection)
        d = document
        d.node_added.connect(self._on_node_added)
        d.node_removed.connect(self._on_node_removed)
        d.node_changed.connect(self._on_node_changed)
        d.nodes_moved.connect(self._on_nodes_moved)
        d.edge_added.connect(self._on_edge_added)
        d.edge_removed.connect(self._on_edge_removed)
        d.page_field_changed.connect(self._on_page_field)
        d.structure_changed.connect(self._on_structure)
        d.program_ready.connect(self._on_program_ready)
        d.current_page_changed.connect(self._on_page_switched)
        d.page_renamed.connect(self._on_page_renamed)
        d.node_renamed.connect(self._on_node_renamed)
        d.project_replaced.connect(self._on_project_replaced)
        self._load()
        self.gradients = GradientHighlighter(self._scene, self)   # wires coloured by gradient

    # ---------------------------------------------------------------- model -> items
    def _current(self, page: str) -> bool:
        return page == self.doc.current_page and self._scene.page is self.doc.page()

    def _load(self) -> None:
        self._drag_layer.end()
        self._move_start = None
        self._wire = None
        self._selected_wires.clear()
        self._notice = None
        self._scene.blockSignals(True)
        self._scene.load(self.doc.page(), self.doc.ready_program())
        self._scene.blockSignals(False)
        self._update_overview()
        self._schedule_compile(0)
        self.selection_changed.emit([])
        self._touch_minimap()

    def _schedule_compile(self, delay: int = 0) -> None:
        self._compile_timer.start(delay)

    def _apply_program(self) -> None:
        """Show the page's program once it is compiled (program_ready calls again until then)."""
        if self._scene.page is not None:
            program = self.doc.ready_program()
            if program is not None and program is not self._scene.program:
                if self._scene.apply_program(program):
                    self._touch_minimap()

    def _on_program_ready(self, page):
        if self._current(page):
            self._apply_program()

    def _on_node_added(self, page, nid):
        if self._current(page):
            self._scene.add_node(nid)
            self._rect_timer.start(50)
            self._touch_minimap()

    def _on_node_removed(self, page, nid):
        if self._current(page):
            self._scene.remove_node(nid)
            self._touch_minimap()

    def _on_node_changed(self, page, nid):
        if self._current(page):
            self._scene.refresh_node(nid)

    def _on_nodes_moved(self, page, ids):
        if self._current(page):
            self._scene.move_nodes(ids)
            self._rect_timer.start(50)
            self._touch_minimap()

    def _on_edge_added(self, page, edge):
        if self._current(page):
            self._scene.add_edge(edge)
            self._touch_minimap()

    def _on_edge_removed(self, page, edge):
        if self._current(page):
            self._selected_wires.discard(edge)
            self._scene.remove_edge(edge)
            self._touch_minimap()

    def _on_page_field(self, page, field):
        if self._current(page) and field == "loss":
            self._scene.refresh_all()

    def _on_structure(self, page):
        if self._current(page):
            self._schedule_compile(0)

    def _on_page_switched(self, page):
        old = self._scene.page
        if old is not None:
            self._views[old.name] = (self.transform(), self.mapToScene(self.viewport().rect().center()))
        self._load()
        saved = self._views.get(page)
        if saved is not None:
            self.setTransform(saved[0])
            self.centerOn(saved[1])
            self._update_overview()
        else:
            self.fit_to_view()

    def _on_page_renamed(self, old, new):
        if old in self._views:
            self._views[new] = self._views.pop(old)
        if self._scene.page is not None and self._scene.page.name == new:
            self._scene.refresh_all()

    def _on_node_renamed(self, page, old, new):
        """A block's id changed: its item and wires are keyed by ids, so rebuild the page's items
        (the view stays where it is) and keep the selection on the renamed block."""
        if not self._current(page):
            return
        selected = [new if i.node_id == old else i.node_id for i in self._scene.selectedItems()
                    if isinstance(i, NodeItem)]     # the items still carry the old id
        self._load()
        self.select_nodes([n for n in selected if n in self._scene.node_items])

    def _on_project_replaced(self):
        self._views.clear()
        self._load()
        self._pending_fit = True
        if self.isVisible():
            self.fit_to_view()

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

    def select_all(self) -> None:
        self.select_nodes(self._scene.node_items)

    def center_on_node(self, node_id: str) -> None:
        item = self._scene.node_items.get(node_id)
        if item is not None:
            if not self.sceneRect().contains(item.sceneBoundingRect()):
                self._scene.fit_scene_rect()
            if self.transform().m11() < 0.5:
                self._set_scale(0.8)
            self.centerOn(item.sceneBoundingRect().center())
            self._changed()

    def fit_to_view(self) -> None:
        self._scene.fit_scene_rect()
        rect = self._scene.items_rect()
        self._pending_fit = False
        if rect.isNull():
            self.resetTransform()
            self.centerOn(QPointF(300, 200))
            self._changed()
            return
        rect = rect.adjusted(-40, -40, 40, 40)
        vp = self.viewport().rect()
        s = min(vp.width() / rect.width(), vp.height() / rect.height(), 1.0)
        self._set_scale(max(MIN_SCALE, s))
        self.centerOn(rect.center())
        self._changed()

    def zoom_in(self) -> None:
        self._zoom(1.25, self.viewport().rect().center())

    def zoom_out(self) -> None:
        self._zoom(0.8, self.viewport().rect().center())

    def reset_zoom(self) -> None:
        centre = self.view_center_scene_pos()
        self._set_scale(1.0)
        self.centerOn(centre)
        self._changed()

    def zoom(self) -> float:
        return self.transform().m11()

    def view_center_scene_pos(self) -> QPointF:
        return self.mapToScene(self.viewport().rect().center())

    def drop_block(self, block: str, scene_pos: QPointF) -> str:
        """Add a block centred at ``scene_pos`` (snapped to the grid); returns its id."""
        spec = self.doc.registry.get(block)
        if spec is None:
            self.status_message.emit(f"there is no block called '{block}'")
            return ""
        from blockflow.project import Node, Page
        probe = Page(self.doc.current_page)
        probe.nodes["_"] = Node("_", block)
        size = NodeItem(node_data(probe, "_", self.doc.registry), self.style_)
        x = round((scene_pos.x() - size.w / 2) / GRID) * GRID
        y = round((scene_pos.y() - size.h / 2) / GRID) * GRID
        nid = self.doc.add_node(block, (x, y))
        self.select_nodes([nid])
        self.status_message.emit(f"added {block} {nid}")
        return nid

    def delete_selection(self) -> None:
        nodes = self.selected_nodes()
        wires = [e for e in self._selected_wires if e.src not in nodes and e.dst not in nodes]
        if not nodes and not wires:
            return
        stack = self.doc.undo_stack
        stack.beginMacro(f"Delete {len(nodes)} block(s), {len(wires)} wire(s)" if wires else
                         f"Delete {len(nodes)} block{'s' if len(nodes) != 1 else ''}")
        if wires:
            self.doc.disconnect(wires)
        if nodes:
            self.doc.remove_nodes(nodes)
        stack.endMacro()
        self._selected_wires.clear()
        self.status_message.emit(f"deleted {len(nodes)} block(s) and {len(wires)} wire(s)"
                                 if wires else f"deleted {len(nodes)} block(s)")

    def copy_selection(self) -> str | None:
        nodes = self.selected_nodes()
        if not nodes:
            return None
        text = self.doc.copy_fragment(nodes)
        mime = QMimeData()
        mime.setData(FRAGMENT_MIME, text.encode("utf-8"))
        mime.setText(text)
        QApplication.clipboard().setMimeData(mime)
        _release_clipboard_at_exit()
        self.status_message.emit(f"copied {len(nodes)} block(s)")
        return text

    def cut_selection(self) -> None:
        if self.copy_selection() is None:
            return
        stack = self.doc.undo_stack
        stack.beginMacro("Cut")
        self.delete_selection()
        stack.endMacro()

    def paste(self, text: str | None = None) -> list[str]:
        """Paste a fragment (the clipboard's when ``text`` is None) at the cursor, or at the view
        centre when the cursor is elsewhere; selects the pasted blocks."""
        if text is None:
            mime = QApplication.clipboard().mimeData()
            if mime is None:
                return []
            text = bytes(mime.data(FRAGMENT_MIME)).decode("utf-8") if mime.hasFormat(FRAGMENT_MIME) \
                else mime.text()
        if not text:
            return []
        pos = self._cursor_scene_pos()
        anchor = (round(pos.x() / GRID) * GRID, round(pos.y() / GRID) * GRID)
        # Pasting again at the same spot while the last paste still lies there: step down-right,
        # so the copies do not hide each other.
        repeat = 0
        last = self._last_paste
        page = self.doc.page()
        if last is not None and last[0] == page.name and last[1] == anchor and any(
                nid in page.nodes and tuple(page.nodes[nid].position) == tuple(p)
                for nid, p in last[3].items()):
            repeat = last[2] + 1
        at = (anchor[0] + repeat * PASTE_STEP, anchor[1] + repeat * PASTE_STEP)
        try:
            ids = self.doc.paste_fragment(text, at)
        except ProjectError as exc:
            self.status_message.emit(f"cannot paste: {exc}")
            return []
        self._last_paste = (page.name, anchor, repeat,
                            {nid: tuple(page.nodes[nid].position) for nid in ids if nid in page.nodes})
        self.select_nodes(ids)
        self.status_message.emit(f"pasted {len(ids)} block(s)")
        return ids

    def duplicate_selection(self) -> list[str]:
        nodes = self.selected_nodes()
        if not nodes:
            return []
        ids = self.doc.duplicate(nodes)
        self.select_nodes(ids)
        return ids

    def align_selection(self, how: str) -> None:
        items = [self._scene.node_items[n] for n in self.selected_nodes()]
        if len(items) < 2:
            return
        moves = {}
        if how == "left":
            x = min(i.pos().x() for i in items)
            new = {i: (x, i.pos().y()) for i in items}
        elif how == "right":
            r = max(i.pos().x() + i.w for i in items)
            new = {i: (r - i.w, i.pos().y()) for i in items}
        elif how == "top":
            y = min(i.pos().y() for i in items)
            new = {i: (i.pos().x(), y) for i in items}
        elif how == "bottom":
            b = max(i.pos().y() + i.h for i in items)
            new = {i: (i.pos().x(), b - i.h) for i in items}
        elif how == "hcenter":
            c = sum(i.pos().x() + i.w / 2 for i in items) / len(items)
            new = {i: (round((c - i.w / 2) / GRID) * GRID, i.pos().y()) for i in items}
        elif how == "vcenter":
            c = sum(i.pos().y() + i.h / 2 for i in items) / len(items)
            new = {i: (i.pos().x(), round((c - i.h / 2) / GRID) * GRID) for i in items}
        else:
            raise ValueError(f"unknown alignment {how!r}")
        for i, pos in new.items():
            moves[i.node_id] = ((i.pos().x(), i.pos().y()), pos)
        self._push_moves(moves, f"Align {how}")

    def distribute_selection(self, how: str) -> None:
        items = [self._scene.node_items[n] for n in self.selected_nodes()]
        if len(items) < 3:
            return
        horizontal = how == "horizontal"
        if how not in ("horizontal", "vertical"):
            raise ValueError(f"unknown distribution {how!r}")
        key = (lambda i: i.pos().x()) if horizontal else (lambda i: i.pos().y())
        size = (lambda i: i.w) if horizontal else (lambda i: i.h)
        items.sort(key=key)
        start, end = key(items[0]), key(items[-1]) + size(items[-1])
        gap = (end - start - sum(size(i) for i in items)) / (len(items) - 1)
        moves, at = {}, start
        for k, i in enumerate(items):
            old = (i.pos().x(), i.pos().y())
            # the end blocks stay; the ones between land on the grid
            to = at if k in (0, len(items) - 1) else round(at / GRID) * GRID
            moves[i.node_id] = (old, (to, old[1]) if horizontal else (old[0], to))
            at += size(i) + gap
        self._push_moves(moves, f"Distribute {how}ly")

    def _push_moves(self, moves: dict, text: str) -> None:
        moves = {k: v for k, v in moves.items() if tuple(v[0]) != tuple(v[1])}
        if not moves:
            return
        stack = self.doc.undo_stack
        stack.beginMacro(text)
        self.doc.move_nodes(moves)
        stack.endMacro()

    def auto_layout(self) -> None:
        try:
            self.doc.auto_layout()
        except ProjectError as exc:
            self.status_message.emit(str(exc))
            return
        self.fit_to_view()

    def minimap(self) -> QWidget:
        if self._minimap is None:
            self._minimap = Minimap(self)
        return self._minimap

    # ---------------------------------------------------------------- zoom and pan
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
        self._changed()

    def _update_overview(self) -> None:
        scale = self.transform().m11()
        big = len(self._scene.node_items) >= OVERVIEW_MIN_NODES
        self._scene.set_overview(big and scale < OVERVIEW_SCALE)
        # Far out, blocks are flat boxes: antialiasing only blurs them and their wires, and it
        # is most of the cost of repainting while a block is dragged (docs/qt.md §3).
        self.setRenderHint(QPainter.Antialiasing, scale >= Style.FLAT_LOD)

    def _changed(self) -> None:
        self.view_changed.emit()
        if self._minimap is not None:
            self._minimap.update()

    def scrollContentsBy(self, dx, dy):
        self._drag_layer.end()          # its picture no longer matches the view
        super().scrollContentsBy(dx, dy)
        self._changed()

    def wheelEvent(self, event):
        delta = event.angleDelta().y() or event.angleDelta().x()
        if not delta:
            event.ignore()
            return
        self._zoom(1.0015 ** delta, event.position().toPoint())
        event.accept()

    def resizeEvent(self, event):
        self._drag_layer.end()
        super().resizeEvent(event)
        if self._pending_fit and self.isVisible():
            self.fit_to_view()
        self._changed()

    def showEvent(self, event):
        super().showEvent(event)
        if self._pending_fit:
            self.fit_to_view()

    # ---------------------------------------------------------------- hit tests
    def _node_at(self, scene_pos: QPointF) -> NodeItem | None:
        tol = max(9.0, 6.0 / max(self.zoom(), 0.05))
        area = QRectF(scene_pos.x() - tol, scene_pos.y() - tol, 2 * tol, 2 * tol)
        best = None
        for item in self._scene.items(area):
            if isinstance(item, NodeItem) and item.isVisible():
                if item.port_at(scene_pos, tol) is not None:
                    return item
                if best is None and item.sceneBoundingRect().contains(scene_pos):
                    best = item
        return best

    def _port_at(self, scene_pos: QPointF):
        """(node item, port) under the cursor, the scope port included; or (item|None, None)."""
        tol = max(9.0, 6.0 / max(self.zoom(), 0.05))
        area = QRectF(scene_pos.x() - tol, scene_pos.y() - tol, 2 * tol, 2 * tol)
        for item in self._scene.items(area):
            if isinstance(item, NodeItem) and item.isVisible():
                port = item.port_at(scene_pos, tol)
                if port is not None:
                    return item, port
        return None, None

    def _edge_at(self, scene_pos: QPointF) -> EdgeItem | None:
        for item in self._scene.items(scene_pos):
            if isinstance(item, EdgeItem) and item.isVisible():
                return item
        return None

    def _cursor_scene_pos(self) -> QPointF:
        """Where the mouse last was over the view (paste lands there), else the view centre."""
        sp = self._last_scene_pos
        if sp is not None and self.viewport().rect().contains(self.mapFromScene(sp)):
            return sp
        return self.view_center_scene_pos()

    def leaveEvent(self, event):
        if self._wire is None and self._pan_from is None:
            self._last_scene_pos = None
        super().leaveEvent(event)

    # ---------------------------------------------------------------- mouse
    def mousePressEvent(self, event):
        self._hide_notice()
        pos = event.position().toPoint()
        sp = self.mapToScene(pos)
        self._last_scene_pos = sp
        if event.button() == Qt.MiddleButton or (event.button() == Qt.LeftButton and self._space):
            self._pan_from = pos
            self.viewport().setCursor(Qt.ClosedHandCursor)
            event.accept()
            return
        if event.button() == Qt.LeftButton and self._wire is None:
            item, port = self._port_at(sp)
            if port == SCOPE_PORT:
                self._refuse("the scope port shows the page's scope; it is never wired", sp)
                event.accept()
                return
            if port is not None:
                self._start_wire(item, port, sp)
                event.accept()
                return
            shift = bool(event.modifiers() & (Qt.ShiftModifier | Qt.ControlModifier))
            if item is None and self._node_at(sp) is None:   # a block covers the wires behind it
                edge = self._edge_at(sp)
                if edge is not None:
                    if not shift:
                        self.select_nodes([])
                    if shift and edge.edge in self._selected_wires:
                        self._selected_wires.discard(edge.edge)
                        edge.set_wire_selected(False)
                    else:
                        self.select_wires([edge.edge], add=shift)
                    event.accept()
                    return
            if not shift:
                self.select_wires([])
            if event.modifiers() & Qt.ShiftModifier:  # shift-click adds, like Ctrl
                event = QMouseEvent(event.type(), event.position(), event.globalPosition(), event.button(),
                                    event.buttons(), event.modifiers() | Qt.ControlModifier)
            super().mousePressEvent(event)
            grabber = self._scene.mouseGrabberItem()
            if isinstance(grabber, NodeItem):
                self._move_start = {i.node_id: i.pos() for i in self._scene.selectedItems()
                                    if isinstance(i, NodeItem)}
            return
        super().mousePressEvent(event)

    def mouseMoveEvent(self, event):
        pos = event.position().toPoint()
        sp = self.mapToScene(pos)
        self._last_scene_pos = sp
        if self._pan_from is not None:
            delta = pos - self._pan_from
            self._pan_from = pos
            self.horizontalScrollBar().setValue(self.horizontalScrollBar().value() - delta.x())
            self.verticalScrollBar().setValue(self.verticalScrollBar().value() - delta.y())
            event.accept()
            return
        if self._wire is not None:
            self._drag_wire(sp)
            event.accept()
            return
        if self._move_start and event.buttons() & Qt.LeftButton and not self._drag_layer.active:
            nodes = [self._scene.node_items[n] for n in self._move_start if n in self._scene.node_items]
            self._drag_layer.begin(nodes)
        super().mouseMoveEvent(event)
        self._drag_layer.moved()

    def mouseReleaseEvent(self, event):
        pos = event.position().toPoint()
        sp = self.mapToScene(pos)
        if self._pan_from is not None and event.button() in (Qt.MiddleButton, Qt.LeftButton):
            self._pan_from = None
            self.viewport().setCursor(Qt.OpenHandCursor if self._space else Qt.ArrowCursor)
            event.accept()
            return
        if self._wire is not None and event.button() == Qt.LeftButton:
            self._finish_wire(sp)
            event.accept()
            return
        if event.modifiers() & Qt.ShiftModifier:
            event = QMouseEvent(event.type(), event.position(), event.globalPosition(), event.button(),
                                event.buttons(), event.modifiers() | Qt.ControlModifier)
        super().mouseReleaseEvent(event)
        self._drag_layer.end()
        start, self._move_start = self._move_start, None
        if start:
            moves = {}
            for nid, old in start.items():
                item = self._scene.node_items.get(nid)
                if item is not None and item.pos() != old:
                    moves[nid] = ((old.x(), old.y()), (item.pos().x(), item.pos().y()))
            if moves:
                self.doc.move_nodes(moves, gesture=self.doc.new_gesture())

    def mouseDoubleClickEvent(self, event):
        sp = self.mapToScene(event.position().toPoint())
        item = self._node_at(sp)
        if item is not None and event.button() == Qt.LeftButton:
            self._rename(item.node_id)
            event.accept()
            return
        super().mouseDoubleClickEvent(event)

    # ---------------------------------------------------------------- wiring
    def _start_wire(self, item: NodeItem, port: str, sp: QPointF) -> None:
        nid = item.node_id
        if item.is_output(port):
            drag = _WireDrag(nid, port, True)
        else:
            fed = next((e.edge for e in item.edges if e.edge.dst == nid and e.edge.dst_port == port), None)
            if fed is not None:   # pick the wire up from the input it feeds
                drag = _WireDrag(fed.src, fed.src_port, True, picked=fed)
                self._scene.edge_items[fed].setVisible(False)
            else:
                drag = _WireDrag(nid, port, False)
        drag.live = LiveWireItem(self.style_)
        self._scene.addItem(drag.live)
        self._wire = drag
        self._light_up(drag)
        self._drag_wire(sp)
        self.viewport().setCursor(Qt.CrossCursor)

    def _light_up(self, drag: _WireDrag) -> None:
        """Light up the ports that could take this wire: direction, no cycle, dtype class."""
        page = self.doc.page()
        items = self._scene.node_items
        graph = nx.DiGraph()
        graph.add_nodes_from(page.nodes)
        graph.add_edges_from((e.src, e.dst) for e in page.edges if e != drag.picked)
        anchor = items[drag.node]
        accept: dict[str, frozenset] = {}
        if drag.from_output:
            banned = nx.ancestors(graph, drag.node) | {drag.node}
            src_cls = next((p.cls for p in anchor.data.outputs if p.name == drag.port), "any")
            for nid, item in items.items():
                if nid in banned:
                    continue
                ok = frozenset(p.name for p in item.data.inputs
                               if _compatible(src_cls, p.constraint)
                               and not (p.fed and any(e.edge.dst_port == p.name and e.edge.src == drag.node
                                                      and e.edge.src_port == drag.port
                                                      and e.edge != drag.picked for e in item.edges)))
                if ok:
                    accept[nid] = ok
            if drag.picked is not None:
                accept.setdefault(drag.picked.dst, frozenset())
                accept[drag.picked.dst] = accept[drag.picked.dst] | {drag.picked.dst_port}
        else:
            banned = nx.descendants(graph, drag.node) | {drag.node}
            want = next((p.constraint for p in anchor.data.inputs if p.name == drag.port), "any")
            for nid, item in items.items():
                if nid in banned:
                    continue
                ok = frozenset(p.name for p in item.data.outputs if _compatible(p.cls, want))
                if ok:
                    accept[nid] = ok
        drag.accept = accept
        for nid, ports in accept.items():
            items[nid].set_accept(ports)
        # The dtype pre-check above is cheap; shapes and block rules need the compiler. Check the
        # lit ports in view exactly, nearest to the anchor first, a slice at a time.
        view_rect = self.mapToScene(self.viewport().rect()).boundingRect()
        origin = anchor.port_scene_pos(drag.port)
        pending = []
        for nid, ports in accept.items():
            item = items[nid]
            if not view_rect.intersects(item.sceneBoundingRect()):
                continue
            for port in ports:
                if drag.picked is not None and (nid, port) == (drag.picked.dst, drag.picked.dst_port):
                    continue
                d = item.port_scene_pos(port) - origin
                pending.append((d.x() * d.x() + d.y() * d.y(), nid, port))
        pending.sort(reverse=True)
        drag.pending = [(nid, port) for _, nid, port in pending[-LIGHT_UP_MAX_CHECKS:]]
        if drag.pending:
            self._light_timer.start(0)

    def _refine_light_up(self) -> None:
        """One slice of the exact checks of lit ports; a port the Document refuses goes dark."""
        drag = self._wire
        if drag is None or not drag.pending:
            return
        deadline = time.perf_counter() + LIGHT_UP_SLICE
        items = self._scene.node_items
        while drag.pending and time.perf_counter() < deadline:
            nid, port = drag.pending.pop()
            if nid not in items or port not in drag.accept.get(nid, ()):
                continue
            if drag.from_output:
                verdict = self.doc.check_connection(drag.node, drag.port, nid, port)
            else:
                verdict = self.doc.check_connection(nid, port, drag.node, drag.port)
            if not verdict.ok:
                drag.refused[(nid, port)] = verdict.reason
                drag.accept[nid] = drag.accept[nid] - {port}
                items[nid].set_accept(drag.accept[nid])
        if drag.pending:
            self._light_timer.start(0)

    def _drag_wire(self, sp: QPointF) -> None:
        drag = self._wire
        items = self._scene.node_items
        anchor = items.get(drag.node)
        if anchor is None:
            return
        item, port = self._port_at(sp)
        end = sp
        drag.target = None
        if item is not None and port in drag.accept.get(item.node_id, ()):
            end = item.port_scene_pos(port)
            drag.target = (item.node_id, port)
        elif item is not None and (item.node_id, port) in drag.refused:
            self.status_message.emit(f"{item.node_id}.{port}: {drag.refused[item.node_id, port]}")
        fixed = anchor.port_scene_pos(drag.port)
        if drag.from_output:
            drag.live.set_ends(fixed, end)
        else:
            drag.live.set_ends(end, fixed)

    def _end_wire(self) -> _WireDrag | None:
        drag, self._wire = self._wire, None
        if drag is None:
            return None
        for nid in drag.accept:
            item = self._scene.node_items.get(nid)
            if item is not None:
                item.set_accept(None)
        if drag.live is not None:
            self._scene.removeItem(drag.live)
            drag.live = None
        if drag.picked is not None and drag.picked in self._scene.edge_items:
            self._scene.edge_items[drag.picked].setVisible(not self._scene.overview_on)
        self.viewport().setCursor(Qt.ArrowCursor)
        return drag

    def cancel_wire(self) -> None:
        self._end_wire()

    def _finish_wire(self, sp: QPointF) -> None:
        drag = self._end_wire()
        item, port = self._port_at(sp)
        if item is None or port is None:
            if drag.picked is not None:     # dropped in empty space: delete the picked-up wire
                self.doc.disconnect([drag.picked])
                self.status_message.emit(f"deleted wire {drag.picked}")
            return
        if port == SCOPE_PORT:
            self._refuse("the scope port shows the page's scope; it is never wired", sp)
            return
        target_out = item.is_output(port)
        if drag.from_output:
            src, src_port, dst, dst_port = drag.node, drag.port, item.node_id, port
        else:
            if not target_out:
                self._refuse("two inputs cannot be joined: wire an output to an input", sp)
                return
            src, src_port, dst, dst_port = item.node_id, port, drag.node, drag.port
        picked = drag.picked
        if picked is not None and (picked.dst, picked.dst_port) == (dst, dst_port) \
                and (picked.src, picked.src_port) == (src, src_port):
            return  # put back where it was
        verdict = self.doc.check_connection(src, src_port, dst, dst_port)
        if not verdict:
            self._refuse(f"cannot wire {src}.{src_port} to {dst}.{dst_port}: {verdict.reason}", sp)
            return
        stack = self.doc.undo_stack
        stack.beginMacro(f"Wire {src}.{src_port} -> {dst}.{dst_port}")
        try:
            if picked is not None:
                self.doc.disconnect([picked])
            self.doc.connect(src, src_port, dst, dst_port)
        except ProjectError as exc:
            stack.endMacro()
            stack.undo()
            self._refuse(str(exc), sp)
            return
        stack.endMacro()
        self.status_message.emit(f"wired {src}.{src_port} -> {dst}.{dst_port}")

    # ---------------------------------------------------------------- notices
    def _refuse(self, reason: str, sp: QPointF) -> None:
        self.status_message.emit(reason)
        if self._notice is None or self._notice.scene() is not self._scene:
            self._notice = NoticeItem(self.style_)
            self._scene.addItem(self._notice)
        self._notice.set_text(reason)
        self._notice.setPos(self._notice_pos(sp, self._notice.boundingRect()))
        self._notice.setVisible(True)
        self._notice_timer.start(4000)

    def _notice_pos(self, sp: QPointF, rect: QRectF, margin: float = 4.0) -> QPointF:
        """Where to put a notice (``rect``: its bounds in pixels, beside its origin) meant for
        the cursor at ``sp``: below right of it, flipped to the other side of the cursor where
        that would leave the viewport, then kept inside the viewport."""
        vp = QRectF(self.viewport().rect())
        at = self.viewportTransform().map(sp)
        left, top = at.x() + rect.left(), at.y() + rect.top()
        if left + rect.width() > vp.right() - margin:
            left = at.x() - rect.left() - rect.width()
        if top + rect.height() > vp.bottom() - margin:
            top = at.y() - rect.top() - rect.height()
        left = max(vp.left() + margin, min(left, vp.right() - margin - rect.width()))
        top = max(vp.top() + margin, min(top, vp.bottom() - margin - rect.height()))
        inverse, _ok = self.viewportTransform().inverted()
        return inverse.map(QPointF(left - rect.left(), top - rect.top()))

    def notice_text(self) -> str:
        """The message shown at the cursor ("" when none is showing)."""
        n = self._notice
        return n.text() if n is not None and n.scene() is self._scene and n.isVisible() else ""

    def _hide_notice(self) -> None:
        if self._notice is not None and self._notice.scene() is self._scene:
            self._notice.setVisible(False)

    # ---------------------------------------------------------------- keys
    def keyPressEvent(self, event):
        key = event.key()
        if key == Qt.Key_Space and not event.isAutoRepeat():
            self._space = True
            self.viewport().setCursor(Qt.OpenHandCursor)
            event.accept()
            return
        if key in (Qt.Key_Delete, Qt.Key_Backspace):
            self.delete_selection()
        elif key == Qt.Key_Escape:
            if self._wire is not None:
                self.cancel_wire()
            else:
                self.select_nodes([])
                self.select_wires([])
        elif event.matches(QKeySequence.Copy):
            self.copy_selection()
        elif event.matches(QKeySequence.Cut):
            self.cut_selection()
        elif event.matches(QKeySequence.Paste):
            self.paste()
        elif event.matches(QKeySequence.SelectAll):
            self.select_all()
        elif key == Qt.Key_D and event.modifiers() & Qt.ControlModifier:
            self.duplicate_selection()
        elif event.matches(QKeySequence.ZoomIn) or key == Qt.Key_Plus:
            self.zoom_in()
        elif event.matches(QKeySequence.ZoomOut) or key == Qt.Key_Minus:
            self.zoom_out()
        else:
            super().keyPressEvent(event)
            return
        event.accept()

    def keyReleaseEvent(self, event):
        if event.key() == Qt.Key_Space and not event.isAutoRepeat():
            self._space = False
            self._pan_from = None
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

    # ---------------------------------------------------------------- drag and drop
    def dragEnterEvent(self, event):
        if event.mimeData().hasFormat(BLOCK_MIME):
            event.acceptProposedAction()
        else:
            event.ignore()

    def dragMoveEvent(self, event):   # docs/qt.md §4: must accept, or no drop arrives
        if event.mimeData().hasFormat(BLOCK_MIME):
            event.acceptProposedAction()
        else:
            event.ignore()

    def dropEvent(self, event):
        if not event.mimeData().hasFormat(BLOCK_MIME):
            event.ignore()
            return
        name = bytes(event.mimeData().data(BLOCK_MIME)).decode("utf-8").strip()
        self.drop_block(name, self.mapToScene(event.position().toPoint()))
        event.acceptProposedAction()
        self.setFocus()

    # ---------------------------------------------------------------- tooltips
    def viewportEvent(self, event):
        if event.type() == QEvent.ToolTip:
            sp = self.mapToScene(event.pos())
            text = self.tooltip_at(sp)
            if text:
                QToolTip.showText(event.globalPos(), text, self.viewport())
            else:
                QToolTip.hideText()
            return True
        return super().viewportEvent(event)

    def tooltip_at(self, sp: QPointF) -> str:
        """What hovering at ``sp`` tells: a wire's inferred type, a port's, a block's problems.
        Qt shows it as rich text when it looks like some: file text in it is escaped (literal)."""
        item, port = self._port_at(sp)
        # What the canvas shows; the page may be compiling (off the UI thread) after an edit.
        program = self.doc.ready_program() or self._scene.program
        if program is None:
            program = _NOT_COMPILED
        if item is not None:
            nid = item.node_id
            if port == SCOPE_PORT:
                return literal(f"scope: {self._scene.page.scope} (full name {self._scene.page.full_name(nid)})")
            if port is not None:
                if item.is_output(port):
                    slot = program.port_slots.get((nid, port))
                    t = program.slots[slot].type.describe() if slot is not None else "not inferred"
                    return literal(f"{nid}.{port}: {t}")
                edge = next((e.edge for e in item.edges if e.edge.dst == nid and e.edge.dst_port == port), None)
                if edge is not None:
                    t = program.edge_types.get(edge)
                    return _with_lines(f"{nid}.{port} <- {edge.src}.{edge.src_port}: "
                                       f"{t.describe() if t else 'not inferred'}", self.gradients.edge_tooltip(edge))
                decl = next((p for p in item.data.inputs if p.name == port), None)
                return literal(f"{nid}.{port}: expects {decl.constraint if decl else 'any'}"
                               + (f", inline {decl.inline}" if decl is not None and decl.inline else ""))
        if item is None:
            item = self._node_at(sp)
        if item is not None:
            d = item.data
            spec = self.doc.registry.get(d.block)
            esc = html.escape     # names and messages are the file's text: shown, never parsed
            lines = [f"<b>{esc(d.block)}</b> {esc(self._scene.page.full_name(d.node_id))}"]
            if spec is not None and spec.summary:
                lines.append(esc(spec.summary))
            lines += [f"<span style='color:#e0403a'>error: {esc(m)}</span>" for m in d.errors]
            lines += [f"warning: {esc(m)}" for m in d.warnings]
            if item.results is not None:
                lines += item.results.tooltip_lines([p.name for p in d.outputs])
            lines += self.gradients.node_tooltip(d.node_id)
            return "<br>".join(lines)
        edge = self._edge_at(sp)
        if edge is not None:
            t = program.edge_types.get(edge.edge)
            return _with_lines(f"{edge.edge}: {t.describe() if t is not None else 'type not inferred'}",
                               self.gradients.edge_tooltip(edge.edge))
        return ""

    # ---------------------------------------------------------------- context menus
    def contextMenuEvent(self, event):
        menu = self.context_menu(self.mapToScene(event.pos()))
        menu.exec(event.globalPos())

    def context_menu(self, sp: QPointF) -> QMenu:
        """The menu for what is at ``sp``: a block, a wire, or the canvas."""
        menu = QMenu(self)
        self._last_scene_pos = sp
        item = self._node_at(sp)
        edge = None if item is not None else self._edge_at(sp)
        if item is not None:
            nid = item.node_id
            if not item.isSelected():
                self.select_nodes([nid])
            menu.addAction("Rename id…", lambda: self._rename_id(nid))
            menu.addAction("Rename label…", lambda: self._rename(nid))
            menu.addAction("Duplicate", self.duplicate_selection)
            page = self._scene.page
            if page.loss is not None and page.loss.partition(":")[0] == nid:
                menu.addAction("Clear loss mark", lambda: self.doc.set_loss(None))
            else:
                menu.addAction("Mark as loss", lambda: self.doc.set_loss(nid))
            menu.addSeparator()
            menu.addAction("Copy", self.copy_selection)
            menu.addAction("Cut", self.cut_selection)
            menu.addAction("Delete", self.delete_selection)
        elif edge is not None:
            e = edge.edge
            self.select_wires([e])
            menu.addAction(f"Delete wire {e}", lambda: self.doc.disconnect([e]))
        else:
            add = menu.addMenu("Add block")
            for cat, specs in self.doc.registry.categories().items():
                sub = add.addMenu(cat)
                for spec in specs:
                    sub.addAction(spec.name, lambda n=spec.name, p=QPointF(sp): self.drop_block(n, p))
            menu.addAction("Paste", lambda: self.paste())
            menu.addAction("Select all", self.select_all)
            menu.addSeparator()
            menu.addAction("Auto-layout", self.auto_layout)
            menu.addAction("Fit to view", self.fit_to_view)
        return menu

    def _rename(self, nid: str) -> None:
        node = self.doc.page().nodes.get(nid)
        if node is None:
            return
        text, ok = QInputDialog.getText(self, "Rename label", f"Label of {nid}:", text=node.label)
        if ok and text != node.label:
            try:
                self.doc.set_label(nid, text)
            except ProjectError as exc:      # a NUL
                self.status_message.emit(str(exc))

    def _rename_id(self, nid: str) -> None:
        if nid not in self.doc.page().nodes:
            return
        text, ok = QInputDialog.getText(self, "Rename block", literal(f"New id of {nid} (its full name is "
                                                              f"{self.doc.page().full_name(nid)}):"), text=nid)
        if ok and text != nid:
            try:
                self.doc.rename_node(nid, text.strip())
            except ProjectError as exc:
                self.status_message.emit(str(exc))
                QMessageBox.warning(self, "Rename block", literal(exc))

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


def _with_lines(text: str, lines: list) -> str:
    """``text`` (plain) followed by HTML ``lines``, as one rich-text tooltip (plain when none)."""
    if not lines:
        return literal(text)
    return "<br>".join([html.escape(text), *lines])


# ------------------------------------------------------------------------------- minimap
class Minimap(QWidget):
    """An overview of the page: blocks as small boxes and the visible area as a frame.
    Click or drag to pan the view there. Redrawn from the items a moment after changes."""

    def __init__(self, view: DiagramView, parent=None):
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
        from PySide6.QtCore import QLineF
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
        self.view._changed()

    def mousePressEvent(self, event):
        if event.button() == Qt.LeftButton:
            self._pan_to(event.position())

    def mouseMoveEvent(self, event):
        if event.buttons() & Qt.LeftButton:
            self._pan_to(event.position())
