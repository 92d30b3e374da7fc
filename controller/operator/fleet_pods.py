"""The fleet topology's pod discovery: HAProxy pods found by label, joined to a ``Fleet``.

``htc run --deploy dataplane`` deploys through the Data Plane API of every HAProxy pod that
matches ``--haproxy-selector`` in ``--haproxy-namespace``. This module keeps the
:class:`~controller.deploy.Fleet`'s members equal to the *ready* pods:

* a pod that is Ready and has a ``status.podIP`` joins (and at once gets the last validated
  set, :meth:`Fleet.join`); a join that fails is tried again with back-off while the pod stays;
* a pod that is deleted, stops being ready, or changes its address leaves (and, with a new
  address, joins again);
* only the leader joins pods. Every replica watches, so a new leader joins the pods it already
  knows at once; a replica that loses the Lease drops every member, so two replicas never
  deploy to one pod.

Why a list+watch of our own (a thread with the kubernetes client) and not a kopf handler in
the watch set: a watch set lives as long as one ``watchedResources`` and is replaced when
that changes (``watchset.py``), while the pods and the fleet must outlive such swaps — a
swap must not make every pod leave and join again. The pods are not template input either,
so they have no business in the store, and a kopf index would keep every pod's whole body.
One namespaced list, then one watch from its ``resourceVersion`` (with bookmarks), resumed
where it stopped and listed afresh after a ``410 Gone``, is all that is needed; only the
name, the Ready condition and the address of each pod are kept. The thread only reads and
hands each change to the controller's loop (``call_soon_threadsafe``), where the fleet lives.

The credentials are read from a Secret (keys ``username`` and ``password``) in the HAProxy
namespace when pods join; a rotated Secret reaches pods as they join again.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kubernetes import client
from kubernetes.watch.watch import iter_resp_lines

from controller.deploy import DataplaneClient, DataplaneTarget, Fleet
from controller.observability import Metrics, get_logger

__all__ = ["DataplaneSettings", "FleetPods", "PodState", "pod_state"]

_log = get_logger("controller.operator.fleet")


@dataclass(frozen=True, slots=True)
class DataplaneSettings:
    """Where the HAProxy pods are and how their Data Plane API is reached."""

    namespace: str
    selector: str
    """A label selector (``app=haproxy,tier=edge``), sent to the API server."""
    port: int = 5555
    secret: str = "dataplane-credentials"
    """Secret in ``namespace`` with the keys ``username`` and ``password``."""
    ca: str | None = None
    """CA bundle (PEM text or a path) the API's serving certificate chains to: HTTPS."""
    timeout: float = 10.0
    """Deadline of one Data Plane API request."""

    @property
    def scheme(self) -> str:
        return "https" if self.ca else "http"

    def url(self, ip: str) -> str:
        host = f"[{ip}]" if ":" in ip else ip
        return f"{self.scheme}://{host}:{self.port}"


@dataclass(frozen=True, slots=True)
class PodState:
    """What the fleet needs of one Pod."""

    name: str
    ip: str | None
    ready: bool

    @property
    def serving(self) -> bool:
        """Ready, with an address: a pod to deploy to."""
        return self.ready and bool(self.ip)


def pod_state(body: Mapping[str, Any]) -> PodState:
    """A Pod (as the API server sends it) in the fleet's terms. A pod being deleted is not
    ready, whatever its conditions still say."""
    meta = body.get("metadata") or {}
    status = body.get("status") or {}
    ready = not meta.get("deletionTimestamp") and any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )
    return PodState(str(meta.get("name", "")), status.get("podIP") or None, bool(ready))


@dataclass(frozen=True, slots=True)
class _Credentials:
    username: str
    password: str


