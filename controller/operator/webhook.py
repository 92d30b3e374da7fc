"""The admission webhook server: AdmissionReview over HTTPS in, the admission trigger's answer out.

aiohttp beside kopf rather than kopf's own webhook machinery: kopf's admission server belongs to
one operator (one registry), and ours must outlive the watch sets, which come and go with
``watchedResources``; it also needs certificate reloads and our own routing of the config CR.
The server starts before the first watch set and stops after the last one.

* ``POST /validate`` takes ``admission.k8s.io/v1`` AdmissionReviews for watched objects and
  for the HAProxyTemplateConfig; anything else (a body that is not JSON, not a review, no
  ``uid``) gets a 400 with the reason, never a crash.
* The deadline of each judgement is the ``timeout`` the API server passes in the URL query
  (``?timeout=10s``, which the API server adds), or 10 s, minus a margin.
* The certificate and key are reloaded when their files change (a rotated Secret), without a
  restart: the check is a stat per second.
* ``dryRun`` requests get the same answer; nothing is published for any request.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from controller.observability import Metrics, get_logger
from controller.operator.watchset import CONFIG_GROUP
from controller.resources import InvalidObject, object_key
from controller.spec import HAProxyTemplateConfigSpec, WatchedResource, parse_config
from controller.triggers import AdmissionDecision, AdmissionJudge

__all__ = ["WebhookServer", "WebhookSettings"]

_log = get_logger("controller.operator.webhook")

MARGIN = 0.5
"""Seconds kept back from the API server's timeout for the answer to travel."""
_MAX_BODY = 8 << 20


CONFIG_KIND = "HAProxyTemplateConfig"
OTHER = "other"
_OPERATIONS = frozenset({"CREATE", "UPDATE", "DELETE"})


@dataclass(frozen=True)
class _Subject:
    kind: str
    """The metric label: ``HAProxyTemplateConfig``, a judged watched kind, or ``other``."""
    collection: str | None
    """The watched collection that judges it (None for the config and for other kinds)."""


@dataclass(frozen=True)
class WebhookSettings:
    addr: str
    cert: Path
    key: Path
    default_timeout: float = 10.0


