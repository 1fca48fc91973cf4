"""The editor process exits cleanly after using the clipboard (Qt keeps it past Python's end)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SAMPLE = Path(__file__).resolve().parents[2] / "sample_projects" / "stable_softmax.bflow.json"

SCRIPT = f"""
from PySide6.QtWidgets import QApplication
from blockflow.gui.canvas import DiagramView
from blockflow.gui.document import Document
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
