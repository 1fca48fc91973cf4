"""The exported Apply*/Assign blocks (blockflow/export/torch_ops_state.py) change the Variables and
their slots exactly as blockflow's runs do: every test case of every state-changing block, with
Variables at its ref inputs, and pages that train themselves (graph mode) over three runs."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from blockflow.compile.compiler import compile_project  # noqa: E402
from blockflow.export.files import write_torch_files  # noqa: E402
from blockflow.export.torch_lowering import lowering_table  # noqa: E402
from blockflow.export.torch_module import export_torch  # noqa: E402
from blockflow.export.torch_train import places  # noqa: E402
from blockflow.io.project_io import load_project  # noqa: E402
from blockflow.project import Project  # noqa: E402
from blockflow.registry import default_registry  # noqa: E402
from blockflow.run.runtime import run  # noqa: E402

from cases_training_ops import CASES  # noqa: E402
from export_kit import as64, load_module  # noqa: E402
from train_kit import regression  # noqa: E402

STATE_BLOCKS = ("Assign", "AssignAdd", "AssignSub", "ApplyGradientDescent", "ApplyMomentum", "ApplyAdam",
                "ApplyRMSProp", "ApplyAdagrad", "ApplyAdadelta", "ApplyFtrl")
STATE_CASES = [pytest.param(name, case, id=f"{name}-{case.id or i}")
               for name in STATE_BLOCKS for i, case in enumerate(CASES[name])]
EXTRA = [pytest.param("ApplyAdagrad", {"update_slots": False}, {}, id="ApplyAdagrad-frozen"),
         pytest.param("ApplyFtrl", {}, {5: 0.3}, id="ApplyFtrl-l1-zeroes-some")]


def test_every_state_block_is_lowered():
    assert set(STATE_BLOCKS) <= set(lowering_table())


def _case_page(name, inputs, attrs):
    """A page with block B: a Variable (initial value = the case's) at each ref input, a
    Placeholder at each other one, all float64; returns (project, feeds)."""
    spec = default_registry()[name]
    project = Project()
    page = project.add_page("main")
    node = page.add_node(name, id="B", attrs=dict(attrs))
    feeds = {}
    for port, value in zip(spec.inputs, inputs):
        value = as64(value)
        if port.ref:
            page.add_node("Variable", id=f"v_{port.name}", attrs={
                "shape": list(value.shape), "dtype": "float64", "initializer": "value",
                "initial_value": value.tolist()})
            page.connect(f"v_{port.name}", "ref", "B", port.name)
        else:
            page.add_node("Placeholder", id=port.name, attrs={"shape": list(value.shape), "dtype": "float64"})
            page.connect(port.name, "output", "B", port.name)
            feeds[port.name] = value
    del node
    return project, feeds


def _exported(project, outputs, folder):
    export = export_torch(project, outputs=outputs)
    write_torch_files(export, folder / "model.py")
    module = load_module(export.source, folder)
    return export, module.Model()


def _torch_state(model, export) -> dict:
    """{(node, key): array} of the module's Variables and slots."""
    state = model.state_dict()
    return {where: state[k].numpy().copy() for k, where in places(export).items()}


def _blockflow_state(program) -> dict:
    out = {(node, "value"): np.asarray(program.variable_values[node]) for node in program.variable_values}
    out.update({key: np.asarray(v) for key, v in program.slot_values.items()})
    return out


def _check_runs(project, feeds, outputs, folder, runs=3, rtol=1e-12):
    """Run both engines ``runs`` times (committing the updates) and compare outputs and state."""
    program = compile_project(project)
    assert program.ok, program.errors[:3]
    export, model = _exported(project, outputs, folder)
    args = [torch.from_numpy(np.array(feeds[node])) for _, node, _ in export.inputs]
    for k in range(runs):
        r = run(program, feeds, fetch=outputs, record=False, commit=True, step=k)
        got = model(*args)
        got = got if isinstance(got, tuple) else (got,)
        for text, value in zip(outputs, got):
            np.testing.assert_allclose(value.detach().numpy(), r.value(*text.split(":")) if ":" in text
                                       else r.value(text), rtol=rtol, atol=1e-14, err_msg=f"{text}, run {k}")
        assert r.state_updates, "the page changed no state"
        ours = _blockflow_state(program)
        theirs = _torch_state(model, export)
        for key, value in theirs.items():
            np.testing.assert_allclose(value, ours[key], rtol=rtol, atol=1e-14, err_msg=f"{key}, run {k}")
    return export


@pytest.mark.parametrize("name, case", STATE_CASES)
def test_state_block_updates_equal_blockflow(name, case, tmp_path):
    project, feeds = _case_page(name, case.inputs, case.attrs)
    export = _check_runs(project, feeds, ["B"], tmp_path)
    keys = {key for _node, key in places(export).values()}
    assert keys == {"value"}     # every ref input is wired from a Variable here


@pytest.mark.parametrize("name, attrs, changed", EXTRA)
def test_state_block_attrs(name, attrs, changed, tmp_path):
    case = CASES[name][0]
    inputs = [np.asarray(changed[i], dtype=np.asarray(v).dtype) if i in changed else v
              for i, v in enumerate(case.inputs)]
    project, feeds = _case_page(name, inputs, attrs)
    _check_runs(project, feeds, ["B"], tmp_path)


def _regression(update: str, extra=None):
    """W * x + b fitted to y by a drawn Gradients block and two ``update`` blocks whose optimizer
    state is left unwired (slots the module keeps as buffers); with its feeds."""
    project = regression(update, extra=extra)
    return project, {k: np.asarray(v) for k, v in project.pages[0].feeds.items()}


@pytest.mark.parametrize("update", ["ApplyGradientDescent", "ApplyMomentum", "ApplyAdam", "ApplyRMSProp",
                                    "ApplyAdagrad", "ApplyAdadelta", "ApplyFtrl"])
def test_a_page_that_trains_itself_equals_blockflow_over_three_runs(update, tmp_path):
    project, feeds = _regression(update)
    export = _check_runs(project, feeds, ["loss"], tmp_path)
    slots = {key.rpartition(".")[2] for node, key in places(export).values() if key != "value"}
    spec = default_registry()[update]
    assert slots == {p.name for p in spec.inputs[1:] if p.ref}


def test_the_linear_regression_samples_drawn_update_equals_blockflow(tmp_path):
    missing = {"SquaredDifference"} - set(lowering_table())
    if missing:
        pytest.skip(f"waits for the lowering of {', '.join(sorted(missing))}")
    project = load_project("sample_projects/linear_regression.bflow.json")
    page = project.page("drawn_update")
    project.pages.remove(page)
    project.pages.insert(0, page)
    program = compile_project(project)
    feeds = {k: np.asarray(v) for k, v in page.feeds.items()}
    export = _check_runs(project, feeds, ["loss"], tmp_path, rtol=1e-6)
    assert program.ok and {n for n, _ in places(export).values()} == {"W", "b"}


def test_the_outputs_of_a_run_that_updates_can_still_be_differentiated(tmp_path):
    """The Variables a run updates are read through copies made at its start: a backward after
    forward (which wrote the updates in place) gives blockflow's gradients at the start values."""
    project, feeds = _regression("ApplyMomentum")
    program = compile_project(project)
    export, model = _exported(project, ["loss"], tmp_path)
    loss = model(*[torch.from_numpy(np.array(feeds[node])) for _, node, _ in export.inputs])
    grads = dict(zip(("W", "b"), torch.autograd.grad(loss, [model.W, model.b])))
    ours = run(program, feeds, target="loss", wrt=["W", "b"], record=False, commit=False)
    for node in ("W", "b"):
        np.testing.assert_allclose(grads[node].numpy(), ours.variable_grads[node], rtol=1e-12, err_msg=node)
    assert not np.array_equal(model.W.detach().numpy(), program.variable_values["W"])   # updated
