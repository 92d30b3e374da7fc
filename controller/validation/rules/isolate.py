"""Run a CPU-bound function in a forked child with a hard deadline and a memory ceiling.

Why a process: the binding holds the GIL for the whole of an evaluation (measured: a 3.7 s
``map()`` let the event loop run twice), cannot be interrupted, and its only own limit is the
per-evaluation iteration budget. An expression can stay within that budget and still take
seconds (``map``/``filter`` copy their accumulator: 9,000 elements ≈ 3.7 s) or allocate
gigabytes (string concatenation inside a loop). A thread could not be stopped; a child can be
killed. ``fork`` hands the child the compiled programs and the inputs without serializing
them (measured round trip with a 250 MB parent: 5 to 10 ms); only the small result travels back.

The child never returns into the caller's code: every path ends in ``os._exit``.
"""

from __future__ import annotations

import contextlib
import gc
import os
import pickle
import resource
import select
import signal
import struct
import time
from collections.abc import Callable
from typing import TypeVar

__all__ = [
    "MEMORY_HEADROOM",
    "WALL_FACTOR",
    "CancelSignal",
    "Usage",
    "WorkerCancelled",
    "WorkerDeadline",
    "WorkerFailed",
    "address_space",
    "backstop",
    "run_isolated",
]

T = TypeVar("T")

MEMORY_HEADROOM = 1 << 30
"""Address space the child may add to what it inherited (1 GiB)."""

_HEADER = struct.Struct("!Q")

WALL_FACTOR = 4.0
WALL_GRACE = 1.0
"""The budget is CPU time: the child is stopped by ``SIGPROF`` once it has used its
``timeout`` of CPU seconds, so a loaded machine (other processes on the same cores) does not
eat a rule's budget. A child that the scheduler starves is still stopped, at
``timeout * WALL_FACTOR + WALL_GRACE`` seconds of wall time."""


class Usage:
    """Filled in by :func:`run_isolated`: the CPU seconds (user + system) the child used."""

    __slots__ = ("cpu",)

    def __init__(self) -> None:
        self.cpu = 0.0


class WorkerDeadline(Exception):
    """The child did not finish in time and was killed.

    ``wall`` is set when the wall-time backstop stopped it (seconds since the batch was
    handed over) rather than its CPU timer: then ``used`` may be far below ``limit``, and a
    report must say the evaluation was starved, not that it used its budget."""

    def __init__(self, limit: float, used: float, *, wall: float | None = None) -> None:
        super().__init__(f"evaluation did not finish within {limit:g}s")
        self.limit, self.used, self.wall = limit, used, wall


def backstop(timeout: float) -> float:
    """Seconds of wall time after which a batch with ``timeout`` CPU seconds is killed."""
    return max(timeout, 0.0) * WALL_FACTOR + WALL_GRACE


class WorkerCancelled(Exception):
    """The caller gave up on the result (:class:`CancelSignal`); the child was killed."""


class CancelSignal:
    """Stops a :func:`run_isolated` wait from another thread (or the event loop).

    The waiting thread sleeps in ``select`` on the worker's pipe; a cancelled pipeline run
    cannot interrupt that thread, so it would otherwise keep the child alive until the
    deadline. :meth:`set` writes to a pipe the wait also watches: the child is killed and
    reaped at once. Close it (or use it as a context manager) when the run is over.
    """

    def __init__(self) -> None:
        self._r, self._w = os.pipe()
        self.is_set = False

    def set(self) -> None:
        if not self.is_set:
            self.is_set = True
            with contextlib.suppress(OSError):
                os.write(self._w, b"x")

    def fileno(self) -> int:
        return self._r

    def close(self) -> None:
        for fd in (self._r, self._w):
            with contextlib.suppress(OSError):
                os.close(fd)

    def __enter__(self) -> CancelSignal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class WorkerFailed(Exception):
    """The child died (out of memory, crashed) or its function raised."""

    def __init__(self, message: str, memory: bool = False) -> None:
        super().__init__(message)
        self.memory = memory


def address_space() -> int | None:
    """This process's address space in bytes (what ``RLIMIT_AS`` limits), or None."""
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE")


