"""ONNX's indexing and rearranging ops made of a few blocks: GatherElements and ScatterElements
(GatherNd and ScatterNd with a grid of coordinates), GatherND, ScatterND, OneHot, Hardmax, Trilu (a
mask constant), EyeLike (a constant), DepthToSpace and SpaceToDepth (Reshape, Transpose,
Reshape), and Range (folded when its inputs are known).

What decides a block's static inputs (a grid's size, a mask, a reshape's target) must be known
while importing: a static shape, a constant.
"""
from __future__ import annotations

import numpy as np

from blockflow.importing.onnx_build import Known, Refused
from blockflow.importing.onnx_mapping import Call, Unsupported, maps
from blockflow.importing.onnx_read import DTYPES


def _from_end(call: Call, idx, size: int, hint: str, dtype):
    """Indices (of ``dtype``) with ONNX's negative ones, counting from the end, made positive;
    the others kept, so one out of range stays out of range."""
    if isinstance(idx, Known):
        v = idx.value
        return call.const(np.where(v < 0, v + size, v), v.dtype)
    neg = call.block("Less", x=idx, y=call.const(0, dtype), hint=f"{hint}_neg")
    wrapped = call.block("Add", x=idx, y=call.const(size, dtype), hint=f"{hint}_wrap")
    return call.block("Select", condition=neg, t=wrapped, e=idx, hint=hint)


@maps("GatherElements", blocks="GatherNd (Select, Add, Cast, ExpandDims, Concat for the coordinates), or "
                                "Gather with batch axes",
      notes="the indices' static shape gives a grid of coordinates, the indices take the axis's place; "
            "negative indices count from the end; along the last axis with open sizes (a batch): a Gather "
            "whose batch axes are the others, which must then be the data's (else the run stops, naming it)")
def gather_elements(call: Call):
    data_shape = call.shape(0)
    shape = call.shape(1)
    if shape is not None and data_shape is not None and len(shape) == len(data_shape) and \
            any(not isinstance(d, int) for d in shape) and call.attr("axis", 0) % len(shape) == len(shape) - 1:
        return _gather_last(call, data_shape)
    shape = call.static_shape(1, "GatherElements")
    rank = len(shape)
    if data_shape is None or len(data_shape) != rank:
        raise Unsupported("GatherElements of data whose rank is not the indices'")
    axis = call.axis(call.attr("axis", 0), rank, "GatherElements' axis")
    size = data_shape[axis]
    if not isinstance(size, int):
        raise Unsupported("GatherElements along an axis of unknown size (a negative index counts from its end)")
    idx = _from_end(call, call.input(1), size, "index", call.dtype(1))
    if not isinstance(idx, Known) and call.dtype(1) != np.int64:
        idx = call.block("Cast", {"DstT": "int64"}, x=idx, hint="index64")
    call.making((rank, *shape), np.int64, "its grid of coordinates")
    grid = np.indices(shape, dtype=np.int64)
    coords = []
    for d in range(rank):
        if d != axis:
            coords.append(call.const(grid[d][..., None]))
        elif isinstance(idx, Known):
            coords.append(call.const(idx.value.astype(np.int64)[..., None]))
        else:
            coords.append(call.block("ExpandDims", input=idx, axis=call.const(-1, np.int32), hint="index_col"))
    if rank == 1:
        where = coords[0]
    else:
        where = call.block("Concat", values=coords, axis=call.const(rank, np.int32), hint="coords")
    return call.block("GatherNd", params=call.input(0), indices=where, typed=0)


def _gather_last(call: Call, data_shape):
    """GatherElements along the last axis as a Gather with every other axis a batch axis: the
    same entries when the indices' other sizes are the data's (an exporter's cross-entropy picks
    one class per row so), an error naming the block when they are not."""
    rank = len(data_shape)
    size = data_shape[-1]
    if not isinstance(size, int):
        raise Unsupported("GatherElements along an axis of unknown size (a negative index counts from its end)")
    idx = _from_end(call, call.input(1), size, "index", call.dtype(1))
    return call.block("Gather", {"batch_dims": rank - 1}, params=call.input(0), indices=idx,
                      axis=call.const(rank - 1, np.int32), typed=0)


