"""File > Import ONNX Model: a model opened as an unsaved project, framed and laid out, that runs
backward in the editor with its wires coloured by gradient; a refused model lists its ops and
leaves the open project alone."""
from __future__ import annotations

from pathlib import Path

import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper  # noqa: E402
from PySide6.QtWidgets import QApplication, QFileDialog, QMessageBox  # noqa: E402

from composite_window import make_window  # noqa: E402

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


@pytest.fixture
def no_modal(monkeypatch):
    shown = []
    monkeypatch.setattr(QMessageBox, "exec", lambda self: shown.append((self.text(), self.detailedText())) or 0)
    return shown


def test_the_menu_imports_a_model_as_an_unsaved_project(qtbot, tmp_path, monkeypatch, no_modal):
    window = make_window(qtbot, tmp_path)
    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *a, **k: (str(LIGHT / "light_squeezenet.onnx"), ""))
    window.actions["import_onnx"].trigger()
    assert not no_modal
    doc = window.document
    page = doc.project.pages[0]
    assert len(page.nodes) == 151 and doc.path is None and doc.dirty
    assert page.loss == "loss" and page.frames[-1].title == "loss (added by the import)"
    assert [f.title for f in page.frames][:2] == ["conv1", "fire2"]
    assert "151 blocks" in window.statusBar().currentMessage()
    QApplication.processEvents()
    assert window.view.node_item("fire2.squeeze1x1") is not None
    # backward from the loss the import added: every layer's wires get a gradient
    window.actions["run_backward"].trigger()
    qtbot.waitUntil(lambda: window.session.results() is not None, timeout=20000)
    done = window.session.results()
    assert done.error is None, done.error
    nodes = {node for node, _ in done.result.grads}
    assert {"conv1", "fire2.squeeze1x1", "fire9.expand3x3"} <= nodes


def test_a_refused_model_names_its_ops_and_keeps_the_project(qtbot, tmp_path, no_modal):
    window = make_window(qtbot, tmp_path)
    before = window.document.project
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph([helper.make_node("Unique", ["x"], ["y"], name="u")], "g", [x], [y])
    path = tmp_path / "m.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString())
    assert window.import_onnx_model(str(path)) is False
    text, details = no_modal[-1]
    assert "m.onnx" in text and "Unique (1 node: u)" in details
    assert window.document.project is before


def test_garbage_is_refused_with_the_file_named(qtbot, tmp_path, no_modal):
    window = make_window(qtbot, tmp_path)
    path = tmp_path / "bad.onnx"
    path.write_bytes(b"\x08\x01not a model")
    assert window.import_onnx_model(str(path)) is False
    assert "bad.onnx" in no_modal[-1][0]
