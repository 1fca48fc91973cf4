"""Hostile runs: small projects and feeds that would make a run allocate gigabytes.

Open-size Placeholders fed so that a Tile, a broadcasting Add, a Diag, a OneHot or a MatMul outer
product would pass the 4 GiB per-tensor limit; several tensors each under it that together pass the
run's budget; a value-dependent block (a dataset's batch); a block's own intermediates; a
[30000, 30000] random Variable that compiling must not draw. Each is refused before the allocation
with a message naming the block, the array, its shape and size: the CLI cases run in a child under a
1.5 GiB address-space cap whose peak memory is measured.
"""
from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from blockflow.budget import ENV_VAR, default_budget, parse_size
from blockflow.compile.compiler import compile_project
from blockflow.errors import MemoryLimitError, RunError
from blockflow.project import Project
from blockflow.io.project_io import save_project
from blockflow.registry import Registry, default_registry
from blockflow.run.runtime import run
from blockflow.spec import Input, Output, TensorType, allocation_guard, block, reserve
from blockflow.run.training import TrainConfig, Trainer

from hostile_kit import baseline_rss, changed_paths, run_cli, snapshot
from memory_tracing import memory_traced

CAP = int(1.5 * 1024 ** 3)
MiB = 1024 ** 2
EXIT_RUN = 4


@pytest.fixture(scope="module")
def floor():
    """The capped child's peak memory before it does anything (imports only)."""
    return baseline_rss(cap_bytes=CAP)


def _page():
    p = Project()
    return p, p.add_page("main")


# ----------------------------------------------------------------- the per-tensor limit, in a child
def _tile(pg):
    pg.add_node("Placeholder", id="x", attrs={"shape": [-1]})
    pg.add_node("Tile", id="t", inputs={"multiples": np.array([100_000])})
    pg.connect("x", "output", "t", "input")
    return {"x": np.ones(20_000, np.float32)}, "main/t (Tile)", "output 'output' would be float32[2000000000]"


def _broadcast_add(pg):
    pg.add_node("Placeholder", id="a", attrs={"shape": [-1, 1]})
    pg.add_node("Placeholder", id="b", attrs={"shape": [1, -1]})
    pg.add_node("Add", id="s")
    pg.connect("a", "output", "s", "x")
    pg.connect("b", "output", "s", "y")
    return ({"a": np.ones((70_000, 1), np.float32), "b": np.ones((1, 70_000), np.float32)},
            "main/s (Add)", "output 'z' would be float32[70000,70000]")


def _diag(pg):
    pg.add_node("Placeholder", id="d", attrs={"shape": [-1]})
    pg.add_node("Diag", id="g")
    pg.connect("d", "output", "g", "diagonal")
    return {"d": np.ones(40_000, np.float32)}, "main/g (Diag)", "would be float32[40000,40000]"


def _one_hot(pg):
    pg.add_node("Placeholder", id="i", attrs={"shape": [-1], "dtype": "int32"})
    pg.add_node("OneHot", id="o", inputs={"depth": np.array(5_000)})
    pg.connect("i", "output", "o", "indices")
    return {"i": np.zeros(300_000, np.int32)}, "main/o (OneHot)", "would be float32[300000,5000]"


def _outer_product(pg):
    pg.add_node("Placeholder", id="u", attrs={"shape": [-1, 1]})
    pg.add_node("Placeholder", id="v", attrs={"shape": [1, -1]})
    pg.add_node("MatMul", id="m")
    pg.connect("u", "output", "m", "a")
    pg.connect("v", "output", "m", "b")
    return ({"u": np.ones((50_000, 1), np.float32), "v": np.ones((1, 50_000), np.float32)},
            "main/m (MatMul)", "output 'product' would be float32[50000,50000]")


@pytest.mark.parametrize("build", [_tile, _broadcast_add, _diag, _one_hot, _outer_product],
                         ids=["tile", "broadcast-add", "diag", "one-hot", "outer-product"])
