"""Frames on the canvas: a titled, coloured box drawn behind the blocks it holds (Blender's
frames, ComfyUI's groups), the drag of its title bar that moves it with its blocks, and the
small dialog that edits its title, colour and note.

A frame has no box in the model, only its blocks: its item fits them (plus a margin, and room
above for the title bar and the note) whenever it is laid out, so a block moved, added or
removed moves the frame's edge with it.
"""
from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QPen
from PySide6.QtWidgets import (QComboBox, QDialog, QDialogButtonBox, QFormLayout, QGraphicsItem,
                               QLineEdit, QPlainTextEdit)

from blockflow.errors import ProjectError
from blockflow.page_layout import FRAME_COLORS, MAX_FRAME_NOTE, MAX_FRAME_TITLE
from blockflow.gui.canvas.interactions import Interaction

__all__ = ["FrameItem", "FrameDrag", "FrameEditor", "frame_tints", "FRAME_HUES"]

#: the hue of each frame colour; the fill, the edge and the title bar are mixed from it and the
#: canvas background, so every colour reads on the light and the dark theme
FRAME_HUES = {"grey": "#8a8f98", "red": "#d9534f", "orange": "#e8893a", "yellow": "#d8b92c",
              "green": "#4fa35a", "teal": "#2e9d9a", "blue": "#4a7fd0", "purple": "#9466c9"}
MARGIN = 18.0          # around the blocks
TITLE_H = 24.0         # the title bar
NOTE_LINES = 3         # the note shows at most this many lines (the dialog shows it all)


def _mix(a: QColor, b: QColor, t: float) -> QColor:
    return QColor.fromRgbF(a.redF() + (b.redF() - a.redF()) * t, a.greenF() + (b.greenF() - a.greenF()) * t,
                           a.blueF() + (b.blueF() - a.blueF()) * t)


def frame_tints(style, color: str) -> tuple[QColor, QColor, QColor]:
    """(fill, edge, title bar) of a frame of ``color`` on ``style``'s canvas."""
    hue = QColor(FRAME_HUES.get(color, FRAME_HUES["grey"]))
    bg = style.background
    strength = 0.22 if style.dark else 0.14
    return _mix(bg, hue, strength), _mix(bg, hue, 0.75), _mix(bg, hue, strength * 2.6)


class FrameItem(QGraphicsItem):
    """One frame of the page (``index`` in ``Page.frames``), drawn behind wires and blocks."""

    Type = QGraphicsItem.UserType + 22

    def __init__(self, index: int, frame, style):
        super().__init__()
        self.index, self.frame, self.style = index, frame, style
        self.box = QRectF()
        self.selected_frame = False
        self.setZValue(-10.0 - 0.001 * index)      # behind wires (-1); later frames on top
        self.setAcceptHoverEvents(False)

    def type(self):
        return FrameItem.Type

    def _note_lines(self) -> list[str]:
        lines = [ln for ln in self.frame.note.splitlines() if ln.strip()][:NOTE_LINES]
        return lines

    def fit(self, boxes) -> None:
        """Fit the blocks' scene rects ``boxes`` (an empty list hides the frame)."""
        self.prepareGeometryChange()
        rect = QRectF()
        for b in boxes:
            rect = rect.united(b)
        if rect.isNull():
            self.box = QRectF()
            self.setVisible(False)
            return
        note_h = len(self._note_lines()) * self.style.sub_fm.height()
        self.box = rect.adjusted(-MARGIN, -MARGIN - TITLE_H - note_h - (4 if note_h else 0), MARGIN, MARGIN)
        self.setVisible(True)

    def title_bar(self) -> QRectF:
        return QRectF(self.box.left(), self.box.top(), self.box.width(), TITLE_H)

    def boundingRect(self) -> QRectF:
        return self.box.adjusted(-2, -2, 2, 2)

    def set_selected_frame(self, on: bool) -> None:
        if on != self.selected_frame:
            self.selected_frame = on
            self.update()

    def paint(self, painter, option, widget=None):
        if self.box.isNull():
            return
        st = self.style
        fill, edge, bar = frame_tints(st, self.frame.color)
        painter.setPen(QPen(st.highlight if self.selected_frame else edge, 2.4 if self.selected_frame else 1.2))
        painter.setBrush(fill)
        painter.drawRoundedRect(self.box, 8, 8)
        head = self.title_bar()
        painter.setPen(Qt.NoPen)
        painter.setBrush(bar)
        painter.drawRoundedRect(head.adjusted(1, 1, -1, 0), 7, 7)
        painter.drawRect(head.adjusted(1, TITLE_H / 2, -1, 0))
        painter.setPen(st.text_pen)
        painter.setFont(st.title_font)
        text = st.title_fm.elidedText(self.frame.title, Qt.ElideRight, max(head.width() - 20, 10))
        painter.drawText(head.adjusted(10, 0, -10, 0), int(Qt.AlignLeft | Qt.AlignVCenter), text)
        lines = self._note_lines()
        if lines:
            painter.setFont(st.sub_font)
            painter.setPen(st.muted_pen)
            y, h = head.bottom() + 2, st.sub_fm.height()
            for i, line in enumerate(lines):
                more = i == len(lines) - 1 and len(self.frame.note.splitlines()) > NOTE_LINES
                shown = st.sub_fm.elidedText(line + (" …" if more else ""), Qt.ElideRight,
                                             max(self.box.width() - 20, 10))
                painter.drawText(QRectF(self.box.left() + 10, y + i * h, self.box.width() - 20, h),
                                 int(Qt.AlignLeft | Qt.AlignVCenter), shown)


