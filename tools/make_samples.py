"""Writes the sample projects in sample_projects/ from their definitions here.

    python tools/make_samples.py          # rewrite every sample
    python tools/make_samples.py --check  # exit 1 if a committed sample differs (used by the tests;
                                          # float arrays may differ in their last bits: same_sample)

The samples are committed as JSON so they read well in a diff and load without this script;
this script is how they are made, so that a format change rewrites them all the same way.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from blockflow.project import Page, Project
from blockflow.io.arrays import decode_array_at
from blockflow.io.checks import Invalid
from blockflow.io.project_io import dumps_project

from composite_samples import digits_cnn, mlp_composite, reverse_attention, use_layers, vanishing_gradients
from resnet_sample import resnet_gradients

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_projects"

X = np.array([2.0, 1.0, 0.1, 3.0, -1.0], np.float32)
W = np.array([1.0, -2.0, 0.5, 3.0, 1.5], np.float32)


def _wire(page: Page, src: str, dst: str) -> None:
    (s, sp), (d, dp) = src.split("."), dst.split(".")
    page.connect(s, sp, d, dp)


def _inputs(page: Page, x=(0, 160)) -> None:
    page.add_node("Placeholder", id="x", attrs={"dtype": "float32", "shape": [5]}, position=x,
                  label="logits x")
    page.feeds["x"] = X.copy()


def _weighted_sum(page: Page, src: str, col: float) -> None:
    page.add_node("Const", id="w", attrs={"dtype": "float32", "value": W.copy()}, position=(col, 320),
                  label="weights w")
    page.add_node("Multiply", id="Multiply_1", position=(col + 200, 160))
    page.add_node("Sum", id="Sum_1", position=(col + 400, 160), label="loss")
    _wire(page, src, "Multiply_1.x")
    _wire(page, "w.output", "Multiply_1.y")
    _wire(page, "Multiply_1.z", "Sum_1.input")
    page.loss = "Sum_1"


def _shift(page: Page, stop: bool) -> str:
    """x - Max(x), through StopGradient when ``stop``; returns the difference's port."""
    _inputs(page)
    page.add_node("Max", id="Max_1", position=(200, 40))
    shift = "Max_1.output"
    if stop:
        page.add_node("StopGradient", id="StopGradient_1", position=(400, 40))
        _wire(page, "Max_1.output", "StopGradient_1.input")
        shift = "StopGradient_1.output"
    page.add_node("Subtract", id="Subtract_1", position=(600, 160))
    _wire(page, "x.output", "Max_1.input")
    _wire(page, "x.output", "Subtract_1.x")
    _wire(page, shift, "Subtract_1.y")
    return "Subtract_1.z"


def _exp_normalised(page: Page, src: str, col: float) -> str:
    """exp(src) / sum(exp(src)) from Exp, Sum and RealDiv; returns the quotient's port."""
    page.add_node("Exp", id="Exp_1", position=(col, 160))
    page.add_node("Sum", id="Sum_2", position=(col + 200, 40), label="normaliser")
    page.add_node("RealDiv", id="RealDiv_1", position=(col + 400, 160))
    _wire(page, src, "Exp_1.x")
    _wire(page, "Exp_1.y", "Sum_2.input")
    _wire(page, "Exp_1.y", "RealDiv_1.x")
    _wire(page, "Sum_2.output", "RealDiv_1.y")
    return "RealDiv_1.z"


def _softmax(page: Page, src: str) -> str:
    page.add_node("Softmax", id="Softmax_1", position=(800, 160))
    _wire(page, src, "Softmax_1.logits")
    return "Softmax_1.softmax"


def stable_softmax() -> Project:
    project = Project(metadata={
        "title": "Stable softmax",
        "description": "TensorFlow's stop_gradient example: softmax(x - stop_gradient(max(x))).",
    })

    page = project.add_page("stable_softmax")
    page.text = (
        "A numerically stable softmax, as the TensorFlow docs for stop_gradient write it: "
        "z = x - StopGradient(Max(x)), p = Softmax(z), loss = Sum(p * w). "
        "Subtracting the max keeps exp() from overflowing (try x around 1000). The max is only a "
        "shift: softmax does not change when a constant is subtracted, so its gradient would add "
        "nothing. StopGradient says so, and the backward pass skips Max entirely (blockflow run "
        "lists the wires into StopGradient as cut). The other pages write the softmax out by hand, drop "
        "the StopGradient (same gradient, more work) and drop the shift (overflows)."
    )
    _weighted_sum(page, _softmax(page, _shift(page, stop=True)), 1000)

    page = project.add_page("by_hand")
    page.text = ("The same softmax written out: exp(z) / sum(exp(z)) with z = x - StopGradient(Max(x)). "
                 "Stable for large x, and its gradient equals the Softmax block's.")
    _weighted_sum(page, _exp_normalised(page, _shift(page, stop=True), 800), 1400)

    page = project.add_page("without_stop_gradient")
    page.text = ("x - Max(x) with the gradient flowing through Max too. The result and the gradient are "
                 "the same (the max's share sums to zero), but the backward pass has to differentiate Max.")
    _weighted_sum(page, _softmax(page, _shift(page, stop=False)), 1000)

    page = project.add_page("naive")
    page.text = ("exp(x) / sum(exp(x)) with no shift: fine for small x, but exp overflows to Inf for "
                 "x around 100 in float32 and the result turns into NaN (try a feed of x near 1000).")
    _inputs(page)
    _weighted_sum(page, _exp_normalised(page, "x.output", 200), 800)
    return project


# ------------------------------------------------------------------------------------ helpers
# The teaching samples place their blocks on a grid read left to right: column c, row r.
DX, DY = 200.0, 130.0


def _add(page: Page, block: str, id: str, at, *, label: str = "", attrs=None, inputs=None,
         wires=None) -> None:
    """A node at grid place ``at`` = (column, row), its inputs wired from ``{port: "node.port"}``."""
    col, row = at
    page.add_node(block, id=id, attrs=attrs or {}, inputs=inputs, position=(col * DX, row * DY), label=label)
    for port, src in (wires or {}).items():
        _wire(page, src, f"{id}.{port}")


def _text(*paragraphs: str) -> str:
    return "\n\n".join(" ".join(p.split()) for p in paragraphs)


def _f32(values) -> np.ndarray:
    return np.array(values, np.float32)


# ------------------------------------------------------------------------------- basic_matmul
MATRIX_A = _f32([[2.0, 5.0], [3.0, -3.0]])
ROW_X = _f32([[2.0, 3.0]])


