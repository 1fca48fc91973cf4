"""Files blockflow writes on its own initiative: never through a link it did not make, never over
a file it did not write.

Some files are written without the user naming them: the picture drawn when there is no
display, autosaves and recovery notes, the backup kept when a project file is replaced, the
temporaries of atomic saves. They all go through this module:

1. the bytes go to a fresh temporary file in the target's folder, created with
   ``O_CREAT | O_EXCL | O_NOFOLLOW`` under an unpredictable name (nothing planted there is
   opened, let alone followed), then flushed and fsynced;
2. it becomes the target only when the target is absent (a hard link, which fails if a file
   appeared meanwhile) or holds blockflow's own earlier output (an atomic rename: a link or
   file there is replaced as a directory entry, never written through);
3. otherwise it goes to the first free variant (``NAME-1.png``, ``NAME-2.png``, ...), and the
   returned :class:`Placed` says where and why, for the caller to tell the user.

Ownership is never guessed from a name. A small ledger, ``own-files.json`` in blockflow's state
folder, records for each file written here its path and identity: device, inode, size and
modification time (ns). A path holds blockflow's own file only when ``lstat`` shows a regular
file with a recorded identity, so a symlink, a folder, or a file the user wrote or changed since
(new size or time) is never blockflow's own. When the ledger cannot be kept (a read-only home),
nothing counts as blockflow's own: files then go to new names, never over old ones.

The state folder is ``$BLOCKFLOW_STATE_DIR``, else ``$XDG_STATE_HOME/blockflow``, else
``~/.local/state/blockflow`` (``%LOCALAPPDATA%\\blockflow`` on Windows). Files the user names
(``-o``, Save As, ``train --save OUT``) do not come here: they are replaced as asked, and only
their side files (backup, temporaries) follow these rules.

A core module: the standard library only.
"""
from __future__ import annotations

import errno
import json
import logging
import os
import secrets
import stat
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field

__all__ = ["Placed", "OwnFileError", "write_own", "link_own", "create_temporary", "temporary_name", "temporary_stem",
           "is_own", "taken", "forget", "remove_own", "withdraw", "variant", "name_problem", "folder_problem",
           "special_kind", "state_dir", "MAX_VARIANTS", "LEDGER_MAX_FILES", "unlink_quietly", "fsync_dir"]

log = logging.getLogger(__name__)

#: How many variants (``NAME-1`` ... ``NAME-N``) are tried before giving up.
MAX_VARIANTS = 99
#: Files the ledger remembers (the oldest are forgotten first); each with its last 3 identities.
LEDGER_MAX_FILES = 2000
_IDENTITIES_PER_FILE = 3
_LEDGER = "own-files.json"
_LEDGER_FORMAT = "blockflow-own-files"
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_BINARY = getattr(os, "O_BINARY", 0)
# Longest part of a file name kept in a temporary's name: room for ".", ".xxxxxxxx.tmp".
_TEMP_STEM_BYTES = 200


class OwnFileError(OSError):
    """No file could be written: the target and every variant are taken."""

    def __str__(self):
        return self.strerror or super().__str__()


@dataclass(frozen=True)
class Placed:
    """Where a file written on blockflow's initiative went."""

    path: str       #: the file written
    wanted: str     #: where it was meant to go
    reason: str = ""  #: why not there ("" when it is there): "is a symbolic link", ...
    replaced: bool = False  #: True when it replaced blockflow's own earlier file (else: a new name)
    identity: tuple = field(default=(), repr=False, compare=False)  #: (dev, inode, size, mtime ns)

    @property
    def moved(self) -> bool:
        return self.path != self.wanted

    def note(self, what: str = "the file") -> str:
        """One line for the user: where ``what`` went, and why not where it was meant to go."""
        if not self.moved:
            return f"wrote {what} to {self.path}"
        return (f"{self.wanted} {self.reason}, so blockflow left it alone and wrote {what} to "
                f"{self.path} instead")


# --------------------------------------------------------------------------------------------
# Names


