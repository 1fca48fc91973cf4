"""The ``blockflow`` command: the editor, ``render`` (headless pictures), and the core CLI.

``blockflow [PROJECT]`` opens the editor (the stable softmax sample when no project is given);
without a display it says so and renders the project's first page to a PNG instead (blockflow's
own file: never through a symlink or over a file it did not write, see blockflow.ownfiles).
Everything printed has control characters escaped (blockflow.textsafe).
``blockflow render PROJECT -o out.png|svg [--page P] [--grad | --paths] [--target NODE]`` draws a
page offscreen, optionally with its gradients or gradient paths highlighted. Every other
command (run, check, blocks) is blockflow.cli's, which stays free of Qt.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from blockflow import cli
from blockflow.textsafe import escaped_output, for_terminal

__all__ = ["main", "build_parser", "has_display", "DEFAULT_SAMPLE"]

DEFAULT_SAMPLE = "stable_softmax.bflow.json"

# The core command line's commands (run, check, train, blocks...), as blockflow.cli names them (a
# test checks the names against its parser, so a new one is never mistaken for a project file). Building
# the parser to read them cost every start of the console script 5-8 ms, and the command then built
# it again.
_CLI_COMMANDS = cli.COMMANDS


def has_display() -> bool:
    """Can a window be shown? On Linux that needs an X11 or Wayland display (or an explicit
    non-windowing Qt platform such as offscreen, chosen on purpose with QT_QPA_PLATFORM)."""
    if not sys.platform.startswith("linux"):
        return True
    if os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"):
        return True
    platform = os.environ.get("QT_QPA_PLATFORM", "").split(":")[0]
    return platform not in ("", "xcb", "wayland", "wayland-egl")


def _said_window_libraries_missing() -> bool:
    """Would Qt abort instead of opening a window (X11 libraries missing)? If so, say which
    packages to install, and True."""
    from blockflow.gui.common.x11libs import missing_xcb_message, missing_xcb_packages, uses_xcb

    if not uses_xcb() or _application_exists():
        return False
    packages = missing_xcb_packages()
    if packages:
        print(f"blockflow: error: {missing_xcb_message(packages)}", file=sys.stderr)
    return bool(packages)


def _application_exists() -> bool:
    """An application already made (a test's) has its platform plugin loaded: nothing to check."""
    from PySide6.QtWidgets import QApplication

    return QApplication.instance() is not None


def build_parser() -> argparse.ArgumentParser:
    """blockflow.cli's parser with the ``render`` command added and the editor described."""
    parser = cli.build_parser()
    parser.usage = "blockflow [PROJECT]  |  blockflow [--debug] COMMAND ..."
    parser.description = (
        "Draw a differentiable model as a block diagram, run it, see its gradients.\n\n"
        "With no command, `blockflow [PROJECT]` opens the editor (on the stable softmax sample when\n"
        "no project is given); without a display it renders the project's first page to a PNG.")
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    p = sub.add_parser("render", help="draw a page as PNG or SVG without a display, as the editor draws it")
    p.add_argument("project", help="a .bflow.json project file")
    p.add_argument("-o", "--output", required=True, help="the picture to write: *.png or *.svg")
    p.add_argument("--page", help="the page to draw (default: the first)")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--grad", action="store_true",
                     help="run the page backward (nothing is saved) and colour every wire by the "
                          "gradient flowing back along it, with a legend")
    how.add_argument("--paths", action="store_true",
                     help="show where gradient can flow to the target (no run), with a legend")
    p.add_argument("--target", metavar="NODE[:PORT]",
                   help="the gradient target for --grad/--paths (default: the page's loss)")
    return parser


def _default_project() -> Path:
    from blockflow.gui.main_window import sample_projects

    found = [p for p in sample_projects() if p.name == DEFAULT_SAMPLE]
    if not found:
        raise cli.CliError(f"the default sample {DEFAULT_SAMPLE} is not installed; give a project file",
                           cli.EXIT_FILE)
    return found[0]


def _headless() -> None:
    if not has_display():
        os.environ["QT_QPA_PLATFORM"] = "offscreen"


def _application(argv0: str = "blockflow"):
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance()
    if app is None:
        app = QApplication([argv0])
    app.setOrganizationName("blockflow")
    app.setApplicationName("blockflow")
    return app


def render(project_path: str, output: str, page: str | None = None, gradients: str | None = None,
           target: str | None = None) -> str:
    """Render one page of a project file to ``output`` (``gradients``: None, "run" or "paths", see
    render_page); returns the path written."""
    from blockflow.errors import RunError
    from blockflow.io.project_io import load_project
    from blockflow.gui.canvas.render import render_page

    cli.check_output_path("-o", output, replaces=False)    # written into (QImage.save), never replaced
    suffix = Path(output).suffix.lower()
    if suffix not in (".png", ".svg"):
        raise cli.CliError(f"-o {output}: the picture must end in .png or .svg", cli.EXIT_USAGE)
    if target is not None and gradients is None:
        raise cli.CliError("--target needs --grad or --paths", cli.EXIT_USAGE)
    project = load_project(project_path)
    name = project.page(page).name
    _headless()
    _application()
    try:
        render_page(project, name, output, gradients=gradients, target=target)
    except RunError as exc:
        raise cli.CliError(f"the backward run of page '{name}' failed, nothing was drawn: {exc}",
                           cli.EXIT_RUN) from None
    return output


def _fallback_picture(project_path: Path) -> Path:
    """Where the no-display picture is meant to go: next to the project, else (a read-only
    folder) in the working directory. Whatever is at that name is left alone unless it is
    blockflow's own earlier picture (see _write_fallback_picture)."""
    stem = project_path.name
    for suffix in (".bflow.json", ".json"):
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    if os.access(project_path.parent, os.W_OK):
        return project_path.parent / f"{stem}.png"
    return Path.cwd() / f"blockflow-{stem}.png"


