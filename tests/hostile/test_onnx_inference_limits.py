"""onnx's shape inference held to limits of memory and time (blockflow/importing/onnx_infer.py).

With data propagation, onnx 1.23 makes a dimension message (some 70 bytes) for each element of a
value of one dimension whose length it knows and whose values it does not, whenever an op that
propagates data (Slice, Cast, Unsqueeze, Gather, Concat...) reads it: a Slice's ends declared
[10^8] in a 300-byte file took 14 s and 7 GB, and the length may as well be one inference works
out from a constant (ConstantOfShape of [10^8], a Range to 10^8). Inference now runs in a child
process under limits; past them with data propagation it runs again without it, and past them
again the model is refused. The children's own bounds are checked in capped processes."""
from __future__ import annotations

import sys
import textwrap

import pytest

onnx = pytest.importorskip("onnx")

from hostile_kit import baseline_rss, run_python  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

from blockflow.importing import onnx_infer  # noqa: E402
from blockflow.importing.errors import ImportFailure  # noqa: E402
from blockflow.importing.onnx_import import import_model  # noqa: E402
from blockflow.importing.onnx_read import read_onnx_bytes  # noqa: E402

MiB = 2 ** 20

#: models whose inference, unbounded, made 10^8 dimension messages (each a few hundred bytes on
#: disk); run in one capped child, which prints each one's outcome and time
FAMILY = textwrap.dedent("""
    import resource, time
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper
    from blockflow.importing.errors import ImportFailure, UnsupportedOps
    from blockflow.importing.onnx_import import import_model
    from blockflow.importing.onnx_read import read_onnx_bytes

    N, F, I = 10 ** 8, TensorProto.FLOAT, TensorProto.INT64
    vi, n = helper.make_tensor_value_info, helper.make_node

    def c(name, value):
        return numpy_helper.from_array(np.asarray(value), name)

    def model(nodes, inputs, inits=()):
        graph = helper.make_graph(nodes, "g", inputs, [vi("y", F, None)], initializer=list(inits))
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])

    CASES = {
        "slice-ends-declared": model([n("Slice", ["x", "s", "e"], ["y"], name="n")],
                                     [vi("x", F, [4]), vi("s", I, [1]), vi("e", I, [N])]),
        "cast-of-a-declared-input": model([n("Cast", ["e"], ["y"], to=F, name="n")], [vi("e", I, [N])]),
        "constant-of-shape-then-cast": model([n("ConstantOfShape", ["s"], ["k"], name="k"),
                                              n("Cast", ["k"], ["y"], to=F)], [], [c("s", [N])]),
        "range-then-cast": model([n("Range", ["a", "b", "d"], ["k"], name="k"), n("Cast", ["k"], ["y"], to=F)], [],
                                 [c("a", np.int64(0)), c("b", np.int64(N)), c("d", np.int64(1))]),
        "constant-of-shape-then-unsqueeze": model([n("ConstantOfShape", ["s"], ["k"], name="k"),
                                                   n("Unsqueeze", ["k", "a"], ["y"])], [], [c("s", [N]), c("a", [0])]),
    }
    for name, m in CASES.items():
        start = time.perf_counter()
        try:
            import_model(read_onnx_bytes(m.SerializeToString(), "h.onnx"), "m")
            said = "imported"
        except (ImportFailure, UnsupportedOps) as exc:
            said = str(exc).replace("\\n", " ")
        print(f"{name}|{time.perf_counter() - start:.2f}|{said}")
    print("children|", resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)
""")


def test_long_values_onnx_s_data_propagation_would_materialize_are_bounded():
    """Each took 14 s and 7 GB (past the 2 GB cap here: a MemoryError onnx_read swallowed, after
    some 3 s each, and the process at its cap); now each takes well under a second, the process
    stays small, and inference's child stays within its limit."""
    floor = baseline_rss()
    r = run_python(FAMILY, env={"BLOCKFLOW_MEMORY_BUDGET": "64M"}, timeout=180)
    r.assert_clean_message()
    assert r.returncode == 0, r.output
    lines = dict(line.split("|", 1) for line in r.stdout.splitlines())
    children = int(lines.pop("children"))
    outcomes = {name: text.split("|", 1) for name, text in lines.items()}
    assert len(outcomes) == 5, r.output
    for name, (seconds, said) in outcomes.items():
        assert float(seconds) < 5, (name, seconds, said)
    assert "Slice (1 node: n): Slice's starts (input 1) must be a constant" in outcomes["slice-ends-declared"][1]
    assert outcomes["cast-of-a-declared-input"][1] == "imported"
    for name in ("constant-of-shape-then-cast", "range-then-cast", "constant-of-shape-then-unsqueeze"):
        assert "node 'k'" in outcomes[name][1] and "memory budget" in outcomes[name][1], outcomes[name]
    assert r.peak_rss < floor + 96 * MiB, (r.peak_rss / MiB, floor / MiB)
    assert children < 640 * MiB, children / MiB     # (counts what the child shares of this process too)


def _import(model, name="hostile.onnx"):
    return import_model(read_onnx_bytes(model.SerializeToString(), name), "m")


