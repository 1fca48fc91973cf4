"""Collapsing blocks to their title and ports (H on the selection, the block menu, View > Collapse
All / Expand All). Each action is one undoable edit of the nodes' ``collapsed`` flags
(Document.set_collapsed); the scene redraws the blocks when the document says they changed."""
from __future__ import annotations

__all__ = ["toggle_selection", "set_all"]


def toggle_selection(view) -> None:
    """Collapse the selected blocks, or expand them when all of them are collapsed already."""
    ids = view.selected_nodes()
    if not ids:
        view.status_message.emit("select blocks to collapse or expand them (H)")
        return
    nodes = view.doc.page().nodes
    collapse = not all(nodes[nid].collapsed for nid in ids if nid in nodes)
    view.doc.set_collapsed(ids, collapse)


def set_all(view, collapsed: bool) -> None:
    """Collapse (or expand) the selected blocks, or every block of the page when none is."""
    ids = view.selected_nodes() or list(view.diagram_scene().node_items)
    view.doc.set_collapsed(ids, collapsed)
