"""``blockflow export torch --train`` (blockflow/export/torch_train.py): train.py gives blockflow's
batches, trains as blockflow's Trainer does (optimizer and graph mode), resumes from checkpoints,
and a 2-process torchrun (gloo, CPU) follows the one-process loss curve."""
from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from blockflow.cli import EXIT_DIAGNOSTICS, EXIT_OK, EXIT_USAGE, main  # noqa: E402
from blockflow.compile.compiler import compile_project  # noqa: E402
from blockflow.export.torch_train import export_training, places, training_setup, write_training_files  # noqa: E402
from blockflow.io.project_io import save_project  # noqa: E402
from blockflow.project import Project  # noqa: E402
from blockflow.run.runtime import run  # noqa: E402

from train_kit import mlp, regression  # noqa: E402

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}


def _write(project, folder, name="model.py"):
    training = export_training(project, model_file=name)
    write_training_files(training, folder / name)
    return training


def _script(folder):
    spec = importlib.util.spec_from_file_location(f"train_{abs(hash(str(folder)))}", folder / "train.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _train(folder, *args, torchrun=0, timeout=240):
    cmd = [sys.executable] + (["-m", "torch.distributed.run", f"--nproc_per_node={torchrun}", "--standalone"]
                              if torchrun else []) + ["train.py", *map(str, args)]
    proc = subprocess.run(cmd, cwd=folder, capture_output=True, text=True, timeout=timeout, env=ENV)
    assert proc.returncode == 0, proc.stderr[-3000:]
    losses = [float(m) for m in re.findall(r"^step \d+ loss (\S+)$", proc.stdout, re.M)]
    return losses, proc.stdout


def _trained(project, steps):
    _program, trainer = training_setup(project)
    history = trainer.train(steps)
    return history.losses, trainer


@pytest.mark.parametrize("seed, shuffle, batch", [(0, True, 32), (7, True, 48), (0, False, 32), (3, True, 0)])
def test_train_py_gives_blockflows_batch_k(seed, shuffle, batch, tmp_path):
    project = mlp(seed=seed, shuffle=shuffle, batch=batch)
    _write(project, tmp_path)
    script = _script(tmp_path)
    args = type("A", (), {"order": "blockflow", "steps": 12, "seed": seed, "data_folder": None})()
    program = compile_project(project)
    got = None
    loader = script.batches(args, 0, 1, 0, torch.device("cpu"))
    for k in range(12):
        got = next(loader)
        r = run(program, fetch=["data:features", "data:labels"], record=False, commit=False, step=k,
                run_seed=seed)
        np.testing.assert_array_equal(got["data_features"].numpy(), r.value("data", "features"))
        np.testing.assert_array_equal(got["data_labels"].numpy(), r.value("data", "labels"))
    assert got is not None


def test_train_py_shards_each_batch_among_processes(tmp_path):
    _write(mlp(batch=32), tmp_path)
    script = _script(tmp_path)
    whole = list(script.BlockflowBatches(200, 6, 0, 0, 0, 1))
    parts = [list(script.BlockflowBatches(200, 6, 0, 0, r, 2)) for r in range(2)]
    for k, rows in enumerate(whole):
        assert sorted(parts[0][k] + parts[1][k]) == sorted(rows) and len(parts[0][k]) == len(rows) // 2


def _file_project(folder, kind):
    """A page reading a CsvDataset (one-hot labels, fitted) or a NumpyDataset (.npz; its labels
    unused) saved in ``folder``; the project is saved and loaded again, as a user's would be."""
    from diagrams import chain
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal((40, 2)), rng.integers(0, 3, 40)
    if kind == "csv":
        (folder / "data.csv").write_text("a,b,label\n\n" + "\n".join(
            f"{a!r},{b!r},{float(c)!r}" for (a, b), c in zip(x.tolist(), y.tolist())) + "\n", encoding="utf-8")
        data = ("data", "CsvDataset", {"path": "data.csv", "classes": 3, "label_format": "onehot", "batch_size": 8},
                None)
    else:
        np.savez(folder / "data.npz", x=x, y=y)
        data = ("data", "NumpyDataset", {"path": "data.npz", "classes": 3, "batch_size": 8}, None)
    specs = [data, ("W", "Variable", {"shape": [2, 3], "initializer": "ones"}, None),
             ("h", "MatMul", {}, {"a": "data:features", "b": "W"})]
    if kind == "csv":
        specs += [("d", "Subtract", {}, {"x": "h", "y": "data:labels"}), ("sq", "Square", {}, {"x": "d"})]
    else:
        specs += [("sq", "Square", {}, {"x": "h"})]
    specs.append(("loss", "Mean", {}, {"input": "sq"}))
    p = chain(*specs)
    p.pages[0].loss = "loss"
    p.metadata["training"] = {"main": {"optimizer": "sgd", "steps": 3, "lr": 0.1}}
    save_project(p, folder / "p.bflow.json")
    from blockflow.io.project_io import load_project
    return load_project(folder / "p.bflow.json"), x, y


def test_a_csv_dataset_is_read_from_its_file_by_train_py(tmp_path):
    project, x, _y = _file_project(tmp_path, "csv")
    out = tmp_path / "out"
    out.mkdir()
    training = _write(project, out)
    assert training.data.source["path"] == "data.csv" and not (out / "model_data.pt").exists()
    np.testing.assert_array_equal(training.data.rows["data_features"], x.astype(np.float32))
    script = _script(out)
    args = type("A", (), {"order": "blockflow", "steps": 5, "seed": 0, "data_folder": str(tmp_path)})()
    loader = script.batches(args, 0, 1, 0, torch.device("cpu"))
    program = compile_project(project)
    for k in range(5):
        got = next(loader)
        r = run(program, fetch=["data:features", "data:labels"], record=False, commit=False, step=k)
        np.testing.assert_array_equal(got["data_features"].numpy(), r.value("data", "features"))
        np.testing.assert_array_equal(got["data_labels"].numpy(), r.value("data", "labels"))
    losses, _ = _train(out, "--steps", 3)
    expect, _ = _trained(project, 3)
    np.testing.assert_allclose(losses, expect, rtol=2e-6)
    moved = tmp_path / "elsewhere"
    moved.mkdir()
    (tmp_path / "data.csv").rename(moved / "data.csv")
    again, _ = _train(out, "--steps", 3, "--data-folder", moved)
    assert again == losses


def test_a_numpy_dataset_is_read_from_its_file_by_train_py(tmp_path):
    project, _x, _y = _file_project(tmp_path, "npz")
    out = tmp_path / "out"
    out.mkdir()
    training = _write(project, out)
    assert training.data.source["block"] == "NumpyDataset" and list(training.data.ports.values()) == ["features", "labels"]
    script = _script(out)
    args = type("A", (), {"order": "blockflow", "steps": 4, "seed": 0, "data_folder": str(tmp_path)})()
    program = compile_project(project)
    got = list(script.batches(args, 0, 1, 0, torch.device("cpu")))
    assert len(got) == 4
    for k, batch in enumerate(got):
        r = run(program, fetch=["data:features"], record=False, commit=False, step=k)
        np.testing.assert_array_equal(batch["data_features"].numpy(), r.value("data", "features"))
    losses, _ = _train(out, "--steps", 3)
    np.testing.assert_allclose(losses, _trained(project, 3)[0], rtol=2e-6)


@pytest.mark.parametrize("optimizer, seed", [("adam", 3), ("momentum", 0), ("rmsprop", 0), ("adagrad", 5),
                                             ("sgd", 0)])
def test_three_steps_of_train_py_equal_blockflows_trainer(optimizer, seed, tmp_path):
    project = mlp(optimizer=optimizer, seed=seed)
    training = _write(project, tmp_path)
    losses, _ = _train(tmp_path, "--steps", 3, "--checkpoint", "ck.pt")
    expect, trainer = _trained(project, 3)
    np.testing.assert_allclose(losses, expect, rtol=2e-6)
    saved = torch.load(tmp_path / "ck.pt", weights_only=True)
    assert saved["step"] == 3
    for key, (node, what) in places(training.model).items():
        np.testing.assert_allclose(saved["model"][key].numpy(), trainer.values[node], rtol=1e-5, atol=1e-7,
                                   err_msg=node)


def test_a_page_that_trains_itself_runs_forward_only(tmp_path):
    project = regression("ApplyAdam")
    training = _write(project, tmp_path)
    assert training.settings["mode"] == "graph"
    losses, _ = _train(tmp_path, "--steps", 3, "--checkpoint", "ck.pt")
    expect, trainer = _trained(project, 3)
    np.testing.assert_allclose(losses, expect, rtol=1e-12)
    saved = torch.load(tmp_path / "ck.pt", weights_only=True)
    updates = trainer.state_updates()
    for key, (node, what) in places(training.model).items():
        np.testing.assert_allclose(saved["model"][key].numpy(), updates[node][what], rtol=1e-12, err_msg=key)


def test_a_checkpoint_resumes_where_it_stopped(tmp_path):
    _write(mlp(optimizer="adam"), tmp_path)
    straight, _ = _train(tmp_path, "--steps", 6)
    first, _ = _train(tmp_path, "--steps", 3, "--checkpoint", "ck.pt")
    rest, out = _train(tmp_path, "--steps", 6, "--checkpoint", "ck.pt")
    assert "resumed from ck.pt at step 3" in out
    assert first + rest == straight
    assert torch.load(tmp_path / "ck.pt", weights_only=True)["losses"] == straight


def test_torchrun_two_processes_follow_the_one_process_curve(tmp_path):
    _write(mlp(optimizer="adam", batch=32, steps=8), tmp_path)
    one, _ = _train(tmp_path)
    two, out = _train(tmp_path, torchrun=2)
    assert len(one) == len(two) == 8 and "on 2 process(es)" in out
    np.testing.assert_allclose(two, one, rtol=1e-5)
    assert two[-1] < two[0]


def test_torchrun_refuses_a_page_that_trains_itself(tmp_path):
    _write(regression("ApplyGradientDescent"), tmp_path)
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--standalone",
                           "train.py", "--steps", "2"], cwd=tmp_path, capture_output=True, text=True, timeout=240,
                          env=ENV)
    assert proc.returncode != 0 and "run one process" in proc.stderr


