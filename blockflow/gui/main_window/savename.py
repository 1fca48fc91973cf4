"""The name a save dialog gave, with the suffix its format needs added: a name the dialog never
asked about. File dialogs confirm replacing the file the user typed, ``model``; the file written
is ``model.py``, so a file already there is replaced only when the user says so."""
from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtWidgets import QMessageBox

from blockflow.gui.common.plaintext import literal

__all__ = ["may_replace"]


def may_replace(parent, chosen: str, named: str) -> bool:
    """Whether to write ``named``, the name ``chosen`` in a dialog made into one of its format: yes
    when they are the same or nothing is at ``named``; else the user is asked (No by default)."""
    if named == chosen or not os.path.lexists(named):
        return True
    answer = QMessageBox.question(
        parent, "Replace the file?",
        literal(f"{Path(named).name} already exists in {Path(named).parent}. The name you gave, "
                f"{Path(chosen).name}, is written as {Path(named).name}: replace that file?"),
        QMessageBox.Yes | QMessageBox.No, QMessageBox.No)
    return answer == QMessageBox.Yes
