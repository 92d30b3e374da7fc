"""What the runtime tells the world, as data.

Each event is one thing that happened to the running configuration. Sinks (the status board,
``htc local``'s console, later Kubernetes Events and CR conditions) receive the same events,
so what the terminal shows, what ``/status`` returns and what a cluster will see cannot
disagree. A success event can only be built from a :class:`ValidatedFileSet`: "success before
a valid verdict" is not expressible.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Protocol

from controller.diagnostics import Diagnostic
from controller.render import RenderResult
from controller.validation import ValidatedFileSet, ValidationReport

__all__ = ["DeployResult", "Event", "EventKind", "now_rfc3339"]


class _Outcome(Protocol):
    @property
    def value(self) -> str: ...


class _Detail(Protocol):
    @property
    def kind(self) -> str: ...

    def to_dict(self) -> Mapping[str, object]: ...


class DeployResult(Protocol):
    """What publication reads of a deploy result.

    ``controller.deploy`` sits beside this layer, not below it, so the shape is declared
    here and ``controller.deploy.DeployResult`` satisfies it structurally.
    """

    @property
    def target(self) -> str: ...
    @property
    def outcome(self) -> _Outcome: ...
    @property
    def active_checksum(self) -> str | None: ...
    @property
    def reloaded(self) -> bool: ...
    @property
    def duration_ms(self) -> float: ...
    @property
    def diagnostics(self) -> tuple[Diagnostic, ...]: ...
    @property
    def drift(self) -> tuple[str, ...]: ...
    @property
    def detail(self) -> _Detail | None: ...
    @property
    def ok(self) -> bool: ...


def now_rfc3339() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class EventKind(StrEnum):
    DEPLOYED = "deployed"
    """A valid verdict, and every target runs the set (or already did)."""
    DEPLOY_FAILED = "deploy_failed"
    """A valid verdict, but a target refused or could not be reached; ``serving`` says
    what (if anything) runs instead."""
    REJECTED = "rejected"
    """An invalid verdict: nothing was deployed; ``serving`` says what keeps running."""
    SPEC_ACCEPTED = "spec_accepted"
    SPEC_REJECTED = "spec_rejected"
    RUNTIME = "runtime"
    """Something happened to HAProxy itself (restart, drift repaired)."""


@dataclass(frozen=True)
class Event:
    kind: EventKind
    trigger: str
    at: str = field(default_factory=now_rfc3339)
    report: ValidationReport | None = None
    render: RenderResult | None = None
    validated: ValidatedFileSet | None = None
    results: tuple[DeployResult, ...] = ()
    diagnostics: tuple[Diagnostic, ...] = ()
    objects: tuple[str, ...] = ()
    """References (Kind/namespace/name) of the changes this run covered, when known."""
    message: str = ""
    serving: str | None = None
    """Checksum of the set HAProxy keeps running after a rejection or a failed deploy; None
    when no validated set was ever confirmed, so no message may claim one keeps serving."""
    retry_in: float | None = None
    """Seconds until a failed deploy is tried again (None: no retry is scheduled)."""

    @classmethod
    def deployed(
        cls,
        trigger: str,
        validated: ValidatedFileSet,
        results: Sequence[DeployResult],
        *,
        render: RenderResult | None = None,
        objects: Sequence[str] = (),
        retry_in: float | None = None,
    ) -> Event:
        if not isinstance(validated, ValidatedFileSet) or not validated.report.valid:
            raise TypeError("a deployed event needs the pipeline's ValidatedFileSet")
        ok = all(r.ok for r in results)
        # What runs now is what every target confirmed; targets that disagree (or one that
        # confirmed nothing) leave no single set to name.
        active = {r.active_checksum for r in results}
        serving = active.pop() if len(active) == 1 else None
        return cls(
            EventKind.DEPLOYED if ok else EventKind.DEPLOY_FAILED,
            trigger,
            report=validated.report,
            render=render,
            validated=validated,
            results=tuple(results),
            diagnostics=tuple(d for r in results for d in r.diagnostics),
            objects=tuple(objects),
            serving=serving,
            retry_in=None if ok else retry_in,
        )

    @classmethod
    def rejected(
        cls,
        trigger: str,
        report: ValidationReport,
        *,
        render: RenderResult | None = None,
        objects: Sequence[str] = (),
        serving: str | None = None,
    ) -> Event:
        if report.valid:
            raise ValueError("a valid report is not a rejection")
        return cls(
            EventKind.REJECTED,
            trigger,
            report=report,
            render=render,
            diagnostics=tuple(report.diagnostics),
            objects=tuple(objects),
            serving=serving,
        )

    @property
    def checksum(self) -> str | None:
        if self.validated is not None:
            return self.validated.checksum
        if self.report is not None:
            return self.report.metadata.checksum
        return None

    def fallback(self) -> str:
        """What still serves after this rejection or failed deploy, in words."""
        if self.serving is None:
            return "no validated configuration is serving yet"
        return f"the last good configuration ({self.serving[:12]}) keeps serving"
