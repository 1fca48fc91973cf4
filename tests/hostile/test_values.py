"""Hostile values: random streams that two ids could share, numbers that do not fit their dtype,
Variables whose first value does not fit their declared shape.

Each case says where (block, port, value) and what, as a compile diagnostic or a run error, never
a silent wrap."""
from __future__ import annotations

import zlib

import numpy as np
import pytest

from blockflow.compile.compiler import compile_project
from blockflow.errors import FeedError, RunError
from blockflow.project import Project
from blockflow.io.project_io import save_project
from blockflow.run.runtime import run

from hostile_kit import changed_paths, run_cli, snapshot


# ------------------------------------------------------------------------------ random streams
# A well-known pair of words with the same CRC32 (the stream key before this fix used the
# id's CRC32, so these two blocks drew identical numbers).
CRC_TWINS = ("plumless", "buckeroo")


def _two_samplers(a: str, b: str, seed: int = 0) -> Project:
    p = Project()
    pg = p.add_page("main")
    for nid in (a, b):
        pg.add_node("RandomUniform", id=nid, attrs={"seed": seed, "dtype": "float32"}, inputs={"shape": [64]})
    return p


def test_ids_with_equal_crc32_draw_different_numbers():
    a, b = CRC_TWINS
    assert zlib.crc32(a.encode()) == zlib.crc32(b.encode()) and a != b
    program = compile_project(_two_samplers(a, b))
    r = run(program)
    x, y = r.value(a), r.value(b)
    assert not np.array_equal(x, y)
    # still a deterministic function of the project: a fresh compile draws the same numbers
    r2 = run(compile_project(_two_samplers(a, b)))
    np.testing.assert_array_equal(r2.value(a), x)
    np.testing.assert_array_equal(r2.value(b), y)


def test_streams_follow_seed_step_and_run_seed():
    program = compile_project(_two_samplers("u", "v"))
    base = run(program).value("u")
    assert not np.array_equal(run(program, step=1).value("u"), base)
    assert not np.array_equal(run(program, run_seed=7).value("u"), base)
    other = compile_project(_two_samplers("u", "v", seed=1))
    assert not np.array_equal(run(other).value("u"), base)
    np.testing.assert_array_equal(run(program, step=0).value("u"), base)


# ------------------------------------------------------------------ numbers that do not fit a dtype
NOT_FITTING = [  # (value, dtype, the value as the message shows it, what it says of it)
    (1000, "int8", "1000", "does not fit int8 (-128 to 127; a Cast block wraps)"),
    (1.7, "int32", "1.7", "has a fraction, and int32 holds whole numbers (a Cast block truncates)"),
    (1e12, "int32", "1000000000000", "does not fit int32 (-2147483648 to 2147483647; a Cast block wraps)"),
    (float("nan"), "int32", "nan", "does not fit int32, which holds whole numbers"),
    (-1, "uint8", "-1", "does not fit uint8 (0 to 255; a Cast block wraps)"),
    (2, "bool", "2", "does not fit bool, which holds 0 and 1 (true and false)"),
    (1e40, "float32", "1e+40", "does not fit float32 (largest 3.40282e+38); it would become infinite"),
    (70000, "float16", "70000", "does not fit float16 (largest 65504); it would become infinite"),
]
IDS = [f"{v}-{d}" for v, d, _, _ in NOT_FITTING]


def _placeholder(dtype, shape=(3,)):
    p = Project()
    pg = p.add_page("main")
    pg.add_node("Placeholder", id="x", attrs={"dtype": dtype, "shape": list(shape)})
    pg.add_node("Identity", id="i")
    pg.connect("x", "output", "i", "input")
    return p


@pytest.mark.parametrize("value,dtype,shown,says", NOT_FITTING, ids=IDS)
def test_a_feed_that_does_not_fit_its_placeholder_is_an_error(value, dtype, shown, says):
    program = compile_project(_placeholder(dtype))
    with pytest.raises(FeedError) as err:
        run(program, {"x": [0, value, 1]})
    assert str(err.value) == f"feed for Placeholder main/x ({dtype}[3]): {shown} (at [1]) {says}"


def test_a_saved_feed_that_does_not_fit_is_an_error_too():
    p = _placeholder("int8")
    p.page("main").feeds["x"] = np.array([1, 2, 300])
    with pytest.raises(FeedError, match=r"Placeholder main/x \(int8\[3\]\): 300 \(at \[2\]\) does not fit int8"):
        run(compile_project(p))


def test_feeds_that_fit_are_converted_exactly():
    program = compile_project(_placeholder("int8"))
    np.testing.assert_array_equal(run(program, {"x": [-128, 3.0, 127]}).value("i"), [-128, 3, 127])
    program = compile_project(_placeholder("float32"))
    assert run(program, {"x": [1, 2**40, np.inf]}, check_numerics=False).value("i").tolist() == [1.0, 2.0 ** 40, np.inf]
    program = compile_project(_placeholder("bool"))
    assert run(program, {"x": [0, 1, True]}).value("i").tolist() == [False, True, True]


