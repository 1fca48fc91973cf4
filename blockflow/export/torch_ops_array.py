"""PyTorch lowerings of the array blocks (blocks/array_*.py): building, gathering and scattering,
joining and splitting, reshaping, slicing, tiling, padding and reversing.

TF semantics kept: Gather's axis and batch_dims, indices out of range are errors (never wrapped),
StridedSlice's masks and negative strides (torch slices only forwards: a reversed axis is sliced
forwards and flipped), Squeeze of listed axes, MirrorPad's two modes with corners mirrored both
ways. Static operands (shapes, axes, paddings) arrive as numpy values and are written as literals.
"""
from __future__ import annotations

import numpy as np

from blockflow.export.torch_lowering import Call, Unsupported, lowers


def _ints(value) -> tuple:
    """A static integer operand as a tuple of Python ints."""
    return tuple(int(v) for v in np.asarray(value).reshape(-1).tolist())


def _int(value) -> int:
    return int(np.asarray(value).reshape(-1)[0])


def _rank(call: Call, name: str) -> int:
    return len(call.type_of(name).shape)


# --------------------------------------------------------------------------------------------
# Building tensors


@lowers("OneHot")
def one_hot(call: Call) -> str:
    indices, depth = call.arg("indices"), _int(call.arg("depth"))
    rank = _rank(call, "indices")
    axis = int(call.attrs.get("axis", -1))
    a = rank if axis == -1 else axis
    dtype = call.out_dtype()
    on, off = call.arg("on_value"), call.arg("off_value")
    on = on if on is not None else f"torch.tensor(1, dtype={dtype})"
    off = off if off is not None else f"torch.tensor(0, dtype={dtype})"
    positions = f"torch.arange({depth}).reshape({call.lit((-1,) + (1,) * (rank - a))})"
    # not differentiable (a function of integer indices): no gradient to on_value/off_value
    return f"torch.where({indices}.unsqueeze({a}) == {positions}, {on}, {off}).detach()"


@lowers("Fill")
def fill(call: Call) -> str:
    return f"{call.arg('value')}.expand({call.lit(_ints(call.arg('dims')))})"


@lowers("ZerosLike")
def zeros_like(call: Call) -> str:
    return f"torch.zeros_like({call.ins[0]})"


@lowers("OnesLike")
def ones_like(call: Call) -> str:
    return f"torch.ones_like({call.ins[0]})"


@lowers("Diag")
def diag(call: Call) -> str:
    d = call.ins[0]
    return f"torch.diag({d}.reshape(-1)).reshape({d}.shape + {d}.shape)"


@lowers("DiagPart")
def diag_part(call: Call) -> str:
    x = call.ins[0]
    k = _rank(call, "input") // 2
    half = call.temp("half")
    call.line(f"{half} = {x}.shape[:{k}]")
    call.line(f"if {half} != {x}.shape[{k}:]:")
    call.line(f"    raise ValueError('DiagPart: the halves of the shape ' + str(list({x}.shape)) + ' differ')")
    return f"{x}.reshape(math.prod({half}), math.prod({half})).diagonal().reshape({half})"


# --------------------------------------------------------------------------------------------
# Gathering and scattering

_CHECK_INDEX = '''def _check_index(op, indices, size):
    """TF rejects indices outside [0, size) (torch would wrap negative ones or read garbage)."""
    if indices.numel() and (int(indices.min()) < 0 or int(indices.max()) >= size):
        bad = int(indices.min()) if int(indices.min()) < 0 else int(indices.max())
        raise IndexError(f"{op}: index {bad} is out of range [0, {size})")
    return indices.long()
'''

