"""Gradient highlighting on the canvas (blockflow/gui/canvas/gradients.py) and `blockflow render --grad`.

The wire colours and widths are checked against the colour map at the runtime's own gradient
norms (through wire_style, which reads the pen each wire is drawn with), and on the pixels drawn.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import QPointF, QRect, Qt
from PySide6.QtGui import QColor, QFont, QImage, QPalette
from PySide6.QtWidgets import QApplication

from blockflow.cli import EXIT_DIAGNOSTICS, EXIT_OK, EXIT_RUN, EXIT_USAGE
from blockflow.compile.compiler import compile_project
from blockflow.present.gradview import GradientView
from blockflow.gui import app
from blockflow.gui.canvas.view import DiagramView
from blockflow.gui.document.document import Document
from blockflow.gui.canvas.gradients import GradientHighlighter
from blockflow.gui.canvas.gradlegend import FanoutLabel
from blockflow.gui.canvas.gradstyle import LEVELS, NEGLIGIBLE, level_colours, level_width
from blockflow.gui.main_window.canvas_results import GradientsOnCanvas
from blockflow.gui.session.session import Session
from blockflow.gui.common.theme import Style
from blockflow.io.project_io import dumps_project, load_project
from blockflow.run.runtime import run, run_backward

from diagrams import chain

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_projects" / "stable_softmax.bflow.json"
CUT = {"x.output -> Max_1.input", "Max_1.output -> StopGradient_1.input"}


# ------------------------------------------------------------------------------- helpers
@pytest.fixture(autouse=True)
def no_modal_dialogs(monkeypatch):
    """Closing a window with unsaved edits would ask (and wait): discard instead."""
    from PySide6.QtWidgets import QMessageBox
    monkeypatch.setattr(QMessageBox, "question", staticmethod(lambda *a, **k: QMessageBox.Discard))


def make_view(qtbot, doc, size=(1500, 650)):
    QApplication.instance().setFont(QFont("DejaVu Sans", 9))
    view = DiagramView(doc)
    qtbot.addWidget(view)
    view.resize(*size)
    view.show()
    qtbot.waitExposed(view)
    view.fit_to_view()
    QApplication.processEvents()
    return view


def backward(doc, target=None):
    """A recorded backward run of the document's current page, nothing committed, and its view."""
    program = doc.program()
    result = run_backward(program, target=target, record=True, commit=False)
    return result, GradientView(program, result=result)


@pytest.fixture
def sample_view(qtbot):
    return make_view(qtbot, Document(load_project(SAMPLE)))


def two_branches(n=3, values=None):
    """x feeds Tanh and Square; both added and summed into the loss: x's gradient accumulates."""
    x = np.asarray(values if values is not None else np.linspace(0.5, 2.0, n), np.float32)
    project = chain(("x", "Placeholder", {"shape": [x.size]}, None),
                    ("t", "Tanh", {}, {"x": "x"}),
                    ("q", "Square", {}, {"x": "x"}),
                    ("a", "Add", {}, {"x": "t", "y": "q"}),
                    ("L", "Sum", {}, {"input": "a"}),
                    feeds={"x": x})
    page = project.pages[0]
    for nid, pos in {"x": (0, 100), "t": (220, 0), "q": (220, 200), "a": (440, 100), "L": (660, 100)}.items():
        page.nodes[nid].position = pos
    page.loss = "L"
    return project


def edge(view, text: str):
    return next(e for e in view.diagram_scene().edge_items if str(e) == text)


def lightness(name: str) -> float:
    return QColor(name).lightnessF()


def luminance(c: QColor) -> float:
    """Relative luminance (WCAG): what "lighter" means to the eye."""
    def lin(v):
        return v / 12.92 if v <= 0.04045 else ((v + 0.055) / 1.055) ** 2.4
    return 0.2126 * lin(c.redF()) + 0.7152 * lin(c.greenF()) + 0.0722 * lin(c.blueF())


def contrast(a: QColor, b: QColor) -> float:
    la, lb = sorted((luminance(a), luminance(b)))
    return (lb + 0.05) / (la + 0.05)


def dark_palette() -> QPalette:
    pal = QPalette()
    for role, colour in ((QPalette.Base, "#1e1f22"), (QPalette.Window, "#2b2d30"), (QPalette.Text, "#dfe1e5"),
                         (QPalette.WindowText, "#dfe1e5"), (QPalette.Highlight, "#3574f0")):
        pal.setColor(role, QColor(colour))
    return pal


