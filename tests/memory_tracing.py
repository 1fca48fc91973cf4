"""Measuring what a call allocates with tracemalloc, safely in a suite that also runs the editor.

On CPython 3.11, starting or stopping tracemalloc while another thread enters Python (a Worker
thread of an editor a GUI test left behind, starting its next job) can free the tracer's tables
under that thread: a segmentation fault with no Python frame (CPython gh-128679; seen in CI).
So every use goes through ``memory_traced``, which waits for every Worker to be idle right before
it starts and right before it stops tracing; tests/test_memory_tracing.py checks no test starts
tracemalloc any other way.
"""
from __future__ import annotations

import sys
import tracemalloc
from contextlib import contextmanager

__all__ = ["memory_traced", "traced_peak"]


def _no_worker_running() -> None:
    worker = sys.modules.get("blockflow.gui.common.worker")   # no editor imported: no Workers
    if worker is not None:
        worker.wait_for_all_workers()


@contextmanager
def memory_traced():
    """Trace allocations in the block (read them with ``tracemalloc.get_traced_memory()``)."""
    _no_worker_running()
    tracemalloc.start()
    try:
        yield
    finally:
        _no_worker_running()
        tracemalloc.stop()


def traced_peak(call):
    """``call()``'s result and the peak of the bytes traced while it ran."""
    with memory_traced():
        tracemalloc.reset_peak()
        result = call()
        return result, tracemalloc.get_traced_memory()[1]
