"""The numpy runtime: forward and reverse-mode backward passes over a compiled Program.

For each kind of run (which values to fetch, which target, which nodes to differentiate for,
whether to record everything) a plan picks the steps to run and has lower.py turn them once into
straight-line Python that calls the blocks' numpy functions; the plan then feeds it, packages what
it returns, names the block where a run fails and checks the results for NaN/Inf.
Must not import PySide6 or the block library.
"""
from __future__ import annotations

import gc
from collections.abc import Mapping
from contextvars import copy_context
from dataclasses import dataclass, field

import numpy as np

try:
    import resource as _resource
except ImportError:  # Windows
    _resource = None

from blockflow.budget import memory_budget as memory_budget_of
from blockflow.compile.gradpaths import GradientPaths
from blockflow.compile.program import Program, Step
from blockflow.datafiles import SPLITS, DataRequest
from blockflow.errors import MemoryLimitError, NumericsError, RunError
from blockflow.run.lower import KeptArrays, lower
from blockflow.run.plan_failures import PlanFailures, check_target, checked_fetch, checked_wrt, resolved, slot_name
from blockflow.run.plan_inputs import PlanInputs
from blockflow.run.streams import BlockStreams, stream_generator, stream_hash
from blockflow.run.numerics import ERRSTATE, all_finite, all_finite_many, ignore_all_state, what_is_not_finite as _what
from blockflow.run.packer import make_finite_test, make_packer
from blockflow.run.shaped import ShapedProgram
from blockflow.spec import allocation_guard, fit_dtype

__all__ = ["RunResult", "all_finite", "run", "run_forward", "run_backward", "stream_generator", "stream_hash"]

# numpy's error state set to "ignore everything" for a run and its check: numerics.py says why
# through its context variable (None on numpy 1.x, which gets np.errstate), and why the state is
# the caller's with the errors ignored (ignore_all_state)
_ERRSTATE = ERRSTATE

_finite = all_finite

#: plans build their results and test them for NaN/Inf with code written for their keys
#: (packer.py); False: the general loops (tests compare the two)
GENERATED_PACKERS = True
#: a repeated run takes _rerun's short way where it can (False: always the general path; tests
#: compare the two)
FAST_LANE = True
#: write a plan again for each feed-shape signature of a page with open sizes (run/shaped.py)
SHAPED_PLANS = True


@dataclass
class RunResult:
    """What a run produced.

    ``values`` and ``grads`` are keyed by ``(node, output port)``; ``grads`` holds the total
    gradient of the target with respect to each output (the sum over the wires it feeds);
    ``edge_grads`` the gradient flowing back along each wire; ``variable_grads`` the gradient
    of each Variable (and Placeholder) by node id. Without ``record`` only the fetched values and
    the wanted nodes' gradients are kept.
    """

    program: Program
    values: dict = field(default_factory=dict)
    grads: dict = field(default_factory=dict)
    edge_grads: dict = field(default_factory=dict)
    variable_grads: dict = field(default_factory=dict)
    #: state a run changed: {Variable node: {"value": new value, slot key: new slot value}};
    #: Page.apply_state writes it into the project
    state_updates: dict = field(default_factory=dict)
    target: tuple | None = None
    paths: GradientPaths | None = None

    def value(self, node: str, port: str | None = None) -> np.ndarray:
        return self.values[self._key(node, port)]

    def grad(self, node: str, port: str | None = None) -> np.ndarray | None:
        return self.grads.get(self._key(node, port))

    def _key(self, node, port):
        slot = self.program.slot(self.program.slot_of(node, port))
        return slot.node, slot.port


def run_forward(program: Program, feeds=None, **kw) -> RunResult:
    """A forward pass only; see :func:`run`."""
    return run(program, feeds, target=None, **kw)


def run_backward(program: Program, feeds=None, target=None, **kw) -> RunResult:
    """Forward and backward from ``target`` (default: the page's loss); see :func:`run`."""
    return run(program, feeds, target=target if target is not None else _LOSS, **kw)