def basic_matmul() -> Project:
    project = Project(metadata={
        "title": "Basic MatMul",
        "description": "enuSpace's first tutorial: a 2x2 matrix times a column, [[2, 5], [3, -3]] · [2, 3]ᵀ = "
                       "[[19], [-3]]. Forward only.",
    })
    page = project.add_page("matmul")
    page.text = _text(
        "The first tutorial of enuSpace for TensorFlow: a matrix times a vector, in blocks. A is a 2x2 "
        "Const, x a 1x2 row (a Placeholder with a saved feed), and Transpose turns it into the 2x1 column "
        "xᵀ, so MatMul can multiply them: A · xᵀ = [[2·2 + 5·3], [3·2 − 3·3]] = [[19], [−3]].",
        "What to look at: the shapes on the wires (blockflow check -v prints them): [2, 2] times [2, 1] gives "
        "[2, 1]. Without the Transpose, MatMul refuses [2, 2] times [1, 2] and says why.",
        "Run it: blockflow run sample_projects/basic_matmul.bflow.json. Try another x: "
        "--feed 'x=[[1, 1]]'. Nothing is trained here; the page has no loss. The next page does the "
        "same with MatMul's transpose_b attr instead of a Transpose block.")
    _add(page, "Const", "A", (0, 0), label="matrix A (2x2)", attrs={"dtype": "float32", "value": MATRIX_A.copy()})
    _add(page, "Placeholder", "x", (0, 1.2), label="row x (1x2)", attrs={"dtype": "float32", "shape": [1, 2]})
    page.feeds["x"] = ROW_X.copy()
    _add(page, "Transpose", "xT", (1, 1.2), label="column xᵀ (2x1)", wires={"x": "x.output"})
    _add(page, "MatMul", "product", (2, 0.6), label="A · xᵀ", wires={"a": "A.output", "b": "xT.y"})

    page = project.add_page("transpose_b")
    page.text = _text(
        "The same product without a Transpose block: MatMul's transpose_b attr multiplies by the "
        "transpose of its second input, as tf.matmul(A, x, transpose_b=True) does. The result is again "
        "[[19], [−3]].",
        "Run it: blockflow run sample_projects/basic_matmul.bflow.json --page transpose_b")
    _add(page, "Const", "A", (0, 0), label="matrix A (2x2)", attrs={"dtype": "float32", "value": MATRIX_A.copy()})
    _add(page, "Placeholder", "x", (0, 1.2), label="row x (1x2)", attrs={"dtype": "float32", "shape": [1, 2]})
    page.feeds["x"] = ROW_X.copy()
    _add(page, "MatMul", "product", (1.5, 0.6), label="A · xᵀ", attrs={"transpose_b": True},
         wires={"a": "A.output", "b": "x.output"})
    return project


# -------------------------------------------------------------------------- linear_regression
def _regression_model(page: Page) -> None:
    """x, y = [1, 2, 3]; hypothesis W·x + b; loss mean((W·x + b − y)²). The Variables sit low on
    the left, so their wires to the update blocks of the second page run under the model."""
    _add(page, "Placeholder", "x", (0, 0), label="x = [1, 2, 3]", attrs={"dtype": "float32", "shape": [3]})
    page.feeds["x"] = _f32([1, 2, 3])
    _add(page, "Variable", "W", (0, 1.9), label="weight W",
         attrs={"shape": [], "initializer": "random_uniform", "scale": 1.0, "seed": 1})
    _add(page, "Variable", "b", (1, 2.9), label="bias b", attrs={"shape": []})
    _add(page, "Multiply", "Wx", (1, 0.4), label="W · x", wires={"x": "x.output", "y": "W.ref"})
    _add(page, "Add", "hypothesis", (2, 1.2), label="h = W · x + b", wires={"x": "Wx.z", "y": "b.ref"})
    _add(page, "Placeholder", "y", (2, 0), label="y = [1, 2, 3]", attrs={"dtype": "float32", "shape": [3]})
    page.feeds["y"] = _f32([1, 2, 3])
    _add(page, "SquaredDifference", "squared_error", (3, 0.6), label="(y − h)²",
         wires={"x": "y.output", "y": "hypothesis.z"})
    _add(page, "Mean", "loss", (4, 0.6), label="loss: mean squared error", wires={"input": "squared_error.z"})
    page.loss = "loss"
    page.metrics = ["W", "b"]


def linear_regression() -> Project:
    project = Project(metadata={
        "title": "Linear regression",
        "description": "enuSpace's tutorial data x = y = [1, 2, 3]: fit W·x + b by gradient descent on the mean "
                       "squared error; W goes to 1 and b to 0.",
        "training": {
            "linear_regression": {"optimizer": "sgd", "lr": 0.1, "steps": 1000, "batch_size": None, "seed": 0},
            "drawn_update": {"steps": 1000, "batch_size": None, "seed": 0},
        },
    })
    page = project.add_page("linear_regression")
    page.text = _text(
        "Linear regression, the way the TensorFlow and enuSpace tutorials start: the data is x = [1, 2, 3] "
        "and y = [1, 2, 3], the hypothesis is h = W · x + b with two Variables, and the loss is the mean "
        "squared error mean((h − y)²). The best fit is W = 1, b = 0.",
        "What to look at: run it once and look at the gradients reaching W and b (blockflow run prints "
        "them); then train and watch the plotted W and b (the page's metrics) settle at 1 and 0.",
        "Train it: blockflow train sample_projects/linear_regression.bflow.json (the project recommends "
        "plain gradient descent, lr 0.1, 1000 steps). W ends within 0.001 of 1 and b within 0.001 of 0. "
        "Add --save trained.bflow.json to keep the trained values.")
    _regression_model(page)

    page = project.add_page("drawn_update")
    page.text = _text(
        "The same regression with the optimizer drawn as blocks, as enuSpace's tutorial draws it: "
        "Gradients (tf.gradients) computes dloss/dW and dloss/db, and one ApplyGradientDescent per "
        "Variable does W ← W − 0.1 · dW. Each training step is one run of this page.",
        "Train it: blockflow train sample_projects/linear_regression.bflow.json --page drawn_update. It is "
        "trained in graph mode (the page's own update blocks) and ends exactly where the first page ends "
        "with --optimizer sgd --lr 0.1.")
    _regression_model(page)
    _add(page, "Gradients", "gradients", (5.4, 1.6), label="dloss/dW, dloss/db",
         wires={"ys[0]": "loss.output", "xs[0]": "W.ref", "xs[1]": "b.ref"})
    for k, var in enumerate(("W", "b")):
        _add(page, "ApplyGradientDescent", f"update_{var}", (7.0, 3.4 + 1.3 * k),
             label=f"{var} ← {var} − 0.1 · d{var}", inputs={"alpha": np.float32(0.1)},
             wires={"var": f"{var}.ref", "delta": f"gradients.dx[{k}]"})
    return project


