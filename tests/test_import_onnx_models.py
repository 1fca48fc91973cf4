"""The ONNX import on real architectures: the test models the onnx package ships
(onnx/backend/test/data/light: ResNet-50, Inception v1 and v2, DenseNet-121, SqueezeNet,
ShuffleNet, VGG-19, AlexNet, ZFNet), nothing downloaded.

Each imports and runs forward on the input ONNX's backend test runner makes for it
(``Runner.generate_dummy_data``, random=False), matching the output the package ships within the
runner's tolerances (rtol 1e-3, atol 1e-7, the loader's defaults). Their weights are all 0.02
(the "light" models replace each weight by a ConstantOfShape), which would hide a weight put in the
wrong layout, so each is also run with seeded random weights against ONNX Runtime. Backward: the
gradient of a loss on the output (the one the import adds: cross-entropy against random labels for
the classifiers), in float64, agrees with central finite differences along a random direction over
a sample of the parameters (the first layer's, a middle one's, the last's).
"""
from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import numpy_helper  # noqa: E402
from onnx.backend.test.runner import Runner  # noqa: E402

from blockflow.compile.compiler import compile_project  # noqa: E402
from blockflow.importing.onnx_import import import_model, import_onnx  # noqa: E402
from blockflow.importing.onnx_read import read_onnx_bytes  # noqa: E402
from blockflow.run.runtime import run  # noqa: E402

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
MODELS = sorted(p.name[len("light_"):-len(".onnx")] for p in LIGHT.glob("light_*.onnx"))
#: the backend test loader's default tolerances (onnx/backend/test/loader)
RTOL, ATOL = 1e-3, 1e-7


def test_the_package_ships_the_nine_models():
    assert MODELS == ["bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50",
                      "shufflenet", "squeezenet", "vgg19", "zfnet512"]


@functools.lru_cache(maxsize=None)
def _model(name: str):
    return onnx.load(str(LIGHT / f"light_{name}.onnx"))


def _graph_input(model):
    inits = {t.name for t in model.graph.initializer}
    return next(i for i in model.graph.input if i.name not in inits)


@functools.lru_cache(maxsize=2)
def _imported(name: str):
    project, report = import_onnx(LIGHT / f"light_{name}.onnx")
    return project, report, compile_project(project)


def _forward(program, report, x, variables=None):
    (placeholder,) = report.inputs.values()
    (marker,) = report.outputs.values()
    result = run(program, {placeholder: x}, fetch=[marker], record=False, variables=variables)
    return result.value(marker)


#: Models whose shipped output is a softmax of logits equal in exact arithmetic and too large for
#: their rounding to vanish: SqueezeNet's light logits are all about 9.5e9, where a float32 step is
#: 1,024. Which of them rounds highest depends on the order the BLAS kernel of the CPU sums each
#: channel in (OpenBLAS's Haswell kernels, on an AMD EPYC machine, round some channels differently
#: from the others), and the softmax turns one ulp into a probability of 1/56 against 0.001. Its
#: logits are compared with ONNX Runtime's instead, and its output with their softmax.
TIED_LOGITS = {"squeezenet": "r65"}


@pytest.mark.parametrize("name", MODELS)
def test_light_model_matches_the_output_onnx_ships(name):
    project, report, program = _imported(name)
    assert program.ok
    x = Runner.generate_dummy_data(_graph_input(_model(name)), seed=0, random=False)
    expected = numpy_helper.to_array(onnx.load_tensor(str(LIGHT / f"light_{name}_output_0.pb")))
    if name in TIED_LOGITS:
        _check_tied_logits(_model(name), TIED_LOGITS[name], program, report, x, expected)
        return
    got = _forward(program, report, x)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL)


