"""Training: the optimizers are the Apply* blocks' rules, steps are deterministic for a seed,
graph mode (a page's own Gradients + Apply*) agrees with optimizer mode, and the CLI."""
from __future__ import annotations

import json

import numpy as np
import pytest

from blockflow.cli import EXIT_OK, EXIT_USAGE, main
from blockflow.compile.compiler import compile_project
from blockflow.errors import NumericsError, RunError, UpdateNumericsError
from blockflow.io.project_io import load_project, save_project
from blockflow.run.runtime import run
from blockflow.run.settings import OPTIMIZERS
from blockflow.run.training import TrainConfig, Trainer, training_program

from diagrams import chain


def regression(w0=0.3, b0=-0.2):
    """enuSpace's (and TF's first tutorial's) data: x = y = [1, 2, 3]; hypothesis W·x + b."""
    p = chain(("x", "Placeholder", {"shape": [3]}, None),
              ("y", "Placeholder", {"shape": [3]}, None),
              ("W", "Variable", {"shape": [], "initializer": "value", "initial_value": np.float32(w0)}, None),
              ("b", "Variable", {"shape": [], "initializer": "value", "initial_value": np.float32(b0)}, None),
              ("wx", "Multiply", {}, {"x": "W:ref", "y": "x"}),
              ("h", "Add", {}, {"x": "wx", "y": "b:ref"}),
              ("d", "SquaredDifference", {}, {"x": "h", "y": "y"}),
              ("L", "Mean", {}, {"input": "d"}),
              feeds={"x": np.float32([1, 2, 3]), "y": np.float32([1, 2, 3])})
    p.pages[0].loss = "L"
    return p


def test_sgd_is_the_gradient_descent_rule_and_w_converges_to_1():
    program = compile_project(regression())
    t = Trainer(program, TrainConfig(steps=1, optimizer="sgd", hyper={"lr": 0.1}))
    r = run(program, target="L", record=False, commit=False)
    expected_w = 0.3 - 0.1 * r.variable_grads["W"]
    t.step()
    assert t.values["W"] == pytest.approx(expected_w, rel=1e-6)
    history = t.train(2000)
    assert abs(float(t.values["W"]) - 1.0) < 1e-3 and abs(float(t.values["b"])) < 2e-3
    assert history.losses[-1] < 1e-6 < history.losses[0]
    assert program.variable_values["W"] == np.float32(0.3)      # the program is left as it was


def test_adam_matches_the_tensorflow_formula_over_two_steps():
    program = compile_project(regression())
    lr, b1, b2, eps = 0.01, 0.9, 0.999, 1e-7
    t = Trainer(program, TrainConfig(optimizer="adam", hyper={"lr": lr}))
    w = np.float64(0.3)
    m = v = 0.0
    b1p, b2p = b1, b2
    for _ in range(2):
        g = float(run(program, target="L", record=False, commit=False,
                      variables={"W": np.float32(w), "b": t.values["b"]}).variable_grads["W"])
        t.step()
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        w = w - lr * np.sqrt(1 - b2p) / (1 - b1p) * m / (np.sqrt(v) + eps)
        b1p, b2p = b1p * b1, b2p * b2
        assert float(t.values["W"]) == pytest.approx(w, rel=1e-5)


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_every_optimizer_lowers_the_loss(name):
    program = compile_project(regression())
    history = Trainer(program, TrainConfig(steps=200, optimizer=name, hyper={"lr": 0.05})).train()
    assert history.losses[-1] < 0.5 * history.losses[0], (name, history.losses[0], history.losses[-1])


