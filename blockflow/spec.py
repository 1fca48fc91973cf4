"""The block declaration API: ports, attrs, tensor types and the @block decorator.

Block packages import only this module and numpy. It must not import anything else of blockflow.
"""
from __future__ import annotations

import contextvars
import inspect
import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

__all__ = [
    "Attr", "BlockSpec", "BlockDeclarationError", "Input", "InputList", "Output", "OutputList",
    "ShapeError",
    "TensorType", "AttrError", "block", "broadcast_shapes", "unbroadcast", "normalize_axis",
    "reduce_shape", "DTYPE_NAMES", "FLOAT_DTYPES", "SCOPE_PORT",
    "MAX_TENSOR_BYTES", "AllocationError", "reserve", "allocation_guard",
    "fit_dtype",
]

#: Name of the implicit port every block has: it shows the page's scope and is never wired.
SCOPE_PORT = "scope"

DTYPE_NAMES = ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool")
FLOAT_DTYPES = frozenset({"float16", "float32", "float64"})
INT_DTYPES = frozenset({"int8", "int16", "int32", "int64", "uint8"})

#: Dtype constraints an input may declare. Any other identifier is a type variable (like TF's
#: attr ``T``): every input with the same variable must get the same dtype.
DTYPE_CLASSES = {
    "float": FLOAT_DTYPES,
    "int": INT_DTYPES,
    "bool": frozenset({"bool"}),
    "number": FLOAT_DTYPES | INT_DTYPES,
    "any": frozenset(DTYPE_NAMES),
}

# Keyword-only parameters the runtime supplies itself; a block may ask for them by name.
#: - ``rng``: a numpy Generator for this block in this run (forward and vjp get the same stream);
#: - ``needs``: (vjp) which inputs want a cotangent;
#: - ``data``: (forward) the run's DataRequest: ``step`` (a training step's number) and ``split``
#:   ("train", "test", "all"), for dataset blocks;
#: - ``files``: (infer, forward) the project's data files: ``table(path)`` -> (column names, 2-D
#:   float array) for .csv, ``arrays(path)`` -> {name: array} for .npy/.npz; paths are relative to
#:   the project's folder and may not leave it; None when the project has no folder.
CONTEXT_PARAMS = frozenset({"needs", "rng"})
FORWARD_CONTEXT = frozenset({"rng", "data", "files"})
INFER_CONTEXT = frozenset({"files"})


class BlockDeclarationError(TypeError):
    """A block class is declared wrongly; raised at import time, naming the block."""


class ShapeError(ValueError):
    """Raised by a block's ``infer`` when its inputs' shapes or dtypes do not fit together."""


class AttrError(ValueError):
    """An attr value does not satisfy its declaration."""


# --------------------------------------------------------------------------------------------
# Tensor types


_DTYPE_TYPE = {np.dtype(n): type(np.dtype(n)) for n in DTYPE_NAMES}


@dataclass(frozen=True, slots=True)
class TensorType:
    """Shape and dtype of a tensor known before running: ``None`` in a shape is an unknown size.

    ``value`` is set when the value itself is known at compile time (a constant).
    """

    shape: tuple
    dtype: np.dtype
    value: Any = field(default=None, compare=False, repr=False)

    def __post_init__(self):
        dtype = self.dtype
        if type(dtype) is not _DTYPE_TYPE.get(dtype):
            object.__setattr__(self, "dtype", np.dtype(dtype))
        shape = self.shape
        if type(shape) is not tuple or not all(type(d) is int or d is None for d in shape):
            object.__setattr__(self, "shape", tuple(None if d is None else int(d) for d in shape))

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def is_float(self) -> bool:
        return self.dtype.kind == "f"

    @property
    def size(self):
        """Number of elements, or None when a dimension is unknown."""
        if any(d is None for d in self.shape):
            return None
        return math.prod(self.shape)

    def with_shape(self, shape) -> "TensorType":
        return TensorType(tuple(shape), self.dtype)

    def with_dtype(self, dtype) -> "TensorType":
        return TensorType(self.shape, dtype)

    def describe(self) -> str:
        dims = ",".join("?" if d is None else str(d) for d in self.shape)
        return f"{self.dtype.name}[{dims}]"

    __str__ = describe

    @classmethod
    def of(cls, value) -> "TensorType":
        """The type of a concrete array, remembering the value."""
        arr = np.asarray(value)
        return cls(arr.shape, arr.dtype, arr)


