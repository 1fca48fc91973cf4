"""The command line's edges, as an attacker or a careless script would hit them: printing a huge
result, exit codes for every class of failure, a training update that overflows, and
``train --save`` into another folder. Each case runs ``blockflow`` in a child process (memory
capped where memory is the point) and checks the exit code, the message (where and what, no
traceback, no numpy warning) and, where files are involved, that nothing else changed.
"""
from __future__ import annotations

import json
import sys
import textwrap

import numpy as np
import pytest

from hostile_kit import baseline_rss, changed_paths, run_cli, run_python, snapshot

from blockflow.project import Project
from blockflow.project_io import load_project, save_project

MIB = 1024 ** 2
#: every child runs with numpy's RuntimeWarnings as errors: one reaching the user fails the case
STRICT = {"PYTHONWARNINGS": "error::RuntimeWarning"}


def build(path, nodes, wires=(), feeds=None, loss=None, page="main", metadata=None):
    """Save a one-page project: ``nodes`` are (id, block, attrs[, inline inputs]); ``wires``
    "src:port -> dst:port" strings."""
    project = Project()
    if metadata:
        project.metadata.update(metadata)
    pg = project.add_page(page)
    for nid, block, attrs, *inline in nodes:
        node = pg.add_node(block, id=nid, attrs=attrs)
        for port, value in (inline[0] if inline else {}).items():
            node.inputs[port] = np.asarray(value)
    for wire in wires:
        src, dst = (w.strip() for w in wire.split("->"))
        pg.connect(*src.split(":"), *dst.split(":"))
    for name, value in (feeds or {}).items():
        pg.feeds[name] = np.asarray(value)
    pg.loss = loss
    save_project(project, path, backup=False)
    return path


def cli(*args, cap_bytes=None, cwd=None, **kw):
    r = run_cli(*args, cap_bytes=cap_bytes, cwd=cwd, env=STRICT, **kw)
    r.assert_clean_message()
    assert "RuntimeWarning" not in r.output, r.output
    return r


