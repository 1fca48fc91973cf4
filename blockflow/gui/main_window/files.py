"""The window's files: open, save, export, the recent-files menu, autosave and recovery, and the
window's own settings (geometry and dock layout). A mixin of MainWindow: it uses the window's
document, settings, status bar and menus."""
from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from PySide6.QtCore import QSettings, Qt, QTimer
from PySide6.QtWidgets import QFileDialog, QInputDialog, QMessageBox

from blockflow.errors import BlockflowError
from blockflow.gui.common.plaintext import literal, mnemonic_free
from blockflow.gui.document.autosave import DEFAULT_INTERVAL_SECONDS, Autosaver, find_recoveries
from blockflow.gui.document.document import stacked_blocks
from blockflow.gui.main_window.layout import restore_layout, save_layout
from blockflow.gui.main_window.savename import may_replace

__all__ = ["FilesMixin", "sample_projects", "read_recent_files", "PROJECT_SUFFIX", "PROJECT_FILTER",
           "MAX_RECENT"]

PROJECT_SUFFIX = ".bflow.json"
PROJECT_FILTER = "blockflow projects (*.bflow.json);;JSON files (*.json);;All files (*)"
MAX_RECENT = 10
#: the source tree's root (sample_projects/ and docs/ when run from a checkout)
SOURCE_ROOT = Path(__file__).resolve().parents[3]


def sample_projects() -> list[Path]:
    """The sample projects shipped in the package (blockflow.sample_projects), sorted by name."""
    try:
        root = Path(str(resources.files("blockflow.sample_projects")))
    except ModuleNotFoundError:
        # An editable install maps blockflow.sample_projects to the source tree's folder, but a
        # folder without __init__.py under a mapped package is not importable there.
        root = SOURCE_ROOT / "sample_projects"
    if not root.is_dir():
        return []
    return sorted((p for p in root.iterdir() if p.name.endswith(PROJECT_SUFFIX)), key=lambda p: p.name)


def read_recent_files(settings: QSettings) -> list[str]:
    """The recent-files list, most recent first. Read back from a file, a one-element list comes
    back as a str and an empty one as None (docs/qt.md §4)."""
    value = settings.value("recentFiles", [])
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]



