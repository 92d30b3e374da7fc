"""Verdicts in the cluster: the config's status conditions and ``events.k8s.io/v1`` Events.

A publisher sink like the console and the status board, so the cluster sees the same events
they do, and only events: nothing here can claim a success the pipeline did not produce (a
deployed event is only built from a ``ValidatedFileSet``).

* Only the leader writes (``active``); followers drop what they see, and a new leader's first
  reconcile rewrites everything.
* Status is a merge patch of the status subresource. ``lastTransitionTime`` changes only when a
  condition's status changes, as the API conventions ask. A 409 or a 5xx is retried with
  back-off; the latest wanted status wins, older ones are dropped.
* Events are deduplicated per (reason, checksum) and throttled (a token bucket), so a burst of
  rejected edits cannot flood the API server. A rejection's Event goes on the config and on
  every object its findings name.
* In the fleet topology ``status.targets`` lists each HAProxy pod's last deploy (``targets``
  gives them). It goes with every verdict's status, and on its own when pods join or leave,
  or a drift repair changed one (:meth:`refresh_targets`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from kubernetes import client

from controller.diagnostics import Diagnostic, Severity
from controller.observability import Metrics, get_logger
from controller.operator.watchset import CONFIG_GROUP, CONFIG_PLURAL, CONFIG_VERSION
from controller.publish import Event, EventKind, now_rfc3339

__all__ = ["ClusterPublication"]

_HTTP_TRIGGERS = ("http:", "http-fetch:", "http-wait:")
"""Triggers of HTTP source events (a rejection, a failed fetch, a critical source awaited)."""
_log = get_logger("controller.operator.publication")

CONTROLLER_NAME = "haproxy-template.dev/controller"
_NOTE_MAX = 1000
_MAX_IDS = 20
_MAX_TARGETS = 1000
_TARGET_ERROR_MAX = 1000


def _first_errors(diags: tuple[Diagnostic, ...], n: int) -> list[Diagnostic]:
    errors = [d for d in diags if d.severity.rank <= Severity.ERROR.rank]
    return (errors or list(diags))[:n]


def _describe(d: Diagnostic) -> str:
    where = ""
    if d.location is not None and d.location.file:
        where = f" at {d.location.file}:{d.location.line}" if d.location.line else ""
    if d.template_location is not None and d.template_location.template:
        where += f" (template {d.template_location.template}:{d.template_location.line})"
    return f"{d.rule_id}: {d.message}{where}"


class ClusterPublication:
    def __init__(
        self,
        api: client.ApiClient,
        namespace: str,
        name: str,
        identity: str,
        metrics: Metrics,
        *,
        events_per_minute: int = 30,
    ) -> None:
        self.objects = client.CustomObjectsApi(api)
        self.events = client.EventsV1Api(api)
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.metrics = metrics
        self.active = False
        self.generation: int | None = None
        """Generation of the spec the running engine came from (observedGeneration)."""
        self.uid: str | None = None
        self.targets: Callable[[], list[dict[str, Any]]] | None = None
        self.http_sources: Callable[[], list[dict[str, Any]]] | None = None
        """Per HTTP source: accepted checksum, last fetch and error, pending rejection."""
        """The fleet's per-pod status (``status.targets``); None in the embedded topology."""
        self._targets_written: list[dict[str, Any]] | None = None
        self._conditions: dict[str, dict[str, Any]] = {}
        self._status: dict[str, Any] = {}
        self._queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self._wanted: dict[str, Any] | None = None
        self._task: asyncio.Task[None] | None = None
        self._seen_events: set[tuple[str, str, str]] = set()
        self._bucket = float(events_per_minute)
        self._bucket_max = float(events_per_minute)
        self._bucket_at = time.monotonic()
        self.writes = 0

    # --- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.create_task(self._writer(), name="cluster-publication")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def drain(self, timeout: float = 10.0) -> None:
        """Wait until everything queued is written (tests, shutdown)."""
        deadline = time.monotonic() + timeout
        while not self._queue.empty() and time.monotonic() < deadline:
            await asyncio.sleep(0.02)

    # --- the sink -------------------------------------------------------------------------

    def __call__(self, event: Event) -> None:
        if not self.active:
            return
        status = self._status_for(event)
        if status is not None:
            self._want_status(status)
        elif event.kind is EventKind.RUNTIME:
            self.refresh_targets()  # a drift repair may have changed a pod's line
        for note in self._events_for(event):
            self._queue.put_nowait(("event", note))

    def _condition(self, type_: str, ok: bool | None, reason: str, message: str) -> None:
        value = "Unknown" if ok is None else ("True" if ok else "False")
        old = self._conditions.get(type_)
        changed = old is None or old["status"] != value
        self._conditions[type_] = {
            "type": type_,
            "status": value,
            "reason": reason,
            "message": message[:32000],
            "lastTransitionTime": now_rfc3339()
            if changed or old is None
            else old["lastTransitionTime"],
            "observedGeneration": self.generation,
        }

    def _status_for(self, event: Event) -> dict[str, Any] | None:
        kind = event.kind
        report = event.report
        if kind in (EventKind.DEPLOYED, EventKind.DEPLOY_FAILED):
            assert event.validated is not None and report is not None
            self._condition("Valid", True, "Validated", "every validation stage passed")
            deployed = kind is EventKind.DEPLOYED
            self._condition(
                "Deployed",
                deployed,
                "Deployed" if deployed else "DeployFailed",
                f"{event.checksum} is running"
                if deployed
                else "; ".join(_describe(d) for d in event.diagnostics[:3]) or event.fallback(),
            )
            self._status["lastValidated"] = {
                "checksum": event.validated.checksum,
                "shortChecksum": event.validated.checksum[:12],
                "at": event.at,
                "haproxyVersion": report.metadata.haproxy_version or "unknown",
            }
            warnings = [d for d in report.diagnostics if d.severity is Severity.WARNING]
            self._status["warnings"] = [_describe(d)[:500] for d in warnings[:20]]
        elif kind is EventKind.REJECTED:
            assert report is not None
            first = _first_errors(event.diagnostics, 5)
            self._condition(
                "Valid",
                False,
                "ValidationFailed",
                "; ".join(_describe(d) for d in first[:1]) + f" ({event.fallback()})",
            )
            self._status["lastRejection"] = {
                "checksum": report.metadata.checksum,
                "at": event.at,
                "ruleIds": sorted({d.rule_id for d in event.diagnostics})[:_MAX_IDS],
                "messages": [_describe(d)[:500] for d in first],
            }
        elif kind is EventKind.SPEC_REJECTED:
            first = _first_errors(event.diagnostics[1:], 5) or list(event.diagnostics[:1])
            self._condition(
                "Valid",
                False,
                "SpecRejected",
                event.message + ": " + "; ".join(_describe(d) for d in first[:2]),
            )
            self._status["lastRejection"] = {
                "at": event.at,
                "ruleIds": sorted({d.rule_id for d in event.diagnostics})[:_MAX_IDS],
                "messages": [_describe(d)[:500] for d in first],
            }
        elif kind is EventKind.RUNTIME and event.trigger.startswith(_HTTP_TRIGGERS):
            # HTTP source content rejected or not fetched: the configuration is unchanged.
            # Before the first verdict a critical source holds the render: Ready says why.
            if not self._conditions and event.trigger.startswith("http-wait:"):
                self._condition("Ready", False, "WaitingForHTTPSources", event.message)
            return self._full_status() if self._conditions else None
        else:
            return None
        if report is not None:
            counts = report.metadata.counts
            self._status["diagnosticsSummary"] = {
                "errors": counts.error + counts.fatal,
                "warnings": counts.warning,
                "infos": counts.info,
                "ruleIds": sorted({d.rule_id for d in report.diagnostics})[:_MAX_IDS],
            }
        serving = event.serving or (event.checksum if kind is EventKind.DEPLOYED else None)
        self._condition(
            "Ready",
            serving is not None,
            "Serving" if serving else "NothingServing",
            f"HAProxy runs {serving}" if serving else "no validated configuration is running",
        )
        return self._full_status()

    def _full_status(self) -> dict[str, Any]:
        status = {
            **self._status,
            "observedGeneration": self.generation,
            "conditions": list(self._conditions.values()),
        }
        if self.targets is not None:
            status["targets"] = self._targets_written = self._target_lines()
        if self.http_sources is not None:
            status["httpSources"] = [
                {k: v for k, v in line.items() if v is not None} for line in self.http_sources()
            ]
        return status

    def _target_lines(self) -> list[dict[str, Any]]:
        assert self.targets is not None
        return [
            {k: (v[:_TARGET_ERROR_MAX] if k == "error" and isinstance(v, str) else v)
             for k, v in line.items() if v is not None}
            for line in self.targets()[:_MAX_TARGETS]
        ]  # fmt: skip

    def refresh_targets(self) -> None:
        """Write ``status.targets`` when it changed (pods joined or left, a drift repair)."""
        if not self.active or self.targets is None:
            return
        lines = self._target_lines()
        if lines == self._targets_written:
            return
        if self._conditions:
            self._want_status(self._full_status())
        else:
            # No verdict yet: the other fields are a previous leader's, left as they are.
            self._targets_written = lines
            self._want_status({"targets": lines})

    def _events_for(self, event: Event) -> list[dict[str, Any]]:
        kind = event.kind
        checksum = event.checksum or "none"
        if kind is EventKind.DEPLOYED:
            reason, type_ = "Deployed", "Normal"
            note = f"validated configuration {checksum[:12]} deployed"
        elif kind is EventKind.DEPLOY_FAILED:
            reason, type_ = "DeployFailed", "Warning"
            note = f"{checksum[:12]} passed validation but did not deploy; {event.fallback()}"
        elif kind is EventKind.RUNTIME and event.trigger.startswith("http:"):
            reason, type_ = "HTTPSourceRejected", "Warning"
            first = _first_errors(event.diagnostics[1:], 2)
            note = event.message + ": " + "; ".join(_describe(d) for d in first)
        elif kind is EventKind.RUNTIME and event.trigger.startswith(("http-fetch:", "http-wait:")):
            reason, type_ = "HTTPSourceUnavailable", "Warning"
            note = event.message
            checksum = event.message  # one Event per distinct error, not one ever
        elif kind in (EventKind.REJECTED, EventKind.SPEC_REJECTED):
            reason = "Rejected" if kind is EventKind.REJECTED else "SpecRejected"
            type_ = "Warning"
            first = _first_errors(event.diagnostics, 2)
            note = "; ".join(_describe(d) for d in first) + f" ({event.fallback()})"
        else:
            return []
        regarding = [self._config_ref()]
        if type_ == "Warning":
            regarding += _object_refs(event.diagnostics)
        notes = []
        for ref in regarding:
            key = (reason, checksum, f"{ref.get('kind')}/{ref.get('namespace')}/{ref.get('name')}")
            if key in self._seen_events:
                self.metrics.k8s_events.labels(type_, "deduplicated").inc()
                continue
            self._seen_events.add(key)
            notes.append(
                {"reason": reason, "type": type_, "note": note[:_NOTE_MAX], "regarding": ref}
            )
        return notes

    def _config_ref(self) -> dict[str, Any]:
        return {
            "apiVersion": f"{CONFIG_GROUP}/{CONFIG_VERSION}",
            "kind": "HAProxyTemplateConfig",
            "namespace": self.namespace,
            "name": self.name,
            **({"uid": self.uid} if self.uid else {}),
        }

    # --- writing --------------------------------------------------------------------------

    def _want_status(self, status: dict[str, Any]) -> None:
        """Only the newest wanted status matters: one queued write takes whatever is newest
        when its turn comes, and writes queued after it find nothing left to do."""
        self._wanted = status
        self._queue.put_nowait(("status", None))

    async def _writer(self) -> None:
        while True:
            what, body = await self._queue.get()
            if what == "status":
                wanted, self._wanted = self._wanted, None
                if wanted is not None:
                    await self._write_status(wanted)
            else:
                await self._post_event(body)

    async def _write_status(self, status: dict[str, Any]) -> None:
        delay = 0.2
        for _attempt in range(6):
            try:
                await asyncio.to_thread(
                    self.objects.patch_namespaced_custom_object_status,
                    CONFIG_GROUP,
                    CONFIG_VERSION,
                    self.namespace,
                    CONFIG_PLURAL,
                    self.name,
                    {"status": status},
                )
                self.metrics.status_writes.labels("ok").inc()
                self.writes += 1
                return
            except client.ApiException as exc:
                self.metrics.api_errors.labels(str(exc.status)).inc()
                retry = exc.status == 409 or exc.status == 429 or (exc.status or 0) >= 500
                self.metrics.status_writes.labels(
                    "conflict" if exc.status == 409 else "error"
                ).inc()
                if not retry:
                    _log.warning("status write refused", status=exc.status, reason=exc.reason)
                    return
            except Exception as exc:
                self.metrics.status_writes.labels("error").inc()
                _log.warning("status write failed", error=str(exc))
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)

    def _take_token(self) -> bool:
        now = time.monotonic()
        self._bucket = min(self._bucket_max, self._bucket + (now - self._bucket_at) / 2.0)
        self._bucket_at = now
        if self._bucket < 1:
            return False
        self._bucket -= 1
        return True

    async def _post_event(self, item: Mapping[str, Any]) -> None:
        type_ = item["type"]
        if not self._take_token():
            self.metrics.k8s_events.labels(type_, "throttled").inc()
            return
        regarding = item["regarding"]
        namespace = regarding.get("namespace") or self.namespace
        now = datetime.now(UTC)
        body = client.EventsV1Event(
            metadata=client.V1ObjectMeta(generate_name="htc-", namespace=namespace),
            event_time=now,
            reporting_controller=CONTROLLER_NAME,
            reporting_instance=self.identity[:128],
            action="Validate" if item["reason"] != "Deployed" else "Deploy",
            reason=item["reason"],
            type=type_,
            note=item["note"],
            regarding=client.V1ObjectReference(
                api_version=regarding.get("apiVersion"),
                kind=regarding.get("kind"),
                name=regarding.get("name"),
                namespace=regarding.get("namespace"),
                uid=regarding.get("uid"),
            ),
        )
        try:
            await asyncio.to_thread(self.events.create_namespaced_event, namespace, body)
            self.metrics.k8s_events.labels(type_, "posted").inc()
        except client.ApiException as exc:
            self.metrics.api_errors.labels(str(exc.status)).inc()
            self.metrics.k8s_events.labels(type_, "error").inc()
            _log.warning("event refused", status=exc.status, reason=exc.reason)
        except Exception as exc:
            self.metrics.k8s_events.labels(type_, "error").inc()
            _log.warning("event failed", error=str(exc))


def _object_refs(diags: tuple[Diagnostic, ...]) -> list[dict[str, Any]]:
    seen: dict[tuple[str, str, str], dict[str, Any]] = {}
    for d in diags:
        ref = d.object
        if ref is None or not ref.name or not ref.kind:
            continue
        key = (ref.kind, ref.namespace or "", ref.name)
        seen.setdefault(
            key,
            {
                "apiVersion": ref.api_version,
                "kind": ref.kind,
                "namespace": ref.namespace,
                "name": ref.name,
            },
        )
        if len(seen) >= 5:
            break
    return list(seen.values())
