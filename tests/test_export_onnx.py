"""The ONNX export (docs/export.md, section ONNX): every block with an ONNX lowering gives, under
ONNX Runtime, the outputs blockflow's runtime gives on each of its test cases (float64 at a tight
tolerance; float32 where ONNX Runtime's CPU provider has no float64 kernel); the sample pages
export, pass the checker and agree with blockflow in inference; hostile names cannot break the
model; a block with no counterpart is refused by name."""
from __future__ import annotations

import re

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from blockflow.compile.compiler import compile_project  # noqa: E402
from blockflow.export.onnx_docs import FLOAT32_ONLY_OPS  # noqa: E402
from blockflow.export.onnx_lowering import onnx_lowering_table  # noqa: E402
from blockflow.export.onnx_model import export_onnx  # noqa: E402
from blockflow.export.torch_module import ExportError  # noqa: E402
from blockflow.run.runtime import run  # noqa: E402

from export_kit import case_project  # noqa: E402
from test_blocks import CASES  # noqa: E402

TABLE = onnx_lowering_table()
LOWERED_CASES = [pytest.param(name, case, str(case.id or i), id=f"{name}-{case.id or i}")
                 for name, cases in CASES.items() if name in TABLE for i, case in enumerate(cases)]

#: uses of a lowered block with no exact ONNX counterpart: each must be refused, naming the block
REFUSED_USES = {
    ("Pow", "int32"),
    ("Dropout", "half"), ("Dropout", "rate-0.2"), ("Dropout", "scalar"),
}


def session(model):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def io_names(model) -> tuple[dict, dict]:
    """{graph input name: node text}, {graph output name: node:port} from the model's metadata."""
    props = {p.key: p.value for p in model.metadata_props}
    ins = {k[len("input:"):]: v for k, v in props.items() if k.startswith("input:")}
    outs = {k[len("output:"):]: v for k, v in props.items() if k.startswith("output:")}
    return ins, outs


def compare_with_ort(project, feeds, outs, *, page=None, rtol=1e-10, atol=1e-12, program=None, scaled=False):
    """Export ``outs`` of the page, run it in ONNX Runtime and in blockflow (inference: the test
    split), and assert the values agree (dtype, shape and value). ``scaled``: ``atol`` is relative
    to each value's largest magnitude (at least 1), for products summed in another order, whose
    rounding grows with the size of their terms (ONNX Runtime's MLAS against OpenBLAS)."""
    program = program or compile_project(project, page)
    model = export_onnx(project, page, outputs=outs, program=program)
    onnx.checker.check_model(model, full_check=True)
    ours = run(program, feeds, split="all", record=True, check_numerics=False)
    ins, out_names = io_names(model)
    feed = {}
    for name, node in ins.items():
        if node in feeds:
            feed[name] = np.asarray(feeds[node])
        else:   # a dataset's output: what blockflow read
            feed[name] = np.asarray(ours.value(*node.split(":")) if ":" in node else ours.value(node))
    got = session(model).run(None, feed)
    graph_outs = [o.name for o in model.graph.output]
    for name, value in zip(graph_outs, got):
        text = out_names[name]
        expect = np.asarray(ours.value(*text.split(":")))
        assert value.dtype == expect.dtype, (text, value.dtype, expect.dtype)
        assert value.shape == expect.shape, (text, value.shape, expect.shape)
        if expect.dtype.kind in "fc":
            finite = np.abs(expect[np.isfinite(expect)])   # an infinity would make atol infinite
            scale = max(1.0, float(np.max(finite, initial=0.0))) if scaled else 1.0
            np.testing.assert_allclose(value, expect, rtol=rtol, atol=atol * scale, err_msg=text)
        else:
            np.testing.assert_array_equal(value, expect, err_msg=text)
    return model


