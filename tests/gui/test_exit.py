"""The editor process exits cleanly after using the clipboard (Qt keeps it past Python's end)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SAMPLE = Path(__file__).resolve().parents[2] / "sample_projects" / "stable_softmax.bflow.json"

SCRIPT = f"""
from PySide6.QtWidgets import QApplication
from blockflow.gui.canvas.view import DiagramView
from blockflow.gui.document.document import Document
app = QApplication([])
doc = Document()
doc.open({str(SAMPLE)!r})
view = DiagramView(doc)
view.select_nodes(["Max_1", "StopGradient_1"])
assert view.copy_selection()
view.paste(None)
print("ok")
"""


def test_process_exits_cleanly_after_copy_and_paste():
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    assert "ok" in proc.stdout


GC_SCRIPT = """
import gc
from PySide6.QtWidgets import QApplication
app = QApplication([])
from blockflow.gui.document.document import Document
doc = Document()
d = doc
steps = [
    lambda: d.add_node("Placeholder", (0, 160), node_id="x", attrs={"shape": [5]}),
    lambda: d.add_node("Max", (200, 40)),
    lambda: d.add_node("StopGradient", (400, 40)),
    lambda: d.add_node("Subtract", (600, 160)),
    lambda: d.add_node("Softmax", (800, 160)),
    lambda: d.add_node("Const", (1000, 320), node_id="w", attrs={"value": [1.0, -2.0, 0.5, 3.0, 1.5]}),
    lambda: d.add_node("Multiply", (1200, 160)),
    lambda: d.add_node("Sum", (1400, 160)),
    lambda: d.connect("x", "output", "Max_1", "input"),
    lambda: d.connect("Max_1", "output", "StopGradient_1", "input"),
    lambda: d.connect("x", "output", "Subtract_1", "x"),
    lambda: d.connect("StopGradient_1", "output", "Subtract_1", "y"),
]
for step in steps:
    step()
del doc, d, steps
gc.collect()                 # the Document and its undo stack go in the collector's order
print("ok")
"""


def test_a_document_freed_by_the_garbage_collector_takes_its_commands_cleanly():
    """Commands used to hold the Document strongly: collecting that cycle deleted the commands
    twice inside QUndoStack::clear (a segfault at exit or between tests)."""
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    proc = subprocess.run([sys.executable, "-c", GC_SCRIPT], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    assert "ok" in proc.stdout


YOUNG_COMMANDS_SCRIPT = """
import gc
from PySide6.QtWidgets import QApplication
app = QApplication([])
from blockflow.gui.document.document import Document

class Holder:                     # a cycle (a window, a panel, a closure...) holding the Document
    pass

gc.disable()                      # only the collections below: the same generations on every run
for _ in range(3):
    doc = Document()
    gc.collect(0)                 # the Document and its stack's wrapper move to generation 1
    doc.add_node("Placeholder", (0, 0), node_id="x", attrs={"shape": [3]})   # commands: generation 0
    doc.add_node("Exp", (100, 0), node_id="e")
    doc.connect("x", "output", "e", "x")                                      # a macro
    gesture = doc.new_gesture()
    doc.move_nodes({"e": ((100, 0), (110, 0))}, gesture=gesture)
    doc.move_nodes({"e": ((110, 0), (120, 0))}, gesture=gesture)              # merged into the last
    doc.set_label("e", "exp")
    holder = Holder()
    holder.me, holder.doc = holder, doc
    del holder, doc
    gc.collect()                  # generation 0 is listed before 1: the commands are cleared first
print("ok")
"""


def test_a_document_in_cyclic_garbage_takes_its_younger_commands_cleanly():
    """A Document reachable only from a reference cycle, whose commands were pushed after it was
    promoted to an older generation: a full collection tp_cleared the commands' wrappers first,
    which deleted the C++ commands the QUndoStack still held, and freeing the Document deleted
    them again in QUndoStack::clear (the intermittent segfault in gc.collect() of
    test_panels_of_a_closed_window_leave_the_document_and_are_freed). Document.__del__ empties
    the stack before the collector clears anything."""
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    proc = subprocess.run([sys.executable, "-X", "faulthandler", "-c", YOUNG_COMMANDS_SCRIPT],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    assert "ok" in proc.stdout


START_SCRIPT = """
import sys
from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QApplication
app = QApplication([])
from blockflow.gui.main_window import MainWindow
w = MainWindow(settings=QSettings(sys.argv[1], QSettings.IniFormat))
w.show()
for _ in range(5):
    app.processEvents()
print("at start", "pyqtgraph" in sys.modules)
w.docks["train"].raise_()
for _ in range(5):
    app.processEvents()
print("train shown", "pyqtgraph" in sys.modules)
"""


def test_pyqtgraph_is_loaded_only_when_the_train_panel_is_shown(tmp_path):
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    proc = subprocess.run([sys.executable, "-c", START_SCRIPT, str(tmp_path / "s.ini")], capture_output=True,
                          text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "at start False" in proc.stdout and "train shown True" in proc.stdout
