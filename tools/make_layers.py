"""Writes the layer library, blocks/layers/NAME.bflow.json, from the definitions in tools/layer_defs.

    python tools/make_layers.py          # rewrite every layer file
    python tools/make_layers.py --check  # exit 1 if a committed layer file differs (the tests use it)

Every module of tools/layer_defs/ with ``LAYERS`` (a list of builder functions, each returning
one layer's Composite, marked with ``@layer(category, version)``) contributes its layers; no module
needs to know the others. A layer file holds the layer's composite and those it uses, with its
category in the file's metadata.
"""
from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYER_DIR = ROOT / "blocks" / "layers"
sys.path.insert(0, str(ROOT / "tools"))


def builders() -> list:
    """Every layer builder of tools/layer_defs, module by module (by name), in LAYERS order."""
    import layer_defs

    out = []
    for info in sorted(pkgutil.iter_modules(layer_defs.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"layer_defs.{info.name}")
        out.extend(getattr(module, "LAYERS", ()))
    return out


def layers() -> list[tuple[str, dict]]:
    """(category, {name: Composite}) per layer: the layer's composite first, then those it uses."""
    from blockflow.composite import uses

    out, names = [], set()
    made = [(getattr(fn, "category", "other"), fn()) for fn in builders()]
    for _, comp in made:
        origin = comp.origin or {}
        if origin.get("name") != comp.name or not isinstance(origin.get("version"), int):
            raise SystemExit(f"make_layers: layer {comp.name} needs origin {{'library': 'blockflow', "
                             f"'name': {comp.name!r}, 'version': <int>}}, has {comp.origin!r}")
    by_name = {comp.name: comp for _, comp in made}
    for category, comp in made:
        if comp.name in names:
            raise SystemExit(f"make_layers: two layers are named {comp.name}")
        names.add(comp.name)
        comps, todo = {comp.name: comp}, sorted(uses(comp))
        while todo:
            inner = todo.pop()
            if inner not in comps:
                comps[inner] = by_name[inner]
                todo.extend(sorted(uses(by_name[inner])))
        out.append((category, comps))
    return out


def write(folder: Path) -> list[Path]:
    from blockflow.io.project_io import save_library

    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for category, comps in layers():
        name = next(iter(comps))
        path = folder / f"{name}.bflow.json"
        save_library(path, comps, {"category": category, "layer": name})
        paths.append(path)
    return paths


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="compare with the committed files, write nothing")
    args = ap.parse_args(argv)
    if not args.check:
        for stale in LAYER_DIR.glob("*.bflow.json"):
            stale.unlink()
        for path in write(LAYER_DIR):
            print(path.relative_to(ROOT))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        fresh = {p.name: p.read_bytes() for p in write(Path(tmp))}
        changed = {p.name: _unbumped(p, LAYER_DIR / p.name) for p in Path(tmp).glob("*.bflow.json")}
    committed = {p.name: p.read_bytes() for p in LAYER_DIR.glob("*.bflow.json")}
    bad = sorted(n for n in fresh.keys() | committed.keys() if fresh.get(n) != committed.get(n))
    for name in bad:
        print(f"blocks/layers/{name} is stale: run python tools/make_layers.py{changed.get(name) or ''}",
              file=sys.stderr)
    return 1 if bad else 0


def _unbumped(fresh: Path, committed: Path) -> str:
    """A note when the layer's definition changed but its version did not (a project that
    embeds the old definition could not tell the new one is newer); "" otherwise."""
    from blockflow.io.project_io import load_library

    if not committed.is_file():
        return ""
    new, _ = load_library(fresh)
    old, _ = load_library(committed)
    name = fresh.name.removesuffix(".bflow.json")
    if new == old or new[name].origin.get("version") != old[name].origin.get("version"):
        return ""
    return f", after raising {name}'s version (its definition changed)"


if __name__ == "__main__":
    sys.exit(main())
