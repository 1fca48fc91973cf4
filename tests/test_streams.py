"""Random streams (run/streams.py): each step a stretch of its block's stream, drawn by each
thread's kept generator, moved to the run's stretch (streams.BlockStreams)."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from blockflow.compile.compiler import compile_project
from blockflow.run.runtime import run
from blockflow.run.streams import stream_generator, stream_hash, stream_key, stream_start
from diagrams import chain

F32 = np.float32


def test_step_s_is_the_stretch_s_times_2_to_the_64_into_the_steps_stream():
    base = stream_hash("noise")
    whole = stream_start(base, (3, 0, 0))
    for step in (0, 1, 7, 2**63 + 5):
        bits = stream_start(base, (3, 0, 0))
        bits.advance(step * 2**64)
        want = np.random.Generator(bits).random(5)
        assert stream_generator(base, 3, step, 0).random(5).tolist() == want.tolist()
    # the stretches follow each other: step 0's numbers 2^64 on are step 1's first
    whole.advance(2**64)
    assert np.random.Generator(whole).random(3).tolist() == stream_generator(base, 3, 1, 0).random(3).tolist()


def test_steps_past_2_to_the_64_and_negative_ones_have_their_own_streams():
    base = stream_hash("noise")
    steps = (0, 1, -1, 2**64, 2**64 + 1, -2**64, 2**70, -(2**70) - 3)
    keys = {stream_key(0, s, 0) for s in steps}
    assert len(keys) == len(steps)
    draws = {tuple(stream_generator(base, 0, s, 0).integers(0, 2**62, 4).tolist()) for s in steps}
    assert len(draws) == len(steps)


def _random_page(shape=(300, 200)):
    project = chain(("u", "RandomUniform", {"seed": 5}, {"shape": np.array(shape, np.int32)}),
                    ("n", "RandomNormal", {"seed": 5}, {"shape": np.array(shape[:1], np.int32)}),
                    ("s", "Sum", {}, {"input": "u"}))
    return compile_project(project)


def _expected(program, node, step, run_seed, draw):
    st = program.step(node)
    return draw(stream_generator(stream_hash(node), int(st.attrs.get("seed", 0)), step, run_seed))


@pytest.mark.parametrize("record", [False, True])
def test_a_plans_kept_generators_draw_each_runs_own_numbers(record):
    """Runs at steps and run seeds out of order, each drawing the numbers a new generator at that
    stream draws: nothing of one run's position is left in the next."""
    program = _random_page()
    for step, run_seed in ((0, 0), (5, 0), (0, 0), (2**64 + 3, 0), (5, 9), (5, 0), (1, 0)):
        res = run(program, fetch=["u", "n"], step=step, run_seed=run_seed, record=record)
        u = _expected(program, "u", step, run_seed, lambda g: g.random((300, 200), dtype=F32))
        n = _expected(program, "n", step, run_seed, lambda g: g.standard_normal(300, dtype=F32))
        assert res.value("u").tobytes() == u.tobytes()
        assert res.value("n").tobytes() == n.tobytes()


def test_threads_running_one_plan_at_once_each_draw_their_own_steps_numbers():
    """Each thread keeps its own generators: a generator shared between threads would be moved by
    one while the other draws (numpy draws without the GIL)."""
    program = _random_page((600, 500))
    run(program, fetch=["u"], record=False)
    want = {s: _expected(program, "u", s, 0, lambda g: g.random((600, 500), dtype=F32)).tobytes() for s in range(4)}
    wrong, start = [], threading.Barrier(4)

    def worker(step):
        start.wait()
        for _ in range(15):
            if run(program, fetch=["u"], step=step, record=False).value("u").tobytes() != want[step]:
                wrong.append(step)

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []


def test_dropout_forward_and_backward_draw_the_same_mask_at_every_step():
    program = compile_project(chain(("x", "Placeholder", {"shape": [50, 40]}, None),
                                    ("d", "Dropout", {"rate": 0.5, "seed": 2}, {"x": "x"}),
                                    ("loss", "Sum", {}, {"input": "d"})))
    x = np.ones((50, 40), F32)
    for step in (3, 0, 3, 2**64):
        res = run(program, {"x": x}, fetch=["d"], target="loss", wrt=["x"], record=False, step=step)
        kept = res.value("d") != 0
        assert ((res.variable_grads["x"] != 0) == kept).all()
        assert 0.4 < kept.mean() < 0.6


