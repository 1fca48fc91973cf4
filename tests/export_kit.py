"""Shared pieces of the export tests: load a generated module, build a one-block page from a
block test case (tests/cases_*.py) and compare the exported PyTorch code with blockflow's runtime,
forward and gradients, in float64."""
from __future__ import annotations

import importlib.util
import itertools
import sys

import numpy as np

from blockflow.compile.compiler import compile_project
from blockflow.project import Project
from blockflow.registry import default_registry
from blockflow.run.runtime import run

_counter = itertools.count()


def load_module(source: str, folder, name: str = "model"):
    """Write ``source`` to ``folder/name.py`` and import it (a fresh module each call)."""
    path = folder / f"{name}.py"
    path.write_text(source, encoding="utf-8")
    mod_name = f"_exported_{name}_{next(_counter)}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    spec.loader.exec_module(module)
    return module


def load_export(export, folder, name: str = "model"):
    """Write an export as ``blockflow export torch`` does (``name.py`` and its ``name.pt``) and
    import it: ``Model()`` then starts from blockflow's values, and ``Model(initial=None)`` still
    finds the large constants it loads from the file."""
    from blockflow.export.files import write_torch_files

    write_torch_files(export, folder / f"{name}.py")
    return load_module(export.source, folder, name)


def as64(value):
    """Float arrays in float64 (the tests' tight comparisons), the rest as they are."""
    if value is None or isinstance(value, list):
        return value if value is None else [as64(v) for v in value]
    a = np.asarray(value)
    return a.astype(np.float64) if a.dtype.kind == "f" else a


def case_project(name: str, case, *, float64: bool = True, seed: int = 3):
    """A page with block ``name`` fed as ``case`` says (a Placeholder per non-static input, a
    static input inline) and a loss: the sum of each float output times a fixed random cotangent.
    Returns (project, feeds, the block's output texts)."""
    registry = default_registry()
    spec = registry[name]
    rng = np.random.default_rng(seed)
    project = Project()
    page = project.add_page("main")
    feeds = {}
    inputs = list(case.inputs) + [None] * (len(spec.inputs) - len(case.inputs))
    node = page.add_node(name, id="B", attrs=dict(case.attrs))
    for port, value in zip(spec.inputs, inputs):
        if value is None:
            continue
        if port.static:
            node.inputs[port.name] = np.asarray(value)
            continue
        items = value if port.variadic else [value]
        for i, item in enumerate(items):
            item = as64(item) if float64 else np.asarray(item)
            pid = f"{port.name}_{i}" if port.variadic else port.name
            page.add_node("Placeholder", id=pid, attrs={"shape": list(np.shape(item)), "dtype": item.dtype.name})
            page.connect(pid, "output", "B", f"{port.name}[{i}]" if port.variadic else port.name)
            feeds[pid] = item
    program = compile_project(project)
    assert program.ok, program.errors[:3]
    outs = [f"B:{p}" for p in program.output_ports("B")]
    terms = []
    for i, text in enumerate(outs):
        t = program.output_type("B", text.split(":")[1])
        decl = spec.outputs[min(i, len(spec.outputs) - 1)]
        if t.dtype.kind != "f" or not decl.differentiable or spec.gradient != "vjp":
            continue
        g = rng.standard_normal(t.shape).astype(t.dtype)
        page.add_node("Multiply", id=f"gm{i}", inputs={"y": g})
        page.connect("B", text.split(":")[1], f"gm{i}", "x")
        page.add_node("Sum", id=f"gs{i}")
        page.connect(f"gm{i}", "z", f"gs{i}", "input")
        terms.append(f"gs{i}")
    if len(terms) == 1:
        page.loss = terms[0]
    elif terms:
        page.add_node("AddN", id="loss")
        for k, t in enumerate(terms):
            page.connect(t, "output", "loss", f"inputs[{k}]")
        page.loss = "loss"
    return project, feeds, outs


