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

from blockflow.run.memplan import Line
from blockflow.run.numerics import DOT

__all__ = ["certificates", "certify_product"]

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


def certificates(w, grad_slots, overhead: int) -> dict:
    """Lines certifying returned gradients finite from their product's operands, inserted into
    the plan's lines (``w``, lower.py's writer): {slot: the certificate's name}.

    A gradient qualifies when it is one MatMul vjp's part, never summed, of a fixed shape larger
    than its operands (the other input and the cotangent) together by more than a certificate's
    own cost (``overhead`` elements: lower.CERTIFY_OVERHEAD); the line goes right after that
    vjp, while both are alive."""
    out, inserts = {}, []
    for s in grad_slots:
        sole = w.sole.get(s)
        if sole is None or sole[0].spec.name != "MatMul":
            continue
        st, j, at = sole
        pos = st.in_edges[j][0]
        other, o = st.inputs[1 - pos], st.outputs[0]
        sizes = [w.slots[i].type.shape for i in (s, other, o)]
        if other is None or any(None in shape for shape in sizes):
            continue
        size, other_size, g_size = (math.prod(shape) for shape in sizes)
        if other_size + g_size + overhead >= size:
            continue
        x, reads = w.arg(other)
        out[s] = f"k{s}"
        inserts.append((at + 1, Line(f"k{s} = _cert({x}, g{o})", reads | {f"g{o}"}, {f"k{s}"})))
    for at, line in sorted(inserts, key=lambda item: -item[0]):
        w.lines.insert(at, line)
    w.ns["_cert"] = certify_product
    return out
