"""The headless picture: draw a page as the editor draws it, into a PNG or an SVG.

Uses the canvas's own DiagramScene and item classes (no second drawing code), offscreen: when no
QApplication exists one is made on the ``offscreen`` platform, so no display is needed. With
``gradients`` the page's wires are coloured by the canvas's own GradientHighlighter (after a
backward run, or the static gradient paths) and its legend is drawn under the diagram.
"""
from __future__ import annotations

import math
from pathlib import Path

from PySide6.QtCore import QBuffer, QIODevice, QPointF, QRectF, QSize
from PySide6.QtGui import QImage, QImageWriter, QPainter
from PySide6.QtWidgets import QApplication

from blockflow.project import Project, port_text
from blockflow.compile.compiler import compile_page
from blockflow.errors import ProjectError
from blockflow.present.gradview import GradientView
from blockflow.composite import ProjectBlocks
from blockflow.registry import default_registry
from blockflow.gui.canvas.layout_layer import show_layout
from blockflow.gui.canvas.scene import DiagramScene
from blockflow.gui.common.theme import Style

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


def _gradient_view(program, gradients: str, target: str | None) -> GradientView:
    """The GradientView to draw: after a recorded backward run (``"run"``, nothing committed) or
    the static paths (``"paths"``). Errors: CompileError (the page has errors), ProjectError (no
    loss and no target, an unknown target, a target that is not a float scalar), RunError (the
    run failed: NaN/Inf, a block raised, a missing feed)."""
    from blockflow.run.runtime import run

    program.raise_for_errors()
    if target is None and program.loss is None:
        raise ProjectError(f"page '{program.page_name}' marks no loss: name the gradient target "
                           f"with --target NODE[:PORT]")
    slot = program.target_slot(target)
    ttype = slot.type
    name = port_text(slot.node, slot.port)
    if not ttype.is_float or ttype.size != 1:
        raise ProjectError(f"the gradient target {name} is {ttype}: pick a float scalar output")
    if gradients == "paths":
        return GradientView(program, name)
    result = run(program, target=name, record=True, commit=False)
    return GradientView(program, result=result)


def _show_values(scene, result) -> None:
    """Each block's outputs in its result area, as the editor shows them after a run."""
    from blockflow.present.values import BlockRun, summarize

    program = result.program
    for nid, item in scene.node_items.items():
        inst = program.instance(nid)       # a closed instance shows its output ports' values
        keys = {p.name: (inst.outputs[p.name], "output") if inst is not None and p.name in inst.outputs
                else (nid, p.name) for p in item.data.outputs}
        summaries = {port: summarize(result.values[key]) for port, key in keys.items() if key in result.values}
        if summaries:
            item.set_results(BlockRun(summaries))


def render_page(project, page: str | None, path, *, registry=None, scale: float = 1.0,
                margin: float = 40.0, gradients: str | None = None, target: str | None = None,
                fmt: str | None = None) -> bytes | None:
    """Draw ``page`` of ``project`` (the first page when None) to ``path``: SVG when it ends in
    ``.svg``, else a raster image by suffix (PNG). Blocks, ports, wires, dtype colours and error
    outlines are the editor's; the picture is fitted to the page's items with ``margin``.
    With ``path=None`` the picture is returned as bytes instead, in ``fmt`` ("png" or "svg"), for
    the caller to write (blockflow.ownfiles, for a picture blockflow writes on its own).

    ``gradients="run"``: run the page backward to ``target`` (default: its loss; recorded, nothing
    committed), colour the wires by their gradients and show the values on the blocks, as the
    editor does after Backward;
    ``gradients="paths"``: the static gradient paths to it. The legend goes under the diagram."""
    if gradients not in (None, "run", "paths"):
        raise ValueError(f"gradients must be None, 'run' or 'paths', not {gradients!r}")
    app = ensure_app()
    registry = registry or default_registry()
    pg = project.page(page)
    path = Path(path) if path is not None else None
    suffix = path.suffix.lower().lstrip(".") if path is not None else (fmt or "png").lower()
    if suffix != "svg" and suffix.encode() not in [bytes(f) for f in QImageWriter.supportedImageFormats()]:
        shown = path.name if path is not None else f"a {suffix} picture"
        raise ProjectError(f"cannot write '{shown}': use a .png or .svg file name")
    style = Style(app.palette())
    scene, legend, extra = _drawn_scene(pg, registry, style, gradients, target, project.composites)
    picture = _Picture(scene, style, legend, extra, scale, margin)
    buffer = None
    if path is None:        # into memory: the caller writes the bytes
        buffer = QBuffer()
        buffer.open(QIODevice.WriteOnly)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
    if suffix == "svg":
        picture.draw_svg(buffer, path, f"{project.metadata.get('title', 'blockflow')}: page {pg.name}")
    else:
        picture.draw_raster(buffer, path, suffix)
    scene.clear()
    if buffer is not None:
        buffer.close()
        return bytes(buffer.data())
    return None


