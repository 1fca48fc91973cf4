"""The Python API's Trainer given a TrainConfig a careless or hostile caller writes: a numpy float
setting (refused as not "a number >= 0"), hyper or metrics of the wrong kind (an AttributeError;
a string split into letters), a loss or metric that is no name (a TypeError from inside the
look-up), a setting of thousands of digits (quoted whole): each refused before training with a
message naming the setting and the value. And a negative seed, which is a seed like any other,
but on a page with a dataset block failed at the first batch ('MakeMoons failed ... expected
non-negative integer')."""
from __future__ import annotations

import json

import numpy as np
import pytest

from blockflow.errors import RunError
from blockflow.project import Project
from blockflow.run.training import TrainConfig, Trainer, training_program


def _program():
    """MakeMoons into a one-Variable linear model whose mean is the loss; 'a' is a scalar too."""
    p = Project()
    page = p.add_page("main")
    page.add_node("MakeMoons", id="data", attrs={"n": 20, "batch_size": 4})
    page.add_node("Variable", id="w", attrs={"shape": [2, 1], "dtype": "float32", "initializer": "ones"})
    page.add_node("MatMul", id="mm", attrs={})
    page.add_node("Mean", id="loss", attrs={})
    page.add_node("Mean", id="a", attrs={})
    page.connect("data", "features", "mm", "a")
    page.connect("w", "ref", "mm", "b")
    page.connect("mm", "product", "loss", "input")
    page.connect("mm", "product", "a", "input")
    page.loss = "loss"
    program = training_program(p, "main")
    assert program.ok, program.diagnostics
    return program


@pytest.mark.parametrize("config, error, says", [
    (TrainConfig(steps=2, hyper=[1]), ValueError, r"^hyper must be a mapping of setting names to values, got \[1\]$"),
    (TrainConfig(steps=2, hyper=None), ValueError, r"^hyper must be a mapping"),
    (TrainConfig(steps=2, metrics="a"), ValueError, r"^metrics must be a collection of names, not the string 'a'$"),
    (TrainConfig(steps=2, metrics=(5,)), RunError, r"^a metric must name an output as 'node', 'node:port'"),
    (TrainConfig(steps=2, target=5), RunError, r"^the loss must name an output as 'node', 'node:port'"),
    (TrainConfig(steps=2, hyper={"lr": 10 ** 400}), ValueError,
     r"^adam lr must be a number >= 0, got 1000000000000000000000000000000000000000\.\.\. \(401 characters\)$"),
], ids=["hyper-list", "hyper-none", "metrics-string", "metric-number", "loss-number",
        "huge-lr"])
def test_a_bad_config_is_refused_before_training_naming_the_setting(config, error, says):
    with pytest.raises(error, match=says):
        Trainer(_program(), config)


def test_numpy_numbers_are_settings_like_any_other():
    trainer = Trainer(_program(), TrainConfig(steps=2, optimizer="momentum", seed=np.int64(3),
                                              hyper={"lr": np.float32(0.1), "momentum": np.float64(0.5)}))
    history = trainer.train()
    assert len(history.steps) == 2 and all(np.isfinite(history.losses))
    assert type(trainer.hyper["lr"]) is float and trainer.hyper["lr"] == pytest.approx(0.1)
    json.dumps(trainer.hyper)     # what train --json writes
    with_metric = Trainer(_program(), TrainConfig(steps=1, metrics=["a"]))
    assert with_metric.metric_keys == ["a:output"]
    assert np.isfinite(with_metric.train().metric("a:output")).all()


@pytest.mark.parametrize("seed", [-1, -(2 ** 40), np.int64(-5)])
def test_a_negative_seed_shuffles_a_datasets_batches_as_any_seed_does(seed):
    history = Trainer(_program(), TrainConfig(steps=6, optimizer="sgd", seed=seed)).train()
    assert len(history.steps) == 6 and np.isfinite(history.losses).all()
    again = Trainer(_program(), TrainConfig(steps=6, optimizer="sgd", seed=seed)).train()
    assert again.losses == history.losses          # the same seed, the same batches
    other = Trainer(_program(), TrainConfig(steps=6, optimizer="sgd", seed=7)).train()
    assert other.losses != history.losses
