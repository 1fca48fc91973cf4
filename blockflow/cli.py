"""The command line: ``blockflow run | check | train | blocks``, for scripts, CI and users without a
display.

Errors are one clear line and a documented exit code (see EXIT_CODES); a traceback only with
--debug. Everything printed passes one boundary, blockflow.textsafe.escaped_output: text from a
file (names, paths, messages quoting them) cannot move the cursor or rewrite the screen, its
control characters are shown as escapes (JSON output stays valid JSON). Results are printed
without a second copy of them (blockflow.arrayout). Must not import PySide6 or the block library.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import traceback
from pathlib import Path

import numpy as np

from blockflow import __version__
from blockflow.arrayout import JSON_FULL_VALUES, JsonArray, array_stats, write_json
from blockflow.errors import BlockflowError, CompileError, MemoryLimitError, ProjectError, ProjectFileError, RunError
from blockflow.textsafe import escaped_output, for_terminal, raw_stream

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
    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code


# ------------------------------------------------------------------------------------ helpers


def _load(path: str):
    from blockflow.io.project_io import load_project

    return load_project(path)


def _registry():
    from blockflow.registry import Registry

    reg = Registry.from_entry_points(strict=False)
    for where, problem in reg.problems:
        print(f"blockflow: warning: block package {where} was skipped: {problem}", file=sys.stderr)
    return reg


def check_output_path(option: str, path: str) -> None:
    """A file named on the command line to write must be able to be one: else a usage error
    naming the option, the path and the problem (empty, ending in '/', a folder, too long)."""
    from blockflow.ownfiles import name_problem

    problem = name_problem(path)
    if problem:
        raise CliError(f"{option} {path or repr(path)}: {problem}", EXIT_USAGE)


def parse_feed(spec: str, option: str = "--feed") -> tuple[str, np.ndarray]:
    """``NAME=file.npy``, ``NAME=file.csv`` or ``NAME=<inline JSON>`` -> (name, array)."""
    name, sep, value = spec.partition("=")
    if not sep or not name:
        raise CliError(f"{option} {spec!r}: expected NAME=VALUE (a .npy or .csv file, or inline JSON)", EXIT_USAGE)
    text = value.strip()
    if text.endswith(".npy"):
        try:
            return name, np.load(text, allow_pickle=False)
        except Exception as exc:  # numpy raises OSError, ValueError, EOFError... for bad files
            raise CliError(f"{option} {name}: cannot read {text}: {exc or type(exc).__name__}", EXIT_FILE) from None
    if text.endswith(".csv"):
        return name, _read_csv(f"{option} {name}", text)
    try:
        data = json.loads(text)
        arr = np.asarray(data)
    except (ValueError, TypeError) as exc:
        raise CliError(f"{option} {name}: {text!r} is neither a .npy/.csv file nor JSON ({exc})", EXIT_USAGE) from None
    if arr.dtype.kind not in "biuf":
        raise CliError(f"{option} {name}: expected numbers, got {text!r}", EXIT_USAGE)
    return name, arr


def _read_csv(what: str, path: str) -> np.ndarray:
    """A feed's CSV: numbers, one row per line, an optional header; read as a data file is
    (streamed into one array whose size is checked before it exists)."""
    from blockflow.datafiles import DataFileError, read_number_table

    try:
        _, arr = read_number_table(path, path, header="optional")
    except OSError as exc:
        raise CliError(f"{what}: cannot read {path}: {exc.strerror or exc}", EXIT_FILE) from None
    except DataFileError as exc:
        raise CliError(f"{what}: {exc}", EXIT_FILE) from None
    if arr.shape[1] == 1:
        arr = arr[:, 0]
    return arr


def summarize(arr) -> str:
    """A short text form of an array: its values when small, else shape and statistics."""
    arr = np.asarray(arr)
    if arr.size <= 8:
        if arr.ndim == 0:
            return np.format_float_positional(arr.item(), precision=6, trim="-") if arr.dtype.kind == "f" \
                else str(arr.item())
        return np.array2string(arr, precision=6, suppress_small=False, separator=", ", max_line_width=200)
    if arr.dtype.kind in "fiu" and arr.size:
        st = array_stats(arr)      # chunk by chunk: a huge result is never copied to be described
        stats = (f"min {st.min:.6g}, mean {st.mean:.6g}, max {st.max:.6g}" if st.count else "no finite values")
        return stats + (f", {st.non_finite} non-finite" if st.non_finite else "")
    return f"{arr.size} values"


# ------------------------------------------------------------------------------------ commands


def cmd_run(args) -> int:
    from blockflow.compile.compiler import compile_project
    from blockflow.run.runtime import run

    project = _load(args.project)
    program = compile_project(project, args.page, _registry())
    if not program.ok:
        _print_diagnostics(program.diagnostics, sys.stderr)
        raise CliError(f"{args.project}: the diagram has errors; nothing was run", EXIT_DIAGNOSTICS)
    feeds = _feeds(program, args.feed)
    target = None
    if not args.forward_only:
        if args.grad:
            target = args.grad
        elif program.loss is not None:
            target = ":".join(p for p in program.loss if p)
    seed = None
    if args.grad_seed is not None:
        if target is None:
            raise CliError("--grad-seed needs a gradient target (--grad, or a page with a loss)", EXIT_USAGE)
        _, seed = parse_feed(f"seed={args.grad_seed}", option="--grad-seed")
    if target is not None:
        try:
            ttype = program.target_slot(target).type
        except ProjectError as exc:
            raise CliError(f"--grad {target}: {exc}", EXIT_USAGE) from None
        if not ttype.is_float:
            raise CliError(f"--grad {target}: that output is {ttype}; only float values can be differentiated",
                           EXIT_USAGE)
        if seed is None and ttype.size != 1:
            raise CliError(f"--grad {target}: that output is {ttype}, not a scalar: give --grad-seed VALUE "
                           f"of its shape, or name a scalar output", EXIT_USAGE)
    fetch = [program.resolve_target(f) for f in args.fetch] if args.fetch else None   # before a long run
    result = run(program, feeds, target=target, grad_seed=seed, record=True)
    if args.json:
        write_json(_result_json(args, program, result, fetch), sys.stdout)
        sys.stdout.write("\n")
    else:
        _print_result(program, result, fetch)
    return EXIT_OK


def _feeds(program, specs) -> dict:
    """The --feed options as {Placeholder: array}; a name that is not a Placeholder of the page,
    or one given twice, is a usage error found before any file is read."""
    placeholders = [st.node for st in program.steps if st.role == "placeholder"]
    feeds: dict = {}
    for spec in specs:
        name, sep, _ = spec.partition("=")
        if sep and name and name not in placeholders:
            raise CliError(f"--feed {name}: page '{program.page_name}' has no Placeholder '{name}' (its "
                           f"Placeholders: {', '.join(placeholders) or 'none'})", EXIT_USAGE)
        if name in feeds:
            raise CliError(f"--feed {name}: given twice", EXIT_USAGE)
        name, value = parse_feed(spec)
        feeds[name] = value
    return feeds


def _selected(program, fetch):
    if fetch is None:
        return [o for st in program.steps for o in st.outputs]
    return fetch


def _result_json(args, program, result, fetch) -> dict:
    out = {
        "project": str(args.project),
        "page": program.page_name,
        "scope": program.scope,
        "target": None if result.target is None else ":".join(result.target),
        "values": {},
        "gradients": {},
    }
    full = args.all_values

    def array_to_json(arr):     # written piecewise when the document is (blockflow.arrayout)
        return JsonArray(arr, full)

    for s in _selected(program, fetch):
        key = (program.slot(s).node, program.slot(s).port)
        out["values"][":".join(key)] = array_to_json(result.values[key])
        if key in result.grads:
            out["gradients"][":".join(key)] = array_to_json(result.grads[key])
    if result.target is not None:
        paths = result.paths
        out["variable_gradients"] = {k: array_to_json(v) for k, v in result.variable_grads.items()}
        out["edges"] = [
            {"from": f"{e.src}:{e.src_port}", "to": f"{e.dst}:{e.dst_port}",
             "gradient": array_to_json(result.edge_grads[e]) if e in result.edge_grads else None,
             "status": "flows" if e in paths.flows else "cut" if e in paths.cut else "unreached",
             "cut_by": list(paths.cut.get(e, ())), "reason": paths.reason(e)}
            for e in sorted(program.typed_wires())
        ]
    return out


def _print_result(program, result, fetch):
    target = "" if result.target is None else f", gradients of {program.full_name(result.target[0])}:{result.target[1]}"
    print(f"page '{program.page_name}': {len(program.steps)} blocks{target}")
    rows = []
    for s in _selected(program, fetch):
        slot = program.slot(s)
        key = (slot.node, slot.port)
        name = f"{program.full_name(key[0])}:{key[1]}"
        rows.append((name, slot.type.describe(), summarize(result.values[key]),
                     summarize(result.grads[key]) if key in result.grads else None))
    width = max((len(r[0]) for r in rows), default=10)
    twidth = max((len(r[1]) for r in rows), default=5)
    for name, t, value, grad in rows:
        print(f"  {name:<{width}}  {t:<{twidth}}  = {value}")
        if grad is not None:
            print(f"  {'':<{width}}  {'':<{twidth}}  d = {grad}")
    if result.target is not None:
        paths = result.paths
        cut = sorted(paths.cut.items())
        if cut:
            print("wires cut from the gradient:")
            for e, _ in cut:
                print(f"  {e}: {paths.reason(e)}")
        if paths.cut_sources:
            for node, by in sorted(paths.cut_sources.items()):
                print(f"  {program.full_name(node)} receives no gradient: cut by {', '.join(by)}")


def _wire_types(program) -> list:
    """(wire, inferred type) for every typed wire of ``program``, sorted by wire."""
    return sorted((e, program.wire_type(e)) for e in program.typed_wires())


def cmd_check(args) -> int:
    from blockflow.compile.compiler import compile_page, project_files

    project = _load(args.project)
    registry = _registry()
    # The pages themselves, not their names: looking each name up again scans the page list,
    # which made checking a project of many pages quadratic in their number.
    pages = project.pages if args.page is None else [project.page(args.page)]
    files = project_files(project)
    all_diags, summary = [], []
    for page in pages:
        program = compile_page(page, registry, files=files)
        all_diags.extend(program.diagnostics)
        summary.append((program, len(program.errors)))
    checks = _grad_checks(args, pages, registry, summary) if args.grad is not None else {}
    if args.json:
        json.dump({"project": str(args.project),
                   "pages": [{"page": p.page_name, "blocks": len(p.steps), "errors": n,
                              "edges": [{"from": f"{e.src}:{e.src_port}", "to": f"{e.dst}:{e.dst_port}",
                                         "dtype": t.dtype.name,
                                         "shape": [d if d is not None else None for d in t.shape]}
                                        for e, t in _wire_types(p)]}
                             for p, n in summary],
                   "diagnostics": [{"severity": d.severity, "page": d.page, "node": d.node, "port": d.port,
                                    "message": d.message} for d in all_diags],
                   **({"gradient_checks": [
                       {"page": page, "target": r.label, "passed": r.passed, "rtol": r.rtol,
                        "inputs": [{"input": e.name, "analytic": _json_number(e.analytic),
                                    "numeric": _json_number(e.numeric), "relative_error": _json_number(e.error),
                                    "passed": e.passed, "problem": e.problem}
                                   for e in r.entries]} if r is not None else {"page": page, "skipped": why}
                       for page, (r, why) in checks.items()]} if args.grad is not None else {})},
                  sys.stdout, ensure_ascii=False, indent=1)
        sys.stdout.write("\n")
    else:
        _print_diagnostics(all_diags, sys.stdout)
        for program, n in summary:
            status = "ok" if n == 0 else f"{n} error{'s' if n != 1 else ''}"
            print(f"page '{program.page_name}': {len(program.steps)} blocks, {len(program.typed_wires())} wires: {status}")
            if args.verbose:
                for e, t in _wire_types(program):
                    print(f"  {e}: {t.describe()}")
            if program.page_name in checks:
                r, why = checks[program.page_name]
                print("  " + str(r).replace("\n", "\n  ") if r is not None else f"  gradient check skipped: {why}")
    errors = sum(n for _, n in summary)
    failed = any(r is not None and not r.passed for r, _ in checks.values())
    return EXIT_DIAGNOSTICS if errors or failed else EXIT_OK


def _json_number(v):
    """A number for JSON: NaN and infinities as the strings "NaN", "Infinity", "-Infinity" (as
    in arrays), since JSON has no such numbers."""
    if isinstance(v, float) and not math.isfinite(v):
        return "NaN" if math.isnan(v) else "Infinity" if v > 0 else "-Infinity"
    return v


def _grad_checks(args, pages, registry, summary) -> dict:
    """``check --grad``: each compiled page's gradients against central differences (float64)."""
    from blockflow.run.gradcheck import check_page

    out = {}
    for page, (program, errors) in zip(pages, summary):
        name = program.page_name
        target = args.grad or None
        if errors:
            out[name] = (None, "the page does not compile")
        elif target is None and program.loss is None:
            if args.page is not None:
                raise CliError(f"page '{name}' marks no loss: name the target, --grad NODE[:PORT]", EXIT_USAGE)
            out[name] = (None, "the page marks no loss")
        elif target is not None and program.step(target.partition(":")[0]) is None:
            if args.page is not None or len(summary) == 1:
                raise CliError(f"page '{name}' has no block '{target.partition(':')[0]}'", EXIT_USAGE)
            out[name] = (None, f"no block '{target.partition(':')[0]}' on this page")
        else:
            out[name] = (check_page(page, registry, target=target), "")
    if args.grad and all(r is None and why.startswith("no block") for r, why in out.values()):
        raise CliError(f"--grad {args.grad}: no page has a block '{args.grad.partition(':')[0]}'", EXIT_USAGE)
    return out


