"""What a long-lived process (the editor, which compiles a page again at each edit) keeps of the
data files dataset blocks read (blockflow.datafiles.DataFiles): it was kept by path, size and
modification time outside the memory budget, so a project naming many files, or a file rewritten
again and again, made the editor hold every array it had ever read. What is kept now counts
against the budget, the least recently used let go first; no file the budget takes alone is
refused for what is kept (an earlier attempt at letting go, reverted, made the editor refuse
valid files)."""
from __future__ import annotations

import gc
import os
import weakref

import numpy as np

from blockflow.compile.compiler import compile_project
from blockflow.io.project_io import load_project, save_project
from blockflow.project import Project
from blockflow.registry import default_registry
from blockflow.run.runtime import run_forward

REG = default_registry()
MiB = 2 ** 20


def _project(tmp_path, paths: list):
    project = Project()
    page = project.add_page("main")
    for i, path in enumerate(paths):
        page.add_node("NumpyDataset", id=f"d{i}", attrs={"path": path, "labels_key": "", "test_fraction": 0.0,
                                                         "batch_size": 64})
    save_project(project, tmp_path / "p.bflow.json", backup=False)
    return load_project(tmp_path / "p.bflow.json")


def _compiled(project):
    program = compile_project(project, "main", REG)
    assert program.ok, program.diagnostics
    return program


def _mib_file(tmp_path, name: str, mib: int = 1, value: float = 0.0) -> None:
    np.save(tmp_path / name, np.full((mib * 1024, 128), value))      # float64: 1 MiB per 1024 rows


def test_files_read_by_compile_after_compile_stay_within_the_memory_budget(tmp_path, monkeypatch):
    """A page whose dataset block is pointed at one file after another, as edits in the editor do:
    ten files of 1 MiB against a budget of 3 MiB. Before, all ten stayed alive (any number of
    files, any number of times the budget); now at most three."""
    monkeypatch.setenv("BLOCKFLOW_MEMORY_BUDGET", "3M")
    for i in range(10):
        _mib_file(tmp_path, f"f{i}.npy")
    project = _project(tmp_path, ["f0.npy"])
    alive = []
    for i in range(10):
        project.page("main").set_attr("d0", "path", f"f{i}.npy")
        _compiled(project)
        alive.append(weakref.ref(project.data_files.arrays(f"f{i}.npy")["x"]))
    gc.collect()
    assert sum(r() is not None for r in alive) <= 3
    assert alive[-1]() is not None                      # the one in use is kept
    assert project.data_files.held_bytes <= 3 * MiB


def test_a_rewritten_file_lets_its_old_contents_go(tmp_path, monkeypatch):
    """Before, each version of a file the editor read stayed kept under its old size and time."""
    monkeypatch.setenv("BLOCKFLOW_MEMORY_BUDGET", "64M")
    _mib_file(tmp_path, "f.npy")
    project = _project(tmp_path, ["f.npy"])
    versions = []
    for i in range(5):
        _mib_file(tmp_path, "f.npy", value=i)
        os.utime(tmp_path / "f.npy", ns=(10 ** 9 * (i + 1), 10 ** 9 * (i + 1)))
        _compiled(project)
        versions.append(weakref.ref(project.data_files.arrays("f.npy")["x"]))
    gc.collect()
    assert [r() is not None for r in versions] == [False] * 4 + [True]
    assert project.data_files.held_bytes == MiB


def test_files_the_budget_takes_each_alone_are_never_refused_for_what_is_kept(tmp_path, monkeypatch):
    """Two files of 2 MiB on one page against a budget of 3 MiB: they cannot both be kept, so the
    second read lets the first go, and a run reads it again; neither is refused. A file past the
    budget alone still is, with the same message as before."""
    monkeypatch.setenv("BLOCKFLOW_MEMORY_BUDGET", "3M")
    _mib_file(tmp_path, "a.npy", 2, 1.0)
    _mib_file(tmp_path, "b.npy", 2, 2.0)
    project = _project(tmp_path, ["a.npy", "b.npy"])
    program = _compiled(project)
    for _ in range(2):
        result = run_forward(program)
        assert result.value("d0", "features")[0, 0] == 1.0 and result.value("d1", "features")[0, 0] == 2.0
        assert project.data_files.held_bytes <= 3 * MiB
    _mib_file(tmp_path, "big.npy", 4)
    project.page("main").set_attr("d1", "path", "big.npy")
    program = compile_project(project, "main", REG)
    assert [d.node for d in program.errors] == ["d1"]
    assert "more than the memory budget of 3.0 MiB" in program.errors[0].message


def test_tables_and_archives_count_as_arrays_do(tmp_path, monkeypatch):
    """A table and an .npz archive are counted too; a read lets the least recently used go."""
    from blockflow.datafiles import DataFiles

    monkeypatch.setenv("BLOCKFLOW_MEMORY_BUDGET", "3M")
    (tmp_path / "t.csv").write_text("a,b\n" + "1,2\n" * 65536)                 # float64 [65536, 2]: 1 MiB
    np.savez(tmp_path / "z.npz", x=np.zeros((1024, 128)), y=np.zeros(1024))    # 1 MiB and 8 KiB
    _mib_file(tmp_path, "n.npy", 2)
    files = DataFiles(tmp_path)
    files.table("t.csv")
    files.arrays("z.npz")
    assert files.held_bytes == 2 * MiB + 8192
    files.table("t.csv")                      # the table is now the more recently used
    files.arrays("n.npy")
    assert files.held_bytes == 3 * MiB        # the archive went, the table stayed
    assert files.table("t.csv")[1].shape == (65536, 2)


def test_a_project_holding_its_data_files_still_copies_and_pickles(tmp_path):
    # the compile keeps a DataFiles on the project; its lock could not be copied (deepcopy of a
    # compiled project raised TypeError: cannot pickle '_thread.lock' object)
    import copy
    import pickle

    from blockflow.datafiles import DataFiles

    files = DataFiles(tmp_path)
    for clone in (copy.deepcopy(files), copy.copy(files), pickle.loads(pickle.dumps(files))):
        assert type(clone) is DataFiles and clone.base_dir == files.base_dir and clone.held_bytes == 0
        assert clone._lock is not files._lock
