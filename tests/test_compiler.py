"""The compiler: diagnostics tied to nodes and ports, shape inference, schedule, reachability."""
from __future__ import annotations

import numpy as np
import pytest

from blockflow.compile.compiler import compile_project
from blockflow.errors import CompileError
from blockflow.project import Project

from diagrams import chain, softmax_project


def messages(program):
    return [str(d) for d in program.errors]


def test_clean_diagram_infers_every_wire():
    program = compile_project(softmax_project())
    assert program.ok, messages(program)
    types = {f"{e.src}>{e.dst}.{e.dst_port}": t.describe() for e, t in program.edge_types.items()}
    assert types["x>Max_1.input"] == "float32[5]"
    assert types["Max_1>StopGradient_1.input"] == "float32[]"
    assert types["Subtract_1>Softmax_1.logits"] == "float32[5]"
    assert types["Multiply_1>Sum_1.input"] == "float32[5]"
    assert program.output_type("Sum_1").shape == ()


def test_unknown_dims_propagate():
    p = chain(("x", "Placeholder", {"shape": [-1, 3]}, None),
              ("W", "Variable", {"shape": [3, 4]}, None),
              ("m", "MatMul", {}, {"a": "x", "b": "W"}),
              ("s", "Sum", {"keep_dims": True}, {"input": "m", "axis": np.array(1)}))
    program = compile_project(p)
    assert program.ok, messages(program)
    assert program.output_type("m").shape == (None, 4)
    assert program.output_type("s").shape == (None, 1)


def test_every_problem_is_reported_at_once_and_tied_to_node_and_port():
    p = chain(("x", "Placeholder", {"shape": [3]}, None),
              ("y", "Placeholder", {"shape": [4]}, None),
              ("bad_shape", "Add", {}, {"x": "x", "y": "y"}),
              ("missing", "Multiply", {}, {"x": "x"}),
              ("mystery", "NoSuchBlock", {}, None),
              ("bad_attr", "MatMul", {"transpose_a": "yes"}, {"a": "x", "b": "x"}))
    pg = p.pages[0]
    pg.add_node("Add", id="a1")
    pg.add_node("Identity", id="a2")
    pg.connect("a1", "z", "a2", "input")
    pg.connect("a2", "output", "a1", "x")
    pg.nodes["a1"].inputs["y"] = np.float32(1)
    pg.connect("x", "output", "a2", "nonexistent")
    pg.connect("x", "scope", "missing", "y")
    program = compile_project(p)
    assert not program.ok
    by_node = {}
    for d in program.errors:
        by_node.setdefault(d.node, []).append(d)
    assert "[3]" in by_node["bad_shape"][0].message and "[4]" in by_node["bad_shape"][0].message
    assert any(d.port == "y" and "not connected" in d.message for d in by_node["missing"])
    assert "unknown block 'NoSuchBlock'" in by_node["mystery"][0].message
    assert any("transpose_a" in d.message for d in by_node["bad_attr"])
    cyc = [d for d in program.errors if "cycle" in d.message]
    assert {d.node for d in cyc} == {"a1", "a2"}
    assert "a1 -> a2 -> a1" in cyc[0].message or "a2 -> a1 -> a2" in cyc[0].message
    assert any(d.port == "nonexistent" and "not an input of Identity" in d.message for d in by_node["a2"])
    assert any(d.port == "scope" and "scope port" in d.message for d in by_node["x"])
    with pytest.raises(CompileError) as info:
        program.raise_for_errors()
    assert "main/bad_shape" in str(info.value)


def test_dtype_mismatch_names_both_ports_and_dtypes():
    p = chain(("x", "Placeholder", {"shape": [3]}, None),
              ("i", "Placeholder", {"shape": [3], "dtype": "int32"}, None),
              ("add", "Add", {}, {"x": "x", "y": "i"}))
    (d,) = compile_project(p).errors
    assert (d.node, d.port) == ("add", "y")
    assert "int32" in d.message and "float32" in d.message and "'x'" in d.message


def test_float_only_input_rejects_int():
    p = chain(("i", "Placeholder", {"shape": [3], "dtype": "int32"}, None),
              ("e", "Exp", {}, {"x": "i"}))
    (d,) = compile_project(p).errors
    assert (d.node, d.port) == ("e", "x") and "must be float" in d.message


def test_inline_constant_adopts_the_wired_dtype():
    p = chain(("x", "Placeholder", {"shape": [2], "dtype": "float64"}, None),
              ("add", "Add", {}, {"x": "x", "y": 2}))
    program = compile_project(p)
    assert program.ok, messages(program)
    assert program.output_type("add").dtype == np.float64


