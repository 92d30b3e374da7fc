"""One watch set: a kopf operator that feeds one store, run in a thread of its own.

kopf registers handlers per registry, and a registry is fixed once its operator runs, so each
set of ``watchedResources`` gets its own registry and operator; a change of the set starts a
new one and stops the old one only after the new one is synced (see ``app.py``).

Why a thread: when a kopf operator ends it cancels every task of its event loop, ours included.
In a loop of its own it can come and go without touching the controller's loop. Its handlers do
no work there: they hand each object to the controller's loop (``call_soon_threadsafe``), where
the store, the trigger and publication live. Order is kept, because that queue is FIFO.

What kopf is asked to do, and what not:

* Each collection gets an **index** handler (called for every listed, added and changed object,
  and, by kopf's own rule, for every listed object *before* any other handler runs) and an
  **event** handler (for deletions). Neither writes anything to the objects: no finalizers, no
  annotations, no progress. kopf's posting of its own Events is switched off.
* Our HAProxyTemplateConfig is watched with an event handler too. Because kopf holds every
  non-index handler until every index is filled, the first config event of a watch set proves
  that every collection has finished its initial list: that is the set's ``synced`` moment.
* Label and field selectors go to the API server (``labelSelector``/``fieldSelector``) when one
  collection alone watches that kind; the store applies every selector again either way.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
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
]

_log = get_logger("controller.operator.watch")

CONFIG_GROUP = "haproxy-template.dev"
CONFIG_VERSION = "v1alpha1"
CONFIG_PLURAL = "haproxytemplateconfigs"


@dataclass(frozen=True)
class Delivery:
    """One thing a watch saw, handed to the controller's loop."""

    what: Literal["apply", "delete", "config"]
    collection: str
    """The collection name; empty for the config."""
    body: dict[str, Any]
    event: str | None = None
    """The raw event type for the config (None while listing, ADDED, MODIFIED, DELETED)."""


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


class WatchSet:
    """kopf watching ``collections`` and the config object, delivering to ``deliver``."""

    def __init__(
        self,
        connection: KubeConnection,
        collections: Mapping[str, WatchedResource],
        config_ref: tuple[str, str],
        deliver: Callable[[WatchSet, Delivery], None],
        *,
        label: str = "watch",
        inactivity_timeout: float = 300.0,
    ) -> None:
        self.connection = connection
        self.collections = dict(collections)
        self.namespace, self.name = config_ref
        self.deliver = deliver
        self.label = label
        self.inactivity_timeout = inactivity_timeout
        self.synced = asyncio.Event()
        self.failed: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # --- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._thread = threading.Thread(target=self._run, name=f"kopf-{self.label}", daemon=True)
        self._thread.start()

    async def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None:
            await asyncio.to_thread(thread.join, timeout)

    def _run(self) -> None:
        try:
            asyncio.run(self._operator())
        except BaseException as exc:  # reported to the controller's loop, never lost
            self.failed = exc
            _log.exception("watch set stopped with an error", watch=self.label)

    async def _operator(self) -> None:
        registry, settings = self._registry()
        await kopf.operator(
            registry=registry,
            settings=settings,
            clusterwide=True,
            standalone=True,
            stop_flag=self._stop,
        )

    # --- handlers -------------------------------------------------------------------------

    def _post(self, item: Delivery) -> None:
        loop = self._loop
        if loop is None or loop.is_closed() or self._stop.is_set():
            return
        with contextlib.suppress(RuntimeError):  # the controller's loop is shutting down
            loop.call_soon_threadsafe(self._arrive, item)

    def _arrive(self, item: Delivery) -> None:
        if item.what == "config" and not self.synced.is_set():
            self.synced.set()
        self.deliver(self, item)

    def _registry(self) -> tuple[kopf.OperatorRegistry, kopf.OperatorSettings]:
        registry = kopf.OperatorRegistry()
        settings = kopf.OperatorSettings()
        settings.posting.enabled = False
        settings.watching.inactivity_timeout = self.inactivity_timeout
        settings.watching.server_timeout = 300
        settings.networking.request_timeout = 30
        connection = self.connection

        @kopf.on.login(registry=registry)
        def login(**_: Any) -> kopf.ConnectionInfo:
            return connection.kopf_credentials()

        per_kind: dict[tuple[str, str, str], list[str]] = {}
        for name, watched in self.collections.items():
            group, version = _group_version(watched.api_version)
            per_kind.setdefault((group, version, watched.kind), []).append(name)

        for (group, version, kind), names in per_kind.items():
            selector = (f"{group}/{version}" if group else version, kind)
            if len(names) == 1:
                watched = self.collections[names[0]]
                labels = label_selector_string(watched.label_selector)
                if labels:
                    settings.watching.label_selectors[selector] = labels
                fields = field_selector_string(watched)
                if fields:
                    settings.watching.field_selectors[selector] = fields
            self._feed(registry, group, version, kind, tuple(names))

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
        self,
        registry: kopf.OperatorRegistry,
        group: str,
        version: str,
        kind: str,
        names: tuple[str, ...],
    ) -> None:
        # Coroutines, not plain functions: kopf runs a plain handler in its thread pool, one
        # hop per object and event. These only copy the body and post it to the controller's
        # loop, which never blocks kopf's own.
        async def index(body: kopf.Body, **_: Any) -> None:
            obj = _plain(body)
            for name in names:
                self._post(Delivery("apply", name, obj))

        async def event(type: str | None, body: kopf.Body, **_: Any) -> None:
            if type == "DELETED":
                obj = _plain(body)
                for name in names:
                    self._post(Delivery("delete", name, obj))

        ident = f"{group or 'core'}.{version}.{kind}"
        kopf.index(group=group, version=version, kind=kind, registry=registry, id=f"feed-{ident}")(
            index
        )
        kopf.on.event(
            group=group, version=version, kind=kind, registry=registry, id=f"gone-{ident}"
        )(event)


def _plain(body: kopf.Body) -> dict[str, Any]:
    """The raw object as plain dicts (kopf's Body is a read-only view over it)."""
    raw = getattr(body, "_src", None)
    return dict(raw) if isinstance(raw, Mapping) else {k: body[k] for k in body}


# Fields every kind supports in a server-side fieldSelector; the others are kind-specific (and
# CRDs support only what they declare), so they are left to the store's client-side match.
_SERVER_FIELDS = ("metadata.name", "metadata.namespace")


def field_selector_string(watched: WatchedResource) -> str | None:
    if not watched.field_selector:
        return None
    terms = [t.strip() for t in watched.field_selector.split(",")]
    server = [t for t in terms if t.replace("!=", "=").split("=", 1)[0].strip() in _SERVER_FIELDS]
    return ",".join(server) or None
