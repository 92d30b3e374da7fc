"""Where two lists of mostly the same objects differ, found by identity in C.

A render after one changed Ingress passes lists of 10,000 fragments or 20,000 routes that
hold, but for a place or two, the very objects of the previous render's lists. The memoized
list filters (:mod:`.listmemo`) and ``fragments()`` (:mod:`.fragments`) keep their earlier
work for the rest, as the rules' memo of inline verdicts keeps its keys for a collection's
unchanged objects; these find the places.

They compare the lists' arrays of item addresses with ``memcmp``, not the items. Any pass
over a list's items in C — ``map(is_not, a, b)``, a copy — takes a reference to each item,
a write to the item's own memory; the items of a long-lived store are spread over a heap of
hundreds of megabytes, so at 20,000 routes each such pass cost 0.75 to 1.1 ms in the
benchmark's process (0.25 ms when the same number of objects were allocated one after
another), and a render after one change made some 60 of them just to learn that nothing
moved. ``memcmp`` of the two 160 kB address arrays takes 3.5 µs. Only the few short runs
that differ are then compared item by item, as before.

This reads the list objects' memory (:func:`_layout`), so it is only for lists no other
thread can change meanwhile: the memo's own, never changed once stored, and copies made
for one call (a list growing meanwhile could move its items). Where the layout is not
CPython's, or ``memcmp`` cannot be had, every comparison walks the items.
"""

from __future__ import annotations

import ctypes
import sys
from array import array
from collections.abc import Callable, Iterator
from itertools import compress, count, repeat
from operator import is_, is_not, ne
from typing import Any

__all__ = ["find_item", "same_ends", "same_items", "scattered"]


_WORD = ctypes.sizeof(ctypes.c_void_p)
_CHUNK = 4096
"""Items per first comparison."""
_RUN = 64
"""Items per second comparison, within a chunk that differs; a run that differs is then
compared item by item."""


def _memcmp() -> Callable[[int, int, int], int] | None:
    """The C library's ``memcmp``, called with the interpreter lock held (a call that
    releases and takes it again would cost more than the comparison)."""
    try:
        fn = ctypes.PyDLL(None).memcmp
    except Exception:  # pragma: no cover - no C library to find symbols in (not POSIX)
        return None
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
    fn.restype = ctypes.c_int
    return fn


def _layout() -> int | None:
    """Where a list object keeps the address of its item array, when this interpreter lays
    lists out as CPython's release builds do (reference count, type, size, items, allocated)
    and reading it there gives the items' addresses back; None otherwise."""
    if sys.implementation.name != "cpython" or hasattr(sys, "gettotalrefcount"):
        return None  # another interpreter, or a debug build (more header fields)
    if list.__basicsize__ != 5 * _WORD:
        return None
    offset = 3 * _WORD
    sample = [object(), object(), object()]
    try:
        address = ctypes.c_void_p.from_address(id(sample) + offset).value
        got = ctypes.string_at(address, len(sample) * _WORD) if address else b""
    except Exception:  # pragma: no cover - only where ctypes cannot read memory
        return None
    want = b"".join(id(x).to_bytes(_WORD, sys.byteorder) for x in sample)
    return offset if got == want else None


_cmp = _memcmp()
_OFFSET = _layout() if _cmp is not None else None
_address = ctypes.c_void_p.from_address


def _items_at(items: object) -> int | None:
    """The address of a non-empty list's item array, or None (see the module docs)."""
    if _OFFSET is None or not isinstance(items, list) or not items:
        return None
    address: int | None = _address(id(items) + _OFFSET).value
    return address


def _equal(a: int, b: int, n: int) -> bool:
    """Are the ``n`` addresses at ``a`` and at ``b`` the same?"""
    return n <= 0 or not _cmp(a, b, n * _WORD)  # type: ignore[misc]


def _differing(a: int, b: int, n: int) -> list[int]:
    """Which of the ``n`` addresses at ``a`` and at ``b`` differ, in order: the two runs
    read as integers and combined by exclusive or, whose non-zero words are those (a few
    operations on the integer per word found; no item is touched)."""
    size = n * _WORD
    x = int.from_bytes(ctypes.string_at(a, size), "little") ^ int.from_bytes(
        ctypes.string_at(b, size), "little"
    )
    out: list[int] = []
    base = 0
    bits = 8 * _WORD
    while x:
        i = ((x & -x).bit_length() - 1) // bits
        out.append(base + i)
        x >>= (i + 1) * bits
        base += i + 1
    return out


def same_items(a: list[Any], b: list[Any]) -> bool:
    """Do the two lists hold the very same objects, in the same order?"""
    if len(a) != len(b):
        return False
    pa, pb = _items_at(a), _items_at(b)
    if pa is None or pb is None:
        return not any(map(is_not, a, b))
    return _equal(pa, pb, len(a))


