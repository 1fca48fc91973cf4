"""File > Import ONNX Model: a model imported off the UI thread and opened as an unsaved project,
its units composite instances, that runs backward in the editor with its wires coloured by
gradient; a refused model lists its ops and leaves the open project alone; work done while the
import ran is not lost."""
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
    before = window.document.project
    window.actions["import_onnx"].trigger()
    assert window.import_running() and window.document.project is before   # on its thread
    assert window.import_onnx_model(str(LIGHT / "light_squeezenet.onnx")) is False   # one at a time
    window.wait_for_import()
    assert not no_modal
    doc = window.document
    page = doc.project.pages[0]
    # the eight fire modules are instances of composites; conv1 and the classifier's blocks, drawn
    fires = [nid for nid in page.nodes if nid.startswith("fire")]
    assert fires == [f"fire{i}" for i in range(2, 10)]
    assert all(page.nodes[f].block.startswith("@") for f in fires)
    assert doc.path is None and doc.dirty
    assert page.loss == "loss" and [f.title for f in page.frames] == ["loss (added by the import)"]
    assert "10 units and 27 nodes of several blocks as instances of 9 composites" in window.statusBar().currentMessage()
    QApplication.processEvents()
    assert window.view.node_item("fire2") is not None
    # backward from the loss the import added: every layer's wires get a gradient, inside the
    # instances too
    window.actions["run_backward"].trigger()
    qtbot.waitUntil(lambda: window.session.results() is not None, timeout=20000)
    done = window.session.results()
    assert done.error is None, done.error
    nodes = {node for node, _ in done.result.grads}
    assert {"conv1/conv/conv2d", "fire2/squeeze1x1/conv2d", "fire9/expand3x3/conv2d"} <= nodes


def test_an_edit_made_while_importing_is_not_lost(qtbot, tmp_path, monkeypatch, no_modal):
    window = make_window(qtbot, tmp_path)
    doc = window.document
    asked = []
    # "Cancel" whenever there is unsaved work: the edit below must not be replaced unasked
    monkeypatch.setattr(window, "maybe_save", lambda: asked.append(doc.dirty) or not doc.dirty)
    assert window.import_onnx_model(str(LIGHT / "light_squeezenet.onnx")) is True
    project = doc.project
    doc.add_node("Relu", (40.0, 40.0))       # the user goes on working while the model is read
    window.wait_for_import()
    # asked first whether to replace the changed project: the box (answered No) keeps it
    assert asked == [False] and doc.project is project
    assert any(n.block == "Relu" for n in project.pages[0].nodes.values())
    assert "set aside" in window.statusBar().currentMessage()


def test_a_refused_model_names_its_ops_and_keeps_the_project(qtbot, tmp_path, no_modal):
    window = make_window(qtbot, tmp_path)
    before = window.document.project
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph([helper.make_node("Unique", ["x"], ["y"], name="u")], "g", [x], [y])
    path = tmp_path / "m.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString())
    assert window.import_onnx_model(str(path)) is True
    window.wait_for_import()
    text, details = no_modal[-1]
    assert "m.onnx" in text and "Unique (1 node: u)" in details
    assert window.document.project is before


def test_garbage_is_refused_with_the_file_named(qtbot, tmp_path, no_modal):
    window = make_window(qtbot, tmp_path)
    path = tmp_path / "bad.onnx"
    path.write_bytes(b"\x08\x01not a model")
    assert window.import_onnx_model(str(path)) is True
    window.wait_for_import()
    assert "bad.onnx" in no_modal[-1][0]
