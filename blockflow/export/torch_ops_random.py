"""PyTorch lowerings of the random blocks (blocks/random_ops.py) and Dropout.

Every draw goes through one module-level function of the generated file (``_draw_uniform``,
``_draw_normal``, ...) given the Model's ``torch.Generator``: torch's numbers cannot equal
numpy's, so the tests check the draws by their distribution, and everything downstream of them by
replay, replacing a ``_draw_*`` function of the loaded module with one returning blockflow's own
draw (docs/export.md, "Random blocks"). What the block does with its draws (scaling, shifting,
casting, Multinomial's inverted CDF, Bernoulli's comparison, Dropout's mask) is written out
after the draw exactly as the block does it. The samples carry no gradient (detached), as the
blocks are not differentiable; Dropout's gradient is the scaled mask.
"""
from __future__ import annotations

import numpy as np

from blockflow.export.torch_lowering import Call, lowers

_DRAWS = {
    "_draw_uniform": '''def _draw_uniform(generator, shape, dtype):
    """Uniform draws in [0, 1) (numpy's Generator.random); every random block's draws pass
    through one _draw_* function, which a test may replace to replay blockflow's own draws."""
    return torch.rand(tuple(shape), generator=generator, dtype=dtype)
''',
    "_draw_normal": '''def _draw_normal(generator, shape, dtype):
    """Standard normal draws (numpy's Generator.standard_normal)."""
    return torch.randn(tuple(shape), generator=generator, dtype=dtype)
''',
    "_draw_truncated_normal": '''def _draw_truncated_normal(generator, shape, dtype):
    """Standard normal draws, those beyond 2 standard deviations drawn again (TF's truncation)."""
    z = torch.randn(tuple(shape), generator=generator, dtype=dtype)
    far = torch.abs(z) > 2.0
    while bool(far.any()):
        z = torch.where(far, torch.randn(z.shape, generator=generator, dtype=dtype), z)
        far = torch.abs(z) > 2.0
    return z
''',
    "_draw_integers": '''def _draw_integers(generator, low, high, shape, dtype):
    """Integers uniform in [low, high) (numpy's Generator.integers): a 62-bit draw reduced
    modulo the range, whose bias (range / 2**62) is far below any test's reach."""
    low = torch.as_tensor(low).long().expand(tuple(shape))
    span = torch.as_tensor(high).long().expand(tuple(shape)) - low
    raw = torch.randint(0, 2 ** 62, tuple(shape), generator=generator, dtype=torch.int64)
    return (low + raw % span).to(dtype)
''',
    "_draw_permutation": '''def _draw_permutation(generator, n):
    """A random permutation of range(n) (numpy's Generator.permutation)."""
    return torch.randperm(n, generator=generator)
''',
    "_draw_poisson": '''def _draw_poisson(generator, lam, shape):
    """Poisson counts with rates lam broadcast to shape (numpy's Generator.poisson), as int64."""
    rates = torch.as_tensor(lam).to(torch.float64).expand(tuple(shape)).contiguous()
    return torch.poisson(rates, generator=generator).to(torch.int64)
''',
    "_draw_gamma": '''def _draw_gamma(generator, alpha, shape, dtype):
    """Gamma(alpha, 1) draws with alpha broadcast to shape (numpy's Generator.standard_gamma)."""
    concentration = torch.as_tensor(alpha).to(dtype).expand(tuple(shape)).contiguous()
    return torch._standard_gamma(concentration, generator=generator)
''',
}


def _draw(call: Call, name: str) -> str:
    call.helper(name, _DRAWS[name])
    return name


def _work(dtype: str) -> str:
    """The dtype numpy's samplers draw in: float64 for float64, else float32 (then cast)."""
    return "torch.float64" if np.dtype(dtype) == np.float64 else "torch.float32"


def _size(call: Call, *params) -> str:
    """The samples' shape: the static ``shape``, else the compiled one when known, else the
    broadcast shape of the wired parameters."""
    shape = call.arg("shape")
    if shape is not None:
        return call.lit(tuple(int(v) for v in np.asarray(shape).reshape(-1)))
    known = call.out_types[0].shape
    if None not in known:
        return call.lit(tuple(known))
    wired = [f"{p}.shape" for p in params if p is not None]
    return f"torch.broadcast_shapes({', '.join(wired)})"


def _scaled(call: Call, z: str, scale, shift, work: str) -> str:
    """``z * scale + shift`` kept in the draws' dtype, as the block's in-place arithmetic."""
    if scale is not None:
        z = f"({z} * {scale}).to({work})"
    if shift is not None:
        z = f"({z} + {shift}).to({work})"
    return z


@lowers("RandomNormal", "TruncatedNormal")
def normal(call: Call) -> str:
    mean, stddev = call.arg("mean"), call.arg("stddev")
    dtype = call.out_types[0].dtype
    work = _work(dtype)
    fn = _draw(call, "_draw_normal" if call.block == "RandomNormal" else "_draw_truncated_normal")
    z = f"{fn}({call.random()}, {_size(call, mean, stddev)}, {work})"
    return f"{_scaled(call, z, stddev, mean, work)}.to({call.out_dtype()}).detach()"


