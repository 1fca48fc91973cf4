"""Every sample page with a loss trains on PyTorch as on blockflow: three steps of the TorchTrainer
equal the Trainer's (the project's recommended settings), and moons_classifier's train.py under a
2-process torchrun follows the one-process curve. A page with a block that has no torch lowering
yet is skipped naming the blocks it waits for. torch's generator draws other numbers than
blockflow's streams, so on a page with a random block (the RBM's sampler, the attention sample's
tokens) the module's ``_draw_*`` functions are made to give blockflow's draws of that block at
each step (docs/export.md, "Random blocks"): everything else is torch's."""
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


def _replay_each_step(trainer, st, run_seed) -> None:
    """Make the trainer's module draw what blockflow's block ``st`` draws at the trainer's step
    (its stream: the block's id and seed, the step, the run seed), through the numpy calls the
    block makes (tests/test_export_torch_nn.py replays one run the same way)."""
    from blockflow.run.runtime import stream_generator, stream_hash

    namespace = trainer.model.forward.__func__.__globals__
    base = stream_hash(st.node)

    def rng():
        return stream_generator(base, int(st.attrs.get("seed", 0)), trainer.step_index, run_seed)

    def np_dtype(dtype):
        return torch.empty((), dtype=dtype).numpy().dtype

    def ints(lo, hi):
        return [np.asarray(v.numpy() if isinstance(v, torch.Tensor) else v) for v in (lo, hi)]

    namespace["_draw_uniform"] = lambda g, shape, dtype: torch.from_numpy(
        np.asarray(rng().random(tuple(shape), dtype=np_dtype(dtype))))
    namespace["_draw_integers"] = lambda g, lo, hi, shape, dtype: torch.from_numpy(np.asarray(
        rng().integers(*ints(lo, hi), size=tuple(shape), dtype=np_dtype(dtype))))
    namespace["_draw_normal"] = lambda g, shape, dtype: torch.from_numpy(
        np.asarray(rng().standard_normal(tuple(shape), dtype=np_dtype(dtype))))


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
    program2, _ = training_setup(project, page, config=config)
    try:
        theirs = TorchTrainer(program2, config, project=project, device="cpu")
    except ExportError as exc:
        _unlowered(exc)
    random_blocks = [st for st in program.steps if "rng" in st.spec.forward_context and not st.spec.is_dataset]
    if random_blocks:
        assert len(random_blocks) == 1, "replay knows one random block per page"
        _replay_each_step(theirs, random_blocks[0], config.seed)
    # atol: the RBM's loss (~1e-3) is a difference of two free energies of ~11, so a float32
    # loss keeps only ~1e-6 of it; the Variables, compared below, are what the steps must agree on
    np.testing.assert_allclose(theirs.train(3).losses, trainer.train(3).losses, rtol=1e-5, atol=1e-5)
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
