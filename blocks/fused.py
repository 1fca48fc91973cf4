"""What the elementwise blocks share to make fewer passes over memory: a sum of a product read
without writing the product out, and the test for a gradient that may be written into its
cotangent's array.

A gradient such as RealDiv's ``dy = -sum(g / y * z)`` for a y broadcast over x used to write the
product out (a new array the size of x) and then sum it. It is now one np.dot over the two
arrays (``DOT_GRADIENT_SUMS``): BLAS sums in its own blocked order, so the bits differ from
np.sum's, by no more than rounding (tests/test_fused_grads.py checks it against float64).

A forward value keeps its bits: numpy sums a contiguous float32 or float64 array as a pairwise
tree (it halves n, the first half rounded down to a multiple of 8, until a piece holds at most
128 values). The same tree cut into pieces of at most ``_LEAF`` values, each summed by numpy and
added up in the tree's order, gives the same bits (the tests check it on every cut). So Sum's
forward of a product (``sum_of_product``) makes the product a piece at a time into one buffer
that stays in cache, and gives what ``np.sum(a * b)`` gives.

Holds no block. Imports only numpy.
"""
from __future__ import annotations

import numpy as np

__all__ = ["DOT_GRADIENT_SUMS", "FUSE_MIN_SIZE", "FUSE_PRODUCT_SUMS", "fusable", "into_g_position", "product_sum",
           "sum_of_product", "tree_sum", "writable_like"]

#: sum products without writing them out (off: the product written out, then summed; the tests
#: compare)
FUSE_PRODUCT_SUMS = True
#: a gradient's sum of a product is one np.dot (BLAS, float32 sums in float32 in a blocked order:
#: within 1e-8 of the float64 sum relative to the sum of magnitudes, on 1e6 normal values);
#: off: numpy's pairwise tree a piece at a time, the bits of np.sum(a * b) but half the speed
DOT_GRADIENT_SUMS = True
#: the largest piece of the tree summed by numpy (1 MiB of float32). Each piece costs three
#: numpy calls, and a call right after streaming a piece runs with cold caches (5-20 us):
#: on 1e6 float32 values with cold caches, pieces of 2**15, 2**16, 2**17, 2**18 and 2**20 values
#: took 1077, 997, 635, 548 and 589 us, the product written out and summed 701 us
_LEAF = 1 << 18
#: below this many values the product's array is small and the tree's Python costs more than it
FUSE_MIN_SIZE = 1 << 15
#: dtypes numpy sums by the same pairwise tree in their own precision (float16 is summed in float32)
_TREE_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def tree_sum(n: int, leaf, lo: int = 0):
    """numpy's pairwise sum of ``n`` values from ``lo``, with each piece of at most ``_LEAF``
    values summed by ``leaf(lo, hi)`` (which returns ``np.add.reduce`` of that piece)."""
    if n <= _LEAF:
        return leaf(lo, lo + n)
    half = n // 2
    half -= half % 8
    return tree_sum(half, leaf, lo) + tree_sum(n - half, leaf, lo + half)


def fusable(a, b, shape) -> bool:
    """Whether ``unbroadcast(a * b, shape)`` is one sum over every value of two contiguous arrays
    of one shape and dtype that numpy sums by its pairwise tree."""
    return (FUSE_PRODUCT_SUMS and type(a) is np.ndarray and type(b) is np.ndarray and a.shape == b.shape
            and a.size >= FUSE_MIN_SIZE and a.dtype == b.dtype and a.dtype in _TREE_DTYPES
            and len(shape) <= a.ndim and all(d == 1 for d in shape)
            and a.flags.c_contiguous and b.flags.c_contiguous)


def product_sum(a, b, shape, unbroadcast, divide_by=None):
    """``unbroadcast(a * b, shape)`` for a gradient, without the product's array when ``shape``
    sums every value (a gradient for a scalar, or a [1, 1] tensor, broadcast over the other):
    one np.dot (DOT_GRADIENT_SUMS: BLAS's order of summing, not numpy's pairwise tree, so other
    bits, different by rounding only), else numpy's own tree a piece at a time (the same bits).

    With ``divide_by`` (a value of one element), ``a`` is an array nobody else holds and is first
    divided by it in place: ``a`` then holds ``a / divide_by`` and the sum is of that times ``b``."""
    if a.size < FUSE_MIN_SIZE or not fusable(a, b, shape):  # the size first: tiny ops pay one test
        if divide_by is not None:
            np.true_divide(a, divide_by, out=a)
        return unbroadcast(a * b, shape)
    if DOT_GRADIENT_SUMS:
        if divide_by is not None:
            np.true_divide(a, divide_by, out=a)
        total = np.dot(a.reshape(-1), b.reshape(-1))
    else:
        total = _tree_product(a, b, None if divide_by is None else np.reshape(divide_by, ()))
    # unbroadcast gives a numpy scalar for shape (), else an array of that shape
    return total if shape == () else np.reshape(total, shape)


def sum_of_product(a, b):
    """``np.add.reduce(a * b, axis=None)`` bit for bit, for two arrays that are ``fusable``:
    numpy's tree a piece at a time, without the product's array (Sum's forward of a product)."""
    return _tree_product(a, b, None)


def _tree_product(a, b, d):
    fa, fb = a.reshape(-1), b.reshape(-1)
    piece = np.empty(min(a.size, _LEAF), a.dtype)
    add, multiply, divide = np.add.reduce, np.multiply, np.true_divide

    def leaf(lo, hi):
        p = piece[:hi - lo]
        if d is not None:  # a's piece divided while it is in cache
            divide(fa[lo:hi], d, out=fa[lo:hi])
        multiply(fa[lo:hi], fb[lo:hi], out=p)
        return add(p)
    return tree_sum(a.size, leaf)


def writable_like(g, out) -> bool:
    """Whether a cotangent ``g`` that the run alone holds can take a result of ``out``'s shape and
    dtype in place (the runtime passes such a g to a vjp's ``into_g`` variant; run/lower.py)."""
    return type(g) is np.ndarray and g.shape == out.shape and g.dtype == out.dtype and g.flags.writeable


def into_g_position(out, inputs, needs):
    """Which input's gradient a vjp's ``into_g`` variant writes into the cotangent's array: the
    first one needed whose shape and dtype are out's (None: none). The runtime's memory plan
    counts by the same rule (run/memplan.py)."""
    for pos, (v, need) in enumerate(zip(inputs, needs)):
        if need and v.shape == out.shape and v.dtype == out.dtype:
            return pos
    return None
