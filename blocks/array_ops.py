"""array_ops: constants, placeholders, identity-like blocks, reshaping, joining and splitting,
slicing, gathering, padding, building tensors, shape queries, conditions and diagonals.

Imports only blockflow.spec and numpy.
"""
from __future__ import annotations

import functools
import inspect
import math

import numpy as np

from blockflow.spec import (Attr, Input, InputList, Output, OutputList, ShapeError, TensorType, block,
                            broadcast_shapes, normalize_axis, reserve, unbroadcast)


def _fmt(shape) -> str:
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


@block("Const", category="array_ops")
class Const:
    """A constant tensor, given as ``value`` and cast to ``dtype``."""

    outputs = (Output("output"),)
    attrs = (
        Attr("value", "tensor", 0.0, fits="dtype", doc="the constant's value (a number or nested list)"),
        Attr("dtype", "dtype", "float32"),
    )

    def infer(*, value, dtype):
        arr = np.asarray(value, dtype=dtype)
        return TensorType(arr.shape, arr.dtype, arr)

    def forward(*, value, dtype):
        return np.asarray(value, dtype=dtype)


@block("Placeholder", category="array_ops")
class Placeholder:
    """A tensor fed from outside the graph at run time (the page's saved feed by default).

    ``shape`` may hold -1 for sizes left open (a batch dimension); a feed must match the rest.
    """

    role = "placeholder"
    outputs = (Output("output"),)
    attrs = (
        Attr("dtype", "dtype", "float32"),
        Attr("shape", "shape", (), doc="expected shape; -1 for an open size"),
    )

    def infer(*, dtype, shape):
        return TensorType(shape, dtype)

    def forward(value, *, dtype, shape):
        if type(value) is np.ndarray and value.shape == shape and value.dtype.name == dtype:
            return value  # the common case, checked in one comparison
        arr = np.asarray(value)
        if arr.dtype.kind not in "biuf":
            raise ShapeError(f"a feed must be numeric, got dtype {arr.dtype}")
        if arr.ndim != len(shape) or any(d is not None and d != s for d, s in zip(shape, arr.shape)):
            want = "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"
            raise ShapeError(f"feed has shape {list(arr.shape)}, the Placeholder expects {want}")
        return arr.astype(dtype, copy=False)


@block("Identity", category="array_ops")
class Identity:
    """Returns its input unchanged; the gradient passes straight through."""

    inputs = (Input("input"),)
    outputs = (Output("output"),)
    grad_rule = "dinput = g"

    def infer(x):
        return x

    def forward(x):
        return x

    def vjp(g, out, x):
        return (g,)


@block("StopGradient", category="array_ops")
class StopGradient:
    """Outputs its input as-is; no gradient flows back through it.

    TensorFlow's ``tf.stop_gradient``: in the backward pass the block acts as a constant, so
    nothing upstream of it receives gradient through this path (stable softmax, EM's E-step,
    contrastive divergence's Gibbs sample, adversarial examples).
    """

    inputs = (Input("input"),)
    outputs = (Output("output"),)
    gradient = "stop"
    grad_rule = """
        identity forward; sends no gradient back: dinput = 0
        (in the backward pass the block is a constant)
        """

    def infer(x):
        return x

    def forward(x):
        return x


@block("Reshape", category="array_ops")
class Reshape:
    """Gives ``tensor`` a new shape with the same elements, in row-major order.

    ``shape`` is a list of sizes; at most one of them may be -1, which stands for whatever size
    makes the element count match (``[-1]`` flattens). The count must match exactly.
    """

    inputs = (Input("tensor"), Input("shape", dtype="int", static=True, doc="the new sizes; one may be -1"))
    outputs = (Output("output"),)
    grad_rule = "dtensor = g reshaped to tensor's shape"

    def infer(tensor, shape):
        target = np.asarray(shape)
        if target.ndim != 1 or (target.size and target.dtype.kind not in "iu"):
            raise ShapeError(f"Reshape: shape must be a list of integer sizes, got {target.tolist()!r}")
        dims = [int(d) for d in target]
        if any(d < -1 for d in dims) or dims.count(-1) > 1:
            raise ShapeError(f"Reshape: sizes must be at least 0 with at most one -1, got {dims}")
        known = math.prod(d for d in dims if d != -1)
        size = tensor.size
        if -1 in dims:
            if known == 0:
                raise ShapeError(f"Reshape: cannot work out the -1 in {dims}: the other sizes multiply to 0")
            if size is not None and size % known:
                raise ShapeError(f"Reshape: {size} elements of {_fmt(tensor.shape)} do not fit shape {dims}")
            fill = None if size is None else size // known
            return TensorType(tuple(fill if d == -1 else d for d in dims), tensor.dtype)
        if size is not None and size != known:
            raise ShapeError(f"Reshape: {size} elements of {_fmt(tensor.shape)} do not fit shape {dims} "
                             f"({known} elements)")
        return TensorType(tuple(dims), tensor.dtype)

    def forward(tensor, shape):
        return np.reshape(tensor, shape)

    def vjp(g, out, tensor, shape):
        return (g.reshape(tensor.shape), None)


def _check_perm(perm, rank):
    p = np.asarray(perm)
    if p.ndim != 1 or sorted(p.tolist()) != list(range(rank)):
        raise ShapeError(f"Transpose: perm {p.tolist()!r} is not a permutation of the {rank} axes "
                         f"0..{rank - 1}")
    return p.tolist()


@block("Transpose", category="array_ops")
class Transpose:
    """Permutes the axes of ``x``: axis ``i`` of the result is axis ``perm[i]`` of ``x``.

    Without ``perm`` the axes are reversed (a matrix is transposed).
    """

    inputs = (Input("x"), Input("perm", dtype="int", static=True, optional=True,
                                doc="the new order of the axes; reversed when unwired"))
    outputs = (Output("y"),)
    grad_rule = """
        dx = g transposed by the inverse permutation argsort(perm) (axes reversed again when perm is unwired)
        """

    def infer(x, perm):
        if perm is None:
            return TensorType(x.shape[::-1], x.dtype)
        return TensorType(tuple(x.shape[i] for i in _check_perm(perm, x.rank)), x.dtype)

    def forward(x, perm):
        return np.transpose(x, perm)

    def vjp(g, out, x, perm):
        return (np.transpose(g, None if perm is None else np.argsort(perm)), None)


# --------------------------------------------------------------------------------------------
# Shared helpers of the shape-manipulating blocks

# Integer results computed from constant inputs are folded at compile time (Shape → StridedSlice
# → Concat → Reshape's shape, as TF graphs compute shapes); float results are not, so a large
# constant weight never gets copied while compiling.
_FOLD_KINDS = "iub"
_FOLD_MAX = 4096


def _scalar(v) -> int:
    """A static scalar operand (an int, a 0-d or a 1-element array) as a Python int; fast path."""
    return v if type(v) is int else v.item()


def _static_int(op, name, value) -> int:
    """A static scalar operand, checked: an integer given as a number or a 1-element list."""
    arr = np.asarray(value)
    if arr.size != 1 or arr.dtype.kind not in "iu" or arr.ndim > 1:
        raise ShapeError(f"{op}: {name} must be one integer, got {arr.tolist()!r}")
    return int(arr.item())


def _static_ints(op, name, value, length=None) -> tuple:
    """A static list operand (an int or a 1-D list of ints), checked, as a tuple of ints."""
    arr = np.asarray(value)
    if arr.ndim > 1 or (arr.size and arr.dtype.kind not in "iu"):
        raise ShapeError(f"{op}: {name} must be a list of integers, got {arr.tolist()!r}")
    ints = tuple(int(v) for v in arr.reshape(-1))
    if length is not None and len(ints) != length:
        raise ShapeError(f"{op}: {name} needs {length} entries (one per axis), got {list(ints)}")
    return ints


