"""Python's cyclic garbage collector, run on the UI thread only.

The collector runs on whichever thread happens to allocate when its counters pass their
thresholds, and it frees whatever cyclic garbage there is, Qt objects included. Run on a Worker's
thread (a compile, a run, training), it destroys widgets and QObjects there: a QObject destructor
then holds a Qt lock while it waits for the GIL, and the UI thread, holding the GIL, waits for that
lock to delete a menu (seen: a closed window's garbage collected by a compile job; the process
hung). So once the editor starts background work, automatic collection is switched off and a
timer on the UI thread collects instead, generation by generation with Python's own thresholds,
as often as the automatic collector would between two ticks.
"""
from __future__ import annotations

import gc

from PySide6.QtCore import QObject, QTimer
from PySide6.QtWidgets import QApplication

__all__ = ["collect_on_ui_thread", "UiThreadCollector"]

#: how often the UI thread looks at the collector's counters
INTERVAL_MS = 250


class UiThreadCollector(QObject):
    """Collects on the UI thread what the automatic collector would have collected anywhere."""

    def __init__(self, app):
        super().__init__(app)
        self.timer = QTimer(self)
        self.timer.setInterval(INTERVAL_MS)
        self.timer.timeout.connect(self.collect)
        self.timer.start()
        gc.disable()

    def collect(self) -> int:
        """One collection of the oldest generation whose count passed its threshold (none when
        none did); returns the objects freed."""
        counts, thresholds = gc.get_count(), gc.get_threshold()
        generation = -1
        for gen in range(3):
            if thresholds[gen] and counts[gen] > thresholds[gen]:
                generation = gen
        return gc.collect(generation) if generation >= 0 else 0


def collect_on_ui_thread() -> UiThreadCollector | None:
    """Install the collector on the running application, once (called on the UI thread by
    whatever starts background work); None without an application."""
    app = QApplication.instance()
    if app is None:
        return None
    found = app.findChild(UiThreadCollector)
    return found if found is not None else UiThreadCollector(app)
