"""training_ops: TF's optimizer update blocks (Apply*) and the in-graph Gradients block.

The Apply* blocks update the Variable wired into ``var`` with TensorFlow's formulas and port
names. Their other state (TF's accumulators and moments) is either wired from Variables, as in
TensorFlow, or left unwired and then kept with ``var``'s Variable as slots saved in the project.
Imports only blockflow.spec and numpy.
"""
from __future__ import annotations

import numpy as np

from blockflow.spec import Attr, Input, InputList, Output, OutputList, ShapeError, TensorType, block

_STATE_NOTE = """
    Updates are committed when the run finishes without error; blocks reading the Variable in
    the same run see its value from the start of the run, and ``out`` is the new value. Not
    differentiable.
"""


def _scalar(port: str):
    return Input(port, dtype="T", doc="a scalar")


def _check_update(name, var, grad, scalars):
    for port, t in scalars.items():
        if t.shape not in ((), (1,)):
            raise ShapeError(f"{name}: '{port}' must be a scalar, got {t}")
    if grad is not None:
        if len(grad.shape) != len(var.shape) or any(
                a is not None and b is not None and a != b for a, b in zip(var.shape, grad.shape)):
            raise ShapeError(f"{name}: grad {grad} does not match var {var}")
    return var


@block("ApplyGradientDescent", category="training_ops")
class ApplyGradientDescent:
    __doc__ = """Gradient descent step: ``var -= alpha * delta``.
""" + _STATE_NOTE

    inputs = (Input("var", dtype="T", ref=True), _scalar("alpha"), Input("delta", dtype="T"))
    outputs = (Output("out", doc="the updated var"),)

    def infer(var, alpha, delta):
        return _check_update("ApplyGradientDescent", var, delta, {"alpha": alpha})

    def forward(var, alpha, delta):
        new = var - alpha * delta
        return new, {"var": new}


@block("ApplyMomentum", category="training_ops")
class ApplyMomentum:
    __doc__ = """Momentum step: ``accum = accum * momentum + grad; var -= lr * accum``.

    With ``use_nesterov``: ``var -= lr * grad + lr * momentum * accum`` (after the accum update),
    as TensorFlow. ``accum`` starts at 0 when kept as a slot.
""" + _STATE_NOTE

    inputs = (Input("var", dtype="T", ref=True),
              Input("accum", dtype="T", ref=True, slot="like", slot_init=0.0),
              _scalar("lr"), Input("grad", dtype="T"), _scalar("momentum"))
    outputs = (Output("out", doc="the updated var"),)
    attrs = (Attr("use_nesterov", "bool", False),)

    def infer(var, accum, lr, grad, momentum, *, use_nesterov):
        return _check_update("ApplyMomentum", var, grad, {"lr": lr, "momentum": momentum})

    def forward(var, accum, lr, grad, momentum, *, use_nesterov):
        accum = accum * momentum + grad
        if use_nesterov:
            new = var - lr * grad - lr * momentum * accum
        else:
            new = var - lr * accum
        return new, {"var": new, "accum": accum}


@block("ApplyAdam", category="training_ops")
class ApplyAdam:
    __doc__ = """Adam step (Kingma & Ba), TensorFlow's formula.

    ``lr_t = lr * sqrt(1 - beta2_power) / (1 - beta1_power)``, ``m = beta1 * m + (1 - beta1) * g``,
    ``v = beta2 * v + (1 - beta2) * g^2``, ``var -= lr_t * m / (sqrt(v) + epsilon)``; with
    ``use_nesterov`` the numerator is ``beta1 * m + (1 - beta1) * g``. Left unwired, ``m`` and
    ``v`` are slots starting at 0 and ``beta1_power``/``beta2_power`` are slots starting at
    ``beta1``/``beta2`` and multiplied by them after each step, as TF's AdamOptimizer keeps them.
""" + _STATE_NOTE

    inputs = (Input("var", dtype="T", ref=True),
              Input("m", dtype="T", ref=True, slot="like", slot_init=0.0),
              Input("v", dtype="T", ref=True, slot="like", slot_init=0.0),
              Input("beta1_power", dtype="T", ref=True, slot="scalar", slot_init="beta1"),
              Input("beta2_power", dtype="T", ref=True, slot="scalar", slot_init="beta2"),
              _scalar("lr"), _scalar("beta1"), _scalar("beta2"), _scalar("epsilon"),
              Input("grad", dtype="T"))
    outputs = (Output("out", doc="the updated var"),)
    attrs = (Attr("use_nesterov", "bool", False),)

    def infer(var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad, *, use_nesterov):
        return _check_update("ApplyAdam", var, grad, {"lr": lr, "beta1": beta1, "beta2": beta2,
                                                      "epsilon": epsilon, "beta1_power": beta1_power,
                                                      "beta2_power": beta2_power})

    def forward(var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad, *, use_nesterov):
        one = var.dtype.type(1)
        lr_t = lr * np.sqrt(one - beta2_power) / (one - beta1_power)
        m = beta1 * m + (one - beta1) * grad
        v = beta2 * v + (one - beta2) * grad * grad
        num = beta1 * m + (one - beta1) * grad if use_nesterov else m
        new = var - lr_t * num / (np.sqrt(v) + epsilon)
        return new, {"var": new, "m": m, "v": v,
                     "beta1_power": beta1_power * beta1, "beta2_power": beta2_power * beta2}


