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
