"""The window's Run side: Run > Forward (F5), Backward (Shift+F5), Clear Results, Check Gradients,
Train… and Reset Variables; the Run toolbar with the Backward target; View > Gradient Paths and
Gradient Legend. The session (blockflow/gui/session) runs the pages and holds the gradient view
shown (a backward run's as soon as it finishes, or the static paths asked for here);
canvas_results.py puts it on the canvas, and blockflow/gui/canvas/gradients.py draws it. This only
offers it to the user. A mixin of MainWindow."""
from __future__ import annotations

from PySide6.QtCore import QObject, QSize, Qt, QTimer
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QComboBox, QLabel, QProgressBar, QSizePolicy, QStyle, QToolBar

from blockflow.errors import BlockflowError
from blockflow.present.gradview import GradientView

__all__ = ["RunsMixin", "TargetCombo", "GradientPathsToggle"]


class TargetCombo(QComboBox):
    """The Backward target: every scalar float output of the page, the loss by default."""

    def __init__(self, session, parent=None):
        super().__init__(parent)
        self.session = session
        self.setSizeAdjustPolicy(QComboBox.AdjustToContents)
        self.setMinimumContentsLength(12)
        self.setSizePolicy(QSizePolicy.Preferred, QSizePolicy.Fixed)
        self.setToolTip("What Backward (Shift+F5) differentiates: a scalar float output of the page; "
                        "the page's loss unless you pick another")
        self._syncing = False
        session.targets_changed.connect(self.sync)
        self.currentIndexChanged.connect(self._on_picked)
        self.sync()

    def sync(self) -> None:
        self._syncing = True
        try:
            self.clear()
            items = self.session.targets()
            for key, label in items:
                self.addItem(label, key)
            current = self.session.target
            self.setCurrentIndex(self.findData(current) if current is not None else -1)
            self.setEnabled(bool(items))
            if not items:
                self.setPlaceholderText("(no scalar output)")
        finally:
            self._syncing = False

    def _on_picked(self, index: int) -> None:
        if not self._syncing and index >= 0:
            self.session.set_target(self.itemData(index))


class GradientPathsToggle(QObject):
    """View > Gradient Paths: where gradient can flow to the page's loss or the Backward target,
    before any run (the session's gradient view, made without a run); it unchecks itself when a
    run's gradients take their place."""

    def __init__(self, window, action: QAction):
        super().__init__(window)
        self.window, self.action = window, action
        self.session = window.session
        action.toggled.connect(self._toggled)
        self.session.gradients_changed.connect(self._sync_action)
        window.document.program_ready.connect(self._on_program_ready)
        # the paths follow the Backward target picked in the Run toolbar
        window.target_combo.currentIndexChanged.connect(self._on_target_picked)

    def _mode(self) -> str | None:
        """What the session's gradient view is: "run", "paths" or None."""
        gview = self.session.gradients
        return None if gview is None else "run" if gview.ran else "paths"

    def _on_target_picked(self, _index: int) -> None:
        if self._mode() == "paths":
            QTimer.singleShot(0, self.show)

    def _on_program_ready(self, page: str) -> None:
        if page == self.session.host and self._mode() is None:
            self.show()

    def _target(self) -> str | None:
        chosen = self.window.session.target
        return chosen or self.window.document.page(self.session.host).loss or None

    def show(self) -> None:
        if not self.action.isChecked():
            return
        window = self.window
        # inside an opened instance: the paths of the page it is on, drawn at its level
        page = window.document.page(self.session.host)
        program = window.document.ready_program(page.name)
        if program is None:      # compiling off the UI thread: shown when it is ready
            window.statusBar().showMessage(f"Checking page '{page.name}': its gradient paths follow", 4000)
            return
        target = self._target()
        message = ""
        if target is None:
            message = (f"Page '{page.name}' marks no loss: mark a block as the loss (its context "
                       f"menu) to see the gradient paths to it")
        elif not program.ok:
            message = f"Page '{page.name}' has errors: fix them to see its gradient paths"
        if not message:
            try:
                self.session.show_gradients(GradientView(program, target))
                return
            except BlockflowError as exc:
                message = f"No gradient paths to {target}: {exc}"
        self.action.setChecked(False)
        window.statusBar().showMessage(message, 8000)

    def _toggled(self, on: bool) -> None:
        if on:
            self.show()
        elif self._mode() == "paths":
            self.session.clear_gradients()

    def _sync_action(self) -> None:
        mode = self._mode()
        if mode == "run" and self.action.isChecked():
            self.action.blockSignals(True)
            self.action.setChecked(False)
            self.action.blockSignals(False)
        elif mode is None and self.action.isChecked():
            # the paths went (another page, a new project, results cleared): show this page's
            QTimer.singleShot(0, self.show)


