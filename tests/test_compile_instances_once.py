"""Compiling many instances of a composite (issue 18's row (g), benchmarks/composites.py): each
instance's copy of a block whose attrs name a dimension is checked once per content, its seed on
its own (compile/dimensions.py, checked_attrs), and the blocks fed by each instance's own Variable
are typed by look-up, their types interned (compile/infer.py, _interned). What must not change:
the program, compared with the one compiled the old way, and the problems each instance gets."""
from __future__ import annotations

import pytest

from blockflow.compile import dimensions, infer
from blockflow.compile.compiler import compile_project
from blockflow.composite import Composite, block_name
from blockflow.project import Project
from blockflow.spec import Attr, BlockSpec

from test_compile_linear import _same_program


def chain(seed=None) -> Composite:
    """x [n] -> tanh(x * w + w), w [n] a Variable (its shape the dimension n)."""
    comp = Composite("Chain", params=[Attr("init", "choice", "ones", choices=("ones", "glorot_uniform"))])
    p = comp.page
    p.add_node("Input", id="x", attrs={"name": "x", "dtype": "float32", "shape": ["n"]})
    w = {"shape": [{"$dim": "n"}], "initializer": {"$param": "init"}}
    if seed is not None:
        w["seed"] = seed
    p.add_node("Variable", id="w", attrs=w)
    p.add_node("Multiply", id="m")
    p.add_node("Add", id="a")
    p.add_node("Tanh", id="t")
    p.add_node("Output", id="y", attrs={"name": "y"})
    p.connect("x", "output", "m", "x")
    p.connect("w", "ref", "m", "y")
    p.connect("m", "z", "a", "x")
    p.connect("w", "ref", "a", "y")
    p.connect("a", "z", "t", "x")
    p.connect("t", "y", "y", "input")
    return comp


def instances(n, widths=(4,), seed=None, inits=("ones",)) -> Project:
    """``n`` Chain instances in a row, fed by Placeholders of ``widths`` in turn (each a chain of
    its own), their ``init`` taken from ``inits`` in turn."""
    p = Project()
    p.composites["Chain"] = chain(seed)
    pg = p.add_page("main")
    last = {}
    for k, w in enumerate(widths):
        pg.add_node("Placeholder", id=f"x{k}", attrs={"shape": [w]})
        last[k] = (f"x{k}", "output")
    for i in range(n):
        k = i % len(widths)
        pg.add_node(block_name("Chain"), id=f"c{i}", attrs={"init": inits[i % len(inits)]})
        pg.connect(*last[k], f"c{i}", "x")
        last[k] = (f"c{i}", "y")
    return p


def _the_old_way(monkeypatch):
    monkeypatch.setattr(dimensions, "attrs_key", lambda attrs: None)
    monkeypatch.setattr(infer.Inference, "_interned", lambda self, outs: outs)


@pytest.mark.parametrize("widths, seed, inits", [((4,), None, ("ones",)), ((3, 5), 7, ("ones", "glorot_uniform")),
                                                  ((2, 2, 6), 0, ("glorot_uniform",))])
def test_instances_compile_to_the_program_of_the_old_way(widths, seed, inits, monkeypatch):
    project = instances(12, widths, seed, inits)
    new = compile_project(project)
    assert new.ok, new.errors
    with monkeypatch.context() as m:
        _the_old_way(m)
        old = compile_project(project)
    _same_program(new, old)
    for name, value in old.variable_values.items():
        assert (new.variable_values[name] == value).all(), name
    # each instance's Variable has its own seed, so its own first value where the initializer draws
    drawn = [new.variable_values[f"c{i}/w"] for i in range(12) if inits[i % len(inits)] != "ones"]
    assert len({v.tobytes() for v in drawn}) == len(drawn)


def test_copies_are_checked_once_per_content_and_typed_by_look_up(monkeypatch):
    project = instances(40, widths=(3, 5))
    checked, inferred, missed = [], [], []
    real_validate, real_infer = BlockSpec.validate_attrs, infer.Inference._infer_checked
    real_miss = infer.Inference._plain_miss

    def counting_validate(spec, given):
        if spec.name == "Variable":
            checked.append(dict(given))
        return real_validate(spec, given)

    def counting_infer(self, nid, spec, args, attrs):
        inferred.append((nid, spec.name))
        return real_infer(self, nid, spec, args, attrs)

    def counting_miss(self, nid, spec, *args):
        missed.append(spec.name)
        return real_miss(self, nid, spec, *args)

    monkeypatch.setattr(BlockSpec, "validate_attrs", counting_validate)
    monkeypatch.setattr(infer.Inference, "_plain_miss", counting_miss)
    monkeypatch.setattr(infer.Inference, "_infer_checked", counting_infer)
    program = compile_project(project)
    assert program.ok, program.errors
    # two widths: the Variables' attrs less their seeds, of two contents, checked twice in all
    assert sorted(c["shape"] for c in checked) == [[3], [5]]
    by_block: dict = {}
    for nid, block in inferred:
        by_block.setdefault(block, []).append(nid)
    assert len(by_block["Variable"]) == 40          # each instance's own (its own attrs: its seed)
    # the blocks fed by them typed once per width, and looked up once per width, not per instance
    assert len(by_block.get("Multiply", [])) <= 2 and len(by_block.get("Add", [])) <= 2
    assert missed.count("Multiply") <= 2 and missed.count("Add") <= 2, missed
    assert len({program.step(f"c{i}/w").attrs["seed"] for i in range(40)}) == 40


def test_a_bad_seed_and_a_bad_shape_are_reported_on_each_instance():
    p = instances(3, widths=(4, 4, 4))   # each fed by a Placeholder of its own
    p.composites["Chain"].page.nodes["w"].attrs["seed"] = "one"   # not mixed per instance: no int
    program = compile_project(p)
    errors = [(d.node, d.message) for d in program.errors]
    for i in range(3):
        assert any(node == f"c{i}/w" and "seed" in message for node, message in errors), errors
    p = instances(3, widths=(4, 4, 4))   # each fed by a Placeholder of its own
    p.composites["Chain"].page.nodes["w"].attrs["shape"] = [{"$dim": "n"}, -1]
    program = compile_project(p)
    errors = [(d.node, d.message) for d in program.errors]
    assert {node for node, m in errors if "shape" in m} == {"c0/w", "c1/w", "c2/w"}, errors
