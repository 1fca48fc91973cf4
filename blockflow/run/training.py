"""Training a page: many runs, each a step that changes the Variables.

Two ways, as in TensorFlow 1:

- **optimizer** mode (the editor's Train panel, ``blockflow train``): each step runs forward and
  backward to the loss for the trainable Variables, then updates each with the chosen optimizer.
  The update is the optimizer's Apply* block itself (ApplyGradientDescent, ApplyMomentum,
  ApplyAdam, ApplyRMSProp, ApplyAdagrad): the same rule whether drawn on the page or chosen here.
  Blocks that update Variables no optimizer trains (a BatchNormalization layer's moving
  statistics, Assign on a Variable with ``trainable`` off) run too, and their updates are kept
  with each step.
- **graph** mode: the page has its own ``Gradients`` and Apply*/Assign blocks (as enuSpace's
  tutorials draw them): each step is one run that commits the state they update.

A step ``k`` is the runtime's step ``k``: dataset blocks give batch ``k``, random blocks draw
their ``k``-th numbers. With ``seed`` S (not 0) every random stream and batch order is mixed with
S, and Variables without a stored value start from an initial draw mixed with S: a training run is
a deterministic function of the page and S.

A step that makes a NaN or Inf stops the training and keeps none of its numbers: an optimizer's
update is checked where it is made (:class:`UpdateNumericsError` names the step, the Variable, the
Apply* block and its settings), and a later NaN/Inf says at which step and whether the updates
made the Variables diverge. Settings that do not fit the Variables' dtype are refused up front.

Nothing here touches the project: :meth:`Trainer.state_updates` gives the new Variable values,
for ``Page.apply_state`` (the CLI) or an undoable Document edit (the editor). The optimizers and
the settings a project recommends are in settings.py (re-exported here).
"""
from __future__ import annotations

import math
import numbers
import time
from collections.abc import Mapping
from contextvars import copy_context
from dataclasses import dataclass, field

import numpy as np

from blockflow.arrayout import array_stats
from blockflow.budget import ENV_VAR, format_size, memory_budget
from blockflow.compile.program import Program
from blockflow.errors import MemoryLimitError, NumericsError, RunError, UpdateNumericsError
from blockflow.project import port_text, split_port_text
from blockflow.registry import Registry, default_registry
from blockflow.run.numerics import all_finite, all_finite_many, ignoring_fp_errors
from blockflow.run.plan_failures import resolved
from blockflow.run.runtime import run
from blockflow.run.settings import DECAY_RATES, OPTIMIZERS, decay_rate_problem, optimizer_defaults

__all__ = ["TrainConfig", "Trainer", "StepRecord", "TrainingHistory", "training_program", "train_steps"]

