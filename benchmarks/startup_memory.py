"""(k) ``startup``: the wall time of ``blockflow run SAMPLE`` in a fresh process, against
``python -c "import numpy"`` (the floor: nothing blockflow does can start faster), interleaved,
median of N (target 0.25 s for the stable softmax sample).

(l) ``train-memory``: the peak resident memory (VmHWM) of a fresh process training the MLP of
run.py's (a) (loaded from a project file, compiled, Adam steps through ``Trainer``) against a
fresh process doing the same steps in hand-written numpy (target 1.3x).

Both measure whole processes, so each is started here as a child; this module imports nothing
of blockflow at its top, and the children import only what they use.
"""
from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: the samples timed: the issue's own, and one with training blocks (Gradients, Apply*) to check
STARTUP_SAMPLES = {"stable_softmax": "stable_softmax", "fgsm": "fgsm_adversarial_training"}
STEPS = 50


def _blockflow_command() -> list[str]:
    """The console script as users start it (blockflow.console:main), else the same entry point
    through this Python."""
    script = Path(sys.executable).parent / "blockflow"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "import sys; from blockflow.console import main; sys.exit(main())"]


def _child_env() -> dict:
    """The environment of every child: byte-code cached, as an installed package has it. With
    PYTHONDONTWRITEBYTECODE set (as in some shells) and no cache beside the sources, each start
    compiled blockflow's ~90 modules again (0.2-0.4 s); the cache goes to a folder of its own so
    the source tree stays clean."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = os.path.join(tempfile.gettempdir(), "blockflow-bench-pycache")
    return env


def _wall(cmd: list[str], cpu: list | None = None) -> float:
    """Seconds of wall time of one run of ``cmd``; its CPU seconds (user and system) appended to
    ``cpu``: steadier than the wall time when the machine is shared."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT, env=_child_env())
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if cpu is not None:
        cpu.append(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)
    return wall


def startup_rows(repeats):
    n = max(3, min(repeats, 15))
    floor_cmd = [sys.executable, "-c", "import numpy"]
    runs = {name: _blockflow_command() + ["run", str(ROOT / "sample_projects" / f"{file}.bflow.json")]
            for name, file in STARTUP_SAMPLES.items()}
    for cmd in (floor_cmd, *runs.values()):   # warm the file and byte-code caches
        _wall(cmd)
    times = {name: [] for name in ("numpy", *runs)}
    cpu = {name: [] for name in times}
    for _ in range(n):
        times["numpy"].append(_wall(floor_cmd, cpu["numpy"]))
        for name, cmd in runs.items():
            times[name].append(_wall(cmd, cpu[name]))
    floor = statistics.median(times["numpy"])
    rows = [("(k) python -c 'import numpy'", None, floor, None,
             f"the floor; {_spread(times['numpy'], cpu['numpy'])}")]
    for i, name in enumerate(runs):
        t = statistics.median(times[name])
        rows.append((f"(k) blockflow run {name}", None, t, 0.250 if i == 0 else None,
                     f"{(t - floor) * 1e3:.0f} ms over the floor; {_spread(times[name], cpu[name])}"))
    return rows


def _spread(ts, cpu) -> str:
    return (f"{min(ts) * 1e3:.0f}-{max(ts) * 1e3:.0f} ms over {len(ts)}; CPU median "
            f"{statistics.median(cpu) * 1e3:.0f} ms")


# ------------------------------------------------------------------------------- (l) memory

# The children: each prints its peak resident set in KiB and the loss. The peak is the address
# space's own (VmHWM): ru_maxrss of a child started with vfork (as subprocess does) also counts
# the parent's resident set, which exec leaves in the process's maximum (52 MiB for hand numpy
# run from run.py, 45 MiB alone).
_PEAK = """
def peak_kib():
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        import resource
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
"""

