"""Checks of what a block's ``infer`` returned (infer.py calls them): the right number and kind of
types, no output bigger than one tensor may be, a Variable's declared shape; and what those
types depend on (``memo_key``)."""
from __future__ import annotations

from blockflow.spec import MAX_TENSOR_BYTES, TensorType, shape_text

__all__ = ["check_infer_result", "declared_shape_mismatch", "memo_key", "too_big"]


def check_infer_result(spec, outs, attrs, args) -> str | None:
    """What is wrong with the types a block's infer returned, or None."""
    if len(outs) != len(spec.outputs):
        return f"expected {len(spec.outputs)} output type(s)"
    for decl, t in zip(spec.outputs, outs):
        if not decl.variadic:
            if not isinstance(t, TensorType):
                return f"output '{decl.name}' is not a TensorType"
            continue
        if decl.count in attrs:
            want = attrs[decl.count]
        else:
            pos = next(i for i, p in enumerate(spec.inputs) if p.name == decl.count)
            want = len(args[pos])
        if not isinstance(t, list) or len(t) != want or not all(isinstance(x, TensorType) for x in t):
            return f"output list '{decl.name}' must be a list of {want} TensorType(s)"
    return None


# MAX_TENSOR_BYTES (from the block API, which checks intermediates against it too) bounds the
# inferred size of every output: a Variable's first value, a Fill, a dataset are refused at
# compile time, before anything is allocated.
def too_big(spec, outs):
    """(port, message) for the first output whose known size exceeds MAX_TENSOR_BYTES."""
    for decl, t in zip(spec.outputs, outs):
        for i, tt in enumerate(t if decl.variadic else (t,)):
            n = tt.size
            if n is None:
                continue
            nbytes = n * tt.dtype.itemsize
            if nbytes > MAX_TENSOR_BYTES:
                port = decl.port(i) if decl.variadic else decl.name
                return port, (f"output '{port}' would be {tt} ({_gib(nbytes)}); the limit "
                              f"for one tensor is {MAX_TENSOR_BYTES / 1024 ** 3:.0f} GiB")
    return None


def _gib(nbytes: int) -> str:
    """A size in GiB for a message; sizes are exact ints (a parameter may be 10**400), which
    a float division cannot take beyond 1.8e308."""
    gib = nbytes // 1024 ** 3
    if gib < 10 ** 18:
        return f"{nbytes / 1024 ** 3:,.1f} GiB"
    return f"about 10^{len(str(gib)) - 1} GiB"


def memo_key(spec, attrs, args):
    """What a block's inferred types depend on, when it can be a dict key: the spec, its attrs
    dict (by identity: the dicts are alive and unchanged while the compile runs) and the input
    types without known values. None when an input is a static value, a constant or its infer
    reads files."""
    if spec.infer_context:
        return None
    parts = []
    for a in args:
        if a is None:
            parts.append(None)
        elif type(a) is TensorType:
            if a.value is not None:
                return None
            parts.append((a.shape, a.dtype))
        elif type(a) is list and all(type(t) is TensorType and t.value is None for t in a):
            parts.append(tuple((t.shape, t.dtype) for t in a))
        else:
            return None
    return spec, id(attrs), tuple(parts)


def declared_shape_mismatch(node, spec, attrs, out) -> str | None:
    """A Variable whose ``shape`` attr is given must have that shape, whatever its initial
    value says (its initializer would otherwise decide the shape silently)."""
    if "shape" not in node.attrs or "shape" not in spec.attr_map:
        return None
    declared = attrs["shape"]
    if len(declared) == len(out.shape) and all(d is None or d == n for d, n in zip(declared, out.shape)):
        return None
    return f"its initial value is {out} but its shape attr says {shape_text(declared)}"
