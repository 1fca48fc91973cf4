"""The editor stays responsive while a diagram with a large Variable is edited.

Before: every edit, a label included, dropped the page's program, and the next view to look
recompiled it on the UI thread, drawing the Variable's random first value again (0.5 s here for
a [4000, 4000] RandomNormal Variable, 1.7-3.4 s on slower machines). Now a label, a move or a
note recompiles nothing, an edit that changes what the page computes recompiles that page off
the UI thread, and the wire checks compile only what feeds the block being wired.

The UI thread's work is counted (the compiles and Variables' first values drawn there, the
diagnostics read, the blocks rebuilt), not timed: a loaded machine slows everything alike.
"""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from PySide6.QtCore import QSettings, Qt
from PySide6.QtWidgets import QApplication, QMessageBox

from blockflow.gui.document import compiling
from blockflow.gui.document import wiring
from blockflow.gui.document.document import Document
from blockflow import variables
from blockflow.gui.main_window import MainWindow
from blockflow.project import Project
from blockflow.io.project_io import load_project, save_project

N = 4000


def _big_project(path) -> None:
    project = Project(metadata={"title": "big"})
    page = project.add_page("main")
    page.add_node("Variable", id="w", position=(0, 0),
                  attrs={"shape": [N, N], "initializer": "random_normal", "seed": 3})
    page.add_node("Placeholder", id="x", position=(0, 160), attrs={"shape": [N, 1]})
    page.add_node("MatMul", id="mm", position=(220, 0))
    page.add_node("Sum", id="s", position=(440, 0))
    page.connect("w", "ref", "mm", "a")
    page.connect("x", "output", "mm", "b")
    page.connect("mm", "product", "s", "input")
    page.loss = "s"
    other = project.add_page("other")
    other.add_node("Placeholder", id="p", attrs={"shape": [2]})
    other.add_node("Sum", id="t", position=(220, 0))
    other.connect("p", "output", "t", "input")
    save_project(project, path)


def _on_ui_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


class Compiles:
    """Counts the compiles the editor makes (on any thread), and the pages they compile; and the
    work that kept the UI thread busy before: compiles and Variables' first values drawn there."""

    def __init__(self, monkeypatch):
        self.pages: list[str] = []
        self.sizes: list[int] = []
        self.on_ui: list[str] = []      # what the UI thread did: "compile main", "draw w"
        for module in (compiling, wiring):
            real = module.compile_page

            def counting(page, *args, real=real, **kw):
                self.pages.append(page.name)
                self.sizes.append(len(page.nodes))
                if _on_ui_thread():
                    self.on_ui.append(f"compile {page.name}")
                return real(page, *args, **kw)

            monkeypatch.setattr(module, "compile_page", counting)
        real_draw = variables._Pending.draw

        def drawing(pending, **overrides):
            if _on_ui_thread():
                self.on_ui.append(f"draw {pending.name}")
            return real_draw(pending, **overrides)

        monkeypatch.setattr(variables._Pending, "draw", drawing)


def pump_until(condition, timeout: float = 20.0) -> None:
    """Events handled until ``condition()``; the timeout is a backstop for a hang."""
    end = time.perf_counter() + timeout
    while not condition():
        assert time.perf_counter() < end, "timed out"
        QApplication.processEvents()
        time.sleep(0.002)


@pytest.fixture
def window(qtbot, tmp_path, monkeypatch):
    # Closing an edited project asks whether to save it: the answer is "discard".
    monkeypatch.setattr(QMessageBox, "question", staticmethod(lambda *a, **k: QMessageBox.Discard))
    path = tmp_path / "big.bflow.json"
    _big_project(path)
    compiles = Compiles(monkeypatch)
    win = MainWindow(Document(load_project(path), str(path)),
                     QSettings(str(tmp_path / "s.ini"), QSettings.IniFormat))
    qtbot.addWidget(win)
    win.resize(1400, 880)
    win.show()
    qtbot.waitExposed(win)
    doc = win.document
    pump_until(lambda: doc.compiling() == 0 and doc.ready_program("main") is not None
                         and doc.ready_program("other") is not None)
    win.compiles = compiles
    yield win
    # The window outlives the test (Qt owns it): let go of the big Variable's values now.
    doc.new()
    QApplication.processEvents()


def _select(qtbot, win, node: str) -> None:
    view = win.view
    view.select_nodes([node])
    qtbot.waitUntil(lambda: win.inspector.node_id == node and not win.inspector._refresh.pending())


def _type_into(qtbot, edit, text: str) -> None:
    """Real key events into a field, and the Return that commits the edit."""
    edit.setFocus()
    edit.selectAll()
    qtbot.keyClicks(edit, text)
    qtbot.keyClick(edit, Qt.Key_Return)


