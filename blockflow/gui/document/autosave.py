"""Autosave and crash recovery.

While a project has unsaved changes, the editor writes it every N seconds (and as anything that
could crash starts: a run, training; written alongside it, see Autosaver) to a recovery folder,
as a project file plus a small JSON note saying where it came from. A clean close, a save, or discarding the changes removes them.
If the editor dies instead (a crash, a kill, a power cut), the files stay; the next start finds
them (:func:`find_recoveries`), says what they hold and offers to recover exactly that state.

Recovery files are blockflow's own files (blockflow.ownfiles): each is written to a fresh
temporary file and renamed over the previous autosave, so an autosave interrupted by the crash
itself leaves the previous one intact, and a symlink or a file planted at an autosave's name is
never followed or replaced (the autosave moves to a new name instead, and says so). A note that
cannot be trusted (a time of 1e300 or NaN, a pid that is not one) is skipped with a line in the
log; the other recoveries are still offered. The folder is ``$BLOCKFLOW_RECOVERY_DIR`` or the
platform's application data folder (``.../blockflow/recovery``).

Recovered work is saved where its note says it came from only when that is the very file the
autosave was made from: the note records the file's identity (device, inode, size, modification
time) when it is written, and recovery compares it with the file the name holds then. A note
naming any other file (another project, a file that is no project, a name in the recovery folder,
a relative name, a file that is gone, or a project saved again since by someone else) is refused,
saying why (:attr:`Recovery.refused`), and its work is recovered untitled: Save then asks where.
"""
from __future__ import annotations

import json
import logging
import math
import os
import secrets
import socket
import stat
import threading
import time
import weakref
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QObject, QStandardPaths, QTimer, Signal

from blockflow import ownfiles
from blockflow.errors import ProjectFileError
from blockflow.io import rules
from blockflow.io.project_io import dumps_project, loads_project
from blockflow.gui.common.worker import Worker
from blockflow.gui.document.snapshots import project_snapshot

__all__ = ["Autosaver", "Recovery", "find_recoveries", "recovery_dir", "DEFAULT_INTERVAL_SECONDS"]

DEFAULT_INTERVAL_SECONDS = 60
_SUFFIX = ".bflow.json"
_NOTE = ".recovery.json"
#: the latest time a note may carry (the end of year 9999: what a clock can show)
_LATEST = 253402300799.0
#: the largest note read (one is a few hundred bytes: its longest field is a file name)
MAX_NOTE_BYTES = 64 * 1024
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)

log = logging.getLogger(__name__)


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


class _Unreadable(OSError):
    """A recovery file that is not read: not a regular file, too big, another user's."""


def _read_regular(path: Path, limit: int) -> bytes:
    """The bytes of ``path`` if it is a regular file of at most ``limit`` bytes that this user
    owns. A file blockflow did not write may be in the recovery folder: a symbolic link (to
    /dev/zero: an endless read) or a named pipe (whose open and read wait for a writer forever)
    is never followed or read. Raises _Unreadable (or OSError) saying why not."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        if os.path.islink(path):
            raise _Unreadable(f"{path.name} is a symbolic link") from None
        raise _Unreadable(f"{path.name}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _Unreadable(f"{path.name} is not a regular file")
        if hasattr(os, "getuid") and st.st_uid != os.getuid():
            raise _Unreadable(f"{path.name} belongs to another user (uid {st.st_uid})")
        if st.st_size > limit:
            raise _Unreadable(f"{path.name} is {st.st_size:,} bytes; the limit is {limit:,}")
        data = f.read(limit + 1)
    if len(data) > limit:
        raise _Unreadable(f"{path.name} is more than {limit:,} bytes; the limit is {limit:,}")
    return data


def _load_recovered(path: Path):
    """The project autosaved at ``path`` (read as :func:`_read_regular` allows)."""
    try:
        data = _read_regular(path, rules.MAX_FILE_BYTES)
    except OSError as exc:
        raise ProjectFileError(str(path), "", f"cannot read the autosave: {exc}") from None
    return loads_project(data, str(path))


def _identity_of(st: os.stat_result) -> list:
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns]


def _identity(path) -> list | None:
    """The identity of the regular file ``path`` names (a link followed), None when it names none:
    what a note records of the project autosaved, to know that file again at recovery."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return _identity_of(st) if stat.S_ISREG(st.st_mode) else None


