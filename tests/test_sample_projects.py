"""The teaching samples (tools/make_samples.py): each trains headless, with the settings its project
recommends, to the result its text states; each StopGradient sample shows what changes without it.

The numbers asserted are the claims the samples' texts and docs/samples.md make (with a margin),
measured again here on every run; nothing is read back from a file of expected results.
"""
from __future__ import annotations

import copy
import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from blockflow.cli import EXIT_OK, main
from blockflow.compile.compiler import compile_page, compile_project
from blockflow.present.gradview import FLOWS, GradientView
from blockflow.io.project_io import load_project
from blockflow.run.runtime import run, run_backward
from blockflow.run.settings import recommended_settings
from blockflow.run.training import TrainConfig, Trainer, training_program

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_projects"
NEW = ("basic_matmul", "linear_regression", "xor", "moons_classifier", "fgsm_adversarial_training",
       "em_gaussian_mixture", "rbm_contrastive_divergence", "straight_through_estimator", "digits_cnn",
       "vanishing_gradients", "reverse_attention", "resnet_gradients")
TRAINED = {   # sample -> its trainable pages
    "linear_regression": ("linear_regression", "drawn_update"),
    "xor": ("xor",),
    "moons_classifier": ("moons",),
    "fgsm_adversarial_training": ("adversarial", "plain"),
    "em_gaussian_mixture": ("em", "without_stop_gradient"),
    "rbm_contrastive_divergence": ("cd1", "without_stop_gradient"),
    "straight_through_estimator": ("ste", "round_only", "without_stop_gradient"),
    "digits_cnn": ("cnn",),
    "vanishing_gradients": ("sigmoid", "relu", "residual"),
    "reverse_attention": ("reverse",),
}
_cache: dict = {}


def path_of(name: str) -> Path:
    return SAMPLES / f"{name}.bflow.json"


def load(name: str):
    return load_project(path_of(name))


def trained(name: str, page: str, steps: int | None = None, seed: int | None = None):
    """(trainer, history) of ``page`` trained as its project recommends (cached: several tests look
    at the same run)."""
    key = (name, page, steps, seed)
    if key not in _cache:
        project = load(name)
        rec = recommended_settings(project, page)
        program = training_program(project, page, batch_size=rec.get("batch_size"))
        config = TrainConfig(steps=rec["steps"] if steps is None else steps,
                             optimizer=rec.get("optimizer", "adam"), hyper=rec.get("hyper", {}),
                             seed=rec.get("seed", 0) if seed is None else seed,
                             metrics=tuple(project.page(page).metrics))
        trainer = Trainer(program, config)
        _cache[key] = (trainer, trainer.train())
    return _cache[key]


def cli_train(capsys, name: str, *args) -> dict:
    code = main(["train", str(path_of(name)), "--json", "--quiet", *args])
    out = capsys.readouterr().out
    assert code == EXIT_OK, out
    return json.loads(out)


def bypass(project, page: str, node: str):
    """A copy of ``project`` whose ``page`` has the StopGradient ``node`` taken out (its input wired
    straight to whatever it fed): the same diagram with the gradient let through."""
    project = copy.deepcopy(project)
    pg = project.page(page)
    (src,) = [e for e in pg.edges if e.dst == node]
    outs = [e for e in pg.edges if e.src == node]
    pg.remove_node(node)
    for e in outs:
        pg.connect(src.src, src.src_port, e.dst, e.dst_port)
    return project


def grads_of(program, variables=None, target=None):
    """A recorded backward run to ``target`` (default: the page's loss) that changes nothing."""
    return run_backward(program, target=target, record=True, commit=False, variables=variables)


