"""The value viewer: the selected block's output from the last run, in full, and its gradient
beside it after a backward run.

Each side shows a table (a QAbstractTableModel over the array: 0-D, 1-D and 2-D directly, higher
ranks one 2-D slice chosen with spin boxes), a heatmap with a colour bar, and shape, dtype,
min/max/mean/std and NaN/Inf counts. It reads the session and edits nothing; it must not
import the main window.

Composite instances are flattened: the run names a block inside one by its flat id (``d1/W``). The
panel shows the selected block at the level the canvas draws (inside an opened instance, ``W`` is
``d1/W``); a closed instance shows its output ports. The "Show" list offers every value of the run,
grouped by instance, to look at one without opening its instance.
"""
from __future__ import annotations

import numpy as np
from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPointF, QRect, QRectF, Qt
from PySide6.QtGui import QColor, QFont, QImage, QPainter, QPalette, QPen
from PySide6.QtWidgets import (QComboBox, QHBoxLayout, QHeaderView, QLabel, QSizePolicy,
                               QSpinBox, QSplitter, QTableView, QToolTip, QVBoxLayout, QWidget)

from blockflow.errors import BlockflowError
from blockflow.gui.common.plaintext import plain_label
from blockflow.present.levels import group_label, grouped_names
from blockflow.present.values import colormap, format_number, value_stats
from blockflow.gui.common.heatmap import heatmap_image
from blockflow.gui.panels.arraytable import ArrayTableModel, fit_columns

__all__ = ["ValueViewerPanel", "ArrayPane", "ArrayTableModel", "HeatmapWidget"]

#: the viewer's heatmap has at most this many cells a side (bigger: block means, said so)
VIEW_CELLS = 200


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _red(palette: QPalette) -> str:
    return "#ff7b72" if palette.color(QPalette.Window).lightness() < 128 else "#c62828"


