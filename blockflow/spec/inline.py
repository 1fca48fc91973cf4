"""A vjp's gradients written as a few ufunc calls, which the runtime may write into its generated
code instead of calling the vjp (run/lower.py, INLINE_VJPS).

On a small tensor, a vjp's Python frame, its result tuple and its checks cost more than its
arithmetic: on a chain of 1,000 ops on 8 values the backward's frames were a fifth of the run.
An elementwise block says what its vjp computes for an input whose shape is the output's (no
broadcast to undo) as a template, ``vjp.inline = {"x": (np.multiply, "g", "y")}``:

- a tuple ``(ufunc, arg, ...)`` is that ufunc called on its arguments, in that order;
- a tuple ``(operator.imul, call, arg)`` (or ``iadd``, ``isub``, ``itruediv``) is the vjp's
  ``t *= arg`` on the new array ``call`` made: the result stays in ``t``'s dtype where a
  cotangent of a wider one comes in (a Gradients block's float64 ``grad_ys`` into a float32
  Tanh), as the vjp's does, where ``np.multiply(t, arg)`` would widen it; its first argument must
  be a call (an array of the template's own, never a value);
- a string is a value: ``"g"`` the output's cotangent, ``"out"`` the output, an input's name
  that input;
- :data:`ONE_OF_OUTPUT` is 1 in the output's dtype; any other value is a constant.

The template must call the same ufuncs on the same operands as the vjp does for such an input,
so that the inline code gives its bits (tests/test_inline_vjps.py compares every template with
its vjp), and may read only what the vjp declares it reads (``vjp.reads``). ``vjp.inline_below``
(elements) bounds the sizes where the vjp computes the template (Multiply's takes another way
on large tensors). Imports nothing of blockflow.
"""
from __future__ import annotations

import operator

__all__ = ["ONE_OF_OUTPUT", "template_values", "template_problem"]


class _One:
    """1 in the block's output dtype (``np.dtype(...).type(1)``), bound when the code is written."""

    __slots__ = ()

    def __repr__(self):
        return "ONE_OF_OUTPUT"


ONE_OF_OUTPUT = _One()


def template_values(template) -> set:
    """The names of the values (``"g"``, ``"out"``, inputs) a template reads."""
    if isinstance(template, str):
        return {template}
    if isinstance(template, tuple):
        return set().union(*(template_values(a) for a in template[1:]))
    return set()


def template_problem(spec) -> str | None:
    """What is wrong with ``spec``'s ``vjp.inline``, or None (also when it has none)."""
    vjp = getattr(spec, "vjp", None)
    table = getattr(vjp, "inline", None)
    if table is None:
        return None
    inputs = {d.name for d in spec.inputs}
    if len(spec.outputs) != 1 or any(d.variadic for d in spec.inputs):
        return f"{spec.name}: inline gradients need one output and no input lists"
    reads = set(getattr(vjp, "reads", ("out", *inputs)))
    for name, template in table.items():
        if name not in inputs:
            return f"{spec.name}: inline gradient for '{name}', which is not an input"
        if not _well_formed(template):
            return (f"{spec.name}: the inline gradient of '{name}' is not (ufunc, arg, ...) of values "
                    f"(an augmented operator's first argument a call)")
        extra = template_values(template) - {"g"} - reads
        if extra:
            return f"{spec.name}: the inline gradient of '{name}' reads {sorted(extra)}, which its vjp does not"
        unknown = template_values(template) - {"g", "out"} - inputs
        if unknown:
            return f"{spec.name}: the inline gradient of '{name}' names {sorted(unknown)}"
    return None


#: the augmented operators a template may write into an array of its own with (``t *= g``)
AUGMENTED = frozenset({operator.imul, operator.iadd, operator.isub, operator.itruediv})


def _well_formed(template) -> bool:
    if isinstance(template, tuple):
        if len(template) == 3 and template[0] in AUGMENTED:
            return isinstance(template[1], tuple) and all(_well_formed(a) for a in template[1:])
        return (len(template) >= 2 and callable(template[0]) and hasattr(template[0], "nin")
                and len(template) - 1 == template[0].nin and all(_well_formed(a) for a in template[1:]))
    return True
