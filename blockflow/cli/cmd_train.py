"""``blockflow train``: train a page's Variables with an optimizer (or the page's own update
blocks), report the loss and metrics, and optionally save the trained project."""
from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass

from blockflow.cli import inputs
from blockflow.cli.exits import EXIT_DIAGNOSTICS, EXIT_OK, EXIT_USAGE, CliError
from blockflow.cli.output import Progress, print_diagnostics
from blockflow.errors import BlockflowError, MemoryLimitError, ProjectError, RunError
from blockflow.textsafe import for_terminal

# The option that replaces each recommended setting (the optimizers' other settings: --set NAME=V).
_SETTING_OPTIONS = {"steps": "--steps", "seed": "--seed", "batch_size": "--batch-size",
                    "optimizer": "--optimizer", "lr": "--lr"}


@dataclass
class _Settings:
    """What this training uses: the options given, else the project's recommendation."""

    optimizer: str
    steps: int
    seed: int
    batch_size: int | None
    recommended: dict


def cmd_train(args) -> int:
    from blockflow.run.training import TrainConfig, training_program

    if args.save is not None:     # before training: a long run must not end in "cannot save"
        inputs.check_output_path("--save", args.save)
    project = inputs.load(args.project)
    registry = inputs.registry()
    settings = _settings(args, project)
    try:
        program = training_program(project, args.page, registry, batch_size=settings.batch_size)
    except ValueError as exc:
        raise CliError(f"--batch-size: {exc}", EXIT_USAGE) from None
    if not program.ok:
        print_diagnostics(program.diagnostics, sys.stderr)
        raise CliError(f"{args.project}: the diagram has errors; nothing was trained", EXIT_DIAGNOSTICS)
    page = project.page(args.page)
    hyper = _hyper(args, settings)
    metrics = tuple(args.metric) if args.metric else tuple(page.metrics)
    config = TrainConfig(steps=settings.steps, optimizer=settings.optimizer, hyper=hyper,
                         seed=settings.seed, target=args.loss, metrics=metrics, eval_every=args.eval_every,
                         mode=args.mode)
    try:
        trainer = _trainer(args, project, program, config, registry)
    except MemoryLimitError:      # the training would not fit: a run failure (4), as in any run
        raise
    except (ValueError, ProjectError, RunError) as exc:   # settings the page cannot be trained with
        raise CliError(str(exc), EXIT_USAGE) from None
    for warning in trainer.warnings:
        print(f"blockflow: warning: {for_terminal(warning)}", file=sys.stderr)
    moves, new_dir = _plan_save(args.save, project, registry) if args.save else ([], None)
    bar = Progress(settings.steps, enabled=not args.quiet and not args.json)
    history = trainer.train(callback=lambda rec, _t: bar.update(rec))
    bar.close()
    evaluation = _final_evaluation(trainer, history, program)
    if args.save:
        _save_trained(args.save, project, page, trainer, moves, new_dir)
    if args.json:
        _print_json(args, page, settings, trainer, history, evaluation, moves)
    else:
        _print_summary(args, page, settings, trainer, history, evaluation, program, moves, new_dir)
    return EXIT_OK


def _trainer(args, project, program, config, registry):
    """blockflow's Trainer, or with --engine torch the exported PyTorch module's (same API)."""
    from blockflow.run.training import Trainer

    if getattr(args, "engine", "blockflow") != "torch":
        return Trainer(program, config, registry)
    from blockflow.optional import MissingPackage
    from blockflow.export.torch_engine import TorchTrainer
    from blockflow.export.errors import ExportError
    try:
        return TorchTrainer(program, config, registry, project=project, device=args.device)
    except ExportError as exc:
        for problem in exc.problems:
            print(f"  {for_terminal(problem)}", file=sys.stderr)
        raise CliError(f"{args.project}: --engine torch: {exc}; nothing was trained", EXIT_DIAGNOSTICS) from None
    except MissingPackage as exc:
        raise CliError(f"--engine torch: {exc}", EXIT_USAGE) from None


def _settings(args, project) -> _Settings:
    """The settings from the options, the rest from the project's recommendation for the page
    (whose bad entries are errors when this training would use them, see _check_recommended);
    the optimizer's own settings come later, from _hyper."""
    from blockflow.run.settings import recommended_settings

    problems = []
    recommended = recommended_settings(project, args.page, problems)
    optimizer = args.optimizer or recommended.get("optimizer", "adam")
    _check_recommended(args, problems, optimizer)
    steps = args.steps if args.steps is not None else recommended.get("steps")
    if steps is None:
        raise CliError("give --steps N (the project recommends no number of steps for this page)", EXIT_USAGE)
    seed = args.seed if args.seed is not None else recommended.get("seed", 0)
    batch_size = args.batch_size if args.batch_size is not None else recommended.get("batch_size")
    return _Settings(optimizer, steps, seed, batch_size, recommended)


