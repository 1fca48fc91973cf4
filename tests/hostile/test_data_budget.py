"""Data read for a run counts against the memory budget: a data file small on disk that declares
more than the budget is refused from its headers (`check` as well as `run`), and a CSV given with
--feed is streamed into one array like a dataset's, never parsed into Python lists first."""
from __future__ import annotations

import numpy as np
from hostile_kit import baseline_rss, changed_paths, run_cli, snapshot
from test_loader_data_files import npz_bomb, raw_npy_header

from blockflow.project import Project
from blockflow.io.project_io import save_project

MiB = 1024 ** 2


def test_a_dataset_file_over_the_run_budget_is_refused_before_it_is_read(tmp_path):
    """Two members of 200 MB of zeros (a few hundred KB on disk) against a 100 MB budget:
    before, `run --memory-budget` read all of it and `check` ignored any budget."""
    npz_bomb(tmp_path / "big.npz", members=2, each=200 * MiB)
    project = Project()
    project.add_page("main").add_node("NumpyDataset", id="data", attrs={"path": "big.npz"})
    save_project(project, tmp_path / "p.bflow.json")
    floor = baseline_rss()
    before = snapshot(tmp_path)
    for command in ("check", "run"):
        r = run_cli(command, tmp_path / "p.bflow.json", "--memory-budget", "100M", cwd=tmp_path)
        r.assert_clean_message()
        assert r.returncode == 1, r.output            # a diagnostic on the dataset block
        assert "main/data" in r.output and "'big.npz'" in r.output, r.output
        assert "more than the memory budget of 100.0 MiB" in r.output, r.output
        assert r.peak_rss < floor + 48 * MiB, (command, r.peak_rss / MiB, floor / MiB)
    assert changed_paths(before, snapshot(tmp_path)) == set()


def test_a_csv_feed_is_streamed_into_one_array(tmp_path):
    """12 MB of one number per line (6 million rows): before, 1.7 GB and 10 s, or a MemoryError
    (exit 5) under a 1 GB cap; now the 48 MB array and little more."""
    (tmp_path / "feed.csv").write_text("0\n" * 6_000_000)
    _open_sum_page(tmp_path)
    floor = baseline_rss()
    r = run_cli("run", tmp_path / "p.bflow.json", "--feed", "x=feed.csv", cap_bytes=1024 ** 3, cwd=tmp_path)
    r.assert_clean_message()
    assert r.returncode == 0, r.output
    assert r.peak_rss < floor + 48 * MiB + 64 * MiB, (r.peak_rss / MiB, floor / MiB)
    # a feed file declaring more than the budget allows is refused before it is filled in
    r = run_cli("run", tmp_path / "p.bflow.json", "--feed", "x=feed.csv", "--memory-budget", "20M",
                cap_bytes=1024 ** 3, cwd=tmp_path)
    r.assert_clean_message()
    assert r.returncode == 3 and "--feed x" in r.stderr and "more than the memory budget" in r.stderr, r.output


def _open_sum_page(tmp_path):
    project = Project()
    page = project.add_page("main")
    page.add_node("Placeholder", id="x", attrs={"shape": [-1], "dtype": "float64"})
    page.add_node("Sum", id="s")
    page.connect("x", "output", "s", "input")
    save_project(project, tmp_path / "p.bflow.json")
    return tmp_path / "p.bflow.json"


def test_an_npy_feed_is_judged_from_its_header_before_it_is_allocated(tmp_path):
    """A 100-byte .npy whose header claims 800 MB, and a real 64 MB one over a 20 MB budget: before,
    np.load sized its buffer from the header (800 MB asked for, a MemoryError in a smaller
    process) and read a feed of any size past the budget; now both are refused from the header,
    as a dataset's .npy is (blockflow.datafiles)."""
    header = "{'descr': '<f8', 'fortran_order': False, 'shape': (100000000,), }"
    (tmp_path / "liar.npy").write_bytes(raw_npy_header(header + " " * (117 - len(header)) + "\n") + bytes(100))
    np.save(tmp_path / "big.npy", np.zeros(8 * MiB))
    path = _open_sum_page(tmp_path)
    floor = baseline_rss()
    for feed, extra, words in (("liar.npy", ("--memory-budget", "2G"), "800,000,000 bytes, but only 100 follow its header"),
                               ("big.npy", ("--memory-budget", "20M"), "more than the memory budget of 20.0 MiB")):
        r = run_cli("run", path, "--feed", f"x={feed}", *extra, cap_bytes=1024 ** 3, cwd=tmp_path)
        r.assert_clean_message()
        assert r.returncode == 3 and f"--feed x: cannot read {feed}: its array" in r.stderr, r.output
        assert words in r.stderr, r.output
        assert r.peak_rss < floor + 48 * MiB, (feed, r.peak_rss / MiB, floor / MiB)
    r = run_cli("run", path, "--feed", "x=big.npy", cap_bytes=1024 ** 3, cwd=tmp_path)
    assert r.returncode == 0 and "main/s:output" in r.stdout, r.output