def _axis_in(op, axis, rank, name="axis") -> int:
    """``axis`` normalized into [0, rank), with TF's range check; rank may be one past for
    ops that insert an axis (pass rank + 1)."""
    if not -rank <= axis < rank:
        raise ShapeError(f"{op}: {name} {axis} is out of range for {rank} axes "
                         f"(it must be in [{-rank}, {rank - 1}])")
    return axis % rank


def _merge(op, a, b, what="shapes"):
    """The one shape two shapes with unknown sizes can both be; ShapeError when none."""
    if len(a) != len(b):
        raise ShapeError(f"{op}: {what} {_fmt(a)} and {_fmt(b)} differ in rank")
    out = []
    for da, db in zip(a, b):
        if da is not None and db is not None and da != db:
            raise ShapeError(f"{op}: {what} {_fmt(a)} and {_fmt(b)} differ")
        out.append(db if da is None else da)
    return tuple(out)


def _fold(op, t, fn, *args, **attrs):
    """``t`` (a TensorType or a list of them, for an OutputList), with the value computed by
    ``fn`` when every tensor input is a small constant and the result is a small integer or bool
    tensor (small inputs can make a huge result: Tile, Fill, OneHot, Diag; those are left to run
    time, where the runtime checks their size, instead of being made while compiling)."""
    first = t[0] if isinstance(t, list) else t
    if isinstance(t, list) and not t or first.dtype.kind not in _FOLD_KINDS:
        return t
    if any(u.size is None or u.size > _FOLD_MAX for u in (t if isinstance(t, list) else (t,))):
        return t
    values = []
    for a in args:
        group = a if isinstance(a, list) else (a,)
        if isinstance(group[0], TensorType):
            if any(x.value is None or x.size > _FOLD_MAX for x in group):
                return t
            values.append([x.value for x in a] if isinstance(a, list) else a.value)
        else:
            values.append(a)
    try:
        value = fn(*values, **attrs)
    except (ValueError, IndexError) as exc:  # a constant index out of range, say
        raise ShapeError(f"{op}: {exc}") from None
    if isinstance(value, list):
        return [TensorType(np.shape(v), u.dtype, np.asarray(v)) for u, v in zip(t, value)]
    value = np.asarray(value)
    return TensorType(value.shape, t.dtype, value)


# --------------------------------------------------------------------------------------------
# Identity-like blocks


@block("PreventGradient", category="array_ops")
class PreventGradient:
    """Outputs its input as-is; differentiating through it is an error naming the block.

    TensorFlow's ``tf.raw_ops.PreventGradient``: a marker for values whose gradient is not
    implemented or must not be taken. The forward pass is the identity; a run that would send
    gradient back through the block fails, naming it and showing ``message``.
    """

    inputs = (Input("input"),)
    outputs = (Output("output"),)
    attrs = (Attr("message", "str", "", doc="shown in the error when a gradient reaches the block"),)
    gradient = "prevent"
    grad_rule = """
        identity forward; a gradient reaching it is an error naming the block (with message): no dinput
        """

    def infer(x, *, message):
        return x

    def forward(x, *, message):
        return x


@block("EnsureShape", category="array_ops")
class EnsureShape:
    """Passes ``input`` on, checking it has ``shape``; refines unknown sizes for later blocks.

    TensorFlow's ``tf.ensure_shape``: ``shape`` may hold -1 for sizes left open. At compile time
    the known sizes of the input and of ``shape`` must agree and the output gets the sizes either
    knows; at run time a tensor of another shape is an error. The gradient passes straight
    through.
    """

    inputs = (Input("input"),)
    outputs = (Output("output"),)
    attrs = (Attr("shape", "shape", (), doc="the expected shape; -1 for an open size"),)
    grad_rule = "dinput = g"

    def infer(x, *, shape):
        return TensorType(_merge("EnsureShape", x.shape, shape, "input shape and expected shape"),
                          x.dtype, x.value)

    def forward(x, *, shape):
        s = x.shape
        if len(s) != len(shape) or any(d is not None and d != n for d, n in zip(shape, s)):
            raise ShapeError(f"EnsureShape: the input has shape {list(s)}, expected {_fmt(shape)}")
        return x

    def vjp(g, out, x, *, shape):
        return (g,)


@block("IdentityN", category="array_ops")
class IdentityN:
    """Returns each of its inputs unchanged, one output per input; gradients pass through.

    TensorFlow's ``tf.identity_n``: the inputs may differ in shape and dtype.
    """

    inputs = (InputList("input", dtype="any"),)
    outputs = (OutputList("output", count="input"),)
    grad_rule = "dinput[i] = g[i], the gradient of output[i] (zeros when output[i] gets none)"

    def infer(xs):
        return list(xs)

    def forward(xs):
        return list(xs)

    def vjp(g, out, xs, *, needs):
        return ([(gi if gi is not None else np.zeros_like(x)) if need else None
                 for gi, x, need in zip(g, xs, needs[0])],)


# --------------------------------------------------------------------------------------------
# Adding and removing size-1 axes


@block("ExpandDims", category="array_ops")
class ExpandDims:
    """Inserts a size-1 axis into ``input`` at position ``axis``.

    ``axis`` is in [-rank-1, rank]; a negative one counts from the end of the *result*
    (``-1`` appends an axis), as in TensorFlow's ``tf.expand_dims``. The gradient is reshaped
    back.
    """

    inputs = (Input("input"), Input("axis", dtype="int", static=True, doc="where the new axis goes"))
    outputs = (Output("output"),)
    grad_rule = "dinput = g reshaped to input's shape (the inserted size-1 axis removed)"

    def infer(x, axis):
        a = _axis_in("ExpandDims", _static_int("ExpandDims", "axis", axis), x.rank + 1)
        t = TensorType(x.shape[:a] + (1,) + x.shape[a:], x.dtype)
        return _fold("ExpandDims", t, ExpandDims.forward, x, axis)

    def forward(x, axis):
        a = _scalar(axis)
        s = x.shape
        if a < 0:
            a += len(s) + 1
        return x.reshape(s[:a] + (1,) + s[a:])

    def vjp(g, out, x, axis):
        return (g.reshape(x.shape), None)


def _squeeze_axes(op, shape, axis):
    """The axes Squeeze removes, checked against the known sizes."""
    rank = len(shape)
    if not axis:
        if None in shape:
            raise ShapeError(f"{op}: cannot tell which of the unknown sizes in {_fmt(shape)} are 1; "
                             f"list the axes to remove in 'axis'")
        return tuple(i for i, d in enumerate(shape) if d == 1)
    axes = set()
    for a in axis:
        i = _axis_in(op, a, rank)
        if shape[i] is not None and shape[i] != 1:
            raise ShapeError(f"{op}: cannot remove axis {a} of {_fmt(shape)}: its size is {shape[i]}, not 1")
        axes.add(i)
    return tuple(sorted(axes))


