"""Which file defines which stored object, so an edit touches only what it changed.

Several files (or one file twice) may define the same object. Rather than let the last file
read win — which would make the result depend on event order — every definition is kept as a
claim, and the store holds the first claim in (file, line) order. Removing one definition
then falls back to the next instead of deleting an object that is still defined elsewhere.

A claim is the :class:`~controller.resources.Manifest` the file was read into (its object is
the one the store holds), and an object defined once — nearly every object — is kept as its
one claim, not as a list of one: at 10,000 objects per collection the claims cost a few
megabytes instead of fourteen.
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


class Claims:
    """Claims per object; ``effective(key)`` is what the store should hold."""

    def __init__(self) -> None:
        self._by_key: dict[ClaimKey, Claim | list[Claim]] = {}
        """The one claim of an object, or its claims in (file, line) order when several."""
        self._by_file: dict[Path, set[ClaimKey]] = {}

    def drop_file(self, file: Path) -> set[ClaimKey]:
        """Forget every claim of ``file``; returns the keys whose effective object may change."""
        keys = self._by_file.pop(file, set())
        for key in keys:
            found = self._by_key.get(key)
            rest = [c for c in _listed(found) if c.file != file]
            if len(rest) > 1:
                self._by_key[key] = rest
            elif rest:
                self._by_key[key] = rest[0]
            else:
                self._by_key.pop(key, None)
        return keys

    def add(self, key: ClaimKey, claim: Claim) -> None:
        found = self._by_key.get(key)
        if found is None:
            self._by_key[key] = claim
        else:
            claims = list(_listed(found))
            insort(claims, claim, key=_order)
            self._by_key[key] = claims
        self._by_file.setdefault(claim.file, set()).add(key)

    def effective(self, key: ClaimKey) -> Claim | None:
        found = self._by_key.get(key)
        return found[0] if isinstance(found, list) else found

    def collection(self, name: str) -> Iterator[Claim]:
        """The effective claims of one collection."""
        for (coll, _), found in self._by_key.items():
            if coll == name:
                yield found[0] if isinstance(found, list) else found

    def duplicates(self) -> Iterable[tuple[ClaimKey, list[Claim]]]:
        for key in sorted(self._by_key):
            found = self._by_key[key]
            if isinstance(found, list):
                yield key, list(found)

    def clear(self) -> None:
        self._by_key.clear()
        self._by_file.clear()


def _listed(found: Claim | list[Claim] | None) -> list[Claim]:
    if found is None:
        return []
    return found if isinstance(found, list) else [found]
