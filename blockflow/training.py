"""Training a page: many runs, each a step that changes the Variables.

Two ways, as in TensorFlow 1:

- **optimizer** mode (the editor's Train panel, ``blockflow train``): each step runs forward and
  backward to the loss for the trainable Variables, then updates each with the chosen optimizer.
  The update is the optimizer's Apply* block itself (ApplyGradientDescent, ApplyMomentum,
  ApplyAdam, ApplyRMSProp, ApplyAdagrad): the same rule whether drawn on the page or chosen here.
- **graph** mode: the page has its own ``Gradients`` and Apply*/Assign blocks (as enuSpace's
  tutorials draw them): each step is one run that commits the state they update.

A step ``k`` is the runtime's step ``k``: dataset blocks give batch ``k``, random blocks draw
their ``k``-th numbers. With ``seed`` S (not 0) every random stream and batch order is mixed with
S, and Variables without a stored value start from an initial draw mixed with S: a training run is
a deterministic function of the page and S.

Nothing here touches the project: :meth:`Trainer.state_updates` gives the new Variable values,
for ``Page.apply_state`` (the CLI) or an undoable Document edit (the editor).
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from .compiler import Program
from .project import Page
from .errors import RunError
from .registry import Registry, default_registry
from .runtime import run

__all__ = ["OPTIMIZERS", "TrainConfig", "Trainer", "StepRecord", "TrainingHistory", "optimizer_defaults",
           "training_program", "recommended_settings", "SettingProblem", "MAX_STEPS",
           "MAX_BATCH_SIZE", "MAX_SEED", "MAX_SETTING"]

#: optimizer name -> (Apply* block, {hyperparameter: default}); the learning rate is "lr"
OPTIMIZERS: dict[str, tuple[str, dict]] = {
    "sgd": ("ApplyGradientDescent", {"lr": 0.01}),
    "momentum": ("ApplyMomentum", {"lr": 0.01, "momentum": 0.9, "use_nesterov": False}),
    "adam": ("ApplyAdam", {"lr": 0.001, "beta1": 0.9, "beta2": 0.999, "epsilon": 1e-7}),
    "rmsprop": ("ApplyRMSProp", {"lr": 0.001, "rho": 0.9, "momentum": 0.0, "epsilon": 1e-7}),
    "adagrad": ("ApplyAdagrad", {"lr": 0.01}),
}
#: the Apply* blocks' names for the learning rate and the gradient
_LR_NAMES = ("lr", "alpha")
_GRAD_NAMES = ("grad", "delta")


def optimizer_defaults(name: str) -> dict:
    if name not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {name!r} (choose from {', '.join(OPTIMIZERS)})")
    return dict(OPTIMIZERS[name][1])


@dataclass
class TrainConfig:
    """How to train. ``metrics``: other scalar outputs (``node`` or ``node:port``) to record each
    step, e.g. an accuracy; ``eval_every`` k > 0 also evaluates the loss and metrics on the
    datasets' test part every k steps (and after the last)."""

    steps: int = 100
    optimizer: str = "adam"
    hyper: dict = field(default_factory=dict)   # lr, momentum, beta1... (defaults: OPTIMIZERS)
    seed: int = 0
    target: str | None = None                   # the loss (default: the page's)
    metrics: tuple = ()
    eval_every: int = 0
    mode: str = "auto"                           # auto | optimizer | graph
    check_numerics: bool = True

    def validate(self) -> None:
        if not isinstance(self.steps, int) or self.steps < 0:
            raise ValueError(f"steps must be a whole number >= 0, got {self.steps!r}")
        if self.mode not in ("auto", "optimizer", "graph"):
            raise ValueError(f"mode must be auto, optimizer or graph, got {self.mode!r}")
        known = optimizer_defaults(self.optimizer)
        for k, v in self.hyper.items():
            if k not in known:
                raise ValueError(f"{self.optimizer} has no setting {k!r} (settings: {', '.join(known)})")
            if k != "use_nesterov" and not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise ValueError(f"{self.optimizer} {k} must be a number >= 0, got {v!r}")
        if self.eval_every < 0:
            raise ValueError("eval_every must be >= 0")


@dataclass
class StepRecord:
    step: int
    loss: float
    metrics: dict


