"""The Project model (blockflow.project): plain data, ids, edges, lookups, equality, and the
mutators the editor's undo commands edit through (each one edit, returning its Change)."""
from __future__ import annotations

import copy

import numpy as np
import pytest

from blockflow.errors import ProjectError
from blockflow.equality import arrays_equal
from blockflow.project import UNSET, Edge, Node, Page, Project, port_text, split_port, split_port_text


def make_page(name="main") -> Page:
    return Project().add_page(name)


# -- ids ------------------------------------------------------------------------------------


def test_add_node_numbers_ids_per_block():
    page = make_page()
    assert page.add_node("MatMul").id == "MatMul_1"
    assert page.add_node("MatMul").id == "MatMul_2"
    assert page.add_node("Add").id == "Add_1"
    assert list(page.nodes) == ["MatMul_1", "MatMul_2", "Add_1"]


def test_new_id_reuses_the_first_free_number():
    page = make_page()
    for _ in range(3):
        page.add_node("MatMul")
    page.remove_node("MatMul_2")
    assert page.new_id("MatMul") == "MatMul_2"
    assert page.add_node("MatMul").id == "MatMul_2"
    assert page.new_id("MatMul") == "MatMul_4"


def test_add_node_with_explicit_id_and_fields():
    page = make_page()
    node = page.add_node("Placeholder", id="x", attrs={"shape": [5]}, inputs={"y": [1.0, 2.0]},
                         position=(3, 4), label="input", state={"value": np.zeros(2)})
    assert node is page.nodes["x"]
    assert node.block == "Placeholder" and node.label == "input"
    assert node.position == (3.0, 4.0) and all(type(p) is float for p in node.position)
    assert isinstance(node.inputs["y"], np.ndarray)
    assert node.attrs == {"shape": [5]}


def test_add_node_duplicate_id_raises():
    page = make_page()
    page.add_node("Add", id="a")
    with pytest.raises(ProjectError, match="already has a node 'a'"):
        page.add_node("Add", id="a")


@pytest.mark.parametrize("bad", ["a:b", "1abc", "a b", "a/b", "é"])
def test_add_node_invalid_id_raises(bad):
    with pytest.raises(ProjectError, match="not a valid node id"):
        make_page().add_node("Add", id=bad)


def test_add_node_rejects_id_with_trailing_newline():
    with pytest.raises(ProjectError):
        make_page().add_node("Add", id="a\n")


# -- edges ----------------------------------------------------------------------------------


def test_connect_and_incoming():
    page = make_page()
    page.add_node("Placeholder", id="x")
    page.add_node("Neg", id="n")
    edge = page.connect("x", "output", "n", "x")
    assert edge == Edge("x", "output", "n", "x")
    assert page.edges == [edge]
    assert page.incoming("n") == [edge] and page.incoming("x") == []
    assert str(edge) == "x.output -> n.x"


@pytest.mark.parametrize("src,dst", [("ghost", "n"), ("x", "ghost")])
def test_connect_to_a_missing_node_raises(src, dst):
    page = make_page("p")
    page.add_node("Placeholder", id="x")
    page.add_node("Neg", id="n")
    with pytest.raises(ProjectError, match="page 'p' has no node 'ghost'"):
        page.connect(src, "output", dst, "x")
    assert page.edges == []


def test_remove_node_drops_its_edges_and_feed():
    page = make_page()
    for nid in ("x", "y", "z"):
        page.add_node("Placeholder", id=nid)
    page.connect("x", "output", "y", "x")
    page.connect("y", "output", "z", "x")
    page.connect("x", "output", "z", "y")
    page.feeds["x"] = np.ones(2)
    page.feeds["z"] = np.ones(2)
    page.remove_node("x")
    assert list(page.nodes) == ["y", "z"]
    assert page.edges == [Edge("y", "output", "z", "x")]
    assert list(page.feeds) == ["z"]


def test_split_port():
    assert split_port("inputs[2]") == ("inputs", 2)
    assert split_port("x") == ("x", None)
    assert split_port("inputs[a]") == ("inputs[a]", None)


