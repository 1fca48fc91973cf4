"""File > Import ONNX Model: an ONNX model opened as a new, unsaved project (docs/import.md),
through the same import as ``blockflow import onnx``. A mixin of MainWindow."""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QFileDialog, QMessageBox

from blockflow.gui.common.plaintext import literal

__all__ = ["ModelImportMixin"]


class ModelImportMixin:
    """Open an ONNX model as a project (see the module)."""

    def import_onnx_model(self, path: str | None = None) -> bool:
        """Import the ONNX model at ``path`` (asked when None) as the window's project; True when
        it was (False: refused, cancelled, or the unsaved work was kept)."""
        from blockflow.importing.errors import ImportFailure, UnsupportedOps
        from blockflow.importing.onnx_import import import_onnx
        from blockflow.optional import MissingPackage

        if not self.maybe_save():
            return False
        if path is None:
            path, _ = QFileDialog.getOpenFileName(self, "Import an ONNX model", self._dialog_dir(),
                                                  "ONNX models (*.onnx);;All files (*)")
            if not path:
                return False
        QApplication.setOverrideCursor(Qt.CursorShape.WaitCursor)
        try:
            project, report = import_onnx(path, registry=self.document.registry)
        except UnsupportedOps as exc:
            head, _, rest = str(exc).partition("\n")
            self._import_refused(head, rest.strip().splitlines())
            return False
        except (ImportFailure, MissingPackage) as exc:
            self._import_refused(str(exc), [])
            return False
        finally:
            QApplication.restoreOverrideCursor()
        self.document.open_imported(project)
        self.statusBar().showMessage(f"{report.lines()[0]} (not saved yet: Save As to keep it)", 15000)
        self.last_import_report = report
        return True

    def _import_refused(self, message: str, problems: list) -> None:
        box = QMessageBox(QMessageBox.Icon.Warning, "Cannot import the model", literal(message), parent=self)
        if problems:
            box.setDetailedText("\n".join(problems))
        self.last_import_refusal = (message, list(problems))
        box.exec()

