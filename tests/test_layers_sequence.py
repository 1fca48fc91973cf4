"""The library's sequence, attention, residual and loss layers (tools/layer_defs/sequence.py):
each layer's forward pass against a hand-written numpy implementation in float64, and its
gradients (to every input and Variable) against the central differences of that implementation
or against its hand-derived gradient."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from blockflow.compile.compiler import compile_project
from blockflow.composite import block_name
from blockflow.io.project_io import load_library, save_library
from blockflow.project import Project
from blockflow.run.runtime import run
from blockflow.run.training import TrainConfig, Trainer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from layer_defs import sequence as S  # noqa: E402

RNG = np.random.default_rng(14)
#: float32 runs against float64 references
FWD_TOL = dict(rtol=1e-5, atol=2e-6)
GRAD_TOL = dict(rtol=1e-4, atol=2e-5)


@pytest.fixture(autouse=True)
def _seeded():
    """Every test draws the same numbers whatever order the tests run in."""
    global RNG
    RNG = np.random.default_rng(14)


def _f32(*shape, scale=1.0):
    return (RNG.normal(size=shape) * scale).astype("float32")


def _project(*builders) -> Project:
    project = Project()
    for make in builders:
        comp = make()
        project.composites[comp.name] = comp
    return project


class Layer:
    """One instance ``L`` of a composite on a page, its input ports fed from Placeholders, run
    forward and backward from the output ``out`` with a random cotangent ``G``."""

    def __init__(self, project, name, params, feeds: dict, outs=(), shapes=None):
        self.project, self.feeds = project, feeds
        page = project.add_page("main")
        for port, value in feeds.items():
            shape = (shapes or {}).get(port, list(value.shape))
            page.add_node("Placeholder", id=port.upper(), attrs={"dtype": str(value.dtype), "shape": shape})
        page.add_node(block_name(name), id="L", attrs=params)
        for port in feeds:
            page.connect(port.upper(), "output", "L", port)
        self.program = compile_project(project)

    def errors(self):
        return [str(e) for e in self.program.errors]

    def run(self, out: str, cotangent=None):
        assert self.program.ok, self.errors()
        feeds = {port.upper(): v for port, v in self.feeds.items()}
        slot = f"L/{out}_out:output"
        if cotangent is None:
            return run(self.program, feeds, fetch=[slot])
        return run(self.program, feeds, target=slot, grad_seed=cotangent)

    @staticmethod
    def value(r, out):
        return r.values[(f"L/{out}_out", "output")]


def _numeric_grad(f, arrays: dict, name: str, eps=1e-6):
    """d f / d arrays[name] by central differences, in float64."""
    x = arrays[name]
    g = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        keep = x[idx]
        x[idx] = keep + eps
        up = f(**arrays)
        x[idx] = keep - eps
        down = f(**arrays)
        x[idx] = keep
        g[idx] = (up - down) / (2 * eps)
    return g


def _check_grads(f, arrays: dict, got: dict):
    """Every gradient in ``got`` (name -> blockflow's) against central differences of ``f``."""
    arrays = {k: np.array(v, np.float64) for k, v in arrays.items()}
    for name, g in got.items():
        np.testing.assert_allclose(g, _numeric_grad(f, arrays, name), **GRAD_TOL, err_msg=name)


def _sig(z):
    return 1 / (1 + np.exp(-z))


# ------------------------------------------------------------------------------- LSTMCell
def _lstm_step(x, h, c, W, U, b, forget_bias=1.0):
    """Keras' LSTMCell with the kernel as [4, features, units] (gates i, f, c, o)."""
    z = np.einsum("bf,gfu->bgu", x, W) + np.einsum("bh,ghu->bgu", h, U) + b
    i, f, g, o = (z[:, k] for k in range(4))
    c_next = _sig(f + forget_bias) * c + _sig(i) * np.tanh(g)
    return _sig(o) * np.tanh(c_next), c_next


def test_lstm_cell_is_keras_lstm_cell_forward_and_backward():
    x, h, c = _f32(3, 4), _f32(3, 5), _f32(3, 5)
    layer = Layer(_project(S.lstm_cell), "LSTMCell", {"units": 5, "forget_bias": 0.7}, {"x": x, "h": h, "c": c})
    G = _f32(3, 5)
    r = layer.run("h_next", G)
    W, U, b = (r.values[(f"L/{v}", "ref")] for v in "WUb")
    assert W.shape == (4, 4, 5) and U.shape == (4, 5, 5) and not b.any()
    b = _f32(4, 5, scale=0.3)   # a trained bias, so the gates' order is seen in the forward pass
    r = run(layer.program, {"X": x, "H": h, "C": c}, target="L/h_next_out:output", grad_seed=G,
            variables={"L/b": b})
    want_h, want_c = _lstm_step(*(a.astype(np.float64) for a in (x, h, c, W, U, b)), forget_bias=0.7)
    np.testing.assert_allclose(Layer.value(r, "h_next"), want_h, **FWD_TOL)
    np.testing.assert_allclose(Layer.value(r, "c_next"), want_c, **FWD_TOL)

    def loss(x, h, c, W, U, b):
        return (_lstm_step(x, h, c, W, U, b, 0.7)[0] * G).sum()
    _check_grads(loss, dict(x=x, h=h, c=c, W=W, U=U, b=b),
                 {"x": r.variable_grads["X"], "h": r.variable_grads["H"], "c": r.variable_grads["C"],
                  "W": r.variable_grads["L/W"], "U": r.variable_grads["L/U"], "b": r.variable_grads["L/b"]})


def _keras_lstm_cell(x, h, c, kernel, recurrent_kernel, bias):
    """Keras' LSTMCell.call on its own weight layout: kernel [features, 4 units] with the gates'
    columns side by side (i, f, c, o), bias [4 units] (unit_forget_bias put 1 in f's part)."""
    z = x @ kernel + h @ recurrent_kernel + bias
    i, f, g, o = np.split(z, 4, axis=1)
    c_next = _sig(f) * c + _sig(i) * np.tanh(g)
    return _sig(o) * np.tanh(c_next), c_next


def test_keras_lstm_weights_load_into_the_cell_with_the_gate_axis_first():
    """The doc's recipe: W = kernel.reshape(features, 4, units).transpose(1, 0, 2), likewise U,
    and b = bias.reshape(4, units) minus forget_bias in the forget row."""
    features, units = 3, 2
    kernel, recurrent, bias = _f32(features, 4 * units), _f32(units, 4 * units), _f32(4 * units)
    x, h, c = _f32(5, features), _f32(5, units), _f32(5, units)
    layer = Layer(_project(S.lstm_cell), "LSTMCell", {"units": units}, {"x": x, "h": h, "c": c})
    b = bias.reshape(4, units).copy()
    b[1] -= 1.0
    loaded = {"L/W": kernel.reshape(features, 4, units).transpose(1, 0, 2).copy(),
              "L/U": recurrent.reshape(units, 4, units).transpose(1, 0, 2).copy(), "L/b": b}
    r = run(layer.program, {"X": x, "H": h, "C": c}, variables=loaded)
    want_h, want_c = _keras_lstm_cell(*(a.astype(np.float64) for a in (x, h, c, kernel, recurrent, bias)))
    np.testing.assert_allclose(Layer.value(r, "h_next"), want_h, **FWD_TOL)
    np.testing.assert_allclose(Layer.value(r, "c_next"), want_c, **FWD_TOL)


def test_lstm_cell_gate_order_and_forget_bias_are_keras():
    """With zero weights but one gate's bias, only that gate moves: i, f, c, o in Keras' order;
    forget_bias 1 keeps σ(1) of the old cell state."""
    x, h, c = np.zeros((1, 2), "float32"), np.zeros((1, 3), "float32"), np.ones((1, 3), "float32")
    layer = Layer(_project(S.lstm_cell), "LSTMCell", {"units": 3}, {"x": x, "h": h, "c": c})
    zero = {"L/W": np.zeros((4, 2, 3), "float32"), "L/U": np.zeros((4, 3, 3), "float32")}
    b = np.zeros((4, 3), "float32")
    b[2] = 10.0   # candidate g = tanh(10) ~ 1
    r = run(layer.program, {"X": x, "H": h, "C": c}, variables={**zero, "L/b": b})
    c_next = r.values[("L/c_next_out", "output")]
    np.testing.assert_allclose(c_next, _sig(1.0) * 1 + 0.5 * np.tanh(10.0), rtol=1e-6)


def test_lstm_cell_refuses_a_state_of_the_wrong_width_naming_the_port():
    x, h, c = _f32(3, 4), _f32(3, 6), _f32(3, 5)
    errors = Layer(_project(S.lstm_cell), "LSTMCell", {"units": 5}, {"x": x, "h": h, "c": c}).errors()
    assert any("input 'h' is declared with shape [batch, 5] but is given [3,6]" in e for e in errors), errors


# ------------------------------------------------------------------------------- GRUCell
def _gru_step(x, h, W, U, b, c):
    """Keras' GRUCell, reset_after=True: gates z, r, n; bias rows b (input) and c (recurrent)."""
    xg = np.einsum("bf,gfu->bgu", x, W) + b
    hg = np.einsum("bh,ghu->bgu", h, U) + c
    z, r = _sig(xg[:, 0] + hg[:, 0]), _sig(xg[:, 1] + hg[:, 1])
    n = np.tanh(xg[:, 2] + r * hg[:, 2])
    return z * h + (1 - z) * n


def test_gru_cell_is_keras_gru_cell_with_reset_after_forward_and_backward():
    x, h = _f32(3, 4), _f32(3, 5)
    layer = Layer(_project(S.gru_cell), "GRUCell", {"units": 5}, {"x": x, "h": h})
    G = _f32(3, 5)
    trained = {"L/b": _f32(3, 5, scale=0.3), "L/c": _f32(3, 5, scale=0.3)}
    r = run(layer.program, {"X": x, "H": h}, target="L/h_next_out:output", grad_seed=G, variables=trained)
    W, U = r.values[("L/W", "ref")], r.values[("L/U", "ref")]
    b, c = trained["L/b"], trained["L/c"]
    want = _gru_step(*(a.astype(np.float64) for a in (x, h, W, U, b, c)))
    np.testing.assert_allclose(Layer.value(r, "h_next"), want, **FWD_TOL)
    # reset_after: r scales h·U_n + c_n; reset_after=False (TF 1's GRUCell) scales h before U_n,
    # which gives another result: the test tells the two conventions apart
    xg = np.einsum("bf,gfu->bgu", x, W) + b
    hg = np.einsum("bh,ghu->bgu", h, U)
    r_gate = _sig(xg[:, 1] + hg[:, 1] + c[1])
    z_gate = _sig(xg[:, 0] + hg[:, 0] + c[0])
    n_before = np.tanh(xg[:, 2] + np.einsum("bh,hu->bu", r_gate * h, U[2]) + c[2])
    assert np.abs(z_gate * h + (1 - z_gate) * n_before - Layer.value(r, "h_next")).max() > 1e-3

    def loss(x, h, W, U, b, c):
        return (_gru_step(x, h, W, U, b, c) * G).sum()
    _check_grads(loss, dict(x=x, h=h, W=W, U=U, b=b, c=c),
                 {"x": r.variable_grads["X"], "h": r.variable_grads["H"], "W": r.variable_grads["L/W"],
                  "U": r.variable_grads["L/U"], "b": r.variable_grads["L/b"], "c": r.variable_grads["L/c"]})


def test_keras_gru_weights_load_into_the_cell_with_the_gate_axis_first():
    """Keras' GRUCell.call (reset_after) on its own layout: kernel [features, 3 units] (z, r, h
    side by side), bias [2, 3 units] (input row, recurrent row); loaded as the doc says."""
    features, units = 3, 2
    kernel, recurrent, bias = _f32(features, 3 * units), _f32(units, 3 * units), _f32(2, 3 * units)
    x, h = _f32(5, features), _f32(5, units)
    xz, xr, xh = np.split(x.astype(np.float64) @ kernel + bias[0], 3, axis=1)
    hz, hr, hh = np.split(h.astype(np.float64) @ recurrent + bias[1], 3, axis=1)
    z, r = _sig(xz + hz), _sig(xr + hr)
    want = z * h + (1 - z) * np.tanh(xh + r * hh)
    layer = Layer(_project(S.gru_cell), "GRUCell", {"units": units}, {"x": x, "h": h})
    loaded = {"L/W": kernel.reshape(features, 3, units).transpose(1, 0, 2).copy(),
              "L/U": recurrent.reshape(units, 3, units).transpose(1, 0, 2).copy(),
              "L/b": bias[0].reshape(3, units).copy(), "L/c": bias[1].reshape(3, units).copy()}
    r = run(layer.program, {"X": x, "H": h}, variables=loaded)
    np.testing.assert_allclose(Layer.value(r, "h_next"), want, **FWD_TOL)


# ------------------------------------------------------------------------------- LSTM
def _lstm_seq(x, W, U, b, forget_bias=1.0):
    h = c = np.zeros((x.shape[0], W.shape[2]))
    hs = []
    for t in range(x.shape[1]):
        h, c = _lstm_step(x[:, t], h, c, W, U, b, forget_bias)
        hs.append(h)
    return np.stack(hs, 1), h, c


def _lstm_layer(x, units=4, steps=3, **kw):
    params = {} if units is None else {"units": units}
    return Layer(_project(S.lstm_cell, lambda: S.lstm(steps)), "LSTM", params, {"x": x}, **kw)


def test_lstm_unrolls_cells_that_share_one_set_of_variables():
    x = _f32(2, 3, 5)
    layer = _lstm_layer(x)
    program = layer.program
    assert program.ok, layer.errors()
    for t in (1, 2):
        assert program.step(f"L/cell{t}/W") is None
        assert program.hierarchy.shared[f"L/cell{t}/U"] == "L/cell0/U"
    assert program.instance("L/cell2").composite == "LSTMCell"
    r = layer.run("sequence")
    assert sorted(k for k in r.values if k[0].endswith(("/W", "/U", "/b")) and k[1] == "ref") == [
        ("L/cell0/U", "ref"), ("L/cell0/W", "ref"), ("L/cell0/b", "ref")]


def test_lstm_is_keras_lstm_forward_and_backward_through_time():
    x = _f32(2, 3, 5)
    layer = _lstm_layer(x)
    G = _f32(2, 3, 4)
    b = _f32(4, 4, scale=0.3)
    r = run(layer.program, {"X": x}, target="L/sequence_out:output", grad_seed=G, variables={"L/cell0/b": b})
    W, U = r.values[("L/cell0/W", "ref")], r.values[("L/cell0/U", "ref")]
    seq, h, c = _lstm_seq(*(a.astype(np.float64) for a in (x, W, U, b)))
    np.testing.assert_allclose(Layer.value(r, "sequence"), seq, **FWD_TOL)
    np.testing.assert_allclose(Layer.value(r, "h"), h, **FWD_TOL)
    np.testing.assert_allclose(Layer.value(r, "c"), c, **FWD_TOL)

    def loss(x, W, U, b):
        return (_lstm_seq(x, W, U, b)[0] * G).sum()
    # the shared Variables' gradients add up over the three steps
    _check_grads(loss, dict(x=x, W=W, U=U, b=b),
                 {"x": r.variable_grads["X"], "W": r.variable_grads["L/cell0/W"],
                  "U": r.variable_grads["L/cell0/U"], "b": r.variable_grads["L/cell0/b"]})


def test_lstm_runs_with_an_open_batch_size_as_datasets_give():
    x = _f32(2, 3, 5)
    layer = _lstm_layer(x, shapes={"x": [-1, 3, 5]})
    assert layer.program.ok, layer.errors()
    r = layer.run("h")
    W, U, b = (r.values[(f"L/cell0/{v}", "ref")] for v in "WUb")
    np.testing.assert_allclose(Layer.value(r, "h"), _lstm_seq(x, W, U, b)[1], **FWD_TOL)


def test_lstm_refuses_a_sequence_of_another_length_naming_the_port():
    errors = _lstm_layer(_f32(2, 4, 5)).errors()
    assert any("input 'x' is declared with shape [batch, 3, features] but is given [2,4,5]" in e
               for e in errors), errors


def test_lstm_is_made_for_a_given_number_of_steps_and_refuses_none():
    assert S.lstm(5).page.nodes["steps"].attrs["num"] == 5
    assert len([n for n in S.lstm(5).page.nodes.values() if n.block == "@LSTMCell"]) == 5
    with pytest.raises(ValueError, match="at least 1 step"):
        S.lstm(0)


# ------------------------------------------------------------------------------- attention
def _mha(query, key, value, Wq, bq, Wk, bk, Wv, bv, Wo, bo, causal=False):
    """Keras' MultiHeadAttention, one head at a time with plain matrix products."""
    batch, tq, _ = query.shape
    tk, heads, kd = key.shape[1], Wq.shape[1], Wq.shape[2]
    out = np.zeros(query.shape[:2] + (Wo.shape[2],))
    weights = np.zeros((batch, heads, tq, tk))
    for a in range(batch):
        for n in range(heads):
            q = query[a] @ Wq[:, n] + bq[n]
            k = key[a] @ Wk[:, n] + bk[n]
            v = value[a] @ Wv[:, n] + bv[n]
            s = q @ k.T / np.sqrt(kd)
            if causal:
                s = np.where(np.tril(np.ones((tq, tk), bool)), s, -1e9)
            e = np.exp(s - s.max(1, keepdims=True))
            w = e / e.sum(1, keepdims=True)
            weights[a, n] = w
            out[a] += (w @ v) @ Wo[n]
    return out + bo, weights


_MHA_VARS = ("Wq", "bq", "Wk", "bk", "Wv", "bv", "Wo", "bo")


def _mha_layer(causal, tq=3, tk=3):
    q, k, v = _f32(2, tq, 4), _f32(2, tk, 5), _f32(2, tk, 6)
    layer = Layer(_project(S.multi_head_attention), "MultiHeadAttention",
                  {"num_heads": 2, "key_dim": 3, "causal": causal}, {"query": q, "key": k, "value": v})
    return layer, q, k, v


@pytest.mark.parametrize("causal", [False, True])
def test_multi_head_attention_is_keras_forward_and_backward(causal):
    layer, q, k, v = _mha_layer(causal)
    G = _f32(2, 3, 4)
    shapes = {"bq": (2, 3), "bk": (2, 3), "bv": (2, 3), "bo": (4,)}
    biases = {f"L/{n}": _f32(*s, scale=0.3) for n, s in shapes.items()}
    r = run(layer.program, {"QUERY": q, "KEY": k, "VALUE": v}, target="L/output_out:output", grad_seed=G,
            variables=biases)
    ws = {n: r.values[(f"L/{n}", "ref")] for n in _MHA_VARS}
    assert ws["Wq"].shape == (4, 2, 3) and ws["Wk"].shape == (5, 2, 3) and ws["Wo"].shape == (2, 3, 4)
    out, weights = _mha(*(a.astype(np.float64) for a in (q, k, v)), **ws, causal=causal)
    np.testing.assert_allclose(Layer.value(r, "output"), out, **FWD_TOL)
    np.testing.assert_allclose(Layer.value(r, "scores"), weights, **FWD_TOL)

    def loss(query, key, value, **w):
        return (_mha(query, key, value, **w, causal=causal)[0] * G).sum()
    got = {"query": r.variable_grads["QUERY"], "key": r.variable_grads["KEY"], "value": r.variable_grads["VALUE"]}
    got.update({n: r.variable_grads[f"L/{n}"] for n in _MHA_VARS})
    _check_grads(loss, dict(query=q, key=k, value=v, **ws), got)


def test_a_causal_mask_hides_later_keys_even_with_more_keys_than_queries():
    layer, q, k, v = _mha_layer(True, tq=2, tk=4)
    r = layer.run("output")
    weights = Layer.value(r, "scores")
    assert weights.shape == (2, 2, 2, 4)
    np.testing.assert_array_equal(weights[..., 0, 1:], 0)
    np.testing.assert_array_equal(weights[..., 1, 2:], 0)
    np.testing.assert_allclose(weights[..., 0, 0], 1, rtol=1e-6)
    # changing a later key and value leaves the earlier queries' results as they were
    k2, v2 = k.copy(), v.copy()
    k2[:, 3] += 5
    v2[:, 3] -= 5
    r2 = run(layer.program, {"QUERY": q, "KEY": k2, "VALUE": v2}, fetch=["L/output_out:output"])
    np.testing.assert_array_equal(Layer.value(r2, "output"), Layer.value(r, "output"))


def test_attention_without_the_mask_looks_at_every_key():
    layer, q, k, v = _mha_layer(False)
    assert (Layer.value(layer.run("output"), "scores") > 0).all()


# ------------------------------------------------------------------------------- residual
def _residual(x, W1, b1, W2, b2):
    return np.maximum(x + np.maximum(x @ W1 + b1, 0) @ W2 + b2, 0)


def test_residual_dense_is_relu_of_x_plus_two_dense_layers_forward_and_backward():
    x = _f32(4, 5)
    layer = Layer(_project(S.residual_dense), "ResidualDense", {"units": 7}, {"x": x})
    G = _f32(4, 5)
    biases = {"L/b1": _f32(7, scale=0.3), "L/b2": _f32(5, scale=0.3)}
    r = run(layer.program, {"X": x}, target="L/y_out:output", grad_seed=G, variables=biases)
    ws = {n: r.values[(f"L/{n}", "ref")] for n in ("W1", "b1", "W2", "b2")}
    assert ws["W1"].shape == (5, 7) and ws["W2"].shape == (7, 5)
    y = _residual(x.astype(np.float64), **ws)
    np.testing.assert_allclose(Layer.value(r, "y"), y, **FWD_TOL)
    # away from relu's kinks, so central differences see one side only
    pre = x + np.maximum(x @ ws["W1"] + ws["b1"], 0) @ ws["W2"] + ws["b2"]
    assert np.abs(pre).min() > 1e-4 and np.abs(x @ ws["W1"] + ws["b1"]).min() > 1e-4

    def loss(x, **w):
        return (_residual(x, **w) * G).sum()
    got = {"x": r.variable_grads["X"], **{n: r.variable_grads[f"L/{n}"] for n in ws}}
    _check_grads(loss, dict(x=x, **ws), got)


def test_the_residual_path_carries_the_gradient_when_the_block_is_dead():
    """F's weights at zero: y = relu(x + b2), and x still gets relu'(x)·g through the identity."""
    x = np.abs(_f32(2, 3)) + 0.1
    layer = Layer(_project(S.residual_dense), "ResidualDense", {"units": 4}, {"x": x})
    zero = {"L/W1": np.zeros((3, 4), "float32"), "L/W2": np.zeros((4, 3), "float32")}
    G = _f32(2, 3)
    r = run(layer.program, {"X": x}, target="L/y_out:output", grad_seed=G, variables=zero)
    np.testing.assert_allclose(r.variable_grads["X"], G, rtol=1e-6)


# ------------------------------------------------------------------------------- losses
def _loss_run(builder, name, feeds, params=None):
    layer = Layer(_project(builder), name, params or {}, feeds)
    r = layer.run("loss", np.float32(1.0))
    return Layer.value(r, "loss"), r


def _log_softmax(z):
    z = z - z.max(1, keepdims=True)
    return z - np.log(np.exp(z).sum(1, keepdims=True))


def test_softmax_cross_entropy_with_one_hot_or_soft_labels():
    z = _f32(5, 4, scale=3)
    y = np.abs(_f32(5, 4))
    y /= y.sum(1, keepdims=True)
    got, r = _loss_run(S.softmax_cross_entropy, "SoftmaxCrossEntropy", {"logits": z, "labels": y})
    z64 = z.astype(np.float64)
    assert got.shape == ()
    np.testing.assert_allclose(got, -(y * _log_softmax(z64)).sum(1).mean(), **FWD_TOL)
    np.testing.assert_allclose(r.variable_grads["LOGITS"], (np.exp(_log_softmax(z64)) - y) / 5, **GRAD_TOL)


def test_sparse_softmax_cross_entropy_with_integer_labels():
    z = _f32(5, 4, scale=3)
    labels = np.int32([0, 3, 1, 1, 2])
    got, r = _loss_run(S.sparse_softmax_cross_entropy, "SparseSoftmaxCrossEntropy",
                       {"logits": z, "labels": labels})
    logp = _log_softmax(z.astype(np.float64))
    np.testing.assert_allclose(got, -logp[np.arange(5), labels].mean(), **FWD_TOL)
    np.testing.assert_allclose(r.variable_grads["LOGITS"], (np.exp(logp) - np.eye(4)[labels]) / 5, **GRAD_TOL)


def test_sparse_softmax_cross_entropy_refuses_float_labels_naming_the_port():
    layer = Layer(_project(S.sparse_softmax_cross_entropy), "SparseSoftmaxCrossEntropy", {},
                  {"logits": _f32(2, 3), "labels": _f32(2)})
    errors = layer.errors()
    assert any("input 'labels' is declared int32 but is given float32" in e for e in errors), errors


def test_sigmoid_cross_entropy_on_any_shape():
    z = _f32(2, 3, 4, scale=4)
    y = RNG.uniform(size=(2, 3, 4)).astype("float32")
    got, r = _loss_run(S.sigmoid_cross_entropy, "SigmoidCrossEntropy", {"logits": z, "labels": y})
    z64 = z.astype(np.float64)
    want = -(y * np.log(_sig(z64)) + (1 - y) * np.log(1 - _sig(z64))).mean()
    np.testing.assert_allclose(got, want, **FWD_TOL)
    np.testing.assert_allclose(r.variable_grads["LOGITS"], (_sig(z64) - y) / z.size, **GRAD_TOL)
    np.testing.assert_allclose(r.variable_grads["LABELS"], -z64 / z.size, **GRAD_TOL)


def test_mse_forward_and_backward():
    p, t = _f32(6, 2), _f32(6, 2)
    got, r = _loss_run(S.mean_squared_error, "MSE", {"prediction": p, "target": t})
    d = p.astype(np.float64) - t
    np.testing.assert_allclose(got, (d ** 2).mean(), **FWD_TOL)
    np.testing.assert_allclose(r.variable_grads["PREDICTION"], 2 * d / d.size, **GRAD_TOL)
    np.testing.assert_allclose(r.variable_grads["TARGET"], -2 * d / d.size, **GRAD_TOL)


@pytest.mark.parametrize("delta", [1.0, 0.3])
def test_huber_is_quadratic_inside_delta_and_linear_beyond(delta):
    p = _f32(8, 3, scale=1.5)
    t = np.zeros((8, 3), "float32")
    d = p.astype(np.float64)
    assert (np.abs(d) < delta).any() and (np.abs(d) > delta).any()
    got, r = _loss_run(S.huber, "Huber", {"prediction": p, "target": t}, {"delta": delta})
    want = np.where(np.abs(d) <= delta, d ** 2 / 2, delta * (np.abs(d) - delta / 2)).mean()
    np.testing.assert_allclose(got, want, **FWD_TOL)
    np.testing.assert_allclose(r.variable_grads["PREDICTION"], np.clip(d, -delta, delta) / d.size, **GRAD_TOL)


def test_huber_refuses_a_negative_delta_on_the_instance():
    layer = Layer(_project(S.huber), "Huber", {"delta": -1.0}, {"prediction": _f32(2), "target": _f32(2)})
    assert any("L" in e and "parameter 'delta'" in e for e in layer.errors()), layer.errors()


# ------------------------------------------------------------------------------- the library
def test_every_layer_names_its_library_and_version_and_documents_its_ports():
    names = []
    for make in S.LAYERS:
        comp = make()
        names.append(comp.name)
        assert comp.origin == {"library": "blockflow", "name": comp.name, "version": make.version}
        assert make.category in ("recurrent", "attention", "core", "losses") and make.version >= 1
        assert len(comp.doc) > 80 and comp.doc.endswith("Training and inference behave alike."), comp.name
        ports = [n for n in comp.page.nodes.values() if n.block in ("Input", "Output")]
        assert ports and all(n.attrs.get("doc") for n in ports), comp.name
        for p in comp.params:
            assert p.doc and not p.required, (comp.name, p.name)   # a dropped layer runs as it is
    assert len(set(names)) == len(names)
    # a layer comes after the layers it uses, so a library file can be written in this order
    assert names.index("LSTMCell") < names.index("LSTM")


# ------------------------------------------------------------------------------- training
def _trained(project, page, feeds, steps, lr):
    program = compile_project(project, page)
    assert program.ok, [str(e) for e in program.errors]
    trainer = Trainer(program, TrainConfig(optimizer="adam", hyper={"lr": lr}), feeds=feeds)
    assert trainer.warnings == []
    return program, trainer, [trainer.step().loss for _ in range(steps)]


def test_an_lstm_learns_to_sum_a_sequence_training_its_one_shared_set_of_variables():
    project = _project(S.lstm_cell, lambda: S.lstm(4), S.mean_squared_error)
    x = RNG.uniform(-1, 1, size=(64, 4, 1)).astype("float32")
    page = project.add_page("main")
    page.add_node("Placeholder", id="X", attrs={"dtype": "float32", "shape": [64, 4, 1]})
    page.add_node("Placeholder", id="Y", attrs={"dtype": "float32", "shape": [64, 1]})
    page.add_node(block_name("LSTM"), id="lstm", attrs={"units": 8})
    page.add_node("Variable", id="Wd", attrs={"shape": [8, 1], "initializer": "glorot_uniform", "seed": 3})
    page.add_node("MatMul", id="head")
    page.add_node(block_name("MSE"), id="loss")
    for src, sp, dst, dp in (("X", "output", "lstm", "x"), ("lstm", "h", "head", "a"), ("Wd", "ref", "head", "b"),
                             ("head", "product", "loss", "prediction"), ("Y", "output", "loss", "target")):
        page.connect(src, sp, dst, dp)
    page.loss = "loss"
    _, trainer, losses = _trained(project, "main", {"X": x, "Y": x.sum(1)}, 150, 0.05)
    assert sorted(trainer.trainable) == ["Wd", "lstm/cell0/U", "lstm/cell0/W", "lstm/cell0/b"]
    assert losses[-1] < losses[0] / 100, losses[::25]


def test_causal_attention_learns_to_copy_the_first_token_to_every_position():
    project = _project(S.multi_head_attention, S.sparse_softmax_cross_entropy)
    batch, steps, vocab = 64, 4, 4
    tokens = RNG.integers(0, vocab, size=(batch, steps))
    # each position: its token one-hot, then its position one-hot (attention has no order of its own)
    x = np.concatenate([np.eye(vocab)[tokens], np.broadcast_to(np.eye(steps), (batch, steps, steps))], -1)
    labels = np.repeat(tokens[:, :1], steps, 1).reshape(-1).astype("int32")
    page = project.add_page("main")
    page.add_node("Placeholder", id="X", attrs={"dtype": "float32", "shape": list(x.shape)})
    page.add_node("Placeholder", id="L", attrs={"dtype": "int32", "shape": [batch * steps]})
    page.add_node(block_name("MultiHeadAttention"), id="att", attrs={"num_heads": 2, "key_dim": 4, "causal": True})
    page.add_node("Reshape", id="rows", inputs={"shape": np.int32([-1, vocab + steps])})
    page.add_node("Variable", id="Wc", attrs={"shape": [vocab + steps, vocab], "initializer": "glorot_uniform"})
    page.add_node("MatMul", id="logits")
    page.add_node(block_name("SparseSoftmaxCrossEntropy"), id="xent")
    for port in ("query", "key", "value"):
        page.connect("X", "output", "att", port)
    for src, sp, dst, dp in (("att", "output", "rows", "tensor"), ("rows", "output", "logits", "a"),
                             ("Wc", "ref", "logits", "b"), ("logits", "product", "xent", "logits"),
                             ("L", "output", "xent", "labels")):
        page.connect(src, sp, dst, dp)
    page.loss = "xent"
    feeds = {"X": x.astype("float32"), "L": labels}
    program, trainer, losses = _trained(project, "main", feeds, 100, 0.01)
    assert losses[-1] < losses[0] / 20, losses[::20]
    r = run(program, feeds, variables=trainer.values, fetch=["logits:product"])
    assert (r.values[("logits", "product")].argmax(1) == labels).mean() == 1.0


def test_layers_dropped_on_a_page_run_with_their_default_parameters():
    lstm = _lstm_layer(_f32(2, 3, 5), units=None)
    assert Layer.value(lstm.run("sequence"), "sequence").shape == (2, 3, 32)
    q = _f32(2, 3, 4)
    att = Layer(_project(S.multi_head_attention), "MultiHeadAttention", {}, {"query": q, "key": q, "value": q})
    r = att.run("output")
    assert Layer.value(r, "output").shape == (2, 3, 4) and r.values[("L/Wq", "ref")].shape == (4, 2, 16)
    assert (Layer.value(r, "scores") > 0).all()   # not causal unless asked


def test_every_layer_survives_a_library_file_and_runs_from_it(tmp_path):
    """Written as tools/make_layers.py writes the library (the layer and the composites it uses)
    and read back, each layer is the same composite, and the loaded LSTM runs as the built one."""
    built = {make().name: make() for make in S.LAYERS}
    path = tmp_path / "sequence.bflow.json"
    save_library(path, built, {"category": "test"})
    loaded, _ = load_library(path)
    assert sorted(loaded) == sorted(built)
    for name, comp in built.items():
        assert loaded[name] == comp, name
    x = _f32(2, 8, 5)
    project = Project()
    project.composites.update({n: loaded[n] for n in ("LSTMCell", "LSTM")})
    page = project.add_page("main")
    page.add_node("Placeholder", id="X", attrs={"dtype": "float32", "shape": [2, 8, 5]})
    page.add_node(block_name("LSTM"), id="L", attrs={"units": 4})
    page.connect("X", "output", "L", "x")
    r = run(compile_project(project), {"X": x}, fetch=["L/h_out:output"])
    W, U, b = (r.values[(f"L/cell0/{v}", "ref")] for v in "WUb")
    np.testing.assert_allclose(Layer.value(r, "h"), _lstm_seq(x, W, U, b)[1], **FWD_TOL)
