"""Benchmark runner: blockflow against hand-written numpy, measured in the same process.

    python benchmarks/run.py            # all workloads, full repeats
    python benchmarks/run.py --quick    # a smoke run (few repeats; ratios are noisy)
    python benchmarks/run.py mlp chain  # some workloads

Prints, for each workload, the median time of hand-written numpy and of blockflow (forward +
backward, interleaved repeats) and their ratio against the target. Runs single-threaded BLAS,
as the tests do (docs/performance.md says why). The composite workloads (f) and (g), built in
composites.py, compare blockflow with itself: the 'numpy' column holds the raw-op baseline.
"""
from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import gc  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import timeit  # noqa: E402

try:
    import resource  # noqa: E402
except ImportError:     # not on Windows: faults are not counted there
    resource = None

import numpy as np  # noqa: E402

from blockflow.compile.compiler import compile_project  # noqa: E402
from blockflow.project import Project  # noqa: E402
from blockflow.run.runtime import run  # noqa: E402


def timeit_pair(hand, ours, repeats: int, inner: int = 1):
    """Median seconds per call of two functions, interleaved so both see the same machine. A
    row's side ratios (checks off, ...) divide by the hand median of their own pair: the
    machine's speed moves between pairs. The page faults of each side's calls are counted
    (outside the timed calls) into PAIR_FAULTS for the row's note."""
    hand(), ours()  # warm up (plans are generated on first use)
    th, to = [], []
    faults = [0, 0]
    for _ in range(repeats):
        for side, (fn, acc) in enumerate(((hand, th), (ours, to))):
            f0 = _minor_faults()
            t0 = time.perf_counter()
            for _ in range(inner):
                fn()
            acc.append((time.perf_counter() - t0) / inner)
            faults[side] += _minor_faults() - f0
    PAIR_FAULTS.append((faults[0] / (repeats * inner), faults[1] / (repeats * inner)))
    return statistics.median(th), statistics.median(to)


#: (the first function's, the second's) page faults a call in each pair a workload timed, in the
#: order it timed them (the first is hand numpy only in some pairs: torch, ONNX Runtime, the raw
#: net, a direct call or blockflow itself elsewhere, as each row's note says): a pair whose calls
#: fault measures the allocator as well (benchmarks/README.md, "Eighteenth session": interleaved
#: with the hand version in a fresh heap, the RBM step faulted 254 pages a call and read 1.24x,
#: against 1.08x with no faults once anything else had run first)
PAIR_FAULTS: list = []


def _minor_faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt if resource is not None else 0


def faults_note() -> str:
    """The note's words on PAIR_FAULTS when a pair's calls faulted (empty when none did)."""
    if not any(h >= 1 or o >= 1 for h, o in PAIR_FAULTS):
        return ""
    pairs = ", ".join(f"{h:.0f}/{o:.0f}" for h, o in PAIR_FAULTS)
    return f"; page faults a call (first/second function), by pair in the order timed: {pairs}"


def checked_pair(hand, ours, node, repeats, rtol, atol):
    """Check that blockflow's gradient of ``node`` equals the hand version's (its second result),
    then time both."""
    np.testing.assert_allclose(ours().variable_grads[node], hand()[1], rtol=rtol, atol=atol)
    return timeit_pair(hand, ours, repeats)


# ------------------------------------------------------------------------------------ (a) MLP


