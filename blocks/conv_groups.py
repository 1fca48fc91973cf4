"""Conv2D's grouped convolution, as TensorFlow's: an input of C channels and a filter
[kh, kw, C / G, out] make G groups; group g reads input channels [g * C/G, (g+1) * C/G) and makes
output channels [g * out/G, (g+1) * out/G). Also the window views (im2col) and their cotangents'
sum back onto the input (col2im) that the ungrouped convolution in nn_conv shares.

Two ways to compute, chosen by the filter's in_channels (C / G):
- 1 (depthwise, ShuffleNet's and MobileNet's): one multiply-accumulate per kernel offset over a
  strided view of the input, every channel at once; no window matrix.
- more: the window matrix made as [G, pixels, kh * kw * C/G] and one batched matrix product over
  the groups.
Everything allocated here is made in pieces of whole images or runs of output rows, each at most
``piece_bytes`` (nn_conv's bound), announced with ``reserve``.

Holds no block. Imports only blockflow.spec and numpy.
"""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from blockflow.spec import ShapeError, reserve

from .common import fmt_shape
from .window_geometry import pad_hw


def groups_of(op, what, channels, filter_shape, data_format):
    """The number of groups of a convolution whose input has ``channels`` channels (``what``
    names it in errors), with TensorFlow's checks; None when a size is unknown."""
    fin, fout = filter_shape[2], filter_shape[3]
    if fin == 0:
        raise ShapeError(f"{op}: filter {fmt_shape(filter_shape)} has 0 in_channels")
    if channels is None or fin is None:
        return None
    if channels == 0 or channels % fin:
        raise ShapeError(f"{op}: {what} has {channels} channels ({data_format}) but filter "
                         f"{fmt_shape(filter_shape)} expects {fin}, or a multiple of {fin} (a grouped convolution)")
    groups = channels // fin
    if fout is not None and fout % groups:
        raise ShapeError(f"{op}: {what} has {channels} channels ({data_format}), {groups} groups of filter "
                         f"{fmt_shape(filter_shape)}'s {fin} in_channels, but its {fout} out_channels do not "
                         f"split into {groups} groups")
    return groups