def near(a: QColor, b: QColor, tol: int = 40) -> bool:
    return abs(a.red() - b.red()) + abs(a.green() - b.green()) + abs(a.blue() - b.blue()) <= tol


# ------------------------------------------------------------------------------- the sample
def test_every_wire_is_coloured_by_the_runtime_gradient_norm_and_the_cut_is_grey(qtbot, sample_view):
    view, hl = sample_view, sample_view.gradients
    result, gview = backward(view.doc)
    with qtbot.waitSignal(hl.changed, timeout=1000):
        hl.show(gview)
    assert hl.current is gview and hl.mode == "run"
    norms = {e: float(np.linalg.norm(g)) for e, g in result.edge_grads.items()
             if str(e) not in CUT}
    # the scale: from the smallest norm that is not negligible to the largest; StopGradient's
    # output gets a gradient that is zero up to rounding (softmax ignores a shift): drawn as ≈ 0
    high = max(norms.values())
    assert hl.scale.high == pytest.approx(high)
    assert hl.scale.low == pytest.approx(min(n for n in norms.values() if n >= high * NEGLIGIBLE))
    tiny = edge(view, "StopGradient_1.output -> Subtract_1.y")
    assert 0 < norms[tiny] < high * NEGLIGIBLE
    colours = level_colours(dark=view.style_.dark)
    fine = view.style_.fine_wires
    cut_style = None
    for e in view.diagram_scene().edge_items:
        style = hl.wire_style(e)
        assert len(style) == 5
        if str(e) in CUT:
            assert style.state == "cut" and style.dashed and style.level == -1
            assert style.colour not in {c.name() for c in colours}
            cut_style = cut_style or style
            assert style == cut_style                     # one shared look for the cut wires
            continue
        assert style.state == "flows" and not style.dashed
        if e == tiny:
            assert style.level == -1 and style.colour not in {c.name() for c in colours}
            assert style.width < level_width(0, fine)
            continue
        level = hl.scale.level(norms[e])
        assert style.level == level, e
        assert style.colour == colours[level].name(), e
        assert style.width == pytest.approx(level_width(level, fine)), e
    # the biggest gradient is the widest wire, the near-zero one (StopGradient's output, its
    # gradient is zero up to rounding) the narrowest
    widths = {str(e): hl.wire_style(e).width for e in norms}
    assert max(widths, key=widths.get) == str(max(norms, key=norms.get))
    assert min(widths, key=widths.get) == str(tiny)
    # the colours use the whole map: the smallest real gradient at the bottom, the largest on top
    assert {hl.wire_style(e).level for e in norms if e != tiny} >= {0, LEVELS - 1}
    assert any("≈ 0" in text for _, text in hl.legend.rows)
    assert hl.dimmed_nodes() == ["Max_1"] and view.node_item("Max_1").dimmed


def test_the_pixels_show_the_colours_the_dimmed_block_and_the_legend(qtbot, sample_view):
    view, hl = sample_view, sample_view.gradients
    view.reset_zoom()
    view.centerOn(QPointF(700, 200))
    QApplication.processEvents()
    before = view.viewport().grab().toImage()
    result, gview = backward(view.doc)
    hl.show(gview)
    QApplication.processEvents()
    img = view.viewport().grab().toImage()
    # the thickest wire is drawn in its level's colour along its middle
    e = edge(view, "Softmax_1.softmax -> Multiply_1.x")
    style = hl.wire_style(e)
    mid = view.mapFromScene(view.edge_item(e).path().pointAtPercent(0.5))
    assert near(img.pixelColor(mid), QColor(style.colour)), (img.pixelColor(mid).name(), style.colour)
    assert not near(before.pixelColor(mid), QColor(style.colour))
    # Max_1 is washed out: its title text has far fewer dark pixels than before
    def dark_pixels(image, nid):
        r = view.mapFromScene(view.node_item(nid).sceneBoundingRect()).boundingRect() & image.rect()
        return sum(1 for x in range(r.left(), r.right()) for y in range(r.top(), r.bottom())
                   if image.pixelColor(x, y).lightnessF() < 0.35)
    assert dark_pixels(img, "Max_1") < 0.3 * dark_pixels(before, "Max_1")
    assert dark_pixels(img, "StopGradient_1") > 0.8 * dark_pixels(before, "StopGradient_1")
    # the legend: over the bottom-left corner of the canvas, drawn, with the colour bar
    legend = hl.legend_widget

    def in_corner():
        vp, box = view.viewport().geometry(), legend.geometry()
        return vp.contains(box) and box.left() - vp.left() < 20 and vp.bottom() - box.bottom() < 20

    assert legend.isVisible() and in_corner()
    assert legend.testAttribute(Qt.WA_TransparentForMouseEvents)
    shot = view.grab().toImage()
    area = legend.geometry()
    bar_colours = {c.name() for c in level_colours(view.style_.dark)}
    seen = {shot.pixelColor(x, y).name() for x in range(area.left(), area.right())
            for y in range(area.top(), area.bottom())}
    assert len(seen & bar_colours) >= LEVELS // 2
    assert hl.legend.title() == "gradient of Sum_1, per wire"
    assert any(text == "cut by StopGradient" for _, text in hl.legend.rows)
    # it stays in the corner when the view pans, zooms or is resized
    view.centerOn(QPointF(100, 600))
    view.zoom_out()
    view.resize(900, 500)
    QApplication.processEvents()
    assert in_corner()


