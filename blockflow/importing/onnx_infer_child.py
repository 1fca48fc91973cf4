"""The process onnx's shape inference runs in (onnx_infer.py), each model held to limits of memory
and time.

Run as a script, by its path, with ``python -I -S``: it loads the onnx package's compiled module
alone, by its file, and nothing of blockflow or of the onnx package's Python. It imports nothing
but the standard library. It lives as long as the process that started it, one model at a time:
starting it and onnx's table of op schemas costs some 80 ms, which every import paid when each had
a process of its own (the ONNX node tests went from 28 s to 174 s).

Argument: the compiled module's path. It writes READY once the module is loaded (so the parent
tells a Python that cannot run this from a model that stopped it: nothing of a model is read
before), then for each REQUEST read from stdin (the bytes of address space inference may take
beyond what the process holds once the model is read, the seconds of processor time it may take,
1 or 0 for data propagation, the model's length) and the serialized model, it writes one outcome
byte (STRICT: strict inference passed; LENIENT: strict inference found the model invalid, and a
lenient run typed it; UNTYPED: the lenient run failed too; FAILED: inference failed otherwise),
whether it stops after this model (it does when the model left it holding much more memory than
it started with, which an exit gives back), the length and text of strict inference's message,
and the length and bytes of the inferred model. It exits with MEMORY_EXIT when inference passes
its memory; past its time the kernel stops it (SIGXCPU); at the end of stdin it exits with 0.
"""
import importlib.machinery
import importlib.util
import math
import resource
import struct
import sys

READY = b"blockflow-onnx-inference\n"
REQUEST = struct.Struct("<QQBQ")
REPLY = struct.Struct("<c?Q")      # outcome, stops, the message's length (then the model's: LENGTH)
LENGTH = struct.Struct("<Q")
STRICT, LENIENT, UNTYPED, FAILED = b"s", b"l", b"u", b"f"
MEMORY_EXIT = 3
#: memory a model may leave the process holding before it stops (after this model)
RETIRE_BYTES = 64 * 2 ** 20


def _compiled(path: str):
    loader = importlib.machinery.ExtensionFileLoader("onnx.onnx_cpp2py_export", path)
    spec = importlib.util.spec_from_file_location(loader.name, path, loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def _status(field: str) -> int | None:
    """A size from /proc/self/status, in bytes (None off Linux: then only the time is limited)."""
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith(field + ":"))
    except (OSError, StopIteration, ValueError, IndexError):
        return None


def _set_soft(which, soft) -> None:
    """Set the soft limit ``which`` (never above the hard one, which a process cannot raise)."""
    _, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY and (soft == resource.RLIM_INFINITY or soft > hard):
        soft = hard
    resource.setrlimit(which, (soft, hard))


def _infer(infer, model: bytes, data_prop: bool) -> tuple:
    """(outcome, strict inference's message, the inferred model)."""
    try:
        return STRICT, b"", infer.infer_shapes(model, False, True, data_prop)
    except infer.InferenceError as exc:
        message = str(exc).encode("utf-8", "replace")
    except MemoryError:
        raise
    except Exception:  # an inconsistent model: the import's mapping names what it lacks
        return FAILED, b"", b""
    try:
        return LENIENT, message, infer.infer_shapes(model, False, False, data_prop)
    except MemoryError:
        raise
    except Exception:
        return UNTYPED, message, b""


def _read(stream, n: int) -> bytes | None:
    data = stream.read(n)
    return data if len(data) == n else None


def _serve(infer, stdin, out) -> int:
    """Infer each model the parent sends, under its limits, until stdin ends."""
    start = _status("VmRSS") or 0
    while True:
        head = _read(stdin, REQUEST.size)
        if head is None:
            return 0
        room, seconds, data_prop, length = REQUEST.unpack(head)
        model = _read(stdin, length)
        if model is None:
            return 0
        held = _status("VmSize")
        used = resource.getrusage(resource.RUSAGE_SELF)
        _set_soft(resource.RLIMIT_CPU, math.ceil(used.ru_utime + used.ru_stime) + seconds)
        if held is not None:
            _set_soft(resource.RLIMIT_AS, held + room)
        try:
            outcome, message, inferred = _infer(infer, model, bool(data_prop))
        except MemoryError:
            return MEMORY_EXIT
        _set_soft(resource.RLIMIT_AS, resource.RLIM_INFINITY)
        _set_soft(resource.RLIMIT_CPU, resource.RLIM_INFINITY)
        del model
        stops = (_status("VmRSS") or 0) > start + RETIRE_BYTES + len(inferred)
        out.write(REPLY.pack(outcome, stops, len(message)) + message + LENGTH.pack(len(inferred)))
        out.write(inferred)
        out.flush()
        if stops:
            return 0


def serve(infer) -> int:
    """Say READY, then infer the models read from stdin with ``infer`` (onnx's compiled
    shape_inference, or a test's stand-in)."""
    _no_core_files()
    sys.stdout.buffer.write(READY)
    sys.stdout.buffer.flush()
    return _serve(infer, sys.stdin.buffer, sys.stdout.buffer)


def _no_core_files() -> None:
    """A process the kernel stops for its time, or that crashes, writes no core file."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def main(argv: list) -> int:
    _no_core_files()
    infer = _compiled(argv[1]).shape_inference
    try:    # the first exception C++ throws loads the unwinder: under the limit, that aborted
        infer.infer_shapes(b"\xff", False, True, False)
    except Exception:
        pass
    return serve(infer)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
