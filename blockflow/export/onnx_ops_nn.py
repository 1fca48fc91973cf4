"""ONNX lowerings of the neural-network blocks: activations, Softmax and the losses, BiasAdd,
Conv2D and pooling (TensorFlow's NHWC layout and padding arithmetic spelled out: ONNX's ops are
NCHW), FusedBatchNormV3, LRN, and the inference phase (LearningPhase false, Dropout inactive)."""
from __future__ import annotations

import numpy as np

from blockflow.export.onnx_lowering import OnnxCall, Unsupported, onnx_lowers
from blockflow.export.onnx_ops_core import expm1_of, is_inf, log1p_of, reduce

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946
_LEAKY_ALPHA = 0.2   # Activation's leaky_relu, as Keras


def _c(call: OnnxCall, value, dtype) -> str:
    return call.const(np.asarray(value, dtype=dtype))


@onnx_lowers("Relu")
def relu(call: OnnxCall) -> str:
    dt = call.out_dtype()
    if dt.kind in "iu":     # ONNX Runtime has a Relu kernel for int8 and int32 only
        return call.op("Max", call.ins[0], _c(call, 0, dt))
    return call.op("Relu", call.ins[0])


@onnx_lowers("Relu6")
def relu6(call: OnnxCall) -> str:
    dt = call.out_dtype()
    return call.op("Min", call.op("Max", call.ins[0], _c(call, 0, dt)), _c(call, 6, dt))


def _elu(call: OnnxCall, x: str, dt) -> str:
    return call.op("Max", expm1_of(call, call.op("Min", x, _c(call, 0, dt)), dt), x)


def _selu(call: OnnxCall, x: str, dt) -> str:
    neg = call.op("Mul", expm1_of(call, call.op("Min", x, _c(call, 0, dt)), dt),
                  _c(call, _SELU_SCALE * _SELU_ALPHA, dt))
    pos = call.op("Mul", call.op("Max", x, _c(call, 0, dt)), _c(call, _SELU_SCALE, dt))
    return call.op("Add", neg, pos)


def _softplus(call: OnnxCall, x: str, dt) -> str:
    # numpy's logaddexp(x, 0): max(x, 0) + log1p(exp(-|x|))
    tail = log1p_of(call, call.op("Exp", call.op("Neg", call.op("Abs", x))), dt)
    return call.op("Add", call.op("Max", x, _c(call, 0, dt)), tail)


def _softsign(call: OnnxCall, x: str, dt) -> str:
    return call.op("Div", x, call.op("Add", call.op("Abs", x), _c(call, 1, dt)))


def _leaky(call: OnnxCall, x: str, dt, alpha) -> str:
    return call.op("Where", call.op("Greater", x, _c(call, 0, dt)), x, call.op("Mul", x, _c(call, alpha, dt)))


def _gelu(call: OnnxCall, x: str, dt) -> str:
    """x · (1 + erf(x / √2)) / 2, the exact Gelu (ONNX's own Gelu op only from opset 20)."""
    one_plus = call.op("Add", call.op("Erf", call.op("Mul", x, _c(call, 1 / np.sqrt(2.0), dt))), _c(call, 1, dt))
    return call.op("Mul", call.op("Mul", one_plus, x), _c(call, 0.5, dt))


@onnx_lowers("Elu", "Selu", "Softplus", "Softsign")
def activation_block(call: OnnxCall) -> str:
    fn = {"Elu": _elu, "Selu": _selu, "Softplus": _softplus, "Softsign": _softsign}[call.block]
    return fn(call, call.ins[0], call.out_dtype())


@onnx_lowers("LeakyRelu")
def leaky_relu(call: OnnxCall) -> str:
    return _leaky(call, call.ins[0], call.out_dtype(), float(call.attrs.get("alpha", 0.2)))


@onnx_lowers("Gelu")
def gelu(call: OnnxCall) -> str:
    x, dt = call.ins[0], call.out_dtype()
    if not call.attrs.get("approximate"):
        return _gelu(call, x, dt)
    # the tanh form as blockflow computes it: 1 + tanh(u) as 2 / (1 + e) or 2e / (1 + e),
    # e = exp(-2|u|), whichever does not cancel
    u = call.op("Mul", x, x)
    u = call.op("Mul", u, _c(call, 0.044715, dt))
    u = call.op("Add", u, _c(call, 1, dt))
    u = call.op("Mul", u, x)
    u = call.op("Mul", u, _c(call, np.sqrt(2.0 / np.pi), dt))
    e = call.op("Exp", call.op("Mul", call.op("Abs", u), _c(call, -2.0, dt)))
    big = call.op("Div", _c(call, 2.0, dt), call.op("Add", e, _c(call, 1, dt)))
    one_plus = call.op("Where", call.op("GreaterOrEqual", u, _c(call, 0, dt)), big, call.op("Mul", big, e))
    return call.op("Mul", call.op("Mul", one_plus, x), _c(call, 0.5, dt))


