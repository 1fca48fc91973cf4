"""Ctrl-C while the ``blockflow`` command is still loading its modules.

The console script used to import blockflow.gui.app (and with it numpy and the command line) at
its top, outside every handler: a Ctrl-C in those 0.1-0.3 s printed a traceback from whichever
module was loading. The entry point is now blockflow.console, which loads them inside the guard.
A real SIGINT is sent at a chosen import (the child signals itself from an import hook), so the
moment is exact, not a race with a timer.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_projects" / "stable_softmax.bflow.json"

CHILD = textwrap.dedent("""
    import os, signal, sys
    from importlib.abc import MetaPathFinder

    class SignalAt(MetaPathFinder):
        # Sends SIGINT to this process when module {module!r} is first looked for.
        def find_spec(self, name, path=None, target=None):
            if name == {module!r}:
                sys.meta_path.remove(self)
                os.kill(os.getpid(), signal.SIGINT)
            return None

    sys.meta_path.insert(0, SignalAt())
    {entry}
    sys.argv = ["blockflow", *{args!r}]
    sys.exit(main())
""")

CONSOLE = "from blockflow.console import main"
OLD_ENTRY = "from blockflow.gui.app import main"


def _start(module: str, args: list[str], entry: str = CONSOLE) -> subprocess.CompletedProcess:
    code = CHILD.format(module=module, entry=entry, args=args)
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=120)


# numpy and blockflow.textsafe load before any handler of the command line; blockflow.cli.parser
# before its command's try; blockflow.compile.compiler inside the command (its own handler)
@pytest.mark.parametrize("module", ["numpy", "blockflow.textsafe", "blockflow.cli.parser",
                                    "blockflow.compile.compiler"])
def test_ctrl_c_while_the_command_loads_is_an_interruption_not_a_traceback(module):
    r = _start(module, ["run", str(SAMPLE)])
    assert r.stderr == "blockflow: interrupted\n", r.stderr
    assert r.returncode == 130
    assert r.stdout == ""


def test_ctrl_c_while_the_editor_loads_is_an_interruption():
    # no display: the editor's path renders a picture; interrupted before it writes one
    r = _start("blockflow.io.project_io", [str(SAMPLE)])
    assert r.stderr == "blockflow: interrupted\n", r.stderr
    assert r.returncode == 130


def test_the_old_entry_point_printed_a_traceback():
    # what the console script did before blockflow.console: the guard is what makes the difference
    r = _start("numpy", ["run", str(SAMPLE)], entry=OLD_ENTRY)
    assert "Traceback" in r.stderr and "KeyboardInterrupt" in r.stderr


def test_the_interrupted_code_is_the_command_lines():
    from blockflow import console
    from blockflow.cli.exits import EXIT_INTERRUPTED

    assert console.INTERRUPTED == EXIT_INTERRUPTED == 128 + signal.SIGINT


def test_an_uninterrupted_start_runs_the_command():
    r = _start("no.such.module", ["run", str(SAMPLE)])
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("page 'stable_softmax': 8 blocks, gradients of stable_softmax/Sum_1:output")


@pytest.mark.parametrize("module", ["numpy", "blockflow.cli.parser"])
def test_python_m_blockflow_loads_its_modules_inside_the_guard_too(module):
    # docs/cli.md: `python -m blockflow` is the same command (its core); its __main__ imported
    # blockflow.cli at its top, outside every handler: a traceback
    code = CHILD.format(module=module, entry="", args=["run", str(SAMPLE)]).replace(
        "sys.exit(main())", "import runpy\nrunpy.run_module('blockflow', run_name='__main__', alter_sys=True)")
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env,
                       timeout=120)
    assert r.stderr == "blockflow: interrupted\n", r.stderr
    assert r.returncode == 130
    assert r.stdout == ""


def test_python_m_blockflow_runs_the_command():
    r = subprocess.run([sys.executable, "-m", "blockflow", "run", str(SAMPLE)], capture_output=True, text=True,
                       cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("page 'stable_softmax': 8 blocks, gradients of stable_softmax/Sum_1:output")