@block("Squeeze", category="array_ops")
class Squeeze:
    """Removes size-1 axes of ``input``: those listed in ``axis``, or all of them.

    TensorFlow's ``tf.squeeze`` (the op's ``squeeze_dims``): removing an axis whose size is not 1
    is an error. Without ``axis`` every size-1 axis goes, which needs the input's sizes known when
    compiling (list the axes when the input has open sizes, such as a batch dimension). The
    gradient is reshaped back.
    """

    inputs = (Input("input"),)
    outputs = (Output("output"),)
    attrs = (Attr("axis", "ints", (), doc="the size-1 axes to remove; all of them when empty"),)
    grad_rule = "dinput = g reshaped to input's shape (the removed size-1 axes put back)"

    def infer(x, *, axis):
        axes = _squeeze_axes("Squeeze", x.shape, axis)
        t = TensorType(tuple(d for i, d in enumerate(x.shape) if i not in axes), x.dtype)
        return _fold("Squeeze", t, Squeeze.forward, x, axis=axis)

    def forward(x, *, axis):
        if not axis:
            return x.squeeze()
        s = x.shape
        axes = _squeeze_axes("Squeeze", s, axis)
        return x.reshape(tuple(d for i, d in enumerate(s) if i not in axes))

    def vjp(g, out, x, *, axis):
        return (g.reshape(x.shape),)


# --------------------------------------------------------------------------------------------
# Joining and splitting


@block("Concat", category="array_ops", aliases=("ConcatV2", "concat"))
class Concat:
    """Joins ``values`` end to end along ``axis``; the other sizes must agree.

    TensorFlow's ``tf.concat`` (op ConcatV2): every value has the same rank and dtype, ``axis``
    may be negative. The gradient is ``g`` cut back into pieces along ``axis`` (views of ``g``, no
    copies).
    """

    inputs = (InputList("values", doc="the tensors to join, of one rank and dtype"),
              Input("axis", dtype="int", static=True, doc="the axis to join along"))
    outputs = (Output("output"),)
    grad_rule = "dvalues[i] = the slice of g along axis where values[i] was placed"

    def infer(values, axis):
        first = values[0]
        if first.rank == 0:
            raise ShapeError("Concat: cannot join scalars (rank 0); Stack them instead")
        a = _axis_in("Concat", _static_int("Concat", "axis", axis), first.rank)
        shape = list(first.shape)
        total = 0
        for t in values:
            if t.rank != first.rank:
                raise ShapeError(f"Concat: values of shapes {_fmt(first.shape)} and {_fmt(t.shape)} "
                                 f"differ in rank")
            for i, (d, e) in enumerate(zip(shape, t.shape)):
                if i != a and e is not None:
                    if d is not None and d != e:
                        raise ShapeError(f"Concat: values of shapes {_fmt(first.shape)} and {_fmt(t.shape)} "
                                         f"differ on axis {i}; only axis {a}, the one joined along, may")
                    shape[i] = e
            total = None if total is None or t.shape[a] is None else total + t.shape[a]
        shape[a] = total
        out = TensorType(tuple(shape), first.dtype)
        return _fold("Concat", out, Concat.forward, values, axis)

    def forward(values, axis):
        if len(values) == 1:
            return values[0]
        return np.concatenate(values, axis=_scalar(axis))

    def vjp(g, out, values, axis, *, needs):
        a = _scalar(axis) % g.ndim
        cts, start = [], 0
        lead = (slice(None),) * a
        for x, need in zip(values, needs[0]):
            stop = start + x.shape[a]
            cts.append(g[lead + (slice(start, stop),)] if need else None)
            start = stop
        return cts, None


@block("Stack", category="array_ops", aliases=("Pack", "stack"))
class Stack:
    """Stacks ``values`` of one shape into a tensor with a new axis ``axis`` of size len(values).

    TensorFlow's ``tf.stack`` (op Pack): ``axis`` is in [-rank-1, rank] of the values. The
    gradient of each value is its slice of ``g`` (a view).
    """

    inputs = (InputList("values", doc="the tensors to stack, all of one shape and dtype"),)
    outputs = (Output("output"),)
    attrs = (Attr("axis", "int", 0, doc="position of the new axis in the result"),)
    grad_rule = "dvalues[i] = g[..., i, ...], the i-th slice of g along axis"

    def infer(values, *, axis):
        shape = values[0].shape
        for t in values[1:]:
            shape = _merge("Stack", shape, t.shape)
        a = _axis_in("Stack", axis, len(shape) + 1)
        out = TensorType(shape[:a] + (len(values),) + shape[a:], values[0].dtype)
        return _fold("Stack", out, Stack.forward, values, axis=axis)

    def forward(values, *, axis):
        return np.stack(values, axis=axis)

    def vjp(g, out, values, *, axis, needs):
        a = axis % g.ndim
        lead = (slice(None),) * a
        return ([g[lead + (i,)] if need else None for i, need in enumerate(needs[0])],)


# Each piece is an output port, drawn and wired on the canvas: a few thousand is already more than
# anyone can use, and an attr of 10^8 would make the compiler build 10^8 ports (minutes, then a
# MemoryError).
_MAX_PIECES = 4096


def _pieces_to_cotangent(g, x, axis, bounds):
    """The cotangent of a tensor cut along ``axis`` at ``bounds``, from its pieces' cotangents
    (None where a piece got no gradient): one concatenation, or zeros filled in."""
    if all(gi is not None for gi in g):
        return np.concatenate(g, axis=axis) if len(g) > 1 else g[0]
    gx = np.zeros(x.shape, x.dtype)
    lead = (slice(None),) * axis
    for gi, (start, stop) in zip(g, bounds):
        if gi is not None:
            gx[lead + (slice(start, stop),)] = gi
    return gx


@block("Unstack", category="array_ops", aliases=("Unpack", "unstack"))
class Unstack:
    """Cuts ``value`` along ``axis`` into ``num`` tensors, one per index, dropping that axis.

    TensorFlow's ``tf.unstack`` (op Unpack): the size of ``axis`` must be ``num``. The outputs are
    views of the input. The gradient stacks the outputs' gradients back (zeros for outputs that
    got none).
    """

    inputs = (Input("value"),)
    outputs = (OutputList("output", count="num"),)
    attrs = (Attr("num", "int", min=0, max=_MAX_PIECES, doc="the number of outputs: the size of axis"),
             Attr("axis", "int", 0, doc="the axis to unstack along"))
    grad_rule = """
        dvalue = the gradients g[i] of output[i] stacked along axis (zeros for outputs that got none)
        """

    def infer(value, *, num, axis):
        if value.rank == 0:
            raise ShapeError("Unstack: cannot unstack a scalar")
        a = _axis_in("Unstack", axis, value.rank)
        if value.shape[a] is not None and value.shape[a] != num:
            raise ShapeError(f"Unstack: axis {axis} of {_fmt(value.shape)} has size {value.shape[a]}, "
                             f"but num is {num}")
        t = TensorType(value.shape[:a] + value.shape[a + 1:], value.dtype)
        return _fold("Unstack", [t] * num, Unstack.forward, value, num=num, axis=axis)

    def forward(value, *, num, axis):
        a = axis % value.ndim
        if value.shape[a] != num:
            raise ShapeError(f"Unstack: axis {axis} of {list(value.shape)} has size {value.shape[a]}, "
                             f"but num is {num}")
        lead = (slice(None),) * a
        return [value[lead + (i,)] for i in range(num)]

    def vjp(g, out, value, *, num, axis):
        a = axis % value.ndim
        if g and all(gi is not None for gi in g):
            return (np.stack(g, axis=a),)
        gx = np.zeros(value.shape, value.dtype)
        lead = (slice(None),) * a
        for i, gi in enumerate(g):
            if gi is not None:
                gx[lead + (i,)] = gi
        return (gx,)