_GATHER_BATCH = '''def _gather_batched(params, indices, axis, batch_dims):
    """tf.gather with batch_dims: params as [batch, pre, n, post], indices as [batch, m]."""
    p = params.shape
    batch, pre = math.prod(p[:batch_dims]), math.prod(p[batch_dims:axis])
    n, post, m = p[axis], math.prod(p[axis + 1:]), math.prod(indices.shape[batch_dims:])
    idx = _check_index("Gather", indices, n).reshape(batch, 1, m, 1).expand(batch, pre, m, post)
    out = torch.gather(params.reshape(batch, pre, n, post), 2, idx)
    return out.reshape(p[:axis] + indices.shape[batch_dims:] + p[axis + 1:])
'''


@lowers("Gather")
def gather(call: Call) -> str:
    params, indices, axis = call.arg("params"), call.arg("indices"), call.arg("axis")
    prank, irank = _rank(call, "params"), _rank(call, "indices")
    a = 0 if axis is None else _int(axis)
    a = a + prank if a < 0 else a
    b = int(call.attrs.get("batch_dims", 0))
    b = b + irank if b < 0 else b
    call.helper("_check_index", _CHECK_INDEX)
    if not b:
        idx = f"_check_index('Gather', {indices}, {params}.shape[{a}]).reshape(-1)"
        return (f"torch.index_select({params}, {a}, {idx})"
                f".reshape({params}.shape[:{a}] + {indices}.shape + {params}.shape[{a + 1}:])")
    call.helper("_gather_batched", _GATHER_BATCH)
    return f"_gather_batched({params}, {indices}, {a}, {b})"


_ND_INDEX = '''def _nd_flat_index(op, indices, shape):
    """Flat positions of the index vectors in indices' last axis into shape's leading sizes."""
    k = indices.shape[-1]
    sizes = torch.tensor(shape[:k], dtype=torch.int64)
    idx = indices.long()
    if idx.numel() and bool(((idx < 0) | (idx >= sizes)).any()):
        bad = idx.reshape(-1, k)[((idx < 0) | (idx >= sizes)).reshape(-1, k).any(1)][0].tolist()
        raise IndexError(f"{op}: index {bad} is out of range for the leading sizes {list(shape[:k])}")
    strides = [math.prod(shape[i + 1:k]) for i in range(k)]
    return (idx * torch.tensor(strides, dtype=torch.int64)).sum(-1)
'''


@lowers("GatherNd")
def gather_nd(call: Call) -> str:
    params, indices = call.arg("params"), call.arg("indices")
    k = call.type_of("indices").shape[-1]
    call.helper("_nd_flat_index", _ND_INDEX)
    flat = f"_nd_flat_index('GatherNd', {indices}, {params}.shape)"
    return f"{params}.reshape((math.prod({params}.shape[:{k}]),) + {params}.shape[{k}:])[{flat}]"


@lowers("ScatterNd")
def scatter_nd(call: Call) -> str:
    indices, updates = call.arg("indices"), call.arg("updates")
    dims = _ints(call.arg("shape"))
    k = call.type_of("indices").shape[-1]
    call.helper("_nd_flat_index", _ND_INDEX)
    rest = dims[k:]
    lead = int(np.prod(dims[:k], dtype=np.int64))
    flat = f"_nd_flat_index('ScatterNd', {indices}, {call.lit(dims)}).reshape(-1)"
    zeros = f"torch.zeros({call.lit((lead,) + rest)}, dtype={call.out_dtype()})"
    return (f"{zeros}.index_add(0, {flat}, {updates}.reshape({call.lit((-1,) + rest)}))"
            f".reshape({call.lit(dims)})")


@lowers("Select")
def select(call: Call) -> str:
    c, t, e = call.ins
    return f"torch.where({c}, {t}, {e})"


@lowers("Where")
def where(call: Call) -> str:
    return f"torch.nonzero({call.ins[0]})"


# --------------------------------------------------------------------------------------------
# Identity-like


@lowers("IdentityN")
def identity_n(call: Call) -> list:
    return list(call.ins[0])


