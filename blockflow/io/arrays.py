"""The array codec: an array object of the file (``{"dtype", "shape", "data"}`` for small
arrays, ``{"dtype", "shape", "base64"}`` of the raw little-endian bytes for large ones) to an
ndarray and back, checked element by element without converting, and without a second copy of a
large array.
"""
from __future__ import annotations

import re

import numpy as np

from blockflow.errors import ProjectFileError
from blockflow.io import rules
from blockflow.io.checks import ArrayJSON, check_object, describe, Invalid, key_path, short_text
from blockflow.io.rules import ARRAY_KEYS, EXACT_INT, NONFINITE
from blockflow.spec import shape_text

def _check_shape(shape, where: str) -> tuple[tuple, int]:
    if not isinstance(shape, (list, tuple)):
        raise Invalid(where, f"a shape must be a list of non-negative integers, found "
                              f"{describe(shape)}")
    if len(shape) > rules.MAX_NDIM:
        raise Invalid(where, f"{len(shape)} dimensions; the limit is {rules.MAX_NDIM}")
    size = 1
    for i, d in enumerate(shape):
        if type(d) is not int or d < 0:
            raise Invalid(f"{where}[{i}]", f"a dimension must be a non-negative integer, found "
                                            f"{describe(d)}")
        size *= d
    if size > rules.MAX_ARRAY_ELEMENTS:
        raise Invalid(where, f"the array has {size:,} elements; the limit is "
                              f"{rules.MAX_ARRAY_ELEMENTS:,}")
    return tuple(shape), size


# --------------------------------------------------------------------------------------------
# Arrays


def _le(dtype: np.dtype) -> np.dtype:
    return dtype.newbyteorder("<")


