"""The Python API's Trainer given a TrainConfig a careless or hostile caller writes: a negative
seed, which is a seed like any other, but on a page with a dataset block failed at the first
batch ('MakeMoons failed ... expected non-negative integer')."""
from __future__ import annotations

import numpy as np
import pytest

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


@pytest.mark.parametrize("seed", [-1, -(2 ** 40), np.int64(-5)])
def test_a_negative_seed_shuffles_a_datasets_batches_as_any_seed_does(seed):
    history = Trainer(_program(), TrainConfig(steps=6, optimizer="sgd", seed=seed)).train()
    assert len(history.steps) == 6 and np.isfinite(history.losses).all()
    again = Trainer(_program(), TrainConfig(steps=6, optimizer="sgd", seed=seed)).train()
    assert again.losses == history.losses          # the same seed, the same batches
    other = Trainer(_program(), TrainConfig(steps=6, optimizer="sgd", seed=7)).train()
    assert other.losses != history.losses