def _half_tanh_sigmoid(call: OnnxCall, x: str, dt) -> str:
    # Activation's sigmoid: 0.5 · (tanh(x / 2) + 1), which cannot overflow
    half = _c(call, 0.5, dt)
    return call.op("Mul", half, call.op("Add", call.op("Tanh", call.op("Mul", x, half)), _c(call, 1, dt)))


@onnx_lowers("Activation")
def activation(call: OnnxCall) -> str:
    x, dt, kind = call.ins[0], call.out_dtype(), call.attrs.get("kind", "linear")
    simple = {"relu": lambda: call.op("Relu", x), "tanh": lambda: call.op("Tanh", x),
              "relu6": lambda: call.op("Min", call.op("Max", x, _c(call, 0, dt)), _c(call, 6, dt)),
              "leaky_relu": lambda: _leaky(call, x, dt, _LEAKY_ALPHA), "elu": lambda: _elu(call, x, dt),
              "selu": lambda: _selu(call, x, dt), "gelu": lambda: _gelu(call, x, dt),
              "sigmoid": lambda: _half_tanh_sigmoid(call, x, dt), "softplus": lambda: _softplus(call, x, dt),
              "softsign": lambda: _softsign(call, x, dt),
              "swish": lambda: call.op("Mul", x, _half_tanh_sigmoid(call, x, dt)),
              "softmax": lambda: call.op("Softmax", x, axis=-1),
              "log_softmax": lambda: call.op("LogSoftmax", x, axis=-1)}
    if kind == "linear":
        return x
    if kind not in simple:
        raise Unsupported(f"activation kind {kind!r}")
    return simple[kind]()


@onnx_lowers("Softmax", "LogSoftmax")
def softmax(call: OnnxCall) -> str:
    return call.op(call.block, call.ins[0], axis=-1)


@onnx_lowers("Dropout")
def dropout(call: OnnxCall) -> str:
    if call.attrs.get("training", True) and float(call.attrs.get("rate", 0.5)) != 0:
        raise Unsupported("a Dropout whose training attr is on draws a random mask in every run; an "
                          "inference model has none (turn training off, or drive it by LearningPhase)")
    return call.ins[0]


@onnx_lowers("LearningPhase")
def learning_phase(call: OnnxCall) -> str:
    return call.const(np.asarray(False), hint="inference")


# ------------------------------------------------------------------------------------ losses

def _onehot_like(call: OnnxCall, labels: str, features: str, dt) -> str:
    """[batch, classes] in ``dt``: 1 where the column is the row's label."""
    classes = call.op("Gather", call.op("Shape", features), call.const(np.asarray(1, np.int64)))
    cols = call.op("Range", call.const(np.asarray(0, np.int64)), classes, call.const(np.asarray(1, np.int64)))
    lab = call.op("Unsqueeze", call.cast(labels, np.int64), call.ints([1]))
    return call.cast(call.op("Equal", lab, cols), dt)


@onnx_lowers("SparseSoftmaxCrossEntropyWithLogits")
def sparse_softmax_ce(call: OnnxCall) -> list:
    x, labels = call.ins
    dt = call.out_dtype()
    logp = call.op("LogSoftmax", x, axis=-1)
    lab = call.op("Unsqueeze", call.index(labels), call.ints([1]))
    picked = call.op("GatherElements", logp, lab, axis=1)
    loss = call.op("Neg", call.op("Squeeze", picked, call.ints([1])))
    backprop = call.op("Sub", call.op("Softmax", x, axis=-1), _onehot_like(call, labels, x, dt))
    return [loss, backprop]


@onnx_lowers("SoftmaxCrossEntropyWithLogits")
def softmax_ce(call: OnnxCall) -> list:
    x, labels = call.ins
    nlp = call.op("Neg", call.op("LogSoftmax", x, axis=-1))
    loss = reduce(call, "ReduceSum", call.op("Mul", labels, nlp), [1], False)
    return [loss, call.op("Sub", call.op("Softmax", x, axis=-1), labels)]