_PREVENT = '''class _PreventGradient(torch.autograd.Function):
    """The identity; a gradient reaching it is an error naming the block (PreventGradient)."""

    @staticmethod
    def forward(ctx, x, where):
        ctx.where = where
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        raise RuntimeError(f"a gradient would have to pass through {ctx.where}: PreventGradient "
                           f"forbids differentiating through it")
'''


@lowers("PreventGradient")
def prevent_gradient(call: Call) -> str:
    call.helper("_PreventGradient", _PREVENT)
    msg = str(call.attrs.get("message") or "")
    where = call.node + (f" ({msg})" if msg else "")
    return f"_PreventGradient.apply({call.ins[0]}, {call.lit(where)})"


# --------------------------------------------------------------------------------------------
# Joining and splitting


def _axis(value, rank: int) -> int:
    a = _int(value)
    return a + rank if a < 0 else a


@lowers("Concat")
def concat(call: Call) -> str:
    values = call.arg("values")
    if len(values) == 1:
        return values[0]
    a = _axis(call.arg("axis"), len(call.type_of("values")[0].shape))
    return f"torch.cat([{', '.join(values)}], dim={a})"


@lowers("Stack")
def stack(call: Call) -> str:
    return f"torch.stack([{', '.join(call.arg('values'))}], dim={int(call.attrs.get('axis', 0))})"


@lowers("Unstack")
def unstack(call: Call) -> list:
    x = call.arg("value")
    a = int(call.attrs.get("axis", 0)) % _rank(call, "value")
    num = int(call.attrs["num"])
    call.line(f"if {x}.shape[{a}] != {num}:")
    call.line(f"    raise ValueError('Unstack: axis {a} of ' + str(list({x}.shape)) + ' is not of size {num}')")
    return [f"{x}.select({a}, {i})" for i in range(num)]


_SPLIT = '''def _split_sizes(x, axis, sizes, count):
    """SplitV's sizes (one may be -1: the rest) for x's axis, checked as TF checks them."""
    d = x.shape[axis]
    if sizes is None:  # Split: count equal pieces
        if d % count:
            raise ValueError(f"Split: axis {axis} of {list(x.shape)} has size {d}, which does not split "
                             f"into {count} equal pieces")
        return [d // count] * count
    known = sum(s for s in sizes if s != -1)
    sizes = [d - known if s == -1 else s for s in sizes]
    if sum(sizes) != d or min(sizes, default=0) < 0:
        raise ValueError(f"SplitV: sizes {sizes} do not add up to the axis size {d}")
    return sizes
'''


@lowers("Split")
def split(call: Call) -> list:
    x = call.arg("value")
    a = _axis(call.arg("axis"), _rank(call, "value"))
    n = int(call.attrs["num_split"])
    call.helper("_split_sizes", _SPLIT)
    pieces = call.temp("pieces")
    call.line(f"{pieces} = torch.split({x}, _split_sizes({x}, {a}, None, {n}), dim={a})")
    return [f"{pieces}[{i}]" for i in range(n)]


@lowers("SplitV")
def split_v(call: Call) -> list:
    x = call.arg("value")
    a = _axis(call.arg("axis"), _rank(call, "value"))
    sizes = list(_ints(call.arg("size_splits")))
    call.helper("_split_sizes", _SPLIT)
    pieces = call.temp("pieces")
    call.line(f"{pieces} = torch.split({x}, _split_sizes({x}, {a}, {call.lit(sizes)}, {len(sizes)}), dim={a})")
    return [f"{pieces}[{i}]" for i in range(len(sizes))]


# --------------------------------------------------------------------------------------------
# Shapes


@lowers("Reshape")
def reshape(call: Call) -> str:
    return f"{call.arg('tensor')}.reshape({call.lit(_ints(call.arg('shape')))})"


@lowers("Transpose")
def transpose(call: Call) -> str:
    x, perm = call.arg("x"), call.arg("perm")
    rank = _rank(call, "x")
    order = tuple(range(rank))[::-1] if perm is None else _ints(perm)
    if order == tuple(range(rank)):
        return x
    return f"{x}.permute({call.lit(order)})"


