"""blockflow.present: what a block shows (nodeview), dtype classes (dtypes) and run summaries (values),
Qt-free."""
from __future__ import annotations

import numpy as np

from blockflow.compile.compiler import compile_page
from blockflow.present.dtypes import dtype_class
from blockflow.present.nodeview import format_inline, node_data, problems_by_node, program_changes, wire_class
from blockflow.present.values import BlockRun, heatmap_rgba, summarize
from blockflow.project import Project
from blockflow.registry import default_registry


def page_with_tanh():
    page = Project().add_page("main")
    page.add_node("Placeholder", id="x", attrs={"shape": [3]})
    page.add_node("Tanh", id="t")
    page.add_node("Sum", id="s")
    page.connect("x", "output", "t", "x")
    page.connect("t", "y", "s", "input")
    page.loss = "s"
    return page


def test_dtype_classes_of_names_numpy_dtypes_and_constraints():
    assert [dtype_class(n) for n in ("float32", "int64", "bool", "T", None)] == ["float", "int", "bool", "any", "any"]
    assert dtype_class(np.dtype("uint8")) == "int" and dtype_class(np.dtype("float16")) == "float"


def test_format_inline_is_short():
    assert format_inline(2) == "2" and format_inline(0.5) == "0.5"
    assert format_inline(np.array([1, 2, 3])) == "[1, 2, 3]"
    assert format_inline(np.zeros((5, 4), np.float32)) == "f32[5, 4]"


def test_node_data_before_and_after_a_compile():
    page, registry = page_with_tanh(), default_registry()
    inc = [e for e in page.edges if e.dst == "t"]
    out = [e for e in page.edges if e.src == "t"]
    plain = node_data(page, "t", registry, inc, out)
    assert [p.name for p in plain.inputs] == ["x"] and plain.inputs[0].fed
    assert [p.name for p in plain.outputs] == ["y"] and plain.outputs[0].cls == "any"
    assert not plain.is_loss and node_data(page, "s", registry).is_loss
    program = compile_page(page, registry)
    typed = node_data(page, "t", registry, inc, out, program)
    assert typed.outputs[0].cls == "float" and typed.inputs[0].cls == "float" and typed.errors == ()
    assert wire_class(program, inc[0]) == "float"


def test_node_data_shows_unknown_wired_ports_and_problems():
    page, registry = page_with_tanh(), default_registry()
    page.add_node("Add", id="a")                          # nothing fed: errors
    program = compile_page(page, registry)
    data = node_data(page, "a", registry, program=program)
    assert data.errors and data.errors == problems_by_node(program)["a"][0]
    page.connect("x", "output", "a", "bogus")             # a port the block does not declare
    shown = node_data(page, "a", registry, [e for e in page.edges if e.dst == "a"])
    assert shown.inputs[-1].name == "bogus" and shown.inputs[-1].label == "bogus ?"


def test_program_changes_name_the_blocks_and_wires_drawn_otherwise():
    page, registry = page_with_tanh(), default_registry()
    before = compile_page(page, registry)
    assert program_changes(before, compile_page(page, registry)) == (set(), set())
    page.nodes["x"].attrs["dtype"] = "int32"              # Tanh of an int: the wire's dtype changes
    nodes, edges = program_changes(before, compile_page(page, registry))
    assert "x" in nodes and any(e.src == "x" for e in edges)


def test_summaries_are_plain_data_a_matrix_as_colours():
    s = summarize(np.arange(40 * 50, dtype=np.float64).reshape(40, 50))
    assert s.kind == "matrix" and s.rgba.shape == (16, 16, 4) and s.rgba.dtype == np.uint8
    rgba, lo, hi = heatmap_rgba(np.array([[np.nan, 1.0], [2.0, 3.0]]))
    assert tuple(rgba[0, 0]) == (255, 0, 255, 255) and (lo, hi) == (1.0, 3.0)
    run = BlockRun({"output": s}, "boom", stale=True, badge="NaN")
    assert (run.error, run.stale, run.badge) == ("boom", True, "NaN") and run.summaries["output"] is s
