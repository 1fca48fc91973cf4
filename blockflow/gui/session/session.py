"""The editor's session: what the runs of the open project produced, and what the user is looking
at, held in one place that tells the panels when it changes.

Session keeps each page's last run (PageResults), the Backward target picked per page, the
selection of the current page, and the gradient view shown (a backward run's gradients, or the
static gradient paths); it follows renames of pages and nodes and staleness after edits here, once,
so no panel keeps or patches a copy of its own. Runs are requested from it
(``forward``/``backward``); runner.py does the work off the UI thread. Display runs never commit
state: running never changes the project. It must not import the main window, the canvas or a
panel (the shell puts the results and the gradients on the canvas: main_window/canvas_results.py).
"""
from __future__ import annotations

from PySide6.QtCore import QObject, QTimer, Signal

from blockflow.composite import composite_name
from blockflow.project import port_text, split_port_text
from blockflow.errors import BlockflowError
from blockflow.run.runtime import RunResult
from blockflow.present.gradview import GradientView
from blockflow.present.values import summarize
from blockflow.gui.common.worker import Worker
from blockflow.gui.session import runner
from blockflow.gui.session.pageresults import PageResults, composites_used, host_page, page_fingerprint

__all__ = ["Session", "PageResults", "page_fingerprint", "host_page", "composites_used"]


class _Running:
    __slots__ = ("page", "kind", "target", "fingerprint", "program")

    def __init__(self, page, kind, target, fingerprint, program):
        self.page, self.kind, self.target = page, kind, target
        self.fingerprint, self.program = fingerprint, program


