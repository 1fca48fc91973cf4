"""Hostile attrs and values against the block library's own allocations.

Every array a block makes beyond its inputs and outputs (a padded copy, a convolution's window
matrix, a sort order, a wider copy before a cast), and every output whose size depends on values
rather than shapes (Where's rows, a dataset's batch), is announced with ``spec.reserve`` before
it is made: over the per-array limit it is refused with an AllocationError naming the array, its
shape and its size, and inside a run it counts against the run's budget. Where the array is not
needed whole, it is not made whole: a convolution's window matrix goes in pieces, a broadcast
batch gradient is summed inside its matrix product, a Variable's random value is drawn in pieces.

Before: a Conv2D with a 48x48 filter on a 208x208 image made a 1.6 GB window matrix (killed
under a 1.5 GB cap), a 4x4-padded or dilated Conv2D made gigabytes of zeros, BatchMatMul's
gradient for a [1, 64, 2048] operand against a [8192, 2048, 1] one made a 4 GiB intermediate,
ClipByValue with bounds larger than its input made their broadcast before refusing it, and a
float32 Variable's random initial value took three times its size.
"""
from __future__ import annotations

import textwrap

import numpy as np
import pytest

from blockflow.compile.compiler import compile_project
from blockflow.io.project_io import save_project
from blockflow.registry import Registry
from blockflow.run.runtime import run
from blockflow.spec import MAX_TENSOR_BYTES, AllocationError, ShapeError, allocation_guard
from blockflow_blocks import all_blocks
from blockflow_blocks import nn_conv
from blockflow_blocks.nn_conv import Conv2D
from diagrams import chain
from memory_tracing import traced_peak
from hostile_kit import baseline_rss, changed_paths, run_cli, run_python, snapshot

REG = Registry(all_blocks())
CAP = 1536 * 1024 ** 2  # the children's address-space cap


def attrs(name, **given):
    values, problems = REG[name].validate_attrs(given)
    assert not problems, problems
    return values


#: what a refusal may allocate before it is made: its own bookkeeping takes kilobytes, what it
#: refuses gigabytes (measured, not timed: a time bound says nothing on a loaded machine)
BEFORE_REFUSING = 16 * 1024 ** 2


def refused(call, what, shape):
    """``call()`` raises AllocationError for ``what`` of ``shape`` before making anything of
    that size, saying what and how big."""
    def refusal():
        with pytest.raises(AllocationError) as info:
            call()
        return info

    info, peak = traced_peak(refusal)
    assert peak < BEFORE_REFUSING, peak
    err = info.value
    assert err.what == what and err.shape == tuple(shape)
    assert err.nbytes == int(np.prod(shape)) * err.dtype.itemsize > MAX_TENSOR_BYTES
    text = str(err)
    assert what in text and str(list(shape)) in text and "GiB" in text
    return err


class Guard:
    """A run's allocation guard, as the runtime installs one: records every reservation and
    refuses those over ``budget`` bytes."""

    def __init__(self, budget=None):
        self.budget, self.seen = budget, []

    def reserve(self, nbytes, shape, dtype, what):
        self.seen.append((what, shape, nbytes))
        if self.budget is not None and nbytes > self.budget:
            raise AllocationError(f"{what} would take {nbytes} bytes, over the run's budget", what, shape,
                                  dtype, nbytes)

    def __enter__(self):
        self._token = allocation_guard.set(self)
        return self

    def __exit__(self, *exc):
        allocation_guard.reset(self._token)


# --------------------------------------------------------------------------------------------
# Refused before anything is made


def test_conv2d_padding_far_larger_than_its_input_is_refused():
    x, f = np.ones((1, 2, 2, 1), np.float32), np.ones((1, 1, 1, 1), np.float32)
    a = attrs("Conv2D", padding="EXPLICIT", strides=[1, 40000, 40000, 1],
              explicit_paddings=[0, 0, 40000, 40000, 40000, 40000, 0, 0])
    refused(lambda: Conv2D.forward(x, f, **a), "the padded input", (1, 80002, 80002, 1))
    out = np.ones((1, 3, 3, 1), np.float32)
    refused(lambda: Conv2D.vjp(out, out, x, f, **a, needs=(True, False)),
            "the padded input's gradient", (1, 80002, 80002, 1))


