"""The checks the reader and the writer share: the internal error that names a place in the
file (:class:`_Invalid`), JSON paths, descriptions of found values, and the rules for texts, names,
objects, page names, node ids, ports, edges' ends, the loss and the metrics.
"""
from __future__ import annotations

import difflib
import json

import numpy as np

from blockflow.io.rules import _DIGITS_RE, _PLAIN_KEY_RE, _PORT_RE
from blockflow.project import name_problem, page_name_problem, text_problem, valid_node_id

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
