"""File > Import Composites on a library file of a long chain of composites, each using the next,
listed leaves first (the order that costs most): the import is one undo step, and it no longer
makes each added composite walk every diagram's whole reach (300 of them took 16 s, 600 127 s)."""
from __future__ import annotations

import json
import time

from hostile_kit import chain_composite
from PySide6.QtCore import QSettings


def test_importing_a_long_chain_of_composites_leaves_first(qtbot, tmp_path):
    from blockflow.gui.main_window import MainWindow

    n = 400
    comps = [chain_composite(f"A{i}", f"A{i + 1}" if i < n - 1 else None) for i in range(n)][::-1]
    path = tmp_path / "chain.bflow.json"
    path.write_text(json.dumps({"format": "blockflow-project", "version": 2, "metadata": {}, "pages": [],
                                "composites": comps}), encoding="utf-8")
    window = MainWindow(settings=QSettings(str(tmp_path / "s.ini"), QSettings.IniFormat))
    qtbot.addWidget(window)
    doc = window.document
    t = time.perf_counter()
    assert len(window.import_composites(str(path))) == n
    assert time.perf_counter() - t < 2.5
    assert len(doc.project.composites) == n
    doc.undo_stack.undo()
    assert not doc.project.composites
