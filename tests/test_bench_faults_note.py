"""benchmarks/run.py's page-fault note (timeit_pair, faults_note): what a row's note says."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("resource")


def _runner():
    path = Path(__file__).resolve().parent.parent / "benchmarks" / "run.py"
    spec = importlib.util.spec_from_file_location("bench_run_for_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_fault_note_names_the_pairs_sides_neutrally_and_only_on_rows_that_timed_a_pair(monkeypatch, capsys):
    """Pairs are not always numpy against blockflow (torch against torch, ONNX Runtime, the raw net
    against composites, blockflow against itself), and a row of one figure timed no pair."""
    bench = _runner()
    # the process's fault counter, as the allocator would move it: a 64 MB array faulted every
    # call alone, not in a test worker whose earlier tests had changed how memory is given back
    faults = [0]
    monkeypatch.setattr(bench, "_minor_faults", lambda: faults[0])

    def faulting():
        faults[0] += 100
        np.ones(16, np.float32).sum()

    def workload(repeats):
        h, o = bench.timeit_pair(faulting, faulting, repeats)
        return [("a pair", h, o, 1e9, "'numpy' column: torch"), ("an import", None, 0.001, None, "one figure")]

    monkeypatch.setattr(bench, "WORKLOADS", {"fake": workload})
    bench.main(["fake", "--quick"])
    out = capsys.readouterr().out
    pair = next(line for line in out.splitlines() if line.startswith("a pair"))
    single = next(line for line in out.splitlines() if line.startswith("an import"))
    assert "page faults a call (first/second function)" in pair and "numpy/blockflow" not in pair
    assert "page faults" not in single
    assert "100/100, 100/100" not in pair and "100/100" in pair    # one pair, both sides counted
