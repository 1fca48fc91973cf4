"""Reading and writing project files (``*.bflow.json``).

The format is documented in docs/project-format.md and described by assets/bflow.schema.json.
In short: UTF-8 JSON, ``"format"`` and ``"version"`` first, then ``"metadata"`` and
``"pages"``; arrays are ``{"dtype", "shape", "data"}`` (small) or ``{"dtype", "shape",
"base64"}`` (large, raw little-endian bytes).

Guarantees:

* Loading never executes code: ``json`` only, base64 decoded with validation and turned into
  arrays with ``np.frombuffer``; no pickle, no eval, no imports driven by the file.
* A bad file raises exactly one :class:`~blockflow.errors.ProjectFileError` naming the file,
  the place in it (a JSON path like ``pages[0].nodes[3].attrs.shape``, or ``line L, column C``
  for JSON syntax errors) and the problem.
* Loading takes at most ``LOAD_FACTOR`` x the file's size + ``LOAD_ALLOWANCE_BYTES`` of memory,
  whatever the file holds: a file that could take more is refused before it is parsed (see
  "Reading: the memory a file may cost" below, and docs/limits.md).
* Output is deterministic and diff-friendly: ``dumps_project(loads_project(t)) == t`` for any
  ``t`` that ``dumps_project`` wrote, and ``loads_project(dumps_project(p)) == p``.
* Saving is atomic: temporary file in the same directory, flush, fsync, ``os.replace``, fsync
  of the directory. On failure the old file is untouched and the temporary file removed. Its side
  files (the temporary, the ``.bak`` backup) never follow a link or replace a file blockflow did
  not write (blockflow.ownfiles).
* Whatever ``dumps_project`` writes, ``loads_project`` reads: the writer checks the same rules
  as the reader and refuses (with a ProjectFileError) a project that would not load back.

This is a core module: it imports numpy, json (and the standard library), blockflow.project,
blockflow.errors and blockflow.ownfiles (the side files of a save: its temporary, the backup)
only.
"""
from __future__ import annotations

import base64
import binascii
import difflib
import errno
import json
import math
import os
import re
import stat
import sys
import time
from dataclasses import dataclass

import numpy as np

from blockflow import ownfiles
from blockflow.errors import ProjectFileError
from blockflow.project import Edge, Node, Page, Project, name_problem, page_name_problem, text_problem, valid_node_id

__all__ = [
    "FORMAT", "VERSION", "SUFFIX", "MIGRATIONS", "DTYPES", "INLINE_DATA_MAX", "MAX_FILE_BYTES",
    "MAX_ARRAY_ELEMENTS", "MAX_NODES_PER_PAGE", "MAX_DEPTH", "MAX_NDIM", "LOAD_FACTOR",
    "LOAD_ALLOWANCE_BYTES",
    "dumps_project", "loads_project", "load_project", "save_project", "SaveResult", "backup_path",
    "BACKUP_SUFFIX",
    "encode_array", "decode_array",
]

#: The value of the top-level ``"format"`` key.
FORMAT = "blockflow-project"
#: The format version this blockflow writes, and the newest one it reads.
VERSION = 1
#: The file suffix of project files.
SUFFIX = ".bflow.json"

#: ``{old_version: upgrade}``: each function takes the decoded JSON document (plain dicts and
#: lists) of format ``old_version`` and returns it in format ``old_version + 1``. The loader
#: applies them in a loop until the document is at :data:`VERSION`, then validates it.
MIGRATIONS: dict = {}

#: The dtypes an array may have in a file.
DTYPES = ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool")
#: Arrays with at most this many elements are written as a ``"data"`` list, larger as base64.
INLINE_DATA_MAX = 256

# Limits: generous, but they turn a corrupt or hostile file into a clear error instead of
# exhausting memory. All are module globals so that tests (and embedders) may change them.
#: Largest file loaded (bytes; characters for a ``str`` given to loads_project): 512 MiB.
MAX_FILE_BYTES = 512 * 1024 * 1024
#: Most elements in one array: 100 million.
MAX_ARRAY_ELEMENTS = 100_000_000
#: Most nodes on one page.
MAX_NODES_PER_PAGE = 200_000
#: Deepest nesting of lists/objects inside one attr value or the metadata.
MAX_DEPTH = 64
#: Most dimensions of one array (numpy 1.x's own limit).
MAX_NDIM = 32
#: Loading a file takes at most LOAD_FACTOR times its size (bytes; characters for a ``str``) plus
#: LOAD_ALLOWANCE_BYTES of memory, whatever it holds: a file whose parsed form could take more
#: (millions of tiny lists, objects, strings or numbers) is refused before it is parsed.
LOAD_FACTOR = 24
LOAD_ALLOWANCE_BYTES = 16 * 1024 * 1024

# Width up to which an array object or a plain list/object value is written on one line.
_INLINE_WIDTH = 100

_PORT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[(?:0|[1-9][0-9]*)\])?")
_PLAIN_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DIGITS_RE = re.compile(r"([0-9]+)")
_NONFINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
# Integers up to this size convert to float64 without overflow (checked without converting).
_EXACT_INT = 2 ** 1000

_TOP_KEYS = ("format", "version", "metadata", "pages")
_PAGE_KEYS = ("name", "text", "loss", "metrics", "nodes", "edges", "feeds")
_NODE_KEYS = ("id", "block", "label", "position", "attrs", "inputs", "state")
_EDGE_KEYS = ("from", "to")
_ARRAY_KEYS = ("dtype", "shape", "data", "base64")
_ARRAY_KEYSETS = (frozenset({"dtype", "shape", "data"}), frozenset({"dtype", "shape", "base64"}))
# The position of a node that has none in the file (a tuple: every such node can share it).
_ORIGIN = (0.0, 0.0)


# --------------------------------------------------------------------------------------------
# Small helpers


class _Invalid(Exception):
    """Internal: a problem at a place; turned into a ProjectFileError naming the file."""

    def __init__(self, where: str, problem: str):
        super().__init__(where, problem)
        self.where, self.problem = where, problem


class _BadConstant:
    """What the JSON parser returns for NaN/Infinity tokens (not JSON): reported with a path."""

    def __init__(self, token: str):
        self.token = token


class _DupDict(dict):
    """A JSON object in which a key appeared more than once (``dup`` is the first such key)."""

    dup = ""


class _ArrayJSON(dict):
    """Marks an encoded array object so the formatter lays it out as one."""


def _object_pairs(pairs):
    d = dict(pairs)
    if len(d) != len(pairs):
        seen = set()
        for k, _ in pairs:
            if k in seen:
                break
            seen.add(k)
        d = _DupDict(d)
        d.dup = k
    return d


def _key(where: str, key) -> str:
    """The JSON path of ``key`` inside the object at ``where``."""
    key = str(key)
    if _PLAIN_KEY_RE.fullmatch(key):
        return f"{where}.{key}" if where else key
    return f"{where}[{json.dumps(key, ensure_ascii=False)}]"


def _short(s: str, n: int = 60) -> str:
    if len(s) > n:
        s = s[:n] + "…"
    return json.dumps(s, ensure_ascii=False)


def _describe(v) -> str:
    if isinstance(v, _BadConstant):
        return f"{v.token} (which is not valid JSON)"
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return f"the integer {v}" if abs(v) < 10 ** 30 else "a very large integer"
    if isinstance(v, float):
        return f"the number {v!r}"
    if isinstance(v, str):
        return f"the string {_short(v)}"
    if isinstance(v, list):
        return "a list"
    if isinstance(v, dict):
        return "an object"
    if isinstance(v, np.ndarray):
        return f"a numpy array of {v.dtype}"
    return f"a value of type {type(v).__name__}"


def _natural(s: str):
    """Sort key that puts ``Add_2`` before ``Add_10`` (ties broken by the plain string)."""
    parts = _DIGITS_RE.split(s)
    return [int(p) if i % 2 else p for i, p in enumerate(parts)], s