# ---------------------------------------------------------------------------------------- xor
def _accuracy(page: Page, prediction: str, labels: str, at, *, id: str = "accuracy", label: str = "accuracy",
              suffix: str = "", question: str = "prediction = label?") -> None:
    """Mean(Cast(Equal(prediction, labels))): the share of examples predicted right (a metric)."""
    col, row = at
    _add(page, "Equal", f"correct{suffix}", (col, row), label=question,
         wires={"x": prediction, "y": labels})
    _add(page, "Cast", f"correct_f{suffix}", (col + 1, row), label="1.0 / 0.0",
         attrs={"DstT": "float32"}, wires={"x": f"correct{suffix}.z"})
    _add(page, "Mean", id, (col + 2, row), label=label, wires={"input": f"correct_f{suffix}.y"})


def xor() -> Project:
    project = Project(metadata={
        "title": "XOR",
        "description": "A 2-2-1 sigmoid network learns XOR, with gradients computed automatically (enuSpace draws "
                       "this with 46 blocks and a hand-wired backward pass).",
        "training": {"xor": {"optimizer": "sgd", "lr": 4.0, "steps": 2000, "batch_size": None, "seed": 0}},
    })
    page = project.add_page("xor")
    page.text = _text(
        "XOR is the classic problem one straight line cannot solve: (0,0) and (1,1) are class 0, (0,1) and "
        "(1,0) class 1. A hidden layer of two sigmoid units solves it: 2 inputs, 2 hidden, 1 output, nine "
        "weights in all. enuSpace's tutorial draws this network with 46 blocks because it wires the "
        "backward pass by hand; here the runtime differentiates the forward blocks itself.",
        "Forward: hidden = Sigmoid(x · W1 + b1), logit = hidden · W2 + b2, prediction = Sigmoid(logit). "
        "The loss is the mean sigmoid cross-entropy of the logit against the label "
        "(SigmoidCrossEntropyWithLogits, stable for large logits); accuracy counts predictions on the "
        "right side of 0.5 and is plotted while training.",
        "Train it: blockflow train sample_projects/xor.bflow.json (plain gradient descent, lr 4, 2000 steps, "
        "the four examples as one batch; the large rate makes up for the sigmoids' small slopes). The loss "
        "falls from 0.72 to 0.0024 and all four predictions end on the right side of 0.5 (below 0.01 for "
        "(0,0) and (1,1), above 0.99 for the others). Another --seed starts from other random weights: "
        "about 9 starts in 10 solve XOR, the rest stop in a local minimum with outputs stuck near 0.5 or "
        "0.67, the classic trap of a network this small.")
    _add(page, "MakeXor", "data", (0, 2.2), label="XOR truth table", attrs={"n": 4})
    _add(page, "Variable", "W1", (1, 0), label="W1 (2x2)",
         attrs={"shape": [2, 2], "initializer": "random_uniform", "scale": 1.0, "seed": 1})
    _add(page, "MatMul", "matmul1", (2, 1.2), label="x · W1", wires={"a": "data.features", "b": "W1.ref"})
    _add(page, "Variable", "b1", (2, 0), label="b1 (2)", attrs={"shape": [2]})
    _add(page, "BiasAdd", "pre_hidden", (3, 1.2), label="x · W1 + b1",
         wires={"value": "matmul1.product", "bias": "b1.ref"})
    _add(page, "Sigmoid", "hidden", (4, 1.2), label="hidden (2 units)", wires={"x": "pre_hidden.output"})
    _add(page, "Variable", "W2", (4, 0), label="W2 (2x1)",
         attrs={"shape": [2, 1], "initializer": "random_uniform", "scale": 1.0, "seed": 2})
    _add(page, "MatMul", "matmul2", (5, 1.2), label="hidden · W2", wires={"a": "hidden.y", "b": "W2.ref"})
    _add(page, "Variable", "b2", (5, 0), label="b2 (1)", attrs={"shape": [1]})
    _add(page, "BiasAdd", "logit_col", (6, 1.2), label="hidden · W2 + b2",
         wires={"value": "matmul2.product", "bias": "b2.ref"})
    _add(page, "Reshape", "logit", (7, 1.2), label="logit (one per example)", inputs={"shape": np.int32([-1])},
         wires={"tensor": "logit_col.output"})
    # the labels run along the bottom: to the loss, and lower down to the accuracy
    _add(page, "Cast", "target", (1.1, 2.9), label="label as 0.0 / 1.0", attrs={"DstT": "float32"},
         wires={"x": "data.labels"})
    _add(page, "SigmoidCrossEntropyWithLogits", "xent", (8.1, 2.9), label="cross-entropy",
         wires={"labels": "target.y", "logits": "logit.output"})
    _add(page, "Mean", "loss", (9.9, 2.9), label="loss", wires={"input": "xent.output"})
    _add(page, "Sigmoid", "prediction", (8.1, 0.3), label="prediction (0..1)", wires={"x": "logit.output"})
    _add(page, "Round", "predicted_class", (9.5, 0.3), label="predicted class", wires={"x": "prediction.y"})
    _accuracy(page, "predicted_class.y", "target.y", (11.3, 3.9))
    page.loss = "loss"
    page.metrics = ["accuracy"]
    return project


# --------------------------------------------------------------------------- moons_classifier
MOONS = {"n": 400, "noise": 0.15, "test_fraction": 0.25, "batch_size": 32, "seed": 3}
HIDDEN = 16


def _moons_variables(page: Page, col: float) -> None:
    """W1 [2, HIDDEN], b1, W2 [HIDDEN, 2], b2 in a row along the top, over their layers."""
    _add(page, "Variable", "W1", (col, 0), label=f"W1 (2x{HIDDEN})",
         attrs={"shape": [2, HIDDEN], "initializer": "glorot_uniform", "seed": 1})
    _add(page, "Variable", "b1", (col + 1, 0), label=f"b1 ({HIDDEN})", attrs={"shape": [HIDDEN]})
    _add(page, "Variable", "W2", (col + 3, 0), label=f"W2 ({HIDDEN}x2)",
         attrs={"shape": [HIDDEN, 2], "initializer": "glorot_uniform", "seed": 2})
    _add(page, "Variable", "b2", (col + 4, 0), label="b2 (2)", attrs={"shape": [2]})


def _moons_mlp(page: Page, src: str, col: float, row: float, suffix: str = "", what: str = "x") -> str:
    """logits = Tanh(src · W1 + b1) · W2 + b2 (five blocks in a row); returns the logits port."""
    _add(page, "MatMul", f"matmul1{suffix}", (col, row), label=f"{what} · W1",
         wires={"a": src, "b": "W1.ref"})
    _add(page, "BiasAdd", f"pre_hidden{suffix}", (col + 1, row), label="+ b1",
         wires={"value": f"matmul1{suffix}.product", "bias": "b1.ref"})
    _add(page, "Tanh", f"hidden{suffix}", (col + 2, row), label=f"hidden{suffix.replace('_', ' ')} ({HIDDEN} tanh)",
         wires={"x": f"pre_hidden{suffix}.output"})
    _add(page, "MatMul", f"matmul2{suffix}", (col + 3, row), label="hidden · W2",
         wires={"a": f"hidden{suffix}.y", "b": "W2.ref"})
    _add(page, "BiasAdd", f"logits{suffix}", (col + 4, row), label=f"logits{suffix.replace('_', ' ')}",
         wires={"value": f"matmul2{suffix}.product", "bias": "b2.ref"})
    return f"logits{suffix}.output"