def test_hovering_says_what_a_stop_gradient_cut_and_what_a_wire_carries(sample_view):
    view, hl = sample_view, sample_view.gradients
    result, gview = backward(view.doc)
    hl.show(gview)
    sg = view.node_item("StopGradient_1")
    text = view.tooltip_at(sg.sceneBoundingRect().center())
    assert "StopGradient_1 cuts 2 wires off the gradient of Sum_1" in text
    assert "nothing flows back to Max_1, x" in text
    text = view.tooltip_at(view.node_item("Max_1").sceneBoundingRect().center())
    assert "no gradient of Sum_1 reaches Max_1" in text and "StopGradient_1" in text
    e = edge(view, "Subtract_1.z -> Softmax_1.logits")
    text = view.tooltip_at(view.edge_item(e).path().pointAtPercent(0.5))
    assert "carries gradient to the target" in text
    norm = float(np.linalg.norm(result.edge_grads[e].astype(np.float64)))
    assert f"norm {norm:.4g}" in text.split("gradient:")[1]
    assert "value: [5] float32" in text
    cut = edge(view, "Max_1.output -> StopGradient_1.input")
    text = view.tooltip_at(view.edge_item(cut).path().pointAtPercent(0.5))
    assert "gradient is cut by StopGradient_1" in text and "gradient:" not in text
    hl.clear()
    text = view.tooltip_at(view.edge_item(e).path().pointAtPercent(0.5))
    assert text == "Subtract_1.z -> Softmax_1.logits: float32[5]"


def test_static_paths_before_any_run(qtbot, sample_view):
    view, hl = sample_view, sample_view.gradients
    program = view.doc.program()
    hl.show_paths(GradientView(program, "Sum_1"))
    assert hl.mode == "paths" and not hl.current.ran and hl.scale is None
    styles = {str(e): hl.wire_style(e) for e in view.diagram_scene().edge_items}
    flowing = {s for k, s in styles.items() if k not in CUT}
    assert len(flowing) == 1                          # one highlight colour and width for all
    (paths,) = flowing
    assert paths.state == "flows" and paths.level == -1 and not paths.dashed
    assert all(styles[k].state == "cut" and styles[k].dashed for k in CUT)
    assert hl.dimmed_nodes() == ["Max_1"] and hl.labels == []
    assert hl.legend.title() == "gradient paths to Sum_1"
    assert [text for _, text in hl.legend.rows] == ["can carry gradient to Sum_1", "cut by StopGradient"]


def test_clear_gives_every_wire_and_block_its_look_back(qtbot, sample_view):
    view, hl = sample_view, sample_view.gradients
    items = view.diagram_scene().edge_items
    before = {e: (it.pen().color().name(), it.pen().widthF(), it.pen().style()) for e, it in items.items()}
    hl.show(backward(view.doc)[1])
    assert any((it.pen().color().name(), it.pen().widthF(), it.pen().style()) != before[e]
               for e, it in items.items())
    with qtbot.waitSignal(hl.changed, timeout=1000):
        hl.clear()
    assert {e: (it.pen().color().name(), it.pen().widthF(), it.pen().style()) for e, it in items.items()} == before
    assert hl.current is None and hl.dimmed_nodes() == [] and not hl.legend_widget.isVisible()
    assert all(hl.wire_style(e).state == "none" for e in items)


