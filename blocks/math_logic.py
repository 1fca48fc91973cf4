"""math_ops, comparisons and logic, with bool outputs and not differentiable: Equal, NotEqual,
Greater, GreaterEqual, Less, LessEqual, LogicalAnd, LogicalOr, LogicalNot.

Imports only blockflow.spec and numpy.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from blockflow.spec import Input, Output, ShapeError, TensorType, block, broadcast_shapes

from .common import BOOL, declare, like


# The factories below declare their blocks as math_ops, from this module (their source).
_declare = partial(declare, category="math_ops", module=__name__)


def _compare_infer(op, x, y, ordered=True):
    if x.dtype != y.dtype:
        raise ShapeError(f"{op} needs inputs of one dtype, got {x.dtype.name} and {y.dtype.name}")
    if ordered and x.dtype.kind == "b":
        raise ShapeError(f"{op} does not take bool tensors")
    return TensorType(broadcast_shapes(x.shape, y.shape), BOOL)


def _comparison(name, ufunc, symbol, note="", ordered=True):
    """``x <symbol> y`` elementwise as a bool tensor; ``ordered`` comparisons refuse bool inputs."""
    def infer(x, y):
        return _compare_infer(name, x, y, ordered)

    def forward(x, y):
        return ufunc(x, y)

    doc = f"""
        Elementwise ``x {symbol} y`` as a bool tensor, with numpy broadcasting.

        {note}Not differentiable (bool output).
        """
    return _declare(name, doc, inputs=(Input("x"), Input("y")), outputs=(Output("z", differentiable=False),),
                    infer=infer, forward=forward)


Equal = _comparison("Equal", np.equal, "==", "``nan`` equals nothing, itself included. ", ordered=False)


NotEqual = _comparison("NotEqual", np.not_equal, "!=", "``nan`` differs from everything, itself included. ",
                       ordered=False)


Greater = _comparison("Greater", np.greater, ">")


GreaterEqual = _comparison("GreaterEqual", np.greater_equal, ">=")


Less = _comparison("Less", np.less, "<")


LessEqual = _comparison("LessEqual", np.less_equal, "<=")


def _logical_infer(op, *types):
    for t in types:
        if t.dtype.kind != "b":
            raise ShapeError(f"{op} takes bool tensors, got {t.dtype.name}")
    if len(types) == 1:
        return like(types[0])
    return TensorType(broadcast_shapes(types[0].shape, types[1].shape), BOOL)


def _logical(name, ufunc, word):
    """``x <word> y`` of bool tensors, elementwise."""
    def infer(x, y):
        return _logical_infer(name, x, y)

    def forward(x, y):
        return ufunc(x, y)

    doc = f"Elementwise ``x {word} y`` of bool tensors, with numpy broadcasting. Not differentiable."
    return _declare(name, doc, inputs=(Input("x", dtype="bool"), Input("y", dtype="bool")),
                    outputs=(Output("z", differentiable=False),), infer=infer, forward=forward)


LogicalAnd = _logical("LogicalAnd", np.logical_and, "AND")


LogicalOr = _logical("LogicalOr", np.logical_or, "OR")


@block("LogicalNot", category="math_ops")
class LogicalNot:
    """Elementwise ``NOT x`` of a bool tensor. Not differentiable."""

    inputs = (Input("x", dtype="bool"),)
    outputs = (Output("y", differentiable=False),)

    def infer(x):
        return _logical_infer("LogicalNot", x)

    def forward(x):
        return np.logical_not(x)
