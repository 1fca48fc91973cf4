"""The block registry: finds block packages through the ``blockflow.blocks`` entry-point group.

Must not import PySide6 or a block package by name: blocks arrive only through entry points.
"""
from __future__ import annotations

from importlib import metadata
from pathlib import Path
from typing import Iterable

from blockflow.errors import RegistryError
from blockflow.spec import BlockSpec

__all__ = ["Registry", "default_registry", "ENTRY_POINT_GROUP", "LAYERS_ENTRY_POINT_GROUP", "layer_files"]

ENTRY_POINT_GROUP = "blockflow.blocks"
#: block packages' layer libraries: each entry point is a function returning its layer files' paths
LAYERS_ENTRY_POINT_GROUP = "blockflow.layers"


class Registry:
    """Block specs by name. A duplicate name is an error naming both places."""

    def __init__(self, specs: Iterable[BlockSpec] = ()):
        self._specs: dict[str, BlockSpec] = {}
        self._aliases: dict[str, str] = {}
        #: problems met while loading plugins non-strictly: (entry point, message)
        self.problems: list[tuple[str, str]] = []
        for spec in specs:
            self.add(spec)

    def add(self, spec: BlockSpec) -> None:
        if not isinstance(spec, BlockSpec):
            raise RegistryError(f"{spec!r} is not a block spec (declare it with @block)")
        old = self._specs.get(spec.name)
        if old is not None:
            raise RegistryError(f"block '{spec.name}' is declared twice: in {old.source} and in {spec.source}")
        self._specs[spec.name] = spec
        for alias in spec.aliases:
            self._aliases.setdefault(alias, spec.name)

    def get(self, name: str) -> BlockSpec | None:
        return self._specs.get(name)

    def __getitem__(self, name: str) -> BlockSpec:
        spec = self._specs.get(name)
        if spec is None:
            raise KeyError(name)
        return spec

    def __contains__(self, name) -> bool:
        return name in self._specs

    def __iter__(self):
        return iter(self._specs.values())

    def __len__(self):
        return len(self._specs)

    def names(self) -> list[str]:
        return sorted(self._specs)

    def resolve_alias(self, name: str) -> str | None:
        """The block a TF alias (``Sub`` for ``Subtract``) stands for, if any."""
        return name if name in self._specs else self._aliases.get(name)

    def categories(self) -> dict[str, list[BlockSpec]]:
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
