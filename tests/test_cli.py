"""The command line: run, check, blocks; exit codes; one-line errors."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from blockflow.cli import EXIT_DIAGNOSTICS, EXIT_FILE, EXIT_OK, EXIT_RUN, EXIT_USAGE, blocks_markdown, main
from blockflow.io.project_io import save_project
from blockflow.registry import default_registry

from diagrams import chain

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_projects" / "stable_softmax.bflow.json"


def cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def softmax(x):
    e = np.exp(x - x.max())
    return e / e.sum()


def test_run_json_on_the_sample_gives_the_right_numbers(capsys):
    code, out, err = cli(capsys, "run", SAMPLE, "--json")
    assert code == EXIT_OK, err
    data = json.loads(out)
    x = np.array(data["values"]["x:output"]["data"], np.float64)
    w = np.array(data["values"]["w:output"]["data"], np.float64)
    p = softmax(x)
    assert data["page"] == "stable_softmax" and data["target"] == "Sum_1:output"
    np.testing.assert_allclose(data["values"]["Softmax_1:softmax"]["data"], p, rtol=1e-6)
    np.testing.assert_allclose(data["values"]["Sum_1:output"]["data"], p @ w, rtol=1e-6)
    np.testing.assert_allclose(data["gradients"]["x:output"]["data"], p * (w - p @ w), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(data["variable_gradients"]["x"]["data"], p * (w - p @ w), rtol=1e-5, atol=1e-7)
    edges = {(e["from"], e["to"]): e for e in data["edges"]}
    cut = edges[("Max_1:output", "StopGradient_1:input")]
    assert cut["status"] == "cut" and cut["cut_by"] == ["StopGradient_1"] and cut["gradient"] is None
    assert edges[("x:output", "Subtract_1:x")]["status"] == "flows"


def test_run_text_output_and_page_and_feeds(capsys, tmp_path):
    code, out, _ = cli(capsys, "run", SAMPLE)
    assert code == EXIT_OK
    assert "stable_softmax/Sum_1:output" in out and "cut by StopGradient_1" in out
    big = tmp_path / "big.npy"
    np.save(big, np.full(5, 1000.0, np.float32))
    code, out, err = cli(capsys, "run", SAMPLE, "--page", "naive", "--feed", f"x={big}")
    assert code == EXIT_RUN
    assert err.count("\n") == 1 and "naive/Exp_1" in err and "Inf" in err
    code, out, _ = cli(capsys, "run", SAMPLE, "--feed", "x=[1000,1001,1002,1003,1004]", "--json")
    assert code == EXIT_OK
    assert all(np.isfinite(json.loads(out)["gradients"]["x:output"]["data"]))
    csv = tmp_path / "x.csv"
    csv.write_text("x\n1\n2\n3\n4\n5\n")
    code, out, _ = cli(capsys, "run", SAMPLE, "--feed", f"x={csv}", "--fetch", "Sum_1", "--forward-only", "--json")
    assert code == EXIT_OK
    data = json.loads(out)
    assert list(data["values"]) == ["Sum_1:output"] and data["target"] is None


def test_run_errors_are_one_line_with_documented_codes(capsys, tmp_path):
    code, _, err = cli(capsys, "run", tmp_path / "missing.bflow.json")
    assert code == EXIT_FILE and err.strip().count("\n") == 0 and "missing.bflow.json" in err
    bad = tmp_path / "bad.bflow.json"
    bad.write_text('{"format": "blockflow-project", "version": 1, "pages": [}')
    code, _, err = cli(capsys, "run", bad)
    assert code == EXIT_FILE and "bad.bflow.json" in err and "line 1" in err
    assert "Traceback" not in err
    code, _, err = cli(capsys, "run", SAMPLE, "--page", "nope")
    assert code == EXIT_USAGE and "no page named 'nope'" in err
    code, _, err = cli(capsys, "run", SAMPLE, "--feed", "x=[1,2]")
    assert code == EXIT_RUN and "stable_softmax/x" in err
    code, _, err = cli(capsys, "run", SAMPLE, "--feed", "nofeed")
    assert code == EXIT_USAGE
    code, _, err = cli(capsys, "--debug", "run", SAMPLE, "--feed", "x=[1,2]")
    assert code == EXIT_RUN and "Traceback" in err


def test_check_lists_every_problem_and_exits_non_zero(capsys, tmp_path):
    code, out, _ = cli(capsys, "check", SAMPLE)
    assert code == EXIT_OK and "page 'stable_softmax'" in out and "ok" in out
    p = chain(("x", "Placeholder", {"shape": [3]}, None),
              ("y", "Placeholder", {"shape": [4]}, None),
              ("add", "Add", {}, {"x": "x", "y": "y"}),
              ("mul", "Multiply", {}, {"x": "x"}))
    path = tmp_path / "broken.bflow.json"
    save_project(p, path)
    code, out, _ = cli(capsys, "check", path)
    assert code == EXIT_DIAGNOSTICS
    assert "main/add" in out and "[3]" in out and "[4]" in out
    assert "main/mul port 'y'" in out and "2 errors" in out
    code, out, _ = cli(capsys, "check", path, "--json")
    diags = json.loads(out)["diagnostics"]
    assert {(d["node"], d["port"]) for d in diags} == {("add", None), ("mul", "y")}
    code, out, _ = cli(capsys, "check", SAMPLE, "-v")
    assert "x.output -> Subtract_1.x: float32[5]" in out


def test_blocks_catalogue_and_reference(capsys):
    code, out, _ = cli(capsys, "blocks")
    assert code == EXIT_OK and "StopGradient" in out and "array_ops" in out
    code, out, _ = cli(capsys, "blocks", "--json")
    names = {b["name"] for b in json.loads(out)}
    assert {"MatMul", "StopGradient", "Softmax"} <= names


def test_committed_block_reference_is_up_to_date():
    committed = (ROOT / "docs" / "blocks.md").read_text(encoding="utf-8")
    assert committed == blocks_markdown(default_registry()), \
        "docs/blocks.md is stale: run blockflow blocks --markdown --output docs/blocks.md"


def test_the_named_commands_are_the_parsers_commands():
    # the console script dispatches on COMMANDS without building the parser (issue 18): a command
    # added to the parser but not named would be taken for a project file
    import argparse

    from blockflow.cli import COMMANDS, build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert tuple(sub.choices) == COMMANDS


def _commands_of(parser) -> dict:
    import argparse

    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices


def _described(parser) -> list:
    return [(a.option_strings, a.dest, a.nargs, a.const, a.default, getattr(a.type, "__qualname__", a.type), a.choices,
             a.required, a.help, a.metavar) for a in parser._actions]


@pytest.mark.parametrize("command", ["run", "check", "train", "blocks", "layers", "export", "import"])
def test_a_command_alone_parses_as_among_all(command, capsys):
    # main builds only the sub-parser of the command argv starts with (start-up, docs/performance.md):
    # it must be the one the whole parser holds, its options, help and errors the same
    from blockflow.cli import build_parser

    alone, full = _commands_of(build_parser(command)), _commands_of(build_parser())
    assert list(alone) == [command]
    assert _described(alone[command]) == _described(full[command])
    assert alone[command].format_help() == full[command].format_help()
    assert alone[command]._defaults["func"].__name__ == full[command]._defaults["func"].__name__
    for argv in ([command, "--no-such-option"], [command, "--help"]):
        with pytest.raises(SystemExit) as by_all:
            build_parser().parse_args(argv)
        expected = capsys.readouterr()
        with pytest.raises(SystemExit) as by_main:
            main(argv)
        assert (by_main.value.code, capsys.readouterr()) == (by_all.value.code, expected)


@pytest.mark.parametrize("columns", [None, "123", "47", "0", "-5", "x", ""])
def test_help_is_as_wide_as_argparse_makes_it(columns, monkeypatch):
    """The parsers' formatter finds the terminal's width without shutil (start-up) and finds
    the one argparse's own formatter would, so --help reads the same."""
    import argparse
    import shutil

    from blockflow.cli import build_parser
    from blockflow.cli.parser import terminal_columns
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    assert terminal_columns() == shutil.get_terminal_size().columns
    ours = build_parser("run")
    stock = build_parser("run")
    stock.formatter_class = argparse.RawDescriptionHelpFormatter
    for p in _commands_of(stock).values():
        p.formatter_class = argparse.HelpFormatter
    assert ours.format_help() == stock.format_help()
    assert _commands_of(ours)["run"].format_help() == _commands_of(stock)["run"].format_help()


