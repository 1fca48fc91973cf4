"""Runs one library layer on a page, for the layer tests: fed inputs, a weighted sum as the loss
(so each output entry gets its own gradient), and a numpy reference's finite differences."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from blockflow.composite import block_name
from blockflow.compile.compiler import compile_project
from blockflow.project import Project
from blockflow.run.runtime import run

TOOLS = Path(__file__).resolve().parent.parent / "tools"
if str(TOOLS) not in sys.path:
    sys.path.insert(0, str(TOOLS))

from layer_defs import basic  # noqa: E402  (tools/ is not a package on the path)

LAYERS = {fn().name: fn for fn in basic.LAYERS}


def layer_project(name: str, inputs: dict, params: dict | None = None, out_shape=None, seed: int = 5):
    """A project whose page 'main' feeds ``inputs`` ({port: array}) to instance L of layer
    ``name`` and has loss = sum(L.y * R), R seeded; returns (project, R)."""
    comp = LAYERS[name]()
    project = Project()
    project.composites[comp.name] = comp
    page = project.add_page("main")
    page.add_node(block_name(name), id="L", attrs=dict(params or {}))
    for port, arr in inputs.items():
        page.add_node("Placeholder", id=f"in_{port}", attrs={"dtype": str(arr.dtype), "shape": list(arr.shape)})
        page.feeds[f"in_{port}"] = arr
        page.connect(f"in_{port}", "output", "L", port)
    r = np.random.default_rng(seed).normal(size=out_shape).astype(np.float32)
    page.add_node("Const", id="R", attrs={"value": r, "dtype": "float32"})
    page.add_node("Multiply", id="weighted")
    page.add_node("Sum", id="loss")
    page.connect("L", "y", "weighted", "x")
    page.connect("R", "output", "weighted", "y")
    page.connect("weighted", "z", "loss", "input")
    page.loss = "loss"
    return project, r


def run_layer(project, split: str = "train", **kw):
    program = compile_project(project, "main")
    program.raise_for_errors()
    return program, run(program, target="loss", split=split, **kw)


def numeric_grad(f, x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """Central differences of the scalar f at x, in float64."""
    x = x.astype(np.float64)
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        old = x[i]
        x[i] = old + eps
        up = f(x)
        x[i] = old - eps
        down = f(x)
        x[i] = old
        g[i] = (up - down) / (2 * eps)
    return g


def check_grads(ref, values: dict, grads: dict, r: np.ndarray, rtol=2e-3, atol=2e-4) -> None:
    """For each name in ``grads``: the gradient of sum(ref(**values) * r) with respect to it, by
    finite differences of the numpy reference, equals the run's."""
    base = {k: np.asarray(v, np.float64) for k, v in values.items()}
    for name, got in grads.items():
        def f(v, name=name):
            return float(np.sum(ref(**dict(base, **{name: v})) * r))
        want = numeric_grad(f, base[name])
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=f"gradient of {name}")
