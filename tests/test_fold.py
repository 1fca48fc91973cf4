"""Constant cotangents (run/fold.py): vjps that read no value, given the run's seed of ones, are
computed once when the plan is written; the runs give the bits they gave before, and no caller
ever holds one of the plan's arrays."""
from __future__ import annotations

import re

import numpy as np
import pytest

import blockflow.run.lower as lower
from blockflow.compile.compiler import compile_project
from blockflow.errors import MemoryLimitError
from blockflow.run.fold import FOLD_MAX_BYTES, FOLD_MAX_SIZE
from blockflow.run.runtime import run
from diagrams import chain

F32 = np.float32
RNG = np.random.default_rng(2611)


def _free_energy_page(batch=16, n=24):
    """loss = Mean(Sum(Softplus(x), axis 1)) - Mean(Sum(Softplus(y), axis 1)): the RBM's shape."""
    project = chain(("x", "Placeholder", {"shape": [batch, n]}, None),
                    ("y", "Placeholder", {"shape": [batch, n]}, None),
                    ("sx", "Softplus", {}, {"features": "x"}),
                    ("sy", "Softplus", {}, {"features": "y"}),
                    ("fx", "Sum", {}, {"input": "sx", "axis": np.int32(1)}),
                    ("fy", "Sum", {}, {"input": "sy", "axis": np.int32(1)}),
                    ("mx", "Mean", {}, {"input": "fx"}),
                    ("my", "Mean", {}, {"input": "fy"}),
                    ("loss", "Subtract", {}, {"x": "mx", "y": "my"}))
    feeds = {"x": RNG.normal(size=(batch, n)).astype(F32), "y": RNG.normal(size=(batch, n)).astype(F32)}
    return project, feeds


def _plan(program):
    return [p for p in program.cache("plans").values() if not p.record][0]


def _grads(monkeypatch, fold, project, feeds, **kw):
    monkeypatch.setattr(lower, "FOLD_COTANGENTS", fold)
    program = compile_project(project)
    out = [run(program, feeds, target="loss", wrt=frozenset(feeds), record=False, **kw) for _ in range(3)]
    return program, [(r.value("loss").tobytes(), {k: (v.dtype.str, v.shape, v.tobytes()) for k, v in r.variable_grads.items()})
                     for r in out], out


def test_a_losss_reductions_are_folded_and_give_the_same_bits(monkeypatch):
    project, feeds = _free_energy_page()
    folded_program, folded, _ = _grads(monkeypatch, True, project, feeds)
    plain_program, plain, _ = _grads(monkeypatch, False, project, feeds)
    assert folded == plain
    source = _plan(folded_program).source
    # a vjp's line, called (gr.. = b..(...)) or written inline (run/inline_grads.py)
    called = [line for line in source.splitlines() if re.search(r"_n = -\d+; gr", line)]
    assert len(called) == 2 and all("s" in line for line in called)   # the two Softplus vjps only
    # the plain plan computes all seven vjps (called, or written inline: run/inline_grads.py)
    assert len([line for line in _plan(plain_program).source.splitlines() if re.search(r"_n = -\d+; gr", line)]) == 7
    assert ".copy()" not in source and ".copy()" in _plan(plain_program).source   # the seed: unread


def test_the_plans_arrays_are_read_only_and_never_the_callers(monkeypatch):
    """Identity hands its cotangent on: the gradient of x would be the plan's folded array; the
    run returns a copy of it instead, a new one each run, which the caller may write into."""
    monkeypatch.setattr(lower, "FOLD_COTANGENTS", True)
    project = chain(("x", "Placeholder", {"shape": [6, 5]}, None),
                    ("i", "Identity", {}, {"input": "x"}),
                    ("loss", "Mean", {}, {"input": "i"}))
    program = compile_project(project)
    x = RNG.normal(size=(6, 5)).astype(F32)
    first = run(program, {"x": x}, target="loss", wrt=["x"], record=False).variable_grads["x"]
    second = run(program, {"x": x}, target="loss", wrt=["x"], record=False).variable_grads["x"]
    assert first.flags.writeable and not np.shares_memory(first, second)
    np.testing.assert_array_equal(first, np.full((6, 5), 1 / 30, F32))
    first *= 100
    third = run(program, {"x": x}, target="loss", wrt=["x"], record=False).variable_grads["x"]
    np.testing.assert_array_equal(third, np.full((6, 5), 1 / 30, F32))
    plan = _plan(program)
    kept = [v for k, v in plan.fn.__globals__.items() if k.startswith("v") and isinstance(v, tuple)]
    assert kept and all(not p.flags.writeable for t in kept for p in t if type(p) is np.ndarray)