def _target_problem(original: str | None, identity, directory: Path) -> str:
    """Why recovered work may not be saved to ``original``, the file its note names ("" when it
    may): only the file the autosave was made from, unchanged since, is the work's project."""
    if original is None:
        return ""
    if not os.path.isabs(original):       # it would name a file in whatever folder the editor runs
        return f"{original} is not an absolute path"
    if os.path.dirname(os.path.realpath(original)) == os.path.realpath(directory):
        return f"{original} is in the recovery folder"
    try:
        st = os.stat(original)
    except (OSError, ValueError) as exc:
        return f"{original} cannot be found ({getattr(exc, 'strerror', None) or exc})"
    if not stat.S_ISREG(st.st_mode):
        return f"{original} is not a file"
    if not (isinstance(identity, list) and len(identity) == 4
            and all(type(v) is int and v >= 0 for v in identity)):
        return "the note does not record which file the work was autosaved from"
    if _identity_of(st) != identity:
        return (f"{original} is not the file the work was autosaved from (it was saved again or replaced "
                "since, or the note names another file)")
    return ""


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
    identity: list | None = None   # the note's record of the original file (see _identity)
    refused: str = ""         # why the work may not be saved to ``original`` (it is recovered untitled)

    @property
    def target(self) -> str | None:
        """Where the recovered work is saved: its original file, or None (untitled) when refused."""
        return None if self.refused else self.original

    def recheck(self) -> None:
        """Compare the original file with the note's record again (the offer may have been open
        for hours): a file replaced meanwhile is refused too."""
        self.refused = _target_problem(self.original, self.identity, self.note_file.parent)

    def describe(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.saved_at)) if self.saved_at else "?"
        where = self.original or "an untitled project"
        if self.problem:
            return f"{where}, autosaved {when}: cannot be recovered ({self.problem})"
        return (f"{where}, autosaved {when}: {self.pages} page{'s' if self.pages != 1 else ''}, "
                f"{self.blocks} block{'s' if self.blocks != 1 else ''}")

    def load(self):
        """The autosaved project (its data files are looked up next to its target, none when
        it is recovered untitled)."""
        project = _load_recovered(self.project_file)
        project.base_dir = os.path.dirname(self.target) if self.target else None
        return project

    def discard(self) -> None:
        """Remove the note, and the autosave only when blockflow wrote it (ownfiles' ledger) or
        it is no file at all (a link, a pipe: removing the entry loses nothing). A note planted
        or left beside a project of the user's (a recovery folder pointed at a project folder)
        must not make Discard delete that project; once its note is gone it is not offered."""
        if not ownfiles.remove_own(self.project_file):
            try:
                regular = stat.S_ISREG(os.lstat(self.project_file).st_mode)
            except OSError:
                regular = True      # nothing there (or nothing we may look at): nothing to do
            if not regular:
                _remove(self.project_file)
        _remove(self.note_file)


def _note_problem(note) -> str:
    """Why a recovery note's fields cannot be trusted ("" when they can)."""
    if not isinstance(note, dict):
        return "it is not a JSON object"
    saved_at = note.get("saved_at")
    if isinstance(saved_at, bool) or not isinstance(saved_at, (int, float)):
        return f"its time saved_at is not a number ({type(saved_at).__name__})"
    if not (math.isfinite(saved_at) and 0 <= saved_at <= _LATEST):
        return f"its time saved_at {saved_at!r} is not a time a clock can show"
    pid = note.get("pid")
    if isinstance(pid, bool) or not isinstance(pid, int) or not 0 < pid < 2 ** 31:
        return f"its process id pid {pid!r} is not one"
    for key in ("host", "title"):
        if not isinstance(note.get(key, ""), str):
            return f"its {key} is not a string"
    original = note.get("original")
    if original is not None and (not isinstance(original, str) or not original or "\0" in original):
        return "its original file name is not a file name"
    return ""


def find_recoveries(directory: Path | None = None) -> list[Recovery]:
    """Autosaves of editors that are no longer running, newest first. A note that cannot be
    read is listed with its problem (to be discarded); a note whose fields cannot be trusted is
    skipped, with a warning in the log."""
    directory = Path(directory) if directory is not None else recovery_dir()
    if not directory.is_dir():
        return []
    host = socket.gethostname()
    out = []
    for note_file in directory.glob("*" + _NOTE):
        stem = note_file.name[:-len(_NOTE)]
        project_file = directory / (stem + _SUFFIX)
        try:
            note = json.loads(_read_regular(note_file, MAX_NOTE_BYTES).decode("utf-8"))
            if not isinstance(note, dict):
                raise ValueError("not an object")
        except (OSError, ValueError, RecursionError) as exc:
            out.append(Recovery(project_file, note_file, None, 0.0, stem, 0, 0, f"unreadable note: {exc}"))
            continue
        problem = _note_problem(note)
        if problem:
            log.warning("skipped the recovery note %s: %s", note_file, problem)
            continue
        pid = note["pid"]
        if note.get("host") == host and _alive(pid):
            continue      # that editor is still running: its autosave is not an orphan
        rec = Recovery(project_file, note_file, note.get("original"), float(note["saved_at"]),
                       note.get("title", stem), 0, 0, identity=note.get("identity"))
        rec.recheck()
        try:
            project = _load_recovered(project_file)
            rec.pages = len(project.pages)
            rec.blocks = sum(len(p.nodes) for p in project.pages)
        except ProjectFileError as exc:
            rec.problem = exc.problem or str(exc)
        out.append(rec)
    out.sort(key=lambda r: r.saved_at, reverse=True)
    return out