def moons_classifier(hidden=8):
    p = chain(("d", "MakeMoons", {"n": 200, "noise": 0.1, "batch_size": 32}, None),
              ("W1", "Variable", {"shape": [2, hidden], "initializer": "glorot_uniform", "seed": 1}, None),
              ("b1", "Variable", {"shape": [hidden]}, None),
              ("W2", "Variable", {"shape": [hidden, 2], "initializer": "glorot_uniform", "seed": 2}, None),
              ("b2", "Variable", {"shape": [2]}, None),
              ("m1", "MatMul", {}, {"a": "d:features", "b": "W1:ref"}),
              ("a1", "BiasAdd", {}, {"value": "m1", "bias": "b1:ref"}),
              ("h", "Tanh", {}, {"x": "a1"}),
              ("m2", "MatMul", {}, {"a": "h", "b": "W2:ref"}),
              ("z", "BiasAdd", {}, {"value": "m2", "bias": "b2:ref"}),
              ("xe", "SparseSoftmaxCrossEntropyWithLogits", {}, {"features": "z", "labels": "d:labels"}),
              ("L", "Mean", {}, {"input": "xe:loss"}),
              ("pred", "ArgMax", {"output_type": "int32"}, {"input": "z", "dimension": np.array(1)}),
              ("eq", "Equal", {}, {"x": "pred", "y": "d:labels"}),
              ("eqf", "Cast", {"DstT": "float32"}, {"x": "eq"}),
              ("acc", "Mean", {}, {"input": "eqf"}))
    p.pages[0].loss = "L"
    p.pages[0].metrics = ["acc"]
    return p


def test_a_seed_makes_training_deterministic_and_different_seeds_differ():
    program = compile_project(moons_classifier())
    runs = {}
    for seed in (0, 0, 7):
        t = Trainer(program, TrainConfig(steps=30, optimizer="adam", hyper={"lr": 0.05}, seed=seed,
                                         metrics=("acc",), eval_every=10))
        h = t.train()
        runs.setdefault(seed, []).append((h.losses, t.values["W1"].copy(), h.evaluations))
    (l0, w0, e0), (l1, w1, e1) = runs[0]
    assert l0 == l1 and np.array_equal(w0, w1) and e0 == e1
    l7, w7, _ = runs[7][0]
    assert l7 != l0 and not np.array_equal(w7, w0)
    assert [k for k, _ in e0] == [9, 19, 29] and set(e0[-1][1]) == {"loss", "acc:output"}


def test_metrics_evaluation_stop_and_state_updates():
    project = moons_classifier()
    program = compile_project(project)
    t = Trainer(program, TrainConfig(steps=300, optimizer="adam", hyper={"lr": 0.05}, metrics=("acc",)))
    calls = []
    h = t.train(callback=lambda rec, tr: calls.append(rec.step), should_stop=lambda: len(calls) >= 250)
    assert h.stopped and len(h.steps) == 250 and calls == list(range(250))
    assert h.metric("acc:output")[-1] > 0.9
    assert t.evaluate("test")["acc:output"] > 0.9
    updates = t.state_updates()
    assert set(updates) == {"W1", "b1", "W2", "b2"}
    project.pages[0].apply_state(updates)
    np.testing.assert_array_equal(compile_project(project).variable_values["W1"], t.values["W1"])


def test_graph_mode_runs_the_pages_own_update_blocks_like_sgd():
    project = regression()
    pg = project.pages[0]
    pg.add_node("Gradients", id="grads")      # ys = [L], xs = [W, b]; then ApplyGradientDescent for each
    pg.connect("L", "output", "grads", "ys[0]")
    pg.connect("W", "ref", "grads", "xs[0]")
    pg.connect("b", "ref", "grads", "xs[1]")
    for k, var in enumerate(("W", "b")):
        node = pg.add_node("ApplyGradientDescent", id=f"apply_{var}")
        node.inputs["alpha"] = np.float32(0.1)
        pg.connect(var, "ref", f"apply_{var}", "var")
        pg.connect("grads", f"dx[{k}]", f"apply_{var}", "delta")
    program = compile_project(project)
    assert program.ok, [str(d) for d in program.errors]
    graph = Trainer(program, TrainConfig(steps=50))
    assert graph.mode == "graph"
    graph.train()
    sgd = Trainer(compile_project(regression()), TrainConfig(steps=50, optimizer="sgd", hyper={"lr": 0.1}))
    sgd.train()
    assert float(graph.values["W"]) == pytest.approx(float(sgd.values["W"]), rel=1e-5)
    assert "W" in graph.state_updates()


