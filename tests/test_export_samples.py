"""Every sample project's pages export to PyTorch, and the exported forward and gradients equal
blockflow's (docs/export.md); StopGradient cuts where the diagram cuts: a Variable no gradient
reaches in blockflow gets none in torch either.

Random blocks draw other numbers in torch (its own generator): here each is replaced by a
Placeholder fed with the draw blockflow made, so everything downstream of it is compared; the
random lowerings themselves are tested by their distributions (tests/test_export_torch_nn.py).
Dataset blocks are forward inputs: both engines get the batch blockflow gives at step 0."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from blockflow.compile.compiler import compile_project  # noqa: E402
from blockflow.export.torch_module import export_torch, needed_nodes  # noqa: E402
from blockflow.io.project_io import load_project  # noqa: E402
from blockflow.project import split_port_text  # noqa: E402
from blockflow.run.runtime import run  # noqa: E402

from export_kit import load_export  # noqa: E402

SAMPLES = Path(__file__).parents[1] / "sample_projects"
PAGES = [pytest.param(f.name, pg.name, id=f"{f.name.split('.')[0]}-{pg.name}")
         for f in sorted(SAMPLES.glob("*.bflow.json")) for pg in load_project(f).pages]


def _replay_random_blocks(project, page, values) -> list:
    """Replace the page's random blocks by Placeholders fed with their draws; their ids."""
    program = compile_project(project, page)
    pg = project.page(page)
    replaced = []
    for st in program.steps:
        if "rng" not in st.spec.forward_context or st.spec.is_dataset or "/" in st.node:
            continue
        if len(st.outputs) != 1 or st.spec.gradient == "vjp":
            continue      # Dropout and the like stay: their lowering draws a mask (tested apart)
        drawn = values[(st.node, program.slot(st.outputs[0]).port)]
        old = pg.nodes[st.node]
        port = program.slot(st.outputs[0]).port
        wires = [e for e in pg.edges if e.src == st.node]
        for e in [e for e in pg.edges if e.src == st.node or e.dst == st.node]:
            pg.edges.remove(e)
        del pg.nodes[st.node]
        pg.add_node("Placeholder", id=st.node, attrs={"shape": list(drawn.shape), "dtype": drawn.dtype.name},
                    position=old.position)
        for e in wires:
            pg.connect(st.node, "output", e.dst, e.dst_port)
        pg.feeds[st.node] = drawn
        replaced.append((st.node, port))
    return replaced


@pytest.mark.parametrize("sample, page", PAGES)
def test_sample_page_exports_and_equals_blockflow(sample, page, tmp_path):
    project = load_project(SAMPLES / sample)
    pg = project.page(page)
    first = run(compile_project(project, page), target=pg.loss or None, record=True, commit=False)
    _replay_random_blocks(project, page, first.values)
    program = compile_project(project, page)
    assert program.ok, program.errors
    ours = run(program, target=pg.loss or None, record=True, commit=False)
    if pg.loss:   # the replayed draws give the run they were drawn in
        np.testing.assert_array_equal(ours.value(*split_port_text(pg.loss)), first.value(*split_port_text(pg.loss)))
    export = export_torch(project, page, program=program)
    module = load_export(export, tmp_path)
    model = module.Model(initial=None)
    model.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in export.state.items()})
    model.train()
    args = []
    for arg, node, _ in export.inputs:
        name, _, port = node.partition(":")
        value = ours.value(name, port or None)
        t = torch.from_numpy(np.array(value))
        args.append(t.requires_grad_(True) if t.dtype.is_floating_point else t)
    got = model(*args)
    got = got if isinstance(got, tuple) else (got,)
    tol = _tolerance(program, ours)
    for text, value in zip(export.outputs, got):
        expect = ours.value(*text.split(":"))
        np.testing.assert_allclose(value.detach().numpy(), expect, **tol, err_msg=text)
    if not pg.loss:
        return
    params = dict(model.named_parameters())
    wrt = list(params.values()) + [t for t in args if t.requires_grad]
    grads = torch.autograd.grad(got[0], wrt, allow_unused=True)
    names = list(params) + [node for (_, node, _), t in zip(export.inputs, args) if t.requires_grad]
    for name, g in zip(names, grads):
        if name in export.variables:
            expect = ours.variable_grads.get(export.variables[name])
        else:   # a Placeholder or a dataset's output: the gradient of the value it gives
            expect = ours.grad(*split_port_text(name))
        if expect is None:   # blockflow sends no gradient here: a cut, or no path
            assert g is None or not torch.any(g), f"{name}: torch has a gradient blockflow cuts"
            continue
        assert g is not None, f"{name}: blockflow has a gradient torch does not"
        scale = max(1.0, float(np.max(np.abs(expect))))
        np.testing.assert_allclose(g.numpy(), expect, rtol=tol["rtol"] * 5, atol=tol["atol"] * scale,
                                   err_msg=f"gradient of {name}")


def _tolerance(program, result) -> dict:
    """float64 pages: tight. float32 pages: the rounding a float32 sum of the run's largest values
    may carry (a loss that is a difference of large terms, as the RBM's free energies, keeps only
    what float32 keeps of them), and 2e-5 relative."""
    floats = [np.asarray(v) for v in result.values.values() if np.asarray(v).dtype.kind == "f"]
    if all(v.dtype == np.float64 for v in floats):
        return dict(rtol=1e-10, atol=1e-12)
    largest = max((float(np.max(np.abs(v))) for v in floats if v.size and np.all(np.isfinite(v))), default=1.0)
    return dict(rtol=2e-5, atol=max(2e-6, 32 * float(np.finfo(np.float32).eps) * largest))


def test_stop_gradients_are_detached_where_the_diagram_cuts(tmp_path):
    """Each StopGradient of the samples is a .detach() of its input; and where blockflow's
    gradient paths leave a Variable no gradient (round_only: w only reaches the loss through Round),
    torch leaves it none."""
    seen = 0
    for f in sorted(SAMPLES.glob("*.bflow.json")):
        project = load_project(f)
        for pg in project.pages:
            program = compile_project(project, pg.name)
            if not pg.loss:
                continue
            needed = needed_nodes(program, [program.resolve_target(None)])
            stops = [st.node for st in program.steps if st.spec.name == "StopGradient" and st.node in needed]
            source = export_torch(project, pg.name, program=program).source
            for node in stops:
                line = re.search(rf"^\s+{re.escape(node)} = (.*)$", source, re.M)
                assert line and line.group(1).endswith(".detach()"), (pg.name, node)
                seen += 1
    assert seen >= 5
    project = load_project(SAMPLES / "straight_through_estimator.bflow.json")
    export = export_torch(project, "round_only")
    module = load_export(export, tmp_path)
    model = module.Model(initial=None)
    model.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in export.state.items()})
    feeds = project.page("round_only").feeds
    loss = model(*[torch.from_numpy(np.array(feeds[node])) for _, node, _ in export.inputs])
    # w reaches the loss only through Round, which is detached: the loss has no graph at all
    (g,) = torch.autograd.grad(loss, [model.w], allow_unused=True) if loss.requires_grad else (None,)
    assert g is None or not torch.any(g)
    assert "w" not in run(compile_project(project, "round_only"), target="loss", record=True).variable_grads
