"""The ``blockflow`` console script's entry point (and ``python -m blockflow``'s).

The command's modules (numpy, the compiler, the runtime) take 0.1-0.3 s to load. Imported at the
top of the console script, a Ctrl-C in that time ended in a traceback from whichever module was
loading; here they load inside the same guard as the rest of the command, so an early Ctrl-C ends
as a later one does: ``blockflow: interrupted`` and exit code 130 (blockflow.cli.exits'
EXIT_INTERRUPTED, a number written out: importing that module is itself interruptible).

Called without argv, both return the exit code as the process's last act (the console script and
__main__ pass it to sys.exit), so the heap is frozen first: see _leaving.
"""
import gc
import importlib
import sys

INTERRUPTED = 130


def main(argv=None) -> int:
    """``blockflow.gui.app.main``, loaded and run with Ctrl-C turned into its exit code."""
    return _guarded("blockflow.gui.app", argv)


def core_main(argv=None) -> int:
    """``python -m blockflow``: the core command line (``blockflow.cli.main``, no Qt), loaded and
    run in the same guard (its __main__ imported it at its top, outside every handler)."""
    return _guarded("blockflow.cli", argv)


def _guarded(module: str, argv) -> int:
    """``module``'s ``main(argv)``, the module imported inside the guard."""
    try:
        return importlib.import_module(module).main(argv)
    except KeyboardInterrupt:
        return _interrupted()
    finally:    # also when argparse exits (--help, a usage error)
        _leaving(argv)


def _leaving(argv) -> None:
    """Move every object to the collector's permanent generation before the interpreter exits.

    Why: at exit the interpreter runs full collections over everything still alive (numpy's
    objects and blockflow's modules), ~30 ms of a `blockflow run` that takes ~250 (measured with
    benchmarks/run.py startup); frozen objects are not scanned. What a frozen heap skips is
    finalizing garbage in reference cycles at exit: the commands close every file they write
    before they return (with blocks, atomic replaces), the interpreter still flushes stdout and
    stderr and runs atexit handlers. Not after the editor or a render has run: Qt's objects
    are torn down in an order PySide6 arranges, and that is left as it is. Not when the caller
    gave argv (a test, a program embedding the command line): it goes on in this process, whose
    heap would stay frozen, each command's cyclic garbage kept for good."""
    if argv is None and "PySide6" not in sys.modules:
        gc.freeze()


def _interrupted() -> int:
    print("blockflow: interrupted", file=sys.stderr)
    return INTERRUPTED
