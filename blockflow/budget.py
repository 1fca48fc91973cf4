"""The run memory budget: how many bytes the tensors of one run may hold at once.

The budget is, in order of precedence: the ``memory_budget`` a caller gives ``runtime.run`` (or a
Trainer), the process-wide value set with :func:`set_memory_budget` (the command line's
``--memory-budget``), the environment variable ``BLOCKFLOW_MEMORY_BUDGET``, or the default: half
of the memory this process may use, i.e. of the smallest of the machine's physical memory, the
container's (cgroup's) memory limit, and what the address-space and data limits (``ulimit -v``,
``ulimit -d``) leave above what the process already uses. Sizes are written as bytes or with a
unit: ``512M``, ``2G``, ``1.5GiB`` (powers of 1024), or as a share of physical memory: ``25%``.

Imports nothing of blockflow.
"""
from __future__ import annotations

import math
import os
import re
import resource

__all__ = ["ENV_VAR", "parse_size", "format_size", "default_budget", "set_memory_budget",
           "memory_budget", "physical_memory"]

#: the environment variable that sets the budget (a size, see :func:`parse_size`)
ENV_VAR = "BLOCKFLOW_MEMORY_BUDGET"

#: share of the usable memory the default budget takes: the rest is the process itself, numpy's
#: temporaries inside a block and whatever else the machine runs
DEFAULT_SHARE = 0.5

_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "kib": 1024, "m": 1024 ** 2, "mb": 1024 ** 2,
          "mib": 1024 ** 2, "g": 1024 ** 3, "gb": 1024 ** 3, "gib": 1024 ** 3, "t": 1024 ** 4,
          "tb": 1024 ** 4, "tib": 1024 ** 4}
_SIZE = re.compile(r"\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE]([+-]?[0-9]{1,3}))?\s*([a-zA-Z]*|%)\s*")


def parse_size(text) -> int:
    """Bytes from ``2G``, ``512M``, ``1.5GiB``, ``1000000`` or ``25%`` (of physical memory).

    Raises ValueError saying what is wrong; a budget must be at least one byte."""
    if isinstance(text, bool):
        raise ValueError(f"a memory size must be a number of bytes or a size like 2G, got {text!r}")
    if isinstance(text, int):
        n = text
    else:
        m = _SIZE.fullmatch(str(text))
        if m is None or (m.group(3) or "").lower() not in _UNITS and m.group(3) != "%":
            raise ValueError(f"{text!r} is not a memory size (write bytes, or a size like 512M, 2G, "
                             f"1.5GiB, or a share of physical memory like 25%)")
        value = float(m.group(1) + (f"e{m.group(2)}" if m.group(2) else ""))
        if m.group(3) == "%":
            if not 0 < value <= 100:
                raise ValueError(f"{text!r}: a share of physical memory must be more than 0% and at most 100%")
            phys = physical_memory()
            if phys is None:
                raise ValueError(f"{text!r}: the machine's physical memory is unknown; give a size like 2G")
            value = phys * value / 100
        else:
            value *= _UNITS[m.group(3).lower()]
        if not math.isfinite(value) or value >= 2 ** 63:
            raise ValueError(f"{text!r} is too large a memory size")
        n = int(value)
    if n < 1:
        raise ValueError(f"a memory budget must be at least 1 byte, got {text!r}")
    return n


def format_size(n: int) -> str:
    """``1.5 GiB``, ``300.0 MiB``, ``12.0 KiB``, ``100 bytes``."""
    for unit, size in (("TiB", 1024 ** 4), ("GiB", 1024 ** 3), ("MiB", 1024 ** 2), ("KiB", 1024)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"


def physical_memory() -> int | None:
    """The machine's physical memory in bytes (None when it cannot be read)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _cgroup_limit() -> int | None:
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as f:
                text = f.read().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 2 ** 60:   # cgroup v1 says "no limit" with a huge number
            return int(text)
    return None


def _status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _rlimit_room(which, used_field: str) -> int | None:
    soft, _ = resource.getrlimit(which)
    if soft == resource.RLIM_INFINITY or soft < 0:
        return None
    return max(soft - (_status_kib(used_field) or 0), 0)


_default: int | None = None


def default_budget() -> int:
    """Half of the memory this process may use (see the module docstring); measured once."""
    global _default
    if _default is None:
        limits = [physical_memory(), _cgroup_limit(), _rlimit_room(resource.RLIMIT_AS, "VmSize"),
                  _rlimit_room(resource.RLIMIT_DATA, "VmData")]
        known = [x for x in limits if x is not None]
        usable = min(known) if known else 8 * 1024 ** 3
        _default = max(int(usable * DEFAULT_SHARE), 1)
    return _default


_process: int | None = None
_env_cache: tuple = (None, None)


def set_memory_budget(size) -> None:
    """Set the budget of every later run in this process (``None``: back to the environment
    variable or the default); ``size`` as for :func:`parse_size`."""
    global _process
    _process = None if size is None else parse_size(size)


def _environ_get(name: str):
    """``os.environ.get(name)``, by one look-up in the mapping os.environ keeps its encoded
    copy in where there is one (POSIX): every run reads the budget's variable, and the Mapping
    methods, key encoding and decoding of os.environ cost a run ~8 us when cold."""
    data = getattr(os.environ, "_data", None)
    if type(data) is dict and os.name == "posix":
        key = _ENV_KEY if name == ENV_VAR else os.fsencode(name)
        raw = data.get(key)
        return None if raw is None else os.fsdecode(raw)
    return os.environ.get(name)


_ENV_KEY = os.fsencode(ENV_VAR)


def memory_budget(explicit=None) -> tuple[int, str]:
    """The budget a run gets and where it came from (for messages): the caller's ``explicit``
    value, the process's, the environment variable's or the default."""
    if explicit is not None:
        return parse_size(explicit), "given to the run"
    if _process is not None:
        return _process, "set with --memory-budget"
    global _env_cache
    text = _environ_get(ENV_VAR)
    if text is None:
        return (_default if _default is not None else default_budget()), _DEFAULT_SOURCE
    if text:
        if _env_cache[0] != text:
            try:
                _env_cache = (text, parse_size(text))
            except ValueError as exc:
                raise ValueError(f"{ENV_VAR}: {exc}") from None
        return _env_cache[1], f"from {ENV_VAR}"
    return default_budget(), _DEFAULT_SOURCE


_DEFAULT_SOURCE = "the default: half of the memory this process may use"
