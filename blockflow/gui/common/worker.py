"""The editor's one way to work off the UI thread: a Worker runs jobs, one at a time, on its own
background thread and hands what they produce back to the UI thread.

A job is a plain function called on the worker thread with one argument, ``post``:
``post(callback, *args)`` has ``callback(*args)`` called later on the UI thread (progress,
partial results). What the job returns goes to the ``on_done`` callback given to ``submit``, on
the UI thread too. Every job ends with that call, even one that raises: then its traceback is
printed and ``on_done`` gets the exception instead of a result (whatever it is, a BaseException
such as SystemExit included), so an owner waiting for its job's end never waits forever. Jobs
never touch widgets or the live model; they work on what they were given.

Shutting down: ``wait()`` blocks until the job under way (if any) returns, and the queued ones
after it; destroying the Worker (with its Qt parent) waits the same way before the object that
delivers to the UI thread is gone, so a late job never reports into a deleted object.
``wait_for_all_workers()`` waits for every live Worker's jobs: for code that needs no thread but
its own running Python for a moment (starting or stopping ``tracemalloc`` races with a thread
entering Python on CPython 3.11, gh-128679: a segmentation fault).
"""
from __future__ import annotations

import traceback
import weakref

from PySide6.QtCore import QObject, QRunnable, Qt, QThreadPool, Signal

from blockflow.gui.common.gcmain import collect_on_ui_thread

__all__ = ["Worker", "wait_for_all_workers"]

_LIVE: weakref.WeakSet = weakref.WeakSet()     # every Worker not yet collected


class _Courier(QObject):
    """Carries calls from the worker thread to the thread the Worker lives on (the UI thread)."""

    deliver = Signal(object, tuple)


class _Job(QRunnable):
    def __init__(self, fn, on_done, courier: _Courier):
        super().__init__()
        self.fn, self.on_done, self.courier = fn, on_done, courier

    def run(self):
        try:
            result = self.fn(self._post)
        except BaseException as exc:    # a bug in the job: say so, keep the thread for the next one
            traceback.print_exc()
            result = exc                # and still tell the owner the job is over
        if self.on_done is not None:
            self._post(self.on_done, result)

    def _post(self, callback, *args) -> None:
        try:
            self.courier.deliver.emit(callback, args)
        except RuntimeError:      # the owner (a closed window) is gone: nobody to tell
            pass


class Worker(QObject):
    """One background thread for one kind of work (page compiles, runs, training)."""

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        collect_on_ui_thread()     # never the garbage collector on the worker's thread (gcmain.py)
        # The pool first: children are deleted in order, and the pool's destructor waits for a
        # job still going (releasing the GIL) before the courier it reports through is gone.
        self._pool = QThreadPool(self)
        self._pool.setMaxThreadCount(1)
        self._courier = _Courier(self)
        self._courier.deliver.connect(self._deliver, Qt.QueuedConnection)
        _LIVE.add(self)

    def submit(self, fn, on_done=None) -> None:
        """Run ``fn(post)`` on the worker thread after the jobs before it; then, on the UI
        thread, ``on_done(result)`` with what it returned, or with the exception it raised."""
        self._pool.start(_Job(fn, on_done, self._courier))

    def wait(self, msecs: int = -1) -> bool:
        """Block until every job has returned (or ``msecs`` passed); True when they have. Calls
        they posted are delivered later, by the UI thread's event loop."""
        return self._pool.waitForDone(msecs)

    def _deliver(self, callback, args) -> None:     # (a method: delivered on this object's thread)
        callback(*args)


def wait_for_all_workers(msecs: int = -1) -> bool:
    """Block until no Worker has a job running or queued (or ``msecs`` passed for one of them);
    True when none has. A Worker whose Qt object is already deleted has no thread left."""
    idle = True
    for worker in list(_LIVE):
        try:
            idle = worker.wait(msecs) and idle
        except RuntimeError:      # deleted with its Qt parent; its pool waited then
            pass
    return idle
