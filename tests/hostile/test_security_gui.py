"""Hostile suite, security in the editor: text from a project file (page names, page notes, block
labels, block names, messages quoting them) is shown literally, never as rich text or HTML.

Each check asks what the user sees: a QLabel's format and text, or for a widget Qt lets guess
(tooltips, message boxes) the text it would render, worked out the way Qt decides it.
"""
from __future__ import annotations

import json

import pytest
from PySide6.QtCore import QSettings, Qt
from PySide6.QtGui import QTextDocument
from PySide6.QtGui import Qt as QtGui
from PySide6.QtWidgets import QLabel, QMessageBox

from blockflow.io.project_io import dumps_project, loads_project

PAGE = "<b>bold & <img src=x> <u>page"            # no "/": it is the scope separator
NOTE = "<img src='file:///etc/passwd'> a note"
LABEL = "<a href='https://evil.example'>click</a>"
BLOCK = "<b>Unknown</b><img src=x>"


def shown(text: str) -> str:
    """What a widget that guesses the format (a tooltip, a message box) displays for ``text``."""
    doc = QTextDocument()
    if QtGui.mightBeRichText(text):
        doc.setHtml(text)
    else:
        doc.setPlainText(text)
    return doc.toPlainText()


def shown_label(label: QLabel) -> str:
    """What a QLabel displays."""
    fmt = label.textFormat()
    if fmt == Qt.PlainText or (fmt == Qt.AutoText and not QtGui.mightBeRichText(label.text())):
        return label.text()
    doc = QTextDocument()
    doc.setHtml(label.text())
    return doc.toPlainText()


@pytest.fixture
def hostile_window(qtbot, tmp_path, monkeypatch):
    from blockflow.gui.document.document import Document
    from blockflow.gui.main_window import MainWindow
    from blockflow.project import Project

    monkeypatch.setenv("BLOCKFLOW_RECOVERY_DIR", str(tmp_path / "rec"))
    project = Project(metadata={"title": "<h1>title</h1>"})
    page = project.add_page(PAGE)
    page.text = NOTE
    page.add_node("Placeholder", id="x", attrs={"shape": [2]}, label=LABEL)
    page.add_node(BLOCK, id="odd", position=(200.0, 0.0))
    page.connect("x", "output", "odd", "input")
    project.add_page("second")
    # through the file format, as a user would get it
    project = loads_project(dumps_project(project))
    doc = Document(project, str(tmp_path / "hostile.bflow.json"))
    window = MainWindow(doc, QSettings(str(tmp_path / "s.ini"), QSettings.IniFormat))
    qtbot.addWidget(window)
    monkeypatch.setattr(QMessageBox, "question", staticmethod(lambda *a, **k: QMessageBox.Discard))
    window.resize(1200, 800)
    window.show()
    qtbot.waitExposed(window)
    return window


def test_page_names_notes_labels_and_block_names_show_literally(hostile_window, qtbot):
    window = hostile_window
    tabs = window.tabs
    assert tabs.tabText(0).replace("&&", "&") == PAGE                 # & is not a mnemonic
    assert PAGE in shown(tabs.tabToolTip(0))
    assert shown_label(window._status_page) == f"Page: {PAGE}"
    assert window._status_page.textFormat() == Qt.PlainText
    # the inspector with no block selected: the page's title and note
    inspector = window.inspector
    labels = [shown_label(lab) for lab in inspector.findChildren(QLabel) if lab.isVisibleTo(inspector)]
    assert f"Page {PAGE}" in labels and NOTE in labels
    note = next(lab for lab in inspector.findChildren(QLabel) if lab.text() == NOTE)
    assert note.textFormat() == Qt.PlainText
    # select the unknown block: its name, its full name, and the unknown-block line
    window.view.select_nodes(["odd"])
    qtbot.waitUntil(lambda: any(lab.text() == BLOCK for lab in inspector.findChildren(QLabel)))
    texts = {shown_label(lab) for lab in inspector.findChildren(QLabel)}
    assert BLOCK in texts and f"{PAGE}/odd" in texts
    assert any(t.startswith(f"Unknown block '{BLOCK}'") for t in texts)
    for lab in inspector.findChildren(QLabel):
        if BLOCK in lab.text() or PAGE in lab.text():
            assert lab.textFormat() == Qt.PlainText, lab.text()
    # the label of x, in the inspector's line edit (plain by nature) and the canvas tooltip
    item = window.view.scene().node_items["odd"]
    tip = window.view.tooltip_at(item.sceneBoundingRect().center())
    assert BLOCK in shown(tip) and f"{PAGE}/odd" in shown(tip)
    # one scope on the page: no tab with the page's name, but its port (a diamond) names it
    assert not item.show_scope
    scope_tip = window.view.tooltip_at(item.port_scene_pos("scope"))
    assert shown(scope_tip) == f"scope: {PAGE} (full name {PAGE}/odd)"


def test_problems_and_message_boxes_show_file_text_literally(hostile_window, qtbot, monkeypatch):
    window = hostile_window
    tree = window.problems.tree
    qtbot.waitUntil(lambda: tree.topLevelItemCount() > 0)
    rows = [tree.topLevelItem(i) for i in range(tree.topLevelItemCount())]
    unknown = next(r for r in rows if BLOCK in r.text(2))
    assert PAGE == unknown.text(0)
    for column in range(3):
        tip = unknown.toolTip(column)
        assert "<b>Unknown</b>" in shown(tip) or PAGE in shown(tip), tip
    # a message box quoting the page name: Delete page asks with its name
    asked = []
    monkeypatch.setattr(QMessageBox, "question",
                        staticmethod(lambda parent, title, text, *a, **k: asked.append(text) or QMessageBox.Cancel))
    window.delete_page(PAGE)
    assert len(asked) == 1 and f"Delete the page “{PAGE}”" in shown(asked[0])
    # a failed save whose message quotes the path
    errors = []
    monkeypatch.setattr(QMessageBox, "critical",
                        staticmethod(lambda parent, title, text, *a, **k: errors.append(text) or QMessageBox.Ok))
    assert not window._save_to("<b>folder</b>/")
    assert len(errors) == 1 and "<b>folder</b>/" in shown(errors[0]) and "ends in '/'" in shown(errors[0])


def test_the_recovery_offer_shows_the_notes_text_plainly(qtbot, tmp_path, monkeypatch):
    import socket

    from blockflow.gui.document.document import Document
    from blockflow.gui.main_window import MainWindow
    from blockflow.project import Project
    from blockflow.io.project_io import save_project

    rec = tmp_path / "rec"
    rec.mkdir()
    project = Project()
    project.add_page("p")
    save_project(project, rec / "a.bflow.json", backup=False)
    (rec / "a.recovery.json").write_text(json.dumps(
        {"original": "/home/<b>me</b>/x.bflow.json", "saved_at": 1.0e9, "title": "<h1>big</h1>",
         "pid": 2 ** 22 + 17, "host": socket.gethostname()}))
    monkeypatch.setenv("BLOCKFLOW_RECOVERY_DIR", str(rec))
    window = MainWindow(Document(), QSettings(str(tmp_path / "s.ini"), QSettings.IniFormat))
    qtbot.addWidget(window)
    boxes = []
    monkeypatch.setattr(QMessageBox, "exec", lambda box: boxes.append((box.textFormat(), box.text())) or 0)
    assert not window.offer_recovery()
    assert boxes == [(Qt.PlainText, boxes[0][1])] and "/home/<b>me</b>/x.bflow.json" in boxes[0][1]
