"""Suite-wide set-up: headless Qt, single-threaded BLAS, Hypothesis profiles.

The environment is set before anything imports numpy or creates a QApplication; setdefault lets
a developer override it (QT_QPA_PLATFORM=xcb to watch the GUI tests).
"""
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

from hypothesis import HealthCheck, settings  # noqa: E402  (after the environment on purpose)

# "ci" (default): the same examples on every run, no timing-based failures on a loaded 2-core box.
settings.register_profile(
    "ci", derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
# "dev": fresh random examples each run, to find new failures (HYPOTHESIS_PROFILE=dev).
settings.register_profile("dev", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


import pytest  # noqa: E402


@pytest.fixture(autouse=True, scope="session")
def _own_files_ledger(tmp_path_factory):
    """The ledger of files blockflow writes on its own (blockflow.ownfiles) in a folder of the
    test session, never the developer's: saves and pictures in tests (and their child processes)
    must neither read nor grow it."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BLOCKFLOW_STATE_DIR", str(tmp_path_factory.mktemp("state")))
        yield


@pytest.fixture(autouse=True)
def _automatic_gc_outside_the_editor(request):
    """The editor turns Python's automatic garbage collection off once it has a worker thread and
    collects on the UI thread's timer instead (blockflow/gui/common/gcmain.py). Tests without Qt
    spin no event loop: they get the automatic collector back for their run."""
    import gc

    if {"qtbot", "qapp"} & set(request.fixturenames):
        yield
        return
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


#: how long a GUI test's teardown waits for the editor's background jobs it left
LEFT_JOBS_SECONDS = 120


@pytest.fixture(autouse=True)
def _no_editor_job_left_running(request):
    """After a GUI test, once its windows are closed (autouse: set up before qtbot, so torn down
    after it), wait for every editor Worker's jobs: none runs on into the next test, competing for
    the GIL with what that test measures, or entering Python while it starts tracemalloc
    (tests/memory_tracing.py)."""
    yield
    if not {"qtbot", "qapp"} & set(request.fixturenames):
        return
    import sys

    # a document the test left (its window closed or not) queues no more compiles: one of a
    # thousand composites went on compiling them in the next test's event loop
    compiling = sys.modules.get("blockflow.gui.document.compiling")
    if compiling is not None:
        compiling.stop_every_queue()
    worker = sys.modules.get("blockflow.gui.common.worker")
    if worker is not None and not worker.wait_for_all_workers(LEFT_JOBS_SECONDS * 1000):
        pytest.fail(f"the editor's background jobs were still running {LEFT_JOBS_SECONDS} s after the test")


@pytest.fixture
def short_ways(monkeypatch):
    """A list that gets, for every run that tried the runtime's short way (runtime._rerun),
    whether it took it."""
    import blockflow.run.runtime as runtime

    taken = []
    real = runtime._rerun

    def counting(*args):
        res = real(*args)
        taken.append(res is not None)
        return res

    monkeypatch.setattr(runtime, "_rerun", counting)
    return taken
