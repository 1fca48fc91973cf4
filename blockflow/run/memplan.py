"""The memory plan of a run: every array a run makes is checked before it is made.

The runtime turns a kind of run into straight-line code (run/lower.py). Each line of it says
what the names it binds hold: a new array the size of a slot's type, the parts of a vjp's result
(one new array per input that gets a gradient), arrays another name holds (an edge's gradient is a
part of a vjp's result), or memory the run was handed (Variables, feeds, slot state). The types
are the compiler's, made concrete for one run: re-inferred with the feeds' shapes (a Placeholder
of shape [-1, 3] fed [5000, 3]) and with the shapes that value-dependent blocks (a dataset's
batch, a Tile whose multiples are wired) actually made. Walking the lines with those types gives
the bytes alive at every step, so before anything is allocated the walk refuses

- an array larger than spec.MAX_TENSOR_BYTES, and
- the first step at which the bytes alive would go over the run's memory budget,

naming the block, the array, its shape and size. A size still unknown (downstream of a
value-dependent block, before it has run) counts as 0: a lower bound never refuses a run that
fits. After each value-dependent block the generated code reports what it made
(:meth:`RunGuard.seen`) and the rest of the run is walked again with those shapes. Walks are
cached per shape signature, so a training loop walks each batch shape once.

While a run goes on, :class:`RunGuard` is spec.allocation_guard: what a block reserves for its
intermediates (spec.reserve) is added to the bytes alive at its step.

Imports nothing of blockflow but errors, budget and spec.
"""
from __future__ import annotations

import gc
import math
import sys
from collections import namedtuple

import numpy as np

from blockflow.budget import ENV_VAR, format_size
from blockflow.errors import MemoryLimitError
from blockflow.spec import MAX_TENSOR_BYTES, AllocationError, TensorType

__all__ = ["Line", "RESIDENT", "new", "parts", "parts_into", "alias", "MemoryPlan", "RunGuard",
           "value_dependent", "concrete_types"]

#: One line of a plan's code: ``binds`` is ((name, effect), ...) for the names it binds, ``at``
#: the step cursor while it runs (a step index; -1 the gradient seed; -2-i step i's vjp), ``frees``
#: the names a ``del`` line drops.
Line = namedtuple("Line", "code reads writes binds at frees", defaults=((), None, ()))

#: the name holds memory the run was handed (a Variable's value, a feed, slot state)
RESIDENT = ("res",)


def new(slot: int, label: str) -> tuple:
    """The name holds a new array of ``slot``'s type; ``label`` says which ("output 'z'")."""
    return ("new", slot, label)


def parts(items) -> tuple:
    """The name holds a vjp's result: a new array per ``(part, slot, label)``."""
    return ("parts", tuple(items))


def parts_into(items, name: str, out_slot: int) -> tuple:
    """The name holds the result of a vjp's ``into_g`` variant, called with the cotangent
    ``name`` of ``out_slot``: like :func:`parts`, but the first part whose input has the output's
    shape and dtype (blocks/fused.py, into_g_position) is the cotangent's array, not a new one."""
    return ("into", tuple(items), name, out_slot)


def alias(name: str, part=None) -> tuple:
    """The name holds what ``name`` holds (or one ``part`` of it); no new memory."""
    return ("alias", name, part)


def nbytes(t: TensorType) -> int | None:
    shape = t.shape
    return None if None in shape else math.prod(shape) * t.dtype.itemsize


Walk = namedtuple("Walk", "base resident peak")


class _Ledger:
    """The bytes alive during a walk: which buffers each name holds, and how many names hold each
    buffer (a buffer is freed when the last name holding it is dropped or rebound)."""

    def __init__(self, resident: int):
        self.live = self.peak = resident
        self.holds: dict = {}      # name -> {part: buffer}
        self.refs: dict = {}       # buffer -> [bytes, references]
        self.counter = 0

    def new_buffer(self, size: int) -> int:
        self.counter += 1
        self.refs[self.counter] = [size, 0]
        return self.counter

    def drop(self, name) -> None:
        old = self.holds.pop(name, None)
        if old:
            for buf in old.values():
                ref = self.refs[buf]
                ref[1] -= 1
                if ref[1] == 0:
                    self.live -= ref[0]
                    del self.refs[buf]

    def hold(self, bound) -> None:
        """Bind each name to its buffers (what a name held before is dropped)."""
        for name, bufs in bound:
            for buf in bufs.values():
                self.refs[buf][1] += 1
            self.drop(name)
            self.holds[name] = bufs