def compare_with_torch(project, feeds, outs, folder, rtol=1e-10, atol=1e-12):
    """Export ``project``'s page returning ``outs`` (and the loss), run both engines, and assert
    the values and the gradients of the loss with respect to every float Placeholder agree."""
    import torch

    from blockflow.export.torch_module import export_torch

    program = compile_project(project)
    loss = project.pages[0].loss
    wanted = list(outs) + ([loss] if loss else [])
    export = export_torch(project, outputs=wanted, program=program)
    module = load_export(export, folder)
    model = module.Model(initial=None)
    state = {k: torch.from_numpy(np.array(v)) for k, v in export.state.items()}
    model.load_state_dict(state)
    args = {}
    for arg, node, _ in export.inputs:
        t = torch.from_numpy(np.array(feeds[node]))
        if t.dtype.is_floating_point:
            t.requires_grad_(True)
        args[arg] = t
    got = model(*args.values())
    got = got if isinstance(got, tuple) else (got,)
    # check_numerics off: cases feed nan on purpose (Equal of nan); allclose compares nan as equal
    ours = run(program, feeds, target=loss, record=True, check_numerics=False)
    for text, value in zip(wanted, got):
        expect = ours.value(*text.split(":")) if ":" in text else ours.value(text)
        value = value.detach().numpy()
        assert value.dtype == np.asarray(expect).dtype, (text, value.dtype, np.asarray(expect).dtype)
        assert value.shape == np.shape(expect), (text, value.shape, np.shape(expect))
        np.testing.assert_allclose(value, expect, rtol=_tol(value, rtol), atol=_atol(value, atol, expect), err_msg=text)
    xs = [(node, t) for (_, node, _), t in zip(export.inputs, args.values()) if t.requires_grad]
    if loss and xs:
        loss = got[len(outs)]
        grads = torch.autograd.grad(loss, [t for _, t in xs], allow_unused=True)
        for (node, t), g in zip(xs, grads):
            expect = ours.variable_grads.get(node)
            g = np.zeros(t.shape) if g is None else g.numpy()
            if expect is None:
                expect = np.zeros(g.shape)
            np.testing.assert_allclose(g, expect, rtol=_tol(g, rtol), atol=_atol(g, atol, expect),
                                       err_msg=f"gradient of {node}")
    return export


def _tol(value, tol):
    """``tol``, or a few dozen ulps of a float dtype narrower than float64 (a float32 output, as a
    Cast makes, is summed in another order by torch)."""
    dtype = np.asarray(value).dtype
    if dtype.kind == "f" and dtype.itemsize < 8:
        return max(tol, 50 * float(np.finfo(dtype).eps))
    return tol


def _atol(value, tol, expect):
    """_tol's atol; for a float dtype narrower than float64, its few dozen ulps of the largest
    value (at least 1): a value near 0 made by a sum is rounded as its largest terms are, in an
    order torch picks by CPU (ATen's vector width, MKL's kernel). Sum-large (64 terms, values up
    to 22) came within a third of 50 ulps of 1 with ATEN_CPU_CAPABILITY=default."""
    atol = _tol(value, tol)
    dtype = np.asarray(value).dtype
    if dtype.kind == "f" and dtype.itemsize < 8:
        e = np.abs(np.asarray(expect, np.float64))
        atol *= max(1.0, float(np.max(e[np.isfinite(e)], initial=0.0)))   # infinities: checked as such
    return atol


def onnx_exportable_values(program) -> list:
    """Every output ("node:port") of a page's blocks whose inputs the ONNX export can write: the
    loss, the predictions a model for inference returns, and each step on the way."""
    from blockflow.export.onnx_model import onnx_needed_nodes, onnx_refused_blocks
    from blockflow.project import port_text

    outs = []
    for st in program.steps:
        if st.refs or st.role in ("variable", "placeholder", "gradients") or st.spec.is_dataset:
            continue
        if st.spec.name in ("Input", "Output") or not st.outputs:
            continue
        if not onnx_refused_blocks(program, onnx_needed_nodes(program, st.outputs)):
            outs += [port_text(st.node, program.slot(o).port) for o in st.outputs]
    return outs
