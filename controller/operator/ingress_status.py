"""Ingress status: ``status.loadBalancer.ingress`` for the Ingresses this controller serves.

The only write ``htc run`` makes on users' objects, as every Ingress controller does: clients
(the Ingress conformance suite among them) send traffic as soon as an address appears, so it is
set only after a deploy that HAProxy confirmed (a ``deployed`` event) and only by the leader.
Which Ingresses are served is the classes given with ``--ingress-class`` (the IngressClass
names the templates serve); an Ingress that leaves those classes gets its address taken away.

The address is ``--publish-address`` (an IP or a host name), or the addresses of the Service
``--publish-service NS/NAME`` (its load-balancer ingress, else its external IPs, else its
ClusterIP), read at each publication.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
from collections.abc import Callable, Sequence
from typing import Any

from kubernetes import client

from controller.observability import Metrics, get_logger
from controller.publish import Event, EventKind
from controller.resources import StoreView

__all__ = ["IngressStatus"]

_log = get_logger("controller.operator.ingress_status")


def _entry(address: str) -> dict[str, str]:
    try:
        ipaddress.ip_address(address)
    except ValueError:
        return {"hostname": address}
    return {"ip": address}


class IngressStatus:
    """A publisher sink that keeps Ingress addresses in step with what HAProxy serves."""

    def __init__(
        self,
        api: client.ApiClient,
        metrics: Metrics,
        view: Callable[[], StoreView | None],
        *,
        classes: Sequence[str],
        address: str | None = None,
        service: tuple[str, str] | None = None,
    ) -> None:
        self.networking = client.NetworkingV1Api(api)
        self.core = client.CoreV1Api(api)
        self.metrics = metrics
        self.view = view
        self.classes = frozenset(classes)
        self.address = address
        self.service = service
        self.active = False
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.patched = 0

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="ingress-status")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def __call__(self, event: Event) -> None:
        if self.active and event.kind is EventKind.DEPLOYED:
            self._wake.set()

    async def _loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                await self._publish()
            except Exception:  # the next deploy tries again
                _log.exception("ingress status not published")

    async def _addresses(self) -> list[dict[str, str]]:
        if self.address:
            return [_entry(self.address)]
        if self.service is None:
            return []
        ns, name = self.service
        svc = await asyncio.to_thread(self.core.read_namespaced_service, name, ns)
        lb = (
            (svc.status.load_balancer.ingress or [])
            if svc.status and svc.status.load_balancer
            else []
        )
        found = [_entry(str(i.ip or i.hostname)) for i in lb if i.ip or i.hostname]
        if not found and svc.spec is not None:
            ips = svc.spec.external_ips or ([svc.spec.cluster_ip] if svc.spec.cluster_ip else [])
            found = [_entry(ip) for ip in ips if ip and ip != "None"]
        return found

    async def _publish(self) -> None:
        view = self.view()
        if view is None:
            return
        wanted = await self._addresses()
        for name in view.names():
            for obj in list(view.collection(name).list()):
                if obj.get("kind") != "Ingress":
                    continue
                ours = (obj.get("spec") or {}).get("ingressClassName") in self.classes
                current = ((obj.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
                target = wanted if ours else ([] if _same(current, wanted) else None)
                if target is None or _same(current, target):
                    continue
                meta = obj.get("metadata") or {}
                body = {"status": {"loadBalancer": {"ingress": target}}}
                try:
                    await asyncio.to_thread(
                        self.networking.patch_namespaced_ingress_status,
                        str(meta.get("name")),
                        str(meta.get("namespace")),
                        body,
                    )
                    self.patched += 1
                except client.ApiException as exc:
                    self.metrics.api_errors.labels(str(exc.status)).inc()
                    _log.warning("ingress status refused", status=exc.status, name=meta.get("name"))


def _same(a: Any, b: Sequence[dict[str, str]]) -> bool:
    def norm(items: Any) -> list[tuple[str, str]]:
        return sorted(
            (k, str(v)) for i in (items or []) if isinstance(i, dict) for k, v in i.items()
            if k in ("ip", "hostname")
        )  # fmt: skip

    return norm(a) == norm(list(b))