def test_a_gradient_the_run_returns_is_not_folded_into_a_shared_array(monkeypatch):
    monkeypatch.setattr(lower, "FOLD_COTANGENTS", True)
    project = chain(("W", "Variable", {"shape": [4, 3], "initializer": "ones"}, None),
                    ("loss", "Sum", {}, {"input": "W:ref"}))
    program = compile_project(project)
    a = run(program, target="loss", record=False).variable_grads["W"]
    b = run(program, target="loss", record=False).variable_grads["W"]
    assert not np.shares_memory(a, b) or a.base is None
    np.testing.assert_array_equal(a, np.ones((4, 3), F32))


def test_a_run_given_its_own_seed_folds_nothing(monkeypatch):
    project, feeds = _free_energy_page()
    program, _, (res, *_) = _grads(monkeypatch, True, project, feeds)
    doubled = run(program, feeds, target="loss", wrt=frozenset(feeds), record=False, grad_seed=F32(2))
    for k, g in res.variable_grads.items():
        np.testing.assert_array_equal(doubled.variable_grads[k], 2 * g)
    seeded = [p for p in program.cache("plans").values() if not p.record and "G0" in p.source]
    assert all("= v" not in p.source for p in seeded if p is not _plan(program))


def test_large_arguments_are_not_folded(monkeypatch):
    n = FOLD_MAX_SIZE + 1
    project = chain(("x", "Placeholder", {"shape": [n]}, None),
                    ("e", "Exp", {}, {"x": "x"}),
                    ("loss", "Sum", {}, {"input": "e"}))
    monkeypatch.setattr(lower, "FOLD_COTANGENTS", True)
    program = compile_project(project)
    run(program, {"x": np.zeros(n, F32)}, target="loss", wrt=["x"], record=False)
    assert "= v" not in _plan(program).source


@pytest.mark.parametrize("record", [True, False])
def test_recorded_runs_and_gradients_blocks_match_the_unfolded_ones(monkeypatch, record):
    """Wire gradients (recorded) are never folded; a page whose loss is read by a Gradients block
    gives the same bits either way."""
    project = chain(("x", "Placeholder", {"shape": [5, 4]}, None),
                    ("t", "Tanh", {}, {"x": "x"}),
                    ("s", "Sum", {}, {"input": "t", "axis": np.int32(0)}),
                    ("m", "Mean", {}, {"input": "s"}),
                    ("gr", "Gradients", {}, {"ys[0]": "m", "xs[0]": "x"}),
                    ("q", "Square", {}, {"x": "gr:dx[0]"}),
                    ("sq", "Sum", {}, {"input": "q"}),
                    ("loss", "Add", {}, {"x": "sq", "y": "m"}))
    feeds = {"x": RNG.normal(size=(5, 4)).astype(F32)}
    outs = []
    for fold in (True, False):
        monkeypatch.setattr(lower, "FOLD_COTANGENTS", fold)
        program = compile_project(project)
        res = [run(program, feeds, target="loss", wrt=["x"], record=record) for _ in range(2)]
        outs.append([(r.value("loss").tobytes(), r.variable_grads["x"].tobytes(),
                      sorted((str(k), np.asarray(v).tobytes()) for k, v in r.grads.items())) for r in res])
    assert outs[0] == outs[1]


def test_folds_stop_before_their_arrays_pass_the_plans_bound(monkeypatch):
    """Subtract's gradient of y is a new array (-g): twenty of 65,536 float32 values would keep
    5 MiB between runs; the plan folds until FOLD_MAX_BYTES and calls the rest, same bits."""
    n, branches = 1 << 16, 20
    specs = []
    for i in range(branches):
        specs += [(f"x{i}", "Placeholder", {"shape": [n]}, None),
                  (f"ex{i}", "Exp", {}, {"x": f"x{i}"}), (f"ey{i}", "Exp", {}, {"x": f"x{i}"}),
                  (f"d{i}", "Subtract", {}, {"x": f"ex{i}", "y": f"ey{i}"}),
                  (f"s{i}", "Sum", {}, {"input": f"d{i}"})]
    total = "s0"
    for i in range(1, branches):
        name = "loss" if i == branches - 1 else f"a{i}"
        specs.append((name, "Add", {}, {"x": total, "y": f"s{i}"}))
        total = name
    feeds = {f"x{i}": RNG.normal(size=n).astype(F32) for i in range(branches)}
    outs = []
    for fold in (True, False):
        monkeypatch.setattr(lower, "FOLD_COTANGENTS", fold)
        program = compile_project(chain(*specs))
        res = run(program, feeds, target="loss", wrt=frozenset(feeds), record=False)
        outs.append({k: v.tobytes() for k, v in res.variable_grads.items()})
        if fold:
            plan = _plan(program)
            folds = [v for k, v in plan.fn.__globals__.items() if k.startswith("v") and isinstance(v, tuple)]
            roots = {}
            for part in (p for t in folds for p in t if isinstance(p, np.ndarray)):
                while part.base is not None:
                    part = part.base
                roots[id(part)] = part.nbytes
            held = sum(roots.values())
            assert FOLD_MAX_BYTES - 4 * n < held <= FOLD_MAX_BYTES == 4 << 20
            subtracts = [t for t in folds if len(t) == 2 and all(np.shape(p) == (n,) for p in t)]
            assert 0 < len(subtracts) < branches   # the rest called
    assert outs[0] == outs[1]


