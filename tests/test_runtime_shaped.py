"""Plans written again per feed-shape signature for pages with open sizes (run/shaped.py): the
same bits as the open plan, for every batch size, in any order and in two threads; a feed that
does not fit, NaN, too many signatures and a plan that cannot be written behave as before."""
from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

import blockflow.run.runtime as runtime
import blockflow.run.shaped as shaped
from blockflow.compile.compiler import compile_project
from blockflow.errors import FeedError, NumericsError
from blockflow.io.project_io import load_project
from blockflow.run.runtime import run

from diagrams import chain, open_mlp, open_mlp_feeds

SAMPLES = Path(__file__).resolve().parent.parent / "sample_projects"


def _mlp():
    return open_mlp()


def _feeds(batch):
    return open_mlp_feeds(batch)


def _bits(res):
    return {k: np.asarray(v).tobytes() for d in (res.values, res.grads, res.variable_grads) for k, v in d.items()}


def _runs(monkeypatch, on, project, batches, **kw):
    monkeypatch.setattr(runtime, "SHAPED_PLANS", on)
    program = compile_project(project)
    return program, [_bits(run(program, _feeds(b), target="loss", record=False, **kw)) for b in batches]


def _open_plan(program):
    return next(p for p in program.cache("plans").values() if not p.record)


BATCHES = [64, 7, 64, 1, 300, 7, 64]


def test_each_batch_size_gets_its_plan_with_the_open_plans_bits(monkeypatch, short_ways):
    _, plain = _runs(monkeypatch, False, _mlp(), BATCHES)
    del short_ways[:]
    program, fast = _runs(monkeypatch, True, _mlp(), BATCHES)
    assert fast == plain
    plan = _open_plan(program)
    assert set(plan.shaped) == {((b, 96), (b, 10)) for b in (64, 7, 1, 300)}
    big = plan.shaped[((300, 96), (300, 10))]
    assert "out=" in big.source and "out=" not in plan.source     # written in place only with the sizes
    assert all(p.feed_spec[0][2] == key[0] for key, p in plan.shaped.items())
    # a size seen before takes the short way; a new one the general way, which writes its plan
    assert short_ways == [False, True, False, False, True, True]   # (the first run is no repeat)


def test_more_signatures_than_kept_run_on_the_open_plan(monkeypatch):
    batches = [2, 3, 4, 5, 6, 7, 2, 7]
    program, fast = _runs(monkeypatch, True, _mlp(), batches)
    _, plain = _runs(monkeypatch, False, _mlp(), batches)
    assert fast == plain
    assert len(_open_plan(program).shaped) == shaped.MAX_SHAPED


def _refusals(monkeypatch, batch, spoil, error):
    """[(message, program)] with SHAPED_PLANS on, then off: a good run of ``batch`` rows, then
    one whose feeds ``spoil`` changed, which must raise ``error``."""
    out = []
    for on in (True, False):
        monkeypatch.setattr(runtime, "SHAPED_PLANS", on)
        program = compile_project(_mlp())
        run(program, _feeds(batch), target="loss", record=False)
        feeds = _feeds(batch)
        spoil(feeds)
        with pytest.raises(error) as info:
            run(program, feeds, target="loss", record=False)
        out.append((str(info.value), program))
    return out


def test_a_feed_that_does_not_fit_is_refused_as_before(monkeypatch):
    def narrower(feeds):
        feeds["x"] = feeds["x"][:, :95]

    (shaped_msg, program), (open_msg, _) = _refusals(monkeypatch, 4, narrower, FeedError)
    assert list(_open_plan(program).shaped) == [((4, 96), (4, 10))]
    assert shaped_msg == open_msg and "x" in shaped_msg


def test_nan_in_a_shaped_plan_names_the_block_as_before(monkeypatch):
    def infinite(feeds):
        feeds["x"][3, 5] = np.inf

    (shaped_msg, _), (open_msg, _) = _refusals(monkeypatch, 8, infinite, NumericsError)
    assert shaped_msg == open_msg


