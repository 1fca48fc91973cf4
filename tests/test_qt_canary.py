"""Canary for the PySide6 6.12.0 bug on Python 3.11 (docs/qt.md §1).

There every call of a void wrapper (QPainter.drawRect, setPen, ...) decrements None's refcount,
and the app dies with "Fatal Python error: none_dealloc" after ~5 000 calls.
"""
import sys

import PySide6
import shiboken6
from PySide6.QtCore import QRect
from PySide6.QtGui import QColor, QGuiApplication, QImage, QPainter


def test_installed_pyside6_is_not_the_broken_6_12_0():
    print(f"PySide6 {PySide6.__version__}, shiboken6 {shiboken6.__version__}, Python {sys.version.split()[0]}")
    assert PySide6.__version__ != "6.12.0", "PySide6 6.12.0 corrupts None's refcount on Python 3.11"
    assert shiboken6.__version__ != "6.12.0", "shiboken6 6.12.0 corrupts None's refcount on Python 3.11"


def test_painting_does_not_eat_references_to_none(qapp):
    assert isinstance(qapp, QGuiApplication)
    image = QImage(64, 64, QImage.Format.Format_ARGB32_Premultiplied)
    image.fill(QColor("white"))
    painter = QPainter(image)
    try:
        rect = QRect(4, 4, 16, 16)
        before = sys.getrefcount(None)
        for _ in range(1000):
            painter.drawRect(rect)
        after = sys.getrefcount(None)
    finally:
        painter.end()
    assert before - after < 10, f"1000 drawRect calls dropped None's refcount by {before - after}"
    # The calls really painted: the rectangle's outline is black on the white image.
    assert image.pixelColor(4, 4) == QColor("black")