def test_conv2d_dilation_that_pads_gigabytes_is_refused():
    x, f = np.ones((1, 4, 4, 1), np.float32), np.ones((3, 3, 1, 1), np.float32)
    a = attrs("Conv2D", padding="SAME", dilations=[1, 30000, 30000, 1])
    refused(lambda: Conv2D.forward(x, f, **a), "the padded input", (1, 60004, 60004, 1))


def test_where_counts_its_rows_before_making_them():
    condition = np.broadcast_to(np.True_, (16,) * 7)  # 2^28 true entries, one byte of memory
    refused(lambda: REG["Where"].forward(condition), "Where's output (the coordinates of the true entries)",
            (2 ** 28, 7))


def test_topk_reserves_its_sort_order():
    x = np.broadcast_to(np.int8(1), (2 ** 30,))
    refused(lambda: REG["TopK"].forward(x, 1, sorted=True), "TopK's sort order", (2 ** 30,))


def test_range_and_linspace_reserve_their_float64_values():
    refused(lambda: REG["Range"].forward(0, 10 ** 9, 1, dtype="float32"),
            "Range's values before rounding to float32", (10 ** 9,))
    refused(lambda: REG["LinSpace"].forward(np.float32(0), np.float32(1), 10 ** 9),
            "LinSpace's values before rounding to float32", (10 ** 9,))


def test_clip_bounds_larger_than_the_input_are_refused_before_broadcasting():
    t = np.zeros(1, np.float32)
    big = np.broadcast_to(np.float32(1), (10 ** 10,))  # would broadcast t to 40 GB

    def clip():
        with pytest.raises(ShapeError, match=r"do not broadcast to t's shape \[1\]"):
            REG["ClipByValue"].forward(t, np.float32(0), big)

    assert traced_peak(clip)[1] < BEFORE_REFUSING


def test_an_allocation_error_inside_a_run_names_the_block():
    project = chain(("x", "Placeholder", {"shape": [1, 2, 2, 1]}, None),
                    ("w", "Placeholder", {"shape": [1, 1, 1, 1]}, None),
                    ("conv", "Conv2D", {"padding": "EXPLICIT", "strides": [1, 40000, 40000, 1],
                                        "explicit_paddings": [0, 0, 40000, 40000, 40000, 40000, 0, 0]},
                     {"input": "x", "filter": "w"}))
    program = compile_project(project)
    assert program.ok, [str(e) for e in program.errors]
    with pytest.raises(Exception) as info:
        run(program, {"x": np.ones((1, 2, 2, 1), np.float32), "w": np.ones((1, 1, 1, 1), np.float32)})
    text = str(info.value)
    assert "main/conv (Conv2D)" in text and "the padded input would be float32[1, 80002, 80002, 1] (23.8 GiB)" in text


def _ints(*values):
    return np.array(values, np.int32)


@pytest.mark.parametrize("block, wires, huge", [
    ("Tile", {"input": "one_by_one", "multiples": _ints(5000, 5000)}, False),
    ("Tile", {"input": "one_by_one", "multiples": _ints(100000, 100000)}, True),
    ("Fill", {"dims": _ints(5000, 5000), "value": "one"}, False),
    ("Fill", {"dims": _ints(100000, 100000), "value": "one"}, True),
    ("Diag", {"diagonal": "row"}, False),
])
def test_compiling_never_makes_a_large_result_of_small_constants(block, wires, huge):
    # Integer results of small constants are computed while compiling (so that Shape -> Reshape
    # works), but a small constant can ask for a large result: 100 MB (Tile, Fill), 67 MB (Diag
    # of 4096 entries) or 37 GiB (a MemoryError) were made while compiling.
    project = chain(("one_by_one", "Const", {"value": [[1]], "dtype": "int32"}, None),
                    ("one", "Const", {"value": 1, "dtype": "int32"}, None),
                    ("row", "Const", {"value": list(range(4096)), "dtype": "int32"}, None),
                    ("big", block, {}, wires))
    program, peak = traced_peak(lambda: compile_project(project))
    assert peak < 16 * 1024 ** 2
    if huge:
        text = " ".join(str(e) for e in program.errors)
        assert "main/big" in text and "[100000,100000]" in text and "37.3 GiB" in text, text
    else:
        assert program.ok, [str(e) for e in program.errors]