#: the Apply* blocks' names for the learning rate and the gradient
_LR_NAMES = ("lr", "alpha")
_GRAD_NAMES = ("grad", "delta")
#: what an input of an Apply* block takes (_rule_args)
_VAR, _SLOT, _GRAD, _SETTING = "var", "slot", "grad", "setting"


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
    memory_budget: int | str | None = None       # bytes or "2G" (default: blockflow.budget's)

    def validate(self) -> None:
        # each a whole number (a bool is not one): before, a seed of 1.5 failed deep inside the
        # random streams (TypeError), an eval_every of "x" at its comparison, steps=True was 1
        for name in ("steps", "seed", "eval_every"):
            v = getattr(self, name)
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Integral):
                raise ValueError(f"{name} must be a whole number, got {v!r}")
        if self.steps < 0:
            raise ValueError(f"steps must be a whole number >= 0, got {self.steps!r}")
        if self.mode not in ("auto", "optimizer", "graph"):
            raise ValueError(f"mode must be auto, optimizer or graph, got {self.mode!r}")
        known = optimizer_defaults(self.optimizer)
        if not isinstance(self.hyper, Mapping):
            raise ValueError(f"hyper must be a mapping of setting names to values, got {self.hyper!r:.80}")
        if isinstance(self.metrics, str):   # taken a character at a time, it named one-letter nodes
            raise ValueError(f"metrics must be a collection of names, not the string {self.metrics!r:.80}")
        for k, v in self.hyper.items():
            if k not in known:
                raise ValueError(f"{self.optimizer} has no setting {k!r} (settings: {', '.join(known)})")
            if isinstance(known[k], bool):
                if not isinstance(v, bool):
                    raise ValueError(f"{self.optimizer} {k} must be true or false, got {_shown(v)}")
            # numbers.Real: a numpy float32 (0.1) was refused as not "a number >= 0"
            elif isinstance(v, (bool, np.bool_)) or not (isinstance(v, numbers.Real) and _finite(v) and v >= 0):
                raise ValueError(f"{self.optimizer} {k} must be a number >= 0, got {_shown(v)}")
            elif decay_rate_problem(k, v):
                raise ValueError(f"{self.optimizer} {k} {decay_rate_problem(k, v)}")
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
        # Blocks that update only Variables no optimizer trains (a BatchNormalization's moving
        # statistics) run in either mode; updating a trainable one is training in the graph.
        updating = [st for st in program.steps
                    if any(var in program.trainable for _, (_key, var) in st.refs)]
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
        self.held_bytes = self._check_memory()
        self.values = {st.node: self._start_value(st) for st in program.steps if st.role == "variable"}
        self.slot_values = dict(program.slot_values)
        self.step_index = 0
        self._apply = None
        self._start_scale = self._scale()[0]
        if self.mode == "optimizer":
            name, defaults = OPTIMIZERS[config.optimizer]
            self._apply = self.registry[name]
            self.hyper = {**defaults, **{k: v.item() if isinstance(v, np.generic) else v   # plain numbers, as JSON
                                         for k, v in config.hyper.items()}}
            self._check_settings_fit()
            self._rule_args = _rule_args(self._apply)
            self._settings_by_dtype: tuple[dict, dict] = (dict(self.hyper), {})
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
        slot = p.slot(resolved(p, "the loss", target))
        if not slot.type.is_float or slot.type.size != 1:
            raise RunError(f"the loss {p.full_name(slot.node)}:{slot.port} is {slot.type}; training needs "
                           f"a float scalar")
        return port_text(slot.node, slot.port)

    def _metric_key(self, name) -> str:
        p = self.program
        slot = p.slot(resolved(p, "a metric", name))
        if slot.type.size != 1:
            raise RunError(f"the metric {p.full_name(slot.node)}:{slot.port} is {slot.type}; metrics must be "
                           f"scalars")
        return port_text(slot.node, slot.port)

    def _check_memory(self) -> int:
        """Refuse, before drawing anything, Variables and optimizer state over the memory budget;
        returns the bytes of the optimizer's slots (kept beside every run, counted against it)."""
        p = self.program
        try:
            budget, source = memory_budget(self.config.memory_budget)
        except ValueError as exc:
            raise RunError(f"memory budget: {exc}") from None
        sizes = {st.node: _nbytes(p.slot(st.outputs[0]).type) for st in p.steps if st.role == "variable"}
        n_slots = 0
        if self.mode == "optimizer":
            n_slots = sum(1 for d in self.registry[OPTIMIZERS[self.config.optimizer][0]].inputs[1:]
                          if d.ref and d.slot == "like")
        slots = n_slots * sum(sizes[v] for v in self.trainable)
        # an update makes the new value and slots of one Variable while the old ones are alive
        largest = max(sizes.values(), default=0)
        need = sum(sizes.values()) + slots + (1 + n_slots) * largest
        if need > budget:
            big = max(sizes, key=sizes.get)
            raise MemoryLimitError(f"page '{p.page_name}'",
                                   f"training needs {format_size(need)} before its first run: the Variables"
                                   f"{' and the optimizer state' if slots else ''} (the largest is "
                                   f"{p.full_name(big)} {p.output_type(big)}, {format_size(sizes[big])}) "
                                   f"and one update's new values; over the memory budget of "
                                   f"{format_size(budget)} ({source}); raise it with --memory-budget SIZE or "
                                   f"the {ENV_VAR} environment variable (docs/limits.md)", "")
        return slots

    def _start_value(self, st) -> np.ndarray:
        p = self.program
        node = st.node
        seed = self.config.seed
        values = p.variable_values
        if seed and st.attrs.get("initializer") not in (None, "zeros", "ones", "value") \
                and node not in p.stored_variables:
            return values.initial(node, seed=_mix(int(st.attrs.get("seed", 0)), seed))
        # the program keeps no copy of a first value drawn for training; a stored one is read-only
        # and shared (updates make new arrays)
        return values.initial(node) if values.is_pending(node) else values[node]

    def _check_settings_fit(self) -> None:
        """Each number setting must be a number of every trained Variable's dtype: the update
        computes in that dtype, where 1e308 is Inf (float32) and would make the Variable Inf, and
        a decay rate of 0.99999999 is 1 (Adam's 0/0 at the first step; an average that stays)."""
        for key, value in self.hyper.items():
            if isinstance(value, bool):
                continue
            for v in self.trainable:
                dtype = self.values[v].dtype
                largest = float(np.finfo(dtype).max) if dtype.kind == "f" else math.inf
                if abs(value) > largest:
                    raise ValueError(f"{self.config.optimizer} {key} {value:g} is too large for {dtype.name}, "
                                     f"the dtype of Variable {self.program.full_name(v)} (at most {largest:g})")
                if key in DECAY_RATES and dtype.kind == "f" and dtype.type(value) >= 1:
                    below = np.format_float_positional(np.nextafter(dtype.type(1), dtype.type(0)))
                    raise ValueError(f"{self.config.optimizer} {key} {value!r} is 1 in {dtype.name}, the dtype of "
                                     f"Variable {self.program.full_name(v)}: a decay rate must be below 1 (at most "
                                     f"{below})")

    def _scale(self) -> tuple[float, str]:
        """The largest magnitude among the trained Variables' finite values, and whose it is."""
        best, who = 0.0, ""
        for v in self.trainable:
            st = array_stats(self.values[v])     # chunk by chunk: a large Variable is not copied
            if st.count and max(abs(st.min), abs(st.max)) > best:
                best, who = float(max(abs(st.min), abs(st.max))), v
        return best, who

    def _settings_text(self) -> str:
        return ", ".join(f"{k} {v:g}" if not isinstance(v, bool) else f"{k} {str(v).lower()}"
                         for k, v in self.hyper.items())

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

    def _rule_settings(self, dtype) -> tuple[dict, dict]:
        """(the settings as scalars of ``dtype``, the rule's attrs), made once per dtype while
        ``hyper`` stays as it was (each update made them again: ~10 us a Variable a step)."""
        cache = self._settings_by_dtype
        if cache[0] != self.hyper:
            cache = self._settings_by_dtype = (dict(self.hyper), {})
        found = cache[1].get(dtype)
        if found is None:
            attrs = {a.name: self.hyper.get(a.name, a.default) for a in self._apply.attrs}
            scalars = self._scalar_inputs(np.empty(0, dtype))
            for value in scalars.values():     # shared by every update: none may change them
                value.flags.writeable = False
            found = cache[1][dtype] = (scalars, attrs)
        return found

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
        try:
            r = run(p, self.feeds, target=self.loss_key, wrt=self.trainable, fetch=self.metric_keys,
                    variables=self.values, record=False, commit=False, step=k, run_seed=cfg.seed,
                    check_numerics=cfg.check_numerics, memory_budget=cfg.memory_budget,
                    held_bytes=self.held_bytes)
        except NumericsError as exc:
            raise self._after_updates(exc, k) from None
        loss = float(r.value(*split_port_text(self.loss_key)))
        new_values, new_slots = copy_context().run(self._updates, r, k)
        # the step's own updates of Variables the optimizer leaves alone (moving statistics)
        for node, changes in r.state_updates.items():
            if "value" in changes and node not in self._slots:
                new_values[node] = np.asarray(changes["value"])
        # committed only once every update is done and finite: a failed step changes nothing
        self.values.update(new_values)
        for v, slots in new_slots.items():
            self._slots[v].update(slots)
        return StepRecord(k, loss, {m: float(r.value(*split_port_text(m))) for m in self.metric_keys})

    def _updates(self, r, k: int) -> tuple[dict, dict]:
        """Every trainable Variable's new value and slots. An overflow in an update is found by
        its check and named with the step and the settings, not printed by numpy as a warning
        about the line that multiplied; one error state for every update (np.errstate on each
        cost a 1.5 ms MLP step 1 %), set in a copy of the caller's context as a run's is
        (runtime._guarded): a Ctrl-C right after the set cannot leave numpy silent."""
        new_values, new_slots = {}, {}
        with ignoring_fp_errors():
            for v in self.trainable:
                grad = r.variable_grads.get(v)
                if grad is None:
                    continue
                new_values[v], new_slots[v] = self._update(v, grad, k)
        return new_values, new_slots

    def _update(self, name: str, grad: np.ndarray, k: int) -> tuple[np.ndarray, dict]:
        """The optimizer's Apply* block on one Variable: its new value and slots (not yet kept)."""
        spec = self._apply
        var = self.values[name]
        slots = self._slots[name]
        scalars, attrs = self._rule_settings(var.dtype)
        args = []
        for kind, key in self._rule_args:
            if kind is _VAR:
                args.append(var)
            elif kind is _SLOT:
                args.append(slots[key])
            elif kind is _GRAD:
                args.append(np.asarray(grad, dtype=var.dtype))
            else:
                args.append(scalars[key])
        _out, updates = spec.forward(*args, **attrs)     # within _optimizer_step's error state
        new = np.asarray(updates[spec.inputs[0].name])
        new_slots = {key: value for key, value in updates.items() if key != spec.inputs[0].name}
        if self.config.check_numerics:
            self._check_update(name, k, grad, {spec.inputs[0].name: new, **new_slots})
        return new, new_slots

    def _check_update(self, name: str, k: int, grad, arrays: dict) -> None:
        """Raise UpdateNumericsError when the new value or a slot holds NaN or Inf (an integer
        array never does; a float one is tested as the runtime tests its results). Called
        within _optimizer_step's error state: the test of a float16 array may overflow."""
        if all_finite_many(arrays.values()):
            return
        with np.errstate(all="ignore"):
            bad = {key: a for key, a in arrays.items() if not _all_finite(a)}
            if not bad:
                return
            g = np.asarray(grad)
            finite_grad = g.dtype.kind != "f" or bool(np.isfinite(g).all())
            largest = float(np.abs(g).max()) if finite_grad and g.size and g.dtype.kind in "fiu" else None
        p = self.program
        key, a = next(iter(bad.items()))
        a = np.asarray(a)
        nan, inf = int(np.isnan(a).sum()), int(np.isinf(a).sum())
        what = " and ".join(x for x in (f"NaN ({nan} of {a.size} values)" if nan else "",
                                        f"Inf ({inf} of {a.size} values)" if inf else "") if x)
        slot = "" if key == self._apply.inputs[0].name else f" in its slot '{key}'"
        if not finite_grad or largest is None:
            cause = "its gradient was not finite"
        elif nan and not inf and self.hyper.get("epsilon") == 0:
            # not an overflow: the rule's 0 / (0 + epsilon) where the gradient and its averages are 0
            cause = (f"epsilon is 0, so where the gradient and its averages are 0 (largest |gradient| "
                     f"{largest:.3g}) the step divides 0 by 0; give epsilon a small positive value "
                     f"(TensorFlow's default is 1e-07)")
        else:
            cause = (f"the Variable and its gradient were finite (largest |gradient| {largest:.3g}): "
                     f"the settings make the step overflow {a.dtype.name}; a smaller learning rate (lr) may help")
        st = p.step(name)
        raise UpdateNumericsError(f"{p.full_name(name)} ({st.spec.name})", p.slot(st.outputs[0]).port,
                                  what + slot, k, self._apply.name,
                                  f"{self.config.optimizer}: {self._settings_text()}", cause)

    def _after_updates(self, exc: NumericsError, k: int) -> NumericsError:
        """A NaN or Inf at step ``k``, after ``k`` updates: say so, and when the updates made the
        Variables grow by orders of magnitude, that the training diverged."""
        note = f"at training step {k}"
        scale, who = self._scale() if k else (0.0, "")
        if scale > 1e3 * max(self._start_scale, 1.0):
            rule = (f"{self._apply.name} ({self.config.optimizer}: {self._settings_text()})"
                    if self.mode == "optimizer" else "the page's update blocks")
            note += (f", after {k} update{'s' if k != 1 else ''} by {rule} made the Variables grow from at most "
                     f"{self._start_scale:.3g} to {scale:.3g} ({self.program.full_name(who)}): the training "
                     f"diverged; a smaller learning rate (lr) may help")
        return NumericsError(exc.node, exc.port, exc.what, exc.phase, exc.side,
                             note=f"{exc.note}, {note}" if exc.note else note)

    def _graph_step(self, k: int) -> StepRecord:
        p, cfg = self.program, self.config
        try:    # the page's own Apply* blocks are checked as any block: the one that overflows is named
            r = run(p, self.feeds, fetch=[self.loss_key, *self.metric_keys], variables=self.values, record=False,
                    commit=False, step=k, run_seed=cfg.seed, check_numerics=cfg.check_numerics,
                    memory_budget=cfg.memory_budget)
        except NumericsError as exc:
            raise self._after_updates(exc, k) from None
        for node, changes in r.state_updates.items():
            for key, value in changes.items():
                if key == "value":
                    self.values[node] = np.asarray(value)
                else:
                    self.slot_values[(node, key)] = np.asarray(value)
        self._sync_slots()
        return StepRecord(k, float(r.value(*split_port_text(self.loss_key))),
                          {m: float(r.value(*split_port_text(m))) for m in self.metric_keys})

    def _sync_slots(self) -> None:
        # graph mode: in-graph optimizers read their slots from the program's slot state
        self.program.slot_values.update(self.slot_values)

    def evaluate(self, split: str = "test") -> dict:
        """The loss and metrics on ``split`` with the current values (no update)."""
        r = run(self.program, self.feeds, fetch=[self.loss_key, *self.metric_keys], variables=self.values, record=False,
                commit=False, step=0, split=split, run_seed=self.config.seed,
                check_numerics=self.config.check_numerics, memory_budget=self.config.memory_budget,
                held_bytes=self.held_bytes)
        out = {"loss": float(r.value(*split_port_text(self.loss_key)))}
        out.update({m: float(r.value(*split_port_text(m))) for m in self.metric_keys})
        return out

    def train(self, steps: int | None = None, callback=None, should_stop=None, on_evaluate=None) -> TrainingHistory:
        """Run ``steps`` steps (default: the config's). ``callback(record, trainer)`` after each
        step; ``should_stop()`` checked before each step (a Stop button); ``on_evaluate(step,
        values)`` after each test evaluation."""
        saved_slots = dict(self.program.slot_values)
        try:
            return train_steps(self, self.config.steps if steps is None else steps, callback, should_stop,
                               on_evaluate)
        finally:
            if self.mode == "graph":   # the program's own state is left as it was
                self.program.slot_values.clear()
                self.program.slot_values.update(saved_slots)

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


