"""Dataset blocks: batches by step, the train/test split, files next to the project (and only there)."""
from __future__ import annotations

import os
import pickle

import numpy as np
import pytest

from blockflow.compile.compiler import compile_project
from blockflow.datafiles import DataFileError, DataFiles, DataRequest
from blockflow.io.project_io import load_project, save_project
from blockflow.registry import default_registry
from blockflow.run.runtime import run

from diagrams import chain

REG = default_registry()


def forward(name, step=0, split="train", files=None, **attrs):
    spec = REG[name]
    values, problems = spec.validate_attrs(attrs)
    assert not problems, problems
    extra = {"data": DataRequest(step, split)}
    if "files" in spec.forward_context:
        extra["files"] = files
    return spec.forward(**values, **extra)


def test_batches_cover_the_train_part_once_per_epoch_then_reshuffle():
    n, bs = 50, 8
    attrs = dict(n=n, batch_size=bs, test_fraction=0.2, seed=3)
    x_all, _ = forward("MakeMoons", split="all", **attrs)
    x_test, _ = forward("MakeMoons", split="test", **attrs)
    assert len(x_all) == n and len(x_test) == 10
    epoch = [forward("MakeMoons", step=k, **attrs)[0] for k in range(5)]   # 40 train rows, 5 batches
    assert [len(b) for b in epoch] == [8, 8, 8, 8, 8]
    rows = {tuple(r) for b in epoch for r in b}
    train_rows = {tuple(r) for r in x_all} - {tuple(r) for r in x_test}
    assert rows == train_rows                      # every train example once, no test example
    again = forward("MakeMoons", step=0, **attrs)[0]
    np.testing.assert_array_equal(again, epoch[0])  # deterministic
    next_epoch = forward("MakeMoons", step=5, **attrs)[0]
    assert not np.array_equal(next_epoch, epoch[0])  # reshuffled
    unshuffled = [forward("MakeMoons", step=k, shuffle=False, **attrs)[0] for k in (0, 5)]
    np.testing.assert_array_equal(*unshuffled)


def test_full_batch_labels_and_formats():
    x, y = forward("MakeXor")
    np.testing.assert_array_equal(x, [[0, 0], [0, 1], [1, 0], [1, 1]])
    np.testing.assert_array_equal(y, [0, 1, 1, 0])
    assert y.dtype == np.int32 and x.dtype == np.float32
    _, onehot = forward("MakeXor", label_format="onehot")
    np.testing.assert_array_equal(onehot, [[1, 0], [0, 1], [0, 1], [1, 0]])
    x, y = forward("MakeLine", n=200, slope=2.0, intercept=-1.0, noise=0.0, test_fraction=0.0)
    np.testing.assert_allclose(y, 2 * x - 1, rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match="no test part"):
        forward("MakeXor", split="test")
    _, y = forward("MakeSpirals", n=90, classes=3, split="all")
    assert np.bincount(y).tolist() == [30, 30, 30]


def test_a_dataset_block_in_a_page_gives_batch_k_at_step_k_and_the_test_part_on_request():
    project = chain(("d", "MakeBlobs", {"n": 60, "batch_size": 16, "classes": 3}, None),
                    ("m", "Mean", {}, {"input": "d:features", "axis": np.array(0)}))
    program = compile_project(project)
    assert program.ok, program.diagnostics
    assert program.output_type("d", "features").shape == (None, 2)
    b0 = run(program, step=0).value("d", "features")
    b1 = run(program, step=1).value("d", "features")
    assert b0.shape == (16, 2) and not np.array_equal(b0, b1)
    test = run(program, split="test").value("d", "features")
    assert test.shape == (12, 2)
    with pytest.raises(Exception, match="split"):
        run(program, split="validation")


def test_files_are_read_relative_to_the_project_and_never_outside(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "t.csv").write_text("a,b,label\n1,2,0\n3,4,1\n5,6,1\n")
    outside = tmp_path.parent / f"{tmp_path.name}-outside.csv"
    outside.write_text("a,label\n1,0\n")
    files = DataFiles(tmp_path)
    names, table = files.table("data/t.csv")
    assert names == ["a", "b", "label"] and table.shape == (3, 3)
    for bad, why in ((str(outside), "absolute"), (f"../{outside.name}", "out of the project"),
                     ("data/../../x.csv", "out of the project"), ("nope.csv", "no such file"), ("", "no file")):
        with pytest.raises(DataFileError, match=why):
            files.table(bad)
    os.symlink(outside, tmp_path / "link.csv")
    with pytest.raises(DataFileError, match="out of the project"):
        files.table("link.csv")


def test_pickles_and_malformed_tables_are_refused_with_a_message(tmp_path):
    files = DataFiles(tmp_path)
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(DataFileError, match="unpickling"):
        files.arrays("obj.npy")
    (tmp_path / "evil.npz").write_bytes(pickle.dumps({"x": 1}))
    with pytest.raises(DataFileError):
        files.arrays("evil.npz")
    for text, why in (("1,2\n3,4\n", "header"), ("a,b\n1\n", "2 values|1 values"), ("a,b\n1,x\n", "'x' is not a number"),
                      ("a,a\n1,2\n", "each once"), ("", "empty")):
        (tmp_path / "t.csv").write_text(text)
        with pytest.raises(DataFileError, match=why):
            DataFiles(tmp_path).table("t.csv")


def test_file_datasets_compile_from_a_saved_project_and_say_what_is_wrong(tmp_path):
    (tmp_path / "points.csv").write_text("u,v,label\n0,1,0\n1,0,1\n1,1,1\n0,0,0\n")
    project = chain(("d", "CsvDataset", {"path": "points.csv", "test_fraction": 0.0}, None))
    assert "saved in a folder" in str(compile_project(project).errors[0])   # not saved yet
    path = tmp_path / "p.bflow.json"
    save_project(project, path)
    program = compile_project(load_project(path))
    assert program.ok, program.diagnostics
    r = run(program)
    np.testing.assert_array_equal(r.value("d", "features"), [[0, 1], [1, 0], [1, 1], [0, 0]])
    np.testing.assert_array_equal(r.value("d", "labels"), [0, 1, 1, 0])
    project.pages[0].nodes["d"].attrs["label"] = "class"
    errors = [str(d) for d in compile_project(project).errors]
    assert errors and "no column 'class'" in errors[0] and "u, v, label" in errors[0]
    project.pages[0].nodes["d"].attrs["path"] = "../elsewhere.csv"
    assert "out of the project" in str(compile_project(project).errors[0])


def test_a_dataset_too_big_to_generate_is_refused_by_infer():
    project = chain(("d", "MakeBlobs", {"n": 10_000_000, "dims": 1000}, None))
    errors = [str(d) for d in compile_project(project).errors]
    assert errors and "would take 75 GiB to generate; the limit is 4 GiB" in errors[0]