# ------------------------------------------------------------------------------ every sample
@pytest.mark.parametrize("name", NEW)
def test_each_sample_says_what_it_teaches_and_how_to_train_it(name):
    project = load(name)
    meta = project.metadata
    assert meta["title"] and meta["description"]
    first = project.pages[0]
    paragraphs = first.text.split("\n\n")
    assert len(paragraphs) >= 2 and all(p.strip() for p in paragraphs)
    command = "blockflow train" if name in TRAINED else "blockflow run"
    assert f"{command} sample_projects/{name}.bflow.json" in first.text
    for page in project.pages:
        program = compile_project(project, page.name)
        assert program.ok and not program.diagnostics, [str(d) for d in program.diagnostics]
        assert len(set(tuple(n.position) for n in page.nodes.values())) == len(page.nodes)
        for key in (page.loss, *page.metrics):   # the loss and the plotted metrics are scalars
            if key is not None:
                slot = program.slots[program.resolve_target(key)]
                assert slot.type.size == 1, (page.name, key, slot.type)
    training = meta.get("training", {})
    assert set(training) == set(TRAINED.get(name, ()))
    for page, entry in training.items():
        assert project.page(page).loss is not None
        rec = recommended_settings(project, page)
        # every setting written is one the trainer takes (nothing silently dropped)
        assert rec["steps"] == entry["steps"] and rec["seed"] == entry["seed"] and "batch_size" in rec
        if "optimizer" in entry:
            assert rec["optimizer"] == entry["optimizer"] and rec["hyper"]["lr"] == entry["lr"]


def test_the_editor_lists_every_sample():
    from blockflow.gui.main_window import sample_projects

    listed = {p.name for p in sample_projects()}
    assert {f"{name}.bflow.json" for name in NEW} <= listed


# ------------------------------------------------------------------------------ basic_matmul
@pytest.mark.parametrize("page", ["matmul", "transpose_b"])
def test_basic_matmul_gives_19_and_minus_3(page):
    project = load("basic_matmul")
    result = run(compile_project(project, page))
    product = result.value("product")
    assert product.shape == (2, 1)
    np.testing.assert_array_equal(product, [[19.0], [-3.0]])
    assert result.target is None        # forward only


def test_basic_matmul_without_the_transpose_does_not_compile_and_says_why():
    project = load("basic_matmul")
    pg = project.page("matmul")
    pg.remove_node("xT")
    pg.connect("x", "output", "product", "b")
    program = compile_page(pg)
    assert not program.ok
    assert any("2" in str(d) and d.node == "product" for d in program.errors)


# -------------------------------------------------------------------------- linear_regression
def test_linear_regression_finds_w_1_and_b_0_by_gradient_descent():
    trainer, history = trained("linear_regression", "linear_regression")
    assert trainer.mode == "optimizer" and trainer.config.optimizer == "sgd"
    assert abs(float(trainer.values["W"]) - 1.0) < 1e-3 and abs(float(trainer.values["b"])) < 1e-3
    assert history.losses[0] > 1.0 and history.losses[-1] < 1e-6
    assert abs(history.metric("W:ref")[0] - 1.0) > 0.5       # it did not start there


def test_the_drawn_update_page_trains_itself_and_ends_where_sgd_ends():
    graph, _ = trained("linear_regression", "drawn_update")
    sgd, _ = trained("linear_regression", "linear_regression")
    assert graph.mode == "graph"
    for var in ("W", "b"):
        assert float(graph.values[var]) == pytest.approx(float(sgd.values[var]), abs=1e-6)


def test_linear_regression_through_the_cli_uses_the_recommended_settings(capsys):
    out = cli_train(capsys, "linear_regression")
    assert out["optimizer"] == "sgd" and out["steps"] == 1000 and out["settings"]["lr"] == 0.1
    assert abs(out["metrics"]["W:ref"][-1] - 1.0) < 1e-3 and abs(out["metrics"]["b:ref"][-1]) < 1e-3


# ----------------------------------------------------------------------------------------- xor
def test_xor_is_solved():
    trainer, history = trained("xor", "xor")
    r = run(trainer.program, fetch=["prediction", "data:labels"], variables=trainer.values, record=False,
            commit=False)
    p, y = r.value("prediction"), r.value("data", "labels")
    assert y.tolist() == [0, 1, 1, 0]
    assert np.all((p > 0.5) == (y == 1)), p
    assert np.all(np.abs(p - y) < 0.05), p
    assert history.losses[-1] < 0.01 < 0.5 < history.losses[0]
    assert history.metric("accuracy:output")[-1] == 1.0