def _drawn_scene(pg, registry, style: Style, gradients: str | None, target: str | None, composites=None):
    """The page's scene as the editor draws it, coloured by gradient when asked: ``(scene,
    legend or None, the extent of what the gradient colouring adds around the blocks)``."""
    # the scene looks instances up as the editor does (@Dense: ports from its Input and Output
    # blocks); the plain registry knows no composite, so their ports came out as "x ?"
    scene = DiagramScene(ProjectBlocks(registry, Project(composites=dict(composites or {}))), style)
    scene.render_mode = True
    scene.show_grid = False
    program = compile_page(pg, registry, composites=composites)
    if gradients is not None:
        gview = _gradient_view(program, gradients, target)   # fails before anything is written
    scene.load(pg, program)
    framed = show_layout(scene, pg)          # reroute points and frames
    if gradients is None:
        return scene, None, framed
    from blockflow.gui.canvas.gradients import GradientHighlighter

    highlighter = GradientHighlighter(scene)
    if gradients == "run":
        _show_values(scene, gview.result)     # first: the labels are placed around the blocks
        highlighter.show(gview)
    else:
        highlighter.show_paths(gview)
    return scene, highlighter.legend, highlighter.extent().united(framed)


class _Picture:
    """Where the scene lands in the picture: the items with a margin, room for the legend under
    them, scaled to fit MAX_SIDE."""

    def __init__(self, scene, style: Style, legend, extra: QRectF, scale: float, margin: float):
        self.scene, self.style, self.legend, self.margin = scene, style, legend, margin
        rect = scene.items_rect().united(extra)
        if rect.isNull():
            rect = QRectF(0, 0, 320, 200)
        source = rect.adjusted(-margin, -margin, margin, margin)
        self.legend_size = legend.size() if legend is not None else None
        if self.legend_size is not None:     # room under the diagram for the legend, at the same scale
            source.setBottom(source.bottom() + self.legend_size.height() + margin / 2)
            source.setWidth(max(source.width(), self.legend_size.width() + 2 * margin))
        self.source = source
        self.s = s = min(scale, MAX_SIDE / source.width(), MAX_SIDE / source.height())
        self.w, self.h = max(1, math.ceil(source.width() * s)), max(1, math.ceil(source.height() * s))
        self.frame = QRectF(0, 0, self.w, self.h)

    def _draw(self, painter) -> None:
        self.scene.render(painter, self.frame, self.source)
        if self.legend is not None:
            painter.save()
            painter.scale(self.s, self.s)
            self.legend.paint(painter, QPointF(self.margin, self.source.height() - self.margin / 2
                                               - self.legend_size.height()))
            painter.restore()

    def draw_svg(self, buffer, path, title: str) -> None:
        from PySide6.QtSvg import QSvgGenerator
        gen = QSvgGenerator()
        if buffer is not None:
            gen.setOutputDevice(buffer)
        else:
            gen.setFileName(str(path))
        gen.setSize(QSize(self.w, self.h))
        gen.setViewBox(self.frame)
        gen.setResolution(96)  # so the size in mm shows as w x h pixels on a 96 dpi screen
        gen.setTitle(title)
        gen.setDescription("drawn by blockflow render")
        painter = QPainter(gen)
        painter.fillRect(self.frame, self.style.background)
        painter.setRenderHints(QPainter.Antialiasing | QPainter.TextAntialiasing)
        self._draw(painter)
        painter.end()

    def draw_raster(self, buffer, path, suffix: str) -> None:
        img = QImage(self.w, self.h, QImage.Format_ARGB32_Premultiplied)
        img.fill(self.style.background)
        painter = QPainter(img)
        painter.setRenderHints(QPainter.Antialiasing | QPainter.TextAntialiasing | QPainter.SmoothPixmapTransform)
        self._draw(painter)
        painter.end()
        if not (img.save(buffer, suffix.upper()) if buffer is not None else img.save(str(path))):
            raise ProjectError(f"could not write the picture to '{path or suffix}'")
