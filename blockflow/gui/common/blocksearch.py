"""How a typed query ranks blocks: one ranking for the palette's search and the canvas's add-block
popup, so the same words find the same block first wherever they are typed."""
from __future__ import annotations

__all__ = ["rank", "matches", "haystack"]


def haystack(name: str, aliases=(), summary: str = "") -> str:
    """The lower-case text a block is searched in: its name, aliases and summary."""
    return " ".join((name, *aliases, summary)).lower()


def matches(hay: str, words) -> bool:
    """Every word of the query is somewhere in the block's text."""
    return all(w in hay for w in words)


def rank(names, query: str) -> int:
    """0 an exact name or alias, 1 a name or alias starting with the query, 2 containing it,
    3 a match elsewhere (the summary, or the words apart). ``names``: lower case."""
    if query in names:
        return 0
    if any(n.startswith(query) for n in names):
        return 1
    if any(query in n for n in names):
        return 2
    return 3