def cmd_train(args) -> int:
    from blockflow.io.project_io import save_project
    from blockflow.run.training import OPTIMIZERS, TrainConfig, Trainer, recommended_settings, training_program

    if args.save is not None:     # before training: a long run must not end in "cannot save"
        check_output_path("--save", args.save)
    project = _load(args.project)
    registry = _registry()
    problems = []
    recommended = recommended_settings(project, args.page, problems)
    optimizer = args.optimizer or recommended.get("optimizer", "adam")
    _check_recommended(args, problems, optimizer)
    steps = args.steps if args.steps is not None else recommended.get("steps")
    if steps is None:
        raise CliError("give --steps N (the project recommends no number of steps for this page)", EXIT_USAGE)
    seed = args.seed if args.seed is not None else recommended.get("seed", 0)
    batch_size = args.batch_size if args.batch_size is not None else recommended.get("batch_size")
    try:
        program = training_program(project, args.page, registry, batch_size=batch_size)
    except ValueError as exc:
        raise CliError(f"--batch-size: {exc}", EXIT_USAGE) from None
    if not program.ok:
        _print_diagnostics(program.diagnostics, sys.stderr)
        raise CliError(f"{args.project}: the diagram has errors; nothing was trained", EXIT_DIAGNOSTICS)
    page = project.page(args.page)
    hyper = dict(recommended.get("hyper", {})) if optimizer == recommended.get("optimizer", "adam") else {}
    if args.lr is not None:
        hyper["lr"] = args.lr
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep:
            raise CliError(f"--set {item!r}: give NAME=VALUE", EXIT_USAGE)
        try:
            hyper[key] = json.loads(value)
        except json.JSONDecodeError:
            raise CliError(f"--set {item!r}: the value must be a number or true/false", EXIT_USAGE) from None
    metrics = tuple(args.metric) if args.metric else tuple(page.metrics)
    config = TrainConfig(steps=steps, optimizer=optimizer, hyper=hyper, seed=seed,
                         target=args.loss, metrics=metrics, eval_every=args.eval_every,
                         mode=args.mode)
    try:
        trainer = Trainer(program, config, registry)
    except MemoryLimitError:      # the training would not fit: a run failure (4), as in any run
        raise
    except (ValueError, ProjectError, RunError) as exc:   # settings the page cannot be trained with
        raise CliError(str(exc), EXIT_USAGE) from None
    for warning in trainer.warnings:
        print(f"blockflow: warning: {for_terminal(warning)}", file=sys.stderr)
    moves, new_dir = _plan_save(args.save, project, registry) if args.save else ([], None)
    bar = _Progress(steps, enabled=not args.quiet and not args.json)
    history = trainer.train(callback=lambda rec, _t: bar.update(rec))
    bar.close()
    final = history.steps[-1] if history.steps else None
    evaluation = history.evaluations[-1][1] if history.evaluations else None
    if evaluation is None and history.steps and program.reads_datasets:
        try:    # the page's datasets hold out a test part: say how the result does on it
            evaluation = trainer.evaluate("test")
        except BlockflowError:
            evaluation = None
    rate = len(history.steps) / history.seconds if history.seconds > 0 else float("inf")
    if args.save:
        from blockflow.io.relocate import apply_move

        page.apply_state(trainer.state_updates())
        apply_move(project, moves, new_dir)     # the data first: the saved project never names a missing file
        for note in save_project(project, args.save).notes:    # e.g. the backup kept elsewhere
            print(f"blockflow: note: {for_terminal(note)}", file=sys.stderr)
        for m in moves:
            if m.action == "missing":
                print(f"blockflow: warning: {for_terminal(m.describe(new_dir))}", file=sys.stderr)
    if args.json:
        json.dump({"project": str(args.project), "page": page.name, "mode": trainer.mode,
                   "optimizer": optimizer if trainer.mode == "optimizer" else None,
                   "settings": trainer.hyper if trainer.mode == "optimizer" else None,
                   "steps": len(history.steps), "seconds": history.seconds, "seed": seed,
                   "loss": history.losses, "metrics": {m: history.metric(m) for m in trainer.metric_keys},
                   "test": [{"step": k, **v} for k, v in history.evaluations],
                   "final_test": evaluation,
                   "saved": args.save,
                   **({"data_files": [{"path": m.path, "action": m.action, "saved_as": m.new_path}
                                      for m in moves]} if args.save else {})},
                  sys.stdout, ensure_ascii=False, indent=1)
        sys.stdout.write("\n")
    else:
        what = (f"{OPTIMIZERS[optimizer][0].replace('Apply', '')} ({optimizer}, "
                + ", ".join(f"{k} {v:g}" for k, v in trainer.hyper.items() if not isinstance(v, bool)) + ")"
                if trainer.mode == "optimizer" else "the page's own update blocks")
        print(f"trained page '{page.name}' for {len(history.steps)} steps with {what}, "
              f"{rate:,.0f} steps/s")
        if final is not None:
            batch = " (on each step's batch)" if program.reads_datasets else ""
            print(f"loss{batch}: {history.steps[0].loss:.6g} -> {final.loss:.6g}")
            for m, v in final.metrics.items():
                print(f"{m}{batch}: {v:.6g}")
        if evaluation is not None:
            print("test: " + ", ".join(f"{k} {v:.6g}" for k, v in evaluation.items()))
        print(f"saved to {args.save}" if args.save else "not saved (use --save OUT to keep the trained values)")
        for m in moves:
            if m.action in ("copy", "rewrite"):
                print(f"  {m.describe(new_dir)}")
    return EXIT_OK


