"""The common node and wire of a project file, read in one pass (and the tests of a plain name
and attr value the writer's own one-pass way shares, io/writer.py).

Checking a node the general way (reader._decode_node) builds the JSON path of every member it
looks at, in case that member is wrong: ten f-strings and a dozen calls a node, two thirds of
loading a 100k-block file. Almost every node and wire of a file blockflow wrote is plain: ASCII
names, a position of two finite floats, attrs that are scalars or flat lists of them, no inline
constants or state. Those are read here with no path made. Anything else (or anything wrong)
makes these functions return None, and the caller reads the item the general way, which accepts
or refuses it and names the place: this is a subset of what that accepts, giving the same
Node or Edge (tests/test_plain_items.py compares both on valid and mutated items).
"""
from __future__ import annotations

import math

from blockflow.io.rules import EDGE_KEYS, NODE_KEYS, ORIGIN, PLAIN_INT_BITS, PORT_RE
from blockflow.project import Edge, Node
from blockflow.textsafe import valid_node_id

_NODE_KEYS = frozenset(NODE_KEYS)
_EDGE_KEYS = frozenset(EDGE_KEYS)
_SCALARS = (bool, type(None))
#: an int this large may pass Python's limit on the digits of an int as text (4,300 by default):
#: the general way decides (io/values.py)
_PLAIN_INT = 1 << PLAIN_INT_BITS


def plain_name(s) -> bool:
    """A block or attr name check_name accepts without looking further: ASCII, no control
    character (for ASCII text, isprintable is False exactly for C0 controls and DEL)."""
    return type(s) is str and s.isascii() and s.isprintable()


def plain_value(v) -> bool:
    """An attr value decode_value keeps as it is: a scalar, or a flat list of scalars (an ASCII
    string without NUL, a finite float, an int, a bool, null)."""
    t = type(v)
    if t is list:
        return all(_plain_scalar(x) for x in v)
    return _plain_scalar(v)


def _plain_scalar(x) -> bool:
    t = type(x)
    if t is str:
        return x.isascii() and "\x00" not in x
    if t is float:
        return math.isfinite(x)
    if t is int:
        return -_PLAIN_INT < x < _PLAIN_INT
    return t in _SCALARS


def plain_node(obj, good_names: set):
    """The Node of ``obj`` when it is a plain node (see the module's docstring), else None.
    ``good_names``: block and attr names already found plain in this file (most repeat)."""
    if type(obj) is not dict or not obj.keys() <= _NODE_KEYS:
        return None
    node_id, block = obj.get("id"), obj.get("block")
    if type(node_id) is not str or not valid_node_id(node_id) or type(block) is not str or not block:
        return None
    if block not in good_names:
        if not plain_name(block):
            return None
        good_names.add(block)
    label = obj.get("label", "")
    if type(label) is not str or not label.isascii() or "\x00" in label:
        return None
    collapsed = obj.get("collapsed", False)
    if collapsed is not True and collapsed is not False:
        return None
    xy = _plain_position(obj)
    if xy is None or obj.get("inputs") or obj.get("state"):
        return None
    attrs = obj.get("attrs", {})
    if type(attrs) is not dict or not plain_attrs(attrs, good_names):
        return None
    inputs, state = obj.get("inputs", {}), obj.get("state", {})
    if type(inputs) is not dict or type(state) is not dict:
        return None
    return Node(node_id, block, attrs, inputs, xy, label, state, collapsed)


def _plain_position(obj):
    """The (x, y) of a node with no position or one of two finite floats, else None."""
    position = obj.get("position")
    if position is None:    # omitted: the one shared origin, as the general way gives it
        return None if "position" in obj else ORIGIN
    return plain_xy(position)


def plain_xy(position):
    """(x, y) of a list or tuple of two finite floats, else None."""
    if type(position) not in (list, tuple) or len(position) != 2:
        return None
    x, y = position
    if type(x) is not float or type(y) is not float or not (math.isfinite(x) and math.isfinite(y)):
        return None
    return x, y


def plain_attrs(attrs: dict, good_names: set) -> bool:
    """Whether every attr of ``attrs`` has a plain name and a plain value (``good_names``: names
    found plain already, added to)."""
    for k, v in attrs.items():
        if k not in good_names:
            if not plain_name(k):
                return False
            good_names.add(k)
        if not plain_value(v):
            return False
    return True


def plain_edge(obj, nodes, good_ports: set):
    """The Edge of ``obj`` when it is a plain wire between nodes of ``nodes``, else None.
    ``good_ports``: port names already found valid in this file."""
    if type(obj) is not dict or obj.keys() != _EDGE_KEYS:
        return None
    src, dst = obj["from"], obj["to"]
    if type(src) is not str or type(dst) is not str:
        return None
    src, sep, src_port = src.partition(":")
    dst, sep2, dst_port = dst.partition(":")
    # a node in `nodes` has a valid id already; an empty name or port is in none of the sets
    if not (sep and sep2 and src in nodes and dst in nodes):
        return None
    for port in (src_port, dst_port):
        if port not in good_ports:
            if not PORT_RE.fullmatch(port):
                return None
            good_ports.add(port)
    return Edge(src, src_port, dst, dst_port)
