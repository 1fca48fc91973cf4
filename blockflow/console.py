"""The ``blockflow`` console script's entry point (and ``python -m blockflow``'s).

The command's modules (numpy, the compiler, the runtime) take 0.1-0.3 s to load. Imported at the
top of the console script, a Ctrl-C in that time ended in a traceback from whichever module was
loading; here they load inside the same guard as the rest of the command, so an early Ctrl-C ends
as a later one does: ``blockflow: interrupted`` and exit code 130 (blockflow.cli.exits'
EXIT_INTERRUPTED, a number written out: importing that module is itself interruptible).
"""
import sys

INTERRUPTED = 130


def main(argv=None) -> int:
    """``blockflow.gui.app.main``, loaded and run with Ctrl-C turned into its exit code."""
    try:
        from blockflow.gui.app import main as app_main

        return app_main(argv)
    except KeyboardInterrupt:
        return _interrupted()


def core_main(argv=None) -> int:
    """``python -m blockflow``: the core command line (``blockflow.cli.main``, no Qt), loaded and
    run in the same guard (its __main__ imported it at its top, outside every handler)."""
    try:
        from blockflow.cli import main as cli_main

        return cli_main(argv)
    except KeyboardInterrupt:
        return _interrupted()


def _interrupted() -> int:
    print("blockflow: interrupted", file=sys.stderr)
    return INTERRUPTED