def test_open_size_feeds_past_the_tensor_limit_are_refused_before_allocating(tmp_path, floor, build):
    p, pg = _page()
    feeds, block_name, what = build(pg)
    save_project(p, tmp_path / "p.bflow.json")
    args = []
    for name, value in feeds.items():
        np.save(tmp_path / f"{name}.npy", value)
        args += ["--feed", f"{name}={tmp_path / f'{name}.npy'}"]
    before = snapshot(tmp_path)
    r = run_cli("run", tmp_path / "p.bflow.json", *args, "--forward-only", cap_bytes=CAP, cwd=tmp_path)
    r.assert_clean_message()
    assert r.returncode == EXIT_RUN, r.output
    assert f"{block_name} in the forward pass: " in r.stderr and what in r.stderr, r.stderr
    assert "GiB); the limit for one tensor is 4.0 GiB" in r.stderr
    assert r.stderr.count("\n") == 1
    assert r.peak_rss < floor + 64 * MiB, (r.peak_rss, floor)
    assert changed_paths(before, snapshot(tmp_path)) == set()


# ------------------------------------------------------------------------------ the run's budget
def _tiles(pg, n=6, rows=50_000, first=1_000):
    """x [-1] -> Tile x first -> Tile x 1 -> ... : every output rows*first float32 values."""
    pg.add_node("Placeholder", id="x", attrs={"shape": [-1]})
    prev = "x"
    for k in range(n):
        pg.add_node("Tile", id=f"t{k}", inputs={"multiples": np.array([first if k == 0 else 1])})
        pg.connect(prev, "output", f"t{k}", "input")
        prev = f"t{k}"
    return np.ones(rows, np.float32)


def test_tensors_under_the_limit_that_together_pass_the_budget_are_refused(tmp_path, floor):
    p, pg = _page()
    np.save(tmp_path / "x.npy", _tiles(pg))     # six outputs of 191 MiB, all kept when recording
    save_project(p, tmp_path / "p.bflow.json")
    before = snapshot(tmp_path)
    r = run_cli("run", tmp_path / "p.bflow.json", "--feed", f"x={tmp_path / 'x.npy'}", cap_bytes=CAP, cwd=tmp_path)
    r.assert_clean_message()
    assert r.returncode == EXIT_RUN, r.output
    # the default budget under a 1.5 GiB cap is about 0.7 GiB: the fourth Tile is where it runs out
    assert "main/t3 (Tile) in the forward pass: output 'output' would be float32[50000000] (190.7 MiB) " \
           "with 572.4 MiB already in use: over the run's memory budget of" in r.stderr, r.stderr
    assert "(the default: half of the memory this process may use)" in r.stderr
    assert f"raise it with --memory-budget SIZE or the {ENV_VAR} environment variable" in r.stderr
    assert r.peak_rss < floor + 64 * MiB, (r.peak_rss, floor)
    assert changed_paths(before, snapshot(tmp_path)) == set()


def test_a_run_within_the_budget_stays_within_it(tmp_path, floor):
    p, pg = _page()
    np.save(tmp_path / "x.npy", _tiles(pg, n=4, rows=25_000))   # four outputs of 95 MiB: 381 MiB
    save_project(p, tmp_path / "p.bflow.json")
    args = ("run", tmp_path / "p.bflow.json", "--feed", f"x={tmp_path / 'x.npy'}", "--fetch", "x")
    r = run_cli(*args, "--memory-budget", "300M", cap_bytes=CAP, cwd=tmp_path)
    assert r.returncode == EXIT_RUN and "main/t3 (Tile)" in r.stderr and "budget of 300.0 MiB (set with " \
           "--memory-budget)" in r.stderr, r.output
    r = run_cli(*args, "--memory-budget", "400M", cap_bytes=CAP, cwd=tmp_path)
    assert r.returncode == 0, r.output
    assert floor + 300 * MiB < r.peak_rss < floor + 400 * MiB, (r.peak_rss, floor)


def test_the_budget_comes_from_the_argument_the_environment_or_the_default(monkeypatch):
    p, pg = _page()
    x = _tiles(pg, n=3, rows=1_000, first=100)     # three outputs of 391 KiB
    program = compile_project(p)
    with pytest.raises(MemoryLimitError, match=r"main/t2 \(Tile\).*budget of 1000.0 KiB \(given to the run\)"):
        run(program, {"x": x}, memory_budget=1_024_000)
    monkeypatch.setenv(ENV_VAR, "1000K")
    with pytest.raises(MemoryLimitError, match=f"budget of 1000.0 KiB \\(from {ENV_VAR}\\)"):
        run(program, {"x": x})
    run(program, {"x": x}, memory_budget="2M")          # the argument wins
    monkeypatch.setenv(ENV_VAR, "lots")
    with pytest.raises(RunError, match=f"{ENV_VAR}: 'lots' is not a memory size"):
        run(program, {"x": x})
    monkeypatch.delenv(ENV_VAR)
    run(program, {"x": x})
    assert default_budget() > 1_024_000


