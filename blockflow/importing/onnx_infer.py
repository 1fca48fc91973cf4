"""onnx's shape inference, run in a child process held to limits of memory and time.

Inference's cost follows sizes the model states, not its bytes: with data propagation, each value
of one dimension and known length N that a propagating op reads (Slice, Gather, Concat, Cast,
Squeeze, Unsqueeze; Add, Sub and Mul from opset 14), and whose values onnx does not know, is made
into N dimension messages, some 70 bytes each, and copied along the ops after it (onnx 1.23,
``DataPropagationContextImpl::getInputData``). N is a declared length (a Slice's ends declared
[10^8] in a 300-byte file took 14 s and 7 GB) or one inference works out from a constant's value
(ConstantOfShape of [10^8], a Range, Expand, Tile, Reshape...), so no look at the file before
inference can bound it; older onnx releases do the same for a shape input's length
(ConstantOfShape, Expand, Reshape, Resize, Col2Im). So inference runs in a child process, under an
address-space and a processor-time limit that grow with the model it is given (INFER_* below),
where it can be stopped. The child loads onnx's compiled module alone (onnx_infer_child.py) and is
kept for the next import (starting one cost each import some 80 ms); a model that stops it, or
leaves it holding much memory, ends it. Data propagation only sharpens shapes (a Reshape to a computed shape),
so a model it takes past the limits is inferred again without it; past them again, the import
refuses the model, saying which limit. Where no Python can be started for it (a frozen build),
inference runs in this process, as before.
"""
from __future__ import annotations

import atexit
import math
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from blockflow.budget import format_size
from blockflow.importing import onnx_infer_child as child
from blockflow.importing.errors import ImportFailure

__all__ = ["Inferred", "infer_shapes", "INFER_FACTOR", "INFER_ALLOWANCE_BYTES", "INFER_SECONDS",
           "INFER_SECONDS_PER_MIB"]

#: address space inference may take, per byte of the model it is given (a model of 200,000 nodes,
#: 5 MB without its weights, peaks at about 250 MB) ...
INFER_FACTOR = 64
#: ... plus this, for any model
INFER_ALLOWANCE_BYTES = 128 * 2 ** 20
#: processor seconds inference may take (that model: 1.5 s) ...
INFER_SECONDS = 10
#: ... plus this many per MiB of the model it is given
INFER_SECONDS_PER_MIB = 2
#: the script the child runs
CHILD_SCRIPT = Path(child.__file__)


@dataclass(frozen=True)
class Inferred:
    """What inference made of a model: the inferred ModelProto (None: no types), and strict
    inference's message when it found the model invalid (None when it did not, or did not run)."""

    model: object | None
    strict_error: str | None


class _Past(Exception):
    """Inference went past a limit: which, in words."""


def infer_shapes(onnx, light, source: str) -> Inferred:
    """onnx's strict shape inference of ``light`` (a ModelProto), then a lenient one when the
    strict one finds the model invalid; ImportFailure naming ``source`` when it goes past its
    limits with data propagation and without, or crashes."""
    data = light.SerializeToString()
    room = INFER_ALLOWANCE_BYTES + INFER_FACTOR * len(data)
    seconds = math.ceil(INFER_SECONDS + INFER_SECONDS_PER_MIB * len(data) / 2 ** 20)
    try:
        try:
            reply = _helper.infer(onnx, data, room, seconds, data_prop=True)
        except _Past:
            reply = _helper.infer(onnx, data, room, seconds, data_prop=False)
    except ImportFailure as exc:
        raise ImportFailure(f"{source}: {exc}") from None
    except _Past as past:
        raise ImportFailure(f"{source}: onnx's shape inference of the model {past} (the most the import gives it "
                            f"for a model of {format_size(len(data))} without its weights: docs/limits.md), with its "
                            f"data propagation and without; a size the model declares or computes (a long value "
                            f"of one dimension, a shape of many dimensions) makes it build that much") from None
    return _in_process(onnx, light) if reply is None else _decoded(onnx, reply)


