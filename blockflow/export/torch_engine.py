"""Training a page on PyTorch from blockflow itself (``blockflow train --engine torch``, the Train
panel's Engine choice): :class:`TorchTrainer` runs the exported module with the API of
run.training.Trainer (step, train, evaluate, state_updates, values), so a caller drives either.

The setup is the Trainer's own (a run.training.Trainer is built: the same checks, mode, optimizer
settings, starting values and warnings); each step then feeds blockflow's batch ``k``
(torch_data.blockflow_batch) to the module on the chosen device (CUDA when available), and in
optimizer mode applies the Apply* rule of torch_ops_state.py after ``loss.backward()``. A step
whose loss or updates are not finite stops the training and keeps none of its changes. No Qt.
"""
from __future__ import annotations

import math
import types

import numpy as np

from blockflow.errors import RunError
from blockflow.optional import need
from blockflow.export.torch_data import blockflow_batch
from blockflow.export.torch_module import ExportError, export_torch
from blockflow.export.torch_ops_state import rule
from blockflow.export.torch_train import places, start_state
from blockflow.registry import Registry, default_registry
from blockflow.run.settings import OPTIMIZERS
from blockflow.run.training import StepRecord, TrainConfig, Trainer, TrainingHistory, train_steps

__all__ = ["TorchTrainer", "TorchEngineError", "default_device"]


class TorchEngineError(ExportError, ValueError):
    """The page cannot train on PyTorch (a block with no torch lowering...): an ExportError with
    its ``problems``, and a ValueError, which the callers of Trainer already report."""


def default_device() -> str:
    torch = need("torch")
    return "cuda" if torch.cuda.is_available() else "cpu"


def _device(torch, name: str | None):
    """torch's device ``name`` (default: CUDA when available); ValueError when there is none such."""
    try:
        device = torch.device(name or default_device())
    except RuntimeError:
        raise ValueError(f"unknown device {name!r}: give cpu or cuda") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("CUDA is not available here (no GPU, or torch was built for CPU only): use --device cpu")
    if device.type not in ("cpu", "cuda"):
        raise ValueError(f"device {name!r}: blockflow trains on cpu or cuda")
    return device