@pytest.mark.parametrize("record", [False, True])
def test_streams_moved_at_the_top_of_the_plan_draw_what_they_drew_at_their_blocks(monkeypatch, record):
    """lower.HOIST_STREAMS: every random block's stream is moved before the first step runs, not at
    its own line; the same numbers come out, also for Dropout, whose backward moves the same
    generator back to redraw forward's mask, and for two random blocks fed one by the other."""
    import blockflow.run.lower as lower

    project = chain(("x", "Placeholder", {"shape": [50, 40]}, None),
                    ("p", "Sigmoid", {}, {"x": "x"}),
                    ("b", "Bernoulli", {"seed": 4}, {"probs": "p"}),
                    ("m", "Multiply", {}, {"x": "b", "y": "x"}),
                    ("d", "Dropout", {"rate": 0.3, "seed": 2}, {"x": "m"}),
                    ("d2", "Dropout", {"rate": 0.6, "seed": 2}, {"x": "d"}),
                    ("loss", "Sum", {}, {"input": "d2"}))
    x = np.random.default_rng(3).normal(size=(50, 40)).astype(F32)
    got = {}
    for hoist in (True, False):
        monkeypatch.setattr(lower, "HOIST_STREAMS", hoist)
        program = compile_project(project)
        runs = [run(program, {"x": x}, fetch=["b", "d2"], target="loss", wrt=["x"], record=record, step=s)
                for s in (0, 7, 7, 2)]
        got[hoist] = [(r.value("b").tobytes(), r.value("d2").tobytes(), r.variable_grads["x"].tobytes())
                      for r in runs]
        body = next(iter(program.cache("plans").values())).source.splitlines()[3:6]
        moved = [line.strip() for line in body if "= _R(" in line]
        assert (len(moved) == 3) == hoist, body
    assert got[True] == got[False]
    assert got[True][1] == got[True][2] and got[True][0] != got[True][1]


@pytest.mark.parametrize("record", [False, True])
def test_a_gradients_block_redrawing_a_dropouts_mask_inline_draws_what_it_drew_unhoisted(monkeypatch, record):
    """A Gradients block runs Dropout's vjp in the forward pass (it moves the generator the hoisted
    line moved back to its start): the same numbers with the streams hoisted as at their lines."""
    import blockflow.run.lower as lower

    project = chain(("x", "Placeholder", {"shape": [50, 40]}, None),
                    ("W", "Variable", {"shape": [40, 30], "initializer": "glorot_uniform", "seed": 2}, None),
                    ("mm", "MatMul", {}, {"a": "x", "b": "W:ref"}),
                    ("d", "Dropout", {"rate": 0.3, "seed": 2}, {"x": "mm"}),
                    ("t", "Tanh", {}, {"x": "d"}),
                    ("L", "Sum", {}, {"input": "t"}),
                    ("g", "Gradients", {}, {"ys[0]": "L", "xs[0]": "mm"}),
                    ("b", "Bernoulli", {"seed": 4}, {"probs": "t"}),
                    ("gd", "Dropout", {"rate": 0.5, "seed": 9}, {"x": "g:dx[0]"}),
                    ("m", "Multiply", {}, {"x": "gd", "y": "b"}),
                    ("s2", "Sum", {}, {"input": "m"}),
                    ("loss", "Add", {}, {"x": "s2", "y": "L"}))
    x = np.random.default_rng(3).normal(size=(50, 40)).astype(F32)
    got = {}
    for hoist in (True, False):
        monkeypatch.setattr(lower, "HOIST_STREAMS", hoist)
        program = compile_project(project)
        runs = [run(program, {"x": x}, fetch=["b", "gd", "g"], target="loss", wrt=["x", "W"], record=record, step=s)
                for s in (0, 7, 2)]
        got[hoist] = [tuple(a.tobytes() for a in (r.value("b"), r.value("gd"), r.value("g", "dx[0]"),
                                                   r.variable_grads["x"], r.variable_grads["W"])) for r in runs]
    assert got[True] == got[False]


@pytest.mark.parametrize("hoist", [True, False])
@pytest.mark.parametrize("record", [False, True])
def test_a_stream_that_cannot_be_moved_is_its_random_blocks_failure(monkeypatch, hoist, record):
    """A step that is not an integer fails where the stream is moved: hoisted to the top of the
    plan, the error still names the random block (not the gradient seed, the cursor's -1)."""
    import blockflow.run.lower as lower
    from blockflow.errors import BlockExecutionError

    monkeypatch.setattr(lower, "HOIST_STREAMS", hoist)
    program = compile_project(chain(("x", "Placeholder", {"shape": [5, 4]}, None),
                                    ("e", "Sigmoid", {}, {"x": "x"}),
                                    ("b", "Bernoulli", {"seed": 4}, {"probs": "e"}),
                                    ("s", "Sum", {}, {"input": "b"})))
    with pytest.raises(BlockExecutionError, match=r"main/b \(Bernoulli\) failed in the forward pass"):
        run(program, {"x": np.ones((5, 4), F32)}, fetch=["b"], record=record, step=None)