# -- names and lookups ----------------------------------------------------------------------


def test_full_name_and_scope():
    page = make_page("softmax")
    node = page.add_node("MatMul")
    assert page.scope == "softmax"
    assert page.full_name(node.id) == "softmax/MatMul_1"


@pytest.mark.parametrize("loss,target", [
    (None, None), ("", None), ("Sum_1", ("Sum_1", None)), ("Sum_1:output", ("Sum_1", "output")),
    ("Split_1:outputs[1]", ("Split_1", "outputs[1]")),
])
def test_loss_target(loss, target):
    page = make_page()
    page.loss = loss
    assert page.loss_target() == target


@pytest.mark.parametrize("text,parts", [
    ("Sum_1", ("Sum_1", None)), ("Sum_1:output", ("Sum_1", "output")), ("Split_1:outputs[1]", ("Split_1", "outputs[1]")),
])
def test_port_text_and_its_inverse(text, parts):
    assert split_port_text(text) == parts
    assert port_text(*parts) == text
    assert port_text(parts[0], "") == parts[0]


@pytest.mark.parametrize("loss,node", [
    (None, None), ("", None), ("Sum_1", "Sum_1"), ("Sum_1:output", "Sum_1"), ("Split_1:outputs[1]", "Split_1"),
])
def test_loss_node_and_is_loss(loss, node):
    page = make_page()
    page.loss = loss
    assert page.loss_node() == node
    assert page.is_loss("Sum_1") == (node == "Sum_1")
    assert not page.is_loss("Sum")  # a prefix of the loss node is not the loss node


def test_project_page_lookup():
    project = Project()
    with pytest.raises(ProjectError, match="no pages"):
        project.page()
    a = project.add_page("a")
    b = project.add_page("b")
    assert project.page() is a
    assert project.page("b") is b
    with pytest.raises(ProjectError, match=r"no page named 'c' \(pages: a, b\)"):
        project.page("c")


@pytest.mark.parametrize("name,match", [("", "non-empty"), ("a/b", "no '/'"),
                                        ("a", "already a page")])
def test_add_page_rejects_bad_names(name, match):
    project = Project()
    project.add_page("a")
    with pytest.raises(ProjectError, match=match):
        project.add_page(name)


# -- equality -------------------------------------------------------------------------------


def build(value=np.array([1.0, np.nan], np.float32), attr=1, order=("x", "y"), edge_order=0):
    project = Project(metadata={"title": "t"})
    page = project.add_page("p")
    for nid in order:
        page.add_node("Placeholder", id=nid, attrs={"n": attr, "v": np.arange(3)},
                      inputs={"a": value}, state={"s": value})
    edges = [("x", "output", "y", "a"), ("y", "output", "x", "a")]
    if edge_order:
        edges.reverse()
    for e in edges:
        page.connect(*e)
    page.feeds["x"] = value
    return project


def test_equality_with_arrays_and_nan():
    assert build() == build()
    assert build() == build(edge_order=1)  # edge order means nothing
    assert build() != build(order=("y", "x"))  # node order is kept
    assert build() != build(value=np.array([1.0, np.nan], np.float64))  # dtype matters
    assert build() != build(value=np.array([1.0, 2.0], np.float32))
    assert build() != build(value=np.array([[1.0, np.nan]], np.float32))  # shape matters
    assert build() != build(attr=1.0)  # int and float attrs differ
    assert build() != build(attr=True)


def test_equality_of_metadata_pages_and_nodes():
    a, b = build(), build()
    b.metadata["title"] = "u"
    assert a != b
    b = build()
    b.page().text = "note"
    assert a != b
    b = build()
    b.page().loss = "x"
    assert a != b
    b = build()
    b.page().nodes["x"].label = "L"
    assert a != b
    b = build()
    b.page().nodes["x"].position = (1.0, 0.0)
    assert a != b
    assert Node("a", "Add") == Node("a", "Add", position=[0, 0])
    assert Node("a", "Add") != Node("a", "Sub")
    assert Node("a", "Add").__eq__(3) is NotImplemented