_LOSS = object()
#: the collections of node ids a run's ``wrt`` is made a frozenset from before its plan is looked
#: up: what plans key on (order and repeats say nothing), so that a kind of run asked for with a
#: list is found in one look-up too (a 1,000-op chain: 43 us a run)
_WRT_COLLECTIONS = (list, tuple, set)


# Long only for its docstring, which documents every keyword of the run API; the body is ~30 lines.
def run(program: Program, feeds=None, *, fetch=None, target=None, grad_seed=None, wrt=None,
        variables=None, record: bool = True, check_numerics: bool = True, step: int = 0,
        commit: bool = True, split: str = "train", run_seed: int = 0, memory_budget=None,
        held_bytes: int = 0) -> RunResult:
    """Run a compiled page.

    feeds: ``{placeholder node id: array}``; missing ones come from the page's saved feeds.
    fetch: node ids or ``"node:port"`` whose values to return (with ``record``, all are kept).
    target: the scalar output to differentiate (``"node"``, ``"node:port"``), or None for a
    forward pass only; ``grad_seed`` is the cotangent for a non-scalar target.
    wrt: node ids to compute gradients for; None means every node when recording, else the
    trainable Variables.
    variables: ``{variable node id: array}`` overriding the values stored in the project.
    record: keep every value and every wire's gradient (the editor's view); otherwise values are
    freed as soon as nothing needs them.
    check_numerics: raise :class:`NumericsError` naming the node that first produced NaN/Inf.
    step: the run's number in a sequence (a training step): random blocks draw from a stream
    fixed by their seed, their id and ``step``, so a run is reproducible and steps differ.
    split: which part of their data dataset blocks give: "train" (batch ``step`` of the training
    part), "test" (the held-out part) or "all".
    run_seed: mixed into every random stream (random blocks, Dropout, dataset shuffles) when not 0:
    a training run's seed; the same run_seed, step and block give the same numbers.
    commit: blocks that update state (Assign, Apply*) change the program's Variables and slots
    once the run has finished without error; ``result.state_updates`` lists the changes (write
    them into the project with ``Page.apply_state``); within a run all read the start's values.
    memory_budget: the most bytes the run's tensors may hold at once (an int or a size such as
    ``"2G"``); default: see :mod:`blockflow.budget`. Every array the run makes, and every
    intermediate a block reserves, is checked against it and against the per-tensor limit before
    it is made: :class:`MemoryLimitError` names the block, the array, its shape and size.
    held_bytes: memory the caller keeps alive for the run's sake besides what it passes in (a
    trainer's optimizer slots), counted against the budget."""
    program.raise_for_errors()
    _check_arguments(split, variables)
    if type(wrt) in _WRT_COLLECTIONS:
        wrt = frozenset(wrt)
    # a kind of run seen before (no fetch; the target by name) is found in one look-up
    seen = None if fetch or type(target) is not str or (wrt is not None and type(wrt) is not frozenset) \
        else program.cache("runs").get((target, wrt, record, grad_seed is None, check_numerics))
    if (seen is not None and FAST_LANE and not record and grad_seed is None and not variables
            and memory_budget is None and type(held_bytes) is int and not held_bytes):
        result = copy_context().run(_rerun, program, seen[2], seen[1], feeds, check_numerics, step, split,
                                    run_seed)
        if result is not None:
            return result
    t_slot, wrt, plan = seen or _plan_for(program, fetch, target, grad_seed, wrt, record, check_numerics)
    if variables:
        _check_variables(program, variables)
    budget, source = _budget(memory_budget)
    feed_list = plan.feed_inputs(feeds)
    if plan.shaped is not None:     # open sizes: the plan written for these feeds' shapes
        plan = plan.shaped_for(feed_list)
    # every array is checked before it is made (the walk cached per feed-shape signature)
    guard = plan.take_guard(budget, source, held_bytes, feed_list)
    return copy_context().run(_guarded, program, plan, guard, feed_list, variables, t_slot, grad_seed,
                              check_numerics, commit, feeds, wrt, step, split, run_seed)


