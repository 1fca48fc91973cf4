"""Data for dataset blocks: which batch a run wants, and the project's data files.

- :class:`DataRequest` is the ``data`` context a dataset block's ``forward`` receives: the run's
  ``step`` (a training step's number, 0 for a single run), ``split`` ("train", "test", "all") and
  ``seed`` (a training run's seed, 0 by default).
- :class:`DataFiles` is the ``files`` context (``infer`` and ``forward``): it reads ``.csv`` tables
  (a header row naming the columns; numbers only) and ``.npy``/``.npz`` arrays (never unpickling:
  ``allow_pickle=False``) by a path relative to the project's folder. A path may not be absolute
  and may not leave that folder (``..``, or a symbolic link pointing out of it): a project file
  is data, and opening one must not read files its author chose elsewhere on the user's disk.
  What was read is cached by path, size and modification time, and sizes are limited.
"""
from __future__ import annotations

import csv
import io
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["DataRequest", "DataFiles", "DataFileError", "MAX_DATA_FILE_BYTES", "SPLITS"]

SPLITS = ("train", "test", "all")
#: the largest data file read (a bigger one is refused with a message)
MAX_DATA_FILE_BYTES = 1024 * 1024 * 1024


class DataFileError(ValueError):
    """A data file cannot be used: where it is and what is wrong, in words."""


@dataclass(frozen=True)
class DataRequest:
    """What a run asks a dataset block for: batch ``step`` of ``split``; ``seed`` (the run's seed,
    when not 0) changes the shuffling of the batches."""

    step: int = 0
    split: str = "train"
    seed: int = 0


class DataFiles:
    """Reads data files inside ``base_dir`` (the project's folder)."""

    def __init__(self, base_dir):
        self.base_dir = Path(base_dir).resolve()
        self._cache: dict = {}

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
        key = (kind, str(full), st.st_size, st.st_mtime_ns)
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cache[key] = read(full)
        return hit

    def table(self, path: str) -> tuple[list, np.ndarray]:
        """A .csv file as (column names, a float64 array of its rows)."""
        self.resolve(path)
        if not path.lower().endswith(".csv"):
            raise DataFileError(f"'{path}': a table is read from a .csv file")
        return self._cached(path, "csv", lambda full: _read_csv(path, full))

    def arrays(self, path: str) -> dict:
        """A .npz file's arrays by name, or a .npy file's array as ``{"x": array}``."""
        self.resolve(path)
        low = path.lower()
        if not (low.endswith(".npz") or low.endswith(".npy")):
            raise DataFileError(f"'{path}': arrays are read from .npy or .npz files")
        return self._cached(path, "npy", lambda full: _read_arrays(path, full))


def _read_csv(name: str, full: Path):
    try:
        text = full.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DataFileError(f"'{name}' is not UTF-8 text ({exc.reason})") from None
    rows = list(csv.reader(io.StringIO(text)))
    rows = [r for r in rows if any(c.strip() for c in r)]
    if not rows:
        raise DataFileError(f"'{name}' is empty")
    header = [c.strip() for c in rows[0]]
    if not all(header) or len(set(header)) != len(header):
        raise DataFileError(f"'{name}': the first row must name every column, each once (found {header})")
    if _numeric(header):
        raise DataFileError(f"'{name}': the first row must be a header naming the columns (it holds numbers)")
    data = np.empty((len(rows) - 1, len(header)), np.float64)
    for i, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            raise DataFileError(f"'{name}' line {i}: {len(row)} values, the header names {len(header)} columns")
        try:
            data[i - 2] = [float(c) for c in row]
        except ValueError:
            bad = next(c for c in row if not _is_number(c))
            raise DataFileError(f"'{name}' line {i}: {bad.strip()!r} is not a number") from None
    if data.shape[0] == 0:
        raise DataFileError(f"'{name}' has a header but no rows")
    data.setflags(write=False)
    return header, data


def _is_number(c: str) -> bool:
    try:
        float(c)
        return True
    except ValueError:
        return False


def _numeric(row) -> bool:
    return all(_is_number(c) for c in row)


def _read_arrays(name: str, full: Path) -> dict:
    try:
        loaded = np.load(full, allow_pickle=False)
    except ValueError as exc:   # an object array (pickled) or a malformed file
        raise DataFileError(f"'{name}' cannot be read without unpickling or is not a numpy file ({exc})") from None
    except (OSError, EOFError) as exc:
        raise DataFileError(f"'{name}' is not a numpy file ({exc})") from None
    if isinstance(loaded, np.ndarray):
        out = {"x": loaded}
    else:
        try:
            with loaded:
                out = {k: loaded[k] for k in loaded.files}
        except ValueError as exc:
            raise DataFileError(f"'{name}': an array needs unpickling, which blockflow never does ({exc})") from None
    for k, a in out.items():
        if a.dtype.kind not in "biuf":
            raise DataFileError(f"'{name}': array '{k}' holds {a.dtype}, not numbers")
        a.setflags(write=False)
    return out
