"""A checked run may skip reading a Variable's gradient made by one large matrix product when the
product's operands certify it finite (run/certify.py, lower.CERTIFY_PRODUCTS): the certificate
is sound, and runs with it give the same results and the same NaN/Inf reports as without."""
from __future__ import annotations

import numpy as np
import pytest

import blockflow.run.lower as lower
from blockflow.compile.compiler import compile_project
from blockflow.errors import NumericsError
from blockflow.run.certify import certify_product
from blockflow.run.runtime import run

from diagrams import chain

RNG = np.random.default_rng(44)


def test_the_certificate_refuses_what_it_cannot_vouch_for():
    x = RNG.normal(size=(8, 5)).astype(np.float32)
    g = RNG.normal(size=(8, 3)).astype(np.float32)
    assert certify_product(x, g)
    for bad in (np.nan, np.inf, -np.inf):
        y = x.copy()
        y[3, 1] = bad
        assert not certify_product(y, g) and not certify_product(g, y)
    with np.errstate(over="ignore"):   # as in a run: the norms overflow
        assert not certify_product(np.full((8, 5), 3e19, np.float32), np.full((8, 3), 3e19, np.float32))
    assert not certify_product(x.astype(np.float16), g.astype(np.float16))
    assert not certify_product(x, g.astype(np.float64))
    assert not certify_product(np.asfortranarray(x), g)
    assert not certify_product(np.float32(2.0), g)
    assert certify_product(x.astype(np.float64) * 1e150, g.astype(np.float64) * 1e150)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_certified_product_is_finite_in_every_orientation(dtype):
    """Near the bound: products of operands scaled up to where the certificate starts refusing;
    whenever it vouches, every product of the two (a.T @ g, g.T @ a...) is finite."""
    big = float(np.finfo(dtype).max)
    vouched = refused = 0
    with np.errstate(over="ignore", invalid="ignore"):
        for scale in np.geomspace(1, big ** 0.6, 60):
            a = (RNG.normal(size=(16, 12)) * scale).astype(dtype)
            g = (RNG.normal(size=(16, 9)) * scale).astype(dtype)
            if not np.isfinite(a).all() or not np.isfinite(g).all():
                continue
            if certify_product(a, g):
                vouched += 1
                for product in (a.T @ g, g.T @ a, (a.T @ g).T):
                    assert np.isfinite(product).all(), scale
            else:
                refused += 1
    assert vouched > 5 and refused > 3


def _layer():
    """A first layer whose weights' gradient (256x160) is larger than its input and cotangent."""
    project = chain(("x", "Placeholder", {"shape": [6, 256]}, None),
                    ("W", "Variable", {"shape": [256, 160], "initializer": "glorot_uniform", "seed": 5}, None),
                    ("mm", "MatMul", {}, {"a": "x", "b": "W:ref"}),
                    ("t", "Tanh", {}, {"x": "mm"}),
                    ("loss", "Sum", {}, {"input": "t"}))
    project.pages[0].loss = "loss"
    return project


def _runs(monkeypatch, feeds):
    out = []
    for certify in (False, True):
        monkeypatch.setattr(lower, "CERTIFY_PRODUCTS", certify)
        program = compile_project(_layer())
        try:
            result = run(program, feeds, target="loss", record=False)
        except NumericsError as exc:
            result = str(exc)
        source = [p.source for p in program.cache("plans").values() if not p.record][0]
        out.append((result, source))
    return out


def test_a_certified_gradient_is_the_same_and_not_read(monkeypatch):
    feeds = {"x": RNG.normal(size=(6, 256)).astype(np.float32)}
    (plain, plain_src), (certified, src) = _runs(monkeypatch, feeds)
    assert "_cert(" in src and "_cert(" not in plain_src
    np.testing.assert_array_equal(certified.variable_grads["W"], plain.variable_grads["W"])


@pytest.mark.parametrize("value", [np.nan, np.inf, 1e30])
def test_a_bad_input_is_reported_as_without_the_certificate(monkeypatch, value):
    """NaN, Inf, or values whose products overflow: the certificate refuses, the gradient is
    read, and the report names the same block and port as a run without certificates."""
    x = RNG.normal(size=(6, 256)).astype(np.float32)
    x[2, 7] = value
    if value == 1e30:
        x[:, :] = 1e30 * np.sign(x)   # the product overflows in mm already
    (plain, _), (certified, _) = _runs(monkeypatch, {"x": x})
    if value != 1e30:
        assert isinstance(plain, str) and certified == plain
    elif isinstance(plain, str):
        assert certified == plain
    else:   # finite after all (tanh saturates): the same gradient
        np.testing.assert_array_equal(certified.variable_grads["W"], plain.variable_grads["W"])


def test_an_overflow_is_reported_as_without_the_certificate(monkeypatch):
    """Finite operands whose products overflow (x of 1e10 through a Multiply by 1e30): the
    certificate's bound refuses, and the report is the one a run without certificates gives."""
    project = chain(("x", "Placeholder", {"shape": [6, 256]}, None),
                    ("W", "Variable", {"shape": [256, 160], "initializer": "glorot_uniform", "seed": 5}, None),
                    ("mm", "MatMul", {}, {"a": "x", "b": "W:ref"}),
                    ("big", "Multiply", {}, {"x": "mm", "y": np.float32(1e30)}),
                    ("loss", "Sum", {}, {"input": "big"}))
    project.pages[0].loss = "loss"
    x = np.full((6, 256), 1e10, np.float32)
    messages = []
    for certify in (False, True):
        monkeypatch.setattr(lower, "CERTIFY_PRODUCTS", certify)
        program = compile_project(project)
        with pytest.raises(NumericsError) as info:
            run(program, {"x": x}, target="loss", record=False)
        messages.append(str(info.value))
        assert ("_cert(" in [p.source for p in program.cache("plans").values() if not p.record][0]) == certify
    assert messages[0] == messages[1] and "Inf" in messages[1]


def test_unchecked_runs_and_summed_gradients_carry_no_certificate():
    project = _layer()
    program = compile_project(project)
    feeds = {"x": RNG.normal(size=(6, 256)).astype(np.float32)}
    run(program, feeds, target="loss", record=False, check_numerics=False)
    assert all("_cert(" not in p.source for p in program.cache("plans").values())
    # W read by two products: its gradient is a sum, read as before
    twice = chain(("x", "Placeholder", {"shape": [6, 256]}, None),
                  ("W", "Variable", {"shape": [256, 160], "initializer": "glorot_uniform", "seed": 5}, None),
                  ("mm", "MatMul", {}, {"a": "x", "b": "W:ref"}),
                  ("mm2", "MatMul", {}, {"a": "x", "b": "W:ref"}),
                  ("both", "Add", {}, {"x": "mm", "y": "mm2"}),
                  ("loss", "Sum", {}, {"input": "both"}))
    twice.pages[0].loss = "loss"
    program = compile_project(twice)
    run(program, feeds, target="loss", record=False)
    assert all("_cert(" not in p.source for p in program.cache("plans").values())