def test_focus_keeps_one_block_and_its_wires_and_fades_the_rest(sample_view):
    view, hl = sample_view, sample_view.gradients
    hl.show(backward(view.doc)[1])
    shown = {e: hl.wire_style(e) for e in view.diagram_scene().edge_items}
    incoming = [edge(view, "Subtract_1.z -> Softmax_1.logits")]
    outgoing = [edge(view, "x.output -> Subtract_1.x"), edge(view, "StopGradient_1.output -> Subtract_1.y")]
    hl.focus("Subtract_1", incoming, outgoing)
    assert hl.focused == ("Subtract_1", frozenset(incoming), frozenset(outgoing))
    bg = view.style_.background
    for e, style in shown.items():
        now = hl.wire_style(e)
        if e in incoming or e in outgoing:
            assert now == style
        else:     # faint: same state, level, width and dashes; colour washed towards the background
            assert now[:2] == style[:2] and now.width == style.width and now.dashed == style.dashed
            d_now = abs(lightness(now.colour) - bg.lightnessF())
            d_was = abs(lightness(style.colour) - bg.lightnessF())
            assert d_now < 0.5 * d_was, (e, now.colour, style.colour)
    # the block and the blocks at the ends of its wires stay; the rest (and the cut) is dimmed
    assert hl.dimmed_nodes() == sorted(["Max_1", "Multiply_1", "Sum_1", "w"])
    hl.focus(None, [], [])
    assert {e: hl.wire_style(e) for e in shown} == shown and hl.dimmed_nodes() == ["Max_1"]


# ------------------------------------------------------------------------------- fan-out sums
def parse_array(text: str) -> np.ndarray:
    return np.array([float(v) for v in re.findall(r"-?\d+(?:\.\d+)?(?:e[-+]\d+)?", text)])


def test_a_fanout_label_shows_both_contributions_and_their_sum_equal_to_the_runtime(qtbot):
    view = make_view(qtbot, Document(two_branches()), size=(1000, 500))
    hl = view.gradients
    result, gview = backward(view.doc)
    hl.show(gview)
    label = hl.label_of("x", "output")
    assert isinstance(label, FanoutLabel) and len(hl.labels) == 1
    x = np.array([0.5, 1.25, 2.0])
    # the label's numbers: one row per receiving block (top one first), then the total
    rows = dict(label.rows)
    assert label.header == "Σ at x.output: the gradients add up"
    assert list(rows) == ["   from Tanh t", "+ from Square q", "= total"]
    np.testing.assert_allclose(parse_array(rows["   from Tanh t"]), 1 - np.tanh(x) ** 2, rtol=5e-3)
    np.testing.assert_allclose(parse_array(rows["+ from Square q"]), 2 * x, rtol=5e-3)
    np.testing.assert_allclose(parse_array(rows["= total"]), result.grad("x"), rtol=5e-3)
    # its data: the contributions add up to the runtime's gradient of x
    summed = sum(np.asarray(g, np.float64) for _, g in label.fanout.contributions)
    np.testing.assert_allclose(summed, result.grad("x"), rtol=1e-6)
    assert label.fanout.total is result.grads[("x", "output")]
    # it sits beside x's output, over no block
    port = view.node_item("x").port_scene_pos("output")
    rect = label.sceneBoundingRect()
    assert rect.left() > port.x() and abs(rect.center().y() - port.y()) < 150
    for nid, item in view.diagram_scene().node_items.items():
        assert not rect.intersects(item.sceneBoundingRect()), nid
    # the wires' tooltips tell their share
    text = view.tooltip_at(view.edge_item(edge(view, "x.output -> t.x")).path().pointAtPercent(0.5))
    assert "one of 2 gradients that add up at x.output" in text
    # and it follows the block when it moves
    offset = rect.topLeft() - view.node_item("x").pos()
    view.doc.move_nodes({"x": (view.doc.page().nodes["x"].position, (-100.0, 300.0))})
    assert label.sceneBoundingRect().topLeft() - view.node_item("x").pos() == offset
    assert hl.current is gview


