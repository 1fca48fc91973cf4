"""The Train panel's Engine choice: the same training on PyTorch, the values written back to the
project, equal to blockflow's own; PyTorch offered disabled, with how to install it, when torch
is not there."""
from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import Qt

from blockflow.gui.document.document import Document

from test_trainpanel import make_panel
from test_training import moons_classifier

pytest.importorskip("torch")


def _choose(qtbot, combo, text):
    """Pick an entry as a user does: focus the box and type its first letters."""
    combo.setFocus()
    qtbot.keyClicks(combo, text)
    assert combo.currentText().startswith(text)


def _train(qtbot, panel, steps) -> str:
    """Train from the button; what the panel said when training started."""
    panel.steps.setValue(steps)
    panel.setting_widgets["lr"].setValue(0.05)
    said = []
    panel.training_started.connect(lambda: said.append(panel.info.text()))
    with qtbot.waitSignal(panel.training_finished, timeout=60000) as done:
        qtbot.mouseClick(panel.train_button, Qt.LeftButton)
    assert done.args == [False], panel.info.text()
    return said[0]


def test_training_on_pytorch_writes_back_what_blockflow_would_train(qtbot, qapp):
    results = {}
    for engine in ("blockflow", "PyTorch"):
        doc = Document(moons_classifier())
        panel = make_panel(qtbot, doc)
        _choose(qtbot, panel.engine, engine)
        said = _train(qtbot, panel, 25)
        assert ("on PyTorch (cpu)" in said) == (engine == "PyTorch"), said
        assert len(panel.losses) == 25 and panel.curve_points() == 25
        assert doc.undo_stack.undoText() == "Train 25 steps"
        results[engine] = (np.array(panel.losses), doc.page().nodes["W1"].state["value"])
    (l_np, w_np), (l_t, w_t) = results["blockflow"], results["PyTorch"]
    np.testing.assert_allclose(l_t, l_np, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(w_t, w_np, rtol=1e-4, atol=1e-6)


def test_pytorch_is_offered_disabled_when_torch_is_missing(qtbot, qapp, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))
    panel = make_panel(qtbot, Document(moons_classifier()))
    item = panel.engine.model().item(1)
    assert not item.isEnabled() and "pip install 'blockflow[torch]'" in item.toolTip()
    assert "not installed" in panel.engine.itemText(1)
