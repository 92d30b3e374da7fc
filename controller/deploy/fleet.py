"""A set of deploy targets that changes at run time, deployed to concurrently.

HAProxy pods come and go; the reconcile trigger should not have to know. A :class:`Fleet` is
itself a deploy target: the trigger hands it a validated set and gets one result whose
``detail`` holds one result per pod. Pods join and leave between (and during) deploys:

* :meth:`Fleet.join` adds a target and gives it the last validated set at once, so a pod that
  became ready serves the current configuration without waiting for the next change;
* :meth:`Fleet.leave` drops it (and closes its client).

Deploys run concurrently, at most ``concurrency`` at a time, so one slow or dead pod costs
its own timeout and not the sum of everyone's. The fleet keeps the last validated set it was
given and never invents one: a joiner, a retry and a drift repair all get exactly that set.
:meth:`Fleet.status` is what ``status.targets`` is made of.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from controller.deploy.target import DeployOutcome, DeployResult, DeployTarget
from controller.observability import get_logger
from controller.validation import ValidatedFileSet

__all__ = ["Fleet", "FleetDetail", "TargetStatus"]

_log = get_logger("controller.deploy")


@dataclass(frozen=True, slots=True)
class FleetDetail:
    members: tuple[DeployResult, ...] = ()
    kind: str = "fleet"

    def to_dict(self) -> Mapping[str, object]:
        return {
            "members": [
                {
                    "target": r.target,
                    "outcome": r.outcome.value,
                    "activeChecksum": r.active_checksum,
                    "durationMs": r.duration_ms,
                }
                for r in self.members
            ]
        }


@dataclass(frozen=True, slots=True)
class TargetStatus:
    """One pod's line in ``status.targets``."""

    pod: str
    checksum: str | None
    """What the pod was last confirmed to run."""
    last_deployed: float | None = None
    """Wall-clock time of the last attempt that left the pod running a validated set."""
    error: str | None = None
    """The first error of the last attempt, when it failed."""

    def to_dict(self) -> dict[str, object]:
        return {
            "pod": self.pod,
            "checksum": self.checksum,
            "lastDeployed": _rfc3339(self.last_deployed),
            "error": self.error,
        }


@dataclass
class _Member:
    target: DeployTarget
    status: TargetStatus
    joined: float = field(default_factory=time.monotonic)


