"""The PyTorch module's structure (docs/export.md): composites as sub-modules (one class per
body, a shared instance as the same module), the initial values beside the file, forward and
gradients equal to blockflow's through composites, Gradients as autograd.grad, and hostile names
that reach the code only as identifiers and escaped literals."""
from __future__ import annotations

import ast

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from blockflow.compile.compiler import compile_project  # noqa: E402
from blockflow.composite import Composite, block_name  # noqa: E402
from blockflow.export.files import write_torch_files  # noqa: E402
from blockflow.export.torch_module import ExportError, export_torch  # noqa: E402
from blockflow.project import Project  # noqa: E402
from blockflow.run.runtime import run  # noqa: E402
from blockflow.spec import Attr  # noqa: E402

from export_kit import load_export, load_module  # noqa: E402


def lin(name="Lin") -> Composite:
    """x [batch, features] -> tanh(x @ W + b): a layer drawn from blocks the core lowers."""
    comp = Composite(name, doc="tanh(x @ W + b)", params=[Attr("units", "int", min=1)])
    p = comp.page
    p.add_node("Input", id="x", attrs={"name": "x", "dtype": "float64", "shape": ["batch", "features"]})
    p.add_node("Variable", id="W", attrs={"shape": [{"$dim": "features"}, {"$param": "units"}],
                                           "dtype": "float64", "initializer": "glorot_uniform", "seed": 1})
    p.add_node("Variable", id="b", attrs={"shape": [{"$param": "units"}], "dtype": "float64",
                                           "initializer": "random_normal", "stddev": 0.1})
    p.add_node("MatMul", id="MatMul_1")
    p.add_node("Add", id="Add_1")
    p.add_node("Tanh", id="Tanh_1")
    p.add_node("Output", id="y", attrs={"name": "y"})
    p.connect("x", "output", "MatMul_1", "a")
    p.connect("W", "ref", "MatMul_1", "b")
    p.connect("MatMul_1", "product", "Add_1", "x")
    p.connect("b", "ref", "Add_1", "y")
    p.connect("Add_1", "z", "Tanh_1", "x")
    p.connect("Tanh_1", "y", "y", "input")
    return comp


def two_layers(share=False, nested=False) -> Project:
    project = Project()
    project.composites["Lin"] = lin()
    if nested:
        outer = Composite("Block", params=[Attr("units", "int", 4)])
        op = outer.page
        op.add_node("Input", id="x", attrs={"name": "x", "dtype": "float64", "shape": ["batch", "f"]})
        op.add_node(block_name("Lin"), id="inner", attrs={"units": {"$param": "units"}})
        op.add_node("Output", id="y", attrs={"name": "y"})
        op.connect("x", "output", "inner", "x")
        op.connect("inner", "y", "y", "input")
        project.composites["Block"] = outer
    page = project.add_page("main")
    page.add_node("Placeholder", id="X", attrs={"dtype": "float64", "shape": [-1, 3]})
    layer = block_name("Block" if nested else "Lin")
    page.add_node(layer, id="d1", attrs={"units": 4})
    page.add_node(layer, id="d2", attrs={"units": 2})
    page.add_node("Sum", id="loss")
    page.connect("X", "output", "d1", "x")
    page.connect("d1", "y", "d2", "x")
    last = "d2"
    if share:
        page.add_node(layer, id="d1b", attrs={"units": 4, "share_variables_with": "d1"})
        page.add_node(layer, id="d2b", attrs={"units": 2})
        page.add_node("Add", id="both")
        page.connect("d1", "y", "d1b", "x") if False else page.connect("X", "output", "d1b", "x")
        page.connect("d1b", "y", "d2b", "x")
        page.connect("d2", "y", "both", "x")
        page.connect("d2b", "y", "both", "y")
        last = "both"
    page.connect(last, "z" if share else "y", "loss", "input")
    page.loss = "loss"
    page.feeds["X"] = np.random.default_rng(0).standard_normal((5, 3))
    return project


def _torch_run(project, tmp_path):
    export = export_torch(project)
    written = write_torch_files(export, tmp_path / "model.py")
    module = load_module((tmp_path / "model.py").read_text(), tmp_path)
    model = module.Model()     # the values beside the file
    x = torch.from_numpy(project.pages[0].feeds["X"]).requires_grad_(True)
    loss = model(x)
    grads = torch.autograd.grad(loss, [x] + list(model.parameters()))
    return export, written, model, loss, grads, module


@pytest.mark.parametrize("share, nested", [(False, False), (True, False), (False, True), (True, True)],
                         ids=["plain", "shared", "nested", "nested-shared"])
