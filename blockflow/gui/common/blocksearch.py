"""How a typed query ranks blocks: one ranking for the palette's search and the canvas's add-block
popup, so the same words find the same block first wherever they are typed."""
from __future__ import annotations

import re

__all__ = ["rank", "matches", "haystack", "snake"]


def snake(name: str) -> str:
    """A block's name as TensorFlow's Python functions write it: StopGradient -> stop_gradient."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def haystack(name: str, aliases=(), summary: str = "") -> str:
    """The lower-case text a block is searched in: its name (also as ``tf.stop_gradient`` writes
    it), aliases and summary."""
    return " ".join((name, snake(name), *aliases, summary)).lower()


def matches(hay: str, words) -> bool:
    """Every word of the query is somewhere in the block's text."""
    return all(w in hay for w in words)


def rank(names, query: str) -> int:
    """0 an exact name or alias, 1 a name or alias starting with the query, 2 containing it,
    3 a match elsewhere (the summary, or the words apart). ``names``: lower case. A query
    written as TensorFlow's functions are (``stop_gradient``) ranks as the name it spells."""
    if query in names or query.replace("_", "") in names:
        return 0
    if any(n.startswith(query) for n in names):
        return 1
    if any(query in n for n in names):
        return 2
    return 3
