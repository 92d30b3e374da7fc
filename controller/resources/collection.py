"""One collection: its compiled configuration, its copy-on-write state, and a read view.

State is a dict (identity → entry) plus a list of entries sorted by (index key, identity).
Prefix lookups bisect the list, so ``fetch(namespace, name)`` is O(log n) and ``fetch(ns)``
is O(log n + matches). The store mutates a state in place until a snapshot shares it; from
then on the state is frozen and the next change copies it first. Taking a snapshot therefore
costs O(collections), and only the first change per collection after a snapshot pays an
O(objects) copy (two C-level memcpy-like copies; see ``bench/store_memory.py``).
"""

from __future__ import annotations

import builtins
from bisect import bisect_left
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from controller.diagnostics import Diagnostic, ObjectRef, Phase, make
from controller.resources.api import (
    AmbiguousLookup,
    Entry,
    IndexKey,
    K8sObject,
    ObjectKey,
    TooManyKeys,
)
from controller.resources.frozen import freeze
from controller.resources.paths import (
    MISSING,
    FieldPath,
    StripTree,
    format_path,
    lookup,
    parse_path,
    scalar_text,
    strip_tree,
)
from controller.spec import WatchedResource

_NAMESPACE_PATH: FieldPath = ("metadata", "namespace")


class InvalidObject(ValueError):
    """An object without ``metadata.name`` cannot be stored; it has no identity."""


def object_key(obj: Mapping[str, Any]) -> ObjectKey:
    """(namespace, name) from metadata; raises :class:`InvalidObject` without a name."""
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    name = meta.get("name") if isinstance(meta, Mapping) else None
    if name is not None and not isinstance(name, str):
        raise InvalidObject(f"metadata.name must be a string, not {name!r}")
    if not name:
        raise InvalidObject("object has no metadata.name, so it has no identity in the store")
    ns = meta.get("namespace") if isinstance(meta, Mapping) else None
    return (ns if isinstance(ns, str) else "", name)


def object_ref(obj: Mapping[str, Any]) -> ObjectRef:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    return ObjectRef(
        api_version=obj.get("apiVersion") if isinstance(obj.get("apiVersion"), str) else None,
        kind=obj.get("kind") if isinstance(obj.get("kind"), str) else None,
        namespace=meta.get("namespace") if isinstance(meta.get("namespace"), str) else None,
        name=meta.get("name") if isinstance(meta.get("name"), str) else None,
    )


@dataclass(frozen=True, slots=True)
class CollectionConfig:
    """A watched collection's paths, parsed once (parse errors surface at configuration)."""

    name: str
    watched: WatchedResource
    index_paths: tuple[FieldPath, ...]
    strip: StripTree

    @classmethod
    def compile(cls, name: str, watched: WatchedResource) -> CollectionConfig:
        """Raises FieldPathError (see :func:`controller.resources.checks.check_watched`)."""
        index_paths = tuple(parse_path(p) for p in watched.index_by)
        strip = strip_tree([parse_path(p) for p in watched.ignore_fields])
        return cls(name, watched, index_paths, strip)

    @property
    def index_by(self) -> tuple[str, ...]:
        return tuple(self.watched.index_by)

    def prepare(self, obj: Mapping[str, Any]) -> tuple[Entry, tuple[Diagnostic, ...]]:
        """Strip, freeze and key ``obj``; warnings for index fields it lacks.

        An object that lacks an index field is still stored, under "" for that field: dropping
        it would hide it from every template, which is worse than a visible warning. An absent
        ``metadata.namespace`` is not warned about: that is how cluster-scoped objects look.
        """
        key = object_key(obj)
        frozen = freeze(obj, self.strip)
        parts: list[str] = []
        problems: list[str] = []
        for path in self.index_paths:
            value = lookup(frozen, path)
            text = None if value is MISSING or value is None else scalar_text(value)
            if text is None:
                if value is MISSING or value is None:
                    if path != _NAMESPACE_PATH:
                        problems.append(f"{format_path(path)} is missing")
                else:
                    problems.append(
                        f"{format_path(path)} is a {type(value).__name__}, not a scalar"
                    )
                text = ""
            parts.append(text)
        diags: tuple[Diagnostic, ...] = ()
        if problems:
            diags = (
                make(
                    "W8011",
                    Phase.SPEC,
                    f"collection {self.name!r}: {', '.join(problems)} on "
                    f'{_display(key)}; it is indexed under "" for that field',
                    object=object_ref(obj),
                ),
            )
        index = tuple(parts)
        if index == key:
            index = key  # indexed by namespace and name (the default): one tuple, not two
        return Entry(index, key, frozen), diags


