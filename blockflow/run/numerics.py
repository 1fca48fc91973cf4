"""Whether arrays are finite, and how a non-finite one is described: the runtime's NaN/Inf check
(run/runtime.py) and the trainer's check of each update (run/training.py).
Must not import PySide6 or the block library."""
from __future__ import annotations

import math

import numpy as np

__all__ = ["all_finite", "all_finite_many", "ignore_all_state", "ignoring_fp_errors", "what_is_not_finite"]

# numpy 2 keeps its error state in a context variable: setting it to an "ignore everything" state
# made before costs 0.5 us, where np.errstate builds a state at every entry (2.2 us warm, 6 us in a
# cold run); numpy 1.x has no such variable and gets np.errstate (tests/test_runtime_fastpath.py
# checks both).
try:
    from numpy._core._multiarray_umath import _make_extobj
    from numpy._core._ufunc_config import _extobj_contextvar as ERRSTATE
except ImportError:
    ERRSTATE = _make_extobj = None

# (a state, it with every error ignored), the last pair ignore_all_state made; one tuple, so a
# thread reads a pair another thread wrote whole
_IGNORING = (None, None)


# The test is a dot product of the values with themselves: one BLAS pass that reads the array
# and writes nothing, so 1.5x faster than np.isfinite(v).all() (13 against 20 us on 200k float32)
# and 1.7x faster than a sum even on 256 values. A NaN or an Inf anywhere makes it NaN or +Inf;
# when it is not finite, finite values may have overflowed (squares over ~1e19 in float32), so
# np.isfinite decides, its byte per element written in pieces of _CHUNK into one small buffer (on
# a 512 MiB result a whole mask was 128 MiB more at the run's peak).
BLAS_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
FLOAT_SCALARS = frozenset((float, np.float32, np.float64))   # a loss: full reductions give scalars
#: np.dot without its __array_function__ dispatch (a Python call each time, ~0.2 us warm and
#: more right after a large step); the same C function
DOT = getattr(np.dot, "_implementation", np.dot)
_CHUNK = 1 << 18


def all_finite(v) -> bool:
    """Whether every element of a float array is finite (anything else is)."""
    if type(v) is not np.ndarray:
        if isinstance(v, (float, np.floating)):  # a loss: numpy's reductions return scalars
            return math.isfinite(v)
        v = np.asarray(v)
    dtype = v.dtype
    if dtype in BLAS_DTYPES and (v.flags.c_contiguous or v.flags.f_contiguous):
        flat = v.ravel(order="K")  # a view: no copy
        if math.isfinite(DOT(flat, flat)):
            return True
        return _all_finite_in_pieces(flat)
    if dtype.kind not in "fc":
        return True
    # A sum is one read-only pass; only when it is not finite do we look closer (it may overflow).
    # Callers silence numpy's overflow warnings around it.
    if math.isfinite(float(abs(np.add.reduce(v, axis=None)))):
        return True
    if dtype.kind == "f" and (v.flags.c_contiguous or v.flags.f_contiguous):
        return _all_finite_in_pieces(v.ravel(order="K"))
    return bool(np.isfinite(v).all())


def all_finite_many(*groups) -> bool:
    """Whether every array in the groups (sequences of arrays) is finite: all_finite's test in
    one loop, the common case (a contiguous float32/float64 array) without a call per array."""
    dot, isfinite, blas = DOT, math.isfinite, BLAS_DTYPES
    for group in groups:
        for v in group:
            if type(v) is np.ndarray and v.dtype in blas and v.flags.c_contiguous:
                flat = v.ravel()
                if isfinite(dot(flat, flat)):
                    continue
            if not all_finite(v):
                return False
    return True


def finite_fast(v, _dot=DOT, _isfinite=math.isfinite, _blas=BLAS_DTYPES) -> bool:
    """all_finite, with all_finite_many's inline test of the common case (a C-ordered
    float32/float64 array) for a caller that tests arrays one at a time (packer.py)."""
    if type(v) is np.ndarray and v.dtype in _blas and v.flags.c_contiguous:
        flat = v.ravel()
        if _isfinite(_dot(flat, flat)):
            return True
    elif type(v) in FLOAT_SCALARS:
        return _isfinite(v)
    return all_finite(v)


def ignore_all_state(_get=ERRSTATE.get if ERRSTATE is not None else None):
    """The state ``np.errstate(all="ignore")`` sets (numpy 2): the current one with its error
    modes set to ignore. The buffer size (it decides how numpy sums a cast reduction, np.mean of
    float16, so the bits) and the error callback stay the caller's: a state made at import kept
    the import's. Made again only when the caller's state is not the last one's (~0.1 us more
    than a state made once)."""
    global _IGNORING
    made_from, made = _IGNORING
    current = _get()
    if current is made_from or current is made:     # already ignoring: the same state again
        return made
    made = _make_extobj(all="ignore")               # from the current state
    _IGNORING = (current, made)
    return made


class ignoring_fp_errors:
    """``with ignoring_fp_errors():`` numpy's error state "ignore everything" inside, as
    ``np.errstate(all="ignore")`` gives it, for less: the state is made once per state it is made
    from (ignore_all_state)."""

    __slots__ = ("_token", "_errstate")

    def __enter__(self):
        if ERRSTATE is not None:
            self._token = ERRSTATE.set(ignore_all_state())
        else:
            self._errstate = np.errstate(all="ignore")
            self._errstate.__enter__()
        return self

    def __exit__(self, *exc):
        if ERRSTATE is not None:
            ERRSTATE.reset(self._token)
        else:
            self._errstate.__exit__(*exc)


def _all_finite_in_pieces(flat) -> bool:
    mask = np.empty(min(_CHUNK, flat.size), dtype=bool)
    for start in range(0, flat.size, _CHUNK):
        part = flat[start:start + _CHUNK]
        if not np.isfinite(part, out=mask[:part.size]).all():
            return False
    return True


def what_is_not_finite(v) -> str:
    """'NaN (k of n values)' and/or 'Inf (...)' for an array that is not finite."""
    v = np.asarray(v)
    nan = int(np.isnan(v).sum())
    inf = int(np.isinf(v).sum())
    bits = []
    if nan:
        bits.append(f"NaN ({nan} of {v.size} values)")
    if inf:
        bits.append(f"Inf ({inf} of {v.size} values)")
    return " and ".join(bits) or "a non-finite value"