class MemoryPlan:
    """The memory side of one kind of run: its lines, and their walks per shape signature."""

    def __init__(self, program, lines, fixed, feeds, where, code, at_line: dict):
        """``lines``: the plan's code lines; ``fixed``: (label, bytes) of what the run is always
        handed besides its feeds (Variables, slot state, constants); ``feeds``: (output slot,
        label) of each fed Placeholder, in feed order; ``where(at)``: (block name, phase) for a
        cursor; ``code``: the generated function's code, ``at_line``: its source lines' cursors."""
        self.program = program
        self.code = code
        self.at_line = at_line
        # only what the walk needs: the code and the names' read/write sets are dropped
        self.lines = tuple((line.binds, line.at, line.frees) for line in lines if line.binds or line.frees)
        self.fixed = tuple(fixed)
        self.fixed_bytes = sum(n for _, n in self.fixed)
        self.feed_slots = tuple(s for s, _ in feeds)
        self.feed_labels = tuple(label for _, label in feeds)
        self.where = where
        self._walks: dict = {}
        self._types: dict = {}

    # ------------------------------------------------------------------------ walks
    def walk_for(self, budget: int, source: str, held: int, key: tuple) -> Walk:
        """The walk for a run whose feeds have the shapes ``key[0]`` and whose value-dependent
        steps made ``key[1:]`` (``(step index, output shapes)``); raises MemoryLimitError."""
        full = (budget, held, key)
        walk = self._walks.get(full)
        if walk is None:
            if len(self._walks) > 64:    # a run with ever new shapes: forget the oldest
                self._walks.clear()
                self._types.clear()
            enabled = gc.isenabled()
            try:    # off inside the try: an exception right after it still turns it back on
                gc.disable()    # the walk makes many small objects; see runtime._new_plan
                walk = self._walks[full] = self._walk(budget, source, held, key)
            finally:
                if enabled:
                    gc.enable()
        return walk

    def _concrete(self, key: tuple) -> list:
        types = self._types.get(key)
        if types is None:
            program = self.program
            slots = program.slots
            given = {}
            for s, shape in zip(self.feed_slots, key[0]):
                given[s] = TensorType(shape, slots[s].type.dtype)
            for index, shapes in key[1:]:
                for o, shape in zip(program.steps[index].outputs, shapes):
                    given[o] = TensorType(shape, slots[o].type.dtype)
            types = self._types[key] = concrete_types(program, given)
        return types

    def _walk(self, budget: int, source: str, held: int, key: tuple) -> Walk:
        types = self._concrete(key)
        resident = self._resident(types, budget, source, held)
        ledger = _Ledger(resident)
        base: dict = {}
        for binds, at, frees in self.lines:
            if frees:
                for name in frees:
                    ledger.drop(name)
                continue
            bound, made, biggest = self._bind(binds, at, types, ledger)
            if made and ledger.live + made > budget:
                size, label, t = biggest
                self._fail(at, f"{label} would be {t} ({format_size(size)}) with {format_size(ledger.live)} "
                               f"already in use: over the run's memory budget of {format_size(budget)} "
                               f"({source}); {_RAISE}")
            ledger.live += made
            if at is not None and at not in base:
                base[at] = ledger.live
            if ledger.live > ledger.peak:
                ledger.peak = ledger.live
            ledger.hold(bound)
        return Walk(base, resident, ledger.peak)

    def _resident(self, types, budget: int, source: str, held: int) -> int:
        """The bytes a run holds before its first step (what it is handed and what the caller
        keeps for it); raises MemoryLimitError when that alone is over the budget."""
        handed = list(self.fixed) + [(f"{label} {types[s]}", nbytes(types[s]) or 0)
                                     for s, label in zip(self.feed_slots, self.feed_labels)]
        resident = held + sum(n for _, n in handed)
        if resident > budget:
            label, size = max(handed, key=lambda item: item[1])
            kept = f" and {format_size(held)} the caller keeps for it" if held else ""
            raise MemoryLimitError(f"page '{self.program.page_name}'",
                                   f"before it starts, the run holds {format_size(resident)} (its Variables, "
                                   f"state, feeds and constants{kept}; the largest is {label}, "
                                   f"{format_size(size)}): over the run's memory budget of "
                                   f"{format_size(budget)} ({source}); {_RAISE}", "")
        return resident

    def _bind(self, binds, at, types, ledger: "_Ledger"):
        """What one line's names will hold: ([(name, {part: buffer})], bytes it makes, (size,
        label, type) of its biggest new array or None); refuses an array over MAX_TENSOR_BYTES."""
        made = 0
        biggest = None
        bound = []
        for name, effect in binds:
            kind = effect[0]
            if kind == "alias":
                src = ledger.holds.get(effect[1], {})
                if effect[2] is None:
                    bound.append((name, dict(src)))
                else:
                    buf = src.get(effect[2])
                    bound.append((name, {} if buf is None else {None: buf}))
                continue
            if kind == "res":
                bound.append((name, {}))
                continue
            items = ((None, effect[1], effect[2]),) if kind == "new" else effect[1]
            held_parts = {}
            into = _into_part(effect, types, ledger) if kind == "into" else None
            for part, slot, label in items:
                if into is not None and part == into[0]:
                    held_parts[part] = into[1]  # the cotangent's array: nothing new
                    continue
                size = nbytes(types[slot])
                if size is None:
                    size = 0
                elif size > MAX_TENSOR_BYTES:
                    self._fail(at, f"{label} would be {types[slot]} ({format_size(size)}); the limit "
                                   f"for one tensor is {format_size(MAX_TENSOR_BYTES)}")
                held_parts[part] = ledger.new_buffer(size)
                made += size
                if biggest is None or size > biggest[0]:
                    biggest = (size, label, types[slot])
            bound.append((name, held_parts))
        return bound, made, biggest

    def _fail(self, at, message):
        node, phase = self.where(at)
        raise MemoryLimitError(node, message, phase)