_OBJ = attrgetter("obj")


def _display(key: ObjectKey) -> str:
    return f"{key[0]}/{key[1]}" if key[0] else key[1]


class CollectionState:
    """The objects of one collection; mutable until ``shared`` is set, then never again."""

    __slots__ = ("_exact", "_objects", "by_key", "order", "shared")

    def __init__(self, by_key: dict[ObjectKey, Entry], order: list[Entry]) -> None:
        self.by_key = by_key
        self.order = order
        self.shared = False
        self._objects: list[K8sObject] | None = None
        """The objects in order, made on the first :meth:`objects` of a shared state: a
        render asks for a collection's list several times (the quickstart: four times for
        the Ingresses), and the collections that did not change are the same state in the
        next render. Each list made afresh reads every entry, and then every object, of a
        collection spread over the whole heap."""
        self._exact: dict[IndexKey, Entry | list[Entry]] | None = None
        """Entries by their whole index key, built on the first full-key lookup of a shared
        state (which never changes again): templates look objects up by their whole key a
        thousand times per render (``get_single(namespace, name)``). A key of one entry
        (nearly all) maps to the entry itself (see :func:`_by_whole_key`)."""

    @classmethod
    def empty(cls) -> CollectionState:
        return cls({}, [])

    def copy(self) -> CollectionState:
        """A writable copy. The whole-key table comes along when this state has one and is
        kept up to date by :meth:`put` and :meth:`remove`: after one change at 10,000
        objects, copying it in C costs a few hundredths of the Python loop that builds it
        again on the next render's first lookup."""
        state = CollectionState(dict(self.by_key), list(self.order))
        if self._exact is not None:
            state._exact = dict(self._exact)
        return state

    def put(self, entry: Entry) -> Entry | None:
        """Insert or replace by identity; returns the replaced entry."""
        assert not self.shared, "a shared collection state must be copied before writing"
        old = self.by_key.get(entry.key)
        if old is not None:
            del self.order[self._position(old)]
        self.by_key[entry.key] = entry
        self.order.insert(bisect_left(self.order, (entry.index_key, entry.key)), entry)
        exact = self._exact
        if exact is not None:
            if old is not None:
                _unlist(exact, old)
            _enlist(exact, entry)
        return old

    def remove(self, key: ObjectKey) -> Entry | None:
        assert not self.shared, "a shared collection state must be copied before writing"
        old = self.by_key.pop(key, None)
        if old is not None:
            del self.order[self._position(old)]
            if self._exact is not None:
                _unlist(self._exact, old)
        return old

    def _position(self, entry: Entry) -> int:
        pos = bisect_left(self.order, (entry.index_key, entry.key))
        assert self.order[pos].key == entry.key
        return pos

    def objects(self) -> list[K8sObject]:
        """The objects in order: one list for all callers once this state is shared (then
        the caller must not change it), a new one each time before."""
        if not self.shared:
            return list(map(_OBJ, self.order))
        objects = self._objects
        if objects is None:
            objects = self._objects = list(map(_OBJ, self.order))
        return objects

    def by_whole_key(self) -> dict[IndexKey, Entry | list[Entry]] | None:
        """The entries by whole index key (see ``_exact``), once this state is shared; else
        None. The caller must not change it."""
        if not self.shared:
            return None
        exact = self._exact
        if exact is None:
            exact = self._exact = _by_whole_key(self.order)
        return exact

    def whole(self, key: IndexKey) -> Sequence[Entry] | None:
        """The entries whose whole index key is ``key``, in order, as this state keeps them
        (the caller must not change the list); None when it keeps none by key: not shared
        yet, empty, or ``key`` is not a whole index key."""
        order = self.order
        if not self.shared or not order or len(key) != len(order[0].index_key):
            return None
        exact = self._exact
        if exact is None:
            exact = self._exact = _by_whole_key(order)
        found = exact.get(key)
        if found is None:
            return ()
        return found if isinstance(found, list) else (found,)

    def prefix(self, prefix: IndexKey) -> list[Entry]:
        """The entries whose index key starts with ``prefix``, in order (a new list)."""
        if not prefix:
            return list(self.order)
        found = self.whole(prefix)
        if found is not None:
            return list(found)
        order = self.order
        k = len(prefix)
        i = bisect_left(order, (prefix,))
        out: list[Entry] = []
        while i < len(order) and order[i].index_key[:k] == prefix:
            out.append(order[i])
            i += 1
        return out


