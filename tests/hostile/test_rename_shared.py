"""A careless rename: the instance whose Variables another instance uses (weight tying,
``share_variables_with``) given a new id. Every other reference to a block follows its rename
(wires, loss, metrics, feeds); this one did not, so renaming the MLP of the FGSM sample made its
adversarial pass an error, 'cannot share Variables with 'mlp': there is no instance 'mlp' beside
it', and another instance later named mlp would have lent it its Variables instead."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from blockflow.compile.compiler import compile_project
from blockflow.io.project_io import load_project
from blockflow.run.runtime import run_backward

SAMPLE = Path(__file__).resolve().parents[2] / "sample_projects" / "fgsm_adversarial_training.bflow.json"


def _variables(project, page) -> set:
    """The Variables the page's program holds (a tied instance has none of its own), after a run."""
    program = compile_project(project, page)
    assert program.ok, [str(d) for d in program.errors]
    slot = program.slot(program.resolve_target(None))
    assert np.isfinite(run_backward(program).values[(slot.node, slot.port)])
    return {st.node for st in program.steps if st.role == "variable"}


def test_renaming_an_instance_others_share_makes_them_follow():
    project = load_project(SAMPLE)
    page = project.pages[0]
    assert page.nodes["mlp_adv"].attrs["share_variables_with"] == "mlp"
    before = _variables(project, page.name)
    assert before and not any(v.startswith("mlp_adv/") for v in before)
    change = page.rename_node("mlp", "net")
    assert page.nodes["mlp_adv"].attrs["share_variables_with"] == "net"
    assert "mlp_adv" in change.nodes_changed
    assert _variables(project, page.name) == {"net/" + v.partition("/")[2] for v in before}
    page.rename_node("net", "mlp")       # what an undo does
    assert page.nodes["mlp_adv"].attrs["share_variables_with"] == "mlp"


def test_the_editor_s_rename_and_its_undo_keep_the_tie(qapp):
    from blockflow.gui.document.document import Document

    doc = Document()
    doc.open(str(SAMPLE))
    page = doc.current_page
    doc.rename_node("mlp", "net", page)
    assert doc.page(page).nodes["mlp_adv"].attrs["share_variables_with"] == "net"
    assert compile_project(doc.project, page).ok
    doc.undo_stack.undo()
    assert doc.page(page).nodes["mlp_adv"].attrs["share_variables_with"] == "mlp"
    doc.undo_stack.redo()
    assert compile_project(doc.project, page).ok