def _plan_save(out: str, project, registry):
    """Before training: decide what becomes of the data
    files the project reads when OUT is in another folder (blockflow.io.relocate: a path rewritten
    when the file is inside the new folder, else a copy next to it, never over another file)."""
    from blockflow.io.relocate import plan_move

    folder = os.path.dirname(os.path.abspath(out))    # check_output_path has vetted OUT itself
    if project.base_dir is None or os.path.realpath(project.base_dir) == os.path.realpath(folder):
        return [], folder
    return plan_move(project, registry, project.base_dir, folder), folder
# The option that replaces each recommended setting (the optimizers' other settings: --set NAME=V).
_SETTING_OPTIONS = {"steps": "--steps", "seed": "--seed", "batch_size": "--batch-size",
                    "optimizer": "--optimizer", "lr": "--lr"}


def _check_recommended(args, problems, optimizer: str) -> None:
    """The project's bad training settings for the page: an error (exit 2) for each one this
    training would use, a warning for the others (an unknown key, a setting of another optimizer,
    one an option replaces)."""
    from blockflow.run.training import optimizer_defaults

    given = {"steps": args.steps, "seed": args.seed, "batch_size": args.batch_size,
             "optimizer": args.optimizer, "lr": args.lr,
             **{item.partition("=")[0]: item for item in args.set}}
    used = {"steps", "seed", "batch_size", "optimizer", *optimizer_defaults(optimizer)}
    errors = []
    for p in problems:
        if p.key is None or (p.key in used and given.get(p.key) is None):
            option = _SETTING_OPTIONS.get(p.key, f"--set {p.key}=VALUE") if p.key else "the options"
            errors.append(f"{args.project} at {p}; fix it in the project or give {option}")
        else:
            print(f"blockflow: warning: {args.project} at {p} (not used)", file=sys.stderr)
    for message in errors[:-1]:
        print(f"blockflow: error: {message}", file=sys.stderr)
    if errors:
        raise CliError(errors[-1], EXIT_USAGE)


