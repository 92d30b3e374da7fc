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


class Scans:
    """The last texts each line-local pattern was run on, with their matches."""

    def __init__(self, max_chars: int = _MAX_CHARS) -> None:
        self._by_pattern: OrderedDict[str, list[_Scan]] = OrderedDict()
        self._chars = 0
        self._max_chars = max_chars
        self._lock = threading.Lock()
        self.counts = {"whole": 0, "reused": 0, "rescanned": 0}
        """Texts scanned whole, texts answered from an earlier one, characters scanned then."""

    def extract(self, pattern: str, text: str, find: Finder) -> list[str]:
        """The values ``find`` gives for ``text``; ``pattern`` must be line-local."""
        with self._lock:
            earlier = list(self._by_pattern.get(pattern, ()))
        best: tuple[int, int, int, _Scan] | None = None
        for old in earlier:
            region = _changed_lines(old.text, text)
            if best is None or region[1] - region[0] < best[1] - best[0]:
                best = (*region, old)
        if best is None:
            starts: list[int] = []
            values: list[str] = []
            for start, value in find(text):
                starts.append(start)
                values.append(value)
            self.counts["whole"] += 1
        else:
            a, b, delta, old = best
            i = bisect.bisect_left(old.starts, a)
            j = bisect.bisect_left(old.starts, b - delta)
            starts, values = old.starts[:i], old.values[:i]
            for start, value in find(text[a:b]):
                starts.append(a + start)
                values.append(value)
            starts += [s + delta for s in old.starts[j:]]
            values += old.values[j:]
            self.counts["reused"] += 1
            self.counts["rescanned"] += b - a
        self._remember(pattern, _Scan(text, starts, values))
        return list(values)

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


def _changed_lines(old: str, new: str) -> tuple[int, int, int]:
    """``(a, b, delta)``: ``new[a:b]`` are whole lines, everything before ``a`` is the same in
    ``old``, and everything from ``b`` on is ``old``'s from ``b - delta``, each part
    preceded by a newline (or the text's start) in both."""
    p = common_prefix(old, new)
    s = common_suffix(old, new, min(len(old), len(new)) - p)
    a = new.rfind("\n", 0, p) + 1  # the newline at a - 1 is in the common prefix
    q = len(new) - s
    nl = new.find("\n", q)  # at or after q: in the common suffix
    b = nl + 1 if nl >= 0 else len(new)
    return a, max(a, b), len(new) - len(old)
