"""Deploy to one HAProxy through its Data Plane API (the fleet topology).

One deploy costs one reload. The sequence for a new set:

1. **Auxiliary files first**, without a reload: maps, certificates and general files that are
   new are created, those that changed are replaced (``skip_reload``); nothing is deleted yet.
   The API's own ``haproxy -c`` (step 2) reads them, and the running workers do not.
2. **Stage** the configuration: ``POST raw?version=N&skip_reload=true``. A 409 means another
   writer moved the version: it is read again and the push retried (bounded).
3. **Check what was stored.** The API stores its own serialization of the text, not the
   bytes; :mod:`controller.deploy.dataplane_equiv` compares words. A difference (seen: a
   Latin-1 byte turned into U+FFFD) withdraws the staged text and fails the deploy (F7014)
   before any reload: HAProxy never runs a configuration the pipeline has not seen.
4. **Activate**: the same text pushed again without ``skip_reload``; the API answers with a
   ``Reload-Id`` whose status is polled until it succeeded or failed (bounded by
   ``reload_timeout``).
5. On success, files the new set no longer has are deleted. On failure the API has already
   put its last good configuration file back; the auxiliary files are restored here, the
   result is read back, and the outcome is ``rolled_back`` when it matches the previous set.

A target that stops answering mid-way forgets what it knew about the pod, so the next
attempt pushes everything again. Drift: the configuration and every map and general file
are read back and compared (certificates by size: the API never returns key material); a
mismatch redeploys the last validated set, never a newer one.

Layout the pod must have: HAProxy and dataplaneapi both run with their working directory at
the storage base, whose ``maps/``, ``certs/`` and ``files/`` are the API's ``maps_dir``,
``ssl_certs_dir`` and ``general_storage_dir``; the relative references the pipeline checked
(``maps/hosts.map``) then resolve to the same files for the API's check, for HAProxy and for
the sandbox. ``docs/topologies.md`` shows the configuration.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Mapping
from dataclasses import dataclass

from controller.deploy.dataplane_client import (
    DataplaneClient,
    DataplaneError,
    StorageKind,
    VersionConflict,
)
from controller.deploy.dataplane_equiv import differences, strip_api_comments
from controller.deploy.haproxy_log import diagnostics_from_log
from controller.deploy.target import DeployOutcome, DeployResult
from controller.diagnostics import Diagnostic, Phase, make
from controller.observability import METRICS, Metrics, get_logger
from controller.render import KIND_DIRS, MAIN_CONFIG, FileEntry, FileKind, FileSet
from controller.validation import ValidatedFileSet

__all__ = ["DataplaneDetail", "DataplaneTarget", "storage_name"]

_log = get_logger("controller.deploy")

_STORAGE: Mapping[FileKind, StorageKind] = {
    FileKind.MAP: StorageKind.MAPS,
    FileKind.CERT: StorageKind.CERTS,
    FileKind.FILE: StorageKind.GENERAL,
}


@dataclass(frozen=True, slots=True)
class DataplaneDetail:
    url: str
    version: int | None = None
    """The configuration version the API reported last."""
    reload_id: str | None = None
    haproxy_log: str = ""
    """HAProxy's output for the reload, as the API reported it."""
    conflicts: int = 0
    """409 answers this attempt met (another writer moved the version)."""
    kind: str = "dataplaneApi"

    def to_dict(self) -> Mapping[str, object]:
        return {
            "url": self.url,
            "version": self.version,
            "reloadId": self.reload_id,
            "haproxyLog": self.haproxy_log[-4000:],
            "conflicts": self.conflicts,
        }


class _Failed(Exception):
    def __init__(self, diagnostics: list[Diagnostic], log: str = "") -> None:
        super().__init__(diagnostics[0].message if diagnostics else "failed")
        self.diagnostics = diagnostics
        self.log = log


class _ReloadFailed(_Failed):
    pass


def storage_name(entry: FileEntry) -> tuple[StorageKind, str] | None:
    """Where an auxiliary file goes: its storage area and its (flat) name there."""
    kind = _STORAGE.get(entry.kind)
    if kind is None:
        return None
    folder, _, name = entry.path.partition("/")
    if folder != KIND_DIRS[entry.kind] or not name or "/" in name:
        return None
    return kind, name


