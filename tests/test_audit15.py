"""Audit of issue 15's export (docs/export.md): hostile project files never run anything in the
generated files, never write outside what the user named; numbers the case tables could miss."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from blockflow.export.torch_train import export_training, write_training_files  # noqa: E402
from blockflow.io.project_io import load_project, save_project  # noqa: E402

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}


def _csv_page(folder, path, page_name):
    """A page reading ``path`` (a CsvDataset, saved in ``folder``), named ``page_name``."""
    from diagrams import chain
    rng = np.random.default_rng(2)
    x = rng.standard_normal((16, 2))
    (folder / path).write_text("a,b,label\n" + "\n".join(f"{a!r},{b!r},{float(i % 2)!r}" for i, (a, b)
                                                          in enumerate(x.tolist())) + "\n", encoding="utf-8")
    p = chain(("data", "CsvDataset", {"path": path, "batch_size": 8}, None),
              ("W", "Variable", {"shape": [2, 1], "initializer": "ones"}, None),
              ("h", "MatMul", {}, {"a": "data:features", "b": "W"}),
              ("sq", "Square", {}, {"x": "h"}),
              ("loss", "Mean", {}, {"input": "sq"}))
    p.pages[0].loss = "loss"
    p.pages[0].name = page_name
    p.metadata["training"] = {page_name: {"optimizer": "sgd", "steps": 2, "lr": 0.1}}
    save_project(p, folder / "p.bflow.json")
    return load_project(folder / "p.bflow.json")


@pytest.mark.parametrize("page_name", ["__SOURCE__", "x __SETTINGS__ __SOURCE__ __RULE_SOURCE__"])
def test_a_page_named_like_a_template_slot_cannot_open_train_py(page_name, tmp_path):
    """train.py's template was filled one slot after another, so a page named ``__SOURCE__``
    had the dataset's path (a repr, which may hold three double quotes) written into the
    docstring, where it ended the docstring and ran."""
    path = 'd"""+str(__import__("os").system("touch PWNED"))+""".csv'
    project = _csv_page(tmp_path, path, page_name)
    out = tmp_path / "out"
    out.mkdir()
    write_training_files(export_training(project, model_file="model.py"), out / "model.py")
    proc = subprocess.run([sys.executable, "train.py", "--steps", "1", "--data-folder", str(tmp_path)],
                          cwd=out, capture_output=True, text=True, timeout=240, env=ENV)
    assert not (out / "PWNED").exists()
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "step 0 loss" in proc.stdout


def _moons():
    from pathlib import Path
    return load_project(Path(__file__).resolve().parents[1] / "sample_projects" / "moons_classifier.bflow.json")


def test_a_module_named_like_its_values_file_is_refused(tmp_path):
    """``-o model.pt`` wrote the values to model.pt, then the source over them."""
    from blockflow.export.errors import ExportError
    from blockflow.export.formats import export_files
    with pytest.raises(ExportError, match=r"model\.pt"):
        export_files("torch", _moons(), None, tmp_path / "model.pt")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ExportError, match=r"\.py"):
        write_training_files(export_training(_moons(), model_file="model"), tmp_path / "model")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["torch.py", "numpy.py", "csv.py"])
def test_a_module_train_py_could_not_import_beside_it_is_refused(name, tmp_path):
    """train.py imports torch, numpy, csv...: a module of that name beside it would be imported
    instead (and import itself)."""
    from blockflow.export.errors import ExportError
    with pytest.raises(ExportError, match="train.py imports"):
        write_training_files(export_training(_moons(), model_file=name), tmp_path / name)
    assert list(tmp_path.iterdir()) == []


def test_exported_files_are_readable_as_any_new_file(tmp_path):
    """They were written through mkstemp (0600) whatever the umask."""
    from blockflow.cli import main
    old = os.umask(0o022)
    try:
        assert main(["export", "torch", str(_moons_path()), "-o", str(tmp_path / "m.py"), "--train"]) == 0
        assert main(["export", "onnx", str(_moons_path()), "-o", str(tmp_path / "m.onnx")]) == 0
    finally:
        os.umask(old)
    for f in tmp_path.iterdir():
        assert f.stat().st_mode & 0o777 == 0o644, f


def _moons_path():
    from pathlib import Path
    return Path(__file__).resolve().parents[1] / "sample_projects" / "moons_classifier.bflow.json"


#: public attributes of nn.Module a Variable or a composite instance could be named after
MODULE_NAMES = ["forward", "to", "eval", "train", "cuda", "parameters", "state_dict", "modules",
                "load_state_dict", "register_buffer", "T_destination", "call_super_init", "dump_patches",
                "apply", "float", "zero_grad", "half", "type", "INITIALIZERS", "CONSTANTS", "SEED"]


def test_variables_named_after_module_attributes_stay_parameters(tmp_path):
    """``self.eval = nn.Parameter(...)`` raised KeyError (nn.Module has an ``eval``)."""
    from blockflow.export.torch_module import export_torch
    from diagrams import chain
    from export_kit import load_export
    specs, prev = [("x", "Placeholder", {"shape": [2], "dtype": "float64"}, None)], "x"
    for i, name in enumerate(MODULE_NAMES):
        specs += [(name, "Variable", {"shape": [2], "dtype": "float64", "initializer": "ones"}, None),
                  (f"m{i}", "Multiply", {}, {"x": prev, "y": name})]
        prev = f"m{i}"
    project = chain(*specs, ("loss", "Sum", {}, {"input": prev}), feeds={"x": np.ones(2)})
    project.pages[0].loss = "loss"
    model = load_export(export_torch(project), tmp_path).Model()
    model.eval()
    model.train()
    assert len(list(model.parameters())) == len(MODULE_NAMES)
    assert float(model(torch.full((2,), 2.0, dtype=torch.float64)).detach()) == 4.0


def test_a_drawn_update_named_after_its_helper_runs(tmp_path):
    """A block ``apply_gradient_descent`` made a local of forward shadow the helper it calls."""
    from blockflow.export.torch_module import export_torch
    from diagrams import chain
    from export_kit import load_export
    specs = [("x", "Placeholder", {"shape": [2], "dtype": "float64"}, None),
             ("W", "Variable", {"shape": [2], "dtype": "float64", "initializer": "ones"}, None),
             ("Wx", "Multiply", {}, {"x": "W", "y": "x"}),
             ("loss", "Sum", {}, {"input": "Wx"}),
             ("g", "Gradients", {}, {"ys[0]": "loss", "xs[0]": "W"}),
             ("apply_gradient_descent", "ApplyGradientDescent", {},
              {"var": "W", "delta": "g:dx[0]", "alpha": np.float64(0.5)})]
    project = chain(*specs, feeds={"x": np.ones(2)})
    project.pages[0].loss = "loss"
    export = export_torch(project, outputs=["loss", "apply_gradient_descent"])
    model = load_export(export, tmp_path).Model()
    loss, new = model(torch.ones(2, dtype=torch.float64))
    assert float(loss.detach()) == 2.0 and new.tolist() == [0.5, 0.5]


def test_every_function_the_module_calls_by_name_is_reserved():
    from blockflow.export.names import RESERVED
    from blockflow.export.torch_ops_state import _RULES
    assert {rule[0] for rule in _RULES.values()} <= RESERVED


def test_module_attrs_name_every_public_attribute_of_nn_module():
    from blockflow.export.torch_class import MODULE_ATTRS
    present = {n for n in set(dir(torch.nn.Module)) | set(vars(torch.nn.Module())) if not n.startswith("_")}
    assert present <= MODULE_ATTRS


@pytest.mark.parametrize("dtype", ["uint8"])   # blockflow's one unsigned dtype
def test_onnx_negates_unsigned_integers_as_numpy_wraps_them(dtype):
    """ONNX's Neg has no unsigned types: the checker failed, an internal error in the CLI."""
    pytest.importorskip("onnxruntime")
    from diagrams import chain
    from test_export_onnx import compare_with_ort
    x = np.array([0, 1, 7, np.iinfo(dtype).max], dtype=dtype)
    project = chain(("x", "Placeholder", {"shape": [4], "dtype": dtype}, None), ("B", "Negate", {}, {"x": "x"}))
    compare_with_ort(project, {"x": x}, ["B"])


