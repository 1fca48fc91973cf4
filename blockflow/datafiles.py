"""Data for dataset blocks: which batch a run wants, and the project's data files.

- :class:`DataRequest` is the ``data`` context a dataset block's ``forward`` receives: the run's
  ``step`` (a training step's number, 0 for a single run), ``split`` ("train", "test", "all") and
  ``seed`` (a training run's seed, 0 by default).
- :class:`DataFiles` is the ``files`` context (``infer`` and ``forward``): it reads ``.csv`` tables
  (a header row naming the columns; numbers only) and ``.npy``/``.npz`` arrays (never unpickling:
  an array of objects is refused) by a path relative to the project's folder. A path may not be
  absolute and may not leave that folder (``..``, or a symbolic link pointing out of it): a
  project file is data, and opening one must not read files its author chose elsewhere on the
  user's disk. What was read is kept by path, size and modification time, counted against the
  memory budget (the least recently used let go first: DataFiles says how).

Sizes are checked before anything of their size exists (docs/limits.md, "Data files"): a file
on disk is at most MAX_DATA_FILE_BYTES; one array at most spec.MAX_TENSOR_BYTES and all the
arrays of one file at most MAX_DATA_BYTES, judged from what the file declares (an .npz's zip
directory: its members' count and sizes; each .npy header: dtype and shape) and never trusting
it further (an array is read into the one buffer its header sized, and no further; a file
shorter than its header says is refused). A table is read in two streaming passes (count the
rows, then fill one float64 array), so it takes its final array's size and little more.
"""
from __future__ import annotations

import ast
import contextlib
import os
import struct
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from blockflow import spec
from blockflow.budget import ENV_VAR, format_size, memory_budget
from blockflow.errors import BlockflowError

__all__ = ["DataRequest", "DataFiles", "DataFileError", "PickledArray", "MAX_DATA_FILE_BYTES", "MAX_DATA_BYTES",
           "MAX_TABLE_LINE_CHARS", "MAX_NPZ_MEMBERS", "SPLITS", "read_npy_file"]

SPLITS = ("train", "test", "all")
#: the largest data file read (a bigger one is refused with a message)
MAX_DATA_FILE_BYTES = 1024 * 1024 * 1024
#: the most bytes the arrays of one data file may take together (an .npz decompressed, a table)
MAX_DATA_BYTES = 4 * 1024 ** 3
#: the most arrays one .npz file may hold
MAX_NPZ_MEMBERS = 10_000
#: the largest .npy header read (numpy's own default limit)
MAX_NPY_HEADER_BYTES = 10_000
_NPY_HEADER_MAX = 12 + MAX_NPY_HEADER_BYTES   # with the magic, version and length before it
# Bytes copied at a time from a compressed member into its array.
_READ_CHUNK = 1 << 20
# Numbers parsed from a table before they are copied into its array.
_TABLE_CHUNK = 1 << 16
#: The longest line of a table, in characters: the csv module makes a line's row whole, a string
#: per cell (about 30 bytes a character for short cells), so a 120 MB table of one row ran out of
#: 2 GB. A row of 4 Mi characters (200,000 cells of 20) takes about 170 MB.
MAX_TABLE_LINE_CHARS = 4 * 1024 * 1024


class DataFileError(BlockflowError, ValueError):
    """A data file cannot be used: where it is and what is wrong, in words."""


class PickledArray(DataFileError):
    """An .npy array of Python objects, which only unpickling could read."""


@dataclass(frozen=True)
class DataRequest:
    """What a run asks a dataset block for: batch ``step`` of ``split``; ``seed`` (the run's seed,
    when not 0) changes the shuffling of the batches."""

    step: int = 0
    split: str = "train"
    seed: int = 0