class DataplaneTarget:
    """One HAProxy pod's Data Plane API."""

    def __init__(
        self,
        name: str,
        client: DataplaneClient,
        *,
        metrics: Metrics | None = None,
        reload_timeout: float = 30.0,
        poll_interval: float = 0.05,
        max_conflicts: int = 3,
    ) -> None:
        self.name = name
        self.client = client
        self.metrics = metrics or METRICS
        self.reload_timeout = reload_timeout
        self.poll_interval = poll_interval
        self.max_conflicts = max_conflicts
        self._lock = asyncio.Lock()
        self._active: FileSet | None = None
        self._stored: str | None = None
        """The API's text for ``_active``'s configuration, without its comments."""
        self._version: int | None = None
        self._pending_stored: str | None = None
        """The API's text for the set being activated; becomes ``_stored`` on success."""

    @property
    def active_checksum(self) -> str | None:
        return self._active.checksum if self._active else None

    async def close(self) -> None:
        await self.client.close()

    # --- public ---------------------------------------------------------------------------

    async def deploy(self, validated: ValidatedFileSet) -> DeployResult:
        if not isinstance(validated, ValidatedFileSet):
            raise TypeError("deploy targets accept only a ValidatedFileSet from the pipeline")
        started = time.monotonic()
        if not validated.verify():
            diag = make(
                "F7012",
                Phase.DEPLOY,
                f"file set {validated.checksum[:12]} does not match the checksum its verdict "
                "was given for; not deployed",
            )
            return self._result(DeployOutcome.FAILED, validated.files, started, [diag])
        async with self._lock:
            return await self._deploy(validated.files, started)

    async def check_drift(self) -> DeployResult | None:
        """Read back the configuration and files; redeploy the last validated set on a
        mismatch. Raises :class:`DataplaneError` when the API cannot be read."""
        async with self._lock:
            active = self._active
            if active is None:
                return None
            drifted = tuple(await self._drifted(active))
            if not drifted:
                return None
            self.metrics.drift_redeploys.labels(self.name).inc()
            _log.warning("drift detected", target=self.name, paths=list(drifted))
            result = await self._deploy(active, time.monotonic(), force=True)
            note = make(
                "W7007",
                Phase.DEPLOY,
                f"{self.name}: the configuration or files changed outside the controller "
                f"({', '.join(drifted)}); validated set {active.checksum[:12]} deployed again",
            )
            return dataclasses.replace(
                result, diagnostics=(note, *result.diagnostics), drift=drifted
            )

    # --- the sequence ---------------------------------------------------------------------

    async def _deploy(self, files: FileSet, started: float, *, force: bool = False) -> DeployResult:
        if not force and self._active is not None and self._active.checksum == files.checksum:
            return self._result(DeployOutcome.UNCHANGED, files, started)
        unsupported = [
            e.path for e in files if e.kind is not FileKind.CONFIG and not storage_name(e)
        ]
        if unsupported or files.main is None:
            diag = make(
                "E7013",
                Phase.DEPLOY,
                f"{self.name}: the Data Plane API stores files flat in maps/, certs/ and files/; "
                f"cannot deploy {', '.join(unsupported) or 'a set without ' + MAIN_CONFIG}",
            )
            return self._result(DeployOutcome.FAILED, files, started, [diag])
        previous = self._active
        conflicts = 0
        reload_id: str | None = None
        try:
            baseline = await self._baseline()
            remote = await self._remote_names()
            # A repair writes every file again: which of them drifted is not trusted.
            created = await self._upload(files, None if force else previous, remote)
            while True:
                try:
                    reload_id = await self._stage_and_activate(files, baseline)
                    break
                except VersionConflict:
                    conflicts += 1
                    self._version = None
                    if conflicts > self.max_conflicts:
                        raise
                    _log.info("version conflict; reading it again", target=self.name)
            status = await self._await_reload(reload_id)
            await self._delete_stale(files, previous)
        except _ReloadFailed as exc:
            return await self._rolled_back(
                files, previous, created, started, exc, reload_id, conflicts
            )
        except _Failed as exc:
            self._forget()
            return self._result(
                DeployOutcome.FAILED,
                files,
                started,
                exc.diagnostics,
                detail=self._detail(reload_id, exc.log, conflicts),
                reloaded=False,
            )
        except DataplaneError as exc:
            self._forget()
            diag = make("E7013", Phase.DEPLOY, f"{self.name}: {exc}")
            _log.error("dataplane API failed", target=self.name, error=str(exc))
            return self._result(
                DeployOutcome.FAILED,
                files,
                started,
                [diag],
                detail=self._detail(reload_id, "", conflicts),
                reloaded=reload_id is not None,
            )
        self._active = files
        self.metrics.last_deploy_timestamp.set(time.time())
        _log.info("deployed", target=self.name, checksum=files.checksum, reload_id=reload_id)
        return self._result(
            DeployOutcome.DEPLOYED,
            files,
            started,
            reloaded=True,
            detail=self._detail(reload_id, status.response, conflicts),
        )

    def _forget(self) -> None:
        """After an error mid-way nothing about the pod is certain: push everything again."""
        self._active = None
        self._stored = None
        self._version = None

    async def _baseline(self) -> str | None:
        """The stored configuration to put back if staging has to be withdrawn: known from
        the last deploy, or read once when this process has not deployed here yet."""
        if self._active is not None and self._stored is not None:
            return None
        version, text = await self.client.raw()
        self._version = version
        return text

    async def _remote_names(self) -> dict[StorageKind, set[str]]:
        if self._active is not None:
            out: dict[StorageKind, set[str]] = {k: set() for k in StorageKind}
            for entry in self._active:
                where = storage_name(entry)
                if where:
                    out[where[0]].add(where[1])
            return out
        listed = await asyncio.gather(*(self.client.list_storage(k) for k in StorageKind))
        return {k: set(names) for k, names in zip(StorageKind, listed, strict=True)}

    async def _upload(
        self, files: FileSet, previous: FileSet | None, remote: dict[StorageKind, set[str]]
    ) -> list[tuple[StorageKind, str]]:
        """Create or replace what changed; return what was created (to undo on failure)."""
        created: list[tuple[StorageKind, str]] = []
        calls = []
        for entry in files:
            where = storage_name(entry)
            if where is None:
                continue
            kind, name = where
            old = previous.files.get(entry.path) if previous is not None else None
            if old is not None and old.content == entry.content and name in remote[kind]:
                continue
            if name in remote[kind]:
                calls.append(self.client.replace_file(kind, name, entry.content))
            else:
                calls.append(self.client.create_file(kind, name, entry.content))
                created.append(where)
        await asyncio.gather(*calls)
        return created

    async def _stage_and_activate(self, files: FileSet, baseline: str | None) -> str:
        main = files.main
        assert main is not None
        if self._version is None:
            self._version = await self.client.version()
        staged = await self.client.push_raw(main.content, self._version, skip_reload=True)
        self._version = staged.version or self._version + 1
        diffs = differences(main.content, staged.stored)
        if diffs:
            await self._withdraw(baseline)
            raise _Failed(
                [
                    make(
                        "F7014",
                        Phase.DEPLOY,
                        f"{self.name}: the Data Plane API stored {MAIN_CONFIG} differently from "
                        f"the validated text; withdrawn before any reload: {'; '.join(diffs)}",
                    )
                ]
            )
        answer = await self.client.push_raw(main.content, self._version, skip_reload=False)
        self._version = answer.version or self._version + 1
        if answer.reload_id is None:
            raise DataplaneError("the API accepted the configuration but requested no reload")
        self._pending_stored = strip_api_comments(answer.stored)
        return answer.reload_id

    async def _withdraw(self, baseline: str | None) -> None:
        text = self._stored if baseline is None else baseline
        if text is None or self._version is None:
            return
        answer = await self.client.push_raw(text.encode(), self._version, skip_reload=True)
        self._version = answer.version or self._version + 1

    async def _await_reload(self, reload_id: str) -> _Reload:
        t0 = time.monotonic()
        deadline = t0 + self.reload_timeout
        while True:
            status = await self.client.reload(reload_id)
            if status.status in ("succeeded", "failed"):
                break
            if time.monotonic() >= deadline:
                self.metrics.reloads.labels(self.name, "failure").inc()
                raise _Failed(
                    [
                        make(
                            "E7013",
                            Phase.DEPLOY,
                            f"{self.name}: reload {reload_id} still {status.status or 'unknown'} "
                            f"after {self.reload_timeout:g}s",
                        )
                    ]
                )
            await asyncio.sleep(self.poll_interval)
        ok = status.status == "succeeded"
        self.metrics.reloads.labels(self.name, "success" if ok else "failure").inc()
        self.metrics.reload_duration.labels(self.name).observe(time.monotonic() - t0)
        if not ok:
            raise _ReloadFailed([], status.response)
        self._stored = self._pending_stored
        return _Reload(status.response)

    async def _delete_stale(self, files: FileSet, previous: FileSet | None) -> None:
        if previous is None:
            return
        stale = [storage_name(e) for e in previous if e.path not in files.files]
        await asyncio.gather(*(self.client.delete_file(*w) for w in stale if w))

    async def _rolled_back(
        self,
        files: FileSet,
        previous: FileSet | None,
        created: list[tuple[StorageKind, str]],
        started: float,
        exc: _ReloadFailed,
        reload_id: str | None,
        conflicts: int,
    ) -> DeployResult:
        """HAProxy refused the set at reload; the API put its last good config file back.
        Put the auxiliary files back too, then confirm by reading everything back."""
        alerts = diagnostics_from_log(exc.log, files.files)
        detail = self._detail(reload_id, exc.log, conflicts)
        _log.error("haproxy refused the file set", target=self.name, checksum=files.checksum)
        try:
            await asyncio.gather(*(self.client.delete_file(k, n) for k, n in created))
            if previous is not None:
                await self._upload(previous, files, await self._remote_names_listed())
                self._version = None
                if not await self._drifted(previous):
                    summary = make(
                        "E7001",
                        Phase.DEPLOY,
                        f"{self.name}: HAProxy refused file set {files.checksum[:12]} at reload; "
                        f"previous set {previous.checksum[:12]} restored and running",
                    )
                    self._active = previous
                    return self._result(
                        DeployOutcome.ROLLED_BACK,
                        files,
                        started,
                        [summary, *alerts],
                        reloaded=True,
                        detail=detail,
                    )
        except DataplaneError as err:
            alerts.append(make("E7013", Phase.DEPLOY, f"{self.name}: {err}"))
        self._forget()
        summary = make(
            "E7001" if previous is None else "F7003",
            Phase.DEPLOY,
            f"{self.name}: HAProxy refused file set {files.checksum[:12]}"
            + (
                "; there is no previous set to restore"
                if previous is None
                else "; the previous set could not be confirmed"
            ),
        )
        return self._result(
            DeployOutcome.FAILED, files, started, [summary, *alerts], reloaded=True, detail=detail
        )

    async def _remote_names_listed(self) -> dict[StorageKind, set[str]]:
        listed = await asyncio.gather(*(self.client.list_storage(k) for k in StorageKind))
        return {k: set(names) for k, names in zip(StorageKind, listed, strict=True)}

    async def _drifted(self, active: FileSet) -> list[str]:
        """Paths of ``active`` that the pod no longer has as they were deployed."""
        out: list[str] = []
        _, text = await self.client.raw()
        if self._stored is None or strip_api_comments(text) != self._stored:
            out.append(MAIN_CONFIG)

        async def check(entry: FileEntry) -> str | None:
            where = storage_name(entry)
            if where is None:
                return None
            kind, name = where
            try:
                if kind is StorageKind.CERTS:
                    same = await self.client.cert_size(name) == len(entry.content)
                else:
                    same = await self.client.read_file(kind, name) == entry.content
            except DataplaneError as exc:
                if exc.status == 404:
                    return entry.path
                raise
            return None if same else entry.path

        found = await asyncio.gather(*(check(e) for e in active if e.kind is not FileKind.CONFIG))
        out.extend(p for p in found if p)
        return out

    # --- results --------------------------------------------------------------------------

    def _detail(self, reload_id: str | None, log: str, conflicts: int) -> DataplaneDetail:
        return DataplaneDetail(self.client.url, self._version, reload_id, log, conflicts)

    def _result(
        self,
        outcome: DeployOutcome,
        files: FileSet,
        started: float,
        diagnostics: list[Diagnostic] | None = None,
        *,
        reloaded: bool = False,
        detail: DataplaneDetail | None = None,
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
            detail=detail or self._detail(None, "", 0),
            finished_at=time.time(),
        )


@dataclass(frozen=True, slots=True)
class _Reload:
    response: str
