"""Start, watch and stop a local HAProxy in master-worker mode.

``haproxy -W -S <socket> -C <dir> -f haproxy.cfg`` in the foreground: the master owns the
workers and the master CLI, we own the master. What we rely on, observed on 2.6 and 2.8:

* When the current worker dies (crash, OOM kill, ``kill -9``) the master stops every process
  and exits, whatever ``no-exit-on-failure`` says. So "a dead worker" and "a dead master" are
  the same event here: the master is started again from the deployed files, which are the
  last confirmed set. A master that is alive without a current worker (seen only with
  unusual global settings) is asked to ``reload``, which forks one.
* The master's stderr carries its startup log. 2.6 has no other way to say why a reload
  failed, so the output is kept in a bounded buffer the deploy target reads.

The master runs in its own session so that a Ctrl-C in the terminal reaches only the
controller, which then stops HAProxy in order (soft stop, hard stop, kill of the whole
process group). It also gets a parent-death signal so that HAProxy never outlives a
controller that was killed without a chance to clean up.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import ctypes
import ctypes.util
import os
import shutil
import signal
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

from controller.deploy.master_cli import MasterCli, MasterCliError
from controller.deploy.target import StartResult
from controller.diagnostics import Diagnostic, Phase, make
from controller.observability import METRICS, Metrics, get_logger
from controller.render import MAIN_CONFIG

__all__ = ["HAProxySupervisor"]

_log = get_logger("controller.haproxy")

_PR_SET_PDEATHSIG = 1


def _death_signal() -> Callable[[], None] | None:
    """A pre-exec hook asking the kernel to SIGTERM the child when we die (Linux only).

    The libc handle is resolved here, before any fork, so the hook itself only makes one
    system call in the child.
    """
    name = ctypes.util.find_library("c")
    if not name:
        return None
    try:
        prctl = ctypes.CDLL(name, use_errno=True).prctl
    except (OSError, AttributeError):
        return None

    def hook() -> None:
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)

    return hook


PARENT_DEATH_SIGNAL = _death_signal()
"""Pre-exec hook: the child gets SIGTERM when this process dies (None off Linux)."""


def _resolve(binary: str) -> str:
    if os.sep in binary:
        return str(Path(binary).resolve())
    return shutil.which(binary) or binary


class HAProxySupervisor:
    """One supervised HAProxy master. Implements ``controller.deploy.HAProxyProcess``."""

    def __init__(
        self,
        binary: str,
        config_dir: Path | str,
        master_socket: Path | str,
        *,
        metrics: Metrics | None = None,
        start_timeout: float = 15.0,
        stop_timeout: float = 5.0,
        check_interval: float = 1.0,
        on_event: Callable[[Diagnostic], None] | None = None,
        log_lines: int = 4000,
    ) -> None:
        # Resolved now: the master runs with the deploy directory as working directory.
        self.binary = _resolve(binary)
        self.config_dir = Path(config_dir)
        self.master_socket = Path(master_socket)
        self.metrics = metrics or METRICS
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.check_interval = check_interval
        self.on_event = on_event
        self.cli = MasterCli(str(self.master_socket), timeout=5.0, connect_retry=0.5)
        # While starting, the socket is polled every few milliseconds next to the process's
        # exit status; a client that kept retrying the connection itself would hide an exit
        # (a port in use) for its whole retry window.
        self._probe = MasterCli(str(self.master_socket), timeout=2.0, connect_retry=0.0)
        self.restarts = 0
        self._proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        self._watch: asyncio.Task[None] | None = None
        self._lines: deque[str] = deque(maxlen=log_lines)
        self._seq = 0
        self._lock = asyncio.Lock()
        self._stopping = False
        self._started_once = False

    # --- HAProxyProcess -------------------------------------------------------------------

    def running(self) -> bool:
        return self._proc is not None and self._proc.returncode is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self.running() and self._proc else None

    def log_mark(self) -> int:
        return self._seq

    def log_since(self, mark: int) -> str:
        missing = self._seq - mark
        if missing <= 0:
            return ""
        lines = list(self._lines)[-missing:]
        return "\n".join(lines)

    async def ensure_running(self) -> StartResult:
        async with self._lock:
            if self.running():
                return StartResult(True)
            if self._stopping:
                return StartResult(False, "supervisor is stopping")
            result = await self._start()
            if result.ok and self._watch is None:
                self._watch = asyncio.create_task(
                    self._supervise(), name="haproxy-supervisor", context=contextvars.Context()
                )
            return result

    # --- lifecycle ------------------------------------------------------------------------

    def command(self) -> list[str]:
        return [
            self.binary,
            "-W",
            "-S",
            str(self.master_socket),
            "-C",
            str(self.config_dir),
            "-f",
            MAIN_CONFIG,
        ]

    async def _start(self) -> StartResult:
        mark = self.log_mark()
        self.master_socket.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            self.master_socket.unlink()
        try:
            proc = await asyncio.create_subprocess_exec(
                *self.command(),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                cwd=str(self.config_dir),
                start_new_session=True,
                preexec_fn=PARENT_DEATH_SIGNAL,
            )
        except OSError as exc:
            return StartResult(False, f"cannot execute {self.binary}: {exc}")
        self._proc = proc
        # A fresh context: these tasks outlive the reconcile run that started HAProxy and must
        # not log with its trigger and checksum.
        self._reader = asyncio.create_task(
            self._read(proc), name="haproxy-output", context=contextvars.Context()
        )
        deadline = time.monotonic() + self.start_timeout
        while True:
            if proc.returncode is not None:
                await self._drain_reader()
                _log.error("haproxy exited while starting", returncode=proc.returncode)
                log = self.log_since(mark)
                return StartResult(False, f"{log}\nexit code {proc.returncode}".lstrip())
            try:
                table = await self._probe.show_proc()
            except MasterCliError:
                table = None
            if table is not None and table.current_workers:
                self._started_once = True
                _log.info("haproxy started", pid=proc.pid, version=table.version)
                return StartResult(True, self.log_since(mark))
            if time.monotonic() >= deadline:
                await self._kill(proc)
                return StartResult(
                    False,
                    self.log_since(mark) + f"\nno worker within {self.start_timeout:g}s",
                )
            await asyncio.sleep(0.02)

    async def _read(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdout is not None
        while True:
            try:
                raw = await proc.stdout.readline()
            except (ValueError, asyncio.LimitOverrunError):
                continue
            if not raw:
                return
            line = raw.decode(errors="replace").rstrip("\n")
            self._lines.append(line)
            self._seq += 1
            if line.startswith("[ALERT]"):
                _log.warning("haproxy", line=line)
            else:
                _log.debug("haproxy", line=line)

    async def _drain_reader(self) -> None:
        if self._reader is not None:
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(self._reader), 1.0)

    async def _supervise(self) -> None:
        """Restart a master that exited; give a master without a worker a new one."""
        backoff = 0.2
        missing_worker = 0
        while not self._stopping:
            proc = self._proc
            if proc is None:
                return
            try:
                await asyncio.wait_for(asyncio.shield(proc.wait()), self.check_interval)
            except TimeoutError:
                missing_worker = await self._check_worker(missing_worker)
                if proc.returncode is None:
                    backoff = 0.2
                    continue
            if self._stopping:
                return
            await self._drain_reader()
            await _reap_group(proc.pid)
            code = proc.returncode
            self.restarts += 1
            self.metrics.haproxy_restarts.labels("master_exited").inc()
            diag = make(
                "W7009",
                Phase.DEPLOY,
                f"HAProxy master exited with code {code}; starting it again",
            )
            _log.warning("haproxy master exited", returncode=code, restarts=self.restarts)
            self._emit(diag)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 10.0)
            async with self._lock:
                if self._stopping or self.running():
                    continue
                result = await self._start()
            if not result.ok:
                self._emit(make("E7008", Phase.DEPLOY, f"restart failed: {result.log[-500:]}"))

    async def _check_worker(self, missing: int) -> int:
        try:
            table = await self.cli.show_proc()
        except MasterCliError:
            return missing
        if table.current_workers:
            return 0
        missing += 1
        if missing >= 2:
            _log.warning("haproxy master has no worker; reloading")
            self.metrics.haproxy_restarts.labels("no_worker").inc()
            with contextlib.suppress(MasterCliError):
                await self.cli.reload()
            return 0
        return missing

    def _emit(self, diag: Diagnostic) -> None:
        if self.on_event is not None:
            try:
                self.on_event(diag)
            except Exception:
                _log.exception("supervisor event handler failed")

    async def stop(self) -> None:
        """Soft stop, then hard stop, then kill the whole process group."""
        self._stopping = True
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
            self._watch = None
        async with self._lock:
            proc = self._proc
            if proc is not None:
                await self._terminate(proc)
            if self._reader is not None:
                await self._drain_reader()
                self._reader.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._reader
                self._reader = None
        with contextlib.suppress(FileNotFoundError):
            self.master_socket.unlink()

    async def _terminate(self, proc: asyncio.subprocess.Process) -> None:
        # The signal is repeated: a master that is in the middle of a reload (re-executing
        # itself, forking the new worker) does not act on a signal that arrives meanwhile.
        grace = self.stop_timeout / 2
        for sig in (signal.SIGUSR1, signal.SIGTERM):
            deadline = time.monotonic() + grace
            while proc.returncode is None and time.monotonic() < deadline:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(sig)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(proc.wait()), 0.25)
        await self._kill(proc)

    async def _kill(self, proc: asyncio.subprocess.Process) -> None:
        # Old workers still draining connections belong to the same group.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()


async def _reap_group(pgid: int, grace: float = 1.0) -> None:
    """End what is left of a dead master's process group.

    A master killed outright leaves its workers running, still bound to the frontend ports
    and serving the old configuration; a new master must not start next to them.
    """
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            return
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if not group_alive(pgid):
                return
            await asyncio.sleep(0.02)


def group_alive(pgid: int) -> bool:
    """Whether a process other than a zombie is in group ``pgid``.

    Orphaned workers are reparented to PID 1, which in a container may never reap them, so a
    signal-0 probe would keep finding their zombies; /proc tells the states apart.
    """
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid pgrp ...; comm may contain spaces, so split after the ")".
        fields = stat.rpartition(")")[2].split()
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] != "Z":
            return True
    return False
