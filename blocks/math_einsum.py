"""math_ops, Einstein summation: Einsum of one or two tensors, with ``...`` broadcasting.

Imports only blockflow.spec and numpy.
"""
from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

import numpy as np

from blockflow.spec import Attr, InputList, Output, ShapeError, TensorType, block, broadcast_shapes, reserve

from .common import check_arithmetic, fmt_shape

_ELLIPSIS = "..."


class _Term(NamedTuple):
    """One operand's (or the output's) subscripts: its letters in order, and where ``...`` stands
    among them (None: no ``...``)."""

    letters: str
    ellipsis: int | None

    def text(self) -> str:
        if self.ellipsis is None:
            return self.letters
        return self.letters[:self.ellipsis] + _ELLIPSIS + self.letters[self.ellipsis:]


class _Equation(NamedTuple):
    operands: tuple[_Term, ...]
    output: _Term

    def text(self) -> str:
        return ",".join(t.text() for t in self.operands) + "->" + self.output.text()


@block("Einsum", category="math_ops", aliases=("einsum",))
class Einsum:
    """Einstein summation of one or two tensors as ``equation`` says, like ``tf.einsum``.

    ``equation`` names each axis of each input with a letter (``"ij,jk->ik"`` is a matrix
    product, ``"ij->ji"`` a transpose, ``"ij->"`` a sum, ``"bi,bi->b"`` row-wise dot products);
    a letter shared by the inputs must have one size, and letters missing from the output are
    summed over. ``...`` stands for the leading (or middle) axes an input has beyond its
    letters; those of the two inputs broadcast as numpy's do and the output must keep them.
    Without ``->`` the output is implicit, as in numpy and TensorFlow: the ``...`` axes, then the
    letters used exactly once, in alphabetical order. A letter may appear only once per input
    (no diagonals or traces). The gradient of each input is an einsum of ``g`` with the other
    input, summed over the ``...`` axes it was broadcast along, and repeated along its letters
    that were summed away on their own.
    """

    inputs = (InputList("inputs", doc="one or two tensors of one dtype"),)
    outputs = (Output("output"),)
    attrs = (Attr("equation", "str", "ij,jk->ik", doc="subscripts, e.g. 'ij,jk->ik', 'bi,bi->b', '...ij->...ji'"),)
    grad_rule = """
        dinputs[0] = unbroadcast(einsum('out,in1->in0', g, inputs[1])), repeated along in0's own letters
        dinputs[1] = unbroadcast(einsum('out,in0->in1', g, inputs[0])), likewise
        with one input: dinputs[0] = g with its axes in in0's order, repeated along in0's own letters
        own letters: those in neither the output nor the other input (summed away in the forward pass)
        unbroadcast: summed over the ... axes that were broadcast
        """

    def infer(inputs, *, equation):
        check_arithmetic("Einsum", *inputs)
        eq = _parse(equation, len(inputs))
        return TensorType(_output_shape(eq, [t.shape for t in inputs]), inputs[0].dtype)

    def forward(inputs, *, equation):
        eq = _parse(equation, len(inputs))
        _output_shape(eq, [x.shape for x in inputs])  # sizes unknown when compiling are checked here
        return np.einsum(eq.text(), *inputs, optimize=len(inputs) == 2)

    def vjp(g, out, inputs, *, equation, needs):
        eq = _parse(equation, len(inputs))
        cts = []
        for i, need in enumerate(needs[0]):
            cts.append(_operand_gradient(eq, g, inputs, i) if need else None)
        return (cts,)


# --------------------------------------------------------------------------------------------
# The equation


