"""nn_ops, convolution: BiasAdd, Conv2D, Conv2DBackpropInput.

Imports only blockflow.spec and numpy.
"""
from __future__ import annotations

import numpy as np

from blockflow.spec import Attr, Input, Output, ShapeError, TensorType, block, reserve

from .common import fmt_shape, no_bool
from .conv_groups import add_windows, groups_of, grouped_correlate, grouped_vjp, row_pieces, window_view
from .window_geometry import (LAYOUTS, WINDOW_MAX, axis_geometry, explicit_pads, from_nhwc, geometry,
                              layout_shape, nhwc_type, pad_hw, spatial, to_nhwc)


@block("BiasAdd", category="nn_ops")
class BiasAdd:
    """Adds a 1-D ``bias`` along the channel axis of ``value`` (the last one, or axis 1 for NCHW).

    As TensorFlow's ``tf.nn.bias_add``: ``value`` has rank 2 or more and ``bias`` one entry per
    channel (``value``'s last size for NHWC, its size at axis 1 for NCHW), of the same dtype.
    The gradient passes to ``value`` unchanged and is summed over every other axis for ``bias``
    (TensorFlow's BiasAddGrad).
    """

    inputs = (Input("value"), Input("bias"))
    outputs = (Output("output"),)
    attrs = (Attr("data_format", "choice", "NHWC", choices=LAYOUTS,
                  doc="NHWC: channels last; NCHW: channels at axis 1"),)
    grad_rule = """
        dvalue = g
        dbias = g summed over every axis but the channel axis (the last for NHWC, axis 1 for NCHW)
        """

    def infer(value, bias, *, data_format):
        if value.dtype != bias.dtype:
            raise ShapeError(f"BiasAdd: value is {value.dtype.name} but bias is {bias.dtype.name}")
        no_bool("BiasAdd", value)
        if value.rank < 2 or bias.rank != 1:
            raise ShapeError(f"BiasAdd needs a value of rank 2 or more and a 1-D bias, got {value} and {bias}")
        axis = value.rank - 1 if data_format == "NHWC" else 1
        c, b = value.shape[axis], bias.shape[0]
        if c is not None and b is not None and c != b:
            raise ShapeError(f"BiasAdd: bias {fmt_shape(bias.shape)} must have one entry per channel of value "
                             f"{fmt_shape(value.shape)} (axis {axis}, size {c}, {data_format})")
        shape = list(value.shape)
        shape[axis] = b if c is None else c
        return TensorType(shape, value.dtype)

    def forward(value, bias, *, data_format):
        if data_format == "NHWC":
            if bias.shape[0] != value.shape[-1]:
                raise ShapeError(f"BiasAdd: bias {list(bias.shape)} must have one entry per channel of "
                                 f"value {list(value.shape)}")
            return value + bias
        if bias.shape[0] != value.shape[1]:
            raise ShapeError(f"BiasAdd: bias {list(bias.shape)} must have one entry per channel of "
                             f"value {list(value.shape)} (axis 1, NCHW)")
        return value + bias.reshape((-1,) + (1,) * (value.ndim - 2))

    def vjp(g, out, value, bias, *, data_format, needs):
        g_bias = None
        if needs[1]:
            axis = g.ndim - 1 if data_format == "NHWC" else 1
            g_bias = np.add.reduce(g, axis=tuple(i for i in range(g.ndim) if i != axis))
        return (g if needs[0] else None), g_bias


_CONV_PADDINGS = ("SAME", "VALID", "EXPLICIT")


def _conv_setup(input_shape, filter_shape, strides, padding, explicit_paddings, dilations, data_format):
    """Everything Conv2D needs about its windows, from NHWC ``input_shape``; checked."""
    s = spatial("Conv2D", "strides", strides, data_format)
    d = spatial("Conv2D", "dilations", dilations, data_format)
    pads = explicit_pads("Conv2D", padding, explicit_paddings, data_format)
    oh, ow, p = geometry("Conv2D", input_shape, filter_shape[:2], s, d, padding, pads)
    return s, d, oh, ow, p


