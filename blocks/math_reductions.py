"""math_ops, reductions over axes and running scans along one: Sum, Mean, Max, Min, Prod, ArgMax,
ArgMin, All, Any; Cumsum, Cumprod.

Imports only blockflow.spec and numpy.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from blockflow.spec import Attr, Input, Output, ShapeError, TensorType, block, normalize_axis, reduce_shape

from .common import BOOL, FLOAT_NAMES, ONE, declare, like, single_int
from .fused import fusable, sum_of_product


# The factories below declare their blocks as math_ops, from this module (their source).
_declare = partial(declare, category="math_ops", module=__name__)


def _axes(axis, ndim):
    """numpy's ``axis`` for a reduction: None (every axis) or a tuple of valid axes.

    normalize_axis accepts axis 0 for a scalar (as a no-op), which numpy itself rejects.
    """
    if axis is None:
        return None
    return normalize_axis(axis, ndim) if ndim else ()


# A reduction's cotangent is its output's cotangent repeated over the reduced axes. For small
# inputs, writing it out costs less than np.broadcast_to (several microseconds of Python per call);
# for large ones the read-only view saves the memory traffic.
_VIEW_MIN_SIZE = 4096


def _spread(g, x, axes, keep_dims):
    """The cotangent ``g`` of a reduction of ``x`` over ``axes``, repeated to x's shape."""
    if x.size >= _VIEW_MIN_SIZE and np.size(g) == 1:
        return _repeated(g, x.shape)
    if not keep_dims and axes is not None:
        g = g.reshape(_kept_shape(x.shape, axes))
    if x.size >= _VIEW_MIN_SIZE:
        return _stretched(g, x.shape)
    out = np.empty(x.shape, x.dtype)
    out[...] = g
    return out


def _repeated(g, shape):
    """The one value of ``g`` as a read-only array of ``shape`` (every stride 0): what
    np.broadcast_to makes, without its Python layers (a few us a call, as much as the rest of a
    reduction's gradient)."""
    g = np.asarray(g)
    view = np.ndarray(shape, g.dtype, g, 0, (0,) * len(shape))
    view.flags.writeable = False
    return view


def _stretched(g, shape):
    """``g`` (of ``shape`` but for sizes of 1) as a read-only view of ``shape``, its size-1 axes
    stretched (stride 0): np.broadcast_to's view, made directly when ``g`` is a C-ordered array
    (np.broadcast_to builds an nditer for it: 11 against 6 us, 53 against 32 right after a large
    product, on an AMD EPYC machine)."""
    if type(g) is not np.ndarray or not g.flags.c_contiguous or g.ndim != len(shape):
        return np.broadcast_to(g, shape)
    strides = tuple(0 if n == 1 else step for n, step in zip(g.shape, g.strides))
    view = np.ndarray(shape, g.dtype, g, 0, strides)
    view.flags.writeable = False
    return view


def _kept_shape(shape, axes):
    """``shape`` with the reduced ``axes`` (None: all) kept as size 1."""
    if axes is None:
        return (1,) * len(shape)
    return tuple(1 if i in axes else d for i, d in enumerate(shape))


def _one_axis(op, axis, rank, default=0):
    """A single axis (an int or a 0-d array; ``default`` when None) as a non-negative int."""
    axis = single_int(op, "the axis", default if axis is None else axis)
    if not -rank <= axis < rank:
        raise ShapeError(f"{op}: axis {axis} is out of range for a tensor of rank {rank}")
    return axis % rank


# |out| of a product within these bounds: the product is accurate and out / x is safe.
_TINY = {np.dtype(n): np.finfo(n).tiny for n in FLOAT_NAMES}
_HUGE = {np.dtype(n): np.finfo(n).max for n in FLOAT_NAMES}


# The reductions over ``axis`` with ``keep_dims`` (TensorFlow's ReduceSum and kin).
_REDUCE_AXIS = Input("axis", dtype="int", static=True, optional=True)
_REDUCE_INPUTS = (Input("input", dtype="number"), _REDUCE_AXIS)
_KEEP_DIMS = (Attr("keep_dims", "bool", False),)


def _reduce_infer(x, axis, *, keep_dims):
    return TensorType(reduce_shape(x.shape, axis, keep_dims), x.dtype)


