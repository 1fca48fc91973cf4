"""The editor's one worker mechanism (blockflow.gui.common.worker): jobs off the UI thread, one
at a time, their results and posted calls delivered on the UI thread, waiting and shutdown."""
from __future__ import annotations

import threading

import pytest
from PySide6.QtCore import QObject

from blockflow.gui.common.worker import Worker


def test_jobs_run_off_the_ui_thread_in_order_and_report_on_it(qtbot, qapp):
    worker = Worker()
    ran, done, posted = [], [], []

    def job(n):
        def fn(post):
            ran.append((n, threading.get_ident()))
            post(lambda: posted.append((n, threading.get_ident())))
            return n * 10
        return fn

    for n in range(3):
        worker.submit(job(n), lambda r: done.append((r, threading.get_ident())))
    assert worker.wait(5000)
    qtbot.waitUntil(lambda: len(done) == 3)
    ui = threading.get_ident()
    assert [n for n, _ in ran] == [0, 1, 2] and all(t != ui for _, t in ran)
    assert len({t for _, t in ran}) == 1                 # one thread for the worker
    assert [r for r, _ in done] == [0, 10, 20] and all(t == ui for _, t in done)
    assert sorted(n for n, _ in posted) == [0, 1, 2] and all(t == ui for _, t in posted)


def test_a_failing_job_is_reported_and_the_next_one_still_runs(qtbot, capsys):
    worker = Worker()
    done = []

    def broken(_post):
        raise RuntimeError("a bug in a job")

    worker.submit(broken, done.append)
    worker.submit(lambda _post: "after", done.append)
    assert worker.wait(5000)
    qtbot.waitUntil(lambda: len(done) == 2)
    assert isinstance(done[0], RuntimeError) and done[1] == "after"    # it ends too: with its error
    assert "a bug in a job" in capsys.readouterr().err


@pytest.mark.parametrize("error", [SystemExit(3), KeyboardInterrupt(), GeneratorExit()])
def test_a_job_dying_of_any_exception_still_tells_its_owner_it_is_over(qtbot, capsys, error):
    worker = Worker()
    done = []

    def dies(_post):
        raise error

    worker.submit(dies, done.append)
    worker.submit(lambda _post: "after", done.append)
    assert worker.wait(5000)
    qtbot.waitUntil(lambda: len(done) == 2)
    assert done == [error, "after"]
    assert type(error).__name__ in capsys.readouterr().err


def test_deleting_the_owner_waits_for_the_job_under_way(qtbot):
    owner = QObject()
    worker = Worker(owner)
    gate, finished = threading.Event(), threading.Event()

    def slow(_post):
        gate.wait(5)
        finished.set()
        return 1

    worker.submit(slow, lambda _r: None)
    threading.Timer(0.05, gate.set).start()
    owner.deleteLater()
    del worker
    qtbot.waitUntil(finished.is_set, timeout=5000)
    qtbot.wait(20)             # a result posted to a deleted worker is dropped without an error


# ------------------------------------------------------------------------------- page compiles on it


def _held_compiles(monkeypatch):
    """Page compiles that wait for ``gate`` on the worker thread (the UI thread's never do)."""
    from blockflow.gui.document import compiling

    gate, real = threading.Event(), compiling.compile_page
    ui = threading.get_ident()

    def held(*args, **kw):
        if threading.get_ident() != ui:
            gate.wait(5)
        return real(*args, **kw)

    monkeypatch.setattr(compiling, "compile_page", held)
    return gate


def test_a_caller_needing_the_program_now_waits_for_the_compile_under_way(qtbot, monkeypatch):
    from blockflow.gui.document.document import Document

    gate = _held_compiles(monkeypatch)
    doc = Document()
    doc.add_node("Softmax", (0, 0))
    assert doc.ready_program() is None                 # held on the worker: not ready in WAIT
    threading.Timer(0.1, gate.set).start()
    program = doc.program()                            # waits for that very compile
    assert program.page_name == doc.current_page and any(d.node == "Softmax_1" for d in program.diagnostics)
    assert doc.ready_program() is program