def name_problem(path, *, replaces: bool = True) -> str:
    """Why ``path`` cannot name a file to write ("" when it can): empty, ending in a separator,
    naming a folder, a name too long for the file system, a folder that does not exist. With
    ``replaces`` (a writer that puts a new file in the name's place: every save and export),
    also naming a device, a named pipe or a socket, which the new file would replace: a save to
    /dev/null run as root put a regular file in its place. Followed through links, for every
    writer: a link to one (/dev/stdout) names the device, which the user means to write to."""
    name = os.fspath(path)
    if not name:
        return "the file name is empty"
    seps = (os.sep, os.altsep) if os.altsep else (os.sep,)
    if name.endswith(seps):
        return f"the path ends in '{name[-1]}', which names a folder: give a file name"
    base = os.path.basename(name)
    if base in (".", ".."):
        return f"'{base}' names a folder: give a file name"
    directory = os.path.dirname(os.path.abspath(name))
    limit = _name_max(directory)
    size = len(os.fsencode(base))
    if size > limit:
        return f"the file name is {size} bytes long; this file system allows at most {limit}"
    if os.path.isdir(name):
        return "it is a folder"
    if not os.path.isdir(directory):
        return f"the folder {directory} does not exist"
    kind = special_kind(name) if replaces else ""
    if kind:
        return f"it is {kind}, not a file: writing would replace it with one (give a file name)"
    return ""


def folder_problem(path, *, follow: bool = True) -> str:
    """Why no file can be made where ``path`` (followed through links; with ``follow=False`` the
    name itself, a link there replaced) is ("" when one can): the folder is read-only, not the
    user's, or refuses new files (/proc). Found by making and removing an empty temporary there,
    as a save does first."""
    target = os.path.realpath(path) if follow else os.path.abspath(path)
    directory = os.path.dirname(target) or "."
    try:
        fd, tmp = create_temporary(directory, os.path.basename(target))
    except OSError as exc:
        return f"cannot write in the folder {directory}: {exc.strerror or exc}"
    try:
        os.close(fd)
    except OSError:     # an empty file: nothing was to be written
        pass
    finally:
        unlink_quietly(tmp)
    return ""


def special_kind(path) -> str:
    """What ``path`` (followed through links; or an open file's descriptor) is when it exists and
    is neither a regular file nor a folder: "a character device", "a named pipe"...; "" otherwise."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return ""
    for test, kind in ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISFIFO, "a named pipe"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return kind
    return "" if stat.S_ISREG(mode) or stat.S_ISDIR(mode) else "not a regular file"


def _name_max(directory: str) -> int:
    try:
        return int(os.pathconf(directory, "PC_NAME_MAX"))
    except (AttributeError, ValueError, OSError):
        return 255


def variant(path, n: int, suffix: str | None = None) -> str:
    """The ``n``-th variant of ``path``: ``-n`` before ``suffix`` (default: the last suffix),
    ``pic.png`` -> ``pic-1.png``, ``p.bflow.json.bak`` -> ``p.bflow.json-1.bak``."""
    name = os.fspath(path)
    directory, base = os.path.split(name)
    if suffix is None:
        stem, dot, ext = base.rpartition(".")
        suffix = dot + ext if stem else ""
    if suffix and base.endswith(suffix) and len(base) > len(suffix):
        base = f"{base[:-len(suffix)]}-{n}{suffix}"
    else:
        base = f"{base}-{n}"
    return os.path.join(directory, base)


def temporary_stem(target_base: str) -> str:
    """The part of a temporary's name taken from its target's name ``target_base``: all of it,
    or its first 200 bytes' worth of characters for a very long name (so a temporary's name fits
    the file system's limit wherever the target's does)."""
    stem = target_base[:_TEMP_STEM_BYTES]
    while len(os.fsencode(stem)) > _TEMP_STEM_BYTES:
        stem = stem[:-1]
    return stem


def temporary_name(directory: str, target_base: str, token: str) -> str:
    """The temporary file of a write onto ``target_base``: ``.STEM.token.tmp`` in ``directory``."""
    return os.path.join(directory, f".{temporary_stem(target_base)}.{token}.tmp")


def create_temporary(directory: str, target_base: str, mode: int = 0o666) -> tuple[int, str]:
    """A new, empty temporary file for a write onto ``target_base`` in ``directory``: opened
    for writing with ``O_CREAT | O_EXCL | O_NOFOLLOW`` (``mode`` minus the umask) under a random
    name. Returns ``(fd, path)``. Raises OSError when the folder refuses."""
    last = None
    for _ in range(100):
        candidate = temporary_name(directory, target_base, secrets.token_hex(4))
        try:
            fd = os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _BINARY, mode)
        except FileExistsError as exc:   # taken (by anything, a symlink too): another name
            last = exc
            continue
        return fd, candidate
    raise OSError(errno.EEXIST, f"cannot create a temporary file in {directory}") from last


# --------------------------------------------------------------------------------------------
# The ledger of blockflow's own files


def state_dir() -> str:
    """blockflow's state folder (where the ledger lives); not created here."""
    env = os.environ.get("BLOCKFLOW_STATE_DIR")
    if env:
        return env
    if os.name == "nt":
        base = os.environ.get("LOCALAPPDATA") or os.path.join(os.path.expanduser("~"), "AppData", "Local")
        return os.path.join(base, "blockflow")
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "blockflow")


