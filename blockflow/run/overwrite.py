"""Which arrays a plan may write into: the large elementwise outputs it keeps across runs, and the
values an elementwise step may overwrite with its own result (run/lower.py writes the code).

Both are decided from the program alone, before a run, and must be exact: an array is written
into only when no block, vjp, fetch or caller can still read what it held, and no array the
caller gets back is one the plan keeps. A block says what its vjp reads (``vjp.reads``: the
names of the arguments whose values it reads, ``out`` or input ports; without it, everything)
and whether its results are new arrays (``forward.fresh_result``, ``vjp.fresh_result``). A vjp
that reads nothing (``vjp.reads = ()``) must depend on nothing but its cotangent and its
arguments' shapes and dtypes: run/fold.py computes it once when its cotangents are constants.

Imports nothing of blockflow but compile.program.
"""
from __future__ import annotations

import math

import numpy as np

from blockflow.compile.program import Program, Step

__all__ = ["bound_ufunc", "in_place_slots", "product_sums", "reusable_slots"]


def bound_ufunc(st: Step, bind: bool) -> bool:
    """Whether the plan calls this step's ufunc itself (see lower._Writer._bind_forward): its
    result is a new array, or the array handed as ``out=``."""
    return (bind and getattr(st.spec.forward, "ufunc", None) is not None and not st.attrs
            and not st.spec.forward_context and not st.refs)


def writes_out(st: Step, bind: bool) -> bool:
    """Whether the plan may hand this step an ``out=`` array for its one result: a bound ufunc,
    or a block whose forward has a variant taking ``out`` (``forward.with_out``: Relu,
    np.maximum against a zero it picks by dtype; lower._Writer._block_call calls it)."""
    if bound_ufunc(st, bind):
        return True
    return (getattr(st.spec.forward, "with_out", None) is not None and not st.attrs
            and not st.spec.forward_context and not st.refs)


def makes_new_array(st: Step, bind: bool) -> bool:
    """Whether the step's result is an array the plan made for it (never a Variable, a feed, a
    constant, state or a view): a step written with ``out=``, or one bound to a numpy function
    that returns a new array (lower._Writer._bind_forward: MatMul without transposes)."""
    if writes_out(st, bind):
        return True
    direct = getattr(st.spec.forward, "direct", None)
    return (bind and direct is not None and not st.spec.forward_context and not st.refs
            and direct(st.attrs) is not None)


def _fresh_reader(st: Step, bind: bool) -> bool:
    """A reader whose results are new arrays, never a view of what it read."""
    return bound_ufunc(st, bind) or getattr(st.spec.forward, "fresh_result", False)


def _readers(program: Program) -> dict:
    """{slot: [(step, input port name), ...]} over every step of the program."""
    readers: dict[int, list] = {}
    for st in program.steps:
        for j, (pos, _, _) in enumerate(st.in_edges):
            readers.setdefault(st.flat_input(j), []).append((st, st.spec.inputs[pos].name))
    return readers


def _vjp_reads(spec, name: str) -> bool:
    """Whether the block's vjp (if it has one) may read the value passed as ``name``."""
    if spec.gradient != "vjp" or spec.vjp is None:
        return False
    reads = getattr(spec.vjp, "reads", None)
    return reads is None or name in reads


def product_sums(program: Program, fwd, returned: set, *, bind: bool, min_size: int) -> dict:
    """{Sum step index: Multiply step} for a product that only a sum over every value reads: the
    sum is computed from the product's factors (``forward.of_product``, a piece at a time, bit
    for bit the sum of the product), and the product is never written out.

    The product qualifies when its step is a bound np.multiply of two values of its own fixed
    shape and dtype (no broadcast), of at least ``min_size`` values, the sum (unwired axis) is its
    only reader, the run does not return it, and neither vjp reads its value (Multiply's reads its
    factors, Sum's its shape): the product's name then holds a factor, for its shape.
    """
    slots = program.slots
    order = {st.index for st in fwd}
    producer = {o: st for st in program.steps for o in st.outputs}
    readers = _readers(program)
    out: dict[int, Step] = {}
    for st in fwd:
        of_product = getattr(st.spec.forward, "of_product", None)
        if (of_product is None or len(st.outputs) != 1 or len(st.in_edges) != 1
                or any(src is not None for src in st.inputs[1:]) or any(v is not None for v in st.static[1:])):
            continue
        o = st.flat_input(0)
        m = producer.get(o)
        t = slots[o].type
        if (m is None or m.index not in order or not bound_ufunc(m, bind) or m.spec.forward.ufunc is not np.multiply
                or len(m.outputs) != 1 or len(m.in_edges) != 2 or o in returned or slots[o].state
                or None in t.shape or math.prod(t.shape) < min_size
                or [r for r, _ in readers.get(o, ())] != [st] or _vjp_reads(m.spec, "out")
                or _vjp_reads(st.spec, st.spec.inputs[0].name)):
            continue
        if all(slots[m.flat_input(j)].type.shape == t.shape and slots[m.flat_input(j)].type.dtype == t.dtype
               for j in range(2)):
            out[st.index] = m
    return out


