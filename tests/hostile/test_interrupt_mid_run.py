"""An exception from a signal handler (Ctrl-C's KeyboardInterrupt, a timer's) can land on any
bytecode, including the one right after a run has set its allocation guard or numpy's error state
and before the ``try`` that would undo it. Whatever a run sets must not outlive it there: a guard
left behind would charge later block calls outside any run against a finished run's budget (CI
caught one leaking from a timer test into a later test's ``allocation_guard.get() is None``), and
an error state left behind would silence numpy's warnings in the user's session.

The exception is raised deterministically by a profile hook on the return of the ``set`` call.
"""
from __future__ import annotations

import gc
import sys

import numpy as np
import pytest

import blockflow.run.runtime as runtime
from blockflow.compile.compiler import compile_project
from blockflow.run.numerics import ERRSTATE
from blockflow.run.runtime import run
from blockflow.spec import allocation_guard

from diagrams import chain


class Stop(BaseException):
    """What the signal handler raises (not an Exception, as KeyboardInterrupt is not)."""


@pytest.fixture(autouse=True)
def _restored():
    """What a failing case leaks is put back, so that it fails alone."""
    tokens = [(v, v.set(v.get())) for v in (allocation_guard, ERRSTATE) if v is not None]
    yield
    for var, token in tokens:
        var.reset(token)


def _program():
    project = chain(("x", "Placeholder", {"shape": [4, 3]}, None),
                    ("W", "Variable", {"shape": [3, 2], "initializer": "glorot_uniform", "seed": 3}, None),
                    ("mm", "MatMul", {}, {"a": "x", "b": "W:ref"}),
                    ("t", "Tanh", {}, {"x": "mm"}),
                    ("loss", "Sum", {}, {"input": "t"}))
    project.pages[0].loss = "loss"
    return compile_project(project)


_X = np.random.default_rng(5).normal(size=(4, 3)).astype(np.float32)


def _bits(result):
    return ({k: v.tobytes() for k, v in result.values.items()},
            {k: v.tobytes() for k, v in result.grads.items()})


def _stop_after(var, program, nth=1):
    """Run ``program`` with Stop raised right after the ``nth`` call of ``var.set`` has returned."""
    seen = []

    def hook(frame, event, arg):
        if event == "c_return" and getattr(arg, "__self__", None) is var and arg.__name__ == "set":
            seen.append(1)
            if len(seen) == nth:
                raise Stop()

    sys.setprofile(hook)
    try:
        run(program, {"x": _X}, target="loss", record=False)
    finally:
        sys.setprofile(None)
    return len(seen)


@pytest.mark.parametrize("lane", [True, False], ids=["short-way", "general-path"])
@pytest.mark.parametrize("which", ["allocation guard", "numpy error state"])
def test_a_run_stopped_right_after_it_sets_its_state_leaves_none_of_it(monkeypatch, lane, which):
    if which == "numpy error state" and ERRSTATE is None:
        pytest.skip("numpy 1.x keeps its error state outside a context variable")
    var = allocation_guard if which == "allocation guard" else ERRSTATE
    monkeypatch.setattr(runtime, "FAST_LANE", lane)
    program = _program()
    want = _bits(run(program, {"x": _X}, target="loss", record=False))
    run(program, {"x": _X}, target="loss", record=False)    # the kind of run is seen: the short way
    with np.errstate(divide="warn", over="raise"):
        before = np.geterr()
        with pytest.raises(Stop):
            _stop_after(var, program)
        assert np.geterr() == before
    assert allocation_guard.get() is None
    assert _bits(run(program, {"x": _X}, target="loss", record=False)) == want


def test_every_set_a_run_makes_can_be_stopped_without_a_leak(monkeypatch):
    """Stop after each of the context-variable sets a run makes, one run per place."""
    monkeypatch.setattr(runtime, "FAST_LANE", False)
    program = _program()
    want = _bits(run(program, {"x": _X}, target="loss", record=False))
    for var in [v for v in (allocation_guard, ERRSTATE) if v is not None]:
        sets = _stop_after(var, program, nth=0)     # nth=0: count them, stop nowhere
        assert sets >= 1
        for nth in range(1, sets + 1):
            before = np.geterr()
            with pytest.raises(Stop):
                _stop_after(var, program, nth)
            assert np.geterr() == before and allocation_guard.get() is None, (var, nth)
    assert _bits(run(program, {"x": _X}, target="loss", record=False)) == want


def _stop_after_call(fn, is_it, nth):
    """``fn()`` with Stop raised right after the ``nth`` C call ``is_it(callable)`` accepts has
    returned (nth=0: count them, stop nowhere); how many there were."""
    seen = []

    def hook(frame, event, arg):
        if event == "c_return" and is_it(arg):
            seen.append(1)
            if len(seen) == nth:
                raise Stop()

    sys.setprofile(hook)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return len(seen)


def _is_errstate_set(c):
    return ERRSTATE is not None and getattr(c, "__self__", None) is ERRSTATE and c.__name__ == "set"


def test_a_training_step_stopped_after_any_error_state_set_leaves_the_callers_state():
    """A trainer's updates ignore numpy's floating-point errors (their own check names an
    overflow): a Ctrl-C right after that state is set, as after a run's, must not leave numpy
    silent in the user's session."""
    if ERRSTATE is None:
        pytest.skip("numpy 1.x keeps its error state outside a context variable")
    from blockflow.run.training import TrainConfig, Trainer

    trainer = Trainer(_program(), TrainConfig(steps=3, optimizer="sgd", hyper={"lr": 0.1}),
                      feeds={"x": _X})
    trainer.step()
    sets = _stop_after_call(trainer.step, _is_errstate_set, 0)
    assert sets >= 2        # the run's and the updates'
    with np.errstate(divide="warn", over="raise"):
        before = np.geterr()
        for nth in range(1, sets + 1):
            with pytest.raises(Stop):
                _stop_after_call(trainer.step, _is_errstate_set, nth)
            assert np.geterr() == before, nth


def _is_gc_disable(c):
    return c is gc.disable


def test_a_compile_or_first_run_stopped_after_it_pauses_the_collector_turns_it_back_on():
    """A compile, a gradient-paths sweep and a plan's making turn the cyclic collector off while
    they make many objects: a Ctrl-C or a timer's exception right after gc.disable() must not
    leave it off for the rest of the process (its cyclic garbage never collected)."""
    from blockflow.compile.gradpaths import GradientPaths

    assert gc.isenabled()

    def work():
        program = _program()
        GradientPaths(program, program.slot_of("loss", None), None)
        run(program, {"x": _X}, target="loss", record=False)
        run(program, {"x": _X}, target="loss", record=True)

    try:
        calls = _stop_after_call(work, _is_gc_disable, 0)
        assert calls >= 3
        for nth in range(1, calls + 1):
            with pytest.raises(Stop):
                _stop_after_call(work, _is_gc_disable, nth)
            assert gc.isenabled(), nth
    finally:
        gc.enable()