def _scalar(call: Call, value, i: int, hint: str):
    """Entry ``i`` of a 1-D value, known or computed."""
    if isinstance(value, Known):
        return call.const(value.value.reshape(-1)[i], value.dtype)
    return call.block("Gather", params=value, indices=call.const(i, np.int64), axis=call.const(0, np.int32),
                      hint=hint)


@maps("OneHot", blocks="OneHot (Cast, Select, Add for the indices; Gather for computed values)",
      notes="a known depth; negative indices count from the end, out of range ones give a row of "
            "off_value; non-integer indices cast to int64, as ONNX does")
def one_hot(call: Call):
    depth = call.need_known(1, "OneHot's depth").reshape(-1)
    if depth.size != 1:
        raise Unsupported("OneHot's depth must hold one value")
    depth = int(depth[0])
    rank = call.rank(0)
    axis = call.attr("axis", -1)
    if not -rank - 1 <= axis <= rank:    # the new axis's place in the output, of rank + 1 axes
        raise Refused(f"OneHot's axis {axis} is out of range for indices of rank {rank} "
                      f"(from {-rank - 1} to {rank})")
    axis = axis + rank + 1 if axis < 0 else axis
    idx, dtype = call.input(0), call.dtype(0)
    if dtype is None or dtype.kind not in "iu":
        idx, dtype = call.block("Cast", {"DstT": "int64"}, x=idx, hint="index_int"), np.dtype(np.int64)
    idx = _from_end(call, idx, depth, "index", dtype)
    values = call.input(2)
    return call.block("OneHot", {"axis": -1 if axis == rank else axis}, indices=idx,
                      depth=call.const(depth, np.int64), on_value=_scalar(call, values, 1, "on"),
                      off_value=_scalar(call, values, 0, "off"), typed=0)


@maps("Hardmax", blocks="ArgMax, OneHot (Reshape before opset 13)",
      notes="1 at the first largest entry along axis (before opset 13: over the flattened trailing axes)")
def hardmax(call: Call):
    shape = call.shape(0)
    if shape is None:
        raise Unsupported("Hardmax of an input of unknown rank")
    rank = len(shape)
    axis = call.axis(call.attr("axis", 1 if call.opset < 13 else -1), rank, "Hardmax's axis")
    dtype = call.dtype(0)
    x = call.input(0)
    flat = call.opset < 13 and axis != rank - 1
    if flat:    # over the flattened trailing axes, as the older opsets define it
        shape = call.static_shape(0, "Hardmax over several trailing axes")
        x = call.block("Reshape", tensor=x, shape=call.const([-1, int(np.prod(shape[axis:]))], np.int64),
                       hint="rows")
        axis, size = 1, int(np.prod(shape[axis:]))
    else:
        size = shape[axis]
        if not isinstance(size, int):
            raise Unsupported("Hardmax along an axis of unknown size")
    top = call.block("ArgMax", {"output_type": "int64"}, input=x, dimension=call.const(axis, np.int32), hint="argmax")
    last = axis == (1 if flat else rank - 1)
    y = call.block("OneHot", {"axis": -1 if last else axis}, indices=top, depth=call.const(size, np.int64),
                   on_value=call.const(1, dtype), off_value=call.const(0, dtype),
                   hint="onehot" if flat else "", typed=None if flat else 0)
    if flat:
        y = call.block("Reshape", tensor=y, shape=call.const(list(shape), np.int64), typed=0)
    return y


