"""Audit of File > Import ONNX Model on its Worker thread (audit17b): an import that ends after
the user went on working, or after the window was closed."""
from __future__ import annotations

from pathlib import Path

import pytest

onnx = pytest.importorskip("onnx")

from PySide6.QtWidgets import QMessageBox  # noqa: E402

from composite_window import make_window  # noqa: E402

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
MODEL = str(LIGHT / "light_squeezenet.onnx")


@pytest.fixture
def no_modal(monkeypatch):
    shown = []
    monkeypatch.setattr(QMessageBox, "exec", lambda self: shown.append((self.text(), self.detailedText())) or 0)
    return shown


def test_an_undo_then_a_new_edit_while_importing_is_not_lost(qtbot, tmp_path, no_modal):
    window = make_window(qtbot, tmp_path)
    doc = window.document
    doc.add_node("Relu", (40.0, 40.0))
    doc.undo_stack.setClean()             # saved: nothing to ask about when the import starts
    asked = []
    window.maybe_save = lambda: asked.append(doc.dirty) or not doc.dirty   # "Cancel" on unsaved work
    assert window.import_onnx_model(MODEL) is True
    project = doc.project
    doc.undo_stack.undo()                 # the user goes on working: takes the Relu back ...
    doc.add_node("Sigmoid", (40.0, 40.0))  # ... and adds a Sigmoid instead (unsaved)
    assert doc.dirty
    window.wait_for_import()
    # asked whether to replace the changed project (the box answered No): maybe_save not reached
    assert asked == [False] and "set aside" in window.statusBar().currentMessage()
    assert doc.project is project and any(n.block == "Sigmoid" for n in project.pages[0].nodes.values())


def test_an_import_ending_after_the_window_closed_opens_nothing(qtbot, tmp_path, no_modal):
    window = make_window(qtbot, tmp_path)
    before = window.document.project
    assert window.import_onnx_model(MODEL) is True
    assert window.close()
    window.wait_for_import()
    assert window.document.project is before
    assert not window.autosaver.autosave_now()


def test_ungrouping_imported_instances_in_the_editor_keeps_the_numbers(qtbot, tmp_path, no_modal):
    import numpy as np

    from blockflow.compile.compiler import compile_project
    from blockflow.composite import composite_name
    from blockflow.run.runtime import run

    window = make_window(qtbot, tmp_path)
    assert window.import_onnx_model(MODEL) is True
    window.wait_for_import()
    doc = window.document
    report = window.last_import_report
    (ph,) = report.inputs.values()
    (mark,) = report.outputs.values()
    rng = np.random.default_rng(0)
    for diagram in doc.project.diagrams():      # the light model's weights are all 0.02
        for node in diagram.nodes.values():
            for key, value in list(node.attrs.items()):
                if isinstance(value, np.ndarray) and value.dtype.kind == "f":
                    node.attrs[key] = rng.uniform(0.01, 0.03, value.shape).astype(value.dtype)
    x = rng.random((1, 3, 224, 224), dtype=np.float32)

    def output():
        return run(compile_project(doc.project), {ph: x}, fetch=[mark], record=False).value(mark)
    before = output()
    page = doc.project.pages[0]
    inner = doc.ungroup("fire5", page.name)
    assert "fire5" not in page.nodes and inner
    conv = next(n for n in inner if (composite_name(page.nodes[n].block) or "").startswith("Conv"))
    doc.ungroup(conv, page.name)
    np.testing.assert_array_equal(before, output())
    doc.undo_stack.undo()
    doc.undo_stack.undo()
    assert composite_name(doc.project.pages[0].nodes["fire5"].block)
    np.testing.assert_array_equal(before, output())


def test_an_import_asked_twice_runs_once_and_a_refusal_keeps_edits(qtbot, tmp_path, no_modal):
    from onnx import TensorProto, helper

    window = make_window(qtbot, tmp_path)
    doc = window.document
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph([helper.make_node("Unique", ["x"], ["y"], name="u")], "g", [x], [y])
    path = tmp_path / "m.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString())
    project = doc.project
    assert window.import_onnx_model(str(path)) is True
    assert window.import_onnx_model(MODEL) is False
    doc.add_node("Relu", (40.0, 40.0))
    window.wait_for_import()
    assert len(no_modal) == 1 and "Unique" in no_modal[0][1]
    assert doc.project is project and any(n.block == "Relu" for n in project.pages[0].nodes.values())
    assert not window.import_running()


def test_training_an_imported_project_in_the_editor_keeps_each_instances_weights_and_reset(qtbot, tmp_path,
                                                                                        no_modal):
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    from blockflow.run.training import TrainConfig, Trainer, train_steps, training_program

    rng = np.random.default_rng(0)
    nodes, inits, inp = [], [], "x"
    for s in ("block1", "block2", "block3"):     # units with a nested node composite (Conv and its bias)
        nodes += [helper.make_node("Conv", [inp, f"{s}/w", f"{s}/c"], [f"{s}/h"], name=f"{s}/conv", pads=[1, 1, 1, 1]),
                  helper.make_node("Tanh", [f"{s}/h"], [f"{s}/out"], name=f"{s}/tanh")]
        inits += [numpy_helper.from_array(rng.standard_normal((2, 2, 3, 3)).astype(np.float32), f"{s}/w"),
                  numpy_helper.from_array(rng.standard_normal(2).astype(np.float32), f"{s}/c")]
        inp = f"{s}/out"
    nodes.append(helper.make_node("Identity", [inp], ["y"], name="final"))
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 2, 5, 5]) for n in ("x", "y")]
    graph = helper.make_graph(nodes, "g", vi[:1], vi[1:], initializer=inits)
    path = tmp_path / "m.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString())
    window = make_window(qtbot, tmp_path)
    assert window.import_onnx_model(str(path)) is True
    window.wait_for_import()
    doc = window.document
    (ph,) = window.last_import_report.inputs.values()
    x = rng.standard_normal((1, 2, 5, 5)).astype(np.float32)

    def first_values():
        program = doc.program(doc.project.pages[0].name)
        return {v: np.array(program.variable_values[v]) for v in sorted(program.trainable)}
    imported = first_values()
    assert len(imported) == 6
    trainer = Trainer(training_program(doc.project), TrainConfig(steps=3, optimizer="sgd"), feeds={ph: x})
    train_steps(trainer, 3)
    assert doc.apply_training(trainer.state_updates(), 3) == []
    trained = first_values()
    for v in imported:
        np.testing.assert_array_equal(trained[v], trainer.values[v])
        assert not np.array_equal(trained[v], imported[v])
    doc.reset_variables()
    again = first_values()
    for v in imported:
        np.testing.assert_array_equal(again[v], imported[v])


def test_a_project_opened_while_importing_is_not_replaced_unasked(qtbot, tmp_path, no_modal, monkeypatch):
    from blockflow.io.project_io import save_project
    from blockflow.project import Project

    window = make_window(qtbot, tmp_path)
    doc = window.document
    other = Project()
    other.add_page("mine")
    opened = tmp_path / "mine.bflow.json"
    save_project(other, opened)
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.Cancel)
    assert window.import_onnx_model(MODEL) is True
    assert window.open_file(str(opened)) is True      # the user goes on with another project
    assert doc.path == str(opened)
    window.wait_for_import()
    assert doc.path == str(opened) and [p.name for p in doc.project.pages] == ["mine"]
