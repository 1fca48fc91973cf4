"""Write blocks/catalog.py: which module of the block library declares each block and alias.

    python tools/make_block_catalog.py          # rewrite the catalog
    python tools/make_block_catalog.py --check  # exit 1 when it is stale

The registry reads the catalog to import a block's module only when the block is first asked for
(blockflow.registry, "lazy providers"): `blockflow run` of a small page then imports the modules
of its blocks, not the whole library. tests/test_block_catalog.py fails when the catalog is stale:
after adding, renaming or moving a block, run this script.
"""
from __future__ import annotations

import argparse
import importlib
import json
import pkgutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CATALOG = ROOT / "blocks" / "catalog.py"

HEADER = '''"""Which module of the block library declares each block, and what each alias stands for:
what the registry needs to import a block's module only when the block is first asked for.

Written by tools/make_block_catalog.py from the modules themselves; tests/test_block_catalog.py
fails when it is stale. Do not edit by hand: run that script after adding, renaming or moving a
block.
"""
'''


def _package():
    """blockflow_blocks, imported; a missing or unreadable catalog (deleted, or left with a merge
    conflict's markers) is first replaced by one naming every module, so that it can be written
    again from the modules themselves."""
    try:
        import blockflow_blocks
    except (ImportError, SyntaxError) as exc:
        modules = sorted(p.stem for p in CATALOG.parent.glob("*.py") if p.stem not in ("__init__", "catalog"))
        print(f"{CATALOG} could not be read ({exc}); writing it again from the modules", file=sys.stderr)
        CATALOG.write_text("MODULES = (%s)\nBLOCKS = {}\nALIASES = {}\n" % "".join(f"{m!r}, " for m in modules),
                           encoding="utf-8")
        import blockflow_blocks
    return blockflow_blocks


def library_modules() -> list[str]:
    """The package's modules that declare blocks, by name (the order all_blocks reads them)."""
    from blockflow.spec import BlockSpec

    blockflow_blocks = _package()
    found = []
    for info in pkgutil.iter_modules(blockflow_blocks.__path__):
        module = importlib.import_module(f"blockflow_blocks.{info.name}")
        if info.name != "catalog" and any(isinstance(v, BlockSpec) for v in vars(module).values()):
            found.append(info.name)
    return sorted(found)


def catalog_source() -> str:
    """The text blocks/catalog.py should hold."""
    modules = library_modules()
    from blockflow_blocks import module_blocks

    blocks, aliases = {}, {}
    for module in modules:
        for spec in module_blocks(module):
            blocks[spec.name] = module
            for alias in spec.aliases:
                aliases.setdefault(alias, spec.name)   # the first declaration wins, as Registry.add does
    q = json.dumps   # a name as a double-quoted literal, the repository's style
    lines = [HEADER, "#: the modules that declare blocks, by name: the order all_blocks reads them in",
             "MODULES = (", *(f"    {q(m)}," for m in modules), ")", "",
             "#: block name -> the module declaring it", "BLOCKS = {",
             *(f"    {q(name)}: {q(module)}," for name, module in blocks.items()), "}", "",
             "#: alias -> the block it stands for", "ALIASES = {",
             *(f"    {q(alias)}: {q(name)}," for alias, name in aliases.items()), "}", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when blocks/catalog.py is stale")
    args = parser.parse_args(argv)
    text = catalog_source()
    current = CATALOG.read_text(encoding="utf-8") if CATALOG.exists() else ""
    if args.check:
        if current != text:
            print(f"{CATALOG} is stale: run python tools/make_block_catalog.py", file=sys.stderr)
            return 1
        return 0
    if current != text:
        CATALOG.write_text(text, encoding="utf-8")
        print(f"wrote {CATALOG}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