# Both ways of running are called in a copy of the caller's context (contextvars), which the run's
# allocation guard and numpy error state are set in and which goes with the run: a signal's
# exception (Ctrl-C, a timer) can land between any two bytecodes, also between a set and the try
# that would undo it, and a try/finally cannot close that gap (tests/hostile/test_interrupt_mid_run).
def _guarded(program, plan, guard, *rest):
    allocation_guard.set(guard)
    try:
        return _run_planned(program, plan, guard, *rest)
    finally:
        plan.guards.append(guard)


def _check_arguments(split, variables) -> None:
    if split not in SPLITS:
        raise RunError(f"split must be one of {', '.join(SPLITS)}, not {split!r}")
    if variables is not None and not isinstance(variables, Mapping):   # an array's truth value raised
        raise RunError(f"variables must be a mapping of Variable ids to values, not {type(variables).__name__}")


def _check_variables(program: Program, variables: dict) -> None:
    unknown = sorted(str(n) for n in variables if getattr(program.spec_of(n), "role", None) != "variable")
    if unknown:
        raise RunError(f"values given for Variables that are not on page '{program.page_name}': "
                       f"{', '.join(unknown)}")


def _budget(memory_budget) -> tuple[int, str]:
    try:
        return memory_budget_of(memory_budget)
    except ValueError as exc:
        raise RunError(f"memory budget: {exc}") from None


def _rerun(program: Program, plan: "_Plan", wrt, feeds, check, step, split, run_seed) -> RunResult | None:
    """run() for a kind of run seen before that records nothing and is given no fetch, gradient
    seed, Variables, budget or held bytes, on a plan that keeps no arrays and updates no state (a
    training step, a benchmark's step, the CLI's run): the same work, with the steps between the
    call and the plan's code written inline. None, having done nothing, when the feeds, the budget
    or numpy ask for the general path (which then says what is wrong). Called in a copy of the
    caller's context, as _guarded is: what it sets there goes with the run.

    Why: right after a large numpy step, whose arrays have pushed the interpreter's objects out
    of the CPU caches, each Python call costs a few cache misses; the general path's calls cost
    an MLP step 3-5 us more (measured interleaved in one process: benchmarks/README.md)."""
    if type(feeds) is not dict:     # first: shaped_seen indexes it by name (an array raised IndexError)
        return None
    if plan.shaped is not None and (plan := plan.shaped_seen(feeds)) is None:
        return None
    if plan.n_buffers or plan.update_steps or _ERRSTATE is None:
        return None
    try:
        budget, source = memory_budget_of(None)
    except ValueError:
        return None
    spec = plan.feed_spec
    if len(feeds) != len(spec):
        return None
    feed_list = []
    for name, dtype, shape in spec:    # PlanInputs.feed_inputs' common case
        value = feeds.get(name)
        if type(value) is not np.ndarray or value.dtype is not dtype or value.shape != shape:
            return None
        feed_list.append(value)
    # the feeds have the Placeholders' fixed shapes: the guard's key is the plan's own
    try:
        guard = plan.guards.pop()
    except IndexError:    # none kept, or another thread's run took it
        guard = None
    if guard is None or not guard.restart(budget, source, 0, plan.fixed_feed_key):
        guard = plan.take_guard(budget, source, 0, feed_list)
    allocation_guard.set(guard)     # in the run's own context: see _guarded
    try:
        known = plan.last_variables
        if known is not None and known[0] == program.variable_values.version and not plan.state_keys:
            var_list = known[1]
        else:
            var_list = plan.variable_inputs(None)
        data = plan.last_data
        if data.step != step or data.split != split or data.seed != run_seed:
            data = plan.last_data = DataRequest(step, split, run_seed)
        _ERRSTATE.set(ignore_all_state())
        out = plan.fn(var_list, feed_list, None, data, guard, [])
        result = plan.pack(out)
        if check and (plan.finite is None or not plan.finite(out)):
            plan.check(result, out, None, feeds, None, wrt, step, split, run_seed)
    finally:
        plan.guards.append(guard)
    return result


