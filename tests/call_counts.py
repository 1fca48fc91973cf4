"""Counting the calls of a function, for tests of work that a hostile input once made grow faster
than its size (quadratic, exponential, or done again and again).

A wall-clock bound on such work fails whenever the machine is busy, and a loose one misses a
slow regression; the number of calls of the function whose repetition was the bug is the same on
any machine, so its exact value (or its growth between two sizes) is what these tests assert.
"""
from __future__ import annotations

import sys


class TooMuchWork(AssertionError):
    """Raised inside the counted call once it has done more than it may."""


class Calls:
    """How many times ``owner.name`` was called through that attribute since it was wrapped.
    Past ``most`` calls the next one raises TooMuchWork, so that a regression that would run for
    minutes (or for ever: an exponential count) fails at once."""

    def __init__(self, monkeypatch, owner, name: str, most: int | None = None):
        self.n = 0
        real = getattr(owner, name)

        def counting(*args, **kwargs):
            self.n += 1
            if most is not None and self.n > most:
                raise TooMuchWork(f"{name} called more than {most:,} times")
            return real(*args, **kwargs)

        # a staticmethod looked up on its class is a plain function: wrapped, it would become a
        # method and get the instance as its first argument
        if isinstance(owner, type) and isinstance(owner.__dict__.get(name), staticmethod):
            counting = staticmethod(counting)
        monkeypatch.setattr(owner, name, counting)

    def __repr__(self) -> str:
        return f"Calls({self.n})"


def lines_run(fn, folder: str, most: int) -> int:
    """How many lines of Python in files under ``folder`` ran while ``fn()`` ran on this thread.

    What a loop in Python costs, counted: a window looped over entry by entry, a list searched
    once per item. Past ``most`` lines the call is stopped with TooMuchWork, so that a regression
    that would run for minutes fails at once.
    """
    count = 0

    def local(frame, event, arg):
        nonlocal count
        if event == "line":
            count += 1
            if count > most:
                raise TooMuchWork(f"more than {most:,} lines run under {folder}")
        return local

    def calls(frame, event, arg):
        return local if frame.f_code.co_filename.startswith(folder) else None

    previous = sys.gettrace()
    sys.settrace(calls)
    try:
        fn()
    finally:
        sys.settrace(previous)
    return count
