"""Reading a Placeholder's feed from a file: a .npy array or a numeric .csv table (a header row
allowed). The CLI's ``--feed NAME=FILE`` and the inspector's "Load from file…" both read a .npy
file with read_npy; the inspector's read_feed_file then checks the array against the Placeholder's
dtype and shape with a message saying what is wrong (the CLI leaves that to the run's own check).

Two CSV readers remain, on purpose: the CLI's (datafiles.read_number_table) streams a table of any
length into one array whose size is checked against the memory budget before it exists; the
inspector's (read_csv_table, below) reads a small table whole, accepting ``,``, ``;``, tab or
space separators and ``#`` comments, and names the line and column of a bad cell.

Loading never executes code: an .npy is read by datafiles.read_npy_file, which parses its header as a
literal and checks its size before allocating. Plain numpy: must not import Qt.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from blockflow.spec import shape_text

__all__ = ["FEED_FILTER", "FeedFileError", "read_feed_file", "read_npy", "read_csv_table"]

#: the file dialog's filter
FEED_FILTER = "Arrays (*.npy *.csv);;NumPy arrays (*.npy);;CSV tables (*.csv);;All files (*)"
#: The most read_csv_table reads, in bytes and in rows: it holds the text, its lines and numpy's
#: parse at once, about 60 times the bytes for a column of short numbers (a 16 MB column took
#: 1 GB and 7 s on the editor's UI thread; a larger one, or /dev/zero, ran out of memory).
MAX_TABLE_BYTES = 16 * 1024 * 1024
MAX_TABLE_ROWS = 1_000_000


class FeedFileError(ValueError):
    """Why a file cannot be read as a feed (the message names no file: the caller does)."""


def read_feed_file(path, dtype: str, shape) -> np.ndarray:
    """The array in ``path`` as a feed of ``dtype`` and ``shape`` (None or -1: any size), or
    FeedFileError (a ValueError) with the reason. A CSV table of one row or one column also feeds
    a vector, and a single cell a scalar."""
    path = Path(path)
    suffix = path.suffix.lower()
    shape = tuple(None if d is None or d == -1 else int(d) for d in shape)
    try:
        # the editor reads files only: a named pipe would hang its UI thread until written to,
        # a device never end (the command line's --feed still reads the shell's pipes)
        if path.exists() and not path.is_file():
            raise FeedFileError("it is not a regular file")
        if suffix == ".npy":
            arr = read_npy(path)
        elif suffix == ".csv":
            arr = _fit_table(read_csv_table(path), shape)
        else:
            raise FeedFileError(f"'{path.name}' is neither a .npy nor a .csv file")
    except OSError as exc:
        raise FeedFileError(f"cannot read it: {exc.strerror or exc}") from None
    if arr.dtype.kind not in "biuf":
        raise FeedFileError(f"the file holds {arr.dtype} values, not numbers")
    if arr.ndim != len(shape) or any(d is not None and d != n for d, n in zip(shape, arr.shape)):
        raise FeedFileError(f"the file holds an array of shape {list(arr.shape)}; the Placeholder expects "
                         f"{shape_text(shape)}" + (" (? is any size)" if None in shape else ""))
    return _cast(arr, np.dtype(dtype))


def read_npy(path, held: int = 0) -> np.ndarray:
    """The array in the .npy file ``path``, never unpickling; OSError when it cannot be read,
    FeedFileError when it holds no plain array, or one larger than the limits or the memory
    budget allow with ``held`` bytes already read (judged from its header, before anything of
    that size is allocated)."""
    from blockflow.datafiles import DataFileError, PickledArray, read_npy_file

    name = Path(path).name
    with open(path, "rb") as f:
        start = f.read(6)
        if start[:4] in (b"PK\x03\x04", b"PK\x05\x06"):
            raise FeedFileError("not a .npy array (a .npz archive? save one array with np.save)")
        if start != b"\x93NUMPY":
            raise FeedFileError("not a valid .npy file (" + ("it is empty)" if not start else "no .npy header)"))
        f.seek(0)
        try:
            return read_npy_file(f, name, held)
        except PickledArray:
            raise FeedFileError("it holds Python objects (pickled), which are never loaded: save a numeric "
                                "array") from None
        except DataFileError as exc:   # its words name the file: the feed's caller does that
            raise FeedFileError(str(exc).removeprefix(f"'{name}': ")) from None


def read_csv_table(path) -> np.ndarray:
    """The numbers of a small CSV table as a 2-D float64 array (a header row skipped); OSError
    when it cannot be read, FeedFileError naming the line and column of what is wrong."""
    with open(path, "rb") as f:
        data = f.read(MAX_TABLE_BYTES + 1)     # never more: a device or a pipe may not end
    if len(data) > MAX_TABLE_BYTES:
        raise FeedFileError(f"the table is more than {MAX_TABLE_BYTES // 1024 ** 2} MiB, the most the editor reads "
                            f"from a .csv: save it as .npy, or feed it with blockflow run --feed")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise FeedFileError("not a text file (a CSV table is UTF-8 text)") from None
    del data
    lines = _line_count(text)
    if lines > MAX_TABLE_ROWS:
        raise FeedFileError(f"the table has {lines:,} lines, more than the {MAX_TABLE_ROWS:,} the editor reads from "
                            f"a .csv: save it as .npy, or feed it with blockflow run --feed")
    rows = [(n, line) for n, line in enumerate(text.splitlines(), 1)
            if line.strip() and not line.lstrip().startswith("#")]
    if not rows:
        raise FeedFileError("the file holds no values")
    first = rows[0][1]
    delimiter = next((d for d in (",", ";", "\t") if d in first), None)
    header = not all(_is_number(c) for c in _cells(first, delimiter))
    body = rows[1:] if header else rows
    if not body:
        raise FeedFileError("the file has a header row but no values")
    try:
        return np.loadtxt([line for _, line in body], delimiter=delimiter, ndmin=2, dtype=np.float64)
    except ValueError as exc:
        raise FeedFileError(_table_problem(body, delimiter) or f"not a numeric table: {exc}") from None


#: what str.splitlines ends a line at ("\r\n" is one end, counted twice among these)
_LINE_ENDS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"


def _line_count(text: str) -> int:
    """``len(text.splitlines())``, without making the lines."""
    ends = sum(text.count(c) for c in _LINE_ENDS) - text.count("\r\n")
    return ends + (bool(text) and text[-1] not in _LINE_ENDS)


def _cells(line: str, delimiter) -> list[str]:
    return [c.strip().strip('"') for c in (line.split(delimiter) if delimiter else line.split())]


def _table_problem(body, delimiter) -> str:
    """Where a table that numpy refused goes wrong, by the file's line numbers."""
    width = None
    for n, line in body:
        cells = _cells(line, delimiter)
        if width is None:
            width, first = len(cells), n
        elif len(cells) != width:
            return f"line {n} has {len(cells)} values, line {first} has {width}"
        for col, cell in enumerate(cells, 1):
            if not _is_number(cell):
                what = "an empty cell" if not cell else f"'{cell[:20]}' is not a number"
                return f"line {n}, column {col}: {what}"
    return ""


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _fit_table(arr: np.ndarray, shape: tuple) -> np.ndarray:
    """A CSV table (always 2-D) as the Placeholder's rank: one row or column for a vector, one
    cell for a scalar; a table for a matrix."""
    rank = len(shape)
    if rank == 0 and arr.size == 1:
        return arr.reshape(())
    if rank == 1 and 1 in arr.shape:
        return arr.reshape(-1)
    if rank > 2:
        raise FeedFileError(f"a CSV table is 2-D; the Placeholder expects {shape_text(shape)}: "
                         "use a .npy file for more axes")
    return arr


