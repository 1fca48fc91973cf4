"""random_ops: the samplers' statistics, TF's edge cases, reproducibility, and seeding through the
runtime (step and node id)."""
from __future__ import annotations

import numpy as np
import pytest

from blockflow.compile.compiler import compile_project
from blockflow.errors import BlockExecutionError
from blockflow.run.runtime import run
from blockflow.spec import ShapeError, TensorType
from blockflow_blocks import random_ops as R

from casekit import ints
from diagrams import chain

N = 200_000  # draws for the statistics; tolerances are ~5 standard errors


def gen(seed=0):
    return np.random.default_rng(seed)


def f32(x):
    return np.asarray(x, dtype=np.float32)


def _close_mean(samples, mean, std, k=5.0):
    """The sample mean is within k standard errors of ``mean``."""
    err = abs(float(np.mean(samples, dtype=np.float64)) - mean)
    assert err <= k * std / np.sqrt(np.size(samples)), (np.mean(samples), mean)


def _close_std(samples, std, rel=0.01):
    assert abs(float(np.std(samples, dtype=np.float64)) / std - 1) <= rel, (np.std(samples), std)


# --------------------------------------------------------------------------------------------
# Normal, truncated normal, uniform


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_random_normal_statistics(dtype):
    z = R.RandomNormal.forward(ints([N]), f32(3.0), f32(2.0), dtype=dtype, seed=0, rng=gen())
    assert z.dtype == dtype and z.shape == (N,)
    _close_mean(z, 3.0, 2.0, k=5 if dtype != "float16" else 10)
    _close_std(z, 2.0)


def test_random_normal_unwired_parameters_are_standard():
    z = R.RandomNormal.forward(ints([N]), None, None, dtype="float32", seed=0, rng=gen())
    assert z.dtype == np.float32
    _close_mean(z, 0.0, 1.0)
    _close_std(z, 1.0)
    # only the stddev wired, or only the mean
    z = R.RandomNormal.forward(ints([N]), None, f32(0.5), dtype="float32", seed=0, rng=gen())
    _close_mean(z, 0.0, 0.5)
    _close_std(z, 0.5)
    z = R.RandomNormal.forward(ints([N]), np.float64(-4.0), None, dtype="float32", seed=0, rng=gen())
    assert z.dtype == np.float32
    _close_mean(z, -4.0, 1.0)


