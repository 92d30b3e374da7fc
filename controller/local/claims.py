"""Which file defines which stored object, so an edit touches only what it changed.

Several files (or one file twice) may define the same object. Rather than let the last file
read win — which would make the result depend on event order — every definition is kept as a
claim, and the store holds the first claim in (file, line) order. Removing one definition
then falls back to the next instead of deleting an object that is still defined elsewhere.

A claim is the :class:`~controller.resources.Manifest` the file was read into (its object is
the one the store holds), and an object defined once — nearly every object — is kept as its
one claim, not as a list of one: at 10,000 objects per collection the claims cost a few
megabytes instead of fourteen (see :class:`Claims` for the rest).
"""

from __future__ import annotations

from bisect import insort
from collections.abc import Iterable, Iterator
from pathlib import Path

from controller.resources import Manifest, ObjectKey

ClaimKey = tuple[str, ObjectKey]
"""(collection, (namespace, name))."""

Claim = Manifest
"""One definition of an object: the object, and the file and line that define it."""


def _order(claim: Claim) -> tuple[str, int]:
    return (str(claim.file), claim.line)


Names = dict[str, dict[str, Claim | list[Claim]]]
"""namespace → name → the one claim of an object, or its claims in (file, line) order."""


class Claims:
    """Claims per object; ``effective(key)`` is what the store should hold.

    Both tables are nested by collection and namespace rather than keyed by
    :data:`ClaimKey` tuples: the names are the objects' own strings, so an object costs a
    table entry and a list slot here, not two tuples and a set entry of its own (at 10,000
    objects per collection some 5 MB).
    """

    def __init__(self) -> None:
        self._by_key: dict[str, Names] = {}
        self._by_file: dict[Path, dict[str, dict[str, list[str]]]] = {}
        """file → collection → namespace → the names it defines (a name twice if twice)."""

    def drop_file(self, file: Path) -> set[ClaimKey]:
        """Forget every claim of ``file``; returns the keys whose effective object may change."""
        keys = {
            (coll, (ns, name))
            for coll, spaces in self._by_file.pop(file, {}).items()
            for ns, names in spaces.items()
            for name in names
        }
        for coll, (ns, name) in keys:
            names_of = self._by_key.get(coll, {}).get(ns, {})
            rest = [c for c in _listed(names_of.get(name)) if c.file != file]
            if len(rest) > 1:
                names_of[name] = rest
            elif rest:
                names_of[name] = rest[0]
            else:
                names_of.pop(name, None)
        return keys

    def add(self, key: ClaimKey, claim: Claim) -> None:
        coll, (ns, name) = key
        names_of = self._by_key.setdefault(coll, {}).setdefault(ns, {})
        found = names_of.get(name)
        if found is None:
            names_of[name] = claim
        else:
            claims = list(_listed(found))
            insort(claims, claim, key=_order)
            names_of[name] = claims
        spaces = self._by_file.setdefault(claim.file, {}).setdefault(coll, {})
        spaces.setdefault(ns, []).append(name)

    def effective(self, key: ClaimKey) -> Claim | None:
        coll, (ns, name) = key
        found = self._by_key.get(coll, {}).get(ns, {}).get(name)
        return found[0] if isinstance(found, list) else found

    def collection(self, name: str) -> Iterator[Claim]:
        """The effective claims of one collection."""
        for names_of in self._by_key.get(name, {}).values():
            for found in names_of.values():
                yield found[0] if isinstance(found, list) else found

    def duplicates(self) -> Iterable[tuple[ClaimKey, list[Claim]]]:
        found = [
            ((coll, (ns, name)), claims)
            for coll, spaces in self._by_key.items()
            for ns, names_of in spaces.items()
            for name, claims in names_of.items()
            if isinstance(claims, list)
        ]
        for key, claims in sorted(found, key=lambda kc: kc[0]):
            yield key, list(claims)

    def clear(self) -> None:
        self._by_key.clear()
        self._by_file.clear()


def _listed(found: Claim | list[Claim] | None) -> list[Claim]:
    if found is None:
        return []
    return found if isinstance(found, list) else [found]
