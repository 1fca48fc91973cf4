"""Block specs: the frozen, checked declaration of a block type, and the ``@block`` decorator
that makes one from a namespace class.

Part of the block declaration API; blocks import it through :mod:`blockflow.spec`.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from types import FunctionType as _FUNCTION
from typing import Callable

from blockflow.spec.attrs import ATTR_KINDS, Attr, AttrError, UnknownAttrError
from blockflow.spec.ports import SCOPE_PORT, BlockDeclarationError, Input, Output, check_dtype_constraint
from blockflow.spec.tensors import fit_dtype

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

    def check_attr(self, name: str, value):
        """``value`` for attr ``name`` in canonical form; else UnknownAttrError when the block
        has no such attr, AttrError (saying what is wrong with the value) when it does not fit."""
        decl = self.attr_map.get(name)
        if decl is None:
            raise UnknownAttrError(f"{self.name} has no attr '{name}'")
        return decl.validate(value)

    def validate_attrs(self, given: dict) -> tuple[dict, list[tuple[str, str]]]:
        """Full attr dict with defaults filled in, and a list of (attr, problem)."""
        values, problems = {}, []
        for name in given:
            if name not in self.attr_map:
                problems.append((name, f"{self.name} has no attr '{name}'"))
        for a in self.attrs:
            if a.name in given:
                try:
                    values[a.name] = self.check_attr(a.name, given[a.name])
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


_UNINSPECTABLE = object()
_CO_VARARGS, _CO_VARKEYWORDS = inspect.CO_VARARGS, inspect.CO_VARKEYWORDS


def _parameters(fn) -> tuple[list, list, object]:
    """(positional parameter names, keyword-only ones, the first *args or **kwargs parameter's
    name or None), or _UNINSPECTABLE as the third. A plain function's are read from its code
    object: inspect.signature took ~40 % of importing the block library (412 declarations), on
    every start of the command line."""
    code = getattr(fn, "__code__", None)
    if (type(fn) is _FUNCTION and code is not None and not hasattr(fn, "__wrapped__")
            and not hasattr(fn, "__signature__")):
        n_pos, n_kw = code.co_argcount, code.co_kwonlyargcount
        names = code.co_varnames
        pos, kw = list(names[:n_pos]), list(names[n_pos:n_pos + n_kw])
        if code.co_flags & _CO_VARARGS:      # *args comes before the keyword-only parameters
            return pos, [], names[n_pos + n_kw]
        return pos, kw, names[n_pos + n_kw] if code.co_flags & _CO_VARKEYWORDS else None
    return _parameters_by_inspect(fn)


def _parameters_by_inspect(fn) -> tuple[list, list, object]:
    """_parameters' reading through inspect.signature: for anything but a plain function (a
    wrapped one, a partial, a callable object), and the reference the tests hold it to."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return [], [], _UNINSPECTABLE
    pos, kw = [], []
    for p in sig.parameters.values():
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            pos.append(p.name)
        elif p.kind == p.KEYWORD_ONLY:
            kw.append(p.name)
        else:
            return pos, kw, p.name
    return pos, kw, None


def _check_signature(name, fn_name, fn, positional, attrs, extra_first=(), context=frozenset()):
    """The function must take the inputs positionally and exactly the attrs as keywords."""
    if not callable(fn):
        _fail(name, f"{fn_name} must be a function")
    pos, kw, star = _parameters(fn)
    if star is _UNINSPECTABLE:
        _fail(name, f"{fn_name} has no inspectable signature; wrap it in a def")
    if star is not None:
        _fail(name, f"{fn_name} must not take *args or **kwargs (parameter {star!r})")
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
        return _declare(name, category, tuple(aliases), cls)

    return decorate


def _declare(name: str, category: str, aliases: tuple, cls) -> BlockSpec:
    """The checks of ``@block``, in the order a declaration's first problem is reported."""
    doc = _check_header(name, category, cls)
    ns = vars(cls)
    inputs = tuple(ns.get("inputs", ()))
    outputs = tuple(ns.get("outputs", ()))
    attrs = tuple(ns.get("attrs", ()))
    _check_ports(name, inputs, outputs)
    _check_attrs(name, attrs)
    _check_output_counts(name, inputs, outputs, attrs)
    _check_names(name, inputs, outputs, attrs)
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
    refs = _check_refs(name, inputs, ns)
    extra = ("value",) if role in ("placeholder", "variable") else ()
    forward_context = _check_signature(name, "forward", ns["forward"], in_names, attrs,
                                       extra_first=extra, context=FORWARD_CONTEXT)
    initial = _check_initial(name, ns, role, attrs)
    vjp, gradient, context = _check_gradient(name, ns, inputs, in_names, attrs)
    grad_rule = ns.get("grad_rule", "")
    if not isinstance(grad_rule, str):
        _fail(name, f"grad_rule must be a string, got {grad_rule!r}")
    module = getattr(cls, "__module__", "?")
    return BlockSpec(
        name=name, category=category, doc=doc, inputs=inputs, outputs=outputs, attrs=attrs,
        infer=ns["infer"], forward=ns["forward"], vjp=vjp, role=role, gradient=gradient,
        aliases=aliases, source=f"{module}.{cls.__qualname__}", vjp_context=context,
        forward_context=forward_context, infer_context=infer_context,
        initial=initial, refs=refs, attr_map={a.name: a for a in attrs}, input_map={p.name: p for p in inputs},
        output_map={o.name: o for o in outputs}, grad_rule=inspect.cleandoc(grad_rule),
    )


