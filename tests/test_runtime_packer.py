"""A plan's result builder and NaN/Inf test written for its keys (run/packer.py) give what the
general package and check give; a run's allocation guard, kept for the next run, starts clean."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import blockflow.run.runtime as runtime
from blockflow.compile.compiler import compile_project
from blockflow.errors import MemoryLimitError, NumericsError
from blockflow.io.project_io import load_project
from blockflow.run.packer import make_finite_test, make_packer
from blockflow.run.runtime import RunResult, run

from diagrams import dense_layer

SAMPLES = sorted((Path(__file__).parent.parent / "sample_projects").glob("*.bflow.json"))


def _both(monkeypatch, project, **kw):
    """The results of a run with the generated packer and with the general one."""
    out = []
    for generated in (True, False):
        monkeypatch.setattr(runtime, "GENERATED_PACKERS", generated)
        program = compile_project(project)
        try:
            out.append(run(program, **kw))
        except NumericsError as exc:
            out.append(str(exc))
    return out


def _same(a: RunResult, b: RunResult):
    assert a.target == b.target and type(a.paths) is type(b.paths)
    for name in ("values", "grads", "edge_grads", "variable_grads", "state_updates"):
        da, db = getattr(a, name), getattr(b, name)
        assert list(da) == list(db), name
        for k in da:
            if isinstance(da[k], dict):
                assert da[k].keys() == db[k].keys()
                continue
            np.testing.assert_array_equal(da[k], db[k], err_msg=f"{name} {k}")
            assert np.asarray(da[k]).dtype == np.asarray(db[k]).dtype


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name.split(".")[0])
def test_every_sample_gives_the_same_result_either_way(monkeypatch, path):
    project = load_project(path)
    if project.pages[0].loss is None:
        pytest.skip("no loss")
    generated, general = _both(monkeypatch, project, target=project.pages[0].loss, record=False)
    assert type(generated) is type(general)
    if isinstance(general, str):
        assert generated == general
    else:
        _same(generated, general)


def _layer():
    return dense_layer(4, 300, 90, loss="Sum")


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf, 1e38])
@pytest.mark.parametrize("where", [(0, 0), (3, 299), (2, 150)])
def test_a_bad_value_is_reported_the_same_either_way(monkeypatch, value, where):
    x = np.random.default_rng(3).normal(size=(4, 300)).astype(np.float32)
    x[where] = value
    generated, general = _both(monkeypatch, _layer(), feeds={"x": x}, target="loss", record=False)
    assert isinstance(general, str) or value == 1e38
    if isinstance(general, str):
        assert generated == general and ("NaN" in general or "Inf" in general)
    else:
        _same(generated, general)


def test_the_finite_test_reads_every_uncertified_array_and_skips_certified_ones():
    finite = make_finite_test(2, 3)
    ok = np.ones((3, 3), np.float32)
    bad = ok.copy()
    bad[1, 2] = np.nan
    assert finite(((np.float32(1.0), ok), (ok, ok, ok), (), (), (False, False, False)))
    assert not finite(((np.float32(np.inf), ok), (ok, ok, ok), (), (), (False, False, False)))
    for scalar in (float("nan"), np.float64(-np.inf), np.float16(np.nan), np.array(np.nan, np.float32)):
        assert not finite(((scalar, ok), (ok, ok, ok), (), (), (False, False, False)))
    assert finite(((np.float16(2.0), np.array(3.0)), (ok, ok, ok), (), (), (False, False, False)))
    assert not finite(((1.0, bad), (ok, ok, ok), (), (), (False, False, False)))
    for i in range(3):
        grads = [ok, ok, ok]
        grads[i] = bad
        certified = [False] * 3
        assert not finite(((1.0, ok), tuple(grads), (), (), tuple(certified)))
        certified[i] = True    # vouched for by its certificate: not read
        assert finite(((1.0, ok), tuple(grads), (), (), tuple(certified)))
    assert make_finite_test(0, 0)(((), (), (), (), ()))
    # not a C-ordered float array: numerics.all_finite decides
    assert not make_finite_test(1, 0)(((np.asfortranarray(bad),), (), (), (), ()))
    assert make_finite_test(1, 0)(((np.arange(6).reshape(2, 3),), (), (), (), ()))


def test_the_packer_leaves_out_a_gradient_that_did_not_arrive():
    keys = [("W", "ref"), ("b", "ref")]
    pack = make_packer(RunResult, "program", [("loss", "output")], keys, [("W", keys[0]), ("b", keys[1])],
                       ("loss", "output"), None)
    g = np.ones(3)
    res = pack(((np.float32(2.0),), (g, None), (), (), (False, False)))
    assert res.values == {("loss", "output"): np.float32(2.0)}
    assert list(res.grads) == keys and res.grads[keys[1]] is None
    assert res.variable_grads == {"W": g} and res.edge_grads == {} and res.state_updates == {}
    assert res.program == "program" and res.target == ("loss", "output")
    # odd node ids stay keys, never code
    odd = [("a'\"b\\\n", "ref")]
    pack = make_packer(RunResult, None, [], odd, [("a'\"b\\\n", odd[0])], None, None)
    assert pack(((), (g,), (), (), (False,))).variable_grads == {"a'\"b\\\n": g}


def test_a_kept_guard_starts_each_run_clean(monkeypatch):
    """The guard a run puts back is taken by the next run of the same budget and feed shapes,
    with nothing of the earlier run's reservations; another budget or shape gets a new one."""
    program = compile_project(_layer())
    x = np.ones((4, 300), np.float32)
    run(program, {"x": x}, target="loss", record=False)
    plan = [p for p in program.cache("plans").values() if not p.record][0]
    (guard,) = plan.guards
    guard._extra = {"left over": 1 << 40}
    guard._at = None
    run(program, {"x": x}, target="loss", record=False)
    assert plan.guards == [guard] and guard._extra == {}
    run(program, {"x": x}, target="loss", record=False, memory_budget="1G")
    assert plan.guards[0] is not guard and plan.guards[0].budget == 1 << 30
    with pytest.raises(MemoryLimitError):
        run(program, {"x": x}, target="loss", record=False, memory_budget="10K")
    again = run(program, {"x": x}, target="loss", record=False)
    assert np.isfinite(again.variable_grads["W"]).all()