class DataFiles:
    """Reads data files inside ``base_dir`` (the project's folder).

    What was read is kept for the next compile or run (the editor compiles a page again at each
    edit), by path, size and modification time, and counted against the memory budget: a read
    that would take what is kept past the budget first lets the least recently used go. A
    compile's own files are the ones it read last, so what it lets go first is what no compile
    has read since; when even its own leave no room, they go too (a later read reads them again).
    Nothing is refused for what is kept: a file is refused only when it alone passes the budget.
    A file that changed lets its old contents go when it is read again."""

    def __init__(self, base_dir):
        self.base_dir = Path(base_dir).resolve()
        self._lock = threading.Lock()      # compiles and runs read on threads of their own
        self._kept: OrderedDict = OrderedDict()   # (kind, path) -> _Kept, least recently used first
        self._held = 0          # bytes of what is kept
        self._reading = 0       # bytes the reads under way have counted so far

    def __reduce__(self):
        # a copy (a deep-copied or pickled project keeps its DataFiles) reads the same folder with
        # nothing kept: what is kept is a cache, and its lock cannot be copied
        return type(self), (self.base_dir,)

    @property
    def held_bytes(self) -> int:
        """The bytes of the arrays kept (counted against the memory budget)."""
        return self._held

    def resolve(self, path: str) -> Path:
        """The file ``path`` names, checked to be inside the project's folder."""
        if not isinstance(path, str) or not path.strip():
            raise DataFileError("no file named: give a path relative to the project's folder")
        if "\x00" in path:
            raise DataFileError(f"{path!r} is not a file name")
        p = Path(path)
        if p.is_absolute() or (os.name == "nt" and p.drive):
            raise DataFileError(f"'{path}' is an absolute path; data files are named relative to the "
                                f"project's folder ({self.base_dir}) and must be inside it")
        full = (self.base_dir / p).resolve()
        try:
            full.relative_to(self.base_dir)
        except ValueError:
            raise DataFileError(f"'{path}' leads out of the project's folder ({self.base_dir}); data "
                                f"files must be inside it") from None
        if not full.is_file():
            raise DataFileError(f"'{path}': no such file in the project's folder ({self.base_dir})")
        return full

    def _cached(self, path: str, kind: str, read):
        full = self.resolve(path)
        st = full.stat()
        if st.st_size > MAX_DATA_FILE_BYTES:
            raise DataFileError(f"'{path}' is {st.st_size:,} bytes; the limit is {MAX_DATA_FILE_BYTES:,}")
        key, stamp = (kind, str(full)), (st.st_size, st.st_mtime_ns)
        with self._lock:
            kept = self._kept.get(key)
            if kept is not None and kept.stamp == stamp:
                self._kept.move_to_end(key)
                return kept.value
            if kept is not None:
                self._let_go(key)
        reading = _Reading(self)
        try:   # (not under the lock: a long read holds up no other)
            value = read(full, reading)
        finally:
            with self._lock:
                self._reading -= reading.bytes
        with self._lock:
            if key not in self._kept:     # (another thread may have read it meanwhile)
                self._kept[key] = _Kept(stamp, value, reading.bytes)
                self._held += reading.bytes
        return value

    def _make_room(self, nbytes: int) -> None:
        """Count ``nbytes`` a read is about to make, letting the least recently used files go
        while what is kept and what is being read would pass the memory budget."""
        budget, _ = memory_budget()
        with self._lock:
            self._reading += nbytes
            while self._kept and self._held + self._reading > budget:
                self._let_go(next(iter(self._kept)))

    def _let_go(self, key) -> None:
        self._held -= self._kept.pop(key).nbytes

    def table(self, path: str) -> tuple[list, np.ndarray]:
        """A .csv file as (column names, a float64 array of its rows)."""
        self.resolve(path)
        if not path.lower().endswith(".csv"):
            raise DataFileError(f"'{path}': a table is read from a .csv file")
        return self._cached(path, "csv", lambda full, room: _read_csv(path, full, room))

    def arrays(self, path: str) -> dict:
        """A .npz file's arrays by name, or a .npy file's array as ``{"x": array}``."""
        self.resolve(path)
        low = path.lower()
        if not (low.endswith(".npz") or low.endswith(".npy")):
            raise DataFileError(f"'{path}': arrays are read from .npy or .npz files")
        return self._cached(path, "npy", lambda full, room: _read_arrays(path, full, room))


class _Kept:
    """A file's contents as read, with the size and modification time it had then. (A plain
    class: every command imports this module, and a dataclass compiles its methods at import.)"""

    __slots__ = ("stamp", "value", "nbytes")

    def __init__(self, stamp: tuple, value, nbytes: int):
        self.stamp, self.value, self.nbytes = stamp, value, nbytes


