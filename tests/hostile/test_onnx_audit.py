"""An audit of the ONNX import (issue 17): models, made in memory, that break a promise of
docs/import.md — wrong numbers, a traceback where a message was promised, an allocation past the
memory budget, a project that imports but then does not load, a message that blames the import
for the model's fault.

Every test here failed on the import as audited; each carries the finding (``_found``), what was
wrong and where, and passes since its fix."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from blockflow.cli.entry import main  # noqa: E402
from blockflow.compile.compiler import compile_project  # noqa: E402
from blockflow.importing.errors import ImportFailure, UnsupportedOps  # noqa: E402
from blockflow.importing.onnx_import import import_model  # noqa: E402
from blockflow.importing.onnx_read import read_onnx_bytes  # noqa: E402
from blockflow.io.project_io import load_project, save_project  # noqa: E402
from blockflow.run.runtime import run  # noqa: E402
from memory_tracing import traced_peak  # noqa: E402

F = TensorProto.FLOAT


def _found(finding):
    """The audit's finding a test was written for (fixed): kept as the test's record of why."""
    def keep(fn):
        fn.finding = finding
        return fn
    return keep


def _model(nodes, inputs, outputs, initializers=(), opset=13):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _vi(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


def _c(name, value):
    return numpy_helper.from_array(np.asarray(value), name)


def _import(model, name="audit.onnx"):
    return import_model(read_onnx_bytes(model.SerializeToString(), name), "m")


def _outputs(model, feeds):
    """The imported model's graph outputs for ``feeds`` ({ONNX input name: array})."""
    project, report = _import(model)
    program = compile_project(project)
    result = run(program, {report.inputs[k]: v for k, v in feeds.items()},
                 fetch=list(report.outputs.values()), record=False)
    return [np.asarray(result.value(nid)) for nid in report.outputs.values()]


# ------------------------------------------------------------------------------ wrong numbers

def _whole_conv_transpose(x, w, strides):
    """ONNX's ConvTranspose with no padding (every position an input entry reaches), in float64."""
    n, _, h, wd = x.shape
    _, m, kh, kw = w.shape
    y = np.zeros((n, m, (h - 1) * strides[0] + kh, (wd - 1) * strides[1] + kw))
    for i in range(h):
        for j in range(wd):
            y[:, :, i * strides[0]:i * strides[0] + kh, j * strides[1]:j * strides[1] + kw] += np.einsum(
                "nc,cmab->nmab", x[:, :, i, j], w)
    return y


@_found("onnx_map_convt._placement: with output_shape (auto_pad NOTSET) it keeps the whole result from "
        "position pads[i] (0), but ONNX ignores pads then and puts the odd padding first: "
        "pads_begin = total - total // 2 with total = whole - output_shape (ONNX Runtime agrees); a "
        "3x3 input, stride 2, kernel 3, output_shape [6, 6] comes out shifted by one row and column")
