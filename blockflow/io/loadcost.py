"""The memory a file may cost: checked before it is parsed.
"""
from __future__ import annotations

import re
import sys

from blockflow.io import rules
from blockflow.io.checks import Invalid
from blockflow.io.rules import ARRAY_KEYS, EDGE_KEYS, FRAME_KEYS, NODE_KEYS, PAGE_KEYS, REROUTE_KEYS, TOP_KEYS

#
# A file of a few megabytes can spell millions of tiny JSON values ("[]," is 3 bytes; the list
# it becomes is 56), so before parsing, the loader bounds what parsing and checking will take
# from counts of the text's tokens, and refuses a file whose bound is over rules.LOAD_FACTOR x its size
# + rules.LOAD_ALLOWANCE_BYTES. The bound adds, per token, the most CPython (3.11+, 64-bit) takes for
# it; tests/hostile/test_loader_memory.py measures real peaks against it, shape by shape.
# Checking does not copy what was parsed: lists and objects are checked in place and become the
# model's attrs, and each node's, edge's and page's parsed form is freed once its model object
# exists. So there are two peaks: the text and the parsed document while parsing; the parsed
# document and the model while checking (the text freed by then).

# Sizes are as allocated: small objects come in blocks of multiples of 16 bytes.
_COST_LIST = 64          # an empty list (56)
_COST_FULL_LIST = 112    # a list with items: + the first slots it allocates (up to 6 spare)
_COST_OBJECT = 64        # an empty dict
_COST_FULL_OBJECT = 192  # a dict with members: + its first table (room for 5)
# An object member: its (key, value) tuple while its object is parsed (64, and its slot in the
# list of pairs), then its entry in the dict (36: tables grow by doubling; the one dict being
# made holds both); and unless its key is one of the format's (parsed once each), the key's str
# and its entry in the parser's memo of keys (114; a key seen before costs neither, but counting
# distinct keys would take a parse).
_COST_FORMAT_MEMBER = 73
_COST_MEMBER = 73 + 36 + 114
_COST_SLOT = 18          # the pointer to any value: lists over-allocate by 1/8, and keep the old
                         # array while they copy it to a bigger one
_COST_SCALAR = 32        # a number: float 24, int 28 (more only with more digits)
_COST_STRING = 64        # a str's header, when every string is ASCII (49 + 1 + up to 14)
_COST_WIDE_STRING = 96   # ... and when some are not (76 + up to 4 x 4)
# What the model adds, beyond the parsed form it replaces (freed as it goes: a node's or an
# edge's object, with 2 members at least, is 184 bytes).
_COST_PAGE = 512         # per page: Page, its dicts and lists, an entry in `seen`
_COST_NODE = 96          # per node: Node (136), its entry in the page's dict, a position tuple
_COST_DICT = 64          # ... and each of attrs, inputs, state the file leaves out
_COST_EDGE = 200         # per edge: Edge (104), the 4 names split out of "node:port", set entry
_COST_REROUTE = 400      # per wire with reroute points: a second Edge and its names, its dict
                         # entry, the tuple of points
_COST_POINT = 128        # per reroute point: its (x, y) tuple and two floats (ints become floats)
_COST_FRAME = 256        # per frame: Frame, its tuple of blocks (+ a slot per block), list entry

# The bytes that can be JSON structure; all others are dropped before counting.
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'[]{},:"')
#: characters counted at a time (the copies this takes are a few times this)
_COUNT_CHUNK = 1 << 22
# A JSON string, quotes included (possessive: nothing to backtrack into).
_STRING_RE = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+"')
# A key of the format, and the same characters inside a string (after an escaped quote), which
# is all it can be else in valid JSON (a key followed by spaces is counted as any key: more).
_FORMAT_KEYS = "|".join(sorted(set(TOP_KEYS + PAGE_KEYS + NODE_KEYS + EDGE_KEYS
                                   + ARRAY_KEYS + REROUTE_KEYS + FRAME_KEYS)))
