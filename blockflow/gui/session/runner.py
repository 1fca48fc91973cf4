"""One run of a page, as the Session's worker thread does it, and the words around it.

``run_job`` only calls runtime.run (and summarises the values for the blocks); ``refusal`` says
why a page cannot be run as asked; ``error_location`` finds the block a failed run names.
Display runs never commit state (``commit=False``): running never changes the project.
"""
from __future__ import annotations

import threading
import time
import traceback

from blockflow.errors import BlockExecutionError, BlockflowError, FeedError, NumericsError
from blockflow.run.runtime import run
from blockflow.present.values import summarize

__all__ = ["Outcome", "run_job", "refusal", "error_location", "scalar_targets", "badge"]


def error_location(program, exc) -> tuple[str, str]:
    """The node id and port a run error names on ``program``'s page ("" when it names none)."""
    scope = program.scope + "/"

    def node_of(name: str) -> str:
        name = name.split(" (", 1)[0]
        if name.startswith(scope):
            name = name[len(scope):]
        return name if program.step(name) is not None else ""

    if isinstance(exc, NumericsError):
        node = node_of(exc.node)
        return node, (exc.port or "") if node else ""
    if isinstance(exc, BlockExecutionError):
        return node_of(exc.node), ""
    if isinstance(exc, FeedError):
        text = str(exc)
        names = sorted((s.node for s in program.steps if s.role == "placeholder"), key=len, reverse=True)
        for node in names:
            full = program.full_name(node)
            at = text.find(full)
            end = at + len(full)
            if at >= 0 and (end == len(text) or not (text[end].isalnum() or text[end] in "_.-")):
                return node, "output"
    return "", ""


def badge(exc) -> str:
    """The word on the chip of the block a run failed at."""
    if isinstance(exc, NumericsError):
        return "NaN" if "NaN" in exc.what else "Inf"
    if isinstance(exc, FeedError):
        return "feed"
    return "error"


def scalar_targets(program, loss_key: str | None) -> list[tuple[str, str]]:
    """The program's scalar float outputs as ``(key "node:port", label)``, the loss labelled."""
    out = []
    for st in program.steps:
        for o in st.outputs:
            slot = program.slot(o)
            t = slot.type
            if t.is_float and t.size == 1:
                key = f"{slot.node}:{slot.port}"
                label = slot.node if len(st.outputs) == 1 else key
                out.append((key, label + ("  (loss)" if key == loss_key else "")))
    return out


def refusal(program, page: str, kind: str, target: str | None, keys: list[str]):
    """Why ``program`` cannot be run as asked, as ``(message, node, port)``; None when it can."""
    if not program.ok:
        errors = program.errors
        first = errors[0]
        n = len(errors)
        return (f"Cannot run page '{page}': {n} error{'s' if n != 1 else ''} in the diagram "
                f"(see Problems); {first.where}: {first.message}", first.node or "", first.port or "")
    if kind != "backward":
        return None
    if target is None:
        return (f"Nothing to differentiate on page '{page}': it has no scalar float output "
                "(a loss). Add one, e.g. a Sum, and mark it as the loss.", "", "")
    if target not in keys:
        return (f"'{target}' is not a scalar float output of page '{page}'; targets: "
                + (", ".join(keys) or "none"), "", "")
    return None


class Outcome:
    """What one run produced, handed from the worker thread to the UI thread."""

    __slots__ = ("token", "result", "summaries", "error", "thread_id", "seconds")

    def __init__(self, token):
        self.token = token
        self.result = None
        self.summaries = {}
        self.error = None
        self.thread_id = None
        self.seconds = 0.0


def run_job(token: int, program, target, hook=None) -> Outcome:
    """One run, on the worker thread: runtime.run, and the blocks' summaries of its values.
    ``hook(outcome)`` is called first (tests hold a run back with it)."""
    out = Outcome(token)
    out.thread_id = threading.get_ident()
    start = time.perf_counter()
    try:
        if hook is not None:
            hook(out)
        try:
            out.result = run(program, target=target, record=True, commit=False)
        except NumericsError as exc:
            out.error = exc
            try:    # the values as they came out, NaN included, to show where it went wrong
                out.result = run(program, target=target, record=True, commit=False, check_numerics=False)
            except BlockflowError:
                out.result = None
        if out.result is not None:
            out.summaries = {key: summarize(v) for key, v in out.result.values.items()}
    except BlockflowError as exc:
        out.error = exc
    except Exception as exc:  # a bug, not a diagram problem: report it instead of hanging busy
        traceback.print_exc()
        out.error = exc
    out.seconds = time.perf_counter() - start
    return out
