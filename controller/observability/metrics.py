"""Every metric the controller exports, in one place.

Names, help texts, label sets and buckets live here and nowhere else so that dashboards and
alerts have one file to read, ``docs/metrics.md`` can be checked against it, and no layer invents
an ad-hoc metric. Each :class:`Metrics` owns a private ``CollectorRegistry``: two controllers in
one process (tests, the benchmark) never share or double-register series, and the exposition
contains only our series, not the client library's process collectors.

Naming follows Prometheus conventions: the ``htc_`` prefix, base units in the name
(``_seconds``), ``_total`` on counters (the client library appends it), and label values taken
from small closed sets (trigger, result, phase, target, collection) so cardinality stays bounded.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Info,
    disable_created_metrics,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from controller import __version__

PREFIX = "htc"

# `_created` series double every counter and histogram in the exposition and no dashboard of
# ours reads them; process start time is what matters, and restarts reset every series anyway.
disable_created_metrics()  # type: ignore[no-untyped-call]

#: Buckets for whole reconcile runs and reloads: tens of milliseconds up to a slow minute.
LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
#: Buckets for single pipeline phases, which are usually well below a second.
PHASE_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0)

__all__ = [
    "CONTENT_TYPE_LATEST",
    "METRICS",
    "MetricDoc",
    "Metrics",
]


@dataclass(frozen=True, slots=True)
class MetricDoc:
    """How one metric appears in the exposition; the source of ``docs/metrics.md``."""

    name: str
    type: str
    help: str
    labels: tuple[str, ...]


class Metrics:
    """The controller's metric objects, registered in one private registry."""

    def __init__(self, version: str = __version__) -> None:
        r = self.registry = CollectorRegistry(auto_describe=True)
        self.build_info = Info(
            f"{PREFIX}_build",
            "Controller build information; the value is always 1.",
            registry=r,
        )
        self.build_info.info({"version": version, "python_version": platform.python_version()})

        self.pipeline_runs = Counter(
            f"{PREFIX}_pipeline_runs",
            "Validation pipeline runs by trigger (startup, change, resync, retry, config) and "
            "result (valid, invalid, incomplete).",
            ["trigger", "result"],
            registry=r,
        )
        self.phase_duration = Histogram(
            f"{PREFIX}_pipeline_phase_duration_seconds",
            "Time spent in one phase of a pipeline run (render, syntax, schema, haproxy, "
            "rules, external).",
            ["phase"],
            buckets=PHASE_BUCKETS,
            registry=r,
        )
        self.cache_hits = Counter(
            f"{PREFIX}_pipeline_cache_hits",
            "Pipeline runs answered from the verdict cache.",
            registry=r,
        )
        self.cache_misses = Counter(
            f"{PREFIX}_pipeline_cache_misses",
            "Pipeline runs that had to validate the file set.",
            registry=r,
        )
        self.reconcile_latency = Histogram(
            f"{PREFIX}_reconcile_latency_seconds",
            "Time from the earliest change a run covered to the confirmed deployment of its "
            "result.",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.reconcile_runs = Counter(
            f"{PREFIX}_reconcile_runs",
            "Reconcile runs (render and validate) by trigger (startup, change, resync, retry, "
            "config); a proposed spec's trial render counts as config.",
            ["trigger"],
            registry=r,
        )
        self.reconcile_changes = Counter(
            f"{PREFIX}_reconcile_changes",
            "Store changes seen by the reconcile trigger; many changes share one run.",
            registry=r,
        )
        self.spec_changes = Counter(
            f"{PREFIX}_spec_changes",
            "Proposed HAProxyTemplateConfig specs by result (accepted, rejected).",
            ["result"],
            registry=r,
        )
        self.deploys = Counter(
            f"{PREFIX}_deploys",
            "Deploy attempts by target and result (deployed, unchanged, failed, rolled_back).",
            ["target", "result"],
            registry=r,
        )
        self.reloads = Counter(
            f"{PREFIX}_reloads",
            "HAProxy reloads and starts by target and result (success, failure).",
            ["target", "result"],
            registry=r,
        )
        self.reload_duration = Histogram(
            f"{PREFIX}_reload_duration_seconds",
            "Time from the reload request to HAProxy's confirmation.",
            ["target"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.drift_redeploys = Counter(
            f"{PREFIX}_drift_redeploys",
            "Redeploys because the files on disk no longer matched the last validated set.",
            ["target"],
            registry=r,
        )
        self.haproxy_restarts = Counter(
            f"{PREFIX}_haproxy_restarts",
            "Restarts of the supervised HAProxy by reason (master_exited, no_worker).",
            ["reason"],
            registry=r,
        )
        self.store_objects = Gauge(
            f"{PREFIX}_store_objects",
            "Objects per watched collection in the snapshot of the latest run.",
            ["collection"],
            registry=r,
        )
        self.last_deploy_timestamp = Gauge(
            f"{PREFIX}_last_deploy_timestamp_seconds",
            "Unix time of the latest confirmed deployment.",
            registry=r,
        )
        self.last_verdict_valid = Gauge(
            f"{PREFIX}_last_verdict_valid",
            "1 when the latest pipeline verdict was valid, 0 when it was not.",
            registry=r,
        )
        self.leader = Gauge(
            f"{PREFIX}_leader",
            "1 while this replica holds the leader Lease (htc run), else 0.",
            registry=r,
        )
        self.watched_objects = Gauge(
            f"{PREFIX}_watched_objects",
            "Objects the watches hold per collection, as they arrive (htc run).",
            ["collection"],
            registry=r,
        )
        self.watch_starts = Counter(
            f"{PREFIX}_watch_starts",
            "Watch sets started (htc run): the first, and one per change of watchedResources.",
            registry=r,
        )
        self.resyncs = Counter(
            f"{PREFIX}_resyncs",
            "Full lists of the watched collections made by htc run itself, by reason: initial "
            "(fills the store before kopf's watches start), handover (once they have listed), "
            "reconnect (the API server was unreachable), periodic (relistInterval). kopf "
            "reconnects its watch streams on its own and does not report it.",
            ["reason"],
            registry=r,
        )
        self.api_errors = Counter(
            f"{PREFIX}_api_errors",
            "Failed requests of the controller's own to the API server, by HTTP status code.",
            ["code"],
            registry=r,
        )
        self.status_writes = Counter(
            f"{PREFIX}_status_writes",
            "Writes of the HAProxyTemplateConfig status by result (ok, conflict, error).",
            ["result"],
            registry=r,
        )
        self.fleet_pods = Gauge(
            f"{PREFIX}_fleet_pods",
            "HAProxy pods of the fleet topology (htc run --deploy dataplane) by state: found "
            "by the selector, ready (with an address), joined (deployed to by this replica).",
            ["state"],
            registry=r,
        )
        self.http_fetches = Counter(
            f"{PREFIX}_http_fetches",
            "Fetches of HTTP sources, by source and result (ok, unchanged, error).",
            ["source", "result"],
            registry=r,
        )
        self.http_promotions = Counter(
            f"{PREFIX}_http_promotions",
            "New content of an HTTP source that passed validation and became the accepted one.",
            ["source"],
            registry=r,
        )
        self.http_rejections = Counter(
            f"{PREFIX}_http_rejections",
            "New content of an HTTP source that was not accepted, by reason (invalid, known).",
            ["source", "reason"],
            registry=r,
        )
        self.k8s_events = Counter(
            f"{PREFIX}_kubernetes_events",
            "Kubernetes Events posted, by type (Normal, Warning) and result (posted, deduplicated, throttled, error).",
            ["type", "result"],
            registry=r,
        )
        self.admission_reviews = Counter(
            f"{PREFIX}_admission_reviews",
            "AdmissionReviews answered by the webhook (htc run --webhook-addr), by kind (the "
            "HAProxyTemplateConfig, a watched kind with admission on, or other), operation "
            "(CREATE, UPDATE, DELETE, other) and result (allowed, denied, timeout: not judged by "
            "the deadline and answered by policy, malformed: not a review, answered 400).",
            ["kind", "operation", "result"],
            registry=r,
        )
        self.admission_duration = Histogram(
            f"{PREFIX}_admission_review_duration_seconds",
            "Time from an AdmissionReview's arrival to its answer, by kind (as in "
            "htc_admission_reviews_total); answers by the deadline come half a second before "
            "the API server's timeout.",
            ["kind"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )

    def exposition(self) -> bytes:
        """The registry in the Prometheus text format."""
        return generate_latest(self.registry)

    def sample(self, name: str, labels: dict[str, str] | None = None) -> float:
        """Current value of one sample (0 when it does not exist yet); for tests and status."""
        value = self.registry.get_sample_value(name, labels or {})
        return 0.0 if value is None else value

    def describe(self) -> list[MetricDoc]:
        """Every metric as exposed, sorted by name; ``docs/metrics.md`` is generated from it."""
        docs: list[MetricDoc] = []
        for collector in _collectors(self):
            for family in collector.describe():
                labels = tuple(getattr(collector, "_labelnames", ()))
                name = family.name
                if family.type == "counter":
                    name = f"{name}_total"
                elif family.type == "info":
                    name = f"{name}_info"
                docs.append(MetricDoc(name, family.type, family.documentation, labels))
        return sorted(docs, key=lambda d: d.name)


def _collectors(m: Metrics) -> list[Counter | Gauge | Histogram | Info]:
    return [v for v in vars(m).values() if isinstance(v, Counter | Gauge | Histogram | Info)]


def render_markdown(m: Metrics) -> str:
    """The metrics reference page; ``tests/observability`` keeps docs/metrics.md equal to it."""
    lines = [
        "# Metrics",
        "",
        "Every metric the controller exports on `/metrics` (Prometheus text format). This page is",
        "generated from `controller/observability/metrics.py`; a test fails when they differ.",
        "Regenerate it with `python -m controller.observability > docs/metrics.md`.",
        "",
        "| name | type | labels | meaning |",
        "|---|---|---|---|",
    ]
    for d in m.describe():
        labels = ", ".join(f"`{label}`" for label in d.labels) or "-"
        lines.append(f"| `{d.name}` | {d.type} | {labels} | {d.help} |")
    lines += [
        "",
        "Histograms also export `_bucket`, `_sum` and `_count` series. `htc_build_info` carries",
        "`version` and `python_version` labels.",
        "",
    ]
    return "\n".join(lines)


METRICS = Metrics()
"""The process-wide default; components take a ``Metrics`` argument so tests can isolate."""
