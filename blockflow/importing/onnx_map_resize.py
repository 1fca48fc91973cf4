"""ONNX's Resize and Upsample, axis by axis, as Gathers of the input with constant weights.

Resize is separable: along each resized axis an output position is a weighted sum of a few
input positions (its taps: 1 for nearest, 2 for linear, 4 for cubic), which ONNX's definition
fixes from the sizes alone: the coordinate transformation maps the position back into the input,
the mode's coefficients weigh its neighbours, the neighbours past an edge repeat the edge (or are
left out with exclude_outside). With the shapes static those taps and weights are constants, so
each axis is Gathers of the taps, multiplied by their weights and added: exactly the definition,
and its gradient. Nearest is one Gather (a copy), for any dtype.
"""
from __future__ import annotations

import math

import numpy as np

from blockflow.budget import format_size, memory_budget
from blockflow.importing.onnx_build import Refused, check_tensor
from blockflow.importing.onnx_mapping import Call, Unsupported, maps

_TRANSFORMS = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
               "tf_half_pixel_for_nn")


def _source(mode: str, size: int, out: int, scale: float) -> np.ndarray:
    """Where each output position falls in the input, by ONNX's coordinate transformation."""
    y = np.arange(out, dtype=np.float64)
    if mode == "align_corners":
        return np.zeros(out) if scale * size == 1 else y * (size - 1) / (scale * size - 1)
    if mode == "asymmetric":
        return y / scale
    if mode == "tf_half_pixel_for_nn":
        return (y + 0.5) / scale
    if mode == "pytorch_half_pixel" and scale * size == 1:
        return np.full(out, -0.5)
    if mode == "half_pixel_symmetric":    # the implicit region's centre kept at the output's
        offset = size / 2 * (1 - out / (scale * size))
        return offset + (y + 0.5) / scale - 0.5
    return (y + 0.5) / scale - 0.5


def _cubic(a: float, t):
    """The cubic convolution kernel with coefficient ``a`` at distances ``t``."""
    t = np.abs(t)
    return np.where(t <= 1, ((a + 2) * t - (a + 3)) * t * t + 1,
                    np.where(t < 2, ((a * t - 5 * a) * t + 8 * a) * t - 4 * a, 0.0))


def _antialias_reach(kind: str, scale: float) -> int:
    """The first tap's offset of antialias's kernel when shrinking by ``scale`` (its taps run
    from it to ``1 - first``)."""
    return math.floor(-(1 if kind == "linear" else 2) / min(scale, 1.0)) + 1


def _taps(kind: str, scale: float, call: Call) -> int:
    """How many input positions each output position weighs."""
    if kind != "nearest" and call.attr("antialias", 0):
        return 2 - 2 * _antialias_reach(kind, scale)
    return 4 if kind == "cubic" else 2


def _antialiased(kind: str, ratio: np.ndarray, scale: float, a: float) -> np.ndarray:
    """Antialias's taps when shrinking: the kernel stretched by 1 / scale, normalized."""
    first = _antialias_reach(kind, scale)
    t = (np.arange(first, 2 - first)[None, :] - ratio[:, None]) * min(scale, 1.0)
    w = np.clip(1 - np.abs(t), 0, 1) if kind == "linear" else _cubic(a, t)
    return w / w.sum(axis=1, keepdims=True)


def _weights(kind: str, ratio: np.ndarray, scale: float, call: Call) -> np.ndarray:
    """The coefficients [positions, taps] of the taps around each position ``ratio`` in (0, 1]
    past the tap before it (whole arrays: an axis may have millions of positions)."""
    if kind != "nearest" and call.attr("antialias", 0):
        return _antialiased(kind, ratio, scale, float(call.attr("cubic_coeff_a", -0.75)))
    if kind == "nearest":
        rule = call.attr("nearest_mode", "round_prefer_floor")
        pick_right = {"round_prefer_floor": ratio > 0.5, "round_prefer_ceil": ratio >= 0.5,
                      "floor": np.zeros(ratio.shape, bool), "ceil": np.ones(ratio.shape, bool)}[rule]
        pick_right = pick_right | (ratio == 1.0)
        return np.stack([~pick_right, pick_right], axis=1).astype(np.float64)
    if kind == "linear":
        return np.stack([1 - ratio, ratio], axis=1)
    a = float(call.attr("cubic_coeff_a", -0.75))
    return _cubic(a, np.stack([ratio + 1, ratio, 1 - ratio, 2 - ratio], axis=1))