class HeatmapWidget(QWidget):
    """An array as coloured cells with a colour bar; hovering a cell tells its index and value."""

    BAR_W = 12

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setMinimumSize(120, 60)
        self.setMouseTracking(True)
        self.setSizePolicy(QSizePolicy.Expanding, QSizePolicy.Expanding)
        self._image: QImage | None = None
        self._a: np.ndarray | None = None
        self._lo = self._hi = 0.0
        self._diverging = False
        self._bar = QImage()
        self._cells = QRectF()

    def set_array(self, arr, diverging: bool = False) -> None:
        arr = np.asarray(arr)
        m = arr.reshape(1, -1) if arr.ndim < 2 else arr
        self._a = m
        self._diverging = diverging
        if m.size and m.dtype.kind in "biuf":
            self._image, self._lo, self._hi = heatmap_image(m, VIEW_CELLS, diverging)
        else:
            self._image = None
        lut = colormap("diverging" if diverging else "sequential")
        bar = np.ascontiguousarray(lut[::-1].reshape(256, 1, 4))
        self._bar = QImage(bar.tobytes(), 1, 256, 4, QImage.Format_RGBA8888).copy()
        self.update()

    @property
    def downsampled(self) -> bool:
        return self._image is not None and self._a is not None and (
            self._image.width() != self._a.shape[1] or self._image.height() != self._a.shape[0])

    def _layout(self) -> QRectF:
        """Where the cells go: square cells where there is room, the whole width for a vector."""
        if self._image is None:
            return QRectF()
        area = QRectF(self.rect()).adjusted(4, 6, -(self.BAR_W + 58), -6)
        rows, cols = self._image.height(), self._image.width()
        if rows == 1:
            h = min(area.height(), 28.0)
            return QRectF(area.left(), area.top(), area.width(), h)
        cell = min(area.width() / cols, area.height() / rows)
        return QRectF(area.left(), area.top(), cell * cols, cell * rows)

    def paintEvent(self, event):
        painter = QPainter(self)
        pal = self.palette()
        painter.fillRect(self.rect(), pal.color(QPalette.Base))
        if self._image is None:
            painter.setPen(pal.color(QPalette.PlaceholderText))
            painter.drawText(self.rect(), int(Qt.AlignCenter), "no picture for this value")
            return
        cells = self._cells = self._layout()
        painter.drawImage(cells, self._image)          # no smoothing: crisp cells
        painter.setPen(QPen(pal.color(QPalette.Mid), 1))
        painter.drawRect(cells)
        bar = QRectF(self.width() - self.BAR_W - 54, 6, self.BAR_W, max(20.0, self.height() - 12))
        painter.drawImage(bar, self._bar)
        painter.drawRect(bar)
        painter.setPen(pal.color(QPalette.Text))
        font = QFont(self.font())
        font.setPointSizeF(max(6.5, font.pointSizeF() * 0.85))
        painter.setFont(font)
        x = bar.right() + 4
        painter.drawText(QRectF(x, bar.top() - 2, 52, 14), int(Qt.AlignLeft | Qt.AlignTop), format_number(self._hi, 3))
        painter.drawText(QRectF(x, bar.bottom() - 12, 52, 14), int(Qt.AlignLeft | Qt.AlignBottom),
                         format_number(self._lo, 3))
        if self._diverging and bar.height() > 50:
            painter.drawText(QRectF(x, bar.center().y() - 7, 52, 14), int(Qt.AlignLeft | Qt.AlignVCenter), "0")
        painter.end()

    def cell_at(self, pos: QPointF):
        """The (row, column) ranges of the array under ``pos`` (a cell may cover a block)."""
        cells = self._cells
        if self._image is None or not cells.contains(pos):
            return None
        rows, cols = self._a.shape
        r_cells, c_cells = self._image.height(), self._image.width()
        i = min(int((pos.y() - cells.top()) / cells.height() * r_cells), r_cells - 1)
        j = min(int((pos.x() - cells.left()) / cells.width() * c_cells), c_cells - 1)
        r0, r1 = int(np.floor(i * rows / r_cells)), int(np.floor((i + 1) * rows / r_cells))
        c0, c1 = int(np.floor(j * cols / c_cells)), int(np.floor((j + 1) * cols / c_cells))
        return (r0, max(r1, r0 + 1)), (c0, max(c1, c0 + 1))

    def mouseMoveEvent(self, event):
        hit = self.cell_at(event.position())
        if hit is None:
            QToolTip.hideText()
            return
        (r0, r1), (c0, c1) = hit
        block = self._a[r0:r1, c0:c1]
        if block.size == 1:
            where = f"[{c0}]" if self._a.shape[0] == 1 else f"[{r0}, {c0}]"
            text = f"{where} = {format_number(block.reshape(-1)[0], 6)}"
        else:
            st = value_stats(block)
            text = (f"rows {r0}–{r1 - 1}, columns {c0}–{c1 - 1}: mean "
                    f"{format_number(st.mean) if st.mean is not None else 'n/a'}"
                    + (f", {st.bad_text()}" if st.bad else ""))
        QToolTip.showText(event.globalPosition().toPoint(), text, self, QRect(), 4000)