@pytest.mark.parametrize("name, case, case_id", LOWERED_CASES)
def test_lowered_block_equals_the_runtime(name, case, case_id):
    if (name, case_id) in REFUSED_USES:
        project, feeds, outs = case_project(name, case)
        with pytest.raises(ExportError) as err:
            export_onnx(project, outputs=outs)
        assert [p for p in err.value.problems if p.startswith(f"main/B ({name}): ")], err.value.problems
        return
    project, feeds, outs = case_project(name, case)
    try:
        compare_with_ort(project, feeds, outs)
    except ort.capi.onnxruntime_pybind11_state.NotImplemented as exc:
        # ONNX Runtime's CPU provider has no float64 kernel for the op: only for the documented
        # ops, and then the case runs in float32, at a float32 tolerance
        op = re.search(r"implementation for (\w+)\(", str(exc)).group(1)
        assert op in FLOAT32_ONLY_OPS, str(exc)
        project, feeds, outs = case_project(name, case, float64=False)
        if any(np.asarray(v).dtype == np.float64 for v in feeds.values()):
            pytest.skip(f"a float64 case of {op}, which ONNX Runtime runs in float32 only")
        # scaled: a convolution's value near 0 is a sum of terms as large as the output's largest
        # (Conv2D-valid-s2-odd: 6e-7 apart at 0.028, outputs up to 12), rounded by MLAS's
        # kernel for this CPU and by OpenBLAS's in other orders
        compare_with_ort(project, feeds, outs, rtol=2e-5, atol=2e-6, scaled=True)


