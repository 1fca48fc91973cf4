"""(m) Loading a big project file, for benchmarks/run.py: run.py's generated page at 10k and 100k
blocks saved as blockflow writes it (27 MB at 100k), read back with ``load_project`` against
``json.loads`` of the same text, the least any JSON loader does (CPU time, interleaved).

What loading adds over the parse: the cost bound checked before parsing (the text's tokens
counted, strings emptied: ``io/loadcost.py``), duplicate keys found while parsing, and every
node and wire checked into the model (``io/reader.py``, ``io/plain_items.py``). No issue sets a
target: the row is there to watch (benchmarks/README.md, "Twentieth session", has the figures).
"""
from __future__ import annotations

import gc
import json
import statistics
import tempfile
import time
from pathlib import Path

from blockflow.io.project_io import load_project, save_project

SIZES = (10_000, 100_000)


def _cpu(fn) -> float:
    gc.collect()
    t0 = time.process_time()
    result = fn()
    t = time.process_time() - t0
    del result
    return t


def load_rows(repeats, generated_project, sizes=None):
    sizes = sizes or (SIZES[:1] if repeats <= 3 else SIZES)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for n in sizes:
            path = Path(folder) / f"page{n}.bflow.json"
            save_project(generated_project(n), path)
            text = path.read_text(encoding="utf-8")
            runs = max(3, min(9, repeats // (n // 10_000 * 4 or 1)))
            parse, load = [], []
            for _ in range(runs):
                parse.append(_cpu(lambda: json.loads(text)))
                load.append(_cpu(lambda: load_project(path)))
            h, o = statistics.median(parse), statistics.median(load)
            note = (f"{path.stat().st_size / 2 ** 20:.0f} MiB; {o / n * 1e6:.1f} us a block; "
                    f"{runs} runs of each, load {min(load) * 1e3:.0f}-{max(load) * 1e3:.0f} ms")
            rows.append((f"(m) load {n} blocks vs json.loads", h, o, None, note))
    return rows
