"""``blockflow export torch --train``: the module, plus ``train.py`` beside it that trains the page
with the project's recommended training settings, on one process or under torchrun (docs/export.md,
"Training").

The settings are resolved exactly as ``blockflow train`` resolves them (a run.training.Trainer is
built, and its mode, optimizer settings and starting values are the script's): optimizer mode
applies the chosen optimizer's Apply* rule (torch_ops_state.py's helper, TF's formulas) to every
Parameter after ``loss.backward()``; graph mode runs forward, where the page's own Gradients and
Apply* blocks update it. The model's ``.pt`` holds the values the Trainer starts from, and
``NAME_data.pt`` the dataset block's rows and the saved feeds (torch_data.py).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from blockflow.errors import BlockflowError
from blockflow.export.files import check_side_files, values_path, write_side_file, write_torch_files
from blockflow.optional import need
from blockflow.export.names import comment_text, literal
from blockflow.export.torch_data import PageData, page_data
from blockflow.export.torch_module import ExportError, TorchExport, export_torch
from blockflow.export.torch_ops_state import rule
from blockflow.export.torch_train_script import TEMPLATE
from blockflow.registry import Registry, default_registry
from blockflow.run.settings import OPTIMIZERS, recommended_settings
from blockflow.run.training import TrainConfig, Trainer, training_program

__all__ = ["TrainingExport", "export_training", "write_training_files", "DEFAULT_STEPS", "data_path",
           "training_setup", "places"]

#: steps train.py takes when the project recommends none (its --steps replaces it)
DEFAULT_STEPS = 100


@dataclass
class TrainingExport:
    """The module (its state: the Trainer's starting values), the data and train.py's text."""

    model: TorchExport
    data: PageData
    script: str
    settings: dict


def data_path(model_path) -> Path:
    p = Path(model_path)
    return p.with_name(f"{p.stem}_data.pt")


def training_setup(project, page=None, registry: Registry | None = None, config: TrainConfig | None = None,
                   batch_size=None):
    """(program, Trainer, settings) as ``blockflow train`` makes them: ``config`` (default: the
    project's recommended settings, DEFAULT_STEPS steps when it recommends none)."""
    registry = registry or default_registry()
    rec = recommended_settings(project, page)
    if batch_size is None:
        batch_size = rec.get("batch_size")
    try:
        program = training_program(project, page, registry, batch_size=batch_size)
    except ValueError as exc:
        raise ExportError(f"batch size: {exc}") from None
    if config is None:
        optimizer = rec.get("optimizer", "adam")
        config = TrainConfig(steps=rec.get("steps", DEFAULT_STEPS), optimizer=optimizer,
                             hyper=dict(rec.get("hyper", {})), seed=rec.get("seed", 0))
    if not program.ok:
        errors = [str(d) for d in program.errors]
        raise ExportError(f"page '{program.page_name}' does not compile ({len(errors)} error(s))", errors)
    if program.loss is None and config.target is None:
        raise ExportError(f"page '{program.page_name}' marks no loss: training needs one")
    try:
        trainer = Trainer(program, config, registry)
    except (BlockflowError, ValueError) as exc:
        raise ExportError(f"page '{program.page_name}' cannot be trained: {exc}") from None
    return program, trainer


def places(export: TorchExport) -> dict:
    """state_dict key -> (Variable flat id, "value" or the slot key): where each value of the
    module belongs in blockflow (TorchExport.variables, with a Variable's own value named)."""
    return {key: (where, "value") if isinstance(where, str) else tuple(where)
            for key, where in export.variables.items()}


def start_state(export: TorchExport, trainer: Trainer) -> dict:
    """The module's state with the Variables at the Trainer's starting values (with a seed, the
    random initial values it draws; else the project's)."""
    state = dict(export.state)
    for key, (node, what) in places(export).items():
        if what == "value" and node in trainer.values:
            state[key] = np.asarray(trainer.values[node])
    return state


def export_training(project, page=None, registry: Registry | None = None, model_file: str = "model.py",
                    config: TrainConfig | None = None) -> TrainingExport:
    """The page's module and its train.py (the module file's name is ``model_file``)."""
    registry = registry or default_registry()
    program, trainer = training_setup(project, page, registry, config)
    loss = trainer.loss_key
    export = export_torch(project, program.page_name, outputs=[loss], registry=registry, program=program)
    export.state = start_state(export, trainer)
    data = page_data(program, export)
    settings = {"mode": trainer.mode, "optimizer": trainer.config.optimizer if trainer.mode == "optimizer" else None,
                "steps": trainer.config.steps, "seed": trainer.config.seed,
                "hyper": dict(trainer.hyper) if trainer.mode == "optimizer" else {}}
    script = _script(export, data, settings, trainer, Path(model_file).name, registry)
    return TrainingExport(export, data, script, settings)


def _script(export: TorchExport, data: PageData, settings: dict, trainer: Trainer, model_file: str,
            registry: Registry) -> str:
    if settings["mode"] == "optimizer":
        block = OPTIMIZERS[settings["optimizer"]][0]
        name, source, inputs, slot_names, flags = rule(block)
        spec = registry[block]
        decls = {d.name: d for d in spec.inputs}
        slots = [(s, decls[s].slot, decls[s].slot_init) for s in slot_names]
        defaults = {a.name: a.default for a in spec.attrs}
        flag_values = [bool(settings["hyper"].get(f, defaults.get(f, False))) for f in flags]
    else:
        name, source, inputs, slots, flag_values = "None", "", (), [], []
    fills = {
        "__PAGE_COMMENT__": comment_text(export.page, 60).replace('"', "'"),
        "__MODEL_FILE__": literal(model_file),
        "__DATA_FILE__": literal(data_path(model_file).name),
        "__SETTINGS__": literal(settings),
        "__ROW_ARGS__": literal(tuple(data.rows)),
        "__FIXED_ARGS__": literal(tuple(data.fixed)),
        "__BATCHING__": literal(data.batching),
        "__SOURCE__": literal(data.source),
        "__ROW_PORTS__": literal(tuple(data.ports[a] for a in data.rows)),
        "__PROJECT_FOLDER__": literal(data.folder),
        "__RULE_INPUTS__": literal(tuple(inputs)),
        "__RULE_SLOTS__": literal(tuple(tuple(s) for s in slots)),
        "__RULE_FLAGS__": literal(tuple(flag_values)),
        "__ARGS__": literal(tuple(arg for arg, _node, _t in export.inputs)),
        "__RULE_SOURCE__": source.strip("\n"),
        "__RULE_NAME__": name,
        "__UNUSED__": literal(bool(trainer.warnings)),
    }
    # one pass: a filled-in value (a page name, a dataset's path) is never scanned again for a
    # slot, so one spelled like a slot cannot move another value somewhere else (a docstring)
    slots = re.compile("|".join(re.escape(key) for key in fills))
    text = slots.sub(lambda m: fills[m.group(0)], TEMPLATE)
    compile(text, "<train.py>", "exec")
    return text


#: the modules train.py imports (torch_train_script.py): a module file of that name beside it
#: would be imported in their place
_SCRIPT_IMPORTS = frozenset({"argparse", "csv", "importlib", "math", "os", "sys", "time", "pathlib", "numpy",
                             "torch", "train"})


def write_training_files(training: TrainingExport, path) -> list[Path]:
    """NAME.py, NAME.pt, NAME_data.pt (when the page has data to feed) and train.py beside them;
    the paths written."""
    path = Path(path)
    if path.suffix != ".py" or path.stem in _SCRIPT_IMPORTS:
        raise ExportError(f"{path.name}: train.py imports the module beside it by its file name, which must "
                          f"end in .py and not be one of the modules train.py imports ({', '.join(sorted(_SCRIPT_IMPORTS))})")
    rows = {} if training.data.source is not None else training.data.rows   # train.py reads the file
    tensors = {**rows, **training.data.fixed}
    script = path.with_name("train.py")
    beside = [values_path(path)] if training.model.state else []
    beside += [data_path(path)] if tensors else []
    check_side_files(path, beside + [script])   # all before any is written: a refusal leaves nothing half done
    written = write_torch_files(training.model, path)
    if tensors:
        torch = need("torch")
        state = {k: torch.from_numpy(np.array(v, copy=True)) for k, v in tensors.items()}
        target = data_path(path)
        write_side_file(target, lambda fh: torch.save(state, fh))
        written.append(target)
    write_side_file(script, lambda fh: fh.write(training.script.encode("utf-8")))
    written.append(script)
    return written
