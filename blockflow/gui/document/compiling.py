"""The editor's compiled pages: recompiled only when what a page computes changed, and never for
long on the UI thread.

PagePrograms keeps the last Program of each page with the edit stamp it was compiled at. The
Document gives a page a new stamp on each edit that can change what the page computes (blocks,
wires, attrs, inline values, feeds, Variable state, the loss mark, the page's name, the
project's folder); labels, positions, the page note and the plotted metrics keep the stamp, so
they recompile nothing.

Compiles run on one worker thread, on a copy of the page taken on the UI thread as the compile
starts (snapshots.py): the worker never reads the live model, which the UI thread goes on
editing. The UI thread waits for a compile at most WAIT seconds, so a small page is compiled
before the views look again, as if on the UI thread; a big one lands later, announced by
``ready``. A result whose stamp is no longer the page's is dropped. ``program(page)`` is for
callers that need the program now (tests, code driving the editor): it waits for the compile
under way of that very state, or compiles on the calling thread.
"""
from __future__ import annotations

import itertools
import threading
import time
import traceback
import weakref
from collections import OrderedDict

from PySide6.QtCore import QObject, Qt, QTimer, Signal

from blockflow.compile.compiler import compile_page, project_files
from blockflow.compile.flatten import flat_size
from blockflow.compile.program import Program
from blockflow.composite import Composite, composite_name, uses
from blockflow.project import Page
from blockflow.gui.common.worker import Worker
from blockflow.gui.document.snapshots import snapshot

__all__ = ["PagePrograms", "snapshot_composites", "stop_every_queue", "users_of", "WAIT"]

#: How long the UI thread waits for a compile before leaving it to land later (seconds).
WAIT = 0.05
#: A page that flattens to at least this many blocks has its first compile started FIRST_DELAY
#: seconds after it is asked for: started at once, it would share the interpreter with the
#: scene being built for the first frame and delay that frame by about its own length.
BIG_PAGE = 5_000
FIRST_DELAY = 0.1


def _reachable(composites: dict, start) -> set[str]:
    """The composites reachable from the composite names in ``start`` (themselves included)."""
    seen, todo = set(), [n for n in start if n in composites]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo.extend(n for n in uses(composites[name]) if n in composites and n not in seen)
    return seen


def _used_by(page: Page, composites: dict) -> set[str]:
    """The composites ``page`` uses, directly or not (its own, for a definition)."""
    direct = {composite_name(n.block) for n in page.nodes.values()} - {None}
    own = composite_name(page.name)
    return _reachable(composites, direct | ({own} if own else set()))


def snapshot_composites(page: Page, composites: dict) -> dict:
    """Copies of the composites ``page`` uses (directly or not), for a compile on another thread:
    the definitions' diagrams are copied as pages are; params are frozen Attrs, shared."""
    used = _used_by(page, composites)
    return {name: Composite(c.name, c.doc, list(c.params), snapshot(c.page), c.origin)
            for name, c in composites.items() if name in used}


def users_of(project, *names: str) -> list[str]:
    """The diagrams (pages and definitions) that use one of the composites ``names``, directly or
    not, in ``project.diagrams()``'s order, but for those composites' own. One pass over the
    diagrams, then a walk back from ``names`` over who uses whom: not a walk of everything each
    diagram reaches (each edit of a definition in a project of 600 composites chained cost 0.6 s
    that way; an import of them, 127 s), nor a pass per composite when an import adds many."""
    composites = project.composites
    used_by: dict = {}
    for cname, comp in composites.items():
        for block in {n.block for n in comp.page.nodes.values()}:      # the fast case of uses()
            if type(block) is str and block[:1] == "@":     # (also of one gone: an import undone)
                used_by.setdefault(block[1:], []).append(cname)
    reach, todo = set(names), list(names)
    while todo:
        for user in used_by.get(todo.pop(), ()):
            if user not in reach:
                reach.add(user)
                todo.append(user)
    blocks = {"@" + n for n in reach}
    out = [page.name for page in project.pages if any(n.block in blocks for n in page.nodes.values())]
    own = set(names)
    out += [comp.page.name for cname, comp in composites.items() if cname in reach and cname not in own]
    return out


class _Emitter(QObject):
    announce = Signal(str)       # a page compiled by program(), told after the caller returned


class _Task:
    """One compile: what it compiles and what came out (plain data, shared by both threads)."""

    def __init__(self, name: str, stamp: int, page: Page, registry, files, composites=None):
        self.name, self.stamp, self.page, self.registry, self.files = name, stamp, page, registry, files
        self.composites = composites or {}
        self.program: Program | None = None
        self.error: BaseException | None = None
        self.seconds = 0.0
        self.done = threading.Event()
        self.taken = False


