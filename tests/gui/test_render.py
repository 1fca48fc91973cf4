"""render_page: the page drawn by the editor's own items, offscreen, as PNG and as SVG."""
from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import QRectF
from PySide6.QtGui import QColor, QImage, QPainter

from blockflow.compile.compiler import compile_page
from blockflow.errors import ProjectError
from blockflow.gui.canvas.scene import DiagramScene
from blockflow.gui.canvas.render import render_page
from blockflow.gui.common.theme import Style
from blockflow.project import Project
from blockflow.io.project_io import load_project
from blockflow.registry import default_registry

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_projects" / "stable_softmax.bflow.json"
MARGIN = 40


def block_rects(project, page):
    """Each block's rectangle in the picture (scale 1, margin 40), as the editor lays it out."""
    reg = default_registry()
    pg = project.page(page)
    scene = DiagramScene(reg, Style())
    scene.render_mode = True
    scene.load(pg, compile_page(pg, reg))
    origin = scene.items_rect().topLeft()
    rects = {nid: (item.sceneBoundingRect().translated(-origin.x() + MARGIN, -origin.y() + MARGIN),
                   item.scenePos().y() - origin.y() + MARGIN)  # where the body (below the scope tab) starts
             for nid, item in scene.node_items.items()}
    size = scene.items_rect().size()
    scene.clear()
    return rects, (size.width() + 2 * MARGIN, size.height() + 2 * MARGIN)


def count(img: QImage, rect: QRectF, pred) -> int:
    r = rect.toRect()
    return sum(1 for y in range(max(0, r.top()), min(img.height(), r.bottom()))
               for x in range(max(0, r.left()), min(img.width(), r.right())) if pred(img.pixelColor(x, y)))


def near(c: QColor, ref: QColor, tol=90) -> bool:
    return abs(c.red() - ref.red()) + abs(c.green() - ref.green()) + abs(c.blue() - ref.blue()) < tol


def check_picture(img: QImage, project, page):
    style = Style()
    rects, (w, h) = block_rects(project, page)
    assert abs(img.width() - w) <= 1 and abs(img.height() - h) <= 1
    bg = style.background
    corner = img.pixelColor(2, 2)
    assert near(corner, bg, 12)
    for nid, (rect, body_top) in rects.items():
        filled = count(img, rect, lambda c: not near(c, bg, 12))
        assert filled > 0.4 * rect.width() * rect.height(), nid       # the block is drawn there
        title = QRectF(rect.left(), body_top + 1, rect.width(), 22)
        assert count(img, title, lambda c: near(c, style.text)) > 25, nid  # its name is text


def test_render_png_draws_every_block_with_text(qapp, tmp_path):
    project = load_project(SAMPLE)
    out = tmp_path / "page.png"
    render_page(project, None, out)
    img = QImage(str(out))
    assert not img.isNull()
    check_picture(img, project, "stable_softmax")


def test_render_svg_draws_the_same_picture(qapp, tmp_path):
    from PySide6.QtSvg import QSvgRenderer
    project = load_project(SAMPLE)
    out = tmp_path / "page.svg"
    render_page(project, "stable_softmax", out)
    text = out.read_text()
    assert "<svg" in text and "Softmax" in text and "StopGradient" in text
    renderer = QSvgRenderer(str(out))
    assert renderer.isValid()
    size = renderer.viewBoxF().size().toSize()
    img = QImage(size, QImage.Format_ARGB32)
    img.fill(QColor("white"))
    p = QPainter(img)
    renderer.render(p)
    p.end()
    check_picture(img, project, "stable_softmax")


def test_render_other_pages_and_errors(qapp, tmp_path):
    project = load_project(SAMPLE)
    render_page(project, "naive", tmp_path / "naive.png")
    assert QImage(str(tmp_path / "naive.png")).width() > 200
    with pytest.raises(ProjectError):
        render_page(project, "no such page", tmp_path / "x.png")
    with pytest.raises(ProjectError):
        render_page(project, None, tmp_path / "x.docx")
    empty = Project()
    empty.add_page("main")
    render_page(empty, None, tmp_path / "empty.png")
    assert not QImage(str(tmp_path / "empty.png")).isNull()


def test_render_outlines_blocks_with_errors(qapp, tmp_path):
    project = Project()
    pg = project.add_page("main")
    pg.add_node("Softmax", id="s")             # unwired input: an error
    out = tmp_path / "err.png"
    render_page(project, None, out)
    img = QImage(str(out))
    rects, _ = block_rects(project, "main")
    red = QColor("#e0403a")
    assert count(img, rects["s"][0], lambda c: near(c, red, 60)) > 100
