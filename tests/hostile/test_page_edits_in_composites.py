"""Page edits while a composite's diagram is shown: with a definition or an instance open, the
editor's current diagram is "@G", which Project.page also finds. Page > Rename Page (F2) renamed
the definition's diagram as a page (the undo then raised: no page named 'q'), Page > Delete Page
crashed the editor, and Ctrl+PgDown raised ValueError. Now the page commands act on the page whose
tab is current, and the document refuses a page edit of a composite's diagram."""
from __future__ import annotations

import pytest
from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QInputDialog, QMessageBox

from blockflow.errors import ProjectError


@pytest.fixture
def window(qtbot, tmp_path, monkeypatch):
    from blockflow.gui.main_window import MainWindow

    monkeypatch.setenv("BLOCKFLOW_RECOVERY_DIR", str(tmp_path / "rec"))
    w = MainWindow(settings=QSettings(str(tmp_path / "s.ini"), QSettings.IniFormat))
    qtbot.addWidget(w)
    w.maybe_save = lambda: True      # closed by the test's teardown without asking
    d = w.document
    x = d.add_node("Placeholder", (0, 0))
    t = d.add_node("Tanh", (200, 0))
    d.connect(x, "output", t, "x")
    d.add_page("p2")
    d.set_current_page("main")
    d.group([t], "G")
    return w


def open_g(d, how: str) -> None:
    if how == "definition":
        d.open_definition("G")
    else:
        d.open_instance(next(n for n, node in d.page().nodes.items() if node.block == "@G"))
    assert d.current_page == "@G"


@pytest.mark.parametrize("how", ["definition", "instance"])
def test_rename_page_with_a_composite_open_renames_the_tab_s_page_and_undoes(window, monkeypatch, how):
    d = window.document
    open_g(d, how)
    monkeypatch.setattr(QInputDialog, "getText", staticmethod(lambda *a, **k: ("q", True)))
    assert window.rename_page()
    assert [p.name for p in d.project.pages] == ["q", "p2"] and list(d.project.composites) == ["G"]
    d.undo_stack.undo()
    assert [p.name for p in d.project.pages] == ["main", "p2"]
    assert d.project.composite("G").page.name == "@G"


@pytest.mark.parametrize("how", ["definition", "instance"])
def test_delete_page_with_a_composite_open_deletes_the_tab_s_page_and_undoes(window, monkeypatch, how):
    d = window.document
    open_g(d, how)
    monkeypatch.setattr(QMessageBox, "question", staticmethod(lambda *a, **k: QMessageBox.Yes))
    assert window.delete_page()
    assert [p.name for p in d.project.pages] == ["p2"] and list(d.project.composites) == ["G"]
    d.undo_stack.undo()
    assert [p.name for p in d.project.pages] == ["main", "p2"]


def test_next_page_with_a_definition_open_goes_to_the_next_tab(window):
    d = window.document
    open_g(d, "definition")
    window._step_page(1)
    assert d.current_page == "p2"


@pytest.mark.parametrize("edit", [lambda d: d.rename_page("@G", "q"), lambda d: d.remove_page("@G"),
                                  lambda d: d.move_page("@G", 0)])
def test_the_document_refuses_a_page_edit_of_a_composite_s_diagram(window, edit):
    d = window.document
    steps = d.undo_stack.count()
    with pytest.raises(ProjectError, match="'@G' is a composite's diagram, not a page"):
        edit(d)
    assert d.undo_stack.count() == steps and d.project.composite("G").page.name == "@G"