class Fleet:
    """Deploy targets by name; itself a :class:`DeployTarget`."""

    def __init__(self, name: str = "fleet", *, concurrency: int = 8) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.name = name
        self.concurrency = concurrency
        self.last: ValidatedFileSet | None = None
        """The last validated set handed to :meth:`deploy`: what joiners and repairs get."""
        self._members: dict[str, _Member] = {}
        self._gate = asyncio.Semaphore(concurrency)

    # --- membership -----------------------------------------------------------------------

    @property
    def members(self) -> Mapping[str, DeployTarget]:
        return {n: m.target for n, m in self._members.items()}

    def __len__(self) -> int:
        return len(self._members)

    async def join(self, target: DeployTarget) -> DeployResult | None:
        """Add ``target`` (replacing one of the same name) and deploy the last validated set
        to it; None when no set was validated yet."""
        old = self._members.get(target.name)
        if old is not None and old.target is not target:
            await _close(old.target)
        self._members[target.name] = _Member(target, TargetStatus(target.name, None))
        _log.info("target joined", fleet=self.name, target=target.name)
        if self.last is None:
            return None
        return await self._one(target, self.last)

    async def leave(self, name: str) -> bool:
        """Drop a target (its pod went away); False when there was none of that name."""
        member = self._members.pop(name, None)
        if member is None:
            return False
        _log.info("target left", fleet=self.name, target=name)
        await _close(member.target)
        return True

    async def close(self) -> None:
        for name in list(self._members):
            await self.leave(name)

    def status(self) -> list[TargetStatus]:
        return [m.status for _, m in sorted(self._members.items())]

    # --- DeployTarget ---------------------------------------------------------------------

    async def deploy(self, validated: ValidatedFileSet) -> DeployResult:
        if not isinstance(validated, ValidatedFileSet):
            raise TypeError("deploy targets accept only a ValidatedFileSet from the pipeline")
        self.last = validated
        started = time.monotonic()
        targets = [m.target for m in self._members.values()]
        results = await asyncio.gather(*(self._one(t, validated) for t in targets))
        return self._aggregate(validated.checksum, list(results), started)

    async def check_drift(self) -> DeployResult | None:
        """Every member's drift check, concurrently; one result naming what drifted where.

        A member that cannot be read is skipped here (its error is logged); the next deploy
        or retry reaches it.
        """
        if self.last is None:
            return None
        started = time.monotonic()
        targets = [m.target for m in self._members.values()]
        found = await asyncio.gather(*(self._drift_one(t) for t in targets))
        results = [r for r in found if r is not None]
        if not results:
            return None
        aggregate = self._aggregate(self.last.checksum, results, started)
        drift = tuple(f"{r.target}:{p}" for r in results for p in r.drift)
        return DeployResult(
            aggregate.target,
            aggregate.outcome,
            aggregate.checksum,
            aggregate.active_checksum,
            aggregate.reloaded,
            aggregate.duration_ms,
            aggregate.diagnostics,
            drift=drift,
            detail=aggregate.detail,
            finished_at=aggregate.finished_at,
        )

    # --- internals ------------------------------------------------------------------------

    async def _one(self, target: DeployTarget, validated: ValidatedFileSet) -> DeployResult:
        async with self._gate:
            try:
                result = await target.deploy(validated)
            except Exception as exc:  # a target's bug must not take the others down
                _log.exception("deploy raised", target=target.name)
                result = DeployResult(
                    target.name,
                    DeployOutcome.FAILED,
                    validated.checksum,
                    None,
                    finished_at=time.time(),
                )
                self._note(result, f"deploy raised {exc!r}")
                return result
        self._note(result)
        return result

    async def _drift_one(self, target: DeployTarget) -> DeployResult | None:
        async with self._gate:
            try:
                result = await target.check_drift()
            except Exception as exc:
                _log.warning("drift check failed", target=target.name, error=str(exc))
                return None
        if result is not None:
            self._note(result)
        return result

    def _note(self, result: DeployResult, error: str | None = None) -> None:
        member = self._members.get(result.target)
        if member is None:
            return  # it left while deploying
        if error is None and not result.ok:
            worst = sorted(result.diagnostics, key=lambda d: d.severity.rank)
            error = worst[0].message if worst else result.outcome.value
        when = result.finished_at or time.time()
        last = member.status.last_deployed
        member.status = TargetStatus(
            result.target,
            result.active_checksum,
            when if result.ok else last,
            error,
        )

    def _aggregate(
        self, checksum: str, results: list[DeployResult], started: float
    ) -> DeployResult:
        outcomes = {r.outcome for r in results}
        if not results or outcomes == {DeployOutcome.UNCHANGED}:
            outcome = DeployOutcome.UNCHANGED
        elif all(r.ok for r in results):
            outcome = DeployOutcome.DEPLOYED
        elif DeployOutcome.FAILED not in outcomes:
            outcome = DeployOutcome.ROLLED_BACK
        else:
            outcome = DeployOutcome.FAILED
        active = {r.active_checksum for r in results}
        return DeployResult(
            self.name,
            outcome,
            checksum,
            active.pop() if len(active) == 1 else None,
            any(r.reloaded for r in results),
            round((time.monotonic() - started) * 1000, 3),
            tuple(d for r in results for d in r.diagnostics),
            detail=FleetDetail(tuple(results)),
            finished_at=time.time(),
        )


async def _close(target: object) -> None:
    close = getattr(target, "close", None)
    if close is not None:
        try:
            await close()
        except Exception:
            _log.warning("closing a target failed", exc_info=True)


def _rfc3339(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
