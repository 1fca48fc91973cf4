"""Audit of the ONNX import's units as composites (audit17b): crafted models imported with
group="composites" compute what the same model framed computes, and what onnxruntime computes;
definitions are shared only by units alike but for their weights; ungrouping keeps the numbers."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from blockflow.compile.compiler import compile_project  # noqa: E402
from blockflow.compile.grouping import plan_ungroup, restructure  # noqa: E402
from blockflow.composite import composite_name  # noqa: E402
from blockflow.importing.onnx_import import import_onnx  # noqa: E402
from blockflow.io.project_io import load_project, save_project  # noqa: E402
from blockflow.run.runtime import run  # noqa: E402

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def _f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def _vi(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _save(tmp_path, nodes, inputs, outputs, inits, name="m.onnx"):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    path = tmp_path / name
    path.write_bytes(model.SerializeToString())
    return path


def _outputs(path, feeds, group):
    project, report = import_onnx(path, group=group)
    marks = [report.outputs[k] for k in report.outputs]
    result = run(compile_project(project), {report.inputs[k]: v for k, v in feeds.items()}, fetch=marks,
                 record=False)
    return project, report, [result.value(m) for m in marks]


def _reference(path, feeds):
    ort = pytest.importorskip("onnxruntime")
    return ort.InferenceSession(str(path)).run(None, feeds)


def _agree(path, feeds):
    """The composites' outputs equal the frames' bit for bit, and onnxruntime's closely."""
    project, report, grouped = _outputs(path, feeds, "composites")
    _, _, framed = _outputs(path, feeds, "frames")
    for g, f, r in zip(grouped, framed, _reference(path, feeds)):
        np.testing.assert_array_equal(g, f)
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-5)
    return project, report


def _dense_chain(tmp_path, scopes, rng, act="Tanh"):
    nodes, inits, inp = [], [], "x"
    for s in scopes:
        nodes += [helper.make_node("MatMul", [inp, f"{s}/W"], [f"{s}/mm"], name=f"{s}/matmul"),
                  helper.make_node("Add", [f"{s}/mm", f"{s}/b"], [f"{s}/ad"], name=f"{s}/add"),
                  helper.make_node(act, [f"{s}/ad"], [f"{s}/out"], name=f"{s}/act")]
        inits += [numpy_helper.from_array(_f32(rng, 4, 4), f"{s}/W"), numpy_helper.from_array(_f32(rng, 4), f"{s}/b")]
        inp = f"{s}/out"
    nodes.append(helper.make_node("Identity", [inp], ["y"], name="final"))
    return _save(tmp_path, nodes, [_vi("x", [2, 4])], [_vi("y", [2, 4])], inits)


@pytest.mark.xfail(strict=True, reason=(
    "a Conv with a bias inside a name scope, its weights named like TF's (block1/conv/weights, "
    "block1/conv/bias), keeps the unit's name inside its node composite: the BiasAdd 'block1.conv_bias' "
    "cannot become 'bias' (the Variable's name), so Conv, Conv_2, Conv_3 and then block1..block3 "
    "never share: 3 units alike but for their weights give 6 composites, not 2 (docs/import.md says "
    "they share one)"))
def test_units_with_a_biased_conv_named_like_tf_share_a_definition(tmp_path):
    rng = np.random.default_rng(0)
    nodes, inits, inp = [], [], "x"
    for s in ("block1", "block2", "block3"):
        nodes += [helper.make_node("Conv", [inp, f"{s}/conv/weights", f"{s}/conv/bias"], [f"{s}/conv/out"],
                                   name=f"{s}/conv", pads=[1, 1, 1, 1]),
                  helper.make_node("Relu", [f"{s}/conv/out"], [f"{s}/out"], name=f"{s}/relu")]
        inits += [numpy_helper.from_array(_f32(rng, 2, 2, 3, 3), f"{s}/conv/weights"),
                  numpy_helper.from_array(_f32(rng, 2), f"{s}/conv/bias")]
        inp = f"{s}/out"
    nodes.append(helper.make_node("Identity", [inp], ["y"], name="final"))
    path = _save(tmp_path, nodes, [_vi("x", [1, 2, 5, 5])], [_vi("y", [1, 2, 5, 5])], inits)
    project, report = _agree(path, {"x": _f32(rng, 1, 2, 5, 5)})
    page = project.pages[0]
    assert len({page.nodes[u].block for u in ("block1", "block2", "block3")}) == 1
    assert report.composites == 2


