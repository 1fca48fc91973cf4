"""Finite without reading it: a certificate that a Variable's gradient made by one matrix product
holds no NaN or Inf, from the product's operands (lower.CERTIFY_PRODUCTS; runtime._Plan.check
then skips that gradient).

Every entry of a product of two matrices, with any transposes, is a sum over the contracted axis
of products of one entry of each; by Cauchy-Schwarz its size, and that of every partial sum
BLAS forms on the way, is at most ||x|| ||g|| (Frobenius norms). So when both operands are finite
and that bound is far below the dtype's largest number, every entry is finite. The first layer
of a network is where this pays: its weights' gradient (784x256 in the MLP benchmark, 200k
values) is larger than the layer's input and cotangent together (50k and 16k), and reading those
two (one BLAS dot each) is cheaper than reading the gradient.

Must not import PySide6 or the block library.
"""
from __future__ import annotations

import math

import numpy as np

from blockflow.run.numerics import DOT

__all__ = ["certify_product"]

# a quarter of the largest number: room for the rounding of the norms and of BLAS's sums
_SAFE = {np.dtype(np.float32): float(np.finfo(np.float32).max) / 4,
         np.dtype(np.float64): float(np.finfo(np.float64).max) / 4}


def certify_product(x, g) -> bool:
    """Whether every product of the matrices ``x`` and ``g`` (contracting one axis of each) is
    sure to be finite; False when it cannot tell (then the product itself is checked)."""
    if type(x) is not np.ndarray or type(g) is not np.ndarray:
        return False
    safe = _SAFE.get(x.dtype)
    if safe is None or g.dtype != x.dtype or not (x.flags.c_contiguous and g.flags.c_contiguous):
        return False
    fx, fg = x.ravel(), g.ravel()
    xx, gg = float(DOT(fx, fx)), float(DOT(fg, fg))
    return math.isfinite(xx) and math.isfinite(gg) and math.sqrt(xx) * math.sqrt(gg) < safe