def _check_text(s, where: str, what: str) -> str:
    """``s`` must be a str that UTF-8 can encode (no lone surrogates)."""
    if not isinstance(s, str):
        raise _Invalid(where, f"{what} must be a string, found {_describe(s)}")
    if s.isascii() and "\x00" not in s:     # the common case, checked in C
        return s
    try:
        s.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise _Invalid(where, f"{what} contains a lone surrogate (U+{ord(s[exc.start]):04X}), "
                              "which cannot be written as UTF-8") from None
    problem = text_problem(s)
    if problem:
        raise _Invalid(where, f"{what} {problem}")
    return s


def _check_name(s, where: str, what: str) -> str:
    """``s`` must be text without control characters (a block, attr or state name)."""
    _check_text(s, where, what)
    problem = name_problem(s, what)
    if problem:
        raise _Invalid(where, problem)
    return s


def _check_object(obj, where: str, what: str, allowed: tuple, required: tuple = ()) -> dict:
    """``obj`` must be a JSON object with keys from ``allowed`` and all of ``required``."""
    if not isinstance(obj, dict):
        raise _Invalid(where, f"{what} must be an object, found {_describe(obj)}")
    if isinstance(obj, _DupDict):
        raise _Invalid(_key(where, obj.dup), f"the key '{obj.dup}' appears twice")
    for k in obj:
        if k not in allowed:
            hint = difflib.get_close_matches(k, allowed, n=1)
            did = f"; did you mean '{hint[0]}'?" if hint else ""
            raise _Invalid(_key(where, k), f"unknown key '{k}' in {what} "
                                           f"(allowed: {', '.join(allowed)}){did}")
    for k in required:
        if k not in obj:
            raise _Invalid(_key(where, k), f"missing: {what} needs a '{k}'")
    return obj


def _check_mapping(obj, where: str, what: str) -> dict:
    """A JSON object with free keys (attrs, inputs, state, feeds)."""
    if not isinstance(obj, dict):
        raise _Invalid(where, f"{what} must be an object, found {_describe(obj)}")
    if isinstance(obj, _DupDict):
        raise _Invalid(_key(where, obj.dup), f"the key '{obj.dup}' appears twice")
    for k in obj:
        if not isinstance(k, str):
            raise _Invalid(where, f"{what} keys must be strings, found {_describe(k)}")
        _check_text(k, _key(where, k), "a key")
    return obj


# --------------------------------------------------------------------------------------------
# Names shared by the reader and the writer


def _check_page_name(name, where: str, seen: dict) -> str:
    _check_text(name, where, "a page name")
    problem = page_name_problem(name)
    if problem:
        raise _Invalid(where, f"page name {_short(name)}: {problem}" if name else problem)
    if name in seen:
        raise _Invalid(where, f"duplicate page name {_short(name)} (also pages[{seen[name]}])")
    return name


def _check_node_id(node_id, where: str) -> str:
    if not isinstance(node_id, str):
        raise _Invalid(where, f"a node id must be a string, found {_describe(node_id)}")
    if not valid_node_id(node_id):
        raise _Invalid(where, f"{_short(node_id)} is not a valid node id (a letter or _, then "
                              "letters, digits, _ . -)")
    return node_id


def _check_port(port, where: str) -> str:
    if not isinstance(port, str):
        raise _Invalid(where, f"a port name must be a string, found {_describe(port)}")
    if not _PORT_RE.fullmatch(port):
        raise _Invalid(where, f"{_short(port)} is not a valid port name (like x, output or "
                              "inputs[2])")
    return port


def _check_endpoint(node: str, port: str, where: str, nodes, page: str) -> None:
    _check_node_id(node, where)
    _check_port(port, where)
    if node not in nodes:
        raise _Invalid(where, f"no node '{node}' on page '{page}' (a dangling edge)")


def _parse_endpoint(s, where: str, nodes, page: str) -> tuple[str, str]:
    if not isinstance(s, str):
        raise _Invalid(where, f"must be a string \"node:port\", found {_describe(s)}")
    node, sep, port = s.partition(":")
    if not sep or not node or not port:
        raise _Invalid(where, f"{_short(s)} is not of the form \"node:port\"")
    _check_endpoint(node, port, where, nodes, page)
    return node, port


def _check_metrics(metrics, where: str, nodes, page: str) -> list:
    if not isinstance(metrics, list):
        raise _Invalid(where, f"metrics must be a list of \"node\" or \"node:port\" strings, found "
                              f"{_describe(metrics)}")
    if len(metrics) > 1000:
        raise _Invalid(where, f"{len(metrics)} metrics; the limit is 1000")
    seen = set()
    for k, m in enumerate(metrics):
        _check_loss(m, f"{where}[{k}]", nodes, page, what="a metric")
        if m in seen:
            raise _Invalid(f"{where}[{k}]", f"{_short(m)} is listed twice")
        seen.add(m)
    return list(metrics)


def _check_loss(loss, where: str, nodes, page: str, what: str = "the loss") -> str:
    if not isinstance(loss, str):
        raise _Invalid(where, f"{what} must be {'null or ' if what == 'the loss' else ''}a string \"node\" "
                              f"or \"node:port\", found {_describe(loss)}")
    node, sep, port = loss.partition(":")
    if not node or (sep and not port):
        raise _Invalid(where, f"{_short(loss)} is not of the form \"node\" or \"node:port\"")
    _check_node_id(node, where)
    if sep:
        _check_port(port, where)
    if node not in nodes:
        raise _Invalid(where, f"{what} names no node on page '{page}': there is no '{node}'")
    return loss


