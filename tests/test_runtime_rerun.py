"""A repeated run's short way (runtime._rerun) gives what the general path gives, and leaves to
it every case it does not handle: other feeds, a budget from the environment, NaN, state."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import blockflow.budget as budget
import blockflow.run.runtime as runtime
from blockflow.compile.compiler import compile_project
from blockflow.errors import FeedError, MemoryLimitError, NumericsError, RunError
from blockflow.io.project_io import load_project
from blockflow.run.runtime import run

from diagrams import chain, dense_layer

SAMPLES = sorted((Path(__file__).parent.parent / "sample_projects").glob("*.bflow.json"))
RNG = np.random.default_rng(8)


def _outcome(fn):
    try:
        res = fn()
    except Exception as exc:   # the message is what the user sees: compared as text
        return type(exc).__name__, str(exc)
    return {name: {k: np.asarray(v).tobytes() for k, v in getattr(res, name).items()}
            for name in ("values", "grads", "variable_grads")}


def _both(monkeypatch, make_program, calls, taken):
    """For each lane setting, a fresh program run through ``calls`` (each a function of the
    program): their outcomes, and how many runs took the short way (``taken``: the short_ways
    fixture)."""
    out = []
    for lane in (True, False):
        monkeypatch.setattr(runtime, "FAST_LANE", lane)
        program = make_program()
        out.append([_outcome(lambda: call(program)) for call in calls])
    return out, sum(taken)


def _layer():
    return dense_layer()


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name.split(".")[0])
def test_samples_run_the_same_either_way(monkeypatch, path, short_ways):
    project = load_project(path)
    loss = project.pages[0].loss
    if loss is None:
        pytest.skip("no loss")
    # as a caller's own arrays (a file's "<f4" is float32 by equality, not identity: the short
    # way leaves such a feed to the general path)
    feeds = {k: np.asarray(v).astype(np.asarray(v).dtype.name) for k, v in project.pages[0].feeds.items()}
    calls = [lambda p, s=s, f=f: run(p, f, target=loss, record=False, step=s)
             for s in (0, 1) for f in (None, feeds)]
    (lane, general), taken = _both(monkeypatch, lambda: compile_project(project), calls, short_ways)
    assert lane == general
    assert taken, "no run took the short way"


def test_a_step_takes_the_short_way_and_gives_the_same_bits(monkeypatch, short_ways):
    x = RNG.normal(size=(4, 30)).astype(np.float32)
    calls = [lambda p: run(p, {"x": x}, target="loss", record=False)] * 3
    calls.append(lambda p: run(p, {"x": x}, target="loss", record=False, check_numerics=False))
    calls.append(lambda p: run(p, {"x": x}, target="loss", record=False, check_numerics=False))
    (lane, general), taken = _both(monkeypatch, lambda: compile_project(_layer()), calls, short_ways)
    assert lane == general and taken == 3   # the first run of each kind makes its plan


def test_gradients_asked_for_by_a_list_take_the_short_way(monkeypatch, short_ways):
    # wrt as a list, a tuple (in any order, with repeats), a set or a frozenset: the same plan and bits
    x = RNG.normal(size=(4, 30)).astype(np.float32)
    calls = [lambda p, w=w: run(p, {"x": x}, target="loss", record=False, wrt=w)
             for w in (["W", "x"], ("x", "W", "x"), frozenset({"W", "x"}), {"x", "W"})]
    (lane, general), taken = _both(monkeypatch, lambda: compile_project(_layer()), calls, short_ways)
    assert lane == general and lane[0] == lane[1] == lane[2] == lane[3] and taken == 3
    bad = [lambda p: run(p, {"x": x}, target="loss", record=False, wrt=["x", "nowhere"])]
    (lane, general), _ = _both(monkeypatch, lambda: compile_project(_layer()), bad, short_ways)
    assert lane == general and lane[0][0] == RunError.__name__ and "nowhere" in lane[0][1]


def _variables_changed(program):
    program.variable_values["W"] = np.full((30, 9), 0.5, np.float32)
    return run(program, {"x": np.ones((4, 30), np.float32)}, target="loss", record=False)


HOSTILE = {
    "a feed of another dtype": lambda p: run(p, {"x": np.ones((4, 30))}, target="loss", record=False),
    "a feed of another shape": lambda p: run(p, {"x": np.ones((5, 30), np.float32)}, target="loss", record=False),
    "a list feed": lambda p: run(p, {"x": [[1.0] * 30] * 4}, target="loss", record=False),
    "an unknown feed": lambda p: run(p, {"x": np.ones((4, 30), np.float32), "y": 1}, target="loss", record=False),
    "no feeds": lambda p: run(p, None, target="loss", record=False),
    "NaN in a feed": lambda p: run(p, {"x": np.full((4, 30), np.nan, np.float32)}, target="loss", record=False),
    "Inf in a feed": lambda p: run(p, {"x": np.full((4, 30), np.inf, np.float32)}, target="loss", record=False),
    "a bad split": lambda p: run(p, {"x": np.ones((4, 30), np.float32)}, target="loss", record=False, split="x"),
    "Variables changed": _variables_changed,
    "a small budget": lambda p: run(p, {"x": np.ones((4, 30), np.float32)}, target="loss", record=False,
                                    memory_budget="1K"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_what_the_short_way_does_not_handle_is_reported_as_before(monkeypatch, case, short_ways):
    good = lambda p: run(p, {"x": np.ones((4, 30), np.float32)}, target="loss", record=False)  # noqa: E731
    calls = [good, good, HOSTILE[case], good]
    (lane, general), _ = _both(monkeypatch, lambda: compile_project(_layer()), calls, short_ways)
    assert lane == general
    if case.startswith(("NaN", "Inf")):
        assert lane[2][0] == NumericsError.__name__
    if case in ("a bad split", "a small budget"):
        assert lane[2][0] in (RunError.__name__, MemoryLimitError.__name__)
    if case == "an unknown feed":
        assert lane[2][0] == FeedError.__name__


@pytest.mark.parametrize("text", ["2G", "1K", "not a size", ""])
def test_a_budget_from_the_environment_is_read_on_every_run(monkeypatch, text, short_ways):
    good = lambda p: run(p, {"x": np.ones((4, 30), np.float32)}, target="loss", record=False)  # noqa: E731

    def with_env(p):
        monkeypatch.setenv(budget.ENV_VAR, text)
        try:
            return good(p)
        finally:
            monkeypatch.delenv(budget.ENV_VAR)

    (lane, general), _ = _both(monkeypatch, lambda: compile_project(_layer()), [good, good, with_env, good],
                               short_ways)
    assert lane == general
    if text in ("1K", "not a size"):
        assert isinstance(lane[2], tuple)


@pytest.mark.parametrize("lane", [True, False])
def test_feeds_are_checked_before_the_plan_reads_them(monkeypatch, lane):
    """The plan reads F as it is: the feed's shape is checked by the Placeholder's own forward
    before the run (open sizes allowed), with the message a run's failing step gave."""
    monkeypatch.setattr(runtime, "FAST_LANE", lane)
    open_batch = chain(("x", "Placeholder", {"shape": [-1, 30]}, None),
                       ("W", "Variable", {"shape": [30, 9], "initializer": "glorot_uniform", "seed": 2}, None),
                       ("mm", "MatMul", {}, {"a": "x", "b": "W:ref"}),
                       ("loss", "Mean", {}, {"input": "mm"}))
    open_batch.pages[0].loss = "loss"
    for project, good, bad, expects in ((_layer(), (4, 30), (5, 30), "[4,30]"), (open_batch, (7, 30), (7, 31), "[?,30]")):
        program = compile_project(project)
        for _ in range(3):
            res = run(program, {"x": np.ones(good, np.float32)}, target="loss", record=False)
            assert np.isfinite(res.value("loss"))
        assert "F[0]" in [p.source for p in program.cache("plans").values()][0]
        for feed in (np.ones(bad, np.float32), np.ones(bad).tolist()):
            with pytest.raises(FeedError) as info:
                run(program, {"x": feed}, target="loss", record=False)
            assert str(info.value) == (f"feed for Placeholder main/x does not fit: feed has shape {list(bad)}, "
                                       f"the Placeholder expects {expects}")
        with pytest.raises(FeedError, match="expected numbers for float32"):
            run(program, {"x": np.full(good, "a")}, target="loss", record=False)


def test_a_plan_made_without_written_out_results_takes_the_short_way_too(monkeypatch):
    monkeypatch.setattr(runtime, "GENERATED_PACKERS", False)
    program = compile_project(_layer())
    x = np.ones((4, 30), np.float32)
    first = run(program, {"x": x}, target="loss", record=False)
    again = run(program, {"x": x}, target="loss", record=False)
    assert again.value("loss").tobytes() == first.value("loss").tobytes()
    with pytest.raises(NumericsError):
        run(program, {"x": np.full((4, 30), np.nan, np.float32)}, target="loss", record=False)
