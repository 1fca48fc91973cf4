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
from pathlib import Path

import numpy as np
import pytest

from hostile_kit import baseline_rss, changed_paths, run_child, run_cli, run_python, snapshot

from blockflow.project import Project
from blockflow.io.project_io import load_project, save_project

MIB = 1024 ** 2
SAMPLES = Path(__file__).resolve().parents[2] / "sample_projects"
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


# One child imports blockflow once, then forks a fresh process per command line: each case is a
# separate `blockflow ARGS` process with its own exit code and output, at a tenth of the cost.
_FORKING_RUNNER = """
import json, os, sys, tempfile, traceback
from blockflow.gui.app import main
from blockflow.registry import default_registry
default_registry()
results = []
for argv in json.loads(sys.argv[1]):
    out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
    sys.stdout.flush(); sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 99
        try:
            os.dup2(out.fileno(), 1)
            os.dup2(err.fileno(), 2)
            sys.argv = ["blockflow", *argv]
            try:
                code = main(argv)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
            sys.stdout.flush(); sys.stderr.flush()
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    out.seek(0); err.seek(0)
    results.append([os.waitstatus_to_exitcode(status), out.read().decode(), err.read().decode()])
print(json.dumps(results))
"""


def cli_each(cases, cwd):
    """Run ``blockflow ARGS`` for each ARGS, each in its own process: [(code, stdout, stderr)]."""
    r = run_child([sys.executable, "-c", _FORKING_RUNNER, json.dumps([[str(a) for a in c] for c in cases])],
                  cap_bytes=None, cwd=cwd, env=STRICT)
    assert r.returncode == 0, r.output
    return [tuple(x) for x in json.loads(r.stdout)]


# ------------------------------------------------------------------------------ printing


RESULT = 512 * MIB      # the result of the printing cases: 2**27 float32 values
CAP = 1024 * MIB        # room for the result once, not for a second copy of it
BUDGET = "900M"         # the run may hold the result (the default budget is half of CAP)


