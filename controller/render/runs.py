"""Where two lists of mostly the same objects differ, found by identity in C.

A render after one changed Ingress passes lists of 10,000 fragments or 20,000 routes that
hold, but for a place or two, the very objects of the previous render's lists. The memoized
list filters (:mod:`.listmemo`) and ``fragments()`` (:mod:`.fragments`) keep their earlier
work for the rest, as the rules' memo of inline verdicts keeps its keys for a collection's
unchanged objects; these find the places.

They compare the lists' arrays of item pointers (:func:`pointers`), not the items. Any pass
over a list's items in C — ``map(is_not, a, b)``, a copy — takes a reference to each item,
a write to the item's own memory; the items of a long-lived store are spread over a heap of
hundreds of megabytes, so at 20,000 routes each such pass cost 0.75 to 1.1 ms in the
benchmark's process (measured: 0.25 ms when the same number of objects were allocated one
after another), and a render after one change made some 60 of them just to learn that
nothing moved. The pointer arrays are 160 kB each and are compared with ``memcmp``: about
10 µs. Only the few short runs that differ are then compared item by item, as before.
"""

from __future__ import annotations

import ctypes
import sys
from itertools import compress, count, repeat
from operator import is_, is_not
from typing import Any

__all__ = ["find_item", "pointers", "same_ends", "same_items", "scattered"]


_WORD = ctypes.sizeof(ctypes.c_void_p)
_CHUNK = 4096
"""Items per first comparison (one ``memcmp`` of their pointers)."""
_RUN = 64
"""Items per second comparison, within a chunk that differs; a run that differs is then
compared item by item."""


def _item_array_offset() -> int | None:
    """Where a list object keeps the address of its item array, when this interpreter lays
    lists out as CPython's release builds do (reference count, type, size, items, allocated)
    and reading it gives the items' addresses back; None otherwise (then every comparison
    walks the items, as before)."""
    if sys.implementation.name != "cpython" or hasattr(sys, "gettotalrefcount"):
        return None  # another interpreter, or a debug build (more header fields)
    if list.__basicsize__ != 5 * _WORD:
        return None
    offset = 3 * _WORD
    sample = [object(), object(), object()]
    try:
        address = ctypes.c_void_p.from_address(id(sample) + offset).value
        got = ctypes.string_at(address, len(sample) * _WORD) if address else b""
    except Exception:  # pragma: no cover - only on an interpreter unlike CPython
        return None
    want = b"".join(id(x).to_bytes(_WORD, sys.byteorder) for x in sample)
    return offset if got == want else None


_OFFSET = _item_array_offset()
_address = ctypes.c_void_p.from_address
_string_at = ctypes.string_at


def pointers(items: object) -> bytes | None:
    """A copy of ``items``' array of item addresses (one machine word each), or None when
    it cannot be read here (not a list, or an interpreter unlike CPython).

    Only for lists no other thread can change meanwhile: the memo's own, never changed once
    stored, and copies made for one call (a list grown between the two reads could have
    moved its items)."""
    if _OFFSET is None or not isinstance(items, list):
        return None
    n = len(items)
    if not n:
        return b""
    address = _address(id(items) + _OFFSET).value
    return _string_at(address, n * _WORD) if address else None


def same_items(a: list[Any], b: list[Any]) -> bool:
    """Do the two lists hold the very same objects, in the same order?"""
    if len(a) != len(b):
        return False
    pa, pb = pointers(a), pointers(b)
    if pa is None or pb is None:
        return not any(map(is_not, a, b))
    return pa == pb


def find_item(items: list[Any], item: Any) -> int | None:
    """The first position of ``item`` (the very object) in ``items``, if it is there."""
    pa = pointers(items)
    if pa is None:
        return next(compress(count(), map(is_, items, repeat(item))), None)
    return _word(pa, id(item).to_bytes(_WORD, sys.byteorder))


def _word(words: bytes, key: bytes) -> int | None:
    """The index of the first word of ``words`` equal to ``key``: ``find`` may match bytes
    that span two words (the end of one address and the start of the next), which do not
    count."""
    at = words.find(key)
    while at >= 0 and at % _WORD:
        at = words.find(key, at + 1)
    return None if at < 0 else at // _WORD


def scattered(old: list[Any], new: list[Any], limit: int) -> list[int] | None:
    """The positions where two lists of one length hold other objects, if at most ``limit``.

    Chunks whose pointers are equal are skipped whole; in one that differs, runs of
    :data:`_RUN` items likewise; a run that differs is compared item by item. Lists that
    differ in more places stop as soon as that shows (a list sorted again after a change
    differs from the place of the change on)."""
    pa, pb = pointers(old), pointers(new)
    if pa is None or pb is None:
        return _scattered_items(old, new, 0, len(old), limit, [])
    if pa == pb:
        return []
    at: list[int] = []
    n = len(old)
    for start in range(0, n, _CHUNK):
        stop = min(start + _CHUNK, n)
        if pa[start * _WORD : stop * _WORD] == pb[start * _WORD : stop * _WORD]:
            continue
        for s in range(start, stop, _RUN):
            e = min(s + _RUN, stop)
            if pa[s * _WORD : e * _WORD] == pb[s * _WORD : e * _WORD]:
                continue
            if _scattered_items(old, new, s, e, limit, at) is None:
                return None
    return at


def _scattered_items(
    old: list[Any], new: list[Any], start: int, stop: int, limit: int, at: list[int]
) -> list[int] | None:
    """:func:`scattered` of ``old[start:stop]`` and ``new[start:stop]``, item by item,
    appending to ``at``: a few thousand items at a time into a bytearray of flags, whose
    differing places are then counted and found in C."""
    for s in range(start, stop, _CHUNK):
        e = min(s + _CHUNK, stop)
        flags = bytearray(map(is_not, old[s:e], new[s:e]))
        ones = flags.count(1)
        if not ones:
            continue
        if len(at) + ones > limit:
            return None
        i = flags.find(1)
        while i >= 0:
            at.append(s + i)
            i = flags.find(1, i + 1)
    return at


def same_ends(old: list[Any], new: list[Any]) -> tuple[int, int]:
    """How many items the two lists share at their head, and then at their tail."""
    n = min(len(old), len(new))
    pa, pb = pointers(old), pointers(new)
    if pa is None or pb is None:
        head = next(compress(count(), map(is_not, old, new)), n)
        if head == n:
            return head, 0
        tail = next(compress(count(), map(is_not, reversed(old), reversed(new))), n)
        return head, min(tail, n - head)
    head = _common(pa, pb, n, False)
    if head == n:
        return head, 0
    return head, min(_common(pa, pb, n, True), n - head)


def _common(pa: bytes, pb: bytes, n: int, from_end: bool) -> int:
    """How many of the first ``n`` item addresses of ``pa`` and ``pb`` are equal from the
    start (or from their ends), before the first that differs: found by comparing chunks,
    then runs within the first chunk that differs, then addresses within its first run."""
    la, lb = len(pa), len(pb)

    def equal(s: int, e: int) -> bool:
        if from_end:
            return pa[la - e * _WORD : la - s * _WORD] == pb[lb - e * _WORD : lb - s * _WORD]
        return pa[s * _WORD : e * _WORD] == pb[s * _WORD : e * _WORD]

    lo = 0
    for step in (_CHUNK, _RUN, 1):
        while lo < n and equal(lo, min(lo + step, n)):
            lo = min(lo + step, n)
        if lo == n:
            return n
    return lo
