"""The canvas from the keyboard alone (issue 16): select the next or previous block in wire
order, move the selection with the arrows (one undo step a burst), focus a port, draw a wire from
it and choose its target with the keys; the focus is drawn."""
from __future__ import annotations

from PySide6.QtCore import QPointF, QRect, Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from blockflow.gui.canvas import keyboard
from blockflow.gui.canvas.interactions import WireDrag
from blockflow.gui.canvas.keyboard import JUMP, wire_order
from blockflow.gui.canvas.scene import GRID
from blockflow.project import Edge

from test_canvas import doc, make_view, view  # noqa: F401  (the canvas tests' fixtures)
from test_main_window import dialogs, make_window, settings_path  # noqa: F401


def key(view, k, mods=Qt.NoModifier) -> None:
    QTest.keyClick(view.viewport(), k, mods)


def chain(doc):
    """x -> t -> e, and a free block f drawn above them (first in reading order)."""
    doc.add_node("Placeholder", (0, 200), node_id="x", attrs={"shape": [3]})
    doc.add_node("Tanh", (300, 200), node_id="t")
    doc.add_node("Exp", (600, 200), node_id="e")
    doc.add_node("Sigmoid", (300, 0), node_id="f")
    doc.connect("x", "output", "t", "x")
    doc.connect("t", "y", "e", "x")


def test_brackets_select_the_next_and_previous_block_in_wire_order(qtbot, view, doc):
    chain(doc)
    QApplication.processEvents()
    assert wire_order(doc.page()) == ["f", "x", "t", "e"]
    view.setFocus()
    key(view, Qt.Key_BracketRight)
    assert view.selected_nodes() == ["f"]
    for expected in ("x", "t", "e", "f"):                 # and round again
        key(view, Qt.Key_BracketRight)
        assert view.selected_nodes() == [expected]
    key(view, Qt.Key_BracketLeft)
    assert view.selected_nodes() == ["e"]
    view.select_nodes([])
    key(view, Qt.Key_BracketLeft)
    assert view.selected_nodes() == ["e"]                  # from nothing: the last


def test_a_burst_of_arrows_moves_the_selection_in_one_undo_step(qtbot, view, doc):
    chain(doc)
    QApplication.processEvents()
    stack = doc.undo_stack
    before = {n: tuple(v.position) for n, v in doc.page().nodes.items()}
    view.select_nodes(["t", "e"])
    view.setFocus()
    count = stack.count()
    for _ in range(3):
        key(view, Qt.Key_Right)
    key(view, Qt.Key_Down, Qt.ShiftModifier)
    assert tuple(doc.page().nodes["t"].position) == (300 + 3 * GRID, 200 + JUMP * GRID)
    assert tuple(doc.page().nodes["e"].position) == (600 + 3 * GRID, 200 + JUMP * GRID)
    assert view.node_item("t").pos() == QPointF(300 + 3 * GRID, 200 + JUMP * GRID)
    assert stack.count() == count + 1 and view.selected_nodes() == ["t", "e"]
    key(view, Qt.Key_BracketRight)                         # another key ends the burst
    key(view, Qt.Key_Left)
    assert stack.count() == count + 2
    stack.undo()
    stack.undo()
    assert {n: tuple(v.position) for n, v in doc.page().nodes.items()} == before


def test_a_pause_ends_a_burst(qtbot, view, doc, monkeypatch):
    chain(doc)
    QApplication.processEvents()
    monkeypatch.setattr(keyboard, "BURST_MS", 30)
    view.select_nodes(["x"])
    view.setFocus()
    count = doc.undo_stack.count()
    key(view, Qt.Key_Up)
    qtbot.wait(80)
    key(view, Qt.Key_Up)
    assert doc.undo_stack.count() == count + 2


def test_arrows_with_nothing_selected_say_what_to_do(qtbot, view, doc):
    chain(doc)
    said = []
    view.status_message.connect(said.append)
    view.setFocus()
    count = doc.undo_stack.count()
    key(view, Qt.Key_Left)
    assert doc.undo_stack.count() == count and said and "select" in said[-1]


