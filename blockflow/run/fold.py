"""Constant cotangents: the vjps whose result a plan computes once, when it is written.

A run given no gradient seed starts its backward pass from ones, a constant. A vjp that reads no
value (``vjp.reads == ()``: only its cotangent and its arguments' shapes and dtypes) gives a
constant result when its cotangents are constants: the vjps of the reductions and subtractions
between a loss and the first blocks whose vjps read values (Mean, Sum, Subtract of a free energy
or a cross entropy). run/lower.py binds such a result once instead of calling the vjp on every
run: in an RBM's step, five calls that cost 6-8 % of it right after its large products, where
each call's code has left the CPU's caches.

The folded arrays are read-only, never written into (they are not ``owned``: run/lower.py). A
gradient the run returns that may be one of them (handed on by a vjp) is copied when it is
read-only and no broadcast view, so the caller gets a writable array wherever the unfolded run
gave one; a broadcast view (Sum's and Mean's gradients of large inputs) is read-only either way.
A step whose arguments are large is not folded: its result would be kept between runs.

Imports nothing of blockflow but compile.program and run's code_parts and memplan.
"""
from __future__ import annotations

import math

import numpy as np

from blockflow.compile.program import Step
from blockflow.run.code_parts import needs_by_input
from blockflow.run.memplan import RESIDENT, Line, new

__all__ = ["FOLD_MAX_BYTES", "FOLD_MAX_SIZE", "finish_known", "fold_vjp", "foldable", "folded_call", "known_part",
           "known_seed", "own_array"]

#: the most elements of any argument or cotangent of a folded vjp: what its result keeps alive
#: between runs, and what the call that makes it may allocate while the plan is written
FOLD_MAX_SIZE = 1 << 16
#: the most bytes a plan's folded results hold between runs (most hold none: a loss's
#: reductions' gradients are zero-stride views of the seed), so that a page of many folds does
#: not keep an array per fold
FOLD_MAX_BYTES = 4 << 20


def foldable(st: Step, slots, known: dict, written) -> bool:
    """Whether the plan may compute ``st``'s vjp once: it reads no value and draws nothing, each
    output's cotangent is in ``known`` ({slot: its constant cotangent}) or not ``written``, and
    every argument has a known, small shape."""
    spec = st.spec
    if getattr(spec.vjp, "reads", None) != () or spec.vjp_context - {"needs"}:
        return False
    if not any(o in known for o in st.outputs) or any(o in written and o not in known for o in st.outputs):
        return False
    flat = [s for src in st.inputs if src is not None for s in (src if isinstance(src, tuple) else (src,))]
    return all(_small(slots[s].type.shape) for s in (*flat, *st.outputs))


def _small(shape) -> bool:
    return None not in shape and math.prod(shape) <= FOLD_MAX_SIZE


def fold_vjp(st: Step, slots, known: dict, kw: dict):
    """The vjp's result for the cotangents in ``known`` (None where unwritten), or None when it
    is not one array, numpy scalar or None per input, or the call fails. The arguments are
    stand-ins of their shapes and dtypes: the vjp reads no value."""
    g = _struct(st, known.get)
    out = _struct(st, lambda o: _stand_in(slots[o].type))
    args = []
    for pos, src in enumerate(st.inputs):
        if st.static[pos] is not None:
            args.append(st.static[pos])
        elif isinstance(src, tuple):
            args.append([_value(slots[s]) for s in src])
        else:
            args.append(None if src is None else _value(slots[src]))
    try:
        with np.errstate(all="ignore"):   # as every run: the runtime's error state
            result = st.spec.vjp(g, out, *args, **kw)
    except Exception:  # noqa: BLE001 - the run calls the vjp and reports what it raises
        return None
    if not isinstance(result, tuple) or len(result) != len(st.inputs) \
            or not all(p is None or isinstance(p, (np.ndarray, np.generic)) for p in result):
        return None
    return tuple(_read_only(p) for p in result)


def _struct(st: Step, value):
    """The value of each output as the block takes it (an OutputList as a list)."""
    parts = [[value(o) for o in entry] if isinstance(entry, tuple) else value(entry) for entry in st.out_struct]
    return parts[0] if len(parts) == 1 else tuple(parts)


def _value(slot):
    return slot.type.value if slot.const else _stand_in(slot.type)