def _check_tied_logits(model, logits_name, program, report, x, expected):
    """The logits before the model's last Softmax equal ONNX Runtime's (``logits_name``, made a
    graph output), within the loader's tolerances, and the output is their softmax."""
    with_logits = onnx.ModelProto()
    with_logits.CopyFrom(model)
    with_logits.graph.output.append(onnx.helper.make_empty_tensor_value_info(logits_name))
    inp = _graph_input(model)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(with_logits.SerializeToString(), options, providers=["CPUExecutionProvider"])
    _, ort_logits = session.run(None, {inp.name: x})
    (placeholder,) = report.inputs.values()
    (marker,) = report.outputs.values()
    result = run(program, {placeholder: x}, record=True)
    (softmax,) = [st for st in program.steps if st.spec.name == "Softmax"]
    logits_slot = program.slots[softmax.inputs[0]]
    logits = np.asarray(result.value(logits_slot.node, logits_slot.port))
    np.testing.assert_allclose(logits.reshape(-1), ort_logits.reshape(-1), rtol=RTOL, atol=ATOL)
    got = np.asarray(result.value(marker))
    assert got.dtype == expected.dtype and got.shape == expected.shape
    rows = logits.astype(np.float64).reshape(1, -1)
    soft = np.exp(rows - rows.max())
    np.testing.assert_allclose(got.reshape(-1), (soft / soft.sum()).reshape(-1), rtol=1e-5, atol=ATOL)


def _random_weights(model, seed: int):
    """``model`` with each ConstantOfShape weight replaced by a seeded random initializer: He-scaled
    normal for weights with two or more axes, uniform in [0.5, 1.5] for per-channel vectors (so a
    batch norm's variance stays positive)."""
    rng = np.random.default_rng(seed)
    m = onnx.ModelProto()
    m.CopyFrom(model)
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    keep = []
    for node in m.graph.node:
        if node.op_type != "ConstantOfShape":
            keep.append(node)
            continue
        shape = tuple(int(d) for d in inits[node.input[0]])
        if len(shape) >= 2:
            fan_in = int(np.prod(shape[1:]))
            value = rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)
        else:
            value = rng.uniform(0.5, 1.5, shape)
        m.graph.initializer.append(numpy_helper.from_array(value.astype(np.float32), node.output[0]))
        # these models are IR version 3, where an initializer is also a graph input
        m.graph.input.append(onnx.helper.make_tensor_value_info(node.output[0], onnx.TensorProto.FLOAT, shape))
    del m.graph.node[:]
    m.graph.node.extend(keep)
    return m


#: VGG-19 is left out: its 143 million random weights take 30 s to make and pass around, and its
#: ops (Conv, Relu, MaxPool, Gemm, Softmax) are all AlexNet's and ZFNet's
@pytest.mark.parametrize("name", [m for m in MODELS if m != "vgg19"])
def test_light_model_with_random_weights_matches_onnx_runtime(name):
    model = _random_weights(_model(name), seed=7)
    project, report = import_model(read_onnx_bytes(model.SerializeToString(), name), name)
    program = compile_project(project)
    inp = _graph_input(model)
    x = Runner.generate_dummy_data(inp, seed=0, random=True)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 3    # not the warnings about the unused shape initializers
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    (expected,) = session.run(None, {inp.name: x})
    got = _forward(program, report, x)
    assert got.shape == expected.shape
    # a deep float32 network summed in two orders: relative to the output's scale (DenseNet's
    # are logits up to 35, where 1e-5 of the scale is a few ulps of the largest)
    np.testing.assert_allclose(got, expected, rtol=2e-3, atol=1e-5 * float(np.abs(expected).max()))
    assert expected.max() > 2 * expected.mean()    # the weights did make the output depend on them


