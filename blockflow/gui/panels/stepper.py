"""The backward stepper: walk a recorded backward pass one block at a time, in reverse schedule order.

For each step it asks for the block and its wires to be emphasised on the canvas
(``focus_requested``; the shell shows it there) and says what arrived, the block's rule, and what it
sent back along each input wire. The steps and numbers are the session's gradient view's
(GradientView.steps, blockflow.present.gradview); this module only presents them.

Composite instances are flattened: the steps are the flat program's (``d1/MatMul_1``). A step
inside an instance that is not open is shown on the canvas as the closed instance (the shell maps
it), and the stepper offers "Open d1" rather than opening it itself: while playing, the view would
otherwise jump in and out of instances every few steps and the closed level's overview (where the
gradient enters and leaves the layer) would be lost. A step outside the opened instance offers to
go back up the same way.
"""
from __future__ import annotations

from PySide6.QtCore import QEvent, Qt, QTimer, Signal
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import (QApplication, QDockWidget, QHBoxLayout, QLabel, QListWidget, QListWidgetItem,
                               QSizePolicy, QSlider, QSplitter, QStyle, QTextBrowser, QToolButton, QVBoxLayout,
                               QWidget)

from blockflow.errors import BlockflowError
from blockflow.present.gradview import FLOWS, GradientView
from blockflow.gui.document.location import Location
from blockflow.gui.panels.gradtext import Colors, array_html, esc, rule_html
from blockflow.gui.common.plaintext import literal

__all__ = ["BackwardStepper", "MIN_SPEED", "MAX_SPEED"]

MIN_SPEED, MAX_SPEED = 0.5, 10.0     # steps per second
_SLIDER_STEP = 0.5                   # the slider moves in half steps per second
HINT = "Run Backward (Shift+F5) to step through it"


class _StepItem(QListWidgetItem):
    """A step of the list, its tooltip (the gradients' statistics) made when it is first asked
    for: describing every step of a 450-block model at once stalled the window for 0.6 s."""

    def __init__(self, text: str, step):
        super().__init__(text)
        self._step, self._tip = step, None

    def data(self, role):
        if role == Qt.ItemDataRole.ToolTipRole:
            if self._tip is None:
                self._tip = literal(self._step.describe())
            return self._tip
        return super().data(role)