def test_composites_become_sub_modules_with_blockflows_values_and_gradients(share, nested, tmp_path):
    project = two_layers(share, nested)
    export, written, model, loss, grads, module = _torch_run(project, tmp_path)
    assert [p.name for p in written] == ["model.py", "model.pt"]
    tree = ast.parse(export.source)
    classes = [n.name for n in tree.body if isinstance(n, ast.ClassDef)]
    assert "Model" in classes and "Lin" in classes
    # units 4 and units 2 are two bodies of Lin: two classes, one per parameter value
    assert len([c for c in classes if c.startswith("Lin")]) == 2
    if share:
        assert model.d1b is model.d1
        assert "self.d1b = self.d1  # shares its Variables" in export.source
    ours = run(compile_project(project), target="loss", record=True)
    np.testing.assert_allclose(loss.item(), ours.value("loss"), rtol=1e-12)
    np.testing.assert_allclose(grads[0].numpy(), ours.variable_grads["X"], rtol=1e-10, atol=1e-12)
    # every parameter's gradient equals blockflow's gradient of the Variable it holds
    names = [n for n, _ in model.named_parameters()]
    for name, g in zip(names, grads[1:]):
        flat = export.variables[name]
        np.testing.assert_allclose(g.numpy(), ours.variable_grads[flat], rtol=1e-10, atol=1e-12, err_msg=name)
    assert len(names) == (4 if not share else 6)


def test_initial_none_draws_with_torch_and_the_seed(tmp_path):
    project = two_layers()
    export = export_torch(project)
    module = load_export(export, tmp_path)
    a, b = module.Model(initial=None, seed=5), module.Model(initial=None, seed=5)
    c = module.Model(initial=None, seed=6)
    for (name, pa), pb, pc in zip(a.named_parameters(), b.parameters(), c.parameters()):
        assert torch.equal(pa, pb), name
        if name.endswith("W"):
            assert not torch.equal(pa, pc) and pa.abs().max() <= np.sqrt(6 / (pa.shape[0] + pa.shape[1]))


def test_gradients_block_is_autograd_grad_and_its_outputs_are_cut(tmp_path):
    """d/dx of sum(x * stop_gradient(x) + x*x) = stop_gradient(x) + 2x, by the Gradients block as
    torch.autograd.grad; as in blockflow, nothing differentiates through its outputs."""
    from diagrams import chain

    project = chain(("x", "Placeholder", {"shape": [3], "dtype": "float64"}, None),
                    ("sg", "StopGradient", {}, {"input": "x"}),
                    ("m", "Multiply", {}, {"x": "x", "y": "sg"}),
                    ("sq", "Square", {}, {"x": "x"}),
                    ("a", "Add", {}, {"x": "m", "y": "sq"}),
                    ("s", "Sum", {}, {"input": "a"}),
                    ("g", "Gradients", {}, {}),
                    ("gs", "Sum", {}, {}),
                    feeds={"x": np.array([1.0, -2.0, 0.5])})
    page = project.pages[0]
    page.connect("s", "output", "g", "ys[0]")
    page.connect("x", "output", "g", "xs[0]")
    page.connect("g", _first_output_port(project, "g"), "gs", "input")
    page.loss = "gs"
    program = compile_project(project)
    assert program.ok, program.errors
    export = export_torch(project, program=program)
    assert "torch.autograd.grad(" in export.source and "create_graph" not in export.source
    module = load_export(export, tmp_path)
    ours = run(program, target="gs", record=True)
    for requires_grad in (True, False):   # a caller's plain tensor is made differentiable inside
        x = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64, requires_grad=requires_grad)
        out = module.Model()(x)
        np.testing.assert_allclose(out.item(), ours.value("gs"))   # sum(3x)
        np.testing.assert_allclose(out.item(), 3 * (1.0 - 2.0 + 0.5))
        assert not out.requires_grad                 # the Gradients block's outputs are cut
    assert "x" not in ours.variable_grads


def _first_output_port(project, node):
    program = compile_project(project)
    return program.output_ports(node)[0] if program.output_ports(node) else "output_0"


HOSTILE_TEXT = [
    'x"""; import os; os.system("echo pwned") #',
    "a\nimport os\nos._exit(3)",
    "\u2028__import__('os')._exit(4)\r\\",
    "ünïcødé ' \" \\N{BULLET}", "a" * 300,
]
#: ids a project may hold (letters, digits, _ . -) that are not Python identifiers or are taken
HOSTILE_IDS = ["class", "self", "torch", "nn", "__init__", "_", "a.b-c", "Model", "math", "F"]


@pytest.mark.parametrize("text", HOSTILE_TEXT, ids=range(len(HOSTILE_TEXT)))
def test_hostile_texts_reach_the_code_only_as_escaped_literals(text, tmp_path):
    project = two_layers(nested=True)
    page = project.pages[0]
    page.name = text.replace("/", "|")
    page.text = text
    page.nodes["d1"].label = text
    project.composites["Lin"].doc = text
    project.composites["Block"].doc = text
    export = export_torch(project, page=page.name)
    _runs_nothing_on_import(export.source)
    module = load_export(export, tmp_path)
    model = module.Model(initial=None)
    assert torch.isfinite(model(torch.from_numpy(page.feeds["X"])))


