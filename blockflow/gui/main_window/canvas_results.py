"""The session's results drawn on the canvas: its run results on the blocks, its gradient view on
the wires, and the backward stepper's step emphasised there. The shell binds the two, so the
session never reaches into the canvas, the canvas never asks the session, and the panels never
touch the canvas."""
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
            item.set_results(pr.block_results(nid, [p.name for p in item.data.outputs])
                             if pr is not None else None)
        if scene.overview is not None:
            scene.overview.mark_dirty()

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
            item.set_results(pr.block_results(node, [p.name for p in item.data.outputs]))


class GradientsOnCanvas(QObject):
    """Colours the canvas's wires by the session's gradient view whenever it changes, and shows
    the step the backward stepper asks for (``focus``, connected to its ``focus_requested``)."""

    def __init__(self, view, session, parent=None):
        super().__init__(parent)
        self.view, self.session = view, session
        # Connected before the panels: the stepper takes its emphasis off a canvas already redrawn.
        session.gradients_changed.connect(self.show)

    def show(self) -> None:
        gview, highlighter = self.session.gradients, self.view.gradients
        if gview is None:
            highlighter.clear()
        elif gview is not highlighter.current:
            highlighter.show(gview)

    def focus(self, node, incoming, outgoing) -> None:
        """Emphasise ``node`` and its wires (node None: none), and bring the block into sight."""
        view = self.view
        view.gradients.focus(node, incoming, outgoing)
        item = view.diagram_scene().node_items.get(node) if node is not None else None
        if item is None:
            return
        visible = view.mapToScene(view.viewport().rect()).boundingRect()
        if not visible.contains(item.sceneBoundingRect()):
            view.center_on_node(node)