def _dims_broadcast(a, b, shape_a, shape_b):
    if a == 1:
        return b
    if b == 1 or a == b:
        return a
    if a is None and b is None:
        return None
    if a is None:
        return b
    if b is None:
        return a
    raise ShapeError(f"shapes {_fmt(shape_a)} and {_fmt(shape_b)} do not broadcast")


def _fmt(shape) -> str:
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


def broadcast_shapes(*shapes) -> tuple:
    """numpy's broadcasting rule, also for shapes with unknown (None) sizes."""
    if len(shapes) == 2 and shapes[0] == shapes[1] and None not in shapes[0]:
        return tuple(shapes[0])
    result: tuple = ()
    for shape in shapes:
        shape = tuple(shape)
        n = max(len(result), len(shape))
        a = (1,) * (n - len(result)) + result
        b = (1,) * (n - len(shape)) + shape
        result = tuple(_dims_broadcast(x, y, result, shape) for x, y in zip(a, b))
    return result


def normalize_axis(axis, rank: int) -> tuple:
    """Axes as a sorted tuple of non-negative ints; ``None`` means every axis."""
    if axis is None:
        return tuple(range(rank))
    axes = np.asarray(axis).reshape(-1).tolist()
    out = []
    for a in axes:
        a = int(a)
        if not -rank <= a < rank:
            raise ShapeError(f"axis {a} is out of range for a tensor of rank {rank}")
        out.append(a % rank if rank else 0)
    if len(set(out)) != len(out):
        raise ShapeError(f"axis {axes} names an axis twice")
    return tuple(sorted(out))


def reduce_shape(shape, axis, keep_dims: bool) -> tuple:
    """The shape left after reducing ``axis`` (None: all axes)."""
    axes = normalize_axis(axis, len(shape))
    if keep_dims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def unbroadcast(g, shape):
    """Sum a cotangent back down to ``shape``: the one place broadcasting is undone."""
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    if lead and g.shape[lead:] == shape:  # the common bias case: only leading axes to sum
        return g.sum(axis=tuple(range(lead)))
    axes = tuple(range(lead)) + tuple(
        i + lead for i, d in enumerate(shape) if d == 1 and g.shape[i + lead] != 1
    )
    if axes:
        g = g.sum(axis=axes, keepdims=True)
    return g.reshape(shape)


# --------------------------------------------------------------------------------------------
# Values that must fit a dtype


def _show(v) -> str:
    """A number as the user would write it: 1000, 1.7, 1e+12, nan."""
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    if isinstance(v, (np.integer, int)):
        return str(int(v))
    f = float(v)
    if f == f and abs(f) < 1e15 and f == int(f):
        return str(int(f))
    text = str(v)
    return text if len(text) <= 12 else f"{f:.6g}"


def _where(arr: np.ndarray, mask) -> tuple:
    """The first element where ``mask`` holds: (value, " at [i, j]" or "")."""
    flat = int(np.flatnonzero(mask)[0]) if np.ndim(mask) else 0
    if arr.ndim == 0:
        return arr[()], ""
    index = np.unravel_index(flat, arr.shape)
    return arr[index], " (at [" + ", ".join(str(int(i)) for i in index) + "])"


