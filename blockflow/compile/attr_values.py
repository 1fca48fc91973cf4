"""What a compile keeps of attr values: a hashable key for attrs dicts that check alike (so equal
dicts are checked once and share one checked dict), and read-only views of the arrays it keeps."""
from __future__ import annotations

import numpy as np

__all__ = ["attrs_key", "read_only"]

_ATOMS = frozenset({str, int, bool, type(None)})


def attrs_key(attrs: dict):
    """A hashable stand-in for an attrs dict of plain values (what a project file holds), equal
    only for dicts that validate alike: types are kept (1, 1.0 and True are equal in Python) and
    floats go by their repr (0.0 and -0.0 differ, a NaN equals itself). None for anything else
    (arrays, numpy scalars, dicts), which is then checked on its own."""
    if not attrs:
        return ()
    parts = []
    for name, value in attrs.items():
        v = _plain(value)
        if v is None:
            return None
        parts.append((name, v))
    return tuple(parts)


def _plain(value, depth=0):
    t = type(value)
    if t in _ATOMS:
        return t, value
    if t is float:
        return t, repr(value)
    if (t is list or t is tuple) and depth < 4:
        items = tuple(_plain(v, depth + 1) for v in value)
        return None if None in items else (t, items)
    return None


def read_only(a):
    """A view of a project's array that a run cannot write through (results share memory)."""
    if isinstance(a, np.ndarray) and a.flags.writeable:
        a = a.view()
        a.flags.writeable = False
    return a
