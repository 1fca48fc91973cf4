"""An imported model's units as composites (docs/import.md, "Units as composites"): each ONNX node
mapped to several blocks is one instance, each name scope or repeated unit is an instance, units
alike but for their weights and sizes share one definition, every instance keeps its own weights
(its parameters), and the page computes exactly what the same model imported with its units
framed computes, saved and loaded or not."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from blockflow.cli.entry import main  # noqa: E402
from blockflow.compile.compiler import compile_project  # noqa: E402
from blockflow.composite import PARAM_REF, composite_name  # noqa: E402
from blockflow.importing.onnx_import import import_onnx  # noqa: E402
from blockflow.io.project_io import load_project, save_project  # noqa: E402
from blockflow.run.runtime import run  # noqa: E402

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def _randomized(project, seed=0):
    """Every weight (an instance's parameter, or a Variable's value on the page) drawn anew: the
    light models' weights are all 0.02, which would make any two units look alike in a run."""
    rng = np.random.default_rng(seed)
    for page in project.diagrams():
        for node in page.nodes.values():
            for key, value in list(node.attrs.items()):
                if isinstance(value, np.ndarray) and value.dtype.kind == "f":
                    node.attrs[key] = rng.uniform(0.01, 0.03, value.shape).astype(value.dtype)


def _drawn_in_order(project):
    """The weights of ``project`` in the order the model's nodes read them, by flat id."""
    program = compile_project(project)
    return {s.node: program.variable_values.initial(s.node) for s in program.steps if s.node in program.trainable}


@pytest.fixture(scope="module")
def resnet():
    return import_onnx(LIGHT / "light_resnet50.onnx")


def test_resnet_units_are_instances_and_alike_units_share_a_definition(resnet):
    project, report = resnet
    page = project.pages[0]
    units = [f"res{s}_{i}" for s, n in ((2, 3), (3, 4), (4, 6), (5, 3)) for i in range(n)]
    assert [nid for nid in page.nodes if nid.startswith("res") and "_" in nid and nid[3].isdigit()] == units
    blocks = {u: composite_name(page.nodes[u].block) for u in units}
    # the bottleneck with an identity shortcut is one definition, whatever its stage's channels;
    # the first unit of stages 3-5 (a strided projection shortcut) another; res2_0 projects without
    # a stride; the last unit holds the model's average pool (caffe2 named it after res5_2)
    identity = [u for u in units if not u.endswith("_0") and u != "res5_2"]
    assert {blocks[u] for u in identity} == {"res"}
    assert blocks["res3_0"] == blocks["res4_0"] == blocks["res5_0"] == "res3_0"
    assert blocks["res2_0"] == "res2_0" and blocks["res5_2"] == "res5_2"
    # the classifier's Gemm (MatMul and Add) is one block too
    assert composite_name(page.nodes["pred"].block) == "Gemm"
    assert (report.groups, report.nodes_grouped, report.composites) == (16, 1, 5)
    assert list(project.composites) == ["res2_0", "res", "res3_0", "res5_2", "Gemm"]
    assert "16 units and 1 node of several blocks as instances of 5 composites" in report.lines()[0]
    shared = project.composites["res"]
    # inside: the unit's blocks without its name, one Input (any size) and one Output
    assert {"branch2a", "branch2b", "branch2c", "input", "output"} <= set(shared.page.nodes)
    assert shared.page.nodes["input"].attrs["shape"] == [-1, -1, -1, -1]
    assert "res3_1" in shared.doc and "res5_1" in shared.doc
    # the definition holds no weights: each Variable reads its first value from a parameter
    variables = [n for n in shared.page.nodes.values() if n.block == "Variable"]
    assert variables and all(set(n.attrs["initial_value"]) == {PARAM_REF} for n in variables)
    assert {p.name for p in shared.params} == {n.attrs["initial_value"][PARAM_REF] for n in variables}
    assert all(p.kind == "tensor" for p in shared.params)
    # ... given by each instance: its own
    w1, w2 = (page.nodes[u].attrs["branch2a_w_0"] for u in ("res3_1", "res4_1"))
    assert w1.shape == (1, 1, 512, 128) and w2.shape == (1, 1, 1024, 256)


def test_composites_compute_what_the_framed_page_computes(resnet):
    project, report = resnet
    framed, _ = import_onnx(LIGHT / "light_resnet50.onnx", group="frames")
    assert not framed.composites and len(framed.pages[0].frames) == 17
    # the same weights in the same places: drawn once, in the order the model reads them
    weights = _drawn_in_order(framed)
    names = list(weights)
    rng = np.random.default_rng(1)
    # around the shipped 0.02 and positive (a batch norm's variance is among them), but each entry
    # its own: a weight put in another's place would show
    new = [rng.uniform(0.01, 0.03, weights[n].shape).astype(weights[n].dtype) for n in names]
    grouped = compile_project(project)
    order = [s.node for s in grouped.steps if s.node in grouped.trainable]
    assert len(order) == len(names) == 267
    x = np.random.default_rng(2).random((1, 3, 224, 224), dtype=np.float32)
    (placeholder,) = report.inputs.values()
    (marker,) = report.outputs.values()
    outs = []
    for program, ids in ((compile_project(framed), names), (grouped, order)):
        values = dict(zip(ids, new))
        assert all(values[i].shape == program.variable_values.initial(i).shape for i in ids)
        result = run(program, {placeholder: x}, fetch=[marker], variables=values, record=False)
        outs.append(result.value(marker))
    np.testing.assert_array_equal(outs[0], outs[1])


