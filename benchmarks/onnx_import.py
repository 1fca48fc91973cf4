"""(i) ONNX Runtime as the reference speed: ResNet-50 (the onnx package's own test model, its
weights made random and seeded) imported into blockflow and run forward on one batch of one
224x224 image, against ONNX Runtime on the same model, one thread each, interleaved. Target:
within 3x. Also the time the import itself takes. Needs onnx and onnxruntime (the [onnx] extra)."""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np


def resnet50_with_random_weights(onnx, seed: int = 0):
    """The light ResNet-50 with each ConstantOfShape weight replaced by a seeded He-scaled
    initializer (uniform in [0.5, 1.5] for per-channel vectors, so variances stay positive)."""
    from onnx import helper, numpy_helper

    path = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / "light_resnet50.onnx"
    model = onnx.load(str(path))
    rng = np.random.default_rng(seed)
    shapes = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    keep = []
    for node in model.graph.node:
        if node.op_type != "ConstantOfShape":
            keep.append(node)
            continue
        shape = tuple(int(d) for d in shapes[node.input[0]])
        value = (rng.standard_normal(shape) * np.sqrt(2.0 / np.prod(shape[1:])) if len(shape) > 1
                 else rng.uniform(0.5, 1.5, shape))
        model.graph.initializer.append(numpy_helper.from_array(value.astype(np.float32), node.output[0]))
        model.graph.input.append(helper.make_tensor_value_info(node.output[0], onnx.TensorProto.FLOAT, shape))
    del model.graph.node[:]
    model.graph.node.extend(keep)
    return model


def onnx_rows(repeats, timeit_pair):
    try:
        import onnx
        import onnxruntime as ort
    except ImportError:
        return [("(i) ResNet-50 forward / ONNX Runtime", None, 0.0, None, "skipped: onnx is not installed")]
    from blockflow.compile.compiler import compile_project
    from blockflow.importing.onnx_import import import_model
    from blockflow.importing.onnx_read import read_onnx_bytes
    from blockflow.run.runtime import run

    model = resnet50_with_random_weights(onnx)
    data = model.SerializeToString()
    t0 = time.perf_counter()
    project, report = import_model(read_onnx_bytes(data, "resnet50"), "resnet50")
    program = compile_project(project)
    took_import = time.perf_counter() - t0
    (placeholder,) = report.inputs.values()
    (marker,) = report.outputs.values()
    x = np.random.default_rng(1).random((1, 3, 224, 224), np.float32)
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.log_severity_level = 3    # not the warnings about the unused shape initializers
    session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name

    def hand():
        return session.run(None, {name: x})[0]

    def ours():
        return run(program, {placeholder: x}, fetch=[marker], record=False).value(marker)

    np.testing.assert_allclose(ours(), hand(), rtol=2e-3, atol=1e-6)
    th, to = timeit_pair(hand, ours, max(3, repeats // 8))
    return [("(i) ResNet-50 forward / ONNX Runtime", th, to, 3.0, "one thread each, batch 1, 224x224"),
            ("(i) importing ResNet-50 (read, map, lay out, compile)", None, took_import, None,
             f"{report.blocks} blocks, {report.parameters:,} parameters")]
