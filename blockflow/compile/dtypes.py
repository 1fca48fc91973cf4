"""Dtype checks of one block's inputs while it is typed (infer.py): dtype classes and type
variables, and the inline constants that take the dtype of what they meet."""
from __future__ import annotations

import numpy as np

from blockflow.compile.program import Slot
from blockflow.spec import TensorType, fit_dtype

__all__ = ["check_dtypes"]

#: dtype classes an input may declare; any other dtype name is a type variable
_CLASSES = ("float", "int", "bool", "number", "any")


def check_dtypes(report, nid, spec, args, inputs, slots) -> bool:
    """Dtype classes and type variables; inline constants adopt their variable's dtype (their slots
    and ``args`` are replaced by cast ones). False when a dtype does not fit (reported)."""
    flat = []   # (declared input, port name, slot) for every fed input port
    for pos, decl in enumerate(spec.inputs):
        if decl.variadic:
            for k, s in enumerate(inputs[pos]):
                flat.append((decl, decl.port(k), s))
        elif inputs[pos] is not None:
            flat.append((decl, decl.name, inputs[pos]))
    resolved, class_hint = _bind_type_variables(report, nid, flat, slots)
    if resolved is None:
        return False
    for _, _, s in flat:
        if slots[s].const:
            break
    else:
        return True     # the common case, every input wired: nothing to widen or cast
    _widen_inline_only(flat, slots, resolved)
    return _cast_inline_constants(report, nid, spec, args, inputs, slots, flat, resolved, class_hint)


def _bind_type_variables(report, nid, flat, slots):
    """Wired inputs fix each type variable: ({variable: (port, dtype)}, {class: a wired dtype of
    it}), or (None, None) when an input's dtype does not fit (reported)."""
    resolved: dict[str, tuple[str, np.dtype]] = {}
    class_hint: dict[str, np.dtype] = {}
    ok = True
    for decl, port, s in flat:
        slot = slots[s]
        if not decl.accepts(slot.type.dtype):
            if slot.const and decl.dtype in ("float", "number", "any"):
                continue  # an inline constant is cast later
            report.error(nid, port, f"input '{port}' must be {decl.dtype}, got {slot.type.dtype.name}")
            ok = False
            continue
        if slot.const:
            continue
        if decl.dtype in _CLASSES:
            # Not binding, but an inline value next to a wired float32 should be float32 too.
            class_hint.setdefault(decl.dtype, slot.type.dtype)
            continue
        prev = resolved.get(decl.dtype)
        if prev is None:
            resolved[decl.dtype] = (port, slot.type.dtype)
        elif prev[1] != slot.type.dtype:
            report.error(nid, port, f"input '{port}' is {slot.type.dtype.name} but '{prev[0]}' is "
                                    f"{prev[1].name}; both must have the same dtype")
            ok = False
    return (resolved, class_hint) if ok else (None, None)


def _widen_inline_only(flat, slots, resolved) -> None:
    """A type variable fed only inline values takes the widest of their dtypes."""
    for decl, port, s in flat:
        if slots[s].const and decl.dtype not in _CLASSES and decl.dtype not in resolved:
            dts = [slots[t].type.dtype for d, _, t in flat if d.dtype == decl.dtype]
            resolved[decl.dtype] = (port, np.result_type(*dts))


def _cast_inline_constants(report, nid, spec, args, inputs, slots, flat, resolved, class_hint) -> bool:
    """Cast inline constants to their variable's dtype, or to the dtype of a wired input of the
    same class, or to float32 when a float is needed and nothing says which."""
    ok = True
    for decl, port, s in flat:
        slot = slots[s]
        if not slot.const:
            continue
        want = resolved.get(decl.dtype, (None, None))[1] or class_hint.get(decl.dtype)
        if want is not None and not decl.accepts(want):
            want = None
        if want is None:
            if decl.accepts(slot.type.dtype):
                continue
            want = np.dtype("float32") if decl.dtype in ("float", "number", "any") else None
            if want is None:
                report.error(nid, port, f"inline value of '{port}' must be {decl.dtype}, "
                                        f"got {slot.type.dtype.name}")
                ok = False
                continue
        if want == slot.type.dtype:
            continue
        try:
            cast = fit_dtype(slot.type.value, want)
        except ValueError as exc:
            report.error(nid, port, f"inline value of '{port}' must be {want.name}: {exc}")
            ok = False
            continue
        new = Slot(s, slot.node, slot.port, TensorType(cast.shape, cast.dtype, cast), const=True)
        slots[s] = new
        _replace_arg(spec, args, inputs, s, new.type)
    return ok


def _replace_arg(spec, args, inputs, s, t):
    """Put a cast constant's type (or value, for a static input) where ``infer`` will read it."""
    for pos, decl in enumerate(spec.inputs):
        if decl.variadic:
            if s in inputs[pos]:
                args[pos][inputs[pos].index(s)] = t
        elif inputs[pos] == s:
            args[pos] = t.value if decl.static else t
