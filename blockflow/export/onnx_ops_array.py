"""ONNX lowerings of the array blocks: shapes (Reshape, Transpose, ExpandDims, Squeeze, Shape,
Size, Rank), joins and splits, gathers, slices, padding and tiling, OneHot, Fill, Einsum, TopK
and Where. Static inputs (axes, shapes, paddings) arrive as their values and are written as
attributes or int64 initializers."""
from __future__ import annotations

import numpy as np

from blockflow.export.onnx_lowering import OnnxCall, Unsupported, onnx_lowers


def _int(value, default=0) -> int:
    return default if value is None else int(np.asarray(value).reshape(-1)[0])


@onnx_lowers("Reshape")
def reshape(call: OnnxCall) -> str:
    shape = [int(v) for v in np.asarray(call.arg("shape")).reshape(-1)]
    # allowzero: a 0 in the shape is a size of 0 (TF), not "copy this dimension" (ONNX's default)
    return call.op("Reshape", call.arg("tensor"), call.ints(shape), allowzero=1)


@onnx_lowers("Transpose")
def transpose(call: OnnxCall) -> str:
    rank = call.rank("x")
    perm = call.arg("perm")
    perm = list(range(rank))[::-1] if perm is None else [int(p) % max(rank, 1) for p in np.asarray(perm).reshape(-1)]
    return call.op("Transpose", call.arg("x"), perm=perm)


@onnx_lowers("ExpandDims")
def expand_dims(call: OnnxCall) -> str:
    rank = call.rank("input")
    axis = _int(call.arg("axis")) % (rank + 1)
    return call.op("Unsqueeze", call.arg("input"), call.ints([axis]))


@onnx_lowers("Squeeze")
def squeeze(call: OnnxCall) -> str:
    rank = call.rank("input")
    axes = [int(a) % rank for a in (call.attrs.get("axis") or ())]
    if not axes:
        shape = call.type_of("input").shape
        if any(d is None for d in shape):
            # ONNX's Squeeze without axes drops the size-1 axes of the running shape, as TF
            return call.op("Squeeze", call.arg("input"))
        axes = [i for i, d in enumerate(shape) if d == 1]
        if not axes:
            return call.arg("input")
    return call.op("Squeeze", call.arg("input"), call.ints(sorted(axes)))


@onnx_lowers("Shape", "Size")
def shape(call: OnnxCall) -> str:
    found = call.op(call.block, call.arg("input"))
    return call.cast(found, np.dtype(call.attrs.get("out_type", "int32")))


@onnx_lowers("Rank")
def rank(call: OnnxCall) -> str:
    return call.const(np.asarray(call.rank("input"), dtype=call.out_dtype()))


@onnx_lowers("Concat")
def concat(call: OnnxCall) -> str:
    values = call.arg("values")
    if len(values) == 1:
        return values[0]
    rank = len(call.in_types[0][0].shape)
    return call.op("Concat", *values, axis=_int(call.arg("axis")) % rank)


@onnx_lowers("Stack")
def stack(call: OnnxCall) -> str:
    values = call.arg("values")
    rank = len(call.in_types[0][0].shape) + 1
    axis = int(call.attrs.get("axis", 0)) % rank
    parts = [call.op("Unsqueeze", v, call.ints([axis])) for v in values]
    return parts[0] if len(parts) == 1 else call.op("Concat", *parts, axis=axis)


def _split(call: OnnxCall, x: str, axis: int, sizes: list) -> list:
    if len(sizes) == 1:
        return [x]
    return call.op("Split", x, call.ints(sizes), axis=axis, outputs=len(sizes))


@onnx_lowers("Unstack")
def unstack(call: OnnxCall) -> list:
    t = call.type_of("value")
    axis = int(call.attrs.get("axis", 0)) % len(t.shape)
    n = len(call.out_types)
    pieces = _split(call, call.arg("value"), axis, [1] * n)
    return [call.op("Squeeze", p, call.ints([axis])) for p in pieces]


def _axis_size(call: OnnxCall, x: str, axis: int) -> str:
    """The running size of ``axis`` of ``x``: a 1-d int64 of one entry."""
    return call.op("Gather", call.op("Shape", x), call.ints([axis]))


