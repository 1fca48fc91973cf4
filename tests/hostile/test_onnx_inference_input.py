"""Hostile ONNX files that onnx's shape inference cannot get through: the import reads them as plain
data, but hands the model to onnx's strict shape inference, which walks every subgraph and loops
forever on some Einsum equations. What it cannot get through is refused before it runs
(onnx_read._walk_graphs; docs/import.md)."""
from __future__ import annotations

import re
import subprocess
import sys

import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper  # noqa: E402

from blockflow.importing.errors import ImportFailure, UnsupportedOps  # noqa: E402
from blockflow.importing.onnx_import import import_model  # noqa: E402
from blockflow.importing.onnx_read import read_onnx_bytes  # noqa: E402
from blockflow.io import rules  # noqa: E402


def _model(nodes, inputs, outputs, opset=13):
    graph = helper.make_graph(nodes, "g", inputs, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _import(model):
    return import_model(read_onnx_bytes(model.SerializeToString(), "hostile.onnx"), "m")


def test_nodes_past_a_page_s_limit_inside_subgraphs_are_refused_before_shape_inference(monkeypatch):
    """The import reads no subgraph, but onnx's shape inference walked them: a 25 MB If body of a
    million nodes took 10 s and 1.7 GB (under the page's limit of top-level nodes, none checked)."""
    monkeypatch.setattr(rules, "MAX_NODES_PER_PAGE", 6)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    c = helper.make_tensor_value_info("c", TensorProto.BOOL, [])

    def body(nodes, name):
        chain = [helper.make_node("Identity", ["x"], [f"{name}0"])] + [
            helper.make_node("Neg", [f"{name}{i}"], [f"{name}{i + 1}"]) for i in range(nodes)]
        return helper.make_graph(chain, name, [], [helper.make_tensor_value_info(f"{name}{nodes}", TensorProto.FLOAT, [2])])

    def if_node(then, out, name):
        return helper.make_node("If", ["c"], [out], name=name, then_branch=then, else_branch=body(0, f"{name}_e"))

    inner = if_node(body(4, "deep"), "i", "inner")     # 1 + 5 + 1 nodes two levels down
    outer = helper.make_graph([inner], "outer", [], [helper.make_tensor_value_info("i", TensorProto.FLOAT, [2])])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    with pytest.raises(ImportFailure, match=r"node 'inner' \(If\): the graph and its subgraphs \(If, Loop and "
                                            r"Scan bodies\) have more than 6 nodes"):
        _import(_model([if_node(outer, "y", "top")], [x, c], [y]))
    with pytest.raises(UnsupportedOps, match="If"):     # within the limit: listed as before
        _import(_model([if_node(body(1, "b"), "y", "top")], [x, c], [y]))


def _einsum_model(equation, in_if=False):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    node = helper.make_node("Einsum", ["x"], ["y"], name="e", equation=equation)
    if not in_if:
        return _model([node], [x], [y])
    then = helper.make_graph([node], "then", [], [y])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["y2"])], "else", [],
                              [helper.make_tensor_value_info("y2", TensorProto.FLOAT, None)])
    c = helper.make_tensor_value_info("c", TensorProto.BOOL, [])
    return _model([helper.make_node("If", ["c"], ["y"], name="if", then_branch=then, else_branch=other)], [x, c], [y])


