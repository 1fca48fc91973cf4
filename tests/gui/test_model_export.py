"""File > Export Model > PyTorch Module: the current page through the menu, its refusal shown with
the blocks named, the definition of a composite refused, the file dialog's name used."""
from __future__ import annotations

import pytest

pytest.importorskip("torch")

from PySide6.QtWidgets import QFileDialog, QMessageBox  # noqa: E402

from blockflow.io.project_io import load_project  # noqa: E402

from composite_window import make_window  # noqa: E402
from export_kit import load_module  # noqa: E402
from test_export_torch_module import two_layers  # noqa: E402

SAMPLES = __import__("pathlib").Path(__file__).parents[2] / "sample_projects"


@pytest.fixture
def no_modal(monkeypatch):
    shown = []
    monkeypatch.setattr(QMessageBox, "exec", lambda self: shown.append((self.text(), self.detailedText())) or 0)
    return shown


def _menu_action(window, text):
    menu = window.export_model_menu
    return next(a for a in menu.actions() if a.text().replace("&", "") == text)


def test_the_menu_exports_the_current_page_where_the_dialog_says(qtbot, tmp_path, monkeypatch, no_modal):
    window = make_window(qtbot, tmp_path, two_layers(share=True))
    target = tmp_path / "out" / "mlp"
    target.parent.mkdir()
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(target), ""))
    _menu_action(window, "PyTorch Module…").trigger()
    assert not no_modal
    assert (tmp_path / "out" / "mlp.py").is_file() and (tmp_path / "out" / "mlp.pt").is_file()
    assert "mlp.py" in window.statusBar().currentMessage()
    module = load_module((tmp_path / "out" / "mlp.py").read_text(), tmp_path / "out", "mlp")
    model = module.Model()
    assert model.d1b is model.d1


def test_a_page_with_blocks_torch_cannot_run_is_refused_with_them_named(qtbot, tmp_path, no_modal, monkeypatch):
    from diagrams import chain

    from blockflow.export.torch_lowering import lowering_table
    monkeypatch.delitem(lowering_table(), "Bernoulli")    # a block with no lowering, for the test

    project = chain(("x", "Placeholder", {"shape": [3]}, None), ("odd", "Bernoulli", {}, {"probs": "x"}))
    project.pages[0].loss = None
    window = make_window(qtbot, tmp_path, project)
    assert window.export_model("torch", str(tmp_path / "m.py")) is None
    text, details = no_modal[-1]
    assert "Bernoulli" in text and "odd" in details
    assert not (tmp_path / "m.py").exists()


def test_a_definition_is_not_exported(qtbot, tmp_path, no_modal):
    window = make_window(qtbot, tmp_path, two_layers())
    from blockflow.gui.document.location import Location
    window.document.set_location(Location("@Lin", None, ""))
    assert window.export_model("torch", str(tmp_path / "m.py")) is None
    assert "definition" in no_modal[-1][0] and not (tmp_path / "m.py").exists()


def test_a_sample_exports_from_the_editor(qtbot, tmp_path, no_modal):
    window = make_window(qtbot, tmp_path, load_project(SAMPLES / "stable_softmax.bflow.json"))
    window.document.set_current_page("by_hand")
    written = window.export_model("torch", str(tmp_path / "softmax"))
    assert written and written[0].name == "softmax.py"


def test_the_menu_exports_an_onnx_model_that_onnx_checks(qtbot, tmp_path, monkeypatch, no_modal):
    onnx = pytest.importorskip("onnx")
    window = make_window(qtbot, tmp_path, two_layers())
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(tmp_path / "net"), ""))
    _menu_action(window, "ONNX Model…").trigger()
    assert not no_modal
    model = onnx.load(str(tmp_path / "net.onnx"))
    onnx.checker.check_model(model, full_check=True)
    assert "net.onnx" in window.statusBar().currentMessage()