@pytest.mark.parametrize("block", ["Maximum", "Minimum"])
def test_onnx_runtime_runs_int16_maximum_and_minimum(block):
    """ONNX Runtime has no int16 kernel for Max/Min: the exported model could not run."""
    pytest.importorskip("onnxruntime")
    from diagrams import chain
    from test_export_onnx import compare_with_ort
    rng = np.random.default_rng(1)
    x = rng.integers(-30000, 30000, (3, 4)).astype(np.int16)
    y = rng.integers(-30000, 30000, (1, 4)).astype(np.int16)
    project = chain(("x", "Placeholder", {"shape": [3, 4], "dtype": "int16"}, None),
                    ("y", "Placeholder", {"shape": [1, 4], "dtype": "int16"}, None),
                    ("B", block, {}, {"x": "x", "y": "y"}))
    compare_with_ort(project, {"x": x, "y": y}, ["B"])


def test_torch_engine_reports_a_dataset_failure_as_blockflow_does(capsys):
    """--eval-every on a dataset with no test part: the blockflow engine names the block, the
    torch engine had an internal error (the block's ValueError escaped blockflow_batch)."""
    from pathlib import Path

    from blockflow.cli import main
    xor = str(Path(__file__).resolve().parents[1] / "sample_projects" / "xor.bflow.json")
    said = {}
    for engine in ("blockflow", "torch"):
        code = main(["train", xor, "--steps", "4", "--eval-every", "2", "--engine", engine, "-q"])
        said[engine] = (code, capsys.readouterr().err.strip().splitlines()[-1])
    assert said["torch"] == said["blockflow"]
    assert "xor/data (MakeXor) failed in the forward pass" in said["torch"][1]


