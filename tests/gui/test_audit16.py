"""Audit of issue 16 (the editor as node-editor users expect it): what a hostile tester found,
each driven as a user would (real mouse and key events on the canvas) or through the Document
the canvas edits through."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from PySide6.QtCore import QMimeData, QPoint, Qt
from PySide6.QtWidgets import QApplication

from blockflow.gui.document.clipboard import FRAGMENT_MIME
from blockflow.gui.document.document import Document
from blockflow.io.project_io import dumps_project, load_project

from test_canvas import doc, make_view, view  # noqa: F401  (fixtures)
from test_main_window import dialogs  # noqa: F401  (no modal dialog stops a test)

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_projects" / "stable_softmax.bflow.json"


def sample_doc() -> Document:
    return Document(load_project(SAMPLE), str(SAMPLE))


def drawn_where_saved(view, doc) -> None:
    """Every block is drawn where the document has it, and no other is drawn."""
    assert set(view.diagram_scene().node_items) == set(doc.page().nodes)
    for nid, node in doc.page().nodes.items():
        pos = view.node_item(nid).pos()
        assert (pos.x(), pos.y()) == tuple(node.position), nid


# ------------------------------------------------------------------ keys in the middle of a drag
@pytest.mark.parametrize("key,mods", [(Qt.Key_BracketRight, Qt.NoModifier), (Qt.Key_BracketLeft, Qt.NoModifier),
                                      (Qt.Key_A, Qt.ControlModifier), (Qt.Key_D, Qt.ControlModifier)])
def test_a_selection_key_while_a_block_is_dragged_moves_no_block_behind_the_documents_back(qtbot, key, mods):
    """Found: ] / [ / Ctrl+A / Ctrl+D pressed while a block was being dragged selected other blocks,
    which Qt then dragged from (0, 0): they were drawn piled near the page's corner while the
    document kept them where they were (and the move recorded only the first block)."""
    d = sample_doc()
    v = make_view(qtbot, d, size=(1400, 800))
    v.fit_to_view()
    QApplication.processEvents()
    start = dumps_project(d.project)
    vp = v.viewport()
    a = v.mapFromScene(v.node_item("Subtract_1").sceneBoundingRect().center()) + QPoint(0, -15)
    qtbot.mousePress(vp, Qt.LeftButton, Qt.NoModifier, a)
    qtbot.mouseMove(vp, a + QPoint(20, 30))
    qtbot.mouseMove(vp, a + QPoint(40, 60))
    v.setFocus()
    qtbot.keyClick(v, key, mods)
    qtbot.mouseMove(vp, a + QPoint(60, 90))
    qtbot.mouseRelease(vp, Qt.LeftButton, Qt.NoModifier, a + QPoint(60, 90))
    QApplication.processEvents()
    drawn_where_saved(v, d)
    while d.undo_stack.canUndo():
        d.undo_stack.undo()
    QApplication.processEvents()
    assert dumps_project(d.project) == start
    drawn_where_saved(v, d)


# ------------------------------------------------------------------ paste
def _far_fragment() -> str:
    """A fragment (as another program, or an old copy, may leave on the clipboard) whose wire's
    reroute point is far from its blocks: pasted at the cursor, the point lands past ±1e7."""
    head = json.loads(dumps_project(sample_doc().project))
    head.pop("pages")
    head.pop("composites", None)
    return json.dumps(dict(head, metadata={"fragment": True}, pages=[{
        "name": "fragment",
        "nodes": [{"id": "a", "block": "Tanh", "position": [-9e9, 0]},
                  {"id": "b", "block": "Tanh", "position": [0, 0]}],
        "edges": [{"from": "a:y", "to": "b:x"}],
        "reroutes": [{"from": "a:y", "to": "b:x", "points": [[9e6, 0]]}]}]))


def test_a_paste_whose_reroute_points_land_out_of_range_is_refused_whole_and_undo_still_works(qtbot, view, doc):
    """Found: the paste's macro was begun, its reroute-point command raised inside push, and the
    macro was never ended: the blocks stayed, Undo did nothing, and every later edit went into the
    open macro."""
    doc.add_node("Tanh", (0, 0), node_id="t")
    QApplication.processEvents()
    mime = QMimeData()
    mime.setData(FRAGMENT_MIME, _far_fragment().encode("utf-8"))
    QApplication.clipboard().setMimeData(mime)
    qtbot.mouseMove(view.viewport(), QPoint(400, 300))
    view.setFocus()
    qtbot.keyClick(view, Qt.Key_V, Qt.ControlModifier)
    QApplication.processEvents()
    assert list(doc.page().nodes) == ["t"]                   # nothing of it was added
    assert doc.undo_stack.count() == 1 and doc.undo_stack.index() == 1
    doc.add_node("Tanh", (300, 0), node_id="u")             # and the stack still takes steps
    assert doc.undo_stack.count() == 2
    doc.undo_stack.undo()
    assert list(doc.page().nodes) == ["t"]
    QApplication.clipboard().clear()


# ------------------------------------------------------------------ group and ungroup keep the layout
def test_group_then_ungroup_keeps_collapsed_blocks_reroute_points_and_frames_of_what_moved(qapp):
    """Found: Group as Composite dropped the grouped blocks' collapsed flags, the reroute points of
    the wires between them and a frame around them alone (the composite's diagram had none of
    them), and Ungroup dropped those of the composite's diagram: a group and an ungroup lost the
    layout the user had made. Undo restored it; the edits themselves lost it."""
    d = sample_doc()
    page = d.page()
    inner = next(e for e in page.edges if (e.src, e.dst) == ("Max_1", "StopGradient_1"))
    d.set_bends(inner, [(300.0, 20.0), (350.0, 30.0)])
    d.add_frame(["Max_1", "StopGradient_1"], title="Shift")
    d.set_collapsed(["StopGradient_1"], True)
    start = dumps_project(d.project)
    inst = d.group(["Max_1", "StopGradient_1", "Subtract_1"])
    body = next(iter(d.project.composites.values())).page
    assert body.nodes["StopGradient_1"].collapsed and not body.nodes["Max_1"].collapsed
    assert body.bends == {inner: ((300.0, 20.0), (350.0, 30.0))}
    assert [(f.title, f.blocks) for f in body.frames] == [("Shift", ("Max_1", "StopGradient_1"))]
    d.ungroup(inst)
    page = d.page()
    assert page.nodes["StopGradient_1"].collapsed and not page.nodes["Max_1"].collapsed
    dx = page.nodes["Max_1"].position[0] - load_project(SAMPLE).pages[0].nodes["Max_1"].position[0]
    dy = page.nodes["Max_1"].position[1] - load_project(SAMPLE).pages[0].nodes["Max_1"].position[1]
    assert page.bends == {inner: ((300.0 + dx, 20.0 + dy), (350.0 + dx, 30.0 + dy))}
    assert [(f.title, f.blocks) for f in page.frames] == [("Shift", ("Max_1", "StopGradient_1"))]
    end = dumps_project(d.project)
    while d.undo_stack.index() > 3:
        d.undo_stack.undo()
    assert dumps_project(d.project) == start
    while d.undo_stack.canRedo():
        d.undo_stack.redo()
    assert dumps_project(d.project) == end


# ------------------------------------------------------------------ searching by TensorFlow's names
@pytest.mark.parametrize("typed,block", [("divide", "RealDiv"), ("negative", "Negate"),
                                         ("stop_gradient", "StopGradient"), ("clip_by_value", "ClipByValue"),
                                         ("squared_difference", "SquaredDifference"), ("log_softmax", "LogSoftmax")])
def test_tensorflow_function_names_find_their_block_in_the_popup_the_palette_and_the_reference(qtbot, view, doc,
                                                                                               typed, block):
    """Found building the stable softmax from scratch: Tab, "Divide", found nothing (the block is
    RealDiv, alias Div); "negative" found Log and Sqrt. tf.stop_gradient, tf.clip_by_value,
    tf.math.squared_difference, tf.nn.log_softmax typed as written found nothing either."""
    from blockflow.gui.panels.blockref import BlockReferencePanel
    from blockflow.gui.panels.palette import PalettePanel
    qtbot.mouseMove(view.viewport(), QPoint(407, 305))
    qtbot.mouseMove(view.viewport(), QPoint(400, 300))
    view.setFocus()
    qtbot.keyClick(view, Qt.Key_Tab)
    popup = view.quick_add
    qtbot.keyClicks(popup.edit, typed)
    assert popup.shown_blocks()[:1] == [block]
    qtbot.keyClick(popup.edit, Qt.Key_Escape)
    palette = PalettePanel(doc.registry)
    qtbot.addWidget(palette)
    palette.set_filter(typed)
    assert palette.visible_blocks()[:1] == [block]
    reference = BlockReferencePanel(doc)
    qtbot.addWidget(reference)
    reference.set_filter(typed)
    assert reference.visible_blocks()[:1] == [block]


# ------------------------------------------------------------------ a keyboard wire and Undo
@pytest.mark.parametrize("then", [Qt.Key_Right, Qt.Key_Return, Qt.Key_P])
@pytest.mark.parametrize("gone", ["target", "source"])
def test_a_block_undone_while_a_wire_is_drawn_from_the_keyboard_is_no_target_and_no_traceback(qtbot, view, doc,
                                                                                            then, gone):
    """Found: P, Enter (a wire from the focused port), then Ctrl+Z took away the block the wire
    was aimed at; the next arrow, P or Enter raised KeyError in the canvas's key handling. A wire
    whose own block went stayed drawn."""
    doc.add_node("Placeholder", (0, 0), node_id="x", attrs={"shape": [3]})
    doc.add_node("Tanh", (300, 0), node_id="t")
    doc.add_node("Tanh", (300, 200), node_id="u")
    QApplication.processEvents()
    if gone == "source":
        doc.undo_stack.undo()
        doc.undo_stack.undo()                       # x alone: its wire will go with it
    view.select_nodes(["x"])
    view.setFocus()
    qtbot.keyClick(view, Qt.Key_P)
    qtbot.keyClick(view, Qt.Key_Return)
    assert view.keyboard.wiring()
    if gone == "target":
        assert {n for n, _ in view.keyboard.targets} == {"t", "u"}
        doc.undo_stack.undo()                       # u goes
        QApplication.processEvents()
        assert {n for n, _ in view.keyboard.targets} == {"t"}
    else:
        doc.remove_nodes(["x"])
        QApplication.processEvents()
        assert not view.keyboard.wiring() and view.interaction() is None
    qtbot.keyClick(view, then)
    qtbot.keyClick(view, Qt.Key_Return)
    QApplication.processEvents()
    if gone == "target":
        assert doc.page().edges and all(e.dst == "t" for e in doc.page().edges)


# ------------------------------------------------------------------ frames moved at odd moments
def _framed(doc):
    doc.add_node("Placeholder", (0, 0), node_id="x", attrs={"shape": [3]})
    doc.add_node("Tanh", (260, 0), node_id="t")
    doc.add_node("Exp", (260, 160), node_id="e")
    doc.connect("x", "output", "t", "x")


@pytest.mark.parametrize("how", ["undo", "delete"])
def test_a_frame_taken_away_while_it_is_dragged_moves_no_other_frame_and_raises_nothing(qtbot, view, doc, how):
    """Found: the frame's drag kept the frame's index. Undo in the middle of the drag took the
    frame away and the release raised IndexError in Document.move_frame; Delete (the frame is
    selected by its title) took it away and the release moved the blocks of the frame that came
    to have its index."""
    from PySide6.QtCore import QPointF
    _framed(doc)
    if how == "undo":
        doc.add_frame(["e"], title="other")
    doc.add_frame(["x", "t"], title="dragged")
    if how == "delete":
        doc.add_frame(["e"], title="other")
    QApplication.processEvents()
    index = 1 if how == "undo" else 0
    bar = view.canvas_layout.frames[index].title_bar()
    a = view.mapFromScene(QPointF(bar.left() + 30, bar.center().y()))
    b = a + QPoint(100, 60)
    vp = view.viewport()
    before = {n: node.position for n, node in doc.page().nodes.items()}
    qtbot.mousePress(vp, Qt.LeftButton, Qt.NoModifier, a)
    qtbot.mouseMove(vp, a + QPoint(50, 30))
    if how == "undo":
        doc.undo_stack.undo()                  # Edit > Undo (Ctrl+Z): the frame's adding
    else:
        view.setFocus()
        qtbot.keyClick(view, Qt.Key_Delete)
    QApplication.processEvents()
    qtbot.mouseMove(vp, b)
    qtbot.mouseRelease(vp, Qt.LeftButton, Qt.NoModifier, b)
    QApplication.processEvents()
    assert [f.title for f in doc.page().frames] == ["other"]
    assert {n: node.position for n, node in doc.page().nodes.items()} == before
    assert view.interaction() is None
    drawn_where_saved(view, doc)


def test_a_frame_moved_so_far_that_its_reroute_points_leave_the_range_is_refused_before_its_macro(qtbot, view, doc):
    """Found: Document.move_frame pushed the blocks' move, then a reroute point's move that the
    model refused (past ±1e7) raised inside the open macro: the stack stayed in the macro, Undo
    did nothing and every later edit joined it."""
    from blockflow.errors import ProjectError
    _framed(doc)
    doc.set_bends(doc.page().edges[0], [(9_999_000.0, 0.0)])
    doc.add_frame(["x", "t"])
    steps = doc.undo_stack.count()
    with pytest.raises(ProjectError):
        doc.move_frame(0, 5000.0, 0.0)
    assert doc.undo_stack.count() == steps and doc.undo_stack.index() == steps
    assert doc.page().nodes["t"].position == (260.0, 0.0)
    with pytest.raises(ProjectError):
        doc.move_frame(7, 10.0, 0.0)                      # no such frame: refused, not IndexError


# ------------------------------------------------------------------ a reroute point taken away while dragged
@pytest.mark.parametrize("how", ["undo", "delete"])
def test_a_reroute_point_taken_away_while_it_is_dragged_is_not_put_back_on_release(qtbot, view, doc, how):
    """Found: pressing a reroute point selects it; Delete (or Undo of its adding) in the middle of
    the drag took it away, and the release put it back, moved, as a new undo step: the Delete
    (the Undo) was silently reverted."""
    from PySide6.QtCore import QPointF
    from blockflow.project import Edge
    doc.add_node("Placeholder", (0, 0), node_id="x", attrs={"shape": [3]})
    doc.add_node("Tanh", (400, 0), node_id="t")
    doc.connect("x", "output", "t", "x")
    wire = Edge("x", "output", "t", "x")
    doc.set_bends(wire, [(200.0, 60.0)])
    QApplication.processEvents()
    a = view.mapFromScene(QPointF(200, 60))
    vp = view.viewport()
    qtbot.mousePress(vp, Qt.LeftButton, Qt.NoModifier, a)
    qtbot.mouseMove(vp, a + QPoint(0, 40))
    if how == "undo":
        doc.undo_stack.undo()
    else:
        view.setFocus()
        qtbot.keyClick(view, Qt.Key_Delete)
    QApplication.processEvents()
    steps = doc.undo_stack.index()
    qtbot.mouseMove(vp, a + QPoint(0, 80))
    qtbot.mouseRelease(vp, Qt.LeftButton, Qt.NoModifier, a + QPoint(0, 80))
    QApplication.processEvents()
    assert wire not in doc.page().bends
    assert doc.undo_stack.index() == steps and view.interaction() is None


# ------------------------------------------------------------------ the block's page as Qt draws it
def test_a_blocks_input_table_after_its_gradient_rule_has_its_header_drawn_as_a_header(qtbot, doc):
    """Found looking at F1 on Xvfb: in every block page with a gradient rule (Add, StopGradient,
    ...) the input table's first header cell was drawn as plain text one line low, the other
    header cells bold: Qt's Markdown reader carries the code block's paragraph format into a
    table that follows it."""
    from blockflow.gui.panels.blockref import BlockReferencePanel
    reference = BlockReferencePanel(doc)
    qtbot.addWidget(reference)
    for name in ("Add", "StopGradient"):
        assert reference.show_block(name)
        html = reference.page.toHtml()
        table = html[html.index("<table"):]
        first_cell = table[:table.index("</td>")]
        assert "font-weight:700" in first_cell and "margin-top:6px" not in first_cell, name


# ------------------------------------------------------------------ the gradient legend on a small canvas
def test_the_gradient_legend_gives_way_on_a_canvas_too_small_for_it_and_comes_back_with_room(qtbot):
    """Found on Xvfb at QT_SCALE_FACTOR=2 (1600x900): after Train, the legend covered about half
    of the canvas the docks left (the wires it explains were under it)."""
    from test_gradients import backward, make_view as gradient_view
    d = sample_doc()
    v = gradient_view(qtbot, d, size=(300, 240))
    hl = v.gradients
    _, gview = backward(d)
    hl.show(gview)
    QApplication.processEvents()
    legend = hl.legend_widget
    vp = v.viewport().size()
    assert legend.legend.size().width() * legend.legend.size().height() > 0.3 * vp.width() * vp.height()
    assert not legend.isVisible()
    v.resize(1400, 800)
    QApplication.processEvents()
    assert legend.isVisible()
    v.resize(300, 240)
    QApplication.processEvents()
    assert not legend.isVisible()


# ------------------------------------------------------------------ copy and paste a composite's instance
def test_a_composite_instance_copied_and_pasted_gets_a_valid_id_and_one_undo_step(qtbot, view, doc):
    """Found by a random run of edits: a pasted instance whose id was taken was named after its
    block with the "@" (``@Group1_1``), which no id may hold: the paste's macro raised half-way
    and stayed open (Undo did nothing, later edits went into it). Ctrl+C, Ctrl+V of any
    composite instance did it; Ctrl+D too."""
    doc.add_node("Placeholder", (0, 0), node_id="x", attrs={"shape": [3]})
    doc.add_node("Tanh", (300, 0), node_id="t")
    doc.connect("x", "output", "t", "x")
    inst = doc.group(["t"])
    QApplication.processEvents()
    block = doc.page().nodes[inst].block
    view.select_nodes([inst])
    view.setFocus()
    qtbot.mouseMove(view.viewport(), QPoint(600, 400))
    qtbot.keyClick(view, Qt.Key_C, Qt.ControlModifier)
    steps = doc.undo_stack.count()
    qtbot.keyClick(view, Qt.Key_V, Qt.ControlModifier)
    qtbot.keyClick(view, Qt.Key_D, Qt.ControlModifier)
    QApplication.processEvents()
    pasted = [n for n, node in doc.page().nodes.items() if node.block == block and n != inst]
    assert len(pasted) == 2 and all(not n.startswith("@") for n in pasted), pasted
    assert doc.undo_stack.count() == steps + 2 and doc.undo_stack.index() == steps + 2
    doc.undo_stack.undo()
    doc.undo_stack.undo()
    assert [n for n, node in doc.page().nodes.items() if node.block == block] == [inst]
    QApplication.clipboard().clear()


# ------------------------------------------------------------------ the shortcut list
def test_the_shortcut_list_says_undo_and_redo_not_the_last_edits_name(qtbot, tmp_path, dialogs):
    """Found looking at Help > Keyboard Shortcuts after a few edits: its row for Ctrl+Z read
    "Undo Collapse 1 block(s)" (the Edit menu's live text), and changed with every edit."""
    from test_main_window import make_window
    from test_shortcuts import open_shortcuts
    window = make_window(qtbot, str(tmp_path / "s.ini"), sample_doc())
    window.document.set_collapsed(["Max_1"], True)
    window.document.set_collapsed(["Exp_1" if "Exp_1" in window.document.page().nodes else "Softmax_1"], True)
    window.document.undo_stack.undo()
    dialog = open_shortcuts(qtbot, window)
    edit = {what for group, _, what in dialog.rows() if group.startswith("Edit")}
    assert {"Undo", "Redo"} <= edit, sorted(edit)
    assert not any(what.startswith(("Undo ", "Redo ")) for what in edit)
    dialog.close()
