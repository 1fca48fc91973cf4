"""array_ops, picking entries by index or by condition: Gather, GatherNd, ScatterNd; Select, Where.

Imports only blockflow.spec and numpy.
"""
from __future__ import annotations

import math

import numpy as np

from blockflow.spec import Attr, Input, Output, ShapeError, TensorType, block, broadcast_shapes, reserve, unbroadcast

from .common import fmt_shape, merge_shapes, reduce_max, reduce_min
from .folding import as_int, axis_in, fold, static_int, static_sizes


def _gather_axes(op, params_rank, indices_rank, axis, batch_dims):
    """Gather's axis and batch_dims, normalized and checked."""
    if batch_dims < 0:
        batch_dims += indices_rank
    if not 0 <= batch_dims <= indices_rank:
        raise ShapeError(f"{op}: batch_dims must be in [{-indices_rank}, {indices_rank}] for indices of "
                         f"rank {indices_rank}")
    a = axis_in(op, axis, params_rank)
    if a < batch_dims:
        raise ShapeError(f"{op}: axis {axis} comes before the {batch_dims} batch dimension(s)")
    return a, batch_dims


def _check_indices(op, indices, n):
    """TF's CPU kernels reject out-of-range indices (numpy would wrap negative ones)."""
    if indices.size:
        lo, hi = reduce_min(indices, axis=None), reduce_max(indices, axis=None)
        if lo < 0 or hi >= n:
            bad = lo if lo < 0 else hi
            raise IndexError(f"{op}: index {bad} is out of range [0, {n})")


@block("Gather", category="array_ops", aliases=("GatherV2", "gather"))
class Gather:
    """Picks slices of ``params`` along ``axis`` at ``indices``: ``params[..., indices, ...]``.

    TensorFlow's ``tf.gather`` (op GatherV2). The result's shape is
    ``params.shape[:axis] + indices.shape[batch_dims:] + params.shape[axis + 1:]``. With
    ``batch_dims`` = b, the first b axes of ``params`` and ``indices`` are batch axes walked in
    step (each batch entry gathers with its own indices). An index outside [0, size of axis) is
    an error. The gradient scatter-adds ``g`` into zeros of ``params``' shape: an index repeated
    gets the sum of its gradients. No gradient flows to ``indices`` (integers).
    """

    inputs = (Input("params"),
              Input("indices", dtype="int", doc="integer positions along axis"),
              Input("axis", dtype="int", static=True, optional=True, doc="0 when unwired"))
    outputs = (Output("output"),)
    attrs = (Attr("batch_dims", "int", 0, doc="leading axes shared by params and indices"),)
    grad_rule = """
        dparams = zeros of params' shape with g scatter-added at indices along axis
        with batch_dims, each batch entry scatters into its own slice of params
        an index repeated gets the sum of its gradients; no gradient to indices (integers)
        """

    def infer(params, indices, axis, *, batch_dims):
        ax = 0 if axis is None else static_int("Gather", "axis", axis)
        if params.rank == 0:
            raise ShapeError("Gather: params must have rank 1 or more, got a scalar")
        a, b = _gather_axes("Gather", params.rank, indices.rank, ax, batch_dims)
        batch = merge_shapes("Gather", params.shape[:b], indices.shape[:b], "batch sizes of params and indices")
        shape = batch + params.shape[b:a] + indices.shape[b:] + params.shape[a + 1:]
        return fold("Gather", TensorType(shape, params.dtype), Gather.forward, params, indices, axis,
                     batch_dims=batch_dims)

    def forward(params, indices, axis, *, batch_dims):
        a = 0 if axis is None else as_int(axis)
        if a < 0:
            a += params.ndim
        _check_indices("Gather", indices, params.shape[a])
        if not batch_dims:
            return np.take(params, indices, axis=a)
        b = batch_dims % indices.ndim if batch_dims < 0 else batch_dims
        batch, pre, n, post, m = _gather_layout(params.shape, indices.shape, a, b)
        idx = indices.reshape(batch, 1, m, 1)
        out = np.take_along_axis(params.reshape(batch, pre, n, post), idx, axis=2)
        return out.reshape(params.shape[:a] + indices.shape[b:] + params.shape[a + 1:])

    def vjp(g, out, params, indices, axis, *, batch_dims):
        a = 0 if axis is None else as_int(axis)
        if a < 0:
            a += params.ndim
        b = batch_dims % indices.ndim if batch_dims < 0 else batch_dims
        batch, pre, n, post, m = _gather_layout(params.shape, indices.shape, a, b)
        gp = np.zeros((batch, pre, n, post), g.dtype)
        if batch * pre == 1:  # the common case: one slab, a plain scatter-add of rows
            np.add.at(gp.reshape(n, post), indices.reshape(-1), g.reshape(m, post))
        else:
            np.add.at(gp, (np.arange(batch).reshape(-1, 1, 1), np.arange(pre).reshape(1, -1, 1),
                           indices.reshape(batch, 1, m)), g.reshape(batch, pre, m, post))
        return gp.reshape(params.shape), None, None