def _plan_for(program: Program, fetch, target, grad_seed, wrt, record, check=True):
    """(target slot, wrt as a frozenset or None, plan) for a kind of run, checked.

    A kind seen before (the same target, wrt and record, no fetch) is found in one look-up: a
    training step or the editor's repeated run does not resolve and check it again."""
    simple = not fetch and (wrt is None or type(wrt) is frozenset) and (
        target is None or target is _LOSS or type(target) is str)
    if simple:
        seen_key = (target, wrt, record, grad_seed is None, check)
        seen = program.cache("runs").get(seen_key)
        if seen is not None:
            return seen
    t_slot = None if target is None else resolved(program, "target", None if target is _LOSS else target)
    if t_slot is not None and wrt is None and not record:
        wrt = program.trainable
    fetch_slots = checked_fetch(program, fetch)
    check_target(program, t_slot, grad_seed)
    wrt = checked_wrt(program, wrt)
    # a checked run that does not record may certify some gradients finite (run/certify.py)
    key = (fetch_slots, t_slot, wrt, record, grad_seed is not None, bool(check) and not record)
    plans = program.cache("plans")
    plan = plans.get(key)
    if plan is None:
        plan = plans[key] = _new_plan(program, fetch_slots, t_slot, wrt, record, key[5], seeded=key[4])
    if simple:
        program.cache("runs")[seen_key] = (t_slot, wrt, plan)
    return t_slot, wrt, plan


def _run_planned(program, plan, guard, feed_list, variables, t_slot, grad_seed, check_numerics, commit,
                 feeds, wrt, step, split, run_seed) -> RunResult:
    var_list = plan.variable_inputs(variables)
    seed = None
    if grad_seed is not None:
        ttype = program.slot(t_slot).type
        try:    # held to the feeds' rule: numpy's cast would warn, drop a complex part, or raise
            seed = fit_dtype(grad_seed, ttype.dtype)
        except (ValueError, TypeError) as exc:
            raise RunError(f"the gradient seed for the target {slot_name(program, t_slot)} ({ttype}): {exc}") from None
        if seed.ndim != ttype.rank or any(d is not None and d != n for d, n in zip(ttype.shape, seed.shape)):
            raise RunError(f"the gradient seed has shape {list(seed.shape)} but the target "
                           f"{slot_name(program, t_slot)} is {ttype}")
    data = plan.last_data
    if data.step != step or data.split != split or data.seed != run_seed:
        data = plan.last_data = DataRequest(step, split, run_seed)
    feed_list = plan.fitted_feeds(feed_list)
    # one error state for the run and its check, numpy's "ignore everything" (ignore_all_state)
    token = _ERRSTATE.set(ignore_all_state()) if _ERRSTATE is not None else None
    errstate = np.errstate(all="ignore") if token is None else None
    if errstate is not None:
        errstate.__enter__()
    try:
        buffers = plan.take_buffers()
        faults = _faults() if buffers is None and plan.n_buffers else None
        try:
            out = plan.fn(var_list, feed_list, seed, data, guard,
                          buffers if buffers is not None else [None] * plan.n_buffers)
        finally:
            if buffers is not None:
                plan.buffers.append(buffers)
        if faults is not None:
            plan.count_faults(_faults() - faults)
        result = plan.pack(out)
        # the written-out test first (packer.py); check itself only when it fails or is not there
        if check_numerics and (plan.finite is None or not plan.finite(out)):
            plan.check(result, out, variables, feeds, grad_seed, wrt, step, split, run_seed)
    finally:
        if token is not None:
            _ERRSTATE.reset(token)
        else:
            errstate.__exit__(None, None, None)
    if commit and result.state_updates:
        plan.commit(result)
    return result