@block("Split", category="array_ops", aliases=("split",))
class Split:
    """Cuts ``value`` along ``axis`` into ``num_split`` equal pieces.

    TensorFlow's ``tf.split`` with a number of splits (op Split): the size of ``axis`` must be
    divisible by ``num_split``. The outputs are views of the input. The gradient concatenates the
    pieces' gradients (zeros for pieces that got none).
    """

    inputs = (Input("axis", dtype="int", static=True, doc="the axis to cut along"), Input("value"))
    outputs = (OutputList("output", count="num_split"),)
    attrs = (Attr("num_split", "int", min=1, max=_MAX_PIECES, doc="the number of equal pieces"),)
    grad_rule = """
        dvalue = the gradients g[i] of output[i] concatenated along axis (zeros for pieces that got none)
        """

    def infer(axis, value, *, num_split):
        if value.rank == 0:
            raise ShapeError("Split: cannot split a scalar")
        a = _axis_in("Split", _static_int("Split", "axis", axis), value.rank)
        d = value.shape[a]
        if d is not None and d % num_split:
            raise ShapeError(f"Split: axis {a} of {_fmt(value.shape)} has size {d}, which does not split "
                             f"into {num_split} equal pieces")
        t = TensorType(value.shape[:a] + (None if d is None else d // num_split,) + value.shape[a + 1:],
                       value.dtype)
        return _fold("Split", [t] * num_split, Split.forward, axis, value, num_split=num_split)

    def forward(axis, value, *, num_split):
        a = _scalar(axis) % value.ndim
        d = value.shape[a]
        if d % num_split:
            raise ShapeError(f"Split: axis {a} of {list(value.shape)} has size {d}, which does not split "
                             f"into {num_split} equal pieces")
        step = d // num_split
        lead = (slice(None),) * a
        return [value[lead + (slice(i * step, (i + 1) * step),)] for i in range(num_split)]

    def vjp(g, out, axis, value, *, num_split):
        a = _scalar(axis) % value.ndim
        step = value.shape[a] // num_split
        return None, _pieces_to_cotangent(g, value, a, [(i * step, (i + 1) * step) for i in range(num_split)])


def _split_sizes(op, sizes, d, num_split):
    """SplitV's sizes with the one -1 worked out (when the axis size is known)."""
    if len(sizes) != num_split:
        raise ShapeError(f"{op}: size_splits {list(sizes)} has {len(sizes)} entries, "
                         f"num_split is {num_split}")
    if any(s < -1 for s in sizes) or sizes.count(-1) > 1:
        raise ShapeError(f"{op}: size_splits must be sizes of at least 0 with at most one -1, "
                         f"got {list(sizes)}")
    known = sum(s for s in sizes if s != -1)
    if d is None:
        return tuple(None if s == -1 else s for s in sizes)
    if -1 in sizes:
        if known > d:
            raise ShapeError(f"{op}: size_splits {list(sizes)} add up to more than the axis size {d}")
        return tuple(d - known if s == -1 else s for s in sizes)
    if known != d:
        raise ShapeError(f"{op}: size_splits {list(sizes)} add up to {known}, the axis has size {d}")
    return tuple(sizes)


@block("SplitV", category="array_ops")
class SplitV:
    """Cuts ``value`` along ``axis`` into pieces of the sizes listed in ``size_splits``.

    TensorFlow's ``tf.split`` with a list of sizes (op SplitV): the sizes add up to the size of
    ``axis``; one of them may be -1 for whatever remains. The outputs are views of the input. The
    gradient concatenates the pieces' gradients (zeros for pieces that got none).
    """

    inputs = (Input("value"),
              Input("size_splits", dtype="int", static=True, doc="the pieces' sizes; one may be -1"),
              Input("axis", dtype="int", static=True, doc="the axis to cut along"))
    outputs = (OutputList("output", count="num_split"),)
    attrs = (Attr("num_split", "int", min=1, max=_MAX_PIECES,
                  doc="the number of pieces (entries of size_splits)"),)
    grad_rule = """
        dvalue = the gradients g[i] of output[i] concatenated along axis (zeros for pieces that got none)
        """

    def infer(value, size_splits, axis, *, num_split):
        if value.rank == 0:
            raise ShapeError("SplitV: cannot split a scalar")
        a = _axis_in("SplitV", _static_int("SplitV", "axis", axis), value.rank)
        sizes = _split_sizes("SplitV", _static_ints("SplitV", "size_splits", size_splits), value.shape[a],
                             num_split)
        out = [TensorType(value.shape[:a] + (s,) + value.shape[a + 1:], value.dtype) for s in sizes]
        return _fold("SplitV", out, SplitV.forward, value, size_splits, axis, num_split=num_split)

    def forward(value, size_splits, axis, *, num_split):
        a = _scalar(axis) % value.ndim
        lead = (slice(None),) * a
        return [value[lead + (slice(start, stop),)]
                for start, stop in _split_bounds(value.shape[a], size_splits, num_split)]

    def vjp(g, out, value, size_splits, axis, *, num_split):
        a = _scalar(axis) % value.ndim
        return _pieces_to_cotangent(g, value, a, _split_bounds(value.shape[a], size_splits, num_split)), \
            None, None


def _split_bounds(d, size_splits, num_split):
    sizes = _split_sizes("SplitV", _static_ints("SplitV", "size_splits", size_splits), d, num_split)
    bounds, start = [], 0
    for s in sizes:
        bounds.append((start, start + s))
        start += s
    return bounds


# --------------------------------------------------------------------------------------------
# Slicing


def _as_tuple(op, name, v):
    """A static list operand as a tuple of ints: the hashable key of the slicing caches."""
    if type(v) is np.ndarray and v.ndim == 1 and v.dtype.kind in "iu":
        return tuple(v.tolist())
    return _static_ints(op, name, v)


def _slice_index(shape, begin, size):
    """Slice's index tuple and result shape, checked against the known sizes."""
    return _slice_spec(shape, _as_tuple("Slice", "begin", begin), _as_tuple("Slice", "size", size))


@functools.lru_cache(maxsize=512)
def _slice_spec(shape, begin, size):
    op, rank = "Slice", len(shape)
    for name, v in (("begin", begin), ("size", size)):
        if len(v) != rank:
            raise ShapeError(f"{op}: {name} needs {rank} entries (one per axis), got {list(v)}")
    index, out = [], []
    for i, (d, b, s) in enumerate(zip(shape, begin, size)):
        if b < 0 or s < -1:
            raise ShapeError(f"{op}: begin {list(begin)} must be at least 0 and size {list(size)} "
                             f"at least -1")
        if d is not None and (b > d or (s != -1 and b + s > d)):
            raise ShapeError(f"{op}: begin {list(begin)} with size {list(size)} reaches outside axis {i} of "
                             f"{_fmt(shape)}")
        index.append(slice(b, None if s == -1 else b + s))
        out.append((None if d is None else d - b) if s == -1 else s)
    return tuple(index), tuple(out)


@block("Slice", category="array_ops")
class Slice:
    """The block of ``input`` starting at ``begin`` with ``size`` entries per axis (-1: to the end).

    TensorFlow's ``tf.slice``: ``begin`` and ``size`` have one entry per axis; the block must lie
    inside the input. The result is a view. The gradient puts ``g`` back in place, zeros around it.
    """

    inputs = (Input("input"),
              Input("begin", dtype="int", static=True, doc="first index on each axis"),
              Input("size", dtype="int", static=True, doc="entries taken on each axis; -1 for all the rest"))
    outputs = (Output("output"),)
    grad_rule = "dinput = zeros of input's shape with g written back at the sliced block"

    def infer(x, begin, size):
        _, shape = _slice_index(x.shape, begin, size)
        return _fold("Slice", TensorType(shape, x.dtype), Slice.forward, x, begin, size)

    def forward(x, begin, size):
        return x[_slice_index(x.shape, begin, size)[0]]

    def vjp(g, out, x, begin, size):
        gx = np.zeros(x.shape, g.dtype)
        gx[_slice_index(x.shape, begin, size)[0]] = g
        return gx, None, None


_NEW_AXIS = object()


def _strided_spec(rank, begin, end, strides, begin_mask, end_mask, ellipsis_mask, new_axis_mask,
                  shrink_axis_mask):
    """TF's sparse slice spec made dense: one entry per index of the result's construction.

    Entries are ``_NEW_AXIS``, ``(axis, int)`` for a shrunk axis, or ``(axis, slice)``; every
    axis of the input appears once (the ellipsis and the unlisted trailing axes as full slices).
    """
    n = len(begin)
    if not n == len(end) == len(strides):
        raise ShapeError(f"StridedSlice: begin {list(begin)}, end {list(end)} and strides {list(strides)} "
                         f"must have the same length")
    if bin(ellipsis_mask).count("1") > 1:
        raise ShapeError(f"StridedSlice: ellipsis_mask {ellipsis_mask} has more than one bit set")
    sparse = []
    for i in range(n):
        bit = 1 << i
        if ellipsis_mask & bit:
            sparse.append("...")
        elif new_axis_mask & bit:
            sparse.append(_NEW_AXIS)
        else:
            sparse.append(i)
    real = sum(1 for s in sparse if type(s) is int)
    if real > rank:
        raise ShapeError(f"StridedSlice: the spec indexes {real} axes, the input has {rank}")
    if "..." not in sparse:
        sparse.append("...")
    entries, axis = [], 0
    for s in sparse:
        if s is _NEW_AXIS:
            entries.append(_NEW_AXIS)
        elif s == "...":
            for _ in range(rank - real):
                entries.append((axis, slice(None)))
                axis += 1
        else:
            i, bit = s, 1 << s
            stride = strides[i]
            if stride == 0:
                raise ShapeError(f"StridedSlice: strides {list(strides)} has a 0 (entry {i})")
            if shrink_axis_mask & bit:
                if stride < 0:
                    raise ShapeError(f"StridedSlice: a shrunk axis (entry {i}) needs a positive stride, "
                                     f"got {stride}")
                entries.append((axis, begin[i]))
            else:
                entries.append((axis, slice(None if begin_mask & bit else begin[i],
                                            None if end_mask & bit else end[i], stride)))
            axis += 1
    return tuple(entries)


def _strided(shape, begin, end, strides, masks):
    """(numpy index tuple, result shape) of a StridedSlice on ``shape`` (sizes may be None)."""
    op = "StridedSlice"
    b = _as_tuple(op, "begin", begin)
    return _strided_index(shape, b, _as_tuple(op, "end", end),
                          (1,) * len(b) if strides is None else _as_tuple(op, "strides", strides), masks)


@functools.lru_cache(maxsize=512)
def _strided_index(shape, b, e, s, masks):
    op = "StridedSlice"
    entries = _strided_spec(len(shape), b, e, s, *masks)
    index, out = [], []
    for entry in entries:
        if entry is _NEW_AXIS:
            index.append(None)
            out.append(1)
            continue
        axis, ix = entry
        index.append(ix)
        d = shape[axis]
        if type(ix) is int:
            if d is not None and not -d <= ix < d:
                raise ShapeError(f"{op}: index {ix} of a shrunk axis is out of range for axis {axis} of "
                                 f"{_fmt(shape)}")
        else:
            out.append(None if d is None else len(range(*ix.indices(d))))
    return tuple(index), tuple(out)


@block("StridedSlice", category="array_ops", aliases=("strided_slice",))
class StridedSlice:
    """Python-style slicing ``input[begin:end:strides, ...]`` with TF's masks.

    TensorFlow's ``tf.strided_slice``, what ``x[1:, ::-2, tf.newaxis, ..., 0]`` builds. Entry i of
    ``begin``/``end``/``strides`` applies to the next axis; negative indices count from the end,
    out-of-range ones are clamped. Bit i of ``begin_mask``/``end_mask`` ignores begin[i]/end[i]
    (the full range); of ``ellipsis_mask`` (one bit at most), the entry stands for as many full
    axes as needed; of ``new_axis_mask``, the entry inserts a size-1 axis; of ``shrink_axis_mask``,
    the entry takes the single index begin[i] and drops the axis. Axes the spec does not reach
    are kept whole. ``strides`` defaults to all 1. The gradient scatters ``g`` back into zeros.
    """

    inputs = (Input("input"),
              Input("begin", dtype="int", static=True),
              Input("end", dtype="int", static=True),
              Input("strides", dtype="int", static=True, optional=True, doc="all 1 when unwired"))
    outputs = (Output("output"),)
    attrs = (Attr("begin_mask", "int", 0, min=0, doc="bit i set: entry i starts at the beginning"),
             Attr("end_mask", "int", 0, min=0, doc="bit i set: entry i runs to the end"),
             Attr("ellipsis_mask", "int", 0, min=0, doc="bit i set: entry i is '...'"),
             Attr("new_axis_mask", "int", 0, min=0, doc="bit i set: entry i inserts a size-1 axis"),
             Attr("shrink_axis_mask", "int", 0, min=0, doc="bit i set: entry i takes index begin[i]"))
    grad_rule = """
        dinput = zeros of input's shape with g written back where the slice read
        (the same begin, end, strides and masks)
        """

    def infer(x, begin, end, strides, *, begin_mask, end_mask, ellipsis_mask, new_axis_mask,
              shrink_axis_mask):
        masks = (begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_axis_mask)
        _, shape = _strided(x.shape, begin, end, strides, masks)
        return _fold("StridedSlice", TensorType(shape, x.dtype), StridedSlice.forward, x, begin, end, strides,
                     begin_mask=begin_mask, end_mask=end_mask, ellipsis_mask=ellipsis_mask,
                     new_axis_mask=new_axis_mask, shrink_axis_mask=shrink_axis_mask)

    def forward(x, begin, end, strides, *, begin_mask, end_mask, ellipsis_mask, new_axis_mask,
                shrink_axis_mask):
        masks = (begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_axis_mask)
        return x[_strided(x.shape, begin, end, strides, masks)[0]]

    def vjp(g, out, x, begin, end, strides, *, begin_mask, end_mask, ellipsis_mask, new_axis_mask,
            shrink_axis_mask):
        masks = (begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_axis_mask)
        gx = np.zeros(x.shape, g.dtype)
        gx[_strided(x.shape, begin, end, strides, masks)[0]] = g
        return gx, None, None, None


# --------------------------------------------------------------------------------------------
# Gathering and scattering by index


def _gather_axes(op, params_rank, indices_rank, axis, batch_dims):
    """Gather's axis and batch_dims, normalized and checked."""
    if batch_dims < 0:
        batch_dims += indices_rank
    if not 0 <= batch_dims <= indices_rank:
        raise ShapeError(f"{op}: batch_dims must be in [{-indices_rank}, {indices_rank}] for indices of "
                         f"rank {indices_rank}")
    a = _axis_in(op, axis, params_rank)
    if a < batch_dims:
        raise ShapeError(f"{op}: axis {axis} comes before the {batch_dims} batch dimension(s)")
    return a, batch_dims


_min, _max = np.minimum.reduce, np.maximum.reduce


def _check_indices(op, indices, n):
    """TF's CPU kernels reject out-of-range indices (numpy would wrap negative ones)."""
    if indices.size:
        lo, hi = _min(indices, axis=None), _max(indices, axis=None)
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
        ax = 0 if axis is None else _static_int("Gather", "axis", axis)
        if params.rank == 0:
            raise ShapeError("Gather: params must have rank 1 or more, got a scalar")
        a, b = _gather_axes("Gather", params.rank, indices.rank, ax, batch_dims)
        batch = _merge("Gather", params.shape[:b], indices.shape[:b], "batch sizes of params and indices")
        shape = batch + params.shape[b:a] + indices.shape[b:] + params.shape[a + 1:]
        return _fold("Gather", TensorType(shape, params.dtype), Gather.forward, params, indices, axis,
                     batch_dims=batch_dims)

    def forward(params, indices, axis, *, batch_dims):
        a = 0 if axis is None else _scalar(axis)
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
        a = 0 if axis is None else _scalar(axis)
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
        raise ShapeError(f"{op}: the last size of indices {_fmt(indices.shape)} (the length of each index "
                         f"vector) must be known when compiling")
    if k > len(params_shape):
        raise ShapeError(f"{op}: index vectors of length {k} (indices {_fmt(indices.shape)}) are longer "
                         f"than the rank of {_fmt(params_shape)}")
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
        return _fold("GatherNd", t, GatherNd.forward, params, indices)

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
        dims = _static_ints("ScatterNd", "shape", shape)
        if any(d < 0 for d in dims):
            raise ShapeError(f"ScatterNd: shape {list(dims)} has a negative size")
        k = _nd_check("ScatterNd", dims, indices)
        _merge("ScatterNd", updates.shape, indices.shape[:-1] + dims[k:],
               "updates and indices[:-1] + shape[k:]")
        return _fold("ScatterNd", TensorType(dims, updates.dtype), ScatterNd.forward, indices, updates, shape)

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
# Tiling, padding, reversing


@block("Tile", category="array_ops", aliases=("tile",))
class Tile:
    """Repeats ``input`` ``multiples[i]`` times along each axis i.

    TensorFlow's ``tf.tile``: ``multiples`` has one non-negative entry per axis. The gradient sums
    ``g`` over the copies.
    """

    inputs = (Input("input"), Input("multiples", dtype="int", static=True, doc="copies along each axis"))
    outputs = (Output("output"),)
    grad_rule = "dinput = g summed over the multiples[i] copies along each axis i"

    def infer(x, multiples):
        m = _static_ints("Tile", "multiples", multiples, x.rank)
        if any(k < 0 for k in m):
            raise ShapeError(f"Tile: multiples {list(m)} must be at least 0")
        t = TensorType(tuple(None if d is None else d * k for d, k in zip(x.shape, m)), x.dtype)
        return _fold("Tile", t, Tile.forward, x, multiples)

    def forward(x, multiples):
        return np.tile(x, multiples)

    def vjp(g, out, x, multiples):
        split = []
        for k, d in zip(multiples.tolist() if type(multiples) is np.ndarray else multiples, x.shape):
            split += (k, d)
        if split[::2].count(1) == x.ndim:
            return g, None
        return g.reshape(split).sum(axis=tuple(range(0, len(split), 2))), None


def _paddings(op, paddings, shape):
    """Paddings as a tuple of (before, after) per axis, checked."""
    p = np.asarray(paddings)
    if p.shape != (len(shape), 2) or (p.size and p.dtype.kind not in "iu"):
        raise ShapeError(f"{op}: paddings must be [rank, 2] = [{len(shape)}, 2] integers, got "
                         f"{p.tolist()!r}")
    pads = tuple((int(b), int(a)) for b, a in p.tolist())
    if any(b < 0 or a < 0 for b, a in pads):
        raise ShapeError(f"{op}: paddings {p.tolist()} must be at least 0")
    return pads


@block("Pad", category="array_ops", aliases=("PadV2", "pad"))
class Pad:
    """Surrounds ``input`` with ``constant_values``: paddings[i] = [before, after] on axis i.

    TensorFlow's ``tf.pad`` in CONSTANT mode (ops Pad, PadV2); MirrorPad does the reflecting
    modes. The gradient is the middle block of ``g`` (a view).
    """

    inputs = (Input("input"),
              Input("paddings", dtype="int", static=True, doc="[rank, 2]: entries added before and after"))
    outputs = (Output("output"),)
    attrs = (Attr("constant_values", "float", 0.0, doc="the value of the added entries"),)
    grad_rule = "dinput = the middle block of g (g with the paddings cut off)"

    def infer(x, paddings, *, constant_values):
        pads = _paddings("Pad", paddings, x.shape)
        if x.dtype.kind in "iub" and constant_values != int(constant_values):
            raise ShapeError(f"Pad: constant_values {constant_values} does not fit a {x.dtype.name} tensor")
        t = TensorType(tuple(None if d is None else d + b + a for d, (b, a) in zip(x.shape, pads)), x.dtype)
        return _fold("Pad", t, Pad.forward, x, paddings, constant_values=constant_values)

    def forward(x, paddings, *, constant_values):
        pads = paddings.tolist() if type(paddings) is np.ndarray else paddings
        out = np.full([d + b + a for d, (b, a) in zip(x.shape, pads)], constant_values, x.dtype)
        out[tuple(slice(b, b + d) for d, (b, _) in zip(x.shape, pads))] = x
        return out

    def vjp(g, out, x, paddings, *, constant_values):
        pads = paddings.tolist() if type(paddings) is np.ndarray else paddings
        return g[tuple(slice(b, b + d) for d, (b, _) in zip(x.shape, pads))], None


def _mirror_limits(op, pads, shape, mode):
    extra = 0 if mode == "SYMMETRIC" else 1
    for i, (d, (b, a)) in enumerate(zip(shape, pads)):
        if d is not None and max(b, a) > d - extra:
            raise ShapeError(f"{op}: {mode} padding of axis {i} (size {d}) is at most {d - extra} on each "
                             f"side, got {[b, a]}")


@block("MirrorPad", category="array_ops")
class MirrorPad:
    """Pads ``input`` with mirror images of its border: REFLECT or SYMMETRIC.

    TensorFlow's ``tf.pad`` in REFLECT mode (the edge entry is not repeated: [1, 2, 3] padded by
    2 gives [3, 2, 1, 2, 3, 2, 1]; each side at most size - 1) or SYMMETRIC mode (it is: [2, 1, 1,
    2, 3, 3, 2]; at most size). The gradient folds the padded parts of ``g`` back onto the entries
    they copy.
    """

    inputs = (Input("input"),
              Input("paddings", dtype="int", static=True, doc="[rank, 2]: entries added before and after"))
    outputs = (Output("output"),)
    attrs = (Attr("mode", "choice", "REFLECT", choices=("REFLECT", "SYMMETRIC")),)
    grad_rule = """
        dinput = the middle block of g plus the padded parts of g mirrored back onto the entries they copy
        folded axis by axis, so a corner goes back along both axes
        """

    def infer(x, paddings, *, mode):
        pads = _paddings("MirrorPad", paddings, x.shape)
        _mirror_limits("MirrorPad", pads, x.shape, mode)
        t = TensorType(tuple(None if d is None else d + b + a for d, (b, a) in zip(x.shape, pads)), x.dtype)
        return _fold("MirrorPad", t, MirrorPad.forward, x, paddings, mode=mode)

    def forward(x, paddings, *, mode):
        pads = _paddings("MirrorPad", paddings, x.shape)
        _mirror_limits("MirrorPad", pads, x.shape, mode)
        shift = 1 if mode == "REFLECT" else 0
        out = np.empty([n + b + a for n, (b, a) in zip(x.shape, pads)], x.dtype)
        inner = [slice(b, b + n) for n, (b, _) in zip(x.shape, pads)]
        out[tuple(inner)] = x
        # Axis by axis, mirror the part filled so far: whole along the axes done, inner along
        # the rest (so corners mirror both ways, as in TensorFlow).
        for axis, (n, (b, a)) in enumerate(zip(x.shape, pads)):
            lead, tail = (slice(None),) * axis, tuple(inner[axis + 1:])
            if b:  # out[b - 1 - j] = out[b + shift + j]
                mirror = slice(2 * b - 1 + shift, b - 1 + shift, -1)
                out[lead + (slice(0, b),) + tail] = out[lead + (mirror,) + tail]
            if a:  # out[b + n + j] = out[b + n - 1 - shift - j]
                stop = b + n - 1 - shift - a
                source = slice(b + n - 1 - shift, stop if stop >= 0 else None, -1)
                out[lead + (slice(b + n, b + n + a),) + tail] = out[lead + (source,) + tail]
        return out

    def vjp(g, out, x, paddings, *, mode):
        shift = 1 if mode == "REFLECT" else 0
        pads = paddings.tolist() if type(paddings) is np.ndarray else paddings
        gx = g
        for axis, (n, (b, a)) in enumerate(zip(x.shape, pads)):
            if not (b or a):
                continue
            lead = (slice(None),) * axis
            core = gx[lead + (slice(b, b + n),)].copy()
            if b:  # padded entry i copies entry b - i (REFLECT) or b - 1 - i (SYMMETRIC)
                core[lead + (slice(shift, shift + b),)] += np.flip(gx[lead + (slice(0, b),)], axis)
            if a:  # padded entry b + n + j copies entry n - 2 - j (REFLECT) or n - 1 - j
                after = np.flip(gx[lead + (slice(b + n, b + n + a),)], axis)
                core[lead + (slice(n - shift - a, n - shift),)] += after
            gx = core
        return gx, None


@block("Reverse", category="array_ops", aliases=("ReverseV2", "reverse"))
class Reverse:
    """Reverses the order of entries of ``tensor`` along each axis listed in ``axis``.

    TensorFlow's ``tf.reverse`` (op ReverseV2): ``axis`` lists distinct axes, negative ones
    counting from the end; an empty list changes nothing. The result is a view. The gradient is
    ``g`` reversed the same way.
    """

    inputs = (Input("tensor"), Input("axis", dtype="int", static=True, doc="the axes to reverse"))
    outputs = (Output("output"),)
    grad_rule = "dtensor = g reversed along the same axes"

    def infer(x, axis):
        normalize_axis(_static_ints("Reverse", "axis", axis), x.rank)
        return _fold("Reverse", TensorType(x.shape, x.dtype), Reverse.forward, x, axis)

    def forward(x, axis):
        return np.flip(x, axis=tuple(axis.reshape(-1).tolist()) if type(axis) is np.ndarray else axis)

    def vjp(g, out, x, axis):
        return np.flip(g, axis=tuple(axis.reshape(-1).tolist()) if type(axis) is np.ndarray else axis), None


# --------------------------------------------------------------------------------------------
# Building tensors


def _check_scalar(op, name, t):
    if t.rank:
        raise ShapeError(f"{op}: {name} must be a scalar, got {t}")


@block("OneHot", category="array_ops", aliases=("one_hot",))
class OneHot:
    """One-hot encoding: ``on_value`` where ``indices`` equals the position along a new axis.

    TensorFlow's ``tf.one_hot``: a new axis of size ``depth`` goes in at ``axis`` (-1: last);
    an index outside [0, depth) gives a row of ``off_value``. The result has the dtype of
    ``on_value``/``off_value`` (float32 1 and 0 when unwired). Not differentiable: it is a
    function of integer indices only.
    """

    inputs = (Input("indices", dtype="int"),
              Input("depth", dtype="int", static=True, doc="the size of the new axis"),
              Input("on_value", optional=True, default=np.float32(1.0), doc="1.0 when unwired"),
              Input("off_value", optional=True, default=np.float32(0.0), doc="0.0 when unwired"))
    outputs = (Output("output"),)
    attrs = (Attr("axis", "int", -1, min=-1, doc="where the new axis goes; -1 appends it"),)

    def infer(indices, depth, on_value, off_value, *, axis):
        d = _static_int("OneHot", "depth", depth)
        if d < 0:
            raise ShapeError(f"OneHot: depth must be at least 0, got {d}")
        dtype = np.dtype(np.float32)
        for name, t in (("on_value", on_value), ("off_value", off_value)):
            if t is not None:
                _check_scalar("OneHot", name, t)
                dtype = t.dtype
        if on_value is not None and off_value is not None and on_value.dtype != off_value.dtype:
            raise ShapeError(f"OneHot: on_value is {on_value.dtype.name} but off_value is "
                             f"{off_value.dtype.name}")
        if axis > indices.rank:
            raise ShapeError(f"OneHot: axis {axis} is out of range for indices of rank {indices.rank} "
                             f"(it must be in [-1, {indices.rank}])")
        a = indices.rank if axis == -1 else axis
        t = TensorType(indices.shape[:a] + (d,) + indices.shape[a:], dtype)
        return _fold("OneHot", t, OneHot.forward, indices, depth, on_value, off_value, axis=axis)

    def forward(indices, depth, on_value, off_value, *, axis):
        if on_value is None:
            on_value = np.float32(1.0) if off_value is None else off_value.dtype.type(1)
        if off_value is None:
            off_value = on_value.dtype.type(0)
        s = indices.shape
        a = len(s) if axis == -1 else axis
        positions = np.arange(_scalar(depth)).reshape((-1,) + (1,) * (len(s) - a))
        return np.where(indices.reshape(s[:a] + (1,) + s[a:]) == positions, on_value, off_value)


@block("Fill", category="array_ops", aliases=("fill",))
class Fill:
    """A tensor of shape ``dims`` with every entry ``value`` (a scalar).

    TensorFlow's ``tf.fill``. The gradient to ``value`` is the sum of ``g``.
    """

    inputs = (Input("dims", dtype="int", static=True, doc="the result's shape"),
              Input("value", doc="the scalar to repeat"))
    outputs = (Output("output"),)
    grad_rule = "dvalue = Σ g, the sum of every entry of g"

    def infer(dims, value):
        shape = _static_ints("Fill", "dims", dims)
        if any(d < 0 for d in shape):
            raise ShapeError(f"Fill: dims {list(shape)} has a negative size")
        _check_scalar("Fill", "value", value)
        return _fold("Fill", TensorType(shape, value.dtype), Fill.forward, dims, value)

    def forward(dims, value):
        return np.full(dims, value, value.dtype)

    def vjp(g, out, dims, value):
        return None, np.asarray(np.add.reduce(g, axis=None, dtype=g.dtype))


def _filled_like(name, fill, doc):
    """A block giving ``fill(x)`` (np.zeros_like, np.ones_like): a tensor of x's shape and dtype."""
    def infer(x):
        return TensorType(x.shape, x.dtype)

    def forward(x):
        return fill(x)

    infer.__qualname__, forward.__qualname__ = f"{name}.infer", f"{name}.forward"
    body = dict(__module__=__name__, __qualname__=name, __doc__=inspect.cleandoc(doc),
                inputs=(Input("x", dtype="any"),), outputs=(Output("y"),), infer=infer, forward=forward)
    return block(name, category="array_ops", aliases=(fill.__name__,))(type(name, (), body))


ZerosLike = _filled_like("ZerosLike", np.zeros_like, """
    Zeros of the shape and dtype of ``x``.

    TensorFlow's ``tf.zeros_like``. Not differentiable: the result does not depend on the
    values of ``x``.
    """)


OnesLike = _filled_like("OnesLike", np.ones_like, """
    Ones of the shape and dtype of ``x``.

    TensorFlow's ``tf.ones_like``. Not differentiable: the result does not depend on the values
    of ``x``.
    """)


@block("BroadcastTo", category="array_ops", aliases=("broadcast_to",))
class BroadcastTo:
    """Repeats ``input`` along its size-1 (or missing leading) axes to the shape ``shape``.

    TensorFlow's ``tf.broadcast_to``, numpy's broadcasting rule: the input must broadcast to
    exactly ``shape``. The result is a read-only view. The gradient sums ``g`` back down to the
    input's shape.
    """

    inputs = (Input("input"), Input("shape", dtype="int", static=True, doc="the result's shape"))
    outputs = (Output("output"),)
    grad_rule = "dinput = unbroadcast(g): g summed over the broadcast axes, back to input's shape"

    def infer(x, shape):
        dims = _static_ints("BroadcastTo", "shape", shape)
        if any(d < 0 for d in dims):
            raise ShapeError(f"BroadcastTo: shape {list(dims)} has a negative size")
        lead = len(dims) - x.rank
        if lead < 0 or any(d not in (None, 1, n) for d, n in zip(x.shape, dims[lead:])):
            raise ShapeError(f"BroadcastTo: {_fmt(x.shape)} does not broadcast to {list(dims)}")
        return _fold("BroadcastTo", TensorType(dims, x.dtype), BroadcastTo.forward, x, shape)

    def forward(x, shape):
        return np.broadcast_to(x, shape)

    def vjp(g, out, x, shape):
        return unbroadcast(g, x.shape), None


# --------------------------------------------------------------------------------------------
# Shape queries


_SHAPE_TYPES = ("int32", "int64")


@block("Shape", category="array_ops", aliases=("shape",))
class Shape:
    """The shape of ``input`` as a 1-D integer tensor.

    TensorFlow's ``tf.shape``, with ``out_type`` int32 or int64. When the input's shape is
    fully known at compile time, the result is a constant that can feed static ports (Reshape's
    ``shape``, Fill's ``dims``, ...). Not differentiable (an integer output).
    """

    inputs = (Input("input", dtype="any"),)
    outputs = (Output("output"),)
    attrs = (Attr("out_type", "dtype", "int32", choices=_SHAPE_TYPES),)

    def infer(x, *, out_type):
        value = None if None in x.shape else np.array(x.shape, dtype=out_type)
        return TensorType((x.rank,), out_type, value)

    def forward(x, *, out_type):
        return np.array(x.shape, dtype=out_type)


@block("ShapeN", category="array_ops", aliases=("shape_n",))
class ShapeN:
    """The shapes of several tensors, one 1-D integer output per input.

    TensorFlow's ``tf.shape_n``; like Shape, each output whose input has a fully known shape is a
    compile-time constant. Not differentiable (integer outputs).
    """

    inputs = (InputList("input", dtype="any"),)
    outputs = (OutputList("output", count="input"),)
    attrs = (Attr("out_type", "dtype", "int32", choices=_SHAPE_TYPES),)

    def infer(xs, *, out_type):
        return [Shape.infer(x, out_type=out_type) for x in xs]

    def forward(xs, *, out_type):
        return [np.array(x.shape, dtype=out_type) for x in xs]


@block("Size", category="array_ops", aliases=("size",))
class Size:
    """The number of entries of ``input``, as an integer scalar.

    TensorFlow's ``tf.size``, with ``out_type`` int32 or int64; a compile-time constant when the
    input's shape is fully known. Not differentiable (an integer output).
    """

    inputs = (Input("input", dtype="any"),)
    outputs = (Output("output"),)
    attrs = (Attr("out_type", "dtype", "int32", choices=_SHAPE_TYPES),)

    def infer(x, *, out_type):
        n = x.size
        return TensorType((), out_type, None if n is None else np.array(n, dtype=out_type))

    def forward(x, *, out_type):
        return np.array(x.size, dtype=out_type)


@block("Rank", category="array_ops", aliases=("rank",))
class Rank:
    """The number of axes of ``input``, as an int32 scalar (always a compile-time constant).

    TensorFlow's ``tf.rank``. Not differentiable (an integer output).
    """

    inputs = (Input("input", dtype="any"),)
    outputs = (Output("output"),)

    def infer(x):
        return TensorType((), "int32", np.array(x.rank, dtype=np.int32))

    def forward(x):
        return np.array(x.ndim, dtype=np.int32)


# --------------------------------------------------------------------------------------------
# Conditions


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
        return _fold("Select", out, Select.forward, condition, t, e)

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


# --------------------------------------------------------------------------------------------
# Diagonals


@block("Diag", category="array_ops")
class Diag:
    """A tensor with ``diagonal`` on its diagonal and zeros elsewhere: shape D + D for D-shaped input.

    TensorFlow's ``tf.raw_ops.Diag``: for ``diagonal`` of shape [D1, ..., Dk] the result is
    [D1, ..., Dk, D1, ..., Dk] with ``output[i1..ik, i1..ik] = diagonal[i1..ik]`` (a vector gives
    a diagonal matrix). The gradient is the diagonal part of ``g``.
    """

    inputs = (Input("diagonal", dtype="number"),)
    outputs = (Output("output"),)
    grad_rule = "ddiagonal = the diagonal part of g (DiagPart(g))"

    def infer(d):
        return _fold("Diag", TensorType(d.shape + d.shape, d.dtype), Diag.forward, d)

    def forward(d):
        n = d.size
        out = np.zeros((n, n), d.dtype)
        out.flat[::n + 1] = d.reshape(-1)
        return out.reshape(d.shape + d.shape)

    def vjp(g, out, d):
        n = d.size
        return (g.reshape(n, n).diagonal().reshape(d.shape),)


@block("DiagPart", category="array_ops")
class DiagPart:
    """The diagonal of a tensor of shape D + D, of shape D: Diag's inverse.

    TensorFlow's ``tf.raw_ops.DiagPart``: ``output[i1..ik] = input[i1..ik, i1..ik]`` (the
    diagonal of a square matrix). The gradient puts ``g`` on the diagonal of zeros.
    """

    inputs = (Input("input", dtype="number"),)
    outputs = (Output("diagonal"),)
    grad_rule = "dinput = g placed on the diagonal of zeros of input's shape (Diag(g))"

    def infer(x):
        k = x.rank // 2
        if x.rank % 2 or not k:
            raise ShapeError(f"DiagPart needs a tensor of even rank (2 or more), got {x}")
        half = _merge("DiagPart", x.shape[:k], x.shape[k:], "halves of the shape")
        return _fold("DiagPart", TensorType(half, x.dtype), DiagPart.forward, x)

    def forward(x):
        k = x.ndim // 2
        half = x.shape[:k]
        if half != x.shape[k:]:
            raise ShapeError(f"DiagPart: the halves of the shape {list(x.shape)} differ")
        n = math.prod(half)
        return x.reshape(n, n).diagonal().reshape(half)

    def vjp(g, out, x):
        return (Diag.forward(g),)
