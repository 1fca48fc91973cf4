"""Canvas benchmark: the editor's DiagramView on generated pages of 1,000 and 5,000 blocks.

    python benchmarks/canvas.py            # full repeats
    python benchmarks/canvas.py --quick    # a smoke run (fewer repeats)
    python benchmarks/canvas.py 1000       # some sizes only

Offscreen, 1920x1080, antialiasing on (as the editor draws). Prints, per size, medians of:
  load        parse the project file + build the scene + first frame painted
  full view   one frame with the whole page fitted in the view: drawn afresh (as after a zoom
              step: the cached pixmaps of the blocks or of the overview dropped), and
              repainted from the cached pixmaps (an expose, a scroll of the dock beside it)
  zoomed in   one frame at 100 % (about 70 blocks visible)
  drag        one mouse-move step of a real mouse drag of one block (mouse events sent to the
              viewport): the move, its wires re-pathed, and the paint that shows it; at 100 %
              and at the full view. The drag start (one picture of the view taken for the drag
              layer, blockflow/gui/canvas/draglayer.py) is reported beside it.
  recolour    after a real backward pass (to a Sum of the block with the most ancestors, about
              45 % of the wires carry gradient, the rest none): gradients.show(GradientView) on
              a page drawn plain, plus the frame that shows it, at the full view and at 100 %;
              and from one run's colours to another's (other feeds).
  autosave    an autosave of the page with a change: the time the UI thread spends (a copy of
              the project; the worker writes it), against 0.1 s, and until it is written
against the targets of issues 4 and 5 (docs/qt.md §3). Frames are full repaints (viewport().grab()).
Far out on pages of 500+ blocks one overview item draws the page (tiled, from a pixmap cache); a
dragged block and its wires are drawn by their own items over it.
"""
from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import gc  # noqa: E402
import math  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from PySide6.QtCore import QEvent, QObject, QPoint, QPointF, Qt  # noqa: E402
from PySide6.QtGui import QFont, QMouseEvent  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from blockflow.io.project_io import dumps_project, loads_project  # noqa: E402
from blockflow.registry import default_registry  # noqa: E402
from run import generated_project  # noqa: E402

TARGETS = {  # size: (load s, full-view frame s, zoomed-in frame s, drag per move s)
    1000: (0.35, 0.040, 0.020, 0.004),
    5000: (1.5, 0.050, 0.020, 0.008),
}
RECOLOUR_TARGETS = {1000: 0.050, 5000: 0.150}   # gradient recolour of all wires + one frame


TILE = 7


