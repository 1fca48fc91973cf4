"""The session on its own (no window): runs off the UI thread, the results and the selection it
holds, and renames of pages and blocks followed in that one place."""
from __future__ import annotations

from pathlib import Path

import pytest

from blockflow.gui.document.document import Document
from blockflow.gui.session.session import Session, page_fingerprint
from blockflow.io.project_io import load_project

SAMPLE = Path(__file__).resolve().parents[2] / "sample_projects" / "stable_softmax.bflow.json"


@pytest.fixture
def session(qapp):
    doc = Document(load_project(SAMPLE))
    s = Session(doc)
    yield s
    s.wait()


def run_backward(qtbot, session):
    with qtbot.waitSignal(session.run_finished, timeout=5000) as blocker:
        session.backward()
    return blocker.args[0]


def test_a_backward_run_is_held_for_its_page_and_targets_the_loss(qtbot, session):
    assert session.target == "Sum_1:output"
    assert "Sum_1:output" in [key for key, _ in session.targets()]
    result = run_backward(qtbot, session)
    pr = session.results()
    assert pr.result is result and session.last_result is result and not session.results_stale
    assert pr.kind == "backward" and pr.value("Softmax_1", "softmax") is not None
    assert pr.grad("Softmax_1", "softmax") is not None


def test_results_and_selection_follow_a_block_renamed(qtbot, session):
    doc = session.doc
    run_backward(qtbot, session)
    session.set_selection(["Softmax_1"])
    selections, changes = [], []
    session.selection_changed.connect(selections.append)
    session.results_changed.connect(lambda: changes.append(1))
    doc.rename_node("Softmax_1", "soft")
    assert session.selection == ["soft"] and selections == [["soft"]] and changes
    pr = session.results()
    assert pr.run_id("soft") == "Softmax_1" and pr.value("soft", "softmax") is not None


def test_the_picked_target_follows_its_block_renamed(qtbot, session):
    session.set_target("Sum_1:output")
    session.doc.rename_node("Sum_1", "total")
    qtbot.waitUntil(lambda: "total:output" in [key for key, _ in session.targets()])
    assert session.target == "total:output"


def test_results_follow_a_page_renamed_and_drop_a_removed_block_from_the_selection(qtbot, session):
    doc = session.doc
    run_backward(qtbot, session)
    old = doc.current_page
    doc.rename_page(old, "renamed")
    assert session.results("renamed") is not None and session.results(old) is None
    session.set_selection(["Softmax_1", "Sum_1"])
    doc.remove_nodes(["Softmax_1"])
    assert session.selection == ["Sum_1"]


def test_an_edit_marks_results_stale_and_its_undo_makes_them_current_again(qtbot, session):
    doc = session.doc
    run_backward(qtbot, session)
    stale = []
    session.stale_changed.connect(lambda: stale.append(session.results_stale))
    doc.set_loss(None)
    assert session.results_stale and stale == [True]
    doc.undo_stack.undo()
    qtbot.waitUntil(lambda: not session.results_stale)
    assert stale == [True, False]
    assert page_fingerprint(doc.page()) == session.results().fingerprint


def test_another_page_or_project_clears_the_selection(qtbot, session):
    doc = session.doc
    session.set_selection(["Sum_1"])
    other = next(p.name for p in doc.project.pages if p.name != doc.current_page)
    doc.set_current_page(other)
    assert session.selection == []
    session.set_selection(["x"])
    doc.new()
    assert session.selection == [] and session.results() is None
