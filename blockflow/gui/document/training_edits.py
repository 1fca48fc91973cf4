"""The Document's edits of trained values (a mixin of Document, kept apart so that document.py
stays readable): store what a training made, forget it. A Variable inside an instance (``d1/W``)
keeps its values in the instance's state, under ``W:key``; each edit is one undo step.
"""
from __future__ import annotations

import numpy as np

from blockflow.composite import split_flat, state_key
from blockflow.errors import ProjectError
from blockflow.gui.document import commands as C

__all__ = ["TrainingEdits"]


class TrainingEdits:
    """Trained values in and out; mixed into Document (uses its pages, programs, registry and
    undo stack)."""

    def apply_training(self, updates: dict, steps: int, page: str | None = None) -> list[str]:
        """Store trained values (``Trainer.state_updates()``: {Variable: {"value": array, slot:
        array}}) as one undoable edit. Variables the page no longer has, or whose type changed
        since training started, are left out; their ids are returned."""
        page = page or self.current_page
        pg = self.page(page)
        states, skipped = {}, []
        program = self.program(page)
        for nid, changes in updates.items():
            top, inner = split_flat(nid)          # a Variable inside instance ``top``: its state
            node = pg.nodes.get(top)
            flat = program.step(nid) if inner and node is not None else None
            role = getattr(flat, "role", None) if inner else \
                getattr(self.registry.get(node.block) if node is not None else None, "role", None)
            value = changes.get("value")
            if role != "variable" or value is None:
                skipped.append(nid)
                continue
            try:
                t = program.output_type(nid)
            except ProjectError:
                skipped.append(nid)
                continue
            if tuple(t.shape) != tuple(np.shape(value)) or t.dtype != np.asarray(value).dtype:
                skipped.append(nid)
                continue
            if inner:
                state = states.setdefault(top, dict(node.state))
                for k in [k for k in state if k.startswith(inner + ":")]:
                    del state[k]          # replaced whole, as a top-level Variable's state is
                state.update({state_key(inner, k): np.array(v) for k, v in changes.items()})
            else:
                states.setdefault(nid, {}).update({k: np.array(v) for k, v in changes.items()})
        if states:
            self.undo_stack.push(C.SetStatesCommand(self, page, states, f"Train {steps} step{'s' if steps != 1 else ''}"))
        return skipped

    def reset_variables(self, page: str | None = None) -> list[str]:
        """Forget the trained values of every Variable on the page (their initializers draw the
        first values again), as one undoable edit; returns the Variables reset."""
        page = page or self.current_page
        pg = self.page(page)
        ids = [nid for nid, n in pg.nodes.items()    # (an instance's state is its Variables')
               if n.state and (n.block.startswith("@") or
                               getattr(self.registry.get(n.block), "role", None) == "variable")]
        if ids:
            self.undo_stack.push(C.SetStatesCommand(self, page, {nid: {} for nid in ids}, "Reset variables"))
        return ids

