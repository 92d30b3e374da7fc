"""The status board: the latest verdict, the running checksum, readiness — as JSON.

It is what ``/status`` serves and what the optional status file holds (written atomically, so
a reader never sees half a document). Ready means "a validated set was confirmed by every
target at least once"; a later failure does not make the controller unready, because the
last good configuration keeps serving, but it shows in ``lastVerdict`` and ``lastDeploy``.
"""

from __future__ import annotations

import json
import os
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from controller.diagnostics import Diagnostic, Severity
from controller.publish.events import Event, EventKind
from controller.validation import ValidationReport

__all__ = ["StatusBoard"]

_MAX_DIAGNOSTICS = 20
_MAX_EVENTS = 20


def _diag(d: Diagnostic) -> dict[str, Any]:
    out: dict[str, Any] = {"ruleId": d.rule_id, "severity": d.severity.value, "message": d.message}
    if d.location is not None:
        out["location"] = d.location.model_dump(mode="json", by_alias=True, exclude_none=True)
    if d.object is not None:
        out["object"] = d.object.model_dump(mode="json", by_alias=True, exclude_none=True)
    return out


def summarize(diagnostics: list[Diagnostic] | tuple[Diagnostic, ...]) -> dict[str, Any]:
    """Counts plus distinct rule ids, the shape of ``status.diagnosticsSummary``."""
    errors = sum(1 for d in diagnostics if d.severity.rank <= Severity.ERROR.rank)
    warnings = sum(1 for d in diagnostics if d.severity is Severity.WARNING)
    infos = sum(1 for d in diagnostics if d.severity is Severity.INFO)
    return {
        "errors": errors,
        "warnings": warnings,
        "infos": infos,
        "ruleIds": sorted({d.rule_id for d in diagnostics})[:_MAX_DIAGNOSTICS],
    }


def _report(report: ValidationReport) -> dict[str, Any]:
    m = report.metadata
    return {
        "valid": report.valid,
        "status": report.status.value,
        "checksum": m.checksum,
        "haproxyVersion": m.haproxy_version,
        "cacheHit": m.cache_hit,
        "summary": summarize(report.diagnostics),
        "diagnostics": [_diag(d) for d in report.diagnostics[:_MAX_DIAGNOSTICS]],
        "timings": dict(report.timings),
    }


class StatusBoard:
    def __init__(self, status_file: Path | str | None = None) -> None:
        self.status_file = Path(status_file) if status_file else None
        self.ready = False
        self._verdict: dict[str, Any] | None = None
        self._deploy: dict[str, Any] | None = None
        self._running: dict[str, Any] | None = None
        self._spec: dict[str, Any] = {"accepted": None, "lastRejection": None}
        self._events: deque[dict[str, Any]] = deque(maxlen=_MAX_EVENTS)
        self.http_sources: Callable[[], list[dict[str, Any]]] | None = None
        """Per HTTP source: accepted checksum, last fetch and error, pending rejection (the
        fields ``status.httpSources`` has in a cluster)."""

    def __call__(self, event: Event) -> None:
        """Sink interface: take one event, then rewrite the status file."""
        if event.kind in (EventKind.DEPLOYED, EventKind.DEPLOY_FAILED, EventKind.REJECTED):
            assert event.report is not None
            self._verdict = {"at": event.at, "trigger": event.trigger, **_report(event.report)}
        if event.kind in (EventKind.DEPLOYED, EventKind.DEPLOY_FAILED):
            self._deploy = {
                "at": event.at,
                "trigger": event.trigger,
                "checksum": event.checksum,
                "ok": event.kind is EventKind.DEPLOYED,
                "targets": [
                    {
                        "name": r.target,
                        "outcome": r.outcome.value,
                        "activeChecksum": r.active_checksum,
                        "reloaded": r.reloaded,
                        "durationMs": r.duration_ms,
                        "diagnostics": [_diag(d) for d in r.diagnostics[:_MAX_DIAGNOSTICS]],
                        # Target-specific: HAProxy's log, an API version, a fleet's pods.
                        "detail": (
                            {"kind": r.detail.kind, **r.detail.to_dict()} if r.detail else None
                        ),
                    }
                    for r in event.results
                ],
            }
            if event.kind is EventKind.DEPLOYED:
                self.ready = True
                self._running = {"checksum": event.checksum, "since": event.at}
        if event.kind is EventKind.SPEC_ACCEPTED:
            self._spec["accepted"] = {"at": event.at, "message": event.message}
        if event.kind is EventKind.SPEC_REJECTED:
            self._spec["lastRejection"] = {
                "at": event.at,
                "message": event.message,
                "summary": summarize(event.diagnostics),
                "diagnostics": [_diag(d) for d in event.diagnostics[:_MAX_DIAGNOSTICS]],
            }
        self._events.append(
            {
                "at": event.at,
                "kind": event.kind.value,
                "trigger": event.trigger,
                "checksum": event.checksum,
                "ruleIds": sorted({d.rule_id for d in event.diagnostics}),
                **({"message": event.message} if event.message else {}),
            }
        )
        self._write()

    def snapshot(self) -> dict[str, Any]:
        return {
            "ready": self.ready,
            "running": self._running,
            "lastVerdict": self._verdict,
            "lastDeploy": self._deploy,
            "spec": self._spec,
            "events": list(self._events),
            **({"httpSources": self.http_sources()} if self.http_sources is not None else {}),
        }

    def _write(self) -> None:
        if self.status_file is None:
            return
        self.status_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.status_file.with_name(f".{self.status_file.name}.tmp")
        tmp.write_text(json.dumps(self.snapshot(), indent=2, sort_keys=True) + "\n")
        os.replace(tmp, self.status_file)
