"""blockflow's own block library, found through the ``blockflow.blocks`` entry point.

Imports only blockflow.spec and numpy (checked by import-linter).
"""
from __future__ import annotations

from blockflow.spec import BlockSpec

from . import array_ops, math_ops, nn_ops, state_ops
from . import training_ops
from . import random_ops
from . import data_ops

_MODULES = (array_ops, math_ops, nn_ops, state_ops, training_ops, random_ops, data_ops)


def all_blocks() -> list[BlockSpec]:
    """Every block this package declares, in module order."""
    return [v for m in _MODULES for v in vars(m).values() if isinstance(v, BlockSpec)]
