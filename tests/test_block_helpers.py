"""The helpers the block modules share (blocks/common.py, blocks/folding.py): what each promises,
on its own. The blocks that use them are checked in tests/test_*_ops.py and tests/test_blocks.py."""
from __future__ import annotations

import importlib
import pkgutil

import numpy as np
import pytest

from blockflow.spec import BlockSpec, Input, Output, ShapeError, TensorType
from blockflow_blocks import all_blocks, common, folding


def t(shape, dtype="float32", value=None):
    return TensorType(shape, dtype, value)


def test_typed_constants_keep_a_float32_scalar_float32():
    x = np.float32(3.0)
    assert (x * common.ONE[x.dtype]).dtype == np.float32
    assert (x * common.typed(0.5)[x.dtype]).dtype == np.float32
    assert set(common.typed(2.0)) == {np.dtype(n) for n in common.FLOAT_NAMES}


def test_shapes_in_messages_and_merged():
    assert common.fmt_shape((2, None, 3)) == "[2,?,3]" and common.fmt_shape(()) == "[]"
    assert common.merge_shapes("Op", (None, 3), (2, None)) == (2, 3)
    with pytest.raises(ShapeError, match=r"^Op: shapes \[2\] and \[2,3\] differ in rank$"):
        common.merge_shapes("Op", (2,), (2, 3))
    with pytest.raises(ShapeError, match=r"^Op: halves \[2\] and \[3\] differ$"):
        common.merge_shapes("Op", (2,), (3,), "halves")
    assert common.broadcast_or_none((2, 1), (3,)) == (2, 3)
    assert common.broadcast_or_none((2,), (3,)) is None


def test_dtype_checks():
    assert common.binary_infer("Add", t((2, 1)), t((3,))) == t((2, 3))
    with pytest.raises(ShapeError, match="one dtype, got float32 and float64"):
        common.check_arithmetic("Add", t(()), t((), "float64"))
    with pytest.raises(ShapeError, match="^Add does not take bool tensors$"):
        common.check_arithmetic("Add", t((), "bool"), t((), "bool"))
    assert common.no_bool("Relu6", t((2,), "int32", np.zeros(2, np.int32))) == t((2,), "int32")
    with pytest.raises(ShapeError, match="Relu6 does not take bool tensors, got bool"):
        common.no_bool("Relu6", t((2,), "bool"))
    assert common.like(t((2,), "int32", np.zeros(2, np.int32))).value is None


def test_shared_batch_names_the_inputs():
    assert common.shared_batch("Op", t((None, 3)), t((4,), "int32"), ("rows", "labels")) == 4
    assert common.shared_batch("Op", t((None, 3)), t((None,), "int32"), ("rows", "labels")) is None
    with pytest.raises(ShapeError, match=r"Op: rows \[5,3\] and labels \[4\] differ in batch size"):
        common.shared_batch("Op", t((5, 3)), t((4,), "int32"), ("rows", "labels"))
    with pytest.raises(ShapeError, match=r"Op needs \[batch, classes\] rows and \[batch\] labels"):
        common.shared_batch("Op", t((5,)), t((5,), "int32"), ("rows", "labels"))


def test_static_numbers():
    assert common.single_int("Op", "k", np.array(3)) == 3 and common.single_int("Op", "k", 2) == 2
    for bad in (np.array([3]), np.array(1.5), True):
        with pytest.raises(ShapeError, match="Op: k must be a single integer"):
            common.single_int("Op", "k", bad)
    assert folding.static_int("Op", "axis", [1]) == 1 and folding.as_int(np.array([4])) == 4
    assert folding.static_ints("Op", "dims", np.array([2, 3]), 2) == (2, 3)
    with pytest.raises(ShapeError, match=r"Op: dims needs 3 entries \(one per axis\), got \[2, 3\]"):
        folding.static_ints("Op", "dims", [2, 3], 3)
    with pytest.raises(ShapeError, match=r"^Op: dims \[2, -1\] has a negative size$"):
        folding.static_sizes("Op", "dims", [2, -1])
    assert folding.axis_in("Op", -1, 3) == 2
    with pytest.raises(ShapeError, match=r"it must be in \[-3, 2\]"):
        folding.axis_in("Op", 3, 3)


def test_fold_computes_small_integer_results_only():
    ints = t((2,), "int32", np.array([1, 2], np.int32))
    folded = folding.fold("Op", t((2,), "int32"), lambda v: v * 2, ints)
    np.testing.assert_array_equal(folded.value, [2, 4])
    floats = t((2,), "float32", np.ones(2, np.float32))
    assert folding.fold("Op", t((2,), "float32"), lambda v: v, floats).value is None
    assert folding.fold("Op", t((2,), "int32"), lambda v: v, t((2,), "int32")).value is None


def test_declare_makes_a_block_as_a_class_statement_would():
    def family(name, ufunc):
        def forward(x):
            return ufunc(x)
        return common.declare(name, """
            Doc of the block.

            More.
            """, ("Alias",), category="test_ops", module=__name__,
                              inputs=(Input("x"),), outputs=(Output("y"),), infer=common.like, forward=forward)

    spec = family("Twice", lambda x: x + x)
    assert isinstance(spec, BlockSpec) and spec.category == "test_ops" and spec.aliases == ("Alias",)
    assert spec.source == f"{__name__}.Twice" and spec.doc == "Doc of the block.\n\nMore."
    assert spec.forward.__qualname__ == "Twice.forward" and spec.infer is common.like
    np.testing.assert_array_equal(spec.forward(np.array([1.0])), [2.0])


def test_all_blocks_reads_every_module_that_declares_blocks():
    import blockflow_blocks
    from blockflow_blocks import catalog

    listed = {f"blockflow_blocks.{m}" for m in catalog.MODULES}
    for info in pkgutil.iter_modules(blockflow_blocks.__path__):
        module = importlib.import_module(f"blockflow_blocks.{info.name}")
        declares = any(isinstance(v, BlockSpec) for v in vars(module).values())
        assert declares == (module.__name__ in listed), module.__name__
    assert {spec.source.rsplit(".", 1)[0] for spec in all_blocks()} == listed