@pytest.mark.parametrize("values, form", [([0.7], "scalar"), (np.linspace(-2, 2, 9), "norms")])
def test_fanout_labels_of_scalars_and_of_big_arrays(qtbot, values, form):
    view = make_view(qtbot, Document(two_branches(values=values)), size=(1000, 500))
    result, gview = backward(view.doc)
    view.gradients.show(gview)
    label = view.gradients.label_of("x")
    total = result.grad("x").astype(np.float64)
    if form == "scalar":     # one line, and the numbers add up: Σ total = tanh' + square'
        assert label.rows == [] and label.header.startswith("Σ ")
        numbers = parse_array(label.header)
        x = values[0]
        np.testing.assert_allclose(numbers, [total.item(), 1 - np.tanh(x) ** 2, 2 * x], rtol=5e-3)
        assert numbers[1] + numbers[2] == pytest.approx(numbers[0], rel=5e-3)
    else:                    # norms, said to be added element-wise
        assert label.header.endswith("element-wise")
        rows = dict(label.rows)
        assert parse_array(rows["= total"])[0] == pytest.approx(np.linalg.norm(total), rel=5e-3)
        assert parse_array(rows["+ from Square q"])[0] == pytest.approx(np.linalg.norm(2 * np.asarray(values)), rel=5e-3)


def test_many_fanouts_label_only_the_block_being_stepped_through(qtbot, monkeypatch):
    from blockflow.gui.canvas import gradients
    monkeypatch.setattr(gradients, "MAX_FANOUT_LABELS", 0)
    view = make_view(qtbot, Document(two_branches()), size=(1000, 500))
    hl = view.gradients
    hl.show(backward(view.doc)[1])
    assert hl.labels == []
    sent = [edge(view, "x.output -> t.x"), edge(view, "x.output -> q.x")]
    hl.focus("x", sent, [])
    assert [lb.fanout.node for lb in hl.labels] == ["x"]
    hl.focus("t", [edge(view, "t.y -> a.x")], [sent[0]])
    assert hl.labels == []


# ------------------------------------------------------------------------------- following edits
def test_edits_clear_a_run_highlight_moves_keep_it_and_static_paths_follow_edits(qtbot, sample_view):
    # the session follows the edits; the shell puts its gradient view on the canvas
    view, hl = sample_view, sample_view.gradients
    session = Session(view.doc, view)
    GradientsOnCanvas(view, session, view)
    session.show_gradients(backward(view.doc)[1])
    view.doc.move_nodes({"Max_1": ((200.0, 40.0), (220.0, 20.0))})
    assert hl.mode == "run" and hl.dimmed_nodes() == ["Max_1"]
    with qtbot.waitSignal(session.status_message, timeout=1000) as msg:
        view.doc.set_feed("x", np.array([1.0, 5.0, 0.0, 3.0, -1.0], np.float32))
    assert hl.current is None and hl.dimmed_nodes() == [] and "diagram changed" in msg.args[0]
    # static paths are recomputed after an edit (they need no run)
    session.show_gradients(GradientView(view.doc.program(), "Sum_1"))
    first = hl.current
    view.doc.disconnect([edge(view, "Max_1.output -> StopGradient_1.input")])
    view.doc.connect("x", "output", "StopGradient_1", "input")
    qtbot.waitUntil(lambda: hl.current is not first and hl.current is not None, timeout=2000)
    assert hl.mode == "paths"
    styles = {str(e): hl.wire_style(e).state for e in view.diagram_scene().edge_items}
    assert styles["x.output -> StopGradient_1.input"] == "cut"
    assert styles["x.output -> Max_1.input"] == "unreached" and hl.wire_style(
        edge(view, "x.output -> Max_1.input")).dashed
    assert any(text == "no gradient to Sum_1" for _, text in hl.legend.rows)
    # a renamed block: its items are rebuilt, the paths drawn on the new ones
    second = hl.current
    view.doc.rename_node("Softmax_1", "sm")
    qtbot.waitUntil(lambda: hl.current is not second and hl.current is not None, timeout=2000)
    assert hl.wire_style(edge(view, "sm.softmax -> Multiply_1.x")).state == "flows"
    assert view.edge_item(edge(view, "sm.softmax -> Multiply_1.x")).grad_pen is not None
    # another page: nothing of this page's highlighting stays
    view.doc.set_current_page("naive")
    assert hl.current is None and not hl.legend_widget.isVisible()
    assert all(it.grad_pen is None for it in view.diagram_scene().edge_items.values())


