"""The basic layers of the library (tools/layer_defs/basic.py): forward values against numpy,
gradients against finite differences of the numpy reference, and their training/inference
behaviour (Dropout, BatchNormalization through the run's learning phase)."""
from __future__ import annotations

import numpy as np
import pytest

from blockflow.compile.compiler import compile_project
from blockflow.registry import default_registry
from blockflow.run.runtime import run
from blockflow.run.training import TrainConfig, Trainer
from layer_kit import LAYERS, check_grads, layer_project, run_layer

RNG = np.random.default_rng(14)


def f32(*shape, scale=1.0):
    return (RNG.normal(size=shape) * scale).astype(np.float32)


ACT = {"linear": lambda z: z, "relu": lambda z: np.maximum(z, 0), "tanh": np.tanh,
       "sigmoid": lambda z: 1 / (1 + np.exp(-z))}


# ---------------------------------------------------------------------------------------- Dense

@pytest.mark.parametrize("activation, use_bias", [("relu", True), ("tanh", False), ("sigmoid", True)])
def test_dense(activation, use_bias):
    x = f32(4, 3)
    project, r = layer_project("Dense", {"x": x}, {"units": 5, "activation": activation, "use_bias": use_bias,
                                                   "bias_initializer": "random_normal"}, out_shape=(4, 5))
    program, res = run_layer(project)
    w, b = res.value("L/kernel"), res.value("L/bias")
    assert w.shape == (3, 5) and b.shape == (5,)

    def ref(x, w, b):
        return ACT[activation](x @ w + (b if use_bias else 0))
    np.testing.assert_allclose(res.value("L", "y"), ref(x, w, b), rtol=1e-5, atol=1e-6)
    grads = {"x": res.grad("in_x"), "w": res.variable_grads["L/kernel"]}
    if use_bias:
        grads["b"] = res.variable_grads["L/bias"]
    else:
        assert "L/bias" not in program.trainable
    check_grads(ref, {"x": x, "w": w, "b": b}, grads, r)


def test_dense_glorot_bounds_and_two_instances_differ():
    project, _ = layer_project("Dense", {"x": f32(2, 30)}, {"units": 20}, out_shape=(2, 20))
    page = project.page("main")
    page.add_node("@Dense", id="L2", attrs={"units": 20})
    page.connect("in_x", "output", "L2", "x")
    _, res = run_layer(project)
    w1, w2 = res.value("L/kernel"), res.value("L2/kernel")
    limit = np.sqrt(6 / (30 + 20))
    assert np.abs(w1).max() <= limit and w1.std() > limit / 2
    assert not np.allclose(w1, w2)


# ---------------------------------------------------------------------------------------- convolution