def training_program(project, page: str | None = None, registry: Registry | None = None, *,
                     batch_size: int | None = None) -> Program:
    """Compile ``page`` of ``project`` for training; ``batch_size`` (when given) replaces the batch
    size of its dataset blocks (the project is not changed)."""
    import copy

    from blockflow.compile.compiler import compile_page, project_files

    registry = registry or default_registry()
    pg = project.page(page)
    if batch_size is not None:
        if not isinstance(batch_size, int) or batch_size < 0:
            raise ValueError(f"batch size must be a whole number >= 0 (0: the whole train part), got {batch_size!r}")
        pg = copy.copy(pg)
        nodes = {}
        for nid, node in pg.nodes.items():
            spec = registry.get(node.block)
            if spec is not None and spec.is_dataset and "batch_size" in spec.attr_map:
                node = copy.copy(node)
                node.attrs = dict(node.attrs, batch_size=batch_size)
            nodes[nid] = node
        pg.nodes = nodes
    return compile_page(pg, registry, files=project_files(project), composites=project.composites)


def _rule_args(spec) -> tuple:
    """(kind, name) per input of the Apply* block ``spec``, in order: what each takes (the
    Variable, one of its slots, its gradient, a setting)."""
    return tuple((_VAR, None) if i == 0 else (_SLOT, d.name) if d.ref else
                 (_GRAD, None) if d.name in _GRAD_NAMES else (_SETTING, d.name)
                 for i, d in enumerate(spec.inputs))


