"""The add-block popup: a search box and a ranked list at the cursor (Tab, a right-click on empty
canvas, or a wire dropped on empty canvas), as Blender's Shift+A search and ComfyUI's double-click
search do.

It ranks as the palette's search does (common/blocksearch.py), offers the project's composites as
the palette lists them, and adds the chosen block where it was opened. Opened by a wire dropped in
empty space it lists only the blocks with a port that could take (or give) the wire's type (the
cheap check that lights ports up during the drag) and wires the new block to the first port the
Document accepts, in the same undo step. Its foot keeps what the empty canvas's menu offered.

It is a child of the view, not a window of its own, so a grab of the view shows it; it closes
when its box loses the focus to anything outside it.
"""
from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, QPoint, QPointF, Qt
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import (QFrame, QHBoxLayout, QLabel, QLineEdit, QListWidget, QListWidgetItem,
                               QStyle, QStyledItemDelegate, QToolButton, QVBoxLayout)

from blockflow.present.dtypes import dtype_class
from blockflow.gui.canvas.items import LiveWireItem
from blockflow.gui.canvas.splice import fitting_inputs, fitting_outputs, probe_data
from blockflow.gui.common.blocksearch import haystack, matches, rank
from blockflow.gui.common.plaintext import literal, make_plain

__all__ = ["QuickAdd", "WIDTH", "ROWS"]

#: the popup's width and how many rows of the list show at most (logical pixels, rows)
WIDTH, ROWS = 320, 12

_BLOCK_ROLE, _CATEGORY_ROLE = Qt.UserRole + 1, Qt.UserRole + 2
COMPOSITES = "composites"


class _Entry:
    __slots__ = ("block", "label", "category", "names", "hay", "place", "summary")

    def __init__(self, block, label, category, names, hay, place, summary):
        self.block, self.label, self.category, self.names = block, label, category, names
        self.hay, self.place, self.summary = hay, place, summary


class _Row(QStyledItemDelegate):
    """A block's name, and its category muted at the right (where the palette would show it)."""

    def paint(self, painter, option, index):
        super().paint(painter, option, index)
        category = index.data(_CATEGORY_ROLE)
        if not category:
            return
        painter.save()
        selected = bool(option.state & QStyle.State_Selected)
        colour = option.palette.color(QPalette.HighlightedText if selected else QPalette.PlaceholderText)
        painter.setPen(colour)
        font = painter.font()
        font.setPointSizeF(font.pointSizeF() * 0.9)
        painter.setFont(font)
        painter.drawText(option.rect.adjusted(0, 0, -6, 0), Qt.AlignRight | Qt.AlignVCenter, category)
        painter.restore()


