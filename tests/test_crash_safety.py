"""Crash-safe saving (issue 7): kill a process with SIGKILL at random moments while it saves a
large project again and again; afterwards the file is always a complete version and loads, and
its backup too."""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from blockflow.io.project_io import load_project

ROOT = Path(__file__).resolve().parents[1]
#: kills per run of the suite (BLOCKFLOW_KILL_TRIALS=200 for a long run)
TRIALS = int(os.environ.get("BLOCKFLOW_KILL_TRIALS", "12"))

SAVER = textwrap.dedent("""
    import sys
    import numpy as np
    from blockflow.project import Project
    from blockflow.io.project_io import save_project

    path, base = sys.argv[1], int(sys.argv[2])   # versions of this run: base, base + 1, ...
    rng = np.random.default_rng(0)
    project = Project(metadata={"title": "big", "version_written": -1})
    page = project.add_page("main")
    for i in range(8):   # 8 x 250k float32: a 2.7 MB file (base64 arrays)
        page.add_node("Variable", id=f"W{i}", attrs={"shape": [250, 1000]},
                      state={"value": rng.normal(size=(250, 1000)).astype(np.float32)})
    k = base
    while True:
        project.metadata["version_written"] = k
        print("start", k, flush=True)
        save_project(project, path)
        print("done", k, flush=True)
        k += 1
""")


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_sigkill_during_saves_leaves_a_complete_old_or_new_file(tmp_path):
    path = tmp_path / "big.bflow.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    rng = random.Random(1234)
    mid_save = 0
    versions = []
    for trial in range(TRIALS):
        base = trial * 1000
        proc = subprocess.Popen([sys.executable, "-c", SAVER, str(path), str(base)], stdout=subprocess.PIPE,
                                env=env)
        try:
            lines = [proc.stdout.readline(), proc.stdout.readline()]
            assert lines[1].split() == [b"done", str(base).encode()], lines   # one complete version
            time.sleep(rng.uniform(0.0, 0.4))                 # then kill it wherever it is
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            proc.wait(timeout=30)
            lines += proc.stdout.read().splitlines()
            proc.stdout.close()
        assert proc.returncode == -signal.SIGKILL
        last = lines[-1].split()
        project = load_project(path)                  # complete: it loads (a torn file would not)
        written = project.metadata["version_written"]
        assert len(project.pages[0].nodes) == 8
        if last[0] == b"start":                       # killed in the middle of save k
            k = int(last[1])
            mid_save += 1
            assert written in (k - 1, k), (written, last)  # the old version, or the new one whole
        else:
            assert written == int(last[1]), (written, last)
        if trial == 0 and written == base:
            # only one version was ever written whole: there was no older file to back up (a
            # slow machine can be killed before the second save makes its backup)
            continue
        backup = load_project(str(path) + ".bak")
        assert backup.metadata["version_written"] in (written - 1, written) or written == base
        versions.append(written - base)
    assert mid_save >= TRIALS // 2, f"only {mid_save} of {TRIALS} kills landed during a save"
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    print(f"\n{TRIALS} SIGKILLs ({mid_save} in the middle of a save): the file and its backup always "
          f"loaded complete; versions reached {min(versions)}-{max(versions)}; stray temporary files "
          f"left: {len(leftovers)}", file=sys.stderr)
