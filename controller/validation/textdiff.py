"""How much two texts share at their start and at their end.

A rendered configuration changes a little at a time, so a new candidate is usually an earlier
one with a few sections replaced, inserted or removed. The parser reuses the parse of the
shared start and end (see ``parser``), so it must find them without a Python step per
character: slices are compared in blocks (a comparison of equal-length strings is one
``memcmp``), and only the block holding the first difference is halved down to the character.
Both texts are copied once in blocks at most, about a millisecond for a 2.6 MB configuration.
"""

from __future__ import annotations

__all__ = ["common_prefix", "common_suffix"]

_BLOCK = 1 << 16


def common_prefix(a: str, b: str) -> int:
    """The length of the longest common start of ``a`` and ``b``."""
    n = min(len(a), len(b))
    i = 0
    while i < n:
        j = min(i + _BLOCK, n)
        if a[i:j] != b[i:j]:
            return _first_difference(a, b, i, j)
        i = j
    return n


def common_suffix(a: str, b: str, limit: int) -> int:
    """The length of the longest common end of ``a`` and ``b``, at most ``limit``."""
    na, nb = len(a), len(b)
    n = min(na, nb, limit)
    i = 0
    while i < n:
        j = min(i + _BLOCK, n)
        if a[na - j : na - i] != b[nb - j : nb - i]:
            return _last_difference(a, b, i, j)
        i = j
    return n


def _first_difference(a: str, b: str, lo: int, hi: int) -> int:
    """``a[lo:hi] != b[lo:hi]``: the index of their first difference."""
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo


def _last_difference(a: str, b: str, lo: int, hi: int) -> int:
    """The ends of ``a`` and ``b`` are equal for ``lo`` characters and differ within ``hi``:
    how many are equal."""
    na, nb = len(a), len(b)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[na - mid : na - lo] == b[nb - mid : nb - lo]:
            lo = mid
        else:
            hi = mid
    return lo
