"""The command line's parser: one function a command adds its options with."""
from __future__ import annotations

import argparse
import importlib
import os
import sys

from blockflow import __version__
from blockflow.arrayout import JSON_FULL_VALUES
from blockflow.cli.exits import EXIT_CODES
from blockflow.datafiles import SPLITS
from blockflow.run.settings import OPTIMIZERS


#: the commands build_parser adds, in its order: what the console script (blockflow.gui.app) hands
#: to the command line without building the parser to find out (a test checks they agree)
COMMANDS = ("run", "check", "train", "blocks", "layers", "export", "import")


def terminal_columns(fallback: int = 80) -> int:
    """The terminal's width as ``shutil.get_terminal_size().columns`` gives it: ``$COLUMNS`` when
    it is a positive number, else the size of the terminal standard output is on, else
    ``fallback``."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or fallback


class HelpFormatter(argparse.HelpFormatter):
    """argparse's help formatter, told the terminal's width: left to find it, argparse imports
    shutil, whose archive support imports zlib, bz2 and lzma (3-4 ms of every start; argparse makes
    a formatter for every option it adds)."""

    def __init__(self, prog, indent_increment=2, max_help_position=24, width=None, **kwargs):
        super().__init__(prog, indent_increment, max_help_position,
                         terminal_columns() - 2 if width is None else width, **kwargs)


class RawDescriptionHelpFormatter(HelpFormatter, argparse.RawDescriptionHelpFormatter):
    """The top parser's: its description and epilog kept as written (the exit codes' table)."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser with blockflow's HelpFormatter by default (the sub-parsers too)."""

    def __init__(self, *args, formatter_class=HelpFormatter, **kwargs):
        super().__init__(*args, formatter_class=formatter_class, **kwargs)