def test_a_wire_from_the_keyboard_focused_port_enter_and_the_target_chosen(qtbot, view, doc):
    doc.add_node("Placeholder", (0, 0), node_id="x", attrs={"shape": [3]})
    doc.add_node("Tanh", (300, 0), node_id="t")
    doc.add_node("Exp", (300, 200), node_id="e")
    QApplication.processEvents()
    view.setFocus()
    view.select_nodes(["x"])
    key(view, Qt.Key_P)
    assert view.keyboard.focused_port() == ("x", "output")
    key(view, Qt.Key_Return)
    assert isinstance(view.interaction(), WireDrag) and view.keyboard.wiring()
    targets = view.keyboard.targets
    assert set(targets) == {("t", "x"), ("e", "x")} and targets[0] == ("t", "x")    # nearest first
    key(view, Qt.Key_Right)
    assert view.keyboard.target_port() == ("e", "x")
    key(view, Qt.Key_Return)
    assert doc.page().edges == [Edge("x", "output", "e", "x")]
    assert view.interaction() is None and not view.keyboard.wiring()
    doc.undo_stack.undo()
    assert doc.page().edges == []
    # Escape cancels a wire being drawn; a second Escape drops the port focus, a third the selection
    key(view, Qt.Key_Return)
    assert view.keyboard.wiring()
    key(view, Qt.Key_Escape)
    assert view.interaction() is None and doc.page().edges == []
    assert view.keyboard.focused_port() == ("x", "output")
    key(view, Qt.Key_Escape)
    assert view.keyboard.focused_port() is None and view.selected_nodes() == ["x"]
    key(view, Qt.Key_Escape)
    assert view.selected_nodes() == []


def test_a_wire_from_an_input_goes_back_to_an_output(qtbot, view, doc):
    doc.add_node("Placeholder", (0, 0), node_id="x", attrs={"shape": [3]})
    doc.add_node("Tanh", (300, 0), node_id="t")
    QApplication.processEvents()
    view.setFocus()
    view.select_nodes(["t"])
    key(view, Qt.Key_P)                                       # inputs first, in reading order
    assert view.keyboard.focused_port() == ("t", "x")
    key(view, Qt.Key_P, Qt.ShiftModifier)
    key(view, Qt.Key_P)
    assert view.keyboard.focused_port() == ("t", "x")
    key(view, Qt.Key_Enter)
    assert view.keyboard.target_port() == ("x", "output")
    key(view, Qt.Key_Enter)
    assert doc.page().edges == [Edge("x", "output", "t", "x")]


def test_the_focused_port_and_the_target_are_drawn(qtbot, view, doc, tmp_path):
    doc.add_node("Placeholder", (0, 0), node_id="x", attrs={"shape": [3]})
    doc.add_node("Tanh", (300, 0), node_id="t")
    QApplication.processEvents()
    view.setFocus()
    view.select_nodes(["x"])
    QApplication.processEvents()

    def around(node, port):
        c = view.mapFromScene(view.node_item(node).port_scene_pos(port))
        return view.viewport().grab(QRect(c.x() - 16, c.y() - 16, 32, 32)).toImage()

    plain = around("x", "output")
    key(view, Qt.Key_P)
    QApplication.processEvents()
    assert around("x", "output") != plain
    target_plain = around("t", "x")
    key(view, Qt.Key_Return)
    QApplication.processEvents()
    assert around("t", "x") != target_plain
    assert view.viewport().grab().save(str(tmp_path / "keyboard_wire.png"))    # to look at


def test_nothing_to_wire_to_is_said_and_escape_still_cancels(qtbot, view, doc):
    doc.add_node("Placeholder", (0, 0), node_id="x", attrs={"shape": [3]})
    QApplication.processEvents()
    said = []
    view.status_message.connect(said.append)
    view.setFocus()
    view.select_nodes(["x"])
    key(view, Qt.Key_P)
    key(view, Qt.Key_Return)
    assert "nothing on this page" in said[-1]
    key(view, Qt.Key_Return)                          # Enter with no target: the wire ends
    assert view.interaction() is None and doc.page().edges == []


def test_the_keys_work_in_the_editor_window_too(qtbot, settings_path, dialogs):
    """In the window, menu shortcuts sit above the canvas: none of them takes these keys."""
    from blockflow.gui.document.document import Document

    doc = Document()
    window = make_window(qtbot, settings_path, doc, size=(1200, 700))
    doc.add_node("Placeholder", (0, 0), node_id="x", attrs={"shape": [3]})
    doc.add_node("Tanh", (300, 0), node_id="t")
    QApplication.processEvents()
    view = window.view
    window.activateWindow()
    view.setFocus()
    key(view, Qt.Key_BracketRight)
    assert view.selected_nodes() == ["x"] and window.session.selection == ["x"]
    key(view, Qt.Key_Down)
    key(view, Qt.Key_Down)
    assert tuple(doc.page().nodes["x"].position) == (0, 2 * GRID)
    key(view, Qt.Key_P)
    key(view, Qt.Key_Return)
    key(view, Qt.Key_Return)
    assert doc.page().edges == [Edge("x", "output", "t", "x")]
    window.actions["undo"].trigger()
    window.actions["undo"].trigger()
    assert doc.page().edges == [] and tuple(doc.page().nodes["x"].position) == (0, 0)