def _check_header(name, category, cls) -> str:
    """The block's name and category, and its docstring (returned)."""
    if not isinstance(name, str) or not name.isidentifier():
        raise BlockDeclarationError(f"block name {name!r} must be an identifier")
    if not isinstance(category, str) or not category:
        _fail(name, "category must be a non-empty string")
    doc = inspect.getdoc(cls) or ""
    if not doc.strip():
        _fail(name, "a block needs a docstring (it is the palette tooltip and the reference)")
    return doc


def _check_ports(name, inputs, outputs) -> None:
    for p in inputs:
        if not isinstance(p, Input):
            _fail(name, f"inputs must be Input or InputList, got {p!r}")
        check_dtype_constraint(f"block {name!r} input {p.name!r}", p.dtype)
    for p in outputs:
        if not isinstance(p, Output):
            _fail(name, f"outputs must be Output, got {p!r}")


def _check_attrs(name, attrs) -> None:
    for a in attrs:
        if not isinstance(a, Attr):
            _fail(name, f"attrs must be Attr, got {a!r}")
        kind = ATTR_KINDS.get(a.kind)
        if kind is None:
            _fail(name, f"attr {a.name!r} has unknown kind {a.kind!r}")
        if kind.needs_choices and not a.choices:
            _fail(name, f"attr {a.name!r} is a {a.kind} but lists no choices")
        if a.fits and (a.kind != "tensor" or not any(b.name == a.fits and b.kind == "dtype" for b in attrs)):
            _fail(name, f"attr {a.name!r}: fits must name a dtype attr of the block, and only a tensor "
                        f"attr has it (got fits={a.fits!r})")
        if not a.required:
            try:
                a.validate(a.default)
            except AttrError as exc:
                _fail(name, f"default of attr {a.name!r} is invalid: {exc}")


def _check_output_counts(name, inputs, outputs, attrs) -> None:
    """An OutputList is counted by an int attr or an InputList of the block."""
    for o in outputs:
        if o.variadic:
            counted = next((a for a in attrs if a.name == o.count), None) or \
                next((p for p in inputs if p.name == o.count), None)
            if counted is None or (isinstance(counted, Attr) and counted.kind != "int") or \
                    (isinstance(counted, Input) and not counted.variadic):
                _fail(name, f"OutputList {o.name!r} must be counted by an int attr or an InputList, "
                            f"got count={o.count!r}")


def _check_names(name, inputs, outputs, attrs) -> None:
    """Port and attr names: identifiers, none reserved, none used twice."""
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


def _check_refs(name, inputs, ns) -> tuple:
    """The ref inputs (state the block updates) and their slots; returns the ref inputs' names."""
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
    return refs


def _check_initial(name, ns, role, attrs):
    """A variable block's ``initial(**attrs)``, which no other block declares."""
    initial = ns.get("initial")
    if role == "variable":
        if initial is None:
            _fail(name, "a variable block needs initial(**attrs) giving its first value")
        _check_signature(name, "initial", initial, (), attrs)
    elif initial is not None:
        _fail(name, "only variable blocks declare initial")
    return initial


def _check_gradient(name, ns, inputs, in_names, attrs) -> tuple:
    """(vjp, gradient, the context parameters vjp asks for): a vjp makes the block
    differentiable, otherwise ``gradient`` says how it treats a gradient."""
    vjp = ns.get("vjp")
    gradient = ns.get("gradient")
    if vjp is None:
        gradient = gradient or "none"
        if gradient not in _GRADIENTS:
            _fail(name, f"gradient must be one of {_GRADIENTS} (or give a vjp), got {gradient!r}")
        return None, gradient, frozenset()
    if gradient not in (None, "vjp"):
        _fail(name, f"declares gradient={gradient!r} and a vjp; pick one")
    if not any(p.differentiable for p in inputs):
        _fail(name, "has a vjp but no input that can take a gradient")
    context = _check_signature(name, "vjp", vjp, in_names, attrs,
                               extra_first=("g", "out"), context=CONTEXT_PARAMS)
    return vjp, "vjp", context
