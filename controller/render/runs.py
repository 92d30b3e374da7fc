"""Where two lists of mostly the same objects differ, found by identity in C.

A render after one changed Ingress passes lists of 10,000 fragments or 20,000 routes that
hold, but for a place or two, the very objects of the previous render's lists. The memoized
list filters (:mod:`.listmemo`) and ``fragments()`` (:mod:`.fragments`) keep their earlier
work for the rest, as the rules' memo of inline verdicts keeps its keys for a collection's
unchanged objects; these find the places, at a few nanoseconds per item.
"""

from __future__ import annotations

from itertools import compress, count
from operator import is_not
from typing import Any

__all__ = ["same_ends", "scattered"]


_CHUNK = 4096


def scattered(old: list[Any], new: list[Any], limit: int) -> list[int] | None:
    """The positions where two lists of one length hold other objects, if at most ``limit``.

    Compared a few thousand items at a time into a bytearray of flags (about half the cost
    of numbering every item to pick the differing ones), whose differing places are then
    counted and found in C; lists that differ in more places stop at the chunk that shows it
    (a list sorted again after a change differs from the place of the change on)."""
    at: list[int] = []
    for start in range(0, len(old), _CHUNK):
        stop = start + _CHUNK
        flags = bytearray(map(is_not, old[start:stop], new[start:stop]))
        ones = flags.count(1)
        if not ones:
            continue
        if len(at) + ones > limit:
            return None
        i = flags.find(1)
        while i >= 0:
            at.append(start + i)
            i = flags.find(1, i + 1)
    return at


def same_ends(old: list[Any], new: list[Any]) -> tuple[int, int]:
    """How many items the two lists share at their head, and then at their tail."""
    n = min(len(old), len(new))
    head = next(compress(count(), map(is_not, old, new)), n)
    if head == n:
        return head, 0
    tail = next(compress(count(), map(is_not, reversed(old), reversed(new))), n)
    return head, min(tail, n - head)