def _by_whole_key(order: list[Entry]) -> dict[IndexKey, Entry | list[Entry]]:
    """Entries by whole index key, in order: the entry itself when it is the only one under
    its key, else a list. A list per key was 88 bytes more per object, 1.8 MB for two
    collections of 10,000 looked up by whole key."""
    exact: dict[IndexKey, Entry | list[Entry]] = {}
    for entry in order:
        had = exact.setdefault(entry.index_key, entry)
        if isinstance(had, list):
            had.append(entry)
        elif had is not entry:
            exact[entry.index_key] = [had, entry]
    return exact


def _enlist(exact: dict[IndexKey, Entry | list[Entry]], entry: Entry) -> None:
    """Add ``entry`` to a whole-key table as :func:`_by_whole_key` would have it. A list
    under a key may be shared with the table of the state this one was copied from, so it
    is replaced, never changed."""
    had = exact.setdefault(entry.index_key, entry)
    if had is not entry:
        group = [*had] if isinstance(had, list) else [had]
        group.insert(bisect_left([e.key for e in group], entry.key), entry)
        exact[entry.index_key] = group


def _unlist(exact: dict[IndexKey, Entry | list[Entry]], entry: Entry) -> None:
    """Take ``entry`` out of a whole-key table (see :func:`_enlist`)."""
    had = exact.get(entry.index_key)
    if had is entry:
        del exact[entry.index_key]
    elif isinstance(had, list):
        rest = [e for e in had if e is not entry]
        exact[entry.index_key] = rest[0] if len(rest) == 1 else rest


def normalise_keys(collection: str, index_by: Sequence[str], keys: Sequence[Any]) -> IndexKey:
    """Check the number of keys and spell them as stored (templates may pass numbers)."""
    if len(keys) > len(index_by):
        raise TooManyKeys(
            f"collection {collection!r} is indexed by {len(index_by)} field(s) "
            f"({', '.join(index_by)}) but the lookup passed {len(keys)} keys: {list(keys)!r}"
        )
    plain = tuple(keys)
    for k in plain:
        if type(k) is not str:
            break
    else:
        return plain  # strings are spelled as stored already (the common case)
    out: list[str] = []
    for k in keys:
        text = scalar_text(k)
        out.append(text if text is not None else str(k))
    return tuple(out)