def _new_plan(program, fetch_slots, t_slot, wrt, record, check=False, types=None, seeded=False) -> "_Plan":
    # Generating a plan makes many small objects and frees none: the cyclic collector would rescan
    # the growing heap again and again (as in compile_page), so it waits until the plan is made.
    enabled = gc.isenabled()
    try:    # off inside the try: an exception right after it still turns it back on
        gc.disable()
        return _Plan(program, fetch_slots, t_slot, wrt, record, check, types, seeded)
    finally:
        if enabled:
            gc.enable()


def _forward_steps(steps, fetch, target, record) -> list:
    """The steps to run forward: everything when recording; otherwise what the fetches and the
    target need, and every state update."""
    if record:
        return list(steps)
    need = set(fetch) | ({target} if target is not None else set())
    keep = set()
    for st in reversed(steps):
        if st.refs or any(o in need for o in st.outputs):  # state updates always run
            keep.add(st.index)
            need.update(s for s in _step_sources(st) if s is not None)
    return [st for st in steps if st.index in keep]


def _backward_steps(fwd, paths) -> list:
    """Steps with at least one input needing a cotangent, in reverse order."""
    if paths is None:
        return []
    return [st for st in reversed(fwd)
            if st.spec.gradient == "vjp" and any(paths.needs.get((st.index, j)) for j in range(len(st.in_edges)))]


def _wanted_grads(fwd, paths, wrt) -> list:
    """(node, slot) of the Variable and Placeholder outputs whose gradient a run returns."""
    if paths is None:
        return []
    return [(st.node, st.outputs[0]) for st in fwd
            if st.role in ("variable", "placeholder") and st.outputs[0] in paths.slots
            and (wrt is None or st.node in wrt)]