def _cast(arr: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``arr`` as ``dtype``, refusing what would change values: fractions into an int, numbers
    other than 0 and 1 into a bool, out-of-range values."""
    if arr.dtype == dtype:
        return arr
    if dtype.kind == "b":
        if arr.dtype.kind != "b" and not np.isin(arr, (0, 1)).all():
            raise FeedFileError("the Placeholder is bool: the file may hold only 0 and 1")
        return arr.astype(dtype)
    if dtype.kind in "iu":
        if arr.dtype.kind == "f":
            if not np.isfinite(arr).all():
                raise FeedFileError(f"the Placeholder is {dtype.name}: the file holds NaN or Inf")
            if not (arr == np.round(arr)).all():
                bad = arr[arr != np.round(arr)].reshape(-1)[0]
                raise FeedFileError(f"the Placeholder is {dtype.name}: the file holds fractions ({bad:g})")
        info = np.iinfo(dtype)
        if arr.size and (arr.min() < info.min or arr.max() > info.max):
            raise FeedFileError(f"values outside {dtype.name}'s range ({info.min} to {info.max})")
        return arr.astype(dtype)
    out = arr.astype(dtype)
    with np.errstate(all="ignore"):
        if arr.dtype.kind == "f" and (np.isinf(out) & np.isfinite(arr)).any():
            raise FeedFileError(f"values too large for {dtype.name}")
    return out