def test_train_options_have_the_ranges_of_a_projects_settings():
    """--steps 10**20 ran until killed, --seed -5 was taken: usage errors now, as in a project."""
    from blockflow.cli import EXIT_USAGE

    for option, value, words in (("--steps", "99999999999999999999", "from 0 to 10,000,000"),
                                 ("--seed", "-5", "from 0 to 2,147,483,647"),
                                 ("--batch-size", "x", "not a whole number")):
        r = run_cli("train", "sample_projects/xor.bflow.json", option, value, "-q")
        assert r.returncode == EXIT_USAGE and f"argument {option}" in r.stderr and words in r.stderr, r.output


def test_feed_files_are_judged_against_the_budget_together_as_they_are_read(tmp_path):
    """Three feeds of 40 MiB against a 100 MiB budget (a .npy, a .csv, a .npy): judged each alone,
    all three were read, 120 MiB, before the run refused them together; N files under the
    budget took N times it (an out-of-memory kill past physical memory). Now the third is refused
    from its header, and the process never holds more than the budget's worth of feeds."""
    project = Project()
    page = project.add_page("main")
    for name in "abc":
        page.add_node("Placeholder", id=name, attrs={"shape": [-1], "dtype": "float64"})
    page.add_node("AddN", id="s")
    for i, name in enumerate("abc"):
        page.connect(name, "output", "s", f"inputs[{i}]")
    save_project(project, tmp_path / "p.bflow.json")
    np.save(tmp_path / "a.npy", np.zeros(5 * MiB))
    (tmp_path / "b.csv").write_text("0\n" * (5 * MiB))
    np.save(tmp_path / "c.npy", np.zeros(5 * MiB))
    floor = baseline_rss()
    feeds = ("--feed", "a=a.npy", "--feed", "b=b.csv", "--feed", "c=c.npy")
    r = run_cli("run", tmp_path / "p.bflow.json", *feeds, "--memory-budget", "100M", "--forward-only",
                cap_bytes=1024 ** 3, cwd=tmp_path)
    r.assert_clean_message()
    assert r.returncode == 3, r.output
    assert ("--feed c: cannot read c.npy: its array (float64[5242880]) would take 40.00 MiB (41,943,040 bytes) "
            "and the feeds read before it 80.00 MiB (83,886,080 bytes): together more than the memory budget of "
            "100.0 MiB (set with --memory-budget)") in r.stderr, r.output
    assert r.peak_rss < floor + 80 * MiB + 32 * MiB, (r.peak_rss / MiB, floor / MiB)
    r = run_cli("run", tmp_path / "p.bflow.json", *feeds, "--memory-budget", "170M", "--forward-only",
                cap_bytes=1024 ** 3, cwd=tmp_path)
    assert r.returncode == 0 and "main/s:sum" in r.stdout, r.output


def test_a_datasets_row_order_counts_against_the_budget(tmp_path):
    """A one-column .npy of 8 Mi float32 rows (32 MiB) against a 100 MiB budget: the split's
    permutation and its sorted parts (8 bytes a row, twice: 128 MiB) and an epoch's order were
    made uncounted, so the run went on to hold about three times its budget; now they are
    reserved first, and the run is refused naming them."""
    np.save(tmp_path / "d.npy", np.zeros(8 * MiB, np.float32))
    project = Project()
    project.add_page("main").add_node("NumpyDataset", id="data", attrs={"path": "d.npy", "labels_key": "",
                                                                         "batch_size": 1024})
    save_project(project, tmp_path / "p.bflow.json")
    floor = baseline_rss()
    r = run_cli("run", tmp_path / "p.bflow.json", "--memory-budget", "100M", cap_bytes=1024 ** 3, cwd=tmp_path)
    r.assert_clean_message()
    assert r.returncode == 4, r.output
    assert ("main/data (NumpyDataset) in the forward pass: NumpyDataset's order of its 8,388,608 examples would be "
            "int64[16777216] (128.0 MiB)") in r.stderr, r.output
    assert r.peak_rss < floor + 32 * MiB + 32 * MiB, (r.peak_rss / MiB, floor / MiB)
    r = run_cli("run", tmp_path / "p.bflow.json", "--memory-budget", "200M", cap_bytes=1024 ** 3, cwd=tmp_path)
    assert r.returncode == 0 and "main/data:features" in r.stdout, r.output
