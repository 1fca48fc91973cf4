"""math_ops, matrix products: MatMul of two matrices, BatchMatMul over broadcast batches.

Imports only blockflow.spec and numpy.
"""
from __future__ import annotations

import numpy as np

from blockflow.spec import Attr, Input, Output, ShapeError, TensorType, block, broadcast_shapes, unbroadcast

from .common import check_arithmetic, fmt_shape


@block("MatMul", category="math_ops")
class MatMul:
    """Matrix product ``a @ b`` of two 2-D tensors, optionally transposing either first.

    With ``transpose_a`` the product uses ``a``'s transpose (so ``a`` is [k, m]); with
    ``transpose_b`` it uses ``b``'s (so ``b`` is [n, k]). The result is [m, n].
    """

    inputs = (Input("a"), Input("b"))
    outputs = (Output("product"),)
    attrs = (
        Attr("transpose_a", "bool", False, doc="multiply by a's transpose"),
        Attr("transpose_b", "bool", False, doc="multiply by b's transpose"),
    )
    grad_rule = """
        da = g · bᵀ
        db = aᵀ · g
        with transpose_a: da = b · gᵀ, db = a · g
        with transpose_b: da = g · b, db = gᵀ · a
        with both: da = bᵀ · gᵀ, db = gᵀ · aᵀ
        """

    def infer(a, b, *, transpose_a, transpose_b):
        if a.rank != 2 or b.rank != 2:
            raise ShapeError(f"MatMul multiplies matrices (rank 2), got a {a} and b {b}")
        check_arithmetic("MatMul", a, b)
        m, k = a.shape[::-1] if transpose_a else a.shape
        k2, n = b.shape[::-1] if transpose_b else b.shape
        if k is not None and k2 is not None and k != k2:
            ta, tb = (".T" if transpose_a else ""), (".T" if transpose_b else "")
            raise ShapeError(f"MatMul: inner sizes differ: a{ta} is {fmt_shape((m, k))}, b{tb} is {fmt_shape((k2, n))}")
        return TensorType((m, n), a.dtype)

    def forward(a, b, *, transpose_a, transpose_b):
        return np.matmul(a.T if transpose_a else a, b.T if transpose_b else b)

    # without transposes the forward is np.matmul itself: the runtime calls it directly
    forward.direct = lambda attrs: None if attrs["transpose_a"] or attrs["transpose_b"] else np.matmul

    def vjp(g, out, a, b, *, transpose_a, transpose_b, needs):
        # TensorFlow's _MatMulGrad; the transposes are views that BLAS reads directly.
        ga = gb = None
        if not transpose_a:
            if needs[0]:
                ga = g @ b if transpose_b else g @ b.T
            if needs[1]:
                gb = g.T @ a if transpose_b else a.T @ g
        else:
            if needs[0]:
                ga = b.T @ g.T if transpose_b else b @ g.T
            if needs[1]:
                gb = g.T @ a.T if transpose_b else a @ g
        return ga, gb

    vjp.fresh_result = True  # new arrays, one per input (run/lower.py, _accumulate)
    vjp.reads = ("a", "b")  # not out, which the runtime may then overwrite (run/overwrite.py)


