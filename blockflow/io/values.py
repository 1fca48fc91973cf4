"""Free JSON values (attrs and metadata): checked in place when read, with array objects
becoming ndarrays where arrays are allowed; written back with numpy arrays (and numpy scalars,
non-finite floats) as array objects.
"""
from __future__ import annotations

import math
import sys

import numpy as np

from blockflow.io import rules
from blockflow.io.arrays import decode_array_at, encode_array_at
from blockflow.io.checks import (BadConstant, DupDict, Invalid, check_mapping, check_text, describe, key_path,
                                 natural_key)
from blockflow.io.rules import ARRAY_KEYSETS

# --------------------------------------------------------------------------------------------
# Free JSON values (attrs and metadata)


def decode_value(v, where: str, arrays: bool, depth: int = 0):
    """Check a loaded JSON value; with ``arrays``, array objects become ndarrays.

    Lists and objects are checked in place and kept (array objects in them replaced), not
    copied: the parsed document is the model, so loading never holds two copies of a value.
    """
    if plain_scalar(v, where):
        return v
    if isinstance(v, BadConstant):
        raise Invalid(where, f"{v.token} is not valid JSON (write a non-finite attr value as "
                              "an array object)")
    if depth >= rules.MAX_DEPTH:
        raise Invalid(where, f"nested more than {rules.MAX_DEPTH} levels deep")
    if isinstance(v, list):
        for i, x in enumerate(v):
            if type(x) in CONTAINERS or not plain_scalar(x, where, i):
                y = decode_value(x, f"{where}[{i}]", arrays, depth + 1)
                if y is not x:
                    v[i] = y
        return v
    check_mapping(v, where, "an object")
    if arrays and len(v) == 3 and frozenset(v) in ARRAY_KEYSETS:
        return decode_array_at(v, where)
    for k, x in v.items():
        if type(x) in CONTAINERS or not plain_scalar(x, where, k):
            y = decode_value(x, key_path(where, k), arrays, depth + 1)
            if y is not x:
                v[k] = y   # replacing a value while iterating is allowed (the keys stay)
    return v


CONTAINERS = (list, dict, DupDict)


def plain_scalar(x, where: str, key=None) -> bool:
    """True for a valid JSON scalar (a UTF-8 string, a finite number, true, false, null); False
    for anything else; raises for an invalid scalar. ``key`` (an index or a member name inside
    ``where``) is only formatted into a path when there is a problem to report."""
    t = type(x)
    if t is str:
        if not x.isascii() or "\x00" in x:
            check_text(x, _sub(where, key), "a string")
        return True
    if t is float:
        if not math.isfinite(x):
            raise Invalid(_sub(where, key), "a number is out of range")
        return True
    return t is int or t is bool or x is None


def _sub(where: str, key) -> str:
    if key is None:
        return where
    return f"{where}[{key}]" if type(key) is int else key_path(where, key)


def _too_long(v: int) -> bool:
    """Whether ``v`` has more digits than Python turns into text (or reads back)."""
    try:
        str(v)
    except ValueError:
        return True
    return False


def encode_value(v, where: str, arrays: bool, depth: int = 0):
    """A Python value as JSON; with ``arrays``, numpy arrays (and numpy scalars, non-finite
    floats) become array objects; without, only plain JSON values are allowed."""
    if isinstance(v, (np.ndarray, np.generic)):  # before float: np.float64 is a float
        if arrays:
            return encode_array_at(v, where)
        what = describe(v) if isinstance(v, np.ndarray) else f"a numpy {type(v).__name__}"
        raise Invalid(where, f"{what} cannot be saved here: only plain JSON values")
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, str):
        return check_text(v, where, "a string")
    if isinstance(v, int):
        if v.bit_length() > rules.PLAIN_INT_BITS and _too_long(v):
            raise Invalid(where, f"an integer of more than {sys.get_int_max_str_digits():,} digits cannot be "
                                 f"written: JSON readers refuse it (Python's limit for turning an int into text)")
        return int(v)
    if isinstance(v, float):
        if math.isfinite(v):
            return float(v)
        if arrays:  # JSON has no NaN/Infinity: keep the value as a 0-d float64 array
            return encode_array_at(np.float64(v), where)
        raise Invalid(where, f"{v!r} cannot be written in JSON")
    if depth >= rules.MAX_DEPTH:
        raise Invalid(where, f"nested more than {rules.MAX_DEPTH} levels deep")
    if isinstance(v, (list, tuple)):
        return [encode_value(x, f"{where}[{i}]", arrays, depth + 1) for i, x in enumerate(v)]
    if isinstance(v, dict):
        for k in v:
            if not isinstance(k, str):
                raise Invalid(where, f"object keys must be strings, found {describe(k)}")
            check_text(k, key_path(where, k), "a key")
        if arrays and frozenset(v) in ARRAY_KEYSETS:
            raise Invalid(where, "a plain object with exactly the keys of an array object "
                                  f"({', '.join(sorted(v))}) would be read back as an array")
        keys = sorted(v, key=natural_key) if arrays else list(v)
        return {k: encode_value(v[k], key_path(where, k), arrays, depth + 1) for k in keys}
    raise Invalid(where, f"{describe(v)} cannot be saved (only JSON values and numpy arrays)")