@dataclass
class TrainingHistory:
    """What a training run recorded: per step the loss and metrics; evaluations on the test part."""

    steps: list = field(default_factory=list)         # StepRecord
    evaluations: list = field(default_factory=list)   # (step, {"loss": x, metric: y})
    stopped: bool = False
    seconds: float = 0.0

    @property
    def losses(self) -> list[float]:
        return [r.loss for r in self.steps]

    def metric(self, name: str) -> list[float]:
        return [r.metrics.get(name, math.nan) for r in self.steps]

    @property
    def final_loss(self) -> float | None:
        return self.steps[-1].loss if self.steps else None


class Trainer:
    """Trains the Variables of a compiled page. Keeps its own copy of the Variables' values and
    the optimizer's slots; the Program and the project are left as they were."""

    def __init__(self, program: Program, config: TrainConfig | None = None, registry: Registry | None = None,
                 feeds: dict | None = None):
        """``feeds``: values for Placeholders, the same every step (default: the page's saved
        feeds); batches that change per step come from dataset blocks."""
        self.program = program
        self.feeds = dict(feeds or {})
        self.config = config = config or TrainConfig()
        config.validate()
        program.raise_for_errors()
        self.registry = registry or default_registry()
        self.loss_key = self._target_key(config.target)
        self.metric_keys = [self._metric_key(m) for m in config.metrics]
        updating = [st for st in program.steps if st.refs]
        if config.mode == "auto":
            self.mode = "graph" if updating else "optimizer"
        else:
            self.mode = config.mode
        if self.mode == "graph" and not updating:
            raise RunError(f"page '{program.page_name}' has no block that updates a Variable (Apply*, Assign); "
                           f"train it with an optimizer instead")
        self.trainable = [st.node for st in program.steps if st.node in program.trainable]
        if self.mode == "optimizer" and not self.trainable:
            raise RunError(f"page '{program.page_name}' has no trainable Variable to train")
        self.warnings = self._check_reach() if self.mode == "optimizer" else []
        self.values = {st.node: self._start_value(st) for st in program.steps if st.role == "variable"}
        self.slot_values = dict(program.slot_values)
        self.step_index = 0
        self._apply = None
        if self.mode == "optimizer":
            name, defaults = OPTIMIZERS[config.optimizer]
            self._apply = self.registry[name]
            self.hyper = {**defaults, **config.hyper}
            self._slots = {v: self._initial_slots(self.values[v]) for v in self.trainable}

    # ------------------------------------------------------------------ setup
    def _check_reach(self) -> list[str]:
        """Trainable Variables no gradient of the loss reaches (they would never change), and why."""
        paths = self.program.gradient_paths(self.loss_key, wrt=self.trainable)
        out = []
        for v in self.trainable:
            if v in paths.sources:
                continue
            cutters = paths.cut_sources.get(v)
            why = f"cut by {', '.join(cutters)}" if cutters else "it does not lead to the loss"
            out.append(f"no gradient of the loss reaches {v} ({why}): training will not change it")
        return out

    def _target_key(self, target) -> str:
        p = self.program
        slot = p.slots[p.resolve_target(target)]
        if not slot.type.is_float or slot.type.size != 1:
            raise RunError(f"the loss {p.full_name(slot.node)}:{slot.port} is {slot.type}; training needs "
                           f"a float scalar")
        return f"{slot.node}:{slot.port}"

    def _metric_key(self, name) -> str:
        p = self.program
        slot = p.slots[p.resolve_target(name)]
        if slot.type.size != 1:
            raise RunError(f"the metric {p.full_name(slot.node)}:{slot.port} is {slot.type}; metrics must be "
                           f"scalars")
        return f"{slot.node}:{slot.port}"

    def _start_value(self, st) -> np.ndarray:
        p = self.program
        node = st.node
        stored = p.variable_values.get(node)
        seed = self.config.seed
        if seed and st.attrs.get("initializer") not in (None, "zeros", "ones", "value") \
                and node not in p.stored_variables:
            attrs = dict(st.attrs, seed=_mix(int(st.attrs.get("seed", 0)), seed))
            return np.array(st.spec.initial(**attrs))
        return np.array(stored, copy=True)

    def _initial_slots(self, var: np.ndarray) -> dict:
        """The optimizer's slots for one Variable, started as its Apply* block declares."""
        spec = self._apply
        scalars = self._scalar_inputs(var)
        slots = {}
        for decl in spec.inputs[1:]:
            if not decl.ref:
                continue
            init = decl.slot_init
            value = scalars[init] if isinstance(init, str) else init
            if decl.slot == "like":
                slots[decl.name] = np.full_like(var, value)
            else:
                slots[decl.name] = np.asarray(value, dtype=var.dtype)
        return slots

    def _scalar_inputs(self, var) -> dict:
        out = {}
        for decl in self._apply.inputs:
            if decl.ref or decl.name in _GRAD_NAMES:
                continue
            key = "lr" if decl.name in _LR_NAMES else decl.name
            out[decl.name] = np.asarray(self.hyper[key], dtype=var.dtype)
        return out

    # ------------------------------------------------------------------ stepping
    def step(self) -> StepRecord:
        """One training step; raises the runtime's errors (NaN, a failing block) unchanged."""
        k = self.step_index
        if self.mode == "graph":
            record = self._graph_step(k)
        else:
            record = self._optimizer_step(k)
        self.step_index += 1
        return record

    def _optimizer_step(self, k: int) -> StepRecord:
        p, cfg = self.program, self.config
        r = run(p, self.feeds, target=self.loss_key, wrt=self.trainable, fetch=self.metric_keys, variables=self.values,
                record=False, commit=False, step=k, run_seed=cfg.seed, check_numerics=cfg.check_numerics)
        loss = float(r.value(*self.loss_key.split(":")))
        new_values = {}
        for v in self.trainable:
            grad = r.variable_grads.get(v)
            if grad is None:
                continue
            new_values[v] = self._update(v, grad)
        self.values.update(new_values)
        return StepRecord(k, loss, {m: float(r.value(*m.split(":"))) for m in self.metric_keys})

    def _update(self, name: str, grad: np.ndarray) -> np.ndarray:
        spec = self._apply
        var = self.values[name]
        slots = self._slots[name]
        scalars = self._scalar_inputs(var)
        args = []
        for decl in spec.inputs:
            if decl.name == spec.inputs[0].name:
                args.append(var)
            elif decl.ref:
                args.append(slots[decl.name])
            elif decl.name in _GRAD_NAMES:
                args.append(np.asarray(grad, dtype=var.dtype))
            else:
                args.append(scalars[decl.name])
        attrs = {a.name: self.hyper.get(a.name, a.default) for a in spec.attrs}
        _out, updates = spec.forward(*args, **attrs)
        for key, value in updates.items():
            if key != spec.inputs[0].name:
                slots[key] = value
        return np.asarray(updates[spec.inputs[0].name])

    def _graph_step(self, k: int) -> StepRecord:
        p, cfg = self.program, self.config
        r = run(p, self.feeds, fetch=[self.loss_key, *self.metric_keys], variables=self.values, record=False,
                commit=False, step=k, run_seed=cfg.seed, check_numerics=cfg.check_numerics)
        for node, changes in r.state_updates.items():
            for key, value in changes.items():
                if key == "value":
                    self.values[node] = np.asarray(value)
                else:
                    self.slot_values[(node, key)] = np.asarray(value)
        self._sync_slots()
        return StepRecord(k, float(r.value(*self.loss_key.split(":"))),
                          {m: float(r.value(*m.split(":"))) for m in self.metric_keys})

    def _sync_slots(self) -> None:
        # graph mode: in-graph optimizers read their slots from the program's slot state
        self.program.slot_values.update(self.slot_values)

    def evaluate(self, split: str = "test") -> dict:
        """The loss and metrics on ``split`` with the current values (no update)."""
        r = run(self.program, self.feeds, fetch=[self.loss_key, *self.metric_keys], variables=self.values, record=False,
                commit=False, step=0, split=split, run_seed=self.config.seed,
                check_numerics=self.config.check_numerics)
        out = {"loss": float(r.value(*self.loss_key.split(":")))}
        out.update({m: float(r.value(*m.split(":"))) for m in self.metric_keys})
        return out

    def train(self, steps: int | None = None, callback=None, should_stop=None, on_evaluate=None) -> TrainingHistory:
        """Run ``steps`` steps (default: the config's). ``callback(record, trainer)`` after each
        step; ``should_stop()`` checked before each step (a Stop button); ``on_evaluate(step,
        values)`` after each test evaluation."""
        steps = self.config.steps if steps is None else steps
        history = TrainingHistory()
        every = self.config.eval_every
        t0 = time.perf_counter()
        saved_slots = dict(self.program.slot_values)
        try:
            for i in range(steps):
                if should_stop is not None and should_stop():
                    history.stopped = True
                    break
                record = self.step()
                history.steps.append(record)
                if every and ((i + 1) % every == 0 or i + 1 == steps):
                    history.evaluations.append((record.step, self.evaluate("test")))
                    if on_evaluate is not None:
                        on_evaluate(*history.evaluations[-1])
                if callback is not None:
                    callback(record, self)
        finally:
            if self.mode == "graph":   # the program's own state is left as it was
                self.program.slot_values.clear()
                self.program.slot_values.update(saved_slots)
            history.seconds = time.perf_counter() - t0
        return history

    # ------------------------------------------------------------------ results
    def state_updates(self) -> dict:
        """``{Variable node: {"value": array, slot key: array}}`` for Page.apply_state."""
        out: dict = {}
        for node, value in self.values.items():
            out.setdefault(node, {})["value"] = np.array(value)
        if self.mode == "graph":
            for (node, key), value in self.slot_values.items():
                out.setdefault(node, {})[key] = np.array(value)
        return out