def fit_dtype(value, dtype) -> np.ndarray:
    """``value`` as an array of ``dtype``, or ValueError naming the first number that does not fit.

    A number fits when the conversion keeps it: an integer within the dtype's range, a whole
    finite number for an integer dtype, 0 or 1 (or a bool) for bool, a finite number that stays
    finite for a float dtype (NaN and Inf fit a float; rounding to the nearest float is allowed).
    This is the rule for feeds, inline values and constants; only an explicit Cast block wraps
    and truncates as TensorFlow's does.
    """
    dt = np.dtype(dtype)
    arr = np.asarray(value)
    if arr.dtype == dt:
        return arr
    if arr.dtype.kind not in "biuf":
        raise ValueError(f"expected numbers for {dt.name}, got {arr.dtype} values")
    src = arr.dtype.kind
    if dt.kind == "b":
        if src != "b":
            bad = (arr != 0) & (arr != 1)
            if bad.any():
                v, at = _where(arr, bad)
                raise ValueError(f"{_show(v)}{at} does not fit bool, which holds 0 and 1 (true and false)")
        return arr.astype(dt)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        if src == "b" or arr.size == 0:
            return arr.astype(dt)
        if src == "f":
            finite = np.isfinite(arr)
            if not finite.all():
                v, at = _where(arr, ~finite)
                raise ValueError(f"{_show(v)}{at} does not fit {dt.name}, which holds whole numbers")
            whole = arr == np.floor(arr)
            if not whole.all():
                v, at = _where(arr, ~whole)
                raise ValueError(f"{_show(v)}{at} has a fraction, and {dt.name} holds whole numbers "
                                 f"(a Cast block truncates)")
            # the bounds as floats are exact: min is -2^k (or 0), max + 1 is 2^k
            out = (arr < float(info.min)) | (arr >= float(int(info.max) + 1))
        else:
            lo, hi = int(arr.min()), int(arr.max())
            out = None if info.min <= lo and hi <= info.max else (arr < info.min) | (arr > info.max)
        if out is not None and out.any():
            v, at = _where(arr, out)
            raise ValueError(f"{_show(v)}{at} does not fit {dt.name} ({info.min} to {info.max}; a Cast "
                             f"block wraps)")
        return arr.astype(dt)
    with np.errstate(over="ignore", invalid="ignore"):
        cast = arr.astype(dt)
        if src in "iu" or arr.dtype.itemsize > dt.itemsize:
            grew = np.isinf(cast) & ~np.isinf(arr) if src == "f" else np.isinf(cast)
            if grew.any():
                v, at = _where(arr, grew)
                raise ValueError(f"{_show(v)}{at} does not fit {dt.name} (largest "
                                 f"{_show(np.finfo(dt).max)}); it would become infinite")
    return cast


# --------------------------------------------------------------------------------------------
# Ports and attrs

_NO_DEFAULT = object()


def _check_dtype_constraint(owner: str, dtype: str):
    if not isinstance(dtype, str) or not (dtype in DTYPE_CLASSES or dtype in DTYPE_NAMES
                                          or (dtype.isidentifier() and dtype[0].isupper())):
        raise BlockDeclarationError(f"{owner}: dtype constraint {dtype!r} is not a dtype, a "
                                    f"dtype class ({', '.join(DTYPE_CLASSES)}) or a type variable "
                                    f"(an identifier starting with a capital, like T)")


_ACCEPTS: dict = {}


@dataclass(frozen=True)
class Input:
    """A single input port.

    ``dtype`` is a dtype name, a class (float, int, bool, number, any) or a type variable
    such as ``"T"`` shared with other inputs. A ``static`` input must be known when compiling
    (an inline constant or a wire from a Const); ``infer`` and ``forward`` get its value.
    An ``optional`` input may stay unwired and then takes ``default``.

    A ``ref`` input names state the block updates (TF's ref inputs: ApplyAdam's ``var``, ``m``,
    ``v``): it must be wired straight from a Variable, whose value the block reads and replaces.
    A ref input with a ``slot`` may instead stay unwired: its state is then kept with the block's
    first ref input's Variable (saved in the project beside its value), created as ``"like"`` (the
    Variable's shape) or ``"scalar"``, filled with ``slot_init`` (a number, or the name of another
    input whose value to start from).
    """

    name: str
    dtype: str = "T"
    static: bool = False
    optional: bool = False
    default: Any = None
    doc: str = ""
    ref: bool = False
    slot: str | None = None
    slot_init: Any = 0.0
    variadic = False

    def accepts(self, dtype: np.dtype) -> bool:
        key = (self.dtype, dtype)
        hit = _ACCEPTS.get(key)
        if hit is None:
            hit = _ACCEPTS[key] = self._accepts(dtype)
        return hit

    def _accepts(self, dtype: np.dtype) -> bool:
        allowed = DTYPE_CLASSES.get(self.dtype)
        if allowed is None:
            return self.dtype not in DTYPE_NAMES or np.dtype(dtype).name == self.dtype
        return np.dtype(dtype).name in allowed

    @property
    def differentiable(self) -> bool:
        if self.static or self.ref:
            return False
        allowed = DTYPE_CLASSES.get(self.dtype)
        if allowed is None:
            return self.dtype not in DTYPE_NAMES or self.dtype in FLOAT_DTYPES
        return bool(allowed & FLOAT_DTYPES)