def test_inline_fraction_cannot_become_int():
    p = chain(("i", "Placeholder", {"shape": [2], "dtype": "int32"}, None),
              ("add", "Add", {}, {"x": "i", "y": 2.5}))
    (d,) = compile_project(p).errors
    assert d.port == "y" and "fraction" in d.message


def test_static_input_must_be_known():
    p = chain(("x", "Placeholder", {"shape": [2, 3]}, None),
              ("ax", "Placeholder", {"shape": [], "dtype": "int32"}, None),
              ("s", "Sum", {}, {"input": "x", "axis": "ax"}))
    (d,) = compile_project(p).errors
    assert (d.node, d.port) == ("s", "axis") and "Const" in d.message
    ok = chain(("x", "Placeholder", {"shape": [2, 3]}, None),
               ("ax", "Const", {"value": np.array(1), "dtype": "int32"}, None),
               ("s", "Sum", {}, {"input": "x", "axis": "ax"}))
    program = compile_project(ok)
    assert program.ok and program.output_type("s").shape == (2,)


def test_two_wires_into_one_input():
    p = chain(("x", "Placeholder", {"shape": [2]}, None),
              ("y", "Placeholder", {"shape": [2]}, None),
              ("n", "Negate", {}, {"x": "x"}))
    p.pages[0].connect("y", "output", "n", "x")
    (d,) = compile_project(p).errors
    assert (d.node, d.port) == ("n", "x") and "two wires" in d.message


def test_variadic_inputs_fill_in_order():
    p = chain(("x", "Placeholder", {"shape": [2]}, None),
              ("n", "AddN", {}, {"inputs[0]": "x", "inputs[2]": "x"}))
    (d,) = compile_project(p).errors
    assert d.port == "inputs[1]"
    good = chain(("x", "Placeholder", {"shape": [2]}, None),
                 ("n", "AddN", {}, {"inputs[0]": "x", "inputs[1]": "x", "inputs[2]": [1.0, 2.0]}))
    program = compile_project(good)
    assert program.ok, messages(program)


def test_variable_value_must_match_its_declaration():
    p = chain(("v", "Variable", {"shape": [2]}, None))
    p.pages[0].nodes["v"].state["value"] = np.zeros(3, np.float32)
    (d,) = compile_project(p).errors
    assert d.node == "v" and "float32[3]" in d.message and "float32[2]" in d.message


def test_schedule_is_deterministic_and_independent_of_wire_order():
    a = softmax_project()
    b = softmax_project()
    b.pages[0].edges.reverse()
    sa = [s.node for s in compile_project(a).steps]
    sb = [s.node for s in compile_project(b).steps]
    assert sa == [s.node for s in compile_project(a).steps]
    pos = {n: i for i, n in enumerate(sb)}
    for e in b.pages[0].edges:
        assert pos[e.src] < pos[e.dst]
    assert set(sa) == set(sb)


def test_gradient_reachability_of_the_stable_softmax():
    program = compile_project(softmax_project())
    paths = program.gradient_paths()  # the page's loss
    flows = {(e.src, e.dst) for e in paths.flows}
    assert ("x", "Subtract_1") in flows and ("Softmax_1", "Multiply_1") in flows
    cut = {(e.src, e.dst): by for e, by in paths.cut.items()}
    assert cut[("Max_1", "StopGradient_1")] == ("StopGradient_1",)
    assert cut[("x", "Max_1")] == ("StopGradient_1",)
    assert ("StopGradient_1", "Subtract_1") in flows  # gradient arrives at the cut and stops
    assert paths.sources == ("x",)
    edge = next(e for e in paths.cut if e.src == "x")
    assert "StopGradient_1 (StopGradient)" in paths.reason(edge)
    # Without the StopGradient, everything flows.
    plain = compile_project(softmax_project(stable=False)).gradient_paths()
    assert not plain.cut and plain.sources == ("x",)


def test_reachability_marks_unreached_and_non_differentiable_inputs():
    p = chain(("x", "Placeholder", {"shape": [4]}, None),
              ("shape", "Const", {"value": np.array([2, 2]), "dtype": "int32"}, None),
              ("r", "Reshape", {}, {"tensor": "x", "shape": "shape"}),
              ("loss", "Sum", {}, {"input": "r"}),
              ("other", "Exp", {}, {"x": "x"}))
    paths = compile_project(p).gradient_paths("loss")
    status = {(e.src, e.dst): e for e in p.pages[0].edges}
    assert status[("x", "r")] in paths.flows
    assert paths.cut[status[("shape", "r")]] == ("r",)
    assert status[("x", "other")] in paths.unreached
    assert "does not lead" in paths.reason(status[("x", "other")])