def _identity(st: os.stat_result) -> list:
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns]


def _private_dir(directory: str) -> bool:
    """Make ``directory`` (0o700) if needed; True when it is a real folder of this user."""
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        st = os.lstat(directory)
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode):
        return False
    return not hasattr(os, "getuid") or st.st_uid == os.getuid()


_warned: set = set()


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        log.warning(message)


def _open_ledger():
    """(files, lock fd): the ledger's ``files`` (path -> identities) under an exclusive lock
    against other blockflow processes; (None, None) when there is no usable ledger."""
    directory = state_dir()
    if not _private_dir(directory):
        _warn_once(f"blockflow cannot keep its list of own files in {directory} (not a folder of "
                   f"this user that it can write): files it writes on its own go to new names")
        return None, None
    lock_fd = None
    try:
        lock_fd = os.open(os.path.join(directory, _LEDGER + ".lock"),
                          os.O_RDWR | os.O_CREAT | _NOFOLLOW | _BINARY, 0o600)
        try:
            import fcntl
        except ImportError:      # no advisory locks here: best effort
            pass
        else:
            fcntl.flock(lock_fd, fcntl.LOCK_EX)
        return _read_ledger(os.path.join(directory, _LEDGER)), lock_fd
    except OSError as exc:
        if lock_fd is not None:
            os.close(lock_fd)
        _warn_once(f"blockflow cannot keep its list of own files in {directory} "
                   f"({exc.strerror or exc}): files it writes on its own go to new names")
        return None, None


#: the ledger's threads: flock serialises the editor's UI thread and its autosave's worker (two
#: open files of one process lock each other out), but where there is no fcntl (Windows) this is
#: all that keeps one thread's update from undoing the other's
_THREADS = threading.Lock()


@contextmanager
def _ledger(write: bool):
    """The ledger's ``files`` dict, locked; written back on exit when ``write``. Yields None
    when there is no usable ledger."""
    with _THREADS:
        with _ledger_locked(write) as files:
            yield files


@contextmanager
def _ledger_locked(write: bool):
    files, lock_fd = _open_ledger()
    try:
        yield files
        if write and files is not None:
            directory = state_dir()
            try:
                _write_ledger(directory, os.path.join(directory, _LEDGER), files)
            except OSError as exc:
                _warn_once(f"blockflow cannot update its list of own files in {directory} "
                           f"({exc.strerror or exc}): files it writes on its own go to new names")
    finally:
        if lock_fd is not None:
            os.close(lock_fd)


