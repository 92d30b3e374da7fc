"""Rule batches evaluated in a small long-lived process instead of a fork of this one.

Why: ``isolate.py`` forks the whole controller for every batch that may be expensive. The
evaluation of a few rules on one object takes well under a millisecond, but the fork of a
process holding a store of 1,000 Ingresses does not: page tables, copy-on-write faults and
the child's exit cost 8 ms of wall time for an empty batch and 15-25 ms for the admission
webhook's (measured at 130 MB resident; the cost grows with the resident size). An ignored
Ingress pays two such batches (its inline rules, and the deferred rules of its collection).

So a batch whose inputs are small is sent, pickled, to a worker: a fresh interpreter of about
60 MB started once (``worker.py``), not a fork of the parent. The limits are those of a forked
child and are set by the worker for each batch alone:

* CPU: ``ITIMER_PROF`` armed with the batch's remaining budget, whose signal terminates
  the worker; a batch the scheduler starves is killed at ``timeout * WALL_FACTOR +
  WALL_GRACE`` of wall time, as a fork is. CPU time, so a verdict does not depend on load;
* memory: ``RLIMIT_AS`` at the worker's current address space plus the headroom, for the
  batch's duration;
* a worker that was killed, ran out of memory, was cancelled or grew by more than
  :data:`RETIRE_GROWTH` is retired and a new one started: no batch inherits the heap a
  hostile batch left behind.

The worker's answer is the same as a fork's: it runs the same functions on the same values
(``to_cel`` values pickle as plain dicts, lists and scalars), and a batch it cannot take
(no idle worker, inputs over :data:`MAX_SHIPPED`, an input it was not sent) runs in a fork
as before, its attempt not charged; a worker that another batch holds is waited for a
little first (:data:`BUSY_WAIT`). Batches with many objects fork on purpose: past a few
hundred kilobytes of them, pickling costs the caller's thread as much as a fork. Large
strings (an output's content) are only copied, and are sent up to ``MAX_SHIPPED_TEXT``.

Why not the other ways out of the fork. Evaluating a small batch in-process is sound only
for work bounded by the expression's size times its input (``budget.is_cheap``): within the
iteration budget, ``map`` over 9,000 elements copies its accumulator for 3.7 s, and a loop
that concatenates strings allocates gigabytes from a few kilobytes of object. An in-process
evaluation can be neither stopped nor held to a memory limit, so a cap on the object's size
does not bound it. A zygote forked from this process (once per spec or store version) would
spare the fork per batch, but it keeps every page the parent changes afterwards: in time, a
second copy of the controller's heap. A fresh interpreter holds only what batches send it,
nothing of the store or its Secrets besides.

Batches travel as ``wire.py`` says. Workers start only in a process that keeps validating,
so that a one-shot command never pays a worker's start (half a second of imports) it would
not use: when a renderer renders its second candidate (``htc run``, admission, the local
loop; ``htc validate`` renders one), or once :data:`WARMUP` seconds have passed since the
process's first isolated batch.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pickle
import select
import signal
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from typing import TypeVar

from controller.validation.rules.compiled import RuleSet
from controller.validation.rules.isolate import (
    MEMORY_HEADROOM,
    CancelSignal,
    Usage,
    WorkerCancelled,
    WorkerDeadline,
    WorkerFailed,
    backstop,
)
from controller.validation.rules.wire import (
    MAX_RULESETS,
    MAX_SHIPPED,
    Frames,
    Job,
    TooLarge,
    Unshipped,
    dump,
    write_frame,
)

__all__ = [
    "BUSY_WAIT",
    "MAX_SHIPPED",
    "RETIRE_GROWTH",
    "WARMUP",
    "Job",
    "Unavailable",
    "Unshipped",
    "configure",
    "run_in_worker",
    "stats",
    "warm",
]

T = TypeVar("T")

RETIRE_GROWTH = 256 << 20
"""Resident bytes a worker may gain over what it had after its first batch before it is
replaced (a batch may leave a heap that Python does not hand back)."""

WARMUP = 5.0
"""Seconds after a process's first isolated batch before it starts a worker."""

BUSY_WAIT = 0.1
"""Seconds a batch waits for the busy worker before it forks instead. Under a burst of
admission reviews the rule batches of two judgements meet: the deferred batch of a
proposal that changed ``haproxy.cfg`` takes the worker 10-20 ms at 1,000 Ingresses, while the
fork that would replace the wait costs this process 4-9 ms of its interpreter, copy-on-write
faults on both sides of about 15 ms more, and the child's exit (400 MB resident). A batch
that keeps the worker longer (a rule near its time budget) is not waited for past this."""

_MAX_FAILED_STARTS = 3


class Unavailable(Exception):
    """No worker can take this batch; the caller forks instead."""


def _boot() -> list[str]:
    """A fresh interpreter (``-I``: no environment, no user site) that imports this
    package from where this process did, and serves batches from its working directory
    ``/``."""
    paths = [os.path.abspath(p) for p in sys.path if p]
    code = (
        f"import sys; sys.path[:0] = {paths!r}; "
        "from controller.validation.rules.worker import main; main()"
    )
    return [sys.executable, "-I", "-c", code]


