"""ONNX's neural-network ops as blocks: convolution, pooling, normalization, Gemm, softmax,
dropout and the activations.

ONNX tensors are NCHW; the blocks are given ``data_format="NCHW"`` rather than transposed around,
so wires carry the model's own layout. Weights are moved to blockflow's layout once, when known
(a Conv's [out, in, kh, kw] becomes Conv2D's [kh, kw, in, out]). ONNX padding is explicit
(before and after on each axis, possibly unequal); TensorFlow's SAME (the odd entry after) is
used only where it is the same arithmetic.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from blockflow.importing.onnx_build import Known
from blockflow.importing.onnx_mapping import Call, Unsupported, maps

_NCHW = "NCHW"


def _spatial_attrs(call: Call, what: str) -> tuple:
    """(kernel (kh, kw), strides, dilations, pads (top, left, bottom, right), auto_pad) of a
    2-D window op; Unsupported for any other number of spatial axes."""
    rank = call.rank(0)
    if rank != 4:
        raise Unsupported(f"{what} over {rank - 2} spatial axes: blockflow's windows are 2-D (NCHW input)")
    k = tuple(call.attr("kernel_shape", ()))
    strides = tuple(call.attr("strides", (1, 1)))
    dil = tuple(call.attr("dilations", (1, 1)))
    pads = tuple(call.attr("pads", (0, 0, 0, 0)))
    if len(strides) != 2 or len(dil) != 2 or len(pads) != 4 or (k and len(k) != 2):
        raise Unsupported(f"{what}: kernel_shape, strides, dilations and pads must be given per spatial axis")
    if min(pads) < 0:
        raise Unsupported(f"{what}: negative pads (cropping)")
    return k, strides, dil, pads, call.attr("auto_pad", "NOTSET")


class _Widened(Call):
    """A 1-D window op's Call seen as 2-D (a height of 1): its outputs' ONNX types, which are
    1-D, are not the 2-D blocks' (the caller squeezes the height out and types that)."""

    def out_type(self, k: int = 0) -> tuple:
        return (None, None)


def _as_2d(call: Call, mapping):
    """A 1-D Conv, ConvTranspose or pooling as the 2-D ``mapping`` over a height of 1: ExpandDims, the window
    with a kernel, stride, dilation of 1 and no padding on the height, Squeeze."""
    x, shape = call.input(0), call.shape(0)
    wide = call.block("ExpandDims", input=x, axis=call.const(2, np.int32), hint="2d").typed(
        call.dtype(0), (*shape[:2], 1, shape[2]))
    values = [wide] + list(call.values[1:])
    if call.node.op in ("Conv", "ConvTranspose") and call.has(1):
        w = call.input(1)
        if isinstance(w, Known):
            key = (id(w), "conv1d")
            made = call.builder.derived.get(key)
            if made is None:    # a weight read by several nodes stays one Variable
                made = Known(w.value[:, :, None, :], w.name, w.param)
                call.builder.derived[key] = made
            values[1] = made
        else:
            ws = call.shape(1)
            values[1] = call.block("ExpandDims", input=w, axis=call.const(2, np.int32), hint="w2d").typed(
                call.dtype(1), None if ws is None else (*ws[:2], 1, *ws[2:]))
    a = dict(call.node.attrs)
    for name, pad in (("kernel_shape", 1), ("strides", 1), ("dilations", 1), ("output_shape", 1),
                      ("output_padding", 0)):
        if name in a:
            a[name] = [pad, *a[name]]
    if "pads" in a:
        a["pads"] = [0, a["pads"][0], 0, a["pads"][1]]
    inner = _Widened(dataclasses.replace(call.node, attrs=a), values, call.builder, call.types, call.opset,
                     call.read)
    inner.base = call.base   # its blocks named as the node's others
    y = mapping(inner)
    return call.block("Squeeze", {"axis": [2]}, input=y, typed=0)


