"""The command line's exit codes and the error that carries one."""
from __future__ import annotations

from blockflow.errors import BlockflowError

EXIT_OK = 0
EXIT_DIAGNOSTICS = 1  # the diagram has errors
EXIT_USAGE = 2  # bad command line (argparse's own code)
EXIT_FILE = 3  # a file cannot be read or written: the project, a feed, an output
EXIT_RUN = 4  # a run failed: a block raised, NaN/Inf, a missing or wrong feed
EXIT_INTERNAL = 5  # a bug: an unexpected exception
EXIT_INTERRUPTED = 130  # Ctrl-C (the shells' 128 + SIGINT)

EXIT_CODES = {
    EXIT_OK: "success",
    EXIT_DIAGNOSTICS: "the diagram has errors (diagnostics are printed)",
    EXIT_USAGE: "bad command line",
    EXIT_FILE: "a file cannot be read or written (the project, a feed file, an output)",
    EXIT_RUN: "the run failed (a block raised, NaN/Inf appeared, a feed is missing or wrong)",
    EXIT_INTERNAL: "internal error (a bug in blockflow or a block package; --debug shows where)",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C)",
}


class CliError(BlockflowError):
    def __init__(self, message: str, code: int, lines=()):
        super().__init__(message)
        self.code = code
        #: lines printed under the message, each on its own and each escaped alone (an import's
        #: list of unsupported ops): a newline inside the message is escaped, not printed
        self.lines = tuple(lines)