def _random_like(rng, value):
    """He-scaled normal values of ``value``'s shape and dtype (fan-in: a filter's kh * kw * in
    [kh, kw, in, out], a dense weight's in [out, in]), or uniform in [0.5, 1.5] for a vector (a
    variance stays positive)."""
    if value.ndim >= 2:
        fan_in = max(value.size // value.shape[-1], value.shape[-1])
        out = rng.standard_normal(value.shape) * np.sqrt(2.0 / fan_in)
    else:
        out = rng.uniform(0.5, 1.5, value.shape)
    return out.astype(value.dtype)


def _as_float64(project):
    """The same model computing in float64: Placeholders, Variables and their values widened, on
    the page and in its composites (their Inputs, and the weights each instance gives); the
    blocks are dtype-polymorphic, and inline constants take the dtype of what they meet."""
    for page in project.diagrams():
        for node in page.nodes.values():
            if node.block in ("Placeholder", "Variable", "Input") and node.attrs.get("dtype") == "float32":
                node.attrs["dtype"] = "float64"
            if isinstance(node.attrs.get("initial_value"), np.ndarray) or node.block.startswith("@"):
                node.attrs.update({k: v.astype(np.float64) for k, v in node.attrs.items()
                                   if isinstance(v, np.ndarray) and v.dtype == np.float32})
    return project


def _sampled_variables(program):
    """Three Variables a gradient reaches, in schedule order: the first layer's weight, one from
    the middle, the last one (a batch norm's mean and variance get none, as in TensorFlow)."""
    readers = {}
    for step in program.steps:
        for pos, _i, edge in step.in_edges:
            if edge is not None:
                readers.setdefault(edge.src, []).append(step.spec.inputs[pos].gradient)
    names = [s.node for s in program.steps if s.node in program.trainable and all(readers.get(s.node, [False]))]
    return [names[0], names[len(names) // 2], names[-1]]


@pytest.mark.parametrize("name", MODELS)
def test_light_model_gradients_match_finite_differences(name):
    project, report = import_onnx(LIGHT / f"light_{name}.onnx")
    project = _as_float64(project)
    program = compile_project(project)
    assert program.ok, program.errors[:3]
    page = project.pages[0]
    rng = np.random.default_rng(3)
    x = Runner.generate_dummy_data(_graph_input(_model(name)), seed=0, random=True).astype(np.float64)
    (placeholder,) = report.inputs.values()
    # the loss the import adds (a cross-entropy against labels for the classifiers, L2Loss of
    # DenseNet's logits): a softmax output can saturate, and its gradient with it
    loss_node = page.loss
    feeds = {placeholder: x}
    if "labels" in page.nodes:
        feeds["labels"] = rng.integers(0, 1000, size=page.feeds["labels"].shape)
    chosen = _sampled_variables(program)
    # With the shipped weights (all 0.02) every channel of a layer is the same, so every class
    # gets the same logit whatever the earlier layers do (their gradient is zero up to rounding),
    # and VGG's activations grow past 1e20: the run uses seeded random weights instead
    weights = {s.node: _random_like(rng, program.variable_values.initial(s.node))
               for s in program.steps if s.node in program.trainable}
    values = {v: weights[v] for v in chosen}
    result = run(program, feeds, target=loss_node, wrt=tuple(chosen), record=False, variables=weights)
    # a random direction over up to 64 entries of each sampled parameter
    direction = {}
    for v, value in values.items():
        d = np.zeros_like(value)
        flat = d.reshape(-1)
        picked = rng.choice(flat.size, size=min(64, flat.size), replace=False)
        flat[picked] = rng.standard_normal(picked.size)
        direction[v] = d
    grads = [float(np.sum(result.grad(v) * direction[v])) for v in chosen]
    assert all(g != 0.0 for g in grads), grads
    analytic = sum(grads)
    # small, so a step rarely moves one of a million activations across a ReLU's kink or changes
    # which entry of a pooling window is the largest (1e-5 did, on SqueezeNet)
    eps = 1e-7

    def loss(sign):
        moved = {**weights, **{v: values[v] + sign * eps * direction[v] for v in chosen}}
        return float(run(program, feeds, fetch=[loss_node], record=False, variables=moved).value(loss_node))

    up, down = loss(+1), loss(-1)
    numeric = (up - down) / (2 * eps)
    # A deep network's float64 forward is good to about 1e-13 of the loss, and the difference
    # divides that by 2 eps: the absolute tolerance. A wrong gradient is off by far more.
    assert numeric == pytest.approx(analytic, rel=1e-3, abs=1e-13 * max(abs(up), 1.0) / eps)