def _read_ledger(path: str) -> dict:
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _BINARY)
    except FileNotFoundError:
        return {}
    with os.fdopen(fd, "rb") as f:
        raw = f.read(64 * 1024 * 1024)
    try:
        doc = json.loads(raw.decode("utf-8"))
        files = doc["files"] if doc.get("format") == _LEDGER_FORMAT else None
        if not isinstance(files, dict):
            raise ValueError("no files")
        return {p: [list(i) for i in ids if isinstance(i, list) and len(i) == 4]
                for p, ids in files.items() if isinstance(p, str) and isinstance(ids, list)}
    except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError):
        _warn_once(f"blockflow's list of own files {path} is damaged; starting a new one")
        return {}


def _write_ledger(directory: str, path: str, files: dict) -> None:
    while len(files) > LEDGER_MAX_FILES:
        del files[next(iter(files))]
    data = json.dumps({"format": _LEDGER_FORMAT, "version": 1, "files": files},
                      separators=(",", ":")).encode("utf-8")
    fd, tmp = create_temporary(directory, _LEDGER, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        tmp = None
    finally:
        if tmp is not None:
            unlink_quietly(tmp)


def _key(path: str) -> str:
    directory, base = os.path.split(os.path.abspath(path))
    return os.path.join(os.path.realpath(directory), base)


def _record(path: str, identity: list) -> None:
    with _ledger(write=True) as files:
        if files is None:
            return
        key = _key(path)
        ids = [i for i in files.pop(key, []) if i != identity]
        files[key] = (ids + [identity])[-_IDENTITIES_PER_FILE:]   # re-inserted: the newest last


def _status(path: str, files: dict | None) -> str:
    """"" when ``path`` is free, "own" when it holds blockflow's own file, else why not."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return ""
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:     # no file can have it, nor a longer variant
            raise
        return f"cannot be checked ({exc.strerror or exc})"
    if stat.S_ISLNK(st.st_mode):
        return "is a symbolic link"
    if stat.S_ISDIR(st.st_mode):
        return "is a folder"
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    if files is not None and _identity(st) in files.get(_key(path), ()):
        return "own"
    return "is a file blockflow did not write"


def is_own(path) -> bool:
    """Does ``path`` hold a file blockflow wrote on its own, unchanged since?"""
    with _ledger(write=False) as files:
        return _status(os.fspath(path), files) == "own"


def taken(path) -> str:
    """Why ``path`` is not free for blockflow's own file ("" when nothing is there or it holds
    blockflow's own earlier file): "is a symbolic link", "is a file blockflow did not write", ..."""
    with _ledger(write=False) as files:
        status = _status(os.fspath(path), files)
    return "" if status == "own" else status


def forget(path) -> None:
    """Drop ``path`` from the ledger (its file was removed or handed to the user)."""
    with _ledger(write=True) as files:
        if files is not None:
            files.pop(_key(os.fspath(path)), None)


def remove_own(path) -> bool:
    """Remove ``path`` if it holds blockflow's own file (True when removed); anything else there
    is left alone. The ledger forgets it either way."""
    name = os.fspath(path)
    with _ledger(write=True) as files:
        own = _status(name, files) == "own"
        if files is not None:
            files.pop(_key(name), None)
        if own:
            try:
                os.unlink(name)
            except OSError:
                return False
    return own


def withdraw(placed: Placed) -> bool:
    """Remove the file ``placed`` put there, if it is still exactly that file (True when
    removed): to undo a side file of an operation that then failed."""
    try:
        same = tuple(_identity(os.lstat(placed.path))) == placed.identity and bool(placed.identity)
    except OSError:
        return False
    if same:
        unlink_quietly(placed.path)
        forget(placed.path)
    return same


# --------------------------------------------------------------------------------------------
# Writing


def unlink_quietly(path: str) -> None:
    """Remove ``path`` if it can be removed (a temporary of ours); never raise."""
    try:
        os.unlink(path)
    except OSError:
        pass


def fsync_dir(directory: str) -> None:
    """Make a rename or link in ``directory`` durable, where the system allows it."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # e.g. Windows cannot open folders
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _candidates(path: str, suffix: str | None, variants: bool):
    yield path
    if variants:
        for n in range(1, MAX_VARIANTS + 1):
            yield variant(path, n, suffix)


def _place(tmp: str, wanted: str, suffix: str | None, variants: bool) -> Placed:
    """Move the finished temporary ``tmp`` onto ``wanted`` or its first usable variant."""
    identity = _identity(os.lstat(tmp))
    reason = ""
    for candidate in _candidates(wanted, suffix, variants):
        for _attempt in range(3):       # a file may appear between the check and the move
            with _ledger(write=False) as files:
                status = _status(candidate, files)
            if status not in ("", "own"):
                break
            _record(candidate, identity)    # first: a crash after the move leaves it known
            if status == "own":
                os.replace(tmp, candidate)
                return Placed(candidate, wanted, reason, True, tuple(identity))
            try:
                os.link(tmp, candidate)     # fails if anything appeared there meanwhile
            except FileExistsError:
                continue
            except OSError:                 # no hard links on this file system: rename
                if os.path.lexists(candidate):
                    continue
                os.replace(tmp, candidate)
                return Placed(candidate, wanted, reason, False, tuple(identity))
            unlink_quietly(tmp)
            return Placed(candidate, wanted, reason, False, tuple(identity))
        else:
            status = "keeps changing"
        if candidate == wanted:
            reason = status
    if not variants:
        raise OwnFileError(errno.EEXIST, f"{wanted} {reason}: nothing was written")
    raise OwnFileError(errno.EEXIST, f"{wanted} {reason}, and none of {variant(wanted, 1, suffix)} to "
                                     f"{variant(wanted, MAX_VARIANTS, suffix)} is free: nothing was written")


def write_own(path, data, *, suffix: str | None = None, variants: bool = True,
              mode: int = 0o666) -> Placed:
    """Write ``data`` (bytes, or a function given the open binary file) as blockflow's own file
    at ``path``, or at its first usable variant (``-1`` before ``suffix``, default the last
    suffix) when ``path`` holds anything but blockflow's own earlier output. ``variants=False``:
    no variant; an OwnFileError instead. Returns where it went. Raises OSError (OwnFileError when
    every name is taken); on failure nothing is left behind."""
    wanted = os.path.abspath(os.fspath(path))
    directory = os.path.dirname(wanted)
    fd, tmp = create_temporary(directory, os.path.basename(wanted), mode)
    try:
        with os.fdopen(fd, "wb") as f:
            if callable(data):
                data(f)
            else:
                f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        unlink_quietly(tmp)
        raise
    return _settle(tmp, wanted, suffix, variants)


def _settle(tmp: str, wanted: str, suffix, variants: bool) -> Placed:
    """Put the finished temporary ``tmp`` in place (see _place) and make that durable; on
    failure the temporary is removed."""
    try:
        placed = _place(tmp, wanted, suffix, variants)
    except BaseException:
        unlink_quietly(tmp)
        raise
    fsync_dir(os.path.dirname(wanted))
    return placed


def link_own(source, path, *, suffix: str | None = None, variants: bool = True) -> Placed:
    """Make ``path`` (or its first usable variant) blockflow's own copy of the file ``source``:
    a hard link to it, or a copy where links are not possible. ``source`` itself is never moved
    or changed. Returns where it went; raises OSError as :func:`write_own`."""
    wanted = os.path.abspath(os.fspath(path))
    directory, base = os.path.split(wanted)
    tmp = None
    try:
        for _ in range(100):
            candidate = temporary_name(directory, base, secrets.token_hex(4))
            try:
                os.link(source, candidate)      # never through anything at candidate
            except FileExistsError:
                continue
            except OSError:                     # no hard links here: an exclusive copy
                fd, candidate = create_temporary(directory, base)
                tmp = candidate
                with os.fdopen(fd, "wb") as dst, open(source, "rb") as src:
                    while chunk := src.read(1 << 20):
                        dst.write(chunk)
                    dst.flush()
                    os.fsync(dst.fileno())
            tmp = candidate
            break
        else:
            raise OSError(errno.EEXIST, f"cannot create a temporary file in {directory}")
    except BaseException:
        if tmp is not None:
            unlink_quietly(tmp)
        raise
    return _settle(tmp, wanted, suffix, variants)