class _Progress:
    """A one-line progress bar on standard error (a line per 10 % when it is not a terminal)."""

    def __init__(self, total: int, enabled: bool = True):
        self.total, self.enabled = max(total, 1), enabled
        self.tty = enabled and sys.stderr.isatty()
        self.shown = -1

    def update(self, record) -> None:
        if not self.enabled:
            return
        done = record.step + 1
        if self.tty:    # numbers only: written raw, its carriage return must stay one
            width = 30
            filled = int(width * done / self.total)
            raw = raw_stream(sys.stderr)
            raw.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{self.total} "
                      f"loss {record.loss:.4g}")
            raw.flush()
        else:
            tenth = done * 10 // self.total
            if tenth != self.shown:
                self.shown = tenth
                print(f"step {done}/{self.total}: loss {record.loss:.6g}", file=sys.stderr)

    def close(self) -> None:
        if self.tty:
            sys.stderr.write("\n")


def _print_diagnostics(diags, stream):
    for d in diags:    # one line each, whatever the file's text holds
        print(for_terminal(str(d)), file=stream)


def cmd_blocks(args) -> int:
    if args.output and not args.markdown:
        raise CliError("--output writes the Markdown reference: give --markdown too", EXIT_USAGE)
    registry = _registry()
    if args.markdown:
        text = blocks_markdown(registry)
        if args.output is not None:
            check_output_path("--output", args.output)
            Path(args.output).write_text(text, encoding="utf-8")
            print(f"wrote {for_terminal(args.output)} ({len(registry)} blocks)")
        else:
            sys.stdout.write(text)
        return EXIT_OK
    cats = registry.categories()
    if args.json:
        json.dump([{"name": s.name, "category": s.category, "summary": s.summary,
                    "inputs": [p.name for p in s.inputs], "outputs": [o.name for o in s.outputs],
                    "attrs": [a.name for a in s.attrs], "differentiable": s.differentiable}
                   for c in cats.values() for s in c], sys.stdout, indent=1)
        sys.stdout.write("\n")
        return EXIT_OK
    for cat, specs in cats.items():
        print(f"{cat} ({len(specs)})")
        for s in specs:
            print(f"  {s.name:<34} {s.summary}")
    print(f"{len(registry)} blocks")
    return EXIT_OK


