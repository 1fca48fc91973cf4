"""The command line: ``blockflow run | check | train | blocks``, for scripts, CI and users without a
display.

Errors are one clear line and a documented exit code (see EXIT_CODES); a traceback only with
--debug. Everything printed passes one boundary, blockflow.textsafe.escaped_output: text from a
file (names, paths, messages quoting them) cannot move the cursor or rewrite the screen, its
control characters are shown as escapes (JSON output stays valid JSON). Results are printed
without a second copy of them (blockflow.arrayout). Must not import PySide6 or the block library.

One job a module: exits (the exit codes, CliError), inputs (the project, the registry, feeds,
paths to write), output (how things are printed), one module per command (cmd_run, cmd_check,
cmd_train, cmd_blocks), parser (the options), entry (``main``: a failure to its exit code).
"""
from __future__ import annotations

import importlib

# The names are looked up when first used (PEP 562): a command imports its own module only, so
# `blockflow run` does not pay for what train, export, import or layers would import.
_WHERE = {
    "main": "entry", "build_parser": "parser", "CliError": "exits", "error_text": "output",
    "check_output_path": "inputs", "blocks_markdown": "cmd_blocks", "EXIT_CODES": "exits",
    "EXIT_OK": "exits", "EXIT_DIAGNOSTICS": "exits", "EXIT_USAGE": "exits", "EXIT_FILE": "exits",
    "EXIT_RUN": "exits", "EXIT_INTERNAL": "exits", "COMMANDS": "parser",
}

__all__ = [
    "main", "build_parser", "CliError", "error_text", "check_output_path", "blocks_markdown", "EXIT_CODES",
    "EXIT_OK", "EXIT_DIAGNOSTICS", "EXIT_USAGE", "EXIT_FILE", "EXIT_RUN", "EXIT_INTERNAL", "COMMANDS",
]


def __getattr__(name: str):
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'blockflow.cli' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"blockflow.cli.{module}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted({*globals(), *__all__})
