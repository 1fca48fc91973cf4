"""What a command reads: the project, the block registry, feeds given on the command line, and
the paths it is to write (checked before any work)."""
from __future__ import annotations

import json
import os
import sys

import numpy as np

from blockflow.cli.exits import EXIT_FILE, EXIT_USAGE, CliError


def load(path: str):
    from blockflow.io.project_io import load_project

    return load_project(path)


def registry():
    """The installed blocks; a block package (or a lazy package's part) that fails to load is
    skipped with a warning."""
    from blockflow.registry import Registry

    return Registry.from_entry_points(strict=False, report=_skipped)


def _skipped(where: str, problem: str) -> None:
    """A broken block package's warning, printed when it is met (a lazy package's part: when a
    command first asks for one of its blocks)."""
    print(f"blockflow: warning: block package {where}: {problem}", file=sys.stderr)


def check_output_path(option: str, path: str, *, replaces: bool = True, follow: bool = True) -> None:
    """A file named on the command line to write must be able to be one: else a usage error
    naming the option, the path and the problem (empty, ending in '/', a folder, too long; a
    device, a named pipe or a socket unless ``replaces`` is False: a writer that writes into
    what is there, as the Markdown references do, may be given /dev/stdout); and, for a writer
    that replaces, a folder that refuses new files is a file error (3). ``follow=False``: the
    writer replaces a symbolic link named, never writing through it (export -o), so the folder
    probed is the link's own (a device it leads to is still refused: /dev/stdout)."""
    from blockflow.ownfiles import folder_problem, name_problem

    problem = name_problem(path, replaces=replaces)
    if problem:
        raise CliError(f"{option} {path or repr(path)}: {problem}", EXIT_USAGE)
    descriptor = "" if follow else _descriptor_link(path)
    if descriptor:
        raise CliError(f"{option} {path}: it is a link to {descriptor}, a descriptor of this process, not a file: "
                       f"writing would replace the link (give a file name)", EXIT_USAGE)
    # a save that the folder refuses would be found after the work: a training's, an import's
    problem = folder_problem(path, follow=follow) if replaces else ""
    if problem:
        raise CliError(f"{option} {path}: {problem}; nothing was done", EXIT_FILE)


def _descriptor_link(path: str) -> str:
    """The hop of ``path``'s chain of links that leads into /proc or /dev/fd ("" when none):
    /dev/stdout names the process's output, which may be a regular file (``> log``), so only the
    link tells it from one. A writer that replaces a link named would replace /dev/stdout."""
    name = os.path.abspath(path)
    for _ in range(40):                 # the system's own limit on a chain of links
        if not os.path.islink(name):
            return ""
        try:
            hop = os.readlink(name)
        except OSError:
            return ""
        name = os.path.normpath(os.path.join(os.path.dirname(name), hop))
        if name.startswith(("/proc/", "/dev/fd/")):
            return hop
    return ""


def parse_feed(spec: str, option: str = "--feed", held: int = 0) -> tuple[str, np.ndarray]:
    """``NAME=file.npy``, ``NAME=file.csv`` or ``NAME=<inline JSON>`` -> (name, array); a file's
    array is judged against the memory budget with ``held`` bytes of feeds read before it."""
    name, sep, value = spec.partition("=")
    if not sep or not name:
        raise CliError(f"{option} {spec!r}: expected NAME=VALUE (a .npy or .csv file, or inline JSON)", EXIT_USAGE)
    text = value.strip()
    if text.endswith(".npy"):
        return name, _read_npy(f"{option} {name}", text, held)
    if text.endswith(".csv"):
        return name, _read_csv(f"{option} {name}", text, held)
    try:
        data = json.loads(text)
        arr = np.asarray(data)
    except RecursionError:    # json's decoder recurses once per level of nesting
        raise CliError(f"{option} {name}: {shortened(text)!r} is nested too deeply to be an array", EXIT_USAGE) from None
    except (ValueError, TypeError) as exc:
        raise CliError(f"{option} {name}: {shortened(text)!r} is neither a .npy/.csv file nor JSON ({exc})",
                       EXIT_USAGE) from None
    if arr.dtype.kind == "O" and all(isinstance(v, (int, float)) for v in arr.flat):
        # integers past int64, which numpy keeps as Python objects: as floats, a float
        # Placeholder takes them and an integer one names the value that does not fit it
        try:
            arr = np.asarray(arr, dtype=np.float64)
        except OverflowError:
            raise CliError(f"{option} {name}: {shortened(text)!r} holds an integer larger than any float "
                           f"(about 1.8e308)", EXIT_USAGE) from None
    if arr.dtype.kind not in "biuf":
        raise CliError(f"{option} {name}: expected numbers, got {shortened(text)!r}", EXIT_USAGE)
    return name, arr


def shortened(text: str, most: int = 60) -> str:
    """``text`` cut to ``most`` characters, saying how long it was: a value given on the command
    line may be huge, and a message quotes it on one line."""
    return text if len(text) <= most else f"{text[:most - 20]}... ({len(text):,} characters)"


def _read_npy(what: str, path: str, held: int) -> np.ndarray:
    """A feed's .npy file, read as the inspector reads one (blockflow.feeds.read_npy)."""
    from blockflow.feeds import FeedFileError, read_npy

    try:
        return read_npy(path, held)
    except OSError as exc:
        raise CliError(f"{what}: cannot read {path}: {exc.strerror or exc}", EXIT_FILE) from None
    except FeedFileError as exc:
        raise CliError(f"{what}: cannot read {path}: {exc}", EXIT_FILE) from None
    except Exception as exc:  # whatever else numpy raises for a damaged file
        raise CliError(f"{what}: cannot read {path}: {exc or type(exc).__name__}", EXIT_FILE) from None


def _read_csv(what: str, path: str, held: int) -> np.ndarray:
    """A feed's CSV: numbers, one row per line, an optional header; read as a data file is
    (streamed into one array whose size is checked before it exists)."""
    from blockflow.datafiles import DataFileError, read_number_table
    from blockflow.ownfiles import special_kind

    # a device never ends (/dev/zero: one endless line, read whole by the csv module); a named
    # pipe ends, but the table is read twice (its size first) and the second open waited forever
    # for a writer
    kind = special_kind(path)
    if kind.endswith("device"):
        raise CliError(f"{what}: cannot read {path}: it is {kind}, not a file", EXIT_FILE)
    if kind:
        raise CliError(f"{what}: cannot read {path}: it is {kind}, not a file (a .csv feed is read twice, "
                       f"its size first: save the table to a file)", EXIT_FILE)
    try:
        _, arr = read_number_table(path, path, header="optional", held=held)
    except OSError as exc:
        raise CliError(f"{what}: cannot read {path}: {exc.strerror or exc}", EXIT_FILE) from None
    except DataFileError as exc:
        raise CliError(f"{what}: {exc}", EXIT_FILE) from None
    if arr.shape[1] == 1:
        arr = arr[:, 0]
    return arr
