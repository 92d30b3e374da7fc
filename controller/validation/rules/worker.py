"""The evaluation worker's side of ``pool.py``: a loop that runs one batch at a time.

It reads frames from stdin and answers on what was stdout (stdout itself then points at
``/dev/null``, so nothing a library prints can break a frame):

* ``("rules", token, pickled rule set)`` and ``("drop", token)`` keep the rule sets the
  batches name;
* ``("job", token, cpu, headroom, pickled job)`` runs one batch and answers
  ``(kind, pickled value or message, CPU seconds of the batch, CPU seconds so far, resident
  bytes)``, where kind is ``ok``, ``memory``, ``unshipped`` or ``error``.

Each batch runs under its own limits, as a forked child would: ``ITIMER_PROF`` at its CPU
budget (the default action of ``SIGPROF`` ends the process, which the parent reports as out
of time) and ``RLIMIT_AS`` at the address space it has now plus the headroom (an allocation
past it fails: ``MemoryError``, or an abort inside the C++ runtime). Unpickling the inputs and
pickling the answer happen inside those limits too. The limits are lifted between batches,
when the worker only waits for the next frame.

End of file on stdin (the parent exited or let the worker go) ends the worker.
"""

from __future__ import annotations

import os
import pickle
import resource
import signal
from collections.abc import Iterator
from contextlib import contextmanager

from controller.validation.rules import natives
from controller.validation.rules.compiled import RuleSet
from controller.validation.rules.isolate import address_space
from controller.validation.rules.wire import Frames, Unshipped, receive, write_frame

__all__ = ["main"]


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _resident() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


@contextmanager
def _limits(cpu: float, headroom: int | None) -> Iterator[None]:
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if headroom is not None:
        current = address_space()
        if current is not None:
            limit = current + headroom
            if soft != resource.RLIM_INFINITY:
                limit = min(limit, soft)
            resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    signal.setitimer(signal.ITIMER_PROF, max(cpu, 0.001))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _run(
    rulesets: dict[int, RuleSet], token: int | None, cpu: float, headroom: int | None, data: bytes
) -> bytes:
    before = _cpu()
    kind: str
    value: bytes | str
    try:
        with _limits(cpu, headroom):
            job = receive(data, rulesets.get(token) if token is not None else None)
            kind, value = "ok", pickle.dumps(job(), pickle.HIGHEST_PROTOCOL)
    except MemoryError:
        kind, value = "memory", "out of memory"
    except Unshipped as exc:
        kind, value = "unshipped", str(exc)
    except Exception as exc:
        kind, value = "error", f"{type(exc).__name__}: {exc}"
    now = _cpu()
    return pickle.dumps((kind, value, now - before, now, _resident()), pickle.HIGHEST_PROTOCOL)


def main() -> None:
    """Serve batches until stdin ends."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's ^C is the parent's to handle
    signal.signal(signal.SIGPROF, signal.SIG_DFL)
    # The signal mask survives exec: the thread that started this worker may block SIGPROF.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGPROF})
    answers = os.dup(1)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.close(null)
    requests = Frames(0)
    rulesets: dict[int, RuleSet] = {}
    natives.remember_scans()  # successive proposals' texts differ in a few lines
    write_frame(answers, pickle.dumps(("ready", _cpu())))  # its start is no batch's CPU
    while True:
        frame = requests.take()
        if frame is None:
            if not requests.fill():
                return
            continue
        message = pickle.loads(frame)
        if message[0] == "rules":
            rulesets[message[1]] = pickle.loads(message[2])
        elif message[0] == "drop":
            rulesets.pop(message[1], None)
        elif message[0] == "job":
            _, token, cpu, headroom, data = message
            write_frame(answers, _run(rulesets, token, cpu, headroom, data))


if __name__ == "__main__":  # pragma: no cover - started by pool.py
    main()
