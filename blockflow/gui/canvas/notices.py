"""Notices: a short message drawn at the cursor on the canvas (why a wire was refused), hidden
after a few seconds or at the next press."""
from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF, QTimer

from blockflow.gui.canvas.items import NoticeItem

__all__ = ["Notices", "NOTICE_MS"]

#: how long a notice stays
NOTICE_MS = 4000


class Notices:
    """The one notice item of a view's scene (made on first use, again after a reload)."""

    def __init__(self, view):
        self.view = view
        self.item: NoticeItem | None = None
        self._timer = QTimer(view)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self.hide)

    def show(self, text: str, sp: QPointF) -> None:
        """Show ``text`` beside scene point ``sp``, inside the viewport."""
        scene = self.view.diagram_scene()
        if self.item is None or self.item.scene() is not scene:
            self.item = NoticeItem(self.view.style_)
            scene.addItem(self.item)
        self.item.set_text(text)
        self.item.setPos(self._place(sp, self.item.boundingRect()))
        self.item.setVisible(True)
        self._timer.start(NOTICE_MS)

    def text(self) -> str:
        """The message showing ("" when none is)."""
        n = self.item
        return n.text() if n is not None and n.scene() is self.view.diagram_scene() and n.isVisible() else ""

    def hide(self) -> None:
        if self.item is not None and self.item.scene() is self.view.diagram_scene():
            self.item.setVisible(False)

    def forget(self) -> None:
        """The scene's items were rebuilt: the item went with them."""
        self.item = None

    def _place(self, sp: QPointF, rect: QRectF, margin: float = 4.0) -> QPointF:
        """Where to put a notice (``rect``: its bounds in pixels, beside its origin) meant for
        the cursor at ``sp``: below right of it, flipped to the other side of the cursor where
        that would leave the viewport, then kept inside the viewport."""
        view = self.view
        vp = QRectF(view.viewport().rect())
        at = view.viewportTransform().map(sp)
        left, top = at.x() + rect.left(), at.y() + rect.top()
        if left + rect.width() > vp.right() - margin:
            left = at.x() - rect.left() - rect.width()
        if top + rect.height() > vp.bottom() - margin:
            top = at.y() - rect.top() - rect.height()
        left = max(vp.left() + margin, min(left, vp.right() - margin - rect.width()))
        top = max(vp.top() + margin, min(top, vp.bottom() - margin - rect.height()))
        inverse, _ok = view.viewportTransform().inverted()
        return inverse.map(QPointF(left - rect.left(), top - rect.top()))
