"""The store: every watched object, indexed, with immutable snapshots and a change feed.

Adapters (kopf handlers, the directory watcher, ``htc render``) write; renders read a
:class:`Snapshot` so that a render sees one consistent point in time however long it takes.
Nothing here needs asyncio or kopf: writes are plain calls guarded by a re-entrant lock
(kopf may run sync handlers in threads), and listeners are plain callables invoked in order
while the lock is held, so every listener sees changes in version order. A listener that
needs the event loop must hop to it itself (``loop.call_soon_threadsafe``).
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from controller.diagnostics import Diagnostic
from controller.observability import get_logger
from controller.resources.api import (
    Entry,
    K8sObject,
    ObjectKey,
    UnknownCollection,
)
from controller.resources.checks import check_paths
from controller.resources.collection import (
    CollectionConfig,
    CollectionState,
    CollectionViewBase,
    StateView,
    normalise_keys,
    object_key,
)
from controller.spec import HAProxyTemplateConfig, HAProxyTemplateConfigSpec, WatchedResource

_log = get_logger("controller.resources")

ChangeOp = Literal["add", "update", "delete"]


@dataclass(frozen=True, slots=True)
class Change:
    """One stored object added, updated or deleted; ``version`` is the store's after it."""

    op: ChangeOp
    collection: str
    key: ObjectKey
    new: K8sObject | None
    old: K8sObject | None
    version: int = 0
    diagnostics: tuple[Diagnostic, ...] = ()
    """Warnings about the new object (e.g. W8011, an index field it lacks)."""


Listener = Callable[[Change], None]


class StoreConfigError(ValueError):
    """The collections cannot be stored as configured; ``diagnostics`` say why (E8010)."""

    def __init__(self, diagnostics: Sequence[Diagnostic]) -> None:
        self.diagnostics = list(diagnostics)
        super().__init__("; ".join(d.message for d in self.diagnostics))


def _unknown(name: str, known: Iterable[str]) -> UnknownCollection:
    names = ", ".join(sorted(known)) or "none"
    return UnknownCollection(f"no watched collection named {name!r} (defined: {names})")


class Snapshot(Mapping[str, StateView]):
    """All collections at one store version. Never changes; cheap to take, cheap to drop.

    It is a ``Mapping`` of collection name → view, so templates can write
    ``resources.ingresses`` or ``resources['ingresses']``.
    """

    __slots__ = ("_configs", "_states", "version")

    def __init__(
        self,
        version: int,
        configs: Mapping[str, CollectionConfig],
        states: Mapping[str, CollectionState],
    ) -> None:
        self.version = version
        self._configs = configs
        self._states = states

    def collection(self, name: str) -> StateView:
        try:
            return StateView(self._configs[name], self._states[name])
        except KeyError:
            raise _unknown(name, self._configs) from None

    def names(self) -> builtins.list[str]:
        return sorted(self._configs)

    def __getitem__(self, name: str) -> StateView:
        return self.collection(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._configs)

    def __repr__(self) -> str:
        return f"<Snapshot v{self.version} {self.names()}>"


class LiveCollectionView(CollectionViewBase):
    """Reads whatever the store holds at call time. Renders should use snapshots instead."""

    __slots__ = ("_store", "name")

    def __init__(self, store: Store, name: str) -> None:
        self._store = store
        self.name = name

    def _parts(self) -> tuple[CollectionConfig, CollectionState]:
        return self._store._config(self.name), self._store._state(self.name)

    @property
    def index_by(self) -> tuple[str, ...]:
        return self._store._config(self.name).index_by

    def entries(self, *keys: str) -> builtins.list[Entry]:
        with self._store._lock:
            config, state = self._parts()
            return state.prefix(normalise_keys(self.name, config.index_by, keys))

    def entry(self, key: ObjectKey) -> Entry | None:
        with self._store._lock:
            return self._store._state(self.name).by_key.get(key)

    def prepare(self, obj: Mapping[str, Any]) -> Entry:
        return self._store._config(self.name).prepare(obj)[0]

    def __len__(self) -> int:
        return len(self._store._state(self.name).by_key)


