"""Compile with gradient paths, for benchmarks/run.py: what the editor pays after an edit of a big
page (a compile, then Program.gradient_paths for the target shown), at 1k, 10k and 100k blocks.

- one row per size: the compile and the gradient paths together, per block (and each part);
- ``linearity``: the 100k figure against 100,000 blocks at the 1k cost per block (target 1.2x);
- ``100k total``: the 100k figure itself (target 1 s).

The page is run.py's generated page (passed in by the caller), with gradients wanted for every
node (``wrt=None``: as the editor shows them). The gradient target is the last block whose
gradient reaches at least a third of the page's wired inputs (``REACH``), found before the timing:
the paths' work is what that block's gradient reaches, so the rows compare the same share of
each page. Until compile20 the target was the last block, whatever it reached: at 1k that is
n999, a Tanh of a Placeholder, whose gradient reaches 1 wired input of 1,347, where at 10k and
100k the last block's reaches 45-47 % (the 1k row's paths part was then overhead only, and the
linearity row compared different work). Now 1k takes n998 (an Add, 561 = 42 %); 10k and 100k
keep their last block (6,076 and 63,201). The note gives the count. Time spent
in the cyclic garbage collector during the timed part is measured with ``gc.callbacks`` and shown
in the note: it is where most of the growth came from (benchmarks/README.md, "Compile").

Times are the process's CPU time (``time.process_time``), not the wall clock: the work is
single-threaded and the machine is shared, where a 100k-block wall time moved 3x between runs.
On a quiet machine the two agree.
"""
from __future__ import annotations

import gc
import statistics
import time

from blockflow.compile.compiler import compile_project

SIZES = (1_000, 10_000, 100_000)
QUICK_SIZES = (1_000, 10_000)
LINEARITY_TARGET = 1.2
TOTAL_TARGET = 1.0   # seconds for 100k blocks, compile and gradient paths


class GcClock:
    """Seconds the cyclic collector ran, and how many collections of each generation, while
    installed (``gc.callbacks``)."""

    def __init__(self):
        self.seconds = 0.0
        self.counts = [0, 0, 0]
        self._t0 = 0.0

    def __call__(self, phase, info):
        if phase == "start":
            self._t0 = time.process_time()
        else:
            self.seconds += time.process_time() - self._t0
            self.counts[info["generation"]] += 1

    def __enter__(self):
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc):
        gc.callbacks.remove(self)


#: the share of the page's wired inputs the target's gradient reaches, at least
REACH = 1 / 3


def _target(project) -> str:
    """The last block whose gradient (for every node) reaches at least ``REACH`` of the wired
    inputs (the last block when none does)."""
    page = project.pages[0]
    program = compile_project(project)
    wired = len(page.edges)
    for nid in reversed(page.nodes):
        if len(program.gradient_paths(nid).needs) >= REACH * wired:
            return nid
    return next(reversed(page.nodes))


def measure_once(project, target):
    """(compile seconds, gradient paths seconds, gc seconds, gc counts, wires the gradient
    reaches) of one compile of ``project`` followed by the gradient paths of ``target``, from a
    collected heap."""
    gc.collect()
    with GcClock() as clock:
        t0 = time.process_time()
        program = compile_project(project)
        t1 = time.process_time()
        paths = program.gradient_paths(target)
        t2 = time.process_time()
    assert program.ok, program.errors[:3]
    reached = len(paths.needs)
    del program, paths
    return t1 - t0, t2 - t1, clock.seconds, clock.counts, reached


def compile_paths_rows(repeats, generated_project, sizes=None):
    """The rows; ``sizes`` None: 1k/10k/100k, or 1k/10k for a --quick run (3 repeats)."""
    sizes = sizes or (QUICK_SIZES if repeats <= 3 else SIZES)
    rows = []
    per_block = {}
    totals = {}
    for n in sizes:
        project = generated_project(n)
        target = _target(project)
        runs = [measure_once(project, target) for _ in range(_runs(repeats, n))]
        total = statistics.median(r[0] + r[1] for r in runs)
        comp = statistics.median(r[0] for r in runs)
        paths = statistics.median(r[1] for r in runs)
        gct = statistics.median(r[2] for r in runs)
        counts, reached = runs[len(runs) // 2][3], runs[0][4]
        spread = f"{min(r[0] + r[1] for r in runs) * 1e3:.0f}-{max(r[0] + r[1] for r in runs) * 1e3:.0f} ms"
        per_block[n], totals[n] = total / n * 1e6, total
        note = (f"{per_block[n]:.1f} us per block (compile {comp / n * 1e6:.1f}, paths {paths / n * 1e6:.1f}); "
                f"gc {gct * 1e3:.0f} ms in {counts[0]}/{counts[1]}/{counts[2]} collections; "
                f"{len(runs)} runs {spread}; the gradient of {target} reaches {reached:,} of "
                f"{len(project.pages[0].edges):,} wired inputs")
        rows.append((f"(j) compile+paths {n} blocks", None, total, None, note))
        del project
    small, big = min(sizes), max(sizes)
    if big > small:
        expected = per_block[small] * big / 1e6
        rows.append((f"(j) linearity {big} vs {small}", expected, totals[big], LINEARITY_TARGET,
                     f"'numpy' column: {big} blocks at the {small}-block cost per block "
                     f"({per_block[small]:.1f} us); here {per_block[big]:.1f} us per block"))
    if big == 100_000:
        rows.append(("(j) compile+paths 100k total", None, totals[big], TOTAL_TARGET, "target 1 s"))
    return rows


def _runs(repeats, n) -> int:
    """As many runs as fit: more of the small pages (their times are short and noisy)."""
    if n >= 100_000:
        return 3
    if n >= 10_000:
        return max(3, min(7, repeats // 6))
    return max(3, min(21, repeats // 2))