def test_wrt_limits_what_is_wanted():
    p = chain(("x", "Placeholder", {"shape": [2, 3]}, None),
              ("W", "Variable", {"shape": [3, 2]}, None),
              ("m", "MatMul", {}, {"a": "x", "b": "W"}),
              ("loss", "Sum", {}, {"input": "m"}))
    program = compile_project(p)
    only_w = program.gradient_paths("loss", wrt=["W"])
    assert {e.src for e in only_w.flows} == {"W", "m"}
    everything = program.gradient_paths("loss")
    assert {e.src for e in everything.flows} == {"x", "W", "m"}


def test_empty_project_page():
    project = Project()
    project.add_page("empty")
    program = compile_project(project)
    assert program.ok and program.steps == ()


def test_problems_downstream_of_a_failed_block_are_still_reported():
    p = chain(("p", "Placeholder", {"shape": [3]}, None),
              ("bad", "Square", {"oops": 1}, {"x": "p"}),
              ("a", "Add", {}, {"x": "bad"}))
    found = {(d.node, d.port) for d in compile_project(p).errors}
    assert ("bad", None) in found and ("a", "y") in found


def test_a_long_cycle_is_named_briefly():
    p = chain(*[(f"n{i}", "Identity", {}, None) for i in range(50)])
    for i in range(50):
        p.pages[0].connect(f"n{(i + 1) % 50}", "output", f"n{i}", "input")
    errors = compile_project(p).errors
    assert len(errors) == 50 and all(len(d.message) < 200 for d in errors)
    assert "(50 blocks)" in errors[0].message


def test_equal_projects_get_the_same_schedule():
    a = chain(("x", "Placeholder", {"shape": [2]}, None), ("z_b", "Square", {}, {"x": "x"}),
              ("a_c", "Square", {}, {"x": "x"}), ("m_d", "Square", {}, {"x": "x"}))
    b = chain(("x", "Placeholder", {"shape": [2]}, None), ("z_b", "Square", {}, {"x": "x"}),
              ("a_c", "Square", {}, {"x": "x"}), ("m_d", "Square", {}, {"x": "x"}))
    b.pages[0].edges.reverse()
    assert a == b
    assert [s.node for s in compile_project(a).steps] == [s.node for s in compile_project(b).steps]


def test_cut_reasons_say_why():
    p = chain(("x", "Placeholder", {"shape": [4]}, None),
              ("shape", "Const", {"value": np.array([2, 2]), "dtype": "int32"}, None),
              ("r", "Reshape", {}, {"tensor": "x", "shape": "shape"}),
              ("loss", "Sum", {}, {"input": "r"}))
    paths = compile_project(p).gradient_paths("loss")
    edge = next(e for e in paths.cut)
    assert "value known before running" in paths.reason(edge)


def test_inline_labels_take_the_wired_features_dtype():
    p = chain(("f", "Placeholder", {"shape": [1, 3]}, None),
              ("ce", "SoftmaxCrossEntropyWithLogits", {}, {"features": "f", "labels": [[0.0, 1.0, 0.0]]}))
    program = compile_project(p)
    assert program.ok, messages(program)
    p = chain(("n", "AddN", {}, {"inputs[0]": np.array(1), "inputs[1]": np.array(2.5)}))
    program = compile_project(p)
    assert program.ok and program.output_type("n").dtype == np.float64


def test_a_tensor_too_big_to_allocate_is_refused_at_compile_time_before_anything_is_allocated():
    import tracemalloc

    from diagrams import chain
    from memory_tracing import memory_traced

    from blockflow.spec import MAX_TENSOR_BYTES

    project = chain(("v", "Variable", {"shape": [100_000, 100_000]}, None),
                    ("z", "Fill", {}, {"dims": np.array([10 ** 6, 10 ** 6]), "value": np.float32(1)}),
                    ("ok", "Variable", {"shape": [10, 10]}, None))
    with memory_traced():
        program = compile_project(project)
        _, peak = tracemalloc.get_traced_memory()
    errors = {d.node: str(d) for d in program.errors}
    assert set(errors) == {"v", "z"}
    assert "would be float32[100000,100000] (37.3 GiB); the limit for one tensor is 4 GiB" in errors["v"]
    assert "GiB" in errors["z"] and peak < 50 * 1024 * 1024
    assert MAX_TENSOR_BYTES == 4 * 1024 ** 3


