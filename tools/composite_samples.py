"""Issue 14's samples, built from composites: the digits CNN, vanishing gradients and a tiny
attention model (the FGSM sample's MLP is here too). tools/make_samples.py writes them.

The layers come from the layer library (blocks/layers, blockflow.io.library): inserting one
embeds its definition in the sample with its origin, as the editor's palette does, so a sample
runs the same whatever later versions of the library ship.
"""
from __future__ import annotations

import numpy as np

from blockflow.composite import Composite
from blockflow.project import Page, Project
from blockflow.spec import Attr

DX, DY = 200.0, 130.0


def wire(page: Page, src: str, dst: str) -> None:
    (s, sp), (d, dp) = src.split("."), dst.split(".")
    page.connect(s, sp, d, dp)


def add(page: Page, block: str, id: str, at, *, label: str = "", attrs=None, inputs=None, wires=None) -> None:
    """A node at grid place ``at`` = (column, row), its inputs wired from ``{port: "node.port"}``."""
    col, row = at
    page.add_node(block, id=id, attrs=attrs or {}, inputs=inputs, position=(col * DX, row * DY), label=label)
    for port, src in (wires or {}).items():
        wire(page, src, f"{id}.{port}")


def text(*paragraphs: str) -> str:
    return "\n\n".join(" ".join(p.split()) for p in paragraphs)


def P(name: str) -> dict:
    return {"$param": name}


# ------------------------------------------------------------------------------------ layers
def use_layers(project: Project, *names: str) -> None:
    """Insert the library's layers ``names`` into ``project`` under their own names."""
    from blockflow.io.library import default_library, insert_layer

    library = default_library()
    for name in names:
        inserted, _ = insert_layer(project, library, name)
        if inserted != name:       # a sample is built from scratch: no name is taken
            raise RuntimeError(f"layer {name} went in as {inserted}")


def _input(p: Page, shape, at=(0, 0), name: str = "x", doc: str = "") -> None:
    add(p, "Input", name, at, attrs={"name": name, "dtype": "float32", "shape": shape, "doc": doc})


def _output(p: Page, src: str, at, name: str = "y", doc: str = "") -> None:
    add(p, "Output", name, at, attrs={"name": name, "doc": doc}, wires={"input": src})


def mlp_composite(hidden: int) -> Composite:
    """The moons classifier as one composite of two library Dense layers: logits = Dense(tanh Dense(x))."""
    comp = Composite("MLP", doc="A one-hidden-layer perceptron: logits = Dense_classes(tanh(Dense_hidden(x))).",
                     params=[Attr("hidden", "int", hidden, min=1, doc="hidden tanh units"),
                             Attr("classes", "int", 2, min=1, doc="output logits")])
    p = comp.page
    _input(p, ["batch", "features"], doc="[batch, features]")
    add(p, "@Dense", "hidden_layer", (1, 0), label="Dense (hidden, tanh)",
        attrs={"units": P("hidden"), "activation": "tanh"}, wires={"x": "x.output"})
    add(p, "@Dense", "output_layer", (2, 0), label="Dense (logits)", attrs={"units": P("classes")},
        wires={"x": "hidden_layer.y"})
    _output(p, "output_layer.y", (3, 0), name="logits", doc="[batch, classes]")
    return comp


# -------------------------------------------------------------------------- digits_cnn
DIGITS = {"name": "digits", "layout": "images", "scaling": "max", "batch_size": 32, "test_fraction": 0.25,
          "seed": 0}


def accuracy(page: Page, logits: str, labels: str, at, suffix: str = "") -> None:
    """Mean(Cast(Equal(ArgMax(logits), labels))): the share of examples classified right."""
    col, row = at      # the labels come from the left, under ArgMax: Equal sits a row lower
    add(page, "ArgMax", f"predicted{suffix}", (col, row), label="predicted class",
        attrs={"output_type": "int32"}, inputs={"dimension": np.int32(1)}, wires={"input": logits})
    add(page, "Equal", f"correct{suffix}", (col + 1.1, row + 1.1), label="predicted = label?",
        wires={"x": f"predicted{suffix}.output", "y": labels})
    add(page, "Cast", f"correct_f{suffix}", (col + 2.2, row + 1.1), label="1.0 / 0.0", attrs={"DstT": "float32"},
        wires={"x": f"correct{suffix}.z"})
    add(page, "Mean", f"accuracy{suffix}", (col + 3.3, row + 1.1), label="accuracy",
        wires={"input": f"correct_f{suffix}.y"})