def _into_part(effect, types, ledger: "_Ledger"):
    """(part, buffer) for the part of an ``into_g`` vjp's result written into its cotangent's
    array, or None: the first part whose input's type has the output's shape and dtype."""
    _, items, name, out_slot = effect
    held = ledger.holds.get(name, {})
    if len(held) != 1:  # the cotangent holds no counted array (or the parts of several)
        return None
    want = types[out_slot]
    for part, slot, _ in items:
        t = types[slot]
        if None not in t.shape and t.shape == want.shape and t.dtype == want.dtype:
            return part, next(iter(held.values()))
    return None


_RAISE = f"raise it with --memory-budget SIZE or the {ENV_VAR} environment variable (docs/limits.md)"


class RunGuard:
    """spec.allocation_guard during one run.

    A block's :func:`spec.reserve` is checked against the bytes alive at its step (from the walk)
    plus what the same step reserved before. The step is found from the line of the generated
    code the block was called from (on the stack), so the hot loop pays nothing for it.
    :meth:`seen` takes the outputs of a value-dependent step and walks the rest again."""

    __slots__ = ("plan", "walk", "budget", "source", "held", "key", "_at", "_extra", "_first")

    def __init__(self, plan: MemoryPlan, budget: int, source: str, held: int, key: tuple):
        self.plan, self.budget, self.source, self.held, self.key = plan, budget, source, held, key
        self.walk = plan.walk_for(budget, source, held, key)
        self._at = None
        self._extra = {}
        self._first = (key, self.walk)   # what restart goes back to (seen moves both on)

    def restart(self, budget: int, source: str, held: int, key: tuple) -> bool:
        """Make this guard, kept from an earlier run, as new for a run with these arguments;
        False, changing nothing, when they differ from the ones it was made for."""
        first_key, first_walk = self._first
        if budget != self.budget or held != self.held or source != self.source or key != first_key:
            return False
        self.key, self.walk, self._at, self._extra = first_key, first_walk, None, {}
        return True

    def step(self):
        """The cursor of the step running now (None outside the generated code: a Variable's
        first value being drawn)."""
        code = self.plan.code
        f = sys._getframe(1)
        while f is not None:
            if f.f_code is code:
                return self.plan.at_line.get(f.f_lineno)
            f = f.f_back
        return None

    def reserve(self, nbytes: int, shape, dtype, what: str) -> None:
        at = self.step()
        if at != self._at:
            self._at, self._extra = at, {}
        # an array announced again under the same name in the same step replaces the earlier one
        # (a piece of a window matrix made in a loop), so only the largest of them counts
        earlier = self._extra.get(what, 0)
        live = self.walk.base.get(at, self.walk.resident) + sum(self._extra.values()) - earlier
        if live + nbytes > self.budget:
            raise AllocationError(f"{what} would be {np.dtype(dtype).name}{list(shape)} ({format_size(nbytes)}) "
                                  f"with {format_size(live)} already in use: over the run's memory budget of "
                                  f"{format_size(self.budget)} ({self.source}); {_RAISE}",
                                  what, shape, dtype, nbytes)
        self._extra[what] = max(earlier, nbytes)

    def seen(self, index: int, values) -> None:
        self.key = self.key + ((index, tuple(np.shape(v) for v in values)),)
        self.walk = self.plan.walk_for(self.budget, self.source, self.held, self.key)