def _ufunc_reduce(ufunc):
    """The forward of a reduction that is ``ufunc.reduce`` over ``axis``."""
    reduce = ufunc.reduce

    def forward(x, axis, *, keep_dims):
        return reduce(x, axis=_axes(axis, x.ndim), keepdims=keep_dims)
    return forward


# --------------------------------------------------------------------------------------------
# Sums, means, extrema and products


@block("Sum", category="math_ops", aliases=("ReduceSum", "reduce_sum"))
class Sum:
    """Sum of ``input`` over ``axis`` (all axes when unwired); ``keep_dims`` keeps them as size 1.

    ``axis`` is an int or a list of ints, negative ones counting from the end. The sum keeps the
    input's dtype (an int32 sum stays int32, as in TensorFlow).
    """

    inputs = _REDUCE_INPUTS
    outputs = (Output("output"),)
    attrs = _KEEP_DIMS
    grad_rule = "dinput = g broadcast back over the reduced axes"
    infer = _reduce_infer

    def forward(x, axis, *, keep_dims):
        # np.sum's own reduction, without its Python-level dispatch (a few us per call)
        return np.add.reduce(x, axis=_axes(axis, x.ndim), dtype=x.dtype, keepdims=keep_dims)

    # a new array (or scalar) every run, and the vjp never hands x on: the runtime may keep x's
    # array for the next run (run/lower.py, _reusable_slots)
    forward.fresh_result = True

    def vjp(g, out, x, axis, *, keep_dims):
        return (_spread(g, x, _axes(axis, x.ndim), keep_dims), None)

    vjp.reads = ()  # x's shape and dtype only, no value (run/overwrite.py)

    def of_product(a, b, axis, *, keep_dims):
        # Sum.forward(a * b, ...), what the runtime calls for a Multiply only this Sum reads
        # (run/overwrite.py, product_sums): bit for bit, without the product's array when the
        # sum is over every value
        if axis is None and fusable(a, b, ()):
            total = sum_of_product(a, b)
            return np.reshape(total, (1,) * a.ndim) if keep_dims else total
        return Sum.forward(a * b, axis, keep_dims=keep_dims)

    forward.of_product = of_product


@block("Mean", category="math_ops", aliases=("ReduceMean", "reduce_mean"))
class Mean:
    """Mean of ``input`` over ``axis`` (all axes when unwired); ``keep_dims`` keeps them as size 1.

    ``axis`` is an int or a list of ints, negative ones counting from the end. For integer
    tensors the mean is the sum divided by the count, truncated toward zero, as in TensorFlow.
    """

    inputs = _REDUCE_INPUTS
    outputs = (Output("output"),)
    attrs = _KEEP_DIMS
    grad_rule = """
        dinput = g / n broadcast back over the reduced axes
        n: the number of entries averaged into each output
        """
    infer = _reduce_infer

    def forward(x, axis, *, keep_dims):
        axes = _axes(axis, x.ndim)
        if x.dtype == np.float16:  # np.mean sums float16 in float32
            return np.mean(x, axis=axes, keepdims=keep_dims)
        # np.add.reduce is the sum np.mean does, without np.mean's Python-level overhead.
        total = np.add.reduce(x, axis=axes, dtype=x.dtype, keepdims=keep_dims)
        count = x.size // total.size if total.size else 1
        if x.dtype.kind == "f":
            return total / x.dtype.type(count)  # 0/0 = nan for an empty mean, as np.mean
        return np.trunc(total / max(count, 1)).astype(x.dtype)

    forward.fresh_result = True  # as Sum's

    def vjp(g, out, x, axis, *, keep_dims):
        count = x.size // out.size if out.size else 1
        if axis is None and x.size < _VIEW_MIN_SIZE:
            # the mean of every value of a small input (a loss): _spread's last case, without
            # its two calls
            spread = np.empty(x.shape, x.dtype)
            spread[...] = g / x.dtype.type(max(count, 1))
            return spread, None
        return (_spread(g / x.dtype.type(max(count, 1)), x, _axes(axis, x.ndim), keep_dims), None)

    vjp.reads = ()  # out's and x's shapes and dtype only, no value (as Sum's)


