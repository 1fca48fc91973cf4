"""The one boundary between project text and generated source: identifiers and literals.

Node ids, page names, labels and texts come from a file anyone may have written. Generated code
only ever holds them as identifiers made here (letters, digits and ``_``; never a keyword or a
name the generated file itself uses) or as literals made here (``repr`` of plain Python values,
which escapes every quote and line break, and ``ascii`` for comments' worth of text).
"""
from __future__ import annotations

import keyword
import math
import re

import numpy as np

__all__ = ["Names", "Scopes", "identifier", "scoped_identifier", "literal", "comment_text"]

_NOT_IDENT = re.compile(r"[^0-9A-Za-z_]+")
#: names the generated files use themselves, never given to a value
RESERVED = frozenset({"torch", "nn", "math", "self", "F", "os", "sys", "Path", "np", "onnx", "helper",
                      "super", "None", "True", "False", "print", "range", "len", "int", "float",
                      "tuple", "list", "dict", "zip", "sum", "min", "max", "abs", "object", "type",
                      "isinstance", "getattr", "setattr", "open", "exec", "eval", "compile",
                      "__import__", "globals", "locals", "vars", "input", "argparse", "json",
                      "time", "random", "Model", "OUTPUTS", "INPUTS",
                      # the module-level functions of the files forward calls by name
                      "draw_initial", "load_initial", "apply_gradient_descent", "apply_momentum",
                      "apply_adam", "apply_rms_prop", "apply_adagrad", "apply_adadelta", "apply_ftrl"})


def identifier(text: str, fallback: str = "v") -> str:
    """A plain-ASCII identifier that reads like ``text`` (``d1/MatMul_1`` -> ``d1_MatMul_1``)."""
    name = _NOT_IDENT.sub("_", str(text)).strip("_")[:60] or fallback
    if name[0].isdigit():
        name = f"{fallback}_{name}"
    if keyword.iskeyword(name) or keyword.issoftkeyword(name) or name in RESERVED or name.startswith("__"):
        name = f"{name}_"
    return name


def scoped_identifier(text: str, fallback: str = "v") -> str:
    """:func:`identifier` of each ``/``-separated scope of ``text``, joined by ``/``
    (``d1/MatMul_1`` stays ``d1/MatMul_1``, ``d 1/if`` becomes ``d_1/if_``): the names of ONNX
    nodes, whose scopes are how viewers and importers (blockflow's own) see a model's units."""
    return "/".join(identifier(part, fallback) for part in str(text).split("/"))


class Scopes:
    """:func:`scoped_identifier` with each scope unique for its text: instances ``d-1``, ``d.1``
    and ``d_1`` are scopes ``d_1``, ``d_1_2`` and ``d_1_3`` (in the order first asked), so that
    each keeps a unit of its own. Called like scoped_identifier (``Names(make=Scopes())``)."""

    def __init__(self):
        self._given: dict = {}     # a scope's text path -> its identifier
        self._taken: dict = {}     # the identifiers taken inside one parent scope

    def __call__(self, text: str, fallback: str = "v") -> str:
        parts = str(text).split("/")
        out: list = []
        for i, part in enumerate(parts[:-1]):
            key = tuple(parts[:i + 1])
            name = self._given.get(key)
            if name is None:
                taken = self._taken.setdefault(tuple(out), set())
                base = name = identifier(part, fallback)
                n = 1
                while name in taken:
                    n += 1
                    name = f"{base}_{n}"
                taken.add(name)
                self._given[key] = name
            out.append(name)
        out.append(identifier(parts[-1], fallback))
        return "/".join(out)


class Names:
    """Unique identifiers in one scope: the same text asked twice gets the same name, two texts
    that sanitise alike get ``_2``, ``_3``... ``make`` sanitises (identifier, scoped_identifier)."""

    def __init__(self, taken=(), make=identifier):
        self._taken = set(taken)
        self._given: dict = {}
        self._make = make

    def __call__(self, key, text: str | None = None, fallback: str = "v") -> str:
        found = self._given.get(key)
        if found is not None:
            return found
        base = self._make(key if text is None else text, fallback)
        name, n = base, 1
        while name in self._taken:
            n += 1
            name = f"{base}_{n}"
        self._taken.add(name)
        self._given[key] = name
        return name

    def fresh(self, base: str) -> str:
        """A new name never given before (for temporaries)."""
        return self(object(), base)


def literal(value) -> str:
    """Python source for a plain value: None, bool, int, float (inf and nan spelled through
    ``math``), str, and lists/tuples/dicts of them; numpy scalars and small arrays as their
    Python values. Anything else is refused (TypeError): nothing is ever written with ``str()``."""
    if value is None or isinstance(value, (bool, str)):
        return repr(value)
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        return repr(int(value))
    if isinstance(value, np.bool_):
        return repr(bool(value))
    if isinstance(value, (float, np.floating)):
        v = float(value)
        if math.isnan(v):
            return "math.nan"
        if math.isinf(v):
            return "math.inf" if v > 0 else "-math.inf"
        return repr(v)
    if isinstance(value, np.ndarray):
        return literal(value.tolist())
    if isinstance(value, tuple):
        inner = ", ".join(literal(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, list):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{literal(k)}: {literal(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"no literal for a {type(value).__name__}")


def comment_text(text: str, limit: int = 80) -> str:
    """Text safe inside a ``#`` comment or a docstring: ASCII, no line breaks, no quotes or
    backslashes that could end a string, cut to ``limit`` characters."""
    shown = ascii(str(text))[1:-1]          # escapes every non-ASCII character and line break
    shown = shown.replace("\\", "/").replace('"', "'")
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."
