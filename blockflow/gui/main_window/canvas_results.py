"""The session's results drawn on the canvas: its run results on the blocks, its gradient view on
the wires, and the backward stepper's step emphasised there. The shell binds the two, so the
session never reaches into the canvas, the canvas never asks the session, and the panels never
touch the canvas.

Inside an opened composite instance the canvas draws the composite's diagram while the values come
from the host page's run: a drawn block ``n`` is ``level/n`` there (``Session.flat_id``), a closed
instance shows its output ports' values, and the wires are coloured by the flat wires they became
(``GradientHighlighter.show(gview, level)``)."""
from __future__ import annotations

from PySide6.QtCore import QObject

__all__ = ["ResultsOnCanvas", "GradientsOnCanvas"]


class ResultsOnCanvas(QObject):
    """Puts the current page's results (or none) on its blocks whenever the session says they
    changed; a change of staleness alone only re-marks the results already shown."""

    def __init__(self, view, session, document, parent=None):
        super().__init__(parent)
        self.view, self.session, self.doc = view, session, document
        self._marked_only = False
        # Connected first, before any panel: the blocks show the results before anyone looks.
        session.stale_changed.connect(self._mark_stale)
        session.results_changed.connect(self.show)
        document.node_added.connect(self._on_node_added)

    def show(self) -> None:
        if self._marked_only:         # stale_changed came first and did what was needed
            self._marked_only = False
            return
        scene = self.view.diagram_scene()
        if scene.page is None:
            return
        pr = self.session.results() if scene.page is self.doc.page() else None
        for nid, item in scene.node_items.items():
            item.set_results(self._results_of(pr, nid, item) if pr is not None else None)
        if scene.overview is not None:
            scene.overview.mark_dirty()

    def _results_of(self, pr, nid: str, item):
        """What drawn block ``nid`` shows of the run ``pr``: its own values, or a closed
        instance's output ports' values."""
        flat = self.session.flat_id(nid)
        ports = [p.name for p in item.data.outputs]
        program = pr.result.program if pr.result is not None else None
        inst = program.instance(pr.run_id(flat)) if program is not None else None
        if inst is not None:
            return pr.instance_results(flat, inst.outputs, ports)
        return pr.block_results(flat, ports)

    def _mark_stale(self) -> None:
        stale = self.session.results_stale
        for item in self.view.diagram_scene().node_items.values():
            if item.results is not None:
                item.results.stale = stale
                item.update()
        self._marked_only = True

    def _on_node_added(self, page: str, node: str) -> None:
        pr = self.session.results(page)
        if pr is None or page != self.doc.current_page:
            return
        item = self.view.diagram_scene().node_items.get(node)
        if item is not None:                  # a block back from an undo shows its results again
            item.set_results(self._results_of(pr, node, item))


class GradientsOnCanvas(QObject):
    """Colours the canvas's wires by the session's gradient view whenever it changes, and shows
    the step the backward stepper asks for (``focus``, connected to its ``focus_requested``)."""

    def __init__(self, view, session, parent=None):
        super().__init__(parent)
        self.view, self.session = view, session
        # Connected before the panels: the stepper takes its emphasis off a canvas already redrawn.
        session.gradients_changed.connect(self.show)
        # The scene rebuilds its items for another diagram (an instance opened, or closed): the
        # same gradients are drawn again at the new level.
        view.diagram_scene().reloaded.connect(self._rebuilt)
        session.doc.location_changed.connect(self._redraw)

    def show(self) -> None:
        gview, highlighter = self.session.gradients, self.view.gradients
        if gview is None:
            highlighter.clear()
        elif gview is not highlighter.current or highlighter.level != self.session.level:
            highlighter.show(gview, self.session.level)

    def _rebuilt(self) -> None:
        self.view.gradients.forget_items()
        self._redraw()

    def _redraw(self) -> None:
        gview = self.session.gradients
        if gview is not None and gview.program.page_name == self.session.host:
            self.view.gradients.show(gview, self.session.level)

    def focus(self, node, incoming, outgoing) -> None:
        """Emphasise ``node`` and its wires (flat ids of the host page's program; node None:
        none), and bring the block into sight. A block inside a closed instance is shown as that
        instance, and a wire not drawn at the level shown is left out."""
        view = self.view
        lv = view.gradients.level_view
        if lv is not None and not lv.identity:
            node = lv.drawn_node(node) if node is not None else None
            incoming, outgoing = lv.drawn_edges(incoming), lv.drawn_edges(outgoing)
        view.gradients.focus(node, incoming, outgoing)
        item = view.diagram_scene().node_items.get(node) if node is not None else None
        if item is None:
            return
        visible = view.mapToScene(view.viewport().rect()).boundingRect()
        if not visible.contains(item.sceneBoundingRect()):
            view.center_on_node(node)
