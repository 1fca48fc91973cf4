"""Numeric attrs with absurd values are refused by `blockflow check` (the compiler), naming the
block, the attr and the value, instead of passing it and failing at run time.

Before: a Conv2D stride of 10**30 (a file may hold any integer) passed `check` and `run` ended in
"OverflowError: Python int too large to convert to C long"; a float attr of 10**400 was an
internal error (exit 5) of `check`; a Pad of an int32 tensor with constant_values 1e308 filled
it with -2147483648.
"""
from __future__ import annotations

import numpy as np
import pytest

from blockflow.cli import EXIT_DIAGNOSTICS, main
from blockflow.compile.compiler import compile_project
from blockflow.io.project_io import save_project
from blockflow.registry import default_registry
from blockflow.spec import Attr, AttrError
from blockflow.spec.attrs import INT_MAX, INT_MIN
from blockflow_blocks.window_geometry import WINDOW_MAX

from diagrams import chain

_X = np.ones((1, 5, 5, 1), np.float32)
_FILTER = np.ones((2, 2, 1, 1), np.float32)


def _conv(**attrs):
    return chain(("conv", "Conv2D", attrs, {"input": _X, "filter": _FILTER}),
                 ("loss", "Sum", {}, {"input": "conv"}))


def _errors(project):
    return [str(d) for d in compile_project(project, "main").errors]


def test_check_refuses_a_conv2d_stride_past_int64_naming_block_attr_and_value(tmp_path, capsys):
    path = tmp_path / "conv.bflow.json"
    save_project(_conv(strides=[1, 10 ** 30, 10 ** 30, 1]), path)
    code = main(["check", str(path)])
    out, err = capsys.readouterr()
    assert code == EXIT_DIAGNOSTICS, out + err
    assert (f"error: main/conv: attr 'strides': entry 1 must be at most {WINDOW_MAX}, "
            f"got {10 ** 30}") in out
    assert "Traceback" not in out + err and "OverflowError" not in out + err


@pytest.mark.parametrize("block, attr", [
    ("Conv2D", "strides"), ("Conv2D", "dilations"), ("Conv2D", "explicit_paddings"),
    ("Conv2DBackpropInput", "strides"), ("Conv2DBackpropInput", "dilations"),
    ("Conv2DBackpropInput", "explicit_paddings"),
    ("MaxPool", "ksize"), ("MaxPool", "strides"), ("MaxPool", "explicit_paddings"),
    ("AvgPool", "ksize"), ("AvgPool", "strides"),
])
def test_window_attrs_are_bounded_per_entry(block, attr):
    spec = default_registry().get(block)
    assert spec.check_attr(attr, [1, WINDOW_MAX, WINDOW_MAX, 1]) == (1, WINDOW_MAX, WINDOW_MAX, 1)
    with pytest.raises(AttrError, match=f"^entry 2 must be at most {WINDOW_MAX}, got {2 ** 62}$"):
        spec.check_attr(attr, [1, 2, 2 ** 62, 1])


def test_the_largest_window_attrs_compile_and_run_cleanly():
    # a stride past every axis gives one window: the bound costs no legitimate value
    from blockflow.run.runtime import run_backward
    project = _conv(strides=[1, WINDOW_MAX, WINDOW_MAX, 1], padding="SAME")
    project.pages[0].loss = "loss"
    program = compile_project(project, "main")
    assert program.ok, [str(d) for d in program.errors]
    assert run_backward(program).value("conv").shape == (1, 1, 1, 1)


def _every_numeric_attr():
    registry = default_registry()
    for name in sorted(registry.names()):
        for a in registry.get(name).attrs:
            if a.kind in ("int", "ints", "shape"):
                yield pytest.param(name, a, id=f"{name}.{a.name}")


@pytest.mark.parametrize("block, attr", list(_every_numeric_attr()))
def test_every_integer_attr_of_the_library_is_held_to_int64(block, attr):
    for bad in (INT_MAX + 1, 10 ** 30, INT_MIN - 1):
        value = bad if attr.kind == "int" else [bad]
        with pytest.raises(AttrError, match="int64|at most|at least"):
            attr.validate(value)
    if not attr.required:
        attr.validate(attr.default)


@pytest.mark.parametrize("value, message", [
    (10 ** 30, f"must be at most {INT_MAX}, the largest int64, got {10 ** 30}"),
    (1e308, f"must be at most {INT_MAX}, the largest int64, got 1e+308"),
    (-10 ** 400, f"must be at least {INT_MIN}, the smallest int64, got an integer of 401 digits (about -10^400)"),
], ids=["10**30", "1e308", "-10**400"])
def test_an_int_attr_past_int64_says_so_and_shows_the_value_as_written(value, message):
    with pytest.raises(AttrError) as info:
        Attr("seed", "int", 0).validate(value)
    assert str(info.value) == message
    assert Attr("seed", "int", 0).validate(INT_MAX) == INT_MAX
    assert Attr("seed", "int", 0).validate(float(2 ** 62)) == 2 ** 62


def test_a_declared_bound_is_checked_first_and_entries_of_a_shape_too():
    with pytest.raises(AttrError, match="^must be at most 4096, got 1e\\+308$"):
        Attr("num_split", "int", 1, max=4096).validate(1e308)
    with pytest.raises(AttrError, match=f"^entry 1 must be at most {INT_MAX}, the largest int64"):
        Attr("shape", "shape", ()).validate([-1, 2 ** 63])
    with pytest.raises(AttrError, match=f"^entry 1 must be at most {INT_MAX}"):
        Attr("shape", "dims", None).validate(["batch", 2 ** 64])
    assert Attr("shape", "dims", None).validate(["batch", -1, 3]) == ("batch", None, 3)