def _gather_layout(shape, indices_shape, axis, b):
    """Gather as a gather from [batch, pre, n, post] params with [batch, m] indices: the sizes of
    the batch axes, those between them and ``axis``, of ``axis``, after it, of the indices."""
    p = math.prod
    return p(shape[:b]), p(shape[b:axis]), shape[axis], p(shape[axis + 1:]), p(indices_shape[b:])


def _nd_flat_index(op, indices, shape):
    """Positions of the index vectors in the last axis of ``indices`` into ``shape``'s leading
    axes, flattened (raising for an index out of range)."""
    k = indices.shape[-1]
    if k == 0:
        return np.zeros(indices.shape[:-1], np.intp)
    try:
        return np.ravel_multi_index(tuple(np.moveaxis(indices, -1, 0)), shape[:k])
    except ValueError:
        bad = next(tuple(v) for v in indices.reshape(-1, k)
                   if any(not 0 <= i < d for i, d in zip(v, shape)))
        raise IndexError(f"{op}: index {list(map(int, bad))} is out of range for the leading sizes "
                         f"{list(shape[:k])}") from None


def _nd_check(op, params_shape, indices):
    if indices.rank == 0:
        raise ShapeError(f"{op}: indices must have rank 1 or more (index vectors in its last axis), "
                         f"got a scalar")
    k = indices.shape[-1]
    if k is None:
        raise ShapeError(f"{op}: the last size of indices {fmt_shape(indices.shape)} (the length of each index "
                         f"vector) must be known when compiling")
    if k > len(params_shape):
        raise ShapeError(f"{op}: index vectors of length {k} (indices {fmt_shape(indices.shape)}) are longer "
                         f"than the rank of {fmt_shape(params_shape)}")
    return k


@block("GatherNd", category="array_ops", aliases=("gather_nd",))
class GatherNd:
    """Picks entries or slices of ``params`` at the index vectors in ``indices``' last axis.

    TensorFlow's ``tf.gather_nd``: ``indices`` is [..., k] and the result is
    ``indices.shape[:-1] + params.shape[k:]``, with ``output[i] = params[tuple(indices[i])]``.
    An index out of range is an error. The gradient scatter-adds ``g`` into zeros of ``params``'
    shape (repeated indices accumulate). No gradient flows to ``indices`` (integers).
    """

    inputs = (Input("params"), Input("indices", dtype="int", doc="index vectors along the last axis"))
    outputs = (Output("output"),)
    grad_rule = """
        dparams = zeros of params' shape with g scatter-added at the index vectors in indices
        repeated indices accumulate; no gradient to indices (integers)
        """

    def infer(params, indices):
        k = _nd_check("GatherNd", params.shape, indices)
        t = TensorType(indices.shape[:-1] + params.shape[k:], params.dtype)
        return fold("GatherNd", t, GatherNd.forward, params, indices)

    def forward(params, indices):
        k = indices.shape[-1]
        flat = _nd_flat_index("GatherNd", indices, params.shape)
        return params.reshape((math.prod(params.shape[:k]),) + params.shape[k:])[flat]

    def vjp(g, out, params, indices):
        k = indices.shape[-1]
        flat = _nd_flat_index("GatherNd", indices, params.shape)
        rest = params.shape[k:]
        gp = np.zeros((math.prod(params.shape[:k]),) + rest, g.dtype)
        np.add.at(gp, flat.reshape(-1), g.reshape((flat.size,) + rest))
        return gp.reshape(params.shape), None


