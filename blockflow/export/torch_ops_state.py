"""PyTorch lowerings of the blocks that change state: Assign/AssignAdd/AssignSub and the Apply*
optimizer steps, with TensorFlow's formulas exactly as blocks/training_ops.py computes them (not
torch.optim's: its Adam folds the bias correction differently and its RMSProp keeps no ``ms``
start of 1).

Each update is computed by a helper under ``torch.no_grad()`` (the blocks are not
differentiable) and handed to ``call.update`` for the Variable and each slot it changes (m, v,
accum...: a wired Variable or, unwired, the ``self.<var>_<key>`` buffer the module keeps); the
module writes them when forward ends, so every block of the run reads the values from its start.
The same helpers are what train.py's optimizer mode applies (torch_train.py).
"""
from __future__ import annotations

import numpy as np

from blockflow.export.torch_lowering import Call, Unsupported, lowers

_SGD = '''@torch.no_grad()
def apply_gradient_descent(var, alpha, delta):
    """TF's ApplyGradientDescent: var - alpha * delta."""
    return (var - alpha * delta,)
'''

_MOMENTUM = '''@torch.no_grad()
def apply_momentum(var, accum, lr, grad, momentum, use_nesterov):
    """TF's ApplyMomentum: accum = accum * momentum + grad, then var - lr * accum (Nesterov:
    var - lr * grad - lr * momentum * accum)."""
    accum = accum * momentum + grad
    if use_nesterov:
        new = var - lr * grad - lr * momentum * accum
    else:
        new = var - lr * accum
    return new, accum
'''

_ADAM = '''@torch.no_grad()
def apply_adam(var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad, use_nesterov):
    """TF's ApplyAdam: the bias correction folded into the step size lr_t (epsilon outside it,
    unlike torch.optim.Adam); the powers are multiplied by the betas after each step."""
    one = torch.ones((), dtype=var.dtype, device=var.device)
    lr_t = lr * torch.sqrt(one - beta2_power) / (one - beta1_power)
    m = beta1 * m + (one - beta1) * grad
    v = beta2 * v + (one - beta2) * grad * grad
    num = beta1 * m + (one - beta1) * grad if use_nesterov else m
    new = var - lr_t * num / (torch.sqrt(v) + epsilon)
    return new, m, v, beta1_power * beta1, beta2_power * beta2
'''

_RMSPROP = '''@torch.no_grad()
def apply_rms_prop(var, ms, mom, lr, rho, momentum, epsilon, grad):
    """TF's ApplyRMSProp: ms = rho * ms + (1 - rho) * g^2, mom = momentum * mom + lr * g /
    sqrt(ms + epsilon), var - mom (epsilon inside the root, unlike torch.optim.RMSprop)."""
    ms = rho * ms + (torch.ones((), dtype=var.dtype, device=var.device) - rho) * grad * grad
    mom = momentum * mom + lr * grad / torch.sqrt(ms + epsilon)
    return var - mom, ms, mom
'''

_ADAGRAD = '''@torch.no_grad()
def apply_adagrad(var, accum, lr, grad, update_slots):
    """TF's ApplyAdagrad: accum + g^2 (when update_slots), var - lr * g / sqrt(accum)."""
    if update_slots:
        accum = accum + grad * grad
    return var - lr * grad / torch.sqrt(accum), accum
'''

_ADADELTA = '''@torch.no_grad()
def apply_adadelta(var, accum, accum_update, lr, rho, epsilon, grad):
    """TF's ApplyAdadelta."""
    one = torch.ones((), dtype=var.dtype, device=var.device)
    accum = rho * accum + (one - rho) * grad * grad
    update = torch.sqrt(accum_update + epsilon) / torch.sqrt(accum + epsilon) * grad
    accum_update = rho * accum_update + (one - rho) * update * update
    return var - lr * update, accum, accum_update
'''

_FTRL = '''@torch.no_grad()
def apply_ftrl(var, accum, linear, grad, lr, l1, l2, lr_power):
    """TF's ApplyFtrl (FTRL-Proximal): 0 where |linear| <= l1."""
    accum_new = accum + grad * grad
    linear = linear + grad - (accum_new ** -lr_power - accum ** -lr_power) / lr * var
    quadratic = accum_new ** -lr_power / lr + 2 * l2
    new = torch.where(torch.abs(linear) > l1, (torch.sign(linear) * l1 - linear) / quadratic,
                      torch.zeros((), dtype=var.dtype, device=var.device)).to(var.dtype)
    return new, accum_new, linear
'''