class _Plan(PlanInputs, PlanFailures):
    """Straight-line code for one kind of run, generated once per Program and key."""

    def __init__(self, program: Program, fetch, target, wrt, record, check=False, types=None, seeded=False):
        self.program = program
        self.fetch = fetch
        self.target = target
        self.record = record
        # ``types``: a plan for one feed-shape signature sees them as the slots' (run/shaped.py)
        seen_as = program if types is None else ShapedProgram(program, types)
        slots = seen_as.slots
        paths = program.gradient_paths((slots[target].node, slots[target].port), wrt) \
            if target is not None else None
        self.paths = paths
        fwd = _forward_steps(program.steps, fetch, target, record)
        self.var_steps = [st for st in fwd if st.role == "variable"]
        self.var_nodes = [st.node for st in self.var_steps]
        self.feed_steps = [st for st in fwd if st.role == "placeholder"]
        self.feed_dtypes = [slots[st.outputs[0]].type.dtype for st in self.feed_steps]
        self.saved_feeds: dict = {}
        #: (Placeholder id, dtype, shape) in F's order, for feed_inputs' common case; the shape is
        #: None where the Placeholder leaves a size open (its feeds take the general check)
        self.feed_spec = tuple((st.node, dtype, _fixed(slots[st.outputs[0]].type.shape))
                               for st, dtype in zip(self.feed_steps, self.feed_dtypes))
        #: the allocation guard's key for feeds of exactly those shapes (take_guard's key)
        self.fixed_feed_key = (tuple(shape for _, _, shape in self.feed_spec),)
        #: (VariableValues.version, the Variables' values in V's order) of the last run
        self.last_variables = None
        #: the last run's DataRequest, used again while the step, split and seed stay
        self.last_data = DataRequest()
        self.state_slots = sorted({s for st in fwd for s in _step_sources(st)
                                   if s is not None and slots[s].state})
        #: where each state slot's value is kept: (Variable node, key) in program.slot_values
        self.state_keys = [(slots[s].node, slots[s].port) for s in self.state_slots]
        self.streams = BlockStreams(program.steps)
        if paths is not None and paths.prevented:
            raise RunError(self._prevent_message(paths.prevented, "the gradient of " + slot_name(program, target)))
        self.bwd = bwd = _backward_steps(fwd, paths)
        #: (node, slot) of variable/placeholder outputs with gradient
        self.wanted_grads = _wanted_grads(fwd, paths, wrt)
        code = lower(seen_as, fwd=fwd, bwd=bwd, paths=paths, target=target, fetch=fetch, record=record,
                     wanted_grads=self.wanted_grads, var_steps=self.var_steps, feed_steps=self.feed_steps,
                     state_slots=self.state_slots, fail=self._fail, rng=self.streams.generator, where=self._where,
                     check=check, seeded=seeded)
        if code.prevented_by_gradients is not None:
            node, prevented = code.prevented_by_gradients
            raise RunError(self._prevent_message(prevented, f"{program.full_name(node)} (Gradients)"))
        self.fn, self.source, self.memory = code.fn, code.source, code.memory
        self.n_buffers = code.n_buffers
        #: sets of kept output arrays, one per run in progress (lower.REUSE_BUFFERS): a run takes
        #: one (a new one when another thread's run holds them all) and puts it back
        self.buffers: list = []
        #: allocation guards of finished runs, for the next ones (take_guard)
        self.guards: list = []
        #: whether runs keep them (see take_buffers), and how many runs in a row faulted
        self.keep_arrays = KEEP_ARRAYS is True
        self._faulting_runs = self._runs = 0
        self._fault_limit = sum(a for a in code.buffer_bytes) // 16384
        self.value_keys, self.grad_keys, self.wanted_keys = code.value_keys, code.grad_keys, code.wanted_keys
        self.target_key, self.edge_list, self.update_steps = code.target_key, code.edge_list, code.update_steps
        self._result_code(program, record)
        self.shaped = self.open_signatures(SHAPED_PLANS and not record and types is None, slots, lambda t: _new_plan(
            program, fetch, target, wrt, record, check, t, seeded))

    def _result_code(self, program: Program, record) -> None:
        """``pack`` (out -> RunResult) and ``finite`` (out -> bool, None for the general check),
        written out for the plan's keys where the run records nothing (packer.py); ``pack`` is the
        general package where the run returns wire gradients or state updates."""
        self.pack = self.package
        self.finite = None
        if GENERATED_PACKERS and not record:
            if not self.edge_list and not self.update_steps:
                self.pack = make_packer(RunResult, program, self.value_keys, self.grad_keys, self.wanted_keys,
                                        self.target_key, self.paths)
            self.finite = make_finite_test(len(self.value_keys), len(self.grad_keys))

    # ------------------------------------------------------------------------- inputs/outputs
    def take_buffers(self):
        """A set of kept arrays for a run, or None for a run that keeps none (and whose page
        faults are counted: count_faults)."""
        if not self.keep_arrays:
            return None
        try:
            return self.buffers.pop()
        except IndexError:
            return KeptArrays([None] * self.n_buffers)

    def count_faults(self, faults: int) -> None:
        """Keep the large arrays once two runs in a row faulted in a quarter of their pages: freed
        at the end of a run, they went back to the kernel (docs/performance.md). The first two
        runs do not count: a new heap faults whatever runs (the stable softmax: 2,933, 977, 0...)."""
        if faults is None or KEEP_ARRAYS is False:
            return
        self._runs += 1
        if self._runs <= 2:
            return
        self._faulting_runs = self._faulting_runs + 1 if faults > self._fault_limit else 0
        if self._faulting_runs >= 2:
            self.keep_arrays = True

    def package(self, out) -> RunResult:
        values, grads, edges, updates, _ = out
        grads = dict(zip(self.grad_keys, grads))
        wanted = {}
        for node, key in self.wanted_keys:
            g = grads.get(key)
            if g is not None:
                wanted[node] = g
        res = RunResult(self.program, dict(zip(self.value_keys, values)), grads,
                        dict(zip(self.edge_list, edges)) if self.edge_list else {}, wanted, {},
                        self.target_key, self.paths)
        for st, changed in zip(self.update_steps, updates):
            targets = dict(st.refs)
            for name, value in changed.items():
                key, node = targets[name]
                res.state_updates.setdefault(node, {})[key] = value
        return res

    def commit(self, result: RunResult) -> None:
        """Make a run's state updates the program's state: later runs read the new values."""
        program = self.program
        for node, changes in result.state_updates.items():
            current = program.variable_values[node]
            for key, value in changes.items():
                value = np.asarray(value)
                old = current if key == "value" else program.slot_values[(node, key)]
                if value.shape != old.shape:
                    raise RunError(f"an update of {program.full_name(node)}'s {key} has shape "
                                   f"{list(value.shape)}, the state is {list(old.shape)}")
                value = value.astype(old.dtype, copy=False)
                changes[key] = value
                if key == "value":
                    program.variable_values[node] = value
                else:
                    program.slot_values[(node, key)] = value

    def check(self, result: RunResult, out, variables, feeds, grad_seed, wrt, step, split="train", run_seed=0):
        """Raise NumericsError naming the first node whose output (or gradient) is not finite."""
        values, grads, _, _, certified = out
        if not self.record:
            # a gradient its product's operands certified finite is not read again
            if self.finite is not None:
                if self.finite(out):
                    return
            elif all_finite_many(values, [g for g, sure in zip(grads, certified) if not sure]):
                return
            # Something went wrong: replay recording everything; its check raises, naming where it started.
            guard = allocation_guard.get()
            try:
                run(self.program, feeds, target=self.target_key, grad_seed=grad_seed, wrt=wrt, variables=variables, record=True, check_numerics=True,
                    step=step, split=split, run_seed=run_seed, commit=False,
                    memory_budget=None if guard is None else guard.budget,
                    held_bytes=0 if guard is None else guard.held)
            except MemoryLimitError as exc:
                bad = [k for k, v in zip(self.value_keys + self.grad_keys, list(values) + list(grads))
                       if not _finite(v)]
                what = ", ".join(f"{self.program.full_name(n)}:{p}" for n, p in bad[:3]) or "a value"
                raise RunError(f"{what} is not finite (NaN or Inf); finding the block where it started needs "
                               f"a replay that keeps every value, which the memory budget does not allow "
                               f"({exc})") from None
            raise RunError("a value was not finite, but a recorded replay did not reproduce it")
        program = self.program
        slots = program.slots
        for st in program.steps:
            for o in st.outputs:
                v = result.values.get((slots[o].node, slots[o].port))
                if v is not None and not _finite(v):
                    raise NumericsError(f"{program.full_name(st.node)} ({st.spec.name})", slots[o].port,
                                        _what(v), "forward")
        if self.target is not None:
            seed = result.grads.get(self.target_key)
            if seed is not None and not _finite(seed):
                raise NumericsError("the gradient seed", self.target_key[1], _what(seed), "backward")
        # In backward order: each wire's share, then the sums where an output feeds several blocks.
        for edge, g in result.edge_grads.items():
            if not _finite(g):
                st = program.step(edge.dst)
                raise NumericsError(f"{program.full_name(st.node)} ({st.spec.name})", edge.dst_port,
                                    _what(g), "backward", side="input")
        for key, g in result.grads.items():
            if not _finite(g):
                raise NumericsError(f"{program.full_name(key[0])}", key[1], _what(g) + " (summed over its wires)",
                                    "backward")


def _fixed(shape: tuple):
    """``shape`` when every size is known, else None."""
    return None if None in shape else shape


def _step_sources(st: Step):
    for src in st.inputs:
        if isinstance(src, tuple):
            yield from src
        else:
            yield src


#: whether plans keep their large elementwise outputs across runs: None decides per plan from
#: its page faults (_Plan.count_faults), True always, False never
KEEP_ARRAYS = None


def _faults():
    """Minor page faults of the process so far (None where getrusage is missing)."""
    if _resource is None:
        return None
    return _resource.getrusage(_resource.RUSAGE_SELF).ru_minflt