def test_the_cli_names_the_placeholder_and_the_value(tmp_path):
    save_project(_placeholder("int8"), tmp_path / "p.bflow.json")
    before = snapshot(tmp_path)
    r = run_cli("run", tmp_path / "p.bflow.json", "--feed", "x=[1, 1000, 3]", cwd=tmp_path)
    r.assert_clean_message()
    assert r.returncode == 4
    assert r.stderr == ("blockflow: error: feed for Placeholder main/x (int8[3]): 1000 (at [1]) does not fit "
                        "int8 (-128 to 127; a Cast block wraps)\n"), r.stderr
    assert changed_paths(before, snapshot(tmp_path)) == set()


@pytest.mark.parametrize("value,dtype,shown,says", NOT_FITTING, ids=IDS)
def test_an_inline_value_that_does_not_fit_is_a_diagnostic(value, dtype, shown, says):
    p = _placeholder(dtype, shape=())
    pg = p.page("main")
    pg.add_node("Add", id="add", inputs={"y": np.array(value)})
    pg.connect("x", "output", "add", "x")
    (d,) = compile_project(p).errors
    assert (d.node, d.port) == ("add", "y")
    assert d.message == f"inline value of 'y' must be {dtype}: {shown} {says}"


@pytest.mark.parametrize("value,dtype,shown,says", NOT_FITTING, ids=IDS)
def test_a_constant_that_does_not_fit_its_dtype_is_a_diagnostic(value, dtype, shown, says):
    p = Project()
    p.add_page("main").add_node("Const", id="c", attrs={"value": np.array([0, value]), "dtype": dtype})
    (d,) = compile_project(p).errors
    assert d.node == "c" and d.message == f"attr 'value': {shown} (at [1]) {says}"


def test_an_explicit_cast_keeps_tensorflows_wrapping():
    p = _placeholder("int32")
    pg = p.page("main")
    pg.add_node("Cast", id="c", attrs={"DstT": "int8"})
    pg.connect("x", "output", "c", "x")
    r = run(compile_project(p), {"x": [1000, -129, 5]})
    assert r.value("c").tolist() == [-24, 127, 5]


def test_the_check_command_reports_an_inline_value_with_its_place(tmp_path):
    p = _placeholder("int8", shape=())
    pg = p.page("main")
    pg.add_node("Add", id="add", inputs={"y": np.array(1000)})
    pg.connect("x", "output", "add", "x")
    save_project(p, tmp_path / "p.bflow.json")
    r = run_cli("check", tmp_path / "p.bflow.json")
    r.assert_clean_message()
    assert r.returncode == 1
    assert "error: main/add port 'y': inline value of 'y' must be int8: 1000 does not fit int8" in r.stdout, r.output


# --------------------------------------------------------------- a Variable's value against its shape
def _variable(**attrs):
    p = Project()
    p.add_page("main").add_node("Variable", id="v", attrs=attrs)
    return p


def test_an_initial_value_of_another_shape_than_declared_is_a_diagnostic():
    (d,) = compile_project(_variable(shape=[2, 2], initializer="value", initial_value=[1.0, 2.0, 3.0])).errors
    assert d.node == "v" and d.message == "its initial value is float32[3] but its shape attr says [2, 2]"
    (d,) = compile_project(_variable(shape=[], initializer="value", initial_value=[1.0])).errors
    assert d.message == "its initial value is float32[1] but its shape attr says []"
    ok = compile_project(_variable(shape=[3], initializer="value", initial_value=[1.0, 2.0, 3.0]))
    assert ok.ok and ok.output_type("v").shape == (3,)
    assert compile_project(_variable(initializer="value", initial_value=[1.0, 2.0])).ok   # no shape given


def test_a_stored_value_of_another_shape_is_a_diagnostic():
    p = _variable(shape=[2, 2], initializer="zeros")
    p.page("main").nodes["v"].state["value"] = np.zeros(3, np.float32)
    (d,) = compile_project(p).errors
    assert d.node == "v" and "stored value is float32[3] but the Variable is declared float32[2,2]" in d.message


def test_an_initial_value_that_does_not_fit_the_variables_dtype_is_a_diagnostic():
    (d,) = compile_project(_variable(dtype="float16", initializer="value", initial_value=[1.0, 1e5])).errors
    assert d.node == "v" and "attr 'initial_value': 100000 (at [1]) does not fit float16" in d.message


def test_an_initializer_that_breaks_its_declaration_is_named_when_drawn():
    program = compile_project(_variable(shape=[2], initializer="ones"))
    pending = program.variable_values._pending["v"]
    pending.attrs = dict(pending.attrs, shape=(3,))       # a block whose initial() disagrees with infer()
    with pytest.raises(RunError, match=r"main/v \(Variable\): its initializer made float32\[3\], but the "
                                       r"Variable is declared float32\[2\]"):
        run(program)
