"""Level of detail: zoomed out with the wheel below Style.DETAIL_LOD, a block draws its op name
alone, large enough to read at that zoom, and hides its port names, inline values and results;
the wires stay. Wheeling back in above the level brings everything back."""
from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtCore import QPoint, QPointF, QRectF, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import QApplication

from blockflow.gui.canvas.detail import FAR_TITLE_MIN_PX
from blockflow.gui.common.theme import Style
from blockflow.gui.document.document import Document
from blockflow.io.project_io import load_project

from test_canvas import doc, make_view, view  # noqa: F401  (the canvas fixtures)

ROOT = Path(__file__).resolve().parents[2]


def wheel(view, at: QPoint, delta: int) -> None:
    event = QWheelEvent(QPointF(at), QPointF(view.viewport().mapToGlobal(at)), QPoint(0, 0), QPoint(0, delta),
                        Qt.NoButton, Qt.NoModifier, Qt.NoScrollPhase, False)
    QApplication.sendEvent(view.viewport(), event)


def wheel_to(view, nid: str, below: float | None = None, above: float | None = None) -> None:
    """Wheel over block ``nid`` (notch by notch, as a mouse does) until the zoom is below or
    above the level given."""
    for _ in range(200):
        z = view.zoom()
        if (below is not None and z < below) or (above is not None and z > above):
            return
        item = view.node_item(nid)
        at = view.mapFromScene(item.body.translated(item.pos()).center())
        wheel(view, at, -30 if below is not None else 30)   # a fine-grained wheel: 4 %
    raise AssertionError(f"the wheel did not reach the zoom wanted ({view.zoom()})")


def ink(view, nid: str, rect: QRectF) -> tuple[int, int]:
    """(pixels of the text's or the muted text's colour, rows holding them) in ``rect`` of block
    ``nid`` (item coordinates), as the viewport shows it now."""
    QApplication.processEvents()
    img = view.viewport().grab().toImage()
    item = view.node_item(nid)
    colors = (view.style_.text, view.style_.muted)
    r = view.mapFromScene(rect.translated(item.pos())).boundingRect()
    n, rows = 0, set()
    for y in range(max(0, r.top()), min(img.height(), r.bottom())):
        for x in range(max(0, r.left()), min(img.width(), r.right())):
            c = img.pixelColor(x, y)
            if any(abs(c.red() - k.red()) + abs(c.green() - k.green()) + abs(c.blue() - k.blue()) < 150
                   for k in colors):
                n += 1
                rows.add(y)
    return n, (max(rows) - min(rows) + 1) if rows else 0


def page(doc):
    doc.add_node("Placeholder", (0, 0), node_id="x", attrs={"shape": [3], "dtype": "int32"})
    doc.add_node("OneHot", (320, 0), node_id="o")
    doc.connect("x", "output", "o", "indices")
    QApplication.processEvents()


def last_row(item) -> QRectF:
    """Where the name of the block's last input is written."""
    st = item.style
    y = item.port_pos(item.data.inputs[-1].name).y()
    return QRectF(8, y - 8, item.w / 2 - 10, 16)


def test_screenshot_of_a_big_sample_far_out(qtbot, tmp_path):
    doc = Document(load_project(ROOT / "sample_projects" / "digits_cnn.bflow.json"), None)
    view = make_view(qtbot, doc, size=(1100, 560))
    view.open_readable()                          # as when the project opens in the editor
    QApplication.processEvents()
    assert view.zoom() >= Style.DETAIL_LOD        # it opens readable, at its start
    wheel_to(view, "digits", below=0.42)          # and is wheeled out
    assert Style.FLAT_LOD < view.zoom() < Style.DETAIL_LOD
    view.centerOn(view.diagram_scene().items_rect().center())
    image = view.viewport().grab().toImage()
    assert image.save(str(tmp_path / "far.png"))
    if os.environ.get("BLOCKFLOW_UPDATE_SCREENSHOT"):
        image.save(str(ROOT / "docs" / "far_zoom.png"))
    # every block in sight has its op name drawn: text ink on its body
    shown = view.mapToScene(view.viewport().rect()).boundingRect()
    inside = [nid for nid in doc.page().nodes if shown.contains(view.node_item(nid).sceneBoundingRect())]
    assert len(inside) >= 8
    for nid in inside:
        assert ink(view, nid, view.node_item(nid).body)[0] > 5, nid


def test_wheeling_out_past_the_level_draws_titles_large_and_hides_the_detail(qtbot, view, doc):
    page(doc)
    item = view.node_item("o")
    body = QRectF(item.body)
    # near: every port name is written, the title is the normal bold line
    view.centerOn(item.sceneBoundingRect().center())
    assert ink(view, "o", last_row(item))[0] > 10
    # just above the level: all the detail, the title small on screen
    wheel_to(view, "o", below=Style.DETAIL_LOD * 1.1)
    assert view.zoom() >= Style.DETAIL_LOD
    near_title = ink(view, "o", QRectF(0, 0, item.w, 20))[1]
    assert ink(view, "o", last_row(item))[0] > 0
    # one more notch: past the level, the op name alone, larger than it was, readable
    wheel_to(view, "o", below=Style.DETAIL_LOD)
    assert view.zoom() < Style.DETAIL_LOD
    assert ink(view, "o", last_row(item))[0] == 0              # port names hidden
    far_title = ink(view, "o", body)[1]
    assert far_title > near_title and far_title >= FAR_TITLE_MIN_PX * 0.7
    # the wire is still drawn, in its place
    wire = view.diagram_scene().edge_items[next(iter(view.diagram_scene().edge_items))]
    assert wire.isVisible()
    mid = view.mapFromScene(wire.path().pointAtPercent(0.5))
    img = view.viewport().grab().toImage()
    assert img.pixelColor(mid) != view.style_.background
    # back in across the level: the port names again
    wheel_to(view, "o", above=Style.DETAIL_LOD * 1.05)
    assert ink(view, "o", last_row(item))[0] > 0


def test_far_titles_stay_readable_down_to_the_flat_level(qtbot, view, doc):
    page(doc)
    for zoom in (0.55, 0.45, 0.35):
        view._set_scale(zoom)
        view.centerOn(view.node_item("o").sceneBoundingRect().center())
        height = ink(view, "o", view.node_item("o").body)[1]
        assert height >= FAR_TITLE_MIN_PX * 0.7, (zoom, height)


def test_a_collapsed_block_far_out_keeps_its_title_and_its_ports(qtbot, view, doc):
    page(doc)
    doc.set_collapsed(["o"], True)
    wheel_to(view, "o", below=Style.DETAIL_LOD)
    item = view.node_item("o")
    assert ink(view, "o", item.body)[1] >= FAR_TITLE_MIN_PX * 0.7
    port = view.mapFromScene(item.port_scene_pos("indices"))
    img = view.viewport().grab().toImage()
    assert img.pixelColor(port) != view.style_.background