def test_printing_a_512_mib_result_as_text_or_json_needs_no_second_copy(tmp_path):
    path = tiled(tmp_path, RESULT // 4)
    floor = baseline_rss()
    text = cli("run", path, "--memory-budget", BUDGET, cap_bytes=CAP)
    assert text.returncode == 0, text.output
    assert "main/t:output" in text.stdout and "float32[134217728]" in text.stdout
    assert "min -" in text.stdout and "mean" in text.stdout and "max " in text.stdout
    assert text.peak_rss < floor + RESULT + 96 * MIB, text.peak_rss / MIB
    out = cli("run", path, "--json", "--memory-budget", BUDGET, cap_bytes=CAP)
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
    # Read back in a child: two million Python floats would leave this process (whose size every
    # later child inherits as its starting peak) hundreds of MiB bigger.
    check = f"""
        import json, numpy as np
        written = json.load(open({str(dest)!r}, encoding="utf-8"))["values"]["t:output"]
        x = np.random.default_rng(12).standard_normal(1024)
        assert written["shape"] == [{values}]
        np.testing.assert_array_equal(np.asarray(written["data"]), np.tile(x, {values // 1024}))
    """
    back = run_python(textwrap.dedent(check), cap_bytes=None)
    assert back.returncode == 0, back.output



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
    # the same with the update drawn on the page (graph mode): its own ApplyGradientDescent blocks
    project = load_project(SAMPLES / "linear_regression.bflow.json")
    for node in ("update_W", "update_b"):
        project.page("drawn_update").nodes[node].inputs["alpha"] = np.array(1e30, np.float32)
    save_project(project, tmp_path / "drawn.bflow.json", backup=False)
    r = cli("train", tmp_path / "drawn.bflow.json", "--page", "drawn_update", "--steps", "5", "-q")
    assert r.returncode == 4, r.output
    assert "produced Inf" in r.stderr and "at training step 1, after 1 update by the page's update blocks made " \
        "the Variables grow" in r.stderr and "diverged" in r.stderr, r.output


BAD_SETTINGS = [
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
]


def test_bad_training_settings_are_usage_errors(tmp_path):
    path = regression(tmp_path / "r.bflow.json")
    runs = cli_each([("train", path, "--steps", "2", "--optimizer", "sgd", *args) for args, _ in BAD_SETTINGS],
                    tmp_path)
    for (args, words), (code, out, err) in zip(BAD_SETTINGS, runs):
        assert code == 2 and words in err and "Traceback" not in err, (args, out, err)


# ------------------------------------------------------------------------------ exit codes


@pytest.fixture(scope="module")
def projects(tmp_path_factory):
    d = tmp_path_factory.mktemp("exit-codes")
    paths = {"dir": d}
    paths["P"] = build(d / "p.bflow.json",
                       [("x", "Placeholder", {"shape": [1, 2]}),
                        ("A", "Const", {"value": np.array([[2.0, 5.0], [3.0, -3.0]], np.float32)}),
                        ("t", "MatMul", {"transpose_b": True}), ("s", "Sum", {})],
                       ["A:output -> t:a", "x:output -> t:b", "t:product -> s:input"],
                       feeds={"x": np.array([[2.0, 3.0]], np.float32)})
    paths["R"] = regression(d / "r.bflow.json")
    paths["LOG0"] = build(d / "log0.bflow.json",
                          [("x", "Placeholder", {"shape": [3]}), ("l", "Log", {}), ("s", "Sum", {})],
                          ["x:output -> l:x", "l:y -> s:input"], feeds={"x": np.array([0, 1, 2], np.float32)},
                          loss="s")
    paths["BROKEN"] = build(d / "broken.bflow.json",
                            [("x", "Placeholder", {"shape": [3]}), ("y", "Placeholder", {"shape": [4]}),
                             ("add", "Add", {}), ("loss", "Sum", {})],
                            ["x:output -> add:x", "y:output -> add:y", "add:z -> loss:input"], loss="loss")
    two = load_project(paths["P"])
    two.add_page("other")
    save_project(two, d / "two.bflow.json", backup=False)
    paths["TWO"] = d / "two.bflow.json"
    (d / "bad.bflow.json").write_text('{"format": "blockflow-project", "version": 1, "pages": [}')
    paths["BAD"] = d / "bad.bflow.json"
    (d / "binary.bflow.json").write_bytes(bytes(range(256)) * 4)
    paths["BINARY"] = d / "binary.bflow.json"
    paths["MISSING"] = d / "missing.bflow.json"
    paths["NOFILE"] = d / "missing.npy"
    paths["OUT"] = d / "blocks.md"
    paths["NODIR"] = d / "no" / "such" / "folder" / "blocks.md"
    return paths


EXIT_CASES = [
    # 2: the command line is wrong (nothing is read past what names the mistake)
    (("run", "{P}", "--feed", "nope=[[1,2]]"), 2,
     "--feed nope: page 'main' has no Placeholder 'nope' (its Placeholders: x)"),
    (("run", "{P}", "--feed", "nope={NOFILE}"), 2, "has no Placeholder 'nope'"),
    (("run", "{P}", "--feed", "x=[[1,2]]", "--feed", "x=[[3,4]]"), 2, "--feed x: given twice"),
    (("run", "{P}", "--feed", "x"), 2, "expected NAME=VALUE"),
    (("run", "{P}", "--feed", "x=[[1,2]"), 2, "is neither a .npy/.csv file nor JSON"),
    (("run", "{P}", "--page", "nope"), 2, "no page named 'nope' (pages: main)"),
    (("run", "{P}", "--fetch", "nope"), 2, "has no compiled node 'nope'"),
    (("run", "{P}", "--grad", "t"), 2, "--grad t: that output is float32[2,1], not a scalar: give --grad-seed"),
    (("run", "{P}", "--grad", "nope"), 2, "--grad nope: page 'main' has no compiled node 'nope'"),
    (("run", "{P}", "--forward-only", "--grad-seed", "1"), 2, "--grad-seed needs a gradient target"),
    (("run", "{P}", "--bogus"), 2, "unrecognized arguments: --bogus"),
    (("check", "{P}", "--grad", "nope"), 2, "page 'main' has no block 'nope'"),
    (("check", "{TWO}", "--grad", "nope"), 2, "--grad nope: no page has a block 'nope'"),
    (("check", "{P}", "--page", "nope"), 2, "no page named 'nope'"),
    (("blocks", "--output", "{OUT}"), 2, "--output writes the Markdown reference: give --markdown too"),
    (("train", "{R}"), 2, "give --steps N"),
    (("train", "{R}", "--steps", "-1"), 2, "argument --steps: -1 is out of range: a whole number from 0 to 10,000,000"),
    (("train", "{R}", "--steps", "2", "--batch-size", "-1"), 2, "argument --batch-size: -1 is out of range"),
    (("train", "{P}", "--steps", "2"), 2, "page 'main' marks no loss"),
    (("deploy",), 2, "'deploy' is neither a command (run, check, train, blocks, layers, export, import, render) nor a project file"),
    (("export",), 2, "the following arguments are required: format, project, -o/--output"),
    (("export", "torch", "{P}"), 2, "the following arguments are required: -o/--output"),
    (("{P}", "{R}"), 2, "expected one project file, got 2 arguments"),
    # 3: a file cannot be read
    (("run", "{MISSING}"), 3, "missing.bflow.json: cannot read the file: No such file or directory"),
    (("run", "{dir}"), 3, "cannot read the file: Is a directory"),
    (("run", "{BAD}"), 3, "bad.bflow.json at line 1"),
    (("check", "{BINARY}"), 3, "binary.bflow.json"),
    (("run", "{P}", "--feed", "x={NOFILE}"), 3, "--feed x: cannot read"),
    (("blocks", "--markdown", "--output", "{NODIR}"), 2, "does not exist"),
    (("{MISSING}",), 3, "missing.bflow.json: cannot read the file"),
    # 1: the diagram has errors
    (("run", "{BROKEN}"), 1, "the diagram has errors; nothing was run"),
    (("check", "{BROKEN}"), 1, "main/add"),
    (("train", "{BROKEN}", "--steps", "1"), 1, "the diagram has errors; nothing was trained"),
    # 4: the run failed
    (("run", "{P}", "--feed", "x=[[1,2,3]]"), 4, "feed for Placeholder main/x does not fit"),
    (("run", "{LOG0}"), 4, "main/l (Log) produced Inf (1 of 3 values) in its output 'y' (forward pass)"),
    (("run", "{P}", "--grad", "t", "--grad-seed", "[1]"), 4, "the gradient seed has shape [1]"),
    # 0
    (("--version",), 0, "blockflow "),
    (("--help",), 0, "exit codes:"),
]


def test_exit_codes_match_the_documented_table(projects):
    before = snapshot(projects["dir"])
    argvs = [[a.format(**projects) for a in args] for args, _, _ in EXIT_CASES]
    for (args, code, words), (got, out, err) in zip(EXIT_CASES, cli_each(argvs, projects["dir"])):
        case = f"blockflow {' '.join(args)}:\n{out}{err}"
        assert got == code, case
        assert words in out + err, case
        assert "Traceback" not in out + err and "Warning" not in err, case
        if code not in (0, 1):
            # one line says what went wrong (argparse's own errors come after its usage line)
            errors = [line for line in err.splitlines() if "error" in line]
            assert len(errors) == 1 and errors[0].startswith(("blockflow: error:", "blockflow run: error:",
                                                                    "blockflow train: error:",
                                                                    "blockflow export: error:")), case
    assert changed_paths(before, snapshot(projects["dir"])) == set()


def test_the_exit_code_table_is_the_documented_one():
    from blockflow import cli as cli_module

    doc = (SAMPLES.parent / "docs" / "cli.md").read_text(encoding="utf-8")
    for code in cli_module.EXIT_CODES:
        assert f"\n| {code} | " in doc, code
    assert {c for _, c, _ in EXIT_CASES} <= set(cli_module.EXIT_CODES)


def test_check_grad_json_stays_json_when_a_gradient_is_not_finite(projects):
    r = cli("check", projects["LOG0"], "--grad", "--json")
    assert r.returncode == 1, r.output
    entry = json.loads(r.stdout)["gradient_checks"][0]["inputs"][0]
    assert entry["analytic"] == "-Infinity" and entry["numeric"] == "NaN" and entry["passed"] is False


def test_a_closed_pipe_or_ctrl_c_ends_quietly(projects):
    code = f"""
        import os, sys
        read, write = os.pipe()
        os.close(read)
        os.dup2(write, 1)
        from blockflow.cli import main
        raise SystemExit(main(["run", {str(projects["P"])!r}, "--json"]))
    """
    r = run_python(textwrap.dedent(code), cap_bytes=None, env=STRICT)
    assert r.returncode == 0 and r.stderr.strip() == "", r.output
    code = f"""
        import blockflow.run.runtime
        def interrupted(*a, **k):
            raise KeyboardInterrupt
        blockflow.run.runtime.run = interrupted
        from blockflow.cli import main
        raise SystemExit(main(["run", {str(projects["P"])!r}]))
    """
    r = run_python(textwrap.dedent(code), cap_bytes=None, env=STRICT)
    assert r.returncode == 130 and r.stderr.strip() == "blockflow: interrupted", r.output


# ------------------------------------------------------------------------------ train --save elsewhere


def data_project(folder):
    """A project in ``folder`` whose page 'fit' trains on data/train.csv and whose page 'other'
    reads arrays.npz: two data files by path, on two pages."""
    rng = np.random.default_rng(7)
    (folder / "data").mkdir(parents=True)
    u = rng.uniform(-1, 1, 40)
    (folder / "data" / "train.csv").write_text("u,label\n" + "".join(f"{a:.6f},{3 * a + 0.5:.6f}\n" for a in u))
    np.savez(folder / "arrays.npz", x=rng.standard_normal((10, 2)), y=np.arange(10) % 2)
    project = Project()
    pg = project.add_page("fit")
    pg.add_node("CsvDataset", id="d", attrs={"path": "data/train.csv", "label_format": "value",
                                             "test_fraction": 0.0, "batch_size": 8})
    pg.add_node("Variable", id="W", attrs={"shape": [1, 1], "initializer": "zeros"})
    pg.add_node("MatMul", id="h")
    pg.add_node("SquaredDifference", id="e")
    pg.add_node("Mean", id="loss")
    for wire in ("d:features h:a", "W:ref h:b", "h:product e:x", "d:labels e:y", "e:z loss:input"):
        src, dst = wire.split()
        pg.connect(*src.split(":"), *dst.split(":"))
    pg.loss = "loss"
    project.add_page("other").add_node("NumpyDataset", id="n", attrs={"path": "arrays.npz"})
    save_project(project, folder / "p.bflow.json", backup=False)
    return folder / "p.bflow.json"


def paths_in(path):
    return {pg.name: {n.id: n.attrs["path"] for n in pg.nodes.values() if "path" in n.attrs}
            for pg in load_project(path).pages}


def loads_and_runs(path, cwd):
    runs = cli_each([("check", path), ("run", path, "--page", "fit"), ("run", path, "--page", "other")], cwd)
    for code, out, err in runs:
        assert code == 0 and "error" not in out + err, out + err


def test_train_save_into_a_sibling_folder_copies_the_data_files_and_the_project_still_runs(tmp_path):
    src = data_project(tmp_path / "a")
    (tmp_path / "b").mkdir()
    before = snapshot(tmp_path / "a")
    r = cli("train", src, "--steps", "20", "--lr", "0.1", "-q", "--save", tmp_path / "b" / "p.bflow.json",
            cwd=tmp_path)
    assert r.returncode == 0, r.output
    assert f"copied data file 'data/train.csv' into {tmp_path / 'b'}" in r.stdout
    assert f"copied data file 'arrays.npz' into {tmp_path / 'b'}" in r.stdout
    assert changed_paths(before, snapshot(tmp_path / "a")) == set()           # the original is untouched
    assert {p.relative_to(tmp_path / "b").as_posix() for p in (tmp_path / "b").rglob("*")} == \
        {"p.bflow.json", "data", "data/train.csv", "arrays.npz"}
    for name in ("data/train.csv", "arrays.npz"):
        assert (tmp_path / "b" / name).read_bytes() == (tmp_path / "a" / name).read_bytes()
    saved = tmp_path / "b" / "p.bflow.json"
    assert paths_in(saved) == paths_in(src)
    assert load_project(saved).page("fit").nodes["W"].state["value"].item() != 0    # trained
    loads_and_runs(saved, tmp_path / "b")
    # again: the copies there are the same files, so nothing is copied twice
    r = cli("train", src, "--steps", "2", "-q", "--save", saved, "--json", cwd=tmp_path)
    assert r.returncode == 0, r.output
    assert [d["action"] for d in json.loads(r.stdout)["data_files"]] == ["same", "same"]


def test_train_save_never_overwrites_or_follows_what_is_already_in_the_new_folder(tmp_path):
    src = data_project(tmp_path / "a")
    dest = tmp_path / "b"
    (dest / "data").mkdir(parents=True)
    (dest / "data" / "train.csv").write_text("someone else's table\n")
    victim = tmp_path / "victim.txt"
    victim.write_text("not blockflow's")
    (dest / "arrays.npz").symlink_to(victim)
    before = snapshot(tmp_path)
    r = cli("train", src, "--steps", "3", "-q", "--save", dest / "p.bflow.json", cwd=tmp_path)
    assert r.returncode == 0, r.output
    assert "as 'data/train-1.csv' (a different 'data/train.csv' is already there)" in r.stdout
    assert "as 'arrays-1.npz' (a different 'arrays.npz' is already there)" in r.stdout
    assert changed_paths(before, snapshot(tmp_path)) == {
        str(dest / n) for n in ("p.bflow.json", "data/train-1.csv", "arrays-1.npz")}
    assert paths_in(dest / "p.bflow.json") == {"fit": {"d": "data/train-1.csv"}, "other": {"n": "arrays-1.npz"}}
    loads_and_runs(dest / "p.bflow.json", dest)


def test_train_save_into_an_enclosing_folder_rewrites_the_paths_without_copying(tmp_path):
    src = data_project(tmp_path / "proj" / "a")
    before = snapshot(tmp_path)
    r = cli("train", src, "--steps", "2", "-q", "--save", tmp_path / "p.bflow.json", cwd=tmp_path)
    assert r.returncode == 0, r.output
    assert "data file 'data/train.csv' is named 'proj/a/data/train.csv' in the saved project" in r.stdout
    assert changed_paths(before, snapshot(tmp_path)) == {str(tmp_path / "p.bflow.json")}
    assert paths_in(tmp_path / "p.bflow.json") == {"fit": {"d": "proj/a/data/train.csv"},
                                                    "other": {"n": "proj/a/arrays.npz"}}
    loads_and_runs(tmp_path / "p.bflow.json", tmp_path)


def test_train_save_refuses_before_training_what_it_could_not_write(tmp_path):
    src = data_project(tmp_path / "a")
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "data").symlink_to(outside)      # a folder link planted where the copy would go
    before = snapshot(tmp_path)
    # a path that cannot name a file is a usage error (2); a data file that cannot follow is 3
    cases = [(tmp_path / "nofolder" / "p.bflow.json", 2, f"the folder {tmp_path / 'nofolder'} does not exist"),
             (tmp_path / "b", 2, "is a folder"),
             (tmp_path / "b" / "p.bflow.json", 3, f"data file 'data/train.csv' cannot be copied into {tmp_path / 'b'}: "
                                                  "'data' there leads out of that folder")]
    runs = cli_each([("train", src, "--steps", "50", "--save", out) for out, _, _ in cases], tmp_path)
    for (out, want, words), (code, stdout, stderr) in zip(cases, runs):
        assert code == want and words in stderr and "step " not in stderr, (out, stdout, stderr)   # no step ran
    assert changed_paths(before, snapshot(tmp_path)) == set()