def test_a_label_edit_recompiles_nothing_and_keeps_the_ui_free(qtbot, window):
    doc, compiles = window.document, window.compiles
    program = doc.ready_program("main")
    _select(qtbot, window, "s")
    before, ui_before = len(compiles.pages), len(compiles.on_ui)
    _type_into(qtbot, window.inspector.field("label"), "total")
    pump_until(lambda: window.view.node_item("s").data.subtitle == "total")
    end = time.perf_counter() + 0.3        # whatever the edit set off has time to run
    pump_until(lambda: time.perf_counter() > end)
    assert doc.page().nodes["s"].label == "total"
    assert compiles.pages[before:] == []
    assert doc.ready_program("main") is program
    # The UI's time is what it does, counted (not timed: a loaded machine slows it all).
    assert compiles.on_ui[ui_before:] == []


def test_semantic_edits_recompile_their_page_off_the_ui_thread(qtbot, window):
    doc, compiles = window.document, window.compiles
    other = doc.ready_program("other")
    _select(qtbot, window, "x")
    before, ui_before = len(compiles.pages), len(compiles.on_ui)
    # A shape MatMul cannot take: the problems panel shows MatMul's error once the page compiled.
    _type_into(qtbot, window.inspector.field("attr:shape"), "[3, 1]")
    pump_until(lambda: any(node == "mm" for node, _ in window.problems.rows()))
    assert compiles.pages[before:] == ["main"]        # that page only, once
    assert doc.ready_program("other") is other
    # ... and fixed again: no problem left.
    _type_into(qtbot, window.inspector.field("attr:shape"), f"[{N}, 1]")
    pump_until(lambda: doc.ready_program("main") is not None and window.problems.errors == 0
               and window.problems.checking == 0)
    assert window.problems.rows() == []
    assert window.inspector.output_labels["output"].text() == f"float32[{N},1]"
    # Both compiles ran off the UI thread, and no Variable's first value was drawn on it.
    assert compiles.on_ui[ui_before:] == []


def test_wire_checks_compile_only_what_feeds_the_block(qtbot, window):
    doc, compiles = window.document, window.compiles
    for k in range(300):                    # blocks that have nothing to do with the wires
        doc.add_node("Placeholder", (0, 400 + 10 * k), node_id=f"q{k}", attrs={"shape": [2]})
    doc.add_node("Sum", (660, 0), node_id="s2")
    doc.add_node("Softmax", (660, 200), node_id="sm")
    window.document.program()               # the page as it is now
    before = len(compiles.pages)
    assert doc.check_connection("x", "output", "s2", "input").ok
    refused = doc.check_connection("x", "output", "mm", "a")      # [N, 1] x [N, 1]
    assert not refused.ok and "mm" not in refused.reason and refused.reason
    # Each check compiled the block and what feeds it, without the wire and with it: never the
    # page's 300 other blocks, nor the big Variable whose wire into mm would be replaced.
    assert compiles.sizes[before:] == [1, 2, 2, 2], compiles.sizes[before:]


class _CountedDiagnostics(tuple):
    """A program's diagnostics, counting the times they are read through."""

    def __iter__(self):
        self.reads += 1
        return super().__iter__()


def _counted(program):
    program.diagnostics = _CountedDiagnostics(program.diagnostics)
    program.diagnostics.reads = 0
    return program


def test_a_new_program_redraws_only_the_blocks_it_changes(qtbot, monkeypatch):
    """10,000 blocks, each with an error: a block looked its errors up in every diagnostic (a
    page of 10,000 broken blocks took 5 s to open and each edit stalled the UI 3.9 s), and each
    compile redrew every block. The work is counted, not timed: the diagnostics read through and
    the blocks rebuilt."""
    from blockflow.compile.compiler import compile_page
    from blockflow.gui.canvas import scene as canvas
    from blockflow.gui.common.theme import Style
    from blockflow.registry import default_registry

    page = Project().add_page("main")
    for i in range(10_000):
        page.add_node("Sum", id=f"s{i}", position=((i % 100) * 220.0, (i // 100) * 110.0))
    registry = default_registry()
    before = compile_page(page, registry)
    assert len(before.errors) == 10_000
    scene = canvas.DiagramScene(registry, Style())
    scene.load(page, _counted(before))
    assert before.diagnostics.reads == 1          # once for all the blocks, not once per block
    assert scene.node_items["s7"].data.errors == ("input: input 'input' is not connected and has no inline value",)
    page.nodes["s7"].inputs["input"] = np.ones(3, np.float32)        # s7 is fine now
    after = _counted(compile_page(page, registry))
    built = []
    real = canvas.node_data
    monkeypatch.setattr(canvas, "node_data", lambda *a, **k: built.append(a[1]) or real(*a, **k))
    assert scene.apply_program(after)
    assert built == ["s7"] and scene.node_items["s7"].data.errors == ()
    assert (before.diagnostics.reads, after.diagnostics.reads) == (1, 1)
    assert not scene.apply_program(compile_page(page, registry))      # the same again: nothing
    assert built == ["s7"]
