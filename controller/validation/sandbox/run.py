"""Running one program in the sandbox: slots, files, spawn, timeout, output, clean-up."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import os
import shutil
import signal
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import PurePosixPath
from typing import BinaryIO

from controller.render import FileSet
from controller.validation.sandbox import hugepages
from controller.validation.sandbox.plan import Plan, build_plan
from controller.validation.sandbox.policy import (
    SANDBOX_DIR,
    Isolation,
    SandboxError,
    SandboxPolicy,
    SandboxResult,
)
from controller.validation.sandbox.probe import isolation_for
from controller.validation.sandbox.spawn import Spawned, exec_error, spawn
from controller.validation.sandbox.uids import uids

__all__ = ["max_concurrency", "run_sandboxed", "set_max_concurrency"]

# --- concurrency ----------------------------------------------------------------------------


def _cpu_count(cgroup: str = "/sys/fs/cgroup") -> int:
    """CPUs this process may use: affinity, capped by a cgroup CPU quota when one is set
    (``cgroup`` is the mount point; tests point it at a directory of their own)."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    quota: float | None = None
    with contextlib.suppress(OSError, ValueError), open(f"{cgroup}/cpu.max") as f:
        q, p = f.read().split()[:2]
        if q != "max":
            quota = int(q) / int(p)
    if quota is None:
        with contextlib.suppress(OSError, ValueError):
            with open(f"{cgroup}/cpu/cpu.cfs_quota_us") as f:
                q_us = int(f.read())
            with open(f"{cgroup}/cpu/cpu.cfs_period_us") as f:
                p_us = int(f.read())
            if q_us > 0:
                quota = q_us / p_us
    if quota is not None:
        n = min(n, max(1, math.ceil(quota)))
    return max(1, n)


_REAP_POLLS = 200
_REAP_INTERVAL = 0.0005
"""Up to 0.1 s for a killed program to be gone before a thread takes over the wait."""

_max_concurrency = _cpu_count()
_semaphores: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
    weakref.WeakKeyDictionary()
)


def max_concurrency() -> int:
    return _max_concurrency


def set_max_concurrency(n: int | None) -> None:
    """Override the bound (``None``: back to the CPU count). Affects new event loops only."""
    global _max_concurrency
    _max_concurrency = _cpu_count() if n is None else max(1, n)
    _semaphores.clear()


_pace = hugepages.Pace()
"""Whether a run of a ``huge_pages`` policy is late enough in a series (see ``hugepages.py``)."""


def _semaphore() -> asyncio.Semaphore:
    # One semaphore per event loop: asyncio primitives bind to the loop that first waits.
    loop = asyncio.get_running_loop()
    sem = _semaphores.get(loop)
    if sem is None:
        sem = _semaphores[loop] = asyncio.Semaphore(_max_concurrency)
    return sem


# --- running ----------------------------------------------------------------------------------


def _materialize(files: FileSet, extra: Mapping[str, bytes], workdir: str, uid: int | None) -> None:
    def write(rel: str, content: bytes) -> None:
        p = PurePosixPath(rel)
        if not rel or p.is_absolute() or ".." in p.parts or "\x00" in rel:
            raise SandboxError(f"file set path escapes its directory: {rel!r}")
        full = os.path.join(workdir, *p.parts)
        parent = os.path.dirname(full)
        if not os.path.isdir(parent):
            os.makedirs(parent, mode=0o700, exist_ok=True)
            if uid is not None:
                d = parent
                while d != workdir:
                    os.chown(d, uid, uid)
                    d = os.path.dirname(d)
        fd = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, content)
            if uid is not None:
                os.fchown(fd, uid, uid)
        finally:
            os.close(fd)

    for entry in files:
        write(entry.path, entry.content)
    for rel, content in extra.items():
        write(rel, content)


class _Collector:
    """Keeps at most ``cap`` bytes per stream and tells when the program itself exited.

    Exit and end-of-output are separate events on purpose: a background child may hold the
    pipes open after the program exited, and that must not look like a hang.
    """

    def __init__(self, cap: int, loop: asyncio.AbstractEventLoop) -> None:
        self.cap = cap
        self.out = bytearray()
        self.err = bytearray()
        self.truncated = False
        self.exited: asyncio.Future[None] = loop.create_future()
        self.closed: asyncio.Future[None] = loop.create_future()
        self._open = {1, 2}

    def pipe_data_received(self, fd: int, data: bytes | bytearray) -> None:
        buf = self.out if fd == 1 else self.err
        room = self.cap - len(buf)
        if room > 0:
            buf += data[:room]
        if len(data) > max(room, 0):
            self.truncated = True

    def pipe_closed(self, fd: int) -> None:
        self._open.discard(fd)
        if not self._open and not self.closed.done():
            self.closed.set_result(None)

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)