def test_arrays_equal():
    assert arrays_equal(np.array([np.nan]), np.array([np.nan]))
    assert not arrays_equal(np.array([1], np.int32), np.array([1], np.int64))
    assert arrays_equal(np.array([True, False]), [True, False])


def test_attr_equality_is_the_file_view_of_values():
    a, b = make_page(), make_page()
    a.add_node("Placeholder", id="x", attrs={"shape": (5,), "nested": [np.zeros(2), {"k": 1.0}]})
    b.add_node("Placeholder", id="x", attrs={"shape": [5], "nested": [np.zeros(2), {"k": 1.0}]})
    assert a == b
    b.nodes["x"].attrs["nested"][1]["k"] = 1
    assert a != b  # 1 and 1.0 are written differently


# -- mutators -------------------------------------------------------------------------------


def wired_page() -> Page:
    """x -> f -> loss, x also into loss; a feed for x, f marked as the loss, f in the metrics."""
    page = make_page()
    for nid in ("x", "f", "loss"):
        page.add_node("Tanh", id=nid)
    page.connect("x", "output", "f", "x")
    page.connect("f", "y", "loss", "x")
    page.connect("x", "output", "loss", "y")
    page.feeds["x"] = np.ones(2)
    page.loss = "f:y"
    page.metrics = ["f", "loss:y"]
    return page


def test_insert_node_at_an_index_says_what_it_added():
    page = wired_page()
    change = page.insert_node(Node("g", "Exp"), 1)
    assert list(page.nodes) == ["x", "g", "f", "loss"]
    assert change.nodes_added == ("g",) and change.index == 1 and change.computes
    assert change.page == "main" and change.edges_added == () and change.fields == ()


@pytest.mark.parametrize("node_id,match", [("f", "already has a node 'f'"), ("1x", "not a valid node id")])
def test_insert_node_refuses_a_taken_or_invalid_id(node_id, match):
    page = wired_page()
    before = copy.deepcopy(page)
    with pytest.raises(ProjectError, match=match):
        page.insert_node(Node(node_id, "Exp"))
    assert page == before


def test_remove_node_takes_every_reference_and_restore_puts_it_back_exactly():
    page = wired_page()
    page.feeds["loss"] = np.zeros(1)
    before = copy.deepcopy(page)
    change = page.remove_node("f")
    assert list(page.nodes) == ["x", "loss"]
    assert page.edges == [Edge("x", "output", "loss", "y")]
    assert page.loss is None and page.metrics == ["loss:y"]
    assert change.nodes_removed == ("f",) and change.index == 1 and change.computes
    assert set(change.edges_removed) == {Edge("x", "output", "f", "x"), Edge("f", "y", "loss", "x")}
    back = page.restore_node(change.before)
    assert page == before and list(page.edges) == list(before.edges)
    assert list(page.feeds) == list(before.feeds)
    assert back.nodes_added == ("f",) and set(back.edges_added) == set(change.edges_removed)


def test_remove_node_keeps_a_loss_on_another_node():
    page = wired_page()
    page.remove_node("x")
    assert page.loss == "f:y" and page.feeds == {}


def test_remove_node_refuses_a_missing_node():
    page = wired_page()
    with pytest.raises(ProjectError, match="has no node 'nope'"):
        page.remove_node("nope")


def test_insert_and_remove_edge_keep_its_place():
    page = wired_page()
    edge = Edge("x", "output", "f", "x")
    removed = page.remove_edge(edge)
    assert removed.edges_removed == (edge,) and removed.index == 0 and edge not in page.edges
    added = page.insert_edge(edge, removed.index)
    assert page.edges[0] == edge and added.edges_added == (edge,) and added.index == 0


@pytest.mark.parametrize("edge,match", [
    (Edge("nope", "output", "f", "x"), "has no node 'nope'"),
    (Edge("x", "output", "nope", "x"), "has no node 'nope'"),
    (Edge("x", "", "f", "x"), "needs port names"),
    (Edge("x", "output", "f", ""), "needs port names"),
    (Edge("x", "output", "f", "x"), "already has the wire"),
])
def test_insert_edge_refuses_a_missing_node_a_missing_port_or_a_wire_already_there(edge, match):
    page = wired_page()
    before = copy.deepcopy(page)
    with pytest.raises(ProjectError, match=match):
        page.insert_edge(edge)
    assert page == before


