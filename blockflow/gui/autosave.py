"""Autosave and crash recovery.

While a project has unsaved changes, the editor writes it every N seconds (and before anything
that could crash: a run, training) to a recovery folder, as a project file plus a small JSON
note saying where it came from. A clean close, a save, or discarding the changes removes them.
If the editor dies instead (a crash, a kill, a power cut), the files stay; the next start finds
them (:func:`find_recoveries`), says what they hold and offers to recover exactly that state.

Recovery files are written with the same atomic save as projects, so an autosave interrupted by
the crash itself leaves the previous autosave intact. The folder is ``$BLOCKFLOW_RECOVERY_DIR``
or the platform's application data folder (``.../blockflow/recovery``).
"""
from __future__ import annotations

import json
import os
import secrets
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QObject, QStandardPaths, QTimer, Signal

from ..errors import ProjectFileError
from ..project_io import load_project, save_project

__all__ = ["Autosaver", "Recovery", "find_recoveries", "recovery_dir", "DEFAULT_INTERVAL_SECONDS"]

DEFAULT_INTERVAL_SECONDS = 60
_SUFFIX = ".bflow.json"
_NOTE = ".recovery.json"


def recovery_dir() -> Path:
    """Where recovery files live (created on first use)."""
    env = os.environ.get("BLOCKFLOW_RECOVERY_DIR")
    if env:
        return Path(env)
    base = QStandardPaths.writableLocation(QStandardPaths.AppDataLocation) or str(Path.home() / ".blockflow")
    return Path(base) / "recovery"


def _remove(*files: Path) -> None:
    for f in files:
        try:
            f.unlink()
        except OSError:
            pass


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True


@dataclass
class Recovery:
    """An autosave left by an editor that did not close cleanly."""

    project_file: Path
    note_file: Path
    original: str | None      # the file the project was opened from (None: untitled)
    saved_at: float
    title: str
    pages: int
    blocks: int
    problem: str = ""         # why it cannot be recovered (a damaged file), if it cannot

    def describe(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.saved_at)) if self.saved_at else "?"
        where = self.original or "an untitled project"
        if self.problem:
            return f"{where}, autosaved {when}: cannot be recovered ({self.problem})"
        return (f"{where}, autosaved {when}: {self.pages} page{'s' if self.pages != 1 else ''}, "
                f"{self.blocks} block{'s' if self.blocks != 1 else ''}")

    def load(self):
        """The autosaved project (its data files are looked up next to the original file)."""
        project = load_project(self.project_file)
        project.base_dir = os.path.dirname(os.path.abspath(self.original)) if self.original else None
        return project

    def discard(self) -> None:
        _remove(self.project_file, self.note_file)


def find_recoveries(directory: Path | None = None) -> list[Recovery]:
    """Autosaves of editors that are no longer running, newest first."""
    directory = Path(directory) if directory is not None else recovery_dir()
    if not directory.is_dir():
        return []
    host = socket.gethostname()
    out = []
    for note_file in directory.glob("*" + _NOTE):
        stem = note_file.name[:-len(_NOTE)]
        project_file = directory / (stem + _SUFFIX)
        try:
            note = json.loads(note_file.read_text(encoding="utf-8"))
            if not isinstance(note, dict):
                raise ValueError("not an object")
        except (OSError, ValueError) as exc:
            out.append(Recovery(project_file, note_file, None, 0.0, stem, 0, 0, f"unreadable note: {exc}"))
            continue
        pid = note.get("pid")
        if note.get("host") == host and isinstance(pid, int) and _alive(pid):
            continue      # that editor is still running: its autosave is not an orphan
        original = note.get("original") if isinstance(note.get("original"), str) else None
        saved_at = note.get("saved_at") if isinstance(note.get("saved_at"), (int, float)) else 0.0
        rec = Recovery(project_file, note_file, original, float(saved_at), str(note.get("title", stem)), 0, 0)
        try:
            project = load_project(project_file)
            rec.pages = len(project.pages)
            rec.blocks = sum(len(p.nodes) for p in project.pages)
        except ProjectFileError as exc:
            rec.problem = exc.problem or str(exc)
        out.append(rec)
    out.sort(key=lambda r: r.saved_at, reverse=True)
    return out


class Autosaver(QObject):
    """Autosaves one Document while it has unsaved changes."""

    autosaved = Signal(str)      # the recovery file written
    failed = Signal(str)         # why an autosave could not be written

    def __init__(self, document, directory: Path | None = None, interval_seconds: float | None = None,
                 parent=None):
        super().__init__(parent)
        self.document = document
        self.directory = Path(directory) if directory is not None else recovery_dir()
        if interval_seconds is None:
            env = os.environ.get("BLOCKFLOW_AUTOSAVE_SECONDS")
            interval_seconds = float(env) if env else DEFAULT_INTERVAL_SECONDS
        self.stem = f"autosave-{os.getpid()}-{secrets.token_hex(3)}"
        self.project_file = self.directory / (self.stem + _SUFFIX)
        self.note_file = self.directory / (self.stem + _NOTE)
        self._written_index = None     # the undo index of the last autosave
        self._timer = QTimer(self)
        self._timer.timeout.connect(self.autosave_now)
        self.set_interval(interval_seconds)
        stack = document.undo_stack
        stack.cleanChanged.connect(self._on_clean_changed)
        document.project_replaced.connect(self._on_replaced)

    def set_interval(self, seconds: float) -> None:
        """Autosave every ``seconds`` (0 or less: never on a timer)."""
        self.interval = float(seconds)
        if self.interval > 0:
            self._timer.start(int(self.interval * 1000))
        else:
            self._timer.stop()

    def autosave_now(self) -> bool:
        """Write the recovery files if there are changes not yet autosaved. True when written."""
        doc = self.document
        if not doc.dirty:
            return False
        index = (id(doc.project), doc.undo_stack.index(), doc.undo_stack.count())
        if index == self._written_index and self.project_file.exists():
            return False
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            save_project(doc.project, self.project_file, backup=False)
            # save_project moved the project's data folder to the recovery folder: put it back
            doc.project.base_dir = os.path.dirname(os.path.abspath(doc.path)) if doc.path else None
            note = {"original": doc.path, "saved_at": time.time(), "title": doc.title.rstrip(" *"),
                    "pid": os.getpid(), "host": socket.gethostname()}
            tmp = self.note_file.with_name(self.note_file.name + ".tmp")
            tmp.write_text(json.dumps(note), encoding="utf-8")
            os.replace(tmp, self.note_file)
        except (OSError, ProjectFileError) as exc:
            self.failed.emit(f"autosave failed: {exc}")
            return False
        self._written_index = index
        self.autosaved.emit(str(self.project_file))
        return True

    def discard(self) -> None:
        """Remove this editor's recovery files (after a save, a clean close, discarding changes)."""
        _remove(self.project_file, self.note_file)
        self._written_index = None

    def _on_clean_changed(self, clean: bool) -> None:
        if clean:
            self.discard()

    def _on_replaced(self) -> None:
        self.discard()
