"""PyTorch lowerings of the windowed nn blocks: BiasAdd, Conv2D, Conv2DBackpropInput, MaxPool,
AvgPool, and FusedBatchNormV3.

The windows follow blocks/window_geometry.py's arithmetic exactly (torch's own ``padding=`` is
symmetric, TF's SAME puts the odd entry after): the pads are worked out here, from the sizes the
compiler knows, and written as an explicit ``nn.functional.pad``. NHWC tensors are permuted to
torch's NCHW and back. MaxPool's gradient is TF's (all of a window's gradient to the first max in
row-major order, never to the padding, none from a NaN window), written as an autograd Function.
"""
from __future__ import annotations

import numpy as np

from blockflow.export.torch_lowering import Call, Unsupported, lowers

#: positions of the height, width and channel axes of a rank-4 tensor in each layout
_AXES = {"NHWC": (1, 2, 3), "NCHW": (2, 3, 1)}


def _spatial(values, data_format) -> tuple:
    h, w, _ = _AXES[data_format]
    values = list(values)
    return int(values[h]), int(values[w])


def _axis_pads(size, k, stride, dilation, padding, explicit):
    """(before, after) of one spatial axis, TF's arithmetic (window_geometry.axis_geometry)."""
    if padding == "VALID":
        return 0, 0
    if padding == "EXPLICIT":
        return explicit
    if size is None:
        raise Unsupported("SAME padding of an input whose height or width is unknown when exporting")
    eff = (k - 1) * dilation + 1
    out = -(-size // stride)
    total = max((out - 1) * stride + eff - size, 0)
    return total // 2, total - total // 2


def _pads(nhwc_shape, k, strides, dilations, padding, explicit_paddings, data_format):
    """(left, right, top, bottom): nn.functional.pad's order for the last two axes of NCHW."""
    explicit = (None, None)
    if padding == "EXPLICIT":
        p = list(explicit_paddings)
        h, w, _ = _AXES[data_format]
        explicit = ((int(p[2 * h]), int(p[2 * h + 1])), (int(p[2 * w]), int(p[2 * w + 1])))
    top, bottom = _axis_pads(nhwc_shape[1], k[0], strides[0], dilations[0], padding, explicit[0])
    left, right = _axis_pads(nhwc_shape[2], k[1], strides[1], dilations[1], padding, explicit[1])
    return left, right, top, bottom


def _nhwc(shape, data_format) -> tuple:
    h, w, c = _AXES[data_format]
    return shape[0], shape[h], shape[w], shape[c]


def _to_nchw(x: str, data_format: str) -> str:
    return f"{x}.permute(0, 3, 1, 2)" if data_format == "NHWC" else x


def _from_nchw(x: str, data_format: str) -> str:
    return f"{x}.permute(0, 2, 3, 1)" if data_format == "NHWC" else x


def _padded(x: str, pads, value=None) -> str:
    if not any(pads):
        return x
    fill = "" if value is None else f", value={value}"
    return f"nn.functional.pad({x}, {pads!r}{fill})"


@lowers("BiasAdd")
def bias_add(call: Call) -> str:
    value, bias = call.arg("value"), call.arg("bias")
    rank = len(call.type_of("value").shape)
    if call.attrs.get("data_format", "NHWC") == "NHWC" or rank == 2:
        return f"({value} + {bias})"
    return f"({value} + {bias}.reshape({call.lit((-1,) + (1,) * (rank - 2))}))"


def _conv_geometry(call: Call, nhwc_shape, kernel):
    fmt = call.attrs.get("data_format", "NHWC")
    s = _spatial(call.attrs.get("strides", (1, 1, 1, 1)), fmt)
    d = _spatial(call.attrs.get("dilations", (1, 1, 1, 1)), fmt)
    pads = _pads(nhwc_shape, kernel, s, d, call.attrs.get("padding", "VALID"),
                 call.attrs.get("explicit_paddings", ()), fmt)
    return fmt, s, d, pads


def _groups(channels, filter_shape) -> str:
    """``, groups=G`` for a grouped convolution (torch's weight [out, in/G, kh, kw] is the
    filter permuted, its groups in TF's order); nothing for an ungrouped one, or when the
    channels are unknown: then a grouped input fails in torch's own channel check."""
    if channels is None or filter_shape[2] is None:
        return ""
    groups = channels // filter_shape[2]
    return f", groups={groups}" if groups != 1 else ""


@lowers("Conv2D")
def conv2d(call: Call) -> str:
    shape = _nhwc(call.type_of("input").shape, call.attrs.get("data_format", "NHWC"))
    k = call.type_of("filter").shape[:2]
    if None in k:
        raise Unsupported("a filter whose height or width is unknown when exporting")
    fmt, s, d, pads = _conv_geometry(call, shape, k)
    x = _padded(_to_nchw(call.arg("input"), fmt), pads)
    w = f"{call.arg('filter')}.permute(3, 2, 0, 1)"
    groups = _groups(shape[3], call.type_of("filter").shape)
    return _from_nchw(f"nn.functional.conv2d({x}, {w}, stride={s!r}, dilation={d!r}{groups})", fmt)


@lowers("Conv2DBackpropInput")
def conv2d_backprop_input(call: Call) -> str:
    """Conv2D's input gradient as a transposed convolution onto the padded input, whose
    output_padding restores the rows and columns no window reached; the padding is cut off."""
    fmt = call.attrs.get("data_format", "NHWC")
    sizes = _nhwc(tuple(int(v) for v in np.asarray(call.arg("input_sizes")).reshape(-1)), fmt)
    k = call.type_of("filter").shape[:2]
    if None in k:
        raise Unsupported("a filter whose height or width is unknown when exporting")
    fmt, s, d, (left, right, top, bottom) = _conv_geometry(call, sizes, k)
    n, h, w, c = sizes
    hp, wp = h + top + bottom, w + left + right
    extra = []
    for size, kk, ss, dd in ((hp, k[0], s[0], d[0]), (wp, k[1], s[1], d[1])):
        eff = (kk - 1) * dd + 1
        out = (size - eff) // ss + 1
        extra.append(size - ((out - 1) * ss + eff))
    g = _to_nchw(call.arg("out_backprop"), fmt)
    wt = f"{call.arg('filter')}.permute(3, 2, 0, 1)"
    groups = _groups(c, call.type_of("filter").shape)
    full = (f"nn.functional.conv_transpose2d({g}, {wt}, stride={s!r}, output_padding={tuple(extra)!r}"
            f"{groups}, dilation={d!r})")
    if top or bottom or left or right:
        full = f"{full}[:, :, {top}:{top + h}, {left}:{left + w}]"
    return _from_nchw(full, fmt)


# --------------------------------------------------------------------------------------------
# Pooling

_MAX_POOL = '''class _MaxPool(torch.autograd.Function):
    """Max over 2-D windows of NCHW x padded by pads (left, right, top, bottom), padded entries
    never counting. Backward as TF's MaxPoolGrad: each window's gradient all to its first max in
    row-major order; a NaN window sends none (the padding, NaN, equals nothing)."""

    @staticmethod
    def forward(ctx, x, k, s, pads):
        low = -math.inf if x.is_floating_point() else torch.iinfo(x.dtype).min
        win = nn.functional.pad(x, pads, value=low).unfold(2, k[0], s[0]).unfold(3, k[1], s[1])
        out = win.reshape(win.shape[:4] + (-1,)).amax(-1)
        ctx.save_for_backward(x, out)
        ctx.geometry = (k, s, pads)
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g):
        x, out = ctx.saved_tensors
        k, s, pads = ctx.geometry
        n, c, h, w = x.shape
        oh, ow = out.shape[2:]
        win = nn.functional.pad(x, pads, value=math.nan).unfold(2, k[0], s[0]).unfold(3, k[1], s[1])
        hit = win.reshape(win.shape[:4] + (-1,)) == out[..., None]
        first = hit & (hit.cumsum(-1) == 1)
        cols = torch.where(first, g[..., None], torch.zeros((), dtype=g.dtype))
        cols = cols.permute(0, 1, 4, 2, 3).reshape(n, c * k[0] * k[1], oh * ow)
        hp, wp = h + pads[2] + pads[3], w + pads[0] + pads[1]
        gx = nn.functional.fold(cols, (hp, wp), k, stride=s)
        return gx[:, :, pads[2]:pads[2] + h, pads[0]:pads[0] + w], None, None, None
'''


def _pool_geometry(call: Call, name: str):
    fmt = call.attrs.get("data_format", "NHWC")
    shape = _nhwc(call.type_of(name).shape, fmt)
    k = _spatial(call.attrs.get("ksize", (1, 2, 2, 1)), fmt)
    s = _spatial(call.attrs.get("strides", (1, 2, 2, 1)), fmt)
    pads = _pads(shape, k, s, (1, 1), call.attrs.get("padding", "VALID"), call.attrs.get("explicit_paddings", ()),
                 fmt)
    return fmt, shape, k, s, pads


@lowers("MaxPool")
def max_pool(call: Call) -> str:
    fmt, _, k, s, pads = _pool_geometry(call, "input")
    call.helper("_MaxPool", _MAX_POOL)
    return _from_nchw(f"_MaxPool.apply({_to_nchw(call.arg('input'), fmt)}, {k!r}, {s!r}, {pads!r})", fmt)


def _window_counts(shape, k, s, pads):
    """[oh, ow]: the real (unpadded) entries each window covers (AvgPool's divisors)."""
    left, _, top, _ = pads
    h, w = shape[1], shape[2]
    oh = (h + pads[2] + pads[3] - k[0]) // s[0] + 1
    ow = (w + pads[0] + pads[1] - k[1]) // s[1] + 1

    def axis(size, kk, ss, before, out):
        start = np.arange(out) * ss - before
        return np.minimum(start + kk, size) - np.maximum(start, 0)
    return np.multiply.outer(axis(h, k[0], s[0], top, oh), axis(w, k[1], s[1], left, ow))


@lowers("AvgPool")
def avg_pool(call: Call) -> str:
    """Window sums over the zero-padded input, divided by each window's count of real entries
    (TF's SAME: padding never counts); float16 is summed in float32, as blockflow."""
    fmt, shape, k, s, pads = _pool_geometry(call, "value")
    dtype = call.type_of("value").dtype
    x = _to_nchw(call.arg("value"), fmt)
    if dtype == np.float16:
        x = f"{x}.float()"
    sums = f"nn.functional.avg_pool2d({_padded(x, pads)}, {k!r}, {s!r}, divisor_override=1)"
    acc = np.float32 if dtype == np.float16 else dtype
    if any(pads):
        divisor = call.constant(_window_counts(shape, k, s, pads), acc)
    else:
        divisor = repr(float(k[0] * k[1]))
    out = f"({sums} / {divisor})"
    if dtype == np.float16:
        out = f"{out}.half()"
    return _from_nchw(out, fmt)


# --------------------------------------------------------------------------------------------
# FusedBatchNormV3


@lowers("FusedBatchNormV3")
def fused_batch_norm(call: Call) -> list:
    """y from the batch's statistics (training: autograd through them gives TF's gradient) or
    the given ones (inference: detached, as TF sends mean and variance no gradient). The other
    outputs carry no gradient and are detached."""
    fmt = call.attrs.get("data_format", "NHWC")
    x, scale, offset, mean, var = (call.arg(n) for n in ("x", "scale", "offset", "mean", "variance"))
    u = call.type_of("scale").dtype
    work = np.result_type(call.type_of("x").dtype, u)
    axes = (0, 1, 2) if fmt == "NHWC" else (0, 2, 3)
    shaped = (lambda v: v) if fmt == "NHWC" else (lambda v: f"{v}.reshape(-1, 1, 1)")
    eps = call.lit(float(np.dtype(u).type(call.attrs.get("epsilon", 1e-4))))
    t = {n: call.temp(n) for n in ("xu", "m", "v", "r", "run_m", "run_v")}
    call.line(f"{t['xu']} = {x}.to({call.dtype(work)})")
    if call.attrs.get("is_training", True):
        factor = float(call.attrs.get("exponential_avg_factor", 1.0))
        call.line(f"{t['m']} = torch.mean({t['xu']}, dim={axes!r})")
        call.line(f"{t['v']} = torch.mean(torch.square({t['xu']} - {shaped(t['m'])}), dim={axes!r})")
        call.line(f"{t['m']}, {t['v']} = {t['m']}.to({call.dtype(u)}), {t['v']}.to({call.dtype(u)})")
        count = call.temp("count")
        call.line(f"{count} = {x}.numel() // max({x}.shape[{3 if fmt == 'NHWC' else 1}], 1)")
        unbiased = f"{t['v']}.detach() * ({count} / max({count} - 1, 1))"
        if factor == 1:
            call.line(f"{t['run_m']}, {t['run_v']} = {t['m']}.detach(), {unbiased}")
        else:
            f = call.lit(factor)
            call.line(f"{t['run_m']} = (1 - {f}) * {mean}.detach() + {f} * {t['m']}.detach()")
            call.line(f"{t['run_v']} = (1 - {f}) * {var}.detach() + {f} * {unbiased}")
    else:
        call.line(f"{t['m']}, {t['v']} = {mean}.detach(), {var}.detach()")
        call.line(f"{t['run_m']}, {t['run_v']} = {t['m']}, {t['v']}")
    call.line(f"{t['r']} = 1 / torch.sqrt({t['v']} + {eps})")
    scaled = f"({t['r']} * {scale})"
    y = (f"(({t['xu']} - {shaped(t['m'])}) * {shaped(scaled)} + {shaped(offset)})"
         f".to({call.out_dtype(0)})")
    return [y, t["run_m"], t["run_v"], f"{t['m']}.detach()", f"{t['v']}.detach()",
            f"torch.zeros((), dtype={call.dtype(u)})"]
