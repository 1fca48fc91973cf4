"""Gradient highlighting on the canvas: every wire coloured and thickened by the gradient it carries.

After a backward run (:meth:`GradientHighlighter.show`), wires that carry gradient are drawn in a
perceptual colour map (viridis) and a width, both on a log scale of the gradient's norm; wires a
StopGradient cuts are grey with a dash-dot pattern, wires with no gradient to the target thin,
grey and dashed, and the blocks the cut leaves without gradient are dimmed. Where one output feeds
several wires that carry gradient, a label shows the contributions and their sum. A legend sits in
the view's bottom-left corner. Before a run, :meth:`GradientHighlighter.show_paths` shows where
gradient can flow. The numbers come from blockflow.present.gradview; nothing here computes gradients.
The looks (levels, colours, widths, pens) are in gradstyle.py, the legend and the fan-out labels in
gradlegend.py. It draws what it is given and decides nothing: the session holds the gradient view
shown, clears it after an edit and recomputes static paths (the shell hands it over,
main_window/canvas_results.py). Must not import the window, the session or the panels.
"""
from __future__ import annotations

import html

import shiboken6
from PySide6.QtCore import QEvent, QObject, QRectF, Qt, QTimer, Signal
from PySide6.QtGui import QPen

from blockflow.present.gradview import CUT, FLOWS, Fanout, GradientScale, GradientView, describe_array
from blockflow.present.levels import LevelGradients
from blockflow.project import Edge
from blockflow.gui.canvas.gradlegend import FanoutLabel, Legend, LegendOverlay, place_label
from blockflow.gui.canvas.instancebadge import InstanceBadges
from blockflow.gui.canvas.gradstyle import (LEVELS, MAX_FANOUT_LABELS, NEGLIGIBLE, NONE, WirePens, WireStyle,
                                            array_norm, power_text, short_number)
from blockflow.gui.common.theme import Style

__all__ = ["GradientHighlighter"]


def _cut_row(blocks: list[str], dtypes: list[str]) -> str:
    """The legend's text for the cut wires drawn: the blocks that cut float wires, and the integer
    or boolean wires, which carry no gradient whatever block they pass."""
    parts = ["cut by " + ", ".join(blocks)] if blocks else []
    if dtypes:
        parts.append(f"{' and '.join(dtypes)} wires carry no gradient")
    return "; ".join(parts) or "cut by a block"


