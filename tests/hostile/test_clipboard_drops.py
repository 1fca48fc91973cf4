"""Hostile clipboard and drops: any program may put any bytes under blockflow's MIME types. Bytes
that are no UTF-8 text, pasted as a fragment or dropped as a palette block, are refused in the
status bar; before, the paste and the drop raised UnicodeDecodeError out of the Qt handler."""
from __future__ import annotations

import pytest
from PySide6.QtCore import QMimeData, QPointF, Qt
from PySide6.QtGui import QDragEnterEvent, QDragMoveEvent, QDropEvent, QFont
from PySide6.QtWidgets import QApplication


@pytest.fixture
def view(qtbot, qapp):
    from blockflow.gui.canvas.view import DiagramView
    from blockflow.gui.document.document import Document

    qapp.setFont(QFont("DejaVu Sans", 9))
    v = DiagramView(Document())
    qtbot.addWidget(v)
    v.resize(1000, 600)
    v.show()
    qtbot.waitExposed(v)
    return v


def said_by(view) -> list:
    said = []
    view.status_message.connect(said.append)
    return said


def drop(view, data: bytes) -> None:
    from blockflow.gui.document.clipboard import BLOCK_MIME

    mime = QMimeData()
    mime.setData(BLOCK_MIME, data)
    pos = QPointF(300, 300)
    for cls in (QDragEnterEvent, QDragMoveEvent):
        QApplication.sendEvent(view.viewport(), cls(pos.toPoint(), Qt.CopyAction, mime, Qt.LeftButton, Qt.NoModifier))
    QApplication.sendEvent(view.viewport(), QDropEvent(pos, Qt.CopyAction, mime, Qt.LeftButton, Qt.NoModifier))
    QApplication.processEvents()


def test_a_fragment_of_bytes_that_are_no_utf8_is_refused_with_where(qtbot, view):
    from blockflow.gui.document.clipboard import FRAGMENT_MIME

    said = said_by(view)
    mime = QMimeData()
    mime.setData(FRAGMENT_MIME, b'{"format": \xff\xfe')
    QApplication.clipboard().setMimeData(mime)
    try:
        assert view.paste() == []
    finally:
        QApplication.clipboard().clear()
    assert said[-1] == "cannot paste: the clipboard's blockflow fragment is not UTF-8 text (byte 0xff at offset 11)"
    assert not view.doc.page().nodes and view.doc.undo_stack.count() == 0


@pytest.mark.parametrize("data,says", [
    (b"\xff\xfeTanh", "there is no block called '\ufffd\ufffdTanh'"),
    (b"Tanh\x00\x1b[2J", "there is no block called 'Tanh\\x00\\x1b[2J'"),
    (b"A" * 1_000_000, "there is no block called '" + "A" * 80 + "...'"),
])
def test_a_drop_of_no_block_name_is_refused_in_a_short_plain_message(qtbot, view, data, says):
    said = said_by(view)
    drop(view, data)
    assert said[-1] == says
    assert not view.doc.page().nodes and view.doc.undo_stack.count() == 0


def test_a_drop_of_a_real_block_still_adds_it(qtbot, view):
    drop(view, b" Tanh \n")
    assert [n.block for n in view.doc.page().nodes.values()] == ["Tanh"]
