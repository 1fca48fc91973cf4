"""How the command line prints: arrays in short, diagnostics one a line, numbers for JSON, the
progress bar, and errors as one line after ``blockflow: error:``. Everything printed passes
blockflow.textsafe (see the package's docstring)."""
from __future__ import annotations

import math
import os
import sys

import numpy as np

from blockflow.arrayout import array_stats
from blockflow.cli.exits import CliError
from blockflow.errors import CompileError
from blockflow.textsafe import for_terminal, raw_stream


def summarize(arr) -> str:
    """A short text form of an array: its values when small, else shape and statistics."""
    arr = np.asarray(arr)
    if arr.size <= 8:
        if arr.ndim == 0:
            return np.format_float_positional(arr.item(), precision=6, trim="-") if arr.dtype.kind == "f" \
                else str(arr.item())
        return np.array2string(arr, precision=6, suppress_small=False, separator=", ", max_line_width=200)
    if arr.dtype.kind in "fiu" and arr.size:
        st = array_stats(arr)      # chunk by chunk: a huge result is never copied to be described
        stats = (f"min {st.min:.6g}, mean {st.mean:.6g}, max {st.max:.6g}" if st.count else "no finite values")
        return stats + (f", {st.non_finite} non-finite" if st.non_finite else "")
    return f"{arr.size} values"


def print_diagnostics(diags, stream):
    for d in diags:    # one line each, whatever the file's text holds
        print(for_terminal(str(d)), file=stream)


def json_number(v):
    """A number for JSON: NaN and infinities as the strings "NaN", "Infinity", "-Infinity" (as
    in arrays), since JSON has no such numbers."""
    if isinstance(v, float) and not math.isfinite(v):
        return "NaN" if math.isnan(v) else "Infinity" if v > 0 else "-Infinity"
    return v


def jsonable(v):
    if isinstance(v, tuple):
        return list(v)
    if isinstance(v, np.ndarray):
        return v.tolist()
    return v


class Progress:
    """A one-line progress bar on standard error (a line per 10 % when it is not a terminal)."""

    def __init__(self, total: int, enabled: bool = True):
        self.total, self.enabled = max(total, 1), enabled
        self.tty = enabled and sys.stderr.isatty()
        self.shown = -1

    def update(self, record) -> None:
        if not self.enabled:
            return
        done = record.step + 1
        if self.tty:    # numbers only: written raw, its carriage return must stay one
            width = 30
            filled = int(width * done / self.total)
            raw = raw_stream(sys.stderr)
            raw.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{self.total} "
                      f"loss {record.loss:.4g}")
            raw.flush()
        else:
            tenth = done * 10 // self.total
            if tenth != self.shown:
                self.shown = tenth
                print(f"step {done}/{self.total}: loss {record.loss:.6g}", file=sys.stderr)

    def close(self) -> None:
        if self.tty:
            sys.stderr.write("\n")


def quiet_stdout() -> None:
    """Point standard output at the null device, so the interpreter's last flush of text that
    can no longer be delivered does not print an error of its own."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def report(args, exc):
    if getattr(args, "debug", False):
        import traceback   # with --debug only: 1 ms of every start otherwise

        traceback.print_exception(exc)
    print(f"blockflow: error: {error_text(exc)}", file=sys.stderr)


def error_text(exc) -> str:
    """An error as printed after ``blockflow: error:``: one line, so that text from a file cannot
    start a line of its own (its newlines are escaped with its other control characters); a
    diagram's errors are a head and one indented line per diagnostic, a CliError's ``lines`` (an
    import's unsupported ops) one line each, each escaped alone."""
    if isinstance(exc, CompileError):
        head = str(exc).split("\n", 1)[0]
        return "\n  ".join([head, *(for_terminal(str(d)) for d in exc.diagnostics)])
    lines = exc.lines if isinstance(exc, CliError) else ()
    return "\n".join(for_terminal(line) for line in (str(exc), *lines))