@onnx_lowers("SigmoidCrossEntropyWithLogits")
def sigmoid_ce(call: OnnxCall) -> str:
    z, x = call.ins
    dt = call.out_dtype()
    t = call.op("Sub", call.op("Max", x, _c(call, 0, dt)), call.op("Mul", x, z))
    return call.op("Add", t, log1p_of(call, call.op("Exp", call.op("Neg", call.op("Abs", x))), dt))


@onnx_lowers("L2Loss")
def l2_loss(call: OnnxCall) -> str:
    t, dt = call.ins[0], call.out_dtype()
    if dt == np.float16:     # blockflow sums float16 squares in float32
        t = call.cast(t, np.float32)
    sq = call.op("Mul", t, t)
    total = reduce(call, "ReduceSum", sq, list(range(call.rank("t"))), False)
    half = call.op("Mul", total, _c(call, 0.5, np.float32 if dt == np.float16 else dt))
    return call.cast(half, dt) if dt == np.float16 else half


# ------------------------------------------------------------------------------ bias, windows

@onnx_lowers("BiasAdd")
def bias_add(call: OnnxCall) -> str:
    value, bias = call.ins
    rank = call.rank("value")
    if call.attrs.get("data_format", "NHWC") == "NCHW" and rank > 2:
        bias = call.op("Reshape", bias, call.ints([-1] + [1] * (rank - 2)))
    return call.op("Add", value, bias)


_TO_NCHW, _TO_NHWC = [0, 3, 1, 2], [0, 2, 3, 1]


def _hw(values, data_format):
    h, w = (1, 2) if data_format == "NHWC" else (2, 3)
    values = [int(v) for v in values]
    return [values[h], values[w]]