def _all_finite(a) -> bool:
    a = np.asarray(a)
    if a.dtype.kind != "f":
        return True
    return all_finite(a)


def _shown(v) -> str:
    """``repr(v)`` cut short: a setting may be an integer of thousands of digits (--set lr=...)."""
    text = repr(v)
    return text if len(text) <= 60 else f"{text[:40]}... ({len(text):,} characters)"


def _finite(v) -> bool:
    try:
        return math.isfinite(v)
    except OverflowError:     # an int beyond any float
        return False
def _nbytes(t) -> int:
    return math.prod(t.shape) * t.dtype.itemsize if None not in t.shape else 0


def _mix(seed: int, run_seed: int) -> int:
    return (seed * 1_000_003 + run_seed * 7_919) % (2 ** 31)


def train_steps(trainer, steps: int, callback=None, should_stop=None, on_evaluate=None) -> TrainingHistory:
    """The loop every engine's ``train`` runs: ``trainer.step()`` ``steps`` times, ``should_stop()``
    checked before each, ``callback(record, trainer)`` after each, the test part evaluated every
    ``eval_every`` steps and after the last (``on_evaluate(step, values)``)."""
    history = TrainingHistory()
    every = trainer.config.eval_every
    t0 = time.perf_counter()
    try:
        for i in range(steps):
            if should_stop is not None and should_stop():
                history.stopped = True
                break
            record = trainer.step()
            history.steps.append(record)
            if every and ((i + 1) % every == 0 or i + 1 == steps):
                history.evaluations.append((record.step, trainer.evaluate("test")))
                if on_evaluate is not None:
                    on_evaluate(*history.evaluations[-1])
            if callback is not None:
                callback(record, trainer)
    finally:
        history.seconds = time.perf_counter() - t0
    return history
