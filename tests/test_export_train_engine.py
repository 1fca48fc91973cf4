"""The PyTorch engine (blockflow/export/torch_engine.py): TorchTrainer trains as blockflow's Trainer
does, with its API (steps, history, stop, evaluate, state_updates), and ``blockflow train --engine
torch``."""
from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from blockflow.cli import EXIT_DIAGNOSTICS, EXIT_OK, main  # noqa: E402
from blockflow.errors import RunError  # noqa: E402
from blockflow.export.torch_engine import TorchTrainer  # noqa: E402
from blockflow.export.torch_module import ExportError  # noqa: E402
from blockflow.export.torch_train import training_setup  # noqa: E402
from blockflow.io.project_io import load_project, save_project  # noqa: E402
from blockflow.run.training import TrainConfig  # noqa: E402

from train_kit import mlp, regression  # noqa: E402

OPTIMIZERS = ["sgd", "momentum", "adam", "rmsprop", "adagrad"]


def _pair(project, config=None):
    """(blockflow's Trainer, the TorchTrainer) on the same page and settings."""
    program, trainer = training_setup(project, config=config)
    program2, _ = training_setup(project, config=config)
    return trainer, TorchTrainer(program2, trainer.config, project=project, device="cpu")


def _assert_same(a, b, rtol):
    ua, ub = a.state_updates(), b.state_updates()
    assert ua.keys() == ub.keys()
    for node in ua:
        assert ua[node].keys() == ub[node].keys(), node
        for key in ua[node]:
            np.testing.assert_allclose(ub[node][key], ua[node][key], rtol=rtol, atol=rtol * 1e-2,
                                       err_msg=f"{node} {key}")
            assert ub[node][key].dtype == ua[node][key].dtype


@pytest.mark.parametrize("optimizer", OPTIMIZERS)
def test_three_steps_equal_the_trainer_in_float64(optimizer):
    ours, theirs = _pair(regression(optimizer=optimizer))
    assert theirs.mode == ours.mode == "optimizer"
    np.testing.assert_allclose(theirs.train(3).losses, ours.train(3).losses, rtol=1e-13)
    _assert_same(ours, theirs, 1e-13)


@pytest.mark.parametrize("update", ["ApplyGradientDescent", "ApplyAdam", "ApplyFtrl"])
def test_graph_mode_equals_the_trainer_with_its_slots(update):
    ours, theirs = _pair(regression(update))
    assert theirs.mode == "graph"
    np.testing.assert_allclose(theirs.train(3).losses, ours.train(3).losses, rtol=1e-13)
    _assert_same(ours, theirs, 1e-13)


@pytest.mark.parametrize("optimizer, seed", [("adam", 0), ("rmsprop", 9)])
def test_a_dataset_page_follows_the_trainer(optimizer, seed):
    ours, theirs = _pair(mlp(optimizer=optimizer, seed=seed))
    np.testing.assert_allclose(theirs.train(8).losses, ours.train(8).losses, rtol=1e-5)
    _assert_same(ours, theirs, 1e-4)
    np.testing.assert_allclose(theirs.evaluate()["loss"], ours.evaluate()["loss"], rtol=1e-5)


def test_it_is_driven_as_the_trainer_is():
    project = mlp(steps=10)
    program, _ = training_setup(project)
    config = TrainConfig(steps=10, optimizer="adam", hyper={"lr": 0.05}, eval_every=4)
    trainer = TorchTrainer(program, config, project=project, device="cpu")
    seen, evaluated = [], []
    history = trainer.train(callback=lambda rec, t: seen.append((rec.step, t is trainer)),
                            should_stop=lambda: len(seen) >= 6, on_evaluate=lambda k, v: evaluated.append(k))
    assert history.stopped and [s for s, _ in seen] == list(range(6)) and all(same for _, same in seen)
    assert evaluated == [3] and history.evaluations[0][1].keys() == {"loss"}
    assert trainer.step_index == 6 and history.seconds > 0
    more = trainer.train(2)
    assert [r.step for r in more.steps] == [6, 7]
    page = project.pages[0]
    before = np.array(page.nodes["W1"].state.get("value", np.zeros(1)))
    page.apply_state(trainer.state_updates())
    after = np.asarray(page.nodes["W1"].state["value"])
    assert after.shape == (1, 8) and not np.array_equal(before.reshape(-1)[:1], after.reshape(-1)[:1])
    np.testing.assert_array_equal(after, trainer.values["W1"])


def test_a_diverging_step_keeps_nothing():
    project = regression(optimizer="sgd")
    program, _ = training_setup(project)
    trainer = TorchTrainer(program, TrainConfig(steps=5, optimizer="sgd", hyper={"lr": 1e6}), project=project,
                           device="cpu")
    kept = None
    with pytest.raises(RunError, match="training step") as err:
        for _ in range(200):
            kept = {k: v.copy() for k, v in trainer.values.items()}
            trainer.step()
    assert "NaN or Inf" in str(err.value) or "loss" in str(err.value)
    for node, value in trainer.values.items():
        np.testing.assert_array_equal(value, kept[node])