class _Reading:
    """What one read of a DataFiles counts: called with the bytes of each array before it is made."""

    def __init__(self, files: DataFiles):
        self.files, self.bytes = files, 0

    def __call__(self, nbytes: int) -> None:
        self.bytes += nbytes
        self.files._make_room(nbytes)


def _size(nbytes: int) -> str:
    if nbytes < 2 ** 20:
        return f"{nbytes:,} bytes"
    unit, scale = ("MiB", 2 ** 20) if nbytes < 2 ** 30 else ("GiB", 2 ** 30)
    return f"{nbytes / scale:,.2f} {unit} ({nbytes:,} bytes)"


class _Total:
    """The bytes the arrays of one data file take so far, checked against the limits before
    anything of that size exists."""

    def __init__(self, name: str, held: int = 0, room=None):
        # held: bytes the caller already holds for the same run (the feeds read before this one);
        # room: called with each array's bytes once they pass (a DataFiles makes room for them)
        self.name, self.bytes, self.held, self.room = name, 0, held, room

    def add(self, nbytes: int, what: str) -> None:
        """Count ``nbytes`` more for ``what`` (an array, in words)."""
        if nbytes > spec.MAX_TENSOR_BYTES:
            raise DataFileError(f"'{self.name}': {what} would take {_size(nbytes)}; one array "
                                f"may take at most {_size(spec.MAX_TENSOR_BYTES)}")
        self.bytes += nbytes
        if self.bytes > MAX_DATA_BYTES:
            raise DataFileError(f"'{self.name}': its arrays would take {_size(self.bytes)} "
                                f"together ({what} brings them over); the arrays of one data "
                                f"file may take at most {_size(MAX_DATA_BYTES)}")
        # Nor more than a run may hold (a file small on disk can declare gigabytes): checked
        # here for `check` too, where no run is under way, and counted in a run's budget.
        budget, source = memory_budget()
        if self.bytes + self.held > budget:
            why = (f"{what} would take {_size(self.bytes)} and the feeds read before it "
                   f"{_size(self.held)}: together more than" if self.held else
                   f"its arrays would take {_size(self.bytes)} together ({what} brings them over), more than")
            raise DataFileError(f"'{self.name}': {why} the memory budget of {format_size(budget)} ({source}); "
                                f"raise it with --memory-budget SIZE or {ENV_VAR}")
        spec.reserve((nbytes,), np.uint8, f"'{self.name}': {what}")
        if self.room is not None:
            self.room(nbytes)


# ---------------------------------------------------------------------------------- tables


def _read_csv(name: str, full: Path, room):
    """A data file's table: (column names, float64 rows); the header row is required."""
    header, data = read_number_table(name, full, header="required", room=room)
    return header, data


def read_number_table(name: str, full, header: str = "optional", held: int = 0, room=None):
    """``full``'s CSV rows of numbers as (header or None, one read-only float64 array [rows,
    columns]), in two streaming passes: the header and the number of rows, then the numbers,
    straight into the one array they fill (its size checked in between, as an array of a data
    file). ``header``: "required" (the first filled row names the columns) or "optional" (a
    first row that is not all numbers is taken for one). ``held``: bytes already read for the
    same run, counted against the memory budget with the table's."""
    with _csv_reader(name, full) as reader:
        first = next((row for row in reader if _filled(row)), None)
        if first is None:
            raise DataFileError(f"'{name}' is empty")
        names = [c.strip() for c in first]
        if header == "required" or not _numeric(names):
            if not all(names) or len(set(names)) != len(names):
                raise DataFileError(f"'{name}': the first row must name every column, each once (found {names})")
            if _numeric(names):
                raise DataFileError(f"'{name}': the first row must be a header naming the columns (it holds numbers)")
        else:
            names = None
        n = sum(1 for row in reader if _filled(row)) + (names is None)
    if n == 0:
        raise DataFileError(f"'{name}' has a header but no rows")
    width = len(first)
    _Total(name, held, room).add(n * width * 8, f"its table of {n:,} rows x {width:,} columns (float64)")
    flat = np.empty(n * width, np.float64)
    done, numbers = 0, []
    with _csv_reader(name, full) as reader:
        if names is not None:
            next(row for row in reader if _filled(row))
        for row in reader:
            if not _filled(row):
                continue
            if len(row) != width:
                raise DataFileError(f"'{name}' line {reader.line_num}: {len(row)} values, the "
                                    f"first row has {width}" if names is None else
                                    f"'{name}' line {reader.line_num}: {len(row)} values, the "
                                    f"header names {width} columns")
            try:
                numbers.extend(map(float, row))
            except ValueError:
                bad = next(c for c in row if not _is_number(c))
                raise DataFileError(f"'{name}' line {reader.line_num}: {bad.strip()!r} is not a "
                                    "number") from None
            if len(numbers) >= _TABLE_CHUNK:
                if done + len(numbers) > flat.size:
                    raise DataFileError(f"'{name}' changed while it was read")
                flat[done:done + len(numbers)] = numbers
                done += len(numbers)
                numbers.clear()
    if done + len(numbers) != flat.size:
        raise DataFileError(f"'{name}' changed while it was read")
    flat[done:] = numbers
    data = flat.reshape(n, width)
    data.setflags(write=False)
    return names, data