def test_refusals_and_a_nan_stops_with_the_node_named():
    program = compile_project(regression())
    with pytest.raises(ValueError, match="unknown optimizer"):
        Trainer(program, TrainConfig(optimizer="lbfgs"))
    with pytest.raises(ValueError, match="no setting 'beta1'"):
        Trainer(program, TrainConfig(optimizer="sgd", hyper={"beta1": 0.9}))
    with pytest.raises(RunError, match="no block that updates a Variable"):
        Trainer(program, TrainConfig(mode="graph"))
    with pytest.raises(RunError, match="float scalar"):
        Trainer(program, TrainConfig(target="d"))
    t = Trainer(program, TrainConfig(optimizer="sgd", hyper={"lr": 1e30}))
    with pytest.raises(NumericsError):
        for _ in range(10):
            t.step()


def test_an_update_that_overflows_a_slot_is_named_warns_nothing_and_keeps_nothing():
    """Adam on a gradient of ~6e20 (finite in float32): its square overflows, so the slot v is
    Inf while the new value stays finite (m / sqrt(Inf) is 0). The step names the slot, numpy
    prints no warning even where the caller asks for 'raise', and the step keeps nothing."""
    import warnings
    program = compile_project(regression())
    big = np.float32([1e10, 2e10, 3e10])
    t = Trainer(program, TrainConfig(optimizer="adam", hyper={"lr": 0.01}), feeds={"x": big, "y": big})
    before = {k: np.array(v) for k, v in t.values.items()}
    with np.errstate(all="raise"), warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(UpdateNumericsError, match=r"produced Inf \(1 of 1 values\) in its slot 'v': the "
                                                      r"Variable and its gradient were finite") as info:
            t.step()
    assert info.value.node == "main/W (Variable)" and info.value.step == 0
    assert t.step_index == 0 and all(np.array_equal(t.values[k], v) for k, v in before.items())
    with np.errstate(all="raise"), warnings.catch_warnings():
        warnings.simplefilter("error")
        sgd = Trainer(program, TrainConfig(optimizer="sgd", hyper={"lr": 1e30}), feeds={"x": big, "y": big})
        with pytest.raises(UpdateNumericsError, match=r"produced -?Inf|produced Inf"):
            sgd.step()


def test_epsilon_0_with_a_zero_gradient_is_said_to_divide_0_by_0():
    """W = 1, b = 0 fit x = y exactly: the gradient is 0, and with epsilon 0 the rule divides 0 by
    0. The step says so, not that a smaller learning rate may help (no overflow happened)."""
    program = compile_project(regression(w0=1.0, b0=0.0))
    t = Trainer(program, TrainConfig(optimizer="adam", hyper={"lr": 0.01, "epsilon": 0.0}))
    with pytest.raises(UpdateNumericsError, match=r"NaN \(1 of 1 values\).*epsilon is 0, so where the gradient") as info:
        t.step()
    assert "smaller learning rate" not in str(info.value)


def test_the_settings_an_update_uses_are_the_trainers_current_ones():
    """The settings' scalars are made once per dtype (Trainer._rule_settings) but follow a change
    of ``hyper``: SGD's step after lr is changed uses the new lr."""
    program = compile_project(regression())
    t = Trainer(program, TrainConfig(optimizer="sgd", hyper={"lr": 0.1}))
    t.step()
    w = float(t.values["W"])
    g = float(run(program, target="L", record=False, commit=False,
                  variables={"W": np.float32(w), "b": t.values["b"]}).variable_grads["W"])
    t.hyper["lr"] = 0.5
    t.step()
    assert float(t.values["W"]) == pytest.approx(w - 0.5 * g, rel=1e-6)


def test_batch_size_override_does_not_touch_the_project():
    project = moons_classifier()
    program = training_program(project, batch_size=5)
    assert run(program, fetch=["d:features"]).value("d", "features").shape == (5, 2)
    assert project.pages[0].nodes["d"].attrs["batch_size"] == 32