def digits_cnn() -> Project:
    settings = {"optimizer": "adam", "lr": 0.005, "steps": 1200, "batch_size": 32, "seed": 0}
    project = Project(metadata={
        "title": "Digits CNN",
        "description": "A small convolutional network reads scikit-learn's 8x8 handwritten digits (1,797 images, "
                       "10 classes): two Conv2D layers with max pooling, Flatten, Dense; test accuracy above 95 %.",
        "training": {"cnn": dict(settings)},
    })
    use_layers(project, "Conv2D", "MaxPooling2D", "Flatten", "Dense", "SparseSoftmaxCrossEntropy")
    page = project.add_page("cnn")
    page.text = text(
        "A convolutional network on real images: the 8x8 handwritten digits that scikit-learn ships "
        "(1,797 images, pixel values 0..16, ten classes). The PackageDataset block loads them from the "
        "installed package (nothing is stored with the project; pip install 'blockflow[datasets]' if "
        "scikit-learn is missing), holds out a quarter as the test part (450 images, a seeded split) and "
        "scales the pixels to 0..1.",
        "The model is built from the layer library's layers, each a composite (double-click one to see its "
        "blocks): Conv2D (16 filters of 3x3, relu) keeps the 8x8 size, MaxPooling2D halves it to 4x4, a "
        "second Conv2D (32 filters) and MaxPooling2D give 2x2x32, Flatten makes 128 features and Dense "
        "gives the 10 logits. "
        "The loss is the mean softmax cross-entropy (the library's SparseSoftmaxCrossEntropy); accuracy "
        "is plotted.",
        "What to look at: after a backward run (Run > Backward) the wires show the gradient reaching "
        "both Conv2D layers, and each layer's badge gives the gradient norm of its kernel and bias.",
        "Train it: blockflow train sample_projects/digits_cnn.bflow.json --eval-every 400 (Adam, lr 0.005, "
        "1200 steps of 32 images, about 28 epochs, a few seconds). The test accuracy ends at 0.99 (444 of "
        "the 449 held-out images).")
    add(page, "PackageDataset", "digits", (0, 1.2), label="8x8 digits (scikit-learn)", attrs=dict(DIGITS))
    conv = {"kernel_size": 3, "padding": "SAME", "activation": "relu"}
    add(page, "@Conv2D", "conv1", (1.2, 0), label="16 filters 3x3, relu", attrs={"filters": 16, **conv},
        wires={"x": "digits.features"})
    add(page, "@MaxPooling2D", "pool1", (2.4, 0), label="2x2 → 4x4", wires={"x": "conv1.y"})
    add(page, "@Conv2D", "conv2", (3.6, 0), label="32 filters 3x3, relu", attrs={"filters": 32, **conv},
        wires={"x": "pool1.y"})
    add(page, "@MaxPooling2D", "pool2", (4.8, 0), label="2x2 → 2x2", wires={"x": "conv2.y"})
    add(page, "@Flatten", "flatten", (6, 0), label="128 features", wires={"x": "pool2.y"})
    add(page, "@Dense", "logits", (7.2, 0), label="10 logits", attrs={"units": 10}, wires={"x": "flatten.y"})
    add(page, "@SparseSoftmaxCrossEntropy", "loss", (8.6, 1.2), label="loss: mean cross-entropy",
        wires={"logits": "logits.y", "labels": "digits.labels"})
    accuracy(page, "logits.y", "digits.labels", (8.4, 2.6))
    page.loss = "loss"
    page.metrics = ["accuracy"]
    return project


# ----------------------------------------------------------------------- vanishing_gradients
WIDTH, DEPTH = 16, 10
BLOBS = {"n": 600, "classes": 4, "dims": WIDTH, "spread": 2.0, "batch_size": 0, "test_fraction": 0.25, "seed": 1}