def test_the_colours_follow_a_dark_palette_and_read_on_both(qtbot, sample_view):
    light = level_colours(dark=False)
    dark = level_colours(dark=True)
    # ordered: on a light canvas larger gradients are darker, on a dark one lighter, so a larger
    # gradient always stands out more from the background; the smallest still reads on it
    for colours, style in ((light, Style(QPalette())), (dark, Style(dark_palette()))):
        ratios = [contrast(c, style.background) for c in colours]
        assert ratios == sorted(ratios) and len(set(ratios)) == len(ratios), style.dark
        assert ratios[0] > 1.8 and ratios[-1] > 7, (style.dark, ratios[0], ratios[-1])
    view, hl = sample_view, sample_view.gradients
    hl.show(backward(view.doc)[1])
    view.setPalette(dark_palette())
    qtbot.waitUntil(lambda: view.style_.dark and hl.wire_style(
        edge(view, "Multiply_1.z -> Sum_1.input")).colour in {c.name() for c in dark}, timeout=2000)
    e = edge(view, "Softmax_1.softmax -> Multiply_1.x")
    assert hl.wire_style(e).colour == dark[hl.wire_style(e).level].name()


def test_far_out_the_overview_draws_the_gradient_colours(qtbot, sample_view, monkeypatch):
    view, hl = sample_view, sample_view.gradients
    hl.show(backward(view.doc)[1])
    scene = view.diagram_scene()
    scene.set_overview(True)
    scene.overview.rebuild()
    drawn = {pen.color().name() for tile in scene.overview._tiles for pen, _ in tile[1]}
    shown = {hl.wire_style(e).colour for e in scene.edge_items}
    assert drawn == shown
    scene.set_overview(False)


# ------------------------------------------------------------------------------- main window
def test_view_menu_gradient_paths_and_a_page_without_a_loss(qtbot, tmp_path):
    from PySide6.QtCore import QSettings
    from blockflow.gui.main_window import MainWindow

    window = MainWindow(Document(load_project(SAMPLE)), QSettings(str(tmp_path / "s.ini"), QSettings.IniFormat))
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    act = window.actions["gradient_paths"]
    assert act.isCheckable() and act in window.view_menu.actions()
    hl = window.view.gradients
    act.trigger()
    # the page compiles off the UI thread when it takes more than WAIT (a loaded machine): wait
    qtbot.waitUntil(lambda: hl.current is not None, timeout=2000)
    assert act.isChecked() and hl.mode == "paths" and hl.current.target == ("Sum_1", "output")
    act.trigger()
    assert not act.isChecked() and hl.current is None
    # a page without a loss: a message, and the action does not stay on
    window.document.add_page("empty")
    window.document.set_current_page("empty")
    act.trigger()
    assert not act.isChecked() and hl.current is None
    assert "marks no loss" in window.statusBar().currentMessage()
    # the paths follow the page while the action is on
    window.document.set_current_page("stable_softmax")
    act.trigger()
    window.document.set_current_page("naive")
    qtbot.waitUntil(lambda: hl.current is not None and hl.current.program.page_name == "naive", timeout=2000)
    assert act.isChecked() and hl.mode == "paths"
    # a backward run's gradients replace the static paths (as a run from the Run menu does)
    result, gview = backward(window.document)
    window.session.show_gradients(gview)
    assert not act.isChecked() and hl.mode == "run"


def test_a_backward_run_from_the_run_controls_is_highlighted_and_a_clear_removes_it(qtbot, tmp_path):
    from PySide6.QtCore import QSettings
    from blockflow.gui.main_window import MainWindow

    window = MainWindow(Document(load_project(SAMPLE)), QSettings(str(tmp_path / "s.ini"), QSettings.IniFormat))
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    rc = window.run_controller
    hl = window.view.gradients
    with qtbot.waitSignal(rc.run_finished, timeout=5000):
        rc.backward()
    qtbot.waitUntil(lambda: hl.mode == "run", timeout=2000)
    assert hl.current.result is rc.last_result and hl.dimmed_nodes() == ["Max_1"]
    with qtbot.waitSignal(rc.run_finished, timeout=5000):
        rc.forward()                    # a new run: the old gradients go
    assert hl.current is None
    with qtbot.waitSignal(rc.run_finished, timeout=5000):
        rc.backward()
    qtbot.waitUntil(lambda: hl.mode == "run", timeout=2000)
    shown = hl.current
    # an edit clears it; undoing the edit makes the run current again, and its gradients come back
    window.document.set_feed("x", np.array([0.0, 1.0, 2.0, 3.0, 4.0], np.float32))
    assert hl.current is None
    window.document.undo_stack.undo()
    qtbot.waitUntil(lambda: hl.mode == "run", timeout=2000)
    assert hl.current.result is shown.result
    rc.clear()
    assert hl.current is None and all(it.grad_pen is None for it in window.view.diagram_scene().edge_items.values())


