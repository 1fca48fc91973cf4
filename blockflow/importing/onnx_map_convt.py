"""ONNX's ConvTranspose as TensorFlow's Conv2DBackpropInput (conv2d_transpose).

The transposed convolution is made whole (VALID: every position an input entry reaches,
``stride * (in - 1) + (k - 1) * dilation + 1`` on an axis), then cut to ONNX's output: from the
leading padding on, as many positions as the output has, zeros where the output reaches past the
whole one (output_padding, or an output_shape larger than it). That is the definition ONNX
gives for every combination of pads, auto_pad, output_padding and output_shape.
"""
from __future__ import annotations

import numpy as np

from blockflow.importing.onnx_map_nn import _NCHW, _as_2d
from blockflow.importing.onnx_mapping import Call, Unsupported, maps


def _placement(call: Call, size: int, full: int, i: int) -> tuple:
    """(first position of the whole result kept, output length) on spatial axis ``i``."""
    extra = list(call.attr("output_padding", (0, 0)))[i]
    shape = call.attr("output_shape")
    auto = call.attr("auto_pad", "NOTSET")
    pads = call.attr("pads")
    if auto in ("SAME_UPPER", "SAME_LOWER") and pads is None:
        out = shape[i] if shape is not None else size * list(call.attr("strides", (1, 1)))[i]
        total = full + extra - out
        return (total // 2 if auto == "SAME_UPPER" else total - total // 2), out
    if auto not in ("NOTSET", "", "VALID"):
        raise Unsupported(f"ConvTranspose with auto_pad {auto!r}")
    pads = [0, 0, 0, 0] if pads is None or auto == "VALID" else list(pads)
    if shape is not None:   # ONNX ignores pads then, and puts the odd padding first
        total = full + extra - shape[i]
        return total - total // 2, shape[i]
    return pads[i], full + extra - pads[i] - pads[i + 2]


@maps("ConvTranspose", blocks="Conv2DBackpropInput (Pad, StridedSlice to ONNX's output; BiasAdd; ExpandDims "
      "and Squeeze for 1-D)", notes="1-D and 2-D (NCHW), strides, dilations, pads, auto_pad, output_padding, "
      "output_shape; refused: group other than 1")
def conv_transpose(call: Call):
    shape = call.static_shape(0, "ConvTranspose")
    if len(shape) == 3:
        return _as_2d(call, conv_transpose)
    if len(shape) != 4:
        raise Unsupported(f"ConvTranspose over {len(shape) - 2} spatial axes: blockflow's are 2-D (NCHW)")
    if call.attr("group", 1) != 1:
        raise Unsupported(f"ConvTranspose with group {call.attr('group')}")
    wshape = call.static_shape(1, "ConvTranspose's weight")
    strides, dil = list(call.attr("strides", (1, 1))), list(call.attr("dilations", (1, 1)))
    full = [strides[i] * (shape[2 + i] - 1) + (wshape[2 + i] - 1) * dil[i] + 1 for i in range(2)]
    whole = call.block("Conv2DBackpropInput", {"strides": [1, 1, *strides], "dilations": [1, 1, *dil],
                                               "padding": "VALID", "data_format": _NCHW},
                       input_sizes=call.const([shape[0], wshape[1], *full], np.int32),
                       filter=call.transposed(call.input(1), (2, 3, 1, 0), hint="filter"),
                       out_backprop=call.input(0), hint="whole")
    spans = [_placement(call, shape[2 + i], full[i], i) for i in range(2)]
    before = [max(-first, 0) for first, _ in spans]
    after = [max(first + out - f, 0) for (first, out), f in zip(spans, full)]
    y = whole
    if any(before) or any(after):
        widths = [[0, 0], [0, 0], [before[0], after[0]], [before[1], after[1]]]
        y = call.block("Pad", {"constant_values": 0.0}, input=y, paddings=call.const(widths, np.int64), hint="zeros")
    begin = [0, 0] + [first + b for (first, _), b in zip(spans, before)]
    end = [0, 0] + [first + b + out for (first, out), b in zip(spans, before)]
    if begin[2:] != [0, 0] or end[2:] != [f + b + a for f, b, a in zip(full, before, after)]:
        y = call.block("StridedSlice", {"begin_mask": 3, "end_mask": 3}, input=y,
                       begin=call.const(begin, np.int64), end=call.const(end, np.int64),
                       strides=call.const([1, 1, 1, 1], np.int64), hint="cut")
    if call.has(2):
        return call.block("BiasAdd", {"data_format": _NCHW}, value=y, bias=call.input(2), typed=0)
    return y.typed(*call.out_type(0))
