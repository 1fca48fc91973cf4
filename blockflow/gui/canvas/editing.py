"""Editing the canvas's selection: delete, copy, cut, paste, duplicate, align, distribute, and
the automatic layout; each one undo step. DiagramView takes these methods from SelectionEditing
(they need its selection, its clipboard placement and its status messages)."""
from __future__ import annotations

from PySide6.QtCore import QMimeData
from PySide6.QtWidgets import QApplication, QInputDialog

from blockflow.compile.grouping import suggest_name
from blockflow.errors import ProjectError
from blockflow.gui.canvas.arrange import align_moves, distribute_moves
from blockflow.gui.document.clipboard import FRAGMENT_MIME

__all__ = ["SelectionEditing"]

_clipboard_hook = []


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


class SelectionEditing:
    """The editing commands of DiagramView (a mixin: ``self`` is the view)."""

    def delete_selection(self) -> None:
        if self.canvas_layout.delete_selected():       # a reroute point or a frame selected
            return
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
            try:     # any program may put any bytes under blockflow's type
                text = bytes(mime.data(FRAGMENT_MIME)).decode("utf-8") if mime.hasFormat(FRAGMENT_MIME) \
                    else mime.text()
            except UnicodeDecodeError as exc:
                self.status_message.emit(f"cannot paste: the clipboard's blockflow fragment is not UTF-8 text "
                                         f"(byte 0x{exc.object[exc.start]:02x} at offset {exc.start})")
                return []
        if not text:
            return []
        return self.place.paste(text)

    def duplicate_selection(self) -> list[str]:
        nodes = self.selected_nodes()
        if not nodes:
            return []
        try:
            ids = self.doc.duplicate(nodes)
        except ProjectError as exc:     # a page that would hold more blocks than a page may
            self.status_message.emit(f"cannot duplicate: {exc}")
            return []
        self.select_nodes(ids)
        return ids

    def align_selection(self, how: str) -> None:
        items = [self._scene.node_items[n] for n in self.selected_nodes()]
        if len(items) >= 2:
            self._push_moves(align_moves(items, how), f"Align {how}")

    def distribute_selection(self, how: str) -> None:
        items = [self._scene.node_items[n] for n in self.selected_nodes()]
        if len(items) >= 3:
            self._push_moves(distribute_moves(items, how), f"Distribute {how}ly")

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

    # ---------------------------------------------------------------- composites
    def group_selection(self, name: str | None = None) -> str:
        """Make the selected blocks a new composite and one instance in their place (Ctrl+G);
        asks the composite's name (suggesting Group_1) unless given. Returns the instance's id
        ("" when nothing was grouped: the reason is in the status bar)."""
        nodes = self.selected_nodes()
        if not nodes:
            self.status_message.emit("select the blocks to group first")
            return ""
        if name is None:
            name, ok = QInputDialog.getText(self, "Group", "Name of the new composite:",
                                            text=suggest_name(self.doc.project))
            if not ok:
                return ""
        try:
            nid = self.doc.group(nodes, name.strip())
        except ProjectError as exc:
            self.status_message.emit(f"cannot group: {exc}")
            return ""
        self.select_nodes([nid])
        self.status_message.emit(f"grouped {len(nodes)} blocks as {name.strip()} ({nid}); "
                                 f"double-click it to open, Ctrl+Shift+G to ungroup")
        return nid

    def ungroup_selection(self) -> list[str]:
        """Inline the selected instances back (Ctrl+Shift+G), one undo step each."""
        chosen = [n for n in self.selected_nodes() if self.doc.page().nodes[n].block.startswith("@")]
        if not chosen:
            self.status_message.emit("select a composite's instance to ungroup")
            return []
        out: list[str] = []
        stack = self.doc.undo_stack
        stack.beginMacro(f"Ungroup {', '.join(chosen)}")
        try:
            for nid in chosen:
                out += self.doc.ungroup(nid)
        except ProjectError as exc:
            self.status_message.emit(f"cannot ungroup: {exc}")
        finally:
            stack.endMacro()
        if out:
            self.select_nodes(out)
            self.status_message.emit(f"ungrouped {', '.join(chosen)}: {len(out)} blocks")
        return out
