"""Help inside the editor (issue 16): a block's documentation in the Inspector, the Block
Reference dock (Help > Block Reference, F1 over a block on the canvas or in the palette), made
from the same function as docs/blocks.md; tooltips rendered, never raw ``markup``."""
from __future__ import annotations

import os
import re

from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtWidgets import QApplication, QWidget

from blockflow.cli.cmd_blocks import block_markdown
from blockflow.gui.canvas.view import DiagramView
from blockflow.gui.panels.blockdoc import BlockDocSection, block_page_body
from blockflow.gui.panels.palette import PalettePanel
from blockflow.io.project_io import load_project
from blockflow.gui.document.document import Document

from test_canvas import doc, make_view, view  # noqa: F401  (the canvas tests' fixtures)
from test_main_window import ROOT, SAMPLE, make_window, settings_path  # noqa: F401

RAW_MARKUP = re.compile(r"`|(?<![\w*])\*[A-Za-z][^*\n]*\*(?![\w*])")


def open_sample(qtbot, settings_path):
    window = make_window(qtbot, settings_path, Document(load_project(SAMPLE), None), size=(1400, 860))
    window.view.fit_to_view()
    QApplication.processEvents()
    return window


def click_block(qtbot, view, node: str) -> QPoint:
    item = view.node_item(node)
    at = view.mapFromScene(item.sceneBoundingRect().center() - QPointF(0, item.sceneBoundingRect().height() / 4))
    qtbot.mouseClick(view.viewport(), Qt.LeftButton, Qt.NoModifier, at)
    return at


# ------------------------------------------------------------------------------- one source