def test_a_document_dropped_during_a_compile_waits_for_it(qtbot, monkeypatch):
    from blockflow.gui.document.document import Document

    gate = _held_compiles(monkeypatch)
    doc = Document()
    doc.add_node("Softmax", (0, 0))
    assert doc.ready_program() is None
    threading.Timer(0.1, gate.set).start()
    doc.deleteLater()
    del doc
    qtbot.wait(300)          # the compile lands in a worker that is gone: dropped, no error
    assert gate.is_set()


def test_the_first_compile_of_a_big_page_waits_for_the_first_frame(qtbot, monkeypatch):
    """Started at once it would share the interpreter with the scene being built; a small page
    still compiles at once, and an edit of the big page recompiles at once."""
    from blockflow.composite import Composite, block_name
    from blockflow.gui.document import compiling
    from blockflow.gui.document.document import Document
    from blockflow.project import Project

    monkeypatch.setattr(compiling, "BIG_PAGE", 40)
    project = Project()
    chain = Composite("Chain")
    for k in range(10):
        chain.page.add_node("Const", id=f"c{k}")
    project.composites["Chain"] = chain
    page = project.add_page("big")
    for k in range(5):                         # 5 instances of 10 blocks: 50 flat blocks
        page.add_node(block_name("Chain"), id=f"i{k}")
    project.add_page("small").add_node("Const", id="c")
    doc = Document(project)
    started = []
    real = compiling._compile
    monkeypatch.setattr(compiling, "_compile", lambda job: started.append(job.name) or real(job))
    with qtbot.waitSignal(doc.program_ready, timeout=3000, check_params_cb=lambda name: name == "big"):
        assert doc.ready_program("big") is None and started == []   # not even started
    assert started == ["big"] and doc.ready_program("big").ok
    assert doc.ready_program("small") is not None                    # a small page: at once


# ------------------------------------------------------------------- garbage collection (gcmain.py)


def test_once_work_can_leave_the_ui_thread_garbage_is_collected_on_it_only(qtbot):
    """A collection on a worker's thread destroys Qt objects there and can deadlock against the
    UI thread (seen: a closed window's garbage freed by a compile job). With a Worker about, the
    automatic collector is off and the UI thread collects cyclic garbage on a timer."""
    import gc
    import weakref

    from blockflow.gui.common.gcmain import UiThreadCollector

    Worker()
    assert not gc.isenabled()
    assert len(QApplication_instance().findChildren(UiThreadCollector)) == 1
    Worker()                                                  # installed once
    assert len(QApplication_instance().findChildren(UiThreadCollector)) == 1

    class Cycle:
        pass

    made = []
    for _ in range(3):
        a, b = Cycle(), Cycle()
        a.other, b.other = b, a
        made.append(weakref.ref(a))
    del a, b
    collected_on = []
    gc.callbacks.append(lambda phase, info: collected_on.append(threading.get_ident())
                        if phase == "start" else None)
    try:
        junk = [[object()] for _ in range(3 * gc.get_threshold()[0])]   # kept: past the threshold
        qtbot.waitUntil(lambda: all(ref() is None for ref in made), timeout=5000)
        del junk
    finally:
        gc.callbacks.pop()
    assert collected_on and set(collected_on) == {threading.get_ident()}


def test_a_job_allocating_past_the_threshold_collects_nothing_on_its_thread(qtbot):
    import gc

    worker = Worker()
    seen = []
    gc.callbacks.append(lambda phase, info: seen.append(threading.get_ident()) if phase == "start" else None)
    try:
        def job(post):
            junk = [[object()] for _ in range(20 * gc.get_threshold()[0])]
            return len(junk)
        done = []
        worker.submit(job, done.append)
        assert worker.wait(5000)
        qtbot.waitUntil(lambda: bool(done), timeout=5000)
    finally:
        gc.callbacks.pop()
    assert done == [20 * gc.get_threshold()[0]]
    assert all(t == threading.get_ident() for t in seen)        # only ever the UI thread


def QApplication_instance():  # noqa: N802  (read like Qt)
    from PySide6.QtWidgets import QApplication

    return QApplication.instance()
