"""The block registry: finds block packages through the ``blockflow.blocks`` entry-point group.

An entry point names a provider: a callable returning the package's block specs, or a *lazy
provider*, a callable that also has ``blocks`` ({block name: part}), ``aliases`` ({alias: block
name}) and ``load(part) -> specs``. A lazy provider's blocks are known by name at once and each
part (the block library's module) is imported when one of its blocks is first asked for: a command
running a small page imports the modules of its blocks, not the whole library. Listing the
registry (iterating, ``names``, ``categories``, ``len``) loads everything.

Must not import PySide6 or a block package by name: blocks arrive only through entry points.
"""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Iterable

from blockflow import entrypoints
from blockflow.errors import RegistryError
from blockflow.spec import BlockSpec

__all__ = ["Registry", "default_registry", "ENTRY_POINT_GROUP", "LAYERS_ENTRY_POINT_GROUP", "layer_files"]

ENTRY_POINT_GROUP = "blockflow.blocks"
#: block packages' layer libraries: each entry point is a function returning its layer files' paths
LAYERS_ENTRY_POINT_GROUP = "blockflow.layers"


class _Lazy:
    """A lazy provider's part not imported yet: where it comes from, its blocks' names, whether
    this thread is importing it now (a block asked for from inside its own part's import is not
    there yet), and the error its import gave in a strict registry (raised again on each ask)."""

    __slots__ = ("where", "load", "part", "names", "loading", "error")

    def __init__(self, where: str, load, part: str):
        self.where, self.load, self.part, self.names = where, load, part, []
        self.loading, self.error = False, None


class Registry:
    """Block specs by name. A duplicate name is an error naming both places.

    ``strict`` (``from_entry_points``): a lazy part that fails to import, or declares other
    blocks than its provider said, raises RegistryError on each ask; otherwise its blocks are
    left out and the problem is added to ``problems`` (and passed to ``report``, when given)."""

    def __init__(self, specs: Iterable[BlockSpec] = (), strict: bool = True, report=None):
        self._specs: dict[str, BlockSpec] = {}
        self._aliases: dict[str, str] = {}
        #: blocks of lazy providers whose part is not imported yet: name -> its part. A name
        #: leaves it only once its spec is in _specs, so a reader checking _lazy, then _specs,
        #: never misses a block another thread is importing.
        self._lazy: dict[str, _Lazy] = {}
        # threads compiling at once may ask for the same part: it is imported and added once
        self._lock = threading.RLock()
        self.strict, self.report = strict, report
        #: problems met while loading plugins non-strictly: (entry point, message)
        self.problems: list[tuple[str, str]] = []
        for spec in specs:
            self.add(spec)

    def __getstate__(self):     # a copy or a pickle gets a lock of its own
        state = dict(self.__dict__)
        del state["_lock"]
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._lock = threading.RLock()

    def add(self, spec: BlockSpec) -> None:
        if not isinstance(spec, BlockSpec):
            raise RegistryError(f"{spec!r} is not a block spec (declare it with @block)")
        with self._lock:
            if spec.name in self._lazy:
                self._load(spec.name)
            self._add(spec)

    def _add(self, spec: BlockSpec) -> None:
        old = self._specs.get(spec.name)
        if old is not None:
            raise RegistryError(f"block '{spec.name}' is declared twice: in {old.source} and in {spec.source}")
        self._specs[spec.name] = spec
        for alias in spec.aliases:
            self._aliases.setdefault(alias, spec.name)

    def add_lazy(self, where: str, blocks: dict, aliases: dict, load) -> None:
        """A lazy provider's blocks (``{name: part}``), each part imported by ``load(part)`` when
        one of its blocks is first asked for; ``where`` names the provider in messages."""
        with self._lock:
            for name in blocks:
                if name in self._specs or name in self._lazy:
                    other = self._specs[name].source if name in self._specs else self._lazy[name].where
                    raise RegistryError(f"block '{name}' is declared twice: in {other} and in {where}")
            parts: dict[str, _Lazy] = {}
            for name, part in blocks.items():
                entry = parts.get(part)
                if entry is None:
                    entry = parts[part] = _Lazy(where, load, part)
                entry.names.append(name)
                self._lazy[name] = entry
            for alias, name in aliases.items():
                self._aliases.setdefault(alias, name)

    def _load(self, name: str) -> BlockSpec | None:
        """Import the part that declares ``name`` and add its blocks; the spec of ``name``."""
        with self._lock:
            entry = self._lazy.get(name)
            if entry is None or entry.loading:   # loaded by another thread meanwhile / being imported
                return self._specs.get(name)
            if entry.error is not None:
                raise entry.error
            entry.loading = True
            try:
                specs = self._import(entry)
            finally:
                entry.loading = False
            if specs is None:
                return None
            for spec in specs:
                self._add(spec)
            for n in entry.names:
                del self._lazy[n]
            return self._specs.get(name)

    def _import(self, entry: _Lazy) -> list | None:
        """The specs of a lazy part, checked against the names its provider gave; None when it
        failed in a registry that is not strict (its blocks are then left out, and said so)."""
        try:
            specs = list(entry.load(entry.part))
            problem = _part_mismatch(entry, specs)
        except Exception as exc:
            problem = f"failed to load its part '{entry.part}': {exc}"
        if problem is None:
            return specs
        error = RegistryError(f"block package '{entry.where}' {problem}")
        if self.strict:
            entry.error = error
            raise error
        for n in entry.names:
            del self._lazy[n]
        self._aliases = {a: n for a, n in self._aliases.items() if n not in entry.names}
        self._problem(entry.where, f"{problem}; its blocks {', '.join(entry.names)} were skipped")
        return None

    def _problem(self, where: str, message: str) -> None:
        self.problems.append((where, message))
        if self.report is not None:
            self.report(where, message)

    def _load_all(self) -> None:
        with self._lock:
            for entry in {id(e): e for e in self._lazy.values() if not e.loading}.values():
                self._load(entry.names[0])

    def get(self, name: str) -> BlockSpec | None:
        spec = self._specs.get(name)
        if spec is None:
            if name in self._lazy:
                return self._load(name)
            spec = self._specs.get(name)   # its part added by another thread since the first look
        return spec

    def __getitem__(self, name: str) -> BlockSpec:
        spec = self.get(name)
        if spec is None:
            raise KeyError(name)
        return spec

    def __contains__(self, name) -> bool:
        return name in self._lazy or name in self._specs   # in this order: see _lazy

    def __iter__(self):
        """Every block, by name (whatever order their parts were imported in)."""
        self._load_all()
        return iter(sorted(self._specs.values(), key=lambda s: s.name))

    def __len__(self):
        self._load_all()
        return len(self._specs)

    def __bool__(self):   # what len says, without loading (``registry or default_registry()``)
        return bool(self._specs or self._lazy)

    def names(self) -> list[str]:
        self._load_all()
        return sorted(self._specs)

    def resolve_alias(self, name: str) -> str | None:
        """The block a TF alias (``Sub`` for ``Subtract``) stands for, if any."""
        return name if name in self else self._aliases.get(name)

    def categories(self) -> dict[str, list[BlockSpec]]:
        self._load_all()
        out: dict[str, list[BlockSpec]] = {}
        for spec in sorted(self._specs.values(), key=lambda s: (s.category, s.name)):
            out.setdefault(spec.category, []).append(spec)
        return out

    @classmethod
    def from_entry_points(cls, strict: bool = True, report=None) -> "Registry":
        """Load every installed block package. ``strict=False`` skips broken ones, adding each
        problem to ``problems`` and passing it to ``report(entry point, message)`` as it is met:
        at once, or for a lazy provider's part, when the part is first imported."""
        reg = cls(strict=strict, report=report)
        for ep in sorted(entrypoints.entry_points(ENTRY_POINT_GROUP), key=lambda e: e.name):
            where = f"{ep.name} = {ep.value}"
            try:
                provider = ep.load()
                if _is_lazy(provider):
                    reg.add_lazy(where, provider.blocks, getattr(provider, "aliases", {}), provider.load)
                    continue
                specs = list(provider() if callable(provider) else provider)
                staged = Registry()
                for spec in specs:
                    staged.add(spec)
                for spec in specs:
                    reg.add(spec)
            except Exception as exc:
                if strict:
                    if isinstance(exc, RegistryError):
                        raise
                    raise RegistryError(f"block package '{where}' failed to load: {exc}") from exc
                reg._problem(where, f"failed to load, skipped: {exc}")
        return reg