def blocks_markdown(registry) -> str:
    """The block reference (docs/blocks.md), generated from the block declarations."""
    cats = registry.categories()
    out = ["# Block reference", "",
           "Generated by `blockflow blocks --markdown --output docs/blocks.md` from the block",
           "declarations; do not edit by hand. Every block also has the implicit **scope** port (the",
           "page's scope, never wired). Ports are TensorFlow's; dtype `T` means all `T` ports share one dtype.",
           "A block's gradient rule gives, for each input `x`, `dx`: the gradient it sends back to `x`",
           "from `g`, the gradient arriving at its output.",
           "", f"{len(registry)} blocks in {len(cats)} categories.", ""]
    for cat, specs in cats.items():
        out.append(f"- **{cat}**: " + ", ".join(f"[{s.name}](#{s.name.lower()})" for s in specs))
    out.append("")
    for cat, specs in cats.items():
        out += [f"## {cat}", ""]
        for s in specs:
            out += [f"### {s.name}", ""]
            if s.aliases:
                out += [f"Also known as: {', '.join(s.aliases)}.", ""]
            out += [s.doc.strip(), ""]
            grad = {"vjp": "differentiable", "stop": "stops the gradient (nothing flows back)",
                    "none": "not differentiable", "prevent": "differentiating through it is an error"}[s.gradient]
            out += [f"Gradient: {grad}.", ""]
            if s.grad_rule:  # fenced: keeps g[i], ⊙ and the like out of Markdown's hands
                out += ["```text", s.grad_rule, "```", ""]
            if s.inputs:
                out += ["| input | dtype | notes |", "|---|---|---|"]
                for p in s.inputs:
                    notes = []
                    if p.variadic:
                        notes.append(f"variadic: {p.port(0)}, {p.port(1)}, ... (at least {p.min_count})")
                    if p.static:
                        notes.append("known before running (inline value or Const)")
                    if p.optional:
                        notes.append(f"optional, default {p.default!r}")
                    if p.doc:
                        notes.append(p.doc)
                    out.append(f"| `{p.name}` | {p.dtype} | {'; '.join(notes)} |")
                out.append("")
            if s.outputs:
                out += ["| output | notes |", "|---|---|"]
                for o in s.outputs:
                    notes = [o.doc] if o.doc else []
                    if not o.differentiable:
                        notes.append("not differentiable")
                    out.append(f"| `{o.name}` | {'; '.join(notes)} |")
                out.append("")
            if s.attrs:
                out += ["| attr | kind | default | notes |", "|---|---|---|---|"]
                for a in s.attrs:
                    notes = []
                    if a.choices:
                        notes.append("one of " + ", ".join(f"`{c}`" for c in a.choices))
                    if a.min is not None:
                        notes.append(f">= {a.min}")
                    if a.max is not None:
                        notes.append(f"<= {a.max}")
                    if a.doc:
                        notes.append(a.doc)
                    default = "required" if a.required else f"`{json.dumps(_jsonable(a.default))}`"
                    out.append(f"| `{a.name}` | {a.kind} | {default} | {'; '.join(notes)} |")
                out.append("")
    return "\n".join(out).rstrip() + "\n"


