"""nn_ops, the k largest entries: TopK, InTopK.

Imports only blockflow.spec and numpy.
"""
from __future__ import annotations

import numpy as np

from blockflow.spec import Attr, Input, Output, ShapeError, TensorType, block, reserve

from .common import fmt_shape, no_bool, shared_batch, single_int


def _scalar_k(op, k, default=None):
    if k is None:
        if default is None:
            raise ShapeError(f"{op}: k must be given")
        return default
    k = single_int(op, "k", k)
    if k < 0:
        raise ShapeError(f"{op}: k must be at least 0, got {k}")
    return k


@block("TopK", category="nn_ops", aliases=("TopKV2",))
class TopK:
    """The ``k`` largest entries of ``input`` along its last axis, and their indices.

    As TensorFlow's ``tf.math.top_k``: ``values`` and ``indices`` have the input's shape with the
    last size replaced by ``k`` (default 1, at most that size). With ``sorted`` the values come
    in descending order; equal values come lower index first. Without ``sorted`` they come in
    the order of their indices. ``indices`` are int32 and not differentiable. The gradient of
    ``values`` is scattered back to the chosen positions (0 elsewhere).
    """

    inputs = (Input("input", dtype="number"),
              Input("k", dtype="int", static=True, optional=True, default=1, doc="how many entries"))
    outputs = (Output("values"), Output("indices", differentiable=False))
    attrs = (Attr("sorted", "bool", True, doc="values in descending order (else in index order)"),)
    grad_rule = """
        g: the gradient arriving at values (indices carry none)
        dinput = g scattered back to the positions in indices along the last axis, 0 elsewhere
        """

    def infer(input, k, *, sorted):
        no_bool("TopK", input)
        k = _scalar_k("TopK", k, 1)
        if input.rank < 1:
            raise ShapeError(f"TopK needs an input of rank 1 or more, got {input}")
        n = input.shape[-1]
        if n is not None and n < k:
            raise ShapeError(f"TopK: input {fmt_shape(input.shape)} must have at least k = {k} entries in its "
                             f"last axis, has {n}")
        shape = input.shape[:-1] + (k,)
        return TensorType(shape, input.dtype), TensorType(shape, np.int32)

    def forward(input, k, *, sorted):
        k = _scalar_k("TopK", k, 1)
        n = input.shape[-1] if input.ndim else 0
        if input.ndim < 1 or n < k:
            raise ShapeError(f"TopK: input {list(input.shape)} must have at least k = {k} entries in its "
                             f"last axis")
        # A stable ascending sort of the reversed rows, read backwards: descending values, and
        # ties in increasing index order (any dtype, no negation).
        reserve(input.shape, np.intp, "TopK's sort order")
        order = np.argsort(input[..., ::-1], axis=-1, kind="stable")[..., :n - k - 1 if k < n else None:-1]
        indices = np.subtract(n - 1, order, dtype=np.int32)
        if not sorted:
            indices.sort(axis=-1)
        return np.take_along_axis(input, indices, axis=-1), indices

    def vjp(g, out, input, k, *, sorted):
        if g[0] is None:
            return None, None
        gx = np.zeros(input.shape, g[0].dtype)
        np.put_along_axis(gx, out[1], g[0], axis=-1)
        return gx, None


@block("InTopK", category="nn_ops", aliases=("InTopKV2",))
class InTopK:
    """Whether each row's target class is among the ``k`` largest ``predictions`` (bool [batch]).

    As TensorFlow's ``tf.math.in_top_k``: ``predictions`` is [batch, classes] and ``targets``
    [batch] holds class indices. Row i is true when fewer than ``k`` classes have a prediction
    strictly greater than ``predictions[i, targets[i]]``, so classes tied at the boundary all
    count as in the top k. A target outside ``[0, classes)`` or a row with a non-finite
    prediction gives false. The output is boolean and not differentiable.
    """

    inputs = (Input("predictions", dtype="float"), Input("targets", dtype="int"),
              Input("k", dtype="int", static=True, doc="how many top classes count"))
    outputs = (Output("precision"),)

    def infer(predictions, targets, k):
        _scalar_k("InTopK", k)
        return TensorType((shared_batch("InTopK", predictions, targets, ("predictions", "targets")),), np.bool_)

    def forward(predictions, targets, k):
        k = _scalar_k("InTopK", k)
        batch, classes = predictions.shape
        if targets.shape != (batch,):
            raise ShapeError(f"InTopK: predictions {list(predictions.shape)} and targets "
                             f"{list(targets.shape)} differ in batch size")
        if not classes:
            return np.zeros(batch, np.bool_)
        valid = (targets >= 0) & (targets < classes)
        target = predictions[np.arange(batch), np.where(valid, targets, 0)]
        above = np.count_nonzero(predictions > target[:, None], axis=1)
        valid &= np.isfinite(predictions).all(axis=1)
        valid &= above < k
        return valid
