"""Hostile suite, the editor's save dialogs: the dialog confirms replacing the name the user typed
(``model``), but the file written has its format's suffix added (``model.py``), a name the dialog
never asked about. A file of the user's at that name is replaced only when they say so.

Before, File > Export Model, File > Export PNG/SVG and File > Save As replaced it without a word
(an export keeps no backup of what it replaces)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from PySide6.QtWidgets import QFileDialog, QMessageBox

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gui"))
from composite_window import make_window  # noqa: E402

from blockflow.io.project_io import load_project  # noqa: E402

SOFTMAX = Path(__file__).resolve().parents[2] / "sample_projects" / "stable_softmax.bflow.json"
USERS = b"the user's own file\n"


def _export_model(window):
    pytest.importorskip("torch")
    return window.export_model("torch")


def _export_png(window):
    return window.export("png")


def _save_as(window):
    return window.save_as()


ACTIONS = [("model.py", _export_model), ("picture.png", _export_png), ("work.bflow.json", _save_as)]


@pytest.mark.parametrize("name, action", ACTIONS, ids=[a[0] for a in ACTIONS])
@pytest.mark.parametrize("answer", ["no", "yes"])
def test_a_file_the_added_suffix_names_is_replaced_only_when_the_user_says_so(qtbot, tmp_path, monkeypatch,
                                                                             name, action, answer):
    window = make_window(qtbot, tmp_path, load_project(SOFTMAX))
    target = tmp_path / name
    target.write_bytes(USERS)
    typed = str(tmp_path / name.split(".")[0])            # 'model': the name the dialog confirmed
    monkeypatch.setattr(QFileDialog, "getSaveFileName", staticmethod(lambda *a, **k: (typed, "")))
    asked = []
    reply = QMessageBox.Yes if answer == "yes" else QMessageBox.No
    monkeypatch.setattr(QMessageBox, "question", staticmethod(lambda *a, **k: asked.append(a[2]) or reply))
    monkeypatch.setattr(QMessageBox, "exec", lambda self: 0)
    done = action(window)
    assert asked and name in asked[0] and "replace" in asked[0]
    if answer == "no":
        assert not done and target.read_bytes() == USERS
    else:
        assert done and target.read_bytes() != USERS


@pytest.mark.parametrize("name, action", ACTIONS, ids=[a[0] for a in ACTIONS])
def test_a_free_name_is_written_without_a_question(qtbot, tmp_path, monkeypatch, name, action):
    window = make_window(qtbot, tmp_path, load_project(SOFTMAX))
    typed = str(tmp_path / name.split(".")[0])
    monkeypatch.setattr(QFileDialog, "getSaveFileName", staticmethod(lambda *a, **k: (typed, "")))
    monkeypatch.setattr(QMessageBox, "question", staticmethod(lambda *a, **k: pytest.fail("asked")))
    assert action(window)
    assert (tmp_path / name).exists()
