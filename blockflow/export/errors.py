"""What an export refuses with: the reasons, all of them, each saying where and what."""
from __future__ import annotations

__all__ = ["ExportError"]


class ExportError(Exception):
    """The page cannot be exported; ``problems`` lists every reason (``where: what``)."""

    def __init__(self, message: str, problems=()):
        super().__init__(message)
        self.problems = list(problems)
