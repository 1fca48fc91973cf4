"""Small diagrams the tests build in code (shared by several test files)."""
from __future__ import annotations

import numpy as np

from blockflow.project import Project
from blockflow.registry import default_registry


def chain(*specs, page="main", feeds=None):
    """A project whose page wires ``(id, block, attrs, {input: source})`` tuples in order."""
    project = Project()
    pg = project.add_page(page)
    for nid, block, attrs, wires in specs:
        node = pg.add_node(block, id=nid, attrs=attrs or {})
        for port, src in (wires or {}).items():
            if isinstance(src, str):
                sid, _, sport = src.partition(":")
                pg.connect(sid, sport or _first_output(pg, sid), nid, port)
            else:
                node.inputs[port] = np.asarray(src)
    for k, v in (feeds or {}).items():
        pg.feeds[k] = np.asarray(v)
    return project


def dense_layer(n=4, k=30, m=9, loss="Mean", bias_init=None):
    """x [n, k] -> MatMul by W [k, m] -> Add b [m] -> Tanh -> ``loss`` (a reduction over every
    value), the page's loss; W is seeded glorot_uniform, b zeros unless ``bias_init``."""
    bias = {"shape": [m]} if bias_init is None else {"shape": [m], "initializer": bias_init, "seed": 3}
    project = chain(("x", "Placeholder", {"shape": [n, k]}, None),
                    ("W", "Variable", {"shape": [k, m], "initializer": "glorot_uniform", "seed": 2}, None),
                    ("b", "Variable", bias, None),
                    ("mm", "MatMul", {}, {"a": "x", "b": "W:ref"}),
                    ("add", "Add", {}, {"x": "mm", "y": "b:ref"}),
                    ("t", "Tanh", {}, {"x": "add"}),
                    ("loss", loss, {}, {"input": "t"}))
    project.pages[0].loss = "loss"
    return project


def _first_output(page, nid):
    spec = default_registry().get(page.nodes[nid].block)
    return spec.outputs[0].name if spec is not None else "output"


def softmax_project(stable=True, x=(2.0, 1.0, 0.1, 3.0, -1.0), w=(1.0, 2.0, 3.0, 4.0, 5.0)):
    """x - StopGradient(Max(x)) (or x - Max(x) when not stable), Softmax, weighted sum."""
    shift = "StopGradient_1" if stable else "Max_1"
    specs = [("x", "Placeholder", {"shape": [len(x)]}, None),
             ("Max_1", "Max", {}, {"input": "x"})]
    if stable:
        specs.append(("StopGradient_1", "StopGradient", {}, {"input": "Max_1"}))
    specs += [("Subtract_1", "Subtract", {}, {"x": "x", "y": shift}),
              ("Softmax_1", "Softmax", {}, {"logits": "Subtract_1"}),
              ("w", "Const", {"value": np.asarray(w, np.float32)}, None),
              ("Multiply_1", "Multiply", {}, {"x": "Softmax_1", "y": "w"}),
              ("Sum_1", "Sum", {}, {"input": "Multiply_1"})]
    project = chain(*specs, feeds={"x": np.asarray(x, np.float32)})
    project.pages[0].loss = "Sum_1"
    return project


def open_mlp(n_in=96, hidden=80, n_out=10):
    """x [-1, n_in] -> Dense+Relu -> Dense -> softmax cross-entropy with y [-1, n_out] -> Mean,
    the page's loss: a batch left open, as users draw it (run/shaped.py's plans)."""
    project = chain(("x", "Placeholder", {"shape": [-1, n_in]}, None),
                    ("y", "Placeholder", {"shape": [-1, n_out]}, None),
                    ("W1", "Variable", {"shape": [n_in, hidden], "initializer": "glorot_uniform", "seed": 1}, None),
                    ("b1", "Variable", {"shape": [hidden], "initializer": "glorot_uniform", "seed": 2}, None),
                    ("W2", "Variable", {"shape": [hidden, n_out], "initializer": "glorot_uniform", "seed": 3}, None),
                    ("mm1", "MatMul", {}, {"a": "x", "b": "W1:ref"}),
                    ("add1", "Add", {}, {"x": "mm1", "y": "b1:ref"}),
                    ("r1", "Relu", {}, {"features": "add1"}),
                    ("mm2", "MatMul", {}, {"a": "r1", "b": "W2:ref"}),
                    ("ce", "SoftmaxCrossEntropyWithLogits", {}, {"features": "mm2", "labels": "y"}),
                    ("loss", "Mean", {}, {"input": "ce:loss"}))
    project.pages[0].loss = "loss"
    return project


def open_mlp_feeds(batch, n_in=96, n_out=10, seed=0):
    """Feeds of ``batch`` rows for open_mlp: normal x, one-hot y (drawn from seed + batch)."""
    rng = np.random.default_rng(seed + batch)
    return {"x": rng.normal(size=(batch, n_in)).astype(np.float32),
            "y": np.eye(n_out, dtype=np.float32)[rng.integers(0, n_out, batch)]}