def _classifier_head(page: Page, logits: str, labels: str, at: dict, *, suffix: str = "",
                     loss_label: str = "loss", acc_label: str = "accuracy") -> None:
    """Mean cross-entropy of ``logits`` (the loss) and Mean(Cast(Equal(ArgMax(logits), labels))) (the
    accuracy); ``at``: grid places of "xent", "loss", "predicted" and "correct" (the accuracy's first block)."""
    _add(page, "SparseSoftmaxCrossEntropyWithLogits", f"xent{suffix}", at["xent"], label="cross-entropy",
         wires={"features": logits, "labels": labels})
    _add(page, "Mean", f"loss{suffix}", at["loss"], label=loss_label, wires={"input": f"xent{suffix}.loss"})
    _add(page, "ArgMax", f"predicted{suffix}", at["predicted"], label="predicted class",
         attrs={"output_type": "int32"}, inputs={"dimension": np.int32(1)}, wires={"input": logits})
    _accuracy(page, f"predicted{suffix}.output", labels, at["correct"], id=f"accuracy{suffix}",
              label=acc_label, suffix=suffix)


def moons_classifier() -> Project:
    project = Project(metadata={
        "title": "Moons classifier",
        "description": "A one-hidden-layer MLP separates scikit-learn's two moons (noise 0.15), trained with Adam "
                       "on batches of 32; accuracy is plotted, test accuracy ends above 95 %.",
        "training": {"moons": {"optimizer": "adam", "lr": 0.02, "steps": 600, "batch_size": 32, "seed": 0}},
    })
    page = project.add_page("moons")
    page.text = _text(
        "A small neural network classifier. MakeMoons makes 400 points on two interleaving half circles "
        "(noise 0.15): no straight line separates them, one hidden layer of 16 tanh units does. A quarter "
        "of the points are held out as the test part; training sees batches of 32 of the rest.",
        "Forward: logits = Tanh(x · W1 + b1) · W2 + b2, loss = mean softmax cross-entropy against the labels. "
        "The accuracy, Mean(Cast(Equal(ArgMax(logits), labels))), is a metric: it is plotted while "
        "training. It has no gradient (ArgMax and Equal are not differentiable), so it is watched, never "
        "optimised.",
        "Train it: blockflow train sample_projects/moons_classifier.bflow.json --eval-every 100 (Adam, lr "
        "0.02, 600 steps of 32 examples). The test loss ends near 0.05 and the 100 test points are all "
        "classified right (test accuracy 1.0; the plotted training accuracy is per batch, so it wobbles).")
    _add(page, "MakeMoons", "data", (0, 2.2), label="two moons (batches of 32)", attrs=dict(MOONS))
    _moons_variables(page, 1)
    logits = _moons_mlp(page, "data.features", 2, 1.2)
    _classifier_head(page, logits, "data.labels",
                     {"xent": (7, 2.2), "loss": (8.8, 2.2), "predicted": (9, 0.2), "correct": (10.2, 3.2)})
    page.loss = "loss"
    page.metrics = ["accuracy"]
    return project


# -------------------------------------------------------------------- fgsm_adversarial_training
EPS = 0.3


def _fgsm_page(page: Page, adversarial: bool) -> None:
    """One MLP composite used twice: ``mlp`` on x, ``mlp_adv`` (sharing mlp's Variables) on
    x_adv = StopGradient(x + eps·Sign(dloss/dx)). The clean pass runs along the top, the attack to the
    right of it, the adversarial pass under the clean one, the total loss under the attack."""
    _add(page, "MakeMoons", "data", (0, 0.9), label="two moons (batches of 32)", attrs=dict(MOONS))
    _add(page, "Identity", "x", (1.2, 3.0), label="x (the clean batch)", wires={"input": "data.features"})
    _add(page, "Identity", "labels", (3.7, 2.1), label="labels", wires={"input": "data.labels"})
    _add(page, "@MLP", "mlp", (2.4, 0.6), label="MLP (its own weights)", wires={"x": "x.output"})
    _classifier_head(page, "mlp.logits", "labels.output",
                     {"xent": (5.2, 0.6), "loss": (6.9, 0.6), "predicted": (3.7, -0.7), "correct": (5.0, -0.7)},
                     loss_label="clean loss", acc_label="accuracy")
    # FGSM: the step that raises the clean loss most, per coordinate, within eps
    _add(page, "Gradients", "grad_x", (8.2, 1.2), label="dloss/dx",
         wires={"ys[0]": "loss.output", "xs[0]": "data.features"})
    _add(page, "Sign", "direction", (9.3, 1.2), label="Sign(dloss/dx)", wires={"x": "grad_x.dx[0]"})
    _add(page, "Multiply", "step", (10.4, 1.2), label=f"eps · sign (eps {EPS:g})", inputs={"y": np.float32(EPS)},
         wires={"x": "direction.y"})
    _add(page, "Add", "perturbed", (11.6, 2.6), label="x + eps · sign", wires={"x": "x.output", "y": "step.z"})
    _add(page, "StopGradient", "x_adv", (12.7, 2.6), label="x_adv (a fixed input)", wires={"input": "perturbed.z"})
    _add(page, "@MLP", "mlp_adv", (2.4, 4.0), label="MLP (mlp's weights, shared)",
         attrs={"share_variables_with": "mlp"}, wires={"x": "x_adv.output"})
    _classifier_head(page, "mlp_adv.logits", "labels.output",
                     {"xent": (5.2, 4.0), "loss": (6.9, 4.0), "predicted": (3.7, 5.3), "correct": (5.0, 5.3)},
                     suffix="_adv", loss_label="adversarial loss", acc_label="robust accuracy")
    if adversarial:
        _add(page, "Add", "clean_plus_adv", (8.2, 4.0), label="clean + adversarial",
             wires={"x": "loss.output", "y": "loss_adv.output"})
        _add(page, "Multiply", "total_loss", (9.4, 4.0), label="loss: ½ (clean + adversarial)",
             inputs={"y": np.float32(0.5)}, wires={"x": "clean_plus_adv.z"})
        page.loss = "total_loss"
    else:
        page.loss = "loss"
    page.metrics = ["accuracy", "accuracy_adv"]


