"""Time for checking and editing: `blockflow check`, and the editor, are linear in the number of
pages. The work that grew faster is counted (tests/call_counts.py), not timed.

Before, `check` looked every page up again by name (a scan of the page list per page): 20,000
empty pages took 6.5 s in process and 40,000 took 29 s. The editor took 110 s to open 10,000.
"""
from __future__ import annotations

import contextlib
import io
import json
import time

from call_counts import Calls

from blockflow.cli import EXIT_DIAGNOSTICS, main
from blockflow.compile import compiler
from blockflow.project import Project


def _pages_project(path, n: int, bad: int | None = None) -> None:
    pages = [{"name": f"p{i}", "nodes": [], "edges": []} for i in range(n)]
    if bad is not None:   # one page with a problem, to see that every page is still checked
        pages[bad]["nodes"] = [{"id": "s", "block": "Sum"}]
    path.write_text(json.dumps({"format": "blockflow-project", "version": 1, "metadata": {}, "pages": pages}))


def _check(path) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["check", str(path)])
    return code, out.getvalue()


def test_check_compiles_each_page_once_and_looks_none_up_by_name(tmp_path, monkeypatch):
    """The work counted, not timed (a time ratio of two sizes flaked on a loaded machine)."""
    n = 2_000
    path = tmp_path / "p.bflow.json"
    _pages_project(path, n, bad=n - 1)
    looked_up = Calls(monkeypatch, Project, "page")
    compiled = Calls(monkeypatch, compiler, "compile_page")
    code, out = _check(path)
    assert code == EXIT_DIAGNOSTICS
    assert out.count(": ok\n") == n - 1
    assert f"error: p{n - 1}/s port 'input': input 'input' is not connected" in out
    # Project.page(name) scans the page list: once per page, that was the quadratic cost.
    assert (compiled.n, looked_up.n) == (n, 0)


#: what may change a tab; each change lays every tab out again
TAB_EDITS = ("insertTab", "removeTab", "moveTab", "setTabText", "setTabData", "setTabToolTip", "setTabButton")


class _EditorWork:
    """The editor's work that grew faster than the pages, counted: the tab bar's edits, pages
    looked up by name (Project.page scans the page list), tables of the pages by name made
    (Project.diagrams lists them all), pages compiled, and the Problems list made."""

    def __init__(self, monkeypatch):
        from blockflow.gui.document import compiling
        from blockflow.gui.main_window.tabs import PageTabBar
        from blockflow.gui.panels.problems import ProblemsPanel

        self.calls = {name: Calls(monkeypatch, PageTabBar, name) for name in TAB_EDITS}
        self.calls.update(looked_up=Calls(monkeypatch, Project, "page"),
                          tables=Calls(monkeypatch, Project, "diagrams"),
                          compiled=Calls(monkeypatch, compiling, "compile_page"),
                          listed=Calls(monkeypatch, ProblemsPanel, "_rows"))

    def counts(self) -> dict[str, int]:
        return {name: c.n for name, c in self.calls.items()}

    def since(self, before: dict[str, int]) -> dict[str, int]:
        """The calls made since ``before`` (of counts()), those made at least once."""
        return {name: n - before[name] for name, n in self.counts().items() if n > before[name]}


def _open_window(qtbot, tmp_path, path):
    """The window on ``path`` once every page is checked, and the seconds that took."""
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    from blockflow.gui.document.document import Document
    from blockflow.gui.main_window import MainWindow
    from blockflow.io.project_io import load_project

    start = time.perf_counter()
    window = MainWindow(Document(load_project(path), str(path)),
                        QSettings(str(tmp_path / "s.ini"), QSettings.IniFormat))
    qtbot.addWidget(window)
    window.show()
    while window.document.compiling():
        QApplication.processEvents()
    qtbot.waitUntil(lambda: window.problems.checking == 0)
    return window, time.perf_counter() - start


def test_the_editor_opens_many_pages_in_linear_time(qtbot, tmp_path, monkeypatch):
    """Before, every tab got a close button of its own, which Qt makes in time quadratic in
    their number (10,000 pages: 110 s), every tab was re-labelled on each page switch, and each
    page compiled rebuilt the Problems list of all pages. The work is counted, not timed (a time
    ratio of two sizes flaked on a loaded machine)."""
    from PySide6.QtWidgets import QMessageBox, QTabBar

    from blockflow.gui.panels.problems import CHECKING_REFRESH_MS

    asked = []
    def answer(parent, title, text, *a, **k):   # yes to deleting the page; the edits are discarded on close
        if title == "Unsaved changes":
            return QMessageBox.Discard
        asked.append(text)
        return QMessageBox.Yes

    monkeypatch.setattr(QMessageBox, "question", staticmethod(answer))
    work = _EditorWork(monkeypatch)
    n = 1_000
    opened = {}
    for size in (n, 2 * n):
        path = tmp_path / f"{size}.bflow.json"
        _pages_project(path, size, bad=size - 1)
        before = work.counts()
        window, seconds = _open_window(qtbot, tmp_path, path)
        opened[size] = work.since(before)
    small, big = opened[n], opened[2 * n]
    # Each tab made once, no tab re-labelled or moved, one close button; each page compiled once.
    assert {k: v for k, v in big.items() if k in TAB_EDITS} == {
        "insertTab": 2 * n, "setTabData": 2 * n, "setTabToolTip": 2 * n, "setTabButton": 1}, big
    assert big["compiled"] == 2 * n
    # Pages looked up by name, and tables of them made, once per page compiled grew as their
    # square: twice the pages take no more of either than half of them.
    assert (big["looked_up"], big["tables"]) == (small["looked_up"], small["tables"]), (small, big)
    # While pages are checked the Problems list is made a few times a second, not once per page.
    assert big["listed"] <= 2 + seconds * 1000 / CHECKING_REFRESH_MS, (big, seconds)
    assert window.problems.rows() == [("s", "input 'input' is not connected and has no inline value")]
    # One close button, on the current tab; it deletes that page.
    # Switching and deleting pages touch the tabs that change, not every tab (each change of a
    # tab lays them all out again: 5,000 tabs re-labelled took seconds).
    tabs = window.tabs
    side = QTabBar.ButtonPosition.RightSide
    before = work.counts()
    window.document.set_current_page("p7")
    assert {k: v for k, v in work.since(before).items() if k in TAB_EDITS} == {"setTabButton": 2}
    assert [i for i in range(tabs.count()) if tabs.tabButton(i, side) is not None] == [7]
    tabs.moveTab(7, 2)                                      # as a drag does
    assert tabs.tabButton(2, side) is not None and tabs.currentIndex() == 2
    before = work.counts()
    tabs.tabButton(2, side).click()
    assert {k: v for k, v in work.since(before).items() if k in TAB_EDITS} == {"removeTab": 1, "setTabButton": 1}
    assert asked and "p7" in asked[0]
    assert "p7" not in [p.name for p in window.document.project.pages]
    assert [i for i in range(tabs.count()) if tabs.tabButton(i, side) is not None] == [tabs.currentIndex()]
