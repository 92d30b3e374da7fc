"""A store view with one proposed change applied, without copying anything.

Admission asks "what would the configuration be if this object were created, updated or
deleted?" and ``htc`` asks the same for a file on disk. An overlay answers by filtering and
splicing the base's sorted entries at lookup time: only the touched collection pays, and only
for the entries a lookup returns. Overlays stack (an overlay's base may be an overlay).

Give it a :class:`~controller.resources.store.Snapshot` as base: over the live store the
overlay would follow later changes, which is rarely what a verdict should be based on.
"""

from __future__ import annotations

import builtins
from bisect import bisect_left
from collections.abc import Iterator, Mapping
from typing import Any, Literal

from controller.resources.api import (
    Entry,
    IndexedCollectionView,
    IndexedStoreView,
    ObjectKey,
)
from controller.resources.collection import CollectionViewBase, normalise_keys, object_key

OverlayOp = Literal["create", "update", "delete"]


class Overlay(Mapping[str, IndexedCollectionView]):
    """``base`` as it would be after ``op`` on ``obj`` in ``collection``.

    ``create`` and ``update`` both mean "this object, with this identity, now looks like
    ``obj``" (a create of an existing object replaces it, an update of a missing one adds it);
    ``delete`` takes the object or its (namespace, name) and removes it if present. The new
    object is stripped and frozen exactly as the store would store it.
    """

    __slots__ = ("_base", "_view", "collection_name", "op")

    def __init__(
        self,
        base: IndexedStoreView,
        collection: str,
        op: OverlayOp,
        obj: Mapping[str, Any] | ObjectKey,
    ) -> None:
        if op not in ("create", "update", "delete"):
            raise ValueError(f"overlay op must be create, update or delete, not {op!r}")
        self._base = base
        self.collection_name = collection
        self.op = op
        under = base.collection(collection)  # raises UnknownCollection for a bad name
        if op == "delete":
            key = obj if isinstance(obj, tuple) else object_key(obj)
            self._view = _OverlayCollection(under, key, None)
        else:
            if isinstance(obj, tuple):
                raise TypeError(f"overlay op {op!r} needs the object, not only its key")
            entry = under.prepare(obj)
            self._view = _OverlayCollection(under, entry.key, entry)

    def collection(self, name: str) -> IndexedCollectionView:
        if name == self.collection_name:
            return self._view
        return self._base.collection(name)

    def names(self) -> builtins.list[str]:
        return self._base.names()

    def __getitem__(self, name: str) -> IndexedCollectionView:
        return self.collection(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def __repr__(self) -> str:
        return f"<Overlay {self.op} {self.collection_name}/{self._view.key} over {self._base!r}>"


class _OverlayCollection(CollectionViewBase):
    """The base collection minus ``key``, plus ``entry`` when given."""

    __slots__ = ("_base", "_entry", "key", "name")

    def __init__(self, base: IndexedCollectionView, key: ObjectKey, entry: Entry | None) -> None:
        self.name = base.name
        self._base = base
        self.key = key
        self._entry = entry

    @property
    def index_by(self) -> tuple[str, ...]:
        return self._base.index_by

    def entries(self, *keys: str) -> builtins.list[Entry]:
        prefix = normalise_keys(self.name, self.index_by, keys)
        k = len(prefix)
        found = self._base.entries(*keys)
        old = self._base.entry(self.key)
        if old is not None and old.index_key[:k] == prefix:
            del found[bisect_left(found, (old.index_key, old.key))]
        new = self._entry
        if new is not None and new.index_key[:k] == prefix:
            found.insert(bisect_left(found, (new.index_key, new.key)), new)
        return found

    def entry(self, key: ObjectKey) -> Entry | None:
        if key == self.key:
            return self._entry
        return self._base.entry(key)

    def prepare(self, obj: Mapping[str, Any]) -> Entry:
        return self._base.prepare(obj)

    def __len__(self) -> int:
        had = self._base.get(self.key) is not None
        return len(self._base) - had + (self._entry is not None)