def laid_out(n: int, tiled: bool = True):
    """benchmarks/run.py's generated page (each block fed by some of the 50 before it), placed on
    a grid with the screen's aspect ratio: in generation order filling 7x7 tiles, so wires stay
    local as in a drawn diagram (``tiled=False``: plain rows, where a wire may cross 50 blocks)."""
    project = generated_project(n)
    page = project.pages[0]
    cols = max(TILE, round(math.sqrt(n * 16 / 9 * 130 / 220) / TILE) * TILE)
    for i, node in enumerate(page.nodes.values()):
        if tiled:
            tile, k = divmod(i, TILE * TILE)
            tiles_per_row = cols // TILE
            col = (tile % tiles_per_row) * TILE + k % TILE
            row = (tile // tiles_per_row) * TILE + k // TILE
        else:
            col, row = i % cols, i // cols
        node.position = (float(col * 220), float(row * 130))
    return project


class PaintCounter(QObject):
    def __init__(self):
        super().__init__()
        self.paints = 0

    def eventFilter(self, obj, event):
        if event.type() == QEvent.Paint:
            self.paints += 1
        return False


def median_time(fn, repeats: int) -> float:
    fn()  # warm
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def bench(n: int, repeats: int, loads: int) -> list[tuple]:
    from blockflow.gui.canvas.view import DiagramView
    from blockflow.gui.document.document import Document

    app = QApplication.instance()
    registry = default_registry()
    text = dumps_project(laid_out(n))
    load_times, ready_times = [], []
    view = doc = None
    for _ in range(loads):
        if view is not None:
            view.close()
            view.deleteLater()
            app.processEvents()
        gc.collect()
        t0 = time.perf_counter()
        doc = Document(loads_project(text, "<generated>"), registry=registry)
        view = DiagramView(doc)
        view.resize(1920, 1080)
        view.show()
        view.fit_to_view()
        view.viewport().grab()
        t1 = time.perf_counter()
        app.processEvents()           # the deferred compile: port dtypes and error outlines
        view.viewport().grab()
        t2 = time.perf_counter()
        load_times.append(t1 - t0)
        ready_times.append(t2 - t0)
    load = statistics.median(load_times)
    ready = statistics.median(ready_times)
    vp = view.viewport()
    counter = PaintCounter()
    vp.installEventFilter(counter)

    view.fit_to_view()
    app.processEvents()
    fit_scale = view.zoom()
    full = median_time(vp.grab, repeats)
    scene = view.diagram_scene()

    def fresh_frame():
        """A frame drawn without cached pixmaps, as after a zoom step."""
        if scene.overview_on:
            scene.overview.update()
        else:
            for node in scene.node_items.values():
                node.update()
        vp.grab()

    full_fresh = median_time(fresh_frame, repeats)
    fit_how = "overview item" if scene.overview_on else "block items"

    layer = view._drag_layer
    viewport_paints_in_drags = [0]

    def send(kind, pos, buttons):
        button = Qt.LeftButton if kind != QEvent.MouseMove else Qt.NoButton
        ev = QMouseEvent(kind, QPointF(pos), QPointF(vp.mapToGlobal(pos)), button, buttons, Qt.NoModifier)
        QApplication.sendEvent(vp, ev)

    def settle():
        """Let the deferred work of a finished drag (the move command's compile) run."""
        for _ in range(50):
            app.processEvents()
            if not view.diagram_scene().program_due():
                break
        app.processEvents()

    def drag_frames(items, moves):
        """Median per move over ``moves`` steps of each block in turn, and of the drag starts."""
        per = [drag_block(item, moves) for item in items]
        if os.environ.get("CANVAS_BENCH_DEBUG"):
            print([round(statistics.median(p[1]) * 1000, 1) for p in per], [len(i.edges) for i in items])
        return (statistics.median(t for p in per for t in p[1]),
                statistics.median(p[0] for p in per))

    def drag_block(item, moves):
        """A real mouse drag of ``item``: press on its title, ``moves`` moves, release. Each move
        is timed from the event to the end of the paint that shows it."""
        if view.zoom() >= 0.99:
            view.centerOn(item.pos())
            app.processEvents()
        at = view.mapFromScene(item.sceneBoundingRect().center())
        view.select_nodes([])
        send(QEvent.MouseButtonPress, at, Qt.LeftButton)
        times = []
        for k in range(moves + 1):
            surface = layer.paints if layer.active else None
            before_vp = counter.paints
            t0 = time.perf_counter()
            send(QEvent.MouseMove, at + QPoint(3 * (k + 1), 2 * (k + 1)), Qt.LeftButton)
            deadline = t0 + 2.0
            while time.perf_counter() < deadline:
                if (layer.paints > surface) if surface is not None else (layer.paints or counter.paints > before_vp):
                    break
                app.processEvents()
            times.append(time.perf_counter() - t0)
            if surface is not None:
                viewport_paints_in_drags[0] += counter.paints - before_vp
            if k == 0:
                layer.paints = 0
        send(QEvent.MouseButtonRelease, at + QPoint(3 * (moves + 1), 2 * (moves + 1)), Qt.NoButton)
        settle()
        return times[0], times[1:]

    # the dragged blocks: wired ones near the middle of the page
    ids = list(scene.node_items)
    middle = [scene.node_items[i] for i in ids[len(ids) // 2 - 40:len(ids) // 2 + 40]
              if len(scene.node_items[i].edges) >= 2][::8]
    item = middle[0]
    drag_fit, start_fit = drag_frames(middle, repeats)

    view.reset_zoom()
    view.centerOn(item.sceneBoundingRect().center())
    app.processEvents()
    visible = sum(1 for i in scene.items(view.mapToScene(vp.rect()).boundingRect())
                  if i.type() == item.type())
    zoomed = median_time(vp.grab, repeats)
    drag_z1, start_z1 = drag_frames(middle, repeats)
    vp.removeEventFilter(counter)
    view.close()
    t = TARGETS.get(n, (None,) * 4)
    return [
        (f"{n} blocks: load to first frame", load, t[0],
         f"types and error outlines shown after {ready:.2f} s"),
        (f"{n} blocks: full-view frame (scale {fit_scale:.2f}), drawn afresh", full_fresh, t[1], fit_how),
        (f"{n} blocks: full-view frame, repainted from cache", full, t[1], ""),
        (f"{n} blocks: zoomed-in frame (scale 1, {visible} blocks)", zoomed, t[2], ""),
        (f"{n} blocks: drag one block, per move, at scale 1", drag_z1, t[3],
         f"{len(middle)} blocks in turn; drag start {start_z1 * 1000:.1f} ms"),
        (f"{n} blocks: drag one block, per move, full view", drag_fit, t[3],
         f"{len(middle)} blocks in turn; drag start {start_fit * 1000:.1f} ms;"
         f" viewport repaints during moves: {viewport_paints_in_drags[0]}"),
    ]


def with_loss(project):
    """The generated page with a loss: a Sum of the block with the most ancestors among the last
    60, and random feeds for its Placeholders (a real backward pass, not synthetic norms)."""
    import networkx as nx

    page = project.pages[0]
    graph = nx.DiGraph()
    graph.add_nodes_from(page.nodes)
    graph.add_edges_from((e.src, e.dst) for e in page.edges)
    ops = [nid for nid, node in page.nodes.items() if node.block != "Placeholder"][-60:]
    top = max(ops, key=lambda nid: len(nx.ancestors(graph, nid)))
    x, y = page.nodes[top].position
    page.add_node("Sum", id="loss", position=(x + 220.0, y))
    page.connect(top, "z" if page.nodes[top].block == "Add" else "y", "loss", "input")
    page.loss = "loss"
    return project


def feeds(project, seed):
    import numpy as np

    rng = np.random.default_rng(seed)
    return {nid: rng.standard_normal(4).astype(np.float32)
            for nid, node in project.pages[0].nodes.items() if node.block == "Placeholder"}


def bench_recolour(n: int, repeats: int) -> list[tuple]:
    """gradients.show(gview) + one repaint, at the full view and at 100 %."""
    from blockflow.present.gradview import GradientView
    from blockflow.gui.canvas.view import DiagramView
    from blockflow.gui.document.document import Document
    from blockflow.run.runtime import run

    app = QApplication.instance()
    project = with_loss(laid_out(n))
    doc = Document(loads_project(dumps_project(project), "<generated>"), registry=default_registry())
    view = DiagramView(doc)
    view.resize(1920, 1080)
    view.show()
    view.fit_to_view()
    app.processEvents()
    view.viewport().grab()
    program = doc.program()
    t0 = time.perf_counter()
    result = run(program, feeds(project, 1), target="loss", record=True, commit=False)
    t1 = time.perf_counter()
    gview = GradientView(program, result=result)
    t2 = time.perf_counter()
    other = GradientView(program, result=run(program, feeds(project, 2), target="loss", record=True, commit=False))
    flows = sum(1 for w in gview.wires.values() if w.state == "flows")
    hl, vp = view.gradients, view.viewport()

    def from_plain():
        hl.clear()
        vp.grab()
        t = time.perf_counter()
        hl.show(gview)
        vp.grab()
        return time.perf_counter() - t

    def from_other():
        hl.show(other)
        vp.grab()
        t = time.perf_counter()
        hl.show(gview)
        vp.grab()
        return time.perf_counter() - t

    def timed(fn):
        fn()
        return statistics.median(fn() for _ in range(repeats))

    fit = timed(from_plain)
    switch = timed(from_other)
    changed = sum(1 for e in gview.wires if hl.wire_style(e).level != -1) if hl.scale else 0
    view.reset_zoom()
    view.centerOn(view.node_item("loss").sceneBoundingRect().center())
    app.processEvents()
    zoomed = timed(from_plain)
    view.close()
    target = RECOLOUR_TARGETS.get(n)
    note = (f"{flows} of {len(gview.wires)} wires carry gradient, {changed} coloured by level; "
            f"backward run {(t1 - t0) * 1000:.0f} ms, GradientView {(t2 - t1) * 1000:.0f} ms (not timed)")
    return [
        (f"{n} blocks: recolour all wires after a backward pass, full view", fit, target, note),
        (f"{n} blocks: recolour all wires, full view, from another run", switch, target, ""),
        (f"{n} blocks: recolour all wires, at scale 1", zoomed, target, ""),
    ]


#: what an autosave may take of the UI thread: the editor's frame budget (benchmarks/editor.py)
AUTOSAVE_UI = 0.100


def bench_autosave(n: int, repeats: int) -> list[tuple]:
    """An autosave of the page with unsaved changes: the time on the UI thread (the copy, then
    the worker takes over) and until the recovery files are written, against writing the project
    file's text on the UI thread as it was done before (dumps_project, the same page)."""
    import tempfile

    from blockflow.gui.document.autosave import Autosaver
    from blockflow.gui.document.document import Document

    doc = Document(laid_out(n), registry=default_registry())
    ui, written, text = [], [], []
    with tempfile.TemporaryDirectory() as rec:
        saver = Autosaver(doc, Path(rec), interval_seconds=0)
        for k in range(repeats):
            doc.add_node("Tanh", (0.0, -200.0 - 100 * k), node_id=f"autosaved_{k}")   # a change to save
            gc.collect()
            t0 = time.perf_counter()
            assert saver.autosave_now()
            t1 = time.perf_counter()
            assert saver.wait()
            written.append(time.perf_counter() - t0)
            ui.append(t1 - t0)
            t2 = time.perf_counter()
            dumps_project(doc.project)
            text.append(time.perf_counter() - t2)
        saver.discard()
    return [(f"{n} blocks: autosave, on the UI thread", statistics.median(ui), AUTOSAVE_UI,
             f"written {statistics.median(written) * 1000:.0f} ms after, off the UI thread; the text alone "
             f"on the UI thread (as before) {statistics.median(text) * 1000:.0f} ms")]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sizes", nargs="*", type=int, default=[1000, 5000])
    ap.add_argument("--quick", action="store_true", help="few repeats (a smoke run)")
    args = ap.parse_args(argv)
    app = QApplication.instance() or QApplication(["blockflow-canvas-bench"])
    app.setFont(QFont("DejaVu Sans", 9))
    repeats, loads = (3, 1) if args.quick else (9, 3)
    print(f"canvas benchmark: offscreen raster, 1920x1080, antialiased; medians of {repeats} "
          f"frames ({loads} load(s))")
    failed = 0
    for n in args.sizes:
        for name, seconds, target, note in (bench(n, repeats, loads) + bench_recolour(n, repeats)
                                            + bench_autosave(n, repeats)):
            verdict = ""
            if target is not None:
                ok = seconds <= target
                failed += not ok
                verdict = f"target {target * 1000:7.1f} ms  {'ok' if ok else 'SLOW'}"
            print(f"  {name:<52} {seconds * 1000:8.1f} ms  {verdict}  {note}".rstrip())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
