"""An array as a table (the Values panel's): the model, and columns as wide as the numbers shown.

Column widths come from the numbers themselves, measured in the table's font, and the table is
never narrower than one column: a fixed width in a narrow table (a high scale factor, a small
screen) showed a right-aligned 1003 as "1", or nothing, since a table scrolls by whole columns.
"""
from __future__ import annotations

import numpy as np
from PySide6.QtCore import QAbstractTableModel, QModelIndex, Qt
from PySide6.QtGui import QColor

from blockflow.present.values import format_number

__all__ = ["ArrayTableModel", "fit_columns"]

#: the rows and columns measured for the table's column width; a cell's padding a side; the
#: narrowest column
_MEASURED, _CELL_PADDING, _MIN_WIDTH = 64, 8, 24


class ArrayTableModel(QAbstractTableModel):
    """An array as a table: a scalar in one cell, a vector as one column, a matrix as is."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self._a = np.zeros((0, 0))
        self._label = "value"

    def set_array(self, arr, label: str = "value") -> None:
        arr = np.asarray(arr)
        self.beginResetModel()
        if arr.ndim == 0:
            arr = arr.reshape(1, 1)
        elif arr.ndim == 1:
            arr = arr.reshape(-1, 1)
        self._a = arr
        self._label = label
        self.endResetModel()

    def array(self) -> np.ndarray:
        return self._a

    def rowCount(self, parent=QModelIndex()):
        return 0 if parent.isValid() else self._a.shape[0]

    def columnCount(self, parent=QModelIndex()):
        return 0 if parent.isValid() else self._a.shape[1]

    def data(self, index, role=Qt.DisplayRole):
        if not index.isValid():
            return None
        v = self._a[index.row(), index.column()]
        if role == Qt.DisplayRole:
            return format_number(v, 6)
        if role == Qt.ToolTipRole:
            where = f"[{index.row()}, {index.column()}]" if self._a.shape[1] > 1 else f"[{index.row()}]"
            return f"{where} = {format_number(v, 9)}"
        if role == Qt.TextAlignmentRole:
            return int(Qt.AlignRight | Qt.AlignVCenter)
        if role == Qt.ForegroundRole and self._a.dtype.kind == "f" and not np.isfinite(v):
            return QColor("#e0403a")
        return None

    def headerData(self, section, orientation, role=Qt.DisplayRole):
        if role != Qt.DisplayRole:
            return None
        if orientation == Qt.Horizontal and self._a.shape[1] == 1:
            return self._label
        return str(section)


def fit_columns(table) -> None:
    """Column width from the widest number shown in the first rows and columns (a big array
    is not measured whole), the table at least wide enough for one such column."""
    model = table.model()
    metrics = table.fontMetrics()
    rows, cols = min(model.rowCount(), _MEASURED), min(model.columnCount(), _MEASURED)
    texts = [model.data(model.index(r, c)) or "" for r in range(rows) for c in range(cols)]
    header = table.horizontalHeader()
    label_w = max((header.fontMetrics().horizontalAdvance(str(model.headerData(c, Qt.Horizontal)))
                   for c in range(cols)), default=0)
    width = max([metrics.horizontalAdvance(t) for t in texts] + [label_w, _MIN_WIDTH]) + 2 * _CELL_PADDING
    # Qt moves the sections at the old default size to the new one (a matrix may be wide: not one
    # by one); a minimum above the new default would hold them
    header.setMinimumSectionSize(_MIN_WIDTH)
    header.setDefaultSectionSize(width)
    frame = 2 * table.frameWidth() + table.verticalScrollBar().sizeHint().width()
    table.setMinimumWidth(table.verticalHeader().sizeHint().width() + width + frame)