def _narrow_int_cases():
    from blockflow.export.onnx_model import _WIDENED
    from test_blocks import CASES
    out = []
    for name in sorted(_WIDENED | {"Mean"}):
        for i, case in enumerate(CASES.get(name, ())[:3]):
            for dtype in ("int8", "int16", "uint8"):
                out.append(pytest.param(name, case, dtype, id=f"{name}-{i}-{dtype}"))
    return out


@pytest.mark.parametrize("name, case, dtype", _narrow_int_cases())
def test_onnx_blocks_of_8_and_16_bit_integers_equal_the_runtime(name, case, dtype):
    """ONNX's MatMul, CumSum, Reduce*, Relu... take no 8- or 16-bit integers (the checker failed:
    an internal error), and ONNX Runtime has no int16 Max, Where, Pad, ArgMax... kernel: the
    cases of those blocks, their float inputs made ``dtype`` integers, must equal blockflow."""
    pytest.importorskip("onnxruntime")
    from blockflow.compile.compiler import compile_project
    from blockflow.project import Project
    from blockflow.registry import default_registry
    from blockflow.run.runtime import run
    from test_export_onnx import compare_with_ort
    spec = default_registry()[name]
    project = Project()
    page = project.add_page("main")
    node = page.add_node(name, id="B", attrs=dict(case.attrs))
    feeds, info = {}, np.iinfo(dtype)
    for port, value in zip(spec.inputs, list(case.inputs)):
        if value is None:
            continue
        if port.static:
            node.inputs[port.name] = np.asarray(value)
            continue
        for i, item in enumerate(value if port.variadic else [value]):
            item = np.asarray(item)
            if item.dtype.kind == "f":      # spread to wrap where the block adds or multiplies
                item = np.clip(np.round(item * 60), info.min, info.max).astype(dtype)
            pid = f"{port.name}_{i}" if port.variadic else port.name
            page.add_node("Placeholder", id=pid, attrs={"shape": list(item.shape), "dtype": item.dtype.name})
            page.connect(pid, "output", "B", f"{port.name}[{i}]" if port.variadic else port.name)
            feeds[pid] = item
    program = compile_project(project)
    if not program.ok or not any(np.asarray(v).dtype == np.dtype(dtype) for v in feeds.values()):
        pytest.skip(f"{name} takes no {dtype} here")
    try:
        run(program, feeds, record=False, check_numerics=False)
    except Exception as exc:        # noqa: BLE001 - a case blockflow refuses for these values
        pytest.skip(f"blockflow refuses it: {exc}")
    compare_with_ort(project, feeds, [f"B:{p}" for p in program.output_ports("B")], program=program)


