"""When two project values are the same as a file keeps them: arrays exactly (dtype and shape
included, NaN equal to NaN), attr values with a tuple equal to a list. The model's ``__eq__``
(project.py) and the tests that compare projects read these."""
from __future__ import annotations

import numpy as np

__all__ = ["arrays_equal", "dicts_of_arrays_equal", "values_equal", "attrs_equal"]


def arrays_equal(a, b) -> bool:
    """Exact equality of two arrays, dtype and shape included; NaNs equal NaNs."""
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")


def dicts_of_arrays_equal(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(arrays_equal(a[k], b[k]) for k in a)


def values_equal(x, y) -> bool:
    """Equality of attr values as a file keeps them: arrays exactly, a tuple equal to a list."""
    if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
        return isinstance(x, np.ndarray) and isinstance(y, np.ndarray) and arrays_equal(x, y)
    if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)):
        return len(x) == len(y) and all(values_equal(a, b) for a, b in zip(x, y))
    if isinstance(x, dict) and isinstance(y, dict):
        return attrs_equal(x, y)
    if type(x) is not type(y):
        return False
    if isinstance(x, float) and x != x and y != y:
        return True
    return x == y


def attrs_equal(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(values_equal(a[k], b[k]) for k in a)
