"""Importing thousands of composites at once, through File > Import Composites and from the layer
library: one edit for them all, whose cost grows with their number, not with its square. Found:
each composite added was an edit of its own that looked through every definition of the project
(for instances of it, and for the diagrams using it), so 2,000 took 7 s and 10,000 minutes.

The work is counted, not timed: every pass over a composite's blocks is tallied (their ``nodes``
are a dict that counts its iterations), and an import may make a few per composite, never one
per composite for each composite."""
from __future__ import annotations

import json

import pytest
from hostile_kit import chain_composite
from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QFileDialog, QMessageBox

from blockflow.composite import Composite, block_name
from blockflow.project import Page, Project

N = 2_000               # one pass per composite for each composite: 4,000,000 passes


class CountedNodes(dict):
    """A diagram's blocks that count every pass over them (``passes``, for all such dicts)."""

    passes = 0

    def __iter__(self):
        CountedNodes.passes += 1
        return super().__iter__()

    def values(self):
        CountedNodes.passes += 1
        return super().values()

    def items(self):
        CountedNodes.passes += 1
        return super().items()


def _counted(comps: dict) -> dict:
    for comp in comps.values():
        comp.page.nodes = CountedNodes(comp.page.nodes)
    return comps


def _library_file(path, comps: list) -> str:
    path.write_text(json.dumps({"format": "blockflow-project", "version": 2, "metadata": {}, "pages": [],
                                "composites": comps}), encoding="utf-8")
    return str(path)


@pytest.fixture
def window(qtbot, tmp_path, monkeypatch):
    import blockflow.gui.main_window.composites as window_composites
    from blockflow.gui.main_window import MainWindow

    from blockflow.gui.document.document import Document

    real = window_composites.load_library
    monkeypatch.setattr(window_composites, "load_library",
                        lambda path: (lambda comps, meta: (_counted(comps), meta))(*real(path)))
    project = Project()
    project.add_page("main").add_node(block_name("A7"), id="uses_a7")   # of a composite a file brings
    w = MainWindow(Document(project), QSettings(str(tmp_path / "s.ini"), QSettings.IniFormat))
    qtbot.addWidget(w)
    monkeypatch.setattr(QMessageBox, "question",              # closing with the import unsaved
                        staticmethod(lambda *a, **k: QMessageBox.Discard))
    return w


def _import(window, monkeypatch, path: str) -> None:
    """File > Import Composites…, the file chosen in its dialog."""
    monkeypatch.setattr(QFileDialog, "getOpenFileName", staticmethod(lambda *a, **k: (path, "")))
    window.actions["import_composites"].trigger()