# --------------------------------------------------------------------------- moons_classifier
def test_moons_test_accuracy_is_at_least_95_percent(capsys):
    trainer, history = trained("moons_classifier", "moons")
    test = trainer.evaluate("test")
    assert test["accuracy:output"] >= 0.95 and test["loss"] < 0.2
    assert history.metric("accuracy:output")[0] < 0.7
    out = cli_train(capsys, "moons_classifier", "--eval-every", "300")
    assert [e["step"] for e in out["test"]] == [299, 599]
    assert out["test"][-1]["accuracy:output"] == pytest.approx(test["accuracy:output"])


# -------------------------------------------------------------------------- fgsm (adversarial)
def test_fgsm_x_adv_is_x_moved_by_eps_along_the_sign_of_the_gradient():
    project = load("fgsm_adversarial_training")
    program = compile_project(project, "adversarial")
    r = run(program, fetch=["x", "x_adv", "grad_x:dx[0]", "step"], record=False, commit=False)
    x, x_adv, g = r.value("x"), r.value("x_adv"), r.value("grad_x", "dx[0]")
    eps = float(project.page("adversarial").nodes["step"].inputs["y"])
    assert np.abs(g).max() > 0                       # the clean loss does depend on x
    np.testing.assert_allclose(x_adv - x, eps * np.sign(g), atol=1e-6)


def test_adversarial_training_is_clearly_more_robust_than_plain_training():
    adv, _ = trained("fgsm_adversarial_training", "adversarial")
    plain, _ = trained("fgsm_adversarial_training", "plain")
    a, p = adv.evaluate("test"), plain.evaluate("test")
    # stated: robust test accuracy 0.77 against 0.56; clean accuracy 0.97 against 1.0
    assert a["accuracy_adv:output"] - p["accuracy_adv:output"] >= 0.10, (a, p)
    assert a["accuracy:output"] >= 0.93 and p["accuracy:output"] >= 0.95
    assert p["accuracy_adv:output"] < p["accuracy:output"] - 0.2     # the attack does hurt the plain model


def test_fgsm_uses_one_mlp_composite_twice_with_tied_weights():
    project = load("fgsm_adversarial_training")
    assert set(project.composites) == {"Dense", "MLP"}
    for page in ("adversarial", "plain"):
        nodes = project.page(page).nodes
        assert nodes["mlp"].block == nodes["mlp_adv"].block == "@MLP"
        assert nodes["mlp_adv"].attrs["share_variables_with"] == "mlp"
    program = compile_project(project, "adversarial")
    trainer, _ = trained("fgsm_adversarial_training", "adversarial")
    # one set of Variables, trained by both losses: the adversarial pass reads mlp's
    assert sorted(trainer.values) == sorted(program.variable_values)
    assert not any(k.startswith("mlp_adv/") for k in trainer.values)
    r = run(trainer.program, fetch=["mlp:logits", "mlp_adv:logits", "x", "x_adv"], variables=trainer.values,
            record=False, commit=False)
    w1, b1 = trainer.values["mlp/hidden_layer/kernel"], trainer.values["mlp/hidden_layer/bias"]
    w2, b2 = trainer.values["mlp/output_layer/kernel"], trainer.values["mlp/output_layer/bias"]
    for x, logits in (("x", "mlp:logits"), ("x_adv", "mlp_adv:logits")):
        expected = np.tanh(r.value(x) @ w1 + b1) @ w2 + b2
        np.testing.assert_allclose(r.value(*logits.split(":")), expected, rtol=1e-4, atol=1e-5)


