"""The one rooted exception tree of blockflow; every error carries where the problem is.

Imports nothing of blockflow.
"""
from __future__ import annotations

__all__ = [
    "BlockflowError", "ProjectError", "ProjectFileError", "RegistryError", "CompileError",
    "RunError", "BlockExecutionError", "NumericsError", "UpdateNumericsError", "FeedError",
    "MemoryLimitError",
]


class BlockflowError(Exception):
    """Root of every error blockflow raises on purpose. ``str(err)`` is the one-line message."""


class ProjectError(BlockflowError):
    """An invalid edit or lookup on a Project."""


class ProjectFileError(ProjectError):
    """A project file cannot be read or written: names the file, the place in it, the problem."""

    def __init__(self, path, where: str, problem: str):
        self.path, self.where, self.problem = str(path), where, problem
        place = f" at {where}" if where else ""
        super().__init__(f"{self.path}{place}: {problem}")


class RegistryError(BlockflowError):
    """A block package is broken: a duplicate block id, a failing import."""


class CompileError(BlockflowError):
    """A diagram has errors; ``diagnostics`` lists all of them."""

    def __init__(self, diagnostics):
        self.diagnostics = list(diagnostics)
        lines = [str(d) for d in self.diagnostics]
        head = f"{len(lines)} error{'s' if len(lines) != 1 else ''} in the diagram"
        super().__init__(head + (":\n  " + "\n  ".join(lines) if lines else ""))


class RunError(BlockflowError):
    """A run could not be done or did not finish."""


class FeedError(RunError):
    """A feed for a Placeholder is missing or does not fit it."""


class BlockExecutionError(RunError):
    """A block raised while running: names the node and the shapes it got."""

    def __init__(self, node: str, message: str, inputs: str = "", phase: str = "forward"):
        self.node, self.message, self.inputs, self.phase = node, message, inputs, phase
        got = f" (inputs: {inputs})" if inputs else ""
        super().__init__(f"{node} failed in the {phase} pass: {message}{got}")


class NumericsError(RunError):
    """A NaN or Inf appeared: names the node that first produced it; ``note`` says more (e.g.
    which training step, and what led to it)."""

    def __init__(self, node: str, port: str, what: str, phase: str = "forward", side: str = "output",
                 note: str = ""):
        self.node, self.port, self.what, self.phase, self.side, self.note = node, port, what, phase, side, note
        where = side if phase == "forward" else f"gradient of {side}"
        super().__init__(f"{node} produced {what} in its {where} '{port}' ({phase} pass)"
                         + (f", {note}" if note else ""))


class UpdateNumericsError(NumericsError):
    """A training update (an optimizer's Apply* block) made a Variable's new value NaN or Inf from
    finite numbers: names the training step, the Variable, the update block and its settings."""

    def __init__(self, node: str, port: str, what: str, step: int, rule: str, settings: str, note: str = ""):
        self.node, self.port, self.what, self.phase, self.side, self.note = node, port, what, "update", "output", note
        self.step, self.rule, self.settings = step, rule, settings
        RunError.__init__(self, f"training step {step}: the update of {node} by {rule} ({settings}) "
                                f"produced {what}" + (f": {note}" if note else ""))


class MemoryLimitError(RunError):
    """A run would make an array over the per-tensor limit, or go over the run's memory budget.

    Raised before the array is made (never a MemoryError): names the block, the array (an
    output, a gradient, an intermediate), its dtype, shape and size, and the limit it passes."""

    def __init__(self, node: str, message: str, phase: str = "forward"):
        self.node, self.message, self.phase = node, message, phase
        where = f" in the {phase} pass" if phase else ""
        super().__init__(f"{node}{where}: {message}")