@block("ApplyRMSProp", category="training_ops")
class ApplyRMSProp:
    __doc__ = """RMSProp step: ``ms = rho * ms + (1 - rho) * g^2``,
    ``mom = momentum * mom + lr * g / sqrt(ms + epsilon)``, ``var -= mom``.

    Kept as slots, ``ms`` starts at 1 and ``mom`` at 0, as TF's RMSPropOptimizer makes them.
""" + _STATE_NOTE

    inputs = (Input("var", dtype="T", ref=True),
              Input("ms", dtype="T", ref=True, slot="like", slot_init=1.0),
              Input("mom", dtype="T", ref=True, slot="like", slot_init=0.0),
              _scalar("lr"), _scalar("rho"), _scalar("momentum"), _scalar("epsilon"), Input("grad", dtype="T"))
    outputs = (Output("out", doc="the updated var"),)

    def infer(var, ms, mom, lr, rho, momentum, epsilon, grad):
        return _check_update("ApplyRMSProp", var, grad, {"lr": lr, "rho": rho, "momentum": momentum,
                                                         "epsilon": epsilon})

    def forward(var, ms, mom, lr, rho, momentum, epsilon, grad):
        ms = rho * ms + (var.dtype.type(1) - rho) * grad * grad
        mom = momentum * mom + lr * grad / np.sqrt(ms + epsilon)
        new = var - mom
        return new, {"var": new, "ms": ms, "mom": mom}


@block("ApplyAdagrad", category="training_ops")
class ApplyAdagrad:
    __doc__ = """Adagrad step: ``accum += g^2; var -= lr * g / sqrt(accum)``.

    Kept as a slot, ``accum`` starts at 0.1 (TF's initial_accumulator_value). With
    ``update_slots`` false the accumulator is used but not changed.
""" + _STATE_NOTE

    inputs = (Input("var", dtype="T", ref=True),
              Input("accum", dtype="T", ref=True, slot="like", slot_init=0.1),
              _scalar("lr"), Input("grad", dtype="T"))
    outputs = (Output("out", doc="the updated var"),)
    attrs = (Attr("update_slots", "bool", True),)

    def infer(var, accum, lr, grad, *, update_slots):
        return _check_update("ApplyAdagrad", var, grad, {"lr": lr})

    def forward(var, accum, lr, grad, *, update_slots):
        if update_slots:
            accum = accum + grad * grad
        new = var - lr * grad / np.sqrt(accum)
        return new, ({"var": new, "accum": accum} if update_slots else {"var": new})


@block("ApplyAdadelta", category="training_ops")
class ApplyAdadelta:
    __doc__ = """Adadelta step: ``accum = rho * accum + (1 - rho) * g^2``,
    ``update = sqrt(accum_update + epsilon) / sqrt(accum + epsilon) * g``,
    ``accum_update = rho * accum_update + (1 - rho) * update^2``, ``var -= lr * update``.

    Kept as slots, both accumulators start at 0.
""" + _STATE_NOTE

    inputs = (Input("var", dtype="T", ref=True),
              Input("accum", dtype="T", ref=True, slot="like", slot_init=0.0),
              Input("accum_update", dtype="T", ref=True, slot="like", slot_init=0.0),
              _scalar("lr"), _scalar("rho"), _scalar("epsilon"), Input("grad", dtype="T"))
    outputs = (Output("out", doc="the updated var"),)

    def infer(var, accum, accum_update, lr, rho, epsilon, grad):
        return _check_update("ApplyAdadelta", var, grad, {"lr": lr, "rho": rho, "epsilon": epsilon})

    def forward(var, accum, accum_update, lr, rho, epsilon, grad):
        one = var.dtype.type(1)
        accum = rho * accum + (one - rho) * grad * grad
        update = np.sqrt(accum_update + epsilon) / np.sqrt(accum + epsilon) * grad
        accum_update = rho * accum_update + (one - rho) * update * update
        new = var - lr * update
        return new, {"var": new, "accum": accum, "accum_update": accum_update}