@block("ScatterNd", category="array_ops", aliases=("scatter_nd",))
class ScatterNd:
    """Zeros of ``shape`` with ``updates`` added at the index vectors in ``indices``.

    TensorFlow's ``tf.scatter_nd``, GatherNd's adjoint: ``indices`` is [..., k], ``updates`` is
    ``indices.shape[:-1] + shape[k:]``; updates at a repeated index are summed. An index out of
    range is an error. The gradient to ``updates`` gathers ``g`` at the indices.
    """

    inputs = (Input("indices", dtype="int", doc="index vectors along the last axis"),
              Input("updates", dtype="number"),
              Input("shape", dtype="int", static=True, doc="the result's shape"))
    outputs = (Output("output"),)
    grad_rule = """
        dupdates = g gathered at the index vectors in indices (GatherNd(g, indices))
        no gradient to indices (integers)
        """

    def infer(indices, updates, shape):
        dims = static_sizes("ScatterNd", "shape", shape)
        k = _nd_check("ScatterNd", dims, indices)
        merge_shapes("ScatterNd", updates.shape, indices.shape[:-1] + dims[k:],
               "updates and indices[:-1] + shape[k:]")
        return fold("ScatterNd", TensorType(dims, updates.dtype), ScatterNd.forward, indices, updates, shape)

    def forward(indices, updates, shape):
        dims = tuple(shape.tolist()) if type(shape) is np.ndarray else tuple(shape)
        k = indices.shape[-1]
        flat = _nd_flat_index("ScatterNd", indices, dims)
        rest = dims[k:]
        want = indices.shape[:-1] + rest
        if updates.shape != want:
            raise ShapeError(f"ScatterNd: updates have shape {list(updates.shape)}, indices and shape ask "
                             f"for {list(want)}")
        out = np.zeros((math.prod(dims[:k]),) + rest, updates.dtype)
        np.add.at(out, flat.reshape(-1), updates.reshape((flat.size,) + rest))
        return out.reshape(dims)

    def vjp(g, out, indices, updates, shape):
        k = indices.shape[-1]
        flat = _nd_flat_index("ScatterNd", indices, g.shape)
        return None, g.reshape((math.prod(g.shape[:k]),) + g.shape[k:])[flat], None


# --------------------------------------------------------------------------------------------
# Choosing by condition


@block("Select", category="array_ops", aliases=("SelectV2", "where_v2"))
class Select:
    """Elementwise choice: ``t`` where ``condition`` is true, ``e`` where it is false.

    TensorFlow's ``tf.where(condition, x, y)`` (op SelectV2): the three inputs broadcast against
    each other with numpy's rule. (TF1's Select also took a [batch] condition choosing whole rows
    of [batch, ...] tensors: with broadcasting, give the condition the shape [batch, 1, ...].)
    The gradient goes to ``t`` where the condition holds and to ``e`` elsewhere, summed over
    broadcast axes; none to ``condition`` (boolean).
    """

    inputs = (Input("condition", dtype="bool"), Input("t"), Input("e"))
    outputs = (Output("output"),)
    grad_rule = """
        dt = unbroadcast(g where condition, else 0)
        de = unbroadcast(g where not condition, else 0)
        no gradient to condition (bool)
        unbroadcast: summed over the broadcast axes, back to the input's shape
        """

    def infer(condition, t, e):
        if t.dtype != e.dtype:
            raise ShapeError(f"Select: t is {t.dtype.name} but e is {e.dtype.name}")
        out = TensorType(broadcast_shapes(condition.shape, t.shape, e.shape), t.dtype)
        return fold("Select", out, Select.forward, condition, t, e)

    def forward(condition, t, e):
        return np.where(condition, t, e)

    def vjp(g, out, condition, t, e, *, needs):
        return (None,
                unbroadcast(np.where(condition, g, 0), t.shape) if needs[1] else None,
                unbroadcast(np.where(condition, 0, g), e.shape) if needs[2] else None)


@block("Where", category="array_ops")
class Where:
    """The coordinates of the true (non-zero) entries of ``condition``: int64 [count, rank].

    TensorFlow's ``tf.where(condition)`` with one argument (op Where): one row per true entry, in
    row-major order. The count is known only when running (unless ``condition`` is a constant),
    so the first size is open. Not differentiable (an integer output).
    """

    inputs = (Input("condition", dtype="any"),)
    outputs = (Output("index"),)

    def infer(condition):
        if condition.value is not None:
            return TensorType.of(Where.forward(condition.value))
        return TensorType((None, condition.rank), "int64")

    def forward(condition):
        # The number of rows depends on the values: the runtime cannot check this output before
        # the block runs, so the block does (numpy builds the coordinates axis by axis first).
        shape = (int(np.count_nonzero(condition)), condition.ndim)
        reserve(shape, np.int64, "Where's output (the coordinates of the true entries)")
        reserve(shape, np.intp, "Where's coordinates, axis by axis")
        return np.argwhere(condition).astype(np.int64, copy=False)