def test_gradient_paths_follow_the_backward_target_picked_in_the_run_toolbar(qtbot, tmp_path):
    from PySide6.QtCore import QSettings
    from blockflow.gui.main_window import MainWindow

    window = MainWindow(Document(load_project(SAMPLE)), QSettings(str(tmp_path / "s.ini"), QSettings.IniFormat))
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    hl, combo = window.view.gradients, window.target_combo
    window.actions["gradient_paths"].trigger()
    # the page compiles off the UI thread: the paths are shown once its program is ready
    qtbot.waitUntil(lambda: hl.current is not None, timeout=5000)
    assert hl.current.target == ("Sum_1", "output")
    combo.setCurrentIndex(combo.findData("Max_1:output"))
    qtbot.waitUntil(lambda: hl.current is not None and hl.current.target == ("Max_1", "output"), timeout=2000)
    assert hl.wire_style(edge(window.view, "x.output -> Max_1.input")).state == "flows"
    assert hl.wire_style(edge(window.view, "Softmax_1.softmax -> Multiply_1.x")).state == "unreached"


# ------------------------------------------------------------------------------- render --grad
def legend_box(path: Path) -> tuple[QImage, QRect]:
    """The picture and where its legend is: under the diagram, at the left."""
    img = QImage(str(path))
    assert not img.isNull()
    project = load_project(SAMPLE)
    from blockflow.gui.canvas.render import ensure_app
    ensure_app()
    style = Style()
    from blockflow.gui.canvas.scene import DiagramScene
    from blockflow.registry import default_registry
    scene = DiagramScene(default_registry(), style)
    scene.render_mode = True
    hl = GradientHighlighter(scene)
    scene.load(project.page("stable_softmax"), compile_project(project, "stable_softmax"))
    hl.show(GradientView(scene.program, result=run(scene.program, target="Sum_1", record=True, commit=False)))
    size = hl.legend.size()
    return img, QRect(40, img.height() - 20 - int(size.height()), int(size.width()), int(size.height()))


def test_render_grad_draws_the_highlighted_page_with_its_legend(qapp, tmp_path, capsys):
    out = tmp_path / "grad.png"
    assert app.main(["render", str(SAMPLE), "--grad", "-o", str(out)]) == EXIT_OK
    img, box = legend_box(out)
    plain = tmp_path / "plain.png"
    assert app.main(["render", str(SAMPLE), "-o", str(plain)]) == EXIT_OK
    assert img.height() > QImage(str(plain)).height() + box.height()     # room made for the legend
    style = Style()
    inked = sum(1 for x in range(box.left(), box.right()) for y in range(box.top(), box.bottom())
                if near(img.pixelColor(x, y), style.text, 200))
    assert inked > 0.04 * box.width() * box.height()                     # the legend's text is there
    bar = {c.name() for c in level_colours(False)}
    seen = {img.pixelColor(x, y).name() for x in range(box.left(), box.right())
            for y in range(box.top(), box.bottom())}
    assert len(seen & bar) >= LEVELS // 2                                 # with its colour bar
    # and the wires in their colours: the picture holds the thick wires' colours, the plain one not
    top = {c.name() for c in level_colours(False)[-4:]}
    diagram = {img.pixelColor(x, y).name() for x in range(0, img.width(), 2) for y in range(0, box.top() - 10, 2)}
    assert diagram & top
    svg = tmp_path / "paths.svg"
    assert app.main(["render", str(SAMPLE), "--paths", "-o", str(svg)]) == EXIT_OK
    assert "gradient paths to Sum_1" in svg.read_text(encoding="utf-8")
    assert "wrote" in capsys.readouterr().out


def write(tmp_path, project, name="p.bflow.json") -> str:
    path = tmp_path / name
    path.write_text(dumps_project(project), encoding="utf-8")
    return str(path)


