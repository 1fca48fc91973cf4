"""Out-of-range training settings in a project: reported with their place, never a crash.

A project recommends training settings per page (``metadata.training[page]``). Before, values out
of the Train panel's ranges went straight into its spin boxes (steps or seed >= 2**31: an
OverflowError while the editor window was built, so the editor did not open), an integer too
big for a float as the learning rate raised OverflowError in `blockflow train` (an internal
error), and everything ill-typed was dropped without a word.
"""
from __future__ import annotations

import json

import pytest
from hostile_kit import changed_paths, run_cli, snapshot
from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QMessageBox

from blockflow.gui.document.document import Document
from blockflow.gui.main_window import MainWindow
from blockflow.gui.panels.problems import SETTINGS_PLACE
from blockflow.project import Project
from blockflow.io.project_io import load_project, save_project
from blockflow.run.settings import recommended_settings

HOSTILE = {"optimizer": "sgd", "steps": 2 ** 31, "seed": 2 ** 31, "batch_size": 2 ** 40,
           "lr": 10 ** 400, "momentum": "fast", "use_nesterov": 3, "warmup": 5}
PLACES = {f"metadata.training.main.{k}" for k in ("steps", "seed", "batch_size", "lr", "momentum",
                                                   "use_nesterov", "warmup")}


def _project(training: dict | None) -> Project:
    project = Project(metadata={"title": "t"})
    page = project.add_page("main")
    page.add_node("Variable", id="w", attrs={"shape": [2], "initializer": "ones"})
    page.add_node("Square", id="sq", position=(200, 0))
    page.add_node("Sum", id="s", position=(400, 0))
    page.connect("w", "ref", "sq", "x")
    page.connect("sq", "y", "s", "input")
    page.loss = "s"
    if training is not None:
        project.metadata["training"] = {"main": training}
    return project


def _saved(tmp_path, training) -> str:
    path = tmp_path / "p.bflow.json"
    save_project(_project(training), path)
    return str(path)


def test_every_bad_setting_is_named_with_its_place_and_left_out():
    problems = []
    rec = recommended_settings(_project(HOSTILE), "main", problems)
    assert rec == {"optimizer": "sgd"}
    assert {p.place for p in problems} == PLACES
    text = {p.key: p.message for p in problems}
    assert text["steps"] == "2,147,483,648 is out of range: a whole number from 0 to 10,000,000"
    assert text["lr"] == "must be a number from 0 to 1e+06, found a 401-digit number"
    assert text["momentum"] == 'must be a number from 0 to 1e+06, found "fast"'
    assert text["warmup"].startswith("unknown setting (settings: optimizer, steps, batch_size, seed, lr")
    for bad in (float("nan"), float("inf"), -1, 2.5, "3", [1], None):
        problems = []
        assert "seed" not in recommended_settings(_project({"seed": bad}), "main", problems)
        assert [p.place for p in problems] == ([] if bad is None else ["metadata.training.main.seed"])
    problems = []
    recommended_settings(_project({"lr": float("nan"), "epsilon": -1e-9}), "main", problems)
    assert [(p.key, p.message.split(", found ")[1]) for p in problems] == [("lr", "NaN"), ("epsilon", "-1e-09")]
    # Names that are not identifiers are quoted, with their control characters escaped.
    project = _project(None)
    project.pages[0].name = "my\x1bpage"
    project.metadata["training"] = {"my\x1bpage": 7}
    problems = []
    assert recommended_settings(project, None, problems) == {}
    assert str(problems[0]) == 'metadata.training["my\\u001bpage"]: must be an object of settings, found 7'


def test_train_refuses_a_bad_setting_it_would_use(tmp_path):
    path = _saved(tmp_path, {"optimizer": "sgd", "steps": 2 ** 31, "lr": 10 ** 400})
    before = snapshot(tmp_path)
    r = run_cli("train", path, "--save", str(tmp_path / "out.bflow.json"))
    r.assert_clean_message()
    assert r.returncode == 2, r.output
    assert (f"blockflow: error: {path} at metadata.training.main.steps: 2,147,483,648 is out of range: "
            f"a whole number from 0 to 10,000,000; fix it in the project or give --steps") in r.stderr
    assert (f"{path} at metadata.training.main.lr: must be a number from 0 to 1e+06, found a 401-digit "
            f"number; fix it in the project or give --lr") in r.stderr
    assert changed_paths(before, snapshot(tmp_path)) == set()     # nothing trained, nothing saved


def test_train_warns_about_a_bad_setting_an_option_replaces(tmp_path):
    path = _saved(tmp_path, {"optimizer": "sgd", "steps": -5, "lr": 0.1, "beta1": "x", "junk": 1})
    r = run_cli("train", path, "--steps", "3", "--quiet")
    r.assert_clean_message()
    assert r.returncode == 0, r.output
    assert "trained page 'main' for 3 steps" in r.stdout
    warnings = [line for line in r.stderr.splitlines() if line.startswith("blockflow: warning:")]
    assert [w.split(" at ")[1].split(":")[0] for w in warnings] == [
        "metadata.training.main.steps", "metadata.training.main.beta1", "metadata.training.main.junk"]
    assert all(w.endswith("(not used)") for w in warnings)


def test_a_non_finite_setting_in_a_file_is_refused_by_the_loader_with_its_place(tmp_path):
    path = tmp_path / "nan.bflow.json"
    doc = json.loads(open(_saved(tmp_path, {"steps": 5})).read())
    text = json.dumps(doc).replace('"steps": 5', '"steps": NaN')
    path.write_text(text)
    r = run_cli("train", str(path))
    r.assert_clean_message()
    assert r.returncode == 3
    assert "at metadata.training.main.steps: NaN is not valid JSON" in r.stderr


@pytest.mark.parametrize("training", [HOSTILE, {"steps": float("nan"), "seed": -1, "batch_size": 1e300}])
def test_the_editor_opens_and_lists_the_bad_settings(qtbot, tmp_path, monkeypatch, training):
    monkeypatch.setattr(QMessageBox, "question", staticmethod(lambda *a, **k: QMessageBox.Discard))
    project = _project(training)
    if training is HOSTILE:                 # from a file, as a user would open it
        project = load_project(_saved(tmp_path, training))
    window = MainWindow(Document(project), QSettings(str(tmp_path / "s.ini"), QSettings.IniFormat))
    qtbot.addWidget(window)
    window.show()
    qtbot.waitUntil(lambda: window.problems.checking == 0)
    rows = [(node, message) for page, node, message in window.problems.page_rows() if page == "main"]
    assert rows and all(node == "" for node, _ in rows)
    places = {message.split(": ")[0] for _, message in rows}
    assert places == (PLACES if training is HOSTILE else
                      {"metadata.training.main.steps", "metadata.training.main.seed",
                       "metadata.training.main.batch_size"})
    items = [window.problems.tree.topLevelItem(i) for i in range(window.problems.tree.topLevelItemCount())]
    assert {item.text(1) for item in items if item.text(0) == "main"} == {SETTINGS_PLACE}
    assert window.problems.warnings == len(places) and window.problems.errors == 0
    panel = window.train_panel
    assert panel.steps.value() == 500 and panel.seed.value() == 0 and panel.batch.value() == -1
    assert panel.info.text().startswith(f"{len(places)} of the project's training settings for this page are "
                                        f"left out (see Problems); the panel's own values are used. "
                                        f"metadata.training.main.")
