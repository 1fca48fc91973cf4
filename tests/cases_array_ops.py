"""Test cases for the array_ops blocks of issue 3 (shape manipulation, slicing, gathering, ...).

Same form as tests/cases_core.py: CASES ({block: [Case, ...]}) and NOT_DIFFERENTIABLE. Integer
and shape outputs take float64 or integer inputs here: test_blocks checks that float32 inputs give
float32 outputs, which does not apply to them.
"""
from __future__ import annotations

import numpy as np

from casekit import Case, f32, i32, ints


def _f64(*shape):
    return f32(*shape).astype(np.float64)


def _idx(values):
    return np.array(values, dtype=np.int32)


def _bools(*shape):
    return np.random.default_rng(sum(shape) + 3).random(shape) < 0.5


def _ss(x, begin, end, strides=None, id="", **masks):
    """A StridedSlice case."""
    return Case((x, ints(begin), ints(end), None if strides is None else ints(strides)), masks, id=id)


CASES: dict[str, list[Case]] = {
    "PreventGradient": [Case((f32(2, 3),), {"message": "no second derivative"}, grad=False)],
    "EnsureShape": [
        Case((f32(2, 3),), {"shape": [-1, 3]}, id="open-batch"),
        Case((f32(4),), {"shape": [4]}, id="known"),
    ],
    "IdentityN": [
        Case(([f32(2, 3), f32(4), f32()],), id="three"),
        Case(([i32(3), _f64(2)],), id="mixed-dtypes", grad=False),
    ],
    "ExpandDims": [
        Case((f32(2, 3), ints(0)), id="front"),
        Case((f32(2, 3), ints(1)), id="middle"),
        Case((f32(2, 3), ints(-1)), id="end"),
        Case((f32(2, 3), ints([-3])), id="negative-front"),
        Case((f32(), ints(0)), id="scalar"),
        Case((i32(4), ints(1)), id="int32", grad=False),
    ],
    "Squeeze": [  # without axis it needs known sizes: tests/test_array_ops.py covers that mode
        Case((f32(2, 1, 3),), {"axis": [1]}, id="one"),
        Case((f32(1, 3, 1),), {"axis": [-1, 0]}, id="two-negative"),
        Case((f32(1, 1),), {"axis": [0, 1]}, id="to-scalar"),
    ],
    "Concat": [
        Case(([f32(2, 3), f32(4, 3)], ints(0)), id="axis0"),
        Case(([f32(2, 3), f32(2, 1), f32(2, 2)], ints(1)), id="axis1-three"),
        Case(([f32(2, 3, 2), f32(2, 3, 4)], ints(-1)), id="negative"),
        Case(([f32(3, 2)], ints(0)), id="one"),
        Case(([f32(2, 0), f32(2, 3)], ints(1)), id="empty-piece"),
        Case(([i32(2), i32(3)], ints(0)), id="int32", grad=False),
    ],
    "Stack": [
        Case(([f32(2, 3), f32(2, 3)],), id="axis0"),
        Case(([f32(2, 3), f32(2, 3), f32(2, 3)],), {"axis": 1}, id="axis1"),
        Case(([f32(2, 3), f32(2, 3)],), {"axis": -1}, id="last"),
        Case(([f32(), f32(), f32()],), id="scalars"),
        Case(([i32(2), i32(2)],), id="int32", grad=False),
    ],
    "Unstack": [
        Case((f32(3, 4),), {"num": 3}, id="axis0"),
        Case((f32(2, 3, 4),), {"num": 3, "axis": 1}, id="axis1"),
        Case((f32(2, 3),), {"num": 3, "axis": -1}, id="last"),
        Case((f32(1, 5),), {"num": 1}, id="one"),
        Case((i32(2, 2),), {"num": 2}, id="int32", grad=False),
    ],
    "Split": [
        Case((ints(0), f32(6, 2)), {"num_split": 3}, id="axis0"),
        Case((ints(1), f32(2, 4, 3)), {"num_split": 2}, id="axis1"),
        Case((ints(-1), f32(2, 4)), {"num_split": 4}, id="last"),
        Case((ints(0), f32(3)), {"num_split": 1}, id="one"),
    ],
    "SplitV": [
        Case((f32(6, 2), ints([1, 2, 3]), ints(0)), {"num_split": 3}, id="sizes"),
        Case((f32(2, 5), ints([2, -1]), ints(-1)), {"num_split": 2}, id="minus-one"),
        Case((f32(4, 2), ints([0, 4]), ints(0)), {"num_split": 2}, id="empty-piece"),
    ],
    "Slice": [
        Case((f32(4, 5), ints([1, 2]), ints([2, 3])), id="block"),
        Case((f32(4, 5), ints([1, 0]), ints([-1, 2])), id="to-end"),
        Case((f32(2, 3, 4), ints([0, 1, 1]), ints([-1, -1, 2])), id="rank-3"),
        Case((f32(3), ints([3]), ints([0])), id="empty"),
        Case((f32(), ints([]), ints([])), id="scalar"),
    ],
    "StridedSlice": [
        _ss(f32(5, 6), [1, 0], [4, 6], [1, 2], id="basic"),
        _ss(f32(5, 6), [-1, 4], [0, 1], [-1, -2], id="negative-strides"),
        _ss(f32(5, 6), [1, 0], [3, 0], [1, 1], id="end-mask", end_mask=2),
        _ss(f32(5, 6), [3, 2], [0, 0], [1, 1], id="begin-and-end-masks", begin_mask=1, end_mask=3),
        _ss(f32(5, 6), [2], [3], id="shrink", shrink_axis_mask=1),
        _ss(f32(5, 6), [0, -1], [0, 0], [1, 1], id="shrink-negative", begin_mask=1, end_mask=1,
            shrink_axis_mask=2),
        _ss(f32(2, 3, 4), [0, 1], [0, 3], [1, 1], id="ellipsis-first", ellipsis_mask=1),
        _ss(f32(2, 3, 4), [1, 0, 0], [2, 0, 0], [1, 1, 1], id="ellipsis-middle-shrink",
            ellipsis_mask=2, shrink_axis_mask=1 | 4),
        _ss(f32(2, 3), [0, 0, 1], [0, 0, 3], [1, 1, 1], id="new-axis", new_axis_mask=2, begin_mask=1,
            end_mask=1),
        _ss(f32(2, 3), [0, 0, 0], [0, 0, 0], [1, 1, 1], id="new-axis-after-ellipsis", ellipsis_mask=1,
            new_axis_mask=4),
        _ss(f32(6), [-100], [100], [3], id="clamped"),
        _ss(f32(4, 3), [1], [3], id="implicit-trailing"),
        _ss(f32(4), [3], [1], [1], id="empty"),
        Case((i32(4, 3), ints([1]), ints([3]), None), id="int32", grad=False),
    ],
    "Gather": [
        Case((f32(5, 3), _idx([4, 0, 2]), None), id="rows"),
        Case((f32(5, 3), _idx([1, 1, 4, 1]), ints(0)), id="repeated"),
        Case((f32(2, 5, 3), _idx([[0, 4], [3, 3]]), ints(1)), id="axis1-matrix-indices"),
        Case((f32(2, 5), _idx(3), ints(-1)), id="scalar-index"),
        Case((f32(3, 4, 2), _idx([[0, 3, 3], [1, 1, 0], [2, 0, 2]]), ints(1)), {"batch_dims": 1},
             id="batch-dims"),
        Case((f32(3, 2, 4), np.array([[0, 3], [1, 1], [2, 2]], np.int64), ints(2)), {"batch_dims": 1},
             id="batch-dims-axis2"),
        Case((f32(3, 4), _idx([[1, 1], [0, 3], [2, 2]]), ints(1)), {"batch_dims": -1}, id="batch-dims-neg"),
        Case((f32(4), _idx([]), None), id="no-indices"),
        Case((i32(5), _idx([1, 2]), None), id="int32", grad=False),
    ],
    "GatherNd": [
        Case((f32(3, 4), _idx([[0, 1], [2, 3], [0, 1]])), id="entries-repeated"),
        Case((f32(3, 4, 2), _idx([[2], [0]])), id="rows"),
        Case((f32(3, 4), _idx([[[1, 1]], [[2, 0]]])), id="batched-indices"),
        Case((f32(3, 2), _idx([1, 0])), id="one-vector"),
        Case((f32(2, 3), np.zeros((2, 0), np.int64)), id="empty-vectors"),
    ],
    "ScatterNd": [
        Case((_idx([[0, 1], [2, 3], [0, 1]]), f32(3), ints([3, 4])), id="entries-repeated"),
        Case((_idx([[2], [0]]), f32(2, 4), ints([3, 4])), id="rows"),
        Case((_idx([[1, 1], [0, 0]]), i32(2), ints([2, 2])), id="int32", grad=False),
    ],
    "Tile": [
        Case((f32(2, 3), ints([2, 1])), id="rows"),
        Case((f32(2, 3), ints([3, 2])), id="both"),
        Case((f32(2, 1, 3), ints([1, 4, 1])), id="size-1-axis"),
        Case((f32(2, 3), ints([1, 1])), id="ones"),
        Case((f32(2), ints([0])), id="zero"),
        Case((i32(2), ints([2])), id="int32", grad=False),
    ],
    "Pad": [
        Case((f32(2, 3), ints([[1, 0], [2, 1]])), id="zeros"),
        Case((f32(2, 3), ints([[0, 0], [1, 1]])), {"constant_values": -1.5}, id="constant"),
        Case((f32(), ints(np.zeros((0, 2), np.int64))), id="scalar"),
        Case((i32(3), ints([[1, 1]])), {"constant_values": 7.0}, id="int32", grad=False),
    ],
    "MirrorPad": [
        Case((f32(3, 4), ints([[2, 1], [0, 3]])), id="reflect"),
        Case((f32(3, 4), ints([[3, 1], [4, 2]])), {"mode": "SYMMETRIC"}, id="symmetric-full"),
        Case((f32(2, 3, 2), ints([[1, 1], [2, 2], [0, 1]])), id="reflect-rank-3"),
        Case((f32(5), ints([[0, 0]])), {"mode": "SYMMETRIC"}, id="none"),
    ],
    "Reverse": [
        Case((f32(2, 3), ints([1])), id="axis1"),
        Case((f32(2, 3, 4), ints([0, -1])), id="two"),
        Case((f32(2, 3), ints([])), id="none"),
    ],
    "OneHot": [
        Case((_idx([0, 2, 1, 5, -1]), ints(3), np.float32(1), np.float32(0)), id="vector", grad=False),
        Case((_idx([[0, 2], [1, 1]]), ints(3), np.float32(5), np.float32(-1)), {"axis": 0}, id="axis0",
             grad=False),
        Case((_idx([[0, 2], [1, 1]]), ints(4), np.int32(1), np.int32(0)), {"axis": 1}, id="int-middle",
             grad=False),
        Case((_idx(2), ints(4), np.float64(1), np.float64(0)), id="scalar-index", grad=False),
    ],
    "Fill": [
        Case((ints([2, 3]), f32()), id="matrix"),
        Case((ints([]), f32()), id="scalar"),
        Case((ints([4]), np.int32(7)), id="int32", grad=False),
    ],
    "ZerosLike": [Case((f32(2, 3),), grad=False), Case((i32(4),), id="int32", grad=False)],
    "OnesLike": [Case((f32(2, 3),), grad=False), Case((_bools(3),), id="bool", grad=False)],
    "BroadcastTo": [
        Case((f32(3), ints([2, 3])), id="leading"),
        Case((f32(2, 1), ints([2, 4])), id="size-1"),
        Case((f32(), ints([2, 2])), id="scalar"),
        Case((f32(1, 3, 1), ints([4, 2, 3, 5])), id="both"),
        Case((f32(2, 3), ints([2, 3])), id="same"),
    ],
    "Shape": [Case((_f64(2, 3),), grad=False), Case((i32(4),), {"out_type": "int64"}, id="int64", grad=False),
              Case((_f64(),), id="scalar", grad=False)],
    "ShapeN": [Case(([_f64(2, 3), i32(4)],), grad=False)],
    "Size": [Case((_f64(2, 3),), grad=False), Case((i32(4),), {"out_type": "int64"}, id="int64", grad=False)],
    "Rank": [Case((_f64(2, 3),), grad=False), Case((_f64(),), id="scalar", grad=False)],
    "Select": [
        Case((_bools(2, 3), f32(2, 3), f32(2, 3)), id="same"),
        Case((_bools(2, 1), f32(2, 3), f32(3)), id="broadcast-all"),
        Case((_bools(3), f32(2, 1), f32()), id="condition-widest"),
        Case((np.array(True), f32(2), f32(2)), id="scalar-condition"),
        Case((_bools(4), i32(4), i32(4)), id="int32", grad=False),
    ],
    "Where": [Case((_bools(3, 4),), grad=False), Case((i32(5),), id="numbers", grad=False)],
    "Diag": [Case((f32(3),), id="vector"), Case((f32(2, 3),), id="matrix"), Case((f32(),), id="scalar")],
    "DiagPart": [Case((f32(3, 3),), id="matrix"), Case((f32(2, 3, 2, 3),), id="rank-4")],
}

NOT_DIFFERENTIABLE = {
    "PreventGradient": "prevent", "OneHot": "none", "ZerosLike": "none", "OnesLike": "none",
    "Shape": "none", "ShapeN": "none", "Size": "none", "Rank": "none", "Where": "none",
}

# Where's row count depends on the data: infer leaves it unknown.
OPEN_SHAPES = {"Where"}
# The length of an index vector fixes the result's rank, so it must be known.
KEEP_KNOWN = {"GatherNd": {"indices": [-1]}, "ScatterNd": {"indices": [-1]}}
