"""File > Import ONNX Model: an ONNX model opened as a new, unsaved project (docs/import.md),
through the same import as ``blockflow import onnx``. A mixin of MainWindow.

The import runs on a Worker thread (a large model takes seconds: ResNet-50 0.8 s, a 36,000-node
model about 15 s) while the window stays live; the project it makes replaces the open one when it
arrives. Should the open project have been edited in the meantime, the window asks again before it
is replaced: an import never loses work.
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

    #: the import under way: (path, what the open project was when it started), or None
    _import_pending = None
    _import_thread: Worker | None = None

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
        self._import_pending = (path, self._project_mark())
        registry = self.document.registry
        QApplication.setOverrideCursor(Qt.CursorShape.BusyCursor)
        self.statusBar().showMessage(f"importing {os.path.basename(path)}…")
        self._import_thread.submit(lambda _post: import_onnx(path, registry=registry), self._import_done)
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

    def _project_mark(self) -> tuple:
        doc = self.document
        return id(doc.project), doc.undo_stack.index(), doc.undo_stack.count()

    def _import_done(self, result) -> None:
        from blockflow.importing.errors import ImportFailure, UnsupportedOps
        from blockflow.optional import MissingPackage

        path, mark = self._import_pending
        self._import_pending = None
        QApplication.restoreOverrideCursor()
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
        # edited while the import ran: the choice made before it started no longer covers that
        if self._project_mark() != mark and not self.maybe_save():
            self.statusBar().showMessage(f"the import of {os.path.basename(path)} was set aside: "
                                         f"your project is kept", 10000)
            return
        self.document.open_imported(project)
        self.statusBar().showMessage(f"{report.lines()[0]} (not saved yet: Save As to keep it)", 15000)
        self.last_import_report = report

    def _import_refused(self, message: str, problems: list) -> None:
        box = QMessageBox(QMessageBox.Icon.Warning, "Cannot import the model", literal(message), parent=self)
        if problems:
            box.setDetailedText("\n".join(problems))
        self.last_import_refusal = (message, list(problems))
        box.exec()
