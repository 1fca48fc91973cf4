"""The window's docks as a table: PANELS lists one small class per dock, saying its title, dock
area and object name (the key of its place in the saved window state), how its widget is made,
where it goes relative to the docks before it, and what it binds to (document, session and
selection signals). A new panel is one class and one entry here.

The window makes the docks in the table's order (which is also the order of View > Panels): first
``create`` and ``place`` for each, then, once the actions and the session exist, ``bind``.
"""
from __future__ import annotations

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QDockWidget, QFrame, QScrollArea, QUndoView, QWidget

from blockflow.gui.panels.blockref import BlockReferencePanel
from blockflow.gui.panels.explain import GradientPanel
from blockflow.gui.panels.inspector import InspectorPanel
from blockflow.gui.panels.palette import PalettePanel
from blockflow.gui.panels.problems import ProblemsPanel
from blockflow.gui.panels.stepper import BackwardStepper
from blockflow.gui.panels.trainpanel import TrainPanel
from blockflow.gui.panels.valueviewer import ValueViewerPanel
from blockflow.gui.session.session import page_fingerprint

__all__ = ["DockPanel", "PANELS", "build_docks", "bind_docks"]


class DockPanel:
    """One dock. ``attribute``: the window attribute the panel widget is kept as ("": none);
    ``scrolled``: the panel sits in a scroll area, so the dock can be made small (a column of
    docks cannot be shorter than the sum of their minimum heights, which would limit the window);
    ``follows_selection``: its ``set_nodes(ids)`` is called with the session's selection;
    ``hidden_at_start``: the default layout (and View > Reset Layout) keeps it closed."""

    key = title = object_name = attribute = ""
    area = Qt.RightDockWidgetArea
    scrolled = False
    follows_selection = False
    hidden_at_start = False

    def create(self, window) -> QWidget:
        raise NotImplementedError

    def place(self, window, dock: QDockWidget) -> None:
        """Arrange the dock relative to those made before it (it is in its area already)."""

    def bind(self, window, panel, dock: QDockWidget) -> None:
        """Connect the panel to the window, the document and the session."""


class PaletteDock(DockPanel):
    key, title, object_name, attribute = "palette", "Blocks", "paletteDock", "palette_panel"
    area = Qt.LeftDockWidgetArea

    def create(self, window):
        return PalettePanel(window.document.registry, window)

    def bind(self, window, panel, dock):
        panel.block_activated.connect(window.add_block_at_centre)


class InspectorDock(DockPanel):
    key, title, object_name, attribute = "inspector", "Inspector", "inspectorDock", "inspector"
    follows_selection = True

    def create(self, window):
        return InspectorPanel(window.document, window)


class ProblemsDock(DockPanel):
    """Problems: the diagram's, and a failed run's at the top until the next run, Clear or an edit."""

    key, title, object_name, attribute = "problems", "Problems", "problemsDock", "problems"
    area = Qt.BottomDockWidgetArea

    def create(self, window):
        return ProblemsPanel(window.document, window)

    def bind(self, window, panel, dock):
        session = window.session
        panel.problem_activated.connect(window.reveal_node)
        panel.count_changed.connect(lambda errors, warnings: self._count(dock, errors, warnings))
        self._count(dock, panel.errors, panel.warnings)
        session.run_failed.connect(lambda msg, node, _port: panel.set_run_problem(
            session.host, node, msg))
        session.run_started.connect(lambda _kind: panel.clear_run_problem())
        session.results_cleared.connect(panel.clear_run_problem)

    @staticmethod
    def _count(dock: QDockWidget, errors: int, warnings: int) -> None:
        parts = []
        if errors:
            parts.append(f"{errors} error{'s' if errors != 1 else ''}")
        if warnings:
            parts.append(f"{warnings} warning{'s' if warnings != 1 else ''}")
        dock.setWindowTitle("Problems" + (f" ({', '.join(parts)})" if parts else ""))


class HistoryDock(DockPanel):
    key, title, object_name, attribute = "history", "History", "historyDock", "history"
    area = Qt.BottomDockWidgetArea

    def create(self, window):
        history = QUndoView(window.document.undo_stack, window)
        history.setEmptyLabel("(start)")
        return history

    def place(self, window, dock):
        window.tabifyDockWidget(window.docks["problems"], dock)
        window.docks["problems"].raise_()


class OverviewDock(DockPanel):
    key, title, object_name = "minimap", "Overview", "minimapDock"
    area = Qt.LeftDockWidgetArea

    def create(self, window):
        return window.view.minimap()


class ValuesDock(DockPanel):
    """The selected block's value and gradient from the last run."""

    key, title, object_name, attribute = "values", "Values", "valuesDock", "value_viewer"
    area = Qt.BottomDockWidgetArea
    follows_selection = True

    def create(self, window):
        return ValueViewerPanel(window.document, window.session, window)

    def place(self, window, dock):
        # Beside the Problems/History tabs, not one more tab: splitting a tabbed dock adds a tab.
        window.addDockWidget(Qt.BottomDockWidgetArea, dock, Qt.Horizontal)


