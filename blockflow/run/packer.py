"""A plan's result builder and NaN/Inf test written out for its own keys (runtime._Plan uses them
for runs that return no wire gradients and no state updates: training steps, benchmarks, the CLI).

The general path builds a RunResult's dicts with ``zip`` and a loop, and tests the returned
arrays in a loop that first sorts out the certified ones. Run right after a large numpy step
(whose arrays have pushed the interpreter's own objects out of the CPU caches), every object and
call such a loop touches costs a cache miss: building and testing took about 20 us of an MLP
step's 1 ms. Written out for the plan's keys, the dicts are displays (one instruction each) and the
test is one expression over the arrays, skipping those certified finite.

Must not import PySide6 or the block library.
"""
from __future__ import annotations

import math

import numpy as np

from blockflow.run.numerics import BLAS_DTYPES, DOT, FLOAT_SCALARS, finite_fast

__all__ = ["make_finite_test", "make_packer"]


def make_packer(result_cls, program, value_keys, grad_keys, wanted_keys, target_key, paths):
    """``pack(out) -> RunResult`` for a run whose lowered code returns ``out`` = (values, grads,
    (), (), certified), equal to runtime._Plan.package's result: ``variable_grads`` leaves out a
    gradient that is None."""
    ns = {"_R": result_cls, "_program": program, "_target": target_key, "_paths": paths}
    values = ", ".join(f"v{i}" for i in range(len(value_keys)))
    grads = ", ".join(f"g{i}" for i in range(len(grad_keys)))
    position = {key: i for i, key in enumerate(grad_keys)}
    wanted = [(node, position.get(key)) for node, key in wanted_keys]
    lines = ["def pack(out):", "    _values, _grads = out[0], out[1]"]
    if value_keys:
        lines.append(f"    ({values},) = _values")
    if grad_keys:
        lines.append(f"    ({grads},) = _grads")
    value_map = "{" + ", ".join(f"{k!r}: v{i}" for i, k in enumerate(value_keys)) + "}"
    grad_map = "{" + ", ".join(f"{k!r}: g{i}" for i, k in enumerate(grad_keys)) + "}"
    present = [(node, i) for node, i in wanted if i is not None]
    wanted_map = "{" + ", ".join(f"{node!r}: g{i}" for node, i in present) + "}"
    lines.append(f"    wanted = {wanted_map}")
    if present:
        # a gradient that did not reach its node is None: not listed, as the general path does
        lines.append("    if " + " or ".join(f"g{i} is None" for _, i in present) + ":")
        lines.append("        wanted = {k: g for k, g in wanted.items() if g is not None}")
    lines.append(f"    return _R(_program, {value_map}, {grad_map}, {{}}, wanted, {{}}, _target, _paths)")
    exec(compile("\n".join(lines), "<blockflow result packer>", "exec"), ns)
    return ns["pack"]


def make_finite_test(n_values: int, n_grads: int):
    """``finite(out) -> bool``: whether every value and every gradient not certified finite in
    ``out`` (the lowered code's 5-tuple) is finite, as numerics.all_finite_many says."""
    ns = {"_fin": finite_fast, "_S": FLOAT_SCALARS, "_nd": np.ndarray, "_blas": BLAS_DTYPES,
          "_isf": math.isfinite, "_dot": DOT}
    values = ", ".join(f"v{i}" for i in range(n_values))
    grads = ", ".join(f"g{i}" for i in range(n_grads))
    sure = ", ".join(f"k{i}" for i in range(n_grads))
    tests = [_finite_expr(f"v{i}") for i in range(n_values)] + [f"(k{i} or {_finite_expr(f'g{i}')})"
                                                               for i in range(n_grads)]
    lines = ["def finite(out):"]
    if n_values:
        lines.append(f"    ({values},) = out[0]")
    if n_grads:
        lines += [f"    ({grads},) = out[1]", f"    ({sure},) = out[4]"]
    lines.append("    return " + (" and ".join(tests) if tests else "True"))
    exec(compile("\n".join(lines), "<blockflow finite test>", "exec"), ns)
    return ns["finite"]


def _finite_expr(a: str) -> str:
    """finite_fast's test of the array named ``a``, written out (no call for the common cases:
    a float scalar, a C-ordered float32/float64 array whose dot with itself is finite)."""
    return (f"(_isf({a}) if type({a}) in _S else (type({a}) is _nd and {a}.dtype in _blas and "
            f"{a}.flags.c_contiguous and _isf(_dot(_r := {a}.ravel(), _r))) or _fin({a}))")