def fgsm_adversarial_training() -> Project:
    settings = {"optimizer": "adam", "lr": 0.02, "steps": 800, "batch_size": 32, "seed": 0}
    project = Project(metadata={
        "title": "FGSM adversarial training",
        "description": "The moons classifier trained on clean and FGSM examples, "
                       "x_adv = StopGradient(x + eps·Sign(dloss/dx)), against the same classifier trained on clean "
                       "examples only: robust accuracy compared.",
        "training": {"adversarial": dict(settings), "plain": dict(settings)},
    })
    use_layers(project, "Dense")
    project.composites["MLP"] = mlp_composite(HIDDEN)
    page = project.add_page("adversarial")
    page.text = _text(
        "Adversarial training with the fast gradient sign method (FGSM), drawn as TensorFlow 1 writes it: "
        "the moons classifier's clean loss is differentiated with respect to its input (Gradients, "
        "dloss/dx), and x_adv = StopGradient(x + eps · Sign(dloss/dx)) moves every point by eps = 0.3 in "
        "each coordinate, in the direction that raises the loss most. The classifier is one composite, MLP (two Dense "
        "layers with tanh between them; double-click it to open it), used twice: the instance mlp classifies "
        "x, and mlp_adv classifies x_adv with mlp's Variables (its share_variables_with is mlp: weight "
        "tying), so one set of four Variables is trained by both losses. The loss is ½ (clean loss + "
        "adversarial loss).",
        "What to look at: x_adv is made against the current model, at every step. StopGradient makes it a "
        "fixed input for the backward pass: the wires from the batch and from Gradients into x_adv carry no "
        "gradient (blockflow run lists them as cut), so training adjusts the weights to classify the "
        "attacked points, not the attack. (Sign and Gradients pass no gradient either, so here the weights "
        "would get the same gradient without the StopGradient; taking it out only lets the backward pass "
        "run on through x + eps · sign into the batch. It says that x_adv is data, not a function to "
        "differentiate.) Two metrics are plotted: accuracy (on x) and robust accuracy (on x_adv).",
        "Train it: blockflow train sample_projects/fgsm_adversarial_training.bflow.json --eval-every 200 "
        "(Adam, lr 0.02, 800 steps of 32). On the test part the robust accuracy ends at 0.77 against 0.56 "
        "for the same classifier trained on clean examples only (the page 'plain'), while the clean "
        "accuracy stays at 0.97 (1.0 for plain). The x and labels Identity blocks only name the batch's "
        "features and labels where they are used.")
    _fgsm_page(page, adversarial=True)
    page = project.add_page("plain")
    page.text = _text(
        "The same classifier and the same FGSM attack, but trained on the clean loss alone (the page's loss "
        "is the clean loss; x_adv is still made every step, only to measure the robust accuracy).",
        "Train it: blockflow train sample_projects/fgsm_adversarial_training.bflow.json --page plain "
        "--eval-every 200. It classifies clean test points perfectly (accuracy 1.0) but only 0.56 of the "
        "attacked ones: the boundary it learns runs close to the points, and a step of 0.3 crosses it. "
        "Compare with the first page (0.77).")
    _fgsm_page(page, adversarial=False)
    return project


# ------------------------------------------------------------------------ em_gaussian_mixture
#: the mixture the data is drawn from: (weight, mean, standard deviation)
MIXTURE = ((0.3, -2.5, 0.6), (0.45, 0.5, 0.8), (0.25, 3.0, 0.5))
N_POINTS = 240


def _mixture_data() -> np.ndarray:
    """N_POINTS values from MIXTURE, at evenly spaced quantiles of each component (no random
    numbers: the same on every machine and numpy version), rounded to 3 decimals."""
    from statistics import NormalDist

    out = []
    for weight, mean, sd in MIXTURE:
        n = round(weight * N_POINTS)
        dist = NormalDist(mean, sd)
        out += [round(dist.inv_cdf((i + 0.5) / n), 3) for i in range(n)]
    return np.array(out, np.float64)


def _em_page(page: Page, stop: bool) -> None:
    f64 = {"dtype": "float64"}
    _add(page, "Placeholder", "x", (0, 1.0), label=f"data x ({N_POINTS} points)", attrs={**f64, "shape": [N_POINTS]})
    page.feeds["x"] = _mixture_data()
    _add(page, "Reshape", "x_col", (1, 1.0), label="x as a column [N, 1]", inputs={"shape": np.int32([-1, 1])},
         wires={"tensor": "x.output"})
    _add(page, "Variable", "mu", (1, -0.2), label="means μ",
         attrs={**f64, "shape": [3], "initializer": "value", "initial_value": np.float64([-1.0, 0.0, 1.0])})
    _add(page, "Variable", "log_sigma", (1, 2.3), label="log-scales log σ", attrs={**f64, "shape": [3]})
    _add(page, "Subtract", "centred", (2, 0.8), label="x − μ", wires={"x": "x_col.output", "y": "mu.ref"})
    _add(page, "Exp", "sigma", (2, 1.9), label="σ = exp(log σ)", wires={"x": "log_sigma.ref"})
    _add(page, "RealDiv", "z", (3, 1.0), label="z = (x − μ) / σ", wires={"x": "centred.z", "y": "sigma.y"})
    _add(page, "Square", "z2", (4, 1.0), label="z²", wires={"x": "z.z"})
    _add(page, "Multiply", "half_z2", (5, 1.0), label="−½ z²", inputs={"y": np.float64(-0.5)}, wires={"x": "z2.y"})
    _add(page, "Subtract", "minus_log_sigma", (6, 2.2), label="− log σ",
         wires={"x": "half_z2.z", "y": "log_sigma.ref"})
    _add(page, "Add", "log_density", (7, 2.2), label="log N(x; μ, σ)",
         inputs={"y": np.float64(-0.5 * np.log(2 * np.pi))}, wires={"x": "minus_log_sigma.z"})
    _add(page, "Variable", "mix_logits", (5, 3.6), label="mixture logits", attrs={**f64, "shape": [3]})
    _add(page, "LogSoftmax", "log_pi", (6, 3.6), label="log π (mixture weights)",
         wires={"logits": "mix_logits.ref"})
    _add(page, "Add", "joint", (8, 2.4), label="log π_k N_k(x)",
         wires={"x": "log_density.z", "y": "log_pi.logsoftmax"})
    # joint's output runs straight to `weighted`; the responsibilities above it, log p(x) below
    _add(page, "LogSoftmax", "log_r", (9, 1.5), label="log responsibilities", wires={"logits": "joint.z"})
    _add(page, "Exp", "r", (10.1, 1.5), label="responsibilities r", wires={"x": "log_r.logsoftmax"})
    r_out = "r.y"
    if stop:
        _add(page, "StopGradient", "e_step", (11.2, 1.5), label="E-step: r held fixed", wires={"input": "r.y"})
        r_out = "e_step.output"
    _add(page, "Multiply", "weighted", (12.4, 2.26), label="r · log π_k N_k(x)", wires={"x": r_out, "y": "joint.z"})
    _add(page, "Sum", "per_point", (13.4, 2.26), label="Σ over components", inputs={"axis": np.int32(1)},
         wires={"input": "weighted.z"})
    _add(page, "Mean", "Q", (14.4, 2.26), label="Q: expected complete log-lik.", wires={"input": "per_point.output"})
    _add(page, "Negate", "loss", (15.8, 2.26), label="loss = −Q", wires={"x": "Q.output"})
    _add(page, "Subtract", "log_px", (10.1, 3.4), label="log p(x) = log π_k N_k − log r_k",
         wires={"x": "joint.z", "y": "log_r.logsoftmax"})
    _add(page, "Mean", "log_likelihood", (11.6, 3.4), label="log-likelihood (mean)", wires={"input": "log_px.z"})
    page.loss = "loss"
    page.metrics = ["log_likelihood"]


