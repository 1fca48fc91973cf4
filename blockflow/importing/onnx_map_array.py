"""ONNX's shape and indexing ops as blocks: Reshape, Flatten, Transpose, Concat, (Un)Squeeze,
Gather, Slice, Pad, Expand, Tile, Split, Shape, Size, TopK.

Their shape arguments are static inputs of the blocks, so they must be known while importing:
constants, or what folding made of the model's shape arithmetic. A symbolic size (a batch
dimension) is kept open as -1 where the block allows one.
"""
from __future__ import annotations

import math

import numpy as np

from blockflow.importing.onnx_build import Known, Refused, Wire
from blockflow.importing.onnx_fold import FoldRefused, flatten_axis, reshape_target
from blockflow.importing.onnx_mapping import Call, Unsupported, maps


def _reshaped(call: Call, shape: list, typed=0):
    return call.block("Reshape", tensor=call.input(0), shape=call.const(shape, np.int64), typed=typed)


@maps("Reshape", blocks="Reshape", notes="a known shape; 0 copies the input's size, -1 is inferred")
def reshape(call: Call):
    target = call.ints(1, "Reshape's shape")
    allowzero = bool(call.attr("allowzero", 0))
    in_shape = call.shape(0)
    if in_shape is not None and all(isinstance(d, int) for d in in_shape):
        try:
            out = reshape_target(in_shape, target, allowzero)
        except FoldRefused as exc:
            raise Unsupported(str(exc)) from None
        return _keep_shape(call, _reshaped(call, list(out)), out)
    out, copied = [], []
    for i, d in enumerate(target):
        if d == 0 and not allowzero:
            src = in_shape[i] if in_shape is not None and i < len(in_shape) else None
            if not isinstance(src, int):
                copied.append(i)
            d = src if isinstance(src, int) else -1
        out.append(d)
    if out.count(-1) > 1 and len(copied) == 1 and in_shape is not None and -1 in target:
        # x.view(x.size(0), -1): the open size is copied, so the -1 is what the known sizes make
        # (the input's other sizes over the target's)
        rest = [d for i, d in enumerate(in_shape) if i != copied[0]]
        known = [d for i, d in enumerate(out) if i != copied[0] and d != -1]
        if all(isinstance(d, int) for d in rest) and math.prod(known) and math.prod(rest) % math.prod(known) == 0:
            out[target.index(-1)] = math.prod(rest) // math.prod(known)
    if out.count(-1) > 1:
        raise Unsupported(f"Reshape to {target} of an input of shape {in_shape}: more than one size left "
                          f"open")
    return _reshaped(call, out)


@maps("Flatten", blocks="Reshape", notes="to 2-D at axis")
def flatten(call: Call):
    shape = call.shape(0)
    if shape is None:
        raise Unsupported("Flatten of an input of unknown rank")
    axis, why = flatten_axis(call.attr("axis", 1), len(shape), call.opset)
    if axis is None:
        raise Refused(why)
    head, tail = shape[:axis], shape[axis:]
    sizes = []
    for part in (head, tail):
        sizes.append(math.prod(part) if all(isinstance(d, int) for d in part) else -1)
    if sizes.count(-1) > 1:
        raise Unsupported(f"Flatten of {list(shape)}: both sides have unknown sizes")
    return _reshaped(call, sizes)


@maps("Transpose", blocks="Transpose", notes="perm, or the axes reversed")
def transpose(call: Call):
    perm = call.attr("perm") or tuple(reversed(range(call.rank(0))))
    if sorted(perm) != list(range(call.rank(0))):
        raise Unsupported(f"Transpose with perm {list(perm)}, not a permutation of {call.rank(0)} axes")
    return call.block("Transpose", x=call.input(0), perm=call.const(list(perm), np.int32), typed=0)


@maps("Concat", blocks="Concat", notes="any axis")
def concat(call: Call):
    ins = [call.input(i) for i in range(len(call.values)) if call.has(i)]
    rank = call.rank(0)
    axis = call.axis(call.attr("axis", 0), rank, "Concat's axis")
    return call.block("Concat", values=ins, axis=call.const(axis, np.int32), typed=0)