@pytest.mark.xfail(strict=True, reason=(
    "a Gemm inside a name scope, its weights named u1/W and u1/c, keeps them as 'u1.W' and 'u1.c' in "
    "its node composite: units u1 and u3, alike but for their weights, get separate Gemm definitions "
    "and so separate unit definitions (u2, whose Gemm has another alpha, rightly gets its own)"))
def test_units_with_a_scoped_gemm_share_a_definition(tmp_path):
    rng = np.random.default_rng(1)
    nodes, inits, inp = [], [], "x"
    for s, alpha in (("u1", 1.0), ("u2", 0.25), ("u3", 1.0)):
        nodes += [helper.make_node("Gemm", [inp, f"{s}/W", f"{s}/c"], [f"{s}/g"], name=f"{s}/gemm", alpha=alpha),
                  helper.make_node("Relu", [f"{s}/g"], [f"{s}/out"], name=f"{s}/relu")]
        inits += [numpy_helper.from_array(_f32(rng, 4, 4), f"{s}/W"), numpy_helper.from_array(_f32(rng, 4), f"{s}/c")]
        inp = f"{s}/out"
    nodes.append(helper.make_node("Neg", [inp], ["y"], name="neg"))
    path = _save(tmp_path, nodes, [_vi("x", [2, 4])], [_vi("y", [2, 4])], inits)
    project, _report = _agree(path, {"x": _f32(rng, 2, 4)})
    page = project.pages[0]
    assert page.nodes["u2"].block != page.nodes["u1"].block
    assert page.nodes["u1"].block == page.nodes["u3"].block


def test_units_alike_but_for_an_attr_or_a_wiring_keep_their_own_definitions(tmp_path):
    rng = np.random.default_rng(2)
    x = _f32(rng, 2, 4)

    def leaky(s, inp, alpha, swap=False):
        a, b = (inp, f"{s}/mm") if swap else (f"{s}/mm", inp)
        return [helper.make_node("MatMul", [inp, f"{s}/W"], [f"{s}/mm"], name=f"{s}/matmul"),
                helper.make_node("Sub", [a, b], [f"{s}/d"], name=f"{s}/sub"),
                helper.make_node("LeakyRelu", [f"{s}/d"], [f"{s}/out"], name=f"{s}/act", alpha=alpha)]
    for second in ((0.5, False), (0.1, True)):
        nodes = leaky("blockA", "x", 0.1) + leaky("blockB", "blockA/out", *second)
        nodes.append(helper.make_node("Identity", ["blockB/out"], ["y"], name="id"))
        inits = [numpy_helper.from_array(_f32(rng, 4, 4), n) for n in ("blockA/W", "blockB/W")]
        path = _save(tmp_path, nodes, [_vi("x", [2, 4])], [_vi("y", [2, 4])], inits)
        project, _ = _agree(path, {"x": x})
        page = project.pages[0]
        assert "blockA" not in page.nodes or "blockB" not in page.nodes or \
            page.nodes["blockA"].block != page.nodes["blockB"].block


def test_units_alike_but_for_an_inline_constant_compute_their_own(tmp_path):
    rng = np.random.default_rng(3)

    def unit(s, inp, c):
        return [helper.make_node("MatMul", [inp, f"{s}/W"], [f"{s}/mm"], name=f"{s}/matmul"),
                helper.make_node("Constant", [], [f"{s}/c"], name=f"{s}/const",
                                 value=helper.make_tensor(f"{s}/cv", TensorProto.FLOAT, [], [c])),
                helper.make_node("Mul", [f"{s}/mm", f"{s}/c"], [f"{s}/out"], name=f"{s}/mul")]
    nodes = unit("blockA", "x", 2.0) + unit("blockB", "blockA/out", 3.0)
    nodes.append(helper.make_node("Identity", ["blockB/out"], ["y"], name="id"))
    inits = [numpy_helper.from_array(_f32(rng, 4, 4), n) for n in ("blockA/W", "blockB/W")]
    path = _save(tmp_path, nodes, [_vi("x", [2, 4])], [_vi("y", [2, 4])], inits)
    _agree(path, {"x": _f32(rng, 2, 4)})