class _Pipe(asyncio.Protocol):
    """One of the program's output pipes, read by the event loop into the collector."""

    def __init__(self, fd: int, collector: _Collector) -> None:
        self.fd, self.collector = fd, collector

    def data_received(self, data: bytes) -> None:
        self.collector.pipe_data_received(self.fd, data)

    def eof_received(self) -> bool:
        return False  # close the transport: there is nothing to write back

    def connection_lost(self, exc: Exception | None) -> None:
        self.collector.pipe_closed(self.fd)


def _prepare(
    argv: list[str],
    files: FileSet,
    extra: Mapping[str, bytes],
    policy: SandboxPolicy,
    iso: Isolation,
    uid: int | None,
    timeout: float,
    base: str,
) -> tuple[list[str], str, Plan]:
    """Lay out the run's directory and plan its isolation: the argv, the workdir, the plan."""
    workdir = os.path.join(base, "d")
    try:
        os.chmod(base, 0o711)
        os.mkdir(workdir, 0o700)
        os.mkdir(os.path.join(base, "r"), 0o755)
        if uid is not None:
            os.chown(workdir, uid, uid)
        _materialize(files, extra, workdir, uid)
        argv = [a.replace(SANDBOX_DIR, workdir) for a in argv]
        plan = build_plan(argv[0], policy, iso, workdir, os.path.join(base, "r"), uid, timeout)
    except OSError as exc:
        raise SandboxError(f"could not prepare the sandbox: {exc.strerror or exc}") from exc
    return argv, workdir, plan


class _Child:
    """A spawned program until it is reaped: its exit status and the end of its pipes."""

    def __init__(self, spawned: Spawned) -> None:
        self.pid = spawned.pid
        self.spawned = spawned
        self.returncode: int | None = None
        self.unowned = {spawned.stdout, spawned.stderr, spawned.status}
        """Our pipe ends that nothing else will close (no transport took them yet)."""

    def pipe(self, fd: int) -> BinaryIO:
        """The parent's end of the child's stdout (1) or stderr (2), for a transport."""
        end = self.spawned.stdout if fd == 1 else self.spawned.stderr
        self.unowned.discard(end)
        return open(end, "rb", 0)

    def exec_error(self) -> str | None:
        """Why the child did not reach exec (see ``spawn.exec_error``); after its exit."""
        self.unowned.discard(self.spawned.status)
        return exec_error(self.spawned.status)

    def kill_all(self, uid: int | None) -> None:
        """Kill it and whatever it started (see :func:`_kill_all`); the sweep only where no
        PID namespace of its own already ends them."""
        _kill_all(self.pid, uid, sweep=not self.spawned.own_pid_namespace)

    def close(self) -> None:
        for fd in self.unowned:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.unowned.clear()

    def poll(self) -> int | None:
        """The exit code (negative: killed by that signal) once it exited, and reaps it."""
        if self.returncode is None:
            with contextlib.suppress(ChildProcessError):
                pid, status = os.waitpid(self.pid, os.WNOHANG)
                if pid:
                    self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait_exit(self) -> None:
        """Block until the child has exited, leaving it to be reaped (a zombie till then)."""
        with contextlib.suppress(ChildProcessError):
            os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOWAIT)

    def reap(self) -> None:
        """Collect a child that was just killed, so that none is left a zombie.

        A killed process is gone within moments; one that is not (stuck in the kernel) is
        left to a thread to wait for, rather than blocking the event loop."""
        for _ in range(_REAP_POLLS):
            if self.poll() is not None:
                return
            time.sleep(_REAP_INTERVAL)
        if self.poll() is None:
            threading.Thread(target=self._reap_blocking, name="htc-reap", daemon=True).start()

    def _reap_blocking(self) -> None:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)