@maps("Trilu", blocks="Select", notes="a known k; the kept triangle as a constant mask over the last two axes")
def trilu(call: Call):
    shape = call.shape(0)
    if shape is None or len(shape) < 2 or not all(isinstance(d, int) for d in shape[-2:]):
        raise Unsupported("Trilu needs the static sizes of its input's last two axes")
    k = 0
    if call.has(1):
        k = int(call.need_known(1, "Trilu's k").reshape(-1)[0])
    h, w = shape[-2:]
    call.making((h, w), bool, "its mask")
    keep = np.ones((h, w), bool)
    keep = np.triu(keep, k) if call.attr("upper", 1) else np.tril(keep, k)
    dtype = call.dtype(0)
    return call.block("Select", condition=call.const(keep), t=call.input(0), e=call.const(0, dtype), typed=0)


def _rearranged(call: Call, first: list, perm: list, last: list):
    x = call.block("Reshape", tensor=call.input(0), shape=call.const(first, np.int64), hint="split")
    x = call.block("Transpose", x=x, perm=call.const(perm, np.int32), hint="moved")
    return call.block("Reshape", tensor=x, shape=call.const(last, np.int64), typed=0)


@maps("DepthToSpace", blocks="Reshape, Transpose, Reshape", notes="DCR and CRD modes, a static NCHW shape")
def depth_to_space(call: Call):
    n, c, h, w = _nchw(call, "DepthToSpace")
    b = int(call.attr("blocksize", 0))
    if b < 1 or c % (b * b):
        raise Unsupported(f"DepthToSpace of {c} channels with blocksize {b}")
    out = [n, c // (b * b), h * b, w * b]
    if call.attr("mode", "DCR") == "CRD":
        return _rearranged(call, [n, c // (b * b), b, b, h, w], [0, 1, 4, 2, 5, 3], out)
    return _rearranged(call, [n, b, b, c // (b * b), h, w], [0, 3, 4, 1, 5, 2], out)


@maps("SpaceToDepth", blocks="Reshape, Transpose, Reshape", notes="DCR and CRD modes (CRD from opset 28), a "
      "static NCHW shape")
def space_to_depth(call: Call):
    n, c, h, w = _nchw(call, "SpaceToDepth")
    b = int(call.attr("blocksize", 0))
    if b < 1 or h % b or w % b:
        raise Unsupported(f"SpaceToDepth of {h}x{w} with blocksize {b}")
    perm = [0, 1, 3, 5, 2, 4] if call.attr("mode", "DCR") == "CRD" else [0, 3, 5, 1, 2, 4]
    return _rearranged(call, [n, c, h // b, b, w // b, b], perm, [n, c * b * b, h // b, w // b])


def _nchw(call: Call, what: str) -> tuple:
    shape = call.static_shape(0, what)
    if len(shape) != 4:
        raise Unsupported(f"{what} of a rank-{len(shape)} input")
    return shape


def _index_vectors(call: Call, idx, sizes: list, hint: str):
    """Index vectors (the last axis) with ONNX's negative entries counting from each axis's end."""
    dtype = call.dtype(1) or np.dtype(np.int64)
    if isinstance(idx, Known):
        v = idx.value
        return call.const(np.where(v < 0, v + np.asarray(sizes, v.dtype), v))
    neg = call.block("Less", x=idx, y=call.const(0, dtype), hint=f"{hint}_neg")
    wrapped = call.block("Add", x=idx, y=call.const(np.asarray(sizes, dtype)), hint=f"{hint}_wrap")
    return call.block("Select", condition=neg, t=wrapped, e=idx, hint=hint)


def _leading_sizes(call: Call, k: int, what: str) -> list:
    shape = call.shape(0)
    if shape is None or len(shape) < k or not all(isinstance(d, int) for d in shape[:k]):
        raise Unsupported(f"{what} needs the sizes of the data's first {k} axes")
    return list(shape[:k])


@maps("GatherND", blocks="GatherNd (Less, Add, Select for negative indices)",
      notes="batch_dims 0; negative indices count from the end")
def gather_nd(call: Call):
    if call.attr("batch_dims", 0):
        raise Unsupported("GatherND with batch_dims (TF's GatherNd here takes none)")
    ishape = call.shape(1)
    if ishape is None or not isinstance(ishape[-1], int):
        raise Unsupported("GatherND needs the length of its index vectors")
    idx = _index_vectors(call, call.input(1), _leading_sizes(call, ishape[-1], "GatherND"), "index")
    return call.block("GatherNd", params=call.input(0), indices=idx, typed=0)


def _scatter(call: Call, idx, updates, what: str):
    """``data`` with ``updates`` at the index vectors ``idx``: replacing (reduction none, indices
    unique as ONNX requires) or added (reduction add)."""
    shape = call.static_shape(0, what)
    reduction = call.attr("reduction", "none")
    spread = call.block("ScatterNd", indices=idx, updates=updates, shape=call.const(list(shape), np.int64),
                        hint="spread")
    if reduction == "add":
        return call.block("Add", x=call.input(0), y=spread, typed=0)
    if reduction != "none":
        raise Unsupported(f"{what} with reduction {reduction!r}")
    ones = call.block("OnesLike", x=updates, hint="ones")
    hits = call.block("ScatterNd", indices=idx, updates=ones, shape=call.const(list(shape), np.int64), hint="hits")
    hit = call.block("Greater", x=hits, y=call.const(0, call.dtype(0)), hint="hit")
    return call.block("Select", condition=hit, t=spread, e=call.input(0), typed=0)


@maps("ScatterND", blocks="ScatterNd, Select (OnesLike, Greater) or Add",
      notes="reduction none (unique indices, as ONNX requires) or add; negative indices count from the end; "
            "refused: mul, max, min")
def scatter_nd(call: Call):
    ishape = call.shape(1)
    if ishape is None or not isinstance(ishape[-1], int):
        raise Unsupported("ScatterND needs the length of its index vectors")
    idx = _index_vectors(call, call.input(1), _leading_sizes(call, ishape[-1], "ScatterND"), "index")
    return _scatter(call, idx, call.input(2), "ScatterND")


@maps("ScatterElements", "Scatter", blocks="ScatterNd (a grid of coordinates), Select or Add",
      notes="as GatherElements' coordinates; reduction none or add")
def scatter_elements(call: Call):
    shape = call.static_shape(1, call.node.op)
    rank = len(shape)
    axis = call.axis(call.attr("axis", 0), rank, f"{call.node.op}'s axis")
    size = _leading_sizes(call, rank, call.node.op)[axis]
    idx = _from_end(call, call.input(1), size, "index", call.dtype(1))
    if not isinstance(idx, Known) and call.dtype(1) != np.int64:
        idx = call.block("Cast", {"DstT": "int64"}, x=idx, hint="index64")
    call.making((rank, *shape), np.int64, "its grid of coordinates")
    grid = np.indices(shape, dtype=np.int64)
    coords = [call.const(grid[d][..., None]) if d != axis else
              (call.const(idx.value.astype(np.int64)[..., None]) if isinstance(idx, Known) else
               call.block("ExpandDims", input=idx, axis=call.const(-1, np.int32), hint="index_col"))
              for d in range(rank)]
    where = coords[0] if rank == 1 else call.block("Concat", values=coords, axis=call.const(rank, np.int32),
                                                    hint="coords")
    return _scatter(call, where, call.input(2), call.node.op)


@maps("EyeLike", blocks="(a constant)", notes="ones on diagonal k of a static 2-D shape, in the dtype asked")
def eye_like(call: Call):
    rows, cols = call.static_shape(0, "EyeLike")
    to = call.attr("dtype")
    dtype = DTYPES.get(to) if to is not None else (call.dtype(0) and call.dtype(0).name)
    if dtype is None:
        raise Unsupported(f"EyeLike to ONNX type {to}, which a project does not hold")
    call.making((rows, cols), dtype, "its constant")
    return call.const(np.eye(rows, cols, int(call.attr("k", 0)), dtype=dtype))


@maps("Range", blocks="(folded into a constant)",
      notes="start, limit and delta known while importing: blockflow's Range takes them as static inputs")
def range_(call: Call):
    raise Unsupported("Range's start, limit and delta must be known while importing (constants); here the "
                      "model computes them")
