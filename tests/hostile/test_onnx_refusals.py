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


# --------------------------------------------------------------------------------------------
# Compile errors of the imported diagram: each was "the imported diagram does not compile (a bug
# in the import, please report it)", naming no node.

def _vi(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def _f32(name, values):
    return numpy_helper.from_array(np.array(values, np.float32), name)


_W = _f32("w", np.ones((1, 1, 3, 3)))
_SPLIT = [f"o{k}" for k in range(5000)]


@pytest.mark.parametrize("model, says", [
    (_model([helper.make_node("Conv", ["x", "w"], ["y"], strides=[2 ** 40, 2 ** 40], auto_pad="SAME_UPPER",
                              name="conv")], [_vi("x", [1, 1, 8, 8])], [_Y], [_W]),
     "node 'conv' (Conv): its block 'conv': attr 'strides': entry 2 must be at most 2147483647, got 1099511627776"),
    (_model([helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2 ** 40, 2], auto_pad="SAME_UPPER", name="mp")],
            [_vi("x", [1, 1, 8, 8])], [_Y]),
     "node 'mp' (MaxPool): its block 'mp': attr 'ksize': entry 2 must be at most 2147483647, got 1099511627776"),
    (_model([helper.make_node("Split", ["x"], _SPLIT, axis=0, name="split")], [_vi("x", [5000])],
            [_vi(o, None) for o in _SPLIT]),
     "node 'split' (Split): its block 'split': attr 'num_split': must be at most 4096, got 5000"),
    (_model([helper.make_node("LRN", ["x"], ["y"], size=2 ** 40 + 1, name="lrn")], [_vi("x", [1, 3, 4, 4])], [_Y]),
     "node 'lrn' (LRN): its block 'lrn_lrn': attr 'depth_radius': must be at most 2147483647, got 549755813888"),
], ids=["conv-stride", "maxpool-ksize", "split-5000", "lrn-size"])
def test_a_value_past_what_blockflow_holds_names_the_node(model, says):
    """Valid ONNX whose numbers a block does not hold (docs/limits.md): not the import's bug."""
    text = _refusal(model)
    assert text == f"hostile.onnx: {says}, past what blockflow holds (docs/limits.md)"


@pytest.mark.parametrize("node, inputs, says", [
    (helper.make_node("MatMul", ["x", "z"], ["y"], name="mm"), [_vi("x", [2, 3]), _vi("z", [3, 2], TensorProto.INT64)],
     "node 'mm' (MatMul): the model is not valid ONNX: input 0 'x' (A) is float32 but input 1 'z' (B) is int64; "
     "MatMul takes one type for both (T)"),
    (helper.make_node("Add", ["x", "z"], ["y"], name="add"), [_vi("x", [2]), _vi("z", [2], TensorProto.DOUBLE)],
     "node 'add' (Add): the model is not valid ONNX: input 0 'x' (A) is float32 but input 1 'z' (B) is float64; "
     "Add takes one type for both (T)"),
    (helper.make_node("Sum", ["x", "x", "z"], ["y"], name="sum"), [_vi("x", [2]), _vi("z", [2], TensorProto.DOUBLE)],
     "node 'sum' (Sum): the model is not valid ONNX: input 0 'x' (data_0) is float32 but input 2 'z' (data_0) is "
     "float64; Sum takes one type for both (T)"),
    (helper.make_node("Where", ["x", "x", "x"], ["y"], name="where"), [_vi("x", [2])],
     "node 'where' (Where): the model is not valid ONNX: input 0 'x' (condition) is float32, which Where does not "
     "take there (B: bool)"),
    (helper.make_node("Softmax", ["x"], ["y"], name="sm"), [_vi("x", [2], TensorProto.INT64)],
     "node 'sm' (Softmax): the model is not valid ONNX: input 0 'x' (input) is int64, which Softmax does not take "
     "there (T: bfloat16, double, float, float16)"),
], ids=["matmul", "add", "sum", "where", "softmax"])
def test_inputs_breaking_the_op_s_type_constraints_are_not_valid_onnx(node, inputs, says):
    """onnx's strict shape inference passes these; onnxruntime refuses them."""
    y = _vi("y", None, inputs[0].type.tensor_type.elem_type)
    assert _refusal(_model([node], inputs, [y])) == f"hostile.onnx: {says}"


@pytest.mark.parametrize("node, inits, says", [
    (helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], name="bn"),
     [_f32(n, [1, 1]) for n in "sbmv"],
     "node 'bn' (BatchNormalization): its block 's_1': FusedBatchNormV3: scale [2] must have one entry per channel "
     "of x [1,3,2,2] (3 channels, NCHW)"),
    (helper.make_node("Gemm", ["x", "w", "b"], ["y"], name="gemm"), [_f32("w", np.ones((4, 4))), _f32("b", np.ones(5))],
     "node 'gemm' (Gemm): its block 'gemm': shapes [2,4] and [5] do not broadcast"),
], ids=["batchnorm", "gemm"])
def test_a_rule_onnx_s_inference_does_not_check_is_named_with_the_node(node, inits, says):
    x = _vi("x", [1, 3, 2, 2] if node.op_type == "BatchNormalization" else [2, 4])
    text = _refusal(_model([node], [x], [_Y], inits))
    assert text == (f"hostile.onnx: {says}. onnx's shape inference does not check this for {node.op_type}, so the "
                    f"model most likely breaks the op's definition; if it does not, the import is at fault: "
                    f"please report it")


def test_a_block_the_import_adds_itself_that_does_not_compile_is_a_bug_in_the_import(monkeypatch):
    from blockflow.importing import onnx_import
    from blockflow.importing.onnx_build import Wire

    def broken_loss(self):   # a loss no valid model is to blame for: MatMul of a vector
        marker = next(iter(self.report.outputs.values()))
        w = Wire(marker, "output")
        self.builder.page.loss = self.builder.add("MatMul", {"a": w, "b": w}, {}, "loss", None)

    monkeypatch.setattr(onnx_import._Importer, "_loss", broken_loss)
    text = _refusal(_model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", [3])], [_Y]))
    assert text.startswith("hostile.onnx: the imported diagram does not compile (a bug in the import, please "
                           "report it): error: m/loss")
