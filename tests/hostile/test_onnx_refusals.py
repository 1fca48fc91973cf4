"""Hostile ONNX models the import refuses: the message names the node and says what is wrong with
the model, and "a bug in the import" is kept for what is the import's own fault.

The models are built here with onnx.helper, small and seeded; nothing is committed.
"""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from blockflow.importing import onnx_read  # noqa: E402
from blockflow.importing.errors import ImportFailure  # noqa: E402
from blockflow.importing.onnx_import import import_model  # noqa: E402
from blockflow.importing.onnx_read import read_onnx_bytes  # noqa: E402


def _model(nodes, inputs, outputs, initializers=(), opset=13):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _import(model):
    return import_model(read_onnx_bytes(model.SerializeToString(), "hostile.onnx"), "m")


def _refusal(model) -> str:
    with pytest.raises(ImportFailure) as caught:
        _import(model)
    text = str(caught.value)
    assert "Traceback" not in text and "no faithful blockflow counterpart" not in text, text
    return text


_X = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
_I = helper.make_tensor_value_info("i", TensorProto.INT64, [4])
_Y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)


def _flatten(axis, opset=13):
    return _model([helper.make_node("Flatten", ["x"], ["y"], axis=axis, name="flat")], [_X], [_Y], opset=opset)


def _one_hot(axis):
    depth = numpy_helper.from_array(np.array([3], np.int64), "d")
    values = numpy_helper.from_array(np.array([0, 1], np.float32), "v")
    node = helper.make_node("OneHot", ["i", "d", "v"], ["y"], axis=axis, name="oh")
    return _model([node], [_I], [_Y], [depth, values])


_AXES = [
    (_flatten(3), "node 'flat' (Flatten): Flatten's axis 3 is out of range for an input of rank 2 (from -2 to 2)"),
    (_flatten(-3), "node 'flat' (Flatten): Flatten's axis -3 is out of range for an input of rank 2 (from -2 to 2)"),
    (_flatten(-1, opset=9), "node 'flat' (Flatten): Flatten's axis -1 is out of range for an input of rank 2 "
                            "(from 0 to 2 before opset 11)"),
    (_one_hot(2), "node 'oh' (OneHot): OneHot's axis 2 is out of range for indices of rank 1 (from -2 to 1)"),
    (_one_hot(-3), "node 'oh' (OneHot): OneHot's axis -3 is out of range for indices of rank 1 (from -2 to 1)"),
]


@pytest.mark.parametrize("model, says", _AXES, ids=["flatten3", "flatten-3", "flatten-1@9", "onehot2", "onehot-3"])
def test_a_flatten_or_one_hot_axis_out_of_range_is_refused_as_concat_s_is(model, says):
    """onnx's shape inference names these too, but in its own words ('Invalid value(-1) for
    attribute 'axis'' for an axis of -3): the import's own check says it as Concat's does."""
    assert _refusal(model) == f"hostile.onnx: {says}"


@pytest.mark.parametrize("model, says", _AXES, ids=["flatten3", "flatten-3", "flatten-1@9", "onehot2", "onehot-3"])
def test_without_onnx_s_inference_the_axis_is_still_out_of_range_not_unsupported(monkeypatch, model, says):
    """When onnx's shape inference cannot run (it gives no types and no verdict), these were listed
    as ops with no faithful blockflow counterpart ('Flatten axis 3 for rank 2'), as if the
    model were valid."""
    monkeypatch.setattr(onnx_read._Reader, "_inferred_types", lambda self: ({}, None))
    assert _refusal(model) == f"hostile.onnx: {says}"


def test_flatten_and_one_hot_axes_in_range_import():
    for model in (_flatten(2), _flatten(-2), _flatten(0), _flatten(-1, opset=11), _one_hot(1), _one_hot(-2)):
        _import(model)
