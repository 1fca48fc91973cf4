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
from blockflow.cli.cmd_blocks import blocks_markdown
from blockflow.cli.entry import main
from blockflow.cli.exits import (EXIT_CODES, EXIT_DIAGNOSTICS, EXIT_FILE, EXIT_INTERNAL, EXIT_OK, EXIT_RUN, EXIT_USAGE,
                                 CliError)
from blockflow.cli.inputs import check_output_path
from blockflow.cli.output import error_text
from blockflow.cli.parser import build_parser

__all__ = [
    "main", "build_parser", "CliError", "error_text", "check_output_path", "blocks_markdown", "EXIT_CODES",
    "EXIT_OK", "EXIT_DIAGNOSTICS", "EXIT_USAGE", "EXIT_FILE", "EXIT_RUN", "EXIT_INTERNAL",
]
