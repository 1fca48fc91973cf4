"""PyTorch lowerings of the nn blocks (blocks/nn_*.py): activations, Activation and LearningPhase,
softmax, losses, TopK/InTopK and LRN (bias, convolution, pooling and FusedBatchNormV3 are in
torch_ops_conv.py).

Where torch's own gradient differs from the block's vjp (Relu6 and Selu at their kinks, the
softmax cross-entropy with labels that do not sum to 1, the logistic loss at 0, MaxPool's ties
and padding), the lowering writes the forward so autograd gives the block's gradient, or uses a
small ``torch.autograd.Function`` whose backward is the vjp itself (marked once-differentiable:
differentiating it again is an error, never a silent zero). Convolution and pooling windows use
blocks/window_geometry.py's arithmetic (SAME pads ``max((out - 1) * stride + k_eff - size, 0)``,
the odd entry after) on NCHW tensors; NHWC inputs are permuted in and out.
"""
from __future__ import annotations

import numpy as np

from blockflow.export.torch_lowering import Call, Unsupported, lowers
from blockflow.export.torch_ops_array import _CHECK_INDEX, _int

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946
_INV_SQRT2 = float(1.0 / np.sqrt(2.0))
_SQRT_2_OVER_PI = float(np.sqrt(2.0 / np.pi))

# --------------------------------------------------------------------------------------------
# Activations


@lowers("Relu6")
def relu6(call: Call) -> str:
    x = call.ins[0]
    if call.type_of("features").dtype.kind != "f":
        return f"torch.clamp({x}, 0, 6)"
    # hardtanh's gradient is 0 at exactly 0 and 6, as TF's Relu6Grad
    return f"nn.functional.relu6({x})"


@lowers("Elu")
def elu(call: Call) -> str:
    return f"nn.functional.elu({call.ins[0]})"


def _selu(x: str, at_zero_scale: bool) -> str:
    """SELU written so that its gradient at exactly 0 is ``scale`` (the Selu block) or
    ``scale * alpha`` (Activation's selu): the branch that owns 0 decides."""
    cmp = ">=" if at_zero_scale else ">"
    return (f"torch.where({x} {cmp} 0, {x} * {_SELU_SCALE!r}, "
            f"torch.expm1(torch.clamp({x}, max=0)) * {_SELU_SCALE * _SELU_ALPHA!r})")


@lowers("Selu")
def selu(call: Call) -> str:
    return _selu(call.ins[0], True)


@lowers("LeakyRelu")
def leaky_relu(call: Call) -> str:
    x = call.ins[0]
    alpha = float(call.attrs.get("alpha", 0.2))
    return f"torch.where({x} > 0, {x}, {x} * {call.lit(alpha)})"


@lowers("Softplus")
def softplus(call: Call) -> str:
    # not nn.functional.softplus: its threshold returns x itself above 20
    return f"torch.logaddexp({call.ins[0]}, torch.zeros_like({call.ins[0]}))"


@lowers("Softsign")
def softsign(call: Call) -> str:
    return f"nn.functional.softsign({call.ins[0]})"


_GELU_TANH = '''def _gelu_tanh(x):
    """0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), with 1 + tanh(u) taken as
    2 / (1 + exp(-2u)) so that it does not cancel for negative x (as blockflow's Gelu)."""
    u = (x * x * 0.044715 + 1.0) * x * SQRT_2_OVER_PI
    e = torch.exp(-2.0 * torch.abs(u))
    big = 2.0 / (e + 1.0)
    return torch.where(u >= 0, big, big * e) * x * 0.5
'''.replace("SQRT_2_OVER_PI", repr(_SQRT_2_OVER_PI))


def _gelu_exact(x: str) -> str:
    # erfc(-z) is 1 + erf(z) without the cancellation of the left tail
    return f"({x} * torch.erfc({x} * {-_INV_SQRT2!r}) * 0.5)"


@lowers("Gelu")
def gelu(call: Call) -> str:
    x = call.ins[0]
    if call.attrs.get("approximate"):
        call.helper("_gelu_tanh", _GELU_TANH)
        return f"_gelu_tanh({x})"
    return _gelu_exact(x)