def _watch_exit(
    child: _Child, collector: _Collector, loop: asyncio.AbstractEventLoop
) -> Callable[[], None]:
    """Tell ``collector`` when ``child`` exits; returns the clean-up.

    The child is not reaped here: as a zombie it keeps its pid (the id of its process group),
    so the clean-up that kills what is left of the group cannot hit a process that reused
    it. A pidfd becomes readable at the exit, and the event loop watches it like the pipes;
    kernels without pidfds (before 5.3) get a thread that waits without reaping."""
    try:
        pidfd = os.pidfd_open(child.pid)
    except (AttributeError, OSError):
        waiting = loop.run_in_executor(None, child.wait_exit)
        waiting.add_done_callback(lambda _: collector.process_exited())
        return lambda: None

    def exited() -> None:
        loop.remove_reader(pidfd)
        collector.process_exited()

    loop.add_reader(pidfd, exited)

    def close() -> None:
        loop.remove_reader(pidfd)
        os.close(pidfd)

    return close


def _leftovers(session: int, uid: int | None) -> list[int]:
    """Processes still in the run's session, or (privilege drop) still owned by its uid.

    One read per process: ``/proc/PID/status`` has the state, the real uid and (since Linux
    4.1, ``NSsid``, leftmost as seen from this procfs's namespace, like ``stat``'s session)
    the session. Reading ``stat`` and then ``status`` for each of a host's processes was
    about 4 ms of this process's CPU after every run; a kernel without ``NSsid`` still has
    ``stat`` read for the session."""
    found: list[int] = []
    me = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        pid = int(name)
        try:
            status = _read_proc(f"/proc/{name}/status")
            if _status_field(status, b"State") == b"Z":
                continue
            sid = _status_field(status, b"NSsid")
            if sid is None:
                stat = _read_proc(f"/proc/{name}/stat")
                sid = stat[stat.rindex(b")") + 2 :].split()[3]
            if int(sid) == session:
                found.append(pid)
                continue
            if uid is not None and int(_status_field(status, b"Uid") or b"-1") == uid:
                found.append(pid)
        except (OSError, ValueError, IndexError):
            continue
    return found


_PROC_CHUNK = 1 << 16


def _read_proc(path: str) -> bytes:
    """A whole ``/proc`` file, read through its descriptor until the end: a buffered file
    object for each of the host's processes was a quarter of the sweep's CPU after every run
    (77 processes: 1.9 -> 1.4 ms, median of 10 x 100 sweeps, loaded machine)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        data = os.read(fd, _PROC_CHUNK)
        while chunk := os.read(fd, _PROC_CHUNK):
            data += chunk
        return data
    finally:
        os.close(fd)


def _status_field(status: bytes, name: bytes) -> bytes | None:
    """The first word of a ``/proc/PID/status`` field (None: the kernel has no such field).
    The command name, the only text there a process sets itself, is printed escaped (a
    newline in it shows as ``\\n``), so it cannot make a line of its own."""
    at = status.find(b"\n" + name + b":")
    if at < 0:
        return None
    words = status[at + len(name) + 2 : status.find(b"\n", at + 1)].split()
    return words[0] if words else b""


def _kill_all(pgid: int, uid: int | None, sweep: bool = True) -> None:
    """Kill the program, its process group, then anything that escaped it (new session,
    same uid).

    ``pgid`` is the program's pid, not yet reaped (so it cannot name another process). It is
    killed by pid first: right after the fork it has not yet made its own session, and the
    group of that id does not exist yet. A program that is the init of its own PID namespace
    takes everything it started with it (the kernel kills them before its exit is reported):
    there is nothing to sweep for then (``sweep`` False), which on a host with many processes
    was the largest part of the sandbox's own work after each run."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pgid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    if not sweep:
        return
    for _ in range(20):
        pids = _leftovers(pgid, uid)
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.005)


async def run_sandboxed(
    argv: Sequence[str],
    files: FileSet,
    *,
    timeout: float,
    policy: SandboxPolicy | None = None,
    extra_files: Mapping[str, bytes] | None = None,
) -> SandboxResult:
    """Write ``files`` (and ``extra_files``) to a fresh directory and run ``argv`` there.

    ``argv[0]`` must be an absolute path (the environment is empty: there is no PATH);
    :data:`SANDBOX_DIR` in ``argv`` becomes the directory's path. Raises
    :class:`SandboxError` only for set-up problems; what the program does is the result.
    """
    pol = policy or SandboxPolicy()
    if not argv or not os.path.isabs(argv[0]):
        raise SandboxError(f"sandboxed program must be an absolute path, got {argv[:1]!r}")
    iso = isolation_for(pol)
    async with _semaphore():
        return await _run(list(argv), files, timeout, pol, iso, dict(extra_files or {}))


