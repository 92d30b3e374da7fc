"""Which file defines which stored object, so an edit touches only what it changed.

Several files (or one file twice) may define the same object. Rather than let the last file
read win — which would make the result depend on event order — every definition is kept as a
claim, and the store holds the first claim in (file, line) order. Removing one definition
then falls back to the next instead of deleting an object that is still defined elsewhere.
"""

from __future__ import annotations

from bisect import insort
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from controller.resources import ObjectKey

ClaimKey = tuple[str, ObjectKey]
"""(collection, (namespace, name))."""


class Claim(NamedTuple):
    file: Path
    line: int
    obj: Mapping[str, Any]

    def order(self) -> tuple[str, int]:
        return (str(self.file), self.line)


class Claims:
    """Claims per object; ``effective(key)`` is what the store should hold."""

    def __init__(self) -> None:
        self._by_key: dict[ClaimKey, list[tuple[tuple[str, int], Claim]]] = {}
        self._by_file: dict[Path, set[ClaimKey]] = {}

    def drop_file(self, file: Path) -> set[ClaimKey]:
        """Forget every claim of ``file``; returns the keys whose effective object may change."""
        keys = self._by_file.pop(file, set())
        for key in keys:
            rest = [c for c in self._by_key.get(key, []) if c[1].file != file]
            if rest:
                self._by_key[key] = rest
            else:
                self._by_key.pop(key, None)
        return keys

    def add(self, key: ClaimKey, claim: Claim) -> None:
        insort(self._by_key.setdefault(key, []), (claim.order(), claim), key=lambda c: c[0])
        self._by_file.setdefault(claim.file, set()).add(key)

    def effective(self, key: ClaimKey) -> Claim | None:
        found = self._by_key.get(key)
        return found[0][1] if found else None

    def collection(self, name: str) -> Iterator[Claim]:
        """The effective claims of one collection."""
        for (coll, _), claims in self._by_key.items():
            if coll == name:
                yield claims[0][1]

    def duplicates(self) -> Iterable[tuple[ClaimKey, list[Claim]]]:
        for key in sorted(self._by_key):
            claims = self._by_key[key]
            if len(claims) > 1:
                yield key, [c for _, c in claims]

    def clear(self) -> None:
        self._by_key.clear()
        self._by_file.clear()