def in_place_slots(program: Program, fwd, returned: set, *, bind: bool, min_size: int, fused=()) -> dict:
    """{output slot: input slot} for the elementwise steps that may write their result into an
    input's array (``out=`` that input): forward, a chain ``exp(x - m)`` makes one array, not two.

    The writing step is a bound ufunc or a forward that takes ``out`` (writes_out). The input
    qualifies when its array is a new one the plan made (makes_new_array), of the output's fixed shape and
    dtype and at least ``min_size`` values; the run does not return it; every other block that
    reads it runs before and makes new arrays of it (so no view of it is left), and no vjp
    reads its value (neither its own step's vjp as ``out``, nor any reader's as an input).
    Neither the factors of a product a sum reads (``fused``, from product_sums: the sum reads
    them later) nor the product itself (it holds a factor) are written into.
    """
    slots = program.slots
    untouchable = set()
    for m in fused:
        untouchable.update(m.flat_input(j) for j in range(len(m.in_edges)))
        untouchable.update(m.outputs)
    order = {st.index: k for k, st in enumerate(fwd)}
    producer = {o: st for st in program.steps for o in st.outputs}
    readers = _readers(program)
    out: dict[int, int] = {}
    for st in fwd:
        if not writes_out(st, bind) or len(st.outputs) != 1 or st.outputs[0] in untouchable:
            continue
        t = slots[st.outputs[0]].type
        if None in t.shape or math.prod(t.shape) < min_size:
            continue
        here = order[st.index]
        for j in range(len(st.in_edges)):
            s = st.flat_input(j)
            src = slots[s]
            p = producer.get(s)
            if (src.const or src.state or s in returned or s in untouchable
                    or src.type.shape != t.shape or src.type.dtype != t.dtype
                    or p is None or p.index not in order or not makes_new_array(p, bind) or len(p.outputs) != 1
                    or _vjp_reads(p.spec, "out")):
                continue
            if all(not _vjp_reads(r.spec, port)
                   and (r is st or r.index not in order or (order[r.index] < here and _fresh_reader(r, bind)))
                   for r, port in readers.get(s, ())):
                out[st.outputs[0]] = s
                break
    return out


def reusable_slots(program: Program, fwd, returned: set, in_place: dict, *, bind: bool, min_size: int,
                   max_bytes: int, nbytes, fused=()) -> set:
    """The slots whose arrays a plan can keep and overwrite in the next run.

    A value qualifies when its step's forward is a bound ufunc (it can write into ``out=``), its
    shape is fixed and large, the run does not return it, and no block can hand it on: every
    block reading it (forward, and its vjp) is a bound ufunc or a block whose forward says
    ``fresh_result`` (Sum, Mean), whose results and gradients are new arrays (or the cotangent),
    never a view of an input. So no array the caller gets back, now or later, is a kept buffer.
    A value written into another's array (``in_place``) is not kept itself, and a kept array
    must qualify for every value written into it; a product never written out (``fused``) has no
    array.
    """
    slots = program.slots
    unmade = {o for m in fused for o in m.outputs}
    readers = _readers(program)
    into = {s: o for o, s in in_place.items()}  # the value that takes over each array

    def qualifies(o):
        return o not in returned and not slots[o].state and all(_fresh_reader(r, bind) for r, _ in readers.get(o, ()))

    out, total = set(), 0
    for st in fwd:
        if not bound_ufunc(st, bind) or len(st.outputs) != 1 or st.outputs[0] in in_place or st.outputs[0] in unmade:
            continue
        o = st.outputs[0]
        t = slots[o].type
        if None in t.shape or math.prod(t.shape) < min_size:
            continue
        chain = [o]
        while chain[-1] in into:
            chain.append(into[chain[-1]])
        if not all(qualifies(c) for c in chain):
            continue
        total += nbytes(t)
        if total > max_bytes:
            break
        out.add(o)
    return out