class TorchTrainer:
    """Trains a compiled page's Variables with its exported PyTorch module. ``project`` is the
    project the page was compiled from (the export reads its drawing order and seed)."""

    engine = "torch"

    def __init__(self, program, config: TrainConfig | None = None, registry: Registry | None = None,
                 feeds: dict | None = None, *, project, device: str | None = None):
        self.torch = torch = need("torch")
        self.registry = registry or default_registry()
        setup = Trainer(program, config, self.registry, feeds)   # checks, mode, settings, start values
        self.program, self.config, self.feeds = program, setup.config, setup.feeds
        self.mode, self.trainable, self.warnings = setup.mode, setup.trainable, setup.warnings
        self.loss_key, self.metric_keys = setup.loss_key, setup.metric_keys
        self.hyper = getattr(setup, "hyper", {})
        self.step_index = 0
        self.device = _device(torch, device)
        try:
            self.export = export_torch(project, program.page_name, outputs=[self.loss_key, *self.metric_keys],
                                       registry=self.registry, program=program)
        except ExportError as exc:
            raise TorchEngineError(str(exc), exc.problems) from None
        namespace = types.ModuleType("blockflow_exported_page").__dict__
        exec(compile(self.export.source, f"<page {program.page_name!r} exported>", "exec"), namespace)
        state = start_state(self.export, setup)
        self.model = namespace["Model"](initial={k: torch.from_numpy(np.array(v, copy=True)) for k, v in state.items()})
        self.model.to(self.device).train()
        self._start_values = dict(setup.values)
        self._places = places(self.export)
        self._slots: dict = {}
        self._rule = self._load_rule() if self.mode == "optimizer" else None

    # ------------------------------------------------------------------ setup
    def _load_rule(self):
        block = OPTIMIZERS[self.config.optimizer][0]
        name, source, inputs, slots, flags = rule(block)
        namespace = {"torch": self.torch}
        exec(compile(source, f"<{block} rule>", "exec"), namespace)
        spec = self.registry[block]
        decls = {d.name: d for d in spec.inputs}
        defaults = {a.name: a.default for a in spec.attrs}
        flag_values = [bool(self.hyper.get(f, defaults.get(f, False))) for f in flags]
        return namespace[name], inputs, [(s, decls[s].slot, decls[s].slot_init) for s in slots], flag_values

    def _initial_slots(self, param) -> dict:
        torch = self.torch
        out = {}
        for name, kind, start in self._rule[2]:
            value = self.hyper[start] if isinstance(start, str) else start
            out[name] = (torch.full_like(param, value) if kind == "like"
                         else torch.tensor(value, dtype=param.dtype, device=param.device))
        return out

    def _args(self, step: int, split: str = "train") -> list:
        values = blockflow_batch(self.program, self.export, step, self.config.seed, split, self.feeds)
        return [self.torch.from_numpy(np.array(values[arg], copy=True)).to(self.device)
                for arg, _text, _t in self.export.inputs]

    # ------------------------------------------------------------------ stepping
    def step(self) -> StepRecord:
        """One training step; RunError (nothing of the step kept) when it makes a NaN or Inf."""
        k = self.step_index
        saved = {name: t.detach().clone() for name, t in self.model.state_dict().items()}
        try:
            outs = self._forward(self._args(k))
            loss = outs[0]
            # read now: an output may be a Variable itself, which the update changes in place
            values = [float(o.detach()) for o in outs]
            self._finite(values[0], f"the loss {self.loss_key}", k)
            if self.mode == "optimizer":
                if loss.requires_grad:    # else no gradient reaches a Variable: nothing changes
                    loss.backward()
                self._optimizer_update(k)
            else:
                self._check_state(k)
        except BaseException:
            self.model.load_state_dict(saved)
            raise
        self.step_index += 1
        return StepRecord(k, values[0], dict(zip(self.metric_keys, values[1:])))

    def _forward(self, args) -> tuple:
        for param in self.model.parameters():
            param.grad = None
        out = self.model(*args)
        return out if isinstance(out, tuple) else (out,)

    def _optimizer_update(self, k: int) -> None:
        torch = self.torch
        fn, inputs, slot_decls, flags = self._rule
        new_values, new_slots = {}, {}
        with torch.no_grad():
            for name, param in self.model.named_parameters():
                if param.grad is None:
                    continue
                slots = self._slots.get(name) or self._initial_slots(param)
                args = []
                for n in inputs:
                    if n == "var":
                        args.append(param)
                    elif n in slots:
                        args.append(slots[n])
                    elif n in ("grad", "delta"):
                        args.append(param.grad)
                    else:
                        value = self.hyper["lr" if n in ("lr", "alpha") else n]
                        args.append(torch.tensor(value, dtype=param.dtype, device=param.device))
                new, *changed = fn(*args, *flags)
                self._finite_tensor(new, name, k)
                new_values[name] = new
                new_slots[name] = {**slots, **dict(zip([s for s, _, _ in slot_decls], changed))}
            params = dict(self.model.named_parameters())
            for name, new in new_values.items():     # committed only once every update is finite
                params[name].copy_(new)
        self._slots.update(new_slots)

    def _check_state(self, k: int) -> None:
        for key, tensor in self.model.state_dict().items():
            if tensor.is_floating_point() and key in self._places:
                self._finite_tensor(tensor, key, k)

    def _finite_tensor(self, tensor, key: str, k: int) -> None:
        if not bool(self.torch.isfinite(tensor).all()):
            node, what = self._places.get(key, (key, "value"))
            where = "" if what == "value" else f" (its slot '{what}')"
            rule_text = (f"{OPTIMIZERS[self.config.optimizer][0]} ({self.config.optimizer})"
                         if self.mode == "optimizer" else "the page's update blocks")
            raise RunError(f"training step {k}: the update by {rule_text} made Variable "
                           f"{self.program.full_name(node)}{where} NaN or Inf; nothing of this step was kept; "
                           f"a smaller learning rate (lr) may help")

    def _finite(self, value: float, what: str, k: int) -> None:
        if not math.isfinite(value):
            raise RunError(f"training step {k}: {what} is {value}; nothing of this step was kept")

    def evaluate(self, split: str = "test") -> dict:
        """The loss and metrics on ``split`` with the current values (no update kept)."""
        saved = {name: t.detach().clone() for name, t in self.model.state_dict().items()}
        self.model.eval()
        try:
            outs = self._forward(self._args(0, split))
        finally:
            self.model.load_state_dict(saved)
            self.model.train()
        out = {"loss": float(outs[0].detach())}
        out.update({m: float(o.detach()) for m, o in zip(self.metric_keys, outs[1:])})
        return out

    def train(self, steps: int | None = None, callback=None, should_stop=None, on_evaluate=None) -> TrainingHistory:
        """As Trainer.train: ``callback(record, trainer)`` after each step, ``should_stop()``
        before each, ``on_evaluate(step, values)`` after each test evaluation."""
        return train_steps(self, self.config.steps if steps is None else steps, callback, should_stop, on_evaluate)

    # ------------------------------------------------------------------ results
    @property
    def values(self) -> dict:
        """{Variable node: its current value (numpy)}, every Variable of the page."""
        out = dict(self._start_values)
        state = self.model.state_dict()
        for key, (node, what) in self._places.items():
            if what == "value":
                out[node] = state[key].detach().cpu().numpy().copy()
        return out

    def state_updates(self) -> dict:
        """``{Variable node: {"value": array, slot key: array}}`` for Page.apply_state, as
        Trainer.state_updates (slots in graph mode only)."""
        out: dict = {node: {"value": np.array(v)} for node, v in self.values.items()}
        if self.mode == "graph":
            state = self.model.state_dict()
            for key, (node, what) in self._places.items():
                if what != "value":
                    out.setdefault(node, {})[what] = state[key].detach().cpu().numpy().copy()
        return out
