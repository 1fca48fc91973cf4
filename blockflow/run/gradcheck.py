"""Numerical gradient checks: a vjp rule against central differences, in float64.

:func:`check_block` checks one block's ``vjp`` against its ``forward``; :func:`check_vjp` does the
same for any pair of plain callables; :func:`check_program` checks the runtime's gradients of a
whole compiled page (the editor's "Check gradients" and ``blockflow check --grad``). Imports only
numpy and blockflow.spec (and the runtime, inside check_program).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from blockflow.spec import BlockSpec

__all__ = ["GradCheckEntry", "GradCheckResult", "check_block", "check_vjp", "check_program", "check_page",
           "promote_page"]

_EPS64 = np.finfo(np.float64).eps


@dataclass(frozen=True)
class GradCheckEntry:
    """The check of one input (each element of an InputList is checked on its own).

    ``analytic`` is ``<vjp(u), v>``, ``numeric`` the central-difference estimate of the same
    directional derivative, ``error`` their relative difference. ``problem`` names a fault found
    before comparing numbers (a cotangent of the wrong shape or dtype); such an entry fails with
    an infinite error.
    """

    name: str
    analytic: float
    numeric: float
    error: float
    passed: bool
    problem: str = ""

    def __str__(self) -> str:
        verdict = "ok" if self.passed else "FAILED"
        if self.problem:
            return f"{self.name}: FAILED: {self.problem}"
        return (f"{self.name}: analytic {self.analytic:+.9e}, numeric {self.numeric:+.9e}, "
                f"relative error {self.error:.2e} {verdict}")


@dataclass(frozen=True)
class GradCheckResult:
    """Outcome of a gradient check: one entry per checked input, and the verdict."""

    label: str
    entries: tuple
    rtol: float

    @property
    def passed(self) -> bool:
        """True when every entry passed (and there was something to check)."""
        return bool(self.entries) and all(e.passed for e in self.entries)

    @property
    def worst(self) -> GradCheckEntry | None:
        """The entry with the largest relative error (None when nothing was checked)."""
        return max(self.entries, key=lambda e: e.error, default=None)

    def __str__(self) -> str:
        if not self.entries:
            return f"gradient check of {self.label}: FAILED: no differentiable float input to check"
        worst = self.worst
        head = (f"gradient check of {self.label}: {'passed' if self.passed else 'FAILED'} "
                f"(worst: {worst.name}, relative error {worst.error:.2e}, rtol {self.rtol:.0e})")
        return "\n  ".join([head] + [str(e) for e in self.entries])


def check_vjp(f: Callable, vjp: Callable, args: Sequence, *, wrt: Sequence[int] | None = None,
              outputs: Sequence[bool] | None = None, names: Sequence[str] | None = None,
              seed: int = 0, eps: float = 1e-6, rtol: float = 1e-6,
              label: str = "function") -> GradCheckResult:
    """Check ``vjp`` against central differences of ``f`` at ``args``.

    ``f(*args)`` returns an array, or a tuple of arrays for several outputs. ``vjp(g, out, *args)``
    returns one cotangent per arg (None for none; a list for an arg that is a list of arrays),
    where ``g`` and ``out`` are an array, or tuples for several outputs.

    Float arrays among ``args`` (also inside lists) are copied to float64; anything else is passed
    unchanged. ``wrt`` lists the positions of the args to check (default: every float array or
    list of float arrays); ``outputs`` marks which outputs get a cotangent (default: every float
    output; the others get None). ``names`` labels the args in the result.

    For each checked array ``x`` (one at a time), with a seeded random cotangent ``u`` per output
    and a random direction ``v``::

        numeric  = sum_k <u_k, f_k(x + eps v) - f_k(x - eps v)> / (2 eps)
        analytic = <vjp(u)_x, v>
        error    = |analytic - numeric| / max(|analytic|, |numeric|, floor)

    where ``floor`` is the rounding noise of the difference quotient, so an exact zero gradient
    passes. An entry passes when ``error <= rtol``.
    """
    args = [_to_float64(a) for a in args]
    if wrt is None:
        wrt = [i for i, a in enumerate(args) if _is_float_group(a)]
    if names is None:
        names = [f"arg{i}" for i in range(len(args))]
    return _check(f, vjp, args, list(wrt), names, outputs, seed, eps, rtol, label)


def check_block(spec: BlockSpec, inputs: Sequence | Mapping[str, Any], attrs: Mapping | None = None,
                *, seed: int = 0, eps: float = 1e-6, rtol: float = 1e-6) -> GradCheckResult:
    """Check a block's ``vjp`` against central differences of its ``forward``.

    ``inputs`` holds one value per input port, in the spec's order or as a mapping by port name
    (unlisted optional ports take their default): an array, or a list of arrays for an InputList.
    Static inputs (``axis``, ``shape``, ``perm``) are passed unchanged and not checked; so are
    integer inputs. Float inputs are cast to float64. ``attrs`` are validated and completed with
    the spec's defaults. A vjp that declares ``needs`` is asked for every cotangent. Only the
    differentiable outputs get a cotangent.

    Raises ValueError when the block has no vjp, an attr is invalid, or an input is missing.
    """
    if spec.vjp is None:
        raise ValueError(f"block {spec.name} has no vjp (its gradient is {spec.gradient!r})")
    attr_values, problems = spec.validate_attrs(dict(attrs or {}))
    if problems:
        raise ValueError(f"block {spec.name}: " + "; ".join(msg for _, msg in problems))
    args, wrt = _block_args(spec, _inputs_in_order(spec, inputs))
    forward, rule = spec.forward, spec.vjp
    if "needs" in spec.vjp_context:
        needs = tuple(tuple(True for _ in a) if p.variadic else True for p, a in zip(spec.inputs, args))
        attr_values_vjp = dict(attr_values, needs=needs)
    else:
        attr_values_vjp = attr_values
    # A random block draws from a fresh generator with the same seed on every call (forward and
    # backward alike, as the runtime does): a deterministic function of its inputs.
    rng_fwd = "rng" in spec.forward_context
    rng_vjp = "rng" in spec.vjp_context

    def call_forward(*a):
        return forward(*a, **attr_values, **({"rng": np.random.default_rng(seed)} if rng_fwd else {}))

    outs = _FlatOutputs(spec, call_forward(*args))

    def f(*a):
        return outs.flatten(call_forward(*a))

    def vjp(g, out, *a):
        extra = {"rng": np.random.default_rng(seed)} if rng_vjp else {}
        return rule(outs.nest(g), outs.nest(out), *a, **attr_values_vjp, **extra)

    return _check(f, vjp, args, wrt, [p.name for p in spec.inputs], outs.mask, seed, eps, rtol, spec.name)


def _block_args(spec: BlockSpec, values):
    """(the block's arguments, float inputs as float64; the positions of those to check)."""
    args, wrt = [], []
    for i, (port, value) in enumerate(zip(spec.inputs, values)):
        if port.static:
            args.append(value)
            continue
        value = _to_float64(list(value) if port.variadic else value)
        args.append(value)
        if port.differentiable and _is_float_group(value):
            wrt.append(i)
    return args, wrt


class _FlatOutputs:
    """Outputs are checked flat: an OutputList contributes one entry per port. Built from one
    forward result, it flattens others like it and nests flat cotangents back."""

    def __init__(self, spec: BlockSpec, result):
        self.single = len(spec.outputs) == 1
        declared = (result,) if self.single else tuple(result)
        self.counts = [len(o) if d.variadic else None for d, o in zip(spec.outputs, declared)]
        #: per flat output: whether it is differentiable (gets a cotangent)
        self.mask = [d.differentiable for d, n in zip(spec.outputs, self.counts) for _ in range(1 if n is None else n)]

    def flatten(self, out):
        out = (out,) if self.single else tuple(out)
        flat = []
        for n, o in zip(self.counts, out):
            flat.extend(o if n is not None else (o,))
        return tuple(flat)

    def nest(self, flat):
        out, k = [], 0
        for n in self.counts:
            if n is None:
                out.append(flat[k])
                k += 1
            else:
                out.append(list(flat[k:k + n]))
                k += n
        return out[0] if len(out) == 1 else tuple(out)


def check_program(program, feeds=None, target=None, *, wrt=None, seed: int = 0,
                  eps: float | None = None, rtol: float | None = None) -> GradCheckResult:
    """Check the runtime's gradients of a compiled page against central differences.

    The inputs checked are the page's float Placeholders (fed from ``feeds``, else the page's saved
    feeds) and Variables (their stored values), or the node ids in ``wrt``; the function is the
    ``target`` output (default: the page's loss). Each input is checked along one seeded random
    direction with a random cotangent for the target, as :func:`check_vjp` does.

    The runtime computes in the page's own dtypes, so a float32 page is checked with a larger step
    and tolerance (defaults: eps 1e-3, rtol 1e-2; float64: 1e-6, 1e-6). Random blocks draw the same
    numbers in every run of the check, so the function is deterministic.
    """
    from blockflow.run.runtime import run   # the runtime imports this module's siblings; keep the import local

    feeds = {**program.feeds, **dict(feeds or {})}
    t = program.resolve_target(target)
    tslot = program.slot(t)
    key = f"{tslot.node}:{tslot.port}"
    # One plain run first: it draws the Variables' first values under the run's memory guard (and
    # refuses a page over the budget) before they are read here.
    run(program, feeds, fetch=[key], record=False, check_numerics=False, commit=False)
    leaves, names, args = _program_leaves(program, feeds, None if wrt is None else set(wrt))
    low = min((dt.itemsize for _, dt in leaves), default=8) < 8 or tslot.type.dtype.itemsize < 8
    eps = eps if eps is not None else (1e-3 if low else 1e-6)
    rtol = rtol if rtol is not None else (1e-2 if low else 1e-6)
    roundoff = float(np.finfo(np.float32).eps) if low else _EPS64
    out_dtype = np.dtype(tslot.type.dtype)

    def inputs(a):
        fed, variables = dict(feeds), {}
        for (st, dt), x in zip(leaves, a):
            (fed if st.role == "placeholder" else variables)[st.node] = np.asarray(x, dtype=dt)
        return fed, variables

    def f(*a):
        fed, variables = inputs(a)
        r = run(program, fed, fetch=[key], variables=variables, record=False, check_numerics=False,
                commit=False)
        return np.asarray(r.value(tslot.node, tslot.port), dtype=np.float64)

    def vjp(g, out, *a):
        fed, variables = inputs(a)
        r = run(program, fed, target=key, grad_seed=np.asarray(g, dtype=out_dtype), wrt=names,
                variables=variables, record=False, check_numerics=False, commit=False)
        return [np.zeros(np.shape(x)) if r.variable_grads.get(n) is None
                else np.asarray(r.variable_grads[n], dtype=np.float64) for n, x in zip(names, a)]

    label = f"{program.full_name(tslot.node)}:{tslot.port}"
    args64 = [_to_float64(a) for a in args]
    return _check(f, vjp, args64, list(range(len(args64))), names, None, seed, eps, rtol, label, roundoff)


def _program_leaves(program, feeds, wanted):
    """The float Placeholders and Variables to check (those in ``wanted`` when given): ((step,
    dtype) pairs, node ids, values)."""
    leaves, names, args = [], [], []
    for st in program.steps:
        if st.role not in ("placeholder", "variable") or (wanted is not None and st.node not in wanted):
            continue
        value = feeds.get(st.node) if st.role == "placeholder" else program.variable_values.get(st.node)
        if value is None:
            if st.role == "placeholder" and (wanted is None or st.node in wanted):
                raise ValueError(f"Placeholder {program.full_name(st.node)} has no feed to check at")
            continue
        value = np.asarray(value)
        if value.dtype.kind != "f":
            continue
        leaves.append((st, value.dtype))
        names.append(st.node)
        args.append(value)
    return leaves, names, args


def promote_page(page, registry):
    """A copy of ``page`` computing in float64: float16/float32 dtype attrs (given or defaulted),
    inline constants, saved feeds and stored Variable values become float64. The project is not
    touched."""
    import copy

    out = copy.copy(page)
    out.nodes = {}
    for nid, node in page.nodes.items():
        n = copy.copy(node)
        spec = registry.get(node.block)
        attrs = dict(node.attrs)
        for decl in (spec.attrs if spec is not None else ()):
            if decl.kind == "dtype" and isinstance(attrs.get(decl.name, decl.default), str) \
                    and str(attrs.get(decl.name, decl.default)) in ("float16", "float32") \
                    and (not decl.choices or "float64" in decl.choices):
                attrs[decl.name] = "float64"
        n.attrs = attrs
        n.inputs = {k: _to_float64(np.asarray(v)) for k, v in node.inputs.items()}
        n.state = {k: _to_float64(np.asarray(v)) for k, v in node.state.items()}
        out.nodes[nid] = n
    out.edges = list(page.edges)
    out.feeds = {k: _to_float64(np.asarray(v)) for k, v in page.feeds.items()}
    return out


def check_page(page, registry=None, feeds=None, target=None, *, wrt=None, seed: int = 0,
               composites=None, files=None) -> GradCheckResult:
    """:func:`check_program` on ``page`` promoted to float64 (:func:`promote_page`), where central
    differences are precise (eps 1e-6, rtol 1e-5); a page that does not compile in float64 (a
    block that wants float32) is checked as it is, with float32's step and tolerance.
    ``composites``: the project's, when the page uses composite instances (their diagrams are
    promoted too; targets and ``wrt`` name flat ids, ``d1/W``). ``files``: where the dataset
    blocks read their files (compiler.project_files; without them a page reading data does not
    compile, and was said to have no node of its loss)."""
    import copy

    from blockflow.compile.compiler import compile_page
    from blockflow.registry import default_registry

    registry = registry or default_registry()
    composites = composites or {}
    promoted_composites = {}
    for name, comp in composites.items():
        c = copy.copy(comp)
        c.page = promote_page(comp.page, registry)
        promoted_composites[name] = c
    promoted = compile_page(promote_page(page, registry), registry, files=files, composites=promoted_composites)
    feeds64 = {k: _to_float64(np.asarray(v)) for k, v in (feeds or {}).items()}
    if promoted.ok:
        return check_program(promoted, feeds64, target, wrt=wrt, seed=seed, eps=1e-6, rtol=1e-5)
    return check_program(compile_page(page, registry, files=files, composites=composites), feeds, target, wrt=wrt,
                         seed=seed)


# --------------------------------------------------------------------------------------------


def _inputs_in_order(spec: BlockSpec, inputs) -> list:
    if isinstance(inputs, Mapping):
        unknown = set(inputs) - set(spec.input_map)
        if unknown:
            raise ValueError(f"block {spec.name} has no input {', '.join(sorted(unknown))}")
        values = []
        for port in spec.inputs:
            if port.name in inputs:
                values.append(inputs[port.name])
            elif port.optional:
                values.append(port.default)
            else:
                raise ValueError(f"block {spec.name}: input {port.name!r} is missing")
        return values
    values = list(inputs)
    if len(values) != len(spec.inputs):
        raise ValueError(f"block {spec.name} takes {len(spec.inputs)} inputs, got {len(values)}")
    return values


def _is_float(a) -> bool:
    return isinstance(a, np.ndarray) and a.dtype.kind == "f"


def _is_float_group(a) -> bool:
    if isinstance(a, list):
        return bool(a) and all(_is_float(x) for x in a)
    return _is_float(a)


def _to_float64(a):
    if isinstance(a, list):
        return [_to_float64(x) for x in a]
    if isinstance(a, (np.ndarray, np.floating, float)) and np.asarray(a).dtype.kind == "f":
        return np.array(a, dtype=np.float64)
    return a


def _as_outputs(out) -> tuple:
    return tuple(out) if isinstance(out, tuple) else (out,)


def _check(f, vjp, args, wrt, names, out_mask, seed, eps, rtol, label,
           roundoff: float = _EPS64) -> GradCheckResult:
    if not wrt:
        return GradCheckResult(label=label, entries=(), rtol=rtol)
    rng = np.random.default_rng(seed)
    out = f(*args)
    multi = isinstance(out, tuple)
    outs = _as_outputs(out)
    mask = list(out_mask) if out_mask is not None else [True] * len(outs)
    if len(mask) != len(outs):
        raise ValueError(f"{label}: {len(outs)} outputs but {len(mask)} output flags")
    us = []
    for o, m in zip(outs, mask):
        o = np.asarray(o)
        us.append(rng.standard_normal(o.shape) if m and o.dtype.kind == "f" else None)
    g = tuple(us) if multi else us[0]
    cotangents = vjp(g, out, *args)
    if not isinstance(cotangents, (tuple, list)) or len(cotangents) != len(args):
        got = len(cotangents) if isinstance(cotangents, (tuple, list)) else type(cotangents).__name__
        raise ValueError(f"{label}: the vjp must return one cotangent per input ({len(args)}), got {got}")
    # Rounding noise of the difference quotient, from the size of the terms it sums.
    scale = sum(float(np.sum(np.abs(u * np.asarray(o, dtype=np.float64))))
                for u, o in zip(us, outs) if u is not None)
    floor = max(64 * roundoff * scale / eps, np.finfo(np.float64).tiny)

    entries = []
    for i in wrt:
        if isinstance(args[i], list):
            cts = cotangents[i]
            for j in range(len(args[i])):
                ct = None if cts is None else cts[j]
                name = f"{names[i]}[{j}]"
                if cts is not None and (not isinstance(cts, (list, tuple)) or len(cts) != len(args[i])):
                    entries.append(_problem(name, f"the vjp must return a list of {len(args[i])} "
                                                  f"cotangents for {names[i]}"))
                    break
                entries.append(_entry(f, args, i, j, ct, name, us, rng, eps, rtol, floor))
        else:
            entries.append(_entry(f, args, i, None, cotangents[i], names[i], us, rng, eps, rtol, floor))
    return GradCheckResult(label=label, entries=tuple(entries), rtol=rtol)


def _problem(name, problem) -> GradCheckEntry:
    return GradCheckEntry(name, np.nan, np.nan, np.inf, False, problem)


def _entry(f, args, i, j, ct, name, us, rng, eps, rtol, floor) -> GradCheckEntry:
    x = args[i] if j is None else args[i][j]
    v = rng.standard_normal(x.shape)
    if ct is not None:
        if np.shape(ct) != x.shape:
            return _problem(name, f"cotangent has shape {list(np.shape(ct))}, the input {list(x.shape)}")
        if np.asarray(ct).dtype != x.dtype:
            return _problem(name, f"cotangent has dtype {np.asarray(ct).dtype}, the input {x.dtype}")
    analytic = 0.0 if ct is None else float(np.sum(np.asarray(ct) * v))

    def at(step):
        moved = x + step * v
        a = list(args)
        if j is None:
            a[i] = moved
        else:
            a[i] = list(a[i])
            a[i][j] = moved
        return _as_outputs(f(*a))

    plus, minus = at(eps), at(-eps)
    numeric = 0.0
    for u, p, m in zip(us, plus, minus):
        if u is not None:
            numeric += float(np.sum(u * (np.asarray(p, dtype=np.float64) - np.asarray(m, dtype=np.float64))))
    numeric /= 2 * eps
    if not (np.isfinite(analytic) and np.isfinite(numeric)):
        return GradCheckEntry(name, analytic, numeric, np.inf, False,
                              f"not finite: analytic {analytic}, numeric {numeric}")
    error = abs(analytic - numeric) / max(abs(analytic), abs(numeric), floor)
    return GradCheckEntry(name, analytic, numeric, error, error <= rtol)