class _Worker:
    def __init__(self) -> None:
        env = {k: os.environ[k] for k in ("LD_LIBRARY_PATH",) if k in os.environ}
        self.proc = subprocess.Popen(
            _boot(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd="/",
            close_fds=True,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.to = self.proc.stdin.fileno()
        self.frames = Frames(self.proc.stdout.fileno())
        self.ready = False
        self.dead = False
        self.sent: OrderedDict[int, None] = OrderedDict()
        self.cpu_mark = 0.0
        """The worker's own CPU seconds when it last answered (it idles in between)."""
        self.rss_base: int | None = None

    def poll_ready(self) -> bool:
        """Has the worker finished starting? Never blocks; a worker that died is marked."""
        if self.ready or self.dead:
            return self.ready
        while True:
            frame = self.frames.take()
            if frame is not None:
                hello = pickle.loads(frame)
                self.ready = hello[0] == "ready"
                self.dead = not self.ready
                if self.ready:
                    self.cpu_mark = hello[1]
                return self.ready
            readable, _, _ = select.select([self.frames.fd], [], [], 0)
            if not readable:
                return False
            if not self.frames.fill():
                self.dead = True
                return False

    def send_ruleset(self, ruleset: RuleSet) -> None:
        token = ruleset.token
        if token in self.sent:
            self.sent.move_to_end(token)
            return
        write_frame(self.to, pickle.dumps(("rules", token, pickle.dumps(ruleset, 5)), 5))
        self.sent[token] = None
        while len(self.sent) > MAX_RULESETS:
            old, _ = self.sent.popitem(last=False)
            write_frame(self.to, pickle.dumps(("drop", old), 5))

    def kill(self) -> float:
        """Kill and reap; the CPU seconds it had used since :attr:`cpu_mark`."""
        self.dead = True
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGKILL)
        return self.reap()[1]

    def reap(self) -> tuple[int, float]:
        """Wait for the exit; (wait status, CPU seconds since :attr:`cpu_mark`)."""
        self.dead = True
        status, cpu = 0, 0.0
        with contextlib.suppress(ChildProcessError):
            _, status, rusage = os.wait4(self.proc.pid, 0)
            cpu = max(0.0, rusage.ru_utime + rusage.ru_stime - self.cpu_mark)
            self.proc.returncode = os.waitstatus_to_exitcode(status)
        for f in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                if f is not None:
                    f.close()
        return status, cpu


class _Pool:
    def __init__(self) -> None:
        self.size = 1
        self.warmup = WARMUP
        self._lock = threading.Lock()
        self._returned = threading.Condition(self._lock)
        self._idle: list[_Worker] = []
        self._count = 0
        self._first: float | None = None
        self._failed_starts = 0
        self.counts = {"jobs": 0, "fallbacks": 0, "started": 0, "retired": 0, "cpuUs": 0}

    def take(self, wait: float = 0.0) -> _Worker | None:
        """An idle, ready worker, or None. ``wait``: seconds to wait for one that a batch
        holds (none is waited for while every worker is still starting or none exists)."""
        until = time.monotonic() + wait
        with self._lock:
            while True:
                now = time.monotonic()
                if self._first is None:
                    self._first = now
                for w in list(self._idle):
                    if w.poll_ready():
                        self._idle.remove(w)
                        return w
                    if w.dead:
                        self._idle.remove(w)
                        self._count -= 1
                        self._failed_starts += 1
                        w.reap()
                if now - self._first >= self.warmup:
                    self._start()
                busy = self._count - len(self._idle)
                if busy <= 0 or now >= until:
                    return None
                self._returned.wait(until - now)

    def start(self) -> None:
        """Start a worker now if the pool has room (it is ready half a second later)."""
        with self._lock:
            self.warmup = 0.0
            if not any(not w.dead for w in self._idle):
                self._start()

    def _start(self) -> None:
        """With the lock held."""
        if self._count >= self.size or self._failed_starts >= _MAX_FAILED_STARTS:
            return
        try:
            self._idle.append(_Worker())
        except OSError:
            self._failed_starts += 1
            return
        self._count += 1
        self.counts["started"] += 1

    def give(self, w: _Worker) -> None:
        with self._lock:
            self._idle.append(w)
            self._returned.notify()

    def retire(self, w: _Worker) -> None:
        if not w.dead:
            w.kill()
        with self._lock:
            self._count -= 1
            self.counts["retired"] += 1
            self._returned.notify()

    def shutdown(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
            self._count -= len(idle)
        for w in idle:
            w.kill()


_POOL = _Pool()
atexit.register(_POOL.shutdown)


def configure(*, size: int | None = None, warmup: float | None = None) -> None:
    """How many workers this process may run (0: none, every batch forks) and how long after
    its first isolated batch the first one starts. Idle workers over a new size stop."""
    if warmup is not None:
        _POOL.warmup = warmup
    if size is not None:
        _POOL.size = size
        _POOL.shutdown()


def warm(wait: float = 0.0) -> bool:
    """Start the workers now, whatever :data:`WARMUP` says, and wait up to ``wait`` seconds
    until one is ready. Whether one is. Called without waiting by a renderer that renders a
    second time: the process is not a one-shot command, and the worker should be ready
    before the next batch rather than be started by it."""
    _POOL.start()
    until = time.monotonic() + wait
    while True:
        w = _POOL.take()
        if w is not None:
            _POOL.give(w)
            return True
        if time.monotonic() >= until:
            return False
        time.sleep(0.02)


def stats() -> dict[str, int]:
    """Batches run by workers (``jobs``), batches a worker could not take (``fallbacks``),
    workers ``started`` and ``retired``, and the CPU microseconds batches used in workers
    (``cpuUs``; not counting batches that were killed)."""
    return dict(_POOL.counts)


def run_in_worker(
    job: Job[T],
    timeout: float,
    *,
    memory_headroom: int = MEMORY_HEADROOM,
    cancel: CancelSignal | None = None,
    usage: Usage | None = None,
) -> T:
    """``job()`` in a worker within ``timeout`` CPU seconds, as ``run_isolated`` runs a
    function in a fork: the same exceptions, and ``usage`` receives the CPU time the batch
    used. Raises :class:`Unavailable` when no worker can take it (nothing was charged)."""
    if cancel is not None and cancel.is_set:
        raise WorkerCancelled("cancelled before the worker started")
    w = _POOL.take(BUSY_WAIT)
    if w is None:
        _POOL.counts["fallbacks"] += 1
        raise Unavailable("no idle worker")
    try:
        payload = dump(job)
    except TooLarge as exc:
        _POOL.counts["fallbacks"] += 1
        _POOL.give(w)
        raise Unavailable(str(exc)) from None
    started = time.monotonic()
    try:
        if job.ruleset is not None:
            w.send_ruleset(job.ruleset)
        token = job.ruleset.token if job.ruleset is not None else None
        write_frame(w.to, pickle.dumps(("job", token, timeout, memory_headroom, payload), 5))
    except OSError:
        _POOL.counts["fallbacks"] += 1
        _POOL.retire(w)
        raise Unavailable("the worker is gone") from None
    deadline = started + backstop(timeout)
    try:
        frame = _answer(w, timeout, deadline, cancel, usage)
    except (WorkerDeadline, WorkerCancelled, WorkerFailed):
        _POOL.retire(w)
        raise
    kind, value, used, total, rss = pickle.loads(frame)
    w.cpu_mark = total
    if usage is not None:
        usage.cpu = used
    if w.rss_base is None:
        w.rss_base = rss
    if kind in ("ok", "unshipped") and rss <= w.rss_base + RETIRE_GROWTH:
        _POOL.give(w)
    else:
        _POOL.retire(w)
    _POOL.counts["cpuUs"] += round(used * 1e6)
    if kind == "ok":
        _POOL.counts["jobs"] += 1
        return pickle.loads(value)  # type: ignore[no-any-return]
    if kind == "unshipped":
        _POOL.counts["fallbacks"] += 1
        raise Unavailable(str(value))
    raise WorkerFailed(str(value), memory=kind == "memory")


def _answer(
    w: _Worker,
    timeout: float,
    deadline: float,
    cancel: CancelSignal | None,
    usage: Usage | None,
) -> bytes:
    """The worker's answer frame. At the deadline or on ``cancel`` the worker is killed, and
    a worker that died is reaped; then it raises as ``run_isolated`` does, with the CPU the
    batch used in ``usage``."""
    while True:
        frame = w.frames.take()
        if frame is not None:
            return frame
        remaining = deadline - time.monotonic()
        stop: Exception | None = None
        if remaining <= 0:
            cpu = w.kill()
            stop = WorkerDeadline(timeout, cpu, wall=backstop(timeout))
        else:
            watched = [w.frames.fd] if cancel is None else [w.frames.fd, cancel.fileno()]
            ready, _, _ = select.select(watched, [], [], remaining)
            if cancel is not None and cancel.fileno() in ready:
                cpu = w.kill()
                stop = WorkerCancelled("the caller cancelled the evaluation")
            elif ready and not w.frames.fill():
                status, cpu = w.reap()
                stop = _death(status, timeout, cpu)
        if stop is not None:
            if usage is not None:
                usage.cpu = cpu
            raise stop


def _death(status: int, timeout: float, cpu: float) -> Exception:
    sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
    if sig in (signal.SIGPROF, signal.SIGXCPU):
        return WorkerDeadline(timeout, cpu)
    why = f"killed by signal {sig}" if sig else f"exit status {os.waitstatus_to_exitcode(status)}"
    # An allocation failure inside the C++ runtime aborts the process.
    return WorkerFailed(f"evaluation worker died ({why})", memory=sig == signal.SIGABRT)