# The window matrix of a convolution (im2col) has kh * kw * C entries per output pixel: a large
# filter on a large image would make it gigabytes. It is made in pieces of about this many bytes
# (whole images, or runs of output rows of one image), each multiplied and dropped before the
# next, so a convolution needs its input, output and filter plus one piece.
_WINDOW_PIECE_BYTES = 32 * 1024 ** 2


def _conv_pieces(n, oh, ow, k, cin, itemsize):
    """The (images, output rows) ranges the window matrix is made in, as slices."""
    return row_pieces(n, oh, ow * k[0] * k[1] * cin * itemsize, _WINDOW_PIECE_BYTES)


def _windows_of(xp, k, rows, ow, strides, dilations):
    """The windows of the output rows ``rows`` of padded NHWC ``xp`` as a matrix: one row per
    output pixel, [images * len(rows) * ow, kh * kw * C]; a strided view copied once."""
    win = window_view(xp, k, rows, ow, strides, dilations)
    reserve(win.shape, xp.dtype, "the convolution's window matrix (one piece)")
    n, count, ow = win.shape[:3]
    return win.reshape(n * count * ow, k[0] * k[1] * xp.shape[3])


@block("Conv2D", category="nn_ops")
class Conv2D:
    """2-D convolution (cross-correlation, as TensorFlow) of ``input`` with ``filter``.

    ``input`` is [batch, height, width, in_channels] (NHWC; [batch, in_channels, height, width]
    with NCHW) and ``filter`` is [filter_height, filter_width, in_channels, out_channels]; the
    output has out_channels channels in the same layout. ``strides`` and ``dilations`` have 4
    entries in the layout's order, 1 for batch and channels (``[1, sh, sw, 1]`` for NHWC).

    Grouped, as TensorFlow: the input's channels may be a multiple G of the filter's
    in_channels, and out_channels must then be a multiple of G. Group g reads input channels
    [g·in_channels, (g+1)·in_channels) and makes output channels [g·out_channels/G,
    (g+1)·out_channels/G) with its slice of the filter (ONNX's and PyTorch's ``group``). With
    in_channels 1 it is a depthwise convolution (G = the input's channels).

    Padding follows TensorFlow exactly. VALID: no padding, only full windows. SAME: the output
    has ``ceil(size / stride)`` entries per axis and the input is zero-padded by
    ``max((out - 1) * stride + (k - 1) * dilation + 1 - size, 0)``, the odd entry going after
    (bottom/right). EXPLICIT: ``explicit_paddings`` gives (before, after) per axis, 8 ints in the
    layout's order.

    Computed by im2col (a strided view of the windows) and matrix products, in pieces of about
    32 MiB of windows, so a large filter on a large image never makes its whole window matrix;
    grouped, by one batched product over the groups, and depthwise by a multiply-accumulate per
    kernel offset over every channel at once.
    The gradient goes to both operands: the filter's as the windows' product with the output's
    cotangent; the input's as the full correlation of the cotangent with the flipped filter
    (stride 1), or by summing the windows' cotangents back over the kernel offsets (col2im).
    """

    inputs = (Input("input", dtype="float"), Input("filter", dtype="float"))
    outputs = (Output("output"),)
    attrs = (
        Attr("strides", "ints", (1, 1, 1, 1), max=WINDOW_MAX, doc="window step per axis, [1, sh, sw, 1] in NHWC"),
        Attr("padding", "choice", "VALID", choices=_CONV_PADDINGS),
        Attr("explicit_paddings", "ints", (), max=WINDOW_MAX,
             doc="with EXPLICIT padding: 8 ints, (before, after) per axis"),
        Attr("data_format", "choice", "NHWC", choices=LAYOUTS),
        Attr("dilations", "ints", (1, 1, 1, 1), max=WINDOW_MAX,
             doc="filter dilation per axis, [1, dh, dw, 1] in NHWC"),
    )
    grad_rule = """
        dinput = each output position's g times filter, added back onto that position's input window
        overlapping windows add up; what lands on the padding is dropped
        dfilter = Σ over the batch and the output positions of (input window) ⊗ g
        """

    def infer(input, filter, *, strides, padding, explicit_paddings, data_format, dilations):
        if input.dtype != filter.dtype:
            raise ShapeError(f"Conv2D: input is {input.dtype.name} but filter is {filter.dtype.name}")
        shape = nhwc_type("Conv2D", input, data_format)
        if filter.rank != 4:
            raise ShapeError(f"Conv2D needs a rank-4 filter [height, width, in_channels, out_channels], "
                             f"got {filter}")
        groups_of("Conv2D", f"input {fmt_shape(input.shape)}", shape[3], filter.shape, data_format)
        kh, kw = filter.shape[:2]
        s = spatial("Conv2D", "strides", strides, data_format)
        d = spatial("Conv2D", "dilations", dilations, data_format)
        pads = explicit_pads("Conv2D", padding, explicit_paddings, data_format)
        oh = ow = None
        if kh is not None:
            oh = axis_geometry("Conv2D", "height", shape[1], kh, s[0], d[0], padding, pads and pads[0])[0]
        if kw is not None:
            ow = axis_geometry("Conv2D", "width", shape[2], kw, s[1], d[1], padding, pads and pads[1])[0]
        return TensorType(layout_shape(shape[0], oh, ow, filter.shape[3], data_format), input.dtype)

    def forward(input, filter, *, strides, padding, explicit_paddings, data_format, dilations):
        x = to_nhwc(input, data_format)
        groups = groups_of("Conv2D", f"input {fmt_shape(input.shape)}", x.shape[3], filter.shape, data_format)
        s, d, oh, ow, p = _conv_setup(x.shape, filter.shape, strides, padding, explicit_paddings,
                                      dilations, data_format)
        if groups > 1:
            out = grouped_correlate(pad_hw(x, p, 0), filter, groups, s, d, oh, ow, _WINDOW_PIECE_BYTES)
            return from_nhwc(out, data_format)
        return from_nhwc(_correlate(pad_hw(x, p, 0), filter, s, d, oh, ow), data_format)

    def vjp(g, out, input, filter, *, strides, padding, explicit_paddings, data_format, dilations, needs):
        x = to_nhwc(input, data_format)
        s, d, oh, ow, p = _conv_setup(x.shape, filter.shape, strides, padding, explicit_paddings,
                                      dilations, data_format)
        kh, kw, cin, cout = filter.shape
        n, h, w, channels = x.shape
        g = to_nhwc(g, data_format)
        if channels != cin:
            g_input, g_filter = grouped_vjp(x, g, filter, channels // cin, s, d, p, needs, _WINDOW_PIECE_BYTES)
            return (None if g_input is None else from_nhwc(g_input, data_format)), g_filter
        pieces = _conv_pieces(n, oh, ow, filter.shape, cin, max(x.dtype.itemsize, g.dtype.itemsize))
        g_input = g_filter = None
        if needs[1]:
            # Piece by piece, as the forward: the window matrix never exists whole.
            xp = pad_hw(x, p, 0)
            g_filter = np.zeros((kh * kw * cin, cout), g.dtype)
            for images, rows in pieces:
                g_filter += np.matmul(_windows_of(xp[images], filter.shape, rows, ow, s, d).T,
                                      g[images, rows].reshape(-1, cout))
            del xp
            g_filter = g_filter.reshape(filter.shape)
        if needs[0]:
            top, bottom, left, right = p
            hp, wp = h + top + bottom, w + left + right
            reserve((n, hp, wp, cin), g.dtype, "the padded input's gradient")
            if s == (1, 1):
                # The input's gradient is a full correlation of g with the filter flipped (in and
                # out channels swapped): the forward's own pieces and matrix products.
                eh, ew = (kh - 1) * d[0], (kw - 1) * d[1]
                flipped = filter[::-1, ::-1].transpose(0, 1, 3, 2)
                dxp = _correlate(pad_hw(g, (eh, eh, ew, ew), 0, "the convolution's padded gradient"),
                                 flipped, (1, 1), d, hp, wp)
            else:
                dxp = np.zeros((n, hp, wp, cin), g.dtype)
                kernel_t = filter.reshape(-1, cout).T
                for images, rows in pieces:
                    g2 = g[images, rows].reshape(-1, cout)
                    count = rows.stop - rows.start
                    reserve((g2.shape[0], kernel_t.shape[1]), g.dtype,
                            "the convolution's window cotangents (one piece)")
                    dcols = np.matmul(g2, kernel_t).reshape(len(range(n)[images]), count, ow, kh, kw, cin)
                    add_windows(dxp[images], dcols, (kh, kw), rows, s, d)
            g_input = from_nhwc(dxp[:, top:top + h, left:left + w], data_format)
        return g_input, g_filter


def _correlate(xp, filter, strides, dilations, oh, ow):
    """The VALID cross-correlation of padded NHWC ``xp`` with ``filter`` [kh, kw, cin, cout]:
    [N, oh, ow, cout], made piece by piece (im2col and one matrix product per piece)."""
    n, cin, cout = xp.shape[0], filter.shape[2], filter.shape[3]
    kernel = filter.reshape(-1, cout)
    out = np.empty((n, oh, ow, cout), np.result_type(xp, filter))
    for images, rows in _conv_pieces(n, oh, ow, filter.shape, cin, xp.dtype.itemsize):
        cols = _windows_of(xp[images], filter.shape, rows, ow, strides, dilations)
        out[images, rows] = np.matmul(cols, kernel).reshape(out[images, rows].shape)
    return out


def _backprop_sizes(input_sizes, data_format):
    """``input_sizes`` (the input's shape, 4 ints in the layout's order) as an NHWC tuple; checked."""
    a = np.asarray(input_sizes)
    if a.shape != (4,) or a.dtype.kind not in "iu" or (a < 0).any():
        raise ShapeError(f"Conv2DBackpropInput: input_sizes must be 4 non-negative ints (the input's shape, "
                         f"{data_format}), got {a.tolist()!r}")
    n, h, w, c = (int(a[i]) for i in ((0, 1, 2, 3) if data_format == "NHWC" else (0, 2, 3, 1)))
    if h == 0 or w == 0:
        raise ShapeError(f"Conv2DBackpropInput: input_sizes {a.tolist()} has an empty height or width")
    return n, h, w, c


def _backprop_check(sizes, fshape, gshape, strides, padding, explicit_paddings, data_format, dilations):
    """Check that an out_backprop of NHWC ``gshape`` is what Conv2D makes of an input of NHWC
    ``sizes`` and a filter of ``fshape`` (None entries: unknown); the known NHWC shape of the
    gradient it gives."""
    op = "Conv2DBackpropInput"
    s = spatial(op, "strides", strides, data_format)
    d = spatial(op, "dilations", dilations, data_format)
    pads = explicit_pads(op, padding, explicit_paddings, data_format)
    kh, kw, _, fout = fshape
    groups_of(op, "input_sizes", sizes[3], fshape, data_format)
    if fout is not None and gshape[3] is not None and fout != gshape[3]:
        raise ShapeError(f"{op}: out_backprop has {gshape[3]} channels ({data_format}) but filter "
                         f"{fmt_shape(fshape)} makes {fout}")
    want = [sizes[0], None, None]
    if kh is not None:
        want[1] = axis_geometry(op, "height", sizes[1], kh, s[0], d[0], padding, pads and pads[0])[0]
    if kw is not None:
        want[2] = axis_geometry(op, "width", sizes[2], kw, s[1], d[1], padding, pads and pads[1])[0]
    for axis, (a, b) in enumerate(zip(want, gshape[:3])):
        if a is not None and b is not None and a != b:
            raise ShapeError(f"{op}: out_backprop {fmt_shape(layout_shape(*gshape, data_format))} does not fit: "
                             f"Conv2D of an input {list(layout_shape(*sizes, data_format))} with filter "
                             f"{fmt_shape(fshape)} ({padding}, strides {list(strides)}) gives "
                             f"{fmt_shape(layout_shape(*want, fout, data_format))}")


@block("Conv2DBackpropInput", category="nn_ops")
class Conv2DBackpropInput:
    """The gradient of Conv2D with respect to its input: a transposed convolution.

    As TensorFlow's raw op (``tf.nn.conv2d_transpose`` computes it): ``input_sizes`` is the
    shape of Conv2D's input (4 ints in the layout's order, known when compiling), ``filter`` is
    [filter_height, filter_width, in_channels, out_channels] and ``out_backprop`` has the shape
    Conv2D gives for that input and filter. The output has shape ``input_sizes``: each entry of
    ``out_backprop`` times the filter, added back onto its window (what lands on the padding is
    dropped). ``strides``, ``padding`` (SAME, VALID, EXPLICIT with ``explicit_paddings``),
    ``data_format`` and ``dilations`` are Conv2D's, with Conv2D's window arithmetic; several
    input sizes give one out_backprop size, which is why input_sizes is given.

    Grouped as Conv2D: input_sizes' channels may be a multiple G of the filter's in_channels
    (the transposed grouped convolution).

    Being linear in each operand, its gradients are Conv2D itself: out_backprop's is the Conv2D
    of the cotangent with the filter, the filter's is Conv2D's filter gradient of the cotangent
    (as the input) and out_backprop (as the output's cotangent).
    """

    inputs = (Input("input_sizes", dtype="int", static=True, doc="the shape of Conv2D's input"),
              Input("filter", dtype="float"), Input("out_backprop", dtype="float"))
    outputs = (Output("output"),)
    attrs = Conv2D.attrs
    grad_rule = """
        dout_backprop = Conv2D(g, filter) with the same strides, padding, dilations and layout
        dfilter = Σ over the batch and the output positions of (g's window) ⊗ out_backprop
        """

    def infer(input_sizes, filter, out_backprop, *, strides, padding, explicit_paddings, data_format,
              dilations):
        if filter.dtype != out_backprop.dtype:
            raise ShapeError(f"Conv2DBackpropInput: filter is {filter.dtype.name} but out_backprop is "
                             f"{out_backprop.dtype.name}")
        sizes = _backprop_sizes(input_sizes, data_format)
        if filter.rank != 4:
            raise ShapeError(f"Conv2DBackpropInput needs a rank-4 filter [height, width, in_channels, "
                             f"out_channels], got {filter}")
        gshape = nhwc_type("Conv2DBackpropInput", out_backprop, data_format, "out_backprop")
        _backprop_check(sizes, filter.shape, gshape, strides, padding, explicit_paddings, data_format, dilations)
        return TensorType(layout_shape(*sizes, data_format), filter.dtype)

    def forward(input_sizes, filter, out_backprop, *, strides, padding, explicit_paddings, data_format,
                dilations):
        sizes = _backprop_sizes(input_sizes, data_format)
        if out_backprop.ndim != 4 or filter.ndim != 4:
            raise ShapeError(f"Conv2DBackpropInput needs a rank-4 filter and out_backprop, got "
                             f"{list(filter.shape)} and {list(out_backprop.shape)}")
        _backprop_check(sizes, filter.shape, to_nhwc(out_backprop, data_format).shape, strides, padding,
                        explicit_paddings, data_format, dilations)
        attrs = dict(strides=strides, padding=padding, explicit_paddings=explicit_paddings,
                     data_format=data_format, dilations=dilations)
        # Conv2D's input gradient reads only its input's shape: a zero-strided stand-in.
        stand_in = np.broadcast_to(np.zeros((), out_backprop.dtype), layout_shape(*sizes, data_format))
        return Conv2D.vjp(out_backprop, None, stand_in, filter, **attrs, needs=(True, False))[0]

    def vjp(g, out, input_sizes, filter, out_backprop, *, strides, padding, explicit_paddings, data_format,
            dilations, needs):
        attrs = dict(strides=strides, padding=padding, explicit_paddings=explicit_paddings,
                     data_format=data_format, dilations=dilations)
        g_filter = g_out = None
        if needs[1]:
            g_filter = Conv2D.vjp(out_backprop, None, g, filter, **attrs, needs=(False, True))[1]
        if needs[2]:
            g_out = Conv2D.forward(g, filter, **attrs)
        return None, g_filter, g_out
