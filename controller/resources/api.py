"""The read-only view of stored objects that renderers and rules consume.

Renderers and CEL rules only ever see these protocols, so the live store, an immutable
snapshot and an admission overlay (snapshot + proposed change) are interchangeable.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterator, Mapping
from typing import Any, Protocol

K8sObject = Mapping[str, Any]


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


class AmbiguousLookup(LookupError):
    """get_single() matched more than one object; the message names the collection and keys."""
