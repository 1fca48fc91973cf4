"""Help > Keyboard Shortcuts (issue 16): every shortcut of the menus, read from the window's
actions, and every key of the canvas, read from the one table (canvas/keymap.py) the canvas's
key handling uses too."""
from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from blockflow.gui.canvas import keymap
from blockflow.gui.canvas.keymap import CANVAS_GESTURES, CANVAS_KEYS, canvas_rows

from test_canvas import doc, make_view, view  # noqa: F401  (the canvas tests' fixtures)
from test_main_window import make_window, settings_path  # noqa: F401


def open_shortcuts(qtbot, window):
    help_menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&Help")
    entry = next(a for a in help_menu.actions() if a is window.actions["shortcuts"])
    entry.trigger()
    dialog = window.shortcuts_dialog
    qtbot.waitExposed(dialog)
    return dialog


def test_the_list_has_every_menu_shortcut_and_every_canvas_key(qtbot, settings_path):
    window = make_window(qtbot, settings_path)
    dialog = open_shortcuts(qtbot, window)
    rows = dialog.rows()
    keys_listed = {keys for _, keys, _ in rows}
    for name, act in window.actions.items():
        for seq in act.shortcuts():
            if not seq.isEmpty():
                text = seq.toString(QKeySequence.NativeText)
                assert any(text in keys.split(", ") for keys in keys_listed), (name, text)
    assert any(what == "Keyboard Shortcuts" for _, _, what in rows)
    canvas = [(keys, what) for group, keys, what in rows if group.startswith("Canvas")]
    assert canvas == canvas_rows() and len(canvas) == len(CANVAS_KEYS) + len(CANVAS_GESTURES)
    assert ("Tab", CANVAS_GESTURES[0][1]) in canvas
    assert ("Space (hold) + drag", CANVAS_KEYS[0].does) in canvas
    for needed in ("F1", "]", "[", "Left", "Shift+Right", "P", "Return, Enter", "Esc", "Del, Backspace"):
        assert any(keys == needed for keys, _ in canvas), needed
    # a filter narrows the list
    qtbot.keyClicks(dialog.filter, "wire order")
    assert {what for _, _, what in dialog.rows()} == {e.does for e in CANVAS_KEYS if "wire order" in e.does}
    dialog.filter.clear()
    assert len(dialog.rows()) == len(rows)
    assert window.show_shortcuts() is dialog          # one list, raised again


def test_an_action_added_to_the_table_is_listed(qtbot, settings_path, monkeypatch):
    """The list is read from the table: a new action (or canvas key) shows without touching it."""
    window = make_window(qtbot, settings_path)
    window._action("tidy_selection", "&Tidy Selection", lambda: None, "Shift+F")   # a name no action has
    monkeypatch.setattr(keymap, "CANVAS_KEYS", CANVAS_KEYS + (keymap.CanvasKey("zoom_in", ("Z",), "a new key"),))
    dialog = open_shortcuts(qtbot, window)
    assert ("Other", "Shift+F", "Tidy Selection") in dialog.rows()
    assert ("Canvas (the diagram has the focus)", "Z", "a new key") in dialog.rows()


SIMPLE = [e for e in CANVAS_KEYS if e.action != "hold_space"]


def _press(view, key) -> None:
    seq = QKeySequence.keyBindings(key)[0] if isinstance(key, QKeySequence.StandardKey) else QKeySequence(key)
    combo = seq[0]
    QTest.keyClick(view.viewport(), combo.key(), combo.keyboardModifiers())


@pytest.mark.parametrize("entry", SIMPLE, ids=[e.action for e in SIMPLE])
def test_every_key_of_the_table_calls_what_the_table_says(qtbot, view, monkeypatch, entry):
    called = []
    owner, _, name = entry.action.rpartition(".")
    target = view.keyboard if owner == "keyboard" else view
    monkeypatch.setattr(target, name, lambda: called.append(entry.action))
    view.setFocus()
    for key in entry.keys:
        _press(view, key)
    assert called == [entry.action] * len(entry.keys)


def test_space_is_held_to_pan_and_tab_is_not_a_canvas_key(qtbot, view):
    view.setFocus()
    QTest.keyPress(view.viewport(), Qt.Key_Space)
    assert view.space_held()
    QTest.keyRelease(view.viewport(), Qt.Key_Space)
    assert not view.space_held()
    from PySide6.QtGui import QKeyEvent
    from PySide6.QtCore import QEvent

    tab = QKeyEvent(QEvent.KeyPress, Qt.Key_Tab, Qt.NoModifier)
    assert keymap.key_for(tab) is None          # Tab opens the add-block search, elsewhere
    QApplication.processEvents()


def test_ctrl_d_duplicates_even_where_the_platform_calls_it_delete(qtbot, view, doc):
    """KDE and GNOME bind the standard Delete key to Ctrl+D too: the canvas's Delete is Del and
    Backspace, so Ctrl+D stays Duplicate."""
    doc.add_node("Tanh", (0, 0), node_id="t")
    QApplication.processEvents()
    view.select_nodes(["t"])
    view.setFocus()
    QTest.keyClick(view.viewport(), Qt.Key_D, Qt.ControlModifier)
    assert len(doc.page().nodes) == 2


def test_the_editor_page_lists_every_canvas_key():
    """docs/editor.md's Keyboard table has a row for each entry of the key table."""
    from test_main_window import ROOT

    text = (ROOT / "docs" / "editor.md").read_text(encoding="utf-8")
    table = text[text.index("## Keyboard"):text.index("## Big diagrams")]
    names = {"hold_space": "Space (hold)", "zoom_in": "zoom in", "zoom_out": "zoom out",
             "delete_selection": "Del, Backspace", "escape": "Esc", "copy_selection": "Ctrl+C",
             "cut_selection": "Ctrl+X", "paste": "Ctrl+V", "select_all": "Ctrl+A",
             "duplicate_selection": "Ctrl+D", "help_at_cursor": "F1"}
    for entry in CANVAS_KEYS:
        shown = names.get(entry.action) or next(k for k in entry.keys if isinstance(k, str))
        assert shown.strip("`") in table, entry.action


def test_the_editor_page_lists_every_canvas_gesture():
    """docs/editor.md's Keyboard section has a row for each gesture the shortcut list shows."""
    from test_main_window import ROOT

    text = (ROOT / "docs" / "editor.md").read_text(encoding="utf-8")
    section = text[text.index("## Keyboard"):text.index("## Big diagrams")]
    for gesture, does in CANVAS_GESTURES:
        assert f"| {gesture} | {does} |" in section, gesture


def test_the_list_closes_with_its_window(qtbot, settings_path):
    window = make_window(qtbot, settings_path)
    dialog = open_shortcuts(qtbot, window)
    assert dialog.isVisible()
    window.close()
    assert not dialog.isVisible()        # no orphan list left over the desktop (or a later test)