def test_render_grad_errors_are_one_line_with_an_exit_code(qapp, tmp_path, capsys):
    no_loss = two_branches()
    no_loss.pages[0].loss = None
    path = write(tmp_path, no_loss)
    out = tmp_path / "x.png"
    assert app.main(["render", path, "--grad", "-o", str(out)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "marks no loss" in err and "--target" in err and "Traceback" not in err and not out.exists()
    # with a target it draws
    assert app.main(["render", path, "--grad", "--target", "L", "-o", str(out)]) == EXIT_OK and out.exists()
    capsys.readouterr()
    assert app.main(["render", path, "--grad", "--target", "nope", "-o", str(out)]) == EXIT_USAGE
    assert "no compiled node 'nope'" in capsys.readouterr().err
    assert app.main(["render", path, "--grad", "--target", "a", "-o", str(out)]) == EXIT_USAGE
    assert "float scalar" in capsys.readouterr().err
    assert app.main(["render", path, "--target", "L", "-o", str(out)]) == EXIT_USAGE
    assert "--target needs --grad or --paths" in capsys.readouterr().err
    # a run that makes NaN: exit 4, the block named, nothing written
    nan = chain(("x", "Placeholder", {"shape": [2]}, None), ("lg", "Log", {}, {"x": "x"}),
                ("L", "Sum", {}, {"input": "lg"}), feeds={"x": np.array([-1.0, 2.0], np.float32)})
    nan.pages[0].loss = "L"
    bad = tmp_path / "nan.png"
    assert app.main(["render", write(tmp_path, nan, "nan.bflow.json"), "--grad", "-o", str(bad)]) == EXIT_RUN
    err = capsys.readouterr().err
    assert "backward run" in err and "lg" in err and "Traceback" not in err and not bad.exists()
    # a page with errors
    broken = chain(("x", "Placeholder", {"shape": [2]}, None), ("t", "Tanh", {}, None))
    broken.pages[0].loss = "t"
    assert app.main(["render", write(tmp_path, broken, "b.bflow.json"), "--grad", "-o", str(bad)]) == EXIT_DIAGNOSTICS
    assert "Traceback" not in capsys.readouterr().err


def test_a_failed_backward_run_highlights_nothing(qtbot, tmp_path):
    from PySide6.QtCore import QSettings
    from blockflow.gui.main_window import MainWindow

    nan = chain(("x", "Placeholder", {"shape": [2]}, None), ("lg", "Log", {}, {"x": "x"}),
                ("L", "Sum", {}, {"input": "lg"}), feeds={"x": np.array([-1.0, 2.0], np.float32)})
    nan.pages[0].loss = "L"
    window = MainWindow(Document(nan), QSettings(str(tmp_path / "s.ini"), QSettings.IniFormat))
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    rc, hl = window.run_controller, window.view.gradients
    with qtbot.waitSignal(rc.run_failed, timeout=5000):
        rc.backward()
    QApplication.processEvents()
    assert rc.last_error is not None and hl.current is None


def test_a_stop_gradient_off_the_gradient_path_says_it_cuts_nothing(qtbot):
    project = chain(("x", "Placeholder", {"shape": [2]}, None), ("sq", "Square", {}, {"x": "x"}),
                    ("L", "Sum", {}, {"input": "sq"}), ("sg", "StopGradient", {}, {"input": "x"}),
                    feeds={"x": np.array([1.0, 2.0], np.float32)})
    project.pages[0].loss = "L"
    project.pages[0].nodes["sg"].position = (0, 250)
    view = make_view(qtbot, Document(project), size=(900, 500))
    view.gradients.show(backward(view.doc)[1])
    text = view.tooltip_at(view.node_item("sg").sceneBoundingRect().center())
    assert "sg cuts no gradient path to L" in text
    assert view.gradients.wire_style(edge(view, "x.output -> sg.input")).state == "unreached"


def test_the_legend_can_be_hidden_from_the_view_menu_and_it_is_remembered(qtbot, tmp_path):
    from PySide6.QtCore import QSettings
    from blockflow.gui.main_window import MainWindow

    settings = str(tmp_path / "s.ini")
    window = MainWindow(Document(load_project(SAMPLE)), QSettings(settings, QSettings.IniFormat))
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    legend = window.view.gradients.legend_widget
    window.actions["gradient_paths"].trigger()
    # the page compiles off the UI thread: the paths and their legend come once it is ready
    qtbot.waitUntil(lambda: window.view.gradients.current is not None, timeout=5000)
    assert legend.isVisible()
    window.actions["gradient_legend"].trigger()            # hide it
    assert not legend.isVisible() and window.view.gradients.current is not None
    _, gview = backward(window.document)
    window.view.gradients.show(gview)
    assert not legend.isVisible()                          # stays hidden for the next run
    window.close()
    again = MainWindow(Document(load_project(SAMPLE)), QSettings(settings, QSettings.IniFormat))
    qtbot.addWidget(again)
    assert not again.actions["gradient_legend"].isChecked()
    again.actions["gradient_legend"].trigger()
    _, gview = backward(again.document)
    again.resize(1440, 880)        # a canvas with room for the legend (a small one hides it)
    again.show()
    again.view.gradients.show(gview)
    assert again.view.gradients.legend_widget.isVisible()
