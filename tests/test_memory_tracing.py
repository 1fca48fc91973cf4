"""The suite's one way to trace memory (memory_tracing.py) waits for the editor's Worker threads:
tracemalloc started or stopped while one enters Python crashes CPython 3.11 (gh-128679)."""
from __future__ import annotations

import re
import threading
import time
import tracemalloc
from pathlib import Path

from memory_tracing import memory_traced, traced_peak

TESTS = Path(__file__).resolve().parent


def test_no_test_starts_or_stops_tracemalloc_but_through_the_kit():
    bare = re.compile(r"tracemalloc\.(start|stop)\(|from\s+tracemalloc\s+import|import\s+tracemalloc\s+as")
    found = [f"{path.relative_to(TESTS)}:{n}" for path in sorted(TESTS.rglob("*.py"))
             if path.name != "memory_tracing.py"
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if bare.search(line)]
    assert not found, f"use memory_tracing.memory_traced: {found}"


def test_tracing_starts_only_once_every_worker_job_has_returned(qapp):
    from blockflow.gui.common.worker import Worker

    worker = Worker()
    ended = threading.Event()
    worker.submit(lambda post: (time.sleep(0.3), ended.set()))
    with memory_traced():
        assert ended.is_set() and tracemalloc.is_tracing()
        worker.submit(lambda post: ended.clear())      # a job started inside the block...
    assert not ended.is_set()                            # ...had returned before it stopped
    assert not tracemalloc.is_tracing()


def test_a_traced_peak_counts_what_the_call_allocates():
    result, peak = traced_peak(lambda: bytearray(3 << 20))
    assert len(result) == 3 << 20 and 3 << 20 <= peak < 4 << 20


def test_workers_deleted_with_their_parent_or_alone_are_passed_over(qapp):
    """A Worker whose Qt object is gone (its pool with it: the pool waited for its job then)
    raises RuntimeError when asked; waiting for every Worker passes over it, and still waits
    for the live ones."""
    import shiboken6
    from PySide6.QtCore import QObject

    from blockflow.gui.common import worker as worker_module

    parent = QObject()
    orphaned, alone, live = (worker_module.Worker(parent), worker_module.Worker(),
                             worker_module.Worker())
    ended = threading.Event()
    orphaned.submit(lambda post: time.sleep(0.1))
    live.submit(lambda post: (time.sleep(0.2), ended.set()))
    shiboken6.delete(parent)
    shiboken6.delete(alone)
    assert not shiboken6.isValid(orphaned) and not shiboken6.isValid(alone)
    assert worker_module.wait_for_all_workers() and ended.is_set()
