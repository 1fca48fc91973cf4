"""The Train panel: train the current page off the UI thread and watch it learn.

Settings (loss, optimizer and its settings, steps, batch size, seed, test evaluation, mode)
start from what the project recommends for the page (``metadata.training``; see
blockflow.run.run.settings.recommended_settings: what is ill-typed or out of range is left out, named in
the Problems panel and here). The lists of scalars follow the page's program as it is compiled
off the UI thread (``program_ready``). Training runs in a worker thread on a snapshot of the
page (the Trainer's own copy of the Variables): a progress bar, steps per second and a Stop
button; a live loss curve and curves of the page's plotted metrics (pyqtgraph, imported when the
panel is first shown); every half second a recorded run of the current values is offered to the
canvas (``snapshot`` signal: results on blocks and gradient highlighting follow the training).
When training runs to the end, the trained values are stored in the project as one undoable
edit. Stopped midway, the project is left unchanged and the panel offers to keep the values
trained so far (one click, undoable). "Reset variables" forgets trained values (the
initializers draw again).
"""
from __future__ import annotations

import importlib.util
import threading
import time

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QCheckBox, QComboBox, QDoubleSpinBox, QFormLayout, QHBoxLayout, QLabel,
                               QListWidget, QListWidgetItem, QProgressBar, QPushButton, QSpinBox,
                               QVBoxLayout, QWidget)

from blockflow.project import port_text, split_port_text
from blockflow.errors import BlockflowError
from blockflow.run.runtime import run
from blockflow.run.settings import (DECAY_RATES, MAX_BATCH_SIZE, MAX_SEED, MAX_SETTING, MAX_STEPS, OPTIMIZERS,
                                    optimizer_defaults, recommended_settings)
from blockflow.run.training import TrainConfig, Trainer, training_program
from blockflow.gui.common.plaintext import plain_label
from blockflow.gui.common.refresh import Debounced
from blockflow.gui.common.wheel import wheel_only_when_focused
from blockflow.gui.common.worker import Worker
from blockflow.gui.panels.curves import TrainCurves
from blockflow.gui.session.session import host_page

__all__ = ["TrainPanel", "TrainJob"]

#: how often the worker hands progress to the UI thread, and a recorded run to the canvas
PROGRESS_SECONDS, SNAPSHOT_SECONDS = 0.05, 0.5
_PAGE_ERRORS = "The page has errors (see Problems): fix them to train."
_SETTING_LABELS = {"lr": "learning rate", "momentum": "momentum", "use_nesterov": "Nesterov",
                   "beta1": "beta1", "beta2": "beta2", "epsilon": "epsilon", "rho": "rho"}


class TrainJob:
    """One training: a job the panel's Worker (blockflow.gui.common.worker) runs off the UI thread.
    Progress goes to the UI thread in batches (a call per step would flood it at thousands of
    steps per second), through the callbacks the panel sets: ``progress([StepRecord])``,
    ``evaluated(step, {"loss": x, metric: y})`` on the test part, ``snapshot(result, summaries)``
    (a recorded run of the current values), ``finished(history, state updates, stopped)`` and
    ``failed(message, node, port)``."""

    def __init__(self, trainer: Trainer, steps: int):
        self.trainer, self.steps = trainer, steps
        self.stop_event = threading.Event()
        self.thread_id = None
        self.progress = self.evaluated = self.snapshot = self.finished = self.failed = lambda *args: None

    def work(self, post) -> None:
        self.thread_id = threading.get_ident()
        pending, last = [], {"emit": time.perf_counter(), "snap": 0.0}

        def on_step(record, _trainer):
            pending.append(record)
            now = time.perf_counter()
            if now - last["emit"] >= PROGRESS_SECONDS:
                post(self.progress, list(pending))
                pending.clear()
                last["emit"] = now
            if now - last["snap"] >= SNAPSHOT_SECONDS:
                last["snap"] = now
                self._snapshot(post)

        try:
            history = self.trainer.train(self.steps, callback=on_step, should_stop=self.stop_event.is_set,
                                         on_evaluate=lambda step, values: post(self.evaluated, step, values))
        except BlockflowError as exc:
            post(self.progress, list(pending))
            post(self.failed, str(exc), getattr(exc, "node", "") or "", getattr(exc, "port", "") or "")
            return
        except Exception as exc:   # a bug: report it, keep the editor alive
            post(self.progress, list(pending))
            post(self.failed, f"training failed: {type(exc).__name__}: {exc}", "", "")
            return
        if pending:
            post(self.progress, list(pending))
        self._snapshot(post)
        post(self.finished, history, self.trainer.state_updates(), history.stopped)

    def _snapshot(self, post):
        t = self.trainer
        try:
            result = run(t.program, t.feeds, target=t.loss_key, variables=dict(t.values), record=True,
                         commit=False, step=max(t.step_index - 1, 0), run_seed=t.config.seed)
        except BlockflowError:
            return
        from blockflow.present.values import summarize     # made here, on the worker thread, not in the UI

        post(self.snapshot, result, {key: summarize(v) for key, v in result.values.items()})


