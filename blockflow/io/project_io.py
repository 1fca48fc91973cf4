"""Reading and writing project files (``*.bflow.json``).

The format is documented in docs/project-format.md and described by assets/bflow.schema.json.
In short: UTF-8 JSON, ``"format"`` and ``"version"`` first, then ``"metadata"`` and
``"pages"``; arrays are ``{"dtype", "shape", "data"}`` (small) or ``{"dtype", "shape",
"base64"}`` (large, raw little-endian bytes).

Guarantees:

* Loading never executes code: ``json`` only, base64 decoded with validation and turned into
  arrays with ``np.frombuffer``; no pickle, no eval, no imports driven by the file.
* A bad file raises exactly one :class:`~blockflow.errors.ProjectFileError` naming the file,
  the place in it (a JSON path like ``pages[0].nodes[3].attrs.shape``, or ``line L, column C``
  for JSON syntax errors) and the problem.
* Loading takes at most ``rules.LOAD_FACTOR`` x the file's size + ``rules.LOAD_ALLOWANCE_BYTES`` of memory,
  whatever the file holds: a file that could take more is refused before it is parsed (see
  blockflow.io.loadcost, and docs/limits.md).
* Output is deterministic and diff-friendly: ``dumps_project(loads_project(t)) == t`` for any
  ``t`` that ``dumps_project`` wrote, and ``loads_project(dumps_project(p)) == p``.
* Saving is atomic: temporary file in the same directory, flush, fsync, ``os.replace``, fsync
  of the directory. On failure the old file is untouched and the temporary file removed. Its side
  files (the temporary, the ``.bak`` backup) never follow a link or replace a file blockflow did
  not write (blockflow.ownfiles).
* Whatever ``dumps_project`` writes, ``loads_project`` reads: the writer checks the same rules
  as the reader and refuses (with a ProjectFileError) a project that would not load back.

This module is the public face of the project format's functions; its constants and limits live
in blockflow.io.rules, the one place to read or set them (``rules.LOAD_FACTOR = 48``). The work is
done, one job a module, by rules, checks (what the reader and the writer both check),
arrays (the array codec), values (free JSON values), loadcost (the memory a file may cost, checked
before parsing), reader, writer and saving. The package is core code: it imports numpy, json (and
the standard library), blockflow.project, blockflow.errors, blockflow.spec (shape_text) and
blockflow.ownfiles (the side files of a save: its temporary, the backup) only.
"""
from __future__ import annotations

from blockflow.io.arrays import decode_array, encode_array
from blockflow.io.reader import load_project, loads_project
from blockflow.project import Project

__all__ = [
    "dumps_project", "loads_project", "load_project", "save_project", "SaveResult", "backup_path",
    "BACKUP_SUFFIX", "save_library", "load_library", "dumps_library",
    "encode_array", "decode_array",
]


# Saving's names are looked up when first used (PEP 562): a command that only loads (run, check)
# does not import the saving machinery (blockflow.ownfiles and logging, 9 ms of a start).
# Nor the writer (dumps_project, dumps_library).
_SAVING = ("save_project", "SaveResult", "backup_path", "BACKUP_SUFFIX")
_WRITING = ("dumps_project", "dumps_library")


def __getattr__(name: str):
    if name not in _SAVING and name not in _WRITING:
        raise AttributeError(f"module 'blockflow.io.project_io' has no attribute {name!r}")
    if name in _SAVING:
        from blockflow.io import saving as module   # fixed modules: nothing a file says chooses
    else:                                            # what is imported
        from blockflow.io import writer as module
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__():
    return sorted({*globals(), *__all__})


def save_library(path, composites: dict, metadata: dict | None = None) -> "SaveResult":
    """Write ``composites`` ({name: Composite}, with every composite they use) to a library file:
    a project file with no pages, which File > Import Composites and ``load_library`` read."""
    save = globals().get("save_project") or __getattr__("save_project")   # as patched, if it is
    return save(Project([], dict(metadata or {}), dict(composites)), path, library=True)


def load_library(path) -> tuple[dict, dict]:
    """The composites and metadata of a library file (or of any project file)."""
    project = load_project(path, library=True)
    return project.composites, project.metadata