def test_cli_export_train_writes_the_four_files(tmp_path, capsys):
    save_project(mlp(), tmp_path / "p.bflow.json")
    out = tmp_path / "out"
    out.mkdir()
    code = main(["export", "torch", str(tmp_path / "p.bflow.json"), "-o", str(out / "net.py"), "--train"])
    printed = capsys.readouterr().out
    assert code == EXIT_OK
    assert {p.name for p in out.iterdir()} == {"net.py", "net.pt", "net_data.pt", "train.py"}
    assert "train.py" in printed
    losses, _ = _train(out, "--steps", 2)
    assert len(losses) == 2


def test_cli_export_train_refusals(tmp_path, capsys):
    save_project(mlp(), tmp_path / "p.bflow.json")
    code = main(["export", "torch", str(tmp_path / "p.bflow.json"), "-o", str(tmp_path / "m.py"), "--train",
                 "--output-node", "sq"])
    assert code == EXIT_USAGE and "--output-node" in capsys.readouterr().err
    code = main(["export", "torch", str(tmp_path / "p.bflow.json"), "-o", str(tmp_path / "train.py"), "--train"])
    assert code == EXIT_USAGE and "train.py" in capsys.readouterr().err
    p = mlp()
    p.pages[0].loss = None
    save_project(p, tmp_path / "q.bflow.json")
    code = main(["export", "torch", str(tmp_path / "q.bflow.json"), "-o", str(tmp_path / "m.py"), "--train"])
    assert code == EXIT_DIAGNOSTICS and "marks no loss" in capsys.readouterr().err
    assert not (tmp_path / "m.py").exists()