class StepperDock(DockPanel):
    """Backward steps: walk the backward pass block by block."""

    key, title, object_name, attribute = "stepper", "Backward steps", "stepperDock", "stepper"
    scrolled = True

    def create(self, window):
        return BackwardStepper(window.document, window.session, window)

    def place(self, window, dock):
        window.splitDockWidget(window.docks["inspector"], dock, Qt.Vertical)

    def bind(self, window, panel, dock):
        panel.focus_requested.connect(window.gradients_on_canvas.focus)


class GradientDock(DockPanel):
    """Gradient: the selected block's gradient explained, and Run > Check Gradients' report."""

    key, title, object_name, attribute = "gradient", "Gradient", "gradientDock", "gradient_panel"
    scrolled = True

    def create(self, window):
        return GradientPanel(window.document, window.session, window)

    def place(self, window, dock):
        steps = window.docks["stepper"]
        window.tabifyDockWidget(steps, dock)
        steps.raise_()
        window.resizeDocks([window.docks["inspector"], steps], [330, 520], Qt.Vertical)

    def bind(self, window, panel, dock):
        panel.check_requested.connect(window.actions["check_gradients"].trigger)


class TrainDock(DockPanel):
    """Train: training off the UI thread with live curves; its recorded runs show on the canvas
    through the session like a run's."""

    key, title, object_name, attribute = "train", "Train", "trainDock", "train_panel"
    scrolled = True

    def create(self, window):
        return TrainPanel(window.document, window, settings=window.settings)

    def place(self, window, dock):
        window.tabifyDockWidget(window.docks["inspector"], dock)
        window.docks["inspector"].raise_()

    def bind(self, window, panel, dock):
        fingerprint = [None]      # the page as training started: its snapshots are of that page

        def started():
            fingerprint[0] = page_fingerprint(window.document.page(panel.training_page),
                                              window.document.project.composites)
            window.autosaver.autosave_now()            # training is crash-prone: keep the work first

        def finished(stopped):
            # the trained values are stored now (an edit: the snapshots went stale): show them afresh
            if not stopped and window.session.host == panel.training_page:
                window.session.backward(panel.loss.currentData())

        def failed(msg, *_):
            window.statusBar().showMessage(f"training stopped: {msg}", 30000)
            window.problems.set_run_problem(panel.training_page, "", f"training stopped: {msg}")

        dock.visibilityChanged.connect(lambda shown: shown and QTimer.singleShot(0, panel.plot_if_seen))
        panel.training_started.connect(started)
        panel.snapshot.connect(lambda result, summaries: window.session.present(
            result, panel.training_page, summaries, fingerprint[0]))
        panel.training_finished.connect(finished)
        panel.status_message.connect(lambda msg: window.statusBar().showMessage(msg, 15000))
        panel.training_failed.connect(failed)


class ReferenceDock(DockPanel):
    """Block Reference: docs/blocks.md inside the editor (Help > Block Reference, F1); hidden
    until asked for."""

    key, title, object_name, attribute = "reference", "Block Reference", "referenceDock", "block_reference"
    hidden_at_start = True

    def create(self, window):
        return BlockReferencePanel(window.document, window)

    def place(self, window, dock):
        # Hidden until asked for; tabified with the Inspector only then (helpmenu.py): a hidden
        # tab there would make the Train tab's visibility flicker at every close.
        dock.hide()

    def bind(self, window, panel, dock):
        window.inspector.help_requested.connect(window.open_block_reference)
        window.view.help_requested.connect(window.open_block_reference)   # F1 where the menu's key is not F1


#: the docks, in the order they are made and listed in View > Panels
PANELS: tuple[DockPanel, ...] = (PaletteDock(), InspectorDock(), ProblemsDock(), HistoryDock(), OverviewDock(),
                                 ValuesDock(), StepperDock(), GradientDock(), TrainDock(), ReferenceDock())


def _scrolled(window, panel: QWidget) -> QScrollArea:
    area = QScrollArea(window)
    area.setWidget(panel)
    area.setWidgetResizable(True)
    area.setFrameShape(QFrame.NoFrame)
    return area


def build_docks(window) -> None:
    """Make every dock of PANELS (``window.docks[key]``; the panel as ``window.<attribute>``)."""
    # the right-hand column runs down to the status bar: the inspector's form, the stepper and the
    # Train panel's curves need the height more than the bottom row needs the width
    window.setCorner(Qt.BottomRightCorner, Qt.RightDockWidgetArea)
    for entry in PANELS:
        panel = entry.create(window)
        if entry.attribute:
            setattr(window, entry.attribute, panel)
        dock = QDockWidget(entry.title, window)
        dock.setObjectName(entry.object_name)
        dock.setWidget(_scrolled(window, panel) if entry.scrolled else panel)
        window.addDockWidget(entry.area, dock)
        window.docks[entry.key] = dock
        entry.place(window, dock)


def bind_docks(window) -> None:
    """Connect every dock's panel (after the actions, menus and session are made)."""
    for entry in PANELS:
        dock = window.docks[entry.key]
        panel = getattr(window, entry.attribute) if entry.attribute else dock.widget()
        if entry.follows_selection:
            window.session.selection_changed.connect(panel.set_nodes)
        entry.bind(window, panel, dock)
