"""ONNX's normalizations that TensorFlow has no single op for, as the arithmetic ONNX defines:
LayerNormalization, InstanceNormalization, GroupNormalization, MeanVarianceNormalization.

Each is written as the onnx package's reference implementation computes it (the mean, then the
mean of the squared deviation, its square root with epsilon added, a division), so the blocks
give the model's numbers and TensorFlow's gradients of that arithmetic. ``stash_type`` float32
on a half-precision input is a Cast to float32 and back, as ONNX's function body does.
"""
from __future__ import annotations

import numpy as np

from blockflow.importing.onnx_build import Known
from blockflow.importing.onnx_mapping import Call, Unsupported, maps


def _moments(call: Call, x, axes: list, dtype, eps: float, hint: str):
    """(x - mean, sqrt(var + eps), mean) over ``axes``, kept as size-1 axes."""
    axis = call.const(axes, np.int32)
    mean = call.block("Mean", {"keep_dims": True}, input=x, axis=axis, hint=f"{hint}mean")
    dev = call.block("Subtract", x=x, y=mean, hint=f"{hint}dev")
    var = call.block("Mean", {"keep_dims": True}, input=call.block("Square", x=dev, hint=f"{hint}sq"),
                     axis=axis, hint=f"{hint}var")
    std = call.block("Sqrt", x=call.block("Add", x=var, y=call.const(eps, dtype), hint=f"{hint}var_eps"),
                     hint=f"{hint}std")
    return dev, std, mean


def _stashed(call: Call, what: str):
    """(input, the dtype computed in): float32 for a half input with stash_type 1 (the default)."""
    dtype = call.dtype(0)
    if dtype is None or dtype.kind != "f":
        raise Unsupported(f"{what} of a {'non-float' if dtype is not None else 'untyped'} input")
    stash = call.attr("stash_type", 1)
    if stash not in (1, 11):    # float32 or float64, the ones a project holds besides half
        raise Unsupported(f"{what} with stash_type {stash}")
    x = call.input(0)
    if dtype == np.float16 and stash == 1:
        return call.block("Cast", {"DstT": "float32"}, x=x, hint="stash"), np.dtype(np.float32)
    return x, dtype


def _back(call: Call, value, k: int, computed):
    """``value`` typed as output ``k``, cast back to it when it was computed in another dtype."""
    want, _ = call.out_type(k)
    if want is not None and want != computed:
        return call.block("Cast", {"DstT": want.name}, x=value, typed=k, hint=f"out{k}")
    return value.typed(*call.out_type(k))


@maps("LayerNormalization", blocks="Mean, Subtract, Square, Add, Sqrt, RealDiv, Multiply (Reciprocal "
      "for InvStdDev)", notes="over the axes from axis on: (x - mean) / sqrt(var + epsilon) * scale + B; "
      "the Mean and InvStdDev outputs; stash_type (a half input computed in float32)")
def layer_norm(call: Call):
    rank = call.rank(0)
    axis = call.axis(call.attr("axis", -1), rank, "LayerNormalization's axis")
    x, dtype = _stashed(call, "LayerNormalization")
    dev, std, mean = _moments(call, x, list(range(axis, rank)), dtype, float(call.attr("epsilon", 1e-5)), "")
    y = call.block("RealDiv", x=dev, y=std, hint="normalized")
    if dtype != call.dtype(0):
        y = call.block("Cast", {"DstT": call.dtype(0).name}, x=y, hint="unstash")
    y = call.block("Multiply", x=y, y=call.input(1), hint="scaled" if call.has(2) else "",
                   typed=None if call.has(2) else 0)
    if call.has(2):
        y = call.block("Add", x=y, y=call.input(2), typed=0)
    outs = [y]
    if call.output_used(1):
        outs.append(_back(call, mean, 1, dtype))
    if call.output_used(2):
        outs.append(_back(call, call.block("Reciprocal", x=std, hint="inv_std"), 2, dtype))
    return outs


def _channel_shaped(call: Call, i: int, rank: int, hint: str):
    """Input ``i`` (one entry per channel) as [C, 1, ...], to broadcast over axis 1 of a rank
    ``rank`` tensor."""
    v = call.input(i)
    shape = [-1] + [1] * (rank - 2)
    if isinstance(v, Known):
        return Known(v.value.reshape(shape), v.name, v.param)
    return call.block("Reshape", tensor=v, shape=call.const(shape, np.int64), hint=hint)


@maps("InstanceNormalization", blocks="Mean, Subtract, Square, Add, Sqrt, RealDiv, Multiply",
      notes="per sample and channel over the spatial axes; scale and B per channel")
def instance_norm(call: Call):
    rank = call.rank(0)
    if rank < 3:
        raise Unsupported(f"InstanceNormalization of a rank-{rank} input (it needs spatial axes)")
    x, dtype = call.input(0), call.dtype(0)
    dev, std, _ = _moments(call, x, list(range(2, rank)), dtype, float(call.attr("epsilon", 1e-5)), "")
    y = call.block("RealDiv", x=dev, y=std, hint="normalized")
    y = call.block("Multiply", x=_channel_shaped(call, 1, rank, "scale_c"), y=y, hint="scaled")
    return call.block("Add", x=y, y=_channel_shaped(call, 2, rank, "bias_c"), typed=0)


@maps("GroupNormalization", blocks="Reshape, Mean, Subtract, Square, Add, Sqrt, RealDiv, Multiply",
      notes="num_groups over a static shape; scale and bias per group before opset 21, per channel from "
            "it; stash_type")