def test_metrics_are_recorded_as_the_trainer_records_them():
    config = TrainConfig(steps=3, optimizer="sgd", hyper={"lr": 0.1}, metrics=("loss",))
    ours, theirs = _pair(regression(optimizer="sgd"), config)
    a, b = ours.train(3), theirs.train(3)
    assert theirs.metric_keys == ours.metric_keys == ["loss:output"]
    np.testing.assert_allclose(b.metric("loss:output"), a.metric("loss:output"), rtol=1e-13)
    np.testing.assert_allclose(b.metric("loss:output"), b.losses, rtol=0)


@pytest.mark.parametrize("update", [None, "ApplyGradientDescent"])
def test_a_variable_as_metric_is_its_value_before_the_step(update):
    config = TrainConfig(steps=3, optimizer="sgd", hyper={"lr": 0.1}, metrics=("W", "b"))
    ours, theirs = _pair(regression(update, optimizer="sgd"), config)
    a, b = ours.train(3), theirs.train(3)
    for m in ("W:ref", "b:ref"):
        np.testing.assert_allclose(b.metric(m), a.metric(m), rtol=1e-13, err_msg=m)
    assert a.metric("W:ref")[0] != a.metric("W:ref")[1]


def test_unknown_devices_are_refused():
    project = regression()
    program, _ = training_setup(project)
    with pytest.raises(ValueError, match="cpu or cuda"):
        TorchTrainer(program, TrainConfig(steps=1), project=project, device="nonsense")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            TorchTrainer(program, TrainConfig(steps=1), project=project, device="cuda")


def test_cli_train_engine_torch(tmp_path, capsys):
    save_project(mlp(steps=12), tmp_path / "p.bflow.json")
    code = main(["train", str(tmp_path / "p.bflow.json"), "-q", "--json"])
    ours = json.loads(capsys.readouterr().out)
    code2 = main(["train", str(tmp_path / "p.bflow.json"), "-q", "--json", "--engine", "torch",
                  "--save", str(tmp_path / "t.bflow.json")])
    theirs = json.loads(capsys.readouterr().out)
    assert code == code2 == EXIT_OK and theirs["engine"] == "torch" and ours["engine"] == "blockflow"
    np.testing.assert_allclose(theirs["loss"], ours["loss"], rtol=1e-5)
    saved = load_project(tmp_path / "t.bflow.json").pages[0].nodes["b2"].state["value"]
    assert np.asarray(saved).shape == (1,) and np.any(np.asarray(saved) != 0)
    code = main(["train", str(tmp_path / "p.bflow.json"), "-q", "--engine", "torch"])
    out = capsys.readouterr().out
    assert code == EXIT_OK and "on PyTorch (cpu)" in out


def _tanh_page():
    from diagrams import chain
    p = chain(("x", "Placeholder", {"shape": [3]}, None), ("W", "Variable", {"shape": [3]}, None),
              ("m", "Multiply", {}, {"x": "x", "y": "W"}), ("odd", "Tanh", {}, {"x": "m"}),
              ("loss", "Sum", {}, {"input": "odd"}), feeds={"x": np.ones(3, np.float32)})
    p.pages[0].loss = "loss"
    return p


@pytest.fixture
def no_tanh(monkeypatch):
    """Tanh's lowering taken out of the table, as a block with none would be."""
    from blockflow.export.torch_lowering import lowering_table
    monkeypatch.delitem(lowering_table(), "Tanh")


def test_cli_train_engine_torch_refuses_unlowered_blocks(tmp_path, capsys, no_tanh):
    save_project(_tanh_page(), tmp_path / "p.bflow.json")
    code = main(["train", str(tmp_path / "p.bflow.json"), "-q", "--engine", "torch", "--steps", "2"])
    err = capsys.readouterr().err
    assert code == EXIT_DIAGNOSTICS and "Tanh" in err and "odd" in err and "nothing was trained" in err
    assert main(["train", str(tmp_path / "p.bflow.json"), "-q", "--steps", "2"]) == EXIT_OK   # blockflow's own


def test_a_page_torch_cannot_run_is_refused_as_a_value_error(no_tanh):
    from blockflow.export.torch_engine import TorchEngineError
    p = _tanh_page()
    program, _ = training_setup(p)
    with pytest.raises(ValueError, match="Tanh") as err:     # what the Train panel catches
        TorchTrainer(program, TrainConfig(steps=1), project=p, device="cpu")
    assert isinstance(err.value, TorchEngineError) and any("odd" in x for x in err.value.problems)


def test_refusals_are_export_errors():
    project = regression()
    project.pages[0].loss = None
    with pytest.raises(ExportError, match="marks no loss"):
        training_setup(project)
