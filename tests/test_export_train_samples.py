"""Every sample page with a loss trains on PyTorch as on blockflow: three steps of the TorchTrainer
equal the Trainer's (the project's recommended settings), and moons_classifier's train.py under a
2-process torchrun follows the one-process curve. A page with a block that has no torch lowering
yet is skipped naming the blocks it waits for; a page with random blocks is not compared (torch's
generator draws other numbers than blockflow's streams)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from blockflow.export.torch_engine import TorchTrainer  # noqa: E402
from blockflow.export.torch_module import ExportError  # noqa: E402
from blockflow.export.torch_train import export_training, training_setup, write_training_files  # noqa: E402
from blockflow.io.project_io import load_project  # noqa: E402
from blockflow.run.training import TrainConfig  # noqa: E402

SAMPLES = Path(__file__).resolve().parent.parent / "sample_projects"
PAGES = [pytest.param(path.name, page.name, id=f"{path.name.split('.')[0]}-{page.name}")
         for path in sorted(SAMPLES.glob("*.bflow.json")) for page in load_project(path).pages if page.loss]


def _unlowered(exc: ExportError):
    if "no faithful PyTorch lowering" in str(exc):
        pytest.skip(f"waits for the torch lowering of: {str(exc).rpartition(': ')[2]}")
    raise exc


def _has_random_blocks(program) -> bool:
    return any("rng" in st.spec.forward_context for st in program.steps)


@pytest.mark.parametrize("sample, page", PAGES)
def test_three_training_steps_equal_blockflows(sample, page):
    project = load_project(SAMPLES / sample)
    try:
        program, trainer = training_setup(project, page)
    except ExportError as exc:     # blockflow's own Trainer refuses it (nothing to train)
        assert "cannot be trained" in str(exc)
        pytest.skip(str(exc))
    config = TrainConfig(**{**trainer.config.__dict__, "steps": 3})
    program, trainer = training_setup(project, page, config=config)
    if _has_random_blocks(program):
        pytest.skip("random blocks: torch's generator draws other numbers")
    program2, _ = training_setup(project, page, config=config)
    try:
        theirs = TorchTrainer(program2, config, project=project, device="cpu")
    except ExportError as exc:
        _unlowered(exc)
    np.testing.assert_allclose(theirs.train(3).losses, trainer.train(3).losses, rtol=1e-5, atol=1e-7)
    ours_state, theirs_state = trainer.state_updates(), theirs.state_updates()
    for node, changes in ours_state.items():
        for key, value in changes.items():
            np.testing.assert_allclose(theirs_state[node][key], value, rtol=1e-4, atol=1e-6, err_msg=f"{node} {key}")


def test_moons_classifier_under_torchrun_follows_one_process(tmp_path):
    project = load_project(SAMPLES / "moons_classifier.bflow.json")
    try:
        training = export_training(project, model_file="model.py")
    except ExportError as exc:
        _unlowered(exc)
    write_training_files(training, tmp_path / "model.py")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}

    def curve(*prefix):
        proc = subprocess.run([sys.executable, *prefix, "train.py", "--steps", "10"], cwd=tmp_path,
                              capture_output=True, text=True, timeout=300, env=env)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return [float(m) for m in re.findall(r"^step \d+ loss (\S+)$", proc.stdout, re.M)]

    one = curve()
    two = curve("-m", "torch.distributed.run", "--nproc_per_node=2", "--standalone")
    assert len(one) == len(two) == 10
    np.testing.assert_allclose(two, one, rtol=1e-4)