def test_remove_edge_refuses_a_missing_wire():
    page = wired_page()
    with pytest.raises(ProjectError, match="has no wire"):
        page.remove_edge(Edge("loss", "y", "x", "x"))


def test_move_nodes_returns_the_old_positions():
    page = wired_page()
    page.nodes["x"].position = (1.0, 2.0)
    change = page.move_nodes({"x": (5, 6), "f": (7.5, 8)})
    assert page.nodes["x"].position == (5.0, 6.0) and page.nodes["f"].position == (7.5, 8.0)
    assert change.nodes_moved == ("x", "f") and not change.computes
    assert change.before == {"x": (1.0, 2.0), "f": (0.0, 0.0)}


def test_move_nodes_refuses_a_missing_node_and_moves_none():
    page = wired_page()
    with pytest.raises(ProjectError, match="has no node 'nope'"):
        page.move_nodes({"x": (5, 6), "nope": (1, 1)})
    assert page.nodes["x"].position == (0.0, 0.0)


@pytest.mark.parametrize("mutator,box", [(Page.set_attr, "attrs"), (Page.set_inline, "inputs")])
def test_set_attr_and_set_inline_set_and_unset_an_entry(mutator, box):
    page = wired_page()
    change = mutator(page, "f", "k", [2, 3])
    assert getattr(page.nodes["f"], box) == {"k": [2, 3]}
    assert change.nodes_changed == ("f",) and change.before is UNSET and change.computes
    again = mutator(page, "f", "k", None)           # None is a value; UNSET removes
    assert getattr(page.nodes["f"], box) == {"k": None} and again.before == [2, 3]
    mutator(page, "f", "k", UNSET)
    assert getattr(page.nodes["f"], box) == {}
    with pytest.raises(ProjectError, match="has no node 'nope'"):
        mutator(page, "nope", "k", 1)


def test_set_label_changes_nothing_computed_and_refuses_nul():
    page = wired_page()
    change = page.set_label("f", "hidden layer")
    assert page.nodes["f"].label == "hidden layer" and change.before == "" and not change.computes
    with pytest.raises(ProjectError, match="NUL"):
        page.set_label("f", "a\0b")
    with pytest.raises(ProjectError, match="has no node"):
        page.set_label("nope", "a")
    assert page.nodes["f"].label == "hidden layer"


def test_set_states_replaces_and_returns_the_old_states():
    page = wired_page()
    old = page.nodes["x"].state = {"value": np.ones(2)}
    change = page.set_states({"x": {}, "f": {"value": np.zeros(1)}})
    assert page.nodes["x"].state == {} and arrays_equal(page.nodes["f"].state["value"], np.zeros(1))
    assert change.before["x"] is old and change.before["f"] == {}
    assert change.nodes_changed == ("x", "f") and change.computes
    with pytest.raises(ProjectError, match="has no node 'nope'"):
        page.set_states({"nope": {}})


def test_set_feed_is_a_change_of_the_node():
    page = wired_page()
    change = page.set_feed("f", np.zeros(3))
    assert arrays_equal(page.feeds["f"], np.zeros(3)) and change.before is UNSET
    assert change.nodes_changed == ("f",) and change.fields == () and change.computes
    page.set_feed("f", UNSET)
    assert "f" not in page.feeds
    with pytest.raises(ProjectError, match="has no node 'nope'"):
        page.set_feed("nope", np.zeros(1))


@pytest.mark.parametrize("field,value,computes", [("loss", "x", True), ("text", "a note", False),
                                                  ("metrics", ["x"], False)])
def test_set_field_sets_a_page_field(field, value, computes):
    page = wired_page()
    old = getattr(page, field)
    change = page.set_field(field, value)
    assert getattr(page, field) == value and change.before == old
    assert change.fields == (field,) and change.computes == computes