def test_cli_train_reports_saves_and_is_deterministic(tmp_path, capsys):
    path = tmp_path / "moons.bflow.json"
    save_project(moons_classifier(), path)
    out_path = tmp_path / "trained.bflow.json"
    code = main(["train", str(path), "--steps", "200", "--lr", "0.05", "--eval-every", "100",
                 "--save", str(out_path), "--seed", "3"])
    out, err = capsys.readouterr()
    assert code == EXIT_OK, err
    assert "trained page 'main' for 200 steps with Adam (adam, lr 0.05" in out and "acc:output (on each step's batch):" in out
    assert "test: loss" in out and f"saved to {out_path}" in out and "step 200/200" in err
    trained = load_project(out_path)
    assert not np.array_equal(trained.pages[0].nodes["W1"].state["value"],
                              compile_project(load_project(path)).variable_values["W1"])
    code = main(["train", str(path), "--steps", "20", "--json", "--seed", "3", "--batch-size", "0"])
    first = json.loads(capsys.readouterr().out)
    main(["train", str(path), "--steps", "20", "--json", "--seed", "3", "--batch-size", "0"])
    assert json.loads(capsys.readouterr().out)["loss"] == first["loss"]
    assert first["metrics"]["acc:output"] and first["saved"] is None
    assert main(["train", str(path), "--steps", "5", "--set", "beta1"]) == EXIT_USAGE
    assert main(["train", str(path), "--steps", "5", "--optimizer", "sgd", "--set", "beta1=0.5"]) == EXIT_USAGE
    assert "no setting 'beta1'" in capsys.readouterr().err


def test_the_projects_recommended_settings_are_the_defaults_and_options_win(tmp_path, capsys):
    from blockflow.run.settings import recommended_settings

    project = regression()
    project.metadata["training"] = {"main": {"optimizer": "sgd", "lr": 0.1, "steps": 40, "seed": 2,
                                             "batch_size": None, "momentum": 5, "junk": "x"}}
    rec = recommended_settings(project)
    assert rec == {"optimizer": "sgd", "steps": 40, "seed": 2, "batch_size": None, "hyper": {"lr": 0.1}}
    project.metadata["training"]["main"]["lr"] = "fast"          # ill-typed entries are ignored
    assert "hyper" not in recommended_settings(project)
    project.metadata["training"]["main"]["lr"] = 0.1
    path = tmp_path / "r.bflow.json"
    save_project(project, path)
    assert main(["train", str(path), "--json"]) == EXIT_OK
    out = json.loads(capsys.readouterr().out)
    assert out["steps"] == 40 and out["optimizer"] == "sgd" and out["settings"] == {"lr": 0.1} and out["seed"] == 2
    assert main(["train", str(path), "--json", "--steps", "3", "--optimizer", "adam"]) == EXIT_OK
    out = json.loads(capsys.readouterr().out)
    assert out["steps"] == 3 and out["optimizer"] == "adam" and out["settings"]["lr"] == 0.001
    save_project(regression(), path)
    assert main(["train", str(path)]) == EXIT_USAGE
    assert "give --steps" in capsys.readouterr().err


def test_a_variable_no_gradient_reaches_is_named_before_training(capsys, tmp_path):
    project = regression()
    pg = project.pages[0]
    pg.add_node("StopGradient", id="sg")
    pg.edges = [e for e in pg.edges if not (e.src == "b" and e.dst == "h")]
    pg.connect("b", "ref", "sg", "input")
    pg.connect("sg", "output", "h", "y")
    t = Trainer(compile_project(project), TrainConfig(optimizer="sgd"))
    assert t.warnings == ["no gradient of the loss reaches b (cut by sg): training will not change it"]
    path = tmp_path / "p.bflow.json"
    save_project(project, path)
    assert main(["train", str(path), "--steps", "2", "--quiet"]) == EXIT_OK
    assert "warning: no gradient of the loss reaches b (cut by sg)" in capsys.readouterr().err
