"""Where two lists of mostly the same objects differ, found by identity in C.

A render after one changed Ingress passes lists of 10,000 fragments or 20,000 routes that
hold, but for a place or two, the very objects of the previous render's lists. The memoized
list filters (:mod:`.listmemo`) and ``fragments()`` (:mod:`.fragments`) keep their earlier
work for the rest; these find the places, at a few nanoseconds per item.
"""

from __future__ import annotations

from itertools import compress, count, islice
from operator import is_not
from typing import Any

__all__ = ["common", "scattered"]


def scattered(old: list[Any], new: list[Any], limit: int) -> list[int] | None:
    """The positions where two lists of one length hold other objects, if at most ``limit``."""
    at = list(islice(compress(count(), map(is_not, old, new)), limit + 1))
    return at if len(at) <= limit else None


def common(old: list[Any], new: list[Any]) -> tuple[int, int]:
    """How many items the two lists share at their head, and then at their tail."""
    n = min(len(old), len(new))
    head = next(compress(count(), map(is_not, old, new)), n)
    if head == n:
        return head, 0
    tail = next(compress(count(), map(is_not, reversed(old), reversed(new))), n)
    return head, min(tail, n - head)