def _axes(call: Call, what: str) -> list | None:
    if call.opset >= 13:
        return call.ints(1, f"{what}'s axes") if call.has(1) else None
    axes = call.attr("axes")
    return list(axes) if axes is not None else None


@maps("Unsqueeze", blocks="ExpandDims", notes="any number of axes (one ExpandDims each)")
def unsqueeze(call: Call):
    axes = _axes(call, "Unsqueeze")
    if not axes:
        raise Unsupported("Unsqueeze without axes")
    rank = call.rank(0) + len(axes)
    y = call.input(0)
    ordered = sorted(call.axes(axes, rank, "Unsqueeze's axes"))
    for i, a in enumerate(ordered):
        last = i == len(ordered) - 1
        y = call.block("ExpandDims", input=y, axis=call.const(a, np.int32), hint="" if last else f"{i}",
                       typed=0 if last else None)
    return y


@maps("Squeeze", blocks="Squeeze", notes="the given axes, or every size-1 axis")
def squeeze(call: Call):
    axes = _axes(call, "Squeeze")
    attrs = {"axis": [] if axes is None else call.axes(axes, call.rank(0), "Squeeze's axes")}
    return call.block("Squeeze", attrs, input=call.input(0), typed=0)


@maps("Gather", blocks="Gather (FloorMod for computed indices)",
      notes="negative indices count from the end: known ones are made positive, computed ones are taken "
            "modulo the axis's size")
def gather(call: Call):
    rank = call.rank(0)
    axis = call.axis(call.attr("axis", 0), rank, "Gather's axis")
    shape = call.shape(0)
    size = shape[axis] if shape is not None else None
    idx = call.input(1)
    if isinstance(idx, Known):
        if isinstance(size, int):
            value = idx.value.astype(np.int64)
            if ((value < -size) | (value >= size)).any():
                raise Unsupported(f"Gather: an index is out of range for size {size}")
            idx = call.const(np.where(value < 0, value + size, value))
        elif (idx.value < 0).any():
            raise Unsupported("Gather with negative indices along an axis of unknown size")
    elif isinstance(size, int):
        idx = call.block("FloorMod", x=idx, y=call.const(size, call.dtype(1)), hint="index")
    else:
        raise Unsupported("Gather with computed indices along an axis of unknown size (a negative index "
                          "would count from the end)")
    return call.block("Gather", params=call.input(0), indices=idx, axis=call.const(axis, np.int32), typed=0)


@maps("Slice", blocks="StridedSlice", notes="starts, ends, axes, steps (attributes before opset 10)")
def slice_(call: Call):
    rank = call.rank(0)
    if call.opset < 10:
        starts, ends = list(call.attr("starts", ())), list(call.attr("ends", ()))
        axes, steps = call.attr("axes"), None
    else:
        starts, ends = call.ints(1, "Slice's starts"), call.ints(2, "Slice's ends")
        axes = call.ints(3, "Slice's axes") if call.has(3) else None
        steps = call.ints(4, "Slice's steps") if call.has(4) else None
    axes = list(range(len(starts))) if axes is None else call.axes(axes, rank, "Slice's axes")
    steps = [1] * len(starts) if steps is None else steps
    if 0 in steps:
        raise Unsupported("Slice with a step of 0")
    begin, end, stride = [0] * rank, [0] * rank, [1] * rank
    full = (1 << rank) - 1
    for s, e, a, st in zip(starts, ends, axes, steps):
        begin[a], end[a], stride[a] = s, e, st
        full &= ~(1 << a)
    return call.block("StridedSlice", {"begin_mask": full, "end_mask": full}, input=call.input(0),
                      begin=call.const(begin, np.int64), end=call.const(end, np.int64),
                      strides=call.const(stride, np.int64), typed=0)


@maps("Pad", blocks="Pad, MirrorPad, Gather", notes="constant and reflect modes; edge and wrap as a Gather of the "
      "copied entries per axis; refused: negative pads")