def em_gaussian_mixture() -> Project:
    settings = {"optimizer": "sgd", "lr": 1.5, "steps": 200, "batch_size": None, "seed": 0}
    project = Project(metadata={
        "title": "EM for a Gaussian mixture",
        "description": "Expectation-maximization for a 1-D mixture of three Gaussians: the E-step's responsibilities "
                       "go through StopGradient, the M-step is gradient ascent on the expected complete "
                       "log-likelihood; the log-likelihood rises at every step.",
        "training": {"em": dict(settings), "without_stop_gradient": dict(settings)},
    })
    page = project.add_page("em")
    page.text = _text(
        "Expectation-maximization (EM) for a mixture of three Gaussians in 1-D, with StopGradient marking "
        "the E-step. The data x are 240 points drawn from three Gaussians (weights 0.3, 0.45, 0.25; means "
        "−2.5, 0.5, 3; standard deviations 0.6, 0.8, 0.5). The Variables are the means μ, the log-scales "
        "log σ and the mixture logits (π = softmax of them); they start at μ = −1, 0, 1, σ = 1, π = ⅓.",
        "E-step: joint = log π_k + log N(x; μ_k, σ_k) for every point and component; the responsibilities "
        "r = softmax(joint) over the components say how much each component explains each point. "
        "StopGradient holds r fixed. M-step: Q = mean over points of Σ_k r · joint, the expected complete "
        "log-likelihood; the loss is −Q, so each training step is one gradient-ascent step on Q for the "
        "current r (a generalized EM step), and the next step's forward pass is the next E-step. The "
        "metric is the observed log-likelihood, mean log p(x), computed by Bayes' rule as joint − log r "
        "(the same for every k).",
        "What to look at: blockflow run shows that the wires into the StopGradient carry no gradient. At the "
        "current parameters the gradient of Q with r held fixed equals the gradient of the log-likelihood "
        "itself (compare --grad log_likelihood), and because each step raises Q, the log-likelihood "
        "rises at every step: train and watch the plot.",
        "Train it: blockflow train sample_projects/em_gaussian_mixture.bflow.json (gradient descent on −Q, "
        "lr 1.5, 200 steps). The log-likelihood rises at every one of the 200 steps, from −2.612 to "
        "−1.97399, the maximum (closed-form EM reaches the same value); μ ends at −2.50, 0.50, 3.00, σ at "
        "0.60, 0.81, 0.50 and π at 0.30, 0.45, 0.25. The page without_stop_gradient shows what the "
        "StopGradient is for.")
    _em_page(page, stop=True)
    page = project.add_page("without_stop_gradient")
    page.text = _text(
        "The same page without the StopGradient: the gradient of Q now also flows back through the "
        "responsibilities r into μ, σ and π. That is not the gradient of the log-likelihood: with r the "
        "posterior, Q = log-likelihood − H(r), where H(r) = −Σ r log r is the responsibilities' entropy, so "
        "minimising −Q through r also lowers H(r): it rewards certain (hard) assignments as well as a good "
        "fit. At the start the gradient already differs: dloss/dlog σ of the middle component is +0.43 here "
        "against −0.25 with StopGradient (it narrows the middle Gaussian instead of widening it).",
        "EM keeps the E-step fixed because then Q, plus the entropy of the fixed r (a constant), is a lower "
        "bound on the log-likelihood that touches it at the current parameters: raising Q raises the "
        "log-likelihood, and Q's gradient there is the log-likelihood's. Differentiating through r optimises "
        "a different objective, with no such guarantee.",
        "Train it: blockflow train sample_projects/em_gaussian_mixture.bflow.json --page without_stop_gradient "
        "(the same settings). The log-likelihood falls at 37 of the 200 steps (it oscillates early on) and "
        "ends at −1.98283, below EM's −1.97399: the middle component ends too narrow (σ 0.67 instead of 0.81).")
    _em_page(page, stop=False)
    return project


# ----------------------------------------------------------------- rbm_contrastive_divergence
SIDE, N_HIDDEN = 6, 16


def bars_and_stripes(side: int = SIDE) -> np.ndarray:
    """Every side x side image whose rows are each all on or all off (stripes), or whose columns are
    (bars): 2·2^side − 2 distinct patterns (the empty and the full image are both), flattened."""
    patterns = []
    for bits in range(2 ** side):
        line = np.array([(bits >> i) & 1 for i in range(side)], np.float32)
        patterns.append(np.repeat(line[:, None], side, axis=1))    # stripes: row i all line[i]
    for bits in range(1, 2 ** side - 1):
        line = np.array([(bits >> i) & 1 for i in range(side)], np.float32)
        patterns.append(np.repeat(line[None, :], side, axis=0))    # bars: column j all line[j]
    return np.stack(patterns).reshape(len(patterns), side * side)


def _mean_free_energy(page: Page, pre_hidden: str, at, suffix: str, what: str) -> None:
    """mean −F(v) = mean over the batch of Σ_j softplus(v·W + b_h)_j (three blocks in a row)."""
    col, row = at
    _add(page, "Softplus", f"softplus{suffix}", (col, row), label="softplus(v·W + b_h)",
         wires={"features": pre_hidden})
    _add(page, "Sum", f"neg_free_energy{suffix}", (col + 1, row), label="−F(v) = Σ over hidden units",
         inputs={"axis": np.int32(1)}, wires={"input": f"softplus{suffix}.activations"})
    _add(page, "Mean", f"mean_neg_F{suffix}", (col + 2.2, row), label=f"mean −F({what})",
         wires={"input": f"neg_free_energy{suffix}.output"})