@lru_cache(maxsize=256)
def _parse(equation: str, count: int) -> _Equation:
    """``equation`` for ``count`` inputs, the output made explicit; ShapeError saying what is wrong."""
    eq = equation.replace(" ", "")
    if not eq:
        raise ShapeError("Einsum: the equation is empty")
    bad = sorted(set(eq) - set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ,->."))
    if bad:
        raise ShapeError(f"Einsum: equation {equation!r} has {''.join(bad)!r}; subscripts are letters a-z, A-Z "
                         f"and '...'")
    if eq.count("->") > 1 or eq.replace("->", "").count("-") or eq.replace("->", "").count(">"):
        raise ShapeError(f"Einsum: equation {equation!r} must have at most one '->', between the inputs and the output")
    lhs, arrow, rhs = eq.partition("->")
    parts = lhs.split(",")
    if len(parts) != count:
        raise ShapeError(f"Einsum: equation {equation!r} names {len(parts)} input(s) but {count} are wired "
                         f"(Einsum takes one or two)")
    if count > 2:
        raise ShapeError(f"Einsum takes one or two inputs, got {count}")
    operands = tuple(_term(equation, p, f"inputs[{i}]") for i, p in enumerate(parts))
    for i, t in enumerate(operands):
        twice = sorted({c for c in t.letters if t.letters.count(c) > 1})
        if twice:
            raise ShapeError(f"Einsum: equation {equation!r} repeats {''.join(twice)!r} in inputs[{i}]; a letter "
                             f"may appear once per input (diagonals and traces are not supported)")
    has_ellipsis = any(t.ellipsis is not None for t in operands)
    if arrow:
        output = _term(equation, rhs, "the output")
        twice = sorted({c for c in output.letters if output.letters.count(c) > 1})
        if twice:
            raise ShapeError(f"Einsum: equation {equation!r} repeats {''.join(twice)!r} in the output")
        strangers = sorted(set(output.letters) - set("".join(t.letters for t in operands)))
        if strangers:
            raise ShapeError(f"Einsum: the output of {equation!r} has {''.join(strangers)!r}, which no input has")
        if output.ellipsis is not None and not has_ellipsis:
            raise ShapeError(f"Einsum: the output of {equation!r} has '...' but no input has")
        if has_ellipsis and output.ellipsis is None:
            raise ShapeError(f"Einsum: the output of {equation!r} must keep the '...' of the inputs")
    else:
        used = "".join(t.letters for t in operands)
        once = "".join(sorted(c for c in set(used) if used.count(c) == 1))
        output = _Term(once, 0 if has_ellipsis else None)
    return _Equation(operands, output)


def _term(equation, text, where) -> _Term:
    """The letters of one comma- or arrow-separated part of ``equation``."""
    if text.count(".") != (3 if _ELLIPSIS in text else 0) or text.count(_ELLIPSIS) > 1:
        raise ShapeError(f"Einsum: {where} of equation {equation!r} ({text!r}) may have one '...' and no other dots")
    before, found, after = text.partition(_ELLIPSIS)
    return _Term(before + after, len(before) if found else None)


def _output_shape(eq: _Equation, shapes) -> tuple:
    """The output's shape for inputs of ``shapes`` (None: a size unknown when compiling)."""
    sizes: dict[str, int | None] = {}
    owner: dict[str, int] = {}
    ellipses = []
    for i, (term, shape) in enumerate(zip(eq.operands, shapes)):
        n = len(term.letters)
        if (term.ellipsis is None and len(shape) != n) or len(shape) < n:
            raise ShapeError(f"Einsum: inputs[{i}] is {fmt_shape(shape)} but {term.text()!r} names "
                             f"{n}{' or more' if term.ellipsis is not None else ''} axes")
        e = term.ellipsis
        rest = len(shape) - n
        ellipses.append(() if e is None else tuple(shape[e:e + rest]))
        axes = tuple(shape) if e is None else tuple(shape[:e]) + tuple(shape[e + rest:])
        for c, d in zip(term.letters, axes):
            known = sizes.get(c)
            if known is not None and d is not None and known != d:
                raise ShapeError(f"Einsum: '{c}' is {known} in inputs[{owner[c]}] {fmt_shape(shapes[owner[c]])} but "
                                 f"{d} in inputs[{i}] {fmt_shape(shape)}")
            if known is None:
                sizes[c], owner[c] = d, i
    try:
        ell = broadcast_shapes(*ellipses)
    except ShapeError:
        raise ShapeError(f"Einsum: the '...' axes of {', '.join(fmt_shape(e) for e in ellipses)} "
                         f"do not broadcast") from None
    out = [sizes[c] for c in eq.output.letters]
    if eq.output.ellipsis is not None:
        out[eq.output.ellipsis:eq.output.ellipsis] = ell
    return tuple(out)


# --------------------------------------------------------------------------------------------
# The gradient


def _operand_gradient(eq: _Equation, g, inputs, i):
    """The gradient of ``inputs[i]``: g contracted with the other input into inputs[i]'s letters
    (those it shares with the output or the other input), then summed over the ``...`` axes it
    was broadcast along and repeated along its letters that nothing else has."""
    x, term = inputs[i], eq.operands[i]
    others = [(eq.operands[j], inputs[j]) for j in range(len(inputs)) if j != i]
    elsewhere = set(eq.output.letters).union(*(set(t.letters) for t, _ in others))
    kept = "".join(c for c in term.letters if c in elsewhere)
    full_rank = g.ndim - len(eq.output.letters)  # the broadcast '...' axes
    # The result's subscripts: x's kept letters, with the whole broadcast '...' where x has its
    # own (or in front, to be summed away, when x has none).
    if term.ellipsis is None:
        at = 0
        spec = (_ELLIPSIS if full_rank else "") + kept
    else:
        at = sum(1 for c in term.letters[:term.ellipsis] if c in elsewhere)
        spec = kept[:at] + _ELLIPSIS + kept[at:]
    subscripts = ",".join([eq.output.text()] + [t.text() for t, _ in others]) + "->" + spec
    sizes = _letter_sizes(eq, inputs)
    start = eq.output.ellipsis or 0
    raw_shape = tuple(sizes[c] for c in kept[:at]) + g.shape[start:start + full_rank] + \
        tuple(sizes[c] for c in kept[at:])
    if raw_shape != x.shape:
        reserve(raw_shape, g.dtype, f"Einsum's gradient of inputs[{i}] before it is summed to its shape")
    r = np.einsum(subscripts, g, *(v for _, v in others), optimize=bool(others))
    r = _sum_broadcast(r, at, full_rank, x, term)
    return _repeat_dropped(r, term, kept, x.shape)


def _letter_sizes(eq: _Equation, inputs) -> dict:
    """The size of each letter, from the inputs' shapes."""
    sizes = {}
    for term, x in zip(eq.operands, inputs):
        e = len(term.letters) if term.ellipsis is None else term.ellipsis
        rest = x.ndim - len(term.letters)
        for k, c in enumerate(term.letters):
            sizes[c] = x.shape[k if k < e else k + rest]
    return sizes


def _sum_broadcast(r, at, full_rank, x, term):
    """``r`` with its ``full_rank`` '...' axes (from ``at``) summed back to x's own '...' axes."""
    own = 0 if term.ellipsis is None else x.ndim - len(term.letters)
    extra = full_rank - own
    if extra:
        r = r.sum(axis=tuple(range(at, at + extra)))
    if own:
        e = term.ellipsis
        ones = tuple(at + k for k in range(own) if x.shape[e + k] == 1 and r.shape[at + k] != 1)
        if ones:
            r = r.sum(axis=ones, keepdims=True)
    return r


def _repeat_dropped(r, term, kept, shape):
    """``r`` (x's axes but for the letters only x has) repeated along those letters to ``shape``."""
    if len(kept) == len(term.letters):
        return r
    e = len(term.letters) if term.ellipsis is None else term.ellipsis
    rest = len(shape) - len(term.letters)
    missing = tuple(k if k < e else k + rest for k, c in enumerate(term.letters) if c not in kept)
    r = np.expand_dims(r, missing)
    return np.broadcast_to(r, shape).copy()