def _filled(row: list) -> bool:
    """A row that is not blank (a blank one has only empty or white cells)."""
    return bool(row) and (bool(row[0].strip()) or any(c.strip() for c in row))


@contextlib.contextmanager
def _csv_reader(name: str, full: Path):
    """A csv reader of the file, read as it goes; undecodable text or a malformed row (in the
    caller's loop too) becomes a DataFileError."""
    import csv     # imported when a table is read: not on every command's start

    reader = None
    try:
        with open(full, encoding="utf-8-sig", newline="") as f:
            reader = csv.reader(_bounded_lines(name, f))
            yield reader
    except UnicodeDecodeError as exc:
        raise DataFileError(f"'{name}' is not UTF-8 text ({exc.reason})") from None
    except csv.Error as exc:
        line = f" line {reader.line_num}" if reader is not None else ""
        raise DataFileError(f"'{name}'{line}: not a table ({exc})") from None


def _bounded_lines(name: str, f):
    """``f``'s lines, each read no further than MAX_TABLE_LINE_CHARS and its line end: a longer
    one is a DataFileError naming it (the file's line number) before its row is made."""
    number = 0
    while True:
        line = f.readline(MAX_TABLE_LINE_CHARS + 2)       # room for "\r\n"
        if not line:
            return
        number += 1
        if len(line) > MAX_TABLE_LINE_CHARS and len(line.rstrip("\r\n")) > MAX_TABLE_LINE_CHARS:
            raise DataFileError(f"'{name}' line {number}: more than {MAX_TABLE_LINE_CHARS:,} characters, the "
                                f"most a line of a table may hold (save a wide table as .npy)")
        yield line


def _is_number(c: str) -> bool:
    try:
        float(c)
        return True
    except ValueError:
        return False


def _numeric(row) -> bool:
    return all(_is_number(c) for c in row)


# ---------------------------------------------------------------------------------- arrays


def _read_arrays(name: str, full: Path, room=None) -> dict:
    """An .npy file as {"x": array}, or an .npz file's arrays by name (told apart by their first
    bytes, as numpy does); ``room`` as for _Total."""
    with open(full, "rb") as f:
        start = f.read(6)
        f.seek(0)
        if start == b"\x93NUMPY":
            size = os.fstat(f.fileno()).st_size
            out = {"x": _read_npy(f, "its array", size, _Total(name, room=room), name)}
        elif start[:4] in (b"PK\x03\x04", b"PK\x05\x06"):
            from blockflow.npz_archive import read_npz    # zipfile and what it imports: 5 ms

            out = read_npz(name, f, room)
        else:
            out = None
    if out is not None:
        for a in out.values():
            a.setflags(write=False)
        return out
    raise DataFileError(f"'{name}' is not a numpy file (an .npy array or an .npz archive of them)")


def read_npy_file(f, name: str, held: int = 0) -> np.ndarray:
    """The array of the .npy file open as ``f`` (``name`` in messages), read as a dataset's is:
    its header parsed, never unpickled, its size checked against the limits, the memory budget
    and the file's length before anything of that size is allocated (with ``held`` bytes already
    read for the same run). DataFileError when it cannot be read; the array is writable."""
    return _read_npy(f, "its array", os.fstat(f.fileno()).st_size, _Total(name, held), name)