def _activation(kind: str, x: str) -> str:
    simple = {
        "linear": x, "relu": f"torch.relu({x})", "relu6": f"nn.functional.relu6({x})",
        "leaky_relu": f"torch.where({x} > 0, {x}, {x} * 0.2)", "elu": f"nn.functional.elu({x})",
        "selu": _selu(x, False), "gelu": _gelu_exact(x), "sigmoid": f"torch.sigmoid({x})",
        "tanh": f"torch.tanh({x})", "softplus": f"torch.logaddexp(torch.zeros_like({x}), {x})",
        "softsign": f"nn.functional.softsign({x})", "swish": f"({x} * torch.sigmoid({x}))",
        "softmax": f"torch.softmax({x}, dim=-1)", "log_softmax": f"torch.log_softmax({x}, dim=-1)",
    }
    if kind not in simple:
        raise Unsupported(f"no activation named {kind!r}")
    return simple[kind]


@lowers("Activation")
def activation(call: Call) -> str:
    return _activation(str(call.attrs.get("kind", "linear")), call.ins[0])


@lowers("LearningPhase")
def learning_phase(call: Call) -> str:
    return f"torch.tensor(bool({call.training()}))"


# --------------------------------------------------------------------------------------------
# Softmax and losses


@lowers("Softmax")
def softmax(call: Call) -> str:
    return f"torch.softmax({call.ins[0]}, dim=-1)"


@lowers("LogSoftmax")
def log_softmax(call: Call) -> str:
    return f"torch.log_softmax({call.ins[0]}, dim=-1)"


_XENT = '''class _SoftmaxCrossEntropy(torch.autograd.Function):
    """TF's SoftmaxCrossEntropyWithLogits: the features' gradient is (softmax - labels) g, row by
    row, whether or not the label rows sum to 1 (autograd of the formula would differ)."""

    @staticmethod
    def forward(ctx, features, labels):
        logp = torch.log_softmax(features, dim=-1)
        backprop = torch.exp(logp) - labels
        ctx.save_for_backward(logp, backprop)
        return -(labels * logp).sum(-1), backprop

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g_loss, g_backprop):
        logp, backprop = ctx.saved_tensors
        g = g_loss[:, None]
        return backprop * g, -logp * g
'''


@lowers("SoftmaxCrossEntropyWithLogits")
def softmax_xent(call: Call) -> list:
    call.helper("_SoftmaxCrossEntropy", _XENT)
    pair = call.temp("xent")
    call.line(f"{pair} = _SoftmaxCrossEntropy.apply({call.arg('features')}, {call.arg('labels')})")
    return [f"{pair}[0]", f"{pair}[1].detach()"]


@lowers("SparseSoftmaxCrossEntropyWithLogits")
def sparse_softmax_xent(call: Call) -> list:
    f, labels = call.arg("features"), call.arg("labels")
    call.helper("_check_index", _CHECK_INDEX)
    logp, idx = call.temp("logp"), call.temp("label")
    call.line(f"{idx} = _check_index('SparseSoftmaxCrossEntropyWithLogits', {labels}, {f}.shape[1])[:, None]")
    call.line(f"{logp} = torch.log_softmax({f}, dim=-1)")
    # the gradient of -logp[label] is softmax - one_hot(label), which is the op's backprop
    backprop = f"(torch.exp({logp}) - torch.zeros_like({logp}).scatter(1, {idx}, 1.0)).detach()"
    return [f"-{logp}.gather(1, {idx})[:, 0]", backprop]


_SIGMOID_XENT = '''class _SigmoidCrossEntropy(torch.autograd.Function):
    """max(x, 0) - x z + log1p(exp(-|x|)) in TF's order; its gradients are sigmoid(x) - z for
    the logits (0.5 - z at exactly 0, where autograd of the formula would give 1 - z) and -x for
    the labels."""

    @staticmethod
    def forward(ctx, labels, logits):
        ctx.save_for_backward(labels, logits)
        return torch.clamp(logits, min=0) - logits * labels + torch.log1p(torch.exp(-torch.abs(logits)))

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g):
        labels, logits = ctx.saved_tensors
        e = torch.exp(-torch.abs(logits))
        sig = torch.where(logits >= 0, torch.ones_like(e), e) / (e + 1)
        return -(g * logits), (sig - labels) * g
'''


