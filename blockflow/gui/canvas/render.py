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

from blockflow.compile.compiler import compile_page
from blockflow.errors import ProjectError
from blockflow.present.gradview import GradientView
from blockflow.registry import default_registry
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
    slot = program.resolve_target(target)
    ttype = program.slots[slot].type
    name = f"{program.slots[slot].node}:{program.slots[slot].port}"
    if not ttype.is_float or ttype.size != 1:
        raise ProjectError(f"the gradient target {name} is {ttype}: pick a float scalar output")
    if gradients == "paths":
        return GradientView(program, name)
    result = run(program, target=name, record=True, commit=False)
    return GradientView(program, result=result)


def _show_values(scene, result) -> None:
    """Each block's outputs in its result area, as the editor shows them after a run."""
    from blockflow.present.values import BlockRun, summarize

    for nid, item in scene.node_items.items():
        summaries = {p.name: summarize(result.values[(nid, p.name)]) for p in item.data.outputs
                     if (nid, p.name) in result.values}
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
    scene = DiagramScene(registry, style)
    scene.render_mode = True
    scene.show_grid = False
    program = compile_page(pg, registry)
    legend = None
    if gradients is not None:
        gview = _gradient_view(program, gradients, target)   # fails before anything is written
    scene.load(pg, program)
    extra = QRectF()
    if gradients is not None:
        from blockflow.gui.canvas.gradients import GradientHighlighter

        highlighter = GradientHighlighter(scene)
        if gradients == "run":
            _show_values(scene, gview.result)     # first: the labels are placed around the blocks
            highlighter.show(gview)
        else:
            highlighter.show_paths(gview)
        extra = highlighter.extent()
        legend = highlighter.legend
    rect = scene.items_rect().united(extra)
    if rect.isNull():
        rect = QRectF(0, 0, 320, 200)
    source = rect.adjusted(-margin, -margin, margin, margin)
    legend_size = legend.size() if legend is not None else None
    if legend_size is not None:     # room under the diagram for the legend, at the same scale
        source.setBottom(source.bottom() + legend_size.height() + margin / 2)
        source.setWidth(max(source.width(), legend_size.width() + 2 * margin))
    s = min(scale, MAX_SIDE / source.width(), MAX_SIDE / source.height())
    w, h = max(1, math.ceil(source.width() * s)), max(1, math.ceil(source.height() * s))
    frame = QRectF(0, 0, w, h)

    def draw_legend(painter) -> None:
        if legend is not None:
            painter.save()
            painter.scale(s, s)
            legend.paint(painter, QPointF(margin, source.height() - margin / 2 - legend_size.height()))
            painter.restore()
    buffer = None
    if path is None:        # into memory: the caller writes the bytes
        buffer = QBuffer()
        buffer.open(QIODevice.WriteOnly)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
    if suffix == "svg":
        from PySide6.QtSvg import QSvgGenerator
        gen = QSvgGenerator()
        if buffer is not None:
            gen.setOutputDevice(buffer)
        else:
            gen.setFileName(str(path))
        gen.setSize(QSize(w, h))
        gen.setViewBox(frame)
        gen.setResolution(96)  # so the size in mm shows as w x h pixels on a 96 dpi screen
        gen.setTitle(f"{project.metadata.get('title', 'blockflow')}: page {pg.name}")
        gen.setDescription("drawn by blockflow render")
        painter = QPainter(gen)
        painter.fillRect(frame, style.background)
        painter.setRenderHints(QPainter.Antialiasing | QPainter.TextAntialiasing)
        scene.render(painter, frame, source)
        draw_legend(painter)
        painter.end()
    else:
        img = QImage(w, h, QImage.Format_ARGB32_Premultiplied)
        img.fill(style.background)
        painter = QPainter(img)
        painter.setRenderHints(QPainter.Antialiasing | QPainter.TextAntialiasing | QPainter.SmoothPixmapTransform)
        scene.render(painter, frame, source)
        draw_legend(painter)
        painter.end()
        if not (img.save(buffer, suffix.upper()) if buffer is not None else img.save(str(path))):
            raise ProjectError(f"could not write the picture to '{path or suffix}'")
    scene.clear()
    if buffer is not None:
        buffer.close()
        return bytes(buffer.data())
    return None
