"""Editor benchmark: ResNet-50 imported from ONNX and used in the editor, offscreen 1600x900.

    QT_QPA_PLATFORM=offscreen python benchmarks/editor_onnx.py [--shot PATH]

Prints:
  import          File > Import ONNX Model on the onnx package's light ResNet-50 (weights made
                  random and seeded): read, map, lay out, and the page's first frame
  compiled        until the page's first compile (off the UI thread) is shown on the blocks
  fit             View > Fit (Ctrl+0) and its frame, the whole page of 450 blocks far out
  pan             one step of panning at the opening zoom (a frame), median of 20
  zoom            one wheel step of zoom at the opening zoom (a frame), median of 10
  backward        Run > Backward (F5 forward + backward from the loss the import adds): until the
                  results and the gradient colours are on the canvas, and the longest the UI
                  thread went without turning its event loop meanwhile
Targets: a frame within 0.1 s, no stall over 0.2 s (what a user feels as a freeze); the import
and the run themselves are reported, not judged. Not timed tests.
"""
from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from PySide6.QtCore import QPoint, QPointF, QSettings, Qt  # noqa: E402
from PySide6.QtGui import QWheelEvent  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from editor import FRAME, STALL, Loop, shown  # noqa: E402

RUN_LIMIT = 120.0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shot", help="also save the window after the backward run as this PNG")
    args = parser.parse_args(argv)
    try:
        import onnx
    except ImportError:
        print("skipped: onnx is not installed (pip install 'blockflow[onnx]')")
        return 0
    from onnx_import import resnet50_with_random_weights

    from blockflow.gui.document.document import Document
    from blockflow.gui.main_window.window import MainWindow

    app = QApplication.instance() or QApplication([])
    folder = Path(tempfile.mkdtemp(prefix="blockflow-bench-"))
    model_path = folder / "resnet50.onnx"
    onnx.save(resnet50_with_random_weights(onnx), str(model_path))
    window = MainWindow(Document(), QSettings(str(folder / "settings.ini"), QSettings.IniFormat))
    window.maybe_save = lambda: True
    window.resize(1600, 900)
    window.show()
    app.processEvents()
    view, doc, loop, rows = window.view, window.document, Loop(app), []

    t0 = time.perf_counter()
    assert window.import_onnx_model(str(model_path))
    # the import runs on its own thread: the UI thread's longest turn meanwhile is its stall
    took, worst, ok = loop.until(lambda: not window.import_running(), limit=RUN_LIMIT)
    view.viewport().grab()
    rows.append(("import (first frame)", time.perf_counter() - t0, None, window.statusBar().currentMessage()[:70]))
    rows.append(("  longest UI stall during the import", worst, STALL, ""))
    page = doc.current_page
    took, worst, ok = loop.until(lambda: shown(view, doc, page), limit=RUN_LIMIT)
    rows.append(("compiled and shown", took, None, f"longest UI turn {worst * 1e3:.0f} ms"))

    t0 = time.perf_counter()
    window.actions["fit"].trigger()
    view.viewport().grab()
    rows.append(("fit (whole page)", time.perf_counter() - t0, FRAME, f"zoom {view.transform().m11():.0%}"))
    view.reset_zoom() if hasattr(view, "reset_zoom") else window.actions["reset_zoom"].trigger()
    view.viewport().grab()

    pans = []
    bar = view.horizontalScrollBar()
    for i in range(20):
        t0 = time.perf_counter()
        bar.setValue(bar.value() + (60 if i < 10 else -60))
        view.viewport().grab()
        pans.append(time.perf_counter() - t0)
    rows.append(("pan one step (median of 20)", statistics.median(pans), FRAME, f"worst {max(pans) * 1e3:.0f} ms"))

    zooms = []
    centre = QPointF(view.viewport().width() / 2, view.viewport().height() / 2)
    for i in range(10):
        delta = 120 if i % 2 == 0 else -120
        event = QWheelEvent(centre, view.viewport().mapToGlobal(centre), QPoint(0, 0), QPoint(0, delta),
                            Qt.NoButton, Qt.ControlModifier, Qt.NoScrollPhase, False)
        t0 = time.perf_counter()
        QApplication.sendEvent(view.viewport(), event)
        view.viewport().grab()
        zooms.append(time.perf_counter() - t0)
    rows.append(("zoom one wheel step (median of 10)", statistics.median(zooms), FRAME, f"worst {max(zooms) * 1e3:.0f} ms"))

    t0 = time.perf_counter()
    window.actions["run_backward"].trigger()
    took, worst, ok = loop.until(lambda: window.session.results() is not None, limit=RUN_LIMIT)
    view.viewport().grab()
    done = window.session.results()
    error = None if done is None else done.error
    rows.append(("backward run, results and gradient colours shown", time.perf_counter() - t0, None,
                 "ok" if ok and error is None else f"FAILED: {error}"))
    rows.append(("  longest UI stall during the run", worst, STALL, ""))
    if args.shot:
        window.grab().save(args.shot)

    print(f"editor with ResNet-50 imported from ONNX ({len(doc.project.page(page).nodes)} blocks), offscreen 1600x900")
    failed = 0
    for name, seconds, target, note in rows:
        verdict = "-" if target is None else ("ok" if seconds <= target else "SLOW")
        failed += verdict == "SLOW"
        print(f"  {name:<52} {seconds * 1000:9.1f} ms  {verdict:<4} {note}".rstrip(), flush=True)
    window.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