_OURS = _PEAK + """
import sys
import numpy as np
from blockflow.compile.compiler import compile_project
from blockflow.io.project_io import load_project
from blockflow.run.training import TrainConfig, Trainer
rng = np.random.default_rng(0)
feeds = {"x": rng.normal(size=(64, 784)).astype(np.float32),
         "y": np.eye(10, dtype=np.float32)[rng.integers(0, 10, 64)]}
program = compile_project(load_project(sys.argv[1]))
trainer = Trainer(program, TrainConfig(optimizer="adam", hyper={"lr": 1e-4}), feeds=feeds)
history = trainer.train(int(sys.argv[2]))
print(peak_kib(), history.final_loss)
"""

_HAND = _PEAK + """
import sys
import numpy as np
rng = np.random.default_rng(0)
x = rng.normal(size=(64, 784)).astype(np.float32)
y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 64)]
sizes = (784, 256, 256, 10)
params = []
for n_in, n_out in zip(sizes[:-1], sizes[1:]):
    lim = np.sqrt(6 / (n_in + n_out))
    params += [rng.uniform(-lim, lim, (n_in, n_out)).astype(np.float32), np.zeros(n_out, np.float32)]
slots = [(np.zeros_like(p), np.zeros_like(p)) for p in params]
lr, b1, b2, eps = np.float32(1e-4), np.float32(0.9), np.float32(0.999), np.float32(1e-7)
for k in range(1, int(sys.argv[1]) + 1):
    W1, b_1, W2, b_2, W3, b_3 = params
    h1 = x @ W1 + b_1
    a1 = np.maximum(h1, 0)
    h2 = a1 @ W2 + b_2
    a2 = np.maximum(h2, 0)
    logits = a2 @ W3 + b_3
    z = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(z)
    s = e.sum(axis=1, keepdims=True)
    loss = np.mean(-(y * (z - np.log(s))).sum(axis=1))
    d = (e / s - y) / np.float32(64)
    d2 = (d @ W3.T) * (h2 > 0)
    d1 = (d2 @ W2.T) * (h1 > 0)
    grads = [x.T @ d1, d1.sum(axis=0), a1.T @ d2, d2.sum(axis=0), a2.T @ d, d.sum(axis=0)]
    alpha = lr * np.sqrt(1 - b2 ** k) / (1 - b1 ** k)
    for i, g in enumerate(grads):
        m, v = slots[i]
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        params[i] = params[i] - alpha * m / (np.sqrt(v) + eps)
        slots[i] = (m, v)
print(peak_kib(), float(loss))
"""


def _peak_kib(args: list[str]) -> tuple[int, float]:
    out = subprocess.run([sys.executable, "-c", *args], check=True, capture_output=True, text=True, cwd=ROOT,
                         env=_child_env())
    kib, loss = out.stdout.split()
    return int(kib), float(loss)


def memory_rows(repeats, mlp_project):
    from blockflow.io.project_io import save_project

    n = max(3, min(repeats // 4, 7))
    with tempfile.TemporaryDirectory(prefix="blockflow-bench-") as folder:
        path = os.path.join(folder, "mlp.bflow.json")
        save_project(mlp_project(), path)
        hand, ours = [], []
        _peak_kib([_OURS, path, "1"])    # the byte-code cache written
        for _ in range(n):
            hand.append(_peak_kib([_HAND, str(STEPS)])[0])
            ours.append(_peak_kib([_OURS, path, str(STEPS)])[0])
    h, o = statistics.median(hand), statistics.median(ours)
    ratios = sorted(b / a for a, b in zip(hand, ours))
    note = (f"peak RSS, MiB: numpy {min(hand) / 1024:.1f}-{max(hand) / 1024:.1f}, blockflow "
            f"{min(ours) / 1024:.1f}-{max(ours) / 1024:.1f} ({ratios[0]:.2f}-{ratios[-1]:.2f}x over {n} pairs); "
            f"{STEPS} Adam steps")
    return [("(l) train-memory: MLP peak RSS", h / 1024, o / 1024, 1.30, note, "MiB")]
