"""A small elementwise step's gradients written into the plan as ufunc calls, from its block's
``vjp.inline`` template (blockflow/spec/inline.py), instead of a call of its vjp (lower.py,
INLINE_VJPS). The same ufuncs on the same operands: the same bits.

Why: on a tensor of a few values a vjp's frame, its checks and its result tuple cost more than
its arithmetic. A chain of 1,000 ops on 8 values ran its backward ~23 % faster this way
(benchmarks/README.md, "Eighteenth session").

Must not import PySide6 or the block library.
"""
from __future__ import annotations

import math

import numpy as np

from blockflow.spec.inline import ONE_OF_OUTPUT, template_problem

__all__ = ["inline_vjp"]

#: specs whose template was checked: {spec: whether it may be used}
_USABLE: dict = {}


def inline_vjp(w, st, gp: str, needs_flat, max_size: int):
    """(the expression of the vjp's result tuple, the names it reads) for step ``st`` written
    inline, or None when its vjp must be called: no template, a template for an input that
    needs a cotangent but is not of the output's shape, an input list, attrs, a random vjp, an
    open or large shape (``max_size`` elements and the block's own ``inline_below``), a Gradients
    block's backward whose cotangents may not have their slots' shapes (_seeds_fit)."""
    spec = st.spec
    vjp = spec.vjp
    table = getattr(vjp, "inline", None)
    if table is None or st.attrs or "rng" in spec.vjp_context or len(st.outputs) != 1 or not _seeds_fit(w, gp):
        return None
    usable = _USABLE.get(spec)
    if usable is None:
        usable = _USABLE[spec] = template_problem(spec) is None
    o = st.outputs[0]
    t = w.slots[o].type
    if not usable or None in t.shape or math.prod(t.shape) >= min(max_size, getattr(vjp, "inline_below", max_size)):
        return None
    if any(src is None or isinstance(src, tuple) for src in st.inputs):
        return None
    args, reads = w.call_args(st)
    values = {"g": f"{gp}{o}", "out": f"s{o}"}
    values.update((d.name, a) for d, a in zip(spec.inputs, args))
    one = np.dtype(t.dtype).type(1)
    items = []
    for pos, (decl, src) in enumerate(zip(spec.inputs, st.inputs)):
        if not needs_flat[pos]:
            items.append("None")
            continue
        template = table.get(decl.name)
        if template is None or w.slots[src].type.shape != t.shape:
            return None
        items.append(_code(w, template, values, one, st.index))
    reads = reads | {values["g"], values["out"]}
    return "(" + ", ".join(items) + ",)", reads


def _seeds_fit(w, gp: str) -> bool:
    """Whether the cotangents under prefix ``gp`` have their slots' shapes, as a template takes
    for granted (Add's hands ``g`` on where its vjp's unbroadcast refuses a cotangent of another
    shape): the run's own (its seed is checked against the target), or a Gradients block's
    (prefix ``h{index}_``) seeded with ones or with ``grad_ys`` of its ``ys``' fixed shapes. A
    ``grad_ys`` of an open size is not checked when the run gives it another."""
    if gp == "g":
        return True
    st = w.program.steps[int(gp[1:-1])]
    seeds = st.inputs[2] if len(st.inputs) > 2 and st.inputs[2] else ()
    slots = w.slots
    return all(None not in slots[y].type.shape and slots[s].type.shape == slots[y].type.shape
               for y, s in zip(st.inputs[0], seeds))


def _code(w, template, values: dict, one, index: int) -> str:
    """Python for a template: ufuncs and constants bound in the plan's namespace under names of
    their own (no text of a block or a project enters the code), values by their locals."""
    if isinstance(template, str):
        return values[template]
    if isinstance(template, tuple):
        fn = _bind(w, template[0], index)
        return f"{fn}(" + ", ".join(_code(w, a, values, one, index) for a in template[1:]) + ")"
    return _bind(w, one if template is ONE_OF_OUTPUT else template, index)


def _bind(w, value, index: int) -> str:
    name = f"i{index}_{len(w.ns)}"
    w.ns[name] = value
    return name