def pad(call: Call):
    rank = call.rank(0)
    if call.opset < 11:
        pads, mode, value = list(call.attr("pads", ())), call.attr("mode", "constant"), call.attr("value", 0.0)
        axes = list(range(rank))
        if call.dtype(0) is not None:   # the float is the input's dtype's as ONNX casts it (1e10 in float16: inf)
            with np.errstate(over="ignore"):
                value = float(np.asarray(value).astype(call.dtype(0)))
    else:
        pads, mode = call.ints(1, "Pad's pads"), call.attr("mode", "constant")
        value = float(call.need_known(2, "Pad's constant_value").reshape(-1)[0]) if call.has(2) else 0.0
        axes = call.axes(call.ints(3, "Pad's axes"), rank, "Pad's axes") if call.has(3) else list(range(rank))
    if len(pads) != 2 * len(axes):
        raise Unsupported(f"Pad: {len(pads)} pads for {len(axes)} axes")
    if min(pads, default=0) < 0:
        raise Unsupported("Pad with negative pads (cropping)")
    widths = [[0, 0] for _ in range(rank)]
    for i, a in enumerate(axes):
        widths[a] = [pads[i], pads[i + len(axes)]]
    paddings = call.const(widths, np.int64)
    if mode == "constant":
        y = call.block("Pad", {"constant_values": value}, input=call.input(0), paddings=paddings, typed=0)
    elif mode == "reflect":
        y = call.block("MirrorPad", {"mode": "REFLECT"}, input=call.input(0), paddings=paddings, typed=0)
    elif mode in ("edge", "wrap"):
        y = _gather_pad(call, widths, mode)
    else:
        raise Unsupported(f"Pad mode {mode!r}")
    return _keep_shape(call, y, [(d + a + b) if isinstance(d, int) else d
                                 for d, (a, b) in zip(call.shape(0), widths)])


def _gather_pad(call: Call, widths: list, mode: str):
    """Edge and wrap padding as a Gather along each padded axis of the entries each position
    copies (the nearest edge's, or the one a period away): copies, so exact both ways."""
    y, shape = call.input(0), call.shape(0)
    padded = [a for a, w in enumerate(widths) if any(w)]
    for n, a in enumerate(padded):
        size = shape[a]
        if not isinstance(size, int) or size == 0:
            raise Unsupported(f"Pad mode {mode!r} along an axis of {'unknown' if size is None else 'no'} size")
        call.making((max(size + widths[a][0] + widths[a][1], 0),), np.int64, f"the entries it copies along axis {a}")
        at = np.arange(-widths[a][0], size + widths[a][1])
        at = np.clip(at, 0, size - 1) if mode == "edge" else np.mod(at, size)
        last = n == len(padded) - 1
        y = call.block("Gather", params=y, indices=call.const(at, np.int64), axis=call.const(a, np.int32),
                       hint="" if last else f"pad{a}", typed=0 if last else None)
    return y if padded else call.block("Identity", input=y, typed=0)


def _keep_shape(call: Call, y, shape):
    """``y`` with the ``shape`` the mapping knows where the model's shape inference lost it (its
    pads or target were computed): a Shape read of it later can then be folded."""
    if y.shape is not None and all(isinstance(d, int) for d in y.shape):
        return y
    return y.typed(y.dtype or call.dtype(0), tuple(shape))


@maps("Expand", blocks="BroadcastTo", notes="to the broadcast of the input's shape and the given one")
def expand(call: Call):
    shape = call.ints(1, "Expand's shape")
    in_shape = call.static_shape(0, "Expand")
    try:
        target = np.broadcast_shapes(tuple(in_shape), tuple(shape))
    except ValueError as exc:
        raise Unsupported(f"Expand: {exc}") from None
    return call.block("BroadcastTo", input=call.input(0), shape=call.const(list(target), np.int64), typed=0)


@maps("Tile", blocks="Tile", notes="known repeats")
def tile(call: Call):
    reps = call.ints(1, "Tile's repeats")
    return call.block("Tile", input=call.input(0), multiples=call.const(reps, np.int64), typed=0)


@maps("Split", blocks="Split, SplitV", notes="equal pieces, given sizes, or (num_outputs not dividing the "
      "size) pieces of the size rounded up and a smaller last")