def _data_to_array(data: list, dtype_name: str, shape: tuple, where: str) -> np.ndarray:
    """Validate the entries of a ``"data"`` list and build the array."""
    dtype = np.dtype(dtype_name)
    kind = dtype.kind
    if kind == "b":
        for i, x in enumerate(data):
            if not isinstance(x, bool):
                raise Invalid(f"{where}[{i}]", f"bool data must be true or false, found "
                                                f"{describe(x)}")
        return np.array(data, dtype=bool).reshape(shape)
    if kind in "iu":
        info = np.iinfo(dtype)
        for i, x in enumerate(data):
            if type(x) is not int:
                raise Invalid(f"{where}[{i}]", f"{dtype_name} data must be integers, found "
                                                f"{describe(x)}")
            if not info.min <= x <= info.max:
                raise Invalid(f"{where}[{i}]", f"{x} does not fit in {dtype_name} "
                                                f"({info.min}..{info.max})")
        return np.array(data, dtype=dtype).reshape(shape)
    # Checked element by element without converting: the only arrays made are the float64 one
    # numpy builds from the list and, for narrower dtypes, the result.
    special = []
    for i, x in enumerate(data):
        t = type(x)
        if t is float:
            if x - x == 0.0:   # finite (inf - inf and nan - nan are nan)
                continue
        elif t is int:
            if -EXACT_INT <= x <= EXACT_INT:
                continue
            try:
                float(x)
                continue
            except OverflowError:
                pass
        elif t is str and x in NONFINITE:
            special.append(i)
            continue
        else:
            raise Invalid(f"{where}[{i}]", f"{dtype_name} data must be numbers or \"NaN\", "
                                            f"\"Infinity\", \"-Infinity\", found {describe(x)}")
        raise Invalid(f"{where}[{i}]", f"{describe(x)} is out of range "
                                        "(write \"Infinity\" for infinity)")
    if special:   # a copy, not the caller's list: the writer keeps its strings
        data = list(data)
        for i in special:
            data[i] = NONFINITE[data[i]]
    wide = np.array(data, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        arr = wide.astype(dtype, copy=False)
    if arr is not wide:
        bad = np.flatnonzero(np.isinf(arr) & np.isfinite(wide))
        if bad.size:
            i = int(bad[0])
            raise Invalid(f"{where}[{i}]", f"{float(data[i])!r} is out of range for "
                                            f"{dtype_name}")
    return arr.reshape(shape)


def decode_array_at(obj, where: str) -> np.ndarray:
    what = "an array object"
    if not isinstance(obj, dict):
        raise Invalid(where, f"expected an array object {{\"dtype\", \"shape\", \"data\" or "
                              f"\"base64\"}}, found {describe(obj)}")
    check_object(obj, where, what, ARRAY_KEYS, ("dtype", "shape"))
    if ("data" in obj) == ("base64" in obj):
        raise Invalid(where, "an array object needs exactly one of \"data\" and \"base64\"")
    name = obj["dtype"]
    if not isinstance(name, str) or name not in rules.DTYPES:
        shown = short_text(name) if isinstance(name, str) else describe(name)
        raise Invalid(key_path(where, "dtype"), f"unsupported dtype {shown} (allowed: "
                                             f"{', '.join(rules.DTYPES)})")
    shape, size = _check_shape(obj["shape"], key_path(where, "shape"))
    dtype = np.dtype(name)
    if "data" in obj:
        data, dw = obj["data"], key_path(where, "data")
        if not isinstance(data, list):
            raise Invalid(dw, f"data must be a flat list of values, found {describe(data)}")
        if len(data) != size:
            raise Invalid(dw, f"{len(data)} values, but shape {shape_text(shape)} needs {size}")
        return _data_to_array(data, name, shape, dw)
    text, bw = obj["base64"], key_path(where, "base64")
    if not isinstance(text, str):
        raise Invalid(bw, f"base64 must be a string, found {describe(text)}")
    raw = _base64_bytes(text, size * dtype.itemsize, f"{name} {shape_text(shape)}", bw)
    if dtype.kind == "b":
        if size and raw.max() > 1:
            raise Invalid(bw, "bool data must be bytes 0 or 1")
    return raw.view(_le(dtype)).astype(dtype, copy=False).reshape(shape)


_BASE64_RE = re.compile(r"[A-Za-z0-9+/]*=*")
#: base64 characters decoded at a time (a multiple of 4)
_BASE64_CHUNK = 1 << 20


def _base64_bytes(text: str, need: int, what: str, where: str) -> np.ndarray:
    """The bytes ``text`` encodes, as a writable uint8 array, decoded piece by piece into the
    one array of ``need`` bytes checked beforehand (the text's length fixes the decoded size);
    the rules of ``binascii.a2b_base64(text, strict_mode=True)``."""
    import binascii   # here, as base64 below: only a file's large arrays are base64 (1 ms of a start)

    end = len(text.rstrip("=")) if text.endswith("=") else len(text)
    whole = end // 4 * 4          # characters in complete groups of four, before any padding
    try:   # the rest, after a complete group like the one before it: the same rules apply
        tail = text[whole:]
        if not tail:
            tail = b""
        elif whole:
            tail = binascii.a2b_base64("AAAA" + tail, strict_mode=True)[3:]
        else:
            tail = binascii.a2b_base64(tail, strict_mode=True)
    except (binascii.Error, ValueError) as exc:
        raise Invalid(where, f"not valid base64 ({exc})") from None
    if text.find("=", 0, whole) >= 0:   # padding, then more data
        raise Invalid(where, "not valid base64 (Excess data after padding)")
    got = whole // 4 * 3 + len(tail)
    if got != need:
        if not text.isascii() or _BASE64_RE.fullmatch(text) is None:   # that, first
            raise Invalid(where, "not valid base64 (only A-Z a-z 0-9 + / and '=' padding at "
                                  "the end are allowed)")
        raise Invalid(where, f"base64 decodes to {got:,} bytes, but {what} needs {need:,}")
    out = np.empty(need, np.uint8)
    try:
        for start in range(0, whole, _BASE64_CHUNK):
            piece = binascii.a2b_base64(text[start:min(start + _BASE64_CHUNK, whole)],
                                        strict_mode=True)
            out[start // 4 * 3:start // 4 * 3 + len(piece)] = np.frombuffer(piece, np.uint8)
    except (binascii.Error, ValueError) as exc:
        raise Invalid(where, f"not valid base64 ({exc})") from None
    out[whole // 4 * 3:] = np.frombuffer(tail, np.uint8)
    return out


def _float_list(flat: np.ndarray) -> list:
    """Shortest decimals that read back to the same values; non-finite ones as strings."""
    out = []
    f64 = flat.dtype.itemsize == 8
    for x in flat:
        if np.isnan(x):
            out.append("NaN")
        elif np.isinf(x):
            out.append("Infinity" if x > 0 else "-Infinity")
        else:
            out.append(float(x) if f64 else float(str(x)))
    return out


def encode_array_at(value, where: str) -> dict:
    try:
        arr = np.asarray(value)
    except Exception as exc:  # ragged lists and the like
        raise Invalid(where, f"cannot be turned into an array: {exc}") from None
    name = arr.dtype.name
    if name not in rules.DTYPES:
        raise Invalid(where, f"an array of dtype {arr.dtype} cannot be saved (allowed: "
                              f"{', '.join(rules.DTYPES)})")
    if arr.ndim > rules.MAX_NDIM:
        raise Invalid(where, f"{arr.ndim} dimensions; the limit is {rules.MAX_NDIM}")
    if arr.size > rules.MAX_ARRAY_ELEMENTS:
        raise Invalid(where, f"the array has {arr.size:,} elements; the limit is "
                              f"{rules.MAX_ARRAY_ELEMENTS:,}")
    le = np.ascontiguousarray(arr, dtype=_le(arr.dtype))
    if le.dtype.kind == "b":  # normalise bool bytes to 0/1
        le = le.view(np.uint8) != 0
    shape = [int(d) for d in arr.shape]
    if arr.size <= rules.INLINE_DATA_MAX:
        flat = le.reshape(-1)
        data = _float_list(flat) if arr.dtype.kind == "f" else flat.tolist()
        # Only if it reads back bit for bit (NaN payloads and signs do not): else base64.
        try:
            back = _data_to_array(data, name, tuple(shape), where)
        except Invalid:
            back = None
        if back is not None and back.astype(_le(back.dtype)).tobytes() == le.tobytes():
            return ArrayJSON(dtype=name, shape=shape, data=data)
    import base64

    return ArrayJSON(dtype=name, shape=shape,
                      base64=base64.b64encode(le.tobytes()).decode("ascii"))


def encode_array(arr) -> dict:
    """The array object of ``arr``: ``{"dtype", "shape", "data"}`` for at most
    :data:`INLINE_DATA_MAX` elements that read back bit-exactly, else ``{"dtype", "shape",
    "base64"}`` of the raw little-endian bytes. Raises ProjectFileError for an unsupported dtype.
    """
    try:
        return dict(encode_array_at(arr, ""))
    except Invalid as exc:
        raise ProjectFileError("<array>", exc.where, exc.problem) from None


def decode_array(obj, where: str = "") -> np.ndarray:
    """The ndarray of an array object; ``where`` (a JSON path) is used in error messages.

    Raises ProjectFileError for anything that is not a valid array object.
    """
    try:
        return decode_array_at(obj, where)
    except Invalid as exc:
        raise ProjectFileError("<array>", exc.where, exc.problem) from None