@block("BatchMatMul", category="math_ops", aliases=("BatchMatMulV2",))
class BatchMatMul:
    """Matrix products over batches: ``x @ y`` on the last two axes, the leading axes broadcast.

    As TensorFlow's BatchMatMulV2: ``x`` is [..., m, k] and ``y`` [..., k, n] (with ``adj_x``,
    x is [..., k, m] and is transposed first; ``adj_y`` likewise for y), giving [..., m, n]; the
    batch axes broadcast like numpy's (a [2, 1, m, k] times a [3, k, n] is [2, 3, m, n]). The
    gradients are TensorFlow's products of ``g`` with the other operand, summed over the batch
    axes that were broadcast.
    """

    inputs = (Input("x"), Input("y"))
    outputs = (Output("output"),)
    attrs = (
        Attr("adj_x", "bool", False, doc="transpose the last two axes of x first"),
        Attr("adj_y", "bool", False, doc="transpose the last two axes of y first"),
    )
    grad_rule = """
        dx = unbroadcast(g · yᵀ)
        dy = unbroadcast(xᵀ · g)
        with adj_x: dx = unbroadcast(y · gᵀ), dy = unbroadcast(x · g)
        with adj_y: dx = unbroadcast(g · y), dy = unbroadcast(gᵀ · x)
        with both: dx = unbroadcast(yᵀ · gᵀ), dy = unbroadcast(gᵀ · xᵀ)
        products and ᵀ act on the last two axes; unbroadcast: summed over the batch axes that were broadcast
        """

    def infer(x, y, *, adj_x, adj_y):
        if x.rank < 2 or y.rank < 2:
            raise ShapeError(f"BatchMatMul needs tensors of rank 2 or more, got x {x} and y {y}")
        check_arithmetic("BatchMatMul", x, y)
        m, k = x.shape[-1:-3:-1] if adj_x else x.shape[-2:]
        k2, n = y.shape[-1:-3:-1] if adj_y else y.shape[-2:]
        if k is not None and k2 is not None and k != k2:
            raise ShapeError(f"BatchMatMul: inner sizes differ: x{' (adjoint)' if adj_x else ''} is "
                             f"{fmt_shape(x.shape)}, y{' (adjoint)' if adj_y else ''} is {fmt_shape(y.shape)}")
        try:
            batch = broadcast_shapes(x.shape[:-2], y.shape[:-2])
        except ShapeError:
            raise ShapeError(f"BatchMatMul: the batch axes of x {fmt_shape(x.shape)} and y {fmt_shape(y.shape)} "
                             f"do not broadcast") from None
        return TensorType(batch + (m, n), x.dtype)

    def forward(x, y, *, adj_x, adj_y):
        return np.matmul(np.swapaxes(x, -1, -2) if adj_x else x, np.swapaxes(y, -1, -2) if adj_y else y)

    def vjp(g, out, x, y, *, adj_x, adj_y, needs):
        # TensorFlow's _BatchMatMulV2Grad; the swapped axes are views that BLAS reads directly.
        def t(a):
            return np.swapaxes(a, -1, -2)

        gx = gy = None
        if not adj_x:
            if needs[0]:
                gx = _product_to(g, y, x.shape) if adj_y else _product_to(g, t(y), x.shape)
            if needs[1]:
                gy = _product_to(t(g), x, y.shape) if adj_y else _product_to(t(x), g, y.shape)
        else:
            if needs[0]:
                gx = _product_to(t(y), t(g), x.shape) if adj_y else _product_to(y, t(g), x.shape)
            if needs[1]:
                gy = _product_to(t(g), t(x), y.shape) if adj_y else _product_to(x, g, y.shape)
        return gx, gy


def _product_to(p, q, shape):
    """``unbroadcast(p @ q, shape)``, without making ``p @ q`` where ``shape`` lacks its batch axes.

    A [1, m, k] operand times a [B, k, n] one has a [B, m, k] gradient before it is summed back to
    [1, m, k]: B times the operand's size, gigabytes for a hostile B. The batch axes ``shape``
    lacks (size 1 or missing) are summed inside the product instead: an operand that is 1 there
    is left alone and the other summed first; where both have the axis it joins the contraction.
    """
    rank = max(p.ndim, q.ndim, len(shape))
    lead = rank - 2
    p = p.reshape((1,) * (rank - p.ndim) + p.shape)
    q = q.reshape((1,) * (rank - q.ndim) + q.shape)
    target = (1,) * (rank - len(shape)) + tuple(shape)
    folded = []
    for a in range(lead):
        if target[a] != 1 or max(p.shape[a], q.shape[a]) <= 1:
            continue
        if q.shape[a] == 1:
            p = p.sum(axis=a, keepdims=True)
        elif p.shape[a] == 1:
            q = q.sum(axis=a, keepdims=True)
        else:
            folded.append(a)
    if not folded:
        return unbroadcast(p @ q, tuple(shape))
    kept = [a for a in range(lead) if a not in folded]
    # p: [kept..., m, folded..., c] -> [kept..., m, folded * c]; q: [kept..., folded * c, k].
    p = p.transpose(kept + [lead] + folded + [lead + 1])
    p = p.reshape(p.shape[:len(kept) + 1] + (int(np.prod(p.shape[len(kept) + 1:])),))
    q = q.transpose(kept + folded + [lead, lead + 1])
    q = q.reshape(q.shape[:len(kept)] + (int(np.prod(q.shape[len(kept):-1])), q.shape[-1]))
    return unbroadcast(np.expand_dims(p @ q, tuple(folded)), tuple(shape))