@pytest.mark.parametrize("block, attr, wires", [
    ("Unstack", "num", {"value": "x"}),
    ("Split", "num_split", {"value": "x", "axis": np.int32(0)}),
    ("SplitV", "num_split", {"value": "x", "axis": np.int32(0), "size_splits": np.array([-1], np.int32)}),
])
def test_an_output_count_is_bounded(block, attr, wires):
    # One output port per piece: 10^8 of them took the compiler a minute and then a MemoryError.
    project = chain(("x", "Placeholder", {"shape": [-1, 3]}, None), ("t", block, {attr: 10 ** 8}, wires))
    program, peak = traced_peak(lambda: compile_project(project))
    assert peak < BEFORE_REFUSING, peak      # no port made for each piece
    assert [str(e) for e in program.errors] == [f"error: main/t: attr '{attr}': must be at most 4096, got 100000000"]


# --------------------------------------------------------------------------------------------
# Counted against the run's budget


def test_value_driven_outputs_count_against_the_run_budget():
    """A dataset block's batch depends on the data and the split: the block reserves it."""
    class Files:
        def arrays(self, path):
            return {"x": np.ones((1000, 10)), "y": np.zeros(1000)}

    class Data:
        split, step = "all", 0

    spec = REG["NumpyDataset"]
    a = attrs("NumpyDataset", path="d.npz")
    with Guard(budget=30_000) as guard:     # room for the rows' order (24,000 bytes), not the batch
        with pytest.raises(AllocationError) as info:
            spec.forward(**a, files=Files(), data=Data())
    assert info.value.what == "NumpyDataset's batch of features" and info.value.shape == (1000, 10)
    assert guard.seen[-1][0] == "NumpyDataset's batch of features"
    with Guard(budget=10_000) as guard:
        with pytest.raises(AllocationError, match="MakeBlobs's generated points"):
            REG["MakeBlobs"].forward(**attrs("MakeBlobs", n=2000, dims=3, seed=12345), data=Data())
    with Guard(budget=100) as guard:
        with pytest.raises(AllocationError, match="Where's output"):
            REG["Where"].forward(np.ones((10, 10), bool))


def test_a_convolution_makes_its_window_matrix_in_bounded_pieces(monkeypatch):
    monkeypatch.setattr(nn_conv, "_WINDOW_PIECE_BYTES", 64 * 1024)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 40, 30, 3))
    f = rng.standard_normal((7, 5, 3, 4))
    a = attrs("Conv2D", padding="SAME", strides=[1, 1, 2, 1])
    with Guard() as guard:
        out = Conv2D.forward(x, f, **a)
        gi, gf = Conv2D.vjp(np.ones_like(out), out, x, f, **a, needs=(True, True))
    pieces = [nbytes for what, _, nbytes in guard.seen if "window" in what]
    whole = 2 * 40 * 15 * 7 * 5 * 3 * 8
    assert len(pieces) > 10 and max(pieces) <= 64 * 1024 < whole
    monkeypatch.setattr(nn_conv, "_WINDOW_PIECE_BYTES", 1 << 30)
    want = Conv2D.forward(x, f, **a)  # one piece: the old computation
    np.testing.assert_allclose(out, want, rtol=1e-12)
    want_gi, want_gf = Conv2D.vjp(np.ones_like(want), want, x, f, **a, needs=(True, True))
    np.testing.assert_allclose(gi, want_gi, rtol=1e-12)
    np.testing.assert_allclose(gf, want_gf, rtol=1e-12)


def test_a_broadcast_batch_gradient_is_summed_inside_its_product():
    rng = np.random.default_rng(8)
    x = rng.standard_normal((1, 8, 512))
    y = rng.standard_normal((2048, 512, 1))
    g = rng.standard_normal((2048, 8, 1))
    spec = REG["BatchMatMul"]
    (gx, gy), peak = traced_peak(lambda: spec.vjp(g, None, x, y, adj_x=False, adj_y=False, needs=(True, True)))
    assert peak < 2 * y.nbytes  # the [2048, 8, 512] product would be 8 times y
    np.testing.assert_allclose(gx, np.einsum("bmn,bkn->mk", g, y)[None], rtol=1e-10)
    np.testing.assert_allclose(gy, np.einsum("mk,bmn->bkn", x[0], g), rtol=1e-10)