def _extremum(name, ufunc, example):
    """Max or Min over ``axis``; the gradient goes to the entries equal to the result."""
    def vjp(g, out, x, axis, *, keep_dims):
        axes = _axes(axis, x.ndim)
        kept = _kept_shape(x.shape, axes)
        mask = x == out.reshape(kept)
        count = mask.sum(axis=axes, keepdims=True, dtype=x.dtype)
        return (mask * (g.reshape(kept) / count), None)

    word = ufunc.__name__  # maximum, minimum
    doc = f"""
        {word.title()} of ``input`` over ``axis`` (all axes when unwired); ``keep_dims`` keeps them.

        The gradient goes to the entries equal to the {word}; when several entries tie, it is split
        evenly among them (TensorFlow's rule): {example} sends [0, 0.5, 0.5].
        """
    rule = (f"dinput = g routed to the entries equal to the {name.lower()}, split evenly among ties "
            f"(g / their count each); 0 elsewhere")
    reduce = ufunc.reduce
    lowest = ufunc is np.maximum

    def forward(x, axis, *, keep_dims):
        axes = _axes(axis, x.ndim)
        try:
            return reduce(x, axis=axes, keepdims=keep_dims)
        except ValueError:
            if x.size:
                raise
            # over no values at all TensorFlow gives the identity: the dtype's lowest value for
            # a max (-inf for floats), its highest for a min
            return reduce(x, axis=axes, keepdims=keep_dims, initial=_extreme_of(x.dtype, lowest))

    doc += f"""
        Over no values (an axis of size 0) the result is the identity, as in TensorFlow:
        {"-inf (the lowest value of an integer dtype)" if lowest else "inf (the highest value of an integer dtype)"}.
        """
    return _declare(name, doc, (f"Reduce{name}", f"reduce_{name.lower()}"), inputs=_REDUCE_INPUTS,
                    outputs=(Output("output"),), attrs=_KEEP_DIMS, infer=_reduce_infer,
                    forward=forward, vjp=vjp, grad_rule=rule)


def _extreme_of(dtype, lowest: bool):
    """The lowest (or highest) value of ``dtype``: an identity of max (or min)."""
    if dtype.kind == "f":
        return -np.inf if lowest else np.inf
    if dtype.kind == "b":
        return not lowest
    info = np.iinfo(dtype)
    return info.min if lowest else info.max


Max = _extremum("Max", np.maximum, "the max of [1, 3, 3]")


Min = _extremum("Min", np.minimum, "the min of [3, 1, 1]")


def _others_product(x, axes):
    """For each entry of ``x``, the product of the other entries of its reduction group.

    TensorFlow's way: the reduced axes go first, and the product of the entries before and of
    those after each entry (exclusive running products from both ends) are multiplied. No
    division, so zeros (and products that under- or overflow) are handled exactly.
    """
    red = tuple(range(x.ndim)) if axes is None else axes
    if not red:
        return np.ones(x.shape, x.dtype)
    perm = red + tuple(i for i in range(x.ndim) if i not in red)
    xt = np.transpose(x, perm)
    flat = xt.reshape(int(np.prod([x.shape[i] for i in red])), -1)
    left = np.empty_like(flat)
    left[0] = 1
    np.multiply.accumulate(flat[:-1], axis=0, out=left[1:])
    right = np.empty_like(flat)
    right[-1] = 1
    np.multiply.accumulate(flat[:0:-1], axis=0, out=right[-2::-1])
    left *= right
    return left.reshape(xt.shape).transpose(np.argsort(perm))


@block("Prod", category="math_ops", aliases=("ReduceProd", "reduce_prod"))
class Prod:
    """Product of ``input`` over ``axis`` (all axes when unwired); ``keep_dims`` keeps them.

    The product keeps the input's dtype. The gradient of each entry is ``g`` times the product of
    the other entries of its group: exact also when the input holds zeros (one zero in a group
    gives that entry the product of the rest and the others 0; two zeros give 0 everywhere).
    When the product is a normal, finite number it is computed as ``g * prod / x``; otherwise
    without any division, as TensorFlow does.
    """

    inputs = _REDUCE_INPUTS
    outputs = (Output("output"),)
    attrs = _KEEP_DIMS
    grad_rule = """
        dinput = g · (the product of the other entries of its group), broadcast back over the reduced axes
        computed as g · output / input when the product is a normal, finite number
        otherwise without division, exact also where the input holds zeros
        """
    infer = _reduce_infer

    def forward(x, axis, *, keep_dims):
        return np.multiply.reduce(x, axis=_axes(axis, x.ndim), dtype=x.dtype, keepdims=keep_dims)

    def vjp(g, out, x, axis, *, keep_dims):
        if x.size == 0:
            return (np.zeros(x.shape, x.dtype), None)
        axes = _axes(axis, x.ndim)
        size = np.abs(out)
        if size.min() >= _TINY[x.dtype] and size.max() <= _HUGE[x.dtype]:  # no zero in x, no nan
            return (_spread(g * out, x, axes, keep_dims) / x, None)
        others = _others_product(x, axes)
        others *= g.reshape(_kept_shape(x.shape, axes))
        return (others, None)