def _hyper(args, settings: _Settings) -> dict:
    """The optimizer's settings: the project's recommended ones when it recommends this optimizer,
    then --lr and each --set NAME=VALUE."""
    recommended = settings.recommended
    hyper = dict(recommended.get("hyper", {})) if settings.optimizer == recommended.get("optimizer", "adam") else {}
    if args.lr is not None:
        hyper["lr"] = args.lr
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep:
            raise CliError(f"--set {item!r}: give NAME=VALUE", EXIT_USAGE)
        try:
            hyper[key] = json.loads(value)
        # not JSON, an integer of more digits than Python converts (4300), lists nested past
        # the decoder's recursion limit
        except (ValueError, RecursionError):
            raise CliError(f"--set {inputs.shortened(item)!r}: the value must be a number (of at most 4,300 "
                           f"digits) or true/false", EXIT_USAGE) from None
    return hyper


def _check_recommended(args, problems, optimizer: str) -> None:
    """The project's bad training settings for the page: an error (exit 2) for each one this
    training would use, a warning for the others (an unknown key, a setting of another optimizer,
    one an option replaces)."""
    from blockflow.run.settings import optimizer_defaults

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


def _final_evaluation(trainer, history, program):
    """The last evaluation on the datasets' test part; when none was asked for, one now if the
    page reads datasets (which hold out a test part), else None."""
    evaluation = history.evaluations[-1][1] if history.evaluations else None
    if evaluation is None and history.steps and program.reads_datasets:
        try:
            evaluation = trainer.evaluate("test")
        except BlockflowError:
            evaluation = None
    return evaluation


def _plan_save(out: str, project, registry):
    """Before training: decide what becomes of the data
    files the project reads when OUT is in another folder (blockflow.io.relocate: a path rewritten
    when the file is inside the new folder, else a copy next to it, never over another file)."""
    from blockflow.io.relocate import plan_move

    _refuse_data_file(out, project, registry)
    folder = os.path.dirname(os.path.abspath(out))    # check_output_path has vetted OUT itself
    if project.base_dir is None or os.path.realpath(project.base_dir) == os.path.realpath(folder):
        return [], folder
    return plan_move(project, registry, project.base_dir, folder), folder


def _refuse_data_file(out: str, project, registry) -> None:
    """OUT must not be a data file the project reads: the save would put the project in its
    place, and the saved project would read itself as its data (the data left only in the backup)."""
    from blockflow.datafiles import DataFiles, DataFileError
    from blockflow.io.relocate import data_paths

    if project.base_dir is None or not os.path.exists(out):
        return
    files = DataFiles(project.base_dir)
    for rel in data_paths(project, registry):
        try:
            source = files.resolve(rel)
        except DataFileError:     # missing or outside: the save says so, as for any data file
            continue
        if os.path.samefile(source, out):
            raise CliError(f"--save {out}: it is the data file '{rel}' the project reads; give another name "
                           f"(nothing was done)", EXIT_USAGE)


def _save_trained(out: str, project, page, trainer, moves, new_dir) -> None:
    from blockflow.io.project_io import save_project
    from blockflow.io.relocate import apply_move

    page.apply_state(trainer.state_updates())
    apply_move(project, moves, new_dir)     # the data first: the saved project never names a missing file
    for note in save_project(project, out).notes:    # e.g. the backup kept elsewhere
        print(f"blockflow: note: {for_terminal(note)}", file=sys.stderr)
    for m in moves:
        if m.action == "missing":
            print(f"blockflow: warning: {for_terminal(m.describe(new_dir))}", file=sys.stderr)


def _print_json(args, page, settings, trainer, history, evaluation, moves) -> None:
    optimizing = trainer.mode == "optimizer"
    json.dump({"project": str(args.project), "page": page.name, "mode": trainer.mode,
               "engine": getattr(trainer, "engine", "blockflow"),
               "optimizer": settings.optimizer if optimizing else None,
               "settings": trainer.hyper if optimizing else None,
               "steps": len(history.steps), "seconds": history.seconds, "seed": settings.seed,
               "loss": history.losses, "metrics": {m: history.metric(m) for m in trainer.metric_keys},
               "test": [{"step": k, **v} for k, v in history.evaluations],
               "final_test": evaluation,
               "saved": args.save,
               **({"data_files": [{"path": m.path, "action": m.action, "saved_as": m.new_path}
                                  for m in moves]} if args.save else {})},
              sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


def _print_summary(args, page, settings, trainer, history, evaluation, program, moves, new_dir) -> None:
    from blockflow.run.settings import OPTIMIZERS

    optimizer = settings.optimizer
    what = (f"{OPTIMIZERS[optimizer][0].replace('Apply', '')} ({optimizer}, "
            + ", ".join(f"{k} {v:g}" for k, v in trainer.hyper.items() if not isinstance(v, bool)) + ")"
            if trainer.mode == "optimizer" else "the page's own update blocks")
    rate = len(history.steps) / history.seconds if history.seconds > 0 else float("inf")
    engine = f" on PyTorch ({trainer.device})" if getattr(trainer, "engine", None) == "torch" else ""
    print(f"trained page '{page.name}' for {len(history.steps)} steps with {what}{engine}, "
          f"{rate:,.0f} steps/s")
    final = history.steps[-1] if history.steps else None
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
