"""The session on its own (no window): runs off the UI thread, the results, the selection and the
gradient view it holds, and renames of pages and blocks followed in that one place."""
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


# ------------------------------------------------------------------------------- the gradient view
def test_a_backward_run_is_the_gradient_view_until_a_forward_run_an_edit_or_a_clear(qtbot, session):
    doc = session.doc
    changes, messages = [], []
    session.gradients_changed.connect(lambda: changes.append(session.gradients))
    session.status_message.connect(messages.append)
    result = run_backward(qtbot, session)
    gview = session.gradients
    assert gview is not None and gview.ran and gview.result is result and gview.target == ("Sum_1", "output")
    assert changes == [gview]
    with qtbot.waitSignal(session.run_finished, timeout=5000):
        session.forward()
    assert session.gradients is None and changes == [gview, None]
    result = run_backward(qtbot, session)
    shown = session.gradients
    # moving blocks keeps them; an edit of what the page computes takes them away, and says so
    doc.move_nodes({"Max_1": ((200.0, 40.0), (220.0, 20.0))})
    assert session.gradients is shown
    doc.set_loss(None)
    assert session.gradients is None and "Gradient highlighting cleared" in messages[-1]
    doc.undo_stack.undo()             # the run is current again: its gradients come back
    qtbot.waitUntil(lambda: session.gradients is not None)
    assert session.gradients.result is result
    session.clear()
    assert session.gradients is None


def test_the_gradient_view_is_of_the_current_page_and_static_paths_follow_edits(qtbot, session):
    from blockflow.present.gradview import GradientView

    doc = session.doc
    run_backward(qtbot, session)
    first = doc.current_page
    other = next(p.name for p in doc.project.pages if p.name != first)
    doc.set_current_page(other)
    assert session.gradients is None
    doc.set_current_page(first)               # its run is still current: shown again
    assert session.gradients is not None and session.gradients.program.page_name == first
    session.clear()
    paths = GradientView(doc.program(), "Sum_1")
    session.show_gradients(paths)
    assert session.gradients is paths and not paths.ran
    doc.rename_node("Softmax_1", "sm")        # recomputed on the page as it is now
    qtbot.waitUntil(lambda: session.gradients is not paths and session.gradients is not None, timeout=2000)
    assert not session.gradients.ran and session.gradients.program.step("sm") is not None
    with qtbot.waitSignal(session.status_message, timeout=2000) as message:
        doc.remove_nodes(["Sum_1"])           # the target is gone: the paths go, and it is said why
    assert session.gradients is None and "Gradient paths hidden: Sum_1" in message.args[0]
    session.show_gradients(GradientView(doc.program(), "Max_1"))
    doc.new()
    assert session.gradients is None


def test_a_run_job_that_dies_of_a_base_exception_ends_as_a_failed_run(qtbot, session, monkeypatch):
    """The worker hands the exception itself to the session; the page is not left busy."""
    from blockflow.gui.session import runner

    def die(*args, **kwargs):
        raise SystemExit("worker killed")

    monkeypatch.setattr(runner, "run_job", die)
    busy = []
    session.busy_changed.connect(busy.append)
    with qtbot.waitSignal(session.run_failed, timeout=5000) as blocker:
        session.backward()
    assert busy == [True, False]
    assert "worker killed" in blocker.args[0]
    assert session.results().error is not None