class RunsMixin:
    """The Run side of MainWindow (see the module)."""

    def _build_run_actions(self) -> None:
        session, a = self.session, self._action
        fwd = a("run_forward", "Run &Forward", self._committed(session.forward), "F5",
                "Run the page forward and show every block's output (Variables are not changed)")
        bwd = a("run_backward", "Run &Backward", self._committed(session.backward), "Shift+F5",
                "Run forward, then backward from the Target: gradients in the Values panel")
        clear = a("clear_results", "&Clear Results", session.clear, None,
                  "Remove the last run's results and error marks from the blocks")
        for act, text, icon in ((fwd, "Forward", QStyle.SP_MediaPlay), (bwd, "Backward", QStyle.SP_MediaSeekBackward),
                                (clear, "Clear", QStyle.SP_DialogResetButton)):
            act.setIconText(text)
            act.setIcon(self.style().standardIcon(icon))
        a("check_gradients", "Check &Gradients", self.check_gradients, "Ctrl+Alt+G",
          "Compare the gradients with central differences (the page's, and the "
          "selected block's rule at its last inputs)")
        a("train", "&Train…", self.open_train, "Ctrl+T",
          "Train the page's Variables with an optimizer, watching the loss (the Train panel)")
        a("reset_variables", "Reset &Variables", self.train_panel.reset_variables, None,
          "Forget trained values: every Variable starts again from its initializer (undoable)")
        self._build_gradient_actions()

    def _committed(self, slot):
        """``slot``, after a value half-typed in the inspector (a feed, an attr) is committed: the
        field gives up the focus, which finishes its editing, before the page is compiled and run."""
        def run():
            field = self.text_input_focus()
            if field is not None:
                field.clearFocus()
            slot()
        return run

    def _build_gradient_actions(self) -> None:
        act = QAction("Gradient &Paths", self)
        act.setCheckable(True)
        act.setShortcut(QKeySequence("Ctrl+Shift+P"))
        act.setStatusTip("Show which wires can carry gradient to the loss (or the Backward target), "
                         "and which a StopGradient cuts")
        self.actions["gradient_paths"] = act
        legend = QAction("Gradient &Legend", self)
        legend.setCheckable(True)
        legend.setChecked(self.settings.value("gradientLegend", True) not in (False, "false"))
        legend.setStatusTip("Show the legend of the gradient colours in the canvas's corner")
        legend.toggled.connect(self._show_legend)
        self._show_legend(legend.isChecked())
        self.actions["gradient_legend"] = legend

    def _show_legend(self, on: bool) -> None:
        if self.view.gradients.legend_widget is not None:
            self.view.gradients.legend_widget.set_enabled(on)
        self.settings.setValue("gradientLegend", bool(on))

    def _build_run_toolbar(self) -> None:
        """The Run toolbar (Forward, Backward, the target, Clear) and the busy indicator."""
        act = self.actions
        self.target_combo = TargetCombo(self.session, self)
        bar = self.run_toolbar = QToolBar("Run", self)
        bar.setObjectName("runToolBar")
        bar.setToolButtonStyle(Qt.ToolButtonTextBesideIcon)
        bar.setIconSize(QSize(16, 16))
        bar.addActions([act["run_forward"], act["run_backward"]])
        target = QLabel("Target ")
        target.setContentsMargins(8, 0, 0, 0)
        target.setToolTip(self.target_combo.toolTip())
        bar.addWidget(target)
        bar.addWidget(self.target_combo)
        bar.addSeparator()
        bar.addAction(act["clear_results"])
        self.addToolBar(Qt.TopToolBarArea, bar)
        busy = QProgressBar(self)
        busy.setRange(0, 0)
        busy.setTextVisible(False)
        busy.setFixedSize(80, 12)
        busy.setToolTip("a run is going (the editor stays usable; another request waits for it)")
        busy.hide()
        self.statusBar().addPermanentWidget(busy)
        self.session.busy_changed.connect(busy.setVisible)
        self.session.status_message.connect(lambda msg: self.statusBar().showMessage(msg, 15000))

    def _bind_runs(self) -> None:
        self.gradient_paths = GradientPathsToggle(self, self.actions["gradient_paths"])

    def check_gradients(self) -> None:
        """Run > Check Gradients: the Gradient dock's check, its verdict in the status bar."""
        grad = self.docks["gradient"]
        grad.show()
        grad.raise_()
        report = self.gradient_panel.check()
        verdict = "passed" if report.passed else "FAILED" if report.results else "not made"
        self.statusBar().showMessage(f"Gradient check {verdict} ({report.seconds * 1000:.0f} ms)", 6000)

    def open_train(self) -> None:
        """Run > Train…: the Train dock, in front."""
        dock = self.docks["train"]
        dock.show()
        dock.raise_()
        self.train_panel.setFocus()
