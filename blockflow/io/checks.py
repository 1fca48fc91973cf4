"""The checks the reader and the writer share: the internal error that names a place in the
file (:class:`Invalid`), JSON paths, descriptions of found values, and the rules for texts, names,
objects, page names, node ids, ports, edges' ends, the loss and the metrics.
"""
from __future__ import annotations

import json
from itertools import repeat

import numpy as np

from blockflow.io.rules import DIGITS_RE, PLAIN_KEY_RE, PORT_RE
from blockflow.project import name_problem, page_name_problem, text_problem, valid_node_id

# --------------------------------------------------------------------------------------------
# Small helpers


class Invalid(Exception):
    """Internal: a problem at a place; turned into a ProjectFileError naming the file."""

    def __init__(self, where: str, problem: str):
        super().__init__(where, problem)
        self.where, self.problem = where, problem


class BadConstant:
    """What the JSON parser returns for NaN/Infinity tokens (not JSON): reported with a path."""

    def __init__(self, token: str):
        self.token = token


class DupDict(dict):
    """A JSON object in which a key appeared more than once (``dup`` is the first such key)."""

    dup = ""


class ArrayJSON(dict):
    """Marks an encoded array object so the formatter lays it out as one."""


def object_pairs(pairs):
    d = dict(pairs)
    if len(d) != len(pairs):
        seen = set()
        for k, _ in pairs:
            if k in seen:
                break
            seen.add(k)
        d = DupDict(d)
        d.dup = k
    return d


def key_path(where: str, key) -> str:
    """The JSON path of ``key`` inside the object at ``where``."""
    key = str(key)
    if PLAIN_KEY_RE.fullmatch(key):
        return f"{where}.{key}" if where else key
    return f"{where}[{json.dumps(key, ensure_ascii=False)}]"


def short_text(s: str, n: int = 60) -> str:
    if len(s) > n:
        s = s[:n] + "…"
    return json.dumps(s, ensure_ascii=False)


def describe(v) -> str:
    if isinstance(v, BadConstant):
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
        return f"the string {short_text(v)}"
    if isinstance(v, list):
        return "a list"
    if isinstance(v, dict):
        return "an object"
    if isinstance(v, np.ndarray):
        return f"a numpy array of {v.dtype}"
    return f"a value of type {type(v).__name__}"


def natural_key(s: str):
    """Sort key that puts ``Add_2`` before ``Add_10`` (ties broken by the plain string)."""
    parts = DIGITS_RE.split(s)
    # the runs of digits (split keeps them at odd places) as numbers: read in base 16, which orders
    # runs of the digits 0-9 as base 10 does, and which, unlike int(run), is not refused past 4300
    # digits (sys.get_int_max_str_digits: a file's node id or attr name of 5000 digits loaded but
    # could not be saved)
    parts[1::2] = map(int, parts[1::2], repeat(16))
    return parts, s


def check_text(s, where: str, what: str) -> str:
    """``s`` must be a str that UTF-8 can encode (no lone surrogates)."""
    if not isinstance(s, str):
        raise Invalid(where, f"{what} must be a string, found {describe(s)}")
    if s.isascii() and "\x00" not in s:     # the common case, checked in C
        return s
    try:
        s.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise Invalid(where, f"{what} contains a lone surrogate (U+{ord(s[exc.start]):04X}), "
                              "which cannot be written as UTF-8") from None
    problem = text_problem(s)
    if problem:
        raise Invalid(where, f"{what} {problem}")
    return s


def check_name(s, where: str, what: str) -> str:
    """``s`` must be text without control characters (a block, attr or state name)."""
    check_text(s, where, what)
    problem = name_problem(s, what)
    if problem:
        raise Invalid(where, problem)
    return s


def check_object(obj, where: str, what: str, allowed: tuple, required: tuple = ()) -> dict:
    """``obj`` must be a JSON object with keys from ``allowed`` and all of ``required``."""
    if not isinstance(obj, dict):
        raise Invalid(where, f"{what} must be an object, found {describe(obj)}")
    if isinstance(obj, DupDict):
        raise Invalid(key_path(where, obj.dup), f"the key '{obj.dup}' appears twice")
    for k in obj:
        if k not in allowed:
            import difflib      # only for a file with an unknown key: not on every start

            hint = difflib.get_close_matches(k, allowed, n=1)
            did = f"; did you mean '{hint[0]}'?" if hint else ""
            raise Invalid(key_path(where, k), f"unknown key '{k}' in {what} "
                                           f"(allowed: {', '.join(allowed)}){did}")
    for k in required:
        if k not in obj:
            raise Invalid(key_path(where, k), f"missing: {what} needs a '{k}'")
    return obj