@pytest.mark.parametrize("equation, in_if, says", [
    ("ij#->ij", False, "has '#' in the term 'ij#'"),
    ("ij\0->ij", False, r"has U\+0000 \(NUL\) in the term 'ij\?'"),
    ("i\tj->ij", False, r"has U\+0009 \(TAB\)"),
    ("i..j->ij", False, "has '.' in the term 'i..j'"),
    ("ij-->ij", False, "has '-' in the term 'ij-'"),
    ("ij#->ij", True, "has '#'"),            # inside an If body, which inference walks too
])
def test_an_einsum_equation_onnx_s_inference_never_finishes_reading_is_refused(tmp_path, equation, in_if, says):
    """onnx's shape inference looped forever on these: a 100-byte file hung the import (and the
    editor). Run as a process, so that a hang fails the test instead of stopping the suite."""
    path = tmp_path / "e.onnx"
    path.write_bytes(_einsum_model(equation, in_if).SerializeToString())
    done = subprocess.run([sys.executable, "-m", "blockflow", "import", "onnx", str(path), "-o",
                           str(tmp_path / "e.bflow.json")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 3, done.stderr
    assert re.search(r"node 'e' \(Einsum\): the model is not valid ONNX: its equation .*" + says, done.stderr)


def test_einsum_equations_with_spaces_and_an_ellipsis_still_import():
    for equation in ("i j -> j i", "...j->...j", "ij->"):
        _import(_einsum_model(equation))


def _crasher(kind):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    s = helper.make_tensor_value_info("s", TensorProto.FLOAT, [3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    if kind == "eye-like-without-its-input":
        return _model([helper.make_node("EyeLike", [""], ["y"], name="n", dtype=1)], [], [y], opset=17)
    if kind == "split-into-2-to-the-26-with-one-output":   # inference made that many pieces: 1 GB
        return _model([helper.make_node("Split", ["x"], ["y"], name="n", axis=1, num_outputs=2 ** 26)], [x], [y],
                      opset=18)
    if kind == "eye-like-with-two-inputs":
        return _model([helper.make_node("EyeLike", ["", "x"], ["y"], name="n", dtype=0)], [x], [y], opset=17)
    return _model([helper.make_node("LayerNormalization", ["x", "s"], ["y", "m", "r"], name="n", axis=2 ** 31)],
                  [x, s], [y], opset=17)


@pytest.mark.parametrize("kind, says", [
    ("eye-like-without-its-input", r"node 'n' \(EyeLike\): the model is not valid ONNX: its input 0 \(input\) is "
                                   r"required, and the node leaves it out"),
    ("eye-like-with-two-inputs", r"node 'n' \(EyeLike\): the model is not valid ONNX: it has 2 inputs; EyeLike takes 1"),
    ("layer-norm-at-axis-2-to-the-31", r"node 'n' \(LayerNormalization\): the model is not valid ONNX: its attribute "
                                       r"'axis' is 2147483648, past any value's axes"),
    ("split-into-2-to-the-26-with-one-output", r"node 'n' \(Split\): the model is not valid ONNX: its attribute "
                                               r"'num_outputs' is 67,108,864, and it has 1 outputs"),
])
def test_a_node_onnx_s_shape_inference_crashes_on_is_refused_before_it_runs(tmp_path, kind, says):
    """Each made onnx's shape inference (1.2x) segfault, killing the command line (exit 139) or
    the editor with its unsaved work, or (Split) allocate a piece per num_outputs (2^31 of them:
    34 GB): a 60-byte file. onnx's checker refuses each. Run as a process, so that a crash fails
    the test instead of the suite."""
    path = tmp_path / "c.onnx"
    path.write_bytes(_crasher(kind).SerializeToString())
    done = subprocess.run([sys.executable, "-m", "blockflow", "import", "onnx", str(path), "-o",
                           str(tmp_path / "c.bflow.json")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 3, (done.returncode, done.stderr)
    assert re.search(says, done.stderr), done.stderr


def test_a_graph_input_no_project_holds_is_refused_before_shape_inference(tmp_path):
    """onnx's inference of a Slice takes time and memory after its ends' declared length: ends
    declared [2^40] ran for hours (the import refused the input only after inference). Run as a
    process, so that a hang fails the test instead of stopping the suite."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    starts = helper.make_tensor_value_info("s", TensorProto.INT64, [1])
    ends = helper.make_tensor_value_info("e", TensorProto.INT64, [2 ** 40])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    model = _model([helper.make_node("Slice", ["x", "s", "e"], ["y"], name="n")], [x, starts, ends], [y])
    path = tmp_path / "s.onnx"
    path.write_bytes(model.SerializeToString())
    done = subprocess.run([sys.executable, "-m", "blockflow", "import", "onnx", str(path), "-o",
                           str(tmp_path / "s.bflow.json")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 3, (done.returncode, done.stderr)
    assert "graph input 'e' has 1,099,511,627,776 elements; the limit for one array is 1,000,000,000" in done.stderr