def axis_taps(call: Call, kind: str, size: int, out: int, scale: float) -> tuple:
    """(input index [out, taps], weight [out, taps]) of one axis resized from ``size`` to ``out``."""
    x = _source(call.attr("coordinate_transformation_mode", "half_pixel"), size, out, scale)
    base = np.floor(x)
    ratio = np.where(x == base, 1.0, x - base)
    weight = _weights(kind, ratio, scale, call).reshape(out, -1)
    n = weight.shape[1]
    # the n neighbours nearest x, the lower first on a tie (n is even, antialiased too)
    start = np.where(x == base, base - n // 2, base - n // 2 + 1).astype(np.int64)
    index = start[:, None] + np.arange(n)[None, :]
    if call.attr("exclude_outside", 0):
        weight = np.where((index < 0) | (index >= size), 0.0, weight)
        total = weight.sum(axis=1, keepdims=True)
        weight = weight / np.where(total == 0, 1.0, total)
    return np.clip(index, 0, size - 1), weight


#: what importing one tap takes, measured: its index and weight, the blocks' constants made of
#: them, the project and its compile check (a linear resize to 10 million positions: 1.6 GB)
_TAP_BYTES = 80


def _check_sizes(call: Call, kind: str, shape: tuple, out: list, scale: list, todo: list) -> None:
    """Refuse, before anything is made, an output past the one-tensor limit, and taps (an index
    and a weight per tap and output position) past the memory budget: a scale of 1e9 in a tiny
    file must not make the import compute for hours."""
    check_tensor(call.dtype(0) or np.dtype(np.float32), out, "its output")
    budget, source = memory_budget()
    taps = sum(out[a] * (1 if kind == "nearest" else _taps(kind, scale[a], call)) for a in todo)
    if taps * _TAP_BYTES > budget:
        raise Refused(f"its {taps:,} taps (an input position and a weight for each output position) would "
                      f"take about {format_size(taps * _TAP_BYTES)} to import, more than the memory budget of "
                      f"{format_size(budget)} ({source}; docs/limits.md)")


def _resized_axis(call: Call, x, axis: int, rank: int, kind: str, size: int, out: int, scale: float, last: bool):
    index, weight = axis_taps(call, kind, size, out, scale)
    hint = f"axis{axis}"
    if kind == "nearest":
        pick = index[np.arange(out), weight.argmax(axis=1)]
        return call.block("Gather", params=x, indices=call.const(pick), axis=call.const(axis, np.int32),
                          hint="" if last else hint, typed=0 if last else None)
    dtype = call.dtype(0)
    terms = []
    for j in range(index.shape[1]):
        if not weight[:, j].any():
            continue
        taken = call.block("Gather", params=x, indices=call.const(index[:, j]), axis=call.const(axis, np.int32),
                           hint=f"{hint}_tap{j}")
        w = weight[:, j].reshape([out] + [1] * (rank - axis - 1)).astype(dtype)
        terms.append(call.block("Multiply", x=taken, y=call.const(w), hint=f"{hint}_w{j}"))
    if len(terms) == 1:
        return call.block("Identity", input=terms[0], hint="" if last else hint, typed=0 if last else None)
    return call.block("AddN", inputs=terms, hint="" if last else hint, typed=0 if last else None)


def _plan(call: Call, shape: tuple) -> tuple:
    """(axes, output sizes, scales) as Resize's scales or sizes, axes and
    keep_aspect_ratio_policy decide them."""
    rank = len(shape)
    axes = call.axes(call.attr("axes", range(rank)), rank, f"{call.node.op}'s axes")
    scales = call.need_known(2, "Resize's scales") if call.has(2) else None
    sizes = call.need_known(3, "Resize's sizes") if call.has(3) else None
    if scales is not None and scales.size:
        if not (np.isfinite(scales) & (scales > 0)).all():
            raise Refused(f"its scales {scales.reshape(-1).tolist()} must be finite and positive")
        scale = [1.0] * rank
        for a, s in zip(axes, scales.reshape(-1).tolist()):
            scale[a] = float(np.float32(s))
        return axes, [int(math.floor(s * d)) for s, d in zip(scale, shape)], scale
    if sizes is None or not sizes.size:
        raise Unsupported("Resize with neither scales nor sizes")
    out = list(shape)
    for a, s in zip(axes, sizes.reshape(-1).tolist()):
        out[a] = int(s)
    scale = [o / d for o, d in zip(out, shape)]
    policy = call.attr("keep_aspect_ratio_policy", "stretch")
    if policy != "stretch":
        one = (min if policy == "not_larger" else max)(scale[a] for a in axes)
        scale = [one if a in axes else 1.0 for a in range(rank)]
        out = [int(one * d + 0.5) if a in axes else d for a, d in enumerate(shape)]
    return axes, out, scale


@maps("Resize", blocks="Gather (nearest); Gather, Multiply, AddN per tap (linear, cubic)",
      notes="nearest (every nearest_mode), linear and cubic (cubic_coeff_a, exclude_outside, antialias), "
            "every coordinate transformation but tf_crop_and_resize, scales or sizes (axes, "
            "keep_aspect_ratio_policy) known while importing, a static input shape; refused: "
            "tf_crop_and_resize; before opset 11, nearest with whole scales only")
def resize(call: Call):
    kind = call.attr("mode", "nearest")
    shape = call.static_shape(0, "Resize")
    if call.opset < 11:    # Resize-10: (X, scales), its coordinates those of Upsample
        return _upsample(call, call.need_known(1, "Resize's scales"), shape)
    if kind not in ("nearest", "linear", "cubic"):
        raise Unsupported(f"Resize mode {kind!r}")
    transform = call.attr("coordinate_transformation_mode", "half_pixel")
    if transform not in _TRANSFORMS:
        raise Unsupported(f"Resize with coordinate_transformation_mode {transform!r} (a region and an "
                          f"extrapolation value)")
    if kind != "nearest" and (call.dtype(0) is None or call.dtype(0).kind != "f"):
        raise Unsupported(f"Resize {kind} of {call.dtype(0)} (ONNX rounds back to integers)")
    axes, out, scale = _plan(call, shape)
    todo = [a for a in axes if not (math.isclose(scale[a], 1.0) and out[a] == shape[a])]
    if any(o <= 0 for o in out):
        raise Unsupported(f"Resize to an empty output {out}")
    _check_sizes(call, kind, shape, out, scale, todo)
    x = call.input(0)
    if not todo:
        return call.block("Identity", input=x, typed=0)
    for i, a in enumerate(todo):
        x = _resized_axis(call, x, a, len(shape), kind, shape[a], out[a], scale[a], i == len(todo) - 1)
    return x


@maps("Upsample", blocks="Gather", notes="nearest with whole scales (each entry repeated); refused: linear, "
      "other scales")
def upsample(call: Call):
    shape = call.static_shape(0, "Upsample")
    scales = call.need_known(1, "Upsample's scales") if call.opset >= 9 else np.asarray(call.attr("scales", ()))
    return _upsample(call, scales, shape)


def _upsample(call: Call, scales: np.ndarray, shape: tuple):
    """Nearest with whole scales: position i of an axis repeated s times copies i // s, which is
    where every coordinate transformation and rounding of the versions puts it."""
    s = [float(v) for v in np.asarray(scales).reshape(-1)]
    if not all(math.isfinite(v) and v > 0 for v in s):
        raise Refused(f"its scales {s} must be finite and positive")
    if call.attr("mode", "nearest") != "nearest" or len(s) != len(shape) or any(v < 1 or v != int(v) for v in s):
        raise Unsupported(f"{call.node.op} {call.attr('mode', 'nearest')} with scales {s}: only nearest with "
                          f"whole scales maps exactly")
    todo = [a for a, v in enumerate(s) if v != 1]
    _check_sizes(call, "nearest", shape, [d * int(v) for d, v in zip(shape, s)], s, todo)
    x = call.input(0)
    if not todo:
        return call.block("Identity", input=x, typed=0)
    for i, a in enumerate(todo):
        last = i == len(todo) - 1
        pick = np.arange(shape[a] * int(s[a])) // int(s[a])
        x = call.block("Gather", params=x, indices=call.const(pick), axis=call.const(a, np.int32),
                       hint="" if last else f"axis{a}", typed=0 if last else None)
    return x