def split(call: Call):
    rank = call.rank(0)
    axis = call.axis(call.attr("axis", 0), rank, "Split's axis")
    n = len(call.node.outputs)
    if call.opset >= 13:
        sizes = call.ints(1, "Split's sizes") if call.has(1) else None
    else:
        sizes = list(call.attr("split", ())) or None
    x = call.input(0)
    dim = (call.shape(0) or [None] * rank)[axis]
    if sizes is None and isinstance(dim, int) and dim % n:
        # opset 18's num_outputs: pieces of ceil(dim / n), the last what is left
        piece = -(-dim // n)
        sizes = [piece] * (dim // piece) + ([dim % piece] if dim % piece else [])
        if len(sizes) != n:
            raise Unsupported(f"Split of size {dim} into {n} pieces of {piece}: ONNX's rule makes {len(sizes)}")
    if sizes is None:
        node = call.block("Split", {"num_split": n}, axis=call.const(axis, np.int32), value=x)
    else:
        node = call.block("SplitV", {"num_split": n}, value=x, size_splits=call.const(sizes, np.int64),
                          axis=call.const(axis, np.int32))
    return [node.__class__(node.node, f"output[{i}]", *call.out_type(i)) for i in range(n)]


@maps("Shape", blocks="Shape (StridedSlice for start and end)",
      notes="a shape known while importing is folded into a constant")
def shape(call: Call):
    y = call.block("Shape", {"out_type": "int64"}, input=call.input(0), hint="" if not _sliced(call) else "all",
                   typed=None if _sliced(call) else 0)
    if not _sliced(call):
        return y
    start, end = call.attr("start", 0), call.attr("end")
    return call.block("StridedSlice", {"end_mask": 1 if end is None else 0}, input=y,
                      begin=call.const([start], np.int64), end=call.const([end or 0], np.int64), typed=0)


def _sliced(call: Call) -> bool:
    return call.attr("start", 0) != 0 or call.attr("end") is not None


@maps("Size", blocks="Size", notes="a size known while importing is folded into a constant")
def size(call: Call):
    return call.block("Size", {"out_type": "int64"}, input=call.input(0), typed=0)


@maps("TopK", blocks="TopK (Cast of the indices to int64; Transpose for another axis; Negate for the smallest)",
      notes="any axis, largest or (floats) smallest; sorted 0 leaves the order to the implementation, and "
            "sorted is one")
def topk(call: Call):
    rank = call.rank(0)
    axis = call.axis(call.attr("axis", -1), rank, "TopK's axis")
    k = call.attr("k") if call.opset < 10 else call.ints(1, "TopK's k")[0]
    smallest = not call.attr("largest", 1)
    dtype = call.dtype(0)
    if smallest and (dtype is None or dtype.kind != "f"):
        raise Unsupported(f"TopK of the smallest {dtype} values (negated, the most negative integer overflows)")
    perm = list(range(rank))
    perm[axis], perm[-1] = perm[-1], perm[axis]
    x = call.input(0)
    if axis != rank - 1:   # TF's TopK takes the last axis
        x = call.block("Transpose", x=x, perm=call.const(perm, np.int32), hint="last")
    if smallest:
        x = call.block("Negate", x=x, hint="negated")
    node = call.block("TopK", input=x, k=call.const(int(k), np.int32))
    values, idx = Wire(node.node, "values"), Wire(node.node, "indices")
    moved = axis != rank - 1
    if smallest:
        values = call.block("Negate", x=values, hint="values_neg" if moved else "values", typed=None if moved else 0)
    if moved:
        values = call.block("Transpose", x=values, perm=call.const(perm, np.int32), hint="values", typed=0)
    if not smallest and not moved:
        values = values.typed(*call.out_type(0))
    if call.output_used(1):
        idx = call.block("Cast", {"DstT": "int64"}, x=idx, hint="indices64" if moved else "indices",
                         typed=None if moved else 1)
        if moved:
            idx = call.block("Transpose", x=idx, perm=call.const(perm, np.int32), hint="indices", typed=1)
    return [values, idx]
