"""Arrays a mapping makes as large as a node's input or output (a grid of coordinates, a mask, a
count per output position): a small file declares the sizes, so each is checked against the limits
of one tensor and what the memory budget leaves before it is made (docs/import.md).

Before, GatherElements, ScatterElements, NegativeLogLikelihoodLoss, Trilu, EyeLike, AveragePool
with padding and Pad's edge and wrap modes made them whatever the budget: a 1 MiB budget let each
make tens of MiB, and an AveragePool with pads of 10^6 on a 4 x 4 input asked numpy for 29 TiB."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from blockflow.importing.errors import ImportFailure  # noqa: E402
from blockflow.importing.onnx_import import import_model  # noqa: E402
from blockflow.importing.onnx_read import read_onnx_bytes  # noqa: E402
from memory_tracing import traced_peak  # noqa: E402

F, I64 = TensorProto.FLOAT, TensorProto.INT64
_N = helper.make_node


def _vi(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


def _model(node, inputs, inits=()):
    graph = helper.make_graph([node], "g", inputs, [_vi("y", F, None)],
                              initializer=[numpy_helper.from_array(np.asarray(v), k) for k, v in inits])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def _import(model):
    return import_model(read_onnx_bytes(model.SerializeToString(), "sizes.onnx"), "m")


# inputs of more than 4 million entries get no stand-in feed: what is traced is the mapping's
MAKERS = [
    ("gather-elements", lambda: _model(_N("GatherElements", ["x", "i"], ["y"], axis=0),
                                       [_vi("x", F, [3000, 1500]), _vi("i", I64, [3000, 1500])])),
    ("scatter-elements", lambda: _model(_N("ScatterElements", ["x", "i", "u"], ["y"], axis=0),
                                        [_vi("x", F, [3000, 1500]), _vi("i", I64, [3000, 1500]),
                                         _vi("u", F, [3000, 1500])])),
    ("nll-loss", lambda: _model(_N("NegativeLogLikelihoodLoss", ["x", "t"], ["y"]),
                                [_vi("x", F, [3000, 2, 1500]), _vi("t", I64, [3000, 1500])])),
    ("trilu", lambda: _model(_N("Trilu", ["x"], ["y"]), [_vi("x", F, [1, 4000, 4000])])),
    ("eye-like", lambda: _model(_N("EyeLike", ["x"], ["y"]), [_vi("x", F, [2100, 2100])])),
    ("average-pool-padded", lambda: _model(_N("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], pads=[1, 1, 1, 1]),
                                           [_vi("x", F, [1, 1, 2100, 2100])])),
    ("pad-edge", lambda: _model(_N("Pad", ["x", "p"], ["y"], mode="edge"), [_vi("x", F, [1, 4])],
                                [("p", np.array([0, 0, 0, 4_000_000]))])),
]


@pytest.mark.parametrize("make", [pytest.param(m, id=i) for i, m in MAKERS])
def test_a_constant_a_mapping_makes_past_the_memory_budget_is_refused_before_it_is_made(make, monkeypatch):
    monkeypatch.setenv("BLOCKFLOW_MEMORY_BUDGET", "1M")
    model = make()

    def go():
        with pytest.raises(ImportFailure, match=r"node 'y' \(\w+\): .* more than the memory budget leaves"):
            _import(model)
    assert traced_peak(go)[1] < 4 * 2 ** 20


def test_each_fits_a_budget_that_holds_it():
    for _, make in MAKERS:
        _import(make())


def test_an_average_pool_padded_by_a_million_is_refused_by_its_size_not_asked_of_numpy():
    model = _model(_N("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], pads=[1_000_000] * 4),
                   [_vi("x", F, [1, 1, 4, 4])])

    def go():
        with pytest.raises(ImportFailure, match="AveragePool.*the limit for one tensor"):
            _import(model)
    assert traced_peak(go)[1] < 4 * 2 ** 20