@pytest.mark.parametrize("terminal", [(97, 30), (0, 0), (131, 0), OSError, ValueError, None])
@pytest.mark.parametrize("columns", [None, "-1", "55"])
def test_the_width_of_the_terminal_is_the_one_shutil_finds(terminal, columns, monkeypatch):
    """The terminal's own size, which the test above never meets (stdout is not a terminal under
    pytest): taken when $COLUMNS is not a positive number, its 0 columns (a pseudo-terminal not
    sized yet) or a failure (not a terminal, stdout closed or gone) giving 80, as for shutil."""
    import os
    import shutil
    import sys

    from blockflow.cli.parser import terminal_columns
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    if terminal is None:
        monkeypatch.setattr(sys, "__stdout__", None)
    elif isinstance(terminal, tuple):
        monkeypatch.setattr(os, "get_terminal_size", lambda fd: os.terminal_size(terminal))
    else:
        def fails(fd):
            raise terminal("no terminal")
        monkeypatch.setattr(os, "get_terminal_size", fails)
    assert terminal_columns() == shutil.get_terminal_size().columns
    assert terminal_columns() == (55 if columns == "55" else 97 if terminal == (97, 30) else
                                  131 if terminal == (131, 0) else 80)


@pytest.mark.parametrize("first", [None, "--help", "--debug", "nope", "Run", "render"])
def test_anything_but_a_command_builds_every_commands_parser(first):
    from blockflow.cli import COMMANDS, build_parser

    assert tuple(_commands_of(build_parser(first))) == COMMANDS