def test_program_answers_named_questions_about_its_nodes_and_wires():
    project = softmax_project()
    program = compile_project(project)
    assert program.step("Max_1").node == "Max_1" and program.step("nope") is None
    assert program.spec_of("StopGradient_1").name == "StopGradient" and program.spec_of("nope") is None
    assert program.output_ports("Softmax_1") == ["softmax"] and program.output_ports("nope") == []
    assert program.port_type("x", "output").shape == (5,) and program.port_type("x", "nope") is None
    wires = list(program.typed_wires())
    assert wires and all(program.wire_type(e) is not None for e in wires)
    assert {(e.src, e.src_port) for e in wires} <= set(program.typed_ports())
    loss = program.target_slot()
    assert (loss.node, loss.type.shape) == ("Sum_1", ())
    assert program.target_text() == f"Sum_1:{loss.port}" and program.target_text("x") == "x:output"
    assert program.slot(program.resolve_target("x")).node == "x"
    assert not program.reads_datasets


# --------------------------------------------------------------------------------------------
# The compile package's shape: what a Program answers, and who may read its tables


def test_step_flat_input_names_the_slot_feeding_each_input_port():
    p = chain(("x", "Placeholder", {"shape": [2]}, None),
              ("y", "Placeholder", {"shape": [2]}, None),
              ("n", "AddN", {}, {"inputs[0]": "x", "inputs[1]": "y", "inputs[2]": [1.0, 2.0]}))
    program = compile_project(p)
    assert program.ok, messages(program)
    step = program.step("n")
    fed = [step.flat_input(j) for j in range(len(step.in_edges))]
    assert fed[:2] == [program.slot_of("x"), program.slot_of("y")]
    const = program.slot(fed[2])
    assert const.const and const.node == "n" and const.port == "inputs[2]"


def test_program_cache_keeps_one_dict_per_kind_for_the_programs_life():
    program = compile_project(softmax_project())
    plans = program.cache("plans")
    plans["k"] = 1
    assert program.cache("plans") is plans and program.cache("other") == {}
    assert compile_project(softmax_project()).cache("plans") == {}


def test_gradient_paths_are_computed_once_per_question():
    program = compile_project(softmax_project())
    assert program.gradient_paths() is program.gradient_paths(None)
    assert program.gradient_paths(wrt=["x"]) is not program.gradient_paths()


def test_gradpaths_reads_a_program_without_importing_program_py():
    # program.py builds GradientPaths: an import back would make the two modules a cycle.
    import ast
    from pathlib import Path

    import blockflow.compile.gradpaths as gradpaths

    tree = ast.parse(Path(gradpaths.__file__).read_text(encoding="utf-8"))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {a.name for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names}
    assert not any(m and m.startswith("blockflow.compile") for m in imported), imported


def test_nothing_outside_compile_reads_the_compilers_lookup_tables():
    # Ask, don't index: callers use Program.step(), slot(), port_type(), wire_type(),
    # typed_wires()...; only run/'s code generator walks the slots and steps tuples itself.
    import re
    from pathlib import Path

    import blockflow

    root = Path(blockflow.__file__).parent
    pattern = re.compile(r"\.(step_of|port_slots|edge_types)\b|\bprogram\.slots\[")
    found = [f"{path.relative_to(root)}:{n}: {line.strip()}"
             for path in sorted(root.rglob("*.py")) if path.parent.name != "compile"
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if pattern.search(line)]
    assert not found, "\n".join(found)


_CYCLES_SCRIPT = """
import sys
sys.path.insert(0, sys.argv[1])
from diagrams import chain
from blockflow.compile.compiler import compile_project
nodes = [(f"n{i}", "Add", {}, None) for i in range(12)] + [("tail", "Identity", {}, None)]
# more blocks outside the cycles than in them: networkx's views then iterate the members' set
rest = [(f"r{i}", "Identity", {}, {"input": f"r{i - 1}" if i else "x"}) for i in range(40)]
p = chain(("x", "Placeholder", {"shape": [2]}, None), *nodes, *rest)
pg = p.pages[0]
for i in range(12):   # a ring with chords: several cycles through every member
    pg.connect(f"n{(i + 1) % 12}", "z", f"n{i}", "x")
    pg.connect(f"n{(i + 5) % 12}" if i % 3 else "x", "z" if i % 3 else "output", f"n{i}", "y")
pg.connect("n3", "z", "tail", "input")
program = compile_project(p)
print([str(d) for d in program.errors])
print([s.node for s in program.steps])
"""


def test_cycle_messages_and_the_schedule_do_not_depend_on_the_hash_seed(tmp_path):
    """The cycle a message names, and the order of the rest, are the same in every process
    (networkx's subgraph views iterate small node sets in hash order)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "cycles.py"
    script.write_text(_CYCLES_SCRIPT)
    outs = set()
    for seed in ("0", "1", "2", "3", "17", "123"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        got = subprocess.run([sys.executable, str(script), str(Path(__file__).parent)], env=env,
                             capture_output=True, text=True, timeout=120)
        assert got.returncode == 0, got.stderr
        outs.add(got.stdout)
    assert len(outs) == 1, outs
    assert "is part of a cycle" in outs.pop()
