"""File > Import ONNX Model: an ONNX model opened as a new, unsaved project (docs/import.md),
through the same import as ``blockflow import onnx``. A mixin of MainWindow.

The import runs on a Worker thread (a large model takes seconds: ResNet-50 0.8 s, a 36,000-node
model about 15 s) while the window stays live; the project it makes replaces the open one when it
arrives. Should the open project have been edited, or another opened, in the meantime, the window
asks whether to replace it (and, with unsaved changes, whether to save them): an import never
loses work. A window closed meanwhile abandons the import.
"""
from __future__ import annotations

import os

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QFileDialog, QMessageBox

from blockflow.gui.common.plaintext import literal
from blockflow.gui.common.worker import Worker

__all__ = ["ModelImportMixin"]


class ModelImportMixin:
    """Open an ONNX model as a project (see the module)."""

    #: the import under way: (its number, path, the edit count when it started), or None
    _import_pending = None
    _import_thread: Worker | None = None
    #: edits and project changes seen (undo, redo and a new project count too): an undo followed
    #: by a new edit leaves the undo stack's index and count as they were, not this
    _import_edits = 0
    _import_jobs = 0

    def import_onnx_model(self, path: str | None = None) -> bool:
        """Start importing the ONNX model at ``path`` (asked when None) as the window's project;
        True when it started (False: cancelled, the unsaved work was kept, or an import is under
        way). Its end comes later: the project opened, or a box saying why not."""
        from blockflow.importing.onnx_import import import_onnx

        if self._import_pending is not None:
            self.statusBar().showMessage("an import is under way: wait for it to finish", 5000)
            return False
        if not self.maybe_save():
            return False
        if path is None:
            path, _ = QFileDialog.getOpenFileName(self, "Import an ONNX model", self._dialog_dir(),
                                                  "ONNX models (*.onnx);;All files (*)")
            if not path:
                return False
        if self._import_thread is None:
            self._import_thread = Worker(self)
            self.document.undo_stack.indexChanged.connect(self._count_import_edit)
            self.document.project_replaced.connect(self._count_import_edit)
        self._import_jobs += 1
        job = self._import_jobs       # an abandoned import's late result is told apart by it
        self._import_pending = (job, path, self._import_edits)
        registry = self.document.registry
        QApplication.setOverrideCursor(Qt.CursorShape.BusyCursor)
        self.statusBar().showMessage(f"importing {os.path.basename(path)}…")
        self._import_thread.submit(lambda _post: import_onnx(path, registry=registry),
                                   lambda result: self._import_done(result, job))
        return True

    def import_running(self) -> bool:
        """True while an import started from this window has not ended."""
        return self._import_pending is not None

    def wait_for_import(self) -> None:
        """Block until the import under way has ended and its result is shown (tests, closing)."""
        if self._import_thread is not None:
            self._import_thread.wait()
        while self._import_pending is not None:
            QApplication.processEvents()

    def abandon_import(self) -> None:
        """Forget the import under way: its result, when it comes, opens nothing."""
        self._import_pending = None

    def _count_import_edit(self, *_args) -> None:
        self._import_edits += 1

    def _import_done(self, result, job) -> None:
        from blockflow.importing.errors import ImportFailure, UnsupportedOps
        from blockflow.optional import MissingPackage

        QApplication.restoreOverrideCursor()
        if self._import_pending is None or self._import_pending[0] != job:   # abandoned
            return
        _job, path, edits = self._import_pending
        self._import_pending = None
        self.statusBar().clearMessage()
        if isinstance(result, UnsupportedOps):
            head, _, rest = str(result).partition("\n")
            self._import_refused(head, rest.strip().splitlines())
            return
        if isinstance(result, (ImportFailure, MissingPackage)):
            self._import_refused(str(result), [])
            return
        if isinstance(result, BaseException):      # a bug in the import: its traceback is printed
            self._import_refused(f"{os.path.basename(path)} could not be imported: {type(result).__name__}: "
                                 f"{result} (a bug in blockflow, please report it)", [])
            return
        project, report = result
        # edited, or another project opened, while the import ran: the choice made before it
        # started does not cover that project
        if self._import_edits != edits and not (self._replace_asked(path) and self.maybe_save()):
            self.statusBar().showMessage(f"the import of {os.path.basename(path)} was set aside: "
                                         f"your project is kept", 10000)
            return
        self.document.open_imported(project)
        self.statusBar().showMessage(f"{report.lines()[0]} (not saved yet: Save As to keep it)", 15000)
        self.last_import_report = report

    def _replace_asked(self, path: str) -> bool:
        box = QMessageBox(QMessageBox.Icon.Question, "Open the imported model?",
                          literal(f"{os.path.basename(path)} is read. The open project changed while it was "
                                  f"being read: replace it with the imported model?"),
                          QMessageBox.Yes | QMessageBox.No, self)
        box.setDefaultButton(QMessageBox.No)
        box.exec()
        return box.clickedButton() is not None and box.clickedButton() == box.button(QMessageBox.Yes)

    def _import_refused(self, message: str, problems: list) -> None:
        box = QMessageBox(QMessageBox.Icon.Warning, "Cannot import the model", literal(message), parent=self)
        if problems:
            box.setDetailedText("\n".join(problems))
        self.last_import_refusal = (message, list(problems))
        box.exec()