@lowers("SigmoidCrossEntropyWithLogits")
def sigmoid_xent(call: Call) -> str:
    call.helper("_SigmoidCrossEntropy", _SIGMOID_XENT)
    return f"_SigmoidCrossEntropy.apply({call.arg('labels')}, {call.arg('logits')})"


@lowers("L2Loss")
def l2_loss(call: Call) -> str:
    t = call.ins[0]
    if call.type_of("t").dtype == np.float16:   # summed in float32, as blockflow
        return f"(torch.sum({t}.float() * {t}.float()) * 0.5).half()"
    return f"torch.sum({t} * {t}) * 0.5"


# --------------------------------------------------------------------------------------------
# TopK, InTopK


@lowers("TopK")
def top_k(call: Call) -> list:
    x = call.arg("input")
    k = 1 if call.arg("k") is None else _int(call.arg("k"))
    idx = call.temp("top")
    call.line(f"if {x}.shape[-1] < {k}:")
    call.line(f"    raise ValueError('TopK: the last axis of ' + str(list({x}.shape)) + ' is shorter than k = {k}')")
    # a stable descending sort: ties come lower index first, as the block
    call.line(f"{idx} = torch.sort({x}.detach(), dim=-1, descending=True, stable=True).indices[..., :{k}]")
    if not call.attrs.get("sorted", True):
        call.line(f"{idx} = torch.sort({idx}, dim=-1).values")
    return [f"torch.gather({x}, -1, {idx})", f"{idx}.to(torch.int32)"]


@lowers("InTopK")
def in_top_k(call: Call) -> str:
    p, t = call.arg("predictions"), call.arg("targets")
    k = _int(call.arg("k"))
    if call.type_of("predictions").shape[1] == 0:
        return f"torch.zeros({p}.shape[0], dtype=torch.bool)"
    valid, target = call.temp("valid"), call.temp("target")
    call.line(f"{valid} = ({t} >= 0) & ({t} < {p}.shape[1])")
    call.line(f"{target} = {p}.detach().gather(1, torch.where({valid}, {t}, 0).long()[:, None])")
    call.line(f"{valid} = {valid} & torch.isfinite({p}).all(1) & (({p} > {target}).sum(1) < {k})")
    return valid


# --------------------------------------------------------------------------------------------
# LRN


def _lrn_radius(channels, depth_radius: int) -> int:
    """LRN's depth_radius, no wider than the channels when their count is known: a wider window
    sums the same channels, and torch and ONNX would pad it out in full."""
    if channels is None:
        return depth_radius
    return min(depth_radius, max(channels - 1, 0))


@lowers("LRN")
def lrn(call: Call) -> str:
    """TF's LRN over the last axis as torch's local_response_norm over the channels of the NCHW
    tensor: a window of 2 * depth_radius + 1 channels (zero-padded ones add nothing to the sum of
    squares), alpha times that size (torch divides by it). float16 is computed in float32, as
    blockflow. Autograd through it is TF's LRNGrad."""
    t = call.type_of("input")
    size = 2 * _lrn_radius(t.shape[3], int(call.attrs.get("depth_radius", 5))) + 1
    alpha = call.lit(float(call.attrs.get("alpha", 1.0)) * size)
    beta, bias = call.lit(float(call.attrs.get("beta", 0.5))), call.lit(float(call.attrs.get("bias", 1.0)))
    x = call.arg("input") + (".float()" if t.dtype == np.float16 else "")
    y = f"nn.functional.local_response_norm({x}.permute(0, 3, 1, 2), {size}, {alpha}, {beta}, {bias})"
    y = f"{y}.permute(0, 2, 3, 1)"
    return f"{y}.half()" if t.dtype == np.float16 else y