def _read_npy(f, what: str, available: int, total: _Total, name: str) -> np.ndarray:
    """The array whose .npy header and data ``f`` holds (``available`` bytes at most, header
    included); ``what`` names it in messages. Its size is checked before it is allocated, and
    exactly that many bytes are read."""
    dtype, shape, fortran, header = _npy_header(f, what, name)
    count = 1
    for d in shape:
        count *= d
    nbytes = count * dtype.itemsize
    total.add(nbytes, f"{what} ({dtype.name}{spec.shape_text(shape)})")
    if header + nbytes > available:
        raise DataFileError(f"'{name}': {what} is {dtype.name}{spec.shape_text(shape)}, {nbytes:,} bytes, "
                            f"but only {max(0, available - header):,} follow its header")
    out = np.empty(count, dtype)
    buf = memoryview(out.view(np.uint8)) if count else memoryview(b"")
    got = 0
    while got < nbytes:
        n = f.readinto(buf[got:got + _READ_CHUNK])
        if not n:
            raise DataFileError(f"'{name}': {what} ends after {got:,} of its {nbytes:,} bytes")
        got += n
    return out.reshape(shape, order="F" if fortran else "C")


def _npy_header(f, what: str, name: str):
    """(dtype, shape, fortran order, header length) of an .npy header; never unpickles."""
    head = f.read(10)
    if len(head) < 10 or head[:6] != b"\x93NUMPY":
        raise DataFileError(f"'{name}': {what} is not a numpy array (no .npy header)")
    major = head[6]
    if major == 1:
        length, size = struct.unpack("<H", head[8:10])[0], 10
    elif major in (2, 3):
        head += f.read(2)
        if len(head) < 12:
            raise DataFileError(f"'{name}': {what} ends in its header")
        length, size = struct.unpack("<I", head[8:12])[0], 12
    else:
        raise DataFileError(f"'{name}': {what} has an .npy format version ({major}) that numpy "
                            "does not write")
    if length > MAX_NPY_HEADER_BYTES:
        raise DataFileError(f"'{name}': {what} has a header of {length:,} bytes; the limit is "
                            f"{MAX_NPY_HEADER_BYTES:,}")
    raw = f.read(length)
    if len(raw) < length:
        raise DataFileError(f"'{name}': {what} ends in its header")
    try:
        fields = ast.literal_eval(raw.decode("utf-8" if major == 3 else "latin1"))
    except Exception:   # a header that is not a Python literal (or too deep for the parser)
        raise DataFileError(f"'{name}': {what} has a header numpy cannot have written") from None
    if (not isinstance(fields, dict) or set(fields) != {"descr", "fortran_order", "shape"}
            or not isinstance(fields["shape"], tuple)
            or not isinstance(fields["fortran_order"], bool)
            or not all(type(d) is int and d >= 0 for d in fields["shape"])):
        raise DataFileError(f"'{name}': {what} has a header numpy cannot have written "
                            f"({fields!r:.200})")
    try:
        dtype = np.lib.format.descr_to_dtype(fields["descr"])
    except Exception:   # whatever numpy makes of a description it does not know
        raise DataFileError(f"'{name}': {what} has an unknown dtype "
                            f"({fields['descr']!r:.100})") from None
    if dtype.hasobject:
        raise PickledArray(f"'{name}': {what} is an array of Python objects: it cannot be read "
                            f"without unpickling, which blockflow never does")
    if dtype.kind not in "biuf" or dtype.fields is not None or dtype.subdtype is not None:
        raise DataFileError(f"'{name}': {what} holds {dtype}, not numbers")
    shape = fields["shape"]
    # an empty array declares no bytes, so its size check passes whatever its other sizes are;
    # numpy then refused the shape in its own words (or OverflowError) when the array was made
    span = dtype.itemsize
    for d in shape:
        span *= max(d, 1)
    if len(shape) > 64 or span >= 2 ** 63:
        raise DataFileError(f"'{name}': {what} has a shape no numpy array can have "
                            f"({dtype.name}{spec.shape_text(shape):.100})")
    return dtype, shape, fields["fortran_order"], size + length