def test_fgsm_without_the_stop_gradient_gives_the_weights_the_same_gradient_but_reaches_the_batch():
    project = load("fgsm_adversarial_training")
    with_sg = compile_project(project, "adversarial")
    without = compile_project(bypass(project, "adversarial", "x_adv"), "adversarial")
    assert without.ok
    r1, r2 = grads_of(with_sg), grads_of(without)
    assert sorted(r1.variable_grads) == [f"mlp/{layer}/{v}" for layer in ("hidden_layer", "output_layer")
                                         for v in ("bias", "kernel")]     # mlp_adv has none of its own
    for var in r1.variable_grads:           # Sign and Gradients pass no gradient: same update
        np.testing.assert_allclose(r1.variable_grads[var], r2.variable_grads[var], rtol=1e-6, atol=1e-9)
    v1, v2 = GradientView(with_sg, result=r1), GradientView(without, result=r2)
    cut = {(e.src, e.dst) for e in v1.cut_by["x_adv"]}
    assert {("perturbed", "x_adv"), ("x", "perturbed"), ("step", "perturbed")} <= cut
    (into_add,) = [w for e, w in v2.wires.items() if (e.src, e.dst) == ("x", "perturbed")]
    assert into_add.state == FLOWS and into_add.norm > 0      # now the batch gets gradient through x_adv
    assert not np.allclose(r1.grad("x"), r2.grad("x"))
    # and training is the same, step for step
    t1 = Trainer(with_sg, TrainConfig(steps=20, optimizer="adam", hyper={"lr": 0.02}))
    t2 = Trainer(without, TrainConfig(steps=20, optimizer="adam", hyper={"lr": 0.02}))
    assert t1.train().losses == pytest.approx(t2.train().losses, rel=1e-6)


# ------------------------------------------------------------------------------------------ EM
def _em_reference(x):
    """Closed-form EM from the sample's start (numpy, float64): the maximum-likelihood value."""
    mu, sd, pi = np.array([-1.0, 0.0, 1.0]), np.ones(3), np.ones(3) / 3
    for _ in range(500):
        lj = np.log(pi) - 0.5 * ((x[:, None] - mu) / sd) ** 2 - np.log(sd) - 0.5 * np.log(2 * np.pi)
        m = lj.max(1, keepdims=True)
        lse = m[:, 0] + np.log(np.exp(lj - m).sum(1))
        r = np.exp(lj - lse[:, None])
        nk = r.sum(0)
        mu, pi = (r * x[:, None]).sum(0) / nk, nk / len(x)
        sd = np.sqrt((r * (x[:, None] - mu) ** 2).sum(0) / nk)
    return lse.mean()


def test_em_log_likelihood_rises_at_every_step_to_the_maximum():
    trainer, history = trained("em_gaussian_mixture", "em")
    ll = np.array(history.metric("log_likelihood:output"))
    assert len(ll) == 200
    assert np.diff(ll).min() >= -1e-6          # monotone (float noise allowed)
    assert ll[-1] - ll[0] > 0.5
    x = load("em_gaussian_mixture").page("em").feeds["x"]
    assert ll[-1] == pytest.approx(_em_reference(x), abs=1e-5)
    sigma = np.exp(trainer.values["log_sigma"])
    np.testing.assert_allclose(trainer.values["mu"], [-2.5, 0.5, 3.0], atol=0.05)
    np.testing.assert_allclose(sigma, [0.6, 0.8, 0.5], atol=0.05)


def test_em_the_e_step_gradient_is_the_log_likelihoods_and_without_stop_gradient_it_is_not():
    project = load("em_gaussian_mixture")
    em, plain = compile_project(project, "em"), compile_project(project, "without_stop_gradient")
    q_em, ll_em = grads_of(em), grads_of(em, target="log_likelihood")
    q_plain = grads_of(plain)
    for var in ("mu", "log_sigma", "mix_logits"):
        np.testing.assert_allclose(q_em.variable_grads[var], -ll_em.variable_grads[var], rtol=1e-9, atol=1e-12)
    # the same loss value on both pages (only the gradient differs) ...
    assert float(q_plain.value("loss")) == pytest.approx(float(q_em.value("loss")), rel=1e-12)
    # ... which is -(log-likelihood - H(r)), H the responsibilities' entropy
    r = q_em.value("r")
    entropy = float(-(r * np.log(r)).sum(1).mean())
    assert float(q_em.value("loss")) == pytest.approx(-(float(q_em.value("log_likelihood")) - entropy), rel=1e-10)
    # without StopGradient the gradient also flows through r; the middle log-scale's even changes sign
    g_em, g_plain = q_em.variable_grads["log_sigma"], q_plain.variable_grads["log_sigma"]
    assert g_em[1] < -0.1 and g_plain[1] > 0.1
    view_em, view_plain = GradientView(em, result=q_em), GradientView(plain, result=q_plain)
    assert {(e.src, e.dst) for e in view_em.cut_by["e_step"]} == {("joint", "log_r"), ("log_r", "r"), ("r", "e_step")}
    (through_r,) = [w for e, w in view_plain.wires.items() if (e.src, e.dst) == ("r", "weighted")]
    assert through_r.state == FLOWS and through_r.norm > 0.1


