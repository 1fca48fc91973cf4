"""Reroute points and frames in the model (blockflow/page_layout.py): each mutator's edit, its
refusals, and Page's own mutators keeping them consistent (remove, restore, rename)."""
import copy
import math

import pytest

from blockflow.errors import ProjectError
from blockflow.page_layout import MAX_BENDS, MAX_FRAMES, Frame
from blockflow.project import Edge, Page


def chain() -> Page:
    page = Page("main")
    for nid in ("A", "B", "C"):
        page.add_node("Identity", id=nid)
    page.connect("A", "output", "B", "input")
    page.connect("B", "output", "C", "input")
    return page


AB = Edge("A", "output", "B", "input")
BC = Edge("B", "output", "C", "input")


def test_set_bends_keeps_points_in_order_and_before_undoes():
    page = chain()
    change = page.set_bends(AB, [(10, 20), (30.5, 40)])
    assert page.bends[AB] == ((10.0, 20.0), (30.5, 40.0))
    assert change.fields == ("reroutes",) and not change.computes and change.before == ()
    change = page.set_bends(AB, [])
    assert AB not in page.bends and change.before == ((10.0, 20.0), (30.5, 40.0))


@pytest.mark.parametrize("points, words", [
    ([(0, 0)] * (MAX_BENDS + 1), "the limit is"),
    ([(math.nan, 0)], "finite"),
    ([(math.inf, 0)], "finite"),
    ([(1e9, 0)], "finite"),
    ([(1, 2, 3)], "two finite numbers"),
    ([(True, 0)], "two finite numbers"),
])
def test_set_bends_refuses_bad_points(points, words):
    page = chain()
    with pytest.raises(ProjectError, match=words):
        page.set_bends(AB, points)
    assert page.bends == {}


def test_set_bends_refuses_a_wire_the_page_has_not():
    with pytest.raises(ProjectError, match="no wire"):
        chain().set_bends(Edge("A", "output", "C", "input"), [(0, 0)])


def test_remove_edge_takes_its_points_and_restore_edge_puts_them_back():
    page = chain()
    page.set_bends(AB, [(1, 2)])
    before = copy.deepcopy(page)
    change = page.remove_edge(AB)
    assert page.bends == {} and change.before == ((1.0, 2.0),)
    page.restore_edge(AB, change.index, change.before)
    assert page == before


def test_remove_node_drops_its_wires_points_and_frame_membership_restore_is_exact():
    page = chain()
    page.set_bends(AB, [(1, 2)])
    page.set_bends(BC, [(3, 4)])
    page.insert_frame(Frame("all", "green", "n", ("A", "B")))
    page.insert_frame(Frame("only B", "red", "", ("B",)))
    before = copy.deepcopy(page)
    removed = page.remove_node("B").before
    assert page.bends == {}
    assert page.frames == [Frame("all", "green", "n", ("A",))]      # the emptied frame went
    page.restore_node(removed)
    assert page == before


def test_rename_keeps_points_and_frames():
    page = chain()
    page.set_bends(AB, [(1, 2)])
    page.insert_frame(Frame("f", "blue", "", ("A", "C")))
    page.rename_node("A", "Start")
    assert page.bends == {Edge("Start", "output", "B", "input"): ((1.0, 2.0),)}
    assert page.frames[0].blocks == ("Start", "C")


def test_frame_mutators_and_their_undo():
    page = chain()
    f = Frame("Encoder", "teal", "a note", ("A", "B"))
    change = page.insert_frame(f)
    assert page.frames == [f] and change.index == 0 and change.fields == ("frames",)
    g = Frame("Renamed", "purple", "", ("A",))
    change = page.set_frame(0, g)
    assert page.frames == [g] and change.before == f
    change = page.remove_frame(0)
    assert page.frames == [] and change.before == g
    assert page.nodes.keys() == {"A", "B", "C"}       # its blocks stay
    page.insert_frame(change.before, change.index)
    assert page.frames == [g] and page.frame_of("A") == 0 and page.frame_of("C") is None


@pytest.mark.parametrize("frame, words", [
    (Frame("t", "chartreuse", "", ("A",)), "unknown frame colour"),
    (Frame("x" * 201, "blue", "", ("A",)), "title has 201 characters"),
    (Frame("t", "blue", "n" * 10_001, ("A",)), "note has"),
    (Frame("t\x07", "blue", "", ("A",)), "title"),
    (Frame("t", "blue", "", ("Z",)), "'Z', which the page has not"),
    (Frame("t", "blue", "", ("A", "A")), "twice"),
])
def test_frames_refused(frame, words):
    page = chain()
    with pytest.raises(ProjectError, match=words):
        page.insert_frame(frame)
    assert page.frames == []


def test_too_many_frames_refused(monkeypatch):
    monkeypatch.setattr("blockflow.page_layout.MAX_FRAMES", 2)
    page = chain()
    page.insert_frame(Frame(blocks=("A",)))
    page.insert_frame(Frame(blocks=("B",)))
    with pytest.raises(ProjectError, match="the limit is 2"):
        page.insert_frame(Frame(blocks=("C",)))
    assert MAX_FRAMES == 1000


def test_pages_differing_only_in_layout_are_not_equal():
    a, b = chain(), chain()
    assert a == b
    b.set_bends(AB, [(0, 0)])
    assert a != b
    b.set_bends(AB, [])
    b.insert_frame(Frame(blocks=("A",)))
    assert a != b


def test_group_keeps_the_layout_of_what_stays_and_its_undo_is_exact():
    """Grouping blocks (compile/grouping.py's restructure) keeps the reroute points of wires
    that stay and the frames' other blocks; undoing it brings everything back."""
    from blockflow.compile.grouping import plan_group, restructure
    from blockflow.project import Project
    from blockflow.registry import default_registry
    project = Project()
    page = project.add_page("main")
    page.add_node("Placeholder", id="x", attrs={"shape": [3]})
    page.add_node("Tanh", id="t")
    page.add_node("Exp", id="e")
    page.add_node("Relu", id="r")
    page.connect("x", "output", "t", "x")
    page.connect("t", "y", "e", "x")
    page.connect("x", "output", "r", "features")
    kept = Edge("x", "output", "r", "features")
    page.set_bends(kept, [(5, 6)])
    page.set_bends(Edge("t", "y", "e", "x"), [(1, 2)])
    page.insert_frame(Frame("f", "green", "", ("t", "e", "r")))
    page.insert_frame(Frame("g", "red", "", ("t",)))
    before = copy.deepcopy(project)
    change = restructure(project, plan_group(project, "main", ["t", "e"], "G", registry=default_registry()))
    page = project.page("main")
    assert page.bends == {kept: ((5.0, 6.0),)}
    assert page.frames == [Frame("f", "green", "", ("r",))]
    restructure(project, change.before)
    assert project.page("main") == before.page("main")


def test_a_frame_with_no_block_is_refused_by_the_model_itself():
    """An empty frame cannot be written (the file needs a block per frame): the mutators refuse
    it, so no edit can leave a page that does not save."""
    page = chain()
    page.insert_frame(Frame("f", blocks=("A",)))
    with pytest.raises(ProjectError, match="at least one block"):
        page.insert_frame(Frame("g", blocks=()))
    with pytest.raises(ProjectError, match="at least one block"):
        page.set_frame(0, Frame("f", blocks=()))
    assert page.frames == [Frame("f", blocks=("A",))]
