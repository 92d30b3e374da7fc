"""``htc run``: the controller in a cluster. The wiring, and nothing else::

    kopf watch set (own thread) → store → reconcile trigger → Pipeline → MasterSocketTarget
                                                          ↘ publisher → status board, /status,
                                                                       CR status + Events (leader)

Startup: the config is read (retried with back-off while the API server is unreachable or the
object does not exist yet); a watch set is started for its ``watchedResources``; nothing renders
until every collection has finished its initial list; then exactly one reconcile runs.

A config change is proposed to the trigger, which adopts it only if it lints, renders with the
live objects and validates. When its ``watchedResources`` differ, a second watch set fills a
second store first; the spec is tried on that store, and only if it is adopted does the new
watch set replace the old one. A change of templates or rules lists nothing again.

Every replica watches, keeps its store warm and deploys its own verdict to its own HAProxy (the
embedded topology). Only the leader writes status and Events; losing the Lease stops that at
once, and a new leader reconciles at once. In the fleet topology (``dataplane`` options) no
HAProxy runs here: the targets are the HAProxy pods found by label (``fleet_pods.py``), and
only the leader deploys to them.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import json
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.dynamic import DynamicClient

from controller.deploy import (
    DeployTarget,
    Fleet,
    HAProxySupervisor,
    MasterSocketTarget,
    find_haproxy,
)
from controller.diagnostics import Diagnostic, Phase, make
from controller.observability import METRICS, Metrics, get_logger
from controller.operator.fleet_pods import DataplaneSettings, FleetPods
from controller.operator.heap import fix_mmap_threshold, limit_arenas, release_free_memory
from controller.operator.ingress_status import IngressStatus
from controller.operator.kube import KubeConnection, connect
from controller.operator.leader import LeaderElector, LeaseSettings
from controller.operator.publication import ClusterPublication
from controller.operator.watchset import (
    CONFIG_GROUP,
    CONFIG_PLURAL,
    CONFIG_VERSION,
    Delivery,
    WatchSet,
    apply_delivery,
    field_selector_string,
    label_selector_string,
)
from controller.operator.webhook import WebhookServer, WebhookSettings
from controller.publish import Event, EventKind, Publisher, StatusBoard, StatusServer
from controller.resources import ObjectKey, Store, object_key
from controller.spec import HAProxyTemplateConfigSpec, SecretKeyRef, WatchedResource, parse_config
from controller.triggers import (
    AdmissionDecision,
    AdmissionJudge,
    HttpSources,
    ReconcileTrigger,
    default_engine,
    spec_rejection,
    with_listen,
)

__all__ = ["OperatorApp", "OperatorOptions"]

_log = get_logger("controller.operator")


@dataclass
class OperatorOptions:
    namespace: str
    config: str
    """Name of the HAProxyTemplateConfig in ``namespace``."""
    kubeconfig: str | None = None
    haproxy: str | None = None
    listen: str | None = None
    """Overrides ``extraContext.listen``."""
    status_addr: str | None = "127.0.0.1:9180"
    work_dir: Path | None = None
    dataplane: DataplaneSettings | None = None
    """The fleet topology (``--deploy dataplane``): HAProxy pods through their Data Plane API,
    and no local HAProxy. None: the embedded topology."""
    leader_election: bool = True
    lease_name: str = "haproxy-template-controller"
    lease_namespace: str | None = None
    """Namespace of the Lease; the config's namespace when None."""
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    identity: str | None = None
    drift_interval: float = 5.0
    sync_timeout: float = 300.0
    relist_interval: float = 600.0
    """Seconds between full lists that make the store equal to the API server (0: only after
    the API server was unreachable). Watches resumed after a 410 list again without telling
    what was deleted meanwhile; this catches it."""
    webhook_addr: str | None = None
    """Address of the admission webhook (HTTPS); None runs none."""
    webhook_cert: Path | None = None
    webhook_key: Path | None = None
    webhook_allow_on_timeout: bool = False
    ingress_classes: tuple[str, ...] = ("haproxy",)
    """IngressClass names the templates serve: their Ingresses get the published address."""
    publish_address: str | None = None
    """Address written into status.loadBalancer of the Ingresses served; None writes none."""
    publish_service: tuple[str, str] | None = None
    """Or: the addresses of this Service (namespace, name)."""


