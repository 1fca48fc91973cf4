"""What an import raises: a file it cannot read, or a model it will not approximate."""
from __future__ import annotations

from blockflow.errors import BlockflowError

__all__ = ["ImportFailure", "UnsupportedOps"]


class ImportFailure(BlockflowError):
    """A model cannot be imported: the message names the file, and the node or tensor at fault."""


class UnsupportedOps(ImportFailure):
    """The model uses ops (or uses of ops) with no faithful blockflow counterpart. ``ops`` maps
    each op type to the reasons and the nodes, so the whole list is given at once."""

    def __init__(self, source: str, ops: dict):
        self.ops = ops
        lines = []
        for op, uses in sorted(ops.items()):
            nodes = sorted({n for _, n in uses})
            reasons = sorted({r for r, _ in uses})
            shown = ", ".join(nodes[:5]) + (f" and {len(nodes) - 5} more" if len(nodes) > 5 else "")
            lines.append(f"{op} ({len(nodes)} node{'s' if len(nodes) != 1 else ''}: {shown}): "
                         + "; ".join(reasons))
        #: the first line, and one line for each op (its type and reasons come from the file)
        self.head = (f"{source}: {len(ops)} op{'s' if len(ops) != 1 else ''} with no faithful blockflow "
                     f"counterpart (nothing was approximated):")
        self.lines = lines
        super().__init__(self.head + "\n  " + "\n  ".join(lines))
