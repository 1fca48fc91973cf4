"""The headless picture: draw a page as the editor draws it, into a PNG or an SVG.

Uses the canvas's own DiagramScene and item classes (no second drawing code), offscreen: when no
QApplication exists one is made on the ``offscreen`` platform, so no display is needed.
"""
from __future__ import annotations

import math
from pathlib import Path

from PySide6.QtCore import QRectF, QSize
from PySide6.QtGui import QImage, QImageWriter, QPainter
from PySide6.QtWidgets import QApplication

from ..compiler import compile_page
from ..errors import ProjectError
from ..registry import default_registry
from .canvas import DiagramScene
from .style import Style

__all__ = ["render_page", "ensure_app"]

#: the longest side of a PNG; bigger pages are scaled down to fit
MAX_SIDE = 8000


def ensure_app() -> QApplication:
    """The running QApplication, or a new one on the offscreen platform."""
    app = QApplication.instance()
    if app is None:
        app = QApplication(["blockflow-render", "-platform", "offscreen"])
    elif not isinstance(app, QApplication):
        raise RuntimeError("render_page needs a QApplication (widgets), not a bare core/gui application")
    return app


def render_page(project, page: str | None, path, *, registry=None, scale: float = 1.0,
                margin: float = 40.0) -> None:
    """Draw ``page`` of ``project`` (the first page when None) to ``path``: SVG when it ends in
    ``.svg``, else a raster image by suffix (PNG). Blocks, ports, wires, dtype colours and error
    outlines are the editor's; the picture is fitted to the page's items with ``margin``."""
    app = ensure_app()
    registry = registry or default_registry()
    pg = project.page(page)
    path = Path(path)
    suffix = path.suffix.lower().lstrip(".")
    if suffix != "svg" and suffix.encode() not in [bytes(f) for f in QImageWriter.supportedImageFormats()]:
        raise ProjectError(f"cannot write '{path.name}': use a .png or .svg file name")
    style = Style(app.palette())
    scene = DiagramScene(registry, style)
    scene.render_mode = True
    scene.show_grid = False
    scene.load(pg, compile_page(pg, registry))
    rect = scene.items_rect()
    if rect.isNull():
        rect = QRectF(0, 0, 320, 200)
    source = rect.adjusted(-margin, -margin, margin, margin)
    s = min(scale, MAX_SIDE / source.width(), MAX_SIDE / source.height())
    w, h = max(1, math.ceil(source.width() * s)), max(1, math.ceil(source.height() * s))
    target = QRectF(0, 0, w, h)
    path.parent.mkdir(parents=True, exist_ok=True)
    if suffix == "svg":
        from PySide6.QtSvg import QSvgGenerator
        gen = QSvgGenerator()
        gen.setFileName(str(path))
        gen.setSize(QSize(w, h))
        gen.setViewBox(target)
        gen.setResolution(96)  # so the size in mm shows as w x h pixels on a 96 dpi screen
        gen.setTitle(f"{project.metadata.get('title', 'blockflow')}: page {pg.name}")
        gen.setDescription("drawn by blockflow render")
        painter = QPainter(gen)
        painter.fillRect(target, style.background)
        painter.setRenderHints(QPainter.Antialiasing | QPainter.TextAntialiasing)
        scene.render(painter, target, source)
        painter.end()
    else:
        img = QImage(w, h, QImage.Format_ARGB32_Premultiplied)
        img.fill(style.background)
        painter = QPainter(img)
        painter.setRenderHints(QPainter.Antialiasing | QPainter.TextAntialiasing | QPainter.SmoothPixmapTransform)
        scene.render(painter, target, source)
        painter.end()
        if not img.save(str(path)):
            raise ProjectError(f"could not write the picture to '{path}'")
    scene.clear()