def test_batch_matmul_gradients_match_their_definition_on_random_broadcasts():
    rng = np.random.default_rng(21)
    spec = REG["BatchMatMul"]
    for _ in range(300):
        full = [int(v) for v in rng.integers(1, 4, int(rng.integers(0, 4)))]

        def batch():
            tail = full[len(full) - int(rng.integers(0, len(full) + 1)):]
            return [d if rng.random() < 0.5 else 1 for d in tail]

        m, k, n = (int(v) for v in rng.integers(1, 4, 3))
        adj_x, adj_y = bool(rng.integers(2)), bool(rng.integers(2))
        x = rng.standard_normal(batch() + ([k, m] if adj_x else [m, k]))
        y = rng.standard_normal(batch() + ([n, k] if adj_y else [k, n]))
        out = spec.forward(x, y, adj_x=adj_x, adj_y=adj_y)
        g = rng.standard_normal(out.shape)
        gx, gy = spec.vjp(g, out, x, y, adj_x=adj_x, adj_y=adj_y, needs=(True, True))
        # The definition: d<g, x @ y>/dx, by finite differences of a bilinear map (exact).
        for arg, grad in ((x, gx), (y, gy)):
            assert grad.shape == arg.shape
            v = rng.standard_normal(arg.shape)
            plus = spec.forward(x + v if arg is x else x, y + v if arg is y else y, adj_x=adj_x, adj_y=adj_y)
            np.testing.assert_allclose(np.vdot(g, plus - out), np.vdot(grad, v), rtol=1e-9, atol=1e-9)


def test_a_variable_random_value_is_drawn_without_a_float64_copy():
    spec = REG["Variable"]
    a = attrs("Variable", shape=[4 * 1024 ** 2], dtype="float32", initializer="glorot_normal", seed=3)
    value, peak = traced_peak(lambda: spec.initial(**a))
    assert value.dtype == np.float32 and value.shape == (4 * 1024 ** 2,)
    assert peak < 2 * value.nbytes  # before: 3 times, a float64 draw (twice the value) and the value
    rng = np.random.default_rng(3)  # the same numbers as one float64 draw cast
    np.testing.assert_array_equal(value, rng.normal(0.0, np.sqrt(2.0 / (2 * value.size)), value.size)
                                  .astype(np.float32))


# --------------------------------------------------------------------------------------------
# Under a memory cap, in a child process


@pytest.fixture(scope="module")
def floor():
    return baseline_rss(cap_bytes=CAP)


def _child(code):
    r = run_python("import numpy as np\nfrom blockflow_blocks import nn_conv, nn_pool, math_matmul\n"
                   "from blockflow.spec import AllocationError\n" + textwrap.dedent(code), cap_bytes=CAP,
                   timeout=60)
    r.assert_clean_message()
    return r


def test_a_large_filter_convolves_in_bounded_memory(floor):
    # The window matrix is 43264 x 9216 float32 = 1.6 GB: made whole, over the cap.
    r = _child("""
        x = np.random.default_rng(0).standard_normal((1, 208, 208, 4)).astype(np.float32)
        f = np.random.default_rng(1).standard_normal((48, 48, 4, 1)).astype(np.float32)
        a = dict(strides=(1, 1, 1, 1), padding="SAME", explicit_paddings=(), data_format="NHWC",
                 dilations=(1, 1, 1, 1))
        out = nn_conv.Conv2D.forward(x, f, **a)
        ref = float((x[0, 81:129, 81:129] * f[:, :, :, 0]).sum())  # SAME pads 23 before: output (104, 104)
        assert out.shape == (1, 208, 208, 1) and abs(out[0, 104, 104, 0] - ref) < 1e-2 * max(1, abs(ref))
        print("ok")
    """)
    assert r.returncode == 0 and "ok" in r.stdout, r.output
    assert r.peak_rss - floor < 200 * 1024 ** 2, r.peak_rss