def group_norm(call: Call):
    shape = call.static_shape(0, "GroupNormalization")
    groups = int(call.attr("num_groups", 0))
    if len(shape) < 2 or groups < 1 or shape[1] % groups:
        raise Unsupported(f"GroupNormalization of {list(shape)} into {groups} groups")
    n, c = shape[0], shape[1]
    x, dtype = _stashed(call, "GroupNormalization")
    grouped = call.block("Reshape", tensor=x, shape=call.const([n, groups, -1], np.int64), hint="groups")
    dev, std, _ = _moments(call, grouped, [2], dtype, float(call.attr("epsilon", 1e-5)), "")
    y = call.block("RealDiv", x=dev, y=std, hint="normalized")
    if dtype != call.dtype(0):
        y = call.block("Cast", {"DstT": call.dtype(0).name}, x=y, hint="unstash")
    per_group = call.opset < 21
    if per_group:    # opset 18's scale and bias: one per group, applied in the grouped shape
        y = call.block("Multiply", x=y, y=_channel_shaped(call, 1, 3, "scale_g"), hint="scaled")
        y = call.block("Add", x=y, y=_channel_shaped(call, 2, 3, "bias_g"), hint="biased")
        return call.block("Reshape", tensor=y, shape=call.const(list(shape), np.int64), typed=0)
    y = call.block("Reshape", tensor=y, shape=call.const(list(shape), np.int64), hint="back")
    rank = len(shape)
    if call.shape(1) is not None and tuple(call.shape(1)) != (c,):
        raise Unsupported(f"GroupNormalization's scale of shape {list(call.shape(1))} for {c} channels")
    y = call.block("Multiply", x=y, y=_channel_shaped(call, 1, rank, "scale_c"), hint="scaled")
    return call.block("Add", x=y, y=_channel_shaped(call, 2, rank, "bias_c"), typed=0)


@maps("MeanVarianceNormalization", blocks="Mean, Square, Subtract, Sqrt, Add, RealDiv",
      notes="(x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9) over axes (default 0, 2, 3), as ONNX's function")
def mean_variance_norm(call: Call):
    rank = call.rank(0)
    axes = sorted(call.axes(call.attr("axes", (0, 2, 3)), rank, "MeanVarianceNormalization's axes"))
    x, dtype = call.input(0), call.dtype(0)
    axis = call.const(axes, np.int32)
    mean = call.block("Mean", {"keep_dims": True}, input=x, axis=axis, hint="mean")
    mean_sq = call.block("Mean", {"keep_dims": True}, input=call.block("Square", x=x, hint="sq"), axis=axis,
                         hint="mean_sq")
    var = call.block("Subtract", x=mean_sq, y=call.block("Square", x=mean, hint="sq_mean"), hint="var")
    std = call.block("Add", x=call.block("Sqrt", x=var, hint="std"), y=call.const(1e-9, dtype), hint="std_eps")
    return call.block("RealDiv", x=call.block("Subtract", x=x, y=mean, hint="dev"), y=std, typed=0)


@maps("RMSNormalization", blocks="Square, Mean, Add, Sqrt, Reciprocal, Multiply",
      notes="x / sqrt(mean(x^2) + epsilon) * scale over the axes from axis on; stash_type")
def rms_norm(call: Call):
    rank = call.rank(0)
    axis = call.axis(call.attr("axis", -1), rank, "RMSNormalization's axis")
    x, dtype = _stashed(call, "RMSNormalization")
    sq_mean = call.block("Mean", {"keep_dims": True}, input=call.block("Square", x=x, hint="sq"),
                         axis=call.const(list(range(axis, rank)), np.int32), hint="mean_sq")
    rms = call.block("Sqrt", x=call.block("Add", x=sq_mean, y=call.const(float(call.attr("epsilon", 1e-5)), dtype),
                                          hint="eps"), hint="rms")
    y = call.block("Multiply", x=x, y=call.block("Reciprocal", x=rms, hint="inv_rms"), hint="normalized")
    if dtype != call.dtype(0):
        y = call.block("Cast", {"DstT": call.dtype(0).name}, x=y, hint="unstash")
    return call.block("Multiply", x=y, y=call.input(1), typed=0)


@maps("LpNormalization", blocks="Abs or Square, Sum, Sqrt, Equal, Select, RealDiv",
      notes="p 1 or 2 along axis; a slice whose norm is 0 stays 0 (divided by 1, so no NaN reaches the "
            "gradient)")
def lp_norm(call: Call):
    p, rank = int(call.attr("p", 2)), call.rank(0)
    if p not in (1, 2):
        raise Unsupported(f"LpNormalization with p {p}")
    x, dtype = call.input(0), call.dtype(0)
    axis = call.const([call.axis(call.attr("axis", -1), rank, "LpNormalization's axis")], np.int32)
    mag = call.block("Abs" if p == 1 else "Square", x=x, hint="mag")
    norm = call.block("Sum", {"keep_dims": True}, input=mag, axis=axis, hint="sum")
    if p == 2:
        norm = call.block("Sqrt", x=norm, hint="norm")
    zero = call.block("Equal", x=norm, y=call.const(0, dtype), hint="zero")
    safe = call.block("Select", condition=zero, t=call.const(1, dtype), e=norm, hint="safe")
    return call.block("RealDiv", x=x, y=safe, typed=0)
