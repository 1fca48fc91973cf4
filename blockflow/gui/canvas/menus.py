"""The canvas's context menus (a block, a wire, the empty canvas) and the rename dialogs."""
from __future__ import annotations

from PySide6.QtCore import QPointF
from PySide6.QtWidgets import QInputDialog, QMenu, QMessageBox

from blockflow.errors import ProjectError
from blockflow.gui.common.plaintext import literal

__all__ = ["context_menu", "rename_label", "rename_id"]


def context_menu(view, sp: QPointF) -> QMenu:
    """The menu for what is at ``sp``: a block, a wire, or the canvas."""
    menu = QMenu(view)
    item = view.node_at(sp)
    edge = None if item is not None else view.edge_at(sp)
    if item is None and edge is None and view.canvas_layout.add_menu_actions(menu, sp, True):
        return menu                 # a frame's title bar: the frame's menu
    if item is not None:
        _block_menu(view, menu, item)
        view.canvas_layout.add_menu_actions(menu, sp, False)
    elif edge is not None:
        e = edge.edge
        view.select_wires([e])
        menu.addAction(f"Delete wire {e}", lambda: view.doc.disconnect([e]))
    else:
        add = menu.addMenu("Add block")
        for cat, specs in view.doc.registry.categories().items():
            sub = add.addMenu(cat)
            for spec in specs:
                sub.addAction(spec.name, lambda n=spec.name, p=QPointF(sp): view.drop_block(n, p))
        menu.addAction("Paste", lambda: view.paste())
        menu.addAction("Select all", view.select_all)
        menu.addSeparator()
        menu.addAction("Auto-layout", view.auto_layout)
        menu.addAction("Fit to view", view.fit_to_view)
        view.canvas_layout.add_menu_actions(menu, sp, False)
    return menu


def _block_menu(view, menu: QMenu, item) -> None:
    nid = item.node_id
    if not item.isSelected():
        view.select_nodes([nid])
    menu.addAction("Rename id…", lambda: rename_id(view, nid))
    menu.addAction("Rename label…", lambda: rename_label(view, nid))
    menu.addAction("Duplicate", view.duplicate_selection)
    menu.addAction("Expand\tH" if item.collapsed else "Collapse\tH", view.toggle_collapse)
    if view.diagram_scene().page.is_loss(nid):
        menu.addAction("Clear loss mark", lambda: view.doc.set_loss(None))
    else:
        menu.addAction("Mark as loss", lambda: view.doc.set_loss(nid))
    menu.addSeparator()
    menu.addAction("Copy", view.copy_selection)
    menu.addAction("Cut", view.cut_selection)
    menu.addAction("Delete", view.delete_selection)


def rename_label(view, nid: str) -> None:
    doc = view.doc
    node = doc.page().nodes.get(nid)
    if node is None:
        return
    text, ok = QInputDialog.getText(view, "Rename label", f"Label of {nid}:", text=node.label)
    if ok and text != node.label:
        try:
            doc.set_label(nid, text)
        except ProjectError as exc:      # a NUL
            view.status_message.emit(str(exc))


def rename_id(view, nid: str) -> None:
    doc = view.doc
    if nid not in doc.page().nodes:
        return
    text, ok = QInputDialog.getText(view, "Rename block", literal(f"New id of {nid} (its full name is "
                                                                  f"{doc.page().full_name(nid)}):"), text=nid)
    if ok and text != nid:
        try:
            doc.rename_node(nid, text.strip())
        except ProjectError as exc:
            view.status_message.emit(str(exc))
            QMessageBox.warning(view, "Rename block", literal(exc))
