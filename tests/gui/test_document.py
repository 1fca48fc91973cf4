"""The Document: every edit undoable, exact round trips, refused wires leave the model alone."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from blockflow.compile.compiler import compile_project
from blockflow.errors import ProjectError, ProjectFileError
from blockflow.gui.document.document import Document
from blockflow.io.project_io import dumps_project, load_project
from blockflow.project import Edge, Page, Project

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_projects" / "stable_softmax.bflow.json"


@pytest.fixture
def doc(qapp):
    return Document()


def build_stable_softmax(doc):
    d = doc
    d.add_node("Placeholder", (0, 160), node_id="x", attrs={"shape": [5]})
    d.add_node("Max", (200, 40))
    d.add_node("StopGradient", (400, 40))
    d.add_node("Subtract", (600, 160))
    d.add_node("Softmax", (800, 160))
    d.add_node("Const", (1000, 320), node_id="w", attrs={"value": [1.0, -2.0, 0.5, 3.0, 1.5]})
    d.add_node("Multiply", (1200, 160))
    d.add_node("Sum", (1400, 160))
    d.connect("x", "output", "Max_1", "input")
    d.connect("Max_1", "output", "StopGradient_1", "input")
    d.connect("x", "output", "Subtract_1", "x")
    d.connect("StopGradient_1", "output", "Subtract_1", "y")
    d.connect("Subtract_1", "z", "Softmax_1", "logits")
    d.connect("Softmax_1", "softmax", "Multiply_1", "x")
    d.connect("w", "output", "Multiply_1", "y")
    d.connect("Multiply_1", "z", "Sum_1", "input")
    d.set_loss("Sum_1")


def test_building_undo_all_and_redo_all(doc):
    empty = dumps_project(doc.project)
    build_stable_softmax(doc)
    built = dumps_project(doc.project)
    assert doc.program().ok, [str(e) for e in doc.program().errors]
    n = doc.undo_stack.count()
    for _ in range(n):
        doc.undo_stack.undo()
    assert dumps_project(doc.project) == empty
    for _ in range(n):
        doc.undo_stack.redo()
    assert dumps_project(doc.project) == built


def test_refused_wires_leave_the_project_unchanged(doc):
    build_stable_softmax(doc)
    before = dumps_project(doc.project)
    count = doc.undo_stack.count()
    verdict = doc.check_connection("Sum_1", "output", "Max_1", "input")
    assert not verdict and "cycle" in verdict.reason
    doc.add_node("Placeholder", (0, 400), node_id="i", attrs={"shape": [5], "dtype": "int32"})
    before = dumps_project(doc.project)
    count = doc.undo_stack.count()
    verdict = doc.check_connection("i", "output", "Softmax_1", "logits")
    assert not verdict and "float" in verdict.reason
    verdict = doc.check_connection("x", "output", "Sum_1", "output")
    assert not verdict and "two outputs" in verdict.reason
    verdict = doc.check_connection("x", "scope", "Sum_1", "input")
    assert not verdict and "scope" in verdict.reason
    doc.add_node("Placeholder", (0, 500), node_id="v3", attrs={"shape": [3]})
    verdict = doc.check_connection("v3", "output", "Subtract_1", "y")
    assert not verdict and "[3]" in verdict.reason and "[5]" in verdict.reason
    for args in (("Sum_1", "output", "Max_1", "input"), ("i", "output", "Softmax_1", "logits")):
        with pytest.raises(ProjectError):
            doc.connect(*args)
    assert doc.undo_stack.count() == count + 1  # only the added Placeholder v3
    doc.undo_stack.undo()
    assert dumps_project(doc.project) == before


def test_wiring_a_fed_input_replaces_the_old_wire_undoably(doc):
    build_stable_softmax(doc)
    doc.add_node("Placeholder", (0, 400), node_id="x2", attrs={"shape": [5]})
    before = dumps_project(doc.project)
    doc.connect("x2", "output", "Subtract_1", "x")
    feeding = [e for e in doc.page().edges if (e.dst, e.dst_port) == ("Subtract_1", "x")]
    assert [e.src for e in feeding] == ["x2"]
    doc.undo_stack.undo()
    assert dumps_project(doc.project) == before


def test_delete_paste_duplicate_layout_are_single_steps(doc):
    build_stable_softmax(doc)
    before = dumps_project(doc.project)
    n = doc.undo_stack.count()
    doc.remove_nodes(["Max_1", "StopGradient_1", "Sum_1"])
    assert doc.undo_stack.count() == n + 1
    assert doc.page().loss is None
    doc.undo_stack.undo()
    assert dumps_project(doc.project) == before
    frag = doc.copy_fragment(["Max_1", "StopGradient_1"])
    new = doc.paste_fragment(frag, (50, 600))
    assert new == ["Max_2", "StopGradient_2"]
    assert any(e.src == "Max_2" and e.dst == "StopGradient_2" for e in doc.page().edges)
    assert doc.page().nodes["Max_2"].position == (50.0, 600.0)
    assert doc.undo_stack.count() == n + 1
    doc.undo_stack.undo()
    doc.auto_layout()
    assert doc.undo_stack.count() == n + 1
    xs = {nid: node.position[0] for nid, node in doc.page().nodes.items()}
    assert xs["x"] < xs["Max_1"] < xs["StopGradient_1"] < xs["Subtract_1"]
    doc.undo_stack.undo()
    assert dumps_project(doc.project) == before


def test_moves_in_one_gesture_merge(doc):
    doc.add_node("Exp", (0, 0))
    g = doc.new_gesture()
    doc.move_nodes({"Exp_1": ((0, 0), (10, 0))}, gesture=g)
    doc.move_nodes({"Exp_1": ((10, 0), (30, 5))}, gesture=g)
    assert doc.undo_stack.count() == 2
    doc.undo_stack.undo()
    assert doc.page().nodes["Exp_1"].position == (0.0, 0.0)


def test_attrs_are_validated_and_pages_edited(doc):
    doc.add_node("MatMul", (0, 0))
    with pytest.raises(ProjectError, match="transpose_a"):
        doc.set_attr("MatMul_1", "transpose_a", "yes")
    doc.set_attr("MatMul_1", "transpose_a", True)
    assert doc.page().nodes["MatMul_1"].attrs == {"transpose_a": True}
    doc.set_inline("MatMul_1", "b", [[1.0], [2.0]])
    np.testing.assert_array_equal(doc.page().nodes["MatMul_1"].inputs["b"], [[1.0], [2.0]])
    name = doc.add_page()
    doc.rename_page(name, "second")
    doc.move_page("second", 0)
    assert [p.name for p in doc.project.pages] == ["second", "main"]
    with pytest.raises(ProjectError):
        doc.rename_page("second", "main")
    doc.remove_page("second")
    for _ in range(doc.undo_stack.count()):
        doc.undo_stack.undo()
    assert [p.name for p in doc.project.pages] == ["main"] and not doc.page().nodes


def test_open_save_and_a_bad_file_leaves_the_document_untouched(doc, tmp_path):
    doc.open(SAMPLE)
    assert not doc.dirty and doc.title == "stable_softmax.bflow.json"
    doc.set_label("x", "input")
    assert doc.dirty and doc.title.endswith("*")
    bad = tmp_path / "bad.bflow.json"
    bad.write_text("{not json")
    before = dumps_project(doc.project)
    with pytest.raises(ProjectFileError):
        doc.open(bad)
    assert dumps_project(doc.project) == before and doc.dirty
    out = tmp_path / "out.bflow.json"
    doc.save(out)
    assert not doc.dirty
    again = load_project(out)
    assert again.pages[0].nodes["x"].label == "input"
    assert [s.node for s in compile_project(again).steps] == [s.node for s in compile_project(load_project(SAMPLE)).steps]


def test_renaming_a_block_carries_its_wires_loss_and_feed_and_undoes_exactly(doc):
    doc.add_node("Placeholder", (0, 0), node_id="x", attrs={"shape": [3]})
    doc.add_node("Tanh", (200, 0), node_id="t")
    doc.add_node("Sum", (400, 0), node_id="s")
    doc.connect("x", "output", "t", "x")
    doc.connect("t", "y", "s", "input")
    doc.set_loss("s:output")
    doc.set_metrics(["t:y", "s"])
    doc.set_feed("x", np.array([1.0, 2.0, 3.0], np.float32))
    before = dumps_project(doc.project)
    doc.rename_node("x", "inputs")
    doc.rename_node("s", "loss_total")
    page = doc.page()
    assert list(page.nodes) == ["inputs", "t", "loss_total"]
    assert page.nodes["inputs"].id == "inputs"
    assert [str(e) for e in page.edges] == ["inputs.output -> t.x", "t.y -> loss_total.input"]
    assert page.loss == "loss_total:output" and list(page.feeds) == ["inputs"]
    assert page.metrics == ["t:y", "loss_total"]
    assert compile_project(doc.project).ok and page.full_name("inputs") == "main/inputs"
    for bad, why in (("t", "already has"), ("2x", "not a valid id"), ("a b", "not a valid id"), ("", "not a valid")):
        with pytest.raises(ProjectError, match=why):
            doc.rename_node("inputs", bad)
    with pytest.raises(ProjectError, match="no block"):
        doc.rename_node("nope", "z")
    doc.undo_stack.undo()
    doc.undo_stack.undo()
    assert dumps_project(doc.project) == before
    doc.undo_stack.redo()
    assert "inputs" in doc.page().nodes


def test_metrics_follow_deleted_blocks_and_come_back_with_undo(doc):
    doc.add_node("Placeholder", (0, 0), node_id="x", attrs={"shape": []})
    doc.add_node("Tanh", (200, 0), node_id="t")
    doc.connect("x", "output", "t", "x")
    doc.set_metrics(["t", "x:output"])
    with pytest.raises(ProjectError, match="names no block"):
        doc.set_metrics(["nope"])
    with pytest.raises(ProjectError, match="twice"):
        doc.set_metrics(["t", "t"])
    doc.remove_nodes(["t"])
    assert doc.page().metrics == ["x:output"]
    dumps_project(doc.project)              # saves (a metric naming a missing block would not)
    doc.undo_stack.undo()
    assert doc.page().metrics == ["t", "x:output"]


def test_training_results_and_reset_are_single_undoable_edits(doc):
    doc.add_node("Variable", (0, 0), node_id="w", attrs={"shape": [2]})
    doc.add_node("Variable", (0, 100), node_id="v", attrs={"shape": [3]})
    before = dumps_project(doc.project)
    skipped = doc.apply_training({"w": {"value": np.array([1.0, 2.0], np.float32), "m": np.zeros(2, np.float32)},
                                  "v": {"value": np.zeros(4, np.float32)},        # the wrong shape now
                                  "gone": {"value": np.zeros(1, np.float32)}}, steps=10)
    assert sorted(skipped) == ["gone", "v"]
    assert doc.page().nodes["w"].state["value"].tolist() == [1.0, 2.0]
    assert doc.undo_stack.undoText() == "Train 10 steps"
    assert compile_project(doc.project).variable_values["w"].tolist() == [1.0, 2.0]
    assert doc.reset_variables() == ["w"]
    assert doc.page().nodes["w"].state == {}
    doc.undo_stack.undo()
    assert doc.page().nodes["w"].state["value"].tolist() == [1.0, 2.0]
    doc.undo_stack.undo()
    assert dumps_project(doc.project) == before


def test_a_dataset_file_next_to_the_project_compiles_in_the_document(doc, tmp_path):
    (tmp_path / "d.csv").write_text("a,label\n1,0\n2,1\n")
    doc.add_node("CsvDataset", (0, 0), node_id="d", attrs={"path": "d.csv", "test_fraction": 0.0})
    assert "saved in a folder" in str(doc.program().errors[0])
    doc.save(tmp_path / "p.bflow.json")
    assert doc.program().ok, [str(d) for d in doc.program().errors]


def test_saving_elsewhere_names_the_data_files_left_behind_and_copies_them(doc, tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "data").mkdir()
    (tmp_path / "a" / "data" / "d.csv").write_text("u,label\n1,0\n2,1\n")
    doc.add_node("CsvDataset", (0, 0), node_id="d", attrs={"path": "data/d.csv", "test_fraction": 0.0})
    doc.add_node("CsvDataset", (0, 100), node_id="e", attrs={"path": "../outside.csv"})
    doc.save(tmp_path / "a" / "p.bflow.json")
    assert doc.data_files() == ["data/d.csv", "../outside.csv"]
    old = doc.project.base_dir
    (tmp_path / "b").mkdir()
    doc.save(tmp_path / "b" / "p.bflow.json")
    left = doc.data_files_left_behind(old)
    assert left == ["data/d.csv"]                    # a path out of the folder is never copied
    assert any("no such file" in str(d) for d in doc.program().errors if d.node == "d")
    assert doc.copy_data_files(left, old) == ["data/d.csv"]
    assert (tmp_path / "b" / "data" / "d.csv").read_text() == (tmp_path / "a" / "data" / "d.csv").read_text()
    assert not [d for d in doc.program().errors if d.node == "d"]
    assert doc.data_files_left_behind(old) == []


# -- apply: the one way the commands edit ---------------------------------------------------


def record(doc) -> list:
    """Every model signal the document emits, in order, as (name, args)."""
    seen = []
    for name in ("node_added", "node_removed", "node_changed", "nodes_moved", "edge_added",
                 "edge_removed", "page_field_changed", "pages_changed", "page_renamed",
                 "node_renamed", "current_page_changed", "structure_changed"):
        getattr(doc, name).connect(lambda *args, name=name: seen.append((name, args)))
    return seen


def test_apply_runs_a_page_mutator_and_emits_what_its_change_says(doc):
    doc.add_node("Placeholder", node_id="x", attrs={"shape": [2]})
    doc.add_node("Tanh", node_id="t")
    doc.connect("x", "output", "t", "x")
    seen = record(doc)
    change = doc.apply("main", Page.remove_node, "x")
    wire = Edge("x", "output", "t", "x")
    assert seen == [("edge_removed", ("main", wire)), ("node_removed", ("main", "x")),
                    ("structure_changed", ("main",))]
    seen.clear()
    doc.apply("main", Page.restore_node, change.before)
    assert seen == [("node_added", ("main", "x")), ("edge_added", ("main", wire)),
                    ("structure_changed", ("main",))]
    assert doc.page().edges == [wire]
    seen.clear()
    doc.apply("main", Page.set_label, "t", "squash")
    assert seen == [("node_changed", ("main", "t"))]          # a label recompiles nothing
    seen.clear()
    doc.apply("main", Page.set_field, "loss", "t")
    assert seen == [("page_field_changed", ("main", "loss")), ("structure_changed", ("main",))]


def test_apply_runs_a_project_mutator_and_follows_the_current_page(doc):
    doc.add_page("second")
    seen = record(doc)
    doc.apply(None, Project.rename_page, "main", "first")
    assert doc.current_page == "first"
    assert seen == [("page_renamed", ("main", "first")), ("pages_changed", ()),
                    ("structure_changed", ("first",))]
    seen.clear()
    doc.apply(None, Project.remove_page, "first")
    assert doc.current_page == "second"
    assert seen == [("current_page_changed", ("second",)), ("pages_changed", ())]


def test_apply_of_a_refused_edit_changes_and_emits_nothing(doc):
    doc.add_node("Tanh", node_id="t")
    doc.add_node("Tanh", node_id="u")
    before = dumps_project(doc.project)
    seen = record(doc)
    with pytest.raises(ProjectError, match="already has a block 'u'"):
        doc.apply("main", Page.rename_node, "t", "u")
    with pytest.raises(ProjectError, match="has no node 'nope'"):
        doc.apply("main", Page.set_label, "nope", "a")
    assert seen == [] and dumps_project(doc.project) == before


def test_setting_the_states_of_many_nodes_tells_each_then_recompiles_once(doc):
    """Page.set_states (trained values stored, variables reset, and their undo): a node_changed
    per node, then one structure_changed for the page, not one per node."""
    for i, nid in enumerate(("a", "b", "c")):
        doc.add_node("Variable", (0, 100 * i), node_id=nid, attrs={"shape": [2]})
    states = {nid: {"value": np.full(2, i, np.float32)} for i, nid in enumerate(("a", "b", "c"))}
    each_then_once = [("node_changed", ("main", "a")), ("node_changed", ("main", "b")),
                      ("node_changed", ("main", "c")), ("structure_changed", ("main",))]
    seen = record(doc)
    doc.apply("main", Page.set_states, states)
    assert seen == each_then_once
    seen.clear()
    assert sorted(doc.reset_variables()) == ["a", "b", "c"]
    assert seen == each_then_once
    seen.clear()
    doc.undo_stack.undo()
    assert seen == each_then_once
    seen.clear()
    assert doc.apply_training({nid: dict(st) for nid, st in states.items()}, steps=3) == []
    assert seen == each_then_once


def test_an_attr_set_to_what_the_block_has_is_no_edit(doc):
    """Document.set_attr leaves the block alone, and the undo stack too, when the value is the
    one the block has (stored, or its default when none is stored); True when it changed it."""
    from blockflow.gui.document.document import AttrValueError

    doc.add_node("Placeholder", (0, 0), node_id="x")
    doc.add_node("Dropout", (0, 100), node_id="d")
    steps = doc.undo_stack.count()
    rate = doc.registry.get("Dropout").attr_map["rate"].default
    assert doc.set_attr("d", "rate", rate) is False                  # its default, unset
    assert doc.set_attr("d", "rate", None) is False                  # unset already
    assert doc.set_attr("x", "dtype", "float32") is False
    assert doc.undo_stack.count() == steps and doc.page().nodes["d"].attrs == {}
    assert doc.set_attr("x", "shape", (3, -1)) is True
    assert doc.page().nodes["x"].attrs == {"shape": [3, None]}
    assert doc.set_attr("x", "shape", [3, None]) is False           # the same sizes, spelled otherwise
    assert doc.set_attr("d", "rate", 0.25) is True and doc.set_attr("d", "rate", 0.25) is False
    assert doc.undo_stack.count() == steps + 2
    assert doc.set_attr("d", "rate", None) is True and "rate" not in doc.page().nodes["d"].attrs
    with pytest.raises(AttrValueError, match=r"^attr 'rate' of d: must be at most 1") as refused:
        doc.set_attr("d", "rate", 2.0)
    assert refused.value.reason.startswith("must be at most 1")     # for the field that names the attr
    with pytest.raises(ProjectError, match="has no attr 'nope'"):
        doc.set_attr("d", "nope", 1)
    assert doc.undo_stack.count() == steps + 3