@dataclass(frozen=True)
class InputList(Input):
    """A variadic input (enuSpace's InputList): ports ``name[0]``, ``name[1]``, ...

    ``forward`` and ``infer`` get a list; ``vjp`` returns a list for it.
    """

    min_count: int = 1
    variadic = True

    def port(self, index: int) -> str:
        return f"{self.name}[{index}]"


@dataclass(frozen=True)
class Output:
    """An output port. ``differentiable=False`` marks outputs no gradient can flow back from."""

    name: str
    doc: str = ""
    differentiable: bool = True
    variadic = False


@dataclass(frozen=True)
class OutputList(Output):
    """A variadic output: ports ``name[0]``, ``name[1]``, ...

    ``count`` names what fixes their number: an int attr (Unstack's ``num``) or an InputList
    (one output per entry, like Gradients' ``xs``). ``infer`` and ``forward`` give a list for it,
    and ``vjp`` gets lists (with None for outputs that received no gradient).
    """

    count: str = ""
    variadic = True

    def port(self, index: int) -> str:
        return f"{self.name}[{index}]"


_ATTR_KINDS = ("int", "float", "bool", "str", "choice", "dtype", "shape", "ints", "tensor")


@dataclass(frozen=True)
class Attr:
    """A typed block parameter with a default and validation.

    kinds: int, float, bool, str, choice (one of ``choices``), dtype (a dtype name), shape (a
    list of sizes, -1 or None for unknown), ints (a list of ints), tensor (an array).

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

    def validate(self, value):
        """Return the value in canonical form or raise AttrError saying what is wrong."""
        kind = self.kind
        if kind == "bool":
            if not isinstance(value, (bool, np.bool_)):
                raise AttrError(f"expected true or false, got {value!r}")
            return bool(value)
        if kind in ("int", "float"):
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
                raise AttrError(f"expected a number, got {value!r}")
            if kind == "int":
                if not math.isfinite(float(value)) or float(value) != int(value):
                    raise AttrError(f"expected an integer, got {value!r}")
                value = int(value)
            else:
                value = float(value)
                if math.isnan(value):
                    raise AttrError("expected a number, got NaN")
            if self.min is not None and value < self.min:
                raise AttrError(f"must be at least {self.min}, got {value}")
            if self.max is not None and value > self.max:
                raise AttrError(f"must be at most {self.max}, got {value}")
            return value
        if kind == "str":
            if not isinstance(value, str):
                raise AttrError(f"expected a string, got {value!r}")
            return value
        if kind == "choice":
            if value not in self.choices:
                raise AttrError(f"expected one of {', '.join(map(str, self.choices))}; got {value!r}")
            return value
        if kind == "dtype":
            allowed = self.choices or DTYPE_NAMES
            if isinstance(value, np.dtype):
                value = value.name
            if value not in allowed:
                raise AttrError(f"expected a dtype ({', '.join(allowed)}), got {value!r}")
            return value
        if kind in ("shape", "ints"):
            if not isinstance(value, (list, tuple)):
                raise AttrError(f"expected a list of integers, got {value!r}")
            out = []
            for v in value:
                if kind == "shape" and (v is None or (isinstance(v, (int, np.integer)) and v == -1)):
                    out.append(None)
                    continue
                if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                    raise AttrError(f"expected a list of integers, got {value!r}")
                if kind == "shape" and v < 0:
                    raise AttrError(f"sizes must be at least 0 (or -1 for unknown), got {v}")
                out.append(int(v))
            return tuple(out)
        if kind == "tensor":
            if value is None:
                return None
            try:
                arr = np.asarray(value)
            except Exception as exc:  # ragged nested lists and the like
                raise AttrError(f"expected an array: {exc}") from None
            if arr.dtype == object or arr.dtype.kind not in "biuf":
                raise AttrError(f"expected an array of numbers, got {value!r}")
            return arr
        raise AttrError(f"unknown attr kind {kind!r}")


# --------------------------------------------------------------------------------------------
# Allocation limits: every array a block makes is checked before it is made

#: the largest array one block may make (an output or an intermediate: a padded copy, a
#: convolution's window matrix); larger ones are refused before anything is allocated
MAX_TENSOR_BYTES = 4 * 1024 ** 3


class AllocationError(ValueError):
    """An array a block would make is over the per-tensor limit or the run's memory budget.

    ``what`` names the array ("output 'y'", "padded input"), ``shape`` and ``dtype`` its type,
    ``nbytes`` its size; the message says which limit it passes."""

    def __init__(self, message: str, what: str = "", shape=(), dtype=None, nbytes: int = 0):
        super().__init__(message)
        self.what, self.shape, self.dtype, self.nbytes = what, tuple(shape), dtype, nbytes


# The runtime installs a guard (an object with ``reserve(nbytes, shape, dtype, what)``) for the
# duration of a run, to add a run-wide budget; outside a run only the per-tensor limit applies.
allocation_guard: contextvars.ContextVar = contextvars.ContextVar("blockflow_allocation_guard",
                                                                  default=None)


def _gib(n: int) -> str:
    return f"{n / 1024 ** 3:,.1f} GiB" if n >= 1024 ** 3 else f"{n / 1024 ** 2:,.1f} MiB"


def reserve(shape, dtype, what: str = "an intermediate array") -> int:
    """Say that the calling block is about to make an array of ``shape`` and ``dtype``.

    Blocks call this before any allocation whose size the inputs or attrs control and that is not
    one of their outputs (the runtime checks those): a padded copy, a window matrix, a one-hot.
    Raises :class:`AllocationError` when it is over :data:`MAX_TENSOR_BYTES` or over what is
    left of the run's memory budget; returns the size in bytes. Arrays announced during one
    block's call add up, except that one announced again under the same ``what`` replaces the
    earlier one (announce the pieces a loop makes and drops under one name).
    """
    dt = np.dtype(dtype)
    n = 1
    for d in shape:
        n *= max(int(d), 0)
    nbytes = n * dt.itemsize
    if nbytes > MAX_TENSOR_BYTES:
        raise AllocationError(f"{what} would be {dt.name}{list(int(d) for d in shape)} ({_gib(nbytes)}); "
                              f"the limit for one array is {_gib(MAX_TENSOR_BYTES)}",
                              what, shape, dt, nbytes)
    guard = allocation_guard.get()
    if guard is not None:
        guard.reserve(nbytes, tuple(int(d) for d in shape), dt, what)
    return nbytes


# --------------------------------------------------------------------------------------------
# Block specs


@dataclass(frozen=True, eq=False)
class BlockSpec:
    """The frozen, checked declaration of one block type."""

    name: str
    category: str
    doc: str
    inputs: tuple
    outputs: tuple
    attrs: tuple
    infer: Callable
    forward: Callable
    vjp: Callable | None
    role: str
    gradient: str
    aliases: tuple
    source: str
    vjp_context: frozenset
    forward_context: frozenset
    initial: Callable | None
    refs: tuple
    attr_map: dict = field(repr=False)
    input_map: dict = field(repr=False)
    output_map: dict = field(repr=False)
    #: The local derivative rule in words and formulas, per input, in terms of the upstream
    #: gradient ``g`` and the port names (``dx = g · (1 − y²)``); "" when the block gives none.
    grad_rule: str = ""
    #: context parameters ``infer`` asks for (``files``)
    infer_context: frozenset = frozenset()

    @property
    def summary(self) -> str:
        """First line of the docstring: the palette tooltip."""
        return self.doc.strip().splitlines()[0] if self.doc.strip() else ""

    @property
    def differentiable(self) -> bool:
        return self.gradient == "vjp"

    def default_attrs(self) -> dict:
        return {a.name: a.default for a in self.attrs if not a.required}

    def validate_attrs(self, given: dict) -> tuple[dict, list[tuple[str, str]]]:
        """Full attr dict with defaults filled in, and a list of (attr, problem)."""
        values, problems = {}, []
        for name in given:
            if name not in self.attr_map:
                problems.append((name, f"{self.name} has no attr '{name}'"))
        for a in self.attrs:
            if a.name in given:
                try:
                    values[a.name] = a.validate(given[a.name])
                except AttrError as exc:
                    problems.append((a.name, f"attr '{a.name}': {exc}"))
            elif a.required:
                problems.append((a.name, f"attr '{a.name}' is required"))
            else:
                values[a.name] = a.default
        for a in self.attrs:
            value = values.get(a.name)
            if a.fits and value is not None and values.get(a.fits) is not None:
                try:
                    values[a.name] = fit_dtype(value, values[a.fits])
                except ValueError as exc:
                    problems.append((a.name, f"attr '{a.name}': {exc}"))
        return values, problems

    @property
    def is_dataset(self) -> bool:
        """True for the blocks that read a dataset from the project's data files."""
        return self.category == "data_ops"

    def __repr__(self):
        return f"<block {self.name} ({self.category}) from {self.source}>"


