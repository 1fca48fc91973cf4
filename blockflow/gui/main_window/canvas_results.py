"""The session's results drawn on the canvas's blocks: the shell binds the two, so the session
never reaches into the canvas and the canvas never asks the session."""
from __future__ import annotations

from PySide6.QtCore import QObject

__all__ = ["ResultsOnCanvas"]


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