class ArrayPane(QWidget):
    """One side of the viewer: a title, the statistics, the table and the heatmap."""

    def __init__(self, title: str, parent=None):
        super().__init__(parent)
        self.title = QLabel(f"<b>{_esc(title)}</b>")
        self.title.setTextFormat(Qt.RichText)
        self.stats = QLabel()
        self.stats.setTextFormat(Qt.RichText)
        self.stats.setWordWrap(True)
        self.stats.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.message = plain_label()    # may quote a run's error, names from the file
        self.message.setWordWrap(True)
        self.message.setAlignment(Qt.AlignLeft | Qt.AlignTop)
        self.message.setEnabled(False)
        self.message.setSizePolicy(QSizePolicy.Preferred, QSizePolicy.Maximum)
        self.model = ArrayTableModel(self)
        self.table = QTableView()
        self.table.setModel(self.model)
        self.table.setFont(QFont("DejaVu Sans Mono", max(7, self.font().pointSize() - 1)))
        self.table.verticalHeader().setDefaultSectionSize(self.table.fontMetrics().height() + 4)
        self.table.verticalHeader().setSectionResizeMode(QHeaderView.Fixed)
        # Columns as wide as their numbers, the table at least as wide as one: a right-aligned
        # number in a column wider than the view showed its first digit only ("1" for 1003) or
        # nothing, where the panel is narrow (a high scale factor, a small screen).
        self.table.setTextElideMode(Qt.ElideRight)    # a number wider still ends in "…", never cut silently
        # per pixel: per item, one column wider than the view could not be scrolled at all
        self.table.setHorizontalScrollMode(QTableView.ScrollPerPixel)
        self.heatmap = HeatmapWidget()
        self.split = QSplitter(Qt.Horizontal)
        self.split.addWidget(self.table)
        self.split.addWidget(self.heatmap)
        self.split.setStretchFactor(0, 1)
        self.split.setStretchFactor(1, 1)
        self.split.setChildrenCollapsible(False)
        col = QVBoxLayout(self)
        col.setContentsMargins(4, 2, 4, 2)
        col.setSpacing(3)
        col.addWidget(self.title)
        col.addWidget(self.stats)
        col.addWidget(self.message)
        col.addWidget(self.split, 1)
        col.addStretch(0)             # takes the room when there is only a message
        self.array: np.ndarray | None = None
        self.set_message("")

    def set_title(self, title: str) -> None:
        self.title.setText(f"<b>{_esc(title)}</b>")

    def set_message(self, text: str) -> None:
        """No array: say why."""
        self.array = None
        self.stats.hide()
        self.split.hide()
        self.message.setText(text)
        self.message.setVisible(bool(text))

    def set_array(self, full, shown, label: str, diverging: bool = False, where: str = "") -> None:
        """Show ``shown`` (a 0-2-D view of ``full``) with the statistics of ``full``."""
        self.array = np.asarray(full)
        st = value_stats(full)
        parts = [f"<b>{_esc(st.describe())}</b>"]
        if where:
            parts.append(f"showing {_esc(where)}")
        if st.min is not None:
            parts.append(f"min {format_number(st.min)} · max {format_number(st.max)} · "
                         f"mean {format_number(st.mean)} · std {format_number(st.std)}")
        if st.bad:
            parts.append(f"<span style='color:{_red(self.palette())}'><b>{_esc(st.bad_text())}</b></span>")
        elif st.dtype.kind == "f":
            parts.append("all finite")
        self.stats.setText(" · ".join(parts))
        self.model.set_array(shown, label)
        self.heatmap.set_array(shown, diverging)
        if self.heatmap.downsampled:
            self.stats.setText(self.stats.text() + " · heatmap: block means")
        self.message.hide()
        self.stats.show()
        self.split.show()
        fit_columns(self.table)      # shown: a hidden header keeps its sections' old sizes