class WebhookServer:
    def __init__(
        self,
        settings: WebhookSettings,
        judge: AdmissionJudge,
        *,
        watched: Callable[[], dict[str, WatchedResource]],
        config_ref: tuple[str, str],
        spec_override: Callable[[HAProxyTemplateConfigSpec], HAProxyTemplateConfigSpec],
        on_decision: Callable[[dict[str, Any], AdmissionDecision], None] | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.settings = settings
        self.judge = judge
        self.watched = watched
        self.namespace, self.name = config_ref
        self.spec_override = spec_override
        self.on_decision = on_decision
        self.metrics = metrics
        host, _, port = settings.addr.rpartition(":")
        self.host, self.port = host.strip("[]") or "0.0.0.0", int(port)
        self._ssl = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._ssl.minimum_version = ssl.TLSVersion.TLSv1_2
        self._stamp: tuple[float, float] | None = None
        self._runner: web.AppRunner | None = None
        self._reloader: asyncio.Task[None] | None = None
        self.requests = 0

    # --- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        self._load_cert()
        app = web.Application(client_max_size=_MAX_BODY)
        app.router.add_post("/validate", self._validate)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, self.host, self.port, ssl_context=self._ssl).start()
        self._runner = runner
        if runner.addresses:
            self.port = int(runner.addresses[0][1])
        self._reloader = asyncio.create_task(self._watch_cert(), name="webhook-cert")

    async def stop(self) -> None:
        if self._reloader is not None:
            self._reloader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reloader
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def _load_cert(self) -> None:
        s = self.settings
        stamp = (os.stat(s.cert).st_mtime, os.stat(s.key).st_mtime)
        if stamp == self._stamp:
            return
        self._ssl.load_cert_chain(s.cert, s.key)
        if self._stamp is not None:
            _log.info("webhook certificate reloaded", cert=str(s.cert))
        self._stamp = stamp

    async def _watch_cert(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            try:
                self._load_cert()
            except (OSError, ssl.SSLError) as exc:  # mid-rotation: keep the old pair
                _log.warning("webhook certificate not reloaded", error=str(exc))

    # --- requests -------------------------------------------------------------------------

    async def _validate(self, request: web.Request) -> web.Response:
        self.requests += 1
        loop = asyncio.get_running_loop()
        arrived = loop.time()
        deadline = arrived + _timeout(request.query.get("timeout"), self.settings) - MARGIN
        try:
            review = json.loads(await request.read())
        except (ValueError, UnicodeDecodeError) as exc:
            return self._bad(f"the body is not JSON: {exc}", arrived)
        req = review.get("request") if isinstance(review, dict) else None
        if not isinstance(req, dict) or not isinstance(req.get("uid"), str):
            return self._bad("not an admission.k8s.io/v1 AdmissionReview with request.uid", arrived)
        if not isinstance(req.get("kind"), dict):
            return self._bad("request.kind must be an object (group, version, kind)", arrived)
        subject = self._subject(req)
        try:
            decision = await self._decide(req, subject, deadline)
        except Exception as exc:  # hostile input must never take the server down
            _log.exception("admission request failed", uid=req.get("uid"))
            decision = AdmissionDecision(False, f"the request could not be judged: {exc!r}")
        if self.on_decision is not None:
            with contextlib.suppress(Exception):
                self.on_decision(req, decision)
        operation = req.get("operation")
        self._count(
            subject.kind,
            operation if isinstance(operation, str) and operation in _OPERATIONS else OTHER,
            "timeout" if decision.timed_out else "allowed" if decision.allowed else "denied",
            arrived,
        )
        response: dict[str, Any] = {"uid": req["uid"], "allowed": decision.allowed}
        if not decision.allowed:
            response["status"] = {"code": 403, "reason": "Forbidden", "message": decision.message}
        if decision.warnings:
            response["warnings"] = list(decision.warnings)
        return web.json_response(
            {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
        )

    def _bad(self, message: str, arrived: float) -> web.Response:
        self._count(OTHER, OTHER, "malformed", arrived)
        return web.json_response({"error": message}, status=400)

    def _count(self, kind: str, operation: str, result: str, arrived: float) -> None:
        if self.metrics is None:
            return
        self.metrics.admission_reviews.labels(kind, operation, result).inc()
        elapsed = asyncio.get_running_loop().time() - arrived
        self.metrics.admission_duration.labels(kind).observe(elapsed)

    def _subject(self, req: dict[str, Any]) -> _Subject:
        """What ``req`` is about. Its kind becomes a metric label only when it is one this
        controller judges: a request posted by anyone else must not grow the label set."""
        kind = req["kind"]
        group, version, name = kind.get("group", ""), kind.get("version"), kind.get("kind")
        if group == CONFIG_GROUP and name == "HAProxyTemplateConfig":
            return _Subject(CONFIG_KIND, None)
        api_version = f"{group}/{version}" if group else str(version)
        for collection, watched in sorted(self.watched().items()):
            if watched.api_version == api_version and watched.kind == name and watched.admission:
                return _Subject(watched.kind, collection)
        return _Subject(OTHER, None)

    async def _decide(
        self, req: dict[str, Any], subject: _Subject, deadline: float
    ) -> AdmissionDecision:
        operation = str(req.get("operation", ""))
        obj, old = req.get("object"), req.get("oldObject")
        if subject.kind == CONFIG_KIND:
            if (req.get("namespace"), req.get("name")) != (self.namespace, self.name):
                return AdmissionDecision(True, "another controller's configuration")
            if operation not in ("CREATE", "UPDATE") or not isinstance(obj, dict):
                return AdmissionDecision(True)
            config, errors = await asyncio.to_thread(parse_config, obj)  # off the loop: deadlines
            spec = self.spec_override(config.spec) if config is not None else None
            return await self.judge.judge_spec(spec, errors, deadline=deadline)
        if subject.collection is None:
            return AdmissionDecision(
                True, f"{req['kind'].get('kind')} is not judged by this controller"
            )
        subject_obj = old if operation == "DELETE" else obj
        if isinstance(subject_obj, dict):  # the store keys objects by their name
            try:
                object_key(subject_obj)
            except InvalidObject as exc:
                return AdmissionDecision(False, f"this {subject.kind} cannot be judged: {exc}")
        return await self.judge.judge_object(
            subject.collection,
            operation,
            obj if isinstance(obj, dict) else None,
            old if isinstance(old, dict) else None,
            deadline=deadline,
        )


def _timeout(value: str | None, settings: WebhookSettings) -> float:
    if value and value.endswith("s"):
        with contextlib.suppress(ValueError):
            return max(float(value[:-1]), 1.0)
    return settings.default_timeout