def test_sizes_parse_and_refuse():
    assert parse_size("512M") == 512 * MiB and parse_size("1.5GiB") == 3 * 512 * MiB
    assert parse_size("2g") == 2 * 1024 ** 3 and parse_size(1000) == 1000 and parse_size("1e6") == 10 ** 6
    assert 0 < parse_size("10%") < parse_size("20%")
    for bad in ("", "-1G", "0", "1X", "nan", "150%", "1e400", True):
        with pytest.raises(ValueError):
            parse_size(bad)


def test_bad_budget_options_are_usage_errors(tmp_path):
    p, pg = _page()
    _tiles(pg, n=1, rows=3, first=2)
    save_project(p, tmp_path / "p.bflow.json")
    r = run_cli("run", tmp_path / "p.bflow.json", "--feed", "x=[1,2,3]", "--memory-budget", "lots")
    r.assert_clean_message()
    assert r.returncode == 2 and "--memory-budget: 'lots' is not a memory size" in r.stderr
    r = run_cli("check", tmp_path / "p.bflow.json", env={ENV_VAR: "-3G"})
    r.assert_clean_message()
    assert r.returncode == 2 and f"{ENV_VAR}: " in r.stderr and "'-3G' is not a memory size" in r.stderr


def test_the_backward_pass_is_counted_too():
    p, pg = _page()
    pg.add_node("Placeholder", id="x", attrs={"shape": [-1]})
    pg.add_node("Tanh", id="h")
    pg.add_node("Sum", id="loss")
    pg.connect("x", "output", "h", "x")
    pg.connect("h", "y", "loss", "input")
    pg.loss = "loss"
    program = compile_project(p)
    x = np.zeros(1_000_000, np.float32)                 # 3.8 MiB a tensor
    run(program, {"x": x}, memory_budget="12M")                # forward: x, h and the sum
    with pytest.raises(MemoryLimitError) as err:
        run(program, {"x": x}, target="loss", memory_budget="12M")   # dh fits, dx does not
    assert "main/h (Tanh) in the backward pass: the gradient of input 'x' would be float32[1000000] " \
           "(3.8 MiB)" in str(err.value)
    run(program, {"x": x}, target="loss", memory_budget="20M")


def test_a_value_dependent_block_is_checked_as_soon_as_its_size_is_known():
    p, pg = _page()
    pg.add_node("MakeBlobs", id="data", attrs={"n": 1_000_000})
    pg.add_node("Variable", id="W", attrs={"shape": [2, 2000]})
    pg.add_node("MatMul", id="mm")
    pg.connect("data", "features", "mm", "a")
    pg.connect("W", "ref", "mm", "b")
    program = compile_project(p)
    assert program.output_type("mm").shape == (None, 2000)    # the batch is not part of the type
    with pytest.raises(MemoryLimitError, match=r"main/mm \(MatMul\) in the forward pass: output 'product' would "
                                               r"be float32\[800000,2000\] \(6.0 GiB\); the limit for one tensor"):
        run(program, memory_budget="2G")
    # a small batch of the same page runs; each batch shape is walked once, then reused
    small = compile_project(_with(p, "data", batch_size=100))
    for step in range(3):
        run(small, step=step, memory_budget="2G", record=False, fetch=["mm"])
    (plan,) = small.cache("plans").values()
    assert len(plan.memory._walks) == 2                     # before the batch is known, and with it


def _with(project, node, **attrs):
    project.page("main").nodes[node].attrs.update(attrs)
    return project


# --------------------------------------------------------------------- a block's own intermediates
@block("Scratch", category="test")
class Scratch:
    """Reserves a scratch array of ``x``'s size times 8 (as a block with an im2col matrix would)."""

    inputs = (Input("x", dtype="float"),)
    outputs = (Output("y"),)

    def infer(x):
        return x

    def forward(x):
        reserve((x.size, 8), x.dtype, "the scratch matrix")
        return x.copy()


