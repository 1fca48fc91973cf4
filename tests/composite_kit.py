"""Composites built in code for the tests: a Dense layer, and a page that uses it."""
from __future__ import annotations

import numpy as np

from blockflow.composite import Composite, block_name
from blockflow.project import Page, Project
from blockflow.spec import Attr


def dense(name: str = "Dense", activation: bool = True) -> Composite:
    """x [batch, features] -> y = act(x @ W + b), W [features, units] drawn glorot_uniform."""
    comp = Composite(name, doc="A fully connected layer: y = activation(x @ W + b).",
                     params=[Attr("units", "int", min=1, doc="output features"),
                             Attr("activation", "choice", "relu", choices=("relu", "linear"))])
    p = comp.page
    p.add_node("Input", id="x", attrs={"name": "x", "dtype": "float32", "shape": ["batch", "features"]})
    p.add_node("Variable", id="W", attrs={"shape": [{"$dim": "features"}, {"$param": "units"}],
                                           "initializer": "glorot_uniform", "seed": 1})
    p.add_node("Variable", id="b", attrs={"shape": [{"$param": "units"}], "initializer": "zeros"})
    p.add_node("MatMul", id="MatMul_1")
    p.add_node("BiasAdd", id="BiasAdd_1")
    p.connect("x", "output", "MatMul_1", "a")
    p.connect("W", "ref", "MatMul_1", "b")
    p.connect("MatMul_1", "product", "BiasAdd_1", "value")
    p.connect("b", "ref", "BiasAdd_1", "bias")
    out = "BiasAdd_1"
    if activation:
        p.add_node("Relu", id="Relu_1")
        p.connect("BiasAdd_1", "output", "Relu_1", "features")
        out = "Relu_1"
    p.add_node("Output", id="y", attrs={"name": "y"})
    p.connect(out, "output" if out == "BiasAdd_1" else "activations", "y", "input")
    return comp


def mlp_project(share: bool = False) -> Project:
    """A page: X [4, 3] -> d1 (Dense 5) -> d2 (Dense 2, linear) -> Sum; with ``share`` a second
    copy of d1 (d1b) reads d1's Variables."""
    project = Project()
    project.composites["Dense"] = dense()
    page = project.add_page("main")
    page.add_node("Placeholder", id="X", attrs={"dtype": "float32", "shape": [4, 3]})
    page.add_node(block_name("Dense"), id="d1", attrs={"units": 5})
    page.add_node(block_name("Dense"), id="d2", attrs={"units": 2, "activation": "linear"})
    page.add_node("Sum", id="loss", attrs={"axis": [0, 1]} if False else {})
    page.connect("X", "output", "d1", "x")
    page.connect("d1", "y", "d2", "x")
    page.connect("d2", "y", "loss", "input")
    page.loss = "loss"
    if share:
        page.add_node(block_name("Dense"), id="d1b", attrs={"units": 5, "share_variables_with": "d1"})
        page.add_node("AddN", id="both")
        page.connect("X", "output", "d1b", "x")
        page.connect("d1b", "y", "both", "inputs[0]")
        page.connect("d1", "y", "both", "inputs[1]")
    return project


#: the feed of laid_out's X
X_FEED = np.random.RandomState(0).randn(4, 3).astype(np.float32)


def laid_out(share: bool = True) -> Project:
    """mlp_project with X fed and positions, so that the page and the Dense definition read well
    when the GUI tests draw them."""
    p = mlp_project(share=share)
    page = p.page("main")
    page.feeds["X"] = X_FEED
    for nid, pos in {"X": (0, 60), "d1": (240, 0), "d2": (480, 0), "loss": (720, 0),
                     "d1b": (240, 180), "both": (480, 180)}.items():
        if nid in page.nodes:
            page.nodes[nid].position = pos
    inner = p.composites["Dense"].page
    for nid, pos in {"x": (0, 0), "W": (0, 120), "b": (240, 160), "MatMul_1": (220, 0),
                     "BiasAdd_1": (440, 40), "Relu_1": (660, 40), "y": (880, 40)}.items():
        inner.nodes[nid].position = pos
    return p