class Session(QObject):
    """The open project's run results and selection; runs the current page forward or backward.

    Runs happen on a worker thread; while one runs, the UI stays live. A request made while a run
    is going is queued: it starts (compiling the page as it is then) when the run ends; a later
    request replaces a queued one. A run whose page was edited while it ran delivers its results
    marked stale. ``last_result``, ``last_error`` and ``results_stale`` describe the current
    page's last run; ``selection`` the blocks selected on the current page.

    Signals: ``run_started(kind)`` ("forward"/"backward"); ``run_finished(result)`` with the
    RunResult (a backward run's has ``.target`` and ``.paths``, for gradient highlighting);
    ``run_failed(message, node, port)`` (node/port "" when the error names none);
    ``results_cleared()``; ``results_changed()`` whenever what the current page shows changed
    (new results, cleared, stale or fresh again, another page, a block renamed);
    ``stale_changed()`` when only the current page's results turned stale or fresh again (then
    ``results_changed`` follows); ``busy_changed(bool)``, ``targets_changed()``,
    ``status_message(text)``, ``selection_changed(ids)`` (also after a block of the selection was
    renamed: the canvas rebuilt its items and selects them again from here);
    ``gradients_changed()`` when ``gradients`` is another GradientView or None.
    """

    run_started = Signal(str)
    run_finished = Signal(object)
    run_failed = Signal(str, str, str)
    results_cleared = Signal()
    results_changed = Signal()
    stale_changed = Signal()
    busy_changed = Signal(bool)
    targets_changed = Signal()
    status_message = Signal(str)
    selection_changed = Signal(list)
    gradients_changed = Signal()

    def __init__(self, document, parent=None):
        super().__init__(parent)
        self.doc = document
        self._worker = Worker(self)
        self._pages: dict[str, PageResults] = {}
        self._running: _Running | None = None
        self._queued: tuple[str, str | None] | None = None
        self._waiting: tuple[str, str, str | None] | None = None   # (page, kind, target) until compiled
        self._token = 0
        self._picked: dict[str, str] = {}    # page -> target the user chose in the combo
        self._targets: list[tuple[str, str]] = []
        self._target_page: str | None = None
        self._selection: list[str] = []
        self._shown_host = host_page(document)
        self._gradients: GradientView | None = None
        #: called on the worker thread before each run (tests hold a run back with it)
        self.job_hook = None
        #: threading.get_ident() of the thread the last delivered run ran on
        self.last_thread_id: int | None = None
        self._recheck = QTimer(self)
        self._recheck.setSingleShot(True)
        self._recheck.timeout.connect(self._after_edits)
        self._paths_timer = QTimer(self)       # static paths recomputed once a burst of edits is over
        self._paths_timer.setSingleShot(True)
        self._paths_timer.timeout.connect(self._recompute_paths)
        self._bind(document)
        self._refresh_targets()

    def _bind(self, d) -> None:
        d.structure_changed.connect(self._on_structure)
        d.program_ready.connect(self._on_program_ready)
        d.page_field_changed.connect(self._on_page_field)
        d.current_page_changed.connect(self._on_page_switched)
        d.location_changed.connect(self._on_location_changed)
        d.project_replaced.connect(self._on_project_replaced)
        d.page_renamed.connect(self._on_page_renamed)
        d.node_renamed.connect(self._on_node_renamed)
        d.node_removed.connect(self._on_node_removed)

    # ---------------------------------------------------------------- where
    @property
    def host(self) -> str:
        """The page whose results are shown: the current page, or the page an opened instance is
        on (an instance shows its level of the page's run); a definition opened alone (``@Name``)
        is compiled but never run."""
        return host_page(self.doc)

    @property
    def level(self) -> str:
        """The flat id of the instance opened on the host page ("" for the page itself)."""
        return self.doc.location.level if self.doc.location.diagram == self.doc.current_page else ""

    def flat_id(self, node: str) -> str:
        """A block drawn on the canvas, as the host page's program and run name it."""
        level = self.level
        return f"{level}/{node}" if level else node

    def _fingerprint(self, page: str) -> bytes:
        return page_fingerprint(self.doc.page(page), self.doc.project.composites)

    def _hosts_of(self, diagram: str) -> list[str]:
        """The pages whose runs an edit of ``diagram`` changes: itself for a page; for a
        definition (``@Name``), every page that uses it, directly or not."""
        name = composite_name(diagram)
        if name is None:
            return [diagram]
        composites = self.doc.project.composites
        return [p.name for p in self.doc.project.pages if name in composites_used(p, composites)]

    # ---------------------------------------------------------------- state
    @property
    def busy(self) -> bool:
        return self._running is not None

    def results(self, page: str | None = None) -> PageResults | None:
        """The last run of ``page`` (the current page when None), or None."""
        return self._pages.get(page or self.host)

    @property
    def last_result(self) -> RunResult | None:
        pr = self.results()
        return pr.result if pr is not None else None

    @property
    def last_error(self) -> BaseException | None:
        pr = self.results()
        return pr.error if pr is not None else None

    @property
    def results_stale(self) -> bool:
        pr = self.results()
        return pr is not None and pr.stale

    # ---------------------------------------------------------------- selection
    @property
    def selection(self) -> list[str]:
        """The ids of the blocks selected on the current page."""
        return list(self._selection)

    def set_selection(self, ids) -> None:
        ids = list(ids)
        if ids != self._selection:
            self._selection = ids
            self.selection_changed.emit(list(ids))

    # ---------------------------------------------------------------- gradients
    @property
    def gradients(self) -> GradientView | None:
        """The current page's gradient view, which the canvas colours its wires by and the stepper
        and the Gradient panel explain: the last backward run's while its results are current
        (``ran``), or static gradient paths (made without a run); None when there is neither."""
        return self._gradients

    def show_gradients(self, gview: GradientView | None) -> None:
        """Show ``gview``: a recorded backward run's GradientView, or the static paths to a target
        (one made without a run); None takes the gradients away. An edit of the page takes a run's
        gradients away and has static paths recomputed."""
        if gview is self._gradients:
            return
        if gview is None:
            self._paths_timer.stop()
        self._gradients = gview
        self.gradients_changed.emit()

    def clear_gradients(self) -> None:
        self.show_gradients(None)

    def _results_changed(self) -> None:
        """Tell the panels the current page's results changed, then let the gradients follow: its
        last backward run's are shown while its results are current; a forward run, a failed one or
        none takes a run's gradients away. Stale results keep what is shown (an edit of what the page
        computes took a run's gradients away already; undoing it makes the results current again)."""
        self.results_changed.emit()
        result, shown = self.last_result, self._gradients
        if result is None or result.target is None or self.last_error is not None:
            if shown is not None and shown.ran:
                self.show_gradients(None)
            return
        if (not self.results_stale and result.program.page_name == self.host
                and (shown is None or shown.result is not result)):
            self.show_gradients(GradientView(result.program, result=result))

    def _gradients_edited(self, page: str) -> None:
        """What ``page`` computes changed: a run's gradients no longer describe it, so they go;
        static paths are recomputed, they need no run."""
        shown = self._gradients
        if shown is None or page != self.host:
            return
        if not shown.ran:
            self._paths_timer.start(0)
            return
        self.show_gradients(None)
        self.status_message.emit("Gradient highlighting cleared: the diagram changed since the "
                                 "backward run (run it again to see the new gradients)")

    def _recompute_paths(self) -> None:
        shown = self._gradients
        if shown is None or shown.ran:
            return
        program = self.doc.ready_program(self.host)
        if program is None:
            return          # compiling off the UI thread: _on_program_ready calls again
        if program is shown.program:
            return          # the paths shown are this program's already
        node, port = shown.target
        try:
            if not program.ok or program.step(node) is None:
                raise ValueError
            gview = GradientView(program, port_text(node, port))
        except Exception:   # the target went away, or the page no longer compiles
            self.show_gradients(None)
            self.status_message.emit(f"Gradient paths hidden: {node} is no longer a gradient "
                                     f"target on a page that compiles")
            return
        self.show_gradients(gview)

    # ---------------------------------------------------------------- targets
    def targets(self) -> list[tuple[str, str]]:
        """The current page's scalar float outputs as ``(key "node:port", label)``; the page's
        loss is labelled as such."""
        if self._target_page != self.host:
            self._refresh_targets()
        return list(self._targets)

    @property
    def target(self) -> str | None:
        """What Backward differentiates: the target picked in the combo while it is still on the
        page, else the page's loss, else the first scalar float output; None when there is none."""
        targets = self.targets()
        keys = [k for k, _ in targets]
        if not keys:
            return None
        page = self.host
        picked = self._picked.get(page)
        if picked in keys:
            return picked
        program = self.doc.ready_program(page)
        loss = _loss_key(program) if program is not None else None
        if loss not in keys:     # a page with errors names no loss: the one the kept list marked
            loss = next((k for k, label in targets if label.endswith("(loss)")), keys[0])
        return loss

    def set_target(self, key: str) -> None:
        self._picked[self.host] = key

    def _refresh_targets(self) -> None:
        """The targets from the page's program; kept as they are while it compiles, and while it
        has errors (an error hides the types of what follows it: the box would lose targets that
        come back once it is fixed)."""
        page = self.host
        program = self.doc.ready_program(page)
        if program is None:
            return                        # program_ready calls again
        if not program.ok and page == self._target_page and self._targets:
            nodes = self.doc.page(page).nodes
            kept = [t for t in self._targets if t[0].split(":")[0].split("/")[0] in nodes]
            if kept != self._targets:
                self._targets = kept
                self.targets_changed.emit()
            return
        out = runner.scalar_targets(program, _loss_key(program))
        changed = out != self._targets or page != self._target_page
        self._targets, self._target_page = out, page
        if changed:
            self.targets_changed.emit()

    # ---------------------------------------------------------------- actions
    def forward(self) -> None:
        """Run the current page forward (F5)."""
        self._request("forward", None)

    def backward(self, target: str | None = None) -> None:
        """Run forward, then backward from ``target`` (``"node:port"``; default: the combo's)."""
        self._request("backward", target)

    def clear(self) -> None:
        """Remove the current page's results and error marks. A run still going is let finish
        but not shown; a queued request is dropped."""
        page = self.host
        self._queued = None
        self._waiting = None
        dropping = self._running is not None and self._running.page == page
        if dropping:
            self._token += 1          # its outcome no longer matches: dropped when it arrives
            self.status_message.emit("Results cleared; the run going on will not be shown")
        had = self._pages.pop(page, None) is not None
        self._results_changed()
        self.results_cleared.emit()
        if not dropping:
            self.status_message.emit("Results cleared" if had else "No results to clear")

    def wait(self, msecs: int = -1) -> bool:
        """Block until a run under way returned (its results are delivered by the event loop)."""
        return self._worker.wait(msecs)

    def _request(self, kind: str, target: str | None) -> None:
        if self._running is not None:
            replaced = self._queued is not None
            self._queued = (kind, target)
            self.status_message.emit(f"A run is going: the {kind} run starts when it ends"
                                     + (" (replacing the one queued)" if replaced else ""))
            return
        self._start(kind, target)

    def _start(self, kind: str, target: str | None) -> None:
        page = self.host
        program = self.doc.ready_program(page)
        if program is None:               # compiling off the UI thread: the run follows it
            self._waiting = (page, kind, target)
            self.status_message.emit(f"Checking page '{page}': the {kind} run starts when it is checked")
            return
        self._waiting = None
        if composite_name(page) is not None:
            self._refuse(f"'{page[1:]}' is a composite's definition opened on its own: it is checked, "
                         f"not run. Open one of its instances on a page to see its values and "
                         f"gradients.", "", "")
            return
        target = (target or self.target) if kind == "backward" else None
        refusal = runner.refusal(program, page, kind, target, [k for k, _ in self.targets()])
        if refusal is not None:
            self._refuse(*refusal)
            return
        self._token += 1
        self._running = _Running(page, kind, target, self._fingerprint(page), program)
        token, hook = self._token, self.job_hook
        self.busy_changed.emit(True)
        self.run_started.emit(kind)
        self.status_message.emit(f"Running page '{page}' {kind}" + (f" to {target}" if target else "") + "…")
        self._worker.submit(lambda _post: runner.run_job(token, program, target, hook), self._on_done)

    def present(self, result: RunResult, page: str, summaries: dict | None = None, fingerprint: bytes | None = None,
                kind: str = "training") -> None:
        """Show a run made elsewhere (the Train panel's recorded runs of the values being
        trained) as this page's results, and announce it like a finished run (gradient highlighting
        follows). ``fingerprint``: the page as it was when that run's program was compiled."""
        if self._running is not None or page not in {p.name for p in self.doc.project.pages}:
            return
        if summaries is None:
            summaries = {key: summarize(v) for key, v in result.values.items()}
        target = None if result.target is None else port_text(*result.target)
        pr = PageResults(page, kind, target, result, summaries, None, "", "",
                         fingerprint or self._fingerprint(page), 0.0)
        pr.stale = self._fingerprint(page) != pr.fingerprint
        self._pages[page] = pr
        if page == self.host:
            self._results_changed()
            self.run_finished.emit(result)

    def _refuse(self, message: str, node: str, port: str) -> None:
        self.status_message.emit(message)
        self.run_failed.emit(message, node, port)

    # ---------------------------------------------------------------- outcome (UI thread)
    def _on_done(self, out) -> None:
        if isinstance(out, BaseException):    # the job died of what run_job does not catch
            died, out = out, runner.Outcome(self._token)
            out.error = died
        running, self._running = self._running, None
        queued, self._queued = self._queued, None
        self.busy_changed.emit(False)
        if running is None or out.token != self._token:
            self._start_queued(queued)
            return                 # cleared, or another project opened, while it ran
        self.last_thread_id = out.thread_id
        page = running.page
        if page not in {p.name for p in self.doc.project.pages}:
            self.status_message.emit(f"Page '{page}' was deleted while it ran: its results are dropped")
            self._start_queued(queued)
            return
        node, port = runner.error_location(running.program, out.error) if out.error is not None else ("", "")
        pr = PageResults(page, running.kind, running.target, out.result, out.summaries, out.error,
                         node, port, running.fingerprint, out.seconds)
        pr.stale = self._fingerprint(page) != running.fingerprint
        self._pages[page] = pr
        if page == self.host:
            self._results_changed()
        self._announce(running, out, pr, node, port)
        self._start_queued(queued)

    def _announce(self, running: _Running, out: runner.Outcome, pr: PageResults, node: str, port: str) -> None:
        what = f"{running.kind.capitalize()} run of '{running.page}'"
        if out.error is not None:
            message = (f"{what} failed: {out.error}" if isinstance(out.error, BlockflowError)
                       else f"{what} failed with an internal error: {type(out.error).__name__}: {out.error}")
            self.status_message.emit(message)
            self.run_failed.emit(message, node, port)
        else:
            took = f"{out.seconds * 1000:.0f} ms" if out.seconds < 10 else f"{out.seconds:.1f} s"
            self.status_message.emit(f"{what} done in {took}"
                                     + (" — stale: the page was edited while it ran" if pr.stale else ""))
            self.run_finished.emit(out.result)

    def _start_queued(self, queued) -> None:
        if queued is not None and self._running is None:
            self._start(*queued)

    def _set_stale(self, page: str, stale: bool) -> None:
        pr = self._pages.get(page)
        if pr is None or pr.stale == stale:
            return
        pr.stale = stale
        if page == self.host:
            self.stale_changed.emit()
            self._results_changed()

    # ---------------------------------------------------------------- document changes
    def _on_program_ready(self, page: str) -> None:
        if page == self.host:
            self._refresh_targets()
            if self._gradients is not None and not self._gradients.ran:
                self._paths_timer.start(0)
        waiting = self._waiting
        if waiting is not None and waiting[0] == page:    # another page's program: still waiting
            self._waiting = None
            if page == self.host and self._running is None:
                self._start(waiting[1], waiting[2])

    def _on_structure(self, page: str) -> None:
        # Marked stale at once; whether the edits since the run cancel out (an undo) is checked
        # once the burst of edits is over. An edit of a definition changes every page using it.
        for host in self._hosts_of(page):
            self._gradients_edited(host)
            self._set_stale(host, True)
        self._recheck.start(0)

    def _after_edits(self) -> None:
        for name, pr in self._pages.items():
            if pr.stale:
                try:
                    page = self.doc.page(name)
                except BlockflowError:
                    continue
                if self._fingerprint(name) == pr.fingerprint:
                    self._set_stale(name, False)
        self._refresh_targets()

    def _on_page_field(self, page: str, field: str) -> None:
        if field == "loss":
            self._picked.pop(page, None)      # the combo follows the new loss mark

    def _on_page_switched(self, _page: str) -> None:
        self.set_selection([])
        if self.host == self._shown_host:
            # an instance opened or closed on the same page: the same run, seen at another level
            self.results_changed.emit()
            return
        self._shown_host = self.host
        self.clear_gradients()                # the new page's last run's come back just below
        self._refresh_targets()
        self._results_changed()

    def _on_location_changed(self) -> None:
        """Another instance of the same composite opened (the diagram drawn is the same, so no
        page switch was announced) or another page's: the results shown follow."""
        if self.host != self._shown_host:
            self._on_page_switched(self.doc.current_page)
        else:
            self.set_selection([])
            self.results_changed.emit()

    def _on_project_replaced(self) -> None:
        self._pages.clear()
        self._picked.clear()
        self._queued = None
        self._waiting = None
        self._token += 1                      # a run of the old project is not shown
        self._shown_host = self.host
        self.set_selection([])
        self.clear_gradients()
        self._refresh_targets()
        self._results_changed()
        self.results_cleared.emit()

    # ---------------------------------------------------------------- renames: followed here only
    def _on_page_renamed(self, old: str, new: str) -> None:
        if self._shown_host == old:
            self._shown_host = new
        if old in self._pages:
            self._pages[new] = self._pages.pop(old)
            self._pages[new].page = new
        if old in self._picked:
            self._picked[new] = self._picked.pop(old)
        if self._running is not None and self._running.page == old:
            self._running.page = new

    def _on_node_renamed(self, page: str, old: str, new: str) -> None:
        pr = self._pages.get(page)
        if pr is not None:
            pr.node_renamed(old, new)
        picked = self._picked.get(page)
        if picked is not None and split_port_text(picked)[0] == old:
            self._picked[page] = port_text(new, split_port_text(picked)[1])
        for host in self._hosts_of(page):
            self._gradients_edited(host)
        if page == self.doc.current_page:
            # The canvas rebuilt its items and selects them again from here: said even unchanged.
            self._selection = [new if n == old else n for n in self._selection]
            if self._selection:
                self.selection_changed.emit(list(self._selection))
            self._results_changed()           # and puts the results on them again

    def _on_node_removed(self, page: str, node: str) -> None:
        if page == self.doc.current_page and node in self._selection:
            self.set_selection([n for n in self._selection if n != node])


def _loss_key(program) -> str | None:
    if program.loss is None:
        return None
    try:
        return program.target_text()
    except BlockflowError:
        return None
