"""``regex.extractAll`` over a large text, from the matches of a text it differs little from.

Every distinct proposal at admission changes a few lines of ``haproxy.cfg`` and its maps,
and the quickstart's ``map-backends-exist`` extracts the backends and the map values from all
of them: 7-9 ms of RE2 at 1,000 Ingresses (the maps' pattern has a capture group, which RE2
finds with its slower engine), for text that is nearly all the same as the last
proposal's. When the pattern is **line-local**, the matches within one line depend on that
line alone; then the matches of the unchanged lines at the start and the end are reused, and
only the lines between are scanned.

A pattern is line-local when no match can contain a newline and each assertion reads only
the characters next to it, which at a line's start are the same whether the line starts
the text or follows a newline. :func:`line_local` accepts only what it can prove that for,
from RE2's syntax, and refuses everything else:

* no ``\\n``, ``\\s``, ``\\D``, ``\\W`` and no class that contains a newline (a negated class
  must name it, as ``[^#\\s]`` does through ``\\s``); ``.`` only without the ``s`` flag, which
  can then never be set (flags only in one leading group, without ``-``);
* ``^`` and ``$`` only with the ``m`` flag (without it they mean the text's ends), no ``\\A``,
  ``\\z``; ``\\b`` and ``\\B`` read the newline before a line like the text's start: a
  non-word character;
* a small set of escapes (``\\S \\d \\w \\b \\B \\t \\r \\f \\v``, escaped punctuation); no
  Unicode classes, POSIX classes, hexadecimal, octal or quoted literals, no ``(?`` other than
  ``(?:`` after the leading flags.

Why the result is the same: leftmost-first matching scans a line from its start in the
same state whether it began the text or followed the previous line's last match (which
ended before that line's newline), and no match crosses a line. The tests compare both ways
on generated patterns and texts.
"""

from __future__ import annotations

import bisect
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache

from controller.validation.textdiff import common_prefix, common_suffix

__all__ = ["MIN_TEXT", "Scans", "line_local"]

MIN_TEXT = 16_384
"""Characters below which a text is scanned whole (reuse saves nothing worth its bookkeeping)."""

_KEEP = 2
"""Texts remembered per pattern: the last proposals, between which the next one falls."""

_MAX_CHARS = 8 << 20
"""Characters of remembered texts in all (one process); the oldest go first."""

_MIN_BLOCK = 4096
"""Characters a shared block found in the middle must span to be used."""

_DEPTH = 4
"""How many times the middle is split around a shared block."""

_ATTEMPTS = 4
_MIN_LINE = 8
"""Lines tried as the anchor of a shared block, and the length an anchor line must have."""

_FLAGS_OK = frozenset("imU")
_ESCAPES = frozenset("SdwbBtrfv")
"""Escapes outside a class that can never match a newline nor read past a line."""
_CLASS_OUT = frozenset("Sdwtrfv")
"""Escapes inside a class that add no newline."""
_CLASS_NL = frozenset("nsDW")
"""Escapes inside a class that add the newline."""


@lru_cache(maxsize=256)
def line_local(pattern: str) -> bool:
    """Whether every match of ``pattern`` lies within one line and is found the same way
    in that line alone (see the module's docstring). False when unsure."""
    i, n = 0, len(pattern)
    multiline = False
    if pattern.startswith("(?"):
        close = pattern.find(")")
        flags = pattern[2:close]
        if close < 0 or not flags or not set(flags) <= _FLAGS_OK:
            return False
        multiline = "m" in flags
        i = close + 1
    while i < n:
        c = pattern[i]
        if c == "\n":
            return False
        if c == "\\":
            if i + 1 >= n:
                return False
            e = pattern[i + 1]
            if not (e in _ESCAPES or (not e.isalnum() and e != "\n" and e.isascii())):
                return False
            i += 2
            continue
        if c == "[":
            end = _class_end(pattern, i)
            if end is None:
                return False
            i = end
            continue
        if c in "^$" and not multiline:
            return False
        if c == "(" and pattern.startswith("(?", i) and not pattern.startswith("(?:", i):
            return False
        i += 1
    return True


def _class_end(pattern: str, i: int) -> int | None:
    """The index after the class that starts at ``pattern[i]`` when the class can be proven
    to exclude the newline (negated: to include it); None otherwise."""
    n = len(pattern)
    i += 1
    negated = pattern.startswith("^", i)
    if negated:
        i += 1
    newline = False
    first = True
    prev: str | None = None  # the last single character, a range's possible start
    while i < n:
        c = pattern[i]
        if c == "]" and not first:
            return i + 1 if newline is negated else None
        if c == "-" and first:  # a leading dash is itself
            first, prev = False, None
            i += 1
            continue
        first = False
        if c == "[" and pattern.startswith("[:", i):
            return None
        if c == "-" and i + 1 < n and pattern[i + 1] != "]":
            if prev is None:  # after an escape or a range, or first: refused, unsure
                return None
            i += 1
            hi = pattern[i]
            if hi == "\\":
                if i + 1 >= n or pattern[i + 1].isalnum():
                    return None
                hi = pattern[i + 1]
                i += 1
            if hi == "[":
                return None
            if ord(prev) <= 0x0A <= ord(hi):
                newline = True
            prev = None
            i += 1
            continue
        if c == "\\":
            if i + 1 >= n:
                return None
            e = pattern[i + 1]
            i += 2
            if e in _CLASS_NL:
                newline, prev = True, None
            elif e in _CLASS_OUT:
                prev = None
            elif not e.isalnum() and e.isascii():
                newline = newline or e == "\n"
                prev = e
            else:
                return None
            continue
        newline = newline or c == "\n"
        prev = c
        i += 1
    return None