def row_pieces(n, oh, row_bytes, piece_bytes):
    """(images, output rows) slices such that each piece takes at most ``piece_bytes`` at
    ``row_bytes`` per output row (or one row, when a row alone is larger)."""
    rows = max(piece_bytes // max(row_bytes, 1), 1)
    if rows >= oh:
        images = max(rows // max(oh, 1), 1)
        return [(slice(b, min(b + images, n)), slice(0, oh)) for b in range(0, n, images)]
    return [(slice(b, b + 1), slice(r, min(r + rows, oh))) for b in range(n) for r in range(0, oh, rows)]


def window_view(xp, k, rows, ow, strides, dilations):
    """The windows of output rows ``rows`` of padded NHWC ``xp``: a read-only strided view
    [images, len(rows), ow, kh, kw, C] (nothing copied)."""
    n, _, _, c = xp.shape
    s0, s1, s2, s3 = xp.strides
    first = rows.start * strides[0]
    return as_strided(xp[:, first:], (n, rows.stop - rows.start, ow, k[0], k[1], c),
                      (s0, s1 * strides[0], s2 * strides[1], s1 * dilations[0], s2 * dilations[1], s3),
                      writeable=False)


def add_windows(dxp, dcols, k, rows, strides, dilations):
    """Add each output pixel's window cotangent ``dcols`` ([images, rows, ow, kh, kw, ...]) back
    onto the padded input gradient ``dxp`` (the images of this piece): one strided add per kernel
    offset, or per output pixel when there are fewer of those."""
    _, count, ow = dcols.shape[:3]
    sh, sw = strides
    dh, dw = dilations
    top = rows.start * sh
    if k[0] * k[1] <= count * ow:
        for i in range(k[0]):
            for j in range(k[1]):
                r, c = top + i * dh, j * dw
                dxp[:, r:r + sh * (count - 1) + 1:sh, c:c + sw * (ow - 1) + 1:sw] += dcols[:, :, :, i, j]
    else:
        for y in range(count):
            for x in range(ow):
                r, c = top + y * sh, x * sw
                dxp[:, r:r + dh * (k[0] - 1) + 1:dh, c:c + dw * (k[1] - 1) + 1:dw] += dcols[:, y, x]


def _work(dtype):
    """The dtype products are summed in: float16 in float32 (as numpy's float16 matmul, which
    the ungrouped convolution uses), the others in their own."""
    return np.dtype(np.float32) if dtype == np.float16 else np.dtype(dtype)


def _channels_last(a, what):
    """``a`` (NHWC) with its channels contiguous: the per-offset passes run along them."""
    if a.flags.c_contiguous:
        return a
    reserve(a.shape, a.dtype, what)
    return np.ascontiguousarray(a)


# ------------------------------------------------------------------------- depthwise (C/G = 1)

def _depthwise_parts(filter, channels):
    """The filter as [kh, kw, C] (one output per channel) or [kh, kw, C, m] (m per channel), in
    the work dtype, and how an input entry lines up with it."""
    kh, kw, _, cout = filter.shape
    m = cout // channels
    w = filter.reshape((kh, kw, channels) if m == 1 else (kh, kw, channels, m))
    w = w.astype(_work(filter.dtype), copy=False)
    lift = (lambda v: v) if m == 1 else (lambda v: v[..., None])
    return w, m, lift


def depthwise_correlate(xp, filter, strides, dilations, oh, ow, piece_bytes):
    """The VALID grouped correlation of padded NHWC ``xp`` with a filter of one in_channel per
    group: [N, oh, ow, out], a multiply-accumulate per kernel offset, piece by piece."""
    xp = _channels_last(xp, "the convolution's input, channels last")
    n, c = xp.shape[0], xp.shape[3]
    kh, kw, _, cout = filter.shape
    dtype, work = np.result_type(xp, filter), _work(np.result_type(xp, filter))
    w, m, lift = _depthwise_parts(filter, c)
    out = np.empty((n, oh, ow) + w.shape[2:], dtype)
    for images, rows in row_pieces(n, oh, ow * cout * work.itemsize, piece_bytes):
        view = window_view(xp[images], (kh, kw), rows, ow, strides, dilations)
        shape = view.shape[:3] + w.shape[2:]
        reserve(shape, work, "the depthwise convolution's products (one piece)")
        tmp = np.empty(shape, work)
        acc = out[images, rows]
        if work != dtype:
            reserve(shape, work, "the depthwise convolution's sums (one piece)")
            acc = np.empty(shape, work)
        for i in range(kh):
            for j in range(kw):
                if i == 0 and j == 0:
                    np.multiply(lift(view[:, :, :, i, j]), w[i, j], out=acc)
                else:
                    np.multiply(lift(view[:, :, :, i, j]), w[i, j], out=tmp)
                    acc += tmp
        if work != dtype:
            out[images, rows] = acc
    return out.reshape(n, oh, ow, cout)


def depthwise_filter_grad(xp, g, filter_shape, strides, dilations):
    """Σ over the batch and the output pixels of each kernel offset's input entries times g:
    the filter's gradient [kh, kw, 1, out], one sum of products per offset (nothing allocated
    but the gradient)."""
    xp = _channels_last(xp, "the convolution's input, channels last")
    n, oh, ow, cout = g.shape
    c = xp.shape[3]
    kh, kw = filter_shape[:2]
    work = _work(g.dtype)
    m = cout // c
    view = window_view(xp, (kh, kw), slice(0, oh), ow, strides, dilations)
    gm, spec = (g, "nhwc,nhwc->c") if m == 1 else (g.reshape(n, oh, ow, c, m), "nhwc,nhwcm->cm")
    gw = np.empty((kh, kw, c * m), work)
    for i in range(kh):
        for j in range(kw):
            gw[i, j] = np.einsum(spec, view[:, :, :, i, j], gm, dtype=work).reshape(-1)
    return gw.reshape(filter_shape).astype(g.dtype, copy=False)


def depthwise_input_grad(g, filter, padded, strides, dilations, piece_bytes):
    """The padded input's gradient [N, hp, wp, C] of a depthwise convolution: per kernel offset,
    g times the offset's filter entries (summed over each channel's outputs) added onto the
    input entries that offset read."""
    n, oh, ow, cout = g.shape
    c = padded[3]
    kh, kw = filter.shape[:2]
    work = _work(g.dtype)
    w, m, _ = _depthwise_parts(filter, c)
    reserve(padded, work, "the padded input's gradient")
    dxp = np.zeros(padded, work)
    sh, sw = strides
    dh, dw = dilations
    for images, rows in row_pieces(n, oh, ow * cout * work.itemsize, piece_bytes):
        gp = g[images, rows]
        gp = gp.reshape(gp.shape[:3] + w.shape[2:])
        reserve(gp.shape, work, "the depthwise convolution's products (one piece)")
        tmp = np.empty(gp.shape, work)
        if m > 1:
            reserve(gp.shape[:4], work, "the depthwise convolution's sums (one piece)")
            summed = np.empty(gp.shape[:4], work)
        count, top = rows.stop - rows.start, rows.start * sh
        for i in range(kh):
            for j in range(kw):
                np.multiply(gp, w[i, j], out=tmp)
                part = tmp if m == 1 else np.add.reduce(tmp, axis=-1, out=summed)
                r, col = top + i * dh, j * dw
                dxp[images, r:r + sh * (count - 1) + 1:sh, col:col + sw * (ow - 1) + 1:sw] += part
    return dxp.astype(g.dtype, copy=False)


# ----------------------------------------------------------------------- grouped (C/G > 1)

def _group_kernel(filter, groups):
    """The filter as [G, kh * kw * C/G, out/G]: group g's matrix, rows in window order."""
    kh, kw, cg, cout = filter.shape
    return (filter.reshape(kh, kw, cg, groups, cout // groups).transpose(3, 0, 1, 2, 4)
            .reshape(groups, kh * kw * cg, cout // groups))


def _group_windows(xp, k, rows, ow, strides, dilations, groups):
    """The windows of output rows ``rows`` as one matrix per group, [G, pixels, kh * kw * C/G]:
    the strided view copied once."""
    view = window_view(xp, k, rows, ow, strides, dilations)
    shape = view.shape[:5] + (groups, view.shape[5] // groups)
    reserve(view.shape, xp.dtype, "the convolution's window matrix (one piece)")
    cols = np.ascontiguousarray(view.reshape(shape).transpose(5, 0, 1, 2, 3, 4, 6))
    return cols.reshape(groups, shape[0] * shape[1] * shape[2], k[0] * k[1] * shape[6])


def _group_rows(g, images, rows, groups):
    """g's pixels of one piece as [G, pixels, out/G] (a view of g's piece, copied if g's is not
    contiguous)."""
    gp = g[images, rows]
    n, count, ow, cout = gp.shape
    return gp.reshape(n * count * ow, groups, cout // groups).transpose(1, 0, 2)


def _pieces_of(xp, oh, ow, k, piece_bytes):
    return row_pieces(xp.shape[0], oh, ow * k[0] * k[1] * xp.shape[3] * xp.dtype.itemsize, piece_bytes)


def grouped_correlate(xp, filter, groups, strides, dilations, oh, ow, piece_bytes):
    """The VALID grouped correlation of padded NHWC ``xp`` with ``filter`` [kh, kw, C/G, out]:
    [N, oh, ow, out]."""
    if filter.shape[2] == 1:
        return depthwise_correlate(xp, filter, strides, dilations, oh, ow, piece_bytes)
    n, k, cout = xp.shape[0], filter.shape[:2], filter.shape[3]
    kernel = _group_kernel(filter, groups)
    out = np.empty((n, oh, ow, groups, cout // groups), np.result_type(xp, filter))
    for images, rows in _pieces_of(xp, oh, ow, k, piece_bytes):
        cols = _group_windows(xp[images], k, rows, ow, strides, dilations, groups)
        piece = out[images, rows]
        piece[...] = np.matmul(cols, kernel).reshape((groups,) + piece.shape[:3] + piece.shape[4:]).transpose(1, 2, 3, 0, 4)
    return out.reshape(n, oh, ow, cout)


def grouped_filter_grad(xp, g, filter_shape, groups, strides, dilations, piece_bytes):
    """The filter's gradient [kh, kw, C/G, out]: per group, its windows' product with its g."""
    if filter_shape[2] == 1:
        return depthwise_filter_grad(xp, g, filter_shape, strides, dilations)
    kh, kw, cg, cout = filter_shape
    n, oh, ow = g.shape[:3]
    total = np.zeros((groups, kh * kw * cg, cout // groups), g.dtype)
    for images, rows in _pieces_of(xp, oh, ow, (kh, kw), piece_bytes):
        cols = _group_windows(xp[images], (kh, kw), rows, ow, strides, dilations, groups)
        total += np.matmul(cols.transpose(0, 2, 1), _group_rows(g, images, rows, groups))
    return total.reshape(groups, kh, kw, cg, cout // groups).transpose(1, 2, 3, 0, 4).reshape(filter_shape)


def flipped_filter(filter, groups):
    """The filter of the input gradient's correlation (stride 1): each group's filter turned
    half a turn with its in and out channels swapped, [kh, kw, out/G, C]."""
    kh, kw, cg, cout = filter.shape
    return (filter[::-1, ::-1].reshape(kh, kw, cg, groups, cout // groups).transpose(0, 1, 4, 3, 2)
            .reshape(kh, kw, cout // groups, groups * cg))


def grouped_window_input_grad(g, filter, groups, padded, strides, dilations, piece_bytes):
    """The padded input's gradient [N, hp, wp, C] from each group's window cotangents (g times
    its matrix), added back over the kernel offsets: any stride."""
    kh, kw, cg, cout = filter.shape
    n, oh, ow = g.shape[:3]
    kernel_t = _group_kernel(filter, groups).transpose(0, 2, 1)
    reserve(padded, g.dtype, "the padded input's gradient")
    dxp = np.zeros(padded[:3] + (groups, cg), g.dtype)
    row_bytes = ow * kh * kw * padded[3] * g.dtype.itemsize
    for images, rows in row_pieces(n, oh, row_bytes, piece_bytes):
        gp = _group_rows(g, images, rows, groups)
        reserve((groups, gp.shape[1], kernel_t.shape[2]), g.dtype, "the convolution's window cotangents (one piece)")
        dcols = np.matmul(gp, kernel_t)
        count = rows.stop - rows.start
        dcols = dcols.reshape(groups, len(range(n)[images]), count, ow, kh, kw, cg).transpose(1, 2, 3, 4, 5, 0, 6)
        add_windows(dxp[images], dcols, (kh, kw), rows, strides, dilations)
    return dxp.reshape(padded)


def grouped_vjp(x, g, filter, groups, strides, dilations, pads, needs, piece_bytes):
    """(the input's gradient, the filter's gradient) of a grouped Conv2D of NHWC ``x`` padded by
    ``pads`` (top, bottom, left, right), g its output's NHWC cotangent; None where not needed."""
    kh, kw, cg, _ = filter.shape
    n, h, w, c = x.shape
    g_input = g_filter = None
    if needs[1]:
        g_filter = grouped_filter_grad(pad_hw(x, pads, 0), g, filter.shape, groups, strides, dilations, piece_bytes)
    if needs[0]:
        top, bottom, left, right = pads
        padded = (n, h + top + bottom, w + left + right, c)
        if cg == 1:
            dxp = depthwise_input_grad(g, filter, padded, strides, dilations, piece_bytes)
        elif tuple(strides) == (1, 1):
            # A full correlation of g with each group's filter flipped, as the ungrouped one.
            eh, ew = (kh - 1) * dilations[0], (kw - 1) * dilations[1]
            gp = pad_hw(g, (eh, eh, ew, ew), 0, "the convolution's padded gradient")
            reserve(padded, g.dtype, "the padded input's gradient")
            dxp = grouped_correlate(gp, flipped_filter(filter, groups), groups, (1, 1), dilations, padded[1],
                                    padded[2], piece_bytes)
        else:
            dxp = grouped_window_input_grad(g, filter, groups, padded, strides, dilations, piece_bytes)
        g_input = dxp[:, top:top + h, left:left + w]
    return g_input, g_filter
