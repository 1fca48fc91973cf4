"""The ONNX export (docs/export.md, section ONNX): every block with an ONNX lowering gives, under
ONNX Runtime, the outputs blockflow's runtime gives on each of its test cases (float64 at a tight
tolerance; float32 where ONNX Runtime's CPU provider has no float64 kernel); the sample pages
export, pass the checker and agree with blockflow in inference; hostile names cannot break the
model; a block with no counterpart is refused by name."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from blockflow.compile.compiler import compile_project  # noqa: E402
from blockflow.export.onnx_lowering import onnx_lowering_table  # noqa: E402
from blockflow.export.onnx_model import export_onnx  # noqa: E402
from blockflow.export.torch_module import ExportError  # noqa: E402
from blockflow.run.runtime import run  # noqa: E402

from export_kit import case_project  # noqa: E402
from test_blocks import CASES  # noqa: E402

TABLE = onnx_lowering_table()
LOWERED_CASES = [pytest.param(name, case, str(case.id or i), id=f"{name}-{case.id or i}")
                 for name, cases in CASES.items() if name in TABLE for i, case in enumerate(cases)]

#: blocks ONNX Runtime's CPU provider runs in float32 only (no float64 kernel for an op they
#: lower to): their cases run in float32, at a float32 tolerance
FLOAT32_ONLY = {"Conv2D", "AvgPool", "Erf", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Gelu"}
#: single cases of other blocks that reach such an op (Activation's gelu is Erf)
FLOAT32_CASES = {("Activation", "gelu"), ("Activation", "gelu-float64")}
#: uses of a lowered block with no exact ONNX counterpart: each must be refused, naming the block
REFUSED_USES = {
    ("StridedSlice", "ellipsis-first"), ("StridedSlice", "ellipsis-middle-shrink"),
    ("StridedSlice", "new-axis"), ("StridedSlice", "new-axis-after-ellipsis"),
    ("Gather", "batch-dims"), ("Gather", "batch-dims-axis2"), ("Gather", "batch-dims-neg"),
    ("MirrorPad", "symmetric-full"), ("Pow", "int32"), ("Einsum", "ellipsis-broadcast"),
    ("Dropout", "half"), ("Dropout", "rate-0.2"), ("Dropout", "scalar"), ("TopK", "unsorted"),
    ("MaxPool", "int32"),
}


def session(model):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def io_names(model) -> tuple[dict, dict]:
    """{graph input name: node text}, {graph output name: node:port} from the model's metadata."""
    props = {p.key: p.value for p in model.metadata_props}
    ins = {k[len("input:"):]: v for k, v in props.items() if k.startswith("input:")}
    outs = {k[len("output:"):]: v for k, v in props.items() if k.startswith("output:")}
    return ins, outs


def compare_with_ort(project, feeds, outs, *, page=None, rtol=1e-10, atol=1e-12, program=None):
    """Export ``outs`` of the page, run it in ONNX Runtime and in blockflow (inference: the test
    split), and assert the values agree (dtype, shape and value)."""
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
            np.testing.assert_allclose(value, expect, rtol=rtol, atol=atol, err_msg=text)
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
    if name in FLOAT32_ONLY or (name, case_id) in FLOAT32_CASES:
        project, feeds, outs = case_project(name, case, float64=False)
        if any(np.asarray(v).dtype == np.float64 for v in feeds.values()):
            pytest.skip("a float64 case of an op ONNX Runtime runs in float32 only")
        compare_with_ort(project, feeds, outs, rtol=2e-5, atol=2e-6)
    else:
        project, feeds, outs = case_project(name, case)
        compare_with_ort(project, feeds, outs)


@pytest.mark.parametrize("name", sorted(FLOAT32_ONLY))
def test_float32_only_blocks_have_no_float64_kernel(name):
    """The FLOAT32_ONLY list stays true: in float64, ONNX Runtime refuses the model."""
    case = CASES[name][0]
    project, feeds, outs = case_project(name, case)
    model = export_onnx(project, outputs=outs)
    with pytest.raises(Exception, match="NOT_IMPLEMENTED|implementation"):
        session(model)


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


@pytest.mark.parametrize("path, page", SAMPLE_PAGES)
def test_sample_page_exports_and_equals_the_runtime(path, page):
    from blockflow.export.onnx_model import onnx_needed_nodes, onnx_refused_blocks
    from blockflow.export.torch_module import _outputs
    from blockflow.io.project_io import load_project

    project = load_project(path)
    program = compile_project(project, page)
    refused = onnx_refused_blocks(program, onnx_needed_nodes(program, _outputs(program, None)))
    if refused:
        with pytest.raises(ExportError) as err:
            export_onnx(project, page, program=program)
        for name in refused:
            assert name in str(err.value)
        return
    compare_with_ort(project, {}, None, page=page, program=program, rtol=1e-5, atol=1e-6)