def test_em_without_stop_gradient_ends_lower_and_is_not_monotone():
    _, em = trained("em_gaussian_mixture", "em")
    trainer, plain = trained("em_gaussian_mixture", "without_stop_gradient")
    ll_em, ll_plain = np.array(em.metric("log_likelihood:output")), np.array(plain.metric("log_likelihood:output"))
    assert np.diff(ll_plain).min() < -1e-5              # it falls at some steps
    assert ll_plain[-1] < ll_em[-1] - 0.005             # and ends at a worse fit
    assert np.exp(trainer.values["log_sigma"])[1] < 0.72  # the middle component too narrow (EM: 0.81)


# ----------------------------------------------------------------------------------------- RBM
def test_rbm_cd1_reconstruction_error_falls_by_more_than_half():
    _, history = trained("rbm_contrastive_divergence", "cd1")
    err = np.array(history.metric("reconstruction_error:output"))
    assert err[0] == pytest.approx(0.25, abs=0.01)
    assert err[-10:].mean() < 0.5 * err[0]
    assert err[-10:].mean() < 0.02                      # stated: about 0.010


def test_rbm_without_stop_gradient_sends_extra_gradient_into_w_and_reconstructs_worse():
    project = load("rbm_contrastive_divergence")
    cd1, plain = compile_project(project, "cd1"), compile_project(project, "without_stop_gradient")
    trainer, _ = trained("rbm_contrastive_divergence", "cd1")
    values = {k: v for k, v in trainer.values.items()}          # a trained RBM: W far from 0
    r1, r2 = grads_of(cd1, values), grads_of(plain, values)
    # the same samples (same Bernoulli seed and step) and the same loss value ...
    np.testing.assert_array_equal(r1.value("h0"), r2.value("h0"))
    assert float(r1.value("loss")) == pytest.approx(float(r2.value("loss")), rel=1e-6)
    # ... but the gradient through the reconstruction reaches W (and only W: h0 is a sample)
    np.testing.assert_allclose(r1.variable_grads["b_h"], r2.variable_grads["b_h"], rtol=1e-5, atol=1e-6)
    extra = r2.variable_grads["W"] - r1.variable_grads["W"]
    assert np.linalg.norm(extra) > 0.1 * np.linalg.norm(r1.variable_grads["W"])
    v1, v2 = GradientView(cd1, result=r1), GradientView(plain, result=r2)
    assert ("p_v1", "v1") in {(e.src, e.dst) for e in v1.cut_by["v1"]}
    (back, ) = [w for e, w in v2.wires.items() if (e.src, e.dst) == ("hWt", "p_v1")]
    assert back.state == FLOWS and back.norm > 0
    _, cd = trained("rbm_contrastive_divergence", "cd1")
    _, nosg = trained("rbm_contrastive_divergence", "without_stop_gradient")
    e_cd = np.mean(cd.metric("reconstruction_error:output")[-10:])
    e_nosg = np.mean(nosg.metric("reconstruction_error:output")[-10:])
    assert e_nosg > 3 * e_cd, (e_cd, e_nosg)            # stated: about 0.043 against 0.008


def test_rbm_through_the_cli(capsys):
    out = cli_train(capsys, "rbm_contrastive_divergence", "--steps", "400")
    err = out["metrics"]["reconstruction_error:output"]
    assert out["optimizer"] == "sgd" and err[-1] < 0.5 * err[0]