def test_hostile_names_reach_train_py_only_as_literals(tmp_path):
    project = regression()
    page = project.pages[0]
    page.name = 'x"""; import os; os.system("echo pwned") #\n'
    project.metadata["training"] = {page.name: {"optimizer": "sgd", "steps": 2, "lr": 0.1}}
    name = "we'ird \"model\".py"
    training = _write(project, tmp_path, name)
    assert "pwned" not in training.script.split('"""', 2)[2]
    losses, out = _train(tmp_path, "--steps", 2)
    assert len(losses) == 2 and "pwned" not in out


def test_no_saved_feed_is_refused_by_name(tmp_path):
    project = regression()
    del project.pages[0].feeds["y"]
    from blockflow.export.torch_module import ExportError
    with pytest.raises(ExportError, match="no saved feed") as err:
        export_training(project)
    assert [p.rpartition("/")[2] for p in err.value.problems] == ["y"]


def test_empty_project_is_refused(tmp_path):
    project = Project()
    project.add_page("main")
    from blockflow.export.torch_module import ExportError
    with pytest.raises(ExportError):
        export_training(project)


def test_order_torch_uses_a_distributed_sampler(tmp_path):
    _write(mlp(optimizer="adam", batch=32, steps=12), tmp_path)
    script = (tmp_path / "train.py").read_text()
    assert "DistributedSampler(part, num_replicas=world, rank=rank" in script
    ours, _ = _train(tmp_path)
    one, _ = _train(tmp_path, "--order", "torch")
    two, out = _train(tmp_path, "--order", "torch", torchrun=2)
    assert len(one) == len(two) == 12 and "on 2 process(es)" in out
    assert one != ours   # torch's own order: other batches than blockflow's
    assert all(np.isfinite(two)) and np.mean(two[-4:]) < np.mean(two[:4])