#: The largest values a project may recommend (the Train panel's ranges): past them, or ill-typed,
#: a recommendation is a problem reported with its place and left out.
MAX_STEPS = 10_000_000
MAX_BATCH_SIZE = 10_000_000
MAX_SEED = 2 ** 31 - 1
MAX_SETTING = 1e6      # the learning rate and the optimizers' other number settings


class SettingProblem(NamedTuple):
    """A recommended training setting that was left out: ``place`` is its JSON path in the file
    (``metadata.training.main.steps``), ``key`` the setting's name (None for the whole entry)."""

    place: str
    key: str | None
    message: str

    def __str__(self):
        return f"{self.place}: {self.message}"


def _setting_place(page: str, key: str | None = None) -> str:
    """The JSON path of a page's recommendation: ``metadata.training.main.steps``, with names that
    are not plain identifiers quoted (``metadata.training["my page"]``)."""
    def part(name):
        return f".{name}" if name.isidentifier() else f"[{json.dumps(name)}]"
    return "metadata.training" + part(page) + (part(key) if key is not None else "")


def _whole(v, lo: int, hi: int, what: str = "a whole number") -> str | None:
    """Why ``v`` is not a whole number from ``lo`` to ``hi`` (None when it is)."""
    if isinstance(v, bool) or not isinstance(v, int):
        return f"must be {what} from {lo:,} to {hi:,}, found {_shown(v)}"
    if not lo <= v <= hi:
        return f"{_shown(v)} is out of range: {what} from {lo:,} to {hi:,}"
    return None


