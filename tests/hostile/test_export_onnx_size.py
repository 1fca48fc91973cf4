"""Hostile suite, export: a page whose values are more than one ONNX file can hold (protobuf
writes no message past 2 GiB, and the export writes no external data) is refused with a message
saying so, before its values are copied, and nothing is written (docs/export.md, "ONNX").

Before, a Variable of 2.2 GB took 29 s and 6 GB, then the command line reported an internal
error (EncodeError: Failed to serialize proto) and the editor a bug in blockflow."""
from __future__ import annotations

import pytest

pytest.importorskip("onnx")

from blockflow.cli import main  # noqa: E402
from blockflow.export import onnx_model  # noqa: E402
from blockflow.export.errors import ExportError  # noqa: E402
from blockflow.io.project_io import save_project  # noqa: E402
from blockflow.project import Project  # noqa: E402


def _project(entries: int) -> Project:
    project = Project()
    page = project.add_page("main")
    page.add_node("Variable", id="w", attrs={"shape": [entries], "dtype": "float32", "initializer": "zeros"})
    page.add_node("Sum", id="s", inputs={"axis": [0]})
    page.connect("w", "ref", "s", "input")
    page.loss = "s"
    return project


def test_values_past_what_one_file_holds_are_refused_and_nothing_is_written(tmp_path, capsys, monkeypatch):
    # the limit made small: the refusal is the same at 2 GiB, which a test need not allocate
    monkeypatch.setattr(onnx_model, "MAX_VALUE_BYTES", 4000, raising=False)
    source = tmp_path / "big.bflow.json"
    save_project(_project(1001), source)
    out = tmp_path / "big.onnx"
    assert main(["export", "onnx", str(source), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert "its values (Variables and constants) take more than" in err and "nothing was written" in err
    assert "internal error" not in err and not out.exists()
    with pytest.raises(ExportError, match="protobuf's limit"):
        onnx_model.export_onnx(_project(1001))


def test_values_within_the_limit_export(monkeypatch):
    monkeypatch.setattr(onnx_model, "MAX_VALUE_BYTES", 4100, raising=False)   # the Sum's axis too
    onnx_model.export_onnx(_project(1000))
