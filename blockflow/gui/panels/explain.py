"""The "Gradient" dock: how the selected block's gradient is computed, and gradient checks.

The explanation is GradientView.explain(node) (blockflow.present.gradview) as rich text: per input, its
value, the upstream gradient g, the block's local rule and what it sends back, or why it sends
nothing. "Check Gradients" compares the runtime's gradients with central differences
(blockflow.run.gradcheck): the whole page's, and the selected block's rule at its last inputs.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QSplitter, QTextBrowser, QVBoxLayout, QWidget

from blockflow.project import port_text
from blockflow.errors import BlockflowError
from blockflow.run.gradcheck import GradCheckResult, check_block, check_page
from blockflow.compile.compiler import project_files
from blockflow.present.levels import instance_badge
from blockflow.present.gradview import CUT, FLOWS, GradientView
from blockflow.gui.session.session import host_page
from blockflow.gui.panels.gradtext import MONO, Colors, array_html, esc, rule_for_input, rule_html

__all__ = ["GradientPanel", "CheckReport", "run_checks", "block_inputs"]

HINT = "Run Backward (Shift+F5)"


# ------------------------------------------------------------------------------ checks (no widgets)
@dataclass
class CheckReport:
    """What "Check Gradients" found: the page's check and the selected block's, or why each was
    not made (``*_message``)."""

    page: str
    target: str = ""
    page_result: GradCheckResult | None = None
    page_message: str = ""
    block_node: str | None = None
    block_result: GradCheckResult | None = None
    block_message: str = ""
    seconds: float = 0.0
    rows: list = field(default_factory=list)   # [(check label, GradCheckEntry, rtol)]
    #: checked page inputs whose paths to the target cross a wire some block cuts (StopGradient,
    #: a non-differentiable block): input -> the cutting blocks. There the runtime's gradient
    #: leaves a path out on purpose that central differences still see.
    cut_paths: dict = field(default_factory=dict)
    blocks: dict = field(default_factory=dict)   # node id -> block (op) name, for messages

    @property
    def results(self) -> list[GradCheckResult]:
        return [r for r in (self.page_result, self.block_result) if r is not None]

    @property
    def passed(self) -> bool:
        """Something was checked and every check passed."""
        return bool(self.results) and all(r.passed for r in self.results)

    @property
    def only_cuts_differ(self) -> bool:
        """Every failing entry is a page input with a cut path to the target (and the selected
        block's rule, if checked, passed): the differences are the cuts', as intended."""
        failing = [e for r in self.results for e in r.entries if not e.passed]
        return bool(failing) and (self.block_result is None or self.block_result.passed) and \
            all(e in self.page_result.entries and e.name in self.cut_paths for e in failing)


def cut_paths(program, target: str, inputs) -> dict:
    """For each of ``inputs`` (node ids), the blocks that cut a wire on one of its paths to
    ``target`` (a node id), sorted; inputs with no such path are left out."""
    import networkx as nx

    graph = program.graph
    toward = nx.ancestors(graph, target) | {target}
    cut = [(e, w.cutters) for e, w in GradientView(program, target).wires.items() if w.state == CUT]
    out = {}
    for name in inputs:
        if name not in graph:
            continue
        down = nx.descendants(graph, name) | {name}
        cutters = sorted({c for e, by in cut if e.src in down and e.dst in toward for c in by})
        if cutters:
            out[name] = tuple(cutters)
    return out


def block_inputs(program, result, node: str) -> dict | None:
    """``node``'s input values in ``result`` (a recorded run of ``program``), by port name, as
    the runtime passed them: wired inputs from the run's values, inline constants and static
    inputs as compiled. None when the run did not keep a value the block read."""
    st = program.step(node)

    def value(s):
        slot = program.slot(s)
        return slot.type.value if slot.const else result.values.get((slot.node, slot.port))

    inputs = {}
    for pos, decl in enumerate(st.spec.inputs):
        if st.static[pos] is not None:
            inputs[decl.name] = st.static[pos]
            continue
        src = st.inputs[pos]
        if src is None:
            continue                      # an unwired optional input: the block's default
        v = [value(s) for s in src] if isinstance(src, tuple) else value(src)
        if v is None or isinstance(v, list) and any(x is None for x in v):
            return None
        inputs[decl.name] = v
    return inputs


def run_checks(document, node: str | None = None, result=None, target=None,
               stale: bool | None = None) -> CheckReport:
    """Check the current page's gradients (``target``, default its loss) and, with ``node`` and a
    recorded run ``result`` of the current page, ``node``'s rule at that run's input values.
    ``stale``: the page was edited since that run (default: its program is not the current one)."""
    start = time.perf_counter()
    host = host_page(document)      # inside an opened instance: its page's program
    page = document.page(host)
    program = document.program(host)
    report = CheckReport(page=page.name)
    if not program.ok:
        errors = program.errors
        report.page_message = (f"The page '{page.name}' does not compile ({len(errors)} error"
                               f"{'s' if len(errors) != 1 else ''}; see the Problems panel): {errors[0]}")
    else:
        if target is not None:
            try:
                program.resolve_target(target)
            except BlockflowError:      # a target chosen before the last edit, gone since
                target = None
        if target is None and program.loss is None:
            report.page_message = (f"The page '{page.name}' marks no loss: tick \"Gradient target\" in the "
                                   f"inspector of the block to differentiate (or choose a Backward target), "
                                   f"then check again.")
        else:
            try:
                tslot = program.target_slot(target)
                report.target = port_text(tslot.node, tslot.port)
                if program.loss is None:
                    report.page_message = (f"the page marks no loss; checked the gradient of the Backward "
                                           f"target {report.target}.")
                report.page_result = check_page(page, document.registry, None, report.target,
                                                composites=document.project.composites,
                                                files=project_files(document.project))
                report.cut_paths = cut_paths(program, tslot.node, [e.name for e in report.page_result.entries])
                report.blocks = {st.node: st.spec.name for st in program.steps}
            except (BlockflowError, ValueError) as exc:
                report.page_message = f"The page's gradients could not be checked: {exc}"
    if node is not None:
        report.block_node = node
        if stale is None:
            stale = result is not None and result.program is not program
        _check_block(report, program, node, result, stale)
    for label, res in ((f"page ({report.target.split(':')[0]})", report.page_result),
                       (f"block {node}", report.block_result)):
        if res is not None:
            report.rows.extend((label, e, res.rtol) for e in res.entries)
    report.seconds = time.perf_counter() - start
    return report


def _check_block(report: CheckReport, program, node: str, result, stale: bool) -> None:
    st = program.step(node)
    if st is None:
        report.block_message = f"{node} is not part of the compiled page."
        return
    spec = st.spec
    if spec.vjp is None:
        what = {"stop": "it sends no gradient back (its gradient is cut by design)",
                "prevent": "differentiating through it is an error by design"}.get(
            spec.gradient, "it is not differentiated (no gradient rule)")
        report.block_message = f"{node} ({spec.name}) has no gradient rule to check: {what}."
        return
    if result is None:
        report.block_message = (f"Run the page first (Forward or Backward): {node} is checked at the input "
                                f"values of the last run.")
        return
    if result.program.page_name != program.page_name:
        report.block_message = (f"The last run was of page '{result.program.page_name}': run this page to "
                                f"check {node} at its inputs.")
        return
    if stale:
        report.block_message = (f"The page changed since the last run: run it again to check {node} at its "
                                f"current inputs.")
        return
    program = result.program        # the run's own schedule: the values are keyed by its slots
    if program.step(node) is None:
        report.block_message = f"{node} was not part of the last run: run the page again to check it."
        return
    st = program.step(node)
    inputs = block_inputs(program, result, node)
    if inputs is None:
        report.block_message = (f"The last run did not keep {node}'s input values; run Forward or Backward "
                                f"again to check it.")
        return
    try:
        report.block_result = check_block(st.spec, inputs, st.attrs)
    except (BlockflowError, ValueError, ArithmeticError) as exc:
        report.block_message = f"{node}'s rule could not be checked: {exc}"
    if report.block_result is not None and not report.block_result.entries:
        report.block_message = f"{node} has no differentiable float input to check."


def _blocks(report: CheckReport, nodes) -> str:
    """``StopGradient_1`` -> "StopGradient_1 (StopGradient)" for the nodes given."""
    return ", ".join(f"{n} ({report.blocks.get(n, '?')})" for n in nodes)


def _err(error: float) -> str:
    return "∞" if not np.isfinite(error) else f"{error:.1e}"


def _check_rows(report: CheckReport, res, cuts: dict, c: Colors, mono: str) -> list[str]:
    """One table row per checked input (and its problem, and a note where a path is cut)."""
    rows = []
    for e in res.entries:
        broken = bool(e.problem) or not np.isfinite(e.analytic)
        mark = f"<b style='color:{c.ok}'>✓</b>" if e.passed else f"<b style='color:{c.bad}'>✗</b>"
        rows.append(f"<tr><td><b>{esc(e.name)}</b></td>"
                    f"<td {mono}>{'—' if broken else f'{e.analytic:.6g}'}</td>"
                    f"<td {mono}>{'—' if broken else f'{e.numeric:.6g}'}</td>"
                    f"<td {mono}>{_err(e.error)}</td><td {mono}>{res.rtol:.0e}</td>"
                    f"<td align='center'>{mark}</td></tr>")
        if e.problem:
            rows.append(f"<tr><td></td><td colspan='5' style='color:{c.bad}'>{esc(e.problem)}"
                        f"</td></tr>")
        if e.name in cuts:
            note = ("a cut path, left out of the gradient" if not e.passed else
                    "matches although a path is cut: what it would add is zero here")
            rows.append(f"<tr><td></td><td colspan='5' style='color:{c.muted}'>↳ "
                        f"{esc(_blocks(report, cuts[e.name]))}: {note}</td></tr>")
    return rows


# ------------------------------------------------------------------------------ the panel
class GradientPanel(QWidget):
    """The selected block's gradient explained, and the results of the last gradient check.

    Everything comes from the session: the selection, the gradient view explained
    (``session.gradients``) and what :meth:`context` gives the checks.
    ``check_requested`` asks the window's "Check Gradients" action to run.
    """

    check_requested = Signal()

    COLUMNS = ("Input", "Analytic", "Numeric", "Rel. error", "Tol.", "")

    def __init__(self, document, session, parent=None):
        super().__init__(parent)
        self.doc = document
        self.session = session
        self.node: str | None = None
        self._selected = 0
        self.explanation = None
        self.report: CheckReport | None = None

        self.text = QTextBrowser(self)
        self.text.setOpenLinks(False)

        self.check_button = QPushButton("Check Gradients", self)
        self.check_button.setToolTip("Compare the gradients with central differences: the page's, and "
                                     "the selected block's rule at its last inputs (Ctrl+Alt+G)")
        self.check_button.clicked.connect(self.check_requested.emit)
        self.check_view = QTextBrowser(self)
        self.check_view.setOpenLinks(False)
        # Small minimums: the dock may share a column with several others.
        self.text.setMinimumHeight(40)
        self.check_view.setMinimumHeight(30)

        check_box = QWidget(self)
        col = QVBoxLayout(check_box)
        col.setContentsMargins(0, 0, 0, 0)
        col.setSpacing(2)
        row = QHBoxLayout()
        row.addWidget(QLabel("<b>Gradient check</b>", self))
        row.addStretch(1)
        row.addWidget(self.check_button)
        col.addLayout(row)
        col.addWidget(self.check_view, 1)
        self.split = QSplitter(Qt.Vertical, self)
        self.split.addWidget(self.text)
        self.split.addWidget(check_box)
        self.split.setStretchFactor(0, 3)
        self.split.setStretchFactor(1, 1)
        self.split.setChildrenCollapsible(False)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(4, 4, 4, 4)
        outer.addWidget(self.split)

        # Bound methods, not lambdas: Qt drops them with the panel, while the document may live on.
        session.selection_changed.connect(self._on_selection)
        session.gradients_changed.connect(self.refresh)
        document.current_page_changed.connect(self._on_page_switched)
        document.project_replaced.connect(self._clear_report)
        document.structure_changed.connect(self._on_structure)
        self._clear_report()
        self._on_selection(session.selection)

    def context(self) -> tuple:
        """``(target, result, stale)`` for the checks: the Backward target chosen in the run
        controls (None: the page's loss), the page's last recorded run (the session's, else the run
        behind the gradient view shown; None: none) and whether the page was edited since (None:
        judge by its program)."""
        session = self.session
        target, result = session.target, session.last_result
        stale = session.results_stale if result is not None else None
        if result is None and session.gradients is not None:
            result = session.gradients.result
        return target, result, stale

    def _on_page_switched(self, _page: str) -> None:
        self._clear_report()

    def _on_structure(self, _page: str) -> None:
        """An edit: a verdict shown stays readable, but says it is of the page as it was."""
        if self.report is not None and not self.report_stale:
            self.report_stale = True
            c = Colors.of(self)
            self.check_view.setHtml(f"<p style='color:{c.warn}'><b>The page was edited since this check: "
                                    f"check again for a verdict on it as it is.</b></p>"
                                    + self.report_html(self.report, c))

    # ------------------------------------------------------------------------- explanation
    def _on_selection(self, ids) -> None:
        self.node = ids[0] if len(ids) == 1 else None
        self._selected = len(ids)
        self.refresh()

    def refresh(self) -> None:
        """Explain the selected block in the current gradient view (or say what is missing)."""
        c = Colors.of(self)
        gview: GradientView | None = self.session.gradients
        if gview is not None and gview.program.page_name != self.session.host:
            gview = None
        self.explanation = None
        if self.node is None:
            what = "Select one block" if self._selected == 0 else "Select only one block"
            tail = "" if gview is not None else f" after a backward pass ({HINT})"
            self.text.setHtml(f"<p>{what} on the canvas{esc(tail)} to see how its gradient is computed: "
                              f"for each input, the gradient arriving from downstream, the block's local "
                              f"rule, and what it sends back.</p>")
            return
        if gview is None:
            self.text.setHtml(f"<p><b>{esc(self.node)}</b>: no gradient to explain yet. <b>{HINT}</b>, "
                              f"then select a block to see its gradient worked out.</p>")
            return
        # a block drawn inside an opened instance is explained at its level: by its flat id
        flat = self.session.flat_id(self.node)
        if gview.program.instance(flat) is not None:
            self.text.setHtml(self.instance_html(gview, flat, c))
            return
        if gview.program.step(flat) is None:
            self.text.setHtml(f"<p><b>{esc(self.node)}</b> was not part of the last backward pass (it was "
                              f"added or renamed since, or does not compile). <b>{HINT}</b> again.</p>")
            return
        self.explanation = gview.explain(flat)
        self.text.setHtml(self.explanation_html(gview, self.explanation, c))

    def instance_html(self, gview: GradientView, path: str, c: Colors) -> str:
        """A closed composite instance: the gradient at its ports and its badge's numbers; its
        blocks are explained once it is opened."""
        program = gview.program
        inst = program.instance(path)
        badge = instance_badge(gview, path)
        target = gview.target[0]
        parts = [f'<p style="margin-bottom:2px"><span style="font-size:large"><b>{esc(path)}</b></span> · '
                 f'{esc(inst.composite)} (composite)<br><span style="color:{c.muted}">'
                 f'{esc(program.full_name(path))} · gradient of {esc(target)}</span></p>',
                 f"<p>{esc(badge.tooltip())}</p>".replace("\n", "<br>")]
        if gview.ran:
            for port, flat in inst.outputs.items():
                g = gview.result.grads.get((flat, "output"))
                parts.append(f"<p>gradient arriving at output <b>{esc(port)}</b>: {array_html(g, c)}</p>")
            for port, flat in inst.inputs.items():
                g = gview.result.grads.get((flat, "output"))
                parts.append(f"<p>gradient sent back from input <b>{esc(port)}</b>: {array_html(g, c)}</p>")
        parts.append(f"<p style='color:{c.muted}'>Open {esc(path)} (double-click it) to see each of its "
                     f"blocks' gradients and to select one of them here.</p>")
        return "".join(parts)

    def explanation_html(self, gview: GradientView, ex, c: Colors) -> str:
        program = gview.program
        spec = program.spec_of(ex.node)
        target = gview.target[0]
        parts = [f'<p style="margin-bottom:2px"><span style="font-size:large"><b>{esc(ex.node)}</b></span> · '
                 f'{esc(ex.block)}<br><span style="color:{c.muted}">{esc(ex.full_name)} · gradient of '
                 f'{esc(target)}</span></p>']
        if not gview.ran:
            parts.append(f"<p style='color:{c.muted}'>Gradient paths only: {HINT} for the numbers.</p>")
        parts.append("<h4 style='margin-bottom:2px'>Rule</h4>")
        parts.append(rule_html(ex.rule, c))
        if spec.gradient == "stop" or gview.cut_by.get(ex.node):
            parts.append(f"<p><b>{esc(gview.cut_summary(ex.node))}.</b></p>")
        arriving = {port: g for (node, port), g in gview.result.grads.items()
                    if node == ex.node and g is not None} if gview.ran else {}
        if gview.ran and not arriving:
            out_wires = [w for e, w in gview.wires.items() if e.src == ex.node]
            cutters = sorted({c_ for w in out_wires for c_ in w.cutters})
            if cutters:
                why = (f"its outputs lead to {esc(target)} only through "
                       f"{', '.join(esc(n) for n in cutters)}, which cut{'s' if len(cutters) == 1 else ''} "
                       f"the gradient")
            else:
                why = f"its outputs do not lead to {esc(target)}"
            parts.append(f"<p style='color:{c.cut}'>No gradient of {esc(target)} arrives at "
                         f"{esc(ex.node)}: {why}.</p>")
        if not ex.inputs:
            leaf = spec.role in ("placeholder", "variable")
            parts.append(f"<p>{esc(ex.node)} has no inputs: the gradient ends here"
                         + (f" (a leaf: what arrives is the final gradient of {esc(target)} with respect "
                            f"to it)." if leaf else ".") + "</p>")
            for port, g in arriving.items():
                parts.append(f"<p>gradient arriving at <b>{esc(port)}</b> (∂{esc(target)}/∂{esc(ex.node)}): "
                             f"{array_html(g, c)}</p>")
        for ie in ex.inputs:
            parts.append(self._input_html(gview, ex, ie, c))
        return "".join(parts)

    def _input_html(self, gview, ex, ie, c: Colors) -> str:
        src = (f"from {esc(ie.edge.src)}.{esc(ie.edge.src_port)}" if ie.edge is not None
               else "an inline constant")
        rows = []

        def row(label, body):
            rows.append(f"<tr><td style='color:{c.muted}' valign='top'>{label}</td><td>{body}</td></tr>")

        if gview.ran:
            row("value", array_html(ie.value, c))
        if ie.result is not None or (ie.edge is not None and gview.wires.get(ie.edge) is not None
                                     and gview.wires[ie.edge].state == FLOWS):
            for port, g in ie.upstream.items():
                row(f"g ({esc(port)})", array_html(g, c))
            local = rule_for_input(ex.rule, ie.port) or ex.rule
            rule = ("<br>".join(esc(x) for x in local.splitlines()) if local.strip()
                    else f"<i style='color:{c.muted}'>(no rule text)</i>")
            row("rule", f"<span style=\"font-family:'{MONO}'\">{rule}</span>")
            if ie.result is not None:
                to = f" → {esc(ie.edge.src)}" if ie.edge is not None else ""
                row(f"<b>result</b>{to}", array_html(ie.result, c))
            else:
                row("result", f"<span style='color:{c.muted}'>flows here; {HINT} for the numbers</span>")
        else:
            why = ie.why_none or "nothing flows back here"
            if gview.ran and ie.upstream:
                for port, g in ie.upstream.items():
                    row(f"g ({esc(port)})", array_html(g, c))
            row("<b>no gradient</b>", f"<span style='color:{c.cut}'>{esc(why)}</span>")
        return (f"<h4 style='margin-bottom:2px'>Input {esc(ie.port)} <span style='font-weight:normal; "
                f"color:{c.muted}'>{src}</span></h4><table cellspacing='0' cellpadding='2'>"
                + "".join(rows) + "</table>")

    # ------------------------------------------------------------------------- checks
    def check(self) -> CheckReport:
        """Run the gradient checks (synchronously: tens of milliseconds on the samples) and show them."""
        target, result, stale = self.context()
        node = self.session.flat_id(self.node) if self.node is not None else None
        QGuiApplication.setOverrideCursor(Qt.WaitCursor)
        try:
            report = run_checks(self.doc, node, result, target, stale)
        finally:
            QGuiApplication.restoreOverrideCursor()
        self.show_report(report)
        return report

    def _clear_report(self) -> None:
        self.report = None
        self.report_stale = False
        c = Colors.of(self)
        self.check_view.setHtml(f"<p style='color:{c.muted}'>Compare the gradients with central differences: "
                                f"the whole page's and, when one block is selected, that block's rule at "
                                f"the inputs of the last run.</p>")
        self.refresh()

    def show_report(self, report: CheckReport) -> None:
        self.report = report
        self.report_stale = False
        self.check_view.setHtml(self.report_html(report, Colors.of(self)))
        sizes = self.split.sizes()
        total = sum(sizes)
        if report.rows and sizes[1] < total * 0.45:
            self.split.setSizes([total // 2, total - total // 2])

    @staticmethod
    def report_html(report: CheckReport, c: Colors) -> str:
        """Per check (the page's, the block's): its verdict, one row per checked input, or why it
        was not made; then the overall verdict."""
        head = "".join(f"<th align='{'left' if k == 0 else 'right'}' style='color:{c.muted}; white-space:pre'>"
                       f"{esc(h)}</th>" for k, h in enumerate(GradientPanel.COLUMNS))
        mono = f"style=\"font-family:'{MONO}'; font-size:small; white-space:pre\" align='right'"
        parts = []
        groups = [(f"Page {report.page}" + (f", gradient of {report.target.split(':')[0]}" if report.target
                                            else ""), report.page_result, report.page_message)]
        if report.block_node is not None:
            groups.append((f"Block {report.block_node}, its rule at the last run's inputs",
                           report.block_result, report.block_message))
        for what, res, msg in groups:
            page_check = res is not None and res is report.page_result
            cuts = report.cut_paths if page_check else {}
            if res is not None and res.entries:
                n, bad = len(res.entries), [e for e in res.entries if not e.passed]
                if bad and all(e.name in cuts for e in bad):
                    by = sorted({c for e in bad for c in cuts[e.name]})
                    parts.append(f"<p style='color:{c.bad}; margin-bottom:2px'><b>✗ {esc(what)}</b>: "
                                 f"{len(bad)} of {n} gradient{'s' if n != 1 else ''} differ from central "
                                 f"differences, where {esc(_blocks(report, by))} cut{'s' if len(by) == 1 else ''} "
                                 f"the gradient: the runtime leaves those paths out on purpose, central "
                                 f"differences see the function through them. To test the blocks' own "
                                 f"rules, select one and check again.</p>")
                elif not bad:
                    parts.append(f"<p style='color:{c.ok}; margin-bottom:2px'><b>✓ {esc(what)}</b>: "
                                 f"{'the gradient matches' if n == 1 else f'all {n} gradients match'} central "
                                 f"differences (relative error ≤ {res.rtol:.0e}).</p>")
                else:
                    names = ", ".join(e.name for e in bad)
                    parts.append(f"<p style='color:{c.bad}; margin-bottom:2px'><b>✗ {esc(what)}</b>: "
                                 f"{len(bad)} of {n} gradient{'s' if n != 1 else ''} ({esc(names)}) do not "
                                 f"match central differences (relative error &gt; {res.rtol:.0e}): a gradient "
                                 f"rule on the way is wrong.</p>")
                rows = _check_rows(report, res, cuts, c, mono)
                parts.append(f"<table cellspacing='0' cellpadding='2'><tr>{head}</tr>{''.join(rows)}</table>")
            if msg:
                parts.append(f"<p style='color:{c.muted}'><b>{esc(what)}</b>: {esc(msg)}</p>")
        if report.results:
            verdict = ("✓ passed" if report.passed else
                       "✗ differs only where gradients are cut (as intended)" if report.only_cuts_differ else
                       "✗ FAILED")
            parts.append(f"<p><b style='color:{c.ok if report.passed else c.bad}'>Overall: {verdict}</b> "
                         f"<span style='color:{c.muted}'>({report.seconds * 1000:.0f} ms)</span></p>")
        return "".join(parts)

    # ------------------------------------------------------------------------- events
    def changeEvent(self, event):
        super().changeEvent(event)
        if event.type() == QEvent.PaletteChange:
            self.refresh()
            if self.report is not None:
                self.show_report(self.report)
