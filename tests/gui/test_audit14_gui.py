"""Editor defects found by the issue-14 audit, each test named after its defect."""
from __future__ import annotations

from PySide6.QtWidgets import QApplication

from composite_kit import mlp_project
from test_composite_editor import double_click, make_window


def wait_shown(qtbot, window):
    qtbot.waitUntil(lambda: not window.document.compiling() and not window.view.diagram_scene().program_due(),
                    timeout=3000)
    QApplication.processEvents()


def test_defect_an_opened_instance_showed_errors_of_its_definition_compiled_alone(qtbot, tmp_path):
    # Dense's W is [features, units]: compiled alone, 'features' is open and W is an error. An
    # instance opened from a page that compiles showed that error (red outline) on W; the
    # instance's own problems, from the page's program, are what it must show.
    project = mlp_project()
    project.page("main").nodes["d2"].attrs["units"] = 10 ** 10   # a problem of d2 only (W too big)
    window = make_window(qtbot, tmp_path, project)
    view = window.view
    double_click(qtbot, view, "d1")
    wait_shown(qtbot, window)
    assert window.document.location.level == "d1"
    assert view.node_item("W").data.errors == ()
    assert view.node_item("MatMul_1").data.errors == ()
    window.document.go_up()
    double_click(qtbot, view, "d2")
    wait_shown(qtbot, window)
    assert window.document.location.level == "d2"
    assert any("the limit for one tensor" in e for e in view.node_item("W").data.errors), view.node_item("W").data.errors


def test_defect_a_project_of_many_composites_took_minutes_to_open(qtbot, tmp_path, monkeypatch):
    # The palette counted each composite's instances with a pass over every diagram: 10,000
    # composites (the file limit) made 10,000 passes over 10,000 diagrams, 135 s before the
    # window showed. The counts now take one pass: scans of the diagrams must not grow with
    # the number of composites.
    from blockflow.project import Project
    from composite_kit import dense
    project = mlp_project()
    for i in range(300):
        project.composites[f"D{i}"] = dense(f"D{i}")
    scans = []
    real = Project.diagrams
    monkeypatch.setattr(Project, "diagrams", lambda self: scans.append(1) or real(self))
    window = make_window(qtbot, tmp_path, project)
    window.sync_composites()
    assert len(scans) < 20, len(scans)
    rows = window.palette_panel._rows
    assert "used 2 times" in rows["@Dense"].toolTip(0) and "used 0 times" in rows["@D7"].toolTip(0)