def _child(fn: Callable[[], object], w: int, headroom: int | None, cpu: float) -> None:
    status = 0
    try:
        # Every object inherited from the parent is out of the collector's reach: a full
        # collection would walk them all and write to each one's header, copying the
        # parent's heap page by page. With 10,000 Ingresses in the store that doubled the
        # worker's CPU time (deferred rules: 0.99 s instead of 0.49 s), charged to the
        # rules' budget. What the child allocates itself is still collected.
        gc.freeze()
        with contextlib.suppress(ValueError, OSError):
            signal.set_wakeup_fd(-1)  # the parent's event loop owns that descriptor
        # Terminated by the kernel once the child has used ``cpu`` seconds of CPU time.
        signal.signal(signal.SIGPROF, signal.SIG_DFL)
        signal.setitimer(signal.ITIMER_PROF, max(cpu, 0.001))
        if headroom is not None:
            current = address_space()
            if current is not None:
                limit = current + headroom
                resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        try:
            payload = pickle.dumps(("ok", fn()))
        except MemoryError:
            payload = pickle.dumps(("memory", "out of memory"))
        except BaseException as exc:
            payload = pickle.dumps(("error", f"{type(exc).__name__}: {exc}"))
        data = _HEADER.pack(len(payload)) + payload
        view = memoryview(data)
        while view:
            view = view[os.write(w, view) :]
    except BaseException:
        status = 70
    finally:
        os._exit(status)


def run_isolated(
    fn: Callable[[], T],
    timeout: float,
    *,
    memory_headroom: int | None = MEMORY_HEADROOM,
    cancel: CancelSignal | None = None,
    usage: Usage | None = None,
) -> T:
    """``fn()`` computed in a child process within ``timeout`` CPU seconds. Raises
    WorkerDeadline, WorkerFailed, or WorkerCancelled when ``cancel`` is set while it waits.
    ``usage`` receives the CPU time the child used, whatever the outcome."""
    started = time.monotonic()
    if cancel is not None and cancel.is_set:
        raise WorkerCancelled("cancelled before the worker started")
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child's coverage is not collected
        os.close(r)
        _child(fn, w, memory_headroom, timeout)
    os.close(w)
    buf = bytearray()
    try:
        deadline = started + backstop(timeout)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                cpu = _kill(pid)
                if usage is not None:
                    usage.cpu = cpu
                raise WorkerDeadline(timeout, cpu, wall=backstop(timeout))
            watched: list[int] = [r] if cancel is None else [r, cancel.fileno()]
            ready, _, _ = select.select(watched, [], [], remaining)
            if cancel is not None and cancel.fileno() in ready:
                cpu = _kill(pid)
                if usage is not None:
                    usage.cpu = cpu
                raise WorkerCancelled("the caller cancelled the evaluation")
            if not ready:
                continue
            chunk = os.read(r, 1 << 16)
            if not chunk:
                break
            buf += chunk
    finally:
        os.close(r)
    _, status, rusage = os.wait4(pid, 0)
    cpu = rusage.ru_utime + rusage.ru_stime
    if usage is not None:
        usage.cpu = cpu
    if len(buf) < _HEADER.size:
        sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
        if sig in (signal.SIGPROF, signal.SIGXCPU):
            raise WorkerDeadline(timeout, cpu)
        why = (
            f"killed by signal {sig}" if sig else f"exit status {os.waitstatus_to_exitcode(status)}"
        )
        # An allocation failure inside the C++ runtime aborts the process.
        raise WorkerFailed(f"evaluation worker died ({why})", memory=sig == signal.SIGABRT)
    (size,) = _HEADER.unpack_from(buf)
    kind, value = pickle.loads(bytes(buf[_HEADER.size : _HEADER.size + size]))
    if kind == "ok":
        return value  # type: ignore[no-any-return]
    raise WorkerFailed(str(value), memory=kind == "memory")


def _kill(pid: int) -> float:
    """Kill and reap the child; the CPU seconds it had used."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        _, _, rusage = os.wait4(pid, 0)
        return float(rusage.ru_utime + rusage.ru_stime)
    return 0.0