# ---------------------------------------------------------------------------- concrete types
def _args(program, st, types):
    args = []
    for pos, decl in enumerate(st.spec.inputs):
        src = st.inputs[pos]
        if st.static[pos] is not None:
            args.append(st.static[pos])
        elif src is None:
            args.append(None)
        elif isinstance(src, tuple):
            args.append([types[s] for s in src])
        else:
            args.append(types[src])
    return args


def _infer(program, st, args):
    """The step's flat output types from ``args``, or None when its infer refuses them."""
    spec = st.spec
    try:
        if spec.infer_context:
            result = spec.infer(*args, **st.attrs, files=program.files)
        else:
            result = spec.infer(*args, **st.attrs)
    except Exception:  # the run will fail in this block with its own message
        return None
    outs = result if isinstance(result, tuple) and len(spec.outputs) != 1 else (result,)
    if len(outs) != len(spec.outputs):
        return None
    flat = []
    for decl, t in zip(spec.outputs, outs):
        flat.extend(t if decl.variadic and isinstance(t, list) else (t,))
    if len(flat) != len(st.outputs) or not all(isinstance(t, TensorType) for t in flat):
        return None
    return flat


def concrete_types(program, given: dict) -> list:
    """Every slot's type for one run: ``given`` types (fed Placeholders, outputs a
    value-dependent step made) replace the compiler's, and the blocks downstream infer again."""
    slots = program.slots
    types = [s.type for s in slots]
    changed = set()
    for s, t in given.items():
        if t != types[s]:
            types[s] = t
            changed.add(s)
    if not changed:
        return types
    for st in program.steps:
        if st.role in ("variable", "placeholder") or all(o in given for o in st.outputs):
            continue
        if not any(s in changed for s in _sources(st)):
            continue
        flat = _infer(program, st, _args(program, st, types))
        if flat is None:
            continue
        for o, t in zip(st.outputs, flat):
            if t != types[o]:
                types[o] = TensorType(t.shape, t.dtype)
                changed.add(o)
    return types


def _sources(st):
    for src in st.inputs:
        if isinstance(src, tuple):
            yield from src
        elif src is not None:
            yield src


def value_dependent(program, st) -> bool:
    """Whether a step's output sizes can stay unknown when its inputs' shapes are known: a
    dataset's batch, Tile with wired multiples, Range... (tried with every unknown size set to 2)."""
    if st.role in ("variable", "placeholder"):
        return False
    slots = program.slots
    if all(None not in slots[o].type.shape for o in st.outputs):
        return False
    types = [s.type for s in slots]
    for s in _sources(st):
        t = types[s]
        if None in t.shape:
            types[s] = TensorType(tuple(2 if d is None else d for d in t.shape), t.dtype)
    flat = _infer(program, st, _args(program, st, types))
    return flat is None or any(None in t.shape for t in flat)
