"""A project saved into another folder: the data files its dataset blocks read, and where they go.

A dataset block (a ``data_ops`` block with a ``path`` attr: CsvDataset, NumpyDataset) names its
file relative to the project's folder, and the loader reads only inside that folder
(blockflow.datafiles). Saved elsewhere, the project would name files that are not there, so
:func:`plan_move` decides for each path, before anything is written:

- ``same``: the new folder already holds that file under that path (the same folder, or a copy
  with the same bytes): nothing to do;
- ``rewrite``: the file is inside the new folder under another path (the project moved to a
  folder that encloses it): only the path changes;
- ``copy``: the file is copied next to the new project under the same path, or under a new name
  (``data/d-1.csv``) when a different file, or anything that is not a plain file, is there;
- ``conflict``: (``rewrite=False``, which keeps every path as it is) a different file is there;
- ``missing``: the path names no file inside the old folder (the project was already broken
  there, or the path was never allowed): left as it is.

:func:`apply_move` copies and rewrites. A copy never follows a link and never replaces anything:
it is written to a fresh temporary file in the target folder and linked into place only where no
file is. The editor's Save As and ``blockflow train --save`` both go through here.

Must not import Qt or the block library.
"""
from __future__ import annotations

import filecmp
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from blockflow.composite import PARAM_REF, block_name, composite_name, ref_of
from blockflow.datafiles import DataFileError, DataFiles

__all__ = ["Move", "data_paths", "plan_move", "apply_move"]


@dataclass(frozen=True)
class Move:
    """What happens to one data path when the project moves: ``action`` (see the module's
    docstring), the path the project will hold (``new_path``), the file read (``source``) and,
    for ``missing``, why."""

    path: str
    action: str
    new_path: str
    source: Path | None = None
    reason: str = ""

    def describe(self, new_dir) -> str:
        why = f" ({self.reason})" if self.reason else ""
        if self.action == "copy":
            renamed = f" as '{self.new_path}'" if self.new_path != self.path else ""
            return f"copied data file '{self.path}' into {new_dir}{renamed}{why}"
        if self.action == "rewrite":
            return (f"data file '{self.path}' is named '{self.new_path}' in the saved project"
                    + (why or " (the file is inside its folder)"))
        if self.action == "missing":
            return f"data file '{self.path}' was left as it is: {self.reason}"
        if self.action == "conflict":
            return f"data file '{self.path}' was not copied: a different file is already there"
        return f"data file '{self.path}' is already in {new_dir}"


def data_paths(project, registry) -> list[str]:
    """The data files the project's dataset blocks name (their ``path`` attrs), each once."""
    def is_dataset(node) -> bool:
        spec = registry.get(node.block)
        return spec is not None and spec.is_dataset
    out: list[str] = []
    for _, _, path in _path_places(project, is_dataset):
        if path not in out:
            out.append(path)
    return out


def _path_places(project, is_dataset) -> list[tuple]:
    """(node, attr, path) of every place a data path is given: a dataset block's ``path`` on a
    page or in a composite's diagram (a page's alone missed those: a project saved elsewhere named
    files that were not there), and where that is a composite's parameter, that parameter on each
    of its instances (its default where an instance gives none), followed up through instances
    inside other composites."""
    places, params, seen = [], [], set()

    def take(node, attr, owner, default=None) -> None:
        value = node.attrs.get(attr, default)
        ref = ref_of(value)
        if isinstance(value, str) and value:
            places.append((node, attr, value))
        elif ref is not None and ref[0] == PARAM_REF and owner is not None:
            params.append((owner, ref[1]))
    for diagram in project.diagrams():
        for node in diagram.nodes.values():
            if is_dataset(node):
                take(node, "path", composite_name(diagram.name))
    while params:
        key = params.pop()
        comp = project.composites.get(key[0])
        param = comp.param(key[1]) if comp is not None and key not in seen else None
        seen.add(key)
        if param is None:
            continue
        for diagram in project.diagrams():
            for node in diagram.nodes.values():
                if node.block == block_name(key[0]):
                    take(node, key[1], composite_name(diagram.name), param.default)
    return places


def plan_move(project, registry, old_dir, new_dir, *, rewrite: bool = True) -> list[Move]:
    """For each data path of ``project`` (read from ``old_dir`` until now), what saving it into
    ``new_dir`` needs. Nothing is written. ``rewrite=False`` never changes a path: the files are
    copied under their paths or not at all."""
    old = DataFiles(old_dir)
    new_base = Path(new_dir).resolve()
    moves = []
    for rel in data_paths(project, registry):
        try:
            source = old.resolve(rel)
        except DataFileError as exc:
            moves.append(Move(rel, "missing", rel, None, str(exc)))
            continue
        moves.append(_plan_one(rel, source, old.base_dir, new_base, rewrite))
    return moves