class _PodWatch:
    """List, then watch, the selected pods in a thread; each change goes to ``deliver`` on
    the controller's loop."""

    def __init__(
        self,
        api: client.ApiClient,
        settings: DataplaneSettings,
        deliver: Callable[[str, Any], None],
        metrics: Metrics,
        *,
        watch_timeout: int = 240,
    ) -> None:
        self.core = client.CoreV1Api(api)
        self.settings = settings
        self.deliver = deliver
        self.metrics = metrics
        self.watch_timeout = watch_timeout
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop = threading.Event()
        self._response: Any = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._thread = threading.Thread(target=self._run, name="fleet-pods", daemon=True)
        self._thread.start()

    async def stop(self) -> None:
        self._stop.set()
        response = self._response
        if response is not None:
            with contextlib.suppress(Exception):
                response.shutdown()  # unblocks the thread's read at once
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, 5.0)

    def _post(self, what: str, payload: Any) -> None:
        loop = self._loop
        if loop is None or loop.is_closed() or self._stop.is_set():
            return
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(self.deliver, what, payload)

    def _run(self) -> None:
        delay = 1.0
        while not self._stop.is_set():
            try:
                version: str | None = self._list()
                delay = 1.0
                while not self._stop.is_set() and version is not None:
                    version = self._watch(version)
                continue  # expired (410 Gone): list again at once
            except client.ApiException as exc:
                self.metrics.api_errors.labels(str(exc.status)).inc()
                _log.warning(
                    "cannot list or watch the HAProxy pods; retrying",
                    namespace=self.settings.namespace,
                    status=exc.status,
                    reason=exc.reason,
                    retry_in=delay,
                )
            except Exception as exc:
                if self._stop.is_set():
                    return
                self.metrics.api_errors.labels("unreachable").inc()
                _log.warning(
                    "the HAProxy pod watch failed; retrying", error=str(exc)[:300], retry_in=delay
                )
            if self._stop.wait(delay):
                return
            delay = min(delay * 2, 30.0)

    def _list(self) -> str:
        s = self.settings
        response: Any = self.core.list_namespaced_pod(
            s.namespace, label_selector=s.selector, _preload_content=False, _request_timeout=30
        )
        body = json.loads(response.data)
        self._post("reset", [pod_state(item) for item in body.get("items") or []])
        return str(body["metadata"]["resourceVersion"])

    def _watch(self, version: str) -> str | None:
        """One watch request from ``version``; the version to go on from, or None to list
        again (the version is too old)."""
        s = self.settings
        response: Any = self.core.list_namespaced_pod(
            s.namespace,
            label_selector=s.selector,
            watch=True,
            allow_watch_bookmarks=True,
            resource_version=version,
            timeout_seconds=self.watch_timeout,
            _preload_content=False,
            _request_timeout=(10, self.watch_timeout + 30),
        )
        self._response = response
        try:
            for line in iter_resp_lines(response):  # type: ignore[no-untyped-call]
                if self._stop.is_set():
                    return None
                event = json.loads(line)
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    code = obj.get("code")
                    if code == 410:
                        return None  # expired: list again
                    raise client.ApiException(status=code, reason=obj.get("message"))
                version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
                if kind in ("ADDED", "MODIFIED", "DELETED"):
                    self._post(str(kind), pod_state(obj))
        finally:
            self._response = None
            with contextlib.suppress(Exception):
                response.release_conn()
        return version