def _check_shape(shape, where: str) -> tuple[tuple, int]:
    if not isinstance(shape, (list, tuple)):
        raise _Invalid(where, f"a shape must be a list of non-negative integers, found "
                              f"{_describe(shape)}")
    if len(shape) > MAX_NDIM:
        raise _Invalid(where, f"{len(shape)} dimensions; the limit is {MAX_NDIM}")
    size = 1
    for i, d in enumerate(shape):
        if type(d) is not int or d < 0:
            raise _Invalid(f"{where}[{i}]", f"a dimension must be a non-negative integer, found "
                                            f"{_describe(d)}")
        size *= d
    if size > MAX_ARRAY_ELEMENTS:
        raise _Invalid(where, f"the array has {size:,} elements; the limit is "
                              f"{MAX_ARRAY_ELEMENTS:,}")
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
                raise _Invalid(f"{where}[{i}]", f"bool data must be true or false, found "
                                                f"{_describe(x)}")
        return np.array(data, dtype=bool).reshape(shape)
    if kind in "iu":
        info = np.iinfo(dtype)
        for i, x in enumerate(data):
            if type(x) is not int:
                raise _Invalid(f"{where}[{i}]", f"{dtype_name} data must be integers, found "
                                                f"{_describe(x)}")
            if not info.min <= x <= info.max:
                raise _Invalid(f"{where}[{i}]", f"{x} does not fit in {dtype_name} "
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
            if -_EXACT_INT <= x <= _EXACT_INT:
                continue
            try:
                float(x)
                continue
            except OverflowError:
                pass
        elif t is str and x in _NONFINITE:
            special.append(i)
            continue
        else:
            raise _Invalid(f"{where}[{i}]", f"{dtype_name} data must be numbers or \"NaN\", "
                                            f"\"Infinity\", \"-Infinity\", found {_describe(x)}")
        raise _Invalid(f"{where}[{i}]", f"{_describe(x)} is out of range "
                                        "(write \"Infinity\" for infinity)")
    if special:   # a copy, not the caller's list: the writer keeps its strings
        data = list(data)
        for i in special:
            data[i] = _NONFINITE[data[i]]
    wide = np.array(data, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        arr = wide.astype(dtype, copy=False)
    if arr is not wide:
        bad = np.flatnonzero(np.isinf(arr) & np.isfinite(wide))
        if bad.size:
            i = int(bad[0])
            raise _Invalid(f"{where}[{i}]", f"{float(data[i])!r} is out of range for "
                                            f"{dtype_name}")
    return arr.reshape(shape)


def _decode_array(obj, where: str) -> np.ndarray:
    what = "an array object"
    if not isinstance(obj, dict):
        raise _Invalid(where, f"expected an array object {{\"dtype\", \"shape\", \"data\" or "
                              f"\"base64\"}}, found {_describe(obj)}")
    _check_object(obj, where, what, _ARRAY_KEYS, ("dtype", "shape"))
    if ("data" in obj) == ("base64" in obj):
        raise _Invalid(where, "an array object needs exactly one of \"data\" and \"base64\"")
    name = obj["dtype"]
    if not isinstance(name, str) or name not in DTYPES:
        shown = _short(name) if isinstance(name, str) else _describe(name)
        raise _Invalid(_key(where, "dtype"), f"unsupported dtype {shown} (allowed: "
                                             f"{', '.join(DTYPES)})")
    shape, size = _check_shape(obj["shape"], _key(where, "shape"))
    dtype = np.dtype(name)
    if "data" in obj:
        data, dw = obj["data"], _key(where, "data")
        if not isinstance(data, list):
            raise _Invalid(dw, f"data must be a flat list of values, found {_describe(data)}")
        if len(data) != size:
            raise _Invalid(dw, f"{len(data)} values, but shape {list(shape)} needs {size}")
        return _data_to_array(data, name, shape, dw)
    text, bw = obj["base64"], _key(where, "base64")
    if not isinstance(text, str):
        raise _Invalid(bw, f"base64 must be a string, found {_describe(text)}")
    raw = _base64_bytes(text, size * dtype.itemsize, f"{name} {list(shape)}", bw)
    if dtype.kind == "b":
        if size and raw.max() > 1:
            raise _Invalid(bw, "bool data must be bytes 0 or 1")
    return raw.view(_le(dtype)).astype(dtype, copy=False).reshape(shape)


_BASE64_RE = re.compile(r"[A-Za-z0-9+/]*=*")
#: base64 characters decoded at a time (a multiple of 4)
_BASE64_CHUNK = 1 << 20


def _base64_bytes(text: str, need: int, what: str, where: str) -> np.ndarray:
    """The bytes ``text`` encodes, as a writable uint8 array, decoded piece by piece into the
    one array of ``need`` bytes checked beforehand (the text's length fixes the decoded size);
    the rules of ``binascii.a2b_base64(text, strict_mode=True)``."""
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
        raise _Invalid(where, f"not valid base64 ({exc})") from None
    if text.find("=", 0, whole) >= 0:   # padding, then more data
        raise _Invalid(where, "not valid base64 (Excess data after padding)")
    got = whole // 4 * 3 + len(tail)
    if got != need:
        if not text.isascii() or _BASE64_RE.fullmatch(text) is None:   # that, first
            raise _Invalid(where, "not valid base64 (only A-Z a-z 0-9 + / and '=' padding at "
                                  "the end are allowed)")
        raise _Invalid(where, f"base64 decodes to {got:,} bytes, but {what} needs {need:,}")
    out = np.empty(need, np.uint8)
    try:
        for start in range(0, whole, _BASE64_CHUNK):
            piece = binascii.a2b_base64(text[start:min(start + _BASE64_CHUNK, whole)],
                                        strict_mode=True)
            out[start // 4 * 3:start // 4 * 3 + len(piece)] = np.frombuffer(piece, np.uint8)
    except (binascii.Error, ValueError) as exc:
        raise _Invalid(where, f"not valid base64 ({exc})") from None
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


def _encode_array(value, where: str) -> dict:
    try:
        arr = np.asarray(value)
    except Exception as exc:  # ragged lists and the like
        raise _Invalid(where, f"cannot be turned into an array: {exc}") from None
    name = arr.dtype.name
    if name not in DTYPES:
        raise _Invalid(where, f"an array of dtype {arr.dtype} cannot be saved (allowed: "
                              f"{', '.join(DTYPES)})")
    if arr.ndim > MAX_NDIM:
        raise _Invalid(where, f"{arr.ndim} dimensions; the limit is {MAX_NDIM}")
    if arr.size > MAX_ARRAY_ELEMENTS:
        raise _Invalid(where, f"the array has {arr.size:,} elements; the limit is "
                              f"{MAX_ARRAY_ELEMENTS:,}")
    le = np.ascontiguousarray(arr, dtype=_le(arr.dtype))
    if le.dtype.kind == "b":  # normalise bool bytes to 0/1
        le = le.view(np.uint8) != 0
    shape = [int(d) for d in arr.shape]
    if arr.size <= INLINE_DATA_MAX:
        flat = le.reshape(-1)
        data = _float_list(flat) if arr.dtype.kind == "f" else flat.tolist()
        # Only if it reads back bit for bit (NaN payloads and signs do not): else base64.
        try:
            back = _data_to_array(data, name, tuple(shape), where)
        except _Invalid:
            back = None
        if back is not None and back.astype(_le(back.dtype)).tobytes() == le.tobytes():
            return _ArrayJSON(dtype=name, shape=shape, data=data)
    return _ArrayJSON(dtype=name, shape=shape,
                      base64=base64.b64encode(le.tobytes()).decode("ascii"))


def encode_array(arr) -> dict:
    """The array object of ``arr``: ``{"dtype", "shape", "data"}`` for at most
    :data:`INLINE_DATA_MAX` elements that read back bit-exactly, else ``{"dtype", "shape",
    "base64"}`` of the raw little-endian bytes. Raises ProjectFileError for an unsupported dtype.
    """
    try:
        return dict(_encode_array(arr, ""))
    except _Invalid as exc:
        raise ProjectFileError("<array>", exc.where, exc.problem) from None


def decode_array(obj, where: str = "") -> np.ndarray:
    """The ndarray of an array object; ``where`` (a JSON path) is used in error messages.

    Raises ProjectFileError for anything that is not a valid array object.
    """
    try:
        return _decode_array(obj, where)
    except _Invalid as exc:
        raise ProjectFileError("<array>", exc.where, exc.problem) from None


# --------------------------------------------------------------------------------------------
# Free JSON values (attrs and metadata)


def _decode_value(v, where: str, arrays: bool, depth: int = 0):
    """Check a loaded JSON value; with ``arrays``, array objects become ndarrays.

    Lists and objects are checked in place and kept (array objects in them replaced), not
    copied: the parsed document is the model, so loading never holds two copies of a value.
    """
    if _plain_scalar(v, where):
        return v
    if isinstance(v, _BadConstant):
        raise _Invalid(where, f"{v.token} is not valid JSON (write a non-finite attr value as "
                              "an array object)")
    if depth >= MAX_DEPTH:
        raise _Invalid(where, f"nested more than {MAX_DEPTH} levels deep")
    if isinstance(v, list):
        for i, x in enumerate(v):
            if type(x) in _CONTAINERS or not _plain_scalar(x, where, i):
                y = _decode_value(x, f"{where}[{i}]", arrays, depth + 1)
                if y is not x:
                    v[i] = y
        return v
    _check_mapping(v, where, "an object")
    if arrays and len(v) == 3 and frozenset(v) in _ARRAY_KEYSETS:
        return _decode_array(v, where)
    for k, x in v.items():
        if type(x) in _CONTAINERS or not _plain_scalar(x, where, k):
            y = _decode_value(x, _key(where, k), arrays, depth + 1)
            if y is not x:
                v[k] = y   # replacing a value while iterating is allowed (the keys stay)
    return v


_CONTAINERS = (list, dict, _DupDict)


def _plain_scalar(x, where: str, key=None) -> bool:
    """True for a valid JSON scalar (a UTF-8 string, a finite number, true, false, null); False
    for anything else; raises for an invalid scalar. ``key`` (an index or a member name inside
    ``where``) is only formatted into a path when there is a problem to report."""
    t = type(x)
    if t is str:
        if not x.isascii() or "\x00" in x:
            _check_text(x, _sub(where, key), "a string")
        return True
    if t is float:
        if not math.isfinite(x):
            raise _Invalid(_sub(where, key), "a number is out of range")
        return True
    return t is int or t is bool or x is None


def _sub(where: str, key) -> str:
    if key is None:
        return where
    return f"{where}[{key}]" if type(key) is int else _key(where, key)


def _encode_value(v, where: str, arrays: bool, depth: int = 0):
    """A Python value as JSON; with ``arrays``, numpy arrays (and numpy scalars, non-finite
    floats) become array objects; without, only plain JSON values are allowed."""
    if isinstance(v, (np.ndarray, np.generic)):  # before float: np.float64 is a float
        if arrays:
            return _encode_array(v, where)
        what = _describe(v) if isinstance(v, np.ndarray) else f"a numpy {type(v).__name__}"
        raise _Invalid(where, f"{what} cannot be saved here: only plain JSON values")
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, str):
        return _check_text(v, where, "a string")
    if isinstance(v, int):
        return int(v)
    if isinstance(v, float):
        if math.isfinite(v):
            return float(v)
        if arrays:  # JSON has no NaN/Infinity: keep the value as a 0-d float64 array
            return _encode_array(np.float64(v), where)
        raise _Invalid(where, f"{v!r} cannot be written in JSON")
    if depth >= MAX_DEPTH:
        raise _Invalid(where, f"nested more than {MAX_DEPTH} levels deep")
    if isinstance(v, (list, tuple)):
        return [_encode_value(x, f"{where}[{i}]", arrays, depth + 1) for i, x in enumerate(v)]
    if isinstance(v, dict):
        for k in v:
            if not isinstance(k, str):
                raise _Invalid(where, f"object keys must be strings, found {_describe(k)}")
            _check_text(k, _key(where, k), "a key")
        if arrays and frozenset(v) in _ARRAY_KEYSETS:
            raise _Invalid(where, "a plain object with exactly the keys of an array object "
                                  f"({', '.join(sorted(v))}) would be read back as an array")
        keys = sorted(v, key=_natural) if arrays else list(v)
        return {k: _encode_value(v[k], _key(where, k), arrays, depth + 1) for k in keys}
    raise _Invalid(where, f"{_describe(v)} cannot be saved (only JSON values and numpy arrays)")


# --------------------------------------------------------------------------------------------
# Reading


def _decode_text(data) -> str:
    if isinstance(data, (bytes, bytearray, memoryview)):
        data = bytes(data)
        if len(data) > MAX_FILE_BYTES:
            raise _Invalid("", f"the file is {len(data):,} bytes; the limit is "
                               f"{MAX_FILE_BYTES:,}")
        if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
            raise _Invalid("", "the file is UTF-16 text; project files are UTF-8")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            start = exc.start
            line = data.count(b"\n", 0, start) + 1
            col = start - (data.rfind(b"\n", 0, start) + 1) + 1
            raise _Invalid(f"line {line}, column {col} (byte {start})",
                           f"the file is not UTF-8 text ({exc.reason}: byte "
                           f"0x{data[start]:02x})") from None
    elif isinstance(data, str):
        text = data
        if len(text) > MAX_FILE_BYTES:
            raise _Invalid("", f"the text is {len(text):,} characters; the limit is "
                               f"{MAX_FILE_BYTES:,}")
    else:
        raise TypeError(f"loads_project needs str or bytes, not {type(data).__name__}")
    if text.startswith("\ufeff"):
        text = text[1:]
    return text


# --------------------------------------------------------------------------------------------
# Reading: the memory a file may cost
#
# A file of a few megabytes can spell millions of tiny JSON values ("[]," is 3 bytes; the list
# it becomes is 56), so before parsing, the loader bounds what parsing and checking will take
# from counts of the text's tokens, and refuses a file whose bound is over LOAD_FACTOR x its size
# + LOAD_ALLOWANCE_BYTES. The bound adds, per token, the most CPython (3.11+, 64-bit) takes for
# it; tests/hostile/test_loader_memory.py measures real peaks against it, shape by shape.
# Checking does not copy what was parsed: lists and objects are checked in place and become the
# model's attrs, and each node's, edge's and page's parsed form is freed once its model object
# exists. So there are two peaks: the text and the parsed document while parsing; the parsed
# document and the model while checking (the text freed by then).

# Sizes are as allocated: small objects come in blocks of multiples of 16 bytes.
_COST_LIST = 64          # an empty list (56)
_COST_FULL_LIST = 112    # a list with items: + the first slots it allocates (up to 6 spare)
_COST_OBJECT = 64        # an empty dict
_COST_FULL_OBJECT = 192  # a dict with members: + its first table (room for 5)
# An object member: its (key, value) tuple while its object is parsed (64, and its slot in the
# list of pairs), then its entry in the dict (36: tables grow by doubling; the one dict being
# made holds both); and unless its key is one of the format's (parsed once each), the key's str
# and its entry in the parser's memo of keys (114; a key seen before costs neither, but counting
# distinct keys would take a parse).
_COST_FORMAT_MEMBER = 73
_COST_MEMBER = 73 + 36 + 114
_COST_SLOT = 18          # the pointer to any value: lists over-allocate by 1/8, and keep the old
                         # array while they copy it to a bigger one
_COST_SCALAR = 32        # a number: float 24, int 28 (more only with more digits)
_COST_STRING = 64        # a str's header, when every string is ASCII (49 + 1 + up to 14)
_COST_WIDE_STRING = 96   # ... and when some are not (76 + up to 4 x 4)
# What the model adds, beyond the parsed form it replaces (freed as it goes: a node's or an
# edge's object, with 2 members at least, is 184 bytes).
_COST_PAGE = 512         # per page: Page, its dicts and lists, an entry in `seen`
_COST_NODE = 96          # per node: Node (136), its entry in the page's dict, a position tuple
_COST_DICT = 64          # ... and each of attrs, inputs, state the file leaves out
_COST_EDGE = 200         # per edge: Edge (104), the 4 names split out of "node:port", set entry

# The bytes that can be JSON structure; all others are dropped before counting.
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'[]{},:"')
#: characters counted at a time (the copies this takes are a few times this)
_COUNT_CHUNK = 1 << 22
# A JSON string, quotes included (possessive: nothing to backtrack into).
_STRING_RE = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+"')
# A key of the format, and the same characters inside a string (after an escaped quote), which
# is all it can be else in valid JSON (a key followed by spaces is counted as any key: more).
_FORMAT_KEYS = "|".join(sorted(set(_TOP_KEYS + _PAGE_KEYS + _NODE_KEYS + _EDGE_KEYS
                                   + _ARRAY_KEYS)))
_FORMAT_KEY_RE = re.compile(f'"(?:{_FORMAT_KEYS})":')
_ESCAPED_FORMAT_KEY_RE = re.compile(f'\\\\"(?:{_FORMAT_KEYS})":')


def _structure(data) -> list:
    """How many of each of ``[ { , : "`` ``data`` (bytes of UTF-8, or str) holds, those in
    strings included: an upper bound of every token count, in one fast pass."""
    counts = [0] * 5
    for start in range(0, len(data), _COUNT_CHUNK):
        chunk = data[start:start + _COUNT_CHUNK]
        if isinstance(chunk, str):
            chunk = chunk.encode("utf-8", "surrogatepass")
        kept = chunk.translate(None, _NOT_STRUCTURE)
        for i, token in enumerate((b"[", b"{", b",", b":", b'"')):
            counts[i] += kept.count(token)
    return counts


def _mib(nbytes: int) -> str:
    return f"{nbytes / 2 ** 20:,.0f} MiB"


class _Budget:
    """The memory loading a file of ``size`` bytes may take, and the estimate held so far."""

    def __init__(self, size: int):
        self.size = size
        self.limit = LOAD_FACTOR * size + LOAD_ALLOWANCE_BYTES
        self.held = 0

    def hold(self, nbytes: int, what) -> None:
        """Add ``nbytes``; past the limit, refuse the file, saying that ``what`` (or ``what()``)
        would take so much."""
        self.held += nbytes
        if self.held > self.limit:
            what = what() if callable(what) else what
            raise _Invalid("", f"{what} in {self.size:,} bytes: reading it would take about "
                               f"{_mib(self.held)} of memory, more than blockflow allows for a "
                               f"project file of this size ({LOAD_FACTOR} x its size + "
                               f"{_mib(LOAD_ALLOWANCE_BYTES)} = {_mib(self.limit)}; see "
                               f"docs/limits.md)")

    def release(self, nbytes: int) -> None:
        self.held -= nbytes


class _Tokens:
    """Counts of a JSON text's tokens: an upper bound from all its structure characters (also
    those inside strings), or exact from a text whose strings are emptied (``""``)."""

    def __init__(self, counts: list, chars: int, empty_lists: int = 0, empty_objects: int = 0,
                 format_keys: int = 0):
        self.lists, self.objects, self.commas, self.members, quotes = counts
        self.strings = quotes // 2
        self.chars = chars                           # characters inside strings (or more)
        # empty containers ("[ ]" is taken for a full one: an upper bound still)
        self.empty_lists, self.empty_objects = empty_lists, empty_objects
        self.format_keys = min(format_keys, self.members)
        full = self.lists - self.empty_lists + self.objects - self.empty_objects
        self.values = self.commas + full + 1      # each after a comma or first in its container
        self.string_values = max(0, self.strings - self.members)     # the others are keys
        self.numbers = max(0, self.values - self.lists - self.objects - self.string_values)

    def cost(self, per_char: int, per_string: int) -> int:
        """An upper bound of the bytes the parsed document takes (every token over-counted from
        characters inside strings adds at least what it takes away)."""
        return ((self.lists - self.empty_lists) * _COST_FULL_LIST
                + self.empty_lists * _COST_LIST
                + (self.objects - self.empty_objects) * _COST_FULL_OBJECT
                + self.empty_objects * _COST_OBJECT
                + self.format_keys * _COST_FORMAT_MEMBER
                + (self.members - self.format_keys) * _COST_MEMBER
                + self.values * _COST_SLOT + self.numbers * _COST_SCALAR
                + self.string_values * per_string + self.chars * per_char)

    def most_numerous(self) -> str:
        kinds = [(self.lists + self.objects, "lists and objects"),
                 (self.members, "object members"), (self.string_values, "strings"),
                 (self.numbers, "numbers")]
        n, what = max(kinds)
        return f"the file holds {n:,} {what}"


def _check_parse_cost(text: str, structure: list, budget: _Budget) -> None:
    """Refuse ``text`` (whose :func:`_structure` is ``structure``) if parsing it could take more
    than ``budget`` allows; else hold what it may take. Each finer count is only made if the
    coarser one is over the limit."""
    budget.hold(sys.getsizeof(text), "the text")
    tokens, per_char = _Tokens(structure, len(text)), 4
    cost = _parse_cost(tokens, per_char)
    if budget.held + cost > budget.limit and "\\u" not in text:
        # without \u escapes, a string is no wider than the text (1, 2 or 4 bytes a character)
        per_char = _char_width(text)
        cost = _parse_cost(tokens, per_char)
    # Perhaps only for what strings hold: count exactly, also when the coarse count leaves less
    # than half the limit for the model built next (pages, nodes and edges cost it more).
    if budget.held + cost > budget.limit // 2:
        stripped = _STRING_RE.sub('""', text)
        counts = [stripped.count(c) for c in '[{,:"']
        chars, empty = len(text) - len(stripped), (stripped.count("[]"), stripped.count("{}"))
        del stripped
        format_keys = (_FORMAT_KEY_RE.subn("", text)[1]
                       - sum(1 for _ in _ESCAPED_FORMAT_KEY_RE.finditer(text)))
        tokens = _Tokens(counts, chars, *empty, format_keys)
        cost = _parse_cost(tokens, per_char)
    budget.hold(cost, tokens.most_numerous)


def _parse_cost(tokens: "_Tokens", per_char: int) -> int:
    """The parsed document's bound, and one string at a time being built (the parser writes it
    to a buffer, then copies it) or converted (an array decoded from base64, a string's UTF-8
    check): at most all of them together."""
    per_string = _COST_STRING if per_char == 1 else _COST_WIDE_STRING
    return tokens.cost(per_char, per_string) + tokens.chars * per_char


def _char_width(text: str) -> int:
    """Bytes a character in ``text`` (CPython stores a str in 1, 2 or 4 bytes a character, as
    its widest character needs; its size is 72 + width x (len + 1) bytes when not ASCII)."""
    if text.isascii():
        return 1
    return min(4, max(1, (sys.getsizeof(text) - 72) // (len(text) + 1)))


def _check_model_cost(pages: list, budget: _Budget) -> None:
    """Refuse a document whose Project model (pages, nodes, edges) would not fit in ``budget``
    next to the parsed document."""
    nodes = edges = left_out = 0
    for page in pages:
        if isinstance(page, dict):
            n, e = page.get("nodes"), page.get("edges")
            if isinstance(n, list):
                nodes += len(n)
                left_out += sum(3 - len(_MODEL_DICTS & raw.keys()) for raw in n
                                if isinstance(raw, dict))
            edges += len(e) if isinstance(e, list) else 0
    cost = (len(pages) * _COST_PAGE + nodes * _COST_NODE + left_out * _COST_DICT
            + edges * _COST_EDGE)
    budget.hold(cost, f"the file holds {len(pages):,} pages, {nodes:,} nodes and {edges:,} "
                      "edges")


_MODEL_DICTS = frozenset({"attrs", "inputs", "state"})


def _parse(text: str):
    if not text or text.isspace():
        raise _Invalid("", "the file is empty")
    try:
        return json.loads(text, object_pairs_hook=_object_pairs, parse_constant=_BadConstant)
    except json.JSONDecodeError as exc:
        raise _Invalid(f"line {exc.lineno}, column {exc.colno}",
                       f"not valid JSON: {exc.msg}") from None
    except RecursionError:
        raise _Invalid("", "not valid JSON for blockflow: nested too deeply") from None
    except ValueError as exc:  # e.g. an integer with too many digits
        raise _Invalid("", f"not valid JSON: {exc}") from None


def _decode_document(doc, budget: _Budget) -> Project:
    if not isinstance(doc, dict):
        raise _Invalid("", f"the top level must be a JSON object, found {_describe(doc)}")
    if isinstance(doc, _DupDict):
        raise _Invalid(_key("", doc.dup), f"the key '{doc.dup}' appears twice")
    if "format" not in doc:
        raise _Invalid("format", f"missing: this is not a blockflow project file (it has no "
                                 f"\"format\": \"{FORMAT}\")")
    if doc["format"] != FORMAT:
        raise _Invalid("format", f"expected \"{FORMAT}\", found {_describe(doc['format'])}: "
                                 "this is not a blockflow project file")
    if "version" not in doc:
        raise _Invalid("version", "missing: the format version, an integer")
    version = doc["version"]
    if type(version) is not int:
        raise _Invalid("version", f"the format version must be an integer, found "
                                  f"{_describe(version)}")
    if version > VERSION:
        raise _Invalid("version", f"written by a newer blockflow (format version {version}); "
                                  f"this one reads versions up to {VERSION}")
    if version < 1:
        raise _Invalid("version", f"unknown format version {version} (versions start at 1)")
    while version < VERSION:
        migrate = MIGRATIONS.get(version)
        if migrate is None:
            raise _Invalid("version", f"cannot read format version {version}: no migration to "
                                      f"version {version + 1}")
        try:
            doc = migrate(doc)
        except _Invalid:
            raise
        except Exception as exc:
            raise _Invalid("", f"upgrading from format version {version} to {version + 1} "
                               f"failed: {type(exc).__name__}: {exc}") from None
        version += 1
        if not isinstance(doc, dict):
            raise _Invalid("", f"the migration to format version {version} did not return "
                               "an object")
        doc["version"] = version

    _check_object(doc, "", "the top level", _TOP_KEYS, ("pages",))
    metadata = doc.get("metadata", {})
    if not isinstance(metadata, dict):
        raise _Invalid("metadata", f"metadata must be an object, found {_describe(metadata)}")
    metadata = _decode_value(metadata, "metadata", arrays=False)
    pages = doc["pages"]
    if not isinstance(pages, list):
        raise _Invalid("pages", f"pages must be a list, found {_describe(pages)}")
    if not pages:
        raise _Invalid("pages", "a project needs at least one page")
    _check_model_cost(pages, budget)
    seen: dict = {}
    out = []
    for i, page in enumerate(pages):
        out.append(_decode_page(page, f"pages[{i}]", seen))
        seen[out[-1].name] = i
        pages[i] = None   # its parsed form is no longer needed: free it as the model grows
    return Project(out, metadata)


def _decode_page(obj, where: str, seen: dict) -> Page:
    _check_object(obj, where, "a page", _PAGE_KEYS, ("name",))
    name = _check_page_name(obj["name"], _key(where, "name"), seen)
    text = _check_text(obj.get("text", ""), _key(where, "text"), "the page text")

    nodes_w = _key(where, "nodes")
    raw_nodes = obj.get("nodes", [])
    if not isinstance(raw_nodes, list):
        raise _Invalid(nodes_w, f"nodes must be a list, found {_describe(raw_nodes)}")
    if len(raw_nodes) > MAX_NODES_PER_PAGE:
        raise _Invalid(nodes_w, f"{len(raw_nodes):,} nodes on one page; the limit is "
                                f"{MAX_NODES_PER_PAGE:,}")
    nodes: dict = {}
    for j, raw in enumerate(raw_nodes):
        node = _decode_node(raw, f"{nodes_w}[{j}]")
        if node.id in nodes:   # nodes holds nodes[0..j-1] in order: its order is the index
            raise _Invalid(f"{nodes_w}[{j}].id", f"duplicate node id '{node.id}' (also "
                                                 f"nodes[{list(nodes).index(node.id)}])")
        nodes[node.id] = node
        raw_nodes[j] = None

    edges_w = _key(where, "edges")
    raw_edges = obj.get("edges", [])
    if not isinstance(raw_edges, list):
        raise _Invalid(edges_w, f"edges must be a list, found {_describe(raw_edges)}")
    edges = []
    seen_edges: set = set()
    for k, raw in enumerate(raw_edges):
        ew = f"{edges_w}[{k}]"
        _check_object(raw, ew, "an edge", _EDGE_KEYS, _EDGE_KEYS)
        src, src_port = _parse_endpoint(raw["from"], _key(ew, "from"), nodes, name)
        dst, dst_port = _parse_endpoint(raw["to"], _key(ew, "to"), nodes, name)
        edge = Edge(src, src_port, dst, dst_port)
        if edge in seen_edges:   # edges holds edges[0..k-1] in order
            raise _Invalid(ew, f"the same edge {raw['from']} -> {raw['to']} as "
                               f"edges[{edges.index(edge)}]")
        seen_edges.add(edge)
        edges.append(edge)
        raw_edges[k] = None

    feeds_w = _key(where, "feeds")
    feeds = _check_mapping(obj.get("feeds", {}), feeds_w, "feeds")
    for key, value in feeds.items():
        kw = _key(feeds_w, key)
        if key not in nodes:
            raise _Invalid(kw, f"a feed for '{key}', but page '{name}' has no such node")
        feeds[key] = _decode_array(value, kw)

    loss = obj.get("loss")
    if loss is not None:
        loss = _check_loss(loss, _key(where, "loss"), nodes, name)
    metrics = _check_metrics(obj.get("metrics", []), _key(where, "metrics"), nodes, name)
    return Page(name, nodes, edges, loss, feeds, text, metrics)


def _decode_node(obj, where: str) -> Node:
    _check_object(obj, where, "a node", _NODE_KEYS, ("id", "block"))
    node_id = _check_node_id(obj["id"], _key(where, "id"))
    bw = _key(where, "block")
    block = _check_name(obj["block"], bw, "a block name")
    if not block:
        raise _Invalid(bw, "the block name must not be empty")
    label = _check_text(obj.get("label", ""), _key(where, "label"), "a label")
    pw = _key(where, "position")
    position = obj.get("position", _ORIGIN)
    if position is _ORIGIN:   # omitted: every such node shares the one immutable tuple
        xy = _ORIGIN
    elif not isinstance(position, list) or len(position) != 2:
        raise _Invalid(pw, f"a position must be a list of 2 numbers [x, y], found "
                           f"{_describe(position)}")
    else:
        xy = []
        for i, p in enumerate(position):
            if isinstance(p, bool) or not isinstance(p, (int, float)):
                raise _Invalid(f"{pw}[{i}]", f"a coordinate must be a number, found "
                                             f"{_describe(p)}")
            try:
                p = float(p)
            except OverflowError:
                p = math.inf
            if not math.isfinite(p):
                raise _Invalid(f"{pw}[{i}]", "a coordinate must be a finite number")
            xy.append(p)
        xy = tuple(xy)

    # attrs, inputs and state keep the parsed objects, checked and decoded in place
    aw = _key(where, "attrs")
    attrs = _check_mapping(obj.get("attrs", {}), aw, "attrs")
    for k, v in attrs.items():
        _check_name(k, _key(aw, k), "an attr name")
        if type(v) in _CONTAINERS or not _plain_scalar(v, aw, k):
            y = _decode_value(v, _key(aw, k), arrays=True)
            if y is not v:
                attrs[k] = y
    iw = _key(where, "inputs")
    inputs = _check_mapping(obj.get("inputs", {}), iw, "inputs")
    for port, v in inputs.items():
        _check_port(port, _key(iw, port))
        inputs[port] = _decode_array(v, _key(iw, port))
    sw = _key(where, "state")
    state = _check_mapping(obj.get("state", {}), sw, "state")
    for k, v in state.items():
        if not k:
            raise _Invalid(sw, "a state name must not be empty")
        _check_name(k, _key(sw, k), "a state name")
        state[k] = _decode_array(v, _key(sw, k))
    return Node(node_id, block, attrs, inputs, xy, label, state)


def loads_project(text_or_bytes, path="<string>") -> Project:
    """The Project in ``text_or_bytes`` (str, or bytes of UTF-8); ``path`` names it in errors.

    Raises ProjectFileError(path, where, problem) for anything wrong with it.
    """
    try:
        return _load_text([_decode_text(text_or_bytes)], len(text_or_bytes))
    except _Invalid as exc:
        raise ProjectFileError(path, exc.where, exc.problem) from None


def _load_text(box: list, size: int, structure: list | None = None) -> Project:
    """The Project in the text ``box`` holds (taken out of it, so that the text is freed once
    parsed if nobody else holds it); ``size`` is the file's size the memory budget is for,
    ``structure`` the file's :func:`_structure` if the caller has it."""
    text = box.pop()
    if structure is None:
        structure = _structure(text)
    budget = _Budget(size)
    _check_parse_cost(text, structure, budget)
    doc = _parse(text)
    budget.release(sys.getsizeof(text))   # freed below, if the caller gave the only reference
    del text
    return _decode_document(doc, budget)


def _read_at_most(f, size: int) -> bytes:
    """The file's bytes, up to MAX_FILE_BYTES + 1: ``size`` (from fstat) at once, then, if there
    is more (a file growing, a pipe with no size), in pieces: never a buffer of the limit's size
    for a small file (which would count against an address-space limit)."""
    data = f.read(size + 1)
    if len(data) <= size:
        return data
    parts, total = [data], len(data)
    while total <= MAX_FILE_BYTES:
        part = f.read(min(1 << 20, MAX_FILE_BYTES + 1 - total))
        if not part:
            break
        parts.append(part)
        total += len(part)
    return b"".join(parts)


def load_project(path) -> Project:
    """Read a project file. Raises ProjectFileError if it cannot be read or is not valid."""
    name = os.fspath(path)
    try:
        with open(name, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size > MAX_FILE_BYTES:
                raise ProjectFileError(name, "", f"the file is {size:,} bytes; the limit is "
                                                 f"{MAX_FILE_BYTES:,}")
            box = [_read_at_most(f, size)]
    except OSError as exc:
        raise ProjectFileError(name, "", f"cannot read the file: {exc.strerror or exc}") from None
    size = len(box[0])
    if size > MAX_FILE_BYTES:   # it grew while being read, or is not a regular file
        raise ProjectFileError(name, "", f"the file is more than {MAX_FILE_BYTES:,} bytes; the "
                                         f"limit is {MAX_FILE_BYTES:,}")
    try:
        structure = _structure(box[0])   # from the bytes: faster than from the text
        box[0] = _decode_text(box[0])    # the bytes are freed here, the text once parsed
        project = _load_text(box, size, structure)
    except _Invalid as exc:
        raise ProjectFileError(name, exc.where, exc.problem) from None
    project.base_dir = os.path.dirname(os.path.abspath(name))
    return project


# --------------------------------------------------------------------------------------------
# Writing


def _encode_document(project) -> dict:
    if not isinstance(project, Project):
        raise TypeError(f"dumps_project needs a Project, not {type(project).__name__}")
    if not isinstance(project.metadata, dict):
        raise _Invalid("metadata", f"metadata must be a dict, found {_describe(project.metadata)}")
    metadata = _encode_value(project.metadata, "metadata", arrays=False)
    if not project.pages:
        raise _Invalid("pages", "the project has no pages; a project file needs at least one")
    seen: dict = {}
    pages = []
    for i, page in enumerate(project.pages):
        pages.append(_encode_page(page, f"pages[{i}]", seen))
        seen[page.name] = i
    return {"format": FORMAT, "version": VERSION, "metadata": metadata, "pages": pages}


def _encode_array_map(mapping, where: str, what: str, check_key) -> dict:
    if not isinstance(mapping, dict):
        raise _Invalid(where, f"{what} must be a dict, found {_describe(mapping)}")
    out = {}
    for k in sorted(mapping, key=lambda k: _natural(k) if isinstance(k, str) else ([], "")):
        if not isinstance(k, str):
            raise _Invalid(where, f"{what} keys must be strings, found {_describe(k)}")
        check_key(k, _key(where, k))
        out[k] = _encode_array(mapping[k], _key(where, k))
    return out


def _encode_page(page, where: str, seen: dict) -> dict:
    if not isinstance(page, Page):
        raise _Invalid(where, f"expected a Page, found {_describe(page)}")
    name = _check_page_name(page.name, _key(where, "name"), seen)
    text = _check_text(page.text, _key(where, "text"), "the page text")
    nodes_w = _key(where, "nodes")
    if not isinstance(page.nodes, dict):
        raise _Invalid(nodes_w, f"nodes must be a dict, found {_describe(page.nodes)}")
    if len(page.nodes) > MAX_NODES_PER_PAGE:
        raise _Invalid(nodes_w, f"{len(page.nodes):,} nodes on one page; the limit is "
                                f"{MAX_NODES_PER_PAGE:,}")
    nodes = [_encode_node(key, node, f"{nodes_w}[{j}]")
             for j, (key, node) in enumerate(page.nodes.items())]

    edges_w = _key(where, "edges")
    edges, seen_edges = [], set()
    for k, e in enumerate(page.edges):
        ew = f"{edges_w}[{k}]"
        if not isinstance(e, Edge):
            raise _Invalid(ew, f"expected an Edge, found {_describe(e)}")
        _check_endpoint(e.src, e.src_port, _key(ew, "from"), page.nodes, name)
        _check_endpoint(e.dst, e.dst_port, _key(ew, "to"), page.nodes, name)
        pair = (f"{e.src}:{e.src_port}", f"{e.dst}:{e.dst_port}")
        if pair in seen_edges:
            raise _Invalid(ew, f"the edge {pair[0]} -> {pair[1]} appears twice")
        seen_edges.add(pair)
        edges.append(pair)
    edges.sort(key=lambda p: (_natural(p[0]), _natural(p[1])))

    def feed_key(k, kw):
        if k not in page.nodes:
            raise _Invalid(kw, f"a feed for '{k}', but page '{name}' has no such node")

    feeds = _encode_array_map(page.feeds, _key(where, "feeds"), "feeds", feed_key)
    loss = page.loss or None
    if loss is not None:
        _check_loss(loss, _key(where, "loss"), page.nodes, name)
    metrics = _check_metrics(list(page.metrics), _key(where, "metrics"), page.nodes, name)
    out = {"name": name, "text": text, "loss": loss, "nodes": nodes,
           "edges": [{"from": a, "to": b} for a, b in edges], "feeds": feeds}
    if metrics:
        out["metrics"] = metrics
    return out


def _encode_node(key, node, where: str) -> dict:
    if not isinstance(node, Node):
        raise _Invalid(where, f"expected a Node, found {_describe(node)}")
    node_id = _check_node_id(node.id, _key(where, "id"))
    if node_id != key:
        raise _Invalid(_key(where, "id"), f"the node stored under '{key}' has the id "
                                          f"'{node_id}'")
    bw = _key(where, "block")
    block = _check_name(node.block, bw, "a block name")
    if not block:
        raise _Invalid(bw, "the block name must not be empty")
    label = _check_text(node.label, _key(where, "label"), "a label")
    pw = _key(where, "position")
    try:
        ok = len(node.position) == 2 and all(
            isinstance(p, (int, float, np.integer, np.floating)) and not isinstance(p, bool)
            for p in node.position)
        pos = [float(p) for p in node.position] if ok else []
        ok = ok and all(math.isfinite(p) for p in pos)
    except (TypeError, ValueError, OverflowError):
        ok = False
    if not ok:
        raise _Invalid(pw, f"a position must be 2 finite numbers, found {node.position!r}")
    aw = _key(where, "attrs")
    if not isinstance(node.attrs, dict):
        raise _Invalid(aw, f"attrs must be a dict, found {_describe(node.attrs)}")
    for k in node.attrs:
        if not isinstance(k, str):
            raise _Invalid(aw, f"attr names must be strings, found {_describe(k)}")
        _check_name(k, _key(aw, k), "an attr name")
    attrs = {k: _encode_value(node.attrs[k], _key(aw, k), arrays=True)
             for k in sorted(node.attrs, key=_natural)}

    def state_key(k, kw):
        _check_text(k, kw, "a state name")
        if not k:
            raise _Invalid(kw, "a state name must not be empty")
        _check_name(k, kw, "a state name")

    inputs = _encode_array_map(node.inputs, _key(where, "inputs"), "inputs", _check_port)
    state = _encode_array_map(node.state, _key(where, "state"), "state", state_key)
    return {"id": node_id, "block": block, "label": label, "position": pos, "attrs": attrs,
            "inputs": inputs, "state": state}


def _compact(v) -> str:
    return json.dumps(v, ensure_ascii=False, separators=(", ", ": "), allow_nan=False)


def _fmt_array(a: dict, ind: str) -> str:
    if "data" in a:  # base64 objects (large arrays) are always written over several lines
        c = _compact(a)
        if len(c) <= _INLINE_WIDTH:
            return c
    inner = ind + "  "
    parts = [f'{inner}"dtype": {_compact(a["dtype"])}', f'{inner}"shape": {_compact(a["shape"])}']
    if "data" in a:
        data, shape = a["data"], a["shape"]
        per = shape[-1] if len(shape) >= 2 and 1 <= shape[-1] <= 16 else 8
        rows = [_compact(data[i:i + per])[1:-1] for i in range(0, len(data), per)]
        body = ",\n".join(f"{inner}  {r}" for r in rows)
        parts.append(f'{inner}"data": [\n{body}\n{inner}]' if rows else f'{inner}"data": []')
    else:
        parts.append(f'{inner}"base64": "{a["base64"]}"')  # the base64 alphabet needs no escapes
    return "{\n" + ",\n".join(parts) + "\n" + ind + "}"


def _fmt_value(v, ind: str) -> str:
    """A JSON value: on one line if short, else one member/element per line."""
    if isinstance(v, _ArrayJSON):
        return _fmt_array(v, ind)
    c = _compact(v)
    if len(c) <= _INLINE_WIDTH or not v or not isinstance(v, (list, dict)):
        return c
    inner = ind + "  "
    if isinstance(v, list):
        return "[\n" + ",\n".join(inner + _fmt_value(x, inner) for x in v) + "\n" + ind + "]"
    return _fmt_members(v, ind)


def _fmt_members(d: dict, ind: str) -> str:
    """An object with one member per line (``{}`` when empty)."""
    if not d:
        return "{}"
    inner = ind + "  "
    return ("{\n" + ",\n".join(f"{inner}{_compact(k)}: {_fmt_value(v, inner)}"
                               for k, v in d.items()) + "\n" + ind + "}")


def _fmt_list(items: list, ind: str, fmt) -> str:
    if not items:
        return "[]"
    inner = ind + "  "
    return "[\n" + ",\n".join(inner + fmt(x, inner) for x in items) + "\n" + ind + "]"


def _fmt_node(n: dict, ind: str) -> str:
    i = ind + "  "
    return ("{\n"
            f'{i}"id": {_compact(n["id"])},\n'
            f'{i}"block": {_compact(n["block"])},\n'
            f'{i}"label": {_compact(n["label"])},\n'
            f'{i}"position": {_compact(n["position"])},\n'
            f'{i}"attrs": {_fmt_members(n["attrs"], i)},\n'
            f'{i}"inputs": {_fmt_members(n["inputs"], i)},\n'
            f'{i}"state": {_fmt_members(n["state"], i)}\n'
            f"{ind}}}")


def _fmt_page(p: dict, ind: str) -> str:
    i = ind + "  "
    return ("{\n"
            f'{i}"name": {_compact(p["name"])},\n'
            f'{i}"text": {_compact(p["text"])},\n'
            f'{i}"loss": {_compact(p["loss"])},\n'
            + (f'{i}"metrics": {_compact(p["metrics"])},\n' if p.get("metrics") else "")
            + f'{i}"nodes": {_fmt_list(p["nodes"], i, _fmt_node)},\n'
            f'{i}"edges": {_fmt_list(p["edges"], i, lambda e, _: _compact(e))},\n'
            f'{i}"feeds": {_fmt_members(p["feeds"], i)}\n'
            f"{ind}}}")


def _format_document(doc: dict) -> str:
    return ("{\n"
            f'  "format": {_compact(doc["format"])},\n'
            f'  "version": {doc["version"]},\n'
            f'  "metadata": {_fmt_members(doc["metadata"], "  ")},\n'
            f'  "pages": {_fmt_list(doc["pages"], "  ", _fmt_page)}\n'
            "}\n")


def dumps_project(project: Project, *, path="<project>") -> str:
    """The project as the text of a project file (ends with a newline).

    Raises ProjectFileError(path, where, problem) if the project cannot be written in a form
    that loads back (a dangling edge, an invalid id, an attr of an unsupported type, ...).
    """
    try:
        return _format_document(_encode_document(project))
    except _Invalid as exc:
        raise ProjectFileError(path, exc.where, exc.problem) from None


#: a temporary file left by a save that crashed is removed by a later save once it is this old
STALE_TEMPORARY_SECONDS = 60.0


def _remove_stale_temporaries(target: str) -> None:
    """Remove ``.NAME.xxxxxxxx.tmp`` files (of ``target`` and its backup) left by saves that
    were killed, once they are old enough not to belong to a save still running elsewhere."""
    directory = os.path.dirname(target) or "."
    names = {ownfiles.temporary_stem(os.path.basename(p)) for p in (target, backup_path(target))}
    now = time.time()
    try:
        entries = os.listdir(directory)
    except OSError:
        return
    for entry in entries:
        if not (entry.startswith(".") and entry.endswith(".tmp")):
            continue
        stem, _, token = entry[1:-4].rpartition(".")
        if stem not in names or len(token) != 8 or any(c not in "0123456789abcdef" for c in token):
            continue
        full = os.path.join(directory, entry)
        try:
            st = os.lstat(full)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and now - st.st_mtime > STALE_TEMPORARY_SECONDS:
            ownfiles.unlink_quietly(full)


#: the suffix of the backup kept of the previous version when a project file is overwritten
BACKUP_SUFFIX = ".bak"


def backup_path(path) -> str:
    """Where :func:`save_project` keeps the previous version of ``path`` (when that name holds
    nothing but its own earlier backup; else a variant, see :class:`SaveResult`)."""
    return os.fspath(path) + BACKUP_SUFFIX


@dataclass(frozen=True)
class SaveResult:
    """What :func:`save_project` did besides writing the file."""

    path: str                   #: the file written (as given)
    backup: str | None = None   #: where the previous version was kept (None: no backup made)
    notes: tuple = ()           #: things to tell the user: a backup kept under another name


def _keep_backup(target: str) -> tuple[ownfiles.Placed | None, str]:
    """Keep the current ``target`` as its backup before it is replaced: a hard link to it (a
    copy where links are not possible) made under a temporary name and moved onto the backup's
    name, so ``target`` exists at every moment. The backup's name holds blockflow's own earlier
    backup or nothing; a symlink, a folder or a file blockflow did not write there is left alone
    and the backup goes to a variant (``NAME-1.bak``). Returns (where it went, a note or "")."""
    wanted = backup_path(target)
    try:
        placed = ownfiles.link_own(target, wanted, suffix=BACKUP_SUFFIX)
    except ownfiles.OwnFileError as exc:
        return None, f"no backup of the previous version was kept: {exc}"
    except OSError as exc:
        if exc.errno != errno.ENAMETOOLONG:
            raise
        return None, (f"no backup of the previous version was kept: its name {wanted} would be longer "
                      f"than the file system allows")
    note = placed.note("the backup of the previous version") if placed.moved else ""
    return placed, note


def save_project(project: Project, path, *, backup: bool = True) -> SaveResult:
    """Write ``project`` to ``path`` atomically.

    The text is written to a temporary file in the same directory (created exclusively, never
    through a link), flushed and fsynced, then moved onto ``path`` with ``os.replace`` and the
    directory fsynced. On any failure the old file is untouched and the temporary file removed.
    An existing file keeps its permission bits; a symlink is followed (the file it points to is
    replaced, the link stays). With ``backup`` (the default) the version being replaced is kept
    as ``path + ".bak"`` when that name is free or holds blockflow's own earlier backup, else
    under a variant (``NAME-1.bak``), which the result's ``notes`` tell. The project's
    ``base_dir`` becomes the file's folder (dataset blocks read their files from there).
    Raises ProjectFileError if the project cannot be written, ``path`` cannot name a file (empty,
    ending in ``/``, a folder, a name too long) or the file system refuses.
    """
    name = os.fspath(path)
    problem = ownfiles.name_problem(name)
    if problem:
        raise ProjectFileError(name or "''", "", f"cannot save: {problem}")
    data = dumps_project(project, path=name).encode("utf-8")
    target = os.path.realpath(name)
    directory = os.path.dirname(target) or "."
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise ProjectFileError(name, "", f"cannot save: {exc.strerror or exc}") from None
    tmp = None
    kept, notes = None, []
    try:
        # 0o666 minus the umask, like any new file; exclusive, under a new name, never a link
        fd, tmp = ownfiles.create_temporary(directory, os.path.basename(target))
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
            if backup:
                kept, note = _keep_backup(target)
                if note:
                    notes.append(note)
        os.replace(tmp, target)
        tmp = None
    except OSError as exc:
        if kept is not None and not kept.replaced:    # a backup this failed save made: not needed
            ownfiles.withdraw(kept)
        raise ProjectFileError(name, "", f"cannot save: {exc.strerror or exc}") from exc
    finally:
        if tmp is not None:
            ownfiles.unlink_quietly(tmp)
    ownfiles.fsync_dir(directory)
    _remove_stale_temporaries(target)
    project.base_dir = os.path.dirname(os.path.abspath(name))   # where its data files now live
    return SaveResult(name, kept.path if kept is not None else None, tuple(notes))
