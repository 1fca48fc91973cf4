"""What starting the command line imports (issue 18: `blockflow run` of a sample within 0.25 s).

The timing itself is benchmarks/run.py's (j) `startup`; these tests hold the imports that made
it: no Qt, no optional engine, and a command loads its own module only. And the quicker reading
of a block function's parameters (spec/declare.py) gives what inspect.signature gives."""
from __future__ import annotations

import functools
import inspect
import json
import subprocess
import sys
from pathlib import Path

import pytest

from blockflow.spec import declare

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_projects" / "stable_softmax.bflow.json"

#: never imported by the command line's start or by `run`, `check`, `blocks`
HEAVY = ("PySide6", "shiboken6", "pyqtgraph", "torch", "onnx", "onnxruntime", "sklearn", "jsonschema", "scipy")
#: what `blockflow run` has no use for: the other commands and the layers they alone reach,
#: networkx (a third of the start and 19 MiB; the compiler builds a graph only to name a cycle),
#: saving (blockflow.ownfiles and logging: 9 ms), OpenSSL's hashes (3-10 ms: random streams only),
#: importlib.metadata (and the email package: 25-40 ms; blockflow/entrypoints.py reads the entry
#: points), zipfile (.npz archives only: 5 ms), csv and difflib (a table read, a key misspelt),
#: the block library's modules whose blocks the sample does not use (registry: lazy providers),
#: flattening (compile/flatten.py and its frozen dataclasses: a page without composite instances),
#: the modules of export's and import's options (main builds the parser of its command only), and
#: what only a rarer path uses: traceback (--debug), base64 and binascii (a file's large arrays),
#: mmap (a plan that keeps arrays across runs), the project writer
NOT_FOR_RUN = ("networkx", "blockflow.cli.cmd_train", "blockflow.cli.cmd_layers", "blockflow.cli.cmd_check",
               "blockflow.cli.cmd_blocks", "blockflow.io.library", "blockflow.run.training",
               "blockflow.run.gradcheck", "blockflow.export", "blockflow.importing", "blockflow.gui.main_window",
               "blockflow.io.saving", "blockflow.ownfiles", "logging", "hashlib", "_hashlib",
               "importlib.metadata", "email", "zipfile", "blockflow.npz_archive", "csv", "difflib",
               "blockflow_blocks.nn_conv", "blockflow_blocks.nn_norm", "blockflow_blocks.data_ops",
               "blockflow_blocks.training_ops", "blockflow_blocks.random_ops", "blockflow_blocks.math_einsum",
               "blockflow.compile.flatten", "blockflow.cli.cmd_export", "blockflow.cli.cmd_import",
               "traceback", "base64", "binascii", "mmap", "blockflow.io.writer", "shutil", "bz2", "lzma")