def test_a_cross_entropy_loss_folds_its_mean_and_copies_nothing(monkeypatch):
    """The cross entropy's vjp makes new arrays (fresh_result): the gradients after it are the
    run's own, so none is copied on its way out."""
    project = chain(("x", "Placeholder", {"shape": [8, 5]}, None),
                    ("y", "Placeholder", {"shape": [8, 3]}, None),
                    ("W", "Variable", {"shape": [5, 3], "initializer": "glorot_uniform", "seed": 1}, None),
                    ("b", "Variable", {"shape": [3]}, None),
                    ("mm", "MatMul", {}, {"a": "x", "b": "W:ref"}),
                    ("z", "Add", {}, {"x": "mm", "y": "b:ref"}),
                    ("ce", "SoftmaxCrossEntropyWithLogits", {}, {"features": "z", "labels": "y"}),
                    ("loss", "Mean", {}, {"input": "ce:loss"}))
    feeds = {"x": RNG.normal(size=(8, 5)).astype(F32), "y": np.eye(3, dtype=F32)[RNG.integers(0, 3, 8)]}
    outs = []
    for fold in (True, False):
        monkeypatch.setattr(lower, "FOLD_COTANGENTS", fold)
        program = compile_project(project)
        res = run(program, feeds, target="loss", record=False)
        outs.append({k: v.tobytes() for k, v in res.variable_grads.items()})
        if fold:
            assert ".copy()" not in _plan(program).source and "= v" in _plan(program).source
    assert outs[0] == outs[1]


def test_the_seed_handed_on_is_the_runs_own_and_not_copied(monkeypatch):
    """The seed a run reads is its own copy of ones: a vjp handing it on (Identity's) needs no
    second copy on the way out, and two runs' gradients are two arrays."""
    monkeypatch.setattr(lower, "FOLD_COTANGENTS", True)
    program = compile_project(chain(("x", "Placeholder", {"shape": [1, 1]}, None),
                                    ("r", "Reshape", {}, {"tensor": "x", "shape": np.array([], np.int32)}),
                                    ("loss", "Identity", {}, {"input": "r"})))
    x = np.full((1, 1), 0.5, F32)
    a = run(program, {"x": x}, target="loss", wrt=["x"], record=False).variable_grads["x"]
    b = run(program, {"x": x}, target="loss", wrt=["x"], record=False).variable_grads["x"]
    assert not np.shares_memory(a, b) and a.tobytes() == b.tobytes()
    assert not re.search(r"g\d+ = g\d+\.copy\(\)", _plan(program).source)


# ------------------------------------------------ copies of returned gradients (a review's cases)
def _peak(monkeypatch, fold, project, feeds, wrt, shapes):
    """(program, the memory walk's peak) of a plan written with FOLD_COTANGENTS = ``fold``."""
    monkeypatch.setattr(lower, "FOLD_COTANGENTS", fold)
    program = compile_project(project)
    run(program, feeds, target="loss", wrt=wrt, record=False)
    return program, _plan(program).memory.walk_for(1 << 40, "test", 0, (shapes,)).peak


def _embedding_page(rows=100_000, width=16, batch=64):
    """loss = Mean(Gather(W, idx)): Mean's vjp is folded (its input is 1,024 values), Gather's
    vjp then scatters that constant into a new array of W's shape."""
    project = chain(("W", "Variable", {"shape": [rows, width], "initializer": "glorot_uniform", "seed": 1}, None),
                    ("idx", "Placeholder", {"shape": [batch], "dtype": "int32"}, None),
                    ("e", "Gather", {}, {"params": "W:ref", "indices": "idx"}),
                    ("loss", "Mean", {}, {"input": "e"}))
    return project, {"idx": (np.arange(batch, dtype=np.int32) * 7)}


