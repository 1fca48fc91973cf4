"""What a project file is and may hold: the format's name, version and migrations, the dtypes
of its arrays, the limits a file is held to, and the keys of its objects.

The public constants are tunable at run time (tests lower the limits, an embedder may raise them)
by setting them here, the one place they live (``rules.LOAD_FACTOR = 48``, docs/limits.md); the
reader and the writer look them up here at each use (``rules.MAX_DEPTH``), never copy them, and
no other module re-exports them.
"""
from __future__ import annotations

import math
import re

FORMAT = "blockflow-project"
#: The format version this blockflow writes, and the newest one it reads. Version 2 added the
#: project's composite blocks (top-level ``"composites"``).
VERSION = 2
#: The file suffix of project files.
SUFFIX = ".bflow.json"

#: ``{old_version: upgrade}``: each function takes the decoded JSON document (plain dicts and
#: lists) of format ``old_version`` and returns it in format ``old_version + 1``. The loader
#: applies them in a loop until the document is at :data:`VERSION`, then validates it.
def _composites_added(doc: dict) -> dict:
    """Version 1 -> 2: a version 1 project has no composites. A page whose name starts with '@'
    (version 2 names composites' diagrams so) is renamed ``_@...`` (then ``_@..._2``...)."""
    pages = doc.get("pages")
    if isinstance(pages, list):
        names = {p.get("name") for p in pages if isinstance(p, dict)}
        for page in pages:
            name = page.get("name") if isinstance(page, dict) else None
            if isinstance(name, str) and name.startswith("@"):
                new, n = "_" + name, 1
                while new in names:
                    n += 1
                    new = f"_{name}_{n}"
                names.add(new)
                page["name"] = new
    doc.setdefault("composites", [])
    return doc


MIGRATIONS: dict = {1: _composites_added}

#: The dtypes an array may have in a file.
DTYPES = ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool")
#: Arrays with at most this many elements are written as a ``"data"`` list, larger as base64.
INLINE_DATA_MAX = 256

# Limits: generous, but they turn a corrupt or hostile file into a clear error instead of
# exhausting memory. All are module globals so that tests (and embedders) may change them.
#: Largest file loaded (bytes; characters for a ``str`` given to loads_project): 2 GiB, the size of
#: the largest self-contained ONNX model (protobuf's limit), which the ONNX import holds to it too.
MAX_FILE_BYTES = 2 * 1024 * 1024 * 1024
#: Most elements in one array: a billion (4 GiB of float32, spec.MAX_TENSOR_BYTES); VGG-19's first
#: dense layer has 103 million.
MAX_ARRAY_ELEMENTS = 1_000_000_000
#: Most nodes on one page.
MAX_NODES_PER_PAGE = 200_000
#: Most composite blocks in one project (or library file).
MAX_COMPOSITES = 10_000
#: Deepest nesting of lists/objects inside one attr value or the metadata.
MAX_DEPTH = 64
#: An int of at most this many bits (602 digits) is below any limit Python may be set to on the
#: digits it turns into text (sys.set_int_max_str_digits: 640 at the least, 4,300 by default):
#: larger ones are tried before they are written (io/values.py)
PLAIN_INT_BITS = 2_000
#: Most dimensions of one array (numpy 1.x's own limit).
MAX_NDIM = 32
#: Loading a file takes at most LOAD_FACTOR times its size (bytes; characters for a ``str``) plus
#: LOAD_ALLOWANCE_BYTES of memory, whatever it holds: a file whose parsed form could take more
#: (millions of tiny lists, objects, strings or numbers) is refused before it is parsed.
LOAD_FACTOR = 24
LOAD_ALLOWANCE_BYTES = 16 * 1024 * 1024

# Below: not settings but the format's fixed shapes, shared by the reader, the writer and the
# checks they both make.

# Width up to which an array object or a plain list/object value is written on one line.
INLINE_WIDTH = 100

PORT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[(?:0|[1-9][0-9]*)\])?")
PLAIN_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
DIGITS_RE = re.compile(r"([0-9]+)")
NONFINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
# Integers up to this size convert to float64 without overflow (checked without converting).
EXACT_INT = 2 ** 1000

TOP_KEYS = ("format", "version", "metadata", "composites", "pages")
COMPOSITE_KEYS = ("name", "doc", "origin", "params", "diagram")
PARAM_KEYS = ("name", "kind", "default", "choices", "min", "max", "doc")
DIAGRAM_KEYS = ("text", "nodes", "edges", "reroutes", "frames")
ORIGIN_KEYS = ("library", "name", "version")
PAGE_KEYS = ("name", "text", "loss", "metrics", "nodes", "edges", "feeds", "reroutes", "frames")
NODE_KEYS = ("id", "block", "label", "position", "attrs", "inputs", "state", "collapsed")
EDGE_KEYS = ("from", "to")
REROUTE_KEYS = ("from", "to", "points")
FRAME_KEYS = ("title", "color", "note", "blocks")
ARRAY_KEYS = ("dtype", "shape", "data", "base64")
ARRAY_KEYSETS = (frozenset({"dtype", "shape", "data"}), frozenset({"dtype", "shape", "base64"}))
# The position of a node that has none in the file (a tuple: every such node can share it).
ORIGIN = (0.0, 0.0)