def _command(name: str):
    """``blockflow.cli.NAME.NAME``, imported when the command runs: a command's module (and what
    it imports) is loaded for that command only, not for every start of the command line."""
    def command(args) -> int:
        return getattr(importlib.import_module(f"blockflow.cli.{name}"), name)(args)
    command.__name__ = command.__qualname__ = name
    return command


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser; given ``command``, one of COMMANDS, with that command's sub-parser only: argparse
    hands every argument after a command's name to its sub-parser, so an argv that starts with
    the name parses (and fails, and prints its help) as with all of them. Any other ``command``
    (None, an option, an unknown word) adds them all, which --help lists and an unknown command's
    error names. Building the seven sub-parsers was 3-5 ms of every start (argparse makes a help
    formatter, and asks the terminal's size, for each option)."""
    codes = "\n".join(f"  {k}  {v}" for k, v in EXIT_CODES.items())
    parser = ArgumentParser(
        prog="blockflow", formatter_class=RawDescriptionHelpFormatter,
        description="Draw a differentiable model as a block diagram, run it, see its gradients.",
        epilog=f"exit codes:\n{codes}")
    parser.add_argument("--version", action="version", version=f"blockflow {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=ArgumentParser)
    for name in (command,) if command in COMMANDS else COMMANDS:
        _adder(name)(sub)
    return parser


def _adder(name: str):
    """The function that adds command ``name``'s sub-parser (export's and import's are in their
    modules, imported only when their parser is built)."""
    if name == "export":
        from blockflow.cli.cmd_export import add_export

        return add_export
    if name == "import":
        from blockflow.cli.cmd_import import add_import

        return add_import
    return _ADDERS[name]


def _add_run(sub) -> None:
    p = sub.add_parser("run", help="run a page forward (and backward from its loss), print values and gradients")
    p.add_argument("project", help="a .bflow.json project file")
    p.add_argument("--page", help="the page to run (default: the first)")
    p.add_argument("--feed", action="append", default=[], metavar="NAME=VALUE",
                   help="feed a Placeholder from a .npy or .csv file or inline JSON (repeatable)")
    p.add_argument("--fetch", action="append", default=[], metavar="NODE[:PORT]",
                   help="only show these outputs (repeatable; default: all)")
    p.add_argument("--grad", metavar="NODE[:PORT]", help="gradient target (default: the page's loss)")
    p.add_argument("--grad-seed", metavar="VALUE", help="cotangent for a non-scalar target (.npy/.csv/JSON)")
    p.add_argument("--forward-only", action="store_true", help="no backward pass")
    p.add_argument("--split", choices=SPLITS, default="train",
                   help="the data part dataset blocks give, and the learning phase: train (default) "
                        "trains (Dropout drops, BatchNormalization uses the batch); test and all infer")
    p.add_argument("--json", action="store_true", help="machine-readable output of values and gradients")
    p.add_argument("--all-values", action="store_true",
                   help=f"with --json, every value of arrays of more than {JSON_FULL_VALUES:,} values "
                        f"(otherwise summarised)")
    _budget_option(p)
    p.set_defaults(func=_command("cmd_run"))


def _add_check(sub) -> None:
    p = sub.add_parser("check", help="compile the project and list its diagnostics")
    p.add_argument("project")
    p.add_argument("--page", help="check only this page (default: all pages)")
    p.add_argument("--json", action="store_true", help="machine-readable diagnostics and wire types")
    p.add_argument("-v", "--verbose", action="store_true", help="also print every wire's shape and dtype")
    p.add_argument("--grad", nargs="?", const="", default=None, metavar="NODE[:PORT]",
                   help="also check each page's gradients of its loss (or of NODE) against central "
                        "differences, in float64; exit 1 when a check fails")
    _budget_option(p)
    p.set_defaults(func=_command("cmd_check"))


def _add_train(sub) -> None:
    p = sub.add_parser("train", help="train a page's Variables and report the loss (and save them)")
    p.add_argument("project")
    p.add_argument("--page", help="the page to train (default: the first)")
    p.add_argument("--steps", type=_whole_number("MAX_STEPS"), help="number of training steps (default: the project's recommendation)")
    p.add_argument("--optimizer", choices=tuple(OPTIMIZERS),
                   help="the update rule (the Apply* block of the same name; default: the project's "
                        "recommendation, else adam)")
    p.add_argument("--lr", type=float, help="learning rate (default: the optimizer's)")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                   help="another optimizer setting: momentum, beta1, beta2, epsilon, rho, use_nesterov")
    p.add_argument("--batch-size", type=_whole_number("MAX_BATCH_SIZE"), help="examples per step for the page's dataset blocks (0: all)")
    p.add_argument("--seed", type=_whole_number("MAX_SEED"), help="mixed into random streams, batch order and random "
                                           "initial values (default: the project's, else 0); same seed, same result")
    p.add_argument("--loss", metavar="NODE[:PORT]", help="the scalar to minimise (default: the page's loss)")
    p.add_argument("--metric", action="append", default=[], metavar="NODE[:PORT]",
                   help="a scalar to report (default: the page's metrics)")
    p.add_argument("--eval-every", type=_whole_number("MAX_STEPS"), default=0, metavar="K",
                   help="also evaluate on the datasets' test part every K steps and at the end")
    p.add_argument("--mode", default="auto", choices=("auto", "optimizer", "graph"),
                   help="graph: one run per step of the page's own Gradients/Apply* blocks (auto: when it has any)")
    p.add_argument("--engine", default="blockflow", choices=("blockflow", "torch"),
                   help="torch: train the page's exported PyTorch module (pip install 'blockflow[torch]')")
    p.add_argument("--device", help="with --engine torch: cpu or cuda (default: cuda when available)")
    p.add_argument("--save", metavar="OUT", help="write the project with the trained values here (may be PROJECT)")
    p.add_argument("--json", action="store_true", help="machine-readable history")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    _budget_option(p)
    p.set_defaults(func=_command("cmd_train"))


def _add_blocks(sub) -> None:
    p = sub.add_parser("blocks", help="the block catalogue")
    p.add_argument("--markdown", action="store_true", help="the block reference as Markdown (docs/blocks.md)")
    p.add_argument("--output", "-o", help="write the Markdown here instead of standard output")
    p.add_argument("--json", action="store_true", help="machine-readable catalogue")
    p.set_defaults(func=_command("cmd_blocks"))


def _add_layers(sub) -> None:
    p = sub.add_parser("layers", help="the layer library (Dense, Conv2D, ...: composites to insert)")
    p.add_argument("--markdown", action="store_true", help="the layer reference as Markdown (docs/layers.md)")
    p.add_argument("--output", "-o", help="write the Markdown here instead of standard output")
    p.add_argument("project", nargs="?", help="a project: list its layers from the library and whether "
                                              "a newer version exists")
    p.add_argument("--update", nargs="+", metavar="NAME", help="make these composites of the project "
                   "the library's newer version ('all': every outdated one); instances keep their parameters")
    p.add_argument("--save", metavar="OUT", help="where --update writes the project")
    p.set_defaults(func=_command("cmd_layers"))


_ADDERS = {"run": _add_run, "check": _add_check, "train": _add_train, "blocks": _add_blocks, "layers": _add_layers}


def _budget_option(p) -> None:
    p.add_argument("--memory-budget", metavar="SIZE", type=_size_arg,
                   help="the most memory one run's tensors may take at once, e.g. 2G, 512M or 25%% (of "
                        "physical memory); default: $BLOCKFLOW_MEMORY_BUDGET, else half of the memory "
                        "this process may use (docs/limits.md)")


def _whole_number(limit: str):
    """An argparse type: a whole number from 0 to run.settings' ``limit`` (the same ranges as a
    project's recommended settings; looked up only when the option is given)."""
    def parse(text: str) -> int:
        from blockflow.run import settings

        top = getattr(settings, limit)
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if not 0 <= value <= top:
            raise argparse.ArgumentTypeError(f"{value:,} is out of range: a whole number from 0 to {top:,}")
        return value
    return parse


def _size_arg(text: str) -> int:
    from blockflow.budget import parse_size

    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