def conv_ref(x, w, stride, padding):
    """Cross-correlation of NHWC x with HWIO w, TF's SAME/VALID padding, by loops."""
    n, h, wd, c = x.shape
    k = w.shape[0]
    if padding == "SAME":
        oh, ow = -(-h // stride), -(-wd // stride)
        ph = max((oh - 1) * stride + k - h, 0)
        pw = max((ow - 1) * stride + k - wd, 0)
        x = np.pad(x, ((0, 0), (ph // 2, ph - ph // 2), (pw // 2, pw - pw // 2), (0, 0)))
    else:
        oh, ow = (h - k) // stride + 1, (wd - k) // stride + 1
    out = np.zeros((n, oh, ow, w.shape[3]))
    for i in range(oh):
        for j in range(ow):
            patch = x[:, i * stride:i * stride + k, j * stride:j * stride + k, :]
            out[:, i, j, :] = np.tensordot(patch, w, axes=([1, 2, 3], [0, 1, 2]))
    return out


@pytest.mark.parametrize("stride, padding", [(1, "VALID"), (2, "SAME"), (2, "VALID")])
def test_conv2d(stride, padding):
    x = f32(2, 5, 5, 2)
    params = {"filters": 3, "kernel_size": 3, "strides": stride, "padding": padding, "activation": "tanh",
              "bias_initializer": "random_normal"}
    out = conv_ref(x, np.zeros((3, 3, 2, 3)), stride, padding).shape
    project, r = layer_project("Conv2D", {"x": x}, params, out_shape=out)
    _, res = run_layer(project)
    w, b = res.value("L/kernel"), res.value("L/bias")

    def ref(x, w, b):
        return np.tanh(conv_ref(x, w, stride, padding) + b)
    np.testing.assert_allclose(res.value("L", "y"), ref(x, w, b), rtol=1e-5, atol=1e-5)
    check_grads(ref, {"x": x, "w": w, "b": b},
                {"x": res.grad("in_x"), "w": res.variable_grads["L/kernel"], "b": res.variable_grads["L/bias"]}, r)


def conv_transpose_ref(x, w, stride):
    """The transposed convolution as the adjoint of conv_ref (SAME): scatter each input pixel."""
    n, h, wd, c = x.shape
    k, f = w.shape[0], w.shape[2]
    oh, ow = h * stride, wd * stride
    pad_h = max((h - 1) * stride + k - oh, 0)
    pad_w = max((wd - 1) * stride + k - ow, 0)
    big = np.zeros((n, oh + pad_h, ow + pad_w, f))
    for i in range(h):
        for j in range(wd):
            big[:, i * stride:i * stride + k, j * stride:j * stride + k, :] += np.einsum("nc,abfc->nabf", x[:, i, j, :], w)
    return big[:, pad_h // 2:pad_h // 2 + oh, pad_w // 2:pad_w // 2 + ow, :]


def test_conv2d_transpose_is_the_adjoint_of_conv2d():
    x, w, y = f32(2, 3, 3, 2), f32(3, 3, 4, 2), f32(2, 6, 6, 4)
    # <conv_transpose(x), y> == <x, conv(y)>: the reference is the adjoint of the conv reference
    assert np.isclose(np.sum(conv_transpose_ref(x, w, 2) * y), np.sum(x * conv_ref(y, w, 2, "SAME")), rtol=1e-4)


@pytest.mark.parametrize("stride, k", [(2, 3), (1, 3), (2, 2)])
def test_conv2d_transpose(stride, k):
    x = f32(2, 3, 3, 2)
    project, r = layer_project("Conv2DTranspose", {"x": x}, {"filters": 4, "kernel_size": k, "strides": stride,
                                                             "bias_initializer": "random_normal"},
                               out_shape=(2, 3 * stride, 3 * stride, 4))
    _, res = run_layer(project)
    w, b = res.value("L/kernel"), res.value("L/bias")
    assert w.shape == (k, k, 4, 2)

    def ref(x, w, b):
        return conv_transpose_ref(x, w, stride) + b
    np.testing.assert_allclose(res.value("L", "y"), ref(x, w, b), rtol=1e-5, atol=1e-5)
    check_grads(ref, {"x": x, "w": w, "b": b},
                {"x": res.grad("in_x"), "w": res.variable_grads["L/kernel"], "b": res.variable_grads["L/bias"]}, r)


# ---------------------------------------------------------------------------------------- pooling

def pool_ref(x, p, s, reduce):
    n, h, w, c = x.shape
    oh, ow = (h - p) // s + 1, (w - p) // s + 1
    out = np.zeros((n, oh, ow, c))
    for i in range(oh):
        for j in range(ow):
            out[:, i, j, :] = reduce(x[:, i * s:i * s + p, j * s:j * s + p, :], axis=(1, 2))
    return out


@pytest.mark.parametrize("name, reduce", [("MaxPooling2D", np.max), ("AveragePooling2D", np.mean)])
@pytest.mark.parametrize("p, s", [(2, 2), (3, 1)])
def test_pooling(name, reduce, p, s):
    x = f32(2, 5, 5, 3)
    out = pool_ref(x, p, s, reduce).shape
    project, r = layer_project(name, {"x": x}, {"pool_size": p, "strides": s}, out_shape=out)
    _, res = run_layer(project)
    np.testing.assert_allclose(res.value("L", "y"), pool_ref(x, p, s, reduce), rtol=1e-6)
    check_grads(lambda x: pool_ref(x, p, s, reduce), {"x": x}, {"x": res.grad("in_x")}, r)


def test_global_average_pooling_and_flatten():
    x = f32(2, 3, 4, 5)
    project, r = layer_project("GlobalAveragePooling2D", {"x": x}, out_shape=(2, 5))
    _, res = run_layer(project)
    np.testing.assert_allclose(res.value("L", "y"), x.mean(axis=(1, 2)), rtol=1e-6)
    check_grads(lambda x: x.mean(axis=(1, 2)), {"x": x}, {"x": res.grad("in_x")}, r)
    project, r = layer_project("Flatten", {"x": x}, out_shape=(2, 60))
    _, res = run_layer(project)
    np.testing.assert_array_equal(res.value("L", "y"), x.reshape(2, 60))
    np.testing.assert_allclose(res.grad("in_x"), r.reshape(x.shape))


# ---------------------------------------------------------------------------------------- Dropout

def test_dropout_training_and_inference():
    x = f32(50, 40) + 3.0   # no zero entries: a zero in y is a dropped entry
    project, r = layer_project("Dropout", {"x": x}, {"rate": 0.25, "seed": 3}, out_shape=(50, 40))
    program, res = run_layer(project)
    y, gx = res.value("L", "y"), res.grad("in_x")
    kept = y != 0
    assert 0.2 < 1 - kept.mean() < 0.3
    np.testing.assert_allclose(y[kept], x[kept] / 0.75, rtol=1e-6)
    np.testing.assert_allclose(gx, np.where(kept, r / 0.75, 0), rtol=1e-6)
    # the next step draws another mask; the same step the same one
    again = run(program, target="loss", split="train")
    np.testing.assert_array_equal(again.value("L", "y"), y)
    other = run(program, target="loss", split="train", step=1)
    assert not np.array_equal(other.value("L", "y") != 0, kept)
    test = run(program, target="loss", split="test")
    np.testing.assert_array_equal(test.value("L", "y"), x)
    np.testing.assert_array_equal(test.grad("in_x"), r)


# ---------------------------------------------------------------------------------------- normalization

def bn_ref(x, gamma, beta, eps=1e-3):
    axes = tuple(range(x.ndim - 1))
    m, v = x.mean(axis=axes), x.var(axis=axes)
    return gamma * (x - m) / np.sqrt(v + eps) + beta


@pytest.mark.parametrize("name, shape", [("BatchNormalization", (6, 4)), ("BatchNormalization2D", (2, 3, 3, 4))])
def test_batch_normalization(name, shape):
    x = f32(*shape, scale=2.0) + 1.5
    project, r = layer_project(name, {"x": x}, {"momentum": 0.9}, out_shape=shape)
    page = project.page("main")
    # non-trivial gamma and beta (stored in the instance's state, as a trained layer's)
    gamma, beta = f32(4) + 1.0, f32(4)
    page.apply_state({"L/gamma": {"value": gamma}, "L/beta": {"value": beta}})
    program, res = run_layer(project)
    np.testing.assert_allclose(res.value("L", "y"), bn_ref(x, gamma, beta), rtol=1e-4, atol=1e-4)
    check_grads(bn_ref, {"x": x, "gamma": gamma, "beta": beta},
                {"x": res.grad("in_x"), "gamma": res.variable_grads["L/gamma"],
                 "beta": res.variable_grads["L/beta"]}, r, rtol=5e-3, atol=5e-4)
    assert {"L/moving_mean", "L/moving_variance"}.isdisjoint(program.trainable)
    # the run updated the moving statistics: 0.9 · old + 0.1 · the batch's (variance unbiased)
    flat = x.reshape(-1, 4).astype(np.float64)
    mean = res.state_updates["L/moving_mean"]["value"]
    var = res.state_updates["L/moving_variance"]["value"]
    np.testing.assert_allclose(mean, 0.1 * flat.mean(0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(var, 0.9 + 0.1 * flat.var(0, ddof=1), rtol=1e-5)
    # kept in the instance's state, they are what inference normalizes with; inference updates nothing
    page.apply_state(res.state_updates)
    assert set(page.nodes["L"].state) >= {"moving_mean:value", "moving_variance:value"}
    program = compile_project(project, "main")
    test = run(program, target="loss", split="test")
    want = gamma * (x - mean) / np.sqrt(var + 1e-3) + beta
    np.testing.assert_allclose(test.value("L", "y"), want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(test.grad("in_x"), r * gamma / np.sqrt(var + 1e-3), rtol=1e-4)
    np.testing.assert_array_equal(test.state_updates["L/moving_mean"]["value"], mean)


def test_batch_normalization_moving_statistics_follow_training():
    """blockflow train's optimizer mode keeps the moving statistics the steps update, and the
    test evaluation uses them."""
    x = f32(8, 3, scale=3.0) + 2.0
    project, _ = layer_project("BatchNormalization", {"x": x}, {"momentum": 0.5}, out_shape=(8, 3))
    program = compile_project(project, "main")
    trainer = Trainer(program, TrainConfig(steps=6, optimizer="sgd", eval_every=0))
    assert trainer.mode == "optimizer"
    trainer.train()
    moving = trainer.state_updates()["L/moving_mean"]["value"]
    np.testing.assert_allclose(moving, (1 - 0.5 ** 6) * x.mean(0), rtol=1e-4)


def ln_ref(x, gamma, beta, eps=1e-3):
    m, v = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    return gamma * (x - m) / np.sqrt(v + eps) + beta


def test_layer_normalization():
    x = f32(3, 5, scale=2.0)
    project, r = layer_project("LayerNormalization", {"x": x}, out_shape=(3, 5))
    gamma, beta = f32(5) + 1.0, f32(5)
    project.page("main").apply_state({"L/gamma": {"value": gamma}, "L/beta": {"value": beta}})
    _, res = run_layer(project)
    np.testing.assert_allclose(res.value("L", "y"), ln_ref(x, gamma, beta), rtol=1e-4, atol=1e-5)
    check_grads(ln_ref, {"x": x, "gamma": gamma, "beta": beta},
                {"x": res.grad("in_x"), "gamma": res.variable_grads["L/gamma"],
                 "beta": res.variable_grads["L/beta"]}, r, rtol=5e-3, atol=5e-4)


def test_embedding():
    ids = np.array([[1, 4, 1], [0, 6, 2]], np.int32)
    project, r = layer_project("Embedding", {"ids": ids}, {"input_dim": 7, "output_dim": 3}, out_shape=(2, 3, 3))
    _, res = run_layer(project)
    table = res.value("L/embeddings")
    assert table.shape == (7, 3) and np.abs(table).max() <= 0.05
    np.testing.assert_array_equal(res.value("L", "y"), table[ids])
    check_grads(lambda t: t[ids], {"t": table}, {"t": res.variable_grads["L/embeddings"]}, r)


def test_every_layer_is_tested_here():
    tested = {"Dense", "Conv2D", "Conv2DTranspose", "MaxPooling2D", "AveragePooling2D", "GlobalAveragePooling2D",
              "Flatten", "Dropout", "BatchNormalization", "BatchNormalization2D", "LayerNormalization", "Embedding"}
    assert set(LAYERS) == tested


# ---------------------------------------------------------------------------------------- Activation

_SAME_AS = {"relu": ("Relu", {}), "relu6": ("Relu6", {}), "leaky_relu": ("LeakyRelu", {"alpha": 0.2}),
            "elu": ("Elu", {}), "selu": ("Selu", {}), "gelu": ("Gelu", {"approximate": False}),
            "sigmoid": ("Sigmoid", {}), "tanh": ("Tanh", {}), "softplus": ("Softplus", {}),
            "softsign": ("Softsign", {}), "softmax": ("Softmax", {}), "log_softmax": ("LogSoftmax", {})}


@pytest.mark.parametrize("kind", sorted(_SAME_AS))
def test_activation_kinds_match_their_own_blocks(kind):
    """Each kind of the Activation block is the function (and gradient) of the block it names."""
    x = f32(3, 4, scale=3.0)
    x[np.abs(x) < 0.05] = 0.3      # away from the kinks at 0
    x[np.abs(x - 6) < 0.05] = 5.0
    registry = default_registry()
    act, (name, attrs) = registry["Activation"], _SAME_AS[kind]
    own = registry[name]
    y = act.forward(x, kind=kind)
    np.testing.assert_allclose(y, own.forward(x, **attrs), rtol=1e-6, atol=1e-7)
    g = f32(3, 4)
    extra = {"needs": (True,)} if "needs" in own.vjp_context else {}
    np.testing.assert_allclose(act.vjp(g, y, x, kind=kind)[0], own.vjp(g, own.forward(x, **attrs), x, **attrs, **extra)[0],
                               rtol=1e-5, atol=1e-6)


def test_swish_and_linear():
    x = f32(2, 5)
    act = default_registry()["Activation"]
    np.testing.assert_allclose(act.forward(x, kind="swish"), x / (1 + np.exp(-x)), rtol=1e-6)
    np.testing.assert_array_equal(act.forward(x, kind="linear"), x)


# ---------------------------------------------------------------------------------------- the learning phase

def test_blockflow_run_split_sets_the_learning_phase(tmp_path, capsys):
    """`blockflow run` trains by default and infers with --split test (the phase Dropout and
    BatchNormalization ask)."""
    import json

    from blockflow.cli.entry import main
    from blockflow.io.project_io import save_project
    from blockflow.project import Project

    project = Project()
    page = project.add_page("main")
    page.add_node("LearningPhase", id="phase")
    page.add_node("Placeholder", id="x", attrs={"dtype": "float32", "shape": [200]})
    page.feeds["x"] = np.ones(200, np.float32)
    page.add_node("Dropout", id="drop", attrs={"rate": 0.5, "seed": 1})
    page.add_node("Select", id="y")
    page.connect("x", "output", "drop", "x")
    page.connect("phase", "training", "y", "condition")
    page.connect("drop", "output", "y", "t")
    page.connect("x", "output", "y", "e")
    path = tmp_path / "phase.bflow.json"
    save_project(project, path)
    for split, training in (("train", True), ("test", False), ("all", False)):
        args = [str(path), "--forward-only", "--json", "--all-values"] + (["--split", split] if split != "train" else [])
        assert main(["run", *args]) == 0
        values = json.loads(capsys.readouterr().out)["values"]
        assert values["phase:training"]["data"] is training
        y = np.array(values["y:output"]["data"])
        assert (np.count_nonzero(y == 0) > 50) if training else np.all(y == 1)


# ---------------------------------------------------------------------------------------- together

def test_a_classifier_of_library_layers_trains_and_evaluates_in_inference():
    """Dense -> BatchNormalization -> Dropout -> Dense on blobs: training reaches a high test
    accuracy, evaluated with the moving statistics and no dropout."""
    from blockflow.composite import block_name
    from blockflow.project import Project

    project = Project()
    for name in ("Dense", "BatchNormalization", "Dropout"):
        comp = LAYERS[name]()
        project.composites[comp.name] = comp
    page = project.add_page("main")
    page.add_node("MakeBlobs", id="data", attrs={"n": 300, "classes": 3, "dims": 4, "spread": 1.5,
                                                  "batch_size": 30, "seed": 2})
    page.add_node(block_name("Dense"), id="hidden", attrs={"units": 16, "activation": "relu"})
    page.add_node(block_name("BatchNormalization"), id="bn", attrs={"momentum": 0.8})
    page.add_node(block_name("Dropout"), id="drop", attrs={"rate": 0.2, "seed": 4})
    page.add_node(block_name("Dense"), id="logits", attrs={"units": 3})
    page.add_node("SparseSoftmaxCrossEntropyWithLogits", id="xent")
    page.add_node("Mean", id="loss")
    page.add_node("InTopK", id="hit", inputs={"k": 1})
    page.add_node("Cast", id="hits", attrs={"DstT": "float32"})
    page.add_node("Mean", id="acc")
    for src, dst in (("data:features", "hidden:x"), ("hidden:y", "bn:x"), ("bn:y", "drop:x"), ("drop:y", "logits:x"),
                     ("logits:y", "xent:features"), ("data:labels", "xent:labels"), ("xent:loss", "loss:input"),
                     ("logits:y", "hit:predictions"), ("data:labels", "hit:targets"), ("hit:precision", "hits:x"),
                     ("hits:y", "acc:input")):
        (s, sp), (d, dp) = src.split(":"), dst.split(":")
        page.connect(s, sp, d, dp)
    page.loss, page.metrics = "loss", ["acc"]
    program = compile_project(project, "main")
    program.raise_for_errors()
    trainer = Trainer(program, TrainConfig(steps=120, optimizer="adam", hyper={"lr": 0.02}, seed=3, eval_every=0,
                                           metrics=["acc"]))
    trainer.train()
    evaluation = trainer.evaluate("test")
    assert evaluation["acc:output"] >= 0.9
    moving = trainer.state_updates()["bn/moving_mean"]["value"]
    assert np.abs(moving).max() > 0.1   # the steps moved the statistics away from their start
    # what training leaves goes into the instances' state, from where a new compile reads it
    page.apply_state(trainer.state_updates())
    again = compile_project(project, "main")
    r = run(again, fetch=["acc"], split="test")
    assert r.value("acc") >= 0.9