def mlp_project(batch=64, sizes=(784, 256, 256, 10)):
    p = Project()
    pg = p.add_page("mlp")
    pg.add_node("Placeholder", id="x", attrs={"shape": [batch, sizes[0]]})
    pg.add_node("Placeholder", id="y", attrs={"shape": [batch, sizes[-1]]})
    prev = ("x", "output")
    for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:]), 1):
        pg.add_node("Variable", id=f"W{i}", attrs={"shape": [n_in, n_out], "initializer": "glorot_uniform", "seed": i})
        pg.add_node("Variable", id=f"b{i}", attrs={"shape": [n_out]})
        pg.add_node("MatMul", id=f"MatMul_{i}")
        pg.add_node("Add", id=f"Add_{i}")
        pg.connect(*prev, f"MatMul_{i}", "a")
        pg.connect(f"W{i}", "ref", f"MatMul_{i}", "b")
        pg.connect(f"MatMul_{i}", "product", f"Add_{i}", "x")
        pg.connect(f"b{i}", "ref", f"Add_{i}", "y")
        prev = (f"Add_{i}", "z")
        if i < len(sizes) - 1:
            pg.add_node("Relu", id=f"Relu_{i}")
            pg.connect(*prev, f"Relu_{i}", "features")
            prev = (f"Relu_{i}", "activations")
    pg.add_node("SoftmaxCrossEntropyWithLogits", id="ce")
    pg.connect(*prev, "ce", "features")
    pg.connect("y", "output", "ce", "labels")
    pg.add_node("Mean", id="loss")
    pg.connect("ce", "loss", "loss", "input")
    pg.loss = "loss"
    return p


