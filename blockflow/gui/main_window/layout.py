"""The window's layout: its size and its docks (which are open, where, how big).

The default layout gives each dock column the width its content needs (the Check Gradients
table's columns, the stepper's details) within a share of the window. The layout is kept in the
window's settings when it closes and restored at the next start; a saved state that Qt cannot read
(corrupt, another version's, another program's) is ignored and the defaults stand. View > Reset
Layout puts every dock back where the defaults have it.
"""
from __future__ import annotations

import weakref

from PySide6.QtCore import QByteArray, Qt, QTimer
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import QDockWidget, QTabBar

from blockflow.gui.main_window.docks import PANELS

__all__ = ["STATE_VERSION", "GEOMETRY_KEY", "STATE_KEY", "restore_layout", "save_layout", "reset_layout",
           "default_dock_sizes", "right_column_width", "hide_stale_tab_bars"]

#: the version saveState stamps: a state of another version is not restored
STATE_VERSION = 2
GEOMETRY_KEY, STATE_KEY = "window/geometry", "window/state"
#: a saved state larger than this is not Qt's (a state of a few docks is a few hundred bytes)
_MAX_STATE_BYTES = 1 << 16
#: the check table's widest row as the panel writes it (a sample, to measure the columns by)
_CHECK_SAMPLE = ("x_logits", "-0.123457", "-0.123457", "1.2e-09", "1e-05", "✓")


def _saved_bytes(settings, key: str) -> QByteArray | None:
    value = settings.value(key)
    if isinstance(value, QByteArray) and 0 < value.size() <= _MAX_STATE_BYTES:
        return value
    return None


def right_column_width(window) -> int:
    """What the right-hand column needs: the Check Gradients table without wrapped or cut
    headers (header and a typical row, measured in the panel's fonts), and the stepper's
    controls; never more than a third of the window."""
    panel = window.gradient_panel
    text = QFontMetrics(panel.font())
    small = QFontMetrics(panel.check_view.font())
    columns = zip(panel.COLUMNS, _CHECK_SAMPLE)
    # cell padding 2 px a side, the text browser's frame and margins, the panel's, the scroll bar's
    table = sum(max(text.horizontalAdvance(h), small.horizontalAdvance(s)) + 12 for h, s in columns)
    needed = table + 2 * 4 + 2 * 8 + panel.style().pixelMetric(panel.style().PixelMetric.PM_ScrollBarExtent) + 24
    stepper = window.stepper.minimumSizeHint().width() + 16
    return int(min(max(needed, stepper, 330), window.width() / 3))


def default_dock_sizes(window) -> None:
    """The default sizes: the palette and overview on the left, the right column as wide as
    its content needs, the bottom row (Problems | Values) low."""
    d = window.docks
    # In a small window (a laptop at QT_SCALE_FACTOR=2 is 800x450 logical pixels) the docks give
    # up room so that the canvas keeps about half of each side.
    w, h = max(window.width(), 1), max(window.height(), 1)
    side = min(220, int(0.2 * w))
    right = min(right_column_width(window), int(0.3 * w))
    window.resizeDocks([d["palette"], d["inspector"]], [side, right], Qt.Horizontal)
    window.resizeDocks([d["problems"]], [min(200, int(0.22 * h))], Qt.Vertical)
    window.resizeDocks([d["problems"], d["values"]], [480, 720], Qt.Horizontal)
    window.resizeDocks([d["palette"], d["minimap"]], [560, 170], Qt.Vertical)
    # Inspector | Train above, Backward steps | Gradient below; the inspector's form and the
    # Train panel's curves need the room most of the time
    window.resizeDocks([d["inspector"], d["stepper"]], [540, 300], Qt.Vertical)


def hide_stale_tab_bars(window) -> None:
    """Hide the tab bars no tabbed docks use. Qt (6.11) makes two tab bars when docks are tabbed
    in a column of docks before the window is shown, and leaves one where the layout first put
    it, drawn over whatever dock comes to be there (at QT_SCALE_FACTOR=2, "Backward steps |
    Gradient" over the Values panel). A tab bar in use runs along the bottom of the docks it
    switches between."""
    shown = [d.geometry() for d in window.docks.values() if d.isVisible() and not d.isFloating()]
    for bar in window.findChildren(QTabBar, options=Qt.FindDirectChildrenOnly):
        g = bar.geometry()
        if bar.isVisible() and not any(abs(d.left() - g.left()) <= 2 and abs(d.width() - g.width()) <= 2
                                       and -2 <= g.top() - d.bottom() <= 12 for d in shown):
            bar.hide()


def hide_stale_tab_bars_later(window) -> None:
    """After the layout has placed the docks (it does so on the next turn of the event loop).
    The call holds the window weakly: a window closed before it runs is freed all the same."""
    ref = weakref.ref(window)

    def run():
        w = ref()
        if w is not None:
            hide_stale_tab_bars(w)
    QTimer.singleShot(0, window, run)


def reset_layout(window) -> None:
    """Every dock back in its default place, shown (but those hidden at start), at its default size
    (View > Reset Layout)."""
    docks: dict[str, QDockWidget] = window.docks
    for entry in PANELS:
        dock = docks[entry.key]
        dock.setFloating(False)
        window.removeDockWidget(dock)
    for entry in PANELS:
        dock = docks[entry.key]
        window.addDockWidget(entry.area, dock)
        dock.setVisible(not entry.hidden_at_start)
        entry.place(window, dock)
    default_dock_sizes(window)
    hide_stale_tab_bars_later(window)


def restore_layout(window) -> None:
    """The window's size and docks as saved (see the module), else the defaults."""
    settings = window.settings
    geometry = _saved_bytes(settings, GEOMETRY_KEY)
    if geometry is None or not window.restoreGeometry(geometry):
        screen = window.screen().availableGeometry()
        window.resize(min(1600, int(screen.width() * 0.92)), min(900, int(screen.height() * 0.9)))
    default_dock_sizes(window)
    state = _saved_bytes(settings, STATE_KEY)
    if state is None:
        return                       # the defaults again at the first show, for its size
    if window.restoreState(state, STATE_VERSION):
        window.layout_pending = False
    else:
        reset_layout(window)         # whatever part of it Qt took, the defaults again


def save_layout(window) -> None:
    window.settings.setValue(GEOMETRY_KEY, window.saveGeometry())
    window.settings.setValue(STATE_KEY, window.saveState(STATE_VERSION))
