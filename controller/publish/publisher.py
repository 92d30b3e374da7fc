"""Fan one event out to logs, metrics and every registered sink.

The reconcile trigger calls :meth:`Publisher.publish` once per outcome and knows nothing about
where the outcome goes. A sink that raises is logged and skipped: publication must never
break the loop that keeps HAProxy up to date.
"""

from __future__ import annotations

from collections.abc import Callable

from controller.diagnostics import Phase
from controller.observability import METRICS, Metrics, get_logger
from controller.publish.events import Event, EventKind
from controller.validation import ReportStatus, ValidationReport

__all__ = ["Publisher", "Sink"]

Sink = Callable[[Event], None]

_log = get_logger("controller.publish")

PHASE_LABELS = frozenset(
    p.value
    for p in (Phase.RENDER, Phase.SYNTAX, Phase.SCHEMA, Phase.HAPROXY, Phase.RULES, Phase.EXTERNAL)
)
"""The ``phase`` values of ``htc_pipeline_phase_duration_seconds``. Reports carry more timings
(the overlap window, sub-steps a stage measures); a label per timing key would let every new
key mint a series, so only the phases themselves are observed."""


def verdict_result(report: ValidationReport) -> str:
    """The ``result`` label of ``htc_pipeline_runs_total``."""
    if report.valid:
        return "valid"
    if report.status is ReportStatus.ANALYSIS_INCOMPLETE:
        return "incomplete"
    return "invalid"


class Publisher:
    def __init__(self, *, metrics: Metrics | None = None, sinks: list[Sink] | None = None) -> None:
        self.metrics = metrics or METRICS
        self.sinks: list[Sink] = list(sinks or [])

    def add_sink(self, sink: Sink) -> None:
        self.sinks.append(sink)

    def record_verdict(self, trigger: str, report: ValidationReport) -> None:
        """Metrics of one pipeline run (before anything is deployed or published)."""
        m = self.metrics
        m.pipeline_runs.labels(trigger, verdict_result(report)).inc()
        m.last_verdict_valid.set(1 if report.valid else 0)
        if report.metadata.cache_hit:
            m.cache_hits.inc()
        elif report.metadata.stages_run:
            m.cache_misses.inc()
        for key, ms in report.timings.items():
            phase = key.removesuffix("Ms")
            if key.endswith("Ms") and phase in PHASE_LABELS:
                m.phase_duration.labels(phase).observe(ms / 1000.0)

    def publish(self, event: Event) -> None:
        self._log(event)
        for sink in self.sinks:
            try:
                sink(event)
            except Exception:
                _log.exception("publication sink failed", sink=repr(sink), kind=event.kind.value)

    def _log(self, event: Event) -> None:
        fields = {
            "kind": event.kind.value,
            "trigger": event.trigger,
            "checksum": event.checksum,
        }
        if event.objects:
            fields["objects"] = list(event.objects[:20])  # type: ignore[assignment]
        rule_ids = sorted({d.rule_id for d in event.diagnostics})
        if rule_ids:
            fields["rule_ids"] = rule_ids  # type: ignore[assignment]
        if event.message:
            fields["detail"] = event.message
        if event.kind in (EventKind.REJECTED, EventKind.DEPLOY_FAILED):
            fields["serving"] = event.serving
        # Two fixed texts per outcome (not one with the checksum in it), so that log queries
        # can match the event name.
        still = (
            "last good configuration keeps serving"
            if event.serving is not None
            else "no validated configuration is serving yet"
        )
        if event.kind is EventKind.DEPLOYED:
            warnings = event.report.warnings if event.report else []
            _log.info("configuration deployed", warnings=len(warnings), **fields)
        elif event.kind is EventKind.REJECTED:
            _log.warning(f"configuration rejected; {still}", **fields)
        elif event.kind is EventKind.DEPLOY_FAILED:
            _log.error(f"deploy failed; {still}", **fields)
        elif event.kind is EventKind.SPEC_REJECTED:
            _log.warning("configuration spec rejected; running spec kept", **fields)
        elif event.kind is EventKind.SPEC_ACCEPTED:
            _log.info("configuration spec accepted", **fields)
        else:
            _log.warning("runtime event", **fields)
