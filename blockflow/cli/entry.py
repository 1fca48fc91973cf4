"""The command line's entry point: parse, run the command, and turn each kind of failure into
its line on standard error and its documented exit code."""
from __future__ import annotations

import sys

from blockflow.cli.exits import (EXIT_DIAGNOSTICS, EXIT_FILE, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK, EXIT_RUN,
                                 EXIT_USAGE, CliError)
from blockflow.cli.output import quiet_stdout, report
from blockflow.cli.parser import build_parser
from blockflow.errors import BlockflowError, CompileError, ProjectError, ProjectFileError, RunError
from blockflow.textsafe import escaped_output, for_terminal


def main(argv=None) -> int:
    """The command line; everything it prints has control characters escaped (textsafe)."""
    with escaped_output():
        return _main(argv)


def _main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv[0] if argv else None)   # a command's own parser only (parser.py)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_OK
    try:
        _set_budget(args)
        return args.func(args)
    except CliError as exc:
        report(args, exc)
        return exc.code
    except ProjectFileError as exc:
        report(args, exc)
        return EXIT_FILE
    except ProjectError as exc:  # a page or node named on the command line does not exist
        report(args, exc)
        return EXIT_USAGE
    except CompileError as exc:
        report(args, exc)
        return EXIT_DIAGNOSTICS
    except RunError as exc:
        report(args, exc)
        return EXIT_RUN
    except BlockflowError as exc:
        report(args, exc)
        return EXIT_RUN if args.command == "run" else EXIT_DIAGNOSTICS
    except BrokenPipeError:   # the reader went away (| head): stop quietly, as other tools do
        quiet_stdout()
        return EXIT_OK
    except OSError as exc:
        report(args, exc)
        return EXIT_FILE
    except KeyboardInterrupt:
        print("blockflow: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # a bug in blockflow or in a block package: say so plainly
        if getattr(args, "debug", False):
            import traceback   # with --debug only: 1 ms of every start otherwise

            traceback.print_exception(exc)
        print(f"blockflow: internal error ({type(exc).__name__}: {for_terminal(str(exc))}); run with --debug for the "
              f"traceback and please report it", file=sys.stderr)
        return EXIT_INTERNAL
    finally:
        from blockflow.budget import set_memory_budget

        set_memory_budget(None)   # the option was for this command only (main may be called again)


def _set_budget(args) -> None:
    """--memory-budget for every run of this command; a bad $BLOCKFLOW_MEMORY_BUDGET is a usage error."""
    from blockflow.budget import ENV_VAR, memory_budget, set_memory_budget

    set_memory_budget(getattr(args, "memory_budget", None))
    try:
        memory_budget()
    except ValueError as exc:
        raise CliError(str(exc) if ENV_VAR in str(exc) else f"{ENV_VAR}: {exc}", EXIT_USAGE) from None
