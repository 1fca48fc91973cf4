"""The layering (README, Development: the import-linter contracts in pyproject.toml).

Runs the real check on the repository (so plain `pytest` catches a layering break too), and runs
the same contracts on a small fake tree to show that each rule really fails when broken.
"""
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT = [sys.executable, "-c", "from importlinter.cli import lint_imports_command; lint_imports_command()"]


def contracts():
    """Contract id -> name, as declared in pyproject.toml."""
    with open(ROOT / "pyproject.toml", "rb") as f:
        config = tomllib.load(f)["tool"]["importlinter"]
    return {c["id"]: c["name"] for c in config["contracts"]}


def lint_imports(cwd, extra_path=None):
    env = dict(os.environ, COLUMNS="10000", NO_COLOR="1")
    if extra_path:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(extra_path), env.get("PYTHONPATH")]))
    return subprocess.run([*LINT, "--no-cache", "--no-logo"], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def verdicts(output):
    """Contract id -> "KEPT" or "BROKEN", read from lint-imports' report."""
    found = {}
    for cid, name in contracts().items():
        m = re.search(re.escape(name) + r" (KEPT|BROKEN)", output)
        assert m, f"no verdict for contract {cid!r} in:\n{output}"
        found[cid] = m.group(1)
    return found


def test_contracts_cover_the_rules_of_docs_architecture():
    assert set(contracts()) == {"core", "blocks", "gui", "core-layers", "gui-layers"}


def layer_modules(contract_id):
    """The module names a layers contract lists (siblings split out of "a | b" and "a : b")."""
    with open(ROOT / "pyproject.toml", "rb") as f:
        config = tomllib.load(f)["tool"]["importlinter"]
    (contract,) = [c for c in config["contracts"] if c["id"] == contract_id]
    return {name.strip() for layer in contract["layers"] for name in re.split(r"[|:]", layer)}


@pytest.mark.parametrize("package,contract_id", [("blockflow", "core-layers"), ("blockflow/gui", "gui-layers")])
def test_every_module_and_folder_has_a_layer(package, contract_id):
    """A new module or folder must be given its place in the layers, or the contracts miss it."""
    listed = layer_modules(contract_id)
    here = ROOT / package
    names = {p.stem for p in here.glob("*.py") if p.stem not in ("__init__", "__main__")}
    names |= {p.parent.name for p in here.glob("*/__init__.py")}
    dotted = package.replace("/", ".")
    missing = sorted(f"{dotted}.{n}" for n in names if f"{dotted}.{n}" not in listed)
    assert not missing, f"not in any layer of contract {contract_id!r}: {missing}"


def test_repository_keeps_every_layering_contract():
    result = lint_imports(ROOT)
    report = result.stdout + result.stderr
    assert result.returncode == 0, report
    assert set(verdicts(report).values()) == {"KEPT"}, report


# A tiny tree shaped like the real one, where every allowed import is present.
BASE = ("spec", "errors", "equality", "project", "page_layout", "page_blocks", "composite", "registry", "entrypoints", "datafiles", "npz_archive", "textsafe", "budget", "ownfiles", "arrayout",
        "variables", "feeds", "optional")
FAKE_TREE = {
    "blockflow/__init__.py": "",
    **{f"blockflow/{name}.py": "" for name in BASE},
    "blockflow/spec.py": "import numpy\n",
    "blockflow/project.py": "from . import errors, spec\n",
    "blockflow/registry.py": "from importlib import metadata\nfrom .spec import block\n",
    "blockflow/io/__init__.py": "",
    "blockflow/io/project_io.py": "from blockflow import errors, project\n",
    "blockflow/compile/__init__.py": "",
    "blockflow/compile/compiler.py": "import networkx\nfrom blockflow import errors, spec\nfrom blockflow.io import project_io\n",
    "blockflow/run/__init__.py": "",
    "blockflow/run/runtime.py": "from blockflow.compile import compiler\n",
    "blockflow/present/__init__.py": "",
    "blockflow/present/gradview.py": "from blockflow.compile import compiler\n",
    "blockflow/export/__init__.py": "",
    "blockflow/export/torch_module.py": "from blockflow.run import settings\n",
    "blockflow/importing/__init__.py": "",
    "blockflow/importing/onnx_import.py": "from blockflow.compile import compiler\n",
    "blockflow/run/settings.py": "",
    "blockflow/cli.py": "from blockflow.run import runtime\nfrom blockflow.present import gradview\nfrom blockflow.export import torch_module\n",
    "blockflow/gui/__init__.py": "",
    "blockflow/gui/app.py": "from blockflow import cli\nfrom blockflow.gui import main_window\n",
    "blockflow/console.py": "from blockflow.gui import app\n",
    "blockflow/gui/main_window.py": "from blockflow.gui.canvas import scene\nfrom blockflow.gui.panels import palette\n",
    "blockflow/gui/canvas/__init__.py": "",
    "blockflow/gui/canvas/scene.py": (
        "from PySide6 import QtWidgets\nimport shiboken6\nimport blockflow_blocks\n"
        "from blockflow_blocks import math_ops\nfrom blockflow.compile import compiler\nfrom . import items\n"
        "from blockflow.gui.session import runner\nfrom blockflow.gui.document import document\n"
        "from blockflow.gui.common import theme\nfrom blockflow.present import gradview\n"
    ),
    "blockflow/gui/canvas/items.py": "from PySide6.QtGui import QColor\n",
    "blockflow/gui/panels/__init__.py": "",
    "blockflow/gui/panels/palette.py": "from blockflow.gui.session import runner\nfrom blockflow.gui.common import theme\n",
    "blockflow/gui/session/__init__.py": "",
    "blockflow/gui/session/runner.py": "from blockflow.gui.document import document\nfrom blockflow.run import runtime\n",
    "blockflow/gui/document/__init__.py": "",
    "blockflow/gui/document/document.py": "from blockflow.gui.common import theme\nfrom blockflow.io import project_io\n",
    "blockflow/gui/common/__init__.py": "",
    "blockflow/gui/common/theme.py": "from PySide6.QtGui import QColor\n",
    "blockflow_blocks/__init__.py": "from blockflow.spec import block\nfrom . import math_ops\n",
    "blockflow_blocks/math_ops.py": "import numpy as np\nfrom blockflow.spec import block\n",
}

BREAKS = {
    "core imports Qt, even inside a function": (
        "blockflow/compile/compiler.py", "def f():\n    from PySide6 import QtCore\n", {"core"}),
    "core imports shiboken6": ("blockflow/errors.py", "import shiboken6\n", {"core"}),
    "core imports the block library": ("blockflow/registry.py", "import blockflow_blocks\n", {"core"}),
    "blocks import more of blockflow than spec": (
        "blockflow_blocks/math_ops.py", "from blockflow.errors import *\n", {"blocks"}),
    "blocks import the package root": ("blockflow_blocks/__init__.py", "import blockflow\n", {"blocks"}),
    "blocks import networkx": ("blockflow_blocks/__init__.py", "import networkx\n", {"blocks"}),
    "blocks import Qt": ("blockflow_blocks/math_ops.py", "from PySide6.QtGui import QColor\n", {"blocks"}),
    "core imports the gui": (
        "blockflow/compile/compiler.py", "from blockflow.gui.common import theme\n", {"gui", "core-layers"}),
    "the package root imports the gui": ("blockflow/__init__.py", "import blockflow.gui\n", {"gui"}),
    "cli imports the console script's entry": ("blockflow/cli.py", "import blockflow.console\n", {"core-layers"}),
    # core layers: gui > cli > export | importing > run | present > compile > io > base
    "run imports export": ("blockflow/run/runtime.py", "from blockflow.export import torch_module\n", {"core-layers"}),
    "the base imports io": ("blockflow/project.py", "from blockflow.io import project_io\n", {"core-layers"}),
    "the base imports compile": ("blockflow/datafiles.py", "import blockflow.compile.compiler\n", {"core-layers"}),
    "io imports compile": ("blockflow/io/project_io.py", "from blockflow.compile import compiler\n", {"core-layers"}),
    "compile imports run, inside a function": (
        "blockflow/compile/compiler.py", "def f():\n    from blockflow.run import runtime\n", {"core-layers"}),
    "run imports present (siblings)": (
        "blockflow/run/runtime.py", "from blockflow.present import gradview\n", {"core-layers"}),
    "present imports run (siblings)": (
        "blockflow/present/gradview.py", "from blockflow.run import runtime\n", {"core-layers"}),
    "export imports importing (siblings)": (
        "blockflow/export/torch_module.py", "from blockflow.importing import onnx_import\n", {"core-layers"}),
    "compile imports importing": (
        "blockflow/compile/compiler.py", "from blockflow.importing import onnx_import\n", {"core-layers"}),
    "run imports cli": ("blockflow/run/runtime.py", "from blockflow import cli\n", {"core-layers"}),
    "cli imports the gui": ("blockflow/cli.py", "from blockflow.gui import app\n", {"gui", "core-layers"}),
    # gui layers: app : main_window > canvas | panels > session > document > common
    "canvas imports the main window": (
        "blockflow/gui/canvas/items.py", "from blockflow.gui import main_window\n", {"gui-layers"}),
    "canvas imports panels (siblings)": (
        "blockflow/gui/canvas/items.py", "from blockflow.gui.panels import palette\n", {"gui-layers"}),
    "panels import canvas (siblings)": (
        "blockflow/gui/panels/palette.py", "from blockflow.gui.canvas import items\n", {"gui-layers"}),
    "session imports panels": (
        "blockflow/gui/session/runner.py", "from blockflow.gui.panels import palette\n", {"gui-layers"}),
    "document imports session, inside a function": (
        "blockflow/gui/document/document.py", "def f():\n    from blockflow.gui.session import runner\n",
        {"gui-layers"}),
    "session imports canvas": (
        "blockflow/gui/session/runner.py", "from blockflow.gui.canvas import items\n", {"gui-layers"}),
    "document imports canvas": (
        "blockflow/gui/document/document.py", "from blockflow.gui.canvas import scene\n", {"gui-layers"}),
    "document imports panels": (
        "blockflow/gui/document/document.py", "from blockflow.gui.panels import palette\n", {"gui-layers"}),
    "panels import the shell": (
        "blockflow/gui/panels/palette.py", "import blockflow.gui.main_window\n", {"gui-layers"}),
    "common imports document": (
        "blockflow/gui/common/theme.py", "from blockflow.gui.document import document\n", {"gui-layers"}),
}


def write_fake_tree(base, extra=None):
    shutil.copy(ROOT / "pyproject.toml", base / "pyproject.toml")
    for rel, text in FAKE_TREE.items():
        path = base / "src" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + (extra[1] if extra and extra[0] == rel else ""))


def test_contracts_allow_what_design_allows(tmp_path):
    write_fake_tree(tmp_path)
    result = lint_imports(tmp_path, tmp_path / "src")
    report = result.stdout + result.stderr
    assert result.returncode == 0, report
    assert set(verdicts(report).values()) == {"KEPT"}, report


@pytest.mark.parametrize("case", list(BREAKS))
def test_contracts_catch_a_layering_break(tmp_path, case):
    rel, line, broken = BREAKS[case]
    write_fake_tree(tmp_path, (rel, line))
    result = lint_imports(tmp_path, tmp_path / "src")
    report = result.stdout + result.stderr
    assert result.returncode != 0, report
    assert {cid for cid, v in verdicts(report).items() if v == "BROKEN"} == broken, report
