"""Read-only copies of Kubernetes objects.

Stored objects are shared by every snapshot, overlay and render, so nothing that reads them may
change them. Freezing turns mappings into :class:`FrozenDict` and lists into tuples:

* ``FrozenDict`` subclasses ``dict`` so that ``json.dumps``, ``isinstance(x, dict)`` checks in
  libraries, Jinja2's attribute fallback and CEL bindings keep working, while every mutating
  method raises ``TypeError``. Jinja2's ``ImmutableSandboxedEnvironment`` additionally refuses
  to call those methods because a ``dict`` subclass is a known mutable type.
* Tuples are smaller than lists and cannot be changed at all.
* Mapping keys are interned, and short string values seen lately are shared: every Ingress
  repeats ``metadata``, ``name``, ``namespace``, ``Prefix`` … and one shared string per
  spelling saves a large part of an object's footprint (see ``bench/store_memory.py``).
* Small values are shared too (:func:`share`): a mapping or tuple of at most four entries
  that equals one frozen recently is that one. Freezing goes bottom-up, so a value's nested
  mappings and tuples are shared before it is looked up, and equal parents have the very same
  children. EndpointSlices repeat ``{ready: true, serving: true, terminating: false}`` per
  endpoint, Services and slices their ports, an Ingress the backend of each of its paths.
  With ``bench/reconcile.py``'s 10,000 objects per kind, leaves alone spared 90,000 of
  310,000 mappings, and nested values 30,000 mappings and 20,000 tuples more. Sharing an
  immutable value is invisible to readers. A mapping with ``metadata`` is an object (or an
  object's template) and is never shared: the store and the render caches tell objects apart
  by identity.

The guarantee covers the public API, not deliberate bypasses such as ``dict.__setitem__(d, …)``.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, NoReturn

from controller.resources.paths import StripTree

_intern = sys.intern
SHARE_TEXT_MAX = 32
"""Short string values repeat across objects ("TCP", "Prefix", namespace and node names);
sharing them saved ~16% per object in ``bench/store_memory.py``. Longer ones rarely repeat."""


_LEAF_MAX = 4
"""Mappings and tuples with more entries than this are rarely repeated whole; they are not
looked up."""
_SHARED_MAX = 4096
"""Bound of each generation of the tables of shared values and strings (see :class:`_Recent`),
so their memory is bounded whatever the objects hold."""
_REF = object()
"""Marks a nested mapping or tuple in a key, by its identity."""


def _key(value: Mapping[str, Any] | tuple[Any, ...]) -> tuple[Any, ...] | None:
    """What identifies a small mapping or tuple by content, or None when it is not looked up.

    A mapping's key lists its size and keys, then its values, a tuple's its items; each value
    decodes on its own, so no two contents share a key. A string stands for itself; a boolean, integer or None for its type and value (``True ==
    1`` and ``{"a": True}`` must not become ``{"a": 1}``); a nested mapping or tuple for its
    identity: it was shared first (freezing goes bottom-up), so equal children are one object
    and an equal parent has the very same children. The identity stays valid while the entry
    is in the table, since the value it maps to holds that child. Floats are left out
    (``-0.0 == 0.0``), and so is a mapping with ``metadata``: that is an object (or an
    object's template), told apart by identity by the store and the render caches.
    """
    if len(value) > _LEAF_MAX:
        return None
    parts: list[Any]
    if isinstance(value, tuple):
        parts = [tuple]
        items: Any = value
    else:
        if "metadata" in value:
            return None
        for k in value:
            if type(k) is not str:
                return None
        parts = [dict, len(value)]
        parts += value  # the keys, then the values in the same order
        items = value.values()
    append = parts.append
    for v in items:
        t = type(v)
        if t is str:
            append(v)
        elif t is bool or t is int or v is None:
            append(t)
            append(v)
        elif t is FrozenDict or t is tuple:
            append(_REF)
            append(id(v))
        else:
            return None
    return tuple(parts)


class _Recent:
    """What was seen lately, in two generations: when the newer is full it becomes the older
    one and the oldest is dropped, and a value found in the older moves to the newer. Values
    that keep repeating stay shared while one-offs (most objects' names) pass through."""

    __slots__ = ("newer", "older")

    def __init__(self) -> None:
        self.newer: dict[Any, Any] = {}
        self.older: dict[Any, Any] = {}

    def get(self, key: Any, value: Any) -> Any:
        """The value kept under ``key``, else ``value``, kept from now on."""
        found = self.newer.get(key)
        if found is not None:
            return found
        found = self.older.get(key)
        if found is not None:
            value = found
        if len(self.newer) >= _SHARED_MAX:
            self.older, self.newer = self.newer, {}
        self.newer[key] = value
        return value


_values = _Recent()
_texts = _Recent()


def share(value: Any) -> Any:
    """``value`` (a frozen mapping or tuple), or an equal one frozen earlier and seen lately
    (see :class:`_Recent`)."""
    key = _key(value)
    return value if key is None else _values.get(key, value)


def share_text(value: str) -> str:
    """One string per spelling of a short value while it keeps recurring.

    Not ``sys.intern``: the interpreter's table keeps an entry for every string interned
    while it lives, and most short values are names and addresses that no other object
    repeats (90,000 of them at 10,000 Ingresses, Services and EndpointSlices), which took a
    table of 4 MB to tell apart from the few hundred that recur on every object."""
    shared: str | None = _texts.newer.get(value)  # most values recur: the short way first
    if shared is None:
        found: str = _texts.get(value, value)
        return found
    return shared


def forget_shared() -> None:
    """Empty the tables of shared values and strings (those already shared stay shared); for
    measurements that must not count one kind's table entries against another."""
    global _values, _texts
    _values, _texts = _Recent(), _Recent()


def _readonly(*_args: Any, **_kwargs: Any) -> NoReturn:
    raise TypeError("stored objects are read-only; use controller.resources.thaw() for a copy")


class FrozenDict(dict[str, Any]):
    """A ``dict`` whose mutating methods raise ``TypeError``."""

    __slots__ = ()

    __setitem__ = _readonly
    __delitem__ = _readonly
    __ior__ = _readonly
    clear = _readonly
    pop = _readonly
    popitem = _readonly
    setdefault = _readonly
    update = _readonly

    def __reduce__(self) -> tuple[type[FrozenDict], tuple[dict[str, Any]]]:
        # copy/deepcopy/pickle would otherwise rebuild the object through __setitem__.
        return (FrozenDict, (dict(self),))

    def __copy__(self) -> FrozenDict:
        return self

    def __repr__(self) -> str:
        return f"FrozenDict({dict.__repr__(self)})"


def freeze(value: Any, strip: StripTree | None = None) -> Any:
    """A read-only deep copy of ``value`` without the keys in ``strip``."""
    if isinstance(value, Mapping):
        if isinstance(value, FrozenDict) and (not strip or _keeps(value, strip)):
            return value
        out: dict[str, Any] = {}
        for key, item in value.items():
            if strip is not None and key in strip:
                sub = strip[key]
                if sub is None:
                    continue
                out[_intern(key) if type(key) is str else key] = freeze(item, sub)
            else:
                out[_intern(key) if type(key) is str else key] = freeze(item)
        return share(FrozenDict(out))
    if isinstance(value, list | tuple):
        return share(tuple([freeze(item) for item in value]))
    if type(value) is str and len(value) <= SHARE_TEXT_MAX:
        return share_text(value)
    return value


def _keeps(value: FrozenDict, strip: StripTree) -> bool:
    """True when stripping would leave ``value`` as it is: it has none of the keys to remove.
    Objects read already frozen (``htc validate``'s manifests) then are stored as read,
    without a copy of every mapping on the way to the stripped keys."""
    for key, sub in strip.items():
        if key in value:
            item = value[key]
            if sub is None or not isinstance(item, FrozenDict) or not _keeps(item, sub):
                return False
    return True


def thaw(value: Any) -> Any:
    """A plain, mutable deep copy (dicts and lists), for code that must edit or serialise it."""
    if isinstance(value, Mapping):
        return {key: thaw(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [thaw(item) for item in value]
    return value