def _jsonable(v):
    if isinstance(v, tuple):
        return list(v)
    if isinstance(v, np.ndarray):
        return v.tolist()
    return v


# ------------------------------------------------------------------------------------ parser


def build_parser() -> argparse.ArgumentParser:
    codes = "\n".join(f"  {k}  {v}" for k, v in EXIT_CODES.items())
    parser = argparse.ArgumentParser(
        prog="blockflow", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Draw a differentiable model as a block diagram, run it, see its gradients.",
        epilog=f"exit codes:\n{codes}")
    parser.add_argument("--version", action="version", version=f"blockflow {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

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
    p.add_argument("--json", action="store_true", help="machine-readable output of values and gradients")
    p.add_argument("--all-values", action="store_true",
                   help=f"with --json, every value of arrays of more than {JSON_FULL_VALUES:,} values "
                        f"(otherwise summarised)")
    _budget_option(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("check", help="compile the project and list its diagnostics")
    p.add_argument("project")
    p.add_argument("--page", help="check only this page (default: all pages)")
    p.add_argument("--json", action="store_true", help="machine-readable diagnostics and wire types")
    p.add_argument("-v", "--verbose", action="store_true", help="also print every wire's shape and dtype")
    p.add_argument("--grad", nargs="?", const="", default=None, metavar="NODE[:PORT]",
                   help="also check each page's gradients of its loss (or of NODE) against central "
                        "differences, in float64; exit 1 when a check fails")
    _budget_option(p)
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("train", help="train a page's Variables and report the loss (and save them)")
    p.add_argument("project")
    p.add_argument("--page", help="the page to train (default: the first)")
    p.add_argument("--steps", type=_whole_number("MAX_STEPS"), help="number of training steps (default: the project's recommendation)")
    p.add_argument("--optimizer", choices=("sgd", "momentum", "adam", "rmsprop", "adagrad"),
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
    p.add_argument("--eval-every", type=int, default=0, metavar="K",
                   help="also evaluate on the datasets' test part every K steps and at the end")
    p.add_argument("--mode", default="auto", choices=("auto", "optimizer", "graph"),
                   help="graph: one run per step of the page's own Gradients/Apply* blocks (auto: when it has any)")
    p.add_argument("--save", metavar="OUT", help="write the project with the trained values here (may be PROJECT)")
    p.add_argument("--json", action="store_true", help="machine-readable history")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    _budget_option(p)
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("blocks", help="the block catalogue")
    p.add_argument("--markdown", action="store_true", help="the block reference as Markdown (docs/blocks.md)")
    p.add_argument("--output", "-o", help="write the Markdown here instead of standard output")
    p.add_argument("--json", action="store_true", help="machine-readable catalogue")
    p.set_defaults(func=cmd_blocks)
    return parser


def _budget_option(p) -> None:
    p.add_argument("--memory-budget", metavar="SIZE", type=_size_arg,
                   help="the most memory one run's tensors may take at once, e.g. 2G, 512M or 25%% (of "
                        "physical memory); default: $BLOCKFLOW_MEMORY_BUDGET, else half of the memory "
                        "this process may use (docs/limits.md)")


def _whole_number(limit: str):
    """An argparse type: a whole number from 0 to training's ``limit`` (the same ranges as a
    project's recommended settings; looked up only when the option is given)."""
    def parse(text: str) -> int:
        from blockflow.run import training

        top = getattr(training, limit)
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


def _set_budget(args) -> None:
    """--memory-budget for every run of this command; a bad $BLOCKFLOW_MEMORY_BUDGET is a usage error."""
    from blockflow.budget import ENV_VAR, memory_budget, set_memory_budget

    set_memory_budget(getattr(args, "memory_budget", None))
    try:
        memory_budget()
    except ValueError as exc:
        raise CliError(str(exc) if ENV_VAR in str(exc) else f"{ENV_VAR}: {exc}", EXIT_USAGE) from None


def main(argv=None) -> int:
    """The command line; everything it prints has control characters escaped (textsafe)."""
    with escaped_output():
        return _main(argv)


def _main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_OK
    try:
        _set_budget(args)
        return args.func(args)
    except CliError as exc:
        _report(args, exc)
        return exc.code
    except ProjectFileError as exc:
        _report(args, exc)
        return EXIT_FILE
    except ProjectError as exc:  # a page or node named on the command line does not exist
        _report(args, exc)
        return EXIT_USAGE
    except CompileError as exc:
        _report(args, exc)
        return EXIT_DIAGNOSTICS
    except RunError as exc:
        _report(args, exc)
        return EXIT_RUN
    except BlockflowError as exc:
        _report(args, exc)
        return EXIT_RUN if args.command == "run" else EXIT_DIAGNOSTICS
    except BrokenPipeError:   # the reader went away (| head): stop quietly, as other tools do
        _quiet_stdout()
        return EXIT_OK
    except OSError as exc:
        _report(args, exc)
        return EXIT_FILE
    except KeyboardInterrupt:
        print("blockflow: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # a bug in blockflow or in a block package: say so plainly
        if getattr(args, "debug", False):
            traceback.print_exception(exc)
        print(f"blockflow: internal error ({type(exc).__name__}: {for_terminal(str(exc))}); run with --debug for the "
              f"traceback and please report it", file=sys.stderr)
        return EXIT_INTERNAL
    finally:
        from blockflow.budget import set_memory_budget

        set_memory_budget(None)   # the option was for this command only (main may be called again)


def _quiet_stdout() -> None:
    """Point standard output at the null device, so the interpreter's last flush of text that
    can no longer be delivered does not print an error of its own."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _report(args, exc):
    if getattr(args, "debug", False):
        traceback.print_exception(exc)
    print(f"blockflow: error: {error_text(exc)}", file=sys.stderr)


def error_text(exc) -> str:
    """An error as printed after ``blockflow: error:``: one line, so that text from a file cannot
    start a line of its own (its newlines are escaped with its other control characters); a
    diagram's errors are a head and one indented line per diagnostic."""
    if isinstance(exc, CompileError):
        head = str(exc).split("\n", 1)[0]
        return "\n  ".join([head, *(for_terminal(str(d)) for d in exc.diagnostics)])
    return for_terminal(str(exc))
