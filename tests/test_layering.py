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


def test_contracts_cover_the_three_rules_of_design_section_2():
    assert set(contracts()) == {"core", "blocks", "gui"}


def test_repository_keeps_every_layering_contract():
    result = lint_imports(ROOT)
    report = result.stdout + result.stderr
    assert result.returncode == 0, report
    assert set(verdicts(report).values()) == {"KEPT"}, report


# A tiny tree shaped like the real one, where every allowed import is present.
FAKE_TREE = {
    "blockflow/__init__.py": "",
    "blockflow/spec.py": "import numpy\n",
    "blockflow/errors.py": "",
    "blockflow/compiler.py": "import networkx\nfrom . import errors, spec\n",
    "blockflow/registry.py": "from importlib import metadata\nfrom .spec import block\n",
    "blockflow/gui/__init__.py": "",
    "blockflow/gui/scene.py": (
        "from PySide6 import QtWidgets\nimport shiboken6\nimport blockflow_blocks\n"
        "from blockflow_blocks import math_ops\nfrom blockflow import compiler\nfrom . import items\n"
    ),
    "blockflow/gui/items.py": "from PySide6.QtGui import QColor\n",
    "blockflow_blocks/__init__.py": "from blockflow.spec import block\nfrom . import math_ops\n",
    "blockflow_blocks/math_ops.py": "import numpy as np\nfrom blockflow.spec import block\n",
}

BREAKS = {
    "core imports Qt, even inside a function": (
        "blockflow/compiler.py", "def f():\n    from PySide6 import QtCore\n", {"core"}),
    "core imports shiboken6": ("blockflow/errors.py", "import shiboken6\n", {"core"}),
    "core imports the block library": ("blockflow/registry.py", "import blockflow_blocks\n", {"core"}),
    "blocks import more of blockflow than spec": (
        "blockflow_blocks/math_ops.py", "from blockflow.errors import *\n", {"blocks"}),
    "blocks import the package root": ("blockflow_blocks/__init__.py", "import blockflow\n", {"blocks"}),
    "blocks import networkx": ("blockflow_blocks/__init__.py", "import networkx\n", {"blocks"}),
    "blocks import Qt": ("blockflow_blocks/math_ops.py", "from PySide6.QtGui import QColor\n", {"blocks"}),
    "core imports the gui": ("blockflow/compiler.py", "from blockflow.gui import scene\n", {"gui"}),
    "the package root imports the gui": ("blockflow/__init__.py", "import blockflow.gui\n", {"gui"}),
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