def _same_pads(size, k, s, d, lower: bool) -> tuple:
    """(before, after) of ONNX's SAME_UPPER / SAME_LOWER on one axis."""
    out = -(-size // s)
    total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
    small, big = total // 2, total - total // 2
    return (big, small) if lower else (small, big)


def _resolved_pads(call: Call, k, strides, dil, pads, auto_pad, what) -> tuple:
    """(top, left, bottom, right) after auto_pad, or "SAME" when TF's SAME is the same thing."""
    if auto_pad == "VALID":
        return (0, 0, 0, 0)
    if auto_pad == "SAME_UPPER":
        return "SAME"
    if auto_pad == "SAME_LOWER":
        _, _, h, w = call.static_shape(0, f"{what} with auto_pad SAME_LOWER")
        (t, b), (l, r) = (_same_pads(h, k[0], strides[0], dil[0], True),
                          _same_pads(w, k[1], strides[1], dil[1], True))
        return (t, l, b, r)
    if auto_pad not in ("NOTSET", ""):
        raise Unsupported(f"{what}: auto_pad {auto_pad!r}")
    return pads


def _padding(p) -> dict:
    """A window block's padding attrs for resolved pads (or "SAME"): VALID when there are none."""
    if p == "SAME":
        return {"padding": "SAME"}
    if any(p):
        return {"padding": "EXPLICIT", "explicit_paddings": _explicit(p)}
    return {"padding": "VALID"}


def _explicit(pads) -> list:
    t, l, b, r = pads
    return [0, 0, 0, 0, t, b, l, r]


@maps("Conv", blocks="Conv2D, BiasAdd (ExpandDims, Squeeze for 1-D)",
      notes="1-D (through a height of 1) and 2-D (NCHW); groups and depthwise as Conv2D's grouped convolution; every padding, "
            "strides and dilations")
def conv(call: Call):
    if call.shape(0) is not None and len(call.shape(0)) == 3:
        return _as_2d(call, conv)
    k, strides, dil, pads, auto_pad = _spatial_attrs(call, "Conv")
    w = call.input(1)
    wshape = call.shape(1)
    if wshape is None or len(wshape) != 4:
        raise Unsupported("Conv's weight must be 4-D [out, in / group, kh, kw]")
    if k and tuple(wshape[2:]) != k and all(isinstance(d, int) for d in wshape[2:]):
        raise Unsupported(f"kernel_shape {list(k)} differs from the weight's {list(wshape[2:])}")
    k = tuple(wshape[2:]) if not k else k
    p = _resolved_pads(call, k, strides, dil, pads, auto_pad, "Conv")
    attrs = {"strides": [1, 1, *strides], "dilations": [1, 1, *dil], "data_format": _NCHW}
    attrs.update(_padding(p))
    filt = call.transposed(w, (2, 3, 1, 0), hint="filter")
    y = call.block("Conv2D", attrs, input=call.input(0), filter=filt, typed=None if call.has(2) else 0)
    if call.has(2):
        y = call.block("BiasAdd", {"data_format": _NCHW}, value=y, bias=call.input(2), hint="bias", typed=0)
    return y


def _ceil_extra(size, k, s, d, before, after) -> int:
    """Padding added after an axis so a floor-mode window count gives ceil_mode's (a last window
    must start inside the input or its leading padding, as ONNX and PyTorch count)."""
    eff = (k - 1) * d + 1
    span = size + before + after - eff
    out = -(-span // s) + 1
    if (out - 1) * s >= size + before:
        out -= 1
    return max((out - 1) * s + eff - (size + before + after), 0)


def _pool_setup(call: Call, what: str):
    k, strides, dil, pads, auto_pad = _spatial_attrs(call, what)
    if not k:
        raise Unsupported(f"{what} without kernel_shape")
    if tuple(dil) != (1, 1):
        raise Unsupported(f"{what} with dilations {list(dil)}: blockflow's pooling windows are dense")
    if call.output_used(1):
        raise Unsupported(f"{what}'s Indices output")
    p = _resolved_pads(call, k, strides, dil, pads, auto_pad, what)
    if p == "SAME" and call.attr("ceil_mode", 0):
        raise Unsupported(f"{what} with both ceil_mode and auto_pad SAME_UPPER")
    if p == "SAME" and call.node.op == "AveragePool" and call.attr("count_include_pad", 0):
        _, _, h, w = call.static_shape(0, f"{what} with auto_pad SAME_UPPER")
        (t, b), (l, r) = _same_pads(h, k[0], strides[0], 1, False), _same_pads(w, k[1], strides[1], 1, False)
        p = (t, l, b, r)
    given = p
    if call.attr("ceil_mode", 0):
        _, _, h, w = call.static_shape(0, f"{what} with ceil_mode")
        t, l, b, r = p
        p = (t, l, b + _ceil_extra(h, k[0], strides[0], 1, t, b), r + _ceil_extra(w, k[1], strides[1], 1, l, r))
    return k, strides, p, given


@maps("MaxPool", blocks="MaxPool",
      notes="1-D (through a height of 1) and 2-D (NCHW); explicit, asymmetric and ceil_mode padding as EXPLICIT padding (padded entries "
            "never win); refused: dilations, the Indices output, storage_order, pads not smaller than the kernel")
def max_pool(call: Call):
    if call.shape(0) is not None and len(call.shape(0)) == 3:
        return _as_2d(call, max_pool)
    if call.attr("storage_order", 0):
        raise Unsupported("MaxPool with storage_order 1 (only the Indices output depends on it, but it "
                          "is refused with them)")
    k, strides, p, _ = _pool_setup(call, "MaxPool")
    if p != "SAME" and (max(p[0], p[2]) >= k[0] or max(p[1], p[3]) >= k[1]):
        raise Unsupported(f"MaxPool with pads {list(p)} not all smaller than its kernel {list(k)}: TensorFlow's "
                          f"pooling takes only smaller ones (onnxruntime refuses the others too)")
    attrs = {"ksize": [1, 1, *k], "strides": [1, 1, *strides], "data_format": _NCHW}
    attrs.update(_padding(p))
    return call.block("MaxPool", attrs, input=call.input(0), typed=0)


def _window_counts(k, s, out, lo, hi) -> np.ndarray:
    """How many entries of each output position's window fall inside [lo, hi) on one axis."""
    starts = np.arange(out) * s
    return np.minimum(starts + k, hi) - np.maximum(starts, lo)


@maps("AveragePool", blocks="AvgPool (Pad, Multiply where the padding is not TF's SAME)",
      notes="1-D (through a height of 1) and 2-D (NCHW); count_include_pad 0 or 1, explicit, asymmetric and ceil_mode padding: padded with "
            "zeros, averaged, and each position rescaled by its window's count; refused: dilations")
def average_pool(call: Call):
    if call.shape(0) is not None and len(call.shape(0)) == 3:
        return _as_2d(call, average_pool)
    k, strides, p, given = _pool_setup(call, "AveragePool")
    x = call.input(0)
    attrs = {"ksize": [1, 1, *k], "strides": [1, 1, *strides], "data_format": _NCHW}
    include = bool(call.attr("count_include_pad", 0))
    if p == "SAME":   # TF's SAME average counts only the input's entries, as count_include_pad 0
        return call.block("AvgPool", {**attrs, "padding": "SAME"}, value=x, typed=0)
    shape = call.static_shape(0, "AveragePool with padding")
    h, w = shape[2], shape[3]
    t, l, b, r = p
    if not any(p):
        return call.block("AvgPool", {**attrs, "padding": "VALID"}, value=x, typed=0)
    pads = [[0, 0], [0, 0], [t, b], [l, r]]
    padded = call.block("Pad", {"constant_values": 0.0}, input=x, paddings=call.const(pads, np.int32), hint="pad")
    mean = call.block("AvgPool", {**attrs, "padding": "VALID"}, value=padded, hint="window")
    oh, ow = (h + t + b - k[0]) // strides[0] + 1, (w + l + r - k[1]) // strides[1] + 1
    call.making((oh, ow), np.float64, "its count of each window's entries")   # pads of 10^6: 8 TB
    # in the padded input, the input is [t, t + h); with count_include_pad the given padding
    # counts too, but not what ceil_mode added after it
    if include:
        ch = _window_counts(k[0], strides[0], oh, 0, t + h + given[2])
        cw = _window_counts(k[1], strides[1], ow, 0, l + w + given[3])
    else:
        ch = _window_counts(k[0], strides[0], oh, t, t + h)
        cw = _window_counts(k[1], strides[1], ow, l, l + w)
    scale = (k[0] * k[1]) / np.outer(ch, cw)
    if np.all(scale == 1.0):
        return mean.typed(*call.out_type(0))
    dtype = call.dtype(0) or np.dtype(np.float32)
    return call.block("Multiply", x=mean, y=call.const(scale.reshape(1, 1, oh, ow), dtype), typed=0)


@maps("GlobalAveragePool", "GlobalMaxPool", blocks="Mean, Max", notes="over every axis after the second")
def global_pool(call: Call):
    axes = list(range(2, call.rank(0)))
    block = "Mean" if call.node.op == "GlobalAveragePool" else "Max"
    return call.block(block, {"keep_dims": True}, input=call.input(0), axis=call.const(axes, np.int32), typed=0)


def _per_channel(call: Call, i: int, rank: int, hint: str):
    """Input ``i`` (one entry per channel) shaped [C, 1, ...] to broadcast over axis 1."""
    shape = [-1] + [1] * (rank - 2)
    v = call.input(i)
    if isinstance(v, Known):
        key = (id(v), "per_channel", rank)
        made = call.builder.derived.get(key)
        if made is None:
            made = Known(v.value.reshape([v.value.size] + [1] * (rank - 2)), v.name, v.param)
            call.builder.derived[key] = made
        return made
    return call.block("Reshape", tensor=v, shape=call.const(shape, np.int32), hint=hint)


@maps("BatchNormalization", blocks="FusedBatchNormV3 (4-D), or Subtract, Rsqrt, Multiply, Add",
      notes="inference: the given mean and variance; refused: training_mode, and the running statistics "
            "outputs")
def batch_norm(call: Call):
    if call.attr("training_mode", 0) or any(call.output_used(i) for i in range(1, 5)):
        raise Unsupported("BatchNormalization in training mode (the statistics outputs): only inference maps")
    if call.opset < 9 and not call.attr("spatial", 1):
        raise Unsupported("BatchNormalization with spatial=0")
    eps = float(call.attr("epsilon", 1e-5))
    rank = call.rank(0)
    x = call.input(0)
    if rank == 4:
        return call.block("FusedBatchNormV3", {"epsilon": eps, "data_format": _NCHW, "is_training": False},
                          x=x, scale=call.input(1), offset=call.input(2), mean=call.input(3),
                          variance=call.input(4), typed=0)
    if rank < 2:
        raise Unsupported(f"BatchNormalization of a rank-{rank} input")
    scale, bias, mean, var = (_per_channel(call, i, rank, h) for i, h in
                              ((1, "scale"), (2, "bias"), (3, "mean"), (4, "var")))
    dtype = call.dtype(0)
    inv = call.block("Rsqrt", x=call.block("Add", x=var, y=call.const(eps, dtype), hint="var_eps"), hint="rsqrt")
    centred = call.block("Subtract", x=x, y=mean, hint="centred")
    scaled = call.block("Multiply", x=centred, y=call.block("Multiply", x=inv, y=scale, hint="factor"), hint="scaled")
    return call.block("Add", x=scaled, y=bias, typed=0)


@maps("LRN", blocks="Transpose, LRN, Transpose",
      notes="4-D, odd size (TF's LRN is symmetric: depth_radius = (size - 1) / 2, alpha / size); over the "
            "channels, so transposed to channels-last and back")
def lrn(call: Call):
    size = int(call.attr("size", 0))
    if call.rank(0) != 4:
        raise Unsupported("LRN of an input that is not 4-D")
    if size < 1 or size % 2 == 0:
        raise Unsupported(f"LRN with an even size ({size}): its window is not symmetric, TF's LRN's is")
    attrs = {"depth_radius": (size - 1) // 2, "bias": float(call.attr("bias", 1.0)),
             "alpha": float(call.attr("alpha", 1e-4)) / size, "beta": float(call.attr("beta", 0.75))}
    nhwc = call.transposed(call.input(0), (0, 2, 3, 1), hint="nhwc")
    y = call.block("LRN", attrs, input=nhwc, hint="lrn")
    return call.block("Transpose", x=y, perm=call.const([0, 3, 1, 2], np.int32), typed=0)


@maps("Dropout", blocks="Dropout (training off); OnesLike, Cast for the mask",
      notes="the inference graph ONNX describes: Dropout with training false (the identity), its rate kept "
            "so it can be turned on for training (Identity when the model computes the rate); the mask "
            "output all true, as in inference; refused: training_mode true or computed")
def dropout(call: Call):
    ratio = float(call.attr("ratio", 0.5))
    if call.opset >= 12:
        if call.has(2) and bool(call.need_known(2, "Dropout's training_mode").reshape(-1)[0]):
            raise Unsupported("Dropout with training_mode true (random at inference)")
        ratio = call.known(1) if call.has(1) else 0.5
        ratio = None if ratio is None else float(np.asarray(ratio).reshape(-1)[0])
    if ratio is not None and not 0.0 <= ratio < 1.0:
        raise Unsupported(f"Dropout with ratio {ratio}")
    x = call.input(0)
    if ratio is None:   # inference ignores the rate; one the model computes cannot be kept for training
        y = call.block("Identity", input=x, typed=0)
    else:
        y = call.block("Dropout", {"rate": ratio, "training": False}, x=x, typed=0)
    if not call.output_used(1):
        return y
    ones = call.block("OnesLike", x=x, hint="ones")
    return [y, call.block("Cast", {"DstT": "bool"}, x=ones, hint="mask", typed=1)]


def _softmax(call: Call, block: str):
    rank = call.rank(0)
    axis = call.axis(call.attr("axis", 1 if call.opset < 13 else -1), rank, f"{call.node.op}'s axis")
    x = call.input(0)
    port = "logits"
    if axis == rank - 1:
        return call.block(block, **{port: x}, typed=0)
    if call.opset < 13:   # over the flattened trailing axes [axis:], as the older opsets define it
        shape = call.shape(0)
        tail = shape[axis:]
        if any(not isinstance(d, int) for d in tail):
            raise Unsupported(f"{call.node.op} over axes {axis}.. needs their sizes")
        flat = call.block("Reshape", tensor=x, shape=call.const([-1, int(np.prod(tail))], np.int64), hint="rows")
        y = call.block(block, **{port: flat}, hint="rows_sm")
        back = [d if isinstance(d, int) else -1 for d in shape]
        if back.count(-1) > 1:
            raise Unsupported(f"{call.node.op}: more than one unknown size in {list(shape)}")
        return call.block("Reshape", tensor=y, shape=call.const(back, np.int64), typed=0)
    perm = list(range(rank))
    perm[axis], perm[-1] = perm[-1], perm[axis]
    moved = call.block("Transpose", x=x, perm=call.const(perm, np.int32), hint="last")
    y = call.block(block, **{port: moved}, hint="sm")
    return call.block("Transpose", x=y, perm=call.const(perm, np.int32), typed=0)


@maps("Softmax", blocks="Softmax (Reshape or Transpose when not over the last axis)",
      notes="every axis; before opset 13 over the flattened trailing axes, as ONNX defines it")
def softmax(call: Call):
    return _softmax(call, "Softmax")


@maps("LogSoftmax", blocks="LogSoftmax (Reshape or Transpose when not over the last axis)",
      notes="as Softmax")
def log_softmax(call: Call):
    return _softmax(call, "LogSoftmax")


@maps("Gemm", blocks="MatMul, Multiply, Add", notes="alpha, beta, transA, transB; C broadcast")
def gemm(call: Call):
    a, b = call.input(0), call.input(1)
    if call.rank(0) != 2 or call.rank(1) != 2:
        raise Unsupported("Gemm of inputs that are not 2-D")
    dtype = call.dtype(0)
    alpha, beta = float(call.attr("alpha", 1.0)), float(call.attr("beta", 1.0))
    last = not call.has(2) and alpha == 1.0
    y = call.block("MatMul", {"transpose_a": bool(call.attr("transA", 0)), "transpose_b": bool(call.attr("transB", 0))},
                   a=a, b=b, hint="" if last else "matmul", typed=0 if last else None)
    if alpha != 1.0:
        y = call.block("Multiply", x=y, y=call.const(alpha, dtype), hint="alpha", typed=None if call.has(2) else 0)
    if not call.has(2):
        return y
    c = call.input(2)
    if beta != 1.0:
        c = (Known(c.value * np.asarray(beta, c.dtype), c.name, c.param) if isinstance(c, Known)
             else call.block("Multiply", x=c, y=call.const(beta, dtype), hint="beta"))
    return call.block("Add", x=y, y=c, typed=0)


# ---------------------------------------------------------------------------- activations

@maps("Relu", blocks="Relu")
def relu(call: Call):
    return call.block("Relu", features=call.input(0), typed=0)


@maps("LeakyRelu", blocks="LeakyRelu", notes="alpha")
def leaky_relu(call: Call):
    return call.block("LeakyRelu", {"alpha": float(call.attr("alpha", 0.01))}, features=call.input(0), typed=0)


def _scaled_elu(call: Call, alpha: float, hint: str = ""):
    """x above 0, alpha * (exp(x) - 1) below: Elu's negative side scaled (Elu is x above 0)."""
    x, dtype = call.input(0), call.dtype(0)
    neg = call.block("Multiply", x=call.block("Elu", features=x, hint=f"{hint}elu"), y=call.const(alpha, dtype),
                     hint=f"{hint}alpha")
    pos = call.block("Greater", x=x, y=call.const(0, dtype), hint=f"{hint}pos")
    return call.block("Select", condition=pos, t=x, e=neg, hint=hint.rstrip("_"), typed=None if hint else 0)


@maps("Elu", blocks="Elu (Multiply, Greater, Select for alpha other than 1)",
      notes="alpha: x above 0, alpha * Elu(x) below")
def elu(call: Call):
    alpha = float(call.attr("alpha", 1.0))
    if alpha == 1.0:
        return call.block("Elu", features=call.input(0), typed=0)
    return _scaled_elu(call, alpha)


_SELU_ALPHA, _SELU_GAMMA = 1.67326319217681884765625, 1.05070102214813232421875


@maps("Selu", blocks="Selu (Elu, Multiply, Greater, Select for other alpha and gamma)",
      notes="the standard alpha and gamma as TF's Selu; others as gamma * (x above 0, alpha * Elu(x) below)")
def selu(call: Call):
    alpha, gamma = float(call.attr("alpha", _SELU_ALPHA)), float(call.attr("gamma", _SELU_GAMMA))
    if abs(alpha - 1.6732632423543772) <= 1e-6 and abs(gamma - 1.0507009873554805) <= 1e-6:
        return call.block("Selu", features=call.input(0), typed=0)
    inner = _scaled_elu(call, alpha, hint="inner_")
    return call.block("Multiply", x=inner, y=call.const(gamma, call.dtype(0)), typed=0)


@maps("Softplus", "Softsign", blocks="Softplus, Softsign")
def soft(call: Call):
    return call.block(call.node.op, features=call.input(0), typed=0)


@maps("HardSigmoid", blocks="Multiply, Add, ClipByValue", notes="max(0, min(1, alpha * x + beta))")
def hard_sigmoid(call: Call):
    return _hard_sigmoid(call, float(call.attr("alpha", 0.2)), float(call.attr("beta", 0.5)), typed=0)


def _hard_sigmoid(call: Call, alpha, beta, typed=None):
    dtype = call.dtype(0)
    lin = call.block("Add", x=call.block("Multiply", x=call.input(0), y=call.const(alpha, dtype), hint="alpha"),
                     y=call.const(beta, dtype), hint="beta")
    return call.block("ClipByValue", t=lin, clip_value_min=call.const(0, dtype), clip_value_max=call.const(1, dtype),
                      hint="" if typed is not None else "hardsigmoid", typed=typed)


@maps("HardSwish", blocks="Multiply, Add, ClipByValue", notes="x * HardSigmoid(x) with alpha 1/6, beta 0.5")
def hard_swish(call: Call):
    gate = _hard_sigmoid(call, 1 / 6, 0.5)
    return call.block("Multiply", x=call.input(0), y=gate, typed=0)


@maps("PRelu", blocks="Relu, Minimum, Multiply, Add", notes="relu(x) + slope * min(x, 0): exactly x or slope * x")
def prelu(call: Call):
    x = call.input(0)
    neg = call.block("Minimum", x=x, y=call.const(0, call.dtype(0)), hint="neg")
    return call.block("Add", x=call.block("Relu", features=x, hint="pos"),
                      y=call.block("Multiply", x=call.input(1), y=neg, hint="slope"), typed=0)


@maps("Gelu", blocks="Gelu", notes="approximate none or tanh")
def gelu(call: Call):
    approx = call.attr("approximate", "none")
    if approx not in ("none", "tanh"):
        raise Unsupported(f"Gelu with approximate {approx!r}")
    return call.block("Gelu", {"approximate": approx == "tanh"}, features=call.input(0), typed=0)
