"""blockflow's own block library, found through the ``blockflow.blocks`` entry point.

One module per kind of block: the math_ops blocks are in math_*.py (math_unary, math_binary,
...), the array_ops ones in array_*.py, the nn_ops ones in nn_*.py. common.py, conv_groups.py,
folding.py, fused.py, window_geometry.py and windows.py hold no block: they are what the block
modules share. catalog.py (written by tools/make_block_catalog.py) says which module declares
each block.

Imports only blockflow.spec and numpy (checked by import-linter).
"""
from __future__ import annotations

import importlib
from pathlib import Path

from blockflow.spec import BlockSpec

from . import catalog


def all_blocks() -> list[BlockSpec]:
    """Every block this package declares, in module order."""
    return [spec for module in catalog.MODULES for spec in module_blocks(module)]


def module_blocks(module: str) -> list[BlockSpec]:
    """The blocks one module of the package (``"math_unary"``) declares, importing it."""
    found = importlib.import_module(f"{__name__}.{module}")
    return [v for v in vars(found).values() if isinstance(v, BlockSpec)]


# What makes all_blocks a lazy provider (blockflow.registry): the registry knows every block's
# name and module from the catalog and imports a module when one of its blocks is first asked for,
# so a command running a small page imports a few of the 26 modules (the whole library was 30-40
# ms of a 0.3 s start).
all_blocks.blocks = catalog.BLOCKS
all_blocks.aliases = catalog.ALIASES
all_blocks.load = module_blocks


def layer_files() -> list[Path]:
    """The layer library's files (layers/*.bflow.json, written by tools/make_layers.py): the
    ``blockflow.layers`` entry point, read by blockflow.io.library."""
    return sorted((Path(__file__).parent / "layers").glob("*.bflow.json"))