def _pads(call: OnnxCall, shape, kernel, strides, dilations, padding, data_format):
    """ONNX's pads (top, left, bottom, right) for TF's padding, or None to let ONNX's SAME_UPPER
    (TF's SAME: the odd entry after) size it when the input's size is open."""
    h, w = (1, 2) if data_format == "NHWC" else (2, 3)
    if padding == "VALID":
        return [0, 0, 0, 0]
    if padding == "EXPLICIT":
        p = [int(v) for v in call.attrs.get("explicit_paddings", ())]
        return [p[2 * h], p[2 * w], p[2 * h + 1], p[2 * w + 1]]
    if shape[h] is None or shape[w] is None:
        return None
    out = []
    for size, k, s, d in zip((shape[h], shape[w]), kernel, strides, dilations):
        eff = (k - 1) * d + 1
        n = -(-size // s)
        total = max((n - 1) * s + eff - size, 0)
        out.append((total // 2, total - total // 2))
    return [out[0][0], out[1][0], out[0][1], out[1][1]]


def _window_attrs(pads):
    return {"auto_pad": "SAME_UPPER"} if pads is None else {"pads": pads}


def _group(channels, fshape) -> dict:
    """Conv's ``group`` attr of a grouped convolution (its weight, the filter transposed to
    [out, in/G, kh, kw], holds the groups in TF's order); none for an ungrouped one, or when the
    channels are open: then a grouped input fails in ONNX Runtime's own channel check."""
    if channels is None or fshape[2] is None:
        return {}
    groups = channels // fshape[2]
    return {"group": groups} if groups != 1 else {}


@onnx_lowers("Conv2D")
def conv2d(call: OnnxCall) -> str:
    x, f = call.ins
    fmt = call.attrs.get("data_format", "NHWC")
    shape = call.type_of("input").shape
    fshape = call.type_of("filter").shape
    strides = _hw(call.attrs.get("strides", (1, 1, 1, 1)), fmt)
    dilations = _hw(call.attrs.get("dilations", (1, 1, 1, 1)), fmt)
    if fshape[0] is None or fshape[1] is None:
        raise Unsupported("a filter of open height or width")
    pads = _pads(call, shape, fshape[:2], strides, dilations, call.attrs.get("padding", "VALID"), fmt)
    xin = call.op("Transpose", x, perm=_TO_NCHW) if fmt == "NHWC" else x
    w = call.op("Transpose", f, perm=[3, 2, 0, 1])          # HWIO -> OIHW
    group = _group(shape[3 if fmt == "NHWC" else 1], fshape)
    y = call.op("Conv", xin, w, strides=strides, dilations=dilations, **_window_attrs(pads), **group)
    return call.op("Transpose", y, perm=_TO_NHWC) if fmt == "NHWC" else y


@onnx_lowers("MaxPool", "AvgPool")
def pool(call: OnnxCall) -> str:
    x = call.ins[0]
    dt = call.in_types[0].dtype
    if dt.kind == "f":
        return _pool(call, x)
    if call.block != "MaxPool" or dt.itemsize > 4:
        raise Unsupported(f"pooling of {dt.name} (ONNX pools floats)")
    # ONNX Runtime max-pools floats: float64 holds every integer of up to 32 bits exactly, and
    # the max of the casts is the cast of the max
    return call.cast(_pool(call, call.cast(x, np.float64)), dt)


def _pool(call: OnnxCall, x: str) -> str:
    fmt = call.attrs.get("data_format", "NHWC")
    k = _hw(call.attrs.get("ksize", (1, 2, 2, 1)), fmt)
    strides = _hw(call.attrs.get("strides", (1, 2, 2, 1)), fmt)
    pads = _pads(call, call.in_types[0].shape, k, strides, (1, 1), call.attrs.get("padding", "VALID"), fmt)
    xin = call.op("Transpose", x, perm=_TO_NCHW) if fmt == "NHWC" else x
    extra = {"count_include_pad": 0} if call.block == "AvgPool" else {}
    y = call.op("MaxPool" if call.block == "MaxPool" else "AveragePool", xin, kernel_shape=k,
                strides=strides, **_window_attrs(pads), **extra)
    return call.op("Transpose", y, perm=_TO_NHWC) if fmt == "NHWC" else y


@onnx_lowers("LRN")
def lrn(call: OnnxCall) -> str:
    """TF's LRN over the last axis as ONNX's LRN over axis 1 of the transposed input: size
    2 * depth_radius + 1 channels, alpha times the size (ONNX divides by it); float16 through
    float32, as blockflow computes it."""
    x, t = call.ins[0], call.in_types[0]
    radius, channels = int(call.attrs.get("depth_radius", 5)), t.shape[3]
    if channels is not None:  # a window wider than the channels sums the same ones: ONNX would pad it all
        radius = min(radius, max(channels - 1, 0))
    size = 2 * radius + 1
    xin = call.cast(x, np.float32) if t.dtype == np.float16 else x
    y = call.op("LRN", call.op("Transpose", xin, perm=_TO_NCHW), size=size,
                alpha=float(call.attrs.get("alpha", 1.0)) * size, beta=float(call.attrs.get("beta", 0.5)),
                bias=float(call.attrs.get("bias", 1.0)))
    y = call.op("Transpose", y, perm=_TO_NHWC)
    return call.cast(y, np.float16) if t.dtype == np.float16 else y


# ------------------------------------------------------------------------------ batch norm

@onnx_lowers("FusedBatchNormV3")
def fused_batch_norm(call: OnnxCall) -> list:
    x, scale, offset, mean, variance = call.ins
    fmt = call.attrs.get("data_format", "NHWC")
    u = call.type_of("scale").dtype
    work = np.result_type(call.type_of("x").dtype, u)
    eps = _c(call, float(call.attrs.get("epsilon", 1e-4)), u)
    axes = [0, 1, 2] if fmt == "NHWC" else [0, 2, 3]
    xu = x if work == call.type_of("x").dtype else call.cast(x, work)

    def shaped(v):
        # a per-channel vector (in u) broadcast against x, in the dtype the normalization works in
        v = v if work == u else call.cast(v, work)
        return v if fmt == "NHWC" else call.op("Reshape", v, call.ints([-1, 1, 1]))

    if call.attrs.get("is_training", True):
        m = reduce(call, "ReduceMean", xu, axes, False)
        centred = call.op("Sub", xu, m if fmt == "NHWC" else call.op("Reshape", m, call.ints([-1, 1, 1])))
        v = reduce(call, "ReduceMean", call.op("Mul", centred, centred), axes, False)
        m, v = (m, v) if work == u else (call.cast(m, u), call.cast(v, u))
        channels = call.op("Gather", call.op("Shape", xu), call.const(np.asarray(3 if fmt == "NHWC" else 1, np.int64)))
        count = call.cast(call.op("Div", call.op("Size", xu), channels), u)
        unbiased = call.op("Mul", v, call.op("Div", count, call.op("Max", call.op("Sub", count, _c(call, 1, u)), _c(call, 1, u))))
        f = float(call.attrs.get("exponential_avg_factor", 1.0))
        if f == 1:
            running_mean, running_var = m, unbiased
        else:
            keep = _c(call, 1 - f, u)
            running_mean = call.op("Add", call.op("Mul", keep, mean), call.op("Mul", _c(call, f, u), m))
            running_var = call.op("Add", call.op("Mul", keep, variance), call.op("Mul", _c(call, f, u), unbiased))
    else:
        m, v = mean, variance
        running_mean, running_var = mean, variance
    r = call.op("Reciprocal", call.op("Sqrt", call.op("Add", v, eps)))
    y = call.op("Add", call.op("Mul", call.op("Sub", xu, shaped(m)), shaped(call.op("Mul", r, scale))), shaped(offset))
    if work != call.type_of("x").dtype:
        y = call.cast(y, call.type_of("x").dtype)
    return [y, running_mean, running_var, m, v, _c(call, 0, u)]


@onnx_lowers("InTopK")
def in_top_k(call: OnnxCall) -> str:
    pred, targets = call.ins[0], call.ins[1]
    classes = call.type_of("predictions").shape[1]
    if classes == 0:
        return call.op("Expand", call.const(np.asarray(False)), call.op("Shape", targets))
    k = int(np.asarray(call.arg("k")).reshape(-1)[0])
    i64 = np.int64
    t = call.cast(targets, i64)
    n = call.op("Gather", call.op("Shape", pred), call.const(np.asarray(1, i64)))
    inside = call.op("And", call.op("GreaterOrEqual", t, call.const(np.asarray(0, i64))), call.op("Less", t, n))
    safe = call.op("Unsqueeze", call.op("Where", inside, t, call.const(np.asarray(0, i64))), call.ints([1]))
    target = call.op("GatherElements", pred, safe, axis=1)
    above = reduce(call, "ReduceSum", call.cast(call.op("Greater", pred, target), i64), [1], False)
    bad = call.op("Or", call.op("IsNaN", pred), is_inf(call, pred, call.type_of("predictions").dtype))
    finite = call.op("Equal", reduce(call, "ReduceSum", call.cast(bad, i64), [1], False), call.const(np.asarray(0, i64)))
    ok = call.op("And", inside, finite)
    return call.op("And", ok, call.op("Less", above, call.const(np.asarray(k, i64))))


@onnx_lowers("Conv2DBackpropInput")
def conv2d_backprop_input(call: OnnxCall) -> str:
    """TF's transposed convolution as ONNX's ConvTranspose: Conv2D's padding of the input size
    given, and the rows and columns no window reached (output_padding) added at the end."""
    f, g = call.arg("filter"), call.arg("out_backprop")
    fmt = call.attrs.get("data_format", "NHWC")
    sizes = [int(v) for v in np.asarray(call.arg("input_sizes")).reshape(-1)]
    fshape = call.type_of("filter").shape
    gshape = call.type_of("out_backprop").shape
    if fshape[0] is None or fshape[1] is None:
        raise Unsupported("a filter of open height or width")
    strides = _hw(call.attrs.get("strides", (1, 1, 1, 1)), fmt)
    dilations = _hw(call.attrs.get("dilations", (1, 1, 1, 1)), fmt)
    pads = _pads(call, sizes, fshape[:2], strides, dilations, call.attrs.get("padding", "VALID"), fmt)
    h, w = (1, 2) if fmt == "NHWC" else (2, 3)
    extra = []
    for axis, (size, k, s, d) in enumerate(zip((sizes[h], sizes[w]), fshape[:2], strides, dilations)):
        before, after = pads[axis], pads[axis + 2]
        out = gshape[h if axis == 0 else w]
        if out is None:
            raise Unsupported("an out_backprop of open height or width")
        extra.append(size - ((out - 1) * s + (k - 1) * d + 1 - before - after))
    if min(extra) < 0:
        raise Unsupported("an input size its out_backprop cannot come from")
    gin = call.op("Transpose", g, perm=_TO_NCHW) if fmt == "NHWC" else g
    wt = call.op("Transpose", f, perm=[3, 2, 0, 1])      # HWIO -> [out_backprop channels, C, kh, kw]
    y = call.op("ConvTranspose", gin, wt, strides=strides, dilations=dilations, pads=pads, output_padding=extra,
                **_group(sizes[3 if fmt == "NHWC" else 1], fshape))
    return call.op("Transpose", y, perm=_TO_NHWC) if fmt == "NHWC" else y
