"""Audit of the ONNX import's units as composites (audit17b): crafted models imported with
group="composites" compute what the same model framed computes, and what onnxruntime computes;
definitions are shared only by units alike but for their weights; ungrouping keeps the numbers."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from blockflow.compile.compiler import compile_project  # noqa: E402
from blockflow.compile.grouping import plan_ungroup, restructure  # noqa: E402
from blockflow.composite import composite_name  # noqa: E402
from blockflow.importing.onnx_import import import_onnx  # noqa: E402
from blockflow.io.project_io import load_project, save_project  # noqa: E402
from blockflow.run.runtime import run  # noqa: E402

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def _f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def _vi(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _save(tmp_path, nodes, inputs, outputs, inits, name="m.onnx"):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    path = tmp_path / name
    path.write_bytes(model.SerializeToString())
    return path


def _outputs(path, feeds, group):
    project, report = import_onnx(path, group=group)
    marks = [report.outputs[k] for k in report.outputs]
    result = run(compile_project(project), {report.inputs[k]: v for k, v in feeds.items()}, fetch=marks,
                 record=False)
    return project, report, [result.value(m) for m in marks]


def _reference(path, feeds):
    ort = pytest.importorskip("onnxruntime")
    return ort.InferenceSession(str(path)).run(None, feeds)


def _agree(path, feeds):
    """The composites' outputs equal the frames' bit for bit, and onnxruntime's closely."""
    project, report, grouped = _outputs(path, feeds, "composites")
    _, _, framed = _outputs(path, feeds, "frames")
    for g, f, r in zip(grouped, framed, _reference(path, feeds)):
        np.testing.assert_array_equal(g, f)
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-5)
    return project, report


def _dense_chain(tmp_path, scopes, rng, act="Tanh"):
    nodes, inits, inp = [], [], "x"
    for s in scopes:
        nodes += [helper.make_node("MatMul", [inp, f"{s}/W"], [f"{s}/mm"], name=f"{s}/matmul"),
                  helper.make_node("Add", [f"{s}/mm", f"{s}/b"], [f"{s}/ad"], name=f"{s}/add"),
                  helper.make_node(act, [f"{s}/ad"], [f"{s}/out"], name=f"{s}/act")]
        inits += [numpy_helper.from_array(_f32(rng, 4, 4), f"{s}/W"), numpy_helper.from_array(_f32(rng, 4), f"{s}/b")]
        inp = f"{s}/out"
    nodes.append(helper.make_node("Identity", [inp], ["y"], name="final"))
    return _save(tmp_path, nodes, [_vi("x", [2, 4])], [_vi("y", [2, 4])], inits)


