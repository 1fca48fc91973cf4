"""Heatmaps as QImages: the colours of blockflow.present.values.heatmap_rgba, one pixel per cell
(draw them scaled without smoothing). Shared by the blocks' result lines and the Values panel."""
from __future__ import annotations

import numpy as np
from PySide6.QtGui import QColor, QImage

from blockflow.present.values import MAX_CELLS, NAN_HEX, heatmap_rgba

__all__ = ["heatmap_image", "rgba_image", "NAN_COLOR"]

#: cells whose value (or any value of their block) is NaN
NAN_COLOR = QColor(NAN_HEX)


def rgba_image(rgba: np.ndarray) -> QImage:
    """An image of RGBA colours (rows x cols x 4, uint8), owning its pixels."""
    rows, cols = rgba.shape[:2]
    data = np.ascontiguousarray(rgba)
    return QImage(data.tobytes(), cols, rows, cols * 4, QImage.Format_RGBA8888).copy()


def heatmap_image(m, max_cells: int = MAX_CELLS, diverging: bool = False, lo=None, hi=None):
    """A 2-D array as a QImage of at most ``max_cells`` cells a side, with the value range its
    colours span: ``(image, lo, hi)`` (see heatmap_rgba)."""
    rgba, lo, hi = heatmap_rgba(m, max_cells, diverging, lo, hi)
    return rgba_image(rgba), lo, hi
