"""The PyTorch lowerings of the array, nn and random blocks beyond the shared cases
(tests/test_export_torch.py): float32 pages, NCHW, SAME padding with strides, the kinks and ties
where torch's own gradient differs from the block's, training against evaluation, and the random
blocks, checked by their distribution and by replaying blockflow's own draws through the
generated file's ``_draw_*`` functions (docs/export.md, "Random blocks")."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import export_kit  # noqa: E402
from blockflow.compile.compiler import compile_project  # noqa: E402
from blockflow.export.torch_module import export_torch  # noqa: E402
from blockflow.run.runtime import run, stream_generator, stream_hash  # noqa: E402
from blockflow_blocks.random_ops import _truncated_standard_normal  # noqa: E402
from casekit import Case  # noqa: E402
from diagrams import chain  # noqa: E402
from export_kit import case_project, compare_with_torch, load_export, load_module  # noqa: E402

_rng = np.random.default_rng(15)


def _x(*shape, lo=-2.0, hi=2.0):
    return _rng.uniform(lo, hi, size=shape)


def _check(name, case, tmp_path, float64=True, **tol):
    project, feeds, outs = case_project(name, case, float64=float64)
    return compare_with_torch(project, feeds, outs, tmp_path, **tol)


# --------------------------------------------------------------------------------------------
# float32 pages


FLOAT32 = [
    ("Conv2D", Case((_x(2, 7, 6, 3).astype(np.float32), _x(3, 2, 3, 4).astype(np.float32)),
                    {"strides": [1, 2, 2, 1], "padding": "SAME"}), "conv-same-s2"),
    ("MaxPool", Case((_x(2, 5, 5, 3).astype(np.float32),), {"ksize": [1, 3, 3, 1], "padding": "SAME"}),
     "maxpool-same"),
    ("AvgPool", Case((_x(2, 5, 5, 3).astype(np.float32),), {"ksize": [1, 3, 2, 1], "padding": "SAME"}),
     "avgpool-same"),
    ("FusedBatchNormV3", Case((_x(4, 3, 3, 2).astype(np.float32), *[_x(2).astype(np.float32) + 2 for _ in range(4)]),
                              {"is_training": True}), "batchnorm-train"),
    ("Gelu", Case((_x(3, 4).astype(np.float32) * 4,), {"approximate": True}), "gelu-tanh"),
    ("SoftmaxCrossEntropyWithLogits",
     Case((_x(3, 5).astype(np.float32), _rng.dirichlet(np.ones(5), 3).astype(np.float32))), "xent"),
    ("StridedSlice", Case((_x(4, 5, 6).astype(np.float32), np.array([3, 0, -1]), np.array([0, 5, 0]),
                           np.array([-1, 2, -2]))), "strided-negative"),
]


@pytest.mark.parametrize("name, case", [pytest.param(n, c, id=i) for n, c, i in FLOAT32])
def test_float32_pages_equal_the_runtime(name, case, tmp_path):
    _check(name, case, tmp_path, float64=False, rtol=2e-5, atol=2e-6)


# --------------------------------------------------------------------------------------------
# NCHW, SAME padding with strides, dilations, explicit padding


def _nchw(a):
    return np.ascontiguousarray(a.transpose(0, 3, 1, 2))


WINDOWS = [
    ("Conv2D", Case((_nchw(_x(2, 7, 8, 3)), _x(3, 2, 3, 4)),
                    {"strides": [1, 1, 2, 3], "padding": "SAME", "data_format": "NCHW"}), "conv-nchw-same-s2x3"),
    ("Conv2D", Case((_nchw(_x(1, 9, 9, 2)), _x(3, 3, 2, 2)),
                    {"strides": [1, 1, 2, 2], "dilations": [1, 1, 2, 2], "padding": "SAME",
                     "data_format": "NCHW"}), "conv-nchw-same-dilated-s2"),
    ("Conv2D", Case((_nchw(_x(1, 5, 6, 2)), _x(2, 3, 2, 3)),
                    {"padding": "EXPLICIT", "explicit_paddings": [0, 0, 0, 0, 1, 2, 0, 3],
                     "data_format": "NCHW"}), "conv-nchw-explicit"),
    ("Conv2DBackpropInput", Case((np.array([2, 3, 7, 8]), _x(3, 2, 3, 4), _nchw(_x(2, 4, 3, 4))),
                                 {"strides": [1, 1, 2, 3], "padding": "SAME", "data_format": "NCHW"}),
     "backprop-nchw-same-s2x3"),
    ("Conv2DBackpropInput", Case((np.array([2, 8, 9, 3]), _x(3, 3, 3, 2), _x(2, 2, 4, 2)),
                                 {"strides": [1, 3, 2, 1], "padding": "VALID"}), "backprop-valid-s3x2"),
    ("MaxPool", Case((_nchw(_x(2, 7, 6, 3)),), {"ksize": [1, 1, 3, 2], "strides": [1, 1, 2, 2],
                                                  "padding": "SAME", "data_format": "NCHW"}), "maxpool-nchw-same"),
    ("AvgPool", Case((_nchw(_x(2, 7, 6, 3)),), {"ksize": [1, 1, 3, 2], "strides": [1, 1, 2, 3],
                                                  "padding": "SAME", "data_format": "NCHW"}), "avgpool-nchw-same"),
    ("BiasAdd", Case((_nchw(_x(2, 3, 4, 5)), _x(5)), {"data_format": "NCHW"}), "biasadd-nchw"),
    ("FusedBatchNormV3", Case((_nchw(_x(3, 4, 2, 3)), _x(3) + 2, _x(3), _x(3), _x(3) + 3),
                              {"data_format": "NCHW", "is_training": True, "exponential_avg_factor": 0.3}),
     "batchnorm-nchw-train-average"),
    ("FusedBatchNormV3", Case((_nchw(_x(3, 4, 2, 3)), _x(3) + 2, _x(3), _x(3), _x(3) + 3),
                              {"data_format": "NCHW", "is_training": False}), "batchnorm-nchw-inference"),
]


@pytest.mark.parametrize("name, case", [pytest.param(n, c, id=i) for n, c, i in WINDOWS])
def test_layouts_and_padding_equal_the_runtime(name, case, tmp_path):
    _check(name, case, tmp_path)


def test_max_pool_sends_a_tie_to_the_first_max(tmp_path):
    # integers in a small range: many ties inside windows, and windows reaching the SAME padding
    x = _rng.integers(-2, 2, size=(2, 6, 5, 2)).astype(np.float64)
    for ksize, strides in (([1, 3, 3, 1], [1, 1, 1, 1]), ([1, 2, 3, 1], [1, 2, 2, 1])):
        case = Case((x,), {"ksize": ksize, "strides": strides, "padding": "SAME"})
        _check("MaxPool", case, tmp_path)


def test_max_pool_never_sends_a_gradient_to_the_padding_or_from_a_nan(tmp_path):
    """Non-finite values cannot be fed to a blockflow run: the block's own forward and vjp are
    the reference here. A window whose real entries are all -inf next to the SAME padding gives
    its gradient to its first -inf; a window holding a NaN sends none."""
    from blockflow_blocks.nn_pool import MaxPool

    x = _rng.integers(-2, 2, size=(1, 4, 5, 1)).astype(np.float64)
    x[0, :2, :2, 0] = -np.inf
    x[0, 3, 4, 0] = np.nan
    attrs = {"ksize": [1, 3, 3, 1], "strides": [1, 2, 2, 1], "padding": "SAME", "explicit_paddings": [],
             "data_format": "NHWC"}
    project = chain(("x", "Placeholder", {"shape": [1, 4, 5, 1], "dtype": "float64"}, None),
                    ("B", "MaxPool", attrs, {"input": "x"}))
    export = export_torch(project, outputs=["B"])
    model = load_export(export, tmp_path).Model(initial=None)
    xt = torch.from_numpy(x).requires_grad_(True)
    out = model(xt)
    expect = MaxPool.forward(x, **attrs)
    np.testing.assert_array_equal(out.detach().numpy(), expect)
    g = _rng.standard_normal(expect.shape)
    (gx,) = torch.autograd.grad(out, xt, torch.from_numpy(g))
    np.testing.assert_allclose(gx.numpy(), MaxPool.vjp(g, expect, x, **attrs)[0], rtol=1e-12)


# --------------------------------------------------------------------------------------------
# Kinks: the gradient at exactly the points where torch's own rule differs


KINKS = [
    ("Relu6", Case((np.array([-1.0, 0.0, 3.0, 6.0, 7.0]),)), "relu6-at-0-and-6"),
    ("Selu", Case((np.array([-1.0, 0.0, 2.0]),)), "selu-at-0"),
    ("Elu", Case((np.array([-1.0, 0.0, 2.0]),)), "elu-at-0"),
    ("LeakyRelu", Case((np.array([-1.0, 0.0, 2.0]),), {"alpha": 0.3}), "leaky-at-0"),
    ("Softsign", Case((np.array([-1.0, 0.0, 2.0]),)), "softsign-at-0"),
    ("Gelu", Case((np.array([-40.0, -9.0, 0.0, 3.0]),)), "gelu-left-tail"),
    ("Gelu", Case((np.array([-40.0, -9.0, 0.0, 3.0]),), {"approximate": True}), "gelu-tanh-left-tail"),
    ("Softplus", Case((np.array([-50.0, 0.0, 21.0, 40.0]),)), "softplus-past-torch-threshold"),
    ("SigmoidCrossEntropyWithLogits", Case((np.array([0.2, 0.7, 1.0]), np.array([0.0, 3.0, -30.0]))),
     "logistic-at-0"),
    ("SoftmaxCrossEntropyWithLogits", Case((_x(3, 4), _x(3, 4, lo=0.0, hi=1.0))), "labels-not-summing-to-1"),
    ("Activation", Case((np.array([-1.0, 0.0, 2.0]),), {"kind": "selu"}), "activation-selu-at-0"),
    ("Activation", Case((np.array([-1.0, 0.0, 2.0, 6.0]),), {"kind": "relu6"}), "activation-relu6"),
    ("Activation", Case((np.array([-1.0, 0.0, 2.0]),), {"kind": "leaky_relu"}), "activation-leaky-at-0"),
    ("TopK", Case((np.array([[1.0, 3.0, 3.0, 0.0, 3.0]]), np.array(2)),), "topk-ties-lower-index-first"),
    ("TopK", Case((np.array([[1.0, 3.0, 3.0, 0.0, 3.0]]), np.array(2)), {"sorted": False}), "topk-unsorted-ties"),
]


@pytest.mark.parametrize("name, case", [pytest.param(n, c, id=i) for n, c, i in KINKS])
def test_kinks_and_ties_follow_the_block(name, case, tmp_path):
    _check(name, case, tmp_path)


def test_prevent_gradient_forbids_the_gradient_by_name(tmp_path):
    project = chain(("x", "Placeholder", {"shape": [3], "dtype": "float64"}, None),
                    ("stop", "PreventGradient", {"message": "not here"}, {"input": "x"}),
                    ("s", "Sum", {}, {"input": "stop"}))
    export = export_torch(project, outputs=["s"])
    model = load_export(export, tmp_path).Model(initial=None)
    x = torch.ones(3, dtype=torch.float64, requires_grad=True)
    out = model(x)
    assert float(out.detach()) == 3.0
    with pytest.raises(RuntimeError, match="stop.*not here"):
        out.backward()


# --------------------------------------------------------------------------------------------
# Training and evaluation


def test_learning_phase_is_the_module_training_flag(tmp_path):
    project = chain(("lp", "LearningPhase", {}, None))
    program = compile_project(project)
    export = export_torch(project, outputs=["lp"], program=program)
    model = load_export(export, tmp_path).Model(initial=None)
    assert bool(model()) == bool(run(program, {}, fetch=["lp"]).value("lp")) is True
    model.eval()
    assert bool(model()) is False


def test_dropout_drops_only_while_training(tmp_path):
    project = chain(("x", "Placeholder", {"shape": [400], "dtype": "float64"}, None),
                    ("d", "Dropout", {"rate": 0.25}, {"x": "x"}))
    export = export_torch(project, outputs=["d"])
    model = load_export(export, tmp_path).Model(initial=None, seed=4)
    x = torch.ones(400, dtype=torch.float64)
    y = model(x)
    kept = y != 0
    assert torch.allclose(y[kept], torch.full_like(y[kept], 1 / 0.75))
    assert 0.6 < float(kept.double().mean()) < 0.9
    model.eval()
    assert torch.equal(model(x), x)


# --------------------------------------------------------------------------------------------
# Random blocks: replaying blockflow's draws


def _np_dtype(dtype):
    return torch.empty((), dtype=dtype).numpy().dtype


def _replay(module, node="B", seed=0):
    """Make the module's _draw_* functions give blockflow's own draws for block ``node`` (the
    stream the runtime gives it at step 0 and run seed 0), through the numpy calls the block
    makes."""
    rng = stream_generator(stream_hash(node), seed, 0, 0)
    t = torch.from_numpy

    def arr(v):
        return np.asarray(v.detach().numpy() if isinstance(v, torch.Tensor) else v)

    table = {
        "_draw_uniform": lambda g, shape, dtype: t(np.asarray(rng.random(tuple(shape), dtype=_np_dtype(dtype)))),
        "_draw_normal": lambda g, shape, dtype: t(np.asarray(rng.standard_normal(tuple(shape),
                                                                                   dtype=_np_dtype(dtype)))),
        "_draw_truncated_normal": lambda g, shape, dtype: t(_truncated_standard_normal(rng, tuple(shape),
                                                                                       _np_dtype(dtype))),
        "_draw_integers": lambda g, lo, hi, shape, dtype: t(np.asarray(
            rng.integers(arr(lo), arr(hi), size=tuple(shape), dtype=_np_dtype(dtype)))),
        "_draw_permutation": lambda g, n: t(rng.permutation(n)),
        "_draw_poisson": lambda g, lam, shape: t(np.asarray(rng.poisson(arr(lam), size=tuple(shape)))),
        "_draw_gamma": lambda g, alpha, shape, dtype: t(np.asarray(rng.standard_gamma(
            arr(alpha).astype(_np_dtype(dtype)), size=tuple(shape), dtype=_np_dtype(dtype)))),
    }
    for name, fn in table.items():
        if hasattr(module, name):
            setattr(module, name, fn)
    return module


def _replaying(monkeypatch, seed=0):
    def load(source, folder, name="model"):
        return _replay(load_module(source, folder, name), seed=seed)
    monkeypatch.setattr(export_kit, "load_module", load)


def _random_cases():
    from cases_nn_ops import CASES as NN
    from cases_random_ops import CASES as RANDOM
    out = [(name, case) for name, cases in RANDOM.items() for case in cases]
    return out + [("Dropout", case) for case in NN["Dropout"]]


@pytest.mark.parametrize("name, case", [pytest.param(n, c, id=f"{n}-{c.id}") for n, c in _random_cases()])
def test_random_blocks_replay_blockflow_draws(name, case, tmp_path, monkeypatch):
    """With blockflow's draws, the exported code computes exactly what the block does with them
    (values, dtypes, shapes; Dropout's gradient too), float64 at rtol 1e-10."""
    _replaying(monkeypatch, seed=int(case.attrs.get("seed", 0)))
    if any(isinstance(v, np.ndarray) and v.dtype.kind == "f" and not np.isfinite(v).all() for v in case.inputs):
        pytest.skip("a blockflow run refuses non-finite feeds: test_multinomial_non_finite_logits covers it")
    project, feeds, outs = case_project(name, case, float64=case.attrs.get("dtype") != "float16")
    compare_with_torch(project, feeds, outs, tmp_path)


def test_multinomial_non_finite_logits(tmp_path):
    """-inf, +inf and NaN logits have probability 0 and a row with none finite gives `classes`,
    as the block's forward (the reference: a blockflow run refuses non-finite feeds)."""
    from blockflow_blocks.random_ops import Multinomial

    logits = np.array([[0.0, -np.inf, 1.0], [np.inf, 0.5, np.nan], [-np.inf, -np.inf, -np.inf]])
    project = chain(("x", "Placeholder", {"shape": [3, 3], "dtype": "float64"}, None),
                    ("B", "Multinomial", {"seed": 2}, {"logits": "x", "num_samples": np.int64(50)}))
    export = export_torch(project, outputs=["B"])
    module = _replay(load_export(export, tmp_path), seed=2)
    got = module.Model(initial=None)(torch.from_numpy(logits))
    expect = Multinomial.forward(logits, np.int64(50), output_dtype="int64", seed=2,
                                 rng=stream_generator(stream_hash("B"), 2, 0, 0))
    np.testing.assert_array_equal(got.numpy(), expect)


def test_a_replayed_sample_flows_downstream_without_a_gradient_into_it(tmp_path, monkeypatch):
    _replaying(monkeypatch, seed=5)
    project = chain(("mu", "Placeholder", {"shape": [2, 3], "dtype": "float64"}, None),
                    ("x", "Placeholder", {"shape": [2, 3], "dtype": "float64"}, None),
                    ("B", "RandomNormal", {"seed": 5, "dtype": "float64"}, {"mean": "mu"}),
                    ("m", "Multiply", {}, {"x": "B", "y": "x"}),
                    ("s", "Sum", {}, {"input": "m"}))
    project.pages[0].loss = "s"
    feeds = {"mu": _x(2, 3), "x": _x(2, 3)}
    export = compare_with_torch(project, feeds, ["B", "m"], tmp_path)
    assert "_draw_normal(" in export.source


# --------------------------------------------------------------------------------------------
# Random blocks: the distribution of torch's own draws


def _draws(tmp_path, specs, out="B", seed=11):
    project = chain(*specs)
    export = export_torch(project, outputs=[out])
    module = load_export(export, tmp_path)
    state = {k: torch.from_numpy(np.array(v)) for k, v in export.state.items()}

    def model():
        m = module.Model(initial=None, seed=seed)
        m.load_state_dict(state)   # the large constants are buffers
        return m
    first, again = model()(), model()()
    assert torch.equal(first, again), "the same seed must give the same draws"
    return first


N = 40000


def _close(value, expect, spread, sigmas=6):
    assert abs(float(value) - expect) < sigmas * spread, (float(value), expect)


def test_normal_and_truncated_normal_distributions(tmp_path):
    z = _draws(tmp_path, [("B", "RandomNormal", {"dtype": "float64"}, {"shape": [N], "mean": 1.5,
                                                                        "stddev": 2.0})])
    assert z.dtype == torch.float64 and z.shape == (N,) and not z.requires_grad
    _close(z.mean(), 1.5, 2.0 / N ** 0.5)
    _close(z.var(), 4.0, 4.0 * (2 / N) ** 0.5)
    t = _draws(tmp_path, [("B", "TruncatedNormal", {}, {"shape": [N], "mean": np.float32(0), "stddev": np.float32(1)})])
    assert t.dtype == torch.float32 and float(t.abs().max()) <= 2.0
    _close(t.var(), 0.7737, 0.01)   # the variance of N(0, 1) cut at ±2


def test_uniform_distributions(tmp_path):
    u = _draws(tmp_path, [("B", "RandomUniform", {}, {"shape": [N], "minval": np.float32(-1),
                                                         "maxval": np.float32(3)})])
    assert u.dtype == torch.float32 and float(u.min()) >= -1 and float(u.max()) < 3
    _close(u.mean(), 1.0, 4 / (12 * N) ** 0.5)
    h = _draws(tmp_path, [("B", "RandomUniform", {"dtype": "float16"}, {"shape": [N], "minval": np.float16(0),
                                                                             "maxval": np.float16(1)})])
    assert h.dtype == torch.float16 and float(h.max()) < 1
    i = _draws(tmp_path, [("B", "RandomUniform", {"dtype": "int32"}, {"shape": [N], "minval": np.int64(-2),
                                                                          "maxval": np.int64(3)})])
    assert i.dtype == torch.int32
    counts = torch.bincount((i + 2).long(), minlength=5).double() / N
    assert torch.allclose(counts, torch.full((5,), 0.2, dtype=torch.float64), atol=0.02)


def test_discrete_distributions(tmp_path):
    b = _draws(tmp_path, [("B", "Bernoulli", {}, {"probs": np.full(N, 0.3)})])
    assert b.dtype == torch.float64 and set(b.unique().tolist()) <= {0.0, 1.0}
    _close(b.mean(), 0.3, (0.21 / N) ** 0.5)
    with np.errstate(divide="ignore"):
        logits = np.log(np.array([[0.1, 0.6, 0.3], [0.5, 0.0, 0.5]]))
    m = _draws(tmp_path, [("B", "Multinomial", {}, {"logits": logits, "num_samples": np.int64(N)})])
    assert m.dtype == torch.int64 and m.shape == (2, N)
    freq = torch.stack([torch.bincount(row, minlength=3) for row in m]).double() / N
    assert torch.allclose(freq, torch.tensor([[0.1, 0.6, 0.3], [0.5, 0.0, 0.5]], dtype=torch.float64), atol=0.02)
    assert int((m[1] == 1).sum()) == 0
    p = _draws(tmp_path, [("B", "RandomPoisson", {"dtype": "int64"}, {"shape": [N], "lam": np.array([0.0, 3.5])})])
    assert p.shape == (N, 2) and int(p[:, 0].abs().sum()) == 0
    _close(p[:, 1].double().mean(), 3.5, (3.5 / N) ** 0.5)
    _close(p[:, 1].double().var(), 3.5, 3.5 * (2 / N) ** 0.5 * 2)
    s = _draws(tmp_path, [("B", "RandomShuffle", {}, {"value": np.arange(50.0)})])
    assert sorted(s.tolist()) == list(range(50)) and s.tolist() != list(range(50))


def test_gamma_distribution(tmp_path):
    g = _draws(tmp_path, [("B", "RandomGamma", {"dtype": "float64"}, {"shape": [N], "alpha": np.array([0.5, 4.0]),
                                                                          "beta": np.array(2.0)})])
    assert g.shape == (N, 2) and float(g.min()) > 0
    for j, alpha in enumerate((0.5, 4.0)):
        _close(g[:, j].mean(), alpha / 2, (alpha / 4 / N) ** 0.5)
        _close(g[:, j].var(), alpha / 4, alpha / 4 * 0.1)


# --------------------------------------------------------------------------------------------
# Random geometries: slicing, mirror padding, windows


def _compiles(name, case):
    try:
        case_project(name, case)
    except AssertionError:   # the block refuses this geometry when compiling
        return False
    return True


def _fuzz(name, make, count, seed):
    rng = np.random.default_rng(seed)
    cases = []
    while len(cases) < count:
        case = make(rng)
        if _compiles(name, case):
            cases.append(case)
    return cases


def _strided(rng):
    rank = int(rng.integers(1, 4))
    x = rng.standard_normal(tuple(int(d) for d in rng.integers(1, 6, size=rank)))
    n = int(rng.integers(1, rank + 2))
    begin, end = rng.integers(-6, 6, size=n), rng.integers(-6, 6, size=n)
    strides = rng.choice([-3, -2, -1, 1, 2, 3], size=n)
    masks = {k: int(rng.integers(0, 2 ** n)) for k in ("begin_mask", "end_mask", "new_axis_mask", "shrink_axis_mask")}
    masks["ellipsis_mask"] = int(1 << rng.integers(0, n)) if rng.random() < 0.3 else 0
    return Case((x, begin, end, strides), masks)


def _mirror(rng):
    rank = int(rng.integers(1, 4))
    shape = tuple(int(d) for d in rng.integers(1, 5, size=rank))
    pads = np.array([[int(rng.integers(0, d + 1)), int(rng.integers(0, d + 1))] for d in shape])
    return Case((rng.standard_normal(shape), pads), {"mode": str(rng.choice(["REFLECT", "SYMMETRIC"]))})


def _conv(rng):
    fmt = str(rng.choice(["NHWC", "NCHW"]))
    n, h, w, cin, cout = 2, int(rng.integers(3, 9)), int(rng.integers(3, 9)), int(rng.integers(1, 3)), 2
    kh, kw = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    sh, sw, dh, dw = (int(v) for v in rng.integers(1, 4, size=4))
    if rng.random() < 0.4:
        dh = dw = 1
    x = rng.standard_normal((n, h, w, cin))
    spatial = (lambda a, b: [1, a, b, 1]) if fmt == "NHWC" else (lambda a, b: [1, 1, a, b])
    attrs = {"strides": spatial(sh, sw), "dilations": spatial(dh, dw), "data_format": fmt,
             "padding": str(rng.choice(["SAME", "VALID"]))}
    return Case((x if fmt == "NHWC" else _nchw(x), rng.standard_normal((kh, kw, cin, cout))), attrs)


def _pool(rng):
    fmt = str(rng.choice(["NHWC", "NCHW"]))
    x = rng.integers(-3, 3, size=(2, int(rng.integers(2, 8)), int(rng.integers(2, 8)), 2)).astype(np.float64)
    kh, kw, sh, sw = (int(v) for v in rng.integers(1, 4, size=4))
    spatial = (lambda a, b: [1, a, b, 1]) if fmt == "NHWC" else (lambda a, b: [1, 1, a, b])
    attrs = {"ksize": spatial(kh, kw), "strides": spatial(sh, sw), "data_format": fmt,
             "padding": str(rng.choice(["SAME", "VALID"]))}
    return Case((x if fmt == "NHWC" else _nchw(x),), attrs)


def _gather(rng):
    rank = int(rng.integers(1, 4))
    shape = tuple(int(d) for d in rng.integers(1, 5, size=rank))
    b = int(rng.integers(0, rank))
    axis = int(rng.integers(b, rank))
    idx_shape = shape[:b] + tuple(int(d) for d in rng.integers(1, 4, size=int(rng.integers(0, 3))))
    indices = rng.integers(0, shape[axis], size=idx_shape).astype(np.int32)
    return Case((rng.standard_normal(shape), indices, np.int64(axis - rank if rng.random() < 0.3 else axis)),
                {"batch_dims": b})


FUZZ = ([("StridedSlice", c) for c in _fuzz("StridedSlice", _strided, 40, 1)]
        + [("MirrorPad", c) for c in _fuzz("MirrorPad", _mirror, 15, 2)]
        + [("Conv2D", c) for c in _fuzz("Conv2D", _conv, 20, 3)]
        + [("MaxPool", c) for c in _fuzz("MaxPool", _pool, 15, 4)]
        + [("AvgPool", c) for c in _fuzz("AvgPool", _pool, 15, 5)]
        + [("Gather", c) for c in _fuzz("Gather", _gather, 15, 6)])


@pytest.mark.parametrize("name, case", [pytest.param(n, c, id=f"{n}-{i}") for i, (n, c) in enumerate(FUZZ)])
def test_random_geometries_equal_the_runtime(name, case, tmp_path):
    _check(name, case, tmp_path)


def test_an_open_batch_dimension(tmp_path):
    """A page whose Placeholder leaves the batch size open exports once and runs any batch."""
    project = chain(("x", "Placeholder", {"shape": [-1, 6, 5, 2], "dtype": "float64"}, None),
                    ("w", "Placeholder", {"shape": [3, 3, 2, 4], "dtype": "float64"}, None),
                    ("c", "Conv2D", {"strides": [1, 2, 2, 1], "padding": "SAME"}, {"input": "x", "filter": "w"}),
                    ("p", "MaxPool", {"ksize": [1, 2, 2, 1], "strides": [1, 1, 1, 1], "padding": "SAME"},
                     {"input": "c"}),
                    ("a", "AvgPool", {"ksize": [1, 2, 2, 1], "strides": [1, 2, 1, 1], "padding": "SAME"},
                     {"value": "p"}),
                    ("r", "Reshape", {}, {"tensor": "a", "shape": np.array([-1, 24])}),
                    ("s", "LogSoftmax", {}, {"logits": "r"}),
                    ("t", "Sum", {}, {"input": "s"}))
    project.pages[0].loss = "t"
    for batch in (1, 3):
        compare_with_torch(project, {"x": _x(batch, 6, 5, 2), "w": _x(3, 3, 2, 4)}, ["s"], tmp_path)


def _backprop(rng):
    case = _conv(rng)
    x, w = case.inputs
    try:
        out = case_project("Conv2D", case)[0]
    except AssertionError:
        return Case((np.array([1, 1, 1, 1]), w, x), case.attrs)   # refused below, drawn again
    program = compile_project(out)
    shape = program.output_type("B", "output").shape
    return Case((np.array(x.shape), w, rng.standard_normal(shape)), case.attrs)


@pytest.mark.parametrize("case", [pytest.param(c, id=f"backprop-{i}")
                                  for i, c in enumerate(_fuzz("Conv2DBackpropInput", _backprop, 15, 7))])
def test_random_transposed_convolutions_equal_the_runtime(case, tmp_path):
    _check("Conv2DBackpropInput", case, tmp_path)


@pytest.mark.parametrize("specs, why", [
    ([("x", "Placeholder", {"shape": [-1, 4], "dtype": "float64"}, None),
      ("B", "StridedSlice", {}, {"input": "x", "begin": np.array([0]), "end": np.array([0]),
                                 "strides": np.array([-1]), })], "negative stride"),
    ([("x", "Placeholder", {"shape": [1, -1, 4, 1], "dtype": "float64"}, None),
      ("B", "MaxPool", {"padding": "SAME"}, {"input": "x"})], "SAME padding"),
], ids=["strided-slice-open-axis", "same-padding-open-height"])
def test_what_cannot_be_written_exactly_is_refused_by_name(specs, why):
    from blockflow.export.torch_module import ExportError

    with pytest.raises(ExportError, match=f"B .*{why}"):
        export_torch(chain(*specs), outputs=["B"])


def test_dropout_and_learning_phase_inside_a_composite(tmp_path, monkeypatch):
    """The sub-module draws from the Model's generator and follows its training flag."""
    from blockflow.composite import Composite, block_name
    from blockflow.project import Project

    comp = Composite("Noisy", doc="dropout, and the phase as a number")
    p = comp.page
    p.add_node("Input", id="x", attrs={"name": "x", "dtype": "float64", "shape": ["batch", 6]})
    p.add_node("Dropout", id="drop", attrs={"rate": 0.4, "seed": 7})
    p.connect("x", "output", "drop", "x")
    p.add_node("Output", id="y", attrs={"name": "y"})
    p.connect("drop", "output", "y", "input")
    p.add_node("LearningPhase", id="phase")
    p.add_node("Output", id="training", attrs={"name": "training"})
    p.connect("phase", "training", "training", "input")
    project = Project()
    project.composites["Noisy"] = comp
    page = project.add_page("main")
    page.add_node("Placeholder", id="X", attrs={"dtype": "float64", "shape": [5, 6]})
    page.add_node(block_name("Noisy"), id="n1")
    page.connect("X", "output", "n1", "x")
    page.add_node("Sum", id="loss")
    page.connect("n1", "y", "loss", "input")
    page.loss = "loss"
    # the compiler gives each instance's random blocks their own seed
    seed = int(compile_project(project).step("n1/drop").attrs["seed"])
    monkeypatch.setattr(export_kit, "load_module",
                        lambda source, folder, name="model": _replay(load_module(source, folder, name),
                                                                     node="n1/drop", seed=seed))
    export = compare_with_torch(project, {"X": _x(5, 6)}, ["n1:y"], tmp_path)
    module = load_export(export, tmp_path)
    model = module.Model(initial=None)
    x = torch.ones(5, 6, dtype=torch.float64)
    y, loss = model(x)
    assert 0 < int((y == 0).sum()) < 30
    model.eval()
    y, loss = model(x)
    assert torch.equal(y, x) and float(loss) == 30.0


@pytest.mark.parametrize("dtype, value", [("bool", 1.0), ("int32", -3.0), ("float64", 2.5)])
def test_pad_keeps_the_dtype(dtype, value, tmp_path):
    x = (_rng.random((2, 3)) < 0.5) if dtype == "bool" else _rng.integers(-4, 4, size=(2, 3))
    case = Case((np.asarray(x, dtype=dtype), np.array([[1, 0], [2, 1]])), {"constant_values": value})
    _check("Pad", case, tmp_path)