class FilesMixin:
    """Files, autosave and settings of MainWindow (see the module)."""

    def _build_autosave(self) -> None:
        """Unsaved work is autosaved every N seconds (File > Autosave Interval…, 60 by default;
        $BLOCKFLOW_AUTOSAVE_SECONDS wins) and before runs and training; see offer_recovery."""
        seconds = self.settings.value("autosaveSeconds", DEFAULT_INTERVAL_SECONDS)
        try:
            seconds = float(seconds)
        except (TypeError, ValueError):
            seconds = DEFAULT_INTERVAL_SECONDS
        env = os.environ.get("BLOCKFLOW_AUTOSAVE_SECONDS")
        self.autosaver = Autosaver(self.document, interval_seconds=float(env) if env else seconds, parent=self)
        self.autosaver.failed.connect(lambda msg: self.statusBar().showMessage(msg, 15000))
        self.autosaver.moved.connect(lambda msg: self.statusBar().showMessage(msg, 15000))
        self.session.run_started.connect(lambda _kind: self.autosaver.autosave_now())

    def set_autosave_interval(self, seconds: int | None = None) -> None:
        if seconds is None:
            current = int(self.autosaver.interval) if self.autosaver.interval > 0 else 0
            seconds, ok = QInputDialog.getInt(self, "Autosave", "Autosave unsaved work every N seconds (0: never):",
                                              current, 0, 3600)
            if not ok:
                return
        self.autosaver.set_interval(seconds)
        self.settings.setValue("autosaveSeconds", int(seconds))
        self.statusBar().showMessage("autosave off" if seconds <= 0 else f"autosaving unsaved work every {seconds} s",
                                     6000)

    def offer_recovery(self) -> bool:
        """After a crash: offer the autosaves editors left behind, newest first. True when one
        was recovered into this window."""
        for rec in find_recoveries():
            if rec.problem:
                box = QMessageBox(QMessageBox.Warning, "Recovery", "blockflow found an autosave it cannot read:\n\n"
                                  + rec.describe(), QMessageBox.Discard | QMessageBox.Ignore, self)
                box.setTextFormat(Qt.PlainText)     # the note's title and file name are the file's
                if box.exec() == QMessageBox.Discard:
                    rec.discard()
                continue
            choice = self._ask_recovery(rec)
            if choice == "discard":
                rec.discard()
            elif choice == "recover" and self._recover(rec):
                return True
        return False

    def _ask_recovery(self, rec) -> str:
        """Recover, discard or keep ``rec`` for later: "recover", "discard" or "later"."""
        text = "blockflow did not close normally. It autosaved unsaved work:\n\n" + rec.describe()
        if rec.refused:     # the note names a file that is not this work's project: never saved over
            text += (f"\n\nIts recovery note {rec.note_file.name} names {rec.original} as the project it "
                     f"came from, but {rec.refused}. blockflow will not save over that file: the work is "
                     "recovered as an untitled project, and Save asks where to put it.")
        text += "\n\nRecover it? (Discard deletes the autosave; Later keeps it for the next start.)"
        box = QMessageBox(QMessageBox.Warning if rec.refused else QMessageBox.Question, "Recover unsaved work?",
                          text, QMessageBox.NoButton, self)
        box.setTextFormat(Qt.PlainText)
        recover = box.addButton("Recover as Untitled" if rec.refused else "Recover", QMessageBox.AcceptRole)
        discard = box.addButton("Discard", QMessageBox.DestructiveRole)
        box.addButton("Later", QMessageBox.RejectRole)
        box.setDefaultButton(recover)
        box.exec()
        clicked = box.clickedButton()
        return "recover" if clicked is recover else "discard" if clicked is discard else "later"

    def _recover(self, rec) -> bool:
        """Take ``rec``'s work into this window, as unsaved work of its project, or untitled when
        its note is refused (checked again now: the file may have changed while the offer was up)."""
        rec.recheck()
        try:
            project = rec.load()
        except BlockflowError as exc:
            QMessageBox.warning(self, "Recovery", literal(f"The autosave could not be loaded: {exc}"))
            return False
        self.document.recover(project, rec.target)
        self.autosaver.supersede(rec)     # the old one goes once this window's own autosave is written
        self.autosaver.autosave_now()
        said = f"recovered {rec.describe()}; save it to keep it"
        if not self.autosaver.wait():     # (or once the work is saved): the only copy on disk till then
            said += f"; this window could not autosave it, so the old autosave {rec.project_file.name} is kept"
        if rec.refused:
            said += f" (untitled: its note {rec.note_file.name} was refused, {rec.refused})"
        self.statusBar().showMessage(said, 20000)
        return True

    # ------------------------------------------------------------------------- settings
    def _restore_settings(self) -> None:
        restore_layout(self)

    def save_settings(self) -> None:
        save_layout(self)
        self.settings.sync()

    def recent_files(self) -> list[str]:
        return read_recent_files(self.settings)

    def add_recent(self, path: str) -> None:
        path = str(Path(path).resolve())
        files = [path] + [f for f in self.recent_files() if f != path]
        self.settings.setValue("recentFiles", files[:MAX_RECENT])
        self.settings.sync()
        self._fill_recent_menu()

    def _fill_recent_menu(self) -> None:
        menu = self.recent_menu
        menu.clear()
        files = self.recent_files()
        for i, path in enumerate(files):
            name = mnemonic_free(Path(path).name)
            act = menu.addAction(f"&{i + 1}  {name}" if i < 9 else name)
            act.setData(path)
            act.setToolTip(literal(path))
            act.setStatusTip(path)
            act.setEnabled(Path(path).is_file())
            act.triggered.connect(lambda _c=False, p=path: self.open_file(p))
        if files:
            menu.addSeparator()
            clear = menu.addAction("Clear Menu")
            clear.triggered.connect(self._clear_recent)
        else:
            none = menu.addAction("No recent files")
            none.setEnabled(False)

    def _clear_recent(self) -> None:
        self.settings.setValue("recentFiles", [])
        self._fill_recent_menu()

    # ------------------------------------------------------------------------- files
    def maybe_save(self) -> bool:
        """Ask about unsaved changes; True when it is fine to go on (saved or discarded)."""
        if not self.document.dirty:
            return True
        name = Path(self.document.path).name if self.document.path else "Untitled"
        answer = QMessageBox.question(
            self, "Unsaved changes", literal(f"Save the changes to “{name}” before closing it?"),
            QMessageBox.Save | QMessageBox.Discard | QMessageBox.Cancel, QMessageBox.Save)
        if answer == QMessageBox.Save:
            return self.save()
        return answer == QMessageBox.Discard

    def new_file(self) -> None:
        if self.maybe_save():
            self.document.new()

    def _dialog_dir(self) -> str:
        if self.document.path:
            return str(Path(self.document.path).parent)
        recent = self.recent_files()
        return str(Path(recent[0]).parent) if recent else str(Path.cwd())

    def open_file(self, path: str | None = None) -> bool:
        """Open ``path`` (or ask for one); a file that fails to load leaves everything as it was."""
        if not self.maybe_save():
            return False
        if path is None:
            path, _ = QFileDialog.getOpenFileName(self, "Open project", self._dialog_dir(), PROJECT_FILTER)
            if not path:
                return False
        if not self._open(path, as_copy=False):
            return False
        self.add_recent(path)
        self.statusBar().showMessage(f"Opened {path}", 5000)
        return True

    def _spread_stacked(self) -> str:
        """Lay out the blocks stacked on one spot on every page (a file without positions puts
        them all at [0, 0]) as one undo step each; what was done, in words ("" for nothing)."""
        moved = {}
        for page in list(self.document.project.pages):
            if stacked_blocks(page):          # (by the page: looking each name up is a scan)
                moved[page.name] = len(self.document.spread_stacked(page.name))
        if not moved:
            return ""
        n = sum(moved.values())
        where = ", ".join(f"'{p}'" for p in moved)
        return (f"Laid out {n:,} blocks that were stacked on one spot (the file gives them no positions) "
                f"on page{'s' if len(moved) > 1 else ''} {where}; Edit > Undo puts them back")

    def _on_project_opened(self) -> None:
        spread = self._spread_stacked()
        if spread:      # after the "Opened ..." message of whoever opened it
            QTimer.singleShot(0, lambda: self.statusBar().showMessage(spread, 20000))

    def open_sample(self, path: str) -> bool:
        """Open a copy of a shipped sample: it gets no file name, so Save asks where to put it."""
        if not self.maybe_save() or not self._open(path, as_copy=True):
            return False
        self.statusBar().showMessage(f"Opened the sample {Path(path).name} (Save As to keep your changes)",
                                     8000)
        return True

    def _open(self, path: str, as_copy: bool) -> bool:
        try:
            self.document.open(path, as_copy=as_copy)
        except (BlockflowError, OSError) as exc:
            QMessageBox.critical(self, "Cannot open project", literal(f"The project could not be opened.\n\n{exc}"))
            return False
        return True

    def save(self) -> bool:
        if not self.document.path:
            return self.save_as()
        return self._save_to(self.document.path)

    def save_as(self) -> bool:
        if self.document.path:
            suggested = self.document.path
        else:
            title = self.document.project.metadata.get("title") or "untitled"
            stem = "".join(c if c.isalnum() or c in "-_" else "_" for c in title.lower()).strip("_")
            suggested = str(Path(self._dialog_dir()) / f"{stem or 'untitled'}{PROJECT_SUFFIX}")
        path, _ = QFileDialog.getSaveFileName(self, "Save project as", suggested, PROJECT_FILTER)
        if not path:
            return False
        if not path.endswith(PROJECT_SUFFIX):
            named = (path[:-5] if path.endswith(".json") else path) + PROJECT_SUFFIX
            if not may_replace(self, path, named):
                return False
            path = named
        return self._save_to(path)

    def _save_to(self, path: str) -> bool:
        old_dir = self.document.project.base_dir
        try:
            saved = self.document.save(path)
        except (BlockflowError, OSError) as exc:
            QMessageBox.critical(self, "Cannot save project", literal(f"The project was not saved.\n\n{exc}"))
            return False
        self.add_recent(saved)
        notes = self.document.save_notes
        self.statusBar().showMessage("; ".join([f"Saved {saved}", *notes]), 15000 if notes else 5000)
        left = self.document.data_files_left_behind(old_dir)
        if left:      # its dataset blocks read files next to it: they stayed in the old folder
            answer = QMessageBox.question(
                self, "Data files", literal("The project's dataset blocks read these files next to the project, "
                                            f"but they are in {old_dir}:\n\n" + "\n".join(left)
                                            + "\n\nCopy them next to the project?"),
                QMessageBox.Yes | QMessageBox.No, QMessageBox.Yes)
            if answer == QMessageBox.Yes:
                try:
                    copied = self.document.copy_data_files(left, old_dir)
                except OSError as exc:
                    QMessageBox.warning(self, "Data files", literal(f"Copying failed: {exc}"))
                else:
                    self.statusBar().showMessage(f"Saved {saved}; copied {len(copied)} data file(s) next to it", 8000)
        return True

    def export(self, kind: str) -> bool:
        """Draw the current page to a PNG or SVG file (the same drawing as `blockflow render`)."""
        from blockflow.gui.canvas.render import render_page

        page = self.document.current_page
        base = Path(self.document.path).name[: -len(PROJECT_SUFFIX)] if self.document.path and \
            self.document.path.endswith(PROJECT_SUFFIX) else "diagram"
        suggested = str(Path(self._dialog_dir()) / f"{base}-{page}.{kind}")
        path, _ = QFileDialog.getSaveFileName(self, f"Export page as {kind.upper()}", suggested,
                                              f"{kind.upper()} images (*.{kind})")
        if not path:
            return False
        if not path.lower().endswith("." + kind):
            if not may_replace(self, path, f"{path}.{kind}"):
                return False
            path += "." + kind
        try:
            render_page(self.document.project, page, path, registry=self.document.registry)
        except (BlockflowError, OSError) as exc:
            QMessageBox.critical(self, "Cannot export", literal(exc))
            return False
        self.statusBar().showMessage(f"Exported page '{page}' to {path}", 5000)
        return True

