"""Deploy to a HAProxy that runs in master-worker mode, through its master CLI socket.

The sequence for every new set: keep the running set in ``.previous/``, write the new files
(auxiliary first, config last, each atomically), ask the master to ``reload``, and confirm
the outcome before claiming anything:

* 2.8 and later answer ``reload`` with ``Success=1|0`` and the startup log of that reload.
* 2.6 closes the connection while the master re-executes itself. The outcome is read from
  ``show proc`` instead: the reload counter moves, and either the failed counter is non-zero
  (refused) or a worker of the new generation exists (accepted). The startup log then comes
  from the master's stderr, which only a local supervisor can see.

A refused set is undone: the previous set is written back and reloaded, so the master, the
files on disk and the manifest agree again, and HAProxy's alerts become diagnostics. A set
whose checksum already runs is not reloaded at all. Drift (someone edited the deployed files)
is repaired by writing back the last set HAProxy confirmed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from pathlib import Path

from controller.deploy.files import DeployDir
from controller.deploy.haproxy_log import diagnostics_from_log
from controller.deploy.master_cli import MasterCli, MasterCliError, ProcTable
from controller.deploy.target import (
    DeployOutcome,
    DeployResult,
    HAProxyProcess,
    MasterSocketDetail,
)
from controller.diagnostics import Diagnostic, Phase, make
from controller.observability import METRICS, Metrics, get_logger
from controller.render import FileSet
from controller.validation import ValidatedFileSet

__all__ = ["MasterSocketTarget"]

_log = get_logger("controller.deploy")


class _Activation:
    """The outcome of one reload or start."""

    __slots__ = ("diagnostics", "log", "ok")

    def __init__(self, ok: bool, log: str = "", diagnostics: list[Diagnostic] | None = None):
        self.ok = ok
        self.log = log
        self.diagnostics = diagnostics or []


class MasterSocketTarget:
    """A deploy directory plus the master CLI socket of the HAProxy that reads it."""

    def __init__(
        self,
        config_dir: Path | str,
        master_socket: Path | str,
        *,
        name: str = "local",
        process: HAProxyProcess | None = None,
        metrics: Metrics | None = None,
        reload_timeout: float = 30.0,
    ) -> None:
        self.name = name
        self.dir = DeployDir(config_dir)
        self.cli = MasterCli(str(master_socket), timeout=reload_timeout)
        self.process = process
        self.metrics = metrics or METRICS
        self.reload_timeout = reload_timeout
        self._lock = asyncio.Lock()
        self._active: FileSet | None = None
        self._loaded = False

    @property
    def active_checksum(self) -> str | None:
        return self._active.checksum if self._active else None

    # --- public ---------------------------------------------------------------------------

    async def deploy(self, validated: ValidatedFileSet) -> DeployResult:
        if not isinstance(validated, ValidatedFileSet):
            raise TypeError("deploy targets accept only a ValidatedFileSet from the pipeline")
        if not validated.verify():
            diag = make(
                "F7012",
                Phase.DEPLOY,
                f"file set {validated.checksum[:12]} does not match the checksum its verdict "
                f"was given for ({(validated.report.metadata.checksum or 'none')[:12]}); "
                "not deployed",
            )
            _log.error("validated set altered", target=self.name, checksum=validated.checksum)
            return self._result(
                DeployOutcome.FAILED, validated.files, time.monotonic(), diagnostics=[diag]
            )
        async with self._lock:
            return await self._deploy(validated.files)

    async def check_drift(self) -> DeployResult | None:
        async with self._lock:
            active = self._current()
            if active is None:
                return None
            drifted = tuple(self.dir.drifted(active))
            if not drifted:
                return None
            self.metrics.drift_redeploys.labels(self.name).inc()
            _log.warning("drift detected", target=self.name, paths=list(drifted))
            result = await self._deploy(active, force=True)
            note = make(
                "W7007",
                Phase.DEPLOY,
                f"deployed files changed outside the controller: {', '.join(drifted)}; "
                f"validated set {active.checksum[:12]} written back",
            )
            return dataclasses.replace(
                result, diagnostics=(note, *result.diagnostics), drift=drifted
            )

    # --- the sequence ---------------------------------------------------------------------

    def _current(self) -> FileSet | None:
        """What HAProxy runs: known from this process, or from a manifest left on disk."""
        if not self._loaded:
            self._loaded = True
            manifest = self.dir.manifest()
            if manifest is not None:
                on_disk = self.dir.read(manifest)
                if on_disk is not None and on_disk.checksum == manifest.checksum:
                    self._active = on_disk
        return self._active

    async def _deploy(self, files: FileSet, *, force: bool = False) -> DeployResult:
        started = time.monotonic()
        active = self._current()
        running = self.process.running() if self.process else True
        if (
            not force
            and running
            and active is not None
            and active.checksum == files.checksum
            and not self.dir.drifted(files)
        ):
            return self._result(DeployOutcome.UNCHANGED, files, started)

        previous = active if active is not None and active.checksum != files.checksum else None
        try:
            if previous is not None:
                self.dir.save_previous(previous)
            self.dir.write(files, replacing=active.files if active else ())
        except OSError as exc:
            diag = make("E7006", Phase.DEPLOY, f"cannot write to {self.dir.root.name}/: {exc}")
            return self._result(DeployOutcome.FAILED, files, started, diagnostics=[diag])

        first = await self._activate(files)
        if first.ok:
            self.dir.commit(files)
            self._active = files
            self.metrics.last_deploy_timestamp.set(time.time())
            _log.info("deployed", target=self.name, checksum=files.checksum)
            return self._result(
                DeployOutcome.DEPLOYED, files, started, reloaded=True, log=first.log
            )

        _log.error("haproxy refused the file set", target=self.name, checksum=files.checksum)
        if previous is None:
            summary = make(
                "E7001",
                Phase.DEPLOY,
                f"HAProxy refused file set {files.checksum[:12]}; there is no previous set "
                "to restore",
            )
            return self._result(
                DeployOutcome.FAILED,
                files,
                started,
                reloaded=True,
                log=first.log,
                diagnostics=[summary, *first.diagnostics],
            )

        try:
            self.dir.write(previous, replacing=files.files)
        except OSError as exc:
            second = _Activation(False, diagnostics=[])
            second.diagnostics.append(
                make("F7003", Phase.DEPLOY, f"cannot restore the previous set: {exc}")
            )
        else:
            second = await self._activate(previous)
        if second.ok:
            self.dir.commit(previous)
            self._active = previous
            summary = make(
                "E7001",
                Phase.DEPLOY,
                f"HAProxy refused file set {files.checksum[:12]} at reload; previous set "
                f"{previous.checksum[:12]} restored and running",
            )
            _log.warning("rolled back", target=self.name, checksum=previous.checksum)
            return self._result(
                DeployOutcome.ROLLED_BACK,
                files,
                started,
                reloaded=True,
                log=first.log,
                diagnostics=[summary, *first.diagnostics],
            )
        rollback = make(
            "F7003",
            Phase.DEPLOY,
            f"HAProxy refused file set {files.checksum[:12]} and the previous set "
            f"{previous.checksum[:12]} could not be reloaded either",
        )
        self._active = None
        return self._result(
            DeployOutcome.FAILED,
            files,
            started,
            reloaded=True,
            log="\n".join(x for x in (first.log, second.log) if x),
            diagnostics=[rollback, *first.diagnostics, *second.diagnostics],
        )

    async def _activate(self, files: FileSet) -> _Activation:
        """Start HAProxy when it is not running, reload it otherwise, and confirm."""
        t0 = time.monotonic()
        if self.process is not None and not self.process.running():
            res = await self.process.ensure_running()
            act = _Activation(res.ok, res.log)
            if not res.ok:
                act.diagnostics = [
                    make("E7008", Phase.DEPLOY, "HAProxy exited while starting"),
                    *diagnostics_from_log(res.log, files.files),
                ]
        else:
            act = await self._reload(files)
        self.metrics.reloads.labels(self.name, "success" if act.ok else "failure").inc()
        self.metrics.reload_duration.labels(self.name).observe(time.monotonic() - t0)
        return act

    async def _reload(self, files: FileSet) -> _Activation:
        try:
            before = await self.cli.show_proc()
        except MasterCliError as exc:
            return _Activation(False, diagnostics=[make("E7004", Phase.DEPLOY, str(exc))])
        mark = self.process.log_mark() if self.process else 0
        try:
            answer = await self.cli.reload()
        except MasterCliError as exc:
            return _Activation(False, diagnostics=[make("E7004", Phase.DEPLOY, str(exc))])
        if answer.success is not None:
            ok, log = answer.success, answer.log
        else:
            try:
                after = await self._await_generation(before)
            except MasterCliError as exc:
                return _Activation(False, diagnostics=[make("E7005", Phase.DEPLOY, str(exc))])
            ok = after.failed == 0
            log = await self._startup_log(mark)
        diags = [] if ok else diagnostics_from_log(log, files.files)
        return _Activation(ok, log, diags)

    async def _await_generation(self, before: ProcTable) -> ProcTable:
        """2.6: poll ``show proc`` until the reload shows up as failed or as a new worker."""
        deadline = time.monotonic() + self.reload_timeout
        while True:
            try:
                table: ProcTable | None = await self.cli.show_proc()
            except MasterCliError:
                table = None
            if table is not None and (
                table.master_pid != before.master_pid or table.reloads > before.reloads
            ):
                if table.failed > 0:
                    return table
                if any(w.pid not in before.worker_pids for w in table.current_workers):
                    return table
            if time.monotonic() >= deadline:
                raise MasterCliError(
                    f"reload not confirmed within {self.reload_timeout:g}s (show proc did not "
                    "change)"
                )
            await asyncio.sleep(0.02)

    async def _startup_log(self, mark: int) -> str:
        """The master's output since ``mark`` once it has reported the load outcome."""
        if self.process is None:
            return ""
        deadline = time.monotonic() + 1.0
        while True:
            text = self.process.log_since(mark)
            if "Loading success" in text or "Loading failure" in text:
                return text
            if time.monotonic() >= deadline:
                return text
            await asyncio.sleep(0.01)

    def _result(
        self,
        outcome: DeployOutcome,
        files: FileSet,
        started: float,
        *,
        reloaded: bool = False,
        log: str = "",
        diagnostics: list[Diagnostic] | None = None,
    ) -> DeployResult:
        self.metrics.deploys.labels(self.name, outcome.value).inc()
        return DeployResult(
            target=self.name,
            outcome=outcome,
            checksum=files.checksum,
            active_checksum=self.active_checksum,
            reloaded=reloaded,
            duration_ms=round((time.monotonic() - started) * 1000, 3),
            diagnostics=tuple(diagnostics or ()),
            detail=MasterSocketDetail(haproxy_log=log),
            finished_at=time.time(),
        )