def test_onnx_int8_mean_divides_the_wrapped_sum():
    pytest.importorskip("onnxruntime")
    from diagrams import chain
    from test_export_onnx import compare_with_ort
    x = np.full((300,), 100, np.int8)
    project = chain(("x", "Placeholder", {"shape": [300], "dtype": "int8"}, None), ("B", "Mean", {}, {"input": "x"}))
    compare_with_ort(project, {"x": x}, ["B"])


@pytest.mark.parametrize("dtype, keep", [("int32", False), ("int64", True), ("int8", False), ("int32", True)])
def test_onnx_integer_prod_wraps_around_as_numpy(dtype, keep):
    """ONNX Runtime's integer ReduceProd saturated (2147483647 where numpy's product wraps)."""
    pytest.importorskip("onnxruntime")
    from diagrams import chain
    from test_export_onnx import compare_with_ort
    big = {"int32": 100_003, "int64": 10**10 + 7, "int8": 99}[dtype]
    x = np.array([[big, 3, big], [big, -big, 7]], dtype)
    for axis in ([0], [1], [0, 1], None):
        wires = {"input": "x"} if axis is None else {"input": "x", "axis": np.array(axis, np.int32)}
        project = chain(("x", "Placeholder", {"shape": [2, 3], "dtype": dtype}, None),
                        ("B", "Prod", {"keep_dims": keep}, wires))
        compare_with_ort(project, {"x": x}, ["B"])


def test_onnx_integer_prod_along_an_open_axis_is_refused():
    pytest.importorskip("onnx")
    from blockflow.export.errors import ExportError
    from blockflow.export.onnx_model import export_onnx
    from diagrams import chain
    project = chain(("x", "Placeholder", {"shape": [None, 3], "dtype": "int32"}, None),
                    ("B", "Prod", {}, {"input": "x", "axis": np.array([0], np.int32)}))
    with pytest.raises(ExportError) as err:
        export_onnx(project, outputs=["B"])
    assert any("main/B (Prod)" in p and "saturates" in p for p in err.value.problems), err.value.problems


@pytest.mark.parametrize("block", ["Sum", "Mean"])
@pytest.mark.parametrize("shape", [[2, 3], [None, 3], [0, 3]])
def test_onnx_int64_sums_are_exact(block, shape):
    """ONNX Runtime's int64 ReduceSum rounded a sum past 2^53 (7686143364045645824 for
    7686143364045646520)."""
    pytest.importorskip("onnxruntime")
    from diagrams import chain
    from test_export_onnx import compare_with_ort
    rows = 2 if shape[0] is None else shape[0]
    x = (np.arange(rows * 3, dtype=np.int64).reshape(rows, 3) + 1) * (2**61 + 12345)
    for axis in ([0], [1], [0, 1]):
        for keep in (False, True):
            project = chain(("x", "Placeholder", {"shape": shape, "dtype": "int64"}, None),
                            (block, block, {"keep_dims": keep}, {"input": "x", "axis": np.array(axis, np.int32)}))
            compare_with_ort(project, {"x": x}, [block])


def test_links_at_the_exported_files_are_replaced_never_written_through(tmp_path):
    from blockflow.cli import main
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me", encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    names = ["model.py", "model.pt", "model_data.pt", "train.py", "model.onnx"]
    for name in names:
        (out / name).symlink_to(victim)
    assert main(["export", "torch", str(_moons_path()), "-o", str(out / "model.py"), "--train"]) == 0
    assert main(["export", "onnx", str(_moons_path()), "-o", str(out / "model.onnx")]) == 0
    assert victim.read_text(encoding="utf-8") == "keep me"
    for name in names:
        assert not (out / name).is_symlink() and (out / name).stat().st_size > 0, name
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "victim.txt"]
    assert sorted(p.name for p in out.iterdir()) == sorted(names)


