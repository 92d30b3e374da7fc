"""Read-only copies of Kubernetes objects.

Stored objects are shared by every snapshot, overlay and render, so nothing that reads them may
change them. Freezing turns mappings into :class:`FrozenDict` and lists into tuples:

* ``FrozenDict`` subclasses ``dict`` so that ``json.dumps``, ``isinstance(x, dict)`` checks in
  libraries, Jinja2's attribute fallback and CEL bindings keep working, while every mutating
  method raises ``TypeError``. Jinja2's ``ImmutableSandboxedEnvironment`` additionally refuses
  to call those methods because a ``dict`` subclass is a known mutable type.
* Tuples are smaller than lists and cannot be changed at all.
* Mapping keys and short string values are interned: every Ingress repeats ``metadata``,
  ``name``, ``namespace``, ``Prefix`` … and one shared string per spelling saves a large part
  of an object's footprint (see ``bench/store_memory.py``).
* Small leaves are shared too (:func:`share`): a mapping of a few strings, booleans and
  integers, or a tuple of a few strings, that equals one frozen recently is that one.
  EndpointSlices repeat ``{ready: true, serving: true, terminating: false}`` per endpoint,
  Services and slices their ports, Ingresses ``{number: 80}``: at 10,000 objects per kind
  that is some 90,000 mappings fewer. Sharing an immutable value is invisible to readers,
  and a leaf is never a whole object (an object has a ``metadata`` mapping).

The guarantee covers the public API, not deliberate bypasses such as ``dict.__setitem__(d, …)``.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, NoReturn

from controller.resources.paths import StripTree

_intern = sys.intern
_INTERN_MAX = 32
"""Short string values repeat across objects ("TCP", "Prefix", namespace and node names);
sharing them saved ~16% per object in ``bench/store_memory.py``. Longer ones rarely repeat."""


_LEAF_MAX = 4
"""Leaves with more entries than this are rarely repeated whole; they are not looked up."""
_SHARED_MAX = 8192
"""Bound of the table of shared leaves; it is emptied when full (already shared ones stay
shared), so its memory is bounded whatever the objects hold."""
_shared: dict[tuple[Any, ...], Any] = {}
_SCALAR_TYPES = (str, bool, int, type(None))


def _leaf_key(value: Mapping[str, Any] | tuple[Any, ...]) -> tuple[Any, ...] | None:
    """What identifies a small leaf by content, or None when it is not one. Types are part
    of the key: ``True == 1`` and ``{"a": True}`` must not become ``{"a": 1}``. Floats are
    left out (``-0.0 == 0.0``)."""
    if len(value) > _LEAF_MAX:
        return None
    if isinstance(value, tuple):
        if all(type(v) is str for v in value):
            return (tuple, *value)
        return None
    parts: list[Any] = [dict]
    for k, v in value.items():
        if type(v) not in _SCALAR_TYPES or type(k) is not str:
            return None
        parts += (k, v) if type(v) is str else (k, type(v), v)
    return tuple(parts)


def share(value: Any) -> Any:
    """``value`` (a frozen mapping or tuple), or an equal small leaf frozen earlier."""
    key = _leaf_key(value)
    if key is None:
        return value
    found = _shared.get(key)
    if found is not None:
        return found
    if len(_shared) >= _SHARED_MAX:
        _shared.clear()
    _shared[key] = value
    return value


def forget_shared() -> None:
    """Empty the table of shared leaves (those already shared stay shared); for measurements
    that must not count one kind's table entries against another."""
    _shared.clear()


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
    if type(value) is str and len(value) <= _INTERN_MAX:
        return _intern(value)
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
