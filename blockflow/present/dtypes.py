"""Dtype classes: the four kinds of value the editor colours ("float", "int", "bool", "any").

Qt-free, so the node view data (nodeview.py) and the run summaries (values.py) classify the same
way; the GUI's theme maps each class to a colour.
"""
from __future__ import annotations

__all__ = ["dtype_class", "DTYPE_CLASSES"]

#: every class dtype_class answers
DTYPE_CLASSES = ("float", "int", "bool", "any")

_FLOAT = frozenset({"float", "float16", "float32", "float64"})
_INT = frozenset({"int", "int8", "int16", "int32", "int64", "uint8"})


def dtype_class(name) -> str:
    """A dtype name, a numpy dtype or a spec constraint -> "float", "int", "bool" or "any"."""
    if name is None:
        return "any"
    kind = getattr(name, "kind", None)
    if kind is not None:
        return {"f": "float", "i": "int", "u": "int", "b": "bool"}.get(kind, "any")
    if name in _FLOAT:
        return "float"
    if name in _INT:
        return "int"
    if name == "bool":
        return "bool"
    return "any"