@dataclass
class _Pending:
    """One autosave under way: the copy it writes and what its note says, taken on the UI thread."""

    project: object
    original: str | None
    identity: list | None  # the original file's identity as the copy was taken (see _identity)
    title: str
    index: tuple          # the document's state it was taken at: (project, edits seen)
    generation: int       # the saver's generation then: a discard since makes it obsolete


class Autosaver(QObject):
    """Autosaves one Document while it has unsaved changes.

    The project is copied on the UI thread (snapshots.project_snapshot: 15 ms for 10,000
    blocks) and written on a worker thread of the saver's own: writing the text took the UI
    thread 0.4 s for 10,000 blocks and 5 s for 100,000, at every interval and before every run.
    A discard (a save, a clean close, a new project) that comes while one is being written wins:
    the writing is dropped, or its files removed if they were already there. The autosave a run
    or training starts is written alongside it: a crash of the whole process in the first 0.3 s
    (10,000 blocks; 3 s at 100,000) leaves the autosave before it, at most an interval old."""

    autosaved = Signal(str)      # the recovery file written
    failed = Signal(str)         # why an autosave could not be written
    moved = Signal(str)          # the autosave took new names: why (something else was at its own)

    def __init__(self, document, directory: Path | None = None, interval_seconds: float | None = None,
                 parent=None):
        super().__init__(parent)
        # held weakly: a document freed together with its saver (the last reference being this
        # one) would clear its undo stack, whose cleanChanged then called into a half-freed saver
        self._document = weakref.ref(document)
        self.directory = Path(directory) if directory is not None else recovery_dir()
        if interval_seconds is None:
            env = os.environ.get("BLOCKFLOW_AUTOSAVE_SECONDS")
            interval_seconds = float(env) if env else DEFAULT_INTERVAL_SECONDS
        # the names and the generation: changed by the worker (new names) and the UI thread
        # (a discard) under this lock, so that no autosave lands after the discard that ends it
        self._lock = threading.Lock()
        self._generation = 0
        self._new_stem()
        # the undo stack's changes seen: what names a state of the document. Its index and count
        # do not: a move merged into its gesture's step, an undo then another edit, keep them
        self._edits = 0
        self._written_index = None     # the state of the last autosave
        self._pending_index = None     # the state of the autosave under way
        self._finished: list = []      # outcomes the worker left for the UI thread (see _finish)
        self._superseded: list = []    # recoveries to remove once their work is safe (supersede)
        self._worker = Worker(self)
        self._timer = QTimer(self)
        self._timer.timeout.connect(self.autosave_now)
        self.set_interval(interval_seconds)
        stack = document.undo_stack
        stack.cleanChanged.connect(self._on_clean_changed)
        stack.indexChanged.connect(self._on_index_changed)
        document.project_replaced.connect(self._on_replaced)

    @property
    def document(self):
        """The document autosaved (None once it is gone)."""
        return self._document()

    def set_interval(self, seconds: float) -> None:
        """Autosave every ``seconds`` (0 or less: never on a timer)."""
        self.interval = float(seconds)
        if self.interval > 0:
            self._timer.start(int(self.interval * 1000))
        else:
            self._timer.stop()

    def _new_stem(self) -> None:
        self.stem = f"autosave-{os.getpid()}-{secrets.token_hex(3)}"
        self.project_file = self.directory / (self.stem + _SUFFIX)
        self.note_file = self.directory / (self.stem + _NOTE)

    def autosave_now(self) -> bool:
        """Start writing the recovery files if there are changes not yet autosaved (nor being
        autosaved). True when started; ``autosaved`` or ``failed`` says how it ended, and
        ``wait()`` waits for it."""
        doc = self.document
        if doc is None or not doc.dirty:
            return False
        index = (id(doc.project), self._edits)
        if index == self._pending_index or index == self._written_index and self.project_file.exists():
            return False
        # the file's identity now, with the copy: one saved over by someone else while this is
        # written is not the file this work came from, and its note must not say it is
        original = os.path.abspath(doc.path) if doc.path else None
        job = _Pending(project_snapshot(doc.project), original, _identity(original) if original else None,
                       doc.title.rstrip(" *"), index, self._generation)
        self._pending_index = index
        self._worker.submit(lambda _post: self._write(job), self._finish)
        return True

    def wait(self) -> bool:
        """Block until the autosaves started have been written (or have failed), their signals
        emitted: for what must not go on before the work is on disk (a recovery's old files are
        removed only after this window's own autosave) and for tests. True when the document as
        it is now is autosaved."""
        self._worker.wait()
        self._finish()
        doc = self.document
        return (doc is not None and self._written_index == (id(doc.project), self._edits)
                and self.project_file.exists())

    def supersede(self, recovery: Recovery) -> None:
        """Remove ``recovery``, the autosave of a crashed editor whose work this document took
        back, once that work is safe without it: this saver's own autosave of it written, or
        the work saved or let go (discard). Not before: while this saver cannot write (a full
        disk), the old files are the only copy on disk, and stay for the next start."""
        self._superseded.append(recovery)

    def _drop_superseded(self) -> None:
        done, self._superseded = self._superseded, []
        for recovery in done:
            recovery.discard()

    def _write(self, job: _Pending) -> None:
        """On the worker thread: write ``job``, and leave what happened for _finish. Whatever it
        raises is its outcome too, left in its place among the others: a report read out of
        order (a later job's outcome already there) or wait() must not lose it."""
        try:
            outcome = self._written(job)
        except BaseException as exc:     # no memory for a huge project's text, a bug
            log.exception("autosave failed")
            outcome = None, f"autosave failed: {exc}", []
        with self._lock:
            self._finished.append((job, *outcome))

    def _written(self, job: _Pending) -> tuple:
        """The project file's text, then both files: (recovery file or None, problem or "",
        notes on new names)."""
        try:
            data = dumps_project(job.project, path=str(self.project_file)).encode("utf-8")
        except ProjectFileError as exc:
            return None, f"autosave failed: {exc}", []
        moves = []
        with self._lock:
            if job.generation != self._generation:
                return None, "", []     # discarded meanwhile: nothing to keep
            try:
                self.directory.mkdir(parents=True, exist_ok=True)
                for _attempt in range(5):
                    note = {"original": job.original, "identity": job.identity,
                            "saved_at": time.time(), "title": job.title,
                            "pid": os.getpid(), "host": socket.gethostname()}
                    try:    # both names are this editor's own files, or free: else two new names
                        ownfiles.write_own(self.project_file, data, variants=False)
                        ownfiles.write_own(self.note_file, json.dumps(note).encode("utf-8"), variants=False)
                        break
                    except ownfiles.OwnFileError as exc:
                        old = self.project_file
                        ownfiles.remove_own(self.project_file)
                        self._new_stem()
                        moves.append(f"autosave: {exc.strerror or exc}; autosaving to {self.project_file.name} "
                                     f"instead of {old.name}")
                else:
                    raise OSError(f"no free name for an autosave in {self.directory}")
            except OSError as exc:
                return None, f"autosave failed: {exc}", moves
            return str(self.project_file), "", moves

    def _finish(self, _result=None) -> None:
        """On the UI thread (the worker's report, or wait()): the signals of the autosaves that
        ended, in order (each job leaves its outcome, see _write)."""
        with self._lock:
            done, self._finished = self._finished, []
        for job, written, problem, moves in done:
            if self._pending_index == job.index:
                self._pending_index = None
            for message in moves:
                self.moved.emit(message)
            if job.generation != self._generation:
                continue        # let go by a discard (a save, a close): what came of it is no news
            if problem:
                self.failed.emit(problem)
            elif written is not None:
                self._written_index = job.index
                self._drop_superseded()
                self.autosaved.emit(written)

    def discard(self) -> None:
        """Remove this editor's recovery files (after a save, a clean close, discarding changes):
        only while they are still the files it wrote. An autosave still being written is dropped."""
        with self._lock:
            self._generation += 1
            ownfiles.remove_own(self.project_file)
            ownfiles.remove_own(self.note_file)
        self._written_index = None
        self._pending_index = None
        self._drop_superseded()

    def _on_index_changed(self, _index: int) -> None:
        self._edits += 1

    def _on_clean_changed(self, clean: bool) -> None:
        if clean:
            self.discard()

    def _on_replaced(self) -> None:
        self.discard()
