"""The editor at QT_SCALE_FACTOR=2 (issue 16): the Values table shows whole numbers, never "1" for
1003 or blank cells, and the canvas fits the page once the window has its real size.

QT_SCALE_FACTOR is read when the QApplication is made, so each check runs in a child process
with it set, on the offscreen platform given a 1920x1080 screen (960x540 logical pixels at
scale 2, as on a real display); the child prints what it read as JSON.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_projects" / "stable_softmax.bflow.json"

_COMMON = """
import json, sys, time
import numpy as np
from PySide6.QtCore import QPoint, QSettings, Qt
from PySide6.QtGui import QColor, QFont
from PySide6.QtWidgets import QApplication, QStyle
app = QApplication(sys.argv)
app.setFont(QFont("DejaVu Sans", 9))
from blockflow.gui.document.document import Document
from blockflow.gui.main_window import MainWindow
from blockflow.io.project_io import load_project

def settle(n=10):
    for _ in range(n):
        app.processEvents()
        time.sleep(0.01)

doc = Document(load_project(SAMPLE), None)
window = MainWindow(doc, QSettings(SETTINGS, QSettings.IniFormat))
"""

_VALUES = """
window.show()
settle()
doc.set_feed("x", np.array([1003.0, 1000.0, 999.5, 1001.0, -998.25], dtype=np.float32))
window.session.forward()
for _ in range(500):
    settle(1)
    if window.session.results() is not None:
        break
window.view.select_nodes(["x"])
settle()
window.grab()
settle()
table = window.value_viewer.value_pane.table
model = table.model()
fm = table.fontMetrics()
margin = table.style().pixelMetric(QStyle.PM_FocusFrameHMargin, None, table) + 1
seen = table.viewport().rect()
image = table.viewport().grab().toImage()
dpr = image.devicePixelRatio()
ink = table.palette().text().color()

def inked(rect):
    n = 0
    for y in range(int(rect.top() * dpr), int(rect.bottom() * dpr)):
        for x in range(int(rect.left() * dpr), int(rect.right() * dpr)):
            c = QColor(image.pixel(x, y))
            n += abs(c.red() - ink.red()) + abs(c.green() - ink.green()) + abs(c.blue() - ink.blue()) < 200
    return n

cells = []
for r in range(model.rowCount()):
    index = model.index(r, 0)
    rect = table.visualRect(index)
    if not rect.intersects(seen) or rect.bottom() > seen.bottom():
        continue                                   # a row scrolled out of sight: not on show
    text = model.data(index)
    room = rect.adjusted(margin, 0, -margin, 0)
    shown = fm.elidedText(text, table.textElideMode(), room.width())
    left = room.right() - fm.horizontalAdvance(shown)   # right-aligned
    # what the eye gets: the drawn text where it is inside the viewport, else only its part
    visible = shown if left >= seen.left() and room.right() <= seen.right() else "(cut)"
    cells.append({"text": text, "shown": visible, "ink": inked(rect & seen)})
print(json.dumps({"dpr": app.devicePixelRatio(), "cells": cells,
                  "table_width": table.viewport().width()}))
"""

_FIT = """
window.resize(700, 420)                  # shown first at one size...
window.show()
settle()
window.resize(940, 520)                  # ...then the window manager's (or the user's) size
settle()
view = window.view

def opening_view_kept():
    # the view is the page's opening view for the window's present size (readable.py: fitted,
    # or its start at a readable zoom), as if the page had been opened at this size
    zoom, centre = view.zoom(), view.mapToScene(view.viewport().rect().center())
    view.open_readable()
    again = view.mapToScene(view.viewport().rect().center())
    return abs(view.zoom() - zoom) < 1e-9 and abs(again.x() - centre.x()) <= 1 and abs(again.y() - centre.y()) <= 1

grown_ok = opening_view_kept()
window.resize(640, 400)                  # smaller again: the opening view again, for this size
settle()
shrunk_ok = opening_view_kept()
before = view.zoom()
view.zoom_in()                           # the user's own zoom...
zoomed = view.zoom()
window.resize(900, 500)                  # ...is not undone by a later resize
settle()
print(json.dumps({"grown_ok": grown_ok, "shrunk_ok": shrunk_ok, "zoomed": zoomed,
                  "after": view.zoom(), "before": before}))
"""


def run_scaled(tmp_path, body: str) -> dict:
    screen = tmp_path / "screen.json"
    screen.write_text(json.dumps({"screens": [{"name": "big", "x": 0, "y": 0, "width": 1920, "height": 1080,
                                               "logicalDpi": 96, "logicalBaseDpi": 96, "dpr": 1}]}))
    script = (f"SAMPLE = {str(SAMPLE)!r}\nSETTINGS = {str(tmp_path / 'settings.ini')!r}\n"
              + textwrap.dedent(_COMMON) + textwrap.dedent(body))
    env = dict(os.environ, QT_SCALE_FACTOR="2", QT_QPA_PLATFORM=f"offscreen:configfile={screen}")
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_values_table_shows_whole_numbers_at_scale_factor_2(tmp_path):
    seen = run_scaled(tmp_path, _VALUES)
    assert seen["dpr"] == 2.0
    cells = seen["cells"]
    assert cells, "no row of the table is on show"
    assert cells[0]["text"] == "1003"
    for cell in cells:
        assert cell["shown"] == cell["text"], cell          # never "1" for 1003, never cut
        assert cell["ink"] > 10, cell                        # and drawn: no blank cell


def test_the_canvas_fits_once_the_window_has_its_size_and_keeps_a_users_zoom(tmp_path):
    seen = run_scaled(tmp_path, _FIT)
    assert seen["grown_ok"] and seen["shrunk_ok"]
    assert seen["zoomed"] > seen["before"]
    assert seen["after"] == pytest.approx(seen["zoomed"])   # the user's zoom stays


def test_the_values_tables_columns_follow_the_numbers_shown(qtbot):
    """In this process (scale 1): one array after another, narrow and wide, each column as wide
    as its numbers, none elided, and the table never narrower than one column."""
    import numpy as np
    from PySide6.QtWidgets import QApplication, QStyle

    from blockflow.gui.panels.valueviewer import ArrayPane

    pane = ArrayPane("Value")
    qtbot.addWidget(pane)
    pane.resize(500, 300)
    pane.show()
    qtbot.waitExposed(pane)
    table = pane.table
    rng = np.random.default_rng(0)
    arrays = [np.array([1003.0, 2.5]), rng.normal(size=(6, 300)) * 1e6, np.array([[1.0, 2.0]]),
              np.array(-123456.75, dtype=np.float64), np.arange(4, dtype=np.int64)]
    margin = table.style().pixelMetric(QStyle.PM_FocusFrameHMargin, None, table) + 1
    widths = []
    for arr in arrays:
        pane.set_array(arr, arr, "out")
        QApplication.processEvents()
        model, fm = table.model(), table.fontMetrics()
        assert table.minimumWidth() >= table.columnWidth(0)
        for r in range(min(model.rowCount(), 6)):
            for c in range(min(model.columnCount(), 6)):
                text = model.data(model.index(r, c))
                room = table.columnWidth(c) - 2 * margin
                assert fm.elidedText(text, table.textElideMode(), room) == text, (arr.shape, text)
        widths.append(table.columnWidth(0))
    assert widths[1] > widths[0] > 0 and widths[2] < widths[1] and widths[4] <= widths[0]