def _stand_in(t):
    """A read-only array (numpy scalar for rank 0) of ``t``'s shape and dtype, of no memory."""
    dtype = np.dtype(t.dtype)
    if not t.shape:
        return dtype.type(0)
    return np.broadcast_to(np.zeros((), dtype), t.shape)


def _held_bytes(result) -> int:
    """The bytes of the arrays a folded result holds: a view's base counts, a zero-stride view of
    a number next to nothing."""
    roots = {}
    for part in result:
        while isinstance(part, np.ndarray) and part.base is not None:
            part = part.base
        if isinstance(part, np.ndarray):
            roots[id(part)] = part.nbytes
    return sum(roots.values())


def _read_only(part):
    if type(part) is np.ndarray and part.flags.writeable:
        part = part.view()
        part.flags.writeable = False
    return part


def folded_call(w, st: Step, needs_flat, grad_written):
    """(result name, result) for ``st``'s vjp computed now, its line added to the writer ``w``
    (run/lower.py), or None. Not for a step whose parts go straight to a gradient the run returns
    or shares: they would be copied on every run."""
    if not w.known or not foldable(st, w.slots, w.known, grad_written):
        return None
    if any(needs_flat[j] and (st.flat_input(j) in w.wanted or st.flat_input(j) in w.shared)
           for j in range(len(st.in_edges))):
        return None
    kw = dict(st.attrs)
    if "needs" in st.spec.vjp_context:
        kw["needs"] = needs_by_input(st, needs_flat)
    result = fold_vjp(st, w.slots, w.known, kw)
    if result is None or w.folded_bytes + _held_bytes(result) > FOLD_MAX_BYTES:
        return None
    w.folded_bytes += _held_bytes(result)
    r, name = f"gr{st.index}", f"v{st.index}_{len(w.ns)}"
    w.ns[name] = result
    w.lines.append(Line(f"{r} = {name}", set(), {r}, ((r, RESIDENT),)))
    w.vjp_line = len(w.lines) - 1
    return r, result


def finish_known(w, target: int, returned) -> None:
    """After the backward pass: make each gradient the run returns (of the slots ``returned``)
    that may be one of the plan's arrays the caller's own (``_own``); and drop the seed's line (a
    copy of ones every run) when only folded vjps read it."""
    seed = f"g{target}"
    if target in w.known and target not in returned and not any(seed in line.reads for line in w.lines):
        # in place, a statement that does nothing: the lines' indices stay (certificates use them)
        w.lines = [Line("pass", set(), set()) if seed in line.writes else line for line in w.lines]
    for s in sorted(returned):
        name, t = f"g{s}", w.slots[s].type
        # _own copies only a read-only array that is no broadcast view, derived from a folded
        # array of at most FOLD_MAX_SIZE values: a larger gradient is never copied
        if name not in w.maybe_known or (None not in t.shape and math.prod(t.shape) > FOLD_MAX_SIZE):
            continue
        node = w.slots[s].node
        at = -2 - w.program.step(node).index
        w.ns["_own"] = own_array
        w.lines.append(Line(f"_n = {at}; {name} = _own({name})", {name}, {name},
                            ((name, new(s, f"a copy of the gradient of '{node}' the run returns")),), at))
        w.maybe_known.discard(name)


def own_array(g):
    """``g``, or a copy of it when it is read-only and no broadcast view: what a folded vjp or a
    vjp handing its array on gives where the unfolded run gave a new, writable array. (A
    broadcast view, zero strides, is read-only in the unfolded run too: Sum's and Mean's.)"""
    if type(g) is np.ndarray and not g.flags.writeable and 0 not in g.strides:
        return g.copy()
    return g


def known_seed(w, t: int) -> None:
    """The run's gradient seed, the ones array bound as ``o{t}`` (when its type is known), as the
    first known cotangent; read-only, as folded results may be it (Add's vjp hands g on)."""
    seed = w.ns.get(f"o{t}")
    if seed is not None:
        seed.flags.writeable = False
        w.known[t] = seed


def known_part(w, src: int, part) -> None:
    """A folded vjp's ``part`` is the cotangent of ``src``, first written: the plan's array,
    never written into."""
    name = f"g{src}"
    if part is not None:
        w.known[src] = part
        w.maybe_known.add(name)
    w.owned.discard(name)