def _vanishing_page(page: Page, kind: str) -> None:
    """DEPTH layers of WIDTH units (kind: sigmoid, relu or residual), then Dense logits: each layer a
    Dense with its activation under it, one layer per column step, so the gradient's colour can be
    followed from the loss on the right back to the data on the left."""
    step = 1.3
    # the data sits low on the left: its labels run to the loss and the accuracy in lanes under the stack
    add(page, "MakeBlobs", "data", (0, 2.4), label=f"4 blobs in {WIDTH}-D", attrs=dict(BLOBS))
    src = "data.features"
    if kind == "residual":
        for k in range(1, DEPTH // 2 + 1):
            add(page, "@ResidualDense", f"block{k}", (step * (2 * k - 0.5), 0.55),
                label=f"layers {2 * k - 1}-{2 * k} + skip", attrs={"units": WIDTH}, wires={"x": src})
            src = f"block{k}.y"
    else:
        block, arg, port = {"sigmoid": ("Sigmoid", "x", "y"), "relu": ("Relu", "features", "activations")}[kind]
        for k in range(1, DEPTH + 1):
            add(page, "@Dense", f"layer{k}", (step * k, 0), label=f"layer {k}", attrs={"units": WIDTH},
                wires={"x": src})
            add(page, block, f"act{k}", (step * k + 0.55, 1.1), label=kind, wires={arg: f"layer{k}.y"})
            src = f"act{k}.{port}"
    head = step * (DEPTH + 1)
    add(page, "@Dense", "logits", (head, 0.55), label="Dense 4 (logits)", attrs={"units": 4}, wires={"x": src})
    add(page, "@SparseSoftmaxCrossEntropy", "loss", (head + 1.3, 2.4), label="loss: mean cross-entropy",
        wires={"logits": "logits.y", "labels": "data.labels"})
    add(page, "ArgMax", "predicted", (head + 3.0, 1.0), label="predicted class",
        attrs={"output_type": "int32"}, inputs={"dimension": np.int32(1)}, wires={"input": "logits.y"})
    add(page, "Equal", "correct", (head + 3.0, 3.6), label="predicted = label?",
        wires={"x": "predicted.output", "y": "data.labels"})
    add(page, "Cast", "correct_f", (head + 4.1, 3.6), label="1.0 / 0.0", attrs={"DstT": "float32"},
        wires={"x": "correct.z"})
    add(page, "Mean", "accuracy", (head + 5.2, 3.6), label="accuracy", wires={"input": "correct_f.y"})
    page.loss = "loss"
    page.metrics = ["accuracy"]


VANISHING_TEXTS = {
    "sigmoid": (
        "Vanishing gradients, for a class to see. The same network is drawn on three pages: ten Dense "
        "layers of 16 units (the layer library's Dense, a composite: double-click one to open it) between the data (600 points "
        "in four blobs, 16 features each) and a Dense layer giving four logits; only the activation "
        "between the layers changes. On this page it is the sigmoid.",
        "What to look at: Run > Backward and follow the wires from the loss back to the data. Each sigmoid "
        "passes on at most a quarter of the gradient it receives (its slope is at most 1/4), so the "
        "colour fades layer by layer: the gradient norm of layer 10's kernel is 0.047, of layer 5's "
        "3.1e-05 and of layer 1's 1.7e-06, thirty thousand times less than layer 10's. The first layers "
        "hardly learn.",
        "Train it: blockflow train sample_projects/vanishing_gradients.bflow.json (plain gradient descent, "
        "lr 0.1, 300 steps, all 450 training points each step). The loss only goes from 1.394 to 1.383 "
        "and the test accuracy stays at chance (0.19; four classes). Then look at the pages relu and "
        "residual."),
    "relu": (
        "The same ten layers with ReLU, max(x, 0), between them. Its slope is 1 wherever a unit is active, "
        "so the gradient is not shrunk by the activation: layer 1's kernel gets a gradient of norm 0.048, "
        "about as much as layer 10's (0.084), and the colour holds along the whole stack.",
        "Train it: blockflow train sample_projects/vanishing_gradients.bflow.json --page relu (the same "
        "settings). The loss falls from 1.386 to 0.0006 and the test accuracy reaches 0.99. (ReLU has "
        "its own trap: a unit whose input stays negative passes no gradient at all, a dead unit.)"),
    "residual": (
        "The same ten ReLU layers grouped in five residual blocks (ResidualDense: y = relu(x + F(x)), F "
        "two Dense layers), as ResNets are built. The skip connection x + F(x) gives the gradient a "
        "path around every pair of layers on which nothing shrinks it: open a block after a backward run "
        "and see the gradient arrive at x along both the skip and F.",
        "The first layer's kernel (block1/W1) gets a gradient of norm 4.0, more than the sigmoid stack's "
        "by a factor of two million and 80 times the plain ReLU stack's: sigmoid << ReLU < residual, "
        "in that order, at every layer.",
        "Train it: blockflow train sample_projects/vanishing_gradients.bflow.json --page residual (the same "
        "settings). The loss falls from 2.515 to 0.0008 and the test accuracy reaches 0.99."),
}


def vanishing_gradients() -> Project:
    settings = {"optimizer": "sgd", "lr": 0.1, "steps": 300, "batch_size": None, "seed": 0}
    project = Project(metadata={
        "title": "Vanishing gradients",
        "description": "The same 10-layer network three times: with sigmoid the gradient fades layer by layer, "
                       "with ReLU it keeps more, with residual connections it flows to the first layer.",
        "training": {kind: dict(settings) for kind in ("sigmoid", "relu", "residual")},
    })
    use_layers(project, "Dense", "ResidualDense", "SparseSoftmaxCrossEntropy")
    for kind in ("sigmoid", "relu", "residual"):
        page = project.add_page(kind)
        page.text = text(*VANISHING_TEXTS[kind])
        _vanishing_page(page, kind)
    return project


# --------------------------------------------------------------------------- reverse_attention
SEQ, VOCAB, MODEL, BATCH = 6, 10, 32, 64


def reverse_attention() -> Project:
    settings = {"optimizer": "adam", "lr": 0.01, "steps": 600, "batch_size": None, "seed": 0}
    project = Project(metadata={
        "title": "Attention reverses a sequence",
        "description": f"A one-layer attention model learns to reverse sequences of {SEQ} digits: token and "
                       "position Embeddings, MultiHeadAttention, Dense; every step draws new sequences.",
        "training": {"reverse": dict(settings)},
    })
    use_layers(project, "Embedding", "MultiHeadAttention", "Dense", "SparseSoftmaxCrossEntropy")
    page = project.add_page("reverse")
    page.text = text(
        f"A tiny attention model learns to reverse a sequence: given {SEQ} random digits such as 0 5 7 8 2 3, "
        "it must output 3 2 8 7 5 0. Every training step draws 64 new sequences (RandomUniform: its "
        "stream follows the step), so the model cannot memorise them; the accuracy plotted is on "
        "sequences it has never seen.",
        f"The model is built from the layer library's layers (composites; double-click one to open it). One Embedding turns "
        f"each digit into a vector of {MODEL}, another gives each position its own vector, and their sum "
        "goes to MultiHeadAttention (self-attention: query, key and value are the same sequence; 2 heads "
        f"of 16). A Dense layer reads each position's result and gives {VOCAB} logits, one per digit; the "
        "loss is the mean softmax cross-entropy against the reversed sequence (the Reverse block).",
        "What to look at: reversing needs no arithmetic, only looking in the right place. After training, "
        "look at the attention block's scores output (the Values panel, or Run with it selected): "
        f"output position i attends to input position {SEQ - 1} − i with weight 0.9 or more, an "
        "anti-diagonal, in both heads. The positions' Embedding is what makes that possible: wire the "
        "digits' vectors straight into the attention and the accuracy stalls near 0.36 (loss 1.57), "
        "because attention then sees a bag of digits and can only guess which goes where.",
        "Train it: blockflow train sample_projects/reverse_attention.bflow.json (Adam, lr 0.01, 600 "
        "steps, about 3 seconds). The loss falls from 2.30 (a guess among ten digits) to 0.00001 and "
        "the accuracy reaches 1.0: every digit of every new sequence is put in its place.")
    add(page, "RandomUniform", "tokens", (0, 1.2), label=f"{BATCH} random sequences of {SEQ} digits",
        attrs={"dtype": "int32", "seed": 1},
        inputs={"shape": np.int32([BATCH, SEQ]), "minval": np.int32(0), "maxval": np.int32(VOCAB)})
    add(page, "@Embedding", "token_vectors", (1.2, 1.2), label=f"Embedding {VOCAB} → {MODEL}",
        attrs={"input_dim": VOCAB, "output_dim": MODEL}, wires={"ids": "tokens.output"})
    add(page, "Const", "positions", (0, 0), label=f"positions 0..{SEQ - 1}",
        attrs={"dtype": "int32", "value": np.arange(SEQ, dtype=np.int32).reshape(1, SEQ)})
    add(page, "@Embedding", "position_vectors", (1.2, 0), label=f"Embedding {SEQ} → {MODEL}",
        attrs={"input_dim": SEQ, "output_dim": MODEL}, wires={"ids": "positions.output"})
    add(page, "Add", "h", (2.4, 0.6), label="token + position", wires={"x": "token_vectors.y", "y": "position_vectors.y"})
    add(page, "@MultiHeadAttention", "attention", (3.6, 0.6), label="self-attention, 2 heads",
        attrs={"num_heads": 2, "key_dim": 16}, wires={"query": "h.z", "key": "h.z", "value": "h.z"})
    add(page, "Reshape", "rows", (5.3, 0.6), label="one row per position", inputs={"shape": np.int32([-1, MODEL])},
        wires={"tensor": "attention.output"})
    add(page, "@Dense", "logits", (6.5, 0.6), label=f"Dense {VOCAB} (logits)", attrs={"units": VOCAB},
        wires={"x": "rows.output"})
    add(page, "Reverse", "reversed", (1.2, 2.4), label="target: reversed", inputs={"axis": np.int32([1])},
        wires={"tensor": "tokens.output"})
    add(page, "Reshape", "targets", (2.4, 2.4), label="one per position", inputs={"shape": np.int32([-1])},
        wires={"tensor": "reversed.output"})
    add(page, "@SparseSoftmaxCrossEntropy", "loss", (7.8, 1.6), label="loss: mean cross-entropy",
        wires={"logits": "logits.y", "labels": "targets.output"})
    accuracy(page, "logits.y", "targets.output", (7.6, 3.0))
    page.loss = "loss"
    page.metrics = ["accuracy"]
    return project