def test_random_normal_parameters_per_element():
    mean = np.broadcast_to(f32([[-10.0], [0.0], [10.0]])[:, None, :], (3, N // 10, 1))
    stddev = f32([1.0, 0.1])  # broadcast against the mean: the result is [3, N/10, 2]
    z = R.RandomNormal.forward(None, mean, stddev, dtype="float32", seed=0, rng=gen())
    assert z.shape == (3, N // 10, 2) and z.dtype == np.float32
    for i, m in enumerate([-10.0, 0.0, 10.0]):
        for j, s in enumerate([1.0, 0.1]):
            _close_mean(z[i, :, j], m, s)
            _close_std(z[i, :, j], s, rel=0.03)
    same = R.RandomNormal.forward(ints([3, N // 10, 2]), mean, stddev, dtype="float32", seed=0, rng=gen())
    np.testing.assert_array_equal(same, z)


def test_random_normal_takes_its_shape_from_the_parameters_when_unwired():
    mean = np.zeros((4, 1), np.float32)
    stddev = np.ones(3, np.float32)
    spec = R.RandomNormal
    assert spec.forward(None, mean, stddev, dtype="float32", seed=0, rng=gen()).shape == (4, 3)
    assert spec.infer(None, TensorType((None, 1), "float32"), TensorType((3,), "float32"),
                      dtype="float32", seed=0).shape == (None, 3)
    assert spec.forward(None, None, None, dtype="float32", seed=0, rng=gen()).shape == ()
    assert spec.infer(None, None, None, dtype="float64", seed=0) == TensorType((), "float64")


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_truncated_normal_stays_within_two_standard_deviations(dtype):
    z = R.TruncatedNormal.forward(ints([N]), f32(1.0), f32(3.0), dtype=dtype, seed=0, rng=gen())
    assert z.dtype == dtype
    slack = 7 * 4 * np.finfo(dtype).eps  # a few ulps of 7: rounding of z * 3 + 1
    assert z.min() >= 1 - 6 - slack and z.max() <= 1 + 6 + slack
    # N(0, 1) truncated to [-2, 2]: standard deviation sqrt(1 - 4 phi(2) / (2 Phi(2) - 1)) = 0.8796
    _close_mean(z, 1.0, 3 * 0.8796, k=5 if dtype != "float16" else 10)
    _close_std(z, 3 * 0.8796)
    assert np.abs(z - 1).max() > 5.9  # the tails up to the cut are there


def test_truncated_normal_redraws_until_none_is_out():
    z = R.TruncatedNormal.forward(ints([1000, 100]), None, None, dtype="float32", seed=0, rng=gen(3))
    assert z.shape == (1000, 100) and np.abs(z).max() <= 2.0
    # about 4.6% of a plain normal draw is beyond 2: they have all been replaced
    plain = gen(3).standard_normal((1000, 100), dtype=np.float32)
    assert np.mean(np.abs(plain) > 2) > 0.04


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_random_uniform_statistics(dtype):
    u = R.RandomUniform.forward(ints([N]), f32(-1.0), f32(3.0), dtype=dtype, seed=0, rng=gen())
    assert u.dtype == dtype
    assert u.min() >= -1.0 and u.max() <= 3.0
    _close_mean(u, 1.0, 4 / np.sqrt(12))
    _close_std(u, 4 / np.sqrt(12))
    u = R.RandomUniform.forward(ints([N]), None, None, dtype=dtype, seed=0, rng=gen())
    assert u.min() >= 0 and u.max() < 1
    _close_mean(u, 0.5, 1 / np.sqrt(12))


def test_random_uniform_with_one_bound():
    u = R.RandomUniform.forward(ints([N]), f32(0.5), None, dtype="float32", seed=0, rng=gen())
    assert u.min() >= 0.5 and u.max() < 1.0
    _close_mean(u, 0.75, 0.5 / np.sqrt(12))
    u = R.RandomUniform.forward(ints([N]), None, f32(10.0), dtype="float32", seed=0, rng=gen())
    assert u.min() >= 0 and u.max() < 10.0
    _close_mean(u, 5.0, 10 / np.sqrt(12))


def test_random_uniform_bounds_per_element():
    lo = f32([0.0, 10.0, -5.0])
    u = R.RandomUniform.forward(ints([N // 10, 3]), lo, lo + 1, dtype="float32", seed=0, rng=gen())
    assert np.all(u >= lo) and np.all(u < lo + 1)
    np.testing.assert_allclose(u.mean(axis=0), lo + 0.5, atol=0.01)


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_random_uniform_integers_are_uniform_over_the_range(dtype):
    u = R.RandomUniform.forward(ints([N]), ints(-3), ints(4), dtype=dtype, seed=0, rng=gen())
    assert u.dtype == dtype and u.min() == -3 and u.max() == 3
    freq = np.bincount(u + 3, minlength=7) / N
    np.testing.assert_allclose(freq, 1 / 7, atol=5 * np.sqrt(1 / 7 * 6 / 7 / N))
    # maxval alone: [0, maxval)
    u = R.RandomUniform.forward(ints([1000]), None, ints(2), dtype=dtype, seed=0, rng=gen())
    assert set(np.unique(u).tolist()) == {0, 1}


def test_random_uniform_integers_need_maxval_and_integer_bounds():
    spec = R.RandomUniform
    with pytest.raises(ShapeError, match="needs maxval"):
        spec.infer(ints([3]), None, None, dtype="int32", seed=0)
    with pytest.raises(ShapeError, match="maxval must be an integer"):
        spec.infer(ints([3]), None, TensorType((), "float32"), dtype="int64", seed=0)
    with pytest.raises(ValueError, match="minval < maxval"):
        spec.forward(ints([2]), ints(5), ints([6, 5]), dtype="int64", seed=0, rng=gen())
    # float bounds are fine for a float dtype, integer ones too
    assert spec.infer(ints([3]), TensorType((), "int64"), TensorType((), "int64"), dtype="float32",
                      seed=0) == TensorType((3,), "float32")
    u = spec.forward(ints([100]), ints(2), ints(4), dtype="float32", seed=0, rng=gen())
    assert u.dtype == np.float32 and u.min() >= 2 and u.max() < 4


@pytest.mark.parametrize("name", ["RandomNormal", "TruncatedNormal", "RandomUniform"])
def test_parameters_must_broadcast_to_shape(name):
    spec = getattr(R, name)
    attrs = {"dtype": "float32", "seed": 0}
    with pytest.raises(ShapeError, match=r"of shape \[4\] does not broadcast to shape \[2,3\]"):
        spec.infer(ints([2, 3]), TensorType((4,), "float32"), None, **attrs)
    with pytest.raises(ShapeError, match=r"of shape \[2,3\] does not broadcast to shape \[3\]"):
        spec.infer(ints([3]), None, TensorType((2, 3), "float32"), **attrs)
    with pytest.raises(ShapeError, match="does not broadcast"):  # [2,1] would grow [1,3]'s first axis
        spec.infer(ints([1, 3]), TensorType((2, 1), "float32"), None, **attrs)
    with pytest.raises(ShapeError, match="list of integer sizes"):
        spec.infer(ints(3), None, None, **attrs)
    with pytest.raises(ShapeError, match="at least 0"):
        spec.infer(ints([2, -1]), None, None, **attrs)
    # unknown sizes pass at compile time; forward checks the real ones
    assert spec.infer(ints([2, 3]), TensorType((None,), "float32"), None, **attrs).shape == (2, 3)
    with pytest.raises(ShapeError, match=r"of shape \[4\] does not broadcast to shape \[2,3\]"):
        spec.forward(ints([2, 3]), f32(np.zeros(4)), None, **attrs, rng=gen())
    with pytest.raises(ShapeError, match="do not broadcast"):
        spec.infer(None, TensorType((2,), "float32"), TensorType((3,), "float32"), **attrs)


# --------------------------------------------------------------------------------------------
# Multinomial


def _softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_multinomial_frequencies_match_softmax(dtype):
    logits = np.array([[1.0, 2.0, 3.0, 0.0], [-1.0, 0.0, 5.0, -2.0], [0.0, 0.0, 0.0, 0.0],
                       [1000.0, 1001.0, 999.0, 1000.5]], dtype=dtype)  # large logits: no overflow
    n = 50_000
    s = R.Multinomial.forward(logits, ints(n), output_dtype="int64", seed=0, rng=gen())
    assert s.shape == (4, n) and s.dtype == np.int64
    p = _softmax(logits.astype(np.float64))
    for row in range(4):
        freq = np.bincount(s[row], minlength=4) / n
        assert np.all(np.abs(freq - p[row]) <= 5 * np.sqrt(p[row] * (1 - p[row]) / n) + 1e-12), (freq, p[row])


def test_multinomial_never_draws_an_impossible_class():
    # many rows: the rows share one search, shifted by their index; a class of probability 0
    # (before, between or after the possible ones) must still never come out
    batch, classes = 3000, 5
    logits = np.full((batch, classes), -np.inf)
    logits[np.arange(batch), np.arange(batch) % classes] = 0.0  # row r can only give r % 5
    s = R.Multinomial.forward(logits, ints(20), output_dtype="int32", seed=0, rng=gen())
    assert s.dtype == np.int32
    np.testing.assert_array_equal(s, np.broadcast_to((np.arange(batch) % classes)[:, None], s.shape))
    two = np.array([[-np.inf, 0.0, -np.inf, 0.0, -np.inf]] * batch)
    s = R.Multinomial.forward(two, ints(50), output_dtype="int64", seed=0, rng=gen())
    assert set(np.unique(s).tolist()) == {1, 3}


def test_multinomial_treats_non_finite_logits_as_tensorflow():
    # TF's kernel skips non-finite logits (probability 0); a row with none left draws `classes`.
    logits = np.array([[np.inf, 0.0, np.nan], [-np.inf, -np.inf, -np.inf], [np.nan, np.nan, 1.0]])
    s = R.Multinomial.forward(logits, ints(30), output_dtype="int64", seed=0, rng=gen())
    np.testing.assert_array_equal(s[0], 1)
    np.testing.assert_array_equal(s[1], 3)
    np.testing.assert_array_equal(s[2], 2)


def test_multinomial_does_not_touch_its_input():
    logits = np.array([[0.0, -np.inf, 1.0]], dtype=np.float64)
    logits.setflags(write=False)
    R.Multinomial.forward(logits, ints(5), output_dtype="int64", seed=0, rng=gen())
    np.testing.assert_array_equal(logits, [[0.0, -np.inf, 1.0]])


def test_multinomial_infer():
    spec = R.Multinomial
    t = spec.infer(TensorType((None, 10), "float32"), ints(3), output_dtype="int64", seed=0)
    assert t == TensorType((None, 3), "int64")
    with pytest.raises(ShapeError, match=r"\[batch, classes\]"):
        spec.infer(TensorType((10,), "float32"), ints(3), output_dtype="int64", seed=0)
    with pytest.raises(ShapeError, match="no classes"):
        spec.infer(TensorType((2, 0), "float32"), ints(3), output_dtype="int64", seed=0)
    for bad in (ints(-1), ints([3]), np.array(2.5)):
        with pytest.raises(ShapeError, match="num_samples"):
            spec.infer(TensorType((2, 3), "float32"), bad, output_dtype="int64", seed=0)


# --------------------------------------------------------------------------------------------
# RandomShuffle, Bernoulli, Poisson, gamma


def test_random_shuffle_permutes_rows_and_keeps_them_whole():
    x = np.arange(30, dtype=np.float32).reshape(10, 3)
    x.setflags(write=False)
    y = R.RandomShuffle.forward(x, seed=0, rng=gen())
    assert y.dtype == x.dtype and y.shape == x.shape
    assert not np.array_equal(y, x)
    np.testing.assert_array_equal(y[:, 1:] - y[:, :1], [[1, 2]] * 10)  # rows intact
    np.testing.assert_array_equal(np.sort(y[:, 0]), x[:, 0])
    np.testing.assert_array_equal(x, np.arange(30).reshape(10, 3))
    # every position equally likely for the first row
    firsts = [int(np.argmax(R.RandomShuffle.forward(np.arange(4), seed=0, rng=gen(i)) == 0))
              for i in range(4000)]
    np.testing.assert_allclose(np.bincount(firsts) / 4000, 0.25, atol=0.03)
    assert R.RandomShuffle.forward(np.float32(2.5), seed=0, rng=gen()) == 2.5


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_bernoulli_frequencies_and_dtype(dtype):
    probs = np.array([0.0, 0.1, 0.5, 0.93, 1.0], dtype=dtype)
    probs_big = np.broadcast_to(probs, (N // 5, 5))
    s = R.Bernoulli.forward(probs_big, seed=0, rng=gen())
    assert s.dtype == dtype and s.shape == probs_big.shape
    assert set(np.unique(s).tolist()) <= {0.0, 1.0}
    freq = s.astype(np.float64).mean(axis=0)
    p = probs.astype(np.float64)
    assert np.all(np.abs(freq - p) <= 5 * np.sqrt(p * (1 - p) / (N // 5)) + 1e-12), freq
    assert freq[0] == 0 and freq[-1] == 1


def test_bernoulli_edge_probabilities():
    s = R.Bernoulli.forward(np.array([-0.5, 1.5, np.nan]), seed=0, rng=gen())
    np.testing.assert_array_equal(s, [0.0, 1.0, 0.0])
    assert R.Bernoulli.infer(TensorType((None, 4), "float32"), seed=0) == TensorType((None, 4), "float32")


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_bernoulli_is_the_comparison_of_the_draws_cast_bit_for_bit(dtype):
    """Bernoulli writes the comparison over its draws for float32/64 (no second array): the same
    bits as comparing a uniform draw of the work dtype and casting, read-only probs left alone."""
    probs = np.array([[-0.5, 0.0, 0.3, 0.5], [0.7, 1.0, 1.5, np.nan], [np.inf, -np.inf, 1e-30, 0.999]], dtype)
    probs.flags.writeable = False
    work = np.float64 if dtype == "float64" else np.float32
    for seed in range(5):
        want = (np.random.default_rng(seed).random(probs.shape, dtype=work) < probs).astype(dtype)
        got = R.Bernoulli.forward(probs, seed=0, rng=np.random.default_rng(seed))
        assert got.dtype == dtype and got.shape == probs.shape and got.flags.writeable
        assert got.tobytes() == want.tobytes()


def test_random_poisson_statistics():
    lam = np.array([0.0, 0.5, 4.0, 100.0], dtype=np.float32)
    k = R.RandomPoisson.forward(ints([N // 4]), lam, dtype="float32", seed=0, rng=gen())
    assert k.shape == (N // 4, 4) and k.dtype == np.float32
    assert np.all(k == np.round(k)) and k.min() >= 0
    assert np.all(k[:, 0] == 0)
    for j in range(1, 4):
        _close_mean(k[:, j], lam[j], np.sqrt(lam[j]))
        _close_std(k[:, j], np.sqrt(lam[j]), rel=0.03)
    k = R.RandomPoisson.forward(ints([2, 3]), np.float64(2.0), dtype="int32", seed=0, rng=gen())
    assert k.shape == (2, 3) and k.dtype == np.int32
    with pytest.raises(ValueError, match="at least 0"):
        R.RandomPoisson.forward(ints([2]), f32([1.0, -1.0]), dtype="float32", seed=0, rng=gen())
    t = R.RandomPoisson.infer(ints([5]), TensorType((None, 2), "float32"), dtype="int64", seed=0)
    assert t == TensorType((5, None, 2), "int64")


def test_random_gamma_statistics():
    alpha = f32([0.5, 2.0, 9.0])
    beta = f32([[1.0], [4.0]])
    g = R.RandomGamma.forward(ints([N // 6]), alpha, beta, dtype="float32", seed=0, rng=gen())
    assert g.shape == (N // 6, 2, 3) and g.dtype == np.float32 and g.min() > 0
    for i, b in enumerate([1.0, 4.0]):
        for j, a in enumerate([0.5, 2.0, 9.0]):
            _close_mean(g[:, i, j], a / b, np.sqrt(a) / b)
            _close_std(g[:, i, j], np.sqrt(a) / b, rel=0.04)
    g = R.RandomGamma.forward(ints([N]), np.float64(3.0), None, dtype="float64", seed=0, rng=gen())
    _close_mean(g, 3.0, np.sqrt(3.0))
    with pytest.raises(ValueError, match="alpha must be positive"):
        R.RandomGamma.forward(ints([2]), f32([1.0, 0.0]), None, dtype="float32", seed=0, rng=gen())
    with pytest.raises(ValueError, match="beta must be positive"):
        R.RandomGamma.forward(ints([2]), f32(1.0), f32(-1.0), dtype="float32", seed=0, rng=gen())
    t = R.RandomGamma.infer(ints([5]), TensorType((3,), "float32"), TensorType((None, 1), "float32"),
                            dtype="float16", seed=0)
    assert t == TensorType((5, None, 3), "float16")


# --------------------------------------------------------------------------------------------
# Reproducibility


DRAWS = {
    "RandomNormal": ((ints([50]), f32(0.0), f32(1.0)), {"dtype": "float32"}),
    "TruncatedNormal": ((ints([50]), None, None), {"dtype": "float32"}),
    "RandomUniform": ((ints([50]), None, None), {"dtype": "float32"}),
    "Multinomial": ((np.zeros((2, 10)), ints(25)), {"output_dtype": "int64"}),
    "RandomShuffle": ((np.arange(50),), {}),
    "Bernoulli": ((np.full(50, 0.5, np.float32),), {}),
    "RandomPoisson": ((ints([50]), f32(3.0)), {"dtype": "float32"}),
    "RandomGamma": ((ints([50]), f32(2.0), None), {"dtype": "float32"}),
}


@pytest.mark.parametrize("name", list(DRAWS))
def test_a_draw_is_fixed_by_the_generator_state(name):
    spec = getattr(R, name)
    inputs, attrs = DRAWS[name]
    a = spec.forward(*inputs, **attrs, seed=0, rng=gen(5))
    b = spec.forward(*inputs, **attrs, seed=0, rng=gen(5))
    c = spec.forward(*inputs, **attrs, seed=0, rng=gen(6))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert spec.gradient == "none" and not spec.differentiable
    assert not any(o.differentiable for o in spec.outputs)
    assert "rng" in spec.forward_context and spec.attr_map["seed"].default == 0


def test_aliases():
    assert R.RandomNormal.aliases == ("RandomStandardNormal",)
    assert R.Multinomial.aliases == ("Categorical",)
    assert "RandomUniformInt" in R.RandomUniform.aliases
    assert "RandomPoissonV2" in R.RandomPoisson.aliases


# --------------------------------------------------------------------------------------------
# Through the runtime: the stream is fixed by seed, step and node id


def _sampler_project():
    return chain(
        ("a", "RandomNormal", {"seed": 7}, {"shape": [2, 3]}),
        ("b", "RandomNormal", {"seed": 7}, {"shape": [2, 3]}),
        ("c", "RandomNormal", {"seed": 8}, {"shape": [2, 3]}),
        ("p", "Placeholder", {"shape": [-1, 4]}, None),
        ("probs", "Sigmoid", {}, {"x": "p"}),
        ("h", "Bernoulli", {}, {"probs": "probs"}),
        ("v", "RandomNormal", {}, {"mean": "p", "stddev": 0.5}),  # shape from the wired mean
        ("m", "Multinomial", {"seed": 1}, {"logits": "p", "num_samples": 6}),
        ("u", "RandomUniform", {"dtype": "int32"}, {"shape": [5], "maxval": 10}),
        feeds={"p": np.zeros((3, 4), np.float32)},
    )


def test_runtime_draws_are_reproducible_per_step_and_differ_per_node():
    program = compile_project(_sampler_project())
    assert program.ok, [str(d) for d in program.errors]
    nodes = ("a", "b", "c", "h", "v", "m", "u")
    first = run(program, step=0)
    again = run(program, step=0)
    later = run(program, step=1)
    for node in nodes:
        np.testing.assert_array_equal(first.value(node), again.value(node), err_msg=node)
        assert not np.array_equal(first.value(node), later.value(node)), node
    # same seed, different node ids: different streams
    assert not np.array_equal(first.value("a"), first.value("b"))
    assert not np.array_equal(first.value("a"), first.value("c"))
    # the seed attr changes the stream of one and the same node
    project = _sampler_project()
    project.pages[0].nodes["a"].attrs["seed"] = 8
    reseeded = run(compile_project(project), step=0)
    assert not np.array_equal(reseeded.value("a"), first.value("a"))
    np.testing.assert_array_equal(reseeded.value("b"), first.value("b"))
    # dtypes and shapes, with the batch size taken from the feed
    assert first.value("a").dtype == np.float32 and first.value("a").shape == (2, 3)
    assert first.value("h").dtype == np.float32 and first.value("h").shape == (3, 4)
    assert set(np.unique(first.value("h")).tolist()) <= {0.0, 1.0}
    assert first.value("v").shape == (3, 4) and first.value("v").dtype == np.float32
    assert first.value("m").shape == (3, 6) and first.value("m").dtype == np.int64
    assert first.value("u").dtype == np.int32 and 0 <= first.value("u").min() <= first.value("u").max() < 10
    fed = run(program, {"p": np.zeros((7, 4), np.float32)}, step=0)
    assert fed.value("h").shape == (7, 4) and fed.value("m").shape == (7, 6)


def test_runtime_compile_errors_for_random_blocks():
    project = chain(("u", "RandomUniform", {"dtype": "int64"}, {"shape": [5]}))
    program = compile_project(project)
    assert not program.ok
    assert any("needs maxval" in str(d) for d in program.errors)


def test_no_gradient_flows_through_a_sampler():
    # loss = Sum(p * Bernoulli(Sigmoid(p))): the sample is a constant for the gradient
    project = chain(
        ("p", "Placeholder", {"shape": [5], "dtype": "float64"}, None),
        ("probs", "Sigmoid", {}, {"x": "p"}),
        ("h", "Bernoulli", {}, {"probs": "probs"}),
        ("prod", "Multiply", {}, {"x": "p", "y": "h"}),
        ("loss", "Sum", {}, {"input": "prod"}),
        feeds={"p": np.linspace(-1, 1, 5)},
    )
    program = compile_project(project)
    assert program.ok, [str(d) for d in program.errors]
    res = run(program, target="loss", step=3)
    np.testing.assert_array_equal(res.variable_grads["p"], res.value("h"))


def test_a_runtime_failure_names_the_sampler():
    project = chain(("g", "RandomGamma", {}, {"shape": [3], "alpha": [1.0, -1.0]}))
    program = compile_project(project)
    assert program.ok
    with pytest.raises(BlockExecutionError, match="alpha must be positive"):
        run(program)
