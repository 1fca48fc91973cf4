"""Refresh once, a little later: the wiring every panel that follows the document needs.

One edit can fire many document signals (a paste, a delete, an undo of a macro); a panel that
rebuilt itself on each would do the work many times over. A :class:`Debounced` gathers them: each
signal asks for the refresh with :meth:`Debounced.later`, and the refresh runs once, when the
event loop next turns (or ``interval_ms`` after the last ask).

It is a child QObject of the panel. Signals connected to its bound ``later`` (not to a lambda)
are disconnected by Qt when the panel, and so the Debounced, is deleted: a document that outlives
a closed window never calls into a deleted panel, and does not keep it alive.
"""
from __future__ import annotations

from PySide6.QtCore import QObject, QTimer

__all__ = ["Debounced"]


class Debounced(QObject):
    """Calls ``slot()`` once after any number of :meth:`later` calls made before it runs."""

    def __init__(self, parent: QObject, slot, interval_ms: int = 0):
        super().__init__(parent)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(interval_ms)
        self._timer.timeout.connect(slot)

    def later(self, *_signal_args) -> None:
        """Ask for the refresh (the arguments of the signal connected here are ignored)."""
        self._timer.start()

    def follow(self, *signals) -> None:
        """Refresh after each of ``signals``, whatever it carries."""
        for signal in signals:
            signal.connect(self.later)

    def cancel(self) -> None:
        """Drop a refresh asked for and not run yet (the panel refreshed by itself)."""
        self._timer.stop()

    def pending(self) -> bool:
        return self._timer.isActive()
