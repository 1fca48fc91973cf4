"""The window's docks come from one table (blockflow.gui.main_window.docks.PANELS): each entry
is a dock with its title, area and object name, listed in View > Panels, bound to the session's
selection when it says so; a new panel is one more entry."""
from __future__ import annotations

import pytest
from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QLabel, QMessageBox

from blockflow.gui.document.document import Document
from blockflow.gui.main_window import MainWindow, docks


@pytest.fixture(autouse=True)
def _no_dialogs(monkeypatch):
    """Closing an edited window discards its changes instead of asking."""
    monkeypatch.setattr(QMessageBox, "question", staticmethod(lambda *a, **k: QMessageBox.Discard))


def make_window(qtbot, tmp_path):
    window = MainWindow(Document(), QSettings(str(tmp_path / "settings.ini"), QSettings.IniFormat))
    qtbot.addWidget(window)
    return window


def test_every_table_entry_is_a_dock_in_its_area_and_in_the_panels_menu(qtbot, tmp_path):
    window = make_window(qtbot, tmp_path)
    panels_menu = next(a.menu() for a in window.view_menu.actions() if a.menu() and a.menu().title() == "&Panels")
    assert [a.text() for a in panels_menu.actions()] == [e.title for e in docks.PANELS]
    for entry in docks.PANELS:
        dock = window.docks[entry.key]
        assert dock.objectName() == entry.object_name and dock.windowTitle().startswith(entry.title)
        assert window.dockWidgetArea(dock) == entry.area
        assert window.actions["show_" + entry.key] is not None
        if entry.attribute:
            panel = getattr(window, entry.attribute)
            assert dock.widget() is panel or dock.widget().widget() is panel


def test_panels_that_follow_the_selection_get_the_sessions(qtbot, tmp_path):
    window = make_window(qtbot, tmp_path)
    node = window.document.add_node("Softmax", (0, 0))
    window.view.select_nodes([node])
    assert window.session.selection == [node]
    assert window.inspector.node_id == node and window.value_viewer.node_id == node
    window.document.rename_node(node, "soft")
    assert window.session.selection == ["soft"]
    assert window.inspector.node_id == "soft" and window.value_viewer.node_id == "soft"


def test_the_canvas_selects_again_from_the_session_after_a_rename_rebuilt_its_items(qtbot, tmp_path):
    window = make_window(qtbot, tmp_path)
    doc, view, session = window.document, window.view, window.session
    a, b = doc.add_node("Softmax", (0, 0)), doc.add_node("Tanh", (200, 0))
    view.select_nodes([a, b])
    seen = []
    session.selection_changed.connect(seen.append)
    doc.rename_node(a, "soft")                   # one of the selection: followed by the session only
    assert session.selection == ["soft", b] and sorted(view.selected_nodes()) == sorted(["soft", b])
    assert seen == [["soft", b]] and window.gradient_panel.node is None
    doc.rename_node("soft", "s2")
    doc.undo_stack.undo()
    assert session.selection == ["soft", b] and sorted(view.selected_nodes()) == sorted(["soft", b])
    view.select_nodes([b])
    c = doc.add_node("Sigmoid", (400, 0))
    doc.rename_node(c, "sig")                    # not selected: the selection stays on the new items
    assert session.selection == [b] and view.selected_nodes() == [b]
    assert window.gradient_panel.node == b and window.inspector.node_id == b
    doc.set_current_page(doc.add_page("other"))  # another page: nothing selected, on either side
    assert session.selection == [] and view.selected_nodes() == []


def test_a_new_panel_is_one_entry(qtbot, tmp_path, monkeypatch):
    seen = []

    class NotesDock(docks.DockPanel):
        key, title, object_name, attribute = "notes", "Notes", "notesDock", "notes_panel"
        follows_selection = True

        def create(self, window):
            label = QLabel("notes", window)
            label.set_nodes = seen.append
            return label

    monkeypatch.setattr(docks, "PANELS", docks.PANELS + (NotesDock(),))
    monkeypatch.setattr("blockflow.gui.main_window.actions.PANELS", docks.PANELS)
    window = make_window(qtbot, tmp_path)
    assert window.docks["notes"].objectName() == "notesDock" and window.notes_panel.text() == "notes"
    assert "show_notes" in window.actions
    node = window.document.add_node("Softmax", (0, 0))
    window.view.select_nodes([node])
    assert seen[-1] == [node]