class FrameDrag(Interaction):
    """Drags a frame by its title bar: its blocks (and the reroute points between them) follow;
    one undo step on release (none if it did not move)."""

    def __init__(self, view, item: FrameItem, sp: QPointF):
        super().__init__(view)
        self.index, self.item = item.index, item
        self.frame = item.frame             # what the page held at the press
        self.start = QPointF(sp)
        self.blocks = [self.scene.node_items[n] for n in item.frame.blocks if n in self.scene.node_items]
        self.origins = [b.pos() for b in self.blocks]
        self.box = QRectF(item.box)
        self.moved = False

    def _delta(self, sp: QPointF) -> QPointF:
        from blockflow.gui.canvas.scene import GRID
        d = sp - self.start
        return QPointF(round(d.x() / GRID) * GRID, round(d.y() / GRID) * GRID)   # blocks stay on the grid

    def _still_there(self) -> bool:
        """The frame dragged is still the page's frame at its index (an Undo or a Delete in the
        middle of the drag may have taken it away, and another come to have its index)."""
        frames = self.scene.page.frames if self.scene.page is not None else []
        return self.index < len(frames) and frames[self.index] == self.frame

    def move(self, event, sp: QPointF) -> bool:
        d = self._delta(sp)
        if not self.moved and d.isNull():
            return True
        if not self._still_there():
            return True
        self.moved = True
        for block, origin in zip(self.blocks, self.origins):
            block.setPos(origin + d)
        self.view.canvas_layout.relayout_frames()
        return True

    def release(self, event, sp: QPointF) -> bool:
        if event.button() != Qt.LeftButton:
            return True
        self._done()
        d = self._delta(sp)
        if self.moved:
            for block, origin in zip(self.blocks, self.origins):
                block.setPos(origin)        # the document's move puts them where they go
            if not d.isNull() and self._still_there():
                try:
                    self.view.doc.move_frame(self.index, d.x(), d.y())
                except ProjectError as exc:
                    self.view.status_message.emit(f"cannot move the frame: {exc}")
            self.view.canvas_layout.relayout_frames()
        return True

    def drop(self) -> None:
        self._done()


class FrameEditor(QDialog):
    """Edits a frame's title, colour and note; OK makes one undo step (none when unchanged)."""

    def __init__(self, view, index: int, frame):
        super().__init__(view)
        self.setWindowTitle("Frame")
        self.view, self.index = view, index
        self.title = QLineEdit(frame.title)
        self.title.setMaxLength(MAX_FRAME_TITLE)
        self.color = QComboBox()
        for name in FRAME_COLORS:
            self.color.addItem(name.capitalize(), name)
        self.color.setCurrentIndex(FRAME_COLORS.index(frame.color) if frame.color in FRAME_COLORS else 0)
        self.note = QPlainTextEdit(frame.note)
        self.note.setPlaceholderText("What these blocks do (shown under the title)")
        self.note.setTabChangesFocus(True)
        form = QFormLayout(self)
        form.addRow("Title:", self.title)
        form.addRow("Colour:", self.color)
        form.addRow("Note:", self.note)
        buttons = QDialogButtonBox(QDialogButtonBox.Ok | QDialogButtonBox.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form.addRow(buttons)
        self.resize(380, 260)

    def accept(self) -> None:
        note = self.note.toPlainText()[:MAX_FRAME_NOTE]
        try:
            self.view.doc.edit_frame(self.index, title=self.title.text().strip() or "Frame",
                                     color=self.color.currentData(), note=note)
        except ProjectError as exc:
            self.view.status_message.emit(str(exc))
            return
        super().accept()
