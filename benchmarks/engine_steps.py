"""Issue 18's engine steps against hand-written numpy, with the runtime's default NaN/Inf checks on:
an RBM CD-1 step (``rbm``), an FGSM adversarial step drawn with the Gradients block (``fgsm``) and
the stable softmax drawn from elementary blocks (``softmax-elem``).

Each hand version is a forward pass and a hand-derived backward pass, written as one would in
numpy (a product computed once, shared where the maths shares it); before timing, its loss and
gradients are checked equal to blockflow's (as run.py's ``checked_pair`` does).
"""
from __future__ import annotations

import itertools

import numpy as np

from blockflow.compile.compiler import compile_project
from blockflow.project import Project
from blockflow.run.runtime import run, stream_generator, stream_hash

# ----------------------------------------------------------------------------------- RBM CD-1


def rbm_project(batch=64, visible=784, hidden=128):
    """The cd1 page of sample_projects/rbm_contrastive_divergence: the free-energy difference of
    the data and of a one-step Gibbs reconstruction held by StopGradient (no backprop through the
    sampler)."""
    p = Project()
    pg = p.add_page("cd1")
    pg.add_node("Placeholder", id="v0", attrs={"shape": [batch, visible]})
    pg.add_node("Variable", id="W", attrs={"shape": [visible, hidden], "initializer": "random_normal",
                                           "stddev": 0.01, "seed": 1})
    pg.add_node("Variable", id="b_h", attrs={"shape": [hidden]})
    for nid, block, attrs in (("vW", "MatMul", {}), ("pre_h0", "BiasAdd", {}), ("p_h0", "Sigmoid", {}),
                              ("h0", "Bernoulli", {"seed": 1}), ("hWt", "MatMul", {"transpose_b": True}),
                              ("p_v1", "Sigmoid", {}), ("v1", "StopGradient", {}), ("v1W", "MatMul", {}),
                              ("pre_h1", "BiasAdd", {}), ("softplus_data", "Softplus", {}),
                              ("mean_neg_F_data", "Mean", {}), ("softplus_sample", "Softplus", {}),
                              ("mean_neg_F_sample", "Mean", {}), ("loss", "Subtract", {})):
        pg.add_node(block, id=nid, attrs=attrs)
    for nid in ("neg_free_energy_data", "neg_free_energy_sample"):
        pg.add_node("Sum", id=nid, inputs={"axis": np.int32(1)})
    for wire in ("v0:output vW:a", "W:ref vW:b", "vW:product pre_h0:value", "b_h:ref pre_h0:bias",
                 "pre_h0:output p_h0:x", "p_h0:y h0:probs", "h0:output hWt:a", "W:ref hWt:b",
                 "hWt:product p_v1:x", "p_v1:y v1:input", "v1:output v1W:a", "W:ref v1W:b",
                 "v1W:product pre_h1:value", "b_h:ref pre_h1:bias",
                 "pre_h0:output softplus_data:features", "softplus_data:activations neg_free_energy_data:input",
                 "neg_free_energy_data:output mean_neg_F_data:input",
                 "pre_h1:output softplus_sample:features",
                 "softplus_sample:activations neg_free_energy_sample:input",
                 "neg_free_energy_sample:output mean_neg_F_sample:input",
                 "mean_neg_F_sample:output loss:x", "mean_neg_F_data:output loss:y"):
        src, dst = wire.split()
        pg.connect(*src.split(":"), *dst.split(":"))
    pg.loss = "loss"
    return p


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def bench_rbm(repeats, timeit_pair):
    rng = np.random.default_rng(2)
    program = compile_project(rbm_project())
    program.raise_for_errors()
    v0 = (rng.random((64, 784)) < 0.3).astype(np.float32)
    W, b = program.variable_values["W"], program.variable_values["b_h"]
    feeds = {"v0": v0}
    h0_index = program.step("h0").index
    inv_b = np.float32(1 / 64)
    draws = np.random.default_rng(3)

    def hand(gen=None):
        pre_h0 = v0 @ W + b
        p_h0 = _sigmoid(pre_h0)
        u = (gen or draws).random(p_h0.shape, dtype=np.float32)
        h0 = (u < p_h0).astype(np.float32)
        v1 = _sigmoid(h0 @ W.T)
        pre_h1 = v1 @ W + b
        loss = np.logaddexp(pre_h1, 0).sum(axis=1).mean() - np.logaddexp(pre_h0, 0).sum(axis=1).mean()
        q1 = _sigmoid(pre_h1)
        q1 *= inv_b
        p_h0 *= inv_b
        dW = v1.T @ q1
        dW -= v0.T @ p_h0
        db = q1.sum(axis=0) - p_h0.sum(axis=0)
        return loss, dW, db

    steps = itertools.count(1)

    def ours(check=True):
        # a new step each run, as in training: each draws its own stretch of the sampler's stream
        return run(program, feeds, target="loss", record=False, check_numerics=check, step=next(steps))

    # The check draws the Bernoulli's stream as the runtime does; the timed hand version keeps one
    # generator, as a numpy script would.
    ref = hand(stream_generator(stream_hash(program.steps[h0_index].node), 1, 0, 0))
    res = run(program, feeds, target="loss", record=False)
    np.testing.assert_allclose(res.value("loss"), ref[0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(res.variable_grads["W"], ref[1], rtol=1e-3, atol=1e-7)
    np.testing.assert_allclose(res.variable_grads["b_h"], ref[2], rtol=1e-3, atol=1e-7)
    h, o = timeit_pair(hand, ours, repeats)
    h_off, off = timeit_pair(hand, lambda: ours(False), max(3, repeats // 2))
    blocks = _rbm_blocks_called(program, v0, W, b, draws)
    ref_b = blocks(stream_generator(stream_hash(program.steps[h0_index].node), 1, 0, 0))
    np.testing.assert_allclose(ref_b[0], ref[0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ref_b[1], ref[1], rtol=1e-3, atol=1e-7)
    h_direct, direct = timeit_pair(hand, blocks, max(3, repeats // 2))
    return [("RBM CD-1 step 64x784x128", h, o, 1.05,
             f"checks off: {off / h_off:.2f}x; its blocks called directly: {direct / h_direct:.2f}x")]


def _rbm_blocks_called(program, v0, W, b, draws):
    """The RBM step as the plan computes it, each block's forward and gradient called directly in
    the plan's order, with no plan around them: what the runtime adds is the row's ratio less
    this one's (benchmarks/README.md, "Seventeenth session")."""
    from blockflow.registry import default_registry

    reg = default_registry()
    matmul, bias_add, sigmoid, softplus = (reg[n] for n in ("MatMul", "BiasAdd", "Sigmoid", "Softplus"))
    bernoulli, total, mean = reg["Bernoulli"].forward, reg["Sum"].forward, reg["Mean"].forward
    batch, hidden = v0.shape[0], W.shape[1]
    # the cotangents of the two Softplus outputs: the loss is a mean of row sums, data minus sample
    plus = np.full((batch, hidden), np.float32(1 / batch))
    minus = -plus
    axis = np.int32(1)
    no_t = {"transpose_a": False, "transpose_b": False}

    def blocks(gen=None):
        pre_h0 = bias_add.forward(np.matmul(v0, W), b, data_format="NHWC")
        p_h0 = sigmoid.forward(pre_h0)
        sp0 = softplus.forward(pre_h0)
        h0 = bernoulli(p_h0, seed=1, rng=gen or draws)
        v1 = sigmoid.forward(matmul.forward(h0, W, transpose_a=False, transpose_b=True))
        pre_h1 = bias_add.forward(np.matmul(v1, W), b, data_format="NHWC")
        sp1 = softplus.forward(pre_h1)
        loss = np.subtract(mean(total(sp1, axis, keep_dims=False), None, keep_dims=False),
                           mean(total(sp0, axis, keep_dims=False), None, keep_dims=False))
        g1 = softplus.vjp(plus, sp1, pre_h1)[0]
        g1, db = bias_add.vjp(g1, None, pre_h1, b, data_format="NHWC", needs=(True, True))
        dW = matmul.vjp(g1, None, v1, W, **no_t, needs=(False, True))[1]
        g0 = softplus.vjp(minus, sp0, pre_h0)[0]
        g0, db0 = bias_add.vjp(g0, None, pre_h0, b, data_format="NHWC", needs=(True, True))
        dW += matmul.vjp(g0, None, v0, W, **no_t, needs=(False, True))[1]
        return loss, dW, db + db0

    return blocks


# ---------------------------------------------------------------------------------------- FGSM


def _dense_layers(pg, prefix, x, sizes, share):
    prev = x
    for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:]), 1):
        if not share:
            pg.add_node("Variable", id=f"W{i}", attrs={"shape": [n_in, n_out], "initializer": "glorot_uniform",
                                                      "seed": i})
            pg.add_node("Variable", id=f"b{i}", attrs={"shape": [n_out]})
        pg.add_node("MatMul", id=f"{prefix}mm{i}")
        pg.add_node("BiasAdd", id=f"{prefix}add{i}")
        pg.connect(*prev, f"{prefix}mm{i}", "a")
        pg.connect(f"W{i}", "ref", f"{prefix}mm{i}", "b")
        pg.connect(f"{prefix}mm{i}", "product", f"{prefix}add{i}", "value")
        pg.connect(f"b{i}", "ref", f"{prefix}add{i}", "bias")
        prev = (f"{prefix}add{i}", "output")
        if i < len(sizes) - 1:
            pg.add_node("Relu", id=f"{prefix}relu{i}")
            pg.connect(*prev, f"{prefix}relu{i}", "features")
            prev = (f"{prefix}relu{i}", "activations")
    pg.add_node("SparseSoftmaxCrossEntropyWithLogits", id=f"{prefix}xent")
    pg.connect(*prev, f"{prefix}xent", "features")
    pg.connect("labels", "output", f"{prefix}xent", "labels")
    pg.add_node("Mean", id=f"{prefix}loss")
    pg.connect(f"{prefix}xent", "loss", f"{prefix}loss", "input")
    return f"{prefix}loss"


def fgsm_project(batch=64, sizes=(784, 256, 256, 10), eps=0.1):
    """The adversarial page of sample_projects/fgsm_adversarial_training at the MLP benchmark's
    size: the clean loss, its gradient with respect to the input by a Gradients block,
    ``x_adv = StopGradient(x + eps * Sign(dx))``, the loss on x_adv through the same weights, and
    the mean of the two losses as the target."""
    p = Project()
    pg = p.add_page("adversarial")
    pg.add_node("Placeholder", id="x", attrs={"shape": [batch, sizes[0]]})
    pg.add_node("Placeholder", id="labels", attrs={"shape": [batch], "dtype": "int32"})
    clean = _dense_layers(pg, "", ("x", "output"), sizes, share=False)
    pg.add_node("Gradients", id="grad_x")
    pg.connect(clean, "output", "grad_x", "ys[0]")
    pg.connect("x", "output", "grad_x", "xs[0]")
    pg.add_node("Sign", id="direction")
    pg.add_node("Multiply", id="step", inputs={"y": np.float32(eps)})
    pg.add_node("Add", id="perturbed")
    pg.add_node("StopGradient", id="x_adv")
    pg.connect("grad_x", "dx[0]", "direction", "x")
    pg.connect("direction", "y", "step", "x")
    pg.connect("x", "output", "perturbed", "x")
    pg.connect("step", "z", "perturbed", "y")
    pg.connect("perturbed", "z", "x_adv", "input")
    adv = _dense_layers(pg, "adv_", ("x_adv", "output"), sizes, share=True)
    pg.add_node("Add", id="clean_plus_adv")
    pg.add_node("Multiply", id="total_loss", inputs={"y": np.float32(0.5)})
    pg.connect(clean, "output", "clean_plus_adv", "x")
    pg.connect(adv, "output", "clean_plus_adv", "y")
    pg.connect("clean_plus_adv", "z", "total_loss", "x")
    pg.loss = "total_loss"
    return p


def _xent_rows(logits, labels):
    """Mean sparse cross-entropy of the rows, and its gradient with respect to the logits."""
    rows = np.arange(logits.shape[0])
    z = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(z)
    s = e.sum(axis=1, keepdims=True)
    loss = np.mean(np.log(s[:, 0]) - z[rows, labels])
    e /= s
    e[rows, labels] -= 1
    e *= np.float32(1 / logits.shape[0])
    return loss, e


def bench_fgsm(repeats, timeit_pair, eps=0.1):
    rng = np.random.default_rng(4)
    program = compile_project(fgsm_project(eps=eps))
    program.raise_for_errors()
    x = rng.normal(size=(64, 784)).astype(np.float32)
    labels = rng.integers(0, 10, 64).astype(np.int32)
    W = [program.variable_values[f"W{i}"] for i in (1, 2, 3)]
    b = [program.variable_values[f"b{i}"] for i in (1, 2, 3)]
    feeds = {"x": x, "labels": labels}
    half, e32 = np.float32(0.5), np.float32(eps)

    def forward(inp):
        h1 = inp @ W[0] + b[0]
        a1 = np.maximum(h1, 0)
        h2 = a1 @ W[1] + b[1]
        a2 = np.maximum(h2, 0)
        loss, d = _xent_rows(a2 @ W[2] + b[2], labels)
        return loss, d, (inp, h1, a1, h2, a2)

    def backward(d, acts, want_input):
        inp, h1, a1, h2, a2 = acts
        grads = [a2.T @ d, d.sum(axis=0)]
        d2 = (d @ W[2].T) * (h2 > 0)
        grads += [a1.T @ d2, d2.sum(axis=0)]
        d1 = (d2 @ W[1].T) * (h1 > 0)
        grads += [inp.T @ d1, d1.sum(axis=0)]
        return grads, (d1 @ W[0].T if want_input else None)

    def hand():
        # one backward of the clean loss gives both the input's gradient and the weights' share
        loss, d, acts = forward(x)
        g_clean, dx = backward(d, acts, True)
        x_adv = x + e32 * np.sign(dx)
        loss_adv, d_adv, acts_adv = forward(x_adv)
        g_adv, _ = backward(d_adv, acts_adv, False)
        total = half * (loss + loss_adv)
        # ordered as W1, b1, W2, b2, W3, b3
        return (total,) + tuple(half * (a + c) for a, c in zip(g_clean[::-1][1::2] + g_clean[::-1][0::2],
                                                               g_adv[::-1][1::2] + g_adv[::-1][0::2]))

    def ours():
        return run(program, feeds, target="total_loss", record=False)

    ref, res = hand(), ours()
    np.testing.assert_allclose(res.value("total_loss"), ref[0], rtol=1e-4)
    for k, name in enumerate(("W1", "W2", "W3", "b1", "b2", "b3"), 1):
        np.testing.assert_allclose(res.variable_grads[name], ref[k], rtol=2e-3, atol=1e-6, err_msg=name)
    h, o = timeit_pair(hand, ours, repeats)
    h_off, off = timeit_pair(hand, lambda: run(program, feeds, target="total_loss", record=False,
                                           check_numerics=False), max(3, repeats // 2))
    return [("FGSM step, Gradients block, MLP", h, o, 1.05, f"checks off: {off / h_off:.2f}x")]


# ---------------------------------------------------------------------- stable softmax, elementary


def softmax_elem_project(n):
    """The by_hand page of sample_projects/stable_softmax at n values: exp(x - StopGradient(max(x)))
    over its Sum, drawn from elementary blocks, weighted by w and summed."""
    p = Project()
    pg = p.add_page("softmax_elem")
    pg.add_node("Placeholder", id="x", attrs={"shape": [n]})
    pg.add_node("Placeholder", id="w", attrs={"shape": [n]})
    for nid, block in (("Max_1", "Max"), ("StopGradient_1", "StopGradient"), ("Subtract_1", "Subtract"),
                       ("Exp_1", "Exp"), ("Sum_2", "Sum"), ("RealDiv_1", "RealDiv"), ("Multiply_1", "Multiply"),
                       ("Sum_1", "Sum")):
        pg.add_node(block, id=nid)
    for wire in ("x:output Max_1:input", "Max_1:output StopGradient_1:input", "x:output Subtract_1:x",
                 "StopGradient_1:output Subtract_1:y", "Subtract_1:z Exp_1:x", "Exp_1:y Sum_2:input",
                 "Exp_1:y RealDiv_1:x", "Sum_2:output RealDiv_1:y", "RealDiv_1:z Multiply_1:x",
                 "w:output Multiply_1:y", "Multiply_1:z Sum_1:input"):
        src, dst = wire.split()
        pg.connect(*src.split(":"), *dst.split(":"))
    pg.loss = "Sum_1"
    return p


def softmax_case(n):
    """The feeds of both softmax benchmarks (run.py's (b) and softmax-elem) and the step by hand:
    the loss sum(softmax(x) * w) and its gradient in x."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=n).astype(np.float32) * 3
    w = rng.normal(size=n).astype(np.float32)

    def hand():
        z = x - x.max()
        e = np.exp(z)
        p = e / e.sum()
        loss = (p * w).sum()
        gx = p * (w - (w * p).sum())
        return loss, gx
    return {"x": x, "w": w}, hand


def bench_softmax_elem(repeats, timeit_pair, n=1_000_000):
    program = compile_project(softmax_elem_project(n))
    program.raise_for_errors()
    feeds, hand = softmax_case(n)

    def ours():
        return run(program, feeds, target="Sum_1", wrt=["x"], record=False)

    ref, res = hand(), ours()
    np.testing.assert_allclose(res.value("Sum_1"), ref[0], rtol=1e-3, atol=1e-6)
    np.testing.assert_allclose(res.variable_grads["x"], ref[1], rtol=1e-3, atol=1e-9)
    h, o = timeit_pair(hand, ours, repeats)
    h_off, off = timeit_pair(hand, lambda: run(program, feeds, target="Sum_1", wrt=["x"], record=False,
                                           check_numerics=False), max(3, repeats // 2))
    return [("softmax of elementary blocks, 1e6", h, o, 1.30, f"checks off: {off / h_off:.2f}x")]
