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
from importlib import metadata
from pathlib import Path
from typing import Iterable

from blockflow.errors import RegistryError
from blockflow.spec import BlockSpec

__all__ = ["Registry", "default_registry", "ENTRY_POINT_GROUP", "LAYERS_ENTRY_POINT_GROUP", "layer_files"]

ENTRY_POINT_GROUP = "blockflow.blocks"
#: block packages' layer libraries: each entry point is a function returning its layer files' paths
LAYERS_ENTRY_POINT_GROUP = "blockflow.layers"


class _Lazy:
    """A lazy provider's part not imported yet: where it comes from and its blocks' names."""

    __slots__ = ("where", "load", "part", "names")

    def __init__(self, where: str, load, part: str):
        self.where, self.load, self.part, self.names = where, load, part, []


class Registry:
    """Block specs by name. A duplicate name is an error naming both places."""

    def __init__(self, specs: Iterable[BlockSpec] = ()):
        self._specs: dict[str, BlockSpec] = {}
        self._aliases: dict[str, str] = {}
        #: blocks of lazy providers whose part is not imported yet: name -> its part
        self._lazy: dict[str, _Lazy] = {}
        # threads compiling at once may ask for the same part; it is added once
        self._lock = threading.RLock()
        #: problems met while loading plugins non-strictly: (entry point, message)
        self.problems: list[tuple[str, str]] = []
        for spec in specs:
            self.add(spec)

    def add(self, spec: BlockSpec) -> None:
        if not isinstance(spec, BlockSpec):
            raise RegistryError(f"{spec!r} is not a block spec (declare it with @block)")
        with self._lock:
            if spec.name in self._lazy:
                self._load(spec.name)
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
            if entry is None:            # another thread loaded it meanwhile
                return self._specs.get(name)
            for n in entry.names:
                del self._lazy[n]
            try:
                specs = list(entry.load(entry.part))
            except Exception as exc:
                raise RegistryError(f"block package '{entry.where}' failed to load its part "
                                    f"'{entry.part}': {exc}") from exc
            for spec in specs:
                self.add(spec)
            return self._specs.get(name)

    def _load_all(self) -> None:
        while self._lazy:
            self._load(next(iter(self._lazy)))

    def get(self, name: str) -> BlockSpec | None:
        spec = self._specs.get(name)
        if spec is None and name in self._lazy:
            spec = self._load(name)
        return spec

    def __getitem__(self, name: str) -> BlockSpec:
        spec = self.get(name)
        if spec is None:
            raise KeyError(name)
        return spec

    def __contains__(self, name) -> bool:
        return name in self._specs or name in self._lazy

    def __iter__(self):
        self._load_all()
        return iter(list(self._specs.values()))

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
    def from_entry_points(cls, strict: bool = True) -> "Registry":
        """Load every installed block package. ``strict=False`` reports broken ones and skips them."""
        reg = cls()
        for ep in sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
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
                reg.problems.append((where, str(exc)))
        return reg


def _is_lazy(provider) -> bool:
    """Whether an entry point's provider says where its blocks are (see the module's docstring)."""
    return isinstance(getattr(provider, "blocks", None), dict) and callable(getattr(provider, "load", None))


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
    for ep in sorted(metadata.entry_points(group=LAYERS_ENTRY_POINT_GROUP), key=lambda e: e.name):
        try:
            paths = list(ep.load()())
        except Exception as exc:  # a broken plugin is named, not a traceback
            raise RegistryError(f"layer entry point '{ep.name}' ({ep.value}) failed: {exc}") from None
        out.extend((ep.name, Path(p)) for p in paths)
    return out