@pytest.mark.parametrize("shape", ["flat", "chain, leaves first", "two levels"])
def test_importing_thousands_of_composites_makes_a_few_passes_per_composite(window, tmp_path, monkeypatch, shape):
    comps = {"flat": [chain_composite(f"A{i}") for i in range(N)],
             "chain, leaves first": [chain_composite(f"A{i}", f"A{i + 1}" if i < N - 1 else None)
                                     for i in range(N)][::-1],
             "two levels": [chain_composite(f"A{i}", f"A{i % 100 + N // 2}" if i < N // 2 else None)
                            for i in range(N)]}[shape]
    path = _library_file(tmp_path / "lib.bflow.json", comps)
    doc = window.document
    assert any("no composite 'A7'" in str(d) for d in doc.program().diagnostics)
    CountedNodes.passes = 0
    _import(window, monkeypatch, path)
    assert CountedNodes.passes <= 20 * N, CountedNodes.passes      # 8 or 9 a composite
    assert len(doc.project.composites) == N and list(doc.project.composites)[0] == comps[0]["name"]
    assert doc.undo_stack.count() == 1 and doc.undo_stack.undoText() == f"Import {N} composites"
    assert not any("no composite" in str(d) for d in doc.program().diagnostics)   # main compiled again
    assert window.statusBar().currentMessage().startswith(f"imported {comps[0]['name']}, ")
    assert f"and {N - 8:,} more from lib.bflow.json" in window.statusBar().currentMessage()
    CountedNodes.passes = 0
    doc.undo_stack.undo()
    assert not doc.project.composites                         # taken back, though main/uses_a7 uses one
    assert any("no composite 'A7'" in str(d) for d in doc.program().diagnostics)
    doc.undo_stack.redo()
    assert len(doc.project.composites) == N
    assert CountedNodes.passes <= 20 * N, CountedNodes.passes


def test_an_import_closing_a_cycle_is_refused_whole(window, tmp_path, monkeypatch):
    """A definition of the project draws an instance of a composite the file brings, which uses
    it back: refused, naming the cycle, and nothing of the file is added."""
    doc = window.document
    doc.project.composites["P"] = Composite("P", page=Page(block_name("P")))
    doc.project.composites["P"].page.add_node(block_name("B"), id="b")
    path = _library_file(tmp_path / "cycle.bflow.json", [chain_composite("A"), chain_composite("B", "P")])
    warned = []
    monkeypatch.setattr(type(window), "_refused", lambda self, what, exc: warned.append(str(exc)))
    _import(window, monkeypatch, path)
    assert warned == ["composite 'B' would contain itself: B > P > B"]
    assert list(doc.project.composites) == ["P"] and doc.undo_stack.count() == 0


def test_a_layer_of_thousands_of_composites_is_inserted_in_a_few_passes_per_composite():
    from blockflow.io.library import Library, insert_layer

    comps = {f"L{i}": Composite(f"L{i}", page=Page(block_name(f"L{i}"))) for i in range(N)}
    top = Composite("Top", page=Page(block_name("Top")))
    for i in range(N):
        top.page.add_node(block_name(f"L{i}"), id=f"l{i}")
    library = Library.from_composites([("core", _counted({"Top": top, **comps}))])
    project = Project()
    project.composites["L5"] = Composite("L5", doc="a different L5", page=Page(block_name("L5")))
    CountedNodes.passes = 0
    name, changes = insert_layer(project, library, "Top")
    assert CountedNodes.passes <= 20 * N, CountedNodes.passes      # 4 a composite
    assert name == "Top" and len(changes) == 1 and len(project.composites) == N + 2
    assert project.composites["Top"].page.nodes["l5"].block == block_name("L5_2")      # renamed with it
    assert list(project.composites)[-1] == "Top"                                     # after what it uses


def test_replacements_that_meet_a_cycle_on_the_way_are_refused_whole(window, tmp_path, monkeypatch):
    """Replace for both of a file's R2 (using R1) and R1 (using nothing), where the project's R1
    uses R2: the end would have no cycle, but R2 replaced first closes one with the R1 still there.
    Refused with the cycle named, the project as it was (Replace is done one composite at a time)."""
    doc = window.document
    for name, inner in (("R1", "R2"), ("R2", None)):
        doc.project.composites[name] = Composite(name, page=Page(block_name(name)))
        if inner:
            doc.project.composites[name].page.add_node(block_name(inner), id="i")
    before = {n: c.copy() for n, c in doc.project.composites.items()}
    path = _library_file(tmp_path / "swap.bflow.json", [chain_composite("R2", "R1"), chain_composite("R1")])
    monkeypatch.setattr(type(window), "ask_clash", lambda self, name, later=0: ("replace", False))
    warned = []
    monkeypatch.setattr(type(window), "_refused", lambda self, what, exc: warned.append(str(exc)))
    _import(window, monkeypatch, path)
    assert warned == ["composite 'R2' would contain itself: R2 > R1 > R2"]
    assert doc.project.composites == before and not doc.dirty


def test_hundreds_of_name_clashes_are_answered_once_for_all(window, qtbot, tmp_path, monkeypatch):
    """Found (hostile24, left then): a library whose composites all clash by name with different
    ones of the project asked Replace / Keep Both / Skip once per clash: 300 modal boxes in a row
    for one import. The first box now offers "Do the same for the 299 other name clashes"."""
    from PySide6.QtCore import Qt, QTimer
    from PySide6.QtWidgets import QApplication

    doc = window.document
    for i in range(300):
        doc.project.composites[f"C{i}"] = Composite(f"C{i}", page=Page(block_name(f"C{i}")))
    path = _library_file(tmp_path / "clashes.bflow.json", [chain_composite(f"C{i}") for i in range(300)])
    boxes, done = [], []

    def answer():          # every box shown: the first ticks "the same for all" and keeps both
        box = QApplication.activeModalWidget()
        if isinstance(box, QMessageBox):
            boxes.append((box.text(), box.checkBox().text() if box.checkBox() else None))
            if box.checkBox() is not None and len(boxes) == 1:
                box.checkBox().setChecked(True)
            (keep,) = [b for b in box.buttons() if b.text() == "Keep Both"]
            qtbot.mouseClick(keep, Qt.LeftButton)
        if not done:
            QTimer.singleShot(10, answer)

    QTimer.singleShot(0, answer)
    try:
        _import(window, monkeypatch, path)
    finally:
        done.append(True)          # the poller stops with the import, even a failed one
    assert boxes == [("This project already has a different composite named 'C0'.",
                      "Do the same for the 299 other name clashes of this import")]
    assert len(doc.project.composites) == 600 and "C299_2" in doc.project.composites
    doc.undo_stack.undo()                                  # one undo step for the whole import
    assert len(doc.project.composites) == 300


def test_closing_the_window_stops_its_queue_of_compiles(window, tmp_path, monkeypatch):
    """An import of hundreds of composites queues a compile of each (every one starts when the
    last ends): closing the window drops the queue, where it went on compiling them after the
    window had closed (in the tests, in the next test's event loop). At most the compile under
    way at the close finishes."""
    import time

    from PySide6.QtWidgets import QApplication

    from blockflow.gui.document import compiling
    path = _library_file(tmp_path / "lib.bflow.json", [chain_composite(f"A{i}") for i in range(300)])
    _import(window, monkeypatch, path)
    doc = window.document
    assert doc.compiling() > 100
    compiled = []
    real = compiling.compile_page
    monkeypatch.setattr(compiling, "compile_page",
                        lambda page, *a, **k: (compiled.append(page.name), real(page, *a, **k))[1])
    assert window.close()
    end = time.perf_counter() + 1.0
    while time.perf_counter() < end:
        QApplication.processEvents()
        time.sleep(0.005)
    assert len(compiled) <= 1, compiled
    assert doc.compiling() == 0
    doc.program("main")          # a page asked for again still compiles


def test_stopping_every_queue_passes_over_documents_already_deleted(qapp):
    """What every GUI test's teardown calls (tests/conftest.py): a PagePrograms whose Qt object
    went with its document raises RuntimeError when asked; stop_every_queue passes over it and
    still empties the live ones' queues."""
    import shiboken6
    from PySide6.QtCore import QObject

    from blockflow.gui.document import compiling
    gone_owner, live_owner = QObject(), QObject()
    gone, live = compiling.PagePrograms(gone_owner), compiling.PagePrograms(live_owner)
    gone.request("a")
    live.request("b")
    shiboken6.delete(gone_owner)
    assert not shiboken6.isValid(gone) and live.pending() == 1
    compiling.stop_every_queue()
    assert live.pending() == 0