class CollectionViewBase:
    """fetch/list/get_single/iteration over ``entries()``, shared by every view kind."""

    __slots__ = ()
    name: str

    @property
    def index_by(self) -> tuple[str, ...]:
        raise NotImplementedError

    def entries(self, *keys: str) -> builtins.list[Entry]:
        raise NotImplementedError

    def entry(self, key: ObjectKey) -> Entry | None:
        raise NotImplementedError

    def get(self, key: ObjectKey) -> K8sObject | None:
        found = self.entry(key)
        return found.obj if found is not None else None

    def list(self) -> builtins.list[K8sObject]:
        return builtins.list(map(_OBJ, self.entries()))

    def fetch(self, *keys: str) -> builtins.list[K8sObject]:
        return [e.obj for e in self.entries(*keys)]

    def get_single(self, *keys: str) -> K8sObject | None:
        found = self.entries(*keys)
        if not found:
            return None
        if len(found) > 1:
            shown = ", ".join(_display(e.key) for e in found[:5])
            more = f" and {len(found) - 5} more" if len(found) > 5 else ""
            raise AmbiguousLookup(
                f"resources.{self.name}.get_single({', '.join(repr(k) for k in keys)}) matched "
                f"{len(found)} objects ({shown}{more}); collection {self.name!r} is indexed by "
                f"{', '.join(self.index_by)}: pass more keys or use fetch()"
            )
        return found[0].obj

    def __iter__(self) -> Iterator[K8sObject]:
        return iter(self.list())

    def __bool__(self) -> bool:
        return len(self) > 0

    def __len__(self) -> int:
        raise NotImplementedError

    def content_token(self) -> object | None:
        """An object that is the same (by identity) for as long as this collection's content
        is, so a consumer may keep what it derived from the content; None: no such promise."""
        return None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} ({len(self)} objects)>"


class StateView(CollectionViewBase):
    """A view over one fixed, shared state (a snapshot's collection).

    ``fetch`` and ``get_single`` with one string per index field (``fetch(namespace,
    service)``, a thousand times per render) read the state's entries by whole key directly;
    they answer what :meth:`entries` would, which every other lookup goes through."""

    __slots__ = ("_config", "_state", "_width", "name")

    def __init__(self, config: CollectionConfig, state: CollectionState) -> None:
        self.name = config.name
        self._config = config
        self._state = state
        self._width = len(config.index_paths)

    def _whole(self, keys: tuple[Any, ...]) -> Sequence[Entry] | None:
        """What ``entries(*keys)`` holds, when ``keys`` are a whole index key spelled as
        stored (strings); else None (then the caller takes the general way, with its
        checks and errors)."""
        if len(keys) != self._width or not keys:
            return None
        for k in keys:
            if type(k) is not str:
                return None
        return self._state.whole(keys)

    def fetch(self, *keys: str) -> builtins.list[K8sObject]:
        found = self._whole(keys)
        if found is None:
            return [e.obj for e in self.entries(*keys)]
        return [found[0].obj] if len(found) == 1 else [e.obj for e in found]

    def get_single(self, *keys: str) -> K8sObject | None:
        found = self._whole(keys)
        if found is not None and len(found) <= 1:
            return found[0].obj if found else None
        return super().get_single(*keys)

    def whole_keys(self) -> tuple[dict[IndexKey, Entry | list[Entry]], int] | None:
        """For a reader that looks objects up by whole key itself (the render's tracing
        collection): the entries by whole index key (an entry, or a list of those that share
        the key) and the number of index fields; None when this state keeps no such table
        (not shared). A key of that many strings it lacks has no object; a key of another
        width or with other values takes :meth:`fetch` or :meth:`get_single`."""
        exact = self._state.by_whole_key()
        return None if exact is None else (exact, self._width)

    @property
    def index_by(self) -> tuple[str, ...]:
        return self._config.index_by

    def entries(self, *keys: str) -> builtins.list[Entry]:
        return self._state.prefix(normalise_keys(self.name, self._config.index_by, keys))

    def list(self) -> builtins.list[K8sObject]:
        """The objects in index order. The caller must not change the list: while the
        state is shared (a snapshot's), every call gets the same one."""
        return self._state.objects()

    def entry(self, key: ObjectKey) -> Entry | None:
        return self._state.by_key.get(key)

    def prepare(self, obj: Mapping[str, Any]) -> Entry:
        return self._config.prepare(obj)[0]

    def __len__(self) -> int:
        return len(self._state.by_key)

    def content_token(self) -> object | None:
        # A shared state is never written again (the store copies it first).
        return self._state if self._state.shared else None