@lowers("ExpandDims")
def expand_dims(call: Call) -> str:
    a = _int(call.arg("axis"))
    a = a + _rank(call, "input") + 1 if a < 0 else a
    return f"{call.arg('input')}.unsqueeze({a})"


@lowers("Squeeze")
def squeeze(call: Call) -> str:
    x = call.arg("input")
    shape = call.type_of("input").shape
    listed = call.attrs.get("axis") or ()
    if listed:
        axes = tuple(sorted({int(a) % len(shape) for a in listed}))
    else:
        axes = tuple(i for i, d in enumerate(shape) if d == 1)
    if not axes:
        return x
    call.line(f"if any({x}.shape[a] != 1 for a in {call.lit(axes)}):")
    call.line(f"    raise ValueError('Squeeze: cannot remove axes {list(axes)} of ' + str(list({x}.shape)))")
    return f"torch.squeeze({x}, dim={call.lit(axes)})"


@lowers("Shape")
def shape(call: Call) -> str:
    return f"torch.tensor(tuple({call.ins[0]}.shape), dtype={call.out_dtype()})"


@lowers("ShapeN")
def shape_n(call: Call) -> list:
    return [f"torch.tensor(tuple({x}.shape), dtype={call.out_dtype(i)})" for i, x in enumerate(call.ins[0])]


@lowers("Size")
def size(call: Call) -> str:
    return f"torch.tensor({call.ins[0]}.numel(), dtype={call.out_dtype()})"


@lowers("Rank")
def rank(call: Call) -> str:
    return f"torch.tensor({call.ins[0]}.dim(), dtype=torch.int32)"


# --------------------------------------------------------------------------------------------
# Slicing


def _slice_text(start, stop, step=1) -> str:
    text = ("" if start is None else str(start)) + ":" + ("" if stop is None else str(stop))
    return text + (f":{step}" if step != 1 else "")


@lowers("Slice")
def slice_(call: Call) -> str:
    x = call.arg("input")
    begin, size = _ints(call.arg("begin")), _ints(call.arg("size"))
    if not begin:
        return x
    index = [_slice_text(b, None if s == -1 else b + s) for b, s in zip(begin, size)]
    return f"{x}[{', '.join(index)}]"


def _strided_entries(rank, begin, end, strides, masks):
    """TF's sparse slice spec made dense (as blocks/array_slice.py): None for a new axis,
    (axis, int) for a shrunk one, (axis, slice) otherwise; every input axis appears once."""
    begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_mask = masks
    sparse = []
    for i in range(len(begin)):
        bit = 1 << i
        sparse.append("..." if ellipsis_mask & bit else None if new_axis_mask & bit else i)
    real = sum(1 for s in sparse if type(s) is int)
    if "..." not in sparse:
        sparse.append("...")
    entries, axis = [], 0
    for s in sparse:
        if s is None:
            entries.append(None)
        elif s == "...":
            for _ in range(rank - real):
                entries.append((axis, slice(None)))
                axis += 1
        else:
            bit = 1 << s
            if shrink_mask & bit:
                entries.append((axis, begin[s]))
            else:
                entries.append((axis, slice(None if begin_mask & bit else begin[s],
                                            None if end_mask & bit else end[s], strides[s])))
            axis += 1
    return entries