def _write_fallback_picture(wanted: Path, data: bytes):
    """Write the no-display picture, blockflow's own file: at ``wanted`` when that name is free
    or holds the picture blockflow drew there before, else at NAME-1.png, ... (never through a
    symlink, never over the user's picture). Returns the ownfiles.Placed."""
    from blockflow.ownfiles import write_own

    return write_own(wanted, data, suffix=".png")


def _run_render(args) -> int:
    try:
        how = "run" if args.grad else "paths" if args.paths else None
        out = render(args.project, args.output, args.page, how, args.target)
    except cli.CliError as exc:
        print(f"blockflow: error: {cli.error_text(exc)}", file=sys.stderr)
        return exc.code
    except Exception as exc:  # file and page errors: one clear line, as the core CLI does
        return _report(exc, args.debug)
    print(f"wrote {for_terminal(str(out))}")
    return cli.EXIT_OK


def _report(exc: Exception, debug: bool) -> int:
    from blockflow.errors import BlockflowError, ProjectError, ProjectFileError

    if debug:
        import traceback

        traceback.print_exception(exc)
    if isinstance(exc, (ProjectFileError, OSError)):
        code = cli.EXIT_FILE
    elif isinstance(exc, ProjectError):
        code = cli.EXIT_USAGE
    elif isinstance(exc, BlockflowError):
        code = cli.EXIT_DIAGNOSTICS
    else:
        print(f"blockflow: internal error ({type(exc).__name__}: {cli.error_text(exc)}); run with --debug for the "
              f"traceback and please report it", file=sys.stderr)
        return cli.EXIT_INTERNAL
    print(f"blockflow: error: {cli.error_text(exc)}", file=sys.stderr)
    return code


def run_editor(project: str | None, *, debug: bool = False, exec_loop: bool = True) -> int:
    """Open the editor on ``project`` (a path) or on a copy of the default sample; without a
    display, say so and draw the project's first page to a PNG instead, run forward and backward
    with its gradients highlighted (the plain diagram when it has no loss or the run fails)."""
    from blockflow.io.project_io import load_project

    sample = project is None
    try:
        path = _default_project() if sample else Path(project)
    except cli.CliError as exc:
        print(f"blockflow: error: {cli.error_text(exc)}", file=sys.stderr)
        return exc.code
    try:
        loaded = load_project(path)
    except Exception as exc:
        return _report(exc, debug)
    if not has_display():
        wanted = _fallback_picture(path.resolve())
        print(f"blockflow: no display (neither DISPLAY nor WAYLAND_DISPLAY is set), so the editor "
              f"cannot open; drawing the first page of {for_terminal(str(path))} instead")
        try:
            _headless()
            _application()
            from blockflow.errors import BlockflowError
            from blockflow.gui.canvas.render import render_page

            first = loaded.pages[0]
            how = "gradients"
            try:   # the page run forward and backward, its wires coloured by gradient (as Run > Backward)
                data = render_page(loaded, first.name, None, gradients="run")
            except BlockflowError as exc:   # no loss, or the run fails: the plain diagram, and why
                how = f"the diagram (no gradients: {exc})"
                data = render_page(loaded, first.name, None)
            placed = _write_fallback_picture(wanted, data)
        except Exception as exc:
            return _report(exc, debug)
        if placed.moved:
            print(f"blockflow: {for_terminal(placed.note('the picture'))}")
        out = placed.path
        print(f"wrote {for_terminal(str(out))}" + ("" if how == "gradients" else f": {for_terminal(how)}")
              + (" (run forward and backward, wires coloured by gradient)" if how == "gradients" else ""))
        return cli.EXIT_OK
    if _said_window_libraries_missing():
        return cli.EXIT_FILE
    app = _application()
    from blockflow.gui.document.document import Document
    from blockflow.gui.main_window import MainWindow

    document = Document(loaded, None if sample else str(path))
    window = MainWindow(document)
    if not sample:
        window.add_recent(str(path))
    window.show()
    window.view.open_readable()      # fitted, or its start where the text can be read
    if not exec_loop:
        return cli.EXIT_OK
    from PySide6.QtCore import QTimer

    QTimer.singleShot(0, window.offer_recovery)    # after a crash: offer the autosaved work
    return app.exec()


def main(argv=None) -> int:
    """The console script ``blockflow``: everything it prints (and logs to standard error) has
    control characters escaped (blockflow.textsafe)."""
    with escaped_output():
        return _main(argv)


def _main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    rest = [a for a in argv if a != "--debug"]
    if rest and (rest[0] in (*_CLI_COMMANDS, "render") or rest[0].startswith("-")):
        if rest[0] in _CLI_COMMANDS:
            return cli.main(argv)
        parser = build_parser()
        args = parser.parse_args(argv)  # --help and --version exit here
        if args.command == "render":
            return _run_render(args)
        return cli.main(argv)
    if len(rest) > 1:
        print(f"blockflow: error: expected one project file, got {len(rest)} arguments "
              f"(see blockflow --help)", file=sys.stderr)
        return cli.EXIT_USAGE
    if rest and not os.path.lexists(rest[0]) and not any(c in rest[0] for c in "./\\"):
        # a bare word that names no file: a mistyped command rather than a missing project
        print(f"blockflow: error: '{rest[0]}' is neither a command ({', '.join((*_CLI_COMMANDS, 'render'))}) "
              f"nor a project file", file=sys.stderr)
        return cli.EXIT_USAGE
    return run_editor(rest[0] if rest else None, debug=debug)


if __name__ == "__main__":
    sys.exit(main())