def _rbm_page(page: Page, stop: bool) -> None:
    """One Gibbs step as a descending staircase (v0 → h0 → v1 → h1) with the Variables under it on
    the left (their wires rise to the blocks that use them), the free energies beside each step."""
    data = bars_and_stripes()
    _add(page, "Placeholder", "v0", (0, -1.5), label=f"data v0 ({len(data)} patterns)",
         attrs={"dtype": "float32", "shape": [len(data), SIDE * SIDE]})
    page.feeds["v0"] = data
    _add(page, "Variable", "W", (0.5, 4.6), label=f"weights W ({SIDE * SIDE}x{N_HIDDEN})",
         attrs={"shape": [SIDE * SIDE, N_HIDDEN], "initializer": "random_normal", "stddev": 0.01, "seed": 1})
    _add(page, "Variable", "b_h", (1.5, 5.4), label="hidden bias b_h", attrs={"shape": [N_HIDDEN]})
    _add(page, "MatMul", "vW", (2, 1.0), label="v0 · W", wires={"a": "v0.output", "b": "W.ref"})
    _add(page, "BiasAdd", "pre_h0", (3, 1.0), label="v0 · W + b_h", wires={"value": "vW.product", "bias": "b_h.ref"})
    _add(page, "Sigmoid", "p_h0", (4, 1.0), label="P(h = 1 | v0)", wires={"x": "pre_h0.output"})
    _add(page, "Bernoulli", "h0", (5, 1.0), label="h0 ~ Bernoulli", attrs={"seed": 1}, wires={"probs": "p_h0.y"})
    _add(page, "MatMul", "hWt", (6, 2.2), label="h0 · Wᵀ", attrs={"transpose_b": True},
         wires={"a": "h0.output", "b": "W.ref"})
    _add(page, "Sigmoid", "p_v1", (7, 2.2), label="reconstruction P(v = 1 | h0)", wires={"x": "hWt.product"})
    v1 = "p_v1.y"
    if stop:
        _add(page, "StopGradient", "v1", (8.4, 2.2), label="Gibbs sample v1 (fixed)", wires={"input": "p_v1.y"})
        v1 = "v1.output"
    _add(page, "MatMul", "v1W", (9.6, 3.1), label="v1 · W", wires={"a": v1, "b": "W.ref"})
    _add(page, "BiasAdd", "pre_h1", (10.6, 3.4), label="v1 · W + b_h",
         wires={"value": "v1W.product", "bias": "b_h.ref"})
    _add(page, "SquaredDifference", "recon_sq", (8.4, -0.6), label="(v0 − v1)²",
         wires={"x": "v0.output", "y": "p_v1.y"})
    _add(page, "Mean", "reconstruction_error", (9.6, -0.6), label="reconstruction error",
         wires={"input": "recon_sq.z"})
    _mean_free_energy(page, "pre_h0.output", (4, -0.2), "_data", "data")
    _mean_free_energy(page, "pre_h1.output", (11.6, 3.4), "_sample", "sample")
    _add(page, "Subtract", "loss", (15, 1.6), label="loss = F̄(data) − F̄(sample)",
         wires={"x": "mean_neg_F_sample.output", "y": "mean_neg_F_data.output"})
    page.loss = "loss"
    page.metrics = ["reconstruction_error"]


def rbm_contrastive_divergence() -> Project:
    settings = {"optimizer": "sgd", "lr": 0.3, "steps": 1000, "batch_size": None, "seed": 0}
    project = Project(metadata={
        "title": "RBM trained by contrastive divergence (CD-1)",
        "description": "A restricted Boltzmann machine learns 6x6 bars and stripes: loss = mean free energy of the "
                       "data − mean free energy of a StopGradient'd Gibbs sample; the reconstruction error falls.",
        "training": {"cd1": dict(settings), "without_stop_gradient": dict(settings)},
    })
    page = project.add_page("cd1")
    page.text = _text(
        "A restricted Boltzmann machine (RBM) trained by contrastive divergence (CD-1). The data v0 are all "
        "126 6x6 \"bars and stripes\" images (every row on or off, or every column), 36 binary pixels each; "
        "16 hidden units are connected to every pixel by the weights W. The energy of a pair (v, h) is "
        "−v·W·h − b_h·h and the free energy of an image is F(v) = −Σ_j softplus(v·W + b_h)_j (no visible "
        "bias here: every pixel is on in exactly half of the images, and the diagram stays small).",
        "One Gibbs step, down the staircase: P(h = 1 | v0) = Sigmoid(v0·W + b_h), h0 ~ Bernoulli of that, "
        "and the reconstruction v1 = Sigmoid(h0·Wᵀ), the probabilities the model gives each pixel. v1 goes "
        "through StopGradient: it is a sample from the model, a constant for the backward pass. The loss "
        "F̄(data) − F̄(sample) (means over the batch) then has CD-1's gradient: it lowers the free energy of "
        "the data and raises that of the model's own reconstruction. The loss value itself means little "
        "(it goes negative); watch the reconstruction error, mean (v0 − v1)², the page's metric.",
        "Train it: blockflow train sample_projects/rbm_contrastive_divergence.bflow.json (gradient descent, "
        "lr 0.3, 1000 steps, all 126 images each step). The reconstruction error falls from 0.250 to about "
        "0.010 (less than a twentieth). Compare the page without_stop_gradient.")
    _rbm_page(page, stop=True)
    page = project.add_page("without_stop_gradient")
    page.text = _text(
        "The same RBM with the reconstruction used directly, without StopGradient. The sample's free energy "
        "is now differentiated through the Gibbs step as well: back through Sigmoid and h0·Wᵀ into W (h0 "
        "itself is a Bernoulli sample, which passes no gradient). That extra gradient does not belong to "
        "CD: it changes W so as to make the model's reconstructions of the data less likely under the model, "
        "working against the reconstruction.",
        "Train it: blockflow train sample_projects/rbm_contrastive_divergence.bflow.json --page "
        "without_stop_gradient (the same settings). The reconstruction error only falls to about 0.043, "
        "five times CD-1's, and levels off near 0.04 (CD-1 keeps improving: 0.0016 after 3000 steps).")
    _rbm_page(page, stop=False)
    return project


# ------------------------------------------------------------------ straight_through_estimator
TRUE_WEIGHTS = (2.0, -1.0, 3.0)


def _cube() -> np.ndarray:
    """The 27 points of {-1, 0, 1}³, one per row."""
    import itertools

    return np.array(list(itertools.product((-1.0, 0.0, 1.0), repeat=3)), np.float32)