class OperatorApp:
    def __init__(self, options: OperatorOptions, *, metrics: Metrics | None = None) -> None:
        self.options = options
        self.metrics = metrics or METRICS
        self.binary = find_haproxy(options.haproxy)
        self.connection: KubeConnection = connect(options.kubeconfig)
        self.api = self.connection.api_client()
        self.identity = options.identity or f"{socket.gethostname()}-{os.getpid()}"
        self.board = StatusBoard()
        self.cluster = ClusterPublication(
            self.api, options.namespace, options.config, self.identity, self.metrics
        )
        self.publisher = Publisher(metrics=self.metrics, sinks=[self.board, self.cluster])
        self.server = (
            StatusServer(
                self.board,
                self.metrics,
                options.status_addr,
                alive=self._haproxy_running,
                not_ready=self._not_ready,
            )
            if options.status_addr
            else None
        )
        self._own_work_dir = options.work_dir is None
        self.work_dir = Path(options.work_dir or tempfile.mkdtemp(prefix="htc-run-"))
        self.deploy_dir = self.work_dir / "config"
        self.supervisor = HAProxySupervisor(
            self.binary,
            self.deploy_dir,
            self.work_dir / "master.sock",
            metrics=self.metrics,
            on_event=self._haproxy_event,
        )
        # The trigger deploys to whatever this list holds: this replica's own HAProxy (the
        # embedded topology), or the fleet of HAProxy pods, which only the leader fills.
        self.fleet: Fleet | None = None
        self.fleet_pods: FleetPods | None = None
        self.targets: list[DeployTarget]
        if options.dataplane is not None:
            fleet = self.fleet = Fleet("haproxy", concurrency=8)
            self.fleet_pods = FleetPods(
                self.api,
                fleet,
                options.dataplane,
                metrics=self.metrics,
                on_change=self.cluster.refresh_targets,
            )
            self.cluster.targets = lambda: [s.to_dict() for s in fleet.status()]
            self.targets = [fleet]
        else:
            self.targets = [
                MasterSocketTarget(
                    self.deploy_dir,
                    self.work_dir / "master.sock",
                    process=self.supervisor,
                    metrics=self.metrics,
                )
            ]
        self.store = Store({})
        self.trigger = ReconcileTrigger(
            self.store,
            self.targets,
            self.publisher,
            default_engine(self.binary),
            metrics=self.metrics,
            drift_interval=options.drift_interval,
        )
        self.judge = AdmissionJudge(
            engine=lambda: self.trigger.engine if self.synced else None,
            view=lambda: self.store.snapshot() if self.synced else None,
            baseline_valid=self._baseline_valid,
            engine_factory=default_engine(self.binary),
            allow_on_timeout=options.webhook_allow_on_timeout,
            http=lambda: self.http_sources.content() if self.http_sources is not None else None,
        )
        self.webhook: WebhookServer | None = None
        if options.webhook_addr:
            if options.webhook_cert is None or options.webhook_key is None:
                raise ValueError("--webhook-addr needs --webhook-cert and --webhook-key")
            self.webhook = WebhookServer(
                WebhookSettings(options.webhook_addr, options.webhook_cert, options.webhook_key),
                self.judge,
                watched=lambda: dict(self.store.watched()),
                config_ref=(options.namespace, options.config),
                spec_override=self._override,
                on_decision=self._admitted,
                metrics=self.metrics,
            )
        self.http_sources: HttpSources | None = None
        self.ingress_status: IngressStatus | None = None
        if options.publish_address or options.publish_service:
            self.ingress_status = IngressStatus(
                self.api,
                self.metrics,
                lambda: self.store.snapshot() if self.synced else None,
                classes=options.ingress_classes,
                address=options.publish_address,
                service=options.publish_service,
            )
            self.publisher.add_sink(self.ingress_status)
        self.elector: LeaderElector | None = None
        if options.leader_election:
            self.elector = LeaderElector(
                self.api,
                LeaseSettings(
                    namespace=options.lease_namespace or options.namespace,
                    name=options.lease_name,
                    lease_duration=options.lease_duration,
                    renew_deadline=options.renew_deadline,
                    retry_period=options.retry_period,
                ),
                self.identity,
                on_started=self._lead,
                on_stopped=self._follow,
                metrics=self.metrics,
            )
        self.watch: WatchSet | None = None
        self.synced = False
        self.started = False
        self._stores: dict[int, Store] = {}
        self._touched: dict[int, dict[str, set[ObjectKey]]] = {}
        """Per store being relisted: the keys its watches changed meanwhile (:meth:`relist`)."""
        self._sets: dict[int, WatchSet] = {}
        self._unsubscribe: Callable[[], None] | None = None
        self._running_spec: HAProxyTemplateConfigSpec | None = None
        self._pending_config: dict[str, Any] | None = None
        self._seen_generation: int | None = None
        self._watch_sets = 0
        self.api_reachable = True
        self._tasks: set[asyncio.Task[Any]] = set()
        self._stop = asyncio.Event()
        self._stopped = False

    # --- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        limit_arenas()  # before kopf's threads: see heap.py
        fix_mmap_threshold()  # rendered configurations are megabytes (see there)
        if self.server is not None:
            await self.server.start()
        if self.webhook is not None:
            # Up before the first watch set and independent of every later one; it answers
            # "not synced yet" until the store is filled.
            await self.webhook.start()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.cluster.start()
        if self.ingress_status is not None:
            self.ingress_status.start()
        if self.fleet_pods is not None:
            self.fleet_pods.start()
        if self.elector is None:
            self._lead()
        else:
            self._spawn(self.elector.run())
        self._spawn(self._probe_api())
        self._spawn(self._relist_periodically())
        body = await self._read_config()
        spec = self._spec_of(body)
        while spec is None:  # a broken first config: say so, wait for the next version
            body = await self._read_config(changed_from=body)
            spec = self._spec_of(body)
        self._note_config(body)
        self._seen_generation = _generation(body)
        self.store = Store(spec.watched_resources)
        self.trigger.source = self.store
        listed = await self._fill(spec, self.store)
        if listed is None:
            self.watch = await self._watch_synced(spec, self.store)
        self.synced = True
        self._unsubscribe = self.store.subscribe(self.trigger)
        self._running_spec = spec
        if spec.http_sources:
            await self._start_http_sources(spec)
        await self.trigger.start(spec)
        if listed is not None:
            # kopf starts after the first reconcile: its handling of every listed object
            # would otherwise compete with the first render for the interpreter.
            self.watch = self._watch_handed_over(spec, self.store, listed)
        self.started = True
        if self.http_sources is not None:
            self.http_sources.start_refresh()
        if self._pending_config is not None:
            pending, self._pending_config = self._pending_config, None
            self._on_config(pending)

    async def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        if self.elector is not None:
            await self.elector.release()
        for task in list(self._tasks):
            task.cancel()
        for watch_set in list(self._sets.values()):
            await watch_set.stop()
        await self.trigger.stop()
        if self.http_sources is not None:
            await self.http_sources.stop()
        if self.fleet_pods is not None:
            await self.fleet_pods.stop()
        if self.fleet is not None:
            await self.fleet.close()
        await self.cluster.drain(2.0)
        await self.cluster.stop()
        if self.ingress_status is not None:
            await self.ingress_status.stop()
        await self.supervisor.stop()
        if self.webhook is not None:
            await self.webhook.stop()
        if self.server is not None:
            await self.server.stop()
        if self._unsubscribe is not None:
            self._unsubscribe()
        self.api.close()  # type: ignore[no-untyped-call]
        if self._own_work_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def request_stop(self) -> None:
        self._stop.set()

    async def wait_stopped(self) -> None:
        await self._stop.wait()

    @property
    def status_url(self) -> str | None:
        return self.server.url if self.server is not None else None

    # --- the config -----------------------------------------------------------------------

    async def _read_config(self, changed_from: dict[str, Any] | None = None) -> dict[str, Any]:
        """GET the config; retried with back-off (1 s doubling to 30 s) while the API server
        is unreachable or the object is missing, or, with ``changed_from``, until it changes."""
        objects = client.CustomObjectsApi(self.api)
        delay = 1.0
        o = self.options
        while True:
            try:
                body: Any = await asyncio.to_thread(
                    objects.get_namespaced_custom_object,
                    CONFIG_GROUP,
                    CONFIG_VERSION,
                    o.namespace,
                    CONFIG_PLURAL,
                    o.config,
                )
                if changed_from is None or _generation(body) != _generation(changed_from):
                    return dict(body)
            except client.ApiException as exc:
                self.metrics.api_errors.labels(str(exc.status)).inc()
                _log.warning(
                    "cannot read the HAProxyTemplateConfig; retrying",
                    config=f"{o.namespace}/{o.config}",
                    status=exc.status,
                    reason=exc.reason,
                    retry_in=delay,
                )
            except Exception as exc:  # connection refused, TLS, DNS: the server is not there
                self.metrics.api_errors.labels("unreachable").inc()
                _log.warning(
                    "API server unreachable; retrying", error=str(exc)[:300], retry_in=delay
                )
            await asyncio.sleep(delay)
            delay = min(delay * 2, 30.0)

    def _spec_of(self, body: dict[str, Any]) -> HAProxyTemplateConfigSpec | None:
        """The spec with ``--listen`` applied; None (and a published rejection) when it does
        not parse."""
        config, diags = parse_config(body, file=f"{self.options.namespace}/{self.options.config}")
        if config is None:
            self.metrics.spec_changes.labels("rejected").inc()
            self.publisher.publish(
                spec_rejection(list(diags), running=self.trigger.engine is not None)
            )
            return None
        return self._override(config.spec)

    def _override(self, spec: HAProxyTemplateConfigSpec) -> HAProxyTemplateConfigSpec:
        return with_listen(spec, self.options.listen)

    def _note_config(self, body: dict[str, Any]) -> None:
        meta = body.get("metadata") or {}
        self.cluster.uid = meta.get("uid")
        if self.cluster.generation is None:
            self.cluster.generation = _generation(body)

    def _on_config(self, body: dict[str, Any]) -> None:
        spec = self._spec_of(body)
        if spec is None or spec == self._running_spec:
            return
        generation = _generation(body)
        if dict(spec.watched_resources) == dict(self.store.watched()):
            self._spawn(self._propose(spec, generation))
        else:
            self._spawn(self._propose_with_new_watches(spec, generation))

    async def _propose(self, spec: HAProxyTemplateConfigSpec, generation: int | None) -> None:
        def accepted() -> None:
            self._running_spec = spec
            self.cluster.generation = generation
            self._follow_http(spec)

        await self.trigger.propose_spec(spec, on_accept=accepted)

    async def _propose_with_new_watches(
        self, spec: HAProxyTemplateConfigSpec, generation: int | None
    ) -> None:
        store = Store(spec.watched_resources)
        try:
            candidate = await self._watch_filled(spec, store)
        except TimeoutError:
            diag = make("E7010", Phase.SPEC, "the new watchedResources did not finish listing")
            self.publisher.publish(spec_rejection([diag], running=True))
            return

        def swap() -> None:
            old = self.watch
            if self._unsubscribe is not None:
                self._unsubscribe()
            self.store = store
            self.trigger.source = store
            self._unsubscribe = store.subscribe(self.trigger)
            self.watch = candidate
            self._running_spec = spec
            self.cluster.generation = generation
            self._follow_http(spec)
            if old is not None:
                self._spawn(self._retire(old))

        decision = await self.trigger.propose_spec(spec, view=store.snapshot(), on_accept=swap)
        if not decision.accepted:
            await candidate.stop()
            self._forget(candidate)

    async def _retire(self, watch_set: WatchSet) -> None:
        await watch_set.stop()
        self._forget(watch_set)

    # --- watch sets -----------------------------------------------------------------------

    async def _watch_filled(self, spec: HAProxyTemplateConfigSpec, store: Store) -> WatchSet:
        """A watch set for ``spec`` and ``store``, returned once ``store`` holds every watched
        collection; raises TimeoutError (the watch set stopped) when that takes too long."""
        listed = await self._fill(spec, store)
        if listed is not None:
            return self._watch_handed_over(spec, store, listed)
        return await self._watch_synced(spec, store)

    async def _fill(self, spec: HAProxyTemplateConfigSpec, store: Store) -> dict[str, int] | None:
        """Fill ``store`` with one list of our own: how many objects each collection listed,
        or None when that list failed.

        Why not wait for kopf's lists: kopf handles every listed object one by one (about
        7 ms each, 20 s for 3,000 objects), which the first render need not wait for. kopf's
        watches start after this list (:meth:`_watch_handed_over`); kopf lists again, what it
        delivers is equal to what the store holds and changes nothing, and its list being
        newer brings every change since. Only an object deleted between the two lists is
        never reported by kopf: one more list of ours once kopf has synced (the handover)
        removes it."""
        started = time.monotonic()
        try:
            counts, _ = await asyncio.to_thread(
                self._list_into, store, dict(spec.watched_resources)
            )
        except Exception as exc:
            self.metrics.api_errors.labels("list").inc()
            _log.warning(
                "initial list failed; waiting for the watches' own lists", error=str(exc)[:300]
            )
            return None
        self.metrics.resyncs.labels("initial").inc()
        _log.info("listed", seconds=round(time.monotonic() - started, 3), objects=counts)
        return counts

    def _watch_handed_over(
        self, spec: HAProxyTemplateConfigSpec, store: Store, listed: dict[str, int]
    ) -> WatchSet:
        """kopf's watches for a store that :meth:`_fill` filled (``listed``: how many objects
        it found per collection), and their handover list."""
        watch_set = self._start_watch(spec, store, expected=listed)
        self._spawn(self._handover(watch_set, store))
        return watch_set

    async def _watch_synced(self, spec: HAProxyTemplateConfigSpec, store: Store) -> WatchSet:
        """kopf's watches, once their own lists have filled ``store``."""
        watch_set = self._start_watch(spec, store)
        try:
            await self._wait_synced(watch_set)
        except TimeoutError:
            await self._retire(watch_set)
            raise
        return watch_set

    async def _handover(self, watch_set: WatchSet, store: Store) -> None:
        """Once kopf's watches have listed, list once more (see :meth:`_fill`)."""
        try:
            await self._wait_synced(watch_set)
        except (TimeoutError, RuntimeError):
            return  # the watch set failed or never synced; the periodic relist still runs
        if self._stores.get(id(watch_set)) is store:
            await self.relist("handover", store)
        # The startup burst is over: what it allocated is garbage now (see heap.py).
        await asyncio.to_thread(release_free_memory)

    def _start_watch(
        self,
        spec: HAProxyTemplateConfigSpec,
        store: Store,
        expected: dict[str, int] | None = None,
    ) -> WatchSet:
        self._watch_sets += 1
        watch_set = WatchSet(
            self.connection,
            spec.watched_resources,
            (self.options.namespace, self.options.config),
            self._deliver,
            label=f"w{self._watch_sets}",
            expected=expected,
            held=functools.partial(_held, store),
        )
        self._stores[id(watch_set)] = store
        self._sets[id(watch_set)] = watch_set
        self.metrics.watch_starts.inc()
        watch_set.start()
        return watch_set

    def _forget(self, watch_set: WatchSet) -> None:
        self._stores.pop(id(watch_set), None)
        self._sets.pop(id(watch_set), None)

    async def _wait_synced(self, watch_set: WatchSet) -> None:
        started = time.monotonic()
        while not watch_set.synced.is_set():
            if watch_set.failed is not None:
                raise RuntimeError(f"the watches stopped: {watch_set.failed!r}")
            if time.monotonic() - started > self.options.sync_timeout:
                raise TimeoutError
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(watch_set.synced.wait(), 5.0)
            if not watch_set.synced.is_set():
                _log.info(
                    "waiting for the initial lists",
                    watch=watch_set.label,
                    collections=sorted(watch_set.collections),
                    waited_s=round(time.monotonic() - started, 1),
                )
        _log.info(
            "watches synced",
            watch=watch_set.label,
            seconds=round(time.monotonic() - started, 3),
            objects={
                n: len(self._stores[id(watch_set)].collection(n)) for n in watch_set.collections
            },
        )

    def _deliver(self, watch_set: WatchSet, item: Delivery) -> None:
        store = self._stores.get(id(watch_set))
        if store is None:
            return  # a retired watch set's last words
        if item.what == "config":
            if watch_set is not self.watch:
                return  # a candidate's config events only mark it synced
            self._note_config(item.body)
            generation = _generation(item.body)
            if generation is not None and generation == self._seen_generation:
                return  # a status write, a label: the spec did not change
            if item.event == "DELETED":
                _log.warning(
                    "the HAProxyTemplateConfig was deleted; the last good config keeps serving"
                )
                return
            self._seen_generation = generation
            if not self.started:
                self._pending_config = item.body
            else:
                self._on_config(item.body)
            return
        touched = self._touched.get(id(store))
        if touched is not None and item.collection in touched:
            with contextlib.suppress(Exception):  # hostile input: apply_delivery reports it
                touched[item.collection].add(object_key(item.body))
        if not apply_delivery(store, item):
            return
        self.metrics.watched_objects.labels(item.collection).set(
            len(store.collection(item.collection))
        )

    # --- HTTP sources ---------------------------------------------------------------------

    async def _start_http_sources(self, spec: HAProxyTemplateConfigSpec) -> None:
        """First fetch of every source, then (critical ones) wait: nothing renders before."""
        sources = self._new_http_sources(spec)
        await sources.start_initial()
        await sources.wait_critical()

    def _new_http_sources(self, spec: HAProxyTemplateConfigSpec) -> HttpSources:
        sources = HttpSources.for_trigger(
            spec.http_sources,
            self.trigger,
            view=lambda: self.store.snapshot() if self.synced else None,
            publisher=self.publisher,
            metrics=self.metrics,
            secret_headers=self._secret_headers,
        )
        self.http_sources = sources
        self.cluster.http_sources = sources.status
        return sources

    def _follow_http(self, spec: HAProxyTemplateConfigSpec) -> None:
        """An adopted spec's ``httpSources`` take effect at once (:meth:`HttpSources.reconfigure`)."""
        if self.http_sources is None:
            if not spec.http_sources:
                return
            self._new_http_sources(spec.model_copy(update={"http_sources": {}}))
        assert self.http_sources is not None
        self._spawn(self.http_sources.reconfigure(spec.http_sources))

    async def _secret_headers(self, ref: SecretKeyRef) -> dict[str, str]:
        secret = await asyncio.to_thread(
            client.CoreV1Api(self.api).read_namespaced_secret, ref.name, self.options.namespace
        )
        data = {k: base64.b64decode(v).decode() for k, v in (secret.data or {}).items()}
        if ref.key is not None:
            return {"Authorization": data.get(ref.key, "")}
        return data

    # --- admission ------------------------------------------------------------------------

    def _baseline_valid(self) -> bool:
        report = self.trigger.last_report
        return report is None or report.valid

    def _admitted(self, request: dict[str, Any], decision: AdmissionDecision) -> None:
        ref = request.get("namespace"), request.get("name")
        _log.info(
            "admission " + ("allowed" if decision.allowed else "denied"),
            kind=(request.get("kind") or {}).get("kind"),
            object=f"{ref[0]}/{ref[1]}",
            operation=request.get("operation"),
            dry_run=bool(request.get("dryRun")),
            checksum=decision.checksum,
            rule_ids=list(decision.rule_ids),
        )

    # --- leadership -----------------------------------------------------------------------

    def _lead(self) -> None:
        self.cluster.active = True
        if self.ingress_status is not None:
            self.ingress_status.active = True
        if self.fleet_pods is not None:
            self.fleet_pods.lead()
        if self.started:
            self.trigger.notify(trigger="leader")

    def _follow(self) -> None:
        self.cluster.active = False
        if self.ingress_status is not None:
            self.ingress_status.active = False
        if self.fleet_pods is not None:
            self.fleet_pods.follow()

    # --- health ---------------------------------------------------------------------------

    async def _probe_api(self, every: float = 2.0) -> None:
        """Whether the API server answers: while it does not, the watches cannot be current,
        so /readyz says so (HAProxy keeps serving the last good set meanwhile)."""
        version = client.VersionApi(self.api)
        while True:
            try:
                await asyncio.to_thread(version.get_code, _request_timeout=every)
                reachable = True
            except Exception:
                reachable = False
            if reachable != self.api_reachable:
                _log.warning("API server " + ("reachable again" if reachable else "unreachable"))
                if reachable and self.synced:
                    self._spawn(self.relist("reconnect"))
            self.api_reachable = reachable
            await asyncio.sleep(every)

    async def _relist_periodically(self) -> None:
        while self.options.relist_interval > 0:
            await asyncio.sleep(self.options.relist_interval)
            if self.synced and self.api_reachable:
                await self.relist("periodic")

    async def relist(self, why: str, store: Store | None = None) -> int:
        """List every watched collection and make the store equal to what the server holds.

        kopf resumes a watch from its last resourceVersion; when that is gone (410, after a
        compaction) it lists again and carries on, but an object deleted meanwhile is never
        reported. Replacing each collection with a fresh list removes such objects (and the
        store tells the trigger what changed)."""
        store = store or self.store
        watched = dict(store.watched())
        # What the watches deliver while the list is in flight is recorded: the list may
        # predate it, and must not undo it (Store.replace's ``keep``).
        touched: dict[str, set[ObjectKey]] = {name: set() for name in watched}
        self._touched[id(store)] = touched
        try:
            _, changes = await asyncio.to_thread(self._list_into, store, watched, touched)
        except Exception as exc:
            self.metrics.api_errors.labels("relist").inc()
            _log.warning("relist failed; the watches stay as they are", error=str(exc)[:300])
            return 0
        finally:
            if self._touched.get(id(store)) is touched:
                del self._touched[id(store)]
        self.metrics.resyncs.labels(why).inc()
        _log.info("relisted", why=why, changes=changes)
        return changes

    def _list_into(
        self,
        store: Store,
        watched: dict[str, WatchedResource],
        touched: dict[str, set[ObjectKey]] | None = None,
    ) -> tuple[dict[str, int], int]:
        """List each collection and make ``store``'s equal to it, one collection at a time:
        how many objects each list held, and how many changes the store made. ``touched``
        (a relist): what the watches changed meanwhile, left alone (:meth:`relist`).

        One at a time, so that one collection's raw list (not every collection's at once) is
        in memory beside the store. Runs in a thread: preparing 10,000 objects takes about a
        second per collection, and on the event loop that would stall ``/healthz``,
        ``/metrics`` and the webhook (the store is locked for writers, and its listeners are
        thread-safe, as kopf's deliveries come from kopf's own threads too)."""
        counts: dict[str, int] = {}
        changes = 0
        for name, w in watched.items():
            relisting = touched is not None
            if relisting and not any(store is s for s in (self.store, *self._stores.values())):
                break  # its watch set was retired meanwhile
            items = self._list_all({name: w})[name]
            keep = touched.get(name, set()) if touched is not None else set()
            changes += len(store.replace(name, items, keep=keep))
            counts[name] = len(items)
            del items
            self.metrics.watched_objects.labels(name).set(len(store.collection(name)))
        return counts, changes

    def _list_all(self, watched: dict[str, WatchedResource]) -> dict[str, list[dict[str, Any]]]:
        """Every watched collection as plain dicts, one list request each.

        The raw JSON is parsed directly: the dynamic client's own objects (a wrapper per field,
        converted back to dicts) cost far more time and memory than the dicts themselves, and
        a process's resident size keeps its peak. Not paged: with a ``metadata.namespace``
        field selector on a cluster-wide list, the API server (1.34) hands out continue tokens
        that make the next pages repeat objects (measured: 1,701 items for 1,200)."""
        dyn = DynamicClient(self.api)  # type: ignore[no-untyped-call]
        out: dict[str, list[dict[str, Any]]] = {}
        for name, w in watched.items():
            resource = dyn.resources.get(api_version=w.api_version, kind=w.kind)
            query: dict[str, Any] = {}
            labels = label_selector_string(w.label_selector)
            if labels:
                query["label_selector"] = labels
            fields = field_selector_string(w)
            if fields:
                query["field_selector"] = fields
            raw = resource.get(serialize=False, **query)
            items: list[dict[str, Any]] = json.loads(raw.data).get("items") or []
            for item in items:  # list items carry no apiVersion/kind of their own
                item.setdefault("apiVersion", w.api_version)
                item.setdefault("kind", w.kind)
            out[name] = items
        return out

    def _not_ready(self) -> str | None:
        if not self.api_reachable:
            return "the API server is unreachable; the watches may be behind"
        if not self.synced:
            return "the watches have not finished their initial lists"
        if self.watch is not None and self.watch.failed is not None:
            return "the watches stopped"
        if self.fleet_pods is not None and not self.fleet_pods.synced.is_set():
            return "the HAProxy pods have not been listed yet"
        return None

    def _haproxy_running(self) -> bool:
        return self.fleet is not None or self.supervisor.running()

    def _haproxy_event(self, diag: Diagnostic) -> None:
        self.publisher.publish(
            Event(EventKind.RUNTIME, "haproxy", diagnostics=(diag,), message=diag.message)
        )

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def _held(store: Store, collection: str, body: Mapping[str, Any]) -> bool:
    """Whether ``store`` holds this object at this resourceVersion (the same version of an
    object is the same object). Called from kopf's threads; the store is locked for it."""
    try:
        version = body["metadata"]["resourceVersion"]
        entry = store.collection(collection).entry(object_key(body))
    except Exception:  # hostile input, or a collection gone meanwhile: not known
        return False
    if entry is None or not isinstance(version, str):
        return False
    meta = entry.obj.get("metadata")
    return isinstance(meta, Mapping) and meta.get("resourceVersion") == version


def _generation(body: dict[str, Any]) -> int | None:
    value = (body.get("metadata") or {}).get("generation")
    return int(value) if isinstance(value, int) else None
