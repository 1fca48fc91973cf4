"""blockflow's own block library, found through the ``blockflow.blocks`` entry point.

One module per kind of block: the math_ops blocks are in math_*.py (math_unary, math_binary,
...), the array_ops ones in array_*.py, the nn_ops ones in nn_*.py. common.py, conv_groups.py,
folding.py, fused.py, window_geometry.py and windows.py hold no block: they are what the block
modules share.

Imports only blockflow.spec and numpy (checked by import-linter).
"""
from __future__ import annotations

from pathlib import Path

from blockflow.spec import BlockSpec

from . import array_build, array_gather, array_identity, array_join, array_shape, array_slice, array_tile
from . import math_binary, math_einsum, math_logic, math_matmul, math_reductions, math_sequences, math_unary
from . import nn_activations, nn_conv, nn_losses, nn_norm, nn_pool, nn_softmax, nn_topk
from . import composite_ports, data_ops, random_ops, state_ops, training_ops

_MODULES = (
    array_identity, array_shape, array_join, array_slice, array_gather, array_tile, array_build,
    math_binary, math_unary, math_matmul, math_einsum, math_reductions, math_logic, math_sequences,
    nn_activations, nn_softmax, nn_losses, nn_conv, nn_pool, nn_norm, nn_topk,
    state_ops, training_ops, random_ops, data_ops, composite_ports,
)


def all_blocks() -> list[BlockSpec]:
    """Every block this package declares, in module order."""
    return [v for m in _MODULES for v in vars(m).values() if isinstance(v, BlockSpec)]


def layer_files() -> list[Path]:
    """The layer library's files (layers/*.bflow.json, written by tools/make_layers.py): the
    ``blockflow.layers`` entry point, read by blockflow.io.library."""
    return sorted((Path(__file__).parent / "layers").glob("*.bflow.json"))
