"""File > Export Model: the current page as a PyTorch module or an ONNX model (docs/export.md),
through the same table as ``blockflow export``. A mixin of MainWindow."""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QFileDialog, QMessageBox

from blockflow.gui.common.plaintext import literal
from blockflow.gui.main_window.savename import may_replace

__all__ = ["ModelExportMixin"]


class ModelExportMixin:
    """Export the current page's model (see the module)."""

    def export_model(self, fmt: str, path: str | None = None) -> list | None:
        """Write the current page in format ``fmt`` to ``path`` (asked when None); the paths
        written, or None when nothing was (refused, cancelled, or a package is missing)."""
        from blockflow.optional import MissingPackage
        from blockflow.export.formats import FORMATS, export_files
        from blockflow.export.errors import ExportError

        form = FORMATS[fmt]
        page = self.document.current_page
        if page.startswith("@"):
            self._export_refused(form.title, "A composite's definition is not a model by itself: open a "
                                             "page that uses it, and export that page.", [])
            return None
        if path is None:
            suggested = str(Path(self._dialog_dir()) / f"{_stem(page)}{form.suffix}")
            path, _ = QFileDialog.getSaveFileName(self, f"Export page '{page}' as a {form.title}", suggested,
                                                  f"{form.title} (*{form.suffix})")
            if not path:
                return None
        if not path.endswith(form.suffix):
            if not may_replace(self, path, path + form.suffix):
                return None
            path += form.suffix
        QApplication.setOverrideCursor(Qt.CursorShape.WaitCursor)
        try:
            written = export_files(fmt, self.document.project, page, path, registry=self.document.registry)
        except ExportError as exc:
            self._export_refused(form.title, str(exc), exc.problems)
            return None
        except MissingPackage as exc:
            self._export_refused(form.title, str(exc), [])
            return None
        except OSError as exc:
            self._export_refused(form.title, f"Cannot write {path}: {exc.strerror or exc}", [])
            return None
        finally:
            QApplication.restoreOverrideCursor()
        names = ", ".join(Path(p).name for p in written)
        self.statusBar().showMessage(f"exported page '{page}' as a {form.title}: {names}", 8000)
        return written

    def _export_refused(self, title: str, message: str, problems: list) -> None:
        box = QMessageBox(QMessageBox.Icon.Warning, f"Cannot export as a {title}", literal(message), parent=self)
        if problems:
            box.setDetailedText("\n".join(problems))
        self.last_export_refusal = (message, list(problems))
        box.exec()


def _stem(page: str) -> str:
    """A file name from a page name: what a file system takes everywhere."""
    kept = "".join(c if c.isalnum() or c in "-_." else "_" for c in page).strip("._")
    return kept[:80] or "model"