def test_hostile_pooling_windows_and_padding_stay_small_under_a_cap(floor):
    r = _child("""
        x = np.random.default_rng(0).standard_normal((2, 64, 64, 8)).astype(np.float32)
        for name in ("MaxPool", "AvgPool"):
            spec = getattr(nn_pool, name)
            a, _ = spec.validate_attrs(dict(ksize=(1, 10 ** 6, 10 ** 6, 1), strides=(1, 1, 1, 1), padding="SAME",
                                            data_format="NHWC"))
            out = spec.forward(x, **a)
            (gx,) = spec.vjp(np.ones_like(out), out, x, **a)
            assert gx.shape == x.shape
        x, f = np.ones((1, 2, 2, 1), np.float32), np.ones((1, 1, 1, 1), np.float32)
        try:
            nn_conv.Conv2D.forward(x, f, strides=(1, 40000, 40000, 1), padding="EXPLICIT", data_format="NHWC",
                             explicit_paddings=(0, 0, 40000, 40000, 40000, 40000, 0, 0), dilations=(1, 1, 1, 1))
        except AllocationError as exc:
            print("refused:", exc)
    """)
    assert r.returncode == 0 and "refused: the padded input would be float32[1, 80002, 80002, 1] (23.8 GiB)" in r.stdout, r.output
    assert r.peak_rss - floor < 100 * 1024 ** 2, r.peak_rss


def test_a_broadcast_batch_gradient_stays_small_under_a_cap(floor):
    # Before: the [8192, 64, 2048] float32 product (4 GiB) was made, then summed to [1, 64, 2048].
    r = _child("""
        rng = np.random.default_rng(0)
        x = rng.standard_normal((1, 64, 2048)).astype(np.float32)
        y = rng.standard_normal((8192, 2048, 1)).astype(np.float32)
        g = np.ones((8192, 64, 1), np.float32)
        gx, gy = math_matmul.BatchMatMul.vjp(g, None, x, y, adj_x=False, adj_y=False, needs=(True, True))
        assert gx.shape == x.shape and gy.shape == y.shape
        print("ok")
    """)
    assert r.returncode == 0 and "ok" in r.stdout, r.output
    assert r.peak_rss - floor < 300 * 1024 ** 2, r.peak_rss


def test_the_command_line_reports_a_refused_allocation_with_the_block(tmp_path, floor):
    project = chain(("x", "Placeholder", {"shape": [1, 2, 2, 1]}, None),
                    ("w", "Placeholder", {"shape": [1, 1, 1, 1]}, None),
                    ("conv", "Conv2D", {"padding": "EXPLICIT", "strides": [1, 40000, 40000, 1],
                                        "explicit_paddings": [0, 0, 40000, 40000, 40000, 40000, 0, 0]},
                     {"input": "x", "filter": "w"}),
                    feeds={"x": np.ones((1, 2, 2, 1), np.float32), "w": np.ones((1, 1, 1, 1), np.float32)})
    path = tmp_path / "padded.bflow.json"
    save_project(project, path)
    before = snapshot(tmp_path)
    r = run_cli("run", path, cap_bytes=CAP, cwd=tmp_path)
    r.assert_clean_message()
    assert r.returncode == 4, r.output  # docs/cli.md: the run failed, a block raised
    assert "main/conv (Conv2D)" in r.stderr and "the padded input would be float32[1, 80002, 80002, 1] (23.8 GiB)" \
        in r.stderr, r.output
    assert r.peak_rss - floor < 100 * 1024 ** 2, r.peak_rss
    assert changed_paths(before, snapshot(tmp_path)) == set()


def test_a_datasets_row_order_is_reserved_before_it_is_made():
    """The split's permutation and sorted parts (16 bytes a row) and an epoch's order (8 bytes
    a training row) were made uncounted: six times a float32 column's data."""
    class Files:
        def arrays(self, path):
            return {"x": np.ones((1000, 1), np.float32), "y": np.zeros(1000)}

    class Data:
        split, step, seed = "train", 0, 0

    a = attrs("NumpyDataset", path="d.npz", batch_size=10)
    with Guard(budget=10_000):
        with pytest.raises(AllocationError) as info:
            REG["NumpyDataset"].forward(**a, files=Files(), data=Data())
    assert info.value.what == "NumpyDataset's order of its 1,000 examples" and info.value.shape == (2000,)
    with Guard() as guard:
        REG["NumpyDataset"].forward(**a, files=Files(), data=Data())
    assert [what for what, _, _ in guard.seen][:2] == ["NumpyDataset's order of its 1,000 examples",
                                                        "NumpyDataset's order of an epoch"]