#: block -> (helper name, its source, the inputs it takes in order, the updated ref inputs in the
#: order the helper returns them after the new value, the bool attrs passed last)
_RULES: dict[str, tuple] = {
    "ApplyGradientDescent": ("apply_gradient_descent", _SGD, ("var", "alpha", "delta"), (), ()),
    "ApplyMomentum": ("apply_momentum", _MOMENTUM, ("var", "accum", "lr", "grad", "momentum"), ("accum",),
                      ("use_nesterov",)),
    "ApplyAdam": ("apply_adam", _ADAM, ("var", "m", "v", "beta1_power", "beta2_power", "lr", "beta1", "beta2",
                                        "epsilon", "grad"), ("m", "v", "beta1_power", "beta2_power"),
                  ("use_nesterov",)),
    "ApplyRMSProp": ("apply_rms_prop", _RMSPROP, ("var", "ms", "mom", "lr", "rho", "momentum", "epsilon", "grad"),
                     ("ms", "mom"), ()),
    "ApplyAdagrad": ("apply_adagrad", _ADAGRAD, ("var", "accum", "lr", "grad"), ("accum",), ("update_slots",)),
    "ApplyAdadelta": ("apply_adadelta", _ADADELTA, ("var", "accum", "accum_update", "lr", "rho", "epsilon", "grad"),
                      ("accum", "accum_update"), ()),
    "ApplyFtrl": ("apply_ftrl", _FTRL, ("var", "accum", "linear", "grad", "lr", "l1", "l2", "lr_power"),
                  ("accum", "linear"), ()),
}


def rule(block: str) -> tuple[str, str, tuple, tuple, tuple]:
    """(helper name, helper source, inputs, updated slots, bool attrs) of an Apply* block: what
    train.py's optimizer mode writes for the chosen optimizer."""
    return _RULES[block]


def _operand(call: Call, name: str, dtype) -> str:
    """Input ``name`` as an expression in the Variable's dtype (a static value becomes a literal
    tensor; a wired one must already have that dtype, as the block's type check made sure)."""
    value = call.arg(name)
    if call.static[call.input_names.index(name)]:
        return call.constant(np.asarray(value, dtype=dtype), dtype)
    if value is None:
        raise Unsupported(f"input '{name}' is not wired")
    return value


@lowers(*_RULES)
def apply_rule(call: Call) -> str:
    helper, source, names, slots, flags = _RULES[call.block]
    dtype = call.type_of("var").dtype
    for slot in ("var",) + slots:
        if call.static[call.input_names.index(slot)]:
            raise Unsupported(f"its ref input '{slot}' is a constant, not a Variable")
    args = [_operand(call, n, dtype) for n in names] + [call.lit(bool(call.attrs.get(f))) for f in flags]
    call.helper(helper, source)
    parts = [call.temp("new")] + [call.temp(s) for s in slots]
    call.line(f"{', '.join(parts)}{',' if len(parts) == 1 else ''} = {helper}({', '.join(args)})")
    call.update("var", parts[0])
    if call.block == "ApplyAdagrad" and not call.attrs.get("update_slots", True):
        return parts[0]      # the accumulator is read, not changed
    for slot, name in zip(slots, parts[1:]):
        call.update(slot, name)
    return parts[0]


_ASSIGN = {"Assign": "torch.broadcast_to({value}, {ref}.shape).to({dtype}).clone()",
           "AssignAdd": "torch.add({ref}, {value})", "AssignSub": "torch.sub({ref}, {value})"}


@lowers(*_ASSIGN)
def assign(call: Call) -> str:
    ref_t, value_t = call.type_of("ref"), call.type_of("value")
    if call.static[call.input_names.index("ref")]:
        raise Unsupported("its ref input is a constant, not a Variable")
    value = _operand(call, "value", value_t.dtype if value_t is not None else ref_t.dtype)
    if call.block != "Assign" and value_t is not None and value_t.dtype != ref_t.dtype:
        # numpy would promote the Variable's new value to another dtype; torch keeps 0-d operands'
        # dtype out of the promotion: no single faithful expression
        raise Unsupported(f"adds a {value_t.dtype.name} value to a {ref_t.dtype.name} Variable")
    new = call.temp("new")
    expr = _ASSIGN[call.block].format(value=value, ref=call.arg("ref"), dtype=call.dtype(ref_t.dtype))
    call.line(f"{new} = ({expr}).detach()")
    call.update("ref", new)
    return new