@onnx_lowers("Split")
def split(call: OnnxCall) -> list:
    t = call.type_of("value")
    axis = _int(call.arg("axis")) % len(t.shape)
    n = len(call.out_types)
    x = call.arg("value")
    if t.shape[axis] is not None:
        return _split(call, x, axis, [t.shape[axis] // n] * n)
    if n == 1:
        return [x]
    # an open size: n equal pieces of size // n, computed when the model runs
    piece = call.op("Div", _axis_size(call, x, axis), call.ints([n]))
    sizes = call.op("Expand", piece, call.ints([n]))
    return call.op("Split", x, sizes, axis=axis, outputs=n)


@onnx_lowers("SplitV")
def split_v(call: OnnxCall) -> list:
    t = call.type_of("value")
    axis = _int(call.arg("axis")) % len(t.shape)
    x = call.arg("value")
    sizes = [o.shape[axis] for o in call.out_types]
    if all(s is not None for s in sizes):
        return _split(call, x, axis, sizes)
    given = [int(v) for v in np.asarray(call.arg("size_splits")).reshape(-1)]
    if len(given) != len(sizes) or given.count(-1) != 1:
        raise Unsupported("a split into pieces of open size")
    if len(given) == 1:
        return [x]
    # the one -1 piece takes what the others leave of the running size
    rest = call.op("Sub", _axis_size(call, x, axis), call.ints([sum(v for v in given if v != -1)]))
    parts = [rest if v == -1 else call.ints([v]) for v in given]
    return call.op("Split", x, call.op("Concat", *parts, axis=0), axis=axis, outputs=len(given))


@onnx_lowers("Gather")
def gather(call: OnnxCall) -> str:
    rank, irank = call.rank("params"), call.rank("indices")
    axis = _int(call.arg("axis")) % rank
    indices = call.index(call.arg("indices"))
    b = int(call.attrs.get("batch_dims", 0))
    b = b % irank if b < 0 else b
    if not b:
        return call.op("Gather", call.arg("params"), indices, axis=axis)
    # with batch dims: GatherND over the axis moved next to them, then the axes between them
    # and the axis moved back after the gathered ones
    params = call.arg("params")
    if axis != b:
        perm = list(range(b)) + [axis] + list(range(b, axis)) + list(range(axis + 1, rank))
        params = call.op("Transpose", params, perm=perm)
    out = call.op("GatherND", params, call.op("Unsqueeze", indices, call.ints([irank])), batch_dims=b)
    if axis == b:
        return out
    k, m = irank - b, axis - b
    perm = (list(range(b)) + list(range(b + k, b + k + m)) + list(range(b, b + k))
            + list(range(b + k + m, rank - 1 + k)))
    return call.op("Transpose", out, perm=perm)


@onnx_lowers("GatherNd")
def gather_nd(call: OnnxCall) -> str:
    return call.op("GatherND", call.arg("params"), call.index(call.arg("indices")))


@onnx_lowers("Fill")
def fill(call: OnnxCall) -> str:
    dims = [int(d) for d in np.asarray(call.arg("dims")).reshape(-1)]
    return call.op("Expand", call.arg("value"), call.ints(dims))


@onnx_lowers("BroadcastTo")
def broadcast_to(call: OnnxCall) -> str:
    dims = [int(d) for d in np.asarray(call.arg("shape")).reshape(-1)]
    return call.op("Expand", call.arg("input"), call.ints(dims))


@onnx_lowers("Tile")
def tile(call: OnnxCall) -> str:
    reps = [int(d) for d in np.asarray(call.arg("multiples")).reshape(-1)]
    return call.op("Tile", call.arg("input"), call.ints(reps))


def _pads_of(call: OnnxCall) -> list:
    p = np.asarray(call.arg("paddings")).reshape(-1, 2)
    return [int(v) for v in p[:, 0]] + [int(v) for v in p[:, 1]]


@onnx_lowers("Pad")
def pad(call: OnnxCall) -> str:
    if not call.rank("input"):
        return call.arg("input")
    fill = call.const(np.asarray(call.attrs.get("constant_values", 0.0), dtype=call.out_dtype()))
    return call.op("Pad", call.arg("input"), call.ints(_pads_of(call)), fill, mode="constant")


@onnx_lowers("MirrorPad")
def mirror_pad(call: OnnxCall) -> str:
    pads = np.asarray(call.arg("paddings")).reshape(-1, 2)
    x = call.arg("input")
    if not pads.any():
        return x
    if call.attrs.get("mode", "REFLECT") == "REFLECT":
        return call.op("Pad", x, call.ints(_pads_of(call)), mode="reflect")
    # SYMMETRIC mirrors the edge too, which ONNX's Pad has no mode for: axis by axis, the
    # mirrored slices of each end joined around x
    for axis, (before, after) in enumerate(pads.tolist()):
        parts = []
        if before:
            parts.append(_flipped(call, x, axis, 0, before))
        parts.append(x)
        if after:
            parts.append(_flipped(call, x, axis, -after, 2 ** 63 - 1))
        if len(parts) > 1:
            x = call.op("Concat", *parts, axis=axis)
    return x


def _flipped(call: OnnxCall, x: str, axis: int, start: int, end: int) -> str:
    piece = call.op("Slice", x, call.ints([start]), call.ints([end]), call.ints([axis]))
    return call.op("Slice", piece, call.ints([-1]), call.ints([_INT64_MIN]), call.ints([axis]), call.ints([-1]))


_INT64_MIN = -(2 ** 63)


@onnx_lowers("Reverse")
def reverse(call: OnnxCall) -> str:
    rank = call.rank("tensor")
    axes = sorted({int(a) % rank for a in np.asarray(call.arg("axis")).reshape(-1)}) if rank else []
    if not axes:
        return call.arg("tensor")
    n = len(axes)
    return call.op("Slice", call.arg("tensor"), call.ints([-1] * n), call.ints([_INT64_MIN] * n),
                   call.ints(axes), call.ints([-1] * n))


@onnx_lowers("Slice")
def slice_(call: OnnxCall) -> str:
    begin = [int(v) for v in np.asarray(call.arg("begin")).reshape(-1)]
    size = [int(v) for v in np.asarray(call.arg("size")).reshape(-1)]
    if not begin:
        return call.arg("input")
    ends = [2 ** 63 - 1 if s == -1 else b + s for b, s in zip(begin, size)]
    return call.op("Slice", call.arg("input"), call.ints(begin), call.ints(ends), call.ints(range(len(begin))))


@onnx_lowers("StridedSlice")
def strided_slice(call: OnnxCall) -> str:
    """TF's sparse spec made dense (the ellipsis as full axes, new axes inserted after), then
    one ONNX Slice, a Squeeze of the shrunk axes and an Unsqueeze of the new ones."""
    a = call.attrs
    rank = call.rank("input")
    begin = [int(v) for v in np.asarray(call.arg("begin")).reshape(-1)]
    end = [int(v) for v in np.asarray(call.arg("end")).reshape(-1)]
    strides = call.arg("strides")
    strides = [1] * len(begin) if strides is None else [int(v) for v in np.asarray(strides).reshape(-1)]
    masks = [int(a.get(k, 0)) for k in ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask",
                                        "shrink_axis_mask")]
    starts, ends, steps, shrunk, new_at = _dense_slices(rank, begin, end, strides, masks)
    x = call.arg("input")
    if rank and any((b, e, st) != (0, _BIG, 1) for b, e, st in zip(starts, ends, steps)):
        x = call.op("Slice", x, call.ints(starts), call.ints(ends), call.ints(range(rank)), call.ints(steps))
    if shrunk:
        x = call.op("Squeeze", x, call.ints(shrunk))
    if new_at:
        x = call.op("Unsqueeze", x, call.ints(new_at))
    return x if x != call.arg("input") else call.op("Identity", x)


_BIG = 2 ** 63 - 1


def _dense_slices(rank, begin, end, strides, masks):
    """Per input axis (start, end, step) of ONNX's Slice, the shrunk input axes, and the output
    positions of the new axes, for TF's spec with its masks (the ellipsis bit wins over the
    others, then new_axis over shrink, as TF reads them)."""
    bm, em, ellipsis, new_axis, shrink = masks
    sparse = ["..." if ellipsis >> i & 1 else "new" if new_axis >> i & 1 else i for i in range(len(begin))]
    real = sum(1 for t in sparse if isinstance(t, int))
    if "..." not in sparse:
        sparse.append("...")
    starts, ends, steps, shrunk, new_at, out_pos = [], [], [], [], [], 0
    for t in sparse:
        if t == "new":
            new_at.append(out_pos)
            out_pos += 1
        elif t == "...":
            for _ in range(rank - real):
                starts.append(0)
                ends.append(_BIG)
                steps.append(1)
                out_pos += 1
        elif shrink >> t & 1:
            shrunk.append(len(starts))
            starts.append(begin[t])
            ends.append(begin[t] + 1 if begin[t] != -1 else _BIG)
            steps.append(1)
        else:
            s = strides[t]
            starts.append((0 if s > 0 else -1) if bm >> t & 1 else begin[t])
            ends.append((_BIG if s > 0 else _INT64_MIN) if em >> t & 1 else end[t])
            steps.append(s)
            out_pos += 1
    return starts, ends, steps, shrunk, new_at


@onnx_lowers("OneHot")
def one_hot(call: OnnxCall) -> str:
    # spelled out: ONNX's OneHot counts a negative index from the end, TF gives a row of off_value
    rank = call.rank("indices")
    axis = int(call.attrs.get("axis", -1)) % (rank + 1)
    depth = _int(call.arg("depth"))
    cols_shape = [1] * (rank + 1)
    cols_shape[axis] = depth
    cols = call.const(np.arange(depth, dtype=np.int64).reshape(cols_shape))
    idx = call.op("Unsqueeze", call.cast(call.arg("indices"), np.int64), call.ints([axis]))
    on, off = call.arg("on_value"), call.arg("off_value")
    dt = call.out_dtype()
    on = call.const(np.asarray(1, dt)) if on is None else on       # blockflow's defaults: 1 and 0
    off = call.const(np.asarray(0, dt)) if off is None else off
    return call.op("Where", call.op("Equal", idx, cols), on, off)


@onnx_lowers("Where")
def where(call: OnnxCall) -> str:
    if call.rank("condition") == 0:
        raise Unsupported("a 0-d condition")
    return call.op("Transpose", call.op("NonZero", call.arg("condition")), perm=[1, 0])


@onnx_lowers("Einsum")
def einsum(call: OnnxCall) -> str:
    equation = str(call.attrs.get("equation", "")).replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    terms = lhs.split(",")
    if not arrow:
        # numpy's implicit output: the ... axes, then the letters used once, alphabetically
        letters = "".join(terms).replace(".", "")
        rhs = ("..." if "..." in lhs else "") + "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    inputs = list(call.arg("inputs"))
    spans = [len(t.shape) - len(term.replace("...", "")) if "..." in term else None
             for term, t in zip(terms, call.in_types[0])]
    widest = max((n for n in spans if n is not None), default=0)
    for i, (term, n) in enumerate(zip(terms, spans)):
        if n is not None and n < widest:
            # numpy aligns the '...' axes from the right: size-1 axes in front of the shorter
            at = term.index("...")
            inputs[i] = call.op("Unsqueeze", inputs[i], call.ints(range(at, at + widest - n)))
    return call.op("Einsum", *inputs, equation=f"{lhs}->{rhs}")


@onnx_lowers("TopK")
def top_k(call: OnnxCall) -> list:
    k = call.const(np.asarray([_int(call.arg("k"))], np.int64))
    # ONNX's TopK, as TF's: descending values, ties in increasing index order
    values, indices = call.op("TopK", call.arg("input"), k, axis=-1, largest=1, sorted=1, outputs=2)
    if not call.attrs.get("sorted", True):
        # blockflow's unsorted order is the indices ascending: the k largest of -index
        neg, _ = call.op("TopK", call.op("Neg", indices), k, axis=-1, largest=1, sorted=1, outputs=2)
        indices = call.op("Neg", neg)
        values = call.op("GatherElements", call.arg("input"), indices, axis=-1)
    return [values, call.cast(indices, call.out_types[1].dtype)]


def _static_scalar(call: OnnxCall, name: str, default):
    value = call.arg(name)
    return np.asarray(default if value is None else value).reshape(-1)[0]


@onnx_lowers("Range")
def range_(call: OnnxCall) -> str:
    # every input is static: the sequence is a constant, computed as blockflow does (entry i is
    # start + i * delta in float64 or int64, rounded once to the dtype)
    t = call.out_types[0]
    n = t.shape[0]
    start, delta = _static_scalar(call, "start", 0), _static_scalar(call, "delta", 1)
    if t.dtype.kind == "f":
        values = np.arange(n, dtype=np.float64) * float(delta) + float(start)
    else:
        values = np.arange(n, dtype=np.int64) * int(delta) + int(start)
    return call.const(values.astype(t.dtype), hint="values")


@onnx_lowers("LinSpace")
def linspace(call: OnnxCall) -> str:
    t = call.out_types[0]
    start = t.dtype.type(_static_scalar(call, "start", 0))
    stop = t.dtype.type(_static_scalar(call, "stop", 0))
    values = np.linspace(float(start), float(stop), t.shape[0], dtype=np.float64)
    return call.const(values.astype(t.dtype), hint="values")


@onnx_lowers("ShapeN")
def shape_n(call: OnnxCall) -> list:
    out = np.dtype(call.attrs.get("out_type", "int32"))
    return [call.cast(call.op("Shape", x), out) for x in call.arg("input")]


def _known(call: OnnxCall, name: str) -> tuple:
    shape = call.type_of(name).shape
    if any(d is None for d in shape):
        raise Unsupported(f"{name} of open shape")
    return tuple(shape)


@onnx_lowers("Diag")
def diag(call: OnnxCall) -> str:
    shape = _known(call, "diagonal")
    n = int(np.prod(shape))
    flat = call.op("Reshape", call.arg("diagonal"), call.ints([1, n]))
    zero = call.const(np.zeros((), call.out_dtype()))
    # Where, not a product with the identity: an inf on the diagonal leaves zeros, not nan, off it
    square = call.op("Where", call.const(np.eye(n, dtype=bool)), flat, zero)
    return call.op("Reshape", square, call.ints(shape + shape))


@onnx_lowers("DiagPart")
def diag_part(call: OnnxCall) -> str:
    shape = _known(call, "input")
    half = shape[:len(shape) // 2]
    n = int(np.prod(half))
    flat = call.op("Reshape", call.arg("input"), call.ints([n * n]))
    picked = call.op("Gather", flat, call.const(np.arange(n, dtype=np.int64) * (n + 1)), axis=0)
    return call.op("Reshape", picked, call.ints(half))


@onnx_lowers("ScatterNd")
def scatter_nd(call: OnnxCall) -> str:
    if call.out_dtype() == np.float16:
        raise Unsupported("of float16 updates (ONNX Runtime's CPU ScatterND cannot add float16; in float32 "
                          "duplicate indices would round otherwise than blockflow's float16 sums)")
    dims = [int(d) for d in np.asarray(call.arg("shape")).reshape(-1)]
    zeros = call.op("Expand", call.const(np.zeros((), call.out_dtype())), call.ints(dims))
    # duplicate indices add up, as TF's ScatterNd (ONNX's reduction "add")
    return call.op("ScatterND", zeros, call.index(call.arg("indices")), call.arg("updates"),
                   reduction="add")


#: the longest axis Cumprod is unrolled along (one Mul per entry)
CUMPROD_MAX = 1024


@onnx_lowers("Cumprod")
def cumprod(call: OnnxCall) -> str:
    """ONNX has no running product: it is unrolled, one Mul per entry along the axis, in the
    order numpy's multiply.accumulate takes (a product through logarithms would not be exact)."""
    t = call.type_of("x")
    rank = len(t.shape)
    axis = _int(call.arg("axis")) % max(rank, 1)
    n = t.shape[axis]
    if n is None or n > CUMPROD_MAX:
        raise Unsupported(f"a running product along an axis of open size or longer than {CUMPROD_MAX}")
    if n == 0:
        return call.arg("x")
    pieces = _split(call, call.arg("x"), axis, [1] * n)
    if call.attrs.get("reverse"):
        pieces = pieces[::-1]
    if call.attrs.get("exclusive"):
        one = call.op("Expand", call.const(np.ones((), t.dtype)), call.op("Shape", pieces[0]))
        pieces = [one] + pieces[:-1]
    out = [pieces[0]]
    for p in pieces[1:]:
        out.append(call.op("Mul", out[-1], p))
    if call.attrs.get("reverse"):
        out = out[::-1]
    return out[0] if len(out) == 1 else call.op("Concat", *out, axis=axis)