def _shown(v) -> str:
    """A value from the file, short and on one line (JSON escapes its control characters)."""
    if isinstance(v, int) and not isinstance(v, bool):
        digits = str(abs(v))
        text = f"{v:,}" if len(digits) <= 30 else f"{'-' if v < 0 else ''}a {len(digits)}-digit number"
    elif isinstance(v, (bool, float, str, type(None))):
        text = json.dumps(v, allow_nan=True)
    else:
        text = f"a{'n' if type(v).__name__[0] in 'aeiou' else ''} {type(v).__name__}"
    return text if len(text) <= 40 else text[:37] + "..."


def recommended_settings(project, page: str | None = None, problems: list | None = None) -> dict:
    """The training settings a project recommends for a page (a name, None for the first page, or
    the Page): ``metadata["training"][page]``, a
    JSON object with any of ``optimizer``, ``steps``, ``batch_size``, ``seed``, ``lr`` and the
    optimizers' other settings (``momentum``, ``beta1``...); null is no recommendation (for
    ``batch_size``: as the dataset blocks say). The file is data: an entry that is ill-typed or
    out of range (see MAX_STEPS...) is left out (the caller's own default applies),
    and when ``problems`` is a list, a :class:`SettingProblem` is appended to it for each such
    entry and each unknown key."""
    # A Page itself is taken as it is (the editor asks for every page: looking each name up
    # again would scan the page list once per page).
    name = page.name if isinstance(page, Page) else project.page(page).name
    report = problems.append if problems is not None else (lambda _item: None)
    table = project.metadata.get("training") if isinstance(project.metadata, dict) else None
    if table is not None and not isinstance(table, dict):
        report(SettingProblem("metadata.training", None,
                              f"must be an object of page names to settings, found {_shown(table)}"))
        return {}
    entry = table.get(name) if table is not None else None
    if entry is None:
        return {}
    if not isinstance(entry, dict):
        report(SettingProblem(_setting_place(name), None, f"must be an object of settings, found {_shown(entry)}"))
        return {}
    out: dict = {}
    optimizer = entry.get("optimizer")
    if optimizer is not None:
        if isinstance(optimizer, str) and optimizer in OPTIMIZERS:
            out["optimizer"] = optimizer
        else:
            report(SettingProblem(_setting_place(name, "optimizer"), "optimizer",
                                  f"unknown optimizer {_shown(optimizer)} (choose from {', '.join(OPTIMIZERS)})"))
    for key, hi in (("steps", MAX_STEPS), ("seed", MAX_SEED), ("batch_size", MAX_BATCH_SIZE)):
        if entry.get(key) is None:    # absent or null: no recommendation
            if key == "batch_size" and key in entry:
                out[key] = None       # null batch size: as the dataset blocks say
            continue
        why = _whole(entry[key], 0, hi, "null or a whole number" if key == "batch_size" else "a whole number")
        if why is None:
            out[key] = entry[key]
        else:
            report(SettingProblem(_setting_place(name, key), key, why))
    numbers = {k: d for opt in OPTIMIZERS.values() for k, d in opt[1].items()}
    hyper = {}
    chosen = optimizer_defaults(out.get("optimizer", "adam"))
    for key, v in entry.items():
        if key in ("optimizer", "steps", "seed", "batch_size") or v is None:
            continue
        if key not in numbers:
            report(SettingProblem(_setting_place(name, key), key,
                                  f"unknown setting (settings: optimizer, steps, batch_size, seed, "
                                  f"{', '.join(numbers)})"))
            continue
        if isinstance(numbers[key], bool):
            ok = isinstance(v, bool)
            why = f"must be true or false, found {_shown(v)}"
        else:
            # A comparison, not math.isfinite: that raises for an int too big for a float.
            ok = isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= MAX_SETTING
            why = f"must be a number from 0 to {MAX_SETTING:g}, found {_shown(v)}"
        if not ok:
            report(SettingProblem(_setting_place(name, key), key, why))
        elif key in chosen:
            hyper[key] = v if isinstance(v, bool) else float(v)
    if hyper:
        out["hyper"] = hyper
    return out


def training_program(project, page: str | None = None, registry: Registry | None = None, *,
                     batch_size: int | None = None) -> Program:
    """Compile ``page`` of ``project`` for training; ``batch_size`` (when given) replaces the batch
    size of its dataset blocks (the project is not changed)."""
    import copy

    from .compiler import compile_page, project_files

    registry = registry or default_registry()
    pg = project.page(page)
    if batch_size is not None:
        if not isinstance(batch_size, int) or batch_size < 0:
            raise ValueError(f"batch size must be a whole number >= 0 (0: the whole train part), got {batch_size!r}")
        pg = copy.copy(pg)
        nodes = {}
        for nid, node in pg.nodes.items():
            spec = registry.get(node.block)
            if spec is not None and spec.category == "data_ops" and "batch_size" in spec.attr_map:
                node = copy.copy(node)
                node.attrs = dict(node.attrs, batch_size=batch_size)
            nodes[nid] = node
        pg.nodes = nodes
    return compile_page(pg, registry, files=project_files(project))


def _mix(seed: int, run_seed: int) -> int:
    return (seed * 1_000_003 + run_seed * 7_919) % (2 ** 31)