def _plan_one(rel: str, source: Path, old_base: Path, new_base: Path, rewrite: bool) -> Move:
    if _inside(new_base / rel, new_base) and _same_file(new_base / rel, source):
        return Move(rel, "same", rel, source)
    if not rewrite:       # the path stays: copy under it, or not at all
        target = new_base / rel
        free = not os.path.lexists(target) and _inside(target.parent, new_base)
        return Move(rel, "copy" if free else "conflict", rel, source)
    if _inside(source, new_base):
        return Move(rel, "rewrite", PurePosixPath(*source.relative_to(new_base).parts).as_posix(), source)
    # Copied under the path as written, tidied; a path that only stays in the old folder by
    # going up and down again ("../a/d.csv") is copied under its place in that folder.
    parts = PurePosixPath(os.path.normpath(rel).replace(os.sep, "/"))
    if ".." in parts.parts or parts.is_absolute():
        parts = PurePosixPath(*source.relative_to(old_base).parts)
    for n in range(0, 1000):
        name = parts.as_posix() if n == 0 else (parts.parent / f"{parts.stem}-{n}{parts.suffix}").as_posix()
        why = "" if n == 0 else f"a different '{parts.as_posix()}' is already there"
        target = new_base / name
        if not _inside(target.parent, new_base):
            raise OSError(f"data file '{rel}' cannot be copied into {new_base}: "
                          f"'{parts.parent.as_posix()}' there leads out of that folder")
        if not os.path.lexists(target):
            return Move(rel, "copy", name, source, why)
        if _same_file(target, source):       # an earlier copy of it
            return Move(rel, "same" if name == rel else "rewrite", name, source, why)
    raise OSError(f"data file '{rel}': no free name for a copy of it in {new_base}")


def apply_move(project, moves, new_dir) -> list[Move]:
    """Copy the files of the ``copy`` moves into ``new_dir`` and give every dataset block the
    ``new_path`` of its file; returns the moves that changed something. Raises OSError (naming
    the file) when a copy fails; the copies made before stay (they are new files)."""
    new_base = Path(new_dir).resolve()
    done = []
    for m in moves:
        if m.action == "copy":
            try:
                _copy_new(m.source, new_base / m.new_path, new_base)
            except OSError as exc:
                raise OSError(f"cannot copy data file '{m.path}' to {new_base / m.new_path}: "
                              f"{exc.strerror or exc}") from None
        if m.action in ("copy", "rewrite"):
            done.append(m)
    renamed = {m.path: m.new_path for m in done if m.new_path != m.path}
    if renamed:     # any block's path, as the moves were planned for dataset blocks
        for node, attr, path in _path_places(project, lambda node: "path" in node.attrs):
            if path in renamed:     # an instance that took the default is given the new path
                node.attrs = {**node.attrs, attr: renamed[path]}
    return done


def _inside(path: Path, base: Path) -> bool:
    """Is ``path`` (its existing part resolved, links followed) inside ``base``?"""
    try:
        Path(path).resolve().relative_to(base)
    except ValueError:
        return False
    return True


def _same_file(target: Path, source: Path) -> bool:
    """Is ``target`` a plain file (not a link) with the bytes of ``source``?"""
    try:
        if target.is_symlink() or not target.is_file():
            return False
        if target.resolve() == source:
            return True
        return filecmp.cmp(target, source, shallow=False)
    except OSError:
        return False


def _copy_new(source: Path, target: Path, base: Path) -> None:
    """Copy ``source`` to ``target``, which must not exist: never through a link, never over a
    file, never half-written under the final name."""
    parent = target.parent
    if not _inside(parent, base):
        raise OSError(f"{parent} leads out of {base}")
    parent.mkdir(parents=True, exist_ok=True)
    if not _inside(parent, base):     # a link planted meanwhile is not followed out of the folder
        raise OSError(f"{parent} leads out of {base}")
    fd, tmp = tempfile.mkstemp(dir=parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out, open(source, "rb") as src:
            shutil.copyfileobj(src, out, 1 << 20)
            out.flush()
            os.fsync(out.fileno())
        shutil.copymode(source, tmp)
        try:
            os.link(tmp, target)          # fails if anything, even a dangling link, is there
        except FileExistsError:
            raise
        except OSError:                   # a file system without hard links: create exclusively
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
            with os.fdopen(os.open(target, flags, 0o644), "wb") as out, open(tmp, "rb") as src:
                shutil.copyfileobj(src, out, 1 << 20)
    finally:
        os.unlink(tmp)