@lowers("RandomUniform")
def uniform(call: Call) -> str:
    lo, hi = call.arg("minval"), call.arg("maxval")
    dtype = call.out_types[0].dtype
    size = _size(call, lo, hi)
    if dtype.kind in "iu":
        low = "0" if lo is None else lo
        call.line(f"if bool(torch.any(torch.as_tensor({hi}) <= torch.as_tensor({low}))):")
        call.line("    raise ValueError('RandomUniform: needs minval < maxval')")
        fn = _draw(call, "_draw_integers")
        return f"{fn}({call.random()}, {low}, {hi}, {size}, {call.out_dtype()})"
    work = _work(dtype)
    u = call.temp("u")
    call.line(f"{u} = {_draw(call, '_draw_uniform')}({call.random()}, {size}, {work})")
    if dtype == np.float16:   # multiples of 2**-11, so that rounding to float16 keeps u < 1
        call.line(f"{u} = torch.floor({u} * 2048.0) * (1 / 2048)")
    if hi is not None:
        span = hi if lo is None else f"({hi} - {lo})"
        call.line(f"{u} = ({u} * {span}).to({work})")
    elif lo is not None:
        call.line(f"{u} = ({u} * (1 - {lo})).to({work})")
    if lo is not None:
        call.line(f"{u} = ({u} + {lo}).to({work})")
    return f"{u}.to({call.out_dtype()}).detach()"


_MULTINOMIAL = '''def _multinomial(generator, logits, num_samples, dtype):
    """Class indices drawn from softmax(logits) row by row, by inverting each row's CDF (float64)
    at uniform draws, as blockflow's Multinomial: non-finite logits have probability 0, a row with
    none finite gives the index `classes`."""
    batch, classes = logits.shape
    x = logits.detach().to(torch.float64)
    finite = torch.isfinite(x)
    x = torch.where(finite, x, -math.inf)
    top = x.amax(1, keepdim=True) if classes else torch.zeros((batch, 1), dtype=torch.float64)
    top = torch.where(torch.isfinite(top), top, 0.0)
    p = torch.exp(x - top)
    cdf = torch.cumsum(p, 1)
    total = cdf[:, -1:]
    empty = total[:, 0] == 0
    cdf = cdf / torch.where(empty[:, None], 1.0, total)
    offset = torch.arange(batch, dtype=torch.float64)[:, None]
    u = _draw_uniform(generator, (batch, num_samples), torch.float64) + offset
    idx = torch.searchsorted((cdf + offset).reshape(-1), u.reshape(-1), right=True).reshape(batch, num_samples)
    idx = idx - torch.arange(0, batch * classes, classes, dtype=torch.int64)[:, None]
    last = classes - 1 - torch.argmax(torch.flip(p > 0, dims=(1,)).to(torch.int8), dim=1)
    last = torch.where(empty, classes, last)
    return torch.minimum(idx, last[:, None]).to(dtype)
'''


@lowers("Multinomial")
def multinomial(call: Call) -> str:
    _draw(call, "_draw_uniform")
    call.helper("_multinomial", _MULTINOMIAL)
    n = int(np.asarray(call.arg("num_samples")))
    return f"_multinomial({call.random()}, {call.arg('logits')}, {n}, {call.out_dtype()})"


@lowers("RandomShuffle")
def shuffle(call: Call) -> str:
    x = call.arg("value")
    if not call.type_of("value").shape:
        return f"{x}.detach()"
    return f"{x}[{_draw(call, '_draw_permutation')}({call.random()}, {x}.shape[0])].detach()"


@lowers("Bernoulli")
def bernoulli(call: Call) -> str:
    probs = call.arg("probs")
    work = _work(call.type_of("probs").dtype)
    u = f"{_draw(call, '_draw_uniform')}({call.random()}, {probs}.shape, {work})"
    return f"({u} < {probs}).to({call.out_dtype()}).detach()"


@lowers("RandomPoisson")
def poisson(call: Call) -> str:
    lam = call.arg("lam")
    dims = tuple(int(v) for v in np.asarray(call.arg("shape")).reshape(-1))
    call.line(f"if not bool(({lam} >= 0).all()):")
    call.line("    raise ValueError('RandomPoisson: rates must be at least 0')")
    fn = _draw(call, "_draw_poisson")
    return f"{fn}({call.random()}, {lam}.detach(), {call.lit(dims)} + tuple({lam}.shape)).to({call.out_dtype()})"


@lowers("RandomGamma")
def gamma(call: Call) -> str:
    alpha, beta = call.arg("alpha"), call.arg("beta")
    dims = tuple(int(v) for v in np.asarray(call.arg("shape")).reshape(-1))
    work = _work(call.out_types[0].dtype)
    call.line(f"if not bool(({alpha} > 0).all()):")
    call.line("    raise ValueError('RandomGamma: alpha must be positive')")
    params = f"{alpha}.shape"
    if beta is not None:
        call.line(f"if not bool(({beta} > 0).all()):")
        call.line("    raise ValueError('RandomGamma: beta must be positive')")
        params = f"torch.broadcast_shapes({alpha}.shape, {beta}.shape)"
    g = f"{_draw(call, '_draw_gamma')}({call.random()}, {alpha}.detach(), {call.lit(dims)} + tuple({params}), {work})"
    if beta is not None:
        g = f"({g} / {beta}.detach()).to({work})"
    return f"{g}.to({call.out_dtype()}).detach()"


@lowers("Dropout")
def dropout(call: Call) -> str:
    """Active while the attr ``training`` is on and the module trains (``model.eval()`` turns it
    off, as a torch user expects; blockflow's runs are training runs). The mask is float32
    uniform draws at least ``rate``, as the block draws it; the gradient is the scaled mask."""
    x = call.arg("x")
    rate = float(call.attrs.get("rate", 0.5))
    if not call.attrs.get("training", True) or rate == 0:
        return x
    draws = f"{_draw(call, '_draw_uniform')}({call.random()}, {x}.shape, torch.float32)"
    scale = call.lit(1 / (1 - rate))
    return f"({x} * {scale} * ({draws} >= {call.lit(rate)})) if {call.training()} else {x}"
