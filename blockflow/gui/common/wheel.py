"""Fields that take the mouse wheel only when they have the focus.

A form in a scrolled panel (the Train panel) is scrolled with the wheel; a spin box or combo box
under the cursor would otherwise take the turn and change its value (beta1 0.900 -> 0.880, a mode
flipped) without the user ever clicking it. Once clicked or tabbed into, a field takes the wheel
as usual; until then the turn scrolls the scroll area around it.
"""
from __future__ import annotations

from PySide6.QtCore import QCoreApplication, QEvent, QObject, Qt
from PySide6.QtWidgets import QAbstractScrollArea, QAbstractSpinBox, QComboBox, QSlider, QWidget

__all__ = ["wheel_only_when_focused"]


class _WheelGuard(QObject):
    def eventFilter(self, obj, event):   # noqa: N802 (Qt's name)
        if event.type() != QEvent.Type.Wheel or obj.hasFocus():
            return False
        area = obj.parentWidget()
        while area is not None and not isinstance(area, QAbstractScrollArea):
            area = area.parentWidget()
        if area is not None:
            QCoreApplication.sendEvent(area.viewport(), event)
        return True      # never the field's: it has not been chosen


def wheel_only_when_focused(panel: QWidget) -> None:
    """Every spin box, combo box and slider in ``panel`` takes the wheel only once it has the
    focus (a click or Tab gives it; the wheel alone never does); until then the turn scrolls the
    panel."""
    guard = getattr(panel, "_wheel_guard", None)
    if guard is None:
        guard = panel._wheel_guard = _WheelGuard(panel)
    for field in panel.findChildren(QAbstractSpinBox) + panel.findChildren(QComboBox) + \
            panel.findChildren(QSlider):
        field.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        field.installEventFilter(guard)
