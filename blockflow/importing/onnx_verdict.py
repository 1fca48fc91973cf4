"""What a compile error of an imported diagram says, in the words of the model: which ONNX node
its block was made for, and whether the model is at fault.

The import compiles the diagram it made. An error there is, in order: a block past the size of
one tensor (the model's sizes are past what blockflow holds); an attr value past the bounds its
block declares (a stride of 2^40: a value blockflow does not hold); a node whose inputs break
its op's type constraints, which onnx's strict shape inference does not check (MatMul of float32
and int64, Where on a float condition: the model is not valid ONNX); any other error on a node's
block, most likely a rule of the op that onnx's shape inference does not check either (a
BatchNormalization scale of the wrong length), said as such. Only an error on a block made for
no node (the import's own outputs and loss) is called a bug in the import outright.
"""
from __future__ import annotations

import re

from blockflow.importing.errors import ImportFailure
from blockflow.importing.onnx_read import OnnxModel, OnnxNode, cut_name
from blockflow.optional import need

__all__ = ["compile_failure", "type_clash"]

#: how the compile says a block's output is past the one-tensor limit (compile/inferred.py)
_PAST_LIMIT = re.compile(r"would be .*; the limit for one tensor is")
#: how it says an attr value is past its declared bounds (spec/attrs.py)
_ATTR_BOUND = re.compile(r"^attr '[^']+': (entry \d+ )?must be at (most|least) ")

#: ONNX's names of the element types a project holds (onnx.defs' "tensor(float)")
_ONNX_TYPE = {"float32": "float", "float64": "double", "float16": "float16", "int8": "int8",
              "int16": "int16", "int32": "int32", "int64": "int64", "uint8": "uint8", "bool": "bool"}


def compile_failure(program, model: OnnxModel, origin: dict, source: str) -> ImportFailure:
    """The ImportFailure for an imported diagram ``program`` that does not compile; ``origin``
    maps a block to the index of the ONNX node it was made for."""
    for d in program.errors:
        index = origin.get(d.node)
        if index is None:
            continue
        node = model.nodes[index]
        where = f"{source}: node '{node.label}' ({_op(node)})"
        block = f"its block '{d.node}'"     # the messages name their port themselves
        if _PAST_LIMIT.search(d.message):
            return ImportFailure(f"{where}: {block}: {d.message}")
        if _ATTR_BOUND.search(d.message):
            return ImportFailure(f"{where}: {block}: {d.message}, past what blockflow holds (docs/limits.md)")
        clash = type_clash(node, model.types, model.opset)
        if clash:
            return ImportFailure(f"{where}: the model is not valid ONNX: {clash}")
        return ImportFailure(f"{where}: {block}: {d.message}. onnx's shape inference does not check this "
                             f"for {_op(node)}, so the model most likely breaks the op's definition; if it "
                             f"does not, the import is at fault: please report it")
    errors = "; ".join(str(d) for d in program.errors[:5])
    return ImportFailure(f"{source}: the imported diagram does not compile (a bug in the import, please "
                         f"report it): {errors}")


def type_clash(node: OnnxNode, types: dict, opset: int) -> str:
    """Why ``node``'s inputs break its op's type constraints (ONNX's schema: a type an input may
    not have, two inputs of one type parameter of different types); "" when they do not, or
    when it cannot be told (an op without a schema, an input of unknown type)."""
    schema = _schema(node, opset)
    if schema is None or not schema.inputs:
        return ""
    allowed = {c.type_param_str: set(c.allowed_type_strs) for c in schema.type_constraints}
    formals, bound = schema.inputs, {}
    variadic = formals[-1].option == need("onnx").defs.OpSchema.FormalParameterOption.Variadic
    for i, name in enumerate(node.inputs):
        if not name or (i >= len(formals) and not variadic):
            continue
        formal = formals[min(i, len(formals) - 1)]
        info = types.get(name)
        dtype = info.dtype.name if info is not None and info.dtype is not None else None
        if dtype is None:
            continue
        param, shown = formal.type_str, f"input {i} '{cut_name(name, 60)}' ({formal.name})"
        may = allowed.get(param, {param})
        if any(t.startswith("tensor(") for t in may) and f"tensor({_ONNX_TYPE[dtype]})" not in may:
            kinds = ", ".join(sorted(t[7:-1] for t in may if t.startswith("tensor(")))
            return f"{shown} is {dtype}, which {_op(node)} does not take there ({param}: {kinds})"
        if param in allowed and formal.is_homogeneous:
            if param in bound and bound[param][1] != dtype:
                first, its = bound[param]
                return (f"{first} is {its} but {shown} is {dtype}; {_op(node)} takes one type for "
                        f"both ({param})")
            bound.setdefault(param, (shown, dtype))
    return ""


def _schema(node: OnnxNode, opset: int):
    if node.domain:
        return None
    try:
        return need("onnx").defs.get_schema(node.op, opset, "")
    except Exception:   # onnx's SchemaError: an op it does not know at that opset
        return None


def _op(node: OnnxNode) -> str:
    return node.op if not node.domain else f"{node.domain}:{node.op}"