def _nested_project():
    """X -> o1 (Outer) -> o2 (Outer sharing o1's Variables) and a Dense d3; each Outer holds
    two Dense instances sharing Variables and a Gradients block of its input, read downstream."""
    from blockflow.composite import Composite, block_name
    from blockflow.project import Project
    from composite_kit import dense
    inner = dense()
    for n in inner.page.nodes.values():
        if n.block in ("Input", "Variable"):
            n.attrs["dtype"] = "float64"
    outer = Composite("Outer", doc="dense, and its input's gradient")
    p = outer.page
    p.add_node("Input", id="x", attrs={"name": "x", "dtype": "float64", "shape": ["batch", "features"]})
    p.add_node(block_name("Dense"), id="inner", attrs={"units": 3})
    p.add_node(block_name("Dense"), id="inner2", attrs={"units": 3, "share_variables_with": "inner"})
    for nid, block in (("s", "Sum"), ("g", "Gradients"), ("plus", "Add"), ("prod", "Multiply")):
        p.add_node(block, id=nid)
    p.add_node("Output", id="y", attrs={"name": "y"})
    p.add_node("Output", id="z", attrs={"name": "z"})
    for a, ap, b, bp in (("x", "output", "inner", "x"), ("x", "output", "inner2", "x"), ("inner", "y", "s", "input"),
                         ("s", "output", "g", "ys[0]"), ("x", "output", "g", "xs[0]"), ("x", "output", "plus", "x"),
                         ("g", "dx[0]", "plus", "y"), ("inner2", "y", "prod", "x"), ("inner", "y", "prod", "y"),
                         ("prod", "z", "y", "input"), ("plus", "z", "z", "input")):
        p.connect(a, ap, b, bp)
    project = Project()
    project.composites["Dense"] = inner
    project.composites["Outer"] = outer
    pg = project.add_page("main")
    pg.add_node("Placeholder", id="X", attrs={"dtype": "float64", "shape": [4, 2]})
    pg.add_node(block_name("Outer"), id="o1")
    pg.add_node(block_name("Outer"), id="o2", attrs={"share_variables_with": "o1"})
    pg.add_node(block_name("Dense"), id="d3", attrs={"units": 3})
    for nid, block in (("s1", "Sum"), ("s2", "Sum"), ("s3", "Sum"), ("loss", "AddN")):
        pg.add_node(block, id=nid)
    for a, ap, b, bp in (("X", "output", "o1", "x"), ("o1", "z", "o2", "x"), ("o2", "y", "s1", "input"),
                         ("o1", "y", "s2", "input"), ("o2", "z", "d3", "x"), ("d3", "y", "s3", "input"),
                         ("s1", "output", "loss", "inputs[0]"), ("s2", "output", "loss", "inputs[1]"),
                         ("s3", "output", "loss", "inputs[2]")):
        pg.connect(a, ap, b, bp)
    pg.loss = "loss"
    pg.feeds["X"] = np.random.default_rng(0).standard_normal((4, 2))
    return project


def test_nested_composites_sharing_variables_with_a_gradients_block_equal_blockflow(tmp_path):
    from export_kit import compare_with_torch
    from blockflow.export.torch_engine import TorchTrainer
    from test_export_train_script import _trained
    project = _nested_project()
    export = compare_with_torch(project, {"X": project.pages[0].feeds["X"]}, ["o1:y", "o2:z", "d3:y"], tmp_path)
    assert len(set(export.variables.values())) == 4      # o1/inner's W and b, d3's W and b
    expect, trainer = _trained(project, 4)
    from blockflow.compile.compiler import compile_project
    got = TorchTrainer(compile_project(project), trainer.config, project=project, device="cpu").train(4).losses
    np.testing.assert_allclose(got, expect, rtol=1e-12)


@pytest.mark.parametrize("name", ["module", "initial", "seed"])
def test_a_composite_named_like_a_local_of_model_init_is_instantiated(name, tmp_path):
    """``self.d1 = module()`` in Model.__init__, whose loop variable is ``module``, raised
    UnboundLocalError (``seed()`` called the int)."""
    from blockflow.composite import block_name
    from blockflow.export.torch_module import export_torch
    from blockflow.project import Project
    from composite_kit import dense
    from export_kit import load_export
    project = Project()
    project.composites[name] = dense(name)
    page = project.add_page("main")
    page.add_node("Placeholder", id="X", attrs={"dtype": "float32", "shape": [4, 3]})
    page.add_node(block_name(name), id="d1", attrs={"units": 2})
    page.add_node("Sum", id="loss")
    page.connect("X", "output", "d1", "x")
    page.connect("d1", "y", "loss", "input")
    page.loss = "loss"
    model = load_export(export_torch(project), tmp_path).Model()
    assert torch.isfinite(model(torch.ones(4, 3)))