_FORMAT_KEY_RE = re.compile(f'"(?:{_FORMAT_KEYS})":')
_ESCAPED_FORMAT_KEY_RE = re.compile(f'\\\\"(?:{_FORMAT_KEYS})":')


def structure_counts(data) -> list:
    """How many of each of ``[ { , : "`` ``data`` (bytes of UTF-8, or str) holds, those in
    strings included: an upper bound of every token count, in one fast pass."""
    counts = [0] * 5
    for start in range(0, len(data), _COUNT_CHUNK):
        chunk = data[start:start + _COUNT_CHUNK]
        if isinstance(chunk, str):
            chunk = chunk.encode("utf-8", "surrogatepass")
        kept = chunk.translate(None, _NOT_STRUCTURE)
        for i, token in enumerate((b"[", b"{", b",", b":", b'"')):
            counts[i] += kept.count(token)
    return counts


def _mib(nbytes: int) -> str:
    return f"{nbytes / 2 ** 20:,.0f} MiB"


class LoadBudget:
    """The memory loading a file of ``size`` bytes may take, and the estimate held so far."""

    def __init__(self, size: int):
        self.size = size
        self.limit = rules.LOAD_FACTOR * size + rules.LOAD_ALLOWANCE_BYTES
        self.held = 0

    def hold(self, nbytes: int, what) -> None:
        """Add ``nbytes``; past the limit, refuse the file, saying that ``what`` (or ``what()``)
        would take so much."""
        self.held += nbytes
        if self.held > self.limit:
            what = what() if callable(what) else what
            raise Invalid("", f"{what} in {self.size:,} bytes: reading it would take about "
                               f"{_mib(self.held)} of memory, more than blockflow allows for a "
                               f"project file of this size ({rules.LOAD_FACTOR} x its size + "
                               f"{_mib(rules.LOAD_ALLOWANCE_BYTES)} = {_mib(self.limit)}; see "
                               f"docs/limits.md)")

    def release(self, nbytes: int) -> None:
        self.held -= nbytes


class _Tokens:
    """Counts of a JSON text's tokens: an upper bound from all its structure characters (also
    those inside strings), or exact from a text whose strings are emptied (``""``)."""

    def __init__(self, counts: list, chars: int, empty_lists: int = 0, empty_objects: int = 0,
                 format_keys: int = 0):
        self.lists, self.objects, self.commas, self.members, quotes = counts
        self.strings = quotes // 2
        self.chars = chars                           # characters inside strings (or more)
        # empty containers ("[ ]" is taken for a full one: an upper bound still)
        self.empty_lists, self.empty_objects = empty_lists, empty_objects
        self.format_keys = min(format_keys, self.members)
        full = self.lists - self.empty_lists + self.objects - self.empty_objects
        self.values = self.commas + full + 1      # each after a comma or first in its container
        self.string_values = max(0, self.strings - self.members)     # the others are keys
        self.numbers = max(0, self.values - self.lists - self.objects - self.string_values)

    def cost(self, per_char: int, per_string: int) -> int:
        """An upper bound of the bytes the parsed document takes (every token over-counted from
        characters inside strings adds at least what it takes away)."""
        return ((self.lists - self.empty_lists) * _COST_FULL_LIST
                + self.empty_lists * _COST_LIST
                + (self.objects - self.empty_objects) * _COST_FULL_OBJECT
                + self.empty_objects * _COST_OBJECT
                + self.format_keys * _COST_FORMAT_MEMBER
                + (self.members - self.format_keys) * _COST_MEMBER
                + self.values * _COST_SLOT + self.numbers * _COST_SCALAR
                + self.string_values * per_string + self.chars * per_char)

    def most_numerous(self) -> str:
        kinds = [(self.lists + self.objects, "lists and objects"),
                 (self.members, "object members"), (self.string_values, "strings"),
                 (self.numbers, "numbers")]
        n, what = max(kinds)
        return f"the file holds {n:,} {what}"