@lowers("StridedSlice")
def strided_slice(call: Call) -> str:
    """Python's slicing with TF's masks. A negative stride on an axis of known size becomes the
    same entries taken forwards and flipped (torch slices only forwards)."""
    x = call.arg("input")
    shape = call.type_of("input").shape
    begin, end = _ints(call.arg("begin")), _ints(call.arg("end"))
    strides = (1,) * len(begin) if call.arg("strides") is None else _ints(call.arg("strides"))
    masks = tuple(int(call.attrs.get(k, 0)) for k in
                  ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask"))
    index, flips, out_axis = [], [], 0
    for entry in _strided_entries(len(shape), begin, end, strides, masks):
        if entry is None:
            index.append("None")
            out_axis += 1
            continue
        axis, ix = entry
        if type(ix) is int:
            index.append(str(ix))
            continue
        step = 1 if ix.step is None else ix.step
        if step > 0:
            index.append(_slice_text(ix.start, ix.stop, step))
        else:
            d = shape[axis]
            if d is None:
                raise Unsupported(f"a negative stride on axis {axis}, whose size is unknown when exporting")
            picked = range(*ix.indices(d))
            if len(picked):
                index.append(_slice_text(picked[-1], picked[0] + 1, -step))
                flips.append(out_axis)
            else:
                index.append("0:0")
        out_axis += 1
    expr = f"{x}[{', '.join(index)}]" if index else x
    return f"torch.flip({expr}, dims={call.lit(tuple(flips))})" if flips else expr


# --------------------------------------------------------------------------------------------
# Tiling, padding, reversing


@lowers("Tile")
def tile(call: Call) -> str:
    multiples = _ints(call.arg("multiples"))
    if not multiples:
        return call.arg("input")
    return f"{call.arg('input')}.repeat({call.lit(multiples)})"


@lowers("BroadcastTo")
def broadcast_to(call: Call) -> str:
    return f"{call.arg('input')}.expand({call.lit(_ints(call.arg('shape')))})"


def _pads(call: Call) -> list:
    p = np.asarray(call.arg("paddings")).reshape(-1, 2)
    return [(int(b), int(a)) for b, a in p.tolist()]


@lowers("Pad")
def pad(call: Call) -> str:
    x = call.arg("input")
    pads = _pads(call)
    if not any(b or a for b, a in pads):
        return x
    flat = [v for b, a in reversed(pads) for v in (b, a)]   # F.pad lists the last axis first
    value = float(call.attrs.get("constant_values", 0.0))
    dtype = call.type_of("input").dtype
    if dtype.kind == "b":   # torch pads numbers: a bool tensor goes through uint8
        return (f"torch.nn.functional.pad({x}.to(torch.uint8), {call.lit(tuple(flat))}, "
                f"value={int(bool(value))}).to(torch.bool)")
    value_text = call.lit(int(value) if dtype.kind in "iu" else value)
    return f"torch.nn.functional.pad({x}, {call.lit(tuple(flat))}, value={value_text})"


_MIRROR = '''def _mirror_pad(x, pads, shift):
    """MirrorPad axis by axis on what is padded so far (corners mirror both ways, as TF):
    REFLECT (shift 1) does not repeat the edge entry, SYMMETRIC (shift 0) does."""
    for axis, (before, after) in enumerate(pads):
        n = x.shape[axis]
        if max(before, after) > n - shift:
            raise ValueError(f"MirrorPad: padding {[before, after]} of axis {axis} (size {n}) is too large")
        parts = []
        if before:
            parts.append(torch.flip(x.narrow(axis, shift, before), dims=(axis,)))
        parts.append(x)
        if after:
            parts.append(torch.flip(x.narrow(axis, n - shift - after, after), dims=(axis,)))
        if len(parts) > 1:
            x = torch.cat(parts, dim=axis)
    return x
'''


@lowers("MirrorPad")
def mirror_pad(call: Call) -> str:
    x = call.arg("input")
    pads = _pads(call)
    if not any(b or a for b, a in pads):
        return x
    call.helper("_mirror_pad", _MIRROR)
    shift = 1 if call.attrs.get("mode", "REFLECT") == "REFLECT" else 0
    return f"_mirror_pad({x}, {call.lit(tuple(pads))}, {shift})"


@lowers("Reverse")
def reverse(call: Call) -> str:
    x = call.arg("tensor")
    rank = _rank(call, "tensor")
    axes = tuple(sorted({a % rank for a in _ints(call.arg("axis"))})) if rank else ()
    return f"torch.flip({x}, dims={call.lit(axes)})" if axes else x
