"""What a run plan is handed: its Variables' values and its feeds, checked and converted once
(runtime._Plan takes these methods from PlanInputs).

Must not import PySide6 or the block library.
"""
from __future__ import annotations

import operator
import threading
from collections.abc import Mapping

import numpy as np

from blockflow.errors import FeedError, RunError
from blockflow.run.memplan import RunGuard
from blockflow.run.shaped import MAX_SHAPED, fits, shaped_types
from blockflow.spec import AllocationError, fit_dtype

__all__ = ["PlanInputs"]

_SHAPE = operator.attrgetter("shape")
#: held while a new shaped plan is entered: threads that passed the size test together would
#: otherwise each add theirs (a plan is written outside it, so plans are written in parallel)
_SHAPED_LOCK = threading.Lock()


class PlanInputs:
    """The inputs side of runtime._Plan: V (Variables, then slot state) and F (feeds) in the
    order the generated code reads them."""

    def variable_inputs(self, variables):
        program = self.program
        if not variables and not self.state_keys:
            # the same list while no Variable's value changed (the generated code only reads it)
            known = self.last_variables
            store = program.variable_values
            if known is not None and known[0] == store.version:
                return known[1]
            try:
                values = store.many(self.var_nodes)
            except KeyError:
                values = [self._variable(st) for st in self.var_steps]
            self.last_variables = (store.version, values)
            return values
        states = [program.slot_values[key] for key in self.state_keys]
        if not variables:
            try:
                return program.variable_values.many(self.var_nodes) + states
            except KeyError:
                return [self._variable(st) for st in self.var_steps] + states
        out = []
        for st in self.var_steps:
            value = None if variables is None else variables.get(st.node)
            if value is None:
                value = self._variable(st)
            else:
                value = self._given_variable(st, value)
            out.append(value)
        return out + states

    def _given_variable(self, st, value) -> np.ndarray:
        """A value the caller gave for a Variable, held to the rule feeds keep (fit_dtype): a
        cast that would change it (1e300 into float32, a complex part, text) is an error naming
        the Variable, not numpy's warning or exception."""
        program = self.program
        want = program.slot(st.outputs[0]).type
        if type(value) is np.ndarray and value.dtype == want.dtype:
            fitted = value
        else:
            try:
                fitted = fit_dtype(value, want.dtype)
            except (ValueError, TypeError) as exc:
                raise RunError(f"value given for Variable {program.full_name(st.node)} ({want}): {exc}") from None
        if fitted.shape != want.shape:
            raise RunError(f"value given for Variable {program.full_name(st.node)} has shape "
                           f"{list(fitted.shape)}, the Variable is {want}")
        return fitted

    def _variable(self, st) -> np.ndarray:
        """The program's value of a Variable, drawn from its initializer if this is its first run
        (under the run's guard: its first value counts against the budget)."""
        try:
            return self.program.variable_values[st.node]
        except (AllocationError, MemoryError) as exc:
            raise self._memory_error(st, exc, "forward", "making its first value") from None

    def take_guard(self, budget: int, source: str, held: int, feed_list) -> RunGuard:
        """The run's allocation guard: one an earlier run of the same budget and feed shapes put
        back in ``self.guards``, restarted, else a new one (whose walk is looked up by those
        arguments: a cold run spent ~4 us making it). A run puts its guard back when it ends;
        runs in several threads each take their own."""
        key = (tuple(map(_SHAPE, feed_list)),)
        try:
            guard = self.guards.pop()
        except IndexError:
            guard = None
        if guard is not None and guard.restart(budget, source, held, key):
            return guard
        return RunGuard(self.memory, budget, source, held, key)

    def feed_inputs(self, feeds):
        if type(feeds) is dict and feeds and len(feeds) == len(self.feed_spec):
            # The common case: a value of the Placeholder's dtype for each of this run's
            # Placeholders and nothing else (as many names as it has, all of them found).
            out = []
            for name, dtype, shape in self.feed_spec:
                value = feeds.get(name)
                if type(value) is not np.ndarray or value.dtype is not dtype or value.shape != shape:
                    break
                out.append(value)
            else:
                return out
        program = self.program
        if feeds is None:
            feeds = {}
        elif not isinstance(feeds, Mapping):   # a list or an array: iterated, it met unhashable arrays
            raise FeedError(f"feeds must be a mapping of Placeholder ids to values, not {type(feeds).__name__}")
        for name in feeds:
            st = program.step(name)
            if st is None or st.role != "placeholder":
                known = ", ".join(s.node for s in program.steps if s.role == "placeholder") or "none"
                raise FeedError(f"there is no Placeholder '{name}' on page '{program.page_name}' "
                                f"(Placeholders: {known})")
        out = []
        for st, dtype in zip(self.feed_steps, self.feed_dtypes):
            value = feeds.get(st.node)
            if value is None:
                value = program.feeds.get(st.node)
                if value is not None:   # a saved feed is converted once per plan
                    known = self.saved_feeds.get(st.node)
                    if known is None or known[0] is not value:
                        known = self.saved_feeds[st.node] = (value, self._fit_feed(st, value, dtype))
                    value = known[1]
            elif type(value) is not np.ndarray or (value.dtype is not dtype and value.dtype != dtype):
                value = self._fit_feed(st, value, dtype)
            if value is None:
                t = program.slot(st.outputs[0]).type
                raise FeedError(f"Placeholder {program.full_name(st.node)} ({t}) has no feed: pass one "
                                f"or save a feed in the project")
            out.append(value)
        return out

    def fitted_feeds(self, feed_list) -> list:
        """The feeds as their Placeholders' own forward passes them (the shape checked, open sizes
        allowed), called where the plan's first steps used to call it, so that a run with several
        faults reports the same one first: the plan's code reads F as it is (lower.py). A feed of
        its Placeholder's fixed shape is taken without a call."""
        out = feed_list
        for i, ((_, _, shape), value) in enumerate(zip(self.feed_spec, feed_list)):
            if type(value) is not np.ndarray or value.shape != shape:
                if out is feed_list:
                    out = list(feed_list)
                out[i] = self._fitted(self.feed_steps[i], value)
        return out

    def _fitted(self, st, value) -> np.ndarray:
        """A feed checked by its Placeholder's own forward, its errors named as a failing step's."""
        try:
            return st.spec.forward(value, **st.attrs)
        except (AllocationError, MemoryError) as exc:
            raise self._memory_error(st, exc, "forward") from None
        except Exception as exc:   # what the forward raised, as a run's failing step reported it
            raise FeedError(f"feed for Placeholder {self.program.full_name(st.node)} does not fit: {exc}") from None

    def _fit_feed(self, st, value, dtype) -> np.ndarray:
        """A feed as the Placeholder's dtype; a number that does not fit it is an error (1000 for
        an int8, 1.7 for an int32), not a silent wrap."""
        if type(value) is np.ndarray and value.dtype == dtype:
            return value
        try:
            return fit_dtype(value, dtype)
        except (ValueError, TypeError) as exc:
            t = self.program.slot(st.outputs[0]).type
            raise FeedError(f"feed for Placeholder {self.program.full_name(st.node)} ({t}): {exc}") from None

    # ----------------------------------------------------------- plans per feed-shape signature
    def open_signatures(self, wanted: bool, slots, make) -> dict | None:
        """{feed shapes: plan written for them} for a plan whose feeds leave sizes open (None
        otherwise: ``wanted`` false, or every feed's shape fixed); ``make(types)`` writes one."""
        if not wanted or all(shape is not None for _, _, shape in self.feed_spec):
            return None
        self._declared = [slots[st.outputs[0]].type.shape for st in self.feed_steps]
        self._make_shaped = make
        return {}

    def shaped_for(self, feed_list):
        """The plan written for these feeds' shapes (made on first use, at most MAX_SHAPED), or
        this one: a feed its Placeholder would not pass as it is, or too many signatures."""
        key = tuple(map(_SHAPE, feed_list)) if all(type(v) is np.ndarray for v in feed_list) else None
        plan = self.shaped.get(key)
        if plan is None:
            if key is None or len(self.shaped) >= MAX_SHAPED or not fits(self._declared, self.feed_dtypes, feed_list):
                return self
            feed_slots = [st.outputs[0] for st in self.feed_steps]
            try:
                plan = self._make_shaped(shaped_types(self.program, feed_slots, feed_list))
            except Exception:   # noqa: BLE001 - this plan computes the same; it says what is wrong
                plan = self
            with _SHAPED_LOCK:
                if key not in self.shaped and len(self.shaped) >= MAX_SHAPED:
                    return self     # other threads took the last places while this one wrote
                plan = self.shaped.setdefault(key, plan)
        return plan

    def shaped_seen(self, feeds):
        """For a repeated run's short way: the plan already written for the shapes of ``feeds``
        (a dict of arrays), or None."""
        try:
            key = tuple(feeds[name].shape for name, _, _ in self.feed_spec)
        except (KeyError, AttributeError, TypeError):
            return None
        return self.shaped.get(key) if len(feeds) == len(self.feed_spec) else None
