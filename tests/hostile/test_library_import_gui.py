"""File > Import Composites on a library file of a long chain of composites, each using the next,
listed leaves first (the order that costs most): the import is one undo step, and it no longer
makes each added composite walk every diagram's whole reach (300 of them took 16 s, 600 127 s).
The walks are counted, not timed: the reads of what a composite uses, and the searches for the
diagrams using the added ones."""
from __future__ import annotations

import json

from call_counts import Calls
from hostile_kit import chain_composite
from PySide6.QtCore import QSettings

from blockflow import composite


def _import_chain(qtbot, tmp_path, n: int):
    """A window, and the composites it imported from a file of a chain of ``n``, leaves first."""
    from blockflow.gui.main_window import MainWindow

    comps = [chain_composite(f"A{i}", f"A{i + 1}" if i < n - 1 else None) for i in range(n)][::-1]
    path = tmp_path / f"chain{n}.bflow.json"
    path.write_text(json.dumps({"format": "blockflow-project", "version": 2, "metadata": {}, "pages": [],
                                "composites": comps}), encoding="utf-8")
    window = MainWindow(settings=QSettings(str(tmp_path / "s.ini"), QSettings.IniFormat))
    qtbot.addWidget(window)
    return window, window.import_composites(str(path))


def test_importing_a_long_chain_of_composites_leaves_first(qtbot, tmp_path, monkeypatch):
    from PySide6.QtWidgets import QMessageBox

    from blockflow.gui.document import compiling, composite_edits
    from blockflow.gui.main_window import composites as menu
    from blockflow.gui.session import pageresults

    # A window left with the import (a failed assertion) is closed without asking to save it.
    monkeypatch.setattr(QMessageBox, "question", staticmethod(lambda *a, **k: QMessageBox.Discard))
    # (uses as each module that imported it calls it)
    reading = [Calls(monkeypatch, module, "uses") for module in (composite, compiling, menu, pageresults)]
    searched = Calls(monkeypatch, composite_edits, "users_of")
    n = 100
    reads = {}
    for size in (n, 2 * n):
        before = (sum(r.n for r in reading), searched.n)
        window, imported = _import_chain(qtbot, tmp_path, size)
        assert len(imported) == size
        reads[size] = sum(r.n for r in reading) - before[0]
        # one search for the diagrams using any of them, not one per composite added
        assert searched.n - before[1] == 1
        doc = window.document
        assert len(doc.project.composites) == size
        doc.undo_stack.undo()          # one step (and the window closes without asking)
        assert not doc.project.composites
    # what each composite uses is read a few times (4), not once per diagram that reaches it
    assert reads[2 * n] == 2 * reads[n], reads
