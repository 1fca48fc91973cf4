"""Flattening many instances: what is worked out once per composite stays right for each instance
(benchmarks/composites.py times it; these check what the speed-up must not change)."""
from __future__ import annotations

import numpy as np

from blockflow.compile.compiler import compile_project
from blockflow.compile.flatten import flatten
from blockflow.composite import Composite, block_name
from blockflow.registry import default_registry
from blockflow.project import Edge
from blockflow.spec import Attr

from composite_kit import dense, mlp_project


class CountingRegistry:
    """The default registry, counting the lookups of each block name."""

    def __init__(self):
        self.inner = default_registry()
        self.asked: dict[str, int] = {}

    def get(self, name):
        self.asked[name] = self.asked.get(name, 0) + 1
        return self.inner.get(name)


def _many(n):
    project = mlp_project()
    page = project.page()
    for i in range(n):
        page.add_node(block_name("Dense"), id=f"e{i}", attrs={"units": 2 + i % 3})
        page.connect("X", "output", f"e{i}", "x")
    return project


def test_a_composite_is_read_once_however_many_instances_use_it():
    project = _many(50)
    registry = CountingRegistry()
    flat, h = flatten(project.page(), project.composites, registry)
    assert len(h.instances) == 52 and not h.problems
    # one look at each block of the Dense diagram (and of the page), not one per instance
    assert registry.asked["MatMul"] == 1 and registry.asked["Variable"] == 2
    assert flat.nodes["e7/W"].attrs["shape"][1] == 2 + 7 % 3


def test_instances_expand_in_drawn_order_with_their_own_seeds_and_state():
    project = _many(3)
    page = project.page()
    page.nodes["e1"].state = {"W:value": np.ones((3, 3), "float32"), "no colon here": 1, "b:value:x": 2}
    flat, _ = flatten(page, project.composites, default_registry())
    ids = list(flat.nodes)
    # each instance's blocks sit where the instance is drawn, in its diagram's order
    inner = list(project.composites["Dense"].page.nodes)
    start = ids.index("e0/" + inner[0])
    assert ids[start:start + len(inner)] == [f"e0/{n}" for n in inner]
    assert ids.index("e0/y") < ids.index("e1/x") < ids.index("e2/x")
    seeds = {flat.nodes[f"e{i}/W"].attrs["seed"] for i in range(3)}
    assert len(seeds) == 3
    assert set(flat.nodes["e1/W"].state) == {"value"} and flat.nodes["e1/b"].state == {"value:x": 2}
    assert flat.nodes["e0/W"].state == {} and flat.nodes["e1/W"].state is not flat.nodes["e2/W"].state


def test_a_composite_with_bad_ports_is_refused_on_each_of_its_instances():
    project = _many(2)
    project.composites["Dense"].page.nodes["y"].attrs["name"] = "x"
    errors = [str(d) for d in compile_project(project).errors]
    for inst in ("d1", "d2", "e0", "e1"):
        assert any(f"main/{inst}:" in e and "two ports named 'x'" in e for e in errors), (inst, errors)


def test_nested_instances_share_one_reading_of_their_definition_and_keep_their_paths():
    project = mlp_project()
    outer = Composite("Two", params=[Attr("units", "int", 3)])
    p = outer.page
    p.add_node("Input", id="x", attrs={"name": "x", "shape": ["batch", "f"]})
    for k in ("a", "b"):
        p.add_node(block_name("Dense"), id=k, attrs={"units": {"$param": "units"}})
    p.add_node("Output", id="y", attrs={"name": "y"})
    p.connect("x", "output", "a", "x")
    p.connect("a", "y", "b", "x")
    p.connect("b", "y", "y", "input")
    project.composites["Two"] = outer
    page = project.page()
    for i in range(3):
        page.add_node(block_name("Two"), id=f"t{i}", attrs={"units": 4},
                      state={"b/W:value": np.full((4, 4), i, "float32")})
        page.connect("X", "output", f"t{i}", "x")
    program = compile_project(project)
    assert program.ok, [str(d) for d in program.errors]
    assert program.flat_wire("t2/a", project.composites["Dense"].page.edges[0]).dst == "t2/a/MatMul_1"
    for i in range(3):
        np.testing.assert_array_equal(program.variable_values[f"t{i}/b/W"], np.full((4, 4), i, "float32"))
    assert dense().page.nodes.keys() == project.composites["Dense"].page.nodes.keys()


def test_every_wire_drawn_inside_an_instance_maps_to_its_flat_wire_without_one_entry_each():
    project = mlp_project(share=True)
    program = compile_project(project)
    assert program.ok, [str(d) for d in program.errors]
    inner = project.composites["Dense"].page.edges
    for level in ("d1", "d1b", "d2"):
        for e in inner:
            fe = program.flat_wire(level, e)
            # a sharing instance's wires leave the Variables of the instance it shares
            owner = "d1" if level == "d1b" and e.src in ("W", "b") else level
            assert fe.src == f"{owner}/{e.src}" and fe.dst == f"{level}/{e.dst}", (level, e, fe)
            assert program.wire_type(fe) is not None, fe    # a wire the program typed
    # the map keeps wires touching an instance and wires leaving Variables, not the others
    kept = {(lvl, e) for lvl, e in program.hierarchy.wires if lvl}
    assert ("d2", Edge("MatMul_1", "product", "BiasAdd_1", "value")) not in kept
    assert ("d1b", Edge("W", "ref", "MatMul_1", "b")) in kept


def _tanh_twice() -> Composite:
    comp = Composite("T2")
    p = comp.page
    p.add_node("Input", id="x", attrs={"name": "x", "dtype": "any"})
    p.add_node("Tanh", id="t1")
    p.add_node("MatMul", id="mm")
    p.add_node("Output", id="y", attrs={"name": "y"})
    p.connect("x", "output", "t1", "x")
    p.connect("t1", "y", "mm", "a")
    p.connect("t1", "y", "mm", "b")
    p.connect("mm", "product", "y", "input")
    return comp


def test_instances_reuse_types_only_when_their_inputs_are_typed_alike():
    """The compiler types a block of an instance by a look-up when an instance before it had the
    same inputs: instances fed other dtypes or shapes get their own types, and a failure is
    reported on every instance, not only the first."""
    from blockflow.project import Project

    project = Project()
    project.composites["T2"] = _tanh_twice()
    page = project.add_page("main")
    shapes = {"a": ([3, 3], "float32"), "b": ([4, 4], "float64"), "c": ([3, 3], "float32"),
              "bad1": ([5], "float32"), "bad2": ([5], "float32")}
    for name, (shape, dtype) in shapes.items():
        page.add_node("Placeholder", id=f"p_{name}", attrs={"shape": shape, "dtype": dtype})
        page.add_node(block_name("T2"), id=name)
        page.connect(f"p_{name}", "output", name, "x")
    program = compile_project(project)
    assert program.port_type("a", "y").shape == (3, 3) and program.port_type("a", "y").dtype == np.float32
    assert program.port_type("c", "y").shape == (3, 3)
    assert program.port_type("b", "y").shape == (4, 4) and program.port_type("b", "y").dtype == np.float64
    failed = sorted(d.node for d in program.errors)
    assert "bad1/mm" in failed and "bad2/mm" in failed     # MatMul of rank-1 inputs, on each