def test_console_entry_point_runs():
    proc = subprocess.run([sys.executable, "-m", "blockflow", "check", str(SAMPLE)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    proc = subprocess.run([sys.executable, "-m", "blockflow", "--help"], capture_output=True, text=True, timeout=60)
    assert "exit codes" in proc.stdout


def test_bad_feeds_seeds_and_targets_are_usage_or_file_errors(capsys, tmp_path):
    empty = tmp_path / "empty.npy"
    empty.write_bytes(b"")
    code, _, err = cli(capsys, "run", SAMPLE, "--feed", f"x={empty}")
    assert code == EXIT_FILE and "empty.npy" in err and "Traceback" not in err
    code, _, err = cli(capsys, "run", SAMPLE, "--grad-seed", "zz", "--grad", "Subtract_1")
    assert code == EXIT_USAGE and "--grad-seed" in err
    code, _, err = cli(capsys, "run", SAMPLE, "--forward-only", "--grad-seed", "1")
    assert code == EXIT_USAGE and "needs a gradient target" in err
    code, _, err = cli(capsys, "run", SAMPLE, "--grad", "Subtract_1", "--grad-seed", "[[1,2,3,4,5]]")
    assert code == EXIT_RUN and "seed has shape [1, 5]" in err
    code, _, err = cli(capsys, "run", SAMPLE, "--grad", "nope")
    assert code == EXIT_USAGE and "nope" in err


def test_check_grad_checks_each_page_in_float64(capsys, tmp_path):
    code, out, err = cli(capsys, "check", str(SAMPLE), "--grad")
    assert code == EXIT_OK, err
    assert out.count("gradient check of ") == 4 and "FAILED" not in out
    assert "  x: analytic" in out
    code, out, _ = cli(capsys, "check", str(SAMPLE), "--page", "naive", "--grad", "Sum_1", "--json")
    report = json.loads(out)["gradient_checks"]
    assert report[0]["page"] == "naive" and report[0]["passed"] and report[0]["rtol"] == 1e-5
    assert [e["input"] for e in report[0]["inputs"]] == ["x"]
    # a page with no loss: skipped among all pages, a usage error when it is the page asked for
    path = tmp_path / "noloss.bflow.json"
    save_project(chain(("x", "Placeholder", {"shape": [2]}, None), ("t", "Tanh", {}, {"x": "x"}),
                       feeds={"x": [1.0, 2.0]}), path)
    code, out, _ = cli(capsys, "check", str(path), "--grad")
    assert code == EXIT_OK and "gradient check skipped: the page marks no loss" in out
    code, _, err = cli(capsys, "check", str(path), "--page", "main", "--grad")
    assert code == EXIT_USAGE and "marks no loss" in err and "Traceback" not in err
    code, out, _ = cli(capsys, "check", str(path), "--grad", "t")   # a non-scalar target: seeded
    assert code == EXIT_OK and "passed" in out


def test_check_grad_fails_with_exit_1_when_a_block_rule_is_wrong(capsys, monkeypatch):
    import blockflow.cli.inputs as cli_module
    from blockflow.registry import Registry
    from blockflow.spec import Input, Output, block
    from blockflow_blocks import all_blocks

    @block("Softmax", category="test")
    class BadSoftmax:
        """Softmax whose gradient forgets the subtraction term."""

        inputs = (Input("logits", dtype="float"),)
        outputs = (Output("softmax"),)

        def infer(logits):
            return logits

        def forward(logits):
            e = np.exp(logits - logits.max(axis=-1, keepdims=True))
            return e / e.sum(axis=-1, keepdims=True)

        def vjp(g, out, logits):
            return (g * out,)

    registry = Registry([b for b in all_blocks() if b.name != "Softmax"] + [BadSoftmax])
    monkeypatch.setattr(cli_module, "registry", lambda: registry)
    code, out, _ = cli(capsys, "check", str(SAMPLE), "--page", "stable_softmax", "--grad")
    assert code == EXIT_DIAGNOSTICS and "FAILED" in out and "x:" in out


def test_a_npy_feed_is_read_as_the_inspector_reads_one(capsys, tmp_path):
    """--feed and the inspector share blockflow.feeds.read_npy: same refusals, same words."""
    from blockflow.feeds import FeedFileError, read_npy

    pickled = tmp_path / "o.npy"
    np.save(pickled, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    empty = tmp_path / "empty.npy"
    empty.write_bytes(b"")
    archive = tmp_path / "a.npz"
    np.savez(archive, x=np.ones(3))
    for path, words in ((pickled, "pickled"), (empty, "not a valid .npy file")):
        with pytest.raises(FeedFileError, match=words):
            read_npy(path)
        code, _, err = cli(capsys, "run", SAMPLE, "--feed", f"x={path}")
        assert code == EXIT_FILE and f"--feed x: cannot read {path}: " in err and words in err
    with pytest.raises(FeedFileError, match="npz archive"):
        read_npy(archive)
