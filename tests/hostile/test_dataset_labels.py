"""A dataset file as an attacker writes it. Its class labels: values past int64 (a float 1e300, a
uint64's 2**64-1) are whole, finite and not negative, yet wrapped when cast to int64 they became
a class that exists (0, -1) or an index one-hot could not take. Each is refused, naming the block
and the label, whatever the file's kind and the label format. Its features: an array with no
rows (shape (0,) could not even be flattened) is said to be empty."""
from __future__ import annotations

import numpy as np
import pytest

from blockflow.compile.compiler import compile_project
from blockflow.errors import RunError
from blockflow.io.project_io import load_project, save_project
from blockflow.project import Project
from blockflow.registry import default_registry
from blockflow.run.runtime import run_forward

REG = default_registry()
HUGE = {"float 1e300": np.array([0, 1, 1e300, 1]),
        "uint64 2**64-1": np.array([0, 1, 2 ** 64 - 1, 1], np.uint64),
        "float 2**63": np.array([0, 1, 2.0 ** 63, 1])}


def _program(tmp_path, block: str, path: str, label_format: str):
    project = Project()
    page = project.add_page("main")
    page.add_node(block, id="d", attrs={"path": path, "label_format": label_format, "test_fraction": 0.0})
    save_project(project, tmp_path / "p.bflow.json", backup=False)
    program = compile_project(load_project(tmp_path / "p.bflow.json"), "main", REG)
    assert program.ok, program.diagnostics
    return program


@pytest.mark.parametrize("label_format", ["index", "onehot"])
@pytest.mark.parametrize("labels", list(HUGE), ids=list(HUGE))
def test_an_npz_label_past_int64_is_refused_not_wrapped(tmp_path, labels, label_format):
    np.savez(tmp_path / "d.npz", x=np.ones((4, 3), np.float32), y=HUGE[labels])
    program = _program(tmp_path, "NumpyDataset", "d.npz", label_format)
    with pytest.raises(RunError, match=r"main/d \(NumpyDataset\).*a label is \S+ but classes is 2"):
        run_forward(program)


def test_a_csv_label_past_int64_is_refused_not_wrapped(tmp_path):
    (tmp_path / "d.csv").write_text("a,label\n1,0\n1,1\n1,1e300\n1,1\n")
    program = _program(tmp_path, "CsvDataset", "d.csv", "index")
    with pytest.raises(RunError, match=r"main/d \(CsvDataset\).*a label is 1e\+300 but classes is 2"):
        run_forward(program)


def test_labels_within_the_classes_still_load_exactly(tmp_path):
    np.savez(tmp_path / "d.npz", x=np.ones((4, 3), np.float32), y=np.array([0, 1, 1, 0], np.uint64))
    result = run_forward(_program(tmp_path, "NumpyDataset", "d.npz", "index"))
    np.testing.assert_array_equal(result.value("d", "labels"), [0, 1, 1, 0])
    np.savez(tmp_path / "d.npz", x=np.ones((4, 3), np.float32), y=np.array([0, 1, 5, 0]))
    with pytest.raises(RunError, match="a label is 5 but classes is 2"):
        run_forward(_program(tmp_path, "NumpyDataset", "d.npz", "index"))


@pytest.mark.parametrize("shape", [(0,), (0, 3, 0), (0, 3)])
def test_a_features_array_with_no_rows_is_said_to_be_empty(tmp_path, shape):
    np.save(tmp_path / "d.npy", np.zeros(shape, np.float32))
    program = _program(tmp_path, "NumpyDataset", "d.npy", "index")
    with pytest.raises(RunError, match=r"main/d \(NumpyDataset\).*its data has no examples \(0 rows\)"):
        run_forward(program)
