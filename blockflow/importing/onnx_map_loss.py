"""ONNX's losses: NegativeLogLikelihoodLoss, and SoftmaxCrossEntropyLoss as LogSoftmax and it.

The class axis (axis 1 in ONNX) is moved last, each position's entry at its target class is
picked with GatherNd (a grid of coordinates from the target's static shape, the target in the
last place), weighted, negated and reduced as ONNX defines: ``mean`` divides by the sum of the
weights of the positions not ignored (their count when there are no weights).
"""
from __future__ import annotations

import numpy as np

from blockflow.importing.onnx_mapping import Call, Unsupported, maps


def _picked(call: Call, x, target, shape: tuple, dtype_t):
    """x[n, d..., target[n, d...]] for x with the classes last and target of ``shape``."""
    call.making((len(shape), *shape), np.int64, "its grid of coordinates")
    grid = np.indices(shape, dtype=np.int64)
    if dtype_t != np.int64:
        target = call.block("Cast", {"DstT": "int64"}, x=target, hint="target64")
    coords = [call.const(grid[d][..., None]) for d in range(len(shape))]
    coords.append(call.block("ExpandDims", input=target, axis=call.const(-1, np.int32), hint="target_col"))
    where = call.block("Concat", values=coords, axis=call.const(len(shape), np.int32), hint="coords")
    return call.block("GatherNd", params=x, indices=where, hint="picked")


def _nll(call: Call, logp, typed: int):
    """The loss of log-probabilities ``logp`` (classes last) against input 1, weights input 2."""
    shape = call.static_shape(1, f"{call.node.op}'s target")
    dtype, dtype_t = call.dtype(0), call.dtype(1)
    reduction = call.attr("reduction", "mean")
    if reduction not in ("mean", "sum", "none"):
        raise Unsupported(f"{call.node.op} with reduction {reduction!r}")
    target, ignore = call.input(1), call.attr("ignore_index")
    valid = None
    if ignore is not None:    # an ignored target may be no class at all: pick class 0 and weigh it 0
        valid = call.block("NotEqual", x=target, y=call.const(ignore, dtype_t), hint="kept")
        target = call.block("Select", condition=valid, t=target, e=call.const(0, dtype_t), hint="target_safe")
    loss = _picked(call, logp, target, shape, dtype_t)
    weight = None
    if call.has(2):
        weight = call.block("Gather", params=call.input(2), indices=target, axis=call.const(0, np.int32),
                            hint="weight")
    if valid is not None:
        kept = call.block("Cast", {"DstT": dtype.name}, x=valid, hint="kept_f")
        weight = kept if weight is None else call.block("Multiply", x=weight, y=kept, hint="weight_kept")
    if weight is not None:
        loss = call.block("Multiply", x=loss, y=weight, hint="weighted")
    final = reduction == "none"
    loss = call.block("Negate", x=loss, hint="" if final else "loss", typed=typed if final else None)
    if final:
        return loss
    axes = call.const(list(range(len(shape))), np.int32)
    if reduction == "mean" and weight is None:
        return call.block("Mean", input=loss, axis=axes, typed=typed)
    total = call.block("Sum", input=loss, axis=axes, hint="" if reduction == "sum" else "total",
                       typed=typed if reduction == "sum" else None)
    if reduction == "sum":
        return total
    return call.block("RealDiv", x=total, y=call.block("Sum", input=weight, axis=axes, hint="weights"), typed=typed)


def _classes_last(call: Call, x, rank: int, hint: str):
    if rank == 2:
        return x
    perm = [0] + list(range(2, rank)) + [1]
    return call.block("Transpose", x=x, perm=call.const(perm, np.int32), hint=hint)


def _check(call: Call) -> int:
    rank = call.rank(0)
    if rank < 2 or call.rank(1) != rank - 1:
        raise Unsupported(f"{call.node.op} of a rank-{rank} input and a rank-{call.rank(1)} target")
    if call.dtype(0) is None or call.dtype(0).kind != "f":
        raise Unsupported(f"{call.node.op} of a non-float input")
    return rank


@maps("NegativeLogLikelihoodLoss", blocks="Transpose, GatherNd, Gather, Multiply, Negate, Sum or Mean, RealDiv",
      notes="any number of extra axes; weight, ignore_index, reduction none, sum, mean (by the weights kept)")
def nll_loss(call: Call):
    rank = _check(call)
    return _nll(call, _classes_last(call, call.input(0), rank, "classes_last"), 0)


@maps("SoftmaxCrossEntropyLoss", blocks="LogSoftmax and NegativeLogLikelihoodLoss's blocks",
      notes="over axis 1 (moved last); the log_prob output; weights, ignore_index, reductions as "
            "NegativeLogLikelihoodLoss")
def softmax_cross_entropy(call: Call):
    rank = _check(call)
    logp = call.block("LogSoftmax", logits=_classes_last(call, call.input(0), rank, "classes_last"),
                      hint="log_prob_last")
    outs = [_nll(call, logp, 0)]
    if call.output_used(1):
        if rank == 2:
            outs.append(logp.typed(*call.out_type(1)))
        else:
            perm = [0, rank - 1] + list(range(1, rank - 1))
            outs.append(call.block("Transpose", x=logp, perm=call.const(perm, np.int32), hint="log_prob", typed=1))
    return outs