def test_conv_transpose_with_an_output_shape_pads_as_onnx_defines():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 2, 3, 3)).astype(np.float32)
    w = rng.standard_normal((2, 3, 3, 3)).astype(np.float32)
    model = _model([_N("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2], output_shape=[6, 6])],
                   [_vi("x", F, [1, 2, 3, 3])], [_vi("y", F, None)], [_c("w", w)])
    (y,) = _outputs(model, {"x": x})
    whole = _whole_conv_transpose(x.astype(np.float64), w.astype(np.float64), (2, 2))   # 7 x 7
    total = whole.shape[2] - 6
    first = total - total // 2
    np.testing.assert_allclose(y, whole[:, :, first:first + 6, first:first + 6], rtol=1e-4, atol=1e-4)


@_found("_Importer._node: a value written by two nodes (not SSA, onnx.checker and ONNX Runtime refuse "
        "it) is silently rebound, so readers before and after the second writer see different values")
def test_a_value_written_by_two_nodes_is_refused():
    model = _model([helper.make_node("Relu", ["x"], ["t"], name="first"),
                    helper.make_node("Neg", ["t"], ["u"]),
                    helper.make_node("Abs", ["x"], ["t"], name="second"),
                    helper.make_node("Add", ["t", "u"], ["y"])],
                   [_vi("x", F, [2, 3])], [_vi("y", F, [2, 3])])
    with pytest.raises(ImportFailure, match="'t'"):
        _import(model)


@_found("_Importer._node: a node writing a graph input's name (x = Relu(x)) replaces the input "
        "silently; ONNX requires every value to have one producer")
def test_a_node_writing_a_graph_input_is_refused():
    model = _model([helper.make_node("Relu", ["x"], ["x"])], [_vi("x", F, [2, 3])], [_vi("x", F, [2, 3])])
    with pytest.raises(ImportFailure, match="'x'"):
        _import(model)


# ------------------------------------------------------------------------------ tracebacks

def _two_inputs_of(node, inits=(), opset=13, x_shape=(3,)):
    """``node`` making 'k', added to an input 'x' (so a folded node's result is used)."""
    return _model([node, helper.make_node("Add", ["x", "k"], ["y"])], [_vi("x", F, list(x_shape))],
                  [_vi("y", F, None)], inits, opset)


def _on_x(node, x_shape, inits=(), opset=13, dtype=F):
    return _model([node], [_vi("x", dtype, x_shape)], [_vi("y", dtype, None)], inits, opset)


_N = helper.make_node
_T = np.int64

#: (id, model, where it breaks) of models whose import ends in an exception other than
#: ImportFailure: the fix is in the function named, and, as a net, _Importer._node turning any
#: exception of a fold or a mapping into an ImportFailure naming the node
MALFORMED = [
    ("range-to-infinity", lambda: _two_inputs_of(_N("Range", ["s", "l", "d"], ["k"]), [
        _c("s", np.float32(0)), _c("l", np.float32(np.inf)), _c("d", np.float32(1))], 11),
     "onnx_fold._range: math.ceil(inf) raises OverflowError"),
    ("range-to-nan", lambda: _two_inputs_of(_N("Range", ["s", "l", "d"], ["k"]), [
        _c("s", np.float32(0)), _c("l", np.float32(np.nan)), _c("d", np.float32(1))], 11),
     "onnx_fold._range: math.ceil(nan) raises ValueError"),
    ("range-vector-delta", lambda: _two_inputs_of(_N("Range", ["s", "l", "d"], ["k"]), [
        _c("s", _T(0)), _c("l", _T(3)), _c("d", np.array([1, 2]))], 11),
     "onnx_fold._range: reshape(()) of a 2-element delta raises ValueError"),
    ("add-without-inputs", lambda: _two_inputs_of(_N("Add", [], ["k"])),
     "onnx_fold._elementwise: np.add() with no arguments raises TypeError (no input count is checked)"),
    ("shape-without-inputs", lambda: _two_inputs_of(_N("Shape", [], ["k"])),
     "_Importer._fold: values[0] of an empty list raises IndexError"),
    ("concat-without-inputs", lambda: _two_inputs_of(_N("Concat", [], ["k"], axis=0)),
     "onnx_fold._concat: arrays[0] raises IndexError"),
    ("reshape-without-its-shape", lambda: _two_inputs_of(_N("Reshape", ["w"], ["k"]), [
        _c("w", np.ones(3, np.float32))]),
     "onnx_fold._reshape: ins[1] raises IndexError"),
    ("gather-folded-on-a-scalar", lambda: _two_inputs_of(_N("Gather", ["w", "i"], ["k"]), [
        _c("w", np.float32(2)), _c("i", _T(0))]),
     "onnx_fold._gather: _axis accepts axis 0 of rank 0, data.shape[0] raises IndexError"),
    ("slice-folded-on-a-scalar", lambda: _two_inputs_of(_N("Slice", ["w", "s", "e"], ["k"]), [
        _c("w", np.float32(1)), _c("s", np.array([0])), _c("e", np.array([1]))]),
     "onnx_fold._slice: _axis accepts axis 0 of rank 0, index[0] raises IndexError"),
    ("unsqueeze-folded-without-axes", lambda: _two_inputs_of(_N("Unsqueeze", ["w"], ["k"]), [
        _c("w", np.ones(3, np.float32))], 11),
     "onnx_fold._unsqueeze: len(None) when opset < 13 and the axes attribute is missing"),
    ("gather-of-a-scalar", lambda: _on_x(_N("Gather", ["x", "i"], ["y"]), [], [_c("i", _T(0))]),
     "onnx_map_array.gather: axis % rank with rank 0 raises ZeroDivisionError"),
    ("concat-of-scalars", lambda: _on_x(_N("Concat", ["x", "x"], ["y"], axis=0), []),
     "onnx_map_array.concat: axis % rank with rank 0 raises ZeroDivisionError"),
    ("squeeze-of-a-scalar", lambda: _on_x(_N("Squeeze", ["x", "a"], ["y"]), [], [_c("a", np.array([0]))]),
     "onnx_map_array.squeeze: a % rank with rank 0 raises ZeroDivisionError"),
    ("split-of-a-scalar", lambda: _on_x(_N("Split", ["x"], ["y", "z"]), []),
     "onnx_map_array.split: axis % rank with rank 0 raises ZeroDivisionError"),
    ("split-into-no-outputs", lambda: _model([_N("Split", ["x"], [], axis=0)], [_vi("x", F, [4])], [_vi("x", F, [4])]),
     "onnx_map_array.split: dim % n with no outputs raises ZeroDivisionError"),
    ("reduce-a-scalar-over-axes", lambda: _on_x(_N("ReduceSum", ["x", "a"], ["y"]), [], [_c("a", np.array([0]))]),
     "onnx_map_math._reduce_axes: a % rank with rank 0 raises ZeroDivisionError"),
    ("cumsum-with-an-empty-axis", lambda: _on_x(_N("CumSum", ["x", "a"], ["y"]), [3], [_c("a", np.zeros(0, _T))]),
     "onnx_map_math.cumsum: axis[0] of an empty list raises IndexError"),
    ("topk-with-an-empty-k", lambda: _model([_N("TopK", ["x", "k"], ["y", "i"])], [_vi("x", F, [3])],
                                            [_vi("y", F, None)], [_c("k", np.zeros(0, _T))]),
     "onnx_map_array.topk: [0] of an empty list raises IndexError"),
    ("dropout-with-an-empty-ratio", lambda: _on_x(_N("Dropout", ["x", "r"], ["y"]), [3], [_c("r", np.zeros(0, np.float32))]),
     "onnx_map_nn.dropout: reshape(-1)[0] of an empty ratio raises IndexError"),
    ("pad-with-an-empty-value", lambda: _on_x(_N("Pad", ["x", "p", "v"], ["y"]), [3], [
        _c("p", np.array([1, 1])), _c("v", np.zeros(0, np.float32))]),
     "onnx_map_array.pad: reshape(-1)[0] of an empty constant_value raises IndexError"),
    ("clip-of-bools", lambda: _on_x(_N("Clip", ["x"], ["y"]), [3], dtype=TensorProto.BOOL),
     "onnx_map_math.clip: np.iinfo(bool) raises ValueError"),
    ("average-pool-with-stride-0", lambda: _on_x(_N("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], strides=[0, 0],
                                                     pads=[1, 1, 1, 1]), [1, 3, 4, 4]),
     "onnx_map_nn.average_pool: // strides[0] raises ZeroDivisionError (strides are never checked > 0)"),
    ("max-pool-ceil-with-stride-0", lambda: _on_x(_N("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[0, 1],
                                                      ceil_mode=1), [1, 3, 4, 4]),
     "onnx_map_nn._ceil_extra: // s raises ZeroDivisionError"),
    ("conv-same-lower-with-stride-0", lambda: _on_x(_N("Conv", ["x", "w"], ["y"], auto_pad="SAME_LOWER", strides=[0, 1]),
                                                    [1, 3, 4, 4], [_c("w", np.ones((3, 3, 3, 3), np.float32))]),
     "onnx_map_nn._same_pads: // s raises ZeroDivisionError"),
    ("an-input-of-2-to-the-80-elements", lambda: _on_x(_N("Relu", ["x"], ["y"]), [2 ** 40, 2 ** 40]),
     "onnx_import._stand_in_feed: np.prod overflows int64 to 0, so the size check passes and "
     "np.arange(0).reshape(shape) raises ValueError (math.prod of Python ints would not)"),
]


@pytest.mark.parametrize("make", [pytest.param(m, id=i) for i, m, _ in MALFORMED])
def test_a_malformed_model_is_refused_with_a_message_not_a_traceback(make):
    with pytest.raises(ImportFailure, match="audit.onnx"):
        _import(make())


@_found("cmd_import only catches ImportFailure: a malformed model (a Range to infinity) ends in "
        "'internal error' exit 5, where docs/import.md promises exit 3 and a message naming the file")
def test_the_command_line_exits_3_not_5_on_a_malformed_model(tmp_path, capsys):
    path = tmp_path / "m.onnx"
    path.write_bytes(MALFORMED[0][1]().SerializeToString())
    assert main(["import", "onnx", str(path), "-o", str(tmp_path / "m.bflow.json")]) == 3
    assert "m.onnx" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]


@_found("cmd_import._same_file: os.path.samefile(model, 'm.onnx/../m.onnx') raises ENOTDIR, read as "
        "'not the same file', while save_project normalises the path and writes over the model (keeping "
        "it as m.onnx.bak); docs/import.md promises -o naming the model is refused with exit 2. Fix: "
        "compare the path save_project will write (normalised, symlinks resolved) with the model's")
def test_the_command_line_will_not_write_over_the_model_through_dot_dot(tmp_path):
    path = tmp_path / "m.onnx"
    model = _on_x(_N("Relu", ["x"], ["y"]), [3]).SerializeToString()
    path.write_bytes(model)
    assert main(["import", "onnx", str(path), "-o", f"{path}/../m.onnx"]) == 2
    assert path.read_bytes() == model


@_found("ModelImportMixin.import_onnx_model catches ImportFailure only: a malformed model raises out "
        "of the menu action instead of showing 'Cannot import the model'")
def test_the_editor_refuses_a_malformed_model_with_its_message_box(qtbot, tmp_path, monkeypatch):
    from PySide6.QtWidgets import QMessageBox
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gui"))
    from composite_window import make_window

    shown = []
    monkeypatch.setattr(QMessageBox, "exec", lambda self: shown.append(self.text()) or 0)
    window = make_window(qtbot, tmp_path)
    before = window.document.project
    path = tmp_path / "m.onnx"
    path.write_bytes(MALFORMED[0][1]().SerializeToString())
    assert window.import_onnx_model(str(path)) is True      # started; it ends on its thread
    window.wait_for_import()
    assert shown and "m.onnx" in shown[-1]
    assert window.document.project is before


# ------------------------------------------------------------------------------ memory

def _traced_peak(fn) -> int:
    return traced_peak(fn)[1]


def _refused_within(model, limit: int):
    def go():
        with pytest.raises(ImportFailure, match="memory budget"):
            _import(model)
    peak = _traced_peak(go)
    assert peak < limit, f"{peak / 2 ** 20:.0f} MiB traced while refusing"


FOLDS_PAST_THE_BUDGET = [
    ("constant-of-shape", lambda: _model([_N("ConstantOfShape", ["s"], ["y"])], [], [_vi("y", F, None)],
                                         [_c("s", np.array([16_000_000]))])),
    ("range", lambda: _model([_N("Range", ["s", "l", "d"], ["y"])], [], [_vi("y", F, None)],
                             [_c("s", np.float32(0)), _c("l", np.float32(16e6)), _c("d", np.float32(1))], 11)),
    ("expand", lambda: _model([_N("Expand", ["w", "s"], ["y"])], [], [_vi("y", F, None)],
                              [_c("w", np.ones(1, np.float32)), _c("s", np.array([16_000_000]))])),
    ("concat-of-one-weight-many-times", lambda: _model([_N("Concat", ["w"] * 64, ["y"], axis=0)], [], [_vi("y", F, None)],
                                                       [_c("w", np.ones(250_000, np.float32))])),
]


@_found("_Importer._fold checked the memory budget after fold() had made the array: with a 1 MiB budget a "
        "64 MB constant was allocated, then refused (Range peaked at 4x that: float arange, then astype); "
        "Concat had no size check at all before np.concatenate. Fixed: each fold's result size (shape x "
        "itemsize) is checked against what the budget leaves before it is made")
@pytest.mark.parametrize("make", [pytest.param(m, id=i) for i, m in FOLDS_PAST_THE_BUDGET])
def test_a_fold_past_the_memory_budget_is_refused_before_it_allocates(make, monkeypatch):
    monkeypatch.setenv("BLOCKFLOW_MEMORY_BUDGET", "1M")
    _refused_within(make(), 8 * 2 ** 20)


_SIDE = np.ones((4000, 1), np.float32)   # 16 KB each way; their broadcast is 61 MiB
FOLDS_THAT_BROADCAST_PAST_THE_BUDGET = [
    ("add", lambda: _model([_N("Add", ["a", "b"], ["y"])], [], [_vi("y", F, None)], [_c("a", _SIDE), _c("b", _SIDE.T)])),
    ("where", lambda: _model([_N("Where", ["k", "a", "b"], ["y"])], [], [_vi("y", F, None)],
                             [_c("k", np.ones((1, 1), bool)), _c("a", _SIDE), _c("b", _SIDE.T)])),
    ("gather", lambda: _model([_N("Gather", ["a", "i"], ["y"], axis=0)], [], [_vi("y", F, None)],
                              [_c("a", _SIDE.T), _c("i", np.zeros(4000, np.int64))])),
    ("cast-int8-to-float64", lambda: _model([_N("Cast", ["a"], ["y"], to=TensorProto.DOUBLE)], [],
                                            [_vi("y", TensorProto.DOUBLE, None)], [_c("a", np.ones(700_000, np.int8))])),
]


@_found("hunt 28a: the folds of elementwise ops, Where, Gather and Cast checked the result's element count "
        "only, not the memory budget: two 16 KB constants broadcast to 61 MiB (to 4 GB from two 125 KB "
        "ones) were made, then refused. Fixed: each checks its result's bytes against what the budget "
        "leaves before it is made, as ConstantOfShape, Expand and Concat do")
@pytest.mark.parametrize("make", [pytest.param(m, id=i) for i, m in FOLDS_THAT_BROADCAST_PAST_THE_BUDGET])
def test_a_fold_that_broadcasts_past_the_memory_budget_is_refused_before_it_allocates(make, monkeypatch):
    monkeypatch.setenv("BLOCKFLOW_MEMORY_BUDGET", "1M")
    _refused_within(make(), 4 * 2 ** 20)


@_found("onnx_read._attr turns repeated ints/floats/strings into Python tuples counted nowhere: an "
        "attribute of 2M ints (a 6 MB file) holds ~100 MB of Python objects traced (a 2 GiB file: tens of GB). "
        "Fix: count each list attribute's elements against MAX_ARRAY_ELEMENTS and the budget before "
        "converting it (or refuse lists longer than any op needs)")
def test_a_huge_attribute_list_counts_against_the_memory_budget(monkeypatch):
    monkeypatch.setenv("BLOCKFLOW_MEMORY_BUDGET", "1M")
    model = _on_x(_N("Relu", ["x"], ["y"], junk=[300] * 2_000_000), [3])
    _refused_within(model, 16 * 2 ** 20)


# ------------------------------------------------------------------------------ projects that do not load

@_found("_Importer._placeholder does not hold a graph input to MAX_NDIM (32): an input of rank 40 "
        "imports, saves, and then the project does not load (its stand-in feed has 40 dimensions)")
def test_an_input_of_more_dimensions_than_a_project_holds_is_refused_at_import(tmp_path):
    model = _on_x(_N("Relu", ["x"], ["y"]), [1] * 40)
    try:
        project, _ = _import(model)
    except ImportFailure as exc:
        assert "'x'" in str(exc) and "32" in str(exc)
        return
    save_project(project, tmp_path / "p.bflow.json")
    load_project(tmp_path / "p.bflow.json")


# ------------------------------------------------------------------------------ messages

#: models that are the model's fault, refused with "the imported diagram does not compile (a bug
#: in the import, please report it)", or with a message that misnames the problem
BLAMED = [
    ("negative-input-size", lambda: _on_x(_N("Relu", ["x"], ["y"]), [-5, 3]),
     "_Importer._placeholder: a dim_value < 0 reaches the Placeholder's shape attr"),
    ("input-too-large-for-a-tensor", lambda: _on_x(_N("Relu", ["x"], ["y"]), [100_000, 100_000]),
     "_Importer._placeholder: an input past the one-tensor limit is only caught by the compile"),
    ("transpose-perm-not-a-permutation", lambda: _on_x(_N("Transpose", ["x"], ["y"], perm=[0, 5]), [3, 3]),
     "onnx_map_array.transpose: perm not checked (the fold checks it, the mapping does not)"),
    ("argmax-of-a-scalar", lambda: _on_x(_N("ArgMax", ["x"], ["y"]), []),
     "onnx_map_math.arg: axis % max(rank, 1) accepts axis 0 of rank 0"),
    ("einsum-of-three-operands", lambda: _model([_N("Einsum", ["x", "x", "x"], ["y"], equation="ij,jk,kl->il")],
                                                [_vi("x", F, [2, 2])], [_vi("y", F, None)], opset=12),
     "onnx_map_math.einsum: a valid ONNX Einsum the block cannot take (three operands) is not refused "
     "as Unsupported by the mapping, so the compile rejects it as a bug"),
]


@pytest.mark.parametrize("make", [pytest.param(m, id=i) for i, m, _ in BLAMED])
def test_a_model_error_is_not_reported_as_a_bug_in_the_import(make):
    with pytest.raises((ImportFailure, UnsupportedOps)) as caught:
        _import(make())
    assert "bug in the import" not in str(caught.value)


@_found("onnx_read._value_info maps an input of a dtype a project does not hold (string, uint16) "
        "to dtype None, and _placeholder then says 'no tensor type with a shape (its dtype or rank is "
        "unknown)'; the reader's own tensor message names the dtype")
@pytest.mark.parametrize("dtype, name", [(TensorProto.STRING, "string"), (TensorProto.UINT16, "uint16")])
def test_an_input_of_a_dtype_a_project_does_not_hold_is_named_by_its_dtype(dtype, name):
    with pytest.raises(ImportFailure, match=name):
        _import(_model([_N("Identity", ["x"], ["y"])], [_vi("x", dtype, [2])], [_vi("y", dtype, None)]))


# ------------------------------------------------------------------------------ refused though exact

@_found("onnx_map_array.reshape: Reshape(x [N, 5, 3], [0, -1]) — PyTorch's x.view(x.size(0), -1) — "
        "is refused ('more than one size left open'), though the -1 is known (15) from the sizes the "
        "0 does not copy; an exact mapping is Reshape to [-1, 15]")
def test_reshape_keeping_an_open_batch_and_flattening_the_rest_imports():
    x = np.arange(30, dtype=np.float32).reshape(2, 5, 3)
    model = _model([_N("Reshape", ["x", "s"], ["y"])], [_vi("x", F, ["N", 5, 3])], [_vi("y", F, None)],
                   [_c("s", np.array([0, -1]))])
    (y,) = _outputs(model, {"x": x})
    np.testing.assert_array_equal(y, x.reshape(2, 15))


# ------------------------------------------------------------------------------ training what the model is

@_found("_Importer._fold folds a layout op of a parameter (Transpose, Identity, Reshape of an initializer) "
        "into a new param Known, so a weight the model ties (a language model's embedding read again "
        "through Transpose for the output layer) becomes two Variables: Backward shows its gradient split "
        "in two and training unties it. Fix: do not fold a float parameter through such ops; map them "
        "as blocks reading the one Variable (as Gemm's transB already does)")
@pytest.mark.parametrize("op", ["Transpose", "Identity"])
def test_a_weight_read_through_a_layout_op_stays_one_variable(op):
    w = np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32)
    model = _model([_N("MatMul", ["x", "W"], ["a"]), _N(op, ["W"], ["W2"]), _N("MatMul", ["a", "W2"], ["y"])],
                   [_vi("x", F, [2, 4])], [_vi("y", F, [2, 4])], [_c("W", w)])
    project, report = _import(model)
    assert report.variables == 1