async def _run(
    argv: list[str],
    files: FileSet,
    timeout: float,
    policy: SandboxPolicy,
    iso: Isolation,
    extra: dict[str, bytes],
) -> SandboxResult:
    uid = uids.take() if iso.privilege_drop else None
    base = ""
    child: _Child | None = None
    pipes: list[asyncio.ReadTransport] = []
    stop_watching: Callable[[], None] = lambda: None  # noqa: E731
    finished = paced = False
    try:
        try:
            base = tempfile.mkdtemp(prefix="htc-sandbox-")
        except OSError as exc:
            raise SandboxError(f"could not prepare the sandbox: {exc.strerror or exc}") from exc
        argv, workdir, plan = _prepare(argv, files, extra, policy, iso, uid, timeout, base)
        loop = asyncio.get_running_loop()
        if policy.huge_pages:
            paced = True
            if _pace.begin():
                plan.environment = dict(hugepages.ENVIRONMENT)
        started = time.perf_counter()
        try:
            child = _Child(spawn(argv, workdir, plan))
        except OSError as exc:
            raise SandboxError(f"could not start {os.path.basename(argv[0])}: {exc}") from exc
        finally:
            plan.close()
        proto = _Collector(policy.max_output, loop)
        stop_watching = _watch_exit(child, proto, loop)
        for fd in (1, 2):
            transport, _ = await loop.connect_read_pipe(
                functools.partial(_Pipe, fd, proto), child.pipe(fd)
            )
            pipes.append(transport)
        timed_out = False
        try:
            await asyncio.wait_for(asyncio.shield(proto.exited), timeout)
        except TimeoutError:
            timed_out = True
        elapsed = (time.perf_counter() - started) * 1000.0
        child.kill_all(uid)
        finished = True
        # Everything holding the pipes is dead now; the rest of the output is in flight.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(proto.exited), 2.0)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(proto.closed), 1.0)
        rc = child.poll()
        failed = child.exec_error()
        if failed is not None:
            raise SandboxError(f"could not start {os.path.basename(argv[0])}: {failed}")
        return SandboxResult(
            returncode=rc if rc is not None else -signal.SIGKILL,
            # A byte that is not UTF-8 (a Latin-1 keyword HAProxy quotes back) stays itself,
            # so a finding shows it as \xNN, as the parser's own findings do.
            stdout=proto.out.decode("utf-8", "surrogateescape"),
            stderr=proto.err.decode("utf-8", "surrogateescape"),
            timed_out=timed_out,
            elapsed_ms=round(elapsed, 3),
            workdir_name=workdir,
            isolation=iso,
            truncated=proto.truncated,
        )
    finally:
        stop_watching()
        for transport in pipes:
            transport.close()
        if child is not None:
            if not finished:
                # Cancelled while running: never leave the check behind.
                child.kill_all(uid)
            child.reap()
            child.close()
        if paced:
            _pace.end()
        if finished:
            _clean_later(base, uid)
        else:
            _clean(base, uid)


def _clean(base: str, uid: int | None) -> None:
    """Remove the run's directory, then free its uid (never before: a later run with the
    same uid could read what is left)."""
    if base:
        shutil.rmtree(base, ignore_errors=True)
    if uid is not None:
        uids.give(uid)


def _clean_later(base: str, uid: int | None) -> None:
    """:func:`_clean` in the event loop's default executor, once the program and whatever
    it started are dead (``_kill_all`` ran): the verdict does not wait for the directory's
    removal (1 ms of CPU but 5-17 ms of wall time for the 3 MB of a 10,000-Ingress candidate
    on a busy disk). ``asyncio.run`` waits for the executor before it returns, so a command
    leaves no directory behind; a loop that cannot take the job any more gets it done here."""
    try:
        asyncio.get_running_loop().run_in_executor(None, _clean, base, uid)
    except RuntimeError:
        _clean(base, uid)
