"""The hostile suite's own tools can fail: the cap stops a big allocation, the peak is measured,
and the snapshot sees a changed, an added and a removed file."""
from hostile_kit import baseline_rss, changed_paths, run_python, snapshot


def test_the_memory_cap_stops_a_child_that_allocates_too_much():
    r = run_python("import numpy as np\nnp.ones(3 * 1024 ** 3, np.uint8)\n", cap_bytes=1024 ** 3)
    assert r.returncode != 0 and "MemoryError" in r.output


def test_the_peak_of_a_child_is_measured():
    small = baseline_rss()
    big = run_python("import numpy as np\na = np.ones(200 * 1024 ** 2, np.uint8)\n")
    assert big.returncode == 0, big.output
    assert 0 < small < 400 * 1024 ** 2
    assert big.peak_rss - small > 150 * 1024 ** 2


def test_snapshot_sees_every_change(tmp_path):
    (tmp_path / "a").write_text("1")
    (tmp_path / "b").write_text("2")
    before = snapshot(tmp_path)
    (tmp_path / "a").write_text("3")
    (tmp_path / "b").unlink()
    (tmp_path / "c").symlink_to("/etc/passwd")
    assert changed_paths(before, snapshot(tmp_path)) == {str(tmp_path / n) for n in "abc"}
