"""dev.sh's choices that are not set-up: how many processes run the test suite."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _workers(env_value=None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "BLOCKFLOW_TEST_WORKERS"}
    if env_value is not None:
        env["BLOCKFLOW_TEST_WORKERS"] = env_value
    out = subprocess.run(["bash", "-c", f"source {ROOT / 'dev.sh'} && test_workers"], env=env,
                         capture_output=True, text=True, timeout=60, check=True)
    return out.stdout.strip()


def test_the_suite_runs_in_one_process_per_cpu_at_most_four():
    # the CPUs this process may use, as nproc counts them; the tests' OMP_NUM_THREADS=1 (which
    # nproc would answer) is not taken for the machine's size
    assert os.environ.get("OMP_NUM_THREADS") == "1"
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    assert int(_workers()) == min(cpus, 4)


@pytest.mark.parametrize("given", ["1", "3", "8"])
def test_the_number_of_workers_can_be_given(given):
    assert _workers(given) == given