@block("Greedy", category="test")
class Greedy:
    """Asks numpy for more than the machine has (simulated)."""

    inputs = (Input("x", dtype="float"),)
    outputs = (Output("y"),)

    def infer(x):
        return x

    def forward(x):
        raise MemoryError("Unable to allocate 1.00 TiB for an array")


def _registry():
    return Registry([*default_registry(), Scratch, Greedy])


def test_intermediates_a_block_reserves_count_against_the_budget():
    p, pg = _page()
    pg.add_node("Placeholder", id="x", attrs={"shape": [-1]})
    pg.add_node("Scratch", id="s")
    pg.connect("x", "output", "s", "x")
    program = compile_project(p, registry=_registry())
    x = np.zeros(100_000, np.float32)                   # 391 KiB; the scratch matrix 3.1 MiB
    run(program, {"x": x}, memory_budget="4M")
    with pytest.raises(MemoryLimitError) as err:
        run(program, {"x": x}, memory_budget="3M")
    assert str(err.value).startswith("main/s (Scratch) in the forward pass: the scratch matrix would be "
                                     "float32[100000, 8] (3.1 MiB) with 781.2 KiB already in use: over the "
                                     "run's memory budget of 3.0 MiB (given to the run)"), str(err.value)
    with pytest.raises(MemoryLimitError, match=r"main/s \(Scratch\).*the scratch matrix would be "
                                               r"float32\[600000000, 8\] \(17.9 GiB\); the limit for one array"):
        run(program, {"x": np.broadcast_to(np.float32(0), (600_000_000,))})
    assert allocation_guard.get() is None              # the guard lives as long as the run


def test_a_memory_error_inside_a_block_is_a_clear_message():
    p, pg = _page()
    pg.add_node("Placeholder", id="x", attrs={"shape": [3]})
    pg.add_node("Greedy", id="g")
    pg.connect("x", "output", "g", "x")
    program = compile_project(p, registry=_registry())
    with pytest.raises(MemoryLimitError, match=r"main/g \(Greedy\) in the forward pass: the system refused "
                                               r"memory the block asked for \(Unable to allocate 1.00 TiB"):
        run(program, {"x": np.zeros(3, np.float32)})


# ---------------------------------------------------------------------- lazy Variable first values
def _huge_variable(pg, initializer="random_normal"):
    pg.add_node("Variable", id="W", attrs={"shape": [30_000, 30_000], "initializer": initializer, "seed": 3})
    pg.add_node("Sum", id="loss")
    pg.connect("W", "ref", "loss", "input")
    pg.loss = "loss"


def test_checking_a_huge_random_variable_draws_nothing(tmp_path, floor, monkeypatch):
    from call_counts import Calls

    from blockflow import variables

    p, pg = _page()
    _huge_variable(pg)
    save_project(p, tmp_path / "p.bflow.json")
    # Counted, not timed: no first value drawn (30,000 x 30,000 normals took seconds), and what
    # the compile holds is small.
    drawn = Calls(monkeypatch, variables._Pending, "draw", most=0)   # (stopped before drawing)
    with memory_traced():
        program = compile_project(p)
        _, peak = tracemalloc.get_traced_memory()
    assert program.ok and program.variable_values.is_pending("W")
    assert drawn.n == 0 and peak < 2 * MiB, (drawn, peak)
    r = run_cli("check", tmp_path / "p.bflow.json", cap_bytes=CAP)
    assert r.returncode == 0 and "page 'main': 2 blocks, 1 wires: ok" in r.stdout, r.output
    assert r.peak_rss < floor + 32 * MiB, (r.peak_rss, floor)


def test_running_a_variable_over_the_budget_is_refused_before_drawing_it(tmp_path, floor):
    p, pg = _page()
    _huge_variable(pg)
    save_project(p, tmp_path / "p.bflow.json")
    before = snapshot(tmp_path)
    for command in ("run", "train"):
        extra = ("--steps", "1") if command == "train" else ()
        r = run_cli(command, tmp_path / "p.bflow.json", *extra, cap_bytes=CAP, cwd=tmp_path)
        r.assert_clean_message()
        assert r.returncode == EXIT_RUN, r.output
        assert "main/W float32[30000,30000]" in r.stderr and "3.4 GiB" in r.stderr, r.stderr
        assert "over the run's memory budget of" in r.stderr or "over the memory budget of" in r.stderr
        assert r.peak_rss < floor + 64 * MiB, (command, r.peak_rss, floor)
    assert changed_paths(before, snapshot(tmp_path)) == set()