# --------------------------------------------------------------------------------------------
# Arg extrema and logical reductions (not differentiable)


def _arg_extremum(name, fn, word):
    """ArgMax or ArgMin: ``fn`` (np.argmax, np.argmin) along one axis, which the result drops."""
    def infer(x, dimension, *, output_type):
        if x.dtype.kind == "b":
            raise ShapeError(f"{name} does not take bool tensors")
        axis = _one_axis(name, dimension, x.rank)
        return TensorType(x.shape[:axis] + x.shape[axis + 1:], output_type)

    def forward(x, dimension, *, output_type):
        return fn(x, axis=_one_axis(name, dimension, x.ndim)).astype(output_type, copy=False)

    doc = f"""
        Index of the {word} entry of ``input`` along ``dimension`` (TF python's ``axis``).

        ``dimension`` is one axis (0 when unwired; negative counts from the end), which the result
        drops. On ties the first index wins, as in TensorFlow. The result is ``output_type`` (int64 by
        default). Not differentiable: an integer output carries no gradient.
        """
    return _declare(name, doc,
                    inputs=(Input("input", dtype="number"),
                            Input("dimension", dtype="int", static=True, optional=True, default=0,
                                  doc="the axis to reduce (TF python's axis)")),
                    outputs=(Output("output", differentiable=False),),
                    attrs=(Attr("output_type", "dtype", "int64", choices=("int32", "int64")),),
                    infer=infer, forward=forward)


ArgMax = _arg_extremum("ArgMax", np.argmax, "largest")


ArgMin = _arg_extremum("ArgMin", np.argmin, "smallest")


def _bool_reduction(name, ufunc, word, empty):
    """All or Any: ``ufunc.reduce`` (np.logical_and, np.logical_or) of a bool tensor over ``axis``."""
    def infer(x, axis, *, keep_dims):
        if x.dtype.kind != "b":
            raise ShapeError(f"{name} reduces bool tensors, got {x.dtype.name}")
        return TensorType(reduce_shape(x.shape, axis, keep_dims), BOOL)

    doc = f"""
        Logical {word} of a bool ``input`` over ``axis`` (all axes when unwired); ``keep_dims`` keeps them.

        An empty reduction is {empty}. Not differentiable (bool output).
        """
    return _declare(name, doc, (f"Reduce{name}", f"reduce_{name.lower()}"),
                    inputs=(Input("input", dtype="bool"), _REDUCE_AXIS),
                    outputs=(Output("output", differentiable=False),), attrs=_KEEP_DIMS,
                    infer=infer, forward=_ufunc_reduce(ufunc))


All = _bool_reduction("All", np.logical_and, "AND", "true")


Any = _bool_reduction("Any", np.logical_or, "OR", "false")


# --------------------------------------------------------------------------------------------
# Scans


def _scan(accumulate, x, axis, exclusive, reverse, identity):
    """Running ``accumulate`` (np.add/np.multiply.accumulate) of ``x`` along ``axis``, in x's dtype.

    ``exclusive``: entry i leaves out x[i] (the first entry is ``identity``); ``reverse``: from the
    end of the axis toward its start.
    """
    if reverse:
        x = np.flip(x, axis)
    if exclusive:
        out = np.empty(x.shape, x.dtype)
        head = (slice(None),) * axis
        out[head + (slice(0, 1),)] = identity
        accumulate(x[head + (slice(None, -1),)], axis=axis, dtype=x.dtype, out=out[head + (slice(1, None),)])
    else:
        out = accumulate(x, axis=axis, dtype=x.dtype)
    return np.flip(out, axis) if reverse else out