def test_train_py_says_what_is_wrong_with_its_options(tmp_path):
    """--device cuda without CUDA, a checkpoint in a missing folder (which failed only after
    training, losing it) or a file that is no checkpoint: a message, never a traceback."""
    write_training_files(export_training(_moons(), model_file="model.py"), tmp_path / "model.py")
    (tmp_path / "bad.pt").write_text("garbage", encoding="utf-8")
    cases = [(["--device", "meta"], "give cpu or cuda"),
             (["--checkpoint", str(tmp_path / "missing" / "ck.pt")], "does not exist"),
             (["--checkpoint", "bad.pt"], "not a checkpoint of this model")]
    if not torch.cuda.is_available():
        cases.append((["--device", "cuda"], "CUDA is not available"))
    for args, said in cases:
        proc = subprocess.run([sys.executable, "train.py", "--steps", "1", *args], cwd=tmp_path,
                              capture_output=True, text=True, timeout=240, env=ENV)
        assert proc.returncode != 0 and said in proc.stderr, (args, proc.stderr[-2000:])
        assert "Traceback" not in proc.stderr and "step 0" not in proc.stdout, (args, proc.stderr[-2000:])


def _float16_case(name, case):
    from blockflow.project import Project
    from blockflow.registry import default_registry
    spec = default_registry()[name]
    project = Project()
    page = project.add_page("main")
    node = page.add_node(name, id="B", attrs=dict(case.attrs))
    feeds = {}
    for port, value in zip(spec.inputs, list(case.inputs)):
        if value is None:
            continue
        if port.static:
            node.inputs[port.name] = np.asarray(value)
            continue
        for i, item in enumerate(value if port.variadic else [value]):
            item = np.asarray(item)
            item = item.astype(np.float16) if item.dtype.kind == "f" else item
            pid = f"{port.name}_{i}" if port.variadic else port.name
            page.add_node("Placeholder", id=pid, attrs={"shape": list(item.shape), "dtype": item.dtype.name})
            page.connect(pid, "output", "B", f"{port.name}[{i}]" if port.variadic else port.name)
            feeds[pid] = item
    return project, feeds


@pytest.mark.parametrize("name", ["Elu", "Expm1", "InTopK", "Log1p", "Selu", "SigmoidCrossEntropyWithLogits",
                                  "Softplus"])
def test_onnx_float16_blocks_checking_for_inf_pass_the_checker(name):
    """IsInf takes no float16 before opset 20: the checker failed (an internal error)."""
    pytest.importorskip("onnxruntime")
    from blockflow.compile.compiler import compile_project
    from test_blocks import CASES
    from test_export_onnx import compare_with_ort
    for case in CASES[name][:3]:
        project, feeds = _float16_case(name, case)
        program = compile_project(project)
        assert program.ok, program.errors[:2]
        compare_with_ort(project, feeds, [f"B:{p}" for p in program.output_ports("B")], program=program,
                         rtol=4e-3, atol=4e-3)


def test_onnx_float16_scatter_nd_is_refused_by_name():
    pytest.importorskip("onnx")
    from blockflow.export.errors import ExportError
    from blockflow.export.onnx_model import export_onnx
    from test_blocks import CASES
    project, _feeds = _float16_case("ScatterNd", CASES["ScatterNd"][0])
    with pytest.raises(ExportError) as err:
        export_onnx(project, outputs=["B"])
    assert any(p.startswith("main/B (ScatterNd): of float16") for p in err.value.problems), err.value.problems


@pytest.mark.parametrize("dtype", ["int64", "int32", "int8", "int16", "uint8"])
def test_onnx_integer_relu_runs(dtype):
    """ONNX Runtime has no int64 (nor int16) Relu kernel: the model could not run."""
    pytest.importorskip("onnxruntime")
    from diagrams import chain
    from test_export_onnx import compare_with_ort
    info = np.iinfo(dtype)
    x = np.array([info.min, -1 if info.min else 0, 0, 1, info.max], dtype)
    project = chain(("x", "Placeholder", {"shape": [5], "dtype": dtype}, None), ("B", "Relu", {}, {"features": "x"}))
    compare_with_ort(project, {"x": x}, ["B"])