def test_each_instance_keeps_its_weights_saved_loaded_and_reset(tmp_path):
    project, report = import_onnx(LIGHT / "light_squeezenet.onnx")
    _randomized(project)
    page = project.pages[0]
    assert [n for n in page.nodes if n.startswith("fire")] == [f"fire{i}" for i in range(2, 10)]
    first = _drawn_in_order(project)
    # each instance's Variables start from its own parameter (what Reset gives back)
    # (fire3's squeeze is a Conv with a bias: one block, an instance of the composite Conv)
    assert composite_name(project.composites["fire3"].page.nodes["squeeze1x1"].block).startswith("Conv")
    assert np.array_equal(first["fire3/squeeze1x1/w_0"], page.nodes["fire3"].attrs["squeeze1x1_w_0"])
    assert not np.array_equal(first["fire2/squeeze1x1/w_0"][..., :1, :], first["fire4/squeeze1x1/w_0"][..., :1, :])
    path = tmp_path / "squeezenet.bflow.json"
    save_project(project, path)
    loaded = load_project(path)
    again = _drawn_in_order(loaded)
    assert list(again) == list(first) and all(np.array_equal(again[k], first[k]) for k in first)
    (placeholder,) = report.inputs.values()
    x = np.random.default_rng(0).random((1, 3, 224, 224), dtype=np.float32)
    a, b = (run(compile_project(p), {placeholder: x}, target=p.pages[0].loss, record=False)
            for p in (project, loaded))
    assert a.value(page.loss) == b.value(page.loss)
    assert np.array_equal(a.grad("fire9/expand3x3/w_0"), b.grad("fire9/expand3x3/w_0"))


def test_inception_pool_branches_join_their_module():
    project, _ = import_onnx(LIGHT / "light_inception_v1.onnx")
    page = project.pages[0]
    # the pool branch of each module has no weights to be named by, and was named after the block
    # before the module: it is still the module's, and each module has a single input
    assert [n for n in page.nodes if n.startswith("inception")] == [
        "inception_3a", "inception_3b", "inception_4a", "inception_4b", "inception_4c", "inception_4d",
        "inception_4e", "inception_5a", "inception_5b"]
    assert not any(n.block == "MaxPool" for n in page.nodes.values())
    module = project.composites[composite_name(page.nodes["inception_4a"].block)].page
    assert {"_1x1", "_3x3_reduce", "_5x5", "pool_proj", "maxpool", "input", "output"} <= set(module.nodes)
    # each convolution with its bias is one block
    assert composite_name(module.nodes["_1x1"].block).startswith("Conv")
    assert [n.attrs["name"] for n in module.nodes.values() if n.block == "Input"] == ["input"]
    assert [f.title for f in page.frames] == ["loss (added by the import)"]


def test_the_command_line_groups_as_asked(tmp_path, capsys):
    model = LIGHT / "light_squeezenet.onnx"
    assert main(["import", "onnx", str(model), "-o", str(tmp_path / "a.bflow.json")]) == 0
    assert "10 units and 27 nodes of several blocks as instances of 9 composites" in capsys.readouterr().out
    assert main(["import", "onnx", str(model), "-o", str(tmp_path / "b.bflow.json"), "--group", "frames"]) == 0
    assert "10 frames" in capsys.readouterr().out
    framed = load_project(tmp_path / "b.bflow.json")
    assert not framed.composites and "fire2.squeeze1x1" in framed.pages[0].nodes
    with pytest.raises(SystemExit):
        main(["import", "onnx", str(model), "-o", str(tmp_path / "c.bflow.json"), "--group", "layers"])


def test_a_model_without_units_imports_as_before(tmp_path):
    from onnx import TensorProto, helper
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["h"], name="relu"),
                               helper.make_node("Neg", ["h"], ["y"], name="neg")], "g", [x], [y])
    path = tmp_path / "m.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString())
    project, report = import_onnx(path)
    assert not project.composites and report.composites == 0
    assert [n.block for n in project.pages[0].nodes.values()][:3] == ["Placeholder", "Relu", "Negate"]
    assert not project.pages[0].frames[:-1]


def test_a_unit_that_a_block_outside_it_feeds_back_stays_on_the_page(tmp_path):
    """Scope unit's nodes run in one stretch, but the unscoped 'middle' between them reads
    unit/second and feeds unit/third (and other/fifth, so it is no branch of unit): as an
    instance, unit would feed itself through middle.
    Group refuses it, so unit's blocks stay on the page, and the import ends with a page that
    runs (it used to stop with networkx's "Graph contains a cycle" from the layout); scope other
    is still an instance."""
    from onnx import TensorProto, helper
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="unit/first"),
             helper.make_node("Neg", ["a"], ["b"], name="unit/second"),
             helper.make_node("Exp", ["b"], ["m"], name="middle"),
             helper.make_node("Add", ["b", "m"], ["c"], name="unit/third"),
             helper.make_node("Tanh", ["c"], ["d"], name="other/fourth"),
             helper.make_node("Add", ["d", "m"], ["e"], name="other/fifth"),
             helper.make_node("Sigmoid", ["e"], ["y"], name="other/sixth")]
    graph = helper.make_graph(nodes, "g", [x], [y])
    path = tmp_path / "m.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString())
    project, report = import_onnx(path)
    page = project.pages[0]
    assert report.groups == 1 and list(project.composites) == ["other"]
    assert {"unit.first", "unit.second", "middle", "unit.third"} <= set(page.nodes), sorted(page.nodes)
    program = compile_project(project)
    assert program.ok, [str(d) for d in program.errors]
    xv = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    b = -np.maximum(xv, 0)
    expect = 1 / (1 + np.exp(-(np.tanh(b + np.exp(b)) + np.exp(b))))
    out = run(program, {"x": xv}, record=True).value(report.outputs["y"])
    np.testing.assert_allclose(out, expect, rtol=1e-6)