class FleetPods:
    """Keeps ``fleet``'s members equal to the ready pods, while this replica leads.

    ``on_change`` is called after members joined (deployed) or left: ``status.targets``.
    """

    def __init__(
        self,
        api: client.ApiClient,
        fleet: Fleet,
        settings: DataplaneSettings,
        *,
        metrics: Metrics,
        on_change: Callable[[], None] = lambda: None,
        retry_initial: float = 1.0,
        retry_max: float = 30.0,
    ) -> None:
        self.core = client.CoreV1Api(api)
        self.fleet = fleet
        self.settings = settings
        self.metrics = metrics
        self.on_change = on_change
        self.retry_initial = retry_initial
        self.retry_max = retry_max
        self.pods: dict[str, PodState] = {}
        self.synced = asyncio.Event()
        """Set once the first list of pods arrived."""
        self.leading = False
        self._watch = _PodWatch(api, settings, self._deliver, metrics)
        self._joined: dict[str, str] = {}
        """Pod name → the API URL it joined with."""
        self._joins: dict[str, asyncio.Task[None]] = {}
        self._dirty = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._later: asyncio.Task[None] | None = None

    # --- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._sync_loop(), name="fleet-pods")
        self._watch.start()

    async def stop(self) -> None:
        """Stop watching and drop every member (the fleet itself is closed by its owner)."""
        await self._watch.stop()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for name in list(self._joined):
            await self._leave(name)

    def lead(self) -> None:
        """This replica deploys now: every ready pod joins."""
        self.leading = True
        self._dirty.set()

    def follow(self) -> None:
        """Another replica deploys: every member leaves (pods are still tracked)."""
        self.leading = False
        self._dirty.set()

    # --- pods -----------------------------------------------------------------------------

    def _deliver(self, what: str, payload: Any) -> None:
        if what == "reset":
            self.pods = {p.name: p for p in payload}
            if not self.synced.is_set():
                _log.info(
                    "HAProxy pods listed",
                    namespace=self.settings.namespace,
                    selector=self.settings.selector,
                    pods=len(self.pods),
                    ready=sum(p.serving for p in self.pods.values()),
                )
            self.synced.set()
        elif what == "DELETED":
            self.pods.pop(payload.name, None)
        else:
            self.pods[payload.name] = payload
        self._count()
        self._dirty.set()

    def wanted(self) -> dict[str, str]:
        """Pod name → API URL of every pod that should be a member now."""
        if not self.leading:
            return {}
        return {
            p.name: self.settings.url(p.ip)
            for p in self.pods.values()
            if p.serving and p.ip is not None
        }

    # --- membership -----------------------------------------------------------------------

    async def _sync_loop(self) -> None:
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            try:
                await self._sync()
            except Exception:
                _log.exception("fleet membership update failed")
                self._retry_later(self.retry_initial)

    async def _sync(self) -> None:
        want = self.wanted()
        changed = False
        for name, url in list(self._joined.items()):
            if want.get(name) != url:
                await self._leave(name)
                changed = True
        new = {n: u for n, u in want.items() if n not in self._joined}
        if new:
            credentials = await self._credentials()
            if credentials is None:
                self._retry_later(self.retry_max / 3)
            else:
                for name, url in sorted(new.items()):
                    self._joined[name] = url
                    self._joins[name] = asyncio.get_running_loop().create_task(
                        self._join(name, url, credentials), name=f"join-{name}"
                    )
        self._count()
        if changed:
            self.on_change()

    async def _join(self, name: str, url: str, credentials: _Credentials) -> None:
        s = self.settings
        api = DataplaneClient(
            url, credentials.username, credentials.password, ca=s.ca, timeout=s.timeout
        )
        target = DataplaneTarget(name, api, metrics=self.metrics)
        delay = self.retry_initial
        try:
            while True:
                result = await self.fleet.join(target)
                self.on_change()
                if result is None or result.ok:
                    return
                _log.warning(
                    "a joining pod did not take the validated set; retrying",
                    pod=name,
                    outcome=result.outcome.value,
                    retry_in=delay,
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.retry_max)
                if self.fleet.members.get(name) is not target:
                    return  # it left, or joined again with another address
                last = self.fleet.last
                if last is not None and target.active_checksum == last.checksum:
                    return  # a reconcile reached it meanwhile
        finally:
            if self._joins.get(name) is asyncio.current_task():
                del self._joins[name]

    async def _leave(self, name: str) -> None:
        task = self._joins.pop(name, None)
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._joined.pop(name, None)
        await self.fleet.leave(name)

    async def _credentials(self) -> _Credentials | None:
        s = self.settings
        try:
            secret = await asyncio.to_thread(
                self.core.read_namespaced_secret, s.secret, s.namespace
            )
            data = secret.data or {}
            return _Credentials(
                base64.b64decode(data["username"]).decode(),
                base64.b64decode(data["password"]).decode(),
            )
        except client.ApiException as exc:
            self.metrics.api_errors.labels(str(exc.status)).inc()
            _log.warning(
                "cannot read the Data Plane API credentials; pods wait to join",
                secret=f"{s.namespace}/{s.secret}",
                status=exc.status,
                reason=exc.reason,
            )
        except (KeyError, ValueError) as exc:
            _log.warning(
                "the Data Plane API credentials Secret needs the keys username and password",
                secret=f"{s.namespace}/{s.secret}",
                error=str(exc),
            )
        except Exception as exc:
            self.metrics.api_errors.labels("unreachable").inc()
            _log.warning("cannot read the Data Plane API credentials", error=str(exc)[:300])
        return None

    def _retry_later(self, delay: float) -> None:
        async def later() -> None:
            await asyncio.sleep(delay)
            self._dirty.set()

        task = asyncio.get_running_loop().create_task(later())
        self._later = task  # keep a reference until it ran

    def _count(self) -> None:
        gauge = self.metrics.fleet_pods
        gauge.labels("found").set(len(self.pods))
        gauge.labels("ready").set(sum(p.serving for p in self.pods.values()))
        gauge.labels("joined").set(len(self._joined))
