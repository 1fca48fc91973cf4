"""``blockflow import onnx MODEL.onnx -o PROJECT.bflow.json``: an ONNX model as a project
(docs/import.md)."""
from __future__ import annotations

import os
import sys

from blockflow.cli import inputs
from blockflow.cli.exits import EXIT_DIAGNOSTICS, EXIT_FILE, EXIT_OK, EXIT_USAGE, CliError
from blockflow.textsafe import for_terminal


def cmd_import(args) -> int:
    inputs.check_output_path("-o", args.output)
    if _same_file(args.model, args.output):
        raise CliError(f"-o {args.output} is the model itself: name a new project file "
                       f"(e.g. {os.path.splitext(args.output)[0]}.bflow.json)", EXIT_USAGE)
    from blockflow.importing.errors import ImportFailure, UnsupportedOps
    from blockflow.importing.onnx_import import import_onnx
    from blockflow.io.project_io import save_project
    from blockflow.optional import MissingPackage
    try:
        project, report = import_onnx(args.model, page_name=args.page, registry=inputs.registry(),
                                      group=args.group)
    except MissingPackage as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    except UnsupportedOps as exc:
        raise CliError(exc.head, EXIT_DIAGNOSTICS, [*(f"  {line}" for line in exc.lines), "nothing was written"]) from None
    except ImportFailure as exc:
        raise CliError(f"{exc}; nothing was written", EXIT_FILE) from None
    result = save_project(project, args.output)
    for line in report.lines():
        print(for_terminal(line))
    for note in result.notes:
        print(for_terminal(note), file=sys.stderr)
    print(f"wrote {for_terminal(args.output)}")
    return EXIT_OK


def _same_file(a: str, b: str) -> bool:
    """Whether writing ``b`` would write over ``a``: the path the save resolves (``x/../m.onnx``
    is ``m.onnx`` to it, though the file system refuses to walk through a file)."""
    target = os.path.realpath(os.path.abspath(b))
    try:
        return os.path.samefile(a, target)
    except OSError:
        return os.path.realpath(os.path.abspath(a)) == target


def add_import(sub) -> None:
    p = sub.add_parser("import", help="make a project from a model of another tool (onnx)",
                       description="onnx: each node of an ONNX model (opset 9 and later) becomes the blocks "
                                   "that compute it exactly; initializers become trainable Variables, graph "
                                   "inputs Placeholders, outputs are marked. A model with ops that have no "
                                   "exact counterpart is refused, listing them all. docs/import.md lists the "
                                   "ops.")
    p.add_argument("format", choices=("onnx",), help="the model's format")
    p.add_argument("model", help="the model file (MODEL.onnx)")
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="the project file to write (NAME.bflow.json)")
    p.add_argument("--page", help="the page's name (default: the model's graph name, or the file's)")
    p.add_argument("--group", choices=("composites", "frames"), default="composites",
                   help="each unit of the model (a name scope, a repeated unit like res3_1) becomes an instance of "
                        "a composite, units alike sharing one (composites, the default), or its blocks are drawn "
                        "on the page in a frame (frames)")
    p.set_defaults(func=cmd_import)