def tiled(tmp_path, values: int, dtype="float32", name="big"):
    """A page whose one block makes ``values`` numbers from a 1024-number feed: a big result from
    a small file."""
    x = np.random.default_rng(12).standard_normal(1024).astype(dtype)
    return build(tmp_path / f"{name}.bflow.json",
                 [("x", "Placeholder", {"shape": [1024], "dtype": dtype}),
                  ("t", "Tile", {}, {"multiples": [values // 1024]})],
                 ["x:output -> t:input"], feeds={"x": x})


# ------------------------------------------------------------------------------ printing


RESULT = 512 * MIB      # the result of the printing cases: 2**27 float32 values
CAP = 1024 * MIB        # room for the result once, not for a second copy of it


def test_printing_a_512_mib_result_as_text_or_json_needs_no_second_copy(tmp_path):
    path = tiled(tmp_path, RESULT // 4)
    floor = baseline_rss()
    text = cli("run", path, cap_bytes=CAP)
    assert text.returncode == 0, text.output
    assert "main/t:output" in text.stdout and "float32[134217728]" in text.stdout
    assert "min -" in text.stdout and "mean" in text.stdout and "max " in text.stdout
    assert text.peak_rss < floor + RESULT + 96 * MIB, text.peak_rss / MIB
    out = cli("run", path, "--json", cap_bytes=CAP)
    assert out.returncode == 0, out.output
    assert out.peak_rss < floor + RESULT + 96 * MIB, out.peak_rss / MIB
    value = json.loads(out.stdout)["values"]["t:output"]
    assert value["shape"] == [RESULT // 4] and value["data"] is None
    summary = value["summary"]
    assert summary["values"] == RESULT // 4 and summary["non_finite"] == 0
    assert summary["min"] < summary["mean"] < summary["max"] and "--all-values" in summary["note"]
    assert len(out.stdout) < 100_000          # the small input is written in full, the big one not


def test_every_value_of_a_big_result_is_written_piecewise(tmp_path):
    values = 2 * 1024 ** 2            # 16 MiB of float64; as Python lists they would take 64 MiB+
    path = tiled(tmp_path, values, dtype="float64")
    dest = tmp_path / "out.json"
    code = f"""
        import sys
        sys.stdout = open({str(dest)!r}, "w", encoding="utf-8")
        from blockflow.gui.app import main
        sys.argv = ["blockflow", "run", {str(path)!r}, "--json", "--all-values"]
        code = main()
        sys.stdout.flush()
        raise SystemExit(code)
    """
    floor = baseline_rss()
    r = run_python(textwrap.dedent(code), cap_bytes=CAP, env=STRICT)
    r.assert_clean_message()
    assert r.returncode == 0, r.output
    assert r.peak_rss < floor + values * 8 + 24 * MIB, (r.peak_rss - floor) / MIB
    written = json.loads(dest.read_text(encoding="utf-8"))["values"]["t:output"]
    x = np.random.default_rng(12).standard_normal(1024)
    np.testing.assert_array_equal(np.asarray(written["data"]), np.tile(x, values // 1024))



# ------------------------------------------------------------------------------ training updates


def regression(path, dtype="float32"):
    """mean((W * x - y)^2) with W a scalar Variable starting at 1: gradient 2 * mean((x - y) * x)."""
    return build(path,
                 [("x", "Placeholder", {"shape": [3], "dtype": dtype}),
                  ("y", "Placeholder", {"shape": [3], "dtype": dtype}),
                  ("W", "Variable", {"shape": [], "dtype": dtype, "initializer": "ones"}),
                  ("Wx", "Multiply", {}), ("err", "SquaredDifference", {}), ("loss", "Mean", {})],
                 ["W:ref -> Wx:x", "x:output -> Wx:y", "Wx:z -> err:x", "y:output -> err:y",
                  "err:z -> loss:input"],
                 feeds={"x": np.array([1, 2, 3], dtype), "y": np.array([2, 4, 6], dtype)}, loss="loss")


def test_a_learning_rate_that_does_not_fit_the_variables_dtype_is_a_usage_error(tmp_path):
    path = regression(tmp_path / "r.bflow.json")
    r = cli("train", path, "--steps", "3", "--optimizer", "sgd", "--lr", "1e308", "--save", tmp_path / "out.bflow.json")
    assert r.returncode == 2, r.output
    assert "lr 1e+308 is too large for float32" in r.stderr and "Variable main/W" in r.stderr
    assert not (tmp_path / "out.bflow.json").exists()


def test_an_update_that_overflows_is_named_at_the_update_with_the_setting(tmp_path):
    path = regression(tmp_path / "r.bflow.json", "float64")
    before = snapshot(tmp_path)
    r = cli("train", path, "--steps", "3", "--optimizer", "sgd", "--lr", "1e308", "--save", tmp_path / "out.bflow.json")
    assert r.returncode == 4, r.output
    line = r.stderr.strip().splitlines()[-1]
    assert line.startswith("blockflow: error: training step 0: the update of main/W (Variable) by "
                           "ApplyGradientDescent (sgd: lr 1e+308) produced Inf (1 of 1 values)"), line
    assert "gradient were finite" in line and "smaller learning rate" in line
    assert changed_paths(before, snapshot(tmp_path)) == set()       # nothing saved
    r = cli("train", path, "--steps", "3", "--optimizer", "momentum", "--lr", "1e308")
    assert r.returncode == 4 and "training step 0: the update of main/W (Variable) by ApplyMomentum (momentum: " \
        "lr 1e+308, momentum 0.9, use_nesterov false) produced Inf" in r.stderr, r.output
    # Adam's first step is about lr long: finite; the next forward pass overflows, and says why
    r = cli("train", path, "--steps", "3", "--optimizer", "adam", "--lr", "1e308")
    assert r.returncode == 4 and "at training step 1, after 1 update by ApplyAdam (adam: lr 1e+308" in r.stderr \
        and "grow from at most 1 to 1e+308 (main/W): the training diverged" in r.stderr, r.output


def test_a_training_that_diverges_says_so_at_the_step_it_fails(tmp_path):
    path = regression(tmp_path / "r.bflow.json")
    r = cli("train", path, "--steps", "50", "--optimizer", "sgd", "--lr", "1e30", "-q")
    assert r.returncode == 4, r.output
    msg = r.stderr
    assert "main/err (SquaredDifference) produced Inf" in msg and "at training step 1" in msg, msg
    assert "after 1 update by ApplyGradientDescent (sgd: lr 1e+30)" in msg and "diverged" in msg, msg


@pytest.mark.parametrize("args, words", [
    (("--lr", "nan"), "lr must be a number >= 0, got nan"),
    (("--lr", "-1"), "lr must be a number >= 0, got -1.0"),
    (("--lr", "inf"), "lr must be a number >= 0, got inf"),
    (("--set", "lr=1e999"), "lr must be a number >= 0, got inf"),
    (("--set", "lr=1" + "0" * 400), "lr must be a number >= 0"),
    (("--set", "lr=true"), "lr must be a number >= 0, got True"),
    (("--optimizer", "momentum", "--set", "use_nesterov=2"), "use_nesterov must be true or false, got 2"),
    (("--mode", "graph"), "page 'main' has no block that updates a Variable"),
    (("--loss", "err"), "the loss main/err:z is float32[3]; training needs a float scalar"),
    (("--metric", "x"), "the metric main/x:output is float32[3]; metrics must be scalars"),
])
def test_bad_training_settings_are_usage_errors(tmp_path, args, words):
    path = regression(tmp_path / "r.bflow.json")
    r = cli("train", path, "--steps", "2", "--optimizer", "sgd", *args)
    assert r.returncode == 2 and words in r.stderr, r.output
