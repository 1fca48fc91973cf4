"""Allocation limits: every array a block makes is checked before it is made.

Part of the block declaration API; blocks import it through :mod:`blockflow.spec`.
"""
from __future__ import annotations

import contextvars

import numpy as np

#: the largest array one block may make (an output or an intermediate: a padded copy, a
#: convolution's window matrix); larger ones are refused before anything is allocated
MAX_TENSOR_BYTES = 4 * 1024 ** 3


class AllocationError(ValueError):
    """An array a block would make is over the per-tensor limit or the run's memory budget.

    ``what`` names the array ("output 'y'", "padded input"), ``shape`` and ``dtype`` its type,
    ``nbytes`` its size; the message says which limit it passes."""

    def __init__(self, message: str, what: str = "", shape=(), dtype=None, nbytes: int = 0):
        super().__init__(message)
        self.what, self.shape, self.dtype, self.nbytes = what, tuple(shape), dtype, nbytes


# The runtime installs a guard (an object with ``reserve(nbytes, shape, dtype, what)``) for the
# duration of a run, to add a run-wide budget; outside a run only the per-tensor limit applies.
allocation_guard: contextvars.ContextVar = contextvars.ContextVar("blockflow_allocation_guard",
                                                                  default=None)


def _gib(n: int) -> str:
    return f"{n / 1024 ** 3:,.1f} GiB" if n >= 1024 ** 3 else f"{n / 1024 ** 2:,.1f} MiB"


def reserve(shape, dtype, what: str = "an intermediate array") -> int:
    """Say that the calling block is about to make an array of ``shape`` and ``dtype``.

    Blocks call this before any allocation whose size the inputs or attrs control and that is not
    one of their outputs (the runtime checks those): a padded copy, a window matrix, a one-hot.
    Raises :class:`AllocationError` when it is over :data:`MAX_TENSOR_BYTES` or over what is
    left of the run's memory budget; returns the size in bytes. Arrays announced during one
    block's call add up, except that one announced again under the same ``what`` replaces the
    earlier one (announce the pieces a loop makes and drops under one name).
    """
    dt = np.dtype(dtype)
    n = 1
    for d in shape:
        n *= max(int(d), 0)
    nbytes = n * dt.itemsize
    if nbytes > MAX_TENSOR_BYTES:
        raise AllocationError(f"{what} would be {dt.name}{list(int(d) for d in shape)} ({_gib(nbytes)}); "
                              f"the limit for one array is {_gib(MAX_TENSOR_BYTES)}",
                              what, shape, dt, nbytes)
    guard = allocation_guard.get()
    if guard is not None:
        guard.reserve(nbytes, tuple(int(d) for d in shape), dt, what)
    return nbytes