def test_the_reference_pages_are_the_sections_of_docs_blocks_md(doc):
    committed = (ROOT / "docs" / "blocks.md").read_text(encoding="utf-8")
    for spec in list(doc.registry)[:: max(1, len(doc.registry) // 25)]:
        page = block_markdown(spec)
        assert page.startswith(f"### {spec.name}\n") and page in committed, spec.name


# ------------------------------------------------------------------------------- the Inspector


def test_the_inspector_shows_the_selected_blocks_documentation_and_folds_it(qtbot, settings_path):
    window = open_sample(qtbot, settings_path)
    view, inspector = window.view, window.inspector
    node = next(n for n, v in window.document.page().nodes.items() if v.block == "Softmax")
    click_block(qtbot, view, node)
    qtbot.waitUntil(lambda: inspector.node_id == node)
    section = inspector.doc_section
    spec = window.document.blocks.get("Softmax")
    assert section.markdown == block_page_body(spec)
    shown = section.markdown
    assert "Gradient: differentiable" in shown and "| `logits` |" in shown and "| attr |" not in shown \
        or "`axis`" in shown
    assert section.is_expanded()
    # readable: the Markdown is rendered (a table, code), not shown as its source
    assert "|" not in _rendered(section.text) and "`" not in _rendered(section.text)
    qtbot.mouseClick(section.toggle, Qt.LeftButton)
    assert not section.is_expanded()
    # the fold is kept for the next block shown
    other = next(n for n, v in window.document.page().nodes.items() if v.block != "Softmax")
    click_block(qtbot, view, other)
    qtbot.waitUntil(lambda: inspector.node_id == other)
    assert not inspector.doc_section.is_expanded()
    qtbot.mouseClick(inspector.doc_section.toggle, Qt.LeftButton)
    assert inspector.doc_section.is_expanded() and BlockDocSection.expanded
    # its link opens the block's page in the reference
    more = inspector.doc_section.more
    qtbot.waitUntil(lambda: more.isVisible() and more.width() > 0)
    qtbot.mouseClick(more, Qt.LeftButton, Qt.NoModifier, QPoint(more.contentsMargins().left() + 8,
                                                                 more.height() // 2))
    ref = window.block_reference
    assert window.docks["reference"].isVisible()
    assert ref.current == window.document.page().nodes[other].block


def _rendered(text) -> str:
    return text.toPlainText()


def test_a_block_with_attrs_shows_their_kinds_defaults_and_hints(qtbot, doc):
    from blockflow.gui.panels.inspector import InspectorPanel

    doc.add_node("Placeholder", (0, 0), node_id="x", attrs={"shape": [3]})
    panel = InspectorPanel(doc)
    qtbot.addWidget(panel)
    panel.resize(420, 900)
    panel.show()
    panel.set_nodes(["x"])
    text = _rendered(panel.doc_section.text)
    spec = doc.registry["Placeholder"]
    for attr in spec.attrs:
        assert attr.name in text and attr.kind in text
    assert "Gradient:" in text


# ------------------------------------------------------------------------------- the reference


def test_help_block_reference_opens_a_searchable_reference_inside_the_app(qtbot, settings_path):
    window = open_sample(qtbot, settings_path)
    dock = window.docks["reference"]
    assert not dock.isVisible()
    help_menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&Help")
    entry = next(a for a in help_menu.actions() if a is window.actions["block_reference"])
    entry.trigger()
    assert dock.isVisible()
    ref = window.block_reference
    assert ref.current is None and "blocks in" in ref.page_text()     # the index first
    qtbot.keyClicks(ref.search, "softmax")
    assert ref.visible_blocks()[0] == "Softmax" and "LogSoftmax" in ref.visible_blocks()
    qtbot.keyClick(ref.search, Qt.Key_Return)
    assert ref.current == "Softmax"
    page = ref.page_text()
    assert page.startswith("Softmax") and "Gradient: differentiable" in page and "logits" in page
    assert "```" not in page and "|---" not in page
    # another block from the list, by the keyboard
    ref.list.setFocus()
    qtbot.keyClick(ref.list, Qt.Key_Down)
    assert ref.current == ref.list.currentItem().text() != "Softmax"
    assert not ref.show_block("NoSuchBlock") and ref.current is None


def test_f1_over_a_block_on_the_canvas_opens_its_page(qtbot, settings_path):
    window = open_sample(qtbot, settings_path)
    view = window.view
    node = next(n for n, v in window.document.page().nodes.items() if v.block == "StopGradient")
    item = view.node_item(node)
    at = view.mapFromScene(item.sceneBoundingRect().center())
    window.activateWindow()
    view.setFocus()
    qtbot.mouseMove(view.viewport(), at)
    qtbot.keyClick(view.viewport(), Qt.Key_F1)
    qtbot.waitUntil(lambda: window.docks["reference"].isVisible())
    assert window.block_reference.current == "StopGradient"


def test_f1_on_the_standalone_canvas_asks_for_the_block_under_the_cursor(qtbot, view, doc):
    doc.add_node("Tanh", (100, 100), node_id="t")
    doc.add_node("Exp", (400, 100), node_id="e")
    QApplication.processEvents()
    asked = []
    view.help_requested.connect(asked.append)
    view.setFocus()
    qtbot.mouseMove(view.viewport(), view.mapFromScene(view.node_item("e").sceneBoundingRect().center()))
    qtbot.keyClick(view.viewport(), Qt.Key_F1)
    view.select_nodes(["t"])
    view._last_scene_pos = None                # the cursor left the canvas: the selected block
    qtbot.keyClick(view.viewport(), Qt.Key_F1)
    assert asked == ["Exp", "Tanh"]


def test_f1_over_a_palette_entry_opens_its_page(qtbot, settings_path):
    window = open_sample(qtbot, settings_path)
    palette = window.palette_panel
    qtbot.keyClicks(palette.search, "MatMul")
    row = palette.item_for("MatMul")
    rect = palette.tree.visualItemRect(row)
    qtbot.mouseClick(palette.tree.viewport(), Qt.LeftButton, Qt.NoModifier, rect.center())
    assert palette.tree.hasFocus() or palette.tree.setFocus() is None
    qtbot.keyClick(palette.tree, Qt.Key_F1)
    qtbot.waitUntil(lambda: window.docks["reference"].isVisible())
    assert window.block_reference.current == "MatMul"


# ------------------------------------------------------------------------------- tooltips


def _tooltips(widget: QWidget) -> list[str]:
    return [w.toolTip() for w in [widget, *widget.findChildren(QWidget)] if w.toolTip()]


def test_no_tooltip_of_any_block_shows_raw_markup(qtbot, doc):
    """Every block: its palette row, its block and port tooltips on the canvas, the Inspector's
    tooltips on its form; none has a backtick or a *starred* word."""
    from blockflow.gui.panels.inspector import InspectorPanel

    palette = PalettePanel(doc.registry)
    qtbot.addWidget(palette)
    view = DiagramView(doc)
    qtbot.addWidget(view)
    view.resize(900, 600)
    inspector = InspectorPanel(doc)
    qtbot.addWidget(inspector)
    specs = list(doc.registry)
    marked = [s.name for s in specs if "``" in s.doc]
    assert marked, "no docstring has markup: the test would prove nothing"
    bad = []
    for i, spec in enumerate(specs):
        tip = palette.item_for(spec.name).toolTip(0)
        if RAW_MARKUP.search(tip):
            bad.append(("palette", spec.name, tip))
        doc.add_node(spec.name, ((i % 20) * 260, (i // 20) * 260), node_id=f"n{i}")
    QApplication.processEvents()
    for i, spec in enumerate(specs):
        item = view.node_item(f"n{i}")
        points = [item.sceneBoundingRect().center()] + [item.port_scene_pos(p) for p in item.ports]
        for sp in points:
            tip = view.tooltip_at(sp)
            if RAW_MARKUP.search(re.sub(r"<[^>]+>", "", tip)):
                bad.append(("canvas", spec.name, tip))
        inspector.set_nodes([f"n{i}"])
        for tip in _tooltips(inspector):
            if RAW_MARKUP.search(re.sub(r"<[^>]+>", "", tip)):
                bad.append(("inspector", spec.name, tip))
    assert bad == []
    # and the markup is rendered, not just dropped: code in a monospace span
    some = doc.registry[marked[0]]
    if "``" in some.summary:
        assert "monospace" in palette.item_for(some.name).toolTip(0)


# ------------------------------------------------------------------------------- the screenshot


def test_screenshot_of_the_block_reference(qtbot, settings_path, tmp_path):
    window = open_sample(qtbot, settings_path)
    window.resize(1200, 700)
    node = next(n for n, v in window.document.page().nodes.items() if v.block == "Softmax")
    window.view.select_nodes([node])
    qtbot.waitUntil(lambda: window.inspector.node_id == node)
    window.open_block_reference("Softmax")
    window.view.fit_to_view()
    QApplication.processEvents()
    image = window.grab().toImage()
    path = tmp_path / "reference.png"
    assert image.save(str(path)) and image.width() <= 1300
    ref = window.block_reference.page
    assert ref.isVisible() and ref.width() > 380 and ref.height() > 160
    if os.environ.get("BLOCKFLOW_UPDATE_SCREENSHOT"):
        image.save(str(ROOT / "docs" / "block-reference.png"))


def test_f1_follows_the_mouse_wherever_the_typing_focus_is(qtbot, settings_path):
    window = open_sample(qtbot, settings_path)
    view = window.view
    window.activateWindow()
    window.palette_panel.search.setFocus()           # typing in the palette's search field
    item = view.node_item("Max_1")
    qtbot.mouseMove(view.viewport(), view.mapFromScene(item.sceneBoundingRect().center()))
    qtbot.waitUntil(view.viewport().underMouse, timeout=2000)
    qtbot.keyClick(window.palette_panel.search, Qt.Key_F1)
    qtbot.waitUntil(lambda: window.docks["reference"].isVisible())
    assert window.block_reference.current == "Max"


def test_the_canvas_own_f1_opens_the_reference_in_the_window(qtbot, settings_path):
    """Where the Help menu's key is not F1 (macOS: Cmd+?), F1 reaches the canvas's key table;
    the window shows the block under the cursor, else the selected one, then too."""
    window = open_sample(qtbot, settings_path)
    window.view.select_nodes(["Softmax_1"])
    window.view._last_scene_pos = None            # the cursor is elsewhere: the selected block
    window.view.help_at_cursor()                  # what the canvas's F1 entry calls
    qtbot.waitUntil(lambda: window.docks["reference"].isVisible(), timeout=2000)
    assert window.block_reference.current == "Softmax"
