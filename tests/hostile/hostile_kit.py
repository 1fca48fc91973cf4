"""Tools for the hostile suite: run blockflow in a child process under a memory cap, measure the
child's peak memory, and prove that nothing outside the paths a user named has changed.

Hostile inputs are built inside the tests (in tmp_path), never committed. A case checks four
things: the exit code, the message (where and what, no traceback), the files on disk, and for
the memory cases the child's peak resident memory against the documented budget.
"""
from __future__ import annotations

import hashlib
import os
import resource
import stat
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

#: The address-space cap a capped child runs under: far below what the hostile inputs would take
#: if nothing stopped them, comfortably above what Python + numpy (+ Qt when asked) need.
DEFAULT_CAP_BYTES = 2 * 1024 ** 3

#: Environment of every child: headless Qt, one BLAS thread (fewer, smaller thread arenas).
CHILD_ENV = {"QT_QPA_PLATFORM": "offscreen", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
             "MKL_NUM_THREADS": "1", "PYTHONFAULTHANDLER": "1"}


@dataclass
class ChildResult:
    """What a child process did: its exit code, output, and peak resident memory in bytes."""

    returncode: int
    stdout: str
    stderr: str
    peak_rss: int

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def assert_clean_message(self) -> None:
        """A user-facing failure: no Python traceback, no MemoryError, not killed by a signal."""
        assert self.returncode >= 0, f"killed by signal {-self.returncode}:\n{self.output}"
        assert "Traceback (most recent call last)" not in self.output, self.output
        assert "MemoryError" not in self.output, self.output


def _limit(cap_bytes: int | None):
    def preexec():
        if cap_bytes:
            resource.setrlimit(resource.RLIMIT_AS, (cap_bytes, cap_bytes))
    return preexec


def run_child(argv: list, *, cap_bytes: int | None = DEFAULT_CAP_BYTES, timeout: float = 60,
              cwd=None, env: dict | None = None, stdin: str | None = None) -> ChildResult:
    """Run ``argv`` under an address-space cap; return its exit code, output and peak RSS.

    The peak is the child's own high-water mark (VmHWM), which the child reports as it exits.
    """
    full_env = {**os.environ, **CHILD_ENV, **(env or {})}
    proc = subprocess.Popen(argv, cwd=cwd, env=full_env, stdin=subprocess.PIPE if stdin is not None
                            else subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=_limit(cap_bytes), text=True)
    try:
        out, err = proc.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"{argv} did not finish in {timeout} s:\n{out}{err}") from None
    # communicate() has reaped the child; its rusage went into RUSAGE_CHILDREN only, so the
    # child reports its own peak on the way out instead (see run_python and run_cli).
    peak = _peak_from(err)
    return ChildResult(proc.returncode, out, _strip_peak(err), peak)


_PEAK_TAG = "@@blockflow-peak-rss@@"

# Prints the process's peak RSS (bytes) to stderr when it exits, however it exits normally.
# VmHWM is the peak of this program's own memory. ru_maxrss is not: Linux carries it over exec
# from the forked copy of the parent (preexec_fn forces a fork), so under a large pytest process
# every child would seem to peak at the parent's size.
_PEAK_PRELUDE = textwrap.dedent(f"""
    import atexit as _atexit, resource as _resource, sys as _sys
    def _report_peak():
        try:
            with open("/proc/self/status") as _f:
                _peak = next(int(l.split()[1]) for l in _f if l.startswith("VmHWM:")) * 1024
        except (OSError, StopIteration, ValueError):
            _peak = _resource.getrusage(_resource.RUSAGE_SELF).ru_maxrss * 1024
        _sys.stderr.write("\\n{_PEAK_TAG}%d\\n" % _peak)
        _sys.stderr.flush()
    _atexit.register(_report_peak)
""")


def _peak_from(err: str) -> int:
    for line in reversed(err.splitlines()):
        if line.startswith(_PEAK_TAG):
            return int(line[len(_PEAK_TAG):])
    return -1


def _strip_peak(err: str) -> str:
    return "\n".join(l for l in err.splitlines() if not l.startswith(_PEAK_TAG)).rstrip("\n") + \
        ("\n" if err.strip() else "")


def run_python(code: str, **kw) -> ChildResult:
    """Run Python ``code`` in a capped child (see :func:`run_child`), reporting its peak RSS."""
    return run_child([sys.executable, "-c", _PEAK_PRELUDE + textwrap.dedent(code)], **kw)


def run_cli(*args, **kw) -> ChildResult:
    """Run ``blockflow ARGS`` (the CLI, as a user would) in a capped child, with its peak RSS."""
    code = ("import sys\nfrom blockflow.gui.app import main\n"
            f"sys.argv = ['blockflow', *{[str(a) for a in args]!r}]\n"
            "_code = main()\n"
            "sys.stdout.flush(); sys.stderr.flush()\n"
            "raise SystemExit(_code)\n")
    return run_python(code, **kw)


def baseline_rss(**kw) -> int:
    """Peak RSS of a child that only imports what the CLI imports: the floor under every figure."""
    r = run_python("import numpy, networkx\nimport blockflow.cli, blockflow.compile.compiler, blockflow.run.runtime\n", **kw)
    assert r.returncode == 0, r.output
    return r.peak_rss


def snapshot(root) -> dict:
    """Every path under ``root`` (and ``root`` itself) with its kind, mode, size, mtime and, for
    files, a hash of the content; symbolic links are recorded, never followed."""
    root = Path(root)
    out = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in [*dirnames, *filenames, None]:
            p = Path(dirpath) if name is None else Path(dirpath) / name
            st = p.lstat()
            if stat.S_ISLNK(st.st_mode):
                out[str(p)] = ("link", os.readlink(p))
            elif stat.S_ISREG(st.st_mode):
                out[str(p)] = ("file", st.st_size, st.st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
            else:
                out[str(p)] = ("dir" if stat.S_ISDIR(st.st_mode) else "other", stat.S_IMODE(st.st_mode))
    return out


def changed_paths(before: dict, after: dict) -> set:
    """Paths added, removed or changed between two :func:`snapshot` results (directories' own
    mtimes are left out: adding a file inside one is reported as the file)."""
    keys = set(before) | set(after)
    return {k for k in keys if before.get(k) != after.get(k)}


def chain_composite(name: str, inner: str | None = None) -> dict:
    """A composite of a project file as a hostile one can chain them: an Input, an instance of
    ``inner`` (when given) and an Output, no wires."""
    nodes = [{"id": "x", "block": "Input", "attrs": {"name": "x"}}]
    if inner:
        from blockflow.composite import block_name

        nodes.append({"id": "i", "block": block_name(inner), "attrs": {}})
    nodes.append({"id": "y", "block": "Output", "attrs": {"name": "y"}})
    return {"name": name, "diagram": {"nodes": nodes, "edges": []}}