def test_a_plan_that_cannot_be_written_leaves_the_open_plan(monkeypatch):
    def refuse(*args):
        raise RuntimeError("no")

    monkeypatch.setattr("blockflow.run.plan_inputs.shaped_types", refuse)
    program, fast = _runs(monkeypatch, True, _mlp(), [5, 5])
    _, plain = _runs(monkeypatch, False, _mlp(), [5, 5])
    assert fast == plain
    plan = _open_plan(program)
    assert plan.shaped == {((5, 96), (5, 10)): plan}


def test_two_threads_with_two_batch_sizes(monkeypatch):
    monkeypatch.setattr(runtime, "SHAPED_PLANS", True)
    program = compile_project(_mlp())
    expect = {b: _bits(run(program, _feeds(b), target="loss", record=False)) for b in (16, 48)}
    monkeypatch.setattr(runtime, "SHAPED_PLANS", False)
    plain = compile_project(_mlp())
    assert expect == {b: _bits(run(plain, _feeds(b), target="loss", record=False)) for b in (16, 48)}
    got, errors = {16: [], 48: []}, []

    def work(b):
        try:
            for _ in range(25):
                got[b].append(_bits(run(program, _feeds(b), target="loss", record=False)))
        except Exception as exc:   # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(b,)) for b in (16, 48)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert all(r == expect[b] for b in got for r in got[b])


OPEN_PAGES = [pytest.param(path, page.name, id=f"{path.name.split('.')[0]}-{page.name}")
              for path in sorted(SAMPLES.glob("*.bflow.json")) for page in load_project(path).pages
              if page.loss]


@pytest.mark.parametrize("path, page", OPEN_PAGES)
def test_sample_pages_train_to_the_same_bits(monkeypatch, path, page):
    """Three training-like steps of each sample page with a loss (datasets and saved feeds:
    sizes a dataset decides stay open in the shaped plans)."""
    out = []
    for on in (True, False):
        monkeypatch.setattr(runtime, "SHAPED_PLANS", on)
        program = compile_project(load_project(path), page)
        with np.errstate(all="ignore"):
            out.append([_bits(runtime.run_backward(program, {}, record=False, check_numerics=False, step=s))
                        for s in range(3)])
    assert out[0] == out[1]


@pytest.mark.parametrize("shapes", [((1, 5000), (4, 5000)), ((4, 5000), (1, 5000)), ((0, 5000), (0, 5000)),
                                    ((0, 5000), (1, 5000)), ((3, 1), (3, 5000))])
def test_broadcast_and_empty_batches_give_the_open_plans_bits(monkeypatch, shapes):
    """Two open Placeholders whose sizes broadcast (1 against 4, an empty batch): a result is
    never written into a value of another shape; the same bits, or the same error, as before."""
    project = chain(("a", "Placeholder", {"shape": [-1, -1]}, None),
                    ("b", "Placeholder", {"shape": [-1, -1]}, None),
                    ("s", "Subtract", {}, {"x": "a", "y": "b"}),
                    ("e", "Exp", {}, {"x": "s"}),
                    ("t", "Tanh", {}, {"x": "s"}),
                    ("p", "Multiply", {}, {"x": "e", "y": "t"}),
                    ("n", "Negate", {}, {"x": "p"}),
                    ("loss", "Sum", {}, {"input": "n"}))
    rng = np.random.default_rng(5)
    feeds = {k: (rng.normal(size=sh) * 0.3).astype(np.float32) for k, sh in zip("ab", shapes)}
    keep = {k: v.copy() for k, v in feeds.items()}
    out = []
    for on in (True, False):
        monkeypatch.setattr(runtime, "SHAPED_PLANS", on)
        program = compile_project(project)
        got = []
        for _ in range(3):
            try:
                got.append(_bits(run(program, feeds, target="loss", wrt=frozenset("ab"), record=False)))
            except Exception as exc:   # noqa: BLE001 - compared below
                got.append(f"{type(exc).__name__}: {exc}")
        out.append(got)
    assert out[0] == out[1]
    assert all(feeds[k].tobytes() == keep[k].tobytes() for k in feeds)
