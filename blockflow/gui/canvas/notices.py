"""Notices: a short message drawn at the cursor on the canvas (why a wire was refused), hidden
after a few seconds or at the next press; and the hint an empty page shows (what to do first)."""
from __future__ import annotations

from PySide6.QtCore import QEvent, QPointF, QRectF, Qt, QTimer
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QLabel

from blockflow.gui.canvas.items import NoticeItem

__all__ = ["Notices", "NOTICE_MS", "EmptyPageHint", "EMPTY_PAGE_HINT"]

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


#: what an empty page says: the three first actions (our own words: no text of a file in it)
EMPTY_PAGE_STEPS = (
    ("Add a block", "drag one from the Blocks palette, or press <b>Tab</b> or <b>right-click</b> "
                    "here and type its name."),
    ("Wire it", "drag from an output port (a block's right side) to an input port (left side)."),
    ("Run it", "<b>Run &gt; Forward</b> (F5); <b>Run &gt; Backward</b> (Shift+F5) adds the gradients."),
)
EMPTY_PAGE_HINT = ("<p style='font-size:large'><b>This page is empty.</b> To begin:</p><ol>"
                   + "".join(f"<li style='margin-bottom:4px'><b>{what}:</b> {how}</li>" for what, how in EMPTY_PAGE_STEPS)
                   + "</ol>")


class EmptyPageHint(QLabel):
    """The hint drawn over an empty page's canvas: a label on the viewport, not an item of the
    scene, so that nothing of it is in a rendered picture or in the way of a gesture (it lets
    the mouse through). Shown while the scene has no block, centred in the viewport."""

    def __init__(self, view):
        super().__init__(EMPTY_PAGE_HINT, view.viewport())
        self.view = view
        self.setObjectName("emptyPageHint")
        self.setTextFormat(Qt.RichText)
        self.setWordWrap(True)
        self.setAttribute(Qt.WA_TransparentForMouseEvents)
        self.setFocusPolicy(Qt.NoFocus)
        self.setMargin(14)
        self.restyle()
        scene = view.diagram_scene()
        scene.reloaded.connect(self.follow)
        scene.contents_changed.connect(self.follow)
        view.viewport().installEventFilter(self)
        # a scroll of the canvas scrolls the viewport's child widgets too: put it back in the middle
        view.view_changed.connect(self._keep_centred)
        self.follow()

    def restyle(self) -> None:
        pal = self.view.palette()
        dark = pal.color(QPalette.Window).lightness() < 128
        ink = pal.color(QPalette.Text)
        ink.setAlpha(200)
        back = QColor(255, 255, 255, 30) if dark else QColor(0, 0, 0, 14)
        self.setStyleSheet(f"QLabel#emptyPageHint {{ color: rgba({ink.red()}, {ink.green()}, {ink.blue()}, "
                           f"{ink.alpha()}); background: rgba({back.red()}, {back.green()}, {back.blue()}, "
                           f"{back.alpha()}); border-radius: 8px; }}")

    def empty(self) -> bool:
        return not self.view.diagram_scene().node_items

    def follow(self) -> None:
        """Shown on an empty page, gone once it has a block."""
        show = self.empty()
        if show:
            self._place()
        self.setVisible(show)

    def _place(self) -> None:
        vp = self.view.viewport().rect()
        width = min(560, max(200, vp.width() - 40))
        self.setMinimumSize(0, 0)
        self.setMaximumSize(16777215, 16777215)        # heightForWidth honours earlier fixed sizes
        height = self.heightForWidth(width)
        self.setFixedSize(width, height if height > 0 else self.sizeHint().height())
        self.move(vp.center().x() - width // 2, max(10, vp.center().y() - self.height() // 2))

    def _keep_centred(self) -> None:
        if self.isVisible():
            self._place()

    def eventFilter(self, obj, event):   # noqa: N802 (Qt's name)
        if event.type() == QEvent.Resize and self.empty():
            self._place()
        return False