def _scan_infer(op, x, axis):
    if x.dtype.kind == "b":
        raise ShapeError(f"{op} does not take bool tensors")
    _one_axis(op, axis, x.rank)
    return like(x)


_SCAN_INPUTS = (Input("x", dtype="number"), Input("axis", dtype="int", static=True, optional=True, default=0))
_SCAN_ATTRS = (
    Attr("exclusive", "bool", False, doc="leave each entry out of its own running result"),
    Attr("reverse", "bool", False, doc="run from the end of the axis toward its start"),
)


@block("Cumsum", category="math_ops")
class Cumsum:
    """Running sum of ``x`` along ``axis``: ``[a, b, c]`` gives ``[a, a + b, a + b + c]``.

    As TensorFlow's ``tf.cumsum``: ``axis`` is 0 when unwired; ``exclusive`` leaves each entry
    out (``[0, a, a + b]``); ``reverse`` runs from the end (``[a + b + c, b + c, c]``). The sum
    keeps x's dtype. The gradient is the running sum of ``g`` in the opposite direction, with the
    same ``exclusive``.
    """

    inputs = _SCAN_INPUTS
    outputs = (Output("out"),)
    attrs = _SCAN_ATTRS
    grad_rule = "dx = the running sum of g along axis in the opposite direction (same exclusive)"

    def infer(x, axis, *, exclusive, reverse):
        return _scan_infer("Cumsum", x, axis)

    def forward(x, axis, *, exclusive, reverse):
        return _scan(np.add.accumulate, x, _one_axis("Cumsum", axis, x.ndim), exclusive, reverse, 0)

    def vjp(g, out, x, axis, *, exclusive, reverse):
        return (_scan(np.add.accumulate, g, _one_axis("Cumsum", axis, x.ndim), exclusive, not reverse, 0),
                None)


@block("Cumprod", category="math_ops")
class Cumprod:
    """Running product of ``x`` along ``axis``: ``[a, b, c]`` gives ``[a, a * b, a * b * c]``.

    As TensorFlow's ``tf.cumprod``: ``axis`` is 0 when unwired; ``exclusive`` leaves each entry
    out (``[1, a, a * b]``); ``reverse`` runs from the end. The product keeps x's dtype.

    The gradient of entry k is the sum over the outputs that contain it of ``g`` times the product
    of their other factors. TensorFlow computes it as ``cumsum(g * out) / x`` with 0 where
    ``x == 0``, which is wrong at zeros; here it is exact at zeros too: ``x[k] != 0`` divides as
    TF does (the sum is 0 past a zero), the first zero along the scan gets the running sum of
    ``g`` times the products with that zero left out, and later zeros get 0.
    """

    inputs = _SCAN_INPUTS
    outputs = (Output("out"),)
    attrs = _SCAN_ATTRS
    grad_rule = """
        dx[k] = Σ over the entries of out that contain x[k] of g · (the product of their other factors)
        computed as (the running sum of g ⊙ out in the opposite direction) / x where x ≠ 0
        the first zero along the scan gets that sum with itself left out of the products
        later zeros get 0
        """

    def infer(x, axis, *, exclusive, reverse):
        return _scan_infer("Cumprod", x, axis)

    def forward(x, axis, *, exclusive, reverse):
        return _scan(np.multiply.accumulate, x, _one_axis("Cumprod", axis, x.ndim), exclusive, reverse, 1)

    def vjp(g, out, x, axis, *, exclusive, reverse):
        axis = _one_axis("Cumprod", axis, x.ndim)
        zero = x == 0
        s = _scan(np.add.accumulate, out * g, axis, exclusive, not reverse, 0)
        if not zero.any():
            return (s / x, None)
        one = ONE[x.dtype]
        gx = s / np.where(zero, one, x)
        # The first zero of each lane along the scan direction: drop it (make it 1) and redo.
        before = _scan(np.logical_or.accumulate, zero, axis, True, reverse, False)
        first = zero & np.logical_not(before)
        x1 = np.where(first, one, x)
        s1 = _scan(np.add.accumulate, _scan(np.multiply.accumulate, x1, axis, exclusive, reverse, 1) * g,
                   axis, exclusive, not reverse, 0)
        gx[zero] = 0
        gx[first] = s1[first]
        return (gx, None)