def check_parse_cost(text: str, structure: list, budget: LoadBudget) -> None:
    """Refuse ``text`` (whose :func:`structure_counts` is ``structure``) if parsing it could take more
    than ``budget`` allows; else hold what it may take. Each finer count is only made if the
    coarser one is over the limit."""
    budget.hold(sys.getsizeof(text), "the text")
    tokens, per_char = _Tokens(structure, len(text)), 4
    cost = _parse_cost(tokens, per_char)
    if budget.held + cost > budget.limit and "\\u" not in text:
        # without \u escapes, a string is no wider than the text (1, 2 or 4 bytes a character)
        per_char = _char_width(text)
        cost = _parse_cost(tokens, per_char)
    # Perhaps only for what strings hold: count exactly, also when the coarse count leaves less
    # than half the limit for the model built next (pages, nodes and edges cost it more).
    if budget.held + cost > budget.limit // 2:
        stripped = _STRING_RE.sub('""', text)
        counts = [stripped.count(c) for c in '[{,:"']
        chars, empty = len(text) - len(stripped), (stripped.count("[]"), stripped.count("{}"))
        del stripped
        format_keys = (_FORMAT_KEY_RE.subn("", text)[1]
                       - sum(1 for _ in _ESCAPED_FORMAT_KEY_RE.finditer(text)))
        tokens = _Tokens(counts, chars, *empty, format_keys)
        cost = _parse_cost(tokens, per_char)
    budget.hold(cost, tokens.most_numerous)


def _parse_cost(tokens: "_Tokens", per_char: int) -> int:
    """The parsed document's bound, and one string at a time being built (the parser writes it
    to a buffer, then copies it) or converted (an array decoded from base64, a string's UTF-8
    check): at most all of them together."""
    per_string = _COST_STRING if per_char == 1 else _COST_WIDE_STRING
    return tokens.cost(per_char, per_string) + tokens.chars * per_char


def _char_width(text: str) -> int:
    """Bytes a character in ``text`` (CPython stores a str in 1, 2 or 4 bytes a character, as
    its widest character needs; its size is 72 + width x (len + 1) bytes when not ASCII)."""
    if text.isascii():
        return 1
    return min(4, max(1, (sys.getsizeof(text) - 72) // (len(text) + 1)))


def check_model_cost(pages: list, budget: LoadBudget) -> None:
    """Refuse a document whose Project model (pages, nodes, edges) would not fit in ``budget``
    next to the parsed document."""
    nodes = edges = left_out = layout = 0
    for page in pages:
        if isinstance(page, dict):
            layout += _layout_cost(page)
            n, e = page.get("nodes"), page.get("edges")
            if isinstance(n, list):
                nodes += len(n)
                left_out += sum(3 - len(_MODEL_DICTS & raw.keys()) for raw in n
                                if isinstance(raw, dict))
            edges += len(e) if isinstance(e, list) else 0
    cost = (len(pages) * _COST_PAGE + nodes * _COST_NODE + left_out * _COST_DICT
            + edges * _COST_EDGE + layout)
    budget.hold(cost, f"the file holds {len(pages):,} pages, {nodes:,} nodes and {edges:,} "
                      "edges (with their reroute points and frames)")


def _layout_cost(page: dict) -> int:
    """What a diagram's reroute points and frames add to the model (page_layout.py)."""
    reroutes, frames = page.get("reroutes"), page.get("frames")
    cost = 0
    for entry in reroutes if isinstance(reroutes, list) else ():
        points = entry.get("points") if isinstance(entry, dict) else None
        cost += _COST_REROUTE + (len(points) * _COST_POINT if isinstance(points, list) else 0)
    for frame in frames if isinstance(frames, list) else ():
        blocks = frame.get("blocks") if isinstance(frame, dict) else None
        cost += _COST_FRAME + (len(blocks) * 8 if isinstance(blocks, list) else 0)
    return cost


_MODEL_DICTS = frozenset({"attrs", "inputs", "state"})
