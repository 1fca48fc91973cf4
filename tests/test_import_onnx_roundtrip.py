"""Round trip: every sample page exported to ONNX (docs/export.md) and imported back
(docs/import.md) runs to the same values: each value the export can write (the loss, the
predictions, every step on the way), fed the inputs blockflow's own run had."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from blockflow.compile.compiler import compile_project  # noqa: E402
from blockflow.export.onnx_model import export_onnx  # noqa: E402
from blockflow.importing.onnx_import import import_model  # noqa: E402
from blockflow.importing.onnx_read import read_onnx_bytes  # noqa: E402
from blockflow.io.project_io import load_project  # noqa: E402
from blockflow.run.runtime import run  # noqa: E402

from export_kit import onnx_exportable_values  # noqa: E402

SAMPLES = Path(__file__).resolve().parent.parent / "sample_projects"
PAGES = [pytest.param(path, page.name, id=f"{path.name.split('.')[0]}-{page.name}")
         for path in sorted(SAMPLES.glob("*.bflow.json")) for page in load_project(path).pages]


def _value(result, text):
    return np.asarray(result.value(*text.split(":")) if ":" in text else result.value(text))


@pytest.mark.parametrize("path, page", PAGES)
def test_a_sample_page_exported_and_imported_runs_to_the_same_values(path, page):
    project = load_project(path)
    program = compile_project(project, page)
    outs = onnx_exportable_values(program)
    if not outs:
        pytest.skip("no value of this page can be exported")
    model = export_onnx(project, page, outputs=outs, program=program)
    ours = run(program, {}, split="all", record=True, check_numerics=False)
    props = {p.key: p.value for p in model.metadata_props}
    imported, report = import_model(read_onnx_bytes(model.SerializeToString(), f"{path.name}:{page}"), "back")
    back = compile_project(imported)
    assert back.ok, back.errors[:3]
    feeds = {report.inputs[name]: _value(ours, props[f"input:{name}"]) for name in report.inputs}
    got = run(back, feeds, split="all", record=True, check_numerics=False)
    assert set(report.outputs) == {o.name for o in model.graph.output}
    for name, marker in report.outputs.items():
        text = props[f"output:{name}"]
        expect, value = _value(ours, text), np.asarray(got.value(marker))
        assert value.dtype == expect.dtype and value.shape == expect.shape, (text, value.dtype, expect.dtype)
        if expect.dtype.kind in "fc":
            np.testing.assert_allclose(value, expect, rtol=1e-6, atol=1e-7, err_msg=text)
        else:
            np.testing.assert_array_equal(value, expect, err_msg=text)


def test_a_page_of_instances_exported_for_inference_imports_as_instances_again():
    """The digits CNN's prediction, exported as a user would for inference, keeps each layer's
    scope in its ONNX names (conv1/Conv2D, conv1/bias_used...), so its import makes each layer
    an instance again, named as on the page, and computes the same logits."""
    project = load_project(SAMPLES / "digits_cnn.bflow.json")
    program = compile_project(project, "cnn")
    model = export_onnx(project, "cnn", outputs=["logits"], program=program)
    imported, report = import_model(read_onnx_bytes(model.SerializeToString(), "digits_cnn.onnx"), "back")
    assert list(imported.composites) == ["conv1", "conv2", "logits"]
    page = imported.pages[0]
    assert [page.nodes[n].block for n in ("conv1", "conv2", "logits")] == ["@conv1", "@conv2", "@logits"]
    ours = run(program, {}, split="all", record=True, check_numerics=False)
    props = {p.key: p.value for p in model.metadata_props}
    feeds = {report.inputs[name]: _value(ours, props[f"input:{name}"]) for name in report.inputs}
    back = compile_project(imported)
    got = run(back, feeds, split="all", record=True, check_numerics=False)
    (name, marker), = report.outputs.items()
    np.testing.assert_allclose(np.asarray(got.value(marker)), _value(ours, props[f"output:{name}"]),
                               rtol=1e-5, atol=1e-6)
