"""The read-only view of stored objects that renderers and rules consume.

Renderers and CEL rules only ever see these protocols, so the live store, an immutable
snapshot and an admission overlay (snapshot + proposed change) are interchangeable.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple, Protocol

K8sObject = Mapping[str, Any]

ObjectKey = tuple[str, str]
"""An object's identity inside its collection: (namespace, name); namespace is "" when the
object is cluster-scoped. Distinct from the index key, which need not be unique."""

IndexKey = tuple[str, ...]
"""The values of a collection's ``indexBy`` fields, as strings, in order."""


class Entry(NamedTuple):
    """One stored object with its keys; collections keep these sorted by (index_key, key)."""

    index_key: IndexKey
    key: ObjectKey
    obj: K8sObject


class CollectionView(Protocol):
    """One watched collection (e.g. ``ingresses``)."""

    name: str

    def list(self) -> builtins.list[K8sObject]:
        """Every object, in a deterministic order (by index key)."""
        ...

    def fetch(self, *keys: str) -> builtins.list[K8sObject]:
        """Objects whose index key starts with ``keys`` (all of them when no key is given)."""
        ...

    def get_single(self, *keys: str) -> K8sObject | None:
        """The one object matching ``keys``; None if none; raises AmbiguousLookup if several."""
        ...

    def __len__(self) -> int: ...


class StoreView(Protocol):
    """All collections at one point in time."""

    def collection(self, name: str) -> CollectionView: ...

    def names(self) -> list[str]: ...

    def __iter__(self) -> Iterator[str]: ...


class IndexedCollectionView(CollectionView, Protocol):
    """A collection view that exposes its ordering, so overlays can splice into it cheaply.

    The store, its snapshots and overlays implement it; an overlay needs it from its base.
    """

    @property
    def index_by(self) -> tuple[str, ...]:
        """The ``indexBy`` field paths, as configured."""
        ...

    def entries(self, *keys: str) -> builtins.list[Entry]:
        """Like fetch(), but with each object's index key and identity, in the same order.

        Returns a new list that the caller may change.
        """
        ...

    def entry(self, key: ObjectKey) -> Entry | None:
        """The entry with this identity (namespace, name), whatever its index key."""
        ...

    def get(self, key: ObjectKey) -> K8sObject | None:
        """The object with this identity (namespace, name), whatever its index key."""
        ...

    def prepare(self, obj: Mapping[str, Any]) -> Entry:
        """What storing ``obj`` would store: ignoreFields stripped, frozen, keys computed."""
        ...


class IndexedStoreView(StoreView, Protocol):
    def collection(self, name: str) -> IndexedCollectionView: ...


class AmbiguousLookup(LookupError):
    """get_single() matched more than one object; the message names the collection and keys."""


class UnknownCollection(KeyError):
    """A collection name that the configuration does not define; the message lists the known ones.

    A ``KeyError`` so that views behave as ``Mapping``s (``in``, ``.get()``) and Jinja2 turns
    ``resources.typo`` into an undefined-value error naming the attribute.
    """

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class TooManyKeys(LookupError):
    """A lookup passed more keys than the collection's ``indexBy`` has fields."""
