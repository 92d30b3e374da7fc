"""One watch set: kopf operators that feed one store, each run in a thread of its own.

kopf registers handlers per registry, and a registry is fixed once its operator runs, so each
set of ``watchedResources`` gets its own operators; a change of the set starts new ones and
stops the old ones only after the new ones are synced (see ``app.py``).

Why threads: when a kopf operator ends it cancels every task of its event loop, ours included.
In a loop of its own it can come and go without touching the controller's loop. Its handlers do
no work there: they hand each object to the controller's loop (``call_soon_threadsafe``), where
the store, the trigger and publication live. Order is kept, because that queue is FIFO.

What kopf is asked to do, and what not:

* Each collection gets one **event** handler, called for every listed, added, changed and
  deleted object. It writes nothing to the objects: no finalizers, no annotations, no
  progress. kopf's posting of its own Events is switched off.
* No **index** handlers. kopf gives every listed object of an indexed kind a readiness toggle
  in one operator-wide set, and each new toggle wakes every object waiting on that set: at
  10,000 objects that is quadratic, and it kept ``htc run`` at full CPU for minutes.
* So the end of kopf's initial list is found here (``_Listing``): kopf marks listed objects
  with the event type None, and the first event of another type ends the list. A collection
  has listed when it delivered as many listed objects as our own list held just before, when
  another event type arrives, or when no listed object arrived for ``quiet`` seconds. Ending a
  little early costs nothing: the handover list that follows (``app.py``) and kopf's later
  events bring the store up to date either way.
* kopf watches per kind, with one selector per kind. Two collections of one kind (TLS
  Secrets and basic-auth Secrets, say) therefore go to different operators ("layers"), so
  that each gets its own server-side selectors: one watch without a selector would stream
  every object of that kind into the process.
* Label selectors, and the field selectors the API server supports for the kind
  (``_SERVER_FIELDS``), go to the API server; the store applies every selector again either
  way.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import kopf

from controller.observability import get_logger
from controller.operator.kube import KubeConnection
from controller.resources import Store
from controller.spec import LabelSelector, WatchedResource

__all__ = [
    "CONFIG_GROUP",
    "CONFIG_PLURAL",
    "CONFIG_VERSION",
    "Delivery",
    "WatchSet",
    "apply_delivery",
    "field_selector_string",
    "label_selector_string",
    "layers",
]

_log = get_logger("controller.operator.watch")

CONFIG_GROUP = "haproxy-template.dev"
CONFIG_VERSION = "v1alpha1"
CONFIG_PLURAL = "haproxytemplateconfigs"


@dataclass(frozen=True)
class Delivery:
    """One thing a watch saw, handed to the controller's loop."""

    what: Literal["apply", "delete", "config", "listed"]
    """``listed``: kopf listed an object the store already holds as it is (only counted)."""
    collection: str
    """The collection name; empty for the config."""
    body: dict[str, Any]
    event: str | None = None
    """The raw event type: None while kopf lists, then ADDED, MODIFIED or DELETED."""


def apply_delivery(store: Store, item: Delivery) -> bool:
    """Put an object a watch saw into ``store`` (or take it out); False when the object cannot
    be stored. Watched objects are hostile input: nothing about one may stop the watches, so
    every failure is logged with the object's reference and reported as False."""
    try:
        if item.what == "apply":
            store.apply(item.collection, item.body)
        else:
            store.delete(item.collection, item.body)
    except Exception:
        meta = item.body.get("metadata") if isinstance(item.body, Mapping) else None
        ref = {k: meta.get(k) for k in ("namespace", "name")} if isinstance(meta, Mapping) else {}
        _log.warning("object could not be stored", collection=item.collection, **ref, exc_info=True)
        return False
    return True


def _group_version(api_version: str) -> tuple[str, str]:
    group, _, version = api_version.rpartition("/")
    return group, version


def label_selector_string(selector: LabelSelector | None) -> str | None:
    """A LabelSelector in the API's query syntax (``a=b,c in (d,e),!f``)."""
    if selector is None:
        return None
    parts = [f"{k}={v}" for k, v in sorted(selector.match_labels.items())]
    for expr in selector.match_expressions:
        op = expr.operator
        values = ",".join(expr.values or [])
        if op == "In":
            parts.append(f"{expr.key} in ({values})")
        elif op == "NotIn":
            parts.append(f"{expr.key} notin ({values})")
        elif op == "Exists":
            parts.append(expr.key)
        else:
            parts.append(f"!{expr.key}")
    return ",".join(parts) or None