def _modules_after(args: list[str], entry: str = "from blockflow.gui.app import main") -> tuple[int, set]:
    """Run the ``blockflow`` console script's entry point with ``args`` in a fresh interpreter;
    its exit code and the modules it had imported."""
    code = (f"import sys, io, json, contextlib\n{entry}\n"
            f"out = io.StringIO()\n"
            f"with contextlib.redirect_stdout(out):\n"
            f"    code = main({args!r})\n"
            f"print(json.dumps([code, sorted(sys.modules)]))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    code, modules = json.loads(r.stdout.splitlines()[-1])
    return code, set(modules)


def _roots(modules) -> set:
    return {m.split(".")[0] for m in modules}


@pytest.mark.parametrize("args", [["run", str(SAMPLE)], ["check", str(SAMPLE)], ["blocks", "--json"], ["--version"]],
                         ids=["run", "check", "blocks", "version"])
def test_the_command_line_imports_no_qt_and_no_optional_engine(args):
    if args == ["--version"]:    # argparse exits: the imports of the start alone
        code = ("import sys, json\nfrom blockflow.gui import app\n"
                "print(json.dumps(sorted(sys.modules)))\n")
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
        modules = set(json.loads(r.stdout))
    else:
        code, modules = _modules_after(args)
        assert code == 0
    assert not _roots(modules) & set(HEAVY), sorted(_roots(modules) & set(HEAVY))


def test_run_imports_only_its_own_command():
    code, modules = _modules_after(["run", str(SAMPLE)])
    assert code == 0 and "blockflow.cli.cmd_run" in modules
    loaded = sorted(m for m in modules for unwanted in NOT_FOR_RUN if m == unwanted or m.startswith(unwanted + "."))
    assert not loaded, loaded


def test_python_dash_m_blockflow_imports_no_qt():
    code, modules = _modules_after(["run", str(SAMPLE)], entry="from blockflow.cli import main")
    assert code == 0 and not _roots(modules) & set(HEAVY)


def test_the_package_names_are_still_there():
    import blockflow.cli as cli

    for name in cli.__all__:
        assert getattr(cli, name) is not None, name
    assert set(cli.__all__) <= set(dir(cli))
    with pytest.raises(AttributeError):
        cli.no_such_name  # noqa: B018


# ------------------------------------------------------------------ declare's parameter reading


def _by_inspect(fn):
    """The reading _check_signature made before: inspect.signature's parameters."""
    return declare._parameters_by_inspect(fn)


def _every_block_function():
    from blockflow_blocks import all_blocks

    for spec in all_blocks():
        for fn in (spec.infer, spec.forward, spec.vjp, spec.initial):
            if callable(fn):
                yield spec.name, fn


def test_every_block_function_reads_as_inspect_reads_it():
    seen = 0
    for name, fn in _every_block_function():
        assert declare._parameters(fn) == _by_inspect(fn), (name, fn)
        seen += 1
    assert seen > 300


def _plain(a, b, /, c, *, k, scope=None):
    return a


def _star(a, *rest, k):
    return a


def _bare_star(a, *, k):
    return a


def _kwargs(a, *, k, **more):
    return a


def _both(a, *args, k=1, **kw):
    return a


@functools.wraps(_plain)
def _wrapped(*args, **kwargs):
    return _plain(*args, **kwargs)


def _signed(x, y):
    return x


_signed.__signature__ = inspect.Signature([inspect.Parameter("x", inspect.Parameter.POSITIONAL_OR_KEYWORD)])


class _Callable:
    def __call__(self, a, *, k):
        return a


@pytest.mark.parametrize("fn", [_plain, _star, _bare_star, _kwargs, _both, _wrapped, _signed, _Callable(),
                                functools.partial(_plain, 1), lambda x, *, k: x, staticmethod(_plain), len, print],
                         ids=lambda f: getattr(f, "__name__", type(f).__name__))
def test_parameters_read_as_inspect_reads_them(fn):
    assert declare._parameters(fn) == _by_inspect(fn)


def test_a_bad_signature_is_still_named():
    from blockflow.spec import BlockDeclarationError, Input, Output, block

    with pytest.raises(BlockDeclarationError, match=r"must not take \*args or \*\*kwargs \(parameter 'rest'\)"):
        @block("StarBlock", category="test")
        class StarBlock:
            """A block whose forward takes *rest."""
            inputs = (Input("x"),)
            outputs = (Output("y"),)

            def infer(x):
                return x

            def forward(x, *rest):
                return x


def _frozen_after(entry: str, args: list[str]) -> tuple[int, int, str]:
    """Run ``entry``'s main with ``args`` in a fresh interpreter as its last act, called as the
    console script calls it (sys.argv, no argv): the exit code, how many objects the collector
    had frozen, and what it printed."""
    code = (f"import gc, sys\n{entry}\n"
            f"sys.argv = ['blockflow', *{args!r}]\n"
            f"try:\n"
            f"    code = main()\n"
            f"except SystemExit as exc:\n"
            f"    code = exc.code\n"
            f"sys.stdout.flush()\n"
            f"print('frozen', gc.get_freeze_count(), code, file=sys.stderr)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    frozen, exit_code = r.stderr.splitlines()[-1].split()[1:]
    return int(exit_code), int(frozen), r.stdout


@pytest.mark.parametrize("entry", ["from blockflow.console import main", "from blockflow.console import core_main as main"])
def test_a_command_freezes_the_heap_as_it_leaves(entry):
    """The exit's full collections would scan everything alive (~30 ms of `blockflow run`): the
    console entry points freeze the heap once the command is done, and what it printed is all
    there, as are its exit codes (0, and 2 for a usage error)."""
    code, frozen, out = _frozen_after(entry, ["run", str(SAMPLE)])
    assert code == 0 and frozen > 10_000 and "stable_softmax/x:output" in out, (code, frozen, out)
    code, frozen, _ = _frozen_after(entry, ["run", str(SAMPLE), "--no-such-option"])
    assert code == 2 and frozen > 10_000


def test_after_qt_has_run_the_heap_is_left_to_the_usual_exit(tmp_path):
    """Qt's objects are torn down in the order PySide6 arranges: no freeze after the editor's
    modules were loaded (a render here: the editor's window would need a display)."""
    pytest.importorskip("PySide6")
    code, frozen, _ = _frozen_after("from blockflow.console import main",
                                    ["render", str(SAMPLE), "-o", str(tmp_path / "x.png")])
    assert code == 0 and (tmp_path / "x.png").stat().st_size > 1000 and frozen == 0, code


@pytest.mark.parametrize("entry", ["from blockflow.console import main", "from blockflow.console import core_main as main"])
def test_a_caller_that_goes_on_after_a_command_keeps_a_heap_the_collector_sees(entry):
    """Called with its own argv (a test, a program embedding the command line), the entry point
    is not the process's last act: a frozen heap would keep each command's cyclic garbage for
    good (~1,200 objects a `run` of digits_cnn) and stop a big compile's promotion
    (compiler._promote_if_big skips when anything is frozen)."""
    sample = ROOT / "sample_projects" / "digits_cnn.bflow.json"
    code = (f"import contextlib, gc, io\n{entry}\n"
            f"gc.disable()\n"     # the commands' garbage waits for the collect below
            f"for _ in range(3):\n"
            f"    with contextlib.redirect_stdout(io.StringIO()):\n"
            f"        assert main(['run', {str(sample)!r}]) == 0\n"
            f"print(gc.get_freeze_count(), gc.collect())\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    frozen, collected = map(int, r.stdout.split())
    assert r.returncode == 0 and frozen == 0 and collected > 1000, (r.stdout, r.stderr)