class Store(Mapping[str, LiveCollectionView]):
    """Collections keyed as in ``watchedResources``; see the module docstring for threading."""

    def __init__(self, collections: Mapping[str, WatchedResource]) -> None:
        self._lock = threading.RLock()
        self._configs: dict[str, CollectionConfig] = {}
        self._states: dict[str, CollectionState] = {}
        self._problems: dict[tuple[str, ObjectKey], tuple[Diagnostic, ...]] = {}
        self._listeners: tuple[Listener, ...] = ()
        self._version = 0
        self._configs = self._configure(collections)
        self._states = {name: CollectionState.empty() for name in self._configs}

    @classmethod
    def from_spec(cls, spec: HAProxyTemplateConfig | HAProxyTemplateConfigSpec) -> Store:
        if isinstance(spec, HAProxyTemplateConfig):
            spec = spec.spec
        return cls(spec.watched_resources)

    def _configure(self, collections: Mapping[str, WatchedResource]) -> dict[str, CollectionConfig]:
        problems = check_paths(collections)
        if problems:
            raise StoreConfigError(problems)
        return {name: CollectionConfig.compile(name, w) for name, w in collections.items()}

    # --- reading ---------------------------------------------------------------------------

    @property
    def version(self) -> int:
        """Bumped once per change; equal versions mean equal contents."""
        return self._version

    def snapshot(self) -> Snapshot:
        with self._lock:
            for state in self._states.values():
                state.shared = True
            return Snapshot(self._version, dict(self._configs), dict(self._states))

    def collection(self, name: str) -> LiveCollectionView:
        self._config(name)
        return LiveCollectionView(self, name)

    def names(self) -> builtins.list[str]:
        return sorted(self._configs)

    def watched(self) -> dict[str, WatchedResource]:
        """The collection definitions the store was configured with."""
        return {name: c.watched for name, c in self._configs.items()}

    def diagnostics(self) -> builtins.list[Diagnostic]:
        """Current warnings about stored objects, in (collection, key) order."""
        with self._lock:
            return [d for key in sorted(self._problems) for d in self._problems[key]]

    def object_diagnostics(self) -> dict[tuple[str, ObjectKey], tuple[Diagnostic, ...]]:
        """The same warnings by (collection, key), for adapters that know where objects came
        from and can add a file and line."""
        with self._lock:
            return dict(self._problems)

    def __getitem__(self, name: str) -> LiveCollectionView:
        return self.collection(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._configs)

    def _config(self, name: str) -> CollectionConfig:
        try:
            return self._configs[name]
        except KeyError:
            raise _unknown(name, self._configs) from None

    def _state(self, name: str) -> CollectionState:
        return self._states[name]

    def _writable(self, name: str) -> CollectionState:
        state = self._states[name]
        if state.shared:
            state = self._states[name] = state.copy()
        return state

    # --- writing ---------------------------------------------------------------------------

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener`` for every change from now on; returns the unsubscribe function."""
        with self._lock:
            self._listeners = (*self._listeners, listener)

        def unsubscribe() -> None:
            with self._lock:
                self._listeners = tuple(x for x in self._listeners if x is not listener)

        return unsubscribe

    def apply(self, collection: str, obj: Mapping[str, Any]) -> Change | None:
        """Add or update ``obj``; None when the stored object is already equal after stripping.

        Raises InvalidObject when ``obj`` has no ``metadata.name``.
        """
        config = self._config(collection)
        entry, diags = config.prepare(obj)  # outside the lock: freezing is the costly part
        with self._lock:
            if self._config(collection) is not config:  # reconfigured meanwhile
                entry, diags = self._configs[collection].prepare(obj)
            return self._put(collection, entry, diags)

    def delete(
        self, collection: str, obj_or_key: Mapping[str, Any] | ObjectKey | str
    ) -> Change | None:
        """Remove by object, (namespace, name) or "namespace/name"; None if it was not stored."""
        self._config(collection)
        if isinstance(obj_or_key, tuple):
            key = obj_or_key
        elif isinstance(obj_or_key, str):
            ns, _, name = obj_or_key.rpartition("/")
            key = (ns, name)
        else:
            key = object_key(obj_or_key)
        with self._lock:
            return self._remove(collection, key)

    def replace(
        self,
        collection: str,
        objs: Iterable[Mapping[str, Any]],
        *,
        keep: Container[ObjectKey] = (),
    ) -> builtins.list[Change]:
        """Make the collection hold exactly ``objs`` (a full resync): adds and updates in input
        order, then deletes of everything else in key order. Later duplicates win.

        ``keep``: keys whose stored state (held or absent) is left alone. A watch that
        delivered a change of that object while the list was in flight knows better than the
        list, which may predate the change: overwriting it would lose the change for good."""
        objs = list(objs)
        config = self._config(collection)
        prepared: dict[ObjectKey, tuple[Entry, tuple[Diagnostic, ...]]] = {}
        for obj in objs:
            entry, diags = config.prepare(obj)
            prepared.pop(entry.key, None)
            prepared[entry.key] = (entry, diags)
        changes: builtins.list[Change] = []
        with self._lock:
            if self._config(collection) is not config:  # reconfigured meanwhile
                return self.replace(collection, objs, keep=keep)
            for entry, diags in prepared.values():
                if entry.key in keep:
                    continue
                change = self._put(collection, entry, diags)
                if change is not None:
                    changes.append(change)
            held = self._state(collection).by_key.keys() - prepared.keys()
            gone = sorted(key for key in held if key not in keep)
            for key in gone:
                change = self._remove(collection, key)
                if change is not None:
                    changes.append(change)
        return changes

    def reconfigure(self, collections: Mapping[str, WatchedResource]) -> builtins.list[Change]:
        """Switch to new collection definitions, keeping the objects of unchanged ones.

        A removed collection, or one whose definition changed (its index, ignored fields or
        selectors), is emptied with delete changes; the adapter then refills changed ones with
        :meth:`replace`, because only it still has the unstripped originals.
        Raises StoreConfigError (and changes nothing) when a path is invalid.
        """
        configs = self._configure(collections)
        changes: builtins.list[Change] = []
        with self._lock:
            for name, old in sorted(self._configs.items()):
                new = configs.get(name)
                if new is not None and new.watched == old.watched:
                    continue
                for key in sorted(self._state(name).by_key):
                    change = self._remove(name, key)
                    if change is not None:
                        changes.append(change)
                del self._states[name]
            for name in configs:
                self._states.setdefault(name, CollectionState.empty())
            self._configs = configs
        return changes

    def _put(self, collection: str, entry: Entry, diags: tuple[Diagnostic, ...]) -> Change | None:
        current = self._state(collection).by_key.get(entry.key)
        if current is not None and current.obj == entry.obj:
            return None
        self._writable(collection).put(entry)
        if diags:
            self._problems[(collection, entry.key)] = diags
        else:
            self._problems.pop((collection, entry.key), None)
        op: ChangeOp = "add" if current is None else "update"
        old = current.obj if current is not None else None
        return self._emit(op, collection, entry.key, entry.obj, old, diags)

    def _remove(self, collection: str, key: ObjectKey) -> Change | None:
        if key not in self._state(collection).by_key:
            return None
        old = self._writable(collection).remove(key)
        self._problems.pop((collection, key), None)
        assert old is not None
        return self._emit("delete", collection, key, None, old.obj, ())

    def _emit(
        self,
        op: ChangeOp,
        collection: str,
        key: ObjectKey,
        new: K8sObject | None,
        old: K8sObject | None,
        diags: tuple[Diagnostic, ...],
    ) -> Change:
        self._version += 1
        change = Change(op, collection, key, new, old, self._version, diags)
        for listener in self._listeners:
            try:
                listener(change)
            except Exception:
                # A broken listener must not undo a stored change or starve the others.
                _log.exception("store listener failed", listener=repr(listener), op=op, key=key)
        return change