def _one_op_model(op: str, dtype):
    """A model of the single op ``op`` on a [1, 1, 4, 4] input of ``dtype``."""
    from onnx import TensorProto, helper, numpy_helper

    elem = TensorProto.DOUBLE if dtype == np.float64 else TensorProto.FLOAT
    inputs, inits, attrs = ["x"], [], {}
    if op in ("Conv", "ConvTranspose"):
        inits.append(numpy_helper.from_array(np.ones((1, 1, 2, 2), dtype), "w"))
        inputs.append("w")
    if op == "AveragePool":
        attrs["kernel_shape"] = [2, 2]
    if op == "LRN":
        attrs["size"] = 3
    node = helper.make_node(op, inputs, ["y"], **attrs)
    graph = helper.make_graph([node], "one", [helper.make_tensor_value_info("x", elem, [1, 1, 4, 4])],
                              [helper.make_tensor_value_info("y", elem, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = helper.find_min_ir_version_for(model.opset_import)
    return model


@pytest.mark.parametrize("op", sorted(FLOAT32_ONLY_OPS))
def test_the_float32_only_ops_have_no_float64_kernel(op):
    """The documented list stays true: ONNX Runtime refuses the op in float64, runs it in float32."""
    session(_one_op_model(op, np.float32))
    with pytest.raises(ort.capi.onnxruntime_pybind11_state.NotImplemented):
        session(_one_op_model(op, np.float64))


def test_a_block_with_no_counterpart_is_refused_by_name():
    from diagrams import chain

    project = chain(("x", "Placeholder", {"shape": [3]}, None),
                    ("odd", "Bernoulli", {}, {"probs": "x"}))
    assert "Bernoulli" not in TABLE
    with pytest.raises(ExportError) as err:
        export_onnx(project, outputs=["odd"])
    assert "Bernoulli" in str(err.value) and any("odd" in p for p in err.value.problems)


def _sample_pages():
    from pathlib import Path

    from blockflow.io.project_io import load_project

    root = Path(__file__).resolve().parent.parent / "sample_projects"
    for path in sorted(root.glob("*.bflow.json")):
        project = load_project(path)
        for page in project.pages:
            yield pytest.param(path, page.name, id=f"{path.name.split('.')[0]}-{page.name}")


SAMPLE_PAGES = list(_sample_pages())


def _skip_float64_without_kernel(program):
    """Skip a page that ONNX Runtime cannot load: a float64 block whose op its CPU provider runs in
    float32 only (the ResNet-50 sample computes in float64). Its export is still checked by the
    ONNX checker here and run by blockflow in tests/test_import_onnx_roundtrip.py."""
    blocks = {b.split(" ")[0] for names in FLOAT32_ONLY_OPS.values() for b in names}
    for st in program.steps:
        if st.spec.name in blocks and any(program.slot(o).type.dtype == np.float64 for o in st.outputs):
            pytest.skip(f"{st.spec.name} in float64 ({st.node}): ONNX Runtime's CPU provider has no float64 kernel")


@pytest.mark.parametrize("path, page", SAMPLE_PAGES)
def test_sample_page_exports_and_equals_the_runtime(path, page):
    from blockflow.export.onnx_model import onnx_needed_nodes, onnx_refused_blocks
    from blockflow.export.torch_module import output_slots
    from blockflow.io.project_io import load_project

    project = load_project(path)
    program = compile_project(project, page)
    refused = onnx_refused_blocks(program, onnx_needed_nodes(program, output_slots(program, None)))
    if refused:
        with pytest.raises(ExportError) as err:
            export_onnx(project, page, program=program)
        for name in refused:
            assert name in str(err.value)
        return
    onnx.checker.check_model(export_onnx(project, page, program=program), full_check=True)
    _skip_float64_without_kernel(program)
    compare_with_ort(project, {}, None, page=page, program=program, rtol=1e-5, atol=1e-6,
                     scaled=True)


def _hostile_project():
    from blockflow.project import Project

    project = Project()
    page = project.add_page("pa\"ge'; import os # <b>ü<b> \\ ")
    long_a, long_b = "a" * 300, "a" * 299 + "b"
    page.add_node("Placeholder", id="x.y", attrs={"shape": [None, 3], "dtype": "float64"})
    page.add_node("Placeholder", id="x-y", attrs={"shape": [None, 3], "dtype": "float64"})
    page.add_node("Add", id="x_y")
    page.connect("x.y", "output", "x_y", "x")
    page.connect("x-y", "output", "x_y", "y")
    page.add_node("Exp", id="if")
    page.connect("x_y", "z", "if", "x")
    page.add_node("Const", id="__class__", attrs={"value": [[float("inf"), -1.5, float("nan")]], "dtype": "float64"})
    page.add_node("Multiply", id="Model")
    page.connect("if", "y", "Model", "x")
    page.connect("__class__", "output", "Model", "y")
    for nid in (long_a, long_b):
        page.add_node("Negate", id=nid)
        page.connect("Model", "z", nid, "x")
    return project, [long_a, long_b, "if"]


def test_hostile_names_stay_names_and_the_model_runs():
    import re

    project, outs = _hostile_project()
    rng = np.random.default_rng(0)
    feeds = {"x.y": rng.standard_normal((4, 3)), "x-y": rng.standard_normal((4, 3))}
    model = compare_with_ort(project, feeds, outs)
    graph = model.graph
    names = ([i.name for i in graph.input] + [o.name for o in graph.output] + [t.name for t in graph.initializer]
             + [v for n in graph.node for v in list(n.input) + list(n.output)] + [n.name for n in graph.node])
    plain = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,80}$")
    assert all(plain.match(n) for n in names), [n for n in names if not plain.match(n)]
    produced = [v for n in graph.node for v in n.output]
    assert len(produced) == len(set(produced)) and len({n.name for n in graph.node}) == len(graph.node)
    ins, outputs = io_names(model)
    assert sorted(ins.values()) == ["x-y", "x.y"]                 # the ids, exactly, in the metadata
    assert sorted(outputs.values()) == sorted(f"{o}:y" for o in outs)
    dims = [[d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim] for i in graph.input]
    assert all(isinstance(d[0], str) and d[0] and d[1] == 3 for d in dims), dims
    assert "import os" not in graph.name and graph.name.isidentifier()


def test_an_instance_keeps_its_scope_in_node_and_value_names_and_runs_in_one_stretch():
    """Nested instances (an MLP of Dense layers, one of them named 'if', a keyword) export with
    node and value names ``scope/inner`` made of identifiers, the graph's inputs and outputs plain
    identifiers, and each instance's nodes one stretch of the graph (its weight's preparation,
    ``bias_used``, next to its layer rather than first with the schedule's sources)."""
    from blockflow.composite import Composite, block_name
    from blockflow.project import Project

    project = Project()
    project.composites["Dense"] = _library_layers()["Dense"]()     # its bias goes through bias_used
    mlp = Composite("MLP", doc="two Dense layers")
    mp = mlp.page
    mp.add_node("Input", id="x", attrs={"name": "x", "dtype": "float32", "shape": [-1, 3]})
    mp.add_node(block_name("Dense"), id="if", attrs={"units": 4, "activation": "relu"})
    mp.add_node(block_name("Dense"), id="out-layer", attrs={"units": 2})
    mp.add_node("Output", id="y", attrs={"name": "y"})
    mp.connect("x", "output", "if", "x")
    mp.connect("if", "y", "out-layer", "x")
    mp.connect("out-layer", "y", "y", "input")
    project.composites["MLP"] = mlp
    page = project.add_page("main")
    page.add_node("Placeholder", id="X", attrs={"dtype": "float32", "shape": [5, 3]})
    page.add_node(block_name("MLP"), id="net")
    page.add_node("Tanh", id="head")
    page.connect("X", "output", "net", "x")
    page.connect("net", "y", "head", "x")
    feeds = {"X": np.random.default_rng(3).standard_normal((5, 3)).astype(np.float32)}
    model = compare_with_ort(project, feeds, ["head:y"], rtol=1e-6, atol=1e-7)
    graph = model.graph
    ident = r"[A-Za-z_][A-Za-z0-9_]{0,80}"
    scoped = re.compile(rf"^{ident}(/{ident})*$")
    inner = [n.name for n in graph.node] + [v for n in graph.node for v in n.output] + [t.name for t in graph.initializer]
    assert all(scoped.match(n) for n in inner), [n for n in inner if not scoped.match(n)]
    io = [i.name for i in graph.input] + [o.name for o in graph.output]
    assert io == ["X", "head_y"]
    names = [n.name for n in graph.node]
    scopes = [n.rsplit("/", 1)[0] if "/" in n else "" for n in names]
    assert {"net/if_", "net/out_layer"} <= set(scopes), names
    for scope in ("net/if_", "net/out_layer"):       # one stretch each
        at = [i for i, s in enumerate(scopes) if s == scope]
        assert at == list(range(at[0], at[-1] + 1)), names
    assert names[-1].startswith("head")


def test_every_refused_block_is_listed_at_once():
    from diagrams import chain

    project = chain(("x", "Placeholder", {"shape": [3]}, None),
                    ("coin", "Bernoulli", {}, {"probs": "x"}),
                    ("noise", "RandomNormal", {}, {"shape": [3], "mean": 0.0, "stddev": 1.0}),
                    ("both", "Add", {}, {"x": "coin", "y": "noise"}))
    with pytest.raises(ExportError) as err:
        export_onnx(project, outputs=["both"])
    assert "Bernoulli" in str(err.value) and "RandomNormal" in str(err.value)
    assert any("coin" in p for p in err.value.problems) and any("noise" in p for p in err.value.problems)


def test_a_use_with_no_counterpart_is_refused_with_the_reason():
    from diagrams import chain

    project = chain(("x", "Placeholder", {"shape": [3], "dtype": "float64"}, None),
                    ("drop", "Dropout", {"rate": 0.5, "training": True}, {"x": "x"}),
                    ("off", "Dropout", {"rate": 0.5, "training": False}, {"x": "drop"}))
    with pytest.raises(ExportError) as err:
        export_onnx(project, outputs=["off"])
    assert err.value.problems == [p for p in err.value.problems if p.startswith("main/drop (Dropout): ")]
    assert "random mask" in err.value.problems[0]


def test_inference_leaves_out_training_blocks():
    """The linear regression page updates its Variables with Apply*: the ONNX model of its loss
    has no such node, and its Variables are initializers."""
    from pathlib import Path

    from blockflow.io.project_io import load_project

    path = Path(__file__).resolve().parent.parent / "sample_projects" / "linear_regression.bflow.json"
    project = load_project(path)
    model = export_onnx(project, "drawn_update")
    assert {n.op_type for n in model.graph.node} <= {"Mul", "Add", "Sub", "ReduceSum", "Div"}
    assert {t.name for t in model.graph.initializer} >= {"W", "b"}


@pytest.mark.parametrize("opset", [17, 18, onnx.defs.onnx_opset_version()])
def test_opsets_from_17_give_the_same_values(opset):
    from diagrams import chain

    project = chain(("x", "Placeholder", {"shape": [None, 4], "dtype": "float64"}, None),
                    ("m", "Mean", {"keep_dims": True}, {"input": "x", "axis": [1]}),
                    ("top", "Max", {}, {"input": "x", "axis": [0]}),
                    ("prod", "Prod", {}, {"input": "top"}))
    x = np.random.default_rng(1).standard_normal((5, 4))
    program = compile_project(project)
    model = export_onnx(project, outputs=["m", "prod"], program=program, opset=opset)
    assert model.opset_import[0].version == opset
    got = session(model).run(None, {"x": x})
    np.testing.assert_allclose(got[0], x.mean(axis=1, keepdims=True), rtol=1e-12)
    np.testing.assert_allclose(got[1], np.prod(x.max(axis=0)), rtol=1e-12)


def test_an_opset_below_17_is_refused():
    from diagrams import chain

    project = chain(("x", "Placeholder", {"shape": [3]}, None), ("e", "Exp", {}, {"x": "x"}))
    with pytest.raises(ExportError, match="opset 13"):
        export_onnx(project, outputs=["e"], opset=13)


def test_cli_writes_a_model_onnx_runtime_runs(tmp_path, capsys):
    from pathlib import Path

    from blockflow.cli import EXIT_OK, main

    sample = Path(__file__).resolve().parent.parent / "sample_projects" / "moons_classifier.bflow.json"
    target = tmp_path / "moons.onnx"
    code = main(["export", "onnx", str(sample), "-o", str(target), "--output-node", "logits"])
    out, err = capsys.readouterr()
    assert code == EXIT_OK, err
    assert str(target) in out
    model = onnx.load(str(target))
    onnx.checker.check_model(model, full_check=True)
    assert [o.name for o in model.graph.output] == ["logits"]
    x = np.random.default_rng(0).standard_normal((7, 2)).astype(np.float32)
    (logits,) = session(model).run(None, {"data_features": x})
    assert logits.shape == (7, 2)


def test_cli_names_the_refused_blocks_and_writes_nothing(tmp_path, capsys):
    from pathlib import Path

    from blockflow.cli import EXIT_DIAGNOSTICS, main

    sample = Path(__file__).resolve().parent.parent / "sample_projects" / "rbm_contrastive_divergence.bflow.json"
    target = tmp_path / "rbm.onnx"
    code = main(["export", "onnx", str(sample), "-o", str(target)])
    out, err = capsys.readouterr()
    assert code == EXIT_DIAGNOSTICS
    assert "Bernoulli" in err and "h0" in err and "nothing was written" in err
    assert not target.exists()


def test_cli_without_onnx_says_how_to_install_it(tmp_path, capsys, monkeypatch):
    import sys
    from pathlib import Path

    from blockflow.cli import EXIT_USAGE, main

    monkeypatch.setitem(sys.modules, "onnx", None)     # import onnx now raises ImportError
    sample = Path(__file__).resolve().parent.parent / "sample_projects" / "moons_classifier.bflow.json"
    code = main(["export", "onnx", str(sample), "-o", str(tmp_path / "m.onnx")])
    out, err = capsys.readouterr()
    assert code == EXIT_USAGE
    assert "pip install 'blockflow[onnx]'" in err


def test_the_docs_block_lists_are_current():
    from pathlib import Path

    from blockflow.export.onnx_docs import onnx_blocks_markdown
    from blockflow.registry import default_registry

    committed = (Path(__file__).resolve().parent.parent / "docs" / "export.md").read_text(encoding="utf-8")
    assert onnx_blocks_markdown(default_registry()) in committed, \
        "docs/export.md's ONNX lists are stale: run python -m blockflow.export.onnx_docs docs/export.md"


def test_the_docs_name_every_refused_use_and_float32_block():
    from blockflow.export.onnx_docs import REFUSED, USE_LIMITS
    from blockflow.registry import default_registry

    assert {name for name, _ in REFUSED_USES} <= set(USE_LIMITS)
    registry = default_registry()
    assert not set(REFUSED) & set(TABLE) and set(REFUSED) <= set(registry.names())


def _f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


#: each library layer: its parameters and the shapes (or arrays) fed to its inputs
LAYER_FEEDS = {
    "Dense": ({"units": 4, "activation": "relu"}, {"x": (3, 5)}),
    "Conv2D": ({"filters": 3, "kernel_size": 3, "strides": 2, "padding": "SAME", "activation": "tanh"},
               {"x": (2, 5, 5, 2)}),
    "Conv2DTranspose": ({"filters": 4, "kernel_size": 3, "strides": 2}, {"x": (2, 3, 3, 2)}),
    "MaxPooling2D": ({"pool_size": 2, "strides": 2}, {"x": (2, 4, 4, 3)}),
    "AveragePooling2D": ({"pool_size": 2, "strides": 2, "padding": "SAME"}, {"x": (2, 5, 5, 3)}),
    "GlobalAveragePooling2D": ({}, {"x": (2, 3, 3, 4)}),
    "Flatten": ({}, {"x": (2, 3, 4, 5)}),
    "Dropout": ({"rate": 0.25, "seed": 3}, {"x": (4, 6)}),
    "BatchNormalization": ({"momentum": 0.5}, {"x": (6, 4)}),
    "BatchNormalization2D": ({"momentum": 0.5}, {"x": (2, 3, 3, 4)}),
    "LayerNormalization": ({}, {"x": (3, 5)}),
    "Embedding": ({"input_dim": 7, "output_dim": 3}, {"ids": np.array([[0, 6, 2], [3, 3, 1]], np.int32)}),
    "LSTMCell": ({"units": 4}, {"x": (2, 3), "h": (2, 4), "c": (2, 4)}),
    "GRUCell": ({"units": 4}, {"x": (2, 3), "h": (2, 4)}),
    "LSTM": ({"units": 4}, {"x": (2, 8, 3)}),
    "MultiHeadAttention": ({}, {"query": (2, 3, 4), "key": (2, 5, 4), "value": (2, 5, 4)}),
    "ResidualDense": ({}, {"x": (3, 5)}),
    "SoftmaxCrossEntropy": ({}, {"logits": (3, 4), "labels": np.full((3, 4), 0.25, np.float32)}),
    "SparseSoftmaxCrossEntropy": ({}, {"logits": (3, 4), "labels": np.array([0, 3, 1], np.int32)}),
    "SigmoidCrossEntropy": ({}, {"logits": (3, 4), "labels": np.full((3, 4), 0.3, np.float32)}),
    "MSE": ({}, {"prediction": (3, 4), "target": (3, 4)}),
    "Huber": ({}, {"prediction": (3, 4), "target": (3, 4)}),
}


def _library_layers():
    import sys
    from pathlib import Path

    tools = str(Path(__file__).resolve().parent.parent / "tools")
    if tools not in sys.path:
        sys.path.insert(0, tools)
    from layer_defs import basic, sequence

    return {fn().name: fn for fn in basic.LAYERS + sequence.LAYERS}


@pytest.mark.parametrize("name", sorted(LAYER_FEEDS))
def test_library_layer_equals_the_runtime_in_inference(name):
    """Each layer of the library, after one training run has moved its state (a batch
    normalization's moving statistics), exports and gives blockflow's inference outputs."""
    from blockflow.composite import block_name
    from blockflow.project import Project

    params, shapes = LAYER_FEEDS[name]
    project = Project()
    for build in _library_layers().values():      # LSTM's cell is a composite of its own
        comp = build()
        project.composites[comp.name] = comp
    page = project.add_page("main")
    page.add_node(block_name(name), id="L", attrs=dict(params))
    rng = np.random.default_rng(7)
    feeds = {}
    for port, shape in shapes.items():
        value = shape if isinstance(shape, np.ndarray) else _f32(rng, *shape)
        page.add_node("Placeholder", id=f"in_{port}", attrs={"dtype": value.dtype.name, "shape": list(value.shape)})
        page.connect(f"in_{port}", "output", "L", port)
        feeds[f"in_{port}"] = value
    program = compile_project(project)
    assert program.ok, program.errors[:3]
    run(program, feeds, split="train", commit=True)          # moves the layer's state once
    outs = [f"L:{port}" for port in program.output_ports("L")]
    model = compare_with_ort(project, feeds, outs, program=program, rtol=2e-5, atol=2e-6)
    ops = {n.op_type for n in model.graph.node}
    if name.startswith("BatchNormalization"):     # the moving statistics, not the batch's
        assert "ReduceMean" not in ops, ops
    if name == "Dropout":                         # no mask in inference: the input itself
        assert ops == {"Identity"}, ops


@pytest.mark.parametrize("path, page", SAMPLE_PAGES)
def test_every_exportable_value_of_a_sample_page_equals_the_runtime(path, page):
    """Not just the loss: every output of every block whose inputs can be exported (the
    predictions a model for inference returns, and each step on the way)."""
    from blockflow.io.project_io import load_project

    from export_kit import onnx_exportable_values

    project = load_project(path)
    program = compile_project(project, page)
    outs = onnx_exportable_values(program)
    if not outs:
        pytest.skip("no value of this page can be exported")
    _skip_float64_without_kernel(program)
    compare_with_ort(project, {}, outs, page=page, program=program, rtol=1e-5, atol=1e-6,
                     scaled=True)


def test_outputs_that_are_inputs_variables_or_asked_twice():
    from diagrams import chain

    project = chain(("x", "Placeholder", {"shape": [None, 2], "dtype": "float64"}, None),
                    ("W", "Variable", {"shape": [2, 2], "dtype": "float64", "initializer": "ones"}, None),
                    ("y", "MatMul", {}, {"a": "x", "b": "W"}))
    x = np.arange(6.0).reshape(3, 2)
    model = compare_with_ort(project, {"x": x}, ["x", "W", "y", "y:product", "x"])
    assert len({o.name for o in model.graph.output}) == 5


def test_splits_of_an_open_size_are_sized_when_the_model_runs():
    from diagrams import chain

    project = chain(("x", "Placeholder", {"shape": [None, 6], "dtype": "float64"}, None),
                    ("s", "Split", {"num_split": 3}, {"axis": 0, "value": "x"}),
                    ("v", "SplitV", {"num_split": 3}, {"value": "x", "size_splits": [1, -1, 2], "axis": 0}))
    x = np.arange(36.0).reshape(6, 6)
    compare_with_ort(project, {"x": x}, ["s:output[0]", "s:output[2]", "v:output[1]", "v:output[2]"])


@pytest.mark.parametrize("index", [-1, 3])
def test_an_index_out_of_range_is_an_error_in_both(index):
    """blockflow refuses a negative or too large index (as TF's CPU kernels); the model makes
    ONNX Runtime refuse it too, rather than read a negative one from the end."""
    from diagrams import chain

    from blockflow.errors import BlockflowError

    project = chain(("p", "Placeholder", {"shape": [3, 2], "dtype": "float64"}, None),
                    ("i", "Placeholder", {"shape": [2], "dtype": "int32"}, None),
                    ("g", "Gather", {}, {"params": "p", "indices": "i"}),
                    ("labels", "Placeholder", {"shape": [3], "dtype": "int32"}, None),
                    ("xent", "SparseSoftmaxCrossEntropyWithLogits", {}, {"features": "p", "labels": "labels"}))
    p, i, labels = np.ones((3, 2)), np.array([0, index], np.int32), np.array([0, 1, index], np.int32)
    program = compile_project(project)
    with pytest.raises(BlockflowError):
        run(program, {"p": p, "i": i, "labels": labels}, fetch=["g"])
    for out, feed in (("g", {"p": p, "i": i}), ("xent:loss", {"p": p, "labels": labels})):
        model = export_onnx(project, outputs=[out], program=program)
        with pytest.raises(Exception, match="out of data bounds|Out of range value"):
            session(model).run(None, feed)


@pytest.mark.parametrize("block", ["FloorDiv", "FloorMod"])
def test_an_integer_division_by_zero_is_an_error_in_both(block):
    from diagrams import chain

    from blockflow.errors import BlockflowError

    project = chain(("x", "Placeholder", {"shape": [3], "dtype": "int32"}, None),
                    ("y", "Placeholder", {"shape": [3], "dtype": "int32"}, None),
                    ("d", block, {}, {"x": "x", "y": "y"}))
    feeds = {"x": np.array([1, 2, 3], np.int32), "y": np.array([1, 0, 2], np.int32)}
    program = compile_project(project)
    with pytest.raises(BlockflowError):
        run(program, feeds, fetch=["d"])
    with pytest.raises(Exception, match="modulo by zero"):
        session(export_onnx(project, outputs=["d"], program=program)).run(None, feeds)


def test_the_onnx_format_writes_through_the_shared_table(tmp_path):
    """The editor's File > Export Model and the CLI write through one table of formats."""
    from pathlib import Path

    from blockflow.export.formats import FORMATS, export_files
    from blockflow.io.project_io import load_project

    sample = Path(__file__).resolve().parent.parent / "sample_projects" / "xor.bflow.json"
    assert FORMATS["onnx"].suffix == ".onnx" and FORMATS["onnx"].needs == ("onnx",)
    written = export_files("onnx", load_project(sample), None, tmp_path / "xor.onnx")
    assert written == [tmp_path / "xor.onnx"]
    onnx.checker.check_model(onnx.load(str(written[0])), full_check=True)