class BackwardStepper(QWidget):
    """Next / previous / first / last, Play/Pause at a chosen speed, through the session's
    gradient view (``session.gradients``, when it is a recorded backward run of the current page).

    ``index`` is the current step (-1: not stepping). Keys while the panel (or one of its
    controls) has focus: Right/Left step, Space plays or pauses, Home/End go to the ends, Escape
    stops. ``focus_requested(node, incoming, outgoing)`` asks the canvas to emphasise a step's
    block and wires and bring it into sight (``(None, [], [])``: no emphasis any more).
    """

    focus_requested = Signal(object, list, list)

    def __init__(self, document, session, parent=None):
        super().__init__(parent)
        self.doc = document
        self.session = session
        self.gview: GradientView | None = None
        self.steps: list = []
        self.index = -1
        self._focused = False
        self.setFocusPolicy(Qt.StrongFocus)

        self.position_label = QLabel()
        self.position_label.setTextFormat(Qt.PlainText)
        self.position_label.setWordWrap(True)
        font = self.position_label.font()
        font.setBold(True)
        self.position_label.setFont(font)

        self._build_controls()
        self._build_steps()
        self._lay_out()
        self.timer = QTimer(self)
        self.timer.timeout.connect(self._tick)
        for key, slot in ((Qt.Key_Right, self.next), (Qt.Key_Left, self.previous),
                          (Qt.Key_Space, self.toggle_play), (Qt.Key_Home, self.first),
                          (Qt.Key_End, self.last), (Qt.Key_Escape, self.stop)):
            sc = QShortcut(QKeySequence(key), self, context=Qt.WidgetWithChildrenShortcut)
            sc.activated.connect(slot)

        # The session takes the gradients away on another page or project: that is all to follow.
        session.gradients_changed.connect(self._on_gradients_changed)
        # An instance opened or closed (here, or on the canvas): the step is shown at the new level.
        document.location_changed.connect(self._on_location_changed)
        self._on_speed(self.speed_slider.value())
        self._on_gradients_changed()
        self._show()

    def _button(self, icon, text, tip, slot, key=None) -> QToolButton:
        b = QToolButton(self)
        b.setIcon(self.style().standardIcon(icon))
        b.setText(text)
        b.setToolButtonStyle(Qt.ToolButtonTextBesideIcon if text else Qt.ToolButtonIconOnly)
        b.setToolTip(f"{tip} ({QKeySequence(key).toString(QKeySequence.NativeText)})" if key else tip)
        b.setAutoRaise(True)
        b.clicked.connect(lambda _c=False: self._act(slot))
        return b

    def _build_controls(self) -> None:
        """The step buttons and the speed slider."""
        sp = QStyle.StandardPixmap
        self.first_button = self._button(sp.SP_MediaSkipBackward, "", "First step", self.first, Qt.Key_Home)
        self.prev_button = self._button(sp.SP_MediaSeekBackward, "", "Previous step", self.previous, Qt.Key_Left)
        self.play_button = self._button(sp.SP_MediaPlay, "Play", "Play the steps one after another at the "
                                        "chosen speed", self.toggle_play, Qt.Key_Space)
        self.next_button = self._button(sp.SP_MediaSeekForward, "", "Next step", self.next, Qt.Key_Right)
        self.last_button = self._button(sp.SP_MediaSkipForward, "", "Last step", self.last, Qt.Key_End)
        self.stop_button = self._button(sp.SP_MediaStop, "", "Stop stepping (the canvas shows every wire again)",
                                        self.stop, Qt.Key_Escape)
        self.open_button = QToolButton(self)
        self.open_button.setAutoRaise(True)
        self.open_button.setToolButtonStyle(Qt.ToolButtonTextOnly)
        self.open_button.clicked.connect(lambda _c=False: self._act(self.open_step_level))
        self.open_button.hide()
        self.speed_slider = QSlider(Qt.Horizontal, self)
        self.speed_slider.setRange(int(MIN_SPEED / _SLIDER_STEP), int(MAX_SPEED / _SLIDER_STEP))
        self.speed_slider.setValue(int(1.0 / _SLIDER_STEP))
        self.speed_slider.setToolTip("Play speed, in steps per second")
        self.speed_slider.setMaximumWidth(140)
        self.speed_slider.setMinimumWidth(40)
        self.speed_label = QLabel()
        self.speed_label.setMinimumWidth(self.speed_label.fontMetrics().horizontalAdvance("10 steps/s"))
        self.speed_slider.valueChanged.connect(self._on_speed)

    def _build_steps(self) -> None:
        """The list of steps and the selected step's details."""
        self.step_list = QListWidget(self)
        self.step_list.setToolTip("The backward pass, first step at the top; click one to go to it")
        self.step_list.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.step_list.setTextElideMode(Qt.ElideRight)
        self.step_list.setUniformItemSizes(True)
        self.step_list.itemClicked.connect(lambda item: self._act(lambda: self.go_to(self.step_list.row(item))))
        self.details = QTextBrowser(self)
        self.details.setOpenLinks(False)
        self.details.setFocusPolicy(Qt.ClickFocus)
        # Small minimums: the dock may share a column with several others (the window's own
        # minimum size is the sum of theirs).
        self.step_list.setMinimumHeight(24)
        self.details.setMinimumHeight(40)

    def _lay_out(self) -> None:
        controls = QHBoxLayout()
        controls.setContentsMargins(0, 0, 0, 0)
        controls.setSpacing(1)
        for w in (self.first_button, self.prev_button, self.play_button, self.next_button,
                  self.last_button, self.stop_button):
            controls.addWidget(w)
        controls.addWidget(self.open_button)
        controls.addStretch(1)
        speed = QHBoxLayout()
        speed.setContentsMargins(0, 0, 0, 0)
        speed.addWidget(QLabel("Speed", self))
        speed.addWidget(self.speed_slider, 1)
        speed.addWidget(self.speed_label)
        speed.addStretch(1)
        split = QSplitter(Qt.Vertical, self)
        split.addWidget(self.step_list)
        split.addWidget(self.details)
        split.setStretchFactor(0, 1)
        split.setStretchFactor(1, 3)
        split.setSizes([120, 400])
        split.setChildrenCollapsible(False)
        self.step_list.setSizePolicy(QSizePolicy.Preferred, QSizePolicy.Ignored)
        col = QVBoxLayout(self)
        col.setContentsMargins(4, 4, 4, 4)
        col.setSpacing(4)
        col.addWidget(self.position_label)
        col.addLayout(controls)
        col.addLayout(speed)
        col.addWidget(split, 1)

    # ------------------------------------------------------------------------- state
    @property
    def current_step(self):
        """The BackwardStep shown now, or None when not stepping."""
        return self.steps[self.index] if 0 <= self.index < len(self.steps) else None

    @property
    def playing(self) -> bool:
        return self.timer.isActive()

    def speed(self) -> float:
        """Steps per second."""
        return self.speed_slider.value() * _SLIDER_STEP

    def set_speed(self, steps_per_second: float) -> None:
        self.speed_slider.setValue(round(min(MAX_SPEED, max(MIN_SPEED, steps_per_second)) / _SLIDER_STEP))

    def _usable(self, gview) -> bool:
        return gview is not None and gview.ran and bool(gview.steps) and \
            gview.program.page_name == self.session.host

    def _on_gradients_changed(self) -> None:
        gview = self.session.gradients
        gview = gview if self._usable(gview) else None
        if gview is self.gview:
            return
        self.pause()
        self._unfocus()
        self.gview = gview
        self.steps = list(gview.steps) if gview is not None else []
        self.index = -1
        self.step_list.clear()
        for s in self.steps:
            tag = {"cut": " · stops", "leaf": " · leaf"}.get(s.kind, "")
            self.step_list.addItem(_StepItem(f"{s.index + 1}. {s.node} ({s.block}){tag}", s))
        self._show()

    # ------------------------------------------------------------------------- moving
    def go_to(self, index: int) -> None:
        """Show step ``index`` (clamped to the steps) and ask for it to be emphasised on the canvas."""
        if not self.steps:
            return
        self.index = max(0, min(len(self.steps) - 1, index))
        step = self.steps[self.index]
        incoming, outgoing = self.wires_of(step)
        self._focused = True
        self.focus_requested.emit(step.node, incoming, outgoing)
        self._show()

    @staticmethod
    def level_of(node: str) -> str:
        """The level a flat id is drawn at: the instance holding it ("" for the page)."""
        return node.rpartition("/")[0]

    def open_step_level(self) -> None:
        """Show the current step's block where it is drawn: open the instance holding it (or go
        up to it)."""
        step = self.current_step
        if step is None or self.gview is None:
            return
        try:
            where = Location.at(self.doc.project, self.gview.program.page_name, self.level_of(step.node))
        except BlockflowError:
            return                       # the instance went since the run
        self.doc.set_location(where)

    def _on_location_changed(self) -> None:
        if self.gview is not None and self.index >= 0:
            self.go_to(self.index)       # the canvas redrew: emphasise the step there again
        else:
            self._sync_open()

    def _sync_open(self) -> None:
        step = self.current_step
        level = self.level_of(step.node) if step is not None else ""
        here = self.session.level
        if step is None or level == here:
            self.open_button.hide()
            return
        if level.startswith(here + "/") or not here:
            self.open_button.setText(f"Open {level}")
            self.open_button.setToolTip(f"{step.node} is inside the closed instance {level}: open it to see "
                                        f"the step on its own block (the canvas shows it on the instance now)")
        else:
            self.open_button.setText(f"Go to {level or self.gview.program.page_name}")
            self.open_button.setToolTip(f"{step.node} is outside the instance shown: go to where it is drawn")
        self.open_button.show()

    def wires_of(self, step) -> tuple[list, list]:
        """(incoming, outgoing) for ``step``: the wires out of its block that bring the gradient
        arriving at it, and its input wires along which it sends gradient."""
        incoming = [e for e, w in self.gview.wires.items() if e.src == step.node and w.state == FLOWS]
        outgoing = [e for e, _ in step.sent]
        return incoming, outgoing

    def first(self) -> None:
        self.go_to(0)

    def last(self) -> None:
        self.go_to(len(self.steps) - 1)

    def next(self) -> None:
        if self.index < len(self.steps) - 1:
            self.go_to(self.index + 1)
        elif self.playing:
            self.pause()

    def previous(self) -> None:
        if self.index > 0:
            self.go_to(self.index - 1)

    def play(self) -> None:
        """Advance one step every 1/speed seconds; from the start when at the end or not stepping."""
        if not self.steps:
            return
        if self.index < 0 or self.index >= len(self.steps) - 1:
            self.go_to(0)
        self.timer.start(self._interval())
        self._sync_buttons()

    def pause(self) -> None:
        self.timer.stop()
        self._sync_buttons()

    def toggle_play(self) -> None:
        if self.playing:
            self.pause()
        else:
            self.play()

    def stop(self) -> None:
        """Leave stepping: pause, forget the position, give the canvas its full colours back."""
        self.pause()
        self._unfocus()
        if self.index != -1:
            self.index = -1
            self._show()

    def _unfocus(self) -> None:
        if self._focused:
            self._focused = False
            self.focus_requested.emit(None, [], [])

    def _tick(self) -> None:
        self.next()
        if self.index >= len(self.steps) - 1:
            self.pause()

    def _interval(self) -> int:
        return max(1, round(1000.0 / self.speed()))

    def _on_speed(self, _value: int) -> None:
        s = self.speed()
        self.speed_label.setText(f"{s:g} step{'s' if s != 1 else ''}/s")
        if self.playing:
            self.timer.setInterval(self._interval())

    def _act(self, slot) -> None:
        """A control was used: act, and keep the keys (Right/Left/Space) with the stepper."""
        slot()
        fw = QApplication.focusWidget()
        if fw is None or (fw is not self and not self.isAncestorOf(fw)):
            self.setFocus(Qt.OtherFocusReason)

    # ------------------------------------------------------------------------- display
    def _sync_buttons(self) -> None:
        n, i = len(self.steps), self.index
        self.first_button.setEnabled(n > 0 and i != 0)
        self.prev_button.setEnabled(i > 0)
        self.next_button.setEnabled(n > 0 and i < n - 1)
        self.last_button.setEnabled(n > 0 and i != n - 1)
        self.stop_button.setEnabled(i >= 0 or self.playing)
        self.play_button.setEnabled(n > 0)
        self.play_button.setText("Pause" if self.playing else "Play")
        self.play_button.setIcon(self.style().standardIcon(
            QStyle.StandardPixmap.SP_MediaPause if self.playing else QStyle.StandardPixmap.SP_MediaPlay))

    def _show(self) -> None:
        self._sync_buttons()
        self._sync_open()
        c = Colors.of(self)
        if self.gview is None:
            self.position_label.setText("Backward steps")
            static = self.session.gradients is not None and not self.session.gradients.ran
            lead = ("The canvas shows where gradient can flow; the numbers need a run." if static
                    else "No backward pass to step through yet.")
            self.details.setHtml(f'<p>{esc(lead)}</p><p><b>{esc(HINT)}</b>, then press '
                                 f'<b>▶</b> or <b>→</b> here to walk it block by block, from the target '
                                 f'back to the inputs.</p>')
            return
        n = len(self.steps)
        target = self.gview.target[0]
        if self.index < 0:
            self.position_label.setText(f"{n} steps back from {target}")
            self.step_list.setCurrentRow(-1)
            self.details.setHtml(
                f"<p>The backward pass from <b>{esc(target)}</b> visits {n} blocks, in the reverse of "
                f"the order the forward pass ran them. Each one receives the gradient of {esc(target)} "
                f"with respect to its output, applies its local rule and sends the result back along "
                f"its input wires.</p><p>Press <b>▶</b> (or <b>→</b>) for the first step, or "
                f"<b>Play</b>.</p>")
            return
        step = self.steps[self.index]
        self.position_label.setText(f"Step {self.index + 1} of {n}: {step.node} ({step.block})")
        self.step_list.setCurrentRow(self.index)
        self.details.setHtml(self.step_html(step, c))

    def step_html(self, step, c: Colors | None = None) -> str:
        """What the dock says about ``step``."""
        c = c or Colors.of(self)
        gv = self.gview
        program = gv.program
        target = gv.target[0]
        parts = [f'<p style="margin-bottom:2px"><span style="font-size:large"><b>{esc(step.node)}</b></span> '
                 f'· {esc(step.block)}<br><span style="color:{c.muted}">{esc(program.full_name(step.node))}'
                 f'</span></p>']

        parts.append("<h4 style='margin-bottom:2px'>Gradient arriving</h4>")
        if step.index == 0 and step.node == target:
            parts.append(f"<p>{esc(step.node)} is the target: the backward pass starts here with "
                         f"∂{esc(target)}/∂{esc(target)} = 1.</p>")
        incoming, _ = self.wires_of(step)
        for port, g in step.arriving.items():
            wires = [e for e in incoming if e.src_port == port]
            parts.append(f"<p>at output <b>{esc(port)}</b>: {array_html(g, c)}")
            if len(wires) > 1:
                parts.append(f"<br>the sum of what {len(wires)} wires bring back:")
                for e in wires:
                    parts.append(f"<br>&nbsp;&nbsp;+ from {esc(e.dst)}.{esc(e.dst_port)}: "
                                 f"{array_html(gv.wires[e].grad, c)}")
            elif wires:
                parts.append(f"<br><span style='color:{c.muted}'>back along the wire from "
                             f"{esc(wires[0].dst)}.{esc(wires[0].dst_port)}</span>")
            parts.append("</p>")

        parts.append("<h4 style='margin-bottom:2px'>Rule</h4>")
        parts.append(rule_html(step.rule, c))

        parts.append("<h4 style='margin-bottom:2px'>Sends back</h4>")
        if step.kind == "leaf":
            parts.append(f"<p>Nothing: {esc(step.node)} is a {esc(step.block)}, a leaf of the diagram. "
                         f"The gradient arriving here is the final gradient of the target "
                         f"{esc(target)} with respect to {esc(step.node)} "
                         f"(∂{esc(target)}/∂{esc(step.node)}).</p>")
        elif step.kind == "cut":
            parts.append(f"<p><b>Nothing</b>: {esc(self._why_nothing(step))}</p>")
        else:
            for edge, g in step.sent:
                parts.append(f"<p>along input <b>{esc(edge.dst_port)}</b> to <b>{esc(edge.src)}</b>"
                             f".{esc(edge.src_port)}: {array_html(g, c)}</p>")
            sent = {e for e, _ in step.sent}
            for ie in gv.explain(step.node).inputs:
                if ie.edge is not None and ie.edge in sent:
                    continue
                why = ie.why_none or "nothing flows back here"
                parts.append(f"<p style='color:{c.cut}'>input {esc(ie.port)}: no gradient ({esc(why)})</p>")
        return "".join(parts)

    def _why_nothing(self, step) -> str:
        gv = self.gview
        spec = gv.program.spec_of(step.node)
        if spec.gradient == "stop":
            text = (f"{step.block} passes its input through unchanged going forward but is a constant "
                    f"going backward, so the gradient stops here.")
            if gv.cut_by.get(step.node):
                text += " " + gv.cut_summary(step.node) + "."
            return text
        wired = [e for _, _, e in gv.program.step(step.node).in_edges if e is not None]
        if not wired:
            return (f"{step.node} has no input wires, so there is no block to send the gradient to: "
                    f"it ends here (∂{gv.target[0]}/∂{step.node} is the gradient arriving above).")
        reasons = sorted({gv.wires[e].reason for e in wired if e in gv.wires and gv.wires[e].reason})
        return f"{step.block} sends no gradient back" + (": " + "; ".join(reasons) if reasons else ".")

    # ------------------------------------------------------------------------- events
    def changeEvent(self, event):
        super().changeEvent(event)
        if event.type() == QEvent.PaletteChange:
            self._show()

    def hideEvent(self, event):
        super().hideEvent(event)
        # Closing the dock leaves stepping; a tab switch (the dock still open) keeps it.
        dock = self.parentWidget()
        while dock is not None and not isinstance(dock, QDockWidget):
            dock = dock.parentWidget()
        if dock is not None and dock.isHidden():
            self.stop()
