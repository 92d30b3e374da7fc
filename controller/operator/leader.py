"""Leader election on a ``coordination.k8s.io/v1`` Lease.

kopf's peering pauses operators; it does not elect one. This is the client-go protocol in
small: a replica holds the Lease while it renews it within ``lease_duration``; another takes it
once it is expired. Writes carry the Lease's ``resourceVersion``, so two replicas racing for an
expired Lease cannot both win: the API server refuses the second write with a 409.

Leadership ends *at once* on our side when a renewal has not succeeded for ``renew_deadline``
(shorter than ``lease_duration``), so a replica that is cut off stops leader-only work before
anybody else may take over. A replica that stops cleanly releases the Lease (an empty holder),
so the next one need not wait for it to expire.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from kubernetes import client

from controller.observability import Metrics, get_logger

__all__ = ["LeaderElector", "LeaseSettings"]

_log = get_logger("controller.operator.leader")


@dataclass(frozen=True)
class LeaseSettings:
    namespace: str
    name: str = "haproxy-template-controller"
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0


class LeaderElector:
    def __init__(
        self,
        api: client.ApiClient,
        settings: LeaseSettings,
        identity: str,
        *,
        on_started: Callable[[], None],
        on_stopped: Callable[[], None],
        metrics: Metrics,
    ) -> None:
        self.leases = client.CoordinationV1Api(api)
        self.settings = settings
        self.identity = identity
        self.on_started = on_started
        self.on_stopped = on_stopped
        self.metrics = metrics
        self.is_leader = False
        self._last_renew = -float("inf")
        self._stopping = False

    async def run(self) -> None:
        s = self.settings
        while not self._stopping:
            try:
                held = await asyncio.to_thread(self._acquire_or_renew)
            except Exception as exc:  # an unreachable API server is an expected condition
                held = False
                _log.warning("lease request failed", lease=s.name, error=str(exc))
            now = time.monotonic()
            if held:
                self._last_renew = now
                if not self.is_leader:
                    self._set(True)
            elif self.is_leader and now - self._last_renew >= s.renew_deadline:
                self._set(False)
            await asyncio.sleep(s.retry_period)

    async def release(self) -> None:
        """Stop competing; give the Lease up when we hold it (the next leader need not wait)."""
        self._stopping = True
        if not self.is_leader:
            return
        self._set(False)
        with contextlib.suppress(Exception):
            await asyncio.to_thread(self._give_up)

    def _set(self, leader: bool) -> None:
        self.is_leader = leader
        self.metrics.leader.set(1 if leader else 0)
        _log.info("leadership " + ("acquired" if leader else "lost"), identity=self.identity)
        (self.on_started if leader else self.on_stopped)()

    def _acquire_or_renew(self) -> bool:
        s = self.settings
        now = datetime.now(UTC)
        try:
            lease = self.leases.read_namespaced_lease(s.name, s.namespace)
        except client.ApiException as exc:
            if exc.status != 404:
                self.metrics.api_errors.labels(str(exc.status)).inc()
                raise
            body = client.V1Lease(
                metadata=client.V1ObjectMeta(name=s.name, namespace=s.namespace),
                spec=self._spec(now, now, 0),
            )
            try:
                self.leases.create_namespaced_lease(s.namespace, body)
            except client.ApiException as race:
                self.metrics.api_errors.labels(str(race.status)).inc()
                return False
            return True
        spec = lease.spec or client.V1LeaseSpec()
        holder = spec.holder_identity
        renewed = spec.renew_time
        duration = spec.lease_duration_seconds or s.lease_duration
        expired = renewed is None or (now - renewed).total_seconds() > duration
        if holder and holder != self.identity and not expired:
            return False
        if holder == self.identity:
            lease.spec = self._spec(spec.acquire_time or now, now, spec.lease_transitions or 0)
        else:
            lease.spec = self._spec(now, now, (spec.lease_transitions or 0) + 1)
        try:
            self.leases.replace_namespaced_lease(s.name, s.namespace, lease)
        except client.ApiException as exc:
            self.metrics.api_errors.labels(str(exc.status)).inc()
            return False  # 409: somebody else wrote first
        return True

    def _spec(self, acquired: datetime, renewed: datetime, transitions: int) -> client.V1LeaseSpec:
        return client.V1LeaseSpec(
            holder_identity=self.identity,
            lease_duration_seconds=int(self.settings.lease_duration),
            acquire_time=acquired,
            renew_time=renewed,
            lease_transitions=transitions,
        )

    def _give_up(self) -> None:
        s = self.settings
        lease = self.leases.read_namespaced_lease(s.name, s.namespace)
        if lease.spec is None or lease.spec.holder_identity != self.identity:
            return
        lease.spec.holder_identity = None
        lease.spec.renew_time = None
        self.leases.replace_namespaced_lease(s.name, s.namespace, lease)