def layers(collections: Mapping[str, WatchedResource]) -> list[dict[str, WatchedResource]]:
    """The collections split so that no kind appears twice in one part: each part is one kopf
    operator, and kopf takes one selector per kind. The first part also watches the config."""
    parts: list[dict[str, WatchedResource]] = []
    for name, watched in collections.items():
        kind = (watched.api_version, watched.kind)
        for part in parts:
            if all((w.api_version, w.kind) != kind for w in part.values()):
                part[name] = watched
                break
        else:
            parts.append({name: watched})
    return parts or [{}]


@dataclass
class _Listing:
    """How far kopf's initial list of one collection has come (see the module docstring)."""

    expected: int | None
    seen: int = 0
    done: bool = False
    last: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        self.done = self.expected == 0  # nothing to wait for

    def saw(self, event: str | None) -> None:
        if event is None:
            self.seen += 1
            self.last = time.monotonic()
            if self.expected is not None and self.seen >= self.expected:
                self.done = True
        else:
            self.done = True


class WatchSet:
    """kopf watching ``collections`` and the config object, delivering to ``deliver``.

    ``expected`` holds, per collection, how many objects our own list just found: kopf's list
    of the same collection is taken as complete when it has delivered as many."""

    def __init__(
        self,
        connection: KubeConnection,
        collections: Mapping[str, WatchedResource],
        config_ref: tuple[str, str],
        deliver: Callable[[WatchSet, Delivery], None],
        *,
        label: str = "watch",
        inactivity_timeout: float = 300.0,
        expected: Mapping[str, int] | None = None,
        quiet: float = 5.0,
        held: Callable[[str, Mapping[str, Any]], bool] | None = None,
    ) -> None:
        self.connection = connection
        self.collections = dict(collections)
        self.namespace, self.name = config_ref
        self.deliver = deliver
        self.label = label
        self.inactivity_timeout = inactivity_timeout
        self.quiet = quiet
        self.held = held
        """Called in kopf's thread: whether the store already holds this object at this
        resourceVersion. kopf lists everything our own list just stored; such an object is
        only counted, not copied, posted and compared again."""
        self.synced = asyncio.Event()
        self.failed: BaseException | None = None
        self._listings = {
            name: _Listing(None if expected is None else expected.get(name))
            for name in self.collections
        }
        self._config_seen = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._timer: asyncio.Task[None] | None = None

    # --- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        for i, part in enumerate(layers(self.collections)):
            thread = threading.Thread(
                target=self._run,
                args=(part, i == 0),
                name=f"kopf-{self.label}-{i}",
                daemon=True,
            )
            self._threads.append(thread)
            thread.start()
        self._timer = self._loop.create_task(self._watch_quiet())

    async def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._timer is not None:
            self._timer.cancel()
        for thread in self._threads:
            await asyncio.to_thread(thread.join, timeout)

    def _run(self, part: dict[str, WatchedResource], with_config: bool) -> None:
        try:
            asyncio.run(self._operator(part, with_config))
        except BaseException as exc:  # reported to the controller's loop, never lost
            self.failed = exc
            _log.exception("watch set stopped with an error", watch=self.label)

    async def _operator(self, part: dict[str, WatchedResource], with_config: bool) -> None:
        registry, settings = self._registry(part, with_config)
        await kopf.operator(
            registry=registry,
            settings=settings,
            clusterwide=True,
            standalone=True,
            stop_flag=self._stop,
        )

    # --- the end of kopf's lists ----------------------------------------------------------

    async def _watch_quiet(self) -> None:
        """Ends a collection's list that went quiet (see the module docstring)."""
        while not self.synced.is_set():
            await asyncio.sleep(min(0.5, self.quiet))
            if not self._config_seen:
                continue
            now = time.monotonic()
            for name, listing in self._listings.items():
                if not listing.done and now - listing.last >= self.quiet:
                    listing.done = True
                    _log.info(
                        "initial list taken as complete after a quiet period",
                        watch=self.label,
                        collection=name,
                        listed=listing.seen,
                        expected=listing.expected,
                    )
            self._check_synced()

    def _check_synced(self) -> None:
        if self._config_seen and all(listing.done for listing in self._listings.values()):
            self.synced.set()

    # --- handlers -------------------------------------------------------------------------

    def _post(self, item: Delivery) -> None:
        loop = self._loop
        if loop is None or loop.is_closed() or self._stop.is_set():
            return
        with contextlib.suppress(RuntimeError):  # the controller's loop is shutting down
            loop.call_soon_threadsafe(self._arrive, item)

    def _arrive(self, item: Delivery) -> None:
        if not self.synced.is_set():
            if item.what == "config":
                if not self._config_seen:
                    self._config_seen = True
                    now = time.monotonic()  # the quiet period counts from here
                    for listing in self._listings.values():
                        listing.last = max(listing.last, now)
            else:
                self._listings[item.collection].saw(item.event)
            self._check_synced()
        if item.what != "listed":
            self.deliver(self, item)

    def _registry(
        self, part: dict[str, WatchedResource], with_config: bool
    ) -> tuple[kopf.OperatorRegistry, kopf.OperatorSettings]:
        registry = kopf.OperatorRegistry()
        settings = kopf.OperatorSettings()
        settings.posting.enabled = False
        settings.watching.inactivity_timeout = self.inactivity_timeout
        settings.watching.server_timeout = 300
        settings.networking.request_timeout = 30
        # kopf keeps a task per object until it has been idle this long: short, so that the
        # startup burst's tens of thousands of tasks are gone soon after it.
        settings.queueing.idle_timeout = 0.5
        # kopf's initial list in pages: a whole list of 10,000 objects parsed at once is a peak
        # of hundreds of megabytes, and the few objects that outlive it (kopf's memory of each
        # object) keep the allocator's arenas of that peak resident for good.
        settings.watching.chunk_size = 500
        connection = self.connection

        @kopf.on.login(registry=registry)
        def login(**_: Any) -> kopf.ConnectionInfo:
            return connection.kopf_credentials()

        for name, watched in part.items():
            group, version = _group_version(watched.api_version)
            selector = (watched.api_version, watched.kind)
            labels = label_selector_string(watched.label_selector)
            if labels:
                settings.watching.label_selectors[selector] = labels
            fields = field_selector_string(watched)
            if fields:
                settings.watching.field_selectors[selector] = fields
            self._feed(registry, group, version, watched.kind, name)

        if with_config:
            config = (f"{CONFIG_GROUP}/{CONFIG_VERSION}", CONFIG_PLURAL)
            settings.watching.field_selectors[config] = (
                f"metadata.name={self.name},metadata.namespace={self.namespace}"
            )

            @kopf.on.event(
                group=CONFIG_GROUP,
                version=CONFIG_VERSION,
                plural=CONFIG_PLURAL,
                registry=registry,
                id="htc-config",
            )
            async def on_config(type: str | None, body: kopf.Body, **_: Any) -> None:
                self._post(Delivery("config", "", _plain(body), event=type))

        return registry, settings

    def _feed(
        self, registry: kopf.OperatorRegistry, group: str, version: str, kind: str, name: str
    ) -> None:
        # A coroutine, not a plain function: kopf runs a plain handler in its thread pool, one
        # hop per object and event. This only copies the body and posts it to the controller's
        # loop, which never blocks kopf's own.
        held = self.held

        async def event(type: str | None, body: kopf.Body, **_: Any) -> None:
            if type is None and held is not None and held(name, _plain(body)):
                self._post(Delivery("listed", name, {}))
                return
            what: Literal["apply", "delete"] = "delete" if type == "DELETED" else "apply"
            self._post(Delivery(what, name, _plain(body), event=type))

        kopf.on.event(
            group=group, version=version, kind=kind, registry=registry, id=f"feed-{name}"
        )(event)


def _plain(body: kopf.Body) -> dict[str, Any]:
    """The raw object as plain dicts (kopf's Body is a read-only view over it)."""
    raw = getattr(body, "_src", None)
    return dict(raw) if isinstance(raw, Mapping) else {k: body[k] for k in body}


# Fields every kind supports in a server-side fieldSelector, and those a few built-in kinds add
# (CRDs support only what they declare). The others are left to the store's client-side match.
_SERVER_FIELDS = ("metadata.name", "metadata.namespace")
_KIND_FIELDS: dict[tuple[str, str], tuple[str, ...]] = {
    ("v1", "Secret"): ("type",),
    ("v1", "Namespace"): ("status.phase",),
    ("v1", "Node"): ("spec.unschedulable",),
    ("v1", "Pod"): (
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "status.phase",
        "status.podIP",
    ),
}


def field_selector_string(watched: WatchedResource) -> str | None:
    if not watched.field_selector:
        return None
    known = _SERVER_FIELDS + _KIND_FIELDS.get((watched.api_version, watched.kind), ())
    terms = [t.strip() for t in watched.field_selector.split(",")]
    server = [t for t in terms if t.replace("!=", "=").split("=", 1)[0].strip() in known]
    return ",".join(server) or None
