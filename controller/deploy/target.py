"""What a deploy target is, and what it reports back.

A target's ``deploy`` takes a :class:`ValidatedFileSet` and nothing else: there is no way to
hand it bytes that skipped the pipeline, and the type checker says so at every call site.
The result is data, like a validation report, so the reconcile trigger can publish it and
tests can assert on it without scraping logs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from controller.diagnostics import Diagnostic
from controller.validation import ValidatedFileSet

__all__ = [
    "DeployDetail",
    "DeployOutcome",
    "DeployResult",
    "DeployTarget",
    "HAProxyProcess",
    "MasterSocketDetail",
    "StartResult",
]


class DeployOutcome(StrEnum):
    DEPLOYED = "deployed"
    """Written and confirmed by HAProxy."""
    UNCHANGED = "unchanged"
    """HAProxy already runs exactly these bytes; nothing was written or reloaded."""
    ROLLED_BACK = "rolled_back"
    """HAProxy refused the set; the previous set was restored and is running again."""
    FAILED = "failed"
    """The set is not running and the previous one could not be confirmed either."""


_LOG_LIMIT = 4000
"""Characters of HAProxy's log a status page shows (the end, where the outcome is)."""


class DeployDetail(Protocol):
    """What only one kind of target can say about an attempt (HAProxy's log, an API version).

    The core of :class:`DeployResult` is what every target reports and every consumer reads;
    the detail is for people and for status pages, so it only has to turn itself into data.
    """

    @property
    def kind(self) -> str: ...

    def to_dict(self) -> Mapping[str, object]: ...


@dataclass(frozen=True, slots=True)
class MasterSocketDetail:
    """A deploy directory reloaded through the master CLI."""

    haproxy_log: str = ""
    """HAProxy's own output about the reload or start (its startup log)."""
    kind: str = "masterSocket"

    def to_dict(self) -> Mapping[str, object]:
        return {"haproxyLog": self.haproxy_log[-_LOG_LIMIT:]}


@dataclass(frozen=True, slots=True)
class DeployResult:
    """One attempt on one target: a generic core, and the target's own detail.

    The fields up to ``diagnostics`` are positional so that tests and fakes can build a
    result in one line; everything a particular kind of target adds lives in ``detail``.
    """

    target: str
    outcome: DeployOutcome
    checksum: str
    """Checksum of the file set this attempt was about."""
    active_checksum: str | None
    """Checksum of what HAProxy runs after the attempt, as far as it was confirmed."""
    reloaded: bool = False
    duration_ms: float = 0.0
    diagnostics: tuple[Diagnostic, ...] = ()
    drift: tuple[str, ...] = field(default_factory=tuple)
    """Paths found changed on the target when this deploy repaired drift."""
    detail: DeployDetail | None = None
    finished_at: float = 0.0
    """Wall-clock time (``time.time()``) the attempt ended; 0 when the target did not say."""

    @property
    def ok(self) -> bool:
        return self.outcome in (DeployOutcome.DEPLOYED, DeployOutcome.UNCHANGED)

    @property
    def haproxy_log(self) -> str:
        """HAProxy's output about this attempt, when the target saw it."""
        return str(getattr(self.detail, "haproxy_log", "") or "")


class DeployTarget(Protocol):
    """Somewhere validated file sets go."""

    name: str

    async def deploy(self, validated: ValidatedFileSet) -> DeployResult:
        """Make HAProxy run ``validated``; skip the work when it already does."""
        ...

    async def check_drift(self) -> DeployResult | None:
        """Compare what is deployed with the last validated set; repair and report drift.

        Returns None when nothing drifted (or nothing was deployed yet).
        """
        ...


@dataclass(frozen=True, slots=True)
class StartResult:
    ok: bool
    log: str = ""


class HAProxyProcess(Protocol):
    """A locally started HAProxy master that a target may have to start instead of reload.

    The local supervisor implements it. It also owns the master's stderr, which is the only
    place 2.6 reports why a reload failed, so the target asks it for that text.
    """

    def running(self) -> bool: ...

    async def ensure_running(self) -> StartResult:
        """Start the master unless it runs; succeed once a worker is up."""
        ...

    def log_mark(self) -> int:
        """A position in the master's output, for :meth:`log_since`."""
        ...

    def log_since(self, mark: int) -> str: ...