def _is_lazy(provider) -> bool:
    """Whether an entry point's provider says where its blocks are (see the module's docstring)."""
    return isinstance(getattr(provider, "blocks", None), dict) and callable(getattr(provider, "load", None))


def _part_mismatch(entry: _Lazy, specs: list) -> str | None:
    """What differs between the blocks a lazy part declares and the names its provider gave
    (a stale catalog: blocks/catalog.py is written by tools/make_block_catalog.py), or None."""
    declared = [s.name for s in specs if isinstance(s, BlockSpec)]
    missing, extra = sorted(set(entry.names) - set(declared)), sorted(set(declared) - set(entry.names))
    if not missing and not extra:
        return None
    said = "; ".join(x for x in (f"does not declare {', '.join(missing)}, which the catalog lists" if missing else "",
                                 f"declares {', '.join(extra)}, which the catalog does not list" if extra else "")
                     if x)
    return (f"has a stale catalog: its part '{entry.part}' {said} "
            f"(regenerate it: python tools/make_block_catalog.py)")


_default: Registry | None = None


def default_registry() -> Registry:
    """The registry of installed block packages, loaded once (strictly)."""
    global _default
    if _default is None:
        _default = Registry.from_entry_points(strict=True)
    return _default


def layer_files() -> list[tuple[str, Path]]:
    """(entry point name, path) of every layer file the installed block packages declare in the
    ``blockflow.layers`` group (read by blockflow.io.library, which runs no code of its own)."""
    out = []
    for ep in sorted(entrypoints.entry_points(LAYERS_ENTRY_POINT_GROUP), key=lambda e: e.name):
        try:
            paths = list(ep.load()())
        except Exception as exc:  # a broken plugin is named, not a traceback
            raise RegistryError(f"layer entry point '{ep.name}' ({ep.value}) failed: {exc}") from None
        out.extend((ep.name, Path(p)) for p in paths)
    return out