_ROLES = ("op", "placeholder", "variable", "gradients")
_GRADIENTS = ("stop", "none", "prevent")


def _fail(name, msg):
    raise BlockDeclarationError(f"block {name!r}: {msg}")


def _check_signature(name, fn_name, fn, positional, attrs, extra_first=(), context=frozenset()):
    """The function must take the inputs positionally and exactly the attrs as keywords."""
    if not callable(fn):
        _fail(name, f"{fn_name} must be a function")
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        _fail(name, f"{fn_name} has no inspectable signature; wrap it in a def")
    pos, kw = [], []
    for p in sig.parameters.values():
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            pos.append(p.name)
        elif p.kind == p.KEYWORD_ONLY:
            kw.append(p.name)
        else:
            _fail(name, f"{fn_name} must not take *args or **kwargs (parameter {p.name!r})")
    want_pos = list(extra_first) + list(positional)
    if len(pos) != len(want_pos):
        _fail(name, f"{fn_name} takes {len(pos)} positional parameters ({', '.join(pos) or 'none'}) "
                    f"but should take {len(want_pos)}: {', '.join(want_pos) or 'none'}")
    attr_names = {a.name for a in attrs}
    kw_set = set(kw)
    used_context = kw_set & context
    missing = attr_names - kw_set
    extra = kw_set - attr_names - context
    if missing or extra:
        bits = []
        if missing:
            bits.append("missing keyword-only " + ", ".join(sorted(missing)))
        if extra:
            bits.append("unknown keyword-only " + ", ".join(sorted(extra)))
        _fail(name, f"{fn_name}: attrs must be keyword-only parameters ({'; '.join(bits)})")
    return frozenset(used_context)


