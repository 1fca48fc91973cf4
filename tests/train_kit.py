"""Pages the training-export tests share: a small MLP regression on a MakeLine dataset (core
blocks only), a float64 regression on saved feeds, and one that trains itself (Gradients + an
Apply* block)."""
from __future__ import annotations

import numpy as np

from diagrams import chain
from blockflow.registry import default_registry


def mlp(optimizer="adam", batch=32, seed=0, steps=5, lr=0.05, n=200, shuffle=True):
    """x -> Tanh(x W1 + b1) W2 + b2, mean squared error against MakeLine's y (float32)."""
    p = chain(("data", "MakeLine", {"n": n, "batch_size": batch, "slope": 2.0, "noise": 0.1, "shuffle": shuffle},
               None),
              ("W1", "Variable", {"shape": [1, 8], "initializer": "glorot_uniform", "seed": 1}, None),
              ("b1", "Variable", {"shape": [8]}, None),
              ("W2", "Variable", {"shape": [8, 1], "initializer": "glorot_uniform", "seed": 2}, None),
              ("b2", "Variable", {"shape": [1]}, None),
              ("h1", "MatMul", {}, {"a": "data:features", "b": "W1"}),
              ("z1", "Add", {}, {"x": "h1", "y": "b1"}),
              ("a1", "Tanh", {}, {"x": "z1"}),
              ("h2", "MatMul", {}, {"a": "a1", "b": "W2"}),
              ("z2", "Add", {}, {"x": "h2", "y": "b2"}),
              ("d", "Subtract", {}, {"x": "z2", "y": "data:labels"}),
              ("sq", "Square", {}, {"x": "d"}),
              ("loss", "Mean", {}, {"input": "sq"}))
    p.pages[0].loss = "loss"
    p.metadata["training"] = {"main": {"optimizer": optimizer, "steps": steps, "seed": seed, "lr": lr}}
    return p


SCALARS = {"lr": 0.1, "alpha": 0.1, "momentum": 0.9, "beta1": 0.9, "beta2": 0.999, "epsilon": 1e-7,
           "rho": 0.9, "l1": 0.01, "l2": 0.01, "lr_power": -0.5}


def regression(update: str | None = None, optimizer="adam", extra=None):
    """W * x + b fitted to y (float64, saved feeds); with ``update``, a Gradients block and one
    ``update`` block per Variable with unwired slots (its attrs ``extra``): the page trains itself."""
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(5), rng.standard_normal(5)
    specs = [("x", "Placeholder", {"shape": [5], "dtype": "float64"}, None),
             ("y", "Placeholder", {"shape": [5], "dtype": "float64"}, None),
             ("W", "Variable", {"shape": [], "dtype": "float64", "initializer": "random_uniform", "seed": 4}, None),
             ("b", "Variable", {"shape": [], "dtype": "float64"}, None),
             ("Wx", "Multiply", {}, {"x": "W", "y": "x"}),
             ("h", "Add", {}, {"x": "Wx", "y": "b"}),
             ("d", "Subtract", {}, {"x": "h", "y": "y"}),
             ("sq", "Square", {}, {"x": "d"}),
             ("loss", "Mean", {}, {"input": "sq"})]
    if update:
        specs.append(("g", "Gradients", {}, {"ys[0]": "loss", "xs[0]": "W", "xs[1]": "b"}))
        spec = default_registry()[update]
        grad_port = "delta" if update == "ApplyGradientDescent" else "grad"
        for i, var in enumerate(("W", "b")):
            wires = {"var": var, grad_port: f"g:dx[{i}]"}
            for port in spec.inputs:
                if not port.ref and port.name not in wires:
                    wires[port.name] = np.float64(SCALARS[port.name])
            specs.append((f"update_{var}", update, dict(extra or {}), wires))
    project = chain(*specs, feeds={"x": x, "y": y})
    project.pages[0].loss = "loss"
    project.metadata["training"] = {"main": {"optimizer": optimizer, "steps": 3, "lr": 0.1}}
    return project