def _relu_chain(nodes: int):
    chain = [helper.make_node("Relu", [f"v{i}"], [f"v{i + 1}"]) for i in range(1, nodes)]
    return chain, helper.make_tensor_value_info(f"v{nodes}", TensorProto.FLOAT, None)


def test_a_model_past_the_limits_with_and_without_data_propagation_is_refused():
    """A Reshape to a constant of 300,000 values (a 300 KB file) gives its output as many
    dimensions, and each Relu after it copies them: unbounded, 30 Relus took inference 3.2 s and
    790 MB; now refused when inference passes its memory, both ways."""
    shape = helper.make_tensor("s", TensorProto.INT64, [300_000], [1] * 300_000)
    chain, out = _relu_chain(30)
    nodes = [helper.make_node("Constant", [], ["s"], value=shape), helper.make_node("Reshape", ["x", "s"], ["v1"]),
             *chain]
    model = helper.make_model(helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                                                [out]), opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(ImportFailure, match=r"hostile.onnx: onnx's shape inference of the model needed more than "
                                            r"[0-9.]+ MiB of memory \(the most the import gives it for a model of "
                                            r"[0-9.]+ [KM]iB without its weights: docs/limits.md\), with its data "
                                            r"propagation and without"):
        _import(model)


def test_a_value_declared_with_more_dimensions_than_any_array_is_refused_before_inference():
    """A value_info of a million dimensions (a 2 MB file) was copied along each Relu after it: 50
    Relus took inference 49 s and 7.4 GB; now the declaration is refused, naming the value."""
    chain, out = _relu_chain(50)
    x = helper.make_tensor_value_info("v1", TensorProto.FLOAT, None)
    declared = helper.make_tensor_value_info("v2", TensorProto.FLOAT, [None] * 1_000_000)
    graph = helper.make_graph(chain, "g", [x], [out], value_info=[declared])
    with pytest.raises(ImportFailure, match="value 'v2' is declared with 1,000,000 dimensions; no array has more "
                                            "than 64"):
        _import(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))


def _small_model():
    chain, out = _relu_chain(3)
    x = helper.make_tensor_value_info("v1", TensorProto.FLOAT, [2, 3])
    return helper.make_model(helper.make_graph(chain, "g", [x], [out]), opset_imports=[helper.make_opsetid("", 13)])


#: a child whose inference is replaced (the real limits and protocol of onnx_infer_child around it)
FAKE_CHILD = textwrap.dedent("""
    import os, signal, sys
    sys.path.insert(0, {folder!r})
    import onnx_infer_child as child

    class Fake:
        InferenceError = RuntimeError

        @staticmethod
        def infer_shapes(model, check_type, strict, data_prop):
            {body}

    sys.exit(child.serve(Fake))
""")


@pytest.mark.parametrize("body, says", [
    ("os.kill(os.getpid(), signal.SIGSEGV)", r"onnx's shape inference crashed on the model \(signal SIGSEGV\)"),
    ("while True: pass", "did not finish in 1 s of processor time"),
    ("return bytearray(8 * 2 ** 30)", r"needed more than 16.0 MiB of memory"),
])
def test_a_child_that_crashes_or_passes_its_limits_is_a_message(tmp_path, monkeypatch, body, says):
    """A crash of onnx's inference took the editor down with its unsaved work; time and memory
    past the limits are each stopped and said."""
    script = tmp_path / "fake_child.py"
    script.write_text(FAKE_CHILD.format(folder=str(onnx_infer.CHILD_SCRIPT.parent), body=body))
    monkeypatch.setattr(onnx_infer, "CHILD_SCRIPT", script)
    monkeypatch.setattr(onnx_infer, "_helper", onnx_infer._Helper())
    monkeypatch.setattr(onnx_infer, "INFER_SECONDS", 1)
    monkeypatch.setattr(onnx_infer, "INFER_SECONDS_PER_MIB", 0)
    monkeypatch.setattr(onnx_infer, "INFER_ALLOWANCE_BYTES", 16 * MiB)
    monkeypatch.setattr(onnx_infer, "INFER_FACTOR", 0)
    with pytest.raises(ImportFailure, match=says):
        _import(_small_model())


def test_the_child_is_kept_for_the_next_model_and_without_one_inference_runs_here(monkeypatch):
    """Starting a child for each model cost every import some 80 ms; where none can start (a
    frozen build), inference runs in this process as before."""
    _import(_small_model())
    kept = onnx_infer._helper.proc
    assert kept is not None and kept.poll() is None
    _import(_small_model())
    assert onnx_infer._helper.proc is kept
    monkeypatch.setattr(onnx_infer, "_helper", onnx_infer._Helper())
    monkeypatch.setattr(sys, "executable", "")
    project, report = _import(_small_model())
    assert onnx_infer._helper.proc is None and list(report.outputs) == ["v3"]


def test_where_pipes_cannot_be_polled_inference_runs_here(monkeypatch):
    # the child's pipes are polled with selectors, which take no pipe on Windows
    monkeypatch.setattr(onnx_infer, "_helper", onnx_infer._Helper())
    monkeypatch.setattr(onnx_infer.os, "name", "nt")
    project, report = _import(_small_model())
    assert onnx_infer._helper.proc is None and list(report.outputs) == ["v3"]

