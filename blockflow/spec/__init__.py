"""The block declaration API: ports, attrs, tensor types and the @block decorator.

Block packages import only this package (``blockflow.spec``) and numpy; it imports nothing else of
blockflow. Its modules, each one job: tensors (TensorType, the shape rules, fit_dtype), ports
(Input, Output and their lists), attrs (Attr and the table of attr kinds), memory (the
allocation limits blocks announce arrays against), declare (BlockSpec and ``@block``), inline (a
vjp's gradients as ufunc templates the runtime may write inline).
"""
from blockflow.spec.attrs import ATTR_KINDS, Attr, AttrError, AttrKind, UnknownAttrError
from blockflow.spec.inline import ONE_OF_OUTPUT
from blockflow.spec.declare import CONTEXT_PARAMS, FORWARD_CONTEXT, INFER_CONTEXT, BlockSpec, block
from blockflow.spec.memory import MAX_TENSOR_BYTES, AllocationError, allocation_guard, reserve
from blockflow.spec.ports import SCOPE_PORT, BlockDeclarationError, Input, InputList, Output, OutputList
from blockflow.spec.tensors import (DTYPE_CLASSES, DTYPE_NAMES, FLOAT_DTYPES, INT_DTYPES, ShapeError,
                                    TensorType, broadcast_shapes, fit_dtype, normalize_axis, reduce_shape,
                                    shape_text, unbroadcast)

__all__ = [
    "Attr", "BlockSpec", "BlockDeclarationError", "Input", "InputList", "Output", "OutputList",
    "ShapeError",
    "TensorType", "AttrError", "block", "broadcast_shapes", "unbroadcast", "normalize_axis",
    "reduce_shape", "DTYPE_NAMES", "FLOAT_DTYPES", "SCOPE_PORT",
    "MAX_TENSOR_BYTES", "AllocationError", "reserve", "allocation_guard",
    "fit_dtype", "shape_text", "ATTR_KINDS", "AttrKind", "UnknownAttrError", "ONE_OF_OUTPUT",
]