@pytest.mark.parametrize("scopes", [["input", "output"], ["loss", "x"], ["y", "final"], ["a/b", "a/c"],
                                    ["Gemm", "Gemm_2"], ["blk.1", "blk-1"], ["placeholder", "Variable"]])
def test_scope_names_like_ports_blocks_or_composites_import_save_load_and_run(tmp_path, scopes):
    rng = np.random.default_rng(4)
    path = _dense_chain(tmp_path, scopes, rng)
    x = _f32(rng, 2, 4)
    project, report = _agree(path, {"x": x})
    assert report.composites >= 1
    save_project(project, tmp_path / "p.bflow.json")
    loaded = load_project(tmp_path / "p.bflow.json")
    (mark,) = report.outputs.values()
    (ph,) = report.inputs.values()
    a, b = (run(compile_project(p), {ph: x}, fetch=[mark], record=False).value(mark) for p in (project, loaded))
    np.testing.assert_array_equal(a, b)


def test_a_unit_output_that_is_a_graph_output_and_gemm_conv_pool_variants(tmp_path):
    rng = np.random.default_rng(5)
    nodes = [helper.make_node("MatMul", ["x", "blockA/W"], ["blockA/mm"], name="blockA/matmul"),
             helper.make_node("Tanh", ["blockA/mm"], ["y1"], name="blockA/tanh"),
             helper.make_node("MatMul", ["y1", "blockB/W"], ["blockB/mm"], name="blockB/matmul"),
             helper.make_node("Tanh", ["blockB/mm"], ["y2"], name="blockB/tanh")]
    inits = [numpy_helper.from_array(_f32(rng, 4, 4), n) for n in ("blockA/W", "blockB/W")]
    path = _save(tmp_path, nodes, [_vi("x", [2, 4])], [_vi("y1", [2, 4]), _vi("y2", [2, 4])], inits)
    _agree(path, {"x": _f32(rng, 2, 4)})
    arrays = {n: _f32(rng, 2, 2, 3, 3) if n[0] == "W" else _f32(rng, 2) for n in ("W1", "b1", "W2", "b2", "W3", "b3")}
    nodes = [helper.make_node("Conv", ["x", "W1", "b1"], ["h1"], name="c1", pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["h1", "W2", "b2"], ["h2"], name="c2", pads=[0, 0, 2, 2], dilations=[2, 2]),
             helper.make_node("Conv", ["h2", "W3", "b3"], ["h3"], name="c3", pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("AveragePool", ["h3"], ["h4"], name="p1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("AveragePool", ["h4"], ["y"], name="p2", kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                              count_include_pad=1)]
    path = _save(tmp_path, nodes, [_vi("x", [1, 2, 8, 8])], [_vi("y", [1, 2, 3, 3])],
                 [numpy_helper.from_array(v, k) for k, v in arrays.items()], "conv.onnx")
    _agree(path, {"x": _f32(rng, 1, 2, 8, 8)})


def test_ungrouping_units_and_nodes_keeps_the_numbers():
    project, report = import_onnx(LIGHT / "light_squeezenet.onnx")
    page = project.pages[0]
    rng = np.random.default_rng(6)
    for diagram in project.diagrams():
        for node in diagram.nodes.values():
            for key, value in list(node.attrs.items()):
                if isinstance(value, np.ndarray) and value.dtype.kind == "f":
                    node.attrs[key] = rng.uniform(0.01, 0.03, value.shape).astype(value.dtype)
    (ph,) = report.inputs.values()
    (mark,) = report.outputs.values()
    x = rng.random((1, 3, 224, 224), dtype=np.float32)
    before = run(compile_project(project), {ph: x}, fetch=[mark], record=False).value(mark)
    for inst in ("fire3", "fire4"):
        restructure(project, plan_ungroup(project, page.name, inst, program=compile_project(project)))
    conv = next(n for n, node in page.nodes.items() if (composite_name(node.block) or "").startswith("Conv"))
    restructure(project, plan_ungroup(project, page.name, conv, program=compile_project(project)))
    after = run(compile_project(project), {ph: x}, fetch=[mark], record=False).value(mark)
    np.testing.assert_array_equal(before, after)


@pytest.mark.xfail(strict=True, reason=(
    "grouping mixes a seed per instance into each Dropout's attrs (seed 987090683 in blk1, 631495252 in "
    "blk2) and _weights_as_params drops the seed of Variables only: units alike but for their weights "
    "that hold a Dropout (training off) never share a definition, so two such units give 2 composites"))
def test_units_with_a_dropout_share_a_definition(tmp_path):
    rng = np.random.default_rng(7)
    nodes, inits, inp = [], [], "x"
    for s in ("blk1", "blk2"):
        nodes += [helper.make_node("MatMul", [inp, f"{s}/W"], [f"{s}/mm"], name=f"{s}/matmul"),
                  helper.make_node("Dropout", [f"{s}/mm"], [f"{s}/out"], name=f"{s}/drop", ratio=0.5)]
        inits.append(numpy_helper.from_array(_f32(rng, 4, 4), f"{s}/W"))
        inp = f"{s}/out"
    nodes.append(helper.make_node("Identity", [inp], ["y"], name="final"))
    graph = helper.make_graph(nodes, "g", [_vi("x", [2, 4])], [_vi("y", [2, 4])], initializer=inits)
    path = tmp_path / "drop.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)]).SerializeToString())
    project, report = _agree(path, {"x": _f32(rng, 2, 4)})
    page = project.pages[0]
    assert report.groups == 2
    assert page.nodes["blk1"].block == page.nodes["blk2"].block


def test_integer_weights_and_nested_scopes(tmp_path):
    rng = np.random.default_rng(8)
    nodes, inits, inp = [], [], "x"
    for s in ("blk1", "blk2"):
        nodes += [helper.make_node("Mul", [inp, f"{s}/W"], [f"{s}/mm"], name=f"{s}/mul"),
                  helper.make_node("Add", [f"{s}/mm", f"{s}/b"], [f"{s}/out"], name=f"{s}/add")]
        inits += [numpy_helper.from_array(rng.integers(-3, 3, (2, 4)).astype(np.int32), f"{s}/W"),
                  numpy_helper.from_array(rng.integers(-3, 3, (4,)).astype(np.int32), f"{s}/b")]
        inp = f"{s}/out"
    nodes.append(helper.make_node("Identity", [inp], ["y"], name="final"))
    ints = [helper.make_tensor_value_info(n, TensorProto.INT32, [2, 4]) for n in ("x", "y")]
    path = _save(tmp_path, nodes, ints[:1], ints[1:], inits, "ints.onnx")
    _agree(path, {"x": rng.integers(-3, 3, (2, 4)).astype(np.int32)})
    nodes, inits, inp = [], [], "x"
    for s in ("enc/layer1/attn", "enc/layer1/ffn", "enc/layer2/attn", "enc/layer2/ffn"):
        nodes += [helper.make_node("MatMul", [inp, f"{s}/W"], [f"{s}/mm"], name=f"{s}/matmul"),
                  helper.make_node("Tanh", [f"{s}/mm"], [f"{s}/out"], name=f"{s}/tanh")]
        inits.append(numpy_helper.from_array(_f32(rng, 4, 4), f"{s}/W"))
        inp = f"{s}/out"
    nodes.append(helper.make_node("Identity", [inp], ["y"], name="final"))
    path = _save(tmp_path, nodes, [_vi("x", [2, 4])], [_vi("y", [2, 4])], inits, "nested.onnx")
    project, report = _agree(path, {"x": _f32(rng, 2, 4)})
    assert report.groups == 2 and report.composites == 1


def test_training_instances_of_one_definition_trains_each_its_own_weights(tmp_path):
    from blockflow.run.training import TrainConfig, Trainer, train_steps, training_program

    rng = np.random.default_rng(9)
    path = _dense_chain(tmp_path, ["blk1", "blk2", "blk3"], rng)
    x = _f32(rng, 2, 4)
    losses, trained = {}, {}
    for group in ("composites", "frames"):
        project, report = import_onnx(path, group=group)
        (ph,) = report.inputs.values()
        trainer = Trainer(training_program(project), TrainConfig(steps=4, optimizer="sgd"), feeds={ph: x})
        losses[group] = [r.loss for r in train_steps(trainer, 4).steps]
        trained[group] = [trainer.values[k] for k in sorted(trainer.values)]
    grouped = import_onnx(path)[0]
    assert len({n.block for n in grouped.pages[0].nodes.values() if composite_name(n.block)}) == 1
    assert losses["composites"] == losses["frames"] and len(trained["composites"]) == 6
    # the same trained values (their ids differ: blk1/W_1_b in an instance, blk1.W on the page)
    key = lambda a: (a.shape, a.tobytes())  # noqa: E731
    assert sorted(map(key, trained["composites"])) == sorted(map(key, trained["frames"]))


@pytest.mark.xfail(strict=True, reason=(
    "_drop_unit_name keeps a block's unit name when the name left is taken: a unit's bias Variable "
    "blk2.b cannot become 'b', the Input port the MatMul's tied weight (read from outside) enters by, "
    "so blk2 and blk3, alike but for their weights, keep 'blk2.b' and 'blk3.b' and do not share (the "
    "same root as the Conv case: a free name such as b_2 would do)"))
def test_units_whose_stripped_name_is_taken_by_a_port_share_a_definition(tmp_path):
    rng = np.random.default_rng(10)
    nodes, inits, inp = [], [], "x"
    for s in ("blk1", "blk2", "blk3"):
        nodes += [helper.make_node("MatMul", [inp, "blk1/W"], [f"{s}/mm"], name=f"{s}/matmul"),
                  helper.make_node("Add", [f"{s}/mm", f"{s}/b"], [f"{s}/ad"], name=f"{s}/add"),
                  helper.make_node("Tanh", [f"{s}/ad"], [f"{s}/out"], name=f"{s}/act")]
        inits.append(numpy_helper.from_array(_f32(rng, 4), f"{s}/b"))
        inp = f"{s}/out"
    nodes.append(helper.make_node("Identity", [inp], ["y"], name="final"))
    inits.append(numpy_helper.from_array(_f32(rng, 4, 4), "blk1/W"))
    path = _save(tmp_path, nodes, [_vi("x", [2, 4])], [_vi("y", [2, 4])], inits)
    project, report = _agree(path, {"x": _f32(rng, 2, 4)})
    page = project.pages[0]
    assert report.groups == 3
    assert page.nodes["blk2"].block == page.nodes["blk3"].block


@pytest.mark.xfail(strict=True, reason=(
    "_variables_named_by_reader renames a Variable whose name is a real word or letter (onnx_names' "
    "_GENERIC matches 'W', 'b', 'Weights', any capitalised word): the model's blk1/W and blk1/b, "
    "'blk1.W' and 'blk1.b' framed, are 'matmul_b' and 'b_1_y' in the definition (named after their "
    "readers' ports), names the model never used"))
def test_a_weight_named_by_the_model_keeps_its_name_in_the_definition(tmp_path):
    rng = np.random.default_rng(11)
    path = _dense_chain(tmp_path, ["blk1", "blk2"], rng)
    project, _ = import_onnx(path)
    comp = project.composites[composite_name(project.pages[0].nodes["blk1"].block)]
    variables = {nid for nid, n in comp.page.nodes.items() if n.block == "Variable"}
    assert "W" in variables, variables