def bench_mlp(repeats):
    rng = np.random.default_rng(0)
    program = compile_project(mlp_project())
    program.raise_for_errors()
    x = rng.normal(size=(64, 784)).astype(np.float32)
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 64)]
    W = [program.variable_values[f"W{i}"] for i in (1, 2, 3)]
    b = [program.variable_values[f"b{i}"] for i in (1, 2, 3)]
    feeds = {"x": x, "y": y}

    def hand():
        h1 = x @ W[0] + b[0]
        a1 = np.maximum(h1, 0)
        h2 = a1 @ W[1] + b[1]
        a2 = np.maximum(h2, 0)
        logits = a2 @ W[2] + b[2]
        m = logits.max(axis=1, keepdims=True)
        z = logits - m
        e = np.exp(z)
        s = e.sum(axis=1, keepdims=True)
        loss = np.mean(-(y * (z - np.log(s))).sum(axis=1))
        d = (e / s - y) / np.float32(64)
        dW3, db3 = a2.T @ d, d.sum(axis=0)
        d2 = (d @ W[2].T) * (h2 > 0)
        dW2, db2 = a1.T @ d2, d2.sum(axis=0)
        d1 = (d2 @ W[1].T) * (h1 > 0)
        dW1, db1 = x.T @ d1, d1.sum(axis=0)
        return loss, dW1, db1, dW2, db2, dW3, db3

    def ours():
        return run(program, feeds, target="loss", record=False, check_numerics=False)

    def ours_checked():
        return run(program, feeds, target="loss", record=False)

    ref, res = hand(), ours()
    np.testing.assert_allclose(res.variable_grads["W1"], ref[1], rtol=2e-3, atol=1e-6)
    np.testing.assert_allclose(res.variable_grads["b3"], ref[6], rtol=2e-3, atol=1e-6)
    # issue 18: the target is with the default NaN/Inf checks on (1.10x before, checks off)
    h, oc = timeit_pair(hand, ours_checked, repeats)
    h_off, o = timeit_pair(hand, ours, max(3, repeats // 2))
    return [("(a) MLP step 64x784-256-256-10", h, oc, 1.05, f"checks off: {o / h_off:.2f}x")]


def bench_mlp_open(repeats):
    """(a2) the MLP with its Placeholders' batch left open ([-1, 784], [-1, 10]) against the same
    net with the batch fixed, both blockflow with checks on, fed the same arrays: a plan is
    written per feed-shape signature (run/shaped.py), so an open batch costs nothing."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 784)).astype(np.float32)
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 64)]
    programs = []
    for batch in (64, -1):
        project = mlp_project()
        page = project.pages[0]
        page.nodes["x"].attrs["shape"], page.nodes["y"].attrs["shape"] = [batch, 784], [batch, 10]
        program = compile_project(project)
        program.raise_for_errors()
        programs.append(program)
    for k in programs[0].trainable:     # the same weights (the seeds are the same anyway)
        programs[1].variable_values[k] = programs[0].variable_values[k]
    fixed, open_ = (lambda p=p: run(p, {"x": x, "y": y}, target="loss", record=False) for p in programs)
    for key, g in fixed().variable_grads.items():
        assert np.array_equal(g, open_().variable_grads[key]), key
    h, o = timeit_pair(fixed, open_, repeats)
    return [("(a2) MLP, batch left open / fixed", h, o, 1.02, "'numpy' column: the same net, batch fixed")]


# ------------------------------------------------------------------------ (e) training step


def bench_train(repeats):
    """The training loop's overhead: a Trainer step (forward, backward, an Adam update of every
    Variable, bookkeeping) against the same work done directly: the runtime's forward+backward
    and one call of ApplyAdam's rule per Variable (target: under 10 %)."""
    from blockflow.registry import default_registry
    from blockflow.run.training import TrainConfig, Trainer

    rng = np.random.default_rng(0)
    program = compile_project(mlp_project())
    feeds = {"x": rng.normal(size=(64, 784)).astype(np.float32),
             "y": np.eye(10, dtype=np.float32)[rng.integers(0, 10, 64)]}
    # as users train: NaN/Inf checks on, in the trainer and in the direct baseline alike
    trainer = Trainer(program, TrainConfig(optimizer="adam", hyper={"lr": 1e-4}), feeds=feeds)
    apply = default_registry()["ApplyAdam"].forward
    values = {k: v.copy() for k, v in trainer.values.items()}
    slots = {v: (np.zeros_like(values[v]), np.zeros_like(values[v])) for v in trainer.trainable}
    scalars = [np.float32(x) for x in (0.9, 0.999, 1e-4, 0.9, 0.999, 1e-7)]

    def fwd_bwd():
        return run(program, feeds, target="loss", wrt=trainer.trainable, variables=values, record=False,
                   commit=False)

    def direct():
        r = fwd_bwd()
        for v in trainer.trainable:
            m, s = slots[v]
            apply(values[v], m, s, *scalars[:2], *scalars[2:], r.variable_grads[v], use_nesterov=False)

    h, o = timeit_pair(direct, trainer.step, repeats)
    f, _ = timeit_pair(fwd_bwd, direct, max(3, repeats // 2))
    return [("(e) train step (Adam), loop overhead", h, o, 1.10,
             f"'numpy' column: forward+backward+ApplyAdam called directly; fwd+bwd alone {f * 1e3:.3f} ms")]


# ------------------------------------------------------------------------- (b) stable softmax


def softmax_project(n):
    p = Project()
    pg = p.add_page("softmax")
    pg.add_node("Placeholder", id="x", attrs={"shape": [n]})
    pg.add_node("Placeholder", id="w", attrs={"shape": [n]})
    for nid, block in (("Max_1", "Max"), ("StopGradient_1", "StopGradient"), ("Subtract_1", "Subtract"),
                       ("Softmax_1", "Softmax"), ("Multiply_1", "Multiply"), ("Sum_1", "Sum")):
        pg.add_node(block, id=nid)
    pg.connect("x", "output", "Max_1", "input")
    pg.connect("Max_1", "output", "StopGradient_1", "input")
    pg.connect("x", "output", "Subtract_1", "x")
    pg.connect("StopGradient_1", "output", "Subtract_1", "y")
    pg.connect("Subtract_1", "z", "Softmax_1", "logits")
    pg.connect("Softmax_1", "softmax", "Multiply_1", "x")
    pg.connect("w", "output", "Multiply_1", "y")
    pg.connect("Multiply_1", "z", "Sum_1", "input")
    pg.loss = "Sum_1"
    return p


def bench_softmax(repeats, n=1_000_000):
    from engine_steps import softmax_case
    program = compile_project(softmax_project(n))
    program.raise_for_errors()
    feeds, hand = softmax_case(n)

    def ours():
        return run(program, feeds, target="Sum_1", wrt=["x"], record=False, check_numerics=False)

    h, o = checked_pair(hand, ours, "x", repeats, rtol=1e-3, atol=1e-9)
    h_on, oc = timeit_pair(hand, lambda: run(program, feeds, target="Sum_1", wrt=["x"], record=False),
                        max(3, repeats // 2))
    return [("(b) stable softmax, 1e6 float32", h, o, 1.10, f"checks on: {oc / h_on:.2f}x")]


# ---------------------------------------------------------------------------- (c) op chain

_CHAIN = ("Tanh", "Multiply", "Add", "Negate")


def chain_project(n_ops):
    p = Project()
    pg = p.add_page("chain")
    pg.add_node("Placeholder", id="x", attrs={"shape": [8]})
    prev = ("x", "output")
    for i in range(n_ops):
        kind = _CHAIN[i % len(_CHAIN)]
        nid = f"op{i}"
        if kind == "Tanh":
            pg.add_node("Tanh", id=nid)
            pg.connect(*prev, nid, "x")
            prev = (nid, "y")
        elif kind == "Negate":
            pg.add_node("Negate", id=nid)
            pg.connect(*prev, nid, "x")
            prev = (nid, "y")
        else:
            pg.add_node(kind, id=nid, inputs={"y": np.float32(1.5 if kind == "Multiply" else 0.1)})
            pg.connect(*prev, nid, "x")
            prev = (nid, "z")
    pg.add_node("Sum", id="loss")
    pg.connect(*prev, "loss", "input")
    pg.loss = "loss"
    return p


def bench_chain(repeats, n_ops=1000):
    program = compile_project(chain_project(n_ops))
    program.raise_for_errors()
    x = np.linspace(-1, 1, 8).astype(np.float32)
    mul, add = np.float32(1.5), np.float32(0.1)
    feeds = {"x": x}

    def hand():
        v = x
        tape = []
        for i in range(n_ops):
            k = i % 4
            if k == 0:
                v = np.tanh(v)
                tape.append(v)
            elif k == 1:
                v = v * mul
            elif k == 2:
                v = v + add
            else:
                v = -v
        loss = v.sum()
        g = np.ones_like(v)
        t = len(tape)
        for i in reversed(range(n_ops)):
            k = i % 4
            if k == 0:
                t -= 1
                g = g * (1 - tape[t] * tape[t])
            elif k == 1:
                g = g * mul
            elif k == 3:
                g = -g
        return loss, g

    def ours():  # issue 18: with the default NaN/Inf checks on (target 1.5x before, checks off)
        return run(program, feeds, target="loss", wrt=["x"], record=False)

    h, o = checked_pair(hand, ours, "x", repeats, rtol=1e-4, atol=1e-6)
    h_off, off = timeit_pair(hand, lambda: run(program, feeds, target="loss", wrt=["x"], record=False,
                                           check_numerics=False), max(3, repeats // 2))
    note = f"{h / n_ops * 1e6:.2f} vs {o / n_ops * 1e6:.2f} us per op; checks off: {off / h_off:.2f}x"
    return [(f"(c) chain of {n_ops} ops on 8 floats", h, o, 1.2, note)]


# ---------------------------------------------------------------------------- (d) compiling


def generated_project(n_blocks, seed=0):
    """A random layered diagram with about 1.5 wires per block."""
    rng = np.random.default_rng(seed)
    p = Project()
    pg = p.add_page("big")
    ids = []
    for i in range(n_blocks):
        if i < 4 or rng.random() < 0.1:
            nid = f"x{i}"
            pg.add_node("Placeholder", id=nid, attrs={"shape": [4]})
            ids.append((nid, "output"))
            continue
        nid = f"n{i}"
        if rng.random() < 0.5:
            pg.add_node("Add", id=nid)
            a, b = rng.integers(max(0, len(ids) - 50), len(ids), size=2)
            pg.connect(*ids[a], nid, "x")
            pg.connect(*ids[b], nid, "y")
            ids.append((nid, "z"))
        else:
            pg.add_node("Tanh", id=nid)
            a = rng.integers(max(0, len(ids) - 50), len(ids))
            pg.connect(*ids[a], nid, "x")
            ids.append((nid, "y"))
    return p


def bench_compile(repeats, sizes=(1_000, 10_000, 100_000)):
    rows = []
    base = None
    for n in sizes:
        project = generated_project(n)
        reps = max(1, repeats // (n // 1000 if n >= 10_000 else 1))
        times = []
        for _ in range(min(reps, 7)):
            gc.collect()
            t0 = time.perf_counter()
            program = compile_project(project)
            times.append(time.perf_counter() - t0)
        assert program.ok, program.errors[:3]
        t = statistics.median(times)
        per = t / n * 1e6
        base = base or per
        target = 0.250 if n == 10_000 else None
        note = f"{per:.1f} us per block ({per / base:.2f}x the 1k cost per block)"
        rows.append((f"(d) compile {n} blocks", None, t, target, note))
    return rows


# ------------------------------------------------------------- (f), (g) composites, flattened


def bench_composite_mlp(repeats):
    """(f) the MLP drawn with Dense composites against the same raw ops (benchmarks/composites.py)."""
    from composites import mlp_rows
    return mlp_rows(repeats, timeit_pair)


def bench_composite_compile(repeats):
    """(g) compiling 1,000 instances of a 20-block composite against the 10k-block figure."""
    from composites import compile_rows
    return compile_rows(repeats, generated_project)


def bench_compile_paths(repeats):
    """(j) compiling 1k/10k/100k blocks and the gradient paths after it (compile_paths.py)."""
    from compile_paths import compile_paths_rows
    return compile_paths_rows(repeats, generated_project)


def bench_export_mlp(repeats):
    """(h) the MLP exported to PyTorch against the same net written by hand (torch_export.py)."""
    from torch_export import export_rows
    return export_rows(repeats, timeit_pair, mlp_project)


def bench_onnx_resnet(repeats):
    """(i) ResNet-50 imported from ONNX, forward, against ONNX Runtime (onnx_import.py)."""
    from onnx_import import onnx_rows
    return onnx_rows(repeats, timeit_pair)


def bench_load(repeats):
    """(m) loading a 10k- and a 100k-block file against json.loads of its text (load_file.py)."""
    from load_file import load_rows
    return load_rows(repeats, generated_project)


def bench_engine(name):
    """Issue 18's engine steps (engine_steps.py): RBM CD-1, FGSM, the elementary-block softmax."""
    def bench(repeats):
        import engine_steps
        return getattr(engine_steps, name)(repeats, timeit_pair)
    return bench


def bench_startup(repeats):
    """(k) ``blockflow run`` of a sample in a fresh process against importing numpy (startup_memory.py)."""
    from startup_memory import startup_rows
    return startup_rows(repeats)


def bench_train_memory(repeats):
    """(l) peak memory of training the MLP against hand numpy, fresh processes (startup_memory.py)."""
    from startup_memory import memory_rows
    return memory_rows(repeats, mlp_project)


WORKLOADS = {"mlp": bench_mlp, "mlp-open": bench_mlp_open, "softmax": bench_softmax, "chain": bench_chain, "compile": bench_compile,
             "train": bench_train, "composite-mlp": bench_composite_mlp,
             "composite-compile": bench_composite_compile, "export-mlp": bench_export_mlp,
             "onnx-resnet50": bench_onnx_resnet,
             "rbm": bench_engine("bench_rbm"), "fgsm": bench_engine("bench_fgsm"),
             "softmax-elem": bench_engine("bench_softmax_elem"), "compile-paths": bench_compile_paths,
             "startup": bench_startup, "train-memory": bench_train_memory, "load": bench_load}


#: the workloads timing one step of a few ms: their medians are over 5x the repeats (205), which
#: steadied them on the shared machine (41 let a median move by 3-5 % from run to run)
STEPS = {"mlp", "mlp-open", "rbm", "fgsm", "softmax", "softmax-elem", "chain", "train"}
STEPS_MORE = 5


def blas_info() -> str:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "BLAS threads: limited to 1 by environment (install threadpoolctl to see which BLAS)"
    bits = [f"{i.get('internal_api')} {i.get('version')} ({i.get('architecture')}), {i.get('num_threads')} thread(s)"
            for i in threadpool_info()]
    return "BLAS: " + "; ".join(bits)


def machine_info() -> str:
    """The CPU's name and this interpreter's speed on a plain loop, printed first so that rows in
    seconds (compile, start-up) can be read across machines: the 100k-block compile with its
    gradient paths took 0.74-0.83 s on the machine of the twelfth session and 1.38 s on the
    AMD EPYC one of the thirteenth (34 ns an iteration of this loop)."""
    name = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            name = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), name)
    except OSError:
        pass

    def loop(n=200_000):
        total = 0
        for i in range(n):
            total += i
        return total

    best = min(timeit.repeat(loop, number=1, repeat=5)) / 200_000
    return f"CPU: {name}, {os.cpu_count()} core(s); a Python loop: {best * 1e9:.0f} ns an iteration"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workloads", nargs="*", help=f"some of {', '.join(WORKLOADS)} (default: all)")
    parser.add_argument("--quick", action="store_true", help="few repeats: checks the runner, not the speed")
    args = parser.parse_args(argv)
    names = args.workloads or list(WORKLOADS)
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        parser.error(f"unknown workload(s) {', '.join(unknown)}; choose from {', '.join(WORKLOADS)}")
    repeats = 3 if args.quick else 41
    print(f"python {sys.version.split()[0]}, numpy {np.__version__}; {blas_info()}")
    print(machine_info())
    print(f"{'workload':<38} {'numpy':>10} {'blockflow':>10} {'ratio':>7} {'target':>7}  ok   note")
    failed = 0
    for name in names:
        fn = WORKLOADS[name]
        PAIR_FAULTS.clear()
        if name == "compile" and args.quick:
            rows = fn(repeats, sizes=(1_000, 10_000))
        elif name == "chain" and args.quick:
            rows = fn(repeats, n_ops=200)
        elif name in STEPS:
            rows = fn(repeats * STEPS_MORE)
        else:
            rows = fn(repeats)
        faulted = faults_note()
        for label, hand, ours, target, note, *unit in rows:
            if hand is not None:    # a row of one figure (an import's time) timed no pair
                note += faulted
            unit = unit[0] if unit else "ms"   # a row of other figures than seconds names its unit
            scale = 1e3 if unit == "ms" else 1
            if hand is None:
                ratio_s = "-"
                ok = target is None or ours <= target
                target_s = "-" if target is None else f"{target * scale:.0f} {unit}"
            else:
                ratio = ours / hand
                ratio_s = f"{ratio:.2f}x"
                ok = target is None or ratio <= target    # None: a figure to watch, no target
                target_s = "-" if target is None else f"{target:.2f}x"
            failed += not ok
            hand_s = "-" if hand is None else f"{hand * scale:.3f} {unit}"
            print(f"{label:<38} {hand_s:>10} {ours * scale:>7.3f} {unit} {ratio_s:>7} {target_s:>7}  "
                  f"{'yes' if ok else 'NO ':<4} {note}", flush=True)
    print("all targets met" if not failed else f"{failed} target(s) missed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
