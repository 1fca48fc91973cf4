"""The ports of a composite block: Input and Output, drawn inside its diagram.

Each is the identity (its gradient passes straight through). An instance's wires arrive at its
Inputs and leave from its Outputs; the compiler binds the named dimensions of an Input's
``shape`` (``["batch", "features"]``) to the sizes the instance is fed, and checks them.

Imports only blockflow.spec and numpy.
"""
from __future__ import annotations

from blockflow.spec import Attr, Input, Output, ShapeError, TensorType, block

from .common import fmt_shape


def _declared(shape) -> str:
    return "[" + ", ".join(d if isinstance(d, str) else "-1" if d is None else str(d) for d in shape) + "]"


def _check_port(x, dtype, shape, what):
    """Raise ShapeError when ``x`` (a TensorType) does not fit a port's declared dtype and shape
    (dimension names fit any size here: the compiler checks that they agree)."""
    if dtype != "any" and x.dtype.name != dtype:
        raise ShapeError(f"{what} is declared {dtype} but is given {x.dtype.name}")
    if shape is None:
        return
    if len(shape) != x.rank:
        raise ShapeError(f"{what} is declared with shape {_declared(shape)} but is given "
                         f"{fmt_shape(x.shape)}")
    for want, got in zip(shape, x.shape):
        if isinstance(want, int) and got is not None and want != got:
            raise ShapeError(f"{what} is declared with shape {_declared(shape)} but is given "
                             f"{fmt_shape(x.shape)}")


_DTYPES = ("any", "float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool")


@block("Input", category="composite_ports")
class CompositeInput:
    """An input port of a composite block: its ``name``, ``dtype`` and ``shape`` are the port's.

    ``shape`` lists sizes (-1: open) or dimension names such as ``"batch"``; an instance binds
    each name to the size it is fed (the same name on two Inputs must get the same size), and the
    blocks inside may use the size as ``{"$dim": "batch"}``. Inside an instance, the wire into the
    instance's port feeds it; in a definition drawn on its own it stands for the value it will
    be given. Forward and backward it is the identity.
    """

    inputs = (Input("input", optional=True, doc="the instance's wire (unwired in the definition itself)"),)
    outputs = (Output("output"),)
    attrs = (
        Attr("name", "str", "x", doc="the port's name on the composite block"),
        Attr("dtype", "choice", "float32", choices=_DTYPES, doc="the port's dtype ('any': whatever is fed)"),
        Attr("shape", "dims", None, doc="sizes or dimension names; empty: any shape"),
        Attr("doc", "str", "", doc="what the port takes, shown in the composite's documentation"),
    )
    grad_rule = "dinput = g"

    def infer(x=None, *, name, dtype, shape, doc):
        if x is None:
            if shape is None:
                raise ShapeError(f"input '{name}' declares no shape, so it has no type until an "
                                 f"instance feeds it")
            return TensorType(tuple(None if isinstance(d, str) else d for d in shape),
                              "float32" if dtype == "any" else dtype)
        _check_port(x, dtype, shape, f"input '{name}'")
        return x

    def forward(x=None, *, name, dtype, shape, doc):
        if x is None:
            raise ShapeError(f"input '{name}' is fed only inside an instance of its composite")
        return x

    def vjp(g, out, x=None, *, name, dtype, shape, doc):
        return (g,)


@block("Output", category="composite_ports")
class CompositeOutput:
    """An output port of a composite block: what is wired into it is the port ``name``'s value.

    ``dtype`` and ``shape`` (optional: "any" and empty by default) declare what the port gives and
    are checked like an Input's; a dimension name here must have the size the Inputs bound it to.
    Forward and backward it is the identity.
    """

    inputs = (Input("input"),)
    outputs = (Output("output"),)
    attrs = (
        Attr("name", "str", "y", doc="the port's name on the composite block"),
        Attr("dtype", "choice", "any", choices=_DTYPES, doc="the port's dtype ('any': not checked)"),
        Attr("shape", "dims", None, doc="sizes or dimension names; empty: not checked"),
        Attr("doc", "str", "", doc="what the port gives, shown in the composite's documentation"),
    )
    grad_rule = "dinput = g"

    def infer(x, *, name, dtype, shape, doc):
        _check_port(x, dtype, shape, f"output '{name}'")
        return x

    def forward(x, *, name, dtype, shape, doc):
        return x

    def vjp(g, out, x, *, name, dtype, shape, doc):
        return (g,)