def test_set_field_refuses_other_fields_and_a_note_with_nul():
    page = wired_page()
    with pytest.raises(ProjectError, match="no field 'name'"):
        page.set_field("name", "other")
    with pytest.raises(ProjectError, match="NUL"):
        page.set_field("text", "a\0")
    with pytest.raises(ProjectError, match="'nope:y' names no block"):
        page.set_field("metrics", ["x", "nope:y"])
    with pytest.raises(ProjectError, match="listed twice"):
        page.set_field("metrics", ["x", "x"])
    assert page.name == "main" and page.text == "" and page.metrics == ["f", "loss:y"]


def test_rename_node_makes_every_reference_follow():
    page = wired_page()
    change = page.rename_node("f", "hidden")
    assert list(page.nodes) == ["x", "hidden", "loss"] and page.nodes["hidden"].id == "hidden"
    assert page.edges == [Edge("x", "output", "hidden", "x"), Edge("hidden", "y", "loss", "x"),
                          Edge("x", "output", "loss", "y")]
    assert page.loss == "hidden:y" and page.metrics == ["hidden", "loss:y"]
    assert change.node_renamed == ("f", "hidden") and change.computes
    page.rename_node("x", "inp")
    assert list(page.feeds) == ["inp"]


def test_rename_node_back_gives_the_page_it_was():
    page = wired_page()
    before = copy.deepcopy(page)
    page.rename_node("x", "inp")
    page.rename_node("inp", "x")
    assert page == before and list(page.feeds) == ["x"]


@pytest.mark.parametrize("old,new,match", [("nope", "a", "no block 'nope'"), ("f", "2f", "not a valid id"),
                                           ("f", "loss", "already has a block 'loss'")])
def test_rename_node_refuses_and_leaves_the_page(old, new, match):
    page = wired_page()
    before = copy.deepcopy(page)
    assert match in page.rename_problem(old, new)
    with pytest.raises(ProjectError, match=match):
        page.rename_node(old, new)
    assert page == before
    assert page.rename_problem("f", "f") == ""


def two_pages() -> Project:
    project = Project()
    project.add_page("a")
    project.add_page("b")
    return project


def test_insert_remove_and_move_pages():
    project = two_pages()
    added = project.insert_page(Page("c"), 0)
    assert [p.name for p in project.pages] == ["c", "a", "b"]
    assert added.pages_added == ("c",) and added.index == 0 and added.page == "c"
    moved = project.move_page("c", 2)
    assert [p.name for p in project.pages] == ["a", "b", "c"] and moved.before == 0 and moved.index == 2
    removed = project.remove_page("a")
    assert [p.name for p in project.pages] == ["b", "c"] and removed.pages_removed == ("a",)
    project.insert_page(removed.before, removed.index)
    assert [p.name for p in project.pages] == ["a", "b", "c"]


def test_rename_page():
    project = two_pages()
    page = project.page("a")
    change = project.rename_page("a", "z")
    assert project.page("z") is page and change.page_renamed == ("a", "z") and change.page == "z"


@pytest.mark.parametrize("name,match", [("", "non-empty"), ("a/b", "without '/'"), (" c", "surrounding"),
                                        ("b", "already a page named 'b'")])
def test_page_mutators_refuse_bad_or_taken_names(name, match):
    project = two_pages()
    assert match in project.new_page_problem(name)
    with pytest.raises(ProjectError, match=match):
        project.insert_page(Page(name))
    with pytest.raises(ProjectError, match=match):
        project.rename_page("a", name)
    assert [p.name for p in project.pages] == ["a", "b"]


def test_page_mutators_refuse_missing_pages_the_last_page_and_places_out_of_range():
    project = two_pages()
    for call in (lambda: project.remove_page("c"), lambda: project.rename_page("c", "d"),
                 lambda: project.move_page("c", 0)):
        with pytest.raises(ProjectError, match="no page named 'c'"):
            call()
    with pytest.raises(ProjectError, match="no place 2"):
        project.move_page("a", 2)
    project.remove_page("a")
    with pytest.raises(ProjectError, match="at least one page"):
        project.remove_page("b")
    assert [p.name for p in project.pages] == ["b"]