class ValueViewerPanel(QWidget):
    """The selected block's output from the current page's last run, and its gradient."""

    def __init__(self, document, session, parent=None):
        super().__init__(parent)
        self.document = document
        self.session = session
        self.node_id: str | None = None
        self.header = QLabel()
        self.header.setTextFormat(Qt.RichText)
        self.header.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.names_combo = QComboBox()
        self.names_combo.setToolTip("the value of the last run to show: the selected block, or any "
                                    "block of the run by its full name, grouped by composite instance")
        self.names_combo.setSizeAdjustPolicy(QComboBox.AdjustToContents)
        self.names_combo.activated.connect(self._on_name_picked)
        self._picked: str | None = None     # a flat id chosen in names_combo (None: the selection)
        self._names_of = None               # the program names_combo lists
        self.output_combo = QComboBox()
        self.output_combo.setToolTip("the output of the block to show")
        self.output_combo.currentIndexChanged.connect(lambda _i: self._rebuild_indices())
        self.stale_label = QLabel("stale")
        self.stale_label.setToolTip("the page was edited after this run: run again to refresh")
        self.stale_label.setStyleSheet("QLabel { background: #d9a21f; color: white; border-radius: 3px;"
                                       " padding: 0px 5px; font-weight: bold; }")
        self.index_row = QWidget()
        self._index_layout = QHBoxLayout(self.index_row)
        self._index_layout.setContentsMargins(0, 0, 0, 0)
        self._index_layout.setSpacing(3)
        self.index_row.hide()
        self.spins: list[QSpinBox] = []
        top = QHBoxLayout()
        top.setContentsMargins(4, 2, 4, 0)
        top.addWidget(self.header, 1)
        top.addWidget(self.names_combo)
        top.addWidget(self.index_row)
        top.addWidget(self.stale_label)
        top.addWidget(self.output_combo)
        self.hint = plain_label()
        self.hint.setWordWrap(True)
        self.hint.setEnabled(False)
        self.hint.setAlignment(Qt.AlignLeft | Qt.AlignTop)
        self.value_pane = ArrayPane("Value")
        self.grad_pane = ArrayPane("Gradient")
        self.split = QSplitter(Qt.Horizontal)
        self.split.addWidget(self.value_pane)
        self.split.addWidget(self.grad_pane)
        self.split.setChildrenCollapsible(False)
        col = QVBoxLayout(self)
        col.setContentsMargins(2, 2, 2, 2)
        col.setSpacing(2)
        col.addLayout(top)
        col.addWidget(self.hint)
        col.addWidget(self.split, 1)
        session.results_changed.connect(self.refresh)
        self._ports: list[str] = []
        self.set_nodes([])

    # ---------------------------------------------------------------- selection
    def set_nodes(self, ids) -> None:
        ids = [n for n in ids if n in self.document.page().nodes]
        node = ids[0] if len(ids) == 1 else None
        picked, self._picked = self._picked, None        # a selection on the canvas takes over
        if node != self.node_id or picked is not None:
            self.node_id = node
            self.names_combo.setCurrentIndex(0)
            self._fill_outputs()
        else:
            self.refresh()

    @property
    def flat_id(self) -> str | None:
        """The block shown, as the run names it (``d1/W``): the one picked in the list, or the
        selected block at the canvas's level."""
        if self._picked is not None:
            return self._picked
        return self.session.flat_id(self.node_id) if self.node_id is not None else None

    def show_flat(self, flat_id: str) -> None:
        """Show the run's block ``flat_id`` (as if picked in the list)."""
        i = self.names_combo.findData(flat_id)
        if i >= 0:
            self.names_combo.setCurrentIndex(i)
        self._picked = flat_id
        self._fill_outputs()

    def _on_name_picked(self, index: int) -> None:
        data = self.names_combo.itemData(index)
        if index == 0 or not data:
            self._picked = None
            self._fill_outputs()
        else:
            self.show_flat(data)

    def _fill_names(self) -> None:
        """The list of the run's values, grouped: the page's blocks, then each instance's."""
        pr = self.session.results()
        program = pr.result.program if pr is not None and pr.result is not None else None
        if program is self._names_of:
            return
        self._names_of = program
        combo = self.names_combo
        combo.blockSignals(True)
        combo.clear()
        combo.addItem("selected block", None)
        groups = grouped_names(program) if program is not None else []
        for group, names in groups:
            if len(groups) > 1 or group:
                combo.addItem(f"— {group_label(program, group)}", None)
                combo.model().item(combo.count() - 1).setEnabled(False)
            for name in names:
                combo.addItem(f"  {name}" if group or len(groups) > 1 else name, name)
        i = combo.findData(self._picked) if self._picked is not None else 0
        if self._picked is not None and i < 0:
            self._picked = None                  # gone from the new run
        combo.setCurrentIndex(max(i, 0))
        combo.setVisible(program is not None)
        combo.blockSignals(False)

    def _host_program(self):
        return self.document.ready_program(self.session.host)     # None while the page compiles

    def _output_ports(self) -> list[str]:
        flat = self.flat_id
        if flat is None:
            return []
        program = self._host_program()
        if program is not None and (program.step(flat) is not None or program.instance(flat) is not None):
            return program.output_ports(flat)
        if self._picked is not None:
            pr = self.session.results()
            program = pr.result.program if pr is not None and pr.result is not None else None
            return program.output_ports(flat) if program is not None else []
        spec = self.document.spec(self.document.current_page, self.node_id)
        return [o.name for o in spec.outputs] if spec is not None else []

    def _key(self, pr, flat: str, port: str) -> tuple[str, str]:
        """Where the run keeps ``flat``'s output ``port``: a closed instance's is its Output block's."""
        program = pr.result.program if pr.result is not None else None
        inst = program.instance(pr.run_id(flat)) if program is not None else None
        if inst is not None and port in inst.outputs:
            return inst.outputs[port], "output"
        return flat, port

    def _fill_outputs(self) -> None:
        """The output combo for the block's outputs (the one shown stays chosen if it is still
        there), then the leading indices and the arrays."""
        current = self.port
        ports = self._output_ports()
        self.output_combo.blockSignals(True)
        self.output_combo.clear()
        self._ports = ports
        self.output_combo.addItems(ports)
        if current in ports:
            self.output_combo.setCurrentIndex(ports.index(current))
        self.output_combo.setVisible(len(ports) > 1)
        self.output_combo.blockSignals(False)
        self._rebuild_indices()

    @property
    def port(self) -> str | None:
        i = self.output_combo.currentIndex()
        return self._ports[i] if 0 <= i < len(self._ports) else None

    def select_output(self, port: str) -> None:
        self.output_combo.setCurrentIndex(self._ports.index(port))

    # ---------------------------------------------------------------- leading indices
    def _value(self):
        pr = self.session.results()
        if pr is None or self.flat_id is None or self.port is None:
            return None
        return pr.value(*self._key(pr, self.flat_id, self.port))

    def _rebuild_indices(self) -> None:
        value = self._value()
        lead = () if value is None or np.ndim(value) <= 2 else np.shape(value)[:-2]
        if tuple(s.maximum() + 1 for s in self.spins) != tuple(lead):
            for s in self.spins:
                self._index_layout.removeWidget(s)
                s.deleteLater()
            self.spins = []
            while self._index_layout.count():
                item = self._index_layout.takeAt(0)
                if item.widget() is not None:
                    item.widget().deleteLater()
            if lead:
                self._index_layout.addWidget(QLabel("slice"))
            for axis, n in enumerate(lead):
                spin = QSpinBox()
                spin.setRange(0, n - 1)
                spin.setToolTip(f"index along axis {axis} (size {n}); the table shows the last two axes")
                spin.valueChanged.connect(lambda _v: self._show())
                self._index_layout.addWidget(spin)
                self.spins.append(spin)
            self.index_row.setVisible(bool(lead))
        self._show()

    def leading_index(self) -> tuple:
        return tuple(s.value() for s in self.spins)

    # ---------------------------------------------------------------- showing
    def refresh(self) -> None:
        self._fill_names()
        if self.node_id is not None and self.node_id not in self.document.page().nodes:
            self.node_id = None
        if self._output_ports() != self._ports:
            self._fill_outputs()
            return
        self._rebuild_indices()

    def _show(self) -> None:
        pr = self.session.results()
        node, port = self.flat_id, self.port
        page = self.document.page(self.session.host)
        self.stale_label.setVisible(pr is not None and pr.stale)
        if node is None:
            self.header.setText("<b>Values</b>")
            self._say("Select a block to see its output from the last run." if pr is not None else
                      "Run the page (Run > Forward, F5), then select a block to see its output here; "
                      "Run > Backward (Shift+F5) adds its gradient.")
            return
        self.header.setText(f"<b>{_esc(page.full_name(node))}</b> ({_esc(self._block_of(pr, node))})"
                            + (f" · {_esc(port)}" if port and len(self._ports) > 1 else ""))
        if port is None:
            self._say(f"{node} has no outputs.")
            return
        if pr is None:
            self._say("No run of this page yet: Run > Forward (F5) runs it; Run > Backward (Shift+F5) "
                      "also computes gradients.")
            return
        key = self._key(pr, node, port)
        value = pr.value(*key)
        if value is None:
            if pr.error is not None:
                where = f" (it stopped at {pr.error_node})" if pr.error_node else ""
                self._say(f"Not computed: the last run failed{where}: {pr.error}")
            else:
                self._say(f"{node}.{port} has no value in the last run: the block was added or "
                          "rewired after it. Run again.")
            return
        self.hint.hide()
        self.split.show()
        index = self.leading_index()
        shown = np.asarray(value)[index] if index else value
        where = "[" + ", ".join(map(str, index)) + ", :, :]" if index else ""
        self.value_pane.set_title(f"Value of {port}")
        self.value_pane.set_array(value, shown, port, False, where)
        self._show_gradient(pr, key[0], key[1], index, where)

    def _block_of(self, pr, flat: str) -> str:
        """The block (or ``@Composite``) ``flat`` is: from the run, else from the diagram drawn."""
        program = pr.result.program if pr is not None and pr.result is not None else self._host_program()
        if program is not None:
            inst = program.instance(flat)
            if inst is not None:
                return "@" + inst.composite
            spec = program.spec_of(flat)
            if spec is not None:
                return spec.name
        node = self.document.page().nodes.get(self.node_id) if self.node_id is not None else None
        return node.block if node is not None else "?"

    def _show_gradient(self, pr, node, port, index, where) -> None:
        pane = self.grad_pane
        if pr.kind != "backward":
            pane.set_title("Gradient")
            pane.set_message("The last run was forward only: Run > Backward (Shift+F5) computes the "
                             "gradient of a target with respect to every output.")
            return
        target = pr.target or "the target"
        grad = pr.grad(node, port)
        pane.set_title(f"Gradient of {target}")
        if grad is None:
            pane.set_message(self._no_gradient_reason(pr, node, port, target))
            return
        shown = np.asarray(grad)[index] if index else grad
        pane.set_array(grad, shown, f"d/d{port}", True, where)

    def _no_gradient_reason(self, pr, node, port, target) -> str:
        if pr.result is None:
            return "No gradient: the run failed before the backward pass."
        rid = pr.run_id(node)
        program = pr.result.program
        try:
            t = program.output_type(rid, port)
        except BlockflowError:
            t = None
        if t is not None and not t.is_float:
            return f"No gradient: {port} is {t.dtype.name}; only float values carry gradient."
        paths = pr.result.paths
        reasons = []
        if paths is not None:
            for edge, why in paths.cut_reasons.items():
                if edge.src == rid and edge.src_port == port:
                    reasons += [f"{n} ({w})" for n, w in why]
        if reasons:
            return f"No gradient of {target} reaches {node}.{port}: it is cut by " + "; ".join(sorted(set(reasons))) + "."
        return f"No gradient of {target} reaches {node}.{port}: it does not lead to the target."

    def _say(self, text: str) -> None:
        self.split.hide()
        self.hint.setText(text)
        self.hint.show()
        self.value_pane.set_message("")
        self.grad_pane.set_message("")

    # ---------------------------------------------------------------- for tests
    def shown_value(self):
        """The full array of the output on show (None when there is none)."""
        return self.value_pane.array

    def shown_gradient(self):
        return self.grad_pane.array