def block(name: str, *, category: str, aliases: tuple = ()):
    """Turn a namespace class into a checked, frozen :class:`BlockSpec`.

    The class body declares ``inputs``, ``outputs``, ``attrs`` (tuples), the functions
    ``infer`` and ``forward`` and, when the block is differentiable, ``vjp``. A non-differentiable
    block sets ``gradient = "stop"`` (StopGradient's cut), ``"prevent"`` (differentiating through it
    is an error) or leaves the default ``"none"``. ``role`` is ``"placeholder"`` or ``"variable"``
    for the blocks whose value comes from outside the graph, and ``"gradients"`` for the in-graph
    gradient block (the runtime computes it; its ``forward`` is never called).

    A block with ``ref`` inputs updates state: its ``forward`` returns ``(outputs, updates)`` where
    ``updates`` maps ref input names to their new values. The runtime commits them when the run
    has finished without error; every block that reads a Variable in that run sees its value from
    the start of the run (wire from the updating block's output to use the new value).

    ``grad_rule`` (a string, optional) states the block's local derivative rule for people: one
    short line per input, ``dNAME = ...`` in terms of the upstream gradient ``g`` and the ports'
    names (``dx = g · (1 − y²)``). A block that cuts or forbids the gradient may say why instead.

    Memory: the runtime checks a block's outputs against the limits before it runs. Any other
    array ``forward`` or ``vjp`` makes whose size an attr or an input controls (a padded copy, a
    window matrix, a wider copy before a cast), and any output whose size depends on the input
    values rather than their shapes (Where's rows, a dataset's batch), must be announced with
    :func:`reserve` before it is made; better still, made in pieces of bounded size. See
    docs/limits.md.
    """

    def decorate(cls) -> BlockSpec:
        if not isinstance(name, str) or not name.isidentifier():
            raise BlockDeclarationError(f"block name {name!r} must be an identifier")
        if not isinstance(category, str) or not category:
            _fail(name, "category must be a non-empty string")
        doc = inspect.getdoc(cls) or ""
        if not doc.strip():
            _fail(name, "a block needs a docstring (it is the palette tooltip and the reference)")
        ns = vars(cls)
        inputs = tuple(ns.get("inputs", ()))
        outputs = tuple(ns.get("outputs", ()))
        attrs = tuple(ns.get("attrs", ()))
        for p in inputs:
            if not isinstance(p, Input):
                _fail(name, f"inputs must be Input or InputList, got {p!r}")
            _check_dtype_constraint(f"block {name!r} input {p.name!r}", p.dtype)
        for p in outputs:
            if not isinstance(p, Output):
                _fail(name, f"outputs must be Output, got {p!r}")
        for a in attrs:
            if not isinstance(a, Attr):
                _fail(name, f"attrs must be Attr, got {a!r}")
            if a.kind not in _ATTR_KINDS:
                _fail(name, f"attr {a.name!r} has unknown kind {a.kind!r}")
            if a.kind == "choice" and not a.choices:
                _fail(name, f"attr {a.name!r} is a choice but lists no choices")
            if a.fits and (a.kind != "tensor" or not any(b.name == a.fits and b.kind == "dtype" for b in attrs)):
                _fail(name, f"attr {a.name!r}: fits must name a dtype attr of the block, and only a tensor "
                            f"attr has it (got fits={a.fits!r})")
            if not a.required:
                try:
                    a.validate(a.default)
                except AttrError as exc:
                    _fail(name, f"default of attr {a.name!r} is invalid: {exc}")
        for o in outputs:
            if o.variadic:
                counted = next((a for a in attrs if a.name == o.count), None) or \
                    next((p for p in inputs if p.name == o.count), None)
                if counted is None or (isinstance(counted, Attr) and counted.kind != "int") or \
                        (isinstance(counted, Input) and not counted.variadic):
                    _fail(name, f"OutputList {o.name!r} must be counted by an int attr or an InputList, "
                                f"got count={o.count!r}")
        seen: dict[str, str] = {}
        for kind, items in (("input", inputs), ("output", outputs), ("attr", attrs)):
            for item in items:
                if not isinstance(item.name, str) or not item.name.isidentifier():
                    _fail(name, f"{kind} name {item.name!r} must be an identifier")
                if item.name == SCOPE_PORT:
                    _fail(name, f"'{SCOPE_PORT}' is the implicit scope port; choose another {kind} name")
                if item.name in CONTEXT_PARAMS:
                    _fail(name, f"{kind} name {item.name!r} is reserved")
                if item.name in seen and not (kind == "attr") and seen[item.name] != "attr":
                    _fail(name, f"{kind} name {item.name!r} is used twice")
                if kind == "attr" and item.name in seen:
                    _fail(name, f"attr {item.name!r} has the same name as {seen[item.name]} {item.name!r}")
                seen[item.name] = kind
        role = ns.get("role", "op")
        if role not in _ROLES:
            _fail(name, f"role must be one of {_ROLES}, got {role!r}")
        if role in ("placeholder", "variable") and (inputs or len(outputs) != 1):
            _fail(name, f"a {role} block has no inputs and exactly one output")
        in_names = [p.name for p in inputs]
        for fn_name in ("infer", "forward"):
            if fn_name not in ns:
                _fail(name, f"missing {fn_name}")
        infer_context = _check_signature(name, "infer", ns["infer"], in_names, attrs, context=INFER_CONTEXT)
        extra = ("value",) if role in ("placeholder", "variable") else ()
        refs = tuple(p.name for p in inputs if p.ref)
        for p in inputs:
            if p.slot not in (None, "like", "scalar"):
                _fail(name, f"input {p.name!r}: slot must be 'like' or 'scalar', got {p.slot!r}")
            if p.slot is not None and not p.ref:
                _fail(name, f"input {p.name!r} has a slot but is not a ref input")
            if p.ref and (p.variadic or p.static):
                _fail(name, f"ref input {p.name!r} cannot be static or variadic")
            if isinstance(p.slot_init, str) and p.slot_init not in {q.name for q in inputs}:
                _fail(name, f"input {p.name!r}: slot_init names no input {p.slot_init!r}")
        if refs:
            first = next(p for p in inputs if p.ref)
            if first.slot is not None:
                _fail(name, f"the first ref input {first.name!r} is the Variable the block updates; it "
                            f"cannot be a slot")
            if "vjp" in ns:
                _fail(name, "a block that updates state (ref inputs) has no vjp")
        forward_context = _check_signature(name, "forward", ns["forward"], in_names, attrs,
                                           extra_first=extra, context=FORWARD_CONTEXT)
        initial = ns.get("initial")
        if role == "variable":
            if initial is None:
                _fail(name, "a variable block needs initial(**attrs) giving its first value")
            _check_signature(name, "initial", initial, (), attrs)
        elif initial is not None:
            _fail(name, "only variable blocks declare initial")
        vjp = ns.get("vjp")
        gradient = ns.get("gradient")
        context = frozenset()
        if vjp is not None:
            if gradient not in (None, "vjp"):
                _fail(name, f"declares gradient={gradient!r} and a vjp; pick one")
            if not any(p.differentiable for p in inputs):
                _fail(name, "has a vjp but no input that can take a gradient")
            context = _check_signature(name, "vjp", vjp, in_names, attrs,
                                       extra_first=("g", "out"), context=CONTEXT_PARAMS)
            gradient = "vjp"
        else:
            gradient = gradient or "none"
            if gradient not in _GRADIENTS:
                _fail(name, f"gradient must be one of {_GRADIENTS} (or give a vjp), got {gradient!r}")
        grad_rule = ns.get("grad_rule", "")
        if not isinstance(grad_rule, str):
            _fail(name, f"grad_rule must be a string, got {grad_rule!r}")
        module = getattr(cls, "__module__", "?")
        return BlockSpec(
            name=name, category=category, doc=doc, inputs=inputs, outputs=outputs, attrs=attrs,
            infer=ns["infer"], forward=ns["forward"], vjp=vjp, role=role, gradient=gradient,
            aliases=tuple(aliases), source=f"{module}.{cls.__qualname__}", vjp_context=context,
            forward_context=forward_context, infer_context=infer_context,
            initial=initial, refs=refs, attr_map={a.name: a for a in attrs}, input_map={p.name: p for p in inputs},
            output_map={o.name: o for o in outputs}, grad_rule=inspect.cleandoc(grad_rule),
        )

    return decorate