# ----------------------------------------------------------------- straight_through_estimator
def test_ste_learns_the_integer_weights():
    trainer, history = trained("straight_through_estimator", "ste")
    assert history.losses[0] > 9 and history.losses[-1] == 0.0
    assert history.metric("exact:output")[-1] == 1.0
    w = trainer.values["w"].ravel()
    np.testing.assert_array_equal(np.round(w), [2.0, -1.0, 3.0])
    assert not np.array_equal(w, np.round(w))       # w itself stays a real number; it is used rounded


def test_round_alone_and_ste_without_stop_gradient_learn_nothing():
    project = load("straight_through_estimator")
    start = project.page("ste").nodes["w"].attrs["initial_value"]
    for page in ("round_only", "without_stop_gradient"):
        trainer, history = trained("straight_through_estimator", page)
        assert history.losses[-1] == pytest.approx(history.losses[0]) and history.losses[0] > 9
        np.testing.assert_array_equal(trainer.values["w"], start)
    # Round alone: no gradient reaches w at all (the wire into Round is cut)
    r = grads_of(compile_project(project, "round_only"))
    assert r.variable_grads.get("w") is None
    # without StopGradient: gradient flows along both paths from w and cancels to exactly 0
    program = compile_project(project, "without_stop_gradient")
    r = grads_of(program)
    np.testing.assert_array_equal(r.variable_grads["w"], 0.0)
    fan = GradientView(program, result=r).fanout_of("w", "ref")
    parts = {e.dst: g for e, g in fan.contributions}
    assert set(parts) == {"w_q", "rounding_step"}
    assert np.abs(parts["w_q"]).max() > 1
    np.testing.assert_allclose(parts["w_q"] + parts["rounding_step"], 0.0)
    # with it, w gets the gradient of the rounded weights unchanged (straight through)
    program = compile_project(project, "ste")
    r = grads_of(program)
    np.testing.assert_array_equal(r.variable_grads["w"], r.grad("w_q"))


def test_ste_through_the_cli(capsys):
    out = cli_train(capsys, "straight_through_estimator")
    assert out["loss"][-1] == 0.0 and out["metrics"]["exact:output"][-1] == 1.0
    out = cli_train(capsys, "straight_through_estimator", "--page", "round_only")
    assert out["loss"][-1] == out["loss"][0]


def test_texts_state_the_numbers_the_tests_measure():
    """The first page of each trained sample names its recommended steps and learning rate."""
    for name, pages in TRAINED.items():
        project = load(name)
        entry = project.metadata["training"][pages[0]]
        text = project.pages[0].text
        assert re.search(rf"\b{entry['steps']}\b", text), name
        assert re.search(rf"lr {entry['lr']:g}\b", text), name


# ------------------------------------------------------------------------------ resnet_gradients
def test_resnet_gradients_states_what_a_backward_run_measures():
    """The teacher's page quotes the gradient sizes a backward run gives, and they say what it
    says: along the skips the gradient grows from the last unit to the first; without them it
    vanishes, the first convolution's gradient a million times smaller."""
    pytest.importorskip("onnx")   # the builder imports ResNet-50 from the onnx package
    sys.path.insert(0, str(ROOT / "tools"))
    from resnet_sample import _fmt, unit_gradients

    project = load("resnet_gradients")
    with_skips, without = unit_gradients(project, "resnet50"), unit_gradients(project, "without_skips")
    text = project.pages[0].text
    for value in (with_skips["units"]["res5_2"], with_skips["units"]["res2_0"], with_skips["conv1"],
                  without["units"]["res2_0"], without["conv1"]):
        assert _fmt(value) in text, _fmt(value)
    units = with_skips["units"]
    assert max(units, key=units.get) == "res2_0" and units["res2_0"] > 10 * units["res5_2"]
    plain = without["units"]
    assert plain["res2_0"] < 1e-3 * plain["res4_5"]
    assert with_skips["conv1"] > 1e6 * without["conv1"]
