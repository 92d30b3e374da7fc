"""``.if`` / ``.elif`` conditions, evaluated as far as they can be without running HAProxy.

HAProxy decides these at parse time with its own grammar: terms joined by ``&&`` (binding
tighter) and ``||``, ``!`` negation, parentheses, integers (``strtol`` base 0: ``0x1f``, ``017``,
``+1``) and predicates such as ``defined(NAME)`` or ``streq(a,b)``. Arguments are split at
commas up to the first ``)``; blanks inside them are kept (``streq(a, a)`` is false).

The result is three-valued: True, False, or None when the answer depends on the machine that
runs HAProxy (environment variables, build features, the TLS library) or on a version we were
not told. A None branch is parsed but marked ``conditional`` so that later stages stay quiet
about it. Syntax errors are reported only when we are sure HAProxy reports them too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from controller.validation.keywords import PREDICATES, PREDICATES_KNOWN_UNTIL, family

__all__ = ["ConditionResult", "compare_version", "evaluate"]

Tri = bool | None

_INTEGER = re.compile(r"[ \t\n\v\f\r]*[+-]?(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)")
_VERSION = re.compile(r"(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:-(dev|rc)\d*)?")
_CURRENT = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?(-dev|-rc)?")
_NAME = re.compile(r"[a-z][a-z0-9_]*")
_MAX_DEPTH = 1024


@dataclass(frozen=True, slots=True)
class ConditionResult:
    value: Tri
    error: str | None = None
    """Set only when HAProxy certainly refuses the condition."""
    offset: int = 0
    """Where in the condition text the error was found (0-based)."""


class _Refused(Exception):
    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.message = message
        self.offset = offset


class _Unknowable(Exception):
    """The text cannot be judged statically (quotes or escapes inside predicate arguments)."""


def evaluate(
    text: str, haproxy_version: str | None = None, *, any_version: bool = False
) -> ConditionResult:
    """Evaluate a condition as HAProxy would, given only the version of the binary.

    ``text`` is the condition as HAProxy sees it: the words after ``.if`` joined by one space.
    With ``any_version``, ``version_atleast()``/``version_before()`` stay undecided although
    the version is known: the same bytes may later be loaded by another HAProxy, so a branch
    this binary skips may well run there (the security checks read it that way).
    """
    if not text:
        return ConditionResult(False)  # HAProxy: an empty condition is false
    parser = _Parser(text, haproxy_version)
    parser.decide_versions = not any_version
    try:
        value = parser.expression(_MAX_DEPTH)
        parser.skip_blanks()
        if parser.pos < len(text):
            ch = text[parser.pos]
            raise _Refused(f"unexpected character {ch!r} after the condition", parser.pos)
    except _Refused as refused:
        return ConditionResult(None, refused.message, refused.offset)
    except (_Unknowable, RecursionError):  # (absurdly deep nesting: no verdict, no crash)
        return ConditionResult(None)
    return ConditionResult(value)


def compare_version(current: str, wanted: str) -> int | None:
    """-1, 0 or 1 as ``current`` is older than, equal to or newer than ``wanted``.

    None when either side is not a plain release number we can order with certainty (HAProxy
    has its own rules for odd strings; we do not guess them).
    """
    cur = _CURRENT.match(current)  # "2.8.25-5cf5d0683": a build suffix is still a release
    want = _VERSION.fullmatch(wanted)
    if not cur or not want or cur.group(4):
        return None
    c = tuple(int(g or 0) for g in cur.groups()[:3])
    w = tuple(int(g or 0) for g in want.groups()[:3])
    if c != w:
        return -1 if c < w else 1
    return 1 if want.group(4) else 0  # a release is newer than its own -dev/-rc


def tri_not(a: Tri) -> Tri:
    """Three-valued NOT: an undecided condition stays undecided."""
    return None if a is None else not a


def tri_and(a: Tri, b: Tri) -> Tri:
    """Three-valued AND: false wins over undecided, undecided over true."""
    if a is False or b is False:
        return False
    if a is None or b is None:
        return None
    return True


def tri_or(a: Tri, b: Tri) -> Tri:
    """Three-valued OR: true wins over undecided, undecided over false."""
    if a is True or b is True:
        return True
    if a is None or b is None:
        return None
    return False


class _Parser:
    def __init__(self, text: str, version: str | None) -> None:
        self.text = text
        self.pos = 0
        self.version = version
        self.family = family(version)
        self.decide_versions = True

    def skip_blanks(self) -> None:
        text, p = self.text, self.pos
        while p < len(text) and text[p] in " \t":
            p += 1
        self.pos = p

    def expression(self, depth: int) -> Tri:
        start = self.pos
        if start >= len(self.text) or depth <= 0:
            raise _Refused("unparsable conditional expression", start)
        value = self.conjunction(depth - 1)
        self.skip_blanks()
        if self.text.startswith("||", self.pos):
            self.pos += 2
            self.skip_blanks()
            value = tri_or(value, self.expression(depth - 1))
        return value

    def conjunction(self, depth: int) -> Tri:
        start = self.pos
        if start >= len(self.text) or depth <= 0:
            raise _Refused("unparsable conditional sub-expression", start)
        value = self.term(depth - 1)
        self.skip_blanks()
        if self.text.startswith("&&", self.pos):
            self.pos += 2
            self.skip_blanks()
            value = tri_and(value, self.conjunction(depth - 1))
        return value

    def term(self, depth: int) -> Tri:
        text = self.text
        self.skip_blanks()
        start = self.pos
        if start >= len(text) or depth <= 0:
            raise _Refused("unparsable conditional expression", start)
        negate = False
        while self.pos < len(text) and text[self.pos] == "!":
            negate = not negate
            self.pos += 1
            self.skip_blanks()
        value = self.atom(depth, start)
        if negate and value is not None:
            value = not value
        return value

    def atom(self, depth: int, start: int) -> Tri:
        text = self.text
        m = _INTEGER.match(text, self.pos)
        if m:
            self.pos = m.end()
            digits = m.group(1)
            base = 16 if digits[:2] in ("0x", "0X") else 8 if digits.startswith("0") else 10
            return int(digits, base) != 0
        if self.pos < len(text) and text[self.pos] == "(":
            self.pos += 1
            self.skip_blanks()
            if self.pos >= len(text):
                raise _Refused("unparsable conditional expression", start)
            value = self.expression(depth - 1)
            self.skip_blanks()
            if self.pos >= len(text) or text[self.pos] != ")":
                raise _Refused("expected ')' after conditional expression", start)
            self.pos += 1
            self.skip_blanks()
            return value
        return self.predicate(start)

    def predicate(self, start: int) -> Tri:
        text = self.text
        end = self.pos
        while end < len(text) and text[end] not in " (":
            end += 1
        name = text[self.pos : end]
        known = PREDICATES.get(name)
        if known is None and not _NAME.fullmatch(name):
            raise _Refused("unparsable conditional expression", start)
        if known is None:
            if self.family is None or self.family <= PREDICATES_KNOWN_UNTIL:
                raise _Refused(f"unknown predicate {name!r}", start)
            raise _Unknowable  # a HAProxy newer than our list may know it
        nargs, since = known
        if self.family is not None and self.family < since:
            raise _Refused(
                f"predicate {name!r} does not exist before HAProxy {since[0]}.{since[1]}", start
            )
        if end < len(text) and text[end] == "(":
            close = text.find(")", end)
            if close < 0:
                raise _Refused(f"expected ')' in the arguments of {name!r}", end)
            inner = text[end + 1 : close]
            if any(q in inner for q in "\"'\\"):
                raise _Unknowable  # HAProxy unquotes arguments with rules we do not replicate
            args = inner.split(",")
            self.pos = close + 1
        else:
            args = [""]  # HAProxy: no parentheses means one empty argument
            self.pos = end
        if len(args) < nargs:
            raise _Refused(f"missing arguments to {name!r} (got {len(args)}/{nargs})", end)
        if len(args) > nargs:
            raise _Refused(f"too many arguments to {name!r} (expected {nargs})", end)
        return self.judge(name, args)

    def judge(self, name: str, args: list[str]) -> Tri:
        if name == "streq":
            return args[0] == args[1]
        if name == "strneq":
            return args[0] != args[1]
        if name == "strstr":
            return args[1] in args[0]
        if name in ("version_atleast", "version_before") and self.version and self.decide_versions:
            order = compare_version(self.version, args[0])
            if order is None:
                return None
            return order >= 0 if name == "version_atleast" else order < 0
        return None  # environment, build features, TLS library: known only where HAProxy runs