# ------------------------------------------------------------------------------------- highlighter
class GradientHighlighter(QObject):
    """Colours a DiagramScene's wires by a GradientView (``view.gradients`` on the canvas; also
    used without a view by render_page).

    - :meth:`show` after a backward run, :meth:`show_paths` for the static view, :meth:`clear`;
    - :meth:`focus` emphasises one block and two sets of wires (the backward stepper);
    - :meth:`wire_style` says how a wire is drawn now (the tests' handle on the mapping).

    On the canvas it is told what to show: the session's gradient view, which goes when the page
    shown is replaced or its model edited, and follows edits when it is static paths.
    """

    changed = Signal()

    def __init__(self, scene, view=None):
        super().__init__(view)
        self.scene = scene
        self.view = view
        self.style: Style = scene.style
        self._gview: GradientView | None = None
        #: the gradient view as drawn at the level shown (a page, or an opened instance)
        self._lv: LevelGradients | None = None
        self.level = ""
        self.mode: str | None = None            # "run" | "paths" | None
        self._states: dict[Edge, tuple] = {}     # edge -> (state, level)
        self._cut_nodes: set[str] = set()        # blocks whose every output wire is cut
        self._dimmed: set[str] = set()           # blocks drawn dimmed now
        self._focus: tuple | None = None         # (node, incoming, outgoing)
        self._pens = WirePens(self.style)
        #: the norm scale of the run shown (GradientScale: its level() is each wire's colour level)
        self.scale: GradientScale | None = None
        self.legend = Legend(self.style)
        self.labels: list[FanoutLabel] = []
        #: the badges on the closed instances drawn (the gradient norm of their Variables, or cut)
        self.badges = InstanceBadges(scene, self.style)
        self._restyle_pending = False
        self.legend_widget: LegendOverlay | None = None
        if view is not None:
            self.legend_widget = LegendOverlay(view, self.legend)
            view.installEventFilter(self)

    # ------------------------------------------------------------------ the contract
    @property
    def current(self) -> GradientView | None:
        """The gradient view shown (after a run, or the static paths), or None."""
        return self._gview

    def show(self, gview: GradientView, level: str = "") -> None:
        """Colour every wire by the gradient flowing back along it (a recorded backward run's
        GradientView); a view without a run is shown as :meth:`show_paths`. ``level``: the flat
        id of the instance whose diagram the scene draws ("" for the page): its wires are coloured
        by the flat wires they became, on the whole program's scale (colours compare across
        levels)."""
        if not gview.ran:
            self.show_paths(gview, level)
            return
        self.scale = scale = self._scale_of(gview)
        to_level = scale.level
        wires = self._at_level(gview, level).wires
        self._set(gview, "run", {edge: (info.state, to_level(info.norm) if info.state == FLOWS and
                                        info.norm is not None and info.norm >= scale.low else -1)
                                 for edge, info in wires.items()})

    def forget_items(self) -> None:
        """The scene rebuilt its items (another diagram, an instance opened or closed): what was
        put on the old ones (dimming, labels, badges, the stepper's emphasis) went with them."""
        self._dimmed, self.labels, self._focus = set(), [], None
        self.badges.items = {}

    def _at_level(self, gview: GradientView, level: str) -> LevelGradients:
        self.level = level
        self._lv = LevelGradients(gview, level, self.scene.edge_items)
        return self._lv

    @property
    def level_view(self) -> LevelGradients | None:
        """The gradient view shown, as drawn at this scene's level (None when none is shown)."""
        return self._lv

    @staticmethod
    def _scale_of(gview: GradientView) -> GradientScale:
        """The log scale of the norms, from the smallest that is not negligible to the largest of
        the gradients that reach something learnt or fed (GradientView.learning_norms): a wire
        whose gradient only runs into constants is drawn at the top if it is larger, it does not
        stretch the scale until the model's own wires look like no gradient. One scale for the
        whole program: an opened instance's wires are coloured as a page's are, and the same
        colour means the same size at every level."""
        high = GradientScale.from_norms(gview.learning_norms(), LEVELS).high
        if high <= 0:
            return GradientScale.from_norms(gview.norms(), LEVELS)
        floor = high * NEGLIGIBLE
        return GradientScale(min(n for n in gview.norms() if floor <= n <= high), high, LEVELS)

    def show_paths(self, gview: GradientView, level: str = "") -> None:
        """Where gradient can flow to the view's target, before any run: one highlight colour for
        the wires that carry it, cut and unreached wires as after a run."""
        wires = self._at_level(gview, level).wires
        self._set(gview, "paths", {edge: (info.state, -1) for edge, info in wires.items()})

    def clear(self) -> None:
        """Give every wire its dtype pen and every block its look back; hide the legend."""
        had = self._gview is not None or self._focus is not None
        self._gview, self.mode, self.scale, self._lv = None, None, None, None
        self.badges.clear()
        self._states, self._cut_nodes, self._focus = {}, set(), None
        self._apply()
        self._set_labels([])
        self.legend.set(None, "", None, self._pens, [])
        self._refresh_legend()
        if had:
            self.changed.emit()

    def focus(self, node: str | None, incoming, outgoing) -> None:
        """Emphasise ``node`` and two sets of wires (the gradient arriving at the block, the
        gradient it sends back); every other wire is drawn faint and every other block dimmed
        (the blocks at the far ends of the emphasised wires stay as they are, to show where the
        gradient comes from and goes). ``focus(None, [], [])`` removes the emphasis."""
        if node is None and not incoming and not outgoing:
            if self._focus is None:
                return
            self._focus = None
        else:
            self._focus = (node, frozenset(incoming), frozenset(outgoing))
        self._apply()
        self._update_labels()

    def wire_style(self, edge: Edge) -> WireStyle:
        """How ``edge`` is drawn now: state, norm level, colour, width, dashed."""
        item = self.scene.edge_items[edge]
        pen = item.pen()
        state, level = self._states.get(edge, (NONE, -1)) if self.mode else (NONE, -1)
        return WireStyle(state, level, pen.color().name(), pen.widthF(), pen.style() != Qt.SolidLine)

    # ------------------------------------------------------------------ more queries
    @property
    def focused(self) -> tuple | None:
        """(node, incoming, outgoing) being emphasised, or None."""
        return self._focus

    def level_colour(self, level: int) -> str:
        """The colour of a norm level on this canvas (light or dark), ``#rrggbb``."""
        return self._pens.colours[level].name()

    def level_width(self, level: int) -> float:
        return self._pens.levels[level].widthF()

    def dimmed_nodes(self) -> list[str]:
        return sorted(nid for nid, item in self.scene.node_items.items() if item.dimmed)

    def label_of(self, node: str, port: str | None = None) -> FanoutLabel | None:
        return next((lb for lb in self.labels if lb.fanout.node == node and
                     (port is None or lb.fanout.port == port)), None)

    def extent(self) -> QRectF:
        """The scene area of what the highlighting adds (fan-out labels), for pictures."""
        rect = QRectF()
        for lb in self.labels:
            rect = rect.united(lb.sceneBoundingRect())
        return rect

    def node_tooltip(self, nid: str) -> list[str]:
        """Lines (HTML) a block's tooltip adds about the gradient shown."""
        g, lv = self._gview, self._lv
        if g is None:
            return []
        lines = []
        badge = lv.badge(lv.flat_id(nid)) if lv is not None and not lv.identity else None
        if badge is not None:
            lines.append(html.escape(badge.tooltip()).replace("\n", "<br>"))
        flat = lv.flat_id(nid) if lv is not None else nid
        step = g.program.step(flat)
        if flat in g.cut_by or (step is not None and step.spec.gradient == "stop"):
            lines.append(html.escape(g.cut_summary(flat)))
        if nid in self._cut_nodes:
            cutters = sorted({c for e, (s, _) in self._states.items() if e.src == nid and s == CUT
                              for c in self._lv.wires[e].cutters})
            lines.append(html.escape(f"no gradient of {g.target[0]} reaches {nid}: its outputs are cut off "
                                     f"by {', '.join(cutters)}"))
        if g.ran:
            for (node, port), grad in g.result.grads.items():
                if node == flat and grad is not None:
                    lines.append(html.escape(describe_array(grad, name=f"gradient at {port}:")))
        return lines

    def edge_tooltip(self, edge: Edge) -> list[str]:
        """Lines (HTML) a wire's tooltip adds: why gradient does or does not flow along it, its
        value and its gradient, and its share of a fan-out."""
        g, lv = self._gview, self._lv
        info = lv.wires.get(edge) if lv is not None else None
        if info is None:
            return []
        edge = info.edge        # the flat wire: its fan-out is the program's
        lines = [html.escape(info.reason)]
        if info.value is not None:
            lines.append(html.escape(describe_array(info.value, name="value:")))
        if info.grad is not None:
            lines.append(html.escape(describe_array(info.grad, name="gradient:")))
            if info.norm == 0:
                lines.append("the gradient along it is exactly 0")
            elif self.scale is not None and info.norm < self.scale.low:
                lines.append(html.escape(f"drawn as ≈ 0: below {power_text(NEGLIGIBLE)} × the largest gradient "
                                         f"({short_number(self.scale.high)}), zero up to rounding or vanished"))
            elif self.scale is not None and info.norm > self.scale.high:
                lines.append(html.escape(f"drawn at the top of the scale: larger than every gradient on its way "
                                         f"to a Variable, a Placeholder or data ({short_number(self.scale.high)}); "
                                         f"this one only runs into values nothing learns"))
        fan = g.fanout_of(edge.src, edge.src_port)
        if fan is not None and any(e == edge for e, _ in fan.contributions):
            lines.append(html.escape(f"one of {len(fan.contributions)} gradients that add up at "
                                     f"{edge.src}.{edge.src_port}"))
        return lines

    # ------------------------------------------------------------------ applying
    def _set(self, gview: GradientView, mode: str, states: dict) -> None:
        self._follow_style()
        self._gview, self.mode, self._states = gview, mode, states
        if mode != "run":
            self.scale = None
        self._cut_nodes = self._cut_region(states)
        self._apply()
        self._update_labels()
        self.badges.show(self._lv.badges() if self._lv is not None else {})
        self._update_legend()
        self.changed.emit()

    def _cut_region(self, states: dict) -> set[str]:
        """Blocks with output wires, every one of them cut: the region a StopGradient cuts off."""
        out: dict[str, bool] = {}
        for edge, (state, _) in states.items():
            out[edge.src] = out.get(edge.src, True) and state == CUT
        return {nid for nid, all_cut in out.items() if all_cut}

    def _pen_of(self, state: str, level: int) -> QPen:
        p = self._pens
        if state == FLOWS:
            if self.mode == "paths":
                return p.paths
            return p.levels[level] if level >= 0 else p.zero
        if state == CUT:
            return p.cut
        return p.no_grad

    def _apply(self) -> None:
        """Set each wire's pen and each block's dimming from the state (setPen only where the
        pen changes: pens are shared, one per level and state)."""
        scene = self.scene
        states, mode, focus = self._states, self.mode, self._focus
        pens = self._pens
        if mode is None:
            pen_of = {}
        else:    # the pen of each (state, level) pair present, looked up once
            pen_of = {key: self._pen_of(*key) for key in set(states.values())}
        default = self._pen_of(NONE, -1) if mode is not None else None
        keep: frozenset = frozenset() if focus is None else focus[1] | focus[2]
        state_of, pen_get = states.get, pen_of.get
        for edge, item in scene.edge_items.items():
            pen = pen_get(state_of(edge), default)
            if focus is not None and edge not in keep:
                pen = pens.faint(pen if pen is not None else item.style.wire_pens[item.cls])
            if item.grad_pen is not pen:
                item.set_grad_pen(pen)
        if focus is not None:
            awake = ({focus[0]} | {e.src for e in keep} | {e.dst for e in keep}) - self._cut_nodes
            dimmed = {nid for nid in scene.node_items if nid not in awake}
        else:
            dimmed = self._cut_nodes
        items = scene.node_items
        for nid in self._dimmed ^ dimmed:   # only the blocks whose look changes
            item = items.get(nid)
            if item is not None:
                item.set_dimmed(nid in dimmed)
        self._dimmed = set(dimmed)
        if scene.overview is not None:
            scene.overview.mark_dirty()

    def _update_labels(self) -> None:
        g = self._gview
        if g is None or self.mode != "run":
            self._set_labels([])
            return
        fans = [f for f in self._lv.fanouts() if f.total is not None or all(c is not None for _, c in f.contributions)]
        if len(fans) > MAX_FANOUT_LABELS:
            node = self._focus[0] if self._focus is not None else None
            fans = [f for f in fans if f.node == node]
        self._set_labels(fans)

    def _set_labels(self, fans: list) -> None:
        wanted = {(f.node, f.port): f for f in fans}
        keep = []
        for lb in self.labels:
            key = (lb.fanout.node, lb.fanout.port)
            alive = shiboken6.isValid(lb) and lb.scene() is self.scene
            if alive and wanted.get(key) is lb.fanout:
                keep.append(lb)
                del wanted[key]
            elif alive:
                self.scene.removeItem(lb)
        blocks = {nid: item.data.block for nid, item in self.scene.node_items.items()}
        for (node, port), fan in wanted.items():
            src = self.scene.node_items.get(node)
            if src is None:
                continue
            accent = self._pen_of(FLOWS, self._level_of_output(fan)).color()
            items = self.scene.node_items
            order = sorted((e.dst for e, _ in fan.contributions),
                           key=lambda n: (items[n].y(), items[n].x()) if n in items else (0.0, 0.0))
            lb = FanoutLabel(fan, blocks, self.style, accent, order)
            corner, free = place_label(self.scene, src, port, lb.boundingRect().size())
            lb.setPos(corner)
            lb.set_hover_only(not free)
            # Child of its block: it follows the block while it is dragged.
            lb.setParentItem(src)
            keep.append(lb)
        self.labels = keep

    def _level_of_output(self, fan: Fanout) -> int:
        if self._gview is None or fan.total is None:
            return -1
        return self.scale.level(array_norm(fan.total)) if self.scale is not None else -1

    def _update_legend(self) -> None:
        g = self._gview
        if g is None:
            self.legend.set(None, "", None, self._pens, [])
            self._refresh_legend()
            return
        target = g.target[0]
        counts: dict[str, int] = {}
        zero = 0
        for state, level in self._states.values():
            counts[state] = counts.get(state, 0) + 1
            zero += state == FLOWS and level < 0
        rows = []
        if self.mode == "paths":
            rows.append((self._pens.paths, f"can carry gradient to {target}"))
        elif zero:
            rows.append((self._pens.zero, f"gradient 0 or ≈ 0 (< {power_text(NEGLIGIBLE)} × the largest)"))
        if counts.get(CUT):
            rows.append((self._pens.cut, _cut_row(*self._lv.cut_legend())))
        if sum(n for s, n in counts.items() if s not in (FLOWS, CUT)):
            rows.append((self._pens.no_grad, f"no gradient to {target}"))
        self.legend.set(self.mode, target, self.scale, self._pens, rows)
        self._refresh_legend()

    def _refresh_legend(self) -> None:
        if self.legend_widget is not None:
            self.legend_widget.refresh()

    # ------------------------------------------------------------------ palette changes
    def eventFilter(self, obj, event):
        if event.type() in (QEvent.PaletteChange, QEvent.ApplicationPaletteChange) and not self._restyle_pending:
            # The view rebuilds its Style in its own handler, after this filter: follow it then.
            self._restyle_pending = True
            QTimer.singleShot(0, self._restyled)
        return False

    def _restyled(self) -> None:
        self._restyle_pending = False
        if self._follow_style() and (self._gview is not None or self._focus is not None):
            self._apply()
            if self._gview is not None:
                self._set_labels([])
                self._update_labels()
                self._update_legend()

    def _follow_style(self) -> bool:
        """New pens when the Style changed (light/dark, fine wires on a big page)."""
        if self._pens.key == (self.style.key, self.style.fine_wires):
            return False
        self._pens = WirePens(self.style)
        return True
