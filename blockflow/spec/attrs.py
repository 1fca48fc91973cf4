"""Attrs: a block's typed parameters, and the table of attr kinds that checks their values.

An attr kind (int, float, bool, str, choice, dtype, shape, ints, tensor, dims) is one entry of
:data:`ATTR_KINDS`: how a value is checked and made canonical, and how it is described. Adding
a kind is adding an entry (the inspector keys its editors by the same names). Every check of an
attr value, wherever it is made (the inspector, the document, the compiler), goes through
:meth:`Attr.validate`, or :meth:`BlockSpec.check_attr <blockflow.spec.BlockSpec.check_attr>` when
only the attr's name is at hand.

Part of the block declaration API; blocks import it through :mod:`blockflow.spec`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from blockflow.spec.tensors import DTYPE_NAMES


class AttrError(ValueError):
    """An attr value does not satisfy its declaration."""


class UnknownAttrError(AttrError):
    """A value is given for an attr the block does not declare."""


_NO_DEFAULT = object()

#: The range of every integer an attr holds (int attrs, the entries of ints, shape and dims
#: attrs): int64's, what TensorFlow's and ONNX's int attrs hold and what numpy indexes and counts
#: with. A file may hold an integer of any size; one past this would pass the check only to
#: overflow where the block hands it to numpy (OverflowError at run time).
INT_MIN, INT_MAX = -2 ** 63, 2 ** 63 - 1


@dataclass(frozen=True)
class Attr:
    """A typed block parameter with a default and validation.

    kinds: int, float, bool, str, choice (one of ``choices``), dtype (a dtype name), shape (a
    list of sizes, -1 or None for unknown), ints (a list of ints), tensor (an array); see
    :data:`ATTR_KINDS`.

    ``min`` and ``max`` bound an int or float attr, and each integer of an ints, shape or dims
    attr. Every such integer is held to :data:`INT_MIN`..:data:`INT_MAX` besides, whatever the
    declaration says.

    ``fits`` (tensor attrs): the name of the dtype attr the tensor becomes (Const's ``value`` is
    cast to its ``dtype``): every number must fit it (:func:`fit_dtype`), checked with the
    block's other attrs.
    """

    name: str
    kind: str
    default: Any = _NO_DEFAULT
    choices: tuple = ()
    min: float | None = None
    max: float | None = None
    doc: str = ""
    fits: str = ""

    @property
    def required(self) -> bool:
        return self.default is _NO_DEFAULT

    @property
    def options(self) -> tuple:
        """The values a picker offers for this attr: its choices (a dtype attr without choices:
        every dtype); () for kinds that are typed rather than picked."""
        entry = ATTR_KINDS.get(self.kind)
        return entry.options(self) if entry is not None and entry.options is not None else ()

    def validate(self, value):
        """Return the value in canonical form or raise AttrError saying what is wrong."""
        entry = ATTR_KINDS.get(self.kind)
        if entry is None:
            raise AttrError(f"unknown attr kind {self.kind!r}")
        return entry.check(self, value)


@dataclass(frozen=True)
class AttrKind:
    """One kind of attr value."""

    name: str
    #: ``check(attr, value)``: the value in canonical form, or AttrError saying what is wrong
    check: Callable[[Attr, Any], Any]
    #: what a value looks like, for people (an editor's placeholder, a reference)
    hint: str
    #: ``options(attr)``: the values to pick from, for kinds that are picked from a list
    options: Callable[[Attr], tuple] | None = None
    #: a declaration of this kind must list its ``choices``
    needs_choices: bool = False


def _check_bool(attr: Attr, value):
    if not isinstance(value, (bool, np.bool_)):
        raise AttrError(f"expected true or false, got {value!r}")
    return bool(value)


def _number(value):
    """``value`` as a number, or AttrError. A 0-d array of numbers is the number it holds: a
    project file writes a numpy scalar, and a float JSON cannot spell (inf), as one."""
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iuf":
        value = value[()]
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
        raise AttrError(f"expected a number, got {value!r}")
    return value


def _shown(value) -> str:
    """A number as a message quotes it; an integer too long to read, by its count of digits (a
    file may hold one of thousands)."""
    if isinstance(value, (int, np.integer)) and len(str(abs(int(value)))) > 40:
        digits, sign = len(str(abs(int(value)))), "-" if value < 0 else ""
        return f"an integer of {digits} digits (about {sign}10^{digits - 1})"
    return str(value)


def _check_range(attr: Attr, value, what="must be", given=None):
    """``value`` in the attr's declared range; ``given``: the value as written, when it was not
    ``value`` itself (1e308 for an int attr)."""
    given = value if given is None else given
    if attr.min is not None and value < attr.min:
        raise AttrError(f"{what} at least {attr.min}, got {_shown(given)}")
    if attr.max is not None and value > attr.max:
        raise AttrError(f"{what} at most {attr.max}, got {_shown(given)}")
    return value


def _int64(value: int, what="must be", given=None) -> int:
    if not INT_MIN <= value <= INT_MAX:
        bound = f"at least {INT_MIN}, the smallest" if value < 0 else f"at most {INT_MAX}, the largest"
        raise AttrError(f"{what} {bound} int64, got {_shown(value if given is None else given)}")
    return value


def _check_int(attr: Attr, value):
    value = _number(value)
    # a Python int of any size is whole: float() of one beyond 1.8e308 would overflow
    if not isinstance(value, (int, np.integer)) and (
            not math.isfinite(float(value)) or float(value) != int(value)):
        raise AttrError(f"expected an integer, got {value!r}")
    return _int64(_check_range(attr, int(value), given=value), given=value)


def _check_float(attr: Attr, value):
    value = _number(value)
    try:
        value = float(value)
    except OverflowError:   # an int past float64's largest, about 1.8e308
        raise AttrError(f"expected a number a float64 holds (at most about 1.8e308), got {_shown(value)}") from None
    if math.isnan(value):
        raise AttrError("expected a number, got NaN")
    return _check_range(attr, value)


def _check_str(attr: Attr, value):
    if not isinstance(value, str):
        raise AttrError(f"expected a string, got {value!r}")
    return value


def _check_choice(attr: Attr, value):
    if value not in attr.choices:
        raise AttrError(f"expected one of {', '.join(map(str, attr.choices))}; got {value!r}")
    return value


def _dtype_options(attr: Attr) -> tuple:
    return tuple(attr.choices) or DTYPE_NAMES


def _check_dtype(attr: Attr, value):
    allowed = attr.choices or DTYPE_NAMES
    if isinstance(value, np.dtype):
        value = value.name
    if value not in allowed:
        raise AttrError(f"expected a dtype ({', '.join(allowed)}), got {value!r}")
    return value


def _int_list(attr: Attr, value, open_sizes: bool) -> tuple:
    """A list of integers as a tuple; ``open_sizes`` (a shape): None or -1 is an unknown size
    (None), and the others are sizes (at least 0)."""
    if not isinstance(value, (list, tuple)):
        raise AttrError(f"expected a list of integers, got {value!r}")
    return tuple(_list_int(attr, i, v, open_sizes, value) for i, v in enumerate(value))


def _list_int(attr: Attr, i: int, v, open_sizes: bool, whole):
    """Entry ``i`` of an ints, shape or dims attr (``whole``): an integer in the attr's range and
    an int64; with ``open_sizes``, a size or None (-1 or None: unknown)."""
    if open_sizes and (v is None or (isinstance(v, (int, np.integer)) and v == -1)):
        return None
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise AttrError(f"expected a list of integers, got {whole!r}")
    if open_sizes and v < 0:
        raise AttrError(f"sizes must be at least 0 (or -1 for unknown), got {v}")
    n = int(v)
    if INT_MIN <= n <= INT_MAX and (attr.min is None or n >= attr.min) and (attr.max is None or n <= attr.max):
        return n   # the common case, without the message's words (every entry of every list attr)
    what = f"entry {i} must be"
    return _int64(_check_range(attr, n, what), what)


def _check_dims(attr: Attr, value):
    """A composite port's shape: None (any shape), or a list whose items are sizes (-1 or None:
    open) or names of dimensions (``"batch"``), which bind to the sizes an instance is fed."""
    if value is None:
        return None
    if not isinstance(value, (list, tuple)):
        raise AttrError(f"expected a list of sizes or dimension names, e.g. [\"batch\", 784], got {value!r}")
    out = []
    for i, v in enumerate(value):
        if isinstance(v, str):
            if not v.isidentifier():
                raise AttrError(f"a dimension name is a plain identifier (letters, digits, _), got {v!r}")
            out.append(v)
        else:
            out.append(_list_int(attr, i, v, True, value))
    return tuple(out)


def _check_tensor(attr: Attr, value):
    if value is None:
        return None
    try:
        arr = np.asarray(value)
    except Exception as exc:  # ragged nested lists and the like
        raise AttrError(f"expected an array: {exc}") from None
    if arr.dtype == object or arr.dtype.kind not in "biuf":
        raise AttrError(f"expected an array of numbers, got {value!r}")
    return arr


#: Every attr kind by name: the one place a kind's values are checked and described.
ATTR_KINDS: dict[str, AttrKind] = {k.name: k for k in (
    AttrKind("int", _check_int, "a whole number"),
    AttrKind("float", _check_float, "a number"),
    AttrKind("bool", _check_bool, "true or false"),
    AttrKind("str", _check_str, "text"),
    AttrKind("choice", _check_choice, "one of the listed choices", options=lambda a: tuple(a.choices),
             needs_choices=True),
    AttrKind("dtype", _check_dtype, "a dtype name, e.g. float32", options=_dtype_options),
    AttrKind("shape", lambda a, v: _int_list(a, v, open_sizes=True), "sizes, e.g. [5] or [-1, 3] (-1: open)"),
    AttrKind("ints", lambda a, v: _int_list(a, v, open_sizes=False), "integers, e.g. [0, 1]"),
    AttrKind("tensor", _check_tensor, "a number or nested list, e.g. [1.0, 2.0]"),
    AttrKind("dims", _check_dims, 'sizes or dimension names, e.g. ["batch", 784] (-1: open; empty: any shape)'),
)}