def test_a_first_value_is_drawn_when_a_run_needs_it_and_as_before():
    p, pg = _page()
    pg.add_node("Variable", id="W", attrs={"shape": [3, 4], "initializer": "glorot_uniform", "seed": 7})
    pg.add_node("Variable", id="b", attrs={"shape": [4], "initializer": "ones"})
    program = compile_project(p)
    values = program.variable_values
    assert values.is_pending("W") and values.is_pending("b") and set(values) == {"W", "b"}
    spec = default_registry()["Variable"]
    expected = spec.initial(**program.step_of["W"].attrs)      # what compiling used to draw
    r = run(program)
    np.testing.assert_array_equal(r.value("W"), expected)
    assert not values.is_pending("W") and not values["W"].flags.writeable
    np.testing.assert_array_equal(run(compile_project(p)).value("W"), expected)   # reproducible
    assert r.value("W").dtype == np.float32


def test_training_refuses_variables_over_the_budget_before_drawing(monkeypatch):
    p, pg = _page()
    pg.add_node("Variable", id="W", attrs={"shape": [1000, 1000], "initializer": "random_uniform"})
    pg.add_node("Sum", id="loss")
    pg.connect("W", "ref", "loss", "input")
    pg.loss = "loss"
    program = compile_project(p)
    with pytest.raises(MemoryLimitError, match=r"page 'main': training needs 22.9 MiB before its first run: the "
                                               r"Variables and the optimizer state \(the largest is main/W "
                                               r"float32\[1000,1000\], 3.8 MiB\) and one update's new values; "
                                               r"over the memory budget of 10.0 MiB"):
        Trainer(program, TrainConfig(steps=1, optimizer="adam", memory_budget="10M"))
    assert program.variable_values.is_pending("W")
    t = Trainer(program, TrainConfig(steps=2, optimizer="adam", memory_budget="40M"))
    assert t.held_bytes == 2 * 4 * 10 ** 6                    # Adam's m and v, beside every run
    t.train()
    assert program.variable_values.is_pending("W")            # the trainer drew its own copy


def test_a_gradient_check_draws_variables_under_the_budget(monkeypatch):
    from blockflow.run.gradcheck import check_program

    p, pg = _page()
    _huge_variable(pg)
    monkeypatch.setenv(ENV_VAR, "1G")
    program = compile_project(p)
    with pytest.raises(MemoryLimitError, match=r"the largest is the Variable main/W float32\[30000,30000\], 3.4 GiB"):
        check_program(program)
    assert program.variable_values.is_pending("W")


def test_pieces_a_block_makes_one_after_another_count_once_against_the_budget():
    """Conv2D makes its window matrix in ~32 MiB pieces, each dropped before the next: announced
    under one name, they count as the largest piece, not as their sum (here ~300 MiB in all)."""
    p = Project()
    pg = p.add_page("main")
    pg.add_node("Placeholder", id="x", attrs={"shape": [1, 256, 256, 3], "dtype": "float32"})
    pg.add_node("Placeholder", id="f", attrs={"shape": [48, 48, 3, 4], "dtype": "float32"})
    pg.add_node("Conv2D", id="c", attrs={"strides": [1, 1, 1, 1], "padding": "SAME"})
    pg.connect("x", "output", "c", "input")
    pg.connect("f", "output", "c", "filter")
    program = compile_project(p, "main", default_registry())
    feeds = {"x": np.ones((1, 256, 256, 3), np.float32), "f": np.ones((48, 48, 3, 4), np.float32)}
    r = run(program, feeds, memory_budget=128 * MiB)
    assert r.value("c").shape == (1, 256, 256, 4)
    with pytest.raises(MemoryLimitError, match=r"main/c \(Conv2D\).*window matrix"):
        run(program, feeds, memory_budget=20 * MiB)     # one piece alone does not fit
