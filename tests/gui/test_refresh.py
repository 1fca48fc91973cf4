"""Debounced (blockflow.gui.common.refresh): the refresh-once wiring panels use to follow the
document: many asks, one refresh; a signal's arguments ignored; gone with its parent."""
from __future__ import annotations

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QWidget

from blockflow.gui.common.refresh import Debounced


class _Source(QObject):
    none = Signal()
    one = Signal(str)
    two = Signal(str, str)


def test_many_asks_make_one_refresh_on_the_next_turn(qtbot):
    owner = QWidget()
    qtbot.addWidget(owner)
    calls = []
    refresh = Debounced(owner, lambda: calls.append(1))
    source = _Source()
    refresh.follow(source.none, source.one, source.two)
    source.none.emit()
    source.one.emit("page")
    source.two.emit("old", "new")
    refresh.later()
    assert calls == [] and refresh.pending()
    qtbot.waitUntil(lambda: calls == [1])
    assert not refresh.pending()
    qtbot.wait(20)
    assert calls == [1]


def test_a_cancelled_refresh_does_not_run(qtbot):
    owner = QWidget()
    qtbot.addWidget(owner)
    calls = []
    refresh = Debounced(owner, lambda: calls.append(1), interval_ms=10)
    refresh.later()
    refresh.cancel()
    qtbot.wait(40)
    assert calls == [] and not refresh.pending()


def test_signals_followed_stop_reaching_it_when_its_parent_is_deleted(qtbot):
    owner = QObject()
    calls = []
    refresh = Debounced(owner, lambda: calls.append(1))
    source = _Source()
    refresh.follow(source.one)
    with qtbot.waitSignal(owner.destroyed, timeout=1000):
        owner.deleteLater()
    del refresh
    source.one.emit("after")         # no "C++ object already deleted" from a slot of a gone panel
    qtbot.wait(20)
    assert calls == []