@block("ApplyFtrl", category="training_ops")
class ApplyFtrl:
    __doc__ = """FTRL-Proximal step (McMahan et al.), TensorFlow's formula.

    ``accum_new = accum + g^2``, ``linear += g - (accum_new^-lr_power - accum^-lr_power) / lr * var``,
    ``quadratic = accum_new^-lr_power / lr + 2 * l2``, and
    ``var = (sign(linear) * l1 - linear) / quadratic`` where ``|linear| > l1``, else 0. Kept as
    slots, ``accum`` starts at 0.1 and ``linear`` at 0.
""" + _STATE_NOTE

    inputs = (Input("var", dtype="T", ref=True),
              Input("accum", dtype="T", ref=True, slot="like", slot_init=0.1),
              Input("linear", dtype="T", ref=True, slot="like", slot_init=0.0),
              Input("grad", dtype="T"), _scalar("lr"), _scalar("l1"), _scalar("l2"), _scalar("lr_power"))
    outputs = (Output("out", doc="the updated var"),)

    def infer(var, accum, linear, grad, lr, l1, l2, lr_power):
        return _check_update("ApplyFtrl", var, grad, {"lr": lr, "l1": l1, "l2": l2, "lr_power": lr_power})

    def forward(var, accum, linear, grad, lr, l1, l2, lr_power):
        accum_new = accum + grad * grad
        linear = linear + grad - (accum_new ** -lr_power - accum ** -lr_power) / lr * var
        quadratic = accum_new ** -lr_power / lr + 2 * l2
        new = np.where(np.abs(linear) > l1, (np.sign(linear) * l1 - linear) / quadratic, 0).astype(var.dtype)
        return new, {"var": new, "accum": accum_new, "linear": linear}


@block("Gradients", category="gradients", aliases=("AddSymbolicGradients",))
class Gradients:
    """Gradients of ``ys`` with respect to ``xs`` inside the diagram: TF's ``tf.gradients``.

    ``dx[i]`` is the gradient of ``sum(ys)`` (or of ``sum(grad_ys[j] * ys[j])`` when ``grad_ys``
    are given) with respect to the value wired into ``xs[i]``, by reverse mode over the blocks
    before this one that connect them. StopGradient is honoured: an x that reaches the ys only
    through a StopGradient (or not at all) gets zeros. This is how TensorFlow 1 programs build
    adversarial examples (FGSM: ``x_adv = StopGradient(x + eps * Sign(dx))``) and optimizer
    updates drawn by hand (``ApplyGradientDescent(var, lr, dx)``). The outputs are not
    differentiable themselves (no second-order gradients). Each ``grad_ys[j]`` has its y's dtype
    and shape: checked when the page compiles, and when it runs where a size is left open.
    """

    role = "gradients"
    inputs = (InputList("ys", dtype="float", doc="the values to differentiate (summed)"),
              InputList("xs", dtype="float", doc="the values to differentiate with respect to"),
              InputList("grad_ys", dtype="float", min_count=0, optional=True,
                        doc="cotangents for the ys (default: ones)"))
    outputs = (OutputList("dx", count="xs", differentiable=False, doc="one gradient per x"),)

    def infer(ys, xs, grad_ys):
        if grad_ys and len(grad_ys) != len(ys):
            raise ShapeError(f"Gradients: {len(grad_ys)} grad_ys for {len(ys)} ys; give one per y or none")
        for i, (y, g) in enumerate(zip(ys, grad_ys)):
            # TensorFlow's gradient functions take a seed of its y's dtype; another one flowed
            # through the vjps and gave gradients of its dtype
            if y.dtype != g.dtype or len(y.shape) != len(g.shape) or any(
                    a is not None and b is not None and a != b for a, b in zip(y.shape, g.shape)):
                raise ShapeError(f"Gradients: grad_ys[{i}] {g} does not match ys[{i}] {y}")
        return [TensorType(x.shape, x.dtype) for x in xs]

    def forward(ys, xs, grad_ys):
        raise RuntimeError("the Gradients block is computed by the runtime, not called")