def test_a_float_attr_past_float64_is_a_diagnostic_not_an_internal_error(tmp_path, capsys):
    project = chain(("x", "Placeholder", {"shape": [2, 3]}, None),
                    ("act", "LeakyRelu", {"alpha": 10 ** 400}, {"features": "x"}))
    path = tmp_path / "leaky.bflow.json"
    save_project(project, path)
    code = main(["check", str(path)])
    out, err = capsys.readouterr()
    assert code == EXIT_DIAGNOSTICS, out + err
    assert ("error: main/act: attr 'alpha': expected a number a float64 holds (at most about 1.8e308), "
            "got an integer of 401 digits (about 10^400)") in out


@pytest.mark.parametrize("dtype, value, says", [
    ("int32", 1e308, "1e+308 does not fit int32 (-2147483648 to 2147483647; a Cast block wraps)"),
    ("int8", 300.0, "300 does not fit int8 (-128 to 127; a Cast block wraps)"),
    ("int32", 2.5, "2.5 has a fraction"),
    ("float16", 1e10, "does not fit float16"),
])
def test_pad_refuses_a_constant_its_input_cannot_hold(dtype, value, says):
    project = chain(("x", "Placeholder", {"shape": [2], "dtype": dtype}, None),
                    ("pad", "Pad", {"constant_values": value}, {"input": "x", "paddings": np.array([[1, 1]])}))
    errors = _errors(project)
    assert len(errors) == 1 and errors[0].startswith("error: main/pad: Pad: constant_values ") and says in errors[0]


def test_pad_keeps_every_constant_that_fits():
    for dtype, value in (("int32", -7.0), ("uint8", 255.0), ("bool", 1.0), ("float32", -np.inf), ("float16", 0.5)):
        project = chain(("x", "Placeholder", {"shape": [2], "dtype": dtype}, None),
                        ("pad", "Pad", {"constant_values": value}, {"input": "x", "paddings": np.array([[1, 1]])}))
        assert not _errors(project), (dtype, value)


def test_an_onnx_pad_value_is_its_input_s_dtype_as_onnx_casts_it():
    """Pad before opset 11 gives its value as a float attr: 1e10 for a float16 input pads with
    inf, as ONNX casts it; Pad's constant_values must now fit the input, so the import casts."""
    onnx = pytest.importorskip("onnx")
    from blockflow.importing.onnx_import import import_model
    from blockflow.importing.onnx_read import read_onnx_bytes
    from blockflow.run.runtime import run
    helper, f16 = onnx.helper, onnx.TensorProto.FLOAT16
    graph = helper.make_graph([helper.make_node("Pad", ["x"], ["y"], pads=[1, 1], value=1e10)], "g",
                              [helper.make_tensor_value_info("x", f16, [2])], [helper.make_tensor_value_info("y", f16, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 10)])
    project, report = import_model(read_onnx_bytes(model.SerializeToString(), "pad.onnx"), "m")
    program = compile_project(project)
    assert program.ok, [str(d) for d in program.errors]
    y = run(program, {report.inputs["x"]: np.array([1, 2], np.float16)}, fetch=[report.outputs["y"]],
            check_numerics=False, record=False).value(report.outputs["y"])
    np.testing.assert_array_equal(y, np.array([np.inf, 1, 2, np.inf], np.float16))


# --------------------------------------------------------------------------------------------
# A number attr read back from a file: a 0-d array is its number (docs/project-format.md)

def test_a_number_attr_takes_the_0_d_array_a_file_writes_for_it():
    assert Attr("c", "float", 0.0).validate(np.asarray(-np.inf)) == -np.inf
    assert Attr("n", "int", 0).validate(np.asarray(3, np.int64)) == 3
    assert type(Attr("n", "int", 0).validate(np.asarray(3, np.int64))) is int
    assert Attr("n", "int", 0).validate(np.asarray(3.0)) == 3
    for bad in (np.asarray(True), np.ones(2), np.asarray(2.5)):
        with pytest.raises(AttrError):
            Attr("n", "int", 0).validate(bad)
    with pytest.raises(AttrError, match="expected a number, got NaN"):
        Attr("c", "float", 0.0).validate(np.asarray(np.nan))


def test_a_pad_with_an_infinite_constant_checks_again_after_a_save(tmp_path):
    """Saved, -inf is a 0-d array object (JSON has no spelling for it); loaded back, the float
    kind refused it ('expected a number, got array(-inf)'), so a project the ONNX import made
    from a Pad of -inf could not be checked once saved."""
    from blockflow.io.project_io import load_project
    from blockflow.run.runtime import run
    project = chain(("x", "Placeholder", {"shape": [2]}, None),
                    ("pad", "Pad", {"constant_values": -np.inf}, {"input": "x", "paddings": np.array([[1, 1]])}))
    save_project(project, tmp_path / "pad.bflow.json")
    program = compile_project(load_project(tmp_path / "pad.bflow.json"), "main")
    assert program.ok, [str(d) for d in program.errors]
    y = run(program, {"x": np.array([1, 2], np.float32)}, fetch=["pad"], check_numerics=False,
            record=False).value("pad")
    np.testing.assert_array_equal(y, [-np.inf, 1, 2, -np.inf])