# ------------------------------------------------------------------------------ time

@_found("onnx_names.shared_prefix: max(set(scoped), key=scoped.count) is quadratic in the number of "
        "distinct first scopes: 12,000 nodes each in its own scope take 1.4 s there, 36,000 take ~13 s, "
        "a page's limit (200,000) ~7 minutes. Fix: collections.Counter(scoped).most_common(1)")
def test_the_shared_scope_is_found_in_linear_time(monkeypatch):
    import time

    from call_counts import Calls

    from blockflow.importing import onnx_names

    # The names are counted in one pass of a Counter; list.count's passes (one per distinct scope)
    # cannot be counted from Python, so a time bound stays, a backstop: 36,000 names take about
    # 15 ms in one pass and ~13 s in one per scope, and 3 s is 10x more than a loaded machine needs.
    counted = Calls(monkeypatch, onnx_names, "Counter")
    names = [f"scope{i}/relu" for i in range(36_000)]
    start = time.perf_counter()
    assert onnx_names.shared_prefix(names) == ""
    took = time.perf_counter() - start
    assert counted.n == 1
    assert took < 3, took


@_found("onnx_map_math.einsum maps any equation and leaves the block's limits to the compile: an Einsum "
        "of three operands is not in the list of unsupported ops (docs/import.md: 'it lists every such "
        "op'), so a user fixing the listed ones meets it only on the next try, as 'a bug in the import'")
def test_an_einsum_the_block_cannot_take_is_listed_with_the_other_unsupported_ops():
    model = _model([_N("Einsum", ["x", "x", "x"], ["e"], equation="ij,jk,kl->il", name="three"),
                    _N("Custom", ["e"], ["y"], name="custom", domain="com.example")],
                   [_vi("x", F, [2, 2])], [_vi("y", F, None)], opset=12)
    model.opset_import.append(helper.make_opsetid("com.example", 1))
    with pytest.raises(UnsupportedOps) as caught:
        _import(model)
    assert "Custom" in str(caught.value) and "Einsum (1 node: three)" in str(caught.value)
