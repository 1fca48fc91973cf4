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
    # the copies' inputs are unwired, but no copy's sharing is an error
    assert not [d for d in compile_project(doc.project, page).errors if "share" in str(d)]
    doc.undo_stack.undo()
    assert doc.page(page).nodes["mlp_adv"].attrs["share_variables_with"] == "mlp"
    doc.undo_stack.redo()
    # the copies' inputs are unwired, but no copy's sharing is an error
    assert not [d for d in compile_project(doc.project, page).errors if "share" in str(d)]


def test_a_tied_pair_duplicated_ties_its_copies_to_each_other(qapp):
    """Duplicate (or copy and paste) mlp and mlp_adv together: the copy of mlp_adv used the
    original mlp's Variables, not its copy's, where every wire between the two follows the copies.
    A tied instance copied alone still uses the original's."""
    from blockflow.gui.document.document import Document

    doc = Document()
    doc.open(str(SAMPLE))
    page = doc.current_page
    before = set(doc.page(page).nodes)
    doc.duplicate(["mlp", "mlp_adv"])
    nodes = doc.page(page).nodes
    new = set(nodes) - before
    shares = {n: nodes[n].attrs.get("share_variables_with") for n in new}
    own = [n for n, share in shares.items() if share is None]
    assert len(new) == 2 and len(own) == 1
    assert sorted(shares.values(), key=str) == [own[0], None]     # the copy ties to the copy
    doc.duplicate(["mlp_adv"])
    nodes = doc.page(page).nodes
    alone = set(nodes) - before - new
    assert [nodes[n].attrs["share_variables_with"] for n in alone] == ["mlp"]
    # the copies' inputs are unwired, but no copy's sharing is an error
    assert not [d for d in compile_project(doc.project, page).errors if "share" in str(d)]
