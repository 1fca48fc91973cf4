"""The gradient badge on a closed composite instance: the gradient norm of the Variables inside it
after a backward run (``‖∇W‖ 0.034``), "shares d1" on one that uses another's Variables, "cut"
when no gradient reaches its inside (also before any run, from the static gradient paths).

What a badge says comes from blockflow.present.levels; this module only draws it: a small rounded
tag sitting on the block's top-right corner, a child of the block so it follows a drag. The
gradient highlighter (gradients.py) owns one InstanceBadges per scene and hands it the badges of
the level shown.
"""
from __future__ import annotations

import shiboken6
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QFontMetricsF, QPen
from PySide6.QtWidgets import QGraphicsItem

from blockflow.present.levels import InstanceBadge
from blockflow.gui.common.theme import Style

__all__ = ["BadgeItem", "InstanceBadges"]

#: the badge's accents: gradient reaches inside / cut (the cut wires' grey family)
_FLOWS = QColor("#2a9d8f")
_CUT = QColor("#8a8a8a")


class BadgeItem(QGraphicsItem):
    """One badge; ``badge`` is what it says (text(), tooltip())."""

    def __init__(self, badge: InstanceBadge, style: Style):
        super().__init__()
        self.badge = badge
        self.style = style
        self.text = badge.text()
        fm = QFontMetricsF(style.sub_font)
        self._rect = QRectF(0, 0, fm.horizontalAdvance(self.text) + 12, fm.height() + 4)
        self.setZValue(6.0)
        self.setAcceptedMouseButtons(Qt.NoButton)
        self.setToolTip(badge.tooltip())

    def boundingRect(self):
        return self._rect.adjusted(-1, -1, 1, 1)

    def paint(self, painter, option, widget=None):
        st = self.style
        accent = _CUT if self.badge.cut else _FLOWS
        fill = QColor(st.body)
        fill.setAlphaF(0.95)
        pen = QPen(accent, 1.3)
        if self.badge.cut:
            pen.setStyle(Qt.DashLine)
        painter.setPen(pen)
        painter.setBrush(QBrush(fill))
        painter.drawRoundedRect(self._rect, 6, 6)
        painter.setPen(st.text_pen)
        painter.setFont(st.sub_font)
        painter.drawText(self._rect, int(Qt.AlignCenter), self.text)


class InstanceBadges:
    """The badges of one scene, by drawn node id."""

    def __init__(self, scene, style: Style):
        self.scene, self.style = scene, style
        self.items: dict[str, BadgeItem] = {}

    def show(self, badges: dict) -> None:
        """Show ``{drawn node: InstanceBadge}``; the badges of other nodes go."""
        self.clear()
        for nid, badge in badges.items():
            host = self.scene.node_items.get(nid)
            if host is None:
                continue
            item = BadgeItem(badge, self.style)
            body = host.rect()
            item.setPos(body.right() - item._rect.width() + 4, body.top() - item._rect.height() + 2)
            item.setParentItem(host)
            self.items[nid] = item

    def clear(self) -> None:
        for item in self.items.values():
            if shiboken6.isValid(item) and item.scene() is not None:
                item.scene().removeItem(item)
        self.items = {}

    def text_of(self, nid: str) -> str | None:
        """What the badge on ``nid`` says (None: no badge), for tests and tooltips."""
        item = self.items.get(nid)
        return item.text if item is not None else None