def find_item(items: list[Any], item: Any) -> int | None:
    """The first position of ``item`` (the very object) in ``items``, if it is there."""
    at = _items_at(items)
    if at is None:
        return next(compress(count(), map(is_, items, repeat(item))), None)
    words = ctypes.string_at(at, len(items) * _WORD)
    return _word(words, id(item).to_bytes(_WORD, sys.byteorder))


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

    The runs of :data:`_RUN` items that differ are found by comparing ever shorter runs,
    skipping those whose addresses are equal (:data:`_STEPS`); their differing addresses
    are counted, and found only once they are known to be few. Lists that differ in more
    places stop as soon as that shows (a list sorted again after a change differs from the
    place of the change on)."""
    pa, pb = _items_at(old), _items_at(new)
    if pa is None or pb is None:
        return _scattered_items(old, new, limit)
    n = len(old)
    if _equal(pa, pb, n):
        return []
    runs: list[int] = []
    ones = 0
    for s in _runs(pa, pb, 0, n, 0):
        e = min(s + _RUN, n)
        ones += _count(pa + s * _WORD, pb + s * _WORD, e - s)
        if ones > limit:
            return None
        runs.append(s)
    at: list[int] = []
    for s in runs:
        at += (s + i for i in _differing(pa + s * _WORD, pb + s * _WORD, min(_RUN, n - s)))
    return at


_STEPS = (_CHUNK, 512, _RUN)
"""The lengths of run compared in turn: one that differs is split into runs of the next."""


def _runs(a: int, b: int, start: int, stop: int, level: int) -> Iterator[int]:
    """The starts of the runs of :data:`_RUN` addresses between ``start`` and ``stop`` of
    the arrays at ``a`` and ``b`` that differ, in order."""
    step = _STEPS[level]
    for s in range(start, stop, step):
        e = min(s + step, stop)
        if _equal(a + s * _WORD, b + s * _WORD, e - s):
            continue
        if level + 1 == len(_STEPS):
            yield s
        else:
            yield from _runs(a, b, s, e, level + 1)


_CODE = next(t for t in "QLI" if array(t).itemsize == _WORD)


def _count(a: int, b: int, n: int) -> int:
    """How many of the ``n`` addresses at ``a`` and at ``b`` differ."""
    size = n * _WORD
    return sum(
        map(ne, array(_CODE, ctypes.string_at(a, size)), array(_CODE, ctypes.string_at(b, size)))
    )


def _scattered_items(old: list[Any], new: list[Any], limit: int) -> list[int] | None:
    """:func:`scattered` item by item: a few thousand items at a time into a bytearray of
    flags, counted and then found in C."""
    at: list[int] = []
    for start in range(0, len(old), _CHUNK):
        stop = start + _CHUNK
        flags = bytearray(map(is_not, old[start:stop], new[start:stop]))
        ones = flags.count(1)
        if not ones:
            continue
        if len(at) + ones > limit:
            return None
        _positions(flags, start, at)
    return at


def _positions(flags: bytearray, start: int, at: list[int]) -> None:
    """Appends to ``at`` the place of each set flag, plus ``start``."""
    i = flags.find(1)
    while i >= 0:
        at.append(start + i)
        i = flags.find(1, i + 1)


def same_ends(old: list[Any], new: list[Any]) -> tuple[int, int]:
    """How many items the two lists share at their head, and then at their tail."""
    n = min(len(old), len(new))
    pa, pb = _items_at(old), _items_at(new)
    if pa is None or pb is None:
        head = next(compress(count(), map(is_not, old, new)), n)
        if head == n:
            return head, 0
        tail = next(compress(count(), map(is_not, reversed(old), reversed(new))), n)
        return head, min(tail, n - head)
    head = _common(lambda s, e: _equal(pa + s * _WORD, pb + s * _WORD, e - s), n)
    if head < n:
        head += _differing(pa + head * _WORD, pb + head * _WORD, min(_RUN, n - head))[0]
    if head == n:
        return head, 0
    # From the ends: the e - s items before the last s of each list.
    ea, eb = pa + len(old) * _WORD, pb + len(new) * _WORD
    tail = _common(lambda s, e: _equal(ea - e * _WORD, eb - e * _WORD, e - s), n)
    if tail < n:
        k = min(_RUN, n - tail)
        tail += k - 1 - _differing(ea - (tail + k) * _WORD, eb - (tail + k) * _WORD, k)[-1]
    return head, min(tail, n - head)


def _common(equal: Callable[[int, int], bool], n: int) -> int:
    """Where the first run of :data:`_RUN` addresses that differs starts, among the first
    ``n`` (``equal(s, e)``: are those from ``s`` up to ``e`` the same?), or ``n``: found
    by ever shorter runs (:data:`_STEPS`) from the first longer one that differs."""
    lo = 0
    for step in _STEPS:
        while lo < n and equal(lo, min(lo + step, n)):
            lo = min(lo + step, n)
    return lo
