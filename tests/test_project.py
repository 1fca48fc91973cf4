"""The Project model (blockflow.project): plain data, ids, edges, lookups, equality."""
from __future__ import annotations

import numpy as np
import pytest

from blockflow.errors import ProjectError
from blockflow.project import Edge, Node, Page, Project, arrays_equal, split_port


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
