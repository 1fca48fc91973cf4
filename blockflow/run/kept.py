"""Arrays a plan keeps across runs (lower.REUSE_BUFFERS) and the in-place gradient sum the
generated code calls (lower.ADD_IN_PLACE).

Must not import PySide6 or the block library.
"""
from __future__ import annotations

import numpy as np

__all__ = ["KeptArrays", "add_into", "keep_array"]


_HUGE = 2 << 20


class KeptArrays(list):
    """The arrays a plan keeps for its runs to write into (a plain list of Nones keeps none)."""


def keep_array(a, into):
    """An array like ``a`` for later runs to write into when ``into`` keeps arrays (else None),
    in memory of its own (an anonymous map):
    kept arrays taken from malloc's heap would change where every other array of the process
    falls, and which of them glibc gives back to the kernel and faults in again. Aligned to 2 MB
    and advised as huge pages where the system has them, as numpy does for its large arrays
    (with 4 kB pages the same softmax ran 1.2-1.5x slower: TLB misses)."""
    if type(into) is not KeptArrays or type(a) is not np.ndarray:
        return None
    import mmap   # here: a run that keeps no array (a command's one run) need not import it

    m = mmap.mmap(-1, a.nbytes + _HUGE)
    if hasattr(mmap, "MADV_HUGEPAGE"):
        try:
            m.madvise(mmap.MADV_HUGEPAGE)
        except OSError:
            pass
    start = np.frombuffer(m, np.uint8, count=1).ctypes.data
    offset = -start % _HUGE
    flat = np.frombuffer(m, dtype=a.dtype, count=a.size, offset=offset)
    # In a's own layout: a ufunc of a transposed view gives an F-ordered result, and a Sum after
    # it adds in memory order, so a C-ordered kept array would change the sum's last bits.
    order = sorted(range(a.ndim), key=lambda i: -abs(a.strides[i]))
    kept = flat.reshape([a.shape[i] for i in order]).transpose(np.argsort(order))
    return kept


def add_into(a, b):
    """``a + b``, into ``a``'s array when that gives the same array (same shape and dtype)."""
    if type(a) is np.ndarray and type(b) is np.ndarray and a.shape == b.shape and a.dtype == b.dtype \
            and a.flags.writeable:
        return np.add(a, b, out=a)
    return a + b