class TrainPanel(QWidget):
    """The dock's widget. ``document`` is the editor's Document."""

    snapshot = Signal(object, object)    # a recorded RunResult while training, its block summaries
    training_failed = Signal(str, str, str)
    status_message = Signal(str)
    training_started = Signal()
    training_finished = Signal(bool)     # stopped

    def __init__(self, document, parent=None, settings=None):
        super().__init__(parent)
        self.doc = document
        self.curves = TrainCurves(settings, self)   # the loss and metric curves, the smoothing
        self.setObjectName("trainPanel")
        self._worker = Worker(self)                 # the thread trainings run on, one at a time
        self._job: TrainJob | None = None           # the training going on
        self.losses: list[float] = []
        self.metric_values: dict[str, list[float]] = {}
        self.test_points: list[tuple[int, dict]] = []
        self._t0 = 0.0
        self.training_page: str | None = None   # the page being (or last) trained
        self._steps = 0
        self._on_engine = ""      # " on PyTorch (cpu)" while the last training ran there
        self._mode_pending = False
        #: the page's recommended training settings that were left out, in words
        self.settings_problems: list[str] = []
        self._build()
        # Bound methods only: Qt disconnects them when this panel goes (a closed window).
        self._refresh_lists = Debounced(self, self.refresh_lists)
        self._plot_later = Debounced(self, self.plot_if_seen)
        document.current_page_changed.connect(self._on_page_changed)
        document.project_replaced.connect(self._on_page_changed)
        document.structure_changed.connect(self._on_structure)
        document.program_ready.connect(self._on_structure)
        document.page_field_changed.connect(self._on_page_field)
        self.load_page()

    # ------------------------------------------------------------------ widgets
    def _build(self):
        outer = QVBoxLayout(self)
        outer.setContentsMargins(6, 6, 6, 6)
        form = self._build_form()
        also = QLabel("Also plot (saved with the page):")
        also.setWordWrap(True)
        self.metrics = QListWidget()
        self.metrics.setMaximumHeight(90)
        self.metrics.itemChanged.connect(self._on_metric_toggled)
        self._build_controls(outer)
        outer.addWidget(self.curves, 1)
        # the curves and controls first, the settings under them
        outer.addLayout(form)
        outer.addWidget(also)
        outer.addWidget(self.metrics)
        self._on_optimizer()
        wheel_only_when_focused(self)

    def _build_form(self) -> QFormLayout:
        """The settings: loss, mode, optimizer and its settings, steps, batch, seed, test."""
        form = QFormLayout()
        form.setRowWrapPolicy(QFormLayout.WrapLongRows)     # a narrow dock: fields go below labels
        self.loss = QComboBox()
        self.loss.setToolTip("the float scalar to minimise (default: the page's loss)")
        form.addRow("Loss", self.loss)
        self.mode = QComboBox()
        self.mode.addItems(["optimizer", "graph (the page's Apply*)"])
        self.mode.setToolTip("graph: run the page's own Gradients and Apply* blocks once per step")
        form.addRow("Mode", self.mode)
        form.addRow("Engine", self._build_engine())
        self.optimizer = QComboBox()
        for name, (block, _) in OPTIMIZERS.items():
            self.optimizer.addItem(f"{name} ({block})", name)
        self.optimizer.setCurrentIndex(self.optimizer.findData("adam"))
        self.optimizer.currentIndexChanged.connect(self._on_optimizer)
        form.addRow("Optimizer", self.optimizer)
        self.form = form
        self.setting_widgets = {}
        for key in _SETTING_LABELS:
            if key == "use_nesterov":
                w = QCheckBox()
            else:
                w = QDoubleSpinBox()
                w.setDecimals(6)
                w.setRange(0.0, 0.999999 if key in DECAY_RATES else MAX_SETTING)   # 6 decimals
                w.setSingleStep(0.001 if key in ("lr", "epsilon") else 0.01)
            self.setting_widgets[key] = w
            form.addRow(_SETTING_LABELS[key], w)
        self.steps = QSpinBox()
        self.steps.setRange(1, MAX_STEPS)
        self.steps.setValue(500)
        form.addRow("Steps", self.steps)
        self.batch = QSpinBox()
        self.batch.setRange(-1, MAX_BATCH_SIZE)
        self.batch.setSpecialValueText("the blocks'")
        self.batch.setToolTip("examples per step for the page's dataset blocks (0: all of the train part)")
        form.addRow("Batch size", self.batch)
        self.seed = QSpinBox()
        self.seed.setRange(0, MAX_SEED)
        form.addRow("Seed", self.seed)
        self.eval_every = QSpinBox()
        self.eval_every.setRange(0, 10_000_000)
        self.eval_every.setSpecialValueText("never")
        self.eval_every.setToolTip("evaluate the loss and metrics on the datasets' test part every K steps")
        form.addRow("Test every", self.eval_every)
        return form

    def _build_engine(self) -> QComboBox:
        """blockflow's numpy runtime, or the page exported to PyTorch (docs/export.md): offered
        disabled, saying how to install it, when torch is not installed."""
        self.engine = QComboBox()
        self.engine.addItem("blockflow (numpy)", "numpy")
        self.engine.addItem("PyTorch", "torch")
        self.engine.setToolTip("PyTorch: the same training through the exported module, on the GPU "
                               "when one is available; the trained values come back to the project")
        if importlib.util.find_spec("torch") is None:
            item = self.engine.model().item(1)
            item.setEnabled(False)
            item.setToolTip("PyTorch is not installed: pip install 'blockflow[torch]'")
            self.engine.setItemText(1, "PyTorch (not installed)")
        return self.engine

    def _build_controls(self, outer: QVBoxLayout) -> None:
        """Train / Stop / Reset, Keep, the progress bar and the line of news under it."""
        row = QHBoxLayout()
        self.train_button = QPushButton("Train")
        self.train_button.clicked.connect(self.start)
        self.stop_button = QPushButton("Stop")
        self.stop_button.setEnabled(False)
        self.stop_button.clicked.connect(self.stop)
        self.reset_button = QPushButton("Reset")
        self.reset_button.setToolTip("forget the trained values: every Variable starts again from its initializer")
        self.reset_button.clicked.connect(self.reset_variables)
        for b in (self.train_button, self.stop_button, self.reset_button):
            row.addWidget(b)
        outer.addLayout(row)
        self.keep_button = QPushButton("Keep the values trained so far")
        self.keep_button.setToolTip("training was stopped: store what it reached in the project (undoable)")
        self.keep_button.hide()
        self.keep_button.clicked.connect(self.keep_stopped)
        outer.addWidget(self.keep_button)
        self._kept: tuple | None = None     # (updates, steps, page) of a stopped training
        self.progress = QProgressBar()
        self.progress.setFormat("%v / %m steps")
        outer.addWidget(self.progress)
        self.info = plain_label("")      # may quote an error naming blocks of the file
        self.info.setWordWrap(True)
        outer.addWidget(self.info)

    def _on_optimizer(self, *_):
        """Show the chosen optimizer's settings, at its defaults."""
        name = self.optimizer.currentData() or "adam"
        defaults = optimizer_defaults(name)
        for key, w in self.setting_widgets.items():
            self.form.setRowVisible(w, key in defaults)
            if key in defaults:
                if isinstance(w, QCheckBox):
                    w.setChecked(bool(defaults[key]))
                else:
                    w.setValue(float(defaults[key]))

    # ------------------------------------------------------------------ page
    @property
    def host(self) -> str:
        """The page trained: the current page, or the page an opened instance is on."""
        return host_page(self.doc)

    def load_page(self):
        """A page was opened: its lists, and the settings the project recommends for it."""
        if self.training:
            return
        if self._kept is not None and self._kept[2] != self.host:
            self._drop_kept()
        doc = self.doc
        page = doc.page(self.host)
        problems = []
        rec = recommended_settings(doc.project, page.name, problems)
        self.settings_problems = [str(p) for p in problems]
        # what the panel said was about the page it had (a training, a failed start, errors)
        self.info.setText(self._settings_text() if problems else "")
        self.progress.reset()
        self._mode_pending = True        # the mode follows the page's program, once it is ready
        self.refresh_lists()
        self.optimizer.setCurrentIndex(self.optimizer.findData(rec.get("optimizer", "adam")))
        self._on_optimizer()
        for key, value in rec.get("hyper", {}).items():
            w = self.setting_widgets.get(key)
            if isinstance(w, QCheckBox):
                w.setChecked(bool(value))
            elif w is not None:
                w.setValue(float(value))
        self.steps.setValue(rec.get("steps", 500) or 500)
        bs = rec.get("batch_size")
        self.batch.setValue(-1 if bs is None else bs)
        self.seed.setValue(rec.get("seed", 0))

    def _settings_text(self) -> str:
        n = len(self.settings_problems)
        return (f"{n} of the project's training settings for this page {'is' if n == 1 else 'are'} left "
                f"out (see Problems); the panel's own values are used. {self.settings_problems[0]}"
                if n else "")

    def refresh_lists(self):
        """The page's scalar outputs (loss choices, metrics to plot), keeping the settings."""
        doc = self.doc
        page = doc.page(self.host)
        program = doc.ready_program(self.host)
        if program is None:              # compiling off the UI thread: program_ready calls again
            self.train_button.setEnabled(False)
            return
        trains_itself = any(var in program.trainable for st in program.steps for _, (_key, var) in st.refs)
        graph = self.mode.model().item(1)
        graph.setEnabled(trains_itself)     # graph mode runs the page's own updates: it needs some
        graph.setToolTip("" if trains_itself else "this page has no Apply* or Assign block updating a "
                                                  "trainable Variable: nothing would train")
        if self._mode_pending or (not trains_itself and self.mode.currentIndex() == 1):
            self._mode_pending = False
            self.mode.setCurrentIndex(1 if trains_itself else 0)
        keep_loss = self.loss.currentData()
        self.loss.blockSignals(True)
        self.loss.clear()
        scalars = []
        for st in program.steps:
            for o in st.outputs:
                slot = program.slot(o)
                if slot.type.size == 1:
                    scalars.append((port_text(slot.node, slot.port), slot.type.is_float))
        loss = program.loss
        default = port_text(*loss) if loss else None
        for key, is_float in scalars:
            if is_float:
                self.loss.addItem(key, key)
        if keep_loss is not None and self.loss.findData(keep_loss) >= 0:
            self.loss.setCurrentIndex(self.loss.findData(keep_loss))
        elif default is not None:
            i = next((k for k in range(self.loss.count()) if split_port_text(self.loss.itemData(k))[0] == split_port_text(default)[0]
                      and (":" not in default or self.loss.itemData(k) == default)), -1)
            if i >= 0:
                self.loss.setCurrentIndex(i)
        self.loss.blockSignals(False)
        self.metrics.blockSignals(True)
        self.metrics.clear()
        marked = set(page.metrics)
        for key, _ in scalars:
            item = QListWidgetItem(key)
            item.setFlags(item.flags() | Qt.ItemIsUserCheckable)
            on = key in marked or split_port_text(key)[0] in marked
            item.setCheckState(Qt.Checked if on else Qt.Unchecked)
            self.metrics.addItem(item)
        self.metrics.blockSignals(False)
        self.train_button.setEnabled(program.ok and bool(scalars))
        if not program.ok:
            self.info.setText(_PAGE_ERRORS)
        elif self.info.text() == _PAGE_ERRORS:    # fixed, or another page or project
            self.info.setText(self._settings_text())

    def _on_page_changed(self, *_signal_args) -> None:
        self.load_page()

    def _on_structure(self, page):
        if page == self.host and not self.training:
            self._refresh_lists.later()

    def _on_page_field(self, page: str, field: str) -> None:
        if field == "metrics":
            self._on_structure(page)

    def _on_metric_toggled(self, _item):
        keys = [self.metrics.item(i).text() for i in range(self.metrics.count())
                if self.metrics.item(i).checkState() == Qt.Checked]
        try:
            self.doc.set_metrics(keys)
        except BlockflowError as exc:
            self.status_message.emit(str(exc))

    def config(self) -> TrainConfig:
        name = self.optimizer.currentData()
        hyper = {}
        for key in optimizer_defaults(name):
            w = self.setting_widgets[key]
            hyper[key] = w.isChecked() if isinstance(w, QCheckBox) else float(w.value())
        metrics = tuple(self.metrics.item(i).text() for i in range(self.metrics.count())
                        if self.metrics.item(i).checkState() == Qt.Checked)
        return TrainConfig(steps=self.steps.value(), optimizer=name, hyper=hyper, seed=self.seed.value(),
                           target=self.loss.currentData(), metrics=metrics, eval_every=self.eval_every.value(),
                           mode="graph" if self.mode.currentIndex() == 1 else "optimizer")

    # ------------------------------------------------------------------ training
    @property
    def training(self) -> bool:
        return self._job is not None

    def start(self) -> bool:
        if self.training:
            return False
        self._drop_kept()
        doc = self.doc
        batch = self.batch.value()
        try:
            program = training_program(doc.project, self.host, doc.registry,
                                       batch_size=None if batch < 0 else batch)
            config = self.config()
            trainer = self._trainer(program, config)
        except (BlockflowError, ValueError, ImportError) as exc:   # ImportError: torch is missing
            self.progress.reset()       # no bar left from an earlier training beside the refusal
            self.info.setText(str(exc))
            self.status_message.emit(f"cannot train: {exc}")
            return False
        self.ensure_plot()
        self.losses, self.metric_values, self.test_points = [], {m: [] for m in trainer.metric_keys}, []
        self.training_page = self.host
        self._steps = config.steps
        self.progress.setRange(0, config.steps)
        self.progress.setValue(0)
        self._t0 = time.perf_counter()
        job = self._job = TrainJob(trainer, config.steps)
        job.progress, job.evaluated, job.snapshot = self._on_progress, self._on_evaluated, self.snapshot.emit
        job.finished, job.failed = self._on_finished, self._on_failed
        self.train_button.setEnabled(False)
        self.stop_button.setEnabled(True)
        self.reset_button.setEnabled(False)
        what = trainer.mode if trainer.mode == "graph" else OPTIMIZERS[config.optimizer][0]
        self._on_engine = f" on PyTorch ({trainer.device})" if getattr(trainer, "engine", "") == "torch" else ""
        self.info.setText(f"training with {what}{self._on_engine}…")
        for warning in trainer.warnings:
            self.status_message.emit(warning)
        self.training_started.emit()
        self._worker.submit(job.work, self._on_job_returned)
        return True

    def _trainer(self, program, config):
        """The chosen engine's trainer: both take the same settings and give the same history."""
        if self.engine.currentData() == "torch":
            from blockflow.export.torch_engine import TorchTrainer

            return TorchTrainer(program, config, self.doc.registry, project=self.doc.project)
        return Trainer(program, config, self.doc.registry)

    def stop(self):
        if self._job is not None:
            self._job.stop_event.set()
            self.info.setText("stopping…")

    def _on_progress(self, records):
        for r in records:
            self.losses.append(r.loss)
            for k, v in r.metrics.items():
                self.metric_values.setdefault(k, []).append(v)
        if not records:
            return
        last = records[-1]
        self.progress.setValue(last.step + 1)
        rate = (last.step + 1) / max(time.perf_counter() - self._t0, 1e-9)
        extra = "".join(f" · {k.split(':')[0]} {v:.4g}" for k, v in last.metrics.items())
        self.info.setText(f"step {last.step + 1}/{self._steps} · {rate:,.0f} steps/s · loss {last.loss:.5g}{extra}")
        self._redraw()

    def _on_evaluated(self, step, values):
        self.test_points.append((step, values))

    def _on_job_returned(self, outcome) -> None:
        """The training job returned (after telling its end) or raised: a job that died of an
        exception it does not catch (a BaseException) told nothing, so its end is told here."""
        if isinstance(outcome, BaseException) and self.training:
            self._on_failed(f"training failed: {type(outcome).__name__}: {outcome}", "", "")

    def _finish_thread(self):
        self._worker.wait()              # the training job returns right after telling its end
        self._job = None
        self.train_button.setEnabled(True)
        self.stop_button.setEnabled(False)
        self.reset_button.setEnabled(True)

    def _on_finished(self, history, updates, stopped):
        self._finish_thread()
        steps = len(history.steps)
        skipped = []
        if stopped and steps:      # the project stays as it was unless the user keeps them
            self._kept = (updates, steps, self.training_page)
            self.keep_button.setText(f"Keep the values trained so far ({steps} steps)")
            self.keep_button.show()
        elif steps:
            skipped = self.doc.apply_training(updates, steps, self.training_page)
        rate = steps / history.seconds if history.seconds > 0 else float("inf")
        text = (f"{'stopped after' if stopped else 'trained'} {steps} step{'s' if steps != 1 else ''}"
                f"{self._on_engine} ({rate:,.0f} steps/s); loss {history.losses[0]:.5g} → {history.losses[-1]:.5g}"
                if steps else "stopped before the first step")
        if history.evaluations:
            text += " · test: " + ", ".join(f"{k.split(':')[0]} {v:.4g}" for k, v in history.evaluations[-1][1].items())
        if skipped:
            text += f" · not stored (the page changed while training): {', '.join(skipped)}"
        self.info.setText(text)
        self.status_message.emit(text)
        self._redraw()
        self.training_finished.emit(stopped)

    def _on_failed(self, message, node, port):
        self._finish_thread()
        self.info.setText(f"training stopped: {message}")
        self.status_message.emit(f"training stopped: {message}")
        self.training_failed.emit(message, node, port)
        self.training_finished.emit(True)

    def keep_stopped(self) -> list[str]:
        """Store the values a stopped training reached (one undoable edit)."""
        if self._kept is None:
            return []
        updates, steps, page = self._kept
        self._drop_kept()
        skipped = self.doc.apply_training(updates, steps, page)
        self.status_message.emit(f"kept the values of {steps} training steps"
                                 + (f" (not stored: {', '.join(skipped)})" if skipped else ""))
        return skipped

    def _drop_kept(self):
        self._kept = None
        self.keep_button.hide()

    def reset_variables(self):
        ids = self.doc.reset_variables(self.host)
        self.status_message.emit(f"reset {len(ids)} Variable{'s' if len(ids) != 1 else ''}" if ids
                                 else "no trained values to reset")

    def shutdown(self):
        """Stop a running training and wait for its thread (closing the window)."""
        if self._job is not None:
            self._job.stop_event.set()
        self._worker.wait(5000)

    # ------------------------------------------------------------------ plot
    def showEvent(self, event):
        super().showEvent(event)
        self._plot_later.later()

    def plot_if_seen(self):
        """Create the curves once the panel is really on screen (a dock tabbed behind another is
        "visible" but shows nothing): pyqtgraph costs 0.3 s to import, not worth it at start-up."""
        if self.isVisible() and not self.visibleRegion().isEmpty():
            self.ensure_plot()

    def ensure_plot(self):
        """Create the curves (imports pyqtgraph on first use)."""
        self.curves.ensure_plot()

    def _redraw(self):
        self.curves.set_data(self.losses, self.metric_values)

    def curve_points(self) -> int:
        """How many points the loss curve shows (for tests)."""
        return self.curves.curve_points()
