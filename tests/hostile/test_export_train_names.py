"""The name of the module ``export torch --train`` writes beside train.py: Python puts train.py's
folder first on sys.path, so a module named like one torch or numpy imports (typing.py,
inspect.py, enum.py: any name the user gives with -o) was imported in its place and train.py died
in ``import torch`` with a circular-import traceback. train.py loads the module by its path, so
it now takes its folder off sys.path first (docs/export.md, "Training")."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")

from blockflow.cli import EXIT_OK, main  # noqa: E402
from blockflow.io.project_io import save_project  # noqa: E402

from train_kit import mlp  # noqa: E402

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}


@pytest.mark.parametrize("name", ["typing", "inspect"])
def test_a_module_named_like_one_torch_imports_still_trains(tmp_path, capsys, name):
    save_project(mlp(steps=2), tmp_path / "p.bflow.json")
    out = tmp_path / "out"
    out.mkdir()
    code = main(["export", "torch", str(tmp_path / "p.bflow.json"), "-o", str(out / f"{name}.py"), "--train"])
    assert code == EXIT_OK, capsys.readouterr().err
    for cwd, script in ((out, "train.py"), (tmp_path, str(out / "train.py"))):   # from its folder or not
        proc = subprocess.run([sys.executable, script, "--steps", "2"], cwd=cwd, capture_output=True,
                              text=True, timeout=240, env=ENV)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "step 1 loss" in proc.stdout and "Traceback" not in proc.stderr