def _ste_page(page: Page, kind: str) -> None:
    """kind: "ste" (w + StopGradient(Round(w) − w)), "round_only" (Round(w)), "without_stop_gradient"
    (w + (Round(w) − w))."""
    x = _cube()
    _add(page, "Placeholder", "x", (4, -0.5), label="inputs x (27 x 3)", attrs={"dtype": "float32", "shape": [27, 3]})
    page.feeds["x"] = x
    _add(page, "Placeholder", "y", (4.6, 3.0), label="targets y = x · [2, −1, 3]ᵀ",
         attrs={"dtype": "float32", "shape": [27, 1]})
    page.feeds["y"] = (x @ np.array(TRUE_WEIGHTS, np.float32)).reshape(-1, 1)
    _add(page, "Variable", "w", (0, 1.4), label="weights w (3x1)",
         attrs={"shape": [3, 1], "initializer": "value", "initial_value": _f32([[0.4], [0.3], [-0.2]])})
    _add(page, "Round", "rounded", (1, 0.4), label="Round(w)", wires={"x": "w.ref"})
    if kind == "round_only":
        w_q = "rounded.y"
    else:
        _add(page, "Subtract", "rounding_step", (2, 0.8), label="Round(w) − w",
             wires={"x": "rounded.y", "y": "w.ref"})
        step = "rounding_step.z"
        if kind == "ste":
            _add(page, "StopGradient", "stop", (3, 0.8), label="no gradient back", wires={"input": "rounding_step.z"})
            step = "stop.output"
        _add(page, "Add", "w_q", (4, 1.6), label="quantised w", wires={"x": "w.ref", "y": step})
        w_q = "w_q.z"
    _add(page, "MatMul", "prediction", (5.2, 0.8), label="x · quantised w", wires={"a": "x.output", "b": w_q})
    _add(page, "SquaredDifference", "squared_error", (6.4, 1.6), label="(prediction − y)²",
         wires={"x": "prediction.product", "y": "y.output"})
    _add(page, "Mean", "loss", (7.6, 1.6), label="loss: mean squared error", wires={"input": "squared_error.z"})
    _accuracy(page, "prediction.product", "y.output", (6.4, 3.0), id="exact", label="share predicted exactly",
              question="prediction = y?")
    page.loss = "loss"
    page.metrics = ["exact"]


def straight_through_estimator() -> Project:
    settings = {"optimizer": "sgd", "lr": 0.1, "steps": 100, "batch_size": None, "seed": 0}
    project = Project(metadata={
        "title": "Straight-through estimator",
        "description": "w + StopGradient(Round(w) − w): rounds in the forward pass, passes the gradient straight "
                       "through in the backward pass, so weights used rounded can still be learned.",
        "training": {"ste": dict(settings), "round_only": dict(settings), "without_stop_gradient": dict(settings)},
    })
    texts = {
        "ste": (
            "The straight-through estimator: w_q = w + StopGradient(Round(w) − w). Forward, the two w's cancel "
            "and w_q is Round(w); backward, StopGradient passes nothing, so the gradient reaching w_q goes "
            "straight to w, as if the rounding were not there (dw = dw_q). Round alone passes no gradient at "
            "all: its derivative is zero almost everywhere.",
            "The task: learn integer weights. The inputs x are the 27 points of {−1, 0, 1}³ and the targets "
            "y = x · [2, −1, 3]ᵀ; the model predicts x · w_q with the weights used rounded. w starts at "
            "[0.4, 0.3, −0.2], which rounds to 0. The metric is the share of targets predicted exactly.",
            "Train it: blockflow train sample_projects/straight_through_estimator.bflow.json (gradient "
            "descent, lr 0.1, 100 steps). The loss falls from 9.33 to exactly 0 at step 13 and every target "
            "is then predicted exactly: w ends at [1.6, −0.63, 2.6], which rounds to [2, −1, 3]. Once the "
            "rounded weights are right the loss and its gradient are 0 and w stops moving. Compare the "
            "pages round_only and without_stop_gradient, where nothing is learned."),
        "round_only": (
            "The weights used through Round alone. Round is not differentiable (TensorFlow gives it no "
            "gradient), so no gradient reaches w: blockflow run shows the wire into Round as cut and w gets "
            "none.",
            "Train it: blockflow train sample_projects/straight_through_estimator.bflow.json --page round_only. "
            "Nothing changes: the loss stays at 9.33 for all 100 steps and w stays at [0.4, 0.3, −0.2]."),
        "without_stop_gradient": (
            "w + (Round(w) − w) without the StopGradient. The forward pass is the same rounding, but now the "
            "gradient flows along both paths from w: +g through the first input of the Add and −g back "
            "through the Subtract. They cancel exactly, so w's gradient is 0 (not missing: zero), and again "
            "nothing is learned: the loss stays at 9.33. StopGradient is what makes the two paths differ.",
            "Train it: blockflow train sample_projects/straight_through_estimator.bflow.json --page "
            "without_stop_gradient."),
    }
    for kind in ("ste", "round_only", "without_stop_gradient"):
        page = project.add_page(kind)
        page.text = _text(*texts[kind])
        _ste_page(page, kind)
    return project


SAMPLE_BUILDERS = {f.__name__: f for f in (
    stable_softmax, basic_matmul, linear_regression, xor, moons_classifier, fgsm_adversarial_training,
    em_gaussian_mixture, rbm_contrastive_divergence, straight_through_estimator, digits_cnn,
    vanishing_gradients, reverse_attention, resnet_gradients)}


#: how far a stored float may be from the one this machine computes (relative to the array's
#: largest value): resnet_gradients calibrates its batch norms with float64 convolutions, whose
#: last bits depend on the BLAS kernel the CPU gets (an AMD EPYC machine's differ from those of
#: the machine the file was written on)
FLOAT_RTOL = 1e-9


def same_sample(committed: str, made: str) -> bool:
    """Whether a committed sample is what the script makes here: the same text, or the same JSON
    but for float arrays within FLOAT_RTOL (every text, id, shape and dtype exactly equal)."""
    return committed == made or _same_json(json.loads(committed), json.loads(made))


def _same_json(a, b) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return False
        if {"dtype", "shape"} <= a.keys() and ("data" in a or "base64" in a):
            return _same_array(a, b)
        return all(_same_json(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_json(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def _same_array(a: dict, b: dict) -> bool:
    if a["dtype"] != b["dtype"] or a["shape"] != b["shape"]:
        return False
    try:
        x, y = decode_array_at(a, "committed"), decode_array_at(b, "made")
    except Invalid:     # not an array the format reads: only text equality would have passed it
        return False
    if x.dtype.kind != "f":
        return np.array_equal(x, y)
    scale = float(np.max(np.abs(x), initial=0.0))
    return bool(np.array_equal(np.isfinite(x), np.isfinite(y))
                and np.allclose(x, y, rtol=0, atol=FLOAT_RTOL * max(scale, np.finfo(x.dtype).tiny), equal_nan=True))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only compare with the committed files")
    args = parser.parse_args(argv)
    stale = []
    for name, build in SAMPLE_BUILDERS.items():
        path = SAMPLES / f"{name}.bflow.json"
        text = dumps_project(build())
        if args.check:
            if not path.exists() or not same_sample(path.read_text(encoding="utf-8"), text):
                stale.append(path.name)
        else:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(ROOT)}")
    if stale:
        print("stale samples (run python tools/make_samples.py): " + ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
