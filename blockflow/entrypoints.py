"""Installed packages' entry points of one group, read without importing ``importlib.metadata``.

Why: on Python 3.11 ``importlib.metadata`` imports ``email`` (for distributions' METADATA files,
which finding entry points never reads) and with it ``socket``, ``calendar`` and some twenty
regular expressions: 25-40 ms of every ``blockflow`` command's start, a sixth of ``blockflow run``
(docs/performance.md). Entry points only need each distribution's ``entry_points.txt``.

What this reads is what ``importlib.metadata.entry_points(group=...)`` gives, in its order (a
test compares the two on crafted folders and on the installed packages): the ``*.dist-info`` and
``*.egg-info`` entries of every folder on ``sys.path`` in turn, a distribution's name taken from
its entry's name (so a name seen in an earlier folder hides the later ones), and the ``[group]``
sections of its ``entry_points.txt``, ``#`` lines and blank lines skipped. Where the standard
library would look further or refuse (a zip archive or an ``.egg`` on the path, a path entry
that is not a ``str``, another finder on ``sys.meta_path`` that lists distributions or none, a
name it would read from METADATA, an ``entry_points.txt`` it cannot read or parse) this hands
the question to ``importlib.metadata`` itself, which answers or raises as it always did.
"""
from __future__ import annotations

import importlib
import os
import re
import sys
from importlib.machinery import PathFinder

__all__ = ["EntryPoint", "entry_points"]

_INFO_SUFFIXES = (".dist-info", ".egg-info")
_VALUE = re.compile(r"(?P<module>[\w.]+)\s*(:\s*(?P<attr>[\w.]+)\s*)?((?P<extras>\[.*\])\s*)?$")


class EntryPoint:
    """An entry point: ``name = value`` of its ``group``; ``load()`` imports what it names."""

    __slots__ = ("name", "value", "group")

    def __init__(self, name: str, value: str, group: str):
        self.name, self.value, self.group = name, value, group

    def load(self):
        match = _VALUE.match(self.value)
        if match is None:
            raise ValueError(f"entry point '{self.name}': '{self.value}' is not 'module:attribute'")
        found = importlib.import_module(match.group("module"))
        for attr in filter(None, (match.group("attr") or "").split(".")):
            found = getattr(found, attr)
        return found

    def __eq__(self, other):
        return isinstance(other, EntryPoint) and (self.name, self.value, self.group) == (
            other.name, other.value, other.group)

    def __repr__(self):
        return f"EntryPoint(name={self.name!r}, value={self.value!r}, group={self.group!r})"


class _Unusual(Exception):
    """Something only importlib.metadata knows how to read."""


def entry_points(group: str) -> list[EntryPoint]:
    """Every installed package's entry point in ``group``."""
    try:
        return _scanned(group)
    except _Unusual:
        from importlib import metadata

        return [EntryPoint(ep.name, ep.value, ep.group) for ep in metadata.entry_points(group=group)]


def _scanned(group: str) -> list[EntryPoint]:
    listing = [f for f in sys.meta_path if getattr(f, "find_distributions", None)]
    if not listing or any(finder is not PathFinder for finder in listing):
        raise _Unusual                # importlib asks those finders, and only those
    seen: set[str] = set()
    found: list[EntryPoint] = []
    for folder in sys.path:
        if not isinstance(folder, str):
            raise _Unusual            # importlib reads a Path, and refuses bytes or None
        for entry in _distributions(folder or "."):
            name = _normalized(entry)
            if name not in seen:
                seen.add(name)
                found.extend(_read(os.path.join(folder or ".", entry), group))
    return found


def _distributions(folder: str) -> list[str]:
    """The names of the distributions' entries in ``folder``, in the order importlib lists them
    (grouped by normalized name, groups in the order their first entry is met)."""
    if os.path.basename(folder).lower().endswith(".egg"):
        raise _Unusual                # an unzipped egg: importlib reads its EGG-INFO
    try:
        names = os.listdir(folder)
    except NotADirectoryError:
        raise _Unusual from None      # a zip archive on the path
    except OSError:
        return []                     # a folder that is not there (importlib skips it too)
    groups: dict[str, list[str]] = {}
    for name in names:
        low = name.lower()
        if low.endswith(".egg"):
            raise _Unusual            # an old-style egg keeps its metadata elsewhere
        if low.endswith(_INFO_SUFFIXES):
            groups.setdefault(_normal(low.rpartition(".")[0].partition("-")[0]), []).append(name)
    return [name for names_ in groups.values() for name in names_]


def _normalized(entry: str) -> str:
    stem, ext = os.path.splitext(entry)
    name = stem.partition("-")[0]
    if ext not in _INFO_SUFFIXES or not name:
        raise _Unusual                # importlib would read the name from its METADATA
    return _normal(name)


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower().replace("-", "_")


def _read(info: str, group: str) -> list[EntryPoint]:
    try:
        with open(os.path.join(info, "entry_points.txt"), encoding="utf-8") as file:
            text = file.read()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError):
        return []                     # none, or an .egg-info that is a file (importlib: the same)
    except (OSError, UnicodeDecodeError):
        raise _Unusual from None      # importlib raises it: let it say so
    section, found = None, []
    for line in map(str.strip, text.splitlines()):
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line.strip("[]")
            continue
        if section is None:
            continue                  # before the first section: importlib skips it too
        name, sep, value = line.partition("=")
        if not sep:
            raise _Unusual            # importlib refuses the whole file, any section's line
        if section == group:
            found.append(EntryPoint(name.strip(), value.strip(), group))
    return found