class QuickAdd(QFrame):
    """The popup; one per view, shown by ``open_at`` and hidden when done."""

    def __init__(self, view):
        super().__init__(view)
        self.view = view
        self.setObjectName("quickAdd")
        self.setFrameShape(QFrame.StyledPanel)
        self.setAutoFillBackground(True)
        self.title = make_plain(QLabel(self))   # names a node and port of the file
        self.title.setWordWrap(True)
        self.edit = QLineEdit(self)
        self.edit.setPlaceholderText("Add block: type to search")
        self.edit.setClearButtonEnabled(True)
        self.list = QListWidget(self)
        self.list.setFocusPolicy(Qt.NoFocus)           # typing stays in the box
        self.list.setUniformItemSizes(True)
        self.list.setItemDelegate(_Row(self.list))
        self.foot = self._make_foot()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.setSpacing(3)
        for widget in (self.title, self.edit, self.list, self.foot):
            layout.addWidget(widget)
        self.at = QPointF()
        self.wire: tuple | None = None     # (node, port, from_output, class or constraint)
        self.live: LiveWireItem | None = None   # the dropped wire, drawn to the popup while it is open
        self.entries: list[_Entry] = []
        self.edit.textChanged.connect(self._refilter)
        self.edit.installEventFilter(self)
        self.list.itemClicked.connect(self._clicked)
        view.installEventFilter(self)      # Tab reaches the view's focus chain before its keys
        view.viewport().installEventFilter(self)
        view.diagram_scene().about_to_reload.connect(self._scene_reloading)
        self.hide()

    def _make_foot(self):
        foot = QFrame(self)
        row = QHBoxLayout(foot)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(2)
        view = self.view
        for text, tip, act in (("Paste", "paste here (Ctrl+V)", view.paste),
                               ("Select all", "select every block (Ctrl+A)", view.select_all),
                               ("Lay out", "lay the page out (auto-layout)", view.auto_layout),
                               ("Fit", "fit the page to the view", view.fit_to_view),
                               ("Menu…", "the canvas menu: every block by category", self._menu)):
            button = QToolButton(foot)
            button.setText(text)
            button.setToolTip(tip)
            button.setAutoRaise(True)
            button.setFocusPolicy(Qt.NoFocus)
            button.clicked.connect(lambda _=False, act=act: self._then(act))
            row.addWidget(button)
        row.addStretch(1)
        return foot

    # ---------------------------------------------------------------- opening
    def open_at(self, sp: QPointF, wire: tuple | None = None) -> None:
        """Show the popup at scene point ``sp`` (where the block will go). ``wire``: (node, port,
        from_output) of a wire dropped there, which the chosen block is wired to."""
        view = self.view
        self.at = QPointF(sp)
        self.wire = None
        if wire is not None:
            node, port, from_output = wire
            data = view.diagram_scene().node_items[node].data
            ports = data.outputs if from_output else data.inputs
            kind = next((p.cls if from_output else p.constraint for p in ports if p.name == port), "any")
            self.wire = (node, port, from_output, kind)
            self.title.setText(f"Blocks that can {'take' if from_output else 'give'} {dtype_class(kind)} "
                               f"({'from' if from_output else 'to'} {node}.{port})")
            self._draw_wire(data, port, from_output)
        self.title.setVisible(wire is not None)
        self.foot.setVisible(wire is None)
        self.entries = self._entries()
        self.edit.blockSignals(True)
        self.edit.clear()
        self.edit.blockSignals(False)
        self._refilter("")
        self._place(view.mapFromScene(sp))
        self.show()
        self.raise_()
        self.edit.setFocus(Qt.PopupFocusReason)

    def _draw_wire(self, data, port: str, from_output: bool) -> None:
        """The dropped wire stays drawn, from its port to where the block will go."""
        self._forget_wire()
        anchor = self.view.diagram_scene().node_items[data.node_id].port_scene_pos(port)
        self.live = LiveWireItem(self.view.style_)
        self.live.set_ends(anchor, self.at) if from_output else self.live.set_ends(self.at, anchor)
        self.view.diagram_scene().addItem(self.live)

    def _forget_wire(self) -> None:
        if self.live is not None and self.live.scene() is not None:
            self.live.scene().removeItem(self.live)
        self.live = None

    def _scene_reloading(self) -> None:
        self.live = None                   # cleared with the scene
        self.close_popup(refocus=False)

    def open_on_canvas(self, sp: QPointF) -> bool:
        """A right-click: the popup when ``sp`` is empty canvas (True), else nothing (False)."""
        if self.view.node_at(sp) is not None or self.view.edge_at(sp) is not None:
            return False
        self.open_at(sp)
        return True

    def _place(self, at: QPoint) -> None:
        """Top-left at the cursor, moved in so that all of it is inside the view."""
        row = self.list.sizeHintForRow(0) if self.list.count() else 18
        rows = max(4, min(ROWS, self.list.count()))     # a short list (a wire's) needs less room
        self.list.setFixedHeight(row * rows + 2 * self.list.frameWidth())
        self.setFixedWidth(WIDTH)
        self.adjustSize()
        host = self.view.rect()
        at = self.view.viewport().mapTo(self.view, at)
        x = max(0, min(at.x(), host.width() - self.width()))
        y = max(0, min(at.y(), host.height() - self.height()))
        self.move(x, y)

    def _entries(self) -> list[_Entry]:
        """The blocks to offer: the project's composites (as the palette lists them), then the
        library's by category; with a wire, only those with a port that fits it."""
        doc = self.view.doc
        out: list[_Entry] = []
        for name, comp in doc.project.composites.items():
            block = "@" + name
            if doc.nesting_problem(block):
                continue
            out.append(_Entry(block, name, COMPOSITES, [name.lower()], haystack(name, (), f"{comp.doc} composite"),
                              len(out), comp.doc or f"composite {name}"))
        for category, specs in doc.registry.categories().items():
            for spec in specs:
                out.append(_Entry(spec.name, spec.name, category, [n.lower() for n in (spec.name, *spec.aliases)],
                                  haystack(spec.name, spec.aliases, spec.summary), len(out), spec.summary))
        if self.wire is not None:
            out = [e for e in out if self._fitting_ports(e.block)]
        return out

    def _fitting_ports(self, block: str) -> list[str]:
        """The ports of a new ``block`` the dropped wire could go to, in order."""
        _, _, from_output, kind = self.wire
        data = probe_data(self.view.doc, block)
        return fitting_inputs(data, kind) if from_output else fitting_outputs(data, kind)

    # ---------------------------------------------------------------- filtering and choosing
    def _refilter(self, text: str) -> None:
        words = text.lower().split()
        query = " ".join(words)
        shown = [e for e in self.entries if matches(e.hay, words)]
        if words:
            shown.sort(key=lambda e: (rank(e.names, query), e.place))
        self.list.clear()
        for entry in shown:
            item = QListWidgetItem(entry.label)
            item.setData(_BLOCK_ROLE, entry.block)
            item.setData(_CATEGORY_ROLE, entry.category)
            item.setToolTip(literal(entry.summary))   # a composite's doc is the file's text
            self.list.addItem(item)
        if shown:
            self.list.setCurrentRow(0)

    def shown_blocks(self) -> list[str]:
        """The blocks listed now, in order (tests read it)."""
        return [self.list.item(i).data(_BLOCK_ROLE) for i in range(self.list.count())]

    def _step(self, delta: int) -> None:
        count = self.list.count()
        if count:
            self.list.setCurrentRow(max(0, min(count - 1, self.list.currentRow() + delta)))

    def _clicked(self, item: QListWidgetItem) -> None:
        self.list.setCurrentItem(item)
        self.choose()

    def choose(self) -> str:
        """Add the current block where the popup was opened; its id ("" when none was added)."""
        item = self.list.currentItem()
        block = item.data(_BLOCK_ROLE) if item is not None else None
        wire = self.wire
        self.close_popup()
        if not block:
            return ""
        if wire is None:
            return self.view.drop_block(block, self.at, free=True)   # never over a block
        return self._add_wired(block, wire)

    def _add_wired(self, block: str, wire: tuple) -> str:
        """Add ``block`` and wire it to the dropped wire's port: one undo step."""
        view, doc = self.view, self.view.doc
        node, port, from_output, _ = wire
        ports = self._fitting_ports(block)
        stack = doc.undo_stack
        before = stack.index()
        stack.beginMacro(f"Add {block} wired to {node}.{port}")
        nid = view.drop_block(block, self.at, free=True)
        wired = ""
        for other in ports if nid else ():
            ends = (node, port, nid, other) if from_output else (nid, other, node, port)
            if doc.check_connection(*ends):
                doc.connect(*ends)
                wired = f"{ends[0]}.{ends[1]} -> {ends[2]}.{ends[3]}"
                break
        stack.endMacro()
        if stack.index() > before and not nid:
            stack.undo()                   # nothing was added: no empty step
        if nid:
            view.status_message.emit(f"added {block} {nid}, wired {wired}" if wired
                                     else f"added {block} {nid}; none of its ports takes the wire")
        return nid

    def close_popup(self, refocus: bool = True) -> None:
        self._forget_wire()
        if self.isVisible():
            self.hide()
            if refocus:
                self.view.setFocus(Qt.PopupFocusReason)

    def _then(self, act) -> None:
        self.close_popup()
        act()

    def _menu(self) -> None:
        self.view.context_menu(self.at).exec(self.view.viewport().mapToGlobal(self.view.mapFromScene(self.at)))

    # ---------------------------------------------------------------- keys
    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        kind = event.type()
        if obj is self.view:
            if kind == QEvent.KeyPress and event.key() == Qt.Key_Tab and not event.modifiers() \
                    and self.view.interaction() is None:
                self.open_at(self.view.cursor_scene_pos())
                return True
            return False
        if obj is not self.edit:           # the viewport: a press there ends the popup
            if kind == QEvent.MouseButtonPress and self.isVisible():
                self.close_popup(refocus=False)
            return False
        if kind == QEvent.ShortcutOverride and event.key() in _KEYS:
            event.accept()             # the window's shortcuts do not take these from the box
            return True
        if kind == QEvent.KeyPress and event.key() in _KEYS:
            _KEYS[event.key()](self)
            return True
        if kind == QEvent.FocusOut and event.reason() != Qt.PopupFocusReason:
            self.close_popup(refocus=False)   # a click elsewhere (its list and buttons take no focus)
        return False


_KEYS = {Qt.Key_Escape: QuickAdd.close_popup, Qt.Key_Return: QuickAdd.choose, Qt.Key_Enter: QuickAdd.choose,
         Qt.Key_Up: lambda self: self._step(-1), Qt.Key_Down: lambda self: self._step(1),
         Qt.Key_Tab: lambda self: self._step(1), Qt.Key_Backtab: lambda self: self._step(-1),
         Qt.Key_PageUp: lambda self: self._step(-ROWS), Qt.Key_PageDown: lambda self: self._step(ROWS)}
