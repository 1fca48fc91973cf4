"""Data read for a run counts against the memory budget: a data file small on disk that declares
more than the budget is refused from its headers (`check` as well as `run`), and a CSV given with
--feed is streamed into one array like a dataset's, never parsed into Python lists first."""
from __future__ import annotations

from hostile_kit import baseline_rss, changed_paths, run_cli, snapshot
from test_loader_data_files import npz_bomb

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
    project = Project()
    page = project.add_page("main")
    page.add_node("Placeholder", id="x", attrs={"shape": [-1], "dtype": "float64"})
    page.add_node("Sum", id="s")
    page.connect("x", "output", "s", "input")
    save_project(project, tmp_path / "p.bflow.json")
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


def test_train_options_have_the_ranges_of_a_projects_settings():
    """--steps 10**20 ran until killed, --seed -5 was taken: usage errors now, as in a project."""
    from blockflow.cli import EXIT_USAGE

    for option, value, words in (("--steps", "99999999999999999999", "from 0 to 10,000,000"),
                                 ("--seed", "-5", "from 0 to 2,147,483,647"),
                                 ("--batch-size", "x", "not a whole number")):
        r = run_cli("train", "sample_projects/xor.bflow.json", option, value, "-q")
        assert r.returncode == EXIT_USAGE and f"argument {option}" in r.stderr and words in r.stderr, r.output