def check_mapping(obj, where: str, what: str) -> dict:
    """A JSON object with free keys (attrs, inputs, state, feeds)."""
    if not isinstance(obj, dict):
        raise Invalid(where, f"{what} must be an object, found {describe(obj)}")
    if isinstance(obj, DupDict):
        raise Invalid(key_path(where, obj.dup), f"the key '{obj.dup}' appears twice")
    for k in obj:
        if not isinstance(k, str):
            raise Invalid(where, f"{what} keys must be strings, found {describe(k)}")
        check_text(k, key_path(where, k), "a key")
    return obj


# --------------------------------------------------------------------------------------------
# Names shared by the reader and the writer


def check_page_name(name, where: str, seen: dict) -> str:
    check_text(name, where, "a page name")
    problem = page_name_problem(name)
    if problem:
        raise Invalid(where, f"page name {short_text(name)}: {problem}" if name else problem)
    if name in seen:
        raise Invalid(where, f"duplicate page name {short_text(name)} (also pages[{seen[name]}])")
    return name


def check_node_id(node_id, where: str) -> str:
    if not isinstance(node_id, str):
        raise Invalid(where, f"a node id must be a string, found {describe(node_id)}")
    if not valid_node_id(node_id):
        raise Invalid(where, f"{short_text(node_id)} is not a valid node id (a letter or _, then "
                              "letters, digits, _ . -)")
    return node_id


def check_port(port, where: str) -> str:
    if not isinstance(port, str):
        raise Invalid(where, f"a port name must be a string, found {describe(port)}")
    if not PORT_RE.fullmatch(port):
        raise Invalid(where, f"{short_text(port)} is not a valid port name (like x, output or "
                              "inputs[2])")
    return port


def check_endpoint(node: str, port: str, where: str, nodes, page: str) -> None:
    check_node_id(node, where)
    check_port(port, where)
    if node not in nodes:
        raise Invalid(where, f"no node '{node}' on page '{page}' (a dangling edge)")


def parse_endpoint(s, where: str, nodes, page: str) -> tuple[str, str]:
    if not isinstance(s, str):
        raise Invalid(where, f"must be a string \"node:port\", found {describe(s)}")
    node, sep, port = s.partition(":")
    if not sep or not node or not port:
        raise Invalid(where, f"{short_text(s)} is not of the form \"node:port\"")
    check_endpoint(node, port, where, nodes, page)
    return node, port


def check_metrics(metrics, where: str, nodes, page: str) -> list:
    if not isinstance(metrics, list):
        raise Invalid(where, f"metrics must be a list of \"node\" or \"node:port\" strings, found "
                              f"{describe(metrics)}")
    if len(metrics) > 1000:
        raise Invalid(where, f"{len(metrics)} metrics; the limit is 1000")
    seen = set()
    for k, m in enumerate(metrics):
        check_loss(m, f"{where}[{k}]", nodes, page, what="a metric")
        if m in seen:
            raise Invalid(f"{where}[{k}]", f"{short_text(m)} is listed twice")
        seen.add(m)
    return list(metrics)


def check_loss(loss, where: str, nodes, page: str, what: str = "the loss") -> str:
    if not isinstance(loss, str):
        raise Invalid(where, f"{what} must be {'null or ' if what == 'the loss' else ''}a string \"node\" "
                              f"or \"node:port\", found {describe(loss)}")
    node, sep, port = loss.partition(":")
    if not node or (sep and not port):
        raise Invalid(where, f"{short_text(loss)} is not of the form \"node\" or \"node:port\"")
    check_node_id(node, where)
    if sep:
        check_port(port, where)
    if node not in nodes:
        raise Invalid(where, f"{what} names no node on page '{page}': there is no '{node}'")
    return loss