@dataclass(frozen=True, slots=True)
class _Scan:
    text: str
    starts: list[int]
    """Where each kept match starts, ascending."""
    values: list[str]


Finder = Callable[[str], Iterator[tuple[int, str]]]
"""A pattern's kept matches in a text: (start, value), in order."""


Segment = tuple[int, int, int | None]
"""``(lo, hi, shift)``: the new text's ``[lo, hi)``, whole lines that are the old text's
``[lo + shift, hi + shift)`` (its matches are reused), or to scan when ``shift`` is None."""


class Scans:
    """The last texts each line-local pattern was run on, with their matches."""

    def __init__(
        self, max_chars: int = _MAX_CHARS, *, min_block: int = _MIN_BLOCK, depth: int = _DEPTH
    ) -> None:
        self._by_pattern: OrderedDict[str, list[_Scan]] = OrderedDict()
        self._chars = 0
        self._max_chars = max_chars
        self._min_block, self._depth = min_block, depth
        self._lock = threading.Lock()
        self.counts = {"whole": 0, "reused": 0, "rescanned": 0}
        """Texts scanned whole, texts answered from an earlier one, characters scanned then."""

    def extract(self, pattern: str, text: str, find: Finder) -> list[str]:
        """The values ``find`` gives for ``text``; ``pattern`` must be line-local."""
        with self._lock:
            earlier = list(self._by_pattern.get(pattern, ()))
        best: tuple[int, list[Segment], _Scan] | None = None
        for old in earlier:
            segments = self.segments(old.text, text)
            scanned = sum(hi - lo for lo, hi, shift in segments if shift is None)
            if best is None or scanned < best[0]:
                best = (scanned, segments, old)
        starts: list[int] = []
        values: list[str] = []
        if best is None:
            for start, value in find(text):
                starts.append(start)
                values.append(value)
            self.counts["whole"] += 1
        else:
            scanned, segments, old = best
            for lo, hi, shift in segments:
                if shift is None:
                    for start, value in find(text[lo:hi]):
                        starts.append(lo + start)
                        values.append(value)
                    continue
                i = bisect.bisect_left(old.starts, lo + shift)
                j = bisect.bisect_left(old.starts, hi + shift)
                starts += [s - shift for s in old.starts[i:j]] if shift else old.starts[i:j]
                values += old.values[i:j]
            self.counts["reused"] += 1
            self.counts["rescanned"] += scanned
        self._remember(pattern, _Scan(text, starts, values))
        return list(values)

    def segments(self, old: str, new: str) -> list[Segment]:
        """``new`` cut into whole lines shared with ``old`` and lines to scan: the common
        start and end, then between them blocks found again around a line of the middle
        (a change to the maps and to ``haproxy.cfg`` leaves one block between them)."""
        p = common_prefix(old, new)
        s = common_suffix(old, new, min(len(old), len(new)) - p)
        a = new.rfind("\n", 0, p) + 1  # the newline at a - 1 is in the common prefix
        nl = new.find("\n", len(new) - s)  # in the common suffix
        b = max(a, nl + 1 if nl >= 0 else len(new))
        shift = len(old) - len(new)
        out: list[Segment] = [(0, a, 0)] if a else []
        out += self._middle(old, new, a, b, a, b + shift, self._depth)
        if b < len(new):
            out.append((b, len(new), shift))
        return out

    def _middle(
        self, old: str, new: str, lo: int, hi: int, old_lo: int, old_hi: int, depth: int
    ) -> list[Segment]:
        """``new[lo:hi]`` against ``old[old_lo:old_hi]``, both whole lines."""
        if depth <= 0 or hi - lo < 2 * self._min_block or old_hi - old_lo < self._min_block:
            return [(lo, hi, None)] if hi > lo else []
        at = new.find("\n", (lo + hi) // 2, hi) + 1  # a line start in the middle
        for _ in range(_ATTEMPTS):  # a line long enough to be rare, found at a line start
            end = new.find("\n", at, hi) + 1 if at else 0
            if not at or not end:
                return [(lo, hi, None)]
            line = new[at:end]
            pos = old.find(line, old_lo, old_hi) if len(line) >= _MIN_LINE else -1
            while pos > old_lo and old[pos - 1] != "\n":
                pos = old.find(line, pos + 1, old_hi)
            if pos >= 0:
                break
            at = end
        else:
            return [(lo, hi, None)]
        ahead = common_prefix(new[at:hi], old[pos:old_hi])
        behind = common_suffix(new[lo:at], old[old_lo:pos], min(at - lo, pos - old_lo))
        if ahead + behind < self._min_block:
            return [(lo, hi, None)]
        # Whole lines of the shared block, each newline before them inside the block (so in
        # both texts); ``at`` itself follows a newline in both.
        c0 = new.find("\n", at - behind, at) + 1 if behind else at
        c0 = c0 or at
        c1 = new.rfind("\n", at, at + ahead) + 1
        shift = pos - at
        return [
            *self._middle(old, new, lo, c0, old_lo, c0 + shift, depth - 1),
            (c0, c1, shift),
            *self._middle(old, new, c1, hi, c1 + shift, old_hi, depth - 1),
        ]

    def _remember(self, pattern: str, scan: _Scan) -> None:
        if len(scan.text) > self._max_chars // _KEEP:
            return
        with self._lock:
            kept = self._by_pattern.pop(pattern, [])
            kept = [s for s in kept if s.text != scan.text][: _KEEP - 1]
            self._by_pattern[pattern] = [scan, *kept]
            self._chars = sum(len(s.text) for ss in self._by_pattern.values() for s in ss)
            while self._chars > self._max_chars and self._by_pattern:
                _, dropped = self._by_pattern.popitem(last=False)
                self._chars -= sum(len(s.text) for s in dropped)