@pytest.mark.parametrize("nid", HOSTILE_IDS)
def test_ids_that_are_not_identifiers_become_identifiers(nid, tmp_path):
    project = two_layers()
    page = project.pages[0]
    page.rename_node("X", nid)
    page.rename_node("d1", nid + "_2" if nid != "_" else "d_")
    export = export_torch(project)
    _runs_nothing_on_import(export.source)
    module = load_export(export, tmp_path)
    assert module.Model.INPUTS == (nid,)
    model = module.Model(initial=None)
    assert torch.isfinite(model(torch.from_numpy(page.feeds[nid])))


def _runs_nothing_on_import(source: str) -> None:
    """Module level holds imports, definitions and the docstring only; no name the hostile
    texts try to reach is ever used as code."""
    tree = ast.parse(source)
    for node in tree.body:
        assert isinstance(node, (ast.Import, ast.ImportFrom, ast.ClassDef, ast.FunctionDef, ast.Expr)), ast.dump(node)[:200]
        if isinstance(node, ast.Expr):
            assert isinstance(node.value, ast.Constant)
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    assert not {"os", "__import__", "pwned", "exec", "eval"} & names
    imports = {a.name for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
    assert imports <= {"math", "Path", "torch", "nn"}, imports


def test_names_boundary_refuses_what_it_cannot_write():
    from blockflow.export.names import comment_text, identifier, literal

    for text in HOSTILE_TEXT + HOSTILE_IDS:
        name = identifier(text)
        assert name.isidentifier() and name.isascii() and len(name) <= 61
        assert ast.literal_eval(literal(text)) == text
        shown = comment_text(text)
        assert "\n" not in shown and '"' not in shown and "\\" not in shown and shown.isascii()
    with pytest.raises(TypeError):
        literal(object())


def test_scoped_names_are_identifiers_joined_by_slashes():
    """ONNX node and value names keep an instance's scopes; each scope is still an identifier,
    whatever the text (a hostile id, an empty scope, a scope that is a keyword)."""
    from blockflow.export.names import Names, Scopes, scoped_identifier

    for text in HOSTILE_TEXT + HOSTILE_IDS + ["a//b", "/lead", "trail/", "if/class/x.y", "d1/MatMul_1"]:
        name = scoped_identifier(text)
        assert name.isascii() and all(part.isidentifier() for part in name.split("/")), (text, name)
    assert scoped_identifier("d1/MatMul_1") == "d1/MatMul_1"
    assert scoped_identifier("if/x.y") == "if_/x_y"
    names = Names(make=scoped_identifier)
    assert [names.fresh("d1/x.y"), names.fresh("d1/x-y"), names.fresh("d1_x_y")] == ["d1/x_y", "d1/x_y_2", "d1_x_y"]
    # the export's scopes: one identifier a scope text, so instances d-1 and d.1 stay apart
    names = Names(make=Scopes())
    got = [names.fresh(t) for t in ("d-1/a", "d.1/a", "d-1/b", "d_1/a", "d-1/in/a", "d.1/in/a", "d_1")]
    assert got == ["d_1/a", "d_1_2/a", "d_1/b", "d_1_3/a", "d_1/in_/a", "d_1_2/in_/a", "d_1"]


def test_a_page_that_does_not_compile_is_refused_with_its_errors():
    from diagrams import chain

    project = chain(("x", "Placeholder", {"shape": [3]}, None), ("m", "MatMul", {}, {"a": "x", "b": "x"}))
    with pytest.raises(ExportError) as err:
        export_torch(project, outputs=["m"])
    assert "does not compile" in str(err.value) and err.value.problems


def test_large_constants_come_from_the_values_file_even_when_variables_are_drawn(tmp_path):
    from diagrams import chain

    table = np.arange(100.0).reshape(10, 10)
    project = chain(("x", "Placeholder", {"shape": [10], "dtype": "float64"}, None),
                    ("c", "Const", {"value": table.tolist(), "dtype": "float64"}, None),
                    ("m", "MatMul", {}, {}),
                    feeds={"x": np.ones(10)})
    page = project.pages[0]
    page.add_node("ExpandDims", id="row", inputs={"axis": np.array(0)})
    page.connect("x", "output", "row", "input")
    page.connect("row", "output", "m", "a")
    page.connect("c", "output", "m", "b")
    export = export_torch(project, outputs=["m"])
    write_torch_files(export, tmp_path / "model.py")
    module = load_module((tmp_path / "model.py").read_text(), tmp_path)
    for model in (module.Model(), module.Model(initial=None)):
        out = model(torch.ones(10, dtype=torch.float64))
        np.testing.assert_array_equal(out.numpy(), np.ones((1, 10)) @ table)
