"""A client for HAProxy's master CLI (``haproxy -W -S <socket>``).

The master CLI is line-oriented: one command per connection in non-interactive mode. The
master starts executing only after the client half-closes its side, and answers by closing
the connection, so a command is "connect, send, shut down writing, read to EOF".

Two behaviours shape the retries here, both observed on the 2.6 and 2.8 binaries:

* On 2.6 ``reload`` makes the master re-execute itself; the connection closes without an
  answer and the socket may refuse connections for a moment. Connecting is therefore retried
  on ``ECONNREFUSED``/``ENOENT`` for a short while instead of failing at once.
* On 2.8 ``reload`` waits for the new worker and answers ``Success=1`` or ``Success=0``
  followed by ``--`` and the startup log of that reload.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from dataclasses import dataclass, field

__all__ = ["MasterCli", "MasterCliError", "ProcTable", "ReloadAnswer", "parse_show_proc"]


class MasterCliError(Exception):
    """The master CLI could not be reached or did not answer in time."""


@dataclass(frozen=True, slots=True)
class Worker:
    pid: int
    reloads: int
    """Reloads this worker has survived; 0 marks a worker of the current generation."""


@dataclass(frozen=True, slots=True)
class ProcTable:
    """The parsed answer of ``show proc``."""

    master_pid: int
    reloads: int
    failed: int
    """Failed reloads since the last successful one (the master resets it on success)."""
    version: str
    workers: tuple[Worker, ...] = field(default_factory=tuple)

    @property
    def current_workers(self) -> tuple[Worker, ...]:
        return tuple(w for w in self.workers if w.reloads == 0)

    @property
    def worker_pids(self) -> frozenset[int]:
        return frozenset(w.pid for w in self.workers)


@dataclass(frozen=True, slots=True)
class ReloadAnswer:
    """What ``reload`` returned: 2.8+ reports success and the log, 2.6 returns nothing."""

    success: bool | None
    """None when the master does not report the outcome (2.6)."""
    log: str


_FAILED = re.compile(r"\[failed:\s*(\d+)\]")


def parse_show_proc(text: str) -> ProcTable:
    """Parse ``show proc``; raises ValueError when the master line is missing."""
    master: tuple[int, int, int, str] | None = None
    workers: list[Worker] = []
    section = "master"
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            # "# workers", "# old workers" (3.x), "# programs"; the first line is the header.
            if "worker" in line:
                section = "workers"
            elif "program" in line:
                section = "programs"
            continue
        parts = line.split()
        if len(parts) < 3 or not parts[0].isdigit():
            continue
        pid, kind = int(parts[0]), parts[1]
        if kind == "master":
            failed_m = _FAILED.search(line)
            version = parts[-1]
            master = (pid, int(parts[2]), int(failed_m.group(1)) if failed_m else 0, version)
        elif kind == "worker" and section == "workers":
            workers.append(Worker(pid, int(parts[2]) if parts[2].isdigit() else 0))
    if master is None:
        raise ValueError(f"no master line in show proc output: {text[:200]!r}")
    pid, reloads, failed, version = master
    return ProcTable(pid, reloads, failed, version, tuple(workers))


class MasterCli:
    """Commands over the master socket, each on its own connection."""

    def __init__(self, path: str, *, timeout: float = 10.0, connect_retry: float = 2.0) -> None:
        self.path = path
        self.timeout = timeout
        self.connect_retry = connect_retry

    async def command(self, line: str, *, timeout: float | None = None) -> str:
        """Send one command and return the whole answer."""
        limit = self.timeout if timeout is None else timeout
        try:
            return await asyncio.wait_for(self._command(line), limit)
        except TimeoutError:
            raise MasterCliError(
                f"master CLI {self.path}: no answer to {line!r} within {limit:g}s"
            ) from None

    async def _command(self, line: str) -> str:
        reader, writer = await self._connect()
        try:
            writer.write(line.encode() + b"\n")
            await writer.drain()
            if writer.can_write_eof():
                writer.write_eof()
            chunks: list[bytes] = []
            while chunk := await reader.read(65536):
                chunks.append(chunk)
            return b"".join(chunks).decode(errors="replace")
        except OSError as exc:
            # 2.6 resets connections that arrive while a failed reload unwinds.
            raise MasterCliError(f"master CLI {self.path}: {line!r} failed: {exc}") from exc
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        deadline = time.monotonic() + self.connect_retry
        delay = 0.005
        while True:
            try:
                return await asyncio.open_unix_connection(self.path)
            except (ConnectionRefusedError, FileNotFoundError) as exc:
                if time.monotonic() >= deadline:
                    raise MasterCliError(f"master CLI {self.path} unreachable: {exc}") from exc
            except OSError as exc:
                raise MasterCliError(f"master CLI {self.path} unreachable: {exc}") from exc
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.1)

    async def show_proc(self) -> ProcTable:
        text = await self.command("show proc")
        try:
            return parse_show_proc(text)
        except ValueError as exc:
            raise MasterCliError(str(exc)) from exc

    async def reload(self) -> ReloadAnswer:
        text = await self.command("reload")
        stripped = text.lstrip()
        if stripped.startswith("Success="):
            head, _, rest = stripped.partition("\n")
            log = rest[3:] if rest.startswith("--\n") else rest
            return ReloadAnswer(head.strip() == "Success=1", log.strip("\n"))
        return ReloadAnswer(None, text.strip())

    async def reachable(self) -> bool:
        try:
            await self.show_proc()
        except MasterCliError:
            return False
        return True
