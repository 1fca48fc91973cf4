"""Saving a project file atomically, keeping a backup of the version it replaces; its side
files (the temporary, the backup) never follow a link or replace a file blockflow did not write
(blockflow.ownfiles).
"""
from __future__ import annotations

import errno
import os
import stat
import time
from dataclasses import dataclass

from blockflow import ownfiles
from blockflow.errors import ProjectFileError
from blockflow.io.writer import dumps_library, dumps_project
from blockflow.project import Project

STALE_TEMPORARY_SECONDS = 60.0


def _remove_stale_temporaries(target: str) -> None:
    """Remove ``.NAME.xxxxxxxx.tmp`` files (of ``target`` and its backup) left by saves that
    were killed, once they are old enough not to belong to a save still running elsewhere."""
    directory = os.path.dirname(target) or "."
    names = {ownfiles.temporary_stem(os.path.basename(p)) for p in (target, backup_path(target))}
    now = time.time()
    try:
        entries = os.listdir(directory)
    except OSError:
        return
    for entry in entries:
        if not (entry.startswith(".") and entry.endswith(".tmp")):
            continue
        stem, _, token = entry[1:-4].rpartition(".")
        if stem not in names or len(token) != 8 or any(c not in "0123456789abcdef" for c in token):
            continue
        full = os.path.join(directory, entry)
        try:
            st = os.lstat(full)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and now - st.st_mtime > STALE_TEMPORARY_SECONDS:
            ownfiles.unlink_quietly(full)


#: the suffix of the backup kept of the previous version when a project file is overwritten
BACKUP_SUFFIX = ".bak"


def backup_path(path) -> str:
    """Where :func:`save_project` keeps the previous version of ``path`` (when that name holds
    nothing but its own earlier backup; else a variant, see :class:`SaveResult`)."""
    return os.fspath(path) + BACKUP_SUFFIX


@dataclass(frozen=True)
class SaveResult:
    """What :func:`save_project` did besides writing the file."""

    path: str                   #: the file written (as given)
    backup: str | None = None   #: where the previous version was kept (None: no backup made)
    notes: tuple = ()           #: things to tell the user: a backup kept under another name


def _keep_backup(target: str) -> tuple[ownfiles.Placed | None, str]:
    """Keep the current ``target`` as its backup before it is replaced: a hard link to it (a
    copy where links are not possible) made under a temporary name and moved onto the backup's
    name, so ``target`` exists at every moment. The backup's name holds blockflow's own earlier
    backup or nothing; a symlink, a folder or a file blockflow did not write there is left alone
    and the backup goes to a variant (``NAME-1.bak``). Returns (where it went, a note or "")."""
    wanted = backup_path(target)
    try:
        placed = ownfiles.link_own(target, wanted, suffix=BACKUP_SUFFIX)
    except ownfiles.OwnFileError as exc:
        return None, f"no backup of the previous version was kept: {exc}"
    except OSError as exc:
        if exc.errno != errno.ENAMETOOLONG:
            raise
        return None, (f"no backup of the previous version was kept: its name {wanted} would be longer "
                      f"than the file system allows")
    note = placed.note("the backup of the previous version") if placed.moved else ""
    return placed, note


def save_project(project: Project, path, *, backup: bool = True, library: bool = False) -> SaveResult:
    """Write ``project`` to ``path`` atomically.

    The text is written to a temporary file in the same directory (created exclusively, never
    through a link), flushed and fsynced, then moved onto ``path`` with ``os.replace`` and the
    directory fsynced. On any failure the old file is untouched and the temporary file removed.
    An existing file keeps its permission bits; a symlink is followed (the file it points to is
    replaced, the link stays). With ``backup`` (the default) the version being replaced is kept
    as ``path + ".bak"`` when that name is free or holds blockflow's own earlier backup, else
    under a variant (``NAME-1.bak``), which the result's ``notes`` tell. The project's
    ``base_dir`` becomes the file's folder (dataset blocks read their files from there). With
    ``library`` the project may have no pages: a library file of composites.
    Raises ProjectFileError if the project cannot be written, ``path`` cannot name a file (empty,
    ending in ``/``, a folder, a name too long) or the file system refuses.
    """
    name = os.fspath(path)
    problem = ownfiles.name_problem(name)
    if problem:
        raise ProjectFileError(name or "''", "", f"cannot save: {problem}")
    data = (dumps_library if library else dumps_project)(project, path=name).encode("utf-8")
    target = os.path.realpath(name)
    directory = os.path.dirname(target) or "."
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise ProjectFileError(name, "", f"cannot save: {exc.strerror or exc}") from None
    tmp = None
    kept, notes = None, []
    try:
        # 0o666 minus the umask, like any new file; exclusive, under a new name, never a link
        fd, tmp = ownfiles.create_temporary(directory, os.path.basename(target))
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
            if backup:
                kept, note = _keep_backup(target)
                if note:
                    notes.append(note)
        os.replace(tmp, target)
        tmp = None
    except OSError as exc:
        if kept is not None and not kept.replaced:    # a backup this failed save made: not needed
            ownfiles.withdraw(kept)
        raise ProjectFileError(name, "", f"cannot save: {exc.strerror or exc}") from exc
    finally:
        if tmp is not None:
            ownfiles.unlink_quietly(tmp)
    ownfiles.fsync_dir(directory)
    _remove_stale_temporaries(target)
    project.base_dir = os.path.dirname(os.path.abspath(name))   # where its data files now live
    return SaveResult(name, kept.path if kept is not None else None, tuple(notes))