def test_a_new_gradient_made_from_a_folded_cotangent_is_not_copied_again(monkeypatch):
    """Gather's vjp scatters the folded constant into a new array of W's size: W's gradient is
    the run's own, and no copy of it is made or counted (a review found one: an embedding step
    5.1 -> 12.4 ms, its peak 51 -> 77 MB, for a 200,000 x 32 table), so the unfolded plan's
    budget is enough."""
    project, feeds = _embedding_page()
    _, plain = _peak(monkeypatch, False, project, feeds, ["W"], ((64,),))
    program, folded = _peak(monkeypatch, True, project, feeds, ["W"], ((64,),))
    assert folded <= plain, (folded, plain)
    run(program, feeds, target="loss", wrt=["W"], record=False, memory_budget=plain + (64 << 10))


def test_the_seed_handed_to_a_vjp_that_makes_a_new_array_is_not_copied(monkeypatch):
    """No vjp is folded here: the seed line stays (g1 = o1.copy()), L2Loss's vjp sees that run's
    own copy, and W's gradient is not copied again (a review found it was: 1.5x W's size)."""
    project = chain(("W", "Variable", {"shape": [512, 512], "initializer": "glorot_uniform", "seed": 1}, None),
                    ("loss", "L2Loss", {}, {"t": "W:ref"}))
    _, plain = _peak(monkeypatch, False, project, None, ["W"], ())
    program, folded = _peak(monkeypatch, True, project, None, ["W"], ())
    assert folded <= plain, (folded, plain)
    run(program, target="loss", wrt=["W"], record=False, memory_budget=plain + (64 << 10))


def test_a_copy_of_a_returned_gradient_over_the_budget_names_its_block_not_the_seed(monkeypatch):
    """Identity hands the folded Mean's array on, so x's gradient may be the plan's (_own copies
    it if so): a budget met there names x and the copy, not the gradient seed, whose line the
    plan dropped (a review found the copy's line had no step of its own)."""
    monkeypatch.setattr(lower, "FOLD_COTANGENTS", True)
    program = compile_project(chain(
        ("W", "Variable", {"shape": [256, 256], "initializer": "glorot_uniform", "seed": 1}, None),
        ("a", "Placeholder", {"shape": [1, 256]}, None),
        ("x", "Placeholder", {"shape": [256, 256]}, None),
        ("i", "Identity", {}, {"input": "x"}),
        ("m1", "Mean", {}, {"input": "i"}),
        ("mm", "MatMul", {}, {"a": "a", "b": "W:ref"}),
        ("m2", "Sum", {}, {"input": "mm"}),
        ("loss", "Add", {}, {"x": "m1", "y": "m2"})))
    feeds = {"x": np.ones((256, 256), F32), "a": np.ones((1, 256), F32)}
    run(program, feeds, target="loss", wrt=["x", "W"], record=False)
    plan = _plan(program)
    assert "g2 = _own(g2)" in plan.source and "        pass" in plan.source   # the seed line is gone
    peak = plan.memory.walk_for(1 << 40, "test", 0, (((1, 256), (256, 256)),)).peak
    with pytest.raises(MemoryLimitError) as caught:
        run(program, feeds, target="loss", wrt=["x", "W"], record=False, memory_budget=peak - 1000)
    assert "a copy of the gradient of 'x'" in str(caught.value)
    assert not str(caught.value).startswith("the gradient seed"), str(caught.value)


@pytest.mark.parametrize("n, reduce", [(6, "Mean"), (6, "Sum"), (5000, "Mean"), (5000, "Sum")])
def test_returned_gradients_are_writable_exactly_where_the_unfolded_run_made_them_so(monkeypatch, n, reduce):
    """A small reduction's gradient is written out (writable), a large one's is a broadcast
    view (read-only): folded or not, the caller gets the same kind, and never the plan's own
    array where the unfolded run gave a new one."""
    project = chain(("x", "Placeholder", {"shape": [n]}, None),
                    ("i", "Identity", {}, {"input": "x"}),
                    ("loss", reduce, {}, {"input": "i"}))
    x = np.ones(n, F32)
    kinds = []
    for fold in (True, False):
        monkeypatch.setattr(lower, "FOLD_COTANGENTS", fold)
        program = compile_project(project)
        a, b = (run(program, {"x": x}, target="loss", wrt=["x"], record=False).variable_grads["x"] for _ in range(2))
        kinds.append((a.flags.writeable, 0 in a.strides, a.tobytes()))
        if a.flags.writeable:
            assert not np.shares_memory(a, b)
    assert kinds[0] == kinds[1]
