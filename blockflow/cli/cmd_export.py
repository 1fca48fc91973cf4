"""``blockflow export torch|onnx``: a page as a PyTorch module (with its initial values, and a
training script with ``--train``) or as an ONNX model (docs/export.md)."""
from __future__ import annotations

import os
import sys

from blockflow.cli import inputs
from blockflow.cli.exits import EXIT_DIAGNOSTICS, EXIT_FILE, EXIT_OK, EXIT_USAGE, CliError
from blockflow.textsafe import for_terminal

#: export format -> the function that writes it (args, project) -> the paths written
EXPORTERS: dict = {}


def exporter(fmt: str):
    def register(fn):
        EXPORTERS[fmt] = fn
        return fn
    return register


#: what a file of each format is named, for the message that asks for one
_SUFFIXES = {"torch": ".py", "onnx": ".onnx"}


def cmd_export(args) -> int:
    inputs.check_output_path("-o", args.output, follow=False)    # a link there is replaced: its folder
    if _replaces(args.project, args.output):
        stem = os.path.basename(args.output).split(".")[0] or "model"
        raise CliError(f"-o {args.output} is the project itself: name a new file (e.g. "
                       f"{stem}{_SUFFIXES.get(args.format, '')}); nothing was written", EXIT_USAGE)
    project = inputs.load(args.project)
    from blockflow.optional import MissingPackage
    from blockflow.export.errors import ExportError
    try:
        written = EXPORTERS[args.format](args, project)
    except ExportError as exc:
        for problem in exc.problems:
            print(f"  {for_terminal(problem)}", file=sys.stderr)
        raise CliError(f"{args.project}: {exc}; nothing was written", EXIT_DIAGNOSTICS) from None
    except MissingPackage as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    except OSError as exc:
        raise CliError(f"cannot write {for_terminal(args.output)}: {exc.strerror or exc}", EXIT_FILE) from None
    for path in written:
        print(f"wrote {for_terminal(str(path))}")
    return EXIT_OK


def _replaces(project: str, out: str) -> bool:
    """Whether writing ``out`` would put the export in the project's place (an export replaces
    the entry named, no backup kept): the same file through its folder's links or a hard link;
    a symbolic link named ``out`` is replaced itself, never written through."""
    folder = os.path.realpath(os.path.dirname(os.path.abspath(out)))
    try:
        entry, source = os.lstat(os.path.join(folder, os.path.basename(out))), os.stat(project)
    except OSError:
        return False
    return (entry.st_dev, entry.st_ino) == (source.st_dev, source.st_ino)


@exporter("torch")
def _export_torch(args, project) -> list:
    from blockflow.export.formats import export_files

    if getattr(args, "train", False):
        return _export_training(args, project)
    return export_files("torch", project, args.page, args.output, args.outputs or None, inputs.registry())


def _export_training(args, project) -> list:
    from pathlib import Path

    from blockflow.export.torch_train import export_training, write_training_files

    if args.outputs:
        raise CliError("--train: the module returns the page's loss (the training script needs it); "
                       "leave out --output-node", EXIT_USAGE)
    if Path(args.output).name == "train.py":
        raise CliError("--train writes train.py beside the module: name the module otherwise (-o model.py)",
                       EXIT_USAGE)
    training = export_training(project, args.page, inputs.registry(), model_file=Path(args.output).name)
    return write_training_files(training, args.output)


@exporter("onnx")
def _export_onnx(args, project) -> list:
    from blockflow.export.formats import export_files

    if getattr(args, "train", False):
        raise CliError("--train writes a PyTorch training script: use it with 'export torch'", EXIT_USAGE)
    return export_files("onnx", project, args.page, args.output, args.outputs or None, inputs.registry())


def add_export(sub) -> None:
    p = sub.add_parser("export", help="write a page as a PyTorch module (torch) or an ONNX model (onnx)",
                       description="torch: NAME.py (one nn.Module per composite, Model for the page) and "
                                   "NAME.pt beside it (the initial values); onnx: an inference model.")
    p.add_argument("format", choices=("torch", "onnx"), help="what to write")
    p.add_argument("project", help="a .bflow.json project file")
    p.add_argument("--page", help="the page to export (default: the first)")
    p.add_argument("-o", "--output", required=True, metavar="FILE",
                   help="the file to write (torch: NAME.py, and NAME.pt beside it when the page has values)")
    p.add_argument("--output-node", dest="outputs", action="append", default=[], metavar="NODE[:PORT]",
                   help="an output forward returns (repeatable; default: the page's loss)")
    p.add_argument("--train", action="store_true",
                   help="torch: also write train.py beside the module (and NAME_data.pt, its data): it trains "
                        "with the project's settings, on one process or under torchrun")
    p.set_defaults(func=cmd_export)