class _Helper:
    """The child process inference runs in (onnx_infer_child.py), started when first needed and
    kept for the next model: one model at a time, whichever thread asks."""

    def __init__(self):
        self.lock = threading.Lock()
        self.proc = None
        self.pid = None     # the process that started it: a forked copy of this one starts its own

    def infer(self, onnx, data: bytes, room: int, seconds: int, data_prop: bool) -> tuple | None:
        """The child's reply (_receive) for the serialized model ``data``; None when no child can
        run it (then nothing of the model was read); _Past past a limit, ImportFailure for a crash."""
        with self.lock:
            proc = self._started(onnx)
            if proc is None:
                return None
            request = child.REQUEST.pack(room, seconds, int(data_prop), len(data)) + data
            # the wall clock only guards against a child that waits: its processor time is limited
            deadline = time.monotonic() + 4 * seconds + 30
            try:
                _send(proc, request, deadline)
                reply = _receive(proc, deadline)
            except TimeoutError:
                self._stop()
                raise _Past(f"did not finish in {4 * seconds + 30} s") from None
            except OSError:
                reply = None
            if reply is None:   # it stopped: why
                self._stop()
                raise _stopped_by(proc.returncode, room, seconds)
            if reply[1]:
                self._stop()
            return reply

    def _started(self, onnx):
        if self.proc is not None and self.pid == os.getpid() and self.proc.poll() is None:
            return self.proc
        self.proc = None
        compiled = getattr(getattr(onnx, "onnx_cpp2py_export", None), "__file__", None)
        # the pipes are polled with selectors and made non-blocking, which POSIX pipes allow
        # (Windows' do not): elsewhere, inference runs in this process, as before the child
        if not sys.executable or getattr(sys, "frozen", False) or not compiled or os.name != "posix":
            return None
        argv = [sys.executable, "-I", "-S", str(CHILD_SCRIPT), compiled]
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        except OSError:
            return None
        try:
            ready = _read_exactly(proc, len(child.READY), time.monotonic() + 60)
        except (TimeoutError, OSError):
            ready = None
        if ready != child.READY:
            proc.kill()
            proc.wait()
            return None
        self.proc, self.pid = proc, os.getpid()
        return proc

    def _stop(self) -> None:
        """Let the child go: end its input (it exits), or stop it when it does not."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        try:
            proc.stdin.close()
            proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()


_helper = _Helper()
atexit.register(_helper._stop)


def _stopped_by(code: int | None, room: int, seconds: int) -> Exception:
    """What the child's exit ``code`` says of the model it stopped on."""
    if code == child.MEMORY_EXIT:
        return _Past(f"needed more than {format_size(room)} of memory")
    if code in (-signal.SIGXCPU, -signal.SIGKILL):
        return _Past(f"did not finish in {seconds} s of processor time")
    why = f"signal {signal.Signals(-code).name}" if code is not None and -code in signal.valid_signals() \
        else f"exit code {code}"
    return ImportFailure(f"onnx's shape inference crashed on the model ({why}); the model is likely not valid "
                         f"ONNX (onnx.checker.check_model(model, full_check=True) says where)")


def _send(proc, data: bytes, deadline: float) -> None:
    fd = proc.stdin.fileno()
    os.set_blocking(fd, False)
    view, sel = memoryview(data), selectors.DefaultSelector()
    with sel:
        sel.register(fd, selectors.EVENT_WRITE)
        while view:
            if not sel.select(max(deadline - time.monotonic(), 0)):
                raise TimeoutError
            try:
                view = view[os.write(fd, view[:1 << 20]):]
            except BlockingIOError:
                continue


def _read_exactly(proc, n: int, deadline: float) -> bytes | None:
    """``n`` bytes of the child's output; None when it ends first; TimeoutError at ``deadline``."""
    fd, parts, got = proc.stdout.fileno(), [], 0
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while got < n:
            if not sel.select(max(deadline - time.monotonic(), 0)):
                raise TimeoutError
            part = os.read(fd, min(n - got, 1 << 20))
            if not part:
                proc.wait()
                return None
            parts.append(part)
            got += len(part)
    return b"".join(parts)


def _receive(proc, deadline: float) -> tuple | None:
    """(outcome, stops, strict inference's message, the inferred model's bytes), None when the
    child stopped first."""
    head = _read_exactly(proc, child.REPLY.size, deadline)
    if head is None:
        return None
    outcome, stops, length = child.REPLY.unpack(head)
    message = _read_exactly(proc, length + child.LENGTH.size, deadline)
    if message is None:
        return None
    (size,) = child.LENGTH.unpack(message[length:])
    model = _read_exactly(proc, size, deadline)
    if model is None:
        return None
    return outcome, stops, message[:length].decode("utf-8", "replace"), model


def _decoded(onnx, reply: tuple) -> Inferred:
    """What the child's ``reply`` (_receive) says."""
    outcome, _, message, body = reply
    strict_error = message if outcome in (child.LENIENT, child.UNTYPED) else None
    if outcome not in (child.STRICT, child.LENIENT):
        return Inferred(None, strict_error)
    model = onnx.ModelProto()
    model.ParseFromString(body)
    return Inferred(model, strict_error)


def _in_process(onnx, light) -> Inferred:
    """Inference in this process, unbounded (where no child can run it)."""
    infer = onnx.shape_inference
    try:
        return Inferred(infer.infer_shapes(light, strict_mode=True, data_prop=True), None)
    except infer.InferenceError as exc:
        strict_error = str(exc)
    except Exception:  # an inconsistent model: the mapping names what it lacks
        return Inferred(None, None)
    try:
        return Inferred(infer.infer_shapes(light, data_prop=True), strict_error)
    except Exception:
        return Inferred(None, strict_error)