def _compile(task: _Task) -> _Task:
    """Runs a _Task on the worker thread."""
    start = time.perf_counter()
    try:
        task.program = compile_page(task.page, task.registry, files=task.files, composites=task.composites)
    except BaseException as exc:       # a bug (compile_page reports diagram problems itself)
        task.error = exc
    task.seconds = time.perf_counter() - start
    task.page = task.composites = None     # the copies are not needed any more
    task.done.set()
    return task


#: every PagePrograms not yet collected (stop_every_queue)
_LIVE: weakref.WeakSet = weakref.WeakSet()


def stop_every_queue() -> None:
    """stop() on every PagePrograms: what tests call between two tests, whose windows' documents
    would otherwise go on compiling their queues in the next test's event loop."""
    for programs in list(_LIVE):
        try:
            programs.stop()
        except RuntimeError:      # its Qt object went with its document: no timer left to fire
            pass


class PagePrograms(QObject):
    """The programs of a Document's pages, compiled off the UI thread when a page's stamp changes;
    ``ready(name)`` is emitted on the UI thread when a page's program is current again."""

    ready = Signal(str)

    def __init__(self, document):
        super().__init__(document)
        # Weak: the document owns this object (a strong reference back would be a cycle, freed
        # in an order up to the garbage collector; see commands._DocRef).
        self._doc = weakref.ref(document)
        # Deleted with this object, the worker waits for a compile under way (worker.py).
        self._worker = Worker(self)
        self._emitter = _Emitter(self)
        self._emitter.announce.connect(self._announce, Qt.QueuedConnection)
        self._kick = QTimer(self)
        self._kick.setSingleShot(True)
        self._kick.setInterval(0)
        self._kick.timeout.connect(self._dispatch)
        self._late_kick = QTimer(self)
        self._late_kick.setSingleShot(True)
        self._late_kick.setInterval(int(FIRST_DELAY * 1000))
        self._late_kick.timeout.connect(self._dispatch)
        self._serial = itertools.count(1)
        self._stamps: dict[str, int] = {}
        self._programs: dict[str, tuple[int, Program]] = {}
        self._failed: dict[str, tuple[int, BaseException]] = {}
        self._wanted: OrderedDict[str, None] = OrderedDict()
        self._job: _Task | None = None
        self._dispatching = False
        self._pages: dict[str, Page] | None = None    # by name (see _page)
        #: seconds of the last compile of each page (on whichever thread it ran)
        self.seconds: dict[str, float] = {}
        _LIVE.add(self)

    # ---------------------------------------------------------------- edits (Document)
    def stamp(self, name: str) -> int:
        stamp = self._stamps.get(name)
        if stamp is None:
            stamp = self._stamps[name] = next(self._serial)
        return stamp

    def changed(self, name: str) -> None:
        """What ``name`` computes may have changed: it gets a new stamp and is compiled first."""
        self._stamps[name] = next(self._serial)
        self.request(name, first=True)

    def changed_all(self) -> None:
        """Every page may compute something else (the project's folder moved)."""
        for name in list(self._stamps):
            self._stamps[name] = next(self._serial)
            self.request(name)

    def removed(self, name: str) -> None:
        for table in (self._stamps, self._programs, self._failed, self._wanted):
            table.pop(name, None)
        self._pages = None

    def clear(self) -> None:
        """Another project: forget every page (a compile under way is dropped when it lands)."""
        for table in (self._stamps, self._programs, self._failed, self._wanted, self.seconds):
            table.clear()
        self._pages = None

    def stop(self) -> None:
        """Compile nothing more of what waits (its window closed): the queue is dropped and its
        timers stopped; a compile under way finishes on the worker, and a page asked for again
        is compiled as before. A page of a thousand composites queued a thousand compiles, each
        started by the last one's end: they went on after the window closed."""
        self._wanted.clear()
        self._kick.stop()
        self._late_kick.stop()

    # ---------------------------------------------------------------- reading (views)
    def fresh(self, name: str) -> Program | None:
        """The program of the page as it is now, or None while it is (to be) compiled."""
        entry = self._programs.get(name)
        if entry is not None and entry[0] == self.stamp(name):
            return entry[1]
        return None

    def latest(self, name: str) -> Program | None:
        """The last program compiled for the page, current or not (None before the first)."""
        entry = self._programs.get(name)
        return entry[1] if entry is not None else None

    def request(self, name: str, first: bool = False) -> None:
        """Compile ``name`` soon (``first``: before the other pages waiting)."""
        self._wanted[name] = None
        if first:
            self._wanted.move_to_end(name, last=False)
        if self._job is None:
            self._kick.start()

    def get(self, name: str) -> Program | None:
        """The current program, or None after asking for it (``ready`` tells when it is there).
        When the worker is free the compile starts at once and is given WAIT seconds, so that a
        small page is there on return."""
        program = self.fresh(name)
        if program is None:
            self._raise_failure(name)
            if self.latest(name) is None and self._big(name):
                self._wanted[name] = None
                self._wanted.move_to_end(name, last=False)
                if self._job is None and not self._late_kick.isActive():   # asked again: keep the time
                    self._late_kick.start()
                return None
            self.request(name, first=True)
            if self._job is None and not self._dispatching:
                self._dispatch()
                program = self.fresh(name)
        return program

    def _big(self, name: str) -> bool:
        """Whether page ``name`` flattens to BIG_PAGE blocks or more."""
        doc = self._doc()
        page = self._page(doc, name) if doc is not None else None
        return page is not None and flat_size(page, doc.project.composites) >= BIG_PAGE

    def pending(self) -> int:
        """How many pages are waiting for a compile or being compiled."""
        return len(self._wanted) + (self._job is not None and not self._job.taken)

    def program(self, name: str) -> Program:
        """The current program, now: waits for the compile of this very state if it is under
        way, else compiles on the calling thread."""
        program = self.fresh(name)
        if program is not None:
            return program
        self._raise_failure(name)
        stamp = self.stamp(name)
        job = self._job
        if job is not None and (job.name, job.stamp) == (name, stamp):
            job.done.wait()
            self._take(job)
            if job.error is not None:
                raise job.error
            self._emitter.announce.emit(name)
            return job.program
        start = time.perf_counter()
        doc = self._doc()
        program = compile_page(doc.project.page(name), doc.registry, files=project_files(doc.project),
                               composites=doc.project.composites)
        self.seconds[name] = time.perf_counter() - start
        self._programs[name] = (stamp, program)
        self._wanted.pop(name, None)
        self._emitter.announce.emit(name)
        return program

    # ---------------------------------------------------------------- the worker
    def _dispatch(self) -> None:
        """Start the next compile (on the UI thread: the page is copied here) and give it up to
        WAIT seconds; what is done by then is taken at once, the rest lands in _on_finished."""
        if self._dispatching:
            return
        self._dispatching = True
        try:
            done = self._run_some()
        finally:
            self._dispatching = False
        for name in done:                  # told after the loop: listeners may ask for more
            if self.fresh(name) is not None:
                self.ready.emit(name)

    def _run_some(self) -> list[str]:
        deadline = time.perf_counter() + WAIT
        doc = self._doc()
        done = []
        while self._job is None and self._wanted:
            name, _ = self._wanted.popitem(last=False)
            if self.fresh(name) is not None:
                continue
            page = self._page(doc, name)
            if page is None:
                continue                   # the page went since it was asked for
            job = _Task(name, self.stamp(name), snapshot(page), doc.registry, project_files(doc.project),
                        snapshot_composites(page, doc.project.composites))
            self._job = job
            self._worker.submit(lambda _post, job=job: _compile(job), self._on_finished)
            left = deadline - time.perf_counter()
            if left <= 0 or not job.done.wait(left):
                break
            if self._take(job):
                done.append(name)
        return done

    def _page(self, doc, name: str) -> Page | None:
        """The live page called ``name``, from a table made once (Project.page scans the list,
        once per page compiled: quadratic on a project of many pages); the Document clears it
        when pages come, go or change names."""
        if self._pages is None:
            self._pages = {p.name: p for p in doc.project.diagrams()}
        page = self._pages.get(name)
        if page is not None and page.name != name:     # renamed behind our back: look again
            self._pages = {p.name: p for p in doc.project.diagrams()}
            page = self._pages.get(name)
        return page

    def pages_changed(self) -> None:
        """Pages were added, removed or renamed."""
        self._pages = None

    def _on_finished(self, job: _Task) -> None:
        if self._take(job):
            self.ready.emit(job.name)
        if self._job is None and self._wanted:
            self._kick.start()

    def _take(self, job: _Task) -> bool:
        """Keep what ``job`` compiled if the page is still as it was; True when kept."""
        if job.taken:
            return False
        job.taken = True
        if self._job is job:
            self._job = None
        if self._stamps.get(job.name) != job.stamp:
            return False                   # edited (or gone) while it compiled: compiled again
        self.seconds[job.name] = job.seconds
        if job.error is not None:
            self._failed[job.name] = (job.stamp, job.error)
            traceback.print_exception(job.error)
            return False
        self._programs[job.name] = (job.stamp, job.program)
        return True

    def _announce(self, name: str) -> None:
        if self.fresh(name) is not None:
            self.ready.emit(name)

    def _raise_failure(self, name: str) -> None:
        failed = self._failed.get(name)
        if failed is not None and failed[0] == self._stamps.get(name):
            raise failed[1]
